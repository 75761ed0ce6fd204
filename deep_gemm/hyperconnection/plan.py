"""THE plan of a ``tf32_hc_prenorm_gemm`` call: tile, pipeline depth and how many programs share each output split
(pure: sizes in, a frozen config out; the launcher in ``hyperconnection/launch.py`` only reads it).

The op is memory-bound on A (BF16 [M, K]); B (FP32 [N, K], N <= 128) is re-read from L2 by every row block. What
decides the speed is how many SMs stream A at once and how deep each one's pipeline is:

* one row block of BM rows per program (BM 16 / 32 / 64 by M: small M wastes no MMA rows; BM = 64 is one wgmma;
  unsplit calls up to SHORT_ROWS_MAX_M rows take BM = 16 so that more programs stream A);
* output splits (the caller's ``num_splits``, else 1) x row blocks = tiles. Where the tiles do not give every SM
  ``PROGRAMS_PER_SM`` programs (decode sizes, e.g. M = 13 has one row block: DeepGEMM runs it on one SM; M = 8192
  has 128 row blocks for 132 SMs), each tile's K range is cut again into at most ``MAX_SUB`` sub-splits of at
  least ``MIN_K_BLOCKS_PER_SUB`` blocks, reduced on the device by the last to arrive in rounds of ``red_chunk``
  loads;
* a program that streams at most ``SHORT_LOOP_K_BLOCKS`` K blocks (every decode-sized call, and DeepGEMM's
  ``num_splits=16`` rows below M = 4096) runs ``SHORT_LOOP_STAGES`` stages; longer loops fill the shared memory one
  program per SM may use, or half of it when several programs share an SM.

Why these numbers (see docs/TUNING.md): with a few K blocks per program, 4 stages beat the 12 the budget allows (a
deep pipeline's prologue and barrier set-up are paid for loads a short loop never issues), and ~7 K blocks per
sub-split, at most 32 sub-splits, beat both fewer (less bandwidth) and more (a longer last-arriver reduction).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import arch
from ..utils.numeric import next_pow2
from .checks import BLOCK_K

# Fewest K blocks a sub-split streams: below this the sub-split's fixed costs (pipeline fill, its share of the
# last-arriver reduction) outweigh the bandwidth it adds; and the most sub-splits per tile (the last arriver reads
# every partial: 64 cost more than they add at M = 13, K = 28672).
MIN_K_BLOCKS_PER_SUB = 7
MAX_SUB = 32
# K blocks per program up to which the loop is latency-bound and runs SHORT_LOOP_STAGES stages.
SHORT_LOOP_K_BLOCKS = 16
SHORT_LOOP_STAGES = 4
# Shared memory per SM usable by one program (H100/H200: 227 KB per block opt-in), less room for the epilogue; on
# other architectures the same margin below their limit (arch.smem_budget: 72 KB on sm_89 / sm_120).
SMEM_ONE_PROGRAM = 200 * 1024
# ... and per program when two share an SM (more programs than SMs): at most half the one-program budget.
SMEM_TWO_PROGRAMS = 100 * 1024
MIN_STAGES, MAX_STAGES = 2, 12
# Programs per SM the sub-splits aim for: two resident programs hide each other's per-K-block waits (the MMA
# is waited for before the next block's operands are read).
PROGRAMS_PER_SM = 2
# Partial-tile elements the last arriver loads at once (4 warps: 64 FP32 registers per thread, which keeps the
# [64, 32] reduction config at ~150 registers, two programs per SM; 16384 took it to 255).
REDUCTION_TILE_ELEMS = 8192
MAX_RED_CHUNK = 16
# The widest B tile: the sub-split reduction of a [64, 128] tile spills, so N > 64 runs without sub-splits.
MAX_BLOCK_N_WITH_SUB = 64
# Unsplit calls up to this M take 16-row blocks (more programs stream A, and a 16-row block runs mma.sync without
# the 64-row wgmma's operand staging). With DeepGEMM's num_splits = 16 the 64-row blocks stay: there 16-row ones
# are slower.
SHORT_ROWS_MAX_M = 160
# Grid x dimension limit (programs in one launch).
MAX_PROGRAMS = 2**31 - 1
# Deterministic mode's row block: one tile height and one MMA path (wgmma) for every M, so a row's K reduction does
# not change with the batch (the 16-row blocks run mma.sync, whose accumulation need not match wgmma's bits).
DETERMINISTIC_BLOCK_M = 64


@dataclass(frozen=True)
class HcConfig:
    block_m: int
    block_n: int
    stages: int
    sub: int  # programs per output split and row block (1: no device reduction)
    red_chunk: int  # sub-split partials summed per step of the reduction
    num_warps: int = 4

    @property
    def reduce(self) -> bool:
        return self.sub > 1


def block_m_for(m: int, bn: int = 32, splits: int = 1) -> int:
    # (a [16, 128] tile spills on the mma.sync path: N > 64 starts at 32 rows)
    if bn <= 64 and (m <= 16 or (splits == 1 and m <= SHORT_ROWS_MAX_M)):
        return 16
    return 32 if m <= 32 else 64


def plan(m: int, n: int, k: int, splits: int, num_sms: int, sm: int = arch.SM90,
         deterministic: bool = False) -> HcConfig:
    """Config of a call with ``splits`` output splits (1 for ``num_splits=None``) on ``num_sms`` SMs of an ``sm``
    device (its shared memory bounds the pipeline).

    ``deterministic`` (``use_deterministic_algorithms``): the config leaves a row's K reduction independent of M:
    DETERMINISTIC_BLOCK_M rows per block and the sub-splits a one-block call gets (a function of N, K, the splits and
    the SMs), kept for every M. Large M then pays the sub-split reduction it would otherwise skip."""
    bn = max(16, next_pow2(n))
    bm = DETERMINISTIC_BLOCK_M if deterministic else block_m_for(m, bn, splits)
    num_kb = k // BLOCK_K
    tiles = -(-m // bm) * splits
    # (the sub-split count is fixed by the tiles of one row block in deterministic mode)
    sub_tiles = splits if deterministic else tiles
    red_chunk = max(1, min(MAX_RED_CHUNK, REDUCTION_TILE_ELEMS // (bm * bn)))
    sub = 1
    if sub_tiles < PROGRAMS_PER_SM * num_sms and bn <= MAX_BLOCK_N_WITH_SUB:
        most = min((num_kb // splits) // MIN_K_BLOCKS_PER_SUB, MAX_SUB)
        sub = max(1, min(PROGRAMS_PER_SM * num_sms // sub_tiles, most))
        if sub > red_chunk:
            # whole reduction rounds: a last round of one partial costs a round trip to L2 (M = 13, K = 7680: 17
            # sub-splits 8.3 us, 16 7.3, same sweep)
            sub = min(most, red_chunk * round(sub / red_chunk))
    programs = tiles * sub
    stage_bytes = bm * BLOCK_K * 2 + bn * BLOCK_K * 4
    one = arch.smem_budget(SMEM_ONE_PROGRAM, sm)
    budget = one if programs <= num_sms else min(SMEM_TWO_PROGRAMS, one // 2)
    # (at least MIN_STAGES wherever they fit: every sm_90 budget; a 64 x 128 tile on a 99 KB device runs one)
    floor = MIN_STAGES if budget >= MIN_STAGES * stage_bytes else 1
    stages = max(floor, min(MAX_STAGES, budget // stage_bytes))
    if -(-num_kb // (splits * sub)) <= SHORT_LOOP_K_BLOCKS:
        stages = min(stages, SHORT_LOOP_STAGES)
    # (one chunk size per tile shape, not per call: loads past SUB are masked off, and fewer variants compile)
    red_chunk = red_chunk if sub > 1 else 1
    return HcConfig(bm, bn, stages, sub, red_chunk)


def programs(m: int, splits: int, cfg: HcConfig) -> int:
    return -(-m // cfg.block_m) * splits * cfg.sub


def compile_configs(sm: int = arch.SM90) -> list[dict]:
    """The distinct kernel configs ``plan`` picks over DeepGEMM's test rows and decode rows on an ``sm`` device (for
    scripts/compile_check_hc.py and scripts/compile_check_arch.py), as compile_hc keyword arguments. Below sm_90
    (no TMA, so no TF32 rounding by the TMA unit) the launcher reads B through pointers only."""
    seen, out = set(), []
    for m in (1, 13, 32, 137, 4096, 8192):
        for n in (8, 24, 64, 128):
            for k in (7168, 28672):
                for splits, det in ((1, False), (16, False), (1, True), (16, True)):
                    c = plan(m, n, k, splits, 132, sm, det)
                    key = (c.block_m, c.block_n, c.stages, c.reduce, c.red_chunk)
                    # The pointer fallback (no TF32 rounding by the launch) is checked at BN <= 32 only.
                    if not arch.has_tma(sm):
                        b_tmas = (False,)
                    else:
                        b_tmas = (True, False) if c.block_n <= 32 else (True,)
                    for b_tma in b_tmas:
                        if (key, b_tma) not in seen:
                            seen.add((key, b_tma))
                            out.append(dict(bm=c.block_m, bn=c.block_n, stages=c.stages, b_tma=b_tma,
                                            reduce=c.reduce, red_chunk=c.red_chunk))
    return out


@dataclass(frozen=True)
class HcOverrides:
    """Forced choices for sweeps and tests (None = the plan decides): the whole kernel config."""

    config: HcConfig | None = None


NO_OVERRIDES = HcOverrides()
