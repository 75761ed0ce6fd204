"""einsum (BF16) and fp8_einsum (block-scaled FP8) for DeepGEMM's fixed expressions.

Each expression is checked (1) against a float64 computation written as explicit loops over the batch letter with
broadcast sums (no einsum, no matmul), through the public API and through ``torch.ops.deep_gemm`` (which must agree
bitwise), (2) with ``torch.library.opcheck``, (3) with bad inputs that must raise ``DeepGEMMError`` before ``d`` is
touched, and (4) under FakeTensorMode (the ops return nothing; their checks must run on fake tensors).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import assert_bitwise_equal, calc_diff

from bf16_inputs import output_and_accumulator, randn  # noqa: E402

ops = torch.ops.deep_gemm
BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn

# calc_diff bounds against float64 truth, by output dtype. BF16 inputs are exact in FP32 and FP8 x FP32-scale
# products round once in FP32, so the error is the FP32 summation order plus one rounding to the output dtype.
TOLERANCE = {
    torch.float32: 1e-10,  # FP32 sums of <= ~600 terms: calc_diff ~1e-13
    torch.bfloat16: 1e-5,  # one rounding to 8 mantissa bits: calc_diff ~1e-6 (DeepGEMM's own BF16 bound)
}
# Extra row padding of W in the row-padded-slice cases (DeepGEMM's tests slice [H, D, R + 128] down to R).
W_ROW_PADDING = 128
FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


def assert_close(out: torch.Tensor, truth: torch.Tensor, label: str = "") -> None:
    diff = calc_diff(out, truth)
    assert diff < TOLERANCE[out.dtype], f"{label}: calc_diff {diff:.3e} >= {TOLERANCE[out.dtype]:.0e}"


# Float64 truth per expression: loops over the batch letter, products summed by broadcasting.
def _truth_bmk_bnk_mn(a, b):
    out = torch.zeros(a.size(1), b.size(1), dtype=torch.float64)
    for s in range(a.size(0)):
        out += (a[s][:, None, :] * b[s][None, :, :]).sum(-1)
    return out


def _truth_bhr_hdr_bhd(x, w):
    return torch.stack([(x[:, h, None, :] * w[h][None]).sum(-1) for h in range(x.size(1))], dim=1)


def _truth_bhd_hdr_bhr(x, w):
    return torch.stack([(x[:, h, :, None] * w[h][None]).sum(1) for h in range(x.size(1))], dim=1)


def _truth_bhd_bhr_hdr(x, y):
    return torch.stack([(x[:, h, :, None] * y[:, h, None, :]).sum(0) for h in range(x.size(1))], dim=0)


TRUTH = {
    "bmk,bnk->mn": _truth_bmk_bnk_mn,
    "bhr,hdr->bhd": _truth_bhr_hdr_bhd,
    "bhd,hdr->bhr": _truth_bhd_hdr_bhr,
    "bhd,bhr->hdr": _truth_bhd_bhr_hdr,
}


# ---------------------------------------------------------------------------------------------------------------
# BF16 einsum

@dataclass(frozen=True)
class EinsumCase:
    expr: str
    sizes: dict  # letter -> size

    def __str__(self) -> str:
        return self.expr + ":" + ",".join(f"{k}{v}" for k, v in self.sizes.items())

    def shape(self, subscripts: str) -> tuple[int, ...]:
        return tuple(self.sizes[x] for x in subscripts)


def _subscripts(expr: str) -> tuple[str, str, str]:
    inputs, out = expr.split("->")
    a, b = inputs.split(",")
    return a, b, out


BF16_CASES = [
    EinsumCase("bmk,bnk->mn", dict(b=3, m=37, n=200, k=208)),
    EinsumCase("bmk,bnk->mn", dict(b=4, m=24, n=40, k=16)),
    EinsumCase("bmk,bnk->mn", dict(b=2, m=0, n=16, k=8)),
    EinsumCase("bmk,bnk->mn", dict(b=0, m=8, n=16, k=32)),
    EinsumCase("bhr,hdr->bhd", dict(b=5, h=3, r=208, d=40)),
    EinsumCase("bhr,hdr->bhd", dict(b=0, h=2, r=64, d=16)),
    EinsumCase("bhr,hdr->bhd", dict(b=4, h=4, r=72, d=200)),
    EinsumCase("bhd,hdr->bhr", dict(b=5, h=3, d=40, r=208)),
    EinsumCase("bhd,hdr->bhr", dict(b=1, h=2, d=200, r=24)),
    EinsumCase("bhd,hdr->bhr", dict(b=0, h=2, d=16, r=64)),
]


def bf16_operands(case: EinsumCase):
    """a, b as DeepGEMM's tests build them: W (the 'hdr' operand) is a row-padded slice for the bh* forms."""
    sub_a, sub_b, _ = _subscripts(case.expr)
    a = randn(*case.shape(sub_a))
    if sub_b == "hdr":
        h, d, r = case.shape(sub_b)
        b = randn(h, d, r + W_ROW_PADDING)[:, :, :r]
    else:
        b = randn(*case.shape(sub_b))
    return a, b


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("out_dtype", [BF16, torch.float32], ids=["bf16_out", "fp32_out"])
@pytest.mark.parametrize("case", BF16_CASES, ids=str)
def test_einsum_matches_float64(case, out_dtype, accumulate):
    a, b = bf16_operands(case)
    d, c, c_value = output_and_accumulator(case.shape(_subscripts(case.expr)[2]), out_dtype, accumulate)
    d_op = d.clone()
    deep_gemm.einsum(case.expr, a, b, d, c=c)
    ops.einsum(case.expr, a, b, d_op, d_op if accumulate == "d" else c)
    assert_close(d, c_value + TRUTH[case.expr](a.double(), b.double()), str(case))
    assert_bitwise_equal(d, d_op, "public API vs torch.ops")


@pytest.mark.parametrize("case", [c for c in BF16_CASES if c.expr != "bmk,bnk->mn"][:2], ids=str)
def test_einsum_use_cublaslt_gives_the_same_value(case):
    a, b = bf16_operands(case)
    out_shape = case.shape(_subscripts(case.expr)[2])
    d_default, d_cublaslt = torch.empty(out_shape, dtype=BF16), torch.empty(out_shape, dtype=BF16)
    deep_gemm.einsum(case.expr, a, b, d_default)
    deep_gemm.einsum(case.expr, a, b, d_cublaslt, use_cublaslt=True)
    assert_bitwise_equal(d_default, d_cublaslt, "use_cublaslt must not change the value")


def test_einsum_bh_forms_take_strided_operands():
    # Only the last dim must be contiguous: a sliced from a wider buffer and d written into a padded buffer.
    x = randn(4, 3, 96)[:, :, :64]
    w = randn(3, 40, 64)
    d_buffer = torch.zeros(4, 3, 48, dtype=BF16)
    d = d_buffer[:, :, :40]
    deep_gemm.einsum("bhr,hdr->bhd", x, w, d)
    assert_close(d, _truth_bhr_hdr_bhd(x.double(), w.double()))
    assert torch.equal(d_buffer[:, :, 40:], torch.zeros(4, 3, 8, dtype=BF16)), "padding columns must stay untouched"


# ---------------------------------------------------------------------------------------------------------------
# FP8 einsum

@dataclass(frozen=True)
class Fp8Case:
    expr: str
    sizes: dict
    recipe: tuple[int, int, int]
    out_dtype: torch.dtype = BF16

    def __str__(self) -> str:
        dims = ",".join(f"{k}{v}" for k, v in self.sizes.items())
        return f"{self.expr}:{dims}:recipe{self.recipe}:{str(self.out_dtype).replace('torch.', '')}"


FP8_CASES = [
    Fp8Case("bhr,hdr->bhd", dict(b=37, h=3, r=208, d=144), (1, 128, 128)),  # DeepGEMM's SM90 form
    Fp8Case("bhr,hdr->bhd", dict(b=5, h=2, r=272, d=48), (1, 1, 128), torch.float32),
    Fp8Case("bhr,hdr->bhd", dict(b=0, h=2, r=128, d=16), (1, 128, 128)),
    Fp8Case("bhr,hdr->bhd", dict(b=6, h=2, r=96, d=32), (1, 128, 32)),  # gran_k 32
    Fp8Case("bhd,hdr->bhr", dict(b=37, h=3, d=144, r=208), (1, 128, 128)),
    Fp8Case("bhd,hdr->bhr", dict(b=4, h=2, d=208, r=48), (1, 1, 128), torch.float32),
    Fp8Case("bhd,bhr->hdr", dict(b=37, h=3, d=144, r=208), (1, 1, 128), torch.float32),  # per-channel along b
    Fp8Case("bhd,bhr->hdr", dict(b=300, h=2, d=32, r=48), (1, 128, 128)),
    Fp8Case("bhd,bhr->hdr", dict(b=0, h=2, d=16, r=32), (1, 1, 128), torch.float32),
]


def letter_granularity(expr: str, operand: str, recipe) -> dict[str, int]:
    """Elements per scale along each letter of one operand: the contracted letter takes gran_k, b's own output
    letter takes gran_n_b, everything else (batch h, a's output letter) 1."""
    sub_a, sub_b, out = _subscripts(expr)
    gran_mn = recipe[0] if operand == "a" else recipe[1]
    subscripts, other = (sub_a, sub_b) if operand == "a" else (sub_b, sub_a)
    grans = {}
    for x in subscripts:
        if x not in out:
            grans[x] = recipe[2]
        elif x not in other:
            grans[x] = gran_mn
        else:
            grans[x] = 1
    return grans


def fp8_operand(case: Fp8Case, operand: str):
    """(FP8 data, FP32 scales) in the operand's own dim order, and its float64 dequantised value."""
    sub_a, sub_b, _ = _subscripts(case.expr)
    subscripts = sub_a if operand == "a" else sub_b
    grans = letter_granularity(case.expr, operand, case.recipe)
    shape = tuple(case.sizes[x] for x in subscripts)
    data = randn(*shape, dtype=FP8)
    sf = torch.rand(*(-(-s // grans[x]) for s, x in zip(shape, subscripts))) + 0.5
    expanded = sf.double()
    for dim, x in enumerate(subscripts):  # one scale per block: repeat each scale over its block, crop the tail
        expanded = expanded.repeat_interleave(grans[x], dim=dim).narrow(dim, 0, shape[dim])
    return data, sf, data.double() * expanded


@pytest.mark.parametrize("accumulate", ["none", "d", "distinct"])
@pytest.mark.parametrize("case", FP8_CASES, ids=str)
def test_fp8_einsum_matches_float64(case, accumulate):
    a, sfa, a64 = fp8_operand(case, "a")
    b, sfb, b64 = fp8_operand(case, "b")
    out_shape = tuple(case.sizes[x] for x in _subscripts(case.expr)[2])
    d, c, c_value = output_and_accumulator(out_shape, case.out_dtype, accumulate)
    d_op = d.clone()
    deep_gemm.fp8_einsum(case.expr, (a, sfa), (b, sfb), d, c=c, recipe=case.recipe)
    ops.fp8_einsum(case.expr, a, sfa, b, sfb, d_op, d_op if accumulate == "d" else c, list(case.recipe))
    assert_close(d, c_value + TRUTH[case.expr](a64, b64), str(case))
    assert_bitwise_equal(d, d_op, "public API vs torch.ops")


def test_fp8_einsum_default_recipe_with_deep_gemm_casts():
    # DeepGEMM's own recipe for 'bhr,hdr->bhd': per-token X, per-128x128-block W; compare to the BF16 product.
    b, h, r, d = 9, 2, 256, 128
    x, w = randn(b, h, r), randn(h, d, r)
    x_fp8, x_sf = deep_gemm.utils.per_token_cast_to_fp8(x.view(-1, r), use_ue8m0=False)
    w_fp8 = torch.empty(h, d, r, dtype=FP8)
    w_sf = torch.empty(h, d // 128, r // 128)
    for i in range(h):
        w_fp8[i], w_sf[i] = deep_gemm.utils.per_block_cast_to_fp8(w[i], use_ue8m0=False)
    out = torch.empty(b, h, d, dtype=BF16)
    deep_gemm.fp8_einsum("bhr,hdr->bhd", (x_fp8.view(b, h, r), x_sf.view(b, h, -1)), (w_fp8, w_sf), out)
    assert calc_diff(out, _truth_bhr_hdr_bhd(x.double(), w.double())) < 1e-3  # FP8 quantisation error


# ---------------------------------------------------------------------------------------------------------------
# opcheck

def test_opcheck_einsum():
    for expr, a, b, d in (("bmk,bnk->mn", randn(2, 16, 32), randn(2, 24, 32), randn(16, 24, dtype=torch.float32)),
                          ("bhr,hdr->bhd", randn(3, 2, 32), randn(2, 16, 32), randn(3, 2, 16)),
                          ("bhd,hdr->bhr", randn(3, 2, 16), randn(2, 16, 32), randn(3, 2, 32))):
        torch.library.opcheck(ops.einsum.default, (expr, a, b, d, torch.randn_like(d)))
        torch.library.opcheck(ops.einsum.default, (expr, a, b, d), {"use_cublaslt": expr != "bmk,bnk->mn"})


@pytest.mark.parametrize("case", [FP8_CASES[0], FP8_CASES[4], FP8_CASES[6]], ids=str)
def test_opcheck_fp8_einsum(case):
    a, sfa, _ = fp8_operand(case, "a")
    b, sfb, _ = fp8_operand(case, "b")
    d = randn(*(case.sizes[x] for x in _subscripts(case.expr)[2]), dtype=case.out_dtype)
    torch.library.opcheck(ops.fp8_einsum.default, (case.expr, a, sfa, b, sfb, d, torch.randn_like(d),
                                                   list(case.recipe)), test_utils=FP8_OPCHECK_UTILS)


# ---------------------------------------------------------------------------------------------------------------
# bad inputs: DeepGEMMError naming the argument, d untouched

def einsum_kwargs(expr="bhr,hdr->bhd"):
    if expr == "bmk,bnk->mn":
        return dict(expr=expr, a=randn(2, 16, 32), b=randn(2, 24, 32), d=randn(16, 24, dtype=torch.float32))
    return dict(expr=expr, a=randn(3, 2, 32), b=randn(2, 16, 32), d=randn(3, 2, 16))


def fp8_kwargs(expr="bhr,hdr->bhd"):
    recipe = (1, 1, 128) if expr == "bhd,bhr->hdr" else (1, 128, 128)
    case = Fp8Case(expr, dict(b=5, h=2, r=48, d=32), recipe)
    a, sfa, _ = fp8_operand(case, "a")
    b, sfb, _ = fp8_operand(case, "b")
    d = randn(*(case.sizes[x] for x in _subscripts(expr)[2]), dtype=torch.float32)
    return dict(expr=expr, a=a, sfa=sfa, b=b, sfb=sfb, d=d, recipe=list(recipe))


def _with(**changes):
    """Mutation of a kwargs dict: each change is a value, or a function of the original kwargs giving one."""
    return lambda kw: {**kw, **{key: (v(kw) if callable(v) else v) for key, v in changes.items()}}


BMK = "bmk,bnk->mn"
BAD_EINSUM = [
    (einsum_kwargs, _with(expr="bhr,hdr->bdh"),
     r"expr: unsupported einsum expression 'bhr,hdr->bdh'; supported: 'bmk,bnk->mn', 'bhr,hdr->bhd', 'bhd,hdr->bhr'"),
    (einsum_kwargs, _with(expr="bhr, hdr -> bhd"), r"expr: unsupported einsum expression 'bhr, hdr -> bhd'"),
    (einsum_kwargs, _with(expr="bhd,bhr->hdr"), r"expr: unsupported einsum expression 'bhd,bhr->hdr'"),
    (lambda: einsum_kwargs(BMK), _with(use_cublaslt=True), r"use_cublaslt: expected False for 'bmk,bnk->mn'"),
    (einsum_kwargs, _with(a=lambda kw: kw["a"].float()), r"a: expected dtype bfloat16, got float32"),
    (einsum_kwargs, _with(b=lambda kw: kw["b"].half()), r"b: expected dtype bfloat16, got float16"),
    (einsum_kwargs, _with(d=lambda kw: kw["d"].half()), r"d: expected dtype bfloat16 or float32, got float16"),
    (einsum_kwargs, _with(b=lambda kw: randn(2, 16, 40)), r"b: expected shape \(2, 16, 32\) \('hdr' of"),
    (einsum_kwargs, _with(b=lambda kw: randn(3, 16, 32)), r"b: expected shape \(2, 16, 32\)"),
    (einsum_kwargs, _with(d=lambda kw: randn(3, 2, 17)), r"d: expected shape \(3, 2, 16\)"),
    (einsum_kwargs, _with(a=lambda kw: randn(3, 2)), r"a: expected a 3-D tensor"),
    (einsum_kwargs, _with(a=lambda kw: randn(3, 32, 2).transpose(1, 2)),
     r"a: expected the last dimension to be contiguous"),
    (einsum_kwargs, _with(d=lambda kw: randn(3, 16, 2).transpose(1, 2)),
     r"d: expected the last dimension to be contiguous"),
    (lambda: einsum_kwargs(BMK), _with(a=lambda kw: randn(2, 16, 64)[:, :, :32]), r"a: expected a contiguous tensor"),
    (lambda: einsum_kwargs(BMK), _with(d=lambda kw: randn(16, 32, dtype=torch.float32)[:, :24]),
     r"d: expected a contiguous tensor"),
    (einsum_kwargs, _with(c=lambda kw: randn(3, 2, 16, dtype=torch.float32)), r"c: expected the dtype of d"),
    (einsum_kwargs, _with(c=lambda kw: randn(3, 2, 15)), r"c: expected the shape of d"),
    (einsum_kwargs, _with(a=lambda kw: kw["a"].to("meta")), r"b: expected device meta"),
]


HDR = "bhd,bhr->hdr"
BAD_FP8_EINSUM = [
    (fp8_kwargs, _with(expr=BMK),
     r"expr: unsupported einsum expression 'bmk,bnk->mn'; supported: 'bhr,hdr->bhd', 'bhd,hdr->bhr', 'bhd,bhr->hdr'"),
    (fp8_kwargs, _with(a=lambda kw: kw["a"].float()), r"a: expected dtype float8_e4m3fn, got float32"),
    (fp8_kwargs, _with(sfb=lambda kw: kw["sfb"].int()), r"sfb: expected dtype float32, got int32"),
    (fp8_kwargs, _with(sfa=lambda kw: torch.ones(5, 2, 2)),
     r"sfa: expected shape \(5, 2, 1\) \(FP32 scales of a 'bhr', one per 1 'b' x 128 'r' elements"),
    (fp8_kwargs, _with(sfb=lambda kw: torch.ones(2, 32, 1)),
     r"sfb: expected shape \(2, 1, 1\) \(FP32 scales of b 'hdr', one per 128 'd' x 128 'r'"),
    (lambda: fp8_kwargs("bhd,hdr->bhr"), _with(sfb=lambda kw: torch.ones(2, 1, 2)), r"sfb: expected shape \(2, 1, 1\)"),
    (lambda: fp8_kwargs(HDR), _with(sfa=lambda kw: torch.ones(5, 2, 32)),
     r"sfa: expected shape \(1, 2, 32\) \(FP32 scales of a 'bhd', one per 1 'd' x 128 'b'"),
    (lambda: fp8_kwargs(HDR), _with(recipe=[1, 128, 128]), r"sfb: expected shape \(1, 2, 1\)"),
    (fp8_kwargs, _with(recipe=[1, 64, 128]), r"recipe: B scale granularity along MN must be one of \(1, 128\)"),
    (fp8_kwargs, _with(recipe=[128, 128, 128]), r"recipe: A scales must be per row"),
    (fp8_kwargs, _with(recipe=[1, 128]), r"recipe: expected \(gran_m_a, gran_n_b, gran_k\)"),
    (fp8_kwargs, _with(a=lambda kw: randn(5, 2, 96, dtype=FP8)[:, :, ::2]),
     r"a: expected a unit stride along 'r' \(K-major\) or 'b' \(MN-major\)"),
    (fp8_kwargs, _with(a=lambda kw: randn(5, 2, 56, dtype=FP8)[:, :, :48]),
     r"a: expected strides that are multiples of 16 bytes"),
    (fp8_kwargs, _with(d=lambda kw: kw["d"].half()), r"d: expected dtype bfloat16 or float32, got float16"),
    (fp8_kwargs, _with(d=lambda kw: torch.zeros(5, 32, 2).transpose(1, 2)),
     r"d: expected the last dimension to be contiguous"),
    (fp8_kwargs, _with(d=lambda kw: torch.zeros(5, 2, 31)), r"d: expected shape \(5, 2, 32\)"),
    (fp8_kwargs, _with(c=lambda kw: torch.zeros(5, 2, 32, dtype=BF16)), r"c: expected the dtype of d"),
    (fp8_kwargs, _with(sfa=lambda kw: kw["sfa"].to("meta")), r"sfa: expected device cpu \(the device of a\), got meta"),
]


BAD_INPUTS = [("einsum", *case) for case in BAD_EINSUM] + [("fp8_einsum", *case) for case in BAD_FP8_EINSUM]


@pytest.mark.parametrize("name,make,mutate,pattern", BAD_INPUTS,
                         ids=[f"{i}-{case[0]}" for i, case in enumerate(BAD_INPUTS)])
def test_bad_inputs_raise_before_writing(name, make, mutate, pattern):
    kwargs = mutate(make())
    before = kwargs["d"].clone()
    with pytest.raises(DeepGEMMError, match=pattern):
        getattr(ops, name).default(**kwargs)
    assert_bitwise_equal(kwargs["d"], before, "d after a rejected call")


# ---------------------------------------------------------------------------------------------------------------
# FakeTensorMode: the checks run on fake tensors

def test_checks_run_under_fake_tensor_mode():
    with FakeTensorMode():
        good = einsum_kwargs()
        assert ops.einsum.default(**good) is None
        assert ops.fp8_einsum.default(**fp8_kwargs(HDR)) is None
        with pytest.raises(DeepGEMMError, match=r"d: expected shape \(3, 2, 16\)"):
            ops.einsum.default(**{**good, "d": torch.empty(3, 2, 17, dtype=BF16)})
        with pytest.raises(DeepGEMMError, match=r"sfa: expected shape"):
            ops.fp8_einsum.default(**{**fp8_kwargs(), "sfa": torch.empty(5, 2, 3)})
