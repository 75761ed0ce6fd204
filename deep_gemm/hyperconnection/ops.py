"""Registers ``tf32_hc_prenorm_gemm``: its check, its reference and (later) its Triton launcher."""

from __future__ import annotations

from .._ops.library import register
from .checks import check_tf32_hc_prenorm_gemm
from .reference import tf32_hc_prenorm_gemm_reference

# The CUDA launcher once it exists (a function whose module imports no Triton at import time); None = the reference
# runs on CUDA.
_TRITON = None

# Writes d and sqr_sum in place and returns nothing: no fake kernel needed.
register("tf32_hc_prenorm_gemm", check=check_tf32_hc_prenorm_gemm, reference=tf32_hc_prenorm_gemm_reference,
         triton=_TRITON)
