"""Dequantising FP4 / FP8 GEMM (tl.*, portable from sm_80): ``d[g] = c[g] + sum_k (A[m, k] * SA) (B[n, k] * SB)``.

Maths: every operand element is decoded and multiplied by its scale in FP32, rounded to BF16 and fed to a BF16
``tl.dot`` accumulating in FP32. The rounding is exact wherever the scaled value lies in BF16's normal range
[2^-126, 2^128): an E2M1 value (0, 0.5 .. 6: 2 significant bits) or an E4M3 value (4 bits) times a power of two
(UE8M0) keeps its bits; E2M1 times a UE4M3 scale has at most 6 significant bits of BF16's 8, between 2^-10 and
6 * 448. So the products are the exact products and the sum differs from the FP64 reference only by FP32
accumulation order. At the extremes: a UE8M0 scale of 2^-127 (byte 0; also FP32 0) times a small value lands
below 2^-126 and loses bits (BF16 subnormals) or flushes to zero; scales above 2^120 overflow values > 2^8 to inf;
a UE8M0 byte 255 decodes to inf and a UE4M3 0x7F / 0xFF to NaN, as in the reference. FP32 scales are taken as the
UE8M0 values the K-grouped op's contract says they are (DeepGEMM reads only their exponents): a scale that is not a
power of two is applied with one BF16 rounding per element.

Operands arrive as bytes (uint8 views): FP8 E4M3 bits, or packed E2M1 (two per byte, the even K element in the low
nibble). Each K step decodes the even and the odd K elements of the step as two [rows, BLOCK_K / 2] halves and
issues one dot per half, so packed bytes are never interleaved in registers. Scales are read per element (the reads
repeat within a scale block and hit L1): FP32 [rows / GRAN_MN, K / GRAN_K] with any strides, packed UE8M0 int32
[rows, K / GRAN_K / 4] (byte j of a word = scale block 4i + j), or cuBLASLt's tiled UE4M3 bytes.

Tiling: program (t, g) owns output tile t (GROUP_M-swizzled over the M x N tiles) of group g. K-grouped: group g
takes K in [start_g, end_g) of the shared K axis, read from ``layout_ptr`` on the device (sizes: a prefix sum;
psum: ends, each start aligned up to PSUM_ALIGN), masked element by element, so groups may start anywhere.
"""

import triton
import triton.language as tl

# SF_KIND: how scales are stored.
SF_FP32 = tl.constexpr(0)       # FP32 values, per (row / GRAN_MN, K / GRAN_K)
SF_UE8M0_INT = tl.constexpr(1)  # packed UE8M0 exponent bytes, four per int32, per (row, K / GRAN_K / 4)
SF_UE4M3_TILED = tl.constexpr(2)  # one E4M3 byte per (row, 16 K) in cuBLASLt's 128 x 64 tiles (512 bytes each)
# GROUPING: which rows and K a program works on.
DENSE = tl.constexpr(0)
K_GROUPED = tl.constexpr(1)     # layout = per-group K sizes
K_GROUPED_PSUM = tl.constexpr(2)  # layout = per-group K ends; a group starts at align(previous end, PSUM_ALIGN)

_FP32_EXP_SHIFT = tl.constexpr(23)
_FP32_NAN_BITS = tl.constexpr(0x7FC00000)
_E2M1_ZERO_EXP_BIAS = tl.constexpr(126)   # E2M1 value 2^(e - 1) * (1 + m / 2): biased FP32 exponent e + 126
_E4M3_BIAS_SHIFT = tl.constexpr(120)      # E4M3 value 2^(e - 7) * (1 + m / 8): biased FP32 exponent e + 120
_E4M3_SUBNORMAL_UNIT = tl.constexpr(0.001953125)  # 2^-9: E4M3 exponent 0 is m * 2^-9
_TILE_BYTES = tl.constexpr(512)           # one cuBLASLt scale tile: 128 rows x 4 scales


@triton.jit
def _e2m1_to_f32(code):
    """4-bit E2M1 codes (int32) -> FP32; code 8 (negative zero) gives +0, as the reference decodes it."""
    mag = code & 7
    e = mag >> 1
    m = mag & 1
    bits = tl.where(e == 0, m * (_E2M1_ZERO_EXP_BIAS << _FP32_EXP_SHIFT),
                    ((e + _E2M1_ZERO_EXP_BIAS) << _FP32_EXP_SHIFT) | (m << 22))
    value = bits.to(tl.float32, bitcast=True)
    return tl.where((code & 8) != 0, -value, value)


@triton.jit
def _e4m3_to_f32(byte):
    """E4M3 (fn) bits (int32 0..255) -> FP32, without an FP8 conversion instruction (none below sm_89)."""
    e = (byte >> 3) & 15
    m = byte & 7
    bits = ((e + _E4M3_BIAS_SHIFT) << _FP32_EXP_SHIFT) | (m << 20)
    bits = tl.where((byte & 0x7F) == 0x7F, _FP32_NAN_BITS, bits)
    value = tl.where(e == 0, m.to(tl.float32) * _E4M3_SUBNORMAL_UNIT, bits.to(tl.float32, bitcast=True))
    return tl.where((byte & 0x80) != 0, -value, value)


@triton.jit
def _scales(sf_ptr, rows, kk, ok, stride_sfr, stride_sfk, sf_col_tiles,
            SF_KIND: tl.constexpr, GRAN_MN: tl.constexpr, GRAN_K: tl.constexpr):
    """FP32 scale of every (row, logical K) in the broadcast index tensors ``rows`` / ``kk``."""
    blk = kk // GRAN_K
    if SF_KIND == SF_FP32:
        s = tl.load(sf_ptr + (rows // GRAN_MN).to(tl.int64) * stride_sfr + blk.to(tl.int64) * stride_sfk,
                    mask=ok, other=1.0)
    elif SF_KIND == SF_UE8M0_INT:
        word = tl.load(sf_ptr + rows.to(tl.int64) * stride_sfr + (blk // 4).to(tl.int64) * stride_sfk,
                       mask=ok, other=0)
        exponent = (word >> ((blk % 4) * 8)) & 0xFF
        s = (exponent << _FP32_EXP_SHIFT).to(tl.float32, bitcast=True)
    else:
        tile = (rows // 128).to(tl.int64) * sf_col_tiles + blk // 4
        inner = (rows % 32) * 16 + ((rows // 32) % 4) * 4 + blk % 4
        s = _e4m3_to_f32(tl.load(sf_ptr + tile * _TILE_BYTES + inner, mask=ok, other=0).to(tl.int32))
    return s


@triton.jit
def _operand_halves(ptr, rows, rows_ok, kp, k_lo, k_hi, stride_r, stride_k,
                    sf_ptr, stride_sfr, stride_sfk, sf_col_tiles,
                    IS_FP4: tl.constexpr, SF_KIND: tl.constexpr, GRAN_MN: tl.constexpr, GRAN_K: tl.constexpr):
    """The even-K and odd-K halves of one operand's K step, scaled, as BF16. ``rows`` and ``kp`` (the pair index:
    logical K 2 * kp and 2 * kp + 1) broadcast to the tile's shape ([R, BK / 2] for A, [BK / 2, R] for B)."""
    k_even = kp * 2
    ok_even = rows_ok & (k_even >= k_lo) & (k_even < k_hi)
    ok_odd = rows_ok & (k_even + 1 >= k_lo) & (k_even + 1 < k_hi)
    base = ptr + rows.to(tl.int64) * stride_r
    if IS_FP4:
        byte = tl.load(base + kp.to(tl.int64) * stride_k, mask=ok_even | ok_odd, other=0).to(tl.int32)
        even = _e2m1_to_f32(byte & 0xF)
        odd = _e2m1_to_f32((byte >> 4) & 0xF)
    else:
        even = _e4m3_to_f32(tl.load(base + k_even.to(tl.int64) * stride_k, mask=ok_even, other=0).to(tl.int32))
        odd = _e4m3_to_f32(tl.load(base + (k_even + 1).to(tl.int64) * stride_k, mask=ok_odd, other=0).to(tl.int32))
    # (every granularity is even: both elements of a pair share a scale)
    s = _scales(sf_ptr, rows, k_even, ok_even | ok_odd, stride_sfr, stride_sfk, sf_col_tiles, SF_KIND, GRAN_MN,
                GRAN_K)
    # Masked elements become zeros after scaling, so an inf / NaN scale outside the group cannot leak in.
    even = tl.where(ok_even, even * s, 0.0).to(tl.bfloat16)
    odd = tl.where(ok_odd, odd * s, 0.0).to(tl.bfloat16)
    return even, odd


@triton.jit(do_not_specialize=["M", "N", "K", "stride_ag", "stride_am", "stride_ak", "stride_bg", "stride_bn",
                               "stride_bk", "stride_sfag", "stride_sfam", "stride_sfak", "stride_sfbg",
                               "stride_sfbn", "stride_sfbk", "sfa_col_tiles", "sfb_col_tiles", "stride_dg",
                               "stride_dm", "stride_cg", "stride_cm"],
            do_not_specialize_on_alignment=["a_ptr", "b_ptr", "sfa_ptr", "sfb_ptr", "d_ptr", "c_ptr", "layout_ptr"])
def _fp4_gemm_kernel(a_ptr,       # (G?, M, K or K / 2) uint8: E4M3 bits or packed E2M1
                     b_ptr,       # (G?, N, K or K / 2) uint8
                     sfa_ptr,     # A's scales (SF_KIND)
                     sfb_ptr,     # B's scales
                     d_ptr,       # (G?, M, N) bf16 / fp32
                     c_ptr,       # (G?, M, N) like d (read when HAS_C; may be d)
                     layout_ptr,  # (G,) int32 K sizes or ends (K-grouped), else unused
                     M, N, K,
                     stride_ag, stride_am, stride_ak, stride_bg, stride_bn, stride_bk,
                     stride_sfag, stride_sfam, stride_sfak, stride_sfbg, stride_sfbn, stride_sfbk,
                     sfa_col_tiles, sfb_col_tiles,
                     stride_dg, stride_dm, stride_cg, stride_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     A_FP4: tl.constexpr, B_FP4: tl.constexpr, SF_KIND: tl.constexpr,
                     GRAN_K_A: tl.constexpr, GRAN_K_B: tl.constexpr, GRAN_N_B: tl.constexpr,
                     GROUPING: tl.constexpr, G_POW2: tl.constexpr, PSUM_ALIGN: tl.constexpr,
                     HAS_C: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.program_id(1)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows_here = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows_here
    pid_n = (pid % in_group) // rows_here

    k_lo = 0
    k_hi = K
    if GROUPING == K_GROUPED:
        idx = tl.arange(0, G_POW2)
        sizes = tl.load(layout_ptr + idx, mask=idx <= g, other=0)
        k_hi = tl.sum(sizes, axis=0)
        k_lo = k_hi - tl.sum(tl.where(idx == g, sizes, 0), axis=0)
    elif GROUPING == K_GROUPED_PSUM:
        k_hi = tl.load(layout_ptr + g)
        previous = tl.load(layout_ptr + tl.maximum(g - 1, 0))
        previous = tl.where(g > 0, previous, 0)
        k_lo = (previous + PSUM_ALIGN - 1) // PSUM_ALIGN * PSUM_ALIGN
    g64 = g.to(tl.int64)
    a_ptr += g64 * stride_ag
    b_ptr += g64 * stride_bg
    sfa_ptr += g64 * stride_sfag
    sfb_ptr += g64 * stride_sfbg

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_a = offs_m[:, None]
    rows_b = offs_n[None, :]
    ok_a = rows_a < M
    ok_b = rows_b < N
    pairs = tl.arange(0, BLOCK_K // 2)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo // BLOCK_K * BLOCK_K, k_hi, BLOCK_K):
        kp = k0 // 2 + pairs
        a_even, a_odd = _operand_halves(a_ptr, rows_a, ok_a, kp[None, :], k_lo, k_hi, stride_am, stride_ak,
                                        sfa_ptr, stride_sfam, stride_sfak, sfa_col_tiles,
                                        A_FP4, SF_KIND, 1, GRAN_K_A)
        b_even, b_odd = _operand_halves(b_ptr, rows_b, ok_b, kp[:, None], k_lo, k_hi, stride_bn, stride_bk,
                                        sfb_ptr, stride_sfbn, stride_sfbk, sfb_col_tiles,
                                        B_FP4, SF_KIND, GRAN_N_B, GRAN_K_B)
        acc = tl.dot(a_even, b_even, acc)
        acc = tl.dot(a_odd, b_odd, acc)

    out_ok = ok_a & ok_b
    if HAS_C:
        acc += tl.load(c_ptr + g64 * stride_cg + rows_a.to(tl.int64) * stride_cm + rows_b, mask=out_ok,
                       other=0.0).to(tl.float32)
    d_ptrs = d_ptr + g64 * stride_dg + rows_a.to(tl.int64) * stride_dm + rows_b
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=out_ok)
