"""Triton's C kernel launcher, called directly: the one place deep_gemm depends on how Triton launches a kernel.

A compiled Triton kernel (``CompiledKernel``) is launched by its ``run`` object (``CudaLauncher``), whose ``launch``
is either the C launcher itself or, for kernels with tensor-descriptor arguments, a Python wrapper that turns each
descriptor into several words (an encoded ``CUtensorMap``, then the shape and strides) on every call. How those
words reach the C launcher is Triton's private ABI, and it changed:

* ``positional`` (Triton 3.6): ``c_launch(*head, *words)``, one compiled C launcher per kernel signature;
* ``annotated`` (Triton 3.7 to 3.9): ``c_launch(*head, arg_annotations, kernel_signature, words)``, one C launcher
  for every kernel, told the argument types by ``kernel_signature`` and which arguments are constexprs (skipped)
  by ``arg_annotations``; a descriptor without host metadata also carries its TF32 rounding flag.

``head`` is 13 words in both, in another order: grid x, y, z, stream, function, cooperative-grid flag, PDL flag, then
global scratch, profile scratch, packed kernel metadata, launch metadata, enter hook, exit hook (positional) or the
four metadata words first and the two scratch words last (annotated).

``Abi.of(compiled)`` returns the ABI of a compiled kernel's launcher where the installed Triton is one of those
releases and the launcher has the structure the ABI expects, else None. Every kernel's first direct launch is
``verify``-ed: the words deep_gemm builds must equal the words Triton's own wrapper builds for the same arguments;
a kernel that fails keeps Triton's launch for good. Where no ABI applies (an unknown Triton), ``public_launch``
launches through ``CompiledKernel[grid](...)``, Triton's own entry point for a compiled kernel: a few microseconds
more host time, the same results.
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable, Sequence

from . import triton_version

HEAD_WORDS = 13
STREAM_WORD = 3


class DescriptorMeta:
    """One entry of a kernel's ``tensordesc_meta`` (how Triton encodes that descriptor argument), read once."""

    __slots__ = ("swizzle", "elem_size", "elem_type", "block_size", "fp4_padded", "source")

    def __init__(self, source: dict, device_to_host_dtype: dict):
        self.swizzle = source["swizzle"]
        self.elem_size = source["elem_size"]
        self.elem_type = device_to_host_dtype[source["elem_type"]]
        self.block_size = tuple(source["block_size"])
        self.fp4_padded = source["fp4_padded"]
        self.source = source


class Abi:
    """How one range of Triton releases hands a kernel's words to its C launcher (see the module docstring)."""

    name = ""
    versions: tuple = ()  # (major, minor) pairs of the releases it was written and tested against
    fill_name = ""  # the driver's TMA descriptor encoder (same arguments in every release)
    tf32_flag_words = False  # whether a descriptor lowered without host metadata carries its TF32 flag
    tail_is_encoded_shape = False
    scratch_word = 0  # where the global scratch buffer goes in the head

    def head(self, compiled, grid, stream, scratch) -> tuple:
        """The 13 head words of a launch on ``stream`` with global ``scratch`` (None: the kernel needs none)."""
        raise NotImplementedError

    @staticmethod
    def of(compiled) -> tuple[Abi, Any, tuple] | None:
        """(ABI, C launcher, descriptors) for a compiled kernel, or None where no known ABI applies.
        ``descriptors``: (argument position, ``DescriptorMeta`` or None) in argument order; None is a descriptor the
        kernel was lowered without host TMA metadata for."""
        abi = installed_abi()
        runner = getattr(compiled, "run", None)
        if abi is None or runner is None:
            return None
        try:
            from triton.backends.nvidia import driver as nvidia
        except ImportError:
            return None
        if not isinstance(runner, nvidia.CudaLauncher) or not abi.has_structure(runner):
            return None
        if getattr(runner, "profile_scratch_size", 0) or getattr(runner, "gsan_enabled", False):
            return None  # instrumented builds: Triton adds buffers and arguments per launch
        c_launch = _c_launcher(runner.launch)
        positions = descriptor_positions(compiled)
        if c_launch is None or positions is None:
            return None
        metas = getattr(compiled.metadata, "tensordesc_meta", None) or [None] * len(positions)
        if len(metas) != len(positions):
            return None
        try:
            descriptors = tuple((p, None if m is None else DescriptorMeta(m, nvidia.TMA_DTYPE_DEVICE_TO_HOST))
                                for p, m in zip(positions, metas))
        except (KeyError, TypeError):
            return None
        return abi, c_launch, descriptors

    def has_structure(self, runner) -> bool:
        raise NotImplementedError

    def call_args(self, words: list, runner) -> Sequence[Any]:
        """The C launcher's arguments for ``words`` (the head words followed by the kernel's flat words)."""
        raise NotImplementedError

    def c_call(self, c_launch, runner, words: list) -> None:
        c_launch(*self.call_args(words, runner))

    def replay_code(self, words: list, runner) -> tuple[dict, list, Callable[[int], str], str]:
        """``c_call`` as generated straight-line code for a replay that fills in some of ``words`` per call:
        (names the code needs, the lines that copy the recorded words, word index -> the expression that holds it
        in the copy, the line that calls ``c_launch``)."""
        raise NotImplementedError

    def wrapper_call(self, wrapper, runner, head: tuple, args: Sequence[Any]) -> None:
        """Call Triton's wrapper (or C launcher) of ``runner`` as Triton's ``CudaLauncher.__call__`` does (the
        wrapper takes the kernel's arguments where the C launcher takes their flat words)."""
        wrapper(*self.call_args([*head, *args], runner))

    def recorded_words(self, recorded: tuple) -> list:
        """The head and flat words of one recorded C-launcher call (inverse of ``c_call``)."""
        raise NotImplementedError

    def no_meta_words(self, desc) -> list:
        """A descriptor lowered without host metadata: base, shape, strides, NaN-padding flag (and TF32 flag), then
        shape and strides again."""
        flags = [desc.padding == "nan"] + ([bool(getattr(desc, "round_f32_to_tf32", False))]
                                           if self.tf32_flag_words else [])
        return [desc.base, *desc.shape, *desc.strides, *flags, *desc.shape, *desc.strides]

    def fill(self):
        """The active driver's TMA descriptor encoder (looked up per call, as Triton does)."""
        from triton.runtime import driver

        return getattr(driver.active.utils, self.fill_name)

    def descriptor_tail(self, desc, encoded_shape) -> list:
        """The shape words after an encoded descriptor: the encoded shape (positional: it counts packed FP4
        elements twice) or the descriptor's own."""
        return list(encoded_shape if self.tail_is_encoded_shape else desc.shape)


class _PositionalAbi(Abi):
    name = "positional"
    versions = ((3, 6),)
    fill_name = "fill_tma_descriptor"
    scratch_word = 7
    tail_is_encoded_shape = True

    def head(self, compiled, grid, stream, scratch) -> tuple:
        runner = compiled.run
        return (grid[0], grid[1], grid[2], stream, compiled.function, runner.launch_cooperative_grid,
                runner.launch_pdl, scratch, None, compiled.packed_metadata, None, None, None)

    def has_structure(self, runner) -> bool:
        from triton.backends.nvidia import driver as nvidia

        return getattr(nvidia, "_BASE_ARGS_FORMAT_LEN", None) == HEAD_WORDS

    def call_args(self, words, runner):
        return words

    def replay_code(self, words, runner):
        return {"words_": words}, ["words = words_.copy()"], (lambda w: f"words[{w}]"), "c_launch(*words)"

    def recorded_words(self, recorded: tuple) -> list:
        return list(recorded)


class _AnnotatedAbi(Abi):
    name = "annotated"
    versions = ((3, 7), (3, 8), (3, 9))
    fill_name = "fill_tma_descriptor_tiled"
    tf32_flag_words = True
    scratch_word = 11

    def head(self, compiled, grid, stream, scratch) -> tuple:
        runner = compiled.run
        return (grid[0], grid[1], grid[2], stream, compiled.function, runner.launch_cooperative_grid,
                runner.launch_pdl, compiled.packed_metadata, None, None, None, scratch, None)

    def has_structure(self, runner) -> bool:
        return hasattr(runner, "arg_annotations") and hasattr(runner, "kernel_signature")

    def call_args(self, words, runner):
        return (*words[:HEAD_WORDS], runner.arg_annotations, runner.kernel_signature, words[HEAD_WORDS:])

    def replay_code(self, words, runner):
        # The head and the kernel's words as two lists, so that a call copies each once and slices nothing.
        names = {"head_": words[:HEAD_WORDS], "args_": words[HEAD_WORDS:], "annotations_": runner.arg_annotations,
                 "signature_": runner.kernel_signature}
        return (names, ["head = head_.copy()", "args = args_.copy()"],
                (lambda w: f"head[{w}]" if w < HEAD_WORDS else f"args[{w - HEAD_WORDS}]"),
                "c_launch(*head, annotations_, signature_, args)")

    def recorded_words(self, recorded: tuple) -> list:
        return list(recorded[:HEAD_WORDS]) + list(recorded[-1])


_ABIS = (_PositionalAbi(), _AnnotatedAbi())


def installed_abi() -> Abi | None:
    """The ABI of the installed Triton's launcher, by version alone (None: unknown or no Triton)."""
    version = triton_version()
    return next((a for a in _ABIS if version is not None and version[:2] in a.versions), None)


def abi_names() -> dict:
    """Triton (major, minor) -> the name of the ABI the direct launch uses there (for docs and tests)."""
    return {v: abi.name for abi in _ABIS for v in abi.versions}


def _c_launcher(launch):
    """The C launcher behind a ``CudaLauncher.launch``: the function itself where the kernel has no descriptor
    argument (Triton then installs no wrapper), else the wrapper's ``launcher`` (every release names it so)."""
    code = getattr(launch, "__code__", None)
    if code is None:
        return launch if callable(launch) else None
    cells = dict(zip(code.co_freevars, launch.__closure__ or ()))
    cell = cells.get("launcher")
    try:
        c_launch = cell.cell_contents if cell is not None else None
    except ValueError:  # an empty cell
        return None
    return c_launch if callable(c_launch) and getattr(c_launch, "__code__", None) is None else None


def descriptor_positions(compiled) -> list[int] | None:
    """Positions of the tensor-descriptor arguments in the kernel's signature (what Triton's wrapper expands)."""
    src = getattr(compiled, "src", None)
    signature = getattr(src, "signature", None)
    if not isinstance(signature, dict):
        return None
    return [i for i, s in enumerate(signature.values()) if isinstance(s, str) and s.startswith("tensordesc")]


def tritons_words(abi: Abi, compiled, head: tuple, args: Sequence[Any]) -> list:
    """The words Triton's own wrapper hands the C launcher for ``args`` (the wrapper rebuilt around a recorder from
    the kernel's signature and metadata, so nothing is launched)."""
    from triton.backends.nvidia import driver as nvidia

    recorded = []
    signature = dict(compiled.src.signature)
    metas = getattr(compiled.metadata, "tensordesc_meta", None)
    wrapper = nvidia.wrap_handle_tensordesc(lambda *words: recorded.append(words), signature, metas)
    abi.wrapper_call(wrapper, compiled.run, head, args)
    return abi.recorded_words(recorded[0]) if len(recorded) == 1 else []


def same_words(ours: Sequence[Any], theirs: Sequence[Any]) -> bool:
    """Word by word; an encoded ``CUtensorMap`` is opaque (its inputs are the neighbouring shape and stride words),
    and a tensor counts as equal to the same tensor only (Triton reads its address either way)."""
    from triton.backends.nvidia import driver as nvidia

    opaque = getattr(nvidia, "PyCUtensorMap", None)
    return len(ours) == len(theirs) and all(
        x is y or (type(x) is type(y) and not _is_tensor(x) and (type(x) is opaque or x == y))
        for x, y in zip(ours, theirs))


def _is_tensor(x) -> bool:
    return hasattr(x, "data_ptr") and hasattr(x, "dtype")


def public_launch(compiled, grid: tuple, stream: int, args: Sequence[Any], scratch_allocator=None) -> None:
    """Launch through ``CompiledKernel[grid](*args, stream=...)``: Triton's own launch of a compiled kernel, for a
    Triton whose launcher ABI is not known here. Descriptor arguments must be Triton's own classes. A kernel that
    needs global scratch gets it from ``scratch_allocator`` (``triton.set_allocator`` inside a copied context, so
    the caller's allocator is left as it was)."""
    if scratch_allocator is None or not getattr(compiled.run, "global_scratch_size", 0):
        compiled[grid](*args, stream=stream)
        return

    def run():
        import triton

        triton.set_allocator(scratch_allocator)
        compiled[grid](*args, stream=stream)
    contextvars.copy_context().run(run)
