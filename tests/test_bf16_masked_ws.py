"""``m_grouped_bf16_gemm_nt_masked`` on the warp-specialised Gluon kernel (gemm/bf16/kernels/gemm_ws.py, GROUPING MASKED).

CPU: the plan's routing (bf16_plan._masked_plan: AUTO_WS_MASKED, the decode rows left to tl.*, the overrides) and
what the launcher hands the kernel (the launch faked: Gluon does not run in Triton's interpreter). GPU (marked
``gpu``): odd and DeepGEMM-like shapes against an FP32 torch reference, rows past masked_m bit for bit untouched,
the same bits call after call, CUDA-graph capture and replay with masked_m changed between replays, and the tl.*
kernel (ws=False) agreeing with the WS one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from deep_gemm.gemm.bf16 import plan as bf16_plan
from deep_gemm.gemm.bf16.plan import Bf16Call, Bf16Config, Bf16Overrides
from deep_gemm.testing import calc_diff
from deep_gemm.utils.numeric import group_pad
from triton_harness import DEVICE, run_forced

BF16 = torch.bfloat16
TOL = 1e-5  # DeepGEMM's own bound for BF16 GEMMs
MASKED = bf16_plan.GROUPING["masked"]
# bench_bf16_gemm's masked rows (G, expected rows per group) x (N, K), Mmax 4096
BENCH_ROWS = [(32, 192), (6, 1024)]
BENCH_NK = [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]


def masked_call(groups=6, expected=1024, n=4096, k=4096, max_m=4096, **kw):
    kw.setdefault("d_aligned", True)
    return Bf16Call(MASKED, max_m, n, k, groups, 132, False, 2, True, True, False, expected_m=expected, **kw)


# ---- the plan (CPU) ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("groups, expected", BENCH_ROWS)
@pytest.mark.parametrize("n, k", BENCH_NK)
def test_auto_routes_compute_bound_masked_rows_to_the_ws_kernel(groups, expected, n, k):
    """The rule: 1024 expected rows per group on the WS kernel's 128 x 256 tile, 192 on the tl.* plan
    (MASKED_WS_MIN_EXPECTED_M lies between)."""
    c = masked_call(groups, expected, n, k)
    before = bf16_plan._plan(c, bf16_plan.NO_OVERRIDES)  # the tl.* plan
    assert before.kernel == "tl"
    p = bf16_plan.plan(c)
    if expected <= bf16_plan.MASKED_WS_MIN_EXPECTED_M:
        assert p == before
        return
    assert p.kernel == "ws" and p.uniform == bf16_plan.UNIFORM_TILES and p.d_tma, p
    cfg = p.config
    assert (cfg.block_m, cfg.block_n, cfg.split_k, cfg.block_n_tail) == (128, bf16_plan.MASKED_WS_AUTO_WIDTH, 1, 0)
    smem = cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * 2 + 2 * 64 * cfg.block_n * 2
    assert cfg.num_stages >= 3 and smem <= bf16_plan.WS_SMEM_BYTES
    assert p.grid == 132 and p.g_pad == group_pad(groups)
    assert bf16_plan.plan(c) == p  # pure


@pytest.mark.parametrize("expected", [1, 20, 32, 64])
def test_auto_leaves_decode_rows_on_their_tl_tiles(expected):
    for groups in (6, 32):
        for n, k in BENCH_NK:
            c = masked_call(groups, expected, n, k)
            p, tl_plan = bf16_plan.plan(c), bf16_plan._plan(c, bf16_plan.NO_OVERRIDES)
            # (the same tile; a few-tile call may split its last wave: bf16_plan.masked_split)
            split = bf16_plan.masked_split(c, tl_plan.config)
            assert p == replace(tl_plan, config=replace(tl_plan.config, split_k=split))
            assert p.kernel == "tl"
    # ... past MASKED_WS_MIN_EXPECTED_M, the WS kernel
    assert bf16_plan.plan(masked_call(32, bf16_plan.MASKED_WS_MIN_EXPECTED_M + 1)).kernel == "ws"


def test_masked_overrides_force_either_kernel():
    big, decode = masked_call(), masked_call(32, 20)
    assert bf16_plan.plan(big, Bf16Overrides(ws=False)).kernel == "tl"
    forced = bf16_plan.plan(decode, Bf16Overrides(ws=True))
    assert forced.kernel == "ws" and forced.config.block_m == 128
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, block_n=128)).config.block_n == 128
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, block_n=256)).config.block_n == 256
    assert not bf16_plan.plan(big, Bf16Overrides(ws=True, uniform_tiles=False)).uniform
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, uniform_tiles=True)).uniform
    cfg = Bf16Config(128, 128, 64, 6, 4)
    on = bf16_plan.plan(big, Bf16Overrides(ws=True, config=cfg))
    assert on.kernel == "ws" and (on.config.block_n, on.config.block_k) == (128, 64)
    # a forced tl.* config stays tl.* unless the WS kernel is forced too
    assert bf16_plan.plan(big, Bf16Overrides(config=Bf16Config(128, 128, 64, 4, 8))).kernel == "tl"
    # what the WS kernel does not cover: other tile heights, split-K, no TMA store of D, the interpreter
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, block_m=32)).kernel == "tl"
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, d_tma=False)).kernel == "tl"
    for uncovered in (replace(big, d_aligned=False), replace(big, interpreting=True), replace(big, out_bytes=4),
                      replace(big, a_k_major=False)):
        assert bf16_plan.plan(uncovered, Bf16Overrides(ws=True)).kernel == "tl", uncovered
        assert bf16_plan.plan(uncovered).kernel == "tl", uncovered
    # ws=True / False: as DG_BF16_WS=1 / 0 (the process default, read at import)
    assert bf16_plan.plan(decode, Bf16Overrides(ws=True)).kernel == "ws"
    assert bf16_plan.plan(big, Bf16Overrides(ws=False)).kernel == "tl"


@pytest.mark.parametrize("groups, expected", BENCH_ROWS)
@pytest.mark.parametrize("n, k", BENCH_NK)
def test_masked_ws_64_row_tile_forced(groups, expected, n, k):
    """The 64 x BN tile (the kernel's SPLIT_N): forced by ws=True with block_m=64 at either width, its ring as deep
    as fits beside two 64 x BN/2 staging buffers; "auto" never takes it; block_m=64 without ws=True stays tl.*."""
    c = masked_call(groups, expected, n, k)
    for bn in (256, 128):
        p = bf16_plan.plan(c, Bf16Overrides(ws=True, block_m=64, block_n=bn))
        assert p.kernel == "ws" and p.d_tma and p.uniform == bf16_plan.UNIFORM_TILES, p
        cfg = p.config
        assert (cfg.block_m, cfg.block_n, cfg.block_k, cfg.split_k, cfg.block_n_tail) == (64, bn, 64, 1, 0)
        ring = cfg.num_stages * (64 + bn) * 64 * 2
        assert cfg.num_stages == {256: 4, 128: 8}[bn] and ring + 2 * 64 * (bn // 2) * 2 <= bf16_plan.WS_SMEM_BYTES
        assert p.grid == 132 and p.g_pad == group_pad(groups)
    assert bf16_plan.plan(c, Bf16Overrides(ws=True, block_m=64)).config.block_n in (128, 256)
    assert bf16_plan.plan(c, Bf16Overrides(block_m=64)).kernel == "tl"  # ("auto": the tl.* 64-row tile)
    forced = bf16_plan.plan(c, Bf16Overrides(ws=True, config=Bf16Config(64, 256, 64, 4, 4)))
    assert forced.kernel == "ws" and (forced.config.block_m, forced.config.block_n) == (64, 256)
    assert bf16_plan.plan(c).config.block_m != 64 or bf16_plan.plan(c).kernel == "tl"


def test_masked_ws_64_row_tile_grid_and_uncovered():
    # (few tiles: the grid is what masked_m could give at most, 64-row blocks)
    p = bf16_plan.plan(masked_call(2, 100, 256, 256, max_m=130), Bf16Overrides(ws=True, block_m=64, block_n=256))
    assert p.kernel == "ws" and p.grid == 2 * 3 * 1
    big = masked_call(32, 192)
    over = Bf16Overrides(ws=True, block_m=64)
    for uncovered in (replace(big, d_aligned=False), replace(big, interpreting=True), replace(big, out_bytes=4),
                      replace(big, a_k_major=False)):
        assert bf16_plan.plan(uncovered, over).kernel == "tl", uncovered
    # (a forced split: the WS kernel does not split; the tl.* kernel splits a masked call's last wave)
    split = bf16_plan.plan(big, Bf16Overrides(ws=True, block_m=64, split_k=2))
    assert split.kernel == "tl" and split.config.split_k == 2 and split.config.block_m == 64
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, block_m=64, d_tma=False)).kernel == "tl"
    # (a forced 64-row config with a tail or another width: not the WS kernel's)
    assert bf16_plan.plan(big, Bf16Overrides(ws=True, config=Bf16Config(64, 64, 64, 4, 4))).kernel == "tl"


def test_masked_ws_keeps_b_k_blocks_inside_a_group():
    # MN-major B stacked [G*K, N]: every K block must lie in one group's K rows (k_divisor = K).
    c = replace(masked_call(k=4160, k_divisor=4160), b_k_major=False)
    p = bf16_plan.plan(c, Bf16Overrides(ws=True))
    assert p.kernel == "ws" and 4160 % p.config.block_k == 0
    assert bf16_plan.plan(replace(c, k=8, k_divisor=8), Bf16Overrides(ws=True)) is None  # (no K block divides 8)


def test_launcher_hands_the_ws_kernel_row_views_and_masked_m(monkeypatch):
    """A [G, Mmax, K] and D [G, Mmax, N] reach the kernel as [G*Mmax, *] row matrices with M = G*Mmax, masked_m as
    its layout vector, GROUPING MASKED and the plan's UNIFORM (both in the compiled kernel's key); a D whose rows
    cannot be one TMA matrix stays on the tl.* kernel."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    launches = []

    def fake_launch(kernel, grid, args, *, config_key, name, **kwargs):
        launches.append((name, dict(zip(kernel.arg_names, args)), config_key, grid))
    monkeypatch.setattr(bf16_launch, "launch", fake_launch)
    monkeypatch.setattr(bf16_launch, "interpreting", lambda: False)
    g, max_m, n, k = 3, 200, 136, 128
    a = torch.randn(g, max_m, k, device=DEVICE).to(BF16)
    b = torch.randn(g, n, k, device=DEVICE).to(BF16)
    masked_m = torch.tensor([0, 129, 200], dtype=torch.int32, device=DEVICE)
    d = torch.zeros(g, max_m, n, dtype=BF16, device=DEVICE)
    for uniform in (True, False):
        launches.clear()
        bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 160, "nk",
                                                  overrides=Bf16Overrides(ws=True, uniform_tiles=uniform))
        (name, args, key, grid), = launches
        assert name == "bf16_gemm_ws" and args["GROUPING"] == MASKED and args["UNIFORM"] is uniform
        assert key[4] == MASKED and key[-1] is uniform
        assert (args["M"], args["N"], args["K"], args["NUM_GROUPS"], args["B_GROUP_N"]) == (g * max_m, n, k, g, n)
        assert args["layout_ptr"] is masked_m and args["A_K_MAJOR"] and args["B_K_MAJOR"]
        rows = args["d_ptr"]
        assert rows.shape == (g * max_m, n) and rows.data_ptr() == d.data_ptr() and args["stride_dm"] == n
        # (Mmax 200: at most 2 row blocks per group)
        assert grid == (min(bf16_launch._num_sms(), g * 2 * -(-n // args["BN"])), 1, 1)
    # the 64-row tile: SPLIT_N, D's block [64, BN/2], 64-row blocks in the grid
    launches.clear()
    bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 160, "nk",
                                              overrides=Bf16Overrides(ws=True, block_m=64, block_n=256))
    (name, args, key, grid), = launches
    assert name == "bf16_gemm_ws" and args["SPLIT_N"] and (args["BM"], args["BN"]) == (64, 256)
    assert list(args["d_desc"].block_shape) == [64, 128] and list(args["a_desc"].block_shape) == [64, 64]
    assert grid == (min(bf16_launch._num_sms(), g * 4 * 1), 1, 1)
    launches.clear()
    bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 160, "nk", overrides=Bf16Overrides(ws=True))
    assert launches[0][1]["SPLIT_N"] is False
    # D with a gap between groups (a slice of a taller buffer): no [G*Mmax, N] view, so the tl.* kernel
    tall = torch.zeros(g, max_m + 8, n, dtype=BF16, device=DEVICE)[:, :max_m]
    launches.clear()
    bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, tall, masked_m, 160, "nk", overrides=Bf16Overrides(ws=True))
    assert [launch[0] for launch in launches] == ["bf16_gemm"]


# ---- the GPU -----------------------------------------------------------------------------------------------------

def _ref(a, b):
    return a.float() @ b.float().T


def _run(a, b, d, masked_m, expected, over):
    run_forced("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, expected, "nk", overrides=over)


def _sentinel(shape):
    """D's starting bits: random BF16 values, so an untouched row is recognisable bit for bit."""
    return torch.randn(*shape, device="cuda").to(BF16)


def _check(a, b, d, d0, masked):
    """Valid rows against the FP32 reference, rows past masked_m bit for bit D's starting values."""
    for i, m in enumerate(masked):
        m = min(m, a.size(1))
        if m:
            assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL, (i, m)
        assert torch.equal(d[i, m:].view(torch.int16), d0[i, m:].view(torch.int16)), f"group {i}: rows past {m}"


# (G, Mmax, N, K, masked_m): rows of 0, 1, 127, 128, 129 and Mmax; Mmax and N not multiples of the tile; G = 1, 32
# and 40 (G_PAD 64: two groups per lane of the producer's vector).
ODD = [(6, 300, 200, 256, [0, 1, 127, 128, 129, 300]), (1, 4096, 4096, 1024, [4096]), (1, 130, 136, 64, [129]),
       (32, 257, 1000, 512, [(37 * i) % 258 for i in range(32)]), (40, 130, 256, 128, [i * 3 for i in range(40)]),
       (4, 64, 512, 192, [64, 0, 63, 1]), (3, 512, 384, 320, [0, 0, 0])]


@pytest.mark.gpu
@pytest.mark.parametrize("g, max_m, n, k, masked", ODD, ids=lambda v: str(v) if not isinstance(v, list) else "m")
@pytest.mark.parametrize("bn, uniform", [(128, True), (256, True), (256, False)])
def test_masked_ws_odd_shapes(g, max_m, n, k, masked, bn, uniform):
    a, b = torch.randn(g, max_m, k, device="cuda").to(BF16), torch.randn(g, n, k, device="cuda").to(BF16)
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    d0 = _sentinel((g, max_m, n))
    outs = []
    for _ in range(2):  # (the second call replays the recorded launch)
        d = d0.clone()
        _run(a, b, d, masked_m, max(1, sum(masked) // g), Bf16Overrides(ws=True, block_n=bn, uniform_tiles=uniform))
        _check(a, b, d, d0, masked)
        outs.append(d)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the same bits call after call"
    d = d0.clone()
    _run(a, b, d, masked_m, max(1, sum(masked) // g), Bf16Overrides(ws=False))
    _check(a, b, d, d0, masked)
    for i, m in enumerate(masked):
        if m:
            assert calc_diff(d[i, :m], outs[0][i, :m]) < TOL


@pytest.mark.gpu
def test_masked_ws_mn_major_b():
    g, max_m, n, k = 4, 384, 512, 448
    a = torch.randn(g, max_m, k, device="cuda").to(BF16)
    b = torch.randn(g, k, n, device="cuda").to(BF16).transpose(1, 2)  # [G, N, K] view of an MN-major B
    masked = [384, 5, 200, 0]
    d0 = _sentinel((g, max_m, n))
    d = d0.clone()
    _run(a, b, d, torch.tensor(masked, dtype=torch.int32, device="cuda"), 150, Bf16Overrides(ws=True))
    _check(a, b, d, d0, masked)


def _bench_row(groups, expected, n, k):
    """A bench_bf16_gemm-like masked row: masked_m = expected x U(0.7, 1.3) (seeded), Mmax 4096; D a sentinel."""
    gen = torch.Generator().manual_seed(0)
    masked = [int(expected * (0.7 + 0.6 * float(torch.rand(1, generator=gen)))) for _ in range(groups)]
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    a = torch.randn(groups, 4096, k, device="cuda").to(BF16)
    b = torch.randn(groups, n, k, device="cuda").to(BF16)
    return masked, masked_m, a, b, _sentinel((groups, 4096, n))


@pytest.mark.gpu
@pytest.mark.parametrize("groups, expected", BENCH_ROWS)
@pytest.mark.parametrize("n, k", [(6144, 7168), (4096, 2048)])
def test_masked_ws_deepgemm_shapes(groups, expected, n, k):
    """bench_bf16_gemm's masked rows (masked_m = expected x 0.7-1.3, Mmax 4096) on both WS tiles and the plan."""
    masked, masked_m, a, b, d0 = _bench_row(groups, expected, n, k)
    for over in (Bf16Overrides(ws=True, block_n=256), Bf16Overrides(ws=True, block_n=128), Bf16Overrides()):
        d = d0.clone()
        _run(a, b, d, masked_m, expected, over)
        _check(a, b, d, d0, masked)


@pytest.mark.gpu
@pytest.mark.parametrize("bn", [128, 256])
def test_masked_ws_cuda_graph_reads_masked_m_on_the_device(bn):
    g, max_m, n, k = 4, 320, 512, 1024
    a, b = torch.randn(g, max_m, k, device="cuda").to(BF16), torch.randn(g, n, k, device="cuda").to(BF16)
    masked_m = torch.tensor([10, 0, 320, 77], dtype=torch.int32, device="cuda")
    d0 = _sentinel((g, max_m, n))
    d = d0.clone()
    over = Bf16Overrides(ws=True, block_n=bn)
    _run(a, b, d, masked_m, 64, over)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _run(a, b, d, masked_m, 64, over)
    for masked in ([200, 3, 0, 320], [0, 0, 0, 0], [129, 128, 127, 1], [10, 0, 320, 77]):
        masked_m.copy_(torch.tensor(masked, dtype=torch.int32))
        d.copy_(d0)
        graph.replay()
        torch.cuda.synchronize()
        _check(a, b, d, d0, masked)


# The 64 x BN tile (the kernel's SPLIT_N: the consumers split its columns). Shapes chosen so that each build is one
# compile (grid = every SM, G_PAD 8): (G, Mmax, N, K, masked_m) with rows of 0, 1, 63, 64, 65 and Mmax; Mmax not a
# multiple of 64; N not a multiple of BN (300: the last tile column's upper half wholly past N at BN 256; 72: every
# tile's at BN 256, its lower half partly).
ODD64 = [(6, 1000, 300, 256, [0, 1, 63, 64, 65, 1000]),
         (8, 1100, 72, 192, [1099, 128, 127, 129, 0, 1100, 3, 200])]


@pytest.mark.gpu
@pytest.mark.parametrize("g, max_m, n, k, masked", ODD64, ids=lambda v: str(v) if not isinstance(v, list) else "m")
@pytest.mark.parametrize("bn", [256, 128])
def test_masked_ws64_odd_shapes(g, max_m, n, k, masked, bn):
    a, b = torch.randn(g, max_m, k, device="cuda").to(BF16), torch.randn(g, n, k, device="cuda").to(BF16)
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    d0 = _sentinel((g, max_m, n))
    over = Bf16Overrides(ws=True, block_m=64, block_n=bn)
    outs = []
    for _ in range(2):  # (the second call replays the recorded launch)
        d = d0.clone()
        _run(a, b, d, masked_m, max(1, sum(masked) // g), over)
        _check(a, b, d, d0, masked)
        outs.append(d)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the same bits call after call"


@pytest.mark.gpu
def test_masked_ws64_deepgemm_row():
    """bench_bf16_gemm's G = 32 x 192 row (masked_m = 192 x 0.7-1.3, Mmax 4096), N x K = 4096 x 2048, on the 64 x 256
    tile (forced: Bf16Overrides(ws=True, block_m=64))."""
    groups, expected, n, k = 32, 192, 4096, 2048
    masked, masked_m, a, b, d0 = _bench_row(groups, expected, n, k)
    d = d0.clone()
    _run(a, b, d, masked_m, expected, Bf16Overrides(ws=True, block_m=64, block_n=256))
    _check(a, b, d, d0, masked)

