"""A/B of the BF16 psum layout on the warp-specialised kernel (bf16_plan.AUTO_WS_PSUM, Bf16Overrides.uniform_tiles)
on DeepGEMM's M-grouped contiguous rows (tests/test_bf16.py: G=4 x 8192 and G=8 x 4096 expected rows, sizes
0.7-1.3 x, N, K in (6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048); gaps left untouched as DeepGEMM's SM90
calls leave them), one process, one timer (benchmarks/harness.KernelTimer: kernels only, L2 flushed). Inputs are
benchmarks/bench_bf16_gemm.contiguous_inputs' (seed 0), so the rows are the same-call bench's.

Variants (each checked against an FP32 torch reference, calc_diff < 1e-5 per group; gap rows must keep their
sentinel; the ws ones must equal `plan` bit for bit on every row of D):
  plan     the shipped plan: the tl.* kernel, 128 x 128 tiles, pointer epilogue (psum gaps untouched: no TMA store)
  ws       Bf16Overrides(ws=True): the WS kernel's 128 x 256 tiles, whole slabs by TMA, a group's end by pointers
  ws_uni   the same with the tile's expert and group end marked warp-uniform (uniform_tiles=True)
  ids      the same problem in the expert-id layout on the shipped plan (the WS kernel): the target (DeepGEMM runs
           both layouts within 1 % of each other on these rows, H200, session 23)

    python research/probes/bf16_psum_ab.py [--reps 10]       (H200: ~1-2 min incl. compiles)
    python research/probes/bf16_psum_ab.py --compile         (no GPU, no TRITON_INTERPRET: sm_90a K-loop facts)

--compile: per build, registers, spilled bytes and, per innermost K loop (a backward branch around wgmmas in the
consumers, around TMA loads in the producer), its instructions, R2UR moves and uniform-datapath instructions.

One line per row: each variant's us and plan / variant (> 1: faster than the plan), then the geomean per variant.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
for _p in (ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "scripts")):
    sys.path.insert(0, _p)

CONTIGUOUS = [(4, 8192), (8, 4096)]
GROUPED_NK = [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]
SENTINEL = 7.0
LIMIT = 1e-5  # DeepGEMM's calc_diff bar for BF16 GEMMs


def variants():
    from deep_gemm.gemm.bf16_plan import Bf16Overrides
    return {"plan": (True, None), "ws": (True, Bf16Overrides(ws=True, uniform_tiles=False)),
            "ws_uni": (True, Bf16Overrides(ws=True, uniform_tiles=True)), "ids": (False, None)}


# (name, scripts/compile_check.compile_* arguments): the plan's tl.* build of these rows, and the WS builds.
COMPILE_VARIANTS = [
    ("tl psum untouched 128x128 (plan)", "tl", dict(bm=128, bn=128, warps=8, stages=6, grouping=2, d_tma=False,
                                                   zero_gaps=False)),
    ("ws ids 128x256 (ids plan)", "ws", dict(bn=256, stages=3, grouping=1)),
    ("ws psum zeroed", "ws", dict(bn=256, stages=3, grouping=2)),
    ("ws psum zeroed uniform", "ws", dict(bn=256, stages=3, grouping=2, uniform=True)),
    ("ws psum untouched", "ws", dict(bn=256, stages=3, grouping=2, zero_gaps=False)),
    ("ws psum untouched uniform", "ws", dict(bn=256, stages=3, grouping=2, zero_gaps=False, uniform=True)),
]
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")


def inner_loops(sass: str, needle: str):
    """Bodies (opcode lists) of the innermost backward branches whose body holds `needle` (out-of-line barrier
    retries, which jump back into a loop from past the kernel's EXIT, are left out)."""
    labels, insts = {}, []
    for line in sass.splitlines():
        label = re.match(r"\s*\.L_x_(\d+):", line)
        if label:
            labels[label.group(1)] = len(insts)
        elif _LINE.search(line):
            insts.append(_LINE.search(line).group(2))
    loops = []
    for i, text in enumerate(insts):
        target = re.search(r"BRA\s+`?\(?\.L_x_(\d+)", text)
        if target and labels.get(target.group(1), i + 1) <= i:
            body = insts[labels[target.group(1)]:i + 1]
            if any(needle in t for t in body) and not any("EXIT" in t for t in body):
                loops.append((labels[target.group(1)], i, body))
    return [b for s, e, b in loops if not any((s2, e2) != (s, e) and s <= s2 and e2 <= e for s2, e2, _ in loops)]


def loop_facts(body) -> str:
    ops = [t.split()[1] if t.startswith("@") else t.split()[0] for t in body]
    return f"{len(ops)}i/{sum(o.startswith('R2UR') for o in ops)}r2ur/{sum(o.startswith('U') for o in ops)}u"


def compile_report():
    import compile_check as cc
    sys.path.insert(0, HERE)
    from ws_loop_spills import sass_of
    for name, kind, cfg in COMPILE_VARIANTS:
        ck = cc.compile_bf16_gemm(**cfg) if kind == "tl" else cc.compile_bf16_gemm_ws(**cfg)
        sass = sass_of(ck.asm["cubin"])
        usage = cc.resource_usage(ck.asm["cubin"])
        regs, spilled = usage.split("REG:")[1].split()[0], cc.spilled_bytes(ck.asm["cubin"])
        mma = " ".join(loop_facts(b) for b in inner_loops(sass, "HGMMA"))
        loads = " ".join(loop_facts(b) for b in inner_loops(sass, "UTMALDG")) if kind == "ws" else "-"
        print(f"{name:34s} regs {regs:>3s} spilled {spilled:3d} B  K loops: mma {mma}  producer {loads}",
              flush=True)


def rows():
    """(label, flops, {variant: (run, d, psum)}, (a, b, group starts, group ends)) of each row, one at a time."""
    import torch
    from bench_bf16_gemm import contiguous_inputs

    from deep_gemm.gemm import bf16_triton
    for g, per_group in CONTIGUOUS:
        for n, k in GROUPED_NK:
            ms, starts, ends, a, b, ids, psum_ends = contiguous_inputs(g, per_group, n, k)
            calls = {}
            for name, (psum, over) in variants().items():
                d = torch.full((a.size(0), n), SENTINEL, device="cuda", dtype=torch.bfloat16)
                layout = psum_ends if psum else ids
                kw = {} if over is None else {"overrides": over}

                def run(d=d, layout=layout, psum=psum, kw=kw):
                    result = bf16_triton.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, "nk", psum, False, **kw)
                    assert result is not NotImplemented, "the launcher declined"
                calls[name] = (run, d, psum)
            yield f"G={g} m={sum(ms)} n={n} k={k}", 2 * sum(ms) * n * k, calls, (a, b, starts, ends)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="sm_90a builds only (no GPU)")
    args = parser.parse_args(argv)
    if args.compile:
        compile_report()
        return 0
    import torch
    from harness import KernelTimer

    from deep_gemm.gemm import bf16_plan
    from deep_gemm.testing import calc_diff
    print(f"defaults: AUTO_WS_PSUM={bf16_plan.AUTO_WS_PSUM} UNIFORM_TILES={bf16_plan.UNIFORM_TILES}", flush=True)
    timer = KernelTimer(reps=args.reps)
    t0 = time.time()
    ratios = {}
    for label, flops, calls, (a, b, starts, ends) in rows():
        valid = torch.zeros(a.size(0), dtype=torch.bool, device="cuda")
        for s, e in zip(starts, ends):
            valid[s:e] = True
        refs = [a[s:e].float() @ b[i].float().T for i, (s, e) in enumerate(zip(starts, ends))]
        base, times, line = None, {}, []
        for v, (run, d, psum) in calls.items():
            run()
            torch.cuda.synchronize()
            flag = ""
            if max(calc_diff(d[s:e], r) for (s, e), r in zip(zip(starts, ends), refs)) >= LIMIT:
                flag += "!WRONG"
            if psum and not torch.all(d[~valid] == SENTINEL):
                flag += "!GAPS"
            if v == "plan":
                base = d.clone()
            elif psum and not torch.equal(d, base):
                flag += "!DIFF"
            elif not psum and not torch.equal(d[valid], base[valid]):
                flag += "(bits differ)"  # (ids: another layout; informative only)
            times[v] = min(timer(run), timer(run))
            line.append(f"{v} {times[v]:7.1f}{flag}")
        rel = {v: times["plan"] / t for v, t in times.items() if v != "plan"}
        for v, r in rel.items():
            ratios.setdefault(v, []).append(r)
        print(f"{label:34s} " + "  ".join(line) + "  | plan/x: " + " ".join(f"{v} {r:.3f}" for v, r in rel.items())
              + f" | ws_uni/ids {times['ids'] / times['ws_uni']:.3f}", flush=True)
        del refs
    print(f"({time.time() - t0:.0f} s)  geomean plan / variant:")
    for v, rs in ratios.items():
        gm = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"  {v:7s} {gm:.3f}x over {len(rs)} rows (min {min(rs):.3f}x, max {max(rs):.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
