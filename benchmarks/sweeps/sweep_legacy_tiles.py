"""Time candidate tiles of the legacy grouped BF16 GEMMs (deep_gemm.legacy) on DeepGEMM's test_legacy rows.

Rows (.dg/DeepGEMM/tests/test_legacy.py, generators.py): M-grouped contiguous with B K-major (NT) and N-major (NN),
the A-fused NT variant (identity row map, as DeepGEMM's test), and K-grouped TN with the A and the B gather
(fp32 output, acc=True, identity k_indices, groups aligned to 128). Each (row, tile) is first checked against an
fp32 torch reference with calc_diff, then timed with benchmarks/harness.py's KernelTimer (L2 flushed, kernel time
only). One line per (row, tile), then the best tile per row and the geomean of each tile's speed-up over today's.

Kernels are compiled first in parallel threads (Triton's first compile is thread-safe), so the sweep spends its
time measuring; lines are flushed as they come, so a run cut short by a timeout still has its rows.

    python benchmarks/sweeps/sweep_legacy_tiles.py [--only k_b,m_nn,m_nt,k_a,m_afused] [--tiles 128x128x64/w8/s3,...]
                                                 [--groups 4,8] [--reps 10] [--out results.json] [--budget-s 380]
    python benchmarks/sweeps/sweep_legacy_tiles.py --smoke     # CPU: Triton interpreter, tiny shapes, wall-clock
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import random
import sys
import time

SMOKE = "--smoke" in sys.argv
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)

import deep_gemm  # noqa: E402
from deep_gemm.legacy import api  # noqa: E402
from deep_gemm.legacy.plan import K_GROUPED_TILE, M_GROUPED_TILE, LegacyOverrides, LegacyTile  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402

SMEM_LIMIT = 227 * 1024
T = LegacyTile

# DeepGEMM's nine autotune configs (.dg/DeepGEMM/deep_gemm/legacy/tune_options.py; the last is listed twice there),
# those whose pipelined A+B tiles fit 227 KB; 128x128x128/s4 and 128x256x128/s3,s4 do not.
DEEPGEMM_TILES = [
    T(128, 256, 64, 8, 3), T(128, 256, 64, 8, 4), T(128, 128, 128, 8, 3),
    T(64, 64, 128, 4, 2), T(32, 64, 128, 4, 3),
]
# Ours beyond today's: deeper pipelines of today's tile, a wider N for NN (B N-major loads coalesce along N), and
# for K-grouped TN (A is MN-major, loaded transposed) a 256-row M tile and a shorter K step with more stages.
EXTRA_M_TILES = [T(128, 128, 64, 8, 4), T(128, 128, 64, 8, 5), T(128, 256, 32, 8, 4), T(64, 256, 64, 8, 4),
                 T(128, 128, 32, 8, 5), T(64, 128, 64, 4, 4), T(64, 128, 128, 4, 3), T(128, 64, 64, 4, 4),
                 T(128, 128, 128, 8, 2)]
EXTRA_K_TILES = [T(128, 128, 64, 8, 4), T(128, 128, 64, 8, 5), T(256, 128, 64, 8, 3), T(128, 256, 32, 8, 4),
                 T(128, 128, 32, 8, 5), T(64, 256, 64, 8, 4), T(64, 128, 64, 4, 4), T(64, 128, 128, 4, 3),
                 T(128, 64, 128, 4, 3), T(128, 128, 128, 8, 2)]
# Candidates whose sm_90a compile spills (scripts/compile_check_legacy.py --candidates, Triton 3.6, B's unit stride
# specialised as at a launch; worst spill bytes over the kernels in the comment) are left out of the sweep. No
# M-grouped candidate spills; the K-grouped kernels' 256-wide tiles do.
SPILLING = {
    ("k", "128x256x64/w8/s3"), ("k", "128x256x64/w8/s4"), ("k", "128x256x32/w8/s4"),        # 176
    ("k", "256x128x64/w8/s3"),                                                              # 128
}


def candidates(kind: str, include_spilling: bool = False) -> list:
    """Today's tile first, then DeepGEMM's and ours, deduplicated, within shared memory and not spilling."""
    default = K_GROUPED_TILE if kind.startswith("k") else M_GROUPED_TILE
    extra = EXTRA_K_TILES if kind.startswith("k") else EXTRA_M_TILES
    out = []
    for tile in [default] + DEEPGEMM_TILES + extra:
        spills = (kind[0], tile.label()) in SPILLING
        if tile not in out and tile.smem_bytes() <= SMEM_LIMIT and (include_spilling or not spills):
            out.append(tile)
    return out


def all_candidates() -> dict:
    """{'m': [...], 'k': [...]}, the spilling ones included: what scripts/compile_check_legacy.py --candidates
    compiles (so that SPILLING can be re-derived)."""
    return {"m": candidates("m_nt", True), "k": candidates("k_b", True)}


# ---- inputs (DeepGEMM's generators: sizes drawn with a fixed seed, groups aligned to the contiguous layout) ----

def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def m_rows(groups_filter):
    if SMOKE:
        return [(2, 96, 64, 128)]
    rows = []
    for groups, expected_m in ((4, 8192), (8, 4096)):
        if groups in groups_filter:
            for n, k in ((6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)):
                rows.append((groups, expected_m, n, k))
    return rows


def k_rows(groups_filter):
    if SMOKE:
        return [(2, 64, 96, 160)]
    return [r for r in ((4, 4096, 7168, 8192), (4, 7168, 2048, 8192), (8, 4096, 7168, 4096),
                        (8, 7168, 2048, 4096), (16, 4096, 7168, 2048), (16, 7168, 2048, 2048))
            if r[0] in groups_filter]


def make_m_problem(kind, groups, expected_m, n, k, device):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    sizes = [int(expected_m * random.uniform(0.7, 1.3)) for _ in range(groups)]
    m = sum(_align(s, alignment) for s in sizes)
    m_indices = torch.empty(m, dtype=torch.int32)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device)
    b_nk = torch.randn(groups, n, k, dtype=torch.bfloat16, device=device)
    ref = torch.zeros(m, n, dtype=torch.float32, device=device)
    start = 0
    for g, size in enumerate(sizes):
        end = start + _align(size, alignment)
        m_indices[start:start + size] = g
        m_indices[start + size:end] = -1
        ref[start:start + size] = a[start:start + size].float() @ b_nk[g].float().T
        start = end
    m_indices = m_indices.to(device)
    b = b_nk if kind != "m_nn" else b_nk.mT.contiguous().mT  # NN: the [G, K, N] tensor seen as [G, N, K]
    rows = torch.arange(m, dtype=torch.int32, device=device) if kind == "m_afused" else None
    d = torch.empty(m, n, dtype=torch.bfloat16, device=device)

    def launch(tile):
        api._m_grouped(a, b, d, m_indices, rows, LegacyOverrides(m_grouped_tile=tile))
    label = f"{kind} groups={groups} m={m} n={n} k={k}"
    return label, launch, (lambda: None), d, ref, 2 * sum(sizes) * n * k


def make_k_problem(kind, groups, m, n, expected_k, device):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    ks = [_align(max(1, int(expected_k * random.uniform(0.7, 1.3))), alignment) for _ in range(groups)]
    k = sum(ks)
    a = torch.randn(k, m, dtype=torch.bfloat16, device=device)
    b = torch.randn(k, n, dtype=torch.bfloat16, device=device)
    c0 = torch.randn(groups, m, n, dtype=torch.float32, device=device)
    ends = torch.tensor(ks, dtype=torch.int32).cumsum(0).int()
    starts = ends - torch.tensor(ks, dtype=torch.int32)
    handle = (torch.arange(k, dtype=torch.int32, device=device), starts.to(device), ends.to(device))
    ref = c0.clone()
    for g, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        ref[g] += a[s:e].float().T @ b[s:e].float()
    c = torch.empty_like(c0)

    def launch(tile):
        api._k_grouped(a, b, c, handle, True, gather_a=kind == "k_a", overrides=LegacyOverrides(k_grouped_tile=tile))

    def prepare():
        c.copy_(c0)  # the launch accumulates into c
    label = f"{kind} groups={groups} m={m} n={n} k={k}"
    return label, launch, prepare, c, ref, 2 * m * n * k


# ---- timing ----------------------------------------------------------------------------------------------------

def wall_timer(fn) -> float:
    fn()
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter, tiny shapes (tests this script)")
    # test_legacy's perf lines first (K-grouped TN with the B gather, M-grouped NN and NT), so that a run cut short by
    # its time limit has them.
    parser.add_argument("--only", default="k_b,m_nn,m_nt,k_a,m_afused")
    parser.add_argument("--tiles", default="", help="comma-separated tile labels to keep (default: all candidates)")
    parser.add_argument("--groups", default="4,8,16")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", default="")
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="start no new row after this many seconds (0: no limit); the summary still prints")
    args = parser.parse_args()
    started = time.time()
    device = "cpu" if args.smoke else "cuda"
    kinds = args.only.split(",")
    groups_filter = {int(g) for g in args.groups.split(",")}
    keep = set(filter(None, args.tiles.split(",")))
    if args.smoke:
        timer = wall_timer
    else:
        from harness import KernelTimer
        timer = KernelTimer(reps=args.reps)

    # Rows are built one at a time (all of them at once would not fit in GPU memory), each from its own seed.
    specs = []
    for kind in kinds:
        rows = k_rows(groups_filter) if kind.startswith("k") else m_rows(groups_filter)
        specs += [(kind, row) for row in rows]

    def build(spec):
        kind, row = spec
        random.seed(hash(row) & 0xFFFF)
        torch.manual_seed(hash(row) & 0xFFFF)
        make = make_k_problem if kind.startswith("k") else make_m_problem
        return (kind,) + make(kind, *row, device)

    tiles = {kind: [t for t in candidates(kind) if not keep or t.label() in keep] for kind in kinds}
    print(f"# {len(specs)} rows; tiles per kind: " + ", ".join(f"{k}={len(v)}" for k, v in tiles.items()),
          flush=True)

    # Compile every (kernel, tile) in parallel on each kind's first row (the specialisations are the same on all
    # rows of a kind: sizes and strides are multiples of 16).
    if not args.smoke:
        t0 = time.time()
        for kind in kinds:
            first = next((build(sp) for sp in specs if sp[0] == kind), None)
            if first is None:
                continue
            with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
                futures = {pool.submit(first[2], t): t for t in tiles[kind]}
                for f in concurrent.futures.as_completed(futures):
                    if f.exception() is not None:
                        print(f"COMPILE-FAIL {first[1]} {futures[f].label()}: {f.exception()!r}", flush=True)
            torch.cuda.synchronize()
            del first
            torch.cuda.empty_cache()
        print(f"# compiled the tiles of {len(kinds)} kernel kinds in {time.time() - t0:.0f} s", flush=True)

    results = []
    for spec in specs:
        if args.budget_s and time.time() - started > args.budget_s:
            print(f"# budget of {args.budget_s:.0f} s spent: rows from {spec} on were not run", flush=True)
            break
        kind, label, launch, prepare, out, ref, flops = build(spec)
        per_row = []
        for tile in tiles[kind]:
            try:
                prepare()
                if kind.startswith("m"):
                    out.fill_(float("nan"))  # every row must be written (padding rows as zeros)
                launch(tile)
                diff = calc_diff(out, ref)
                if diff != diff:
                    diff = float("inf")
            except Exception as e:  # noqa: BLE001 - one bad tile must not stop the sweep
                print(f"FAIL {label} tile={tile.label()}: {type(e).__name__}: {e}", flush=True)
                continue
            ok = diff < 1e-3
            us = timer(lambda: launch(tile)) if ok else float("nan")
            tflops = flops / us / 1e6 if us == us and us > 0 else float("nan")
            per_row.append((tile, us, diff))
            results.append(dict(kind=kind, row=label, tile=tile.label(), us=us, tflops=tflops, diff=diff, ok=ok))
            print(f"{'ok ' if ok else 'BAD'} {label:48s} tile={tile.label():22s} {us:9.1f} us {tflops:6.0f} TFLOPS "
                  f"diff={diff:.2e}", flush=True)
        timed = [r for r in per_row if r[1] == r[1]]
        if timed:
            best = min(timed, key=lambda r: r[1])
            base = next((r for r in per_row if r[0] == tiles[kind][0]), None)
            speed = base[1] / best[1] if base and base[1] == base[1] else float("nan")
            print(f"BEST {label:47s} tile={best[0].label():22s} {best[1]:9.1f} us ({speed:.2f}x today's "
                  f"{tiles[kind][0].label()})", flush=True)
        if args.out:  # after every row: a run cut short keeps what it measured
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)

    # Geomean speed-up of each tile over today's, per kind (rows where both were timed).
    for kind in kinds:
        base = {r["row"]: r["us"] for r in results if r["kind"] == kind and r["tile"] == tiles[kind][0].label()}
        for tile in tiles[kind]:
            ratios = [base[r["row"]] / r["us"] for r in results if r["kind"] == kind and r["tile"] == tile.label()
                      and r["row"] in base and r["us"] == r["us"] and r["us"] > 0 and base[r["row"]] == base[r["row"]]]
            if ratios:
                g = math.exp(sum(map(math.log, ratios)) / len(ratios))
                print(f"GEOMEAN {kind:9s} tile={tile.label():22s} {g:.3f}x today's over {len(ratios)} rows", flush=True)
    return 0 if all(r["ok"] for r in results) and results else 1


if __name__ == "__main__":
    sys.exit(main())
