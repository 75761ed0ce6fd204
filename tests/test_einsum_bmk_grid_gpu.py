"""The one-launch ("grid") reduction of ``einsum('bmk,bnk->mn')`` on the GPU (every test marked ``gpu``): the batch
ranges' partials summed inside the GEMM launch (``einsum_plan.BmkPlan``). Checked: the same bits as the
two-launch parallel reduction and on every call, against float64 at DeepGEMM's rows and odd shapes (M, N not
multiples of the tile, S = 1 and 3, no C, C = D, a distinct C, BF16 D), one kernel per call, the tile counters back
at zero after each call, CUDA-graph capture and replay, and two streams (and two graphs) running at once. The plan
itself keeps "parallel" (BMK_GRID_SYNC_US: measured slower in kernel time), so every test pins "grid".
"""

from __future__ import annotations

import pytest
import torch

from deep_gemm.core.scratch import arrival_counters
from deep_gemm.einsum import plan as et
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from deep_gemm.einsum.plan import EinsumOverrides
from triton_harness import run_forced

pytestmark = pytest.mark.gpu
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
