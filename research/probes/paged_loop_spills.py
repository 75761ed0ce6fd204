"""Local-memory spills inside the indexer kernels' KV loops (sm_90a, compiled on the CPU, no GPU): for each variant,
every innermost backward branch whose body holds a wgmma is a page / KV-block loop; count the local loads and stores
(LDL/STL) between its target and the branch, and the SASS instructions of one trip (NOPs excluded). Spills outside
those loops cost once per atom or program; inside, once per page per warp (issue 17: Nsight Compute counted 4.19 M
spill requests on the paged row B=256 next_n=2 L=65536, ~4 per page per warp).

    python research/probes/paged_loop_spills.py [substring of the variant names]     (without TRITON_INTERPRET)
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

from compile_check import resource_usage  # noqa: E402
from compile_check_indexer import compile_paged_persistent, compile_prefill  # noqa: E402
from ws_loop_spills import labelled_instructions, sass_of  # noqa: E402

import re  # noqa: E402


def kv_loops(sass: str):
    """[(wgmmas, LDL, STL, instructions)] of the innermost loops holding a wgmma (QGMMA / HGMMA), in program order:
    backward branches whose [target, branch] range holds one and neither contains another such range (the atom loop
    around the page loop) nor starts inside one and ends past it (a wait-retry block placed after the loop that
    jumps back into it)."""
    labels, insts = labelled_instructions(sass)
    insts = [text for _, text in insts]
    ranges = []
    for i, text in enumerate(insts):
        target = re.search(r"BRA\s.*\.L_x_(\d+)", text)
        if target and labels.get(target.group(1), i + 1) <= i:
            start = labels[target.group(1)]
            if any("GMMA" in t for t in insts[start:i + 1]):
                ranges.append((start, i))
    loops = []
    for start, end in ranges:
        if any((s, e) != (start, end) and (start <= s and e <= end or s < start <= e < end) for s, e in ranges):
            continue
        body = [t for t in insts[start:end + 1] if not t.strip().startswith("NOP")]
        loops.append((sum("GMMA" in t for t in body), sum(bool(re.search(r"\bLDL\b", t)) for t in body),
                      sum(bool(re.search(r"\bSTL\b", t)) for t in body), len(body)))
    return loops


def facts(ck) -> str:
    usage = resource_usage(ck.asm["cubin"])
    regs = usage.split("REG:")[1].split()[0]
    stack = usage.split("STACK:")[1].split()[0]
    sass = sass_of(ck.asm["cubin"])
    total_ldl = len(re.findall(r"\bLDL\b", sass))
    total_stl = len(re.findall(r"\bSTL\b", sass))
    loops = kv_loops(sass)
    return (f"regs {regs:>3} stack {stack:>3} LDL/STL all {total_ldl}/{total_stl} "
            f"loops (wgmma, LDL, STL, insts) {loops}")


# The paged defaults (triton_launch.paged_default_config) and the levers of issue 17, as compile_paged_persistent
# arguments: FP8 H=64 D=128 block_kv=64 two-row atoms (7 stages, 16-byte Q, cap 128), next_n=1, H=32, FP4.
PAGED = {
    "rowpair default (s7 q16 cap128)": dict(stages=7, q_align=16, maxnreg=128),
    "rowpair uncapped (s7 q16)": dict(stages=7, q_align=16),
    "rowpair row_dots cap128": dict(stages=7, q_align=16, row_dots=True, maxnreg=128),
    "rowpair clean 1d cap128": dict(stages=7, q_align=16, maxnreg=128, clean=True, ctx_2d=False),
    "rowpair bf16 cap128": dict(stages=7, q_align=16, maxnreg=128, out="bf16"),
    "next_n=1 default (s5 q16)": dict(rows=1, atom_rows=1, stages=5, q_align=16),
    "next_n=1 cap128": dict(rows=1, atom_rows=1, stages=5, q_align=16, maxnreg=128),
    "H=32 next_n=2 default (s5 q16)": dict(h=32, stages=5, q_align=16),
    "H=32 next_n=2 cap128": dict(h=32, stages=5, q_align=16, maxnreg=128),
    "FP4 default (s1)": dict(fp4=True, stages=1, q_align=16),
    "rowpair lean cap128": dict(stages=7, q_align=16, maxnreg=128, lean=True),
    "rowpair lean uncapped": dict(stages=7, q_align=16, lean=True),
    "rowpair lean clean 1d cap128": dict(stages=7, q_align=16, maxnreg=128, lean=True, clean=True, ctx_2d=False),
    "rowpair lean bf16 cap128": dict(stages=7, q_align=16, maxnreg=128, lean=True, out="bf16"),
    "rowpair lean no-TMA cap128": dict(stages=7, q_align=16, maxnreg=128, lean=True, tma=False),
    "rowpair lean cap128 s8": dict(stages=8, q_align=16, maxnreg=128, lean=True),
    "rowpair lean regsf cap128": dict(stages=7, q_align=16, maxnreg=128, lean=True, reg_scales=True),
    "rowpair lean regsf uncapped": dict(stages=7, q_align=16, lean=True, reg_scales=True),
    "rowpair lean regsf clean 1d cap128": dict(stages=7, q_align=16, maxnreg=128, lean=True, reg_scales=True,
                                               clean=True, ctx_2d=False),
    "next_n=1 lean (s5 q16)": dict(rows=1, atom_rows=1, stages=5, q_align=16, lean=True),
    "H=32 next_n=2 lean (s5 q16)": dict(h=32, stages=5, q_align=16, lean=True),
    "FP4 lean (s1)": dict(fp4=True, stages=1, q_align=16, lean=True),
}
# The prefill defaults (triton_launch.prefill_config): H >= 32 interior loop (lean) + cap 128, H < 32, FP4; "old": the
# interior loop before PrefillConfig.lean_interior.
PREFILL = {
    "prefill H=64 default (interior cap128)": dict(interior=True, maxnreg=128),
    "prefill H=64 interior uncapped": dict(interior=True),
    "prefill H=32 default (interior cap128)": dict(h=32, interior=True, maxnreg=128),
    "prefill H=64 compressed default": dict(interior=True, maxnreg=128, compressed=True),
    "prefill H=64 bf16 default": dict(interior=True, maxnreg=128, out="bf16"),
    "prefill H=64 fma_relu cap128": dict(interior=True, maxnreg=128, fma_relu=True),
    "prefill H=64 old interior cap128": dict(interior=True, maxnreg=128, lean=False),
    "prefill H=64 old interior uncapped": dict(interior=True, lean=False),
    "prefill H=32 old interior cap128": dict(h=32, interior=True, maxnreg=128, lean=False),
    "prefill H=64 old compressed cap128": dict(interior=True, maxnreg=128, compressed=True, lean=False),
    "prefill H=64 old bf16 cap128": dict(interior=True, maxnreg=128, out="bf16", lean=False),
    "prefill H=16 default": dict(h=16, d=64),
    "prefill FP4 default (s2)": dict(fp4=True, stages=2),
}

if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, cfg in PAGED.items():
        if only in name:
            print(f"paged   {name:40s}", facts(compile_paged_persistent(**cfg)), flush=True)
    for name, cfg in PREFILL.items():
        if only in name:
            print(f"prefill {name:40s}", facts(compile_prefill(**cfg)), flush=True)
