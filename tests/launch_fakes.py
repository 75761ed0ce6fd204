"""Stand-ins for the GPU side of a Triton launch, for CPU tests and the CPU host-path benchmark.

``fake_compiled`` builds an object shaped like Triton's ``CompiledKernel`` whose launcher is a real ``CudaLauncher``
(constructed without compiling its C module) wrapping a fake C launcher: its ``launch`` is Triton's own
``wrap_handle_tensordesc`` wrapper (``inner``), so tests can compare what deep_gemm's direct launch hands the C
launcher with what Triton's wrapper would, under whichever Triton is installed. ``FakeDriver`` replaces Triton's
active driver so that the TMA descriptor encoder returns a deterministic stand-in for a ``CUtensorMap``.

How Triton's ``CudaLauncher`` calls its C launcher is written out here independently of deep_gemm's own table
(``deep_gemm._internals.triton_launcher``): ``base_args`` and ``words_of`` per release.
"""

from __future__ import annotations

from types import SimpleNamespace

import triton
from triton.backends.nvidia import driver as nvidia_driver

# What the sm_90a compile of the dense kernels reports per descriptor (scripts/compile_check.py, triton 3.6): FP8
# operand tiles with 128-byte swizzle; the BF16 output tile stored in 64-column halves.
FP8_TILE_META = {"swizzle": 3, "elem_size": 1, "elem_type": 0, "block_size": [128, 128], "fp4_padded": False}
BF16_TILE_META = {"swizzle": 3, "elem_size": 2, "elem_type": 10, "block_size": [128, 64], "fp4_padded": False}


class FakeTensorMap:
    """What ``fill_tma_descriptor`` returned: equal to another exactly when encoded from equal inputs."""

    __slots__ = ("inputs",)

    def __init__(self, inputs: tuple):
        self.inputs = inputs

    def __eq__(self, other):
        return type(other) is FakeTensorMap and other.inputs == self.inputs

    def __hash__(self):
        return hash(self.inputs)

    def __repr__(self):
        return f"FakeTensorMap{self.inputs}"


class FakeDriver:
    """Triton's active driver as far as descriptor encoding goes (the encoder under both its names: 3.6's
    ``fill_tma_descriptor``, 3.7's ``fill_tma_descriptor_tiled``); counts the encodes."""

    def __init__(self):
        self.encodes = 0
        self.utils = SimpleNamespace(fill_tma_descriptor=self.fill_tma_descriptor,
                                     fill_tma_descriptor_tiled=self.fill_tma_descriptor)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return 0

    def fill_tma_descriptor(self, data_ptr, swizzle, elem_size, elem_type, block_size, shape, strides, padding):
        self.encodes += 1
        return FakeTensorMap((data_ptr, swizzle, elem_size, elem_type, tuple(block_size), tuple(shape),
                              tuple(strides), padding))


class RecordingCLauncher:
    """Stands in for the compiled C ``launch``: keeps the words of every call (``words_of``: the head words, then
    the kernel's flat words, under either launcher ABI)."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(tuple(words_of(args)))


ANNOTATED = tuple(int(p) for p in triton.__version__.split(".")[:2]) >= (3, 7)
# Stand-ins for the annotated launcher's argument annotations and packed kernel signature (only passed through).
ARG_ANNOTATIONS = ("arg annotations",)
KERNEL_SIGNATURE = b"kernel signature"
SCRATCH_WORD = 11 if ANNOTATED else 7  # where the global scratch buffer lies in a launch's words


class FakeCompiled(SimpleNamespace):
    """``CompiledKernel`` as far as launching goes: ``compiled[grid](*args, stream=...)`` as Triton writes it."""

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            self.run(grid[0], grid[1], grid[2], stream, self.function, self.packed_metadata, None, None, None, *args)
        return runner


def fake_compiled(arg_names, descriptor_meta: dict, c_launch, *, global_scratch_size: int = 0):
    """A compiled kernel whose arguments are ``arg_names`` (in order); ``descriptor_meta`` maps each tensor-descriptor
    argument's name to its ``tensordesc_meta`` entry (a dict, or None when the kernel was lowered without host TMA
    metadata: all entries must then be None, as Triton has metadata for every descriptor or for none)."""
    signature = {name: ("tensordesc<fp8e4nv[128, 128]>" if name in descriptor_meta else "i32") for name in arg_names}
    metas = [descriptor_meta[name] for name in arg_names if name in descriptor_meta]
    tensordesc_meta = [] if all(m is None for m in metas) else metas  # (what Triton records without host TMA)
    launcher = nvidia_driver.CudaLauncher.__new__(nvidia_driver.CudaLauncher)
    launcher.launch = nvidia_driver.wrap_handle_tensordesc(c_launch, signature, tensordesc_meta)
    launcher.num_ctas = 1
    launcher.global_scratch_size = global_scratch_size
    launcher.global_scratch_align = 128
    launcher.profile_scratch_size = 0
    launcher.profile_scratch_align = 1
    launcher.launch_cooperative_grid = False
    launcher.launch_pdl = False
    if ANNOTATED:
        launcher.arg_annotations, launcher.kernel_signature = ARG_ANNOTATIONS, KERNEL_SIGNATURE
        launcher.gsan_enabled = False
    return FakeCompiled(run=launcher, function=0x5EED, packed_metadata=(4, 1, 49152),
                        metadata=SimpleNamespace(tensordesc_meta=tensordesc_meta), n_spills=0,
                        src=SimpleNamespace(signature=signature))


def base_args(compiled, grid, stream, scratch=None) -> tuple:
    """The leading arguments Triton's ``CudaLauncher`` gives its C launcher (its wrapper, where it has one) when
    launched without hooks: 3.6 puts the scratch buffers before the kernel metadata words and then the kernel's
    arguments; 3.7 puts them after, followed by the argument annotations and the packed signature (the kernel's
    arguments then come as one sequence: ``launch_with``)."""
    runner = compiled.run
    head = (grid[0], grid[1], grid[2], stream, compiled.function, runner.launch_cooperative_grid, runner.launch_pdl)
    if ANNOTATED:
        return head + (compiled.packed_metadata, None, None, None, scratch, None, ARG_ANNOTATIONS, KERNEL_SIGNATURE)
    return head + (scratch, None, compiled.packed_metadata, None, None, None)


def launch_with(fn, compiled, grid, stream, args, scratch=None):
    """Call Triton's wrapper (or C launcher) ``fn`` as ``CudaLauncher`` does."""
    if ANNOTATED:
        return fn(*base_args(compiled, grid, stream, scratch), list(args))
    return fn(*base_args(compiled, grid, stream, scratch), *args)


def words_of(call: tuple) -> list:
    """One recorded C-launcher call as head words followed by the kernel's flat words (the annotated launcher gets
    them as one sequence after the annotations and the signature, which must be the kernel's)."""
    if ANNOTATED:
        assert call[-3] is ARG_ANNOTATIONS and call[-2] is KERNEL_SIGNATURE
        return list(call[:-3]) + list(call[-1])
    return list(call)


def kernel_descriptor_meta(kernel, d_meta=BF16_TILE_META) -> dict:
    """Per-descriptor metadata for one of deep_gemm's FP8 GEMM kernels (parameters named ``*_desc``)."""
    return {name: (d_meta if name == "d_desc" else FP8_TILE_META) for name in kernel.arg_names
            if name.endswith("_desc")}
