"""sm_90a SASS fingerprints of the warp-specialised FP8 kernel's shipped variants, built on the CPU: one line per
build (SHA-1 of the listing without addresses and encodings, instruction count). Run it at two revisions and diff
the outputs to show that a kernel change leaves the other variants' code unchanged.

    python research/probes/ws_sass_fingerprint.py [--extra 'dict(...)' ...] > fingerprints.txt
"""
import argparse
import hashlib
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts"), os.path.dirname(os.path.abspath(__file__))]

from compile_check import compile_fp8_gemm_ws  # noqa: E402
from ws_loop_spills import sass_of  # noqa: E402

TWO = dict(waves=2, wave_n=True, stages=4)
ONE_D_ONE_D = dict(waves=2, wave_n=True, stages=3, b_per_row=True, out="fp32")
BUILDS = {
    "dense 1D2D two-wave": dict(TWO),
    "dense 1D2D split 128x192": dict(TWO, narrow=64),
    "dense 1D2D one-wave split-K 4": dict(stages=6, scales_smem=True, split_k=4),
    "m_ids two-wave": dict(TWO, grouping=1),
    "m_psum two-wave stagger 1 walk": dict(TWO, grouping=2, stagger=1, walk=True, uniform=True),
    "masked two-wave walk": dict(TWO, grouping=3, walk=True),
    "1D1D dense C by TMA": dict(ONE_D_ONE_D, has_c=True, c_tma=True),
    "1D1D dense no C": dict(ONE_D_ONE_D),
    "1D1D K-grouped descriptors": dict(ONE_D_ONE_D, has_c=True, c_tma=True, grouping=4, d_tma=True,
                                       kg_desc=True),
}


def fingerprint(cfg: dict) -> str:
    sass = sass_of(compile_fp8_gemm_ws(**cfg).asm["cubin"])
    lines = []
    for line in sass.splitlines():
        text = re.sub(r"/\*[0-9a-fx]+\*/", "", line.split(";")[0]).strip()
        if text and not text.startswith("/*"):
            lines.append(text)
    return f"{hashlib.sha1(chr(10).join(lines).encode()).hexdigest()[:16]} {len(lines)} instructions"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", action="append", default=[], help="more builds, as Python dict literals of "
                    "compile_check.compile_fp8_gemm_ws's arguments")
    args = ap.parse_args(argv)
    builds = dict(BUILDS)
    builds.update({e: eval(e) for e in args.extra})  # noqa: S307 (a research probe's command line)
    for name, cfg in builds.items():
        print(f"{name:40s} {fingerprint(cfg)}", flush=True)


if __name__ == "__main__":
    main()
