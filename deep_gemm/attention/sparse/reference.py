"""CPU references of the block-sparse MQA ops (the semantics of DeepGEMM's SM100 kernels, without their schedule).

Metadata. DeepGEMM's metadata is an opaque byte buffer describing its kernel's work split (KV splits of two merged
query rows, their order fixed by atomics at build time). Ours is also an opaque ``uint8`` buffer, holding what the
semantics need, as int32 words: a header ``(paged, use_unaligned_ks, sparse_block_kv, num_max_sparse_blocks)``,
then per query row the number ``n`` of selected blocks followed by ``num_max_sparse_blocks`` KV start tokens (the
first ``n`` valid, -1 after). Callers only pass it on, as with DeepGEMM's.

* contiguous: row i covers KV tokens ``[b, e)`` with ``b = min(ks[i], num_kv_tokens)`` and
  ``e = max(b, min(ke[i], num_kv_tokens))``; ``n = min(num_max_sparse_blocks, ceil((e - b) / sparse_block_kv))``.
  Slot j's block ``sparse_kv_block_indices[i, j]`` (absolute, in units of sparse_block_kv) starts at token
  ``idx * sparse_block_kv``, plus ``ks[i] % sparse_block_kv`` with ``use_unaligned_ks``.
* paged: ``n = min(num_max_sparse_blocks, ceil(context_lens[i] / sparse_block_kv))``; slot j's logical block lies in
  page ``idx // (page_kv / sparse_block_kv)`` of row i of the block table; its start is the physical token
  ``block_table[i, page] * page_kv + (idx % (page_kv / sparse_block_kv)) * sparse_block_kv``.

Logits. Column ``j * sparse_block_kv + t`` of row i is the logit of the KV token ``start_j + t``:
``sum_h relu(q[i, h] . k) * weights[i, h]`` over the dequantised values (products summed in FP64, rounded once to
BF16; DeepGEMM's kernel rounds each head's ReLU and sums in BF16). As in DeepGEMM, every token of a selected block
is computed, also past the row's end (callers ignore those); columns of unused slots, which DeepGEMM leaves
unwritten, are -inf here, as are tokens past the end of a contiguous ``kv``.
"""

from __future__ import annotations

import torch

from ...utils.quant import fp4_e2m1_to_float
from .checks import FP4_PACKED, HEADER_WORDS, LOGITS_ROW_ALIGN_BYTES, ROW_WORDS_EXTRA, metadata_bytes

SF_GROUP = 32  # elements per UE8M0 scale byte


def _pack_metadata(header: list, counts: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    device = counts.device
    # (fills, not a host tensor: no host-to-device copy, so the CUDA path stays capturable)
    head = torch.cat([torch.full((1,), v, dtype=torch.int32, device=device) for v in header])
    rows = torch.cat([counts[:, None].to(torch.int32), starts.to(torch.int32)], dim=1)
    return torch.cat([head, rows.reshape(-1)]).view(torch.uint8)


def unpack_metadata(metadata: torch.Tensor, num_q: int, num_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    words = metadata.view(torch.int32)[HEADER_WORDS:].view(num_q, ROW_WORDS_EXTRA + num_max)
    return words[:, 0], words[:, 1:]


def _slot_starts(indices: torch.Tensor, counts: torch.Tensor, start_of) -> torch.Tensor:
    num_max = indices.size(1)
    valid = torch.arange(num_max, device=indices.device)[None, :] < counts[:, None]
    return torch.where(valid, start_of(indices.long()), -1)


def new_sparse_metadata(num_q: int, num_max: int, device) -> torch.Tensor:
    return torch.empty(metadata_bytes(num_q, num_max), dtype=torch.uint8, device=device)


def get_sparse_mqa_logits_metadata_reference(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens,
                                             sparse_kv_block_indices, qk_dtype, sparse_block_kv, use_unaligned_ks):
    ks, ke = cu_seq_len_k_start.long(), cu_seq_len_k_end.long()
    begin = ks.clamp(min=0, max=num_kv_tokens)
    end = torch.maximum(begin, ke.clamp(max=num_kv_tokens))
    num_max = sparse_kv_block_indices.size(1)
    counts = ((end - begin + sparse_block_kv - 1) // sparse_block_kv).clamp(max=num_max)
    phase = (ks % sparse_block_kv)[:, None] if use_unaligned_ks else 0
    starts = _slot_starts(sparse_kv_block_indices, counts, lambda idx: idx * sparse_block_kv + phase)
    header = [0, int(bool(use_unaligned_ks)), int(sparse_block_kv), num_max]
    return _pack_metadata(header, counts, starts)


def get_paged_sparse_mqa_logits_metadata_reference(context_lens, block_table, indices, page_kv,
                                                   sparse_kv_block_indices, qk_dtype, sparse_block_kv):
    num_max = sparse_kv_block_indices.size(1)
    lens = context_lens.reshape(-1).long()
    counts = ((lens.clamp(min=0) + sparse_block_kv - 1) // sparse_block_kv).clamp(max=num_max)
    blocks_per_page = page_kv // sparse_block_kv
    table = block_table.long()

    def start_of(idx):
        page = (idx // blocks_per_page).clamp(min=0, max=table.size(1) - 1)
        return table.gather(1, page) * page_kv + (idx % blocks_per_page) * sparse_block_kv

    starts = _slot_starts(sparse_kv_block_indices, counts, start_of)
    header = [1, 0, int(sparse_block_kv), num_max]
    return _pack_metadata(header, counts, starts)


def _scaled(values: torch.Tensor, sf_words: torch.Tensor) -> torch.Tensor:
    """values FP64 [..., D] times the UE8M0 scales of packed int32 words [...] (byte g scales elements 32g..)."""
    groups = values.size(-1) // SF_GROUP
    exponents = sf_words.contiguous().unsqueeze(-1).view(torch.uint8)[..., :groups].to(torch.int64)
    scales = torch.exp2((exponents - 127).double())
    return values * scales.repeat_interleave(SF_GROUP, dim=-1)


def _values(data: torch.Tensor, sf_words: torch.Tensor) -> torch.Tensor:
    raw = fp4_e2m1_to_float(data).double() if data.dtype == FP4_PACKED else data.double()
    return _scaled(raw, sf_words)


def new_logits(num_q: int, num_max: int, sparse_block_kv: int, device) -> torch.Tensor:
    """BF16 [num_q, num_max * sparse_block_kv] view of a [align(num_q, 2), 1 KiB-aligned row] buffer, as DeepGEMM
    allocates it."""
    cols = num_max * sparse_block_kv
    align = LOGITS_ROW_ALIGN_BYTES // 2
    stride = -(-cols // align) * align
    return torch.empty((num_q + num_q % 2, stride), dtype=torch.bfloat16, device=device)[:num_q, :cols]


def _logits(q_values, weights, k_values, starts, sparse_block_kv, exists) -> torch.Tensor:
    """q_values [Q, H, D], k_values [T, D] (FP64), starts [Q, S] (-1 unused) -> FP64 [Q, S * sparse_block_kv]."""
    num_q, num_max = starts.shape
    offsets = torch.arange(sparse_block_kv, device=starts.device)
    tokens = (starts.long()[:, :, None] + offsets).reshape(num_q, num_max * sparse_block_kv)
    valid = (starts.long()[:, :, None] >= 0).expand(-1, -1, sparse_block_kv).reshape(tokens.shape) & exists(tokens)
    if k_values.size(0) == 0:
        return torch.full(tokens.shape, float("-inf"), dtype=torch.float64, device=starts.device)
    keys = k_values[tokens.clamp(min=0, max=k_values.size(0) - 1)]  # [Q, C, D]
    scores = torch.einsum("qhd,qcd->qhc", q_values, keys).clamp(min=0)
    out = torch.einsum("qhc,qh->qc", scores, weights.double())
    return torch.where(valid, out, float("-inf"))


def fp8_fp4_sparse_mqa_logits_reference(q, q_sf, kv, kv_sf, weights, metadata, num_max_sparse_blocks,
                                        sparse_block_kv, use_unaligned_ks):
    num_q = q.size(0)
    logits = new_logits(num_q, num_max_sparse_blocks, sparse_block_kv, q.device)
    _, starts = unpack_metadata(metadata, num_q, num_max_sparse_blocks)
    num_kv = kv.size(0)
    out = _logits(_values(q, q_sf), weights, _values(kv, kv_sf), starts, sparse_block_kv,
                  lambda tokens: tokens < num_kv)
    logits.copy_(out.to(torch.bfloat16))
    return logits


def paged_cache_values(kv_cache: torch.Tensor, is_fp4: bool) -> torch.Tensor:
    """Every token of a fused paged cache, FP64 [pages * page_kv, 128]: in each page the values of all tokens come
    first, then their 4-byte scale words."""
    pages, page_kv, _, token_bytes = kv_cache.shape
    value_bytes = token_bytes - 4
    flat = kv_cache.as_strided((pages, page_kv * token_bytes), (kv_cache.stride(0), 1))
    data = flat[:, :page_kv * value_bytes].reshape(pages * page_kv, value_bytes)
    words = flat[:, page_kv * value_bytes:].reshape(pages * page_kv, 4).contiguous().view(torch.int32)[:, 0]
    data = data.view(FP4_PACKED) if is_fp4 else data.view(torch.float8_e4m3fn)
    return _values(data, words)


def fp8_fp4_paged_sparse_mqa_logits_reference(q, q_sf, kv_cache, weights, metadata, num_max_sparse_blocks,
                                              sparse_block_kv):
    num_q = q.size(0)
    logits = new_logits(num_q, num_max_sparse_blocks, sparse_block_kv, q.device)
    _, starts = unpack_metadata(metadata, num_q, num_max_sparse_blocks)
    k_values = paged_cache_values(kv_cache, q.dtype == FP4_PACKED)
    num_tokens = k_values.size(0)
    out = _logits(_values(q[:, 0], q_sf[:, 0]), weights, k_values, starts, sparse_block_kv,
                  lambda tokens: tokens < num_tokens)
    logits.copy_(out.to(torch.bfloat16))
    return logits
