"""deep_gemm.utils (math.py, quant.py): bitwise against independent re-derivations written here.

The oracles use numpy float64 with an explicit rounding to FP32 after each step DeepGEMM performs in FP32 (for one
FP32 +, *, / the float64 result rounded once to FP32 is the correctly rounded FP32 result), per-element Python for
the bit-level helpers, and their own FP8 E4M3 / FP4 E2M1 encoders built from the formats' definitions.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch

from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import assert_bitwise_equal
from deep_gemm.utils import math as dg_math
from deep_gemm.utils import quant

# ---- format definitions ---------------------------------------------------------------------------------------

E4M3_MAX = 448.0
E2M1_MAX = 6.0
AMAX_FLOOR = float(np.float32(1e-4))  # torch clamps an FP32 tensor with the scalar rounded to FP32


def _f32(a):
    """Round float64 values to the nearest FP32 (ties to even), kept as float64."""
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def _e4m3_value(code: int) -> float:
    """Value of a non-negative float8_e4m3fn code (4 exponent bits, bias 7, 3 mantissa bits, no infinities)."""
    exponent, mantissa = code >> 3, code & 7
    if exponent == 0:
        return mantissa / 8 * 2.0 ** -6
    return (1 + mantissa / 8) * 2.0 ** (exponent - 7)


_E4M3_FINITE = np.array([_e4m3_value(c) for c in range(0x7F)])  # codes 0..126; 0x7F is NaN
_E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _encode_e4m3(v: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to the even code, saturating at 448 (torch's FP32 -> float8_e4m3fn cast); the sign
    bit is kept for zeros and underflows."""
    a = np.minimum(np.abs(v), E4M3_MAX)
    hi = np.clip(np.searchsorted(_E4M3_FINITE, a, side="left"), 0, 0x7E)
    lo = np.clip(hi - 1, 0, 0x7E)
    d_lo, d_hi = a - _E4M3_FINITE[lo], _E4M3_FINITE[hi] - a
    code = np.where(d_hi < d_lo, hi, np.where(d_lo < d_hi, lo, np.where(hi % 2 == 0, hi, lo)))
    return (code | (np.signbit(v).astype(np.int64) << 7)).astype(np.uint8)


def _encode_e2m1(v: np.ndarray) -> np.ndarray:
    """Nearest E2M1 magnitude (saturating at 6), a tie going to the even code (IEEE round-to-nearest-even);
    negative non-zero codes get bit 3, so -0 (and anything rounding to 0) is +0."""
    a = np.minimum(np.abs(v), E2M1_MAX)
    dist = np.abs(a[..., None] - _E2M1_VALUES)
    nearest = dist == dist.min(axis=-1, keepdims=True)
    odd = np.arange(len(_E2M1_VALUES)) % 2 == 1
    # Among the nearest codes (two on a tie, one otherwise) take an even one when there is one.
    code = np.argmax(nearest & ~odd, axis=-1)
    code = np.where((nearest & ~odd).any(axis=-1), code, np.argmax(nearest, axis=-1))
    return (code | np.where((v < 0) & (code != 0), 8, 0)).astype(np.int64)


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _ceil_pow2(value: float) -> float:
    """|value| rounded up to a power of two, the exponent clamped to [-126, 127] (UE8M0's range)."""
    a = abs(value)
    if math.isnan(a) or math.isinf(a):
        return 2.0 ** 127
    if a == 0:
        return 2.0 ** -126
    mantissa, exponent = math.frexp(a)  # a = mantissa * 2^exponent, 0.5 <= mantissa < 1
    power = exponent - 1 if mantissa == 0.5 else exponent
    return 2.0 ** min(max(power, -126), 127)


def _pack_bytes(exponents) -> int:
    return int.from_bytes(bytes(exponents), "little", signed=True)


def _pack_rows(sf: np.ndarray) -> torch.Tensor:
    """[..., 4n] powers of two -> int32 [..., n] (exponent bytes, the first scale in the low byte)."""
    flat = sf.reshape(-1, sf.shape[-1])
    rows = [[_pack_bytes([(_bits(v) >> 23) & 0xFF for v in row[i:i + 4]]) for i in range(0, len(row), 4)]
            for row in flat]
    return torch.tensor(rows, dtype=torch.int32).reshape(*sf.shape[:-1], sf.shape[-1] // 4)


def _to_int8(byte_values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.where(byte_values >= 128, byte_values - 256, byte_values).astype(np.int8))


def _scale(amax: float, format_max: float, use_ue8m0: bool) -> float:
    s = float(_f32(max(amax, AMAX_FLOOR) / format_max))
    return _ceil_pow2(s) if use_ue8m0 else s


def _quantise_block(block: np.ndarray, format_max: float, use_ue8m0: bool):
    """(scale, FP32 scaled values) of one scale group: values times the FP32 reciprocal of the scale."""
    amax = float(np.abs(block).max()) if block.size else 0.0
    s = _scale(amax, format_max, use_ue8m0)
    return s, _f32(block * float(_f32(1.0 / s)))


def _values(x: torch.Tensor) -> np.ndarray:
    return x.float().double().numpy()


def _fp8_bytes(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.uint8)


def _random_rows(m: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows with magnitudes from 1e-7 (below the amax floor) to 1e5, a zero row, and some exact -0 entries."""
    x = torch.randn(m, n) * (10.0 ** torch.randint(-7, 6, (m, 1)).float())
    if m > 1:
        x[1] = 0.0
    x[x.abs() < 0.05] = -0.0
    return x.to(dtype)


# ---- math.py ----------------------------------------------------------------------------------------------------

def test_ceil_div_align_tma_size():
    for x in range(0, 70):
        for y in range(1, 17):
            assert dg_math.ceil_div(x, y) == math.ceil(Fraction(x, y))
            assert dg_math.align(x, y) == math.ceil(Fraction(x, y)) * y
    for element_size in (1, 2, 4, 8, 16):
        for x in range(0, 40):
            got = dg_math.get_tma_aligned_size(x, element_size)
            assert got >= x and (got * element_size) % 16 == 0 and (got - x) * element_size < 16
    with pytest.raises(DeepGEMMError, match=r"element_size: expected a divisor of 16, got 3"):
        dg_math.get_tma_aligned_size(5, 3)


def test_named_constants():
    assert dg_math.FP8_E4M3_MAX == float(torch.finfo(torch.float8_e4m3fn).max) == _E4M3_FINITE[-1]
    assert dg_math.FP4_E2M1_MAX == _E2M1_VALUES[-1]
    assert dg_math.AMAX_FLOOR == 1e-4 and dg_math.TMA_ALIGNMENT_BYTES == 16


# ---- UE8M0 ------------------------------------------------------------------------------------------------------

_SPECIAL = [0.0, -0.0, 1.0, 2.0, 0.75, 3.0, -5.0, 1e-4, 1 / 448, 2.0 ** -126, 2.0 ** -127, 2.0 ** -149,
            1.5 * 2.0 ** -140, 2.0 ** -126 * 1.5, 2.0 ** 127, 1.5 * 2.0 ** 127, float(np.finfo(np.float32).max),
            float("inf"), float("-inf"), float("nan"), 2.0 ** 100 + 2.0 ** 77, 2.0 ** 100]


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.float16))
def test_ceil_to_ue8m0(dtype):
    wide = torch.ldexp(torch.rand(2000) + 0.5, torch.randint(-155, 130, (2000,)).float()) * torch.sign(
        torch.randn(2000))
    x = torch.cat([torch.tensor(_SPECIAL), wide]).to(dtype)
    got = quant.ceil_to_ue8m0(x)
    want = torch.tensor([_ceil_pow2(v) for v in x.float().tolist()], dtype=torch.float32)
    assert_bitwise_equal(got, want)


def test_ceil_to_ue8m0_keeps_exact_powers_of_two():
    powers = torch.ldexp(torch.ones(254), torch.arange(-126, 128).float())
    assert_bitwise_equal(quant.ceil_to_ue8m0(powers), powers)
    assert_bitwise_equal(quant.ceil_to_ue8m0(-powers), powers)


@pytest.mark.parametrize("shape", [(3, 8), (2, 3, 4), (0, 8), (1, 256)])
def test_pack_unpack_ue8m0(shape):
    exponents = torch.randint(-126, 128, shape)
    sf = torch.ldexp(torch.ones(shape), exponents.float())
    sf[..., ::5] = 0.0  # exponent byte 0
    packed = quant.pack_ue8m0_to_int(sf)
    assert_bitwise_equal(packed, _pack_rows(sf.double().numpy()))
    assert_bitwise_equal(quant.unpack_ue8m0_from_int(packed), sf)


def test_unpack_ue8m0_every_byte():
    packed = torch.arange(256, dtype=torch.int64).view(64, 4)
    words = torch.tensor([_pack_bytes(row) for row in packed.tolist()], dtype=torch.int32)
    got = quant.unpack_ue8m0_from_int(words[:, None])
    want = torch.tensor([struct.unpack("<f", struct.pack("<I", b << 23))[0] for b in range(256)]).view(64, 4)
    assert_bitwise_equal(got, want)


@pytest.mark.parametrize("x,pattern", [
    (torch.tensor([[1.0, 2.0, 3.0, 4.0]]), r"x: expected non-negative powers of two"),
    (torch.tensor([[1.0, -2.0, 4.0, 8.0]]), r"x: expected non-negative powers of two"),
    (torch.ones(2, 6), r"x: expected the last dimension to be a multiple of 4, got 6"),
    (torch.ones(2, 4, dtype=torch.bfloat16), r"x: expected dtype float32"),
])
def test_pack_ue8m0_rejects(x, pattern):
    with pytest.raises(DeepGEMMError, match=pattern):
        quant.pack_ue8m0_to_int(x)


# ---- FP8 casts --------------------------------------------------------------------------------------------------

TOKEN_CASES = [(1, 1, 128), (5, 127, 128), (7, 128, 128), (3, 300, 128), (4, 100, 32), (0, 64, 128),
               (2, 257, 64), (3, 512, 128), (2, 1000, 128)]


TOKEN_PARAMS = [pytest.param(m, n, gran_k, scales, id=f"{m}x{n}-g{gran_k}-{scales}")
                for m, n, gran_k in TOKEN_CASES for scales in ("fp32", "ue8m0", "packed")
                if scales != "packed" or -(-n // gran_k) % 4 == 0]  # packing needs whole groups of 4 scales


@pytest.mark.parametrize("m,n,gran_k,scales", TOKEN_PARAMS)
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float32))
def test_per_token_cast_to_fp8(m, n, gran_k, dtype, scales):
    num_sf = -(-n // gran_k)
    x = _random_rows(m, n, dtype)
    q, sf = quant.per_token_cast_to_fp8(x, use_ue8m0=scales != "fp32", gran_k=gran_k,
                                        use_packed_ue8m0=scales == "packed")
    xv = _values(x)
    want_sf, want_q = np.zeros((m, num_sf)), np.zeros((m, n), dtype=np.uint8)
    for i in range(m):
        for j in range(num_sf):
            cols = slice(j * gran_k, (j + 1) * gran_k)
            want_sf[i, j], scaled = _quantise_block(xv[i, cols], E4M3_MAX, scales != "fp32")
            want_q[i, cols] = _encode_e4m3(scaled)
    assert q.dtype == torch.float8_e4m3fn and q.is_contiguous()
    assert_bitwise_equal(_fp8_bytes(q), torch.from_numpy(want_q))
    want_sf_t = _pack_rows(want_sf) if scales == "packed" else torch.from_numpy(want_sf).float()
    assert_bitwise_equal(sf, want_sf_t)


def test_fp8_rounding_ties_to_even_subnormals_and_signed_zero():
    """amax 448 makes the scale exactly 1: every midpoint between neighbouring E4M3 values (subnormals included)
    must round to the even code, and -0 keeps its sign."""
    midpoints = (_E4M3_FINITE[:-1] + _E4M3_FINITE[1:]) / 2
    row = np.concatenate([[448.0, -0.0, 2.0 ** -12, -(2.0 ** -10)], midpoints, -midpoints])
    row = np.concatenate([row, np.zeros(-len(row) % 128)])
    x = torch.from_numpy(row).float()[None]
    q, sf = quant.per_token_cast_to_fp8(x, use_ue8m0=False, gran_k=row.size)
    assert sf.tolist() == [[1.0]]
    codes = _fp8_bytes(q)[0].tolist()
    assert codes[:4] == [0x7E, 0x80, 0x00, 0x80]  # 2^-12 and -2^-10 are below half the smallest subnormal
    mids = codes[4:4 + len(midpoints)]
    assert all(code % 2 == 0 and code in (i, i + 1) for i, code in enumerate(mids))
    assert codes[4 + len(midpoints):4 + 2 * len(midpoints)] == [0x80 | c for c in mids]
    assert_bitwise_equal(_fp8_bytes(q), torch.from_numpy(_encode_e4m3(row))[None])


CHANNEL_CASES = [(128, 5, 128), (256, 129, 128), (64, 3, 32), (0, 4, 128)]


@pytest.mark.parametrize("m,n,gran_k", CHANNEL_CASES, ids=[f"{m}x{n}-g{g}" for m, n, g in CHANNEL_CASES])
@pytest.mark.parametrize("use_ue8m0", (False, True))
def test_per_channel_cast_to_fp8(m, n, gran_k, use_ue8m0):
    x = _random_rows(n, m, torch.bfloat16).T.contiguous()  # magnitudes vary per column
    q, sf = quant.per_channel_cast_to_fp8(x, use_ue8m0=use_ue8m0, gran_k=gran_k)
    xv = _values(x)
    want_sf, want_q = np.zeros((m // gran_k, n)), np.zeros((m, n), dtype=np.uint8)
    for i in range(m // gran_k):
        for j in range(n):
            rows = slice(i * gran_k, (i + 1) * gran_k)
            want_sf[i, j], scaled = _quantise_block(xv[rows, j], E4M3_MAX, use_ue8m0)
            want_q[rows, j] = _encode_e4m3(scaled)
    assert_bitwise_equal(_fp8_bytes(q), torch.from_numpy(want_q))
    assert_bitwise_equal(sf, torch.from_numpy(want_sf).float())


BLOCK_CASES = [(5, 7, 128), (130, 129, 128), (128, 256, 128), (70, 33, 32), (1, 300, 64)]


@pytest.mark.parametrize("m,n,gran_k", BLOCK_CASES, ids=[f"{m}x{n}-g{g}" for m, n, g in BLOCK_CASES])
@pytest.mark.parametrize("use_ue8m0", (False, True))
def test_per_block_cast_to_fp8(m, n, gran_k, use_ue8m0):
    x = _random_rows(m, n, torch.bfloat16)
    q, sf = quant.per_block_cast_to_fp8(x, use_ue8m0=use_ue8m0, gran_k=gran_k)
    xv = _values(x)
    blocks_m, blocks_n = -(-m // gran_k), -(-n // gran_k)
    want_sf, want_q = np.zeros((blocks_m, blocks_n)), np.zeros((m, n), dtype=np.uint8)
    for i in range(blocks_m):
        for j in range(blocks_n):
            rows, cols = slice(i * gran_k, (i + 1) * gran_k), slice(j * gran_k, (j + 1) * gran_k)
            want_sf[i, j], scaled = _quantise_block(xv[rows, cols], E4M3_MAX, use_ue8m0)
            want_q[rows, cols] = _encode_e4m3(scaled)
    assert q.is_contiguous()
    assert_bitwise_equal(_fp8_bytes(q), torch.from_numpy(want_q))
    assert_bitwise_equal(sf, torch.from_numpy(want_sf).float())


CUSTOM_CASES = [((4, 6, 8), (0,)), ((4, 6, 8), (0, 2)), ((4, 6, 8), (1,)), ((3, 5), (0,)), ((3, 5), (1,)),
                ((2, 1, 7), (2,))]


@pytest.mark.parametrize("shape,dims", CUSTOM_CASES, ids=[f"{s}-{d}" for s, d in CUSTOM_CASES])
@pytest.mark.parametrize("use_ue8m0", (False, True))
def test_per_custom_dims_cast_to_fp8(shape, dims, use_ue8m0):
    x = (torch.randn(shape) * 10.0 ** torch.randint(-6, 4, shape[:1]).float().view(-1, *[1] * (len(shape) - 1)))
    x = x.bfloat16()
    q, sf = quant.per_custom_dims_cast_to_fp8(x, dims, use_ue8m0)
    xv = _values(x)
    reduced = tuple(i for i in range(len(shape)) if i not in dims)
    amax = np.abs(xv).max(axis=reduced, keepdims=True)
    want_sf = np.vectorize(lambda a: _scale(float(a), E4M3_MAX, use_ue8m0))(amax)
    want_q = _encode_e4m3(_f32(xv * _f32(1.0 / want_sf)))
    assert_bitwise_equal(_fp8_bytes(q), torch.from_numpy(want_q))
    assert_bitwise_equal(sf, torch.from_numpy(want_sf).float().squeeze())


# ---- FP4 --------------------------------------------------------------------------------------------------------

def _fp4_oracle(x: torch.Tensor, gran_k: int, use_ue8m0: bool):
    xv = _values(x)
    m, n = xv.shape
    num_sf = -(-n // gran_k)
    sf, codes = np.zeros((m, num_sf)), np.zeros((m, n), dtype=np.int64)
    for i in range(m):
        for j in range(num_sf):
            cols = slice(j * gran_k, (j + 1) * gran_k)
            sf[i, j], scaled = _quantise_block(xv[i, cols], E2M1_MAX, use_ue8m0)
            codes[i, cols] = _encode_e2m1(scaled)
    return sf, _to_int8(codes[:, 0::2] | (codes[:, 1::2] << 4))


FP4_CASES = [(3, 64, 32), (5, 130, 128), (2, 512, 128), (4, 96, 32), (1, 2, 128), (0, 32, 32)]


@pytest.mark.parametrize("m,n,gran_k", FP4_CASES, ids=[f"{m}x{n}-g{g}" for m, n, g in FP4_CASES])
@pytest.mark.parametrize("scales", ("fp32", "ue8m0", "packed"))
def test_per_token_cast_to_fp4(m, n, gran_k, scales):
    x = _random_rows(m, n, torch.bfloat16)
    packed, sf = quant.per_token_cast_to_fp4(x, use_ue8m0=scales != "fp32", gran_k=gran_k,
                                             use_packed_ue8m0=scales == "packed")
    want_sf, want_packed = _fp4_oracle(x, gran_k, scales != "fp32")
    assert packed.dtype == torch.int8 and packed.is_contiguous()
    assert_bitwise_equal(packed, want_packed)
    if scales == "packed":  # the scale count is padded to a multiple of 4 with 1.0 (exponent byte 127)
        pad = (-want_sf.shape[1]) % 4
        want_sf = np.concatenate([want_sf, np.ones((m, pad))], axis=1)
        assert_bitwise_equal(sf, _pack_rows(want_sf))
    else:
        assert_bitwise_equal(sf, torch.from_numpy(want_sf).float())


def test_fp4_rounding_ties_to_even_negative_zero_and_saturation():
    """amax 6 makes the scale exactly 1: the values are coded as given."""
    boundaries = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    above = [float(np.nextafter(np.float32(b), np.float32(10))) for b in boundaries]
    row = [6.0, -6.0, -0.0, 0.0, *boundaries, *[-b for b in boundaries], *above, 0.1, -0.3, 4.5, -5.5]
    row += [0.0] * (-len(row) % 32)
    x = torch.tensor([row], dtype=torch.float32)
    packed, sf = quant.per_token_cast_to_fp4(x, use_ue8m0=False, gran_k=len(row))
    assert sf.tolist() == [[1.0]]
    lo, hi = (packed & 0xF).tolist()[0], ((packed >> 4) & 0xF).tolist()[0]
    codes = [c for pair in zip(lo, hi) for c in pair]
    assert codes[:4] == [7, 15, 0, 0]  # 6 -> 6, -6 -> -6, -0 -> +0
    assert codes[4:11] == [0, 2, 2, 4, 4, 6, 6]  # each exact midpoint takes the even code (DeepGEMM's rounding)
    assert codes[11:18] == [0, 10, 10, 12, 12, 14, 14]  # -0.25 rounds to 0 and loses its sign
    assert codes[18:25] == [1, 2, 3, 4, 5, 6, 7]  # just above a midpoint takes the larger value
    assert codes[25:29] == [0, 9, 6, 15]


def test_fp4_saturates_rounded_products_above_six():
    """A product x * (1 / sf) may round just above 6; it saturates to code 7 rather than overflowing."""
    x = torch.tensor([[7.0] + [0.0] * 31, [2.0 ** 20 * 3] + [1.0] * 31])
    packed, sf = quant.per_token_cast_to_fp4(x, use_ue8m0=False, gran_k=32)
    assert_bitwise_equal(packed, _fp4_oracle(x, 32, False)[1])
    assert (packed[:, 0] & 0x7).tolist() == [7, 7]


@pytest.mark.parametrize("m,n2", [(2, 1), (4, 3), (6, 5), (8, 64)])
def test_transpose_packed_fp4(m, n2):
    a = torch.randint(-128, 128, (m, n2), dtype=torch.int8)
    nibbles = [[(b & 0xF) if j % 2 == 0 else ((b >> 4) & 0xF) for b in row for j in (0, 1)] for row in a.tolist()]
    n = 2 * n2
    want = [[nibbles[2 * i][r] | (nibbles[2 * i + 1][r] << 4) for i in range(m // 2)] for r in range(n)]
    got = quant.transpose_packed_fp4(a)
    assert_bitwise_equal(got, _to_int8(np.array(want)))
    assert_bitwise_equal(quant.transpose_packed_fp4(got), a)


def test_transpose_packed_fp4_needs_even_rows():
    with pytest.raises(DeepGEMMError, match="a: expected int8"):  # (not an assert: python -O keeps the check)
        quant.transpose_packed_fp4(torch.zeros(3, 2, dtype=torch.int8))


def _cast_back_oracle(packed: torch.Tensor, sf: np.ndarray, gran_k: int) -> torch.Tensor:
    """Nibble decode (low nibble first; code 8 is +0, as DeepGEMM's utils), times the FP32 scale of its group."""
    out = []
    for i, row in enumerate(packed.tolist()):
        values = []
        for b in row:
            for code in (b & 0xF, (b >> 4) & 0xF):
                magnitude = _E2M1_VALUES[code & 7]
                value = -magnitude if (code & 8) and magnitude != 0 else magnitude
                values.append(float(_f32(value * sf[i, len(values) // gran_k])))
        out.append(values)
    return torch.tensor(out, dtype=torch.float32).view(packed.size(0), packed.size(1) * 2)


@pytest.mark.parametrize("m,n,gran_k", [(3, 64, 32), (5, 130, 128), (2, 512, 128)])
@pytest.mark.parametrize("use_packed_ue8m0", (False, True))
def test_cast_back_from_fp4(m, n, gran_k, use_packed_ue8m0):
    x = _random_rows(m, n, torch.bfloat16)
    packed, sf = quant.per_token_cast_to_fp4(x, use_ue8m0=use_packed_ue8m0, gran_k=gran_k,
                                             use_packed_ue8m0=use_packed_ue8m0)
    got = quant.cast_back_from_fp4(packed, sf, gran_k=gran_k, use_packed_ue8m0=use_packed_ue8m0)
    sf_values = quant.unpack_ue8m0_from_int(sf) if use_packed_ue8m0 else sf
    assert_bitwise_equal(got, _cast_back_oracle(packed, sf_values.double().numpy(), gran_k))


def _every_byte_but_negative_zero() -> torch.Tensor:
    codes = [b for b in range(256) if (b & 0xF) != 8 and (b >> 4) != 8]
    return _to_int8(np.array(codes).reshape(1, -1))


def test_cast_back_from_fp4_every_code():
    packed = _every_byte_but_negative_zero()
    sf = torch.tensor([[0.375] * -(-packed.size(1) * 2 // 32)])
    got = quant.cast_back_from_fp4(packed, sf, gran_k=32)
    assert_bitwise_equal(got, _cast_back_oracle(packed, sf.double().numpy(), 32))


def test_fp4_e2m1_to_float_every_code():
    packed = _every_byte_but_negative_zero()
    got = quant.fp4_e2m1_to_float(packed)
    assert_bitwise_equal(got, _cast_back_oracle(packed, np.ones((1, 1)), 10**9))


def test_cast_back_from_fp4_negative_zero_code_is_positive_zero():
    packed = torch.tensor([[0x08, 0x80 - 256, 0x88 - 256]], dtype=torch.int8)
    got = quant.cast_back_from_fp4(packed, torch.ones(1, 1), gran_k=128)
    assert_bitwise_equal(got, torch.zeros(1, 6))
