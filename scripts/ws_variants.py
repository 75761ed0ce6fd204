"""Patched copies of kernels/fp8_gemm_ws.py for the what-limits-it probes (ws_ceiling.py, ws_split_probe.py): each
variant removes part of the kernel's work by text replacements that must each apply exactly once."""

import importlib.util
import os
import tempfile

ROOT = os.path.join(os.path.dirname(__file__), "..")
SRC = open(os.path.join(ROOT, "deep_gemm", "gemm", "kernels", "fp8_gemm_ws.py")).read()
# The producer arrives on `ready` without its A and B loads (consumers multiply whatever is in shared memory); the
# narrow wave of split tiles and staged scales still load.
NOLOAD = ("                mbarrier.expect(bar, STAGE_BYTES)\n"
          "                tma.async_copy_global_to_shared(a_desc, [a_row, kb * BK], bar, a_bufs.index(stage))\n"
          "                tma.async_copy_global_to_shared(b_desc, [b_row, kb * BK], bar, b_bufs.index(stage))\n",
          "                mbarrier.arrive(bar, count=1)\n")


def patched_module(tag: str, patches):
    """The kernel module with `patches` ((old, new) text pairs) applied, imported as a sibling of the original."""
    src = SRC
    for old, new in patches:
        assert src.count(old) == 1, (tag, old[:60])
        src = src.replace(old, new)
    path = os.path.join(tempfile.mkdtemp(), f"ws_{tag}.py")
    with open(path, "w") as f:
        f.write(src)
    # Named inside the kernels package, so the copy's relative imports (.groupings) resolve as the original's do.
    spec = importlib.util.spec_from_file_location(f"deep_gemm.gemm.kernels.{os.path.basename(path)[:-3]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
