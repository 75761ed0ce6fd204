"""Builders of quantised GEMM operands for tests (and an independent float64 oracle written without deep_gemm's
dequantisation code: explicit loops over scale blocks)."""

from __future__ import annotations

import torch

from deep_gemm.utils import (align, ceil_div, per_block_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8,
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


def quantize_groups(x: torch.Tensor, gran_mn: int):
    """[G, MN, K] float -> stacked (data [G, MN, K], scales [G, ...]) quantised group by group."""
    parts = [quantize(x[g], gran_mn) for g in range(x.size(0))]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def contiguous_grouped_inputs(ms, n: int, k: int, alignment: int = 128):
    """M-grouped contiguous layout: group g's ms[g] rows padded to `alignment` (padding rows zero, id -1).
    Returns (a, b, ids per row, cumulative group ends for the psum layout)."""
    total = sum(align(m, alignment) for m in ms)
    x = torch.randn(total, k)
    ids = torch.full((total,), -1, dtype=torch.int32)
    ends, start = [], 0
    for g, m in enumerate(ms):
        ids[start:start + m] = g
        x[start + m:start + align(m, alignment)] = 0
        ends.append(start + m)
        start += align(m, alignment)
    return quantize(x, 1), quantize_groups(torch.randn(len(ms), n, k), 128), ids, torch.tensor(ends, dtype=torch.int32)


def k_grouped_inputs(layout, ks, m, n):
    """Per group g: A_g [M, K_g], B_g [N, K_g] quantised per row per 128 K, packed the way each layout wants."""
    a_groups = [torch.randn(m, kg) for kg in ks]
    b_groups = [torch.randn(n, kg) for kg in ks]
    qa = [quantize(t, 1) if t.size(1) else (torch.empty(m, 0, dtype=torch.float8_e4m3fn), torch.empty(m, 0))
          for t in a_groups]
    qb = [quantize(t, 1) if t.size(1) else (torch.empty(n, 0, dtype=torch.float8_e4m3fn), torch.empty(n, 0))
          for t in b_groups]
    if layout == "nt":
        a = (torch.cat([q[0].flatten() for q in qa]), torch.cat([q[1] for q in qa], dim=1))
        b = (torch.cat([q[0].flatten() for q in qb]), torch.cat([q[1] for q in qb], dim=1))
    else:
        a = (torch.cat([q[0].T for q in qa]).contiguous(), torch.cat([q[1].T for q in qa]).contiguous())
        b = (torch.cat([q[0].T for q in qb]).contiguous(), torch.cat([q[1].T for q in qb]).contiguous())
    return a, b, qa, qb
