"""Checks of the einsum ops (BF16 ``einsum`` and block-scaled ``fp8_einsum``), shared by the CPU, CUDA and fake
kernels. Metadata only; every message names the argument, the expectation and what was given.

Only DeepGEMM's exact expression strings are accepted. Each is a (batched) GEMM once its letters are sorted into
groups (``Equation``): batch letters appear in a, b and the output, M letters in a and the output, N letters in b
and the output, K letters (contracted) in a and b only. ``fp8_einsum`` permutes its operands into the batched NT
form ``[batch, M, K] x [batch, N, K] -> [batch, M, N]`` (as DeepGEMM does) and its scales move with their data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..core.errors import (fail, major_of, require, require_contiguous, require_dim, require_dtype,
                           require_row_major, require_same_device, require_shape)
from ..common.operands import FP8, Recipe, check_accumulator, require_tma_aligned, resolve_recipe
from ..utils.math import ceil_div

# The BF16 expressions DeepGEMM hard-codes (no other spelling, no whitespace).
BF16_EXPRESSIONS = ("bmk,bnk->mn", "bhr,hdr->bhd", "bhd,hdr->bhr")
# The FP8 expressions (the last two are SM100-only upstream; the references cover all three).
FP8_EXPRESSIONS = ("bhr,hdr->bhd", "bhd,hdr->bhr", "bhd,bhr->hdr")
# DeepGEMM runs this one on its own split-K kernel and has no cuBLASLt path for it.
NO_CUBLASLT_EXPRESSION = "bmk,bnk->mn"
OUT_DTYPES = (torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class Equation:
    """An expression ``"<a>,<b>-><out>"`` with its letters grouped as a batched GEMM."""

    a: str
    b: str
    out: str

    @classmethod
    def parse(cls, expr: str) -> "Equation":
        inputs, out = expr.split("->")
        a, b = inputs.split(",")
        return cls(a, b, out)

    @property
    def batch(self) -> str:
        return "".join(x for x in self.out if x in self.a and x in self.b)

    @property
    def m(self) -> str:
        return "".join(x for x in self.out if x in self.a and x not in self.b)

    @property
    def n(self) -> str:
        return "".join(x for x in self.out if x in self.b and x not in self.a)

    @property
    def k(self) -> str:
        return "".join(x for x in self.a if x in self.b and x not in self.out)

    @staticmethod
    def _positions(subscripts: str, letters: str) -> tuple[int, ...]:
        return tuple(subscripts.index(x) for x in letters)

    # Permutations into the batched NT form (valid when every group has one letter: the FP8 expressions).
    @property
    def perm_a(self) -> tuple[int, ...]:
        return self._positions(self.a, self.batch + self.m + self.k)

    @property
    def perm_b(self) -> tuple[int, ...]:
        return self._positions(self.b, self.batch + self.n + self.k)

    @property
    def perm_out(self) -> tuple[int, ...]:
        return self._positions(self.out, self.batch + self.m + self.n)


def _check_expression(expr: str, supported: Sequence[str]) -> Equation:
    if expr not in supported:
        fail(f"expr: unsupported einsum expression {expr!r}; supported: {', '.join(repr(e) for e in supported)}")
    return Equation.parse(expr)


def _check_shapes(expr: str, eq: Equation, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> dict[str, int]:
    """Sizes of every letter, taken from a (then b); b and d must agree with them."""
    require_dim("a", a, len(eq.a))
    require_dim("b", b, len(eq.b))
    sizes = dict(zip(eq.a, (int(s) for s in a.shape)))
    want_b = tuple(sizes.get(x, int(b.size(i))) for i, x in enumerate(eq.b))
    require_shape("b", b, want_b, f"'{eq.b}' of {expr!r} with the sizes of a {sizes}")
    sizes.update(zip(eq.b, want_b))
    require_shape("d", d, tuple(sizes[x] for x in eq.out), f"'{eq.out}' of {expr!r} with sizes {sizes}")
    return sizes


def check_einsum(expr, a, b, d, c, use_cublaslt) -> dict[str, int]:
    """BF16 a and b; d BF16 or FP32; c like d (may be d). Returns the size of every letter."""
    eq = _check_expression(expr, BF16_EXPRESSIONS)
    require_same_device(a=a, b=b, d=d, c=c)
    require_dtype("a", a, (torch.bfloat16,))
    require_dtype("b", b, (torch.bfloat16,))
    require_dtype("d", d, OUT_DTYPES)
    sizes = _check_shapes(expr, eq, a, b, d)
    if expr == NO_CUBLASLT_EXPRESSION:
        require(not use_cublaslt, f"use_cublaslt: expected False for {expr!r} (DeepGEMM has no cuBLASLt path for it)")
        for name, t in (("a", a), ("b", b), ("d", d)):
            require_contiguous(name, t)
    else:
        # Only the last dim must be contiguous: e.g. W may be a row-padded slice of a wider buffer.
        for name, t in (("a", a), ("b", b), ("d", d)):
            require_row_major(name, t)
    check_accumulator(c, d)
    return sizes


def _nt_scale_shape(eq: Equation, sizes: dict[str, int], operand: str, recipe: Recipe) -> tuple[int, ...]:
    """Scale shape of operand 'a' or 'b' in the operand's own dim order: the batched NT scale shape
    [batch, ceil(MN/gran_mn), ceil(K/gran_k)] permuted back."""
    perm, mn_letter, (gran_mn, gran_k) = (eq.perm_a, eq.m, recipe.a) if operand == "a" else (eq.perm_b, eq.n, recipe.b)
    nt_shape = (sizes[eq.batch], ceil_div(sizes[mn_letter], gran_mn), ceil_div(sizes[eq.k], gran_k))
    shape = [0] * len(perm)
    for nt_dim, own_dim in enumerate(perm):
        shape[own_dim] = nt_shape[nt_dim]
    return tuple(shape)


def _check_fp8_operand(name: str, t: torch.Tensor, eq: Equation) -> None:
    """FP8 data with a unit stride along its K or MN letter and 16-byte aligned strides (TMA)."""
    subscripts, perm, mn_letter = (eq.a, eq.perm_a, eq.m) if name == "a" else (eq.b, eq.perm_b, eq.n)
    if major_of(t.permute(perm)) is None:
        fail(f"{name}: expected a unit stride along '{eq.k}' (K-major) or '{mn_letter}' (MN-major) of "
             f"'{subscripts}', got shape {tuple(t.shape)} with strides {t.stride()}")
    require_tma_aligned(name, t)


def check_fp8_einsum(expr, a, sfa, b, sfb, d, c, recipe) -> tuple[dict[str, int], Recipe]:
    """FP8 a and b with FP32 block scales (recipe = (gran_m_a, gran_n_b, gran_k)); d BF16 or FP32; c like d."""
    eq = _check_expression(expr, FP8_EXPRESSIONS)
    require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, c=c)
    require_dtype("a", a, (FP8,))
    require_dtype("b", b, (FP8,))
    require_dtype("sfa", sfa, (torch.float32,))
    require_dtype("sfb", sfb, (torch.float32,))
    require_dtype("d", d, OUT_DTYPES)
    sizes = _check_shapes(expr, eq, a, b, d)
    _check_fp8_operand("a", a, eq)
    _check_fp8_operand("b", b, eq)
    require_row_major("d", d)
    check_accumulator(c, d)
    r = resolve_recipe(recipe, None, None, sfb)
    for name, sf, operand, subscripts, (gran_mn, gran_k), mn_letter in (
            ("sfa", sfa, "a", eq.a, r.a, eq.m), ("sfb", sfb, "b", eq.b, r.b, eq.n)):
        require_shape(name, sf, _nt_scale_shape(eq, sizes, operand, r),
                      f"FP32 scales of {operand} '{subscripts}', one per {gran_mn} '{mn_letter}' x {gran_k} "
                      f"'{eq.k}' elements, in {operand}'s dim order")
    return sizes, r
