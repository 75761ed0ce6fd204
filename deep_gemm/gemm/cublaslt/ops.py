"""Registers the vendor-BLAS GEMM ops ``cublaslt_gemm_{nt,nn,tn,tt}``: one check, one reference and one CUDA launcher
(``cublaslt.py``: cuBLAS through torch) per op.

They only write their ``d`` argument, so no fake kernel is needed (the check still runs under FakeTensorMode).
"""

from __future__ import annotations

from ...core import arch
from ...core.registry import register
from ..bf16 import checks
from ..bf16 import reference as ref
from . import api as cublaslt

# cuBLAS runs on every GPU torch supports; its FP8 GEMM (torch._scaled_mm) needs sm_89.
_ARCH = arch.OpArch(min_sm=0, reference_below=((arch.MIN_FP8_SM, "the reference for FP8 below sm_89"),))

for _layout in ("nt", "nn", "tn", "tt"):
    register(f"cublaslt_gemm_{_layout}", check=checks.make_cublaslt_check(_layout),
             reference=ref.make_dense_reference(f"cublaslt_gemm_{_layout}", _layout),
             triton=cublaslt.LAUNCHERS[_layout],
             triton_note="cuBLAS(Lt) through torch; the reference for FP8 with K or N not a multiple of 16",
             arch=_ARCH)
