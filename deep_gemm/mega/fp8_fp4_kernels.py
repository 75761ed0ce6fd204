"""Triton kernels of the FP8 x FP4 Mega MoE layer (``fp8_fp4_mega_moe``) at one rank on Hopper, which has no FP4 MMA.

The layer runs the one-rank launches of ``kernels.py`` (route, scan, dispatch with the buffer's packed UE8M0 token
scales, combine) around its own L1 and L2:

* ``_fp8_fp4_l1_kernel``: per (M tile, N tile) ``x @ W1^T`` against the expert's interleaved L1 rows, SwiGLU (with the
  clamp) times the top-k weight, quantised to FP8 E4M3 with one UE8M0 scale per (row, 32 columns)
  (``scale = ceil_pow2(max(amax, 1e-4) / 448)``, as ``per_token_cast_to_fp8``) into ``l2_acts`` and the exponent
  bytes of ``l2_acts_sf``;
* ``_fp8_fp4_l2_kernel``: ``a @ W2^T`` of the intermediate, rounded to BF16 into the combine area at (slot, token).

Maths: both operands of every K step are decoded in registers (``gemm/fp4/kernels.py``'s ``_operand_halves``: FP8
E4M3 bytes or packed E2M1 nibbles, times their UE8M0 scale per 32 of K) to BF16, exactly (an E4M3 or E2M1 value
times a power of two keeps its bits in BF16's range), and multiplied by BF16 ``tl.dot`` into an FP32 accumulator: the
products are the reference's products, the sums differ only in FP32 order. Each K step is one 32-wide scale block
(the even and the odd K elements of a step are two dots, so packed FP4 bytes are never interleaved in registers).

Layouts read: the pool's FP8 rows and their packed scales (MN-major int32 words, 4 exponent bytes = 128 columns),
the weights as ``transform_weights_for_mega_moe`` leaves them: L1 rows interleaved in 8-row gate/up chunks, so an N
tile of BN rows holds BN / 2 gate and the matching BN / 2 up columns and SwiGLU and the per-32 quantisation finish
inside the tile (BN a multiple of 64); scale rows of both in UTCCP order. An L1 N tile owns BN / 64 exponent bytes of
an intermediate row's scale word and stores them as bytes, so the N tiles sharing a word never race.

``DENSE`` forms run the shared experts: one matrix over the first ``dense_rows`` token rows of x (its scales
K-major), weight 1, the L2 into a ``[rows, hidden]`` BF16 plane the combine adds after the routed slots.
"""

import triton
import triton.language as tl

from ..gemm.fp4.kernels import SF_UE8M0_INT, _operand_halves
from .kernels import _m_tile, _store_to_combine, _swiglu_rows

_FP8_MAX = tl.constexpr(448.0)
_MX_AMAX_FLOOR = tl.constexpr(1e-4)   # per_token_cast_to_fp8's floor of a group's amax
_MX_GROUP = tl.constexpr(32)          # columns per UE8M0 scale
_FP32_EXP_SHIFT = tl.constexpr(23)
_FP32_MANTISSA = tl.constexpr(0x7FFFFF)
_UE8M0_MIN, _UE8M0_MAX = tl.constexpr(1), tl.constexpr(254)   # biased exponents ceil_to_ue8m0 keeps
_FP32_EXP_BIAS_X2 = tl.constexpr(254)  # 1 / 2^(e - 127) = 2^(127 - e): biased exponent 254 - e


@triton.jit
def _ue8m0_quantise(act, BM: tl.constexpr, COLS: tl.constexpr):
    """(FP8 E4M3 [BM, COLS], biased UE8M0 exponents int32 [BM, COLS / 32]) of FP32 ``act``: per 32 columns
    ``scale = ceil_pow2(max(amax, 1e-4) / 448)`` (exponent clamped to [1, 254]) and ``q = act * (1 / scale)``,
    bit for bit ``per_token_cast_to_fp8(act, use_ue8m0=True, gran_k=32)``."""
    groups = tl.reshape(act, (BM, COLS // _MX_GROUP, _MX_GROUP))
    amax = tl.max(tl.abs(groups), axis=2)
    ratio = tl.math.div_rn(tl.maximum(amax, _MX_AMAX_FLOOR), _FP8_MAX)
    bits = ratio.to(tl.int32, bitcast=True)
    exponent = ((bits >> _FP32_EXP_SHIFT) & 0xFF) + ((bits & _FP32_MANTISSA) != 0).to(tl.int32)
    exponent = tl.minimum(tl.maximum(exponent, _UE8M0_MIN), _UE8M0_MAX)
    inv = ((-exponent + _FP32_EXP_BIAS_X2) << _FP32_EXP_SHIFT).to(tl.float32, bitcast=True)
    q = (groups * inv[:, :, None]).to(tl.float8e4nv)
    return tl.reshape(q, (BM, COLS)), exponent


@triton.jit
def _mx_acc(a_ptr, a_sf_ptr, row0, rows_ok, stride_asf_r, stride_asf_k, b_ptr, b_sf_ptr, n0, K,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, B_FP4: tl.constexpr, NUM_STAGES: tl.constexpr):
    """The FP32 [BM, BN] product of A's rows ``row0 ..`` (FP8 bytes, K per row; packed UE8M0 words at
    ``row * stride_asf_r + word * stride_asf_k``; rows outside ``rows_ok`` read as zeros) with B's rows
    ``n0 .. n0 + BN`` (contiguous FP8 or packed FP4 bytes, K-major UE8M0 words in UTCCP row order) over K."""
    stride_b = K // 2 if B_FP4 else K
    stride_bsf = K // 128
    n_ok = tl.arange(0, BN) < BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK, num_stages=NUM_STAGES):
        a_even, a_odd = _operand_halves(a_ptr, row0, rows_ok, k0, 0, K, K, 1, a_sf_ptr, stride_asf_r,
                                        stride_asf_k, 0, False, SF_UE8M0_INT, 1, _MX_GROUP, BM, BK, False, True)
        b_even, b_odd = _operand_halves(b_ptr, n0, n_ok, k0, 0, K, stride_b, 1, b_sf_ptr, stride_bsf, 1, 0, B_FP4,
                                        SF_UE8M0_INT, 1, _MX_GROUP, BN, BK, True, True, True)
        acc = tl.dot(a_even, b_even, acc)
        acc = tl.dot(a_odd, b_odd, acc)
    return acc


@triton.jit
def _tile_rows(tile_end_ptr, ends_ptr, num_local, dense_rows, b_ptr, b_sf_ptr, stride_b_e, stride_bsf_e,
               BM: tl.constexpr, E_POW2: tl.constexpr, DENSE: tl.constexpr):
    """(whether this program's M tile exists, its first row, its rows, the end of the real ones, B's data and scales
    at its expert) of a routed tile (the pool's M tiles, ``_m_tile``) or, ``DENSE``, of the token rows (one matrix:
    B as given, rows below ``dense_rows`` real)."""
    tile_m = tl.program_id(1)
    if DENSE:
        return tile_m >= 0, tile_m * BM, tile_m * BM + tl.arange(0, BM), dense_rows, b_ptr, b_sf_ptr
    exists, expert, rows, row_end = _m_tile(tile_m, tile_end_ptr, ends_ptr, num_local, BM, E_POW2)
    expert = expert.to(tl.int64)
    return exists, tile_m * BM, rows, row_end, b_ptr + expert * stride_b_e, b_sf_ptr + expert * stride_bsf_e


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "stride_asf_r", "stride_asf_k", "stride_b_e",
                               "stride_bsf_e", "stride_l2a", "stride_l2a_sf", "dense_rows", "clamp"],
            do_not_specialize_on_alignment=["a_ptr", "a_sf_ptr", "b_ptr", "b_sf_ptr", "tile_end_ptr", "ends_ptr",
                                            "row_w_ptr", "l2a_ptr", "l2a_sf_ptr"])
def _fp8_fp4_l1_kernel(a_ptr,        # (rows, hidden) uint8: FP8 E4M3 bits of the pool (DENSE: of x)
                       a_sf_ptr,     # int32 packed UE8M0 per 32, word (row, k / 128) at stride_asf_r / stride_asf_k
                       b_ptr,        # (E, 2I, hidden or hidden / 2) uint8: FP8 or packed FP4, interleaved gate/up
                       b_sf_ptr,     # (E, 2I, hidden / 128) int32, UTCCP row order
                       tile_end_ptr, ends_ptr, row_w_ptr,
                       l2a_ptr,      # (rows, I) fp8: the intermediate
                       l2a_sf_ptr,   # uint8: its MN-major scale words as bytes, (word column, row, byte)
                       num_local, inter, hidden, stride_asf_r, stride_asf_k, stride_b_e, stride_bsf_e, stride_l2a,
                       stride_l2a_sf, dense_rows, clamp,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                       B_FP4: tl.constexpr, HAS_CLAMP: tl.constexpr, FAST_MATH: tl.constexpr,
                       NUM_STAGES: tl.constexpr, DENSE: tl.constexpr):
    tile_n = tl.program_id(0)
    exists, row0, rows, row_end, b_ptr, b_sf_ptr = _tile_rows(tile_end_ptr, ends_ptr, num_local, dense_rows, b_ptr,
                                                              b_sf_ptr, stride_b_e, stride_bsf_e, BM, E_POW2, DENSE)
    if not exists:
        return
    acc = _mx_acc(a_ptr, a_sf_ptr, row0, rows < row_end, stride_asf_r, stride_asf_k, b_ptr, b_sf_ptr, tile_n * BN,
                  hidden, BM, BN, BK, B_FP4, NUM_STAGES)
    act, rows_ok = _swiglu_rows(acc, rows, row_end, row_w_ptr, clamp, BM, BN, HAS_CLAMP, FAST_MATH, not DENSE)
    q, exponent = _ue8m0_quantise(act, BM, BN // 2)
    cols = tile_n * (BN // 2) + tl.arange(0, BN // 2)
    rows64 = rows.to(tl.int64)
    tl.store(l2a_ptr + rows64[:, None] * stride_l2a + cols[None, :], q, mask=rows_ok[:, None])
    # This tile's 32-column groups: byte (group % 4) of the row's scale word (group / 4).
    group = tile_n * (BN // 64) + tl.arange(0, BN // 64)
    dst = l2a_sf_ptr + (group // 4)[None, :] * stride_l2a_sf + rows64[:, None] * 4 + (group % 4)[None, :]
    tl.store(dst, exponent.to(tl.uint8), mask=rows_ok[:, None])


@triton.jit(do_not_specialize=["num_local", "inter", "hidden", "stride_asf_k", "stride_b_e", "stride_bsf_e",
                               "num_tokens_cap", "dense_rows"],
            do_not_specialize_on_alignment=["a_ptr", "a_sf_ptr", "b_ptr", "b_sf_ptr", "tile_end_ptr", "ends_ptr",
                                            "row_src_ptr", "combine_ptr"])
def _fp8_fp4_l2_kernel(a_ptr,        # (rows, I) uint8: FP8 E4M3 bits of the intermediate
                       a_sf_ptr,     # int32 MN-major packed UE8M0 per 32: word (row, k / 128) at row + word * stride
                       b_ptr,        # (E, hidden, I or I / 2) uint8: FP8 or packed FP4
                       b_sf_ptr,     # (E, hidden, I / 128) int32, UTCCP row order
                       tile_end_ptr, ends_ptr, row_src_ptr,
                       combine_ptr,  # bf16 (k, T, hidden) combine area (DENSE: (dense_rows, hidden))
                       num_local, inter, hidden, stride_asf_k, stride_b_e, stride_bsf_e, num_tokens_cap, dense_rows,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                       NUM_TOPK: tl.constexpr, B_FP4: tl.constexpr, NUM_STAGES: tl.constexpr, DENSE: tl.constexpr):
    n0 = tl.program_id(0) * BN
    exists, row0, rows, row_end, b_ptr, b_sf_ptr = _tile_rows(tile_end_ptr, ends_ptr, num_local, dense_rows, b_ptr,
                                                              b_sf_ptr, stride_b_e, stride_bsf_e, BM, E_POW2, DENSE)
    if not exists:
        return
    acc = _mx_acc(a_ptr, a_sf_ptr, row0, rows < row_end, 1, stride_asf_k, b_ptr, b_sf_ptr, n0, inter, BM, BN, BK,
                  B_FP4, NUM_STAGES)
    if DENSE:
        dst = combine_ptr + (rows.to(tl.int64) * hidden)[:, None] + (n0 + tl.arange(0, BN))[None, :]
        tl.store(dst, acc.to(tl.bfloat16), mask=(rows < row_end)[:, None])
    else:
        _store_to_combine(acc, rows, row_end, row_src_ptr, combine_ptr, n0, hidden, num_tokens_cap, BN, NUM_TOPK)
