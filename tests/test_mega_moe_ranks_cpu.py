"""``fp8_mega_moe`` over several ranks in Triton's interpreter on CPU: 2 and 4 simulated ranks in one process.

Each rank has its own CPU buffer (sized for all ranks) and the peer table holds their addresses, so the kernels'
peer reads and writes land in the other ranks' buffers as they would over NVLink. Every rank's ``RankLaunch``
(launch.py: the same launch sequence as on CUDA) runs phase by phase: all ranks' phase i before any rank's phase
i + 1, which is what the cross-rank barriers between phases guarantee on GPUs. The barrier kernel itself is run
separately (its arrival, its bounded wait and the status word it leaves).

The expectation: ``mega_moe_rank_cases.expected`` (the reference with every expert present), and for the main
scenarios also the reference's own several-rank form, run once per world size on a gloo group in spawned processes.
"""

from __future__ import annotations

import functools
import types

import pytest
import torch

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.mega import launch as mega_launch
from deep_gemm.mega import plan as mega_plan
from deep_gemm.mega.api import fp8_mega_moe_op_args
from deep_gemm.mega.buffer import plan_sm90_symm_buffer, sm90_kernel_views
from mega_moe_cases import CAPACITY, Scenario, free_port, local_weights, spawn_ranks
from mega_moe_rank_cases import UNEVEN, check_rank, expected, scenario_data, scenarios
import interpreter_bf16  # noqa: F401  (torch-exact fp32 -> fp8 casts in the interpreter)

ops = torch.ops.deep_gemm
KERNELS = mega_plan.MegaOverrides(kernels=True)


def rank_buffers(sc: Scenario, data) -> list:
    """One SM90SymmBuffer-like object per rank (what the op arguments and ``check_status`` read), inputs filled."""
    r = sc.num_ranks
    sizes = (r, sc.num_experts, CAPACITY, sc.topk, sc.hidden, sc.inter, True, "swiglu")
    buffers = [torch.zeros(ops.get_symm_buffer_size_for_sm90_mega_moe(*sizes), dtype=torch.int8) for _ in range(r)]
    ptrs = [b.data_ptr() for b in buffers]
    out = []
    for rank, b in enumerate(buffers):
        x, x_sf, idx, w = ops._slice_symm_buffer_for_sm90_mega_moe(b, *sizes)[:4]
        n = data.x[rank].size(0)
        deep_gemm.mega_moe_pre_dispatch_sm90(data.x[rank], data.topk_idx[rank], data.topk_weights[rank], x, x_sf,
                                             idx, w, num_tokens=n)
        out.append(types.SimpleNamespace(buffer=b, handle=types.SimpleNamespace(buffer_ptrs=ptrs), rank_idx=rank,
                                         num_ranks=r, num_max_tokens_per_rank=CAPACITY, num_experts=sc.num_experts,
                                         num_topk=sc.topk, hidden=sc.hidden, intermediate_hidden=sc.inter))
    return out


def run_ranks(sc: Scenario, data, bufs, stats, block_m=None, calls=1) -> list:
    """Every rank's y after ``calls`` calls (each call: every rank's phases in lockstep)."""
    ys = [torch.full((data.x[r].size(0), sc.hidden), 7.0, dtype=torch.bfloat16) for r in range(sc.num_ranks)]
    weights = [local_weights(sc, data, r) for r in range(sc.num_ranks)]
    overrides = mega_plan.MegaOverrides(block_m, kernels=True)
    for _ in range(calls):
        runs = []
        for r, buf in enumerate(bufs):
            args = fp8_mega_moe_op_args(ys[r], *weights[r], buf, None if stats is None else stats[r],
                                        activation_clamp=sc.clamp, fast_math=sc.fast_math)
            deep_gemm.core.registry.kernels_of("fp8_mega_moe").check(*args)
            run = mega_launch.fp8_mega_moe_rank_phases(*args, overrides=overrides)
            assert run is not NotImplemented
            runs.append(run)
        for phase in range(len(runs[0].phases)):
            for run in runs:
                run.phases[phase]()
    return ys


def _gloo_worker(rank: int, world: int, port: int, tests_dir: str, out_dir: str) -> None:
    """The reference's several-rank form on a gloo group (the public fp8_mega_moe on CPU buffers), every scenario
    of ``world`` ranks; this rank's (y, received statistics) per scenario go to ``out_dir``."""
    import datetime
    import os
    import sys

    import torch.distributed as dist
    sys.path.insert(0, tests_dir)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=90))
    try:
        from mega_moe_cases import fill_buffer, make_buffer, run_layer
        results = []
        for sc, _, masked_rank, _ in scenarios(world):
            data = scenario_data(sc, masked_rank)
            buf = make_buffer(sc, dist.group.WORLD)
            fill_buffer(sc, data, buf, rank)
            stats = torch.zeros(sc.num_experts // world, dtype=torch.int32)
            results.append((run_layer(sc, data, buf, rank, stats), stats))
            buf.destroy()
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@functools.lru_cache(maxsize=None)
def gloo_reference(world: int) -> list:
    """Per scenario of ``scenarios(world)``, per rank: (y, received statistics) of the gloo reference."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        tests_dir = os.path.dirname(os.path.abspath(__file__))
        assert spawn_ranks(_gloo_worker, (world, free_port(), tests_dir, out), world, 240), "a gloo rank hangs"
        per_rank = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
    return [[per_rank[r][i] for r in range(world)] for i in range(len(per_rank[0]))]


def check(sc, data, ys, stats, start, calls=1):
    want_y, want_stats = expected(sc, data, calls)
    for r in range(sc.num_ranks):
        check_rank(ys[r], want_y[r], None if stats is None else stats[r], None if start is None else start[r],
                   want_stats[r], r)


def rank_views(bufs, sc):
    """Every rank's kernel views (its workspace arrays: counters, status word, barrier state)."""
    plan = plan_sm90_symm_buffer(sc.num_ranks, sc.num_experts, CAPACITY, sc.topk, sc.hidden, sc.inter, True, "swiglu")
    return [sm90_kernel_views(b.buffer, plan, sc.num_experts // sc.num_ranks, CAPACITY, sc.topk, sc.num_ranks)
            for b in bufs]


CASES = [case for world in (2, 4) for case in scenarios(world)]


@pytest.mark.parametrize("sc, block_m, masked_rank, with_stats", CASES,
                         ids=[f"{s.id}-bm{b}-mask{m}-stats{w}" for s, b, m, w in CASES])
def test_ranks_match_reference(sc, block_m, masked_rank, with_stats):
    data = scenario_data(sc, masked_rank)
    bufs = rank_buffers(sc, data)
    local = sc.num_experts // sc.num_ranks
    start = [torch.arange(local, dtype=torch.int32) * 3 + 11 for _ in range(sc.num_ranks)]
    stats = [s.clone() for s in start] if with_stats else None
    ys = run_ranks(sc, data, bufs, stats, block_m)
    check(sc, data, ys, stats, start)
    # The reference's own several-rank form (gloo processes) agrees too.
    gloo = gloo_reference(sc.num_ranks)[scenarios(sc.num_ranks).index((sc, block_m, masked_rank, with_stats))]
    for r, (y_ref, received) in enumerate(gloo):
        check_rank(ys[r], y_ref, None if stats is None else stats[r], None if stats is None else start[r],
                   received, r)
    for r, views in enumerate(rank_views(bufs, sc)):
        assert not views["counts"].any(), r  # the counters are zero again
        assert int(views["status"]) == 0 and int(views["overflow"]) == 0, r


@pytest.mark.parametrize("world", [2, 4])
def test_repeated_calls_accumulate_stats(world):
    sc = Scenario("sm90", tokens=UNEVEN[world], num_experts=2 * world, topk=3, hidden=256, inter=128, seed=4)
    data = scenario_data(sc)
    bufs = rank_buffers(sc, data)
    start = [torch.zeros(2, dtype=torch.int32) for _ in range(world)]
    stats = [s.clone() for s in start]
    ys = run_ranks(sc, data, bufs, stats, None, calls=2)
    check(sc, data, ys, stats, start, calls=2)


def test_every_rank_without_tokens():
    sc = Scenario("sm90", tokens=(0, 0), num_experts=4, topk=2, hidden=256, inter=128, seed=5)
    data = scenario_data(sc)
    bufs = rank_buffers(sc, data)
    stats = [torch.full((2,), 4, dtype=torch.int32) for _ in range(2)]
    ys = run_ranks(sc, data, bufs, stats)
    assert all(y.numel() == 0 for y in ys) and all((s == 4).all() for s in stats)


def test_pool_overflow_flags_every_rank_and_poisons_outputs():
    # Every token names expert 0 in all its slots: rank 0 would receive more rows than its pool holds.
    sc = Scenario("sm90", tokens=(384, 384), num_experts=4, topk=4, hidden=128, inter=128, seed=6)
    data = scenario_data(sc)
    for idx in data.topk_idx:
        idx[:] = 0
    bufs = rank_buffers(sc, data)
    ys = run_ranks(sc, data, bufs, None, 128)
    for r, (y, views) in enumerate(zip(ys, rank_views(bufs, sc))):
        assert torch.isnan(y.float()).all(), r
        assert int(views["overflow"]) == 1
    with pytest.raises(DeepGEMMError, match=r"rank 1: .*more slots to one rank than its pool holds"):
        mega_launch.check_status(bufs[1])


@pytest.mark.parametrize("world", [2, 4])
def test_barrier_kernel_bounded_wait(world):
    sc = Scenario("sm90", tokens=(3,) * world, num_experts=2 * world, topk=2, hidden=128, inter=128, seed=7)
    data = scenario_data(sc)
    bufs = rank_buffers(sc, data)
    runs = []
    for r, buf in enumerate(bufs):
        y = torch.zeros(3, sc.hidden, dtype=torch.bfloat16)
        args = fp8_mega_moe_op_args(y, *local_weights(sc, data, r), buf)
        runs.append(mega_launch.fp8_mega_moe_rank_phases(*args, overrides=KERNELS, max_spins=3))
    # One at a time: rank r finds ranks r + 1 ... not arrived, waits its bounded polls and flags them; the last rank
    # finds everyone.
    for run in runs:
        run.barrier()
    views = rank_views(bufs, sc)
    for r in range(world):
        assert int(views[r]["epoch"]) == 1
        assert views[r]["signals"].tolist() == [1] * world  # every rank posted into every pad
        late = sum(1 << p for p in range(r + 1, world))
        assert int(views[r]["status"]) == late, r
    with pytest.raises(DeepGEMMError, match=rf"rank 0: a cross-rank barrier gave up waiting for rank\(s\) "
                                            rf"\[{', '.join(map(str, range(1, world)))}\]"):
        mega_launch.check_status(bufs[0])
    mega_launch.check_status(bufs[world - 1])  # (no error)
    # A second round in reverse order: every pad already holds count 2 when its owner polls, except rank
    # world - 1's, which then waits for the others.
    for run in reversed(runs):
        run.barrier()
    views = rank_views(bufs, sc)
    assert int(views[0]["status"]) == sum(1 << p for p in range(1, world))  # (unchanged: sticky)
    assert int(views[world - 1]["status"]) == sum(1 << p for p in range(world - 1))


def test_launcher_declines_unless_asked():
    sc = Scenario("sm90", tokens=(4, 4), num_experts=4, topk=2, hidden=128, inter=128, seed=8)
    data = scenario_data(sc)
    bufs = rank_buffers(sc, data)
    y = torch.zeros(4, sc.hidden, dtype=torch.bfloat16)
    args = fp8_mega_moe_op_args(y, *local_weights(sc, data, 0), bufs[0])
    launcher = deep_gemm.core.registry.kernels_of("fp8_mega_moe").triton
    if "mega_ranks" in deep_gemm.core.gpu_validation.AWAITING_GPU:
        assert launcher(*args) is NotImplemented  # not asked for: the layer raises NotImplementedError
    assert mega_launch.rank_status_error(0, 0) is None
