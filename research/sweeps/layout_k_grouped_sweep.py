"""Sweep of the K-grouped UE8M0 pack kernel's tile (layout/kernels._k_grouped_pack_kernel) on the GPU, ours only:
the launcher's tile (16 packed rows x 128 MN columns, 4 warps) against neighbours on the rows of
benchmarks/bench_hc_prenorm.py's layout_k_grouped table, same timer (session 23: 0.38-0.63x of DeepGEMM at 8 and 16
groups, 8-16 us where the bytes move in ~3). Also times the launcher itself, to tell kernel time from anything
else the call launches.

    PYTHONPATH=$PWD python research/sweeps/layout_k_grouped_sweep.py --out $OUT/layout
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from harness import KernelTimer  # noqa: E402

TILES = [(16, 128, 4), (4, 128, 4), (8, 128, 4), (8, 256, 4), (4, 256, 2), (4, 512, 4), (16, 256, 8), (2, 512, 4),
         (1, 1024, 4), (4, 1024, 8), (32, 128, 8)]


def main():
    import deep_gemm
    from deep_gemm.layout.kernels import _k_grouped_pack_kernel
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="research/results")
    args = parser.parse_args()
    timer = KernelTimer(reps=20)
    rng = random.Random(1)
    g = torch.Generator(device="cuda").manual_seed(0)
    results = []
    for mn in (4096, 7168):
        for num_groups, avg_k in ((16, 2048), (8, 4096), (72, 384), (128, 256)):
            ks = [max(128, int(rng.uniform(0.7, 1.3) * avg_k) // 128 * 128) for _ in range(num_groups)]
            sf = torch.exp2(torch.randint(-8, 8, (sum(ks) // 128, mn), device="cuda", generator=g).float())
            layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
            want = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, layout, ks, 128, 128)
            us = timer(lambda: deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, layout, ks, 128,
                                                                                               128))
            nbytes = sf.numel() * 4 + want.numel() * 4
            print(f"mn={mn} groups={num_groups:3} launcher {us:6.1f} us {nbytes / us / 1e3:5.0f} GB/s", flush=True)
            results.append(dict(mn=mn, groups=num_groups, variant="launcher", us=us))
            rows = want.size(0)
            g_pad = max(2, 1 << (num_groups - 1).bit_length())
            for bp, bc, warps in TILES:
                out = torch.empty_like(want)
                grid = (triton_cdiv(rows, bp), triton_cdiv(mn, bc))

                def call():
                    _k_grouped_pack_kernel[grid](sf, layout, out, rows, mn, sf.size(0), num_groups, 128, 128,
                                                 USE_PSUM=False, G_PAD=g_pad, BP=bp, BC=bc, num_warps=warps)
                call()
                ok = torch.equal(out, want)
                us = timer(call)
                print(f"mn={mn} groups={num_groups:3} bp={bp:2} bc={bc:4} w={warps} {us:6.1f} us "
                      f"{nbytes / us / 1e3:5.0f} GB/s {'ok' if ok else 'WRONG'}", flush=True)
                results.append(dict(mn=mn, groups=num_groups, variant=f"bp{bp}-bc{bc}-w{warps}", us=us, ok=ok))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "layout_k_grouped_sweep.json"), "w") as f:
        json.dump(results, f, indent=1)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


if __name__ == "__main__":
    main()
