"""Tile constants of the schedule, and the plan of its Triton kernel. DeepGEMM's headers give the schedule's layout
and algorithm (``scheduler/sm100_mqa_logits_metadata.cuh``); its host picks the constants, and that code is not in
the shipped build, so these are stated here: one UMMA N of 128 rows of (query, head) per Q block, 256-token KV
splits, and a segment (a Q block's first split) costing as much as one split.

The kernel (``kernels.py``) runs one program per SM of the schedule, each walking every Q block twice in chunks of
``KERNEL_CHUNK`` blocks; ``MetadataOverrides`` is the one way to force its variant (and to ask for it while the
family is listed in ``core/gpu_validation.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ...core import gpu_validation
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


# Q blocks per step of the kernel's walks: a [CHUNK, BQ] load of the rows' ranges (BQ <= 16 rows), a scan and two
# [CHUNK] compares per step. 128 compiles without spills at 4 warps (sm_90a, Triton 3.6-3.9).
KERNEL_CHUNK = 128
KERNEL_WARPS = 4
FAMILY = "mqa_metadata"
# The kernel's maths is 32-bit: it runs where the schedule's total cost is bounded below this (the reference runs
# beyond, e.g. 2^20 query rows of 64 heads against a 2^20-token KV), and where row indices stay below 2^31 - BQ.
MAX_TOTAL_COST = 2**31 - 2
MAX_ROWS = 2**31 - 2 * UMMA_ROWS


def total_cost_bound(num_q_tokens: int, num_heads: int, num_kv_tokens: int) -> int:
    """An upper bound of the schedule's total cost: every Q block spanning the whole KV."""
    blocks = -(-num_q_tokens // block_q(num_heads))
    return blocks * (-(-num_kv_tokens // SPLIT_KV) * SPLIT_COST + SEGMENT_COST)


def kernel_fits(num_q_tokens: int, num_heads: int, num_kv_tokens: int) -> bool:
    """Whether the kernel's 32-bit maths equals the reference's 64-bit maths for these sizes."""
    return (num_q_tokens <= MAX_ROWS
            and total_cost_bound(num_q_tokens, num_heads, num_kv_tokens) <= MAX_TOTAL_COST)


@dataclass(frozen=True)
class MetadataOverrides:
    """``kernels`` runs the Triton kernel while the family is listed in ``core/gpu_validation.py``."""
    kernels: bool = False


NO_OVERRIDES = MetadataOverrides()


def kernels_wanted(overrides: MetadataOverrides) -> bool:
    return gpu_validation.kernels_wanted(FAMILY, overrides.kernels)
