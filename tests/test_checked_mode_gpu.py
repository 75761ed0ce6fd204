"""The checked mode on CUDA tensors: with ``set_checks("data")`` every bad index tensor raises the same
DeepGEMMError as on the CPU before anything is launched (the output stays bit-identical), valid data gives the
same bits as the unchecked path, and a CUDA-graph capture is refused instead of synced inside."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from fp8_inputs import contiguous_grouped_inputs, k_grouped_inputs
from test_attention_reference_cpu import MqaCase, PagedCase, make_mqa, make_paged
from test_data_checks import _untouched  # (torch.equal on CUDA tensors waits for the stream)

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

BF16 = torch.bfloat16


@pytest.fixture
def checked():
    deep_gemm.set_checks("data")
    yield
    deep_gemm.set_checks("off")


def _cuda(*tensors):
    return [t.cuda() if isinstance(t, torch.Tensor) else t for t in tensors]


def _bf16_contiguous(num_groups=3, m=256, n=128, k=64):
    a, b = torch.randn(m, k).to(BF16), torch.randn(num_groups, n, k).to(BF16)
    ids = torch.arange(m, dtype=torch.int32) // 128 % num_groups  # whole 128-row blocks per expert
    return _cuda(a, b, torch.randn(m, n).to(BF16), ids)


@pytest.mark.parametrize("bad, index", [(3, 5), (-2, 0), (100, 255)])
def test_bf16_expert_ids(checked, bad, index):
    a, b, d, ids = _bf16_contiguous()
    ids[index] = bad
    _untouched(d, lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, ids),
               rf"grouped_layout: expected expert ids in \[-1, 3\) .*got grouped_layout\[{index}\] = {bad}")


def test_fp8_expert_ids(checked):
    (a, sfa), (b, sfb), ids, _ = contiguous_grouped_inputs([5, 70], 128, 128)
    a, sfa, b, sfb, ids = _cuda(a, sfa, b, sfb, ids)
    d = torch.randn(a.size(0), 128, device="cuda").to(BF16)
    ids[130] = 2
    _untouched(d, lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, ids),
               r"grouped_layout\[130\] = 2")


@pytest.mark.parametrize("ends, match", [
    ([40, 30, 256], r"grouped_layout\[1\] = 30 < grouped_layout\[0\] = 40"),
    ([40, 60, 257], r"at most M = 256 .*grouped_layout\[2\] = 257"),
])
def test_psum_ends(checked, ends, match):
    a, b, d, _ = _bf16_contiguous()
    layout = torch.tensor(ends, dtype=torch.int32, device="cuda")
    _untouched(d, lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=True),
               match)


@pytest.mark.parametrize("masked, index, value", [([3, 9, 2], 1, 9), ([3, -1, 2], 1, -1)])
def test_masked_m(checked, masked, index, value):
    g, max_m, n, k = 3, 8, 128, 64
    a, b, d = _cuda(torch.randn(g, max_m, k).to(BF16), torch.randn(g, n, k).to(BF16),
                    torch.randn(g, max_m, n).to(BF16))
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    _untouched(d, lambda: deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 4),
               rf"masked_m: expected valid row counts in \[0, 8\] .*got masked_m\[{index}\] = {value}")


def test_k_grouped_ks(checked):
    ks = [128, 256]
    (a, sfa), (b, sfb), _, _ = k_grouped_inputs("tn", ks, 128, 128)
    a, sfa, b, sfb = _cuda(a, sfa, b, sfb)
    d = torch.randn(2, 128, 128, device="cuda")
    wrong = torch.tensor([256, 128], dtype=torch.int32, device="cuda")
    _untouched(d, lambda: deep_gemm.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, ks, wrong),
               r"grouped_layout\[0\] = 256 where ks_cpu\[0\] = 128")


def test_mqa_window_past_sk(checked):
    (q, _, kv, kv_sf, weights, starts, ends), _ = make_mqa(MqaCase(4, 50, 32, 32))
    ends[2] = 51
    q, kv, kv_sf, weights, starts, ends = _cuda(q, kv, kv_sf, weights, starts, ends)
    with pytest.raises(DeepGEMMError, match=r"cu_seq_len_k_end\[2\] = 51"):
        deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), weights, starts, ends)


def _paged_cuda():
    (q, _, kv_cache, weights, context_lens, block_table, _, max_len), _ = make_paged(PagedCase(3, 2, 32, 64))
    q, kv_cache, weights, context_lens, block_table = _cuda(q, kv_cache, weights, context_lens, block_table)
    meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, kv_cache.size(1), deep_gemm.get_num_sms())
    return q, kv_cache, weights, context_lens, block_table, meta, max_len


def test_paged_page_id_outside_cache(checked):
    q, kv_cache, weights, context_lens, block_table, meta, max_len = _paged_cuda()
    block_table[1, 0] = kv_cache.size(0)
    with pytest.raises(DeepGEMMError, match=rf"block_table\[1, 0\] = {kv_cache.size(0)}"):
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens, block_table, meta, max_len)


def test_paged_context_len_over_max(checked):
    q, kv_cache, weights, context_lens, block_table, meta, _ = _paged_cuda()
    with pytest.raises(DeepGEMMError, match=r"context_lens: expected lengths at most max_context_len = 100"):
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens.clamp(min=101),
                                           block_table, meta, 100)


def test_valid_data_gives_the_unchecked_bits():
    a, b, d_off, ids = _bf16_contiguous()
    ids[:64] = -1
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d_off, ids)
    d_on = torch.empty_like(d_off)
    deep_gemm.set_checks("data")
    try:
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d_on, ids)
        paged = _paged_cuda()
        # (clean_logits: the columns past each row's length are -inf in both calls, not left unwritten)
        on = deep_gemm.fp8_fp4_paged_mqa_logits((paged[0], None), *paged[1:], clean_logits=True)
    finally:
        deep_gemm.set_checks("off")
    off = deep_gemm.fp8_fp4_paged_mqa_logits((paged[0], None), *paged[1:], clean_logits=True)
    assert torch.equal(d_on[64:], d_off[64:])
    assert torch.equal(on.nan_to_num(), off.nan_to_num())


def test_capture_is_refused():
    a, b, d, ids = _bf16_contiguous()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, ids)  # compiled and warm before capturing
        with pytest.raises(DeepGEMMError, match="CUDA-graph capture"):
            with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=stream):
                deep_gemm.set_checks("data")
        assert deep_gemm.get_checks() == "off"
        deep_gemm.set_checks("data")
        try:
            with pytest.raises(DeepGEMMError, match="checked mode .* CUDA-graph"):
                with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=stream):
                    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, ids)
        finally:
            deep_gemm.set_checks("off")
    torch.cuda.synchronize()
    # The unchecked path still captures and replays.
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, ids)
    graph.replay()
    torch.cuda.synchronize()


def test_mega_moe_routing_ids(checked):
    from deep_gemm.testing.mega_moe import routing, sm90_weights
    l1, l2 = deep_gemm.transform_weights_for_mega_moe_sm90(*sm90_weights(8, 256, 128, "cuda"))
    x, idx, w = routing(10, 8, 2, "cuda", hidden=256)
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 10, 2, 256, 128, device="cuda")
    deep_gemm.mega_moe_pre_dispatch_sm90(x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, num_tokens=10)
    buf.topk_idx[7, 1] = 8
    y = torch.zeros(10, 256, dtype=BF16, device="cuda")
    _untouched(y, lambda: deep_gemm.fp8_mega_moe(y, l1, l2, buf), r"sym_buffer.topk_idx: .*topk_idx\[7, 1\] = 8")
