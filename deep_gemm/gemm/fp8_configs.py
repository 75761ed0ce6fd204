"""Kernel configs of the FP8 GEMM family: one frozen dataclass, one legality predicate, one deterministic heuristic.

``candidates(problem)`` is the single source of legal configs (the heuristic and autotuning both pick from it);
``heuristic(problem)`` returns a member of it. Every constant says why it has its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# One K block = one scale block: per-block promotion needs BK == the scale granularity.
BLOCK_K = 128
# H100/H200 dynamic shared memory per block (bytes).
SMEM_BYTES_SM90 = 232_448
# Per-stage operand bytes must leave room for the epilogue's layout-conversion scratch (BM x BN fp32 at worst).
EPILOGUE_SMEM_FACTOR = 4
# tl.dot needs at least 16 rows; wgmma's natural M is 64 per warpgroup.
MIN_BLOCK_M = 16
# Split-K: aim for about two programs per SM on small-M problems, never split below two K blocks per split.
SPLIT_K_TARGET_WAVES = 2
MAX_SPLIT_K = 16
MIN_K_BLOCKS_PER_SPLIT = 2
# Relative throughput of a tile shape per SM (bigger tiles reuse operands more); 128x128 with 8 warps is the
# best tl.* shape measured on H200 (KERNEL-NOTES §3: BM 64 caps at 0.40x DeepGEMM, 128x256 spills).
TILE_EFFICIENCY = {(128, 128): 1.0, (128, 64): 0.8, (64, 128): 0.8, (64, 64): 0.6}


@dataclass(frozen=True)
class Fp8GemmProblem:
    """What the heuristic sees: sizes, grouping kind, SM budget."""

    m: int
    n: int
    k: int
    num_groups: int = 1
    kind: str = "dense"  # dense | m_grouped | masked
    num_sms: int = 132
    m_alignment: int = 128  # segment alignment of the M-grouped layouts (BM must divide it)
    expected_m: int = 0  # masked: expected rows per group


@dataclass(frozen=True)
class Fp8GemmConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    group_m: int = 8
    split_k: int = 1
    block_k: int = BLOCK_K

    def smem_bytes(self) -> int:
        per_stage = (self.block_m + self.block_n) * self.block_k  # FP8: one byte per element
        return per_stage * self.num_stages + self.block_m * self.block_n * EPILOGUE_SMEM_FACTOR


def _stages_for(block_m: int, block_n: int) -> int:
    """Deepest pipeline that fits next to the epilogue scratch, capped at 4 (more measured no faster)."""
    for stages in (4, 3, 2):
        if Fp8GemmConfig(block_m, block_n, 8, stages).smem_bytes() <= SMEM_BYTES_SM90:
            return stages
    return 2


def _warps_for(block_m: int) -> int:
    # Two consumer warpgroups for 128-row tiles (64 rows each), one below that.
    return 8 if block_m >= 128 else 4


def candidates(p: Fp8GemmProblem) -> list[Fp8GemmConfig]:
    """Every legal config for the problem."""
    block_ms = [16, 32, 64, 128]
    if p.kind != "dense":
        # Grouped tiles must not straddle segments: BM divides the alignment (and masked groups start at row 0).
        block_ms = [bm for bm in block_ms if p.kind == "masked" or p.m_alignment % bm == 0]
    out = []
    for bm in block_ms:
        for bn in (64, 128):  # BN divides 128: one B scale per tile per K block (the scalar-scale fast path)
            splits = [1]
            if p.kind == "dense":
                num_kb = max(1, math.ceil(p.k / BLOCK_K))
                splits = [s for s in (1, 2, 4, 8, 16) if s == 1 or num_kb >= s * MIN_K_BLOCKS_PER_SPLIT]
            for split in splits:
                out.append(Fp8GemmConfig(bm, bn, _warps_for(bm), _stages_for(bm, bn), 8, split))
    return out


def _waves(tiles: int, num_sms: int) -> int:
    return max(1, math.ceil(tiles / max(1, num_sms)))


def heuristic(p: Fp8GemmProblem) -> Fp8GemmConfig:
    """Deterministic choice; see the rules inline."""
    legal = candidates(p)
    rows = p.expected_m if p.kind == "masked" and p.expected_m > 0 else p.m
    # Small M is memory-bound on B: the smallest BM covering the rows wastes the least MMA work.
    if rows <= 64:
        bm = max(MIN_BLOCK_M, 1 << max(0, math.ceil(math.log2(max(1, rows)))))
    else:
        bm = 128
    bm = max(c.block_m for c in legal if c.block_m <= bm) if any(c.block_m <= bm for c in legal) else legal[0].block_m
    best, best_score = None, -1.0
    for bn in (128, 64):
        tiles = math.ceil(max(rows, 1) / bm) * math.ceil(p.n / bn) * (p.num_groups if p.kind != "dense" else 1)
        waves = _waves(tiles, p.num_sms)
        # Useful fraction of the launched waves times the per-SM speed of the tile shape.
        fill = tiles / (waves * p.num_sms)
        score = min(1.0, fill) * TILE_EFFICIENCY.get((min(bm, 128), bn), 0.6 if bm < 64 else 0.8)
        if score > best_score + 1e-9:
            best, best_score = bn, score
    bn = best
    split = 1
    if p.kind == "dense":
        tiles = math.ceil(max(p.m, 1) / bm) * math.ceil(p.n / bn)
        if tiles < p.num_sms:
            # Not enough tiles to fill the GPU: split K until about SPLIT_K_TARGET_WAVES programs per SM.
            want = SPLIT_K_TARGET_WAVES * p.num_sms / tiles
            num_kb = math.ceil(p.k / BLOCK_K)
            for s in (16, 8, 4, 2):
                if s <= want and num_kb >= s * MIN_K_BLOCKS_PER_SPLIT and s <= MAX_SPLIT_K:
                    split = s
                    break
    choice = Fp8GemmConfig(bm, bn, _warps_for(bm), _stages_for(bm, bn), 8, split)
    assert choice in legal, (choice, p)
    return choice
