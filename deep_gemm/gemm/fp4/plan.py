"""THE plan of an FP4 GEMM call on the portable dequantising kernel (``kernels.py``): tile, warps, pipeline depth
(pure: sizes in, a frozen config out; ``launch.py`` only reads it).

Hopper has no FP4 MMA, so each K block of both operands is decoded and scaled in registers to BF16 (exact: see
``kernels.py``) and multiplied by a BF16 ``tl.dot`` with FP32 accumulation. What bounds the speed is that in-register
decode (a few integer and FP32 operations per element of both operand tiles, per K block), not the MMA, so the tile is
chosen to amortise it: a 128 x 128 output tile decodes (128 + 128) x BLOCK_K elements for 128 x 128 x BLOCK_K MACs.

Why these numbers (not yet timed on a GPU: they come from the register budget, scripts/compile_check_fp4.py):
* BLOCK_M = BLOCK_N = 128 with 8 warps: two warpgroups of 64 rows (one wgmma M each) and a 64-register FP32
  accumulator per thread, which leaves room for the decoded operand tiles.
* BLOCK_K = 32 logical K (16 packed bytes per row): one UE8M0 scale block of 32 or two UE4M3 blocks of 16 per step
  (a step may also sit inside one 128-K block). 64 spills at 128 x 128 / 8 warps (ptxas for sm_90a, Triton 3.8:
  255 registers and 16-64 bytes of stack for the K-grouped forms: both operands' decoded halves live beside the
  accumulator); with 32 every form compiles without spills at 114-226 registers over Triton 3.6-3.9.
* Decode shapes (M <= SMALL_M_MAX) take 64 x 64 tiles and 4 warps: a 128-row tile would decode and multiply rows
  that do not exist, and 64 columns give twice the programs of 128 (N = 7168: 112, most of 132 SMs). 64 x 128 / 4
  warps spills with C in Triton 3.6 (48 bytes; 64 x 64: ~150 registers).
* Scales applied after the dot (FP32 scales of the FP8 GEMMs' FP4 forms: exact for any FP32 value) take 64-wide
  tiles: the step's fresh product tile beside the running accumulator makes 128 x 128 / 8 warps spill (255
  registers, 40-56 bytes of stack); 128 x 64 compiles at ~200.
* NUM_STAGES = 3: the pointer loads of the next K blocks are in flight while one is decoded (a first guess: with
  the decode, not the load, expected to be the critical path, a deeper ring should buy little).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...core import gpu_validation
from ...core.errors import require

FAMILY = "fp4_gemm"

BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 32            # logical K per step (16 packed bytes)
NUM_WARPS = 8           # two warpgroups of 64 rows
NUM_STAGES = 3
SMALL_M_MAX = 64        # M up to this takes the 64-row tile
SMALL_BLOCK_M = 64
SMALL_BLOCK_N = 64
SCALE_AFTER_BLOCK_N = 64  # scales applied after the dot: 128 spills
SMALL_NUM_WARPS = 4     # one warpgroup
GROUP_M = 8             # tile rows walked together along N (L2 reuse of B rows)
# The smallest legal tile edge: tl.dot needs 16 along M, N and K (K here is BLOCK_K / 2 per dot of one nibble).
MIN_BLOCK = 16
MIN_BLOCK_K = 32


@dataclass(frozen=True)
class Fp4Config:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = GROUP_M


@dataclass(frozen=True)
class Fp4Overrides:
    """The only way to force a variant (tests, sweeps): any tile field (None = the plan's), and ``kernels``, which
    runs the Triton kernels while the family is listed in ``core/gpu_validation.py``.

    FP8 GEMM callers reach the FP4 forms of ``fp8_fp4_gemm_nt`` / ``m_grouped_fp8_fp4_gemm_nt_*`` with these too:
    ``run_launcher("fp8_fp4_gemm_nt", ..., launcher_kwargs=dict(fp4_overrides=Fp4Overrides(kernels=True)))``."""
    block_m: Optional[int] = None
    block_n: Optional[int] = None
    block_k: Optional[int] = None
    num_warps: Optional[int] = None
    num_stages: Optional[int] = None
    kernels: bool = False


NO_OVERRIDES = Fp4Overrides()


def kernels_wanted(overrides: Fp4Overrides) -> bool:
    return gpu_validation.kernels_wanted(FAMILY, overrides.kernels)


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def plan(m: int, n: int, overrides: Fp4Overrides = NO_OVERRIDES, row_align: int | None = None,
         scale_block_k: int | None = None) -> Fp4Config | None:
    """The tile of an ``m`` x ``n`` output (per group for the grouped GEMMs). ``row_align``: the M-grouped contiguous
    layouts' segment alignment, which BLOCK_M must divide (a tile then lies in one group's segment): the plan's
    BLOCK_M is halved until it does, down to MIN_BLOCK. ``scale_block_k``: scales are applied after the dot (FP32
    scales), per K step, so BLOCK_K must divide this (the smaller K granularity of the two operands). None when no
    tile meets these (the reference runs)."""
    small = m <= SMALL_M_MAX
    block_m = overrides.block_m or (SMALL_BLOCK_M if small else BLOCK_M)
    if row_align is not None:
        while overrides.block_m is None and block_m > MIN_BLOCK and row_align % block_m:
            block_m //= 2
        if row_align % block_m:
            return None
    cfg = Fp4Config(
        block_m=block_m,
        block_n=overrides.block_n or (SMALL_BLOCK_N if small else SCALE_AFTER_BLOCK_N if scale_block_k else BLOCK_N),
        block_k=overrides.block_k or BLOCK_K,
        # (8 warps: two 64-row warpgroups, so only for 128-row tiles)
        num_warps=overrides.num_warps or (NUM_WARPS if block_m >= BLOCK_M else SMALL_NUM_WARPS),
        num_stages=overrides.num_stages or NUM_STAGES)
    for name, value, low in (("block_m", cfg.block_m, MIN_BLOCK), ("block_n", cfg.block_n, MIN_BLOCK),
                             ("block_k", cfg.block_k, MIN_BLOCK_K)):
        require(_pow2(value) and value >= low,
                f"Fp4Overrides.{name}: expected a power of two >= {low}, got {value}")
    if scale_block_k is not None and scale_block_k % cfg.block_k:
        return None
    return cfg


def compile_configs(scale_after: bool = False) -> list[Fp4Config]:
    """The distinct configs ``plan`` picks (for scripts/compile_check_fp4.py), with scales before or after the
    dot."""
    gran = 32 if scale_after else None
    return sorted({plan(1, 1, scale_block_k=gran), plan(4096, 7168, scale_block_k=gran)},
                  key=lambda c: (c.block_m, c.block_n))
