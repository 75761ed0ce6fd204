"""Public ``get_mqa_logits_metadata``, call-compatible with DeepGEMM 0.2.3."""

from __future__ import annotations

import torch

from ...core.eager import eager_ops

__all__ = ["get_mqa_logits_metadata"]

_ops = eager_ops


def get_mqa_logits_metadata(cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, num_kv_tokens: int,
                            num_heads: int) -> torch.Tensor:
    """The split-K schedule of the contiguous-KV indexer logits over ``get_num_sms()`` SMs (148, a B200's, without
    a GPU): int32 words, layout in ``deep_gemm/attention/metadata/reference.py``. Build it once per batch.

    ``cu_seq_len_k_start`` / ``cu_seq_len_k_end``: int32 ``[num_q_tokens]`` KV ranges per query row;
    ``num_heads``: 8, 16, 32 or 64 (a Q block holds ``128 / num_heads`` rows).

    Pass it as ``fp8_fp4_mqa_logits(..., schedule_meta=meta)``: checked there (dtype, length for the current
    ``get_num_sms()``), not read (our kernels schedule themselves; the logits do not depend on it)."""
    return _ops.get_mqa_logits_metadata.default(cu_seq_len_k_start, cu_seq_len_k_end, int(num_kv_tokens),
                                                int(num_heads))
