"""Registers the MQA-logits ops: one check, one reference (CPU kernel, CUDA fallback) and one fake kernel per op.

The fake kernels allocate through the same ``new_*`` helpers as the references, so fake outputs carry the real
sizes, strides (1 KiB-aligned padded rows) and storage size.
"""

from __future__ import annotations

import torch

from ..core import arch
from ..core.registry import register, set_data_check
from ..core.plans import replayable_allocating
from . import checks
from . import launch as tri
from . import reference as ref


def _fake_fp8_fp4_mqa_logits(q, q_sf, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                             max_seqlen_k, logits_dtype, schedule_meta=None):
    return ref.new_mqa_logits(q.size(0), kv.size(0), q.size(1), max_seqlen_k, logits_dtype, q.device)


def _fake_fp8_mqa_logits(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits, max_seqlen_k):
    return _fake_fp8_fp4_mqa_logits(q, None, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                                    max_seqlen_k, torch.float32)


def _fake_get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms, indices):
    return ref.new_paged_mqa_logits_metadata(num_sms, context_lens.device)


def _fake_fp8_fp4_paged_mqa_logits(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta,
                                   max_context_len, clean_logits, logits_dtype, indices):
    return ref.new_paged_mqa_logits(q.size(0) * q.size(1), max_context_len, logits_dtype, q.device)


def _fake_fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                               clean_logits, indices):
    return _fake_fp8_fp4_paged_mqa_logits(q, None, kv_cache, weights, context_lens, block_table, schedule_meta,
                                          max_context_len, clean_logits, torch.float32, indices)


# Op name -> (fake kernel, architectures the Triton kernel runs on); the check, reference and Triton launcher of
# op ``name`` are ``checks.check_<name>``, ``reference.<name>_reference`` and ``launch.<name>_triton``.
_OPS = {
    "fp8_fp4_mqa_logits": (_fake_fp8_fp4_mqa_logits, arch.FP8_OPS),
    "fp8_mqa_logits": (_fake_fp8_mqa_logits, arch.FP8_OPS),
    "get_paged_mqa_logits_metadata": (_fake_get_paged_mqa_logits_metadata, arch.ANY_MMA),
    "fp8_fp4_paged_mqa_logits": (_fake_fp8_fp4_paged_mqa_logits, arch.FP8_OPS),
    "fp8_paged_mqa_logits": (_fake_fp8_paged_mqa_logits, arch.FP8_OPS),
}

for _name, (_fake, _arch) in _OPS.items():
    register(_name, check=getattr(checks, f"check_{_name}"), reference=getattr(ref, f"{_name}_reference"),
             fake=_fake, triton=replayable_allocating(getattr(tri, f"{_name}_triton")), arch=_arch)

# Data checks (windows, context lengths, page ids): always on the CPU, on CUDA in the checked mode.
for _name in ("fp8_fp4_mqa_logits", "fp8_mqa_logits"):
    set_data_check(_name, checks.check_data_mqa_logits)
for _name in ("fp8_fp4_paged_mqa_logits", "fp8_paged_mqa_logits"):
    set_data_check(_name, checks.check_data_paged_mqa_logits)
