"""FP8 GEMM Triton kernels on the GPU: DeepSeek shapes and odd shapes against the fp32 reference, CUDA-graph capture
and replay, torch.compile through the ops, and first-time compilation from 8 threads. Skipped without CUDA."""

from __future__ import annotations

import random
import threading

import pytest
import torch

import deep_gemm
from deep_gemm.common.operands import dequantize
from deep_gemm.core.plans import PlanCache
from deep_gemm.testing import calc_diff
from deep_gemm.utils import align, per_block_cast_to_fp8, per_token_cast_to_fp8

from tolerances import TOLERANCES
from triton_harness import run_forced
from fp8_inputs import k_grouped_inputs

pytestmark = pytest.mark.gpu
TOL = TOLERANCES["kernel_fp8"]

DEEPSEEK_NK = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
ODD = [(1, 128, 128), (37, 200, 208), (37, 4096, 7168), (129, 1000, 384), (4095, 2112, 7168), (256, 576, 128)]


def _operands(m, n, k, per_row_b=False):
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    bf = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = per_token_cast_to_fp8(bf, use_ue8m0=False) if per_row_b else per_block_cast_to_fp8(bf, use_ue8m0=False)
    return a, b


def _ws(**fields):
    """Overrides forcing the warp-specialised kernel (where legal) with the given variant fields."""
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    return Fp8Overrides(ws_mode="on", **fields)


def _forced_config(block_m, block_n, split_k, **fields):
    """Overrides forcing a tile config (and any other plan field)."""
    from deep_gemm.gemm.fp8 import configs as fp8_configs
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    return Fp8Overrides(config=fp8_configs._config(block_m, block_n, split_k), **fields)


def _gemm(a, b, d, c=None, recipe=None, overrides=None):
    """deep_gemm.fp8_gemm_nt, or (overrides given) its CUDA path with forced plan choices (run_forced)."""
    if overrides is None:
        deep_gemm.fp8_gemm_nt(a, b, d, c=c, recipe=recipe)
    else:
        run_forced("fp8_gemm_nt", a[0], a[1], b[0], b[1], d, c, list(recipe) if recipe else None,
                   overrides=overrides)


def _ref(a, b, gran_b=(128, 128)):
    torch.backends.cuda.matmul.allow_tf32 = False
    return dequantize(a[0], a[1], (1, 128)) @ dequantize(b[0], b[1], gran_b).T


def _grouped_b(g, n, k, device="cuda"):
    """g experts' [N, K] FP8 weights with 128x128 block scales, stacked: ([G, N, K], [G, N/128, K/128])."""
    bq = [per_block_cast_to_fp8(torch.randn(n, k, device=device, dtype=torch.bfloat16), use_ue8m0=False)
          for _ in range(g)]
    return torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq])


def _masked_a(g, max_m, k, device="cuda"):
    """Masked-layout activations [G, Mmax, K] with per-token scales [G, Mmax, K/128]."""
    a = per_token_cast_to_fp8(torch.randn(g * max_m, k, device=device, dtype=torch.bfloat16), use_ue8m0=False)
    return a[0].view(g, max_m, k), a[1].view(g, max_m, -1)


def _check_masked(a, b, d, masked):
    """Each group's valid rows against the reference; rows past them untouched as far as the spec promises."""
    for i, m in enumerate(masked):
        if m:
            assert calc_diff(d[i, :m], _ref((a[0][i, :m], a[1][i, :m]), (b[0][i], b[1][i]))) < TOL
        _assert_untouched_past_masked(d[i], m)


def test_backend_is_triton():
    assert deep_gemm.backends()["fp8_gemm_nt"].startswith("triton")


@pytest.mark.parametrize("m", [1, 128, 4096])
@pytest.mark.parametrize("n,k", DEEPSEEK_NK)
def test_dense_deepseek_shapes(m, n, k):
    a, b = _operands(m, n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, d)
    assert calc_diff(d, _ref(a, b)) < TOL


@pytest.mark.parametrize("n,k", [(2112, 7168), (576, 7168), (4096, 7168)])
def test_deterministic_mode_is_batch_invariant(n, k):
    """use_deterministic_algorithms(True): a row's result is the same bits whatever the batch (M = 1 and M = 100
    would split K by default); one row against the same row in 1, 100 and 4096-row batches."""
    a, b = _operands(4096, n, k)
    before = deep_gemm.get_deterministic_algorithms()
    deep_gemm.use_deterministic_algorithms(True)
    try:
        rows = {}
        for m in (1, 100, 4096):
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            deep_gemm.fp8_gemm_nt((a[0][:m], a[1][:m]), b, d)
            rows[m] = d[:1].clone()
    finally:
        deep_gemm.use_deterministic_algorithms(before)
    assert calc_diff(rows[1], _ref((a[0][:1], a[1][:1]), b)) < TOL
    for m in (100, 4096):
        assert torch.equal(rows[1].view(torch.int16), rows[m].view(torch.int16)), f"row 0 differs at M = {m}"


@pytest.mark.parametrize("m,n,k", [(1, 2112, 7168), (128, 576, 7168), (4096, 4096, 512), (37, 200, 208)])
def test_repeated_calls_replay_the_launch_plan(m, n, k):
    """After the first call of a shape, calls replay its recorded launch (the host fast path) with new tensors:
    split-K workspaces, both kernels, fresh data every time."""
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    for _ in range(3):
        a, b = _operands(m, n, k)
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt(a, b, d)
        assert calc_diff(d, _ref(a, b)) < TOL
    assert any(key[0] == "nt" for key in fp8_launch.PLANS)


@pytest.mark.parametrize("m,n,k", ODD)
def test_dense_odd_shapes(m, n, k):
    a, b = _operands(m, n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, d)
    assert calc_diff(d, _ref(a, b)) < TOL


WS_VARIANTS = [dict(waves=1, stages=6), dict(waves=2, stages=4), dict(waves=2, stages=3),
               dict(waves=2, wave_n=True, stages=4), dict(waves=2, wave_n=True, narrow=64, stages=4),
               dict(waves=2, wave_n=True, narrow=16), dict(waves=2, wave_n=True, narrow=32)]


@pytest.mark.parametrize("variant", WS_VARIANTS)
@pytest.mark.parametrize("m,n,k", [(1, 128, 128), (129, 200, 208), (300, 576, 7168), (511, 4096, 1536),
                                   (4096, 2112, 7168), (4096, 7168, 2048), (4000, 448, 208), (8000, 200, 256),
                                   (300, 256, 1024)])
def test_dense_warp_specialised_variants(variant, m, n, k):
    """Each variant of the warp-specialised kernel (one or two waves per warpgroup, along M or N, 128 x 192 split
    tiles, ring depth), forced where legal for the heuristic's config (else the one-wave kernel runs), on partial
    tiles in M, N and K and on DeepSeek shapes. Split tiles: N=576 and 448 have tiles starting mid-block (narrow
    wave first), 448 a wide wave partly and a narrow wave wholly past N, 256 a wide wave wholly past N. Tail tiles
    (narrow 16 / 32, where tail_narrow gives that width; 128 + 64 elsewhere): N=576 as 4 x (128 + 16) columns,
    N=448 as 3 x (128 + 32) with the last narrow wave wholly past N."""
    a, b = _operands(m, n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    _gemm(a, b, d, overrides=_ws(**variant))
    assert calc_diff(d, _ref(a, b)) < TOL


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 1024), (300, 640, 7168)])
def test_register_budgets_give_identical_results(monkeypatch, m, n, k):
    """The two-wave kernel built with each register budget ws_register_budget may choose computes the same bits
    (a budget moves values between registers and local memory, not the arithmetic), matching the reference."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    outs = []
    for regs in fp8_plan.WS_REGISTER_BUDGETS:
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        _gemm(a, b, d, overrides=_ws(waves=2, wave_n=True, regs=regs))
        outs.append(d)
    assert len(calls) == len(outs)
    assert calc_diff(outs[0], _ref(a, b)) < TOL
    assert all(torch.equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize("bn", [64, 128])
@pytest.mark.parametrize("m,n,k", [(1, 128, 128), (129, 200, 208), (300, 576, 7168), (128, 4096, 1536)])
def test_one_wave_staged_scales_match_global_loads(monkeypatch, bn, m, n, k):
    """The one-wave kernel's scales staged in shared memory by the producer give bit-identical results to the
    consumers' global loads (same values, same promotion order), at partial tiles in M, N and K; and match the
    reference."""
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    outs = []
    for staged in ((bn,), ()):
        d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        _gemm(a, b, d, overrides=_forced_config(128, bn, 1, ws_mode="on", waves=1, staged_scales_bn=staged))
        outs.append(d)
    assert len(calls) == 2
    assert torch.equal(outs[0], outs[1])
    assert calc_diff(outs[0], _ref(a, b)) < TOL


@pytest.mark.parametrize("layout", ["nn", "tn", "tt"])
def test_mn_major_layouts(layout):
    m, n, k = 256, 512, 1024
    a, b = _operands(m, n, k)
    expected = _ref(a, b)
    a_arg = (a[0].T.contiguous(), a[1].T) if layout[0] == "t" else a
    b_arg = (b[0].T.contiguous(), b[1].T) if layout[1] == "n" else b
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    getattr(deep_gemm, f"fp8_gemm_{layout}")(a_arg, b_arg, d)
    assert calc_diff(d, expected) < TOL


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 7168), (2112, 4096, 7168), (64, 256, 1024)])
def test_1d1d_accumulate(m, n, k):
    a, b = _operands(m, n, k, per_row_b=True)
    d = torch.randn(m, n, device="cuda")
    expected = _ref(a, b, (1, 128)) + d
    deep_gemm.fp8_gemm_nt(a, b, d, c=d, recipe=(1, 1, 128))
    assert calc_diff(d, expected) < TOL


@pytest.mark.parametrize("m,n,k,tail", [(2112, 4096, 1024, 64), (2100, 4096, 384, 52), (2176, 4096, 256, 128),
                                        (2048, 4096, 256, 0)])
def test_1d1d_last_row_block_runs_on_its_own(monkeypatch, m, n, k, tail):
    """1D1D whose last 128-row block alone spills its 128 x 256 tiles into another round of SMs: those rows run as
    a second launch (fp8_plan.row_tail), accumulating into C = D and into another C, twice each (a call of two launches
    records no plan, so both calls take the launcher's path; without a tail the second call replays a plan)."""
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    monkeypatch.setattr(fp8_launch, "PLANS", PlanCache())
    monkeypatch.setattr(fp8_launch, "usable_sms", lambda: 132)  # (the tail rule's arithmetic assumes the H200's SMs)
    rows = []
    real_execute = fp8_launch._execute
    monkeypatch.setattr(fp8_launch, "_execute",
                        lambda p, call, **kw: rows.append(call.m) or real_execute(p, call, **kw))
    a, b = _operands(m, n, k, per_row_b=True)
    product = _ref(a, b, (1, 128))
    for c_kind in ("d", "other"):
        for _ in range(2):
            c = torch.randn(m, n, device="cuda")
            want = product + c
            d = c if c_kind == "d" else torch.full((m, n), float("nan"), device="cuda")
            deep_gemm.fp8_gemm_nt(a, b, d, c=c, recipe=(1, 1, 128))
            assert calc_diff(d, want) < TOL
    assert rows[:2 if tail else 1] == ([tail, m - tail] if tail else [m]), rows


def _spy_ws_launches(monkeypatch):
    """The list of the warp-specialised launcher's calls from here on (it still launches); plans recorded before
    are dropped (a replayed plan would launch unspied)."""
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    monkeypatch.setattr(fp8_launch, "PLANS", PlanCache())
    calls, run_ws = [], fp8_launch._execute_ws

    def counted(*args, **kwargs):
        calls.append(args)
        return run_ws(*args, **kwargs)
    monkeypatch.setattr(fp8_launch, "_execute_ws", counted)
    return calls


# The warp-specialised kernel's 128 x 256 two-wave tiles (the 128 x 128 config whose waves go along N).
WS_128X256 = dict(block_m=128, block_n=128, split_k=1, ws_mode="on", waves=2, wave_n=True)


def _ws_128x256():
    fields = dict(WS_128X256)
    return _forced_config(fields.pop("block_m"), fields.pop("block_n"), fields.pop("split_k"), **fields)


@pytest.mark.parametrize("bn,split", [(64, 2), (64, 5), (128, 3), (128, 4)])
@pytest.mark.parametrize("m,n,k", [(1, 200, 2944), (37, 4096, 7168), (128, 2112, 7168), (100, 576, 1536)])
def test_warp_specialised_split_k(monkeypatch, bn, split, m, n, k):
    """Split-K on the warp-specialised one-wave kernel (forced 128 x BN split configs): rows past M, N tails, uneven
    splits (23 K blocks in 5: 5 + 5 + 5 + 5 + 3); right against the reference, and bit-identical when repeated
    (the last split sums the partials in split order)."""
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    outs = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    for d in outs:
        _gemm(a, b, d, overrides=_forced_config(128, bn, split))
    torch.cuda.synchronize()
    assert calls, "the warp-specialised kernel did not run"
    assert calc_diff(outs[0], _ref(a, b)) < TOL
    assert all(torch.equal(outs[0], d) for d in outs[1:])


@pytest.mark.parametrize("m,n,k,ws", [(128, 24576, 1536, True), (128, 32768, 512, True), (100, 16704, 384, True),
                                      (65, 17000, 256, True), (64, 32768, 512, False), (128, 7168, 2048, False)])
def test_wide_small_m_on_two_wave_tiles(monkeypatch, m, n, k, ws):
    """64 < M <= 128 problems wide enough for 128 x 256 tiles run the warp-specialised kernel's two-wave tiles
    (rows past M masked, N tails partly and wholly past N); the rest stay on the tl.* kernel."""
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, d)
    assert calc_diff(d, _ref(a, b)) < TOL
    assert len(calls) == (1 if ws else 0)


@pytest.mark.parametrize("c_kind", ["d", "other", "none"])
@pytest.mark.parametrize("m,n,k", [(129, 256, 208), (300, 448, 1024), (1000, 320, 7168), (257, 1024, 144),
                                   (2112, 4096, 7168)])
def test_1d1d_warp_specialised(monkeypatch, c_kind, m, n, k):
    """1D1D on the two-wave kernel (per-column B scales staged in shared memory by the producer, C's slabs loaded
    by TMA), forced on partial tiles: M, N (a second wave partly (448) or wholly (320) past N), K (144: a nearly
    empty last block); C = D (the weight-gradient case), C another tensor, no C."""
    ran = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k, per_row_b=True)
    expected = _ref(a, b, (1, 128))
    for _ in range(2):  # the second call replays the recorded launch
        d = torch.full((m, n), float("nan"), device="cuda")
        kwargs = dict(recipe=(1, 1, 128))
        if c_kind != "none":
            c = torch.randn(m, n, device="cuda")
            want = expected + c
            if c_kind == "d":
                d.copy_(c)
                c = d
            kwargs["c"] = c
        else:
            want = expected
        _gemm(a, b, d, **kwargs, overrides=_ws_128x256())
        assert calc_diff(d, want) < TOL
    assert ran, "the warp-specialised kernel did not run"


@pytest.mark.parametrize("m,n,k", [(300, 448, 1024), (2112, 4096, 7168)])
def test_1d2d_accumulate_warp_specialised(monkeypatch, m, n, k):
    """1D2D with C = D (BF16) on the two-wave kernel: C arrives by TMA, so two waves fit (through pointers they
    would not: the launcher then takes one wave)."""
    ran = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    c = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    want = _ref(a, b) + c.float()
    _gemm(a, b, c, c=c, overrides=_ws_128x256())
    assert calc_diff(c, want) < TOL
    assert ran


def _contiguous(ms, n, k, alignment=128):
    starts, ends, start = [], [], 0
    for mg in ms:
        starts.append(start)
        ends.append(start + mg)
        start = align(start + mg, alignment)
    m = start
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b = _grouped_b(len(ms), n, k)
    ids = torch.full((m,), -1, dtype=torch.int32, device="cuda")
    for g, (s, e) in enumerate(zip(starts, ends)):
        ids[s:e] = g
    return a, b, ids, torch.tensor(ends, dtype=torch.int32, device="cuda"), starts, ends


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("n,k", [(4096, 7168), (576, 2048)])
def test_m_grouped_contiguous_with_empty_groups(psum, n, k):
    _check_contiguous([3000, 0, 129, 1, 4096], n, k, psum)


def _check_contiguous(ms, n, k, psum, overrides=None):
    """Every group's rows against the reference, padding (-1) rows written as zeros."""
    a, b, ids, ends, starts, stops = _contiguous(ms, n, k)
    d = torch.full((a[0].size(0), n), float("nan"), device="cuda", dtype=torch.bfloat16)
    if overrides is None:
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, ends if psum else ids, use_psum_layout=psum)
    else:
        run_forced("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, ends if psum else ids,
                   use_psum_layout=psum, overrides=overrides)
    for g, (s, e) in enumerate(zip(starts, stops)):
        if e > s:
            assert calc_diff(d[s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g]))) < TOL
    assert (d[ids == -1] == 0).all()


@pytest.mark.parametrize("variant", [dict(waves=1, stages=5), dict(waves=2, wave_n=True, stages=4),
                                     dict(waves=2, wave_n=True, stages=3), dict(waves=2, wave_n=True, narrow=64),
                                     dict(waves=2, wave_n=True, narrow=16), dict(waves=2, wave_n=True, narrow=32)])
@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("n,k", [(4096, 7168), (576, 2048), (448, 208), (200, 208)])
def test_m_grouped_contiguous_warp_specialised_variants(variant, psum, n, k):
    """The grouped layouts through each warp-specialised variant, forced where legal: -1 rows zeroed, empty groups,
    a last N tile whose second wave is entirely past N (576) or partly (448); tail tiles at N=576 (128 + 16) and
    448 (128 + 32); N=200 gets 64-wide tiles, where waves along N are not legal and the one-wave kernel runs."""
    _check_contiguous([3000, 0, 129, 1, 700], n, k, psum, overrides=_ws(**variant))


@pytest.mark.parametrize("g,m_per,n,k", [(32, 20, 7168, 3072), (6, 1024, 4096, 4096), (4, 0, 512, 256)])
def test_masked(g, m_per, n, k):
    random.seed(1)
    max_m = 1024 if m_per else 64
    masked = [min(max_m, int(m_per * random.uniform(0.7, 1.3))) for _ in range(g)]
    masked[0] = 0
    a, b = _masked_a(g, max_m, k), _grouped_b(g, n, k)
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    mm = torch.tensor(masked, dtype=torch.int32, device="cuda")
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, expected_m=max(1, m_per))
    _check_masked(a, b, d, masked)


def _assert_untouched_past_masked(d_group, m):
    """Rows past masked_m are unspecified (spec; DeepGEMM stores whole tiles): the warp-specialised kernel may
    TMA-store the rest of the 64-row slab holding row m-1, but nothing past that slab."""
    assert d_group[align(m, 64):].isnan().all()


@pytest.mark.parametrize("variant", [dict(waves=2, wave_n=True), dict(waves=1, stages=5)])
@pytest.mark.parametrize("g,m_per,max_m,n,k", [(8, 192, 1024, 512, 1024), (4, 100, 192, 448, 256),
                                               (3, 300, 384, 7168, 2048)])
def test_masked_warp_specialised(variant, g, m_per, max_m, n, k):
    """Masked layouts through the warp-specialised kernel, forced: TMA stores when Mmax is a multiple of 128
    (1024, 384), pointer stores otherwise (192); an empty group, a group filling Mmax, partial last N tiles."""
    random.seed(2)
    masked = [min(max_m, int(m_per * random.uniform(0.7, 1.3))) for _ in range(g)]
    masked[0], masked[-1] = 0, max_m
    a, b = _masked_a(g, max_m, k), _grouped_b(g, n, k)
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    mm = torch.tensor(masked, dtype=torch.int32, device="cuda")
    run_forced("m_grouped_fp8_gemm_nt_masked", a[0], a[1], b[0], b[1], d, mm, m_per, overrides=_ws(**variant))
    _check_masked(a, b, d, masked)


# More than 2^31 output elements: 72 groups x 4160 rows x 8192 columns (4.9 GB of D), so the last groups' offsets
# (group x stride) pass int32. Only two groups have rows: the launch stays cheap, and the check covers the group
# whose every row lies past 2^31 elements. Mmax 4160 is not a multiple of 128: the warp-specialised kernel stores
# through pointers, the path whose offsets are formed in 64 bits.
@pytest.mark.parametrize("overrides", [None, "tl", "ws"])
def test_masked_output_past_int32_offsets(overrides):
    g, max_m, n, k = 72, 4160, 8192, 128
    assert (g - 1) * max_m * n > 2 ** 31
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    over = {None: None, "tl": Fp8Overrides(ws_mode="off"), "ws": _ws(d_tma=False)}[overrides]
    masked = [0] * g
    masked[g - 2], masked[g - 1] = 129, max_m
    a, b = _masked_a(g, max_m, k), _grouped_b(g, n, k)
    d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    mm = torch.tensor(masked, dtype=torch.int32, device="cuda")
    if over is None:
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, expected_m=max_m)
    else:
        run_forced("m_grouped_fp8_gemm_nt_masked", a[0], a[1], b[0], b[1], d, mm, max_m, overrides=over)
    torch.cuda.synchronize()
    for i in (g - 2, g - 1):
        m = masked[i]
        assert calc_diff(d[i, :m], _ref((a[0][i, :m], a[1][i, :m]), (b[0][i], b[1][i]))) < TOL, i
        _assert_untouched_past_masked(d[i], m)
    assert d[: g - 2].isnan().all(), "groups without rows are untouched"


@pytest.mark.parametrize("layout", ["nt", "tn"])
@pytest.mark.parametrize("m,n,ks", [(512, 768, [1024, 0, 384, 2048]), (256, 208, [0, 128, 0, 640, 0]),
                                    (128, 112, [384, 0]), (320, 768, [256, 0, 512])])
def test_k_grouped(monkeypatch, layout, m, n, ks):
    """Every group against the reference, empty groups (first, middle, last) left at C. M a multiple of 128 runs
    the warp-specialised two-wave kernel (N=208: the second wave of the last tile partly past N, N=112 wholly),
    M=320 the tl.* one."""
    calls = _spy_ws_launches(monkeypatch)
    qa, qb = [], []
    for kg in ks:
        x = torch.randn(kg, m, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(kg, n, device="cuda", dtype=torch.bfloat16)
        qa.append(per_token_cast_to_fp8(x.T.contiguous(), use_ue8m0=False) if kg else None)
        qb.append(per_token_cast_to_fp8(y.T.contiguous(), use_ue8m0=False) if kg else None)
    live = [i for i, kg in enumerate(ks) if kg]
    if layout == "nt":
        a = (torch.cat([qa[i][0].flatten() for i in live]), torch.cat([qa[i][1] for i in live], dim=1))
        b = (torch.cat([qb[i][0].flatten() for i in live]), torch.cat([qb[i][1] for i in live], dim=1))
    else:
        a = (torch.cat([qa[i][0].T for i in live]).contiguous(), torch.cat([qa[i][1].T for i in live]).contiguous())
        b = (torch.cat([qb[i][0].T for i in live]).contiguous(), torch.cat([qb[i][1].T for i in live]).contiguous())
    d = torch.randn(len(ks), m, n, device="cuda")
    before = d.clone()
    fn = getattr(deep_gemm, f"k_grouped_fp8_gemm_{layout}_contiguous")
    fn(a, b, d, ks, torch.tensor(ks, dtype=torch.int32, device="cuda"), c=d)
    for i, kg in enumerate(ks):
        expected = before[i] + (_ref(qa[i], qb[i], (1, 128)) if kg else 0)
        assert calc_diff(d[i], expected) < TOL
    assert bool(calls) == (m % 128 == 0)


@pytest.mark.parametrize("m,n,k,ws", [(64, 576, 7168, False), (128, 1024, 7168, True)])
def test_split_k_calls_on_concurrent_streams(monkeypatch, m, n, k, ws):
    """Split-K launches of one shape on two streams at once: each stream's split-K arrival counters are its own (a
    shared counter lets one launch's splits count as another's, so a tile is reduced before all its partials
    exist). 64x576x7168 splits K four ways on 36 programs of the tl.* kernel; 128x1024x7168 runs forced 128 x 64
    split-4 tiles on the warp-specialised kernel, 64 CTAs. Either way two launches fit on the GPU side by side; a
    GPU-side sleep at the head of both streams lets every launch queue up first (the host is slower than these
    kernels)."""
    from deep_gemm.gemm.fp8 import configs as fp8_configs
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    rounds = 24
    overrides = None
    if ws:
        overrides = _forced_config(128, 64, 4)
        calls = _spy_ws_launches(monkeypatch)
    else:
        problem = fp8_configs.Fp8GemmProblem(m, n, k, 1, "dense", fp8_launch.usable_sms())
        assert fp8_configs.heuristic(problem).split_k > 1
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    inputs = [_operands(m, n, k) for _ in streams]
    outs = [[torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(rounds)]
            for _ in streams]
    for s, (a, b), d in zip(streams, inputs, outs):  # compile and record plans outside the race
        with torch.cuda.stream(s):
            _gemm(a, b, d[0], overrides=overrides)
    torch.cuda.synchronize()
    for s in streams:  # hold both streams back until every launch is queued, so their kernels overlap
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)
    for i in range(rounds):
        for s, (a, b), d in zip(streams, inputs, outs):
            with torch.cuda.stream(s):
                _gemm(a, b, d[i], overrides=overrides)
    torch.cuda.synchronize()
    for (a, b), d in zip(inputs, outs):
        ref = _ref(a, b)
        bad = [i for i in range(rounds) if not calc_diff(d[i], ref) < TOL]
        assert not bad, f"rounds with a wrong result: {bad}"
    if ws:
        assert calls, "the warp-specialised kernel did not run"


@pytest.mark.parametrize("m,n,k,ws", [(128, 2112, 7168, True), (128, 4096, 7168, True), (128, 7168, 16384, True),
                                      (100, 4096, 7168, True), (1, 576, 7168, False), (37, 4096, 7168, False)])
def test_split_k_results_are_bitwise_repeatable(monkeypatch, m, n, k, ws):
    """Whichever split arrives last reduces the tile, but the sum runs in split order, so repeated calls give
    bit-identical results; and the reduction is right against the reference. The heuristic's own configs: 128-row
    split tiles on the warp-specialised kernel for 64 < M <= 128 (``ws``), the tl.* kernel's below."""
    from deep_gemm.gemm.fp8 import configs as fp8_configs
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    a, b = _operands(m, n, k)
    outs = [torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(16)]
    problem = fp8_plan.tile_problem(fp8_launch.dense_call(m, n, k, outs[0], None, False))
    assert problem.one_wave_split_k
    assert fp8_configs.heuristic(problem).split_k > 1
    calls = _spy_ws_launches(monkeypatch)
    for d in outs:
        deep_gemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    assert bool(calls) == ws
    assert calc_diff(outs[0], _ref(a, b)) < TOL
    assert all(torch.equal(outs[0], d) for d in outs[1:])


@pytest.mark.parametrize("m", [64, 128])
def test_cuda_graph_capture_and_replay(m):
    """Capture and replay of a split-K call: m x 4096 x 7168 runs 64-row split tiles on the tl.* kernel (m = 64) or
    128 x 64 split-2 tiles on the warp-specialised kernel (m = 128). The arrival counters persist across replays
    (zero at rest) and the workspace is captured with the graph: replays match the eager call bit for bit, and new
    inputs copied into the captured buffers change the result as an eager call would."""
    a, b = _operands(m, 4096, 7168)
    d = torch.empty(m, 4096, device="cuda", dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, d)  # compile outside the capture
    eager = d.clone()
    assert calc_diff(eager, _ref(a, b)) < TOL
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.fp8_gemm_nt(a, b, d)
    for _ in range(3):
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(d, eager)
    a2, _ = _operands(m, 4096, 7168)
    a[0].copy_(a2[0])
    a[1].copy_(a2[1])
    graph.replay()
    expected = torch.empty_like(d)
    deep_gemm.fp8_gemm_nt(a, b, expected)
    assert torch.equal(d, expected)


@pytest.mark.parametrize("m,n,k,ws", [(64, 576, 7168, False), (128, 1024, 7168, True)])
def test_split_k_graphs_captured_on_one_stream_replay_concurrently(monkeypatch, m, n, k, ws):
    """Two CUDA graphs captured on the same stream, each holding split-K calls, replayed at the same time on two
    streams: every captured launch has split-K counters of its own (with the capture stream's shared counters one
    graph's splits could count as the other's). Split-K on the tl.* kernel (64x576x7168) and on the
    warp-specialised kernel (forced 128 x 64 split-4 tiles); replays match the eager calls bit for bit."""
    calls, overrides = None, None
    if ws:
        overrides = _forced_config(128, 64, 4)
        calls = _spy_ws_launches(monkeypatch)
    rounds = 8
    inputs = [_operands(m, n, k) for _ in range(2)]
    outs = [[torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(rounds)] for _ in inputs]
    eager = []
    for (a, b), d in zip(inputs, outs):  # compile (and record plans) outside the capture
        _gemm(a, b, d[0], overrides=overrides)
        eager.append(d[0].clone())
    capture_stream = torch.cuda.Stream()
    graphs = [torch.cuda.CUDAGraph() for _ in inputs]
    for g, (a, b), d in zip(graphs, inputs, outs):
        with torch.cuda.graph(g, stream=capture_stream):
            for i in range(rounds):
                _gemm(a, b, d[i], overrides=overrides)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for _ in range(10):  # (with shared counters 28 % of the calls came out wrong, H200)
        for d in outs:
            for x in d:
                x.fill_(float("nan"))
        torch.cuda.synchronize()
        for s in streams:  # hold both streams back until both replays are queued, so their kernels overlap
            with torch.cuda.stream(s):
                torch.cuda._sleep(20_000_000)
        for s, g in zip(streams, graphs):
            with torch.cuda.stream(s):
                g.replay()
        torch.cuda.synchronize()
        for d, e in zip(outs, eager):
            bad = [i for i in range(rounds) if not torch.equal(d[i], e)]
            assert not bad, f"calls with a wrong result: {bad}"
    if ws:
        assert calls, "the warp-specialised kernel did not run"


def test_masked_cuda_graph_reads_masked_m_on_device():
    g, max_m, n, k = 4, 128, 512, 256
    a, b = _masked_a(g, max_m, k), _grouped_b(g, n, k)
    mm = torch.tensor([5, 0, 128, 77], dtype=torch.int32, device="cuda")
    d = torch.zeros(g, max_m, n, device="cuda", dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 64)
    mm.copy_(torch.tensor([128, 3, 0, 1], dtype=torch.int32))
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check_masked(a, b, d, [128, 3, 0, 1])


def test_torch_compile_fullgraph():
    a, b = _operands(256, 1024, 512)

    def block(x_fp8, x_sf, w_fp8, w_sf):
        d = torch.empty(x_fp8.size(0), w_fp8.size(0), device="cuda", dtype=torch.bfloat16)
        torch.ops.deep_gemm.fp8_gemm_nt(x_fp8, x_sf, w_fp8, w_sf, d)
        return d.float().relu()

    compiled = torch.compile(block, fullgraph=True)
    got = compiled(a[0], a[1], b[0], b[1])
    assert calc_diff(got, _ref(a, b).relu()) < TOL


def test_concurrent_first_compilation_from_threads():
    deep_gemm.get_jit().clear()
    shapes = [(64 * (i + 1), 256 * (i % 3 + 1), 128 * (i % 4 + 1)) for i in range(8)]
    inputs = [_operands(*s) for s in shapes]
    outs = [torch.empty(s[0], s[1], device="cuda", dtype=torch.bfloat16) for s in shapes]
    errors = []
    barrier = threading.Barrier(len(shapes))

    def work(i):
        try:
            barrier.wait()
            for _ in range(3):
                deep_gemm.fp8_gemm_nt(inputs[i][0], inputs[i][1], outs[i])
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(shapes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    for (a, b), d in zip(inputs, outs):
        assert calc_diff(d, _ref(a, b)) < TOL


@pytest.mark.parametrize("shape", [(1, 1), (37, 200), (4096, 7168), (130, 64), (3, 129, 300), (2, 0, 64)])
def test_mn_major_operand_copy_is_bit_exact(shape):
    """The coalesced MN-major -> K-major copy (kernels/transpose.py) against torch's, bit for bit, on every FP8
    bit pattern the random bytes hit (NaNs included), partial 64 x 64 tiles and an empty batch."""
    from deep_gemm.gemm.fp8.launch import _k_major
    y = torch.randint(0, 256, (*shape[:-2], shape[-1], shape[-2]), dtype=torch.uint8, device="cuda")
    x = y.view(torch.float8_e4m3fn).transpose(-1, -2)  # MN-major: the last dim strided
    out = _k_major(x)
    assert out.is_contiguous() and out.shape == x.shape and out.dtype == x.dtype
    assert torch.equal(out.view(torch.uint8), x.contiguous().view(torch.uint8))


@pytest.mark.parametrize("zero_pad", [True, False])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("ms,extra_rows,expected_m,n,k", [
    ([3000, 0, 129, 1, 700], 0, None, 4096, 1024),  # prefill: empty group, 1-row group, 128-row tails
    ([20, 25, 0, 17, 31, 1, 64], 4096, 24, 7168, 512),  # decode form: A holds far more rows than the groups use
    ([130, 1, 256, 0], 300, 128, 576, 384),  # N = 576 (split / tail tiles), rows after the last group
])
def test_m_grouped_psum_tiles_stay_inside_their_groups(monkeypatch, zero_pad, layout, ms, extra_rows, expected_m,
                                                       n, k):
    """The psum layout on the warp-specialised kernel, its tiles enumerated per group on the device: every group's
    rows right; each group's padding rows zeros with ensure_zero_padding, zeros or untouched without; rows after
    the last group's padded end never written (the decode form's A has thousands of them); no host sync (the
    call is captured in a CUDA graph and replayed with new group ends)."""
    calls = _spy_ws_launches(monkeypatch)
    a, b, ids, ends, starts, stops = _contiguous(ms, n, k)
    used = a[0].size(0)
    if extra_rows:  # A and D grow past the last group's padded end
        more = per_token_cast_to_fp8(torch.randn(extra_rows, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
        a = (torch.cat([a[0], more[0]]), torch.cat([a[1], more[1]]))
    d = torch.full((a[0].size(0), n), float("nan"), device="cuda", dtype=torch.bfloat16)
    b_arg = b if layout == "nt" else (b[0].transpose(1, 2).contiguous(), b[1].transpose(1, 2))  # [G, K, N]
    kwargs = dict(use_psum_layout=True, ensure_zero_padding=zero_pad)
    if expected_m is not None and layout == "nt":
        kwargs["expected_m_for_psum_layout"] = expected_m
    fn = getattr(deep_gemm, f"m_grouped_fp8_gemm_{layout}_contiguous")
    fn(a, b_arg, d, ends, **kwargs)
    assert calls, "the warp-specialised kernel did not run"

    def check(d, starts, stops):
        for g, (s, e) in enumerate(zip(starts, stops)):
            if e > s:
                assert calc_diff(d[s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g]))) < TOL
            pad = d[e:align(e, 128)]
            assert ((pad == 0).all() if zero_pad else ((pad == 0) | pad.isnan()).all()), f"group {g} padding"
        assert d[align(stops[-1], 128):].isnan().all(), "rows after the last group were written"
    check(d, starts, stops)
    if layout == "nn":
        return
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(a, b_arg, d, ends, **kwargs)
    # New group sizes inside the same A: the captured launch reads them on the device.
    ms2 = [max(0, m - 7) for m in ms]
    starts2, stops2, start = [], [], 0
    for m in ms2:
        starts2.append(start)
        stops2.append(start + m)
        start = align(start + m, 128)
    ends.copy_(torch.tensor(stops2, dtype=torch.int32))
    d.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    check(d, starts2, stops2)
    assert used >= start


@pytest.mark.parametrize("m,n,ks", [(512, 768, [1024, 0, 384, 2048]), (256, 208, [0, 128, 0, 640, 0]),
                                    (128, 4096, [256, 384])])
def test_k_grouped_nt_on_per_group_descriptors(monkeypatch, m, n, ks):
    """K-grouped nt with the descriptors of each group's A and B blocks built on the device
    (Fp8Overrides.k_grouped_device_descriptors): no concatenating copy, empty groups first / middle / last, N past
    the last tile's second wave; bit-identical to the concatenating path (same operands, same promotion order)."""
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    calls = _spy_ws_launches(monkeypatch)
    qa, qb = [], []
    for kg in ks:
        x = torch.randn(kg, m, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(kg, n, device="cuda", dtype=torch.bfloat16)
        qa.append(per_token_cast_to_fp8(x.T.contiguous(), use_ue8m0=False) if kg else None)
        qb.append(per_token_cast_to_fp8(y.T.contiguous(), use_ue8m0=False) if kg else None)
    live = [i for i, kg in enumerate(ks) if kg]
    a = (torch.cat([qa[i][0].flatten() for i in live]), torch.cat([qa[i][1] for i in live], dim=1))
    b = (torch.cat([qb[i][0].flatten() for i in live]), torch.cat([qb[i][1] for i in live], dim=1))
    c = torch.randn(len(ks), m, n, device="cuda")
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    outs = []
    for in_place in (True, False):
        d = torch.full_like(c, float("nan"))
        run_forced("k_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, ks, layout, c,
                   overrides=Fp8Overrides(k_grouped_device_descriptors=in_place))
        outs.append(d)
    assert len(calls) == 2
    assert calls[0][-1] is not None and calls[1][-1] is None  # (group_blocks: in place, then concatenated)
    for i, kg in enumerate(ks):
        expected = c[i] + (_ref(qa[i], qb[i], (1, 128)) if kg else 0)
        assert calc_diff(outs[0][i], expected) < TOL
    assert torch.equal(outs[0], outs[1])


# ---- Staggered consumer warpgroups (Fp8Overrides.stagger) ---------------------------------------------------------
# Staggered consumer warpgroups on the warp-specialised FP8 kernel's two-wave tiles (Fp8Overrides.stagger;
# gemm_ws._stagger_wait: warpgroup 1 issues a K block's first wave only after warpgroup 0's has completed, at a tile's
# first block (1) or every block (2); or (3) both warpgroups meet before each tile's K loop). Only the issue order
# changes, so every level computes the same bits as the unstaggered kernel, on shapes that cover what the extra
# barrier could get wrong: a tile of one K block, fewer K blocks than ring stages, partial tiles in M and N, several
# tiles per CTA, empty groups and tiles with no rows (whose K loops both warpgroups skip). Skipped without CUDA.

LEVELS = (0, 1, 2, 3)
# Two-wave variants: 128 x 256 (waves along N) and 256 x 128 (waves along M)
VARIANTS = [dict(waves=2, wave_n=True, narrow=128, stages=4), dict(waves=2, stages=3)]
TILE_128X256 = dict(waves=2, wave_n=True, narrow=128)


def _forced(level, **variant):
    """The warp-specialised kernel on 128 x 128 waves (whatever the heuristic's config), at a stagger level."""
    return _forced_config(128, 128, 1, ws_mode="on", stagger=level, **variant)


def _cuda(tensors):
    """The same (nested) tuple or list of CPU tensors on the GPU."""
    if isinstance(tensors, torch.Tensor):
        return tensors.cuda()
    return type(tensors)(_cuda(t) for t in tensors)


def _every_level(calls, fresh, run):
    """One output per stagger level: ``fresh()`` makes it, ``run(d, level)`` computes it; the spied launches
    (``calls``) were planned at the levels in turn."""
    outs = []
    for level in LEVELS:
        d = fresh()
        run(d, level)
        outs.append(d)
    assert [args[0].ws.stagger for args in calls] == list(LEVELS)
    return outs


def _assert_same_bits(outs, unwritten_nan=False):
    """Every level's output equals level 0's bit for bit (``unwritten_nan``: NaN where the op leaves D unwritten,
    equal when both are)."""
    if unwritten_nan:
        outs = [o.nan_to_num(7.0) for o in outs]
    assert all(torch.equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("m,n,k", [(129, 320, 128), (300, 576, 384), (4096, 2112, 7168), (8000, 200, 256),
                                   (37, 4096, 1536)])
def test_dense_stagger_levels_compute_the_same_bits(monkeypatch, variant, m, n, k):
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    outs = _every_level(calls, lambda: torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16),
                        lambda d, level: _gemm(a, b, d, overrides=_forced(level, **variant)))
    assert calc_diff(outs[0], _ref(a, b)) < TOL
    _assert_same_bits(outs)


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("ms,n,k", [([3000, 0, 129, 1, 700], 4096, 1024), ([5] * 40, 576, 384)])
def test_m_grouped_stagger_levels_compute_the_same_bits(monkeypatch, psum, ms, n, k):
    calls = _spy_ws_launches(monkeypatch)
    a, b, ids, ends, starts, stops = _contiguous(ms, n, k)
    outs = _every_level(
        calls, lambda: torch.full((a[0].size(0), n), float("nan"), device="cuda", dtype=torch.bfloat16),
        lambda d, level: run_forced("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d,
                                    ends if psum else ids, use_psum_layout=psum,
                                    overrides=_forced(level, **TILE_128X256)))
    for g, (s, e) in enumerate(zip(starts, stops)):
        if e > s:
            assert calc_diff(outs[0][s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g]))) < TOL
    _assert_same_bits(outs, unwritten_nan=True)


def test_masked_stagger_levels_compute_the_same_bits(monkeypatch):
    calls = _spy_ws_launches(monkeypatch)
    random.seed(3)
    g, max_m, n, k = 6, 384, 448, 2048
    masked = [0, max_m, 1, *(random.randint(1, max_m) for _ in range(g - 3))]
    a, b = _masked_a(g, max_m, k), _grouped_b(g, n, k)
    mm = torch.tensor(masked, dtype=torch.int32, device="cuda")
    outs = _every_level(calls, lambda: torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16),
                        lambda d, level: run_forced("m_grouped_fp8_gemm_nt_masked", a[0], a[1], b[0], b[1], d, mm,
                                                    200, overrides=_forced(level, **TILE_128X256)))
    _check_masked(a, b, outs[0], masked)
    _assert_same_bits(outs, unwritten_nan=True)


@pytest.mark.parametrize("m,n,k", [(129, 256, 208), (300, 448, 1024), (1000, 320, 7168), (4096, 4096, 2048)])
def test_1d1d_stagger_levels_compute_the_same_bits(monkeypatch, m, n, k):
    """1D1D (per-column B scales from shared memory, _mainloop_two_waves_1d1d), C = D as in the weight gradient."""
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k, per_row_b=True)
    c = torch.randn(m, n, device="cuda")
    outs = _every_level(calls, c.clone,
                        lambda d, level: _gemm(a, b, d, c=d, recipe=(1, 1, 128),
                                               overrides=_forced(level, **TILE_128X256)))
    assert calc_diff(outs[0], _ref(a, b, (1, 128)) + c) < TOL
    _assert_same_bits(outs)


@pytest.mark.parametrize("m,n,ks", [(512, 768, [1024, 0, 384, 2048]), (256, 208, [0, 128, 0, 640, 0])])
def test_k_grouped_stagger_levels_compute_the_same_bits(monkeypatch, m, n, ks):
    """K-grouped tn (MN-major operands, every group's K columns in turn), empty groups first, in the middle and
    last: the tiles of an empty group run no K block, so neither warpgroup waits or arrives."""
    calls = _spy_ws_launches(monkeypatch)
    a, b, qa, qb = (_cuda(x) for x in k_grouped_inputs("tn", ks, m, n))
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    c = torch.randn(len(ks), m, n, device="cuda")
    outs = _every_level(calls, c.clone,
                        lambda d, level: run_forced("k_grouped_fp8_gemm_tn_contiguous", a[0], a[1], b[0], b[1], d,
                                                    ks, layout, c=d, overrides=_forced(level)))
    for i, kg in enumerate(ks):
        assert calc_diff(outs[0][i], c[i] + (_ref(qa[i], qb[i], (1, 128)) if kg else 0)) < TOL
    _assert_same_bits(outs)


# ---- The carried tile walk on the GPU (Fp8Overrides.tile_walk) ----------------------------------------------------
# The carried tile walk of the warp-specialised FP8 kernel (Fp8Overrides.tile_walk; gemm_ws._walk) on psum and masked
# layouts: the same tiles as the per-tile scan, so bit-identical results, on layouts that exercise every step of the
# walk (empty groups first, in the middle and last; a 1-row group; a group filling a whole segment; rows after the
# last group; more groups than a CTA's tiles cross). Skipped without CUDA.

def _overrides(walk, **fields):
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    return Fp8Overrides(ws_mode="on", tile_walk=walk, regs=(232, 40), **fields)


def _walked(calls):
    """Whether each spied warp-specialised launch ran the walk (its plan's WsPlan.walk)."""
    return [args[0].ws.walk for args in calls]


PSUM_LAYOUTS = [
    [0, 3000, 0, 129, 1, 128, 256, 0],  # empty groups first, in the middle and last; a 1-row group; full segments
    [5] * 40,  # many small groups: a CTA crosses several per step
]
# (variant, ensure_zero_padding, N, K): two-wave 128 x 256 and split 128 x 192 tiles (the one-wave kernel walks the
# same way, without the prefetch step). The register budget is forced (one build per variant; results do not depend
# on it).
CASES = [(dict(waves=2, wave_n=True, stages=4), True, 4096, 1024),
         (dict(waves=2, wave_n=True, stages=4), False, 576, 384),
         (dict(waves=2, wave_n=True, narrow=64), True, 576, 384)]


@pytest.mark.parametrize("variant,zero_pad,n,k", CASES)
@pytest.mark.parametrize("ms", PSUM_LAYOUTS)
def test_psum_walk_matches_scan(monkeypatch, variant, zero_pad, n, k, ms):
    calls = _spy_ws_launches(monkeypatch)
    a, b, ids, ends, starts, stops = _contiguous(ms, n, k)
    extra = 300  # rows after the last group's padded end: never written
    a = (torch.cat([a[0], a[0][:extra]]), torch.cat([a[1], a[1][:extra]]))
    outs = []
    for walk in (True, False):
        d = torch.full((a[0].size(0), n), float("nan"), device="cuda", dtype=torch.bfloat16)
        run_forced("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, ends, use_psum_layout=True,
                   ensure_zero_padding=zero_pad, overrides=_overrides(walk, **variant))
        outs.append(d)
    assert _walked(calls) == [True, False]
    for g, (s, e) in enumerate(zip(starts, stops)):
        if e > s:
            assert calc_diff(outs[0][s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g]))) < TOL
        pad = outs[0][e:align(e, 128)]
        assert ((pad == 0).all() if zero_pad else ((pad == 0) | pad.isnan()).all()), f"group {g} padding"
    assert outs[0][align(stops[-1], 128):].isnan().all(), "rows after the last group were written"
    assert torch.equal(outs[0].nan_to_num(7.0), outs[1].nan_to_num(7.0))


@pytest.mark.parametrize("expected_m", [24])
def test_psum_decode_form_walk(monkeypatch, expected_m):
    """expected_m_for_psum_layout (the decode form: A holds far more rows than the groups use), with the walk."""
    calls = _spy_ws_launches(monkeypatch)
    ms = [20, 25, 0, 17, 31, 1, 64, 0]
    n, k = 7168, 512
    a, b, ids, ends, starts, stops = _contiguous(ms, n, k)
    a = (torch.cat([a[0]] * 4), torch.cat([a[1]] * 4))
    d = torch.full((a[0].size(0), n), float("nan"), device="cuda", dtype=torch.bfloat16)
    run_forced("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, ends, use_psum_layout=True,
               expected_m_for_psum_layout=expected_m, overrides=_overrides(True))
    assert _walked(calls) == [True]
    for g, (s, e) in enumerate(zip(starts, stops)):
        if e > s:
            assert calc_diff(d[s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g]))) < TOL
    assert d[align(stops[-1], 128):].isnan().all()


# (g, m_per, max_m, n, k, force_128): at 20 expected rows per group the plan runs the tl.* kernel's 64-row tiles (no
# walk there), so that case forces the 128 x 128 config to reach the warp-specialised kernel (CPU check:
# tests/test_fp8_gemm_plan_cpu.py::test_masked_decode_walk_case_reaches_the_ws_kernel).
MASKED_CASES = [(8, 192, 1024, 512, 1024, False), (33, 20, 128, 7168, 256, True)]


def masked_walk_overrides(walk, variant, force_128):
    """The overrides of test_masked_walk_matches_scan (shared with its CPU plan check)."""
    from deep_gemm.gemm.fp8 import configs as fp8_configs
    return _overrides(walk, **variant, **(dict(config=fp8_configs._config(128, 128, 1)) if force_128 else {}))


@pytest.mark.parametrize("variant", [dict(waves=2, wave_n=True)])
@pytest.mark.parametrize("g,m_per,max_m,n,k,force_128", MASKED_CASES)
def test_masked_walk_matches_scan(monkeypatch, variant, g, m_per, max_m, n, k, force_128):
    calls = _spy_ws_launches(monkeypatch)
    random.seed(3)
    masked = [min(max_m, int(m_per * random.uniform(0.0, 1.5))) for _ in range(g)]
    masked[0], masked[-1] = 0, max_m
    if g > 4:
        masked[2] = masked[3] = 0
    a, b = _masked_a(g, max_m, k), _grouped_b(g, n, k)
    mm = torch.tensor(masked, dtype=torch.int32, device="cuda")
    outs = []
    for walk in (True, False):
        d = torch.full((g, max_m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        run_forced("m_grouped_fp8_gemm_nt_masked", a[0], a[1], b[0], b[1], d, mm, m_per,
                   overrides=masked_walk_overrides(walk, variant, force_128))
        outs.append(d)
    assert _walked(calls) == [True, False]
    _check_masked(a, b, outs[0], masked)
    for i, m in enumerate(masked):
        assert torch.equal(outs[0][i, :m], outs[1][i, :m])


def test_warmup_compiles_ahead_of_the_first_call():
    calls = [("fp8_gemm_nt", dict(m=m, n=576, k=7168)) for m in (3, 200)] + [
        ("m_grouped_fp8_gemm_nt_masked", dict(num_groups=4, max_m=64, n=512, k=512, expected_m=20)),
        ("k_grouped_fp8_gemm_tn_contiguous", dict(ks=[128, 0, 256], m=64, n=128))]
    compiled = deep_gemm.warmup(calls)
    assert compiled >= 1
    assert deep_gemm.warmup(calls) == 0, "a second warmup of the same calls compiles nothing new"
    jit = deep_gemm.get_jit()
    assert jit.num_compiled_kernels >= compiled
