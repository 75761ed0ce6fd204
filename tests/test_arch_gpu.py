"""The plans of other architectures, run on this GPU: with the capability forced to 8.0 / 8.9 / 10.0 / 12.0 each
op picks what such a device would run (portable tl.* kernels with smaller rings and narrower tiles, or the
reference) and must still compute the right result. On an sm_90 GPU this executes the portable variants the plans
choose elsewhere (compiled for this GPU: the numerics of the choice, not of the other architecture's code
generation; scripts/compile_check_arch.py covers that). Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.core import arch
from deep_gemm.hyperconnection.reference import round_to_tf32
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

pytestmark = pytest.mark.gpu
CAPABILITIES = [(8, 0), (8, 9), (10, 0), (12, 0)]


def _fp8_operands(m, n, k):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    return x, w, per_token_cast_to_fp8(x, use_ue8m0=False), per_block_cast_to_fp8(w, use_ue8m0=False)


@pytest.mark.parametrize("cap", CAPABILITIES)
def test_fp8_dense_and_masked_under_other_capabilities(cap):
    x, w, a, b = _fp8_operands(512, 1024, 2048)
    d = torch.full((512, 1024), float("nan"), device="cuda", dtype=torch.bfloat16)
    with arch.forced_capability(cap):
        deep_gemm.fp8_gemm_nt(a, b, d)
        kind = deep_gemm.backends()["fp8_gemm_nt"]
    assert (kind == "reference") == (cap < (8, 9)) and ("portable" in kind) == (cap >= (8, 9))
    assert calc_diff(d, x.double() @ w.double().T) < 1e-3
    groups, max_m, n, k = 4, 256, 512, 1024
    xs = torch.randn(groups, max_m, k, device="cuda", dtype=torch.bfloat16)
    ws = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16)
    qa = [per_token_cast_to_fp8(xs[g], use_ue8m0=False) for g in range(groups)]
    qb = [per_block_cast_to_fp8(ws[g], use_ue8m0=False) for g in range(groups)]
    a3 = (torch.stack([q[0] for q in qa]), torch.stack([q[1] for q in qa]))
    b3 = (torch.stack([q[0] for q in qb]), torch.stack([q[1] for q in qb]))
    d3 = torch.zeros(groups, max_m, n, device="cuda", dtype=torch.bfloat16)
    masked_m = torch.tensor([256, 100, 0, 17], device="cuda", dtype=torch.int32)
    with arch.forced_capability(cap):
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a3, b3, d3, masked_m, 128)
    for g, rows in enumerate(masked_m.tolist()):
        if rows:
            assert calc_diff(d3[g, :rows], xs[g, :rows].double() @ ws[g].double().T) < 1e-3, (cap, g)


@pytest.mark.parametrize("cap", CAPABILITIES)
def test_bf16_einsum_hc_under_other_capabilities(cap):
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, 2048, device="cuda", dtype=torch.bfloat16)
    d = torch.full((4096, 1024), float("nan"), device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8, 512, 1024, device="cuda", dtype=torch.bfloat16)  # "bhr,hdr->bhd": a [b, h, r] as x.T(0, 1)
    y = torch.randn(8, 2048, 1024, device="cuda", dtype=torch.bfloat16)
    e = torch.empty(512, 8, 2048, device="cuda", dtype=torch.bfloat16)
    ha = torch.randn(256, 7168, device="cuda", dtype=torch.bfloat16)
    hb = torch.randn(24, 7168, device="cuda", dtype=torch.float32)
    hd = torch.empty(256, 24, device="cuda", dtype=torch.float32)
    hs = torch.empty(256, device="cuda", dtype=torch.float32)
    with arch.forced_capability(cap):
        deep_gemm.bf16_gemm_nt(a, b, d)
        deep_gemm.einsum("bhr,hdr->bhd", x.transpose(0, 1), y, e)
        deep_gemm.tf32_hc_prenorm_gemm(ha, hb, hd, hs)
        report = deep_gemm.backends()
    assert report["bf16_gemm_nt"].startswith("triton (portable") and report["einsum"].startswith("triton")
    assert calc_diff(d, a.float() @ b.float().T) < 1e-5
    assert calc_diff(e, torch.einsum("bhr,hdr->bhd", x.transpose(0, 1).float(), y.float())) < 1e-5
    # B rounded to TF32 by the TMA unit (sm_90 on) or in registers (below): the same product either way
    assert calc_diff(hd, ha.double() @ round_to_tf32(hb).double().T) < 1e-11
    assert calc_diff(hs, ha.double().square().sum(-1)) < 1e-11

# ---- odd shapes and the indexer, against the CPU reference kernels ------------------------------------------------

GEMM_TOLERANCE = 1e-5  # the same FP8/BF16 operands on both sides: only the summation order differs


def _both(*tensors):
    """CPU tensors and their CUDA copies."""
    return tensors, tuple(t.cuda() for t in tensors)


def _nan_like(t):
    return torch.full_like(t, float("nan"))


@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: f"sm{c[0]}{c[1]}")
@pytest.mark.parametrize("m,n,k", [(37, 256, 384), (1, 128, 128), (130, 384, 640)])
def test_fp8_odd_shapes(cap, m, n, k):
    torch.manual_seed(m + n + k)
    a = per_token_cast_to_fp8(torch.randn(m, k, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, dtype=torch.bfloat16), use_ue8m0=False)
    (a0, a1, b0, b1), (ga0, ga1, gb0, gb1) = _both(a[0], a[1], b[0], b[1])
    d = torch.empty(m, n, dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt((a0, a1), (b0, b1), d)
    gd = _nan_like(d).cuda()
    with arch.forced_capability(cap):
        deep_gemm.fp8_gemm_nt((ga0, ga1), (gb0, gb1), gd)
    assert calc_diff(gd.cpu(), d) < GEMM_TOLERANCE


@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: f"sm{c[0]}{c[1]}")
@pytest.mark.parametrize("m,n,k", [(37, 192, 256), (129, 256, 520)])
def test_bf16_odd_shapes(cap, m, n, k):
    torch.manual_seed(m * k)
    (a, b), (ga, gb) = _both(torch.randn(m, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16))
    d = torch.empty(m, n, dtype=torch.float32)
    deep_gemm.bf16_gemm_nt(a, b, d)
    gd = _nan_like(d).cuda()
    with arch.forced_capability(cap):
        deep_gemm.bf16_gemm_nt(ga, gb, gd)
    assert calc_diff(gd.cpu(), d) < GEMM_TOLERANCE


@pytest.mark.parametrize("cap", CAPABILITIES, ids=lambda c: f"sm{c[0]}{c[1]}")
def test_mqa_logits(cap):
    torch.manual_seed(4)
    s_len, sk, h, dim = 5, 300, 32, 128
    q = torch.randn(s_len, h, dim).to(torch.float8_e4m3fn)
    kv, kv_sf = torch.randn(sk, dim).to(torch.float8_e4m3fn), torch.rand(sk) + 0.5
    weights = torch.randn(s_len, h)
    ks = torch.tensor([0, 3, 10, 0, 250], dtype=torch.int32)
    ke = torch.tensor([17, 200, 300, 1, 300], dtype=torch.int32)
    cpu, gpu = _both(q, kv, kv_sf, weights, ks, ke)
    logits = deep_gemm.fp8_mqa_logits(cpu[0], (cpu[1], cpu[2]), *cpu[3:])
    with arch.forced_capability(cap):
        glogits = deep_gemm.fp8_mqa_logits(gpu[0], (gpu[1], gpu[2]), *gpu[3:]).cpu()
    inside = torch.isfinite(logits)
    assert torch.equal(inside, torch.isfinite(glogits))
    assert calc_diff(glogits[inside], logits[inside]) < GEMM_TOLERANCE
