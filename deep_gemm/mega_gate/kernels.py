"""Routing kernel of ``bf16_mega_gate`` (tl.*): everything after the gate GEMM; maths in ``reference.py``, sizes in
``plan.py``.

``_gate_route_kernel``: program p owns tokens [p BT, +BT) and holds their FP32 logits as a [BT, BE] register tile
(BE = next_pow2(E), padded columns never selectable). Scores (FP32), then the rank keys (score + the token's bias, or
the raw logit without a bias), then K rounds of selection: the largest key still free, ties to the lowest column
(two row reductions: max, then min of the columns holding it), its unbiased score picked out by a masked row sum.
Fixed-routing tokens take their K columns from ``unmapped_topk_idx`` instead. The K scores over their sum (+1e-20)
times ``routed_scaling_factor`` are the routed weights; slots K .. K + S - 1 are the shared experts (weight 1). The
[BT, BK] slot tile (BK = next_pow2(K + S)) then goes through the EP map, the force_random draw (DeepGEMM's 32-bit
hash in uint32 arithmetic, which wraps like the reference's masked int64), and the token mask, in the reference's
order of precedence, and is stored with the unmapped routed columns. Rows and slots past T and K + S are masked.
"""

import triton
import triton.language as tl

# scoring_func codes (launch.SCORING_CODES)
IDENTITY = tl.constexpr(0)
SIGMOID = tl.constexpr(1)
SQRTSOFTPLUS = tl.constexpr(2)
# sqrtsoftplus takes sqrt(v) above this logit (softplus(v) == v to FP32 there)
_SOFTPLUS_LINEAR_FROM = tl.constexpr(20.0)
# The routed weights' denominator guard (the reference's + 1e-20).
_SUM_EPSILON = tl.constexpr(1e-20)
# EP replica choice: (ep_rank + 23333 t) mod 2^32 mod count.
_REPLICA_STRIDE = tl.constexpr(23333)
# DeepGEMM's hash: multipliers and the seed mixers of the token, the slot and the weight draw.
_HASH_MUL_1 = tl.constexpr(0x7FEB352D)
_HASH_MUL_2 = tl.constexpr(0x846CA68B)
_TOKEN_MIX = tl.constexpr(0x9E3779B9)
_SLOT_MIX = tl.constexpr(0x85EBCA6B)
_WEIGHT_MIX = tl.constexpr(0xC2B2AE35)
# A hashed uniform in (0, 1]: 23 hash bits as the mantissa of a float in [1, 2), minus 1, plus 2^-24.
_ONE_BITS = tl.constexpr(0x3F800000)
_MANTISSA_SHIFT = tl.constexpr(9)
_HALF_ULP = tl.constexpr(2.0 ** -24)
_INT64_MAX = tl.constexpr(0x7FFFFFFFFFFFFFFF)


@triton.jit
def _u32(value, like):
    """``value`` as a uint32 tensor of ``like``'s shape (so every product below is a wrapping uint32 product)."""
    return tl.full(like.shape, value, tl.uint32)


@triton.jit
def _hash(v):
    """DeepGEMM's 32-bit integer hash of a uint32 tensor."""
    v = v ^ (v >> 16)
    v = v * _u32(_HASH_MUL_1, v)
    v = v ^ (v >> 15)
    v = v * _u32(_HASH_MUL_2, v)
    return v ^ (v >> 16)


@triton.jit
def _score(v, SCORING: tl.constexpr):
    if SCORING == SIGMOID:
        return 1.0 / (1.0 + tl.exp(-v))
    elif SCORING == SQRTSOFTPLUS:
        # log1p(e) without a log1p: log(w) * e / (w - 1) with w = 1 + e rounded cancels w's rounding error (exact
        # to a few ulps where w rounds to 1 or near it), e itself where w == 1.
        e = tl.exp(v)
        w = 1.0 + e
        soft = tl.where(w == 1.0, e, tl.log(w) * (e / (w - 1.0)))
        return tl.sqrt(tl.where(v > _SOFTPLUS_LINEAR_FROM, v, soft))
    else:
        return v


@triton.jit(do_not_specialize=["T", "E", "K", "S", "D", "ep_rank", "unmapped_stride"],
            do_not_specialize_on_alignment=["logits_ptr", "bias_ptr", "image_bias_ptr", "image_mask_ptr", "mask_ptr",
                                            "fix_mask_ptr", "unmapped_ptr", "map_ptr", "count_ptr", "random_ptr",
                                            "idx_ptr", "w_ptr", "out_idx_ptr", "out_w_ptr"])
def _gate_route_kernel(
        logits_ptr,  # (T, E) fp32
        bias_ptr,  # (E,) fp32 (HAS_BIAS)
        image_bias_ptr,  # (E,) fp32 (HAS_IMAGE)
        image_mask_ptr,  # (T,) uint8 (HAS_IMAGE)
        mask_ptr,  # (T,) uint8 (HAS_MASK)
        fix_mask_ptr,  # (T,) uint8 (HAS_FIX)
        unmapped_ptr,  # (T, K) int64, row stride unmapped_stride: read (HAS_FIX) and written (HAS_UNMAPPED)
        map_ptr,  # (E + S, D) int32 (HAS_MAP)
        count_ptr,  # (E + S,) int32 (HAS_MAP)
        random_ptr,  # (T,) uint8 (HAS_RANDOM)
        idx_ptr,  # (T, K + S) int64, written
        w_ptr,  # (T, K + S) fp32, written
        out_idx_ptr,  # (T, K + S) int64, written too (HAS_OUT)
        out_w_ptr,  # (T, K + S) fp32, written too (HAS_OUT)
        T, E, K, S, D, ep_rank, unmapped_stride,
        scale,  # routed_scaling_factor (fp32)
        BT: tl.constexpr, BE: tl.constexpr, BK: tl.constexpr, BC: tl.constexpr, SCORING: tl.constexpr,
        HAS_BIAS: tl.constexpr, HAS_IMAGE: tl.constexpr, HAS_MASK: tl.constexpr, HAS_FIX: tl.constexpr,
        HAS_UNMAPPED: tl.constexpr, HAS_MAP: tl.constexpr, HAS_RANDOM: tl.constexpr, HAS_OUT: tl.constexpr):
    rows = tl.program_id(0) * BT + tl.arange(0, BT)
    row_ok = rows < T
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, BE)
    col_ok = cols < E
    tile_ok = row_ok[:, None] & col_ok[None, :]
    logits = tl.load(logits_ptr + rows64[:, None] * E + cols[None, :], mask=tile_ok, other=0.0)
    scored = _score(logits, SCORING)
    if HAS_BIAS or HAS_IMAGE:
        if HAS_BIAS:
            bias = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :]
        else:
            bias = tl.zeros([1, BE], tl.float32)
        if HAS_IMAGE:
            image = tl.load(image_mask_ptr + rows, mask=row_ok, other=0) != 0
            image_bias = tl.load(image_bias_ptr + cols, mask=col_ok, other=0.0)[None, :]
            keys = scored + tl.where(image[:, None], image_bias, bias)
        else:
            keys = scored + bias
    else:
        keys = logits  # (scoring is monotonic: the raw logits rank alike)

    slots = tl.arange(0, BK)
    routed = slots < K
    if HAS_FIX:
        fixed_row = tl.load(fix_mask_ptr + rows, mask=row_ok, other=0) != 0
        fixed = tl.load(unmapped_ptr + rows64[:, None] * unmapped_stride + slots[None, :],
                        mask=(row_ok & fixed_row)[:, None] & routed[None, :], other=0)
        fixed = tl.minimum(tl.maximum(fixed, 0), E - 1).to(tl.int32)
    free = tile_ok
    picked = tl.zeros([BT, BK], tl.int32)
    picked_score = tl.zeros([BT, BK], tl.float32)
    for k in range(K):
        live = tl.where(free, keys, float("-inf"))
        top = tl.max(live, axis=1)
        pick = tl.min(tl.where(free & (live == top[:, None]), cols[None, :], BE), axis=1)
        if HAS_FIX:
            pick = tl.where(fixed_row, tl.sum(tl.where(slots[None, :] == k, fixed, 0), axis=1), pick)
        chosen = cols[None, :] == pick[:, None]
        free = free & ~chosen
        s = tl.sum(tl.where(chosen, scored, 0.0), axis=1)
        slot_k = slots[None, :] == k
        picked = tl.where(slot_k, pick[:, None], picked)
        picked_score = tl.where(slot_k, s[:, None], picked_score)
    total = tl.sum(picked_score, axis=1)   # (slots past K hold 0)
    weights = picked_score / (total[:, None] + _SUM_EPSILON) * scale
    num_slots = K + S
    slot_ok = slots < num_slots
    logical = tl.where(routed[None, :], picked, E + slots[None, :] - K).to(tl.int64)
    weights = tl.where(routed[None, :], weights, 1.0)
    out_ok = row_ok[:, None] & slot_ok[None, :]
    if HAS_MAP:
        count = tl.load(count_ptr + logical, mask=out_ok, other=1)
        turn = (ep_rank.to(tl.int64) + rows64 * _REPLICA_STRIDE).to(tl.uint32)
        replica = turn[:, None] % tl.maximum(count, 1).to(tl.uint32)
        physical = tl.load(map_ptr + logical * D + replica.to(tl.int64), mask=out_ok, other=0).to(tl.int64)
    else:
        physical = logical
    unmapped = picked.to(tl.int64)
    if HAS_RANDOM:
        rand_row = tl.load(random_ptr + rows, mask=row_ok, other=0) != 0
        if HAS_MAP:
            entries = tl.arange(0, BC)
            n_physical = tl.sum(tl.load(count_ptr + entries, mask=entries < E + S, other=0).to(tl.int64), axis=0)
        else:
            n_physical = (E + S).to(tl.int64)
        lane = slots[None, :].to(tl.uint32)
        token = rows[:, None].to(tl.uint32)
        seed = _hash(ep_rank.to(tl.int64).to(tl.uint32) ^ (token * _u32(_TOKEN_MIX, token))
                     ^ (lane * _u32(_SLOT_MIX, lane)))
        bits = _u32(_ONE_BITS, seed) | (_hash(seed ^ _u32(_WEIGHT_MIX, seed)) >> _MANTISSA_SHIFT)
        rand_w = bits.to(tl.float32, bitcast=True) - 1.0 + _HALF_ULP
        lane64 = slots[None, :].to(tl.int64)
        candidate = _hash(seed).to(tl.int64) % (n_physical - lane64)
        # Distinct draws: each round the lowest candidate among the lanes still open (first such lane) is taken,
        # and the open lanes after it holding a candidate >= it step up by one.
        taken = tl.where(slot_ok[None, :], tl.full([BT, BK], -1, tl.int64), 0)
        for _ in range(num_slots):
            open_lane = taken < 0
            values = tl.where(open_lane, candidate, _INT64_MAX)
            low = tl.min(values, axis=1)
            low_lane = tl.min(tl.where(values == low[:, None], lane64, BK), axis=1)
            taken = tl.where(open_lane & (lane64 == low_lane[:, None]), candidate, taken)
            bump = open_lane & (candidate >= low[:, None]) & (lane64 > low_lane[:, None])
            candidate = candidate + bump.to(tl.int64)
        physical = tl.where(rand_row[:, None], taken, physical)
        weights = tl.where(rand_row[:, None], rand_w, weights)
        unmapped = tl.where(rand_row[:, None], -1, unmapped)
    if HAS_MASK:
        keep = tl.load(mask_ptr + rows, mask=row_ok, other=0) != 0
        physical = tl.where(keep[:, None], physical, -1)
        weights = tl.where(keep[:, None], weights, 0.0)
        unmapped = tl.where(keep[:, None], unmapped, -1)
    out_offs = rows64[:, None] * num_slots + slots[None, :]
    tl.store(idx_ptr + out_offs, physical, mask=out_ok)
    tl.store(w_ptr + out_offs, weights, mask=out_ok)
    if HAS_OUT:
        tl.store(out_idx_ptr + out_offs, physical, mask=out_ok)
        tl.store(out_w_ptr + out_offs, weights, mask=out_ok)
    if HAS_UNMAPPED:
        tl.store(unmapped_ptr + rows64[:, None] * unmapped_stride + slots[None, :], unmapped,
                 mask=row_ok[:, None] & routed[None, :])
