"""Device code of the block-sparse MQA indexer (DeepSeek V4): the metadata kernel and the logits kernel, contiguous
and paged. No allocation and no config logic here (``launch.py`` does that; ``plan.py`` decides).

Maths. Column ``j * SBK + t`` of logits row i is ``sum_h relu(q[i, h] . k[start_j + t]) * w[i, h]``, q and k being
FP8 E4M3 or packed E2M1 values times one UE8M0 power of two per 32 elements. Both are dequantised in registers and
the dot runs on BF16 operands with FP32 accumulation: an E4M3 or E2M1 value has at most 4 significant bits and a
power-of-two scale only moves its exponent, so the BF16 operands are the exact scaled values (for magnitudes in
BF16's normal range) and only the FP32 accumulation and the final BF16 rounding differ from the FP64 reference.

Tiling. Logits program (i, c) owns query row i and its slots [c * STEPS * BLOCKS, (c + 1) * STEPS * BLOCKS): the
row's [H, D] query tile is dequantised once, then each of its STEPS steps gathers BLOCKS selected blocks (BT =
BLOCKS * SBK tokens, each block's start token read from the metadata) and takes ``dot(k [BT, D], q^T [D, H])``:
keys on the MMA's M side, heads on N, so the head reduction stays inside a warp (``common._row_logits``). Unused
slots and tokens past the KV's end are -inf. Metadata program (i, c) writes row i's start tokens of slots
[c * BLOCK, (c + 1) * BLOCK) (program (i, 0) also the row's block count, program (0, 0) the header). Each output
word or element is written by exactly one program, without atomics: results are bitwise the same call to call.
"""

import triton
import triton.language as tl

from ..kernels.common import _apply_ue8m0, _row_logits, _unpack_fp4  # noqa: F401  (kernel globals)
from . import checks

# int32 words before the first row of the metadata: (paged, use_unaligned_ks, sparse_block_kv, num_max).
HEADER_WORDS = tl.constexpr(checks.HEADER_WORDS)
# Byte multiple of every value row's address (q, kv, each page's tokens): one 16-byte load per thread and row chunk.
ROW_ALIGN = tl.constexpr(checks.ROW_ALIGN)


@triton.jit
def _floor_mod(x, m):
    """Python's (and torch's) ``x % m`` for m > 0, whatever the sign convention of the integer remainder."""
    r = x % m
    return tl.where(r < 0, r + m, r)


@triton.jit(do_not_specialize=["num_q", "num_max", "num_kv", "page_kv", "table_cols", "stride_bt"],
            do_not_specialize_on_alignment=["first_ptr", "end_ptr", "bt_ptr", "idx_ptr", "out_ptr"])
def _sparse_mqa_metadata_kernel(
        first_ptr,  # int32 [num_q]: cu_seq_len_k_start (contiguous) or context_lens (paged)
        end_ptr,  # int32 [num_q]: cu_seq_len_k_end (contiguous; unused when PAGED)
        bt_ptr,  # int32 [num_q, table_cols] block table, row stride stride_bt (paged only)
        idx_ptr,  # int32 [num_q, num_max] selected block indices, contiguous
        out_ptr,  # int32 [HEADER_WORDS + num_q * (1 + num_max)]: the metadata's words
        num_q, num_max, num_kv, page_kv, table_cols, stride_bt,
        SBK: tl.constexpr, PAGED: tl.constexpr, UNALIGNED: tl.constexpr, BLOCK: tl.constexpr):
    """Row i: n = min(num_max, ceil(len_i / SBK)) blocks (len_i: the clipped [ks, ke) range, or the context length),
    then one start token per slot (-1 past n). Integer maths in 64 bits as the reference's, the start tokens
    truncated to 32 bits as its int32 cast does."""
    i = tl.program_id(0)
    c = tl.program_id(1)
    if i == 0:
        if c == 0:
            h = tl.arange(0, HEADER_WORDS)
            header = tl.where(h == 0, 1 if PAGED else 0,
                              tl.where(h == 1, 1 if UNALIGNED else 0, tl.where(h == 2, SBK, num_max)))
            tl.store(out_ptr + h, header.to(tl.int32))
    if i < num_q:
        row_out = out_ptr + HEADER_WORDS + i.to(tl.int64) * (1 + num_max)
        first = tl.load(first_ptr + i).to(tl.int64)
        if PAGED:
            length = tl.maximum(first, 0)
            phase = 0
        else:
            begin = tl.minimum(tl.maximum(first, 0), num_kv)
            end = tl.maximum(begin, tl.minimum(tl.load(end_ptr + i).to(tl.int64), num_kv))
            length = end - begin
            phase = _floor_mod(first, SBK) if UNALIGNED else 0
        count = tl.minimum((length + SBK - 1) // SBK, num_max)
        if c == 0:
            tl.store(row_out, count.to(tl.int32))
        slots = c * BLOCK + tl.arange(0, BLOCK)
        in_row = slots < num_max
        idx = tl.load(idx_ptr + i.to(tl.int64) * num_max + slots, mask=in_row, other=0).to(tl.int64)
        if PAGED:
            blocks_per_page = page_kv // SBK
            within = _floor_mod(idx, blocks_per_page)
            page = tl.minimum(tl.maximum((idx - within) // blocks_per_page, 0), table_cols - 1)
            physical = tl.load(bt_ptr + i.to(tl.int64) * stride_bt + page, mask=in_row, other=0).to(tl.int64)
            start = physical * page_kv + within * SBK
        else:
            start = idx * SBK + phase
        start = tl.where(slots < count, start, -1)
        tl.store(row_out + 1 + slots, start.to(tl.int32), mask=in_row)


@triton.jit
def _dequantised_rows(values_ptr, sf_ptr, value_at, sf_at, ok, ROWS: tl.constexpr, D: tl.constexpr,
                      IS_FP4: tl.constexpr, DOT_BF16: tl.constexpr):
    """[ROWS, D] scaled values of rows whose values start at element ``value_at`` of ``values_ptr`` (FP8, or int8
    holding D / 2 packed E2M1 bytes) and whose UE8M0 word is element ``sf_at`` of ``sf_ptr`` (int32); zero where not
    ``ok``. BF16 when DOT_BF16 (the dot's operand type: exact, see the module docstring), else FP32. Every row's
    address is a multiple of ROW_ALIGN bytes (the launcher checks the base; rows are 64 or 128 bytes wide, pages
    512-byte multiples): a thread then loads 16 bytes per instruction instead of one (byte-wise loads of a
    [64, 128] tile hold 128 pointers per thread and spill in the paged kernel)."""
    sf = tl.load(sf_ptr + sf_at, mask=ok, other=0)
    WIDTH: tl.constexpr = D // 2 if IS_FP4 else D
    ptrs = values_ptr + value_at[:, None] + tl.arange(0, WIDTH)[None, :]
    ptrs = tl.multiple_of(ptrs, [1, ROW_ALIGN])
    if IS_FP4:
        rows = _unpack_fp4(tl.load(ptrs, mask=ok[:, None], other=0), sf, ROWS, D)
    else:
        rows = _apply_ue8m0(tl.load(ptrs, mask=ok[:, None], other=0.0).to(tl.float32), sf, D)
    if DOT_BF16:
        rows = rows.to(tl.bfloat16)
    return rows


@triton.jit(do_not_specialize=["num_max", "num_tokens", "page_kv", "stride_page", "stride_w", "stride_out"],
            do_not_specialize_on_alignment=["q_ptr", "q_sf_ptr", "kv_ptr", "kv_sf_ptr", "w_ptr", "meta_ptr",
                                            "out_ptr"])
def _fp8_fp4_sparse_mqa_logits_kernel(
        q_ptr,  # [num_q, H, D] FP8, or [num_q, H, D / 2] int8 (packed E2M1)
        q_sf_ptr,  # int32 [num_q, H]: four UE8M0 bytes per head
        kv_ptr,  # keys: contiguous [num_tokens, D] (FP8) / [num_tokens, D / 2] (int8); paged: the cache's bytes
                 # typed so, token t of page p at element p * stride_page + t * value_bytes
        kv_sf_ptr,  # int32: contiguous [num_tokens]; paged: the cache's words, token t of page p at word
                    # (p * stride_page + page_kv * value_bytes) / 4 + t
        w_ptr,  # BF16 [num_q, H], row stride stride_w
        meta_ptr,  # int32 metadata words (reference.py): row i's slot starts from HEADER_WORDS + i * (1 + num_max) + 1
        out_ptr,  # BF16 [num_q, num_max * SBK], row stride stride_out
        num_max, num_tokens, page_kv, stride_page, stride_w, stride_out,
        H: tl.constexpr, D: tl.constexpr, SBK: tl.constexpr, BLOCKS: tl.constexpr, STEPS: tl.constexpr,
        PAGED: tl.constexpr, IS_FP4: tl.constexpr, DOT_BF16: tl.constexpr):
    """Program (i, c): row i, slots [c * STEPS * BLOCKS, (c + 1) * STEPS * BLOCKS) (see the module docstring).
    Token t of a slot with start s is s + t, valid when s >= 0 and s + t < num_tokens (both int32: the metadata's
    starts are; paged caches hold fewer than 2^31 tokens)."""
    BT: tl.constexpr = BLOCKS * SBK
    VALUE_ELEMS: tl.constexpr = D // 2 if IS_FP4 else D  # elements (bytes) of one row of values
    i = tl.program_id(0).to(tl.int64)
    slot_begin = tl.program_id(1) * (STEPS * BLOCKS)
    slot_end = tl.minimum(slot_begin + STEPS * BLOCKS, num_max)

    heads = tl.arange(0, H)
    q_rows = i * H + heads
    q_t = tl.trans(_dequantised_rows(q_ptr, q_sf_ptr, q_rows * VALUE_ELEMS, q_rows, heads < H, H, D, IS_FP4,
                                     DOT_BF16))
    weights = tl.load(w_ptr + i * stride_w + heads).to(tl.float32)
    starts_row = meta_ptr + HEADER_WORDS + i * (1 + num_max) + 1
    out_row = out_ptr + i * stride_out
    offset = tl.arange(0, BT) % SBK
    for s0 in range(slot_begin, slot_end, BLOCKS):
        slots = s0 + tl.arange(0, BT) // SBK
        in_row = slots < num_max
        start = tl.load(starts_row + slots, mask=in_row, other=-1)
        ok = (start >= 0) & (start < num_tokens - offset)  # (start + offset < num_tokens, without overflow)
        token = tl.where(ok, start + offset, 0)
        if PAGED:
            page = token // page_kv
            within = token - page * page_kv
            page_at = page.to(tl.int64) * stride_page
            value_at = page_at + within * VALUE_ELEMS
            sf_at = (page_at + page_kv * VALUE_ELEMS) // 4 + within
        else:
            value_at = token.to(tl.int64) * VALUE_ELEMS
            sf_at = token
        kv = _dequantised_rows(kv_ptr, kv_sf_ptr, value_at, sf_at, ok, BT, D, IS_FP4, DOT_BF16)
        logits = tl.where(ok, _row_logits(kv, q_t, weights), float("-inf"))
        tl.store(out_row + slots * SBK + offset, logits.to(out_ptr.dtype.element_ty), mask=in_row)
