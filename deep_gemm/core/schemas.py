"""THE schema table: every operator in the ``deep_gemm`` namespace, grouped by family.

These strings are the contract with torch.compile, torch.export, CUDA graphs and C++ callers
(``c10::Dispatcher::singleton().findSchemaOrThrow("deep_gemm::<op>", "")`` returns them verbatim; a test checks
that). Conventions:

* ``(data, scale)`` pairs of the legacy API are flattened to ``x, sfx``; tuples become ``int[]``.
* Outputs are caller-allocated and annotated with an alias set named after the argument (``Tensor(d!) d``); ops that
  only write return ``()``. Ops that return tensors always return fresh storage, never a view of an input.
* Defaults equal the legacy Python API's. ``ScalarType`` defaults are written as their enum number because the schema
  printer prints them that way (6 = torch.float32); writing ``float`` would not round-trip.
* ``c`` (the accumulator) may be the same tensor as ``d``; the result is defined by value, ``D = C + A @ B.T``, so the
  aliased and the functionalised (cloned) call agree.

Each entry is ``(schema, why)``. ``ALIASES`` lists extra dispatcher names that share a canonical op's schema and
kernels (DeepGEMM binds the same function under both names).
"""

from __future__ import annotations

_FP8_GEMM_TAIL = (
    "Tensor? c=None, int[]? recipe=None, int[]? recipe_a=None, int[]? recipe_b=None, "
    'str compiled_dims="{dims}", bool disable_ue8m0_cast=False, float? alpha=None) -> ()'
)
_FP8_OPERANDS = "Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(d!) d"
_FP8_RECIPES = "int[]? recipe=None, int[]? recipe_a=None, int[]? recipe_b=None"


def _fp8_dense(layout: str, dims: str) -> str:
    return f"fp8_gemm_{layout}({_FP8_OPERANDS}, " + _FP8_GEMM_TAIL.format(dims=dims)


# family -> list of (schema, why)
SCHEMA_TABLE: dict[str, list[tuple[str, str]]] = {
    "fp8_gemm": [
        (_fp8_dense("nt", ""), "D = C + alpha * (A*sfa) @ (B*sfb).T; A [M,K], B [N,K]"),
        (_fp8_dense("nn", ""), "B given as [K,N] (and sfb transposed with it)"),
        (_fp8_dense("tn", ""), "A given as [K,M], B as [K,N]"),
        (_fp8_dense("tt", ""), "A given as [K,M]"),
        (f"fp8_gemm_nt_skip_head_mid({_FP8_OPERANDS}, int[] head_splits, int[]? recipe=None, "
         'str compiled_dims="nk", bool disable_ue8m0_cast=False) -> ()',
         "NT GEMM whose output columns skip `mid` columns between each head's left and right parts"),
        (f"m_grouped_fp8_gemm_nt_contiguous({_FP8_OPERANDS}, Tensor grouped_layout, {_FP8_RECIPES}, "
         'str compiled_dims="nk", bool disable_ue8m0_cast=False, bool use_psum_layout=False, '
         "bool ensure_zero_padding=True, int? expected_m_for_psum_layout=None) -> ()",
         "MoE forward: rows sorted by expert; grouped_layout = expert id per row (-1 padding) or psum end offsets"),
        (f"m_grouped_fp8_gemm_nn_contiguous({_FP8_OPERANDS}, Tensor grouped_layout, {_FP8_RECIPES}, "
         'str compiled_dims="nk", bool disable_ue8m0_cast=False, bool use_psum_layout=False, '
         "bool ensure_zero_padding=True) -> ()",
         "as nt_contiguous with B given as [G,K,N]"),
        (f"m_grouped_fp8_gemm_nt_masked({_FP8_OPERANDS}, Tensor masked_m, int expected_m, {_FP8_RECIPES}, "
         'str compiled_dims="nk", bool disable_ue8m0_cast=False) -> ()',
         "MoE decode: A [G,Mmax,K]; only rows < masked_m[g] are computed (no host sync: CUDA-graph safe)"),
        (f"k_grouped_fp8_gemm_nt_contiguous({_FP8_OPERANDS}, int[]? ks_cpu, Tensor grouped_layout, "
         'Tensor? c=None, int[] recipe=[1, 1, 128], str compiled_dims="mn", bool use_psum_layout=False, '
         "bool use_padded_sf_layout=False) -> ()",
         "MoE weight gradient: D[g] = C[g] + A_g @ B_g.T with per-group K, A_g a [M,K_g] block"),
        (f"k_grouped_fp8_gemm_tn_contiguous({_FP8_OPERANDS}, int[]? ks_cpu, Tensor grouped_layout, "
         'Tensor? c=None, int[] recipe=[1, 1, 128], str compiled_dims="mn", bool use_psum_layout=False, '
         "bool use_padded_sf_layout=False) -> ()",
         "MoE weight gradient, MN-major operands: D[g] = C[g] + A_g.T @ B_g with A [sum K, M], B [sum K, N]"),
    ],
    "bf16_gemm": [
        ('bf16_gemm_nt(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None, str compiled_dims="", '
         "float? alpha=None) -> ()", "D = C + alpha * A @ B.T, BF16 operands, FP32 accumulation"),
        ('bf16_gemm_nn(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None, str compiled_dims="", '
         "float? alpha=None) -> ()", "B [K,N]"),
        ('bf16_gemm_tn(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None, str compiled_dims="", '
         "float? alpha=None) -> ()", "A [K,M], B [K,N]"),
        ('bf16_gemm_tt(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None, str compiled_dims="", '
         "float? alpha=None) -> ()", "A [K,M]"),
        ('m_grouped_bf16_gemm_nt_contiguous(Tensor a, Tensor b, Tensor(d!) d, Tensor grouped_layout, '
         'str compiled_dims="nk", bool use_psum_layout=False, bool ensure_zero_padding=True, '
         "int? expected_m_for_psum_layout=None) -> ()", "BF16 MoE forward, contiguous layout"),
        ('m_grouped_bf16_gemm_nn_contiguous(Tensor a, Tensor b, Tensor(d!) d, Tensor grouped_layout, '
         'str compiled_dims="nk", bool use_psum_layout=False, bool ensure_zero_padding=True) -> ()',
         "BF16 MoE forward, B [G,K,N]"),
        ('m_grouped_bf16_gemm_nt_masked(Tensor a, Tensor b, Tensor(d!) d, Tensor masked_m, int expected_m, '
         'str compiled_dims="nk") -> ()', "BF16 MoE decode, masked layout"),
        ('k_grouped_bf16_gemm_tn_contiguous(Tensor a, Tensor b, Tensor(d!) d, int[]? ks_cpu, '
         'Tensor grouped_layout, Tensor? c=None, str compiled_dims="mn", bool use_psum_layout=False) -> ()',
         "BF16 MoE weight gradient"),
        ("cublaslt_gemm_nt(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None) -> ()",
         "D = C + A @ B.T through the vendor BLAS (torch matmul)"),
        ("cublaslt_gemm_nn(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None) -> ()", "B [K,N]"),
        ("cublaslt_gemm_tn(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None) -> ()", "A [K,M], B [K,N]"),
        ("cublaslt_gemm_tt(Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None) -> ()", "A [K,M]"),
    ],
    "einsum": [
        ("einsum(str expr, Tensor a, Tensor b, Tensor(d!) d, Tensor? c=None, bool use_cublaslt=False) -> ()",
         "BF16 einsum for 'bmk,bnk->mn', 'bhr,hdr->bhd', 'bhd,hdr->bhr'"),
        ("fp8_einsum(str expr, Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(d!) d, Tensor? c=None, "
         "int[] recipe=[1, 128, 128]) -> ()", "FP8 block-scaled einsum"),
    ],
    "attention": [
        ("fp8_fp4_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv, Tensor kv_sf, Tensor weights, "
         "Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, bool clean_logits=False, int max_seqlen_k=0, "
         "ScalarType logits_dtype=6, Tensor? schedule_meta=None) -> Tensor",
         "DeepSeek V3.2 indexer logits; returns a [S,SK] view of a padded buffer (1 KiB-aligned rows)"),
        ("fp8_mqa_logits(Tensor q, Tensor kv, Tensor kv_sf, Tensor weights, Tensor cu_seq_len_k_start, "
         "Tensor cu_seq_len_k_end, bool clean_logits=False, int max_seqlen_k=0) -> Tensor",
         "legacy name: FP8 q without scale, FP32 logits"),
        ("get_paged_mqa_logits_metadata(Tensor context_lens, int block_kv, int num_sms, Tensor? indices=None) "
         "-> Tensor", "per-SM work split for the paged indexer: int32 [num_sms+1, 2]"),
        ("fp8_fp4_paged_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv_cache, Tensor weights, Tensor context_lens, "
         "Tensor block_table, Tensor schedule_meta, int max_context_len, bool clean_logits=False, "
         "ScalarType logits_dtype=6, Tensor? indices=None) -> Tensor",
         "paged decode indexer logits over a block table"),
        ("fp8_paged_mqa_logits(Tensor q, Tensor kv_cache, Tensor weights, Tensor context_lens, "
         "Tensor block_table, Tensor schedule_meta, int max_context_len, bool clean_logits=False, "
         "Tensor? indices=None) -> Tensor", "legacy name: FP8 q, FP32 logits"),
    ],
    "hyperconnection": [
        ("tf32_hc_prenorm_gemm(Tensor a, Tensor b, Tensor(d!) d, Tensor(s!) sqr_sum, int? num_splits=None) -> ()",
         "D = A @ B.T in TF32 and sqr_sum = rowsum(A^2); with num_splits, per-split partials"),
    ],
    "layout": [
        ("transform_sf_into_required_layout(Tensor sf, int mn, int k, int[] recipe, int? num_groups=None, "
         "bool? is_sfa=None, bool disable_ue8m0_cast=False, Tensor? psum_layout=None) -> Tensor",
         "scale factors into the layout the GEMM kernels read (always a fresh tensor)"),
        ("get_mn_major_tma_aligned_tensor(Tensor sf) -> Tensor", "FP32 scales into MN-major, TMA-aligned layout"),
        ("get_mn_major_tma_aligned_packed_ue8m0_tensor(Tensor sf, Tensor? psum_layout=None) -> Tensor",
         "power-of-two FP32 scales packed 4 per int32 (UE8M0), MN-major"),
        ("get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(Tensor sf, Tensor grouped_layout, int[]? ks_cpu, "
         "int gran_k, int k_alignment, bool use_psum_layout=False) -> Tensor",
         "UE8M0 packing for K-grouped scales (packs never cross a group)"),
    ],
    "runtime": [
        ("set_num_sms(int num_sms) -> ()", "SMs used by persistent kernels (0 = all)"),
        ("get_num_sms() -> int", "current SM budget"),
        ("set_tc_util(int tc_util) -> ()", "tensor-core utilisation target in percent (0-100)"),
        ("get_tc_util() -> int", "100 when unset"),
        ("set_pdl(bool enable) -> ()", "programmatic dependent launch on kernel launches"),
        ("get_pdl() -> bool", "PDL flag"),
        ("set_ignore_compile_dims(bool ignore) -> ()", "make every dimension a runtime value in kernels"),
        ("set_block_size_multiple_of(int block_m_multiple_of, int block_n_multiple_of) -> ()",
         "constrain BLOCK_M / BLOCK_N to multiples"),
        ("set_mk_alignment_for_contiguous_layout(int alignment) -> ()",
         "row alignment of groups in the M-contiguous and K-grouped layouts"),
        ("get_mk_alignment_for_contiguous_layout() -> int", "default 128"),
        ("get_theoretical_mk_alignment_for_contiguous_layout(int? expected_m=None) -> int",
         "smallest alignment the kernels could accept (128 on SM90)"),
        ("get_jit() -> int", "handle of the process's kernel runtime (kernel cache); see jit_* ops"),
        ("jit_cache_dir(int jit) -> str", "directory of the on-disk caches (autotune results)"),
        ("jit_num_compiled_kernels(int jit) -> int", "kernels compiled and held in memory"),
        ("jit_clear_cache(int jit) -> int", "drop the in-memory kernel cache; returns how many were dropped"),
    ],
    "mega": [
        ("get_symm_buffer_size_for_mega_moe(int num_ranks, int num_experts, int num_max_tokens_per_rank, "
         "int num_topk, int hidden, int intermediate_hidden, str mma_type, str activation, int num_ring_tokens) "
         "-> (int, int[])",
         "byte size of the Mega MoE symmetric buffer and its serialised slice layout"),
        ("_slice_symm_buffer_for_mega_moe(Tensor(a) buffer, int[] layout) -> Tensor(a)[]",
         "views of the buffer described by the layout (x, x_sf, topk_idx, topk_weights, l1/l2 acts and scales)"),
        ("get_token_alignment_for_mega_moe() -> int", "token count alignment of the Mega MoE buffer (384)"),
        ("get_ring_limit_for_mega_moe(int num_max_tokens_per_rank, int num_local_experts, int num_topk, "
         "int num_ranks) -> (int, int)", "(max received tokens, ring token limit)"),
        ("get_symm_buffer_size_for_sm90_mega_moe(int num_ranks, int num_experts, int num_max_tokens_per_rank, "
         "int num_topk, int hidden, int intermediate_hidden, bool use_fp8_dispatch, str activation) -> int",
         "byte size of the SM90 FP8 Mega MoE symmetric buffer (token pool, no ring)"),
        ("_slice_symm_buffer_for_sm90_mega_moe(Tensor(a) buffer, int num_ranks, int num_experts, "
         "int num_max_tokens_per_rank, int num_topk, int hidden, int intermediate_hidden, bool use_fp8_dispatch, "
         "str activation) -> Tensor(a)[]",
         "views of the SM90 buffer (x, x_sf FP32, topk_idx, topk_weights, l1/l2 acts and FP32 scales)"),
        ("get_block_m_for_mega_moe(int num_ranks, int num_experts, int num_max_tokens_per_rank, int num_tokens, "
         'int num_topk, str mma_type="fp8xfp4", int? global_num_tokens=None) -> int',
         "BLOCK_M the fused kernel picks (callers lay out shared-expert scales with it)"),
        ("fp8_mega_moe(Tensor(a!) y, Tensor l1_weights, Tensor l1_weights_sf, Tensor l2_weights, "
         "Tensor l2_weights_sf, Tensor(b!)? cumulative_local_expert_recv_stats, Tensor(c!) sym_buffer, "
         "int[] sym_buffer_ptrs, int rank_idx, int num_max_tokens_per_rank, int num_experts, int num_topk, "
         "int[] recipe, str activation, float? activation_clamp, bool fast_math) -> ()",
         "SM90 fused EP MoE: dispatch, L1 (FP8, 128x128 block scales), SwiGLU, L2, combine into y"),
        ("fp8_fp4_mega_moe(Tensor(a!) y, Tensor l1_weights, Tensor l1_weights_sf, Tensor l2_weights, "
         "Tensor l2_weights_sf, Tensor? shared_l1_weights, Tensor? shared_l1_weights_sf, Tensor? shared_l2_weights, "
         "Tensor? shared_l2_weights_sf, Tensor(b!)? cumulative_local_expert_recv_stats, Tensor(c!) sym_buffer, "
         "int[] sym_buffer_ptrs, int rank_idx, int num_max_tokens_per_rank, int num_experts, int num_topk, "
         "int[] recipe, str mma_type, str activation, float? activation_clamp, bool fast_math, bool use_x_scales, "
         "Tensor? l1_alphas, Tensor? l2_alphas, Tensor? l2_act_scales, bool post_expert_norm, "
         "Tensor? post_expert_norm_weight, float post_expert_norm_eps, bool post_expert_norm_weight_first, "
         "bool use_trtllm_weights, int? global_num_tokens, int num_ring_tokens) -> ()",
         "SM100-style fused EP MoE, FP8 activations x FP8/FP4 weights (UE8M0 per 32); num_ring_tokens sizes our "
         "buffer"),
        ("bf16_mega_moe(Tensor(a!) y, Tensor l1_weights, Tensor l2_weights, Tensor? shared_l1_weights, "
         "Tensor? shared_l2_weights, Tensor(b!)? cumulative_local_expert_recv_stats, Tensor(c!) sym_buffer, "
         "int[] sym_buffer_ptrs, int rank_idx, int num_max_tokens_per_rank, int num_experts, int num_topk, "
         "str activation, float? activation_clamp, bool fast_math, bool post_expert_norm, "
         "Tensor? post_expert_norm_weight, float post_expert_norm_eps, bool post_expert_norm_weight_first, "
         "bool use_trtllm_weights, int? global_num_tokens, int num_ring_tokens) -> ()",
         "fused EP MoE in BF16; num_ring_tokens sizes our buffer"),
        ("mega_moe_pre_dispatch(Tensor x, Tensor topk_idx, Tensor topk_weights, Tensor(a!) buf_x, "
         "Tensor(b!) buf_x_sf, Tensor(c!) buf_topk_idx, Tensor(d!) buf_topk_weights, int num_tokens, "
         'int group_size=32, str mma_type="fp8xfp4", Tensor(e!)? buf_x_scales=None, Tensor? expert_scales=None) '
         "-> ()",
         "BF16 tokens -> the buffer's FP8 x / packed UE8M0 x_sf, top-k copied, slots past num_tokens masked"),
        ("mega_moe_pre_dispatch_sm90(Tensor x, Tensor topk_idx, Tensor topk_weights, Tensor(a!) buf_x, "
         "Tensor(b!) buf_x_sf, Tensor(c!) buf_topk_idx, Tensor(d!) buf_topk_weights, int num_tokens, "
         "int group_size=128, float routed_scaling_factor=1.) -> ()",
         "BF16 tokens -> the SM90 buffer's FP8 x / FP32 per-128 x_sf, weights times routed_scaling_factor"),
    ],
    "determinism": [
        ("use_deterministic_algorithms(bool enable) -> ()",
         "library-wide deterministic mode: reduction order independent of the batch size"),
        ("get_deterministic_algorithms() -> bool", "deterministic-mode flag (default False)"),
    ],
    "symmetric": [
        ("batched_syrk(Tensor a, Tensor(d!) d) -> ()", "D[i] = A[i] @ A[i].T, [B,M,K] or [M,K], BF16/FP32"),
        ("batched_symm(Tensor a, Tensor b, Tensor(d!) d) -> ()", "D[i] = A[i] @ B[i] with A[i] symmetric [M,M]"),
    ],
    "fp4_gemm": [
        ("k_grouped_fp4_gemm_nt_contiguous(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(d!) d, int[]? ks, "
         'Tensor grouped_layout, Tensor? c=None, int[] recipe=[1, 1, 32], str compiled_dims="mn", '
         "bool use_psum_layout=False) -> ()",
         "MoE weight gradient on packed E2M1 [M, sum K/2] / [N, sum K/2] with UE8M0 scales per 32 K"),
        ("cublaslt_nvfp4_gemm_nt(Tensor a, Tensor sfa, Tensor b, Tensor sfb, Tensor(d!) d, Tensor? c=None) -> ()",
         "NVFP4 GEMM: E2M1 operands, UE4M3 scales per 16 K in cuBLASLt's tiled layout"),
    ],
    "sparse_attention": [
        ("get_sparse_mqa_logits_metadata(Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, int num_kv_tokens, "
         "Tensor sparse_kv_block_indices, ScalarType qk_dtype, int sparse_block_kv, bool use_unaligned_ks=False) "
         "-> Tensor", "DeepSeek V4 indexer: per-row selected KV blocks resolved to token starts (opaque uint8)"),
        ("get_paged_sparse_mqa_logits_metadata(Tensor context_lens, Tensor block_table, Tensor indices, "
         "int page_kv, Tensor sparse_kv_block_indices, ScalarType qk_dtype, int sparse_block_kv) -> Tensor",
         "paged form: logical blocks through the block table (opaque uint8)"),
        ("fp8_fp4_sparse_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv, Tensor kv_sf, Tensor weights, "
         "Tensor metadata, int num_max_sparse_blocks, int sparse_block_kv, bool use_unaligned_ks=False) -> Tensor",
         "BF16 logits [rows, blocks * sparse_block_kv] over each row's selected KV blocks"),
        ("fp8_fp4_paged_sparse_mqa_logits(Tensor q, Tensor? q_sf, Tensor kv_cache, Tensor weights, "
         "Tensor metadata, int num_max_sparse_blocks, int sparse_block_kv) -> Tensor",
         "BF16 logits over selected blocks of a paged fused KV cache"),
    ],
    "mega_gate": [
        ("get_bf16_mega_gate_config(int num_tokens, int hidden, int num_routed_experts, int num_topk) "
         "-> Dict(str, int)", "the SM100 mega gate's launch configuration (informational)"),
        ("bf16_mega_gate(Tensor x, Tensor weight, int num_topk, bool use_shared_as_routed, int num_shared_experts, "
         'float routed_scaling_factor, int ep_rank, str scoring_func="identity", Tensor? mask=None, '
         "Tensor? bias=None, Tensor? image_bias=None, Tensor? image_token_mask=None, Tensor? fix_routing_mask=None, "
         "Tensor? to_physical_map=None, Tensor? logical_count=None, Tensor(u!)? unmapped_topk_idx=None, "
         "Tensor? force_random=None, Tensor(i!)? out_idx=None, Tensor(w!)? out_weights=None) -> (Tensor, Tensor)",
         "fused MoE gate: x @ W.T, scoring, biased top-k, shared-as-routed experts, EP replica mapping"),
    ],
    "mega_mhc": [
        ("mega_mhc(Tensor x, Tensor residual, Tensor? shifted_prev_mix, Tensor post_mix, Tensor comb_res_mix, "
         "Tensor fn, Tensor mix_scales, Tensor mix_bases, int hc_mult, float hc_norm_eps, float hc_pre_eps, "
         "float hc_post_scale, float sinkhorn_eps, int num_sinkhorn_iters, Tensor rmsnorm_weight, "
         "float rmsnorm_eps, float rmsnorm_scale, Tensor(r!) new_residual, Tensor(p!)? new_prev_mix, "
         "Tensor(o!) new_post_mix, Tensor(c!) new_comb_res_mix, Tensor(y!)? y_bf16=None, Tensor(f!)? y_fp8=None, "
         "Tensor(g!)? y_gemm_sf=None, Tensor(u!)? y_routed_sf=None, Tensor(s!)? y_shared_sf=None, "
         "int shared_sf_block_m=0) -> ()",
         "fused mHC step: route post-mix, projection + Sinkhorn mixes, RMSNorm with BF16 / FP8 outputs"),
    ],
    "mqa_metadata": [
        ("get_mqa_logits_metadata(Tensor cu_seq_len_k_start, Tensor cu_seq_len_k_end, int num_kv_tokens, "
         "int num_heads) -> Tensor", "per-SM split-K schedule of the contiguous-KV indexer logits (int32 words)"),
    ],
}

# Extra dispatcher names: alias -> canonical op (same schema body, same kernels).
ALIASES: dict[str, str] = {
    "fp8_fp4_gemm_nt": "fp8_gemm_nt",
    "fp8_fp4_gemm_nn": "fp8_gemm_nn",
    "fp8_fp4_gemm_tn": "fp8_gemm_tn",
    "fp8_fp4_gemm_tt": "fp8_gemm_tt",
    "m_grouped_fp8_fp4_gemm_nt_contiguous": "m_grouped_fp8_gemm_nt_contiguous",
    "m_grouped_fp8_fp4_gemm_nn_contiguous": "m_grouped_fp8_gemm_nn_contiguous",
    "m_grouped_fp8_fp4_gemm_nt_masked": "m_grouped_fp8_gemm_nt_masked",
}


def op_name(schema: str) -> str:
    return schema.split("(", 1)[0]


def _build() -> tuple[dict[str, str], dict[str, str]]:
    schemas: dict[str, str] = {}
    family_of: dict[str, str] = {}
    for family, entries in SCHEMA_TABLE.items():
        for schema, _why in entries:
            name = op_name(schema)
            assert name not in schemas, f"duplicate op {name}"
            schemas[name] = schema
            family_of[name] = family
    for alias, canonical in ALIASES.items():
        schemas[alias] = alias + schemas[canonical][len(canonical):]
        family_of[alias] = family_of[canonical]
    return schemas, family_of


# op name -> full schema string (aliases included); op name -> family
SCHEMAS, FAMILY = _build()
