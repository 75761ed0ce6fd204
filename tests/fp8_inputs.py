"""Builders of quantised GEMM operands for tests (and an independent float64 oracle written without deep_gemm's
dequantisation code: explicit loops over scale blocks)."""

from __future__ import annotations

import torch

from deep_gemm.utils import (ceil_div, per_block_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8,
                             unpack_ue8m0_from_int)


def quantize(x: torch.Tensor, gran_mn: int, gran_k: int = 128, fp4: bool = False, packed_sf: bool = False):
    """x [MN, K] float -> (data, sf) in K-major form. gran_mn 1 = per row, 128 = per block."""
    if fp4:
        return per_token_cast_to_fp4(x, use_ue8m0=packed_sf, gran_k=gran_k, use_packed_ue8m0=packed_sf)
    if gran_mn == 1:
        return per_token_cast_to_fp8(x, use_ue8m0=packed_sf, gran_k=gran_k, use_packed_ue8m0=packed_sf)
    assert not packed_sf
    return per_block_cast_to_fp8(x, use_ue8m0=False, gran_k=gran_k)


def mn_major(data: torch.Tensor) -> torch.Tensor:
    """Same logical tensor, MN-major memory (the second-to-last dim contiguous)."""
    return data.transpose(-1, -2).contiguous().transpose(-1, -2)


def oracle_values(data: torch.Tensor, sf: torch.Tensor, gran_mn: int, gran_k: int) -> torch.Tensor:
    """float64 values of a K-major-logical quantised operand [MN, K], block by block."""
    if data.dtype == torch.int8:
        table = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
        codes = torch.empty(data.size(0), data.size(1) * 2, dtype=torch.int64)
        codes[:, 0::2] = (data & 0xF).long()
        codes[:, 1::2] = ((data >> 4) & 0xF).long()
        values = table[codes & 7] * torch.where((codes & 8) != 0, -1.0, 1.0).double()
    else:
        values = data.double()
    if sf.dtype == torch.int32:
        sf = unpack_ue8m0_from_int(sf)
    sf = sf.double()
    out = torch.empty_like(values)
    mn, k = values.shape
    for i in range(ceil_div(mn, gran_mn)):
        for j in range(ceil_div(k, gran_k)):
            rows = slice(i * gran_mn, (i + 1) * gran_mn)
            cols = slice(j * gran_k, (j + 1) * gran_k)
            out[rows, cols] = values[rows, cols] * sf[i, j]
    return out


def oracle_gemm(a, sfa, gran_a, b, sfb, gran_b) -> torch.Tensor:
    """float64 A @ B.T of K-major-logical quantised operands, summed per 128-K block like the kernels promote."""
    va, vb = oracle_values(a, sfa, *gran_a), oracle_values(b, sfb, *gran_b)
    out = torch.zeros(va.size(0), vb.size(0), dtype=torch.float64)
    k = va.size(1)
    for j in range(ceil_div(k, 128)):
        cols = slice(j * 128, (j + 1) * 128)
        out += va[:, cols] @ vb[:, cols].T
    return out
