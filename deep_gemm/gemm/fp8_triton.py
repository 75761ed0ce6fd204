"""CUDA launchers of the FP8 GEMM ops (the op's CUDA kernel calls these after the shared check).

Each launcher takes the op's schema arguments, returns ``NotImplemented`` for the argument combinations the Triton
kernels do not cover (the op then runs the torch reference and ``deep_gemm.backends()`` says so), resolves the
kernel config once per problem shape, and launches the cached compiled kernel directly.

Covered: FP8 operands with FP32 scales at K granularity 128, A per row, B per 128x128 block (1D2D) or per row
(1D1D); BF16 or FP32 output; optional C. MN-major operands are first copied to K-major (FP8 wgmma reads K-major
shared memory only; the copy is one memory-bound pass). Not covered (reference): packed FP4 operands, packed UE8M0
(int32) scales, K granularity 32.

Two kernels: ``kernels/fp8_gemm.py`` (tl.*, every grouping, split-K, skip-head) and ``kernels/fp8_gemm_ws.py``
(Gluon, warp-specialised; two-wave 128x256 tiles or one-wave 128-row tiles, ``ws_waves``; 1D1D and K-grouped on
two-wave tiles only) where it measured faster (``_ws_pays``; DG_FP8_WS=0/1 forces it off/on). MN-major FP8 operands
are copied to K-major by ``kernels/transpose.py``. Dense launchers keep a ``LaunchPlan`` per argument signature, so
a repeated call shape replays its recorded launch.
"""

from __future__ import annotations

import os

import torch

from .._triton.launch import FastDescriptor, compiled_kernel, descriptor, interpreting, launch
from .._triton.plans import ConfigCache, PlanCache, Recorder
from .._triton.scratch import split_k_buffers
from ..runtime import get_mk_alignment_for_contiguous_layout, get_num_sms
from . import fp8_autotune
from . import fp8_configs as configs
from .operands import FP8, resolve_recipe, to_nt

# Configs resolved per problem (the heuristic, or opt-in autotuning).
CONFIGS = ConfigCache()

GROUPING = {"dense": 0, "m_ids": 1, "m_psum": 2, "masked": 3, "k_grouped": 4}

# Which 128-row tiles run the warp-specialised Gluon kernel: "auto" (where it measured faster), "on" (wherever it
# is legal), "off" (never). H200 2026-11-30 vs the tl.* kernel: two-wave tiles (ws_waves) 1.3-2.1x on every dense
# M=4096 and M-grouped contiguous DeepSeek shape; the one-wave kernel 1.05-1.50x at dense K <= 2048 but 0.82-0.90x
# at K >= 7168 (session 5, before its promotion overlapped; session 6, overlapped, M = 256-512: 0.96-1.10x at
# K = 7168, 1.06x at K = 2048, so the K rule stays). Masked (DeepSeek table, Mmax = 4096): two-wave tiles with TMA
# stores 1.1-1.5x at m >= 192, equal at m = 20 (2026-11-30, session 6); with pointer stores (Mmax not a multiple of
# 128) 0.8x, so those stay on tl.*.
_WS_MODE = {"1": "on", "0": "off"}.get(os.environ.get("DG_FP8_WS", "auto"), "auto")
# Dense problems too small for two-wave tiles run the one-wave kernel up to this K in "auto" mode (see above).
WS_MAX_DENSE_K = 2048
# Register budgets per partition (setmaxnreg), (consumer warpgroup, producer warp), in the order tried: each consumer
# warpgroup holds a 64xBN FP32 accumulator plus a 64xBN FP32 partial (2 x 64 registers at BN = 128; two-wave tiles
# 2 x 64 + 64) and addresses; the TMA producer needs almost none. ptxas's spilling is not monotonic in the budget:
# the first budget that compiles a variant with at most WS_SPILL_TOLERANCE_WORDS spilled is kept, else the one that
# spills least (ws_register_budget). H200 2026-11-30 (session 11, `sweep_fp8_configs.py`, variants ws2n-s4 / -r224 /
# -r240, the two-wave 128 x 256 kernel; spilled bytes per thread from `compile_check.py`): masked with 32 groups
# spills 48 / 8 / 104 bytes and ran 776 / 609 / 1029 us at 32 x 192 x 6144 x 7168; masked with 6 groups 56 / 88 / 24
# bytes, 225 / 272 / 222 us at 6 x 1024 x 4096 x 4096; psum 16 / 64 / 0 bytes, 987 / 1061 / 982 us at 4 x 34151 x
# 4096 x 4096; dense 40 / 8 / 96 bytes, 278.6 / 275.3 / 340.8 us at 4096 x 24576 x 1536: the fewest spills was the
# fastest every time. Since session 13 the dense and psum builds spill 64 / 16 / 216 and 48 / 88 / 24 bytes (the next
# tile's first-block scales live across the epilogue: fp8_gemm_ws._next_first_scales); the budgets kept, 224 and 240,
# still spill nothing inside the K loop.
WS_REGISTER_BUDGETS = ((232, 40), (224, 56), (240, 32))
# Spilled words per thread that count as none: the K-grouped variants spill 2 words at (232, 40), outside their K
# loop, and none at (224, 56), where they ran 0-2.7 % slower (`sweep --only k_grouped`, session 11: 4 x 4096 x 7168 x
# 34304 2491-2507 vs 2561-2576 us); the smallest spill that measured costly was 10 words (dense, above).
WS_SPILL_TOLERANCE_WORDS = 2
# The budget chosen per compiled variant (and device): ws_register_budget's answer.
_WS_BUDGETS: dict = {}
# Shared memory the warp-specialised kernel may use for its stage ring and epilogue buffers (sm_90a opt-in limit
# minus the barriers and Triton's own reservation).
WS_SMEM_BYTES = 230_000
# Deeper rings stopped paying here (each stage beyond the MMA's latency only costs shared memory).
WS_MAX_STAGES = 8
# Wave widths (BN) at which the one-wave kernel's producer stages each K block's 1D2D scales in shared memory with
# the operands; at the others the consumers load them from global memory next to each wgmma. H200 2026-11-30
# (session 9, `sweep_fp8_configs.py --only one_wave_scales`, same process): 128 x 64 tiles faster staged on 9 of
# 10 shapes (+4 to +18 %; 128x7168x16384 61.9 -> 52.3 us; 512x7168x2048 -7 %): a 64-column wgmma is too short to
# hide a global load. 128 x 128 tiles 2-5 % slower staged at K >= 2048 (one stage fewer fits), faster only at
# K <= 1536.
WS_STAGED_SCALES_BN = (64,)
# Split-K tiles stage them at every width (WS_SPLIT_K_STAGED_SCALES): 128 x 128 split configs ran 2-7 % faster
# staged on 5 of 7 (shape, split) pairs (128x7168x16384 split 2: 49.4 -> 46.0 us; slower: 128x2112x7168 split 4,
# 15.9 -> 16.2 us; session 10, `sweep_fp8_configs.py --only ws_split_k`, variants ws1 / ws1g).
WS_SPLIT_K_STAGED_SCALES = True
# Test and benchmark hook: {"waves": 1|2, "wave_n": bool, "narrow": 16|32|64|128, "stages": n, "d_tma": False,
# "regs": (consumer, producer)} forces a warp-specialised variant (None = heuristic; a tail width only where
# tail_narrow(N) gives it, else 64; d_tma False stores D with pointer stores instead of TMA; regs: the partitions'
# register budgets instead of ws_register_budget's).
WS_OVERRIDE = None


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


def ws_waves(grouping: int, m: int, n: int, block_n: int, c_by_pointer: bool) -> tuple[int, bool]:
    """(waves, along_n): how many 64 x BN waves each consumer warpgroup computes per K block, and whether the
    second wave is the next BN columns (a 128 x 2BN tile) rather than the next 64 rows (a 256 x BN tile).

    Two waves halve the operand traffic per FLOP of a 128 x BN tile, and each stage feeds twice the MMA work
    (DeepGEMM's structure). H200 2026-11-30, M=4096, vs the tl.* kernel: 256 x 128 tiles 1.2-2.0x on the seven
    DeepSeek shapes, 128 x 256 tiles another 0-14 % (0.64-0.82x DeepGEMM); M-grouped contiguous 128 x 256
    1.4-1.8x (0.78-0.81x DeepGEMM). Used whenever the tiles fill at least half the SMs. Waves go along N (one B
    scale block per wave) when BN is 128, which also suits grouped layouts (segments are 128-row aligned), and
    always for masked layouts (their tile count is known only on the device; measured 1.1-1.5x the tl.* kernel at
    m >= 192, equal at m = 20). A C operand read through pointers needs registers the two-wave consumer does not
    have (74 spilled words, sm_90a); read by TMA (``_c_tma_loadable``) it needs none."""
    if c_by_pointer or grouping not in (GROUPING["dense"], GROUPING["m_ids"], GROUPING["m_psum"], GROUPING["masked"]):
        return 1, False
    half_wave = _num_sms() // 2
    if block_n == 128 and (grouping == GROUPING["masked"] or _cdiv(m, 128) * _cdiv(n, 256) >= half_wave):
        return 2, True
    # 256 x BN tiles only with 128-wide waves: 256 x 64 measured 0.72x the tl.* kernel (512x2112x7168: 38.0 vs
    # 27.2 us, H200 session 6).
    if grouping == GROUPING["dense"] and block_n == 128 and _cdiv(m, 256) * _cdiv(n, block_n) >= half_wave:
        return 2, False
    return 1, False


# Split 128 x 192 tiles cost more per column of work than 128 x 256 ones (H200 2026-11-30, same run, per column of
# work per SM: 1.04-1.05x at K = 2048-16384, 1.09x at K = 512: less MMA work per byte loaded and per tile).
SPLIT_TILE_COLUMN_COST = 1.06
# Tail tiles (128 + 16 or 32 columns, fp8_gemm_ws._split_tile_cols) cost ~1.2x a 128 x 192 tile per column (H200
# 2026-11-30, session 11, `sweep_fp8_configs.py --only tail_tiles`, single-round shapes, us per column of tile width:
# 4096x576x7168 0.288 vs 0.226 (41.4 vs 43.4 us), 4096x448x7168 0.259 vs 0.226 (41.4 vs 43.3 us)): the wide wave and
# its promotion set the pace of a K block, and the narrow wave saves little of it.
TAIL_TILE_COLUMN_COST = 1.25
SPLIT_TILE_MIN_K = 1024
# Widths of a tail tile's narrow wave: wgmma, TMA boxes and shared-memory shapes take these; wider tails are split
# 128 + 64.
TAIL_WAVE_WIDTHS = (16, 32)


def tail_narrow(n: int) -> int:
    """Narrow-wave width of tail tiles for N, or 0 when they do not apply: N // 128 tiles, tile j a whole
    128-column block plus the j-th piece of the columns past the last whole block. Needs a tail, pieces no wider
    than TAIL_WAVE_WIDTHS allows, and cdiv(N, 128 + width) == N // 128 (the tile count the kernel derives from its
    tile width)."""
    whole, tail = divmod(n, 128)
    if whole == 0 or tail == 0:
        return 0
    width = max(TAIL_WAVE_WIDTHS[0], _next_pow2(_cdiv(tail, whole)))
    if width not in TAIL_WAVE_WIDTHS or _cdiv(n, 128 + width) != whole:
        return 0
    return width


def ws_narrow(m: int, n: int, k: int) -> int:
    """Width of the second wave of an along-N tile: 128 (a 128 x 256 tile), 64 (a 128 x 192 split tile) or 16/32
    (a tail tile: tail_narrow).

    DeepGEMM's wave model: count the rounds of #SMs tiles each width needs and the columns of work per SM that
    makes, weighted by the tile's cost per column; the cheapest wins (the wider on a tie). Measured (H200, M=4096,
    K=7168): N=2112 (11 x 192 exactly) 147 -> 120 us; N=576 51 us on 256 + 256 + 64 columns, 43 us on three 192-wide
    tiles, 41 us on four 128 + 16 tail tiles; the other five DeepSeek shapes are faster on 128 x 256 (by 4-14 %)."""
    if k < SPLIT_TILE_MIN_K:
        return 128
    sms = _num_sms()
    row_blocks = _cdiv(m, 128)

    def cost(tiles_n, tile_n, per_column):
        return _cdiv(row_blocks * tiles_n, sms) * tile_n * per_column
    costs = {128: cost(_cdiv(n, 256), 256, 1.0), 64: cost(_cdiv(n, 192), 192, SPLIT_TILE_COLUMN_COST)}
    tail = tail_narrow(n)
    if tail:
        costs[tail] = cost(n // 128, 128 + tail, TAIL_TILE_COLUMN_COST)
    return min(costs, key=lambda width: (costs[width], -width))


def _config_for(problem: configs.Fp8GemmProblem, run_with=None) -> configs.Fp8GemmConfig:
    """The config of a problem, resolved once per shape: the heuristic, or (opt-in, ``run_with`` given) the fastest
    of a shortlist timed by running ``run_with(config)`` on copies of the outputs."""
    def resolve(p):
        tuned = fp8_autotune.autotune_enabled() and run_with is not None and not interpreting()
        return fp8_autotune.tune(p, run_with) if tuned else configs.heuristic(p)
    return CONFIGS.get(problem, resolve)


def _supported(a, sfa, b, sfb, recipe) -> bool:
    return (a.dtype == FP8 and b.dtype == FP8 and sfa.dtype == torch.float32 and sfb.dtype == torch.float32
            and recipe.a == (1, 128) and recipe.b[1] == 128)


# Tile of the MN-major -> K-major copy kernel (kernels/transpose.py): 64 x 64 bytes per program.
TRANSPOSE_BLOCK = 64


def _k_major(x: torch.Tensor) -> torch.Tensor:
    """x itself when its last dim is contiguous, else a K-major copy: on the GPU with the coalesced transpose
    kernel when x is a transposed contiguous tensor (the MN-major operands of the nn/tn/tt and K-grouped layouts),
    else with torch."""
    if x.size(-1) <= 1 or x.stride(-1) == 1:
        return x
    if x.is_cuda and not interpreting() and x.dim() in (2, 3) and x.stride(-2) == 1 and x.element_size() == 1:
        return _transposed_copy(x)
    return x.contiguous()


def _transposed_copy(x: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of x = y.transpose(-1, -2) (y's last dim contiguous), bit-exact, one coalesced pass."""
    from .kernels.transpose import _transpose_kernel
    x3 = x if x.dim() == 3 else x.unsqueeze(0)
    batch, rows, cols = x3.shape
    out = torch.empty((batch, rows, cols), dtype=x.dtype, device=x.device)
    if out.numel():
        blk = TRANSPOSE_BLOCK
        grid = (_cdiv(rows, blk), _cdiv(cols, blk), batch)
        _transpose_kernel[grid](x3.view(torch.uint8), out.view(torch.uint8), rows, cols, x3.stride(0),
                                x3.stride(2), out.stride(0), out.stride(1), BR=blk, BC=blk, num_warps=4)
    return out if x.dim() == 3 else out[0]


def _rows_desc(x: torch.Tensor, rows_block: int):
    """TMA descriptor of a K-major 2-D operand [R, K], block [rows_block, 128]."""
    return descriptor(x, (x.size(0), x.size(1)), (x.stride(0), 1), (rows_block, configs.BLOCK_K))


def _num_sms() -> int:
    return get_num_sms() or 1


def _next_pow2(x: int) -> int:
    return 1 << max(1, (max(1, x) - 1).bit_length())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _run(*, a_desc, b_desc, sfa, sfb, d, c, layout, m, n, k, num_groups, grouping, b_per_row, cfg, strides_sfa,
         strides_sfb, stride_dg, stride_dm, stride_cg=0, head=(0, 0, 0), zero_gaps=True, psum_align=128,
         recorder=None):
    if not b_per_row and configs.BLOCK_K % cfg.block_n:
        # Configs from the heuristic and autotuning never do this; one passed in by hand (a sweep) could.
        raise ValueError(f"FP8 GEMM config {cfg}: with 128x128 B scales block_n must divide 128 (one B scale per "
                         f"tile and K block), got {cfg.block_n}")
    split = cfg.split_k
    groups_in_grid = num_groups if grouping in (GROUPING["masked"], GROUPING["k_grouped"]) else 1
    tiles_upper = _cdiv(m, cfg.block_m) * _cdiv(n, cfg.block_n) * split * groups_in_grid
    # Masked tile counts are only known on the device: size the grid by SM slots, the programs loop over tiles.
    programs = min(_num_sms() * cfg.programs_per_sm, tiles_upper)
    grid = (max(1, programs), 1, 1)
    has_c = c is not None
    c_arg = c if has_c else d
    stride_cm = c_arg.stride(-2) if has_c else 0
    layout_arg = layout if layout is not None else d
    g_pad = _next_pow2(num_groups)
    d_rows = _rows_view(d)
    d_tma = _tma_storable(d, grouping, zero_gaps, head)
    ws_split = split > 1 and cfg.block_m == 128 and _one_wave_split_routable(grouping, b_per_row, has_c, d_tma)
    if ((cfg.block_m == 128 or _wide_small_m(grouping, m, n, b_per_row, has_c)) and (split == 1 or ws_split)
            and head == (0, 0, 0) and not interpreting()
            and (grouping != GROUPING["k_grouped"] or b_per_row) and d_rows is not None):
        ws_tma = _ws_tma_storable(d, grouping, d_tma)
        c_rows = (_c_tma_loadable(c, d, d_rows)
                  if has_c and ws_tma and grouping in (GROUPING["dense"], GROUPING["k_grouped"]) else None)
        if _ws_pays(grouping, m, n, k, _ws_block_n(cfg), has_c and c_rows is None, ws_tma, b_per_row, split):
            # Split-K: one counter per 64 x BN slab, its partials contiguous ([2 * tiles, split, 64 * BN]).
            slabs = 2 * _cdiv(m, 128) * _cdiv(n, cfg.block_n)
            ws, counters = split_k_buffers(d, split, slabs, slabs * split * 64 * cfg.block_n, recorder)
            _run_ws(a_desc, b_desc, sfa, sfb, d, d_rows, c_arg, c_rows, layout_arg, m, n, k, num_groups,
                    strides_sfa, strides_sfb, stride_dg, stride_dm, stride_cm, cfg, grid, grouping, zero_gaps,
                    psum_align, b_per_row, has_c, ws_tma, ws, counters, recorder)
            return
    # Split-K on the tl.* kernel: one counter per tile, the partials as [split, M, N].
    ws, counters = split_k_buffers(d, split, _cdiv(m, cfg.block_m) * _cdiv(n, cfg.block_n), split * m * n,
                                    recorder)
    d_desc = descriptor(d, (m, n), (d.stride(0), 1), (cfg.block_m, cfg.block_n)) if d_tma else a_desc
    args = (a_desc, b_desc, sfa, sfb, d, c_arg, d_desc, layout_arg, ws, counters,
            m, n, k, num_groups, *strides_sfa, *strides_sfb, stride_dg, stride_dm, stride_cg, stride_cm,
            cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m, grid[0], cfg.num_stages, split, grouping,
            g_pad, psum_align, zero_gaps, b_per_row, has_c, d_tma, *head)
    config_key = (cfg, grouping, b_per_row, has_c, d_tma, d.dtype, head, zero_gaps, psum_align, grid[0], g_pad)
    launch(_tl_kernel(), grid, args, name="fp8_gemm", config_key=config_key, num_warps=cfg.num_warps,
           num_stages=cfg.num_stages, device_index=d.device.index or 0,
           record=recorder.launches if recorder is not None else None)


def _one_wave_split_routable(grouping: int, b_per_row: bool, has_c: bool, d_tma: bool) -> bool:
    """Whether 128-row split-K tiles can run on the warp-specialised one-wave kernel: dense 1D2D without C, D stored
    by TMA, the Gluon kernel enabled and compiled (not under the interpreter). ``_run`` routes them by it, and
    ``dense_problem`` tells the heuristic so."""
    return (grouping == GROUPING["dense"] and not b_per_row and not has_c and d_tma and _WS_MODE != "off"
            and not interpreting())


def _wide_small_m(grouping: int, m: int, n: int, b_per_row: bool, has_c: bool) -> bool:
    """A dense 1D2D problem with 64 < M <= 128 (the tl.* config has 64-row tiles) that is wide enough for 128 x 256
    two-wave tiles to fill the SMs (ws_waves): it runs those instead. H200 2026-11-30 (session 8, `sweep-m128-ws`):
    128x24576x1536 21.6 -> 18.2 us (split 128 x 192 tiles, ws_narrow), 128x32768x512 13.0 -> 11.8 us (128 x 256);
    the five narrower DeepSeek shapes have too few such tiles (9-56), and on them every warp-specialised variant
    without split-K was 1.2-4.6x slower than the tl.* split-K kernel. M <= 64 was not measured, so it stays on
    tl.*."""
    return (grouping == GROUPING["dense"] and not b_per_row and not has_c and 64 < m <= 128
            and ws_waves(grouping, m, n, 128, False) == (2, True))


def _ws_block_n(cfg: configs.Fp8GemmConfig) -> int:
    """The warp-specialised kernel's wave width (BN) for a tl.* config: the config's own for 128-row configs, 128
    for the 64-row configs of the problems ``_wide_small_m`` hands over (two-wave 128 x 256 tiles)."""
    return cfg.block_n if cfg.block_m == 128 else 128


def _tma_storable(d: torch.Tensor, grouping: int, zero_gaps: bool, head) -> bool:
    """Whether the tile store can be one TMA store: every in-range row is written (no masked/gap rows kept), no
    column remap, and D's rows start on 16-byte boundaries."""
    if grouping not in (GROUPING["dense"], GROUPING["m_ids"], GROUPING["m_psum"]) or not zero_gaps:
        return False
    if head != (0, 0, 0) or d.dim() != 2:
        return False
    elem = d.element_size()
    return (d.stride(1) == 1 and (d.stride(0) * elem) % 16 == 0 and (d.storage_offset() * elem) % 16 == 0
            and d.size(1) * elem >= 16)


def _ws_tma_storable(d: torch.Tensor, grouping: int, tma_storable: bool) -> bool:
    """``_tma_storable`` (given) for the warp-specialised kernel, which also stores masked and K-grouped layouts by
    TMA: one store per 64-row slab through D's [G * M, N] rows view (the caller has it). With M a multiple of 128
    no tile reaches the next group's rows; masked rows past masked_m may be written (unspecified, as in DeepGEMM,
    whose masked kernel stores whole tiles)."""
    if grouping in (GROUPING["masked"], GROUPING["k_grouped"]):
        return d.dim() == 3 and d.size(1) % 128 == 0
    return tma_storable


def _c_tma_loadable(c: torch.Tensor, d: torch.Tensor, d_rows: torch.Tensor):
    """C's [rows, N] view when C's slabs can arrive by TMA through a descriptor of D's shape and block (C is D, or
    has D's dtype, shape and strides with 16-byte aligned rows), else None (C then goes through pointers)."""
    if c is d:
        return d_rows
    if c.dtype != d.dtype or c.shape != d.shape or c.stride() != d.stride():
        return None
    return _rows_view(c)


def _ws_pays(grouping: int, m: int, n: int, k: int, block_n: int, c_by_pointer: bool, tma_store: bool,
             b_per_row: bool = False, split_k: int = 1) -> bool:
    if split_k > 1:
        # 128-row split-K configs run one-wave tiles; the caller routes them here only where
        # _one_wave_split_routable holds (dense 1D2D, no C, D by TMA, the kernel not off).
        return True
    if b_per_row:
        # 1D1D runs on 128 x 256 two-wave tiles only, which stage the per-column B scales in shared memory
        # (_mainloop_two_waves_1d1d); the one-wave consumer had no registers for them (it spilled 408 B, sm_90a,
        # and no longer takes them), so problems too small for two-wave tiles stay on tl.*, as do C operands read
        # through pointers.
        # K-grouped layouts (weight gradients, big enough for two-wave tiles) go there whenever D is TMA-storable
        # (M a multiple of 128), instead of the tl.* kernel's 128 x 64 tiles.
        if grouping == GROUPING["k_grouped"]:
            return tma_store and not c_by_pointer and _WS_MODE != "off"
        if grouping != GROUPING["dense"] or block_n != 128 or c_by_pointer:
            return False
        if _WS_MODE != "auto":
            return _WS_MODE == "on"
        return ws_waves(grouping, m, n, block_n, c_by_pointer)[0] == 2
    if _WS_MODE != "auto":
        return _WS_MODE == "on"
    if grouping in (GROUPING["m_ids"], GROUPING["m_psum"]):
        return True
    if grouping == GROUPING["masked"]:  # with TMA stores only: the pointer epilogue spills (184 B, sm_90a)
        return tma_store
    if grouping != GROUPING["dense"]:
        return False
    return ws_waves(grouping, m, n, block_n, c_by_pointer)[0] == 2 or k <= WS_MAX_DENSE_K


def _tl_kernel():
    from .kernels.fp8_gemm import _fp8_gemm_kernel
    return _fp8_gemm_kernel


def _rows_view(d: torch.Tensor):
    """D as a 2-D [rows, N] matrix with 16-byte aligned rows (what a TMA descriptor needs), or None."""
    rows = d if d.dim() == 2 else (d.view(-1, d.size(-1)) if d.stride(0) == d.size(1) * d.stride(1) else None)
    if rows is None or rows.stride(-1) != 1 or rows.size(0) == 0:
        return None
    elem = d.element_size()
    aligned = (rows.stride(0) * elem) % 16 == 0 and (rows.storage_offset() * elem) % 16 == 0
    return rows if aligned and rows.size(1) * elem >= 16 else None


def _gluon_operand_desc(desc, rows_block: int) -> FastDescriptor:
    """The Gluon kernel's descriptor over an operand ``_rows_desc`` described: the same rows, block
    [rows_block, 128]."""
    return FastDescriptor(desc.base, desc.shape, desc.strides, (rows_block, configs.BLOCK_K), gluon=True)


def _gluon_slab_desc(rows: torch.Tensor, width: int) -> FastDescriptor:
    """The Gluon kernel's descriptor over a [rows, N] output (or C) view, block one 64 x width slab."""
    from .kernels.fp8_gemm_ws import WG_ROWS
    return FastDescriptor(rows, (rows.size(0), rows.size(1)), (rows.stride(0), 1), (WG_ROWS.value, width), gluon=True)


def _run_ws(a_desc, b_desc, sfa, sfb, d, d_rows, c_arg, c_rows, layout_arg, m, n, k, num_groups, strides_sfa,
            strides_sfb, stride_dg, stride_dm, stride_cm, cfg, grid, grouping, zero_gaps, psum_align, b_per_row, has_c,
            d_tma, ws, counters, recorder=None):
    """Launch the warp-specialised kernel; ``c_rows``: C's [rows, N] view when C is loaded by TMA, else None;
    ``ws``/``counters``: the split-K workspace and counters when ``cfg.split_k > 1`` (one-wave tiles only)."""
    from .kernels.fp8_gemm_ws import WG_ROWS, _fp8_gemm_ws_kernel
    if b_per_row:  # the kernel's only 1D1D variant: 128 x 256 tiles, whatever BN the tl.* config had (_ws_pays)
        bn, waves, along_n = 128, 2, True
    else:
        bn = _ws_block_n(cfg)
        waves, along_n = ws_waves(grouping, m, n, bn, has_c and c_rows is None)
        if WS_OVERRIDE is not None:
            waves, along_n = WS_OVERRIDE["waves"], WS_OVERRIDE.get("wave_n", False)
            if waves == 2 and (along_n and bn != 128 or not along_n and grouping != GROUPING["dense"]):
                waves, along_n = 1, False  # not a legal variant for this config: the one-wave kernel
        if cfg.split_k > 1:
            waves, along_n = 1, False  # split-K runs one-wave tiles
    narrow = bn
    if along_n and grouping != GROUPING["masked"] and not b_per_row and not has_c:
        # (split tiles: 2-D layouts, 1D2D scales, no C)
        narrow = ws_narrow(m, n, k) if WS_OVERRIDE is None else WS_OVERRIDE.get("narrow", bn)
        if narrow < 64 and narrow != tail_narrow(n):
            narrow = 64  # (a forced tail width N has no tail tiles for)
    block_m = 2 * WG_ROWS.value * (1 if along_n else waves)
    tile_n = bn + narrow if along_n else bn
    split = along_n and narrow < bn
    scales_smem = waves == 1 and not b_per_row and (
        bn in WS_STAGED_SCALES_BN or (cfg.split_k > 1 and WS_SPLIT_K_STAGED_SCALES))
    stages = ws_stages(block_m, tile_n, bn + narrow if split else bn, d.element_size(), b_per_row, scales_smem,
                       cfg.split_k > 1)
    if WS_OVERRIDE is not None:
        # A forced ring depth, capped at what fits (ws_stages counts the staged scales a variant may add).
        stages = min(WS_OVERRIDE.get("stages", stages), stages)
        d_tma = d_tma and WS_OVERRIDE.get("d_tma", True)
    # C by TMA on two-wave tiles (the one-wave consumer has the registers for C's pointers).
    c_tma = c_rows is not None and waves == 2 and d_tma
    if (block_m, tile_n) != (cfg.block_m, cfg.block_n):
        groups_in_grid = num_groups if grouping in (GROUPING["masked"], GROUPING["k_grouped"]) else 1
        grid = (max(1, min(_num_sms(), _cdiv(m, block_m) * _cdiv(n, tile_n) * groups_in_grid * cfg.split_k)), 1, 1)
    a_gluon = _gluon_operand_desc(a_desc, block_m)
    d_desc = _gluon_slab_desc(d_rows, bn)
    d2_desc = _gluon_slab_desc(d_rows, narrow) if split else d_desc
    # A split tile loads its two waves' B rows separately (the narrow wave may come first: _split_tile_cols).
    b_gluon = _gluon_operand_desc(b_desc, bn if split else tile_n)
    b2_gluon = _gluon_operand_desc(b_desc, narrow) if split else b_gluon
    c_desc = _gluon_slab_desc(c_rows, bn) if c_tma else d_desc
    head = (a_gluon, b_gluon, b2_gluon, sfa, sfb, d, c_arg, d_desc, d2_desc, c_desc, layout_arg, ws, counters,
            m, n, k, num_groups, *strides_sfa, *strides_sfb, stride_dg, stride_dm, stride_cm,
            block_m, bn, cfg.block_k, stages, cfg.group_m, grid[0], grouping, _next_pow2(num_groups),
            psum_align, zero_gaps, b_per_row, has_c, d_tma, waves, along_n, tile_n, narrow, c_tma, scales_smem,
            cfg.split_k)
    variant = ("ws", block_m, bn, cfg.group_m, d.dtype, stages, grouping, b_per_row, has_c, d_tma, zero_gaps,
               psum_align, grid[0], _next_pow2(num_groups), waves, along_n, narrow, c_tma, scales_smem, cfg.split_k)
    device_index = d.device.index or 0

    def compiled(regs):
        return compiled_kernel(_fp8_gemm_ws_kernel, grid, (*head, *regs), name="fp8_gemm_ws",
                               config_key=(*variant, regs), num_warps=4, num_stages=1, device_index=device_index)
    regs = WS_OVERRIDE["regs"] if WS_OVERRIDE is not None and "regs" in WS_OVERRIDE else None
    if regs is None:
        regs = _WS_BUDGETS.get((variant, device_index))
        if regs is None:
            regs = ws_register_budget(lambda r: compiled(r).n_spills)
            _WS_BUDGETS[(variant, device_index)] = regs
    launch(_fp8_gemm_ws_kernel, grid, (*head, *regs), name="fp8_gemm_ws", config_key=(*variant, regs), num_warps=4,
           num_stages=1, device_index=device_index, record=recorder.launches if recorder is not None else None)


def _write_without_product(d, c) -> None:
    """K == 0: d = c (or zeros)."""
    if c is None:
        d.zero_()
    elif c is not d:
        d.copy_(c)


# Dense calls whose metadata signature was seen before replay a recorded launch (_triton/plans.py): keyed by the
# signature the op's check was memoised under (_ops/library.py) plus the module-level kernel-selection switches.
PLANS = PlanCache()


def _dense(layout: str):
    def fp8_gemm(a, sfa, b, sfb, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, *,
                 signature=None):
        a, sfa, b, sfb = to_nt(layout, a, sfa, b, sfb)
        inputs = (a, sfa, b, sfb, d, c)
        key = PLANS.key((layout, _WS_MODE, id(WS_OVERRIDE), WS_STAGED_SCALES_BN, WS_SPLIT_K_STAGED_SCALES),
                        signature, inputs, d)
        if PLANS.replay(key, inputs, d):
            return None
        r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
        if not _supported(a, sfa, b, sfb, r):
            return NotImplemented
        recorder = Recorder() if key is not None else None
        _launch_dense(a, sfa, b, sfb, d, c, r, recorder=recorder)
        PLANS.record(key, inputs, d, recorder)
        return None

    fp8_gemm.__name__ = f"fp8_gemm_{layout}"
    fp8_gemm.accepts_signature = True
    return fp8_gemm


def _scratch_outputs(d, c):
    """Copies to run tuning candidates on: the caller's d (and c when it is d) must not change."""
    scratch = d.clone()
    return scratch, (scratch if c is d else c)


def dense_problem(m: int, n: int, k: int, d: torch.Tensor, c, r, head=(0, 0, 0)) -> configs.Fp8GemmProblem:
    """What the config heuristic sees of a dense call: the sizes, and whether ``_run`` could take 128-row split-K
    tiles to the warp-specialised kernel (``_one_wave_split_routable``)."""
    one_wave_split_k = d.is_cuda and _one_wave_split_routable(
        GROUPING["dense"], r.b[0] == 1, c is not None, _tma_storable(d, GROUPING["dense"], True, head))
    return configs.Fp8GemmProblem(m, n, k, 1, "dense", _num_sms(), one_wave_split_k=one_wave_split_k)


def _row_tail(m: int, n: int, cfg: configs.Fp8GemmConfig, r, head) -> int:
    """Rows at the end of a dense 1D1D problem to run as a problem of their own (0: none). 1D1D runs on 128 x 256
    two-wave tiles; when the last 128-row block alone spills the tiles into one more round of SMs, that round
    runs a handful of tiles on an otherwise idle GPU, as long as a full round. Those rows (at most 128) go to a
    second launch instead, whose small-M config (split-K) spreads them over the SMs. H200 (session 10): 1D1D
    2112x4096x7168 is 17 x 16 = 272 tiles, three rounds of 132 SMs for 2.06 rounds of work."""
    # (1D1D takes the two-wave kernel from 128 x 128 configs only: _ws_pays)
    if r.b[0] != 1 or head != (0, 0, 0) or (cfg.block_m, cfg.block_n, cfg.split_k) != (128, 128, 1) or interpreting():
        return 0
    if _WS_MODE == "off" or ws_waves(GROUPING["dense"], m, n, 128, False) != (2, True):
        return 0
    sms = _num_sms()
    row_blocks, col_blocks = _cdiv(m, 128), _cdiv(n, 256)
    rounds = _cdiv(row_blocks * col_blocks, sms)
    if row_blocks < 2 or (row_blocks - 1) * col_blocks > (rounds - 1) * sms:
        return 0
    return m - (row_blocks - 1) * 128


def _launch_dense(a, sfa, b, sfb, d, c, r, head=(0, 0, 0), cfg=None, recorder=None):
    m, k = a.shape
    n = b.size(0)
    if m == 0 or n == 0:
        return None
    if k == 0:
        _write_without_product(d, c)
        return None
    if cfg is None:
        cfg = _config_for(dense_problem(m, n, k, d, c, r, head),
                          lambda trial: _launch_dense(a, sfa, b, sfb, *_scratch_outputs(d, c), r, head, trial))
    if head != (0, 0, 0) and cfg.split_k > 1:  # the head remap lives in the direct epilogue only
        cfg = configs._config(cfg.block_m, cfg.block_n, 1)
    a, b = _k_major(a), _k_major(b)
    tail = _row_tail(m, n, cfg, r, head)
    if tail:
        # The last row block separately, on a config of its own (see _row_tail); rows of D (and C) are disjoint.
        m -= tail
        _launch_dense(a[m:], sfa[m:], b, sfb, d[m:], None if c is None else c[m:], r, head, None, recorder)
        a, sfa, d, c = a[:m], sfa[:m], d[:m], None if c is None else c[:m]
    _run(a_desc=_rows_desc(a, cfg.block_m), b_desc=_rows_desc(b, cfg.block_n), sfa=sfa, sfb=sfb, d=d, c=c,
         layout=None, m=m, n=n, k=k, num_groups=1, grouping=GROUPING["dense"], b_per_row=r.b[0] == 1, cfg=cfg,
         strides_sfa=(0, sfa.stride(0), sfa.stride(1)), strides_sfb=(0, sfb.stride(0), sfb.stride(1)),
         stride_dg=0, stride_dm=d.stride(0), head=head, recorder=recorder)
    return None


fp8_gemm_nt = _dense("nt")
fp8_gemm_nn = _dense("nn")
fp8_gemm_tn = _dense("tn")
fp8_gemm_tt = _dense("tt")


def fp8_gemm_nt_skip_head_mid(a, sfa, b, sfb, d, head_splits, recipe, compiled_dims, disable_ue8m0_cast):
    r = resolve_recipe(recipe, None, None, sfb)
    if not _supported(a, sfa, b, sfb, r):
        return NotImplemented
    return _launch_dense(a, sfa, b, sfb, d, None, r, head=tuple(int(x) for x in head_splits))


def _m_grouped_contiguous(layout: str):
    def m_grouped(a, sfa, b, sfb, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
                  use_psum_layout, ensure_zero_padding, expected_m_for_psum_layout=None):
        if layout == "nn":
            b, sfb = b.transpose(-1, -2), sfb.transpose(-1, -2)
        r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
        if not _supported(a, sfa, b, sfb, r):
            return NotImplemented
        num_groups, n, k = b.shape
        m = a.size(0)
        if m == 0 or n == 0:
            return None
        if k == 0:
            return NotImplemented  # rows of no group still follow the reference's zero/untouched rules
        alignment = get_mk_alignment_for_contiguous_layout()
        problem = configs.Fp8GemmProblem(m, n, k, num_groups, "m_grouped", _num_sms(), alignment)
        if not configs.candidates(problem):
            return NotImplemented  # an alignment no tile height divides
        cfg = _config_for(problem)  # (autotuning covers the dense and masked GEMMs)
        a = _k_major(a)
        b_rows = _k_major(b).reshape(num_groups * n, k)  # [G*N, K]: expert e's rows start at e*N
        grouping = GROUPING["m_psum" if use_psum_layout else "m_ids"]
        _run(a_desc=_rows_desc(a, cfg.block_m), b_desc=_rows_desc(b_rows, cfg.block_n), sfa=sfa, sfb=sfb, d=d,
             c=None, layout=grouped_layout, m=m, n=n, k=k, num_groups=num_groups, grouping=grouping,
             b_per_row=r.b[0] == 1, cfg=cfg, strides_sfa=(0, sfa.stride(0), sfa.stride(1)),
             strides_sfb=(sfb.stride(0), sfb.stride(1), sfb.stride(2)), stride_dg=0, stride_dm=d.stride(0),
             zero_gaps=bool(ensure_zero_padding) or not use_psum_layout, psum_align=alignment)
        return None

    m_grouped.__name__ = f"m_grouped_fp8_gemm_{layout}_contiguous"
    return m_grouped


m_grouped_fp8_gemm_nt_contiguous = _m_grouped_contiguous("nt")
m_grouped_fp8_gemm_nn_contiguous = _m_grouped_contiguous("nn")


def m_grouped_fp8_gemm_nt_masked(a, sfa, b, sfb, d, masked_m, expected_m, recipe, recipe_a, recipe_b,
                                 compiled_dims, disable_ue8m0_cast):
    r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
    if not _supported(a, sfa, b, sfb, r):
        return NotImplemented
    num_groups, max_m, k = a.shape
    n = b.size(1)
    if max_m == 0 or n == 0:
        return None
    if k == 0:
        return NotImplemented
    cfg = _config_for(configs.Fp8GemmProblem(max_m, n, k, num_groups, "masked", _num_sms(),
                                             expected_m=int(expected_m)))
    a_rows = _k_major(a).reshape(num_groups * max_m, k)  # group g's rows start at g*Mmax
    b_rows = _k_major(b).reshape(num_groups * n, k)
    _run(a_desc=_rows_desc(a_rows, cfg.block_m), b_desc=_rows_desc(b_rows, cfg.block_n), sfa=sfa, sfb=sfb, d=d,
         c=None, layout=masked_m, m=max_m, n=n, k=k, num_groups=num_groups, grouping=GROUPING["masked"],
         b_per_row=r.b[0] == 1, cfg=cfg, strides_sfa=(sfa.stride(0), sfa.stride(1), sfa.stride(2)),
         strides_sfb=(sfb.stride(0), sfb.stride(1), sfb.stride(2)), stride_dg=d.stride(0), stride_dm=d.stride(1))
    return None


def _k_grouped_rows(layout: str, data: torch.Tensor, rows: int, ks: list[int]) -> torch.Tensor:
    """One K-major [rows, sum K] matrix holding every group's [rows, K_g] block side by side."""
    if layout == "tn":  # [sum K, rows] MN-major: one transposing copy
        return _k_major(data.t())
    blocks, start = [], 0
    for kg in ks:  # flat per-group row-major blocks
        if kg:
            blocks.append(data[start * rows:(start + kg) * rows].view(rows, kg))
        start += kg
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=1)


def _k_grouped(layout: str):
    def k_grouped(a, sfa, b, sfb, d, ks_cpu, grouped_layout, c, recipe, compiled_dims, use_psum_layout):
        num_groups, m, n = d.shape
        ks = [int(x) for x in ks_cpu]
        if m == 0 or n == 0:
            return None
        if sum(ks) == 0:
            _write_without_product(d, c)
            return None
        cfg = _config_for(configs.Fp8GemmProblem(m, n, sum(ks), num_groups, "k_grouped", _num_sms()))
        a_rows = _k_grouped_rows(layout, a, m, ks)
        b_rows = _k_grouped_rows(layout, b, n, ks)
        sfa_strides = (0, sfa.stride(0), sfa.stride(1)) if layout == "nt" else (0, sfa.stride(1), sfa.stride(0))
        sfb_strides = (0, sfb.stride(0), sfb.stride(1)) if layout == "nt" else (0, sfb.stride(1), sfb.stride(0))
        _run(a_desc=_rows_desc(a_rows, cfg.block_m), b_desc=_rows_desc(b_rows, cfg.block_n), sfa=sfa, sfb=sfb, d=d,
             c=c, layout=grouped_layout, m=m, n=n, k=sum(ks), num_groups=num_groups,
             grouping=GROUPING["k_grouped"], b_per_row=True, cfg=cfg, strides_sfa=sfa_strides,
             strides_sfb=sfb_strides, stride_dg=d.stride(0), stride_dm=d.stride(1),
             stride_cg=c.stride(0) if c is not None else 0)
        return None

    k_grouped.__name__ = f"k_grouped_fp8_gemm_{layout}_contiguous"
    return k_grouped


k_grouped_fp8_gemm_nt_contiguous = _k_grouped("nt")
k_grouped_fp8_gemm_tn_contiguous = _k_grouped("tn")
