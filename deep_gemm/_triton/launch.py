"""Cheap Triton launches: compile once per (kernel, config, argument types), then call the compiled launcher.

A plain ``kernel[grid](...)`` call costs ~17 us of host time (argument binding and specialisation on every call)
and ``@triton.autotune`` ~22 us; the compiled kernel's own launcher costs ~5 us (H200 host, triton 3.6,
2026-11). Kernels launched here declare their integer arguments ``do_not_specialize`` and their raw pointers
``do_not_specialize_on_alignment``, so the compiled binary depends only on the config (constexprs, dtypes, block
shapes: the caller's ``config_key``) and on whether an integer needs 64 bits (``_type_key``). That key selects a
compiled kernel from the process-wide ``KERNEL_CACHE`` (safe under concurrent first compilation: one build per
key).

Under ``TRITON_INTERPRET=1`` (CPU CI) launches go through the interpreter, one at a time (it is not thread-safe).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

import torch

from ..runtime import KERNEL_CACHE, get_pdl

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
           num_warps: int, num_stages: int = 1, device_index: int = 0, record: list | None = None) -> None:
    """Launch ``kernel`` with all its arguments (constexprs included, in signature order) on the current stream.
    With ``record`` (a list), the compiled kernel, grid and arguments are appended to it (see ``LaunchPlan``)."""
    if interpreting():
        with _INTERPRETER_LOCK:
            kernel[grid](*args, num_warps=num_warps, num_stages=num_stages)
        return
    current = torch.cuda.current_device()
    if current != device_index:
        # The dispatcher sets no device guard for Python kernels: compile and launch on the tensors' device.
        with torch.cuda.device(device_index):
            return launch(kernel, grid, args, name=name, config_key=config_key, num_warps=num_warps,
                          num_stages=num_stages, device_index=device_index, record=record)
    _ensure_context(current)
    pdl = get_pdl()
    key = (name, device_index, config_key, num_warps, num_stages, pdl, _type_key(args))
    compiled = KERNEL_CACHE.get(key)
    if compiled is None:
        def build():
            compile_args = [a.to_triton() if isinstance(a, FastDescriptor) else a for a in args]
            ck = kernel.warmup(*compile_args, grid=grid, num_warps=num_warps, num_stages=num_stages, launch_pdl=pdl)
            if hasattr(ck, "result"):  # asynchronous compilation mode
                ck = ck.result()
            ck._init_handles()  # load the binary now, not inside a later (possibly captured) launch
            return ck
        compiled = KERNEL_CACHE.get_or_compile(key, build)
    launch_compiled(compiled, grid, args, device_index)
    if record is not None:
        record.append((compiled, grid, tuple(args), device_index))


def _ensure_context(device_index: int) -> None:
    if not getattr(_THREAD, "has_context", False):
        # A thread that never touched CUDA has no current context, and TMA descriptor encoding needs one:
        # selecting the (already current) device makes its primary context current in this thread.
        torch.cuda.set_device(device_index)
        _THREAD.has_context = True


def launch_compiled(compiled, grid: tuple[int, int, int], args: Sequence[Any], device_index: int) -> None:
    """Run an already compiled kernel on the current stream of ``device_index`` (which must be current)."""
    stream = torch._C._cuda_getCurrentRawStream(device_index)
    runner = compiled.run
    scratch = None
    if runner.global_scratch_size:
        # Kernels that build TMA descriptors on the device need per-program global scratch. Triton would take it
        # from a process-global allocator (triton.set_allocator); we hand it over directly instead of changing
        # the caller's allocator. Triton 3.6's CudaLauncher argument order (pinned version).
        size = grid[0] * grid[1] * grid[2] * runner.num_ctas * runner.global_scratch_size
        scratch = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device_index}")
    runner.launch(grid[0], grid[1], grid[2], stream, compiled.function, runner.launch_cooperative_grid,
                  runner.launch_pdl, scratch, None, compiled.packed_metadata, None, None, None, *args)


class LaunchPlan:
    """A recorded launch replayed for new tensors with the same metadata: the host fast path of a hot op.

    An op whose argument check already passed for a metadata signature (shapes, strides, dtypes, alignment, knob
    state) computes the same config, grid and scalar arguments every time; only the tensors (and the TMA
    descriptors over them) change. The plan keeps the recorded argument tuple as a template and, per call, puts
    the call's tensors into their slots. Recording fails (``from_record`` returns None) when an argument is a
    tensor the plan cannot re-derive: a copy or view made inside the launcher (MN-major operands, reshaped
    grouped operands)."""

    __slots__ = ("compiled", "grid", "device_index", "template", "tensor_slots", "desc_slots", "fresh_slots")

    @classmethod
    def from_record(cls, record: list, inputs: Sequence[Any], scratch=(), persistent=()):
        """``inputs``: the call's tensors (None allowed); ``scratch``: tensors allocated per call (re-allocated
        per replay); ``persistent``: buffers the kernel may keep using (e.g. self-cleaning counters)."""
        if len(record) != 1 or interpreting():
            return None
        compiled, grid, args, device_index = record[0]
        plan = cls()
        plan.compiled, plan.grid, plan.device_index = compiled, grid, device_index
        plan.template = list(args)
        plan.tensor_slots, plan.desc_slots, plan.fresh_slots = [], [], []

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
                elif not any(x is t for t in persistent):
                    return None
            elif isinstance(x, FastDescriptor):
                j = source(x.base)
                if j is None:
                    return None
                plan.desc_slots.append((pos, j, x.shape, x.strides, x.block_shape, x.gluon))
        return plan

    def run(self, inputs: Sequence[Any]) -> None:
        args = self.template.copy()
        for pos, j in self.tensor_slots:
            args[pos] = inputs[j]
        for pos, j, shape, strides, block, gluon in self.desc_slots:
            args[pos] = FastDescriptor(inputs[j], shape, strides, block, gluon)
        for pos, shape, dtype, device in self.fresh_slots:
            args[pos] = torch.empty(shape, dtype=dtype, device=device)
        if torch.cuda.current_device() != self.device_index:
            with torch.cuda.device(self.device_index):
                _ensure_context(self.device_index)
                launch_compiled(self.compiled, self.grid, args, self.device_index)
            return
        _ensure_context(self.device_index)
        launch_compiled(self.compiled, self.grid, args, self.device_index)


class FastDescriptor:
    """Host TMA descriptor argument without TensorDescriptor's per-call validation (~2 us): the launcher only reads
    ``base.data_ptr()``, ``shape``, ``strides`` and ``padding``. Our op checks already validated alignment."""

    __slots__ = ("base", "shape", "strides", "block_shape", "padding", "gluon")

    def __init__(self, base: torch.Tensor, shape, strides, block_shape, gluon: bool = False):
        self.base = base
        self.shape = shape
        self.strides = strides
        self.block_shape = block_shape
        self.padding = "zero"
        self.gluon = gluon

    def to_triton(self):
        if self.gluon:  # Gluon descriptors carry their shared-memory layout (the default swizzle for the block)
            from triton.experimental.gluon import language as gl
            from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
            element = {torch.float8_e4m3fn: gl.float8e4nv, torch.bfloat16: gl.bfloat16,
                       torch.float32: gl.float32}[self.base.dtype]
            layout = gl.NVMMASharedLayout.get_default_for(list(self.block_shape), element)
            return GluonDescriptor(self.base, list(self.shape), list(self.strides), list(self.block_shape), layout)
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(self.base, list(self.shape), list(self.strides), list(self.block_shape))


def descriptor(t: torch.Tensor, shape, strides, block_shape, gluon: bool = False):
    """A 2-D (or higher) TMA descriptor over ``t``'s memory; the interpreter gets Triton's own class."""
    if interpreting():
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(t, list(shape), list(strides), list(block_shape))
    return FastDescriptor(t, shape, strides, block_shape, gluon)
