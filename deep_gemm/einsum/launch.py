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
row. Launches are recorded per argument signature and replayed (``core/plans.replayable``).

Devices: the kernels are ``tl.*`` kernels tuned on sm_90a. On a device with less shared memory per block (sm_80,
sm_89, sm_120: ``deep_gemm.core.arch``) the planned tile's pipeline is cut to fit (``fit_smem``), to a narrower tile
where not even two stages fit; ``fp8_einsum`` needs FP8 MMAs (sm_89 and later, else the reference runs); the cooperative
``"grid"`` reduction is offered only where SMs have sm_90's limits (``arch.sm90_occupancy``).

Tile configs, batch splits and FP8 routes come from ``plan.py``; an ``overrides=`` keyword (``plan.EinsumOverrides``,
through ``core.registry.run_launcher``) pins them for sweeps and tests.
"""

from __future__ import annotations

import torch

from ..core import arch
from .._internals import COMPILE_OPTIONS
from ..core.determinism import deterministic
from ..core.launch import descriptor, interpreting, launch
from ..core.plans import replayable
from ..core.scratch import split_k_buffers
from ..common.operands import resolve_recipe, torch_matmul_into, write_without_product
from ..core.runtime import usable_sms
from ..utils.numeric import ceil_div
from .checks import NO_CUBLASLT_EXPRESSION, Equation
from .plan import (BH_WIDE, NO_OVERRIDES, BmkPlan, EinsumOverrides, TileConfig, bh_config, bmk_plan,
                   fitted_bh_config, fitted_fp8_config, fp8_config, fp8_route, reduce_loads, reduce_rows)


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
    return min(tiles, usable_sms()) if cfg.persistent else tiles


def _record(recorder):
    return recorder.launches if recorder is not None else None


# ---- BF16 -------------------------------------------------------------------------------------------------------

def _launch_bh(a3, b3, b_k_major: bool, d3, c3, cfg: TileConfig, recorder) -> None:
    """D[g] = C[g] + A[g] @ B[g]^T over 3-D NT views (all TMA-ready except possibly D and C)."""
    from .kernels import _bh_einsum_gemm_kernel
    g, m, k = a3.shape
    n = d3.size(2)
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    tiles = g * ceil_div(m, bm) * ceil_div(n, bn)
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
    tiles = ceil_div(m, bm) * ceil_div(n, bn)
    splits = ceil_div(s, ceil_div(s, max(1, min(s, plan.splits))))  # no empty range
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
        rm = plan.reduce_rows or reduce_rows(tiles, bm)
        loads = plan.reduce_loads or reduce_loads(splits)
        # D and C by 8-byte vectors where both allow it (else elementwise: views of odd offset or stride)
        aligned = n % 4 == 0 and _vector_ready(d) and (c is None or _vector_ready(c))
        args = (ws, d, c_arg, m, n, splits, *strides, bm, bn, rm, loads, c is not None, aligned)
        launch(_bmk_reduce_partials, (tiles * 2 * (bm // rm), 1, 1), args, name="bmk_reduce_partials",
               config_key=(bm, bn, rm, loads, c is not None, aligned, d.dtype, c_arg.dtype),
               num_warps=max(1, rm * bn // 128), num_stages=1, device_index=device, record=_record(recorder))


def _vector_ready(t: torch.Tensor) -> bool:
    """Whether every row of a 2-D t starts 16-byte aligned (the reduction's ALIGNED hint)."""
    return t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def _cublas_bh(eq: Equation, a, b, d, c):
    """DeepGEMM's ``use_cublaslt`` path: cuBLAS's strided batched GEMM (torch.bmm / baddbmm) straight into the
    permuted view of d; NotImplemented where torch has no such call (FP32 d from BF16 in old torch builds)."""
    a3 = a.permute(eq.perm_a)  # [G, M, K]
    b3 = b.permute(eq.perm_b).transpose(1, 2)  # [G, K, N]
    d3 = d.permute(eq.perm_out)
    c3 = None if c is None else d3 if c is d else c.permute(eq.perm_out)
    fp32_out = d.dtype != torch.bfloat16
    if fp32_out and not (d.is_cuda and hasattr(torch.ops.aten.bmm, "dtype_out")):  # (a CUDA-only overload)
        return NotImplemented
    torch_matmul_into(a3, b3, d3, c3, fp32_out)
    return None


@replayable("einsum")
def einsum(expr, a, b, d, c, use_cublaslt, *, overrides: EinsumOverrides = NO_OVERRIDES, recorder=None):
    config = overrides.config
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
        plan = (config if isinstance(config, BmkPlan)
                else bmk_plan(s, m, n, k, config, sm=sm, deterministic=deterministic()))
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
        grid = (ceil_div(mn, _TRANSPOSE_BLOCK), ceil_div(k, _TRANSPOSE_BLOCK), g)
        _transpose_kernel[grid](x3.view(torch.uint8), view.view(torch.uint8), mn, k, x3.stride(0), x3.stride(2),
                                view.stride(0), view.stride(1), BR=_TRANSPOSE_BLOCK, BC=_TRANSPOSE_BLOCK,
                                num_warps=4, **COMPILE_OPTIONS)
    else:
        view.copy_(x3)
    return view


def _fp8_per_entry(a3, sfa3, b3, sfb3, d3, c3, recipe) -> None:
    """D[g] = C[g] + A[g] @ B[g]^T through the dense FP8 GEMM op, one call per batch entry (2-D views, no copies)."""
    gemm = torch.ops.deep_gemm.fp8_gemm_nt.default
    gran = [1, recipe.b[0], recipe.b[1]]
    for i in range(a3.size(0)):
        gemm(a3[i], sfa3[i], b3[i], sfb3[i], d3[i], None if c3 is None else c3[i], gran, None, None, "nk", False)


@replayable("fp8_einsum")
def fp8_einsum(expr, a, sfa, b, sfb, d, c, recipe, *, overrides: EinsumOverrides = NO_OVERRIDES, recorder=None):
    config, route = overrides.config, overrides.route
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
    route = route or ("batched" if config is not None else fp8_route(g, m))
    if route == "per_entry" and r.a[1] == 128:
        _fp8_per_entry(a3, sfa3, b3, sfb3, d3, c3, r)
        return None
    from .kernels import _fp8_einsum_gemm_kernel
    cfg = config or fp8_config(g, m, n)
    if config is None:
        cfg = fitted_fp8_config(cfg, d.element_size(), c is not None, r.a[1], sm)
    bm, bn, bk = cfg.block_m, cfg.block_n, r.a[1]  # one K block per scale
    b_per_row = r.b[0] == 1
    tiles = g * ceil_div(m, bm) * ceil_div(n, bn)
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
