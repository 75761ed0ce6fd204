"""cublaslt_gemm_{nt,nn,tn,tt}: the CUDA launchers (gemm/cublaslt/api.py: cuBLAS through torch) against a float64
product, every layout, output dtype, accumulation form (none, c is d, distinct c) and FP8 operands.

On CPU the launchers run directly on CPU tensors (torch.mm / addmm / _scaled_mm exist there, except the
BF16 -> FP32 ``out_dtype`` overloads, which are CUDA-only: those cases are in test_cublaslt_gpu.py, with the checks
that the launcher is exactly torch's own call, capturable in a CUDA graph and compiled with torch.compile).
"""

from __future__ import annotations

import pytest
import torch

from deep_gemm.gemm.cublaslt import api as cublaslt
from deep_gemm.gemm.bf16.checks import make_cublaslt_check
from deep_gemm.testing import assert_bitwise_equal, calc_diff

from bf16_inputs import output_and_accumulator  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FP8 = torch.float8_e4m3fn
LAYOUTS = ("nt", "nn", "tn", "tt")


def operands(layout: str, m: int, n: int, k: int, dtype: torch.dtype):
    """A and B as the ``<layout>`` call takes them (A [M, K] or [K, M], B [N, K] or [K, N]) and their float64 NT
    values."""
    a = torch.randn(m, k, device=DEVICE).to(dtype)
    b = torch.randn(n, k, device=DEVICE).to(dtype)
    a_arg = a.t().contiguous() if layout[0] == "t" else a
    b_arg = b.t().contiguous() if layout[1] == "n" else b
    return a_arg, b_arg, a.double(), b.double()


def run_launcher(layout, a, b, d, c):
    make_cublaslt_check(layout)(a, b, d, c)
    return cublaslt.LAUNCHERS[layout](a, b, d, c)


def _on_device_pair(d, c, accumulate: str):
    """d and c moved to DEVICE, c staying d itself when it was."""
    d = d.to(DEVICE)
    return d, (None if c is None else (d if accumulate == "d" else c.to(DEVICE)))


def _on_device(value):
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def bound(d: torch.Tensor, fp8: bool = False) -> float:
    """calc_diff bound against float64: one rounding to a 16-bit D; FP32 sums otherwise, except FP8 operands, which
    cuBLASLt's tensor cores accumulate in reduced precision between promotions (measured ~8e-9 on the H200 at
    K = 128; DeepGEMM's bound for cuBLASLt is 6e-7)."""
    if d.dtype in (torch.bfloat16, torch.float16):
        return 1e-5
    return 6e-7 if fp8 else 1e-10


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_same_dtype_matches_float64(layout, dtype, accumulate):
    m, n, k = 37, 72, 160
    a, b, a64, b64 = operands(layout, m, n, k, dtype)
    d, c, c_value = output_and_accumulator((m, n), dtype, accumulate)
    d, c = _on_device_pair(d, c, accumulate)
    assert run_launcher(layout, a, b, d, c) is None
    assert calc_diff(d, _on_device(c_value) + a64 @ b64.T) < bound(d)


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_fp8_operands_match_float64(layout, out_dtype, accumulate):
    m, n, k = 40, 48, 128
    a, b, a64, b64 = operands(layout, m, n, k, FP8)
    d, c, c_value = output_and_accumulator((m, n), out_dtype, accumulate)
    d, c = _on_device_pair(d, c, accumulate)
    result = run_launcher(layout, a, b, d, c)
    if layout != "nt":
        assert result is NotImplemented  # cuBLASLt's FP8 GEMM wants A row-major and B column-major
        return
    assert result is None
    assert calc_diff(d, _on_device(c_value) + a64 @ b64.T) < bound(d, fp8=True)


def test_fp8_shapes_cublaslt_cannot_take_run_the_reference():
    a, b, _, _ = operands("nt", 16, 40, 100, FP8)  # K and N not multiples of 16
    d = torch.empty(16, 40, device=DEVICE)
    assert run_launcher("nt", a, b, d, None) is NotImplemented


def test_empty_problems_write_nothing_or_c():
    a, b, _, _ = operands("nt", 0, 16, 32, torch.bfloat16)
    d = torch.empty(0, 16, dtype=torch.bfloat16, device=DEVICE)
    assert run_launcher("nt", a, b, d, None) is None
    a, b, _, _ = operands("nt", 8, 16, 0, torch.bfloat16)
    d = torch.full((8, 16), 3.0, dtype=torch.bfloat16, device=DEVICE)
    c = torch.randn(8, 16, device=DEVICE).bfloat16()
    assert run_launcher("nt", a, b, d, c) is None
    assert_bitwise_equal(d, c, "K == 0: d = c")


def test_output_with_row_padding_is_written_in_place():
    a, b, a64, b64 = operands("nt", 24, 40, 64, torch.bfloat16)
    buffer = torch.zeros(24, 48, dtype=torch.bfloat16, device=DEVICE)
    d = buffer[:, :40]
    assert run_launcher("nt", a, b, d, None) is None
    assert calc_diff(d, a64 @ b64.T) < 1e-5
    assert torch.count_nonzero(buffer[:, 40:]) == 0
