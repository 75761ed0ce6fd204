"""Argument checks of ``get_mqa_logits_metadata``."""

from __future__ import annotations

import torch

from ...core.errors import require, require_contiguous, require_dim, require_dtype, require_same_device

HEAD_COUNTS = (8, 16, 32, 64)


def check_get_mqa_logits_metadata(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, num_heads) -> None:
    require_same_device(cu_seq_len_k_start=cu_seq_len_k_start, cu_seq_len_k_end=cu_seq_len_k_end)
    for name, t in (("cu_seq_len_k_start", cu_seq_len_k_start), ("cu_seq_len_k_end", cu_seq_len_k_end)):
        require_dtype(name, t, (torch.int32,))
        require_dim(name, t, 1)
        require_contiguous(name, t)
    require(cu_seq_len_k_start.size(0) == cu_seq_len_k_end.size(0),
            f"cu_seq_len_k_end: expected {cu_seq_len_k_start.size(0)} entries (one per query row, as "
            f"cu_seq_len_k_start), got {cu_seq_len_k_end.size(0)}")
    require(0 <= num_kv_tokens < 2**31, f"num_kv_tokens: expected an integer in [0, 2**31), got {num_kv_tokens}")
    require(num_heads in HEAD_COUNTS, f"num_heads: expected one of {HEAD_COUNTS}, got {num_heads}")
