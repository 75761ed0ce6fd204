"""Torch references of the MQA-logits ops (DeepSeek V3.2 indexer). Registered as the CPU kernels, run on CUDA until a
Triton kernel covers a case, and reused by tests and benchmarks.

Maths (FP32 accumulation, as the kernels):

* non-paged, FP8:  ``logits[i, j] = kv_sf[j] * sum_h weights[i, h] * relu(q[i, h] . kv[j])`` for ``ks[i] <= j < ke[i]``;
* non-paged, FP4:  the same with both operands dequantised per 32 values (``q * q_sf``, ``kv * kv_sf``) and no
  trailing scale;
* paged:           ``logits[b * next_n + n, t] = sum_h weights[., h] * relu(q[b, n, h] . K_t)`` for
  ``t < context_lens[b, n]``, with ``K_t`` the dequantised token ``t % block_kv`` of page
  ``block_table[b, t // block_kv]``.

Entries outside the valid range are always written as -inf here (the kernels write -inf there only when cleaning;
otherwise they are unspecified). Outputs are views of padded buffers whose row stride is a multiple of 1 KiB, exactly
as DeepGEMM allocates them; ``new_*_logits`` build them and the fake kernels reuse them, so real and fake outputs
share sizes, strides and storage size.

Nothing here reads a device tensor on the host: valid ranges are masks, indices are gathered and clamped (bad
indices never read out of bounds; the data checks ``checks.check_data_*`` refuse them before the reference runs, on
the CPU always and on CUDA in the checked mode), and work is cut into chunks sized from shapes only. That keeps the
CUDA fallback capturable in CUDA graphs.
"""

from __future__ import annotations

import torch

from ..utils.math import align, ceil_div
from .checks import FP4_PACKED, FP4_SF_GRANULARITY, KV_SCALE_BYTES, MMA_TILE_ROWS, kv_cache_token_bytes

# Logits rows start on 1 KiB boundaries (DeepGEMM's TMA stores and its clean kernel rely on it).
LOGITS_ROW_ALIGN_BYTES = 1024
# KV tokens one MQA work item covers: the non-paged kernel pads each row by one such block, the paged kernel pads the
# context to a multiple of it, and the paged schedule cuts every context into splits of this size.
SPLIT_KV = 256
# FP32 exponent bias and mantissa width, to build powers of two (UE8M0 scales, E2M1 values) from bit fields.
_FP32_BIAS, _FP32_MANTISSA_BITS = 127, 23
# Cap on the elements of the temporaries of one chunk (scores [rows, H, T] and gathered KV [rows, T, D]), so the CUDA
# fallback's memory stays bounded (64 MiB of FP32) whatever S, SK or the context length.
MAX_CHUNK_ELEMENTS = 1 << 24


# ---- output buffers (shared with the fake kernels) -----------------------------------------------------------------

def _logits_view(rows: int, cols: int, alloc_rows: int, row_stride: int, dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
    return torch.empty((alloc_rows, row_stride), dtype=dtype, device=device)[:rows, :cols]


def new_mqa_logits(seq_len: int, seq_len_kv: int, num_heads: int, max_seqlen_k: int, dtype: torch.dtype,
                   device: torch.device) -> torch.Tensor:
    """[S, SK] (or [S, max_seqlen_k] compressed) view of a [align(S, 128 / H), row_stride] buffer."""
    row_align = LOGITS_ROW_ALIGN_BYTES // dtype.itemsize
    if max_seqlen_k == 0:
        cols, row_stride = seq_len_kv, align(seq_len_kv + SPLIT_KV, row_align)
    else:
        cols, row_stride = max_seqlen_k, align(align(max_seqlen_k, SPLIT_KV), row_align)
    alloc_rows = align(seq_len, MMA_TILE_ROWS // num_heads)
    return _logits_view(seq_len, cols, alloc_rows, row_stride, dtype, device)


def new_paged_mqa_logits(rows: int, max_context_len: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[B * next_n, max_context_len] view of a [B * next_n, align(align(max_context_len, 256), 1 KiB)] buffer."""
    row_align = LOGITS_ROW_ALIGN_BYTES // dtype.itemsize
    row_stride = align(align(max_context_len, SPLIT_KV), row_align)
    return _logits_view(rows, max_context_len, rows, row_stride, dtype, device)


def paged_logits_output(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, max_context_len: int,
                        logits_dtype: torch.dtype) -> tuple[torch.Tensor, bool]:
    """The paged op's output (``new_paged_mqa_logits``) and whether it is already final: empty, or all -inf because
    no page can hold a valid token (no pages, or an empty block table). Every backend starts here."""
    out = new_paged_mqa_logits(q.size(0) * q.size(1), max_context_len, logits_dtype, q.device)
    if out.numel() == 0:
        return out, True
    if kv_cache.size(0) == 0 or block_table.size(1) == 0:
        out.fill_(float("-inf"))
        return out, True
    return out, False


def new_paged_mqa_logits_metadata(num_sms: int, device: torch.device) -> torch.Tensor:
    return torch.empty((num_sms + 1, 2), dtype=torch.int32, device=device)


# ---- shared maths ------------------------------------------------------------------------------------------------

def _e2m1_magnitudes(codes: torch.Tensor) -> torch.Tensor:
    """|value| of 3-bit E2M1 codes (int32), built from FP32 bit fields: exponent e (bias 1) and mantissa m give
    ``(1 + m/2) * 2^(e-1)``, the subnormal e == 0 gives ``m / 2``. No lookup table: a constant table would be a
    host-to-device copy, which breaks CUDA-graph capture."""
    exponent, mantissa = (codes >> 1) & 0x3, codes & 0x1
    normal = ((exponent + _FP32_BIAS - 1) << _FP32_MANTISSA_BITS) | (mantissa << (_FP32_MANTISSA_BITS - 1))
    half = (_FP32_BIAS - 1) << _FP32_MANTISSA_BITS  # bits of 0.5
    return torch.where(exponent == 0, mantissa * half, normal).view(torch.float32)


def _fp4_values(data: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """Packed E2M1 [..., D/2] (low nibble = even element) with packed UE8M0 scales [...] (int32, byte g scales values
    32g .. 32g + 31) -> FP32 [..., D]."""
    packed = data.to(torch.int32)
    codes = torch.stack((packed & 0xF, (packed >> 4) & 0xF), dim=-1).flatten(-2)  # [..., D]
    magnitude = _e2m1_magnitudes(codes & 0x7)
    values = torch.where((codes & 0x8) != 0, -magnitude, magnitude)
    groups = values.size(-1) // FP4_SF_GRANULARITY
    exponent_bytes = sf.contiguous().unsqueeze(-1).view(torch.uint8)[..., :groups].to(torch.int32)
    scales = (exponent_bytes << _FP32_MANTISSA_BITS).view(torch.float32)  # 2^(byte - 127); byte 0 gives 0
    return values * scales.repeat_interleave(FP4_SF_GRANULARITY, dim=-1)


def _query_values(q: torch.Tensor, q_sf: torch.Tensor | None) -> torch.Tensor:
    return _fp4_values(q, q_sf) if q.dtype == FP4_PACKED else q.float()


def _weighted_relu_sum(q: torch.Tensor, kv_t: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_h w[r, h] * relu(q[r, h] . kv[:, t]): q [R, H, D], kv_t [D, T] or [R, D, T], weights [R, H] -> [R, T]."""
    scores = torch.matmul(q, kv_t)  # [R, H, T], FP32 accumulation
    return (scores.relu_() * weights.unsqueeze(-1)).sum(dim=1)


def _rows_per_chunk(per_row_elements: int) -> int:
    return max(1, MAX_CHUNK_ELEMENTS // max(1, per_row_elements))


# ---- non-paged ---------------------------------------------------------------------------------------------------

def fp8_fp4_mqa_logits_reference(q, q_sf, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                                 max_seqlen_k, logits_dtype, schedule_meta=None):
    # schedule_meta (get_mqa_logits_metadata's split-K schedule) only distributes work; the logits do not depend
    # on it.
    seq_len, num_heads = q.size(0), q.size(1)
    seq_len_kv = kv.size(0)
    out = new_mqa_logits(seq_len, seq_len_kv, num_heads, max_seqlen_k, logits_dtype, q.device)
    cols = out.size(1)
    if out.numel() == 0:
        return out
    if seq_len_kv == 0:  # nothing is valid (only reachable in compressed mode)
        out.fill_(float("-inf"))
        return out

    q_values = _query_values(q, q_sf)
    if kv.dtype == FP4_PACKED:
        kv_values, kv_scale = _fp4_values(kv, kv_sf.reshape(-1)), None
    else:
        kv_values, kv_scale = kv.float(), kv_sf.reshape(-1)
    head_dim = kv_values.size(1)
    w = weights.float()
    starts, ends = cu_seq_len_k_start.long(), cu_seq_len_k_end.long()
    columns = torch.arange(cols, device=q.device)

    compressed = max_seqlen_k > 0
    per_row = num_heads * cols + (cols * head_dim if compressed else 0)
    step = _rows_per_chunk(per_row)
    for r0 in range(0, seq_len, step):
        rows = slice(r0, min(r0 + step, seq_len))
        if compressed:
            # Column t of row i is KV row ks[i] + t; positions outside [ks, ke) or [0, SK) are invalid.
            position = starts[rows, None] + columns
            valid = (position < ends[rows, None]) & (position >= 0) & (position < seq_len_kv)
            index = position.clamp(0, seq_len_kv - 1)
            values = _weighted_relu_sum(q_values[rows], kv_values[index].transpose(1, 2), w[rows])
            if kv_scale is not None:
                values = values * kv_scale[index]
        else:
            valid = (columns >= starts[rows, None]) & (columns < ends[rows, None])
            values = _weighted_relu_sum(q_values[rows], kv_values.T, w[rows])
            if kv_scale is not None:
                values = values * kv_scale
        out[rows] = torch.where(valid, values, float("-inf")).to(logits_dtype)
    return out


def fp8_mqa_logits_reference(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                             max_seqlen_k):
    return fp8_fp4_mqa_logits_reference(q, None, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                                        clean_logits, max_seqlen_k, torch.float32)


# ---- paged -------------------------------------------------------------------------------------------------------

def paged_kv_bytes(kv_cache: torch.Tensor, head_dim: int, is_fp4: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Byte views of every page: values uint8 [num_blocks, block_kv, value_bytes], scales [num_blocks, block_kv, 4].

    A page at ``kv_cache[blk]`` holds ``block_kv`` tokens of values (token-major) followed by ``block_kv`` 4-byte
    scales; the 4-D shape ``[num_blocks, block_kv, 1, bytes_per_token]`` is only a byte view of that.
    """
    num_blocks, block_kv = kv_cache.size(0), kv_cache.size(1)
    value_bytes = kv_cache_token_bytes(head_dim, is_fp4) - KV_SCALE_BYTES
    pages = torch.as_strided(kv_cache, (num_blocks, block_kv * (value_bytes + KV_SCALE_BYTES)),
                             (kv_cache.stride(0), 1), kv_cache.storage_offset())
    values = pages[:, :block_kv * value_bytes].view(num_blocks, block_kv, value_bytes)
    scales = pages[:, block_kv * value_bytes:].view(num_blocks, block_kv, KV_SCALE_BYTES)
    return values, scales


def pack_paged_kv_cache(values: list[torch.Tensor], scales: list[torch.Tensor], block_kv: int,
                        spare_pages: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse of ``paged_kv_bytes`` for FP8 keys (demos and tests): sequence ``b``'s FP8 values [n_b, D] and
    FP32 scales [n_b] written into consecutive zeroed pages, plus ``spare_pages`` unused ones. Returns the cache
    uint8 [pages, block_kv, 1, D + 4] and the block table int32 [B, max pages per sequence] (unused entries 0)."""
    head_dim = values[0].size(1) if values else 0
    pages_per_seq = [-(-v.size(0) // block_kv) for v in values]
    storage = torch.zeros(sum(pages_per_seq) + spare_pages, block_kv * (head_dim + KV_SCALE_BYTES), dtype=torch.uint8)
    block_table = torch.zeros(len(values), max(pages_per_seq, default=0), dtype=torch.int32)
    page = 0
    for b, (vals, scl) in enumerate(zip(values, scales)):
        for p in range(pages_per_seq[b]):
            block_table[b, p] = page
            tokens = slice(p * block_kv, min((p + 1) * block_kv, vals.size(0)))
            count = tokens.stop - tokens.start
            storage[page, :count * head_dim] = vals[tokens].view(torch.uint8).reshape(-1)
            storage[page, block_kv * head_dim:block_kv * head_dim + count * KV_SCALE_BYTES] = \
                scl[tokens].view(torch.uint8).reshape(-1)
            page += 1
    return storage.view(-1, block_kv, 1, head_dim + KV_SCALE_BYTES), block_table


def decode_kv_tokens(values: torch.Tensor, scales: torch.Tensor, is_fp4: bool) -> torch.Tensor:
    """Gathered token bytes [..., value_bytes] and scale bytes [..., 4] -> FP32 keys [..., D] (value times scale)."""
    scales = scales.contiguous()
    if is_fp4:
        return _fp4_values(values.view(FP4_PACKED), scales.view(torch.int32).squeeze(-1))
    return values.view(torch.float8_e4m3fn).float() * scales.view(torch.float32)


def fp8_fp4_paged_mqa_logits_reference(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta,
                                       max_context_len, clean_logits, logits_dtype, indices):
    batch, next_n, num_heads = q.size(0), q.size(1), q.size(2)
    is_fp4 = q.dtype == FP4_PACKED
    out, final = paged_logits_output(q, kv_cache, block_table, max_context_len, logits_dtype)
    if final:
        return out
    num_blocks, block_kv = kv_cache.size(0), kv_cache.size(1)
    max_blocks = block_table.size(1)

    q_values = _query_values(q, q_sf)
    head_dim = q_values.size(-1)
    context_lens = per_row_context_lens(context_lens, next_n)
    page_values, page_scales = paged_kv_bytes(kv_cache, head_dim, is_fp4)
    w = weights.float().view(batch, next_n, num_heads)
    positions = torch.arange(max_context_len, device=q.device)
    # Positions past the block table have no page; clamp the column so the gather stays in bounds, then mask.
    in_table = positions < max_blocks * block_kv
    table_column = (positions // block_kv).clamp(max=max_blocks - 1)
    slot = positions % block_kv

    # Only the pages a chunk of sequences references are gathered and decoded (the cache may be far larger).
    step = _rows_per_chunk(next_n * num_heads * max_context_len + max_context_len * head_dim)
    for b0 in range(0, batch, step):
        seqs = slice(b0, min(b0 + step, batch))
        pages = block_table[seqs][:, table_column].long().clamp(0, num_blocks - 1)  # [Bc, T]
        keys = decode_kv_tokens(page_values[pages, slot], page_scales[pages, slot], is_fp4)  # [Bc, T, D]
        num = keys.size(0)
        scores = torch.matmul(q_values[seqs].reshape(num, next_n * num_heads, head_dim), keys.transpose(1, 2))
        scores = scores.view(num, next_n, num_heads, max_context_len).relu_()
        values = (scores * w[seqs].unsqueeze(-1)).sum(dim=2)  # [Bc, next_n, T]
        valid = (positions < context_lens[seqs].long().unsqueeze(-1)) & in_table
        rows = slice(b0 * next_n, seqs.stop * next_n)
        out[rows] = torch.where(valid, values, float("-inf")).view(num * next_n, -1).to(logits_dtype)
    return out


def fp8_paged_mqa_logits_reference(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                                   clean_logits, indices):
    return fp8_fp4_paged_mqa_logits_reference(q, None, kv_cache, weights, context_lens, block_table, schedule_meta,
                                              max_context_len, clean_logits, torch.float32, indices)


def per_row_context_lens(context_lens: torch.Tensor, next_n: int) -> torch.Tensor:
    """[B, next_n] lengths as they are; 1-D [B] lengths as DeepGEMM's 1-D path reads them: the next_n rows of
    sequence b are causal, row n seeing ``context_lens[b] - next_n + n + 1`` tokens."""
    if context_lens.dim() == 2:
        return context_lens
    rows = torch.arange(next_n, device=context_lens.device, dtype=context_lens.dtype)
    return context_lens[:, None] - next_n + 1 + rows[None, :]


def atoms_per_sequence(next_n: int) -> int:
    """Scheduling atoms of one sequence: query rows are taken in pairs when next_n >= 2, else one at a time."""
    rows_per_atom = 2 if next_n >= 2 else 1
    return ceil_div(next_n, rows_per_atom)


def get_paged_mqa_logits_metadata_reference(context_lens, block_kv, num_sms, indices):
    """Per-SM start points of the paged work list: int32 [num_sms + 1, 2] = (first query atom, first KV split).

    Work items are (atom, split) pairs, atom-major within a sequence and sequences in order; sequence b has
    ``atoms * ceil(context_lens[b, -1] / 256)`` of them. With ``total = qq * num_sms + r`` items, SM s starts at item
    ``s * qq + max(0, s - (num_sms - r))`` (the first num_sms - r SMs get qq items, the last r get qq + 1), located in
    the first sequence whose running item count exceeds it (the last sequence when there is no work at all). The last
    row is ``(B * atoms, 0)``. Computed with prefix sums on the device; block_kv does not change the split size.
    """
    if context_lens.dim() == 1:  # one length per sequence: one query row each, as DeepGEMM's 1-D schedule
        context_lens = context_lens[:, None]
    batch, next_n = context_lens.shape
    atoms = atoms_per_sequence(next_n)
    device = context_lens.device
    # Built from fills and concatenations: writing a Python number into one element would be a host-to-device copy.
    last_row = torch.cat((torch.full((1, 1), batch * atoms, dtype=torch.int64, device=device),
                          torch.zeros((1, 1), dtype=torch.int64, device=device)), dim=1)
    if batch == 0:
        return torch.cat((torch.zeros((num_sms, 2), dtype=torch.int64, device=device), last_row)).to(torch.int32)
    splits = torch.div(context_lens[:, -1].long().clamp(min=0) + SPLIT_KV - 1, SPLIT_KV, rounding_mode="floor")
    ends = torch.cumsum(splits, 0) * atoms  # items up to and including each sequence
    total = ends[-1]
    per_sm, extra = torch.div(total, num_sms, rounding_mode="floor"), torch.remainder(total, num_sms)
    sm = torch.arange(num_sms, device=device)
    start = sm * per_sm + (sm - (num_sms - extra)).clamp(min=0)
    seq = torch.searchsorted(ends, start, right=True).clamp(max=batch - 1)
    offset = start - torch.where(seq > 0, ends[(seq - 1).clamp(min=0)], 0)
    seq_splits = splits[seq]
    has_work = seq_splits > 0
    divisor = seq_splits.clamp(min=1)
    atom = torch.where(has_work, torch.div(offset, divisor, rounding_mode="floor"), 0)
    split = torch.where(has_work, torch.remainder(offset, divisor), 0)
    rows = torch.stack((seq * atoms + atom, split), dim=1)
    return torch.cat((rows, last_row)).to(torch.int32)
