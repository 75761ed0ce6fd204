"""Gluon builtins whose name changed between Triton releases, under one name for the warp-specialised kernels.

Each name is the very builtin Triton's Gluon offers for it, chosen once at import, so a kernel lowers to the same IR
whichever release it is built with:

* ``tma_load`` / ``tma_store``: the TMA copies global -> shared and shared -> global. Triton 3.6 and 3.7 call them
  ``tma.async_copy_global_to_shared`` / ``tma.async_copy_shared_to_global``; 3.8 renamed them ``tma.async_load`` /
  ``tma.async_store`` (keeping the old names as aliases), and 3.9 turned the old names into errors. Same arguments
  (descriptor, coordinates, barrier and destination / source buffer), same op.
* ``cp_async_load``: the cp.async copy global -> shared (``ampere.async_copy``), renamed the same way:
  ``async_copy_global_to_shared`` up to 3.7, ``async_load`` from 3.8. Same arguments (buffer, pointers, ``mask=``).
* ``thread_barrier``: a barrier across the CTA's threads. Triton 3.6 calls it ``gl.thread_barrier()``; 3.7 replaced it
  by ``gl.barrier(cluster=False)``. Both emit the same barrier op for a CTA (the kernels launch one CTA per
  cluster).
* ``smem_reinterpret(smem, dtype, shape, layout)``: a shared-memory buffer viewed with another dtype, shape and
  layout (no copy). The descriptor method is ``_reinterpret`` up to 3.8 and ``reinterpret`` from 3.9; a method
  cannot be renamed from outside, so this is a builtin of ours that calls the installed Triton's.

Versions written and tested against: 3.6.0, 3.7.1, 3.8.0, 3.9.0 (the README's support matrix). Gluon exists only
with Triton: import this module from Gluon kernel modules only.
"""

from __future__ import annotations

from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import tma

from . import triton_version

_VERSION = triton_version() or (0, 0, 0)

if _VERSION >= (3, 8, 0):
    tma_load = tma.async_load
    tma_store = tma.async_store
    cp_async_load = async_copy.async_load
else:
    tma_load = tma.async_copy_global_to_shared
    tma_store = tma.async_copy_shared_to_global
    cp_async_load = async_copy.async_copy_global_to_shared

thread_barrier = gl.barrier if _VERSION >= (3, 7, 0) else gl.thread_barrier

_REINTERPRET = "reinterpret" if _VERSION >= (3, 9, 0) else "_reinterpret"


@builtin
def smem_reinterpret(smem, dtype, shape, layout, _semantic=None):
    return getattr(smem, _REINTERPRET)(dtype, shape, layout, _semantic=_semantic)


__all__ = ["cp_async_load", "smem_reinterpret", "thread_barrier", "tma_load", "tma_store"]
