"""Public BF16 GEMM and vendor-BLAS GEMM API, call-for-call compatible with DeepGEMM (names, arguments, defaults).

Each function calls the flat ``torch.ops.deep_gemm`` op (the contract shared with torch.compile and C++ callers).
"K-major" means the last dim is contiguous, "MN-major" the second-to-last.

Results are defined by value everywhere: ``d = c + product`` when ``c`` is given (``c`` may be ``d`` itself or a
distinct tensor) and ``d = product`` when it is None. This is a superset of DeepGEMM, whose SM90 kernels require
``c is d`` (or forbid ``c``) in some cases; code written for DeepGEMM behaves the same here.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ...common.operands import alpha_arg
from ...core.errors import fail
from ...core.eager import eager_ops

__all__ = [
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous", "m_grouped_bf16_gemm_nt_masked",
    "bf16_m_grouped_gemm_nt_masked", "k_grouped_bf16_gemm_tn_contiguous",
    "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
]

_ops = eager_ops  # torch.ops.deep_gemm, skipping the dispatcher for plain eager CUDA calls (core/registry.py)

# layout -> (text, A as given, B as given, how a caller holding A [M,K] and B [N,K] passes them)
_LAYOUTS = {
    "nt": ("NT layout", "[M, K]", "[N, K]", "a, b"),
    "nn": ("NN layout (B given as ``[K, N]``)", "[M, K]", "[K, N]", "a, b.T"),
    "tn": ("TN layout (A given as ``[K, M]``, B as ``[K, N]``)", "[K, M]", "[K, N]", "a.T, b.T"),
    "tt": ("TT layout (A given as ``[K, M]``)", "[K, M]", "[N, K]", "a.T, b"),
}

_BF16_DENSE_DOC = """BF16 GEMM, {text}: ``d = c + a @ b.T`` in the NT view, accumulated in FP32.

    Parameters
    ----------
    a : Tensor
        BF16 ``{a_shape}``, K-major or MN-major (either works, SM90 included), 16-byte aligned strides and start.
    b : Tensor
        BF16 ``{b_shape}``, K-major or MN-major, 16-byte aligned strides and start.
    d : Tensor
        Output ``[M, N]``, BF16 or FP32, row-major (its row stride may exceed N). Written in place.
    c : Tensor, optional
        Accumulator with d's shape and dtype; may be ``d`` itself (``d += a @ b.T``, also into BF16 d) or a
        distinct tensor. None means ``d = a @ b.T``.
    compiled_dims : str
        Dimensions DeepGEMM bakes into its JIT kernels (subset of "mnk"); a performance hint only. Default ``''``
        (the kernel picks), as DeepGEMM 0.2.3.
    alpha : float, optional
        ``d = c + alpha * (a @ b.T)``: scales the product only, in FP32 before C is added (DeepGEMM 0.2.3's
        epilogue). On CUDA a non-None alpha runs the kernel into an FP32 scratch that one pass scales into d
        (``d = c + alpha * scratch``, one rounding into d; slower than the plain call by that buffer and pass).

    Notes
    -----
    ``M == 0`` or ``N == 0`` is a no-op; ``K == 0`` gives ``d = c`` (or zeros). Unlike DeepGEMM's kernels, K need
    not be a multiple of 64.

    Example
    -------
    >>> a = torch.randn(M, K, dtype=torch.bfloat16, device='cuda')
    >>> b = torch.randn(N, K, dtype=torch.bfloat16, device='cuda')
    >>> d = torch.empty(M, N, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.{name}({call}, d)
    """

_CUBLASLT_DOC = """Vendor-BLAS GEMM, {text}: ``d = c + a @ b.T`` in the NT view, FP32 compute.

    DeepGEMM binds cuBLASLt here (its yardstick for the JIT kernels). This implementation computes the same value
    with torch: on CUDA ``torch.matmul`` on FP32 views, i.e. a cuBLAS(Lt) FP32 GEMM; on CPU the CPU BLAS. The
    product of two operands of the dtypes below is exact in FP32, so results differ from cuBLASLt's only in the
    summation order (and cuBLASLt's fast-TF32 mode for FP32 operands, which this does not reproduce).

    Parameters
    ----------
    a : Tensor
        ``{a_shape}``; bfloat16, float16, float32 or float8_e4m3fn (FP8 values are used raw, without scales).
        Any majorness with a unit stride in one of the two dims; no alignment requirement.
    b : Tensor
        ``{b_shape}``, the dtype of ``a``, same layout rules.
    d : Tensor
        Output ``[M, N]``, bfloat16, float16 or float32, row-major. Written in place.
    c : Tensor, optional
        Accumulator with d's shape and dtype (beta = 1); may be ``d`` itself. None means ``d = a @ b.T``.

    Example
    -------
    >>> d = torch.empty(M, N, dtype=torch.float32, device='cuda')
    >>> deep_gemm.{name}({call}, d)
    """


def _dense(prefix: str, layout: str, doc: str, default_dims: Optional[str]):
    op = getattr(_ops, f"{prefix}_{layout}").default
    text, a_shape, b_shape, call = _LAYOUTS[layout]
    if default_dims is None:
        def fn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None) -> None:
            op(a, b, d, c)
    else:
        def fn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: Optional[torch.Tensor] = None,
               compiled_dims: str = default_dims, alpha: Optional[float] = None) -> None:
            if alpha is None:
                op(a, b, d, c, compiled_dims)
            else:
                op(a, b, d, c, compiled_dims, alpha_arg(alpha))

    fn.__name__ = fn.__qualname__ = f"{prefix}_{layout}"
    fn.__doc__ = doc.format(text=text, a_shape=a_shape, b_shape=b_shape, name=fn.__name__, call=call)
    return fn


bf16_gemm_nt = _dense("bf16_gemm", "nt", _BF16_DENSE_DOC, "")
bf16_gemm_nn = _dense("bf16_gemm", "nn", _BF16_DENSE_DOC, "")
bf16_gemm_tn = _dense("bf16_gemm", "tn", _BF16_DENSE_DOC, "")
bf16_gemm_tt = _dense("bf16_gemm", "tt", _BF16_DENSE_DOC, "")
cublaslt_gemm_nt = _dense("cublaslt_gemm", "nt", _CUBLASLT_DOC, None)
cublaslt_gemm_nn = _dense("cublaslt_gemm", "nn", _CUBLASLT_DOC, None)
cublaslt_gemm_tn = _dense("cublaslt_gemm", "tn", _CUBLASLT_DOC, None)
cublaslt_gemm_tt = _dense("cublaslt_gemm", "tt", _CUBLASLT_DOC, None)


def _m_grouped_contiguous(layout: str):
    op = getattr(_ops, f"m_grouped_bf16_gemm_{layout}_contiguous").default

    def fn(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, grouped_layout: torch.Tensor,
           compiled_dims: str = "nk", use_psum_layout: bool = False, ensure_zero_padding: bool = True,
           expected_m_for_psum_layout: Optional[int] = None) -> None:
        args = (a, b, d, grouped_layout, compiled_dims, use_psum_layout, ensure_zero_padding)
        if layout == "nt":
            op(*args, expected_m_for_psum_layout)
        else:
            if expected_m_for_psum_layout is not None:
                fail("expected_m_for_psum_layout: not an argument of m_grouped_bf16_gemm_nn_contiguous")
            op(*args)

    fn.__name__ = fn.__qualname__ = f"m_grouped_bf16_gemm_{layout}_contiguous"
    b_shape = "[G, N, K]" if layout == "nt" else "[G, K, N]"
    hint = ("\n    expected_m_for_psum_layout : int, optional\n        Rows per group, a kernel-choice hint "
            "(needs ``use_psum_layout=True``); never changes results." if layout == "nt" else "")
    fn.__doc__ = f"""M-grouped BF16 GEMM for MoE (rows sorted by expert): ``d[r] = a[r] @ b[group(r)].T``.

    Parameters
    ----------
    a : Tensor
        BF16 ``[M, K]``, K-major or MN-major, 16-byte aligned strides.
    b : Tensor
        BF16 ``{b_shape}`` (G experts), K-major or MN-major, 16-byte aligned strides.
    d : Tensor
        BF16 ``[M, N]``, row-major. Written in place (see grouped_layout for which rows).
    grouped_layout : Tensor
        int32, contiguous, on the device (never read on the host: the call is CUDA-graph safe).

        * default: ``[M]``, the expert of each row, ``-1`` for padding rows; every expert's segment starts at a
          multiple of ``get_mk_alignment_for_contiguous_layout()`` and M must be a multiple of it. Rows marked -1
          are written as zeros.
        * ``use_psum_layout=True``: ``[G]`` cumulative end rows; group g covers rows
          ``[align(end[g-1], alignment), end[g])`` (M need not be aligned). Gap rows between groups are written as
          zeros when ``ensure_zero_padding`` (default), else left untouched.
    compiled_dims : str
        Performance hint (subset of "mnk").
    use_psum_layout, ensure_zero_padding : bool
        See grouped_layout.{hint}

    Notes
    -----
    Expert ids must lie in ``[-1, G)`` and psum ends must be non-decreasing and ``<= M``; neither is checked (it
    would need a device sync). Unlike DeepGEMM's SM90 kernels, K need not be a multiple of 64 and A may be
    MN-major.

    Example
    -------
    >>> d = torch.empty(M, N, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.{fn.__name__}(a, b, d, m_indices)
    """
    return fn


m_grouped_bf16_gemm_nt_contiguous = _m_grouped_contiguous("nt")
m_grouped_bf16_gemm_nn_contiguous = _m_grouped_contiguous("nn")


def m_grouped_bf16_gemm_nt_masked(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, masked_m: torch.Tensor,
                                  expected_m: int, compiled_dims: str = "nk") -> None:
    """Masked M-grouped BF16 GEMM for MoE decode: ``d[g, r] = a[g, r] @ b[g].T`` for ``r < masked_m[g]``.

    Parameters
    ----------
    a : Tensor
        BF16 ``[G, Mmax, K]``, K-major or MN-major, 16-byte aligned strides.
    b : Tensor
        BF16 ``[G, N, K]``, K-major or MN-major, 16-byte aligned strides.
    d : Tensor
        BF16 ``[G, Mmax, N]``, row-major. Rows ``r < masked_m[g]`` are written; the others are left untouched.
    masked_m : Tensor
        int32 ``[G]``, contiguous, on the device (never read on the host, so the call is CUDA-graph safe); values
        must lie in ``[0, Mmax]`` (not checked: it would need a sync).
    expected_m : int
        Positive hint (typical rows per group) for the kernel choice; never changes results.
    compiled_dims : str
        Performance hint (subset of "mnk").

    Example
    -------
    >>> d = torch.empty(G, Mmax, N, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m=64)
    """
    _ops.m_grouped_bf16_gemm_nt_masked.default(a, b, d, masked_m, int(expected_m), compiled_dims)


bf16_m_grouped_gemm_nt_masked = m_grouped_bf16_gemm_nt_masked  # legacy name


def k_grouped_bf16_gemm_tn_contiguous(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                                      ks: Optional[Sequence[int]], grouped_layout: torch.Tensor,
                                      c: Optional[torch.Tensor] = None, compiled_dims: str = "mn",
                                      use_psum_layout: bool = False) -> None:
    """K-grouped BF16 GEMM (MoE weight gradient): ``d[g] = c[g] + A_g.T @ B_g``, FP32 accumulation.

    ``A_g = a[k_g : k_g + ks[g]]`` with ``k_g = sum(ks[:g])`` (likewise ``B_g``). With ``use_psum_layout`` the
    groups come from ``grouped_layout`` instead: group g spans K rows ``[align(end[g-1]), end[g])`` with ``end =
    grouped_layout`` and ``align`` rounding up to ``get_mk_alignment_for_contiguous_layout()``; the rows between a
    group's end and the next aligned start are padding and read into no group.

    Parameters
    ----------
    a : Tensor
        BF16 ``[sum(ks), M]`` (psum layout: ``[sum_K, M]``, padding rows included), MN-major (M contiguous), 16-byte
        aligned row stride and start.
    b : Tensor
        BF16 ``[sum(ks), N]`` (psum layout: ``[sum_K, N]``), MN-major, 16-byte aligned row stride and start.
    d : Tensor
        FP32 ``[G, M, N]``, contiguous. Written in place.
    ks : list of int, optional
        The per-group K sizes on the host (non-empty, each >= 0; an empty group gives ``d[g] = c[g]``, or zeros).
        ``ks_cpu=``, our former name, is accepted.
        Unlike DeepGEMM's SM90 kernel, sizes need not be multiples of 128. With the psum layout: None (or empty),
        or one size per group, each a multiple of the group alignment, summing to ``a.size(0)`` (DeepGEMM's rule).
    grouped_layout : Tensor
        int32 ``[G]`` on the device: the same sizes as ``ks`` (kept for DeepGEMM compatibility), or with the psum
        layout each group's K end (each repeats the previous end, an empty group, or reaches the previous end
        aligned up; the last at most ``a.size(0)``). Checked on the CPU, and on CUDA in the checked mode
        (``set_checks("data")``; unchecked by default: it would need a sync).
    c : Tensor, optional
        FP32 accumulator of d's shape, row-major; may be ``d`` itself. DeepGEMM's SM90 kernel requires it (tests
        pass ``c=d``); here None means ``d = A_g.T @ B_g``.
    compiled_dims : str
        Performance hint (subset of "mnk").
    use_psum_layout : bool
        Groups from the K ends in ``grouped_layout`` (DeepGEMM runs this layout on SM100 only). On CUDA it runs the
        torch reference (one masked FP32 product per group), not a Triton kernel.

    Example
    -------
    >>> ks = [256, 0, 384]
    >>> d = torch.zeros(len(ks), M, N, dtype=torch.float32, device='cuda')
    >>> deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks,
    ...     torch.tensor(ks, dtype=torch.int32, device='cuda'), c=d)
    """
    sizes = None if ks is None else [int(k) for k in ks]
    _ops.k_grouped_bf16_gemm_tn_contiguous.default(a, b, d, sizes, grouped_layout, c, compiled_dims, use_psum_layout)
