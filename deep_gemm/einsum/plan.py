"""The pure plans of ``einsum`` and ``fp8_einsum``: tile configs per expression and problem (``bh_config``,
``fp8_config``, fitted to the device's shared memory by ``fit_smem``), the batch split and reduction of
``bmk,bnk->mn`` (``bmk_plan`` over a bytes/latency model, ``bmk_time_us``), the FP8 route (batched kernel or one
dense GEMM per entry), and ``EinsumOverrides``, the one way to force any of them. Nothing here reads a mutable global
or launches anything: ``launch.py`` reads the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..core import arch
from ..core.launch import interpreting
from ..core.runtime import usable_sms
from ..utils.numeric import ceil_div


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
        return BH_SMALL_M_NARROW if g * ceil_div(m, 64) * ceil_div(n, 128) < usable_sms() else BH_SMALL_M
    if plain_bf16_out and n >= 256 and k >= SHORT_K and g * ceil_div(m, 128) * ceil_div(n, 256) >= 0.9 * usable_sms():
        return BH_LARGE  # (one wave at 90 % of the SMs: fewer A re-reads and tile ramps than two of 128x128)
    if 2 * g * ceil_div(m, 128) * ceil_div(n, 128) <= usable_sms():
        return BH_NARROW
    if k <= SHORT_K and g * ceil_div(m, 128) * ceil_div(n, 128) >= 2 * usable_sms():
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
      would not all be resident at once (``core.launch.launch`` declines such a cooperative launch).

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
             cooperative: bool | None = None, sm: int = arch.SM90, deterministic: bool = False) -> BmkPlan:
    """The batch split and reduction with about the least modelled time (``bmk_time_us``), at most one wave of
    programs (``BMK_PROGRAMS_PER_SM`` per SM for ``tile``, one per (range, tile): so a ``"grid"`` plan's programs
    are all resident at once); ``reduce`` pins the reduction, ``cooperative`` whether ``"grid"`` may be picked
    (``bmk_reductions``; never where the device's SMs lack sm_90's limits, ``arch.sm90_occupancy``). ``sm``: the
    device's SM version; a planned tile (not a given one) is fitted to its shared memory (``fit_smem``).

    ``deterministic`` (``use_deterministic_algorithms``): one batch range and the 64-row tile for every shape, so an
    element's reduction over the batch and K runs in one order whatever M and N are (the model's choice of ranges
    depends on them); short-M calls with long reductions then lose the split's parallelism."""
    if tile is None:
        # (FP32 partials or D, and C, staged for TMA at worst)
        tile = BMK_CONFIGS[1] if deterministic else bmk_config(m, n, s, k)
        tile = fit_smem(tile, sm, 2, 2 * tile.block_m * tile.block_n * 4, (BMK_CONFIGS[1],))
        if deterministic:
            return BmkPlan(tile, 1, reduce or "parallel")
    if not arch.sm90_occupancy(sm):
        cooperative = False
    tiles = ceil_div(m, tile.block_m) * ceil_div(n, tile.block_n)
    wave = BMK_PROGRAMS_PER_SM.get((tile.block_m, tile.block_n), 1) * usable_sms()
    # Only the fewest ranges for each batch entries per range: more ranges of the same length add reduction only
    # (and _launch_bmk launches that count anyway).
    counts = sorted({ceil_div(s, ceil_div(s, x)) for x in range(1, max(1, min(s, wave // tiles)) + 1)})
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
    tiles = ceil_div(m, tile.block_m) * ceil_div(n, tile.block_n)
    dram = s * (m + n) * k * 2
    per_program = ceil_div(s, splits) * (tile.block_m + tile.block_n) * k * 2
    program_gbps = BMK_PROGRAM_GBPS.get((tile.block_m, tile.block_n), BMK_PROGRAM_GBPS[128, 128])
    t = math.hypot(dram / BMK_DRAM_GBPS, per_program / program_gbps) / 1e3 + BMK_PIPELINE_FILL_US
    if splits > 1:
        tile_bytes = tile.block_m * tile.block_n * 4
        partials = splits * tiles * tile_bytes
        if reduce == "parallel":
            t += BMK_REDUCE_LAUNCH_US + ceil_div(splits, 8) * BMK_L2_ROUND_TRIP_US + 2 * partials / BMK_L2_GBPS / 1e3
        elif reduce == "grid":
            t += BMK_GRID_SYNC_US + ceil_div(splits, 16) * BMK_L2_ROUND_TRIP_US + 2 * partials / BMK_L2_GBPS / 1e3
        else:
            t += partials / BMK_L2_GBPS / 1e3 + splits * tile_bytes / BMK_SERIAL_GBPS / 1e3
    return t


def fp8_config(g: int, m: int, n: int) -> TileConfig:
    if m <= 64:
        return FP8_SMALL_M_NARROW if g * ceil_div(m, 64) * ceil_div(n, 128) < usable_sms() else FP8_CONFIGS[1]
    if 2 * g * ceil_div(m, 128) * ceil_div(n, 128) <= usable_sms():
        # 64x64 rather than 128x64 (FP8_NARROW): four programs per 128x128 tile, two resident per SM.
        return FP8_SMALL_M_NARROW
    return FP8_CONFIGS[0]


def reduce_loads(splits: int) -> int:
    """Ranges whose loads the parallel reduction issues together: the fewest of BMK_REDUCE_LOADS that cover the
    split (fewer predicated-off loads), else the most."""
    return next((x for x in BMK_REDUCE_LOADS if x >= splits), BMK_REDUCE_LOADS[-1])


def reduce_rows(tiles: int, bm: int) -> int:
    """Rows per program of the parallel reduction: the most (up to BMK_REDUCE_MAX_ROWS: longer runs of loads per
    program) that still give every SM BMK_REDUCE_PROGRAMS_PER_SM programs."""
    rows = BMK_REDUCE_MAX_ROWS
    while rows > 1 and tiles * 2 * (bm // rows) < BMK_REDUCE_PROGRAMS_PER_SM * usable_sms():
        rows //= 2
    return min(rows, bm)


# FP8 problems with at least this many rows per batch entry run as one FP8 GEMM per entry on the dense FP8 op
# (its warp-specialised kernel, gemm/fp8/launch.py) instead of the batched tl.* kernel: per entry the GEMM is large
# enough that the faster kernel outweighs a launch (and its host time) per entry. ``EinsumOverrides.route`` pins
# either way.
FP8_PER_ENTRY_MIN_M = 1024
FP8_PER_ENTRY_MAX_G = 16


def fp8_route(g: int, m: int) -> str:
    return "per_entry" if m >= FP8_PER_ENTRY_MIN_M and g <= FP8_PER_ENTRY_MAX_G else "batched"


@dataclass(frozen=True)
class EinsumOverrides:
    """Forced choices for sweeps and tests (None = the plan decides): ``config``, a ``TileConfig`` (for
    ``bmk,bnk->mn`` a ``BmkPlan``, its batch split and reduction too); ``route``, FP8 only, ``"batched"`` (the
    batched kernel) or ``"per_entry"`` (one dense FP8 GEMM per batch entry). A forced config runs the batched
    kernel unless ``route`` says otherwise."""

    config: TileConfig | BmkPlan | None = None
    route: str | None = None

    def __post_init__(self):
        if self.route not in (None, "batched", "per_entry"):
            raise ValueError(f"EinsumOverrides.route: expected 'batched' or 'per_entry', got {self.route!r}")


NO_OVERRIDES = EinsumOverrides()
