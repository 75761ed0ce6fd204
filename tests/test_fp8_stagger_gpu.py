"""Staggered consumer warpgroups on the warp-specialised FP8 kernel's two-wave tiles (Fp8Overrides.stagger;
gemm_ws._stagger_wait: warpgroup 1 issues a K block's first wave only after warpgroup 0's has completed, at a
tile's first block (1) or every block (2); or (3) both warpgroups meet before each tile's K loop). Only the issue
order changes, so every level computes the same bits
as the unstaggered kernel, on shapes that cover what the extra barrier could get wrong: a tile of one K block,
fewer K blocks than ring stages, partial tiles in M and N, several tiles per CTA, empty groups and tiles with no
rows (whose K loops both warpgroups skip). Skipped without CUDA."""

from __future__ import annotations

import random

import pytest
import torch

from deep_gemm.testing import calc_diff

from test_fp8_gemm_gpu import (TOL, _check_masked, _contiguous, _forced_config, _gemm, _grouped_b, _masked_a,
                               _operands, _ref, _spy_ws_launches)
from fp8_inputs import k_grouped_inputs
from triton_harness import run_forced

pytestmark = pytest.mark.gpu

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
