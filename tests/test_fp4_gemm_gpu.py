"""The dequantising FP4 GEMM kernel (``deep_gemm/gemm/fp4/kernels.py``) on a GPU, opted in with
``Fp4Overrides(kernels=True)``: K-grouped FP4 (8 groups, a zero-size one, sizes and psum layouts, c = d),
NVFP4 (BF16 and FP32 d, decode and DeepSeek-sized shapes) and the FP4 forms of ``fp8_fp4_gemm_nt`` and the
M-grouped ``m_grouped_fp8_fp4_gemm_nt_{contiguous,masked}`` (expert ids and psum layouts), each against
the op's torch reference on the same GPU inputs, against the unquantised product (DeepGEMM's tolerance), and the
K-grouped launch under CUDA-graph capture (no host read of grouped_layout). No timing here: speed lives in
benchmarks/."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.testing.grouping import contiguous_layout
from deep_gemm.core.registry import run_launcher
from deep_gemm.gemm.fp4.plan import Fp4Overrides
from deep_gemm.gemm.fp4.reference import to_cublaslt_tiled_sf
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_token_cast_to_fp4, per_token_cast_to_fp8

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ops = torch.ops.deep_gemm
KERNELS = Fp4Overrides(kernels=True)
# Kernel vs reference on the same inputs: exact products, FP32 vs FP64 accumulation order over K <= 8192
# (calc_diff ~ (sqrt(K) * 2^-24)^2 with cancellation); BF16 d: a rare one-ulp rounding flip.
SAME_INPUTS = {torch.float32: 1e-9, torch.bfloat16: 1e-5}
# Against the unquantised product: the FP4 quantisation error (random normal data, K = 2048: calc_diff ~0.013 for
# FP4 x FP4 with UE8M0 per-32 scales, ~0.007 for FP8 x FP4 and NVFP4, measured with the CPU reference).
UNQUANTISED = 0.025


def _run(name: str, *args, fp4_kwarg: str = "overrides") -> None:
    out = run_launcher(name, *args, launcher_kwargs={fp4_kwarg: KERNELS})
    assert out is not NotImplemented, f"the launcher of {name} declined"


# ---- K-grouped ----------------------------------------------------------------------------------------------------

def _kg_inputs(m, n, sum_k, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(m, sum_k, device="cuda", generator=gen)
    w = torch.randn(n, sum_k, device="cuda", generator=gen)
    a, sfa = per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=32)
    b, sfb = per_token_cast_to_fp4(w, use_ue8m0=True, gran_k=32)
    return x, w, a, sfa.T.contiguous(), b, sfb.T.contiguous()


@pytest.mark.parametrize("m,n", [(4096, 7168), (7168, 2048), (129, 257)])
def test_k_grouped_eight_groups(m, n):
    ks = [1024, 512, 0, 2048, 256, 1536, 768, 128]
    x, w, a, sfa, b, sfb = _kg_inputs(m, n, sum(ks))
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    c = torch.randn(len(ks), m, n, device="cuda")
    d_ker, d_ref = c.clone(), c.clone()
    _run("k_grouped_fp4_gemm_nt_contiguous", a, sfa, b, sfb, d_ker, ks, layout, d_ker, [1, 1, 32], "mn", False)
    ops.k_grouped_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d_ref, ks, layout, d_ref, [1, 1, 32], "mn", False)
    assert calc_diff(d_ker, d_ref) < SAME_INPUTS[torch.float32]
    start = 0
    for g, kg in enumerate(ks):
        want = c[g] + x[:, start:start + kg] @ w[:, start:start + kg].T
        if kg:
            assert calc_diff(d_ker[g], want) < UNQUANTISED, g
        else:
            assert torch.equal(d_ker[g], c[g])
        start += kg


def test_k_grouped_psum_layout():
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    sizes = [300, 0, 1000, 64, 2000, 17, 500, 128]
    ends, end = [], 0
    for size in sizes:
        start = -(-end // alignment) * alignment
        end = start + size
        ends.append(end)
    sum_k = -(-ends[-1] // 32) * 32
    m, n = 1024, 2048
    _, _, a, sfa, b, sfb = _kg_inputs(m, n, sum_k, seed=1)
    layout = torch.tensor(ends, dtype=torch.int32, device="cuda")
    d_ker = torch.empty(len(sizes), m, n, device="cuda")
    d_ref = torch.empty_like(d_ker)
    _run("k_grouped_fp4_gemm_nt_contiguous", a, sfa, b, sfb, d_ker, None, layout, None, [1, 1, 32], "mn", True)
    ops.k_grouped_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d_ref, None, layout, None, [1, 1, 32], "mn", True)
    assert calc_diff(d_ker, d_ref) < SAME_INPUTS[torch.float32]


def test_k_grouped_graph_capture():
    ks = [512, 1024, 256]
    m, n = 512, 1024
    _, _, a, sfa, b, sfb = _kg_inputs(m, n, sum(ks), seed=2)
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    d = torch.empty(len(ks), m, n, device="cuda")
    args = (a, sfa, b, sfb, d, ks, layout, None, [1, 1, 32], "mn", False)
    _run("k_grouped_fp4_gemm_nt_contiguous", *args)  # (compiles outside the capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _run("k_grouped_fp4_gemm_nt_contiguous", *args)
    d.zero_()
    graph.replay()
    d_ref = torch.empty_like(d)
    ops.k_grouped_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d_ref, ks, layout, None, [1, 1, 32], "mn", False)
    assert calc_diff(d, d_ref) < SAME_INPUTS[torch.float32]


# ---- NVFP4 --------------------------------------------------------------------------------------------------------

def _nvfp4(x: torch.Tensor):
    packed, sf = deep_gemm.per_token_cast_to_nvfp4(x)
    return packed, to_cublaslt_tiled_sf(sf.to(torch.float8_e4m3fn).view(torch.uint8))


@pytest.mark.parametrize("m,n,k", [(4096, 7168, 2048), (1, 7168, 2048), (64, 4096, 7168), (4096, 2112, 7168),
                                   (33, 129, 96)])
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float32))
def test_nvfp4(m, n, k, dtype):
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    x = torch.randn(m, k, device="cuda", generator=gen)
    w = torch.randn(n, k, device="cuda", generator=gen)
    (a, sfa), (b, sfb) = _nvfp4(x), _nvfp4(w)
    d_ker = torch.empty(m, n, dtype=dtype, device="cuda")
    d_ref = torch.empty_like(d_ker)
    _run("cublaslt_nvfp4_gemm_nt", a, sfa, b, sfb, d_ker, None)
    ops.cublaslt_nvfp4_gemm_nt(a, sfa, b, sfb, d_ref, None)
    assert calc_diff(d_ker, d_ref) < SAME_INPUTS[dtype]
    assert calc_diff(d_ker, x @ w.T) < UNQUANTISED


def test_nvfp4_c_is_d():
    m, n, k = 1024, 2048, 1024
    (a, sfa), (b, sfb) = _nvfp4(torch.randn(m, k, device="cuda")), _nvfp4(torch.randn(n, k, device="cuda"))
    d_ker = torch.randn(m, n, device="cuda")
    d_ref = d_ker.clone()
    _run("cublaslt_nvfp4_gemm_nt", a, sfa, b, sfb, d_ker, d_ker)
    ops.cublaslt_nvfp4_gemm_nt(a, sfa, b, sfb, d_ref, d_ref)
    assert calc_diff(d_ker, d_ref) < SAME_INPUTS[torch.float32]


# ---- fp8_fp4_gemm_nt's FP4 forms ------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k", [(4096, 7168, 2048), (128, 7168, 2048), (1, 4096, 7168)])
@pytest.mark.parametrize("a_fp4", (False, True))
@pytest.mark.parametrize("scales", ("ue8m0_int32", "fp32"))
def test_fp8_fp4_gemm_nt(m, n, k, a_fp4, scales):
    """Packed UE8M0 scales (applied before the dot) and FP32 scales of any value (after each 32-K dot)."""
    gen = torch.Generator(device="cuda").manual_seed(m + k)
    x = torch.randn(m, k, device="cuda", generator=gen)
    w = torch.randn(n, k, device="cuda", generator=gen)
    packed = scales == "ue8m0_int32"
    a = (per_token_cast_to_fp4 if a_fp4 else per_token_cast_to_fp8)(x, use_ue8m0=packed, gran_k=32,
                                                                     use_packed_ue8m0=packed)
    b = per_token_cast_to_fp4(w, use_ue8m0=packed, gran_k=32, use_packed_ue8m0=packed)
    d_ker = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    d_ref = torch.empty_like(d_ker)
    args = (a[0], a[1], b[0], b[1])
    _run("fp8_fp4_gemm_nt", *args, d_ker, None, None, [1, 32], [1, 32], fp4_kwarg="fp4_overrides")
    ops.fp8_fp4_gemm_nt(*args, d_ref, None, None, [1, 32], [1, 32])
    assert calc_diff(d_ker, d_ref) < SAME_INPUTS[torch.bfloat16]
    assert calc_diff(d_ker, x @ w.T) < UNQUANTISED


def _stacked(x: torch.Tensor, fp4: bool):
    cast = per_token_cast_to_fp4 if fp4 else per_token_cast_to_fp8
    pairs = [cast(x[g], use_ue8m0=True, gran_k=32, use_packed_ue8m0=True) for g in range(x.size(0))]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


@pytest.mark.parametrize("psum", (False, True))
def test_m_grouped_fp8_fp4_contiguous(psum):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    counts = [1000, 0, 2048, 37, 512, 1500, 128, 700]
    n, k = 4096, 7168
    m, ids, ends = contiguous_layout(counts, alignment)
    layout = torch.tensor(ends, dtype=torch.int32, device="cuda") if psum else ids.cuda()
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", generator=gen), use_ue8m0=True, gran_k=32,
                              use_packed_ue8m0=True)
    b = _stacked(torch.randn(len(counts), n, k, device="cuda", generator=gen), True)
    d_ker = torch.randn(m, n, device="cuda", generator=gen).to(torch.bfloat16)
    d_ref = d_ker.clone()
    args = (a[0], a[1], b[0], b[1])
    tail = (None, [1, 32], [1, 32], "", False, psum, True)
    _run("m_grouped_fp8_fp4_gemm_nt_contiguous", *args, d_ker, layout, *tail, fp4_kwarg="fp4_overrides")
    ops.m_grouped_fp8_fp4_gemm_nt_contiguous(*args, d_ref, layout, *tail)
    assert calc_diff(d_ker, d_ref) < SAME_INPUTS[torch.bfloat16]
    assert torch.equal(d_ker == 0, d_ref == 0)


def test_m_grouped_fp8_fp4_masked():
    g, max_m, n, k = 6, 1024, 4096, 7168
    masked_m = torch.tensor([1024, 0, 1, 300, 512, 77], dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(6)
    a = _stacked(torch.randn(g, max_m, k, device="cuda", generator=gen), False)
    b = _stacked(torch.randn(g, n, k, device="cuda", generator=gen), True)
    d_ker = torch.randn(g, max_m, n, device="cuda", generator=gen).to(torch.bfloat16)
    d_ref = d_ker.clone()
    args = (a[0], a[1], b[0], b[1])
    tail = (None, [1, 32], [1, 32], "", False)
    _run("m_grouped_fp8_fp4_gemm_nt_masked", *args, d_ker, masked_m, 512, *tail, fp4_kwarg="fp4_overrides")
    ops.m_grouped_fp8_fp4_gemm_nt_masked(*args, d_ref, masked_m, 512, *tail)
    assert torch.equal(d_ker, d_ref) or calc_diff(d_ker, d_ref) < SAME_INPUTS[torch.bfloat16]
    for group, valid in enumerate(masked_m.tolist()):
        assert torch.equal(d_ker[group, valid:], d_ref[group, valid:])  # rows past masked_m untouched
