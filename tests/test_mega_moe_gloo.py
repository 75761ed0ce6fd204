"""The Mega MoE layer across processes: 2 and 4 CPU ranks on a gloo group (the symmetric buffer is a CPU tensor per
rank; dispatch and combine go through collectives), against the float64 per-token loop of mega_moe_cases.py.

Each world size runs in one spawn with every scenario and error case in it; the spawn has a deadline, so a rank
that hangs fails the test instead of stalling the suite.
"""

from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.distributed as dist

DEADLINE_S = 240


def _scenarios(world: int):
    from mega_moe_cases import Scenario
    uneven = {2: (5, 31), 4: (9, 0, 23, 2)}[world]
    return [
        Scenario("sm90", tokens=uneven, num_experts=8, topk=4, masked=0.3, clamp=10.0, seed=1),
        Scenario("sm90", tokens=uneven, num_experts=4 * world, topk=6, idle_experts=True, fast_math=False, seed=2),
        Scenario("sm90", tokens=(0,) * world, num_experts=8, topk=2, seed=3),
        Scenario("fp8fp4", tokens=uneven, num_experts=8, hidden=256, inter=128, topk=2, masked=0.3, seed=4),
        Scenario("bf16", tokens=uneven, num_experts=8, hidden=256, inter=128, topk=6, post_norm="weight", seed=5),
    ]


def _expect_error(fn, pattern: str):
    import re

    from deep_gemm.core.errors import DeepGEMMError
    try:
        fn()
    except DeepGEMMError as exc:
        assert re.search(pattern, str(exc)), f"{exc!s} does not match {pattern!r}"
        return
    raise AssertionError(f"no DeepGEMMError (expected {pattern!r})")


def _errors(rank: int, world: int, group) -> None:
    import deep_gemm
    from mega_moe_cases import Scenario, build_global, fill_buffer, local_weights, make_buffer

    # Sizes every rank rejects before any collective: experts not divisible by ranks, hidden not aligned.
    _expect_error(lambda: deep_gemm.get_symm_buffer_for_sm90_mega_moe(group, 2 * world + 1, 384, 2, 512, 256,
                                                                      device="cpu"),
                  r"num_experts: expected a multiple of num_ranks")
    _expect_error(lambda: deep_gemm.get_symm_buffer_for_mega_moe(group, 2 * world, 384, 2, 200, 256, device="cpu"),
                  r"hidden: expected a multiple of 128")

    sc = Scenario("sm90", tokens=(6,) * world, num_experts=2 * world, topk=2, seed=9)
    data = build_global(sc)
    buf = make_buffer(sc, group)
    fill_buffer(sc, data, buf, rank)
    l1, l2 = local_weights(sc, data, rank)
    other = deep_gemm.get_symm_buffer_for_mega_moe(group, 2 * world, 384, 2, 512, 256, mma_type="bf16xbf16",
                                                   device="cpu")
    stats = torch.zeros(2, dtype=torch.int32)
    snapshot = buf.buffer.clone()
    # Tokens over capacity on one rank only: every rank raises, nothing is written anywhere.
    for bad_rank, change, own in ((world - 1, "rows", r"y: expected at most num_max_tokens_per_rank \(384\)"),
                                  (0, "buffer", r"sym_buffer: fp8_mega_moe expects a SM90SymmBuffer"),
                                  (1, "recipe", r"recipe: expected \(128, 128, 128\)"),
                                  (world - 1, "routing", r"sym_buffer.topk_idx: expected expert ids in")):
        y = torch.full((6, 512), 5.0, dtype=torch.bfloat16)
        target, recipe, rows = buf, (128, 128, 128), y
        if rank == bad_rank:
            if change == "rows":
                rows = torch.zeros(385, 512, dtype=torch.bfloat16)
            elif change == "buffer":
                target = other
            elif change == "recipe":
                recipe = (1, 1, 32)
            else:
                buf.topk_idx[2, 0] = 2 * world  # an expert id past the last expert
                snapshot = buf.buffer.clone()
        pattern = own if rank == bad_rank else rf"fp8_mega_moe: rank\(s\) \[{bad_rank}\] rejected"
        _expect_error(lambda: deep_gemm.fp8_mega_moe(rows, l1, l2, target, stats, recipe), pattern)
        assert (y == 5.0).all() and not stats.any() and torch.equal(buf.buffer, snapshot)
    fill_buffer(sc, data, buf, rank)  # (the routing case wrote a bad id into one rank's buffer)
    # The group is still usable: a valid call right after agrees on every rank.
    y = torch.zeros(6, 512, dtype=torch.bfloat16)
    deep_gemm.fp8_mega_moe(y, l1, l2, buf, stats)
    total = torch.tensor([int(stats.sum())])
    dist.all_reduce(total, group=group)
    assert int(total) == sum(int((t >= 0).sum()) for t in data.topk_idx)
    buf.destroy()
    other.destroy()


def _worker(rank: int, world: int, port: int, tests_dir: str) -> None:
    import sys
    sys.path.insert(0, tests_dir)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=90))
    try:
        from deep_gemm.testing import calc_diff
        from mega_moe_cases import run_and_expect
        group = dist.group.WORLD
        for sc in _scenarios(world):
            y, stats, expected, expected_stats = run_and_expect(sc, group, rank)
            assert y.shape == expected.shape, (sc.id, y.shape, expected.shape)
            diff = calc_diff(y, expected)
            assert diff < 0.01, (sc.id, rank, diff)
            assert torch.equal(stats, expected_stats), (sc.id, rank, stats, expected_stats)
        _errors(rank, world, group)
        dist.barrier(group=group)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
def test_layer_on_gloo_ranks(world):
    from mega_moe_cases import free_port, spawn_ranks
    if not spawn_ranks(_worker, (world, free_port(), os.path.dirname(os.path.abspath(__file__))), world,
                       DEADLINE_S):
        pytest.fail(f"{world} gloo ranks did not finish within {DEADLINE_S} s (a rank hangs)")
