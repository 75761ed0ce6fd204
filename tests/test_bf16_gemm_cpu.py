"""The BF16 GEMM Triton kernel (gemm/bf16/kernels/gemm.py) through its launchers (gemm/bf16/launch.py): in
Triton's interpreter on CPU (BF16 dots patched by tests/interpreter_bf16.py), on the GPU when there is one. Small odd
shapes, every layout and majorness, zero sizes, C accumulation (distinct and ``c is d``), forced split-K and tiles,
every grouping; each result against a float64 truth computed by broadcasting. The launcher must not decline
(triton_harness)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import deep_gemm
from deep_gemm.core import runtime
from deep_gemm.gemm.bf16 import plan as bf16_plan
from deep_gemm.gemm.bf16.plan import Bf16Call, Bf16Config, Bf16Overrides
from deep_gemm.testing import calc_diff
from deep_gemm.utils.numeric import group_pad

import interpreter_bf16  # noqa: F401  (BF16 tl.dot in the interpreter)
from triton_harness import DEVICE, run_forced, run_triton, triton_launcher

BF16 = torch.bfloat16
SENTINEL = 7.0
TOLERANCE = {torch.float32: 1e-9, BF16: 1e-5}


def randn(*shape, dtype=BF16):
    return torch.randn(*shape, device=DEVICE).to(dtype)


def padded(values: torch.Tensor, order: str) -> torch.Tensor:
    """2-D values in row-major ('row') or column-major ('col') storage with a padded, 16-byte aligned leading
    stride (so the operand is not contiguous)."""
    if order == "col":
        return padded(values.T, "row").T
    rows, cols = values.shape
    buf = torch.zeros(rows, (cols + 8) // 8 * 8 + 8, dtype=values.dtype, device=values.device)
    buf[:, :cols] = values
    return buf[:, :cols]


def nt_truth(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.double()[..., :, None, :] * b.double()[..., None, :, :]).sum(-1)


def assert_close(out, truth, label=""):
    diff = calc_diff(out, truth)
    assert diff < TOLERANCE[out.dtype], f"{label}: calc_diff {diff:.3e}"


def dense_case(layout, m, n, k, out_dtype, accumulate, a_order="row", b_order="row"):
    a_mk, b_nk = randn(m, k), randn(n, k)
    a = padded(a_mk.T if layout[0] == "t" else a_mk, a_order)
    b = padded(b_nk.T if layout[1] == "n" else b_nk, b_order)
    d = randn(m, n, dtype=out_dtype)
    c = None if accumulate == "none" else (d if accumulate == "d" else randn(m, n, dtype=out_dtype))
    truth = nt_truth(a_mk, b_nk) + (0.0 if c is None else c.double())
    return a, b, d, c, truth


# ---- dense -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
def test_dense_layouts_and_majorness(layout):
    # Each layout with both storage orders of A and B (so every K-/MN-major pair reaches the kernel).
    for a_order, b_order, out_dtype, accumulate in (("row", "row", BF16, "none"), ("col", "col", torch.float32, "d"),
                                                    ("col", "row", BF16, "distinct"), ("row", "col", BF16, "d")):
        a, b, d, c, truth = dense_case(layout, 37, 72, 136, out_dtype, accumulate, a_order, b_order)
        run_triton(f"bf16_gemm_{layout}", a, b, d, c, "nk")
        assert_close(d, truth, f"{layout} {a_order}/{b_order} {out_dtype} {accumulate}")


@pytest.mark.parametrize("m,n,k", [(1, 24, 200), (130, 8, 40), (65, 136, 8), (3, 16, 1)])
def test_dense_odd_sizes(m, n, k):
    a, b, d, c, truth = dense_case("nt", m, n, k, BF16, "distinct", "row", "col")
    run_triton("bf16_gemm_nt", a, b, d, c, "nk")
    assert_close(d, truth, f"{m}x{n}x{k}")


@pytest.mark.parametrize("m,n,k", [(0, 16, 32), (16, 0, 32), (16, 24, 0)])
@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
def test_dense_zero_sizes(m, n, k, accumulate):
    a, b, d, c, truth = dense_case("nt", m, n, k, BF16, accumulate)
    before = d.clone()
    run_triton("bf16_gemm_nt", a, b, d, c, "nk")
    if m and n:
        assert torch.equal(d.double(), truth.to(BF16).double())  # K == 0: d = c, or zeros
    else:
        assert torch.equal(d, before)


@pytest.mark.parametrize("split", [2, 3, 4])
@pytest.mark.parametrize("accumulate", ["none", "d"])
def test_dense_split_k(split, accumulate):
    for layout in ("nt", "tn"):
        a, b, d, c, truth = dense_case(layout, 5, 40, 520, torch.float32, accumulate)
        run_forced(f"bf16_gemm_{layout}", a, b, d, c, "nk", overrides=Bf16Overrides(split_k=split))
        assert_close(d, truth, f"{layout} split {split}")


@pytest.mark.parametrize("cfg", [Bf16Config(16, 32, 32, 2, 4), Bf16Config(64, 64, 64, 3, 4),
                                 Bf16Config(128, 128, 64, 3, 8, split_k=2), Bf16Config(32, 16, 16, 2, 4)],
                         ids=lambda c: f"{c.block_m}x{c.block_n}x{c.block_k}s{c.split_k}")
def test_dense_forced_tiles(cfg):
    a, b, d, c, truth = dense_case("tt", 70, 56, 200, BF16, "distinct", "col", "row")
    run_forced("bf16_gemm_tt", a, b, d, c, "nk", overrides=Bf16Overrides(config=cfg))
    assert_close(d, truth, str(cfg))


@pytest.mark.parametrize("split,split_from", [(3, 8), (4, 11), (2, 12), (4, 0)])
@pytest.mark.parametrize("accumulate,out_dtype", [("none", BF16), ("d", torch.float32), ("distinct", BF16)])
def test_dense_tail_split(split, split_from, accumulate, out_dtype):
    # 70 x 56 on 32 x 16 tiles: 12 tiles; those from split_from on run as `split` K pieces. K = 40 with BK 16 is 3
    # K blocks, so a 4-way split leaves its last piece empty; split_from 12 splits nothing.
    cfg = Bf16Config(32, 16, 16, 2, 4, split_k=split, split_from=split_from)
    for k in (40, 200):
        a, b, d, c, truth = dense_case("nt", 70, 56, k, out_dtype, accumulate, "row", "col")
        run_forced("bf16_gemm_nt", a, b, d, c, "nk", overrides=Bf16Overrides(config=cfg))
        assert_close(d, truth, f"{cfg} k={k}")


def test_dense_tail_split_is_deterministic_and_zero_sizes_write_nothing():
    cfg = Bf16Config(32, 16, 16, 2, 4, split_k=3, split_from=5)
    a, b, d, c, truth = dense_case("nt", 37, 40, 72, torch.float32, "none")
    outs = []
    for _ in range(2):  # the second call replays the recorded launch
        run_forced("bf16_gemm_nt", a, b, d, c, "nk", overrides=Bf16Overrides(config=cfg))
        outs.append(d.clone())
    assert torch.equal(outs[0], outs[1])
    assert_close(outs[0], truth, "tail split")
    for m, n in ((0, 16), (16, 0)):
        a, b, d, c, _ = dense_case("nt", m, n, 32, BF16, "none")
        before = d.clone()
        run_forced("bf16_gemm_nt", a, b, d, c, "nk", overrides=Bf16Overrides(config=cfg))
        assert torch.equal(d, before)


@pytest.mark.parametrize("cfg,m,n,k", [(Bf16Config(16, 32, 16, 2, 4, block_n_tail=16), 37, 130, 72),
                                       (Bf16Config(128, 128, 64, 3, 8, block_n_tail=16), 130, 300, 136)],
                         ids=["16x(32+16)", "128x(128+16)"])
def test_dense_tile_with_tail_columns(cfg, m, n, k):
    # Tiles BN + tail wide (a width no register tensor has) on sizes that end mid-tile and mid-tail, every operand
    # majorness, BF16 (TMA store) and FP32 out.
    for a_order, b_order, out_dtype in (("row", "row", BF16), ("col", "col", torch.float32), ("row", "col", BF16)):
        a, b, d, c, truth = dense_case("nt", m, n, k, out_dtype, "none", a_order, b_order)
        run_forced("bf16_gemm_nt", a, b, d, c, "nk", overrides=Bf16Overrides(config=cfg))
        assert_close(d, truth, f"{cfg} {a_order}/{b_order} {out_dtype}")


def test_plan_covers_tail_columns_only_dense_unsplit_without_c():
    wide = Bf16Config(128, 128, 64, 5, 8, block_n_tail=16)
    p = bf16_plan.plan(call(m=4096, n=576), Bf16Overrides(config=wide, ws=False))
    assert p.kernel == "tl" and p.config == wide and p.grid == 128  # 32 x 4 tiles: one wave
    with_c = Bf16Call(0, 4096, 576, 7168, 1, 132, True, 2, True, True, True)
    assert bf16_plan.plan(with_c, Bf16Overrides(config=wide)) is None
    assert bf16_plan.plan(call(m=128, n=576), Bf16Overrides(config=replace(wide, split_k=2))) is None
    assert bf16_plan.plan(call("m_ids", m=8192, groups=4), Bf16Overrides(config=wide)) is None
    assert bf16_plan.plan(call(), Bf16Overrides(config=replace(wide, block_n_tail=24))) is None


@pytest.mark.parametrize("tail,n,stages,tiles", [(16, 576, 5, 32 * 4), (32, 200, 5, 32 * 2), (64, 2112, 4, 32 * 11)])
def test_plan_forces_the_warp_specialised_tile_with_tail_columns(tail, n, stages, tiles):
    # Bf16Overrides(ws=True) with a 128 x (128 + tail) config: the WS kernel (TAIL_N), its ring as deep as fits
    # beside D's two [64, 128 + tail] staging buffers, one program per tile up to the SM count.
    forced = Bf16Overrides(ws=True, config=Bf16Config(128, 128, 64, 5, 4, block_n_tail=tail))
    p = bf16_plan.plan(call(m=4096, n=n), forced)
    assert p.kernel == "ws" and p.d_tma and p.config.block_n_tail == tail and p.config.tile_n == 128 + tail
    assert p.config.num_stages == stages and p.grid == min(tiles, 132)
    per_stage, epilogue = (128 + 128 + tail) * 64 * 2, 2 * 64 * (128 + tail) * 2
    assert stages * per_stage + epilogue <= bf16_plan.WS_SMEM_BYTES < (stages + 1) * per_stage + epilogue
    # Where the WS kernel does not cover the tile, the forced config runs on the tl.* kernel as given (FP32 D, or
    # a tail on a 64-wide tile), or nowhere (C, a grouped layout: _tail_covers).
    fp32 = bf16_plan.plan(call(m=4096, n=n, out_bytes=4), forced)
    assert fp32.kernel == "tl" and fp32.config == forced.config
    narrow = Bf16Overrides(ws=True, config=Bf16Config(128, 64, 64, 5, 8, block_n_tail=tail))
    assert bf16_plan.plan(call(m=4096, n=n), narrow).kernel == "tl"
    with_c = Bf16Call(0, 4096, n, 7168, 1, 132, True, 2, True, True, True, c_tma=True)
    assert bf16_plan.plan(with_c, forced) is None
    assert bf16_plan.plan(call("m_ids", m=8192, n=n, groups=4), forced) is None


@pytest.mark.parametrize("m,n,tail", [(4096, 576, 16), (8192, 576, 16), (4096, 2112, 64), (4096, 200, 0),
                                      (2048, 576, 0), (128, 576, 0), (4096, 7168, 0), (4096, 24576, 0)])
def test_default_plan_takes_a_tail_only_where_it_fills_the_waves(m, n, tail):
    # _wave_filling_tail: N a whole number of 128 + tail columns (never of 128: no tile reaches past N, so N = 200
    # keeps the plain tiles) and the tiles filling >= 85 % of their waves (2048 x 576: 64 tiles of 132 SMs do not).
    # 576 = 4 x 144 = 3 x 192: 144 (128 tiles, one wave) fills the SMs better than 192 (96 tiles).
    p = bf16_plan.plan(call(m=m, n=n))
    assert p.config.block_n_tail == tail and (p.kernel == "ws" or tail == 0), p
    if tail:
        assert p.config.block_n == 128 and p.config.split_k == 1 and p.grid == min(132, m // 128 * (n // (128 + tail)))
        # Not with C, FP32 D, a forced width or a forced tl.* kernel.
        with_c = Bf16Call(0, m, n, 7168, 1, 132, True, 2, True, True, True, c_tma=True)
        assert bf16_plan.plan(with_c).config.block_n_tail == 0
        assert bf16_plan.plan(call(m=m, n=n, out_bytes=4)).config.block_n_tail == 0
        assert bf16_plan.plan(call(m=m, n=n), Bf16Overrides(block_n=128)).config.block_n_tail == 0
        assert bf16_plan.plan(call(m=m, n=n), Bf16Overrides(ws=False)).config.block_n_tail == 0
        both_mn = Bf16Call(0, m, n, 7168, 1, 132, False, 2, False, False, True)
        assert bf16_plan.plan(both_mn).config.block_n_tail == tail  # tn
        mixed = Bf16Call(0, m, n, 7168, 1, 132, False, 2, True, False, True)
        assert bf16_plan.plan(mixed).config.block_n_tail == 0  # nn


# ---- M-grouped contiguous ----------------------------------------------------------------------------------------

def contiguous_inputs(ms, n, k, alignment, layout):
    """Group g's ms[g] rows padded to ``alignment`` (padding rows: id -1, zero A rows). Returns a, b (as the
    ``layout`` op takes it), ids per row, psum ends (group g ends at start_g + ms[g]), and the float64 truth."""
    starts, total = [], 0
    for mg in ms:
        starts.append(total)
        total += (mg + alignment - 1) // alignment * alignment
    a = randn(total, k)
    b_nk = randn(len(ms), n, k)
    ids = torch.full((total,), -1, dtype=torch.int32, device=DEVICE)
    ends = torch.tensor([s + mg for s, mg in zip(starts, ms)], dtype=torch.int32, device=DEVICE)
    truth = torch.zeros(total, n, dtype=torch.float64, device=DEVICE)
    for g, (s, mg) in enumerate(zip(starts, ms)):
        a[s + mg:s + (mg + alignment - 1) // alignment * alignment] = 0
        ids[s:s + mg] = g
        truth[s:s + mg] = nt_truth(a[s:s + mg], b_nk[g])
    b = b_nk if layout == "nt" else b_nk.transpose(1, 2).contiguous()
    return a, b, ids, ends, truth, starts


@pytest.fixture
def alignment_64():
    old = runtime.get_mk_alignment_for_contiguous_layout()
    runtime.set_mk_alignment_for_contiguous_layout(64)
    yield 64
    runtime.set_mk_alignment_for_contiguous_layout(old)


@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_m_grouped_contiguous_ids(layout):
    a, b, ids, _, truth, _ = contiguous_inputs([100, 0, 30], 40, 80, 128, layout)
    d = torch.full((a.size(0), 40), SENTINEL, dtype=BF16, device=DEVICE)
    run_triton(f"m_grouped_bf16_gemm_{layout}_contiguous", a, b, d, ids, "nk", False, False)
    assert_close(d, truth, layout)
    assert torch.all(d[ids == -1] == 0), "expert -1 rows are written as zeros"


@pytest.mark.parametrize("ensure_zero_padding", [False, True])
@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_m_grouped_contiguous_psum(layout, ensure_zero_padding, alignment_64):
    a, b, _, ends, truth, starts = contiguous_inputs([70, 0, 5], 24, 48, alignment_64, layout)
    d = torch.full((a.size(0), 24), SENTINEL, dtype=BF16, device=DEVICE)
    run_triton(f"m_grouped_bf16_gemm_{layout}_contiguous", a, b, d, ends, "nk", True, ensure_zero_padding)
    rows = torch.zeros(a.size(0), dtype=torch.bool, device=DEVICE)
    for s, e in zip(starts, ends.tolist()):
        rows[s:e] = True
    assert_close(d[rows], truth[rows], layout)
    gap = d[~rows]
    assert torch.all(gap == 0) if ensure_zero_padding else torch.all(gap == SENTINEL)


def psum_decode_inputs(ms, n, k, max_m, layout):
    """DeepGEMM's masked-through-psum form: A and D of G x max_m rows, group g's ms[g] rows from align(end[g-1]),
    the rest of the rows unused. Returns a, b, d (SENTINEL), the ends, the rows the groups own and the truth."""
    a, b, _, ends, truth, starts = contiguous_inputs(ms, n, k, 128, layout)
    rows = len(ms) * max_m
    a = torch.cat([a, randn(rows - a.size(0), k)])
    truth = torch.cat([truth, torch.zeros(rows - truth.size(0), n, dtype=truth.dtype, device=DEVICE)])
    owned = torch.zeros(rows, dtype=torch.bool, device=DEVICE)
    for s, e in zip(starts, ends.tolist()):
        owned[s:e] = True
    d = torch.full((rows, n), SENTINEL, dtype=BF16, device=DEVICE)
    return a, b, d, ends, owned, truth


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("ms,expected_m,tile", [
    ([20, 0, 5, 33], 20, {}),                      # the masked plan's decode tile
    ([70, 129, 1], 64, dict(block_m=16, block_n=16)),  # several row blocks of a group; 129: past one psum block
    ([0, 0], 8, {}),                               # every group empty: nothing written
])
def test_m_grouped_contiguous_psum_walk(monkeypatch, layout, ms, expected_m, tile):
    """A psum call with an expected row count runs as the masked call of its group ends (PSUM_WALK): the groups'
    rows are right, every other row of A's G x Mmax is untouched."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    launched = []

    def execute(p, call, **kwargs):
        launched.append((p.psum_walk, call.grouping))
        return real(p, call, **kwargs)
    real = bf16_launch._execute
    monkeypatch.setattr(bf16_launch, "_execute", execute)
    a, b, d, ends, owned, truth = psum_decode_inputs(ms, 24, 48, 256, layout)
    run_forced(f"m_grouped_bf16_gemm_{layout}_contiguous", a, b, d, ends, "nk", True, False, expected_m,
               overrides=Bf16Overrides(psum_walk=True, **tile))
    assert launched == [(True, bf16_plan.GROUPING["masked"])]
    if owned.any():
        assert_close(d[owned], truth[owned], layout)
    assert torch.all(d[~owned] == SENTINEL), "rows of no group are untouched"


def test_m_grouped_contiguous_psum_walk_splits_its_last_wave(monkeypatch):
    """The walk keeps the masked plan's last-wave split: 12 tiles of 16 x 16 on 8 programs, the last 4 in pieces
    whose partials are reduced in order; the groups' rows agree with the unsplit call's."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    a, b, d, ends, owned, truth = psum_decode_inputs([9, 0, 33, 1], 37, 200, 128, "nt")
    splits = []

    def buffers(d_, split_, *args, **kwargs):
        splits.append(split_)
        return real(d_, split_, *args, **kwargs)
    real = bf16_launch.split_k_buffers
    monkeypatch.setattr(bf16_launch, "split_k_buffers", buffers)
    old = runtime.get_num_sms()
    runtime.set_num_sms(8)
    try:
        results = {}
        for split in (1, 5):
            d.fill_(SENTINEL)
            run_forced("m_grouped_bf16_gemm_nt_contiguous", a, b, d, ends, "nk", True, False, 16,
                       overrides=Bf16Overrides(psum_walk=True, block_m=16, block_n=16, split_k=split))
            assert_close(d[owned], truth[owned])
            assert torch.all(d[~owned] == SENTINEL)
            results[split] = d[owned].double()
    finally:
        runtime.set_num_sms(old)
    assert splits == [1, 5]
    assert calc_diff(results[1], results[5]) < 1e-5


def test_psum_walk_runs_only_where_asked():
    decode = call("m_psum", m=32 * 4096, n=4096, k=7168, groups=32, zero_gaps=False, d_aligned=True, expected_m=20)
    assert bf16_plan.plan(decode).psum_walk is bf16_plan.PSUM_WALK_BY_DEFAULT
    assert bf16_plan.plan(decode, Bf16Overrides(psum_walk=True)).psum_walk


def test_plan_walks_psum_decode_calls_only():
    """A walked psum call takes the masked plan of its group ends (the decode tile for few rows). The default rule
    (psum_walk_rule, not yet in force: PSUM_WALK_BY_DEFAULT) takes expected_m_for_psum_layout up to
    PSUM_WALK_MAX_EXPECTED_M rows; the walk never runs with zeroed gaps, MN-major A, no expected rows, psum_walk=False
    or ws=True, however asked."""
    decode = call("m_psum", m=32 * 4096, n=4096, k=7168, groups=32, zero_gaps=False, d_aligned=True, expected_m=20)
    walk = Bf16Overrides(psum_walk=True)
    p = bf16_plan.plan(decode, walk)
    masked = bf16_plan.plan(call("masked", m=4096, n=4096, k=7168, groups=32, expected_m=20))
    assert p.psum_walk and p.kernel == "tl" and p.config == masked.config and p.grid == masked.grid
    assert (p.config.block_m, p.config.block_n) == bf16_plan.MASKED_DECODE_TILE[:2]
    limit = bf16_plan.PSUM_WALK_MAX_EXPECTED_M
    assert bf16_plan.psum_walk_rule(replace(decode, expected_m=limit))
    assert not bf16_plan.psum_walk_rule(replace(decode, expected_m=limit + 1))
    for other in (replace(decode, expected_m=0), replace(decode, zero_gaps=True), replace(decode, a_k_major=False)):
        assert not bf16_plan.plan(other, walk).psum_walk, other
    assert not bf16_plan.plan(decode, Bf16Overrides(psum_walk=False)).psum_walk
    assert not bf16_plan.plan(decode, Bf16Overrides(ws=True, psum_walk=True)).psum_walk
    assert bf16_plan.plan(replace(decode, expected_m=limit + 1), walk).psum_walk
    with pytest.raises(ValueError, match="psum_walk"):
        Bf16Overrides(psum_walk=1)


def test_m_grouped_contiguous_mn_major_a():
    a, b, ids, _, truth, _ = contiguous_inputs([64, 64], 32, 48, 64, "nt")
    a = padded(a, "col")
    d = torch.empty(a.size(0), 32, dtype=BF16, device=DEVICE)
    old = runtime.get_mk_alignment_for_contiguous_layout()
    runtime.set_mk_alignment_for_contiguous_layout(64)
    try:
        run_triton("m_grouped_bf16_gemm_nt_contiguous", a, b, d, ids, "nk", False, False)
    finally:
        runtime.set_mk_alignment_for_contiguous_layout(old)
    assert_close(d, truth)


def test_m_grouped_contiguous_declines_what_no_tile_covers():
    a, b, ids, _, _, _ = contiguous_inputs([20, 12], 16, 32, 32, "nt")
    d = torch.empty(a.size(0), 16, dtype=BF16, device=DEVICE)
    old = runtime.get_mk_alignment_for_contiguous_layout()
    runtime.set_mk_alignment_for_contiguous_layout(32)  # no tile height (64, 128) divides 32
    try:
        result = triton_launcher("m_grouped_bf16_gemm_nt_contiguous")(a, b, d, ids, "nk", False, False)
    finally:
        runtime.set_mk_alignment_for_contiguous_layout(old)
    assert result is NotImplemented


# ---- masked ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("b_order", ["row", "col"])
def test_masked(b_order):
    num_groups, max_m, n, k = 3, 40, 24, 80
    masked = [0, 40, 17]
    a = randn(num_groups, max_m, k)
    b_nk = randn(num_groups, n, k)
    b = b_nk if b_order == "row" else b_nk.transpose(1, 2).contiguous().transpose(1, 2)
    d = torch.full((num_groups, max_m, n), SENTINEL, dtype=BF16, device=DEVICE)
    masked_m = torch.tensor(masked, dtype=torch.int32, device=DEVICE)
    run_triton("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, 24, "nk")
    for g, mg in enumerate(masked):
        if mg:
            assert_close(d[g, :mg], nt_truth(a[g, :mg], b_nk[g]), f"group {g}")
        assert torch.all(d[g, mg:] == SENTINEL), f"group {g}: rows past masked_m are untouched"


# Masked split-K (gemm/bf16/kernels/gemm.py: the tiles of the last, partial wave, counted on the device from masked_m,
# run as min(split_k, grid // those tiles) K ranges). The grid is the SMs runtime.set_num_sms gives (1 on a CPU without
# it): small grids put whole waves before the split last wave, or no whole wave, or a last wave too wide to split.
SPLIT_TILE = (16, 16, 16)  # (BM, BN, BK): K = 200 is 13 K blocks, the last one a TMA-padded tail


def masked_split_case(masked, n=37, k=200, max_m=40):
    g = len(masked)
    a, b = randn(g, max_m, k), randn(g, n, k)
    d = torch.full((g, max_m, n), SENTINEL, dtype=BF16, device=DEVICE)
    return a, b, d, torch.tensor(masked, dtype=torch.int32, device=DEVICE)


def expected_split_slots(masked, n, sms, split):
    """Workspace slots the kernel writes: (tiles of the last wave) x (its pieces per tile), 0 when unsplit."""
    bm, bn, _ = SPLIT_TILE
    tiles = sum(-(-m // bm) for m in masked) * -(-n // bn)
    last = tiles % sms
    pieces = min(split, sms // last) if last else 1
    return last * pieces if pieces > 1 else 0


def run_masked_split(monkeypatch, a, b, d, masked_m, split, sms):
    """The masked op on the split tile through the CUDA path; returns (workspace, counters) of the launch, the
    workspace filled with NaN before the kernel runs (so the slots it wrote can be counted)."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    seen = []

    def buffers(d_, split_, counters_, elems, recorder=None):
        ws, counters = real(d_, split_, counters_, elems, recorder)
        if split_ > 1:
            ws.fill_(float("nan"))
        seen.append((ws, counters))
        return ws, counters
    real = bf16_launch.split_k_buffers
    monkeypatch.setattr(bf16_launch, "split_k_buffers", buffers)
    old = runtime.get_num_sms()
    runtime.set_num_sms(sms)
    try:
        cfg = Bf16Config(*SPLIT_TILE, 2, 4, split_k=split)
        run_forced("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, 20, "nk", overrides=Bf16Overrides(config=cfg))
    finally:
        runtime.set_num_sms(old)
    return seen[-1] if seen else (None, None)


# (masked, grid, split): 3 x 3 + 2 x 3 = 15 tiles of 16 x 16 (masked_m past one tile: 40 rows)
@pytest.mark.parametrize("masked, sms, split", [
    ([0, 40, 17], 6, 3),    # 2 whole waves of 6, a last wave of 3 tiles in 2 pieces each (6 // 3)
    ([0, 40, 17], 64, 8),   # no whole wave: 15 tiles in 4 pieces each (64 // 15)
    ([0, 40, 17], 32, 3),   # 15 tiles in 2 pieces (32 // 15), split 3 allows more
    ([0, 40, 17], 4, 4),    # a last wave of 3 of 4 SMs: unsplit, no counter touched
    ([9, 0, 33, 1], 8, 5),  # 4 x 3 = 12 tiles = 8 + 4: the last 4 in 2 pieces; rows 1 and 9 of a 16-row tile
])
def test_masked_split_k_last_wave(monkeypatch, masked, sms, split):
    n, k = 37, 200  # (odd N: a column tail in every tile row; K: a padded K block)
    a, b, d, masked_m = masked_split_case(masked, n, k)
    ws, counters = run_masked_split(monkeypatch, a, b, d, masked_m, split, sms)
    for g, mg in enumerate(masked):
        if mg:
            assert_close(d[g, :mg], nt_truth(a[g, :mg], b[g]), f"group {g}")
        assert torch.all(d[g, mg:] == SENTINEL), f"group {g}: rows past masked_m are untouched"
    slots = ws.view(-1, SPLIT_TILE[0] * SPLIT_TILE[1])
    written = int((~slots.isnan()).all(1).sum())
    assert written == expected_split_slots(masked, n, sms, split), written
    assert int((~slots.isnan()).any(1).sum()) == written  # (whole slots or none)
    assert ws.numel() == sms * SPLIT_TILE[0] * SPLIT_TILE[1]  # (at most a slot per program)
    assert torch.all(counters[:sms] == 0), "the last piece of every split tile resets its counter"
    # the same bits call after call (the second replays the recorded launch)
    first = d.clone()
    d.fill_(SENTINEL)
    run_masked_split(monkeypatch, a, b, d, masked_m, split, sms)
    assert torch.equal(d.view(torch.int16), first.view(torch.int16))


def test_masked_split_k_empty_groups_write_nothing(monkeypatch):
    a, b, d, masked_m = masked_split_case([0, 0, 0])
    ws, counters = run_masked_split(monkeypatch, a, b, d, masked_m, 4, 8)
    assert torch.all(d == SENTINEL)
    assert bool(ws.isnan().all()) and torch.all(counters == 0)


def test_masked_split_k_b_mn_major(monkeypatch):
    # A stacked MN-major B (a K block must divide K: 208 = 13 x 16) split at the same K offsets.
    masked = [5, 23]
    a, b_nk, d, masked_m = masked_split_case(masked, n=40, k=208)
    b = b_nk.transpose(1, 2).contiguous().transpose(1, 2)
    run_masked_split(monkeypatch, a, b, d, masked_m, 3, 8)  # (1 + 2 m-blocks) x 3 = 9 tiles: 8 whole, 1 in 3 pieces
    for g, mg in enumerate(masked):
        assert_close(d[g, :mg], nt_truth(a[g, :mg], b_nk[g]), f"group {g}")
        assert torch.all(d[g, mg:] == SENTINEL)


# ---- K-grouped ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("ks", [[64, 0, 128, 32], [96], [0, 0]], ids=["with_empty", "single", "all_empty"])
def test_k_grouped(ks, accumulate):
    m, n = 40, 24
    a, b = randn(sum(ks), m), randn(sum(ks), n)
    d = randn(len(ks), m, n, dtype=torch.float32)
    c = None if accumulate == "none" else (d if accumulate == "d" else randn(len(ks), m, n, dtype=torch.float32))
    truth = torch.zeros(len(ks), m, n, dtype=torch.float64, device=DEVICE)
    start = 0
    for g, kg in enumerate(ks):
        truth[g] = nt_truth(a[start:start + kg].T, b[start:start + kg].T)
        start += kg
    if c is not None:
        truth += c.double()
    layout = torch.tensor(ks, dtype=torch.int32, device=DEVICE)
    run_triton("k_grouped_bf16_gemm_tn_contiguous", a, b, d, ks, layout, c, "mn", False)
    assert_close(d, truth, str(ks))


def test_k_grouped_declines_k_sizes_no_block_divides():
    ks = [24, 40]  # gcd 8 < 16, the smallest K block
    a, b = randn(sum(ks), 16), randn(sum(ks), 16)
    d = torch.zeros(2, 16, 16, device=DEVICE)
    layout = torch.tensor(ks, dtype=torch.int32, device=DEVICE)
    result = triton_launcher("k_grouped_bf16_gemm_tn_contiguous")(a, b, d, ks, layout, None, "mn", False)
    assert result is NotImplemented


# ---- the plan ----------------------------------------------------------------------------------------------------

def call(grouping="dense", m=4096, n=2112, k=7168, groups=1, out_bytes=2, **kw):
    return Bf16Call(bf16_plan.GROUPING[grouping], m, n, k, groups, 132, False, out_bytes, True, True, True, **kw)


def test_plan_is_pure_and_fits_shared_memory():
    for c in (call(), call(m=1), call(m=128, n=24576, k=1536), call(out_bytes=4, n=129280),
              call("m_ids", m=32768, n=4096, k=4096, groups=8), call("masked", m=4096, n=4096, k=7168, groups=32,
                                                                     expected_m=20),
              call("k_grouped", m=4096, n=7168, k=32768, groups=4, out_bytes=4, k_divisor=128)):
        p1, p2 = bf16_plan.plan(c), bf16_plan.plan(c)
        assert p1 == p2 and p1 is not None
        cfg = p1.config
        smem = cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * 2
        if p1.kernel == "ws":  # (two 64-row staging buffers for D)
            smem += 2 * 64 * cfg.block_n * c.out_bytes
            assert smem <= bf16_plan.WS_SMEM_BYTES and cfg.num_stages >= 3, (c, p1)
            continue
        smem += cfg.block_m * cfg.block_n * c.out_bytes if p1.d_tma else 0
        assert smem <= bf16_plan.SMEM_BYTES and cfg.num_stages >= 2, (c, p1)
        assert 1 <= p1.grid <= 132


def test_plan_splits_decode_rows_and_keeps_big_ones_whole():
    decode = bf16_plan.plan(call(m=1))
    assert decode.config.split_k > 1 and decode.config.block_m == 16
    assert bf16_plan.plan(call(n=7168, k=16384)).config.split_k == 1


def test_deterministic_mode_never_splits_k(monkeypatch):
    """Deterministic mode: no split-K plan (dense decode rows, the WS kernel's split tail, the masked last wave),
    so a row's K reduction does not depend on M; a forced split_k still splits (an explicit request). The flag at
    call time reaches the plan through the launcher's call."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    rows = {"decode": call(m=1), "tail wave": call(m=4096, n=2112, k=7168),
            "masked": call("masked", m=4096, n=4096, k=7168, groups=6, expected_m=20)}
    assert bf16_plan.plan(rows["decode"]).config.split_k > 1
    for name, c in rows.items():
        pinned = bf16_plan.plan(replace(c, deterministic=True))
        assert pinned.config.split_k == 1 and pinned.kernel != "ws_tail", name
    assert bf16_plan.plan(replace(rows["decode"], deterministic=True), Bf16Overrides(split_k=2)).config.split_k == 2
    d = torch.empty(1, 2112, dtype=BF16)
    before = deep_gemm.get_deterministic_algorithms()
    try:
        deep_gemm.use_deterministic_algorithms(True)
        assert bf16_launch._call(0, 1, 2112, 7168, 1, d, None, True, True, True).deterministic
    finally:
        deep_gemm.use_deterministic_algorithms(before)
    assert not bf16_launch._call(0, 1, 2112, 7168, 1, d, None, True, True, True).deterministic


def test_plan_respects_alignment_and_k_divisor():
    assert bf16_plan.plan(call("m_psum", m=8192, groups=4, psum_align=64)).config.block_m == 64
    assert bf16_plan.plan(call("m_psum", m=8192, groups=4, psum_align=32)) is None
    assert bf16_plan.plan(call("k_grouped", groups=4, out_bytes=4, k_divisor=96)).config.block_k == 32
    assert bf16_plan.plan(call("k_grouped", groups=4, out_bytes=4, k_divisor=8)) is None
    forced = bf16_plan.plan(call(), Bf16Overrides(block_m=128, block_n=128, split_k=1))
    assert (forced.config.block_m, forced.config.block_n) == (128, 128)


def test_plan_splits_the_last_wave_of_few_tiles():
    # 4096 x 2112 on 128 x 128: 544 tiles = 4 waves + 16; 4096 x 576: 160 = 1 wave + 28. The whole waves run whole
    # tiles, the rest are split along K so their pieces fill the machine.
    for n, waves in ((2112, 4), (576, 1)):
        p = bf16_plan.plan(call(n=n), Bf16Overrides(ws=False))
        cfg = p.config
        tiles = -(-4096 // cfg.block_m) * -(-n // cfg.block_n)
        assert cfg.split_k > 1 and cfg.split_from == waves * 132 < tiles, (n, p)
        assert p.grid == 132 and p.kernel == "tl"
    # Whole waves only (132 tiles): no tail to split; 128 x 256 tiles (pointer partials would spill): no split.
    assert all(f == 0 for _, f in bf16_plan._splits(call(m=128 * 132, n=128), 128, 128))
    assert list(bf16_plan._splits(call(), 128, 256)) == [(1, 0)]


def test_plan_model_prices_the_split_waves():
    c = call(n=576)
    whole = Bf16Config(128, 128, 64, 5, 8)
    tail = Bf16Config(128, 128, 64, 5, 8, split_k=4, split_from=132)
    assert bf16_plan._cost(c, tail) < bf16_plan._cost(c, whole)  # 1.25 waves instead of 2
    assert bf16_plan.plan(c, Bf16Overrides(config=tail)).config == tail
    # A split_from past the tiles is clipped (no split tile): the grid is the tile count.
    clipped = bf16_plan.plan(call(m=256, n=256), Bf16Overrides(config=tail))
    assert clipped.config.split_from == 4 and clipped.grid == 4


def test_plan_chooses_the_warp_specialised_kernel_where_it_measured_faster(monkeypatch):
    # Dense and expert-id calls of 128+ rows: the WS kernel's tiles are priced beside the tl.* ones; psum stays on
    # tl.* (measured slower there); decode rows never; DG_BF16_WS / Bf16Overrides.ws force either way.
    assert bf16_plan.plan(call(n=4096)).kernel == "ws"
    assert bf16_plan.plan(call("m_ids", m=32768, n=4096, k=4096, groups=8)).kernel == "ws"
    assert bf16_plan.plan(call("m_psum", m=32768, n=4096, k=4096, groups=8)).kernel == "tl"
    assert bf16_plan.plan(call(m=1)).kernel == "tl"
    assert bf16_plan.plan(call(n=4096), Bf16Overrides(ws=False)).kernel == "tl"
    assert bf16_plan.plan(call("m_psum", m=32768, n=4096, k=4096, groups=8), Bf16Overrides(ws=True)).kernel == "ws"
    # 4096 x 2176 (17 tile columns): the WS kernel's 4 whole waves of 128 x 128 tiles, then the tl.* kernel's
    # pieces of the other 16. (4096 x 2112 = 11 columns of 192: the WS kernel's 128 x (128 + 64) tile instead.)
    assert bf16_plan.plan(call()).config.block_n_tail == 64
    both = bf16_plan.plan(call(n=2176))
    assert both.kernel == "ws_tail" and both.config.split_from == 4 * 132 and both.config.split_k > 1
    assert both.ws_config.block_n == both.config.block_n == 128 and both.ws_config.num_stages >= 3
    assert bf16_plan.plan(call(n=2176), Bf16Overrides(split_k=1)).kernel == "ws"
    assert bf16_plan.plan(call(n=2176), Bf16Overrides(ws_tail=False)).kernel != "ws_tail"
    forced = bf16_plan.plan(call(n=576), Bf16Overrides(ws_tail=True))
    assert forced.kernel == "ws_tail" and forced.config.split_from == 132
    assert bf16_plan.plan(call(n=4096), Bf16Overrides(ws=False)).kernel == "tl"
    assert bf16_plan.plan(call(n=4096), Bf16Overrides(ws=True)).kernel == "ws"


def test_plan_warp_specialised_only_where_it_covers():
    ws = Bf16Overrides(ws=True)
    assert bf16_plan.plan(call(), ws).kernel == "ws"
    assert bf16_plan.plan(call(m=1), ws).kernel == "tl"  # decode tiles
    assert bf16_plan.plan(call("masked", groups=4, expected_m=256), ws).kernel == "tl"
    assert bf16_plan.plan(call("m_psum", m=8192, groups=4, zero_gaps=False), ws).kernel == "tl"
    with_c = Bf16Call(0, 4096, 2112, 7168, 1, 132, True, 2, True, True, True, c_tma=False)
    assert bf16_plan.plan(with_c, ws).kernel == "tl"  # C without a TMA layout
    fp32 = bf16_plan.plan(call(out_bytes=4), ws)
    assert fp32.kernel == "ws" and fp32.config.block_n == 128
    for p, out_bytes in ((bf16_plan.plan(call(), ws), 2), (fp32, 4), (bf16_plan.plan(call(n=24576, k=1536), ws), 2)):
        cfg = p.config
        smem = cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * 2 + 2 * 64 * cfg.block_n * out_bytes
        assert cfg.num_stages >= 3 and smem <= 232448 - 2048


# bench_bf16_gemm.K_GROUPED's rows (G, M, N, K per group): DeepGEMM's K-grouped shapes.
K_GROUPED_ROWS = [(4, 4096, 7168, 8192), (4, 7168, 2048, 8192), (8, 4096, 7168, 4096), (8, 7168, 2048, 4096),
                  (16, 4096, 7168, 2048), (16, 7168, 2048, 2048)]


def k_grouped_call(m=4096, n=7168, groups=4, k_per=8192, has_c=True, **kw):
    """A K-grouped call as its launcher builds it: FP32 D, MN-major A and B, D and C TMA-aligned as [G*M, N]."""
    facts = dict(k_divisor=128, d_aligned=True, c_tma=has_c)
    facts.update(kw)
    return Bf16Call(bf16_plan.GROUPING["k_grouped"], m, n, groups * k_per, groups, 132, has_c, 4, False, False, False,
                    **facts)


def test_plan_k_grouped_on_the_warp_specialised_kernel():
    ws = Bf16Overrides(ws=True)
    c = k_grouped_call()
    # The shipped defaults (both faster): K-grouped calls on the WS kernel, the
    # tl.* fallback's K range marked warp-uniform.
    assert bf16_plan.UNIFORM_K_GROUPED_TL and bf16_plan.plan(c).kernel == "ws"
    # The WS kernel off: the tl.* kernel, its K range marked as UNIFORM_K_GROUPED_TL says.
    p = bf16_plan.plan(c, Bf16Overrides(ws=False))
    assert p.kernel == "tl" and p.uniform == bf16_plan.UNIFORM_K_GROUPED_TL and not p.d_tma
    # Forced: 128 x 128 (FP32 D: a 128 x 256 tile's staging buffers leave too few stages), the ring as deep as fits
    # beside two FP32 staging buffers, one program per SM over G * tiles, K range marked (UNIFORM_TILES).
    p = bf16_plan.plan(c, ws)
    assert p.kernel == "ws" and (p.config.block_m, p.config.block_n, p.config.block_k) == (128, 128, 64)
    per_stage, staging = (128 + 128) * 64 * 2, 2 * 64 * 128 * 4
    assert p.config.num_stages * per_stage + staging <= bf16_plan.WS_SMEM_BYTES
    assert (p.config.num_stages + 1) * per_stage + staging > bf16_plan.WS_SMEM_BYTES
    assert p.grid == 132 and p.uniform == bf16_plan.UNIFORM_TILES and p == bf16_plan.plan(c, ws)
    assert bf16_plan.plan(k_grouped_call(m=128, n=256, groups=1), ws).grid == 2  # (1 group x 1 x 2 tiles)
    assert not bf16_plan.plan(c, Bf16Overrides(ws=True, uniform_tiles=False)).uniform
    assert bf16_plan.plan(c, Bf16Overrides(uniform_tiles=True)).uniform  # (tl.*: the warp-uniform K range)
    assert bf16_plan.plan(k_grouped_call(m=192), ws).kernel == "ws"  # (the last tile's upper slab stores nothing)
    assert bf16_plan.plan(k_grouped_call(has_c=False), ws).kernel == "ws"
    # Where the WS kernel does not cover it, the tl.* kernel: a slab straddling two groups (M % 64), D's rows not
    # TMA-aligned, C not laid out as D, the interpreter (no Gluon; nor inline assembly: never uniform), K sizes
    # only a 32-row K block divides (its ring and K step are 64), tiles of 64 rows.
    for odd in (k_grouped_call(m=200), k_grouped_call(m=96), k_grouped_call(d_aligned=False),
                k_grouped_call(c_tma=False), k_grouped_call(interpreting=True)):
        p = bf16_plan.plan(odd, ws)
        assert p.kernel == "tl", odd
    assert not bf16_plan.plan(k_grouped_call(interpreting=True), Bf16Overrides(ws=True, uniform_tiles=True)).uniform
    assert bf16_plan.plan(k_grouped_call(m=64), ws).kernel == "tl"
    assert bf16_plan.plan(c, Bf16Overrides(ws=False)).kernel == "tl"
    # "auto": every K-grouped bench row on the WS kernel, bit-for-bit the forced plan.
    for g, m, n, k_per in K_GROUPED_ROWS:
        row = k_grouped_call(m, n, g, k_per)
        assert bf16_plan.plan(row) == bf16_plan.plan(row, ws), row
        assert bf16_plan.plan(row).kernel == "ws"
    assert bf16_plan.plan(c, Bf16Overrides(ws=False)).kernel == "tl"


def test_plan_runs_psum_with_untouched_gaps_on_the_warp_specialised_kernel():
    """DeepGEMM's SM90 psum calls leave gap rows untouched: the WS kernel covers them where D's rows are TMA-aligned
    (whole slabs by TMA, the slab holding a group's end by pointers), forced (ws=True) or by default; never where D
    may not be TMA-stored."""
    untouched = call("m_psum", m=33464, n=4096, k=2048, groups=8, zero_gaps=False, d_aligned=True)
    untouched = replace(untouched, d_tma=False)  # (as the launcher builds it: no whole-tile TMA store)
    ws = Bf16Overrides(ws=True)
    assert bf16_plan.plan(untouched).kernel == "ws"
    forced = bf16_plan.plan(untouched, ws)
    assert forced.kernel == "ws" and forced.config.block_n == 256 and forced.d_tma
    assert bf16_plan.plan(replace(untouched, d_aligned=False), ws).kernel == "tl"
    assert bf16_plan.plan(untouched, Bf16Overrides(ws=True, d_tma=False)).kernel == "tl"
    assert bf16_plan.plan(replace(untouched, interpreting=True), ws).kernel == "tl"
    # zeroed gaps: "auto" leaves them to tl.*
    zeroed = call("m_psum", m=33464, n=4096, k=2048, groups=8, zero_gaps=True, d_aligned=True)
    assert bf16_plan.plan(zeroed).kernel == "tl"
    assert bf16_plan.plan(untouched, Bf16Overrides(ws=False)).kernel == "tl"


def test_uniform_tiles_is_planned_for_psum_on_the_warp_specialised_kernel_only():
    """Bf16Overrides.uniform_tiles marks the psum layout's values warp-uniform in the WS kernel; no other layout or
    kernel reads them, the default is bf16_plan.UNIFORM_TILES, and it changes nothing else of the plan."""
    calls = {"psum untouched": replace(call("m_psum", m=33464, n=4096, k=2048, groups=8, zero_gaps=False,
                                            d_aligned=True), d_tma=False),
             "psum zeroed": call("m_psum", m=33464, n=4096, k=2048, groups=8),
             "ids": call("m_ids", m=33464, n=4096, k=2048, groups=8), "dense": call(n=4096)}
    for kind, c in calls.items():
        for ws in (True, None):
            base = bf16_plan.plan(c, Bf16Overrides(ws=ws))
            on = bf16_plan.plan(c, Bf16Overrides(ws=ws, uniform_tiles=True))
            off = bf16_plan.plan(c, Bf16Overrides(ws=ws, uniform_tiles=False))
            psum_ws = kind.startswith("psum") and on.kernel == "ws"
            assert base.uniform == (bf16_plan.UNIFORM_TILES and psum_ws)
            assert on.uniform == psum_ws and not off.uniform
            assert replace(on, uniform=False) == off, kind
    with pytest.raises(ValueError, match="uniform_tiles"):
        Bf16Overrides(uniform_tiles=1)
    with pytest.raises(ValueError, match="ws"):
        Bf16Overrides(ws="on")


def test_untouched_gaps_and_uniform_tiles_reach_the_warp_specialised_kernel(monkeypatch):
    """The launcher passes the call's gap rule (ZERO_GAPS) and the plan's uniform flag (UNIFORM) to the WS kernel,
    with D's storage and row stride for the pointer store of the slabs holding a group's end; both in the compiled
    kernel's key. (The launch itself is faked: the Gluon kernel does not run in the interpreter.)"""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    launches = []

    def fake_launch(kernel, grid, args, *, config_key, **kwargs):
        launches.append((dict(zip(kernel.arg_names, args)), config_key))
    monkeypatch.setattr(bf16_launch, "launch", fake_launch)
    monkeypatch.setattr(bf16_launch, "interpreting", lambda: False)
    a, b, ids, ends, _, _ = contiguous_inputs([300, 0, 70], 256, 128, 128, "nt")
    d = torch.full((a.size(0), 256), SENTINEL, dtype=BF16, device=DEVICE)
    cases = [(ends, True, False, Bf16Overrides(ws=True, uniform_tiles=True), (False, True)),
             (ends, True, False, Bf16Overrides(ws=True, uniform_tiles=False), (False, False)),
             (ends, True, True, Bf16Overrides(ws=True, uniform_tiles=True), (True, True)),
             (ids, False, False, Bf16Overrides(ws=True, uniform_tiles=True), (True, False))]
    for layout, psum, zero_padding, over, (zero_gaps, uniform) in cases:
        launches.clear()
        bf16_launch.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, "nk", psum, zero_padding, overrides=over)
        (args, key), = launches
        assert (args["ZERO_GAPS"], args["UNIFORM"]) == (zero_gaps, uniform) and key[-2:] == (zero_gaps, uniform)
        assert args["d_ptr"] is d and args["stride_dm"] == d.stride(0)


def test_plan_gives_decode_and_short_k_rows_valid_streaming_configs():
    # Dense decode rows: a small-row tl.* tile covering the row, a split whose pieces fit one round of programs and
    # keep MIN_K_BLOCKS_PER_SPLIT K blocks each, a ring within MAX_STAGES that fits the shared memory; the 6-stage
    # ring (DECODE_STAGES) wherever the tile is split.
    for n, k in ((2112, 7168), (576, 7168), (7168, 16384), (7168, 2048), (4096, 7168), (24576, 1536)):
        p = bf16_plan.plan(call(m=1, n=n, k=k))
        cfg = p.config
        assert p.kernel == "tl" and cfg.block_m < 64, (n, k, p)
        tiles = -(-n // cfg.tile_n)
        assert tiles * cfg.split_k <= 132 or cfg.split_k == 1, (n, k, p)
        assert k // cfg.block_k >= bf16_plan.MIN_K_BLOCKS_PER_SPLIT * cfg.split_k, (n, k, p)
        assert cfg.num_stages <= bf16_plan.MAX_STAGES
        assert cfg.split_k == 1 or cfg.num_stages == bf16_plan.DECODE_STAGES
    # M = 128 rows: 64-row tiles on rings deeper than the decode ring; split pieces of at least MIN_PIECE_DEPTHS
    # rings.
    for n in (2112, 576):
        cfg = bf16_plan.plan(call(m=128, n=n, k=7168)).config
        assert cfg.block_m == 64 and cfg.num_stages > bf16_plan.DECODE_STAGES, cfg
        if cfg.split_k > 1:
            pieces_k_blocks = 7168 // cfg.block_k // cfg.split_k
            assert pieces_k_blocks >= bf16_plan.MIN_PIECE_DEPTHS * cfg.num_stages, cfg
    # ... a rule of the heuristic: a forced split count is taken as given.
    forced = bf16_plan.plan(call(m=64, n=576, k=7168), Bf16Overrides(split_k=8))
    assert forced is not None and forced.config.split_k == 8
    # Masked decode tiles: the measured 32-row tile at the plan's own stage count (MASKED_DECODE_TILE).
    masked = bf16_plan.plan(call("masked", m=4096, n=4096, k=7168, groups=6, expected_m=20))
    mc = masked.config
    assert mc.block_m == 32 and mc.num_stages == bf16_plan._stages(mc.block_m, mc.block_n, mc.block_k, 0)
    # Dense K <= 512 of 128+ rows: the WS kernel's 128 x 128 tile (4096 x 32768 x 512: 205.2 us against 212.4 on
    # 128 x 256 and 264.1 on tl.*); from K = 1536 on, its 128 x 256 tile.
    for m in (128, 4096):
        p = bf16_plan.plan(call(m=m, n=32768, k=512))
        assert p.kernel == "ws" and (p.config.block_m, p.config.block_n, p.config.num_stages) == (128, 128, 6), p
    assert bf16_plan.plan(call(n=24576, k=1536)).config.block_n == 256
    # Fewer than a wave of 128 x 128 tiles: the cost model's choice, as before (unmeasured there).
    few = bf16_plan.plan(call(m=128, n=2112, k=512))
    assert few.kernel == "tl" and few.config.block_m == 64, few
    # Forced choices still reach the wide tile on short K (the sweep's A/B).
    forced = bf16_plan.plan(call(n=32768, k=512), Bf16Overrides(ws=True, block_m=128, block_n=256, split_k=1))
    assert forced.kernel == "ws" and forced.config.block_n == 256


# bench_bf16_gemm's masked rows (DeepGEMM's test rows): (G, expected rows per group) x (N, K), Mmax 4096
MASKED_BENCH = [(g, e, n, k) for g, e in [(32, 192), (6, 1024), (32, 20), (6, 20)]
                for n, k in [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]]


def masked_bench_call(g, e, n, k):
    return Bf16Call(bf16_plan.GROUPING["masked"], 4096, n, k, g, 132, False, 2, True, True, False, expected_m=e,
                    d_aligned=True)


@pytest.mark.parametrize("row", MASKED_BENCH, ids=lambda r: "G%d-m%d-%dx%d" % r)
def test_plan_splits_only_the_few_tile_masked_decode_rows(row):
    c = masked_bench_call(*row)
    p = bf16_plan.plan(c)
    before = bf16_plan.plan(c, Bf16Overrides(split_k=1))
    assert before.config.split_k == 1
    # The split is the model's (masked_split): only decode rows split their last wave, on the decode tile, one
    # program per SM.
    split = bf16_plan.masked_split(c, before.config)
    assert p == replace(before, config=replace(before.config, split_k=split)), (row, p)
    assert split == 1 or row[1] <= bf16_plan.MASKED_DECODE_MAX_M
    if split > 1:
        assert p.kernel == "tl" and p.grid == 132 and not p.d_tma
        assert (p.config.block_m, p.config.block_n, p.config.block_k) == bf16_plan.MASKED_DECODE_TILE


def test_masked_split_model_and_overrides():
    c = masked_bench_call(6, 20, 6144, 7168)
    tile = replace(bf16_plan.plan(c).config, split_k=1)
    times = [bf16_plan._masked_split_time(c, tile, s) for s in range(1, 9)]
    # 24 tiles in the last wave: 2 pieces (48 SMs) stream slower than HBM, 4 (96) reach it, more only add reduction
    assert times[0] > times[1] > times[3] and times[3] < times[4] <= times[7]
    assert bf16_plan.masked_split(c, tile) == 4
    # a split is capped by K: pieces of MIN_K_BLOCKS_PER_SPLIT K blocks (K = 1536: 12 blocks of 128, so 3)
    for k in (1536, 2048, 3072):
        split = bf16_plan.masked_split(masked_bench_call(6, 20, 6144, k), tile)
        assert 1 < split <= k // 128 // bf16_plan.MIN_K_BLOCKS_PER_SPLIT, (k, split)
    assert bf16_plan.masked_split(masked_bench_call(6, 20, 6144, 1536), tile) == 3
    # whole waves only (6 x 44 n-blocks of 128 = 264 tiles): nothing to split; expected rows past the decode rule
    assert bf16_plan.masked_split(masked_bench_call(6, 20, 44 * 128, 7168), tile) == 1
    assert bf16_plan.masked_split(masked_bench_call(6, 33, 6144, 7168), tile) == 1
    assert bf16_plan.masked_split(c, replace(tile, split_k=2)) == 1  # (a config split already: taken as given)
    # Bf16Overrides forces either way (A/B), on the plan's tile or a forced one
    assert bf16_plan.plan(c, Bf16Overrides(split_k=1)).config.split_k == 1
    forced = bf16_plan.plan(c, Bf16Overrides(split_k=6))
    assert forced.kernel == "tl" and forced.config.split_k == 6 and forced.config.block_m == 32
    assert bf16_plan.plan(masked_bench_call(32, 20, 6144, 7168), Bf16Overrides(split_k=3)).config.split_k == 3
    cfg = Bf16Config(32, 128, 128, 5, 4, split_k=3)
    assert bf16_plan.plan(c, Bf16Overrides(config=cfg)).config == cfg
    # the psum and expert-id layouts still do not split
    for grouping in ("m_ids", "m_psum"):
        assert bf16_plan.plan(call(grouping, m=4096, n=4096, k=4096, groups=4), Bf16Overrides(split_k=2)) is None


@pytest.mark.parametrize("groups", [6, 32])
@pytest.mark.parametrize("n, k", [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)])
def test_plan_gives_masked_decode_rows_the_measured_32_row_tile(groups, n, k):
    """bench_bf16_gemm's masked rows with 20 expected rows per group: the 32 x 128 tile (BK 128) was the fastest of
    ten tl.* tiles on each, where the cost model alone prices them all alike; 33 and 192 expected rows are past the
    rule."""
    for expected in (20, 32):
        cfg = bf16_plan.plan(call("masked", m=4096, n=n, k=k, groups=groups, expected_m=expected)).config
        assert (cfg.block_m, cfg.block_n, cfg.block_k) == bf16_plan.MASKED_DECODE_TILE, (expected, cfg)
    for expected in (33, 192):
        assert bf16_plan._masked_decode_tile(call("masked", m=4096, n=n, k=k, groups=groups,
                                                  expected_m=expected)) is None
    # A forced tile is still taken as given.
    forced = bf16_plan.plan(call("masked", m=4096, n=n, k=k, groups=groups, expected_m=20),
                            Bf16Overrides(block_m=64, block_n=256))
    assert (forced.config.block_m, forced.config.block_n) == (64, 256)


# ---- Masked calls on the warp-specialised kernel: plans and launches ----------------------------------------------
# ``m_grouped_bf16_gemm_nt_masked`` on the warp-specialised Gluon kernel (gemm/bf16/kernels/gemm_ws.py, GROUPING
# MASKED).

TOL = 1e-5  # DeepGEMM's own bound for BF16 GEMMs
MASKED = bf16_plan.GROUPING["masked"]
# bench_bf16_gemm's masked rows (G, expected rows per group) x (N, K), Mmax 4096
BENCH_ROWS = [(32, 192), (6, 1024)]
BENCH_NK = [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]


def masked_call(groups=6, expected=1024, n=4096, k=4096, max_m=4096, **kw):
    kw.setdefault("d_aligned", True)
    return Bf16Call(MASKED, max_m, n, k, groups, 132, False, 2, True, True, False, expected_m=expected, **kw)


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
        assert grid == (min(bf16_launch.usable_sms(), g * 2 * -(-n // args["BN"])), 1, 1)
    # the 64-row tile: SPLIT_N, D's block [64, BN/2], 64-row blocks in the grid
    launches.clear()
    bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 160, "nk",
                                              overrides=Bf16Overrides(ws=True, block_m=64, block_n=256))
    (name, args, key, grid), = launches
    assert name == "bf16_gemm_ws" and args["SPLIT_N"] and (args["BM"], args["BN"]) == (64, 256)
    assert list(args["d_desc"].block_shape) == [64, 128] and list(args["a_desc"].block_shape) == [64, 64]
    assert grid == (min(bf16_launch.usable_sms(), g * 4 * 1), 1, 1)
    launches.clear()
    bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 160, "nk", overrides=Bf16Overrides(ws=True))
    assert launches[0][1]["SPLIT_N"] is False
    # D with a gap between groups (a slice of a taller buffer): no [G*Mmax, N] view, so the tl.* kernel
    tall = torch.zeros(g, max_m + 8, n, dtype=BF16, device=DEVICE)[:, :max_m]
    launches.clear()
    bf16_launch.m_grouped_bf16_gemm_nt_masked(a, b, tall, masked_m, 160, "nk", overrides=Bf16Overrides(ws=True))
    assert [launch[0] for launch in launches] == ["bf16_gemm"]
