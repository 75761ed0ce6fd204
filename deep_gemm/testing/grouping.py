"""M-grouped contiguous layouts for tests, sanitizer cases and benchmarks: what an MoE engine hands the
``m_grouped_*_contiguous`` GEMMs."""

from __future__ import annotations

from typing import Sequence

import torch


def contiguous_layout(counts: Sequence[int], alignment: int, device=None) -> tuple[int, torch.Tensor, list[int]]:
    """Rows of groups with ``counts[g]`` rows each, every group padded to a multiple of ``alignment`` (at least one
    aligned segment in all). Returns ``(total rows, expert id per row as int32 with -1 on padding rows, each group's
    end row for the psum layout)``."""
    total = sum(-(-c // alignment) * alignment for c in counts) or alignment
    ids = torch.full((total,), -1, dtype=torch.int32)
    ends, start = [], 0
    for g, count in enumerate(counts):
        ids[start:start + count] = g
        ends.append(start + count)
        start += -(-count // alignment) * alignment
    return total, ids.to(device) if device is not None else ids, ends
