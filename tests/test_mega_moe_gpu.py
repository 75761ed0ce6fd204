"""The SM90 FP8 Mega MoE layer on one GPU: the Triton kernels (``fp8_mega_moe`` at world size 1, and the
pre-dispatch) against the op's torch reference run on the same GPU buffer contents, over DeepGEMM's scenario axes
(tokens per expert 16..2048, hidden 512..7168, intermediate 512..4224, top-k 1..8, masked shares, clamps, fast math,
0 tokens and the buffer's capacity), against an independent float64 per-token loop on small cases, and under
CUDA-graph capture."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

import deep_gemm
from deep_gemm.mega import layer as mega_layer
from deep_gemm.mega.api import fp8_mega_moe_op_args
from deep_gemm.testing import calc_diff
from deep_gemm.testing.mega_moe import (routing, run_fp8_mega_moe_kernels, run_pre_dispatch_sm90_kernel,
                                        sm90_weights)

from mega_moe_cases import GpuCase, assert_graph_replay_matches_eager

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

# Kernel vs reference on the same FP8 inputs: FP32 summation order and the rare FP8 rounding tie it flips.
SAME_INPUTS = 2e-4
# Against the float64 loop (no FP8 / BF16 rounding of the intermediate): DeepGEMM's tolerance.
INDEPENDENT = 0.01


@dataclass(frozen=True)
class Case(GpuCase):
    capacity: int = 0  # 0: the token count rounded up


CASES = [
    Case(24, experts=8, topk=2),
    # tokens per expert 16, 128, 512, 2048 (E = 16, top-4)
    Case(64), Case(512), Case(2048), Case(8192, hidden=512, inter=512),
    # model-like widths
    Case(96, experts=32, hidden=2048, inter=2048, topk=6, clamp=10.0),
    Case(200, experts=32, hidden=4096, inter=3072, topk=8),
    Case(130, experts=16, hidden=7168, inter=4224, topk=6, clamp=10.0, fast_math=False),
    Case(300, experts=64, hidden=7168, inter=512, topk=1),
    # masks, clamps, fast math, idle experts, both tiles
    *[Case(256, masked=m) for m in (0.3, 0.7, 1.0)],
    *[Case(100, clamp=c, fast_math=f) for c, f in ((1.0, True), (10.0, False), (math.inf, True))],
    Case(77, experts=16, topk=4, idle=True),
    Case(1000, block_m=64), Case(40, block_m=128),
    # zero tokens, a full buffer
    Case(0), Case(768, capacity=768, topk=2),
]


def _layer(case: Case, seed: int = 0):
    dev = "cuda"
    l1, l2 = sm90_weights(case.experts, case.hidden, case.inter, dev, seed)
    x, idx, w = routing(case.tokens, case.experts, case.topk, dev, case.masked, case.idle, seed, hidden=case.hidden)
    capacity = case.capacity or max(case.tokens, 1)
    bufs = [deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, case.experts, capacity, case.topk, case.hidden,
                                                          case.inter, device=dev) for _ in range(2)]
    for buf in bufs:
        run_pre_dispatch_sm90_kernel(x, idx, w, buf, case.tokens)
    return (l1, l2), deep_gemm.transform_weights_for_mega_moe_sm90(l1, l2), (x, idx, w), bufs


def _run(case: Case):
    raw, (l1, l2), inputs, (buf_k, buf_r) = _layer(case)
    stats_k = torch.arange(case.experts, dtype=torch.int32, device="cuda") * 3
    stats_r = stats_k.clone()
    y_k = torch.full((case.tokens, case.hidden), 7.0, dtype=torch.bfloat16, device="cuda")
    y_r = y_k.clone()
    run_fp8_mega_moe_kernels(y_k, l1, l2, buf_k, stats_k, case.clamp, case.fast_math, case.block_m)
    mega_layer.fp8_mega_moe(*fp8_mega_moe_op_args(y_r, l1, l2, buf_r, stats_r, activation_clamp=case.clamp,
                                                  fast_math=case.fast_math))  # the torch reference, same GPU
    torch.cuda.synchronize()
    return y_k, y_r, stats_k, stats_r, raw, inputs, buf_k


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_match_reference(case):
    y_k, y_r, stats_k, stats_r, _, (_, idx, _), _ = _run(case)
    assert torch.isfinite(y_k.float()).all()
    assert torch.equal(stats_k, stats_r)
    if case.tokens and bool((idx >= 0).any()):
        assert calc_diff(y_k, y_r) < SAME_INPUTS, calc_diff(y_k, y_r)
    # Tokens with every slot masked come out exactly zero.
    silent = (idx < 0).all(dim=1)
    assert not y_k[silent].any()


def _float64_expectation(raw, inputs, buf, case):
    (w1, s1), (w2, s2) = raw
    _, idx, w = inputs

    def dequant(q, s):
        return q.double() * s.double().repeat_interleave(128, 1).repeat_interleave(128, 2)

    w1d, w2d = dequant(w1, s1), dequant(w2, s2)
    x = buf.x[:case.tokens].double() * buf.x_sf[:case.tokens].double().repeat_interleave(128, dim=1)
    out = torch.zeros(case.tokens, case.hidden, dtype=torch.float64, device="cuda")
    for t in range(case.tokens):
        for s in range(case.topk):
            e = int(idx[t, s])
            if e < 0:
                continue
            h = w1d[e] @ x[t]
            gate, up = h[:case.inter], h[case.inter:]
            if case.clamp is not None:
                gate, up = gate.clamp(max=case.clamp), up.clamp(-case.clamp, case.clamp)
            out[t] += float(w[t, s]) * (w2d[e] @ (gate * torch.sigmoid(gate) * up))
    return out


@pytest.mark.parametrize("case", [Case(24, experts=8, topk=2), Case(40, hidden=2048, inter=512, topk=6, clamp=10.0),
                                  Case(33, masked=0.3, block_m=128)], ids=str)
def test_kernels_match_float64_loop(case):
    y_k, _, _, _, raw, inputs, buf_k = _run(case)
    assert calc_diff(y_k, _float64_expectation(raw, inputs, buf_k, case)) < INDEPENDENT


def test_workspace_is_left_zero_and_calls_repeat():
    case = Case(300, topk=6)
    _, (l1, l2), (x, idx, w), (buf, _) = _layer(case)
    ys = []
    for _ in range(3):
        y = torch.empty(case.tokens, case.hidden, dtype=torch.bfloat16, device="cuda")
        run_fp8_mega_moe_kernels(y, l1, l2, buf)
        ys.append(y)
    assert torch.equal(ys[0], ys[1]) and torch.equal(ys[1], ys[2])  # bitwise: row placement does not matter


def test_cuda_graph_capture_and_replay():
    case = Case(128, topk=4, clamp=10.0)
    _, (l1, l2), (x, idx, w), (buf, _) = _layer(case)
    y = torch.empty(case.tokens, case.hidden, dtype=torch.bfloat16, device="cuda")
    static_x, static_idx, static_w = x.clone(), idx.clone(), w.clone()

    def step():
        run_pre_dispatch_sm90_kernel(static_x, static_idx, static_w, buf, case.tokens)
        run_fp8_mega_moe_kernels(y, l1, l2, buf, activation_clamp=case.clamp)

    fresh = routing(case.tokens, case.experts, case.topk, "cuda", seed=5, hidden=case.hidden)
    assert_graph_replay_matches_eager(step, y, (static_x, static_idx, static_w), fresh)


def test_pre_dispatch_kernel_matches_reference_bitwise():
    from deep_gemm.mega import layer
    x, idx, w = routing(300, 64, 6, "cuda", masked=0.2, hidden=7168)
    x[3, :128] = 0
    outs = []
    for kernel in (True, False):
        buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 64, 384, 6, 7168, 512, device="cuda")
        buf.topk_idx.fill_(99)
        args = (x, idx.int(), w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, 300, 128, 1.5)
        if kernel:
            run_pre_dispatch_sm90_kernel(*args[:3], buf, *args[7:])
        else:
            layer.pre_dispatch_sm90(*args)
        outs.append([t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t for t in args[3:7]])
    torch.cuda.synchronize()
    for a, b in zip(*outs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("num_tokens", [0, 9, 200])
def test_sglang_sm90_call_path_on_cuda(num_tokens):
    """SGLang's Hopper call sequence (weights interleaved by its own builder, pre-dispatch with a routed scaling
    factor and rows past num_tokens, y of max(num_tokens, 1) rows) on the Triton kernels, against the reference."""
    from test_mega_moe_cpu import _sglang_style_weight_prep
    (w13, w13_sf), (w2, w2_sf) = sm90_weights(8, 512, 256, "cuda")
    l1, l2 = (_sglang_style_weight_prep(w13), w13_sf), (w2, w2_sf)
    x, idx, w = routing(num_tokens + 3, 8, 4, "cuda", masked=0.3, hidden=512)
    ys = []
    for kernel in (True, False):
        buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 512, 4, 512, 256, device="cuda")
        y = torch.empty((max(num_tokens, 1), 512), dtype=torch.bfloat16, device="cuda")
        if kernel:
            run_pre_dispatch_sm90_kernel(x, idx.int(), w, buf, num_tokens, 128, 2.0)
            run_fp8_mega_moe_kernels(y, l1, l2, buf, activation_clamp=10.0)
        else:  # SGLang's calls as it makes them (the op's default CUDA path)
            deep_gemm.mega_moe_pre_dispatch_sm90(x, idx.int(), w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights,
                                                 num_tokens=num_tokens, group_size=128, routed_scaling_factor=2.0)
            deep_gemm.fp8_mega_moe(y, l1, l2, buf, recipe=(128, 128, 128), activation="swiglu",
                                   activation_clamp=10.0, fast_math=True)
        ys.append(y[:num_tokens])
    torch.cuda.synchronize()
    if num_tokens:
        assert calc_diff(ys[0], ys[1]) < SAME_INPUTS
