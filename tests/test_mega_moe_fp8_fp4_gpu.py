"""The FP8 x FP4 Mega MoE layer on one GPU: the Triton kernels (``fp8_fp4_mega_moe`` at world size 1) against the op's
torch reference run on the same GPU buffer contents, at model sizes (hidden 4096 / 7168, intermediate 2048 / 3072,
256 experts, top-6, 8..4096 tokens) and at small ones (FP4 and FP8 weights, masked shares, clamps, exact math, idle
experts, both BLOCK_Ms, shared experts, 0 tokens, the pool in the per-stream workspace), y rows past the tokens left
alone, against an independent float64 per-token loop on small cases, and under CUDA-graph capture."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import pytest
import torch

import deep_gemm
from deep_gemm.mega import layer as mega_layer
from deep_gemm.mega import reference as mega_ref
from deep_gemm.mega.api import fp8_fp4_mega_moe_op_args
from deep_gemm.testing import calc_diff
from deep_gemm.testing.mega_moe import fp8_fp4_buffer, fp8_fp4_weights, routing, run_fp8_fp4_mega_moe_kernels

from mega_moe_cases import (RingCase, assert_calls_repeat_bitwise, assert_graph_replay_matches_eager,
                            assert_public_call_agrees)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

# Kernel vs reference on the same quantised inputs: exact products, FP32 summation order, and the FP8 rounding of
# the intermediate (and its UE8M0 scale at a power-of-two boundary) that the order can flip.
SAME_INPUTS = 1e-3
# Against the float64 loop (no FP8 / BF16 rounding of the intermediate): DeepGEMM's tolerance.
INDEPENDENT = 0.01


@dataclass(frozen=True)
class Case(RingCase):
    fp4: bool = True  # FP4 weights (else FP8), both with UE8M0 scales per 32

    def _options(self) -> str:
        return f"{super()._options()}-{'fp4' if self.fp4 else 'fp8'}w"


MODEL = dict(experts=256, topk=6, clamp=10.0)
CASES = [
    # model sizes: decode to prefill-sized batches
    Case(8, hidden=7168, inter=2048, **MODEL), Case(128, hidden=7168, inter=2048, **MODEL),
    Case(4096, hidden=7168, inter=2048, **MODEL),
    Case(64, hidden=4096, inter=3072, **MODEL), Case(1000, hidden=4096, inter=3072, masked=0.2, **MODEL),
    Case(512, hidden=4096, inter=3072, fp4=False, **MODEL),
    # small: masks, clamps, fast math, idle experts, both tiles, FP8 weights, the pool outside the ring, zero tokens
    Case(24, experts=8, topk=2), Case(2048), Case(333, fp4=False),
    *[Case(256, masked=m) for m in (0.3, 1.0)],
    *[Case(100, clamp=c, fast_math=f) for c, f in ((1.0, True), (10.0, False), (math.inf, True))],
    Case(77, topk=1, idle=True), Case(1000, block_m=64), Case(40, block_m=128, fp4=False),
    Case(300, topk=6, ring=384), Case(0),
    # shared experts (DeepSeek: one of the routed experts' size): model sizes and small
    Case(256, hidden=7168, inter=2048, shared=1, **MODEL), Case(100, shared=2, clamp=10.0),
    Case(64, shared=1, masked=1.0), Case(90, shared=1, fp4=False),
]


_WEIGHTS: dict = {}


def _weights(experts: int, hidden: int, intermediate: int, fp4: bool):
    """(the raw ``[gate | up]`` pairs, the layer's (L1, L2)) of one model at a time: the previous model's weights are
    dropped before the next are drawn."""
    key = (experts, hidden, intermediate, fp4)
    if key not in _WEIGHTS:
        _WEIGHTS.clear()
        torch.cuda.empty_cache()
        raw = fp8_fp4_weights(experts, hidden, intermediate, "cuda", fp4=fp4)
        _WEIGHTS[key] = (raw, deep_gemm.transform_weights_for_mega_moe(*raw))
    return _WEIGHTS[key]


@functools.lru_cache(maxsize=4)
def _shared_weights(hidden: int, inter: int, shared: int, fp4: bool):
    """(the raw ``[gate | up]`` pairs ``[2 I_s, H]`` / ``[H, I_s]``, the layer's (L1, L2))."""
    (w1, s1), (w2, s2) = fp8_fp4_weights(1, hidden, inter * shared, "cuda", seed=11, fp4=fp4)
    raw = ((w1[0], s1[0]), (w2[0], s2[0]))
    return raw, deep_gemm.transform_weights_for_mega_moe(*raw)


def _fill(buf, x, idx, w, n):
    deep_gemm.mega_moe_pre_dispatch(x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, n)


def _layer(case: Case, seed: int = 0):
    _, (l1, l2) = _weights(case.experts, case.hidden, case.inter, case.fp4)
    x, idx, w = routing(case.tokens, case.experts, case.topk, "cuda", case.masked, case.idle, seed, hidden=case.hidden)
    bufs = [fp8_fp4_buffer(case.experts, max(case.tokens, 1), case.topk, case.hidden, case.inter, "cuda", case.ring)
            for _ in range(2)]
    for buf in bufs:
        _fill(buf, x, idx, w, case.tokens)
    return (l1, l2), (x, idx, w), bufs


def _run(case: Case, extra_rows: int = 0):
    """Kernels and reference on one case; ``y`` has ``extra_rows`` more rows than tokens (left alone by both: y is
    a view of the first rows of a larger tensor)."""
    (l1, l2), inputs, (buf_k, buf_r) = _layer(case)
    shared = {}
    if case.shared:
        _, (s1, s2) = _shared_weights(case.hidden, case.inter, case.shared, case.fp4)
        shared = dict(shared_l1_weights=s1, shared_l2_weights=s2)
    stats_k = torch.arange(case.experts, dtype=torch.int32, device="cuda") * 3
    stats_r = stats_k.clone()
    full_k = torch.full((case.tokens + extra_rows, case.hidden), 7.0, dtype=torch.bfloat16, device="cuda")
    full_r = full_k.clone()
    y_k, y_r = full_k[:case.tokens], full_r[:case.tokens]
    run_fp8_fp4_mega_moe_kernels(y_k, l1, l2, buf_k, stats_k, case.clamp, case.fast_math, case.block_m, **shared)
    mega_layer.fp8_fp4_mega_moe(*fp8_fp4_mega_moe_op_args(
        y_r, l1, l2, buf_r, cumulative_local_expert_recv_stats=stats_r, activation_clamp=case.clamp,
        fast_math=case.fast_math, **shared))
    torch.cuda.synchronize()
    return y_k, y_r, stats_k, stats_r, inputs, (full_k, full_r), buf_k


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_match_reference(case):
    y_k, y_r, stats_k, stats_r, (_, idx, _), _, _ = _run(case)
    assert torch.isfinite(y_k.float()).all()
    assert torch.equal(stats_k, stats_r)
    if case.tokens and (case.shared or bool((idx >= 0).any())):
        assert calc_diff(y_k, y_r) < SAME_INPUTS, calc_diff(y_k, y_r)
    if not case.shared:
        silent = (idx < 0).all(dim=1)  # tokens with every slot masked come out exactly zero
        assert not y_k[silent].any()


def test_rows_past_the_tokens_are_untouched():
    case = Case(37, topk=4, masked=0.2)
    _, _, _, _, _, (full_k, _), _ = _run(case, extra_rows=11)
    assert bool((full_k[case.tokens:] == 7.0).all())


def _float64_expectation(case, inputs, buf):
    _, idx, w = inputs
    ((w1, s1), (w2, s2)), _ = _weights(case.experts, case.hidden, case.inter, case.fp4)
    xd = mega_ref.tokens_to_float(buf.x[:case.tokens], buf.x_sf[:case.tokens], "mx").double()
    out = torch.zeros(case.tokens, case.hidden, dtype=torch.float64, device="cuda")

    def ffn(x, a, a_sf, b, b_sf, inter):
        h = x @ mega_ref.dequant_mx_weights(a, a_sf).double().t()
        gate, up = h[..., :inter], h[..., inter:]
        if case.clamp is not None:
            gate, up = gate.clamp(max=case.clamp), up.clamp(-case.clamp, case.clamp)
        return (gate * torch.sigmoid(gate) * up) @ mega_ref.dequant_mx_weights(b, b_sf).double().t()

    for t in range(case.tokens):
        for s in range(case.topk):
            e = int(idx[t, s])
            if e >= 0:
                out[t] += float(w[t, s]) * ffn(xd[t:t + 1], w1[e], s1[e], w2[e], s2[e], case.inter)[0]
    if case.shared:
        ((a, a_sf), (b, b_sf)), _ = _shared_weights(case.hidden, case.inter, case.shared, case.fp4)
        out += ffn(xd, a, a_sf, b, b_sf, case.inter * case.shared)
    return out


@pytest.mark.parametrize("case", [Case(24, experts=8, topk=2), Case(40, hidden=2048, inter=512, topk=6, clamp=10.0),
                                  Case(33, masked=0.3, block_m=128, fp4=False), Case(20, shared=2, clamp=10.0)],
                         ids=str)
def test_kernels_match_float64_loop(case):
    y_k, _, _, _, inputs, _, buf = _run(case)
    assert calc_diff(y_k, _float64_expectation(case, inputs, buf)) < INDEPENDENT


def test_workspace_is_left_zero_and_calls_repeat():
    case = Case(300, topk=6)
    (l1, l2), _, (buf, _) = _layer(case)
    assert_calls_repeat_bitwise(lambda y: run_fp8_fp4_mega_moe_kernels(y, l1, l2, buf), case.tokens, case.hidden)


@pytest.mark.parametrize("ring", [None, 384], ids=["pool-in-ring", "pool-in-stream-workspace"])
def test_cuda_graph_capture_and_replay(ring):
    # The pre-dispatch (the reference on CUDA, which synchronises) fills the buffers outside the graph: the graph
    # reads the buffer's input views, into which the fresh pre-dispatched inputs are copied before the replay.
    case = Case(128, topk=4, clamp=10.0, ring=ring)
    (l1, l2), _, (buf, fresh_buf) = _layer(case)
    _fill(fresh_buf, *routing(case.tokens, case.experts, case.topk, "cuda", seed=5, hidden=case.hidden), case.tokens)
    y = torch.empty(case.tokens, case.hidden, dtype=torch.bfloat16, device="cuda")

    def step():
        run_fp8_fp4_mega_moe_kernels(y, l1, l2, buf, activation_clamp=case.clamp)

    inputs = lambda b: (b.x, b.x_sf, b.topk_idx, b.topk_weights)  # noqa: E731
    assert_graph_replay_matches_eager(step, y, inputs(buf), [t.clone() for t in inputs(fresh_buf)])


def test_public_call_agrees_with_the_kernels():
    """Without MegaOverrides(kernels=True) the public call agrees with the kernels (it runs them by default; the
    reference, should their key await a GPU run)."""
    case = Case(50, topk=4)
    (l1, l2), _, (buf_k, buf_r) = _layer(case)
    assert_public_call_agrees(lambda y: run_fp8_fp4_mega_moe_kernels(y, l1, l2, buf_k),
                              lambda y: deep_gemm.fp8_fp4_mega_moe(y, l1, l2, buf_r),
                              case.tokens, case.hidden, SAME_INPUTS)
