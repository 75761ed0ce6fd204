"""The FP8 x FP4 Mega MoE Triton kernels (``fp8_fp4_mega_moe`` at one rank: ``deep_gemm/mega/kernels.py``'s route /
scan / dispatch / combine and ``fp8_fp4_kernels.py``'s decoding L1 / L2) in Triton's interpreter on CPU, against the
op's reference on the same buffer: FP4 and FP8 weights, token counts 0, odd and several tiles per expert, masked
slots, top-k 1/2/6, the clamp off, finite and infinite, statistics on and off, idle experts, both BLOCK_Ms, shared
experts, the pool in the ring and in the per-stream workspace, the workspace left zero, the intermediate against the
reference's quantisation, the epilogue's UE8M0 quantisation bit for bit, and the forms the launcher declines.

The GPU runs of the same kernels are in test_mega_moe_fp8_fp4_gpu.py."""

from __future__ import annotations

import math

import pytest
import torch
import triton
import triton.language as tl

import deep_gemm
from deep_gemm.mega import plan as mega_plan
from deep_gemm.mega import reference as mega_ref
from deep_gemm.mega.api import fp8_fp4_mega_moe_op_args
from deep_gemm.mega.fp8_fp4_kernels import _ue8m0_quantise
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_token_cast_to_fp8, unpack_ue8m0_from_int
from mega_moe_cases import (Scenario, assert_layer_agrees, build_global, local_weights, make_buffer,
                            ring_views_after, run_kernels_and_reference)
import interpreter_bf16  # noqa: F401  (torch-exact BF16 dots and fp32 -> bf16 / fp8 casts in the interpreter)
from triton_harness import DEVICE, triton_launcher

# Kernel vs reference on the same quantised inputs: the products are exact in both (decoded FP8 / FP4 times powers
# of two are BF16 values), the FP32 sums differ in order, and an intermediate value near an FP8 rounding boundary
# may round the other way (2^-4 relative for one element): far below 1e-3 over a layer.
TOLERANCE = 1e-3
CAPACITY = 384


def _sc(**kw):
    base = dict(kind="fp8fp4", hidden=256, inter=128)
    base.update(kw)
    return Scenario(**base)


def run_both(sc: Scenario, block_m=None, stats_start=None, calls=1, ring=None):
    """(kernel y, reference y, kernel stats, reference stats, buffer after the kernel, the buffer, local weights)."""
    return run_kernels_and_reference(sc, fp8_fp4_mega_moe_op_args, block_m, stats_start, calls, ring)


CASES = [
    (_sc(tokens=(24,), topk=2), None, True),
    (_sc(tokens=(7,), topk=6, masked=0.3, clamp=1.0), 64, False),
    (_sc(tokens=(13,), topk=6, num_experts=16, idle_experts=True, clamp=math.inf, fast_math=False), 64, True),
    (_sc(tokens=(24,), topk=2, num_experts=4, clamp=10.0, fp8_weights=True), 128, True),
    (_sc(tokens=(70,), topk=1, num_experts=2, hidden=384, inter=256), 64, False),  # two tiles per expert
    (_sc(tokens=(33,), topk=3, num_experts=4, masked=0.2, fp8_weights=True), 64, True),
    (_sc(tokens=(9,), topk=2, masked=1.0), None, True),
    (_sc(tokens=(0,), topk=2), None, True),
    # shared experts: one (intermediate I) with FP4 weights, two (2 I) with FP8 weights and the clamp; every routed
    # slot masked
    (_sc(tokens=(19,), topk=2, shared=1), None, True),
    (_sc(tokens=(21,), topk=6, shared=2, clamp=5.0, masked=0.2, fp8_weights=True), 64, False),
    (_sc(tokens=(5,), topk=2, shared=1, masked=1.0), 128, True),
]


@pytest.mark.parametrize("sc, block_m, with_stats", CASES, ids=[f"{s.id}-bm{b}-st{w}" for s, b, w in CASES])
def test_layer_kernels_match_reference(sc, block_m, with_stats):
    start = torch.arange(sc.num_experts, dtype=torch.int32) * 5 + 3 if with_stats else None
    yk, yr, sk, sr, buffer_after, buf, _ = run_both(sc, block_m, start)
    assert_layer_agrees(yk, yr, sk, sr, TOLERANCE)
    # The arrival counters are zero again (the next call needs no reset).
    assert not ring_views_after(sc, buf, buffer_after)["counts"].any()


def test_intermediate_matches_the_reference_quantisation():
    # Every real pool row's FP8 values and UE8M0 scales against the reference's L1, SwiGLU, top-k weight and
    # per-32 quantisation of the same (token, slot): the FP32 values differ only in summation order, so the scales
    # agree but where amax / 448 straddles a power of two, and the dequantised rows agree to calc_diff.
    sc = _sc(tokens=(29,), topk=3, num_experts=4, clamp=3.0)
    _, _, _, _, buffer_after, buf, (l1, _) = run_both(sc, 64)
    # (the pool in the ring: its rows, as the launcher sized them at BLOCK_M 64)
    views = ring_views_after(sc, buf, buffer_after, mega_plan.pool_rows_needed(29, sc.topk, sc.num_experts, 64))
    w1 = mega_ref.mx_l1_weights(*l1)
    x = mega_ref.tokens_to_float(buf.x, buf.x_sf, "mx")
    got, want, got_sf, want_sf = [], [], [], []
    for e in range(sc.num_experts):
        start, end = int(views["starts"][e]), int(views["ends"][e])
        if end == start:
            continue
        src = views["row_src"][start:end].long()
        token, slot = src // sc.topk, src % sc.topk
        assert torch.equal(buf.topk_idx[token, slot], torch.full_like(token, e))
        a = mega_ref.swiglu(x[token] @ w1[e].t(), sc.clamp) * buf.topk_weights[token, slot].unsqueeze(1)
        q, sf = per_token_cast_to_fp8(a, use_ue8m0=True, gran_k=32)
        kernel_sf = unpack_ue8m0_from_int(views["l2_acts_sf"][start:end])
        got.append(views["l2_acts"][start:end].float() * kernel_sf.repeat_interleave(32, dim=1))
        want.append(q.float() * sf.repeat_interleave(32, dim=1))
        got_sf.append(kernel_sf)
        want_sf.append(sf)
    got_sf, want_sf = torch.cat(got_sf), torch.cat(want_sf)
    assert (got_sf != want_sf).float().mean() < 0.01
    assert calc_diff(torch.cat(got), torch.cat(want)) < TOLERANCE


@triton.jit
def _quantise_probe(x_ptr, q_ptr, e_ptr, BM: tl.constexpr, COLS: tl.constexpr):
    r = tl.arange(0, BM)[:, None]
    c = tl.arange(0, COLS)[None, :]
    q, exponent = _ue8m0_quantise(tl.load(x_ptr + r * COLS + c), BM, COLS)
    tl.store(q_ptr + r * COLS + c, q)
    g = tl.arange(0, COLS // 32)[None, :]
    tl.store(e_ptr + r * (COLS // 32) + g, exponent)


def test_epilogue_quantisation_is_bitwise_per_token_cast_to_fp8():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(16, 64, generator=g) * torch.logspace(-8, 8, 16).unsqueeze(1)
    x[0] = 0.0                         # all zero: the 1e-4 floor
    x[1, :32] = 448.0 * 2.0 ** -3      # amax / 448 exactly a power of two
    x[2, 32:] = -1e-30                 # below the floor, negative
    q = torch.empty(16, 64, dtype=torch.float8_e4m3fn, device=DEVICE)
    e = torch.empty(16, 2, dtype=torch.int32, device=DEVICE)
    _quantise_probe[(1,)](x.to(DEVICE), q, e, 16, 64)
    want_q, want_sf = per_token_cast_to_fp8(x, use_ue8m0=True, gran_k=32)
    assert torch.equal(q.cpu().view(torch.uint8), want_q.view(torch.uint8))
    assert torch.equal(e.cpu(), want_sf.view(torch.int32) >> 23)


def test_pool_in_the_stream_workspace_when_the_ring_is_small():
    # The smallest ring (one expert per wave, 384 rows) cannot hold 100 x 6 slots over 8 experts in 128-row tiles.
    sc = _sc(tokens=(100,), topk=6)
    low, _ = deep_gemm.get_ring_limit_for_mega_moe(CAPACITY, sc.num_experts, sc.topk, 1)
    assert mega_plan.pool_rows_needed(100, 6, 8, 128) > low
    yk, yr, sk, sr, _, _, _ = run_both(sc, None, torch.zeros(8, dtype=torch.int32), ring=low)
    assert calc_diff(yk, yr) < TOLERANCE and torch.equal(sk, sr)


def test_repeated_calls_accumulate_stats_and_agree():
    sc = _sc(tokens=(7,), topk=2, num_experts=4, fp8_weights=True)
    yk, yr, sk, sr, _, _, _ = run_both(sc, 64, torch.zeros(sc.num_experts, dtype=torch.int32), calls=2)
    assert calc_diff(yk, yr) < TOLERANCE
    assert torch.equal(sk, sr) and int(sk.sum()) == 2 * int((build_global(sc).topk_idx[0] >= 0).sum())


def test_declined_forms_and_opt_in():
    sc = _sc(tokens=(5,), topk=2)
    data = build_global(sc)
    buf = make_buffer(sc, None)
    l1, l2 = local_weights(sc, data, 0)
    y = torch.empty(5, sc.hidden, dtype=torch.bfloat16)
    launcher = triton_launcher("fp8_fp4_mega_moe")
    on = mega_plan.MegaOverrides(kernels=True)

    def dev(**extra):
        args = fp8_fp4_mega_moe_op_args(y, l1, l2, buf, **extra)
        return tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args)
    assert launcher(*dev(post_expert_norm=True), overrides=on) is NotImplemented
    if "mega_fp8_fp4" in deep_gemm.core.gpu_validation.AWAITING_GPU:  # not asked for: the reference runs
        assert launcher(*dev()) is NotImplemented


def test_plan_fp8_fp4():
    small = mega_plan.plan_fp8_fp4(8, 6, 256)
    assert (small.block_m, small.block_n, small.num_warps) == (64, 64, 4)
    big = mega_plan.plan_fp8_fp4(8192, 6, 256)
    assert (big.block_m, big.block_n, big.num_warps) == (128, 128, 8)
    assert big.l1_stages == mega_plan.FP8_FP4_STAGES
    # Every N tile holds whole 32-column scale groups of the intermediate (64 interleaved gate/up rows each).
    assert all(bn % 64 == 0 for bn in mega_plan.FP8_FP4_BLOCK_N.values())
