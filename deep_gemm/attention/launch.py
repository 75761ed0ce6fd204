"""CUDA launchers of the MQA-logits ops (DeepSeek V3.2 indexer): allocate the output as DeepGEMM does, pick a config,
launch the kernels of ``attention/kernels/``. Every argument combination the checks accept is covered (FP4
included); nothing here reads a device tensor on the host, so every call is CUDA-graph capturable.

The MQA-logits kernels take FP8 (or packed FP4) operands: on devices without FP8 MMAs (below sm_89,
``deep_gemm.core.arch``) those launchers decline and the reference runs. The paged schedule (metadata) kernel runs from
sm_80 on. Tiles, splits and kernel choices come from ``plan.py``; an ``overrides=`` keyword
(``plan.AttentionOverrides``) forces them.

Importing this module does not import Triton (the kernels are imported at the first launch).
"""

from __future__ import annotations

import torch

from ..core import arch
from ..core.launch import compiled_kernel, descriptor, interpreting, launch, programs_per_sm
from ..utils.math import ceil_div
from ..utils.numeric import next_pow2
from . import reference as ref
from .checks import FP4_PACKED, kv_cache_token_bytes
from .plan import (CLEAN_BLOCK, CLEAN_MIN_PART, CLEAN_PROGRAMS_PER_SM, CLEAN_WARPS, GRID_Y_LIMIT, MIN_DOT_N,
                   NO_OVERRIDES, PAGED_ATOM_CHUNK, PAGED_GRID_CONFIG, PAGED_TAIL_BLOCK, PREFILL_MIN_KEYS_PER_SPLIT,
                   SCHEDULE_CHUNK, SCHEDULE_MAX_SMS, TMA_ALIGN, AttentionOverrides, PagedConfig, paged_default_config,
                   paged_rows_per_program, prefill_config, prefill_kv_splits)
from .reference import SPLIT_KV

def _num_sms(t: torch.Tensor) -> int:
    """SMs the kernels may use (the runtime knob when set, else the device's count; 0 without a GPU)."""
    from ..core.runtime import get_num_sms
    return get_num_sms()


def _device_index(t: torch.Tensor) -> int:
    return t.device.index or 0


def _aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % TMA_ALIGN == 0


# ---- prefill ---------------------------------------------------------------------------------------------------

def fp8_fp4_mqa_logits_triton(q, q_sf, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                              max_seqlen_k, logits_dtype, schedule_meta=None, *,
                              overrides: AttentionOverrides = NO_OVERRIDES, record: list | None = None):
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
    from .kernels.prefill import _fp8_mqa_logits_kernel

    is_fp4 = q.dtype == FP4_PACKED
    head_dim = q.size(2) * (2 if is_fp4 else 1)
    cfg = overrides.prefill or prefill_config(num_heads, head_dim, is_fp4)
    block_q = cfg.score_cols // num_heads
    num_q_blocks = ceil_div(seq_len, block_q)
    q_rows = q.view(seq_len * num_heads, q.size(2))
    kv_sf = kv_sf.reshape(-1)
    use_tma = not is_fp4 and _aligned(q) and _aligned(kv)
    compressed = max_seqlen_k > 0
    splits = prefill_kv_splits(num_q_blocks, seq_len_kv, _num_sms(q),
                               overrides.min_keys_per_split or PREFILL_MIN_KEYS_PER_SPLIT)
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
        clean_rows(out, cu_seq_len_k_start, cu_seq_len_k_end, seq_len_kv, record=record, overrides=overrides)
    return out


def fp8_mqa_logits_triton(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k,
                          *, overrides: AttentionOverrides = NO_OVERRIDES, record: list | None = None):
    return fp8_fp4_mqa_logits_triton(q, None, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                                     clean_logits, max_seqlen_k, torch.float32, overrides=overrides, record=record)


def clean_rows(out: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, cols: int,
               record: list | None = None, overrides: AttentionOverrides = NO_OVERRIDES) -> None:
    """-inf in ``out[r, c]`` (c < cols) outside ``[starts[r], ends[r])``; whole blocks in 16-byte stores where
    ``out`` and its row stride are 16-byte aligned."""
    from .kernels.prefill import _clean_logits_kernel
    rows = out.size(0)
    if rows == 0 or cols == 0:
        return
    vector_stores = _aligned(out) and out.stride(0) * out.element_size() % TMA_ALIGN == 0
    block, min_part = overrides.clean_block or CLEAN_BLOCK, overrides.clean_min_part or CLEAN_MIN_PART
    parts = max(1, min(ceil_div(cols, min_part), ceil_div(CLEAN_PROGRAMS_PER_SM * max(_num_sms(out), 1), rows),
                       GRID_Y_LIMIT))
    per_part = ceil_div(ceil_div(cols, parts), block) * block
    args = (out, starts, ends, cols, out.stride(0), per_part, block, vector_stores)
    launch(_clean_logits_kernel, (rows, ceil_div(cols, per_part), 1), args, name="clean_logits",
           config_key=(out.dtype, block, vector_stores), num_warps=CLEAN_WARPS, device_index=_device_index(out),
           record=record)


# ---- paged -----------------------------------------------------------------------------------------------------

def get_paged_mqa_logits_metadata_triton(context_lens, block_kv, num_sms, indices, *, record: list | None = None):
    if num_sms > SCHEDULE_MAX_SMS or not arch.kernels_run(arch.sm_of_tensor(context_lens)):
        return NotImplemented
    from .kernels.paged import _paged_schedule_kernel
    batch = context_lens.size(0)
    next_n = context_lens.size(1) if context_lens.dim() == 2 else 1
    out = ref.new_paged_mqa_logits_metadata(num_sms, context_lens.device)
    args = (context_lens, out, batch, next_n, num_sms, ref.atoms_per_sequence(next_n),
            next_pow2(num_sms + 1), SCHEDULE_CHUNK)
    launch(_paged_schedule_kernel, (1, 1, 1), args, name="paged_schedule", config_key=(next_pow2(num_sms + 1),),
           num_warps=4, device_index=_device_index(out), record=record)
    return out


def _typed_alias(t: torch.Tensor, dtype: torch.dtype, nbytes: int) -> torch.Tensor:
    """A 1-D ``dtype`` tensor over ``t``'s memory from its first byte (whose offset is a multiple of the element
    size, checked by the op)."""
    elem = torch.empty((), dtype=dtype).element_size()
    offset = t.storage_offset() * t.element_size() // elem
    return torch.empty(0, dtype=dtype, device=t.device).set_(t.untyped_storage(), offset, (nbytes // elem,), (1,))


def schedule_matches_persistent_atoms(context_lens: torch.Tensor, next_n: int) -> bool:
    """Whether the schedule built from ``context_lens`` counts the atoms the persistent kernel walks. 1-D lengths
    carry no next_n: their schedule has one atom per sequence (reference.get_paged_mqa_logits_metadata_reference),
    while the kernel's atoms are row pairs, ceil(next_n / 2) per sequence; they agree only for next_n <= 2. Otherwise
    the grid kernel, which ignores the schedule, runs (with the persistent kernel, the sequences past the schedule's
    atom count would be left unwritten: 1-D lengths with next_n=3)."""
    return context_lens.dim() == 2 or ref.atoms_per_sequence(next_n) == 1


def fp8_fp4_paged_mqa_logits_triton(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta,
                                    max_context_len, clean_logits, logits_dtype, indices, *,
                                    overrides: AttentionOverrides = NO_OVERRIDES, record: list | None = None):
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
    from .kernels.paged import _fp8_paged_mqa_logits_kernel

    cfg = overrides.paged or paged_default_config(next_n, num_heads, head_dim, block_kv, is_fp4)
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
    from .kernels.paged import _fp8_paged_mqa_logits_persistent_kernel as kernel

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
                                clean_logits, indices, *, overrides: AttentionOverrides = NO_OVERRIDES,
                                record: list | None = None):
    return fp8_fp4_paged_mqa_logits_triton(q, None, kv_cache, weights, context_lens, block_table, schedule_meta,
                                           max_context_len, clean_logits, torch.float32, indices, overrides=overrides,
                                           record=record)
