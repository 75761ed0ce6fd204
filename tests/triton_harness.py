"""Run an op's Triton launcher: through the dispatcher on a GPU, directly (after the op's check) in the Triton
interpreter on CPU. Either way the test fails if the launcher declines (returns NotImplemented), so a test can never
pass by silently running the reference."""

from __future__ import annotations

import torch

from deep_gemm.core.registry import _Binder, kernels_of, run_launcher
from deep_gemm.core.schemas import SCHEMAS

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def triton_launcher(op_name: str):
    kernels = kernels_of(op_name)
    assert kernels.triton is not None, f"{op_name} has no Triton launcher"
    return kernels.triton


def run_triton(op_name: str, *args, **kwargs) -> None:
    """Check the arguments like the op does, then run the Triton launcher on them."""
    full = _Binder(SCHEMAS[op_name])(args, kwargs)
    kernels_of(op_name).check(*full)
    result = triton_launcher(op_name)(*full)
    assert result is not NotImplemented, f"the Triton launcher of {op_name} declined these arguments"


def run_forced(op_name: str, *args, overrides=None, **kwargs) -> None:
    """The op's CUDA path with forced plan choices (``core.registry.run_launcher`` with ``overrides``, e.g.
    fp8_plan.Fp8Overrides): launch plans are recorded and replayed as through the dispatcher. Fails if the launcher
    declines."""
    extra = {"overrides": overrides} if overrides is not None else {}
    result = run_launcher(op_name, *args, launcher_kwargs=extra, **kwargs)
    assert result is not NotImplemented, f"the Triton launcher of {op_name} declined these arguments"
