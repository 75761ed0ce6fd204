"""The eager path on the GPU: public wrappers that skip the dispatcher give the dispatcher op's results bit for bit,
honour new tensors at the same metadata (replayed plans follow the pointers), capture into CUDA graphs, run from
several threads, raise the dispatcher's errors before writing, and leave torch.compile to the op."""

from __future__ import annotations

import threading

import pytest
import torch

import deep_gemm
from deep_gemm.core import eager, registry
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

pytestmark = pytest.mark.gpu


def _hc(seed, m=13, n=24, k=1024):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    b = torch.randn(n, k, device="cuda", generator=g)
    return a, b, torch.full((m, n), 7.0, device="cuda"), torch.full((m,), 7.0, device="cuda")


def _fp8(seed, m=64, n=256, k=512):
    torch.manual_seed(seed)
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda"), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False)
    return a, b, torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)


def _masked(seed, g=4, t=64, n=256, k=512, vllm=False):
    torch.manual_seed(seed)
    a = per_token_cast_to_fp8(torch.randn(g * t, k, device="cuda"), use_ue8m0=False)
    sfa = a[1].view(g, t, k // 128)
    if vllm:  # the (T*G, 1, T) strided scales vLLM's fused quantiser writes
        strided = torch.empty_strided((g, t, k // 128), (t * (k // 128), 1, t), device="cuda")
        strided.copy_(sfa)
        sfa = strided
    bq = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda"), use_ue8m0=False) for _ in range(g)]
    b = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
    masked_m = torch.tensor([t, 17, 0, 40][:g], device="cuda", dtype=torch.int32)
    return (a[0].view(g, t, k), sfa), b, torch.zeros(g, t, n, device="cuda", dtype=torch.bfloat16), masked_m


def _pairs():
    """(eager call, dispatcher call) builders per op: each takes a seed and returns (outputs, eager fn, op fn)."""
    def hc(seed):
        a, b, d, s = _hc(seed)
        d2, s2 = d.clone(), s.clone()
        return ((d, s), (d2, s2), lambda: deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s),
                lambda: torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(a, b, d2, s2, None))

    def hc_split(seed):
        a, b, _, _ = _hc(seed, m=137, k=2048)
        d, s = torch.empty(3, 137, 24, device="cuda"), torch.empty(3, 137, device="cuda")
        d2, s2 = d.clone(), s.clone()
        return ((d, s), (d2, s2), lambda: deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits=3),
                lambda: torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(a, b, d2, s2, 3))

    def fp8(seed):
        a, b, d = _fp8(seed)
        d2 = d.clone()
        return ((d,), (d2,), lambda: deep_gemm.fp8_gemm_nt(a, b, d),
                lambda: torch.ops.deep_gemm.fp8_gemm_nt.default(*a, *b, d2))

    def fp8_mn(seed):
        a, b, d = _fp8(seed)
        a = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
        d2 = d.clone()
        return ((d,), (d2,), lambda: deep_gemm.fp8_gemm_nt(a, b, d),
                lambda: torch.ops.deep_gemm.fp8_gemm_nt.default(*a, *b, d2))

    def masked(seed, vllm=False):
        a, b, d, mm = _masked(seed, vllm=vllm)
        d2 = d.clone()
        return ((d,), (d2,), lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, mm, 32),
                lambda: torch.ops.deep_gemm.m_grouped_fp8_gemm_nt_masked.default(*a, *b, d2, mm, 32))

    def bf16(seed):
        torch.manual_seed(seed)
        x = torch.randn(64, 512, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
        d = torch.zeros(64, 256, device="cuda", dtype=torch.bfloat16)
        d2 = d.clone()
        return ((d,), (d2,), lambda: deep_gemm.bf16_gemm_nt(x, w, d),
                lambda: torch.ops.deep_gemm.bf16_gemm_nt.default(x, w, d2))

    return {"hc": hc, "hc_split": hc_split, "fp8": fp8, "fp8_mn_sfa": fp8_mn, "masked": masked,
            "masked_vllm": lambda seed: masked(seed, vllm=True), "bf16": bf16}


@pytest.mark.parametrize("case", list(_pairs()))
def test_eager_equals_dispatcher_and_follows_new_tensors(case):
    build = _pairs()[case]
    for seed in range(3):  # the 2nd and 3rd calls replay the plan recorded by the 1st for new tensors
        eager_out, op_out, eager, op = build(seed)
        eager()
        op()
        torch.cuda.synchronize()
        for x, y in zip(eager_out, op_out):
            assert torch.equal(x, y), (case, seed)


@pytest.mark.parametrize("case", ["hc", "fp8", "masked"])
def test_eager_calls_in_a_cuda_graph(case):
    eager_out, op_out, eager, op = _pairs()[case](5)
    eager()  # warm: compile and record outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        eager()
    # Both outputs start from the same junk: a masked call leaves rows past masked_m untouched (DeepGEMM's contract).
    for x in (*eager_out, *op_out):
        x.fill_(3.0)
    graph.replay()
    op()
    torch.cuda.synchronize()
    for x, y in zip(eager_out, op_out):
        assert torch.equal(x, y)


def test_eager_threads():
    builds = [_pairs()["hc"](10 + i) for i in range(8)]
    errors = []

    def worker(i):
        try:
            for _ in range(20):
                builds[i][2]()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for eager_out, op_out, _, op in builds:
        op()
        torch.cuda.synchronize()
        for x, y in zip(eager_out, op_out):
            assert torch.equal(x, y)


def test_eager_errors_before_writing():
    a, b, d, s = _hc(0)
    bad = torch.full((13, 32), 7.0, device="cuda")
    with pytest.raises(DeepGEMMError) as via_op:
        torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(a, b, bad, s, None)
    with pytest.raises(DeepGEMMError) as via_eager:
        deep_gemm.tf32_hc_prenorm_gemm(a, b, bad, s)
    assert str(via_op.value) == str(via_eager.value)
    assert bool((bad == 7.0).all()) and bool((s == 7.0).all())


def test_eager_is_taken_on_cuda(monkeypatch):
    kernels = registry.kernels_of("tf32_hc_prenorm_gemm")
    taken = []
    run_cuda = kernels.run_cuda
    monkeypatch.setattr(kernels, "run_cuda", lambda full, token: taken.append(token) or run_cuda(full, token))
    a, b, d, s = _hc(1)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert len(taken) == 1 and taken[0] is not None


def test_repeated_cuda_calls_take_the_metadata_guard(monkeypatch):
    """On CUDA tensors the second call with the same metadata reuses the first's token through its guard
    (``core/guards.py``) without building the signature, and gets the token the dispatcher path's memo gives."""
    kernels = registry.kernels_of("tf32_hc_prenorm_gemm")
    built = []
    slow_token = eager._slow_token

    def counting(kernels_, signature, full, probe):
        built.append(kernels_.name)
        return slow_token(kernels_, signature, full, probe)
    monkeypatch.setattr(eager, "_slow_token", counting)
    taken = []
    run_cuda = kernels.run_cuda
    monkeypatch.setattr(kernels, "run_cuda", lambda full, token: taken.append(token) or run_cuda(full, token))
    first, second = _hc(3), _hc(4)
    deep_gemm.tf32_hc_prenorm_gemm(*first)
    deep_gemm.tf32_hc_prenorm_gemm(*second)
    assert built.count("tf32_hc_prenorm_gemm") <= 1  # (none when an earlier test left this signature's guard)
    assert taken[0] == taken[1] == kernels.checked(kernels.binder((*second, None), {}))


def test_compile_goes_through_the_op():
    a, b, d, s = _hc(2)
    d2, s2 = d.clone(), s.clone()

    @torch.compile(fullgraph=True)
    def step(a, b, d, s):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
        return s * 2

    out = step(a, b, d, s)
    torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(a, b, d2, s2, None)
    torch.cuda.synchronize()
    assert torch.equal(d, d2) and torch.equal(out, s2 * 2)


def _cuda(t):
    return t.cuda() if isinstance(t, torch.Tensor) else t


def _same_logits(eager, op, valid, clean):
    """Bit-equal inside ``valid``; -inf outside in both when the call cleaned (raw calls leave it unwritten)."""
    assert torch.equal(eager[valid], op[valid])
    if clean:
        assert bool((eager[~valid] == float("-inf")).all()) and bool((op[~valid] == float("-inf")).all())


@pytest.mark.parametrize("clean", [False, True])
def test_eager_indexer_equals_dispatcher(clean):
    """The indexer's public functions (prefill, metadata, paged decode) on the eager path: the dispatcher op's logits
    bit for bit, for new tensors at the same metadata (the 2nd seed replays the 1st's plan)."""
    from test_attention_reference_cpu import MqaCase, PagedCase, make_mqa, make_paged
    ops = torch.ops.deep_gemm
    for seed in range(2):
        torch.manual_seed(seed)
        s, sk = 37, 300
        (q, _, kv, kv_sf, w, ks, ke), _ = make_mqa(MqaCase(s, sk, 64, 128))
        col = torch.arange(sk)[None, :]
        valid = ((col >= ks[:, None]) & (col < ke[:, None])).cuda()
        q, kv, kv_sf, w, ks, ke = map(_cuda, (q, kv, kv_sf, w, ks, ke))
        eager = deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), w, ks, ke, clean_logits=clean)
        op = ops.fp8_mqa_logits.default(q, kv, kv_sf, w, ks, ke, clean, 0)
        torch.cuda.synchronize()
        _same_logits(eager, op, valid, clean)

        (q, _, kv_cache, weights, lens, table, _, max_len), _ = make_paged(PagedCase(5, 2, 64, 128))
        valid = (torch.arange(max_len)[None, :] < lens.reshape(-1, 1)).cuda()
        q, kv_cache, weights, lens, table = map(_cuda, (q, kv_cache, weights, lens, table))
        num_sms = deep_gemm.get_num_sms()
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)
        assert torch.equal(meta, ops.get_paged_mqa_logits_metadata.default(lens, 64, num_sms, None))
        eager = deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, meta, max_len, clean_logits=clean)
        op = ops.fp8_paged_mqa_logits.default(q, kv_cache, weights, lens, table, meta, max_len, clean, None)
        torch.cuda.synchronize()
        _same_logits(eager, op, valid, clean)


def test_eager_is_taken_for_the_paged_indexer(monkeypatch):
    from test_attention_reference_cpu import PagedCase, make_paged
    kernels = registry.kernels_of("fp8_paged_mqa_logits")
    taken = []
    run_cuda = kernels.run_cuda
    monkeypatch.setattr(kernels, "run_cuda", lambda full, token: taken.append(token) or run_cuda(full, token))
    (q, _, kv_cache, weights, lens, table, _, max_len), _ = make_paged(PagedCase(3, 1, 32, 64))
    q, kv_cache, weights, lens, table = map(_cuda, (q, kv_cache, weights, lens, table))
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, deep_gemm.get_num_sms())
    deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, lens, table, meta, max_len)
    assert len(taken) == 1 and taken[0] is not None
