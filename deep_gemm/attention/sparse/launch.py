"""CUDA launchers of the block-sparse MQA ops (DeepSeek V4 indexer): allocate the output as the reference does, ask
``plan.py`` for the tile, launch ``kernels.py``. One launch per call, no host read of device data, so every call is
CUDA-graph capturable.

They return ``NotImplemented`` (the reference then runs on the device) where the kernels do not apply: not asked for
(only while the family is listed in ``core/gpu_validation.py``; ``plan.SparseOverrides(kernels=True)`` asks), a GPU
without tensor-core dots (below sm_80), a ``metadata`` buffer whose first byte is not 4-byte aligned (its int32 words
are read in place), ``q``, ``kv`` or a paged ``kv_cache`` whose first byte is not 16-byte aligned (the kernels load
16-byte row chunks; torch's allocations always are), and index tensors too wide for the metadata grid.

Importing this module does not import Triton (the kernels are imported at the first launch).
"""

from __future__ import annotations

import torch

from ...core import arch
from ...core.launch import interpreting, launch
from ...core.runtime import usable_sms
from ..launch import _typed_alias
from . import plan as sparse_plan
from . import reference as ref
from .checks import FP4_PACKED, ROW_ALIGN, kv_cache_token_bytes

WORD_BYTES = 4  # the metadata's int32 words


def _kernels():
    from . import kernels
    return kernels


def _device_index(t: torch.Tensor) -> int:
    return t.device.index or 0


def _declines(t: torch.Tensor, overrides: sparse_plan.SparseOverrides) -> bool:
    return not sparse_plan.kernels_wanted(overrides) or not arch.has_mma(arch.sm_of_tensor(t))


def _declines_logits(q: torch.Tensor, overrides: sparse_plan.SparseOverrides) -> bool:
    """The logits kernels also need FP8 types for FP8 q (Triton has no e4m3 below sm_89; FP4 q dequantises in
    integer arithmetic and runs on every MMA architecture)."""
    return _declines(q, overrides) or (q.dtype != FP4_PACKED and not arch.has_fp8_mma(arch.sm_of_tensor(q)))


# ---- metadata ----------------------------------------------------------------------------------------------------

def _metadata(first, end, table, indices, num_kv, page_kv, sparse_block_kv, paged, unaligned, record):
    num_q, num_max = indices.shape
    grid = sparse_plan.metadata_grid(num_q, num_max)
    if grid[1] > sparse_plan.GRID_Y_LIMIT:
        return NotImplemented
    out = ref.new_sparse_metadata(num_q, num_max, indices.device)
    words = out.view(torch.int32)
    args = (first, end, table, indices, words, num_q, num_max, num_kv, page_kv, table.size(1), table.stride(0),
            sparse_block_kv, paged, unaligned, sparse_plan.METADATA_BLOCK)
    launch(_kernels()._sparse_mqa_metadata_kernel, grid, args, name="sparse_mqa_logits_metadata",
           config_key=(sparse_block_kv, paged, unaligned), num_warps=sparse_plan.METADATA_WARPS,
           device_index=_device_index(out), record=record)
    return out


def get_sparse_mqa_logits_metadata_triton(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens,
                                          sparse_kv_block_indices, qk_dtype, sparse_block_kv, use_unaligned_ks, *,
                                          overrides: sparse_plan.SparseOverrides = sparse_plan.NO_OVERRIDES,
                                          record: list | None = None):
    if _declines(sparse_kv_block_indices, overrides):
        return NotImplemented
    # (the block-table argument is unused without PAGED: any int32 tensor of the device)
    return _metadata(cu_seq_len_k_start, cu_seq_len_k_end, sparse_kv_block_indices, sparse_kv_block_indices,
                     num_kv_tokens, 1, sparse_block_kv, False, bool(use_unaligned_ks), record)


def get_paged_sparse_mqa_logits_metadata_triton(context_lens, block_table, indices, page_kv, sparse_kv_block_indices,
                                                qk_dtype, sparse_block_kv, *,
                                                overrides: sparse_plan.SparseOverrides = sparse_plan.NO_OVERRIDES,
                                                record: list | None = None):
    if _declines(sparse_kv_block_indices, overrides):
        return NotImplemented
    lens = context_lens.reshape(-1)
    return _metadata(lens, lens, block_table, sparse_kv_block_indices, 0, page_kv, sparse_block_kv, True, False,
                     record)


# ---- logits ------------------------------------------------------------------------------------------------------

def _logits(q, q_sf, kv_values, kv_words, weights, metadata, num_max, sparse_block_kv, num_tokens, page_kv,
            stride_page, paged, overrides, record):
    num_q = q.size(0)
    out = ref.new_logits(num_q, num_max, sparse_block_kv, q.device)
    if num_q == 0:
        return out
    is_fp4 = q.dtype == FP4_PACKED
    num_heads = q.size(-2)
    head_dim = q.size(-1) * (2 if is_fp4 else 1)
    cfg = sparse_plan.plan(num_q, num_max, sparse_block_kv, usable_sms(), overrides)
    dot_bf16 = not interpreting()  # (the interpreter's BF16 dot is wrong: FP32 operands there, the same values)
    args = (q, q_sf, kv_values, kv_words, weights, metadata.view(torch.int32), out,
            num_max, num_tokens, page_kv, stride_page, weights.stride(0), out.stride(0),
            num_heads, head_dim, sparse_block_kv, cfg.blocks_per_step, cfg.steps, paged, is_fp4, dot_bf16)
    launch(_kernels()._fp8_fp4_sparse_mqa_logits_kernel, sparse_plan.grid(num_q, num_max, cfg), args,
           name="fp8_fp4_sparse_mqa_logits",
           config_key=(cfg, num_heads, head_dim, sparse_block_kv, paged, is_fp4, dot_bf16),
           num_warps=cfg.num_warps, device_index=_device_index(out), record=record)
    return out


def _words_aligned(t: torch.Tensor) -> bool:
    return t.storage_offset() * t.element_size() % WORD_BYTES == 0


def _rows_aligned(*tensors: torch.Tensor) -> bool:
    """Whether the value rows of ``tensors`` start at ROW_ALIGN-byte multiples (the kernels' 16-byte loads)."""
    return all(t.data_ptr() % ROW_ALIGN == 0 for t in tensors)


def fp8_fp4_sparse_mqa_logits_triton(q, q_sf, kv, kv_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv,
                                     use_unaligned_ks, *,
                                     overrides: sparse_plan.SparseOverrides = sparse_plan.NO_OVERRIDES,
                                     record: list | None = None):
    if _declines_logits(q, overrides) or not _words_aligned(metadata) or not _rows_aligned(q, kv):
        return NotImplemented
    return _logits(q, q_sf, kv, kv_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv, kv.size(0), 1, 0,
                   False, overrides, record)


def fp8_fp4_paged_sparse_mqa_logits_triton(q, q_sf, kv_cache, weights, metadata, num_max_sparse_blocks,
                                           sparse_block_kv, *,
                                           overrides: sparse_plan.SparseOverrides = sparse_plan.NO_OVERRIDES,
                                           record: list | None = None):
    if _declines_logits(q, overrides) or not _words_aligned(metadata) or not _rows_aligned(q, kv_cache):
        return NotImplemented
    is_fp4 = q.dtype == FP4_PACKED
    pages, page_kv = kv_cache.size(0), kv_cache.size(1)
    stride_page = kv_cache.stride(0)
    cache_bytes = (pages - 1) * stride_page + page_kv * kv_cache_token_bytes(is_fp4) if pages else 0
    values = _typed_alias(kv_cache, FP4_PACKED if is_fp4 else torch.float8_e4m3fn, cache_bytes)
    words = _typed_alias(kv_cache, torch.int32, cache_bytes)
    return _logits(q, q_sf, values, words, weights, metadata, num_max_sparse_blocks, sparse_block_kv, pages * page_kv,
                   page_kv, stride_page, True, overrides, record)

