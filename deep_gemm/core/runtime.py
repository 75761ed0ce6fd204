"""Process-wide runtime state: the knobs DeepGEMM exposes (SM budget, PDL, tc util, alignments, compile dims) and the
kernel runtime handle (``get_jit``).

All state lives on one object guarded by one lock, so knobs can be read and written from several threads. Nothing
here touches CUDA at import time: the device SM count is read lazily, the first time it is needed.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Callable

from .errors import fail, require_int_range

# SM90 kernels tile groups of the contiguous layouts in BLOCK_M rows; 128 is DeepGEMM's default and the only
# BLOCK_M its SM90 grouped kernels try.
DEFAULT_MK_ALIGNMENT = 128
# Largest value a schema `int` argument can carry into a 32-bit kernel parameter.
INT32_MAX = 2**31 - 1


@dataclass
class _RuntimeState:
    num_sms: int = 0  # 0 = every SM of the current device
    tc_util: int = 0  # 0 = unset (reported as 100)
    pdl: bool = False
    ignore_compile_dims: bool = False
    block_m_multiple_of: int = 1
    block_n_multiple_of: int = 1
    mk_alignment: int = DEFAULT_MK_ALIGNMENT
    # Bumped by every setter and by clearing the kernel cache: memoised argument checks (core/registry.py) and
    # launch plans (gemm/fp8/launch.py) are keyed on it.
    version: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)


_STATE = _RuntimeState()
_DEVICE_SMS: dict[int, int] = {}


def device_num_sms(device_index: int | None = None) -> int:
    """SM count of a CUDA device (cached; 0 when no GPU is present)."""
    import torch

    if not torch.cuda.is_available():
        return 0
    index = torch.cuda.current_device() if device_index is None else device_index
    count = _DEVICE_SMS.get(index)
    if count is None:
        count = torch.cuda.get_device_properties(index).multi_processor_count
        _DEVICE_SMS[index] = count
    return count


# ---- knobs (these are the op kernels; the public functions call the ops) --------------------------------------

def set_num_sms(num_sms: int) -> None:
    device = device_num_sms()
    high = device if device > 0 else INT32_MAX
    require_int_range("num_sms", num_sms, 0, high)
    with _STATE.lock:
        _STATE.num_sms = int(num_sms)
        _STATE.version += 1


def get_num_sms() -> int:
    """SMs persistent kernels use: the value set (if any), else the device's count (0 without a GPU)."""
    with _STATE.lock:
        n = _STATE.num_sms
    return n if n > 0 else device_num_sms()


def usable_sms() -> int:
    """get_num_sms(), at least 1: the SM count plans and grids divide work by (one without a GPU)."""
    return get_num_sms() or 1


def set_tc_util(tc_util: int) -> None:
    require_int_range("tc_util", tc_util, 0, 100)
    with _STATE.lock:
        _STATE.tc_util = int(tc_util)
        _STATE.version += 1


def get_tc_util() -> int:
    with _STATE.lock:
        return _STATE.tc_util if _STATE.tc_util > 0 else 100


def set_pdl(enable: bool) -> None:
    with _STATE.lock:
        _STATE.pdl = bool(enable)
        _STATE.version += 1


def get_pdl() -> bool:
    with _STATE.lock:
        return _STATE.pdl


def set_ignore_compile_dims(ignore: bool) -> None:
    with _STATE.lock:
        _STATE.ignore_compile_dims = bool(ignore)
        _STATE.version += 1


def get_ignore_compile_dims() -> bool:
    with _STATE.lock:
        return _STATE.ignore_compile_dims


def set_block_size_multiple_of(block_m_multiple_of: int, block_n_multiple_of: int) -> None:
    require_int_range("block_m_multiple_of", block_m_multiple_of, 1, 256)
    require_int_range("block_n_multiple_of", block_n_multiple_of, 1, 256)
    with _STATE.lock:
        _STATE.block_m_multiple_of = int(block_m_multiple_of)
        _STATE.block_n_multiple_of = int(block_n_multiple_of)
        _STATE.version += 1


def get_block_size_multiple_of() -> tuple[int, int]:
    with _STATE.lock:
        return _STATE.block_m_multiple_of, _STATE.block_n_multiple_of


def set_mk_alignment_for_contiguous_layout(alignment: int) -> None:
    # DeepGEMM leaves this unvalidated; a non-positive value would make every group boundary meaningless.
    require_int_range("alignment", alignment, 1, INT32_MAX)
    with _STATE.lock:
        _STATE.mk_alignment = int(alignment)
        _STATE.version += 1


def get_mk_alignment_for_contiguous_layout() -> int:
    with _STATE.lock:
        return _STATE.mk_alignment


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: int | None = None) -> int:
    """Smallest group alignment the SM90 kernels accept: 128 (DeepGEMM's non-SM100 answer, any ``expected_m``)."""
    if expected_m is not None:
        require_int_range("expected_m", expected_m, 0, INT32_MAX)
    return DEFAULT_MK_ALIGNMENT


# ---- kernel runtime handle -------------------------------------------------------------------------------------

_ABSENT = object()  # "not cached" (a builder may legitimately return None)


class KernelCache:
    """In-memory cache of compiled kernels (keyed by kernel and config), safe under concurrent first compilation.

    ``get_or_compile(key, build)`` runs ``build`` at most once per key even when many threads ask at once; other
    keys compile in parallel (one lock per key).
    """

    def __init__(self) -> None:
        self._entries: dict = {}
        self._key_locks: dict = {}
        self._lock = threading.Lock()

    def get(self, key):
        return self._entries.get(key)

    def get_or_compile(self, key, build: Callable[[], object]):
        entry = self._entries.get(key, _ABSENT)
        if entry is not _ABSENT:
            return entry
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            entry = self._entries.get(key, _ABSENT)
            if entry is _ABSENT:
                entry = build()
                self._entries[key] = entry
        return entry

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> int:
        # Per-key locks are kept: a build racing with a clear still serialises with a rebuild of the same key.
        with self._lock:
            n = len(self._entries)
            self._entries.clear()
        with _STATE.lock:
            _STATE.version += 1  # launch plans recorded with the dropped kernels are keyed on it: none is reused
        return n


def cache_dir() -> str:
    """Where deep_gemm keeps on-disk state (autotune results): ``$DG_JIT_CACHE_DIR`` or ``~/.deep_gemm``."""
    return os.environ.get("DG_JIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".deep_gemm")


KERNEL_CACHE = KernelCache()
# Handles returned by get_jit(): an int is what a C++ caller can hold. There is one runtime per process.
_JIT_HANDLES = {1: KERNEL_CACHE}


def _cache_for(jit: int) -> KernelCache:
    cache = _JIT_HANDLES.get(jit)
    if cache is None:
        fail(f"jit: unknown runtime handle {jit}; get one from get_jit()")
    return cache


def get_jit() -> int:
    return 1


def jit_cache_dir(jit: int) -> str:
    _cache_for(jit)
    return cache_dir()


def jit_num_compiled_kernels(jit: int) -> int:
    return len(_cache_for(jit))


def jit_clear_cache(jit: int) -> int:
    return _cache_for(jit).clear()


class JITRuntime:
    """Python face of the ``get_jit()`` handle: where the caches live, how many kernels are compiled, and a way to
    drop the in-memory ones (the next call recompiles, or reloads from Triton's on-disk cache)."""

    def __init__(self, handle: int):
        self.handle = handle

    @property
    def cache_dir(self) -> str:
        import torch
        return torch.ops.deep_gemm.jit_cache_dir(self.handle)

    @property
    def num_compiled_kernels(self) -> int:
        import torch
        return torch.ops.deep_gemm.jit_num_compiled_kernels(self.handle)

    def clear(self) -> int:
        import torch
        return torch.ops.deep_gemm.jit_clear_cache(self.handle)

    def __repr__(self) -> str:
        return f"JITRuntime(handle={self.handle}, cache_dir={self.cache_dir!r}, " \
               f"num_compiled_kernels={self.num_compiled_kernels})"


def peek(name: str):
    """Lock-free read of one knob, for code being traced by torch.compile (which cannot trace a lock). A single
    attribute read is atomic in CPython, and Dynamo guards on the value it read, so a later change recompiles."""
    return getattr(_STATE, name)

