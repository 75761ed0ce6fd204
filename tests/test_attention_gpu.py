"""The MQA-logits ops (DeepSeek V3.2 indexer) on the GPU: the prefill and paged kernels through the dispatcher
against the float64 oracle, their tiles and levers bit for bit, CUDA-graph capture and replay. Skipped without
CUDA."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import deep_gemm
from deep_gemm.attention import launch as attention_launch
from deep_gemm.attention import plan as attention_plan
from deep_gemm.core.registry import kernels_of
from deep_gemm.testing import assert_bitwise_equal, calc_diff

from test_attention_cpu import FP8, PAGED_REGISTER_VARIANTS, _paged, _prefill, ops
from test_attention_reference_cpu import (NEG_INF, MqaCase, PagedCase, _mqa_flat, _to_cuda,  # noqa: F401 (fixture)
                                          assert_logits_close, make_paged, num_sms_8)

pytestmark = pytest.mark.gpu


# ---- GPU (through the dispatcher) ------------------------------------------------------------------------------

def _gpu_prefill_inputs(s, sk, h, d, causal=True, cp=False, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(s, h, d, device="cuda", generator=g).to(FP8)
    kv = torch.randn(sk, d, device="cuda", generator=g)
    kv_sf = kv.abs().amax(dim=1).clamp(min=1e-4) / 448.0
    kv_fp8 = (kv / kv_sf[:, None]).to(FP8)
    w = torch.randn(s, h, device="cuda", generator=g)
    if cp:  # DeepGEMM's context-parallel windows: two chunks of queries, each causal within its part of KV
        half, parts = s // 2, sk // s
        i = torch.arange(half, device="cuda")
        ks = torch.zeros(s, dtype=torch.int32, device="cuda")
        ke = torch.cat([(parts // 3) * half + i, (parts * 2 - 1 - parts // 3) * half + i]).int()
    elif causal:
        ks = torch.zeros(s, dtype=torch.int32, device="cuda")
        ke = (torch.arange(s, device="cuda") + (sk - s) + 1).int()
    else:
        ks = torch.randint(0, sk, (s,), device="cuda", generator=g).int()
        ke = (ks + torch.randint(0, sk, (s,), device="cuda", generator=g)).clamp(max=sk).int()
    return q, (kv_fp8, kv_sf), w, ks, ke


def _reference_prefill(q, kv, w, ks, ke, clean, max_k, dtype):
    return kernels_of("fp8_fp4_mqa_logits").reference(q, None, kv[0], kv[1], w, ks, ke, clean, max_k, dtype)


GPU_PREFILL_CASES = [  # (windows, H, D, logits dtype)
    ("causal", 64, 128, torch.float32), ("cp", 64, 128, torch.float32), ("ragged", 64, 128, torch.float32),
    ("causal", 64, 128, torch.bfloat16), ("cp", 32, 128, torch.bfloat16), ("causal", 32, 64, torch.float32),
    ("ragged", 64, 64, torch.bfloat16), ("causal", 32, 32, torch.float32), ("cp", 64, 32, torch.float32),
    ("ragged", 16, 64, torch.float32), ("causal", 8, 128, torch.float32),
]


@pytest.mark.parametrize("windows,h,d,dtype", GPU_PREFILL_CASES,
                         ids=[f"{w}-h{h}-d{d}-{str(t)[6:]}" for w, h, d, t in GPU_PREFILL_CASES])
def test_gpu_prefill_matches_reference(windows, h, d, dtype):
    s, sk = 512, 4096
    q, kv, w, ks, ke = _gpu_prefill_inputs(s, sk, h, d, causal=windows == "causal", cp=windows == "cp")
    out = deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, clean_logits=True, logits_dtype=dtype)
    want = _reference_prefill(q, kv, w, ks, ke, True, 0, dtype)
    assert torch.equal(out == NEG_INF, want == NEG_INF), "-inf placement"
    valid = want != NEG_INF
    assert calc_diff(out[valid].double(), want[valid].double()) < (2e-5 if dtype == torch.bfloat16 else 1e-6)
    # Compressed: out[i, t] = logits[i, ks + t].
    max_k = int((ke - ks).max())
    comp = deep_gemm.fp8_fp4_mqa_logits((q, None), kv, w, ks, ke, clean_logits=False, max_seqlen_k=max_k,
                                        logits_dtype=dtype)
    want_c = _reference_prefill(q, kv, w, ks, ke, False, max_k, dtype)
    inside = torch.arange(max_k, device="cuda")[None, :] < (ke - ks)[:, None]
    assert calc_diff(comp[inside].double(), want_c[inside].double()) < (2e-5 if dtype == torch.bfloat16 else 1e-6)


@pytest.mark.parametrize("s,sk,h,d,kind,dtype,max_k", [
    (2048, 8192, 64, 128, "causal", torch.float32, 0), (512, 4096, 64, 128, "cp", torch.float32, 0),
    (300, 5000, 64, 128, "ragged", torch.float32, 0), (129, 4099, 32, 128, "causal", torch.bfloat16, 0),
    (257, 3000, 64, 128, "causal", torch.float32, 3000)],
    ids=["causal-2k8k", "cp", "ragged", "h32-bf16", "compressed"])
def test_gpu_prefill_lean_interior_gives_the_same_bits(s, sk, h, d, kind, dtype, max_k):
    # The lean interior loop (the default at H >= 32) against the loop before it, compiled for the GPU (inline PTX
    # loads of the key scales): every written bit equal.
    q, kv, w, ks, ke = _ws_inputs(s, sk, h, d, kind)
    new = attention_plan.prefill_config(h, d, False)
    old = dataclasses.replace(new, lean_interior=False)
    got = _prefill_with(new, q, kv, w, ks, ke, max_k == 0, max_k, dtype)
    want = _prefill_with(old, q, kv, w, ks, ke, max_k == 0, max_k, dtype)
    if max_k:
        key = ks.long()[:, None] + torch.arange(max_k, device="cuda")[None, :]
        written = (key >= ks.clamp(min=0).long()[:, None]) & (key < ke.clamp(max=sk).long()[:, None])
        got, want = got[written], want[written]
    assert_bitwise_equal(got, want, "lean interior")


def test_gpu_prefill_64k_context_and_20_bitwise_reruns():
    q, kv, w, ks, ke = _gpu_prefill_inputs(256, 65536, 64, 128)
    out = deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=True)
    want = _reference_prefill(q, kv, w, ks, ke, True, 0, torch.float32)
    assert torch.equal(out == NEG_INF, want == NEG_INF)
    valid = want != NEG_INF
    assert calc_diff(out[valid].double(), want[valid].double()) < 1e-6
    for _ in range(20):
        assert_bitwise_equal(deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=True), out, "re-run")


# ---- prefill inputs (GPU) ----------------------------------------------------------------------------------------

def _ws_windows(s, sk, kind, g):
    """Windows of one kind; "ragged" mixes empty, inverted, negative-start and past-SK windows in with random ones."""
    i = torch.arange(s, device="cuda")
    if kind == "causal":
        return torch.zeros(s, dtype=torch.int32, device="cuda"), (i + (sk - s) + 1).clamp(min=0).int()
    if kind == "cp":
        half, parts = s // 2, sk // s
        ke = torch.cat([(parts // 3) * half + i[:half], (parts * 2 - 1 - parts // 3) * half + i[:s - half]]).int()
        return torch.zeros(s, dtype=torch.int32, device="cuda"), ke
    ks = torch.randint(-70, sk, (s,), device="cuda", generator=g)
    ke = ks + torch.randint(-5, sk, (s,), device="cuda", generator=g)
    ke = torch.where(i % 7 == 3, ks, ke)  # empty
    ke = torch.where(i % 11 == 5, ke + sk, ke)  # past SK
    return ks.int(), ke.int()


def _ws_inputs(s, sk, h, d, kind, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(s, h, d, device="cuda", generator=g).to(FP8)
    kv = torch.randn(sk, d, device="cuda", generator=g)
    kv_sf = kv.abs().amax(dim=1).clamp(min=1e-4) / 448.0
    w = torch.randn(s, h, device="cuda", generator=g)
    ks, ke = _ws_windows(s, sk, kind, g)
    return q, ((kv / kv_sf[:, None]).to(FP8), kv_sf), w, ks, ke


def _prefill_with(cfg, q, kv, w, ks, ke, clean, max_k, dtype):
    return attention_launch.fp8_fp4_mqa_logits_triton(q, None, kv[0], kv[1], w, ks, ke, clean, max_k, dtype,
                                                   overrides=_prefill(cfg))


def _gpu_paged_inputs(batch, next_n, h, d, avg_ctx, seed=0, one_dim=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    block_kv = 64
    lens = torch.randint(int(0.7 * avg_ctx), int(1.3 * avg_ctx), (batch,), device="cuda", generator=g).int()
    pages = (lens + block_kv - 1) // block_kv
    max_pages = int(pages.max())
    total = int(pages.sum())
    pool = torch.randperm(total, device="cuda", generator=g).int()
    table = torch.zeros(batch, max_pages, dtype=torch.int32, device="cuda")
    starts = torch.cumsum(pages, 0) - pages
    cols = torch.arange(max_pages, device="cuda")[None, :]
    table = torch.where(cols < pages[:, None], pool[(starts[:, None] + cols).clamp(max=total - 1)], 0).int()
    values = torch.randn(total, block_kv, d, device="cuda", generator=g)
    sf = values.abs().amax(dim=2).clamp(min=1e-4) / 448.0
    cache = torch.empty(total, block_kv * (d + 4), dtype=torch.uint8, device="cuda")
    cache[:, :block_kv * d] = (values / sf[..., None]).to(FP8).view(torch.uint8).view(total, -1)
    cache[:, block_kv * d:] = sf.view(torch.uint8).view(total, -1)
    cache = cache.view(total, block_kv, 1, d + 4)
    q = torch.randn(batch, next_n, h, d, device="cuda", generator=g).to(FP8)
    w = torch.randn(batch * next_n, h, device="cuda", generator=g)
    if one_dim:
        context_lens = lens
    else:
        frac = torch.rand(batch, next_n, device="cuda", generator=g)
        context_lens = ((lens[:, None] + 1) * frac).int()
        context_lens[:, -1] = lens
        context_lens = context_lens.contiguous()
    return q, cache, w, context_lens, table, max_pages * block_kv


@pytest.mark.parametrize("one_dim", [False, True], ids=["2d", "1d"])
@pytest.mark.parametrize("batch,next_n,h,avg", [(64, 1, 64, 4096), (32, 2, 64, 8192), (16, 2, 32, 2048),
                                                (8, 1, 32, 65536), (5, 3, 16, 1000)])
def test_gpu_paged_matches_reference(batch, next_n, h, avg, one_dim):
    q, cache, w, lens, table, max_len = _gpu_paged_inputs(batch, next_n, h, 128, avg, one_dim=one_dim)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, deep_gemm.get_num_sms())
    ref_meta = kernels_of("get_paged_mqa_logits_metadata").reference(lens, 64, deep_gemm.get_num_sms(), None)
    assert torch.equal(meta, ref_meta)
    for clean in (True, False):
        out = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, clean_logits=clean)
        want = kernels_of("fp8_paged_mqa_logits").reference(q, cache, w, lens, table, meta, max_len, True, None)
        valid = want != NEG_INF
        if clean:
            assert torch.equal(out == NEG_INF, ~valid)
        assert calc_diff(out[valid].double(), want[valid].double()) < 1e-6
    first = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, clean_logits=True)
    for _ in range(20):
        again = deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, clean_logits=True)
        assert_bitwise_equal(again, first, "re-run")


@pytest.mark.parametrize("batch,next_n,h,avg", [(256, 2, 64, 8192), (64, 1, 64, 4096), (33, 2, 32, 3000),
                                                (7, 4, 64, 20000)])
def test_gpu_paged_persistent_and_grid_kernels_agree(batch, next_n, h, avg):
    """The persistent kernel (default) and the grid kernel (PAGED_GRID_CONFIG) at decode sizes: same -inf placement
    with clean_logits, values within the FP8 accumulation bound (the key scale is applied at a different point), and
    the persistent kernel with 1 lane per schedule entry bitwise equal to the default."""
    q, cache, w, lens, table, max_len = _gpu_paged_inputs(batch, next_n, h, 128, avg)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, deep_gemm.get_num_sms())
    launcher = kernels_of("fp8_paged_mqa_logits").triton
    args = (q, cache, w, lens, table, meta, max_len, True, None)
    default = launcher(*args)
    grid = launcher(*args, overrides=_paged(attention_plan.PAGED_GRID_CONFIG))
    default_cfg = attention_plan.paged_default_config(next_n, h, 128, 64, False)  # the same stages, 1 lane
    one_lane = launcher(*args, overrides=_paged(dataclasses.replace(default_cfg, programs_per_sm=1)))
    valid = grid != NEG_INF
    assert torch.equal(default == NEG_INF, ~valid)
    assert calc_diff(default[valid].double(), grid[valid].double()) < 1e-6
    assert_bitwise_equal(one_lane, default, "lanes")


@pytest.mark.parametrize("variant", PAGED_REGISTER_VARIANTS + [
    attention_plan.PagedConfig(num_stages=7, aligned_q_loads=True, max_registers=128),
    attention_plan.PagedConfig(num_warps=8, num_stages=10, aligned_q_loads=True)], ids=str)
@pytest.mark.parametrize("batch,next_n,h,avg", [(256, 2, 64, 8192), (33, 2, 32, 3000), (7, 3, 64, 20000)])
def test_gpu_paged_register_variants_agree(batch, next_n, h, avg, variant):
    """The register levers of PagedConfig at decode sizes: the default's -inf placement with clean_logits, its values
    up to the order of the head sums, and bitwise repeatable."""
    q, cache, w, lens, table, max_len = _gpu_paged_inputs(batch, next_n, h, 128, avg)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, deep_gemm.get_num_sms())
    launcher = kernels_of("fp8_paged_mqa_logits").triton
    args = (q, cache, w, lens, table, meta, max_len, True, None)
    default = launcher(*args)
    out = launcher(*args, overrides=_paged(variant))
    valid = default != NEG_INF
    assert torch.equal(out == NEG_INF, ~valid)
    assert calc_diff(out[valid].double(), default[valid].double()) < 1e-9
    assert_bitwise_equal(launcher(*args, overrides=_paged(variant)), out, "re-run")


# Paged shapes of the loop-lever bit tests: the row pair (the levers' target), odd batches and lengths, three rows
# (a row pair and a single row), one row, H = 32.
PAGED_LEVER_SHAPES = [(256, 2, 64, 8192), (33, 2, 64, 3000), (7, 3, 64, 20000), (64, 1, 64, 4096), (16, 2, 32, 2048)]


def _assert_paged_configs_give_the_same_bits(batch, next_n, h, avg, base, variant):
    """Configs ``base`` and ``variant`` of the paged launcher (functions of the shape's default config): every bit of
    the clean output equal, and of the raw output wherever the clean one is not -inf."""
    q, cache, w, lens, table, max_len = _gpu_paged_inputs(batch, next_n, h, 128, avg)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, deep_gemm.get_num_sms())
    launcher = kernels_of("fp8_paged_mqa_logits").triton
    default = attention_plan.paged_default_config(next_n, h, 128, 64, False)
    base, variant = base(default), variant(default)
    args = (q, cache, w, lens, table, meta, max_len, True, None)
    want = launcher(*args, overrides=_paged(base))
    assert_bitwise_equal(launcher(*args, overrides=_paged(variant)), want, "clean")
    valid = want != NEG_INF
    raw = [launcher(*args[:-2], False, None, overrides=_paged(cfg)) for cfg in (base, variant)]
    assert_bitwise_equal(raw[1][valid], raw[0][valid], "raw")


@pytest.mark.parametrize("batch,next_n,h,avg", PAGED_LEVER_SHAPES)
def test_gpu_paged_lean_page_loop_gives_the_same_bits(batch, next_n, h, avg):
    """The lean page loop (the row-pair default) against the plain loop with the same tile, clean and
    raw: the same wgmma, head reduction, scale and store, so every output bit is equal."""
    _assert_paged_configs_give_the_same_bits(batch, next_n, h, avg,
                                             lambda cfg: dataclasses.replace(cfg, lean_page_loop=False),
                                             lambda cfg: dataclasses.replace(cfg, lean_page_loop=True))


@pytest.mark.parametrize("batch,next_n,h,avg", PAGED_LEVER_SHAPES)
def test_gpu_paged_register_page_scales_give_the_same_bits(batch, next_n, h, avg):
    """Page scales in registers one page ahead (PagedConfig.register_page_scales, the row-pair default) against the
    scales through the shared ring, clean and raw: the same products in the same order, so
    every output bit is equal."""
    _assert_paged_configs_give_the_same_bits(batch, next_n, h, avg,
                                             lambda cfg: dataclasses.replace(cfg, register_page_scales=False),
                                             lambda cfg: dataclasses.replace(cfg, register_page_scales=True))


def test_gpu_paged_decode_step_in_a_cuda_graph():
    q, cache, w, lens, table, max_len = _gpu_paged_inputs(32, 2, 64, 128, 4096)
    num_sms = deep_gemm.get_num_sms()

    def step():
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)
        return deep_gemm.fp8_paged_mqa_logits(q, cache, w, lens, table, meta, max_len, clean_logits=True)

    eager = step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    new_lens = (lens // 2).contiguous()
    lens.copy_(new_lens)
    graph.replay()
    torch.cuda.synchronize()
    assert_bitwise_equal(captured, step(), "graph replay with new context lengths")
    assert not torch.equal(captured == NEG_INF, eager == NEG_INF)


def test_gpu_compile_fullgraph():
    q, kv, w, ks, ke = _gpu_prefill_inputs(128, 1024, 64, 128)
    pq, cache, pw, lens, table, max_len = _gpu_paged_inputs(8, 2, 64, 128, 1024)
    num_sms = deep_gemm.get_num_sms()

    def fn(q, kv0, kv1, w, ks, ke, pq, cache, pw, lens, table):
        prefill = deep_gemm.fp8_mqa_logits(q, (kv0, kv1), w, ks, ke, clean_logits=True)
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)
        return prefill, deep_gemm.fp8_paged_mqa_logits(pq, cache, pw, lens, table, meta, max_len, clean_logits=True)

    args = (q, kv[0], kv[1], w, ks, ke, pq, cache, pw, lens, table)
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")  # the ops trace as opaque nodes
    for a, b in zip(compiled(*args), fn(*args)):
        assert_bitwise_equal(a, b, "compiled")


def test_gpu_clean_pass_writes_only_outside_windows():
    s, sk = 300, 5000
    q, kv, w, ks, ke = _gpu_prefill_inputs(s, sk, 32, 64, causal=False)
    out = deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=False)
    before = out.clone()
    attention_launch.clean_rows(out, ks, ke, sk)
    cols = torch.arange(sk, device="cuda")[None, :]
    inside = (cols >= ks[:, None]) & (cols < ke[:, None])
    assert torch.equal(out[inside], before[inside])
    assert (out[~inside] == NEG_INF).all()


def test_cuda_reference_matches_cpu_without_host_sync(num_sms_8):
    """The CUDA kernels (Triton where registered) run without a single host sync and agree with the CPU kernels.
    The tolerance is the kernels' (tests/test_attention_cpu.py): FP8 products summed by the tensor cores in another
    order than the CPU reference's FP32 matmul."""
    # (op, args, cleaned): only a cleaning call defines the entries outside the windows (-inf); without
    # clean_logits the kernels leave them as they are (the CPU reference happens to write -inf there).
    calls = [
        (ops.fp8_fp4_mqa_logits.default, _mqa_flat(MqaCase(16, 129, 64, 128), True, 0, torch.float32), True),
        (ops.fp8_fp4_mqa_logits.default, _mqa_flat(MqaCase(9, 130, 32, 128, fp4=True), False, 70, torch.bfloat16),
         False),
        (ops.get_paged_mqa_logits_metadata.default, (make_paged(PagedCase(4, 2, 32, 64))[0][4], 64, 8, None), True),
        (ops.fp8_fp4_paged_mqa_logits.default, make_paged(PagedCase(3, 2, 64, 128))[0] + (True, torch.float32, None),
         True),
        (ops.fp8_fp4_paged_mqa_logits.default,
         make_paged(PagedCase(2, 1, 32, 64, fp4=True, page_pad=16))[0] + (True, torch.bfloat16, None), True),
    ]
    for op, args, cleaned in calls:
        expected = op(*args)
        cuda_args = _to_cuda(args)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = op(*cuda_args)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert out.is_cuda and out.shape == expected.shape and out.stride() == expected.stride()
        out = out.cpu()
        if out.dtype == torch.int32:
            assert torch.equal(out, expected)
        else:
            valid = expected != NEG_INF
            assert_logits_close(out, expected.double(), valid, check_mask=cleaned,
                                tolerance=1e-6 if out.dtype == torch.float32 else 2e-5)


def test_cuda_graph_capture_and_replay(num_sms_8):
    mqa = _to_cuda(_mqa_flat(MqaCase(16, 129, 64, 128), True, 0, torch.float32))
    paged = _to_cuda(make_paged(PagedCase(3, 2, 64, 128))[0] + (True, torch.float32, None))
    eager = (ops.fp8_fp4_mqa_logits(*mqa), ops.get_paged_mqa_logits_metadata(paged[4], 64, 8, None),
             ops.fp8_fp4_paged_mqa_logits(*paged))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = (ops.fp8_fp4_mqa_logits(*mqa), ops.get_paged_mqa_logits_metadata(paged[4], 64, 8, None),
                    ops.fp8_fp4_paged_mqa_logits(*paged))
    graph.replay()
    torch.cuda.synchronize()
    for want, got in zip(eager, captured):
        assert_bitwise_equal(got, want, "graph replay")
