"""The carried tile walk of the warp-specialised FP8 kernel (Fp8Overrides.tile_walk; gemm_ws._walk) on psum
and masked layouts: the same tiles as the per-tile scan, so bit-identical results, on layouts that exercise every
step of the walk (empty groups first, in the middle and last; a 1-row group; a group filling a whole segment; rows
after the last group; more groups than a CTA's tiles cross). Skipped without CUDA."""

from __future__ import annotations

import random

import pytest
import torch

from deep_gemm.testing import calc_diff
from deep_gemm.utils import align

from test_fp8_gemm_gpu import (TOL, _check_masked, _contiguous, _grouped_b, _masked_a, _ref, _spy_ws_launches)
from triton_harness import run_forced

pytestmark = pytest.mark.gpu


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
# tests/test_fp8_configs.py::test_masked_decode_walk_case_reaches_the_ws_kernel).
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
