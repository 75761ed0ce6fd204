"""THE plan of the block-sparse MQA ops (pure: sizes in, a frozen config out; ``launch.py`` only reads it).

The logits are a gather: each query row reads ``num_max_sparse_blocks * sparse_block_kv`` KV tokens of its own,
scattered over the KV (or the pages), and does 2 * heads FLOPs per byte read, so the op is bound by the gather's
memory traffic, not by the tensor cores. One program owns one query row and a run of its slots: its [heads, 128]
query tile is dequantised once and stays in registers while the program steps over ``TOKENS_PER_STEP`` tokens at
a time (one 64-row dot per step). More steps per program amortise the query tile; fewer give more programs to hide
the gather's latency. The plan takes the most steps (up to ``MAX_STEPS``) that still leave ``PROGRAMS_PER_SM``
programs per SM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...core import gpu_validation
from ...core.errors import require

# KV tokens per step of the logits kernel: the dot's M side, one 64-row wgmma at 4 warps (mma.sync below sm_90).
TOKENS_PER_STEP = 64
LOGITS_WARPS = 4
# Most steps per program: 8 x 64 = 512 tokens; the query tile (32 x 128 values) then costs an eighth of the keys'
# dequantisation (its load a sixteenth of their bytes).
MAX_STEPS = 8
# Programs per SM the step count aims for: with ~20 KB of registers and shared memory per program, 8 resident
# programs per SM keep enough gathers in flight.
PROGRAMS_PER_SM = 8
# Metadata kernel: slots per program (one row's slots in one or a few programs), warps.
METADATA_BLOCK = 256
METADATA_WARPS = 4
# Grid y dimension limit (slot runs per row; num_max_sparse_blocks <= 4096 keeps it far below).
GRID_Y_LIMIT = 65535


@dataclass(frozen=True)
class SparseConfig:
    """The logits kernel's tile: ``blocks_per_step`` selected blocks (``TOKENS_PER_STEP`` tokens) per dot,
    ``steps`` dots per program, ``num_warps``."""
    blocks_per_step: int
    steps: int
    num_warps: int = LOGITS_WARPS


@dataclass(frozen=True)
class SparseOverrides:
    """The only way to force a variant (tests, sweeps): ``steps`` per program (1 .. MAX_STEPS); ``kernels`` runs
    the Triton kernels while they await their GPU run (``core/gpu_validation.py``)."""
    steps: Optional[int] = None
    kernels: bool = False


NO_OVERRIDES = SparseOverrides()
FAMILY = "sparse_attention"


def kernels_wanted(overrides: SparseOverrides) -> bool:
    return gpu_validation.kernels_wanted(FAMILY, overrides.kernels)


def plan(num_q: int, num_max_sparse_blocks: int, sparse_block_kv: int, num_sms: int,
         overrides: SparseOverrides = NO_OVERRIDES) -> SparseConfig:
    """The logits kernel's config for ``num_q`` rows of ``num_max_sparse_blocks`` slots on ``num_sms`` SMs."""
    blocks_per_step = TOKENS_PER_STEP // sparse_block_kv
    runs = num_q * -(-num_max_sparse_blocks // blocks_per_step)
    if overrides.steps is not None:
        require(1 <= overrides.steps <= MAX_STEPS,
                f"SparseOverrides.steps: expected an integer in [1, {MAX_STEPS}], got {overrides.steps}")
        steps = overrides.steps
    else:
        steps = max(1, min(MAX_STEPS, runs // (PROGRAMS_PER_SM * max(num_sms, 1))))
    return SparseConfig(blocks_per_step, steps)


def grid(num_q: int, num_max_sparse_blocks: int, cfg: SparseConfig) -> tuple[int, int, int]:
    """(rows, slot runs per row, 1): program (i, c) owns slots [c * steps * blocks_per_step, ...) of row i."""
    per_program = cfg.steps * cfg.blocks_per_step
    return (num_q, -(-num_max_sparse_blocks // per_program), 1)


def metadata_grid(num_q: int, num_max_sparse_blocks: int) -> tuple[int, int, int]:
    """At least one program, so that the header is written also for zero rows or slots."""
    return (max(num_q, 1), max(1, -(-num_max_sparse_blocks // METADATA_BLOCK)), 1)
