"""Public switch of the opt-in FP8 GEMM autotuning (see gemm/fp8/autotune.py)."""

from .autotune import autotune_enabled, set_autotune

__all__ = ["set_autotune", "autotune_enabled"]
