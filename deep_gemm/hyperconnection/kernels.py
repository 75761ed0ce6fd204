"""TF32 pre-norm GEMM with row sums of squares (tl.*): ``d = a @ tf32(b).T`` and ``sqr_sum = sum(a^2, -1)``.

Maths: A is BF16 (exact in TF32 and FP32), B is FP32 rounded to TF32 (10 mantissa bits) to nearest, ties to even;
each 64-wide K block's products are summed on the tensor cores, the blocks in FP32 registers. wgmma itself
*truncates* FP32 operands to TF32 (PTX ISA), which misses DeepGEMM's test (calc_diff < 1e-8 against torch's TF32
matmul, whose cuBLAS kernels round) by 10x; DeepGEMM rounds B in its TMA unit (a CU_TENSOR_MAP_DATA_TYPE_TFLOAT32
descriptor). We do the same where B arrives by TMA (B_TMA: the launcher encodes B's descriptor as TFLOAT32), else round
B's bits in registers (``_round_to_tf32``, the same round-to-nearest-even). See ``reference.round_to_tf32``. The sum of
squares is taken from the FP32 registers of A that feed the MMA (one pass over A).

Tiling: program p owns rows [m_block * BM, +BM), output split ``split`` of NUM_SPLITS and sub-split ``sub`` of SUB
(p = (m_block * NUM_SPLITS + split) * SUB + sub). Output split s owns ``floor(nkb / S) + (s < nkb % S)``
consecutive 64-wide K blocks starting at ``s * floor(nkb / S) + min(s, nkb % S)`` (DeepGEMM's partition); its
sub-splits cut that range again by the same rule. A arrives by TMA (rows past M read as zeros), B by TMA or through
pointers (rows past N zero), both pipelined NUM_STAGES deep. One BN tile covers all of N.

Outputs: d[split] (row stride stride_dm, split stride stride_ds) and sqr_sum[split * M + row] (NUM_SPLITS = 1
for the unsplit [M, N] / [M] form); a split without K blocks writes zeros.
  SUB == 1  the program stores its tile.
  SUB > 1   (small problems, to fill the SMs) each sub-split writes its [BM, BN] partial and [BM] squares to a
            per-call workspace and bumps its (m_block, split)'s arrival counter; the last to arrive sums the SUB
            partials in sub-split order (RED_CHUNK loads issued at a time), so the result has the same bits
            whichever arrives last, stores the tile and resets the counter to zero (counters are zero at rest:
            core/scratch.py).
"""

import triton
import triton.language as tl

# FP32 -> TF32 rounding on the bit pattern, to nearest, ties to even (what a TFLOAT32 TMA load does): add half a TF32
# ulp minus one plus the lowest kept bit, then clear the 13 dropped bits. Inf and NaN (exponent all ones) are kept.
_TF32_HALF_ULP_MINUS_ONE = tl.constexpr(0xFFF)
_TF32_KEEP_MASK = tl.constexpr(-8192)  # 0xFFFFE000 as int32
_TF32_DROPPED_BITS = tl.constexpr(13)
_EXPONENT_MASK = tl.constexpr(0x7F800000)


@triton.jit
def _round_to_tf32(x):
    bits = x.to(tl.int32, bitcast=True)
    rounded = (bits + _TF32_HALF_ULP_MINUS_ONE + ((bits >> _TF32_DROPPED_BITS) & 1)) & _TF32_KEEP_MASK
    finite = (bits & _EXPONENT_MASK) != _EXPONENT_MASK
    return tl.where(finite, rounded, bits).to(tl.float32, bitcast=True)


# Runtime ints and pointers are not specialised on, so one binary per config serves every shape (launch.py).
@triton.jit(do_not_specialize=["M", "N", "K", "NUM_SPLITS", "SUB", "stride_bn", "stride_dm", "stride_ds"],
            do_not_specialize_on_alignment=["b_ptr", "d_ptr", "sq_ptr", "ws_ptr", "counter_ptr"])
def _hc_prenorm_kernel(
        a_desc,  # TMA over A [M, K] BF16, block [BM, BK]
        b_desc,  # B_TMA: TMA over B [N, K] FP32 encoded as TFLOAT32 (rounds on load), block [BN, BK]
        b_ptr,  # FP32 [N, K], row stride stride_bn (read through pointers unless B_TMA)
        d_ptr,  # FP32 [NUM_SPLITS, M, N]
        sq_ptr,  # FP32 [NUM_SPLITS, M] contiguous
        ws_ptr,  # SUB > 1: FP32 workspace [m_blocks * NUM_SPLITS, SUB, BM * BN + BM]
        counter_ptr,  # SUB > 1: int32 arrival counters [m_blocks * NUM_SPLITS], zero at rest
        M, N, K, NUM_SPLITS, SUB, stride_bn, stride_dm, stride_ds,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr, B_TMA: tl.constexpr,
        REDUCE: tl.constexpr, RED_CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    sub = pid % SUB
    tile = pid // SUB  # = m_block * NUM_SPLITS + split
    m_block = tile // NUM_SPLITS
    split = tile % NUM_SPLITS
    num_kb = K // BK
    base = num_kb // NUM_SPLITS
    extra = num_kb % NUM_SPLITS
    kb_first = split * base + tl.minimum(split, extra)
    kb_count = base + (split < extra).to(tl.int32)
    sub_base = kb_count // SUB
    sub_extra = kb_count % SUB
    kb_first += sub * sub_base + tl.minimum(sub, sub_extra)
    kb_count = sub_base + (sub < sub_extra).to(tl.int32)

    off_m = m_block * BM
    offs_n = tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    n_ok = offs_n < N
    b_rows = b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :]

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    squares = tl.zeros((BM, BK), dtype=tl.float32)
    for i in tl.range(0, kb_count, num_stages=NUM_STAGES):
        k = (kb_first + i) * BK
        a = a_desc.load([off_m, k]).to(tl.float32)
        if B_TMA:
            b = b_desc.load([0, k])
        else:
            b = _round_to_tf32(tl.load(b_rows + k, mask=n_ok[:, None], other=0.0))
        squares += a * a
        # Each K block's product comes out of a fresh wgmma accumulator and is added in FP32 registers: wgmma's
        # own accumulation loses low bits at every step (against the FP64 product of TF32 B: calc_diff 2.2e-9 at
        # K = 28672 with one accumulator, H200), per-block promotion keeps it at FP32 rounding. The add is an FMA
        # by 1.0 because Triton folds `acc + dot(a, b)` back into `dot(a, b, acc)`.
        acc = tl.fma(tl.dot(a, tl.trans(b), input_precision="tf32"), 1.0, acc)
    sq = tl.sum(squares, axis=1)

    offs_m = off_m + tl.arange(0, BM)
    m_ok = offs_m < M
    d_tile = d_ptr + split * stride_ds + offs_m[:, None] * stride_dm + offs_n[None, :]
    sq_tile = sq_ptr + split * M + offs_m
    if not REDUCE:
        tl.store(d_tile, acc, mask=m_ok[:, None] & n_ok[None, :])
        tl.store(sq_tile, sq, mask=m_ok)
    else:
        TILE: tl.constexpr = BM * BN + BM
        local_m = tl.arange(0, BM)
        ws_tile = ws_ptr + tile * SUB * TILE
        ws_sub = ws_tile + sub * TILE
        tl.store(ws_sub + local_m[:, None] * BN + offs_n[None, :], acc)
        tl.store(ws_sub + BM * BN + local_m, sq)
        tl.debug_barrier()
        counter = counter_ptr + tile
        arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if arrived == SUB - 1:
            at = local_m[:, None] * BN + offs_n[None, :]
            valid = m_ok[:, None] & n_ok[None, :]
            total = tl.zeros((BM, BN), dtype=tl.float32)
            sq_total = tl.zeros((BM,), dtype=tl.float32)
            for s0 in range(0, SUB, RED_CHUNK):
                # RED_CHUNK independent loads in flight, summed in sub-split order (the same bits every call).
                for j in tl.static_range(RED_CHUNK):
                    s_ok = s0 + j < SUB
                    part = ws_tile + (s0 + j) * TILE
                    total += tl.load(part + at, mask=valid & s_ok, other=0.0, cache_modifier=".cg")
                    sq_total += tl.load(part + BM * BN + local_m, mask=m_ok & s_ok, other=0.0, cache_modifier=".cg")
            tl.store(d_tile, total, mask=m_ok[:, None] & n_ok[None, :])
            tl.store(sq_tile, sq_total, mask=m_ok)
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")
