"""Time the M-grouped scheduling choices of the warp-specialised FP8 kernel on the MoE rows of
benchmarks/bench_fp8_gemm.py (DeepGEMM's test sizes: psum contiguous, masked decode through the psum layout,
masked), each variant forced through ``Fp8Overrides`` (run_launcher's launcher_kwargs, no globals), same process,
same timer (harness.KernelTimer: kernels only, L2 flushed), so one GPU run picks the winner per row. Run by
scripts/gpu/moe.sh. What it decided (the walk for psum layouts) is in docs/TUNING.md, "TILE_WALK".

Variants (the question: why psum and masked-through-psum lag DeepGEMM and our own expert-id layout):
  plan       the shipped plan (TILE_WALK: the walk on psum layouts, the per-tile scan over every group on masked)
  walk       DeepGEMM's carried tile walk (Fp8Overrides.tile_walk, fp8_gemm_ws._walk)
  walk_gm16  the walk with 16-row-block rasters (DeepGEMM picks 8 or 16 blocks per raster band by L2 footprint);
             it forces the 128 x 128 config, so on the masked m = 20 rows, which the plan runs on the tl.* kernel's
             64-row tiles (where the walk does not apply: walk == plan there), it times the warp-specialised kernel
  walk_n192  the walk on 128 x 192 split tiles (DeepGEMM's 1D2D kernel caps BLOCK_N at 192 on SM90)
  walk_n256  the walk on 128 x 256 tiles (the plan's wave model picks 192 for some decode rows from the inflated
             expected_m)
  ids        (psum rows only) the same problem in the expert-id layout on the shipped plan: what the lookup costs
Every variant takes its register budget as the shipped plan would (ws_register_budget: up to three builds): the
walk's two carried registers move ptxas's spills between budgets erratically (sm_90a, two-wave psum at G_PAD 32:
216 B spilled at (240, 32), 24 B at (224, 56)), so no budget fits every row.
Every variant is checked against the dequantised reference first (and must be bit-identical to `plan` where only
the tile order changes nothing: walk). Prints per row the time of each variant and its ratio to `plan`, then the
geomean of each variant over the rows; writes sweep_moe_schedule.json under --out.

    python benchmarks/sweeps/sweep_moe_schedule.py --out $OUT/moe/sweep [--only psum,decode,masked] [--variants ...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import bench_fp8_gemm as bench  # noqa: E402  (this repository's deep_gemm: it puts the repository first)
import shapes  # noqa: E402
from harness import KernelTimer  # noqa: E402

import deep_gemm  # noqa: E402
from deep_gemm.core.registry import run_launcher  # noqa: E402
from deep_gemm.gemm.fp8 import configs  # noqa: E402
from deep_gemm.gemm.fp8.plan import Fp8Overrides  # noqa: E402
from deep_gemm.utils import align, per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

assert hasattr(deep_gemm, "backends"), "this sweep forces plan choices of this repository's deep_gemm"

# CUDA; on CPU (a smoke run of this script under TRITON_INTERPRET, tiny rows: --smoke) the interpreter's tl.* kernel
# runs every variant (the warp-specialised kernel and its overrides need the GPU).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DEVICE_NAME = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
GM16 = dataclasses.replace(configs._config(128, 128, 1), group_m=16)
VARIANTS = {
    "plan": None,
    "walk": dict(tile_walk=True),
    "walk_gm16": dict(tile_walk=True, config=GM16),
    "walk_n192": dict(tile_walk=True, waves=2, wave_n=True, narrow=64),
    "walk_n256": dict(tile_walk=True, waves=2, wave_n=True, narrow=128),
}
# The H200's dense FP8 tensor-core peak (1979 TFLOPS): a row above it is a harness bug (the timed call or the FLOPs)
PEAK_TFLOPS = 1979
MASKED_VARIANTS = ["plan", "walk", "walk_gm16"]  # (masked layouts have no split tiles)
# Variants psum rows also time in the expert-id layout (as ids_<variant>; a probe may add to it)
IDS_VARIANTS = ["plan"]


def overrides(variant, kind):
    """The Fp8Overrides of `variant` for a psum or masked row (None: the shipped plan)."""
    fields = VARIANTS[variant]
    return None if fields is None else Fp8Overrides(**fields)


def _weights(g, n, k):
    bq = [per_block_cast_to_fp8(torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16), use_ue8m0=False)
          for _ in range(g)]
    return torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq])


def _segments(ms, alignment):
    starts, ends, start = [], [], 0
    for m in ms:
        starts.append(start)
        ends.append(start + m)
        start = align(start + m, alignment)
    return starts, ends, start


def psum_rows(variants):
    """DeepGEMM's psum contiguous rows (bench MOE_CONTIGUOUS): (name, flops, {variant: call}, check, valid)."""
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    # One function call per row: its calls and checks close over that row's tensors. (The 2026-12-02 GPU run built
    # the closures in this generator's own loop, so every row timed the LAST row's tensors: G=4 rows raised
    # DeepGEMMError, every decode row timed ~104 us and every masked row ~93 us.)
    for g, per_group, n, k in bench.MOE_CONTIGUOUS:
        yield _psum_row(variants, alignment, g, per_group, n, k)


def psum_problem(alignment, g, per_group, n, k):
    """One psum row's tensors, DeepGEMM's generator (group sizes 0.7-1.3 x per_group, seed 0): (ms, starts, ends,
    a, b, psum ends, the same rows' expert ids, D)."""
    random.seed(0)
    ms = [int(per_group * random.uniform(0.7, 1.3)) for _ in range(g)]
    starts, ends, rows = _segments(ms, alignment)
    a = per_token_cast_to_fp8(torch.randn(rows, k, device=DEVICE, dtype=torch.bfloat16), use_ue8m0=False)
    b = _weights(g, n, k)
    psum = torch.tensor(ends, dtype=torch.int32, device=DEVICE)
    ids = torch.full((rows,), -1, dtype=torch.int32, device=DEVICE)
    for i, (s, e) in enumerate(zip(starts, ends)):
        ids[s:e] = i
    d = torch.empty(rows, n, device=DEVICE, dtype=torch.bfloat16)
    return ms, starts, ends, a, b, psum, ids, d


def _psum_row(variants, alignment, g, per_group, n, k):
    ms, starts, ends, a, b, psum, ids, d = psum_problem(alignment, g, per_group, n, k)

    def call(ov, layout=psum, psum_layout=True):
        # (ensure_zero_padding=False: DeepGEMM's SM90 test rows)
        return lambda: run_launcher("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, layout,
                                    use_psum_layout=psum_layout, ensure_zero_padding=not psum_layout,
                                    launcher_kwargs=_kwargs(ov))
    calls = {v: call(overrides(v, "psum")) for v in variants}
    for v in IDS_VARIANTS:  # the same problem in the expert-id layout ("ids": the shipped plan)
        calls["ids" if v == "plan" else f"ids_{v}"] = call(overrides(v, "psum"), ids, False)

    def check():
        return max(bench._group_diff(d[s:e], (a[0][s:e], a[1][s:e]), (b[0][i], b[1][i]))
                   for i, (s, e) in enumerate(zip(starts, ends)) if i in (0, g - 1) and e > s)
    valid = lambda: torch.cat([d[s:e] for s, e in zip(starts, ends)])  # noqa: E731  (the groups' rows)
    return f"psum G={g} M={sum(ms)} N={n} K={k}", 2 * sum(ms) * n * k, calls, check, valid


def masked_rows(variants, decode: bool):
    """DeepGEMM's masked rows (bench MOE_MASKED), masked (decode=False) or through the psum layout (decode=True)."""
    max_m, alignment = shapes.MASKED_MAX_M, deep_gemm.get_mk_alignment_for_contiguous_layout()
    for g, expected_m, n, k in bench.MOE_MASKED:
        yield _masked_row(variants, decode, max_m, alignment, g, expected_m, n, k)  # (one call per row: psum_rows)


def _masked_row(variants, decode, max_m, alignment, g, expected_m, n, k):
    random.seed(0)
    masked = [int(expected_m * random.uniform(0.7, 1.3)) for _ in range(g)]
    a = per_token_cast_to_fp8(torch.randn(g * max_m, k, device=DEVICE, dtype=torch.bfloat16), use_ue8m0=False)
    b = _weights(g, n, k)
    hint = int(expected_m * 1.2)
    starts, ends, _ = _segments(masked, alignment)
    if decode:
        psum = torch.tensor(ends, dtype=torch.int32, device=DEVICE)
        d = torch.empty(g * max_m, n, device=DEVICE, dtype=torch.bfloat16)

        def call(ov):
            return lambda: run_launcher("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, psum,
                                        use_psum_layout=True, expected_m_for_psum_layout=hint,
                                        launcher_kwargs=_kwargs(ov))

        def rows_of(i):
            return d[starts[i]:ends[i]], (a[0][starts[i]:ends[i]], a[1][starts[i]:ends[i]])
        valid = lambda: torch.cat([d[s:e] for s, e in zip(starts, ends)])  # noqa: E731
    else:
        a3 = (a[0].view(g, max_m, k), a[1].view(g, max_m, -1))
        mm = torch.tensor(masked, dtype=torch.int32, device=DEVICE)
        d = torch.empty(g, max_m, n, device=DEVICE, dtype=torch.bfloat16)

        def call(ov):
            return lambda: run_launcher("m_grouped_fp8_gemm_nt_masked", a3[0], a3[1], b[0], b[1], d, mm, hint,
                                        launcher_kwargs=_kwargs(ov))

        def rows_of(i):
            return d[i, :masked[i]], (a3[0][i, :masked[i]], a3[1][i, :masked[i]])
        valid = lambda: torch.cat([d[i, :m] for i, m in enumerate(masked)])  # noqa: E731
    calls = {v: call(overrides(v, "psum" if decode else "masked")) for v in variants}

    def check():
        return max(bench._group_diff(*rows_of(i), (b[0][i], b[1][i])) for i in (0, g - 1) if masked[i])
    form = "psum_decode" if decode else "masked"
    return f"{form} G={g} m={expected_m} N={n} K={k}", 2 * sum(masked) * n * k, calls, check, valid


def first_calls(tables):
    """Every (row, variant)'s first call, from 8 threads: the kernel builds and register-budget choices (first-time
    compilation is thread-safe; the GPU work of these calls is not timed). Returns {(row, variant): error} of the
    calls that raised, after printing them."""
    t0 = time.time()
    errors = {}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = {pool.submit(fn): (name, v) for name, _, calls, _, _ in tables for v, fn in calls.items()}
        for f in concurrent.futures.as_completed(futures):
            if f.exception() is not None:
                errors[futures[f]] = repr(f.exception())[:300]
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    print(f"compiled in {time.time() - t0:.0f} s; {len(errors)} variant calls failed", flush=True)
    for key, err in errors.items():
        print(f" ! {key}: {err}")
    return errors


def _wall_timer(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def _kwargs(ov):
    return {"overrides": ov} if ov is not None else {}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu_out"))
    parser.add_argument("--only", default="psum,decode,masked")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny rows (a check of this script, e.g. on CPU)")
    args = parser.parse_args()
    if args.smoke:
        # two rows per table, of different group counts and sizes: a row that ran another row's tensors raises
        bench.MOE_CONTIGUOUS[:] = [(3, 100, 256, 256), (2, 60, 128, 384)]
        bench.MOE_MASKED[:] = [(3, 20, 256, 256), (2, 40, 128, 384)]
        shapes.MASKED_MAX_M = 128
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    only, variants = args.only.split(","), [v for v in args.variants.split(",") if v in VARIANTS]
    timer = KernelTimer(reps=args.reps) if DEVICE == "cuda" else _wall_timer
    tables = []
    if "psum" in only:
        tables += list(psum_rows(variants))
    if "decode" in only:
        tables += list(masked_rows(variants, True))
    if "masked" in only:
        tables += list(masked_rows([v for v in variants if v in MASKED_VARIANTS], False))
    errors = first_calls(tables)
    results = []
    for name, flops, calls, check, valid in tables:
        base, times = None, {}
        for v, fn in calls.items():
            if (name, v) in errors:
                continue
            try:
                fn()
                diff = check()
                out = valid().clone()
                if v == "plan":
                    base = out
                same = None if base is None or v in ("plan", "ids") else bool(torch.equal(out, base))
                us = timer(fn)
            except Exception as e:  # noqa: BLE001  (one variant's failure never stops the sweep)
                print(f" ! {name} {v}: {e!r}"[:300], flush=True)
                continue
            times[v] = us
            results.append(dict(row=name, variant=v, us=us, tflops=flops / us / 1e6, diff=diff, bitwise_same=same))
            flag = "" if diff < bench.CORRECTNESS_LIMIT else "  WRONG"
            if DEVICE == "cuda" and flops / us / 1e6 > PEAK_TFLOPS:
                flag += "  IMPLAUSIBLE (above the FP8 peak: the timed call or the FLOP count is wrong)"
            print(f" > {name:36s} {v:10s} {us:8.1f} us {flops / us / 1e6:6.0f} TFLOPS diff {diff:.1e}"
                  f"{'' if same is None else ' same' if same else ' DIFFERENT'}{flag}", flush=True)
        if "plan" in times:
            best = min(times, key=times.get)
            print(f"   best {best}: {times['plan'] / times[best]:.3f}x the plan", flush=True)
    print("\n== geomean of plan time / variant time ==")
    summary = {}
    for v in list(VARIANTS) + ["ids"]:
        for kind in ("psum", "psum_decode", "masked"):
            ratios = []
            for name in {r["row"] for r in results if r["row"].split()[0] == kind}:
                by = {r["variant"]: r["us"] for r in results if r["row"] == name}
                if v in by and "plan" in by:
                    ratios.append(by["plan"] / by[v])
            if ratios:
                gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
                summary[f"{kind}/{v}"] = gm
                print(f" {kind:12s} {v:10s} {gm:.3f}x over {len(ratios)} rows (min {min(ratios):.3f}x)")
    # The decision this sweep exists for (fp8_plan.TILE_WALK): the walk pays where it is >= 2 % faster over a layout's
    # rows and no row is more than 2 % slower.
    for kind in ("psum", "psum_decode", "masked"):
        ratios = [by["plan"] / by["walk"] for by in ({r["variant"]: r["us"] for r in results if r["row"] == name}
                                                      for name in {r["row"] for r in results
                                                                   if r["row"].split()[0] == kind})
                  if "plan" in by and "walk" in by]
        if ratios:
            gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
            verdict = "pays" if gm >= 1.02 and min(ratios) >= 0.98 else "does not pay"
            print(f"VERDICT {kind}: the walk {verdict} (geomean {gm:.3f}x, worst row {min(ratios):.3f}x)")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "sweep_moe_schedule.json")
    with open(path, "w") as f:
        json.dump(dict(gpu=DEVICE_NAME, results=results, summary=summary, errors=list(map(str, errors))), f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
