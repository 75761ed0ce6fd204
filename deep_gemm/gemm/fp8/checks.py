"""One check per FP8 GEMM op, shared by the CPU (reference), CUDA (Triton) and fake kernels.

Each check takes exactly the op's schema arguments, reads metadata only, and raises ``DeepGEMMError`` naming the
argument before anything is written. Data-dependent contracts (expert ids in range, psum ends, masked_m <= Mmax,
grouped_layout equal to ks_cpu) are ``gemm/grouped_checks.py``'s ``check_data_*``: the CPU kernels always run them,
CUDA in the checked mode (``deep_gemm.set_checks("data")``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...core.errors import (fail, major_of, require, require_contiguous, require_dim, require_dtype,
                           require_same_device)
from ..grouped_checks import (check_expected_m_for_psum_layout, check_grouped_layout, check_k_grouped_output,
                             check_k_psum_sizes, check_ks_cpu, check_masked_m)
from ...common.operands import (FP4_PACKED, Recipe, check_accumulator, check_alpha, check_compiled_dims, check_out,
                                check_sf, logical_k, padded_sf_starts, require_tma_aligned, resolve_recipe, to_nt)
from ...core.runtime import peek


@dataclass(frozen=True)
class GemmProblem:
    """Sizes and recipe of a checked GEMM call (in NT form)."""

    m: int
    n: int
    k: int
    recipe: Recipe
    num_groups: int = 1


def _check_quant_operand(name: str, data: torch.Tensor, ndim: int) -> str:
    """FP8 (K- or MN-major) or packed FP4 (K-major) data with TMA-friendly strides; returns its majorness."""
    require_dim(name, data, ndim)
    require_dtype(name, data, (torch.float8_e4m3fn, FP4_PACKED))
    major = major_of(data)
    if major is None:
        fail(f"{name}: expected a K-major or MN-major layout (a unit stride in one of the last two dims), "
             f"got shape {tuple(data.shape)} with strides {data.stride()}")
    if data.dtype == FP4_PACKED and major != "k":
        fail(f"{name}: packed FP4 operands must be K-major (pairs packed along K), got strides {data.stride()}")
    require_tma_aligned(name, data)
    return major


def _check_nt_operands(a, sfa, b, sfb, recipe, recipe_a, recipe_b, lead_a=(), lead_b=(), names=("a", "b")):
    """Operands already viewed in NT form. Returns (m, k, n, recipe)."""
    name_a, name_b = names
    _check_quant_operand(name_a, a, 2 + len(lead_a))
    _check_quant_operand(name_b, b, 2 + len(lead_b))
    m, k = a.size(-2), logical_k(name_a, a)
    n, k_b = b.size(-2), logical_k(name_b, b)
    if k_b != k:
        fail(f"{name_b}: expected K = {k} (the K of {name_a}), got {k_b}")
    r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
    check_sf("sf" + name_a, sfa, lead_a, m, k, r.a, name_a)
    check_sf("sf" + name_b, sfb, lead_b, n, k, r.b, name_b)
    return m, k, n, r


def make_dense_check(layout: str):
    """Check of ``fp8_gemm_<layout>``: D [M,N] (BF16/FP32) = C + A @ B.T in NT form."""

    def check(a, sfa, b, sfb, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
              alpha=None) -> GemmProblem:
        require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, c=c)
        check_compiled_dims(compiled_dims)
        check_alpha(alpha)
        a_nt, sfa_nt, b_nt, sfb_nt = to_nt(layout, a, sfa, b, sfb)
        m, k, n, r = _check_nt_operands(a_nt, sfa_nt, b_nt, sfb_nt, recipe, recipe_a, recipe_b)
        check_out("d", d, (m, n))
        check_accumulator(c, d)
        return GemmProblem(m, n, k, r)

    check.__name__ = f"check_fp8_gemm_{layout}"
    return check


def check_fp8_gemm_nt_skip_head_mid(a, sfa, b, sfb, d, head_splits, recipe, compiled_dims, disable_ue8m0_cast):
    require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d)
    check_compiled_dims(compiled_dims)
    m, k, n, r = _check_nt_operands(a, sfa, b, sfb, recipe, None, None)
    require(len(head_splits) == 3, f"head_splits: expected (left, mid, right), got {tuple(head_splits)}")
    left, mid, right = (int(x) for x in head_splits)
    require(left >= 0 and mid >= 0 and right >= 0 and left + right > 0,
            f"head_splits: expected non-negative sizes with left + right > 0, got {(left, mid, right)}")
    require(n % (left + right) == 0,
            f"b: expected N to be a multiple of left + right = {left + right} (head_splits), got N = {n}")
    out_n = n + n // (left + right) * mid
    check_out("d", d, (m, out_n), dtypes=(torch.bfloat16,))
    return GemmProblem(m, n, k, r)


def _check_grouped_b(b, sfb, recipe, recipe_a, recipe_b, a, sfa, layout_b):
    """Grouped B [G,N,K] (or [G,K,N] for nn) against A [M,K]. Returns (num_groups, m, k, n, recipe)."""
    require_dim("b", b, 3)
    b_nt, sfb_nt = (b, sfb) if layout_b == "t" else (b.transpose(-1, -2), sfb.transpose(-1, -2))
    num_groups = b_nt.size(0)
    require(num_groups > 0, "b: expected at least one group (dim 0 > 0)")
    m, k, n, r = _check_nt_operands(a, sfa, b_nt, sfb_nt, recipe, recipe_a, recipe_b, lead_b=(num_groups,))
    return num_groups, m, k, n, r


def make_m_grouped_contiguous_check(layout: str):
    """Check of ``m_grouped_fp8_gemm_<layout>_contiguous``: A [M,K] K-major, B [G,N,K] (nt) or [G,K,N] (nn)."""

    def check(a, sfa, b, sfb, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
              use_psum_layout, ensure_zero_padding, expected_m_for_psum_layout=None) -> GemmProblem:
        require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, grouped_layout=grouped_layout)
        check_compiled_dims(compiled_dims)
        require_dim("a", a, 2)
        g, m, k, n, r = _check_grouped_b(b, sfb, recipe, recipe_a, recipe_b, a, sfa, layout[1])
        check_out("d", d, (m, n), dtypes=(torch.bfloat16,))
        check_grouped_layout(grouped_layout, g, m, use_psum_layout)
        check_expected_m_for_psum_layout(expected_m_for_psum_layout, use_psum_layout)
        return GemmProblem(m, n, k, r, g)

    check.__name__ = f"check_m_grouped_fp8_gemm_{layout}_contiguous"
    return check


def check_m_grouped_fp8_gemm_nt_masked(a, sfa, b, sfb, d, masked_m, expected_m, recipe, recipe_a, recipe_b,
                                       compiled_dims, disable_ue8m0_cast) -> GemmProblem:
    require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, masked_m=masked_m)
    check_compiled_dims(compiled_dims)
    require_dim("a", a, 3)
    require_dim("b", b, 3)
    num_groups = a.size(0)
    require(num_groups > 0, "a: expected at least one group (dim 0 > 0)")
    require(b.size(0) == num_groups, f"b: expected {num_groups} groups (dim 0 of a), got {b.size(0)}")
    m, k, n, r = _check_nt_operands(a, sfa, b, sfb, recipe, recipe_a, recipe_b,
                                    lead_a=(num_groups,), lead_b=(num_groups,))
    check_out("d", d, (num_groups, m, n), dtypes=(torch.bfloat16,))
    check_masked_m(masked_m, num_groups, expected_m)
    return GemmProblem(m, n, k, r, num_groups)


# K of every group must be a multiple of the K scale granularity (scales never straddle groups).
K_GROUP_GRANULARITY = 128


def make_k_grouped_check(layout: str):
    """Check of ``k_grouped_fp8_gemm_<layout>_contiguous``.

    nt: A is a flat buffer holding, per group, a row-major [M, K_g] block (K-major); sfa [M, sum K / 128].
    tn: A [sum K, M] (MN-major); sfa [sum K / 128, M]. Same for B with N. D, C: FP32 [G, M, N].
    """

    def check(a, sfa, b, sfb, d, ks_cpu, grouped_layout, c, recipe, compiled_dims, use_psum_layout,
              use_padded_sf_layout=False) -> GemmProblem:
        require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, grouped_layout=grouped_layout, c=c)
        check_compiled_dims(compiled_dims)
        require(recipe is not None and tuple(recipe) == (1, 1, 128),
                f"recipe: K-grouped FP8 GEMMs use per-row scales on both operands, (1, 1, 128); got {recipe}")
        if use_psum_layout:  # the groups are the psum ends of grouped_layout; sum_K is the rows of a
            require(layout == "tn", "use_psum_layout: the K-grouped psum layout takes MN-major operands "
                                    "(k_grouped_fp8_gemm_tn_contiguous), as DeepGEMM's")
            require(not use_padded_sf_layout,
                    "use_padded_sf_layout: expected False with use_psum_layout=True (the psum layout's scales are "
                    "compact: ceil(K_g / 128) rows per group, one group after the other)")
            require_dim("d", d, 3)
            require_dim("a", a, 2)
            num_groups, sum_k = d.size(0), a.size(0)
            check_k_psum_sizes(ks_cpu, num_groups, sum_k)
        else:
            ks = check_ks_cpu(ks_cpu, k_multiple=K_GROUP_GRANULARITY)
            num_groups, sum_k = len(ks), sum(ks)
        m, n = check_k_grouped_output(d, c, grouped_layout, num_groups)
        sfk = sum_k // K_GROUP_GRANULARITY
        padded_sfk = padded_sf_starts(ks, K_GROUP_GRANULARITY)[-1] if use_padded_sf_layout else None
        for name, data, sf, rows in (("a", a, sfa, m), ("b", b, sfb, n)):
            require_dtype(name, data, (torch.float8_e4m3fn,))
            require_dtype("sf" + name, sf, (torch.float32,))
            if layout == "nt":
                require_dim(name, data, 1)
                require_contiguous(name, data)
                require(data.numel() == sum_k * rows,
                        f"{name}: expected sum(ks_cpu) * {'M' if name == 'a' else 'N'} = {sum_k * rows} elements "
                        f"(per-group row-major blocks), got {data.numel()}")
                want_sf = (rows, sfk)
            else:
                require_dim(name, data, 2)
                require(tuple(data.shape) == (sum_k, rows),
                        f"{name}: expected shape {(sum_k, rows)} ([sum K, {'M' if name == 'a' else 'N'}]), "
                        f"got {tuple(data.shape)}")
                require(data.numel() == 0 or data.stride(1) == 1,
                        f"{name}: expected an MN-major tensor (stride(1) == 1), got strides {data.stride()}")
                require_tma_aligned(name, data)
                want_sf = (sfk, rows)
            if use_psum_layout:  # compact per-group scales: how many the ends need is checked with the data
                require(sf.dim() == 2 and sf.size(1) == rows,
                        f"sf{name}: expected [scale rows along K, {'M' if name == 'a' else 'N'} = {rows}] "
                        f"(use_psum_layout: ceil(K_g / 128) rows per group), got shape {tuple(sf.shape)}")
                continue
            if padded_sfk is not None:  # DeepGEMM's padded per-group SF: at least the padded extent along K
                k_axis = 1 if layout == "nt" else 0
                require(sf.dim() == 2 and sf.size(1 - k_axis) == rows and sf.size(k_axis) >= padded_sfk,
                        f"sf{name}: expected {padded_sfk} or more scales along K (use_padded_sf_layout: per group "
                        f"ceil(align(K_g, {peek('mk_alignment')}) / 128)) and {rows} along "
                        f"{'M' if name == 'a' else 'N'}, got shape {tuple(sf.shape)}")
                continue
            require(tuple(sf.shape) == want_sf,
                    f"sf{name}: expected shape {want_sf} (one scale per row per 128 K), got {tuple(sf.shape)}")
        return GemmProblem(m, n, sum_k, Recipe((1, 128), (1, 128)), num_groups)

    check.__name__ = f"check_k_grouped_fp8_gemm_{layout}_contiguous"
    return check
