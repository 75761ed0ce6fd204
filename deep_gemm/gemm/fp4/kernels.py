"""Dequantising FP4 / FP8 GEMM (tl.*, portable from sm_80): ``d[g] = c[g] + sum_k (A[m, k] * SA) (B[n, k] * SB)``.

Maths: every operand element is decoded and multiplied by its scale in FP32, rounded to BF16 and fed to a BF16
``tl.dot`` accumulating in FP32. The rounding is exact wherever the scaled value lies in BF16's normal range
[2^-126, 2^128): an E2M1 value (0, 0.5 .. 6: 2 significant bits) or an E4M3 value (4 bits) times a power of two
(UE8M0) keeps its bits; E2M1 times a UE4M3 scale has at most 6 significant bits of BF16's 8, between 2^-10 and
6 * 448. So the products are the exact products and the sum differs from the FP64 reference only by FP32
accumulation order. At the extremes: a UE8M0 scale of 2^-127 (byte 0; also FP32 0) times a small value lands
below 2^-126 and loses bits (BF16 subnormals) or flushes to zero; scales above 2^120 overflow values > 2^8 to inf;
a UE8M0 byte 255 decodes to inf and a UE4M3 0x7F / 0xFF to NaN, as in the reference. The K-grouped op's FP32
scales are taken as the UE8M0 values its contract says they are (DeepGEMM reads only their exponents): a scale that
is not a power of two is applied with one BF16 rounding per element. With SCALE_AFTER (FP32 scales of any value, the
FP8 GEMMs' forms) the decoded values go into the dot unscaled and each K step, which lies in one scale block of
each operand, is promoted: acc += dot * (sa[m] * sb[n]) in FP32.

Operands arrive as bytes (uint8 views): FP8 E4M3 bits, or packed E2M1 (two per byte, the even K element in the low
nibble). Each K step decodes the even and the odd K elements of the step as two [rows, BLOCK_K / 2] halves and
issues one dot per half, so packed bytes are never interleaved in registers. Scales are read once per (row, scale
block) of the step and broadcast along K: FP32 [rows / GRAN_MN, K / GRAN_K] with any strides, packed UE8M0 int32
[rows, K / GRAN_K / 4] (byte j of a word = scale block 4i + j), or cuBLASLt's tiled UE4M3 bytes.

Tiling: program (t, g) owns output tile t (GROUP_M-swizzled over the M x N tiles) of group g; everything about
groups is read from ``layout_ptr`` on the device. K-grouped: group g takes K in [start_g, end_g) of the shared K
axis (sizes: a prefix sum; psum: ends, each start aligned up to PSUM_ALIGN), masked element by element, so groups
may start anywhere. M-grouped contiguous (one program column): a tile's rows lie in one aligned segment (BLOCK_M
divides the alignment), which names B's group; rows of no group are zeros in D (or, psum without ZERO_GAPS, left
alone). Masked: group g's A, B and D, rows from masked_m[g] on left alone.
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
M_IDS = tl.constexpr(3)         # layout = the group of every row of A (-1: padding, written as zeros)
M_PSUM = tl.constexpr(4)        # layout = per-group M ends; a group starts at align(previous end, PSUM_ALIGN)
MASKED = tl.constexpr(5)        # layout = per-group valid rows of A [G, M_max, K]; rows past them are not written

_FP32_EXP_SHIFT = tl.constexpr(23)
_FP32_NAN_BITS = tl.constexpr(0x7FC00000)
_E2M1_ZERO_EXP_BIAS = tl.constexpr(126)   # E2M1 value 2^(e - 1) * (1 + m / 2): biased FP32 exponent e + 126
_E4M3_BIAS_SHIFT = tl.constexpr(120)      # E4M3 value 2^(e - 7) * (1 + m / 8): biased FP32 exponent e + 120
_E4M3_SUBNORMAL_UNIT = tl.constexpr(0.001953125)  # 2^-9: E4M3 exponent 0 is m * 2^-9
_TILE_BYTES = tl.constexpr(512)           # one cuBLASLt scale tile: 128 rows x 4 scales
# UTCCP (the tensor-memory copy of scale factors) reads 128 rows as 4 groups of 32.
_UTCCP_ROWS = tl.constexpr(128)
_UTCCP_GROUPS = tl.constexpr(4)
_UTCCP_GROUP_ROWS = tl.constexpr(32)


@triton.jit
def _e2m1_to_f32(code):
    """4-bit E2M1 codes (int32) -> FP32. Code 8 (negative zero) gives -0, which the reference decodes as +0: the same
    in every product sum."""
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
def _block_scales(sf_ptr, rows, rows_ok, k0, k_hi, stride_sfr, stride_sfk, sf_col_tiles,
                  SF_KIND: tl.constexpr, GRAN_MN: tl.constexpr, GRAN_K: tl.constexpr, NB: tl.constexpr):
    """FP32 scales [R, NB] of rows ``rows`` for the NB scale blocks from the one holding logical K ``k0`` on."""
    blk = k0 // GRAN_K + tl.arange(0, NB)[None, :]
    r = rows[:, None]
    ok = rows_ok[:, None] & (blk * GRAN_K < k_hi)
    if SF_KIND == SF_FP32:
        s = tl.load(sf_ptr + (r // GRAN_MN).to(tl.int64) * stride_sfr + blk.to(tl.int64) * stride_sfk,
                    mask=ok, other=1.0)
    elif SF_KIND == SF_UE8M0_INT:
        word = tl.load(sf_ptr + r.to(tl.int64) * stride_sfr + (blk // 4).to(tl.int64) * stride_sfk,
                       mask=ok, other=0)
        exponent = (word >> ((blk % 4) * 8)) & 0xFF
        s = (exponent << _FP32_EXP_SHIFT).to(tl.float32, bitcast=True)
    else:
        tile = (r // 128).to(tl.int64) * sf_col_tiles + blk // 4
        inner = (r % 32) * 16 + ((r // 32) % 4) * 4 + blk % 4
        s = _e4m3_to_f32(tl.load(sf_ptr + tile * _TILE_BYTES + inner, mask=ok, other=0).to(tl.int32))
    return s


@triton.jit
def _operand_halves(ptr, row0, rows_ok, k0, k_lo, k_hi, stride_r, stride_k,
                    sf_ptr, stride_sfr, stride_sfk, sf_col_tiles,
                    IS_FP4: tl.constexpr, SF_KIND: tl.constexpr, GRAN_MN: tl.constexpr, GRAN_K: tl.constexpr,
                    R: tl.constexpr, BLOCK_K: tl.constexpr, K_FIRST: tl.constexpr, SCALED: tl.constexpr,
                    SF_ROWS_UTCCP: tl.constexpr = False):
    """The even-K and odd-K halves of one operand's K step [k0, k0 + BLOCK_K), scaled (unless not SCALED: the
    decoded values, whose scale the caller applies after the dot), as BF16: [R, BLOCK_K / 2],
    or [BLOCK_K / 2, R] with K_FIRST (B's orientation for the dot). Pair p holds logical K k0 + 2p and k0 + 2p + 1
    (one packed byte). Rows row0 .. row0 + R, those of ``rows_ok`` ([R]) read (the others are zeros). Addresses
    are a 64-bit tile base plus int32 offsets within the tile (a 64-bit pointer per element would not fit the
    registers beside the accumulator). ``SF_ROWS_UTCCP``: the scale rows are in the Mega MoE weights' UTCCP order
    (within 128 rows, row ``32 q + p`` stored at ``4 p + q``; ``transform_weights_for_mega_moe``)."""
    HALF: tl.constexpr = BLOCK_K // 2
    # Scale blocks in the step, and pairs per block (a block longer than the step covers all of it).
    NB: tl.constexpr = BLOCK_K // GRAN_K if BLOCK_K > GRAN_K else 1
    PAIRS: tl.constexpr = HALF // NB
    local = tl.arange(0, R)
    rows = row0 + local
    kp = k0 // 2 + tl.arange(0, HALF)
    k_even = kp * 2
    ok_even = (k_even >= k_lo) & (k_even < k_hi)
    ok_odd = (k_even + 1 >= k_lo) & (k_even + 1 < k_hi)
    if SCALED:
        sf_rows = rows
        if SF_ROWS_UTCCP:
            sf_rows = (rows // _UTCCP_ROWS) * _UTCCP_ROWS + (rows % _UTCCP_GROUP_ROWS) * _UTCCP_GROUPS \
                + (rows % _UTCCP_ROWS) // _UTCCP_GROUP_ROWS
        sb = _block_scales(sf_ptr, sf_rows, rows_ok, k0, k_hi, stride_sfr, stride_sfk, sf_col_tiles, SF_KIND, GRAN_MN,
                           GRAN_K, NB)
    else:
        sb = tl.full((R, NB), 1.0, tl.float32)
    if K_FIRST:
        r = local[None, :]
        r_ok = rows_ok[None, :]
        kp2 = kp[:, None]
        ok_even = ok_even[:, None] & r_ok
        ok_odd = ok_odd[:, None] & r_ok
        # (every granularity is even: both elements of a pair share a scale)
        s = tl.reshape(tl.broadcast_to(tl.trans(sb)[:, None, :], (NB, PAIRS, R)), (HALF, R))
    else:
        r = local[:, None]
        r_ok = rows_ok[:, None]
        kp2 = kp[None, :]
        ok_even = ok_even[None, :] & r_ok
        ok_odd = ok_odd[None, :] & r_ok
        s = tl.reshape(tl.broadcast_to(sb[:, :, None], (R, NB, PAIRS)), (R, HALF))
    base = ptr + row0.to(tl.int64) * stride_r + r * stride_r
    if IS_FP4:
        byte = tl.load(base + kp2 * stride_k, mask=ok_even | ok_odd, other=0).to(tl.int32)
        even = _e2m1_to_f32(byte & 0xF)
        odd = _e2m1_to_f32((byte >> 4) & 0xF)
    else:
        even = _e4m3_to_f32(tl.load(base + (kp2 * 2) * stride_k, mask=ok_even, other=0).to(tl.int32))
        odd = _e4m3_to_f32(tl.load(base + (kp2 * 2 + 1) * stride_k, mask=ok_odd, other=0).to(tl.int32))
    # Masked elements become zeros after scaling, so an inf / NaN scale outside the group cannot leak in.
    even = tl.where(ok_even, even * s, 0.0).to(tl.bfloat16)
    odd = tl.where(ok_odd, odd * s, 0.0).to(tl.bfloat16)
    return even, odd


@triton.jit(do_not_specialize=["M", "N", "K", "G", "stride_ag", "stride_am", "stride_ak", "stride_bg", "stride_bn",
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
                     layout_ptr,  # int32: (G,) K sizes / K ends / M ends / masked M, or (M,) group ids
                     M, N, K, G,
                     stride_ag, stride_am, stride_ak, stride_bg, stride_bn, stride_bk,
                     stride_sfag, stride_sfam, stride_sfak, stride_sfbg, stride_sfbn, stride_sfbk,
                     sfa_col_tiles, sfb_col_tiles,
                     stride_dg, stride_dm, stride_cg, stride_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     A_FP4: tl.constexpr, B_FP4: tl.constexpr, SF_KIND: tl.constexpr,
                     GRAN_K_A: tl.constexpr, GRAN_K_B: tl.constexpr, GRAN_N_B: tl.constexpr,
                     GROUPING: tl.constexpr, G_POW2: tl.constexpr, PSUM_ALIGN: tl.constexpr, ZERO_GAPS: tl.constexpr,
                     SCALE_AFTER: tl.constexpr, HAS_C: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.program_id(1)  # the group of A, D and C (0 for dense and M-grouped contiguous)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows_here = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows_here
    pid_n = (pid % in_group) // rows_here
    tile_m = pid_m * BLOCK_M
    tile_n = pid_n * BLOCK_N
    rows = tile_m + tl.arange(0, BLOCK_M)
    ok_n = tile_n + tl.arange(0, BLOCK_N) < N
    rows_ok = rows < M      # rows of A that take part
    store_ok = rows_ok      # rows of D written (zeros where A's row does not take part)
    g_b = g                 # the group of B

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
    elif GROUPING == M_IDS:
        # A tile lies inside one aligned segment: one expert's rows and padding (-1).
        ids = tl.load(layout_ptr + rows, mask=rows_ok, other=-1)
        g_b = tl.max(ids, axis=0)
        rows_ok = rows_ok & (ids == g_b) & (g_b >= 0)
    elif GROUPING == M_PSUM:
        # The tile's group: the last whose start (its previous end aligned up) is at or before the tile's first
        # row; starts never decrease. Rows from the group's end on are gaps.
        idx = tl.arange(0, G_POW2)
        ends = tl.load(layout_ptr + idx, mask=idx < G, other=0)
        previous = tl.load(layout_ptr + idx - 1, mask=(idx > 0) & (idx < G), other=0)
        starts = (previous + PSUM_ALIGN - 1) // PSUM_ALIGN * PSUM_ALIGN
        g_b = tl.sum(((idx < G) & (starts <= tile_m)).to(tl.int32), axis=0) - 1
        rows_ok = rows_ok & (rows < tl.sum(tl.where(idx == g_b, ends, 0), axis=0))
        if not ZERO_GAPS:
            store_ok = rows_ok
    elif GROUPING == MASKED:
        rows_ok = rows_ok & (rows < tl.load(layout_ptr + g))
        store_ok = rows_ok
    if GROUPING >= M_IDS:
        # (a tile with no row of a group runs no K step: it writes zeros, or nothing)
        k_hi = tl.where(tl.max(rows_ok.to(tl.int32), axis=0) > 0, k_hi, 0)
    g64 = g.to(tl.int64)
    gb64 = tl.maximum(g_b, 0).to(tl.int64)
    a_ptr += g64 * stride_ag
    sfa_ptr += g64 * stride_sfag
    b_ptr += gb64 * stride_bg
    sfb_ptr += gb64 * stride_sfbg

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo // BLOCK_K * BLOCK_K, k_hi, BLOCK_K):
        a_even, a_odd = _operand_halves(a_ptr, tile_m, rows_ok, k0, k_lo, k_hi, stride_am, stride_ak,
                                        sfa_ptr, stride_sfam, stride_sfak, sfa_col_tiles,
                                        A_FP4, SF_KIND, 1, GRAN_K_A, BLOCK_M, BLOCK_K, False, not SCALE_AFTER)
        b_even, b_odd = _operand_halves(b_ptr, tile_n, ok_n, k0, k_lo, k_hi, stride_bn, stride_bk,
                                        sfb_ptr, stride_sfbn, stride_sfbk, sfb_col_tiles,
                                        B_FP4, SF_KIND, GRAN_N_B, GRAN_K_B, BLOCK_N, BLOCK_K, True, not SCALE_AFTER)
        if SCALE_AFTER:
            # The step lies in one scale block of each operand: its raw product sum, then one FFMA per element.
            part = tl.dot(a_even, b_even)
            part = tl.dot(a_odd, b_odd, part)
            sa = tl.reshape(_block_scales(sfa_ptr, rows, rows_ok, k0, k_hi, stride_sfam, stride_sfak, sfa_col_tiles,
                                          SF_KIND, 1, GRAN_K_A, 1), (BLOCK_M,))
            sb = tl.reshape(_block_scales(sfb_ptr, tile_n + tl.arange(0, BLOCK_N), ok_n, k0, k_hi, stride_sfbn,
                                          stride_sfbk, sfb_col_tiles, SF_KIND, GRAN_N_B, GRAN_K_B, 1), (BLOCK_N,))
            acc += part * (sa[:, None] * sb[None, :])
        else:
            acc = tl.dot(a_even, b_even, acc)
            acc = tl.dot(a_odd, b_odd, acc)

    out_ok = store_ok[:, None] & ok_n[None, :]
    # A 64-bit tile base plus int32 offsets within the tile: a 64-bit pointer per element of both C and D would not
    # fit the registers beside the accumulator.
    local = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    if HAS_C:
        c_tile = c_ptr + g64 * stride_cg + tile_m.to(tl.int64) * stride_cm + tile_n
        acc += tl.load(c_tile + local * stride_cm + cols, mask=out_ok, other=0.0).to(tl.float32)
    d_tile = d_ptr + g64 * stride_dg + tile_m.to(tl.int64) * stride_dm + tile_n
    tl.store(d_tile + local * stride_dm + cols, acc.to(d_ptr.dtype.element_ty), mask=out_ok)
