"""Triton's package tree imported once per process, under a lock, before the first kernel launch.

``import deep_gemm`` does not import Triton (it stays cheap and works without a GPU); the first launcher a process
runs does, through its kernel module. Python's per-module import locks do not make a package with circular imports
safe to enter from several threads at once: threads that start Triton's tree at different modules (its kernel
modules through ``triton.language``, descriptors through ``triton.tools.tensor_descriptor``, the launcher through
``triton.backends`` / ``triton.compiler``) trip importlib's deadlock detection and get partially initialised modules
("partially initialized module 'triton.language' has no attribute 'core'", "cannot import name ..."). An op's first
calls from several threads (DeepGEMM users compile kernels from worker threads) would fail that way, and the module
that failed half-way stays broken for the whole process. So every path into a launcher (``_ops.library``'s CUDA
kernel and ``run_launcher``, the legacy kernels) calls ``ensure_triton()`` first; ``tests/test_first_import.py``
reproduces the failure without it.
"""

from __future__ import annotations

import importlib
import threading

# The entry points of Triton's tree our kernels and launchers use; importing them in one thread, in this order, loads
# the rest of the tree (triton.language, triton.compiler, triton.runtime, the NVIDIA backend).
TRITON_MODULES = ("triton", "triton.language", "triton.compiler", "triton.runtime", "triton.tools.tensor_descriptor",
                  "triton.backends.nvidia.driver", "triton.experimental.gluon",
                  "triton.experimental.gluon.language.nvidia.hopper")

_LOCK = threading.Lock()
_done = False


def ensure_triton() -> None:
    """Import TRITON_MODULES once per process (later calls return at once). A module a Triton build lacks (an older
    Triton without Gluon, a build without the NVIDIA backend) is skipped: the kernels that need it fail on their own,
    with their own error, as they did before."""
    global _done
    if _done:
        return
    with _LOCK:
        if _done:
            return
        for name in TRITON_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        _done = True
