"""DeepGEMM 0.2.3's keywords on our ops, on CPU: ``alpha`` on the dense FP8 / BF16 GEMMs (reference and the Triton
launchers' host route, in the interpreter), ``compiled_dims=''``, the K-grouped GEMMs' ``ks`` (``ks_cpu`` kept) and
FP8's ``use_padded_sf_layout``, ``fp8_mqa_logits``'s ``ks`` / ``ke``, the logits' ``clean_logits=False`` default and
``schedule_meta``. Results against independent float64 computations; opcheck where the op's schema changed."""

from __future__ import annotations

import inspect

import pytest
import torch

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import calc_diff

import interpreter_bf16  # noqa: F401  (BF16 tl.dot in the interpreter)
from fp8_inputs import k_grouped_inputs, mn_major, oracle_gemm, quantize
from tolerances import TOLERANCES
from triton_harness import DEVICE, run_triton

ops = torch.ops.deep_gemm
# the FP8 families' opcheck set (FP8 tensors keep test_schema out, as in test_fp8_gemm_reference_cpu.py)
FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
BF16 = torch.bfloat16


def _fp8_dense(layout, m=32, n=128, k=256, out=torch.bfloat16):
    a = quantize(torch.randn(m, k), 1)
    b = quantize(torch.randn(n, k), 128)
    expected = oracle_gemm(*a, (1, 128), *b, (128, 128))
    a_arg, b_arg = a, b
    if layout[0] == "t":
        a_arg = (mn_major(a[0]).T, a[1].T)
    if layout[1] == "n":
        b_arg = (mn_major(b[0]).T, b[1].T)
    return a_arg, b_arg, torch.full((m, n), float("nan"), dtype=out), expected


def _bf16_dense(layout, m=24, n=64, k=96):
    a, b = torch.randn(m, k, dtype=BF16), torch.randn(n, k, dtype=BF16)
    expected = a.double() @ b.double().T
    a_arg = a.T.contiguous() if layout[0] == "t" else a
    b_arg = b.T.contiguous() if layout[1] == "n" else b
    return a_arg, b_arg, expected


# ---- alpha ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
@pytest.mark.parametrize("with_c", [False, True])
def test_fp8_alpha_scales_the_product_only(layout, with_c):
    a, b, d, expected = _fp8_dense(layout, out=torch.float32)
    c = torch.randn_like(d) if with_c else None
    alpha = -0.375
    getattr(deep_gemm, f"fp8_gemm_{layout}")(a, b, d, c, alpha=alpha)
    want = alpha * expected + (c.double() if with_c else 0)
    assert calc_diff(d, want) < TOLERANCES["reference_fp32_out"]
    # the same call without alpha, scaled afterwards in float64: the product alone is scaled
    d1 = torch.empty_like(d)
    getattr(deep_gemm, f"fp8_fp4_gemm_{layout}")(a, b, d1)
    assert torch.allclose(d.double(), alpha * d1.double() + (c.double() if with_c else 0), rtol=1e-5, atol=1e-4)


def test_fp8_alpha_one_and_none_agree_and_alias_takes_it():
    a, b, d, _ = _fp8_dense("nt")
    d2 = d.clone()
    deep_gemm.fp8_gemm_nt(a, b, d)
    deep_gemm.fp4_gemm_nt(a, b, d2, alpha=1.0)
    assert torch.equal(d, d2)


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
def test_bf16_alpha(layout):
    a, b, expected = _bf16_dense(layout)
    d = torch.empty(expected.shape, dtype=torch.float32)
    c = torch.randn_like(d)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d, c, alpha=2.5)
    assert calc_diff(d, 2.5 * expected + c.double()) < 1e-9
    d_bf16 = torch.empty(expected.shape, dtype=BF16)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d_bf16, None, "", 0.5)
    assert calc_diff(d_bf16, 0.5 * expected) < TOLERANCES["reference_bf16_out"]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "2", True, [1.0]])
def test_bad_alpha_raises_naming_it(bad):
    a, b, d, _ = _fp8_dense("nt")
    before = d.clone()
    with pytest.raises(DeepGEMMError, match="^alpha: "):
        deep_gemm.fp8_gemm_nt(a, b, d, alpha=bad)
    assert torch.equal(d.isnan(), before.isnan())
    x = torch.randn(8, 16, dtype=BF16)
    with pytest.raises(DeepGEMMError, match="^alpha: "):
        deep_gemm.bf16_gemm_nt(x, x, torch.empty(8, 8, dtype=BF16), alpha=bad)


def test_bad_alpha_through_the_op_raises_naming_it():
    x = torch.randn(8, 16, dtype=BF16)
    with pytest.raises(DeepGEMMError, match="^alpha: "):
        ops.bf16_gemm_nt(x, x, torch.empty(8, 8, dtype=BF16), None, "", float("nan"))


def test_opcheck_alpha():
    a, b, d, _ = _fp8_dense("nt")
    torch.library.opcheck(ops.fp8_gemm_nt.default, (a[0], a[1], b[0], b[1], d, None, None, None, None, "", False,
                                                    0.5), test_utils=FP8_OPCHECK_UTILS)
    x, y = torch.randn(16, 32, dtype=BF16), torch.randn(24, 32, dtype=BF16)
    d = torch.zeros(16, 24)
    torch.library.opcheck(ops.bf16_gemm_nt.default, (x, y, d, d.clone(), "", -2.0), test_utils=FP8_OPCHECK_UTILS)


def test_fake_tensor_accepts_alpha():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(16, 32, dtype=BF16)
        ops.bf16_gemm_nt(x, x, torch.empty(16, 16, dtype=BF16), None, "", 3.0)


# The CUDA paths of alpha, in the Triton interpreter on CPU: FP8 with FP32 scales folds alpha into A's scales
# (scale_with_alpha); BF16 runs the launcher into an FP32 scratch, then d = c + alpha * scratch (run_with_alpha).
@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_fp8_alpha_triton_host_route(layout):
    a, b, d, expected = _fp8_dense(layout, m=32, n=128, k=256)
    c = torch.randn(d.shape).to(BF16)
    a0, a1, b0, b1 = (t.to(DEVICE) for t in (*a, *b))
    d, c = d.to(DEVICE), c.to(DEVICE)
    run_triton(f"fp8_gemm_{layout}", a0, a1, b0, b1, d, c, None, None, None, "", False, 0.75)
    assert calc_diff(d.cpu(), 0.75 * expected + c.cpu().double()) < TOLERANCES["kernel_fp8"]


def test_fp8_alpha_folds_into_padded_mn_major_scales():
    """A's scales in DeepGEMM's TMA-aligned MN-major layout (padded columns): the scaled copy keeps the strides, the
    caller's scales are untouched, and d (prefilled with NaN) is fully written."""
    from deep_gemm.common.operands import scale_with_alpha
    a, b, d, expected = _fp8_dense("nt", m=36, n=128, k=384)
    storage = torch.full((a[1].size(1), 40), 7.0)  # [K/128, align(M, 4) + 4]
    sfa = storage[:, :36].T  # [M, K/128], stride (1, 40)
    sfa.copy_(a[1])
    scaled = scale_with_alpha(sfa, -2.0)
    assert scaled.stride() == sfa.stride() and torch.equal(scaled, -2.0 * sfa)
    before = storage.clone()
    a0, a1, b0, b1 = (t.to(DEVICE) for t in (a[0], sfa, *b))
    d = d.to(DEVICE)
    run_triton("fp8_gemm_nt", a0, a1, b0, b1, d, None, None, None, None, "", False, -2.0)
    assert calc_diff(d.cpu(), -2.0 * expected) < TOLERANCES["kernel_fp8"]
    assert torch.equal(storage, before)


def test_bf16_alpha_triton_host_route_into_c_is_d():
    a, b, expected = _bf16_dense("nt", m=32, n=64, k=64)
    d = torch.randn(expected.shape)
    want = -1.5 * expected + d.double()
    a, b, d = a.to(DEVICE), b.to(DEVICE), d.to(DEVICE)
    run_triton("bf16_gemm_nt", a, b, d, d, "", -1.5)
    assert calc_diff(d.cpu(), want) < 1e-6


# ---- compiled_dims -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [f"{p}_{l}" for p in ("fp8_gemm", "fp8_fp4_gemm", "bf16_gemm")
                                  for l in ("nt", "nn", "tn", "tt")])
def test_compiled_dims_defaults_to_empty(name):
    assert inspect.signature(getattr(deep_gemm, name)).parameters["compiled_dims"].default == ""
    assert inspect.signature(getattr(deep_gemm, name)).parameters["alpha"].default is None


# ---- K-grouped: ks, ks_cpu, use_padded_sf_layout --------------------------------------------------------------

@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_k_grouped_ks_and_its_former_name(layout):
    ks, m, n = [256, 128], 16, 32
    a, b, _, _ = k_grouped_inputs(layout, ks, m, n)
    fn = getattr(deep_gemm, f"k_grouped_fp8_gemm_{layout}_contiguous")
    lay = torch.tensor(ks, dtype=torch.int32)
    d1, d2 = torch.zeros(2, m, n), torch.zeros(2, m, n)
    fn(a, b, d1, ks=ks, grouped_layout=lay)
    fn(a, b, d2, ks_cpu=ks, grouped_layout=lay)
    assert torch.equal(d1, d2)
    with pytest.raises(DeepGEMMError, match="ks_cpu: the former name of ks"):
        fn(a, b, d2, ks, lay, ks_cpu=ks)


def test_k_grouped_bf16_ks_and_its_former_name():
    ks, m, n = [64, 0, 32], 8, 16
    a, b = torch.randn(sum(ks), m, dtype=BF16), torch.randn(sum(ks), n, dtype=BF16)
    lay = torch.tensor(ks, dtype=torch.int32)
    d1, d2 = torch.zeros(3, m, n), torch.zeros(3, m, n)
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d1, ks=ks, grouped_layout=lay)
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d2, ks_cpu=ks, grouped_layout=lay)
    assert torch.equal(d1, d2)
    starts = [0, 64, 64]
    for g, kg in enumerate(ks):
        want = a[starts[g]:starts[g] + kg].double().T @ b[starts[g]:starts[g] + kg].double()
        assert calc_diff(d1[g], want) < 1e-9 if kg else torch.equal(d1[g], torch.zeros(m, n))


def _pad_sf(sf, ks, alignment, k_axis, extra=0):
    """Independent construction of DeepGEMM's padded per-group SF: group g's K_g/128 scales at row
    sum_{h<g} ceil(align(K_h, alignment) / 128), NaN in the padding rows (never read)."""
    rows = []
    start = 0
    for kg in ks:
        block = sf.narrow(k_axis, start, kg // 128)
        pad_rows = -(-kg // alignment) * alignment // 128 - kg // 128
        shape = list(sf.shape)
        shape[k_axis] = pad_rows
        rows += [block, torch.full(shape, float("nan"))]
        start += kg // 128
    shape = list(sf.shape)
    shape[k_axis] = extra
    return torch.cat(rows + [torch.full(shape, float("nan"))], dim=k_axis).contiguous()


@pytest.fixture
def alignment_256():
    before = deep_gemm.get_mk_alignment_for_contiguous_layout()
    deep_gemm.set_mk_alignment_for_contiguous_layout(256)
    yield 256
    deep_gemm.set_mk_alignment_for_contiguous_layout(before)


@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_padded_sf_layout_reference(layout, alignment_256):
    ks, m, n = [128, 384, 0, 256], 16, 32
    a, b, qa, qb = k_grouped_inputs(layout, ks, m, n)
    k_axis = 1 if layout == "nt" else 0
    pa = (a[0], _pad_sf(a[1], ks, 256, k_axis, extra=1))
    pb = (b[0], _pad_sf(b[1], ks, 256, k_axis))
    assert pa[1].size(k_axis) == (256 + 512 + 0 + 256) // 128 + 1
    fn = getattr(deep_gemm, f"k_grouped_fp8_gemm_{layout}_contiguous")
    lay = torch.tensor(ks, dtype=torch.int32)
    d, c = torch.zeros(len(ks), m, n), torch.randn(len(ks), m, n)
    fn(pa, pb, d, ks, lay, c, use_padded_sf_layout=True)
    for g, kg in enumerate(ks):
        want = c[g].double() + (oracle_gemm(*qa[g], (1, 128), *qb[g], (1, 128)) if kg else 0)
        assert calc_diff(d[g], want) < TOLERANCES["reference_fp32_out"]
    # the compact call gives the same result bit for bit
    d2 = torch.zeros_like(d)
    fn(a, b, d2, ks, lay, c)
    assert torch.equal(d, d2)
    # too few scales for the padded layout
    short = (a[0], a[1].narrow(k_axis, 0, a[1].size(k_axis) - 1 if layout == "nt" else a[1].size(0)))
    with pytest.raises(DeepGEMMError, match="^sfa: expected 8 or more scales along K"):
        fn(short, pb, d, ks, lay, c, use_padded_sf_layout=True)


@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_padded_sf_layout_is_compact_at_alignment_128(layout):
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 128
    ks, m, n = [256, 128], 16, 32
    a, b, _, _ = k_grouped_inputs(layout, ks, m, n)
    fn = getattr(deep_gemm, f"k_grouped_fp8_gemm_{layout}_contiguous")
    lay = torch.tensor(ks, dtype=torch.int32)
    d1, d2 = torch.zeros(2, m, n), torch.zeros(2, m, n)
    fn(a, b, d1, ks, lay, use_padded_sf_layout=True)
    fn(a, b, d2, ks, lay)
    assert torch.equal(d1, d2)


@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_padded_sf_layout_triton(layout, alignment_256):
    ks, m, n = [128, 256], 16, 128
    a, b, qa, qb = k_grouped_inputs(layout, ks, m, n)
    k_axis = 1 if layout == "nt" else 0
    a1, b1 = _pad_sf(a[1], ks, 256, k_axis), _pad_sf(b[1], ks, 256, k_axis)
    d = torch.zeros(len(ks), m, n)
    a0, a1, b0, b1, d = (t.to(DEVICE) for t in (a[0], a1, b[0], b1, d))
    lay = torch.tensor(ks, dtype=torch.int32, device=DEVICE)
    run_triton(f"k_grouped_fp8_gemm_{layout}_contiguous", a0, a1, b0, b1, d, ks, lay, None, [1, 1, 128], "mn",
               False, True)
    for g, kg in enumerate(ks):
        assert calc_diff(d[g].cpu(), oracle_gemm(*qa[g], (1, 128), *qb[g], (1, 128))) < TOLERANCES["kernel_fp8"]


def test_opcheck_padded_sf_layout(alignment_256):
    ks, m, n = [128, 256], 16, 32
    a, b, _, _ = k_grouped_inputs("nt", ks, m, n)
    pa, pb = _pad_sf(a[1], ks, 256, 1), _pad_sf(b[1], ks, 256, 1)
    d = torch.zeros(2, m, n)
    torch.library.opcheck(ops.k_grouped_fp8_gemm_nt_contiguous.default,
                          (a[0], pa, b[0], pb, d, ks, torch.tensor(ks, dtype=torch.int32), d.clone(), [1, 1, 128],
                           "mn", False, True), test_utils=FP8_OPCHECK_UTILS)


# ---- MQA logits -------------------------------------------------------------------------------------------------

def _mqa_inputs(s=8, h=32, dim=64, sk=40):
    q = torch.randn(s, h, dim).to(torch.float8_e4m3fn)
    kv = torch.randn(sk, dim).to(torch.float8_e4m3fn)
    kv_sf = torch.rand(sk) + 0.5
    w = torch.randn(s, h)
    ks = torch.randint(0, sk // 2, (s,), dtype=torch.int32)
    ke = torch.minimum(ks + torch.randint(1, sk, (s,), dtype=torch.int32), torch.tensor(sk, dtype=torch.int32))
    return q, (kv, kv_sf), w, ks, ke


def _mqa_oracle(q, kv, w, ks, ke):
    kv_v = kv[0].double() * kv[1].double()[:, None]
    scores = torch.relu(torch.einsum("shd,kd->shk", q.double(), kv_v))
    logits = torch.einsum("shk,sh->sk", scores, w.double())
    cols = torch.arange(kv[0].size(0))
    valid = (cols[None] >= ks[:, None]) & (cols[None] < ke[:, None])
    return logits, valid


def test_fp8_mqa_logits_ks_ke_and_the_long_names():
    q, kv, w, ks, ke = _mqa_inputs()
    out = deep_gemm.fp8_mqa_logits(q, kv, w, ks=ks, ke=ke, clean_logits=True)
    old = deep_gemm.fp8_mqa_logits(q, kv, w, cu_seq_len_k_start=ks, cu_seq_len_k_end=ke, clean_logits=True)
    assert torch.equal(out, old)
    want, valid = _mqa_oracle(q, kv, w, ks, ke)
    assert calc_diff(out[valid], want[valid]) < 1e-9
    assert torch.isneginf(out[~valid]).all()
    with pytest.raises(DeepGEMMError, match="cu_seq_len_k_start: the former name of ks"):
        deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, cu_seq_len_k_start=ks)
    with pytest.raises(DeepGEMMError, match="^ke: "):
        deep_gemm.fp8_mqa_logits(q, kv, w, ks, None)


def test_clean_logits_defaults_to_false():
    for fn in (deep_gemm.fp8_mqa_logits, deep_gemm.fp8_fp4_mqa_logits):
        assert inspect.signature(fn).parameters["clean_logits"].default is False
    # the valid entries are the same either way
    q, kv, w, ks, ke = _mqa_inputs()
    raw = deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke)
    clean = deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, True)
    _, valid = _mqa_oracle(q, kv, w, ks, ke)
    assert torch.equal(raw[valid], clean[valid])


def test_schedule_meta_is_checked_and_does_not_change_the_logits():
    q, kv, w, ks, ke = _mqa_inputs()
    meta = deep_gemm.get_mqa_logits_metadata(ks, ke, kv[0].size(0), q.size(1))
    plain = deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, True)
    scheduled = deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, True, schedule_meta=meta)
    assert torch.equal(plain, scheduled)
    for bad, pattern in ((meta.float(), "^schedule_meta: "), (meta[:-2], r"^schedule_meta: expected shape"),
                         (meta.view(1, -1), "^schedule_meta: ")):
        with pytest.raises(DeepGEMMError, match=pattern):
            deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, schedule_meta=bad)


def test_opcheck_schedule_meta():
    q, kv, w, ks, ke = _mqa_inputs()
    meta = deep_gemm.get_mqa_logits_metadata(ks, ke, kv[0].size(0), q.size(1))
    torch.library.opcheck(ops.fp8_fp4_mqa_logits.default,
                          (q, None, kv[0], kv[1], w, ks, ke, True, 0, torch.float32, meta),
                          test_utils=FP8_OPCHECK_UTILS)
