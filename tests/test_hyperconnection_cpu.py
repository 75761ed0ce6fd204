"""tf32_hc_prenorm_gemm's Triton kernel on the CPU (Triton interpreter): output splits as DeepGEMM partitions them,
empty splits, sub-splits reduced on the device, TF32 rounding of B, and the plan's rules.

The interpreter multiplies exactly (its TF32 dot is an FP32 dot), so the kernel's TF32 rounding of B is what makes it
differ from the exact product: against ``a @ round_to_tf32(b).T`` the error is FP32 summation only (calc_diff ~1e-14),
against ``a @ b.T`` it is TF32 rounding (~2e-8). Checking both proves the kernel rounds B, and rounds it to nearest.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from deep_gemm.hyperconnection import plan as hc_plan
from deep_gemm.hyperconnection.reference import round_to_tf32, split_k_blocks
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from triton_harness import DEVICE, triton_launcher

BLOCK_K = 64

TOLERANCES = {
    # Kernel vs the FP64 product with TF32-rounded B: FP32 summation order only.
    "vs_tf32_product": 1e-12,
    # The same kernel vs the exact product: TF32 rounding of B (relative 2^-11 per element) must show.
    "tf32_rounding_visible": 5e-9,
}


def _run(m, n, k, num_splits, config=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).bfloat16().to(DEVICE)
    b = torch.randn(n, k, generator=g).to(DEVICE)
    lead = () if num_splits is None else (num_splits,)
    d = torch.full((*lead, m, n), float("nan"), device=DEVICE)
    sq = torch.full((*lead, m), float("nan"), device=DEVICE)
    result = triton_launcher("tf32_hc_prenorm_gemm")(a, b, d, sq, num_splits, overrides=hc_plan.HcOverrides(config))
    assert result is not NotImplemented
    return a.cpu(), b.cpu(), d.cpu(), sq.cpu()


def _expected(a, b, num_splits):
    a64, b64 = a.double(), round_to_tf32(b).double()
    if num_splits is None:
        return a64 @ b64.T, (a64 * a64).sum(-1)
    nkb = a.size(1) // BLOCK_K
    ds, sqs = [], []
    for s in range(num_splits):
        lo, hi = split_k_blocks(nkb, num_splits, s)
        part = a64[:, lo * BLOCK_K:hi * BLOCK_K]
        ds.append(part @ b64[:, lo * BLOCK_K:hi * BLOCK_K].T)
        sqs.append((part * part).sum(-1))
    return torch.stack(ds), torch.stack(sqs)


def _check(a, b, d, sq, num_splits):
    want_d, want_sq = _expected(a, b, num_splits)
    assert not d.isnan().any() and not sq.isnan().any(), "every output element must be written"
    if num_splits is not None:
        for s in range(num_splits):
            lo, hi = split_k_blocks(a.size(1) // BLOCK_K, num_splits, s)
            if lo == hi:
                assert_bitwise_equal(d[s], torch.zeros_like(d[s]), f"d[{s}] (a split without K blocks)")
                assert_bitwise_equal(sq[s], torch.zeros_like(sq[s]), f"sqr_sum[{s}]")
    assert calc_diff(d, want_d) < TOLERANCES["vs_tf32_product"]
    assert calc_diff(sq, want_sq) < TOLERANCES["vs_tf32_product"]


CASES = [(1, 8, 128, None), (13, 24, 320, None), (37, 64, 192, None), (13, 24, 256, 3), (20, 16, 192, 5),
         (70, 32, 128, 1), (5, 128, 128, None)]


@pytest.mark.parametrize("m,n,k,num_splits", CASES, ids=[f"m{m}-n{n}-k{k}-s{s}" for m, n, k, s in CASES])
def test_heuristic_config(m, n, k, num_splits):
    _check(*_run(m, n, k, num_splits), num_splits)


SUB_CASES = [
    # (m, n, k, num_splits, config): sub-splits reduced on the device, some owning no K block.
    (13, 24, 640, None, hc_plan.HcConfig(16, 32, 2, 4, 4)),
    (13, 24, 192, None, hc_plan.HcConfig(16, 32, 2, 5, 2)),  # 3 blocks over 5 sub-splits
    (40, 16, 512, 3, hc_plan.HcConfig(64, 16, 3, 3, 1)),
    (9, 8, 256, 6, hc_plan.HcConfig(16, 16, 2, 2, 2)),  # 4 blocks over 6 splits x 2 sub-splits
]


@pytest.mark.parametrize("m,n,k,num_splits,config", SUB_CASES,
                         ids=[f"m{c[0]}-n{c[1]}-k{c[2]}-s{c[3]}-sub{c[4].sub}" for c in SUB_CASES])
def test_sub_splits_reduced_on_the_device(m, n, k, num_splits, config):
    _check(*_run(m, n, k, num_splits, config), num_splits)


def test_b_is_rounded_to_tf32():
    a, b, d, _ = _run(13, 24, 640, None)
    assert calc_diff(d, a.double() @ b.double().T) > TOLERANCES["tf32_rounding_visible"]


def test_every_split_count_up_to_past_the_block_count():
    """S = 1 .. nkb + 2 with nkb = 4: the last splits own no block and write zeros."""
    for num_splits in range(1, 7):
        _check(*_run(7, 8, 4 * BLOCK_K, num_splits, seed=num_splits), num_splits)


def test_round_to_tf32_reference_rule():
    x = torch.tensor([1.0, 1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), -(1 + 3 * 2**-11), 1 + 2**-11 + 2**-20,
                      float("inf"), float("-inf"), 0.0, -0.0, 1e-40])
    want = [1.0, 1.0, 1 + 2**-9, -1.0, -(1 + 2**-9), 1 + 2**-10, float("inf"), float("-inf"), 0.0, -0.0]
    got = round_to_tf32(x)
    assert got[:10].tolist() == want
    assert torch.isnan(round_to_tf32(torch.tensor([float("nan")]))).all()
    y = torch.randn(4096)
    r = round_to_tf32(y)
    assert ((r.view(torch.int32) & 0x1FFF) == 0).all()
    assert ((r - y).abs() <= y.abs() * 2**-11).all()


# DeepGEMM's decode-sized rows: (m, k, splits), a few row blocks each.
DEEPGEMM_ROWS = [(13, 7168, 16), (137, 7168, 16), (13, 28672, 16), (137, 28672, 16), (13, 28672, 1), (137, 28672, 1),
                 (1, 7168, 1), (13, 7168, 1)]


@pytest.mark.parametrize("m,k,splits", DEEPGEMM_ROWS)
def test_decode_rows_sub_split_as_far_as_the_rules_allow(m, k, splits):
    """Few row blocks leave SMs idle: each program's K range is cut into as many sub-splits as keep
    MIN_K_BLOCKS_PER_SUB blocks each (at most MAX_SUB), and the short loops that leaves run a shallow pipeline."""
    cfg = hc_plan.plan(m, 24, k, splits, 132)
    per_split = (k // BLOCK_K) // splits
    assert cfg.sub == max(1, min(hc_plan.MAX_SUB, per_split // hc_plan.MIN_K_BLOCKS_PER_SUB)), cfg
    assert -(-per_split // cfg.sub) <= hc_plan.SHORT_LOOP_K_BLOCKS and cfg.stages <= hc_plan.SHORT_LOOP_STAGES, cfg


PLAN_CASES = list(itertools.product((1, 13, 137, 4096, 8192), (8, 24, 64, 128), (7168, 28672), (1, 16)))


def test_unsplit_short_rows_take_16_row_blocks():
    """Unsplit calls up to M = 160 stream A in 16-row blocks; DeepGEMM's 16-split rows at
    M = 137 keep 64-row blocks (hc_plan.SHORT_ROWS_MAX_M)."""
    for m in (1, 13, 32, 64, 137, 160):
        assert hc_plan.plan(m, 24, 7168, 1, 132).block_m == 16
    assert hc_plan.plan(137, 24, 7168, 16, 132).block_m == 64
    assert hc_plan.plan(161, 24, 7168, 1, 132).block_m == 64
    assert hc_plan.plan(137, 128, 7168, 1, 132).block_m == 64  # N > 64: 16-row blocks spill


@pytest.mark.parametrize("n,k,splits", [(24, 7168, 1), (24, 28672, 1), (24, 7168, 16), (8, 7680, 1), (64, 7168, 1),
                                         (128, 7168, 1)])
def test_deterministic_plan_reduces_k_in_one_order_for_every_m(n, k, splits):
    """Deterministic mode: row block and sub-splits (what fixes a row's K reduction order) are the same at every M,
    while the default plan changes them with M (16-row blocks, fewer sub-splits as the row blocks fill the SMs)."""
    pinned = {(c.block_m, c.sub, c.red_chunk) for c in
              (hc_plan.plan(m, n, k, splits, 132, deterministic=True) for m in (1, 13, 137, 4096, 8192, 65536))}
    assert len(pinned) == 1 and next(iter(pinned))[0] == hc_plan.DETERMINISTIC_BLOCK_M, pinned
    if (n, k, splits) == (24, 7168, 1):
        free = {(c.block_m, c.sub) for c in (hc_plan.plan(m, n, k, splits, 132) for m in (1, 4096, 8192))}
        assert len(free) > 1, "the default plan follows M"


def test_deterministic_mode_reaches_the_hc_config(restore_deterministic, monkeypatch):
    """The flag at call time selects the config (the launcher's config cache is keyed on it)."""
    from deep_gemm.hyperconnection import launch as hc_launch
    monkeypatch.setattr(hc_launch, "usable_sms", lambda: 132)  # (the CPU has no SMs to count)
    free = hc_launch.config_of(4096, 24, 7168, 1)
    import deep_gemm
    deep_gemm.use_deterministic_algorithms(True)
    pinned = hc_launch.config_of(4096, 24, 7168, 1)
    assert (free.sub, pinned.sub) == (hc_plan.plan(4096, 24, 7168, 1, 132).sub,
                                      hc_plan.plan(1, 24, 7168, 1, 132, deterministic=True).sub)
    assert free != pinned


@pytest.mark.parametrize("m,n,k,splits", PLAN_CASES)
def test_plan_rules(m, n, k, splits):
    cfg = hc_plan.plan(m, n, k, splits, 132)
    assert cfg.block_n >= n and cfg.block_n >= 16
    assert cfg.block_m == hc_plan.block_m_for(m, cfg.block_n, splits)
    stage_bytes = cfg.block_m * BLOCK_K * 2 + cfg.block_n * BLOCK_K * 4
    assert hc_plan.MIN_STAGES <= cfg.stages <= hc_plan.MAX_STAGES
    assert cfg.stages * stage_bytes <= hc_plan.SMEM_ONE_PROGRAM
    tiles = -(-m // cfg.block_m) * splits
    if cfg.sub > 1:
        fill = hc_plan.PROGRAMS_PER_SM * 132 // tiles
        # sub-splits only fill idle program slots, rounded to whole reduction rounds above one round
        assert cfg.sub <= max(fill, cfg.red_chunk * round(fill / cfg.red_chunk)), "sub-splits fill idle slots"
        assert cfg.sub <= cfg.red_chunk or cfg.sub % cfg.red_chunk == 0 or cfg.sub == (k // BLOCK_K) // splits // \
            hc_plan.MIN_K_BLOCKS_PER_SUB
        assert (k // BLOCK_K) // splits // cfg.sub >= hc_plan.MIN_K_BLOCKS_PER_SUB
        assert cfg.block_n <= hc_plan.MAX_BLOCK_N_WITH_SUB
        assert cfg.red_chunk * cfg.block_m * cfg.block_n <= hc_plan.REDUCTION_TILE_ELEMS or cfg.red_chunk == 1
        assert cfg.sub <= hc_plan.MAX_SUB
    if -(-(k // BLOCK_K) // (splits * cfg.sub)) <= hc_plan.SHORT_LOOP_K_BLOCKS:
        assert cfg.stages <= hc_plan.SHORT_LOOP_STAGES, "short K loops run a shallow pipeline"
    if m <= 137 and n <= 64:
        most = tiles * max(1, (k // BLOCK_K) // splits // hc_plan.MIN_K_BLOCKS_PER_SUB)
        assert tiles * cfg.sub >= min(24, most), "decode sizes must not run on a handful of SMs"
