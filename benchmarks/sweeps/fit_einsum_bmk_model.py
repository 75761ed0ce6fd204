"""Refit of the einsum ``bmk,bnk->mn`` split model (``deep_gemm/einsum/plan.py``'s ``bmk_time_us``) to a --sweep log of
``benchmarks/bench_einsum.py`` (CPU only: reads the log, no GPU).

    python benchmarks/sweeps/fit_einsum_bmk_model.py sweep.log     # the log of bench_einsum.py --sweep

Grid-searches the model's constants and the exponent ``p`` of the DRAM / per-program time combination (p = 2 is
the root sum of squares the product uses; a large p is the former max) over the rows whose planned split is within
2 % of the fastest measured one, and prints the best fits by log RMS error of the parallel rows. Measured splits
are normalised as ``_launch_bmk`` launches them (``cdiv(s, cdiv(s, splits))``). The 2026-12-02 fit: p = 2 with the
existing constants (3500 GB/s, 100 GB/s per program, reduction unchanged).
"""

import importlib
import itertools
import math
import re
import sys

et = importlib.import_module("deep_gemm.einsum.plan")
et.usable_sms = lambda: 132
cd = importlib.import_module("deep_gemm.utils.numeric").ceil_div
LINE = re.compile(r"sweep bmk s=\s*(\d+) m=(\d+) n=(\d+) k=(\d+) \S+ w8 s4 splits=(\d+) (parallel|serial)\s+"
                  r"(\(plan\))?\s+([\d.]+) us")
P = dict(p=2, dram=3500, prog=100, fill=1, launch=2, rt=0.5, l2=6000, serial=150, slack=1.03)


def load(path):
    rows = {}
    for line in open(path):
        hit = LINE.search(line)
        if hit and "rm=" not in line:
            s, m, n, k, x = map(int, hit.groups()[:5])
            rows.setdefault((s, m, n, k), {})[(cd(s, cd(s, x)), hit.group(6))] = float(hit.group(8))
    return rows


def model_us(s, m, n, k, tile, splits, reduce="parallel"):
    tiles = cd(m, tile.block_m) * cd(n, tile.block_n)
    dram = s * (m + n) * k * 2 / P["dram"] / 1e3
    program = cd(s, splits) * (tile.block_m + tile.block_n) * k * 2 / P["prog"] / 1e3
    t = (dram ** P["p"] + program ** P["p"]) ** (1 / P["p"]) + P["fill"]
    if splits > 1:
        tile_bytes = tile.block_m * tile.block_n * 4
        partials = splits * tiles * tile_bytes
        if reduce == "parallel":
            t += P["launch"] + cd(splits, 8) * P["rt"] + 2 * partials / P["l2"] / 1e3
        else:
            t += partials / P["l2"] / 1e3 + splits * tile_bytes / P["serial"] / 1e3
    return t


def plan(s, m, n, k):
    tile = et.bmk_config(m, n)
    wave = et.BMK_PROGRAMS_PER_SM.get((tile.block_m, tile.block_n), 1) * 132
    counts = sorted({cd(s, cd(s, x)) for x in range(1, max(1, min(s, wave // (cd(m, 128) * cd(n, 128)))) + 1)})
    times = {(x, r): model_us(s, m, n, k, tile, x, r) for x in counts for r in ("parallel", "serial")}
    fastest = min(times.values())
    return max((key for key, t in times.items() if t <= fastest * P["slack"]), key=lambda key: (key[0], -times[key]))


def main(path):
    rows = load(path)
    fits = []
    grid = dict(p=(1, 1.5, 2, 3, 50), dram=(3500, 4000), prog=(80, 90, 100), fill=(1,), launch=(2, 4),
                rt=(0.5, 1.0), l2=(3000, 6000), serial=(150,), slack=(1.0, 1.03))
    for values in itertools.product(*grid.values()):
        P.update(zip(grid, values))
        if all(meas.get(plan(*shape), math.inf) <= 1.02 * min(meas.values()) for shape, meas in rows.items()):
            errors = [math.log(model_us(*shape, et.bmk_config(shape[1], shape[2]), *key) / t)
                      for shape, meas in rows.items() for key, t in meas.items() if key[1] == "parallel"]
            fits.append((math.sqrt(sum(e * e for e in errors) / len(errors)), dict(zip(grid, values))))
    fits.sort(key=lambda fit: fit[0])
    print(f"{len(fits)} fits pick the measured fastest split on all {len(rows)} rows")
    for error, params in fits[:10]:
        print(f"log rms {error:.3f}  {params}")


if __name__ == "__main__":
    main(sys.argv[1])
