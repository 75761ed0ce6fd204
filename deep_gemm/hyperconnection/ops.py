"""Registers ``tf32_hc_prenorm_gemm``: its check, its reference and its Triton launcher."""

from __future__ import annotations

from ..core.registry import register
from .checks import check_tf32_hc_prenorm_gemm
from .launch import tf32_hc_prenorm_gemm as _launcher
from .reference import tf32_hc_prenorm_gemm_reference

# Writes d and sqr_sum in place and returns nothing: no fake kernel needed.
register("tf32_hc_prenorm_gemm", check=check_tf32_hc_prenorm_gemm, reference=tf32_hc_prenorm_gemm_reference,
         triton=_launcher)
