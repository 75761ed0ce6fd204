"""Spill instructions inside the warp-specialised FP8 kernel's K loops (sm_90a, no GPU): for each variant, every
backward branch whose body holds a wgmma (QGMMA) is a K loop; count the local loads/stores (LDL/STL) between its
target and the branch. Spills outside those loops (once per tile) cost little; inside, they cost every K block.

    python research/probes/ws_loop_spills.py [substring of the variant names]     (without TRITON_INTERPRET)
"""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import triton  # noqa: E402
from compile_check_fp8 import PSUM_VARIANTS, compile_ws  # noqa: E402

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRA = re.compile(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))")


def sass_of(cubin: bytes) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-hex", "-c", f.name], capture_output=True, text=True).stdout


def labelled_instructions(sass: str):
    """({label: index of the instruction it names}, [(address, instruction text)]) of nvdisasm's listing."""
    labels, insts = {}, []
    for line in sass.splitlines():
        lab = re.match(r"\s*\.L_x_(\d+):", line)
        if lab:
            labels[lab.group(1)] = len(insts)
            continue
        m = LINE.search(line)
        if m:
            insts.append((int(m.group(1), 16), m.group(2)))
    return labels, insts


def loop_spills(sass: str, weights=(1, 1, 2, 2)):
    """[(start, end, wgmmas, LDL, STL)] of every backward branch whose body holds a wgmma."""
    labels, insts = labelled_instructions(sass)
    loops = []
    for i, (_, text) in enumerate(insts):
        if "BRA" not in text:
            continue
        target = re.search(r"\.L_x_(\d+)", text)
        if not target or labels.get(target.group(1), i + 1) > i:
            continue
        body = [t for _, t in insts[labels[target.group(1)]:i + 1]]
        q = sum("QGMMA" in t for t in body)
        if q:
            loops.append((labels[target.group(1)], i, q, sum("LDL" in t for t in body), sum("STL" in t for t in body)))
    return loops


if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, cfg in PSUM_VARIANTS.items():
        if only in name:
            ck = compile_ws(**cfg)
            print(f"{name:52s}", [(q, ldl, stl) for _, _, q, ldl, stl in loop_spills(sass_of(ck.asm["cubin"]))],
                  "(wgmma, LDL, STL) per K loop", flush=True)
