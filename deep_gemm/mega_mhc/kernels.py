"""Fused mHC step (tl.*), two launches; maths in ``reference.py``, sizes in ``plan.py``.

``_mhc_post_kernel``: program (token block tb, hidden split s) owns rows [tb BT, +BT) and split s's BH-wide hidden
blocks (``floor(C / S) + (s < C % S)`` of them from ``s floor(C / S) + min(s, C % S)``, C = H / BH). Per block and
route o: ``nr = bf16(post[o] x + sum_i comb[i, o] residual[i])`` in FP32, stored, squares summed, and
``fn[:, o H + block] @ nr^T`` on the tensor cores (fn's 24 rows padded to a 64-row wgmma M; nr the B operand, from
shared memory). fn is split into three BF16 parts (hi + mid + lo == fn) and BF16 x BF16 products are exact, so the
projection is FP32 (DeepGEMM's TF32 rounds fn to 11 bits); each block's 12 MMAs start a fresh accumulator, added in
FP32 registers. The [32, BT] partial (24 projections, row 24 the sum of squares) goes to ``ws[s, t, :]``. Shifted
mHC's next-layer input ``u = bf16(sum_o shifted[o] nr[o])`` needs no projection: it is formed and stored here too.

``_mhc_norm_kernel``: program t adds its S partials in split order (same bits every call), does the mix maths and
the 4 x 4 Sinkhorn in FP32, then holds the hidden row as [W, 4, 32] (scale word, group, element): ``u = bf16(sum_r
pre[r] nr[r])`` (nr re-read, from L2 while there; shifted: kernel 1's u), RMSNorm into BF16 y, and per 32-group
the UE8M0 exponent from the BF16 amax's bits (the reference's integer ceiling), FP8 y, four exponents per int32 word.
"""

import triton
import triton.language as tl

# UE8M0 exponent of a 32-group from its BF16 amax bits (reference.ue8m0_exponents): ceil to the exponent whose
# 448 * 2^(e - 127) covers the amax, floored at 2^-22.
_BF16_MANTISSA_BITS = tl.constexpr(7)
_ROUND_UP = tl.constexpr(127 - 0x60)         # (1 << 7) - 1 minus the mantissa of 448 = 1.75 * 2^8
_E4M3_MAX_EXPONENT = tl.constexpr(8)
_MIN_BIASED = tl.constexpr(105 + 8)          # 2^-22 (biased 105), before removing E4M3's max exponent
_FP32_MANTISSA_BITS = tl.constexpr(23)
_FP32_BIAS_X2 = tl.constexpr(254)            # (254 - e) << 23 is 2^(127 - e): the exact inverse of 2^(e - 127)
_BF16_SHIFT = tl.constexpr(16)               # FP32 bits >> 16: the BF16 bits of a value that is a BF16


@triton.jit
def _column(ptr, rows64, row_ok, STRIDE: tl.constexpr, j):
    """ptr[rows, j] of a contiguous FP32 [T, STRIDE] table, as a [BT, 1] column."""
    return tl.load(ptr + rows64 * STRIDE + j, mask=row_ok, other=0.0)[:, None]


@triton.jit
def _split_dot(f, nr, acc):
    """acc + f @ nr^T for FP32 f [M, BH] and BF16 nr [BT, BH]: f as three BF16 parts, each product exact in FP32."""
    hi = f.to(tl.bfloat16)
    rest = f - hi.to(tl.float32)
    mid = rest.to(tl.bfloat16)
    lo = (rest - mid.to(tl.float32)).to(tl.bfloat16)
    nr_t = tl.trans(nr)
    acc = tl.dot(lo, nr_t, acc)
    acc = tl.dot(mid, nr_t, acc)
    return tl.dot(hi, nr_t, acc)


@triton.jit(do_not_specialize=["T", "CHUNKS", "SPLITS"],
            do_not_specialize_on_alignment=["post_ptr", "comb_ptr", "shifted_ptr", "ws_ptr"])
def _mhc_post_kernel(
        x_ptr,  # (T, H) bf16
        res_ptr,  # (T, 4, H) bf16
        post_ptr,  # (T, 4) fp32
        comb_ptr,  # (T, 4, 4) fp32, [t, i, o]
        shifted_ptr,  # (T, 4) fp32 (SHIFTED)
        fn_ptr,  # (24, 4 H) fp32
        nr_ptr,  # (T, 4, H) bf16, written
        u_ptr,  # (T, H) bf16, written (SHIFTED): u = bf16(sum_o shifted[o] nr[o]), the next layer's input
        ws_ptr,  # (SPLITS, T, N) fp32, written: 24 projections, the sum of squares at SQ_COL, zeros
        # T tokens; H = CHUNKS * BH; MMA_M: fn rows padded to the MMA's M (rows past NUM_OUT read as zeros)
        T, CHUNKS, SPLITS,
        BT: tl.constexpr, BH: tl.constexpr, N: tl.constexpr, MMA_M: tl.constexpr, NUM_OUT: tl.constexpr,
        SQ_COL: tl.constexpr, SHIFTED: tl.constexpr):
    # H as a multiple of BH, and x, residual, fn, new_residual, u specialised on their 16-byte alignment (the launcher
    # declines other pointers): what lets the tiles load and store as 16-byte vectors, a few rows per thread.
    H = CHUNKS * BH
    tb = tl.program_id(0)
    s = tl.program_id(1)
    base = CHUNKS // SPLITS
    extra = CHUNKS % SPLITS
    c_first = s * base + tl.minimum(s, extra)
    c_count = base + (s < extra).to(tl.int32)

    first_row = tb * BT
    local = tl.arange(0, BT)
    rows = first_row + local
    row_ok = rows < T
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BH)
    outs = tl.arange(0, MMA_M)
    tile_ok = row_ok[:, None]
    # Scalar 64-bit bases and 32-bit tile offsets: per-element 64-bit pointers held across the loop cost two
    # registers per element each.
    x_base = x_ptr + first_row.to(tl.int64) * H
    res_base = res_ptr + first_row.to(tl.int64) * (4 * H)
    nr_base = nr_ptr + first_row.to(tl.int64) * (4 * H)
    u_base = u_ptr + first_row.to(tl.int64) * H
    x_offs = local[:, None] * H + cols[None, :]
    res_offs = local[:, None] * (4 * H) + cols[None, :]
    # fn rows [MMA_M, BH] at hidden columns of route 0 (route o is o * H further on); rows past NUM_OUT are zeros
    fn_offs = outs[:, None] * (4 * H) + cols[None, :]
    fn_ok = (outs < NUM_OUT)[:, None]

    acc = tl.zeros((MMA_M, BT), dtype=tl.float32)
    sq = tl.zeros((BT,), dtype=tl.float32)
    for c in range(c_first, c_first + c_count):
        h0 = c * BH
        x = tl.load(x_base + (x_offs + h0), mask=tile_ok, other=0.0).to(tl.float32)
        r0 = tl.load(res_base + (res_offs + h0), mask=tile_ok, other=0.0).to(tl.float32)
        r1 = tl.load(res_base + (res_offs + (H + h0)), mask=tile_ok, other=0.0).to(tl.float32)
        r2 = tl.load(res_base + (res_offs + (2 * H + h0)), mask=tile_ok, other=0.0).to(tl.float32)
        r3 = tl.load(res_base + (res_offs + (3 * H + h0)), mask=tile_ok, other=0.0).to(tl.float32)
        part = tl.zeros((MMA_M, BT), dtype=tl.float32)
        u = tl.zeros((BT, BH), dtype=tl.float32)
        for o in tl.static_range(4):
            v = _column(post_ptr, rows64, row_ok, 4, o) * x
            v = tl.fma(_column(comb_ptr, rows64, row_ok, 16, o), r0, v)
            v = tl.fma(_column(comb_ptr, rows64, row_ok, 16, 4 + o), r1, v)
            v = tl.fma(_column(comb_ptr, rows64, row_ok, 16, 8 + o), r2, v)
            v = tl.fma(_column(comb_ptr, rows64, row_ok, 16, 12 + o), r3, v)
            nr = v.to(tl.bfloat16)
            tl.store(nr_base + (res_offs + (o * H + h0)), nr, mask=tile_ok)
            nr32 = nr.to(tl.float32)
            sq += tl.sum(nr32 * nr32, axis=1)
            if SHIFTED:
                # (an FMA into zero first: the same operations, in the same order, as kernel 2's normal-mode u)
                u = tl.fma(_column(shifted_ptr, rows64, row_ok, 4, o), nr32, u)
            f = tl.load(fn_ptr + (fn_offs + (o * H + h0)), mask=fn_ok, other=0.0)
            part = _split_dot(f, nr, part)
        # (an FMA by 1.0, so that Triton does not fold the add back into the next block's MMA accumulator)
        acc = tl.fma(part, 1.0, acc)
        if SHIFTED:
            tl.store(u_base + (x_offs + h0), u.to(tl.bfloat16), mask=tile_ok)

    tile = tl.where((outs == SQ_COL)[:, None], sq[None, :], acc)
    ws = ws_ptr + (s * T + rows64)[None, :] * N + outs[:, None]
    tl.store(ws, tile, mask=(outs < N)[:, None] & row_ok[None, :])


@triton.jit
def _pick(v, lanes, r):
    """v[r] of a [4] vector, as a scalar (the other lanes add zeros: exact)."""
    return tl.sum(tl.where(lanes == r, v, 0.0), axis=0)


@triton.jit
def _bit_or(a, b):
    return a | b


@triton.jit
def _sigmoid(a):
    return tl.math.div_rn(1.0, 1.0 + tl.exp(-a))


@triton.jit(do_not_specialize=["T", "WORDS", "SPLITS", "num_sinkhorn_iters", "stride_sf_t", "stride_sf_w",
                               "stride_shared_w", "shared_block_m", "shared_block_rows"],
            do_not_specialize_on_alignment=["post_out_ptr", "comb_out_ptr", "prev_out_ptr",
                                            "mix_scales_ptr", "mix_bases_ptr", "ws_ptr", "sf_ptr", "shared_ptr"])
def _mhc_norm_kernel(
        nr_ptr,  # (T, 4, H) bf16: kernel 1's new residual (normal mode)
        u_ptr,  # (T, H) bf16: kernel 1's u (SHIFTED; may be y_ptr: each program reads its row before writing it)
        ws_ptr,  # (SPLITS, T, N) fp32: kernel 1's partials
        mix_scales_ptr,  # (3,) fp32
        mix_bases_ptr,  # (24,) fp32
        weight_ptr,  # (H,) bf16
        post_out_ptr,  # (T, 4) fp32, written
        comb_out_ptr,  # (T, 4, 4) fp32, written
        prev_out_ptr,  # (T, 4) fp32, written (SHIFTED)
        y_ptr,  # (T, H) bf16, written (HAS_BF16)
        y_fp8_ptr,  # (T, H) e4m3, written (HAS_FP8)
        sf_ptr,  # (T, H / 128) int32 words at strides (stride_sf_t, stride_sf_w), written (HAS_FP8)
        shared_ptr,  # shared-expert scale words: row shared_row(t), word stride stride_shared_w (HAS_SHARED)
        T, WORDS, SPLITS, num_sinkhorn_iters, hc_norm_eps, hc_pre_eps, hc_post_scale, sinkhorn_eps, rmsnorm_eps,
        rmsnorm_scale, stride_sf_t, stride_sf_w, stride_shared_w, shared_block_m, shared_block_rows,
        S_POW2: tl.constexpr, N: tl.constexpr, SQ_COL: tl.constexpr, W_POW2: tl.constexpr,
        GROUP: tl.constexpr, SHIFTED: tl.constexpr, HAS_BF16: tl.constexpr, HAS_FP8: tl.constexpr,
        HAS_SHARED: tl.constexpr):
    # H as a multiple of 128, and nr, u, weight, y, y_fp8 specialised on their 16-byte alignment (the launcher declines
    # other pointers): the row's loads and stores are vectors.
    H = WORDS * (4 * GROUP)
    t = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, 4)

    # ---- the 24 projections and the sum of squares: the splits' partials, added in split order
    s_idx = tl.arange(0, S_POW2)
    parts = ws_ptr + (s_idx.to(tl.int64) * T + t) * N
    s_ok = s_idx < SPLITS
    h_pre = tl.sum(tl.load(parts[:, None] + lanes[None, :], mask=s_ok[:, None], other=0.0), axis=0)
    h_post = tl.sum(tl.load(parts[:, None] + 4 + lanes[None, :], mask=s_ok[:, None], other=0.0), axis=0)
    grid = lanes[:, None] * 4 + lanes[None, :]
    h_comb = tl.sum(tl.load(parts[:, None, None] + 8 + grid[None, :, :], mask=s_ok[:, None, None], other=0.0),
                    axis=0)
    sq = tl.sum(tl.load(parts + SQ_COL, mask=s_ok, other=0.0), axis=0)
    rms = tl.math.div_rn(1.0, tl.sqrt_rn(tl.math.div_rn(sq, 4.0 * H) + hc_norm_eps))

    # ---- mixes
    a_pre = h_pre * rms * tl.load(mix_scales_ptr) + tl.load(mix_bases_ptr + lanes)
    a_post = h_post * rms * tl.load(mix_scales_ptr + 1) + tl.load(mix_bases_ptr + 4 + lanes)
    a_comb = h_comb * rms * tl.load(mix_scales_ptr + 2) + tl.load(mix_bases_ptr + 8 + grid)
    pre = _sigmoid(a_pre) + hc_pre_eps
    post = _sigmoid(a_post) * hc_post_scale
    v = tl.exp(a_comb - tl.max(a_comb, axis=1)[:, None])
    v = tl.math.div_rn(v, tl.sum(v, axis=1)[:, None]) + sinkhorn_eps
    v = tl.math.div_rn(v, tl.sum(v, axis=0)[None, :] + sinkhorn_eps)
    for _ in range(1, num_sinkhorn_iters):
        v = tl.math.div_rn(v, tl.sum(v, axis=1)[:, None] + sinkhorn_eps)
        v = tl.math.div_rn(v, tl.sum(v, axis=0)[None, :] + sinkhorn_eps)
    tl.store(post_out_ptr + t * 4 + lanes, post)
    tl.store(comb_out_ptr + t * 16 + grid, v)
    if SHIFTED:
        tl.store(prev_out_ptr + t * 4 + lanes, pre)
    c0 = _pick(pre, lanes, 0)
    c1 = _pick(pre, lanes, 1)
    c2 = _pick(pre, lanes, 2)
    c3 = _pick(pre, lanes, 3)

    # ---- next-layer input u, its RMSNorm, the FP8 cast: the row as [W, 4, 32] (scale word, group, element)
    w_idx = tl.arange(0, W_POW2)
    g_idx = tl.arange(0, 4)
    e_idx = tl.arange(0, GROUP)
    offs = w_idx[:, None, None] * (4 * GROUP) + g_idx[None, :, None] * GROUP + e_idx[None, None, :]
    ok = (w_idx < WORDS)[:, None, None]
    if SHIFTED:
        # (kernel 1 formed u from the coefficients known before the projection: one row read instead of four)
        u = tl.load(u_ptr + t * H + offs, mask=ok, other=0.0).to(tl.float32)
    else:
        row = nr_ptr + t * 4 * H + offs
        u = c0 * tl.load(row, mask=ok, other=0.0).to(tl.float32)
        u = tl.fma(c1, tl.load(row + H, mask=ok, other=0.0).to(tl.float32), u)
        u = tl.fma(c2, tl.load(row + 2 * H, mask=ok, other=0.0).to(tl.float32), u)
        u = tl.fma(c3, tl.load(row + 3 * H, mask=ok, other=0.0).to(tl.float32), u)
        u = u.to(tl.bfloat16).to(tl.float32)
    # (this full-row reduction also orders every u load of the program before its y stores: u may alias y)
    ss = tl.sum(tl.sum(tl.sum(u * u, axis=2), axis=1), axis=0)
    scale = tl.math.div_rn(1.0, tl.sqrt_rn(tl.math.div_rn(ss, 1.0 * H) + rmsnorm_eps)) * rmsnorm_scale
    weight = tl.load(weight_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    y = (u * scale * weight).to(tl.bfloat16)
    if HAS_BF16:
        tl.store(y_ptr + t * H + offs, y, mask=ok)
    if HAS_FP8:
        yf = y.to(tl.float32)
        amax = tl.max(tl.abs(yf), axis=2)                                       # [W, 4], BF16 values
        bits = amax.to(tl.int32, bitcast=True) >> _BF16_SHIFT
        biased = (bits + _ROUND_UP) >> _BF16_MANTISSA_BITS
        exps = tl.maximum(biased, _MIN_BIASED) - _E4M3_MAX_EXPONENT
        inverse = ((-exps + _FP32_BIAS_X2) << _FP32_MANTISSA_BITS).to(tl.float32, bitcast=True)
        scaled = (yf * inverse[:, :, None]).to(tl.bfloat16).to(tl.float32)     # exact: a power of two
        tl.store(y_fp8_ptr + t * H + offs, scaled.to(tl.float8e4nv), mask=ok)
        packed = tl.reduce(exps << (8 * g_idx)[None, :], 1, _bit_or)              # byte g = group g's exponent
        w_ok = w_idx < WORDS
        tl.store(sf_ptr + t * stride_sf_t + w_idx * stride_sf_w, packed, mask=w_ok)
        if HAS_SHARED:
            i = t % shared_block_m
            srow = t // shared_block_m * shared_block_rows + (i & ~127) + (i & 31) * 4 + ((i >> 5) & 3)
            tl.store(shared_ptr + srow + w_idx.to(tl.int64) * stride_shared_w, packed, mask=w_ok)
