"""The one plan of a BF16 GEMM call: tile, K block, stages, warps, split-K and grid of ``gemm/bf16/kernels/gemm.py``.

``plan(call, overrides)`` is a pure function of ``Bf16Call`` (the call's sizes, grouping, operand majorness and what
the launcher read off D's metadata) and of explicit ``Bf16Overrides`` (tests and sweeps force tiles and splits
through them; nothing here reads a mutable global). The launchers in ``gemm/bf16/launch.py`` only read the plan, and
resolve it once per call shape (``core/plans.ConfigCache``).

Tile choice: a small cost model over a fixed candidate list, each candidate priced as
``max(tensor-core time over the waves of tiles, operand bytes / achievable bandwidth)`` plus per-wave and split-K
reduction overheads. Tensor-core efficiency per tile shape is that of a ``tl.dot`` (wgmma) tile loop in Triton 3.6
(128 x 256 with 8 warps is the widest tile whose FP32 accumulator fits in registers: 128 per thread); tiles of fewer
than 64 rows run Ampere-style MMAs and exist for decode rows, where the bytes of B set the time and split-K fills
the machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from math import gcd

from ...core import arch
from ...utils.numeric import ceil_div, group_pad, next_pow2

GROUPING = {"dense": 0, "m_ids": 1, "m_psum": 2, "masked": 3, "k_grouped": 4}

# Shared memory a config may use (sm_90a opt-in limit 227 KB, less Triton's barriers and reduction scratch; other
# architectures: the same margin below their own limit, arch.smem_budget).
SMEM_BYTES = 220 * 1024
MAX_STAGES = 12  # (streaming-bound tiles at M <= 128 want many K blocks in flight: STREAM_LATENCY_S)
# Dense decode tiles (BM < 64) keep a 6-stage ring: deeper rings were slower there, except on an unsplit 16 x 32
# tile (see docs/TUNING.md).
DECODE_STAGES = 6
# The H200's dense BF16 tensor-core peak per SM (989 TFLOPS / 132 SMs) and the fraction of it a tile's K loop reaches
# per tile shape (BM, BN, warps): the 128-row entries are fitted to measured waves of tiles, the narrower ones are
# estimates that order the candidates.
PEAK_FLOPS_PER_SM = 989e12 / 132
TILE_EFFICIENCY = {(128, 256, 8): 0.80, (256, 128, 8): 0.78, (128, 128, 8): 0.79, (128, 128, 4): 0.62,
                   (64, 256, 4): 0.62, (64, 128, 4): 0.55, (64, 64, 4): 0.45}
# The warp-specialised kernel's (same bench, DG_BF16_WS=1): one TMA warp keeps its ring full while two warpgroups
# issue wgmmas back to back.
WS_TILE_EFFICIENCY = {(128, 256): 0.835, (128, 128): 0.82,
                      # The 64-row tiles (SPLIT_N: each consumer a 64 x BN/2 wgmma over the shared A stage): estimates
                      # that order the two widths (64 x 256 reads A's stage twice per K block, 64 x 128 B's too).
                      (64, 256): 0.78, (64, 128): 0.70}
SMALL_M_EFFICIENCY = 0.30  # BM < 64: mma.sync tiles
HBM_BYTES_PER_S = 3.3e12
# A program streams its operand tiles from L2 at (bytes in flight) / STREAM_LATENCY_S (Little's law). Fitted to
# 128 x 4096 x 7168 on 64 x 64 tiles (33 us: 1.84 MB per program with 96 KB in flight): at M = 128 every program
# re-reads A from L2, and these L2 -> SM bytes, not HBM's unique bytes, set the time.
STREAM_LATENCY_S = 1.75e-6
# HBM bandwidth needs most SMs streaming: fewer programs get a proportional share.
SATURATING_SM_FRACTION = 0.8
TILE_OVERHEAD_S = 0.6e-6  # prologue (pipeline fill) and epilogue per tile
SPLIT_OVERHEAD_S = 1.5e-6  # the last split's arrival, atomics and counter reset
# The last piece of a split tile reads every partial back (plain loads, one tile at a time) and each piece writes its
# own: FP32 tile bytes at about this rate per program.
PARTIAL_BYTES_PER_S = 100e9
# A second launch on the stream (the split pieces after the WS kernel's whole waves): its start and pipeline fill.
SECOND_LAUNCH_S = 3e-6
MAX_SPLIT_K = 16
MIN_K_BLOCKS_PER_SPLIT = 4
# A split piece of a tile of 64 or more rows streams at least this many pipeline depths of K blocks: shorter pieces
# run slower than the model prices them (their pipeline fill is not amortised).
MIN_PIECE_DEPTHS = 3
# Largest tile whose epilogue may touch memory through pointers: a 128 x 256 tile's pointer store, or its C load
# (offsets and masks per element next to the 128-register accumulator), spills at 8 warps
# (scripts/compile_check.py --bf16): wider tiles need a TMA store and no C. Split-K partials are pointer stores too.
POINTER_EPILOGUE_MAX_TILE = 128 * 128
GROUP_M = 8
# The warp-specialised Gluon kernel (gemm/bf16/kernels/gemm_ws.py: one TMA producer warp, two consumer warpgroups)
# covers dense calls (C by TMA) and M-grouped contiguous 128-row tiles, D by TMA, without split-K. The plan prices it
# next to the tl.* kernel ("auto") on dense and expert-id calls, on psum calls with untouched gaps and on K-grouped
# calls (_plan), and runs masked calls of many rows per group on it (_masked_plan).
# DG_BF16_WS (read once, at import): "1" = the WS kernel wherever it covers the call, "0" = never, unset = "auto";
# Bf16Overrides.ws (True / False) overrides it per call.
DEFAULT_WS_MODE = {"1": "on", "0": "off"}.get(os.environ.get("DG_BF16_WS", "auto"), "auto")
WS_SMEM_BYTES = 225 * 1024
WS_MAX_STAGES = 8
# At K <= 512 the WS kernel's 128 x 128 tile beats its 128 x 256 one (too few K blocks to amortise the wide tile's
# prologue), and the tl.* kernel the model would take instead is slower still. So "auto" runs dense short-K calls of
# at least a wave of 128 x 128 tiles on the WS kernel's 128 x 128 tile; fewer tiles stay with the cost model (64-row
# and split tiles fill more SMs).
SHORT_K_WS_NARROW = 512
WS_REGISTERS = (232, 40)  # setmaxnreg per consumer warpgroup / producer warp (compiles without spills at 128 x 256)
# The psum layout on the WS kernel. DeepGEMM's SM90 psum calls leave gap rows untouched (ensure_zero_padding=False),
# which a whole-tile TMA store cannot: the WS kernel stores a psum slab wholly inside its group by TMA and the slab
# holding the group's end by a masked pointer store (its ZERO_GAPS), which makes these calls as fast as the expert-id
# layout of the same problems, so "auto" prices it there. Psum with zeroed gaps stays on tl.*. Bf16Overrides(ws=True /
# False) forces either.
# ... and with the tile's expert and group end (reductions over the per-group vector of group ends) marked
# warp-uniform for ptxas (kernels/uniform.py, one redux.sync each): unmarked, the K loops they bound lose the uniform
# datapath. The same bits either way. Bf16Overrides.uniform_tiles forces either.
UNIFORM_TILES = True
# K-grouped calls (D, C FP32 [G, M, N]; A, B MN-major) on the WS kernel (its K_GROUPED grouping: D and C through
# [G*M, N] TMA descriptors, so M % 64 == 0: a 64-row slab never straddles two groups; 128 x 128 tiles, as every FP32-D
# WS call: a 128 x 256 tile's two FP32 staging buffers would leave 2 stages of ring). The WS kernel keeps its ring
# full where the tl.* pipeline does not, so "auto" takes it wherever it covers a K-grouped call;
# Bf16Overrides(ws=False) forces the tl.* kernel.
# The tl.* K-grouped build's K range marked warp-uniform (kernels/uniform.tl_warp_uniform), so its K loop keeps the
# uniform datapath as the dense build's does; same bits by construction. On for the calls the WS kernel does not cover
# (M % 64 != 0). Bf16Overrides.uniform_tiles forces either.
UNIFORM_K_GROUPED_TL = True


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
    c_tma: bool = False  # C can be loaded by TMA through a descriptor of D's shape (C is D, or laid out like it)
    interpreting: bool = False
    # D's rows can be TMA-stored (16-byte aligned rows and start) even where not every row may be written (d_tma):
    # psum with gaps left untouched, whose WS kernel stores whole slabs by TMA
    d_aligned: bool = False
    # The device's SM version (deep_gemm.core.arch): the WS kernel is sm_90a code (_ws_runs); the tl.* kernel's
    # pipelines are sized to the device's shared memory (_smem); below sm_80 nothing runs (plan: None).
    sm: int = arch.SM90
    # Deterministic mode (core/determinism.py) when the call was made: no split-K unless forced (_splits,
    # masked_split), so a row's K reduction does not depend on M.
    deterministic: bool = False


@dataclass(frozen=True)
class Bf16Config:
    """``split_k`` > 1 (dense): tiles from ``split_from`` on run as ``split_k`` K ranges each (0: every tile; a
    multiple of the grid: only the tiles of the last, partial wave). Masked: the tiles of the last, partial wave
    (counted on the device from masked_m) run as min(``split_k``, grid // those tiles) K ranges each
    (gemm/bf16/kernels/gemm.py; ``split_from`` unused). ``block_n_tail`` > 0 (dense, unsplit,
    no C): each tile is ``block_n + block_n_tail`` columns wide, the tail in a second accumulator (register tensors
    are powers of two): 128 + 16 = 144 covers N = 576 in 4 tile columns, 4096 x 576 in one wave of 128 tiles. The
    WS kernel runs it (TAIL_N, on its own ring): by default where _wave_filling_tail finds a tail, or forced with
    ``Bf16Overrides(ws=True)`` on a 128 x 128 tile (BF16 D)."""

    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    num_warps: int
    split_k: int = 1
    group_m: int = GROUP_M
    split_from: int = 0
    block_n_tail: int = 0

    @property
    def tile_n(self) -> int:
        """Columns of D one tile covers."""
        return self.block_n + self.block_n_tail


@dataclass(frozen=True)
class Bf16Overrides:
    """Forced choices (None = the heuristic's): a whole config, or single fields of the chosen one."""

    config: Bf16Config | None = None
    block_m: int | None = None
    block_n: int | None = None
    split_k: int | None = None
    d_tma: bool | None = None
    # The warp-specialised kernel: True = wherever it covers the call, False = never, None = DEFAULT_WS_MODE.
    ws: bool | None = None
    # Its whole waves + the tl.* kernel's split last wave ("ws_tail"): True = wherever it covers the call (even with
    # ws=True), False = never, None = where the model prices it lowest ("auto" mode).
    ws_tail: bool | None = None
    # The psum, masked and K-grouped layouts' values marked warp-uniform (WS: UNIFORM_TILES; K-grouped tl.*:
    # UNIFORM_K_GROUPED_TL); None = the default.
    uniform_tiles: bool | None = None
    # A psum call in the decode form run as a masked one over its group ends (PSUM_WALK_MAX_EXPECTED_M): True =
    # wherever it covers the call, False = never, None = the default rule.
    psum_walk: bool | None = None

    def __post_init__(self):
        # Kernel constexprs: anything but a bool would compile (or cache) a variant nobody asked for.
        for name in ("ws", "ws_tail", "uniform_tiles", "psum_walk"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"Bf16Overrides.{name} must be None or a bool, not {value!r}")


NO_OVERRIDES = Bf16Overrides()


@dataclass(frozen=True)
class Bf16Plan:
    config: Bf16Config
    grid: int  # programs (persistent: each walks work items grid apart)
    d_tma: bool
    g_pad: int  # power of two >= the group count (the kernel's per-group vectors)
    # "tl" (gemm/bf16/kernels/gemm.py), "ws" (gemm/bf16/kernels/gemm_ws.py; config.num_stages is its ring) or "ws_tail":
    # the WS kernel (ws_config) runs the whole waves, tiles [0, config.split_from), then the tl.* kernel only the split
    # pieces of the tiles after them (config).
    kernel: str = "tl"
    ws_config: Bf16Config | None = None
    uniform: bool = False  # psum / masked on "ws", K-grouped: layout values marked warp-uniform (UNIFORM_TILES, ...)
    # A psum call run as the masked plan of its group ends (the tl.* kernel's PSUM_WALK; _psum_walk_covers)
    psum_walk: bool = False


def _block_k(call: Bf16Call, preferred: int) -> int | None:
    for bk in (preferred, 64, 32, 16):
        if bk <= preferred and (call.k_divisor == 0 or call.k_divisor % bk == 0):
            return bk
    return None


def _smem(call: Bf16Call) -> int:
    """The shared memory a tl.* config of the call may use on its device."""
    return arch.smem_budget(SMEM_BYTES, call.sm)


def _stages(bm: int, bn: int, bk: int, epilogue_bytes: int, smem: int = SMEM_BYTES) -> int:
    return min(MAX_STAGES, (smem - epilogue_bytes) // ((bm + bn) * bk * 2))


def _ws_runs(call: Bf16Call) -> bool:
    """Whether the warp-specialised Gluon kernel can run the call at all: compiled (not under the interpreter) for
    an sm_90a device (arch.has_wgmma)."""
    return not call.interpreting and arch.has_wgmma(call.sm)


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


def _tiles(call: Bf16Call, bm: int, bn: int) -> int:
    if call.grouping == GROUPING["masked"]:
        m_blocks = call.num_groups * ceil_div(max(1, _rows(call) // call.num_groups), bm)
    elif call.grouping == GROUPING["k_grouped"]:
        m_blocks = call.num_groups * ceil_div(call.m, bm)
    else:
        m_blocks = ceil_div(call.m, bm)
    return m_blocks * ceil_div(call.n, bn)


def _cost(call: Bf16Call, cfg: Bf16Config, kernel: str = "tl") -> float:
    """Modelled seconds of the call: the busiest program's tiles (each the slower of its tensor-core time and of
    streaming its operand tiles from L2), the split pieces after the whole tiles, and HBM's unique bytes."""
    bm, bn, bk, split = cfg.block_m, cfg.block_n, cfg.block_k, cfg.split_k
    rows = _rows(call)
    groups_k = call.num_groups if call.grouping == GROUPING["k_grouped"] else 1
    tiles = _tiles(call, bm, bn)
    whole = min(cfg.split_from, tiles) if split > 1 else tiles
    pieces = (tiles - whole) * split
    programs = min(whole + pieces, call.num_sms)
    if kernel == "ws":
        eff = WS_TILE_EFFICIENCY[(bm, bn)]
    else:
        eff = TILE_EFFICIENCY.get((bm, bn, cfg.num_warps), SMALL_M_EFFICIENCY) if bm >= 64 else SMALL_M_EFFICIENCY
    a_rows = min(bm, max(1, rows if call.grouping == GROUPING["dense"] else bm))  # (TMA reads no row past M)

    def tile_time(k_len, eff=eff, stages=cfg.num_stages):
        compute = 2.0 * bm * bn * k_len / (PEAK_FLOPS_PER_SM * eff)
        stream = (a_rows + bn) * k_len * 2.0 / (stages * (bm + bn) * bk * 2 / STREAM_LATENCY_S)
        return max(compute, stream)

    k_blocks = ceil_div(int(call.k / groups_k), bk)
    rounds = ceil_div(whole, call.num_sms)
    overheads = 0.0
    if kernel == "ws_tail":  # the whole waves in the WS kernel (its ring), then a second launch for the pieces
        ws = _ws_config(call, bn, bk)
        body = rounds * tile_time(k_blocks * bk, WS_TILE_EFFICIENCY[(bm, bn)], ws.num_stages)
        overheads += SECOND_LAUNCH_S
    else:
        body = rounds * tile_time(k_blocks * bk)
    if pieces:
        partial = bm * bn * 4.0 / PARTIAL_BYTES_PER_S
        piece_rounds = ceil_div(pieces, call.num_sms)
        body += piece_rounds * tile_time(ceil_div(k_blocks, split) * bk)
        rounds += piece_rounds
        overheads += piece_rounds * partial + SPLIT_OVERHEAD_S + split * partial  # (the last piece's reduction)
    b_sets = call.num_groups if call.grouping in (GROUPING["m_ids"], GROUPING["m_psum"], GROUPING["masked"]) else 1
    unique = 2.0 * (rows * call.k / groups_k + call.n * call.k * b_sets / groups_k) + rows * call.n * call.out_bytes
    hbm = unique / (HBM_BYTES_PER_S * min(1.0, programs / (SATURATING_SM_FRACTION * call.num_sms)))
    return max(body, hbm) + overheads + rounds * TILE_OVERHEAD_S


def _fits(call: Bf16Call, bm: int) -> bool:
    if call.grouping in (GROUPING["m_ids"], GROUPING["m_psum"]):
        return call.psum_align % bm == 0  # a tile lies in one group (or in padding)
    return True


def _config(call: Bf16Call, bm: int, bn: int, warps: int, bk_pref: int, split: int, d_tma: bool,
            split_from: int = 0):
    bk = _block_k(call, bk_pref)
    if bk is None:
        return None
    if bm * bn > POINTER_EPILOGUE_MAX_TILE and (not d_tma or call.has_c or split > 1):
        return None
    if split > 1 and call.has_c and bm * bn >= POINTER_EPILOGUE_MAX_TILE:
        return None  # (C's pointer load in both epilogues of a split 128 x 128 tile spills: compile_check --bf16)
    epilogue = bm * bn * call.out_bytes if d_tma else 0
    stages = _stages(bm, bn, bk, epilogue, _smem(call))
    if bm < 64 and call.grouping == GROUPING["dense"] and (split > 1 or bn > 32):
        stages = min(stages, DECODE_STAGES)
    if stages < 2:
        return None
    return Bf16Config(bm, bn, bk, stages, warps, split, GROUP_M, split_from if split > 1 else 0)


def _splits(call: Bf16Call, bm: int, bn: int):
    """(split_k, split_from) choices of a dense call: whole tiles; every tile split (few tiles: decode and M = 128
    rows, where more programs stream more bytes); or only the last, partial wave split (wave quantisation)."""
    yield 1, 0
    if call.grouping != GROUPING["dense"] or bm * bn > POINTER_EPILOGUE_MAX_TILE or call.deterministic:
        return
    tiles = ceil_div(call.m, bm) * ceil_div(call.n, bn)
    k_blocks = ceil_div(call.k, 64)
    # Every split count whose pieces fit one round of programs (a second round of a few pieces nearly doubles the
    # time), not only powers of two.
    for s in range(2, MAX_SPLIT_K + 1):
        if tiles * s > call.num_sms or k_blocks < MIN_K_BLOCKS_PER_SPLIT * s:
            break
        yield s, 0
    waves, tail = divmod(tiles, call.num_sms)
    if waves and tail and bm >= 64:
        for s in range(2, MAX_SPLIT_K + 1):
            if k_blocks >= MIN_K_BLOCKS_PER_SPLIT * s:
                yield s, waves * call.num_sms


def _ws_mode(overrides: Bf16Overrides) -> str:
    return DEFAULT_WS_MODE if overrides.ws is None else ("on" if overrides.ws else "off")


def _ws_config(call: Bf16Call, bn: int, bk: int, tail: int = 0, bm: int = 128) -> Bf16Config:
    """The WS kernel's config: as deep a ring of A + B (+ tail B) stages as fits beside the two 64-row staging
    buffers of D (128 + 16: 5 stages; 128 + 64: 4). ``bm`` 64: the 64 x bn tile whose column halves the consumers
    split (the kernel's SPLIT_N), so each staging buffer is 64 x bn/2 (64 x 256: 4 stages; 64 x 128: 8)."""
    tile_n = bn + tail
    slab_n = tile_n // 2 if bm == 64 else tile_n
    ring = (WS_SMEM_BYTES - 2 * 64 * slab_n * call.out_bytes) // ((bm + tile_n) * bk * 2)
    return Bf16Config(bm, bn, bk, min(WS_MAX_STAGES, ring), 4, 1, GROUP_M, block_n_tail=tail)


def plan(call: Bf16Call, overrides: Bf16Overrides = NO_OVERRIDES) -> Bf16Plan | None:
    """The call's plan, or None when no config covers it (an alignment no tile height divides, a K no K block
    divides, a split of a grouped call, a device without BF16 MMAs)."""
    if not arch.has_mma(call.sm):
        return None
    if call.grouping == GROUPING["masked"]:
        return _masked_plan(call, overrides)
    if _psum_walk_covers(call, overrides):
        p = _masked_plan(replace(call, grouping=GROUPING["masked"]), replace(overrides, ws=False))
        if p is not None:
            return replace(p, psum_walk=True)
    p = _plan(call, overrides)
    if p is None:
        return p
    if call.grouping == GROUPING["k_grouped"] and not call.interpreting:  # (no inline assembly when interpreting)
        return replace(p, uniform=_uniform(overrides, UNIFORM_TILES if p.kernel == "ws" else UNIFORM_K_GROUPED_TL))
    if p.kernel != "ws" or call.grouping != GROUPING["m_psum"]:
        return p
    return replace(p, uniform=_uniform(overrides, UNIFORM_TILES))


def _uniform(overrides: Bf16Overrides, default: bool) -> bool:
    """Whether a plan's layout values are marked warp-uniform: Bf16Overrides.uniform_tiles, else the default."""
    return default if overrides.uniform_tiles is None else overrides.uniform_tiles


def _plan(call: Bf16Call, overrides: Bf16Overrides) -> Bf16Plan | None:
    d_tma_ok = call.d_tma if overrides.d_tma is None else (overrides.d_tma and call.d_tma)
    # Psum with gaps left untouched: the WS kernel stores whole slabs by TMA, the slab holding a group's end by
    # pointers (d_tma is off: a whole-tile TMA store would write the gap rows).
    untouched_ok = (call.grouping == GROUPING["m_psum"] and not call.zero_gaps and call.d_aligned
                    and overrides.d_tma is not False)
    # K-grouped: D (and C) stored (loaded) by the WS kernel's TMA over [G*M, N] (_k_grouped_ws_ok); d_tma stays off
    # for its tl.* plans (pointer epilogue).
    kgrouped_ok = _k_grouped_ws_ok(call) and overrides.d_tma is not False
    mode = _ws_mode(overrides)
    if overrides.config is not None:
        cfg = overrides.config
        if not _fits(call, cfg.block_m) or (call.k_divisor and call.k_divisor % cfg.block_k):
            return None
        if cfg.split_k > 1 and not _splits_ok(call):
            return None
        if cfg.block_n_tail and not _tail_covers(call, cfg):
            return None
        d_tma = d_tma_ok and _stages(cfg.block_m, cfg.tile_n, cfg.block_k, cfg.block_m * cfg.tile_n
                                     * call.out_bytes, _smem(call)) >= 2
        if mode == "on" and _ws_covers(call, cfg, d_tma or untouched_ok or kgrouped_ok):
            return _finish(call, _ws_config(call, cfg.block_n, cfg.block_k, cfg.block_n_tail), True, "ws")
        return _finish(call, cfg, d_tma)
    best = None
    for bm, bn, warps, bk_pref in _candidates(call):
        if overrides.block_m is not None and bm != overrides.block_m:
            continue
        if overrides.block_n is not None and bn != overrides.block_n:
            continue
        if not _fits(call, bm):
            continue
        splits = _splits(call, bm, bn) if overrides.split_k is None else _forced_splits(call, overrides.split_k)
        for split, split_from in splits:
            for d_tma in ((True, False) if d_tma_ok else (False,)):
                cfg = _config(call, bm, bn, warps, bk_pref, split, d_tma, split_from)
                if cfg is None or (overrides.split_k is None and _piece_too_short(call, cfg)):
                    continue
                # TMA stores cost a little shared memory and save the pointer epilogue: prefer them on ties.
                cost = _cost(call, cfg) * (1.0 if d_tma else 1.02)
                if _masked_decode_tile(call) == (bm, bn, bk_pref):
                    cost *= MASKED_DECODE_PREFERENCE
                if best is None or cost < best[0]:
                    best = (cost, cfg, d_tma, "tl")
    # Both modes need a call of at least one tile of rows (decode rows keep their narrow tiles); "auto" prices the
    # WS kernel where it was measured: dense and expert-id calls.
    auto_ws = call.grouping in (GROUPING["dense"], GROUPING["m_ids"], GROUPING["k_grouped"]) or (
        call.grouping == GROUPING["m_psum"] and not call.zero_gaps)
    if (mode == "on" or (mode == "auto" and auto_ws)) and call.m >= 128 and overrides.split_k in (None, 1) \
            and overrides.block_m in (None, 128) and (d_tma_ok or untouched_ok or kgrouped_ok):
        bk = _block_k(call, 64)
        short_k = (mode == "auto" and call.grouping == GROUPING["dense"] and overrides.block_n is None
                   and call.k <= SHORT_K_WS_NARROW and _tiles(call, 128, 128) >= call.num_sms)
        for bn in (256, 128):
            if bk is None or (overrides.block_n is not None and bn != overrides.block_n) or not _fits(call, 128):
                continue
            if bn == 256 and short_k:
                continue
            cfg = _ws_config(call, bn, bk)
            if cfg.num_stages < 3 or not _ws_covers(call, cfg, True):
                continue
            # "auto": the deeper ring streams better than the tl.* pipeline at equal modelled time (measured on the
            # HBM-bound 128 x 24576 x 1536: 30.6 us against 32.6); "on": any tile it covers beats tl.*.
            weight = 0.98 if mode == "auto" else 1e-3
            cost = _cost(call, cfg, "ws") * (1e-3 if short_k else weight)
            if best is None or cost < best[0]:
                best = (cost, cfg, True, "ws")
            # Its whole waves, then the tl.* kernel for the last wave's tiles split along K (dense, no C: a split
            # 128 x 128 tile with C spills). "auto" only: "on" is the WS kernel alone (an A/B of the kernels).
            tail_ok = overrides.ws_tail or (overrides.ws_tail is None and mode == "auto")
            if bn == 128 and call.grouping == GROUPING["dense"] and overrides.split_k is None and tail_ok:
                for split, split_from in _splits(call, 128, 128):
                    tail = _config(call, 128, 128, 8, 64, split, True, split_from) if split_from else None
                    if tail is None:
                        continue
                    cost = _cost(call, tail, "ws_tail") * (1e-6 if overrides.ws_tail else weight)
                    if cost < best[0]:
                        best = (cost, tail, True, "ws_tail")
        # A measured rule, not the cost model (it has no efficiency figure for the tail tiles): see WS_TAIL_WIDTHS.
        tail_n = _wave_filling_tail(call) if mode == "auto" and overrides.block_n is None \
            and overrides.ws_tail is None and _fits(call, 128) else 0
        if tail_n and bk is not None:
            cfg = _ws_config(call, 128, bk, tail_n)
            if cfg.num_stages >= 3 and _ws_covers(call, cfg, True):
                best = (0.0, cfg, True, "ws")
    if best is None:
        if overrides.block_m is not None or overrides.block_n is not None:
            # An override outside the candidate list: take it as given (4 warps below 128 rows, else 8).
            bm = overrides.block_m or 128
            bn = overrides.block_n or 128
            if not _fits(call, bm):
                return None
            split = overrides.split_k or 1
            if split > 1 and not _splits_ok(call):
                return None
            cfg = _config(call, bm, bn, 8 if bm >= 128 else 4, 64, split, False)
            return None if cfg is None else _finish(call, cfg, False)
        return None
    return _finish(call, best[1], best[2], best[3])


# Tail widths of the WS kernel's 128 x (128 + tail) tile the plan takes on its own: where N is a whole number of such
# tiles (4096 x 576 on 128 x 144, 4096 x 2112 on 128 x 192) one wave of them beats the cost model's choice.
WS_TAIL_WIDTHS = (16, 32, 64)
# ... only where the tail tiles fill at least this share of a wave (a thin last wave gives the gain back).
WS_TAIL_MIN_WAVE_FILL = 0.85


def _wave_filling_tail(call: Bf16Call) -> int:
    """The tail of the 128 x (128 + tail) WS tile for a dense BF16-out call without C, A and B both K-major (nt) or
    both MN-major (tn), whose N is a whole number of such tiles but not of 128-column ones (so no tile has columns
    past N), when those tiles fill the SMs' waves (WS_TAIL_MIN_WAVE_FILL); of several, the one that fills its waves
    best (ties: the wider tile). 0: none."""
    if call.grouping != GROUPING["dense"] or call.has_c or call.out_bytes != 2 or call.n % 128 == 0:
        return 0
    if call.a_k_major != call.b_k_major:  # (nn / tt: the tail tile is not tuned for mixed majors)
        return 0
    best, best_fill = 0, WS_TAIL_MIN_WAVE_FILL
    for tail in WS_TAIL_WIDTHS:
        if call.n % (128 + tail):
            continue
        tiles = ceil_div(call.m, 128) * (call.n // (128 + tail))
        fill = tiles / (ceil_div(tiles, call.num_sms) * call.num_sms)
        if fill >= best_fill:
            best, best_fill = tail, fill
    return best


# Masked calls of at most MASKED_DECODE_MAX_M expected rows per group stream B and little else, and the cost model
# prices every candidate tile within 2 % (all bound by HBM's unique bytes); the 32 x 128 tile (BK 128, the plan's 5
# stages) is the fastest of them on such rows (see docs/TUNING.md), so the plan weights it in ahead of its near-ties.
MASKED_DECODE_MAX_M = 32
MASKED_DECODE_TILE = (32, 128, 128)  # (BM, BN, preferred BK): one of _candidates' decode tiles
MASKED_DECODE_PREFERENCE = 0.9


def _masked_decode_tile(call: Bf16Call):
    """The measured tile of a masked decode call (MASKED_DECODE_TILE), or None for any other call."""
    if call.grouping != GROUPING["masked"] or max(1, min(call.m, call.expected_m or call.m)) > MASKED_DECODE_MAX_M:
        return None
    return MASKED_DECODE_TILE


# Masked decode calls with few tiles: split the last, partial wave along K. Those calls stream B (G x N x K BF16) and
# little else; 32 x 128 tiles give G = 6, N x K = 6144 x 7168 288 tiles, 2.18 waves of 132 SMs: after two whole
# waves 24 SMs stream the last 24 tiles while 108 idle, and a few SMs cannot draw HBM's bandwidth. The kernel cuts
# each tile of that last wave into min(split_k, grid // its tiles) K ranges (it counts tiles on the device: masked_m
# is never read on the host), so the pieces fill the grid. The plan picks split_k by a small model of the call
# (_masked_split_time): whole waves at HBM's rate, the last wave at the rate of the SMs streaming it (at most HBM's),
# and the split's reduction. The two rates are fitted to masked decode times (see docs/TUNING.md).
MASKED_SPLIT_HBM_BYTES_PER_S = 4.17e12
MASKED_SPLIT_SM_BYTES_PER_S = 55e9
# A split must save this share of the modelled time (the model is fitted, not measured, for splits).
MASKED_SPLIT_MIN_GAIN = 0.02


def _masked_split_time(call: Bf16Call, cfg: Bf16Config, split: int) -> float:
    """Modelled seconds of a masked decode call on cfg's tile with the last wave split at most ``split`` ways, from
    the expected tile count (expected_m rows per group): every SM streams the whole waves' B tiles (HBM-bound:
    132 x 55 GB/s is past HBM's rate), the last wave's SMs stream its tiles at their combined rate (at most HBM's),
    and a split's last piece per tile reduces the FP32 partials (SPLIT_OVERHEAD_S, PARTIAL_BYTES_PER_S)."""
    tiles = _tiles(call, cfg.block_m, cfg.block_n)
    waves, last = divmod(tiles, call.num_sms)
    pieces = min(split, call.num_sms // last) if last else 1  # (the kernel's rule)
    tile_bytes = 2.0 * call.n / ceil_div(call.n, cfg.block_n) * call.k  # (B's bytes per tile: it dominates)
    whole = waves * call.num_sms * tile_bytes / MASKED_SPLIT_HBM_BYTES_PER_S
    rate = min(MASKED_SPLIT_HBM_BYTES_PER_S, last * pieces * MASKED_SPLIT_SM_BYTES_PER_S)
    tail = last * tile_bytes / rate if last else 0.0
    if pieces > 1:  # (each piece writes its partial, the last reads them all)
        tail += SPLIT_OVERHEAD_S + (pieces + 1) * cfg.block_m * cfg.block_n * 4.0 / PARTIAL_BYTES_PER_S
    return whole + tail


def masked_split(call: Bf16Call, cfg: Bf16Config) -> int:
    """The split_k of a masked decode call on the tl.* config ``cfg`` (MASKED_DECODE_MAX_M expected rows per group
    or fewer, an unsplit tile whose partials a pointer epilogue may write): the smallest that _masked_split_time
    prices lowest, where it saves MASKED_SPLIT_MIN_GAIN of the unsplit time; else 1. At most MAX_SPLIT_K, and pieces
    of at least MIN_K_BLOCKS_PER_SPLIT K blocks."""
    if (_masked_decode_tile(call) is None or cfg.split_k != 1 or cfg.block_n_tail
            or cfg.block_m * cfg.block_n > POINTER_EPILOGUE_MAX_TILE or call.deterministic):
        return 1
    most = min(MAX_SPLIT_K, ceil_div(call.k, cfg.block_k) // MIN_K_BLOCKS_PER_SPLIT)
    unsplit = _masked_split_time(call, cfg, 1)
    best, best_time = 1, unsplit
    for split in range(2, most + 1):
        t = _masked_split_time(call, cfg, split)
        if t < best_time:
            best, best_time = split, t
    return best if best_time < (1.0 - MASKED_SPLIT_MIN_GAIN) * unsplit else 1


def _piece_too_short(call: Bf16Call, cfg: Bf16Config) -> bool:
    return (cfg.split_k > 1 and cfg.block_m >= 64
            and ceil_div(ceil_div(call.k, cfg.block_k), cfg.split_k) < MIN_PIECE_DEPTHS * cfg.num_stages)


def _splits_ok(call: Bf16Call) -> bool:
    """The groupings the tl.* kernel splits along K: dense (from split_from on) and masked (its last wave)."""
    return call.grouping in (GROUPING["dense"], GROUPING["masked"])


def _forced_splits(call: Bf16Call, split: int):
    if split > 1 and not _splits_ok(call):
        return ()
    return ((split, 0),)


def _tail_covers(call: Bf16Call, cfg: Bf16Config) -> bool:
    """A tile with a tail accumulator (forced configs, and the default where _wave_filling_tail finds one): dense,
    unsplit, no C, a power-of-two tail of at least one 16-column MMA."""
    tail = cfg.block_n_tail
    return (call.grouping == GROUPING["dense"] and cfg.split_k == 1 and not call.has_c and tail >= 16
            and tail & (tail - 1) == 0)


def _k_grouped_ws_ok(call: Bf16Call) -> bool:
    """A K-grouped call the WS kernel can store: D's [G*M, N] rows TMA-aligned (d_aligned), C (if any) loaded by TMA
    through a descriptor of D's layout (c_tma), and M a multiple of the 64-row slab, so that no slab of the [G*M, N]
    matrix holds two groups' rows (a slab past M stores nothing; M % 64 != 0: the tl.* kernel's pointer epilogue)."""
    return (call.grouping == GROUPING["k_grouped"] and call.d_aligned and call.m % 64 == 0
            and (not call.has_c or call.c_tma))


def _ws_covers(call: Bf16Call, cfg: Bf16Config, d_tma: bool) -> bool:
    """Dense (C, if any, loaded by TMA) and M-grouped contiguous calls (psum gaps zeroed, or left untouched: the
    slab holding a group's end stored by pointers) on 128 x 128 / 128 x 256 tiles, D stored by TMA (FP32 D:
    128 x 128, its staging buffers); 128 x (128 + tail) tiles: dense, no C, BF16 D (_tail_covers); K-grouped calls
    where _k_grouped_ws_ok."""
    layouts = (GROUPING["dense"], GROUPING["m_ids"], GROUPING["m_psum"], GROUPING["k_grouped"])
    if call.grouping == GROUPING["k_grouped"] and not _k_grouped_ws_ok(call):
        return False
    c_ok = not call.has_c or (call.c_tma and call.grouping in (GROUPING["dense"], GROUPING["k_grouped"]))
    width_ok = cfg.block_n == 128 or (cfg.block_n == 256 and call.out_bytes == 2)
    tail_ok = cfg.block_n_tail == 0 or (cfg.block_n == 128 and call.out_bytes == 2 and _tail_covers(call, cfg))
    gaps_ok = call.zero_gaps or (call.grouping == GROUPING["m_psum"] and call.d_aligned)
    return (call.grouping in layouts and gaps_ok and c_ok and d_tma and _ws_runs(call)
            and cfg.split_k == 1 and cfg.block_m == 128 and width_ok and tail_ok)


def _finish(call: Bf16Call, cfg: Bf16Config, d_tma: bool, kernel: str = "tl") -> Bf16Plan:
    if kernel == "ws":
        tiles = ceil_div(call.m, cfg.block_m) * ceil_div(call.n, cfg.tile_n)
        if call.grouping == GROUPING["k_grouped"]:
            tiles *= call.num_groups
        return Bf16Plan(cfg, max(1, min(tiles, call.num_sms)), True, group_pad(call.num_groups), "ws")
    if kernel == "ws_tail":  # (grid: the tl.* launch of the pieces; the WS launch runs the whole waves on every SM)
        pieces = (ceil_div(call.m, cfg.block_m) * ceil_div(call.n, cfg.block_n) - cfg.split_from) * cfg.split_k
        return Bf16Plan(cfg, max(1, min(pieces, call.num_sms)), d_tma, group_pad(call.num_groups), "ws_tail",
                        _ws_config(call, cfg.block_n, cfg.block_k))
    if call.grouping in (GROUPING["masked"], GROUPING["k_grouped"]):
        grid = call.num_sms  # the tile count is known on the device only (masked) or may be large
        if call.grouping == GROUPING["k_grouped"]:
            grid = min(grid, call.num_groups * ceil_div(call.m, cfg.block_m) * ceil_div(call.n, cfg.block_n))
    else:
        tiles = ceil_div(call.m, cfg.block_m) * ceil_div(call.n, cfg.tile_n)
        if cfg.split_k > 1:
            whole = min(cfg.split_from, tiles)
            if whole != cfg.split_from:
                cfg = Bf16Config(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps, cfg.split_k,
                                 cfg.group_m, whole)
            tiles = whole + (tiles - whole) * cfg.split_k
        grid = min(tiles, call.num_sms)
    if call.grouping == GROUPING["masked"] or call.grouping == GROUPING["k_grouped"]:
        d_tma = False
    return Bf16Plan(cfg, max(1, grid), d_tma, group_pad(call.num_groups))


def k_divisor_of(ks) -> int:
    """The gcd of K sizes (0 when all are 0)."""
    g = 0
    for k in ks:
        g = gcd(g, int(k))
    return g


# ---- masked calls on the warp-specialised kernel ----------------------------------------------------------------
# The WS kernel's MASKED grouping (gemm/bf16/kernels/gemm_ws.py): tiles counted and placed on the device from masked_m
# (no host sync, graph-capturable), 128 x 128 / 128 x 256 tiles, whole 64-row slabs of valid rows stored by TMA
# through a [G*Mmax, N] descriptor of D (d_aligned), the slab holding a group's end by pointers, nothing past it.
# Its K loops are the expert-id layout's. "auto" runs masked calls of more than MASKED_WS_MIN_EXPECTED_M expected
# rows per group on the WS kernel's 128 x 256 tile, where it is faster; B-streaming rows of fewer expected rows stay
# on the tl.* kernel's tiles (see docs/TUNING.md). Bf16Overrides(ws=True / False) forces either way (DG_BF16_WS too;
# ws=True prices both widths), Bf16Overrides.uniform_tiles the uniform marks (default UNIFORM_TILES, as for psum).
MASKED_WS_MIN_EXPECTED_M = 512
MASKED_WS_AUTO_WIDTH = 256
# The WS kernel's 64 x 256 tile (SPLIT_N: its two consumers split the tile's columns, gemm/bf16/kernels/gemm_ws.py) for
# masked calls of a few hundred rows per group runs only where forced (Bf16Overrides(ws=True, block_m=64)): half-width
# wgmmas and B reloaded per 64 rows cost what the empty rows of 128-row tiles would save.

def _masked_plan(call: Bf16Call, overrides: Bf16Overrides) -> Bf16Plan | None:
    """A masked call's plan: the tl.* kernel's (_plan), or the WS kernel's where forced (ws=True, DG_BF16_WS=1:
    the width the cost model prices lower; 64-row tiles with block_m=64) or, in "auto" mode, for a call of more
    than MASKED_WS_MIN_EXPECTED_M expected rows per group (the 128 x MASKED_WS_AUTO_WIDTH tile). A tl.*
    plan of a decode call splits its last wave where masked_split says (unless split_k or a config is forced)."""
    tl_plan = _plan(call, overrides)
    if tl_plan is not None and overrides.split_k is None and overrides.config is None:
        split = masked_split(call, tl_plan.config)
        if split > 1:
            tl_plan = replace(tl_plan, config=replace(tl_plan.config, split_k=split))
    mode = _ws_mode(overrides)
    expected = max(1, min(call.m, call.expected_m or call.m))
    # (a forced config reaches the WS kernel in "on" mode only)
    auto128 = (mode == "auto" and overrides.config is None
               and expected > MASKED_WS_MIN_EXPECTED_M)
    if not (mode == "on" or auto128):
        return tl_plan
    if mode == "auto" and overrides.block_n is None:
        overrides = replace(overrides, block_n=MASKED_WS_AUTO_WIDTH)
    # Tile heights: 64 (SPLIT_N) where forced (ws=True and block_m=64, or a forced 64-row config); a block_m=64
    # override under "auto" keeps meaning the tl.* kernel's 64-row tile.
    heights = (64,) if mode == "on" and overrides.block_m == 64 else (128,)
    best = None
    for cfg in _masked_ws_configs(call, overrides, heights):
        cost = _cost(call, cfg, "ws")
        if best is None or cost < best[0]:
            best = (cost, cfg)
    if best is None:
        return tl_plan
    uniform = _uniform(overrides, UNIFORM_TILES)
    # (grid: the SMs, or fewer where masked_m could not give as many tiles; only the device knows the count, and a
    # CTA past it exits at once)
    grid = min(call.num_sms, call.num_groups * ceil_div(call.m, best[1].block_m) * ceil_div(call.n, best[1].block_n))
    return Bf16Plan(best[1], max(1, grid), True, group_pad(call.num_groups), "ws", uniform=uniform)


# M-grouped psum calls in the decode form: ``expected_m_for_psum_layout`` of at most PSUM_WALK_MAX_EXPECTED_M rows
# per group, gaps left untouched. DeepGEMM's masked-through-psum form hands A as G x Mmax rows of which each group
# uses about expected_m, so tiles enumerated over A's rows are nearly all empty (G = 32, Mmax = 4096, 20 rows a group:
# 1 tile in 32 holds rows). Such a call runs as the masked call of its group ends (the tl.* kernel's PSUM_WALK: the
# tiles of each group's rows only, the masked decode tiles and last-wave split); more expected rows per group keep
# the psum plan, whose 128-row WS tiles the masked plan prefers there too (MASKED_WS_MIN_EXPECTED_M).
PSUM_WALK_MAX_EXPECTED_M = MASKED_WS_MIN_EXPECTED_M
# It passed its GPU tests, but it covers gaps left untouched only, while DeepGEMM's own masked-through-psum rows
# call with ensure_zero_padding's default, True, whose contract here zeroes every row of no group (docs/TUNING.md):
# with the rule on, those rows did not move (0.533x). Off by default until the walk can take over zeroed gaps;
# Bf16Overrides(psum_walk=True) runs it.
PSUM_WALK_BY_DEFAULT = False


def psum_walk_rule(call: Bf16Call) -> bool:
    """The default rule, in force where PSUM_WALK_BY_DEFAULT: a psum call the walk covers (_psum_walk_covers) with
    at most PSUM_WALK_MAX_EXPECTED_M expected rows per group."""
    return call.expected_m <= PSUM_WALK_MAX_EXPECTED_M


def _psum_walk_covers(call: Bf16Call, overrides: Bf16Overrides) -> bool:
    """Whether ``call`` runs as the masked call of its group ends: Bf16Overrides.psum_walk, else the default rule
    (psum_walk_rule, where PSUM_WALK_BY_DEFAULT); either way only a psum call with gaps left untouched, K-major A
    (the masked kernel's), an expected row count, no forced config and not forced onto the WS kernel."""
    if (call.grouping != GROUPING["m_psum"] or call.zero_gaps or call.expected_m <= 0 or not call.a_k_major
            or overrides.config is not None or overrides.ws or overrides.psum_walk is False):
        return False
    return overrides.psum_walk is True or (PSUM_WALK_BY_DEFAULT and psum_walk_rule(call))


def _masked_ws_configs(call: Bf16Call, overrides: Bf16Overrides, heights=(128,)):
    """The WS kernel's configs for a masked call (heights x 256, heights x 128; a forced config: its own height,
    64 or 128) within the overrides, where it covers the call: D's [G*Mmax, N] rows TMA-aligned (d_aligned), BF16 D,
    K-major A (the launcher copies an MN-major one), no split, a K block that divides the K of a stacked MN-major B;
    not in the interpreter (Gluon)."""
    if not call.d_aligned or not _ws_runs(call) or call.out_bytes != 2 or not call.a_k_major:
        return
    forced = overrides.config
    if forced is not None:
        heights = (forced.block_m,)
    bm = heights[0]
    if overrides.split_k not in (None, 1) or overrides.block_m not in (None, bm) or overrides.d_tma is False:
        return
    bk = _block_k(call, 64)
    if forced is not None:
        if (forced.split_k, forced.block_n_tail) != (1, 0) or bm not in (64, 128) or forced.block_n not in (128, 256):
            return
        if call.k_divisor and call.k_divisor % forced.block_k:
            return
        bk, widths = forced.block_k, (forced.block_n,)
    else:
        widths = (256, 128) if overrides.block_n is None else (overrides.block_n,)
    for bn in widths:
        if bk is None or bn not in (128, 256):
            continue
        cfg = _ws_config(call, bn, bk, bm=bm)
        if cfg.num_stages >= 3:
            yield cfg
