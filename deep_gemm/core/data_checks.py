"""Helpers of the data checks (values of index tensors; see ``core/checks_mode.py``): device reductions, then one
host sync for all the conditions of a call, then ``DeepGEMMError`` naming the argument, the first bad index and its
value. They run on the host data on CPU and on the device data on CUDA (the checked mode)."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from .errors import fail


def first_true(masks: Sequence[torch.Tensor]) -> list[int]:
    """For each boolean tensor, the flat index of its first True element, or -1: one host sync for all of them."""
    if not masks:
        return []
    firsts = []
    for mask in masks:
        flat = mask.reshape(-1)
        if flat.numel() == 0:
            firsts.append(torch.full((), -1, dtype=torch.int64, device=flat.device))
            continue
        positions = torch.arange(flat.numel(), device=flat.device)
        first = torch.where(flat, positions, flat.numel()).min()
        firsts.append(torch.where(first == flat.numel(), -1, first))
    return torch.stack(firsts).tolist()


def index_text(shape: Sequence[int], flat: int) -> str:
    """``[i]`` or ``[i, j]`` of a flat index into ``shape``."""
    coords = []
    for size in reversed(list(shape)):
        coords.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return "[" + ", ".join(str(c) for c in reversed(coords)) + "]"


def require_values(conditions: Sequence[tuple[torch.Tensor, Callable[[int], str]]]) -> None:
    """``conditions``: (bad mask, message of its first bad flat index) pairs. Raises for the first condition (in
    order) with a bad element; one host sync when every condition holds."""
    firsts = first_true([mask for mask, _ in conditions])
    for (mask, message), first in zip(conditions, firsts):
        if first >= 0:
            fail(message(first))
