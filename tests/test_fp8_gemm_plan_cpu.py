"""FP8 GEMM plans and configs (CPU): the heuristic always returns a legal candidate, split-K fills the GPU, autotuning
picks the fastest shortlisted config and persists it, warmup validates its input."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.gemm.fp8 import autotune as fp8_autotune
from deep_gemm.gemm.fp8 import configs

SHAPES = [(1, 2112, 7168), (128, 576, 7168), (4096, 24576, 1536), (37, 200, 208), (0, 128, 128), (4096, 7168, 16384)]


@pytest.mark.parametrize("kind", ["dense", "m_grouped", "masked", "k_grouped"])
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("num_sms", [132, 78])
def test_heuristic_is_a_legal_candidate(kind, m, n, k, num_sms):
    problem = configs.Fp8GemmProblem(m, n, k, 4, kind, num_sms, expected_m=m)
    choice = configs.heuristic(problem)
    assert choice in configs.candidates(problem)
    assert choice.smem_bytes() <= configs.SMEM_BYTES_SM90
    if kind == "m_grouped":
        assert problem.m_alignment % choice.block_m == 0, "a grouped tile must not straddle two segments"


def test_small_m_splits_k_to_fill_the_gpu():
    choice = configs.heuristic(configs.Fp8GemmProblem(128, 2112, 7168))
    tiles = -(-128 // choice.block_m) * -(-2112 // choice.block_n)
    assert choice.split_k > 1
    assert tiles * choice.split_k <= 132 * choice.programs_per_sm  # one round of programs
    assert -(-7168 // 128) // choice.split_k >= configs.MIN_K_BLOCKS_PER_SPLIT


@pytest.mark.parametrize("n,k,want", [(4096, 7168, (64, 2)), (2112, 7168, (64, 4)), (7168, 16384, (128, 2)),
                                      (576, 7168, None), (7168, 2048, None), (24576, 1536, None)])
def test_one_wave_split_tiles_for_m_up_to_128(n, k, want):
    """64 < M <= 128 with the one-wave split-K kernel available: 128-row split tiles where a split fills >= 75 % of
    the SMs in one round (the measured wins), 128-wide only when each split keeps >= 32 K blocks; otherwise (and
    without the kernel) the 64-row rule."""
    for m in (65, 100, 128):
        problem = configs.Fp8GemmProblem(m, n, k, 1, "dense", 132, one_wave_split_k=True)
        choice = configs.heuristic(problem)
        assert choice in configs.candidates(problem)
        without = configs.heuristic(configs.Fp8GemmProblem(m, n, k, 1, "dense", 132))
        assert without.block_m == 64
        if want is None:
            assert choice == without
        else:
            assert (choice.block_m, choice.block_n, choice.split_k) == (128, *want)
            assert -(-n // choice.block_n) * choice.split_k <= 132
    # M <= 64 keeps the 64-row tiles
    small = configs.Fp8GemmProblem(64, 4096, 7168, 1, "dense", 132, one_wave_split_k=True)
    assert configs.heuristic(small).block_m == 64


@pytest.mark.parametrize("m,n,k,one_wave", [(1, 2112, 7168, False), (128, 2112, 7168, False),
                                             (100, 2112, 7168, True), (32, 4096, 7168, False)])
def test_deterministic_mode_never_splits_k(m, n, k, one_wave):
    """Deterministic mode (use_deterministic_algorithms): no split-K config is offered or chosen, so a row's K
    reduction order does not depend on M (batch invariance); the same rows split without it."""
    free = configs.Fp8GemmProblem(m, n, k, 1, "dense", 132, one_wave_split_k=one_wave)
    pinned = configs.Fp8GemmProblem(m, n, k, 1, "dense", 132, one_wave_split_k=one_wave, deterministic=True)
    assert configs.heuristic(free).split_k > 1
    assert configs.heuristic(pinned).split_k == 1
    assert all(c.split_k == 1 for c in configs.candidates(pinned))


def test_deterministic_mode_reaches_the_plan(monkeypatch):
    """The flag at call time reaches the FP8 plan through the call (fp8_launch.call_of)."""
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    d = torch.empty(1, 2112, dtype=torch.bfloat16)
    before = deep_gemm.get_deterministic_algorithms()
    try:
        deep_gemm.use_deterministic_algorithms(True)
        pinned = fp8_launch.call_of(fp8_plan.GROUPING["dense"], 1, 2112, 7168, 1, d, None, False)
        deep_gemm.use_deterministic_algorithms(False)
        free = fp8_launch.call_of(fp8_plan.GROUPING["dense"], 1, 2112, 7168, 1, d, None, False)
    finally:
        deep_gemm.use_deterministic_algorithms(before)
    assert pinned.deterministic and not free.deterministic
    pinned, free = (replace(c, num_sms=132) for c in (pinned, free))  # (the CPU has no SMs to count)
    assert configs.heuristic(fp8_plan.tile_problem(pinned)).split_k == 1
    assert configs.heuristic(fp8_plan.tile_problem(free)).split_k > 1


@pytest.mark.parametrize("n,k,b_per_row,has_c", [(2112, 7168, False, False), (576, 7168, False, False),
                                                  (32768, 512, False, False), (4096, 7168, True, True)])
def test_deterministic_mode_pins_one_kernel_and_tile_at_every_m(n, k, b_per_row, has_c):
    """Deterministic mode plans the same tl.* 64-row tile (wgmma), unsplit, at every M: 16/32-row tiles (mma.sync),
    the warp-specialised kernel and the 1D1D row tail each compute a row's bits differently, and the free plan
    takes several of them across these M."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    ms = (1, 13, 64, 100, 128, 2112, 4096, 65536)
    pinned = {fp8_plan.plan(replace(_dense_call(m, n, k, b_per_row, has_c), deterministic=True)) for m in ms}
    assert {(p.kernel, p.config.block_m, p.config.block_n, p.config.split_k, p.row_tail) for p in pinned} == {
        ("tl", *configs.DETERMINISTIC_TILE, 1, 0)}
    free = {(p.kernel, p.config.block_m, p.config.split_k)
            for p in (fp8_plan.plan(_dense_call(m, n, k, b_per_row, has_c)) for m in ms)}
    assert len(free) > 1


def test_autotune_leaves_deterministic_calls_on_the_pinned_tile():
    """With autotuning on, a deterministic call is not timed (a timed pick would follow the shape): no trial run,
    and its plan is the pinned tile."""
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    ran = []
    before = deep_gemm.autotune_enabled()
    try:
        deep_gemm.set_autotune(True)
        pinned = fp8_launch._plan_for(replace(_dense_call(100, 2112, 7168), deterministic=True),
                                      fp8_plan.NO_OVERRIDES, ran.append)
    finally:
        deep_gemm.set_autotune(before)
    assert not ran
    assert (pinned.kernel, pinned.config.block_m, pinned.config.block_n, pinned.config.split_k) == (
        "tl", *configs.DETERMINISTIC_TILE, 1)


def test_large_m_uses_full_tiles_without_split():
    choice = configs.heuristic(configs.Fp8GemmProblem(4096, 4096, 7168))
    assert (choice.block_m, choice.split_k, choice.programs_per_sm) == (128, 1, 1)


def test_autotune_picks_the_fastest_and_persists(tmp_path):
    problem = configs.Fp8GemmProblem(256, 1024, 2048)
    shortlist = fp8_autotune.shortlist(problem)
    assert len(shortlist) > 1 and set(shortlist) <= set(configs.candidates(problem))
    # A fake clock: the config with BN 64 and the largest split is "fastest".
    fastest = max((c for c in shortlist if c.block_n == 64), key=lambda c: c.split_k)
    ran = []
    timer = lambda run: (run(), 1.0 if ran[-1] != fastest else 0.5)[1]  # noqa: E731
    cache = fp8_autotune.AutotuneCache(str(tmp_path / "tune.json"))
    best = fp8_autotune.tune(problem, ran.append, timer=timer, cache=cache)
    assert best == fastest and set(ran) == set(shortlist)
    # A fresh cache object (another process) reads the choice back and does not re-time.
    reread = fp8_autotune.AutotuneCache(str(tmp_path / "tune.json"))
    assert reread.get(problem) == fastest
    ran.clear()
    assert fp8_autotune.tune(problem, ran.append, timer=timer, cache=reread) == fastest and not ran


def test_autotune_skips_configs_that_fail():
    problem = configs.Fp8GemmProblem(256, 1024, 2048)
    base = configs.heuristic(problem)

    def run(config):
        if config != base:
            raise RuntimeError("does not compile")

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        cache = fp8_autotune.AutotuneCache(tmp + "/t.json")
        assert fp8_autotune.tune(problem, run, timer=lambda r: (r(), 1.0)[1], cache=cache) == base


def test_set_autotune_round_trip():
    before = deep_gemm.autotune_enabled()
    try:
        deep_gemm.set_autotune(True)
        assert deep_gemm.autotune_enabled()
        deep_gemm.set_autotune(False)
        assert not deep_gemm.autotune_enabled()
    finally:
        deep_gemm.set_autotune(before)


def test_warmup_validates_and_is_a_noop_without_cuda():
    with pytest.raises(DeepGEMMError, match=r"calls: unknown op 'fp8_gemm_xx'"):
        deep_gemm.warmup([("fp8_gemm_xx", dict(m=1, n=128, k=128))])
    with pytest.raises(DeepGEMMError, match=r"calls: expected \(op_name, dict of sizes\) pairs"):
        deep_gemm.warmup([("fp8_gemm_nt", (1, 128, 128))])
    if not torch.cuda.is_available():
        assert deep_gemm.warmup([("fp8_gemm_nt", dict(m=1, n=128, k=128))]) == 0


def test_launcher_grouping_names_match_the_kernels():
    """The launchers' GROUPING names carry the kernels' grouping constants (kernels/groupings.py)."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.common.kernels import groupings
    assert fp8_plan.GROUPING == {"dense": groupings.DENSE.value, "m_ids": groupings.M_IDS.value,
                                   "m_psum": groupings.M_PSUM.value, "masked": groupings.MASKED.value,
                                   "k_grouped": groupings.K_GROUPED.value}


def test_wave_n_test_shapes_take_128_wide_tiles():
    """The along-N warp-specialised variant needs 128-wide waves: the GPU tests' shapes meant to exercise it
    (tests/test_fp8_gemm_gpu.py) must get them from the heuristic."""
    for m, n, k in [(4000, 448, 208), (8000, 200, 256), (4096, 2112, 7168)]:
        assert configs.heuristic(configs.Fp8GemmProblem(m, n, k, 1, "dense", 132)).block_n == 128, (m, n, k)
    assert configs.heuristic(configs.Fp8GemmProblem(4224, 448, 208, 5, "m_grouped", 132)).block_n == 128


def test_ws_stage_ring_fills_shared_memory():
    """The ring is as deep as shared memory allows next to the 64 x wave-width epilogue buffers: a 128 x 256 tile
    (two 128-wide waves, BF16 out) holds 4 stages of 48 KB (229,376 B with 32 KB of epilogue buffers, under the
    227 KB a block may use); sizing the epilogue by the tile width instead gave 3."""
    from deep_gemm.gemm.fp8.plan import WS_SMEM_BYTES, ws_stages
    assert ws_stages(128, 256, 128, 2) == 4
    assert ws_stages(256, 128, 128, 2) == 4
    assert ws_stages(128, 128, 128, 2) == 6
    assert ws_stages(128, 192, 192, 2) == 4  # split tile: both waves' staging buffers
    for bm, tile_n, wave_n, out in [(128, 256, 128, 2), (128, 128, 128, 4), (128, 64, 64, 2), (128, 192, 192, 2)]:
        stages = ws_stages(bm, tile_n, wave_n, out)
        assert stages * (bm + tile_n) * 128 + 2 * 64 * wave_n * out <= WS_SMEM_BYTES <= 227 * 1024


def test_ws_split_k_stage_ring_counts_the_fp32_staging_buffers():
    """Split-K tiles stage each warpgroup's 64 x BN FP32 partial in its epilogue buffer, which is sized for it: 5
    stages at 128 x 128 (4 with staged scales), 7 at 128 x 64 (sm_90a compile: 229,648 and 209,616 B)."""
    from deep_gemm.gemm.fp8.plan import WS_SMEM_BYTES, ws_stages
    assert ws_stages(128, 128, 128, 2, split_k=True) == 5
    assert ws_stages(128, 128, 128, 2, scales_staged=True, split_k=True) == 4
    assert ws_stages(128, 64, 64, 2, scales_staged=True, split_k=True) == 7
    for bn, staged in [(128, False), (128, True), (64, True)]:
        stages = ws_stages(128, bn, bn, 2, scales_staged=staged, split_k=True)
        per_stage = (128 + bn) * 128 + (4 * (128 + 32) if staged else 0)  # A, B, and the staged scales
        assert stages * per_stage + 2 * 64 * bn * 4 <= WS_SMEM_BYTES, (bn, staged)


def test_dense_call_offers_one_wave_split_k_only_where_the_plan_can_route_it(monkeypatch):
    """The heuristic's one_wave_split_k flag mirrors the plan's split-K route to the Gluon kernel: 1D2D, no C, a
    TMA-storable CUDA D, the Gluon kernel on, not under the interpreter."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    monkeypatch.setattr(fp8_launch, "interpreting", lambda: False)
    d = torch.empty(128, 4096, dtype=torch.bfloat16, device="meta")
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))

    def offered(d, c, b_per_row, ws_mode="auto"):
        call = fp8_launch.dense_call(128, 4096, 7168, d, c, b_per_row)
        return fp8_plan.tile_problem(call, fp8_plan.Fp8Overrides(ws_mode=ws_mode)).one_wave_split_k
    assert offered(d, None, False)
    assert not offered(d, d, False)  # C
    assert not offered(d, None, True)  # 1D1D
    odd = torch.empty(128, 4099, dtype=torch.bfloat16, device="meta")[:, :4096]  # rows not 16-byte aligned
    assert not offered(odd, None, False)
    assert not offered(d, None, False, ws_mode="off")


def _dense_call(m, n, k=7168, b_per_row=False, has_c=False, head=(0, 0, 0), num_sms=132):
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    return fp8_plan.Fp8Call(fp8_plan.GROUPING["dense"], m, n, k, 1, num_sms, b_per_row, has_c, head=head)


@pytest.mark.parametrize("m,n,tail", [(2112, 4096, 64), (2100, 4096, 52), (2176, 4096, 128), (2049, 4096, 1),
                                      (2048, 4096, 0), (2240, 4096, 0), (4096, 4096, 0), (2112, 1024, 0),
                                      (200, 4096, 0)])
def test_1d1d_row_tail_only_where_the_last_row_block_costs_a_round(m, n, tail):
    """row_tail hands the last 128-row block of a 1D1D problem to a launch of its own exactly when that block
    alone pushes the 128 x 256 tiles into one more round of 132 SMs (2112 rows: 272 tiles, 3 rounds; 2048 rows:
    256 tiles, 2 rounds); never for 1D2D, a split or 128 x 64 config, a head remap, or below two-wave sizes."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    cfg = configs._config(128, 128)
    assert fp8_plan.row_tail(_dense_call(m, n, b_per_row=True), cfg, "auto") == tail
    assert fp8_plan.plan_for_config(_dense_call(m, n, b_per_row=True), cfg).row_tail == tail
    if tail:
        assert fp8_plan.row_tail(_dense_call(m, n), cfg, "auto") == 0
        assert fp8_plan.row_tail(_dense_call(m, n, b_per_row=True), configs._config(128, 128, 2), "auto") == 0
        assert fp8_plan.row_tail(_dense_call(m, n, b_per_row=True, head=(1, 2, 3)), cfg, "auto") == 0
        assert fp8_plan.row_tail(_dense_call(m, n, b_per_row=True), configs._config(128, 64), "auto") == 0
        assert fp8_plan.row_tail(_dense_call(m, n, b_per_row=True), cfg, "off") == 0
        off = fp8_plan.Fp8Overrides(ws_mode="off")
        assert fp8_plan.plan_for_config(_dense_call(m, n, b_per_row=True), cfg, off).row_tail == 0


def test_split_tiles_only_where_the_wave_model_says_they_pay():
    """Split tiles for the two M=4096 DeepSeek shapes whose 128 x 256 tiles quantise badly: 128 x 192 at N=2112,
    4 tail tiles of 128 + 16 at N=576 (one round of 128 tiles, where 128 x 192 fills 96 SMs); 128 x 256 for the
    other five, short K and the grouped contiguous shapes."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    split = {(n, k): fp8_plan.ws_narrow(4096, n, k, 132) for n, k in [
        (2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]}
    assert {nk: w for nk, w in split.items() if w != 128} == {(2112, 7168): 64, (576, 7168): 16}
    for n, k in [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]:
        assert fp8_plan.ws_narrow(34151, n, k, 132) == 128, (n, k)


@pytest.mark.parametrize("n,width", [(576, 16), (448, 32), (320, 32), (200, 0), (2112, 0), (4096, 0), (128, 0),
                                     (64, 0), (4160, 0), (1100, 16)])
def test_tail_tiles_cover_the_columns_past_the_last_whole_block(n, width):
    """tail_narrow(N): one narrow piece per whole 128-column block, together covering N's tail, of a width the
    kernel takes (16 or 32), and as many tiles as the kernel derives from its tile width (cdiv(N, 128 + width));
    else 0 (no tail, no whole block, tail pieces too wide: 200 = 128 + 72; too many blocks for the count rule:
    2112 = 16 x 128 + 64, 4160)."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    assert fp8_plan.tail_narrow(n) == width
    if width:
        whole = n // 128
        assert whole * width >= n - 128 * whole and -(-n // (128 + width)) == whole


def test_wide_m128_shapes_take_two_wave_tiles():
    """At 64 < M <= 128 (64-row tl.* tiles) only problems wide enough for 128 x 256 tiles to fill half the SMs
    run two-wave tiles: the DeepSeek shapes N=24576 (as split 128 x 192 tiles) and N=32768 (measured faster on the
    H200), not the five narrower ones (measured slower without split-K), not M <= 64 (not measured), not 1D1D, not
    with C."""
    from dataclasses import replace

    from deep_gemm.gemm.fp8 import plan as fp8_plan
    wide = {(n, k) for n, k in [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384),
                                (4096, 7168), (7168, 2048)] if fp8_plan.wide_small_m(_dense_call(128, n, k))}
    assert wide == {(24576, 1536), (32768, 512)}
    assert fp8_plan.ws_narrow(128, 24576, 1536, 132) == 64 and fp8_plan.ws_narrow(128, 32768, 512, 132) == 128
    assert fp8_plan.wide_small_m(_dense_call(65, 16641))
    assert not fp8_plan.wide_small_m(_dense_call(65, 16640))  # 65 tiles < 66
    assert not fp8_plan.wide_small_m(_dense_call(64, 32768))
    assert not fp8_plan.wide_small_m(_dense_call(129, 32768))  # 128-row configs: the usual rules
    assert not fp8_plan.wide_small_m(_dense_call(128, 32768, b_per_row=True))
    assert not fp8_plan.wide_small_m(_dense_call(128, 32768, has_c=True))
    assert not fp8_plan.wide_small_m(replace(_dense_call(128, 32768), grouping=fp8_plan.GROUPING["m_psum"]))


def test_masked_decode_takes_64_row_tiles():
    """Masked decode rows (m = 20 per group, expected_m = 24) get 64-row tiles, not the 32 their rows would fit
    (measured faster: fp8_configs.MIN_MASKED_BLOCK_M); larger expected m keeps 128-row tiles."""
    for g, n, k in [(32, 7168, 3072), (32, 4096, 4096), (6, 6144, 7168)]:
        cfg = configs.heuristic(configs.Fp8GemmProblem(4096, n, k, g, "masked", 132, expected_m=24))
        assert cfg.block_m == 64, (g, n, k, cfg)
    cfg = configs.heuristic(configs.Fp8GemmProblem(4096, 6144, 7168, 32, "masked", 132, expected_m=230))
    assert cfg.block_m == 128


def test_two_wave_tiles_need_128_wide_waves():
    """256 x 64 tiles (two waves along M, 64 wide) measured slower than the tl.* kernel: not chosen."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    assert fp8_plan.ws_waves(fp8_plan.GROUPING["dense"], 512, 2112, 64, False, 132) == (1, False)
    assert fp8_plan.ws_waves(fp8_plan.GROUPING["dense"], 4096, 4096, 128, False, 132) == (2, True)


def test_hand_made_config_breaking_the_b_scale_rule_is_rejected():
    """A config whose tile spans two 128-column B-scale blocks would silently use one scale for both (a sweep's
    hand-made 64x256 config gave calc_diff 2.8e-3 on the H200): the launcher refuses it before launching."""
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8
    a = per_token_cast_to_fp8(torch.randn(64, 256, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(256, 256, dtype=torch.bfloat16), use_ue8m0=False)
    d = torch.full((64, 256), float("nan"), dtype=torch.bfloat16)
    bad = configs.Fp8GemmConfig(64, 256, 4, 4)
    with pytest.raises(ValueError, match="block_n must divide 128"):
        fp8_launch._launch_dense(a[0], a[1], b[0], b[1], d, None, False,
                                 overrides=fp8_launch.Fp8Overrides(config=bad))
    assert d.isnan().all()


def test_register_budget_keeps_the_first_build_without_spills_else_the_fewest():
    """ws_register_budget builds the warp-specialised variant with each budget in turn: it stops at the first one
    that spills no more than the tolerance, else keeps the one that spills least (the earlier on a tie), and builds
    no more than it needs."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    budgets = fp8_plan.WS_REGISTER_BUDGETS
    tolerance = fp8_plan.WS_SPILL_TOLERANCE_WORDS
    assert len(set(budgets)) == len(budgets) >= 2

    def chooser(spills_by_budget):
        built = []

        def spills(budget):
            built.append(budget)
            return spills_by_budget[budget]
        return fp8_plan.ws_register_budget(spills), built
    no_spill_first = {b: 0 for b in budgets}
    assert chooser(no_spill_first) == (budgets[0], [budgets[0]])
    second_clean = {b: tolerance + 5 for b in budgets} | {budgets[1]: 0}
    assert chooser(second_clean) == (budgets[1], list(budgets[:2]))
    fewest_last = {b: tolerance + 10 - i for i, b in enumerate(budgets)}
    assert chooser(fewest_last) == (budgets[-1], list(budgets))
    tie = {b: tolerance + 4 for b in budgets}
    assert chooser(tie) == (budgets[0], list(budgets))
    tolerated = {b: 0 for b in budgets} | {budgets[0]: tolerance}
    assert chooser(tolerated) == (budgets[0], [budgets[0]])
    just_over = {b: 0 for b in budgets} | {budgets[0]: tolerance + 1}
    assert chooser(just_over) == (budgets[1], list(budgets[:2]))


def test_psum_decode_form_is_sized_by_its_expected_rows():
    """expected_m_for_psum_layout sizes the tile choice of a psum call (A may hold G x Mmax rows, few of them used):
    G segments of align(expected_m) rows, at most M; other calls are planned as they are."""
    from deep_gemm.gemm.fp8.plan import GROUPING, Fp8Call, plan, sized_call
    decode = Fp8Call(GROUPING["m_psum"], 32 * 4096, 7168, 3072, 32, 132, expected_m=24)
    assert sized_call(decode).m == 32 * 128
    assert sized_call(Fp8Call(GROUPING["m_psum"], 300, 7168, 3072, 32, 132, expected_m=24)).m == 300
    prefill = Fp8Call(GROUPING["m_psum"], 4 * 8192, 7168, 3072, 4, 132)
    assert sized_call(prefill) is prefill
    p = plan(decode)
    assert p.kernel == "ws" and p.ws.waves == 2 and p.grid == 132  # (the grid from M: an upper bound of the tiles)


def test_psum_layout_is_stored_by_tma_with_or_without_zero_padding():
    """The warp-specialised kernel stores psum tiles by TMA whether or not the gaps are zeroed (its tiles never reach
    past a group's padded segment); the tl.* kernel keeps pointer stores when gap rows must stay untouched."""
    from deep_gemm.gemm.fp8.launch import GROUPING, call_of
    d = torch.empty(512, 256, dtype=torch.bfloat16)
    for zero_gaps in (True, False):
        call = call_of(GROUPING["m_psum"], 512, 256, 512, 4, d, None, False, zero_gaps=zero_gaps)
        assert call.ws_d_tma
        assert call.d_tma == zero_gaps


def test_tile_walk_is_planned_for_psum_and_masked_layouts_only():
    """Fp8Overrides.tile_walk asks the warp-specialised kernel for the carried tile walk (gemm_ws._walk); the
    plan gives it to psum and masked layouts (the only ones whose tiles are enumerated per group) and to no other,
    and the default is fp8_plan.TILE_WALK's per layout (the walk on psum contiguous and on its decode form; masked
    layouts keep the scan)."""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8.plan import GROUPING, Fp8Call, Fp8Overrides, plan
    walk, scan = Fp8Overrides(tile_walk=True), Fp8Overrides(tile_walk=False)
    calls = {"m_psum": Fp8Call(GROUPING["m_psum"], 4 * 8192, 7168, 3072, 4, 132),
             "m_psum_decode": Fp8Call(GROUPING["m_psum"], 32 * 1024, 7168, 3072, 32, 132, expected_m=192),
             "masked": Fp8Call(GROUPING["masked"], 1024, 4096, 4096, 6, 132, expected_m=1024),
             "m_ids": Fp8Call(GROUPING["m_ids"], 4 * 8192, 7168, 3072, 4, 132),
             "dense": Fp8Call(GROUPING["dense"], 4096, 7168, 2048, 1, 132)}
    for kind, call in calls.items():
        p_walk, p_scan, p_default = plan(call, walk), plan(call, scan), plan(call)
        assert p_walk.kernel == p_scan.kernel == "ws"
        assert p_walk.ws.walk == (kind in fp8_plan.TILE_WALK)
        assert not p_scan.ws.walk
        assert p_default.ws.walk == (fp8_plan.TILE_WALK.get(kind, False) and p_default.ws.waves == 2)
        # the walk changes nothing else of the plan
        assert p_walk.grid == p_scan.grid and p_walk.ws.tile_n == p_scan.ws.tile_n
    # the measured decision: psum contiguous and its decode form walk (two-wave tiles), masked layouts scan
    assert plan(calls["m_psum"]).ws.walk and plan(calls["m_psum"]).ws.waves == 2
    assert plan(calls["m_psum_decode"]).ws.walk and plan(calls["m_psum_decode"]).ws.waves == 2
    assert not plan(calls["masked"]).ws.walk
    # a psum call on one-wave tiles (too few tiles for two waves) keeps the scan by default
    small = Fp8Call(GROUPING["m_psum"], 2 * 128, 576, 7168, 2, 132)
    assert plan(small).ws.waves == 1 and not plan(small).ws.walk and plan(small, walk).ws.walk


def test_masked_decode_walk_case_reaches_the_ws_kernel():
    """tests/test_fp8_gemm_gpu.py::test_masked_walk_matches_scan's 33-group, 20-rows-per-group case: the plan runs
    the tl.* kernel's 64-row tiles there (no walk: no warp-specialised launch to spy on), so the test
    forces the 128 x 128 config, which the plan runs on the warp-specialised kernel with the walk it asks for."""
    from deep_gemm.gemm.fp8 import configs as fp8_configs
    from deep_gemm.gemm.fp8.plan import GROUPING, Fp8Call, Fp8Overrides, plan
    call = Fp8Call(GROUPING["masked"], 128, 7168, 256, 33, 132, expected_m=20)
    fields = dict(ws_mode="on", regs=(232, 40), waves=2, wave_n=True)
    assert plan(call, Fp8Overrides(tile_walk=True, **fields)).kernel == "tl"
    forced = dict(fields, config=fp8_configs._config(128, 128, 1))
    for walk in (True, False):
        p = plan(call, Fp8Overrides(tile_walk=walk, **forced))
        assert p.kernel == "ws" and p.ws.walk == walk and p.ws.tile_n == 256


def test_uniform_tiles_is_planned_for_psum_and_masked_layouts_only():
    """Fp8Overrides.uniform_tiles marks the layout's values warp-uniform in the warp-specialised kernel
    (uniform.warp_uniform); only psum and masked layouts read tile counts and groups from the layout, so no
    other layout gets it, it combines with the walk or the scan, the default is fp8_plan.UNIFORM_TILES, and it
    changes nothing else of the plan."""
    from dataclasses import replace

    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8.plan import GROUPING, Fp8Call, Fp8Overrides, plan
    calls = {"m_psum": Fp8Call(GROUPING["m_psum"], 8 * 4096, 4096, 2048, 8, 132, zero_gaps=False),
             "m_psum_decode": Fp8Call(GROUPING["m_psum"], 6 * 4096, 4096, 4096, 6, 132, zero_gaps=False,
                                      expected_m=1228),
             "masked": Fp8Call(GROUPING["masked"], 4096, 4096, 4096, 6, 132, expected_m=1228),
             "m_ids": Fp8Call(GROUPING["m_ids"], 8 * 4096, 4096, 2048, 8, 132),
             "dense": Fp8Call(GROUPING["dense"], 4096, 7168, 2048, 1, 132)}
    for kind, call in calls.items():
        base = plan(call)
        assert base.ws.uniform == (fp8_plan.UNIFORM_TILES and kind in fp8_plan.TILE_WALK)
        for walk in (None, True, False):
            on = plan(call, Fp8Overrides(uniform_tiles=True, tile_walk=walk))
            off = plan(call, Fp8Overrides(uniform_tiles=False, tile_walk=walk))
            assert on.ws.uniform == (kind in fp8_plan.TILE_WALK) and not off.ws.uniform
            assert replace(on.ws, uniform=False) == off.ws and on.grid == off.grid and on.config == off.config


def test_uniform_tiles_reaches_k_grouped_plans_on_by_default():
    """K-grouped K ranges are read from the layout on the device (gemm_ws._k_blocks), so Fp8Overrides.uniform_tiles
    also marks them warp-uniform; the K-grouped default is fp8_plan.UNIFORM_K_GROUPED (on since its GPU A/B), and the
    flag changes nothing else of the plan."""
    from dataclasses import replace

    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8.plan import GROUPING, Fp8Call, Fp8Overrides, plan
    for m, n in ((4096, 7168), (7168, 2048)):
        call = Fp8Call(GROUPING["k_grouped"], m, n, 34304, 4, 132, b_per_row=True, has_c=True, out_bytes=4,
                       c_tma=True)
        base, on, off = plan(call), plan(call, Fp8Overrides(uniform_tiles=True)), plan(
            call, Fp8Overrides(uniform_tiles=False))
        assert base.kernel == on.kernel == "ws"
        assert base.ws.uniform and fp8_plan.UNIFORM_K_GROUPED and on.ws.uniform and not off.ws.uniform
        assert replace(on.ws, uniform=False) == off.ws and on.grid == off.grid and on.config == off.config


def test_stagger_is_planned_for_two_wave_tiles_only():
    """Fp8Overrides.stagger (warpgroup 1 issues a K block's first wave after warpgroup 0's has completed,
    gemm_ws._stagger_wait) reaches the two-wave plans of every layout (1D2D and 1D1D scales), and no other
    variant (one-wave, split 128 x 192 tiles); the default is fp8_plan.STAGGER's level for the layout; it changes
    nothing else of the plan; a level other than 0-3 is refused."""
    from dataclasses import replace

    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8.plan import GROUPING, Fp8Call, Fp8Overrides, plan
    two_wave = {"dense": Fp8Call(GROUPING["dense"], 4096, 4096, 7168, 1, 132),
                "m_ids": Fp8Call(GROUPING["m_ids"], 8 * 4096, 4096, 2048, 8, 132),
                "m_psum": Fp8Call(GROUPING["m_psum"], 8 * 4096, 4096, 2048, 8, 132, zero_gaps=False),
                "masked": Fp8Call(GROUPING["masked"], 4096, 4096, 4096, 6, 132, expected_m=1228),
                "k_grouped": Fp8Call(GROUPING["k_grouped"], 4096, 7168, 34304, 4, 132, b_per_row=True, has_c=True,
                                     out_bytes=4, c_tma=True)}
    wgrad = Fp8Call(GROUPING["dense"], 4096, 4096, 7168, 1, 132, b_per_row=True, has_c=True, out_bytes=4, c_tma=True)
    others = {"one-wave": (two_wave["dense"], dict(waves=1)),
              "split 128 x 192": (two_wave["dense"], dict(waves=2, wave_n=True, narrow=64))}
    assert plan(wgrad, Fp8Overrides(stagger=2)).ws.stagger == 2  # (1D1D two-wave tiles: _mainloop_two_waves_1d1d)
    for kind, call in two_wave.items():
        base = plan(call)
        assert base.kernel == "ws" and base.ws.waves == 2 and not base.ws.split_tile, kind
        assert base.ws.stagger == fp8_plan.STAGGER.get(GROUPING[kind], 0), kind
        for level in (0, 1, 2, 3):
            forced = plan(call, Fp8Overrides(stagger=level))
            assert forced.ws.stagger == level, kind
            assert replace(forced.ws, stagger=base.ws.stagger) == base.ws, kind
            assert forced.grid == base.grid and forced.config == base.config, kind
    for kind, (call, fields) in others.items():
        forced = plan(call, Fp8Overrides(stagger=2, **fields))
        assert forced.kernel == "ws" and forced.ws.stagger == 0, kind
    for bad in (4, -1, "2"):
        with pytest.raises(ValueError, match="stagger"):
            Fp8Overrides(stagger=bad)
