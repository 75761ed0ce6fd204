"""Registers the einsum ops: one check, one reference and one CUDA launcher each (both only write ``d``: no fake
kernel needed). The launchers (``einsum_launch``) import Triton and their kernels at the first launch."""

from __future__ import annotations

from ..core import arch
from ..core.registry import register
from . import checks, reference
from . import launch as einsum_launch

register("einsum", check=checks.check_einsum, reference=reference.einsum_reference, triton=einsum_launch.einsum,
         triton_note="reference for operands whose strides or start are not 16-byte aligned")
register("fp8_einsum", check=checks.check_fp8_einsum, reference=reference.fp8_einsum_reference,
         triton=einsum_launch.fp8_einsum,
         triton_note="reference for INT scales and for unaligned operands",
         # (FP8 MMAs from sm_89 on; its large problems run the dense FP8 GEMM, whose warp-specialised kernel is
         # sm_90a's)
         arch=arch.FP8_OPS_WITH_SM90_KERNELS)
