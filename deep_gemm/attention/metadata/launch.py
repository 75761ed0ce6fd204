"""CUDA launcher of ``get_mqa_logits_metadata``: one launch of ``kernels._mqa_logits_metadata_kernel`` (one program
per SM of the schedule), no host read of device data, so the call is CUDA-graph capturable. It returns
``NotImplemented`` (the reference then runs on the device) where the kernel does not apply: not asked for (only while
the family is listed in ``core/gpu_validation.py``; ``plan.MetadataOverrides(kernels=True)`` asks), on a GPU below
sm_80, and for sizes whose schedule cost could reach 2^31 (``plan.kernel_fits``: the kernel's maths is 32-bit).

Importing this module does not import Triton (the kernel is imported at the first launch).
"""

from __future__ import annotations

import torch

from ...core import arch
from ...core.launch import launch
from . import plan as md_plan


def get_mqa_logits_metadata_triton(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, num_heads, *,
                                   overrides: md_plan.MetadataOverrides = md_plan.NO_OVERRIDES,
                                   record: list | None = None):
    if not md_plan.kernels_wanted(overrides) or not arch.has_mma(arch.sm_of_tensor(cu_seq_len_k_start)):
        return NotImplemented
    num_sms = md_plan.schedule_sms()
    num_q = cu_seq_len_k_start.size(0)
    if not md_plan.kernel_fits(num_q, num_heads, num_kv_tokens):
        return NotImplemented
    bq = md_plan.block_q(num_heads)
    out = torch.empty(md_plan.metadata_words(num_q, num_heads, num_sms), dtype=torch.int32,
                      device=cu_seq_len_k_start.device)
    from .kernels import _mqa_logits_metadata_kernel
    pad = md_plan.span_word_offset(num_sms) != 3 * num_sms
    args = (cu_seq_len_k_start, cu_seq_len_k_end, out, num_q, num_kv_tokens, num_sms, bq, md_plan.SPLIT_KV,
            md_plan.SEGMENT_COST, md_plan.SPLIT_COST, pad, md_plan.KERNEL_CHUNK)
    launch(_mqa_logits_metadata_kernel, (num_sms, 1, 1), args, name="mqa_logits_metadata", config_key=(bq, pad),
           num_warps=md_plan.KERNEL_WARPS, device_index=out.device.index or 0, record=record)
    return out
