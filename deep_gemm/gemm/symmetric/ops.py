"""Registers ``batched_syrk`` / ``batched_symm``: their checks, their FP64 references and their CUDA launchers (cuBLAS
through torch, ``launch.py``: what DeepGEMM runs for them too)."""

from __future__ import annotations

from ...core import arch
from ...core.registry import register
from . import launch
from .checks import check_batched_symm, check_batched_syrk
from .reference import batched_symm_reference, batched_syrk_reference

# cuBLAS runs on every GPU torch supports.
_ARCH = arch.OpArch(min_sm=0)
_NOTE = "cuBLAS through torch"

# Both write d in place and return nothing: no fake kernel needed.
register("batched_syrk", check=check_batched_syrk, reference=batched_syrk_reference, triton=launch.batched_syrk,
         triton_note=_NOTE, arch=_ARCH)
register("batched_symm", check=check_batched_symm, reference=batched_symm_reference, triton=launch.batched_symm,
         triton_note=_NOTE, arch=_ARCH)
