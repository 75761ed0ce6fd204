"""Checks of the scale-factor layout ops, and the output geometry their reference and fake kernels share.

Every check takes exactly its op's schema arguments, reads metadata only (it also runs on fake tensors) and returns
the geometry of the op's output (``OutputGeometry``), so the fake kernel and the reference allocate identical sizes
and strides. Layout ops always return fresh storage, never their input or a view of it.

Layouts (DeepGEMM spec §0.3, §5):

* MN-major TMA-aligned FP32: shape ``[(G,) MN, SFK]``, strides ``((align(MN, 4) * SFK,) 1, align(MN, 4))``;
* packed UE8M0: int32 ``[(G,) MN, ceil(SFK / 4)]`` with the same stride rule (4 exponent bytes per int32, byte j =
  scale column 4i + j, missing columns 0);
* K-grouped packed UE8M0: int32 ``[rows, MN]`` contiguous, per group ``ceil(SFK_g / 4)`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..core.errors import (fail, require, require_contiguous, require_dim, require_dtype, require_int_range,
                           require_same_device)
from ..core.data_checks import index_text, require_values
from ..core.runtime import INT32_MAX
from ..utils.math import ceil_div, get_tma_aligned_size

# FP32 and INT32 scales are both 4 bytes wide: TMA needs the MN stride padded to 16 bytes = 4 elements.
SF_ELEMENT_SIZE = 4
# UE8M0 exponent bytes packed into one int32.
SCALES_PER_INT = 4
# Scale granularities along K that DeepGEMM's recipes use (32: SM100 FP4-style, 128: FP8).
GRAN_K_CHOICES = (32, 128)
# DeepGEMM's K-grouped packer caches the group sizes in one warp (32 lanes x 4 each): at most 128 groups.
MAX_K_GROUPS = 128
# K-grouped group sizes are multiples of k_alignment, itself a multiple of the smallest scale granularity.
K_ALIGNMENT_UNIT = 32


@dataclass(frozen=True)
class OutputGeometry:
    """What a layout op returns: sizes, strides and dtype."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


def mn_major_geometry(shape: Sequence[int], dtype: torch.dtype) -> OutputGeometry:
    """MN-major TMA-aligned layout of logical shape ``[(G,) MN, cols]``."""
    aligned_mn = get_tma_aligned_size(shape[-2], SF_ELEMENT_SIZE)
    cols = shape[-1]
    stride = (1, aligned_mn) if len(shape) == 2 else (aligned_mn * cols, 1, aligned_mn)
    return OutputGeometry(tuple(shape), stride, dtype)


def _check_fp32_sf(sf: torch.Tensor) -> None:
    require_dtype("sf", sf, (torch.float32,))
    require_dim("sf", sf, (2, 3))


def _check_psum_layout(name: str, psum: torch.Tensor) -> None:
    require_dtype(name, psum, (torch.int32,))
    require_dim(name, psum, 1)
    require_contiguous(name, psum)
    require(psum.numel() > 0, f"{name}: expected at least one group end, got an empty tensor")


def check_get_mn_major_tma_aligned_tensor(sf: torch.Tensor) -> OutputGeometry:
    _check_fp32_sf(sf)
    return geometry_get_mn_major_tma_aligned_tensor(sf)


def packed_ue8m0_geometry(shape: Sequence[int]) -> OutputGeometry:
    """Geometry of FP32 scales ``[(G,) MN, SFK]`` packed into MN-major int32 ``[(G,) MN, ceil(SFK / 4)]``."""
    return mn_major_geometry((*shape[:-1], ceil_div(shape[-1], SCALES_PER_INT)), torch.int32)


def check_get_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor,
                                                       psum_layout: torch.Tensor | None) -> OutputGeometry:
    _check_fp32_sf(sf)
    if psum_layout is not None:
        require_same_device(sf=sf, psum_layout=psum_layout)
        require(sf.dim() == 2 or sf.size(0) == 1,
                f"sf: expected one batch of scales with psum_layout (rows are grouped by psum_layout), "
                f"got shape {tuple(sf.shape)}")
        require_contiguous("sf", sf)
        _check_psum_layout("psum_layout", psum_layout)
    return geometry_get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout)


def k_grouped_packed_rows(sum_sf_k: int, num_groups: int, ks_cpu: Sequence[int] | None, gran_k: int) -> int:
    """Rows of the K-grouped packed output: ``sum_g ceil(SFK_g / 4)`` with known group sizes, else the bound
    ``(sum SFK + 3 G) // 4`` (each group wastes at most three slots of its last packed row)."""
    if ks_cpu:
        return sum(ceil_div(int(k) // gran_k, SCALES_PER_INT) for k in ks_cpu)
    return (sum_sf_k + (SCALES_PER_INT - 1) * num_groups) // SCALES_PER_INT


def k_grouped_geometry(sum_sf_k: int, mn: int, num_groups: int, ks_cpu: Sequence[int] | None,
                       gran_k: int) -> OutputGeometry:
    """Contiguous int32 ``[rows, MN]`` (torch's canonical strides: a size-0 MN counts as 1)."""
    rows = k_grouped_packed_rows(sum_sf_k, num_groups, ks_cpu, gran_k)
    return OutputGeometry((rows, mn), (max(mn, 1), 1), torch.int32)


def check_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor, grouped_layout: torch.Tensor,
                                                                 ks_cpu: Sequence[int] | None, gran_k: int,
                                                                 k_alignment: int,
                                                                 use_psum_layout: bool) -> OutputGeometry:
    require_same_device(sf=sf, grouped_layout=grouped_layout)
    require_dtype("sf", sf, (torch.float32,))
    require_dim("sf", sf, 2)
    require_contiguous("sf", sf)
    sum_sf_k, mn = sf.shape
    require(mn % SCALES_PER_INT == 0,
            f"sf: expected MN (dim 1) to be a multiple of {SCALES_PER_INT} (rows are packed 16 bytes at a time), "
            f"got shape {tuple(sf.shape)}")
    require_dtype("grouped_layout", grouped_layout, (torch.int32,))
    require_dim("grouped_layout", grouped_layout, 1)
    require_contiguous("grouped_layout", grouped_layout)
    num_groups = grouped_layout.size(0)
    require(1 <= num_groups <= MAX_K_GROUPS,
            f"grouped_layout: expected 1 to {MAX_K_GROUPS} groups, got {num_groups}")
    require(gran_k in GRAN_K_CHOICES, f"gran_k: expected one of {GRAN_K_CHOICES}, got {gran_k}")
    require_int_range("k_alignment", k_alignment, 1, INT32_MAX)
    require(k_alignment % K_ALIGNMENT_UNIT == 0,
            f"k_alignment: expected a multiple of {K_ALIGNMENT_UNIT}, got {k_alignment}")
    if ks_cpu:
        require(len(ks_cpu) == num_groups,
                f"ks_cpu: expected {num_groups} group K sizes (one per grouped_layout entry), got {len(ks_cpu)}")
        for g, kg in enumerate(ks_cpu):
            require(0 <= kg <= INT32_MAX and kg % k_alignment == 0 and kg % gran_k == 0,
                    f"ks_cpu: expected non-negative multiples of k_alignment {k_alignment} and gran_k {gran_k}, "
                    f"got {kg} for group {g}")
        want = sum(int(kg) // gran_k for kg in ks_cpu)
        require(want == sum_sf_k,
                f"sf: expected sum(ks_cpu) / gran_k = {want} scale rows (dim 0), got shape {tuple(sf.shape)}")
    else:
        require(use_psum_layout, "ks_cpu: expected the per-group K sizes (None or [] needs use_psum_layout=True, "
                                 "where group ends are read from grouped_layout on the device)")
    return k_grouped_geometry(sum_sf_k, mn, num_groups, ks_cpu, gran_k)


# ---- transform_sf_into_required_layout ---------------------------------------------------------------------------

def granularity(recipe: Sequence[int], is_sfa: bool | None) -> tuple[int, int]:
    """(gran_mn, gran_k) of a 3-element recipe with is_sfa, or of a 2-element one."""
    if len(recipe) == 3:
        require(is_sfa is not None, "is_sfa: expected True (SFA) or False (SFB) with a 3-element recipe "
                                    f"(gran_m_a, gran_n_b, gran_k), got None for recipe {tuple(recipe)}")
        gran_mn, gran_k = (recipe[0] if is_sfa else recipe[1]), recipe[2]
    elif len(recipe) == 2:
        require(is_sfa is None, f"is_sfa: expected None with a 2-element recipe (gran_mn, gran_k), got {is_sfa}")
        gran_mn, gran_k = recipe
    else:
        fail(f"recipe: expected (gran_m_a, gran_n_b, gran_k) or (gran_mn, gran_k), got {tuple(recipe)}")
    require_int_range("recipe (gran_mn)", gran_mn, 1, INT32_MAX)
    require_int_range("recipe (gran_k)", gran_k, 1, INT32_MAX)
    return int(gran_mn), int(gran_k)


def _dense_geometry(sf: torch.Tensor) -> OutputGeometry:
    """A fresh copy of a contiguous or transposed-contiguous FP32 block-scale tensor, with the same layout
    (torch's canonical strides: a size-0 dimension counts as 1)."""
    rows, cols = max(sf.size(-2), 1), max(sf.size(-1), 1)
    if sf.is_contiguous():
        inner = (cols, 1)
    else:
        inner = (1, rows)
    stride = inner if sf.dim() == 2 else (rows * cols, *inner)
    return OutputGeometry(tuple(sf.shape), stride, torch.float32)


def _is_transposed_contiguous(sf: torch.Tensor) -> bool:
    return sf.transpose(-1, -2).is_contiguous()


def _require_tma_mn_major_packed(sf: torch.Tensor, mn: int) -> None:
    """DeepGEMM's layout contract for already packed UE8M0 scales: MN-major, MN stride padded to 16 bytes, groups
    dense. Strides of size-1 dimensions carry no information and are ignored."""
    if sf.numel() == 0:
        return
    if sf.size(-2) > 1 and sf.stride(-2) != 1:
        fail(f"sf: expected MN-major packed scales (stride(-2) == 1), got strides {sf.stride()}")
    aligned_mn = get_tma_aligned_size(mn, SF_ELEMENT_SIZE)
    if sf.size(-1) > 1 and (sf.stride(-1) < aligned_mn or sf.stride(-1) % SCALES_PER_INT != 0):
        fail(f"sf: expected a column stride >= align(MN, 4) = {aligned_mn} and a multiple of 4 (TMA alignment), "
             f"got strides {sf.stride()}")
    if sf.dim() == 3 and sf.size(0) > 1 and sf.stride(0) != sf.stride(-1) * sf.size(-1):
        fail(f"sf: expected dense groups (stride(0) == stride(-1) * size(-1) = {sf.stride(-1) * sf.size(-1)}), "
             f"got strides {sf.stride()}")


def plan_transform_sf(sf: torch.Tensor, mn: int, k: int, recipe: Sequence[int], num_groups: int | None,
                      is_sfa: bool | None) -> OutputGeometry:
    """Validate the scale tensor against (mn, k, recipe) and pick the SM90 transformation (first match wins):

    1. FP32, gran_mn 1, gran_k in {32, 128}  -> MN-major TMA-aligned FP32 copy;
    2. FP32, gran (128, 128), contiguous or transposed-contiguous -> a copy with the same layout;
    3. INT32 packed UE8M0, gran_mn 1, gran_k in {32, 128}, MN-major TMA-aligned -> a canonical MN-major copy;
    anything else -> "Unknown SF transformation".
    """
    require_int_range("mn", mn, 0, INT32_MAX)
    require_int_range("k", k, 0, INT32_MAX)
    gran_mn, gran_k = granularity(recipe, is_sfa)
    require_dtype("sf", sf, (torch.float32, torch.int32))
    if num_groups is not None:
        require_int_range("num_groups", num_groups, 0, INT32_MAX)
        require_dim("sf", sf, 3)
        require(sf.size(0) == num_groups, f"sf: expected {num_groups} groups (num_groups) in dim 0, "
                                          f"got shape {tuple(sf.shape)}")
    else:
        require_dim("sf", sf, 2)
    packed = sf.dtype == torch.int32
    want_rows = ceil_div(mn, gran_mn)
    want_cols = ceil_div(k, gran_k * (SCALES_PER_INT if packed else 1))
    if (sf.size(-2), sf.size(-1)) != (want_rows, want_cols):
        what = f"ceil({k} / (4 * {gran_k}))" if packed else f"ceil({k} / {gran_k})"
        fail(f"sf: expected the last two dims to be ({want_rows}, {want_cols}) = (ceil({mn} / {gran_mn}), {what}), "
             f"got shape {tuple(sf.shape)}")

    if not packed and gran_mn == 1 and gran_k in GRAN_K_CHOICES:
        return mn_major_geometry(sf.shape, torch.float32)
    if not packed and (gran_mn, gran_k) == (128, 128):
        if not (sf.is_contiguous() or _is_transposed_contiguous(sf)):
            fail(f"sf: expected (128, 128) block scales to be contiguous or contiguous after transposing the last "
                 f"two dims, got shape {tuple(sf.shape)} with strides {sf.stride()}")
        return _dense_geometry(sf)
    if packed and gran_mn == 1 and gran_k in GRAN_K_CHOICES:
        _require_tma_mn_major_packed(sf, mn)
        return mn_major_geometry(sf.shape, torch.int32)
    dtype = str(sf.dtype).replace("torch.", "")
    fail(f"sf: Unknown SF transformation for {dtype} scales with granularity (gran_mn {gran_mn}, gran_k {gran_k}) "
         f"from recipe {tuple(recipe)}; supported: float32 (1, 32|128), float32 (128, 128), int32 (1, 32|128)")


def check_transform_sf_into_required_layout(sf: torch.Tensor, mn: int, k: int, recipe: Sequence[int],
                                            num_groups: int | None, is_sfa: bool | None, disable_ue8m0_cast: bool,
                                            psum_layout: torch.Tensor | None) -> OutputGeometry:
    if psum_layout is not None:
        require_same_device(sf=sf, psum_layout=psum_layout)
        _check_psum_layout("psum_layout", psum_layout)
    return plan_transform_sf(sf, mn, k, recipe, num_groups, is_sfa)


# ---- output geometry of each op from its schema arguments (no validation: the check has run) ---------------------

def geometry_get_mn_major_tma_aligned_tensor(sf) -> OutputGeometry:
    return mn_major_geometry(sf.shape, torch.float32)


def geometry_get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout) -> OutputGeometry:
    return packed_ue8m0_geometry(sf.shape)


def geometry_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, grouped_layout, ks_cpu, gran_k, k_alignment,
                                                                    use_psum_layout) -> OutputGeometry:
    return k_grouped_geometry(sf.size(0), sf.size(1), grouped_layout.size(0), ks_cpu, gran_k)


def geometry_transform_sf_into_required_layout(sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast,
                                               psum_layout) -> OutputGeometry:
    return plan_transform_sf(sf, mn, k, recipe, num_groups, is_sfa)


# ---- Data checks: values (CPU kernels always; CUDA in the checked mode, core/checks_mode.py) ----------------------

_FP32_MANTISSA_MASK = (1 << 23) - 1


def check_data_ue8m0_scales(name: str, sf: torch.Tensor, rows: torch.Tensor | None = None) -> None:
    """UE8M0 packing keeps only the exponent bits: every scale (of the rows selected by ``rows``, a boolean mask of
    dim -2, when given) must be a non-negative power of two (or zero), else the packed value would be another
    number."""
    bits = sf.float().contiguous().view(torch.int32)
    bad = ((bits & _FP32_MANTISSA_MASK) != 0) | (bits < 0)
    if rows is not None:
        bad = bad & rows.reshape(*([1] * (bad.dim() - 2)), -1, 1)
    shape = tuple(sf.shape)
    require_values([
        (bad, lambda i: f"{name}: expected non-negative powers of two (UE8M0 keeps only the exponent; "
                        f"deep_gemm.utils.ceil_to_ue8m0 rounds scales up to one), got {name}{index_text(shape, i)} = "
                        f"{float(sf.reshape(-1)[i])!r}"),
    ])


def check_data_get_mn_major_tma_aligned_packed_ue8m0_tensor(*, sf, psum_layout, **_) -> None:
    from ..gemm.fp8.reference import row_groups  # (lazy: the GEMM package imports the layout helpers)
    from ..gemm.grouped_checks import check_data_grouped_layout
    rows = None
    if psum_layout is not None:
        mn = sf.size(-2)
        check_data_grouped_layout(psum_layout, psum_layout.size(0), mn, use_psum_layout=True)
        rows = row_groups(psum_layout, mn, psum_layout.size(0), use_psum_layout=True) >= 0
    check_data_ue8m0_scales("sf", sf, rows)


def check_data_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(*, sf, grouped_layout, ks_cpu,
                                                                      use_psum_layout, **_) -> None:
    from ..gemm.grouped_checks import check_data_ks
    if ks_cpu and not use_psum_layout:
        check_data_ks(grouped_layout, ks_cpu)
        check_data_ue8m0_scales("sf", sf)
