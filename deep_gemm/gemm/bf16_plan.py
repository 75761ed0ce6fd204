"""The one plan of a BF16 GEMM call: tile, K block, stages, warps, split-K and grid of ``kernels/bf16_gemm.py``.

``plan(call, overrides)`` is a pure function of ``Bf16Call`` (the call's sizes, grouping, operand majorness and what
the launcher read off D's metadata) and of explicit ``Bf16Overrides`` (tests and sweeps force tiles and splits
through them; nothing here reads a mutable global). The launchers in ``bf16_triton.py`` only read the plan, and
resolve it once per call shape (``_triton/plans.ConfigCache``).

Tile choice: a small cost model over a fixed candidate list, each candidate priced as
``max(tensor-core time over the waves of tiles, operand bytes / achievable bandwidth)`` plus per-wave and split-K
reduction overheads. Tensor-core efficiency per tile shape is that of a ``tl.dot`` (wgmma) tile loop in Triton 3.6
(128 x 256 with 8 warps is the widest tile whose FP32 accumulator fits in registers: 128 per thread); tiles of fewer
than 64 rows run Ampere-style MMAs and exist for decode rows, where the bytes of B set the time and split-K fills
the machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from math import gcd

GROUPING = {"dense": 0, "m_ids": 1, "m_psum": 2, "masked": 3, "k_grouped": 4}

# Shared memory a config may use (sm_90a opt-in limit 227 KB, less Triton's barriers and reduction scratch).
SMEM_BYTES = 220 * 1024
MAX_STAGES = 6
# The H200's dense BF16 tensor-core peak per SM (989 TFLOPS / 132 SMs) and the fraction a tl.dot tile loop reaches
# per tile shape (BM, BN, warps) -- estimates that order the candidates, not measurements of this kernel.
PEAK_FLOPS_PER_SM = 989e12 / 132
TILE_EFFICIENCY = {(128, 256, 8): 0.80, (256, 128, 8): 0.78, (128, 128, 8): 0.70, (128, 128, 4): 0.62,
                   (64, 256, 4): 0.62, (64, 128, 4): 0.55, (64, 64, 4): 0.45}
SMALL_M_EFFICIENCY = 0.30  # BM < 64: mma.sync tiles
HBM_BYTES_PER_S = 3.3e12
# Bytes in flight per program over the memory latency bound a program's streaming rate (Little's law).
MEMORY_LATENCY_S = 1.2e-6
# HBM bandwidth needs most SMs streaming: fewer programs get a proportional share.
SATURATING_SM_FRACTION = 0.8
TILE_OVERHEAD_S = 0.6e-6  # prologue (pipeline fill) and epilogue per wave of tiles
SPLIT_OVERHEAD_S = 1.5e-6  # the last split's reduction and the atomics
MAX_SPLIT_K = 16
# Largest tile whose epilogue may touch memory through pointers: a 128 x 256 tile's pointer store, or its C load
# (offsets and masks per element next to the 128-register accumulator), spills at 8 warps
# (scripts/compile_check.py --bf16): wider tiles need a TMA store and no C.
POINTER_EPILOGUE_MAX_TILE = 128 * 128
GROUP_M = 8
# The warp-specialised Gluon kernel (kernels/bf16_gemm_ws.py: one TMA producer warp, two consumer warpgroups) for
# dense and M-grouped contiguous 128-row tiles without C, BF16 out by TMA: opt-in until measured against the tl.*
# kernel on the H200.
# DG_BF16_WS=1 (read once, at import) sets the process default; Bf16Overrides.ws overrides it per call.
DEFAULT_WS = os.environ.get("DG_BF16_WS", "0") == "1"
WS_SMEM_BYTES = 225 * 1024
WS_MAX_STAGES = 8
WS_REGISTERS = (232, 40)  # setmaxnreg per consumer warpgroup / producer warp (compiles without spills at 128 x 256)


@dataclass(frozen=True)
class Bf16Call:
    """What the plan sees of a call. ``k_divisor``: a number every K block must divide (0 = any): the K of a
    stacked MN-major B (a K block must not cross into the next expert's rows) or the gcd of K-grouped sizes."""

    grouping: int
    m: int  # rows of D per group (masked: Mmax; K-grouped: M)
    n: int
    k: int  # K (K-grouped: the sum of K sizes)
    num_groups: int
    num_sms: int
    has_c: bool
    out_bytes: int
    a_k_major: bool
    b_k_major: bool
    d_tma: bool  # D can be stored by one TMA store per tile (aligned rows, every in-range row written)
    psum_align: int = 128
    expected_m: int = 0
    k_divisor: int = 0
    zero_gaps: bool = True  # M-grouped psum: gap rows are zeroed (else left untouched)
    interpreting: bool = False


@dataclass(frozen=True)
class Bf16Config:
    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    split_k: int = 1
    group_m: int = GROUP_M


@dataclass(frozen=True)
class Bf16Overrides:
    """Forced choices (None = the heuristic's): a whole config, or single fields of the chosen one."""

    config: Bf16Config | None = None
    block_m: int | None = None
    block_n: int | None = None
    split_k: int | None = None
    d_tma: bool | None = None
    ws: bool | None = None  # the warp-specialised kernel where it covers the call (None: DEFAULT_WS)


NO_OVERRIDES = Bf16Overrides()


@dataclass(frozen=True)
class Bf16Plan:
    config: Bf16Config
    grid: int  # programs (persistent: each walks tiles grid apart)
    d_tma: bool
    g_pad: int  # power of two >= the group count (the kernel's per-group vectors)
    kernel: str = "tl"  # "tl" (kernels/bf16_gemm.py) or "ws" (kernels/bf16_gemm_ws.py; config.num_stages is its ring)


def next_pow2(x: int) -> int:
    return 1 << max(1, (max(1, x) - 1).bit_length())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _block_k(call: Bf16Call, preferred: int) -> int | None:
    for bk in (preferred, 64, 32, 16):
        if bk <= preferred and (call.k_divisor == 0 or call.k_divisor % bk == 0):
            return bk
    return None


def _stages(bm: int, bn: int, bk: int, epilogue_bytes: int) -> int:
    return min(MAX_STAGES, (SMEM_BYTES - epilogue_bytes) // ((bm + bn) * bk * 2))


def _rows(call: Bf16Call) -> int:
    """Rows of D a typical call computes (masked: the expected rows per group, over every group)."""
    if call.grouping == GROUPING["masked"]:
        per_group = call.expected_m or call.m
        return max(1, min(call.m, per_group)) * call.num_groups
    if call.grouping == GROUPING["k_grouped"]:
        return call.m * call.num_groups
    return call.m


def _candidates(call: Bf16Call):
    m = call.m if call.grouping != GROUPING["masked"] else max(1, min(call.m, call.expected_m or call.m))
    if m <= 64 and call.grouping in (GROUPING["dense"], GROUPING["masked"]):
        bm = max(16, next_pow2(m))
        for bn in (32, 64, 128):  # (wider tiles leave too few stages of 128-deep K blocks to stream B)
            yield bm, bn, 4, 128
    for bm, bn, warps in TILE_EFFICIENCY:
        yield bm, bn, warps, 64


def _cost(call: Bf16Call, cfg: Bf16Config, d_tma: bool) -> float:
    bm, bn, bk, split = cfg.block_m, cfg.block_n, cfg.block_k, cfg.split_k
    rows = _rows(call)
    groups_k = call.num_groups if call.grouping == GROUPING["k_grouped"] else 1
    k_per_tile = call.k / groups_k
    if call.grouping == GROUPING["masked"]:
        m_blocks = call.num_groups * _cdiv(max(1, rows // call.num_groups), bm)
    elif call.grouping == GROUPING["k_grouped"]:
        m_blocks = call.num_groups * _cdiv(call.m, bm)
    else:
        m_blocks = _cdiv(call.m, bm)
    tiles = m_blocks * _cdiv(call.n, bn) * split
    programs = min(tiles, call.num_sms)
    waves = _cdiv(tiles, call.num_sms)
    eff = TILE_EFFICIENCY.get((bm, bn, cfg.num_warps), SMALL_M_EFFICIENCY) if bm >= 64 else SMALL_M_EFFICIENCY
    k_split = _cdiv(_cdiv(int(k_per_tile), bk), split) * bk
    compute = waves * 2.0 * bm * bn * k_split / (PEAK_FLOPS_PER_SM * eff)
    b_sets = call.num_groups if call.grouping in (GROUPING["m_ids"], GROUPING["m_psum"], GROUPING["masked"]) else 1
    unique = 2.0 * (rows * call.k / groups_k + call.n * call.k * b_sets / groups_k) + rows * call.n * call.out_bytes
    in_flight = cfg.num_stages * (bm + bn) * bk * 2
    bandwidth = min(HBM_BYTES_PER_S * min(1.0, programs / (SATURATING_SM_FRACTION * call.num_sms)),
                    programs * in_flight / MEMORY_LATENCY_S)
    memory = unique / bandwidth
    cost = max(compute, memory) + waves * TILE_OVERHEAD_S
    if split > 1:
        cost += SPLIT_OVERHEAD_S + 2.0 * split * rows * call.n * 4 / HBM_BYTES_PER_S
    return cost


def _fits(call: Bf16Call, bm: int) -> bool:
    if call.grouping in (GROUPING["m_ids"], GROUPING["m_psum"]):
        return call.psum_align % bm == 0  # a tile lies in one group (or in padding)
    return True


def _config(call: Bf16Call, bm: int, bn: int, warps: int, bk_pref: int, split: int, d_tma: bool):
    bk = _block_k(call, bk_pref)
    if bk is None or (bm * bn > POINTER_EPILOGUE_MAX_TILE and (not d_tma or call.has_c)):
        return None
    epilogue = bm * bn * call.out_bytes if d_tma else 0
    stages = _stages(bm, bn, bk, epilogue)
    if stages < 2:
        return None
    return Bf16Config(bm, bn, bk, stages, warps, split)


def _splits(call: Bf16Call, bm: int, bn: int):
    if call.grouping != GROUPING["dense"]:
        return (1,)
    tiles = _cdiv(call.m, bm) * _cdiv(call.n, bn)
    out = [1]
    s = 2
    while s <= MAX_SPLIT_K and tiles * s <= 2 * call.num_sms and _cdiv(call.k, 64) >= 4 * s:
        out.append(s)
        s *= 2
    return out


def plan(call: Bf16Call, overrides: Bf16Overrides = NO_OVERRIDES) -> Bf16Plan | None:
    """The call's plan, or None when no config covers it (an alignment no tile height divides, a K no K block
    divides)."""
    d_tma_ok = call.d_tma if overrides.d_tma is None else (overrides.d_tma and call.d_tma)
    if overrides.config is not None:
        cfg = overrides.config
        if not _fits(call, cfg.block_m) or (call.k_divisor and call.k_divisor % cfg.block_k):
            return None
        return _finish(call, cfg, d_tma_ok and _stages(cfg.block_m, cfg.block_n, cfg.block_k,
                                                       cfg.block_m * cfg.block_n * call.out_bytes) >= 2, overrides)
    best = None
    for bm, bn, warps, bk_pref in _candidates(call):
        if overrides.block_m is not None and bm != overrides.block_m:
            continue
        if overrides.block_n is not None and bn != overrides.block_n:
            continue
        if not _fits(call, bm):
            continue
        splits = _splits(call, bm, bn) if overrides.split_k is None else (overrides.split_k,)
        for split in splits:
            for d_tma in ((True, False) if d_tma_ok else (False,)):
                cfg = _config(call, bm, bn, warps, bk_pref, split, d_tma)
                if cfg is None:
                    continue
                # TMA stores cost a little shared memory and save the pointer epilogue: prefer them on ties.
                cost = _cost(call, cfg, d_tma) * (1.0 if d_tma else 1.02)
                if best is None or cost < best[0]:
                    best = (cost, cfg, d_tma)
    if best is None:
        if overrides.block_m is not None or overrides.block_n is not None:
            # An override outside the candidate list: take it as given (4 warps below 128 rows, else 8).
            bm = overrides.block_m or 128
            bn = overrides.block_n or 128
            if not _fits(call, bm):
                return None
            cfg = _config(call, bm, bn, 8 if bm >= 128 else 4, 64, overrides.split_k or 1, False)
            return None if cfg is None else _finish(call, cfg, False, overrides)
        return None
    return _finish(call, best[1], best[2], overrides)


def _ws_covers(call: Bf16Call, cfg: Bf16Config, d_tma: bool) -> bool:
    """Dense and M-grouped contiguous calls (psum gaps zeroed: every tile stored whole) on 128-row tiles, no C,
    BF16 D stored by TMA."""
    layouts = (GROUPING["dense"], GROUPING["m_ids"], GROUPING["m_psum"])
    return (call.grouping in layouts and call.zero_gaps and not call.has_c and call.out_bytes == 2 and d_tma
            and not call.interpreting and cfg.split_k == 1 and cfg.block_m == 128 and cfg.block_n in (128, 256))


def _finish(call: Bf16Call, cfg: Bf16Config, d_tma: bool, overrides: Bf16Overrides = NO_OVERRIDES) -> Bf16Plan:
    ws = DEFAULT_WS if overrides.ws is None else overrides.ws
    if ws and _ws_covers(call, cfg, d_tma):
        ring = (WS_SMEM_BYTES - 2 * 64 * cfg.block_n * 2) // ((cfg.block_m + cfg.block_n) * cfg.block_k * 2)
        cfg = Bf16Config(cfg.block_m, cfg.block_n, cfg.block_k, min(WS_MAX_STAGES, ring), 4, 1, cfg.group_m)
        tiles = _cdiv(call.m, cfg.block_m) * _cdiv(call.n, cfg.block_n)
        return Bf16Plan(cfg, max(1, min(tiles, call.num_sms)), True, next_pow2(call.num_groups), "ws")
    if call.grouping in (GROUPING["masked"], GROUPING["k_grouped"]):
        grid = call.num_sms  # the tile count is known on the device only (masked) or may be large
        if call.grouping == GROUPING["k_grouped"]:
            grid = min(grid, call.num_groups * _cdiv(call.m, cfg.block_m) * _cdiv(call.n, cfg.block_n))
    else:
        tiles = _cdiv(call.m, cfg.block_m) * _cdiv(call.n, cfg.block_n) * cfg.split_k
        grid = min(tiles, call.num_sms)
    if call.grouping == GROUPING["masked"] or call.grouping == GROUPING["k_grouped"]:
        d_tma = False
    return Bf16Plan(cfg, max(1, grid), d_tma, next_pow2(call.num_groups))


def k_divisor_of(ks) -> int:
    """The gcd of K sizes (0 when all are 0)."""
    g = 0
    for k in ks:
        g = gcd(g, int(k))
    return g
