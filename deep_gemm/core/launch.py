"""Cheap Triton launches: compile once per (kernel, config, argument types), then call the compiled launcher.

A plain ``kernel[grid](...)`` call costs ~17 us of host time (argument binding and specialisation on every call)
and ``@triton.autotune`` ~22 us; the compiled kernel's own launcher costs ~5 us. Kernels launched here declare their
integer arguments ``do_not_specialize`` and their raw pointers ``do_not_specialize_on_alignment``, so the compiled
binary depends only on the config (constexprs, dtypes, block shapes: the caller's ``config_key``) and on whether an
integer needs 64 bits (``_type_key``). That key selects a compiled kernel from the process-wide ``KERNEL_CACHE`` (safe
under concurrent first compilation: one build per key).

Kernels with TMA descriptor arguments are launched around Triton's Python wrapper of the C launcher
(``wrap_handle_tensordesc``), which rebuilds the flat argument list and encodes every descriptor on every call:
``_DirectLauncher`` flattens the arguments exactly as that wrapper does, takes encoded descriptors from a cache
(``tma_descriptor``) and calls the C launcher itself; a ``LaunchPlan`` keeps the flattened list and only fills in
the stream, the tensors and their descriptors. How the words reach the C launcher is Triton's private ABI, which
changed between releases: ``deep_gemm._internals.triton_launcher`` knows it per release. The direct path is used
only where the installed Triton is one of those releases, and only after its flattening of a kernel's first launch
matched Triton's own (``_verify``); every other launch goes through Triton's own launch of the compiled kernel.

Under ``TRITON_INTERPRET=1`` (CPU CI) launches go through the interpreter, one at a time (it is not thread-safe).
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Callable, Sequence

import torch

from . import arch
from .._internals import COMPILE_OPTIONS, torch_api, triton_launcher
from .runtime import KERNEL_CACHE, device_num_sms, get_pdl

_INT32_MAX = 2**31 - 1
_INTERPRETER_LOCK = threading.Lock()
_THREAD = threading.local()


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _type_key(args: Sequence[Any]) -> bool:
    """What, besides the config, decides the compiled binary. Our kernels declare every runtime int
    ``do_not_specialize`` and every raw pointer ``do_not_specialize_on_alignment``, so only whether some int
    needs 64 bits remains (Triton then types it i64)."""
    return any(abs(x) > _INT32_MAX for x in args if type(x) is int)


def launch(kernel, grid: tuple[int, int, int], args: Sequence[Any], *, name: str, config_key: tuple,
           num_warps: int, num_stages: int = 1, device_index: int = 0, record: list | None = None,
           max_registers: int | None = None, cooperative: bool = False) -> bool:
    """Launch ``kernel`` with all its arguments (constexprs included, in signature order) on the current stream.
    With ``record`` (a list), the compiled kernel, grid and arguments are appended to it (see ``LaunchPlan``).
    ``max_registers``: ptxas's per-thread register cap (Triton's ``maxnreg``; None: ptxas decides).
    ``cooperative``: a cooperative launch (Triton's ``launch_cooperative_grid``): the driver starts every program at
    once or refuses the launch, which kernels whose programs wait for each other (grid barriers) need. Such a launch
    is not made, and False returned, when the compiled kernel's programs would not all be resident at once on the
    device (``programs_per_sm`` x its SMs), so that the caller can run another kernel instead of meeting the
    driver's error; True otherwise. The interpreter runs programs one after another and has no cooperative launch:
    it raises for one."""
    if interpreting():
        if cooperative:
            raise ValueError(f"{name}: a cooperative launch cannot run in Triton's interpreter (programs run one "
                             f"after another, so a program waiting for another would wait forever)")
        with _INTERPRETER_LOCK:
            kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, **COMPILE_OPTIONS)
        return True
    current = torch.cuda.current_device()
    if current != device_index:
        # The dispatcher sets no device guard for Python kernels: compile and launch on the tensors' device.
        with torch.cuda.device(device_index):
            return launch(kernel, grid, args, name=name, config_key=config_key, num_warps=num_warps,
                          num_stages=num_stages, device_index=device_index, record=record,
                          max_registers=max_registers, cooperative=cooperative)
    _ensure_context(current)
    compiled = compiled_kernel(kernel, grid, args, name=name, config_key=config_key, num_warps=num_warps,
                               num_stages=num_stages, device_index=device_index, max_registers=max_registers,
                               cooperative=cooperative)
    programs = grid[0] * grid[1] * grid[2]
    if cooperative and programs > programs_per_sm(compiled, num_warps) * device_num_sms(device_index):
        return False
    launch_compiled(compiled, grid, args, device_index)
    if record is not None:
        record.append((compiled, grid, tuple(args), device_index))
    return True


def compiled_kernel(kernel, grid: tuple[int, int, int], args: Sequence[Any], *, name: str, config_key: tuple,
                    num_warps: int, num_stages: int = 1, device_index: int = 0, max_registers: int | None = None,
                    cooperative: bool = False):
    """The compiled (and loaded) binary ``launch`` runs for these arguments on the current device, from the cache or
    built now. Its ``n_spills`` (local memory words per thread) is known once it is loaded. ``cooperative`` is part
    of the binary's metadata (its launcher reads it on every launch, replays included: ``Abi.head``)."""
    pdl = get_pdl()
    key = (name, device_index, config_key, num_warps, num_stages, pdl, _type_key(args), max_registers, cooperative)
    compiled = KERNEL_CACHE.get(key)
    if compiled is None:
        def build():
            compile_args = [a.to_triton() if isinstance(a, FastDescriptor) else a for a in args]
            cap = {} if max_registers is None else {"maxnreg": max_registers}
            if cooperative:
                cap["launch_cooperative_grid"] = True
            ck = kernel.warmup(*compile_args, grid=grid, num_warps=num_warps, num_stages=num_stages, launch_pdl=pdl,
                               **cap, **COMPILE_OPTIONS)
            if hasattr(ck, "result"):  # asynchronous compilation mode
                ck = ck.result()
            ck._init_handles()  # load the binary now, not inside a later (possibly captured) launch
            return ck
        compiled = KERNEL_CACHE.get_or_compile(key, build)
    return compiled


# Per-SM limits of sm_90 that decide how many programs of a compiled kernel are resident at once: what a
# cooperative launch must fit (the driver refuses a grid beyond its own occupancy count). Shared memory per SM is
# the architecture's (``arch.programs_by_shared_memory``).
SM90_REGISTERS = 65536
SM90_REGISTER_UNIT = 256  # registers are allocated per warp, in units of 256 (8 per thread)
SM90_MAX_WARPS = 64
SM90_MAX_PROGRAMS = 32


def programs_per_sm(compiled, num_warps: int, sm: int = arch.SM90) -> int:
    """Programs of a compiled kernel (``n_regs`` per thread, ``metadata.shared`` bytes) resident on one SM of
    ``sm`` at once: the fewest that registers, shared memory, warps and the block limit allow (0 when one does not
    fit). Registers, warps and the block limit are sm_90's; shared memory is ``sm``'s."""
    warp_registers = -(-max(1, compiled.n_regs) * 32 // SM90_REGISTER_UNIT) * SM90_REGISTER_UNIT
    return min(SM90_REGISTERS // (warp_registers * num_warps),
               arch.programs_by_shared_memory(sm, compiled.metadata.shared),
               SM90_MAX_WARPS // num_warps, SM90_MAX_PROGRAMS)


_TORCH_CURRENT_DEVICE = torch.cuda.current_device


def _current_device() -> int:
    """``torch.cuda.current_device()`` without its lazy-initialisation test (three Python calls per replay): a plan
    exists only after its recording launch initialised CUDA. Where that function was replaced (tests stub it on
    CPU hosts) the replacement is called."""
    if torch.cuda.current_device is _TORCH_CURRENT_DEVICE:
        return torch_api.cuda_current_device()
    return torch.cuda.current_device()


def _ensure_context(device_index: int) -> None:
    if not getattr(_THREAD, "has_context", False):
        # A thread that never touched CUDA has no current context, and TMA descriptor encoding needs one:
        # selecting the (already current) device makes its primary context current in this thread.
        torch.cuda.set_device(device_index)
        _THREAD.has_context = True


def launch_compiled(compiled, grid: tuple[int, int, int], args: Sequence[Any], device_index: int) -> None:
    """Run an already compiled kernel on the current stream of ``device_index`` (which must be current): through its
    C launcher directly where ``_direct_launcher`` finds one (verified on the kernel's first launch), else through
    Triton's own launch of a compiled kernel."""
    runner = compiled.run
    scratch = None
    if runner.global_scratch_size:
        # Kernels that build TMA descriptors on the device need per-program global scratch. Triton would take it
        # from a process-global allocator (triton.set_allocator); we hand it over directly instead of changing
        # the caller's allocator.
        scratch = torch.empty(_scratch_bytes(runner, grid), dtype=torch.uint8, device=f"cuda:{device_index}")
    stream = torch_api.current_raw_stream(device_index)
    direct = _direct_launcher(compiled)
    if direct is not None:
        head = direct.abi.head(compiled, grid, stream, scratch)
        if direct.verified or _verify(compiled, direct, head, args, device_index):
            direct.abi.c_call(direct.c_launch, runner, direct.flatten(head, args, device_index))
            return

    def allocate(size: int, alignment: int, stream) -> torch.Tensor:  # (Triton asks for exactly _scratch_bytes)
        return scratch if scratch is not None and scratch.numel() >= size else \
            torch.empty(size, dtype=torch.uint8, device=f"cuda:{device_index}")
    triton_launcher.public_launch(compiled, grid, stream, [_tritons_argument(a) for a in args], allocate)


def _tritons_argument(arg):
    """An argument as Triton's own launch takes it (our descriptors become Triton's classes)."""
    return arg.to_triton() if isinstance(arg, FastDescriptor) else arg


def _scratch_bytes(runner, grid) -> int:
    return grid[0] * grid[1] * grid[2] * runner.num_ctas * runner.global_scratch_size


# ---- Encoded TMA descriptors, memoised --------------------------------------------------------------------------

# Triton's fill_tma_descriptor encodes a CUtensorMap from its arguments alone (cuTensorMapEncodeTiled: address,
# swizzle, element size and type, box, shape, strides, OOB fill), so an encoding can be reused for the same inputs:
# the weights of a model and the buffers of a benchmark loop come back with the same address and layout call after
# call. A reused map is safe: the C launcher copies the 128 bytes into the kernel's parameters at launch, and a map
# of freed memory is only ever used for a later tensor at the same address with the same layout, which it
# describes exactly. Bounded: past the limit the oldest entry is dropped (first in, first out: a hit costs one dict
# lookup and no bookkeeping; an evicted hot entry costs one re-encode).
TMA_DESCRIPTOR_CACHE_LIMIT = 4096
# Hits read the dict without a lock (one dict lookup is atomic under the GIL, and under free-threaded CPython's
# per-dict locking); misses encode outside the lock and insert and evict under it, so concurrent misses never evict
# each other's entries twice or iterate a dict that another miss is changing.
_TMA_DESCRIPTORS: dict = {}
_TMA_DESCRIPTORS_LOCK = threading.Lock()
# Interned layouts: the cache key is (address, layout object) so that a replay, which knows its layouts in advance,
# hashes two words instead of every encoding input.
_TMA_LAYOUTS: dict = {}


class TmaLayout:
    """Every input of one TMA descriptor encoding except the address, plus the device it is for (the encoding does
    not depend on it, but keying on it costs nothing and keeps a multi-GPU host from sharing maps across devices).

    Interned by ``tma_layout``: two layouts with equal fields are the same object, so the default identity hash and
    equality are exact. A layout dropped from the intern table stays valid in cache keys that hold it (identity
    cannot be reused while a key references the object); new lookups just intern a new object."""

    __slots__ = ("swizzle", "elem_size", "elem_type", "block_size", "shape", "strides", "padding", "device_index")

    def __init__(self, swizzle, elem_size, elem_type, block_size, shape, strides, padding, device_index):
        self.swizzle = swizzle
        self.elem_size = elem_size
        self.elem_type = elem_type  # the host (cuTensorMapEncode) dtype enum
        self.block_size = block_size
        self.shape = shape
        self.strides = strides
        self.padding = padding
        self.device_index = device_index

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"TmaLayout({fields})"


def tma_layout(swizzle: int, elem_size: int, elem_type: int, block_size, shape, strides, padding: int,
               device_index: int) -> TmaLayout:
    """The interned ``TmaLayout`` of these encoding inputs (``elem_type`` in the host numbering)."""
    values = (swizzle, elem_size, elem_type, tuple(block_size), tuple(shape), tuple(strides), padding, device_index)
    layout = _TMA_LAYOUTS.get(values)
    if layout is None:
        if len(_TMA_LAYOUTS) >= TMA_DESCRIPTOR_CACHE_LIMIT:
            _TMA_LAYOUTS.clear()  # safe: see TmaLayout
        layout = _TMA_LAYOUTS.setdefault(values, TmaLayout(*values))
    return layout


def tma_descriptor(data_ptr: int, layout: TmaLayout):
    """The CUtensorMap Triton's ``fill_tma_descriptor`` encodes for ``data_ptr`` and ``layout``; encoded once and
    then reused (see ``TMA_DESCRIPTOR_CACHE_LIMIT``)."""
    tensor_map = _TMA_DESCRIPTORS.get((data_ptr, layout))
    if tensor_map is None:
        tensor_map = _encode_tma_descriptor(data_ptr, layout)
    return tensor_map


def _encode_tma_descriptor(data_ptr: int, layout: TmaLayout):
    # Only the direct launch encodes maps itself, so the installed Triton's ABI is known here.
    fill = triton_launcher.installed_abi().fill()
    tensor_map = fill(data_ptr, layout.swizzle, layout.elem_size, layout.elem_type, layout.block_size, layout.shape,
                      layout.strides, layout.padding)
    with _TMA_DESCRIPTORS_LOCK:
        if len(_TMA_DESCRIPTORS) >= TMA_DESCRIPTOR_CACHE_LIMIT:
            del _TMA_DESCRIPTORS[next(iter(_TMA_DESCRIPTORS))]  # the oldest entry
        _TMA_DESCRIPTORS[(data_ptr, layout)] = tensor_map
    return tensor_map


def clear_tma_descriptor_cache() -> None:
    with _TMA_DESCRIPTORS_LOCK:
        _TMA_DESCRIPTORS.clear()
        _TMA_LAYOUTS.clear()


# ---- Triton's C launcher, called directly ------------------------------------------------------------------------

# Per compiled kernel's launcher (by id, with the launcher itself to rule out a reused id): its _DirectLauncher, or
# None where the direct path does not apply. Bounded like the other per-kernel caches.
_DIRECT: dict = {}
_DIRECT_LIMIT = 4096


class _DirectLauncher:
    """A compiled kernel's C launcher, the ABI it is called with (``triton_launcher.Abi``), and what Triton's wrapper
    does to the arguments: each tensor-descriptor argument becomes several words (``_descriptor_words``), every
    other argument one.

    ``descriptors``: (argument position, ``DescriptorMeta`` or None), by position; None is a kernel lowered without
    host TMA metadata (Triton then passes base, shape, strides, flags, shape, strides)."""

    __slots__ = ("abi", "c_launch", "descriptors", "verified")

    def __init__(self, abi, c_launch, descriptors):
        self.abi = abi
        self.c_launch = c_launch
        self.descriptors = descriptors
        self.verified = False

    def flatten(self, head: tuple, args: Sequence[Any], device_index: int) -> list:
        """``head`` followed by the flattened ``args``: the words ``abi.c_call`` hands the C launcher."""
        words = list(head)
        begin = 0
        for position, meta in self.descriptors:
            words += args[begin:position]
            words += _descriptor_words(args[position], meta, self.abi, device_index)
            begin = position + 1
        words += args[begin:]
        return words

    def word_starts(self, args: Sequence[Any], device_index: int) -> list[int]:
        """Where each argument's first word lies in ``flatten``'s list."""
        meta_at = dict(self.descriptors)
        starts, word = [], triton_launcher.HEAD_WORDS
        for position, arg in enumerate(args):
            starts.append(word)
            word += (len(_descriptor_words(arg, meta_at[position], self.abi, device_index)) if position in meta_at
                     else 1)
        return starts


def _descriptor_words(desc, meta, abi, device_index: int) -> list:
    """Triton's ``make_tensordesc_arg(desc, meta)`` for ``abi``, with the encoded descriptor taken from the cache."""
    if meta is None:
        return abi.no_meta_words(desc)
    if desc.strides[-1] != 1:
        raise ValueError(f"a TMA descriptor needs a contiguous last dimension, got strides {tuple(desc.strides)}")
    layout = _descriptor_layout(desc, meta, device_index)
    return [tma_descriptor(desc.base.data_ptr(), layout), *abi.descriptor_tail(desc, layout.shape), *layout.strides]


def _descriptor_layout(desc, meta, device_index: int) -> TmaLayout:
    """What Triton encodes a descriptor argument with, besides its address."""
    shape = desc.shape
    if meta.fp4_padded:  # packed FP4: the descriptor counts elements, two per byte
        shape = list(shape)
        shape[-1] *= 2
    # A descriptor may ask for another element type than the kernel's (Tf32RoundingDescriptor).
    elem_type = TMA_HOST_TFLOAT32 if getattr(desc, "round_f32_to_tf32", False) else meta.elem_type
    return tma_layout(meta.swizzle, meta.elem_size, elem_type, meta.block_size, shape, desc.strides,
                      1 if desc.padding == "nan" else 0, device_index)


def _direct_launcher(compiled) -> _DirectLauncher | None:
    """The direct launcher of a compiled kernel, or None where it does not apply (``triton_launcher.Abi.of``).

    A kernel without tensor-descriptor arguments launches directly too: a replay then passes tensors as addresses,
    which spares the C launcher a ``data_ptr()`` call and a driver query (``cuPointerGetAttribute``) per pointer
    argument, and spares Python ``launch_compiled``'s per-call work."""
    runner = compiled.run
    entry = _DIRECT.get(id(runner))
    if entry is not None and entry[0] is runner:
        return entry[1]
    found = triton_launcher.Abi.of(compiled)
    direct = None if found is None else _DirectLauncher(*found)
    _remember_direct(runner, direct)
    return direct


def _remember_direct(runner, direct: _DirectLauncher | None) -> None:
    if len(_DIRECT) >= _DIRECT_LIMIT:
        _DIRECT.clear()
    _DIRECT[id(runner)] = (runner, direct)


def _verify(compiled, direct: _DirectLauncher, head: tuple, args: Sequence[Any], device_index: int) -> bool:
    """Once per kernel, on its first launch: do our words equal the words Triton's own wrapper builds for the same
    arguments? On a mismatch the kernel keeps Triton's launch for good."""
    theirs = triton_launcher.tritons_words(direct.abi, compiled, head, args)
    same = triton_launcher.same_words(direct.flatten(head, args, device_index), theirs)
    if same:
        direct.verified = True
    else:
        warnings.warn(f"deep_gemm: the direct launch of a Triton kernel built other arguments than Triton's launcher "
                      f"({compiled.run.launch!r}); that kernel keeps Triton's launch", RuntimeWarning, stacklevel=3)
        _remember_direct(compiled.run, None)
    return same


class LaunchPlan:
    """A recorded launch replayed for new tensors with the same metadata: the host fast path of a hot op.

    An op whose argument check already passed for a metadata signature (shapes, strides, dtypes, alignment, knob
    state) computes the same config, grid and scalar arguments every time; only the tensors (and the TMA
    descriptors over them) change. The plan keeps the recorded argument tuple as a template and, per call, puts
    the call's tensors into their slots. Recording fails (``from_record`` returns None) when an argument is a
    tensor the plan cannot re-derive: a copy or view made inside the launcher (MN-major operands, reshaped
    grouped operands). Where the kernel launches directly (``_DirectLauncher``), the plan keeps the flattened C
    launcher arguments instead (``_DirectReplay``). Templates hold None in the slots each call fills, so a plan
    does not keep the recording call's tensors alive."""

    __slots__ = ("compiled", "grid", "device_index", "template", "tensor_slots", "desc_slots", "fresh_slots",
                 "view_slots", "view_desc_slots", "direct", "keeps_buffers")

    @classmethod
    def from_record(cls, record: list, inputs: Sequence[Any], scratch=(), persistent=()):
        """``inputs``: the call's tensors (None allowed); ``scratch``: tensors allocated per call (re-allocated
        per replay); ``persistent``: buffers the kernel may keep using (e.g. self-cleaning counters)."""
        if len(record) != 1 or interpreting():
            return None
        compiled, grid, args, device_index = record[0]
        plan = cls()
        plan.compiled, plan.grid, plan.device_index = compiled, grid, device_index
        plan.keeps_buffers = bool(persistent)  # (its launches share state with the other calls using them)
        plan.template = list(args)
        plan.tensor_slots, plan.desc_slots, plan.fresh_slots = [], [], []
        plan.view_slots, plan.view_desc_slots = [], []

        def source(t):
            for j, x in enumerate(inputs):
                if x is t:
                    return j
            return None
        for pos, x in enumerate(args):
            if isinstance(x, torch.Tensor):
                j = source(x)
                if j is not None:
                    plan.tensor_slots.append((pos, j))
                elif any(x is t for t in scratch):
                    plan.fresh_slots.append((pos, tuple(x.shape), x.dtype, x.device))
                elif any(x is t for t in persistent):
                    pass
                else:
                    view = _View.of(x, inputs)
                    if view is None:
                        return None
                    plan.view_slots.append((pos, view))
            elif isinstance(x, FastDescriptor):
                j = source(x.base)
                if j is not None:
                    plan.desc_slots.append((pos, j, x.shape, x.strides, x.block_shape, x.gluon))
                    continue
                view = _View.of(x.base, inputs)
                if view is None:
                    return None
                plan.view_desc_slots.append((pos, view, x.shape, x.strides, x.block_shape, x.gluon))
        plan.direct = _DirectReplay.of(plan, args)
        for pos in [s[0] for s in plan.tensor_slots + plan.desc_slots + plan.fresh_slots + plan.view_slots
                    + plan.view_desc_slots]:
            plan.template[pos] = None
        return plan

    def run(self, inputs: Sequence[Any]) -> None:
        if _current_device() != self.device_index:
            with torch.cuda.device(self.device_index):
                _ensure_context(self.device_index)
                self._launch(inputs)
            return
        _ensure_context(self.device_index)
        if self.direct is not None:  # (_launch's first branch, inlined: the replay of every hot op)
            self.direct.run(inputs)
        else:
            self._launch(inputs)

    def _launch(self, inputs: Sequence[Any]) -> None:
        if self.direct is not None:
            self.direct.run(inputs)
            return
        args = self.template.copy()
        for pos, j in self.tensor_slots:
            args[pos] = inputs[j]
        for pos, j, shape, strides, block, gluon in self.desc_slots:
            args[pos] = FastDescriptor(inputs[j], shape, strides, block, gluon)
        for pos, shape, dtype, device in self.fresh_slots:
            args[pos] = torch.empty(shape, dtype=dtype, device=device)
        for pos, view in self.view_slots:
            # A tensor argument is a kernel pointer: the C launcher takes an int as the device pointer (getPointer
            # in triton 3.6's driver.py; the direct replay does the same), which saves building the view tensor.
            args[pos] = view.ptr(inputs)
        for pos, view, shape, strides, block, gluon in self.view_desc_slots:
            args[pos] = FastDescriptor(view.tensor(inputs), shape, strides, block, gluon)
        launch_compiled(self.compiled, self.grid, args, self.device_index)


class _View:
    """A tensor a launcher derived from one of its inputs without copying (a reshape, transpose, slice or dtype view
    made inside the launcher): the same storage, at a fixed byte distance from the input's first element. For equal
    metadata signatures the launcher derives the same view, so a replay rebuilds it from the new input: as a pointer
    (``ptr``: all a kernel's pointer argument or a TMA descriptor needs) or as a tensor."""

    __slots__ = ("j", "byte_delta", "shape", "stride", "dtype")

    @classmethod
    def of(cls, t: torch.Tensor, inputs: Sequence[Any]) -> _View | None:
        """The view of t over an input's storage, or None when t shares no input's storage (a copy)."""
        storage = t.untyped_storage().data_ptr()
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.device == t.device and x.untyped_storage().data_ptr() == storage:
                view = cls()
                view.j, view.byte_delta = j, t.data_ptr() - x.data_ptr()
                view.shape, view.stride, view.dtype = tuple(t.shape), tuple(t.stride()), t.dtype
                return view
        return None

    def ptr(self, inputs: Sequence[Any]) -> int:
        return inputs[self.j].data_ptr() + self.byte_delta

    def tensor(self, inputs: Sequence[Any]) -> torch.Tensor:
        x = inputs[self.j]
        elem = torch.empty((), dtype=self.dtype).element_size()
        offset = (x.storage_offset() * x.element_size() + self.byte_delta) // elem
        return torch.empty(0, dtype=self.dtype, device=x.device).set_(x.untyped_storage(), offset, self.shape,
                                                                      self.stride)


class _DirectReplay:
    """A plan's launch as the C launcher's flat argument list: per call only the stream, the tensors, the encoded
    descriptors over them (cached by address and layout) and the per-call buffers change."""

    __slots__ = ("c_launch", "abi", "runner", "device_index", "words", "tensor_words", "tma_words", "fresh_words",
                 "scratch_bytes", "kept", "run")

    @classmethod
    def of(cls, plan: LaunchPlan, args: Sequence[Any]) -> _DirectReplay | None:
        """The direct replay of a just-recorded plan, or None where its kernel does not launch directly (or has not
        yet passed ``_verify``, which its recording launch runs).

        An input and a view the launcher derived from one (``_View``) are the same thing to a replay: the address of
        input ``j`` plus a fixed byte distance (0 for the input itself), so each kind of word is one loop of
        ``(word, j, byte_delta, ...)`` entries."""
        runner = getattr(plan.compiled, "run", None)
        direct = _direct_launcher(plan.compiled) if runner is not None else None
        if direct is None or not direct.verified:
            return None
        replay = cls()
        replay.c_launch, replay.abi, replay.runner = direct.c_launch, direct.abi, runner
        replay.device_index = plan.device_index
        replay.scratch_bytes = _scratch_bytes(runner, plan.grid) if runner.global_scratch_size else 0
        head = direct.abi.head(plan.compiled, plan.grid, None, None)
        replay.words = direct.flatten(head, args, plan.device_index)
        starts = direct.word_starts(args, plan.device_index)
        meta_at = dict(direct.descriptors)
        replay.tensor_words = [(starts[pos], j, 0) for pos, j in plan.tensor_slots]
        replay.tensor_words += [(starts[pos], view.j, view.byte_delta) for pos, view in plan.view_slots]
        replay.tma_words = []
        descriptors = [(pos, j, 0) for pos, j, *_ in plan.desc_slots]
        descriptors += [(pos, view.j, view.byte_delta) for pos, view, *_ in plan.view_desc_slots]
        for pos, j, delta in descriptors:
            meta = meta_at.get(pos, _NOT_A_DESCRIPTOR)
            if meta is _NOT_A_DESCRIPTOR:
                return None  # a FastDescriptor where the kernel takes something else: let Triton report it
            if meta is None:
                replay.tensor_words.append((starts[pos], j, delta))  # the descriptor's words start with its base
            else:
                # Same signature, same descriptor shape, strides and block: the recorded layout holds for replays.
                replay.tma_words.append((starts[pos], j, delta, _descriptor_layout(args[pos], meta,
                                                                                   plan.device_index)))
        replay.fresh_words = [(starts[pos], shape, dtype, device) for pos, shape, dtype, device in plan.fresh_slots]
        for word in [w[0] for w in replay.tensor_words + replay.tma_words + replay.fresh_words]:
            replay.words[word] = None
        # Buffers the plan keeps (e.g. split-K counters) go in as addresses (see ``run``), held alive by the plan.
        replay.kept = [w for w in replay.words if isinstance(w, torch.Tensor)]
        replay.words = [w.data_ptr() if isinstance(w, torch.Tensor) else w for w in replay.words]
        replay.run = replay._straight_line()
        return replay

    def _straight_line(self) -> Callable[[Sequence[Any]], None]:
        """``run(inputs)``: launch for these inputs, generated for this plan as straight-line code (each word's
        index, input and byte delta written in; ~25 % less host time than looping over the word lists). Per call: a copy
        of the words, the current stream, the inputs' addresses, the TMA maps over them and the per-call buffers.

        Tensors go in as addresses: Triton's C launcher takes an int as a device pointer as it is, where for a
        tensor it calls data_ptr() and then asks the driver whether that address is device memory
        (cuPointerGetAttribute, one driver call per pointer argument per launch: triton 3.6 driver.py getPointer).
        The op's check already established that these are CUDA tensors of the launch's device."""
        names, lines, word, call = self.abi.replay_code(self.words, self.runner)
        scope = {"torch": torch, "c_launch": self.c_launch, "maps": _TMA_DESCRIPTORS, "encode": _encode_tma_descriptor,
                 "uint8": torch.uint8, "current_raw_stream": torch_api.current_raw_stream, **names}

        def address(j: int, delta: int) -> str:
            return f"inputs[{j}].data_ptr()" + (f" + {delta}" if delta else "")
        lines = ["def run(inputs):"] + ["    " + line for line in lines]
        lines.append(f"    {word(triton_launcher.STREAM_WORD)} = current_raw_stream({self.device_index})")
        lines += [f"    {word(w)} = {address(j, delta)}" for w, j, delta in self.tensor_words]
        for i, (w, j, delta, layout) in enumerate(self.tma_words):  # (tma_descriptor(), inlined)
            scope[f"layout{i}"] = layout
            lines += [f"    data_ptr = {address(j, delta)}",
                      f"    tensor_map = maps.get((data_ptr, layout{i}))",
                      f"    {word(w)} = tensor_map if tensor_map is not None else encode(data_ptr, layout{i})"]
        for i, (w, shape, dtype, device) in enumerate(self.fresh_words):
            scope[f"fresh{i}"] = (shape, dtype, device)
            lines.append(f"    {word(w)} = torch.empty(fresh{i}[0], dtype=fresh{i}[1], device=fresh{i}[2])")
        if self.scratch_bytes:
            lines.append(f"    {word(self.abi.scratch_word)} = torch.empty({self.scratch_bytes}, dtype=uint8, "
                         f"device='cuda:{self.device_index}')")
        lines.append("    " + call)
        exec(compile("\n".join(lines), "<direct replay>", "exec"), scope)
        return scope["run"]


_NOT_A_DESCRIPTOR = object()


class FastDescriptor:
    """Host TMA descriptor argument without TensorDescriptor's per-call validation (~2 us): the launchers only read
    ``base.data_ptr()``, ``shape``, ``strides``, ``padding`` and ``round_f32_to_tf32``. Our op checks already
    validated alignment."""

    __slots__ = ("base", "shape", "strides", "block_shape", "padding", "gluon")
    round_f32_to_tf32 = False

    def __init__(self, base: torch.Tensor, shape, strides, block_shape, gluon: bool = False):
        self.base = base
        self.shape = shape
        self.strides = strides
        self.block_shape = block_shape
        self.padding = "zero"
        self.gluon = gluon

    def to_triton(self):
        """Triton's own descriptor class for the same memory (for compiling, and for Triton's own launch)."""
        if self.gluon:  # Gluon descriptors carry their shared-memory layout (the default swizzle for the block)
            from triton.experimental.gluon import language as gl
            from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
            element = {torch.float8_e4m3fn: gl.float8e4nv, torch.bfloat16: gl.bfloat16,
                       torch.float32: gl.float32}[self.base.dtype]
            layout = gl.NVMMASharedLayout.get_default_for(list(self.block_shape), element)
            return GluonDescriptor(self.base, list(self.shape), list(self.strides), list(self.block_shape), layout,
                                   **self._rounding(GluonDescriptor))
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(self.base, list(self.shape), list(self.strides), list(self.block_shape),
                                **self._rounding(TensorDescriptor))

    def _rounding(self, cls) -> dict:
        # Triton's descriptors carry the TF32 rounding flag from 3.7 on; older ones cannot be asked for it.
        has_flag = "round_f32_to_tf32" in getattr(cls, "__dataclass_fields__", {})
        return {"round_f32_to_tf32": True} if self.round_f32_to_tf32 and has_flag else {}


def descriptor(t: torch.Tensor, shape, strides, block_shape, gluon: bool = False):
    """A 2-D (or higher) TMA descriptor over ``t``'s memory; the interpreter gets Triton's own class."""
    if interpreting():
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(t, list(shape), list(strides), list(block_shape))
    return FastDescriptor(t, shape, strides, block_shape, gluon)


# ---- TF32 rounding in the TMA unit ---------------------------------------------------------------------------------

# CUtensorMapDataType CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 (cuda.h): a TMA load through such a map rounds each FP32
# element to TF32 (to nearest) on its way into shared memory, which is how DeepGEMM's TF32 kernels feed wgmma
# (wgmma itself truncates FP32 operands to TF32).
TMA_HOST_TFLOAT32 = 11


class Tf32RoundingDescriptor(FastDescriptor):
    """A ``FastDescriptor`` over FP32 data whose map is encoded as TFLOAT32 (see ``TMA_HOST_TFLOAT32``); the kernel
    sees FP32 values with the 13 low mantissa bits rounded away. The direct launch encodes it so on every Triton it
    knows; Triton's own launch does from 3.7 on (``round_f32_to_tf32``). A launcher uses it only where
    ``tf32_rounding_available`` says so."""

    __slots__ = ()
    round_f32_to_tf32 = True


def tf32_rounding_available(compiled) -> bool:
    """Whether launches of this compiled kernel encode a ``Tf32RoundingDescriptor`` as TFLOAT32: its launches go
    through the direct path (the installed Triton's launcher ABI is known, and no earlier launch of this kernel
    failed ``_verify``), or Triton's own descriptors carry the rounding flag."""
    if interpreting():
        return False
    if _direct_launcher(compiled) is not None:
        return True
    from triton.tools.tensor_descriptor import TensorDescriptor

    return "round_f32_to_tf32" in getattr(TensorDescriptor, "__dataclass_fields__", {})
