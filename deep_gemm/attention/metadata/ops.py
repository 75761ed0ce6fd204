"""Registers ``get_mqa_logits_metadata``: check, reference (CPU kernel, CUDA fallback), fake kernel and the Triton
launcher (``launch.py``)."""

from __future__ import annotations

from ...core import arch, gpu_validation
from ...core.plans import replayable_allocating
from ...core.registry import register
from . import launch
from .plan import FAMILY
from .checks import check_get_mqa_logits_metadata
from .reference import get_mqa_logits_metadata_reference, new_mqa_logits_metadata


def _fake(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, num_heads):
    return new_mqa_logits_metadata(cu_seq_len_k_start.size(0), num_heads, cu_seq_len_k_start.device)


register("get_mqa_logits_metadata", check=check_get_mqa_logits_metadata,
         reference=get_mqa_logits_metadata_reference, fake=_fake,
         triton=replayable_allocating(launch.get_mqa_logits_metadata_triton), arch=arch.ANY_MMA,
         triton_note=gpu_validation.opt_in_note(FAMILY))
