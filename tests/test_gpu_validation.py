"""core/gpu_validation: families awaiting their GPU run name a real Overrides class with a ``kernels`` switch, and
their ops' backends() notes say how to ask for the kernels."""

from __future__ import annotations

import dataclasses
import importlib

import deep_gemm
from deep_gemm.core import gpu_validation
from deep_gemm.core.registry import FAMILY

# family -> the module that defines its Overrides class
_PLANS = {"mega": "deep_gemm.mega.plan", "fp4_gemm": "deep_gemm.gemm.fp4.plan",
          "sparse_attention": "deep_gemm.attention.sparse.plan", "mega_mhc": "deep_gemm.mega_mhc.plan",
          "mqa_metadata": "deep_gemm.attention.metadata.plan", "mega_bf16": "deep_gemm.mega.plan",
          "mega_gate": "deep_gemm.mega_gate.plan", "mega_ranks": "deep_gemm.mega.plan",
          "mega_fp8_fp4": "deep_gemm.mega.plan"}


def test_every_waiting_family_has_a_kernels_override():
    # A key is a family, or a sub-family (part of a family's kernels gated on its own) of one.
    assert set(gpu_validation.SUB_FAMILIES.values()) <= set(FAMILY.values())
    assert set(gpu_validation.AWAITING_GPU) <= set(FAMILY.values()) | set(gpu_validation.SUB_FAMILIES)
    for family, overrides in gpu_validation.AWAITING_GPU.items():
        cls = getattr(importlib.import_module(_PLANS[family]), overrides)
        assert "kernels" in {f.name for f in dataclasses.fields(cls)}, family
        assert cls(kernels=True).kernels and not cls().kernels


def test_waiting_families_are_reported_opt_in():
    backends = deep_gemm.backends()
    for name, family in FAMILY.items():
        if family in gpu_validation.AWAITING_GPU and backends.get(name, "").startswith("triton"):
            assert "opt-in" in backends[name], name


def test_sub_families_are_reported_opt_in():
    # bf16_mega_moe (family mega) is gated by the mega_bf16 key while it awaits its GPU run.
    if "mega_bf16" in gpu_validation.AWAITING_GPU:
        note = deep_gemm.core.registry.kernels_of("bf16_mega_moe").triton_note
        assert "opt-in" in note and "MegaOverrides" in note
        assert gpu_validation.kernels_wanted("mega", False)  # the FP8 layer runs its kernels by default
    else:  # passed: run by default, and not reported opt-in
        assert gpu_validation.kernels_wanted("mega_bf16", False)
        assert "opt-in" not in (deep_gemm.core.registry.kernels_of("bf16_mega_moe").triton_note or "")
    # fp8_mega_moe over several CUDA ranks is gated by the mega_ranks key until its multi-GPU run.
    if "mega_ranks" in gpu_validation.AWAITING_GPU:
        note = deep_gemm.core.registry.kernels_of("fp8_mega_moe").triton_note
        assert "several CUDA ranks: opt-in" in note and "MegaOverrides" in note
        from deep_gemm.mega import plan
        assert not plan.rank_kernels_wanted(plan.MegaOverrides()) and plan.rank_kernels_wanted(
            plan.MegaOverrides(kernels=True))
    # fp8_fp4_mega_moe (family mega) is gated by the mega_fp8_fp4 key while it awaits its GPU run.
    if "mega_fp8_fp4" in gpu_validation.AWAITING_GPU:
        note = deep_gemm.core.registry.kernels_of("fp8_fp4_mega_moe").triton_note
        assert "opt-in" in note and "MegaOverrides" in note
        from deep_gemm.mega import plan
        assert not plan.fp8_fp4_kernels_wanted(plan.MegaOverrides()) and plan.fp8_fp4_kernels_wanted(
            plan.MegaOverrides(kernels=True))


def test_kernels_wanted():
    assert gpu_validation.kernels_wanted("mega", True)
    assert gpu_validation.kernels_wanted("a family that has passed", False)
    assert gpu_validation.opt_in_note("a family that has passed") == ""
    assert gpu_validation.opt_in_note("a family that has passed", "one rank") == "one rank"
