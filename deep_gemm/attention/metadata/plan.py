"""Tile constants of the schedule. DeepGEMM's headers give the schedule's layout and algorithm
(``scheduler/sm100_mqa_logits_metadata.cuh``); its host picks the constants, and that code is not in the shipped
build, so these are stated here: one UMMA N of 128 rows of (query, head) per Q block, 256-token KV splits, and a
segment (a Q block's first split) costing as much as one split."""

from __future__ import annotations

from ...core.runtime import get_num_sms

UMMA_ROWS = 128
SPLIT_KV = 256
SEGMENT_COST, SPLIT_COST = 1, 1
# Without a GPU (get_num_sms() == 0) the schedule is built for a B200 (148 SMs), the SM100 part.
DEFAULT_SM100_SMS = 148


def block_q(num_heads: int) -> int:
    return max(1, UMMA_ROWS // num_heads)


def schedule_sms() -> int:
    return get_num_sms() or DEFAULT_SM100_SMS


def span_word_offset(num_sms: int) -> int:
    return (3 * num_sms + 1) // 2 * 2


def metadata_words(num_q_tokens: int, num_heads: int, num_sms: int) -> int:
    return span_word_offset(num_sms) + 2 * (-(-num_q_tokens // block_q(num_heads)))
