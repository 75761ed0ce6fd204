"""The carried tile walk of the warp-specialised FP8 kernel (ws_scheduler._walk, _walk_info, _group_at: psum and
masked layouts, Fp8Overrides.tile_walk) on the CPU. The Gluon kernel cannot run under Triton's interpreter, so the
kernel's own walk functions run here as plain Python (their ``.fn``), their ``gl`` calls on integers, and every
CTA's tile sequence is checked against the tiles the per-tile scan (_tile_info) defines: each group's
cdiv(rows, BM) row blocks x cdiv(N, BN) column blocks in group order, rastered in GROUP_M bands. Odd group sizes,
empty groups (first, middle, last, all), psum ends past M, 1-row groups, one CTA and many."""

from __future__ import annotations

import random
import types

import pytest

from deep_gemm.common.kernels import tiles
from deep_gemm.gemm.fp8.kernels import ws_scheduler as ws


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
    monkeypatch.setattr(tiles, "gl", _GL)
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
