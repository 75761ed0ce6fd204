"""A/B of K-grouped BF16 (k_grouped_bf16_gemm_tn_contiguous) on the warp-specialised kernel
(bf16_plan.AUTO_WS_K_GROUPED, Bf16Overrides(ws=True)) and of the tl.* kernel's warp-uniform K range (UNIFORM_K_GROUPED_TL, uniform_tiles), on
benchmarks/bench_bf16_gemm.K_GROUPED's rows with its operands (random.seed(0) K sizes 0.7-1.3 x, multiples of 128;
randn A [sum K, M], B [sum K, N], FP32 C), one process, one timer (benchmarks/harness.KernelTimer: kernels only, L2
flushed). Timed as the bench times it: C is D, accumulating in place.

Variants (each checked against an FP32 torch reference, calc_diff < 1e-5; each run twice with a separate C into two
D's that must be equal bit for bit; the tl_uni ones must equal `plan` bit for bit):
  plan      the shipped plan (the tl.* kernel, 128 x 128, pointer epilogue, unless the defaults were flipped)
  tl_uni    the tl.* kernel with its K range marked warp-uniform (Bf16Overrides(ws=False, uniform_tiles=True))
  ws        the WS kernel: 128 x 128, 5 stages, FP32 C and D by TMA, K range marked warp-uniform
  ws_nouni  the same unmarked (uniform_tiles=False)

    python research/probes/bf16_kgrouped_ab.py [--reps 10]       (H200: ~1 min incl. compiles)
    python research/probes/bf16_kgrouped_ab.py --compile         (no GPU, no TRITON_INTERPRET: sm_90a K-loop facts)

--compile: per build, registers, spilled bytes and, per innermost K loop (a backward branch around wgmmas in the
consumers, around TMA loads in the WS producer), its instructions, R2UR moves and uniform-datapath instructions; the
dense build of the same tile (MN-major A and B, FP32 C) is the target.

One line per row: each variant's us (TFLOPS) and plan / variant (> 1: faster than the plan), then the geomean.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
for _p in (ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "scripts"), HERE):
    sys.path.insert(0, _p)

LIMIT = 1e-5  # DeepGEMM's calc_diff bar for BF16 GEMMs
OP = "k_grouped_bf16_gemm_tn_contiguous"

# (name, kind, scripts/compile_check arguments): the plan's tl.* build (bench rows: 5 or 6 stages; 5 here, as the
# dense target), and the WS kernel's 128 x 128 FP32-C build, dense (tn) against K-grouped.
_TL = dict(bm=128, bn=128, warps=8, stages=5, out="fp32", has_c=True, d_tma=False, a_k_major=False, b_k_major=False)
_WS = dict(bn=128, stages=5, has_c=True, out="float32", a_k_major=False, b_k_major=False)
COMPILE_VARIANTS = [
    ("tl dense tn", "tl", dict(_TL, grouping=0)),
    ("tl k_grouped", "tl", dict(_TL, grouping=4)),
    ("tl k_grouped uniform", "tl", dict(_TL, grouping=4, uniform=True)),
    ("ws dense tn", "ws", dict(_WS, grouping=0)),
    ("ws k_grouped", "ws", dict(_WS, grouping=4)),
    ("ws k_grouped uniform", "ws", dict(_WS, grouping=4, uniform=True)),
    ("ws k_grouped uniform, no C", "ws", dict(_WS, grouping=4, uniform=True, has_c=False)),
]


def variants():
    from deep_gemm.gemm.bf16_plan import Bf16Overrides
    return {"plan": None, "tl_uni": Bf16Overrides(ws=False, uniform_tiles=True),
            "ws": Bf16Overrides(ws=True, uniform_tiles=True), "ws_nouni": Bf16Overrides(ws=True, uniform_tiles=False)}


def compile_report():
    import compile_check as cc
    from bf16_psum_ab import inner_loops, loop_facts
    from ws_loop_spills import sass_of

    def build(item):
        name, kind, cfg = item
        return cc.compile_bf16_gemm(**cfg) if kind == "tl" else cc.compile_bf16_gemm_ws(**cfg)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for (name, kind, _), ck in zip(COMPILE_VARIANTS, pool.map(build, COMPILE_VARIANTS)):
            sass = sass_of(ck.asm["cubin"])
            regs = cc.resource_usage(ck.asm["cubin"]).split("REG:")[1].split()[0]
            mma = " ".join(loop_facts(b) for b in inner_loops(sass, "HGMMA"))
            loads = " ".join(loop_facts(b) for b in inner_loops(sass, "UTMALDG")) if kind == "ws" else "-"
            print(f"{name:28s} regs {regs:>3s} spilled {cc.spilled_bytes(ck.asm['cubin']):3d} B  K loops: mma {mma}"
                  f"  producer {loads}", flush=True)


def operands(g, m, n, k_per):
    """bench_bf16_gemm.bench_k_grouped's operands and the FP32 reference D = C + A_g^T B_g."""
    from bench_bf16_gemm import k_grouped_inputs
    return k_grouped_inputs(g, m, n, k_per)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="sm_90a builds only (no GPU)")
    args = parser.parse_args(argv)
    if args.compile:
        compile_report()
        return 0
    import torch
    from bench_bf16_gemm import K_GROUPED
    from harness import KernelTimer, calc_diff

    from deep_gemm._ops.library import run_launcher
    from deep_gemm.gemm import bf16_plan
    print(f"defaults: AUTO_WS_K_GROUPED={bf16_plan.AUTO_WS_K_GROUPED} UNIFORM_TILES={bf16_plan.UNIFORM_TILES} "
          f"UNIFORM_K_GROUPED_TL={bf16_plan.UNIFORM_K_GROUPED_TL}", flush=True)
    t0 = time.time()
    rows = []
    for g, m, n, k_per in K_GROUPED:
        ks, a, b, c, layout, ref = operands(g, m, n, k_per)
        rows.append((f"G={g:2d} M={m} N={n} sumK={sum(ks)}", 2 * m * n * sum(ks), ks, a, b, c, layout, ref))

    def run(row, over, d, c):
        _, _, ks, a, b, _, layout, _ = row
        kw = {} if over is None else {"overrides": over}
        result = run_launcher(OP, a, b, d, ks, layout, c, "mn", False, launcher_kwargs=kw)
        assert result is not NotImplemented, "the launcher declined"

    # First calls (compiles) in parallel threads, each into its own D with a separate C.
    errors = {}
    scratch = {}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = {}
        for row in rows:
            for v, over in variants().items():
                d = torch.empty_like(row[5])
                scratch[(row[0], v)] = d
                futures[pool.submit(run, row, over, d, row[5])] = (row[0], v)
        for f in concurrent.futures.as_completed(futures):
            if f.exception() is not None:
                errors[futures[f]] = repr(f.exception())[:300]
    torch.cuda.synchronize()
    scratch.clear()
    print(f"compiled in {time.time() - t0:.0f} s; {len(errors)} variant calls failed", flush=True)
    for key, err in errors.items():
        print(f" ! {key}: {err}")
    timer = KernelTimer(reps=args.reps)
    ratios, tflops = {}, {}
    for row in rows:
        label, flops, _, _, _, c, _, ref = row
        base, times, line = None, {}, []
        for v, over in variants().items():
            if (label, v) in errors:
                continue
            d = c.clone()  # (C is D, as the bench and DeepGEMM's test call it)
            run(row, over, d, d)
            torch.cuda.synchronize()
            flag = "" if calc_diff(d, ref) < LIMIT else "!WRONG"
            outs = []
            for _ in range(2):
                outs.append(torch.full_like(c, float("nan")))
                run(row, over, outs[-1], c)
            torch.cuda.synchronize()
            if not torch.equal(outs[0], outs[1]):
                flag += "!UNSTABLE"
            if v == "plan":
                base = outs[0]
            elif v == "tl_uni" and base is not None and not torch.equal(outs[0], base):
                flag += "!DIFF"
            del outs
            times[v] = min(timer(lambda: run(row, over, d, d)), timer(lambda: run(row, over, d, d)))
            tflops.setdefault(v, []).append(flops / times[v] / 1e6)
            line.append(f"{v} {times[v]:8.1f} ({flops / times[v] / 1e6:4.0f}){flag}")
        rel = {v: times["plan"] / t for v, t in times.items() if v != "plan" and "plan" in times}
        for v, r in rel.items():
            ratios.setdefault(v, []).append(r)
        print(f"{label:32s} " + "  ".join(line) + "  | plan/x: " + " ".join(f"{v} {r:.3f}" for v, r in rel.items()),
              flush=True)
    print(f"({time.time() - t0:.0f} s)  geomean plan / variant (TFLOPS):")
    for v, rs in ratios.items():
        gm = math.exp(sum(map(math.log, rs)) / len(rs))
        tf = math.exp(sum(map(math.log, tflops[v])) / len(tflops[v]))
        print(f"  {v:9s} {gm:.3f}x over {len(rs)} rows (min {min(rs):.3f}x, max {max(rs):.3f}x), {tf:.0f} TFLOPS")
    if "plan" in tflops:
        print(f"  plan      {math.exp(sum(map(math.log, tflops['plan'])) / len(tflops['plan'])):.0f} TFLOPS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
