"""The BF16 Mega MoE layer on one GPU: the Triton kernels (``bf16_mega_moe`` at world size 1) against the op's torch
reference run on the same GPU buffer contents, at model sizes (hidden 4096 / 7168, intermediate 2048 / 3072, 256
experts, top-6, 8..4096 tokens) and at small ones (masked shares, clamps, exact math, idle experts, both BLOCK_Ms,
shared experts, 0 tokens, the pool in the per-stream workspace), against an independent float64 per-token loop on
small cases, and under CUDA-graph capture."""

from __future__ import annotations

import functools
import math

import pytest
import torch

import deep_gemm
from deep_gemm.mega import layer as mega_layer
from deep_gemm.mega.api import bf16_mega_moe_op_args
from deep_gemm.testing import calc_diff
from deep_gemm.testing.mega_moe import bf16_buffer, bf16_weights, routing, run_bf16_mega_moe_kernels

from mega_moe_cases import (RingCase, assert_calls_repeat_bitwise, assert_graph_replay_matches_eager,
                            assert_public_call_agrees)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

# Kernel vs reference on the same BF16 inputs: FP32 summation order, and the BF16 rounding of the intermediate that
# the order can flip.
SAME_INPUTS = 1e-4
# Against the float64 loop (no BF16 rounding of the intermediate or of each slot's output).
INDEPENDENT = 1e-3


Case = RingCase


MODEL = dict(experts=256, topk=6, clamp=10.0)
CASES = [
    # model sizes: decode to prefill-sized batches
    Case(8, hidden=7168, inter=2048, **MODEL), Case(128, hidden=7168, inter=2048, **MODEL),
    Case(4096, hidden=7168, inter=2048, **MODEL),
    Case(64, hidden=4096, inter=3072, **MODEL), Case(1000, hidden=4096, inter=3072, masked=0.2, **MODEL),
    Case(4096, hidden=4096, inter=3072, experts=256, topk=6),
    # small: masks, clamps, fast math, idle experts, both tiles, the pool outside the ring, zero tokens
    Case(24, experts=8, topk=2), Case(2048),
    *[Case(256, masked=m) for m in (0.3, 1.0)],
    *[Case(100, clamp=c, fast_math=f) for c, f in ((1.0, True), (10.0, False), (math.inf, True))],
    Case(77, topk=1, idle=True), Case(1000, block_m=64), Case(40, block_m=128),
    Case(300, topk=6, ring=384), Case(0),
    # shared experts (DeepSeek: one of the routed experts' size): model sizes and small
    Case(256, hidden=7168, inter=2048, shared=1, **MODEL), Case(2048, hidden=7168, inter=2048, shared=1, **MODEL),
    Case(100, shared=2, clamp=10.0), Case(64, shared=1, masked=1.0),
]


_WEIGHTS: dict = {}


def _weights(experts: int, hidden: int, intermediate: int):
    """(W2 as drawn, the layer's (L1, L2)) of one model at a time: up to ~40 GB at 7168 x 2048 x 256 experts, so the
    previous model's weights are dropped before the next are drawn."""
    key = (experts, hidden, intermediate)
    if key not in _WEIGHTS:
        _WEIGHTS.clear()
        torch.cuda.empty_cache()
        w1, w2 = bf16_weights(experts, hidden, intermediate, "cuda")
        l1, l2 = deep_gemm.transform_weights_for_mega_moe(w1, w2)  # (L1 an interleaved copy, L2 as given)
        del w1
        _WEIGHTS[key] = (w2, (l1, l2))
    return _WEIGHTS[key]


def _layer(case: Case, seed: int = 0):
    raw_l2, (l1, l2) = _weights(case.experts, case.hidden, case.inter)
    x, idx, w = routing(case.tokens, case.experts, case.topk, "cuda", case.masked, case.idle, seed, hidden=case.hidden)
    bufs = [bf16_buffer(case.experts, max(case.tokens, 1), case.topk, case.hidden, case.inter, "cuda", case.ring)
            for _ in range(2)]
    for buf in bufs:
        _fill(buf, x, idx, w, case.tokens)
    return (l1, l2), (x, idx, w), bufs


def _fill(buf, x, idx, w, n):
    buf.x[:n].copy_(x)
    buf.topk_idx[:n].copy_(idx)
    buf.topk_idx[n:].fill_(-1)
    buf.topk_weights[:n].copy_(w)


@functools.lru_cache(maxsize=4)
def _shared_weights(hidden: int, inter: int, shared: int):
    """The shared experts' (L1 interleaved, L2) BF16 ``[2 I_s, H]`` / ``[H, I_s]``, and the raw L1."""
    w1, w2 = bf16_weights(1, hidden, inter * shared, "cuda", seed=11)
    return deep_gemm.transform_weights_for_mega_moe(w1[0], w2[0]), w1[0]


def _run(case: Case):
    (l1, l2), inputs, (buf_k, buf_r) = _layer(case)
    shared = {}
    if case.shared:
        (s1, s2), _ = _shared_weights(case.hidden, case.inter, case.shared)
        shared = dict(shared_l1_weights=s1, shared_l2_weights=s2)
    stats_k = torch.arange(case.experts, dtype=torch.int32, device="cuda") * 3
    stats_r = stats_k.clone()
    y_k = torch.full((case.tokens, case.hidden), 7.0, dtype=torch.bfloat16, device="cuda")
    y_r = y_k.clone()
    run_bf16_mega_moe_kernels(y_k, l1, l2, buf_k, stats_k, case.clamp, case.fast_math, case.block_m, **shared)
    mega_layer.bf16_mega_moe(*bf16_mega_moe_op_args(y_r, l1, l2, buf_r, cumulative_local_expert_recv_stats=stats_r,
                                                    activation_clamp=case.clamp, fast_math=case.fast_math, **shared))
    torch.cuda.synchronize()
    return y_k, y_r, stats_k, stats_r, inputs, (l1, l2)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_match_reference(case):
    y_k, y_r, stats_k, stats_r, (_, idx, _), _ = _run(case)
    assert torch.isfinite(y_k.float()).all()
    assert torch.equal(stats_k, stats_r)
    if case.tokens and (case.shared or bool((idx >= 0).any())):
        assert calc_diff(y_k, y_r) < SAME_INPUTS, calc_diff(y_k, y_r)
    if not case.shared:
        silent = (idx < 0).all(dim=1)  # tokens with every slot masked come out exactly zero
        assert not y_k[silent].any()


def _float64_expectation(case, inputs):
    x, idx, w = inputs
    w2, _ = _weights(case.experts, case.hidden, case.inter)
    w1, _ = bf16_weights(case.experts, case.hidden, case.inter, "cuda")  # [gate | up], redrawn from the seed
    out = torch.zeros(case.tokens, case.hidden, dtype=torch.float64, device="cuda")
    xd = x.double()
    for t in range(case.tokens):
        for s in range(case.topk):
            e = int(idx[t, s])
            if e < 0:
                continue
            h = w1[e].double() @ xd[t]
            gate, up = h[:case.inter], h[case.inter:]
            if case.clamp is not None:
                gate, up = gate.clamp(max=case.clamp), up.clamp(-case.clamp, case.clamp)
            out[t] += float(w[t, s]) * (w2[e].double() @ (gate * torch.sigmoid(gate) * up))
    if case.shared:
        (_, s2), s1 = _shared_weights(case.hidden, case.inter, case.shared)
        h = xd @ s1.double().t()
        gate, up = h[:, :case.inter * case.shared], h[:, case.inter * case.shared:]
        if case.clamp is not None:
            gate, up = gate.clamp(max=case.clamp), up.clamp(-case.clamp, case.clamp)
        out += (gate * torch.sigmoid(gate) * up) @ s2.double().t()
    return out


@pytest.mark.parametrize("case", [Case(24, experts=8, topk=2), Case(40, hidden=2048, inter=512, topk=6, clamp=10.0),
                                  Case(33, masked=0.3, block_m=128), Case(20, shared=2, clamp=10.0)], ids=str)
def test_kernels_match_float64_loop(case):
    y_k, _, _, _, inputs, _ = _run(case)
    assert calc_diff(y_k, _float64_expectation(case, inputs)) < INDEPENDENT


def test_workspace_is_left_zero_and_calls_repeat():
    case = Case(300, topk=6)
    (l1, l2), _, (buf, _) = _layer(case)
    assert_calls_repeat_bitwise(lambda y: run_bf16_mega_moe_kernels(y, l1, l2, buf), case.tokens, case.hidden)


@pytest.mark.parametrize("ring", [None, 384], ids=["pool-in-ring", "pool-in-stream-workspace"])
def test_cuda_graph_capture_and_replay(ring):
    case = Case(128, topk=4, clamp=10.0, ring=ring)
    (l1, l2), (x, idx, w), (buf, _) = _layer(case)
    y = torch.empty(case.tokens, case.hidden, dtype=torch.bfloat16, device="cuda")
    static_x, static_idx, static_w = x.clone(), idx.clone(), w.clone()

    def step():
        _fill(buf, static_x, static_idx, static_w, case.tokens)
        run_bf16_mega_moe_kernels(y, l1, l2, buf, activation_clamp=case.clamp)

    fresh = routing(case.tokens, case.experts, case.topk, "cuda", seed=5, hidden=case.hidden)
    assert_graph_replay_matches_eager(step, y, (static_x, static_idx, static_w), fresh)


def test_public_call_runs_the_reference_until_opted_in():
    """Without MegaOverrides(kernels=True) the public call agrees with the kernels (it runs the reference while
    the BF16 kernels await their GPU run, the kernels after)."""
    case = Case(50, topk=4)
    (l1, l2), _, (buf_k, buf_r) = _layer(case)
    assert_public_call_agrees(lambda y: run_bf16_mega_moe_kernels(y, l1, l2, buf_k),
                              lambda y: deep_gemm.bf16_mega_moe(y, l1, l2, buf_r),
                              case.tokens, case.hidden, SAME_INPUTS)
