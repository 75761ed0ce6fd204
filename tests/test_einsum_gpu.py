"""einsum / fp8_einsum on the GPU (every test marked ``gpu``): DeepGEMM's shapes and thresholds (BF16 ``bh*`` forms
at calc_diff < 1e-10 against torch.einsum, i.e. cuBLAS's own FP32 sum), odd shapes against float64, strided views,
the batch-split reduction's determinism, CUDA-graph capture and replay, torch.compile(fullgraph=True), eight threads
compiling and launching at once, and the host fast path (the second call replays a recorded launch).
"""

from __future__ import annotations

import threading

import pytest
import torch

import deep_gemm
from deep_gemm.einsum import launch as einsum_launch
from deep_gemm.einsum import plan as einsum_plan
from deep_gemm.einsum.plan import EinsumOverrides
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from triton_harness import run_forced
from deep_gemm.core.scratch import arrival_counters
from deep_gemm.einsum import plan as et

pytestmark = pytest.mark.gpu
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
DG_BH_SHAPES = [(128, 512, 128), (8, 4096, 1024)]  # (h, r, d) of DeepGEMM's tests/test_einsum_reference_cpu.py


def _bh_operands(expr: str, b: int, h: int, r: int, d: int):
    """x and the row-padded W slice exactly as DeepGEMM's test builds them."""
    x = torch.randn((b, h, r) if expr == "bhr,hdr->bhd" else (b, h, d), device="cuda", dtype=BF16)
    fy = torch.randn((h, d, r + 128), device="cuda", dtype=BF16)
    return x, fy[:, :, :r]


@pytest.mark.parametrize("b", [4, 32, 128, 4096])
@pytest.mark.parametrize("h,r,d", DG_BH_SHAPES)
@pytest.mark.parametrize("expr", ["bhr,hdr->bhd", "bhd,hdr->bhr"])
def test_bh_forms_match_torch_einsum(expr, h, r, d, b):
    x, y = _bh_operands(expr, b, h, r, d)
    ref = torch.einsum(expr, x, y)
    z = torch.empty(ref.shape, device="cuda", dtype=BF16)
    deep_gemm.einsum(expr, x, y, z)
    diff = calc_diff(z, ref)
    mismatched = (z != ref).float().mean().item()
    assert diff < 1e-10, f"calc_diff {diff:.3e} (DeepGEMM's bound 1e-10); {mismatched:.2e} of elements differ"
    z_cublaslt = torch.empty_like(z)
    deep_gemm.einsum(expr, x, y, z_cublaslt, use_cublaslt=True)
    assert calc_diff(z_cublaslt, ref) < 1e-10


@pytest.mark.parametrize("s,n,k", [(129, 512, 1024), (37, 200, 208)])
def test_bmk_deterministic_mode_is_batch_invariant(deterministic_mode, s, n, k):
    """use_deterministic_algorithms(True): row 0 of bmk,bnk->mn is the same bits at M = 1, 64 and 4096 (the default
    plan picks the batch split and tile from M)."""
    a = torch.randn((s, 4096, k), dtype=BF16, device="cuda")
    b = torch.randn((s, n, k), dtype=BF16, device="cuda")
    rows = {}
    for m in (1, 64, 4096):
        d = torch.empty((m, n), dtype=torch.float32, device="cuda")
        deep_gemm.einsum("bmk,bnk->mn", a[:, :m].contiguous(), b, d)
        rows[m] = d[:1].clone()
    for m in (64, 4096):
        assert_bitwise_equal(rows[m], rows[1], f"row 0 at M = {m}")
    assert calc_diff(rows[1], torch.bmm(a[:, :1].double(), b.double().mT).sum(0)) < 1e-5


@pytest.mark.parametrize("out_dtype", [torch.float32, BF16])
@pytest.mark.parametrize("s,m,n,k", [(129, 128, 384, 128), (4096, 256, 256, 256), (129, 384, 128, 384),
                                     (37, 72, 200, 208)])
def test_bmk_bnk_mn(s, m, n, k, out_dtype):
    a = torch.randn((s, m, k), dtype=BF16, device="cuda")
    b = torch.randn((s, n, k), dtype=BF16, device="cuda")
    d = torch.randn((m, n), dtype=out_dtype, device="cuda")
    c = d if out_dtype == torch.float32 else None
    ref = (d.double() if c is not None else 0) + torch.bmm(a.double(), b.double().mT).sum(0)
    d_again = d.clone()
    deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=c)
    assert calc_diff(d, ref) < 1e-5
    deep_gemm.einsum("bmk,bnk->mn", a, b, d_again, c=d_again if c is not None else None)
    assert_bitwise_equal(d, d_again, "the batch-split reduction is deterministic")


@pytest.mark.parametrize("splits", [1, 5, 44, 129])
@pytest.mark.parametrize("reduce", ["parallel", "serial", "grid"])
def test_bmk_every_split_and_reduction(reduce, splits):
    # The variants the sweep compares (benchmarks/bench_einsum.py --sweep), pinned: correct, the same bits on a
    # second call, and the reductions equal (all sum the same partials in range order). (grid with 129 ranges of
    # 3 tiles: more programs than fit at once, so the launcher runs the parallel reduction instead.)
    s, m, n, k = 129, 128, 384, 128
    a = torch.randn((s, m, k), dtype=BF16, device="cuda")
    b = torch.randn((s, n, k), dtype=BF16, device="cuda")
    d0 = torch.randn((m, n), device="cuda")
    ref = d0.double() + torch.bmm(a.double(), b.double().mT).sum(0)
    outs = {}
    for variant in (reduce, "parallel"):
        plan = einsum_plan.BmkPlan(einsum_plan.BMK_CONFIGS[0], splits, variant)
        for call in range(2):
            d = d0.clone()
            run_forced("einsum", "bmk,bnk->mn", a, b, d, d, overrides=EinsumOverrides(config=plan))
            outs[variant, call] = d
    assert calc_diff(outs[reduce, 0], ref) < 1e-5
    assert_bitwise_equal(outs[reduce, 0], outs[reduce, 1], f"two calls, {splits} ranges {reduce}")
    assert torch.equal(outs[reduce, 0], outs["parallel", 0])


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("expr,shape", [("bhr,hdr->bhd", dict(b=77, h=3, r=200, d=72)),
                                        ("bhd,hdr->bhr", dict(b=77, h=3, d=72, r=200)),
                                        ("bhr,hdr->bhd", dict(b=1, h=5, r=1032, d=264))])
def test_odd_shapes_against_float64(expr, shape, accumulate):
    (sa, sb), so = expr.split("->")[0].split(","), expr.split("->")[1]
    a = torch.randn([shape[x] for x in sa], device="cuda").to(BF16)
    b = torch.randn([shape[x] for x in sb], device="cuda").to(BF16)
    d = torch.randn([shape[x] for x in so], device="cuda")
    ref = (d.double() if accumulate else 0) + torch.einsum(expr, a.double(), b.double())
    deep_gemm.einsum(expr, a, b, d, c=d if accumulate else None)
    assert calc_diff(d, ref) < 1e-10


def _fp8_x_w(x: torch.Tensor, w: torch.Tensor):
    b, h, k = x.shape
    x_fp8 = deep_gemm.utils.per_token_cast_to_fp8(x.reshape(-1, k), use_ue8m0=True)
    x_fp8 = (x_fp8[0].view(b, h, k), x_fp8[1].view(b, h, -1))
    w_fp8 = (torch.empty_like(w, dtype=FP8), torch.empty((w.size(0), -(-w.size(1) // 128), -(-w.size(2) // 128)),
                                                          device="cuda"))
    for i in range(w.size(0)):
        w_fp8[0][i], w_fp8[1][i] = deep_gemm.utils.per_block_cast_to_fp8(w[i], use_ue8m0=True)
    return x_fp8, w_fp8


@pytest.mark.parametrize("route", [None, "batched", "per_entry"])
@pytest.mark.parametrize("b", [4, 128, 4096])
def test_fp8_bhr_hdr_bhd_deep_gemm_shapes(b, route):
    h, r, d = 8, 4096, 1024
    x = torch.randn((b, h, r), device="cuda", dtype=BF16)
    y = torch.randn((h, d, r), device="cuda", dtype=BF16)
    x_fp8, y_fp8 = _fp8_x_w(x, y)
    z = torch.empty((b, h, d), device="cuda", dtype=BF16)
    if route is None:
        deep_gemm.fp8_einsum("bhr,hdr->bhd", x_fp8, y_fp8, z)
    else:
        run_forced("fp8_einsum", "bhr,hdr->bhd", *x_fp8, *y_fp8, z, overrides=EinsumOverrides(route=route))
    assert calc_diff(z, torch.einsum("bhr,hdr->bhd", x, y)) < 1e-3


@pytest.mark.parametrize("route", [None, "per_entry"])
def test_fp8_sm100_equations(route):

    def fp8_einsum(expr, x, y, z, c=None, recipe=(1, 128, 128)):
        if route is None:
            deep_gemm.fp8_einsum(expr, x, y, z, c, recipe=recipe)
        else:
            run_forced("fp8_einsum", expr, *x, *y, z, c, list(recipe), overrides=EinsumOverrides(route=route))
    h, r, d, b = 8, 512, 256, 640
    x = torch.randn((b, h, d), device="cuda", dtype=BF16)
    y = torch.randn((h, d, r), device="cuda", dtype=BF16)
    x_fp8 = deep_gemm.utils.per_token_cast_to_fp8(x.view(-1, d), use_ue8m0=True)
    x_fp8 = x_fp8[0].view(b, h, d), x_fp8[1].view(b, h, -1)
    y_fp8 = (torch.empty_like(y, dtype=FP8), torch.empty((h, d // 128, r // 128), device="cuda"))
    for i in range(h):
        y_fp8[0][i], y_fp8[1][i] = deep_gemm.utils.per_block_cast_to_fp8(y[i], use_ue8m0=True)
    z = torch.empty((b, h, r), device="cuda", dtype=BF16)
    fp8_einsum("bhd,hdr->bhr", x_fp8, y_fp8, z)
    assert calc_diff(z, torch.einsum("bhd,hdr->bhr", x, y)) < 1e-3

    yb = torch.randn((b, h, r), device="cuda", dtype=BF16)
    z0 = torch.randn((h, d, r), device="cuda") * 10
    xc = deep_gemm.utils.per_channel_cast_to_fp8(x.view(b, -1), use_ue8m0=True)
    yc = deep_gemm.utils.per_channel_cast_to_fp8(yb.view(b, -1), use_ue8m0=True)
    xc = (xc[0].view(b, h, d), xc[1].view(-(-b // 128), h, d))
    yc = (yc[0].view(b, h, r), yc[1].view(-(-b // 128), h, r))
    z = z0.clone()
    fp8_einsum("bhd,bhr->hdr", xc, yc, z, z, recipe=(1, 1, 128))
    assert calc_diff(z, z0 + torch.einsum("bhd,bhr->hdr", x.float(), yb.float())) < 1e-3


def test_cuda_graph_replay():
    x, y = _bh_operands("bhr,hdr->bhd", 256, 8, 512, 128)
    z = torch.empty((256, 8, 128), device="cuda", dtype=BF16)
    a = torch.randn((300, 128, 64), dtype=BF16, device="cuda")
    b = torch.randn((300, 256, 64), dtype=BF16, device="cuda")
    acc = torch.zeros((128, 256), device="cuda")
    deep_gemm.einsum("bhr,hdr->bhd", x, y, z)  # compile outside the capture
    deep_gemm.einsum("bmk,bnk->mn", a, b, acc, c=acc)
    acc.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.einsum("bhr,hdr->bhd", x, y, z)
        deep_gemm.einsum("bmk,bnk->mn", a, b, acc, c=acc)
    z.zero_()
    acc.zero_()
    once = torch.bmm(a.double(), b.double().mT).sum(0)
    for replay in range(1, 4):
        graph.replay()
        torch.cuda.synchronize()
        assert calc_diff(z, torch.einsum("bhr,hdr->bhd", x, y)) < 1e-10
        assert calc_diff(acc, replay * once) < 1e-5


def test_torch_compile_fullgraph():
    x, y = _bh_operands("bhd,hdr->bhr", 64, 4, 256, 128)

    @torch.compile(fullgraph=True)
    def f(x, y):
        z = torch.empty((64, 4, 256), device="cuda", dtype=BF16)
        torch.ops.deep_gemm.einsum("bhd,hdr->bhr", x, y, z)
        return z.float() * 2

    assert calc_diff(f(x, y), 2 * torch.einsum("bhd,hdr->bhr", x, y).float()) < 1e-10


def test_eight_threads_first_compile_included():
    errors = []
    x, y = _bh_operands("bhr,hdr->bhd", 96, 6, 384, 72)  # a shape no other test compiles for
    ref = torch.einsum("bhr,hdr->bhd", x, y)

    def work():
        try:
            for _ in range(3):
                z = torch.empty_like(ref)
                deep_gemm.einsum("bhr,hdr->bhd", x, y, z)
                torch.cuda.synchronize()
                assert calc_diff(z, ref) < 1e-10
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_eight_threads_bmk_on_one_stream():
    # Threads sharing the default stream: the parallel reduction's partials (the default) live across two launches;
    # no thread's call may mix with another's.
    errors = []
    a = torch.randn((129, 128, 128), dtype=BF16, device="cuda")
    b = torch.randn((129, 384, 128), dtype=BF16, device="cuda")
    ref = torch.bmm(a.double(), b.double().mT).sum(0)
    expected = torch.empty((128, 384), device="cuda")
    deep_gemm.einsum("bmk,bnk->mn", a, b, expected)

    def work(scale: float):
        try:
            for _ in range(5):
                d = torch.empty((128, 384), device="cuda")
                deep_gemm.einsum("bmk,bnk->mn", a * scale, b, d)
                torch.cuda.synchronize()
                assert calc_diff(d / scale, ref) < 1e-5
                if scale == 1.0:
                    assert_bitwise_equal(d, expected, "a thread's result")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(1.0 if i % 2 else 2.0 ** (i - 4),)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_second_call_replays_a_recorded_launch():
    x, y = _bh_operands("bhr,hdr->bhd", 64, 4, 256, 128)
    z = torch.empty((64, 4, 128), device="cuda", dtype=BF16)
    deep_gemm.einsum("bhr,hdr->bhd", x, y, z)
    before = len(einsum_launch.einsum.plans)
    x2 = torch.randn_like(x)
    deep_gemm.einsum("bhr,hdr->bhd", x2, y, z)
    assert len(einsum_launch.einsum.plans) >= 1 and len(einsum_launch.einsum.plans) == before
    assert calc_diff(z, torch.einsum("bhr,hdr->bhd", x2, y)) < 1e-10


# ---- The grid reduction of bmk,bnk->mn (one cooperative launch) ---------------------------------------------------
# The one-launch ("grid") reduction of ``einsum('bmk,bnk->mn')`` on the GPU (every test marked ``gpu``): the batch
# ranges' partials summed inside the GEMM launch (``einsum_plan.BmkPlan``). Checked: the same bits as the two-launch
# parallel reduction and on every call, against float64 at DeepGEMM's rows and odd shapes (M, N not multiples of the
# tile, S = 1 and 3, no C, C = D, a distinct C, BF16 D), one kernel per call, the tile counters back at zero after
# each call, CUDA-graph capture and replay, and two streams (and two graphs) running at once. The plan itself keeps
# "parallel" (BMK_GRID_SYNC_US: measured slower in kernel time), so every test pins "grid".

BF16 = torch.bfloat16
BMK = "bmk,bnk->mn"
DG_ROWS = [(s, m, n, k) for s in (129, 4096) for m, n, k in [(128, 384, 128), (256, 256, 256), (384, 128, 384)]]
# Tails in M and N (both tiles), a batch of one (no split) and of three (three one-entry ranges), long and short K.
ODD_ROWS = [(1, 72, 200, 64), (3, 130, 24, 64), (37, 72, 200, 208), (67, 200, 136, 72), (300, 40, 520, 136)]
OUTPUTS = ["fp32, no C", "fp32, C is D", "fp32, distinct C", "bf16, no C"]


def _operands(s: int, m: int, n: int, k: int):
    return (torch.randn((s, m, k), device="cuda").to(BF16), torch.randn((s, n, k), device="cuda").to(BF16))


def _call(plan, a, b, d, c) -> None:
    run_forced("einsum", BMK, a, b, d, c, overrides=EinsumOverrides(config=plan))


def _output(output: str, m: int, n: int):
    """(d0, c for a call on a clone d of d0: a function of d, the C term of the reference)."""
    d0 = torch.randn((m, n), device="cuda").to(BF16 if output.startswith("bf16") else torch.float32)
    if output == "fp32, C is D":
        return d0, (lambda d: d), d0.double()
    if output == "fp32, distinct C":
        c = torch.randn((m, n), device="cuda")
        return d0, (lambda d: c), c.double()
    return d0, (lambda d: None), 0


@pytest.mark.parametrize("s,m,n,k,output", [(*row, out) for row in DG_ROWS for out in OUTPUTS[1::2]]
                         + [(*row, out) for row in ODD_ROWS for out in OUTPUTS], ids=str)
def test_grid_reduction_gives_the_parallel_bits(s, m, n, k, output):
    a, b = _operands(s, m, n, k)
    d0, c_of, c_ref = _output(output, m, n)
    auto = et.bmk_plan(s, m, n, k, reduce="grid")
    product = torch.bmm(a.double(), b.double().mT).sum(0)
    # The planned split, and a pinned one that does not divide S (a short last range), where there is a batch.
    for splits in sorted({auto.splits, min(s, 3)}):
        outs = {}
        for name, reduce in (("grid", "grid"), ("grid again", "grid"), ("parallel", "parallel")):
            d = d0.clone()
            _call(et.BmkPlan(auto.tile, splits, reduce), a, b, d, c_of(d))
            outs[name] = d
        ref = c_ref + product
        what = f"s={s} m={m} n={n} k={k} {output}, {splits} ranges"
        assert calc_diff(outs["grid"], ref) < 1e-5, what
        assert_bitwise_equal(outs["grid"], outs["grid again"], f"two grid calls, {what}")
        assert_bitwise_equal(outs["grid"], outs["parallel"], f"grid and parallel, {what}")


def _kernel_names(fn) -> list[str]:
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.parametrize("s,m,n,k", DG_ROWS, ids=str)
def test_grid_plan_is_one_kernel_and_leaves_the_counters_at_zero(s, m, n, k):
    # One GEMM kernel per call (the launcher did not fall back to the parallel reduction's second launch), and the
    # arrival counters of this stream zero again afterwards: the last range to leave a tile resets its counter.
    a, b = _operands(s, m, n, k)
    d = torch.zeros((m, n), device="cuda")
    plan = et.bmk_plan(s, m, n, k, reduce="grid")
    assert plan.reduce == "grid" and plan.splits > 1
    _call(plan, a, b, d, d)  # (compiles)
    names = _kernel_names(lambda: _call(plan, a, b, d, d))
    assert [x for x in names if "bmn_bnk_mn_gemm_impl" in x] and not [x for x in names if "reduce" in x], names
    assert len(names) == 1, names
    counters = arrival_counters(d, 1)  # (this stream's kept counters, all of them)
    assert int(counters.count_nonzero()) == 0
    ref = 2 * torch.bmm(a.double(), b.double().mT).sum(0)
    assert calc_diff(d, ref) < 1e-5


def _grid_problem(s=129, m=256, n=256, k=256):
    """A problem and its pinned grid plan: the parallel plan's splits (129 x 256 x 256 x 256: 8 tiles of 64 x 128,
    33 ranges, filling both programs of every SM)."""
    a, b = _operands(s, m, n, k)
    plan = et.bmk_plan(s, m, n, k, reduce="grid")
    assert plan.reduce == "grid" and plan.splits == et.bmk_plan(s, m, n, k).splits > 1
    return a, b, plan


def test_cuda_graph_capture_and_replay():
    # Captured launches get counters of their own (zeroed by the capture); replays accumulate the eager bits.
    a, b, plan = _grid_problem()
    eager = torch.zeros((256, 256), device="cuda")
    for _ in range(3):
        _call(plan, a, b, eager, eager)
    acc = torch.zeros((256, 256), device="cuda")
    _call(plan, a, b, acc, acc)  # (outside the capture: compile)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _call(plan, a, b, acc, acc)
    acc.zero_()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert_bitwise_equal(acc, eager, "three replays and three eager calls")


def test_two_streams_at_once():
    # Each stream has its own tile counters (core/scratch); both launches need every SM's programs, so the
    # second cooperative launch starts when the first has ended, whichever stream issues first.
    problems = [_grid_problem(), _grid_problem(129, 384, 128, 384)]
    expected = []
    for a, b, plan in problems:
        d = torch.zeros((a.size(1), b.size(1)), device="cuda")
        _call(plan, a, b, d, None)
        expected.append(d)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [[torch.empty_like(e) for _ in range(8)] for e in expected]
    torch.cuda.synchronize()
    for i in range(8):
        for (a, b, plan), stream, out in zip(problems, streams, outs):
            with torch.cuda.stream(stream):
                _call(plan, a, b, out[i], None)
    torch.cuda.synchronize()
    for e, out in zip(expected, outs):
        for i, d in enumerate(out):
            assert_bitwise_equal(d, e, f"call {i}")


def test_two_graphs_replayed_at_once_on_two_streams():
    # Graphs captured on one stream replayed on two: each captured launch has its own counters.
    a, b, plan = _grid_problem()
    expected = torch.zeros((256, 256), device="cuda")
    _call(plan, a, b, expected, None)
    outs, graphs = [torch.empty_like(expected) for _ in range(2)], []
    for out in outs:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _call(plan, a, b, out, None)
        graphs.append(graph)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    for _ in range(8):
        for graph, stream, out in zip(graphs, streams, outs):
            with torch.cuda.stream(stream):
                out.zero_()
                graph.replay()
        torch.cuda.synchronize()
        for out in outs:
            assert_bitwise_equal(out, expected, "a replay")
