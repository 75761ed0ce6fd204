"""Argument checks of ``batched_syrk`` / ``batched_symm`` (metadata only: they run on fake tensors too)."""

from __future__ import annotations

import torch

from ...core.errors import require, require_dim, require_dtype, require_same_device

DTYPES = (torch.bfloat16, torch.float32)


def _require_matrix_strides(name: str, t: torch.Tensor) -> None:
    """Each matrix row- or column-major (one unit stride in the last two dims), as cuBLASLt's layouts take them."""
    if t.numel() == 0:
        return
    rows, cols = t.shape[-2], t.shape[-1]
    row_major = t.stride(-1) == 1 or cols == 1
    col_major = t.stride(-2) == 1 or rows == 1
    require(row_major or col_major,
            f"{name}: expected each matrix row- or column-major (stride(-1) == 1 or stride(-2) == 1), "
            f"got strides {t.stride()}")


def _check_batch(names_and_tensors) -> None:
    dims = {t.dim() for _, t in names_and_tensors}
    require(len(dims) == 1,
            "a, b, d: expected all 2-D or all 3-D, got "
            + ", ".join(f"{n} {tuple(t.shape)}" for n, t in names_and_tensors))
    if dims == {3}:
        batch = names_and_tensors[0][1].size(0)
        for n, t in names_and_tensors[1:]:
            require(t.size(0) == batch, f"{n}: expected batch size {batch} (dim 0 of a), got shape {tuple(t.shape)}")


def check_batched_syrk(a, d) -> None:
    require_same_device(a=a, d=d)
    require_dtype("a", a, DTYPES)
    require_dtype("d", d, (a.dtype,))
    require_dim("a", a, (2, 3))
    require_dim("d", d, (2, 3))
    _check_batch([("a", a), ("d", d)])
    m = a.size(-2)
    require(tuple(d.shape[-2:]) == (m, m),
            f"d: expected [..., {m}, {m}] (M of a, twice), got shape {tuple(d.shape)}")
    _require_matrix_strides("a", a)
    _require_matrix_strides("d", d)


def check_batched_symm(a, b, d) -> None:
    require_same_device(a=a, b=b, d=d)
    require_dtype("a", a, DTYPES)
    require_dtype("b", b, (a.dtype,))
    require_dtype("d", d, (a.dtype,))
    for name, t in (("a", a), ("b", b), ("d", d)):
        require_dim(name, t, (2, 3))
    _check_batch([("a", a), ("b", b), ("d", d)])
    m = a.size(-2)
    require(a.size(-1) == m, f"a: expected square matrices [..., M, M], got shape {tuple(a.shape)}")
    require(b.size(-2) == m, f"b: expected [..., {m}, N] (M of a rows), got shape {tuple(b.shape)}")
    n = b.size(-1)
    require(tuple(d.shape[-2:]) == (m, n), f"d: expected [..., {m}, {n}], got shape {tuple(d.shape)}")
    for name, t in (("a", a), ("b", b), ("d", d)):
        _require_matrix_strides(name, t)
