"""Client call forms of DeepGEMM 0.2.3's newer names, as SGLang 0.5.23 / vLLM write them (argument forms lifted
from their call sites; the surrounding code is ours): the mega gate wrapper, the shifted mHC step with MXFP8 GEMM
output, the DeepSeek V4 paged sparse indexer, and batch-invariant mode."""

from __future__ import annotations

import torch

import deep_gemm


def test_sglang_mega_gate_form():
    """sglang/kernels/ops/moe/mega_gate.py: keyword call, no shared slots, caller-owned outputs, hashed routing
    through fix_routing_mask + unmapped_topk_idx, invalid rows cleared before the call."""
    g = torch.Generator().manual_seed(0)
    tokens, hidden, experts, top_k = 6, 256, 16, 4
    hidden_states = torch.randn(tokens, hidden, generator=g).bfloat16()
    weight = torch.randn(experts, hidden, generator=g).bfloat16() * 0.1
    valid = torch.tensor([1, 1, 1, 1, 0, 0], dtype=torch.bool)
    hidden_states = torch.where(valid[:, None], hidden_states, 0)
    for hash_ids in (None, torch.randint(0, experts, (tokens, top_k), generator=g)):
        ids = torch.empty((tokens, top_k), dtype=torch.int64)
        weights = torch.empty_like(ids, dtype=torch.float32)
        deep_gemm.bf16_mega_gate(
            hidden_states, weight, top_k, use_shared_as_routed=False, num_shared_experts=0,
            routed_scaling_factor=2.5, ep_rank=0, scoring_func="sqrtsoftplus", mask=valid,
            bias=torch.zeros(experts), image_bias=None, image_token_mask=None,
            fix_routing_mask=torch.ones_like(ids[:, 0], dtype=torch.bool) if hash_ids is not None else None,
            unmapped_topk_idx=hash_ids, out=(ids, weights))
        assert (ids[4:] == -1).all() and (weights[4:] == 0).all()
        assert torch.allclose(weights[:4].sum(1), torch.full((4,), 2.5))
        if hash_ids is not None:
            assert torch.equal(ids[:4], hash_ids[:4])


def test_vllm_shifted_mega_mhc_with_fp8_gemm_output():
    """vLLM's DeepSeek V4 mhc_shifted_post_pre_deep_gemm: keyword call, shifted_prev_mix [T, 4] unsqueezed,
    rmsnorm_scale 1.0, BF16 plus MXFP8 output with a TMA-aligned column-major scale."""
    g = torch.Generator().manual_seed(1)
    t, h, hc = 3, 1024, 4
    x = torch.randn(t, h, generator=g).bfloat16()
    residual = torch.randn(t, hc, h, generator=g).bfloat16()
    shifted_prev_mix = torch.rand(t, hc, generator=g)
    post_mix, comb = torch.rand(t, hc, 1, generator=g), torch.rand(t, hc, hc, generator=g)
    aligned = deep_gemm.get_tma_aligned_size(t, torch.int32.itemsize)
    y_gemm_sf = torch.empty_strided((t, h // 128), (1, aligned), dtype=torch.int32)
    outs = dict(new_residual=torch.empty_like(residual), new_prev_mix=x.new_empty(t, hc, 1, dtype=torch.float32),
                new_post_mix=torch.empty_like(post_mix), new_comb_res_mix=torch.empty_like(comb),
                y_bf16=x.new_empty(t, h, dtype=torch.bfloat16))
    deep_gemm.mega_mhc(
        x=x, residual=residual, shifted_prev_mix=shifted_prev_mix.unsqueeze(-1), post_mix=post_mix,
        comb_res_mix=comb, fn=torch.randn(hc * (hc + 2), hc * h, generator=g) * 0.01, mix_scales=torch.ones(3),
        mix_bases=torch.zeros(hc * (hc + 2)), hc_mult=hc, hc_norm_eps=1e-6, hc_pre_eps=1e-6, hc_post_scale=2.0,
        sinkhorn_eps=1e-6, num_sinkhorn_iters=20, rmsnorm_weight=torch.ones(h).bfloat16(), rmsnorm_eps=1e-6,
        rmsnorm_scale=1.0, **outs, y_fp8=x.new_empty(t, h, dtype=torch.float8_e4m3fn), y_gemm_sf=y_gemm_sf)
    assert torch.allclose(outs["new_comb_res_mix"].sum(1), torch.ones(t, hc), atol=1e-4)  # doubly stochastic
    assert outs["new_prev_mix"].squeeze(-1).shape == (t, hc) and bool(torch.isfinite(outs["y_bf16"].float()).all())


def test_sglang_paged_sparse_indexer_form():
    """The DeepSeek V4 indexer's sparse path: FP4 q [rows, 1, heads, 64] with packed UE8M0 q_sf [rows, 1, heads],
    a fused cache [pages, page_size, 1, 68] whose page stride is a multiple of 512 bytes, candidate blocks of 8."""
    g = torch.Generator().manual_seed(2)
    rows, heads, pages, page_size, topk_blocks, block = 3, 32, 5, 64, 8, 8
    stride = -(-page_size * 68 // 512) * 512
    k_cache = torch.randint(0, 256, (pages * stride,), generator=g, dtype=torch.uint8).as_strided(
        (pages, page_size, 1, 68), (stride, 68, 68, 1))
    seq_lens = torch.tensor([100, 64, 9], dtype=torch.int32)
    page_table = torch.randint(0, pages, (rows, 2), generator=g, dtype=torch.int32)
    blocks = torch.sort(torch.randint(0, 8, (rows, topk_blocks), generator=g, dtype=torch.int32), dim=1).values
    request_ids = torch.arange(rows, dtype=torch.int32)
    schedule = deep_gemm.get_paged_sparse_mqa_logits_metadata(seq_lens.contiguous(), page_table, request_ids,
                                                              page_size, blocks, torch.int8, block)
    q_fp4 = torch.randint(-128, 128, (rows, 1, heads, 64), generator=g, dtype=torch.int8)
    q_sf = torch.full((rows, 1, heads), 0x7F7F7F7F, dtype=torch.int32)
    weights = torch.randn(rows, heads, generator=g).bfloat16()
    logits = deep_gemm.fp8_fp4_paged_sparse_mqa_logits((q_fp4, q_sf), k_cache, weights, schedule, blocks.shape[1],
                                                       block)
    assert logits.shape == (rows, topk_blocks * block) and logits.dtype == torch.bfloat16
    # row 2 has ceil(9 / 8) = 2 selected blocks: the other slots are -inf
    assert torch.isinf(logits[2, 2 * block:].float()).all() and torch.isfinite(logits[2, :2 * block].float()).all()


def test_batch_invariant_mode_toggle():
    """Batch-invariant serving turns DeepGEMM's deterministic mode on around its GEMMs."""
    before = deep_gemm.get_deterministic_algorithms()
    try:
        deep_gemm.use_deterministic_algorithms(True)
        a, b = torch.randn(32, 64).bfloat16(), torch.randn(64, 48).bfloat16()
        out = torch.empty(32, 48, dtype=torch.bfloat16)
        deep_gemm.bf16_gemm_nn(a, b, out)
        rows = torch.empty(5, 48, dtype=torch.bfloat16)
        deep_gemm.bf16_gemm_nn(a[:5].contiguous(), b, rows)
        assert torch.equal(out[:5], rows)  # a row's result does not depend on the batch it came in
    finally:
        deep_gemm.use_deterministic_algorithms(before)
