"""Split 128 x 192 tiles of the warp-specialised FP8 kernel with both waves in flight together
(Fp8Overrides.joint_split, fp8_gemm_ws._mainloop_split_joint) against the form that promotes each wave while the
other runs (_mainloop_split). Only the order of issue, wait and promotion changes, so both compute the same bits, on
shapes that cover what the joint loop could get wrong: one K block, fewer K blocks than ring stages, tiles starting
mid-block (narrow wave first), waves partly or wholly past N, partial row blocks, empty groups. Skipped without
CUDA."""

from __future__ import annotations

import pytest
import torch

from deep_gemm.testing import calc_diff

from test_fp8_gemm_gpu import TOL, _contiguous, _forced_config, _gemm, _operands, _ref, _spy_ws_launches
from triton_harness import run_forced

pytestmark = pytest.mark.gpu

SPLIT_192 = dict(waves=2, wave_n=True, narrow=64)


def _both_forms(calls, fresh, run):
    """(interleaved output, joint output): ``fresh()`` makes an output, ``run(d, overrides)`` computes it; both
    launches (``calls``, spied) were split-tile plans, the second joint."""
    outs = []
    for joint in (False, True):
        d = fresh()
        run(d, _forced_config(128, 128, 1, ws_mode="on", joint_split=joint, **SPLIT_192))
        outs.append(d)
    assert [(args[0].ws.split_tile, args[0].ws.joint) for args in calls] == [(True, False), (True, True)]
    return outs


@pytest.mark.parametrize("m,n,k", [(129, 320, 128), (300, 576, 384), (4096, 2112, 7168), (4000, 448, 208),
                                   (300, 256, 1024), (37, 4096, 1536)])
def test_dense_joint_split_computes_the_same_bits(monkeypatch, m, n, k):
    calls = _spy_ws_launches(monkeypatch)
    a, b = _operands(m, n, k)
    split, joint = _both_forms(calls, lambda: torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16),
                               lambda d, ov: _gemm(a, b, d, overrides=ov))
    assert calc_diff(joint, _ref(a, b)) < TOL
    assert torch.equal(split, joint)


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("ms,n,k", [([3000, 0, 129, 1, 700], 4096, 1024), ([5] * 40, 576, 384)])
def test_m_grouped_joint_split_computes_the_same_bits(monkeypatch, psum, ms, n, k):
    calls = _spy_ws_launches(monkeypatch)
    a, b, ids, ends, starts, stops = _contiguous(ms, n, k)
    split, joint = _both_forms(
        calls, lambda: torch.full((a[0].size(0), n), float("nan"), device="cuda", dtype=torch.bfloat16),
        lambda d, ov: run_forced("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d,
                                 ends if psum else ids, use_psum_layout=psum, overrides=ov))
    for g, (s, e) in enumerate(zip(starts, stops)):
        if e > s:
            assert calc_diff(joint[s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g]))) < TOL
    assert torch.equal(split.nan_to_num(7.0), joint.nan_to_num(7.0))
