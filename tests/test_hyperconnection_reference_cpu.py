"""tf32_hc_prenorm_gemm: reference vs an explicit float64 per-block oracle, opcheck, fake mode, bad inputs."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import assert_bitwise_equal, calc_diff

OP = torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default
BLOCK_K = 64

# calc_diff bounds, each with its reason. The reference sums exactly (FP64) and rounds each output once to FP32,
# so it differs from the float64 oracle by at most half an FP32 ulp per element: calc_diff ~ (2^-24)^2 ~ 4e-15.
# (A GPU kernel using TF32 tensor cores would need ~1e-6: B is rounded to 10 mantissa bits there.)
TOLERANCES = {
    "d_vs_fp64": 1e-12,  # FP32 rounding of each output only
    "sqr_sum_vs_fp64": 1e-12,  # BF16 squares are exact; FP32 rounding of each sum only
}


def _split_sizes(num_k_blocks: int, num_splits: int) -> list[int]:
    """Blocks per split, dealt out like cards: block j goes to the split that still has room, in order."""
    sizes = [0] * num_splits
    for j in range(num_k_blocks):
        sizes[j % num_splits] += 1  # the first nkb % S splits end up with one more
    return sizes


def _oracle(a: torch.Tensor, b: torch.Tensor, num_splits):
    """float64 partial products / sums of squares, one 64-wide K block at a time."""
    m, k = a.shape
    n = b.shape[0]
    a64, b64 = a.double(), b.double()
    splits = 1 if num_splits is None else num_splits
    d = torch.zeros(splits, m, n, dtype=torch.float64)
    sq = torch.zeros(splits, m, dtype=torch.float64)
    block = 0
    for s, count in enumerate(_split_sizes(k // BLOCK_K, splits)):
        for _ in range(count):
            cols = slice(block * BLOCK_K, (block + 1) * BLOCK_K)
            d[s] += torch.einsum("mk,nk->mn", a64[:, cols], b64[:, cols])
            sq[s] += (a64[:, cols] ** 2).sum(dim=1)
            block += 1
    assert block == k // BLOCK_K
    return (d[0], sq[0]) if num_splits is None else (d, sq)


def _inputs(m, n, k, num_splits, d_fill=float("nan")):
    a = torch.randn(m, k).bfloat16()
    b = torch.randn(n, k)
    lead = () if num_splits is None else (num_splits,)
    d = torch.full((*lead, m, n), d_fill)
    sq = torch.full((*lead, m), d_fill)
    return a, b, d, sq


CASES = list(itertools.product((0, 13, 37), (8, 24, 32), (64, 448), (None, 1, 3, 16)))


@pytest.mark.parametrize("m,n,k,num_splits", CASES, ids=[f"m{m}-n{n}-k{k}-s{s}" for m, n, k, s in CASES])
@pytest.mark.parametrize("via", ("api", "op"))
def test_matches_fp64_oracle(m, n, k, num_splits, via):
    a, b, d, sq = _inputs(m, n, k, num_splits)
    if via == "api":
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, sq, num_splits=num_splits)
    else:
        OP(a, b, d, sq, num_splits)
    want_d, want_sq = _oracle(a, b, num_splits)
    assert calc_diff(d, want_d) < TOLERANCES["d_vs_fp64"]
    assert calc_diff(sq, want_sq) < TOLERANCES["sqr_sum_vs_fp64"]
    assert not d.isnan().any() and not sq.isnan().any(), "every output element must be written"
    if num_splits is not None:
        owned = _split_sizes(k // BLOCK_K, num_splits)
        for s, count in enumerate(owned):
            if count == 0:  # splits owning no K block write exact zeros
                assert_bitwise_equal(d[s], torch.zeros_like(d[s]), f"d[{s}]")
                assert_bitwise_equal(sq[s], torch.zeros_like(sq[s]), f"sqr_sum[{s}]")


def test_split_reduction_equals_unsplit():
    a, b, d, sq = _inputs(21, 16, 640, None)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, sq)
    _, _, ds, sqs = _inputs(21, 16, 640, 4)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, ds, sqs, num_splits=4)
    assert calc_diff(ds.sum(0), d) < TOLERANCES["d_vs_fp64"]
    assert calc_diff(sqs.sum(0), sq) < TOLERANCES["sqr_sum_vs_fp64"]


def test_padded_rows_and_sliced_operands():
    """Row strides larger than the row (TMA-aligned) are legal for a, b and d."""
    a_big = torch.randn(9, 256).bfloat16()
    b_big = torch.randn(8, 192)
    a, b = a_big[:, :128], b_big[:, :128]
    d_big = torch.full((9, 16), float("nan"))
    d = d_big[:, :8]
    sq = torch.empty(9)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, sq)
    want_d, want_sq = _oracle(a, b, None)
    assert calc_diff(d, want_d) < TOLERANCES["d_vs_fp64"]
    assert calc_diff(sq, want_sq) < TOLERANCES["sqr_sum_vs_fp64"]
    assert d_big[:, 8:].isnan().all(), "columns outside d must stay untouched"


def test_m_zero_writes_nothing():
    a, b, d, sq = _inputs(0, 8, 64, 2)
    OP(a, b, d, sq, 2)  # no error, nothing to write
    assert d.shape == (2, 0, 8) and sq.shape == (2, 0)


@pytest.mark.parametrize("num_splits", (None, 1, 5))
def test_opcheck(num_splits):
    a, b, d, sq = _inputs(13, 24, 192, num_splits, d_fill=0.0)
    torch.library.opcheck(OP, (a, b, d, sq, num_splits))


def test_fake_tensor_mode_runs_the_check():
    with FakeTensorMode() as mode:
        a, b, d, sq = (mode.from_tensor(t) for t in _inputs(13, 24, 128, 2))
        OP(a, b, d, sq, 2)  # in-place op: nothing returned, shapes validated
        assert d.shape == (2, 13, 24)
        with pytest.raises(DeepGEMMError, match=r"num_splits: expected an integer in \[1, 2147483647\], got 0"):
            OP(a, b, d, sq, 0)


def _bad(m=13, n=24, k=128, num_splits=None):
    return list(_inputs(m, n, k, num_splits, d_fill=7.0))


def _case(name, args, num_splits, pattern):
    return pytest.param(args, num_splits, pattern, id=name)


def _with(index, value, m=13, n=24, k=128, num_splits=None):
    args = _bad(m, n, k, num_splits)
    args[index] = value
    return args


BAD = [
    _case("splits-0", _bad(num_splits=1), 0, r"num_splits: expected an integer in \[1, 2147483647\], got 0"),
    _case("splits-neg", _bad(num_splits=1), -1, r"num_splits: expected an integer in \[1, 2147483647\], got -1"),
    _case("splits-2^31", _bad(num_splits=1), 2**31,
          r"num_splits: expected an integer in \[1, 2147483647\], got 2147483648"),
    _case("a-fp32", _with(0, torch.randn(13, 128)), None, r"a: expected dtype bfloat16, got float32"),
    _case("b-bf16", _with(1, torch.randn(24, 128).bfloat16()), None, r"b: expected dtype float32, got bfloat16"),
    _case("d-bf16", _with(2, torch.zeros(13, 24).bfloat16()), None, r"d: expected dtype float32, got bfloat16"),
    _case("sqr-fp16", _with(3, torch.zeros(13).half()), None, r"sqr_sum: expected dtype float32, got float16"),
    _case("a-3d", _with(0, torch.randn(1, 13, 128).bfloat16()), None, r"a: expected a 2-D tensor"),
    _case("k-mismatch", _with(1, torch.randn(24, 192)), None, r"b: expected K = 128 \(the K of a\)"),
    _case("n-too-big", _bad(n=136), None, r"b: expected N <= 128 and a multiple of 8 .* got N = 136"),
    _case("n-unaligned", _bad(n=12), None, r"b: expected N <= 128 and a multiple of 8 .* got N = 12"),
    _case("k-not-64", _bad(k=96), None, r"a: expected K > 0 and a multiple of 64 .* got K = 96"),
    _case("a-mn-major", _with(0, torch.randn(128, 13).bfloat16().T), None, r"a: expected a K-major tensor"),
    _case("b-mn-major", _with(1, torch.randn(128, 24).T), None, r"b: expected a K-major tensor"),
    _case("d-shape", _with(2, torch.zeros(13, 16)), None, r"d: expected shape \(13, 24\) .* got \(13, 16\)"),
    _case("d-missing-splits", _bad(), 2, r"d: expected shape \(2, 13, 24\) \(\[num_splits, M, N\]\), got \(13, 24\)"),
    _case("sqr-shape", _with(3, torch.zeros(13, 1)), None, r"sqr_sum: expected shape \(13,\)"),
    _case("d-col-major", _with(2, torch.zeros(24, 13).T), None, r"d: expected a row-major output"),
    _case("d-split-gaps", _with(2, torch.zeros(2, 14, 24)[:, :13], num_splits=2), 2,
          r"d: expected batch-dense splits"),
    _case("sqr-non-contiguous", _with(3, torch.zeros(26)[::2]), None, r"sqr_sum: expected a contiguous tensor"),
    _case("a-row-stride", _with(0, torch.randn(13, 132).bfloat16()[:, :128]), None,
          r"a: expected strides that are multiples of 16 bytes"),
    _case("device", _with(3, torch.zeros(13, device="meta")), None,
          r"sqr_sum: expected device cpu \(the device of a\), got meta"),
]


@pytest.mark.parametrize("args,num_splits,pattern", BAD)
@pytest.mark.parametrize("via", ("api", "op"))
def test_bad_inputs_raise_before_writing(args, num_splits, pattern, via):
    before = [t.clone() for t in args[2:] if t.device.type != "meta"]
    with pytest.raises(DeepGEMMError, match=pattern):
        if via == "api":
            deep_gemm.tf32_hc_prenorm_gemm(*args, num_splits=num_splits)
        else:
            OP(*args, num_splits)
    after = [t for t in args[2:] if t.device.type != "meta"]
    for old, new in zip(before, after):
        assert_bitwise_equal(new, old, "outputs must be untouched after a rejected call")
