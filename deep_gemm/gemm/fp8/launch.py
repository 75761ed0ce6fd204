"""CUDA launchers of the FP8 GEMM ops (the op's CUDA kernel calls these after the shared check).

Each launcher takes the op's schema arguments, returns ``NotImplemented`` for the argument combinations the Triton
kernels do not cover (the op then runs the torch reference and ``deep_gemm.backends()`` says so), reads the facts
its plan needs off the tensors' metadata (``Fp8Call``), gets the call's plan (``fp8_plan.plan``: which kernel, tiles,
waves, stages, split, grid; resolved once per call shape) and launches what the plan says. Launchers accept an
explicit ``overrides=`` (``fp8_plan.Fp8Overrides``) for sweeps and tests; nothing else steers them.

Covered: FP8 operands with FP32 scales at K granularity 128, A per row, B per 128x128 block (1D2D) or per row
(1D1D); BF16 or FP32 output; optional C. MN-major operands are first copied to K-major (FP8 wgmma reads K-major
shared memory only; the copy is one memory-bound pass). Not covered here: packed FP4 operands, packed UE8M0 (int32)
scales and K granularity 32; the dense and M-grouped launchers hand exactly those forms to the FP4 family's
dequantising kernel (``gemm/fp4/launch.py``; while a family is listed in ``core/gpu_validation.py`` its kernels
run only when asked, here ``launcher_kwargs=dict(fp4_overrides=Fp4Overrides(kernels=True))``), which runs them
unless one operand's scales are FP32 and the other's int32 (the reference). On devices without FP8 MMAs (below
sm_89: ``deep_gemm.core.arch``) the FP8 kernels decline (the reference runs); the FP4 kernel's forms still run
there (it decodes FP8 bits itself).
The warp-specialised kernel runs on sm_90a devices only; elsewhere the plan keeps every call on the tl.* kernel.

Dense launchers keep a ``LaunchPlan`` per argument signature (``core/plans.py``), so a repeated call shape
replays its recorded launch.
"""

from __future__ import annotations

import torch

from ..._internals import COMPILE_OPTIONS
from ...common.operands import (FP4_PACKED, FP8, compact_k_grouped_sf, k_grouped_sizes, resolve_recipe,
                                run_with_alpha, scale_with_alpha, to_nt, written_without_launch)
from ...core import arch
from ...core.determinism import deterministic
from ...core.launch import FastDescriptor, compiled_kernel, descriptor, interpreting, launch
from ...core.plans import ConfigCache, PlanCache, Recorder, replayable
from ...core.runtime import get_mk_alignment_for_contiguous_layout, usable_sms
from ...core.scratch import split_k_buffers
from ...utils.numeric import ceil_div, group_pad
from . import autotune as fp8_autotune
from . import configs
from . import plan as fp8_plan
from .plan import GROUPING, NO_OVERRIDES, Fp8Call, Fp8Overrides, Fp8Plan, ws_register_budget
from ..fp4 import launch as fp4_launch
from ..fp4.plan import NO_OVERRIDES as NO_FP4_OVERRIDES, Fp4Overrides

# Plans resolved per (call, overrides): the heuristic's, or (opt-in) autotuning's tile config and what follows.
PLAN_OF_CALL = ConfigCache()
# The register budget chosen per compiled warp-specialised variant (and device): ws_register_budget's answer.
_WS_BUDGETS: dict = {}


def _plan_for(call: Fp8Call, overrides: Fp8Overrides, run_with=None) -> Fp8Plan | None:
    """The call's plan, resolved once per (call, overrides): ``fp8_plan.plan``, or (opt-in, ``run_with`` given)
    the plan of the fastest of a shortlist of tile configs, timed by running ``run_with(config)`` on copies of the
    outputs. None when no kernel covers the call."""
    def resolve(key):
        call, overrides = key
        # (deterministic mode keeps the heuristic's pinned tile: a timed pick would follow the shape)
        tuned = (fp8_autotune.autotune_enabled() and run_with is not None and not call.interpreting
                 and overrides.config is None and not call.deterministic)
        if not tuned:
            return fp8_plan.plan(call, overrides) or _UNCOVERED
        problem = fp8_plan.tile_problem(call, overrides)
        return fp8_plan.plan_for_config(call, fp8_autotune.tune(problem, run_with), overrides)
    p = PLAN_OF_CALL.get((call, overrides), resolve)
    return None if p is _UNCOVERED else p


_UNCOVERED = object()  # (cached as a plan: ConfigCache treats None as "not resolved yet")


def _supported(a, sfa, b, sfb, recipe) -> bool:
    return (a.dtype == FP8 and b.dtype == FP8 and sfa.dtype == torch.float32 and sfb.dtype == torch.float32
            and recipe.a == (1, 128) and recipe.b[1] == 128 and _fp8_device(a))


def _fp8_device(t: torch.Tensor) -> bool:
    """Whether t's device has FP8 MMAs (sm_89 and later; below, Triton cannot compile the FP8 kernels and the op
    runs the reference)."""
    return arch.has_fp8_mma(arch.sm_of_tensor(t))


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
    from ...common.kernels.transpose import _transpose_kernel
    x3 = x if x.dim() == 3 else x.unsqueeze(0)
    batch, rows, cols = x3.shape
    out = torch.empty((batch, rows, cols), dtype=x.dtype, device=x.device)
    if out.numel():
        blk = TRANSPOSE_BLOCK
        grid = (ceil_div(rows, blk), ceil_div(cols, blk), batch)
        _transpose_kernel[grid](x3.view(torch.uint8), out.view(torch.uint8), rows, cols, x3.stride(0),
                                x3.stride(2), out.stride(0), out.stride(1), BR=blk, BC=blk, num_warps=4,
                                **COMPILE_OPTIONS)
    return out if x.dim() == 3 else out[0]


def _rows_desc(x: torch.Tensor, rows_block: int):
    """TMA descriptor of a K-major 2-D operand [R, K], block [rows_block, 128]."""
    return descriptor(x, (x.size(0), x.size(1)), (x.stride(0), 1), (rows_block, configs.BLOCK_K))


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
    whose masked kernel stores whole tiles). Psum layouts store whole slabs whether or not the gaps are to be
    zeroed: its tiles never reach past a group's padded segment, and without ``ensure_zero_padding`` the padding
    rows are unspecified (a slab with a valid row writes zeros into them; a slab of padding only is skipped)."""
    if grouping in (GROUPING["masked"], GROUPING["k_grouped"]):
        return d.dim() == 3 and d.size(1) % 128 == 0
    if grouping == GROUPING["m_psum"]:
        return _tma_storable(d, grouping, True, (0, 0, 0))
    return tma_storable


def _c_tma_loadable(c: torch.Tensor, d: torch.Tensor, d_rows: torch.Tensor):
    """C's [rows, N] view when C's slabs can arrive by TMA through a descriptor of D's shape and block (C is D, or
    has D's dtype, shape and strides with 16-byte aligned rows), else None (C then goes through pointers)."""
    if c is d:
        return d_rows
    if c.dtype != d.dtype or c.shape != d.shape or c.stride() != d.stride():
        return None
    return _rows_view(c)


def _tl_kernel():
    from .kernels.gemm import _fp8_gemm_kernel
    return _fp8_gemm_kernel


def _rows_view(d: torch.Tensor):
    """D as a 2-D [rows, N] matrix with 16-byte aligned rows (what a TMA descriptor needs), or None."""
    rows = d if d.dim() == 2 else (d.view(-1, d.size(-1)) if d.stride(0) == d.size(1) * d.stride(1) else None)
    if rows is None or rows.stride(-1) != 1 or rows.size(0) == 0:
        return None
    elem = d.element_size()
    aligned = (rows.stride(0) * elem) % 16 == 0 and (rows.storage_offset() * elem) % 16 == 0
    return rows if aligned and rows.size(1) * elem >= 16 else None


def _gluon_operand_desc(x: torch.Tensor, rows_block: int) -> FastDescriptor:
    """The Gluon kernel's descriptor over a K-major operand [R, K], block [rows_block, 128]."""
    return FastDescriptor(x, (x.size(0), x.size(1)), (x.stride(0), 1), (rows_block, configs.BLOCK_K), gluon=True)


def _gluon_slab_desc(rows: torch.Tensor, width: int) -> FastDescriptor:
    """The Gluon kernel's descriptor over a [rows, N] output (or C) view, block one 64 x width slab."""
    from .kernels.ws_scheduler import WG_ROWS
    return FastDescriptor(rows, (rows.size(0), rows.size(1)), (rows.stride(0), 1), (WG_ROWS.value, width), gluon=True)


def call_of(grouping: int, m: int, n: int, k: int, num_groups: int, d: torch.Tensor, c, b_per_row: bool,
            head=(0, 0, 0), zero_gaps: bool = True, psum_align: int = 128, expected_m: int = 0) -> Fp8Call:
    """What the plan sees of a call (``Fp8Call``): the sizes, and what D's and C's metadata allow."""
    d_rows = _rows_view(d)
    d_tma = _tma_storable(d, grouping, zero_gaps, head)
    c_tma = c is not None and d_rows is not None and _c_tma_loadable(c, d, d_rows) is not None
    return Fp8Call(grouping, m, n, k, num_groups, usable_sms(), b_per_row, c is not None, d.element_size(),
                   tuple(head), zero_gaps, psum_align, expected_m, d_rows is not None, d_tma,
                   _ws_tma_storable(d, grouping, d_tma), c_tma, d.is_cuda, interpreting(), arch.sm_of_tensor(d),
                   deterministic())


def _execute(p: Fp8Plan, call: Fp8Call, *, a, b, sfa, sfb, d, c, layout, strides_sfa, strides_sfb, stride_dg,
             stride_dm, stride_cg=0, recorder=None, group_blocks=None) -> None:
    """Launch what plan ``p`` says for ``call``: ``a`` [rows, K] and ``b`` [rows, K] are K-major row matrices (B's
    groups stacked), ``layout`` the grouped layout tensor (None for dense). ``group_blocks`` (K-grouped on the
    warp-specialised kernel): (A, B) storage as per-group blocks, whose descriptors the kernel builds; ``a`` and
    ``b`` are then one group's blocks (for the descriptors' layouts)."""
    cfg = p.config
    if p.kernel == "ws":
        _execute_ws(p, call, a, b, sfa, sfb, d, c, layout, strides_sfa, strides_sfb, stride_dg, stride_dm, recorder,
                    group_blocks)
        return
    m, n, split = call.m, call.n, cfg.split_k
    grid = (p.grid, 1, 1)
    c_arg = c if c is not None else d
    stride_cm = c_arg.stride(-2) if c is not None else 0
    a_desc, b_desc = _rows_desc(a, cfg.block_m), _rows_desc(b, cfg.block_n)
    # Split-K on the tl.* kernel: one counter per tile, the partials as [split, M, N].
    ws, counters = split_k_buffers(d, split, ceil_div(m, cfg.block_m) * ceil_div(n, cfg.block_n), split * m * n,
                                   recorder)
    d_desc = descriptor(d, (m, n), (d.stride(0), 1), (cfg.block_m, cfg.block_n)) if call.d_tma else a_desc
    g_pad = group_pad(call.num_groups)
    args = (a_desc, b_desc, sfa, sfb, d, c_arg, d_desc, layout if layout is not None else d, ws, counters,
            m, n, call.k, call.num_groups, *strides_sfa, *strides_sfb, stride_dg, stride_dm, stride_cg, stride_cm,
            cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m, grid[0], cfg.num_stages, split, call.grouping,
            g_pad, call.psum_align, call.zero_gaps, call.b_per_row, call.has_c, call.d_tma, *call.head)
    config_key = (cfg, call.grouping, call.b_per_row, call.has_c, call.d_tma, d.dtype, call.head, call.zero_gaps,
                  call.psum_align, grid[0], g_pad)
    launch(_tl_kernel(), grid, args, name="fp8_gemm", config_key=config_key, num_warps=cfg.num_warps,
           num_stages=cfg.num_stages, device_index=d.device.index or 0,
           record=recorder.launches if recorder is not None else None)


def _execute_ws(p: Fp8Plan, call: Fp8Call, a, b, sfa, sfb, d, c, layout, strides_sfa, strides_sfb, stride_dg,
                stride_dm, recorder, group_blocks=None) -> None:
    """Launch the warp-specialised kernel variant ``p.ws``."""
    from .kernels.gemm_ws import _fp8_gemm_ws_kernel
    cfg, w = p.config, p.ws
    m, n, k, num_groups = call.m, call.n, call.k, call.num_groups
    grid = (p.grid, 1, 1)
    d_rows = _rows_view(d)
    c_arg = c if c is not None else d
    stride_cm = c_arg.stride(-2) if c is not None else 0
    # Split-K: one counter per 64 x BN slab, its partials contiguous ([2 * tiles, split, 64 * BN]).
    slabs = 2 * ceil_div(m, 128) * ceil_div(n, cfg.block_n)
    ws, counters = split_k_buffers(d, cfg.split_k, slabs, slabs * cfg.split_k * 64 * cfg.block_n, recorder)
    kg_desc = group_blocks is not None
    if kg_desc:  # (the split-K slots carry A's and B's storage: gemm_ws, KG_DESC)
        ws, counters = group_blocks
    a_gluon = _gluon_operand_desc(a, w.block_m)
    d_desc = _gluon_slab_desc(d_rows, w.bn)
    d2_desc = _gluon_slab_desc(d_rows, w.narrow) if w.split_tile else d_desc
    # A split tile loads its two waves' B rows separately (the narrow wave may come first: _split_tile_cols).
    b_gluon = _gluon_operand_desc(b, w.bn if w.split_tile else w.tile_n)
    b2_gluon = _gluon_operand_desc(b, w.narrow) if w.split_tile else b_gluon
    c_desc = _gluon_slab_desc(_c_tma_loadable(c, d, d_rows), w.bn) if w.c_tma else d_desc
    g_pad = group_pad(num_groups)
    head = (a_gluon, b_gluon, b2_gluon, sfa, sfb, d, c_arg, d_desc, d2_desc, c_desc,
            layout if layout is not None else d, ws, counters,
            m, n, k, num_groups, *strides_sfa, *strides_sfb, stride_dg, stride_dm, stride_cm,
            w.block_m, w.bn, cfg.block_k, w.stages, cfg.group_m, grid[0], call.grouping, g_pad,
            call.psum_align, call.zero_gaps, call.b_per_row, call.has_c, w.d_tma, w.waves, w.along_n, w.tile_n,
            w.narrow, w.c_tma, w.scales_smem, cfg.split_k)
    variant = ("ws", w.block_m, w.bn, cfg.group_m, d.dtype, w.stages, call.grouping, call.b_per_row, call.has_c,
               w.d_tma, call.zero_gaps, call.psum_align, grid[0], g_pad, w.waves, w.along_n, w.narrow, w.c_tma,
               w.scales_smem, cfg.split_k, kg_desc, w.walk, w.uniform, w.stagger)
    device_index = d.device.index or 0

    def compiled(regs):
        return compiled_kernel(_fp8_gemm_ws_kernel, grid, (*head, *regs, kg_desc, w.walk, w.uniform, w.stagger),
                               name="fp8_gemm_ws", config_key=(*variant, regs), num_warps=4, num_stages=1,
                               device_index=device_index)
    if len(w.register_budgets) == 1:
        regs = w.register_budgets[0]
    else:
        regs = _WS_BUDGETS.get((variant, device_index))
        if regs is None:
            regs = ws_register_budget(lambda r: compiled(r).n_spills)
            _WS_BUDGETS[(variant, device_index)] = regs
    launch(_fp8_gemm_ws_kernel, grid, (*head, *regs, kg_desc, w.walk, w.uniform, w.stagger), name="fp8_gemm_ws",
           config_key=(*variant, regs), num_warps=4, num_stages=1, device_index=device_index,
           record=recorder.launches if recorder is not None else None)


# Dense calls whose metadata signature was seen before replay a recorded launch (core/plans.py): keyed by the
# signature the op's check was memoised under (core/registry.py) plus the call's overrides.
PLANS = PlanCache()


def _fp4_form(a, sfa, b, sfb, recipe) -> bool:
    """Whether a call is one of the forms the FP8 kernels leave to the FP4 kernel (``gemm/fp4/launch.py``): a packed
    FP4 operand, packed UE8M0 (int32) scales, or K granularity 32."""
    return (a.dtype == FP4_PACKED or b.dtype == FP4_PACKED or sfa.dtype == torch.int32 or sfb.dtype == torch.int32
            or recipe.a[1] != configs.BLOCK_K or recipe.b[1] != configs.BLOCK_K)


def _dense(layout: str):
    def fp8_gemm(a, sfa, b, sfb, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha=None,
                 *, signature=None, overrides: Fp8Overrides = NO_OVERRIDES,
                 fp4_overrides: Fp4Overrides = NO_FP4_OVERRIDES):
        if alpha is not None and sfa.dtype == torch.float32:  # A's scales carry alpha: no scratch, no extra pass
            return fp8_gemm(a, scale_with_alpha(sfa, alpha), b, sfb, d, c, recipe, recipe_a, recipe_b, compiled_dims,
                            disable_ue8m0_cast, overrides=overrides, fp4_overrides=fp4_overrides)
        if alpha is not None:  # packed UE8M0 scales cannot: FP32 scratch, then d = c + alpha * scratch
            return run_with_alpha(lambda out, acc: fp8_gemm(a, sfa, b, sfb, out, acc, recipe, recipe_a, recipe_b,
                                                            compiled_dims, disable_ue8m0_cast, overrides=overrides,
                                                            fp4_overrides=fp4_overrides),
                                  d, c, alpha)
        a, sfa, b, sfb = to_nt(layout, a, sfa, b, sfb)
        inputs = (a, sfa, b, sfb, d, c)
        key = PLANS.key((layout, overrides), signature, inputs, d)
        if PLANS.replay(key, inputs, d):
            return None
        r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
        if _fp4_form(a, sfa, b, sfb, r):  # (never recorded: the FP4 launcher runs in full every call)
            return fp4_launch.fp8_fp4_gemm_nt(a, sfa, b, sfb, d, c, r, overrides=fp4_overrides)
        if not _supported(a, sfa, b, sfb, r):
            return NotImplemented
        recorder = Recorder() if key is not None else None
        _launch_dense(a, sfa, b, sfb, d, c, r.b[0] == 1, overrides=overrides, recorder=recorder)
        PLANS.record(key, inputs, d, recorder)
        return None

    fp8_gemm.__name__ = f"fp8_gemm_{layout}"
    fp8_gemm.accepts_signature = True
    return fp8_gemm


def _scratch_outputs(d, c):
    """Copies to run tuning candidates on: the caller's d (and c when it is d) must not change."""
    scratch = d.clone()
    return scratch, (scratch if c is d else c)


def dense_call(m: int, n: int, k: int, d: torch.Tensor, c, b_per_row: bool, head=(0, 0, 0)) -> Fp8Call:
    return call_of(GROUPING["dense"], m, n, k, 1, d, c, b_per_row, head)


def _launch_dense(a, sfa, b, sfb, d, c, b_per_row: bool, head=(0, 0, 0), overrides: Fp8Overrides = NO_OVERRIDES,
                  recorder=None, config=None):
    m, k = a.shape
    n = b.size(0)
    if written_without_launch(d, c, m, n, k):
        return None
    call = dense_call(m, n, k, d, c, b_per_row, head)
    if config is not None:  # an autotuning trial
        p = fp8_plan.plan_for_config(call, config, overrides)
    else:
        p = _plan_for(call, overrides, lambda trial: _launch_dense(a, sfa, b, sfb, *_scratch_outputs(d, c),
                                                                   b_per_row, head, overrides, None, trial))
    a, b = _k_major(a), _k_major(b)
    if p.row_tail:
        # The last rows separately, on a plan of their own (fp8_plan.row_tail); rows of D (and C) are disjoint.
        m -= p.row_tail
        _launch_dense(a[m:], sfa[m:], b, sfb, d[m:], None if c is None else c[m:], b_per_row, head, overrides,
                      recorder)
        a, sfa, d, c = a[:m], sfa[:m], d[:m], None if c is None else c[:m]
        call = dense_call(m, n, k, d, c, b_per_row, head)
    _execute(p, call, a=a, b=b, sfa=sfa, sfb=sfb, d=d, c=c, layout=None,
             strides_sfa=(0, sfa.stride(0), sfa.stride(1)), strides_sfb=(0, sfb.stride(0), sfb.stride(1)),
             stride_dg=0, stride_dm=d.stride(0), recorder=recorder)
    return None


fp8_gemm_nt = _dense("nt")
fp8_gemm_nn = _dense("nn")
fp8_gemm_tn = _dense("tn")
fp8_gemm_tt = _dense("tt")


def fp8_gemm_nt_skip_head_mid(a, sfa, b, sfb, d, head_splits, recipe, compiled_dims, disable_ue8m0_cast, *,
                              overrides: Fp8Overrides = NO_OVERRIDES):
    r = resolve_recipe(recipe, None, None, sfb)
    if not _supported(a, sfa, b, sfb, r):
        return NotImplemented
    return _launch_dense(a, sfa, b, sfb, d, None, r.b[0] == 1, tuple(int(x) for x in head_splits), overrides)


def _m_grouped_contiguous(layout: str):
    @replayable(f"m_grouped_fp8_gemm_{layout}_contiguous")
    def m_grouped(a, sfa, b, sfb, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
                  use_psum_layout, ensure_zero_padding, expected_m_for_psum_layout=None, *,
                  overrides: Fp8Overrides = NO_OVERRIDES, fp4_overrides: Fp4Overrides = NO_FP4_OVERRIDES,
                  recorder=None):
        if layout == "nn":
            b, sfb = b.transpose(-1, -2), sfb.transpose(-1, -2)
        r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
        if _fp4_form(a, sfa, b, sfb, r):  # (its launch is not recorded: no replay)
            return fp4_launch.m_grouped_fp8_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d, grouped_layout, r,
                                                                   use_psum_layout, ensure_zero_padding,
                                                                   overrides=fp4_overrides)
        if not _supported(a, sfa, b, sfb, r):
            return NotImplemented
        num_groups, n, k = b.shape
        m = a.size(0)
        if m == 0 or n == 0:
            return None
        if k == 0:
            return NotImplemented  # rows of no group still follow the reference's zero/untouched rules
        alignment = get_mk_alignment_for_contiguous_layout()
        grouping = GROUPING["m_psum" if use_psum_layout else "m_ids"]
        zero_gaps = bool(ensure_zero_padding) or not use_psum_layout
        expected_m = int(expected_m_for_psum_layout or 0) if use_psum_layout else 0
        call = call_of(grouping, m, n, k, num_groups, d, None, r.b[0] == 1, zero_gaps=zero_gaps,
                       psum_align=alignment, expected_m=expected_m)
        p = _plan_for(call, overrides)  # (autotuning covers the dense and masked GEMMs)
        if p is None:
            return NotImplemented  # an alignment no tile height divides
        b_rows = _k_major(b).reshape(num_groups * n, k)  # [G*N, K]: expert e's rows start at e*N
        _execute(p, call, a=_k_major(a), b=b_rows, sfa=sfa, sfb=sfb, d=d, c=None, layout=grouped_layout,
                 strides_sfa=(0, sfa.stride(0), sfa.stride(1)),
                 strides_sfb=(sfb.stride(0), sfb.stride(1), sfb.stride(2)), stride_dg=0, stride_dm=d.stride(0),
                 recorder=recorder)
        return None

    return m_grouped


m_grouped_fp8_gemm_nt_contiguous = _m_grouped_contiguous("nt")
m_grouped_fp8_gemm_nn_contiguous = _m_grouped_contiguous("nn")


@replayable("m_grouped_fp8_gemm_nt_masked")
def m_grouped_fp8_gemm_nt_masked(a, sfa, b, sfb, d, masked_m, expected_m, recipe, recipe_a, recipe_b,
                                 compiled_dims, disable_ue8m0_cast, *, overrides: Fp8Overrides = NO_OVERRIDES,
                                 fp4_overrides: Fp4Overrides = NO_FP4_OVERRIDES, recorder=None):
    r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
    if _fp4_form(a, sfa, b, sfb, r):  # (its launch is not recorded: no replay)
        return fp4_launch.m_grouped_fp8_fp4_gemm_nt_masked(a, sfa, b, sfb, d, masked_m, r, overrides=fp4_overrides)
    if not _supported(a, sfa, b, sfb, r):
        return NotImplemented
    num_groups, max_m, k = a.shape
    n = b.size(1)
    if max_m == 0 or n == 0:
        return None
    if k == 0:
        return NotImplemented
    call = call_of(GROUPING["masked"], max_m, n, k, num_groups, d, None, r.b[0] == 1, expected_m=int(expected_m))
    p = _plan_for(call, overrides)
    a_rows = _k_major(a).reshape(num_groups * max_m, k)  # group g's rows start at g*Mmax
    b_rows = _k_major(b).reshape(num_groups * n, k)
    _execute(p, call, a=a_rows, b=b_rows, sfa=sfa, sfb=sfb, d=d, c=None, layout=masked_m,
             strides_sfa=(sfa.stride(0), sfa.stride(1), sfa.stride(2)),
             strides_sfb=(sfb.stride(0), sfb.stride(1), sfb.stride(2)), stride_dg=d.stride(0), stride_dm=d.stride(1),
             recorder=recorder)
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


def _group_blocks_in_place(layout: str, p: Fp8Plan, a: torch.Tensor, b: torch.Tensor, overrides) -> bool:
    """Whether a K-grouped call runs on its per-group blocks as they are (fp8_plan.K_GROUPED_DEVICE_DESCRIPTORS):
    the nt layout on the warp-specialised kernel, with 16-byte aligned storage (each block then starts aligned)."""
    wanted = overrides.k_grouped_device_descriptors
    if wanted is None:
        wanted = fp8_plan.K_GROUPED_DEVICE_DESCRIPTORS
    return (wanted and layout == "nt" and p.kernel == "ws" and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
            and a.is_contiguous() and b.is_contiguous())


def _k_grouped(layout: str):
    def k_grouped(a, sfa, b, sfb, d, ks_cpu, grouped_layout, c, recipe, compiled_dims, use_psum_layout,
                  use_padded_sf_layout=False, *, overrides: Fp8Overrides = NO_OVERRIDES):
        if not _fp8_device(a):
            return NotImplemented
        if use_psum_layout:  # (DeepGEMM runs it on SM100 only; the kernels take group sizes: the reference runs)
            return NotImplemented
        ks = k_grouped_sizes(d, c, ks_cpu)
        if ks is None:
            return None
        if use_padded_sf_layout:  # our kernels read the compact layout: a view of it, or one gather (A > 128)
            k_axis = 1 if layout == "nt" else 0
            sfa = compact_k_grouped_sf(sfa, ks_cpu, k_axis)
            sfb = compact_k_grouped_sf(sfb, ks_cpu, k_axis)
        num_groups, m, n = d.shape
        call = call_of(GROUPING["k_grouped"], m, n, sum(ks), num_groups, d, c, True)
        p = _plan_for(call, overrides)
        sfa_strides = (0, sfa.stride(0), sfa.stride(1)) if layout == "nt" else (0, sfa.stride(1), sfa.stride(0))
        sfb_strides = (0, sfb.stride(0), sfb.stride(1)) if layout == "nt" else (0, sfb.stride(1), sfb.stride(0))
        common = dict(sfa=sfa, sfb=sfb, d=d, c=c, layout=grouped_layout, strides_sfa=sfa_strides,
                      strides_sfb=sfb_strides, stride_dg=d.stride(0), stride_dm=d.stride(1),
                      stride_cg=c.stride(0) if c is not None else 0)
        if _group_blocks_in_place(layout, p, a, b, overrides):
            first = next(kg for kg in ks if kg)  # (descriptor layouts only: the kernel builds each group's own)
            _execute(p, call, a=a[:m * first].view(m, first), b=b[:n * first].view(n, first),
                     group_blocks=(a, b), **common)
            return None
        _execute(p, call, a=_k_grouped_rows(layout, a, m, ks), b=_k_grouped_rows(layout, b, n, ks), **common)
        return None

    k_grouped.__name__ = f"k_grouped_fp8_gemm_{layout}_contiguous"
    return k_grouped


k_grouped_fp8_gemm_nt_contiguous = _k_grouped("nt")
k_grouped_fp8_gemm_tn_contiguous = _k_grouped("tn")
