"""Registers the BF16 GEMM ops: one check, one reference and one Triton launcher per op (the cuBLASLt ops live in
``cublaslt_ops``).

They only write their ``d`` argument, so no fake kernel is needed (the check still runs under FakeTensorMode).
"""

from __future__ import annotations

from ...core import arch
from ...core.registry import register, set_data_check
from .. import grouped_checks
from . import checks
from . import launch as launchers  # (imports no Triton: the kernel loads at the first launch)
from . import reference as ref

_M_GROUPED_NOTE = ("reference for K == 0, an M alignment no tile height (64, 128) divides, and an MN-major B whose K "
                   "no K block (16-64) divides")

# BF16 MMAs from sm_80 on; the warp-specialised kernel on sm_90a only (bf16_plan._ws_runs).
_ARCH = arch.BF16_OPS_WITH_SM90_KERNELS

for _layout in ("nt", "nn", "tn", "tt"):
    register(f"bf16_gemm_{_layout}", check=checks.make_dense_check(_layout),
             reference=ref.make_dense_reference(f"bf16_gemm_{_layout}", _layout),
             triton=getattr(launchers, f"bf16_gemm_{_layout}"), arch=_ARCH)

for _layout in ("nt", "nn"):
    register(f"m_grouped_bf16_gemm_{_layout}_contiguous", check=checks.make_m_grouped_contiguous_check(_layout),
             reference=ref.make_m_grouped_contiguous_reference(_layout),
             triton=getattr(launchers, f"m_grouped_bf16_gemm_{_layout}_contiguous"), triton_note=_M_GROUPED_NOTE,
             arch=_ARCH)

register("m_grouped_bf16_gemm_nt_masked", check=checks.check_m_grouped_bf16_gemm_nt_masked,
         reference=ref.m_grouped_bf16_gemm_nt_masked_reference, triton=launchers.m_grouped_bf16_gemm_nt_masked,
         triton_note="reference for K == 0 and an MN-major B whose K no K block (16-64) divides", arch=_ARCH)

register("k_grouped_bf16_gemm_tn_contiguous", check=checks.check_k_grouped_bf16_gemm_tn_contiguous,
         reference=ref.k_grouped_bf16_gemm_tn_contiguous_reference,
         triton=launchers.k_grouped_bf16_gemm_tn_contiguous,
         triton_note="reference for the psum layout and K sizes no K block (16-64) divides", arch=_ARCH)

# Data checks (values of the index tensors): always on the CPU, on CUDA in the checked mode (core/checks_mode.py).
for _layout in ("nt", "nn"):
    set_data_check(f"m_grouped_bf16_gemm_{_layout}_contiguous", grouped_checks.check_data_m_grouped_contiguous)
set_data_check("m_grouped_bf16_gemm_nt_masked", grouped_checks.check_data_m_grouped_masked)
set_data_check("k_grouped_bf16_gemm_tn_contiguous", grouped_checks.check_data_k_grouped_tn)
