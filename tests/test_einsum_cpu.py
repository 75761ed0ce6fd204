"""The einsum family's Triton kernels (deep_gemm/einsum/kernels.py) in Triton's CPU interpreter, small shapes.

Every case runs the op's CUDA launcher on CPU tensors after the op's check (``triton_harness.run_triton``: the test
fails if the launcher declines, so it cannot pass on the reference) and compares with a float64 computation written
without einsum or matmul (``test_einsum_reference_cpu.TRUTH``). BF16 dots need the interpreter patch
(``interpreter_bf16``). GPU checks (DeepGEMM's shapes and thresholds, graphs, compile, threads) are in
``test_einsum_gpu.py``.
"""

from __future__ import annotations

import pytest
import torch

import deep_gemm
import interpreter_bf16  # noqa: F401  (BF16 tl.dot in the interpreter)
from deep_gemm.core.registry import run_launcher
from deep_gemm.einsum import launch as einsum_launch
from deep_gemm.einsum import plan as einsum_plan
from deep_gemm.einsum.plan import EinsumOverrides
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from triton_harness import run_forced

from bf16_inputs import output_and_accumulator, randn  # noqa: E402
from test_einsum_reference_cpu import (FP8_CASES, TRUTH, EinsumCase, _subscripts, assert_close,  # noqa: E402
                                       bf16_operands, fp8_operand)
from triton_harness import run_triton  # noqa: E402

BF16 = torch.bfloat16
BH_CASES = [
    EinsumCase("bhr,hdr->bhd", dict(b=5, h=3, r=200, d=72)),  # K and N tails, W a row-padded slice
    EinsumCase("bhr,hdr->bhd", dict(b=130, h=2, r=64, d=16)),  # two M blocks, one narrow N block
    EinsumCase("bhd,hdr->bhr", dict(b=5, h=3, d=72, r=200)),  # B N-major (read as [K, N])
    EinsumCase("bhd,hdr->bhr", dict(b=3, h=2, d=136, r=24)),
]
BMK_CASES = [
    EinsumCase("bmk,bnk->mn", dict(b=7, m=40, n=136, k=80)),
    EinsumCase("bmk,bnk->mn", dict(b=3, m=130, n=24, k=64)),
]


@pytest.fixture
def eight_sms():
    """Pretend 8 SMs: persistent grids loop, and the bmk batch split makes several ranges."""
    deep_gemm.set_num_sms(8)
    yield
    deep_gemm.set_num_sms(0)


def _run(case: EinsumCase, out_dtype, accumulate, **kwargs):
    a, b = bf16_operands(case)
    d, c, c_value = output_and_accumulator(case.shape(_subscripts(case.expr)[2]), out_dtype, accumulate)
    run_triton("einsum", case.expr, a, b, d, c, **kwargs)
    return d, c_value + TRUTH[case.expr](a.double(), b.double())


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("out_dtype", [BF16, torch.float32], ids=["bf16_out", "fp32_out"])
@pytest.mark.parametrize("case", BH_CASES + BMK_CASES, ids=str)
def test_bf16_einsum_kernels(case, out_dtype, accumulate, eight_sms):
    d, truth = _run(case, out_dtype, accumulate)
    assert_close(d, truth, str(case))


@pytest.mark.parametrize("cfg", einsum_plan.BH_CONFIGS, ids=str)
@pytest.mark.parametrize("expr", ["bhr,hdr->bhd", "bhd,hdr->bhr"])
def test_every_bh_tile_config(expr, cfg):
    case = EinsumCase(expr, dict(b=70, h=2, r=136, d=264) if expr == "bhr,hdr->bhd" else dict(b=70, h=2, d=136, r=264))
    a, b = bf16_operands(case)
    d = torch.empty(case.shape(_subscripts(expr)[2]), dtype=BF16)
    run_forced("einsum", expr, a, b, d, overrides=EinsumOverrides(config=cfg))
    assert_close(d, TRUTH[expr](a.double(), b.double()), f"{case} {cfg}")


def test_bmk_deterministic_plan_is_one_range_and_one_tile():
    """Deterministic mode: bmk,bnk->mn sums the batch in one range with the 64-row tile at every shape, so an
    element's reduction order does not follow M or N; the default plan splits short-M long-batch calls."""
    shapes = [(129, 64, 512, 1024), (4096, 64, 64, 256), (129, 4096, 512, 1024), (37, 72, 200, 208)]
    assert any(einsum_plan.bmk_plan(*shape, cooperative=False).splits > 1 for shape in shapes)
    pinned = {einsum_plan.bmk_plan(*shape, cooperative=False, deterministic=True) for shape in shapes}
    assert len(pinned) == 1 and next(iter(pinned)).splits == 1
    assert next(iter(pinned)).tile == einsum_plan.BMK_CONFIGS[1]


@pytest.mark.parametrize("cfg", einsum_plan.BMK_CONFIGS, ids=str)
@pytest.mark.parametrize("sms", [1, 8])
def test_bmk_split_over_the_batch_is_deterministic(cfg, sms):
    deep_gemm.set_num_sms(sms)
    try:
        case = BMK_CASES[0]
        a, b = bf16_operands(case)
        d0 = torch.randn(40, 136)
        outs = []
        for _ in range(2):  # the second call finds the tile counters reset by the first
            d = d0.clone()
            run_forced("einsum", case.expr, a, b, d, d, overrides=EinsumOverrides(config=cfg))
            outs.append(d)
        assert_close(outs[0], d0.double() + TRUTH[case.expr](a.double(), b.double()))
        assert_bitwise_equal(outs[0], outs[1], "two calls")
    finally:
        deep_gemm.set_num_sms(0)


# Batch splits of bmk,bnk->mn: both reductions, a split that does not divide S (a short last range), every batch
# entry its own range, a reduction row count other than the planned one, 64-row tiles; odd M and N tails.
BMK_PLANS = [
    einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], 3),
    einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], 7, reduce_rows=4),
    einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], 3, "serial"),
    einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[1], 2, reduce_rows=16),
]


@pytest.mark.parametrize("plan,out_dtype,accumulate", [
    (BMK_PLANS[0], torch.float32, "d"), (BMK_PLANS[1], BF16, "none"), (BMK_PLANS[2], torch.float32, "distinct"),
    (BMK_PLANS[3], BF16, "distinct")], ids=str)
def test_bmk_batch_splits_and_reductions(plan, out_dtype, accumulate):
    case = EinsumCase("bmk,bnk->mn", dict(b=7, m=72, n=136, k=80))  # two N tiles (a tail), one M tile (a tail)
    a, b = bf16_operands(case)
    d, c, c_value = output_and_accumulator((72, 136), out_dtype, accumulate)
    outs = []
    for _ in range(2):  # the same bits on the second call (which also finds the serial counters reset)
        d_call = d.clone()
        c_call = d_call if accumulate == "d" else c
        run_forced("einsum", case.expr, a, b, d_call, c_call, overrides=EinsumOverrides(config=plan))
        outs.append(d_call)
    assert_close(outs[0], c_value + TRUTH[case.expr](a.double(), b.double()), str(plan))
    assert_bitwise_equal(outs[0], outs[1], f"two calls of {plan}")


def test_bmk_parallel_and_serial_reductions_agree():
    # Both sum the same partials in range order: equal values (not a tolerance), whichever reduction runs.
    case = EinsumCase("bmk,bnk->mn", dict(b=9, m=40, n=24, k=64))
    a, b = bf16_operands(case)
    outs = []
    for reduce in ("parallel", "serial"):
        d = torch.zeros(40, 24)
        plan = einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], 4, reduce)
        run_forced("einsum", case.expr, a, b, d, overrides=EinsumOverrides(config=plan))
        outs.append(d)
    assert torch.equal(outs[0], outs[1])


def _emulated_reduction(ws, plan, m, n, splits, c, out_dtype):
    """The parallel reduction in torch: each element summed from -0.0 over ranges 0, 1, ..., splits - 1 in order
    (FP32 adds, as the kernel's), then + C, then rounded once to D's dtype. ws: the GEMM kernel's partial slots,
    (split * tiles + tile) * 2 + half, each [BM, BN/2] row-major; tile = m block * n blocks + n block."""
    bm, bn = plan.tile.block_m, plan.tile.block_n
    nm, nn = -(-m // bm), -(-n // bn)
    parts = ws[:splits * nm * nn * bm * bn].view(splits, nm, nn, 2, bm, bn // 2)
    total = torch.full(parts.shape[1:], -0.0)
    for r in range(splits):
        total = total + parts[r]
    total = total.permute(0, 3, 1, 2, 4).reshape(nm * bm, nn * bn)[:m, :n]
    if c is not None:
        total = total + c.float()
    return total.to(out_dtype)


# The parallel reduction against its torch emulation, bit for bit:
# tails in M and N (N = 134: not a multiple of 4, so D and C go elementwise; 136 by vectors), s = 1 (no split),
# s = 3, every range one batch entry, more ranges than loads in flight (two rounds of 16), C is D, a distinct C,
# no C, BF16 and FP32 D, both tiles.
BMK_REDUCTION_CASES = [
    (dict(b=3, m=72, n=136, k=64), einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[1], 3), torch.float32, "d"),
    (dict(b=1, m=40, n=24, k=64), einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[1], 1), torch.float32, "d"),
    (dict(b=5, m=130, n=134, k=64), einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], 5), BF16, "distinct"),
    (dict(b=20, m=40, n=136, k=64), einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[1], 20, reduce_loads=16),
     torch.float32, "distinct"),
    (dict(b=7, m=72, n=134, k=80), einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[1], 4, reduce_rows=1), BF16,
     "d"),
    (dict(b=7, m=64, n=128, k=64), einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], 7, reduce_rows=8),
     torch.float32, "none"),
]


@pytest.mark.parametrize("dims,plan,out_dtype,accumulate", BMK_REDUCTION_CASES,
                         ids=lambda x: str(x) if not isinstance(x, dict) else "-".join(f"{k}{v}" for k, v in x.items()))
def test_bmk_parallel_reduction_bits(dims, plan, out_dtype, accumulate):
    from deep_gemm.core.plans import Recorder
    case = EinsumCase("bmk,bnk->mn", dims)
    a, b = bf16_operands(case)
    m, n = dims["m"], dims["n"]
    d0, c0, c_value = output_and_accumulator((m, n), out_dtype, accumulate)
    d = d0.clone()
    c = d if accumulate == "d" else c0
    c_before = None if c is None else c.clone()
    recorder = Recorder()
    einsum_launch._launch_bmk(a, b, d, c, plan, recorder)
    if plan.splits > 1:
        (ws,) = recorder.scratch
        assert_bitwise_equal(d, _emulated_reduction(ws, plan, m, n, plan.splits, c_before, out_dtype),
                             f"{plan} against its emulation")
    assert_close(d, c_value + TRUTH[case.expr](a.double(), b.double()), str(plan))


def test_bmk_plan_rules():
    deep_gemm.set_num_sms(132)
    try:
        et = einsum_plan
        tile = et.BMK_CONFIGS[0]
        # DeepGEMM's rows. S = 4096: bound by DRAM, split over at most one wave of programs on 128x128 tiles;
        # S = 129 (a short reduction): the 64 x 128 tile, two programs per SM. Every split is a parallel reduction
        # over ranges that cover the batch, within the wave.
        short = et.BMK_CONFIGS[1]
        for s, m, n, k in ((4096, 128, 384, 128), (4096, 256, 256, 256), (4096, 384, 128, 384),
                           (129, 128, 384, 128), (129, 256, 256, 256), (129, 384, 128, 384)):
            p = et.bmk_plan(s, m, n, k)
            assert p.tile is (tile if s == 4096 else short) and p.reduce == "parallel", p
            tiles = -(-m // p.tile.block_m) * -(-n // p.tile.block_n)
            wave = et.BMK_PROGRAMS_PER_SM[p.tile.block_m, p.tile.block_n] * 132
            assert 1 < p.splits <= s and p.splits * tiles <= wave, p
        assert et.bmk_plan(3, 128, 128, 64).splits == 1  # 3 K steps in all: no split
        assert et.bmk_plan(4096, 2048, 2048, 128).splits == 1  # 256 tiles fill the SMs alone
        assert et.bmk_plan(4096, 64, 128, 128).tile is et.BMK_CONFIGS[1]
        # 64 tiles: two ranges; the last to arrive sums two partials faster than a second launch would start.
        assert et.bmk_plan(512, 1024, 1024, 128) == et.BmkPlan(tile, 2, "serial")
        assert et.bmk_plan(512, 1024, 1024, 128, reduce="parallel") == et.BmkPlan(tile, 2, "parallel")
        times = [et.bmk_time_us(129, 128, 384, 128, tile, x) for x in (1, 22, 44)]
        assert times[1] < times[2] < times[0]
        # Rows per reduction program: at least two programs per SM (3 tiles x 2 halves x 64 chunks = 384), at most 8
        assert et.reduce_rows(3, 128) == 2
        assert et.reduce_rows(6, 64) == 2
        assert et.reduce_rows(64, 128) == 8
        assert et.reduce_rows(1, 64) == 1
    finally:
        deep_gemm.set_num_sms(0)


def test_bmk_grid_reduction_is_offered_only_where_launches_can_be_cooperative():
    # The interpreter (this CPU run) runs programs one after another: a program waiting for the others would wait
    # forever, so its plans never offer "grid". On CUDA "grid" is offered but priced by its measured kernel time
    # (BMK_GRID_SYNC_US: slower than the parallel reduction's two kernels on DeepGEMM's s = 129 rows), so DeepGEMM's
    # rows keep "parallel"; pinned, "grid" gets the parallel plan's splits (one
    # wave of programs: all resident at once, what the cooperative launch needs).
    et = einsum_plan
    assert et.bmk_reductions() == ("parallel", "serial")
    assert et.bmk_reductions(cooperative=True) == ("parallel", "serial", "grid")
    deep_gemm.set_num_sms(132)
    try:
        for s, m, n, k in [(s, m, n, k) for s in (129, 4096) for m, n, k in [(128, 384, 128), (256, 256, 256),
                                                                             (384, 128, 384)]]:
            parallel = et.bmk_plan(s, m, n, k)
            assert parallel.reduce == "parallel" and parallel.splits > 1
            assert et.bmk_plan(s, m, n, k, cooperative=True) == parallel
            grid = et.bmk_plan(s, m, n, k, reduce="grid", cooperative=True)
            assert grid == et.BmkPlan(parallel.tile, parallel.splits, "grid")
            tiles = -(-m // grid.tile.block_m) * -(-n // grid.tile.block_n)
            per_sm = et.BMK_PROGRAMS_PER_SM[grid.tile.block_m, grid.tile.block_n]
            assert tiles * grid.splits <= per_sm * 132
        assert et.bmk_plan(3, 128, 128, 64, cooperative=True).splits == 1  # (nothing to reduce)
        # Two ranges of 64 tiles: the last arriver sums two partials sooner than every range waits for the other.
        assert et.bmk_plan(512, 1024, 1024, 128, cooperative=True).reduce == "serial"
    finally:
        deep_gemm.set_num_sms(0)


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
def test_bmk_grid_plan_runs_the_parallel_reduction_in_the_interpreter(accumulate):
    # A pinned "grid" plan reaches the interpreter as "parallel" (BmkPlan): the same bits, no wait that never ends.
    case = EinsumCase("bmk,bnk->mn", dict(b=7, m=72, n=136, k=80))
    a, b = bf16_operands(case)
    d, c, c_value = output_and_accumulator((72, 136), torch.float32, accumulate)
    outs = []
    for reduce in ("grid", "parallel"):
        d_call = d.clone()
        c_call = d_call if accumulate == "d" else c
        plan = einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[1], 3, reduce)
        run_forced("einsum", case.expr, a, b, d_call, c_call, overrides=EinsumOverrides(config=plan))
        outs.append(d_call)
    assert_close(outs[0], c_value + TRUTH[case.expr](a.double(), b.double()))
    assert_bitwise_equal(outs[0], outs[1], "grid (run as parallel) and parallel")


def _grid_slices(bm: int, bn: int, splits: int):
    """The elements of a tile each range of the grid reduction sums (kernels._bmk_grid_reduce): (range, element
    indices, rows, columns in the tile)."""
    half_n, tile = bn // 2, bm * bn
    per_slice = -(-tile // splits)
    for r in range(splits):
        begin = r * per_slice
        e = torch.arange(begin, max(begin, min(begin + per_slice, tile)))  # (empty past the tile's end)
        yield r, e, (e % (bm * half_n)) // half_n, (e // (bm * half_n)) * half_n + e % half_n


@pytest.mark.parametrize("bm,bn,splits", [(64, 128, 26), (64, 128, 33), (64, 128, 43), (128, 128, 44),
                                          (128, 128, 33), (64, 128, 3), (64, 128, 1), (64, 128, 1000)])
def test_bmk_grid_slices_cover_each_tile_once_in_the_parallel_order(bm, bn, splits):
    # The grid reduction's slices (contiguous in each range's partial slots) partition the tile, put every element
    # where the parallel reduction puts it (slot half, row, column in half), and summing each element's ranges
    # from -0.0 in range order gives the parallel reduction's bits (emulated in FP32 here: the kernels' adds).
    half_n = bn // 2
    partials = torch.randn(splits, bm * bn) * torch.logspace(-20, 20, splits)[:, None]
    partials[:, :7] = torch.tensor([0.0, -0.0, 1e30, -1e30, 3.0, float("inf"), -5e-45])
    parallel = torch.full((bm * bn,), -0.0)
    for r in range(splits):
        parallel = parallel + partials[r]
    # (the parallel kernel's element at (row, col): slot half col // half_n, offset row * half_n + col % half_n)
    rows, cols = torch.meshgrid(torch.arange(bm), torch.arange(bn), indexing="ij")
    parallel_tile = parallel[(cols // half_n) * (bm * half_n) + rows * half_n + cols % half_n]
    slices = list(_grid_slices(bm, bn, splits))
    e, row, col = (torch.cat([x[i] for x in slices]) for i in (1, 2, 3))
    count = torch.zeros(bm, bn, dtype=torch.int64).index_put_((row, col), torch.ones_like(row), accumulate=True)
    assert torch.equal(count, torch.ones_like(count))
    total = torch.full(e.shape, -0.0)  # (every slice's elements at once: each element's sum is its own)
    for q in range(splits):
        total = total + partials[q, e]
    grid_tile = torch.full((bm, bn), float("nan")).index_put_((row, col), total)
    assert_bitwise_equal(grid_tile, parallel_tile, f"{bm}x{bn}, {splits} ranges")


def test_strided_operands_and_outputs():
    # a sliced from a wider buffer; d inside a padded buffer, once TMA-storable (row of 96 bytes) and once not
    # (row of 88 bytes: the pointer store); padding columns stay untouched.
    x = randn(4, 3, 96)[:, :, :64]
    w = randn(3, 40, 64)
    truth = TRUTH["bhr,hdr->bhd"](x.double(), w.double())
    for width in (48, 44):
        buffer = torch.zeros(4, 3, width, dtype=BF16)
        run_triton("einsum", "bhr,hdr->bhd", x, w, buffer[:, :, :40])
        assert_close(buffer[:, :, :40], truth)
        assert torch.count_nonzero(buffer[:, :, 40:]) == 0


def test_unaligned_operands_run_the_reference():
    x = randn(4, 3, 36)  # R * 2 bytes = 72: a stride TMA cannot take
    w = randn(3, 16, 36)
    d = torch.empty(4, 3, 16, dtype=BF16)
    assert run_launcher("einsum", "bhr,hdr->bhd", x, w, d) is NotImplemented
    torch.ops.deep_gemm.einsum("bhr,hdr->bhd", x, w, d)  # the op falls back to the reference
    assert_close(d, TRUTH["bhr,hdr->bhd"](x.double(), w.double()))


def test_empty_contractions_write_c_or_zeros():
    for expr, a, b, d in (("bhr,hdr->bhd", randn(3, 2, 0), randn(2, 16, 0), randn(3, 2, 16)),
                          ("bmk,bnk->mn", randn(0, 8, 32), randn(0, 16, 32), randn(8, 16, dtype=torch.float32))):
        c = torch.randn_like(d.float()).to(d.dtype)
        run_triton("einsum", expr, a, b, d, c)
        assert_bitwise_equal(d, c, f"{expr} with an empty contraction")
        run_triton("einsum", expr, a, b, d)
        assert torch.count_nonzero(d) == 0


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("case", [BH_CASES[0], BH_CASES[2]], ids=str)
def test_use_cublaslt_path_writes_through_the_permuted_view(case, accumulate):
    a, b = bf16_operands(case)
    d, c, c_value = output_and_accumulator(case.shape(_subscripts(case.expr)[2]), BF16, accumulate)
    run_triton("einsum", case.expr, a, b, d, c, True)  # torch.bmm / baddbmm into d's [h, b, *] view
    assert_close(d, c_value + TRUTH[case.expr](a.double(), b.double()))


# ---------------------------------------------------------------------------------------------------------------
# FP8

@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("case", [c for c in FP8_CASES if "b0" not in str(c)], ids=str)
def test_fp8_einsum_kernels(case, accumulate):
    a, sfa, a64 = fp8_operand(case, "a")
    b, sfb, b64 = fp8_operand(case, "b")
    d, c, c_value = output_and_accumulator(tuple(case.sizes[x] for x in _subscripts(case.expr)[2]), case.out_dtype,
                                           accumulate)
    run_triton("fp8_einsum", case.expr, a, sfa, b, sfb, d, c, list(case.recipe))
    assert_close(d, c_value + TRUTH[case.expr](a64, b64), str(case))


@pytest.mark.parametrize("cfg", einsum_plan.FP8_CONFIGS, ids=str)
def test_every_fp8_tile_config(cfg):
    case = FP8_CASES[0]
    a, sfa, a64 = fp8_operand(case, "a")
    b, sfb, b64 = fp8_operand(case, "b")
    d = torch.empty(tuple(case.sizes[x] for x in "bhd"), dtype=BF16)
    run_forced("fp8_einsum", case.expr, a, sfa, b, sfb, d, None, list(case.recipe),
               overrides=EinsumOverrides(config=cfg))
    assert_close(d, TRUTH[case.expr](a64, b64), f"{case} {cfg}")


def test_fp8_deep_gemm_recipe_close_to_bf16():
    # DeepGEMM's test: per-token X, per-128x128-block W, compared with the BF16 einsum at calc_diff < 1e-3.
    b, h, r, dd = 9, 2, 256, 128
    x, w = randn(b, h, r), randn(h, dd, r)
    x_fp8, x_sf = deep_gemm.utils.per_token_cast_to_fp8(x.view(-1, r), use_ue8m0=True)
    w_fp8 = torch.empty(h, dd, r, dtype=torch.float8_e4m3fn)
    w_sf = torch.empty(h, dd // 128, r // 128)
    for i in range(h):
        w_fp8[i], w_sf[i] = deep_gemm.utils.per_block_cast_to_fp8(w[i], use_ue8m0=True)
    out = torch.empty(b, h, dd, dtype=BF16)
    run_triton("fp8_einsum", "bhr,hdr->bhd", x_fp8.view(b, h, r), x_sf.view(b, h, -1), w_fp8, w_sf, out)
    assert calc_diff(out, TRUTH["bhr,hdr->bhd"](x.double(), w.double())) < 1e-3


def test_tile_config_rules():
    deep_gemm.set_num_sms(132)
    try:
        et = einsum_plan
        # DeepGEMM's rows: memory-bound short K -> one pipeline across tiles; long K, wide N -> 128x256 tiles.
        # (256-row tiles for plain BF16 outputs: B's tile read once per 256 rows; 128 rows otherwise)
        assert et.bh_config(128, 4096, 128, 512, True) is et.BH_SHORT_K_TALL
        assert et.bh_config(128, 4096, 512, 128, True) is et.BH_SHORT_K_TALL
        assert et.bh_config(128, 4096, 128, 512, False) is et.BH_SHORT_K
        assert et.BH_SHORT_K_TALL in et.BH_WIDE and et.BH_LARGE in et.BH_WIDE
        assert et.BH_LARGE.flatten and et.BH_LARGE.d_halves and et.BH_LARGE.num_stages == 4
        assert et.bh_config(8, 4096, 1024, 4096, True) is et.BH_LARGE
        assert et.bh_config(8, 4096, 1024, 4096, False) is et.BH_MEDIUM  # FP32 out or C: no room for 128x256
        assert et.bh_config(8, 32, 1024, 4096, True) is et.BH_SMALL_M_NARROW  # 64 tiles of 128 columns: too few
        assert et.bh_config(256, 32, 128, 512, True) is et.BH_SMALL_M
        # 128 tokens x 8 heads: 64 tiles of 128x128 would leave half the SMs idle; 128x256 (bhd: N = 4096) fills
        # 128 of 132 in one wave.
        assert et.bh_config(8, 128, 1024, 4096, True) is et.BH_NARROW
        assert et.bh_config(8, 128, 1024, 4096, False) is et.BH_NARROW
        assert et.bh_config(8, 128, 4096, 1024, True) is et.BH_LARGE
        assert et.bh_config(128, 128, 128, 512, True) is et.BH_MEDIUM  # 128 tiles: one wave already
        assert et.fp8_config(8, 128, 1024) is et.FP8_SMALL_M_NARROW  # DeepGEMM's FP8 row at b = 128 (measured)
        assert et.fp8_config(8, 4096, 1024) is et.FP8_CONFIGS[0]
        assert et.fp8_config(8, 32, 1024) is et.FP8_SMALL_M_NARROW
        assert et.fp8_config(128, 32, 1024) is et.FP8_CONFIGS[1]
        assert all(c.block_n <= 128 for c in et.BH_CONFIGS if c not in et.BH_WIDE)
    finally:
        deep_gemm.set_num_sms(0)


@pytest.mark.parametrize("case", [FP8_CASES[0], FP8_CASES[1], FP8_CASES[6]], ids=str)
def test_fp8_per_entry_route(case):
    # One dense FP8 GEMM per batch entry (on CPU tensors the nested op runs its reference: this checks the views,
    # scales and recipe handed to it; tests/test_einsum_gpu.py runs the kernels).
    a, sfa, a64 = fp8_operand(case, "a")
    b, sfb, b64 = fp8_operand(case, "b")
    d, c, c_value = output_and_accumulator(tuple(case.sizes[x] for x in _subscripts(case.expr)[2]), case.out_dtype,
                                           "distinct")
    run_forced("fp8_einsum", case.expr, a, sfa, b, sfb, d, c, list(case.recipe),
               overrides=EinsumOverrides(route="per_entry"))
    assert_close(d, c_value + TRUTH[case.expr](a64, b64), str(case))
    assert einsum_plan.fp8_route(8, 4096) == "per_entry" and einsum_plan.fp8_route(8, 128) == "batched"
