"""Argument checks of the block-sparse MQA ops (metadata only; they run on fake tensors too).

The shapes are DeepGEMM's (its SM100 kernels): 32 heads of dimension 128; FP8 E4M3 or packed E2M1 (int8, two values
per byte) queries and keys, each row with four UE8M0 scale bytes packed in one int32 (one per 32 elements)."""

from __future__ import annotations

import torch

from ...core.data_checks import require_values
from ...core.errors import require, require_contiguous, require_dim, require_dtype, require_same_device

NUM_HEADS, HEAD_DIM = 32, 128
SPARSE_BLOCK_KV_CHOICES = (8, 16)
MAX_SPARSE_BLOCKS = 4096
FP4_PACKED = torch.int8
QK_DTYPES = (torch.float8_e4m3fn, FP4_PACKED)
HEADER_WORDS = 4           # our metadata's header: (paged, use_unaligned_ks, sparse_block_kv, num_max_sparse_blocks)
ROW_WORDS_EXTRA = 1        # per query row: the number of selected blocks, then one KV start per slot
PAGE_STRIDE_ALIGN = 512    # bytes: DeepGEMM's paged kernel reads pages with this alignment
LOGITS_ROW_ALIGN_BYTES = 1024
ROW_ALIGN = 16             # bytes: the Triton kernels' value rows (q, kv, cache pages) start at multiples of it


def metadata_bytes(num_q_tokens: int, num_max_sparse_blocks: int) -> int:
    return 4 * (HEADER_WORDS + num_q_tokens * (ROW_WORDS_EXTRA + num_max_sparse_blocks))


def _check_sparse_block_kv(sparse_block_kv) -> None:
    require(sparse_block_kv in SPARSE_BLOCK_KV_CHOICES,
            f"sparse_block_kv: expected one of {SPARSE_BLOCK_KV_CHOICES} (KV tokens per selected block), "
            f"got {sparse_block_kv}")


def _check_qk_dtype(qk_dtype) -> None:
    require(qk_dtype in QK_DTYPES,
            f"qk_dtype: expected torch.float8_e4m3fn or torch.int8 (packed FP4), the dtype of q, got {qk_dtype}")


def _check_block_indices(sparse_kv_block_indices) -> tuple[int, int]:
    require_dtype("sparse_kv_block_indices", sparse_kv_block_indices, (torch.int32,))
    require_dim("sparse_kv_block_indices", sparse_kv_block_indices, 2)
    require_contiguous("sparse_kv_block_indices", sparse_kv_block_indices)
    return tuple(sparse_kv_block_indices.shape)


def _check_per_token(name: str, t, num_q_tokens: int) -> None:
    require_dtype(name, t, (torch.int32,))
    require_dim(name, t, 1)
    require_contiguous(name, t)
    require(t.size(0) == num_q_tokens,
            f"{name}: expected {num_q_tokens} entries (one per query token, rows of sparse_kv_block_indices), "
            f"got {t.size(0)}")


def check_get_sparse_mqa_logits_metadata(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens,
                                         sparse_kv_block_indices, qk_dtype, sparse_block_kv, use_unaligned_ks):
    require_same_device(cu_seq_len_k_start=cu_seq_len_k_start, cu_seq_len_k_end=cu_seq_len_k_end,
                        sparse_kv_block_indices=sparse_kv_block_indices)
    num_q, _ = _check_block_indices(sparse_kv_block_indices)
    _check_per_token("cu_seq_len_k_start", cu_seq_len_k_start, num_q)
    _check_per_token("cu_seq_len_k_end", cu_seq_len_k_end, num_q)
    require(0 <= num_kv_tokens < 2**31, f"num_kv_tokens: expected an integer in [0, 2**31), got {num_kv_tokens}")
    _check_qk_dtype(qk_dtype)
    _check_sparse_block_kv(sparse_block_kv)


def check_get_paged_sparse_mqa_logits_metadata(context_lens, block_table, indices, page_kv, sparse_kv_block_indices,
                                               qk_dtype, sparse_block_kv):
    require_same_device(context_lens=context_lens, block_table=block_table, indices=indices,
                        sparse_kv_block_indices=sparse_kv_block_indices)
    num_q, _ = _check_block_indices(sparse_kv_block_indices)
    require_dtype("context_lens", context_lens, (torch.int32,))
    require_contiguous("context_lens", context_lens)
    require(context_lens.numel() == num_q,
            f"context_lens: expected {num_q} entries (one per query token), got {context_lens.numel()}")
    require_dtype("block_table", block_table, (torch.int32,))
    require_dim("block_table", block_table, 2)
    require(block_table.size(0) == num_q and block_table.size(1) > 0,
            f"block_table: expected [{num_q}, pages > 0] (one row per query token), got {tuple(block_table.shape)}")
    require(block_table.stride(1) == 1 or block_table.size(1) == 1,
            f"block_table: expected contiguous rows (stride(1) == 1), got strides {block_table.stride()}")
    _check_per_token("indices", indices, num_q)
    _check_sparse_block_kv(sparse_block_kv)
    require(page_kv > 0 and page_kv % sparse_block_kv == 0,
            f"page_kv: expected a positive multiple of sparse_block_kv = {sparse_block_kv}, got {page_kv}")
    _check_qk_dtype(qk_dtype)


def _check_common(q, q_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv, lead: tuple):
    require(0 < num_max_sparse_blocks <= MAX_SPARSE_BLOCKS and num_max_sparse_blocks % 4 == 0,
            f"num_max_sparse_blocks: expected a multiple of 4 in [4, {MAX_SPARSE_BLOCKS}], got {num_max_sparse_blocks}")
    _check_sparse_block_kv(sparse_block_kv)
    require_dtype("q", q, QK_DTYPES)
    is_fp4 = q.dtype == FP4_PACKED
    width = HEAD_DIM // 2 if is_fp4 else HEAD_DIM
    want = (*lead, NUM_HEADS, width)
    dims = ", ".join(("num_q_tokens",) + tuple(str(x) for x in lead[1:]))
    require(tuple(q.shape) == want,
            f"q: expected shape [{dims}, {NUM_HEADS}, {width}] ({NUM_HEADS} heads of {HEAD_DIM} "
            f"{'E2M1 values, two per byte' if is_fp4 else 'FP8 values'}), got {tuple(q.shape)}")
    require_contiguous("q", q)
    num_q = q.size(0)
    require(q_sf is not None, "q_sf: expected the query scales (int32, four UE8M0 bytes per head), got None")
    require_dtype("q_sf", q_sf, (torch.int32,))
    require(tuple(q_sf.shape) == tuple(q.shape[:-1]),
            f"q_sf: expected shape {tuple(q.shape[:-1])} (one packed UE8M0 word per head), got {tuple(q_sf.shape)}")
    require_contiguous("q_sf", q_sf)
    require_dtype("weights", weights, (torch.bfloat16,))
    require(tuple(weights.shape) == (num_q, NUM_HEADS),
            f"weights: expected shape {(num_q, NUM_HEADS)} ([num_q_tokens, heads]), got {tuple(weights.shape)}")
    require(weights.numel() == 0 or weights.stride(1) == 1,
            f"weights: expected stride(1) == 1, got strides {weights.stride()}")
    require_dtype("metadata", metadata, (torch.uint8,))
    require_dim("metadata", metadata, 1)
    require_contiguous("metadata", metadata)
    want_bytes = metadata_bytes(num_q, num_max_sparse_blocks)
    require(metadata.numel() == want_bytes,
            f"metadata: expected {want_bytes} bytes (get_*sparse_mqa_logits_metadata for {num_q} query tokens and "
            f"{num_max_sparse_blocks} sparse blocks), got {metadata.numel()}")
    return is_fp4


def check_fp8_fp4_sparse_mqa_logits(q, q_sf, kv, kv_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv,
                                    use_unaligned_ks):
    require_same_device(q=q, q_sf=q_sf, kv=kv, kv_sf=kv_sf, weights=weights, metadata=metadata)
    require_dim("q", q, 3)
    is_fp4 = _check_common(q, q_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv, (q.size(0),))
    require_dtype("kv", kv, (q.dtype,))
    width = HEAD_DIM // 2 if is_fp4 else HEAD_DIM
    require_dim("kv", kv, 2)
    require(kv.size(1) == width, f"kv: expected shape [num_kv_tokens, {width}], got {tuple(kv.shape)}")
    require_contiguous("kv", kv)
    require_dtype("kv_sf", kv_sf, (torch.int32,))
    require(tuple(kv_sf.shape) == (kv.size(0),),
            f"kv_sf: expected shape {(kv.size(0),)} (one packed UE8M0 word per KV token), got {tuple(kv_sf.shape)}")
    require_contiguous("kv_sf", kv_sf)


def kv_cache_token_bytes(is_fp4: bool) -> int:
    return (HEAD_DIM // 2 if is_fp4 else HEAD_DIM) + 4


def check_fp8_fp4_paged_sparse_mqa_logits(q, q_sf, kv_cache, weights, metadata, num_max_sparse_blocks,
                                          sparse_block_kv):
    require_same_device(q=q, q_sf=q_sf, kv_cache=kv_cache, weights=weights, metadata=metadata)
    require_dim("q", q, 4)
    require(q.size(1) == 1, f"q: expected next_n == 1 (shape [num_q_tokens, 1, heads, dim]), got {tuple(q.shape)}")
    is_fp4 = _check_common(q, q_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv, (q.size(0), 1))
    token_bytes = kv_cache_token_bytes(is_fp4)
    require_dtype("kv_cache", kv_cache, (torch.uint8,))
    require_dim("kv_cache", kv_cache, 4)
    pages, page_kv, kv_heads, last = kv_cache.shape
    require(kv_heads == 1 and last == token_bytes,
            f"kv_cache: expected [pages, page_kv, 1, {token_bytes}] ({token_bytes - 4} value bytes + 4 scale bytes "
            f"per token), got {tuple(kv_cache.shape)}")
    require(page_kv > 0 and page_kv % sparse_block_kv == 0,
            f"kv_cache: expected page_kv (dim 1) a positive multiple of sparse_block_kv = {sparse_block_kv}, "
            f"got {page_kv}")
    require(kv_cache.stride(1) == token_bytes and kv_cache.stride(3) == 1
            and kv_cache.stride(0) % PAGE_STRIDE_ALIGN == 0,
            f"kv_cache: expected dense tokens (stride(1) == {token_bytes}, stride(3) == 1) and a page stride that is a "
            f"multiple of {PAGE_STRIDE_ALIGN} bytes, got strides {kv_cache.stride()}")


# ---- Data checks: the values of the index tensors (CPU kernels always; CUDA in the checked mode) -----------------

def check_data_get_paged_sparse_mqa_logits_metadata(*, context_lens, block_table, page_kv, sparse_kv_block_indices,
                                                    sparse_block_kv, **_) -> None:
    """Context lengths non-negative; every used slot's logical block inside the row's block table (a block past
    it would read another request's page)."""
    lens = context_lens.reshape(-1).long()
    indices = sparse_kv_block_indices.long()
    num_max = indices.size(1)
    num_blocks = block_table.size(1) * (page_kv // sparse_block_kv)
    used = torch.arange(num_max, device=indices.device)[None, :] < \
        ((lens.clamp(min=0) + sparse_block_kv - 1) // sparse_block_kv)[:, None]
    width = max(num_max, 1)
    require_values([
        (lens < 0, lambda i: f"context_lens: expected non-negative lengths, got context_lens[{i}] = "
                             f"{int(context_lens.reshape(-1)[i])}"),
        (used & ((indices < 0) | (indices >= num_blocks)),
         lambda i: f"sparse_kv_block_indices: expected the used slots' logical blocks in [0, {num_blocks}) (the "
                   f"block table's {block_table.size(1)} pages x {page_kv // sparse_block_kv} blocks), got "
                   f"sparse_kv_block_indices[{i // width}, {i % width}] = {int(indices.reshape(-1)[i])}"),
    ])
