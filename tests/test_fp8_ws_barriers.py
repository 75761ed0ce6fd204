"""The warp-specialised FP8 kernel's stage barriers are initialised for exactly the arrivals a phase receives
(scripts/compile_check_fp8.py --barriers; compiled for sm_90a, no GPU needed). An mbarrier initialised for fewer
arrivals than it gets completes phases early (compute-sanitizer synccheck: "Barrier overflow"): the consumers could
read staged scales before their cp.async copies land. Runs in a subprocess without TRITON_INTERPRET."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "compile_check_fp8.py")


def test_ready_barriers_count_every_arrival():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, SCRIPT, "--barriers"], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(report) == 5
    staged = [name for name, facts in report.items() if facts["cp_async_arrives"]]
    assert len(staged) == 4, report  # the variants that stage scales by cp.async were compiled as such
    for name, facts in report.items():
        assert not facts["problems"], f"{name}: {facts['problems']}"
