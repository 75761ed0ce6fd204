"""FP8 GEMM ops on CPU: the reference (CPU kernel) against an independent float64 oracle, opcheck, bad inputs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
import torch

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import calc_diff
from deep_gemm.utils import align, ceil_div

from fp8_inputs import contiguous_grouped_inputs, k_grouped_inputs, mn_major, oracle_gemm, quantize, quantize_groups
from tolerances import TOLERANCES

ops = torch.ops.deep_gemm
FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


@dataclass(frozen=True)
class DenseCase:
    m: int
    n: int
    k: int
    layout: str = "nt"
    kind: str = "1d2d"  # 1d2d: BF16 out, B per block; 1d1d: FP32 out, B per row, accumulate; fp4: packed E2M1
    accumulate: bool = False

    def __str__(self) -> str:
        return f"{self.layout}-{self.kind}-m{self.m}n{self.n}k{self.k}{'-acc' if self.accumulate else ''}"


SHAPES = [(0, 128, 256), (1, 256, 128), (37, 200, 208), (64, 576, 320), (129, 128, 512)]
# MN-major FP8 operands need M (or N) to be a multiple of 16 (16-byte aligned strides for TMA).
MN_MAJOR_SHAPES = [(0, 128, 256), (1, 256, 128), (48, 208, 208), (64, 576, 320), (144, 128, 512)]
DENSE_CASES = (
    [DenseCase(m, n, k, "nt") for (m, n, k) in SHAPES]
    + [DenseCase(m, n, k, layout) for (m, n, k), layout in itertools.product(MN_MAJOR_SHAPES, ("nn", "tn", "tt"))]
    + [DenseCase(m, n, k, "nt", "1d1d", acc) for (m, n, k) in SHAPES for acc in (False, True)]
    + [DenseCase(64, 256, 320, "tn", "1d1d", True), DenseCase(16, 128, 0, "nt", "1d1d", True),
       DenseCase(16, 128, 0, "nt"), DenseCase(33, 64, 256, "nt", "fp4"), DenseCase(8, 96, 160, "nt", "fp4")]
)


def make_dense(case: DenseCase):
    x = torch.randn(case.m, case.k)
    w = torch.randn(case.n, case.k)
    if case.kind == "fp4":
        gran_a, gran_b = (1, 32), (1, 32)
        a = quantize(x, 1, 32, fp4=True, packed_sf=True)
        b = quantize(w, 1, 32, fp4=True, packed_sf=True)
        kwargs = dict(recipe_a=gran_a, recipe_b=gran_b)
    else:
        gran_a, gran_b = (1, 128), ((1, 128) if case.kind == "1d1d" else (128, 128))
        a = quantize(x, 1)
        b = quantize(w, gran_b[0])
        kwargs = dict(recipe=(1, 1, 128)) if case.kind == "1d1d" else {}
    expected = oracle_gemm(*a, gran_a, *b, gran_b)
    out_dtype = torch.float32 if case.kind == "1d1d" else torch.bfloat16
    d = torch.randn(case.m, case.n).to(out_dtype)
    c = d if case.accumulate else None
    if case.accumulate:
        expected = expected + d.double()
    # Present operands in the requested layout: transposed tensors, and MN-major memory for the data.
    a_arg, b_arg = a, b
    if case.layout[0] == "t":
        a_arg = (mn_major(a[0]).T, a[1].T)
    if case.layout[1] == "n":
        b_arg = (mn_major(b[0]).T, b[1].T)
    return a_arg, b_arg, d, c, kwargs, expected


@pytest.mark.parametrize("case", DENSE_CASES, ids=str)
def test_dense_reference_matches_oracle(case):
    a, b, d, c, kwargs, expected = make_dense(case)
    getattr(deep_gemm, f"fp8_gemm_{case.layout}")(a, b, d, c=c, **kwargs)
    tol = TOLERANCES["reference_fp32_out" if d.dtype == torch.float32 else "reference_bf16_out"]
    assert calc_diff(d, expected) < tol
    # Every element written: compare against the oracle elementwise loosely as well.
    if d.numel():
        assert torch.isfinite(d.float()).all()


def test_fp4_alias_is_the_same_function():
    assert deep_gemm.fp8_fp4_gemm_nt is deep_gemm.fp8_gemm_nt
    assert deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked is deep_gemm.m_grouped_fp8_gemm_nt_masked
    assert deep_gemm.fp8_m_grouped_gemm_nt_masked is deep_gemm.m_grouped_fp8_gemm_nt_masked


def test_dense_through_dispatcher_and_alias_op():
    a, b, d, _, _, expected = make_dense(DenseCase(32, 128, 256))
    ops.fp8_gemm_nt(a[0], a[1], b[0], b[1], d)
    d2 = torch.empty_like(d)
    ops.fp8_fp4_gemm_nt(a[0], a[1], b[0], b[1], d2)
    assert torch.equal(d, d2)
    assert calc_diff(d, expected) < TOLERANCES["reference_bf16_out"]


def test_sfa_in_mn_major_tma_aligned_layout_is_accepted():
    a, b, d, _, _, expected = make_dense(DenseCase(37, 128, 384))
    sfa = a[1]
    padded = torch.zeros(sfa.size(1), align(sfa.size(0), 4)).T[: sfa.size(0)]  # strides (1, align(M, 4))
    padded.copy_(sfa)
    deep_gemm.fp8_gemm_nt((a[0], padded), b, d)
    assert calc_diff(d, expected) < TOLERANCES["reference_bf16_out"]


def test_skip_head_mid_writes_heads_and_leaves_mid_untouched():
    left, mid, right = 64, 32, 64
    m, n, k = 17, 256, 256
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128))
    heads = n // (left + right)
    d = torch.full((m, n + heads * mid), 7.0, dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt_skip_head_mid(a, b, d, (left, mid, right))
    per_head = d.view(m, heads, left + mid + right)
    got = torch.cat([per_head[:, :, :left], per_head[:, :, left + mid:]], dim=2).reshape(m, n)
    assert calc_diff(got, expected) < TOLERANCES["reference_bf16_out"]
    assert (per_head[:, :, left:left + mid] == 7.0).all()


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("psum,zero_pad", [(False, True), (True, True), (True, False)])
def test_m_grouped_contiguous_reference(layout, psum, zero_pad):
    ms = [100, 0, 37, 128]
    n, k = 256, 320
    a, b, ids, ends = contiguous_grouped_inputs(ms, n, k)
    total = a[0].size(0)
    sentinel = 5.0
    d = torch.full((total, n), sentinel, dtype=torch.bfloat16)
    b_arg = b if layout == "nt" else (mn_major(b[0]).transpose(1, 2), b[1].transpose(1, 2))
    layout_arg = ends if psum else ids
    getattr(deep_gemm, f"m_grouped_fp8_gemm_{layout}_contiguous")(
        a, b_arg, d, layout_arg, use_psum_layout=psum, ensure_zero_padding=zero_pad)
    for g in range(len(ms)):
        rows = (ids == g).nonzero().flatten()
        if rows.numel() == 0:
            continue
        expected = oracle_gemm(a[0][rows], a[1][rows], (1, 128), b[0][g], b[1][g], (128, 128))
        assert calc_diff(d[rows], expected) < TOLERANCES["reference_bf16_out"]
    pad = ids == -1
    if psum and not zero_pad:
        assert (d[pad] == sentinel).all()
    else:
        assert (d[pad] == 0).all()


def test_masked_reference_leaves_rows_beyond_mask_untouched():
    num_groups, max_m, n, k = 3, 64, 128, 256
    masked = torch.tensor([0, 17, 64], dtype=torch.int32)
    a = quantize_groups(torch.randn(num_groups, max_m, k), 1)
    b = quantize_groups(torch.randn(num_groups, n, k), 128)
    d = torch.full((num_groups, max_m, n), -3.0, dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked, expected_m=32)
    for g in range(num_groups):
        m = int(masked[g])
        if m:
            expected = oracle_gemm(a[0][g, :m], a[1][g, :m], (1, 128), b[0][g], b[1][g], (128, 128))
            assert calc_diff(d[g, :m], expected) < TOLERANCES["reference_bf16_out"]
        assert (d[g, m:] == -3.0).all()


@pytest.mark.parametrize("layout", ["nt", "tn"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_k_grouped_reference(layout, accumulate):
    ks, m, n = [256, 0, 128, 384], 48, 80
    a, b, qa, qb = k_grouped_inputs(layout, ks, m, n)
    d = torch.randn(len(ks), m, n)
    c = d.clone() if accumulate else None
    before = d.clone()
    fn = getattr(deep_gemm, f"k_grouped_fp8_gemm_{layout}_contiguous")
    fn(a, b, d, ks, torch.tensor(ks, dtype=torch.int32), c=c)
    for g, kg in enumerate(ks):
        expected = (before[g].double() if accumulate else torch.zeros(m, n, dtype=torch.float64))
        if kg:
            expected = expected + oracle_gemm(*qa[g], (1, 128), *qb[g], (1, 128))
        assert calc_diff(d[g], expected) < TOLERANCES["reference_fp32_out"]


# ---- opcheck ---------------------------------------------------------------------------------------------------

def _opcheck(op, args):
    torch.library.opcheck(op, args, test_utils=FP8_OPCHECK_UTILS)


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
def test_opcheck_dense(layout):
    a, b, d, c, kwargs, _ = make_dense(DenseCase(32, 128, 256, layout))
    _opcheck(getattr(ops, f"fp8_gemm_{layout}").default, (a[0], a[1], b[0], b[1], d))
    a, b, d, c, kwargs, _ = make_dense(DenseCase(32, 128, 256, "nt", "1d1d", True))
    _opcheck(ops.fp8_gemm_nt.default, (a[0], a[1], b[0], b[1], d, d.clone(), [1, 1, 128]))


def test_opcheck_grouped_ops():
    a, b, ids, ends = contiguous_grouped_inputs([100, 37], 128, 256)
    d = torch.zeros(a[0].size(0), 128, dtype=torch.bfloat16)
    _opcheck(ops.m_grouped_fp8_gemm_nt_contiguous.default, (a[0], a[1], b[0], b[1], d, ids))
    _opcheck(ops.m_grouped_fp8_gemm_nn_contiguous.default,
             (a[0], a[1], mn_major(b[0]).transpose(1, 2), b[1].transpose(1, 2), d, ends, None, None, None, "nk",
              False, True))
    masked_a = (a[0].view(2, 128, 256), a[1].view(2, 128, -1))
    dm = torch.zeros(2, 128, 128, dtype=torch.bfloat16)
    _opcheck(ops.m_grouped_fp8_gemm_nt_masked.default,
             (masked_a[0], masked_a[1], b[0], b[1], dm, torch.tensor([5, 128], dtype=torch.int32), 64))
    qa = quantize(torch.randn(16, 256), 1)
    qb = quantize(torch.randn(256, 256), 128)
    _opcheck(ops.fp8_gemm_nt_skip_head_mid.default,
             (qa[0], qa[1], qb[0], qb[1], torch.zeros(16, 256 + 64, dtype=torch.bfloat16), [64, 32, 64]))
    for layout in ("nt", "tn"):
        ks = [128, 0, 256]
        ka, kb, _, _ = k_grouped_inputs(layout, ks, 16, 32)
        dk = torch.zeros(3, 16, 32)
        _opcheck(getattr(ops, f"k_grouped_fp8_gemm_{layout}_contiguous").default,
                 (ka[0], ka[1], kb[0], kb[1], dk, ks, torch.tensor(ks, dtype=torch.int32), dk.clone()))


# ---- bad inputs: clear errors, nothing written -------------------------------------------------------------------

def _dense_args():
    a, b, d, _, _, _ = make_dense(DenseCase(32, 128, 256))
    return a, b, d


BAD_DENSE = [
    ("a dtype", lambda a, b, d: ((a[0].float(), a[1]), b, d, {}),
     r"a: expected dtype float8_e4m3fn or int8, got float32"),
    ("b K", lambda a, b, d: (a, (b[0][:, :128], b[1]), d, {}), r"b: expected K = 256"),
    ("sfa shape", lambda a, b, d: ((a[0], a[1][:, :1]), b, d, {}), r"sfa: expected shape \(32, 2\)"),
    ("sfb shape", lambda a, b, d: (a, (b[0], b[1].repeat(2, 1)), d, {}), r"sfb: expected shape \(1, 2\)"),
    ("d shape", lambda a, b, d: (a, b, torch.zeros(32, 64, dtype=torch.bfloat16), {}),
     r"d: expected shape \(32, 128\)"),
    ("d dtype", lambda a, b, d: (a, b, torch.zeros(32, 128, dtype=torch.float16), {}),
     r"d: expected dtype bfloat16 or float32"),
    ("c dtype", lambda a, b, d: (a, b, d, {"c": torch.zeros(32, 128)}), r"c: expected the dtype of d"),
    ("recipe both", lambda a, b, d: (a, b, d, {"recipe": (1, 128, 128), "recipe_a": (1, 128)}), r"recipe: pass either"),
    ("recipe_a only", lambda a, b, d: (a, b, d, {"recipe_a": (1, 128)}), r"recipe_a/recipe_b: expected both"),
    ("recipe gran", lambda a, b, d: (a, b, d, {"recipe": (1, 64, 128)}), r"along MN must be one of"),
    ("compiled_dims", lambda a, b, d: (a, b, d, {"compiled_dims": "xk"}), r"compiled_dims: expected a subset"),
    ("a layout", lambda a, b, d: ((a[0].repeat(1, 2)[:, ::2], a[1]), b, d, {}), r"a: expected a K-major or MN-major"),
    ("a alignment", lambda a, b, d: ((a[0][:, 8:] , a[1]), b, d, {}), r"b: expected K = 248|a: expected a 16-byte"),
    ("device", lambda a, b, d: (a, b, torch.empty(32, 128, dtype=torch.bfloat16, device="meta"), {}),
     r"d: expected device cpu"),
    ("pair", lambda a, b, d: (a[0], b, d, {}), r"a: expected a \(data, scale\) pair"),
]


@pytest.mark.parametrize("name,mutate,pattern", BAD_DENSE, ids=[x[0] for x in BAD_DENSE])
def test_dense_bad_input_raises_before_writing(name, mutate, pattern):
    a, b, d = _dense_args()
    a2, b2, d2, kwargs = mutate(a, b, d)
    before = d.clone()
    with pytest.raises(DeepGEMMError, match=pattern):
        deep_gemm.fp8_gemm_nt(a2, b2, d2, **kwargs)
    assert torch.equal(d, before)


def test_error_is_also_runtime_and_value_error():
    a, b, d = _dense_args()
    with pytest.raises(RuntimeError):
        deep_gemm.fp8_gemm_nt(a, b, d[:, :64])
    with pytest.raises(ValueError):
        deep_gemm.fp8_gemm_nt(a, b, d[:, :64])


def test_grouped_bad_inputs():
    a, b, ids, ends = contiguous_grouped_inputs([100, 37], 128, 256)
    d = torch.zeros(a[0].size(0), 128, dtype=torch.bfloat16)
    before = d.clone()
    with pytest.raises(DeepGEMMError, match=r"grouped_layout: expected one expert id per row of a \(256\)"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, ids[:10])
    with pytest.raises(DeepGEMMError, match=r"grouped_layout: expected 2 cumulative group ends"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, ids, use_psum_layout=True)
    with pytest.raises(DeepGEMMError, match=r"grouped_layout: expected dtype int32, got int64"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, ids.long())
    with pytest.raises(DeepGEMMError, match=r"a: expected M to be a multiple of the contiguous-layout alignment 128"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a[0][:200], a[1][:200]), b, d[:200], ids[:200])
    with pytest.raises(DeepGEMMError, match=r"expected_m_for_psum_layout: only meaningful"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, ids, expected_m_for_psum_layout=64)
    with pytest.raises(DeepGEMMError, match=r"d: expected dtype bfloat16, got float32"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d.float(), ids)
    assert torch.equal(d, before)
    masked_a = (a[0].view(2, 128, 256), a[1].view(2, 128, -1))
    dm = torch.zeros(2, 128, 128, dtype=torch.bfloat16)
    with pytest.raises(DeepGEMMError, match=r"expected_m: expected a positive integer, got 0"):
        deep_gemm.m_grouped_fp8_gemm_nt_masked(masked_a, b, dm, torch.tensor([1, 2], dtype=torch.int32), 0)
    with pytest.raises(DeepGEMMError, match=r"masked_m: expected 2 entries, got 3"):
        deep_gemm.m_grouped_fp8_gemm_nt_masked(masked_a, b, dm, torch.tensor([1, 2, 3], dtype=torch.int32), 8)
    assert (dm == 0).all()


def test_k_grouped_bad_inputs():
    ks = [128, 256]
    a, b, _, _ = k_grouped_inputs("nt", ks, 16, 32)
    d = torch.zeros(2, 16, 32)
    layout = torch.tensor(ks, dtype=torch.int32)
    fn = deep_gemm.k_grouped_fp8_gemm_nt_contiguous
    with pytest.raises(DeepGEMMError, match=r"ks_cpu: expected non-negative multiples of 128, got 100"):
        fn(a, b, d, [100, 256], layout)
    with pytest.raises(DeepGEMMError, match=r"recipe: K-grouped FP8 GEMMs use per-row scales"):
        fn(a, b, d, ks, layout, recipe=(1, 128, 128))
    with pytest.raises(DeepGEMMError, match=r"use_psum_layout: the K-grouped psum layout takes MN-major operands"):
        fn(a, b, d, ks, layout, use_psum_layout=True)
    with pytest.raises(DeepGEMMError, match=r"d: expected 3 groups"):
        fn(a, b, d, [128, 128, 128], torch.tensor([128] * 3, dtype=torch.int32))
    assert (d == 0).all()


def _k_psum_inputs(ends, sum_k, m=16, n=32, scale_rows=None):
    """tn operands of the K psum layout with compact scales (ceil(K_g / 128) rows per group, or scale_rows)."""
    from deep_gemm.gemm.fp8.reference import k_psum_scale_rows
    layout = torch.tensor(ends, dtype=torch.int32)
    needed = int(k_psum_scale_rows(layout)[2].sum()) if scale_rows is None else scale_rows
    a = (torch.randn(sum_k, m).to(torch.float8_e4m3fn), torch.rand(needed, m) + 0.5)
    b = (torch.randn(sum_k, n).to(torch.float8_e4m3fn), torch.rand(needed, n) + 0.5)
    return a, b, layout


def test_k_grouped_psum_matches_a_walk_of_the_groups():
    """use_psum_layout=True (tn): group g spans K rows [align(end[g-1]), end[g]) and owns ceil(K_g / 128) scale rows
    after the previous groups'; here group 0 has 300 rows (3 scale rows), group 1 is empty, group 2 has 5."""
    ends, sum_k, m, n = [300, 300, 389], 512, 16, 32
    a, b, layout = _k_psum_inputs(ends, sum_k, m, n)
    assert a[1].size(0) == 4
    c = torch.randn(3, m, n)
    d = torch.full((3, m, n), float("nan"))
    deep_gemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d, None, layout, c=c, use_psum_layout=True)
    spans, scale_first = [(0, 300), None, (384, 389)], [0, None, 3]
    for g in range(3):
        want = c[g].double()
        if spans[g] is not None:
            lo, hi = spans[g]
            rows = torch.arange(hi - lo) // 128 + scale_first[g]
            av = a[0][lo:hi].double() * a[1][rows].double()
            bv = b[0][lo:hi].double() * b[1][rows].double()
            want = want + av.T @ bv
        assert calc_diff(d[g], want) < TOLERANCES["reference_fp32_out"], g
    # ks (the aligned sizes summing to A's rows) may be given, as DeepGEMM's callers do
    d2 = torch.full((3, m, n), float("nan"))
    deep_gemm.k_grouped_fp8_gemm_tn_contiguous(a, b, d2, [384, 0, 128], layout, c=c, use_psum_layout=True)
    assert torch.equal(d2, d)


def test_k_grouped_psum_bad_inputs_raise_before_writing():
    a, b, layout = _k_psum_inputs([300, 389], 400)
    d = torch.zeros(2, 16, 32)
    fn = deep_gemm.k_grouped_fp8_gemm_tn_contiguous
    with pytest.raises(DeepGEMMError, match=r"use_padded_sf_layout: expected False with use_psum_layout=True"):
        fn(a, b, d, None, layout, use_psum_layout=True, use_padded_sf_layout=True)
    with pytest.raises(DeepGEMMError, match=r"ks_cpu: expected sizes summing to sum_K = 400"):
        fn(a, b, d, [384, 128], layout, use_psum_layout=True)
    with pytest.raises(DeepGEMMError, match=r"grouped_layout: expected K ends at most sum_K = 400, got "
                                            r"grouped_layout\[1\] = 401"):
        fn(a, b, d, None, torch.tensor([300, 401], dtype=torch.int32), use_psum_layout=True)
    with pytest.raises(DeepGEMMError, match=r"grouped_layout: expected each K end to repeat the previous one"):
        fn(a, b, d, None, torch.tensor([300, 350], dtype=torch.int32), use_psum_layout=True)
    few_a, few_b, _ = _k_psum_inputs([300, 389], 400, scale_rows=3)
    with pytest.raises(DeepGEMMError, match=r"sfa: expected the 4 scale rows along K that the psum ends"):
        fn(few_a, few_b, d, None, layout, use_psum_layout=True)
    assert (d == 0).all()


def test_opcheck_k_grouped_psum():
    a, b, layout = _k_psum_inputs([300, 300, 389], 400)
    d = torch.zeros(3, 16, 32)
    _opcheck(ops.k_grouped_fp8_gemm_tn_contiguous.default,
             (a[0], a[1], b[0], b[1], d, None, layout, None, [1, 1, 128], "mn", True, False))


def test_fake_tensor_mode_runs_the_same_check():
    from torch._subclasses.fake_tensor import FakeTensorMode
    a, b, d = _dense_args()
    with FakeTensorMode() as mode:
        fa = (mode.from_tensor(a[0]), mode.from_tensor(a[1]))
        fb = (mode.from_tensor(b[0]), mode.from_tensor(b[1]))
        fd = mode.from_tensor(d)
        deep_gemm.fp8_gemm_nt(fa, fb, fd)
        with pytest.raises(DeepGEMMError, match=r"d: expected shape \(32, 128\)"):
            deep_gemm.fp8_gemm_nt(fa, fb, fd[:, :64])


def test_k_tail_scale_count():
    # K = 208: two K blocks, the second partial; the scale tensors carry ceil(208 / 128) = 2 columns.
    a, b, d, _, _, expected = make_dense(DenseCase(5, 128, 208))
    assert a[1].shape == (5, ceil_div(208, 128))
    deep_gemm.fp8_gemm_nt(a, b, d)
    assert calc_diff(d, expected) < TOLERANCES["reference_bf16_out"]
