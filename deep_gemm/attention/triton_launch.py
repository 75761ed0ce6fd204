"""CUDA launchers of the MQA-logits ops (DeepSeek V3.2 indexer): allocate the output as DeepGEMM does, pick a config,
launch the kernels of ``attention/kernels.py``. Every argument combination the checks accept is covered (FP4
included); nothing here reads a device tensor on the host, so every call is CUDA-graph capturable.

The MQA-logits kernels take FP8 (or packed FP4) operands: on devices without FP8 MMAs (below sm_89,
``deep_gemm.arch``) those launchers decline and the reference runs; the warp-specialised prefill kernel (opt-in)
runs on sm_90a devices only. The paged schedule (metadata) kernel runs from sm_80 on.

Importing this module does not import Triton (the kernels are imported at the first launch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import arch
from .._triton.launch import compiled_kernel, descriptor, interpreting, launch, programs_per_sm
from ..utils.math import ceil_div
from . import reference as ref
from .checks import FP4_PACKED, MMA_TILE_ROWS, kv_cache_token_bytes
from .reference import SPLIT_KV

# Columns of a score tile: (query, head) pairs (DeepGEMM's BLOCK_Q * H = 128).
SCORE_COLS = MMA_TILE_ROWS
# The smallest N a tensor-core dot takes: with few heads and one query row per sequence, rows are padded to it.
MIN_DOT_N = 16
# TMA needs 16-byte aligned global addresses and strides.
TMA_ALIGN = 16
# Clean pass: columns per store step, warps, and how rows are cut into parts: parts of at least CLEAN_MIN_PART
# columns, enough of them for CLEAN_PROGRAMS_PER_SM programs per SM when rows are few.
CLEAN_BLOCK = 1024
CLEAN_WARPS = 4
CLEAN_MIN_PART = 8192
CLEAN_PROGRAMS_PER_SM = 8
# Whole blocks of the clean pass in 16-byte stores where the output's alignment allows. H200, one process
# (research/results/2026-12-03-h200-s30-call4/README.md): 8192 x 65536 context-parallel windows 547.7 -> 259.7 us
# (1961 -> 4135 GB/s of out-of-window logits; torch's fill_ of the whole output 4602 GB/s), the 2048-query causal
# rows 4.35 -> 3.60 us; wider blocks and 8 warps were slower.
CLEAN_VECTOR_STORES = True
# Schedule kernel: sequences per step of its two passes, and the SM counts it covers (a [SMs, CHUNK] compare per
# step); larger num_sms values run the reference.
SCHEDULE_CHUNK = 16
SCHEDULE_MAX_SMS = 1024
# Paged kernel: tokens per program (the work of one program is these tokens of one sequence's rows); the grid's
# second axis counts these chunks, so it is widened when max_context_len would exceed the grid limit.
PAGED_TOKENS_PER_PROGRAM = 512
GRID_Y_LIMIT = 65535


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@dataclass(frozen=True)
class PrefillConfig:
    """Tile of the prefill kernel: BLOCK_KV keys per step, warps, pipeline stages, and the (query, head) columns of
    a program (128: 128 / H queries, DeepGEMM's block; 256 halves the KV traffic through L2 per FLOP).

    Instruction levers (the kernel is issue-bound, see _fp8_mqa_logits_kernel): ``fma_relu`` moves the relu to the
    FMA pipe (same products), ``interior`` runs the blocks inside every window without per-key tests,
    ``max_registers`` caps ptxas (144 registers at 4 warps allow 3 programs per SM; 128 allow 4),
    ``lean_interior`` (with ``interior``) runs the interior loop with fewer registers live across it and the key
    scales prefetched into registers (kernels._prefill_interior; the same bits; False: the loop before it, kept for
    in-process A/B).

    ``ws=True``: the warp-specialised Gluon kernel (attention/prefill_ws.py: a TMA producer warp, ``ws_consumers``
    math warpgroups taking alternate 64-key blocks, one persistent CTA per SM, a ring of ``num_stages`` KV stages
    rounded up to a multiple of ``ws_consumers``; ``fma_relu`` applies, ``interior`` is built in) wherever it covers
    the call (``prefill_ws_covers``: FP8, TMA-aligned Q and KV, 64-key blocks, 128 score columns, D 32/64/128, not
    in the interpreter); elsewhere the ``tl.*`` kernel runs with the other fields, as the BF16 plan treats a forced
    WS kernel it does not cover. Opt-in: slower than the default on the H200 (see PREFILL_MAX_REGISTERS)."""

    block_kv: int = 64
    num_warps: int = 4
    num_stages: int = 4
    score_cols: int = SCORE_COLS
    fma_relu: bool = False
    interior: bool = False
    max_registers: int | None = None
    lean_interior: bool = True
    ws: bool = False
    ws_consumers: int = 2


@dataclass(frozen=True)
class PagedConfig:
    """The paged kernel and its tile. ``persistent=True`` (the default): ``programs_per_sm`` programs per row of the
    schedule (``schedule_meta``) walk its equal shares of the work, ``num_stages`` pipeline stages over pages
    (``tokens_per_program`` unused). ``persistent=False``: the grid kernel, one program per ``tokens_per_program``
    tokens of one sequence's rows, the schedule unused. Passed as the launchers' ``config=`` so one process can time
    both.

    Register levers of the persistent kernel (issue 17: at 168 registers per thread only 3 programs of 4 warps fit
    an SM; the compiled counts, sm_90a, are in ``scripts/compile_check_indexer.py --only-persistent``):
    ``aligned_q_loads`` loads Q in 16-byte vectors when its address allows (the byte-wise load of the 128 x 128 Q
    tile was the kernel's register peak); ``row_dots`` runs one dot per query row of an FP8 two-row atom, so one
    row's scores are live at a time (<= 128 registers: 4 programs per SM); ``max_registers`` caps ptxas (spilling
    what does not fit); ``lean_page_loop`` keeps fewer registers live across the page loop (scales through a TMA
    descriptor of their own when the values have one, a 32-bit page index: the kernel's LEAN_LOOP), the same bits
    out; ``register_page_scales`` (FP8) loads each page's scales into registers one page ahead instead of through a
    shared-memory ring (the kernel's REG_SCALES), the same bits out. The defaults
    (``paged_default_config``) say which are on."""

    tokens_per_program: int = PAGED_TOKENS_PER_PROGRAM
    num_warps: int = 4
    num_stages: int = 5
    persistent: bool = True
    programs_per_sm: int = 4
    aligned_q_loads: bool = False
    row_dots: bool = False
    max_registers: int | None = None
    lean_page_loop: bool = False
    register_page_scales: bool = False


# Persistent kernel, FP8, H=64, D=128, block_kv=64, next_n >= 2 (atoms of 2 rows: a 128-column dot): 7 stages,
# measured 2026-12-02 on the H200 (research/results/2026-12-02-h200-s23-call2/indexer/bench_sweep_paged.log):
# 700.1 us vs 713.4 us at 5 stages (BSZ=256, NextN=2, L=65536) and 1438.8 vs 1460.2 us (BSZ=4096, NextN=2,
# L=8192); with next_n=1 (64 columns) 5 stages stay ahead (84.9 vs 86.8 us, BSZ=256, L=8192). Other shapes keep
# the 5 stages nothing else was measured against.
PAGED_ROW_PAIR_STAGES = 7
# The same shape's register cap, and 16-byte Q loads everywhere (session 24, H200, one process,
# research/results/2026-12-02-h200-s24-call3/paged_sweep.log): capping ptxas at 128 registers (4 programs of 4 warps
# per SM instead of 3, 40 bytes spilled outside the page loop) ran 661.3 against 692.8 us (BSZ=256, NextN=2,
# L=65536) and 1350.2 against 1418.0 us (BSZ=4096, NextN=2, L=8192), ahead of the row-dot lever (671.6 / 1362.9);
# the aligned Q load alone is never slower (+0-2 %; next_n=1 at 5 stages 83.2 against 85.0 us).
PAGED_ROW_PAIR_MAX_REGISTERS = 128
# Under that cap the page loop still spilled: Nsight Compute (H200, 2026-12-03, BSZ=256 NextN=2 L=65536,
# research/results/2026-12-03-h200-s29-call1/ncu_paged_ours.txt) counted 4.19 M local-memory spill requests (2 loads
# and 2 stores per page per warp in the SASS) and 534 MB written to L2 against 134 MB of logits. The lean page loop
# compiles to no local memory at all under the same cap and 294 instead of 301 SASS instructions per page
# (sm_90a, research/probes/paged_loop_spills.py); its time is measured by research/probes/paged_default_ab.py.
# Shapes whose loop does not spill keep the plain loop: there the scale barrier costs more instructions than the
# narrower page index saves (next_n=1 207 against 195 per page, H=32 240 against 220).
# On top of the lean loop, the row pairs take their page scales in registers one page ahead (register_page_scales:
# 282 instead of 294 SASS instructions per page, research/results/2026-12-cpu-paged-spills-session29.md): H200,
# one process, bit-equal (research/results/2026-12-03-h200-s30-call2/paged_ab.log): 97.4 against 100.1 us
# (BSZ=256, NextN=2, L=8192), 652.2 against 665.0 (L=65536), 1316.9 against 1340.5 (BSZ=4096, L=8192). With the
# scale ring gone, 6 stages measured within 1 % of 7 (0.990-0.999 of the time, call 4 of the same session); the relu
# on the FMA pipe (the prefill kernel's fma_relu) 3.6-4.7 % slower.


def paged_default_config(next_n: int, num_heads: int, head_dim: int, block_kv: int, is_fp4: bool) -> "PagedConfig":
    """The paged kernel's tile when the caller passes none (see PAGED_ROW_PAIR_STAGES and
    PAGED_ROW_PAIR_MAX_REGISTERS for the measurements)."""
    if next_n >= 2 and num_heads == 64 and head_dim == 128 and block_kv == 64 and not is_fp4:
        return PagedConfig(num_stages=PAGED_ROW_PAIR_STAGES, aligned_q_loads=True,
                           max_registers=PAGED_ROW_PAIR_MAX_REGISTERS, lean_page_loop=True,
                           register_page_scales=True)
    return PagedConfig(aligned_q_loads=True)


# The grid kernel's tile before the persistent kernel became the default (kept for comparison and as a fallback).
PAGED_GRID_CONFIG = PagedConfig(PAGED_TOKENS_PER_PROGRAM, 4, 3, persistent=False)
# Persistent kernel: tokens per store step of its clean pass; atoms per step of the walk that cuts a schedule
# entry into its lanes' parts.
PAGED_TAIL_BLOCK = 256
PAGED_ATOM_CHUNK = 64


# Prefill grid: programs per SM the KV split aims for (a few waves of ~3 resident programs, so the last wave's
# imbalance stays small), and the fewest keys a split keeps (its Q tile load is then < 2 % of its KV traffic).
PREFILL_PROGRAMS_PER_SM = 24
PREFILL_MIN_KEYS_PER_SPLIT = 1024


def prefill_kv_splits(num_q_blocks: int, seq_len_kv: int, num_sms: int) -> int:
    """Parts each query block's KV range is cut into: enough programs for PREFILL_PROGRAMS_PER_SM per SM when the
    query blocks alone are fewer, never parts shorter than PREFILL_MIN_KEYS_PER_SPLIT keys of a full-width window."""
    want = ceil_div(PREFILL_PROGRAMS_PER_SM * max(num_sms, 1), max(num_q_blocks, 1))
    return max(1, min(want, seq_len_kv // PREFILL_MIN_KEYS_PER_SPLIT, GRID_Y_LIMIT))


# Warp-specialised prefill kernel: consumer warpgroup counts it is offered with, and setmaxnreg per consumer
# warpgroup / producer warp for each (sm_90a, scripts/compile_check_indexer.py --ws: the kernel's 384 or 512 threads
# share one SM's 65536 registers; the consumers' loop needs ~145, so 2 and 3 consumers compile without spills and 4
# do not fit: 96 registers per thread at launch, 112-120 per consumer, 128-216 bytes spilled).
PREFILL_WS_REGISTERS = {2: (168, 24), 3: (160, 32)}
# Fewest heads per consumer count: fewer heads mean more queries per 128 columns, and their per-query window values
# stay live in the loop: H=8 spills 176 bytes at 2 consumers, H=16 16 bytes at 3 (same script).
PREFILL_WS_MIN_HEADS = {2: 16, 3: 32}
# Head dimensions the WS kernel is compile-checked for (its Q tile [128, D] and KV blocks [64, D] in shared memory).
PREFILL_WS_HEAD_DIMS = (32, 64, 128)


def prefill_ws_covers(cfg: PrefillConfig, num_heads: int, head_dim: int, is_fp4: bool, use_tma: bool,
                      sm: int = arch.SM90) -> bool:
    """Whether ``cfg.ws`` runs the warp-specialised kernel for a call (else the tl.* kernel does): FP8 operands
    behind TMA descriptors, one 64-row wgmma per block, 128 (query, head) columns, a checked head dimension, on an
    sm_90a GPU (``sm``: the device's SM version; Gluon kernels cannot run in the interpreter)."""
    if cfg.ws_consumers not in PREFILL_WS_REGISTERS:
        raise ValueError(f"PrefillConfig.ws_consumers must be one of {sorted(PREFILL_WS_REGISTERS)}, "
                         f"not {cfg.ws_consumers}")
    return (cfg.ws and not is_fp4 and use_tma and cfg.block_kv == 64 and cfg.score_cols == SCORE_COLS
            and SCORE_COLS % num_heads == 0 and num_heads >= PREFILL_WS_MIN_HEADS[cfg.ws_consumers]
            and head_dim in PREFILL_WS_HEAD_DIMS and not interpreting() and arch.has_wgmma(sm))


def prefill_ws_stages(cfg: PrefillConfig) -> int:
    """The WS kernel's KV ring depth: num_stages rounded up to a multiple of the consumer count (its barrier phases
    rely on a stage's previous use being the same consumer's)."""
    return ceil_div(max(cfg.num_stages, 1), cfg.ws_consumers) * cfg.ws_consumers


def prefill_config(num_heads: int, head_dim: int, is_fp4: bool) -> PrefillConfig:
    """Default prefill tile. 64 keys x 128 (query, head) columns per warpgroup keeps the FP32 scores at 32
    registers per thread and the shared memory per program small (Q 16 KiB + 4 x 8 KiB), so several programs share
    an SM and one's head reduction overlaps another's MMA (DeepGEMM gets that overlap from 4 math warpgroups)."""
    if is_fp4:  # unpacking costs registers: fewer stages
        return PrefillConfig(block_kv=64, num_warps=4, num_stages=2)
    if num_heads >= PREFILL_INTERIOR_MIN_HEADS:
        return PrefillConfig(interior=True, max_registers=PREFILL_MAX_REGISTERS)
    return PrefillConfig()


# FP8 prefill at H >= 32: the interior loop without per-key tests and a 128-register cap (4 programs of 4 warps per
# SM instead of 3; ptxas spills 56 bytes, outside the loops' hot path). H200, one process (session 26 call 5,
# research/results/2026-12-03-h200-s26-call5/prefill_regcap.log), against the old default: 2048 x 8192 causal
# 287.7 -> 268.3 us, 2048 x 65536 causal 2380.2 -> 2249.4, 8192 x 65536 context-parallel 4846.7 -> 4630.5, H=32
# 4096 x 65536 2579.6 -> 2379.8, H=32 D=32 953.9 -> 864.7 (-4.5 to -9.4 %); the cap alone was slower at H=32, the
# interior loop alone gained 1-4 %. fma_relu with both measured the same within 1 % (not taken: the tl.* kernel
# without the cap ran 12-19 % slower with it, call 4). The warp-specialised Gluon kernel (PrefillConfig(ws=True),
# prefill_ws.py) at its best (3 consumer warpgroups, fma_relu, 6 stages; call 4) ran between 1.8 % faster and 7 %
# slower than the old default and slower than this one on every row, so it stays opt-in.
PREFILL_INTERIOR_MIN_HEADS = 32
PREFILL_MAX_REGISTERS = 128


def _num_sms(t: torch.Tensor) -> int:
    """SMs the kernels may use (the runtime knob when set, else the device's count; 0 without a GPU)."""
    from ..runtime import get_num_sms
    return get_num_sms()


def _device_index(t: torch.Tensor) -> int:
    return t.device.index or 0


def _aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % TMA_ALIGN == 0


# ---- prefill ---------------------------------------------------------------------------------------------------

def fp8_fp4_mqa_logits_triton(q, q_sf, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                              max_seqlen_k, logits_dtype, *, config: PrefillConfig | None = None,
                              record: list | None = None):
    sm = arch.sm_of_tensor(q)
    if not arch.has_fp8_mma(sm):
        return NotImplemented
    seq_len, num_heads = q.size(0), q.size(1)
    seq_len_kv = kv.size(0)
    out = ref.new_mqa_logits(seq_len, seq_len_kv, num_heads, max_seqlen_k, logits_dtype, q.device)
    if out.numel() == 0:
        return out
    if seq_len_kv == 0:  # nothing is valid (compressed mode only)
        out.fill_(float("-inf"))
        return out
    from .kernels import _fp8_mqa_logits_kernel

    is_fp4 = q.dtype == FP4_PACKED
    head_dim = q.size(2) * (2 if is_fp4 else 1)
    cfg = config or prefill_config(num_heads, head_dim, is_fp4)
    block_q = cfg.score_cols // num_heads
    num_q_blocks = ceil_div(seq_len, block_q)
    q_rows = q.view(seq_len * num_heads, q.size(2))
    kv_sf = kv_sf.reshape(-1)
    use_tma = not is_fp4 and _aligned(q) and _aligned(kv)
    compressed = max_seqlen_k > 0
    splits = prefill_kv_splits(num_q_blocks, seq_len_kv, _num_sms(q))
    if prefill_ws_covers(cfg, num_heads, head_dim, is_fp4, use_tma, sm):
        _prefill_ws(q_rows, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, out, max_seqlen_k, cfg,
                    num_heads, head_dim, block_q, num_q_blocks, splits, compressed, record)
    else:
        if use_tma:
            q_desc = descriptor(q_rows, (seq_len * num_heads, head_dim), (head_dim, 1), (cfg.score_cols, head_dim))
            kv_desc = descriptor(kv, (seq_len_kv, head_dim), (head_dim, 1), (cfg.block_kv, head_dim))
        else:
            q_desc, kv_desc = q_rows, kv
        q_sf_arg = q_sf.reshape(-1) if q_sf is not None else q_rows
        args = (q_desc, kv_desc, q_rows, q_sf_arg, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, out,
                seq_len, seq_len_kv, weights.stride(0), out.stride(0), max_seqlen_k, num_q_blocks,
                num_heads, head_dim, block_q, cfg.block_kv, cfg.num_stages, use_tma, is_fp4, not interpreting(),
                compressed, cfg.fma_relu, cfg.interior)
        # The lean interior loop addresses the output with int32 offsets from row q0: (BQ - 1) rows plus a column.
        lean = cfg.interior and cfg.lean_interior and block_q * out.stride(0) + seq_len_kv < 2**31
        args += (lean, not interpreting())
        config_key = (cfg, num_heads, head_dim, use_tma, is_fp4, compressed, logits_dtype, weights.dtype, lean)
        launch(_fp8_mqa_logits_kernel, (num_q_blocks, splits, 1), args, name="fp8_mqa_logits",
               config_key=config_key, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
               device_index=_device_index(out), record=record, max_registers=cfg.max_registers)
    if clean_logits:
        clean_rows(out, cu_seq_len_k_start, cu_seq_len_k_end, seq_len_kv, record=record)
    return out


def _prefill_ws(q_rows, kv, kv_sf, weights, starts, ends, out, max_seqlen_k, cfg: PrefillConfig, num_heads: int,
                head_dim: int, block_q: int, num_q_blocks: int, splits: int, compressed: bool, record):
    """The warp-specialised kernel over the tl.* kernel's work items (query block x KV part, the same
    ``prefill_kv_splits``), walked by one persistent CTA per SM."""
    from .prefill_ws import _fp8_mqa_logits_ws_kernel

    seq_len, seq_len_kv = out.size(0), kv.size(0)
    grid = max(1, min(num_q_blocks * splits, _num_sms(out)))
    stages = prefill_ws_stages(cfg)
    consumer_regs, producer_regs = PREFILL_WS_REGISTERS[cfg.ws_consumers]
    q_desc = descriptor(q_rows, (q_rows.size(0), head_dim), (head_dim, 1), (SCORE_COLS, head_dim), gluon=True)
    kv_desc = descriptor(kv, (seq_len_kv, head_dim), (head_dim, 1), (cfg.block_kv, head_dim), gluon=True)
    args = (q_desc, kv_desc, kv_sf, weights, starts, ends, out,
            seq_len, seq_len_kv, weights.stride(0), out.stride(0), max_seqlen_k, num_q_blocks, splits,
            num_heads, block_q, cfg.block_kv, stages, cfg.ws_consumers, compressed, cfg.fma_relu, consumer_regs,
            producer_regs)
    config_key = ("ws", cfg.ws_consumers, stages, cfg.fma_relu, num_heads, head_dim, compressed, out.dtype,
                  weights.dtype)
    launch(_fp8_mqa_logits_ws_kernel, (grid, 1, 1), args, name="fp8_mqa_logits_ws", config_key=config_key,
           num_warps=4, num_stages=1, device_index=_device_index(out), record=record)


def fp8_mqa_logits_triton(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k,
                          *, config: PrefillConfig | None = None, record: list | None = None):
    return fp8_fp4_mqa_logits_triton(q, None, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                                     clean_logits, max_seqlen_k, torch.float32, config=config, record=record)


def clean_rows(out: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, cols: int,
               record: list | None = None, *, vector_stores: bool | None = None) -> None:
    """-inf in ``out[r, c]`` (c < cols) outside ``[starts[r], ends[r])``. ``vector_stores`` (None: where ``out``
    allows): whole blocks in 16-byte stores, which needs ``out`` and its row stride 16-byte aligned."""
    from .kernels import _clean_logits_kernel
    rows = out.size(0)
    if rows == 0 or cols == 0:
        return
    aligned = _aligned(out) and out.stride(0) * out.element_size() % TMA_ALIGN == 0
    if vector_stores is None:
        vector_stores = CLEAN_VECTOR_STORES and aligned
    elif vector_stores and not aligned:
        raise ValueError(f"clean_rows: vector_stores=True needs out (and its row stride) {TMA_ALIGN}-byte aligned")
    parts = max(1, min(ceil_div(cols, CLEAN_MIN_PART), ceil_div(CLEAN_PROGRAMS_PER_SM * max(_num_sms(out), 1), rows),
                       GRID_Y_LIMIT))
    per_part = ceil_div(ceil_div(cols, parts), CLEAN_BLOCK) * CLEAN_BLOCK
    args = (out, starts, ends, cols, out.stride(0), per_part, CLEAN_BLOCK, vector_stores)
    launch(_clean_logits_kernel, (rows, ceil_div(cols, per_part), 1), args, name="clean_logits",
           config_key=(out.dtype, CLEAN_BLOCK, vector_stores), num_warps=CLEAN_WARPS, device_index=_device_index(out),
           record=record)


# ---- paged -----------------------------------------------------------------------------------------------------

def get_paged_mqa_logits_metadata_triton(context_lens, block_kv, num_sms, indices, *, record: list | None = None):
    if num_sms > SCHEDULE_MAX_SMS or not arch.kernels_run(arch.sm_of_tensor(context_lens)):
        return NotImplemented
    from .kernels import _paged_schedule_kernel
    batch = context_lens.size(0)
    next_n = context_lens.size(1) if context_lens.dim() == 2 else 1
    out = ref.new_paged_mqa_logits_metadata(num_sms, context_lens.device)
    args = (context_lens, out, batch, next_n, num_sms, ref.atoms_per_sequence(next_n),
            _next_pow2(num_sms + 1), SCHEDULE_CHUNK)
    launch(_paged_schedule_kernel, (1, 1, 1), args, name="paged_schedule", config_key=(_next_pow2(num_sms + 1),),
           num_warps=4, device_index=_device_index(out), record=record)
    return out


def _typed_alias(t: torch.Tensor, dtype: torch.dtype, nbytes: int) -> torch.Tensor:
    """A 1-D ``dtype`` tensor over ``t``'s memory from its first byte (whose offset is a multiple of the element
    size, checked by the op)."""
    elem = torch.empty((), dtype=dtype).element_size()
    offset = t.storage_offset() * t.element_size() // elem
    return torch.empty(0, dtype=dtype, device=t.device).set_(t.untyped_storage(), offset, (nbytes // elem,), (1,))


def paged_rows_per_program(next_n: int, num_heads: int) -> int:
    """Query rows of one sequence per program: all of them when they fit the 128 score columns (the pages are then
    read once per sequence), at least enough for a 16-column dot."""
    rows = min(_next_pow2(next_n), SCORE_COLS // num_heads)
    return max(rows, ceil_div(MIN_DOT_N, num_heads))


def schedule_matches_persistent_atoms(context_lens: torch.Tensor, next_n: int) -> bool:
    """Whether the schedule built from ``context_lens`` counts the atoms the persistent kernel walks. 1-D lengths
    carry no next_n: their schedule has one atom per sequence (reference.get_paged_mqa_logits_metadata_reference),
    while the kernel's atoms are row pairs, ceil(next_n / 2) per sequence; they agree only for next_n <= 2. Otherwise
    the grid kernel, which ignores the schedule, runs (with the persistent kernel, the sequences past the schedule's
    atom count were left unwritten: GPU test of 2026-12-02, 1-D lengths with next_n=3)."""
    return context_lens.dim() == 2 or ref.atoms_per_sequence(next_n) == 1


def fp8_fp4_paged_mqa_logits_triton(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta,
                                    max_context_len, clean_logits, logits_dtype, indices, *,
                                    config: PagedConfig | None = None, record: list | None = None):
    if not arch.has_fp8_mma(arch.sm_of_tensor(q)):
        return NotImplemented
    batch, next_n, num_heads = q.size(0), q.size(1), q.size(2)
    is_fp4 = q.dtype == FP4_PACKED
    head_dim = q.size(3) * (2 if is_fp4 else 1)
    out, final = ref.paged_logits_output(q, kv_cache, block_table, max_context_len, logits_dtype)
    if final:
        return out
    num_blocks, block_kv = kv_cache.size(0), kv_cache.size(1)
    max_blocks = block_table.size(1)
    from .kernels import _fp8_paged_mqa_logits_kernel

    cfg = config or paged_default_config(next_n, num_heads, head_dim, block_kv, is_fp4)
    if cfg.persistent and SPLIT_KV % block_kv == 0 and schedule_matches_persistent_atoms(context_lens, next_n):
        return _paged_persistent(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta,
                                 max_context_len, clean_logits, out, cfg, record)
    if cfg.persistent:
        cfg = PAGED_GRID_CONFIG
    tokens = max(cfg.tokens_per_program, block_kv)
    while ceil_div(max_context_len, tokens) > GRID_Y_LIMIT:
        tokens *= 2
    pages = tokens // block_kv
    rows = paged_rows_per_program(next_n, num_heads)
    stride_page = kv_cache.stride(0)
    token_bytes = kv_cache_token_bytes(head_dim, is_fp4)
    cache_bytes = (num_blocks - 1) * stride_page + block_kv * token_bytes
    values = _typed_alias(kv_cache, FP4_PACKED if is_fp4 else torch.float8_e4m3fn, cache_bytes)
    scales = _typed_alias(kv_cache, torch.int32 if is_fp4 else torch.float32, cache_bytes)
    kv_tma = not is_fp4 and _aligned(kv_cache) and stride_page % TMA_ALIGN == 0
    if kv_tma:
        kv_desc = descriptor(values, (num_blocks, block_kv, head_dim), (stride_page, head_dim, 1),
                             (1, block_kv, head_dim))
    else:
        kv_desc = values
    context_2d = context_lens.dim() == 2
    q_sf_arg = q_sf if q_sf is not None else q
    args = (q, q_sf_arg, kv_desc, values, scales, weights, context_lens, block_table, out,
            next_n, max_context_len, max_blocks, num_blocks, block_table.stride(0), stride_page, weights.stride(0),
            out.stride(0),
            num_heads, head_dim, rows, block_kv, pages, cfg.num_stages, kv_tma, is_fp4, not interpreting(),
            context_2d, bool(clean_logits))
    grid = (batch * ceil_div(next_n, rows), ceil_div(max_context_len, tokens), 1)
    config_key = (cfg, tokens, num_heads, head_dim, rows, block_kv, kv_tma, is_fp4, context_2d, bool(clean_logits),
                  logits_dtype, weights.dtype)
    launch(_fp8_paged_mqa_logits_kernel, grid, args, name="fp8_paged_mqa_logits", config_key=config_key,
           num_warps=cfg.num_warps, num_stages=cfg.num_stages, device_index=_device_index(out), record=record)
    return out


def _paged_cache_views(kv_cache, head_dim, is_fp4):
    """The cache as FP8 (int8 for FP4) values and FP32 (int32) scales from its first byte, and a TMA descriptor over
    the values when the layout allows one (else the values again)."""
    num_blocks, block_kv = kv_cache.size(0), kv_cache.size(1)
    stride_page = kv_cache.stride(0)
    cache_bytes = (num_blocks - 1) * stride_page + block_kv * kv_cache_token_bytes(head_dim, is_fp4)
    values = _typed_alias(kv_cache, FP4_PACKED if is_fp4 else torch.float8_e4m3fn, cache_bytes)
    scales = _typed_alias(kv_cache, torch.int32 if is_fp4 else torch.float32, cache_bytes)
    kv_tma = not is_fp4 and _aligned(kv_cache) and stride_page % TMA_ALIGN == 0
    kv_desc = descriptor(values, (num_blocks, block_kv, head_dim), (stride_page, head_dim, 1),
                         (1, block_kv, head_dim)) if kv_tma else values
    return values, scales, kv_desc, kv_tma


def q_row_alignment(q: torch.Tensor) -> int:
    """Bytes every Q row's address is a multiple of, as the persistent kernel's ``Q_ALIGN`` wants it: 16 when the
    first row is 16-byte aligned and rows are a multiple of 16 bytes long (Q is contiguous), else 1 (unknown)."""
    row_bytes = q.size(-1) * q.element_size()
    return TMA_ALIGN if _aligned(q) and row_bytes % TMA_ALIGN == 0 else 1


def resident_programs(compiled, num_warps: int, wanted: int, sm: int = arch.SM90) -> int:
    """Lanes per schedule entry: ``wanted``, capped by the programs of the compiled kernel that fit on one SM at once
    (``programs_per_sm``: registers, warps, by sm_90's limits; shared memory by ``sm``'s). A lane that had to wait
    for a free slot would run its whole share after the others, doubling the time."""
    return max(1, min(wanted, programs_per_sm(compiled, num_warps, sm)))


def _paged_persistent(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                      clean_logits, out, cfg: PagedConfig, record):
    from .kernels import _fp8_paged_mqa_logits_persistent_kernel as kernel

    batch, next_n, num_heads = q.size(0), q.size(1), q.size(2)
    is_fp4 = q.dtype == FP4_PACKED
    head_dim = q.size(3) * (2 if is_fp4 else 1)
    num_blocks, block_kv = kv_cache.size(0), kv_cache.size(1)
    atom_rows = 2 if next_n >= 2 else 1  # DeepGEMM's scheduling atom (reference.atoms_per_sequence)
    rows = max(atom_rows, ceil_div(MIN_DOT_N, num_heads))
    values, scales, kv_desc, kv_tma = _paged_cache_views(kv_cache, head_dim, is_fp4)
    # The lean loop reads each page's scales (the BLOCK_KV FP32 words after its values) through a descriptor of
    # their own; it needs what the values' descriptor needs (16-byte aligned cache and page stride), which also
    # makes the scales' start, block_kv * head_dim bytes into the page, 16-byte aligned.
    # Scales in registers (REG_SCALES) address page q's at q * stride_page / 4 words: FP8 pages of whole words.
    reg_scales = cfg.register_page_scales and not is_fp4 and kv_cache.stride(0) % 4 == 0
    sf_tma = cfg.lean_page_loop and kv_tma and not is_fp4 and not reg_scales
    if sf_tma:
        words = kv_cache.stride(0) // 4
        sf_desc = descriptor(scales[block_kv * head_dim // 4:], (num_blocks, block_kv), (words, 1), (1, block_kv))
    else:
        sf_desc = scales
    context_2d = context_lens.dim() == 2
    entries = schedule_meta.size(0) - 1
    # sm_90a: 5 stages give 3 KV pages in flight per program at 168 registers. FP4 unpacking (H=64, D=128) spills
    # at 2 stages: FP4 runs unpipelined, 3 programs per SM overlapping each other's loads.
    stages = 1 if is_fp4 else cfg.num_stages
    q_align = q_row_alignment(q) if cfg.aligned_q_loads or cfg.row_dots else 1
    # Row dots need two-row FP8 atoms, each row a dot of N = H >= MIN_DOT_N; other shapes keep the one dot.
    row_dots = cfg.row_dots and rows == 2 and not is_fp4 and num_heads >= MIN_DOT_N

    def make_args(per_sm):
        return (q, q_sf if q_sf is not None else q, kv_desc, values, scales, sf_desc, weights, context_lens,
                block_table, schedule_meta, out,
                batch, next_n, max_context_len, block_table.size(1), num_blocks, block_table.stride(0),
                kv_cache.stride(0), weights.stride(0), out.stride(0), per_sm,
                num_heads, head_dim, rows, atom_rows, block_kv, stages, kv_tma, is_fp4,
                not interpreting(), context_2d, bool(clean_logits), PAGED_TAIL_BLOCK, PAGED_ATOM_CHUNK, q_align,
                row_dots, cfg.lean_page_loop, reg_scales, not interpreting())

    config_key = (cfg, num_heads, head_dim, rows, atom_rows, block_kv, kv_tma, is_fp4, context_2d,
                  bool(clean_logits), out.dtype, weights.dtype, q_align, row_dots, reg_scales)
    per_sm = cfg.programs_per_sm
    if not interpreting():  # as many lanes per schedule entry as fit on an SM together
        compiled = compiled_kernel(kernel, (entries * per_sm, 1, 1), make_args(per_sm),
                                   name="fp8_paged_mqa_logits_persistent", config_key=config_key,
                                   num_warps=cfg.num_warps, num_stages=stages, device_index=_device_index(out),
                                   max_registers=cfg.max_registers)
        per_sm = resident_programs(compiled, cfg.num_warps, per_sm, arch.sm_of_tensor(out))
    launch(kernel, (entries * per_sm, 1, 1), make_args(per_sm), name="fp8_paged_mqa_logits_persistent",
           config_key=config_key, num_warps=cfg.num_warps, num_stages=stages, device_index=_device_index(out),
           record=record, max_registers=cfg.max_registers)
    return out


def fp8_paged_mqa_logits_triton(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                                clean_logits, indices, *, config: PagedConfig | None = None,
                                record: list | None = None):
    return fp8_fp4_paged_mqa_logits_triton(q, None, kv_cache, weights, context_lens, block_table, schedule_meta,
                                           max_context_len, clean_logits, torch.float32, indices, config=config,
                                           record=record)
