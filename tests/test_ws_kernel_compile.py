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
