"""CPU references of the FP4 GEMMs (FP64 products of the dequantised operands, one rounding per output) and the
cuBLASLt scale-tile layout both ways."""

from __future__ import annotations

import torch

from ...utils.math import ceil_div
from ...utils.quant import fp4_e2m1_to_float
from ..fp8.reference import k_group_bounds
from .checks import K_GROUP_SF, NVFP4_BLOCK, TILE_K, TILE_ROWS

_TILE_SCALES = TILE_K // NVFP4_BLOCK  # 4 scale columns per tile


def to_cublaslt_tiled_sf(sf: torch.Tensor) -> torch.Tensor:
    """Scales [mn, k/16] (any dtype) -> cuBLASLt's tiled layout [ceil(mn/128), ceil(k/64), 32, 4, 4], zero-padded:
    scale (r, j) at tile (r // 128, j // 4), position (r % 32, (r // 32) % 4, j % 4)."""
    mn, cols = sf.shape
    row_tiles, col_tiles = ceil_div(mn, TILE_ROWS), ceil_div(cols, _TILE_SCALES)
    padded = sf.new_zeros((row_tiles * TILE_ROWS, col_tiles * _TILE_SCALES))
    padded[:mn, :cols] = sf
    tiles = padded.view(row_tiles, 4, 32, col_tiles, _TILE_SCALES)  # row = tile*128 + r4*32 + r32
    return tiles.permute(0, 3, 2, 1, 4).contiguous()


def from_cublaslt_tiled_sf(tiled: torch.Tensor, mn: int, k: int) -> torch.Tensor:
    """Inverse of :func:`to_cublaslt_tiled_sf` on a flat or shaped tile buffer: -> [mn, k/16]."""
    row_tiles, col_tiles = ceil_div(mn, TILE_ROWS), ceil_div(k, TILE_K)
    tiles = tiled.reshape(row_tiles, col_tiles, 32, 4, _TILE_SCALES)
    rows = tiles.permute(0, 3, 2, 1, 4).reshape(row_tiles * TILE_ROWS, col_tiles * _TILE_SCALES)
    return rows[:mn, :k // NVFP4_BLOCK]


def _ue4m3_values(sf: torch.Tensor) -> torch.Tensor:
    return sf.view(torch.uint8).view(torch.float8_e4m3fn).double()


def _write(d: torch.Tensor, out: torch.Tensor, c) -> None:
    if c is not None:
        out = out + c.double()
    d.copy_(out.to(d.dtype))


def cublaslt_nvfp4_gemm_nt_reference(a, sfa, b, sfb, d, c) -> None:
    k = a.size(1) * 2
    values = []
    for data, sf in ((a, sfa), (b, sfb)):
        scales = _ue4m3_values(from_cublaslt_tiled_sf(sf, data.size(0), k))
        values.append(fp4_e2m1_to_float(data).double() * scales.repeat_interleave(NVFP4_BLOCK, dim=1))
    _write(d, values[0] @ values[1].T, c)


def k_grouped_fp4_gemm_nt_contiguous_reference(a, sfa, b, sfb, d, ks, grouped_layout, c, recipe, compiled_dims,
                                               use_psum_layout) -> None:
    sum_k = a.size(1) * 2
    values = [fp4_e2m1_to_float(data).double() * sf.double().T.repeat_interleave(K_GROUP_SF, dim=1)[:, :sum_k]
              for data, sf in ((a, sfa), (b, sfb))]
    starts, ends = k_group_bounds(grouped_layout, use_psum_layout)
    k = torch.arange(sum_k, device=a.device)
    mask = ((k[None, :] >= starts[:, None]) & (k[None, :] < ends[:, None])).double()  # [G, sum_K]
    _write(d, torch.einsum("mk,gk,nk->gmn", values[0], mask, values[1]), c)
