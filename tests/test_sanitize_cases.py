"""The sanitizer runner's case files (scripts/gpu/sanitize/<family>.py) follow its convention, and every FP8 case
plans the kernel path it names (a CPU dry run: plans are made, nothing launches; the GPU run under
compute-sanitizer checks the results)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "scripts", "gpu")


def _runner():
    spec = importlib.util.spec_from_file_location("sanitize_cases", os.path.join(SCRIPTS, "sanitize_cases.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_family_file_follows_the_convention():
    runner = _runner()
    families = runner.families()
    assert "fp8" in families
    for family in families:
        cases = runner.load_cases(family)
        assert cases, f"{family}.py has no cases"
        assert all(name.startswith(f"{family}/") for name, _ in cases)


def test_fp8_cases_plan_the_kernel_they_name(monkeypatch):
    from deep_gemm.core.first_import import ensure_triton
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    runner = _runner()
    # Triton's tree, Gluon included, imported first under the interpreter setting triton was imported with: Gluon
    # imported after the variable is gone asserts that tl's functions are JIT functions, which the interpreter's are
    # not (this test failed after any earlier test that imported triton without Gluon).
    ensure_triton()
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # plan as on the GPU (the Gluon kernel is eligible)
    monkeypatch.setattr(fp8_launch, "usable_sms", lambda: 132)
    monkeypatch.setattr(fp8_launch, "_execute", lambda p, call, **kwargs: None)
    monkeypatch.setattr(fp8_launch, "_k_major", lambda x: x.contiguous())
    monkeypatch.setattr(fp8_launch, "PLAN_OF_CALL", type(fp8_launch.PLAN_OF_CALL)())
    spec = importlib.util.spec_from_file_location("sanitize_fp8", os.path.join(SCRIPTS, "sanitize", "fp8.py"))
    fp8 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp8)
    fp8.DEV, fp8.CHECK_RESULTS = "cpu", False
    assert len(fp8.CASES) == len(runner.load_cases("fp8"))
    kernels = {"tl": 0, "ws": 0}
    for name, fn in fp8.CASES:
        fn()  # raises when the plan runs another kernel or variant than the case names
        kernels["ws" if "_ws" in name else "tl"] += 1
    assert kernels["ws"] >= 15 and kernels["tl"] >= 5, kernels


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
