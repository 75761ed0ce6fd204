"""Registers ``k_grouped_fp4_gemm_nt_contiguous`` and ``cublaslt_nvfp4_gemm_nt``: check, reference and the
dequantising Triton launcher (``launch.py``; BF16 MMAs, so sm_80 and later), and the K-grouped GEMM's data check
(its K sizes or psum ends: always on the CPU, on CUDA in the checked mode)."""

from __future__ import annotations

from ...core import arch, gpu_validation
from ...core.registry import register, set_data_check
from ..grouped_checks import check_data_k_grouped_packed_nt
from . import launch as launchers  # (imports no Triton: its kernel loads at the first launch)
from .checks import check_cublaslt_nvfp4_gemm_nt, check_k_grouped_fp4_gemm_nt_contiguous
from .plan import FAMILY
from .reference import cublaslt_nvfp4_gemm_nt_reference, k_grouped_fp4_gemm_nt_contiguous_reference

# Both write d in place and return nothing: no fake kernel needed.
register("k_grouped_fp4_gemm_nt_contiguous", check=check_k_grouped_fp4_gemm_nt_contiguous,
         reference=k_grouped_fp4_gemm_nt_contiguous_reference, triton=launchers.k_grouped_fp4_gemm_nt_contiguous,
         arch=arch.ANY_MMA, triton_note=gpu_validation.opt_in_note(FAMILY))
register("cublaslt_nvfp4_gemm_nt", check=check_cublaslt_nvfp4_gemm_nt, reference=cublaslt_nvfp4_gemm_nt_reference,
         triton=launchers.cublaslt_nvfp4_gemm_nt, arch=arch.ANY_MMA,
         triton_note=gpu_validation.opt_in_note(FAMILY, "reference for a c that is not row-major"))
set_data_check("k_grouped_fp4_gemm_nt_contiguous", check_data_k_grouped_packed_nt)
