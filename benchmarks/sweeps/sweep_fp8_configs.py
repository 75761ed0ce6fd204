"""Sweep of the dense FP8 GEMM plan's open levers (M = 4096 1D2D tiles, ring depth, register budgets; the 1D1D
weight-gradient budgets and its row tail's split-K configs), side by side in one process on DeepGEMM's dense rows:
each variant forced through ``Fp8Overrides`` (the launchers' ``overrides=``; no module globals), checked against
the fp32 reference (DeepGEMM's ``calc_diff`` < 1e-3) before it is timed with
``benchmarks/harness.py``'s KernelTimer (kernel time, L2 flushed, median).

Sections (``--only``):

* ``dense4096``: DeepGEMM's dense 1D2D rows at M=4096 (``benchmarks/shapes.py`` DENSE_1D2D_DG_US; 0.85x DeepGEMM on
  the H200).
  ``plan`` is the shipped plan; ``tl`` the tl.* kernel; ``m256-s3`` / ``m256-s4`` DeepGEMM's 256 x 128 tile (two
  waves stacked along M) without its 2-CTA A multicast, which Triton 3.6 cannot lower (a PTX-hook
  multicast build was measured and dropped: docs/TUNING.md), timed again as the control for that lever on today's
  kernel; ``n256-s3`` / ``n256-s4`` the 128 x 256 tile (4 stages is the most that fits: ws_stages); ``n192`` the
  split 128 x 192 tile; ``n256-r232`` / ``-r224`` / ``-r240`` each register budget (the dense build spills
  64 / 16 / 216 bytes at them, and the plan takes the one that spills least; the budgets were last timed against
  each other on 2026-11-30, before those spills; every forced variant compiles for sm_90a).
* ``wgrad``: DeepGEMM's 1D1D weight-gradient rows (DENSE_1D1D_DG_TFLOPS; FP32 out accumulated into C; 0.79x at
  2112x4096x7168): ``plan``, ``tl``, the three register budgets.
* ``wgrad_tail``: 2112x4096x7168 with the main launch on the shipped 128 x 256 plan and its 64-row tail
  (the plan's row_tail) on each of a few tl.* split-K configs (``Fp8Overrides.config`` reaches only the tail's own
  plan): the tail is ~23 us of ~168 us, and only the heuristic's 64 x 64 split 4 was ever timed. (Stream-K splits of the
  last round inside the Gluon kernel and the tail on a side stream were measured and dropped: docs/TUNING.md.)
* ``small``: the few-tile rows, 1D1D 576x4096x7168 (FP32 C) and 1D2D 4096x512x32768, on forced tile heights and
  split-K depths (``tl-*``: the tl.* kernel; ``ws-*``: 128-row split tiles on the one-wave Gluon kernel). Their
  DeepGEMM times come from ``--dg-log`` only (DeepGEMM's own test_fp8 run).

Not repeated (dropped after measuring, docs/TUNING.md): pointer D stores, GROUP_M 16, staged scales on two-wave
tiles, per-warp barrier arrivals, A in registers, ptxas 12.9, a second epilogue buffer, the side-stream tail.
The MoE layouts' scheduling sweep is ``sweep_moe_schedule.py``; this file's earlier sections (M-grouped, masked,
M=128 / M=1 split-K, operand sharing, tail tiles; module globals) are in its git history before 2026-12-02.

``--dg-log`` takes DeepGEMM's run of ``benchmarks/bench_fp8_gemm.py --tables dense,1d1d`` in the same run
(same timer, separate process: both packages are named deep_gemm) for the ratio column; without it the ratio is to
DeepGEMM's 2026-11-29 figure in shapes.py. ``--smoke``: tiny rows on CPU under TRITON_INTERPRET (the interpreter runs
the tl.* kernel for every variant: a check of this script and of the tail configs' legality, not of the variants).

    python benchmarks/sweeps/sweep_fp8_configs.py [--out DIR] [--only dense4096,wgrad,wgrad_tail,small] [--variants a,b]
        [--dg-log dg_bench.log] [--smoke]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import shapes  # noqa: E402

import deep_gemm  # noqa: E402
from deep_gemm.core.registry import run_launcher  # noqa: E402
from deep_gemm.gemm.fp8 import configs  # noqa: E402
from deep_gemm.gemm.fp8 import launch as fp8_launch  # noqa: E402
from deep_gemm.gemm.fp8.plan import Fp8Overrides  # noqa: E402
from deep_gemm.common.operands import dequantize  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402
from deep_gemm.utils import align, per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

assert hasattr(deep_gemm, "backends"), "this sweep forces plan choices of this repository's deep_gemm"

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CORRECTNESS_LIMIT = 1e-3  # DeepGEMM's calc_diff bar for FP8 GEMMs
BN128 = configs._config(128, 128, 1)  # (the warp-specialised variants start from 128 x 128 tl.* configs)


def _ws(**fields):
    return Fp8Overrides(ws_mode="on", config=BN128, **fields)


DENSE_VARIANTS = {
    "plan": None,
    "tl": Fp8Overrides(ws_mode="off"),
    "m256-s3": _ws(waves=2, wave_n=False, stages=3),
    "m256-s4": _ws(waves=2, wave_n=False, stages=4),
    "n256-s3": _ws(waves=2, wave_n=True, narrow=128, stages=3),
    "n256-s4": _ws(waves=2, wave_n=True, narrow=128, stages=4),
    "n192": _ws(waves=2, wave_n=True, narrow=64),
    "n256-r232": _ws(waves=2, wave_n=True, narrow=128, regs=(232, 40)),
    "n256-r224": _ws(waves=2, wave_n=True, narrow=128, regs=(224, 56)),
    "n256-r240": _ws(waves=2, wave_n=True, narrow=128, regs=(240, 32)),
}
# 1D1D has one warp-specialised variant (128 x 256 tiles, fp8_plan._ws_plan): its budgets and ring depth. No forced
# config or mode here: Fp8Overrides.config would also reach the row tail's own plan (fp8_launch._launch_dense passes
# the overrides to it), and the tail runs tl.* tiles, which ignore regs and stages.
WGRAD_VARIANTS = {
    "plan": None,
    "tl": Fp8Overrides(ws_mode="off"),
    "r232": Fp8Overrides(regs=(232, 40)),
    "r224": Fp8Overrides(regs=(224, 56)),
    "r240": Fp8Overrides(regs=(240, 32)),
}
# (No ring-depth variant: 3 stages is the most that fits next to the FP32 epilogue of a 128 x 256 tile, ws_stages.)
WGRAD_TAIL_SHAPE = (2112, 4096, 7168)
# tl.* split-K configs for the 64-row tail: (BM, BN, split); (64, 64, 4) is the heuristic's.
TAIL_CONFIGS = [(64, 64, 4), (64, 64, 2), (64, 64, 8), (64, 128, 4), (64, 128, 8), (128, 128, 4)]
# The few-tile rows (DeepGEMM's 1D1D 576 x 4096 x 7168 with FP32 C, 0.42-0.48x; 1D2D 4096 x 512 x 32768, 0.66x on the
# H100, 2026-12-06): under a round of 128-row tiles each, so the levers are the tile height and split-K. Each
# variant a tl.* config ("tl-BMxBNsS", the warp-specialised kernel off) or a 128-row split config on the one-wave
# Gluon kernel ("ws-BMxBNsS"; dense 1D2D without C only: one_wave_split_routable).
SMALL_ROWS = [(576, 4096, 7168, True), (4096, 512, 32768, False)]
SMALL_TL_CONFIGS = [(64, 128, 1), (64, 128, 2), (64, 128, 3), (64, 128, 4), (64, 64, 2), (128, 128, 1),
                    (128, 128, 2), (128, 128, 3), (128, 64, 2)]
SMALL_WS_CONFIGS = [(128, 128, 2), (128, 128, 3), (128, 64, 2), (128, 64, 4)]
PEAK_TFLOPS = 1979  # H200 dense FP8: a row above it is a harness bug


def small_variants(picked):
    out = [("plan", None, None), ("tl", Fp8Overrides(ws_mode="off"), None)]
    out += [(f"tl-{bm}x{bn}s{sk}", Fp8Overrides(ws_mode="off", config=configs._config(bm, bn, sk)), None)
            for bm, bn, sk in SMALL_TL_CONFIGS]
    out += [(f"ws-{bm}x{bn}s{sk}", Fp8Overrides(ws_mode="on", config=configs._config(bm, bn, sk)), None)
            for bm, bn, sk in SMALL_WS_CONFIGS]
    return [v for v in out if not picked or v[0] in picked]


def operands(m, n, k, per_row_b=False):
    """bench_fp8_gemm.fp8_operands on DEVICE: A 1x128 scales MN-major TMA-aligned (what DeepGEMM reads), B 128x128
    (1D2D) or 1x128 (1D1D)."""
    a = per_token_cast_to_fp8(torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16), use_ue8m0=False)
    b_bf = torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16)
    b = per_token_cast_to_fp8(b_bf, use_ue8m0=False) if per_row_b else per_block_cast_to_fp8(b_bf, use_ue8m0=False)
    sfa = torch.empty(a[1].size(1), align(m, 4), device=DEVICE).T[:m]
    sfa.copy_(a[1])
    return (a[0], sfa), b


def reference(a, b, gran_b):
    return dequantize(a[0], a[1], (1, 128)).double() @ dequantize(b[0], b[1], gran_b).double().T


class Row:
    """One problem: its operands, output, reference and a call per variant."""

    def __init__(self, table, m, n, k, wgrad):
        self.table, self.m, self.n, self.k, self.wgrad = table, m, n, k, wgrad
        self.a, self.b = operands(m, n, k, per_row_b=wgrad)
        self.expected = reference(self.a, self.b, (1, 128) if wgrad else (128, 128))
        if wgrad:  # D = C + A B^T with C = D (DeepGEMM's wgrad test); C's values are restored before each check
            self.c0 = torch.randn(m, n, device=DEVICE, dtype=torch.float32)
            self.expected = self.expected + self.c0.double()
        self.outs = {}

    def out(self, variant):
        if variant not in self.outs:
            dtype = torch.float32 if self.wgrad else torch.bfloat16
            self.outs[variant] = torch.empty(self.m, self.n, device=DEVICE, dtype=dtype)
        return self.outs[variant]

    def call(self, variant, ov, tail_config=None):
        d, (a, sfa), (b, sfb) = self.out(variant), self.a, self.b
        if tail_config is not None and DEVICE == "cpu":
            # (the interpreter has no row tail: the smoke run checks the tail's configs on the whole small call)
            tail_ov = Fp8Overrides(config=tail_config)
            return lambda: run_launcher("fp8_gemm_nt", a, sfa, b, sfb, d, c=d, recipe=[1, 1, 128],
                                        launcher_kwargs=dict(overrides=tail_ov))
        if tail_config is not None:
            # the main launch on the heuristic's 128 x 128 config (config=, as autotuning runs a trial), the tail
            # planned with Fp8Overrides.config (fp8_launch._launch_dense recurses with the overrides)
            tail_ov = Fp8Overrides(config=tail_config)
            return lambda: fp8_launch._launch_dense(a, sfa, b, sfb, d, d, True, overrides=tail_ov, config=BN128)
        kwargs = dict(launcher_kwargs=dict(overrides=ov)) if ov is not None else {}
        if self.wgrad:
            return lambda: run_launcher("fp8_gemm_nt", a, sfa, b, sfb, d, c=d, recipe=[1, 1, 128], **kwargs)
        return lambda: run_launcher("fp8_gemm_nt", a, sfa, b, sfb, d, **kwargs)

    def check(self, variant, fn):
        d = self.out(variant)
        if self.wgrad:
            d.copy_(self.c0)
        result = fn()
        assert result is not NotImplemented, f"{self.table} {self.m}x{self.n}x{self.k} {variant}: launcher declined"
        return calc_diff(d.double(), self.expected)


def dg_times(path):
    """DeepGEMM's us per (table, m, n, k) from its bench_fp8_gemm.py log (' > M=.. N=.. K=..: X us' under the
    '== dense FP8 1D2D' / '== dense FP8 1D1D' headers)."""
    out, table = {}, None
    if not path or not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if line.startswith("== dense FP8 1D2D"):
                table = "dense4096"
            elif line.startswith("== dense FP8 1D1D"):
                table = "wgrad"
            elif line.startswith("=="):
                table = None
            hit = re.search(r"> M=\s*(\d+) N=\s*(\d+) K=\s*(\d+):\s*([\d.]+) us", line)
            if hit and table:
                m, n, k = (int(x) for x in hit.groups()[:3])
                out[(table, m, n, k)] = float(hit.group(4))
    return out


def dg_us_of(row, dg_log):
    table = row.table
    if table in ("wgrad_tail", "small"):
        table = "wgrad" if row.wgrad else "dense4096"
    same_run = dg_log.get((table, row.m, row.n, row.k))
    if same_run:
        return same_run, "same run"
    if row.wgrad:
        tflops = shapes.DENSE_1D1D_DG_TFLOPS.get((row.m, row.n, row.k))
        return (2 * row.m * row.n * row.k / tflops / 1e6 if tflops else None), "shapes.py"
    return shapes.DENSE_1D2D_DG_US.get((row.m, row.n, row.k)), "shapes.py"


def sweep(rows_spec, variants, timer, dg_log, results, threads):
    """Build every (row, variant) first (kernel compilation in parallel threads: first compiles are thread-safe),
    then per row and variant: check, time, print."""
    rows = [Row(*spec) for spec in rows_spec]
    calls = [(row, name, row.call(name, ov, tail)) for row in rows for name, ov, tail in variants]
    t0 = time.time()
    if threads > 1:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            errors = list(pool.map(_try, [fn for _, _, fn in calls]))
        for (row, name, _), error in zip(calls, errors):
            if error:
                print(f"  build {row.table} {row.m}x{row.n}x{row.k} {name}: {error}", flush=True)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        print(f"built {len(calls)} calls in {time.time() - t0:.0f} s", flush=True)
    for row, name, fn in calls:
        dg_us, dg_src = dg_us_of(row, dg_log)
        tag = f"{row.table} {row.m}x{row.n}x{row.k} {name:10s}"
        try:
            diff = row.check(name, fn)
        except Exception as error:  # noqa: BLE001 - one variant failing must not stop the sweep
            print(f" ! {tag} ERROR {type(error).__name__}: {str(error).splitlines()[0][:160]}", flush=True)
            results.append(dict(table=row.table, m=row.m, n=row.n, k=row.k, variant=name, error=str(error)[:400]))
            continue
        entry = dict(table=row.table, m=row.m, n=row.n, k=row.k, variant=name, diff=diff)
        if not diff < CORRECTNESS_LIMIT:
            print(f" ! {tag} WRONG calc_diff {diff:.2e} (not timed)", flush=True)
            results.append(dict(entry, wrong=True))
            continue
        us = timer(fn)
        tflops = 2 * row.m * row.n * row.k / us / 1e6
        entry.update(us=us, tflops=tflops)
        ratio = ""
        if dg_us:
            entry.update(dg_us=dg_us, dg_source=dg_src, vs_deepgemm=dg_us / us)
            ratio = f" | {dg_us / us:5.3f}x DG ({dg_src})"
        flag = " ! above peak: harness bug" if tflops > PEAK_TFLOPS and DEVICE == "cuda" else ""
        results.append(entry)
        print(f" > {tag} {us:8.1f} us | {tflops:6.0f} TFLOPS{ratio} | diff {diff:.1e}{flag}", flush=True)


def _try(fn):
    try:
        fn()
        return None
    except Exception as error:  # noqa: BLE001 - reported, then checked again serially
        return f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"


def summarize(results):
    """Per table and variant: geomean of DeepGEMM time / ours over the rows every variant of the table ran."""
    lines = []
    for table in dict.fromkeys(r["table"] for r in results):
        rows = [r for r in results if r["table"] == table and "vs_deepgemm" in r]
        shapes_all = {(r["m"], r["n"], r["k"]) for r in results if r["table"] == table}
        for variant in dict.fromkeys(r["variant"] for r in rows):
            ratios = [r["vs_deepgemm"] for r in rows if r["variant"] == variant]
            note = "" if len(ratios) == len(shapes_all) else f" (only {len(ratios)} of {len(shapes_all)} rows)"
            gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            lines.append(f"geomean {table:10s} {variant:10s} {gm:5.3f}x DG over {len(ratios)} rows{note}")
        for shape in sorted(shapes_all):
            timed = [r for r in rows if (r["m"], r["n"], r["k"]) == shape]
            if timed:
                best = max(timed, key=lambda r: r["vs_deepgemm"])
                plan = next((r for r in timed if r["variant"] == "plan"), None)
                gain = f", plan {plan['us']:.1f} us" if plan else ""
                lines.append(f"best {table:10s} {'x'.join(map(str, shape)):16s} {best['variant']:10s} "
                             f"{best['us']:.1f} us {best['vs_deepgemm']:5.3f}x DG{gain}")
    return lines


def _wall_timer(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu_out"))
    parser.add_argument("--only", default="dense4096,wgrad,wgrad_tail")
    parser.add_argument("--variants", default=None, help="comma-separated variant names (default: every one of "
                        f"the table: {','.join(DENSE_VARIANTS)} / {','.join(WGRAD_VARIANTS)})")
    parser.add_argument("--dg-log", default=None, help="DeepGEMM's bench_fp8_gemm.py --tables dense,1d1d log")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=8, help="threads that build the kernels first (1: none)")
    parser.add_argument("--smoke", action="store_true", help="tiny rows (a check of this script, e.g. on CPU)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    picked = set(args.variants.split(",")) if args.variants else None
    dense_rows = [("dense4096", m, n, k, False) for (m, n, k) in shapes.DENSE_1D2D_DG_US if m >= 4096]
    wgrad_rows = [("wgrad", m, n, k, True) for (m, n, k) in shapes.DENSE_1D1D_DG_TFLOPS]
    tail_rows = [("wgrad_tail", *WGRAD_TAIL_SHAPE, True)]
    small_rows = [("small", *row) for row in SMALL_ROWS]
    tail_configs = [configs._config(*c) for c in TAIL_CONFIGS]
    if args.smoke:
        # odd M and N (partial tiles), two K blocks and more; 1D1D M=200 is 2 row blocks (a tail on the GPU)
        dense_rows = [("dense4096", 200, 320, 256, False), ("dense4096", 96, 128, 384, False)]
        wgrad_rows = [("wgrad", 200, 256, 256, True)]
        tail_rows = [("wgrad_tail", 64, 256, 1024, True)]  # (64 rows: the GPU's tail of 2112x4096x7168)
        small_rows = [("small", 72, 256, 1024, True), ("small", 136, 128, 1024, False)]
    timer = _wall_timer if DEVICE == "cpu" else __import__("harness").KernelTimer(reps=args.reps)
    threads = 1 if DEVICE == "cpu" else args.threads
    dg_log = dg_times(args.dg_log)
    if args.dg_log:
        print(f"DeepGEMM same-run times: {len(dg_log)} rows from {args.dg_log}")
    results = []
    sections = {
        "dense4096": (dense_rows, [(n, ov, None) for n, ov in DENSE_VARIANTS.items() if not picked or n in picked]),
        "wgrad": (wgrad_rows, [(n, ov, None) for n, ov in WGRAD_VARIANTS.items() if not picked or n in picked]),
        "wgrad_tail": (tail_rows, [("plan", None, None)] + [
            (f"tail{c.block_m}x{c.block_n}s{c.split_k}", None, c) for c in tail_configs]),
        "small": (small_rows, small_variants(picked)),
    }
    try:
        for part in args.only.split(","):
            print(f"== {part} ({DEVICE})", flush=True)
            rows, variants = sections[part]
            sweep(rows, variants, timer, dg_log, results, threads)
    finally:
        for line in summarize(results):
            print(line)
        budgets = {str(k): v for k, v in getattr(fp8_launch, "_WS_BUDGETS", {}).items()}
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "sweep_fp8_dense.json")
        with open(path, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", smoke=args.smoke,
                           rows=results, ws_budgets=budgets), f, indent=1)
        print(f"wrote {path}")
        wrong = [r for r in results if r.get("wrong") or r.get("error")]
        print(f"VERDICT {len(results) - len(wrong)} of {len(results)} variants correct and timed"
              + (f"; {len(wrong)} WRONG or ERROR" if wrong else ""))


if __name__ == "__main__":
    main()
