"""CUDA launchers of ``einsum`` (BF16) and ``fp8_einsum`` (block-scaled FP8): the Triton kernels of ``kernels.py``.

Each expression is a batched GEMM once its operands are permuted (views, never copies, for every BF16 expression)
into the NT form ``A [G, M, K]``, ``B [G, N, K]`` (or ``[G, K, N]``), ``D [G, M, N]`` (``checks.Equation``):

* ``"bhr,hdr->bhd"``: G = h, M = b, N = d, K = r;  ``"bhd,hdr->bhr"``: G = h, M = b, N = r, K = d (B N-major);
* ``"bmk,bnk->mn"``: the batch is contracted too: the batch is split into ranges (``bmk_plan``: a bytes/latency
  model picks how many), each range's FP32 partial summed in range order (``BmkPlan``: on CUDA by every program of
  the same cooperative launch, else by a second launch): the same bits on every call, no float atomics;
* FP8 ``"bhd,bhr->hdr"``: G = h, M = d, N = r, K = b: both operands are MN-major, which FP8 wgmma cannot read, so
  they are copied K-major first (as is W of FP8 ``"bhd,hdr->bhr"``); every other FP8 operand is read in place.
  FP8 scales may be given per 128 or per 32 K elements (the kernel's BK follows). Large FP8 problems (many rows per
  batch entry) run one dense FP8 GEMM per entry instead (``FP8_PER_ENTRY_MIN_M``).

``use_cublaslt=True`` (the ``bh*`` expressions) runs cuBLAS's strided batched GEMM through ``torch.bmm`` into ``d``
(DeepGEMM's cuBLASLt path). Calls the kernels do not cover return ``NotImplemented`` (the reference runs): operands
whose strides or start are not 16-byte aligned (TMA), FP8 scale recipes other than A per row and B per 128 or per
row. Launches are recorded per argument signature and replayed (``_triton/plans.replayable``).

Devices: the kernels are ``tl.*`` kernels tuned on sm_90a. On a device with less shared memory per block (sm_80,
sm_89, sm_120: ``deep_gemm.arch``) the planned tile's pipeline is cut to fit (``fit_smem``), to a narrower tile where
not even two stages fit; ``fp8_einsum`` needs FP8 MMAs (sm_89 and later, else the reference runs); the cooperative
``"grid"`` reduction is offered only where SMs have sm_90's limits (``arch.sm90_occupancy``).

Tile configs (``TileConfig``) come from ``bh_config`` / ``bmk_plan`` / ``fp8_config``; a ``config=`` keyword
(through ``_ops.library.run_launcher``: a ``TileConfig``, or for ``bmk,bnk->mn`` a ``BmkPlan``) pins one for sweeps
(``benchmarks/bench_einsum.py --sweep``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from .. import arch
from .._internals import COMPILE_OPTIONS
from .._triton.launch import descriptor, interpreting, launch
from .._triton.plans import replayable
from .._triton.scratch import split_k_buffers
from ..gemm.operands import resolve_recipe, write_without_product
from ..runtime import get_num_sms
from .checks import NO_CUBLASLT_EXPRESSION, Equation


@dataclass(frozen=True)
class TileConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    persistent: bool = False  # grid = #SMs (programs loop over tiles) instead of one program per tile
    flatten: bool = False  # (persistent) one software pipeline across tiles (tl.range(flatten=True))
    d_halves: bool = False  # (bh kernel, TMA-stored D) store D as two half-width tiles: half the epilogue buffer

    def __str__(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"
                f"{' persistent' if self.persistent else ''}{' flat' if self.flatten else ''}"
                f"{' halves' if self.d_halves else ''}")


# BF16 batched (bh*) configs: 128x256 for large compute-bound problems, 128x128 otherwise, 64-row tiles for small M.
# 128x256 stores D in two halves, so that a fourth stage fits (224 KB of shared memory), and runs one pipeline
# across tiles, so a tile's loads start during the previous epilogue.
BH_LARGE = TileConfig(128, 256, 64, 8, 4, persistent=True, flatten=True, d_halves=True)
BH_MEDIUM = TileConfig(128, 128, 64, 8, 3)
BH_SMALL_M = TileConfig(64, 128, 64, 4, 4)
# Small M with too few 128-column tiles to occupy the SMs (e.g. 4 tokens x 8 heads x 1024 columns): 64 columns.
BH_SMALL_M_NARROW = TileConfig(64, 64, 64, 4, 6)
# Fewer 128x128 tiles than half the SMs (e.g. 128 tokens x 8 heads x 1024 columns, K = 4096): 64 columns, twice the
# programs; B is still read once (each program streams its own 64 rows of B; the 128 rows of A it shares with the
# other column blocks of its batch entry come from L2). Six stages: 144 KB, one program per SM, long K.
BH_NARROW = TileConfig(128, 64, 64, 4, 6)
# Short K (a few K blocks per tile): one pipeline across tiles, so a tile's loads start during the previous epilogue.
BH_SHORT_K = TileConfig(128, 128, 64, 8, 3, persistent=True, flatten=True)
# The same with 256 rows (plain BF16 outputs, M >= 256): B's tile read once per 256 rows of A.
BH_SHORT_K_TALL = TileConfig(256, 128, 64, 8, 3, persistent=True, flatten=True)
SHORT_K = 1024
# Configs only for plain BF16 outputs (BH_WIDE: 256-wide or 256-high tiles, or too many stages for FP32 / C
# epilogue tiles; see bh_config).
BH_WIDE = (BH_LARGE, TileConfig(128, 256, 64, 8, 3, persistent=True), TileConfig(128, 256, 64, 8, 3),
           TileConfig(64, 256, 64, 4, 3), TileConfig(128, 256, 64, 8, 3, persistent=True, flatten=True),
           # the 128x256 tile with one pipeline per tile
           TileConfig(128, 256, 64, 8, 4, persistent=True, d_halves=True),
           # 256 rows (two 128-row halves per warpgroup): B's tile read once per 256 rows of A (short K, small N)
           BH_SHORT_K_TALL,
           # four stages across tiles: with an FP32 D and C staged for TMA it would need 256 KB
           TileConfig(128, 128, 64, 8, 4, persistent=True, flatten=True))
BH_CONFIGS = BH_WIDE + (BH_MEDIUM, BH_SMALL_M, BH_SMALL_M_NARROW, BH_SHORT_K, BH_NARROW, TileConfig(64, 128, 64, 4, 6),
                        TileConfig(128, 128, 64, 8, 4, persistent=True), TileConfig(128, 128, 64, 8, 4),
                        TileConfig(64, 128, 64, 4, 3),
                        TileConfig(64, 128, 64, 4, 4, persistent=True, flatten=True))
BMK_CONFIGS = (TileConfig(128, 128, 64, 8, 4), TileConfig(64, 128, 64, 4, 4))
# FP8: 64x64 where 128x128 tiles would leave half the SMs idle (e.g. 128 tokens x 8 heads x 1024 columns: 64 tiles)
# and for small M below one wave (six stages: 96 KB); 128x64 (144 KB) for sweeps (see fp8_config).
FP8_NARROW = TileConfig(128, 64, 128, 4, 6)
FP8_SMALL_M_NARROW = TileConfig(64, 64, 128, 4, 6)
FP8_CONFIGS = (TileConfig(128, 128, 128, 8, 4, persistent=True), TileConfig(64, 128, 128, 4, 4),
               TileConfig(128, 128, 128, 8, 4), TileConfig(128, 128, 128, 8, 3, persistent=True, flatten=True),
               FP8_NARROW, FP8_SMALL_M_NARROW)
# Programs per SM of the bmk GEMM kernel (resident together: shared memory of NUM_STAGES stages) by (BM, BN), which
# the batch split fills once at most; the parallel reduction's programs per SM (at least) and warps.
BMK_PROGRAMS_PER_SM = {(128, 128): 1, (64, 128): 2}
# The parallel reduction (_bmk_reduce_partials): at least BMK_REDUCE_PROGRAMS_PER_SM programs per SM, so that the
# partials' bytes spread evenly over the SMs (a third or fourth program per SM evens out 1.5 or 1.9 per SM), of at
# most BMK_REDUCE_MAX_ROWS rows of a half tile, two elements per thread (the warps follow); the ranges' loads issued
# together, BMK_REDUCE_LOADS at a time (the fewest of these that cover the split: one binary each; 64 loads of 8
# bytes take 152 registers per thread, no spills).
BMK_REDUCE_PROGRAMS_PER_SM = 2
BMK_REDUCE_MAX_ROWS = 8
BMK_REDUCE_LOADS = (16, 32, 64)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _num_sms() -> int:
    return get_num_sms() or 1


# Off sm_90, where a config's pipeline must fit less shared memory (fit_smem): the estimate's margin for Triton's
# barriers and conversion scratch, and the narrower tiles tried, in order, when not even two stages of a tile fit.
SMEM_MARGIN = 4096
BF16_NARROWER = (BH_MEDIUM, BH_SMALL_M, BH_SMALL_M_NARROW)
FP8_NARROWER = (FP8_CONFIGS[1], FP8_SMALL_M_NARROW)


def fit_smem(cfg: TileConfig, sm: int, elem_bytes: int, epilogue_bytes: int, narrower=(), block_k: int = 0):
    """``cfg`` on an ``sm`` device: itself where the device has sm_90's shared memory (the configs were sized and
    compile-checked there), else its deepest pipeline (at most ``cfg.num_stages``) that fits the device's opt-in
    shared memory next to ``epilogue_bytes`` of D / C staging, estimated as (BM + BN) x BK x ``elem_bytes`` per
    stage; where not even two stages fit, the first of ``narrower`` (smaller tiles, persistence kept) where they do,
    else one stage of the smallest. ``block_k``: the K block the launch uses, when not the config's (FP8 scales per
    32)."""
    if arch.shared_memory(sm) >= arch.SM90_SHARED_MEMORY:
        return cfg
    budget = arch.shared_memory(sm) - SMEM_MARGIN
    candidate = cfg
    for candidate in (cfg, *[replace(t, persistent=cfg.persistent, flatten=cfg.flatten and cfg.persistent)
                             for t in narrower if t.block_m * t.block_n < cfg.block_m * cfg.block_n]):
        epilogue = epilogue_bytes * candidate.block_m * candidate.block_n // (cfg.block_m * cfg.block_n)
        per_stage = (candidate.block_m + candidate.block_n) * (block_k or candidate.block_k) * elem_bytes
        stages = min(candidate.num_stages, (budget - epilogue) // per_stage)
        if stages >= 2:
            return replace(candidate, num_stages=stages, d_halves=candidate.d_halves and candidate is cfg)
    return replace(candidate, num_stages=1, d_halves=False)


def fitted_bh_config(cfg: TileConfig, out_bytes: int, has_c: bool, sm: int) -> TileConfig:
    """A planned BF16 batched tile (``bh_config``) on an ``sm`` device (``fit_smem``; D and C tiles staged)."""
    tile_bytes = cfg.block_m * cfg.block_n * out_bytes
    return fit_smem(cfg, sm, 2, tile_bytes * (2 if has_c else 1), BF16_NARROWER)


def fitted_fp8_config(cfg: TileConfig, out_bytes: int, has_c: bool, gran_k: int, sm: int) -> TileConfig:
    """A planned FP8 batched tile (``fp8_config``) on an ``sm`` device, K blocks of ``gran_k`` (``fit_smem``)."""
    tile_bytes = cfg.block_m * cfg.block_n * out_bytes
    return fit_smem(cfg, sm, 1, tile_bytes * (2 if has_c else 1), FP8_NARROWER, gran_k)


def bh_config(g: int, m: int, n: int, k: int, plain_bf16_out: bool) -> TileConfig:
    """``plain_bf16_out``: BF16 D stored by TMA without C, the only epilogue the 128x256 tile has room for (FP32 or
    C tiles exceed shared memory; pointer stores spill)."""
    if m <= 64:
        return BH_SMALL_M_NARROW if g * _cdiv(m, 64) * _cdiv(n, 128) < _num_sms() else BH_SMALL_M
    if plain_bf16_out and n >= 256 and k >= SHORT_K and g * _cdiv(m, 128) * _cdiv(n, 256) >= 0.9 * _num_sms():
        return BH_LARGE  # (one wave at 90 % of the SMs: fewer A re-reads and tile ramps than two of 128x128)
    if 2 * g * _cdiv(m, 128) * _cdiv(n, 128) <= _num_sms():
        return BH_NARROW
    if k <= SHORT_K and g * _cdiv(m, 128) * _cdiv(n, 128) >= 2 * _num_sms():
        return BH_SHORT_K_TALL if plain_bf16_out and m >= 256 else BH_SHORT_K
    return BH_MEDIUM


@dataclass(frozen=True)
class BmkPlan:
    """How ``bmk,bnk->mn`` runs: ``tile``; the batch split into ``splits`` ranges (one program per (range, tile));
    the ranges' FP32 partials combined in range order, by ``reduce``:

    * ``"parallel"``: a second launch (``_bmk_reduce_partials``) where each program sums all ranges' partials for
      ``reduce_rows`` rows of half a tile (0: chosen from the tile count), so the partials are read by as many
      programs as there are chunks, not by one program per tile;
    * ``"serial"``: inside the GEMM kernel, the last range to arrive at a tile's counter sums the tile's partials
      alone (one launch; its reduction reads ``splits`` partials one after another);
    * ``"grid"``: inside the GEMM kernel, every range waits at its tile's counter until the tile's ranges have all
      arrived, then sums 1/``splits`` of the tile's elements over all ranges (one cooperative launch, the reduction
      spread over every program). CUDA only: the interpreter runs programs one after another, where a wait never
      ends, so the launcher runs ``"parallel"`` there; on CUDA it does the same when the compiled kernel's programs
      would not all be resident at once (``_triton.launch.launch`` declines such a cooperative launch).

    All give the same bits on every call (no float atomics); ``"grid"`` and ``"parallel"`` the same bits as each
    other (each element summed from -0.0 in range order, then C); ``splits == 1`` stores D directly.

    For sweeps of ``"parallel"``: ``reduce_loads`` ranges loaded before they are added (0: the fewest of
    ``BMK_REDUCE_LOADS`` that cover the split)."""
    tile: TileConfig
    splits: int
    reduce: str = "parallel"
    reduce_rows: int = 0
    reduce_loads: int = 0

    def __str__(self) -> str:
        extra = (f" rm={self.reduce_rows}" if self.reduce_rows else "") + (
            f" loads={self.reduce_loads}" if self.reduce_loads else "")
        return f"{self.tile} splits={self.splits} {self.reduce}{extra}"


# Batch x K below which a bmk reduction is short enough to be latency-bound: there the 64 x 128 tile (two programs
# per SM, half the batch ranges for the same wave) is faster than 128 x 128, while long reductions are split anyway.
BMK_SHORT_REDUCTION = 65536


def bmk_config(m: int, n: int, s: int = 0, k: int = 0) -> TileConfig:
    """The bmk tile: 64 x 128 for short M or a short batch x K reduction, else 128 x 128."""
    return BMK_CONFIGS[1] if m <= 64 or 0 < s * k < BMK_SHORT_REDUCTION else BMK_CONFIGS[0]


def bmk_reductions(cooperative: bool | None = None) -> tuple[str, ...]:
    """The reductions a plan may pick: ``"grid"`` only where launches can be cooperative (CUDA, not Triton's
    interpreter: ``cooperative=None`` asks which backend launches)."""
    if cooperative is None:
        cooperative = not interpreting()
    return ("parallel", "serial", "grid") if cooperative else ("parallel", "serial")


def bmk_plan(s: int, m: int, n: int, k: int, tile: TileConfig | None = None, reduce: str | None = None,
             cooperative: bool | None = None, sm: int = arch.SM90) -> BmkPlan:
    """The batch split and reduction with about the least modelled time (``bmk_time_us``), at most one wave of
    programs (``BMK_PROGRAMS_PER_SM`` per SM for ``tile``, one per (range, tile): so a ``"grid"`` plan's programs
    are all resident at once); ``reduce`` pins the reduction, ``cooperative`` whether ``"grid"`` may be picked
    (``bmk_reductions``; never where the device's SMs lack sm_90's limits, ``arch.sm90_occupancy``). ``sm``: the
    device's SM version; a planned tile (not a given one) is fitted to its shared memory (``fit_smem``)."""
    if tile is None:
        # (FP32 partials or D, and C, staged for TMA at worst)
        tile = bmk_config(m, n, s, k)
        tile = fit_smem(tile, sm, 2, 2 * tile.block_m * tile.block_n * 4, (BMK_CONFIGS[1],))
    if not arch.sm90_occupancy(sm):
        cooperative = False
    tiles = _cdiv(m, tile.block_m) * _cdiv(n, tile.block_n)
    wave = BMK_PROGRAMS_PER_SM.get((tile.block_m, tile.block_n), 1) * _num_sms()
    # Only the fewest ranges for each batch entries per range: more ranges of the same length add reduction only
    # (and _launch_bmk launches that count anyway).
    counts = sorted({_cdiv(s, _cdiv(s, x)) for x in range(1, max(1, min(s, wave // tiles)) + 1)})
    times = {(x, r): bmk_time_us(s, m, n, k, tile, x, r) for x in counts
             for r in ((reduce,) if reduce else bmk_reductions(cooperative))}
    # The most ranges within BMK_TIME_SLACK of the best: where DRAM bounds the time, more programs in flight cost
    # little (a larger reduction) and guard against a per-program rate below the model's.
    fastest = min(times.values())
    splits, reduce = max((key for key, t in times.items() if t <= fastest * BMK_TIME_SLACK),
                         key=lambda key: (key[0], -times[key]))
    return BmkPlan(tile, splits, reduce)


# The bytes/latency model of a bmk split (H200; constants to be refitted from benchmarks/bench_einsum.py --sweep):
# operand bytes stream from DRAM once (the tiles of a range run side by side and share A or B through L2) at
# BMK_DRAM_GBPS, and each program streams its range at BMK_PROGRAM_GBPS (a few stages in flight per SM); the two
# times combine as a root sum of squares, not a max: where they are close, neither hides the other (the max model
# picked too few ranges). A split adds its reduction. Parallel: one launch, BMK_REDUCE_LAUNCH_US, one L2 round trip
# per 8 ranges and the partials written and read at BMK_L2_GBPS. Serial: the partials written, then one program per
# tile reads its tile's partials alone at BMK_SERIAL_GBPS. Grid: the partials written and read at BMK_L2_GBPS as in
# parallel (every program reads a slice), no launch but a wait for the tile's slowest range and the counter's
# atomics (BMK_GRID_SYNC_US), one L2 round trip per 16 ranges (16 loads in flight).
BMK_DRAM_GBPS = 3500.0
# Per program, by tile (BM, BN): 128 x 128 runs one program per SM, 64 x 128 two, which share the SM's load rate
# (both rates fitted to measured splits of DeepGEMM's s = 129 rows).
BMK_PROGRAM_GBPS = {(128, 128): 100.0, (64, 128): 70.0}
BMK_PIPELINE_FILL_US = 1.0
# The parallel reduction's terms, fitted to an earlier reduction kernel: they over-model the current one, but a
# refit moves no plan to a faster split (see docs/TUNING.md).
BMK_REDUCE_LAUNCH_US = 2.0
BMK_L2_ROUND_TRIP_US = 0.5
BMK_L2_GBPS = 6000.0
# (the serial reduction: one program per tile reads its partials alone, fitted to the s = 129 rows)
BMK_SERIAL_GBPS = 55.0
# Fitted to the GPU time of one kernel against two: the wait for a tile's slowest range, then each program's short
# slice read in a few dependent L2 round trips, costs more than the reduction kernel, so the plan keeps "parallel";
# "grid" stays selectable (BmkPlan(reduce="grid")): one launch instead of two, for callers who count launches.
BMK_GRID_SYNC_US = 4.0
BMK_TIME_SLACK = 1.03


def bmk_time_us(s: int, m: int, n: int, k: int, tile: TileConfig, splits: int, reduce: str = "parallel") -> float:
    tiles = _cdiv(m, tile.block_m) * _cdiv(n, tile.block_n)
    dram = s * (m + n) * k * 2
    per_program = _cdiv(s, splits) * (tile.block_m + tile.block_n) * k * 2
    program_gbps = BMK_PROGRAM_GBPS.get((tile.block_m, tile.block_n), BMK_PROGRAM_GBPS[128, 128])
    t = math.hypot(dram / BMK_DRAM_GBPS, per_program / program_gbps) / 1e3 + BMK_PIPELINE_FILL_US
    if splits > 1:
        tile_bytes = tile.block_m * tile.block_n * 4
        partials = splits * tiles * tile_bytes
        if reduce == "parallel":
            t += BMK_REDUCE_LAUNCH_US + _cdiv(splits, 8) * BMK_L2_ROUND_TRIP_US + 2 * partials / BMK_L2_GBPS / 1e3
        elif reduce == "grid":
            t += BMK_GRID_SYNC_US + _cdiv(splits, 16) * BMK_L2_ROUND_TRIP_US + 2 * partials / BMK_L2_GBPS / 1e3
        else:
            t += partials / BMK_L2_GBPS / 1e3 + splits * tile_bytes / BMK_SERIAL_GBPS / 1e3
    return t


def fp8_config(g: int, m: int, n: int) -> TileConfig:
    if m <= 64:
        return FP8_SMALL_M_NARROW if g * _cdiv(m, 64) * _cdiv(n, 128) < _num_sms() else FP8_CONFIGS[1]
    if 2 * g * _cdiv(m, 128) * _cdiv(n, 128) <= _num_sms():
        # 64x64 rather than 128x64 (FP8_NARROW): four programs per 128x128 tile, two resident per SM.
        return FP8_SMALL_M_NARROW
    return FP8_CONFIGS[0]


def _tma_ready(t: torch.Tensor) -> bool:
    """Whether a TMA descriptor can describe t as it is: unit last stride, 16-byte aligned other strides and start
    (read off the storage offset: what the op's memoised signature sees), sizes within TMA's limits."""
    elem = t.element_size()
    return (t.stride(-1) == 1 and all((s * elem) % 16 == 0 for s in t.stride()[:-1])
            and (t.storage_offset() * elem) % 16 == 0 and t.size(-1) * elem >= 16
            and all(0 < s < 2**31 for s in t.shape))


def _desc3(t: torch.Tensor, block):
    return descriptor(t, tuple(t.shape), tuple(t.stride()), tuple(block))


def _out_descs(d3: torch.Tensor, c3, bm: int, bn: int, fallback):
    """(d_desc, c_desc, d_tma, c_tma) of a [G, M, N] output and its optional accumulator: TMA descriptors where the
    tensor allows one (C by TMA only when D is stored by TMA), else ``fallback`` in the unused slots."""
    d_tma = _tma_ready(d3)
    c_tma = d_tma and c3 is not None and c3.dtype == d3.dtype and _tma_ready(c3)
    d_desc = _desc3(d3, (1, bm, bn)) if d_tma else fallback
    c_desc = (d_desc if c3 is d3 else _desc3(c3, (1, bm, bn))) if c_tma else d_desc
    return d_desc, c_desc, d_tma, c_tma


def _grid(cfg: TileConfig, tiles: int) -> int:
    return min(tiles, _num_sms()) if cfg.persistent else tiles


def _record(recorder):
    return recorder.launches if recorder is not None else None


# ---- BF16 -------------------------------------------------------------------------------------------------------

def _launch_bh(a3, b3, b_k_major: bool, d3, c3, cfg: TileConfig, recorder) -> None:
    """D[g] = C[g] + A[g] @ B[g]^T over 3-D NT views (all TMA-ready except possibly D and C)."""
    from .kernels import _bh_einsum_gemm_kernel
    g, m, k = a3.shape
    n = d3.size(2)
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    tiles = g * _cdiv(m, bm) * _cdiv(n, bn)
    grid = (_grid(cfg, tiles), 1, 1)
    a_desc = _desc3(a3, (1, bm, bk))
    b_desc = _desc3(b3, (1, bn, bk) if b_k_major else (1, bk, bn))
    d_desc, c_desc, d_tma, c_tma = _out_descs(d3, c3, bm, bn // 2 if cfg.d_halves else bn, a_desc)
    c_arg = c3 if c3 is not None else d3
    args = (a_desc, b_desc, d_desc, c_desc, d3, c_arg, g, m, n, k, d3.stride(0), d3.stride(1),
            c_arg.stride(0) if c3 is not None else 0, c_arg.stride(1) if c3 is not None else 0,
            bm, bn, bk, 8, grid[0], cfg.num_stages, b_k_major, c3 is not None, d_tma, c_tma, cfg.flatten,
            cfg.d_halves and d_tma)
    launch(_bh_einsum_gemm_kernel, grid, args, name="bh_einsum_gemm",
           config_key=(cfg, grid[0], b_k_major, c3 is not None, d_tma, c_tma, d3.dtype), num_warps=cfg.num_warps,
           num_stages=cfg.num_stages, device_index=d3.device.index or 0, record=_record(recorder))


def _launch_bmk(a, b, d, c, plan: BmkPlan, recorder) -> None:
    """D = C + sum_s A[s] @ B[s]^T, the batch split into ``plan.splits`` ranges whose FP32 partials are summed in
    range order (see BmkPlan)."""
    from .kernels import (REDUCE_GRID, REDUCE_NONE, REDUCE_PARALLEL, REDUCE_SERIAL, _bmk_reduce_partials,
                          _bmn_bnk_mn_gemm_impl)
    cfg = plan.tile
    s, m, k = a.shape
    n = b.size(1)
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    tiles = _cdiv(m, bm) * _cdiv(n, bn)
    splits = _cdiv(s, _cdiv(s, max(1, min(s, plan.splits))))  # no empty range
    codes = {"parallel": REDUCE_PARALLEL, "serial": REDUCE_SERIAL, "grid": REDUCE_GRID}
    if plan.reduce not in codes:
        raise ValueError(f"BmkPlan.reduce: expected one of {sorted(codes)}, got {plan.reduce!r}")
    reduce = codes[plan.reduce]
    if splits == 1:
        reduce = REDUCE_NONE
    elif reduce == REDUCE_GRID and (interpreting() or not arch.sm90_occupancy(arch.sm_of_tensor(d))):
        # (the same bits; see BmkPlan. The launcher sizes cooperative launches by sm_90's per-SM limits.)
        reduce = REDUCE_PARALLEL
    device = d.device.index or 0
    c_arg = c if c is not None else d
    a_desc = _desc3(a, (1, bm, bk))
    b_desc = _desc3(b, (1, bn, bk))
    d_desc, c_desc, d_tma, c_tma = _out_descs(d.unsqueeze(0), None if c is None else c.unsqueeze(0), bm, bn,
                                              a_desc)

    def gemm(reduce, ws, counters):
        """(args, launch options) of the GEMM kernel with this reduction."""
        # (the parallel and grid reductions store D through pointers, never by TMA)
        tma = reduce in (REDUCE_NONE, REDUCE_SERIAL)
        args = (a_desc, b_desc, d_desc, c_desc, d, c_arg, ws, counters, s, m, n, k, splits, d.stride(0),
                c_arg.stride(0) if c is not None else 0, bm, bn, bk, cfg.num_stages, c is not None, d_tma and tma,
                c_tma and tma, reduce)
        options = dict(name="bmn_bnk_mn_gemm_impl", config_key=(cfg, c is not None, d_tma and tma, c_tma and tma,
                                                                d.dtype, reduce),
                       num_warps=cfg.num_warps, num_stages=cfg.num_stages, device_index=device,
                       cooperative=reduce == REDUCE_GRID)
        return args, options

    grid = (tiles * splits, 1, 1)
    if reduce == REDUCE_GRID:
        ws, counters = split_k_buffers(d, splits, tiles, splits * tiles * bm * bn)
        args, options = gemm(reduce, ws, counters)
        if launch(_bmn_bnk_mn_gemm_impl, grid, args, **options, record=_record(recorder)):
            if recorder is not None:
                recorder.scratch.append(ws)
                recorder.persistent.append(counters)
            return
        # (not all programs resident at once: the compiled kernel needs more registers or shared memory than
        # BMK_PROGRAMS_PER_SM assumes; the parallel reduction gives the same bits)
        reduce = REDUCE_PARALLEL
    if reduce == REDUCE_PARALLEL:
        # Fresh per call (a replay allocates it again), not the kept per-stream workspace: the partials live across
        # two launches, and another thread's launch on the same stream could land between them and overwrite a
        # shared buffer. The caching allocator hands this memory out again only in stream order.
        ws = torch.empty(splits * tiles * bm * bn, dtype=torch.float32, device=d.device)
        if recorder is not None:
            recorder.scratch.append(ws)
        counters = ws  # unused
    else:
        ws, counters = split_k_buffers(d, splits, tiles, splits * m * n, recorder)
    args, options = gemm(reduce, ws, counters)
    launch(_bmn_bnk_mn_gemm_impl, grid, args, **options, record=_record(recorder))
    if reduce == REDUCE_PARALLEL:
        strides = (d.stride(0), c_arg.stride(0) if c is not None else 0)
        rm = plan.reduce_rows or _reduce_rows(tiles, bm)
        loads = plan.reduce_loads or _reduce_loads(splits)
        # D and C by 8-byte vectors where both allow it (else elementwise: views of odd offset or stride)
        aligned = n % 4 == 0 and _vector_ready(d) and (c is None or _vector_ready(c))
        args = (ws, d, c_arg, m, n, splits, *strides, bm, bn, rm, loads, c is not None, aligned)
        launch(_bmk_reduce_partials, (tiles * 2 * (bm // rm), 1, 1), args, name="bmk_reduce_partials",
               config_key=(bm, bn, rm, loads, c is not None, aligned, d.dtype, c_arg.dtype),
               num_warps=max(1, rm * bn // 128), num_stages=1, device_index=device, record=_record(recorder))


def _reduce_loads(splits: int) -> int:
    """Ranges whose loads the parallel reduction issues together: the fewest of BMK_REDUCE_LOADS that cover the
    split (fewer predicated-off loads), else the most."""
    return next((x for x in BMK_REDUCE_LOADS if x >= splits), BMK_REDUCE_LOADS[-1])


def _vector_ready(t: torch.Tensor) -> bool:
    """Whether every row of a 2-D t starts 16-byte aligned (the reduction's ALIGNED hint)."""
    return t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def _reduce_rows(tiles: int, bm: int) -> int:
    """Rows per program of the parallel reduction: the most (up to BMK_REDUCE_MAX_ROWS: longer runs of loads per
    program) that still give every SM BMK_REDUCE_PROGRAMS_PER_SM programs."""
    rows = BMK_REDUCE_MAX_ROWS
    while rows > 1 and tiles * 2 * (bm // rows) < BMK_REDUCE_PROGRAMS_PER_SM * _num_sms():
        rows //= 2
    return min(rows, bm)


def _cublas_bh(eq: Equation, a, b, d, c):
    """DeepGEMM's ``use_cublaslt`` path: cuBLAS's strided batched GEMM (torch.bmm / baddbmm) straight into the
    permuted view of d; NotImplemented where torch has no such call (FP32 d from BF16 in old torch builds)."""
    a3 = a.permute(eq.perm_a)  # [G, M, K]
    b3 = b.permute(eq.perm_b).transpose(1, 2)  # [G, K, N]
    d3 = d.permute(eq.perm_out)
    c3 = None if c is None else c.permute(eq.perm_out)
    if d.dtype == torch.bfloat16:
        if c is None:
            torch.bmm(a3, b3, out=d3)
        elif c is d:
            d3.baddbmm_(a3, b3)
        else:
            torch.baddbmm(c3, a3, b3, out=d3)
        return None
    if not (d.is_cuda and hasattr(torch.ops.aten.bmm, "dtype_out")):  # (a CUDA-only overload)
        return NotImplemented
    if c is None:
        torch.ops.aten.bmm.dtype_out(a3, b3, torch.float32, out=d3)
    else:
        torch.ops.aten.baddbmm.dtype_out(c3, a3, b3, torch.float32, out=d3)
    return None


@replayable("einsum")
def einsum(expr, a, b, d, c, use_cublaslt, *, config: TileConfig | BmkPlan | None = None, recorder=None):
    if d.numel() == 0:
        return None
    eq = Equation.parse(expr)
    sm = arch.sm_of_tensor(d)
    if expr != NO_CUBLASLT_EXPRESSION and use_cublaslt:
        return _cublas_bh(eq, a, b, d, c)
    if not arch.has_mma(sm):
        return NotImplemented
    if expr == NO_CUBLASLT_EXPRESSION:
        s, m, k = a.shape
        n = b.size(1)
        if s == 0 or k == 0:
            write_without_product(d, c)
            return None
        if not (_tma_ready(a) and _tma_ready(b)):
            return NotImplemented
        plan = config if isinstance(config, BmkPlan) else bmk_plan(s, m, n, k, config, sm=sm)
        _launch_bmk(a, b, d, c, plan, recorder)
        return None
    a3 = a.permute(eq.perm_a)  # [G, M, K], K-major (the last dim of a)
    b_nt = b.permute(eq.perm_b)  # [G, N, K]
    b_k_major = b_nt.stride(-1) == 1
    b3 = b_nt if b_k_major else b_nt.transpose(1, 2)  # the descriptor's view has the unit stride last
    d3 = d.permute(eq.perm_out)
    g, m, k = a3.shape
    if k == 0:
        write_without_product(d, c)
        return None
    if not (_tma_ready(a3) and _tma_ready(b3)):
        return NotImplemented
    n = d3.size(2)
    c3 = None if c is None else c.permute(eq.perm_out)
    plain = d.dtype == torch.bfloat16 and c is None and _tma_ready(d3)
    cfg = config or bh_config(g, m, n, k, plain)
    if cfg in BH_WIDE and not plain:
        return NotImplemented  # (a pinned config without room for this epilogue)
    if config is None:
        cfg = fitted_bh_config(cfg, d.element_size(), c is not None, sm)
    _launch_bh(a3, b3, b_k_major, d3, c3, cfg, recorder)
    return None


# ---- FP8 --------------------------------------------------------------------------------------------------------

def _fp8_supported(sfa, sfb, recipe) -> bool:
    """FP32 scales, A per row, B per row or per 128 rows, one K granularity (32 or 128: the kernel's BK)."""
    gran_k = recipe.a[1]
    return (sfa.dtype == torch.float32 and sfb.dtype == torch.float32 and recipe.a[0] == 1 and gran_k in (32, 128)
            and recipe.b in ((1, gran_k), (128, gran_k)))


# K-major copies pad each row to this many elements (16 bytes of FP8), so that their row stride suits TMA.
_FP8_ROW_ALIGN = 16
_TRANSPOSE_BLOCK = 64


def _k_major_fp8(x3: torch.Tensor) -> torch.Tensor:
    """x3 [G, MN, K] itself when K is contiguous, else a K-major copy (FP8 wgmma reads K-major shared memory only)
    whose rows are padded to 16 bytes; the padding is never read (the descriptor's K ends at K)."""
    if x3.stride(-1) == 1 or x3.size(-1) <= 1:
        return x3
    g, mn, k = x3.shape
    padded = torch.empty((g, mn, -(-k // _FP8_ROW_ALIGN) * _FP8_ROW_ALIGN), dtype=x3.dtype, device=x3.device)
    view = padded[:, :, :k]
    if x3.is_cuda and not interpreting() and x3.stride(1) == 1 and view.numel():
        # The coalesced FP8 transpose of the GEMM family (torch's strided copy is ~10x slower on such operands).
        from ..common.kernels.transpose import _transpose_kernel
        grid = (_cdiv(mn, _TRANSPOSE_BLOCK), _cdiv(k, _TRANSPOSE_BLOCK), g)
        _transpose_kernel[grid](x3.view(torch.uint8), view.view(torch.uint8), mn, k, x3.stride(0), x3.stride(2),
                                view.stride(0), view.stride(1), BR=_TRANSPOSE_BLOCK, BC=_TRANSPOSE_BLOCK,
                                num_warps=4, **COMPILE_OPTIONS)
    else:
        view.copy_(x3)
    return view


# FP8 problems with at least this many rows per batch entry run as one FP8 GEMM per entry on the dense FP8 op
# (its warp-specialised kernel, gemm/fp8/launch.py) instead of the batched tl.* kernel: per entry the GEMM is large
# enough that the faster kernel outweighs a launch (and its host time) per entry. ``route=`` pins either way.
FP8_PER_ENTRY_MIN_M = 1024
FP8_PER_ENTRY_MAX_G = 16


def _fp8_route(g: int, m: int) -> str:
    return "per_entry" if m >= FP8_PER_ENTRY_MIN_M and g <= FP8_PER_ENTRY_MAX_G else "batched"


def _fp8_per_entry(a3, sfa3, b3, sfb3, d3, c3, recipe) -> None:
    """D[g] = C[g] + A[g] @ B[g]^T through the dense FP8 GEMM op, one call per batch entry (2-D views, no copies)."""
    gemm = torch.ops.deep_gemm.fp8_gemm_nt.default
    gran = [1, recipe.b[0], recipe.b[1]]
    for i in range(a3.size(0)):
        gemm(a3[i], sfa3[i], b3[i], sfb3[i], d3[i], None if c3 is None else c3[i], gran, None, None, "nk", False)


@replayable("fp8_einsum")
def fp8_einsum(expr, a, sfa, b, sfb, d, c, recipe, *, config: TileConfig | None = None, route: str | None = None,
               recorder=None):
    sm = arch.sm_of_tensor(d)
    if not arch.has_fp8_mma(sm):
        return NotImplemented
    r = resolve_recipe(recipe, None, None, sfb)
    if not _fp8_supported(sfa, sfb, r):
        return NotImplemented
    if d.numel() == 0:
        return None
    eq = Equation.parse(expr)
    a3, b3 = _k_major_fp8(a.permute(eq.perm_a)), _k_major_fp8(b.permute(eq.perm_b))  # [G, M, K], [G, N, K]
    sfa3, sfb3 = sfa.permute(eq.perm_a), sfb.permute(eq.perm_b)
    d3 = d.permute(eq.perm_out)
    c3 = None if c is None else c.permute(eq.perm_out)
    g, m, k = a3.shape
    n = b3.size(1)
    if k == 0:
        write_without_product(d, c)
        return None
    if not (_tma_ready(a3) and _tma_ready(b3)):
        return NotImplemented
    route = route or ("batched" if config is not None else _fp8_route(g, m))
    if route == "per_entry" and r.a[1] == 128:
        _fp8_per_entry(a3, sfa3, b3, sfb3, d3, c3, r)
        return None
    from .kernels import _fp8_einsum_gemm_kernel
    cfg = config or fp8_config(g, m, n)
    if config is None:
        cfg = fitted_fp8_config(cfg, d.element_size(), c is not None, r.a[1], sm)
    bm, bn, bk = cfg.block_m, cfg.block_n, r.a[1]  # one K block per scale
    b_per_row = r.b[0] == 1
    tiles = g * _cdiv(m, bm) * _cdiv(n, bn)
    grid = (_grid(cfg, tiles), 1, 1)
    a_desc = _desc3(a3, (1, bm, bk))
    d_desc, c_desc, d_tma, c_tma = _out_descs(d3, c3, bm, bn, a_desc)
    c_arg = c3 if c3 is not None else d3
    args = (a_desc, _desc3(b3, (1, bn, bk)), sfa3, sfb3, d_desc, c_desc, d3, c_arg, g, m, n, k,
            *sfa3.stride(), *sfb3.stride(), d3.stride(0), d3.stride(1),
            c_arg.stride(0) if c3 is not None else 0, c_arg.stride(1) if c3 is not None else 0,
            bm, bn, bk, 8, grid[0], cfg.num_stages, b_per_row, c3 is not None, d_tma, c_tma, cfg.flatten)
    launch(_fp8_einsum_gemm_kernel, grid, args, name="fp8_einsum_gemm",
           config_key=(cfg, grid[0], b_per_row, c3 is not None, d_tma, c_tma, d3.dtype), num_warps=cfg.num_warps,
           num_stages=cfg.num_stages, device_index=d.device.index or 0, record=_record(recorder))
    return None
