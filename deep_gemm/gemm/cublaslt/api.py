"""CUDA launchers of ``cublaslt_gemm_{nt,nn,tn,tt}``: the vendor BLAS (cuBLAS / cuBLASLt), called through torch.

The op's contract is "what cuBLASLt computes", so on CUDA it is cuBLAS, not a Triton kernel: ``D = C + A @ B.T`` with
FP32 accumulation, written straight into ``d`` (torch's ``*.out`` / in-place forms hand ``d`` and its row stride to
cuBLAS; nothing is copied for row-major D):

* A and B of D's dtype (BF16, FP16, FP32): ``torch.mm(out=d)``; with C, ``addmm`` with beta = 1 (``c is d``: in place,
  cuBLAS reads C from D; a distinct C is first copied into D by torch, as DeepGEMM does).
* BF16/FP16 A and B into an FP32 D: the same calls with ``out_dtype=torch.float32`` (``aten::mm.dtype_out`` /
  ``aten::addmm.dtype_out``, cuBLAS with FP32 output; absent in old torch builds: the reference then runs).
* FP8 (e4m3) A and B: ``torch._scaled_mm`` with unit tensor-wise scales (the raw FP8 values are multiplied, as
  DeepGEMM's benchmarks time cuBLASLt on FP8 data), fast accumulation off. cuBLASLt's FP8 GEMM needs A row-major
  and B column-major with K and N multiples of 16, and a device with FP8 MMAs (sm_89 and later); other FP8 calls
  run the reference. C (which ``_scaled_mm`` cannot take) is added by one extra pass over D.

Every call returns ``NotImplemented`` for what it does not cover (the op then runs its torch reference on the GPU).
No host sync, no host read of device tensors: capturable in CUDA graphs.
"""

from __future__ import annotations

import threading

import torch

from ...core import arch
from ...core.scratch import capturing
from ...common.operands import FP8, to_nt, torch_matmul_into

_HALF = (torch.bfloat16, torch.float16)
# Unit FP32 scales for _scaled_mm, kept per device (made outside graph capture; see _unit_scale).
_UNIT_SCALES: dict = {}
_UNIT_SCALES_LOCK = threading.Lock()


def _has_out_dtype_overloads() -> bool:
    try:
        return hasattr(torch.ops.aten.mm, "dtype_out") and hasattr(torch.ops.aten.addmm, "dtype_out")
    except (AttributeError, RuntimeError):
        return False


_OUT_DTYPE = _has_out_dtype_overloads()


def _unit_scale(d: torch.Tensor) -> torch.Tensor:
    """A one-element FP32 tensor holding 1.0 on d's device. During graph capture a new one is made (its fill is
    captured with the graph); a tensor filled inside a capture would hold garbage outside replays, so only tensors
    made outside capture are kept."""
    scale = _UNIT_SCALES.get(d.get_device())
    if scale is None and capturing(d):
        return torch.ones((), dtype=torch.float32, device=d.device)
    if scale is None:
        with _UNIT_SCALES_LOCK:
            scale = _UNIT_SCALES.setdefault(d.get_device(), torch.ones((), dtype=torch.float32, device=d.device))
    return scale


def _fp8_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c):
    """D = C + A @ B.T for FP8 A [M, K] row-major and B [N, K] row-major (B.T column-major), through _scaled_mm."""
    m, k = a.shape
    n = b.size(0)
    if a.stride(1) != 1 or b.stride(1) != 1 or k % 16 or n % 16 or k == 0:
        return NotImplemented
    if not arch.has_fp8_mma(arch.sm_of_tensor(d)):
        return NotImplemented  # (cuBLASLt's FP8 GEMM: sm_89 and later)
    one = _unit_scale(d)
    if c is None and d.stride(1) == 1 and d.stride(0) == n:
        torch._scaled_mm(a, b.t(), one, one, out_dtype=d.dtype, use_fast_accum=False, out=d)
        return None
    product = torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.float32, use_fast_accum=False)
    if c is None:
        d.copy_(product)
    else:
        torch.add(c, product, out=d)  # FP32 sum, one rounding to d's dtype
    return None


def _make(layout: str):
    def cublaslt_gemm(a, b, d, c):
        a, _, b, _ = to_nt(layout, a, None, b, None)
        m, n = d.shape
        if m == 0 or n == 0:
            return None
        if a.dtype == FP8:
            return _fp8_gemm(a, b, d, c)
        fp32_out = a.dtype in _HALF and d.dtype == torch.float32 and _OUT_DTYPE
        if a.dtype != d.dtype and not fp32_out:
            return NotImplemented
        torch_matmul_into(a, b.t(), d, c, fp32_out)
        return None

    cublaslt_gemm.__name__ = f"cublaslt_gemm_{layout}"
    return cublaslt_gemm


cublaslt_gemm_nt = _make("nt")
cublaslt_gemm_nn = _make("nn")
cublaslt_gemm_tn = _make("tn")
cublaslt_gemm_tt = _make("tt")
LAUNCHERS = {"nt": cublaslt_gemm_nt, "nn": cublaslt_gemm_nn, "tn": cublaslt_gemm_tn, "tt": cublaslt_gemm_tt}
