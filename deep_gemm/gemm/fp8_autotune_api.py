"""Public switch of the opt-in FP8 GEMM autotuning (see fp8_autotune.py)."""

from .fp8_autotune import autotune_enabled, set_autotune

__all__ = ["set_autotune", "autotune_enabled"]
