"""Kernel configs of the FP8 GEMM family: one frozen dataclass, one legality predicate, one deterministic heuristic.

``candidates(problem)`` is the single source of legal configs (the heuristic and autotuning both pick from it);
``heuristic(problem)`` returns a member of it. Every constant says why it has its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core import arch

# One K block = one scale block: per-block promotion needs BK == the scale granularity.
BLOCK_K = 128
# H100/H200 dynamic shared memory per block (bytes); other architectures: Fp8GemmProblem.smem_bytes.
SMEM_BYTES_SM90 = arch.SM90_SHARED_MEMORY
# Epilogue layout-conversion scratch: a BM x BN FP32 tile at worst.
EPILOGUE_BYTES_PER_ELEMENT = 4
# tl.dot needs at least 16 rows.
MIN_BLOCK_M = 16
BLOCK_M_CHOICES = (16, 32, 64, 128)
# BN divides 128, so a 1D2D tile has one B scale per K block (the scalar-scale fast path).
BLOCK_N_CHOICES = (64, 128)
MAX_SPLIT_K = 16
# Dense tile of deterministic mode (use_deterministic_algorithms(True)), on the tl.* kernel at every M, no split: a
# row's bits must not follow M. 16- and 32-row tiles run mma.sync and 64+ rows wgmma, whose FP8 accumulations
# differ in their last bits (H100, 2026-12-07: row 0 of M = 1 and M = 100 differed), and the warp-specialised
# kernel is a second code path; one 64-row wgmma tile on one kernel leaves nothing that changes with M.
DETERMINISTIC_TILE = (64, 128)
# Never split below two K blocks per split: the partial round trip would cost more than it hides.
MIN_K_BLOCKS_PER_SPLIT = 2
# The heuristic keeps >= 12 K blocks per split for 64-row and larger tiles, whose FP32 partials cost more to write
# and reduce than deeper splits gain. Smaller tiles: MIN_K_BLOCKS_PER_SPLIT_SMALL.
MIN_K_BLOCKS_PER_SPLIT_WIDE = 12
# Tiles of <= 32 rows (decode, memory-bound) keep >= 7 K blocks per split: shorter splits spend more on partials than
# they gain in streaming programs.
MIN_K_BLOCKS_PER_SPLIT_SMALL = 7
# Largest M that gets 64-row tiles: at M = 128 two 64-row tiles beat one 128-row tile (twice the programs to spread
# the weight stream over).
MAX_M_FOR_64_ROW_TILES = 128
# Small-M tiles are memory-bound: let ~2 CTAs share an SM to hide latency (one CTA per SM cannot draw HBM's
# bandwidth). Programs stay persistent over the remaining tiles.
SMALL_TILE_PROGRAMS_PER_SM = 2
# Masked decode (a few rows per group) still takes 64-row tiles: wgmma's M is 64 anyway, and 32-row tiles were slower.
MIN_MASKED_BLOCK_M = 64
# Tiles of fewer rows than this are memory-bound: their wave quantisation counts the co-resident programs
# (SMALL_TILE_PROGRAMS_PER_SM per SM) as slots (at M = 1, N = 24576 that picks one round of 16 x 128 tiles over two of
# 16 x 64). 64-row tiles keep counting SMs: counted in slots, they would give up split-K where it pays.
SLOT_QUANTISED_MAX_BLOCK_M = 32
# Relative per-SM throughput of a tile shape (bigger tiles reuse operands more). 128x128 on 8 warps is the best
# tl.* shape (BM 64 reuses too little, 128x256 spills).
TILE_EFFICIENCY = {(128, 128): 1.0, (128, 64): 0.8}
SMALL_TILE_EFFICIENCY = 0.6

# Dense 64 < M <= 128 where the launcher can run split-K on the warp-specialised one-wave kernel
# (``Fp8GemmProblem.one_wave_split_k``): one 128-row tile per column block, split so that the CTAs fill at least
# this share of the SMs in one round (fewer tiles, e.g. N = 576, stay faster on the tl.* kernel's 64-row tiles).
ONE_WAVE_SPLIT_MIN_FILL = 0.75
# Between 64- and 128-wide tiles that fill the SMs equally, 128-wide ones only when each split keeps at least this
# many K blocks: they halve the splits' count per column but each split's partial is twice the size, which only
# long splits amortise.
ONE_WAVE_SPLIT_WIDE_MIN_K_BLOCKS = 32


@dataclass(frozen=True)
class Fp8GemmProblem:
    """What the heuristic sees: sizes, grouping kind, SM budget."""

    m: int
    n: int
    k: int
    num_groups: int = 1
    kind: str = "dense"  # dense | m_grouped | masked | k_grouped
    num_sms: int = 132
    m_alignment: int = 128  # segment alignment of the M-grouped layouts (BM must divide it)
    expected_m: int = 0  # masked: expected rows per group
    # Dense: the launcher can run 128-row split-K tiles on the warp-specialised one-wave kernel (1D2D scales, no C,
    # D stored by TMA, the kernel enabled); the heuristic then considers them for 64 < M <= 128.
    one_wave_split_k: bool = False
    # Shared memory a config may use: the device's opt-in limit per block (arch.shared_memory; 99 KB on sm_89 and
    # sm_120), which bounds the pipeline depth (_stages_for).
    smem_bytes: int = SMEM_BYTES_SM90
    # Deterministic mode (core/determinism.py): no split-K, so a row's K reduction does not depend on M.
    deterministic: bool = False


@dataclass(frozen=True)
class Fp8GemmConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    group_m: int = 8
    split_k: int = 1
    programs_per_sm: int = 1  # >1 for small-M, memory-bound tiles: co-resident CTAs hide latency
    block_k: int = BLOCK_K

    def smem_bytes(self) -> int:
        per_stage = (self.block_m + self.block_n) * self.block_k  # FP8: one byte per element
        return per_stage * self.num_stages + self.block_m * self.block_n * EPILOGUE_BYTES_PER_ELEMENT


# Devices with less shared memory than sm_90 (sm_89, sm_120: 99 KB): the tl.* kernel's builds there need the stage
# ring plus about a BF16 tile of epilogue staging, whatever D's dtype (scripts/compile_check_arch.py, sm_120a, Triton
# 3.6: 128 x 128, 2 stages, 66068 bytes with a BF16 D, 99336 with an FP32 D and C; 3 stages with a BF16 D 99352);
# the 4-byte estimate of smem_bytes() would leave 128 x 128 tiles one stage. This many bytes of the tile per element,
# and a reserve for barriers.
SMALL_SMEM_EPILOGUE_BYTES_PER_ELEMENT = 2
SMALL_SMEM_RESERVE = 2048


def _stages_for(block_m: int, block_n: int, smem_bytes: int = SMEM_BYTES_SM90) -> int:
    """Deepest pipeline that fits next to the epilogue scratch, capped at 4 (more measured no faster). On devices
    with less shared memory than sm_90, by the estimate measured there (SMALL_SMEM_*), at least one stage (the K
    loop unpipelined)."""
    if smem_bytes >= SMEM_BYTES_SM90:
        for stages in (4, 3, 2):
            if Fp8GemmConfig(block_m, block_n, 8, stages).smem_bytes() <= smem_bytes:
                return stages
        return 2
    per_stage = (block_m + block_n) * BLOCK_K
    epilogue = block_m * block_n * SMALL_SMEM_EPILOGUE_BYTES_PER_ELEMENT + SMALL_SMEM_RESERVE
    return max(1, min(4, (smem_bytes - epilogue) // per_stage))


def _warps_for(block_m: int) -> int:
    # Two consumer warpgroups for 128-row tiles (64 rows each), one below that.
    return 8 if block_m >= 128 else 4


def _config(bm: int, bn: int, split: int = 1, smem_bytes: int = SMEM_BYTES_SM90) -> Fp8GemmConfig:
    return Fp8GemmConfig(bm, bn, _warps_for(bm), _stages_for(bm, bn, smem_bytes), 8, split,
                         programs_per_sm=1 if bm >= 128 else SMALL_TILE_PROGRAMS_PER_SM)


def _block_ms(p: Fp8GemmProblem) -> list[int]:
    if p.kind in ("m_grouped",):
        # Grouped tiles must not straddle segments: BM divides the segment alignment.
        return [bm for bm in BLOCK_M_CHOICES if p.m_alignment % bm == 0]
    if p.kind == "k_grouped":
        return [128]
    return list(BLOCK_M_CHOICES)


def _block_ns(p: Fp8GemmProblem) -> tuple[int, ...]:
    # K-grouped tiles carry per-row B scales and a C tile: 128x128 spills (184 B stack, sm_90a, triton 3.6).
    return (64,) if p.kind == "k_grouped" else BLOCK_N_CHOICES


def candidates(p: Fp8GemmProblem) -> list[Fp8GemmConfig]:
    """Every legal config for the problem."""
    num_kb = max(1, math.ceil(p.k / BLOCK_K))
    out = []
    for bm in _block_ms(p):
        for bn in _block_ns(p):
            splits = [1]
            if p.kind == "dense" and not p.deterministic:
                splits += [s for s in range(2, MAX_SPLIT_K + 1) if num_kb >= s * MIN_K_BLOCKS_PER_SPLIT]
            out.extend(_config(bm, bn, s, p.smem_bytes) for s in splits)
    return out


def _tiles(rows: int, n: int, bm: int, bn: int, groups: int) -> int:
    return math.ceil(max(rows, 1) / bm) * math.ceil(max(n, 1) / bn) * groups


def _one_wave_split(p: Fp8GemmProblem) -> Fp8GemmConfig | None:
    """128 x BN split-K tiles for the one-wave kernel (see ONE_WAVE_SPLIT_MIN_FILL), or None when no split of them
    fills the SMs: for each BN the deepest split that keeps one round of CTAs and MIN_K_BLOCKS_PER_SPLIT_WIDE K
    blocks per split; the fuller one wins, and on a tie 128-wide tiles if their splits are long enough."""
    num_kb = math.ceil(p.k / BLOCK_K)
    best = None
    for bn in (64, 128):
        tiles = _tiles(p.m, p.n, 128, bn, 1)
        split = min(MAX_SPLIT_K, p.num_sms // tiles, num_kb // MIN_K_BLOCKS_PER_SPLIT_WIDE)
        if split < 2:
            continue
        split = math.ceil(num_kb / math.ceil(num_kb / split))  # every split non-empty
        fill = tiles * split / p.num_sms
        if fill < ONE_WAVE_SPLIT_MIN_FILL:
            continue
        wide_pays = bn == 128 and num_kb // split >= ONE_WAVE_SPLIT_WIDE_MIN_K_BLOCKS
        if best is None or fill > best[0] + 1e-9 or (abs(fill - best[0]) <= 1e-9 and wide_pays):
            best = (fill, _config(128, bn, split, p.smem_bytes))
    return None if best is None else best[1]


def heuristic(p: Fp8GemmProblem) -> Fp8GemmConfig:
    """Deterministic choice: BM from the rows, BN from wave quantisation, split-K to fill the GPU (for 64 < M <=
    128, 128-row split-K tiles where the one-wave kernel runs them: _one_wave_split). Dense calls in deterministic
    mode take DETERMINISTIC_TILE at every M."""
    if p.kind == "dense" and p.deterministic:
        return _config(*DETERMINISTIC_TILE, 1, p.smem_bytes)
    if (p.kind == "dense" and p.one_wave_split_k
            and MAX_M_FOR_64_ROW_TILES // 2 < p.m <= MAX_M_FOR_64_ROW_TILES):
        choice = _one_wave_split(p)
        if choice is not None:
            return choice
    allowed_bms = _block_ms(p)
    rows = p.expected_m if p.kind == "masked" and p.expected_m > 0 else p.m
    # Small M is memory-bound on B: the smallest BM covering the rows wastes the least MMA work.
    if rows > MAX_M_FOR_64_ROW_TILES:
        want_bm = 128
    else:
        want_bm = min(64, max(MIN_BLOCK_M, 1 << max(0, math.ceil(math.log2(max(1, rows))))))
    if p.kind == "masked":
        want_bm = max(want_bm, MIN_MASKED_BLOCK_M)
    fitting = [bm for bm in allowed_bms if bm <= want_bm]
    bm = max(fitting) if fitting else min(allowed_bms)
    groups = p.num_groups if p.kind in ("masked", "k_grouped") else 1
    # BN: the shape whose last wave is fullest, weighted by the shape's per-SM speed.
    best_bn, best_score = _block_ns(p)[-1], -1.0
    wave_slots = p.num_sms * (SMALL_TILE_PROGRAMS_PER_SM if bm <= SLOT_QUANTISED_MAX_BLOCK_M else 1)
    for bn in sorted(_block_ns(p), reverse=True):
        tiles = _tiles(rows, p.n, bm, bn, groups)
        waves = max(1, math.ceil(tiles / wave_slots))
        score = min(1.0, tiles / (waves * wave_slots)) * TILE_EFFICIENCY.get((bm, bn), SMALL_TILE_EFFICIENCY)
        if score > best_score + 1e-9:
            best_bn, best_score = bn, score
    split = 1
    if p.kind == "dense":
        tiles = _tiles(p.m, p.n, bm, best_bn, 1)
        # Programs that can run at once: one per SM for 128-row tiles, a few per SM for small tiles.
        slots = p.num_sms * (1 if bm >= 128 else SMALL_TILE_PROGRAMS_PER_SM)
        num_kb = math.ceil(p.k / BLOCK_K)
        if tiles < slots:
            # Split K so that tiles x splits fills the slots in one round, keeping enough K blocks per split.
            per_split = MIN_K_BLOCKS_PER_SPLIT_WIDE if bm >= 64 else MIN_K_BLOCKS_PER_SPLIT_SMALL
            split = max(1, min(MAX_SPLIT_K, slots // tiles, num_kb // per_split))
            # Every split non-empty: the kernel gives each cdiv(#blocks, split) blocks.
            split = math.ceil(num_kb / math.ceil(num_kb / split))
    choice = _config(bm, best_bn, split, p.smem_bytes)
    assert choice in candidates(p), (choice, p)
    return choice
