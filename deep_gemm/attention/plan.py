"""The pure plans of the MQA-logits ops: the prefill kernel's tile (``prefill_config``) and KV split
(``prefill_kv_splits``), the paged kernel and its tile (``paged_default_config``), the clean pass's blocks, and
``AttentionOverrides``, the one way to force any of them. Nothing here reads a mutable global or launches anything:
``launch.py`` reads the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..utils.math import ceil_div
from ..utils.numeric import next_pow2
from .checks import MMA_TILE_ROWS

# Columns of a score tile: (query, head) pairs (DeepGEMM's BLOCK_Q * H = 128).
SCORE_COLS = MMA_TILE_ROWS
# The smallest N a tensor-core dot takes: with few heads and one query row per sequence, rows are padded to it.
MIN_DOT_N = 16
# TMA needs 16-byte aligned global addresses and strides.
TMA_ALIGN = 16
# Clean pass: columns per store step, warps, and how rows are cut into parts: parts of at least CLEAN_MIN_PART
# columns, enough of them for CLEAN_PROGRAMS_PER_SM programs per SM when rows are few. Whole blocks go out in
# 16-byte stores where the output's alignment allows: the out-of-window fill is store-bound, and wider stores double
# its rate (wider blocks and 8 warps were slower).
CLEAN_BLOCK = 1024
CLEAN_WARPS = 4
CLEAN_MIN_PART = 8192
CLEAN_PROGRAMS_PER_SM = 8
# Schedule kernel: sequences per step of its two passes, and the SM counts it covers (a [SMs, CHUNK] compare per
# step); larger num_sms values run the reference.
SCHEDULE_CHUNK = 16
SCHEDULE_MAX_SMS = 1024
# Paged kernel: tokens per program (the work of one program is these tokens of one sequence's rows); the grid's
# second axis counts these chunks, so it is widened when max_context_len would exceed the grid limit.
PAGED_TOKENS_PER_PROGRAM = 512
GRID_Y_LIMIT = 65535


@dataclass(frozen=True)
class PrefillConfig:
    """Tile of the prefill kernel: BLOCK_KV keys per step, warps, pipeline stages, and the (query, head) columns of
    a program (128: 128 / H queries, DeepGEMM's block; 256 halves the KV traffic through L2 per FLOP).

    Instruction levers (the kernel is issue-bound, see _fp8_mqa_logits_kernel): ``fma_relu`` moves the relu to the
    FMA pipe (same products), ``interior`` runs the blocks inside every window without per-key tests,
    ``max_registers`` caps ptxas (144 registers at 4 warps allow 3 programs per SM; 128 allow 4),
    ``lean_interior`` (with ``interior``) runs the interior loop with fewer registers live across it and the key
    scales prefetched into registers (kernels._prefill_interior; the same bits; False: the loop before it, kept for
    in-process A/B)."""

    block_kv: int = 64
    num_warps: int = 4
    num_stages: int = 4
    score_cols: int = SCORE_COLS
    fma_relu: bool = False
    interior: bool = False
    max_registers: int | None = None
    lean_interior: bool = True


@dataclass(frozen=True)
class PagedConfig:
    """The paged kernel and its tile. ``persistent=True`` (the default): ``programs_per_sm`` programs per row of the
    schedule (``schedule_meta``) walk its equal shares of the work, ``num_stages`` pipeline stages over pages
    (``tokens_per_program`` unused). ``persistent=False``: the grid kernel, one program per ``tokens_per_program``
    tokens of one sequence's rows, the schedule unused. Forced through ``AttentionOverrides.paged``, so one process
    can time both.

    Register levers of the persistent kernel (at 168 registers per thread only 3 programs of 4 warps fit an SM; the
    compiled counts, sm_90a, are in ``scripts/compile_check_indexer.py --only-persistent``):
    ``aligned_q_loads`` loads Q in 16-byte vectors when its address allows (the byte-wise load of the 128 x 128 Q
    tile was the kernel's register peak); ``row_dots`` runs one dot per query row of an FP8 two-row atom, so one
    row's scores are live at a time (<= 128 registers: 4 programs per SM); ``max_registers`` caps ptxas (spilling
    what does not fit); ``lean_page_loop`` keeps fewer registers live across the page loop (scales through a TMA
    descriptor of their own when the values have one, a 32-bit page index: the kernel's LEAN_LOOP), the same bits
    out; ``register_page_scales`` (FP8) loads each page's scales into registers one page ahead instead of through a
    shared-memory ring (the kernel's REG_SCALES), the same bits out. The defaults
    (``paged_default_config``) say which are on."""

    tokens_per_program: int = PAGED_TOKENS_PER_PROGRAM
    num_warps: int = 4
    num_stages: int = 5
    persistent: bool = True
    programs_per_sm: int = 4
    aligned_q_loads: bool = False
    row_dots: bool = False
    max_registers: int | None = None
    lean_page_loop: bool = False
    register_page_scales: bool = False


# Persistent kernel, FP8, H=64, D=128, block_kv=64, next_n >= 2 (atoms of 2 rows: a 128-column dot): a deeper ring
# (7 stages) keeps more pages in flight for the 128-column dots; with next_n=1 (64 columns) 5 stages stay ahead.
PAGED_ROW_PAIR_STAGES = 7
# The same shape's register cap, and 16-byte Q loads everywhere: capping ptxas at 128 registers fits 4 programs of 4
# warps per SM instead of 3 (a few bytes spilled outside the page loop), which pays more than the row-dot lever; the
# aligned Q load alone is never slower.
PAGED_ROW_PAIR_MAX_REGISTERS = 128
# Under that cap the plain page loop still spills inside the loop; the lean page loop compiles to no local memory at
# all under the same cap, with fewer instructions per page. Shapes whose loop does not spill keep the plain loop:
# there the scale barrier costs more instructions than the narrower page index saves. On top of the lean loop, the
# row pairs take their page scales in registers one page ahead (register_page_scales: fewer instructions per page,
# bit-equal, faster); with the scale ring gone, 6 stages are as fast as 7 (see docs/TUNING.md).

def paged_default_config(next_n: int, num_heads: int, head_dim: int, block_kv: int, is_fp4: bool) -> "PagedConfig":
    """The paged kernel's tile when the caller passes none (see PAGED_ROW_PAIR_STAGES and
    PAGED_ROW_PAIR_MAX_REGISTERS for the measurements)."""
    if next_n >= 2 and num_heads == 64 and head_dim == 128 and block_kv == 64 and not is_fp4:
        return PagedConfig(num_stages=PAGED_ROW_PAIR_STAGES, aligned_q_loads=True,
                           max_registers=PAGED_ROW_PAIR_MAX_REGISTERS, lean_page_loop=True,
                           register_page_scales=True)
    return PagedConfig(aligned_q_loads=True)


# The grid kernel's tile before the persistent kernel became the default (kept for comparison and as a fallback).
PAGED_GRID_CONFIG = PagedConfig(PAGED_TOKENS_PER_PROGRAM, 4, 3, persistent=False)
# Persistent kernel: tokens per store step of its clean pass; atoms per step of the walk that cuts a schedule
# entry into its lanes' parts.
PAGED_TAIL_BLOCK = 256
PAGED_ATOM_CHUNK = 64


# Prefill grid: programs per SM the KV split aims for (a few waves of ~3 resident programs, so the last wave's
# imbalance stays small), and the fewest keys a split keeps (its Q tile load is then < 2 % of its KV traffic).
PREFILL_PROGRAMS_PER_SM = 24
PREFILL_MIN_KEYS_PER_SPLIT = 1024


def prefill_kv_splits(num_q_blocks: int, seq_len_kv: int, num_sms: int,
                      min_keys: int = PREFILL_MIN_KEYS_PER_SPLIT) -> int:
    """Parts each query block's KV range is cut into: enough programs for PREFILL_PROGRAMS_PER_SM per SM when the
    query blocks alone are fewer, never parts shorter than ``min_keys`` keys of a full-width window."""
    want = ceil_div(PREFILL_PROGRAMS_PER_SM * max(num_sms, 1), max(num_q_blocks, 1))
    return max(1, min(want, seq_len_kv // min_keys, GRID_Y_LIMIT))


def prefill_config(num_heads: int, head_dim: int, is_fp4: bool) -> PrefillConfig:
    """Default prefill tile. 64 keys x 128 (query, head) columns per warpgroup keeps the FP32 scores at 32
    registers per thread and the shared memory per program small (Q 16 KiB + 4 x 8 KiB), so several programs share
    an SM and one's head reduction overlaps another's MMA (DeepGEMM gets that overlap from 4 math warpgroups)."""
    if is_fp4:  # unpacking costs registers: fewer stages
        return PrefillConfig(block_kv=64, num_warps=4, num_stages=2)
    if num_heads >= PREFILL_INTERIOR_MIN_HEADS:
        return PrefillConfig(interior=True, max_registers=PREFILL_MAX_REGISTERS)
    return PrefillConfig()


# FP8 prefill at H >= 32: the interior loop without per-key tests and a 128-register cap (4 programs of 4 warps per
# SM instead of 3; ptxas spills a few bytes, outside the loops' hot path): together they pay on every such shape,
# while the cap alone does not at H = 32 (see docs/TUNING.md).
PREFILL_INTERIOR_MIN_HEADS = 32
PREFILL_MAX_REGISTERS = 128


def paged_rows_per_program(next_n: int, num_heads: int) -> int:
    """Query rows of one sequence per program: all of them when they fit the 128 score columns (the pages are then
    read once per sequence), at least enough for a 16-column dot."""
    rows = min(next_pow2(next_n), SCORE_COLS // num_heads)
    return max(rows, ceil_div(MIN_DOT_N, num_heads))


@dataclass(frozen=True)
class AttentionOverrides:
    """Forced choices for sweeps and tests (None = the plan decides): the prefill kernel's tile (``prefill``), the
    paged kernel and its tile (``paged``), the fewest keys per KV split of the prefill grid (``min_keys_per_split``:
    PREFILL_MIN_KEYS_PER_SPLIT), and the clean pass's columns per store step and per part (``clean_block``,
    ``clean_min_part``: CLEAN_BLOCK, CLEAN_MIN_PART)."""

    prefill: PrefillConfig | None = None
    paged: PagedConfig | None = None
    min_keys_per_split: int | None = None
    clean_block: int | None = None
    clean_min_part: int | None = None


NO_OVERRIDES = AttentionOverrides()
