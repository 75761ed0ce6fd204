"""Registers ``mega_mhc``: its check, its reference and its Triton launcher (``launch.py``)."""

from __future__ import annotations

from ..core import arch, gpu_validation
from ..core.registry import register
from . import launch as launchers  # (imports no Triton: its kernels load at the first launch)
from .checks import check_mega_mhc
from .plan import FAMILY, MAX_NORM_HIDDEN
from .reference import mega_mhc_reference

# BF16 outputs need a BF16 MMA (sm_80); the FP8 output Triton's E4M3 conversion (sm_89).
MEGA_MHC_ARCH = arch.OpArch(reference_below=((arch.MIN_FP8_SM, "y_fp8 runs the reference"),))

# Writes its outputs in place and returns nothing: no fake kernel needed.
register("mega_mhc", check=check_mega_mhc, reference=mega_mhc_reference, triton=launchers.mega_mhc,
         arch=MEGA_MHC_ARCH,
         triton_note=gpu_validation.opt_in_note(
             FAMILY, f"hidden > {MAX_NORM_HIDDEN} and tensors not 16-byte aligned run the reference"))
