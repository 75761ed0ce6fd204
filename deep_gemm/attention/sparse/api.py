"""Public block-sparse MQA API (DeepSeek V4 indexer), call-compatible with DeepGEMM 0.2.3."""

from __future__ import annotations

from typing import Tuple, Union

import torch

from ...core.errors import fail
from ...core.eager import eager_ops

__all__ = ["get_sparse_mqa_logits_metadata", "fp8_fp4_sparse_mqa_logits", "get_paged_sparse_mqa_logits_metadata",
           "fp8_fp4_paged_sparse_mqa_logits"]

_ops = eager_ops
QPair = Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]


def _query(q):
    return (q[0], q[1]) if isinstance(q, (tuple, list)) else (q, None)


def get_sparse_mqa_logits_metadata(cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor,
                                   num_kv_tokens: int, sparse_kv_block_indices: torch.Tensor,
                                   qk_dtype: torch.dtype, sparse_block_kv: int,
                                   use_unaligned_ks: bool = False) -> torch.Tensor:
    """Metadata of :func:`fp8_fp4_sparse_mqa_logits` (an opaque ``uint8`` buffer; build once per batch).

    Parameters
    ----------
    cu_seq_len_k_start, cu_seq_len_k_end : Tensor
        int32 ``[num_q_tokens]``: each query row's KV range ``[ks, ke)`` (clipped to ``num_kv_tokens``).
    num_kv_tokens : int
        Tokens of the ``kv`` the logits will read.
    sparse_kv_block_indices : Tensor
        int32 ``[num_q_tokens, num_max_sparse_blocks]``, contiguous. Row i starts with its
        ``min(num_max_sparse_blocks, ceil((ke - ks) / sparse_block_kv))`` selected blocks: unique, increasing
        absolute block indices (token ``idx * sparse_block_kv``; plus ``ks % sparse_block_kv`` with
        ``use_unaligned_ks``, otherwise ks must be a multiple of ``sparse_block_kv``); the rest is ignored.
    qk_dtype : torch.dtype
        The dtype of q and kv: ``torch.float8_e4m3fn`` or ``torch.int8`` (packed FP4).
    sparse_block_kv : int
        8 or 16 tokens per selected block.
    """
    return _ops.get_sparse_mqa_logits_metadata.default(
        cu_seq_len_k_start, cu_seq_len_k_end, int(num_kv_tokens), sparse_kv_block_indices, qk_dtype,
        int(sparse_block_kv), bool(use_unaligned_ks))


def get_paged_sparse_mqa_logits_metadata(context_lens: torch.Tensor, block_table: torch.Tensor,
                                         indices: torch.Tensor, page_kv: int, sparse_kv_block_indices: torch.Tensor,
                                         qk_dtype: torch.dtype, sparse_block_kv: int) -> torch.Tensor:
    """Metadata of :func:`fp8_fp4_paged_sparse_mqa_logits`.

    Parameters
    ----------
    context_lens : Tensor
        int32, one context length per query row (``numel == num_q_tokens``).
    block_table : Tensor
        int32 ``[num_q_tokens, pages]``, row i the pages of row i's request (rows of one request are equal).
    indices : Tensor
        int32 ``[num_q_tokens]``: the request of each row, a request's rows consecutive (DeepGEMM pairs two rows
        of a request in one KV pass; the result does not depend on it).
    page_kv : int
        Tokens per page, a multiple of ``sparse_block_kv``.
    sparse_kv_block_indices : Tensor
        int32 ``[num_q_tokens, num_max_sparse_blocks]``: row i starts with its
        ``min(num_max_sparse_blocks, ceil(context_lens[i] / sparse_block_kv))`` selected logical blocks, each inside
        the row's block table (``[0, pages * page_kv / sparse_block_kv)``; checked on the CPU, and on CUDA in the
        checked mode, ``set_checks("data")``); the rest is ignored.
    qk_dtype, sparse_block_kv
        As in :func:`get_sparse_mqa_logits_metadata`.
    """
    return _ops.get_paged_sparse_mqa_logits_metadata.default(
        context_lens, block_table, indices, int(page_kv), sparse_kv_block_indices, qk_dtype, int(sparse_block_kv))


def fp8_fp4_sparse_mqa_logits(q: QPair, kv: Tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor,
                              metadata: torch.Tensor, num_max_sparse_blocks: int, sparse_block_kv: int,
                              use_unaligned_ks: bool = False) -> torch.Tensor:
    """Indexer logits over the selected KV blocks of each query row.

    Parameters
    ----------
    q : (Tensor, Tensor)
        ``(Q, Q_SF)``: Q is FP8 E4M3 ``[num_q_tokens, 32, 128]`` or packed E2M1 ``int8 [num_q_tokens, 32, 64]``;
        Q_SF int32 ``[num_q_tokens, 32]``, four UE8M0 bytes per head (byte g scales elements 32g .. 32g + 31).
    kv : (Tensor, Tensor)
        ``(KV, KV_SF)``: KV of Q's dtype ``[num_kv_tokens, 128]`` (FP4: 64 bytes); KV_SF int32 ``[num_kv_tokens]``.
    weights : Tensor
        BF16 ``[num_q_tokens, 32]``.
    metadata : Tensor
        From :func:`get_sparse_mqa_logits_metadata` for these rows.
    num_max_sparse_blocks : int
        Selected blocks per row (a multiple of 4, at most 4096); ``sparse_block_kv``: 8 or 16.

    Returns
    -------
    Tensor
        BF16 ``[num_q_tokens, num_max_sparse_blocks * sparse_block_kv]`` (a view of a buffer with 1 KiB-aligned
        rows): column ``j * sparse_block_kv + t`` is ``sum_h relu(q_h . k) * w_h`` for token t of row i's j-th block.
        Every token of a selected block is computed (also past ke); unused slots are -inf.
    """
    q_data, q_sf = _query(q)
    if not isinstance(kv, (tuple, list)) or len(kv) != 2:
        fail(f"kv: expected a (data, scale) pair, got {type(kv).__name__}")
    return _ops.fp8_fp4_sparse_mqa_logits.default(q_data, q_sf, kv[0], kv[1], weights, metadata,
                                                  int(num_max_sparse_blocks), int(sparse_block_kv),
                                                  bool(use_unaligned_ks))


def fp8_fp4_paged_sparse_mqa_logits(q: QPair, kv_cache: torch.Tensor, weights: torch.Tensor, metadata: torch.Tensor,
                                    num_max_sparse_blocks: int, sparse_block_kv: int) -> torch.Tensor:
    """:func:`fp8_fp4_sparse_mqa_logits` over a paged KV cache.

    ``q`` is ``(Q [num_q_tokens, 1, 32, 128 | 64], Q_SF int32 [num_q_tokens, 1, 32])``; ``kv_cache`` is uint8
    ``[pages, page_kv, 1, 132 | 68]`` (in each page the values of all tokens, then their int32 UE8M0 scale words;
    page stride a multiple of 512 bytes); ``metadata`` from :func:`get_paged_sparse_mqa_logits_metadata`.
    """
    q_data, q_sf = _query(q)
    return _ops.fp8_fp4_paged_sparse_mqa_logits.default(q_data, q_sf, kv_cache, weights, metadata,
                                                        int(num_max_sparse_blocks), int(sparse_block_kv))
