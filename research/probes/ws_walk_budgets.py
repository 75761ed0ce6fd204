"""The register budget ws_register_budget picks for the psum / masked variants the MoE sweep runs, with the per-tile
scan and with the carried walk (Fp8Overrides.tile_walk), and the spill instructions inside their K loops (sm_90a,
no GPU). Results: research/moe-scheduling.md.

    python research/probes/ws_walk_budgets.py      (without TRITON_INTERPRET)
"""

import os
import sys

HERE = os.path.dirname(__file__)
for p in (os.path.join(HERE, "..", "..", "scripts"), HERE, os.path.join(HERE, "..", "..")):
    sys.path.insert(0, p)

from compile_check import spilled_bytes  # noqa: E402
from compile_check_fp8 import compile_ws  # noqa: E402
from ws_loop_spills import loop_spills, sass_of  # noqa: E402

from deep_gemm.gemm.fp8_plan import ws_register_budget  # noqa: E402

cases = {
 "psum rows 2w nozg gpad4": dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False, g_pad=4),
 "psum rows 2w nozg gpad8": dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False, g_pad=8),
 "decode 2w zg gpad32": dict(waves=2, wave_n=True, stages=4, grouping=2, g_pad=32),
 "decode split zg gpad8": dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=2, g_pad=8),
 "masked 2w gpad32": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True, g_pad=32),
 "masked 2w gpad8": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True, g_pad=8),
}
for name, cfg in cases.items():
    for walk in (False, True):
        builds = {}
        def spills(b):
            ck = compile_ws(consumer_regs=b[0], producer_regs=b[1], walk=walk, **cfg)
            builds[b] = ck
            return spilled_bytes(ck.asm["cubin"]) // 4
        b = ws_register_budget(spills)
        ck = builds[b]
        ls = loop_spills(sass_of(ck.asm["cubin"]))
        inner = [l for l in ls if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in ls)]
        print(f"{name:26s} {'walk' if walk else 'scan'} budget {b} spilled {spilled_bytes(ck.asm['cubin'])} B, "
              f"innermost loops (wgmma, LDL, STL) {[(q, a, s) for _, _, q, a, s in inner]}", flush=True)
