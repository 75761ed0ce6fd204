"""The warp-specialised prefill indexer kernel (attention/prefill_ws.py) compiles for sm_90a (no GPU needed) in every
variant the launcher can send it, within its register budgets and with its barriers initialised for the arrivals
they get. Runs scripts/compile_check_indexer.py --ws --json in a subprocess without TRITON_INTERPRET (the interpreter
cannot compile warp specialisation); the kernel's numerics are tested on the GPU (test_attention_triton.py,
test_gpu_prefill_ws_*)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "compile_check_indexer.py")
SM90_SHARED_BYTES = 227 * 1024


def test_prefill_ws_variants_compile_without_spills_and_with_matching_barriers():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, SCRIPT, "--ws", "--json"], capture_output=True, text=True, env=env,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(report) >= 10
    for key, facts in report.items():
        cfg = json.loads(key)
        consumers, stages = cfg.get("consumers", 2), cfg.get("stages", 4)
        # No local memory at all (a spill would sit in the KV loop or the per-item setup of a consumer).
        assert facts["spill"] == 0 and facts["sass"]["LDL"] == 0 and facts["sass"]["STL"] == 0, (cfg, facts)
        assert facts["sass"]["QGMMA"] > 0 and facts["sass"]["UTMALDG"] == 2, (cfg, facts)
        assert facts["smem"] <= SM90_SHARED_BYTES, (cfg, facts)
        # One CTA per SM: the threads (consumer warpgroups + the producer's warpgroup) share 65536 registers.
        assert facts["regs"] * 128 * (consumers + 1) <= 65536, (cfg, facts)
        # Q ready / Q empty (one arrival per consumer) per Q buffer, then ready / empty per stage (one each).
        assert facts["barrier_inits"] == [1, consumers] * 2 + [1, 1] * stages, (cfg, facts)
        assert facts["arrives_predicated"] and facts["arrive_sites"] == 2 * consumers, (cfg, facts)
