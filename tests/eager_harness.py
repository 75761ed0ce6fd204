"""CPU tensors on the eager path (``_ops/library.eager_op``): the eager path takes only CUDA tensors, so these tests
swap in the same ``_eager_signature`` with its CUDA test inverted (and the generated per-op signatures and metadata
guards with it) and count the calls that reach the op's CUDA kernel (its Triton launcher, in the interpreter). Used
by the eager-path tests of the families (``test_eager_path.py``, ``test_layout_host_path.py``,
``test_eager_guards.py``)."""

from __future__ import annotations

import inspect

import pytest
import torch

import deep_gemm
from deep_gemm._ops import library


def count_eager_calls(monkeypatch, op_name: str) -> list:
    """Make CPU tensors eligible for the eager path; returns the list the signature tokens of the calls that reached
    ``op_name``'s CUDA kernel are appended to."""
    if torch.cuda.is_available():
        pytest.skip("CPU tensors through the CUDA kernel need the interpreter (the *_gpu.py files cover GPUs)")
    source = inspect.getsource(library._eager_signature).replace("not x.is_cuda", "x.is_cuda")
    namespace = dict(library.__dict__)
    exec(compile(source, library.__file__, "exec"), namespace)
    monkeypatch.setattr(library, "_eager_signature", namespace["_eager_signature"])
    # The generated per-op functions and the metadata guards they leave (library._remember) take CPU tensors too
    # while the test runs; every op's are regenerated inside it and restored after it, so no CPU guard outlives it.
    monkeypatch.setattr(library, "_EAGER_DEVICE_TEST", "is_cpu")
    for each in library._KERNELS.values():
        for attr, value in (("eager_signature", None), ("eager_token", None), ("recent", ()), ("_guards", {})):
            monkeypatch.setattr(each, attr, value)
    kernels = library.kernels_of(op_name)
    taken = []
    run_cuda = kernels.run_cuda

    def counting(full, token):
        taken.append(token)
        return run_cuda(full, token)
    monkeypatch.setattr(kernels, "run_cuda", counting)
    return taken


def hc_compiled_graph(a, b, d, s) -> str:
    """The one FX graph ``torch.compile(fullgraph=True)`` traces for a step calling the public
    ``tf32_hc_prenorm_gemm`` (the eager path must leave the dispatcher op in it, never its own fast path)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    @torch.compile(backend=backend, fullgraph=True)
    def step(a, b, d, s):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
        return d.sum() + s.sum()

    step(a, b, d, s)
    assert len(graphs) == 1
    return graphs[0]
