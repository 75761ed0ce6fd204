"""Registers ``batched_syrk`` / ``batched_symm``. No Triton kernel: on CUDA the torch reference runs on the device
(DeepGEMM calls cuBLASLt; ``deep_gemm.backends()`` reports 'reference')."""

from __future__ import annotations

from ...core.registry import register
from .checks import check_batched_symm, check_batched_syrk
from .reference import batched_symm_reference, batched_syrk_reference

# Both write d in place and return nothing: no fake kernel needed.
register("batched_syrk", check=check_batched_syrk, reference=batched_syrk_reference)
register("batched_symm", check=check_batched_symm, reference=batched_symm_reference)
