"""einsum / fp8_einsum / cublaslt_gemm benchmark on the GPU, for this package or DeepGEMM (whichever ``deep_gemm`` is
first on sys.path: the same script times both with the same timer, see harness.py).

    PYTHONPATH=$PWD              python benchmarks/bench_einsum.py --out $OUT/ours [--sweep]
    PYTHONPATH=$PWD/.dg/DeepGEMM python benchmarks/bench_einsum.py --out $OUT/dg
    python benchmarks/compare_providers.py $OUT/ours/bench_einsum.json $OUT/dg/bench_einsum.json

Tables: ``einsum_bh`` (DeepGEMM's tests/test_einsum.py rows of 'bhr,hdr->bhd' and 'bhd,hdr->bhr', the W operand a
row-padded slice as there; torch.einsum beside), ``einsum_bmk`` ('bmk,bnk->mn', FP32 with c=d), ``fp8_einsum``
('bhr,hdr->bhd', DeepGEMM's recipe), ``cublaslt`` (cublaslt_gemm_nt against the torch call it wraps: ``vs_torch`` =
torch time / wrapper time, kernel time and host time per call). Every row is checked first (DeepGEMM's bounds).
``--sweep`` (this package only) times the bmk batch splits and reductions (``BmkPlan``) and every BF16 tile config
of the einsum launchers on the DeepGEMM rows, the planned one marked.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, geomean, provider, write_results  # noqa: E402

import deep_gemm  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402  (float(...) below: DeepGEMM's returns a tensor, not JSON)

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
BH_SHAPES = [(128, 512, 128), (8, 4096, 1024)]  # (h, r, d)
BH_BATCHES = (128, 4096)
BMK_SHAPES = [(s, m, n, k) for s in (129, 4096) for m, n, k in [(128, 384, 128), (256, 256, 256), (384, 128, 384)]]
FP8_BATCHES = (128, 4096)
CUBLASLT_SHAPES = [(4096, 2112, 7168), (128, 24576, 1536), (1, 7168, 16384)]


def bh_inputs(expr, b, h, r, d):
    x = torch.randn((b, h, r) if expr == "bhr,hdr->bhd" else (b, h, d), device="cuda", dtype=BF16)
    y = torch.randn((h, d, r + 128), device="cuda", dtype=BF16)[:, :, :r]
    z = torch.empty((b, h, d) if expr == "bhr,hdr->bhd" else (b, h, r), device="cuda", dtype=BF16)
    return x, y, z


def bench_bh(timer, rows):
    for expr in ("bhr,hdr->bhd", "bhd,hdr->bhr"):
        for h, r, d in BH_SHAPES:
            for b in BH_BATCHES:
                x, y, z = bh_inputs(expr, b, h, r, d)
                deep_gemm.einsum(expr, x, y, z)
                diff = float(calc_diff(z, torch.einsum(expr, x, y)))
                t = timer(lambda: deep_gemm.einsum(expr, x, y, z))
                t_torch = timer(lambda: torch.einsum(expr, x, y))
                t_cublaslt = timer(lambda: deep_gemm.einsum(expr, x, y, z, use_cublaslt=True))
                host = host_us(lambda: deep_gemm.einsum(expr, x, y, z), calls=50)
                flops = 2 * b * h * r * d
                gbytes = (x.numel() + y.numel() + z.numel()) * 2 / 1e9
                rows.append(dict(table="einsum_bh", expr=expr, b=b, h=h, r=r, d=d, us=t, tflops=flops / t / 1e6,
                                 gbps=gbytes / t * 1e6, diff=diff, torch_us=t_torch, vs_torch=t_torch / t,
                                 note=f"use_cublaslt {t_cublaslt:.1f} us, host {host:.1f} us/call"))
                print(f" > einsum {expr} b={b:5d} h={h:3d} r={r:4d} d={d:4d}: {t:8.1f} us | {flops / t / 1e6:4.0f} "
                      f"TFLOPS | {gbytes / t * 1e6:5.0f} GB/s | torch.einsum {t_torch:8.1f} us | use_cublaslt "
                      f"{t_cublaslt:8.1f} us | host {host:5.1f} us/call | diff {diff:.1e}", flush=True)
                x = y = z = None  # (frees the operands before the next shape)


def bench_bmk(timer, rows):
    for s, m, n, k in BMK_SHAPES:
        a = torch.randn((s, m, k), dtype=BF16, device="cuda")
        b = torch.randn((s, n, k), dtype=BF16, device="cuda")
        d = torch.zeros((m, n), device="cuda")
        deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=d)
        diff = float(calc_diff(d, torch.bmm(a.float(), b.float().mT).sum(0)))
        t = timer(lambda: deep_gemm.einsum("bmk,bnk->mn", a, b, d, c=d))
        gbytes = (a.numel() + b.numel()) * 2 / 1e9 + d.numel() * 8 / 1e9
        rows.append(dict(table="einsum_bmk", s=s, m=m, n=n, k=k, us=t, tflops=2 * s * m * n * k / t / 1e6,
                         gbps=gbytes / t * 1e6, diff=diff))
        print(f" > einsum bmk,bnk->mn s={s:5d} m={m} n={n} k={k}: {t:8.1f} us | {gbytes / t * 1e6:5.0f} GB/s | "
              f"diff {diff:.1e}", flush=True)


def fp8_inputs(b, h, r, d):
    x = torch.randn((b, h, r), device="cuda", dtype=BF16)
    y = torch.randn((h, d, r), device="cuda", dtype=BF16)
    xq = deep_gemm.utils.per_token_cast_to_fp8(x.view(-1, r), use_ue8m0=True)
    xq = xq[0].view(b, h, r), xq[1].view(b, h, -(-r // 128))
    yq = (torch.empty_like(y, dtype=FP8), torch.empty((h, -(-d // 128), -(-r // 128)), device="cuda"))
    for i in range(h):
        yq[0][i], yq[1][i] = deep_gemm.utils.per_block_cast_to_fp8(y[i], use_ue8m0=True)
    return x, y, xq, yq, torch.empty((b, h, d), device="cuda", dtype=BF16)


def bench_fp8(timer, rows):
    h, r, d = 8, 4096, 1024
    for b in FP8_BATCHES:
        x, y, xq, yq, z = fp8_inputs(b, h, r, d)
        deep_gemm.fp8_einsum("bhr,hdr->bhd", xq, yq, z)
        diff = float(calc_diff(z, torch.einsum("bhr,hdr->bhd", x, y)))
        t = timer(lambda: deep_gemm.fp8_einsum("bhr,hdr->bhd", xq, yq, z))
        flops = 2 * b * h * r * d
        rows.append(dict(table="fp8_einsum", expr="bhr,hdr->bhd", b=b, h=h, r=r, d=d, us=t, tflops=flops / t / 1e6,
                         diff=diff))
        print(f" > fp8_einsum bhr,hdr->bhd b={b:5d} h={h} r={r} d={d}: {t:8.1f} us | {flops / t / 1e6:4.0f} TFLOPS | "
              f"diff {diff:.1e}", flush=True)


def host_us(fn, calls: int = 200) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host


def bench_cublaslt(timer, rows):
    one = torch.ones((), device="cuda")
    for m, n, k in CUBLASLT_SHAPES:
        a = torch.randn((m, k), device="cuda", dtype=BF16)
        b = torch.randn((n, k), device="cuda", dtype=BF16)
        a8, b8 = a.to(FP8), b.to(FP8)
        d = torch.empty((m, n), device="cuda", dtype=BF16)
        d32 = torch.zeros((m, n), device="cuda")
        cases = [
            ("bf16", lambda: deep_gemm.cublaslt_gemm_nt(a, b, d), lambda: torch.mm(a, b.t(), out=d)),
            ("bf16->fp32 c=d", lambda: deep_gemm.cublaslt_gemm_nt(a, b, d32, c=d32),
             lambda: torch.ops.aten.addmm.dtype_out(d32, a, b.t(), torch.float32, out=d32)),
            ("fp8", lambda: deep_gemm.cublaslt_gemm_nt(a8, b8, d),
             lambda: torch._scaled_mm(a8, b8.t(), one, one, out_dtype=BF16, use_fast_accum=False, out=d)),
        ]
        for label, ours, direct in cases:
            try:
                t, t_direct = timer(ours), timer(direct)
                h, h_direct = host_us(ours), host_us(direct)
            except Exception as error:  # noqa: BLE001 - a missing torch overload or an unsupported dtype
                print(f" > cublaslt_gemm_nt {label} {m}x{n}x{k}: skipped ({str(error).splitlines()[0][:80]})")
                continue
            rows.append(dict(table="cublaslt", kind=label, m=m, n=n, k=k, us=t, tflops=2 * m * n * k / t / 1e6,
                             torch_us=t_direct, vs_torch=t_direct / t,
                             note=f"host {h:.1f} us/call, torch direct {h_direct:.1f}"))
            print(f" > cublaslt_gemm_nt {label:15s} {m:5d}x{n:5d}x{k:5d}: {t:8.1f} us (torch direct {t_direct:8.1f}, "
                  f"{t_direct / t:.3f}x) | host {h:5.1f} us/call (torch direct {h_direct:5.1f})", flush=True)


def sweep(timer, parts=("bmk", "bh", "fp8")):
    """Every tile config of the launchers on DeepGEMM's einsum rows (this package only); ``parts`` picks the
    expression families."""
    from deep_gemm.core.registry import run_launcher
    from deep_gemm.core.runtime import usable_sms
    from deep_gemm.einsum import plan as et
    from deep_gemm.einsum.plan import EinsumOverrides
    found = {}
    # bmk,bnk->mn first (the largest gap): the planned split and its neighbours, every reduction (the one-launch grid
    # reduction, the parallel second launch, the serial last arriver); the model's prediction beside each
    # (einsum/plan.py's bmk_time_us) to refit its constants.
    for s, m, n, k in (BMK_SHAPES if "bmk" in parts else ()):
        a = torch.randn((s, m, k), dtype=BF16, device="cuda")
        b = torch.randn((s, n, k), dtype=BF16, device="cuda")
        d = torch.zeros((m, n), device="cuda")
        ref = torch.bmm(a.float(), b.float().mT).sum(0)
        auto = et.bmk_plan(s, m, n, k)
        tiles = -(-m // auto.tile.block_m) * -(-n // auto.tile.block_n)
        wave = max(1, min(s, usable_sms() // tiles))
        plans = [auto] + [et.BmkPlan(auto.tile, x, reduce) for x in sorted({wave, wave // 2, wave // 4, auto.splits})
                          for reduce in et.bmk_reductions() if x >= 1 and (x, reduce) != (auto.splits, auto.reduce)]
        plans += [et.BmkPlan(auto.tile, auto.splits, "parallel", rm) for rm in (2, 8, 16)]
        # The other tile: 64 x 128 halves the rows per program and fits two programs per SM (BMK_PROGRAMS_PER_SM),
        # so the same wave needs half the batch ranges (and half the partials to reduce).
        for tile in et.BMK_CONFIGS:
            if tile != auto.tile:
                tiles_alt = -(-m // tile.block_m) * -(-n // tile.block_n)
                wave_alt = et.BMK_PROGRAMS_PER_SM.get((tile.block_m, tile.block_n), 1) * usable_sms()
                for x in sorted({max(1, min(s, wave_alt // tiles_alt)), max(1, wave_alt // tiles_alt // 2),
                                 auto.splits}):
                    plans += [et.BmkPlan(tile, x, "parallel"), et.BmkPlan(tile, x, "grid")]
        for plan in plans:
            def run(plan=plan):
                run_launcher("einsum", "bmk,bnk->mn", a, b, d,
                             launcher_kwargs=dict(overrides=EinsumOverrides(config=plan)))
            try:
                t = timer(run)
            except Exception as error:  # noqa: BLE001
                print(f" ~ sweep bmk s={s} m={m} n={n} k={k} {plan}: failed {str(error).splitlines()[0][:80]}")
                continue
            diff = float(calc_diff(d, ref))
            found[f"bmk s={s} m={m} n={n} k={k} {plan}"] = t
            model = et.bmk_time_us(s, m, n, k, plan.tile, plan.splits, plan.reduce)
            print(f" ~ sweep bmk s={s:5d} m={m} n={n} k={k} {str(plan):44s}{' (plan)' if plan is auto else ''} "
                  f"{t:8.1f} us (model {model:6.1f}) {(a.numel() + b.numel()) * 2 / t / 1e3:5.0f} GB/s "
                  f"diff {diff:.1e}", flush=True)
        a = b = None  # (frees the operands before the next shape)
    for b_size, h, r, d in ([(128, 8, 4096, 1024), (4096, 8, 4096, 1024), (4096, 128, 512, 128)]
                            if "bh" in parts else []):
        for expr in ("bhr,hdr->bhd", "bhd,hdr->bhr"):
            x, y, z = bh_inputs(expr, b_size, h, r, d)
            ref = torch.einsum(expr, x, y)
            planned = et.bh_config(h, b_size, d if expr == "bhr,hdr->bhd" else r, r if expr == "bhr,hdr->bhd" else d,
                                   True)
            for cfg in et.BH_CONFIGS:
                def run(cfg=cfg):
                    run_launcher("einsum", expr, x, y, z, launcher_kwargs=dict(overrides=EinsumOverrides(config=cfg)))
                try:
                    t = timer(run)
                except Exception as error:  # noqa: BLE001
                    print(f" ~ sweep {expr} b={b_size} h={h} {cfg}: failed {str(error).splitlines()[0][:80]}")
                    continue
                diff = float(calc_diff(z, ref))
                found[f"{expr} b={b_size} h={h} r={r} d={d} {cfg}"] = t
                print(f" ~ sweep {expr} b={b_size:4d} h={h:3d} r={r} d={d} {str(cfg):36s}"
                      f"{' (plan)' if cfg == planned else '       '} {t:8.1f} us "
                      f"{2 * b_size * h * r * d / t / 1e6:5.0f} TFLOPS diff {diff:.1e}", flush=True)
    h, r, d = 8, 4096, 1024
    for b_size in (FP8_BATCHES if "fp8" in parts else ()):
        x, y, xq, yq, z = fp8_inputs(b_size, h, r, d)
        planned = et.fp8_config(h, b_size, d) if et.fp8_route(h, b_size) == "batched" else "per_entry"
        for cfg in et.FP8_CONFIGS + ("per_entry",):
            kwargs = dict(overrides=EinsumOverrides(route=cfg) if cfg == "per_entry" else EinsumOverrides(config=cfg))

            def run(kwargs=kwargs):
                run_launcher("fp8_einsum", "bhr,hdr->bhd", xq[0], xq[1], yq[0], yq[1], z, launcher_kwargs=kwargs)
            try:
                t = timer(run)
            except Exception as error:  # noqa: BLE001
                print(f" ~ sweep fp8 b={b_size} {cfg}: failed {str(error).splitlines()[0][:80]}")
                continue
            found[f"fp8 bhr,hdr->bhd b={b_size} h={h} {cfg}"] = t
            diff = float(calc_diff(z, torch.einsum("bhr,hdr->bhd", x, y)))
            print(f" ~ sweep fp8 b={b_size:4d} {str(cfg):32s}{' (plan)' if cfg == planned else '       '} {t:8.1f} us "
                  f"{2 * b_size * h * r * d / t / 1e6:5.0f} TFLOPS diff {diff:.1e}", flush=True)
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="benchmarks/results")
    p.add_argument("--tables", default="einsum_bh,einsum_bmk,fp8_einsum,cublaslt")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--sweep-parts", default="bmk,bh,fp8", help="the sweep's expression families")
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    torch.manual_seed(0)
    timer = KernelTimer(reps=args.reps)
    print(f"provider: {provider()} ({os.path.dirname(deep_gemm.__file__)})", flush=True)
    rows = []
    for name, fn in (("einsum_bh", bench_bh), ("einsum_bmk", bench_bmk), ("fp8_einsum", bench_fp8),
                     ("cublaslt", bench_cublaslt)):
        if name in args.tables.split(","):
            try:
                fn(timer, rows)
            except Exception as error:  # noqa: BLE001 - report, keep the other tables
                print(f"table {name} FAILED: {type(error).__name__}: {str(error)[:300]}", flush=True)
    extra = {}
    if args.sweep and provider() == "deep_gemm":
        extra["sweep_us"] = sweep(timer, tuple(args.sweep_parts.split(",")))
    for table in sorted({r["table"] for r in rows}):
        print(f"{table}: geomean TFLOPS {geomean([r.get('tflops') for r in rows if r['table'] == table]):.0f}")
    write_results(args.out, "bench_einsum", rows, extra)


if __name__ == "__main__":
    main()
