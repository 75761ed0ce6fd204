"""tests/interpreter_masks.py: the interpreter's comparisons typed int1, so masks mixing block and scalar comparisons
load and store as on the GPU (Triton 3.9's interpreter refuses a mask that is not bool)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import interpreter_masks

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="patches the CPU interpreter only")


def test_comparison_results_are_int1_bool():
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    interpreter_masks.install()
    builder = InterpreterBuilder()
    ints = TensorHandle(np.array([5], dtype=np.int32), tl.int32), TensorHandle(np.array([1], dtype=np.int32), tl.int32)
    floats = (TensorHandle(np.array([0.5, 2.0], dtype=np.float32), tl.float32),
              TensorHandle(np.array([1.0, 1.0], dtype=np.float32), tl.float32))
    for out, want in [(builder.create_icmpSGT(*ints), [True]), (builder.create_icmpEQ(*ints), [False]),
                      (builder.create_fcmpOLT(*floats), [True, False])]:
        assert out.dtype == tl.int1 and out.data.dtype == np.bool_
        assert out.data.tolist() == want


def test_mask_of_block_and_scalar_comparisons():
    import triton
    import triton.language as tl

    @triton.jit
    def copy_rows(x, y, n, ROWS: tl.constexpr, COLS: tl.constexpr, TWO: tl.constexpr):
        rows = tl.arange(0, ROWS)
        cols = tl.arange(0, COLS)
        ok = (rows < ROWS - 1) & (TWO > 1) & (1 < n)  # block, constexpr and scalar comparisons
        offs = rows[:, None] * COLS + cols[None, :]
        v = tl.load(x + offs, mask=ok[:, None], other=-1.0)
        tl.store(y + offs, v, mask=(rows < n)[:, None] & (n > 0))

    x = torch.randn(8, 4)
    for n in (0, 1, 3, 8):
        y = torch.full_like(x, 7.0)
        copy_rows[(1,)](x, y, n, 8, 4, 2)
        loaded = torch.where((torch.arange(8) < 7)[:, None] & (n > 1), x, torch.full_like(x, -1.0))
        want = torch.where((torch.arange(8) < n)[:, None] & (n > 0), loaded, torch.full_like(x, 7.0))
        assert torch.equal(y, want), n
