"""FP8 GEMM cases for the sanitizer runner (scripts/gpu/sanitize_cases.py; convention: README.md here): one small,
odd-shaped call per kernel path, forced where the heuristic would pick another (``Fp8Overrides``), each checked
against the torch reference and against the kernel it was meant to run (a case fails if the plan ran another).

Paths: the tl.* kernel (dense 1D2D, split-K, 1D1D with C, grouped ids / psum, masked with pointer stores, K-grouped);
the warp-specialised kernel's one-wave tiles (global-loaded and staged scales), two-wave 128 x 256 and 256 x 128
tiles, split 128 x 192 and tail 128 x (128 + 16) tiles, split-K, 1D1D with C = D; grouped contiguous with expert
ids and with the psum layout (zero-padded or not, the decode form with rows past the groups), masked (TMA stores),
psum and masked with the carried tile walk (Fp8Overrides.tile_walk), two-wave tiles whose second warpgroup waits
for the first's waves (Fp8Overrides.stagger: its per-stage mbarriers under synccheck), K-grouped (nt with A and B
concatenated or read in place through descriptors built on the device, tn); the MN-major layouts (nn, tn, tt: the
transposing copy kernel, then the GEMM).
"""

from __future__ import annotations

import contextlib

import torch

from deep_gemm.common.operands import dequantize
from deep_gemm.core.registry import run_launcher
from deep_gemm.gemm.fp8 import configs as fp8_configs
from deep_gemm.gemm.fp8 import launch as fp8_launch
from deep_gemm.gemm.fp8.plan import Fp8Overrides
from deep_gemm.testing import calc_diff
from deep_gemm.utils import align, per_block_cast_to_fp8, per_token_cast_to_fp8

TOL = 1e-3  # DeepGEMM's bar for FP8 GEMMs (tests/tolerances.py, kernel_fp8)
DEV = "cuda"
CHECK_RESULTS = True  # (a CPU dry run of the plans turns the result checks off)


def _act(m, k):
    return per_token_cast_to_fp8(torch.randn(m, k, device=DEV, dtype=torch.bfloat16), use_ue8m0=False)


def _weight(n, k, per_row=False):
    x = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
    return per_token_cast_to_fp8(x, use_ue8m0=False) if per_row else per_block_cast_to_fp8(x, use_ue8m0=False)


def _experts(g, n, k):
    parts = [_weight(n, k) for _ in range(g)]
    return torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])


def _ref(a, b, gran_b=(128, 128)):
    return dequantize(a[0], a[1], (1, 128)) @ dequantize(b[0], b[1], gran_b).T


def _close(got, want, what=""):
    if not CHECK_RESULTS:
        return
    diff = calc_diff(got, want)
    if not diff < TOL:
        raise AssertionError(f"{what} calc_diff {diff:.2e} >= {TOL}")


@contextlib.contextmanager
def _runs(kernel, **ws_fields):
    """Fail unless every launch planned inside is on `kernel` ("tl" / "ws") with the given WsPlan fields; recorded
    launch plans are dropped first so that the call takes the planning path."""
    seen = []
    real = fp8_launch._execute

    def spy(p, call, **kwargs):
        seen.append(p)
        return real(p, call, **kwargs)
    fp8_launch.PLANS.clear()
    for name in ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous",
                 "m_grouped_fp8_gemm_nt_masked"):
        getattr(fp8_launch, name).plans.clear()
    fp8_launch._execute = spy
    try:
        yield
    finally:
        fp8_launch._execute = real
    if not seen:
        raise AssertionError("no FP8 GEMM launch was planned")
    for p in seen:
        if p.kernel != kernel:
            raise AssertionError(f"ran the {p.kernel} kernel, expected {kernel}")
        for field, value in ws_fields.items():
            if getattr(p.ws, field) != value:
                raise AssertionError(f"ran WsPlan.{field}={getattr(p.ws, field)!r}, expected {value!r}")


def _forced(bm=128, bn=128, split=1, **fields):
    return Fp8Overrides(config=fp8_configs._config(bm, bn, split), **fields)


def _dense(m, n, k, overrides, kernel, per_row_b=False, c_kind=None, **ws_fields):
    a, b = _act(m, k), _weight(n, k, per_row_b)
    dtype = torch.float32 if per_row_b else torch.bfloat16
    d = torch.full((m, n), float("nan"), device=DEV, dtype=dtype)
    want = _ref(a, b, (1, 128) if per_row_b else (128, 128))
    c = None
    if c_kind == "d":
        d.copy_(torch.randn(m, n, device=DEV))
        want, c = want + d, d
    recipe = [1, 1, 128] if per_row_b else None
    with _runs(kernel, **ws_fields):
        run_launcher("fp8_gemm_nt", a[0], a[1], b[0], b[1], d, c, recipe,
                     launcher_kwargs=dict(overrides=overrides))
    _close(d, want, "dense")


def _mn_major(layout):
    def case():
        m, n, k = 80, 208, 384  # (MN-major operands need 16-byte aligned strides)
        a, b = _act(m, k), _weight(n, k)
        want = _ref(a, b)
        a_arg = (a[0].T.contiguous(), a[1].T) if layout[0] == "t" else a
        b_arg = (b[0].T.contiguous(), b[1].T) if layout[1] == "n" else b
        d = torch.full((m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
        run_launcher(f"fp8_gemm_{layout}", a_arg[0], a_arg[1], b_arg[0], b_arg[1], d, None, None)
        _close(d, want, layout)
    return case


def _contiguous(ms, n, k, extra_rows=0):
    """(a, b, ids, ends, starts, stops): groups padded to 128 rows, extra rows of A after the last group."""
    starts, stops, start = [], [], 0
    for m in ms:
        starts.append(start)
        stops.append(start + m)
        start = align(start + m, 128)
    a, b = _act(start + extra_rows, k), _experts(len(ms), n, k)
    ids = torch.full((a[0].size(0),), -1, dtype=torch.int32, device=DEV)
    for g, (s, e) in enumerate(zip(starts, stops)):
        ids[s:e] = g
    return a, b, ids[:start], torch.tensor(stops, dtype=torch.int32, device=DEV), starts, stops


def _m_grouped(psum, kernel, overrides=None, zero_pad=True, layout="nt", extra_rows=0, expected_m=None, **ws):
    def case():
        n, k = 320, 384
        a, b, ids, ends, starts, stops = _contiguous([130, 0, 5, 64], n, k, extra_rows)
        if not psum:
            a = (a[0][:ids.numel()], a[1][:ids.numel()])
        d = torch.full((a[0].size(0), n), float("nan"), device=DEV, dtype=torch.bfloat16)
        b_arg = b if layout == "nt" else (b[0].transpose(1, 2).contiguous(), b[1].transpose(1, 2))  # [G, K, N]
        extra = (expected_m,) if layout == "nt" else ()
        with _runs(kernel, **ws):
            run_launcher(f"m_grouped_fp8_gemm_{layout}_contiguous", a[0], a[1], b_arg[0], b_arg[1], d,
                         ends if psum else ids, None, None, None, "nk", False, psum, zero_pad, *extra,
                         launcher_kwargs=dict(overrides=overrides or Fp8Overrides()))
        for g, (s, e) in enumerate(zip(starts, stops)):
            if e > s:
                _close(d[s:e], _ref((a[0][s:e], a[1][s:e]), (b[0][g], b[1][g])), f"group {g}")
            if CHECK_RESULTS and zero_pad and not (d[e:align(e, 128)] == 0).all():
                raise AssertionError(f"group {g}: padding rows not zero")
    return case


def _masked(kernel, max_m, overrides=None, **ws):
    def case():
        g, n, k = 3, 320, 384
        masked = [0, max_m, 37]
        a = _act(g * max_m, k)
        a = (a[0].view(g, max_m, k), a[1].view(g, max_m, -1))
        b = _experts(g, n, k)
        d = torch.full((g, max_m, n), float("nan"), device=DEV, dtype=torch.bfloat16)
        mm = torch.tensor(masked, dtype=torch.int32, device=DEV)
        with _runs(kernel, **ws):
            run_launcher("m_grouped_fp8_gemm_nt_masked", a[0], a[1], b[0], b[1], d, mm, 40,
                         launcher_kwargs=dict(overrides=overrides or Fp8Overrides()))
        for i, m in enumerate(masked):
            if m:
                _close(d[i, :m], _ref((a[0][i, :m], a[1][i, :m]), (b[0][i], b[1][i])), f"group {i}")
    return case


def _k_grouped(layout, m, kernel, in_place=None, stagger=None):
    def case():
        n, ks = 320, [256, 0, 128]
        qa, qb = [], []
        for kg in ks:
            x = torch.randn(kg, m, device=DEV, dtype=torch.bfloat16)
            y = torch.randn(kg, n, device=DEV, dtype=torch.bfloat16)
            qa.append(per_token_cast_to_fp8(x.T.contiguous(), use_ue8m0=False) if kg else None)
            qb.append(per_token_cast_to_fp8(y.T.contiguous(), use_ue8m0=False) if kg else None)
        live = [i for i, kg in enumerate(ks) if kg]
        if layout == "nt":
            a = (torch.cat([qa[i][0].flatten() for i in live]), torch.cat([qa[i][1] for i in live], dim=1))
            b = (torch.cat([qb[i][0].flatten() for i in live]), torch.cat([qb[i][1] for i in live], dim=1))
        else:
            a = (torch.cat([qa[i][0].T for i in live]).contiguous(), torch.cat([qa[i][1].T for i in live]).contiguous())
            b = (torch.cat([qb[i][0].T for i in live]).contiguous(), torch.cat([qb[i][1].T for i in live]).contiguous())
        d = torch.randn(len(ks), m, n, device=DEV)
        before = d.clone()
        ws = {} if stagger is None else dict(stagger=stagger)
        with _runs(kernel, **ws):
            run_launcher(f"k_grouped_fp8_gemm_{layout}_contiguous", a[0], a[1], b[0], b[1], d, ks,
                         torch.tensor(ks, dtype=torch.int32, device=DEV), d,
                         launcher_kwargs=dict(overrides=Fp8Overrides(k_grouped_device_descriptors=in_place,
                                                                     stagger=stagger)))
        for i, kg in enumerate(ks):
            _close(d[i], before[i] + (_ref(qa[i], qb[i], (1, 128)) if kg else 0), f"group {i}")
    return case


WS = dict(ws_mode="on")
CASES = [
    # tl.* kernel
    ("dense_tl_1d2d", lambda: _dense(37, 200, 208, Fp8Overrides(ws_mode="off"), "tl")),
    ("dense_tl_split_k", lambda: _dense(5, 576, 1536, _forced(64, 64, 3, ws_mode="off"), "tl")),
    ("dense_tl_1d1d_c", lambda: _dense(37, 200, 208, Fp8Overrides(ws_mode="off"), "tl", True, "d")),
    # warp-specialised kernel, dense
    ("dense_ws_one_wave_128x128", lambda: _dense(129, 200, 384, _forced(waves=1, staged_scales_bn=(), **WS), "ws",
                                                 waves=1, scales_smem=False)),
    ("dense_ws_one_wave_staged_scales_128x64", lambda: _dense(129, 200, 384, _forced(bn=64, waves=1, **WS), "ws",
                                                              waves=1, bn=64, scales_smem=True)),
    ("dense_ws_two_wave_128x256", lambda: _dense(129, 320, 384, _forced(waves=2, wave_n=True, **WS), "ws",
                                                 waves=2, along_n=True, narrow=128)),
    ("dense_ws_two_wave_256x128", lambda: _dense(300, 200, 384, _forced(waves=2, **WS), "ws", waves=2,
                                                 along_n=False)),
    ("dense_ws_split_tile_128x192", lambda: _dense(129, 448, 384, _forced(waves=2, wave_n=True, narrow=64, **WS),
                                                   "ws", narrow=64)),
    ("dense_ws_tail_tile_128x144", lambda: _dense(129, 576, 256, _forced(waves=2, wave_n=True, narrow=16, **WS),
                                                  "ws", narrow=16)),
    ("dense_ws_split_k", lambda: _dense(37, 200, 640, _forced(bn=64, split=2, **WS), "ws", waves=1)),
    ("dense_ws_1d1d_c", lambda: _dense(129, 300, 384, _forced(waves=2, wave_n=True, **WS), "ws", True, "d",
                                       waves=2)),
    # warpgroup 1's waves after warpgroup 0's (Fp8Overrides.stagger: the extra per-stage mbarriers)
    ("dense_ws_two_wave_128x256_stagger_first_block", lambda: _dense(
        129, 320, 384, _forced(waves=2, wave_n=True, stagger=1, **WS), "ws", waves=2, stagger=1)),
    ("dense_ws_two_wave_256x128_stagger_every_block", lambda: _dense(
        300, 200, 640, _forced(waves=2, stagger=2, **WS), "ws", waves=2, along_n=False, stagger=2)),
    # MN-major layouts
    ("dense_nn", _mn_major("nn")),
    ("dense_tn", _mn_major("tn")),
    ("dense_tt", _mn_major("tt")),
    # M-grouped contiguous
    ("m_grouped_ids_tl", _m_grouped(False, "tl", Fp8Overrides(ws_mode="off"))),
    ("m_grouped_ids_ws", _m_grouped(False, "ws", _forced(waves=2, wave_n=True, **WS), waves=2)),
    ("m_grouped_psum_tl", _m_grouped(True, "tl", Fp8Overrides(ws_mode="off"))),
    ("m_grouped_psum_ws", _m_grouped(True, "ws", _forced(waves=2, wave_n=True, **WS), waves=2, d_tma=True)),
    ("m_grouped_psum_ws_no_zero_padding", _m_grouped(True, "ws", _forced(waves=2, wave_n=True, **WS), zero_pad=False,
                                                     waves=2, d_tma=True)),
    ("m_grouped_psum_ws_one_wave_staged", _m_grouped(True, "ws", _forced(bn=64, waves=1, **WS), waves=1,
                                                     scales_smem=True)),
    ("m_grouped_psum_ws_decode_form", _m_grouped(True, "ws", extra_rows=1000, expected_m=40)),
    ("m_grouped_nn_psum_ws", _m_grouped(True, "ws", layout="nn")),
    # the carried tile walk (Fp8Overrides.tile_walk): two-wave psum (empty group, decode form), split psum, masked
    ("m_grouped_psum_ws_walk", _m_grouped(True, "ws", _forced(waves=2, wave_n=True, tile_walk=True, **WS), waves=2,
                                          walk=True)),
    ("m_grouped_psum_ws_walk_decode_form", _m_grouped(True, "ws", Fp8Overrides(tile_walk=True), extra_rows=1000,
                                                      expected_m=40, walk=True)),
    ("m_grouped_psum_ws_walk_split_tile", _m_grouped(True, "ws", _forced(waves=2, wave_n=True, narrow=64,
                                                                         tile_walk=True, **WS), zero_pad=False,
                                                     narrow=64, walk=True)),
    ("m_grouped_psum_ws_walk_stagger", _m_grouped(True, "ws", _forced(waves=2, wave_n=True, tile_walk=True,
                                                                      stagger=2, **WS), waves=2, stagger=2)),
    ("m_grouped_ids_ws_stagger_meet", _m_grouped(False, "ws", _forced(waves=2, wave_n=True, stagger=3, **WS),
                                                 waves=2, stagger=3)),
    # masked
    ("masked_tl_pointer_stores", _masked("tl", 96)),
    ("masked_ws_two_wave", _masked("ws", 128, _forced(waves=2, wave_n=True, **WS), waves=2)),
    ("masked_ws_two_wave_walk", _masked("ws", 128, _forced(waves=2, wave_n=True, tile_walk=True, **WS), waves=2,
                                        walk=True)),
    ("masked_ws_one_wave_staged", _masked("ws", 128, _forced(waves=1, staged_scales_bn=(128,), **WS), waves=1,
                                          scales_smem=True)),
    # K-grouped
    ("k_grouped_nt_ws", _k_grouped("nt", 128, "ws", in_place=False)),
    ("k_grouped_nt_ws_device_descriptors", _k_grouped("nt", 128, "ws", in_place=True)),
    ("k_grouped_tn_ws", _k_grouped("tn", 256, "ws")),
    ("k_grouped_tn_ws_stagger", _k_grouped("tn", 256, "ws", stagger=2)),
    ("k_grouped_nt_tl", _k_grouped("nt", 96, "tl")),
]
