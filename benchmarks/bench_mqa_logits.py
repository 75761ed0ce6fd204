"""DeepSeek V3.2 indexer benchmark: prefill ``fp8_mqa_logits`` (with its clean pass) and paged decode
``fp8_paged_mqa_logits`` at DeepGEMM's test sizes and a few serving sizes, for whichever ``deep_gemm`` is importable
(this package or DeepGEMM: only DeepGEMM's public API is used), so one device call times both with one timer:

    PYTHONPATH=$PWD              python benchmarks/bench_mqa_logits.py --out $OUT/ours
    PYTHONPATH=$PWD/.dg/DeepGEMM python benchmarks/bench_mqa_logits.py --out $OUT/dg
    python benchmarks/compare_providers.py $OUT/ours/bench_mqa_logits.json $OUT/dg/bench_mqa_logits.json

Counting as DeepGEMM's tests/test_attention.py does: prefill TFLOPS = 2 * (in-window (query, key) pairs) * H * D / t,
GB/s = (Q, KV, scales, weights, windows, in-window logits) / t, clean GB/s = out-of-window logits / clean time;
paged TFLOPS = 2 * sum(context) * next_n * H * D / t, GB/s = (Q, weights, KV tokens of every context once, logits)
/ t. Times: the sum of the call's kernels (L2 flushed before every call, median of reps), with the main kernel and
the clean kernel also timed by name. ``--sweep`` (this package only) times the prefill and paged kernels under a
few tile configs on two shapes each (the defaults, and why: docs/TUNING.md, "Indexer").
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))

import deep_gemm  # noqa: E402

from harness import kernel_times_by_name, provider, write_results  # noqa: E402

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK_KV = 64  # tokens per page (DeepGEMM's SM90 paged kernel)

# (S, SK, H, D, windows) - DeepGEMM's test grid at H=64, D=128 plus smaller heads/dims; "causal": ks=0,
# ke = i + SK - S; "cp": DeepGEMM's context-parallel pair of chunks.
PREFILL = [(2048, 8192, 64, 128, "causal"), (2048, 8192, 64, 128, "cp"), (2048, 65536, 64, 128, "causal"),
           (2048, 65536, 64, 128, "cp"), (8192, 8192, 64, 128, "causal"), (8192, 65536, 64, 128, "causal"),
           (8192, 65536, 64, 128, "cp"), (4096, 65536, 32, 128, "causal"), (4096, 32768, 64, 64, "causal"),
           (4096, 32768, 32, 32, "causal")]
PREFILL_QUICK = [PREFILL[0], PREFILL[2], PREFILL[6]]
# (B, next_n, H, D, average context) - DeepGEMM's paged grid (B * ctx <= 32M tokens) and a few serving sizes.
PAGED = [(256, 1, 64, 128, 8192), (256, 2, 64, 128, 8192), (256, 1, 64, 128, 65536), (256, 2, 64, 128, 65536),
         (4096, 1, 64, 128, 8192), (4096, 2, 64, 128, 8192), (256, 2, 32, 128, 65536), (4096, 1, 32, 128, 8192),
         (64, 1, 64, 128, 4096), (64, 2, 64, 128, 32768), (1024, 2, 64, 128, 16384)]
PAGED_QUICK = [PAGED[1], PAGED[3], PAGED[5]]


def prefill_inputs(s, sk, h, d, windows):
    q = torch.randn(s, h, d, device="cuda", dtype=torch.bfloat16).to(FP8)
    kv = torch.randn(sk, d, device="cuda", dtype=torch.bfloat16)
    kv_sf = kv.float().abs().amax(dim=1).clamp(min=1e-4) / FP8_MAX
    kv_fp8 = (kv.float() / kv_sf[:, None]).to(FP8)
    w = torch.randn(s, h, device="cuda")
    i = torch.arange(s, device="cuda")
    if windows == "causal":
        ks, ke = torch.zeros(s, device="cuda", dtype=torch.int32), (i + sk - s).int()
    else:
        half, parts = s // 2, sk // s
        cp = parts // 3
        ks = torch.zeros(s, device="cuda", dtype=torch.int32)
        ke = torch.cat([cp * half + i[:half], (parts * 2 - 1 - cp) * half + i[:half]]).int()
    return q, (kv_fp8, kv_sf), w, ks, ke


def paged_inputs(batch, next_n, h, d, avg):
    lens = torch.randint(int(0.7 * avg), int(1.3 * avg), (batch,), device="cuda", dtype=torch.int32)
    pages = (lens + BLOCK_KV - 1) // BLOCK_KV
    max_pages, total = int(pages.max()), int(pages.sum())
    pool = torch.randperm(total, device="cuda", dtype=torch.int32)
    starts = torch.cumsum(pages, 0) - pages
    cols = torch.arange(max_pages, device="cuda")[None, :]
    table = torch.where(cols < pages[:, None], pool[(starts[:, None] + cols).clamp(max=total - 1)], 0).int()
    cache = torch.empty(total, BLOCK_KV * (d + 4), dtype=torch.uint8, device="cuda")
    step = max(1, (1 << 28) // (BLOCK_KV * d))  # pages per chunk of the cast (bounded temporaries)
    for p0 in range(0, total, step):
        p1 = min(total, p0 + step)
        x = torch.randn(p1 - p0, BLOCK_KV, d, device="cuda", dtype=torch.bfloat16).float()
        sf = x.abs().amax(dim=2).clamp(min=1e-4) / FP8_MAX
        cache[p0:p1, :BLOCK_KV * d] = (x / sf[..., None]).to(FP8).view(torch.uint8).view(p1 - p0, -1)
        cache[p0:p1, BLOCK_KV * d:] = sf.view(torch.uint8).view(p1 - p0, -1)
    cache = cache.view(total, BLOCK_KV, 1, d + 4)
    q = torch.randn(batch, next_n, h, d, device="cuda", dtype=torch.bfloat16).to(FP8)
    w = torch.randn(batch * next_n, h, device="cuda")
    frac = torch.rand(batch, next_n, device="cuda")
    context_lens = ((lens[:, None] + 1) * frac).int()
    context_lens[:, -1] = lens
    return q, cache, w, context_lens.contiguous(), table, max_pages * BLOCK_KV, lens


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def run_prefill(cases, dtypes, reps, results):
    for s, sk, h, d, windows in cases:
        q, kv, w, ks, ke = prefill_inputs(s, sk, h, d, windows)
        cost = int((ke.clamp(0, sk) - ks.clamp(0, sk)).clamp(min=0).sum())
        for dtype in dtypes:
            call = lambda: deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, clean_logits=True,  # noqa: E731
                                                         logits_dtype=dtype)
            times = kernel_times_by_name(call, ("mqa_logits", "clean_logits"), reps=reps)
            t_main, t_clean = times["mqa_logits"], times["clean_logits"]
            tflops = 2 * cost * h * d / (t_main * 1e-6) / 1e12
            gbps = (nbytes(q, kv[0], kv[1], w, ks, ke) + cost * dtype.itemsize) / (t_main * 1e-6) / 1e9
            clean_bytes = (s * sk - cost) * dtype.itemsize
            clean_gbps = clean_bytes / (t_clean * 1e-6) / 1e9 if t_clean > 0 else float("nan")
            tag = "BF16" if dtype == torch.bfloat16 else "FP32"
            print(f" > prefill Logits={tag}, SQ={s:5}, SK={sk:6}, H={h:2}, D={d:3}, {windows:6}: {tflops:5.0f} TFLOPS, "
                  f"{t_main:7.1f} us, {gbps:5.0f} GB/s | clean: {t_clean:6.1f} us, {clean_gbps:5.0f} GB/s | "
                  f"call {times['total']:7.1f} us", flush=True)
            results.append(dict(table="prefill", s=s, sk=sk, h=h, d=d, windows=windows, logits=tag,
                                us=round(t_main, 2), tflops=round(tflops, 1), gbps=round(gbps, 1),
                                clean_us=round(t_clean, 2), clean_gbps=round(clean_gbps, 1),
                                call_us=round(times["total"], 2)))
        q = kv = w = ks = ke = None  # (frees the operands before the next shape)
        torch.cuda.empty_cache()


def run_paged(cases, dtypes, reps, results):
    num_sms = deep_gemm.get_num_sms()
    for batch, next_n, h, d, avg in cases:
        q, cache, w, lens2d, table, max_len, lens = paged_inputs(batch, next_n, h, d, avg)
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms)
        sum_lens = int(lens.sum())
        for dtype in dtypes:
            call = lambda: deep_gemm.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens2d, table, meta,  # noqa: E731
                                                               max_len, clean_logits=False, logits_dtype=dtype)
            times = kernel_times_by_name(call, ("paged_mqa_logits",), reps=reps)
            t = times["paged_mqa_logits"]
            tflops = 2 * sum_lens * next_n * h * d / (t * 1e-6) / 1e12
            total_bytes = nbytes(q, w) + sum_lens * (d + 4) + sum_lens * next_n * dtype.itemsize
            gbps = total_bytes / (t * 1e-6) / 1e9
            tag = "BF16" if dtype == torch.bfloat16 else "FP32"
            print(f" > paged Logits={tag}, BSZ={batch:4}, NextN={next_n}, H={h:2}, D={d:3}, L={avg:5}: "
                  f"{tflops:5.0f} TFLOPS, {t:7.1f} us, {gbps:5.0f} GB/s | call {times['total']:7.1f} us", flush=True)
            results.append(dict(table="paged", batch=batch, next_n=next_n, h=h, d=d, avg_ctx=avg, logits=tag,
                                us=round(t, 2), tflops=round(tflops, 1), gbps=round(gbps, 1),
                                call_us=round(times["total"], 2)))
        t0 = time.perf_counter()
        meta_t = kernel_times_by_name(lambda: deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms),
                                      (), reps=reps)["total"]
        print(f"   metadata: {meta_t:.1f} us ({time.perf_counter() - t0:.1f} s to time)", flush=True)
        q = cache = w = lens2d = table = meta = None  # (frees the operands before the next shape)
        torch.cuda.empty_cache()


def sweep(reps, results, prefill=True, paged=True, every=False, configs=None):
    """This package only: the prefill and paged kernels under a few configs (through the op's launcher). The paged
    configs compare the persistent kernel (the default) with the grid kernel (PAGED_GRID_CONFIG) in one process."""
    from deep_gemm.core.registry import run_launcher
    from deep_gemm.attention.plan import PAGED_GRID_CONFIG, PagedConfig, PrefillConfig
    if prefill:
        _sweep_prefill(reps, results, run_launcher, PrefillConfig, every, configs)
    if paged:
        _sweep_paged(reps, results, run_launcher, PagedConfig, PAGED_GRID_CONFIG)


def _sweep_prefill(reps, results, run_launcher, PrefillConfig, every=False, configs=None):  # noqa: N803
    from deep_gemm.attention.plan import AttentionOverrides

    # The default tile, its instruction levers (fma_relu, interior) together, and the warp-specialised Gluon kernel
    # (attention/prefill_ws.py; persistent, one CTA per SM): 2 consumer warpgroups at 4 and 6 stages, 3 at 6, and
    # with fma_relu (its interior fast path is always on). Where the launcher does not cover a row (H < 16) the tl.*
    # kernel runs instead. --sweep-all adds the rest (stage counts, a register cap, 128-key blocks, 3 stages at 3).
    prefill_cfgs = [PrefillConfig(64, 4, 4), PrefillConfig(64, 4, 4, fma_relu=True, interior=True),
                    PrefillConfig(ws=True), PrefillConfig(num_stages=6, ws=True),
                    PrefillConfig(num_stages=6, ws=True, ws_consumers=3), PrefillConfig(fma_relu=True, ws=True)]
    if every:
        prefill_cfgs += [PrefillConfig(64, 4, 4, fma_relu=True), PrefillConfig(64, 4, 4, interior=True),
                         PrefillConfig(64, 4, 3, fma_relu=True, interior=True),
                         PrefillConfig(64, 4, 6, fma_relu=True, interior=True),
                         PrefillConfig(64, 4, 4, fma_relu=True, interior=True, max_registers=128),
                         PrefillConfig(128, 8, 3, fma_relu=True, interior=True),
                         PrefillConfig(num_stages=3, ws=True, ws_consumers=3),
                         PrefillConfig(num_stages=6, fma_relu=True, ws=True, ws_consumers=3)]
    if configs is not None:  # (given: those alone, on every sweep row)
        prefill_cfgs, every = [PrefillConfig(**kw) for kw in configs], True
    for s, sk, h, d, windows in PREFILL_QUICK + [PREFILL[7]] + ([PREFILL[9]] if every else []):
        q, kv, w, ks, ke = prefill_inputs(s, sk, h, d, windows)
        cost = int((ke - ks).clamp(min=0).sum())
        for cfg in prefill_cfgs:
            try:
                t = kernel_times_by_name(lambda: run_launcher("fp8_fp4_mqa_logits", q, None, kv[0], kv[1], w, ks, ke,
                                                              False, 0, torch.float32, launcher_kwargs=dict(
                                                                  overrides=AttentionOverrides(prefill=cfg))),
                                         ("mqa_logits",), reps=reps)["mqa_logits"]
            except Exception as exc:  # noqa: BLE001
                print(f" > sweep prefill {cfg}: ERR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            tflops = 2 * cost * h * d / (t * 1e-6) / 1e12
            print(f" > sweep prefill SQ={s} SK={sk} H={h} D={d} {cfg}: {tflops:5.0f} TFLOPS, {t:7.1f} us", flush=True)
            results.append(dict(table="sweep_prefill", s=s, sk=sk, h=h, d=d, cfg=str(cfg), us=round(t, 2),
                                tflops=round(tflops, 1)))


def _sweep_paged(reps, results, run_launcher, PagedConfig, grid_config):  # noqa: N803
    from deep_gemm.attention.plan import AttentionOverrides

    """None: the launcher's default for the shape (paged_default_config), timed first for the ratios."""
    paged_cfgs = [None, PagedConfig(), grid_config, PagedConfig(num_stages=4), PagedConfig(num_stages=7),
                  PagedConfig(programs_per_sm=2), PagedConfig(programs_per_sm=1, num_stages=10)]
    # The persistent kernel's register levers (scripts/compile_check_indexer.py --only-persistent has their sm_90a
    # registers):
    # 16-byte Q loads (159 registers, still 3 programs per SM), the same capped at 128 (spills, 4 per SM), one dot
    # per query row (<= 128, 4 per SM; 9+ stages no longer fit 4 in shared memory), 8 warps (2 per SM).
    paged_cfgs += [PagedConfig(num_stages=7, aligned_q_loads=True),
                   PagedConfig(num_stages=7, aligned_q_loads=True, max_registers=128),
                   PagedConfig(num_stages=7, row_dots=True, aligned_q_loads=True),
                   PagedConfig(num_stages=5, row_dots=True, aligned_q_loads=True),
                   PagedConfig(num_stages=7, row_dots=True),
                   PagedConfig(num_warps=8, num_stages=7, aligned_q_loads=True),
                   PagedConfig(num_warps=8, num_stages=10, aligned_q_loads=True)]
    num_sms = deep_gemm.get_num_sms()
    for batch, next_n, h, d, avg in (PAGED[0], PAGED[3], PAGED[5]):
        q, cache, w, lens2d, table, max_len, lens = paged_inputs(batch, next_n, h, d, avg)
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms)
        total_bytes = nbytes(q, w) + int(lens.sum()) * (d + 4 + next_n * 4)
        default_us = None
        for cfg in paged_cfgs:
            try:
                t = kernel_times_by_name(lambda: run_launcher("fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d,
                                                              table, meta, max_len, False, torch.float32, None,
                                                              launcher_kwargs=dict(
                                                                  overrides=AttentionOverrides(paged=cfg))),
                                         ("paged_mqa_logits",), reps=reps)["paged_mqa_logits"]
            except Exception as exc:  # noqa: BLE001
                print(f" > sweep paged {cfg}: ERR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            gbps = total_bytes / (t * 1e-6) / 1e9
            default_us = t if cfg is None else default_us
            speedup = default_us / t if default_us else float("nan")
            print(f" > sweep paged BSZ={batch} NextN={next_n} L={avg} {cfg or 'default'}: {gbps:5.0f} GB/s, "
                  f"{t:7.1f} us, {speedup:5.3f}x default", flush=True)
            results.append(dict(table="sweep_paged", batch=batch, next_n=next_n, avg_ctx=avg,
                                cfg=str(cfg or "default"), us=round(t, 2), gbps=round(gbps, 1),
                                vs_default=round(speedup, 4)))
        q = cache = w = lens2d = table = meta = None  # (frees the operands before the next shape)
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true", help="three prefill and three paged rows, FP32 logits")
    parser.add_argument("--tables", default="prefill,paged")
    parser.add_argument("--paged-rows", help="indices into PAGED to run instead of the table's rows, e.g. 3,5,2")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--sweep-paged", action="store_true", help="only the paged kernel configs of --sweep")
    parser.add_argument("--sweep-prefill", action="store_true", help="only the prefill kernel configs of --sweep")
    parser.add_argument("--sweep-all", action="store_true", help="every prefill config of the sweep, not the main ones")
    parser.add_argument("--prefill-configs", help="the prefill sweep's configs instead of its own: a list of "
                                                  "PrefillConfig keyword dicts, e.g. \"[{}, {'max_registers': 128}]\"")
    args = parser.parse_args()
    torch.manual_seed(0)
    dtypes = (torch.float32,) if args.quick else (torch.float32, torch.bfloat16)
    results = []
    print(f"provider {provider()}", flush=True)
    tables = args.tables.split(",")
    if "prefill" in tables:
        run_prefill(PREFILL_QUICK if args.quick else PREFILL, dtypes, args.reps, results)
    if "paged" in tables:
        rows = PAGED_QUICK if args.quick else PAGED
        if args.paged_rows:
            rows = [PAGED[int(i)] for i in args.paged_rows.split(",")]
        run_paged(rows, dtypes, args.reps, results)
    if (args.sweep or args.sweep_paged or args.sweep_prefill) and provider() == "deep_gemm":
        configs = ast.literal_eval(args.prefill_configs) if args.prefill_configs else None
        sweep(args.reps, results, prefill=args.sweep or args.sweep_prefill, paged=not args.sweep_prefill,
              every=args.sweep_all, configs=configs)
    if args.out:
        write_results(args.out, "bench_mqa_logits", results)


if __name__ == "__main__":
    main()
