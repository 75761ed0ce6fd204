"""tf32_hc_prenorm_gemm and the scale-layout ops: kernel time (us), GB/s and host time per call, for whichever
``deep_gemm`` is importable (this package or DeepGEMM: same script, same timer, see harness.py).

    PYTHONPATH=$PWD python benchmarks/bench_hc_prenorm.py --out $OUT/ours
    PYTHONPATH=$PWD/.dg/DeepGEMM python benchmarks/bench_hc_prenorm.py --out $OUT/dg
    python benchmarks/compare_providers.py $OUT/ours/bench_hc_prenorm.json $OUT/dg/bench_hc_prenorm.json

Tables: ``hc`` (DeepGEMM's test rows: m 13/137/4096/8192 x k 28672/7680/7168 x splits none/16, n = 24), ``hc_decode``
(m = 1..64, k 7168/28672, no splits), ``layout`` (DeepGEMM's test_layout SM90 rows), ``host`` (host us per call,
tight loop without sync, kernel time far below the host time).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, calc_diff, write_results  # noqa: E402


def hc_rows(timer, rows, table):
    import deep_gemm
    torch.backends.cuda.matmul.allow_tf32 = True
    results = []
    for m, n, k, num_splits in rows:
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(n, k, device="cuda")
        lead = () if num_splits is None else (num_splits,)
        d = torch.empty(*lead, m, n, device="cuda")
        s = torch.empty(*lead, m, device="cuda")

        def call():
            deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
        call()
        fd, fs = (d, s) if num_splits is None else (d.sum(0), s.sum(0))
        diff = max(calc_diff(fd, a.float() @ b.T), calc_diff(fs, a.float().square().sum(-1)))
        diff64 = calc_diff(fd, a.double() @ b.double().T)
        us = timer(call)
        nbytes = sum(t.numel() * t.element_size() for t in (a, b, d, s))
        row = dict(table=table, m=m, n=n, k=k, splits=num_splits or 0, us=us, gbps=nbytes / us / 1e3,
                   diff=diff, note=f"diff_fp64={diff64:.2e}")
        print(f" > hc (m={m:5}, n={n:3}, k={k:5}, splits={num_splits or 0:2}): {us:7.1f} us | "
              f"{nbytes / us / 1e3:5.0f} GB/s | diff vs torch TF32 {diff:.1e} | vs fp64 {diff64:.1e}", flush=True)
        results.append(row)
    return results


def _layout_fn(name):
    import deep_gemm
    fn = getattr(deep_gemm, name, None)
    if fn is None:
        import deep_gemm.utils as utils
        fn = getattr(utils, name)
    return fn


def layout_rows(timer):
    """DeepGEMM's tests/test_layout.py SM90 rows (gran_k 128): MN-major transposes and UE8M0 packs, then K-grouped
    packs. Inputs are made like the test's (per-token / per-channel scales), with a fixed RNG."""
    transpose = _layout_fn("get_mn_major_tma_aligned_tensor")
    pack = _layout_fn("get_mn_major_tma_aligned_packed_ue8m0_tensor")
    k_grouped = _layout_fn("get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor")
    results = []
    g = torch.Generator(device="cuda").manual_seed(1)
    for use_ue8m0 in (False, True):
        for with_transpose in (True, False):
            for mn in (4096, 4097, 8192):
                for k in (128, 7168, 7296):
                    for num_groups in (1, 2, 4):
                        sf_k = -(-k // 128)
                        sf = torch.rand(num_groups * mn, sf_k, device="cuda", generator=g) + 0.5
                        if use_ue8m0:
                            sf = torch.exp2(torch.ceil(torch.log2(sf)))
                        sf = sf if num_groups == 1 else sf.view(num_groups, mn, sf_k)
                        sf = sf if with_transpose else sf.transpose(-1, -2).contiguous().transpose(-1, -2)
                        fn = pack if use_ue8m0 else transpose
                        out = fn(sf)
                        us = timer(lambda: fn(sf))
                        nbytes = sf.numel() * 4 + out.numel() * 4
                        results.append(dict(table="layout", op="pack" if use_ue8m0 else "transpose", mn=mn, k=k,
                                            groups=num_groups, transposed_input=with_transpose, us=us,
                                            gbps=nbytes / us / 1e3 if us == us and us > 0 else 0.0,
                                            note="input returned" if out is sf else ""))
                        print(f" > layout {results[-1]['op']:9} (groups={num_groups}, mn={mn:5}, k={k:5}, "
                              f"transpose={int(with_transpose)}): {us:6.1f} us", flush=True)
    import random
    rng = random.Random(1)
    for mn in (4096, 7168):
        for num_groups, avg_k in ((16, 2048), (8, 4096), (72, 384), (128, 256)):
            ks = [max(128, int(rng.uniform(0.7, 1.3) * avg_k) // 128 * 128) for _ in range(num_groups)]
            sf = torch.exp2(torch.randint(-8, 8, (sum(ks) // 128, mn), device="cuda", generator=g).float())
            layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
            out = k_grouped(sf, layout, ks, 128, 128)
            us = timer(lambda: k_grouped(sf, layout, ks, 128, 128))
            nbytes = sf.numel() * 4 + out.numel() * 4
            results.append(dict(table="layout_k_grouped", mn=mn, groups=num_groups, sum_k=sum(ks), us=us,
                                gbps=nbytes / us / 1e3))
            print(f" > layout k-grouped (groups={num_groups:3}, mn={mn}, sum_k={sum(ks)}): {us:6.1f} us", flush=True)
    return results


def host_rows(calls=2000):
    import deep_gemm
    a = torch.randn(13, 7168, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(24, 7168, device="cuda")
    d = torch.empty(13, 24, device="cuda")
    s = torch.empty(13, device="cuda")
    ds = torch.empty(16, 13, 24, device="cuda")
    ss = torch.empty(16, 13, device="cuda")
    x = torch.zeros(1, device="cuda")
    cases = {"hc_prenorm m13 k7168": lambda: deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s),
             "hc_prenorm m13 k7168 splits16": lambda: deep_gemm.tf32_hc_prenorm_gemm(a, b, ds, ss, num_splits=16),
             "x.add_(1) floor": lambda: x.add_(1)}
    results = []
    for name, fn in cases.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / calls * 1e6
        results.append(dict(table="host", call=name, us=us))
        print(f" > host {name}: {us:.1f} us/call", flush=True)
    return results


DG_ROWS = [(m, 24, k, s) for m in (13, 137, 4096, 8192) for k in (28672, 7680, 7168) for s in (None, 16)]
DECODE_ROWS = [(m, 24, k, None) for m in (1, 2, 4, 8, 16, 32, 64) for k in (7168, 28672)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--tables", default="hc,decode,layout,host")
    args = parser.parse_args()
    tables = set(args.tables.split(","))
    timer = KernelTimer()
    results = []
    if "hc" in tables:
        results += hc_rows(timer, DG_ROWS, "hc")
    if "decode" in tables:
        results += hc_rows(timer, DECODE_ROWS, "hc_decode")
    if "layout" in tables:
        results += layout_rows(timer)
    if "host" in tables:
        results += host_rows()
    write_results(args.out, "bench_hc_prenorm", results)


if __name__ == "__main__":
    main()
