"""Registers ``k_grouped_fp4_gemm_nt_contiguous`` and ``cublaslt_nvfp4_gemm_nt``. No Triton kernel yet: on CUDA
the torch reference runs on the device (DeepGEMM runs both only on SM100; ``deep_gemm.backends()`` reports
'reference')."""

from __future__ import annotations

from ...core.registry import register
from .checks import check_cublaslt_nvfp4_gemm_nt, check_k_grouped_fp4_gemm_nt_contiguous
from .reference import cublaslt_nvfp4_gemm_nt_reference, k_grouped_fp4_gemm_nt_contiguous_reference

# Both write d in place and return nothing: no fake kernel needed.
register("k_grouped_fp4_gemm_nt_contiguous", check=check_k_grouped_fp4_gemm_nt_contiguous,
         reference=k_grouped_fp4_gemm_nt_contiguous_reference)
register("cublaslt_nvfp4_gemm_nt", check=check_cublaslt_nvfp4_gemm_nt, reference=cublaslt_nvfp4_gemm_nt_reference)
