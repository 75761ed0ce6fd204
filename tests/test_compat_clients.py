"""Client call patterns: the argument forms vLLM and SGLang pass to DeepGEMM, on small CPU shapes, against float64.

Written from the call sites of vLLM (``vllm/utils/deep_gemm.py``: symbol resolution with 1.x fallbacks, the
``disable_ue8m0_cast`` keyword; the fused-MoE DeepGEMM experts; the sparse-attention indexer) and SGLang
(``srt/layers/deep_gemm_wrapper/entrypoint.py`` and ``compile_utils.py``: ``m_indices=``, ``masked_m=``,
``expected_m=`` keywords in the warm-ups; ``deep_gemm.utils.layout`` imports; the NSA indexer). GEMM and indexer
forms run on CPU tensors and, marked ``gpu``, on CUDA tensors.
"""

from __future__ import annotations

import importlib

import pytest
import torch

import deep_gemm
from deep_gemm.core import runtime
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.attention.reference import pack_paged_kv_cache
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

from tolerances import TOLERANCES

BF16, FP8, I32 = torch.bfloat16, torch.float8_e4m3fn, torch.int32
# The call forms on CPU tensors (the reference kernels) and, on a GPU machine, on CUDA tensors (the Triton kernels).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _on(device, x):
    """x (a tensor, or a tuple / list of them) on ``device``."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(_on(device, v) for v in x)
    return x


def _resolve(module, new: str, old: str):
    """vLLM's `_resolve_symbol`: the current name if present, else the 1.x one."""
    return getattr(module, new) if hasattr(module, new) else getattr(module, old, None)


def _dequant_a(pair):
    data, sf = pair
    return data.double() * sf.double().repeat_interleave(128, dim=-1)[..., :data.size(-1)]


def _dequant_b(pair):
    data, sf = pair
    full = sf.double().repeat_interleave(128, dim=-2).repeat_interleave(128, dim=-1)
    return data.double() * full[..., :data.size(-2), :data.size(-1)]


def _weights(groups, n, k):
    pairs = [per_block_cast_to_fp8(torch.randn(n, k), use_ue8m0=False) for _ in range(groups)]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def test_vllm_symbol_resolution_finds_current_names():
    dg = importlib.import_module("deep_gemm")
    for new, old in (("fp8_gemm_nt", "gemm_fp8_fp8_bf16_nt"),
                     ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous"),
                     ("fp8_m_grouped_gemm_nt_masked", "m_grouped_gemm_fp8_fp8_bf16_nt_masked")):
        assert _resolve(dg, new, old) is getattr(dg, new)
        assert callable(getattr(dg, old))  # older clients that only know the 1.x name
    for name in ("fp8_mqa_logits", "fp8_paged_mqa_logits", "get_paged_mqa_logits_metadata",
                 "get_mn_major_tma_aligned_tensor", "get_mk_alignment_for_contiguous_layout",
                 "transform_sf_into_required_layout", "get_num_sms", "set_num_sms", "get_col_major_tma_aligned_tensor"):
        assert callable(getattr(dg, name)), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["current", "v1"])
def test_dense_fp8_linear(entry, device):
    # vLLM: fp8_gemm_nt((q_input, input_scale), (weight, weight_scale), output, disable_ue8m0_cast=...);
    # SGLang: deep_gemm.fp8_gemm_nt(lhs, rhs, out); 1.x clients: gemm_fp8_fp8_bf16_nt(lhs, rhs, out).
    torch.manual_seed(0)
    m, n, k = 5, 256, 384
    a = per_token_cast_to_fp8(torch.randn(m, k), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k), use_ue8m0=False)
    out = torch.empty(m, n, dtype=BF16, device=device)
    if entry == "current":
        deep_gemm.fp8_gemm_nt(_on(device, a), _on(device, b), out, disable_ue8m0_cast=True)
    else:
        deep_gemm.gemm_fp8_fp8_bf16_nt(_on(device, a), _on(device, b), out)
    assert calc_diff(out.cpu(), _dequant_a(a) @ _dequant_b(b).T) < 1e-5


def _contiguous_moe(groups=3, rows=(130, 0, 61), n=128, k=256):
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    m_indices = torch.cat([torch.tensor([g] * r + [-1] * (-r % alignment), dtype=I32) for g, r in enumerate(rows)])
    a = per_token_cast_to_fp8(torch.randn(m_indices.numel(), k), use_ue8m0=False)
    b = _weights(groups, n, k)
    want = torch.zeros(m_indices.numel(), n, dtype=torch.float64)
    va, vb = _dequant_a(a), _dequant_b(b)
    for r, g in enumerate(m_indices.tolist()):
        if g >= 0:
            want[r] = vb[g] @ va[r]
    return a, b, m_indices, want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["positional", "m_indices_keyword", "grouped_layout_keyword", "v1", "c_module"])
def test_m_grouped_contiguous_fp8_moe(form, device):
    # SGLang warm-up: m_grouped_fp8_gemm_nt_contiguous(lhs, rhs, out, m_indices=...); vLLM: positional expert_ids.
    torch.manual_seed(1)
    a, b, m_indices, want = _contiguous_moe()
    a, b, m_indices = _on(device, a), _on(device, b), _on(device, m_indices)
    out = torch.full((m_indices.numel(), b[0].size(1)), 7.0, dtype=BF16, device=device)
    if form == "positional":
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, out, m_indices, disable_ue8m0_cast=True)
    elif form == "m_indices_keyword":
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, out, m_indices=m_indices)
    elif form == "grouped_layout_keyword":
        deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous(a, b, out, grouped_layout=m_indices)
    elif form == "v1":
        deep_gemm.m_grouped_gemm_fp8_fp8_bf16_nt_contiguous(a, b, out, m_indices)
    else:
        deep_gemm._C.m_grouped_fp8_gemm_nt_contiguous(a, b, out, m_indices=m_indices)
    out, m_indices = out.cpu(), m_indices.cpu()
    assert calc_diff(out, want) < 1e-5
    assert torch.equal(out[m_indices < 0], torch.zeros_like(out[m_indices < 0]))


def test_m_indices_and_grouped_layout_together_is_ambiguous():
    a, b, m_indices, _ = _contiguous_moe(rows=(128, 0, 0))
    out = torch.empty(m_indices.numel(), 128, dtype=BF16)
    with pytest.raises(DeepGEMMError, match="m_indices: the former name of grouped_layout; pass grouped_layout only"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, out, m_indices, m_indices=m_indices)
    with pytest.raises(DeepGEMMError, match="pass grouped_layout only"):
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a[0], b[0], out, grouped_layout=m_indices, m_indices=m_indices)


@pytest.mark.parametrize("device", DEVICES)
def test_m_grouped_contiguous_bf16_moe_with_m_indices_keyword(device):
    # SGLang's BF16 MoE warm-up passes m_indices= too.
    torch.manual_seed(2)
    alignment = deep_gemm.get_mk_alignment_for_contiguous_layout()
    m_indices = torch.cat([torch.full((alignment,), 1, dtype=I32), torch.full((alignment,), 0, dtype=I32)])
    a, b = torch.randn(m_indices.numel(), 64, dtype=BF16), torch.randn(2, 32, 64, dtype=BF16)
    want = torch.stack([b[g].double() @ a[r].double() for r, g in enumerate(m_indices.tolist())])
    a, b, m_indices = _on(device, a), _on(device, b), _on(device, m_indices)
    out = torch.empty(m_indices.numel(), 32, dtype=BF16, device=device)
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, out, m_indices=m_indices)
    assert calc_diff(out.cpu(), want) < 1e-5
    out_nn = torch.empty_like(out)
    deep_gemm.m_grouped_bf16_gemm_nn_contiguous(a, b.mT.contiguous(), out_nn, m_indices=m_indices)
    assert calc_diff(out_nn.cpu(), want) < 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ["sglang_keywords", "vllm_positional", "v1"])
def test_masked_fp8_moe_decode(entry, device):
    # SGLang: fp8_m_grouped_gemm_nt_masked(lhs, rhs, out, masked_m=..., expected_m=m);
    # vLLM: fp8_m_grouped_gemm_nt_masked((a, a_s), (w, w_s), out, expert_num_tokens, expected_m, disable_ue8m0_cast=)
    torch.manual_seed(3)
    groups, max_m, n, k = 2, 16, 128, 256
    pairs = [per_token_cast_to_fp8(torch.randn(max_m, k), use_ue8m0=False) for _ in range(groups)]
    a = torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])
    b = _weights(groups, n, k)
    masked_m = torch.tensor([3, 16], dtype=I32)
    va, vb = _dequant_a(a), _dequant_b(b)
    a, b = _on(device, a), _on(device, b)
    out = torch.full((groups, max_m, n), 5.0, dtype=BF16, device=device)
    if entry == "sglang_keywords":
        deep_gemm.fp8_m_grouped_gemm_nt_masked(a, b, out, masked_m=masked_m.to(device), expected_m=8)
    elif entry == "vllm_positional":
        deep_gemm.fp8_m_grouped_gemm_nt_masked(a, b, out, masked_m.to(device), 8, disable_ue8m0_cast=True)
    else:
        deep_gemm.m_grouped_gemm_fp8_fp8_bf16_nt_masked(a, b, out, masked_m.to(device), 8)
    out = out.cpu()
    for g, rows in enumerate(masked_m.tolist()):
        assert calc_diff(out[g, :rows], va[g, :rows] @ vb[g].T) < 1e-5
        assert torch.equal(out[g, rows:], torch.full_like(out[g, rows:], 5.0))  # untouched past masked_m


def test_scale_layout_helpers_as_clients_call_them():
    from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor  # SGLang entrypoint
    sf = torch.rand(100, 3)
    for fn in (get_mn_major_tma_aligned_tensor, deep_gemm.get_col_major_tma_aligned_tensor):
        out = fn(sf)
        assert torch.equal(out, sf) and out.stride() == (1, 100)
    # vLLM: transform_sf_into_required_layout(sf, mn, k, recipe, num_groups, is_sfa) with keywords.
    w_sf = torch.rand(2, 3, 4)  # per-block scales of [2, 384, 512] weights
    out = deep_gemm.transform_sf_into_required_layout(sf=w_sf, mn=384, k=512, recipe=(1, 128, 128), num_groups=2,
                                                       is_sfa=False)
    assert out.shape[0] == 2 and out.dtype == torch.float32
    assert torch.equal(out.float().reshape(-1).sort().values.unique(), w_sf.reshape(-1).sort().values.unique())


def test_runtime_knobs_as_clients_use_them():
    # SGLang: configure_deep_gemm_num_sms saves get_num_sms(), sets a budget, restores it.
    saved = deep_gemm.get_num_sms()
    deep_gemm.set_num_sms(saved if torch.cuda.is_available() else 4)
    try:
        assert deep_gemm.get_num_sms() == (saved if torch.cuda.is_available() else 4)
    finally:
        deep_gemm.set_num_sms(saved if torch.cuda.is_available() else 0)
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 128
    assert deep_gemm._C.get_jit().cache_dir  # DeepJIT-era clients: _C.get_jit()


def test_none_for_a_required_tensor_names_the_argument():
    a = per_token_cast_to_fp8(torch.randn(4, 128), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(128, 128), use_ue8m0=False)
    with pytest.raises(DeepGEMMError, match=r"d: expected a tensor, got None"):
        deep_gemm.fp8_gemm_nt(a, b, None)
    with pytest.raises(DeepGEMMError, match=r"grouped_layout: expected a tensor, got None"):
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, torch.empty(4, 128, dtype=BF16), None)
    with pytest.raises(DeepGEMMError, match=r"schedule_meta: expected a tensor, got None"):
        deep_gemm.fp8_paged_mqa_logits(torch.zeros(1, 1, 32, 128, dtype=FP8),
                                       torch.zeros(1, 64, 1, 132, dtype=torch.uint8), torch.zeros(1, 32),
                                       torch.ones(1, 1, dtype=I32), torch.zeros(1, 1, dtype=I32), None, 64)
    with pytest.raises(DeepGEMMError, match=r"a: expected a tensor, got None"):
        torch.ops.deep_gemm.bf16_gemm_nt(None, torch.randn(4, 4), torch.randn(4, 4))


# ---- the indexer (vLLM's sparse-attention indexer, SGLang's NSA indexer) -----------------------------------

def _mqa_inputs(s=3, sk=40, h=32, d=128, kv_scale_2d=False):
    torch.manual_seed(4)
    q = torch.randn(s, h, d).to(FP8)
    kv, kv_scale = torch.randn(sk, d).to(FP8), torch.rand(sk) + 0.25
    weights = torch.randn(s, h)
    ks = torch.tensor([0, 5, 10], dtype=I32)
    ke = torch.tensor([20, 40, 11], dtype=I32)
    want = torch.full((s, sk), float("-inf"), dtype=torch.float64)
    for i in range(s):
        scores = (q[i].double() @ kv[ks[i]:ke[i]].double().T).clamp(min=0)
        want[i, ks[i]:ke[i]] = (weights[i].double() @ scores) * kv_scale[ks[i]:ke[i]].double()
    return (q, (kv, kv_scale[:, None] if kv_scale_2d else kv_scale), weights, ks, ke), want


def _close_where_finite(logits, want):
    finite = torch.isfinite(want)
    # FP32 logits: the GPU kernels sum FP8 products on the tensor cores (tests/tolerances.py).
    assert calc_diff(logits.double()[finite], want[finite]) < TOLERANCES["kernel_fp8_logits_fp32"]


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_mqa_logits_as_clients_call_it(device):
    # vLLM / SGLang: fp8_mqa_logits(q_fp8, (k_fp8, k_scale), weights, cu_seqlen_ks, cu_seqlen_ke, clean_logits=False)
    args, want = _mqa_inputs()
    _close_where_finite(deep_gemm.fp8_mqa_logits(*_on(device, args), clean_logits=False).cpu(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_fp8_mqa_logits_with_2d_kv_scale(device):
    # vLLM's indexer passes the key scales as [SK, 1].
    args, want = _mqa_inputs(kv_scale_2d=True)
    _close_where_finite(deep_gemm.fp8_mqa_logits(*_on(device, args), clean_logits=False).cpu(), want)


def _paged_inputs(context_lens_1d: bool, batch=2, h=32, d=128, block=64, max_len=200):
    torch.manual_seed(5)
    lens = torch.tensor([70, 5], dtype=I32)[:batch]
    values, scales = [], []
    for n in lens.tolist():
        values.append(torch.randn(n, d).to(FP8))
        scales.append(torch.rand(n) + 0.25)
    keys = [v.double() * s.double()[:, None] for v, s in zip(values, scales)]
    kv_cache, block_table = pack_paged_kv_cache(values, scales, block, spare_pages=1)
    q = torch.randn(batch, 1, h, d).to(FP8)
    weights = torch.randn(batch, h)
    want = torch.full((batch, max_len), float("-inf"), dtype=torch.float64)
    for b, n in enumerate(lens.tolist()):
        want[b, :n] = weights[b].double() @ (q[b, 0].double() @ keys[b].T).clamp(min=0)
    context_lens = lens if context_lens_1d else lens[:, None].contiguous()
    return q, kv_cache, weights, context_lens, block_table, block, max_len, want


@pytest.fixture
def num_sms_4():
    previous = runtime.get_num_sms()
    runtime.set_num_sms(4)
    yield 4
    runtime.set_num_sms(previous if torch.cuda.is_available() else 0)


def _paged_call(context_lens_1d, num_sms, device="cpu"):
    q, kv_cache, weights, context_lens, block_table, block, max_len, want = _paged_inputs(context_lens_1d)
    q, kv_cache, weights, context_lens, block_table = _on(device, (q, kv_cache, weights, context_lens, block_table))
    meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, block, deep_gemm.get_num_sms())
    logits = deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, meta, max_len,
                                            clean_logits=False)
    _close_where_finite(logits.cpu(), want)


@pytest.mark.parametrize("device", DEVICES)
def test_paged_mqa_logits_with_2d_context_lens(num_sms_4, device):
    _paged_call(False, num_sms_4, device)


@pytest.mark.parametrize("device", DEVICES)
def test_paged_mqa_logits_with_1d_context_lens(num_sms_4, device):
    # vLLM 0.11 and the V3.2-era SGLang indexer pass context_lens as [B] (next_n = 1).
    _paged_call(True, num_sms_4, device)


def test_old_call_forms_trace_under_torch_compile_fullgraph():
    a, b, m_indices, want = _contiguous_moe(rows=(128, 0, 100))

    def moe(a0, a1, b0, b1, ids):
        out = torch.empty(ids.numel(), b0.size(1), dtype=BF16)
        deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a0, a1), (b0, b1), out, m_indices=ids)
        return out

    compiled = torch.compile(moe, fullgraph=True, backend="eager")
    out = compiled(a[0], a[1], b[0], b[1], m_indices)
    assert calc_diff(out, want) < 1e-5


def _tensor_like(value) -> bool:
    return isinstance(value, torch.Tensor) or (isinstance(value, tuple) and bool(value)
                                               and isinstance(value[0], torch.Tensor))


def _none_cases() -> list:
    """Built at collection time, outside every fixture: some case builders set runtime knobs (the paged MQA cases
    set num_sms), so the knobs are restored here, or every test collected after would see them."""
    import test_stubs
    saved = runtime.peek("num_sms")
    try:
        cases = []
        for name, case in sorted(test_stubs.CASES.items()):
            fn = getattr(deep_gemm, name, None)
            if case.raises or not callable(fn) or isinstance(fn, type):
                continue
            cases += [pytest.param(name, key, id=f"{name}-{key}") for key, value in case.build().items()
                      if _tensor_like(value)]
        return cases
    finally:
        runtime.set_num_sms(saved)


@pytest.fixture
def restore_num_sms():
    saved = runtime.peek("num_sms")  # the raw knob (0: the device's count)
    yield
    runtime.set_num_sms(saved)


@pytest.mark.parametrize("name,arg", _none_cases())
def test_none_for_any_tensor_argument_of_any_public_function(name, arg, restore_num_sms):
    """Every public function, every tensor (or pair) argument set to None: a DeepGEMMError naming that argument
    (optional tensors, like ``c``, accept None)."""
    import inspect
    import test_stubs
    fn = getattr(deep_gemm, name)
    kwargs = test_stubs.CASES[name].build()
    kwargs[arg] = None
    params = inspect.signature(fn).parameters
    if params[arg].default is None:
        fn(*[kwargs.pop(p) for p, v in params.items() if v.kind is v.POSITIONAL_ONLY and p in kwargs], **kwargs)
        return
    positional = [kwargs.pop(p) for p, v in params.items() if v.kind is v.POSITIONAL_ONLY and p in kwargs]
    with pytest.raises(DeepGEMMError, match=rf"^{arg}\b|\b{arg}: "):
        fn(*positional, **kwargs)
