"""CUDA launchers of the scale-factor layout ops (the op's CUDA kernel calls them after the shared check): allocate
the geometry the check computed, launch one kernel of ``kernels.py`` on the tile ``plan.py`` gives, return the fresh
tensor.

Covered: every input of ``get_mn_major_tma_aligned_tensor``, ``get_mn_major_tma_aligned_packed_ue8m0_tensor``
without ``psum_layout`` (with it: the reference), ``get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor``, and
``transform_sf_into_required_layout``'s MN-major rules (FP32 and packed int32); its (128, 128) rule keeps the
input's layout and is a plain copy (the reference). The public API returns the input itself where it is already in
the required layout (``api.py``), so these run only when something has to move.

The launchers taking ``record=`` are wrapped in ``core/plans.replayable_allocating`` (``ops.py``): the first call
with a metadata signature computes the geometry and the launch and records it; later calls with that signature
allocate the same output and replay the launch (no geometry, view or grid logic per call). Calls that make no
launch (empty outputs, grids past CUDA's limits) record nothing and always take this full path.

The kernels move 4-byte words (no MMA, no TMA): they run on every architecture from sm_80 on (below it, the
reference: ``arch.kernels_run``).
"""

from __future__ import annotations

import torch

from ..core import arch
from ..core.launch import launch
from ..utils.numeric import ceil_div
from . import checks
from .plan import BLOCK_K_GROUPED_MN, BLOCK_PACKED_ROWS, MAX_GRID_YZ, NUM_WARPS, tile
from .reference import allocate


def _batched(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 3 else t.unsqueeze(0)


def _device_index(t: torch.Tensor) -> int:
    return t.device.index or 0


def _unit_strides(src: torch.Tensor) -> tuple[bool, bool]:
    """(columns contiguous, rows contiguous) of a batched [G, R, C] input, stated to the kernels so their loads
    vectorise along the contiguous side; a single column counts as row-contiguous when its rows are adjacent."""
    c_unit = src.stride(2) == 1 and src.size(2) > 1
    return c_unit, src.stride(1) == 1 and not c_unit


def _mn_major_copy(sf: torch.Tensor, out: torch.Tensor, record: list | None = None) -> torch.Tensor:
    """out (MN-major, freshly allocated, same shape) <- sf, bit-exact, 4-byte elements moved as int32."""
    from .kernels import _mn_major_copy_kernel
    if out.numel() == 0:
        return out
    src, dst = _batched(sf), _batched(out)
    groups, rows, cols = src.shape
    src_i = src.view(torch.int32) if src.dtype != torch.int32 else src
    dst_i = dst.view(torch.int32) if dst.dtype != torch.int32 else dst
    block_mn, block_cols = tile(cols)
    grid = (ceil_div(rows, block_mn), ceil_div(cols, block_cols), groups)
    if max(grid[1:]) > MAX_GRID_YZ:
        return out.copy_(sf)
    c_unit, r_unit = _unit_strides(src)
    args = (src_i, dst_i, rows, cols, src.stride(0), src.stride(1), src.stride(2), dst.stride(0), dst.stride(2),
            block_mn, block_cols, c_unit, r_unit)
    launch(_mn_major_copy_kernel, grid, args, name="layout_mn_major_copy",
           config_key=(block_mn, block_cols, c_unit, r_unit),
           num_warps=NUM_WARPS, device_index=_device_index(sf), record=record)
    return out


def _runs(sf: torch.Tensor) -> bool:
    return arch.kernels_run(arch.sm_of_tensor(sf))


def get_mn_major_tma_aligned_tensor(sf, *, record: list | None = None):
    if not _runs(sf):
        return NotImplemented
    return _mn_major_copy(sf, allocate(checks.geometry_get_mn_major_tma_aligned_tensor(sf), sf.device), record)


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout, *, record: list | None = None):
    from .kernels import _pack_ue8m0_kernel
    if psum_layout is not None or not _runs(sf):
        return NotImplemented  # rows outside the psum groups: the reference zeroes them
    out = allocate(checks.geometry_get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout), sf.device)
    if out.numel() == 0:
        return out
    src, dst = _batched(sf), _batched(out)
    groups, rows, sf_k = src.shape
    packed = dst.size(2)
    block_mn, block_cols = tile(packed)
    grid = (ceil_div(rows, block_mn), ceil_div(packed, block_cols), groups)
    if max(grid[1:]) > MAX_GRID_YZ:
        return NotImplemented
    c_unit, r_unit = _unit_strides(src)
    args = (src, dst, rows, sf_k, packed, src.stride(0), src.stride(1), src.stride(2), dst.stride(0), dst.stride(2),
            block_mn, block_cols, c_unit, r_unit)
    launch(_pack_ue8m0_kernel, grid, args, name="layout_pack_ue8m0",
           config_key=(block_mn, block_cols, c_unit, r_unit),
           num_warps=NUM_WARPS, device_index=_device_index(sf), record=record)
    return out


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, grouped_layout, ks_cpu, gran_k, k_alignment,
                                                           use_psum_layout):
    from .kernels import _k_grouped_pack_kernel
    if not _runs(sf):
        return NotImplemented
    out = allocate(checks.geometry_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
        sf, grouped_layout, ks_cpu, gran_k, k_alignment, use_psum_layout), sf.device)
    rows, mn = out.shape
    if out.numel() == 0:
        return out
    num_groups = grouped_layout.size(0)
    g_pad = max(2, 1 << (num_groups - 1).bit_length())
    grid = (ceil_div(rows, BLOCK_PACKED_ROWS), ceil_div(mn, BLOCK_K_GROUPED_MN), 1)
    if grid[1] > MAX_GRID_YZ:
        return NotImplemented
    args = (sf, grouped_layout, out, rows, mn, sf.size(0), num_groups, gran_k, k_alignment, bool(use_psum_layout),
            g_pad, BLOCK_PACKED_ROWS, BLOCK_K_GROUPED_MN)
    launch(_k_grouped_pack_kernel, grid, args, name="layout_k_grouped_pack",
           config_key=(bool(use_psum_layout), g_pad, BLOCK_PACKED_ROWS, BLOCK_K_GROUPED_MN), num_warps=NUM_WARPS,
           device_index=_device_index(sf))
    return out


def transform_sf_into_required_layout(sf, mn, k, recipe, num_groups, is_sfa, disable_ue8m0_cast, psum_layout, *,
                                      record: list | None = None):
    if not _runs(sf):
        return NotImplemented
    geometry = checks.geometry_transform_sf_into_required_layout(sf, mn, k, recipe, num_groups, is_sfa,
                                                                 disable_ue8m0_cast, psum_layout)
    out = allocate(geometry, sf.device)
    if out.dim() >= 2 and out.size(-2) > 1 and out.stride(-2) != 1:
        return NotImplemented  # the (128, 128) rule keeps a K-major layout: a plain copy (the reference)
    return _mn_major_copy(sf, out, record)
