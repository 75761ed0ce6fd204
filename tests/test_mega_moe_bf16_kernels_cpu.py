"""The BF16 Mega MoE Triton kernels (``bf16_mega_moe`` at one rank: ``deep_gemm/mega/kernels.py``'s route / scan /
dispatch / combine shared with the FP8 layer, and its own BF16 L1 / L2) in Triton's interpreter on CPU, against the
op's reference on the same buffer: token counts 0, odd and several tiles per expert, masked slots, top-k 1/2/6, the
clamp on and off, statistics on and off, idle experts, both BLOCK_Ms, shared experts, the pool in the ring and in
the per-stream workspace (a ring too small for it), the workspace left zero, and the forms the launcher declines.

The GPU runs of the same kernels are in test_mega_moe_bf16_gpu.py."""

from __future__ import annotations

import math

import pytest
import torch

import deep_gemm
from deep_gemm.mega.api import bf16_mega_moe_op_args
from deep_gemm.mega import plan as mega_plan
from deep_gemm.testing import calc_diff
from mega_moe_cases import (Scenario, assert_layer_agrees, build_global, local_weights, make_buffer,
                            ring_views_after, run_kernels_and_reference)
import interpreter_bf16  # noqa: F401  (torch-exact fp32 -> bf16 casts in the interpreter)
from triton_harness import DEVICE, triton_launcher

# Kernel vs reference on the same BF16 inputs: both accumulate in FP32 (in another order), and the intermediate's
# BF16 rounding can flip where the two FP32 values straddle a rounding boundary (2^-9 relative): far below 1e-4.
TOLERANCE = 1e-4
CAPACITY = 384


def _to(dev, t):
    return t.to(dev) if isinstance(t, torch.Tensor) else t


def _buffer(sc: Scenario, ring=None):
    return make_buffer(sc, None, ring)


def _args(y, l1, l2, buf, stats, sc, **extra):
    return bf16_mega_moe_op_args(y, l1, l2, buf, cumulative_local_expert_recv_stats=stats,
                                 activation_clamp=sc.clamp, fast_math=sc.fast_math, **extra)


def run_both(sc: Scenario, block_m=None, stats_start=None, calls=1, ring=None):
    """(kernel y, reference y, kernel stats, reference stats, buffer after the kernel, the buffer)."""
    return run_kernels_and_reference(sc, bf16_mega_moe_op_args, block_m, stats_start, calls, ring)[:6]


def _sc(**kw):
    base = dict(kind="bf16", hidden=256, inter=128)
    base.update(kw)
    return Scenario(**base)


CASES = [
    (_sc(tokens=(24,), topk=2), None, True),
    (_sc(tokens=(7,), topk=6, masked=0.3, clamp=1.0), 64, False),
    (_sc(tokens=(13,), topk=6, num_experts=16, idle_experts=True, clamp=math.inf, fast_math=False), 64, True),
    (_sc(tokens=(24,), topk=2, num_experts=4, clamp=10.0), 128, True),
    (_sc(tokens=(70,), topk=1, num_experts=2, hidden=384, inter=256), 64, False),  # two tiles per expert
    (_sc(tokens=(9,), topk=2, masked=1.0), None, True),
    (_sc(tokens=(0,), topk=2), None, True),
    # shared experts: one (intermediate I), two (2 I), with the clamp; every routed slot masked
    (_sc(tokens=(19,), topk=2, shared=1), None, True),
    (_sc(tokens=(70,), topk=6, shared=2, clamp=5.0, masked=0.2), 64, False),
    (_sc(tokens=(5,), topk=2, shared=1, masked=1.0), 128, True),
]


@pytest.mark.parametrize("sc, block_m, with_stats", CASES, ids=[f"{s.id}-bm{b}-st{w}" for s, b, w in CASES])
def test_layer_kernels_match_reference(sc, block_m, with_stats):
    start = torch.arange(sc.num_experts, dtype=torch.int32) * 5 + 3 if with_stats else None
    yk, yr, sk, sr, buffer_after, buf = run_both(sc, block_m, start)
    assert_layer_agrees(yk, yr, sk, sr, TOLERANCE)
    # The arrival counters are zero again (the next call needs no reset).
    assert not ring_views_after(sc, buf, buffer_after)["counts"].any()


def test_pool_in_the_stream_workspace_when_the_ring_is_small():
    # The smallest ring (one expert per wave, 384 rows) cannot hold 100 x 6 slots over 8 experts in 128-row tiles.
    sc = _sc(tokens=(100,), topk=6)
    low, _ = deep_gemm.get_ring_limit_for_mega_moe(CAPACITY, sc.num_experts, sc.topk, 1)
    assert mega_plan.pool_rows_needed(100, 6, 8, 128) > low
    yk, yr, sk, sr, _, _ = run_both(sc, None, torch.zeros(8, dtype=torch.int32), ring=low)
    assert calc_diff(yk, yr) < TOLERANCE and torch.equal(sk, sr)


def test_repeated_calls_accumulate_stats_and_agree():
    sc = _sc(tokens=(11,), topk=3)
    yk, yr, sk, sr, _, _ = run_both(sc, None, torch.zeros(sc.num_experts, dtype=torch.int32), calls=2)
    assert calc_diff(yk, yr) < TOLERANCE
    assert torch.equal(sk, sr) and int(sk.sum()) == 2 * int((build_global(sc).topk_idx[0] >= 0).sum())


def test_declined_forms_and_opt_in():
    sc = _sc(tokens=(5,), topk=2)
    data = build_global(sc)
    buf = _buffer(sc)
    l1, l2 = local_weights(sc, data, 0)
    y = torch.empty(5, sc.hidden, dtype=torch.bfloat16)
    launcher = triton_launcher("bf16_mega_moe")
    on = mega_plan.MegaOverrides(kernels=True)
    dev = lambda args: tuple(_to(DEVICE, a) for a in args)  # noqa: E731
    assert launcher(*dev(_args(y, l1, l2, buf, None, sc, post_expert_norm=True)), overrides=on) is NotImplemented
    if "mega_bf16" in deep_gemm.core.gpu_validation.AWAITING_GPU:  # not asked for: the reference runs
        assert launcher(*dev(_args(y, l1, l2, buf, None, sc))) is NotImplemented


def test_plan_bf16():
    assert mega_plan.plan_bf16(8, 6, 256).block_m == 64
    cfg = mega_plan.plan_bf16(8192, 6, 256)
    assert cfg.block_m == 128 and cfg.num_warps == 8
    assert mega_plan.pool_rows_needed(8, 6, 256, 64) == (1 + 48) * 64
