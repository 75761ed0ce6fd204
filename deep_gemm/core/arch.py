"""GPU architecture facts: what each CUDA compute capability can run, in one place.

The kernels were written and tuned for sm_90a (H100 / H200). On other GPUs the plans pick from what the
architecture supports:

* the warp-specialised Gluon kernels (``*_ws.py``: wgmma, setmaxnreg, TMA) compile for sm_90a only, so they run
  only on compute capability 9.0 exactly (``has_wgmma``);
* the portable ``tl.*`` kernels run on every capability from 8.0 on (``has_mma``), where Triton lowers their
  ``tl.dot`` to the architecture's MMA (tcgen05 on sm_100, mma.sync on sm_80 / sm_89 / sm_120) and, below sm_90
  (no TMA: ``has_tma``), their tensor descriptors to plain loads;
* FP8 operands need an FP8 MMA (``has_fp8_mma``: sm_89 and later; Triton refuses ``fp8e4nv`` below it), so FP8
  ops run the torch reference on the GPU on sm_80 / sm_86;
* a config's shared memory must fit the architecture's opt-in limit per block (``shared_memory``: 227 KB on sm_90 /
  sm_100, 163 KB on sm_80, 99 KB on sm_86 / sm_89 / sm_120); the plans size their pipelines with ``smem_budget``.

Plans and launchers pass the capability around as one int, the SM version: ``10 * major + minor`` (90 for 9.0,
120 for 12.0), as Triton's ``GPUTarget`` spells it.

The capability of a device is read at its first use (a launch, or ``deep_gemm.backends()``), never at import, and
cached per device. Without CUDA (CPU hosts, Triton's interpreter) it is ``DEFAULT_CAPABILITY``: the kernels'
target. ``forced_capability`` overrides it for tests.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from .errors import fail

# The architecture the kernels target: what a host without CUDA (the interpreter, CPU-only reports) stands for.
DEFAULT_CAPABILITY = (9, 0)
SM90 = 90
# Below this no Triton kernel runs (BF16 tl.dot needs sm_80): every op runs the torch reference on the GPU.
MIN_MMA_SM = 80
# FP8 (e4m3) tl.dot: sm_89 (Ada) and later.
MIN_FP8_SM = 89
# Opt-in dynamic shared memory per block (cudaDevAttrMaxSharedMemoryPerBlockOptin), bytes, per capability: what a
# compiled kernel's ``metadata.shared`` must not exceed (Triton raises OutOfResources when it loads one that does).
SHARED_MEMORY = {(8, 0): 166_912, (8, 6): 101_376, (8, 7): 166_912, (8, 9): 101_376, (9, 0): 232_448,
                 (10, 0): 232_448, (10, 3): 232_448, (12, 0): 101_376, (12, 1): 101_376}
SM90_SHARED_MEMORY = SHARED_MEMORY[(9, 0)]
# Shared memory per SM (what co-resident blocks share; each block also reserves 1 KB of it): one KB more than the
# per-block limit on every capability above.
SM_SHARED_MEMORY_EXTRA = 1024
# Capabilities missing from the table: the smallest limit of their major version seen so far.
_SHARED_MEMORY_BY_MAJOR = {8: 101_376, 9: 232_448, 10: 232_448, 11: 232_448, 12: 101_376}
_SHARED_MEMORY_FLOOR = 101_376

_CAPABILITIES: dict[int, tuple[int, int]] = {}
# Forced capabilities (forced_capability): device index -> capability, None -> every device (and CPU launches).
_FORCED: dict = {}
_LOCK = threading.Lock()


def sm_of(capability: tuple[int, int]) -> int:
    """(9, 0) -> 90, (12, 0) -> 120."""
    return 10 * capability[0] + capability[1]


def capability_of_sm(sm: int) -> tuple[int, int]:
    """90 -> (9, 0), 120 -> (12, 0)."""
    return divmod(int(sm), 10)


def _validate(capability) -> tuple[int, int]:
    if (not isinstance(capability, (tuple, list)) or len(capability) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in capability)
            or not (1 <= capability[0] <= 99 and 0 <= capability[1] <= 9)):
        fail(f"capability: expected a (major, minor) pair of ints such as (9, 0), got {capability!r}")
    return int(capability[0]), int(capability[1])


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def capability(device_index: int | None = None) -> tuple[int, int]:
    """The compute capability of CUDA device ``device_index`` (None: the current device): a forced one
    (``forced_capability``) first, else the device's own (read once per device; reading it initialises CUDA), else,
    without CUDA, ``DEFAULT_CAPABILITY``."""
    if _FORCED:
        forced = _FORCED.get(device_index, _FORCED.get(None))
        if forced is not None:
            return forced
    if device_index is not None:
        cached = _CAPABILITIES.get(device_index)
        if cached is not None:
            return cached
    if not _cuda_available():
        return DEFAULT_CAPABILITY
    import torch

    index = torch.cuda.current_device() if device_index is None else device_index
    cached = _CAPABILITIES.get(index)
    if cached is None:
        cached = _CAPABILITIES.setdefault(index, tuple(torch.cuda.get_device_capability(index)))
    return cached


def sm(device_index: int | None = None) -> int:
    """``capability(device_index)`` as an SM version (90, 120, ...)."""
    return sm_of(capability(device_index))


def sm_of_tensor(t) -> int:
    """The SM version of the device a tensor lives on. CPU tensors (Triton's interpreter runs the launchers on
    them) stand for the current device: a forced capability, else ``DEFAULT_CAPABILITY`` without CUDA."""
    index = t.get_device()
    return sm(index if index >= 0 else None)


def shared_memory(sm_version: int) -> int:
    """Opt-in shared memory per block on ``sm_version`` (``SHARED_MEMORY``; for a capability missing from it, the
    smallest limit known for its major version)."""
    cap = capability_of_sm(sm_version)
    return SHARED_MEMORY.get(cap) or _SHARED_MEMORY_BY_MAJOR.get(cap[0], _SHARED_MEMORY_FLOOR)


def programs_by_shared_memory(sm_version: int, shared_bytes: int) -> int:
    """Blocks of ``shared_bytes`` dynamic shared memory each that fit on one SM of ``sm_version`` at once."""
    reserved = SM_SHARED_MEMORY_EXTRA  # (per block, kept by the system)
    return (shared_memory(sm_version) + SM_SHARED_MEMORY_EXTRA) // (shared_bytes + reserved)


def smem_budget(sm90_budget: int, sm_version: int) -> int:
    """A family's shared-memory budget on ``sm_version`` given its budget on sm_90: the same margin below the
    architecture's limit (Triton's barriers, reduction scratch, the family's own epilogue reserve), never more than
    on sm_90."""
    return min(sm90_budget, sm90_budget - (SM90_SHARED_MEMORY - shared_memory(sm_version)))


# ---- what an architecture has ----------------------------------------------------------------------------------

def has_wgmma(sm_version: int) -> bool:
    """sm_90a's wgmma / setmaxnreg / TMA multicast: the warp-specialised Gluon kernels. Compute capability 9.0 only
    (sm_90a code does not run on any other GPU, and sm_100 has tcgen05 instead of wgmma)."""
    return sm_version == SM90


def has_tma(sm_version: int) -> bool:
    """The Tensor Memory Accelerator (sm_90 and later). Below it Triton rewrites tensor descriptors into plain loads
    and stores (so a descriptor's TMA-only encodings, such as TF32 rounding, do not apply)."""
    return sm_version >= SM90


def has_mma(sm_version: int) -> bool:
    """BF16 / TF32 tensor-core dots in Triton: the floor for every Triton kernel here."""
    return sm_version >= MIN_MMA_SM


def kernels_run(sm_version: int) -> bool:
    """Whether deep_gemm launches Triton kernels on ``sm_version`` at all (sm_80 and later: the oldest architecture
    they are compile-checked for; below it every op runs the torch reference on the GPU)."""
    return sm_version >= MIN_MMA_SM


def has_fp8_mma(sm_version: int) -> bool:
    """FP8 (e4m3) tensor-core dots: sm_89 (Ada) and later."""
    return sm_version >= MIN_FP8_SM


def sm90_occupancy(sm_version: int) -> bool:
    """Whether an SM has sm_90's per-SM limits (228 KB shared memory, 64 K registers, 64 warps, 32 blocks), which
    ``core.launch.programs_per_sm`` assumes when it sizes cooperative launches: sm_90 and sm_100 / sm_103."""
    return sm_version // 10 in (9, 10)


# ---- overriding the capability (tests) ------------------------------------------------------------------------

@contextlib.contextmanager
def forced_capability(capability: tuple[int, int], device_index: int | None = None) -> Iterator[None]:
    """Within the block, ``capability(device_index)`` answers ``capability`` (for every device, and for CPU tensors
    in Triton's interpreter, when ``device_index`` is None): the plans, the launchers and ``deep_gemm.backends()``
    then choose as they would on such a GPU. For tests on hosts without that GPU; forcing a capability a real device
    does not have may select kernels it cannot run.

    Entering and leaving bump the runtime knobs' version, so memoised checks and recorded launch plans made under
    one capability are not replayed under another. Process-wide (the launchers of every thread see it)."""
    from .runtime import _STATE as runtime_state

    cap = _validate(capability)
    if device_index is not None and (not isinstance(device_index, int) or device_index < 0):
        fail(f"device_index: expected None or a non-negative int, got {device_index!r}")
    with _LOCK:
        previous = _FORCED.get(device_index)
        _FORCED[device_index] = cap
    with runtime_state.lock:
        runtime_state.version += 1
    try:
        yield
    finally:
        with _LOCK:
            if previous is None:
                _FORCED.pop(device_index, None)
            else:
                _FORCED[device_index] = previous
        with runtime_state.lock:
            runtime_state.version += 1


# ---- what an op needs (deep_gemm.backends()) ---------------------------------------------------------------------

class OpArch:
    """What an op's CUDA launcher needs of the architecture, as ``deep_gemm.backends()`` reports it (the launchers
    and plans enforce it themselves):

    * ``min_sm``: below it the op's CUDA kernel is the torch reference (MIN_FP8_SM for FP8 operands);
    * ``sm90_kernels``: some of its kernels are sm_90a-only (the warp-specialised Gluon kernels); elsewhere it runs
      its portable ``tl.*`` kernels ("triton (portable)");
    * ``reference_below``: ((sm, what), ...): argument kinds that run the reference below an SM version (e.g. FP8
      operands of an op that also takes BF16 ones)."""

    __slots__ = ("min_sm", "sm90_kernels", "reference_below")

    def __init__(self, min_sm: int = MIN_MMA_SM, sm90_kernels: bool = False, reference_below: tuple = ()):
        self.min_sm = min_sm
        self.sm90_kernels = sm90_kernels
        self.reference_below = tuple(reference_below)

    def backend(self, sm_version: int, note: str = "") -> str:
        """'triton', 'triton (portable)' or 'reference' on ``sm_version``; a note (where a Triton op still runs the
        reference for some arguments) follows in parentheses: 'triton (note)', 'triton (portable; note)'."""
        if sm_version < self.min_sm:
            return "reference"
        notes = [note] if note else []
        notes += [what for below, what in self.reference_below if sm_version < below]
        if self.sm90_kernels and not has_wgmma(sm_version):
            notes.insert(0, "portable")
        return "triton" + (f" ({'; '.join(notes)})" if notes else "")

    def __repr__(self) -> str:
        return f"OpArch(min_sm={self.min_sm}, sm90_kernels={self.sm90_kernels}, reference_below={self.reference_below})"


ANY_MMA = OpArch()
FP8_OPS = OpArch(min_sm=MIN_FP8_SM)
FP8_OPS_WITH_SM90_KERNELS = OpArch(min_sm=MIN_FP8_SM, sm90_kernels=True)
BF16_OPS_WITH_SM90_KERNELS = OpArch(sm90_kernels=True)


def report_sm(device=None) -> int | None:
    """The SM version ``deep_gemm.backends(device)`` reports for: ``device`` None (the current CUDA device; without
    CUDA the forced capability, else DEFAULT_CAPABILITY), a device index, ``"cuda"`` / ``"cuda:N"`` or a
    ``torch.device``. None for a CPU device (its kernels are the references)."""
    import torch

    if device is None:
        return sm(None)
    if isinstance(device, bool) or not isinstance(device, (int, str, torch.device)):
        fail(f"device: expected None, an int, a str or a torch.device, got {type(device).__name__}")
    try:
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    except (RuntimeError, ValueError) as exc:
        fail(f"device: {exc}")
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        fail(f"device: expected a CUDA or CPU device, got {dev}")
    if dev.index is not None and _cuda_available():
        if dev.index >= torch.cuda.device_count():
            fail(f"device: {dev} does not exist ({torch.cuda.device_count()} CUDA devices)")
    return sm(dev.index)


__all__ = ["DEFAULT_CAPABILITY", "SM90", "SHARED_MEMORY", "OpArch", "capability", "sm", "sm_of", "sm_of_tensor",
           "capability_of_sm", "shared_memory", "programs_by_shared_memory", "smem_budget", "has_wgmma", "has_tma",
           "has_mma", "kernels_run",
           "has_fp8_mma",
           "sm90_occupancy", "forced_capability", "report_sm"]
