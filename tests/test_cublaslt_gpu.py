"""cublaslt_gemm_{nt,nn,tn,tt} on the GPU: BF16 into FP32, exactly torch's own cuBLAS call (bit-identical output),
FP8 against _scaled_mm, CUDA-graph capture and torch.compile(fullgraph=True) through the dispatcher. Skipped without
CUDA."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.testing import assert_bitwise_equal, calc_diff

from bf16_inputs import output_and_accumulator  # noqa: E402
from test_cublaslt_cpu import FP8, LAYOUTS, _on_device, _on_device_pair, operands

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_into_fp32_on_gpu(layout, accumulate):
    m, n, k = 129, 4096, 7168
    a, b, a64, b64 = operands(layout, m, n, k, torch.bfloat16)
    d, c, c_value = output_and_accumulator((m, n), torch.float32, accumulate)
    d, c = _on_device_pair(d, c, accumulate)
    getattr(deep_gemm, f"cublaslt_gemm_{layout}")(a, b, d, c=c)
    assert calc_diff(d, _on_device(c_value) + a64 @ b64.T) < 6e-7  # DeepGEMM's bound for cuBLASLt


def test_is_torchs_own_cublas_call():
    # The wrapper adds nothing to the GEMM: bit-identical to calling torch directly.
    a, b, _, _ = operands("nt", 4096, 2112, 7168, torch.bfloat16)
    d = torch.empty(4096, 2112, dtype=torch.bfloat16, device="cuda")
    deep_gemm.cublaslt_gemm_nt(a, b, d)
    assert_bitwise_equal(d, torch.mm(a, b.t()), "cublaslt_gemm_nt vs torch.mm")
    d.normal_()
    expected = torch.addmm(d, a, b.t())
    deep_gemm.cublaslt_gemm_nt(a, b, d, c=d)  # beta = 1 in place
    assert_bitwise_equal(d, expected, "cublaslt_gemm_nt(c=d) vs torch.addmm")
    assert deep_gemm.backends()["cublaslt_gemm_nt"].startswith("triton")


def test_fp8_on_gpu_matches_scaled_mm():
    a, b, a64, b64 = operands("nt", 256, 512, 1024, FP8)
    d = torch.empty(256, 512, dtype=torch.bfloat16, device="cuda")
    deep_gemm.cublaslt_gemm_nt(a, b, d)
    one = torch.ones((), device="cuda")
    assert_bitwise_equal(d, torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16), "vs _scaled_mm")
    assert calc_diff(d, a64 @ b64.T) < 1e-5


def test_cuda_graph_and_compile():
    a, b, a64, b64 = operands("nt", 128, 256, 512, torch.bfloat16)
    d = torch.zeros(128, 256, device="cuda")
    fp8_a, fp8_b, f64_a, f64_b = operands("nt", 64, 128, 256, FP8)
    d8 = torch.zeros(64, 128, dtype=torch.bfloat16, device="cuda")
    deep_gemm.cublaslt_gemm_nt(a, b, d, c=d)  # warm-up outside capture (cuBLAS handles, unit scales)
    deep_gemm.cublaslt_gemm_nt(fp8_a, fp8_b, d8)
    d.zero_()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.cublaslt_gemm_nt(a, b, d, c=d)
        deep_gemm.cublaslt_gemm_nt(fp8_a, fp8_b, d8)
    d.zero_()
    for replay in range(1, 3):
        graph.replay()
        torch.cuda.synchronize()
        assert calc_diff(d, replay * (a64 @ b64.T)) < 6e-7
        assert calc_diff(d8, f64_a @ f64_b.T) < 1e-5

    @torch.compile(fullgraph=True)
    def f(a, b, d):
        torch.ops.deep_gemm.cublaslt_gemm_nt(a, b, d)
        return d * 2

    out = f(a, b, torch.empty(128, 256, device="cuda"))
    assert calc_diff(out, 2 * (a64 @ b64.T)) < 6e-7


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_batched_syrk_symm_on_cublas(dtype):
    """batched_syrk / batched_symm run cuBLAS through torch on CUDA (as DeepGEMM runs cuBLASLt), against FP64."""
    a = torch.randn(3, 65, 129, device="cuda").to(dtype)
    sym = torch.randn(3, 65, 65, device="cuda")
    sym = (sym + sym.mT).to(dtype)
    b = torch.randn(3, 65, 33, device="cuda").to(dtype)
    d = torch.empty(3, 65, 65, device="cuda", dtype=dtype)
    e = torch.empty(3, 33, 65, device="cuda", dtype=dtype).mT  # column-major output
    deep_gemm.batched_syrk(a, d)
    deep_gemm.batched_symm(sym, b, e)
    tol = 1e-6 if dtype == torch.float32 else 1e-4
    assert calc_diff(d, a.double() @ a.double().mT) < tol
    assert calc_diff(e, sym.double() @ b.double()) < tol
    assert deep_gemm.backends()["batched_syrk"].startswith("triton (cuBLAS")
