"""Patched copies of the FP8 kernel (and launcher) modules for the what-limits-it probes (ws_ceiling.py,
ws_split_probe.py, ws_load_probe.py, ws_timeline_probe.py): each variant changes part of the kernel's work by text
replacements that must each apply exactly once. The copies are imported next to the originals; the working tree is
never edited."""

import importlib.util
import os
import tempfile

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
KERNEL = os.path.join("deep_gemm", "gemm", "kernels", "fp8_gemm_ws.py")
LAUNCHER = os.path.join("deep_gemm", "gemm", "fp8_triton.py")
SRC = open(os.path.join(ROOT, KERNEL)).read()
# The producer arrives on `ready` without its A and B loads (consumers multiply whatever is in shared memory); the
# narrow wave of split tiles and staged scales still load.
NOLOAD = ("                mbarrier.expect(bar, STAGE_BYTES)\n"
          "                tma.async_copy_global_to_shared(a_desc, [a_row, kb * BK], bar, a_bufs.index(stage))\n"
          "                tma.async_copy_global_to_shared(b_desc, [b_row, kb * BK], bar, b_bufs.index(stage))\n",
          "                mbarrier.arrive(bar, count=1)\n")


def patched_module(tag: str, patches, relpath: str = KERNEL, source: str | None = None):
    """The module at `relpath` (the kernel unless said) with `patches` ((old, new) text pairs) applied, imported as a
    sibling of the original; `source` replaces the file's text (e.g. the kernel at another git revision)."""
    src = source if source is not None else SRC if relpath == KERNEL else open(os.path.join(ROOT, relpath)).read()
    for old, new in patches:
        assert src.count(old) == 1, (tag, old[:60])
        src = src.replace(old, new)
    stem = os.path.splitext(os.path.basename(relpath))[0]
    path = os.path.join(tempfile.mkdtemp(), f"{stem}_{tag}.py")
    with open(path, "w") as f:
        f.write(src)
    # Named inside the original's package, so the copy's relative imports resolve as the original's do.
    package = os.path.dirname(relpath).replace(os.sep, ".")
    spec = importlib.util.spec_from_file_location(f"{package}.{os.path.basename(path)[:-3]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def use_kernel(kernel) -> None:
    """Make the warp-specialised launcher run `kernel` (a patched copy's, or the original), and drop what was built
    or chosen for the previous one: the compiled binaries (clearing them also retires the dense launch plans that
    replay them: plans are keyed on the runtime version the clear bumps) and the register budgets chosen per variant
    (keyed on the variant only, so the patched kernel would inherit the original's)."""
    from deep_gemm.gemm import fp8_triton
    from deep_gemm.gemm.kernels import fp8_gemm_ws
    from deep_gemm.runtime import KERNEL_CACHE
    fp8_gemm_ws._fp8_gemm_ws_kernel = kernel
    KERNEL_CACHE.clear()
    fp8_triton._WS_BUDGETS.clear()
