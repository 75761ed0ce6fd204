"""Registers the BF16 GEMM ops: one check and one reference per op (the cuBLASLt ops live in ``cublaslt_ops``).

They only write their ``d`` argument, so no fake kernel is needed (the check still runs under FakeTensorMode).
"""

from __future__ import annotations

from .._ops.library import register
from . import bf16_checks as checks
from . import bf16_reference as ref

for _layout in ("nt", "nn", "tn", "tt"):
    register(f"bf16_gemm_{_layout}", check=checks.make_dense_check(_layout),
             reference=ref.make_dense_reference(f"bf16_gemm_{_layout}", _layout))

for _layout in ("nt", "nn"):
    register(f"m_grouped_bf16_gemm_{_layout}_contiguous", check=checks.make_m_grouped_contiguous_check(_layout),
             reference=ref.make_m_grouped_contiguous_reference(_layout))

register("m_grouped_bf16_gemm_nt_masked", check=checks.check_m_grouped_bf16_gemm_nt_masked,
         reference=ref.m_grouped_bf16_gemm_nt_masked_reference)

register("k_grouped_bf16_gemm_tn_contiguous", check=checks.check_k_grouped_bf16_gemm_tn_contiguous,
         reference=ref.k_grouped_bf16_gemm_tn_contiguous_reference)
