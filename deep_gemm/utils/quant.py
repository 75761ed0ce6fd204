"""Casts to FP8 (E4M3) and FP4 (E2M1) with per-token, per-channel, per-block or custom-dims scales, and UE8M0 helpers.

These are bitwise-identical to DeepGEMM's ``deep_gemm.utils`` definitions (tests compare against an independent
re-derivation): the scale of a group is ``max(amax, 1e-4) / FORMAT_MAX``, optionally rounded *up* to a power of two
(``use_ue8m0``), and values are multiplied by the scale's reciprocal (not divided) before the saturating cast.

Conventions: FP8 is ``torch.float8_e4m3fn``; FP4 is E2M1 packed two per ``int8`` byte, the even element in the low
nibble; a packed UE8M0 scale tensor holds four biased exponent bytes per ``int32`` (byte j = scale group 4i+j).
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..core.errors import require
from .numeric import AMAX_FLOOR, FP4_E2M1_MAX, FP8_E4M3_MAX, align

_FP32_MANTISSA_BITS = 23
_FP32_MANTISSA_MASK = (1 << _FP32_MANTISSA_BITS) - 1
# Biased exponents kept by ceil_to_ue8m0: 0 (zero/denormal) and 255 (inf/nan) are not valid UE8M0 scales.
_UE8M0_MIN_EXPONENT, _UE8M0_MAX_EXPONENT = 1, 254
# E2M1 magnitudes by 3-bit code are 0, 0.5, 1, 1.5, 2, 3, 4, 6; these are the rounding boundaries between
# neighbours (a tie goes to the even code).
_E2M1_BOUNDARIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_E2M1_SIGN_BIT = 0x8


def _require_tensors(**tensors) -> None:
    """A DeepGEMMError naming the argument, rather than an AttributeError deep inside, when one is not a tensor."""
    for name, value in tensors.items():
        if not isinstance(value, torch.Tensor):
            from ..core.errors import fail
            fail(f"{name}: expected a tensor, got {type(value).__name__}")


def ceil_to_ue8m0(x: torch.Tensor) -> torch.Tensor:
    """|x| rounded up to a power of two (FP32), exponent clamped to the UE8M0 range [2^-126, 2^127]."""
    _require_tensors(x=x)
    bits = x.abs().float().view(torch.int32)
    exponent = (bits >> _FP32_MANTISSA_BITS) & 0xFF
    round_up = ((bits & _FP32_MANTISSA_MASK) != 0).to(torch.int32)
    exponent = (exponent + round_up).clamp(_UE8M0_MIN_EXPONENT, _UE8M0_MAX_EXPONENT)
    return (exponent << _FP32_MANTISSA_BITS).view(torch.float32)


def pack_ue8m0_to_int(x: torch.Tensor) -> torch.Tensor:
    """FP32 powers of two [..., 4n] -> int32 [..., n], four biased exponent bytes per int (little-endian)."""
    _require_tensors(x=x)
    from ..core.errors import require

    require(x.dtype == torch.float32, f"x: expected dtype float32, got {x.dtype}")
    require(x.size(-1) % 4 == 0, f"x: expected the last dimension to be a multiple of 4, got {x.size(-1)}")
    bits = x.contiguous().view(torch.int32)
    require(bool(((bits & _FP32_MANTISSA_MASK) == 0).all()) and bool((bits >= 0).all()),
            "x: expected non-negative powers of two (zero mantissa bits)")
    return (bits >> _FP32_MANTISSA_BITS).to(torch.uint8).view(torch.int32)


def _unit_last_stride(t: torch.Tensor) -> torch.Tensor:
    """``t`` with stride(-1) == 1, so its elements can be viewed as bytes.

    ``.contiguous()`` is not enough: torch calls a tensor whose last dim has size 1 contiguous whatever that dim's
    stride, e.g. a packed MN-major scale tensor ``[MN, 1]`` with strides ``(1, MN)`` (K = 512: one packed column),
    and returns it unchanged."""
    if t.dim() == 0 or t.stride(-1) == 1:
        return t
    return torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t)  # fresh tensors have unit strides


def unpack_ue8m0_from_int(packed_sf: torch.Tensor) -> torch.Tensor:
    """int32 [..., n] of packed UE8M0 bytes -> FP32 [..., 4n] powers of two."""
    _require_tensors(packed_sf=packed_sf)
    exponent_bytes = _unit_last_stride(packed_sf.contiguous()).view(torch.uint8).to(torch.int32)
    return (exponent_bytes << _FP32_MANTISSA_BITS).view(torch.float32)


def _scale_of(amax: torch.Tensor, format_max: float, use_ue8m0: bool) -> torch.Tensor:
    sf = amax.clamp(min=AMAX_FLOOR) / format_max
    return ceil_to_ue8m0(sf) if use_ue8m0 else sf


def per_token_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128,
                          use_packed_ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale per (row, gran_k columns). x [m, n] -> (fp8 [m, n], sf FP32 [m, ceil(n/gran_k)] or packed int32).

    Columns are zero-padded to a multiple of ``gran_k`` for the amax, so the last group may be partial.
    """
    _require_tensors(x=x)
    require(x.dim() == 2, "x: expected a 2-D tensor")
    m, n = x.shape
    padded_n = align(n, gran_k)
    padded = x.new_zeros((m, padded_n))
    padded[:, :n] = x
    groups = padded.view(m, padded_n // gran_k, gran_k)
    sf = _scale_of(groups.abs().float().amax(dim=2), FP8_E4M3_MAX, use_ue8m0)
    q = (groups * (1.0 / sf.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, padded_n)[:, :n].contiguous()
    return q, pack_ue8m0_to_int(sf) if use_packed_ue8m0 else sf


def per_channel_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale per (gran_k rows, column). x [m, n] with m % gran_k == 0 -> (fp8 [m, n], sf FP32 [m/gran_k, n])."""
    _require_tensors(x=x)
    require(x.dim() == 2 and x.size(0) % gran_k == 0, "x: expected a 2-D tensor with rows a multiple of gran_k")
    m, n = x.shape
    groups = x.view(m // gran_k, gran_k, n)
    sf = _scale_of(groups.abs().float().amax(dim=1), FP8_E4M3_MAX, use_ue8m0)
    return (groups * (1.0 / sf.unsqueeze(1))).to(torch.float8_e4m3fn).view(m, n), sf


def per_block_cast_to_fp8(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale per gran_k x gran_k block (zero-padded). x [m, n] -> (fp8 [m, n], sf [ceil(m/g), ceil(n/g)])."""
    _require_tensors(x=x)
    require(x.dim() == 2, "x: expected a 2-D tensor")
    m, n = x.shape
    padded = x.new_zeros((align(m, gran_k), align(n, gran_k)))
    padded[:m, :n] = x
    blocks = padded.view(padded.size(0) // gran_k, gran_k, padded.size(1) // gran_k, gran_k)
    sf = _scale_of(blocks.abs().float().amax(dim=(1, 3), keepdim=True), FP8_E4M3_MAX, use_ue8m0)
    q = (blocks * (1.0 / sf)).to(torch.float8_e4m3fn).view_as(padded)[:m, :n].contiguous()
    return q, sf.view(blocks.size(0), blocks.size(2))


def per_custom_dims_cast_to_fp8(x: torch.Tensor, dims: Sequence[int],
                                use_ue8m0: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale per index of ``dims`` (amax over every other dim). Returns (fp8 like x, sf squeezed)."""
    _require_tensors(x=x)
    keep = set(dims)
    reduced = tuple(i for i in range(x.dim()) if i not in keep)
    sf = _scale_of(x.abs().float().amax(dim=reduced, keepdim=True), FP8_E4M3_MAX, use_ue8m0)
    return (x * (1.0 / sf)).to(torch.float8_e4m3fn), sf.squeeze()


def e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """FP32 -> 4-bit E2M1 codes (int8, one per element). Magnitudes saturate at 6; -0 becomes +0."""
    magnitude = x.abs().clamp(max=FP4_E2M1_MAX)
    # The code counts the boundaries below the magnitude; a magnitude exactly on a boundary (a tie between codes
    # i and i + 1) rounds to the even code, as an IEEE cast would: it passes boundary i when i is odd. Comparing
    # with Python scalars keeps this free of host-to-device copies (CUDA-graph capturable).
    code = torch.zeros(magnitude.shape, dtype=torch.uint8, device=x.device)
    for i, boundary in enumerate(_E2M1_BOUNDARIES):
        above = magnitude >= boundary if i % 2 else magnitude > boundary
        code += above.to(torch.uint8)
    negative = (x < 0) & (code != 0)
    return (code | (negative.to(torch.uint8) << 3)).view(torch.int8)


def fp4_e2m1_to_float(packed: torch.Tensor) -> torch.Tensor:
    """Unpack E2M1 pairs: int8 [..., n/2] -> FP32 [..., n] (low nibble = even element)."""
    low = packed & 0x0F
    high = (packed >> 4) & 0x0F
    codes = torch.stack((low, high), dim=-1).flatten(-2).to(torch.int32)
    # E2M1 fields straight into FP32 bits (no lookup table: no host-to-device copy). exponent 0 is the subnormal
    # 0 / 0.5; otherwise 2^(e-1) * (1 + m/2).
    exponent, mantissa = (codes >> 1) & 0x3, codes & 0x1
    bits = torch.where(exponent == 0, mantissa * (126 << 23), ((exponent + 126) << 23) | (mantissa << 22))
    value = bits.view(torch.float32)
    # Code 8 (sign bit, zero magnitude) is +0, as DeepGEMM decodes it.
    return torch.where(((codes & _E2M1_SIGN_BIT) != 0) & ((codes & 0x7) != 0), -value, value)


def _pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    pairs = codes.view(*codes.shape[:-1], codes.size(-1) // 2, 2)
    return (pairs[..., 0] & 0x0F) | ((pairs[..., 1] & 0x0F) << 4)


def per_token_cast_to_fp4(x: torch.Tensor, use_ue8m0: bool, gran_k: int = 128,
                          use_packed_ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One scale per (row, gran_k columns), E2M1 values packed in pairs.

    x [m, n] (n even) -> (int8 [m, n/2], sf FP32 [m, ceil(n/gran_k)] or packed UE8M0 int32 [m, ceil(ceil(n/gran_k)/4)],
    which needs use_ue8m0; the packed scale count is padded to a multiple of 4 with 1.0).
    """
    _require_tensors(x=x)
    m, n = x.shape
    require(n % 2 == 0, "x: expected an even number of columns")
    require(use_ue8m0 or not use_packed_ue8m0, "use_packed_ue8m0 requires use_ue8m0")
    padded_n = align(n, gran_k)
    padded = x.new_zeros((m, padded_n))
    padded[:, :n] = x
    groups = padded.view(m, padded_n // gran_k, gran_k)
    sf = _scale_of(groups.abs().float().amax(dim=2), FP4_E2M1_MAX, use_ue8m0)
    codes = e2m1_codes(groups * (1.0 / sf.unsqueeze(2))).view(m, padded_n)
    packed = _pack_nibbles(codes)[:, : n // 2].contiguous()
    if not use_packed_ue8m0:
        return packed, sf
    # Packing needs whole groups of four scales: pad with 1.0 (exponent 127), as DeepGEMM does.
    pad = (-sf.size(1)) % 4
    sf = torch.cat([sf, sf.new_ones((m, pad))], dim=1) if pad else sf
    return packed, pack_ue8m0_to_int(sf)


def transpose_packed_fp4(a: torch.Tensor) -> torch.Tensor:
    """Transpose a packed FP4 matrix: int8 [m, n/2] -> int8 [n, m/2] (m even)."""
    _require_tensors(a=a)
    require(a.dtype == torch.int8 and a.dim() == 2 and a.size(0) % 2 == 0, "a: expected int8 [m, n/2] with m even")
    codes = torch.stack((a & 0x0F, (a >> 4) & 0x0F), dim=-1).flatten(-2)  # [m, n] codes
    return _pack_nibbles(codes.t().contiguous()).contiguous()


def cast_back_from_fp4(packed: torch.Tensor, sf: torch.Tensor, gran_k: int = 128,
                       use_packed_ue8m0: bool = False) -> torch.Tensor:
    """Dequantise per-token FP4: int8 [m, n/2] and scales [m, ceil(n/gran_k)] -> FP32 [m, n]."""
    _require_tensors(packed=packed, sf=sf)
    if use_packed_ue8m0:
        sf = unpack_ue8m0_from_int(sf)
    values = fp4_e2m1_to_float(packed)
    group = torch.arange(values.size(-1), device=packed.device) // gran_k
    return values * sf[:, group]
