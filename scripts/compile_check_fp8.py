"""FP8-specific compile checks of the warp-specialised Gluon kernel for sm_90a (no GPU needed), on top of
scripts/compile_check.py (whose compile helpers it imports).

    python scripts/compile_check_fp8.py --barriers   # JSON: mbarrier init counts against the arrivals they get

--barriers: every variant's stage barriers must be initialised for exactly the arrivals one phase receives. The
producer's `ready` barrier gets one arrive.expect_tx from one elected thread, plus, where the producer stages scales
by cp.async (1D1D B scales, or the one-wave kernel's 1D2D scales), one `cp.async.mbarrier.arrive.noinc` per thread
of the producer warp per K block. `.noinc` arrivals must be counted at init; the incrementing form raises the
pending count of the current phase instead, which compute-sanitizer's synccheck reports as a barrier overflow
(gemm_ws._ready_arrivals). The report lists, per variant, the init counts found in the PTX, the cp.async
arrive forms, and whether they agree.

Run without TRITON_INTERPRET (the interpreter cannot compile warp-specialised kernels).
"""

from __future__ import annotations

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_check import compile_fp8_gemm_ws  # noqa: E402

# One variant per way the producer can feed a stage: TMA only, TMA + staged 1D2D scales, TMA + staged 1D1D B scales.
BARRIER_VARIANTS = {
    "two-wave 128x256 dense (TMA only)": (dict(waves=2, wave_n=True, stages=4), False),
    "one-wave 128x64 dense, staged 1D2D scales": (dict(bn=64, stages=8, scales_smem=True), True),
    "one-wave 128x128 masked, staged 1D2D scales": (dict(stages=5, grouping=3, d_tma=True, scales_smem=True), True),
    "two-wave 128x256 1D1D (staged B scales)": (dict(waves=2, wave_n=True, stages=3, b_per_row=True, out="fp32"),
                                                True),
    "two-wave 128x256 K-grouped 1D1D (staged B scales)": (
        dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True, grouping=4,
             d_tma=True), True),
}

INIT = re.compile(r"^\s*(@%p\d+\s+)?mbarrier\.init\.shared(?:::cta)?\.b64\s+\[[^\]]+\],\s*(\d+);", re.M)
CP_ASYNC_ARRIVE = re.compile(r"^\s*(@!?%p\d+\s+)?(cp\.async\.mbarrier\.arrive[\w.:]*)", re.M)
EXPECT_TX = re.compile(r"^\s*(@!?%p\d+\s+)?mbarrier\.arrive\.expect_tx", re.M)


def barrier_facts(ptx: str, stages: int) -> dict:
    """What the PTX says about the stage barriers: init counts (in order), cp.async arrive forms and predicates."""
    inits = [int(m.group(2)) for m in INIT.finditer(ptx)]
    arrives = [(m.group(1) or "").strip() + " " + m.group(2) for m in CP_ASYNC_ARRIVE.finditer(ptx)]
    expects = [(m.group(1) or "").strip() for m in EXPECT_TX.finditer(ptx)]
    # The kernel initialises (ready, empty) pairs, one per stage, first.
    ready = inits[0:2 * stages:2]
    empty = inits[1:2 * stages:2]
    return dict(ready_counts=sorted(set(ready)), empty_counts=sorted(set(empty)), cp_async_arrives=arrives,
                expect_tx_predicated=all(expects) and bool(expects))


def check_barriers() -> dict:
    from deep_gemm.gemm.fp8.kernels.ws_mainloop import PRODUCER_THREADS
    report = {}
    for name, (cfg, staged) in BARRIER_VARIANTS.items():
        facts = barrier_facts(compile_fp8_gemm_ws(**cfg).asm["ptx"], cfg["stages"])
        sites = len(facts["cp_async_arrives"])
        expected_ready = 1 + PRODUCER_THREADS.value * sites
        problems = []
        if staged != (sites > 0):
            problems.append(f"{sites} cp.async arrive sites, expected {'some' if staged else 'none'}")
        if any(".noinc" not in a for a in facts["cp_async_arrives"]):
            problems.append("a cp.async arrive without .noinc")
        if any(a.startswith("@") for a in facts["cp_async_arrives"]):
            problems.append("a predicated cp.async arrive (every producer thread must arrive)")
        if facts["ready_counts"] != [expected_ready]:
            problems.append(f"ready barriers initialised for {facts['ready_counts']}, one phase gets {expected_ready}")
        if facts["empty_counts"] != [2]:
            problems.append(f"empty barriers initialised for {facts['empty_counts']}, expected 2 (consumers)")
        if not facts["expect_tx_predicated"]:
            problems.append("arrive.expect_tx not issued by one elected thread")
        report[name] = dict(facts, expected_ready=expected_ready, problems=problems)
    return report


if __name__ == "__main__" and "--barriers" in sys.argv:
    print(json.dumps(check_barriers()))


# The psum layout's variants: two-wave 128 x 256, split 128 x 192, one-wave; with and without zeroed gaps.
PSUM_VARIANTS = {
    "two-wave 128x256 psum": dict(waves=2, wave_n=True, stages=4, grouping=2),
    "two-wave 128x256 psum, gaps unspecified": dict(waves=2, wave_n=True, stages=4, grouping=2, zero_gaps=False),
    "split 128x192 psum": dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=2),
    "one-wave 128x128 psum": dict(stages=5, grouping=2),
    "one-wave 128x64 psum, staged scales, gaps unspecified": dict(bn=64, stages=8, grouping=2, scales_smem=True,
                                                                  zero_gaps=False),
}

# K-grouped with per-group descriptors built on the device (Fp8Overrides.k_grouped_device_descriptors).
PSUM_VARIANTS["two-wave 128x256 K-grouped 1D1D, per-group descriptors"] = dict(
    waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True, grouping=4, d_tma=True,
    kg_desc=True)

# The carried tile walk (Fp8Overrides.tile_walk) on the psum and masked variants the plan picks.
PSUM_VARIANTS.update({
    "two-wave 128x256 psum, walk": dict(waves=2, wave_n=True, stages=4, grouping=2, walk=True),
    "two-wave 128x256 psum, gaps unspecified, walk": dict(waves=2, wave_n=True, stages=4, grouping=2,
                                                          zero_gaps=False, walk=True),
    "split 128x192 psum, walk": dict(waves=2, wave_n=True, narrow=64, stages=4, grouping=2, walk=True),
    "one-wave 128x128 psum, walk": dict(stages=5, grouping=2, walk=True),
    "two-wave 128x256 masked, walk": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True, walk=True,
                                          g_pad=32),
    "two-wave 128x256 masked": dict(waves=2, wave_n=True, stages=4, grouping=3, d_tma=True, g_pad=32),
})

if __name__ == "__main__" and "--psum" in sys.argv:
    from compile_check import ptxas_info, resource_usage, sass_counts
    only = os.environ.get("ONLY", "")  # a substring of the variant names to build (e.g. ONLY=walk)
    for name, cfg in PSUM_VARIANTS.items():
        if only not in name:
            continue
        ck = compile_fp8_gemm_ws(**cfg)
        print(f"{name:56s} smem {ck.metadata.shared} {resource_usage(ck.asm['cubin'])} "
              f"serialised={'C7514' in ptxas_info(ck.asm['ptx'])} {sass_counts(ck.asm['cubin'])}", flush=True)
