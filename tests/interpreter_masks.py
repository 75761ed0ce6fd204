"""Comparisons in Triton's CPU interpreter: the patch every interpreter test uses (conftest installs it).

The interpreter computes a comparison (``create_icmp*`` / ``create_fcmp*``) through its generic ``binary_op``, which
labels the numpy-bool result with the operands' dtype (int32 for ``n > 1`` on an int32 ``n``) although Triton types it
int1. Broadcasting such a scalar (``create_splat`` allocates its dtype from that label) turns it into int32 data, and
``block_mask & (n > 1)`` stays int32. Triton 3.6 to 3.8 load and store through a mask of any integer dtype (nonzero:
true); 3.9's ``load`` / ``store`` refuse it ("mask has unsupported dtype"), so a kernel mask mixing a block comparison
with a scalar one fails there. On a GPU the mask is an i1 tensor either way.

``install()`` (idempotent; done on import) labels every comparison's result int1 with bool data, as Triton types it.
On a GPU nothing is patched: the interpreter is not in use. ``tests/test_interpreter_masks.py`` checks it.
"""

from __future__ import annotations

import os

import numpy as np

_INSTALLED = False


def install() -> None:
    """Patch the interpreter's comparison builders once (no-op when the interpreter is not in use)."""
    global _INSTALLED
    if _INSTALLED or os.environ.get("TRITON_INTERPRET") != "1":
        return
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    def as_int1(compare):
        def create_cmp(self, lhs, rhs):
            out = compare(self, lhs, rhs)
            return TensorHandle(np.asarray(out.data).astype(np.bool_, copy=False), tl.int1)
        return create_cmp

    names = [name for name in vars(InterpreterBuilder) if name.startswith(("create_icmp", "create_fcmp"))]
    assert names, "the interpreter's comparison builders moved: revisit tests/interpreter_masks.py"
    for name in names:
        setattr(InterpreterBuilder, name, as_int1(getattr(InterpreterBuilder, name)))
    _INSTALLED = True


install()
