"""Registers the block-sparse MQA ops: one check, one reference (CPU kernel, CUDA fallback), one fake kernel and one
Triton launcher per op (``launch.py``; DeepGEMM runs these ops only on SM100, the Triton kernels from sm_80 on).

The kernels await their GPU run (``core/gpu_validation.py``): until then the reference runs on CUDA unless
``plan.SparseOverrides(kernels=True)`` asks for them."""

from __future__ import annotations

from ...core import arch, gpu_validation
from ...core.plans import replayable_allocating
from ...core.registry import register, set_data_check
from . import checks
from . import launch as tri
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


# Argument forms the launchers decline (the reference runs them), as backends() reports them.
_DECLINED = "the reference for misaligned storage: metadata not 4-byte, q / kv / kv_cache not 16-byte aligned"
_NOTE = gpu_validation.opt_in_note("sparse_attention", _DECLINED)
# The logits kernels dequantise FP4 in integer arithmetic (every MMA architecture) but load FP8 as e4m3.
_LOGITS_ARCH = arch.OpArch(reference_below=((arch.MIN_FP8_SM, "FP8 q runs the reference"),))

for _name, _fake in (("get_sparse_mqa_logits_metadata", _fake_contiguous_metadata),
                     ("get_paged_sparse_mqa_logits_metadata", _fake_paged_metadata),
                     ("fp8_fp4_sparse_mqa_logits", _fake_logits),
                     ("fp8_fp4_paged_sparse_mqa_logits", _fake_paged_logits)):
    register(_name, check=getattr(checks, f"check_{_name}"), reference=getattr(ref, f"{_name}_reference"),
             fake=_fake, triton=replayable_allocating(getattr(tri, f"{_name}_triton")),
             arch=_LOGITS_ARCH if "logits_metadata" not in _name else arch.ANY_MMA, triton_note=_NOTE)

# Data checks (values of the index tensors): always on the CPU, on CUDA in the checked mode (core/checks_mode.py).
set_data_check("get_paged_sparse_mqa_logits_metadata", checks.check_data_get_paged_sparse_mqa_logits_metadata)
