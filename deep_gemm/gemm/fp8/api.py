"""Public FP8 GEMM API, call-for-call compatible with DeepGEMM: ``(data, scale)`` pairs, recipe tuples, defaults.

Each function unpacks the pairs and calls the flat ``torch.ops.deep_gemm`` op (the contract shared with
torch.compile and C++ callers). Shapes below are in DeepGEMM's notation; "K-major" means the last dim is contiguous.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from ...core.errors import fail
from ...core.eager import eager_ops
from ...common.operands import alpha_arg, unpack_pair

Pair = Tuple[torch.Tensor, torch.Tensor]
_ops = eager_ops  # torch.ops.deep_gemm, skipping the dispatcher for plain eager CUDA calls (core/registry.py)

__all__ = [
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt",
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "fp8_gemm_nt_skip_head_mid",
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous",
    "m_grouped_fp8_fp4_gemm_nt_masked", "fp8_m_grouped_gemm_nt_masked",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
]


def _ints(x: Optional[Sequence[int]]) -> Optional[list[int]]:
    return None if x is None else [int(v) for v in x]


_DENSE_DOC = """FP8 GEMM, {layout_text}: ``d = c + (a * sfa) @ (b * sfb).T``, accumulated in FP32.

    Parameters
    ----------
    a : (Tensor, Tensor)
        ``(A, SFA)``. A is ``float8_e4m3fn`` {a_shape} (or FP4 E2M1 packed in ``int8``, K-major, half the columns).
        SFA holds FP32 scales ``[M, ceil(K/128)]`` (any strides, e.g. DeepGEMM's MN-major TMA-aligned layout) or
        packed UE8M0 ``int32`` ``[M, ceil(K/512)]``.
    b : (Tensor, Tensor)
        ``(B, SFB)``. B is FP8 {b_shape}; SFB is ``[ceil(N/128), ceil(K/128)]`` for the default 1D2D recipe
        (per 128x128 block) or ``[N, ceil(K/128)]`` for ``recipe=(1, 1, 128)`` (per row, the weight-gradient
        "1D1D" case).{scale_note}
    d : Tensor
        Output ``[M, N]``, BF16 or FP32, row-major (its row stride may exceed N). Written in place.
    c : Tensor, optional
        Accumulator with d's shape and dtype; may be ``d`` itself (``d += a @ b.T``).
    recipe : (int, int, int), optional
        ``(gran_m_a, gran_n_b, gran_k)``; default ``(1, 128, 128)`` (or ``(1, 1, 128)`` with int32 SFB).
    recipe_a, recipe_b : (int, int), optional
        Per-operand ``(gran_mn, gran_k)`` instead of ``recipe`` (both or neither).
    compiled_dims : str
        Dimensions DeepGEMM bakes into its JIT kernels; accepted for compatibility (a performance hint). Default
        ``''`` (the kernel picks), as DeepGEMM 0.2.3.
    disable_ue8m0_cast : bool
        Accepted for compatibility; no effect on SM90.
    alpha : float, optional
        ``d = c + alpha * (a @ b.T)``: scales the product only, in FP32 before C is added (DeepGEMM 0.2.3's
        epilogue). On CUDA, with FP32 scales, A's scales carry alpha (``alpha * sfa``: a pass over the scales, the
        result within one FP32 rounding per scale product); with packed UE8M0 scales the kernel writes an FP32
        scratch that one more pass scales into d (one rounding into d; an extra buffer and pass over d).

    Layout: A and B may each be K-major or MN-major (DeepGEMM's SM90 build requires K-major); strides must be
    16-byte aligned (TMA). ``M == 0`` or ``N == 0`` is a no-op; ``K == 0`` gives ``d = c`` (or zeros).

    Example
    -------
    >>> a = deep_gemm.utils.per_token_cast_to_fp8(x, use_ue8m0=False)       # x [M, K] bf16
    >>> b = deep_gemm.utils.per_block_cast_to_fp8(w, use_ue8m0=False)       # w [N, K] bf16
    >>> d = torch.empty(M, N, dtype=torch.bfloat16, device=x.device)
    >>> deep_gemm.{name}({call_args})
    """


def _dense(layout: str, default_dims: str, layout_text: str, a_shape: str, b_shape: str, call_args: str,
           scale_note: str = ""):
    op = getattr(_ops, f"fp8_gemm_{layout}").default

    def fn(a: Pair, b: Pair, d: torch.Tensor, c: Optional[torch.Tensor] = None,
           recipe: Optional[Tuple[int, int, int]] = None, recipe_a: Optional[Tuple[int, int]] = None,
           recipe_b: Optional[Tuple[int, int]] = None, compiled_dims: str = "",
           disable_ue8m0_cast: bool = False, alpha: Optional[float] = None) -> None:
        a_data, a_sf = unpack_pair("a", a)
        b_data, b_sf = unpack_pair("b", b)
        if recipe is None and recipe_a is None and recipe_b is None and compiled_dims == "" \
                and not disable_ue8m0_cast and alpha is None:
            # The common call: passing only what differs from the schema defaults spares the dispatcher most of its
            # argument parsing (the full form costs ~18 us more per call).
            if c is None:
                op(a_data, a_sf, b_data, b_sf, d)
            else:
                op(a_data, a_sf, b_data, b_sf, d, c)
            return
        op(a_data, a_sf, b_data, b_sf, d, c, _ints(recipe), _ints(recipe_a), _ints(recipe_b), compiled_dims,
           disable_ue8m0_cast, None if alpha is None else alpha_arg(alpha))

    fn.__name__ = fn.__qualname__ = f"fp8_gemm_{layout}"
    fn.__doc__ = _DENSE_DOC.format(layout_text=layout_text, a_shape=a_shape, b_shape=b_shape,
                                   name=fn.__name__, call_args=call_args, scale_note=scale_note)
    return fn


_T_NOTE = "\n        Scales are transposed with their data (pass the scales of the tensor you pass)."
fp8_gemm_nt = _dense("nt", "nk", "NT layout", "``[M, K]``", "``[N, K]``", "a, b, d")
fp8_gemm_nn = _dense("nn", "nk", "NN layout (B given as ``[K, N]``)", "``[M, K]``", "``[K, N]``",
                     "a, (b[0].T, b[1].T), d", _T_NOTE)
fp8_gemm_tn = _dense("tn", "mn", "TN layout (A given as ``[K, M]``, B as ``[K, N]``)", "``[K, M]``", "``[K, N]``",
                     "(a[0].T, a[1].T), (b[0].T, b[1].T), d", _T_NOTE)
fp8_gemm_tt = _dense("tt", "mn", "TT layout (A given as ``[K, M]``)", "``[K, M]``", "``[N, K]``",
                     "(a[0].T, a[1].T), b, d", _T_NOTE)
fp8_fp4_gemm_nt, fp8_fp4_gemm_nn, fp8_fp4_gemm_tn, fp8_fp4_gemm_tt = fp8_gemm_nt, fp8_gemm_nn, fp8_gemm_tn, fp8_gemm_tt


def fp8_gemm_nt_skip_head_mid(a: Pair, b: Pair, d: torch.Tensor, head_splits: Tuple[int, int, int],
                              recipe: Optional[Tuple[int, int, int]] = None, compiled_dims: str = "nk",
                              disable_ue8m0_cast: bool = False) -> None:
    """NT FP8 GEMM whose output skips ``mid`` columns inside every head.

    ``head_splits = (left, mid, right)``; N must be a multiple of ``left + right``. Result column n is written to
    ``n + ((n + right) // (left + right)) * mid`` of ``d`` ([M, N + N / (left + right) * mid], BF16), so each head's
    ``left`` and ``right`` parts are separated by ``mid`` columns that are never written.

    >>> d = torch.zeros(M, N // 256 * 320, dtype=torch.bfloat16, device='cuda')
    >>> deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, (128, 64, 128))
    """
    a_data, a_sf = unpack_pair("a", a)
    b_data, b_sf = unpack_pair("b", b)
    _ops.fp8_gemm_nt_skip_head_mid.default(a_data, a_sf, b_data, b_sf, d, _ints(head_splits), _ints(recipe),
                                           compiled_dims, disable_ue8m0_cast)


def _m_grouped_contiguous(layout: str):
    op = getattr(_ops, f"m_grouped_fp8_gemm_{layout}_contiguous").default

    def fn(a: Pair, b: Pair, d: torch.Tensor, grouped_layout: torch.Tensor,
           recipe: Optional[Tuple[int, int, int]] = None, recipe_a: Optional[Tuple[int, int]] = None,
           recipe_b: Optional[Tuple[int, int]] = None, compiled_dims: str = "nk", disable_ue8m0_cast: bool = False,
           use_psum_layout: bool = False, ensure_zero_padding: bool = True,
           expected_m_for_psum_layout: Optional[int] = None) -> None:
        a_data, a_sf = unpack_pair("a", a)
        b_data, b_sf = unpack_pair("b", b)
        recipes = (None, None, None) if recipe is None and recipe_a is None and recipe_b is None else \
            (_ints(recipe), _ints(recipe_a), _ints(recipe_b))  # (the common call skips three calls: host time)
        args = (a_data, a_sf, b_data, b_sf, d, grouped_layout, *recipes, compiled_dims, disable_ue8m0_cast,
                use_psum_layout, ensure_zero_padding)
        if layout == "nt":
            op(*args, expected_m_for_psum_layout)
        else:
            if expected_m_for_psum_layout is not None:
                fail("expected_m_for_psum_layout: not an argument of m_grouped_fp8_gemm_nn_contiguous")
            op(*args)

    fn.__name__ = fn.__qualname__ = f"m_grouped_fp8_gemm_{layout}_contiguous"
    b_shape = "[G, N, K]" if layout == "nt" else "[G, K, N]"
    fn.__doc__ = f"""M-grouped FP8 GEMM for MoE (rows sorted by expert): ``d[r] = a[r] @ b[group(r)].T``.

    a : ``(A [M, K] FP8 K-major, SFA [M, ceil(K/128)] FP32)``; b : ``(B {b_shape} FP8, SFB [G, ceil(N/128),
    ceil(K/128)])`` (scales transposed with B for nn); d : ``[M, N]`` BF16.

    grouped_layout (int32, contiguous):
      * default: ``[M]``, the expert of each row, ``-1`` for padding rows; each expert's segment starts at a
        multiple of ``get_mk_alignment_for_contiguous_layout()`` (M must be a multiple of it). Rows marked -1 are
        written as zeros. The Triton kernel reads a tile's expert from its first row.
      * ``use_psum_layout=True``: ``[G]`` cumulative end rows; group g covers rows
        ``[align(end[g-1], alignment), end[g])``. With ``ensure_zero_padding`` (default) each group's padding rows
        ``[end[g], align(end[g], alignment))`` are zeros; without it they are unspecified (the Triton kernel may
        write zeros into them, as DeepGEMM's SM90 kernels store whole tiles). Rows after the last group's padded
        end are unspecified either way (the Triton kernel leaves them, the torch reference zeroes them), so A may
        hold more rows than the groups use (the decode form: ``expected_m_for_psum_layout`` = rows per group).
    Expert ids must lie in ``[-1, G)``; this is not checked (it would need a device sync).
    ``expected_m_for_psum_layout`` only steers the kernel choice.

    >>> deep_gemm.{fn.__name__}(a, b, d, m_indices)
    """
    return fn


m_grouped_fp8_gemm_nt_contiguous = _m_grouped_contiguous("nt")
m_grouped_fp8_gemm_nn_contiguous = _m_grouped_contiguous("nn")
m_grouped_fp8_fp4_gemm_nt_contiguous = m_grouped_fp8_gemm_nt_contiguous
m_grouped_fp8_fp4_gemm_nn_contiguous = m_grouped_fp8_gemm_nn_contiguous


def m_grouped_fp8_gemm_nt_masked(a: Pair, b: Pair, d: torch.Tensor, masked_m: torch.Tensor, expected_m: int,
                                 recipe: Optional[Tuple[int, int, int]] = None,
                                 recipe_a: Optional[Tuple[int, int]] = None,
                                 recipe_b: Optional[Tuple[int, int]] = None, compiled_dims: str = "nk",
                                 disable_ue8m0_cast: bool = False) -> None:
    """Masked M-grouped FP8 GEMM for MoE decode: ``d[g, r] = a[g, r] @ b[g].T`` for ``r < masked_m[g]``.

    a : ``(A [G, Mmax, K] FP8, SFA [G, Mmax, ceil(K/128)])``; b : ``(B [G, N, K], SFB [G, ceil(N/128),
    ceil(K/128)])``; d : ``[G, Mmax, N]`` BF16; masked_m : int32 ``[G]`` on the device (never read on the host, so
    the call is CUDA-graph safe); rows ``>= masked_m[g]`` of d are left untouched. ``expected_m`` (> 0) is a hint
    for the kernel choice. masked_m values must lie in ``[0, Mmax]`` (not checked: it would need a sync).

    >>> deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m=64)
    """
    a_data, a_sf = unpack_pair("a", a)
    b_data, b_sf = unpack_pair("b", b)
    recipes = (None, None, None) if recipe is None and recipe_a is None and recipe_b is None else \
        (_ints(recipe), _ints(recipe_a), _ints(recipe_b))  # (the common call skips three calls: host time)
    _ops.m_grouped_fp8_gemm_nt_masked.default(a_data, a_sf, b_data, b_sf, d, masked_m, int(expected_m), *recipes,
                                              compiled_dims, disable_ue8m0_cast)


m_grouped_fp8_fp4_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked
fp8_m_grouped_gemm_nt_masked = m_grouped_fp8_gemm_nt_masked  # legacy name


def _k_grouped(layout: str):
    op = getattr(_ops, f"k_grouped_fp8_gemm_{layout}_contiguous").default

    def fn(a: Pair, b: Pair, d: torch.Tensor, ks: Optional[Sequence[int]], grouped_layout: torch.Tensor,
           c: Optional[torch.Tensor] = None, recipe: Tuple[int, int, int] = (1, 1, 128), compiled_dims: str = "mn",
           use_psum_layout: bool = False, use_padded_sf_layout: bool = False) -> None:
        a_data, a_sf = unpack_pair("a", a)
        b_data, b_sf = unpack_pair("b", b)
        op(a_data, a_sf, b_data, b_sf, d, _ints(ks), grouped_layout, c, _ints(recipe), compiled_dims,
           use_psum_layout, bool(use_padded_sf_layout))

    fn.__name__ = fn.__qualname__ = f"k_grouped_fp8_gemm_{layout}_contiguous"
    if layout == "nt":
        operands = ("a : ``(A, SFA)`` with A a flat FP8 buffer of ``sum(ks) * M`` elements holding, per group, a "
                    "row-major ``[M, K_g]`` block, and SFA FP32 ``[M, sum(ks) / 128]``; b likewise with N.")
        math = "``d[g] = c[g] + A_g @ B_g.T``"
    else:
        operands = ("a : ``(A [sum(ks), M] FP8 MN-major, SFA [sum(ks) / 128, M] FP32)``; b likewise with N.")
        math = "``d[g] = c[g] + A_g.T @ B_g`` with ``A_g = A[k_start:k_start + K_g]``"
    fn.__doc__ = f"""K-grouped FP8 GEMM (MoE weight gradient): {math}, FP32 accumulation.

    {operands}
    d : FP32 ``[G, M, N]`` contiguous; c : optional accumulator of d's shape (may be d; DeepGEMM requires it, here
    ``None`` means zeros). ks : the per-group K sizes on the host, each a multiple of 128 (0 allowed: that
    group's ``d[g] = c[g]``; ``ks_cpu=``, our former name, is accepted); grouped_layout : the same sizes as an int32
    ``[G]`` tensor. recipe must be ``(1, 1, 128)`` (per-row scales on both operands). use_psum_layout (``tn``
    only, as DeepGEMM's, which runs it on SM100): grouped_layout holds each group's end row of K instead; group g
    spans ``[align(end[g-1], A), end[g])`` and its K_g rows own ``ceil(K_g / 128)`` compact scale rows, the groups'
    one after the other; rows between groups are never read; ks, if given, holds the aligned sizes summing to
    A's rows; on CUDA it runs the torch reference. use_padded_sf_layout : the scales' K axis holds, per group,
    ``ceil(align(K_g, A) / 128)`` rows (A = ``get_mk_alignment_for_contiguous_layout()``, DeepGEMM's padded per-group
    SF), the group's
    ``K_g / 128`` scales first, and may be longer than their sum; default: compact (``sum(ks) / 128``). On CUDA a
    padded layout that differs from the compact one is gathered into it before the launch (one small copy).

    >>> deep_gemm.{fn.__name__}(a, b, d, ks, torch.tensor(ks, dtype=torch.int32, device='cuda'), c=d)
    """
    return fn


k_grouped_fp8_gemm_nt_contiguous = _k_grouped("nt")
k_grouped_fp8_gemm_tn_contiguous = _k_grouped("tn")
