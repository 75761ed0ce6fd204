"""The ops as graph citizens: torch.compile(fullgraph=True) with inductor over a small DeepSeek-style block,
torch.export with a dynamic M, and ops driven from 8 threads at once (CPU)."""

from __future__ import annotations

import threading

import pytest
import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

M, K, N, G, MMAX, N2, HC = 64, 256, 128, 3, 32, 128, 24
# Inductor may compute the quantisation's 1/scale and casts with other instruction sequences than eager, so a few
# FP8 codes can round differently: compare with a calc_diff far below FP8 noise (~1e-3) instead of bitwise.
COMPILED_VS_EAGER = 1e-5


def _block(x, w, w_sf, ma, ma_sf, mw, mw_sf, masked_m, hc_b):
    """Quantise activations, FP8 GEMM, masked grouped FP8 GEMM (MoE decode), HyperConnection prenorm GEMM."""
    a = per_token_cast_to_fp8(x, use_ue8m0=False)
    d = torch.empty(x.size(0), w.size(0), dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, (w, w_sf), d)
    dm = torch.zeros(ma.size(0), ma.size(1), mw.size(1), dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((ma, ma_sf), (mw, mw_sf), dm, masked_m, 16)
    hd = torch.empty(x.size(0), hc_b.size(0))
    hs = torch.empty(x.size(0))
    torch.ops.deep_gemm.tf32_hc_prenorm_gemm(x, hc_b, hd, hs)
    return d.float() * hs[:, None] + hd.sum(-1, keepdim=True), dm.float()


def _inputs():
    w = per_block_cast_to_fp8(torch.randn(N, K, dtype=torch.bfloat16), use_ue8m0=False)
    mq = [per_token_cast_to_fp8(torch.randn(MMAX, K, dtype=torch.bfloat16), use_ue8m0=False) for _ in range(G)]
    mwq = [per_block_cast_to_fp8(torch.randn(N2, K, dtype=torch.bfloat16), use_ue8m0=False) for _ in range(G)]
    return (torch.randn(M, K, dtype=torch.bfloat16), *w,
            torch.stack([q[0] for q in mq]), torch.stack([q[1] for q in mq]),
            torch.stack([q[0] for q in mwq]), torch.stack([q[1] for q in mwq]),
            torch.tensor([3, 0, 32], dtype=torch.int32), torch.randn(HC, K))


@pytest.mark.slow
def test_compile_fullgraph_inductor_matches_eager():
    torch._dynamo.reset()
    args = _inputs()
    eager = _block(*args)
    compiled = torch.compile(_block, fullgraph=True, backend="inductor")(*args)
    for got, want in zip(compiled, eager):
        assert got.shape == want.shape
        assert calc_diff(got, want) < COMPILED_VS_EAGER
    # rows past masked_m stay zero in both
    assert (compiled[1][1] == 0).all() and (compiled[1][0, 3:] == 0).all()


class _Gemm(torch.nn.Module):
    def forward(self, a, sfa, b, sfb):
        d = torch.empty(a.size(0), b.size(0), dtype=torch.bfloat16)
        torch.ops.deep_gemm.fp8_gemm_nt(a, sfa, b, sfb, d)
        return d


def test_export_with_dynamic_m():
    a = per_token_cast_to_fp8(torch.randn(48, K, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(N, K, dtype=torch.bfloat16), use_ue8m0=False)
    m = torch.export.Dim("m", min=1, max=4096)
    program = torch.export.export(_Gemm(), (*a, *b), dynamic_shapes={"a": {0: m}, "sfa": {0: m}, "sfb": None,
                                                                       "b": None})
    assert any("deep_gemm.fp8_gemm_nt" in str(node.target) for node in program.graph.nodes)
    for rows in (5, 48, 129):
        a2 = per_token_cast_to_fp8(torch.randn(rows, K, dtype=torch.bfloat16), use_ue8m0=False)
        got = program.module()(*a2, *b)
        want = _Gemm()(*a2, *b)
        assert got.shape == (rows, N) and torch.equal(got, want)


def test_ops_from_eight_threads():
    """8 threads call a mix of ops on their own inputs at once; each result equals the single-threaded one."""
    jobs = []
    for i in range(8):
        a = per_token_cast_to_fp8(torch.randn(16 + i, K, dtype=torch.bfloat16), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(N, K, dtype=torch.bfloat16), use_ue8m0=False)
        x, y = torch.randn(8 + i, 64, dtype=torch.bfloat16), torch.randn(32, 64, dtype=torch.bfloat16)
        sf = torch.rand(40 + i, 3)
        jobs.append((a, b, x, y, sf))

    def run(a, b, x, y, sf):
        d = torch.empty(a[0].size(0), N, dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt(a, b, d)
        e = torch.empty(x.size(0), y.size(0))
        deep_gemm.bf16_gemm_nt(x, y, e)
        t = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
        return d, e, t

    expected = [run(*job) for job in jobs]
    results, errors = [None] * 8, []
    barrier = threading.Barrier(8)

    def worker(i):
        try:
            barrier.wait()
            for _ in range(5):
                results[i] = run(*jobs[i])
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for got, want in zip(results, expected):
        for g, w in zip(got, want):
            assert torch.equal(g, w)
