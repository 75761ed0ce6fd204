"""Registers the FP8 GEMM ops: one check, one reference, and (where it exists) one Triton launcher per op."""

from __future__ import annotations

from ...core import arch, gpu_validation
from ...core.registry import register, set_data_check
from .. import grouped_checks
from . import checks
from . import launch as launchers  # (imports no Triton: its kernels load at the first launch)
from . import reference as ref

_NOT_COVERED = "reference for FP4 operands, int32 UE8M0 scales and K granularity 32"


def _fp4_forms_note() -> str:
    """The dense and M-grouped GEMMs hand FP4 operands, int32 scales and K granularity 32 to the FP4 family's kernel
    (``gemm/fp4/launch.py``; opt-in while that family is listed in ``core/gpu_validation.py``), which runs them
    unless one operand's scales are FP32 and the other's int32."""
    opt_in = gpu_validation.opt_in_note("fp4_gemm")
    return ("FP4 operands, int32 UE8M0 scales, K granularity 32: the FP4 kernel"
            + (f" ({opt_in})" if opt_in else "") + "; the reference with FP32 scales on one operand and int32 on "
            "the other")


_FP4_FORMS_NOTE = _fp4_forms_note()


# FP8 MMAs from sm_89 on; the warp-specialised kernel on sm_90a only (fp8_plan.ws_runs).
_ARCH = arch.FP8_OPS_WITH_SM90_KERNELS


def _triton(name: str):
    return getattr(launchers, name)


for _layout in ("nt", "nn", "tn", "tt"):
    register(f"fp8_gemm_{_layout}", check=checks.make_dense_check(_layout),
             reference=ref.make_dense_reference(_layout), triton=_triton(f"fp8_gemm_{_layout}"),
             triton_note=_FP4_FORMS_NOTE, arch=_ARCH)

register("fp8_gemm_nt_skip_head_mid", check=checks.check_fp8_gemm_nt_skip_head_mid,
         reference=ref.fp8_gemm_nt_skip_head_mid_reference, triton=_triton("fp8_gemm_nt_skip_head_mid"),
         triton_note=_NOT_COVERED, arch=_ARCH)

for _layout in ("nt", "nn"):
    register(f"m_grouped_fp8_gemm_{_layout}_contiguous", check=checks.make_m_grouped_contiguous_check(_layout),
             reference=ref.make_m_grouped_contiguous_reference(_layout),
             triton=_triton(f"m_grouped_fp8_gemm_{_layout}_contiguous"), triton_note=_FP4_FORMS_NOTE, arch=_ARCH)

register("m_grouped_fp8_gemm_nt_masked", check=checks.check_m_grouped_fp8_gemm_nt_masked,
         reference=ref.m_grouped_fp8_gemm_nt_masked_reference, triton=_triton("m_grouped_fp8_gemm_nt_masked"),
         triton_note=_FP4_FORMS_NOTE, arch=_ARCH)

for _layout in ("nt", "tn"):
    register(f"k_grouped_fp8_gemm_{_layout}_contiguous", check=checks.make_k_grouped_check(_layout),
             reference=ref.make_k_grouped_reference(_layout),
             triton=_triton(f"k_grouped_fp8_gemm_{_layout}_contiguous"), arch=_ARCH)

# Data checks (values of the index tensors): always on the CPU, on CUDA in the checked mode (core/checks_mode.py).
for _layout in ("nt", "nn"):
    set_data_check(f"m_grouped_fp8_gemm_{_layout}_contiguous", grouped_checks.check_data_m_grouped_contiguous)
set_data_check("m_grouped_fp8_gemm_nt_masked", grouped_checks.check_data_m_grouped_masked)
set_data_check("k_grouped_fp8_gemm_nt_contiguous", grouped_checks.check_data_k_grouped)
set_data_check("k_grouped_fp8_gemm_tn_contiguous", grouped_checks.check_data_k_grouped_fp8_tn)
