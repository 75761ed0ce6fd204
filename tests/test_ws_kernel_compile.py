"""The warp-specialised Gluon kernel compiles for sm_90a (no GPU needed) without ptxas serialising its wgmmas.

ptxas (info C7514) serialises every wgmma of a kernel that reads a wgmma partial retired by wait_group(1) while
another group is in flight; the kernel's mainloops are written to avoid it (docs/ARCHITECTURE.md, "The FP8
kernels"), and a change to them can silently bring it back: the kernel stays correct and runs 1.2-1.5x slower.
The compile runs in a subprocess without TRITON_INTERPRET (the interpreter cannot compile warp specialisation).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "compile_check.py")


def test_no_gluon_mainloop_is_serialised_by_ptxas():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, SCRIPT, "--serialisation"], capture_output=True, text=True, env=env,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(report) == 13
    for name, facts in report.items():
        assert facts["qgmma"] > 0, f"{name}: no wgmma in the SASS"
        assert not facts["serialised"], f"{name}: ptxas serialises its wgmmas (C7514)"


def test_matrix_sass_mode_counts_local_memory_as_a_full_dump_does():
    """COMPILE_CHECK_SASS=0 (the support matrix) reads LDL / STL without a SASS dump where a kernel uses no local
    memory, and from a dump where it does: the same counts as the full dump, the other needles not counted."""
    code = "\n".join([
        "import json, os, sys",
        f"sys.path.insert(0, {os.path.dirname(SCRIPT)!r})",
        "import compile_check as cc",
        "cubin = cc.compile_bf16_gemm(bm=16, bn=32, bk=128, warps=4, stages=2).asm['cubin']",
        "full = cc.sass_counts(cubin)",
        "os.environ['COMPILE_CHECK_SASS'] = '0'",
        "fast = cc.sass_counts(cubin)",
        "cc.resource_usage = lambda c: 'REG:40 STACK:16 SHARED:0 LOCAL:0'",  # (as if it spilled: the dump runs)
        "dumped = cc.sass_counts(cubin)",
        "print(json.dumps([full, fast, dumped]))"])
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "COMPILE_CHECK_SASS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    full, fast, dumped = json.loads(out.stdout.strip().splitlines()[-1])
    assert full["HGMMA"] + full.get("QGMMA", 0) + full["UTMALDG"] > 0  # (a real dump was read)
    for counts in (fast, dumped):
        assert {n: counts[n] for n in ("LDL", "STL")} == {n: full[n] for n in ("LDL", "STL")}
        assert counts["HGMMA"] is None and counts["QGMMA"] is None
