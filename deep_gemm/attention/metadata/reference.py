"""Reference of ``get_mqa_logits_metadata`` (DeepGEMM's ``sm100_mqa_logits_metadata`` on the device, no host sync).

int32 words: ``[0, 2S)`` each SM's start ``(q_block, split_offset)``; ``[2S, 3S)`` each SM's split count; padding
to an even word; then per Q block its KV span ``(kv_token_base, num_kv_splits)``: the rows' ``[ks, ke)`` clipped to
``num_kv_tokens``, the base rounded down to 4 tokens, splits of ``SPLIT_KV``. Q block b costs ``SPLIT_COST`` per
split plus ``SEGMENT_COST`` when it has any; the total cost is cut into S nearly equal parts (the first
``cost % S`` one unit larger) and each cut is located in the prefix sums."""

from __future__ import annotations

import torch

from .plan import SEGMENT_COST, SPLIT_COST, SPLIT_KV, block_q, schedule_sms, span_word_offset


def new_mqa_logits_metadata(num_q_tokens: int, num_heads: int, device) -> torch.Tensor:
    from .plan import metadata_words
    return torch.empty(metadata_words(num_q_tokens, num_heads, schedule_sms()), dtype=torch.int32, device=device)


def get_mqa_logits_metadata_reference(cu_seq_len_k_start, cu_seq_len_k_end, num_kv_tokens, num_heads):
    num_sms = schedule_sms()
    bq = block_q(num_heads)
    num_q = cu_seq_len_k_start.size(0)
    device = cu_seq_len_k_start.device
    blocks = -(-num_q // bq)
    out = torch.zeros(span_word_offset(num_sms) + 2 * blocks, dtype=torch.int64, device=device)
    if blocks == 0:
        return out.to(torch.int32)
    rows = (torch.arange(blocks, device=device)[:, None] * bq + torch.arange(bq, device=device)).clamp(max=num_q - 1)
    ks = cu_seq_len_k_start.long().clamp(min=0, max=num_kv_tokens)[rows]
    ke = cu_seq_len_k_end.long().clamp(min=0, max=num_kv_tokens)[rows]
    start, end = ks.amin(dim=1), ke.amax(dim=1)
    base = start // 4 * 4
    splits = ((end - base).clamp(min=0) + SPLIT_KV - 1) // SPLIT_KV
    work = torch.cumsum(splits, 0)
    cost = torch.cumsum(splits * SPLIT_COST + (splits > 0).long() * SEGMENT_COST, 0)
    total_work, total_cost = work[-1], cost[-1]

    def locate(index: torch.Tensor):
        target = index * (total_cost // num_sms) + torch.minimum(index, total_cost % num_sms)
        block = torch.searchsorted(cost, target, right=True).clamp(max=blocks - 1)
        cost_before = torch.where(block > 0, cost[(block - 1).clamp(min=0)], 0)
        work_before = torch.where(block > 0, work[(block - 1).clamp(min=0)], 0)
        offset = torch.minimum((torch.clamp(target - cost_before, min=SEGMENT_COST) - SEGMENT_COST) // SPLIT_COST,
                               work[block] - work_before - 1)
        tail = target == total_cost  # one past the end
        return (torch.where(tail, blocks, block), torch.where(tail, 0, offset),
                torch.where(tail, total_work, work_before + offset))

    sm = torch.arange(num_sms, device=device)
    begin_block, begin_offset, begin_coord = locate(sm)
    _, _, end_coord = locate(sm + 1)
    out[0:2 * num_sms:2] = begin_block
    out[1:2 * num_sms:2] = begin_offset
    out[2 * num_sms:3 * num_sms] = end_coord - begin_coord
    first = span_word_offset(num_sms)
    out[first::2] = base
    out[first + 1::2] = splits
    return out.to(torch.int32)
