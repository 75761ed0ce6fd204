"""FP8 GEMM Triton kernels against the float64 oracle: in the Triton interpreter on CPU (small shapes), natively
on a GPU. Outputs are poisoned with NaN first, so an unwritten element fails the test; rows the contract leaves
untouched are checked to still hold their poison/sentinel."""

from __future__ import annotations

import pytest
import torch

from deep_gemm.testing import calc_diff
from deep_gemm.utils import align

from fp8_inputs import contiguous_grouped_inputs, k_grouped_inputs, mn_major, oracle_gemm, quantize, quantize_groups
from tolerances import TOLERANCES
from triton_harness import DEVICE, run_triton

TOL = TOLERANCES["kernel_fp8"]


def _to(*xs):
    return tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in xs)


DENSE = [
    # (m, n, k, layout, kind)  kind: 1d2d (BF16 out) | 1d1d (FP32 out, per-row B, accumulate into C = D)
    (37, 200, 208, "nt", "1d2d"),      # odd M, N not a multiple of 128, K tail
    (128, 256, 384, "nt", "1d2d"),
    (1, 128, 256, "nt", "1d2d"),
    (16, 128, 1024, "nt", "1d2d"),     # small M, 8 K blocks (unsplit: fewer than 2 x 7 blocks)
    (16, 128, 2944, "nt", "1d2d"),     # small M, 23 K blocks: split-K in three splits of 8, 8 and 7 blocks
    (48, 208, 256, "nn", "1d2d"),      # MN-major B
    (48, 128, 256, "tn", "1d2d"),      # MN-major A and B
    (48, 128, 256, "tt", "1d2d"),      # MN-major A
    (64, 192, 320, "nt", "1d1d"),      # weight-gradient recipe, C accumulate
    (16, 128, 2048, "nt", "1d1d"),     # split-K (two splits) with accumulate
]


def test_dense_heuristic_splits_k_for_the_split_cases():
    """The cases above meant to cover split-K get a split config from the heuristic (it moves with calibration)."""
    from deep_gemm.gemm.fp8 import configs
    for k, split in [(2944, 3), (2048, 2), (1024, 1)]:
        assert configs.heuristic(configs.Fp8GemmProblem(16, 128, k, 1, "dense", 132)).split_k == split, k


@pytest.mark.parametrize("split", [2, 5, 6])
def test_split_k_reduction_any_split_count(split):
    """Forced split counts, including ones that do not divide the 12 K blocks evenly (5: 3 + 3 + 3 + 3 + 0 blocks is
    not what the heuristic would pick, the last split is empty) and more splits than the heuristic allows."""
    from deep_gemm.gemm.fp8 import configs
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    m, n, k = 16, 128, 1536
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128))
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    a0, a1, b0, b1, d = _to(*a, *b, d)
    fp8_launch._launch_dense(a0, a1, b0, b1, d, None, False, overrides=Fp8Overrides(config=configs._config(16, 64, split)))
    assert calc_diff(d.cpu(), expected) < TOL


@pytest.mark.parametrize("m,n,k,layout,kind", DENSE, ids=lambda v: str(v))
def test_dense(m, n, k, layout, kind):
    per_row_b = kind == "1d1d"
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 1 if per_row_b else 128)
    expected = oracle_gemm(*a, (1, 128), *b, (1, 128) if per_row_b else (128, 128))
    if per_row_b:
        d = torch.randn(m, n)
        expected = expected + d.double()
        c, recipe = "d", [1, 1, 128]
    else:
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        c, recipe = None, None
    a_arg, b_arg = a, b
    if layout[0] == "t":
        a_arg = (mn_major(a[0]).T, a[1].T)
    if layout[1] == "n":
        b_arg = (mn_major(b[0]).T, b[1].T)
    a0, a1, b0, b1, d = _to(*a_arg, *b_arg, d)
    run_triton(f"fp8_gemm_{layout}", a0, a1, b0, b1, d, d if c == "d" else None, recipe)
    assert calc_diff(d.cpu(), expected) < TOL


def test_dense_distinct_c_and_mn_major_sfa():
    m, n, k = 33, 128, 256
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    c = torch.randn(m, n).to(torch.bfloat16)
    sfa = torch.zeros(a[1].size(1), align(m, 4)).T[:m]  # MN-major, TMA-aligned scale layout
    sfa.copy_(a[1])
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128)) + c.double()
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    a0, sfa, b0, b1, d, c = _to(a[0], sfa, *b, d, c)
    run_triton("fp8_gemm_nt", a0, sfa, b0, b1, d, c)
    assert calc_diff(d.cpu(), expected) < TOL


def test_skip_head_mid():
    left, mid, right = 64, 32, 64
    m, n, k = 20, 256, 256
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128))
    heads = n // (left + right)
    d = torch.full((m, n + heads * mid), 7.0, dtype=torch.bfloat16)
    a0, a1, b0, b1, d = _to(*a, *b, d)
    run_triton("fp8_gemm_nt_skip_head_mid", a0, a1, b0, b1, d, [left, mid, right])
    per_head = d.cpu().view(m, heads, left + mid + right)
    got = torch.cat([per_head[:, :, :left], per_head[:, :, left + mid:]], dim=2).reshape(m, n)
    assert calc_diff(got, expected) < TOL
    assert (per_head[:, :, left:left + mid] == 7.0).all()


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("psum,zero_pad", [(False, True), (True, True), (True, False)])
def test_m_grouped_contiguous(layout, psum, zero_pad):
    ms, n, k = [100, 0, 37, 128], 192, 256
    a, b, ids, ends = contiguous_grouped_inputs(ms, n, k)
    d = torch.full((a[0].size(0), n), 5.0, dtype=torch.bfloat16)
    b_arg = b if layout == "nt" else (mn_major(b[0]).transpose(1, 2), b[1].transpose(1, 2))
    a0, a1, b0, b1, d, lay = _to(*a, *b_arg, d, ends if psum else ids)
    run_triton(f"m_grouped_fp8_gemm_{layout}_contiguous", a0, a1, b0, b1, d, lay, None, None, None, "nk", False,
               psum, zero_pad)
    d = d.cpu()
    for g in range(len(ms)):
        rows = (ids == g).nonzero().flatten()
        if rows.numel():
            expected = oracle_gemm(a[0][rows], a[1][rows], (1, 128), b[0][g], b[1][g], (128, 128))
            assert calc_diff(d[rows], expected) < TOL
    pad = ids == -1
    assert (d[pad] == (5.0 if psum and not zero_pad else 0.0)).all()


def test_masked_leaves_rows_beyond_mask_untouched():
    num_groups, max_m, n, k = 3, 96, 128, 256
    masked = torch.tensor([0, 17, 96], dtype=torch.int32)
    a = quantize_groups(torch.randn(num_groups, max_m, k), 1)
    b = quantize_groups(torch.randn(num_groups, n, k), 128)
    d = torch.full((num_groups, max_m, n), float("nan"), dtype=torch.bfloat16)
    a0, a1, b0, b1, d, mm = _to(*a, *b, d, masked)
    run_triton("m_grouped_fp8_gemm_nt_masked", a0, a1, b0, b1, d, mm, 32)
    d = d.cpu()
    for g in range(num_groups):
        m = int(masked[g])
        if m:
            expected = oracle_gemm(a[0][g, :m], a[1][g, :m], (1, 128), b[0][g], b[1][g], (128, 128))
            assert calc_diff(d[g, :m], expected) < TOL
        assert d[g, m:].isnan().all()


@pytest.mark.parametrize("layout", ["nt", "tn"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_k_grouped(layout, accumulate):
    ks, m, n = [256, 0, 128, 384], 48, 80
    a, b, qa, qb = k_grouped_inputs(layout, ks, m, n)
    d = torch.randn(len(ks), m, n)
    before = d.clone()
    c = d.clone() if accumulate else None
    a0, a1, b0, b1, d, lay, c = _to(*a, *b, d, torch.tensor(ks, dtype=torch.int32), c)
    run_triton(f"k_grouped_fp8_gemm_{layout}_contiguous", a0, a1, b0, b1, d, ks, lay, c)
    d = d.cpu()
    for g, kg in enumerate(ks):
        expected = before[g].double() if accumulate else torch.zeros(m, n, dtype=torch.float64)
        if kg:
            expected = expected + oracle_gemm(*qa[g], (1, 128), *qb[g], (1, 128))
        assert calc_diff(d[g], expected) < TOL


@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_k_grouped_uniform_tiles_reach_the_warp_specialised_kernel(layout, monkeypatch):
    """The plan's uniform flag (Fp8Overrides.uniform_tiles on a K-grouped call) is the WS kernel's UNIFORM, and is
    in the compiled kernel's key. (The launch itself is faked: the Gluon kernel does not run in the interpreter.)"""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    launches = []

    def fake_launch(kernel, grid, args, *, config_key, **kwargs):
        launches.append((dict(zip(kernel.arg_names, args)), config_key))
    monkeypatch.setattr(fp8_launch, "launch", fake_launch)
    monkeypatch.setattr(fp8_launch, "interpreting", lambda: False)
    ks, m, n = [256, 0, 128, 384], 256, 512
    a, b, _, _ = k_grouped_inputs(layout, ks, m, n)
    d = torch.zeros(len(ks), m, n)
    op = getattr(fp8_launch, f"k_grouped_fp8_gemm_{layout}_contiguous")
    for uniform, expected in ((None, fp8_plan.UNIFORM_K_GROUPED), (True, True), (False, False)):
        launches.clear()
        over = fp8_plan.Fp8Overrides(uniform_tiles=uniform, regs=(232, 40), ws_mode="on")
        op(*a, *b, d, ks, torch.tensor(ks, dtype=torch.int32), d.clone(), None, None, False, overrides=over)
        (args, key), = launches
        assert args["GROUPING"] == fp8_plan.GROUPING["k_grouped"]
        assert args["UNIFORM"] == expected and key[-3] == expected  # (the key ends: uniform, stagger, registers)
