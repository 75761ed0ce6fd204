"""Public einsum API, call-for-call compatible with DeepGEMM: ``einsum`` (BF16) and ``fp8_einsum`` (block-scaled FP8).

Only DeepGEMM's exact expression strings are supported (listed below); anything else raises ``DeepGEMMError``.
Results are defined by value: ``d = c + product`` when ``c`` is given (``c`` may be ``d`` itself or a distinct
tensor), ``d = product`` when it is None. That is a superset of DeepGEMM, which requires ``c is d`` for FP32
``"bmk,bnk->mn"``, forbids ``c`` elsewhere in ``einsum``, and on SM90 silently drops ``c`` in ``fp8_einsum``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..core.eager import eager_ops
from ..common.operands import unpack_pair

__all__ = ["einsum", "fp8_einsum"]

_ops = eager_ops  # torch.ops.deep_gemm, skipping the dispatcher for plain eager CUDA calls (core/registry.py)


def einsum(expr: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
           use_cublaslt: bool = False) -> None:
    """BF16 einsum for DeepGEMM's fixed expressions, FP32 accumulation; writes ``d`` in place.

    Parameters
    ----------
    expr : str
        Exactly one of:

        * ``"bmk,bnk->mn"``: a ``[S, M, K]``, b ``[S, N, K]`` (both contiguous); d ``[M, N]`` contiguous,
          ``d = c + sum_s a[s] @ b[s].T``. DeepGEMM's FP32 form is ``einsum(expr, a, b, d, c=d)`` (accumulate).
        * ``"bhr,hdr->bhd"``: a ``[B, H, R]``, b (the weight W) ``[H, D, R]``; d ``[B, H, D]``,
          ``d[b, h] = c[b, h] + W[h] @ a[b, h]``.
        * ``"bhd,hdr->bhr"``: a ``[B, H, D]``, W ``[H, D, R]``; d ``[B, H, R]``, ``d[b, h] = c[b, h] + a[b, h] @ W[h]``.

        For the two ``bh*`` expressions only the last dim of a, W and d must be contiguous (W may be a row-padded
        slice such as ``w_full[:, :, :R]``).
    a, b : Tensor
        BF16 operands, shapes as above.
    d : Tensor
        Output, BF16 or FP32 (DeepGEMM's ``bh*`` kernels take BF16 only; FP32 is accepted here). Written in place.
    c : Tensor, optional
        Accumulator with d's shape and dtype, last dim contiguous; may be ``d`` itself.
    use_cublaslt : bool
        Selects DeepGEMM's cuBLASLt path for the ``bh*`` expressions (same value); must be False for
        ``"bmk,bnk->mn"``, which has no such path.

    Example
    -------
    >>> x = torch.randn(B, H, R, dtype=torch.bfloat16, device='cuda')
    >>> w = torch.randn(H, D, R + 128, dtype=torch.bfloat16, device='cuda')[:, :, :R]
    >>> out = torch.empty(B, H, D, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.einsum('bhr,hdr->bhd', x, w, out)
    """
    _ops.einsum.default(expr, a, b, d, c, bool(use_cublaslt))


def fp8_einsum(expr: str, a, b, d: torch.Tensor, c: Optional[torch.Tensor] = None,
               recipe: Sequence[int] = (1, 128, 128)) -> None:
    """Block-scaled FP8 einsum (a batched FP8 GEMM over ``h``), FP32 accumulation; writes ``d`` in place.

    Each operand is ``(data, scale)``: ``float8_e4m3fn`` data and FP32 scales, real value = data * scale of its
    block. ``recipe = (gran_m_a, gran_n_b, gran_k)``: a has one scale per row (gran 1) per ``gran_k`` contracted
    elements, b one per ``gran_n_b`` x ``gran_k`` block (gran_n_b 1 or 128, gran_k 128 or 32).
    Scale shapes follow each operand's own dim order (``ceil`` divisions):

    * ``"bhr,hdr->bhd"``: a ``(X [B, H, R], SFX [B, H, R/gk])`` (per token); b ``(W [H, D, R], SFW [H, D/gn, R/gk])``
      (per 128x128 block with the default recipe); d ``[B, H, D]``.
    * ``"bhd,hdr->bhr"``: a ``(X [B, H, D], SFX [B, H, D/gk])``; b ``(W [H, D, R], SFW [H, D/gk, R/gn])``;
      d ``[B, H, R]``.
    * ``"bhd,bhr->hdr"`` (weight gradient, contracted over b): a ``(X [B, H, D], SFX [B/gk, H, D])``; b
      ``(Y [B, H, R], SFY [B/gk, H, R/gn])``, i.e. per-channel scales along b with ``recipe=(1, 1, 128)``
      (``SFY [B/128, H, R]``); d ``[H, D, R]``, typically FP32 with ``c=d``.

    Parameters
    ----------
    expr : str
        One of the three expressions above (DeepGEMM's SM90 build runs only the first).
    a, b : (Tensor, Tensor)
        ``(data, scale)`` pairs as above. Data needs a unit stride along its contracted dim or along its own
        output dim, and 16-byte aligned strides (TMA).
    d : Tensor
        Output, BF16 or FP32, last dim contiguous. Written in place.
    c : Tensor, optional
        Accumulator with d's shape and dtype, last dim contiguous; may be ``d``. Honoured on every expression
        (DeepGEMM's SM90 kernel copies it into d and then overwrites d, i.e. ignores it).
    recipe : (int, int, int)
        Scale granularities, default ``(1, 128, 128)``.

    Example
    -------
    >>> x = deep_gemm.utils.per_token_cast_to_fp8(x_bf16.view(-1, R), use_ue8m0=False)
    >>> x = (x[0].view(B, H, R), x[1].view(B, H, -1))
    >>> out = torch.empty(B, H, D, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.fp8_einsum('bhr,hdr->bhd', x, (w_fp8, w_sf), out)
    """
    a_data, a_sf = unpack_pair("a", a)
    b_data, b_sf = unpack_pair("b", b)
    _ops.fp8_einsum.default(expr, a_data, a_sf, b_data, b_sf, d, c, [int(x) for x in recipe])
