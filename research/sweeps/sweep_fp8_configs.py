"""Time FP8 GEMM kernel variants side by side on the GPU (same process, same timer as bench_fp8_gemm.py), to
choose the heuristic's rules from measurements:

* dense M=4096, M-grouped contiguous and masked: the tl.* kernel vs the warp-specialised kernel with one 64-row
  wave per warpgroup or two, stacked along M (DeepGEMM's 256-row tile) or along N (a 128 x 256 tile, or a split
  128 x 192 one), ring depth, pointer vs TMA epilogue (WS_VARIANTS);
* group_m: the tile raster of the M=4096 kernels; masked_decode: tl.* configs for the m = 20 masked rows;
* dense M=128 (dense128) and M=1 (dense1): tl.* tile shapes x split-K (M=1 also with a third CTA per SM);
  dense128_ws: M=128 on the warp-specialised kernel's unsplit variants;
* sharing: one tile workload arranged so that concurrent programs share A, share B or neither (operand hot-spots);
  one_wave_scales: the one-wave kernel with its scales staged in shared memory or loaded from global memory;
* tail_tiles: 128 + 16 / 32 tail tiles against 128 x 192 and 128 x 256 tiles on N with a 64-column tail.

Every variant is checked against the dequantised reference before it is timed. Kernels are compiled in parallel
threads first (first-time compilation is thread-safe), so the sweep spends its time measuring.

    python research/sweeps/sweep_fp8_configs.py [--out results.json] [--only dense4096,masked] [--variants auto,ws2n-s4]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import bench_fp8_gemm as bench  # noqa: E402
import shapes  # noqa: E402

from deep_gemm.gemm import fp8_configs as configs  # noqa: E402
from deep_gemm.gemm import fp8_triton  # noqa: E402
from deep_gemm.gemm.operands import resolve_recipe  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402
from deep_gemm.utils.math import ceil_div as cdiv  # noqa: E402

WS_VARIANTS = {"ws1-s5": dict(waves=1, stages=5), "ws1-s6": dict(waves=1, stages=6),
               "ws2-s3": dict(waves=2, stages=3), "ws2-s4": dict(waves=2, stages=4),
               "ws2n-s3": dict(waves=2, wave_n=True, stages=3), "ws2n-s4": dict(waves=2, wave_n=True, stages=4),
               "ws2n192": dict(waves=2, wave_n=True, narrow=64, stages=4),
               "ws2n-tail": dict(waves=2, wave_n=True, narrow=16), "ws2n-tail32": dict(waves=2, wave_n=True, narrow=32),
               "ws2n-r224": dict(waves=2, wave_n=True, regs=(224, 56)),
               "ws2n-r232": dict(waves=2, wave_n=True, regs=(232, 40)),
               # (1D1D and K-grouped layouts: their only warp-specialised variant, with a forced register budget)
               "r232": dict(regs=(232, 40)), "r224": dict(regs=(224, 56)),
               "ws2n-r240": dict(waves=2, wave_n=True, regs=(240, 32)),
               "ws2n-ptr": dict(waves=2, wave_n=True, stages=4, d_tma=False),
               "ws1": dict(waves=1)}
# Variants each table runs (--variants overrides): "tl" is the tl.* kernel, "auto" the shipped heuristic.
DENSE_VARIANTS = ["tl", "auto", "ws2-s4", "ws2n-s4", "ws2n192"]
CONTIGUOUS_VARIANTS = ["tl", "auto", "ws1-s5", "ws2n-s4", "ws2n192"]
MASKED_VARIANTS = ["tl", "auto", "ws2n-s4"]


def run_variant(name, fn):
    """Call fn under variant `name`'s kernel selection."""
    saved = fp8_triton._WS_MODE, fp8_triton.WS_OVERRIDE
    try:
        if name == "tl":
            fp8_triton._WS_MODE = "off"
        elif name != "auto":
            fp8_triton._WS_MODE, fp8_triton.WS_OVERRIDE = "on", WS_VARIANTS[name]
        return fn()
    finally:
        fp8_triton._WS_MODE, fp8_triton.WS_OVERRIDE = saved


def dense_call(a, b, d, cfg=None):
    r = resolve_recipe(None, None, None, b[1])
    return lambda: fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, r, cfg=cfg)


def time_dense_variants(timer, rows, table, m, n, k, variants, dg_us=None):
    """One dense shape under each variant: checked against the reference, then timed (ratio to DG if given)."""
    a, b = bench.fp8_operands(m, n, k)
    ref = bench.reference(a, b, (128, 128))
    for name in variants:
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        call = dense_call(a, b, d)
        run_variant(name, call)
        diff = calc_diff(d, ref)
        us = run_variant(name, lambda: timer(call))
        row = dict(table=table, m=m, n=n, k=k, variant=name, us=us, tflops=2 * m * n * k / us / 1e6, diff=diff)
        vs_dg = ""
        if dg_us is not None:
            row["vs_deepgemm"] = dg_us / us
            vs_dg = f" {dg_us / us:5.2f}x DG"
        rows.append(row)
        print(f"dense {m}x{n}x{k} {name:7s} {us:8.1f} us {row['tflops']:6.0f} TFLOPS{vs_dg} diff {diff:.1e}",
              flush=True)


def sweep_dense_big(timer, rows):
    for (m, n, k), dg_us in shapes.DENSE_1D2D_DG_US.items():
        if m >= 4096:
            time_dense_variants(timer, rows, "dense", m, n, k, DENSE_VARIANTS, dg_us)


def sweep_contiguous(timer, rows):
    import deep_gemm
    for (g, per_group, n, k), dg_tflops in shapes.M_GROUPED_CONTIGUOUS_DG_TFLOPS.items():
        ms, _, _, a, b, layout = bench.contiguous_operands(g, per_group, n, k)
        m = a[0].size(0)
        expected = None
        for name in CONTIGUOUS_VARIANTS:
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

            def call():
                deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=True)
            run_variant(name, call)
            if expected is None:
                expected = d.clone()
            diff = calc_diff(d, expected)  # vs the tl.* kernel (itself checked by the GPU tests and the benchmark)
            us = run_variant(name, lambda: timer(call))
            tflops = 2 * sum(ms) * n * k / us / 1e6
            rows.append(dict(table="contiguous", groups=g, m=sum(ms), n=n, k=k, variant=name, us=us, tflops=tflops,
                             vs_deepgemm=tflops / dg_tflops, diff=diff))
            print(f"contig {g}x{sum(ms)}x{n}x{k} {name:7s} {us:8.1f} us {tflops:6.0f} TFLOPS "
                  f"{tflops / dg_tflops:5.2f}x DG diff {diff:.1e}", flush=True)


def sweep_masked(timer, rows):
    """The masked table's shapes (DeepGEMM's Mmax = 4096 allocation), each variant checked on every group's valid
    rows against the dequantised reference."""
    import deep_gemm
    for (g, expected_m, n, k), (dg_us, _, _) in shapes.MASKED_DG.items():
        a, b, masked_m, masked = bench.masked_operands(g, expected_m, n, k)
        for name in MASKED_VARIANTS:
            d = torch.empty(g, shapes.MASKED_MAX_M, n, device="cuda", dtype=torch.bfloat16)

            def call():
                deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, int(expected_m * 1.2))
            run_variant(name, call)
            diff = bench.masked_diff(d, a, b, masked)
            us = run_variant(name, lambda: timer(call))
            rows.append(dict(table="masked", groups=g, expected_m=expected_m, n=n, k=k, variant=name, us=us,
                             vs_deepgemm=dg_us / us, diff=diff))
            print(f"masked {g}x{expected_m}x{n}x{k} {name:7s} {us:8.1f} us {dg_us / us:5.2f}x DG diff {diff:.1e}",
                  flush=True)


def small_m_configs(m, n, k):
    """tl.* tile shapes x splits around one wave of programs: 64- and 128-row tiles for M >= 64, else the
    smallest tile height covering M (>= 16)."""
    problem = configs.Fp8GemmProblem(m, n, k, 1, "dense", fp8_triton._num_sms())
    min_bm = max(16, min(64, 1 << max(0, (m - 1).bit_length())))
    out = []
    for cfg in configs.candidates(problem):
        if cfg.block_m < min_bm or (m < 64 and cfg.block_m != min_bm):
            continue
        slots = problem.num_sms * cfg.programs_per_sm
        tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
        if cfg.split_k in (1, 2, 3, 4, 6, 8, 12, 16) and tiles * cfg.split_k <= 2 * slots:
            out.append(cfg)
            if m < 64 and cfg.split_k <= 2:  # decode rows: a third co-resident CTA per SM (3 stages to fit)
                out.append(dataclasses.replace(cfg, num_stages=3, programs_per_sm=3))
    return out


def sweep_dense_small(timer, rows, ms=(128,)):
    for (m, n, k), dg_us in shapes.DENSE_1D2D_DG_US.items():
        if m not in ms:
            continue
        a, b = bench.fp8_operands(m, n, k)
        ref = bench.reference(a, b, (128, 128))
        cfgs = small_m_configs(m, n, k)
        outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in cfgs]
        fp8_triton._WS_MODE = "off"
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:  # compile every config at once
            list(pool.map(lambda i: dense_call(a, b, outs[i], cfgs[i])(), range(len(cfgs))))
        torch.cuda.synchronize()
        print(f"compiled {len(cfgs)} configs for {m}x{n}x{k} in {time.time() - t0:.0f} s", flush=True)
        heuristic = configs.heuristic(configs.Fp8GemmProblem(m, n, k, 1, "dense", fp8_triton._num_sms()))
        for cfg, d in zip(cfgs, outs):
            call = dense_call(a, b, d, cfg)
            call()
            diff = calc_diff(d, ref)
            us = timer(call)
            tag = f"{cfg.block_m}x{cfg.block_n} s{cfg.num_stages} pps{cfg.programs_per_sm} split{cfg.split_k}" + (
                " (heuristic)" if cfg == heuristic else "")
            rows.append(dict(table="dense_small", m=m, n=n, k=k, variant=tag, us=us, vs_deepgemm=dg_us / us,
                             diff=diff, gbps=(m * k + n * k + 2 * m * n) / us / 1e3))
            print(f"dense {m}x{n}x{k} {tag:32s} {us:7.1f} us {dg_us / us:5.2f}x DG diff {diff:.1e}", flush=True)
        fp8_triton._WS_MODE = "auto"


# Decode (M = 128) on the warp-specialised kernel: (variant name, tl.* config's BN that the variant starts from).
DENSE128_WS_VARIANTS = [("ws1", 64), ("ws1", 128), ("ws2n-s4", 128), ("ws2n192", 128)]


def sweep_dense128_ws(timer, rows):
    """Dense M = 128 on the warp-specialised kernel (128-row tiles, no split-K) against the shipped choice."""
    for (m, n, k), dg_us in shapes.DENSE_1D2D_DG_US.items():
        if m != 128:
            continue
        a, b = bench.fp8_operands(m, n, k)
        ref = bench.reference(a, b, (128, 128))
        for name, bn in [("auto", None), *DENSE128_WS_VARIANTS]:
            cfg = configs._config(128, bn, 1) if bn else None
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            call = dense_call(a, b, d, cfg)
            run_variant(name, call)
            diff = calc_diff(d, ref)
            us = run_variant(name, lambda: timer(call))
            tag = name if bn is None else f"{name} bn{bn}"
            rows.append(dict(table="dense128_ws", m=m, n=n, k=k, variant=tag, us=us, vs_deepgemm=dg_us / us,
                             diff=diff))
            print(f"dense {m}x{n}x{k} {tag:16s} {us:7.1f} us {dg_us / us:5.2f}x DG diff {diff:.1e}", flush=True)


def sweep_group_m(timer, rows):
    """The tile raster of the M=4096 kernels: GROUP_M M-blocks per band (L2 reuse of B across the band)."""
    for (m, n, k), dg_us in shapes.DENSE_1D2D_DG_US.items():
        if m < 4096:
            continue
        a, b = bench.fp8_operands(m, n, k)
        base = configs.heuristic(configs.Fp8GemmProblem(m, n, k, 1, "dense", fp8_triton._num_sms()))
        for group_m in (8, 16):
            cfg = dataclasses.replace(base, group_m=group_m)
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            call = dense_call(a, b, d, cfg)
            call()
            us = timer(call)
            rows.append(dict(table="group_m", m=m, n=n, k=k, variant=f"group_m={group_m}", us=us,
                             vs_deepgemm=dg_us / us))
            print(f"dense {m}x{n}x{k} group_m={group_m:2d} {us:8.1f} us {dg_us / us:5.2f}x DG", flush=True)


def sweep_masked_decode(timer, rows):
    """tl.* configs for the masked decode rows (m = 20 per group): memory-bound, so tile count and bytes in
    flight per SM matter, not MMA efficiency. Each config is put into the config cache for the call's problem."""
    import deep_gemm
    candidates = [configs.Fp8GemmConfig(bm, bn, 4 if bm == 64 else 8, st, programs_per_sm=pps)
                  for bm, bn, st, pps in [(128, 128, 4, 1), (64, 128, 6, 1), (64, 64, 8, 1), (64, 64, 6, 2),
                                          (64, 128, 4, 2)]]
    for (g, expected_m, n, k), (dg_us, _, _) in shapes.MASKED_DG.items():
        if expected_m > 64:
            continue
        a, b, masked_m, masked = bench.masked_operands(g, expected_m, n, k)
        problem = configs.Fp8GemmProblem(shapes.MASKED_MAX_M, n, k, g, "masked", fp8_triton._num_sms(),
                                         expected_m=int(expected_m * 1.2))
        for cfg in candidates:
            d = torch.empty(g, shapes.MASKED_MAX_M, n, device="cuda", dtype=torch.bfloat16)

            def call():
                deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, int(expected_m * 1.2))
            fp8_triton.CONFIGS.put(problem, cfg)
            try:
                run_variant("tl", call)
                diff = bench.masked_diff(d, a, b, masked)
                us = run_variant("tl", lambda: timer(call))
            finally:
                fp8_triton.CONFIGS.pop(problem)
            tag = f"{cfg.block_m}x{cfg.block_n} s{cfg.num_stages} pps{cfg.programs_per_sm}"
            rows.append(dict(table="masked_decode", groups=g, expected_m=expected_m, n=n, k=k, variant=tag, us=us,
                             vs_deepgemm=dg_us / us, diff=diff))
            print(f"masked {g}x{expected_m}x{n}x{k} {tag:20s} {us:8.1f} us {dg_us / us:5.2f}x DG diff {diff:.1e}",
                  flush=True)


def sweep_dense_mid(timer, rows):
    """Mid-size dense problems (too few 128 x 256 tiles for the two-wave kernel): tl.* vs the one-wave kernel."""
    for m in (256, 512, 1024):
        for n, k in [(4096, 7168), (2112, 7168), (7168, 2048)]:
            time_dense_variants(timer, rows, "dense_mid", m, n, k, ["tl", "auto", "ws1-s6"])


def sweep_one_wave_scales(timer, rows):
    """The one-wave warp-specialised kernel (128 x BN tiles, no split) with its 1D2D scales loaded from global memory
    next to each wgmma (global) or staged in shared memory by the producer (staged), A/B in one process, on the
    dense M = 128 shapes and a few mid-size ones."""
    saved = fp8_triton.WS_STAGED_SCALES_BN
    cases = [(m, n, k) for (m, n, k) in shapes.DENSE_1D2D_DG_US if m == 128] + [
        (256, 4096, 7168), (512, 2112, 7168), (512, 7168, 2048)]
    for m, n, k in cases:
        dg_us = shapes.DENSE_1D2D_DG_US.get((m, n, k))
        a, b = bench.fp8_operands(m, n, k)
        ref = bench.reference(a, b, (128, 128))
        for bn in (64, 128):
            cfg = configs._config(128, bn, 1)
            for staged in (False, True):
                fp8_triton.WS_STAGED_SCALES_BN = (64, 128) if staged else ()
                d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                call = dense_call(a, b, d, cfg)
                run_variant("ws1", call)
                diff = calc_diff(d, ref)
                us = run_variant("ws1", lambda: timer(call))
                tag = f"ws1 128x{bn} " + ("staged" if staged else "global")
                # Rounds of tiles each SM runs, each of cdiv(K, 128) K blocks.
                rounds = cdiv(cdiv(m, 128) * cdiv(n, bn), fp8_triton._num_sms())
                row = dict(table="one_wave_scales", m=m, n=n, k=k, variant=tag, us=us, diff=diff,
                           ns_per_k_block=us * 1e3 / cdiv(k, configs.BLOCK_K) / rounds)
                vs = ""
                if dg_us:
                    row["vs_deepgemm"] = dg_us / us
                    vs = f" {dg_us / us:5.2f}x DG"
                rows.append(row)
                print(f"dense {m}x{n}x{k} {tag:22s} {us:7.1f} us{vs} {row['ns_per_k_block']:5.0f} ns/K-block/round "
                      f"diff {diff:.1e}", flush=True)
        fp8_triton.WS_STAGED_SCALES_BN = saved


def sweep_ws_split_k(timer, rows):
    """Dense M = 128 on the one-wave warp-specialised kernel with split-K (128 x BN tiles, scales staged in shared
    memory; at BN = 128 also loaded from global memory, "ws1g") against the shipped choice (auto) and the tl.*
    kernel ("tl": what auto ran before session 10); the two wide shapes that run two-wave tiles are skipped."""
    staged = fp8_triton.WS_SPLIT_K_STAGED_SCALES
    for (m, n, k), dg_us in shapes.DENSE_1D2D_DG_US.items():
        if m != 128 or fp8_triton._wide_small_m(0, m, n, False, False):
            continue
        a, b = bench.fp8_operands(m, n, k)
        ref = bench.reference(a, b, (128, 128))
        kb = cdiv(k, configs.BLOCK_K)
        variants = [("auto", None), ("tl", None)]
        for bn in (64, 128):
            # The two deepest splits that keep one round of CTAs and >= 4 K blocks per split.
            tiles = cdiv(n, bn)
            splits = [s for s in (1, 2, 3, 4, 6, 8, 12, 16) if s <= kb // 4 and tiles * s <= fp8_triton._num_sms()]
            for split in splits[-2:]:
                variants.append(("ws1", configs._config(128, bn, split)))
                if bn == 128 and split > 1:
                    variants.append(("ws1g", configs._config(128, bn, split)))
        for name, cfg in variants:
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            call = dense_call(a, b, d, cfg)
            fp8_triton.WS_SPLIT_K_STAGED_SCALES = staged and name != "ws1g"
            try:
                run_variant("ws1" if name == "ws1g" else name, call)
                diff = calc_diff(d, ref)
                us = run_variant("ws1" if name == "ws1g" else name, lambda: timer(call))
            finally:
                fp8_triton.WS_SPLIT_K_STAGED_SCALES = staged
            tag = name if cfg is None else f"{name} 128x{cfg.block_n} split{cfg.split_k}"
            rows.append(dict(table="ws_split_k", m=m, n=n, k=k, variant=tag, us=us, vs_deepgemm=dg_us / us,
                             diff=diff))
            print(f"dense {m}x{n}x{k} {tag:22s} {us:7.1f} us {dg_us / us:5.2f}x DG diff {diff:.1e}", flush=True)


# Operand-sharing probe: one tile config, one per-program workload (K = 7168, one tile per program, same count of
# programs), arranged so that the programs running together share A (M = one tile row), share B (N = one tile
# column) or neither (a square-ish grid of tiles). If the CTAs' time per K block depends on the arrangement, reads
# of the same operand rows by many CTAs at once (not the bytes moved) are what limits the decode kernels.
SHARING_K = 7168
SHARING_CASES = [  # (label, kernel variant, BM, BN, split, [(M, N), ...]): each (M, N) has the same tile count
    ("ws1 128x128, 32 tiles", "ws1", 128, 128, 1, [(128, 4096), (4096, 128), (512, 1024)]),
    ("ws1 128x128, 128 tiles", "ws1", 128, 128, 1, [(128, 16384), (16384, 128), (1024, 2048), (2048, 1024)]),
    ("ws1 128x64, 64 tiles", "ws1", 128, 64, 1, [(128, 4096), (8192, 64), (1024, 512)]),
    ("tl 128x128, 128 tiles", "tl", 128, 128, 1, [(128, 16384), (16384, 128), (1024, 2048)]),
    ("tl 64x64, 256 tiles", "tl", 64, 64, 1, [(128, 8192), (16384, 64), (1024, 1024)]),
    ("tl 64x64 split 2, 128 tiles", "tl", 64, 64, 2, [(128, 4096), (8192, 64), (512, 1024)]),
]


def sweep_sharing(timer, rows):
    for label, variant, bm, bn, split, shapes_mn in SHARING_CASES:
        cfg = configs._config(bm, bn, split)
        for m, n in shapes_mn:
            k = SHARING_K
            a, b = bench.fp8_operands(m, n, k)
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            call = dense_call(a, b, d, cfg)
            run_variant(variant, call)
            diff = calc_diff(d, bench.reference(a, b, (128, 128)))
            us = run_variant(variant, lambda: timer(call))
            per_kb_ns = us * 1e3 / (cdiv(k, configs.BLOCK_K) // split)
            rows.append(dict(table="sharing", case=label, m=m, n=n, k=k, variant=variant, us=us,
                             ns_per_k_block=per_kb_ns, diff=diff))
            print(f"sharing {label:28s} {m:6d}x{n:6d}x{k} {us:7.1f} us {per_kb_ns:6.0f} ns/K-block diff {diff:.1e}",
                  flush=True)


def sweep_tail_tiles(timer, rows):
    """Tail tiles (128 + 16 / 32 columns: fp8_triton.tail_narrow) against 128 x 192 split tiles and 128 x 256 tiles
    on N with a 64-column tail: the DeepSeek shape N=576 and shapes that calibrate TAIL_TILE_COLUMN_COST (equal
    rounds: M=2048, N=448/320)."""
    dg = shapes.DENSE_1D2D_DG_US
    for m, n, k in [(4096, 576, 7168), (4096, 576, 2048), (2048, 576, 7168), (4096, 448, 7168), (2048, 320, 7168)]:
        tail = "ws2n-tail" if fp8_triton.tail_narrow(n) == 16 else "ws2n-tail32"
        time_dense_variants(timer, rows, "tail_tiles", m, n, k, ["auto", "ws2n-s4", "ws2n192", tail],
                            dg.get((m, n, k)))


def sweep_k_grouped(timer, rows):
    """The K-grouped weight-gradient table (bench_fp8_gemm's shapes, data and reference) under each variant (auto,
    r232, r224: the register budgets)."""
    import deep_gemm
    for g, m, n, k_per_group in shapes.K_GROUPED:
        ks, a, b, layout = bench.k_grouped_operands(g, m, n, k_per_group)
        sum_k = sum(ks)
        expected = bench.k_grouped_reference(a, b, ks, layout, g, m, n)
        for name in ["auto", "r232", "r224", "auto", "r232", "r224"]:
            d = torch.zeros(g, m, n, device="cuda")

            def call():
                deep_gemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, ks, layout, c=d)
            run_variant(name, call)  # (C = D is zero: D is the product)
            diff = calc_diff(d, expected)
            us = run_variant(name, lambda: timer(call))
            rows.append(dict(table="k_grouped", groups=g, m=m, n=n, sum_k=sum_k, variant=name, us=us, diff=diff))
            print(f"k_grouped {g}x{m}x{n}x{sum_k} {name:5s} {us:8.1f} us diff {diff:.1e}", flush=True)


# --only names -> sweeps, run in the order given.
SECTIONS = {"dense4096": sweep_dense_big, "contiguous": sweep_contiguous, "masked": sweep_masked,
            "group_m": sweep_group_m, "masked_decode": sweep_masked_decode, "dense128": sweep_dense_small,
            "dense128_ws": sweep_dense128_ws,
            "dense1": lambda timer, rows: sweep_dense_small(timer, rows, ms=(1,)),
            "dense_mid": sweep_dense_mid, "sharing": sweep_sharing,
            "one_wave_scales": sweep_one_wave_scales,
            "ws_split_k": sweep_ws_split_k, "tail_tiles": sweep_tail_tiles, "k_grouped": sweep_k_grouped}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--only", default="dense4096,contiguous,masked,dense128",
                        help="comma-separated sweeps: " + ",".join(SECTIONS))
    parser.add_argument("--variants", default=None, help="comma-separated variants for the M=4096 and contiguous "
                        f"tables (default: {','.join(DENSE_VARIANTS)} / {','.join(CONTIGUOUS_VARIANTS)})")
    args = parser.parse_args()
    if args.variants:
        DENSE_VARIANTS[:] = CONTIGUOUS_VARIANTS[:] = MASKED_VARIANTS[:] = args.variants.split(",")
    timer = bench.KernelTimer(reps=15)
    rows = []
    try:
        for part in args.only.split(","):
            SECTIONS[part](timer, rows)
    finally:
        # The register budgets the launcher chose (ws_register_budget) per variant it compiled.
        chosen = {(v[6], v[14], v[15], v[16], v[13]): r for (v, _), r in fp8_triton._WS_BUDGETS.items()}
        for variant, regs in chosen.items():
            print("budget grouping/waves/along_n/narrow/g_pad", variant, "->", regs)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(dict(gpu=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
