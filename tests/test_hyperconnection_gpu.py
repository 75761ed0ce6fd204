"""tf32_hc_prenorm_gemm on the GPU: DeepGEMM's numerics bar (calc_diff < 1e-8 against torch's TF32 matmul), odd M,
every split count including splits without K blocks, N 8..128, determinism of the device reduction, the replayed
launch plan, CUDA-graph capture and replay, torch.compile(fullgraph=True), 8 threads and a C++ dispatcher caller."""

from __future__ import annotations

import threading

import pytest
import torch

import deep_gemm
from deep_gemm.hyperconnection import launch as hc_launch
from deep_gemm.hyperconnection.reference import round_to_tf32, split_k_blocks
from deep_gemm.testing import assert_bitwise_equal, calc_diff

pytestmark = pytest.mark.gpu

BLOCK_K = 64
TOLERANCES = {
    # DeepGEMM's own bar (tests/test_hyperconnection_reference_cpu.py) against torch's TF32 matmul.
    "vs_torch_tf32": 1e-8,
    # Against the FP64 product of TF32-rounded B: FP32 summation only.
    "vs_tf32_product": 1e-11,
}


def _inputs(m, n, k, num_splits, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, k, device="cuda", generator=g)
    lead = () if num_splits is None else (num_splits,)
    d = torch.full((*lead, m, n), float("nan"), device="cuda")
    s = torch.full((*lead, m), float("nan"), device="cuda")
    return a, b, d, s


def _reduced(d, s, num_splits):
    return (d, s) if num_splits is None else (d.sum(0), s.sum(0))


@pytest.fixture
def tf32_matmul():
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


DG_ROWS = [(m, 24, k, s) for m in (13, 137, 4096, 8192) for k in (28672, 7680, 7168) for s in (None, 16)]


@pytest.mark.parametrize("m,n,k,num_splits", DG_ROWS, ids=[f"m{m}-k{k}-s{s}" for m, n, k, s in DG_ROWS])
def test_deepgemm_rows_against_torch_tf32(tf32_matmul, m, n, k, num_splits):
    a, b, d, s = _inputs(m, n, k, num_splits)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
    fd, fs = _reduced(d, s, num_splits)
    assert calc_diff(fd, a.float() @ b.T) < TOLERANCES["vs_torch_tf32"]
    assert calc_diff(fs, a.float().square().sum(-1)) < TOLERANCES["vs_torch_tf32"]
    assert calc_diff(fd, a.double() @ round_to_tf32(b).double().T) < TOLERANCES["vs_tf32_product"]


SHAPES = [(m, n, k, s) for m in (1, 13, 137) for n in (8, 24, 64, 128) for k in (448, 7168) for s in (None, 3, 16)]
SHAPES += [(m, n, 7168, s) for m in (13, 137) for n in (16, 32) for s in (None, 16)]


@pytest.mark.parametrize("m,n,k,num_splits", SHAPES, ids=[f"m{m}-n{n}-k{k}-s{s}" for m, n, k, s in SHAPES])
def test_odd_shapes_against_tf32_product(m, n, k, num_splits):
    a, b, d, s = _inputs(m, n, k, num_splits, seed=m + n)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
    assert not d.isnan().any() and not s.isnan().any()
    fd, fs = _reduced(d, s, num_splits)
    assert calc_diff(fd, a.double() @ round_to_tf32(b).double().T) < TOLERANCES["vs_tf32_product"]
    assert calc_diff(fs, a.double().square().sum(-1)) < TOLERANCES["vs_tf32_product"]


@pytest.mark.parametrize("m", (1, 13, 137))
def test_every_split_count_with_empty_splits(m):
    k = 5 * BLOCK_K
    for num_splits in range(1, 9):
        a, b, d, s = _inputs(m, 24, k, num_splits, seed=num_splits)
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
        b64 = round_to_tf32(b).double()
        for split in range(num_splits):
            lo, hi = split_k_blocks(k // BLOCK_K, num_splits, split)
            if lo == hi:
                assert_bitwise_equal(d[split], torch.zeros_like(d[split]), f"d[{split}]")
                assert_bitwise_equal(s[split], torch.zeros_like(s[split]), f"sqr_sum[{split}]")
                continue
            part = a.double()[:, lo * BLOCK_K:hi * BLOCK_K]
            assert calc_diff(d[split], part @ b64[:, lo * BLOCK_K:hi * BLOCK_K].T) < TOLERANCES["vs_tf32_product"]
            assert calc_diff(s[split], part.square().sum(-1)) < TOLERANCES["vs_tf32_product"]


@pytest.mark.parametrize("m,k,num_splits", [(13, 28672, None), (137, 28672, None), (13, 28672, 16), (4096, 7168, None)])
def test_device_reduction_is_deterministic(m, k, num_splits):
    a, b, d, s = _inputs(m, 24, k, num_splits)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
    first = (d.clone(), s.clone())
    for _ in range(20):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
        assert torch.equal(d, first[0]) and torch.equal(s, first[1])


@pytest.mark.parametrize("k,num_splits", [(7168, None), (28672, None), (7168, 16)])
def test_deterministic_mode_is_batch_invariant(deterministic_mode, k, num_splits):
    """use_deterministic_algorithms(True): a row's outputs are the same bits in a batch of 1, 13, 137 and 4096 rows
    (the default plan changes row blocks and sub-splits with M)."""
    a, b, _, _ = _inputs(4096, 24, k, num_splits)
    rows = {}
    for m in (1, 13, 137, 4096):
        _, _, d, s = _inputs(m, 24, k, num_splits)
        deep_gemm.tf32_hc_prenorm_gemm(a[:m], b, d, s, num_splits=num_splits)
        rows[m] = (d[..., :1, :].clone(), s[..., :1].clone())
    for m in (13, 137, 4096):
        assert_bitwise_equal(rows[m][0], rows[1][0], f"d, row 0 at M = {m}")
        assert_bitwise_equal(rows[m][1], rows[1][1], f"sqr_sum, row 0 at M = {m}")
    d, s = rows[1]
    if num_splits is not None:
        d, s = d.sum(0), s.sum(0)
    ref = a[:1].double() @ round_to_tf32(b).double().T
    assert calc_diff(d, ref) < TOLERANCES["vs_tf32_product"]


def test_second_call_replays_the_recorded_launch():
    a, b, d, s = _inputs(13, 24, 7168, None)
    plans = hc_launch.tf32_hc_prenorm_gemm.plans
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    before = len(plans)
    a2, b2, d2, s2 = _inputs(13, 24, 7168, None, seed=1)
    deep_gemm.tf32_hc_prenorm_gemm(a2, b2, d2, s2)
    assert len(plans) == before and len(plans) >= 1
    # The replay is the direct C launch with two TMA maps (A, and B encoded as TFLOAT32): B is rounded in the TMA
    # unit, not by the pointer fallback.
    assert any(p.direct is not None and len(p.direct.tma_words) == 2 for p in plans.values())
    assert calc_diff(d2, a2.double() @ round_to_tf32(b2).double().T) < TOLERANCES["vs_tf32_product"]


@pytest.mark.parametrize("m,num_splits", [(13, None), (137, 16), (4096, None)])
def test_cuda_graph_capture_and_replay(m, num_splits):
    a, b, d, s = _inputs(m, 24, 7168, num_splits)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
    for seed in range(3):
        g = torch.Generator(device="cuda").manual_seed(100 + seed)
        a.copy_(torch.randn(a.shape, device="cuda", generator=g).bfloat16())
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        fd, fs = _reduced(d, s, num_splits)
        assert calc_diff(fd, a.double() @ round_to_tf32(b).double().T) < TOLERANCES["vs_tf32_product"]
        assert calc_diff(fs, a.double().square().sum(-1)) < TOLERANCES["vs_tf32_product"]


def test_torch_compile_fullgraph():
    @torch.compile(fullgraph=True)
    def prenorm(a, b):
        d = torch.empty(a.size(0), b.size(0), device=a.device)
        s = torch.empty(a.size(0), device=a.device)
        torch.ops.deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, None)
        return d * 2, s

    a, b, _, _ = _inputs(37, 24, 7168, None)
    d, s = prenorm(a, b)
    assert calc_diff(d / 2, a.double() @ round_to_tf32(b).double().T) < TOLERANCES["vs_tf32_product"]
    assert calc_diff(s, a.double().square().sum(-1)) < TOLERANCES["vs_tf32_product"]


def test_eight_threads_first_compile_included():
    shapes = [(1 + 7 * i, 8 * (1 + i % 4), 64 * (3 + i), None if i % 2 else 1 + i % 5) for i in range(8)]
    errors = []

    def worker(i):
        try:
            m, n, k, num_splits = shapes[i]
            for rep in range(5):
                a, b, d, s = _inputs(m, n, k, num_splits, seed=10 * i + rep)
                deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=num_splits)
                fd, fs = _reduced(d, s, num_splits)
                torch.cuda.current_stream().synchronize()
                assert calc_diff(fd, a.double() @ round_to_tf32(b).double().T) < TOLERANCES["vs_tf32_product"]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append((i, repr(e)))

    hc_launch.CONFIGS.clear()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.slow
def test_cpp_dispatcher_caller_on_cuda(tmp_path):
    import test_cpp_dispatcher as cpp
    from torch.utils.cpp_extension import load_inline
    ext = load_inline(name="dg_cpp_dispatcher_gpu_test", cpp_sources=[cpp._CPP], functions=cpp._FUNCTIONS,
                      build_directory=str(tmp_path), extra_cflags=["-O0"], verbose=False)
    for m, num_splits in [(13, None), (137, 16), (4096, None)]:
        a, b, d, s = _inputs(m, 24, 7168, num_splits)
        ext.hc_prenorm(a, b, d, s, num_splits)
        d2, s2 = torch.empty_like(d), torch.empty_like(s)
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d2, s2, num_splits=num_splits)
        assert torch.equal(d, d2) and torch.equal(s, s2), "the C++ caller must run the same kernel"
        fd, _ = _reduced(d, s, num_splits)
        assert calc_diff(fd, a.double() @ round_to_tf32(b).double().T) < TOLERANCES["vs_tf32_product"]
