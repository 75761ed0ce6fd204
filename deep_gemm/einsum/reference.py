"""Torch references of the einsum ops, registered as their CPU kernels (and run on CUDA until a Triton kernel
exists). FP32 maths; ``d = c + product`` when c is given (c may be d itself: it is read before d is written)."""

from __future__ import annotations

import torch

from ..common.operands import dequantize, resolve_recipe, write_output
from .checks import Equation


def einsum_reference(expr, a, b, d, c, use_cublaslt):
    # use_cublaslt picks the upstream kernel only; the value is the same.
    write_output(d, torch.einsum(expr, a.float(), b.float()), c)


def fp8_einsum_reference(expr, a, sfa, b, sfb, d, c, recipe):
    """Dequantise both operands in the batched NT form, one FP32 bmm, write through the permuted view of d."""
    eq = Equation.parse(expr)
    r = resolve_recipe(recipe, None, None, sfb)
    a_values = dequantize(a.permute(eq.perm_a), sfa.permute(eq.perm_a), r.a)  # [batch, M, K]
    b_values = dequantize(b.permute(eq.perm_b), sfb.permute(eq.perm_b), r.b)  # [batch, N, K]
    acc = torch.bmm(a_values, b_values.transpose(1, 2))  # [batch, M, N]
    write_output(d.permute(eq.perm_out), acc, None if c is None else c.permute(eq.perm_out))
