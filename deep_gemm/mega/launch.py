"""CUDA launchers of the SM90 FP8 Mega MoE layer (``fp8_mega_moe``) and its pre-dispatch, at one rank.

The op's CUDA kernel calls these after the shared check; they return ``NotImplemented`` (the reference then runs)
where the kernels do not apply: not asked for (only while the family is listed in ``core/gpu_validation.py``), several
ranks (the layer then raises, see ``layer.py``), a GPU without FP8 MMAs, or a buffer whose workspace cannot hold the
kernels' arrays. The six launches of the layer (``kernels.py``) run on the
current stream with no host synchronisation, so a CUDA graph can capture the call.
"""

from __future__ import annotations

from functools import lru_cache

from ..core import arch
from ..core.launch import descriptor, launch
from ..utils.numeric import next_pow2
from . import buffer as _buffer
from . import plan as mega_plan

ROUTE_BLOCK = 1024
DISPATCH_BLOCK_H = 1024
COMBINE_BLOCK_H = 1024


def _kernels():
    from . import kernels
    return kernels


# Memoised here, not in buffer.py: the checks plan the buffer on symbolic sizes under torch.compile (unhashable),
# the launcher only ever on concrete ints.
@lru_cache(maxsize=64)
def _buffer_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter):
    return _buffer.plan_sm90_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter,
                                         True, "swiglu")


def _launch(kernel, grid, args, name, key, num_warps=4, num_stages=1, device_index=0):
    launch(kernel, grid, args, name=name, config_key=key, num_warps=num_warps, num_stages=num_stages,
           device_index=device_index)


def fp8_mega_moe(y, l1, l1_sf, l2, l2_sf, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts,
                 num_topk, recipe, activation, activation_clamp, fast_math, *,
                 overrides: mega_plan.MegaOverrides = mega_plan.NO_OVERRIDES):
    """``overrides`` pins BLOCK_M and asks for the kernels (tests and sweeps; see core/gpu_validation.py)."""
    num_ranks = len(ptrs)
    if not mega_plan.kernels_wanted(overrides) or num_ranks != 1 or not arch.has_fp8_mma(arch.sm_of_tensor(y)):
        return NotImplemented
    num_tokens, hidden = y.shape
    num_local, inter = num_experts // num_ranks, l2.size(2)
    bplan = _buffer_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter)
    views = _buffer.sm90_kernel_views(sym_buffer, bplan, num_local, num_max_tokens_per_rank, num_topk)
    if views is None:
        return NotImplemented
    if num_tokens == 0:
        return None
    cfg = mega_plan.plan(num_tokens, num_topk, num_local, overrides)
    bm = cfg.block_m
    pool = views["l1_acts"].size(0)
    tiles = mega_plan.max_m_tiles(num_tokens, num_topk, num_local, bm)
    if tiles * bm > pool:
        return NotImplemented  # (cannot happen for pools sized by plan_sm90_symm_buffer: BLOCK_M <= 192)
    k = _kernels()
    dev = y.device.index or 0
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
    pool_sf = views["l1_acts_sf"]
    sf_cols = hidden // 128
    _launch(k._dispatch_kernel, (num_tokens, 1, 1),
            (views["x"], views["x_sf"], topk_idx, topk_w, views["slot_pos"], views["starts"], views["l1_acts"],
             pool_sf, views["row_src"], views["l1_topk_weights"], first, num_local, hidden, hidden, hidden,
             sf_cols, pool_sf.stride(1), num_topk, next_pow2(num_topk), DISPATCH_BLOCK_H, next_pow2(sf_cols)),
            "mega_dispatch", (num_topk, next_pow2(sf_cols)), device_index=dev)

    bn = mega_plan.BLOCK_N
    l2a, l2a_sf = views["l2_acts"], views["l2_acts_sf"]
    a1 = descriptor(views["l1_acts"], (pool, hidden), (hidden, 1), (bm, mega_plan.L1_BLOCK_K))
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
