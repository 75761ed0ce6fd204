"""Torch references of the scale-factor layout ops (the CPU kernels, and the CUDA kernels until Triton ones exist).

All of them allocate a fresh output with the geometry their check computed (the fake kernels allocate the same) and
never read data on the host, so the CUDA fallback stays capturable in CUDA graphs.

UE8M0 packing keeps the biased exponent byte of each FP32 scale, ``(bits >> 23) & 0xFF``, and drops its sign and
mantissa. DeepGEMM requires power-of-two scales here (a device assert); we do not read data to check it, so a
non-power-of-two scale is silently rounded down to the power of two of its exponent (and a negative one loses its
sign). ``deep_gemm.utils.ceil_to_ue8m0`` produces valid scales.
"""

from __future__ import annotations

import torch

from ..gemm.fp8.reference import row_groups
from ..utils.math import ceil_div
from . import checks
from .checks import SCALES_PER_INT, OutputGeometry

_FP32_MANTISSA_BITS = 23
_EXPONENT_MASK = 0xFF


def allocate(geometry: OutputGeometry, device: torch.device) -> torch.Tensor:
    """Uninitialised output of the given geometry (the fake kernels allocate through this too)."""
    return torch.empty_strided(geometry.size, geometry.stride, dtype=geometry.dtype, device=device)


def _exponent_bytes(sf: torch.Tensor) -> torch.Tensor:
    """Biased exponent of every FP32 scale, as int32 (sign and mantissa dropped)."""
    return (sf.view(torch.int32) >> _FP32_MANTISSA_BITS) & _EXPONENT_MASK


def _pack_rows(exponents: torch.Tensor) -> torch.Tensor:
    """int32 exponents [..., C] -> int32 [..., ceil(C / 4)]: byte j of int i is column 4i + j (missing ones 0)."""
    cols = exponents.size(-1)
    if cols == 0:  # torch cannot reinterpret an empty last dim as wider elements
        return exponents.new_zeros(exponents.shape)
    pad = ceil_div(cols, SCALES_PER_INT) * SCALES_PER_INT - cols
    as_bytes = torch.nn.functional.pad(exponents, (0, pad)).to(torch.uint8).contiguous()
    # Little-endian byte order, on the host and the GPU alike: byte j holds column 4i + j.
    return as_bytes.view(torch.int32)


def get_mn_major_tma_aligned_tensor_reference(sf: torch.Tensor) -> torch.Tensor:
    return allocate(checks.geometry_get_mn_major_tma_aligned_tensor(sf), sf.device).copy_(sf)


def get_mn_major_tma_aligned_packed_ue8m0_tensor_reference(sf: torch.Tensor,
                                                           psum_layout: torch.Tensor | None) -> torch.Tensor:
    geometry = checks.geometry_get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout)
    exponents = _exponent_bytes(sf)
    if psum_layout is not None:
        # Rows outside every group range [align(end[g-1], mk_alignment), end[g]) pack to 0 (they may be garbage).
        mn = sf.size(-2)
        inside = row_groups(psum_layout, mn, psum_layout.size(0), use_psum_layout=True) >= 0
        exponents = torch.where(inside[:, None], exponents, torch.zeros_like(exponents))
    return allocate(geometry, sf.device).copy_(_pack_rows(exponents))


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_reference(sf, grouped_layout, ks_cpu, gran_k: int,
                                                                     k_alignment: int, use_psum_layout: bool):
    """Packed row p belongs to the group whose packed range covers it; its slot j holds SF row
    ``group_sf_start + 4 * (p - group_packed_start) + j`` if that row is inside the group, else 0.

    Group sizes come from ``grouped_layout`` on the device (K sizes, or psum end offsets whose group g spans
    ``[align(end[g-1], k_alignment), end[g])``; a negative span counts as empty), so nothing syncs. Input SF rows are
    compact (group after group); packed rows no group reaches (the psum upper bound's slack) are 0.
    """
    num_sf_rows, mn = sf.shape
    num_groups = grouped_layout.size(0)
    out = allocate(checks.geometry_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
        sf, grouped_layout, ks_cpu, gran_k, k_alignment, use_psum_layout), sf.device)
    rows = out.size(0)
    if rows == 0 or num_sf_rows == 0:
        return out.zero_()

    layout = grouped_layout.long()
    if use_psum_layout:
        previous_end = torch.cat([layout.new_zeros(1), layout[:-1]])
        group_start = (previous_end + k_alignment - 1) // k_alignment * k_alignment
        group_k = (layout - group_start).clamp(min=0)
    else:
        group_k = layout.clamp(min=0)
    group_sf_rows = (group_k + gran_k - 1) // gran_k
    group_packed_rows = (group_sf_rows + SCALES_PER_INT - 1) // SCALES_PER_INT
    group_sf_start = torch.cumsum(group_sf_rows, 0) - group_sf_rows
    group_packed_end = torch.cumsum(group_packed_rows, 0)
    group_packed_start = group_packed_end - group_packed_rows

    packed_row = torch.arange(rows, device=sf.device)
    owner = torch.searchsorted(group_packed_end, packed_row, right=True)  # first group ending after the row
    owned = owner < num_groups
    owner = owner.clamp(max=num_groups - 1)
    slot = (packed_row - group_packed_start[owner])[:, None] * SCALES_PER_INT + \
        torch.arange(SCALES_PER_INT, device=sf.device)[None, :]  # [rows, 4]
    source = group_sf_start[owner][:, None] + slot
    valid = owned[:, None] & (slot < group_sf_rows[owner][:, None]) & (source < num_sf_rows)
    exponents = _exponent_bytes(sf)[torch.where(valid, source, 0).flatten()].view(rows, SCALES_PER_INT, mn)
    exponents = torch.where(valid[:, :, None], exponents, torch.zeros_like(exponents))
    return out.copy_(_pack_rows(exponents.transpose(1, 2)).view(rows, mn))


def transform_sf_into_required_layout_reference(sf, mn: int, k: int, recipe, num_groups, is_sfa,
                                                disable_ue8m0_cast: bool, psum_layout) -> torch.Tensor:
    geometry = checks.geometry_transform_sf_into_required_layout(
        sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, psum_layout)
    return allocate(geometry, sf.device).copy_(sf)
