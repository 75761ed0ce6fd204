"""Registers the block-sparse MQA ops. No Triton kernel: on CUDA the torch reference runs on the device (DeepGEMM
runs them only on SM100; ``deep_gemm.backends()`` reports 'reference')."""

from __future__ import annotations

from ...core.registry import register
from . import checks
from . import reference as ref


def _fake_contiguous_metadata(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, sparse_kv_block_indices, *rest):
    num_q, num_max = sparse_kv_block_indices.shape
    return ref.new_sparse_metadata(num_q, num_max, sparse_kv_block_indices.device)


def _fake_paged_metadata(context_lens, block_table, indices, page_kv, sparse_kv_block_indices, *rest):
    num_q, num_max = sparse_kv_block_indices.shape
    return ref.new_sparse_metadata(num_q, num_max, sparse_kv_block_indices.device)


def _fake_logits(q, q_sf, kv, kv_sf, weights, metadata, num_max_sparse_blocks, sparse_block_kv, use_unaligned_ks):
    return ref.new_logits(q.size(0), num_max_sparse_blocks, sparse_block_kv, q.device)


def _fake_paged_logits(q, q_sf, kv_cache, weights, metadata, num_max_sparse_blocks, sparse_block_kv):
    return ref.new_logits(q.size(0), num_max_sparse_blocks, sparse_block_kv, q.device)


register("get_sparse_mqa_logits_metadata", check=checks.check_get_sparse_mqa_logits_metadata,
         reference=ref.get_sparse_mqa_logits_metadata_reference, fake=_fake_contiguous_metadata)
register("get_paged_sparse_mqa_logits_metadata", check=checks.check_get_paged_sparse_mqa_logits_metadata,
         reference=ref.get_paged_sparse_mqa_logits_metadata_reference, fake=_fake_paged_metadata)
register("fp8_fp4_sparse_mqa_logits", check=checks.check_fp8_fp4_sparse_mqa_logits,
         reference=ref.fp8_fp4_sparse_mqa_logits_reference, fake=_fake_logits)
register("fp8_fp4_paged_sparse_mqa_logits", check=checks.check_fp8_fp4_paged_sparse_mqa_logits,
         reference=ref.fp8_fp4_paged_sparse_mqa_logits_reference, fake=_fake_paged_logits)
