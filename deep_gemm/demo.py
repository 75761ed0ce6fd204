"""Self-check: run every op family once on the best available device and compare with a float64 oracle.

    python -m deep_gemm            # CUDA if available (Triton kernels / GPU reference), else the CPU reference

Prints one row per case: op, backend (what ``deep_gemm.backends()`` says CUDA runs; "cpu reference" on CPU),
device, the error against an independent float64 computation (``calc_diff`` for products, max abs error for
layout/metadata ops), and the wall time of one warm call. Exits non-zero if any case exceeds its tolerance.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

# calc_diff bar for FP8 products (DeepGEMM's own), and for BF16/TF32 products rounded once to BF16/FP32.
FP8_TOL = 1e-3
BF16_TOL = 1e-4


@dataclass
class Case:
    name: str  # op name as in torch.ops.deep_gemm
    run: Callable[[], torch.Tensor]  # runs the op, returns what to compare
    oracle: Callable[[], torch.Tensor]  # float64 expectation
    tol: float
    metric: str = "calc_diff"


def _f64(x: torch.Tensor, sf: torch.Tensor, gran_mn: int) -> torch.Tensor:
    """float64 values of a (data, per-row or per-block FP32 scale) operand."""
    rows = torch.arange(x.size(0), device=x.device) // gran_mn
    cols = torch.arange(x.size(1), device=x.device) // 128
    return x.double() * sf.double()[rows][:, cols]


def _cases(device: str) -> list[Case]:
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    cases = []
    m, n, k = 256, 512, 1024
    a = per_token_cast_to_fp8(randn(m, k), use_ue8m0=False)
    b = per_block_cast_to_fp8(randn(n, k), use_ue8m0=False)
    d = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    cases.append(Case("fp8_gemm_nt", lambda: (deep_gemm.fp8_gemm_nt(a, b, d), d)[1],
                      lambda: _f64(*a, 1) @ _f64(*b, 128).T, FP8_TOL))

    groups, per_group = 4, 128
    ga = per_token_cast_to_fp8(randn(groups * per_group, k), use_ue8m0=False)
    gb_q = [per_block_cast_to_fp8(randn(n, k), use_ue8m0=False) for _ in range(groups)]
    gb = (torch.stack([q[0] for q in gb_q]), torch.stack([q[1] for q in gb_q]))
    ids = torch.arange(groups, device=device, dtype=torch.int32).repeat_interleave(per_group)
    gd = torch.empty(groups * per_group, n, device=device, dtype=torch.bfloat16)
    cases.append(Case("m_grouped_fp8_gemm_nt_contiguous",
                      lambda: (deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ga, gb, gd, ids), gd)[1],
                      lambda: torch.cat([_f64(ga[0][i * per_group:(i + 1) * per_group],
                                              ga[1][i * per_group:(i + 1) * per_group], 1)
                                         @ _f64(gb[0][i], gb[1][i], 128).T for i in range(groups)]), FP8_TOL))

    masked = torch.tensor([5, 128, 0, 77], device=device, dtype=torch.int32)
    ma = (ga[0].view(groups, per_group, k), ga[1].view(groups, per_group, -1))
    md = torch.zeros(groups, per_group, n, device=device, dtype=torch.bfloat16)

    def masked_rows(x):
        return torch.cat([x[i, :int(masked[i])] for i in range(groups)])

    cases.append(Case("m_grouped_fp8_gemm_nt_masked",
                      lambda: (deep_gemm.m_grouped_fp8_gemm_nt_masked(ma, gb, md, masked, 64), masked_rows(md))[1],
                      lambda: masked_rows(torch.stack([_f64(ma[0][i], ma[1][i], 1) @ _f64(gb[0][i], gb[1][i], 128).T
                                                       for i in range(groups)])), FP8_TOL))

    ba, bb = randn(m, k), randn(n, k)
    bd = torch.empty(m, n, device=device, dtype=torch.float32)
    cases.append(Case("bf16_gemm_nt", lambda: (deep_gemm.bf16_gemm_nt(ba, bb, bd), bd)[1],
                      lambda: ba.double() @ bb.double().T, BF16_TOL))

    ea, ew = randn(4, 8, 256), randn(8, 128, 256)
    ed = torch.empty(4, 8, 128, device=device, dtype=torch.bfloat16)
    cases.append(Case("einsum", lambda: (deep_gemm.einsum("bhr,hdr->bhd", ea, ew, ed), ed)[1],
                      lambda: torch.einsum("bhr,hdr->bhd", ea.double(), ew.double()), BF16_TOL))

    ha, hb = randn(64, 1024), randn(24, 1024, dtype=torch.float32)
    hd = torch.empty(64, 24, device=device)
    hs = torch.empty(64, device=device)
    cases.append(Case("tf32_hc_prenorm_gemm",
                      lambda: (deep_gemm.tf32_hc_prenorm_gemm(ha, hb, hd, hs), torch.cat([hd.flatten(), hs]))[1],
                      lambda: torch.cat([(ha.double() @ hb.double().T).flatten(), (ha.double() ** 2).sum(1)]),
                      FP8_TOL))

    s, sk, h, dim = 64, 512, 32, 64
    q = randn(s, h, dim).to(torch.float8_e4m3fn)
    kv = randn(sk, dim).to(torch.float8_e4m3fn)
    kv_sf = torch.rand(sk, generator=g).add(0.5).to(device)
    w = randn(s, h, dtype=torch.float32)
    ks = torch.zeros(s, device=device, dtype=torch.int32)
    ke = torch.full((s,), sk, device=device, dtype=torch.int32)

    def mqa_oracle():
        scores = torch.einsum("shd,td->sht", q.double(), kv.double()).relu()
        return (scores * w.double()[:, :, None]).sum(1) * kv_sf.double()[None, :]

    cases.append(Case("fp8_mqa_logits", lambda: deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), w, ks, ke), mqa_oracle,
                      FP8_TOL))

    sf = torch.rand(300, 7, generator=g).to(device)
    cases.append(Case("get_mn_major_tma_aligned_tensor",
                      lambda: deep_gemm.get_mn_major_tma_aligned_tensor(sf), lambda: sf.double(), 0.0, "max_abs"))
    return cases


def _error(case: Case, got: torch.Tensor, expected: torch.Tensor) -> float:
    if case.metric == "max_abs":
        return float((got.double() - expected.double()).abs().max()) if got.numel() else 0.0
    return calc_diff(got, expected)


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    backends = deep_gemm.backends()
    print(f"deep_gemm {deep_gemm.__version__} on {torch.cuda.get_device_name() if device == 'cuda' else 'CPU'} "
          f"(torch {torch.__version__})")
    header = f"{'op':34s} {'backend':14s} {'device':6s} {'error vs fp64':>14s} {'time':>10s}  ok"
    print(header)
    print("-" * len(header))
    failures = 0
    for case in _cases(device):
        got = case.run()  # first call: compiles kernels on CUDA
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        got = case.run()
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        error = _error(case, got, case.oracle())
        ok = error <= case.tol
        failures += not ok
        backend = backends[case.name].split(" ")[0] if device == "cuda" else "cpu reference"
        print(f"{case.name:34s} {backend:14s} {device:6s} {error:14.2e} {elapsed * 1e6:8.0f}us  {'yes' if ok else 'NO'}")
    print(f"\n{len(backends)} ops registered; CUDA backends: "
          f"{sum(v.startswith('triton') for v in backends.values())} triton, "
          f"{sum(v == 'reference' for v in backends.values())} torch reference, "
          f"{sum(v == 'host' for v in backends.values())} host-only")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
