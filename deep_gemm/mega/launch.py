"""CUDA launchers of the SM90 FP8 Mega MoE layer (``fp8_mega_moe``) and its pre-dispatch, and of the BF16 and the
FP8 x FP4 layers (``bf16_mega_moe``, ``fp8_fp4_mega_moe``), at one rank; ``fp8_mega_moe`` also over several ranks
(``fp8_mega_moe_rank_phases``: four phases of launches between cross-rank barriers, through the symmetric buffer's
peer addresses; opt-in under the ``mega_ranks`` key of ``core/gpu_validation.py`` until its multi-GPU run).

The op's CUDA kernel calls these after the shared check; they return ``NotImplemented`` (the reference then runs)
where the kernels do not apply: not asked for (only while the family, or for the BF16 / FP8 x FP4 layer the
``mega_bf16`` / ``mega_fp8_fp4`` key, is listed in ``core/gpu_validation.py``), several ranks (the layer then
raises, see ``layer.py``; for ``fp8_mega_moe`` only while ``mega_ranks`` is listed and not asked for), a GPU without
FP8 MMAs (FP8) or other than sm_90 / sm_100 (BF16: TMA and 228 KB of shared memory; FP8 x FP4: the parts its kernels
are compile-checked for), or a buffer whose workspace cannot hold the kernels' arrays. ``bf16_mega_moe`` and
``fp8_fp4_mega_moe`` also decline the post-expert norm (``BF16_DECLINED`` / ``FP8_FP4_DECLINED``); their shared
experts run as one more dense L1 / L2 pair before the combine. The six launches of a layer (eight with shared
experts; ``kernels.py``, ``fp8_fp4_kernels.py``) run on the current stream with no host synchronisation, so a CUDA
graph can capture the call.
"""

from __future__ import annotations

from functools import lru_cache

import math

import torch

from ..core import arch, gpu_validation, scratch
from ..core.errors import fail, require
from ..core.launch import descriptor, launch
from ..utils.math import align
from ..utils.numeric import next_pow2
from . import buffer as _buffer
from . import plan as mega_plan

ROUTE_BLOCK = 1024
DISPATCH_BLOCK_H = 1024
COMBINE_BLOCK_H = 1024
# The forms of bf16_mega_moe the kernels leave to the reference (deep_gemm.backends() says so).
BF16_DECLINED = "reference with the post-expert norm, several ranks, or below sm_90 and on sm_120"
# Pool arrays carved from a per-stream workspace start on 128-byte boundaries (TMA needs 16).
_POOL_ALIGNMENT = 128
# TMA: a descriptor's base address is a multiple of 16 bytes.
_TMA_BASE_ALIGNMENT = 16


def _kernels():
    from . import kernels
    return kernels


def _fp8_fp4_kernels():
    from . import fp8_fp4_kernels
    return fp8_fp4_kernels


# Memoised here, not in buffer.py: the checks plan the buffer on symbolic sizes under torch.compile (unhashable),
# the launcher only ever on concrete ints.
@lru_cache(maxsize=64)
def _buffer_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter):
    return _buffer.plan_sm90_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter,
                                         True, "swiglu")


def _launch(kernel, grid, args, name, key, num_warps=4, num_stages=1, device_index=0):
    launch(kernel, grid, args, name=name, config_key=key, num_warps=num_warps, num_stages=num_stages,
           device_index=device_index)


def _launch_fp8_l1(k, views, l1, l1_sf, cfg, tiles, num_local, hidden, inter, e_pow2, activation_clamp, fast_math,
                   dev) -> None:
    """The FP8 layer's L1 over ``tiles`` M tiles of the pool (one rank and several ranks alike)."""
    bm, bn = cfg.block_m, mega_plan.BLOCK_N
    pool_sf, l2a, l2a_sf = views["l1_acts_sf"], views["l2_acts"], views["l2_acts_sf"]
    a1 = descriptor(views["l1_acts"], (views["l1_acts"].size(0), hidden), (hidden, 1), (bm, mega_plan.L1_BLOCK_K))
    b1 = descriptor(l1, (num_local * 2 * inter, hidden), (hidden, 1), (bn, mega_plan.L1_BLOCK_K))
    has_clamp = activation_clamp is not None and activation_clamp != float("inf")
    clamp = float(activation_clamp) if has_clamp else 0.0
    _launch(k._l1_kernel, (2 * inter // bn, tiles, 1),
            (a1, b1, pool_sf, l1_sf, views["tile_end"], views["ends"], views["l1_topk_weights"], l2a, l2a_sf,
             num_local, inter, hidden, l1_sf.stride(0), l1_sf.stride(1), pool_sf.stride(1), l2a.stride(0),
             l2a_sf.stride(1), clamp, bm, bn, mega_plan.L1_BLOCK_K, e_pow2, has_clamp, bool(fast_math),
             cfg.l1_stages),
            "mega_l1", (bm, e_pow2, has_clamp, bool(fast_math), cfg.l1_stages), num_warps=cfg.num_warps,
            num_stages=cfg.l1_stages, device_index=dev)


def _route_and_scan(k, views: dict, stats, rank_idx: int, num_local: int, num_tokens: int, num_topk: int, bm: int,
                    dev: int):
    """The first two launches of every one-rank layer: each slot's position in its expert's pool
    slice, then the slices' starts and ends padded to BLOCK_M, the M tiles and the received-token statistics.
    Returns (E_POW2, the rank's first expert, the buffer's topk_idx and topk_weights views)."""
    e_pow2 = next_pow2(max(num_local, 2))
    first = rank_idx * num_local
    has_stats = stats is not None
    stats_t = stats if has_stats else views["counts"]
    topk_idx, topk_w = views["topk_idx"], views["topk_weights"]
    num_slots = num_tokens * num_topk
    _launch(k._route_kernel, (-(-num_slots // ROUTE_BLOCK), 1, 1),
            (topk_idx, views["counts"], views["slot_pos"], num_slots, first, num_local, ROUTE_BLOCK),
            "mega_route", (ROUTE_BLOCK,), device_index=dev)
    _launch(k._scan_kernel, (1, 1, 1),
            (views["counts"], stats_t, views["starts"], views["ends"], views["tile_end"], num_local, bm, e_pow2,
             has_stats),
            "mega_scan", (bm, e_pow2, has_stats), device_index=dev)
    return e_pow2, first, topk_idx, topk_w


def fp8_mega_moe(y, l1, l1_sf, l2, l2_sf, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts,
                 num_topk, recipe, activation, activation_clamp, fast_math, *,
                 overrides: mega_plan.MegaOverrides = mega_plan.NO_OVERRIDES):
    """``overrides`` pins BLOCK_M and asks for the kernels (tests and sweeps; see core/gpu_validation.py)."""
    num_ranks = len(ptrs)
    sm = arch.sm_of_tensor(y)
    if num_ranks > 1:
        if not mega_plan.rank_kernels_wanted(overrides) or not arch.has_fp8_mma(sm):
            return NotImplemented
        run = fp8_mega_moe_rank_phases(y, l1, l1_sf, l2, l2_sf, stats, sym_buffer, ptrs, rank_idx,
                                       num_max_tokens_per_rank, num_experts, num_topk, recipe, activation,
                                       activation_clamp, fast_math, overrides=overrides)
        if run is NotImplemented:
            return NotImplemented
        run.run()
        return None
    if not mega_plan.kernels_wanted(overrides) or num_ranks != 1 or not arch.has_fp8_mma(sm):
        return NotImplemented
    num_tokens, hidden = y.shape
    num_local, inter = num_experts // num_ranks, l2.size(2)
    bplan = _buffer_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter)
    views = _buffer.sm90_kernel_views(sym_buffer, bplan, num_local, num_max_tokens_per_rank, num_topk)
    if views is None:
        return NotImplemented
    if num_tokens == 0:
        return None
    cfg = mega_plan.plan(num_tokens, num_topk, num_local, overrides, sm)
    bm = cfg.block_m
    pool = views["l1_acts"].size(0)
    tiles = mega_plan.max_m_tiles(num_tokens, num_topk, num_local, bm)
    if tiles * bm > pool:
        return NotImplemented  # (cannot happen for pools sized by plan_sm90_symm_buffer: BLOCK_M <= 192)
    k = _kernels()
    dev = y.device.index or 0
    e_pow2, first, topk_idx, topk_w = _route_and_scan(k, views, stats, rank_idx, num_local, num_tokens, num_topk,
                                                      bm, dev)
    pool_sf = views["l1_acts_sf"]
    sf_cols = hidden // 128
    _launch(k._dispatch_kernel, (num_tokens, 1, 1),
            (views["x"], views["x_sf"], topk_idx, topk_w, views["slot_pos"], views["starts"], views["l1_acts"],
             pool_sf, views["row_src"], views["l1_topk_weights"], first, num_local, hidden, hidden, hidden,
             sf_cols, pool_sf.stride(1), num_topk, next_pow2(num_topk), DISPATCH_BLOCK_H, next_pow2(sf_cols), True),
            "mega_dispatch", (num_topk, next_pow2(sf_cols), True), device_index=dev)

    bn = mega_plan.BLOCK_N
    l2a, l2a_sf = views["l2_acts"], views["l2_acts_sf"]
    _launch_fp8_l1(k, views, l1, l1_sf, cfg, tiles, num_local, hidden, inter, e_pow2, activation_clamp, fast_math,
                   dev)
    a2 = descriptor(l2a, (pool, inter), (inter, 1), (bm, mega_plan.L2_BLOCK_K))
    b2 = descriptor(l2, (num_local * hidden, inter), (inter, 1), (bn, mega_plan.L2_BLOCK_K))
    _launch(k._l2_kernel, (hidden // bn, tiles, 1),
            (a2, b2, l2a_sf, l2_sf, views["tile_end"], views["ends"], views["row_src"], views["combine"],
             num_local, inter, hidden, l2_sf.stride(0), l2_sf.stride(1), l2a_sf.stride(1), num_max_tokens_per_rank,
             bm, bn, mega_plan.L2_BLOCK_K, e_pow2, num_topk, cfg.l2_stages),
            "mega_l2", (bm, e_pow2, num_topk, cfg.l2_stages), num_warps=cfg.num_warps, num_stages=cfg.l2_stages,
            device_index=dev)
    _launch(k._combine_kernel, (num_tokens, -(-hidden // COMBINE_BLOCK_H), 1),
            (topk_idx, views["combine"], y, first, num_local, hidden, num_max_tokens_per_rank, y.stride(0),
             num_topk, COMBINE_BLOCK_H),
            "mega_combine", (num_topk,), device_index=dev)
    return None


# ---- several ranks -----------------------------------------------------------------------------------------------
# What deep_gemm.backends() says of fp8_mega_moe's ranks (true while mega_ranks awaits its multi-GPU run, and after).
RANKS_NOTE = ("one rank; several CUDA ranks: " +
              ("opt-in: NotImplementedError unless MegaOverrides(kernels=True) reaches the launcher, until their "
               "multi-GPU run" if not gpu_validation.kernels_by_default(mega_plan.RANKS_KEY)
               else "symmetric-memory kernels"))
# Polls of one barrier before it gives up (about ten seconds of NVLink round trips): a rank that never arrives
# sets the status word instead of hanging every other rank.
BARRIER_MAX_SPINS = 1 << 22
_PEER_TABLES: dict = {}


def peer_table(ptrs, device) -> torch.Tensor:
    """The ranks' buffer base addresses as an int64 tensor on ``device``, made once per (addresses, device): the
    first call of a buffer copies it there, later calls (and CUDA-graph captures after a first call) reuse it."""
    key = (tuple(int(p) for p in ptrs), str(device))
    table = _PEER_TABLES.get(key)
    if table is None:
        table = _PEER_TABLES[key] = torch.tensor(key[0], dtype=torch.int64, device=device)
    return table


def _offset(view: torch.Tensor, buffer: torch.Tensor) -> int:
    """Byte offset of ``view`` in ``buffer``: the same in every rank's buffer (one byte plan)."""
    return view.data_ptr() - buffer.data_ptr()


class RankLaunch:
    """One rank's share of a several-rank ``fp8_mega_moe`` call: ``phases`` (launches on the current stream) to run
    in order with ``barrier()`` between consecutive ones on every rank. ``run`` does exactly that; Triton's
    interpreter tests run the same phases rank by rank in one process, where running every rank's phase before any
    rank's next one stands in for the barrier."""

    def __init__(self, phases, barrier):
        self.phases, self.barrier = phases, barrier

    def run(self) -> None:
        for i, phase in enumerate(self.phases):
            if i:
                self.barrier()
            phase()


def rank_block_m(num_ranks: int, num_max_tokens_per_rank: int, num_topk: int, num_experts: int, overrides, sm: int):
    """The config of a several-rank call: every rank must pick the same BLOCK_M (the pool layouts are computed on
    every rank alike) and none knows the others' token counts, so it follows the token capacity."""
    return mega_plan.plan(num_ranks * num_max_tokens_per_rank, num_topk, num_experts, overrides, sm)


def fp8_mega_moe_rank_phases(y, l1, l1_sf, l2, l2_sf, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank,
                             num_experts, num_topk, recipe, activation, activation_clamp, fast_math, *,
                             overrides: mega_plan.MegaOverrides = mega_plan.NO_OVERRIDES,
                             max_spins: int = BARRIER_MAX_SPINS):
    """This rank's ``RankLaunch`` of ``fp8_mega_moe`` over ``len(ptrs)`` ranks, or ``NotImplemented`` where the
    kernels do not apply (a workspace too small for the arrays, more than 2**31 source ids). The protocol, four
    phases between three barriers:

    1. route (slots counted per global expert, each slot's position among this rank's slots of its expert), then
       this rank's counts row written into every rank's ``[R, E]`` receive table;
    2. scan (every destination's layout from the table: expert-major, then source-rank-major, expert slices padded
       to BLOCK_M; statistics of the tokens received), then dispatch (each slot's FP8 row, scales, top-k weight and
       source into its expert's rank's pool);
    3. L1 on the local pool, L2 writing each row into its source rank's combine area;
    4. the local combine over top-k (every slot of this rank's tokens, whichever rank computed it).
    """
    num_ranks = len(ptrs)
    sm = arch.sm_of_tensor(y)
    num_tokens, hidden = y.shape
    num_local, inter = num_experts // num_ranks, l2.size(2)
    if num_ranks > 30 or num_ranks * num_max_tokens_per_rank * num_topk >= 2 ** 31:
        return NotImplemented  # (the status word names up to 30 peers; source ids are int32)
    bplan = _buffer_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter)
    views = _buffer.sm90_kernel_views(sym_buffer, bplan, num_local, num_max_tokens_per_rank, num_topk, num_ranks)
    if views is None:
        return NotImplemented
    cfg = rank_block_m(num_ranks, num_max_tokens_per_rank, num_topk, num_experts, overrides, sm)
    bm = cfg.block_m
    pool = views["l1_acts"].size(0)
    # Without a token routed twice to one expert, a rank receives at most R * T * min(k, E_local) slots: the pool
    # holds their tiles (the scan flags a call needing more).
    tiles = min(mega_plan.max_m_tiles(num_ranks * num_max_tokens_per_rank, min(num_topk, num_local), num_local, bm),
                pool // bm)
    k = _kernels()
    dev = y.device.index or 0
    table = peer_table(ptrs, y.device)
    off = {name: _offset(views[name], sym_buffer) for name in ("signals", "recv_counts", "l1_acts", "l1_acts_sf",
                                                               "row_src", "l1_topk_weights", "combine")}
    e_pow2 = next_pow2(max(num_experts, 2))
    l_pow2 = next_pow2(max(num_local, 2))
    r_pow2 = next_pow2(max(num_ranks, 2))
    has_stats = stats is not None
    topk_idx, topk_w = views["topk_idx"], views["topk_weights"]
    num_slots = num_tokens * num_topk
    pool_sf = views["l1_acts_sf"]
    sf_cols = hidden // 128
    l2a, l2a_sf = views["l2_acts"], views["l2_acts_sf"]
    bn = mega_plan.BLOCK_N

    def barrier():
        _launch(k._barrier_kernel, (1, 1, 1),
                (table, off["signals"], views["signals"], views["epoch"], views["status"], rank_idx, num_ranks,
                 max_spins, r_pow2),
                "mega_barrier", (r_pow2,), num_warps=1, device_index=dev)

    def publish():
        if num_slots:
            _launch(k._route_kernel, (-(-num_slots // ROUTE_BLOCK), 1, 1),
                    (topk_idx, views["counts"], views["slot_pos"], num_slots, 0, num_experts, ROUTE_BLOCK),
                    "mega_route", (ROUTE_BLOCK,), device_index=dev)
        _launch(k._publish_counts_kernel, (1, 1, 1),
                (views["counts"], table, off["recv_counts"], rank_idx, num_ranks, num_experts, e_pow2),
                "mega_publish_counts", (e_pow2,), device_index=dev)

    def dispatch():
        _launch(k._scan_ranks_kernel, (1, 1, 1),
                (views["recv_counts"], stats if has_stats else views["counts"], views["send_base"], views["starts"],
                 views["ends"], views["tile_end"], views["overflow"], views["status"], rank_idx, num_ranks,
                 num_local, tiles, bm, r_pow2, l_pow2, has_stats),
                "mega_scan_ranks", (bm, r_pow2, l_pow2, has_stats), device_index=dev)
        if num_tokens:
            _launch(k._dispatch_ranks_kernel, (num_tokens, 1, 1),
                    (views["x"], views["x_sf"], topk_idx, topk_w, views["slot_pos"], views["send_base"],
                     views["overflow"], table, views["combine"], off["l1_acts"], off["l1_acts_sf"], off["row_src"],
                     off["l1_topk_weights"], rank_idx, num_local, hidden, sf_cols, pool_sf.stride(1),
                     num_max_tokens_per_rank, num_topk, next_pow2(num_topk), DISPATCH_BLOCK_H, next_pow2(sf_cols)),
                    "mega_dispatch_ranks", (num_topk, next_pow2(sf_cols)), device_index=dev)

    def experts():
        _launch_fp8_l1(k, views, l1, l1_sf, cfg, tiles, num_local, hidden, inter, l_pow2, activation_clamp,
                       fast_math, dev)
        a2 = descriptor(l2a, (pool, inter), (inter, 1), (bm, mega_plan.L2_BLOCK_K))
        b2 = descriptor(l2, (num_local * hidden, inter), (inter, 1), (bn, mega_plan.L2_BLOCK_K))
        _launch(k._l2_ranks_kernel, (hidden // bn, tiles, 1),
                (a2, b2, l2a_sf, l2_sf, views["tile_end"], views["ends"], views["row_src"], table, off["combine"],
                 num_local, inter, hidden, l2_sf.stride(0), l2_sf.stride(1), l2a_sf.stride(1),
                 num_max_tokens_per_rank, bm, bn, mega_plan.L2_BLOCK_K, l_pow2, num_topk, cfg.l2_stages),
                "mega_l2_ranks", (bm, l_pow2, num_topk, cfg.l2_stages), num_warps=cfg.num_warps,
                num_stages=cfg.l2_stages, device_index=dev)

    def combine():
        if num_tokens:  # (every expert id counts: first expert 0, all experts)
            _launch(k._combine_kernel, (num_tokens, -(-hidden // COMBINE_BLOCK_H), 1),
                    (topk_idx, views["combine"], y, 0, num_experts, hidden, num_max_tokens_per_rank, y.stride(0),
                     num_topk, COMBINE_BLOCK_H),
                    "mega_combine", (num_topk,), device_index=dev)

    return RankLaunch((publish, dispatch, experts, combine), barrier)


def rank_status_error(status: int, rank_idx: int):
    """The message for a non-zero ``status`` word of rank ``rank_idx`` (None when zero)."""
    if not status:
        return None
    parts = []
    late = [r for r in range(30) if status >> r & 1]
    if late:
        parts.append(f"a cross-rank barrier gave up waiting for rank(s) {late}")
    if status & _buffer.STATUS_OVERFLOW:
        parts.append("a call routed more slots to one rank than its pool holds (a token routed twice to one "
                     "expert?); its outputs are NaN")
    return f"fp8_mega_moe: rank {rank_idx}: " + "; ".join(parts) + " (results since are void; rebuild the buffer)"



def check_status(sym_buffer) -> None:
    """Raise ``DeepGEMMError`` naming the rank when a several-rank call on ``sym_buffer`` (an ``SM90SymmBuffer``)
    flagged an error: a barrier that timed out, a pool overflow. Reads one word (synchronises the stream): call it
    after a call, outside CUDA-graph capture."""
    num_ranks = sym_buffer.num_ranks
    require(num_ranks > 1, "sym_buffer: the status word exists for several ranks only")
    bplan = _buffer_plan(num_ranks, sym_buffer.num_experts, sym_buffer.num_max_tokens_per_rank, sym_buffer.num_topk,
                         sym_buffer.hidden, sym_buffer.intermediate_hidden)
    views = _buffer.sm90_kernel_views(sym_buffer.buffer, bplan, sym_buffer.num_experts // num_ranks,
                                      sym_buffer.num_max_tokens_per_rank, sym_buffer.num_topk, num_ranks)
    message = rank_status_error(int(views["status"].item()), sym_buffer.rank_idx)
    if message:
        fail(message)


@lru_cache(maxsize=64)
def _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter, num_ring_tokens,
               mma_type="bf16xbf16"):
    return _buffer.plan_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter,
                                    mma_type, "swiglu", num_ring_tokens)


def _from_workspace(y, arrays) -> dict:
    """Views of one per-stream workspace (``core/scratch.py``) for ``arrays``: (name, dtype, shape) each, every one
    starting on a ``_POOL_ALIGNMENT`` boundary."""
    offsets, cursor = [], 0
    for _, dtype, shape in arrays:
        offsets.append(cursor)
        cursor = align(cursor + math.prod(shape) * dtype.itemsize, _POOL_ALIGNMENT)
    raw = scratch.stream_workspace(y, max(cursor, 4) // 4).view(torch.int8)
    return {name: raw.narrow(0, off, math.prod(shape) * dtype.itemsize).view(dtype).view(shape)
            for (name, dtype, shape), off in zip(arrays, offsets)}


def bf16_mega_moe(y, l1, l2, shared_l1, shared_l2, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank,
                  num_experts, num_topk, activation, activation_clamp, fast_math, post_expert_norm,
                  post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first, use_trtllm_weights,
                  global_num_tokens, num_ring_tokens, *,
                  overrides: mega_plan.MegaOverrides = mega_plan.NO_OVERRIDES):
    """The BF16 layer at one rank; ``global_num_tokens`` only steers DeepGEMM's tile choice (the result does not
    depend on it), so it is accepted and unused. See the module docstring for what declines."""
    num_ranks = len(ptrs)
    sm = arch.sm_of_tensor(y)
    # (sm90_occupancy: the GEMMs' pipelines take up to 131 KB of shared memory, which only the 228 KB parts hold)
    if (not mega_plan.bf16_kernels_wanted(overrides) or num_ranks != 1 or not arch.has_tma(sm)
            or not arch.sm90_occupancy(sm) or post_expert_norm or use_trtllm_weights):
        return NotImplemented
    weights = (l1, l2) if shared_l1 is None else (l1, l2, shared_l1, shared_l2)
    if any(w.data_ptr() % _TMA_BASE_ALIGNMENT for w in weights):
        return NotImplemented  # (views at odd offsets; allocations are aligned)
    num_tokens, hidden = y.shape
    num_local, inter = num_experts // num_ranks, l2.size(2)
    cfg = mega_plan.plan_bf16(num_tokens, num_topk, num_local, overrides)
    bm = cfg.block_m
    rows = mega_plan.pool_rows_needed(num_tokens, num_topk, num_local, bm)
    bplan = _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter, num_ring_tokens)
    views = _buffer.ring_kernel_views(sym_buffer, bplan, num_local, num_max_tokens_per_rank, num_topk, rows)
    if views is None:
        return NotImplemented
    if num_tokens == 0:
        return None
    arrays = []
    if views["l1_acts"] is None:
        arrays += [("l1_acts", torch.bfloat16, (rows, hidden)), ("l2_acts", torch.bfloat16, (rows, inter)),
                   ("l1_topk_weights", torch.float32, (rows,)), ("row_src", torch.int32, (rows,))]
    shared_inter = 0 if shared_l1 is None else shared_l2.size(1)
    dense_tiles = -(-num_tokens // cfg.block_m)
    if shared_inter:  # the shared experts' intermediate (whole tiles: TMA reads them) and BF16 output
        arrays += [("shared_acts", torch.bfloat16, (dense_tiles * cfg.block_m, shared_inter)),
                   ("shared_out", torch.bfloat16, (num_tokens, hidden))]
    if arrays:
        views.update(_from_workspace(y, arrays))
    k = _kernels()
    dev = y.device.index or 0
    pool, l2a = views["l1_acts"], views["l2_acts"]
    tiles = rows // bm
    e_pow2, first, topk_idx, topk_w = _route_and_scan(k, views, stats, rank_idx, num_local, num_tokens, num_topk,
                                                      bm, dev)
    # (no scales: the scale pointers are unused; the row weights stand in for them)
    _launch(k._dispatch_kernel, (num_tokens, 1, 1),
            (views["x"], views["l1_topk_weights"], topk_idx, topk_w, views["slot_pos"], views["starts"], pool,
             views["l1_topk_weights"], views["row_src"], views["l1_topk_weights"], first, num_local, hidden, hidden,
             hidden, 0, 0, num_topk, next_pow2(num_topk), DISPATCH_BLOCK_H, 1, False),
            "mega_dispatch", (num_topk, 1, False), device_index=dev)

    bn, bk = mega_plan.BLOCK_N, mega_plan.BF16_BLOCK_K
    a1 = descriptor(pool, (pool.size(0), hidden), (hidden, 1), (bm, bk))
    b1 = descriptor(l1, (num_local * 2 * inter, hidden), (hidden, 1), (bn, bk))
    has_clamp = activation_clamp is not None and activation_clamp != float("inf")
    clamp = float(activation_clamp) if has_clamp else 0.0
    l1_launch = dict(name="mega_bf16_l1", num_warps=cfg.num_warps, num_stages=cfg.l1_stages, device_index=dev)
    l2_launch = dict(name="mega_bf16_l2", num_warps=cfg.num_warps, num_stages=cfg.l2_stages, device_index=dev)
    _launch(k._bf16_l1_kernel, (2 * inter // bn, tiles, 1),
            (a1, b1, views["tile_end"], views["ends"], views["l1_topk_weights"], l2a, num_local, inter, hidden,
             l2a.stride(0), 0, clamp, bm, bn, bk, e_pow2, has_clamp, bool(fast_math), cfg.l1_stages, False),
            key=(bm, e_pow2, has_clamp, bool(fast_math), cfg.l1_stages, False), **l1_launch)
    a2 = descriptor(l2a, (l2a.size(0), inter), (inter, 1), (bm, bk))
    b2 = descriptor(l2, (num_local * hidden, inter), (inter, 1), (bn, bk))
    _launch(k._bf16_l2_kernel, (hidden // bn, tiles, 1),
            (a2, b2, views["tile_end"], views["ends"], views["row_src"], views["combine"], num_local, inter, hidden,
             num_max_tokens_per_rank, 0, bm, bn, bk, e_pow2, num_topk, cfg.l2_stages, False),
            key=(bm, e_pow2, num_topk, cfg.l2_stages, False), **l2_launch)
    if not shared_inter:
        _combine(k, views, y, None, topk_idx, first, num_local, num_max_tokens_per_rank, num_topk, dev)
        return None
    # The shared experts: one dense L1 / L2 over the token rows (x itself is the A operand), then the combine adds
    # their output after the routed slots.
    x, s_acts, s_out = views["x"], views["shared_acts"], views["shared_out"]
    a1 = descriptor(x, (x.size(0), hidden), (hidden, 1), (bm, bk))
    b1 = descriptor(shared_l1, (2 * shared_inter, hidden), (hidden, 1), (bn, bk))
    _launch(k._bf16_l1_kernel, (2 * shared_inter // bn, dense_tiles, 1),
            (a1, b1, views["tile_end"], views["ends"], views["l1_topk_weights"], s_acts, num_local, shared_inter,
             hidden, s_acts.stride(0), num_tokens, clamp, bm, bn, bk, e_pow2, has_clamp, bool(fast_math),
             cfg.l1_stages, True),
            key=(bm, e_pow2, has_clamp, bool(fast_math), cfg.l1_stages, True), **l1_launch)
    a2 = descriptor(s_acts, (s_acts.size(0), shared_inter), (shared_inter, 1), (bm, bk))
    b2 = descriptor(shared_l2, (hidden, shared_inter), (shared_inter, 1), (bn, bk))
    _launch(k._bf16_l2_kernel, (hidden // bn, dense_tiles, 1),
            (a2, b2, views["tile_end"], views["ends"], views["row_src"], s_out, num_local, shared_inter, hidden,
             num_max_tokens_per_rank, num_tokens, bm, bn, bk, e_pow2, num_topk, cfg.l2_stages, True),
            key=(bm, e_pow2, num_topk, cfg.l2_stages, True), **l2_launch)
    _combine(k, views, y, s_out, topk_idx, first, num_local, num_max_tokens_per_rank, num_topk, dev)
    return None


def _combine(k, views, y, shared_out, topk_idx, first, num_local, num_max_tokens_per_rank, num_topk, dev) -> None:
    """The last launch of a one-rank ring layer: each token's routed slots summed into ``y``, plus the shared
    experts' BF16 output ``[T, hidden]`` when there is one."""
    num_tokens, hidden = y.shape
    grid = (num_tokens, -(-hidden // COMBINE_BLOCK_H), 1)
    ints = (first, num_local, hidden, num_max_tokens_per_rank, y.stride(0), num_topk, COMBINE_BLOCK_H)
    if shared_out is None:
        _launch(k._combine_kernel, grid, (topk_idx, views["combine"], y, *ints), "mega_combine", (num_topk,),
                device_index=dev)
    else:
        _launch(k._combine_shared_kernel, grid, (topk_idx, views["combine"], shared_out, y, *ints),
                "mega_combine_shared", (num_topk,), device_index=dev)


def pre_dispatch_sm90(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                      group_size, routed_scaling_factor, *,
                      overrides: mega_plan.MegaOverrides = mega_plan.NO_OVERRIDES):
    if not mega_plan.kernels_wanted(overrides) or not arch.has_fp8_mma(arch.sm_of_tensor(buf_x)):
        return NotImplemented
    capacity, hidden = buf_x.shape
    for t in (buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights):
        if not t.is_contiguous():
            return NotImplemented  # (buffer views are; anything else takes the reference)
    if x.stride(-1) != 1 or topk_idx.stride(-1) != 1 or topk_weights.stride(-1) != 1:
        return NotImplemented
    if capacity == 0:
        return None
    num_topk = topk_idx.size(1)
    groups = hidden // group_size
    k = _kernels()
    _launch(k._pre_dispatch_kernel, (capacity, 1, 1),
            (x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens, hidden,
             x.stride(0), topk_idx.stride(0), topk_weights.stride(0), float(routed_scaling_factor), num_topk,
             next_pow2(num_topk), next_pow2(groups), group_size),
            "mega_pre_dispatch", (num_topk, next_pow2(groups), group_size, topk_idx.dtype),
            device_index=buf_x.device.index or 0)
    return None


# ---- the FP8 x FP4 layer ------------------------------------------------------------------------------------------
# The forms of fp8_fp4_mega_moe the kernels leave to the reference (deep_gemm.backends() says so).
FP8_FP4_DECLINED = "reference with the post-expert norm, several ranks, or below sm_90 and on sm_120"
_UE8M0_WORD_COLUMNS = 128  # K columns per packed UE8M0 int32 (4 exponent bytes, one per 32)


def _mn_major_scales(views: dict, name: str) -> None:
    """``views[name + '_t']`` (a workspace array ``[words, rows]``) as ``views[name]``: ``[rows, words]`` with
    strides ``(1, rows)``, the buffer's MN-major scale layout."""
    views[name] = views.pop(name + "_t").t()


def _expert_stride(t: torch.Tensor) -> int:
    """The stride between experts of routed weights ``[E, ...]``; 0 for one shared matrix (its kernels read no
    expert index)."""
    return t.stride(0) if t.dim() == 3 else 0


def _scale_bytes(sf: torch.Tensor) -> tuple[torch.Tensor, int]:
    """An MN-major packed UE8M0 view ``[rows, words]`` (strides ``(1, R)``) as the bytes the L1 epilogue stores:
    (uint8 ``[words, 4 R]``, its word-column stride in bytes)."""
    as_bytes = sf.t().view(torch.uint8)
    return as_bytes, as_bytes.stride(0)


def fp8_fp4_mega_moe(y, l1, l1_sf, l2, l2_sf, shared_l1, shared_l1_sf, shared_l2, shared_l2_sf, stats, sym_buffer,
                     ptrs, rank_idx, num_max_tokens_per_rank, num_experts, num_topk, recipe, mma_type, activation,
                     activation_clamp, fast_math, use_x_scales, l1_alphas, l2_alphas, l2_act_scales, post_expert_norm,
                     post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first,
                     use_trtllm_weights, global_num_tokens, num_ring_tokens, *,
                     overrides: mega_plan.MegaOverrides = mega_plan.NO_OVERRIDES):
    """The FP8 x FP4 (or FP8) layer at one rank (``fp8_fp4_kernels.py``): route, scan, dispatch, L1, L2, combine
    (with shared experts one more dense L1 / L2 pair before a combine that adds them). ``global_num_tokens`` only
    steers DeepGEMM's tile choice, so it is accepted and unused. Declines (``NotImplemented``: the reference runs)
    what ``FP8_FP4_DECLINED`` names (and, should the ``mega_fp8_fp4`` key await a GPU run, unless asked for)."""
    num_ranks = len(ptrs)
    sm = arch.sm_of_tensor(y)
    # (sm90_occupancy: sm_90 / sm_100, the parts the kernels are compile-checked for and tuned to)
    if (not mega_plan.fp8_fp4_kernels_wanted(overrides) or num_ranks != 1 or not arch.sm90_occupancy(sm)
            or post_expert_norm or use_trtllm_weights):
        return NotImplemented
    num_tokens, hidden = y.shape
    num_local, inter = num_experts, l2_sf.size(2) * _UE8M0_WORD_COLUMNS
    cfg = mega_plan.plan_fp8_fp4(num_tokens, num_topk, num_local, overrides, sm)
    bm, bn, bk = cfg.block_m, cfg.block_n, mega_plan.FP8_FP4_BLOCK_K
    rows = mega_plan.pool_rows_needed(num_tokens, num_topk, num_local, bm)
    bplan = _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter, num_ring_tokens,
                       "fp8xfp4")
    views = _buffer.ring_kernel_views(sym_buffer, bplan, num_local, num_max_tokens_per_rank, num_topk, rows)
    if views is None:
        return NotImplemented
    if num_tokens == 0:
        return None
    fp8, i32 = torch.float8_e4m3fn, torch.int32
    h_words, i_words = hidden // _UE8M0_WORD_COLUMNS, inter // _UE8M0_WORD_COLUMNS
    arrays = []
    if views["l1_acts"] is None:  # the pool and its scales in the per-stream workspace
        arrays += [("l1_acts", fp8, (rows, hidden)), ("l2_acts", fp8, (rows, inter)),
                   ("l1_topk_weights", torch.float32, (rows,)), ("row_src", i32, (rows,)),
                   ("l1_acts_sf_t", i32, (h_words, rows)), ("l2_acts_sf_t", i32, (i_words, rows))]
    shared_inter = 0 if shared_l1 is None else shared_l2_sf.size(1) * _UE8M0_WORD_COLUMNS
    if shared_inter:  # the shared experts' intermediate, its scales and their BF16 output
        arrays += [("shared_acts", fp8, (num_tokens, shared_inter)),
                   ("shared_acts_sf_t", i32, (shared_inter // _UE8M0_WORD_COLUMNS, num_tokens)),
                   ("shared_out", torch.bfloat16, (num_tokens, hidden))]
    if arrays:
        views.update(_from_workspace(y, arrays))
        for name in ("l1_acts_sf", "l2_acts_sf", "shared_acts_sf"):
            if name + "_t" in views:
                _mn_major_scales(views, name)
    k, f = _kernels(), _fp8_fp4_kernels()
    dev = y.device.index or 0
    e_pow2, first, topk_idx, topk_w = _route_and_scan(k, views, stats, rank_idx, num_local, num_tokens, num_topk,
                                                      bm, dev)
    pool, pool_sf, l2a, l2a_sf = views["l1_acts"], views["l1_acts_sf"], views["l2_acts"], views["l2_acts_sf"]
    sf_pow2 = next_pow2(h_words)
    _launch(k._dispatch_kernel, (num_tokens, 1, 1),
            (views["x"], views["x_sf"], topk_idx, topk_w, views["slot_pos"], views["starts"], pool, pool_sf,
             views["row_src"], views["l1_topk_weights"], first, num_local, hidden, hidden, hidden, h_words,
             pool_sf.stride(1), num_topk, next_pow2(num_topk), DISPATCH_BLOCK_H, sf_pow2, True),
            "mega_dispatch", (num_topk, sf_pow2, True, torch.int32), device_index=dev)

    has_clamp = activation_clamp is not None and activation_clamp != float("inf")
    clamp = float(activation_clamp) if has_clamp else 0.0
    l1_launch = dict(name="mega_fp8_fp4_l1", num_warps=cfg.num_warps, num_stages=cfg.l1_stages, device_index=dev)
    l2_launch = dict(name="mega_fp8_fp4_l2", num_warps=cfg.num_warps, num_stages=cfg.l2_stages, device_index=dev)
    u8 = torch.uint8

    def l1_gemm(a, a_sf, w, w_sf, acts, acts_sf, grid_m, dense_rows, width, dense):
        fp4 = w.dtype == torch.int8
        sf_bytes, stride_sf_bytes = _scale_bytes(acts_sf)
        _launch(f._fp8_fp4_l1_kernel, (2 * width // bn, grid_m, 1),
                (a.view(u8), a_sf, w.view(u8), w_sf, views["tile_end"], views["ends"], views["l1_topk_weights"],
                 acts, sf_bytes, num_local, width, hidden, a_sf.stride(0), a_sf.stride(1),
                 _expert_stride(w), _expert_stride(w_sf), acts.stride(0),
                 stride_sf_bytes, dense_rows, clamp, bm, bn, bk, e_pow2, fp4, has_clamp, bool(fast_math),
                 cfg.l1_stages, dense),
                key=(bm, bn, e_pow2, fp4, has_clamp, bool(fast_math), cfg.l1_stages, dense), **l1_launch)

    def l2_gemm(acts, acts_sf, w, w_sf, out, grid_m, dense_rows, width, dense):
        fp4 = w.dtype == torch.int8
        _launch(f._fp8_fp4_l2_kernel, (hidden // bn, grid_m, 1),
                (acts.view(u8), acts_sf, w.view(u8), w_sf, views["tile_end"], views["ends"], views["row_src"], out,
                 num_local, width, hidden, acts_sf.stride(1), _expert_stride(w),
                 _expert_stride(w_sf), num_max_tokens_per_rank, dense_rows, bm, bn, bk, e_pow2,
                 num_topk, fp4, cfg.l2_stages, dense),
                key=(bm, bn, e_pow2, num_topk, fp4, cfg.l2_stages, dense), **l2_launch)

    tiles = rows // bm
    l1_gemm(pool, pool_sf, l1, l1_sf, l2a, l2a_sf, tiles, 0, inter, False)
    l2_gemm(l2a, l2a_sf, l2, l2_sf, views["combine"], tiles, 0, inter, False)
    if not shared_inter:
        _combine(k, views, y, None, topk_idx, first, num_local, num_max_tokens_per_rank, num_topk, dev)
        return None
    # The shared experts: one dense L1 / L2 over the token rows (x and its K-major scales are the A operand).
    dense_tiles = -(-num_tokens // bm)
    s_acts, s_acts_sf, s_out = views["shared_acts"], views["shared_acts_sf"], views["shared_out"]
    l1_gemm(views["x"], views["x_sf"], shared_l1, shared_l1_sf, s_acts, s_acts_sf, dense_tiles, num_tokens,
            shared_inter, True)
    l2_gemm(s_acts, s_acts_sf, shared_l2, shared_l2_sf, s_out, dense_tiles, num_tokens, shared_inter, True)
    _combine(k, views, y, s_out, topk_idx, first, num_local, num_max_tokens_per_rank, num_topk, dev)
    return None
