"""A/B of `m_grouped_bf16_gemm_nt_masked` on the warp-specialised kernel (kernels/bf16_gemm_ws.py, GROUPING MASKED;
bf16_plan.AUTO_WS_MASKED) against the shipped plan, on benchmarks/bench_bf16_gemm.py's MASKED rows with at least
128 expected rows per group (G=32 x 192, G=6 x 1024; N, K in GROUPED_NK; Mmax 4096), one process, one timer
(benchmarks/harness.KernelTimer: kernels only, L2 flushed). Operands as bench_masked makes them: masked_m =
expected x 0.7-1.3 (random.seed(0)), A, B torch.randn.

Variants (each checked against an FP32 torch reference, calc_diff < 1e-5 per group, and D's rows past masked_m must
keep their starting bits):
  plan     the shipped plan (AUTO_WS_MASKED as shipped; with it off: the tl.* kernel, 64 x 256 at 192 rows, 128 x 128
           at 1024)
  ws128    Bf16Overrides(ws=True, block_n=128, uniform_tiles=True): the WS kernel's 128 x 128 tile, values warp-uniform
  ws256    the same on 128 x 256
  ws64x256 Bf16Overrides(ws=True, block_m=64, block_n=256, uniform_tiles=True): the 64 x 256 tile whose two consumers
           split its columns (the kernel's SPLIT_N; bf16_plan.AUTO_WS_MASKED_64)
  ws64x128 the same on 64 x 128
  splitN   Bf16Overrides(split_k=N) (N = 1, 2, 3, 4, 6, 8): the tl.* kernel's plan tile with the last, partial wave
           split at most N ways (bf16_plan.masked_split; the kernel cuts it into min(N, grid // its tiles) pieces):
           split1 is the plan before session 29 on the decode rows (20 expected rows: 32 x 128 tiles, unsplit)
Per row, `auto` names the WS tile bf16_plan picks with AUTO_WS_MASKED on (or tl), `auto64` the one with
AUTO_WS_MASKED_64 on too, and their geomeans are over the times of those choices. The last columns are DeepGEMM's
time on the row in session 28's call 7 (same H200 kind, another process: research/results/2026-12-03-h200-s28-call7/
bf16_dg/bench_bf16_gemm.json) over the auto and auto64 choices'.

    python research/probes/bf16_masked_ab.py [--reps 10]      (H200: ~1-2 min incl. compiles)
    python research/probes/bf16_masked_ab.py --rows 192       (only the G=32 x 192 rows: under a minute)
    python research/probes/bf16_masked_ab.py --rows 20 --groups 6   (the decode rows' split-K A/B: plan, split1..8)
    python research/probes/bf16_masked_ab.py --rows 20 --groups 32 --nk 6144x7168   (a many-tile control row)
    env $DGENV python research/probes/bf16_masked_ab.py --rows 20 --groups 6 --dg-out F.json   (DeepGEMM's times
        of the rows, same timer: run under research/scripts/device_call.sh's $DGENV; then --dg-json F.json gives the
        A/B these instead of session 28's)
    python research/probes/bf16_masked_ab.py --compile        (no GPU, no TRITON_INTERPRET: sm_90a K-loop facts)
    python research/probes/bf16_masked_ab.py --compile --rows 20   (only the decode tile's builds, split 1 / 2 / 4)

--compile: per build, registers, spilled bytes and, per innermost K loop (a backward branch around wgmmas in the
consumers, or mma.sync (HMMA) in the tl.* tiles of fewer than 64 rows, around TMA loads in the producer), its instructions, R2UR moves and uniform-datapath instructions; the
masked builds beside the expert-id builds of the same tile (the target) and the tl.* builds the plan runs today.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
for _p in (ROOT, os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "scripts"), HERE):
    sys.path.insert(0, _p)

LIMIT = 1e-5  # DeepGEMM's calc_diff bar for BF16 GEMMs
MIN_EXPECTED = 128
DG_JSON = os.path.join(ROOT, "research", "results", "2026-12-03-h200-s28-call7", "bf16_dg", "bench_bf16_gemm.json")

# (name, "tl" / "ws", scripts/compile_check.compile_* arguments). G_PAD is compile_check's 8; grouping 1 = expert
# ids, 3 = masked; WS stages as bf16_plan._ws_config gives them (BK 64, BF16 D): 3 at 128 x 256, 6 at 128 x 128.
COMPILE_VARIANTS = [
    # The decode rows' tile (20 expected rows per group; bf16_plan.MASKED_DECODE_TILE) unsplit and with its last wave
    # split (bf16_plan.masked_split: 4 at 6 x 6144 x 7168, 2 at 6 x 4096 x 4096).
    ("tl masked 32x128 (20 rows, split 1)", "tl", dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3,
                                                       d_tma=False)),
    ("tl masked 32x128 split 2", "tl", dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3, d_tma=False,
                                            split=2)),
    ("tl masked 32x128 split 4", "tl", dict(bm=32, bn=128, bk=128, warps=4, stages=5, grouping=3, d_tma=False,
                                            split=4)),
    ("tl masked 64x256 (plan, 192 rows)", "tl", dict(bm=64, bn=256, warps=4, stages=5, grouping=3, d_tma=False)),
    ("tl masked 128x128 (plan, 1024)", "tl", dict(bm=128, bn=128, warps=8, stages=6, grouping=3, d_tma=False)),
    ("ws ids 128x256 (target)", "ws", dict(bn=256, stages=3, grouping=1)),
    ("ws masked 128x256", "ws", dict(bn=256, stages=3, grouping=3)),
    ("ws masked 128x256 uniform", "ws", dict(bn=256, stages=3, grouping=3, uniform=True)),
    ("ws ids 128x128 (target)", "ws", dict(bn=128, stages=6, grouping=1)),
    ("ws masked 128x128", "ws", dict(bn=128, stages=6, grouping=3)),
    ("ws masked 128x128 uniform", "ws", dict(bn=128, stages=6, grouping=3, uniform=True)),
    ("ws ids 128x256 B mn (target)", "ws", dict(bn=256, stages=3, grouping=1, b_k_major=False)),
    ("ws masked 128x256 B mn uniform", "ws", dict(bn=256, stages=3, grouping=3, uniform=True, b_k_major=False)),
    # The 64-row tiles (SPLIT_N: each consumer 64 rows x BN/2 columns; _ws_config's rings: 4 and 8 stages).
    ("ws masked 64x256 split-N uniform", "ws", dict(bm=64, bn=256, stages=4, grouping=3, uniform=True)),
    ("ws masked 64x128 split-N uniform", "ws", dict(bm=64, bn=128, stages=8, grouping=3, uniform=True)),
    ("ws masked 64x256 split-N B mn unif", "ws", dict(bm=64, bn=256, stages=4, grouping=3, uniform=True,
                                                       b_k_major=False)),
]


def compile_report(decode_only=False):
    import compile_check as cc
    from bf16_psum_ab import inner_loops, loop_facts
    from ws_loop_spills import sass_of

    def build(item):
        name, kind, cfg = item
        ck = cc.compile_bf16_gemm(**cfg) if kind == "tl" else cc.compile_bf16_gemm_ws(**cfg)
        sass = sass_of(ck.asm["cubin"])
        regs = cc.resource_usage(ck.asm["cubin"]).split("REG:")[1].split()[0]
        needle = "HMMA" if kind == "tl" and cfg.get("bm", 128) < 64 else "HGMMA"
        mma = " ".join(loop_facts(b) for b in inner_loops(sass, needle))
        loads = " ".join(loop_facts(b) for b in inner_loops(sass, "UTMALDG")) if kind == "ws" else "-"
        return (f"{name:34s} regs {regs:>3s} spilled {cc.spilled_bytes(ck.asm['cubin']):3d} B  K loops: mma {mma}  "
                f"producer {loads}")
    builds = [v for v in COMPILE_VARIANTS if not decode_only or "32x128" in v[0]]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for line in pool.map(build, builds):
            print(line, flush=True)


def variants():
    from deep_gemm.gemm.bf16_plan import Bf16Overrides
    return {"plan": None, "ws128": Bf16Overrides(ws=True, block_n=128, uniform_tiles=True),
            "ws256": Bf16Overrides(ws=True, block_n=256, uniform_tiles=True),
            "ws64x256": Bf16Overrides(ws=True, block_m=64, block_n=256, uniform_tiles=True),
            "ws64x128": Bf16Overrides(ws=True, block_m=64, block_n=128, uniform_tiles=True),
            **{f"split{s}": Bf16Overrides(split_k=s) for s in SPLITS}}


SPLITS = (1, 2, 3, 4, 6, 8)
DECODE_VARIANTS = ["plan"] + [f"split{s}" for s in SPLITS]


def auto_choice(g, expected, n, k, ws64=False):
    """What bf16_plan picks for the row with AUTO_WS_MASKED on (and AUTO_WS_MASKED_64 as ``ws64``): a variant's
    name ('ws128', 'ws256', 'ws64x256', 'ws64x128') or 'plan' (tl.*, its tile)."""
    from deep_gemm.gemm import bf16_plan
    from deep_gemm.gemm.bf16_triton import _num_sms
    from bench_bf16_gemm import MASKED_MAX_M
    call = bf16_plan.Bf16Call(bf16_plan.GROUPING["masked"], MASKED_MAX_M, n, k, g, _num_sms(), False, 2, True, True,
                              False, expected_m=expected, d_aligned=True)
    saved = bf16_plan.AUTO_WS_MASKED, bf16_plan.AUTO_WS_MASKED_64
    bf16_plan.AUTO_WS_MASKED, bf16_plan.AUTO_WS_MASKED_64 = True, ws64
    try:
        p = bf16_plan.plan(call)
    finally:
        bf16_plan.AUTO_WS_MASKED, bf16_plan.AUTO_WS_MASKED_64 = saved
    if p.kernel != "ws":
        return "plan"
    return f"ws64x{p.config.block_n}" if p.config.block_m == 64 else f"ws{p.config.block_n}"


def plan_split(g, expected, n, k):
    """The shipped plan's split_k on the row (bf16_plan.masked_split on the decode rows; 1 elsewhere)."""
    from deep_gemm.gemm import bf16_plan
    from deep_gemm.gemm.bf16_triton import _num_sms
    from bench_bf16_gemm import MASKED_MAX_M
    call = bf16_plan.Bf16Call(bf16_plan.GROUPING["masked"], MASKED_MAX_M, n, k, g, _num_sms(), False, 2, True, True,
                              False, expected_m=expected, d_aligned=True)
    return bf16_plan.plan(call).config.split_k


def rows(shapes, names):
    """(label, shape, masked, {variant: (run, d)}, (a, b, d0)) per row (the variants in ``names``), one row's
    tensors at a time."""
    import torch
    from bench_bf16_gemm import BF16, MASKED_MAX_M, masked_inputs

    from deep_gemm._ops.library import run_launcher
    for g, expected, n, k in shapes:
        masked, masked_m, a, b = masked_inputs(g, expected, n, k)
        d0 = torch.randn(g, MASKED_MAX_M, n, device="cuda").to(BF16)  # rows past masked_m must keep these bits
        calls = {}
        for name, over in variants().items():
            if name not in names:
                continue
            d = d0.clone()
            kw = {} if over is None else {"overrides": over}

            def run(d=d, kw=kw, a=a, b=b, masked_m=masked_m, expected=expected):  # (bound now: rows are lazy)
                result = run_launcher("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, expected, "nk",
                                      launcher_kwargs=kw)
                assert result is not NotImplemented, "the launcher declined"
            calls[name] = (run, d)
        yield f"G={g} m={expected} N={n} K={k}", (g, expected, n, k), masked, calls, (a, b, d0)


def dg_times(shapes, reps, out):
    """Time DeepGEMM's m_grouped_bf16_gemm_nt_masked (the package on PYTHONPATH, not this repository's) on the rows,
    with bench_masked's operands and timer; write them as bench_bf16_gemm's JSON rows (table "masked")."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.abspath(ROOT)]
    import torch
    from bench_bf16_gemm import BF16, MASKED_MAX_M, masked_inputs
    from harness import KernelTimer

    import deep_gemm
    assert not os.path.abspath(deep_gemm.__file__).startswith(os.path.abspath(ROOT) + os.sep + "deep_gemm"), \
        f"--dg-out: deep_gemm is this repository's ({deep_gemm.__file__}); run under $DGENV"
    timer, results = KernelTimer(reps=reps), []
    for g, expected, n, k in shapes:
        masked, masked_m, a, b = masked_inputs(g, expected, n, k)
        d = torch.empty(g, MASKED_MAX_M, n, device="cuda", dtype=BF16)

        def call(a=a, b=b, d=d, masked_m=masked_m, expected=expected):
            deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected)
        call()
        us = min(timer(call), timer(call))
        print(f"DeepGEMM G={g} m={expected} N={n} K={k}: {us:.1f} us", flush=True)
        results.append(dict(table="masked", groups=g, expected_m=expected, n=n, k=k, us=us))
        del a, b, d
    with open(out, "w") as f:
        json.dump({"provider": f"DeepGEMM ({deep_gemm.__file__})", "results": results}, f, indent=1)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="sm_90a builds only (no GPU)")
    parser.add_argument("--rows", type=int, default=0, help="only the rows of this many expected rows per group")
    parser.add_argument("--variants", default="", help="comma-separated variants (default: all; --rows 192: "
                        "plan,ws256,ws64x256,ws64x128; --rows 20: plan,split1,...,split8)")
    parser.add_argument("--groups", default="", help="only these group counts (comma-separated)")
    parser.add_argument("--nk", default="", help="only these N x K (comma-separated, e.g. 6144x7168)")
    parser.add_argument("--dg-out", default="", help="time DeepGEMM (under $DGENV) on the rows into this JSON")
    parser.add_argument("--dg-json", default="", help="DeepGEMM's times from --dg-out (default: session 28's)")
    args = parser.parse_args(argv)
    if args.compile:
        compile_report(decode_only=args.rows == 20)
        return 0
    from bench_bf16_gemm import GROUPED_NK, MASKED
    groups = {int(g) for g in args.groups.split(",") if g}
    nks = {tuple(int(x) for x in nk.split("x")) for nk in args.nk.split(",") if nk}
    shapes = [(g, e, n, k) for g, e in MASKED if (e >= MIN_EXPECTED if not args.rows else e == args.rows)
              and (not groups or g in groups) for n, k in GROUPED_NK if not nks or (n, k) in nks]
    if args.dg_out:
        return dg_times(shapes, args.reps, args.dg_out)
    import torch
    from harness import KernelTimer

    from deep_gemm.gemm import bf16_plan
    from deep_gemm.testing import calc_diff
    print(f"defaults: AUTO_WS_MASKED={bf16_plan.AUTO_WS_MASKED} AUTO_WS_MASKED_64={bf16_plan.AUTO_WS_MASKED_64} "
          f"UNIFORM_TILES={bf16_plan.UNIFORM_TILES}", flush=True)
    names = args.variants.split(",") if args.variants else [v for v in variants() if not v.startswith("split")]
    if args.rows and not args.variants:  # (the quick A/B of the 64-row tiles: 128 x 128 lost on these rows)
        names = DECODE_VARIANTS if args.rows < MIN_EXPECTED else ["plan", "ws256", "ws64x256", "ws64x128"]
    assert "plan" in names and all(v in variants() for v in names), names
    dg, dg_json = {}, args.dg_json if args.dg_json and os.path.exists(args.dg_json) else DG_JSON
    dg_name = "DeepGEMM(same call)" if dg_json != DG_JSON else "DeepGEMM(s28c7)"
    print(f"DeepGEMM times from {dg_json}", flush=True)
    if os.path.exists(dg_json):
        for r in json.load(open(dg_json))["results"]:
            if r["table"] == "masked":
                dg[(r["groups"], r["expected_m"], r["n"], r["k"])] = r["us"]
    timer = KernelTimer(reps=args.reps)
    t0 = time.time()
    # First calls (compiles) in threads: one row per group count covers every build (M, N, K are not specialised;
    # the plan's tl.* tile is the same on a group count's four rows).
    firsts = {}
    for shape in shapes:
        firsts.setdefault(shape[0], shape)
    warm = list(rows(firsts.values(), names))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(run) for _, _, _, calls, _ in warm for run, _ in calls.values()]:
            f.result()
    torch.cuda.synchronize()
    del warm
    print(f"compiled in {time.time() - t0:.0f} s", flush=True)
    ratios, autos = {}, {"auto": [], "auto64": [], "before": []}
    for label, shape, masked, calls, (a, b, d0) in rows(shapes, names):
        refs = [a[i, :m].float() @ b[i].float().T for i, m in enumerate(masked)]
        times, line, base = {}, [], None
        for v, (run, d) in calls.items():
            run()
            torch.cuda.synchronize()
            flag = ""
            if max(calc_diff(d[i, :m], r) for i, (m, r) in enumerate(zip(masked, refs)) if m) >= LIMIT:
                flag += "!WRONG"
            if not all(torch.equal(d[i, m:].view(torch.int16), d0[i, m:].view(torch.int16))
                       for i, m in enumerate(masked)):
                flag += "!TOUCHED"
            if v == "plan":
                base = d.clone()
            elif not torch.equal(d, base):
                flag += "(bits differ)"  # (another tile width or kernel: K order may differ; informative)
            first = d.clone()
            times[v] = min(timer(run), timer(run))
            if not torch.equal(d.view(torch.int16), first.view(torch.int16)):
                flag += "!NONDET"  # (every timed call wrote D again: the same bits each time, or not)
            line.append(f"{v} {times[v]:7.1f}{flag}")
        choices = {"auto": auto_choice(*shape), "auto64": auto_choice(*shape, ws64=True)}
        if "split1" in times:  # (the decode rows' plan before session 29: unsplit)
            choices["before"] = "split1"
        rel = {v: times["plan"] / t for v, t in times.items() if v != "plan"}
        for key, choice in choices.items():
            if choice in times:
                rel[key] = times["plan"] / times[choice]
        for v, r in rel.items():
            ratios.setdefault(v, []).append(r)
        dg_us = dg.get(shape)
        vs_dg = ""
        for key, choice in choices.items():
            if dg_us and choice in times:
                autos[key].append(dg_us / times[choice])
                vs_dg += f" | {dg_name}/{key} {dg_us / times[choice]:.3f}"
        print(f"{label:30s} " + "  ".join(line) + "  | plan/x: " + " ".join(f"{v} {r:.3f}" for v, r in rel.items())
              + f" | auto={choices['auto']} auto64={choices['auto64']} plan split_k={plan_split(*shape)}{vs_dg}",
              flush=True)
        del refs
    print(f"({time.time() - t0:.0f} s)  geomean plan / variant:")
    for v, rs in ratios.items():
        gm = math.exp(sum(map(math.log, rs)) / len(rs))
        print(f"  {v:6s} {gm:.3f}x over {len(rs)} rows (min {min(rs):.3f}x, max {max(rs):.3f}x)")
    for key, rs in autos.items():
        if rs:
            print(f"  {dg_name} / {key}: geomean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f}x"
                  f", min {min(rs):.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
