"""Test-run setup shared by every test module.

Without a GPU, Triton kernels run in Triton's interpreter: TRITON_INTERPRET must be set before triton is imported
(deep_gemm imports triton lazily, so setting it here is early enough). Every test then runs with the interpreter's
comparisons typed int1 (tests/interpreter_masks.py).
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import deep_gemm  # noqa: E402,F401  (registers the ops)
import interpreter_masks  # noqa: E402,F401  (comparisons typed int1 in the interpreter)
import opcheck_registry  # noqa: E402

_opcheck = torch.library.opcheck


def _recording_opcheck(op, *args, **kwargs):
    name = getattr(op, "_name", None) or str(op)
    if name.startswith("deep_gemm::"):
        opcheck_registry.OPCHECKED.add(name.split("::", 1)[1].split(".")[0])
    return _opcheck(op, *args, **kwargs)


torch.library.opcheck = _recording_opcheck


def pytest_collection_modifyitems(config, items):
    # The opcheck coverage test is meaningful only when every test module was collected.
    collected = {item.module.__name__ for item in items}
    every = {p.stem for p in __import__("pathlib").Path(__file__).parent.glob("test_*.py")}
    opcheck_registry.FULL_RUN = every <= collected
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
