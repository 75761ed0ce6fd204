"""Triton's first import in a process happens once, under a lock (``core/first_import.py``): threads
that enter Triton's package tree at once at different modules otherwise get partially initialised modules (seen
on the H200 when eight threads made a process's first launches; on a CPU, the race below without ensure_triton()
failed in every one of six fresh processes)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")

# A fresh interpreter per attempt: twenty threads released at once, each calling ensure_triton() and then importing
# one of the modules a first launch reaches (our kernel modules, Triton's descriptor, compiler and driver modules).
_RACE = textwrap.dedent("""
    import importlib, sys, threading
    import deep_gemm
    assert "triton" not in sys.modules, "import deep_gemm imported Triton"
    from deep_gemm.core.first_import import ensure_triton
    modules = ["deep_gemm.gemm.bf16.kernels.gemm", "deep_gemm.gemm.bf16.kernels.gemm_ws", "triton.language",
               "triton.tools.tensor_descriptor", "triton.compiler", "deep_gemm.gemm.fp8.kernels.gemm_ws",
               "deep_gemm.einsum.kernels", "deep_gemm.attention.kernels.prefill", "deep_gemm.attention.kernels.paged",
               "deep_gemm.layout.kernels",
               "triton.experimental.gluon.language.nvidia.hopper"]
    errors = []
    start = threading.Barrier(20)

    def first_launch(i):
        start.wait()
        try:
            ensure_triton()
            importlib.import_module(modules[i % len(modules)])
        except BaseException as exc:  # (reported below)
            errors.append(f"{modules[i % len(modules)]}: {exc!r}")

    threads = [threading.Thread(target=first_launch, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    import triton.language
    assert hasattr(triton.language, "core")
    print("ERRORS" if errors else "OK", errors[:3])
""")


@pytest.mark.parametrize("attempt", range(6))
def test_threads_first_launches_import_triton_once(attempt):
    out = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.startswith("OK"), out.stdout + out.stderr[-2000:]


def test_every_cuda_kernel_imports_triton_before_its_launcher(monkeypatch):
    """OpKernels.run_cuda (the dispatcher's CUDA kernel and the eager path) and run_launcher reach the launcher only
    after ensure_triton() has run."""
    from deep_gemm.core import registry
    from deep_gemm.core import first_import

    seen = []
    monkeypatch.setattr(first_import, "_done", False)
    monkeypatch.setattr(first_import, "ensure_triton", lambda: seen.append("import"))

    def launcher(*args):
        seen.append("launch")
        return None
    kernels = registry.OpKernels("probe", check=lambda *a: None, reference=lambda *a: "reference", triton=launcher)
    monkeypatch.setattr(registry, "_FORCE_REFERENCE", False)
    kernels.run_cuda((1, 2), None)
    assert seen == ["import", "launch"]
    # run_launcher: the same order for a registered op's launcher.
    seen.clear()
    name = "get_paged_mqa_logits_metadata"
    real = registry.kernels_of(name)
    monkeypatch.setattr(real, "triton", launcher)
    monkeypatch.setattr(real, "checked", lambda full: None)
    registry.run_launcher(name, *_metadata_args())
    assert seen == ["import", "launch"]


def _metadata_args():
    import torch
    return torch.ones(2, dtype=torch.int32), 64, 132
