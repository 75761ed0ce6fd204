"""Helpers every indexer kernel shares (the dense and paged MQA logits, and the block-sparse ones of
``attention/sparse``): FP4 unpacking, UE8M0 scaling, FP8 / FP4 row loads, the head-weighted score reduction and the
non-coherent (read-only path) loads."""

import triton
import triton.language as tl

# Tokens of the paged schedule's KV splits (DeepGEMM's SPLIT_KV): the metadata counts work in these.
SPLIT_KV = tl.constexpr(256)
# UE8M0 scale granularity of FP4 operands, and of the sparse indexer's FP8 ones (values per exponent byte).
FP4_GROUP = tl.constexpr(32)


@triton.jit
def _e2m1_to_f32(codes):
    """int32 E2M1 codes (0..15) -> FP32: exponent e (bias 1), mantissa m give (1 + m/2) * 2^(e-1); e == 0 gives
    m / 2; bit 3 is the sign. Built from FP32 bit fields (no lookup table)."""
    exponent = (codes >> 1) & 3
    mantissa = codes & 1
    normal = (((exponent + 126) << 23) | (mantissa << 22)).to(tl.float32, bitcast=True)
    value = tl.where(exponent == 0, mantissa.to(tl.float32) * 0.5, normal)
    return tl.where((codes & 8) != 0, -value, value)


@triton.jit
def _unpack_fp4(packed, sf, ROWS: tl.constexpr, D: tl.constexpr):
    """Packed E2M1 bytes [ROWS, D/2] (int8) and packed UE8M0 scales [ROWS] (int32) -> FP32 values [ROWS, D]."""
    codes = packed.to(tl.int32) & 0xFF
    low = _e2m1_to_f32(codes & 0xF)
    high = _e2m1_to_f32(codes >> 4)
    values = tl.reshape(tl.join(low, high), [ROWS, D])  # element 2j from the low nibble of byte j
    return _apply_ue8m0(values, sf, D)


@triton.jit
def _apply_ue8m0(values, sf, D: tl.constexpr):
    """FP32 values [ROWS, D] times their UE8M0 scales, packed int32 words [ROWS] (byte g scales elements
    32g .. 32g + 31): 2^(byte - 127) built from its FP32 bit fields (byte 0 gives 0), so the product is exact."""
    group = tl.arange(0, D) // FP4_GROUP
    exponent = (sf[:, None] >> (group[None, :] * 8)) & 0xFF
    return values * (exponent << 23).to(tl.float32, bitcast=True)


@triton.jit
def _load_fp4_rows(q_ptr, q_sf_ptr, q_rows, col_ok, BN: tl.constexpr, D: tl.constexpr, FP4_DOT_BF16: tl.constexpr):
    """The [BN, D] query tile of packed FP4 rows q_rows (rows where not col_ok read as zeros), unpacked with their
    scales; BF16 when FP4_DOT_BF16 (the dot's operand type), else FP32."""
    packed = tl.load(q_ptr + q_rows[:, None] * (D // 2) + tl.arange(0, D // 2)[None, :], mask=col_ok[:, None], other=0)
    q_sf = tl.load(q_sf_ptr + q_rows, mask=col_ok, other=0)
    q_tile = _unpack_fp4(packed, q_sf, BN, D)
    if FP4_DOT_BF16:
        q_tile = q_tile.to(tl.bfloat16)
    return q_tile


@triton.jit
def _load_fp8_rows(ptr, rows, ok, D: tl.constexpr, ALIGN: tl.constexpr):
    """Rows ``rows`` (int64 [R]) of a row-major FP8 [*, D] tensor as [R, D], zero where not ``ok``. ALIGN: a byte
    multiple every row's address is known to have (the launcher checks it). Unknown (1), each thread loads one byte
    per instruction into a register of its own; 16 lets it load 16 bytes at once (sm_90a, a 128 x 128 Q tile at 4
    warps: 8 loads instead of 128, and no longer the persistent paged kernel's register peak)."""
    ptrs = ptr + rows[:, None] * D + tl.arange(0, D)[None, :]
    if ALIGN > 1:
        ptrs = tl.multiple_of(ptrs, [1, ALIGN])
    return tl.load(ptrs, mask=ok[:, None], other=0.0)


@triton.jit
def _row_logits(kv, q_t, weights):
    """One query row against a page: [BLOCK_KV, D] keys, [D, H] queries, [H] weights -> [BLOCK_KV]:
    sum_h weights[h] * relu(kv . q_t[:, h]) (the key scale not applied)."""
    return tl.sum(tl.maximum(tl.dot(kv, q_t), 0.0) * weights[None, :], axis=1)


@triton.jit
def _head_weighted_sum(scores, weights, BLOCK_KV: tl.constexpr, ROWS: tl.constexpr, H: tl.constexpr,
                       FMA_RELU: tl.constexpr = False):
    """[BLOCK_KV, ROWS * H] scores -> [BLOCK_KV, ROWS]: sum_h weights[r, h] * relu(scores[:, r * H + h]).
    FMA_RELU: the caller passes halved weights and the relu runs on the FMA pipe as (s + |s|) * (w / 2), the same
    products as max(s, 0) * w (s + |s| is 2s or 0 exactly)."""
    if FMA_RELU:
        weighted = (scores + tl.abs(scores)) * weights[None, :]
    else:
        weighted = tl.maximum(scores, 0.0) * weights[None, :]
    return tl.sum(tl.reshape(weighted, [BLOCK_KV, ROWS, H]), axis=2)


@triton.jit
def _load_f32_nc(ptrs, PTX: tl.constexpr):
    """FP32 loads that Triton's pipeliner leaves alone: inline ``ld.global.nc`` (read-only path), so a loop can carry
    them in registers. The interpreter runs no PTX (PTX=False): a plain ``tl.load`` there, the same values."""
    if PTX:
        return tl.inline_asm_elementwise("ld.global.nc.f32 $0, [$1];", "=r,l", [ptrs], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.load(ptrs)


@triton.jit
def _load_i32_nc(ptr, PTX: tl.constexpr):
    """One int32 (a scalar address) through inline ``ld.global.nc``, as ``_load_f32_nc``: the pipeliner leaves it."""
    if PTX:
        return tl.inline_asm_elementwise("ld.global.nc.s32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=True,
                                         pack=1)
    else:
        return tl.load(ptr)
