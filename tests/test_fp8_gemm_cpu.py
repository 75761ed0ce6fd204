"""FP8 GEMM Triton kernels against the float64 oracle in the Triton interpreter on CPU (small shapes; the GPU runs
are test_fp8_gemm_gpu.py), the Gluon kernel's tile walk on integers and its barriers compiled for sm_90a. Outputs are
poisoned with NaN first, so an unwritten element fails the test; rows the contract leaves untouched are checked to still
hold their poison/sentinel."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import types

import pytest
import torch

from deep_gemm.common.kernels import tiles as tile_order
from deep_gemm.gemm.fp8.kernels import ws_scheduler as ws
from deep_gemm.testing import calc_diff
from deep_gemm.utils import align

from fp8_inputs import contiguous_grouped_inputs, k_grouped_inputs, mn_major, oracle_gemm, quantize, quantize_groups
from tolerances import TOLERANCES
from triton_harness import DEVICE, run_triton

TOL = TOLERANCES["kernel_fp8"]


def _to(*xs):
    return tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in xs)


DENSE = [
    # (m, n, k, layout, kind)  kind: 1d2d (BF16 out) | 1d1d (FP32 out, per-row B, accumulate into C = D)
    (37, 200, 208, "nt", "1d2d"),      # odd M, N not a multiple of 128, K tail
    (128, 256, 384, "nt", "1d2d"),
    (1, 128, 256, "nt", "1d2d"),
    (16, 128, 1024, "nt", "1d2d"),     # small M, 8 K blocks (unsplit: fewer than 2 x 7 blocks)
    (16, 128, 2944, "nt", "1d2d"),     # small M, 23 K blocks: split-K in three splits of 8, 8 and 7 blocks
    (48, 208, 256, "nn", "1d2d"),      # MN-major B
    (48, 128, 256, "tn", "1d2d"),      # MN-major A and B
    (48, 128, 256, "tt", "1d2d"),      # MN-major A
    (64, 192, 320, "nt", "1d1d"),      # weight-gradient recipe, C accumulate
    (16, 128, 2048, "nt", "1d1d"),     # split-K (two splits) with accumulate
]


def test_dense_heuristic_splits_k_for_the_split_cases():
    """The cases above meant to cover split-K get a split config from the heuristic (it moves with calibration)."""
    from deep_gemm.gemm.fp8 import configs
    for k, split in [(2944, 3), (2048, 2), (1024, 1)]:
        assert configs.heuristic(configs.Fp8GemmProblem(16, 128, k, 1, "dense", 132)).split_k == split, k


@pytest.mark.parametrize("split", [2, 5, 6])
def test_split_k_reduction_any_split_count(split):
    """Forced split counts, including ones that do not divide the 12 K blocks evenly (5: 3 + 3 + 3 + 3 + 0 blocks is
    not what the heuristic would pick, the last split is empty) and more splits than the heuristic allows."""
    from deep_gemm.gemm.fp8 import configs
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    from deep_gemm.gemm.fp8.plan import Fp8Overrides
    m, n, k = 16, 128, 1536
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128))
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    a0, a1, b0, b1, d = _to(*a, *b, d)
    fp8_launch._launch_dense(a0, a1, b0, b1, d, None, False,
                             overrides=Fp8Overrides(config=configs._config(16, 64, split)))
    assert calc_diff(d.cpu(), expected) < TOL


@pytest.mark.parametrize("m,n,k,layout,kind", DENSE, ids=lambda v: str(v))
def test_dense(m, n, k, layout, kind):
    per_row_b = kind == "1d1d"
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 1 if per_row_b else 128)
    expected = oracle_gemm(*a, (1, 128), *b, (1, 128) if per_row_b else (128, 128))
    if per_row_b:
        d = torch.randn(m, n)
        expected = expected + d.double()
        c, recipe = "d", [1, 1, 128]
    else:
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        c, recipe = None, None
    a_arg, b_arg = a, b
    if layout[0] == "t":
        a_arg = (mn_major(a[0]).T, a[1].T)
    if layout[1] == "n":
        b_arg = (mn_major(b[0]).T, b[1].T)
    a0, a1, b0, b1, d = _to(*a_arg, *b_arg, d)
    run_triton(f"fp8_gemm_{layout}", a0, a1, b0, b1, d, d if c == "d" else None, recipe)
    assert calc_diff(d.cpu(), expected) < TOL


def test_dense_distinct_c_and_mn_major_sfa():
    m, n, k = 33, 128, 256
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    c = torch.randn(m, n).to(torch.bfloat16)
    sfa = torch.zeros(a[1].size(1), align(m, 4)).T[:m]  # MN-major, TMA-aligned scale layout
    sfa.copy_(a[1])
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128)) + c.double()
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    a0, sfa, b0, b1, d, c = _to(a[0], sfa, *b, d, c)
    run_triton("fp8_gemm_nt", a0, sfa, b0, b1, d, c)
    assert calc_diff(d.cpu(), expected) < TOL


def test_skip_head_mid():
    left, mid, right = 64, 32, 64
    m, n, k = 20, 256, 256
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128))
    heads = n // (left + right)
    d = torch.full((m, n + heads * mid), 7.0, dtype=torch.bfloat16)
    a0, a1, b0, b1, d = _to(*a, *b, d)
    run_triton("fp8_gemm_nt_skip_head_mid", a0, a1, b0, b1, d, [left, mid, right])
    per_head = d.cpu().view(m, heads, left + mid + right)
    got = torch.cat([per_head[:, :, :left], per_head[:, :, left + mid:]], dim=2).reshape(m, n)
    assert calc_diff(got, expected) < TOL
    assert (per_head[:, :, left:left + mid] == 7.0).all()


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("psum,zero_pad", [(False, True), (True, True), (True, False)])
def test_m_grouped_contiguous(layout, psum, zero_pad):
    ms, n, k = [100, 0, 37, 128], 192, 256
    a, b, ids, ends = contiguous_grouped_inputs(ms, n, k)
    d = torch.full((a[0].size(0), n), 5.0, dtype=torch.bfloat16)
    b_arg = b if layout == "nt" else (mn_major(b[0]).transpose(1, 2), b[1].transpose(1, 2))
    a0, a1, b0, b1, d, lay = _to(*a, *b_arg, d, ends if psum else ids)
    run_triton(f"m_grouped_fp8_gemm_{layout}_contiguous", a0, a1, b0, b1, d, lay, None, None, None, "nk", False,
               psum, zero_pad)
    d = d.cpu()
    for g in range(len(ms)):
        rows = (ids == g).nonzero().flatten()
        if rows.numel():
            expected = oracle_gemm(a[0][rows], a[1][rows], (1, 128), b[0][g], b[1][g], (128, 128))
            assert calc_diff(d[rows], expected) < TOL
    pad = ids == -1
    assert (d[pad] == (5.0 if psum and not zero_pad else 0.0)).all()


def test_masked_leaves_rows_beyond_mask_untouched():
    num_groups, max_m, n, k = 3, 96, 128, 256
    masked = torch.tensor([0, 17, 96], dtype=torch.int32)
    a = quantize_groups(torch.randn(num_groups, max_m, k), 1)
    b = quantize_groups(torch.randn(num_groups, n, k), 128)
    d = torch.full((num_groups, max_m, n), float("nan"), dtype=torch.bfloat16)
    a0, a1, b0, b1, d, mm = _to(*a, *b, d, masked)
    run_triton("m_grouped_fp8_gemm_nt_masked", a0, a1, b0, b1, d, mm, 32)
    d = d.cpu()
    for g in range(num_groups):
        m = int(masked[g])
        if m:
            expected = oracle_gemm(a[0][g, :m], a[1][g, :m], (1, 128), b[0][g], b[1][g], (128, 128))
            assert calc_diff(d[g, :m], expected) < TOL
        assert d[g, m:].isnan().all()


@pytest.mark.parametrize("layout", ["nt", "tn"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_k_grouped(layout, accumulate):
    ks, m, n = [256, 0, 128, 384], 48, 80
    a, b, qa, qb = k_grouped_inputs(layout, ks, m, n)
    d = torch.randn(len(ks), m, n)
    before = d.clone()
    c = d.clone() if accumulate else None
    a0, a1, b0, b1, d, lay, c = _to(*a, *b, d, torch.tensor(ks, dtype=torch.int32), c)
    run_triton(f"k_grouped_fp8_gemm_{layout}_contiguous", a0, a1, b0, b1, d, ks, lay, c)
    d = d.cpu()
    for g, kg in enumerate(ks):
        expected = before[g].double() if accumulate else torch.zeros(m, n, dtype=torch.float64)
        if kg:
            expected = expected + oracle_gemm(*qa[g], (1, 128), *qb[g], (1, 128))
        assert calc_diff(d[g], expected) < TOL


@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_k_grouped_uniform_tiles_reach_the_warp_specialised_kernel(layout, monkeypatch):
    """The plan's uniform flag (Fp8Overrides.uniform_tiles on a K-grouped call) is the WS kernel's UNIFORM, and is
    in the compiled kernel's key. (The launch itself is faked: the Gluon kernel does not run in the interpreter.)"""
    from deep_gemm.gemm.fp8 import plan as fp8_plan
    from deep_gemm.gemm.fp8 import launch as fp8_launch
    launches = []

    def fake_launch(kernel, grid, args, *, config_key, **kwargs):
        launches.append((dict(zip(kernel.arg_names, args)), config_key))
    monkeypatch.setattr(fp8_launch, "launch", fake_launch)
    monkeypatch.setattr(fp8_launch, "interpreting", lambda: False)
    ks, m, n = [256, 0, 128, 384], 256, 512
    a, b, _, _ = k_grouped_inputs(layout, ks, m, n)
    d = torch.zeros(len(ks), m, n)
    op = getattr(fp8_launch, f"k_grouped_fp8_gemm_{layout}_contiguous")
    for uniform, expected in ((None, fp8_plan.UNIFORM_K_GROUPED), (True, True), (False, False)):
        launches.clear()
        over = fp8_plan.Fp8Overrides(uniform_tiles=uniform, regs=(232, 40), ws_mode="on")
        op(*a, *b, d, ks, torch.tensor(ks, dtype=torch.int32), d.clone(), None, None, False, overrides=over)
        (args, key), = launches
        assert args["GROUPING"] == fp8_plan.GROUPING["k_grouped"]
        assert args["UNIFORM"] == expected and key[-3] == expected  # (the key ends: uniform, stagger, registers)


# ---- The carried tile walk, on integers (Fp8Overrides.tile_walk) --------------------------------------------------
# The carried tile walk of the warp-specialised FP8 kernel (ws_scheduler._walk, _walk_info, _group_at: psum and masked
# layouts, Fp8Overrides.tile_walk) on the CPU. The Gluon kernel cannot run under Triton's interpreter, so the kernel's
# own walk functions run here as plain Python (their ``.fn``), their ``gl`` calls on integers, and every CTA's tile
# sequence is checked against the tiles the per-tile scan (_tile_info) defines: each group's cdiv(rows, BM) row blocks
# x cdiv(N, BN) column blocks in group order, rastered in GROUP_M bands. Odd group sizes, empty groups (first, middle,
# last, all), psum ends past M, 1-row groups, one CTA and many.

class _I(int):
    """An int with the tensor methods the walk uses (``.to``; & and | on comparisons)."""

    def to(self, _dtype):
        return _I(int(self))


for _name in ("add", "sub", "mul", "floordiv", "mod", "and", "or"):
    def _binary(name):
        def f(self, other):
            return _I(getattr(int, f"__{name}__")(int(self), int(other)))

        def r(self, other):
            return _I(getattr(int, f"__r{name}__")(int(self), int(other)))
        return f, r
    _f, _r = _binary(_name)
    setattr(_I, f"__{_name}__", _f)
    setattr(_I, f"__r{_name}__", _r)
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    def _cmp(name):
        return lambda self, other: _I(getattr(int, f"__{name}__")(int(self), int(other)))
    setattr(_I, f"__{_name}__", _cmp(_name))
_I.__hash__ = int.__hash__


class _Ptr:
    """A pointer into a list of int32 values (the layout tensor)."""

    def __init__(self, values, offset=0):
        self.values, self.offset = values, offset

    def __add__(self, i):
        return _Ptr(self.values, self.offset + int(i))

    def load(self):
        return _I(self.values[self.offset])


_GL = types.SimpleNamespace(cdiv=lambda a, b: _I(-(-int(a) // int(b))), maximum=lambda a, b: _I(max(a, b)),
                            minimum=lambda a, b: _I(min(a, b)), load=lambda p: p.load(), int32="i32")


@pytest.fixture
def walk(monkeypatch):
    """The kernel module's walk functions, callable on integers."""
    monkeypatch.setattr(ws, "gl", _GL)
    monkeypatch.setattr(tile_order, "gl", _GL)
    for name in ("_group_at", "_walk_start", "_walk", "_walk_info", "swizzle", "warp_uniform"):
        monkeypatch.setattr(ws, name, getattr(ws, name).fn)
    return ws


def _groups(layout, m, grouping, align):
    """(rows, first row) per group, as the kernel defines them (_group_rows)."""
    out, prev = [], 0
    for v in layout:
        if grouping == 3:
            out.append((v, 0))
            continue
        end = min(max(v, 0), m)
        start = -(-prev // align) * align
        out.append((max(end - start, 0), start))
        prev = end
    return out


def _scan_tiles(layout, m, n, grouping, bm, bn, group_m, align):
    """Every tile (group, off_m, off_n, m_limit) in the scan's order: groups in turn, each rastered in GROUP_M
    bands of row blocks (common.kernels.tiles.swizzle)."""
    tiles = []
    nb = -(-n // bn)
    for g, (rows, start) in enumerate(_groups(layout, m, grouping, align)):
        mb = -(-rows // bm)
        for t in range(mb * nb):
            first = (t // (group_m * nb)) * group_m
            band = min(mb - first, group_m)
            pid_m, pid_n = first + (t % (group_m * nb)) % band, (t % (group_m * nb)) // band
            tiles.append((g, start + pid_m * bm, pid_n * bn, start + rows))
    return tiles


def _walked_tiles(w, layout, m, n, grouping, bm, bn, group_m, align, num_sms, prefetch):
    """Each CTA's tiles through the kernel's walk, as the consumer runs it (the walk moved on to the next tile
    before the epilogue when `prefetch`, then the loop's top finds the tile there)."""
    g_const, ptr, ng = w.M_PSUM if grouping == 2 else w.MASKED, _Ptr(layout), _I(len(layout))
    total = len(_scan_tiles(layout, m, n, grouping, bm, bn, group_m, align))
    out = {}
    for pid in range(num_sms):
        g, first = w._walk_start(_I(pid))
        if prefetch:
            g, first, _, _ = w._walk(_I(max(min(pid, total - 1), 0)), g, first, ptr, _I(m), _I(n), ng, bm, bn,
                                     g_const, align)
        for unit in range(pid, total, num_sms):
            g, first, rows, start = w._walk(_I(unit), g, first, ptr, _I(m), _I(n), ng, bm, bn, g_const, align)
            group, expert, off_m, off_n, m_limit, row_end = w._walk_info(_I(unit), g, first, rows, start, _I(m),
                                                                          _I(n), bm, bn, group_m, g_const)
            assert group == expert
            assert row_end == (m if grouping == 2 else m_limit)
            out[unit] = (int(group), int(off_m), int(off_n), int(m_limit))
            if prefetch:
                nxt = _I(max(min(unit + num_sms, total - 1), 0))
                g, first, _, _ = w._walk(nxt, g, first, ptr, _I(m), _I(n), ng, bm, bn, g_const, align)
    return [out[u] for u in range(total)]


def _psum_ends(ms, align=128):
    ends, start = [], 0
    for mg in ms:
        ends.append(start + mg)
        start = -(-(start + mg) // align) * align
    return ends, start


PSUM_CASES = [
    [3000, 0, 129, 1, 700],  # an empty group in the middle, a 1-row group
    [0, 0, 5, 0],  # empty groups first and last
    [0, 0, 0],  # every group empty
    [128, 256, 1, 0, 383],  # groups filling whole segments
    [5] * 40,  # many small groups: a CTA passes several per step
]


@pytest.mark.parametrize("ms", PSUM_CASES)
@pytest.mark.parametrize("bn,num_sms,prefetch", [(256, 132, True), (192, 7, False), (128, 1, True)])
def test_psum_walk_visits_the_scans_tiles(walk, ms, bn, num_sms, prefetch):
    ends, m = _psum_ends(ms)
    m = max(m, 1) + 200  # rows after the last group (the decode form)
    args = (ends, m, 576, 2, 128, bn, 8, 128)
    assert _walked_tiles(walk, *args, num_sms, prefetch) == _scan_tiles(*args[:-1], args[-1])


def test_psum_ends_past_m_and_out_of_order_are_clamped(walk):
    """A layout overrunning A: ends clamped to [0, M], as the scan clamps them; a decreasing end is an empty
    group."""
    args = ([300, 100, 5000, -3, 900], 700, 256, 2, 128, 256, 8, 128)
    assert _walked_tiles(walk, *args, 5, True) == _scan_tiles(*args)


@pytest.mark.parametrize("seed", range(4))
def test_masked_walk_visits_the_scans_tiles(walk, seed):
    random.seed(seed)
    masked = [random.choice([0, 1, 20, 128, 129, 300]) for _ in range(random.randint(1, 33))]
    args = (masked, 512, 7168, 3, 128, 256, 8, 128)
    assert _walked_tiles(walk, *args, 132, False) == _scan_tiles(*args)
    assert _walked_tiles(walk, *args, 3, True) == _scan_tiles(*args)


# ---- The Gluon kernel's stage barriers (compiled for sm_90a) ------------------------------------------------------
# The warp-specialised FP8 kernel's stage barriers are initialised for exactly the arrivals a phase receives
# (scripts/compile_check_fp8.py --barriers; compiled for sm_90a, no GPU needed). An mbarrier initialised for fewer
# arrivals than it gets completes phases early (compute-sanitizer synccheck: "Barrier overflow"): the consumers could
# read staged scales before their cp.async copies land. Runs in a subprocess without TRITON_INTERPRET.

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "scripts", "compile_check_fp8.py")


def test_ready_barriers_count_every_arrival():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, SCRIPT, "--barriers"], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(report) == 5
    staged = [name for name, facts in report.items() if facts["cp_async_arrives"]]
    assert len(staged) == 4, report  # the variants that stage scales by cp.async were compiled as such
    for name, facts in report.items():
        assert not facts["problems"], f"{name}: {facts['problems']}"
