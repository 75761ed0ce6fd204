"""Argument checks of ``k_grouped_fp4_gemm_nt_contiguous`` and ``cublaslt_nvfp4_gemm_nt`` (metadata only)."""

from __future__ import annotations

import torch

from ...core.errors import require, require_contiguous, require_dim, require_dtype, require_same_device
from ...utils.math import ceil_div

FP4_PACKED = torch.int8
K_GROUP_SF = 32       # K elements per UE8M0 scale (K-grouped FP4)
NVFP4_BLOCK = 16      # K elements per UE4M3 scale (NVFP4)
TILE_ROWS, TILE_K = 128, 64  # one cuBLASLt scale tile: 128 rows x 64 K (4 scales of 16), 512 bytes


def _check_compiled_dims(compiled_dims) -> None:
    require(isinstance(compiled_dims, str) and set(compiled_dims) <= set("mnk"),
            f"compiled_dims: expected a string of the letters m, n, k, got {compiled_dims!r}")


def _check_accumulator(c, d) -> None:
    if c is None:
        return
    require_dtype("c", c, (d.dtype,))
    require(tuple(c.shape) == tuple(d.shape), f"c: expected d's shape {tuple(d.shape)}, got {tuple(c.shape)}")


def check_k_grouped_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d, ks, grouped_layout, c, recipe, compiled_dims,
                                           use_psum_layout) -> None:
    require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, grouped_layout=grouped_layout, c=c)
    _check_compiled_dims(compiled_dims)
    require(recipe is not None and tuple(recipe) == (1, 1, K_GROUP_SF),
            f"recipe: the K-grouped FP4 GEMM uses per-row UE8M0 scales per 32 K, (1, 1, 32); got {recipe}")
    require_dtype("d", d, (torch.float32,))
    require_dim("d", d, 3)
    require_contiguous("d", d)
    num_groups, m, n = d.shape
    _check_accumulator(c, d)
    if c is not None:
        require_contiguous("c", c)
    require_dtype("grouped_layout", grouped_layout, (torch.int32,))
    require_dim("grouped_layout", grouped_layout, 1)
    require_contiguous("grouped_layout", grouped_layout)
    require(grouped_layout.numel() == num_groups,
            f"grouped_layout: expected {num_groups} entries (G of d), got {grouped_layout.numel()}")
    sums = []
    for name, data, sf, rows, what in (("a", a, sfa, m, "M"), ("b", b, sfb, n, "N")):
        require_dtype(name, data, (FP4_PACKED,))
        require_dim(name, data, 2)
        require_contiguous(name, data)
        require(data.size(0) == rows,
                f"{name}: expected {rows} rows ({what} of d), got shape {tuple(data.shape)}")
        sum_k = data.size(1) * 2
        sums.append(sum_k)
        require_dtype("sf" + name, sf, (torch.float32,))
        want = (ceil_div(sum_k, K_GROUP_SF), rows)
        require(tuple(sf.shape) == want,
                f"sf{name}: expected shape {want} ([sum_K / 32, {what}]: one scale per row per 32 K), "
                f"got {tuple(sf.shape)}")
    require(sums[0] == sums[1], f"a, b: expected the same sum_K, got {sums[0]} and {sums[1]} (2 values per byte)")
    sum_k = sums[0]
    if not use_psum_layout:
        require(ks is not None and len(ks) == num_groups,
                f"ks: expected {num_groups} per-group K sizes without the psum layout, got {ks}")
    if ks is not None and len(ks) > 0:
        require(len(ks) == num_groups, f"ks: expected {num_groups} per-group K sizes, got {len(ks)}")
        require(all(k >= 0 and k % K_GROUP_SF == 0 for k in ks) or use_psum_layout,
                f"ks: expected non-negative multiples of {K_GROUP_SF} (whole scale blocks), got {list(ks)}")
        if not use_psum_layout:
            require(sum(ks) == sum_k, f"ks: expected sum(ks) == sum_K = {sum_k} (2 * a.size(1)), got {sum(ks)}")


def cublaslt_sf_bytes(mn: int, k: int) -> int:
    return ceil_div(mn, TILE_ROWS) * ceil_div(k, TILE_K) * TILE_ROWS * (TILE_K // NVFP4_BLOCK)


def check_cublaslt_nvfp4_gemm_nt(a, sfa, b, sfb, d, c) -> None:
    require_same_device(a=a, sfa=sfa, b=b, sfb=sfb, d=d, c=c)
    require_dtype("d", d, (torch.bfloat16, torch.float32))
    require_dim("d", d, 2)
    m, n = d.shape
    require(d.numel() == 0 or d.stride(1) == 1 or n == 1,
            f"d: expected a row-major tensor (stride(1) == 1), got strides {d.stride()}")
    _check_accumulator(c, d)
    ks = []
    for name, data, sf, rows, what in (("a", a, sfa, m, "M"), ("b", b, sfb, n, "N")):
        require_dtype(name, data, (FP4_PACKED,))
        require_dim(name, data, 2)
        require_contiguous(name, data)
        require(data.size(0) == rows, f"{name}: expected {rows} rows ({what} of d), got shape {tuple(data.shape)}")
        ks.append(data.size(1) * 2)
    require(ks[0] == ks[1], f"a, b: expected the same K, got {ks[0]} and {ks[1]} (2 values per byte)")
    k = ks[0]
    require(k % 32 == 0, f"a: expected K (2 * a.size(1)) a multiple of 32, got {k}")
    for name, sf, rows in (("sfa", sfa, m), ("sfb", sfb, n)):
        require_dtype(name, sf, (torch.uint8, torch.int8))
        require_contiguous(name, sf)
        want = cublaslt_sf_bytes(rows, k)
        require(sf.numel() == want,
                f"{name}: expected {want} UE4M3 bytes (cuBLASLt tiles [ceil({rows}/128), ceil({k}/64), 32, 4, 4]), "
                f"got {sf.numel()}")
