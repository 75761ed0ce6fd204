"""THE plan of a ``mega_mhc`` call: token block, hidden split and warps of its two kernels (pure: sizes in, a frozen
config out; ``launch.py`` only reads it).

The step is memory-bound: per token it reads 5 H BF16 values (x and the four routes) and writes 4 H (the new
residual) in the first kernel, re-reads those 4 H (from L2 where they still are) and writes H BF16 and / or H FP8
values in the second. Shifted mHC's next-layer input does not wait for the projection, so the first kernel forms it
and writes it (H BF16, where y_bf16 goes), and the second reads H values instead of 4 H. The projection's weights
``fn`` (24 x 4 H FP32: 2.75 MB at H = 7168) are read by every token block, from HBM once and then from L2.

* Kernel 1 (post-mix + projection) runs one program per (token block, hidden split). Decode sizes have one token
  block, so the hidden dimension is cut into splits to put ``PROGRAMS_PER_SM`` programs on every SM (at one token
  the call is a 2.75 MB read of ``fn``: one program would stream it at a single SM's bandwidth). Prefill sizes have
  enough token blocks to fill the GPU and take few splits (each split re-reads nothing: splits own disjoint hidden
  ranges; the cost of a split is one more [T, 32] FP32 partial for kernel 2 to add). A split's partial goes to a
  workspace and kernel 2 adds the splits in split order, so the result has the same bits every call (no atomics).
* Token blocks: ``SMALL_BLOCK_T`` rows up to that many tokens (decode), else ``BLOCK_T`` rows, which share each
  ``fn`` tile read from L2 and keep its L2 traffic below the HBM traffic of the tokens.
* Kernel 2 (mixes, Sinkhorn, RMSNorm, FP8) runs one program per token over the whole hidden row at once (the
  RMSNorm needs the row's sum of squares before it can write anything): ``next_pow2(H)`` elements held in registers,
  ``NORM_ELEMS_PER_THREAD`` per thread, so its warps grow with H; rows longer than ``MAX_NORM_HIDDEN`` decline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core import gpu_validation
from ..core.errors import require
from ..utils.numeric import next_pow2

FAMILY = "mega_mhc"
NUM_ROUTES = 4
# Projection outputs padded to the MMA's N (24 used; column PROJ_SQ_COL of the workspace carries the row's sum of
# squares, the columns past it stay zero).
PROJ_N = 32
PROJ_SQ_COL = 24
# The projection runs transposed (fn rows x tokens: the tokens' BF16 tile is the MMA's B operand, staged once in
# shared memory), so its M is the 24 outputs padded to a 64-row wgmma.
PROJ_MMA_M = 64
# Hidden columns per step of kernel 1: a 32-deep BF16 MMA K block per route (4 routes x 3 BF16 parts of fn). The
# post-mix holds five [BT, BH] FP32 tiles and the fn tile [64, BH]: at BH = 64 a 32-row block takes 255 registers
# on 4 warps (sm_90a, Triton 3.8), at BH = 32 128 (four programs per SM), a 16-row block 98.
BLOCK_H = 32
# Token rows per program of kernel 1: decode (up to SMALL_BLOCK_T tokens) and otherwise. 32 rows share each fn tile
# read from L2 (fn's L2 traffic ~2/3 of the tokens' HBM traffic); 64 rows need 8 warps at 170 registers, one program
# per SM, with half the loads in flight of four 32-row programs.
SMALL_BLOCK_T = 16
BLOCK_T = 32
SUPPORTED_BLOCK_T = (SMALL_BLOCK_T, BLOCK_T)
# Kernel 1 warps: one warpgroup (the projection is one 64-row wgmma per route and fn part).
POST_WARPS = 4
# Programs per SM the hidden splits aim for at decode sizes (two resident programs hide each other's load latency).
PROGRAMS_PER_SM = 2
# Most hidden splits: kernel 2 reads every split's [32] partial per token (64 x 128 B = 8 KB, against the 32-57 KB
# row it reads anyway).
MAX_SPLITS = 64
# Kernel 2: FP32 elements of the hidden row per thread (the [next_pow2(H)] row in registers, loaded and stored as
# 16-byte vectors), and the warps that bound: 40-63 registers at 8 warps on sm_90a (Triton 3.6-3.8); 16 warps (H above
# 8192) came out of ptxas at 64 registers with a few spilled words, so those rows decline.
NORM_ELEMS_PER_THREAD = 32
MIN_NORM_WARPS, MAX_NORM_WARPS = 4, 8
MAX_NORM_HIDDEN = MAX_NORM_WARPS * 32 * NORM_ELEMS_PER_THREAD   # 8192
# Kernel 2's register cap (ptxas's maxnreg). Left to itself ptxas gives some 8-warp variants 64 registers and spills
# a few words (Triton 3.6 / 3.7); under a cap of 128 it allocates what they need (~100) without spilling.
NORM_MAX_REGISTERS = 128
# FP8 scale groups: 32 elements per UE8M0 exponent, 4 exponents per int32 word.
SF_GROUP, SF_PER_WORD = 32, 4


@dataclass(frozen=True)
class MhcConfig:
    block_t: int        # token rows per kernel-1 program
    splits: int         # hidden splits of kernel 1 (kernel 2 adds their partials in order)
    norm_block: int     # next_pow2(H): the hidden row kernel 2 holds
    norm_warps: int
    norm_max_registers: int = NORM_MAX_REGISTERS
    block_h: int = BLOCK_H
    post_warps: int = POST_WARPS


@dataclass(frozen=True)
class MhcOverrides:
    """The only way to force a variant (tests, sweeps): ``block_t`` in ``SUPPORTED_BLOCK_T``; ``splits`` from 1 to
    the hidden's ``BLOCK_H`` blocks (at most ``MAX_SPLITS``); ``kernels`` runs the Triton kernels while they await
    their GPU run (``core/gpu_validation.py``)."""
    block_t: Optional[int] = None
    splits: Optional[int] = None
    kernels: bool = False


NO_OVERRIDES = MhcOverrides()


def kernels_wanted(overrides: MhcOverrides) -> bool:
    return gpu_validation.kernels_wanted(FAMILY, overrides.kernels)


def supported_hidden(hidden: int) -> bool:
    """Whether the kernels cover a hidden size (the op's check already asks for a multiple of 1024)."""
    return hidden % BLOCK_H == 0 and hidden <= MAX_NORM_HIDDEN


def plan(num_tokens: int, hidden: int, num_sms: int, overrides: MhcOverrides = NO_OVERRIDES) -> MhcConfig:
    """Config of a call with ``num_tokens`` tokens (> 0) of ``hidden`` (``supported_hidden``) on ``num_sms`` SMs."""
    chunks = hidden // BLOCK_H
    if overrides.block_t is not None:
        require(overrides.block_t in SUPPORTED_BLOCK_T,
                f"MhcOverrides.block_t: expected one of {SUPPORTED_BLOCK_T}, got {overrides.block_t}")
        block_t = overrides.block_t
    else:
        block_t = SMALL_BLOCK_T if num_tokens <= SMALL_BLOCK_T else BLOCK_T
    most = min(chunks, MAX_SPLITS)
    if overrides.splits is not None:
        require(1 <= overrides.splits <= most,
                f"MhcOverrides.splits: expected 1..{most} for hidden {hidden}, got {overrides.splits}")
        splits = overrides.splits
    else:
        token_blocks = -(-num_tokens // block_t)
        splits = max(1, min(most, -(-PROGRAMS_PER_SM * num_sms // token_blocks)))
    norm_block = next_pow2(hidden)
    warps = norm_block // (32 * NORM_ELEMS_PER_THREAD)
    norm_warps = max(MIN_NORM_WARPS, min(MAX_NORM_WARPS, warps))
    return MhcConfig(block_t, splits, norm_block, norm_warps)


def compile_configs() -> list[tuple[MhcConfig, int]]:
    """(config, hidden) of the distinct kernel-2 variants the plan picks over DeepSeek V4's hidden sizes, the
    smallest and the largest (for scripts/compile_check_mega_mhc.py). Splits are a runtime argument."""
    seen, out = set(), []
    for hidden in (1024, 4096, 7168, MAX_NORM_HIDDEN):
        cfg = plan(1, hidden, 132)
        key = (cfg.norm_block, cfg.norm_warps)   # (kernel 1's variants are its SUPPORTED_BLOCK_T)
        if key not in seen:
            seen.add(key)
            out.append((cfg, hidden))
    return out
