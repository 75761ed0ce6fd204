"""The ``mega_mhc`` Triton kernels on a GPU against the torch reference run on the same GPU, at DeepSeek V4's
shapes (hidden 4096 and 7168, 1 to 8192 tokens, normal and shifted mHC, every output form), with the tolerance rules
of ``deep_gemm/testing/mega_mhc.py``; forced token blocks and hidden splits; bit-identical repeats; CUDA-graph
capture."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pytest
import torch

from deep_gemm.mega_mhc import plan as mhc_plan
from deep_gemm.testing.mega_mhc import compare, make_inputs, make_outputs, run_kernels

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

DEV = "cuda"


@dataclass(frozen=True)
class Case:
    tokens: int
    hidden: int = 7168
    shifted: bool = False
    fp8: Optional[str] = "gemm"     # None, "gemm", "routed" (routed + shared-expert scales)
    bf16: bool = True
    block_m: int = 192              # Mega MoE's shared-expert block rows
    block_t: Optional[int] = None
    splits: Optional[int] = None
    sinkhorn_iters: int = 20        # DeepSeek V4's

    def __str__(self):
        return (f"t{self.tokens}-h{self.hidden}-{'shifted' if self.shifted else 'normal'}-{self.fp8}"
                f"{'' if self.bf16 else '-fp8only'}{f'-m{self.block_m}' if self.fp8 == 'routed' else ''}"
                f"{f'-bt{self.block_t}' if self.block_t else ''}{f'-s{self.splits}' if self.splits else ''}")


CASES = [
    # decode and prefill token counts at both hidden sizes, both modes
    *[Case(t, h, shifted) for h in (4096, 7168) for t in (1, 2, 7, 16, 17, 64, 333, 1024, 4096, 8192)
      for shifted in (False, True)],
    # the other output forms
    Case(5, fp8=None), Case(300, 4096, fp8=None, shifted=True),
    Case(3, fp8="routed", shifted=True), Case(500, 4096, fp8="routed"), Case(1000, fp8="routed", block_m=64),
    Case(130, fp8="routed", block_m=128, shifted=True),
    # forced token blocks and splits (the plan's other choices)
    Case(100, block_t=16, splits=7), Case(9, block_t=32, splits=1), Case(2048, 4096, splits=32, shifted=True),
    # sizes beyond DeepSeek's: the smallest hidden, the largest the kernels take
    Case(37, 1024, fp8="routed", block_m=3), Case(20, mhc_plan.MAX_NORM_HIDDEN, shifted=True),
]


def _run(case: Case, seed: int = 0):
    d = make_inputs(case.tokens, case.hidden, case.shifted, seed=seed, device=DEV,
                    sinkhorn_iters=case.sinkhorn_iters)
    out = make_outputs(d, case.fp8, case.bf16, case.block_m)
    run_kernels(d, out, mhc_plan.MhcOverrides(case.block_t, case.splits, kernels=True))
    return d, out


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_match_reference(case):
    d, out = _run(case, seed=case.tokens + case.hidden)
    torch.cuda.synchronize()
    compare(d, out, case.fp8, case.block_m)


def test_fp8_only_and_repeats_are_bit_identical():
    case = Case(77, fp8="routed", shifted=True)
    _, first = _run(case, seed=3)
    _, again = _run(case, seed=3)
    _, fp8_only = _run(Case(77, fp8="routed", shifted=True, bf16=False), seed=3)
    for key in ("new_residual", "new_post_mix", "new_comb_res_mix", "new_prev_mix", "y_bf16", "y_routed_sf",
                "_storage"):
        assert torch.equal(first[key], again[key]), key
        if key != "y_bf16":
            assert torch.equal(first[key], fp8_only[key]), key
    for other in (again, fp8_only):
        assert torch.equal(first["y_fp8"].view(torch.uint8), other["y_fp8"].view(torch.uint8))


@pytest.mark.parametrize("tokens", (1, 256))
def test_cuda_graph_replay(tokens):
    d = make_inputs(tokens, 4096, True, seed=5, device=DEV)
    out = make_outputs(d, "gemm")
    eager = make_outputs(d, "gemm")
    run_kernels(d, eager)
    run_kernels(d, out)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_kernels(d, out)
    for key in ("new_residual", "new_post_mix", "new_comb_res_mix", "new_prev_mix", "y_bf16", "y_fp8"):
        out[key].view(torch.uint8).zero_()  # (what the replay must write again)
    graph.replay()
    torch.cuda.synchronize()
    for key, value in eager.items():
        if isinstance(value, torch.Tensor):
            got, want = out[key], value
            if got.dtype == torch.float8_e4m3fn:
                got, want = got.view(torch.uint8), want.view(torch.uint8)
            assert torch.equal(got, want), key
