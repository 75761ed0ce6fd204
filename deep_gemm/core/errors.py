"""The one exception type every deep_gemm check raises, and small argument validators.

`DeepGEMMError` derives from both `ValueError` (idiomatic for bad arguments) and `RuntimeError` (what DeepGEMM's
C++ asserts surface as), so code written against either library keeps catching it.

The validators work on real, fake and meta tensors alike: they only read dtype, shape, strides and device, never
data, so the same check runs inside the CPU, CUDA and fake kernels. Every message names the argument, what was
expected and what was given.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch


class DeepGEMMError(ValueError, RuntimeError):
    """Bad input to a deep_gemm op (dtype, shape, layout, alignment, device or an out-of-range argument)."""


def fail(message: str) -> None:
    raise DeepGEMMError(message)


def require(condition, message: str) -> None:
    if not condition:
        raise DeepGEMMError(message)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def require_dtype(name: str, t: torch.Tensor, allowed: Iterable[torch.dtype]) -> None:
    allowed = tuple(allowed)
    if not isinstance(t, torch.Tensor):  # e.g. None from a caller: name it rather than fail on `.dtype`
        fail(f"{name}: expected a tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        names = " or ".join(_dtype_name(d) for d in allowed)
        fail(f"{name}: expected dtype {names}, got {_dtype_name(t.dtype)}")


def require_dim(name: str, t: torch.Tensor, ndims: int | Sequence[int]) -> None:
    if not isinstance(t, torch.Tensor):
        fail(f"{name}: expected a tensor, got {type(t).__name__}")
    options = (ndims,) if isinstance(ndims, int) else tuple(ndims)
    if t.dim() not in options:
        want = " or ".join(f"{n}-D" for n in options)
        fail(f"{name}: expected a {want} tensor, got shape {tuple(t.shape)}")


def require_shape(name: str, t: torch.Tensor, shape: Sequence[int], what: str = "") -> None:
    if tuple(t.shape) != tuple(shape):
        suffix = f" ({what})" if what else ""
        fail(f"{name}: expected shape {tuple(int(s) for s in shape)}{suffix}, got {tuple(t.shape)}")


def require_same_device(**tensors: torch.Tensor | None) -> None:
    """All given tensors (None skipped) live on one device."""
    first_name, first_device = None, None
    for name, t in tensors.items():
        if t is None:
            continue
        if first_device is None:
            first_name, first_device = name, t.device
        elif t.device != first_device:
            fail(f"{name}: expected device {first_device} (the device of {first_name}), got {t.device}")


def require_int_range(name: str, value: int, low: int, high: int) -> None:
    if not (low <= value <= high):
        fail(f"{name}: expected an integer in [{low}, {high}], got {value}")


def require_row_major(name: str, t: torch.Tensor) -> None:
    """Last dimension contiguous (the row stride may exceed the row length)."""
    if t.numel() > 0 and t.dim() > 0 and t.size(-1) > 1 and t.stride(-1) != 1:
        fail(f"{name}: expected the last dimension to be contiguous (stride(-1) == 1), got strides {t.stride()}")


def require_contiguous(name: str, t: torch.Tensor) -> None:
    if not t.is_contiguous():
        fail(f"{name}: expected a contiguous tensor, got shape {tuple(t.shape)} with strides {t.stride()}")


def major_of(t: torch.Tensor) -> str | None:
    """'k' if the last dim is contiguous, 'mn' if the second-to-last is, else None (DeepGEMM's majorness rule).

    A dimension of size 1 counts as contiguous whatever its stride (torch gives such dims arbitrary strides).
    """
    if t.size(-1) <= 1 or t.stride(-1) == 1:
        return "k"
    if t.size(-2) <= 1 or t.stride(-2) == 1:
        return "mn"
    return None


def require_major(name: str, t: torch.Tensor, allowed: Sequence[str] = ("k", "mn")) -> str:
    major = major_of(t)
    if major not in allowed:
        want = " or ".join(f"{m.upper()}-major" for m in allowed)
        fail(f"{name}: expected a {want} layout (a unit stride in the last one of the last two dims), "
             f"got shape {tuple(t.shape)} with strides {t.stride()}")
    return major
