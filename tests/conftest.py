"""Test-session setup shared by every test module.

Without a GPU, Triton kernels run in Triton's interpreter: TRITON_INTERPRET must be set before triton is imported
(deep_gemm imports triton lazily, so setting it here is early enough).
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import deep_gemm  # noqa: E402,F401  (registers the ops)


def pytest_collection_modifyitems(config, items):
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
