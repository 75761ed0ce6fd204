"""THE plan of a ``tf32_hc_prenorm_gemm`` call: tile, pipeline depth and how many programs share each output split
(pure: sizes in, a frozen config out; the launcher in ``hc_triton.py`` only reads it).

The op is memory-bound on A (BF16 [M, K]); B (FP32 [N, K], N <= 128) is re-read from L2 by every row block. What
decides the speed is how many SMs stream A at once and how deep each one's pipeline is:

* one row block of BM rows per program (BM 16 / 32 / 64 by M: small M wastes no MMA rows; BM = 64 is one wgmma);
* output splits (the caller's ``num_splits``, else 1) x row blocks = tiles. Where the tiles do not fill the SMs
  (decode sizes, e.g. M = 13 has one row block: DeepGEMM runs it on one SM), each tile's K range is cut again into
  ``sub`` sub-splits of at least ``MIN_K_BLOCKS_PER_SUB`` blocks, reduced on the device by the last to arrive;
* stages fill the shared memory one program per SM may use, or half of it when several programs share an SM.
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import BLOCK_K

# Fewest K blocks a sub-split streams: below this the sub-split's fixed costs (pipeline fill, its share of the
# last-arriver reduction) outweigh the bandwidth it adds.
MIN_K_BLOCKS_PER_SUB = 8
# Shared memory per SM usable by one program (H100/H200: 227 KB per block opt-in), less room for the epilogue.
SMEM_ONE_PROGRAM = 200 * 1024
# ... and per program when two share an SM (more programs than SMs).
SMEM_TWO_PROGRAMS = 100 * 1024
MIN_STAGES, MAX_STAGES = 2, 12
# Registers per thread the last arriver's reduction may hold for one chunk of partials (4 warps).
REDUCTION_TILE_ELEMS = 2048
# The widest B tile: the sub-split reduction of a [64, 128] tile spills, so N > 64 runs without sub-splits.
MAX_BLOCK_N_WITH_SUB = 64
# Grid x dimension limit (programs in one launch).
MAX_PROGRAMS = 2**31 - 1


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

    @property
    def reduce(self) -> bool:
        return self.sub > 1


def block_m_for(m: int) -> int:
    return 16 if m <= 16 else 32 if m <= 32 else 64


def plan(m: int, n: int, k: int, splits: int, num_sms: int) -> HcConfig:
    """Config of a call with ``splits`` output splits (1 for ``num_splits=None``) on ``num_sms`` SMs."""
    bm = block_m_for(m)
    bn = max(16, next_pow2(n))
    num_kb = k // BLOCK_K
    tiles = -(-m // bm) * splits
    sub = 1
    if tiles < num_sms and bn <= MAX_BLOCK_N_WITH_SUB:
        sub = max(1, min(num_sms // tiles, (num_kb // splits) // MIN_K_BLOCKS_PER_SUB))
    programs = tiles * sub
    stage_bytes = bm * BLOCK_K * 2 + bn * BLOCK_K * 4
    budget = SMEM_ONE_PROGRAM if programs <= num_sms else SMEM_TWO_PROGRAMS
    # (not capped by the K blocks a program streams: fewer distinct configs to compile, and a short loop only
    # predicates its extra prologue loads off)
    stages = max(MIN_STAGES, min(MAX_STAGES, budget // stage_bytes))
    red_chunk = min(next_pow2(sub), max(1, REDUCTION_TILE_ELEMS // (bm * bn))) if sub > 1 else 1
    return HcConfig(bm, bn, stages, sub, red_chunk)


def programs(m: int, splits: int, cfg: HcConfig) -> int:
    return -(-m // cfg.block_m) * splits * cfg.sub


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
                    # The pointer fallback (no direct launch path: not Triton 3.6) spills at BN = 128.
                    for b_tma in ((True, False) if c.block_n <= 32 else (True,)):
                        if (key, b_tma) not in seen:
                            seen.add((key, b_tma))
                            out.append(dict(bm=c.block_m, bn=c.block_n, stages=c.stages, b_tma=b_tma,
                                            reduce=c.reduce, red_chunk=c.red_chunk))
    return out
