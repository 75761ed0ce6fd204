"""The SM90 FP8 Mega MoE Triton kernels (``deep_gemm/mega/kernels.py``) in Triton's interpreter on CPU: the layer's
launcher against the op's reference on the same buffer (routing, padding, masked slots, clamps, both BLOCK_Ms,
statistics, the workspace left zero), and the pre-dispatch kernel bit for bit against its reference.

The GPU runs of the same kernels are in test_mega_moe_gpu.py."""

from __future__ import annotations

import math

import pytest
import torch

import deep_gemm
from deep_gemm.mega import buffer as mega_buffer
from deep_gemm.mega.api import fp8_mega_moe_op_args
from deep_gemm.mega import plan as mega_plan
from deep_gemm.testing import calc_diff
from mega_moe_cases import Scenario, build_global, fill_buffer, local_weights, make_buffer
import interpreter_bf16  # noqa: F401  (torch-exact fp32 -> fp8 casts in the interpreter)
from triton_harness import DEVICE, triton_launcher

ops = torch.ops.deep_gemm
# Kernel vs reference on the same FP8 inputs: FP32 summation order, and the rare FP8 rounding tie of the
# intermediate that the order flips.
TOLERANCE = 1e-4


def flat_args(y, l1, l2, buf, stats, clamp, fast_math):
    return fp8_mega_moe_op_args(y, l1, l2, buf, stats, activation_clamp=clamp, fast_math=fast_math)


def _to(dev, t):
    return t.to(dev) if isinstance(t, torch.Tensor) else t


def run_both(sc: Scenario, block_m=None, stats_start=None, calls=1):
    """(kernel y, reference y, kernel stats, reference stats, buffer after the kernel) on one scenario."""
    data = build_global(sc)
    buf = make_buffer(sc, None)
    fill_buffer(sc, data, buf, 0)
    l1, l2 = local_weights(sc, data, 0)
    n = data.x[0].size(0)
    results = []
    for use_kernel in (True, False):
        stats = None if stats_start is None else stats_start.clone()
        y = torch.full((n, sc.hidden), 7.0, dtype=torch.bfloat16)
        for _ in range(calls):
            args = flat_args(y, l1, l2, buf, stats, sc.clamp, sc.fast_math)
            if use_kernel:
                dev_args = tuple(_to(DEVICE, a) for a in args)
                launcher = triton_launcher("fp8_mega_moe")
                overrides = mega_plan.MegaOverrides(block_m, kernels=True)
                deep_gemm.core.registry.kernels_of("fp8_mega_moe").check(*dev_args)
                assert launcher(*dev_args, overrides=overrides) is not NotImplemented
                y_out, stats_out, buffer_out = dev_args[0].cpu(), _to("cpu", dev_args[5]), dev_args[6].cpu()
            else:
                ops.fp8_mega_moe(*args)
                y_out, stats_out = y, stats
        results.append((y_out, stats_out))
    (yk, sk), (yr, sr) = results
    return yk, yr, sk, sr, buffer_out


CASES = [
    (Scenario("sm90", tokens=(24,), topk=2, hidden=256, inter=128), None),
    (Scenario("sm90", tokens=(7,), topk=4, hidden=256, inter=128, masked=0.3, clamp=1.0), 64),
    (Scenario("sm90", tokens=(24,), topk=4, hidden=256, inter=128, num_experts=4, clamp=10.0, fast_math=False), 128),
    (Scenario("sm90", tokens=(13,), topk=6, hidden=384, inter=256, num_experts=16, idle_experts=True,
              clamp=math.inf), 64),
    (Scenario("sm90", tokens=(9,), topk=2, hidden=256, inter=128, masked=1.0), None),
    (Scenario("sm90", tokens=(70,), topk=1, hidden=256, inter=128, num_experts=2), 64),  # two tiles per expert
]


@pytest.mark.parametrize("sc, block_m", CASES, ids=[f"{s.id}-bm{b}" for s, b in CASES])
def test_layer_kernels_match_reference(sc, block_m):
    start = torch.arange(sc.num_experts, dtype=torch.int32) * 5 + 3
    yk, yr, sk, sr, buffer_after = run_both(sc, block_m, start)
    assert torch.isfinite(yk.float()).all()
    if yr.float().abs().sum() == 0:
        assert not yk.any()  # every slot masked: exact zeros
    else:
        assert calc_diff(yk, yr) < TOLERANCE
    assert torch.equal(sk, sr)
    # The arrival counters are zero again (the next call needs no reset).
    plan = mega_buffer.plan_sm90_symm_buffer(1, sc.num_experts, 384, sc.topk, sc.hidden, sc.inter, True, "swiglu")
    views = mega_buffer.sm90_kernel_views(buffer_after, plan, sc.num_experts, 384, sc.topk)
    assert not views["counts"].any()


def test_repeated_calls_accumulate_stats_and_agree():
    sc = Scenario("sm90", tokens=(11,), topk=3, hidden=256, inter=128)
    start = torch.zeros(sc.num_experts, dtype=torch.int32)
    yk, yr, sk, sr, _ = run_both(sc, None, start, calls=2)
    assert calc_diff(yk, yr) < TOLERANCE
    assert torch.equal(sk, sr) and int(sk.sum()) == 2 * int((build_global(sc).topk_idx[0] >= 0).sum())


def test_plan_block_m():
    assert mega_plan.plan(8, 6, 256).block_m == 64
    assert mega_plan.plan(8192, 6, 256).block_m == 128
    assert mega_plan.plan(8192, 6, 256, mega_plan.MegaOverrides(64)).block_m == 64
    with pytest.raises(deep_gemm.DeepGEMMError, match="MegaOverrides.block_m"):
        mega_plan.plan(8, 6, 256, mega_plan.MegaOverrides(96))
    # Pipelines fit the architecture's shared memory: sm_90 keeps the tuned depths; on the 101 KB parts (sm_89,
    # sm_120) the 128-row L1 (32 KB a stage) drops to three stages.
    assert mega_plan.plan(8192, 6, 256) == mega_plan.plan(8192, 6, 256, sm=100)
    assert (mega_plan.plan(8192, 6, 256).l1_stages, mega_plan.plan(8192, 6, 256).l2_stages) == mega_plan.STAGES[128]
    assert mega_plan.plan(8192, 6, 256, sm=120).l1_stages == 3
    assert mega_plan.plan(8192, 6, 256, sm=89).l2_stages == mega_plan.STAGES[128][1]
    assert (mega_plan.plan(8, 6, 256, sm=120).l1_stages, mega_plan.plan(8, 6, 256, sm=120).l2_stages) == \
        mega_plan.STAGES[64]
    # The grid bound covers the worst routing: every slot to its own expert, or all to one.
    assert mega_plan.max_m_tiles(8, 6, 256, 64) == 1 + 48
    assert mega_plan.max_m_tiles(8192, 8, 16, 128) == 512 + 16


@pytest.mark.parametrize("n, k, idx_dtype, scale", [(5, 3, torch.int32, 1.0), (0, 2, torch.int64, 2.5),
                                                    (17, 8, torch.int64, 0.5)])
def test_pre_dispatch_kernel_bitwise(n, k, idx_dtype, scale):
    g = torch.Generator().manual_seed(n + k)
    hidden = 384
    x = (torch.randn(max(n, 1), hidden, generator=g) * 3).bfloat16()
    x[0, :128] = 0  # an all-zero group: the amax floor
    idx = torch.randint(-1, 8, (max(n, 1), k), generator=g).to(idx_dtype)
    w = torch.rand(max(n, 1), k, generator=g)
    outs = []
    for kernel in (True, False):
        buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 20, k, hidden, 128, device="cpu")
        buf.topk_idx.fill_(123)
        args = (x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, n, 128, scale)
        if kernel:
            dev = tuple(_to(DEVICE, a) for a in args)
            deep_gemm.core.registry.kernels_of("mega_moe_pre_dispatch_sm90").check(*dev)
            launcher = triton_launcher("mega_moe_pre_dispatch_sm90")
            assert launcher(*dev, overrides=mega_plan.MegaOverrides(kernels=True)) is None
            outs.append([t.cpu() for t in dev[3:7]])
        else:
            ops.mega_moe_pre_dispatch_sm90(*args)
            outs.append(list(args[3:7]))
    for got, want in zip(*outs):
        assert torch.equal(got.view(torch.uint8) if got.dtype == torch.float8_e4m3fn else got,
                           want.view(torch.uint8) if want.dtype == torch.float8_e4m3fn else want)
