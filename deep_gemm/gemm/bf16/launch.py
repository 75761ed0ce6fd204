"""CUDA launchers of the BF16 GEMM ops (the op's CUDA kernel calls these after the shared check).

Each launcher takes the op's schema arguments, reads the facts its plan needs off the tensors' metadata
(``bf16_plan.Bf16Call``), gets the call's plan (``bf16_plan.plan``, resolved once per call shape) and launches
``gemm/bf16/kernels/gemm.py`` as the plan says. It returns ``NotImplemented`` where no plan covers the call (the op then
runs the torch reference): an M-grouped alignment no tile height divides, K sizes no K block divides, the K-grouped
psum layout, and M-grouped calls with K == 0. Launchers accept an explicit ``overrides=``
(``bf16_plan.Bf16Overrides``) for tests and sweeps; nothing else steers them.

Operands go to the kernel as they are: a TMA descriptor over the K-major matrix or, for an MN-major operand, over
the [K, rows] matrix it is in memory (BF16 wgmma reads both from shared memory), so no layout is copied. The
dense, M-grouped and masked launchers keep a ``LaunchPlan`` per argument signature (``core/plans.py``): a repeated
call shape replays its recorded launch without planning.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ...common.operands import k_grouped_sizes, run_with_alpha, to_nt, written_without_launch
from ...core import arch
from ...core.determinism import deterministic
from ...core.launch import FastDescriptor, descriptor, interpreting, launch
from ...core.plans import ConfigCache, PlanCache, Recorder, replayable
from ...core.runtime import get_mk_alignment_for_contiguous_layout, usable_sms
from ...core.scratch import split_k_buffers
from ...utils.numeric import group_pad
from . import plan as bf16_plan
from .plan import GROUPING, NO_OVERRIDES, Bf16Call, Bf16Overrides, Bf16Plan

TMA_BYTES = 16
PLAN_OF_CALL = ConfigCache()
_UNCOVERED = object()  # (cached as a plan: ConfigCache treats None as "not resolved yet")


def _plan_for(call: Bf16Call, overrides: Bf16Overrides) -> Bf16Plan | None:
    p = PLAN_OF_CALL.get((call, overrides), lambda key: bf16_plan.plan(*key) or _UNCOVERED)
    return None if p is _UNCOVERED else p


def _aligned_stride(cols: int) -> int:
    """A 16-byte multiple row stride for a matrix of one row (never stepped over; TMA wants one anyway)."""
    return max(8, -(-cols // 8) * 8)


def _tma_rows_ok(x: torch.Tensor) -> bool:
    """x [R, C] with unit column stride can be a TMA matrix: 16-byte row stride (or one row) and start."""
    elem = x.element_size()
    return ((x.size(1) <= 1 or x.stride(1) == 1) and (x.size(0) <= 1 or (x.stride(0) * elem) % TMA_BYTES == 0)
            and (x.storage_offset() * elem) % TMA_BYTES == 0)


def _matrix(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(the matrix a 2-D NT-view operand x [R, K] is in memory, K-major?): x itself when K-major, x.T ([K, R]) when
    MN-major, else a K-major copy (only for layouts the op's check would not pass on the GPU)."""
    if _tma_rows_ok(x):
        return x, True
    if _tma_rows_ok(x.t()):
        return x.t(), False
    return x.contiguous(), True


def _desc(x: torch.Tensor, block_rows: int, block_cols: int):
    rows, cols = x.shape
    row_stride = x.stride(0) if rows > 1 else _aligned_stride(cols)
    return descriptor(x, (rows, cols), (row_stride, 1), (block_rows, block_cols))


def _operand_desc(matrix: torch.Tensor, k_major: bool, rows_block: int, block_k: int):
    """Descriptor over a K-major [R, K] matrix (block [rows_block, BK]) or an MN-major one held as [K, R] (block
    [BK, rows_block])."""
    return _desc(matrix, rows_block, block_k) if k_major else _desc(matrix, block_k, rows_block)


def _view2d(x: torch.Tensor, rows: int, cols: int):
    try:
        return x.view(rows, cols)
    except RuntimeError:
        return None


def _stacked(x: torch.Tensor) -> tuple[torch.Tensor, bool, int, int]:
    """A 3-D NT-view operand [G, R, K] as one 2-D matrix: (matrix, K-major?, rows per group, K rows per group).
    K-major groups stack as [G*R, K]; MN-major ones as [G*K, R]; anything else is copied K-major."""
    g, r, k = x.shape
    flat = _view2d(x, g * r, k)
    if flat is not None and _tma_rows_ok(flat):
        return flat, True, r, 0
    flat = _view2d(x.transpose(1, 2), g * k, r)
    if flat is not None and _tma_rows_ok(flat):
        return flat, False, 0, k
    return x.contiguous().view(g * r, k), True, r, 0


def _rows_view(d: torch.Tensor):
    """D as a 2-D [rows, N] matrix with 16-byte aligned rows (what a TMA store needs), or None."""
    if d.dim() != 2 or d.size(0) == 0 or (d.size(1) > 1 and d.stride(1) != 1):
        return None
    elem = d.element_size()
    ok = ((d.size(0) <= 1 or (d.stride(0) * elem) % TMA_BYTES == 0) and (d.storage_offset() * elem) % TMA_BYTES == 0
          and d.size(1) * elem >= TMA_BYTES)
    return d if ok else None


def _execute(p: Bf16Plan, call: Bf16Call, *, a, a_k_major, b, b_k_major, d, c, layout, a_group_m=0, b_group_n=0,
             b_group_k=0, stride_dg=0, stride_cg=0, recorder=None) -> None:
    """Launch plan ``p``: ``a`` / ``b`` are the operands' 2-D matrices as in memory (see gemm/bf16/kernels/gemm.py)."""
    if p.kernel == "ws":
        tiles = -(-call.m // p.config.block_m) * -(-call.n // p.config.tile_n)
        if call.grouping == GROUPING["k_grouped"]:  # D and C [G, M, N] as [G*M, N] row matrices (contiguous: check)
            tiles *= call.num_groups
            flat = d.view(-1, call.n)
            c = None if c is None else (flat if c is d else c.view(-1, call.n))
            d = flat
        _execute_ws(p.config, p.grid, tiles, call, a, a_k_major, b, b_k_major, d, c, layout, b_group_n, b_group_k,
                    recorder, p.uniform)
        return
    first_item = 0
    if p.kernel == "ws_tail":  # the whole waves in the WS kernel, then only the split pieces below
        first_item = p.config.split_from
        _execute_ws(p.ws_config, call.num_sms, first_item, call, a, a_k_major, b, b_k_major, d, c, layout, b_group_n,
                    b_group_k, recorder)
    cfg = p.config
    m, n, split = call.m, call.n, cfg.split_k
    a_desc = _operand_desc(a, a_k_major, cfg.block_m, cfg.block_k)
    b_desc = _operand_desc(b, b_k_major, cfg.block_n, cfg.block_k)
    # Split tiles (from cfg.split_from on) each get a counter and split_k FP32 tile slots of workspace. Masked: the
    # kernel splits only its last wave's tiles, into at most p.grid pieces (a counter and a slot each, at most).
    split_tiles = -(-m // cfg.block_m) * -(-n // cfg.tile_n) - cfg.split_from
    slots = split_tiles * split
    if call.grouping == GROUPING["masked"]:
        split_tiles = slots = p.grid
    ws, counters = split_k_buffers(d, split, split_tiles, slots * cfg.block_m * cfg.block_n, recorder)
    d_desc = _desc(d, cfg.block_m, cfg.block_n) if p.d_tma else a_desc
    # A tile's tail columns (cfg.block_n_tail): their own B and D blocks (see gemm/bf16/kernels/gemm.py).
    b2_desc, d2_desc = b_desc, d_desc
    if cfg.block_n_tail:
        b2_desc = _operand_desc(b, b_k_major, cfg.block_n_tail, cfg.block_k)
        d2_desc = _desc(d, cfg.block_m, cfg.block_n_tail) if p.d_tma else a_desc
    c_arg = c if c is not None else d
    stride_cm = c.stride(-2) if c is not None else 0
    args = (a_desc, b_desc, b2_desc, d, c_arg, d_desc, d2_desc, layout if layout is not None else d, ws, counters,
            m, n, call.k, call.num_groups, a_group_m, b_group_n, b_group_k, stride_dg, d.stride(-2), stride_cg,
            stride_cm, cfg.split_from, first_item, cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m, p.grid,
            cfg.num_stages, split, call.grouping, p.g_pad, call.psum_align, call.zero_gaps, call.has_c, p.d_tma,
            a_k_major, b_k_major, cfg.block_n_tail, p.uniform, p.psum_walk)
    # (split_from is a runtime argument: one binary serves every value)
    config_key = (replace(cfg, split_from=0), p.grid, p.d_tma, p.g_pad, call.grouping, call.psum_align, call.zero_gaps,
                  call.has_c, d.dtype, a_k_major, b_k_major, p.uniform, p.psum_walk)
    from .kernels.gemm import _bf16_gemm_kernel
    launch(_bf16_gemm_kernel, (p.grid, 1, 1), args, name="bf16_gemm", config_key=config_key,
           num_warps=cfg.num_warps, num_stages=cfg.num_stages, device_index=d.device.index or 0,
           record=recorder.launches if recorder is not None else None)


def _execute_ws(cfg, grid: int, num_tiles: int, call: Bf16Call, a, a_k_major, b, b_k_major, d, c, layout, b_group_n,
                b_group_k, recorder, uniform: bool = False) -> None:
    """Launch the warp-specialised kernel on the first ``num_tiles`` tiles (dense or M-grouped; D stored and C
    loaded by TMA in 64-row slabs, psum slabs holding a group's end by pointers where gaps stay untouched; a tile's
    tail columns, cfg.block_n_tail, through B and D descriptors of their own; ``uniform``: Bf16Plan.uniform)."""
    from .kernels.gemm_ws import _bf16_gemm_ws_kernel

    def gluon_desc(x, block_rows, block_cols):
        rows, cols = x.shape
        row_stride = x.stride(0) if rows > 1 else _aligned_stride(cols)
        return FastDescriptor(x, (rows, cols), (row_stride, 1), (block_rows, block_cols), gluon=True)
    a_desc = gluon_desc(a, cfg.block_m, cfg.block_k) if a_k_major else gluon_desc(a, cfg.block_k, cfg.block_m)
    b_desc = gluon_desc(b, cfg.block_n, cfg.block_k) if b_k_major else gluon_desc(b, cfg.block_k, cfg.block_n)
    # A 64-row tile (masked): its consumers split the columns (the kernel's SPLIT_N), each storing 64 x BN/2 slabs
    split_n = cfg.block_m == 64
    d_desc = gluon_desc(d, 64, cfg.block_n // 2 if split_n else cfg.block_n)
    c_desc = gluon_desc(c, 64, cfg.block_n) if c is not None and c is not d else d_desc
    tail = cfg.block_n_tail
    b2_desc, d2_desc = b_desc, d_desc
    if tail:
        b2_desc = gluon_desc(b, tail, cfg.block_k) if b_k_major else gluon_desc(b, cfg.block_k, tail)
        d2_desc = gluon_desc(d, 64, tail)
    consumer_regs, producer_regs = bf16_plan.WS_REGISTERS
    g_pad = group_pad(call.num_groups)
    zero_gaps = call.zero_gaps or call.grouping != GROUPING["m_psum"]  # (the kernel's ZERO_GAPS: psum only)
    args = (a_desc, b_desc, b2_desc, d_desc, d2_desc, c_desc, layout if layout is not None else d, d, d.stride(-2),
            call.m, call.n, call.k, call.num_groups, b_group_n, b_group_k, num_tiles, cfg.block_m, cfg.block_n,
            cfg.block_k, cfg.num_stages, cfg.group_m, grid, a_k_major, b_k_major, call.grouping, g_pad,
            call.psum_align, call.has_c, tail, consumer_regs, producer_regs, zero_gaps, uniform, split_n)
    config_key = (cfg, grid, a_k_major, b_k_major, call.grouping, g_pad, call.psum_align, call.has_c, d.dtype,
                  consumer_regs, producer_regs, zero_gaps, uniform)
    launch(_bf16_gemm_ws_kernel, (grid, 1, 1), args, name="bf16_gemm_ws", config_key=config_key, num_warps=4,
           num_stages=1, device_index=d.device.index or 0,
           record=recorder.launches if recorder is not None else None)


def _call(grouping: int, m: int, n: int, k: int, num_groups: int, d: torch.Tensor, c, a_k_major: bool,
          b_k_major: bool, d_tma: bool, psum_align: int = 128, expected_m: int = 0, k_divisor: int = 0,
          zero_gaps: bool = True, d_aligned: bool = False) -> Bf16Call:
    return Bf16Call(grouping, m, n, k, num_groups, usable_sms(), c is not None, d.element_size(), a_k_major,
                    b_k_major, d_tma, psum_align, expected_m, k_divisor, zero_gaps, _c_tma(c, d), interpreting(),
                    d_aligned, arch.sm_of_tensor(d), deterministic())


def _c_tma(c, d) -> bool:
    """C can arrive by TMA through a descriptor of D's shape and block: C is D, or has D's layout, 16-byte rows."""
    if c is None or _rows_view(d) is None:
        return False
    return c is d or (c.dtype == d.dtype and c.shape == d.shape and c.stride() == d.stride()
                      and _rows_view(c) is not None)


# ---- dense -------------------------------------------------------------------------------------------------------

PLANS = PlanCache()


def _dense(layout: str):
    def bf16_gemm(a, b, d, c, compiled_dims, alpha=None, *, signature=None, overrides: Bf16Overrides = NO_OVERRIDES):
        if alpha is not None:  # host route (run_with_alpha): FP32 scratch, then d = alpha * scratch + c
            return run_with_alpha(lambda out, acc: bf16_gemm(a, b, out, acc, compiled_dims, overrides=overrides),
                                  d, c, alpha)
        inputs = (a, b, d, c)
        key = PLANS.key((layout, overrides), signature, inputs, d)
        if PLANS.replay(key, inputs, d):
            return None
        a_nt, _, b_nt, _ = to_nt(layout, a, None, b, None)
        m, k = a_nt.shape
        n = b_nt.size(0)
        if written_without_launch(d, c, m, n, k):
            return None
        a_mat, a_k_major = _matrix(a_nt)
        b_mat, b_k_major = _matrix(b_nt)
        call = _call(GROUPING["dense"], m, n, k, 1, d, c, a_k_major, b_k_major, _rows_view(d) is not None)
        p = _plan_for(call, overrides)
        if p is None:
            return NotImplemented
        recorder = Recorder() if key is not None else None
        _execute(p, call, a=a_mat, a_k_major=a_k_major, b=b_mat, b_k_major=b_k_major, d=d, c=c, layout=None,
                 recorder=recorder)
        PLANS.record(key, inputs, d, recorder)
        return None

    bf16_gemm.__name__ = f"bf16_gemm_{layout}"
    bf16_gemm.accepts_signature = True
    return bf16_gemm


bf16_gemm_nt = _dense("nt")
bf16_gemm_nn = _dense("nn")
bf16_gemm_tn = _dense("tn")
bf16_gemm_tt = _dense("tt")


# ---- M-grouped contiguous and masked ---------------------------------------------------------------------------

def _m_grouped_contiguous(layout: str):
    @replayable(f"m_grouped_bf16_gemm_{layout}_contiguous")
    def m_grouped(a, b, d, grouped_layout, compiled_dims, use_psum_layout, ensure_zero_padding,
                  expected_m_for_psum_layout=None, *, overrides: Bf16Overrides = NO_OVERRIDES, recorder=None):
        b_nt = b if layout == "nt" else b.transpose(-1, -2)
        num_groups, n, k = b_nt.shape
        m = a.size(0)
        if m == 0 or n == 0:
            return None
        if k == 0:
            return NotImplemented  # rows of no group still follow the reference's zero/untouched rules
        a_mat, a_k_major = _matrix(a)
        b_mat, b_k_major, b_group_n, b_group_k = _stacked(b_nt)
        grouping = GROUPING["m_psum" if use_psum_layout else "m_ids"]
        zero_gaps = bool(ensure_zero_padding) or not use_psum_layout
        d_aligned = _rows_view(d) is not None
        expected_m = int(expected_m_for_psum_layout or 0) if use_psum_layout else 0
        call = _call(grouping, m, n, k, num_groups, d, None, a_k_major, b_k_major, zero_gaps and d_aligned,
                     psum_align=get_mk_alignment_for_contiguous_layout(), expected_m=expected_m,
                     k_divisor=0 if b_k_major else k, zero_gaps=zero_gaps, d_aligned=d_aligned)
        p = _plan_for(call, overrides)
        if p is None:
            return NotImplemented
        if p.psum_walk:  # a masked launch over the group ends: rows of the [M, *] A and D, no group stride
            call = replace(call, grouping=GROUPING["masked"])
        _execute(p, call, a=a_mat, a_k_major=a_k_major, b=b_mat, b_k_major=b_k_major, d=d, c=None,
                 layout=grouped_layout, b_group_n=b_group_n, b_group_k=b_group_k, recorder=recorder)
        return None

    return m_grouped


m_grouped_bf16_gemm_nt_contiguous = _m_grouped_contiguous("nt")
m_grouped_bf16_gemm_nn_contiguous = _m_grouped_contiguous("nn")


@replayable("m_grouped_bf16_gemm_nt_masked")
def m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m, compiled_dims, *,
                                  overrides: Bf16Overrides = NO_OVERRIDES, recorder=None):
    num_groups, max_m, k = a.shape
    n = b.size(1)
    if max_m == 0 or n == 0:
        return None
    if k == 0:
        return NotImplemented
    a_mat, a_k_major, a_group_m, _ = _stacked(a)
    if not a_k_major:  # the kernel steps MN-major A only along K
        a_mat, a_k_major, a_group_m = a.contiguous().view(num_groups * max_m, k), True, max_m
    b_mat, b_k_major, b_group_n, b_group_k = _stacked(b)
    # The WS kernel stores D through a [G*Mmax, N] TMA descriptor (whole slabs of valid rows; bf16_plan._masked_plan)
    d_rows = _view2d(d, num_groups * max_m, n)
    d_rows = None if d_rows is None else _rows_view(d_rows)
    call = _call(GROUPING["masked"], max_m, n, k, num_groups, d, None, a_k_major, b_k_major, False,
                 expected_m=int(expected_m), k_divisor=0 if b_k_major else k, d_aligned=d_rows is not None)
    p = _plan_for(call, overrides)
    if p is None:
        return NotImplemented
    if p.kernel == "ws":  # (its M: the G*Mmax rows of A's and D's row views; it counts its tiles on the device)
        _execute_ws(p.config, p.grid, 0, replace(call, m=num_groups * max_m), a_mat, a_k_major, b_mat, b_k_major,
                    d_rows, None, masked_m, b_group_n, b_group_k, recorder, p.uniform)
        return None
    _execute(p, call, a=a_mat, a_k_major=True, b=b_mat, b_k_major=b_k_major, d=d, c=None, layout=masked_m,
             a_group_m=a_group_m, b_group_n=b_group_n, b_group_k=b_group_k, stride_dg=d.stride(0),
             recorder=recorder)
    return None


# ---- K-grouped -------------------------------------------------------------------------------------------------

def k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks_cpu, grouped_layout, c, compiled_dims, use_psum_layout, *,
                                      overrides: Bf16Overrides = NO_OVERRIDES):
    if use_psum_layout:
        return NotImplemented  # (the kernels take group sizes; the psum ends with their padding run the reference)
    ks = k_grouped_sizes(d, c, ks_cpu)
    if ks is None:
        return None
    num_groups, m, n = d.shape
    a_mat, a_k_major = _matrix(a.t())  # [sum K, M] MN-major: held as itself
    b_mat, b_k_major = _matrix(b.t())
    if a_k_major or b_k_major:
        return NotImplemented  # (the check requires MN-major operands)
    # The WS kernel stores D (loads C) through [G*M, N] TMA descriptors: 16-byte rows and start (D and C are
    # contiguous: the check), C laid out as D: _c_tma of the [G*M, N] row views.
    d_rows = d.view(-1, n)
    d_aligned = _rows_view(d_rows) is not None
    c_tma = _c_tma(None if c is None else (d_rows if c is d else c.view(-1, n)), d_rows)
    call = replace(_call(GROUPING["k_grouped"], m, n, sum(ks), num_groups, d, c, False, False, False,
                         k_divisor=bf16_plan.k_divisor_of(ks), d_aligned=d_aligned), c_tma=c_tma)
    p = _plan_for(call, overrides)
    if p is None:
        return NotImplemented
    _execute(p, call, a=a_mat, a_k_major=False, b=b_mat, b_k_major=False, d=d, c=c, layout=grouped_layout,
             stride_dg=d.stride(0), stride_cg=c.stride(0) if c is not None else 0)
    return None
