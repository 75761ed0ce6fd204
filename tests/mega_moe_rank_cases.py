"""``fp8_mega_moe`` over several ranks: scenarios and the expectation, shared by the interpreter test (simulated ranks
in one process, test_mega_moe_ranks_cpu.py) and the multi-GPU test (test_mega_moe_ranks_gpu.py).

The expectation: rank r's tokens through the reference with every expert present, and the received statistics
summed over the source ranks. That is what the reference's several-rank form (``reference.mega_moe_forward`` on a
gloo group) computes, slot by slot: a slot's output depends only on its token and its expert
(test_mega_moe_gloo.py checks that form against a float64 loop).
"""

from __future__ import annotations

import dataclasses

import torch

import deep_gemm
from deep_gemm.mega.api import fp8_mega_moe_op_args
from deep_gemm.testing import calc_diff
from mega_moe_cases import CAPACITY, Scenario, build_global, local_weights

ops = torch.ops.deep_gemm
# As test_mega_moe_kernels_cpu.py: FP32 summation order and the rare FP8 rounding tie it flips.
TOLERANCE = 1e-4
# Tokens per rank: uneven, one rank without tokens at 4 ranks and more.
UNEVEN = {2: (5, 31), 4: (9, 0, 23, 2), 8: (9, 0, 23, 2, 40, 1, 7, 16)}


def scenarios(world: int) -> list:
    """(scenario, BLOCK_M, rank whose slots are all masked, statistics) for ``world`` ranks."""
    return [
        (Scenario("sm90", tokens=UNEVEN[world], num_experts=8, topk=6, hidden=256, inter=128, masked=0.2, clamp=10.0,
                  seed=1), 64, None, True),
        (Scenario("sm90", tokens=UNEVEN[world], num_experts=4 * world, topk=2, hidden=256, inter=128,
                  idle_experts=True, fast_math=False, seed=2), 128, None, True),
        (Scenario("sm90", tokens=(6,) * world, num_experts=2 * world, topk=1, hidden=256, inter=128, masked=0.3,
                  seed=3), 64, world - 1, False),
    ]


def scenario_data(sc: Scenario, masked_rank=None):
    data = build_global(sc)
    if masked_rank is not None:
        data.topk_idx[masked_rank][:] = -1
    return data


def expected(sc: Scenario, data, calls: int = 1):
    """(per rank: the reference y of its tokens against every expert, per rank: the statistics ``calls`` calls add),
    on the CPU."""
    l1, l2 = local_weights(dataclasses.replace(sc, tokens=(0,)), data, 0)  # one rank: all experts
    received = torch.zeros(sc.num_experts, dtype=torch.int32)
    ys = []
    for r in range(sc.num_ranks):
        n = data.x[r].size(0)
        buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, sc.num_experts, CAPACITY, sc.topk, sc.hidden,
                                                          sc.inter, device="cpu")
        deep_gemm.mega_moe_pre_dispatch_sm90(data.x[r], data.topk_idx[r], data.topk_weights[r], buf.x, buf.x_sf,
                                             buf.topk_idx, buf.topk_weights, num_tokens=n)
        y = torch.zeros(n, sc.hidden, dtype=torch.bfloat16)
        stats = torch.zeros(sc.num_experts, dtype=torch.int32)
        ops.fp8_mega_moe(*fp8_mega_moe_op_args(y, l1, l2, buf, stats, activation_clamp=sc.clamp,
                                               fast_math=sc.fast_math))
        ys.append(y)
        received += stats * calls
    return ys, list(received.chunk(sc.num_ranks))


def check_rank(y: torch.Tensor, want_y: torch.Tensor, stats, start, want_stats, rank: int) -> None:
    """One rank's y (CPU) and statistics against the expectation: finite, exact zeros without routed slots, else
    within TOLERANCE; statistics exact."""
    assert torch.isfinite(y.float()).all(), rank
    if want_y.float().abs().sum() == 0:
        assert not y.any(), rank
    else:
        assert calc_diff(y, want_y) < TOLERANCE, (rank, calc_diff(y, want_y))
    if stats is not None:
        assert torch.equal(stats, start + want_stats), (rank, stats, start + want_stats)
