"""The ``mega_mhc`` Triton kernels (``deep_gemm/mega_mhc/kernels.py``) in Triton's interpreter on CPU against the
op's reference, with the tolerance rules of ``deep_gemm/testing/mega_mhc.py``: odd and zero token counts, both
token blocks, several hidden splits, normal and shifted mode, every output form (BF16 only, FP8 with the GEMM
scales, FP8 with routed + shared-expert scales, FP8 only), several hidden sizes; and the plan.

The GPU runs of the same kernels are in test_mega_mhc_gpu.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pytest
import torch

import deep_gemm
from deep_gemm.mega_mhc import plan as mhc_plan
from deep_gemm.testing.mega_mhc import compare, make_inputs, make_outputs, run_kernels
import interpreter_bf16  # noqa: F401  (torch-exact fp32 -> bf16 / fp8 casts in the interpreter)
from triton_harness import DEVICE


@dataclass(frozen=True)
class Case:
    tokens: int
    hidden: int = 1024
    shifted: bool = False
    fp8: Optional[str] = None      # None, "gemm", "routed" (routed + shared-expert scales)
    block_m: int = 3               # shared-expert scale block rows
    block_t: Optional[int] = None
    splits: Optional[int] = None
    grid_inputs: bool = False

    def __str__(self):
        return (f"t{self.tokens}-h{self.hidden}-{'shifted' if self.shifted else 'normal'}-{self.fp8}"
                f"{f'-m{self.block_m}' if self.fp8 == 'routed' else ''}-bt{self.block_t}-s{self.splits}"
                f"{'-grid' if self.grid_inputs else ''}")


CASES = [
    Case(1, fp8="gemm"),                                              # decode: one token, splits by the plan
    Case(5, shifted=True, fp8="routed", splits=32),                   # one hidden block per split
    Case(17, hidden=2048, fp8="routed", block_m=40, block_t=16, splits=3),   # two token blocks, uneven splits
    Case(3, hidden=3072, shifted=True, splits=5),                     # W = 24 scale words (not a power of two)
    Case(20, fp8="gemm", splits=2),                                   # 32-row token block, masked rows
    Case(7, shifted=True, fp8="gemm", splits=4, grid_inputs=True),    # exact post-mix sums: bit for bit
]


def _run(case: Case, seed: int = 0, bf16: bool = True):
    d = make_inputs(case.tokens, case.hidden, case.shifted, seed=seed, device=DEVICE, grid_inputs=case.grid_inputs)
    out = make_outputs(d, case.fp8, bf16, case.block_m)
    run_kernels(d, out, mhc_plan.MhcOverrides(case.block_t, case.splits, kernels=True))
    return d, out


def _cpu(x):
    return {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in x.items()}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_match_reference(case):
    d, out = _run(case, seed=case.tokens + case.hidden)
    compare(_cpu(d), _cpu(out), case.fp8, case.block_m, exact_residual=case.grid_inputs)


def test_fp8_only_matches_the_full_call_bitwise():
    case = Case(3, shifted=True, fp8="routed", splits=2)
    _, full = _run(case, seed=4)
    _, fp8_only = _run(case, seed=4, bf16=False)
    for key in ("new_residual", "new_post_mix", "new_comb_res_mix", "new_prev_mix", "y_routed_sf", "_storage"):
        assert torch.equal(full[key], fp8_only[key]), key
    assert torch.equal(full["y_fp8"].view(torch.uint8), fp8_only["y_fp8"].view(torch.uint8))


def test_zero_tokens_launch_nothing():
    d = make_inputs(0, 1024, False, device=DEVICE)
    out = make_outputs(d, "gemm")
    run_kernels(d, out)


def test_plan():
    # decode: 16-row blocks, hidden cut into splits for two programs per SM (capped by the hidden blocks)
    assert mhc_plan.plan(1, 7168, 132) == mhc_plan.MhcConfig(16, 64, 8192, 8)
    assert mhc_plan.plan(1, 4096, 132).splits == 64
    assert mhc_plan.plan(16, 1024, 132).splits == 32
    # prefill: 64-row blocks; enough of them need no split
    assert mhc_plan.plan(8192, 7168, 132) == mhc_plan.MhcConfig(32, 2, 8192, 8)
    assert mhc_plan.plan(100_000, 4096, 132).splits == 1
    assert mhc_plan.plan(8192, 4096, 132).norm_warps == 4
    assert mhc_plan.plan(1, mhc_plan.MAX_NORM_HIDDEN, 132).norm_warps == mhc_plan.MAX_NORM_WARPS
    assert not mhc_plan.supported_hidden(mhc_plan.MAX_NORM_HIDDEN + 1024)
    assert mhc_plan.plan(5, 1024, 132, mhc_plan.MhcOverrides(32, 7)).block_t == 32
    with pytest.raises(deep_gemm.DeepGEMMError, match="MhcOverrides.block_t"):
        mhc_plan.plan(5, 1024, 132, mhc_plan.MhcOverrides(block_t=64))
    with pytest.raises(deep_gemm.DeepGEMMError, match="MhcOverrides.splits"):
        mhc_plan.plan(5, 1024, 132, mhc_plan.MhcOverrides(splits=33))
