"""The one plan of an FP8 GEMM call: which kernel runs, with which tiles, waves, stages, split and grid.

``plan(call, overrides)`` is a pure function of ``Fp8Call`` (the call's sizes, grouping, recipe and the facts the
launcher reads off its tensors' metadata: can D be stored by TMA, can C be loaded by TMA...) and of explicit
``Fp8Overrides`` (sweeps and tests force variants through them; nothing here reads a mutable global). The launchers
in ``gemm/fp8/launch.py`` only read the plan. Two things stay outside: the tile config may come from opt-in autotuning
(``plan_for_config`` then derives the rest from the config it picked), and the warp-specialised kernel's register
budget is the first of ``WsPlan.register_budgets`` whose build does not spill (``ws_register_budget``), which only
ptxas can answer.

Two kernels (docs/ARCHITECTURE.md, "The FP8 kernels"): ``gemm/fp8/kernels/gemm.py`` (``tl.*``, every grouping, split-K,
skip-head) and ``gemm/fp8/kernels/gemm_ws.py`` (Gluon, warp-specialised: one TMA producer warp, two consumer
warpgroups; two-wave 128 x 256 tiles or one-wave 128-row tiles) where it measured faster (``_ws_pays``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ...core import arch
from ...utils.numeric import ceil_div, next_pow2
from . import configs

GROUPING = {"dense": 0, "m_ids": 1, "m_psum": 2, "masked": 3, "k_grouped": 4}

# Which 128-row tiles run the warp-specialised Gluon kernel: "auto" (where it is faster), "on" (wherever it is
# legal), "off" (never). Two-wave tiles win on dense and M-grouped shapes; the one-wave kernel only at K <= 2048; masked
# layouts with pointer stores stay on tl.* (see docs/TUNING.md). The process default comes from DG_FP8_WS=0/1 (read
# once, at import); ``Fp8Overrides.ws_mode`` overrides it per call.
WS_MODES = ("auto", "on", "off")
DEFAULT_WS_MODE = {"1": "on", "0": "off"}.get(os.environ.get("DG_FP8_WS", "auto"), "auto")
# Dense problems too small for two-wave tiles run the one-wave kernel up to this K in "auto" mode (see above).
WS_MAX_DENSE_K = 2048
# Register budgets per partition (setmaxnreg), (consumer warpgroup, producer warp), in the order tried. ptxas's
# spilling is not monotonic in the budget, and the build that spills least has been the fastest, so the first budget
# within WS_SPILL_TOLERANCE_WORDS is kept, else the one that spills least (ws_register_budget).
WS_REGISTER_BUDGETS = ((232, 40), (224, 56), (240, 32))
# Spilled words per thread that count as none: spills this small sit outside the K loop and cost nothing measurable.
WS_SPILL_TOLERANCE_WORDS = 2
# Shared memory the warp-specialised kernel may use for its stage ring and epilogue buffers (sm_90a opt-in limit
# minus the barriers and Triton's own reservation).
WS_SMEM_BYTES = 230_000
# Deeper rings stopped paying here (each stage beyond the MMA's latency only costs shared memory).
WS_MAX_STAGES = 8
# Wave widths (BN) at which the one-wave kernel's producer stages each K block's 1D2D scales in shared memory: a
# 64-column wgmma is too short to hide a global scale load, while 128-wide tiles lose more to the stage it costs.
WS_STAGED_SCALES_BN = (64,)
# Split-K tiles stage them at every width: their short K ranges leave the loads nothing to hide behind.
WS_SPLIT_K_STAGED_SCALES = True
# Split 128 x 192 tiles cost more per column of work than 128 x 256 ones (less MMA work per byte loaded).
SPLIT_TILE_COLUMN_COST = 1.06
# Tail tiles (128 + 16 or 32 columns, gemm_ws._split_tile_cols) cost more per column still: the wide wave and its
# promotion set the pace of a K block, and the narrow wave saves little of it.
TAIL_TILE_COLUMN_COST = 1.25
SPLIT_TILE_MIN_K = 1024
# Widths of a tail tile's narrow wave: wgmma, TMA boxes and shared-memory shapes take these; wider tails are split
# 128 + 64.
TAIL_WAVE_WIDTHS = (16, 32)
# K-grouped nt calls hand the warp-specialised kernel A and B as they come (the producer builds each group's TMA
# descriptors on the device) instead of concatenating the blocks first: that copy moves sum K x (M + N) bytes twice,
# about a tenth of the call. On wherever _group_blocks_in_place allows it; Fp8Overrides.k_grouped_device_descriptors
# forces either (both give bit-identical results).
K_GROUPED_DEVICE_DESCRIPTORS = True
# Psum and masked layouts on the warp-specialised kernel: how a tile finds its group. False: _tile_info's scan over
# every group's rows on every tile. True: DeepGEMM's walk, the current group carried from tile to tile and the layout
# read only when a tile passes into the next group (gemm_ws._walk), which also lets the next tile's first scales
# be prefetched. On per layout where it is faster (see docs/TUNING.md); Fp8Overrides.tile_walk forces either.
TILE_WALK = {"m_psum": True, "m_psum_decode": True, "masked": False}
# Psum and masked layouts on the warp-specialised kernel: mark the values read from the layout (the tile count, the
# tile's group, its rows and first row) warp-uniform for ptxas (uniform.warp_uniform, one redux.sync each).
# Unmarked, the device-computed tile count is a per-lane value as far as ptxas knows, so the persistent tile loop it
# bounds is divergent and the K loops inside lose the uniform datapath (more instructions per K block, and spills).
# Results are the same bits either way. Fp8Overrides.uniform_tiles forces either.
UNIFORM_TILES = True
# K-grouped layouts on the warp-specialised kernel: mark a tile's K range (gemm_ws._k_blocks) warp-uniform, as
# UNIFORM_TILES does for psum / masked tiles, so the K loops it bounds keep the uniform datapath. Same bits by
# construction. Fp8Overrides.uniform_tiles forces either.
UNIFORM_K_GROUPED = True
# Two-wave tiles: warpgroup 1 issues wave 0 of a K block only after warpgroup 0's wave 0 of that block has completed
# (1: the tile's first block, 2: every block; 3: the opposite, both warpgroups meet before each tile's K loop; 0:
# off), per layout (keyed by GROUPING value; gemm_ws._stagger_wait). Level 1 narrows the spread between the
# warpgroups, which pays on psum layouts only and costs dense ones (see docs/TUNING.md). Fp8Overrides.stagger forces
# a level.
STAGGER = {GROUPING["m_psum"]: 1}
# Rows of one consumer warpgroup's slab (wgmma M): the warp-specialised kernel's tiles are made of 64-row slabs.
WG_ROWS = 64


@dataclass(frozen=True)
class Fp8Overrides:
    """Forced choices for sweeps and tests (None = the plan decides). A forced variant that is not legal for the
    call falls back to the plan's own choice, as noted per field."""

    ws_mode: str | None = None  # "auto" | "on" | "off" (default: DEFAULT_WS_MODE)
    waves: int | None = None  # warp-specialised waves per consumer (1 or 2; 2 needs BN 128, or dense for 256-row)
    wave_n: bool = False  # with waves=2: the second wave along N (a 128 x 2BN tile) rather than along M
    narrow: int | None = None  # width of the second along-N wave (16/32 only where tail_narrow(N) gives it, else 64)
    stages: int | None = None  # ring depth, capped at what fits
    d_tma: bool | None = None  # False: store D with pointer stores instead of TMA
    regs: tuple | None = None  # (consumer, producer) register budget instead of ws_register_budget's choice
    staged_scales_bn: tuple | None = None  # WS_STAGED_SCALES_BN
    split_k_staged_scales: bool | None = None  # WS_SPLIT_K_STAGED_SCALES
    config: configs.Fp8GemmConfig | None = None  # the tile config instead of the heuristic's (sweeps)
    # K-grouped nt on the warp-specialised kernel: descriptors over each group's A and B blocks built on the device
    # instead of one concatenating copy of A and B per call (K_GROUPED_DEVICE_DESCRIPTORS)
    k_grouped_device_descriptors: bool | None = None
    # Psum / masked layouts on the warp-specialised kernel: find tiles by the carried walk (TILE_WALK)
    tile_walk: bool | None = None
    # Psum / masked / K-grouped layouts on the warp-specialised kernel: layout values marked warp-uniform
    # (UNIFORM_TILES; K-grouped: UNIFORM_K_GROUPED)
    uniform_tiles: bool | None = None
    # Two-wave tiles: warpgroup 1's waves follow warpgroup 0's (0, 1 or 2; 3: the warpgroups meet before each tile's
    # K loop instead; default: STAGGER per layout)
    stagger: int | None = None

    def __post_init__(self):
        if self.ws_mode is not None and self.ws_mode not in WS_MODES:
            raise ValueError(f"Fp8Overrides.ws_mode: expected one of {WS_MODES}, got {self.ws_mode!r}")
        if self.stagger not in (None, 0, 1, 2, 3):
            raise ValueError(f"Fp8Overrides.stagger: expected 0, 1, 2 or 3, got {self.stagger!r}")


NO_OVERRIDES = Fp8Overrides()


@dataclass(frozen=True)
class Fp8Call:
    """What the plan sees of a call: sizes, grouping, recipe, and facts about the tensors' metadata.

    ``m``, ``n``, ``k``: the GEMM of one group (masked: ``m`` is Mmax; K-grouped: ``k`` is the sum of the groups'
    K). The tensor facts are computed by the launcher (``fp8_launch``) from shapes, strides and alignment only."""

    grouping: int
    m: int
    n: int
    k: int
    num_groups: int
    num_sms: int
    b_per_row: bool = False  # 1D1D: B scaled per row (else per 128 x 128 block)
    has_c: bool = False
    out_bytes: int = 2  # D's element size
    head: tuple = (0, 0, 0)  # skip-head-mid column remap of D
    zero_gaps: bool = True  # M-grouped rows of no group are written (zeros), so whole tiles may be stored
    psum_align: int = 128  # M-grouped: the segment alignment
    expected_m: int = 0  # masked / psum: expected rows per group (steers the tile choice; psum: sized_call)
    d_rows: bool = True  # D has a [rows, N] view with 16-byte aligned rows (TMA descriptors over it work)
    d_tma: bool = True  # the tl.* kernel may store D's tiles by TMA (_tma_storable)
    ws_d_tma: bool = True  # the warp-specialised kernel may store D's slabs by TMA (also masked / K-grouped)
    c_tma: bool = False  # C can arrive by TMA through a descriptor of D's shape and block
    on_gpu: bool = True  # a CUDA call (not the interpreter's CPU tensors)
    interpreting: bool = False  # Triton's interpreter: the Gluon kernel cannot run
    # The device's SM version (deep_gemm.core.arch): the warp-specialised kernel is sm_90a code (ws_runs); elsewhere the
    # tl.* kernel runs every call, with pipelines sized to the device's shared memory (tile_problem).
    sm: int = arch.SM90
    # Deterministic mode (core/determinism.py) when the call was made: no split-K (configs.Fp8GemmProblem).
    deterministic: bool = False


@dataclass(frozen=True)
class WsPlan:
    """The warp-specialised kernel's variant: 64-row slabs per consumer, ``waves`` per K block."""

    block_m: int  # rows of the CTA tile (128; 256 for two waves along M)
    bn: int  # width of the first wave
    waves: int
    along_n: bool  # the second wave is the next columns (a 128 x (bn + narrow) tile)
    narrow: int  # width of the second along-N wave (bn, 64 for a split tile, 16/32 for a tail tile)
    tile_n: int
    split_tile: bool  # the two along-N waves have different widths
    scales_smem: bool  # the producer stages each K block's 1D2D scales with the operands
    stages: int
    d_tma: bool
    c_tma: bool
    register_budgets: tuple  # candidates in order, or one forced budget
    walk: bool = False  # psum / masked: tiles found by the carried walk (TILE_WALK), not the per-tile scan
    uniform: bool = False  # psum / masked / K-grouped: the layout's values marked warp-uniform (UNIFORM_TILES,
    # UNIFORM_K_GROUPED)
    stagger: int = 0  # two-wave tiles: warpgroup 1's waves follow warpgroup 0's (STAGGER)


@dataclass(frozen=True)
class Fp8Plan:
    """Everything that runs for one call: the tile config (tl.* kernel), or the warp-specialised variant on top of
    it; the persistent grid; and, for dense 1D1D problems whose last row block would cost a round of SMs of its
    own, how many final rows run as a second call with a plan of their own (``row_tail``)."""

    config: configs.Fp8GemmConfig
    kernel: str  # "tl" | "ws"
    grid: int
    ws: WsPlan | None = None
    row_tail: int = 0


def ws_mode_of(overrides: Fp8Overrides) -> str:
    return overrides.ws_mode or DEFAULT_WS_MODE


def ws_register_budget(spills) -> tuple[int, int]:
    """The register budget of a warp-specialised variant: the first of WS_REGISTER_BUDGETS whose build spills at most
    WS_SPILL_TOLERANCE_WORDS (``spills(budget)``: local memory words per thread of the variant compiled with that
    budget), else the one that spills least (the earlier on a tie). Only variants that spill more than that at the
    first budget pay for more builds."""
    best, best_spills = None, None
    for budget in WS_REGISTER_BUDGETS:
        words = spills(budget)
        if words <= WS_SPILL_TOLERANCE_WORDS:
            return budget
        if best is None or words < best_spills:
            best, best_spills = budget, words
    return best


def ws_stages(block_m: int, tile_n: int, store_n: int, out_bytes: int, sfb_staged: bool = False,
              scales_staged: bool = False, split_k: bool = False) -> int:
    """Deepest stage ring (A [block_m, 128] + B [tile_n, 128] per stage, plus tile_n FP32 B scales when 1D1D scales
    are staged, or block_m + 32 FP32 scales when the one-wave kernel stages 1D2D scales) that fits next to the
    epilogue's staging buffers: per consumer warpgroup 64 x store_n (the widths of the waves it stores separately:
    128 for a 128 x 256 tile, so 4 stages fit with BF16 output and 3 with FP32; 128 + 64 for a split 128 x 192
    tile). Split-K stages each warpgroup's 64 x BN FP32 partial in its epilogue buffer (_split_k_reduce)."""
    per_stage = (block_m + tile_n) * configs.BLOCK_K + (4 * tile_n if sfb_staged else 0) + (
        4 * (block_m + 32) if scales_staged else 0)
    epilogue = 2 * 64 * store_n * (max(out_bytes, 4) if split_k else out_bytes)
    return max(2, min(WS_MAX_STAGES, (WS_SMEM_BYTES - epilogue) // per_stage))


def ws_waves(grouping: int, m: int, n: int, block_n: int, c_by_pointer: bool, num_sms: int) -> tuple[int, bool]:
    """(waves, along_n): how many 64 x BN waves each consumer warpgroup computes per K block, and whether the
    second wave is the next BN columns (a 128 x 2BN tile) rather than the next 64 rows (a 256 x BN tile).

    Two waves halve the operand traffic per FLOP of a 128 x BN tile, and each stage feeds twice the MMA work
    (DeepGEMM's structure). Used whenever the tiles fill at least half the SMs. Waves go along N (one B scale block
    per wave) when BN is 128, which also suits grouped layouts (segments are 128-row aligned), and always for masked
    layouts (their tile count is known only on the device). A C operand read through pointers needs registers the
    two-wave consumer does not have (it spills); read by TMA (``Fp8Call.c_tma``) it needs none."""
    if c_by_pointer or grouping not in (GROUPING["dense"], GROUPING["m_ids"], GROUPING["m_psum"], GROUPING["masked"]):
        return 1, False
    half_wave = num_sms // 2
    if block_n == 128 and (grouping == GROUPING["masked"] or ceil_div(m, 128) * ceil_div(n, 256) >= half_wave):
        return 2, True
    # 256 x BN tiles only with 128-wide waves: 256 x 64 tiles are slower than the tl.* kernel.
    if grouping == GROUPING["dense"] and block_n == 128 and ceil_div(m, 256) * ceil_div(n, block_n) >= half_wave:
        return 2, False
    return 1, False


def tail_narrow(n: int) -> int:
    """Narrow-wave width of tail tiles for N, or 0 when they do not apply: N // 128 tiles, tile j a whole
    128-column block plus the j-th piece of the columns past the last whole block. Needs a tail, pieces no wider
    than TAIL_WAVE_WIDTHS allows, and cdiv(N, 128 + width) == N // 128 (the tile count the kernel derives from its
    tile width)."""
    whole, tail = divmod(n, 128)
    if whole == 0 or tail == 0:
        return 0
    width = max(TAIL_WAVE_WIDTHS[0], next_pow2(ceil_div(tail, whole)))
    if width not in TAIL_WAVE_WIDTHS or ceil_div(n, 128 + width) != whole:
        return 0
    return width


def ws_narrow(m: int, n: int, k: int, num_sms: int) -> int:
    """Width of the second wave of an along-N tile: 128 (a 128 x 256 tile), 64 (a 128 x 192 split tile) or 16/32
    (a tail tile: tail_narrow).

    DeepGEMM's wave model: count the rounds of #SMs tiles each width needs and the columns of work per SM that
    makes, weighted by the tile's cost per column; the cheapest wins (the wider on a tie). It picks 192-wide tiles
    for N = 2112 (11 x 192 exactly) and 128 + 16 tail tiles for N = 576."""
    if k < SPLIT_TILE_MIN_K:
        return 128
    row_blocks = ceil_div(m, 128)

    def cost(tiles_n, tile_n, per_column):
        return ceil_div(row_blocks * tiles_n, num_sms) * tile_n * per_column
    costs = {128: cost(ceil_div(n, 256), 256, 1.0), 64: cost(ceil_div(n, 192), 192, SPLIT_TILE_COLUMN_COST)}
    tail = tail_narrow(n)
    if tail:
        costs[tail] = cost(n // 128, 128 + tail, TAIL_TILE_COLUMN_COST)
    return min(costs, key=lambda width: (costs[width], -width))


def ws_runs(call: Fp8Call) -> bool:
    """Whether the warp-specialised Gluon kernel can run the call at all: compiled (not under the interpreter) for
    an sm_90a device (arch.has_wgmma: wgmma, setmaxnreg; no other architecture runs sm_90a code)."""
    return not call.interpreting and arch.has_wgmma(call.sm)


def one_wave_split_routable(call: Fp8Call, overrides: Fp8Overrides = NO_OVERRIDES) -> bool:
    """Whether 128-row split-K tiles can run on the warp-specialised one-wave kernel: dense 1D2D without C, D stored
    by TMA, the Gluon kernel enabled and runnable (``ws_runs``). The plan routes them by it, and the heuristic is
    told so (``tile_problem``)."""
    return (call.grouping == GROUPING["dense"] and not call.b_per_row and not call.has_c and call.d_tma
            and ws_mode_of(overrides) != "off" and ws_runs(call))


def wide_small_m(call: Fp8Call) -> bool:
    """A dense 1D2D problem with 64 < M <= 128 (the tl.* config has 64-row tiles) that is wide enough for 128 x 256
    two-wave tiles to fill the SMs (ws_waves): it runs those instead. Narrower problems have too few such tiles, and
    there the tl.* split-K kernel is faster; M <= 64 stays on tl.*."""
    return (call.grouping == GROUPING["dense"] and not call.b_per_row and not call.has_c and 64 < call.m <= 128
            and not call.deterministic
            and ws_waves(call.grouping, call.m, call.n, 128, False, call.num_sms) == (2, True))


def ws_block_n(cfg: configs.Fp8GemmConfig) -> int:
    """The warp-specialised kernel's wave width (BN) for a tl.* config: the config's own for 128-row configs, 128
    for the 64-row configs of the problems ``wide_small_m`` hands over (two-wave 128 x 256 tiles)."""
    return cfg.block_n if cfg.block_m == 128 else 128


def _ws_pays(call: Fp8Call, block_n: int, c_by_pointer: bool, split_k: int, mode: str) -> bool:
    grouping, m, n, k = call.grouping, call.m, call.n, call.k
    tma_store = call.ws_d_tma
    if split_k > 1:
        # 128-row split-K configs run one-wave tiles; they reach here only where one_wave_split_routable holds
        # (dense 1D2D, no C, D by TMA, the kernel not off).
        return True
    if call.b_per_row:
        # 1D1D runs on 128 x 256 two-wave tiles only, which stage the per-column B scales in shared memory
        # (_mainloop_two_waves_1d1d); the one-wave consumer had no registers for them (it spilled 408 B, sm_90a,
        # and no longer takes them), so problems too small for two-wave tiles stay on tl.*, as do C operands read
        # through pointers.
        # K-grouped layouts (weight gradients, big enough for two-wave tiles) go there whenever D is TMA-storable
        # (M a multiple of 128), instead of the tl.* kernel's 128 x 64 tiles.
        if grouping == GROUPING["k_grouped"]:
            return tma_store and not c_by_pointer and mode != "off"
        if grouping != GROUPING["dense"] or block_n != 128 or c_by_pointer:
            return False
        if mode != "auto":
            return mode == "on"
        return ws_waves(grouping, m, n, block_n, c_by_pointer, call.num_sms)[0] == 2
    if mode != "auto":
        return mode == "on"
    if grouping in (GROUPING["m_ids"], GROUPING["m_psum"]):
        return True
    if grouping == GROUPING["masked"]:  # with TMA stores only: the pointer epilogue spills (184 B, sm_90a)
        return tma_store
    if grouping != GROUPING["dense"]:
        return False
    return ws_waves(grouping, m, n, block_n, c_by_pointer, call.num_sms)[0] == 2 or k <= WS_MAX_DENSE_K


def tile_problem(call: Fp8Call, overrides: Fp8Overrides = NO_OVERRIDES) -> configs.Fp8GemmProblem:
    """What the tile-config heuristic (``fp8_configs``) and autotuning see of the call."""
    kind = {GROUPING["dense"]: "dense", GROUPING["m_ids"]: "m_grouped", GROUPING["m_psum"]: "m_grouped",
            GROUPING["masked"]: "masked", GROUPING["k_grouped"]: "k_grouped"}[call.grouping]
    smem = arch.shared_memory(call.sm)
    if kind == "dense":
        return configs.Fp8GemmProblem(call.m, call.n, call.k, 1, "dense", call.num_sms,
                                      one_wave_split_k=call.on_gpu and one_wave_split_routable(call, overrides),
                                      smem_bytes=smem, deterministic=call.deterministic)
    if kind == "m_grouped":
        call = sized_call(call)
        return configs.Fp8GemmProblem(call.m, call.n, call.k, call.num_groups, kind, call.num_sms, call.psum_align,
                                      smem_bytes=smem)
    if kind == "masked":
        return configs.Fp8GemmProblem(call.m, call.n, call.k, call.num_groups, kind, call.num_sms,
                                      expected_m=call.expected_m, smem_bytes=smem)
    return configs.Fp8GemmProblem(call.m, call.n, call.k, call.num_groups, kind, call.num_sms, smem_bytes=smem)


def row_tail(call: Fp8Call, cfg: configs.Fp8GemmConfig, mode: str) -> int:
    """Rows at the end of a dense 1D1D problem to run as a call of their own (0: none). 1D1D runs on 128 x 256
    two-wave tiles; when the last 128-row block alone spills the tiles into one more round of SMs, that round
    runs a handful of tiles on an otherwise idle GPU, as long as a full round. Those rows (at most 128) go to a
    second launch instead, whose small-M config (split-K) spreads them over the SMs: 1D1D 2112 x 4096 x 7168 is
    272 tiles, three rounds of 132 SMs for 2.06 rounds of work. (Stream-K within the main launch was slower; see
    docs/TUNING.md.)"""
    # (1D1D takes the two-wave kernel from 128 x 128 configs only: _ws_pays)
    if (call.grouping != GROUPING["dense"] or not call.b_per_row or call.head != (0, 0, 0)
            or (cfg.block_m, cfg.block_n, cfg.split_k) != (128, 128, 1) or not ws_runs(call)):
        return 0
    if mode == "off" or ws_waves(GROUPING["dense"], call.m, call.n, 128, False, call.num_sms) != (2, True):
        return 0
    row_blocks, col_blocks = ceil_div(call.m, 128), ceil_div(call.n, 256)
    rounds = ceil_div(row_blocks * col_blocks, call.num_sms)
    if row_blocks < 2 or (row_blocks - 1) * col_blocks > (rounds - 1) * call.num_sms:
        return 0
    return call.m - (row_blocks - 1) * 128


def plan(call: Fp8Call, overrides: Fp8Overrides = NO_OVERRIDES) -> Fp8Plan | None:
    """The plan of ``call`` with the heuristic's tile config; None when no kernel covers it (an M-grouped segment
    alignment no tile height divides: the reference runs)."""
    problem = tile_problem(sized_call(call), overrides)
    if not configs.candidates(problem):
        return None
    return plan_for_config(call, overrides.config or configs.heuristic(problem), overrides)


def sized_call(call: Fp8Call) -> Fp8Call:
    """The call as the tile choices see it: a psum call with ``expected_m_for_psum_layout`` (the decode form, where A
    may hold far more rows than the groups use) is sized by its expected rows, G segments of align(expected_m)
    rows (at most M). Grids are still sized by M (an upper bound of the tiles the kernel enumerates)."""
    if call.grouping != GROUPING["m_psum"] or call.expected_m <= 0:
        return call
    align = max(call.psum_align, 1)
    return replace(call, m=max(1, min(call.m, call.num_groups * ceil_div(call.expected_m, align) * align)))


def plan_for_config(call: Fp8Call, cfg: configs.Fp8GemmConfig, overrides: Fp8Overrides = NO_OVERRIDES) -> Fp8Plan:
    """Everything that runs for ``call`` given its tile config (the heuristic's, or autotuning's pick)."""
    if not call.b_per_row and configs.BLOCK_K % cfg.block_n:
        # Configs from the heuristic and autotuning never do this; one passed in by hand (a sweep) could.
        raise ValueError(f"FP8 GEMM config {cfg}: with 128x128 B scales block_n must divide 128 (one B scale per "
                         f"tile and K block), got {cfg.block_n}")
    if call.head != (0, 0, 0) and cfg.split_k > 1:  # the head remap lives in the direct epilogue only
        cfg = configs._config(cfg.block_m, cfg.block_n, 1, arch.shared_memory(call.sm))
    mode = ws_mode_of(overrides)
    tail = row_tail(call, cfg, mode)
    if tail:
        call = replace(call, m=call.m - tail)
    grid = _tl_grid(call, cfg)
    ws = _ws_plan(sized_call(call), cfg, overrides, mode)
    if ws is None:
        return Fp8Plan(cfg, "tl", grid, None, tail)
    if (ws.block_m, ws.tile_n) != (cfg.block_m, cfg.block_n):
        groups_in_grid = call.num_groups if call.grouping in (GROUPING["masked"], GROUPING["k_grouped"]) else 1
        tiles = ceil_div(call.m, ws.block_m) * ceil_div(call.n, ws.tile_n) * groups_in_grid * cfg.split_k
        grid = max(1, min(call.num_sms, tiles))
    return Fp8Plan(cfg, "ws", grid, ws, tail)


def _tl_grid(call: Fp8Call, cfg: configs.Fp8GemmConfig) -> int:
    """Persistent programs of the tl.* kernel: SM slots, or fewer when there are fewer tiles. Masked tile counts are
    only known on the device: the grid is sized by slots and the programs loop over the tiles."""
    groups_in_grid = call.num_groups if call.grouping in (GROUPING["masked"], GROUPING["k_grouped"]) else 1
    tiles_upper = ceil_div(call.m, cfg.block_m) * ceil_div(call.n, cfg.block_n) * cfg.split_k * groups_in_grid
    return max(1, min(call.num_sms * cfg.programs_per_sm, tiles_upper))


def _ws_plan(call: Fp8Call, cfg: configs.Fp8GemmConfig, overrides: Fp8Overrides, mode: str) -> WsPlan | None:
    """The warp-specialised variant for the call, or None when the tl.* kernel runs it."""
    grouping, split = call.grouping, cfg.split_k
    ws_split = split > 1 and cfg.block_m == 128 and one_wave_split_routable(call, overrides)
    if not ((cfg.block_m == 128 or wide_small_m(call)) and (split == 1 or ws_split) and call.head == (0, 0, 0)
            and ws_runs(call) and (grouping != GROUPING["k_grouped"] or call.b_per_row) and call.d_rows):
        return None
    c_tma = call.has_c and call.ws_d_tma and grouping in (GROUPING["dense"], GROUPING["k_grouped"]) and call.c_tma
    c_by_pointer = call.has_c and not c_tma
    if not _ws_pays(call, ws_block_n(cfg), c_by_pointer, split, mode):
        return None
    d_tma = call.ws_d_tma
    if call.b_per_row:  # the kernel's only 1D1D variant: 128 x 256 tiles, whatever BN the tl.* config had
        bn, waves, along_n = 128, 2, True
    else:
        bn = ws_block_n(cfg)
        waves, along_n = ws_waves(grouping, call.m, call.n, bn, c_by_pointer, call.num_sms)
        if overrides.waves is not None:
            waves, along_n = overrides.waves, overrides.wave_n
            if waves == 2 and (along_n and bn != 128 or not along_n and grouping != GROUPING["dense"]):
                waves, along_n = 1, False  # not a legal variant for this config: the one-wave kernel
        if split > 1:
            waves, along_n = 1, False  # split-K runs one-wave tiles
    narrow = bn
    if along_n and grouping != GROUPING["masked"] and not call.b_per_row and not call.has_c:
        # (split tiles: 2-D layouts, 1D2D scales, no C)
        narrow = ws_narrow(call.m, call.n, call.k, call.num_sms) if overrides.narrow is None else overrides.narrow
        if narrow < 64 and narrow != tail_narrow(call.n):
            narrow = 64  # (a forced tail width N has no tail tiles for)
    block_m = 2 * WG_ROWS * (1 if along_n else waves)
    tile_n = bn + narrow if along_n else bn
    split_tile = along_n and narrow < bn
    staged_bn = WS_STAGED_SCALES_BN if overrides.staged_scales_bn is None else overrides.staged_scales_bn
    split_staged = (WS_SPLIT_K_STAGED_SCALES if overrides.split_k_staged_scales is None
                    else overrides.split_k_staged_scales)
    scales_smem = waves == 1 and not call.b_per_row and (bn in staged_bn or (split > 1 and split_staged))
    stages = ws_stages(block_m, tile_n, bn + narrow if split_tile else bn, call.out_bytes, call.b_per_row,
                       scales_smem, split > 1)
    if overrides.stages is not None:
        stages = min(overrides.stages, stages)  # a forced ring depth, capped at what fits
    if overrides.d_tma is not None:
        d_tma = d_tma and overrides.d_tma
    # C by TMA on two-wave tiles (the one-wave consumer has the registers for C's pointers).
    c_tma = c_tma and waves == 2 and d_tma
    budgets = (overrides.regs,) if overrides.regs is not None else WS_REGISTER_BUDGETS
    layout = tile_walk_layout(call)
    # (by default two-wave tiles only: the one-wave kernel's walk has no GPU test yet)
    default_walk = layout is not None and TILE_WALK[layout] and waves == 2
    walk = (default_walk if overrides.tile_walk is None else overrides.tile_walk) and split == 1 and (
        layout is not None)
    k_grouped = grouping == GROUPING["k_grouped"]  # (its K ranges come from the layout, not its tiles)
    uniform = (UNIFORM_K_GROUPED if k_grouped else UNIFORM_TILES) if overrides.uniform_tiles is None else (
        overrides.uniform_tiles)
    uniform = uniform and (layout is not None or k_grouped)
    stagger = STAGGER.get(grouping, 0) if overrides.stagger is None else overrides.stagger
    stagger = stagger if waves == 2 and not split_tile else 0  # (the two-wave mainloops: gemm_ws._stagger_wait)
    return WsPlan(block_m, bn, waves, along_n, narrow, tile_n, split_tile, scales_smem, stages, d_tma, c_tma, budgets,
                  walk, uniform, stagger)


def tile_walk_layout(call: Fp8Call) -> str | None:
    """The TILE_WALK key of a call (None: a layout without per-group tile enumeration, so no walk)."""
    if call.grouping == GROUPING["m_psum"]:
        return "m_psum_decode" if call.expected_m > 0 else "m_psum"
    return "masked" if call.grouping == GROUPING["masked"] else None


def grouping_of(kind: str, use_psum_layout: bool = False) -> int:
    """The kernel's GROUPING constant of an op family."""
    if kind == "m_grouped":
        return GROUPING["m_psum" if use_psum_layout else "m_ids"]
    return GROUPING[kind]


__all__ = ["Fp8Call", "Fp8Overrides", "Fp8Plan", "WsPlan", "GROUPING", "plan", "plan_for_config", "tile_problem",
           "ws_register_budget", "ws_stages", "ws_waves", "ws_narrow", "tail_narrow", "wide_small_m",
           "one_wave_split_routable", "row_tail", "sized_call", "ws_runs"]
