"""THE plan of a ``tf32_hc_prenorm_gemm`` call: tile, pipeline depth and how many programs share each output split
(pure: sizes in, a frozen config out; the launcher in ``hc_triton.py`` only reads it).

The op is memory-bound on A (BF16 [M, K]); B (FP32 [N, K], N <= 128) is re-read from L2 by every row block. What
decides the speed is how many SMs stream A at once and how deep each one's pipeline is:

* one row block of BM rows per program (BM 16 / 32 / 64 by M: small M wastes no MMA rows; BM = 64 is one wgmma);
* output splits (the caller's ``num_splits``, else 1) x row blocks = tiles. Where the tiles do not give every SM
  ``PROGRAMS_PER_SM`` programs (decode sizes, e.g. M = 13 has one row block: DeepGEMM runs it on one SM; M = 8192
  has 128 row blocks for 132 SMs), each tile's K range is cut again into at most ``MAX_SUB`` sub-splits of at
  least ``MIN_K_BLOCKS_PER_SUB`` blocks, reduced on the device by the last to arrive in rounds of ``red_chunk``
  loads;
* a program that streams at most ``SHORT_LOOP_K_BLOCKS`` K blocks (every decode-sized call, and DeepGEMM's
  ``num_splits=16`` rows below M = 4096) runs ``SHORT_LOOP_STAGES`` stages; longer loops fill the shared memory one
  program per SM may use, or half of it when several programs share an SM.

The numbers come from the H200 sweeps of ``research/sweeps/hc_prenorm_sweep.py`` (session 24; logs under
``research/results/2026-12-02-h200-s24-call2/``): on DeepGEMM's rows with a few K blocks per program, 4 stages beat
the 12 the budget allows by 10-20 % (5.7 -> 4.7 us at M = 13, K = 7168, 16 splits: a deep pipeline's prologue and
barrier set-up are paid for loads a short loop never issues), and ~7 K blocks per sub-split, at most 32 sub-splits,
beat both fewer (less bandwidth) and more (a longer last-arriver reduction).

The warp-specialised variant (``kernels_ws.py``, Gluon; unsplit calls, N <= 64, Triton's direct launch path) is
chosen by ``DG_HC_WS`` ("1": wherever it covers the call, "0": never, unset: "auto") or pinned per call (a config
with ``kernel="ws"``, tests and sweeps). "auto" picks it for M >= ``WS_AUTO_MIN_ROWS`` rows, 0 = never: it has
not been timed yet (session 26 wrote it without a GPU; ``research/sweeps/hc_prenorm_sweep.py --ws`` times it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .checks import BLOCK_K

# Fewest K blocks a sub-split streams: below this the sub-split's fixed costs (pipeline fill, its share of the
# last-arriver reduction) outweigh the bandwidth it adds; and the most sub-splits per tile (the last arriver reads
# every partial: 64 cost more than they add at M = 13, K = 28672).
MIN_K_BLOCKS_PER_SUB = 7
MAX_SUB = 32
# K blocks per program up to which the loop is latency-bound and runs SHORT_LOOP_STAGES stages.
SHORT_LOOP_K_BLOCKS = 16
SHORT_LOOP_STAGES = 4
# Shared memory per SM usable by one program (H100/H200: 227 KB per block opt-in), less room for the epilogue.
SMEM_ONE_PROGRAM = 200 * 1024
# ... and per program when two share an SM (more programs than SMs).
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
# Grid x dimension limit (programs in one launch).
MAX_PROGRAMS = 2**31 - 1

# ---- the warp-specialised variant (kernels_ws.py) ----
# One CTA per SM holds the ring: all of the 227 KB a block may opt into, less the barriers and convert_layout's
# scratch of the epilogue. Stages: A [BM, 64] BF16 + B [BN, 64] FP32 (BM = 128, BN = 32: 24 KB, 8 stages; BM = 64:
# 16 KB, 12 stages).
WS_SMEM = 200 * 1024
WS_MAX_STAGES = 12
# Fewest K blocks per CTA: below this (small M) the pipeline fill and the shared row blocks' reductions (each piece
# a 64 x BN partial, summed one after another by the last arriver) cost more than the SMs they add.
WS_MIN_K_BLOCKS_PER_CTA = 32
# Widest B tile (the acc, the partial of the block and the squares stay well under the consumers' registers).
WS_MAX_BLOCK_N = 64
# Consumer warpgroups per CTA in "auto" and "on" (2: BM = 128, both read one B tile), and setmaxnreg budgets of the
# consumer and producer partitions (the BF16 WS kernel's; the consumers use ~110).
WS_CONSUMERS = 2
WS_REGISTERS = (232, 40)
# N that is not a power of two as a tile plus a narrower tail (ws_tile_n) in "auto" and "on".
WS_TAIL = True
# "auto" takes the WS kernel from this many rows on; 0 = never (the default until an H200 sweep confirms it).
WS_AUTO_MIN_ROWS = 0
DEFAULT_WS_MODE = {"1": "on", "0": "off"}.get(os.environ.get("DG_HC_WS", "auto"), "auto")


def next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@dataclass(frozen=True)
class HcConfig:
    block_m: int
    block_n: int
    stages: int
    sub: int  # programs per output split and row block (1: no device reduction)
    red_chunk: int  # sub-split partials summed per step of the reduction
    num_warps: int = 4
    kernel: str = "tl"  # "tl" (kernels.py) or "ws" (kernels_ws.py: stages = its ring, sub = red_chunk = 1)
    consumers: int = 1  # ws: consumer warpgroups (block_m = 64 * consumers)
    grid: int = 0  # ws: persistent CTAs (0: one per SM)
    block_n_tail: int = 0  # ws: a second, narrower wgmma for columns block_n..block_n + tail (N = 24: 16 + 8)

    @property
    def reduce(self) -> bool:
        return self.sub > 1


def block_m_for(m: int, bn: int = 32) -> int:
    # (a [16, 128] tile spills on the mma.sync path: N > 64 starts at 32 rows)
    return (16 if m <= 16 and bn <= 64 else 32) if m <= 32 else 64


def ws_covers(n: int, splits: int) -> bool:
    """Whether the warp-specialised kernel covers the call (its launcher also needs the direct launch path)."""
    return splits == 1 and next_pow2(n) <= WS_MAX_BLOCK_N


def ws_stages(block_m: int, block_n: int) -> int:
    """Ring depth (block_n: B's box rows, the tile and its tail rounded up to a power of two)."""
    return max(MIN_STAGES, min(WS_MAX_STAGES, WS_SMEM // (block_m * BLOCK_K * 2 + block_n * BLOCK_K * 4)))


def ws_tile_n(n: int, tail: bool) -> tuple[int, int]:
    """(block_n, tail) of the WS kernel: one power-of-two tile, or with ``tail`` where N is not a power of two,
    the largest power of two under N plus a power-of-two tail of 8+ columns, taken where it is narrower than
    the one tile (24 = 16 + 8: wgmma's time scales with its N, so the MMA work drops by a quarter)."""
    one = max(8, next_pow2(n))
    if tail and n > 8 and n & (n - 1):
        main = 1 << (n.bit_length() - 1)
        rest = max(8, next_pow2(n - main))
        if main + rest < one and rest < main:
            return main, rest
    return one, 0


def ws_grid(m: int, k: int, block_m: int, num_sms: int) -> int:
    """CTAs: one per SM, fewer where each would stream under WS_MIN_K_BLOCKS_PER_CTA K blocks."""
    pairs = -(-m // block_m) * (k // BLOCK_K)
    return max(1, min(num_sms, pairs // WS_MIN_K_BLOCKS_PER_CTA))


def ws_range(cta: int, grid: int, pairs: int) -> tuple[int, int]:
    """[lo, hi) of CTA ``cta``'s (row block, K block) pairs (the kernel's ``_range_of``, for tests and tools)."""
    return cta * pairs // grid, (cta + 1) * pairs // grid


def ws_owner(x: int, grid: int, pairs: int) -> int:
    """The CTA whose range holds pair ``x`` (the kernel's ``_owner``)."""
    return ((x + 1) * grid - 1) // pairs


def ws_config(m: int, n: int, k: int, num_sms: int, consumers: int = WS_CONSUMERS, stages: int = 0,
              grid: int = 0, tail: bool | None = None) -> HcConfig:
    """The warp-specialised kernel's config (stages 0: as many as WS_SMEM holds; grid 0: ``ws_grid``'s; tail None:
    WS_TAIL)."""
    bm = 64 * consumers
    bn, bn_tail = ws_tile_n(n, WS_TAIL if tail is None else tail)
    return HcConfig(bm, bn, stages or ws_stages(bm, next_pow2(bn + bn_tail)), 1, 1, 4, "ws", consumers,
                    min(grid or ws_grid(m, k, bm, num_sms), -(-m // bm) * (k // BLOCK_K)), bn_tail)


def plan(m: int, n: int, k: int, splits: int, num_sms: int, ws_mode: str | None = None) -> HcConfig:
    """Config of a call with ``splits`` output splits (1 for ``num_splits=None``) on ``num_sms`` SMs; ``ws_mode``
    ("on" / "off" / "auto", None: ``DEFAULT_WS_MODE``) decides the warp-specialised kernel where it covers the call."""
    mode = DEFAULT_WS_MODE if ws_mode is None else ws_mode
    if ws_covers(n, splits) and (mode == "on" or (mode == "auto" and WS_AUTO_MIN_ROWS and m >= WS_AUTO_MIN_ROWS)):
        return ws_config(m, n, k, num_sms)
    bn = max(16, next_pow2(n))
    bm = block_m_for(m, bn)
    num_kb = k // BLOCK_K
    tiles = -(-m // bm) * splits
    red_chunk = max(1, min(MAX_RED_CHUNK, REDUCTION_TILE_ELEMS // (bm * bn)))
    sub = 1
    if tiles < PROGRAMS_PER_SM * num_sms and bn <= MAX_BLOCK_N_WITH_SUB:
        sub = max(1, min(PROGRAMS_PER_SM * num_sms // tiles, (num_kb // splits) // MIN_K_BLOCKS_PER_SUB, MAX_SUB))
    programs = tiles * sub
    stage_bytes = bm * BLOCK_K * 2 + bn * BLOCK_K * 4
    budget = SMEM_ONE_PROGRAM if programs <= num_sms else SMEM_TWO_PROGRAMS
    stages = max(MIN_STAGES, min(MAX_STAGES, budget // stage_bytes))
    if -(-num_kb // (splits * sub)) <= SHORT_LOOP_K_BLOCKS:
        stages = min(stages, SHORT_LOOP_STAGES)
    # (one chunk size per tile shape, not per call: loads past SUB are masked off, and fewer variants compile)
    red_chunk = red_chunk if sub > 1 else 1
    return HcConfig(bm, bn, stages, sub, red_chunk)


def programs(m: int, splits: int, cfg: HcConfig) -> int:
    if cfg.kernel == "ws":
        return cfg.grid
    return -(-m // cfg.block_m) * splits * cfg.sub


def ws_compile_configs() -> list[dict]:
    """The warp-specialised kernel's configs the plan and the sweep's variants use (scripts/compile_check_hc.py)."""
    out = []
    shapes = [(c, 0, n, True) for c in (2, 1) for n in (8, 16, 24, 32, 64)] + [(c, 0, 24, False) for c in (2, 1)]
    shapes += [(c, st, 24, tail) for c, stages in ((2, (4, 6)), (1, (6, 8))) for st in stages
               for tail in (True, False)]  # (the sweep's variants)
    for consumers, stages, n, tail in shapes:
        c = ws_config(8192, n, 28672, 132, consumers, stages, tail=tail)
        d = dict(bm=c.block_m, bn=c.block_n, tail=c.block_n_tail, stages=c.stages, consumers=c.consumers)
        if d not in out:
            out.append(d)
    return out


def compile_configs() -> list[dict]:
    """The distinct kernel configs ``plan`` picks over DeepGEMM's test rows and decode rows (for
    scripts/compile_check_hc.py), as compile_hc keyword arguments."""
    seen, out = set(), []
    for m in (1, 13, 32, 137, 4096, 8192):
        for n in (8, 24, 64, 128):
            for k in (7168, 28672):
                for splits in (1, 16):
                    c = plan(m, n, k, splits, 132)
                    key = (c.block_m, c.block_n, c.stages, c.reduce, c.red_chunk)
                    # The pointer fallback (no direct launch path: not Triton 3.6) is checked at BN <= 32 only.
                    for b_tma in ((True, False) if c.block_n <= 32 else (True,)):
                        if (key, b_tma) not in seen:
                            seen.add((key, b_tma))
                            out.append(dict(bm=c.block_m, bn=c.block_n, stages=c.stages, b_tma=b_tma,
                                            reduce=c.reduce, red_chunk=c.red_chunk))
    return out
