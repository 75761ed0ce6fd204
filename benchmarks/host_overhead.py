"""Host time per call of deep_gemm's entry points on tiny shapes (a tight loop without synchronisation), for this
package or DeepGEMM (the same script runs under either: it uses only DeepGEMM's public API).

    PYTHONPATH=$PWD python benchmarks/host_overhead.py [--out DIR]
    PYTHONPATH=$PWD/.dg/DeepGEMM python benchmarks/host_overhead.py [--out DIR]

Each case runs 50 warm-up calls, then 9 rounds of 1000 calls; the best round's time per call is reported (the GPU
work of these shapes is meant to be shorter than the host's, so the loop measures the host; a row where the GPU
was still busy when the loop ended is flagged GPU-bound). A case a package does not have
prints ERR and is left out. ``torch add_`` is the floor: one trivial torch op on the same host.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import provider  # noqa: E402


def cases():
    import deep_gemm
    from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8
    dev = "cuda"
    m, n, k = 16, 256, 512
    a = per_token_cast_to_fp8(torch.randn(m, k, device=dev), use_ue8m0=False)
    a_mn = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
    b = per_block_cast_to_fp8(torch.randn(n, k, device=dev), use_ue8m0=False)
    d = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    g, t = 4, 64
    ag = per_token_cast_to_fp8(torch.randn(g * t, k, device=dev), use_ue8m0=False)
    ag = (ag[0].view(g, t, k), ag[1].view(g, t, k // 128))
    ag_mn = (ag[0], deep_gemm.get_mn_major_tma_aligned_tensor(ag[1]))
    bq = [per_block_cast_to_fp8(torch.randn(n, k, device=dev), use_ue8m0=False) for _ in range(g)]
    bg = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
    dg = torch.empty(g, t, n, device=dev, dtype=torch.bfloat16)
    masked_m = torch.full((g,), 16, device=dev, dtype=torch.int32)
    ac = per_token_cast_to_fp8(torch.randn(g * 128, k, device=dev), use_ue8m0=False)
    ids = torch.arange(g, device=dev, dtype=torch.int32).repeat_interleave(128)
    dc = torch.empty(g * 128, n, device=dev, dtype=torch.bfloat16)
    xg = torch.randn(g * 128, k, device=dev, dtype=torch.bfloat16)
    wg = torch.randn(g, n, k, device=dev, dtype=torch.bfloat16)
    xm = torch.randn(g, t, k, device=dev, dtype=torch.bfloat16)
    hx = torch.randn(m, 1024, device=dev, dtype=torch.bfloat16)
    hw = torch.randn(24, 1024, device=dev)
    hd, hs = torch.empty(m, 24, device=dev), torch.empty(m, device=dev)
    sf = torch.randn(m, k // 128, device=dev).abs()
    floor = torch.zeros(1, device=dev)
    try:
        indexer = indexer_cases(dev)
    except Exception as exc:  # noqa: BLE001 - a package without the indexer ops
        print(f"indexer cases: ERR {type(exc).__name__}: {str(exc)[:100]}", flush=True)
        indexer = {}
    # The masked activation scales vLLM's fused SiLU-and-quantise kernel writes: [G, T, K/128] with strides
    # (T * K/128, 1, T) (per-group MN-major, T not padded); the psum layout's cumulative group ends.
    sf_vllm = torch.empty_strided((g, t, k // 128), (t * (k // 128), 1, t), device=dev)
    sf_vllm.copy_(ag[1])
    ag_vllm = (ag[0], sf_vllm)
    ends = torch.tensor([100, 228, 300, 500], device=dev, dtype=torch.int32)
    return {**indexer,
        "fp8_gemm_nt (K-major sfa)": lambda: deep_gemm.fp8_gemm_nt(a, b, d),
        "fp8_gemm_nt (MN-major TMA-aligned sfa)": lambda: deep_gemm.fp8_gemm_nt(a_mn, b, d),
        "m_grouped_fp8_gemm_nt_contiguous": lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ac, bg, dc, ids),
        "m_grouped_fp8_gemm_nt_masked": lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(ag, bg, dg, masked_m, 16),
        "m_grouped_fp8_gemm_nt_masked (MN-major sfa)":
            lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(ag_mn, bg, dg, masked_m, 16),
        "m_grouped_fp8_gemm_nt_masked (vLLM (T*G, 1, T) sfa)":
            lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(ag_vllm, bg, dg, masked_m, 16),
        "m_grouped_fp8_gemm_nt_contiguous (psum)":
            lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ac, bg, dc, ends, use_psum_layout=True),
        "m_grouped_fp8_gemm_nt_contiguous (psum, expected_m)":
            lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ac, bg, dc, ends, use_psum_layout=True,
                                                               expected_m_for_psum_layout=100),
        "bf16_gemm_nt": lambda: deep_gemm.bf16_gemm_nt(x, w, d),
        "m_grouped_bf16_gemm_nt_contiguous": lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(xg, wg, dc, ids),
        "m_grouped_bf16_gemm_nt_masked": lambda: deep_gemm.m_grouped_bf16_gemm_nt_masked(xm, wg, dg, masked_m, 16),
        "tf32_hc_prenorm_gemm": lambda: deep_gemm.tf32_hc_prenorm_gemm(hx, hw, hd, hs),
        "transform_sf_into_required_layout":
            lambda: deep_gemm.transform_sf_into_required_layout(sf, m, k, (1, 128)),  # (gran_mn, gran_k): no is_sfa
        "torch add_ (floor)": lambda: floor.add_(1),
        # This package only (DeepGEMM has no torch.ops.deep_gemm: ERR): the same calls through the dispatcher op,
        # which the public functions skip for plain eager CUDA calls (_ops/library.eager_op): the difference is
        # what that path saves.
        **dispatcher_cases(a, a_mn, b, d, ag_mn, ag_vllm, bg, dg, masked_m, ac, dc, ends, x, w, hx, hw, hd, hs),
    }


def dispatcher_cases(a, a_mn, b, d, ag_mn, ag_vllm, bg, dg, masked_m, ac, dc, ends, x, w, hx, hw, hd, hs) -> dict:
    ops = torch.ops.deep_gemm
    none3 = (None, None, None)
    return {
        "fp8_gemm_nt (MN-major TMA-aligned sfa) [torch.ops]": lambda: ops.fp8_gemm_nt.default(*a_mn, *b, d),
        "m_grouped_fp8_gemm_nt_masked (MN-major sfa) [torch.ops]":
            lambda: ops.m_grouped_fp8_gemm_nt_masked.default(*ag_mn, *bg, dg, masked_m, 16, *none3, "nk", False),
        "m_grouped_fp8_gemm_nt_masked (vLLM (T*G, 1, T) sfa) [torch.ops]":
            lambda: ops.m_grouped_fp8_gemm_nt_masked.default(*ag_vllm, *bg, dg, masked_m, 16, *none3, "nk", False),
        "m_grouped_fp8_gemm_nt_contiguous (psum) [torch.ops]":
            lambda: ops.m_grouped_fp8_gemm_nt_contiguous.default(*ac, *bg, dc, ends, *none3, "nk", False, True, True,
                                                                 None),
        "bf16_gemm_nt [torch.ops]": lambda: ops.bf16_gemm_nt.default(x, w, d),
        "tf32_hc_prenorm_gemm [torch.ops]": lambda: ops.tf32_hc_prenorm_gemm.default(hx, hw, hd, hs, None),
    }


def indexer_cases(dev: str) -> dict:
    """The indexer's entry points on small shapes: prefill logits (with its clean pass), the paged schedule and a
    paged decode step (64 sequences, next_n 2, ~1k tokens each)."""
    import deep_gemm
    fp8 = torch.float8_e4m3fn
    s, sk, h, d = 128, 1024, 64, 128
    q = torch.randn(s, h, d, device=dev).to(fp8)
    kv = (torch.randn(sk, d, device=dev).to(fp8), torch.rand(sk, device=dev))
    w = torch.randn(s, h, device=dev)
    ks = torch.zeros(s, dtype=torch.int32, device=dev)
    ke = torch.arange(sk - s + 1, sk + 1, dtype=torch.int32, device=dev)
    batch, next_n, block_kv, pages = 64, 2, 64, 16
    pq = torch.randn(batch, next_n, h, d, device=dev).to(fp8)
    cache = torch.randint(0, 100, (batch * pages, block_kv, 1, d + 4), dtype=torch.uint8, device=dev)
    pw = torch.randn(batch * next_n, h, device=dev)
    lens = torch.full((batch, next_n), pages * block_kv - 7, dtype=torch.int32, device=dev)
    table = torch.arange(batch * pages, dtype=torch.int32, device=dev).view(batch, pages)
    num_sms = deep_gemm.get_num_sms()
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, block_kv, num_sms)
    max_len = pages * block_kv
    return {
        "fp8_mqa_logits (clean)": lambda: deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=True),
        "fp8_mqa_logits (compressed)": lambda: deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=False,
                                                                        max_seqlen_k=sk),
        "get_paged_mqa_logits_metadata": lambda: deep_gemm.get_paged_mqa_logits_metadata(lens, block_kv, num_sms),
        "fp8_paged_mqa_logits": lambda: deep_gemm.fp8_paged_mqa_logits(pq, cache, pw, lens, table, meta, max_len),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--only", help="measure only the cases whose name contains this substring")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9, help="rounds of --calls calls; the best is reported")
    args = parser.parse_args()
    results, gpu_bound = {}, []
    for name, fn in cases().items():
        if args.only and args.only not in name:
            continue
        try:
            for _ in range(50):
                fn()
            torch.cuda.synchronize()
            best, best_wait = float("inf"), 0.0
            for _ in range(args.rounds):
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                issued = time.perf_counter()
                torch.cuda.synchronize()
                per_call = (issued - start) / args.calls * 1e6
                if per_call < best:
                    best, best_wait = per_call, (time.perf_counter() - issued) / args.calls * 1e6
            results[name] = round(best, 2)
            # A GPU still busy when the loop ends had queued work faster than it ran it: once the launch queue is
            # full the host waits for the GPU, and the loop time is the GPU's, not the host's.
            flag = "  (GPU-bound: the GPU lagged the host, so this is GPU time)" if best_wait > 0.1 * best else ""
            if flag:
                gpu_bound.append(name)
            print(f"{name:46s} {best:7.2f} us/call{flag}", flush=True)
        except Exception as exc:  # noqa: BLE001 - a package without this entry point
            print(f"{name:46s} ERR {type(exc).__name__}: {str(exc)[:100]}", flush=True)
    line = dict(provider=provider(), host_us=results, gpu_bound=gpu_bound)
    print("HOST " + json.dumps(line))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "host_overhead.json"), "w") as f:
            json.dump(line, f, indent=1)


if __name__ == "__main__":
    main()
