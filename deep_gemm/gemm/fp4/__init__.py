"""FP4 GEMM names of DeepGEMM's later API: the ``fp4_*`` aliases of the FP8 x FP4 GEMMs, the K-grouped FP4
weight-gradient GEMM (``k_grouped_fp4_gemm_nt_contiguous``) and the NVFP4 vendor-BLAS GEMM
(``cublaslt_nvfp4_gemm_nt``)."""

from . import ops  # noqa: F401  (registers the ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
