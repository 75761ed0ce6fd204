"""NVFP4 helpers (E2M1 values with one UE4M3 scale per 16 elements) and the FP8 dequantiser, as DeepGEMM's later
``deep_gemm.utils`` has them.

UE4M3 scales are FP8 E4M3 bytes holding non-negative values; "packed" UE4M3 puts four scale bytes into one int32
(byte j = scale 4i+j). Quantising to E2M1 here rounds to the nearest representable magnitude with ties to the even
code (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4), as DeepGEMM's NVFP4 quantiser does.
"""

from __future__ import annotations

import torch

from ..core.errors import require
from .quant import _require_tensors, e2m1_codes, unpack_ue8m0_from_int

__all__ = ["cast_to_ue4m3", "pack_ue4m3_to_int", "unpack_ue4m3_from_int", "per_token_cast_to_nvfp4",
           "transform_ue4m3_sf_into_required_layout", "cast_back_from_fp8"]

def cast_to_ue4m3(x: torch.Tensor) -> torch.Tensor:
    """Round FP32 scales to the nearest E4M3 value (returned as FP32)."""
    _require_tensors(x=x)
    return x.to(torch.float8_e4m3fn).float()


def pack_ue4m3_to_int(x: torch.Tensor) -> torch.Tensor:
    """FP32 scales [..., 4n] -> int32 [..., n], four E4M3 bytes per word (byte j = scale 4i+j)."""
    _require_tensors(x=x)
    require(x.size(-1) % 4 == 0, "x: expected a multiple of 4 scales in the last dim")
    return x.to(torch.float8_e4m3fn).contiguous().view(torch.uint8).view(torch.int32)


def unpack_ue4m3_from_int(packed_sf: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_ue4m3_to_int`: int32 [..., n] -> FP32 [..., 4n]."""
    _require_tensors(packed_sf=packed_sf)
    return packed_sf.contiguous().view(torch.uint8).view(torch.float8_e4m3fn).float()


def per_token_cast_to_nvfp4(x: torch.Tensor, gran_k: int = 16,
                            use_packed_ue4m3: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x [m, n] (n a multiple of gran_k) -> (int8 [m, n/2] packed E2M1, scales FP32 [m, n/gran_k] rounded to UE4M3,
    or int32 [m, n/gran_k/4] packed). A group's scale is ``amax / 6`` rounded to E4M3; an all-zero group gets
    scale 0 and zero codes."""
    _require_tensors(x=x)
    m, n = x.shape
    require(n % gran_k == 0, f"x: expected a multiple of gran_k = {gran_k} columns")
    groups = x.view(m, n // gran_k, gran_k).float()
    sf = cast_to_ue4m3(groups.abs().amax(dim=2) / 6.0)
    inverse = torch.where(sf > 0, 1.0 / sf, torch.zeros_like(sf))
    codes = e2m1_codes(groups * inverse.unsqueeze(2)).view(m, n)
    pairs = codes.view(m, n // 2, 2)
    packed = ((pairs[..., 0] & 0x0F) | ((pairs[..., 1] & 0x0F) << 4)).contiguous()
    return packed, (pack_ue4m3_to_int(sf) if use_packed_ue4m3 else sf)


def transform_ue4m3_sf_into_required_layout(sf: torch.Tensor, mn: int) -> torch.Tensor:
    """UE4M3 scales [..., mn, k/16] -> int32 packed [..., mn, k/64], MN-major (the weight-side layout DeepGEMM's
    SM100 NVFP4 kernels read). ``mn`` must be a multiple of 4 (TMA alignment of int32 columns)."""
    _require_tensors(sf=sf)
    require(sf.dim() in (2, 3) and sf.size(-2) == mn, f"sf: expected [..., {mn}, k / 16]")
    require(mn % 4 == 0, f"mn: expected a multiple of 4 (TMA-aligned int32 scale columns), got {mn}")
    return pack_ue4m3_to_int(sf).transpose(-1, -2).contiguous().transpose(-1, -2)


def cast_back_from_fp8(x_fp8: torch.Tensor, sf: torch.Tensor, gran_k: int = 128,
                       use_packed_ue8m0: bool = False) -> torch.Tensor:
    """Dequantise per-token FP8: [m, n] and scales [m, ceil(n/gran_k)] (or packed UE8M0 int32) -> FP32 [m, n]."""
    _require_tensors(x_fp8=x_fp8, sf=sf)
    if use_packed_ue8m0:
        sf = unpack_ue8m0_from_int(sf)
    group = torch.arange(x_fp8.size(-1), device=x_fp8.device) // gran_k
    return x_fp8.float() * sf[:, group]
