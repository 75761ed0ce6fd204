"""The warp-specialised tf32_hc_prenorm_gemm variant (hyperconnection/kernels_ws.py) on the CPU: its plan and
dispatch, and a model of its work split (the (row block, K block) pairs cut into one contiguous range per CTA, the
shared row blocks' partials in per-CTA slots, the last arriver's sum in CTA order).

The kernel itself is Gluon, which the Triton interpreter cannot run: its numerics are tested on the GPU
(tests/test_hyperconnection_gpu.py, ``-k test_ws``), its sm_90a binaries by
``scripts/compile_check_hc.py --ws-only``.
The model here reuses hc_plan.ws_range / ws_owner, which mirror the kernel's _range_of / _owner formula for formula.
"""

from __future__ import annotations

import random

import pytest
import torch

from deep_gemm.hyperconnection import hc_plan
from deep_gemm.testing import assert_bitwise_equal
from triton_harness import DEVICE, triton_launcher

BLOCK_K = 64


def _pieces(m, k, bm, grid):
    """Per CTA: [(row block, first K block, end K block, slot)] as the kernel's consumer walks them."""
    nkb = k // BLOCK_K
    pairs = -(-m // bm) * nkb
    out = []
    for cta in range(grid):
        lo, hi = hc_plan.ws_range(cta, grid, pairs)
        assert lo < hi, "every CTA has work (the plan keeps grid <= pairs)"
        own = []
        for mb in range(lo // nkb, (hi - 1) // nkb + 1):
            kb_lo, kb_hi = max(lo, mb * nkb) - mb * nkb, min(hi, (mb + 1) * nkb) - mb * nkb
            own.append((mb, kb_lo, kb_hi, int(mb != lo // nkb)))
        out.append(own)
    return out


SPLITS = [(8192, 28672, 128, 132), (8192, 28672, 64, 132), (8192, 7168, 128, 132), (8192, 7680, 64, 128),
          (8191, 7168, 128, 132), (4096, 28672, 128, 132), (137, 28672, 128, 42), (13, 7168, 128, 3),
          (1, 192, 64, 1), (300, 64, 64, 5), (1000, 192, 128, 24)]


@pytest.mark.parametrize("m,k,bm,grid", SPLITS)
def test_work_split_covers_every_pair_once_with_two_slots_per_cta(m, k, bm, grid):
    nkb = k // BLOCK_K
    pairs = -(-m // bm) * nkb
    covered = [0] * pairs
    slots = set()
    for cta, own in enumerate(_pieces(m, k, bm, grid)):
        lengths = [hi - lo for _, lo, hi, _ in own]
        assert all(x > 0 for x in lengths)
        shared = [(mb, slot) for mb, lo, hi, slot in own if hi - lo < nkb]
        assert len(shared) <= 2 and len({s for _, s in shared}) == len(shared), "at most slots 0 and 1"
        for mb, lo, hi, slot in own:
            for kb in range(lo, hi):
                covered[mb * nkb + kb] += 1
            if hi - lo < nkb:
                slots.add((cta, slot))
                # The last arriver finds each owner's piece where the owner wrote it.
                first, last = hc_plan.ws_owner(mb * nkb, grid, pairs), hc_plan.ws_owner((mb + 1) * nkb - 1, grid, pairs)
                assert first <= cta <= last
                assert int(hc_plan.ws_range(cta, grid, pairs)[0] // nkb != mb) == slot
    assert covered == [1] * pairs
    # Balance: every CTA streams floor or ceil of pairs / grid K blocks.
    sizes = {hc_plan.ws_range(c, grid, pairs)[1] - hc_plan.ws_range(c, grid, pairs)[0] for c in range(grid)}
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("m,k,bm,grid", [(300, 640, 64, 7), (1000, 192, 128, 5), (13, 7168, 128, 3)])
def test_model_of_the_reduction_is_exact_and_order_free(m, k, bm, grid):
    """Run the kernel's schedule on the CPU (per-K-block FP32 products, pieces, slots, counters, the last arriver's
    sum in CTA order) in several CTA arrival orders: every order gives the same bits, close to the FP64 product."""
    g = torch.Generator().manual_seed(m + k)
    a = torch.randn(m, k, generator=g).bfloat16().float()
    b = torch.randn(24, k, generator=g)
    nkb = k // BLOCK_K
    pairs = -(-m // bm) * nkb
    pieces = _pieces(m, k, bm, grid)
    results = []
    for order_seed in range(4):
        order = list(range(grid))
        random.Random(order_seed).shuffle(order)
        d = torch.full((m, 24), float("nan"))
        ws, counters = {}, [0] * (-(-m // bm))
        for cta in order:
            for mb, lo, hi, slot in pieces[cta]:
                rows = slice(mb * bm, min(m, (mb + 1) * bm))
                acc = torch.zeros(rows.stop - rows.start, 24)
                for kb in range(lo, hi):
                    cols = slice(kb * BLOCK_K, (kb + 1) * BLOCK_K)
                    acc = acc + a[rows, cols] @ b[:, cols].T
                if hi - lo == nkb:
                    d[rows] = acc
                    continue
                ws[(cta, slot)] = acc
                counters[mb] += 1
                first = hc_plan.ws_owner(mb * nkb, grid, pairs)
                last = hc_plan.ws_owner((mb + 1) * nkb - 1, grid, pairs)
                if counters[mb] == last - first + 1:
                    total = torch.zeros_like(acc)
                    for owner in range(first, last + 1):
                        total = total + ws[(owner, int(hc_plan.ws_range(owner, grid, pairs)[0] // nkb != mb))]
                    d[rows] = total
                    counters[mb] = 0
        assert counters == [0] * len(counters)
        results.append(d)
    for d in results[1:]:
        assert_bitwise_equal(d, results[0], "d")
    ref = a.double() @ b.double().T
    assert ((results[0].double() - ref).abs().max() / ref.abs().max()) < 1e-5


@pytest.mark.parametrize("m,n,k", [(8192, 24, 28672), (8192, 24, 7168), (4096, 8, 7680), (13, 32, 7168),
                                   (1, 16, 64), (137, 64, 192)])
def test_ws_plan(m, n, k):
    cfg = hc_plan.plan(m, n, k, 1, 132, ws_mode="on")
    assert cfg.kernel == "ws" and cfg.sub == 1 and cfg.block_m == 64 * cfg.consumers
    assert cfg.block_n + cfg.block_n_tail >= n and (cfg.block_n, cfg.block_n_tail) == hc_plan.ws_tile_n(n, True)
    stage = cfg.block_m * BLOCK_K * 2 + hc_plan.next_pow2(cfg.block_n + cfg.block_n_tail) * BLOCK_K * 4
    assert cfg.stages * stage <= hc_plan.WS_SMEM and (cfg.stages == hc_plan.WS_MAX_STAGES
                                                      or (cfg.stages + 1) * stage > hc_plan.WS_SMEM)
    pairs = -(-m // cfg.block_m) * (k // BLOCK_K)
    assert 1 <= cfg.grid <= min(132, pairs) and hc_plan.programs(m, 1, cfg) == cfg.grid
    if pairs >= 132 * hc_plan.WS_MIN_K_BLOCKS_PER_CTA:
        assert cfg.grid == 132


@pytest.mark.parametrize("n,tile", [(8, (8, 0)), (16, (16, 0)), (20, (16, 8)), (24, (16, 8)), (32, (32, 0)),
                                    (40, (32, 8)), (48, (32, 16)), (56, (64, 0)), (64, (64, 0)), (1, (8, 0))])
def test_ws_tile_and_tail(n, tile):
    """N = 24 runs as a 16-wide wgmma plus an 8-wide one (a quarter less MMA work than 32); powers of two and N
    whose tail would not be narrower run one tile; without ``tail`` every N runs one power-of-two tile."""
    assert hc_plan.ws_tile_n(n, True) == tile
    assert hc_plan.ws_tile_n(n, False) == (max(8, hc_plan.next_pow2(n)), 0)
    assert hc_plan.ws_config(8192, n, 7168, 132, tail=False).block_n_tail == 0


def test_ws_modes_and_coverage():
    # Off and auto (WS_AUTO_MIN_ROWS = 0) keep the tl.* plan; splits and N > 64 are never WS.
    for mode in ("off", "auto"):
        assert hc_plan.plan(8192, 24, 28672, 1, 132, ws_mode=mode).kernel == "tl"
    assert hc_plan.plan(8192, 24, 28672, 16, 132, ws_mode="on").kernel == "tl"
    assert hc_plan.plan(8192, 128, 28672, 1, 132, ws_mode="on").kernel == "tl"
    if hc_plan.DEFAULT_WS_MODE == "auto" and not hc_plan.WS_AUTO_MIN_ROWS:
        assert hc_plan.plan(8192, 24, 28672, 1, 132) == hc_plan.plan(8192, 24, 28672, 1, 132, ws_mode="off")


def test_ws_auto_threshold(monkeypatch):
    monkeypatch.setattr(hc_plan, "WS_AUTO_MIN_ROWS", 4096)
    assert hc_plan.plan(8192, 24, 28672, 1, 132, ws_mode="auto").kernel == "ws"
    assert hc_plan.plan(4095, 24, 28672, 1, 132, ws_mode="auto").kernel == "tl"
    assert hc_plan.plan(8192, 24, 28672, 16, 132, ws_mode="auto").kernel == "tl"


def test_pinned_ws_config_falls_back_to_the_tl_kernel_in_the_interpreter():
    """The launcher's fallback where the WS kernel cannot run (interpreter: no Gluon, no TFLOAT32 map): the
    tl.* plan's config, same results as without the pin."""
    m, n, k = 70, 24, 192
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).bfloat16().to(DEVICE)
    b = torch.randn(n, k, generator=g).to(DEVICE)
    outs = []
    for config in (hc_plan.ws_config(m, n, k, 4), None):
        d = torch.full((m, n), float("nan"), device=DEVICE)
        s = torch.full((m,), float("nan"), device=DEVICE)
        assert triton_launcher("tf32_hc_prenorm_gemm")(a, b, d, s, None, config=config) is not NotImplemented
        assert not d.isnan().any() and not s.isnan().any()
        outs.append((d.cpu(), s.cpu()))
    assert_bitwise_equal(outs[0][0], outs[1][0], "d")
    assert_bitwise_equal(outs[0][1], outs[1][1], "sqr_sum")
