"""Accuracy measures shared by tests and benchmarks."""

from __future__ import annotations

import torch


def calc_diff(x: torch.Tensor, y: torch.Tensor) -> float:
    """DeepGEMM's GEMM accuracy measure: ``1 - 2 * sum(x * y) / sum(x^2 + y^2)`` in float64 (0 when both are zero).

    0 for identical tensors, about ``relative_error^2 / 2`` for small differences; a wrong sign or scale pushes it
    towards 1 and beyond.
    """
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            from ..core.errors import DeepGEMMError
            raise DeepGEMMError(f"{name}: expected a tensor, got {type(t).__name__}")
    x, y = x.double(), y.double()
    denominator = (x * x + y * y).sum()
    if denominator == 0:
        return 0.0
    return float(1 - 2 * (x * y).sum() / denominator)


def count_bytes(*tensors) -> int:
    """Total bytes of the given tensors (nested tuples/lists are walked, None skipped)."""
    total = 0
    for t in tensors:
        if isinstance(t, (tuple, list)):
            total += count_bytes(*t)
        elif t is not None:
            total += t.numel() * t.element_size()
    return total


def assert_bitwise_equal(x: torch.Tensor, y: torch.Tensor, label: str = "") -> None:
    """Raise AssertionError unless x and y have the same shape, dtype and bytes (NaN payloads included)."""
    prefix = f"{label}: " if label else ""
    assert x.shape == y.shape, f"{prefix}shape {tuple(x.shape)} != {tuple(y.shape)}"
    assert x.dtype == y.dtype, f"{prefix}dtype {x.dtype} != {y.dtype}"
    # reshape(-1) first: contiguous() leaves a size-1 dim's odd stride, which a byte view rejects.
    xb = x.contiguous().reshape(-1).view(torch.uint8) if x.numel() else x
    yb = y.contiguous().reshape(-1).view(torch.uint8) if y.numel() else y
    if not torch.equal(xb, yb):
        mismatches = int((xb != yb).sum())
        raise AssertionError(f"{prefix}{mismatches} of {xb.numel()} bytes differ")
