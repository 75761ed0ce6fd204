"""Registers ``mega_mhc``. No Triton kernel: on CUDA the torch reference runs on the device (DeepGEMM runs it only on
SM100; ``deep_gemm.backends()`` reports 'reference')."""

from __future__ import annotations

from ..core.registry import register
from .checks import check_mega_mhc
from .reference import mega_mhc_reference

# Writes its outputs in place and returns nothing: no fake kernel needed.
register("mega_mhc", check=check_mega_mhc, reference=mega_mhc_reference)
