"""CPU tensors on the eager path (``_ops/library.eager_op``): the eager path takes only CUDA tensors, so these tests
swap in the same ``_eager_signature`` with its CUDA test inverted and count the calls that reach the op's CUDA kernel
(its Triton launcher, in the interpreter). Used by the eager-path tests of the families (``test_eager_path.py``,
``test_layout_host_path.py``)."""

from __future__ import annotations

import inspect

import pytest
import torch

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
    kernels = library.kernels_of(op_name)
    taken = []
    run_cuda = kernels.run_cuda

    def counting(full, token):
        taken.append(token)
        return run_cuda(full, token)
    monkeypatch.setattr(kernels, "run_cuda", counting)
    return taken
