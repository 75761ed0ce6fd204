"""BF16 GEMMs (dense, M-grouped contiguous/masked, K-grouped) and the vendor-BLAS (cuBLASLt-style) GEMMs.

Every op is checked (1) against an independent float64 computation written with explicit loops / broadcasting,
through the public API and through ``torch.ops.deep_gemm`` (which must agree bitwise), (2) with
``torch.library.opcheck``, (3) with bad inputs that must raise ``DeepGEMMError`` before the output is touched, and
(4) under FakeTensorMode (the check runs on fake tensors; these ops return nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from deep_gemm.core import runtime
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.gemm.bf16 import api
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from deep_gemm.utils import align

from bf16_inputs import output_and_accumulator, randn  # noqa: E402

ops = torch.ops.deep_gemm
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn

# calc_diff bounds against float64 truth, by output dtype. Inputs are exact in FP32 (or FP32 itself), so the error is
# the FP32 summation order plus one final rounding to the output dtype.
TOLERANCE = {
    torch.float32: 1e-10,  # FP32 sums of <= 256 terms: relative error ~1e-7, calc_diff ~1e-14
    torch.bfloat16: 1e-5,  # one rounding to 8 mantissa bits: calc_diff ~1e-6 (DeepGEMM's own BF16 bound)
    torch.float16: 1e-6,  # one rounding to 11 mantissa bits: calc_diff ~1e-8
}
# Value written into outputs before a call, to see which rows/elements an op leaves untouched.
SENTINEL = 7.0
# bf16 elements per 16 bytes: leading strides are padded to this so any storage order is TMA-aligned.
TMA_ELEMS_BF16 = 8


def assert_close(out: torch.Tensor, truth: torch.Tensor, label: str = "") -> None:
    diff = calc_diff(out, truth)
    assert diff < TOLERANCE[out.dtype], f"{label}: calc_diff {diff:.3e} >= {TOLERANCE[out.dtype]:.0e}"


def stored(values: torch.Tensor, order: str) -> torch.Tensor:
    """The 2-D ``values`` held in row-major ('row') or column-major ('col') storage with a 16-byte aligned,
    padded leading stride (so the row stride exceeds the row length)."""
    if order == "col":
        return stored(values.T, "row").T
    rows, cols = values.shape
    buffer = torch.zeros(rows, align(cols + 1, TMA_ELEMS_BF16), dtype=values.dtype)
    buffer[:, :cols] = values
    return buffer[:, :cols]


def nt_truth(a64: torch.Tensor, b64: torch.Tensor) -> torch.Tensor:
    """sum_k A[m, k] * B[n, k] by broadcasting in float64 (no matmul involved)."""
    return (a64[:, None, :] * b64[None, :, :]).sum(-1)


def assert_rejected(op, kwargs: dict, pattern: str, out_name: str = "d") -> None:
    """op(**kwargs) raises DeepGEMMError matching pattern, and the output is unchanged."""
    out = kwargs[out_name]
    before = out.clone()
    with pytest.raises(DeepGEMMError, match=pattern):
        op(**kwargs)
    if out.device.type != "meta":
        assert_bitwise_equal(out, before, "output after a rejected call")


# ---------------------------------------------------------------------------------------------------------------
# dense: bf16_gemm_{nt,nn,tn,tt} and cublaslt_gemm_{nt,nn,tn,tt}

@dataclass(frozen=True)
class DenseCase:
    name: str
    m: int
    n: int
    k: int

    def __str__(self) -> str:
        return f"{self.name}-{self.m}x{self.n}x{self.k}"


DENSE_CASES = [
    DenseCase("odd", 37, 200, 208),  # odd M, N and K not multiples of 128
    DenseCase("aligned", 128, 96, 64),
    DenseCase("zero_m", 0, 64, 64),
    DenseCase("zero_k", 16, 24, 0),  # d = c (or zeros)
]
LAYOUTS = ("nt", "nn", "tn", "tt")


def dense_operands(layout: str, m: int, n: int, k: int, dtype, a_order: str, b_order: str):
    """(a, b) as a caller of ``<layout>`` passes them, and the float64 A [M, K], B [N, K] they stand for."""
    a_mk, b_nk = randn(m, k, dtype=dtype), randn(n, k, dtype=dtype)
    a_given = a_mk.T if layout[0] == "t" else a_mk
    b_given = b_nk.T if layout[1] == "n" else b_nk
    return stored(a_given, a_order), stored(b_given, b_order), a_mk.double(), b_nk.double()


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("out_dtype", [BF16, torch.float32], ids=["bf16_out", "fp32_out"])
@pytest.mark.parametrize("case", DENSE_CASES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_bf16_gemm_matches_float64(layout, case, out_dtype, accumulate):
    for a_order, b_order in (("row", "row"), ("col", "row"), ("row", "col")):
        a, b, a64, b64 = dense_operands(layout, case.m, case.n, case.k, BF16, a_order, b_order)
        d, c, c_value = output_and_accumulator((case.m, case.n), out_dtype, accumulate)
        d_op = d.clone()
        c_op = d_op if accumulate == "d" else c
        getattr(api, f"bf16_gemm_{layout}")(a, b, d, c=c)
        getattr(ops, f"bf16_gemm_{layout}")(a, b, d_op, c_op)
        assert_close(d, c_value + nt_truth(a64, b64), f"{layout} {a_order}/{b_order}")
        assert_bitwise_equal(d, d_op, "public API vs torch.ops")


CUBLASLT_DTYPES = [  # (A/B dtype, D dtype)
    (BF16, BF16), (BF16, torch.float32), (torch.float16, torch.float16), (torch.float32, torch.float32),
    (FP8, BF16), (FP8, torch.float32),
]


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("dtypes", CUBLASLT_DTYPES, ids=lambda t: f"{t[0]}->{t[1]}".replace("torch.", ""))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cublaslt_gemm_matches_float64(layout, dtypes, accumulate):
    ab_dtype, out_dtype = dtypes
    for case in (DENSE_CASES[0], DENSE_CASES[2], DENSE_CASES[3]):
        a, b, a64, b64 = dense_operands(layout, case.m, case.n, case.k, ab_dtype, "row", "col")
        d, c, c_value = output_and_accumulator((case.m, case.n), out_dtype, accumulate)
        d_op = d.clone()
        getattr(api, f"cublaslt_gemm_{layout}")(a, b, d, c)
        getattr(ops, f"cublaslt_gemm_{layout}")(a, b, d_op, d_op if accumulate == "d" else c)
        assert_close(d, c_value + nt_truth(a64, b64), f"{layout} {case}")
        assert_bitwise_equal(d, d_op, "public API vs torch.ops")


def test_cublaslt_gemm_takes_unaligned_strides():
    # BLAS needs a unit stride, not 16-byte alignment: a [5, 7] row-major slice with row stride 9 is fine.
    a = randn(5, 9)[:, :7]
    b = randn(3, 7)
    d = torch.empty(5, 3, dtype=torch.float32)
    api.cublaslt_gemm_nt(a, b, d)
    assert_close(d, nt_truth(a.double(), b.double()))


# ---------------------------------------------------------------------------------------------------------------
# M-grouped contiguous

def expert_ids(segments, alignment: int) -> list[int]:
    """Per-row expert ids: each (expert, rows) segment padded with -1 rows up to the alignment."""
    ids: list[int] = []
    for expert, rows in segments:
        ids += [expert] * rows + [-1] * (align(rows, alignment) - rows)
    return ids


def psum_row_groups(ends, m: int, alignment: int) -> list[int]:
    """Group of each row for the psum layout, walked group by group on the host."""
    groups, previous_end = [-1] * m, 0
    for g, end in enumerate(ends):
        for row in range(align(previous_end, alignment), end):
            groups[row] = g
        previous_end = end
    return groups


def check_grouped_rows(d, before, truth_rows, groups, gap_rows_zero: bool, label: str) -> None:
    """Rows of a group match truth; other rows are zeros or (gap_rows_zero False) their old contents."""
    valid = torch.tensor([g >= 0 for g in groups], dtype=torch.bool)
    if valid.any():
        assert_close(d[valid], truth_rows[valid], label)
    if gap_rows_zero:
        assert torch.equal(d[~valid], torch.zeros_like(d[~valid])), f"{label}: rows of no group must be zeros"
    else:
        assert_bitwise_equal(d[~valid], before[~valid], f"{label}: rows of no group must be untouched")


@dataclass(frozen=True)
class ContiguousCase:
    name: str
    groups: list[int] | None  # per-row ids (non-psum)
    psum_ends: list[int] | None
    m: int
    num_groups: int
    alignment: int = runtime.DEFAULT_MK_ALIGNMENT

    def __str__(self) -> str:
        return self.name


CONTIGUOUS_CASES = [
    ContiguousCase("ids_with_padding", expert_ids([(0, 100), (2, 73)], 128), None, 256, 3),
    ContiguousCase("ids_empty_m", [], None, 0, 2),
    ContiguousCase("psum_with_gaps", None, [100, 100, 290], 300, 3),  # group 1 empty, rows 100-127 and 290+ gaps
    ContiguousCase("psum_odd_m_align16", None, [5, 21, 37], 37, 3, alignment=16),
]


@pytest.fixture
def mk_alignment():
    """Set the contiguous-layout alignment for one test and restore it afterwards."""
    saved = runtime.get_mk_alignment_for_contiguous_layout()
    yield runtime.set_mk_alignment_for_contiguous_layout
    runtime.set_mk_alignment_for_contiguous_layout(saved)


@pytest.mark.parametrize("ensure_zero_padding", [True, False])
@pytest.mark.parametrize("case", CONTIGUOUS_CASES, ids=str)
@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_m_grouped_bf16_contiguous_matches_float64(layout, case, ensure_zero_padding, mk_alignment):
    mk_alignment(case.alignment)
    n, k = 200, 208
    use_psum = case.psum_ends is not None
    groups = psum_row_groups(case.psum_ends, case.m, case.alignment) if use_psum else case.groups
    layout_tensor = torch.tensor(case.psum_ends if use_psum else case.groups, dtype=torch.int32)
    a = stored(randn(case.m, k), "row")
    b_nk = randn(case.num_groups, n, k)
    b = b_nk if layout == "nt" else b_nk.transpose(1, 2).contiguous()
    a64, b64 = a.double(), b_nk.double()
    truth = torch.zeros(case.m, n, dtype=torch.float64)
    for row, g in enumerate(groups):  # one row at a time, written differently from the reference's masks
        if g >= 0:
            truth[row] = (a64[row][None, :] * b64[g]).sum(-1)
    d = torch.full((case.m, n), SENTINEL, dtype=BF16)
    before, d_op = d.clone(), d.clone()
    fn = getattr(api, f"m_grouped_bf16_gemm_{layout}_contiguous")
    fn(a, b, d, layout_tensor, use_psum_layout=use_psum, ensure_zero_padding=ensure_zero_padding)
    getattr(ops, f"m_grouped_bf16_gemm_{layout}_contiguous")(a, b, d_op, layout_tensor, "nk", use_psum,
                                                             ensure_zero_padding)
    gap_rows_zero = ensure_zero_padding or not use_psum  # -1 rows of the id layout are always zeroed
    check_grouped_rows(d, before, truth, groups, gap_rows_zero, f"{layout} {case}")
    assert_bitwise_equal(d, d_op, "public API vs torch.ops")


def test_m_grouped_bf16_contiguous_mn_major_operands():
    # K-major and MN-major A and B give the same values (DeepGEMM's SM90 kernel needs A K-major; this does not).
    ids = torch.tensor(expert_ids([(1, 60), (0, 128)], 128), dtype=torch.int32)
    a_values, b_values = randn(256, 72), randn(2, 40, 72)
    outputs = []
    for a in (a_values, stored(a_values, "col")):
        for b in (b_values, b_values.transpose(1, 2).contiguous().transpose(1, 2)):
            d = torch.empty(256, 40, dtype=BF16)
            api.m_grouped_bf16_gemm_nt_contiguous(a, b, d, ids)
            outputs.append(d)
    for d in outputs[1:]:
        assert_bitwise_equal(d, outputs[0], "majorness must not change results")


# ---------------------------------------------------------------------------------------------------------------
# M-grouped masked

@pytest.mark.parametrize("num_groups,m_max,masked", [(3, 37, [0, 37, 12]), (2, 0, [0, 0]), (1, 64, [64])],
                         ids=["odd_mmax", "zero_mmax", "full"])
def test_m_grouped_bf16_masked_matches_float64(num_groups, m_max, masked):
    n, k = 200, 208
    a, b = randn(num_groups, m_max, k), randn(num_groups, n, k)
    masked_m = torch.tensor(masked, dtype=torch.int32)
    d = torch.full((num_groups, m_max, n), SENTINEL, dtype=BF16)
    before, d_op = d.clone(), d.clone()
    api.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m=max(1, m_max))
    ops.m_grouped_bf16_gemm_nt_masked(a, b, d_op, masked_m, max(1, m_max))
    assert_bitwise_equal(d, d_op, "public API vs torch.ops")
    assert api.bf16_m_grouped_gemm_nt_masked is api.m_grouped_bf16_gemm_nt_masked
    for g in range(num_groups):
        rows = masked[g]
        if rows:
            assert_close(d[g, :rows], nt_truth(a[g, :rows].double(), b[g].double()), f"group {g}")
        assert_bitwise_equal(d[g, rows:], before[g, rows:], f"group {g}: rows >= masked_m must be untouched")


# ---------------------------------------------------------------------------------------------------------------
# K-grouped (tn)

@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("ks", [[48, 0, 80, 24], [208], [0]], ids=["mixed_with_empty", "single", "all_empty"])
def test_k_grouped_bf16_tn_matches_float64(ks, accumulate):
    m, n = 37, 200
    a = stored(randn(sum(ks), m), "row")  # [sum K, M], MN-major with a padded row stride
    b = stored(randn(sum(ks), n), "row")
    grouped_layout = torch.tensor(ks, dtype=torch.int32)
    d, c, c_value = output_and_accumulator((len(ks), m, n), torch.float32, accumulate)
    d_op = d.clone()
    api.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, grouped_layout, c=c)
    ops.k_grouped_bf16_gemm_tn_contiguous(a, b, d_op, ks, grouped_layout, d_op if accumulate == "d" else c)
    truth = torch.zeros(len(ks), m, n, dtype=torch.float64)
    start = 0
    for g, k_size in enumerate(ks):
        for kk in range(start, start + k_size):  # rank-1 updates, one K row at a time
            truth[g] += a[kk].double()[:, None] * b[kk].double()[None, :]
        start += k_size
    assert_close(d, c_value + truth)
    assert_bitwise_equal(d, d_op, "public API vs torch.ops")


@dataclass(frozen=True)
class KPsumCase:
    name: str
    ends: list[int]
    sum_k: int
    alignment: int = 128
    ks_cpu: list[int] | None = None

    def __str__(self):
        return self.name


K_PSUM_CASES = [
    KPsumCase("gaps_and_empty", [100, 100, 290], 300),        # K rows 100-127 and 290-299 belong to no group
    KPsumCase("aligned_sizes", [128, 384, 384], 384, ks_cpu=[128, 256, 0]),  # ks_cpu given: DeepGEMM's aligned sizes
    KPsumCase("align16_odd", [5, 21, 37, 37], 40, alignment=16),
    KPsumCase("all_empty", [0, 0], 8),
    KPsumCase("no_k", [0], 0),
]


def k_psum_truth(a, b, ends, alignment, num_groups, m, n):
    """float64 truth of the K-grouped psum layout, group bounds walked on the host."""
    truth = torch.zeros(num_groups, m, n, dtype=torch.float64)
    previous = 0
    for g, end in enumerate(ends):
        start = align(previous, alignment)
        for kk in range(start, end):
            truth[g] += a[kk].double()[:, None] * b[kk].double()[None, :]
        previous = end
    return truth


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("case", K_PSUM_CASES, ids=str)
def test_k_grouped_bf16_tn_psum_layout_matches_float64(case, accumulate):
    """use_psum_layout=True: group g spans K rows [align(end[g-1]), end[g]); padding rows (filled with large values
    here) are read into no group; ks_cpu is optional (DeepGEMM's SM100 contract)."""
    runtime.set_mk_alignment_for_contiguous_layout(case.alignment)
    try:
        m, n = 19, 24
        a = stored(randn(case.sum_k, m), "row")
        b = stored(randn(case.sum_k, n), "row")
        inside = torch.zeros(case.sum_k, dtype=torch.bool)
        previous = 0
        for end in case.ends:
            inside[align(previous, case.alignment):end] = True
            previous = end
        a[~inside], b[~inside] = 1e4, -1e4  # padding: must not reach any group
        grouped_layout = torch.tensor(case.ends, dtype=torch.int32)
        d, c, c_value = output_and_accumulator((len(case.ends), m, n), torch.float32, accumulate)
        d_op = d.clone()
        api.k_grouped_bf16_gemm_tn_contiguous(a, b, d, case.ks_cpu, grouped_layout, c=c, use_psum_layout=True)
        ops.k_grouped_bf16_gemm_tn_contiguous(a, b, d_op, case.ks_cpu, grouped_layout,
                                              d_op if accumulate == "d" else c, "mn", True)
        truth = k_psum_truth(a, b, case.ends, case.alignment, len(case.ends), m, n)
        assert_close(d, c_value + truth)
        assert_bitwise_equal(d, d_op, "public API vs torch.ops")
    finally:
        runtime.set_mk_alignment_for_contiguous_layout(runtime.DEFAULT_MK_ALIGNMENT)


@pytest.mark.parametrize("ends,sum_k,message", [
    ([100, 50, 290], 300, r"grouped_layout\[1\] = 50 after grouped_layout\[0\] = 100"),
    ([100, 120, 290], 300, r"reach the previous one aligned up to 128 .*grouped_layout\[1\] = 120"),
    ([100, 100, 301], 300, r"K ends at most sum_K = 300, got grouped_layout\[2\] = 301"),
    ([-1, 100, 290], 300, r"grouped_layout\[0\] = -1"),
], ids=["decreasing", "inside_the_padding", "past_sum_k", "negative"])
def test_k_grouped_bf16_psum_bad_ends_raise_before_writing(ends, sum_k, message):
    """The CPU kernel checks the psum ends (the checked mode does on CUDA): an error naming the first bad end, d
    untouched."""
    a, b = randn(sum_k, 16), randn(sum_k, 24)
    d = randn(3, 16, 24, dtype=torch.float32)
    before = d.clone()
    with pytest.raises(DeepGEMMError, match=message):
        api.k_grouped_bf16_gemm_tn_contiguous(a, b, d, None, torch.tensor(ends, dtype=torch.int32),
                                              use_psum_layout=True)
    assert_bitwise_equal(d, before, "d must be untouched")


# ---------------------------------------------------------------------------------------------------------------
# opcheck (schema, fake tensors, AOT dispatch) for every op

def opcheck_cases():
    ids = torch.tensor(expert_ids([(0, 20), (1, 128)], 128), dtype=torch.int32)
    cases = []
    # opcheck's AOT tests re-create inputs contiguously: keep every dim a multiple of 8 so they stay TMA-aligned.
    m, n, k = 40, 24, 48
    for layout in LAYOUTS:
        a, b, _, _ = dense_operands(layout, m, n, k, BF16, "row", "row")
        a, b = a.contiguous(), b.contiguous()
        cases.append((f"bf16_gemm_{layout}", (a, b, randn(m, n, dtype=torch.float32),
                                                randn(m, n, dtype=torch.float32)), None))
        a8, b8, _, _ = dense_operands(layout, m, n, k, FP8, "row", "row")
        cases.append((f"cublaslt_gemm_{layout}", (a, b, randn(m, n), None), None))
        cases.append((f"cublaslt_gemm_{layout}", (a8, b8, randn(m, n, dtype=torch.float32), None), "fp8"))
    cases.append(("m_grouped_bf16_gemm_nt_contiguous", (randn(256, 40), randn(2, 24, 40), randn(256, 24), ids), None))
    cases.append(("m_grouped_bf16_gemm_nn_contiguous", (randn(256, 40), randn(2, 40, 24), randn(256, 24), ids), None))
    cases.append(("m_grouped_bf16_gemm_nt_masked", (randn(2, 37, 40), randn(2, 24, 40), randn(2, 37, 24),
                                                    torch.tensor([3, 37], dtype=torch.int32), 16), None))
    ks = [40, 0, 32]
    d, c = randn(3, 16, 24, dtype=torch.float32), randn(3, 16, 24, dtype=torch.float32)
    cases.append(("k_grouped_bf16_gemm_tn_contiguous",
                  (randn(72, 16), randn(72, 24), d, ks, torch.tensor(ks, dtype=torch.int32), c), None))
    cases.append(("k_grouped_bf16_gemm_tn_contiguous",
                  (randn(200, 16), randn(200, 24), d, None, torch.tensor([40, 40, 200], dtype=torch.int32), c, "mn",
                   True), None))
    return cases


FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("name,args,kind", opcheck_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_opcheck(name, args, kind):
    kwargs = {"test_utils": FP8_OPCHECK_UTILS} if kind == "fp8" else {}  # CPU fp8 lacks allclose (test_schema)
    torch.library.opcheck(getattr(ops, name).default, args, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# bad inputs: DeepGEMMError naming the argument, output untouched

def dense_kwargs(m=37, n=24, k=40, dtype=BF16, out_dtype=BF16):
    return dict(a=randn(m, k, dtype=dtype), b=randn(n, k, dtype=dtype), d=randn(m, n, dtype=out_dtype), c=None)


def contiguous_kwargs():
    ids = torch.tensor(expert_ids([(0, 20), (1, 128)], 128), dtype=torch.int32)
    return dict(a=randn(256, 40), b=randn(2, 24, 40), d=randn(256, 24), grouped_layout=ids)


def masked_kwargs():
    return dict(a=randn(2, 37, 40), b=randn(2, 24, 40), d=randn(2, 37, 24),
                masked_m=torch.tensor([3, 37], dtype=torch.int32), expected_m=16)


def k_grouped_kwargs():
    return dict(a=randn(72, 16), b=randn(72, 24), d=randn(3, 16, 24, dtype=torch.float32), ks_cpu=[40, 0, 32],
                grouped_layout=torch.tensor([40, 0, 32], dtype=torch.int32))


def k_psum_kwargs():
    """K-grouped psum layout: groups [0, 100), [128, 128) (empty), [128, 290); K rows 100-127 and 290-299 are
    padding."""
    return dict(a=randn(300, 16), b=randn(300, 24), d=randn(3, 16, 24, dtype=torch.float32), ks_cpu=None,
                grouped_layout=torch.tensor([100, 100, 290], dtype=torch.int32), use_psum_layout=True)


def _with(**changes):
    """Mutation of a kwargs dict: each change is a value, or a function of the original kwargs giving one."""
    return lambda kw: {**kw, **{key: (v(kw) if callable(v) else v) for key, v in changes.items()}}


_same = _with()
MGC, MGM, KG = "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nt_masked", "k_grouped_bf16_gemm_tn_contiguous"

BAD_INPUTS = [
    # dense BF16
    ("bf16_gemm_nt", dense_kwargs, _with(a=lambda kw: kw["a"].float()), r"a: expected dtype bfloat16, got float32"),
    ("bf16_gemm_nt", dense_kwargs, _with(b=lambda kw: randn(24, 48)), r"b: expected K = 40 .*got K = 48"),
    ("bf16_gemm_nn", dense_kwargs, _same, r"b: expected K = 40 .*\[K, N\]"),
    ("bf16_gemm_nt", dense_kwargs, _with(d=lambda kw: randn(37, 25)),
     r"d: expected shape \(37, 24\), got \(37, 25\)"),
    ("bf16_gemm_nt", dense_kwargs, _with(d=lambda kw: randn(37, 24, dtype=torch.float16)),
     r"d: expected dtype bfloat16 or float32, got float16"),
    ("bf16_gemm_nt", dense_kwargs, _with(d=lambda kw: randn(24, 37).T), r"d: expected a row-major output"),
    ("bf16_gemm_nt", dense_kwargs, _with(a=lambda kw: randn(37, 80)[:, ::2]), r"a: expected a K-major or MN-major"),
    ("bf16_gemm_nt", dense_kwargs, _with(a=lambda kw: randn(37, 41)[:, :40]),
     r"a: expected strides that are multiples of 16 bytes"),
    ("bf16_gemm_nt", dense_kwargs, _with(a=lambda kw: randn(37, 48)[:, 1:41]), r"a: expected a 16-byte aligned start"),
    ("bf16_gemm_nt", dense_kwargs, _with(a=lambda kw: randn(2, 37, 40)), r"a: expected a 2-D tensor"),
    ("bf16_gemm_nt", dense_kwargs, _with(c=lambda kw: randn(37, 24, dtype=torch.float32)),
     r"c: expected the dtype of d"),
    ("bf16_gemm_nt", dense_kwargs, _with(c=lambda kw: randn(36, 24)), r"c: expected the shape of d"),
    ("bf16_gemm_nt", dense_kwargs, _with(compiled_dims="mx"), r"compiled_dims: expected a subset of 'mnk'"),
    ("bf16_gemm_nt", dense_kwargs, _with(a=lambda kw: kw["a"].to("meta")), r"b: expected device meta"),
    # vendor BLAS
    ("cublaslt_gemm_nt", dense_kwargs, _with(b=lambda kw: kw["b"].half()), r"b: expected the dtype of a"),
    ("cublaslt_gemm_nt", dense_kwargs, _with(a=lambda kw: kw["a"].double(), b=lambda kw: kw["b"].double()),
     r"a: expected dtype bfloat16 or float16 or float32 or float8_e4m3fn, got float64"),
    ("cublaslt_gemm_nt", dense_kwargs, _with(d=lambda kw: kw["d"].to(FP8)), r"d: expected dtype bfloat16 or "),
    ("cublaslt_gemm_tt", dense_kwargs, _same, r"b: expected K = 37"),
    ("cublaslt_gemm_nt", dense_kwargs, _with(a=lambda kw: randn(37, 80)[:, ::2]), r"a: expected a K-major"),
    ("cublaslt_gemm_nt", dense_kwargs, _with(d=lambda kw: kw["d"].to("meta")), r"d: expected device cpu"),
    # M-grouped contiguous
    (MGC, contiguous_kwargs, _with(d=lambda kw: kw["d"].float()), r"d: expected dtype bfloat16, got float32"),
    (MGC, contiguous_kwargs, _with(grouped_layout=lambda kw: kw["grouped_layout"][:100]),
     r"grouped_layout: expected one expert id per row of a \(256\), got 100"),
    (MGC, contiguous_kwargs, _with(grouped_layout=lambda kw: kw["grouped_layout"].long()),
     r"grouped_layout: expected dtype int32, got int64"),
    (MGC, contiguous_kwargs,
     _with(a=lambda kw: randn(200, 40), d=lambda kw: randn(200, 24),
           grouped_layout=lambda kw: kw["grouped_layout"][:200]),
     r"a: expected M to be a multiple of the contiguous-layout alignment 128"),
    (MGC, contiguous_kwargs, _with(use_psum_layout=True), r"grouped_layout: expected 2 cumulative group ends"),
    (MGC, contiguous_kwargs, _with(expected_m_for_psum_layout=64),
     r"expected_m_for_psum_layout: only meaningful with use_psum_layout=True"),
    (MGC, contiguous_kwargs, _with(b=lambda kw: randn(0, 24, 40)), r"b: expected at least one group"),
    ("m_grouped_bf16_gemm_nn_contiguous", contiguous_kwargs, _same, r"b: expected K = 40 .*\[G, K, N\]"),
    (MGC, contiguous_kwargs, _with(grouped_layout=lambda kw: kw["grouped_layout"].to("meta")),
     r"grouped_layout: expected device cpu"),
    # M-grouped masked
    (MGM, masked_kwargs, _with(expected_m=0), r"expected_m: expected a positive integer"),
    (MGM, masked_kwargs, _with(masked_m=lambda kw: torch.tensor([3], dtype=torch.int32)),
     r"masked_m: expected 2 entries, got 1"),
    (MGM, masked_kwargs, _with(b=lambda kw: randn(3, 24, 40)), r"b: expected shape \(2, N, 40\)"),
    (MGM, masked_kwargs, _with(d=lambda kw: randn(2, 36, 24)), r"d: expected shape \(2, 37, 24\)"),
    (MGM, masked_kwargs, _with(masked_m=lambda kw: kw["masked_m"].float()), r"masked_m: expected dtype int32"),
    # K-grouped
    (KG, k_grouped_kwargs, _with(use_psum_layout=True),
     r"ks_cpu: expected non-negative multiples of the group alignment 128 with use_psum_layout=True, got 40 for "
     r"group 0"),
    (KG, k_psum_kwargs, _with(ks_cpu=[128, 0]), r"ks_cpu: expected 3 per-group K sizes \(G of d\) or none"),
    (KG, k_psum_kwargs, _with(ks_cpu=[128, 128, 128]), r"ks_cpu: expected sizes summing to sum_K = 300 \(rows of a\)"),
    (KG, k_psum_kwargs, _with(a=lambda kw: randn(290, 16)), r"b: expected shape \(290, 24\) \(\[sum_K, N\]\)"),
    (KG, k_psum_kwargs, _with(grouped_layout=lambda kw: kw["grouped_layout"][:2]),
     r"grouped_layout: expected the 3 group K sizes"),
    (KG, k_grouped_kwargs, _with(ks_cpu=None), r"ks_cpu: expected the non-empty list"),
    (KG, k_grouped_kwargs, _with(ks_cpu=[]), r"ks_cpu: expected the non-empty list"),
    (KG, k_grouped_kwargs, _with(ks_cpu=[80, -8, 0]), r"ks_cpu: expected non-negative K sizes, got -8 for group 1"),
    (KG, k_grouped_kwargs, _with(ks_cpu=[40, 0, 40]),
     r"a: expected shape \(80, 16\) \(\[sum\(ks_cpu\), M\]\), got \(72, 16\)"),
    (KG, k_grouped_kwargs, _with(a=lambda kw: randn(16, 72).T), r"a: expected an MN-major tensor"),
    (KG, k_grouped_kwargs, _with(d=lambda kw: randn(3, 16, 24)), r"d: expected dtype float32, got bfloat16"),
    (KG, k_grouped_kwargs, _with(d=lambda kw: torch.zeros(3, 24, 16).transpose(1, 2)),
     r"d: expected a row-major output"),
    (KG, k_grouped_kwargs, _with(grouped_layout=lambda kw: torch.tensor([40, 32], dtype=torch.int32)),
     r"grouped_layout: expected the 3 group K sizes"),
    (KG, k_grouped_kwargs, _with(c=lambda kw: randn(3, 16, 24)), r"c: expected the dtype of d"),
]


@pytest.mark.parametrize("name,make,mutate,pattern", BAD_INPUTS,
                         ids=[f"{i}-{case[0]}" for i, case in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise_before_writing(name, make, mutate, pattern):
    assert_rejected(getattr(ops, name).default, mutate(make()), pattern)


def test_public_nn_contiguous_rejects_psum_hint():
    with pytest.raises(DeepGEMMError, match="expected_m_for_psum_layout: not an argument"):
        api.m_grouped_bf16_gemm_nn_contiguous(**contiguous_kwargs(), expected_m_for_psum_layout=8)


# ---------------------------------------------------------------------------------------------------------------
# FakeTensorMode: the ops return nothing, but their checks must run on fake tensors

def test_checks_run_under_fake_tensor_mode():
    with FakeTensorMode():
        good = dense_kwargs()
        assert ops.bf16_gemm_nt.default(**good) is None
        assert ops.k_grouped_bf16_gemm_tn_contiguous.default(**k_grouped_kwargs()) is None
        assert ops.m_grouped_bf16_gemm_nt_masked.default(**masked_kwargs()) is None
        with pytest.raises(DeepGEMMError, match=r"d: expected shape \(37, 24\)"):
            ops.bf16_gemm_nt.default(**{**good, "d": torch.empty(37, 25, dtype=BF16)})
        with pytest.raises(DeepGEMMError, match=r"b: expected the dtype of a"):
            ops.cublaslt_gemm_nt.default(**{**good, "b": good["b"].half()})
