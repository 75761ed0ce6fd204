"""BF16 GEMM benchmark on the GPU: the rows of DeepGEMM's tests/test_bf16.py (dense M = 1 / 128 / 4096 with BF16 and
FP32 outputs, M-grouped contiguous with expert ids and the psum layout, masked, K-grouped), each checked against an
FP32 torch reference first, with torch (cuBLAS) timed beside the dense rows.

Uses only DeepGEMM's public API, so the same script times this package and DeepGEMM (built next to it) in one device
call with one timer (benchmarks/harness.py):

    PYTHONPATH=$PWD              python benchmarks/bench_bf16_gemm.py --out $OUT/ours
    PYTHONPATH=$PWD/.dg/DeepGEMM python benchmarks/bench_bf16_gemm.py --out $OUT/dg
    python benchmarks/compare_providers.py $OUT/ours/bench_bf16_gemm.json $OUT/dg/bench_bf16_gemm.json

``--tables sweep`` (this package only) times forced plan choices (tile, kernel, split, ring) on the dense rows of
``--ms`` (``--rows 4096x576x7168,128x576x7168``: only those rows), to tune gemm/bf16/plan.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, calc_diff, geomean, provider, write_results  # noqa: E402

BF16 = torch.bfloat16
LIMIT = 1e-5  # DeepGEMM's calc_diff bar for BF16 GEMMs
DENSE_NK = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
FP32_OUT_NK = [(256, 7168), (129280, 7168)]
CONTIGUOUS = [(4, 8192), (8, 4096)]
GROUPED_NK = [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]
MASKED = [(32, 192), (6, 1024), (32, 20), (6, 20)]
MASKED_MAX_M = 4096
K_GROUPED = [(4, 4096, 7168, 8192), (4, 7168, 2048, 8192), (8, 4096, 7168, 4096), (8, 7168, 2048, 4096),
             (16, 4096, 7168, 2048), (16, 7168, 2048, 2048)]


def ref_nt(a, b):
    return a.float() @ b.float().T


# Where every row is saved as soon as it is measured (set by main): a run cut by a time limit keeps its rows.
_OUT_DIR = None


def _save(results, summary=()) -> None:
    if _OUT_DIR is None:
        return
    with contextlib.redirect_stdout(io.StringIO()):
        write_results(_OUT_DIR, "bench_bf16_gemm", results, _extra(list(summary)))


def record(results, row, us, flops, nbytes, diff, torch_us=None):
    row.update(us=us, tflops=flops / us / 1e6, gbps=nbytes / us / 1e3, diff=diff)
    if torch_us:
        row.update(torch_us=torch_us, vs_torch=torch_us / us)
    results.append(row)
    _save(results)
    case = " ".join(f"{k}={v}" for k, v in row.items() if k not in ("us", "tflops", "gbps", "diff", "torch_us",
                                                                     "vs_torch", "table"))
    extra = f" | {torch_us / us:.2f}x torch" if torch_us else ""
    print(f" > {row['table']:12s} {case}: {us:8.1f} us | {row['tflops']:5.0f} TFLOPS | {row['gbps']:5.0f} GB/s"
          f"{extra} | diff {diff:.1e}{'' if diff < LIMIT else '  <-- WRONG'}", flush=True)


def bench_dense(timer, results, ms):
    import deep_gemm
    print("\n== dense bf16_gemm_nt ==")
    rows = [(m, n, k, BF16) for m in ms for n, k in DENSE_NK] + [(4096, n, k, torch.float32) for n, k in FP32_OUT_NK]
    for m, n, k, out in rows:
        a = torch.randn(m, k, device="cuda", dtype=BF16)
        b = torch.randn(n, k, device="cuda", dtype=BF16)
        d = torch.empty(m, n, device="cuda", dtype=out)
        deep_gemm.bf16_gemm_nt(a, b, d)
        diff = calc_diff(d, ref_nt(a, b))
        us = timer(lambda: deep_gemm.bf16_gemm_nt(a, b, d))
        t_out = torch.empty(m, n, device="cuda", dtype=BF16)
        torch_us = timer(lambda: torch.mm(a, b.T, out=t_out)) if out == BF16 else None
        record(results, dict(table="dense", m=m, n=n, k=k, out=str(out).replace("torch.", "")), us, 2 * m * n * k,
               2 * (m * k + n * k) + m * n * d.element_size(), diff, torch_us)


def contiguous_inputs(g, per_group, n, k, alignment=128):
    random.seed(0)
    ms = [int(per_group * random.uniform(0.7, 1.3)) for _ in range(g)]
    starts, ends, start = [], [], 0
    for mg in ms:
        starts.append(start)
        ends.append(start + mg)
        start = (start + mg + alignment - 1) // alignment * alignment
    a = torch.randn(start, k, device="cuda", dtype=BF16)
    b = torch.randn(g, n, k, device="cuda", dtype=BF16)
    ids = torch.full((start,), -1, dtype=torch.int32, device="cuda")
    for i, (s, e) in enumerate(zip(starts, ends)):
        ids[s:e] = i
    return ms, starts, ends, a, b, ids, torch.tensor(ends, dtype=torch.int32, device="cuda")


def bench_contiguous(timer, results):
    import deep_gemm
    print("\n== m_grouped_bf16_gemm_nt_contiguous ==")
    for psum in (True, False):
        for g, per_group in CONTIGUOUS:
            for n, k in GROUPED_NK:
                ms, starts, ends, a, b, ids, psum_layout = contiguous_inputs(g, per_group, n, k)
                layout = psum_layout if psum else ids
                d = torch.empty(a.size(0), n, device="cuda", dtype=BF16)

                def call():
                    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=psum)
                call()
                diff = max(calc_diff(d[s:e], ref_nt(a[s:e], b[i])) for i, (s, e) in enumerate(zip(starts, ends)))
                us = timer(call)
                rows = sum(ms)
                record(results, dict(table="contiguous", psum=psum, groups=g, m=rows, n=n, k=k), us,
                       2 * rows * n * k, 2 * (rows * k + g * n * k + rows * n), diff)


def masked_inputs(g, expected, n, k):
    """A masked row's operands: masked_m = expected x U(0.7, 1.3) per group
    (random.seed(0)), A [G, MASKED_MAX_M, K] and B [G, N, K] torch.randn (BF16). Returns (masked, masked_m, a, b)."""
    random.seed(0)
    masked = [int(expected * random.uniform(0.7, 1.3)) for _ in range(g)]
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    a = torch.randn(g, MASKED_MAX_M, k, device="cuda", dtype=BF16)
    b = torch.randn(g, n, k, device="cuda", dtype=BF16)
    return masked, masked_m, a, b


def k_grouped_inputs(g, m, n, k_per):
    """A K-grouped row's operands (also the probes'): K sizes k_per x U(0.7, 1.3) rounded up to 128 (random.seed(0)),
    A [sum K, M], B [sum K, N] (BF16), C [G, M, N] (FP32), the K sizes on the GPU, and the FP32 reference
    C + A_g^T B_g. Returns (ks, a, b, c, layout, ref)."""
    random.seed(0)
    ks = [(max(1, int(k_per * random.uniform(0.7, 1.3))) + 127) // 128 * 128 for _ in range(g)]
    a = torch.randn(sum(ks), m, device="cuda", dtype=BF16)
    b = torch.randn(sum(ks), n, device="cuda", dtype=BF16)
    c = torch.randn(g, m, n, device="cuda", dtype=torch.float32)
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    ref = c.clone()
    start = 0
    for i, kg in enumerate(ks):
        ref[i] += a[start:start + kg].float().T @ b[start:start + kg].float()
        start += kg
    return ks, a, b, c, layout, ref


def bench_masked(timer, results):
    import deep_gemm
    print("\n== m_grouped_bf16_gemm_nt_masked ==")
    for g, expected in MASKED:
        for n, k in GROUPED_NK:
            masked, masked_m, a, b = masked_inputs(g, expected, n, k)
            d = torch.empty(g, MASKED_MAX_M, n, device="cuda", dtype=BF16)

            def call():
                deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected)
            call()
            diff = max(calc_diff(d[i, :m], ref_nt(a[i, :m], b[i])) for i, m in enumerate(masked) if m)
            us = timer(call)
            rows = sum(masked)
            record(results, dict(table="masked", groups=g, expected_m=expected, n=n, k=k), us, 2 * rows * n * k,
                   2 * (rows * k + g * n * k + rows * n), diff)


def bench_k_grouped(timer, results):
    import deep_gemm
    print("\n== k_grouped_bf16_gemm_tn_contiguous ==")
    for g, m, n, k_per in K_GROUPED:
        ks, a, b, c, layout, ref = k_grouped_inputs(g, m, n, k_per)
        d = c.clone()  # DeepGEMM's test accumulates in place (c is d); timed calls keep accumulating
        deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, layout, d)
        diff = calc_diff(d, ref)
        us = timer(lambda: deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, layout, d))
        record(results, dict(table="k_grouped", groups=g, m=m, n=n, k=sum(ks)), us, 2 * m * n * sum(ks),
               2 * sum(ks) * (m + n) + 2 * 4 * g * m * n, diff)


def _sweep_variants(m, n, k, sms, device="cuda"):
    """(name, Bf16Overrides) to time on one dense row: the plan's choice, the plan without the WS kernel, the plan's
    tile with the old 6-stage ring, the WS kernel's two tiles, and per M the candidates the plan weighs (whole
    tiles, last-wave split-K, split-K of M = 128 rows, deeper rings)."""
    from dataclasses import replace

    from deep_gemm.gemm.bf16 import launch as bf16_launch, plan as bf16_plan
    from deep_gemm.gemm.bf16.plan import Bf16Config as C
    from deep_gemm.gemm.bf16.plan import Bf16Overrides as O
    d = torch.empty(m, n, device=device, dtype=BF16)
    chosen = bf16_plan.plan(bf16_launch._call(0, m, n, k, 1, d, None, True, True, True))
    out = [("plan", O()), ("plan-tl", O(ws=False))]
    if chosen is not None and chosen.kernel == "tl" and chosen.config.num_stages > 6:
        out.append(("plan-stages6", O(config=replace(chosen.config, num_stages=6))))
    if m >= 128:
        out += [("ws-128x256", O(ws=True, block_m=128, block_n=256, split_k=1)),
                ("ws-128x128", O(ws=True, block_m=128, block_n=128, split_k=1))]
    tiles = -(-m // 128) * -(-n // 128)
    if m >= 4096 and tiles % sms and sms < tiles <= 5 * sms:
        out += [("ws-whole-waves+tl-tail", O(ws_tail=True)), ("plan-no-ws-tail", O(ws_tail=False))]
    if m >= 4096:
        # The WS kernel's tiles with tail columns (TAIL_N; its ring is bf16_plan._ws_config's, whatever the forced
        # config's stages): 128 + 16 = DeepGEMM's 128 x 144 on N = 576 (one wave), 128 + 64 tiles N = 2112 exactly;
        # N = 7168 is the control.
        out += [(f"ws-128x128+{t}", O(ws=True, config=C(128, 128, 64, 5, 4, block_n_tail=t))) for t in (16, 32, 64)]
    configs = []
    if m >= 4096:
        configs += [C(128, 256, 64, 3, 8), C(128, 128, 64, 5, 8)]
        if tiles % sms and sms < tiles <= 5 * sms:
            configs += [C(128, 128, 64, 5, 8, split_k=s, split_from=tiles // sms * sms) for s in (2, 4, 8)]
        if n <= 2112:
            configs += [C(128, 64, 64, 8, 8), C(128, 64, 64, 8, 4)]
        # Tiles with tail columns (Bf16Config.block_n_tail): 128 + 16 = 144 tiles N = 576 in one wave of 128 tiles
        # (DeepGEMM's 128 x 144); 128 + 64 = 192 tiles N = 2112 exactly (352 tiles, 2.7 waves, against 4.1 of
        # 128 x 128); N = 7168 (K = 2048) is the control, where 128 x 128 tiles already fit.
        configs += [C(128, 128, 64, 5, 8, block_n_tail=16), C(128, 128, 64, 4, 8, block_n_tail=16),
                    C(128, 128, 64, 4, 8, block_n_tail=64)]
    elif m >= 128:
        configs += [C(64, 64, 64, 6, 4), C(64, 64, 64, 12, 4), C(64, 64, 64, 12, 4, split_k=2),
                    C(64, 128, 64, 6, 4), C(64, 128, 64, 8, 4), C(64, 128, 64, 8, 4, split_k=2),
                    C(128, 128, 64, 5, 8, split_k=4), C(128, 128, 64, 5, 8, split_k=8)]
    else:
        configs += [C(16, 32, 128, 6, 4), C(16, 32, 128, 12, 4), C(16, 64, 128, 6, 4), C(16, 64, 128, 10, 4),
                    C(16, 32, 128, 12, 4, split_k=2), C(16, 64, 128, 10, 4, split_k=2)]
    if n == 576 and m <= 128:
        # N = 576 streams 8.3 MB of B from few tiles (M = 128 on 64 x 64: 18; 64 x 128: 10): more K pieces per
        # tile put more SMs on the stream.
        configs += [C(64, bn, 64, stages, 4, split_k=s) for bn, stages in ((64, 12), (128, 8)) for s in (3, 4, 6, 8)]
        if m < 64:
            configs += [C(16, bn, 128, 6, 4, split_k=s) for bn in (32, 64) for s in (3, 4, 6, 8)]
    for cfg in configs:
        tail = f"+{cfg.block_n_tail}" if cfg.block_n_tail else ""
        name = f"{cfg.block_m}x{cfg.block_n}{tail}x{cfg.block_k}s{cfg.num_stages}w{cfg.num_warps}"
        name += f"-split{cfg.split_k}" + (f"from{cfg.split_from}" if cfg.split_from else "") if cfg.split_k > 1 else ""
        out.append((name, O(config=cfg, ws=False)))
    return out


# The rows furthest from DeepGEMM first (a sweep cut by its time limit keeps what it measured).
_WORST = [(4096, 576, 7168), (4096, 2112, 7168), (128, 4096, 7168), (128, 2112, 7168), (128, 576, 7168),
          (4096, 32768, 512)]
SWEEP_ROWS = _WORST + [r for r in ([(4096, n, k) for n, k in DENSE_NK] + [(128, n, k) for n, k in DENSE_NK]
                                   + [(1, n, k) for n, k in ((2112, 7168), (576, 7168), (4096, 7168), (32768, 512),
                                                             (24576, 1536))]) if r not in _WORST]


def bench_sweep(timer, results, ms, rows=None):
    """Forced plan choices on the dense rows (this package only): which tile, kernel, split and ring each row
    should get (gemm/bf16/plan.py's cost model is fitted to these). ``rows``: only these (m, n, k) (None: every row of
    ``ms``)."""
    from deep_gemm.core.registry import run_launcher
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("\n== sweep (forced plan choices on the dense rows) ==")
    for m, n, k in SWEEP_ROWS:
        if m not in ms or (rows is not None and (m, n, k) not in rows):
            continue
        a = torch.randn(m, k, device="cuda", dtype=BF16)
        b = torch.randn(n, k, device="cuda", dtype=BF16)
        ref = ref_nt(a, b)
        for name, over in _sweep_variants(m, n, k, sms):
            d = torch.empty(m, n, device="cuda", dtype=BF16)
            kw = dict(overrides=over)
            try:
                if run_launcher("bf16_gemm_nt", a, b, d, None, "nk", launcher_kwargs=kw) is NotImplemented:
                    print(f" > sweep {m}x{n}x{k} {name}: not covered")
                    continue
                diff = calc_diff(d, ref)
                us = timer(lambda: run_launcher("bf16_gemm_nt", a, b, d, None, "nk", launcher_kwargs=kw))
            except Exception as exc:  # noqa: BLE001  (a config that fails to compile is reported, not fatal)
                print(f" > sweep {m}x{n}x{k} {name}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            record(results, dict(table="sweep", m=m, n=n, k=k, config=name), us, 2 * m * n * k,
                   2 * (m * k + n * k) + m * n * 2, diff)


def summarize(results):
    lines = ["", "== summary =="]
    for m in (1, 128, 4096):
        rows = [r for r in results if r["table"] == "dense" and r["m"] == m and r["out"] == "bfloat16"]
        if rows:
            lines.append(f" dense M={m:4d}: geomean {geomean([r['tflops'] for r in rows]):6.1f} TFLOPS, "
                         f"vs torch {geomean([r.get('vs_torch') for r in rows]):.3f}x over {len(rows)} shapes")
    for table in ("contiguous", "masked", "k_grouped"):
        rows = [r for r in results if r["table"] == table]
        if rows:
            lines.append(f" {table:10s}: geomean {geomean([r['tflops'] for r in rows]):6.1f} TFLOPS over {len(rows)}")
    wrong = [r for r in results if not r["diff"] < LIMIT]
    lines.append(f" rows over the calc_diff bar {LIMIT}: {len(wrong)}")
    print("\n".join(lines))
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--tables", default="dense,contiguous,masked,k_grouped")
    parser.add_argument("--ms", default="1,128,4096", help="dense M values")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--rows", default="", help="sweep only these rows, MxNxK comma-separated (default: all)")
    args = parser.parse_args()
    global _OUT_DIR
    _OUT_DIR = args.out
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = KernelTimer(args.reps)
    results = []
    tables = args.tables.split(",")
    for table in tables:
        try:
            if table == "dense":
                bench_dense(timer, results, [int(x) for x in args.ms.split(",")])
            elif table == "contiguous":
                bench_contiguous(timer, results)
            elif table == "masked":
                bench_masked(timer, results)
            elif table == "k_grouped":
                bench_k_grouped(timer, results)
            elif table == "sweep" and provider() == "deep_gemm":
                rows = [tuple(int(x) for x in r.split("x")) for r in args.rows.split(",")] if args.rows else None
                bench_sweep(timer, results, [int(x) for x in args.ms.split(",")], rows)
        except Exception as exc:  # noqa: BLE001  (one table's failure must not lose the others)
            print(f"table {table} FAILED: {type(exc).__name__}: {exc}", flush=True)
    write_results(args.out, "bench_bf16_gemm", results, _extra(summarize(results)))


def _extra(summary):
    extra = dict(summary=summary)
    if provider() == "deep_gemm":
        import deep_gemm
        extra["backends"] = {k: v for k, v in deep_gemm.backends().items() if "bf16" in k}
    return extra


if __name__ == "__main__":
    main()
