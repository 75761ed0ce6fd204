"""deep_gemm._C: the legacy pybind surface, in pure Python over torch.ops.deep_gemm."""

import inspect

import pytest
import torch

import deep_gemm
from deep_gemm import _C
from deep_gemm.core.schemas import SCHEMAS
from deep_gemm.testing import assert_bitwise_equal
from deep_gemm.utils import align, per_block_cast_to_fp8, per_token_cast_to_fp8

# Ops of ours that DeepGEMM's _C never had (it has no Python JIT API).
EXTENSIONS = {"get_jit", "jit_cache_dir", "jit_num_compiled_kernels", "jit_clear_cache"}
LEGACY_OP_NAMES = sorted(n for n in SCHEMAS if not n.startswith("_") and n not in EXTENSIONS)
# _C-only names that are not schema ops (get_jit is DeepGEMM's JIT-runtime accessor, returning the runtime object).
C_ONLY = {"init", "get_tma_aligned_size", "fp8_fp4_mega_moe", "bf16_mega_moe", "get_jit", "fp8_mega_moe",
          "get_symm_buffer_size_for_sm90_mega_moe", "slice_symm_buffer_for_sm90_mega_moe",
          "set_block_size_multiple_of",  # (the public one also takes `value=`; the binding's form is positional)
          # the public setters take DeepGEMM's keyword names; the _C forms stay positional-only
          "set_num_sms", "set_tc_util", "set_pdl", "set_ignore_compile_dims", "set_mk_alignment_for_contiguous_layout"}

# The names DeepGEMM's extension module defines (m.def / m.attr in its csrc at the spec's commit), plus get_jit.
DEEPGEMM_C_NAMES = {
    "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl", "set_ignore_compile_dims",
    "set_block_size_multiple_of", "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout", "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor",
    "get_mn_major_tma_aligned_packed_ue8m0_tensor", "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "transform_sf_into_required_layout", "init",
    "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
    "fp8_fp4_gemm_nt", "fp8_fp4_gemm_nn", "fp8_fp4_gemm_tn", "fp8_fp4_gemm_tt",
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt", "fp8_gemm_nt_skip_head_mid",
    "m_grouped_fp8_fp4_gemm_nt_contiguous", "m_grouped_fp8_fp4_gemm_nn_contiguous", "m_grouped_fp8_fp4_gemm_nt_masked",
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt",
    "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous", "m_grouped_bf16_gemm_nt_masked",
    "k_grouped_bf16_gemm_tn_contiguous", "einsum", "fp8_einsum",
    "fp8_fp4_mqa_logits", "get_paged_mqa_logits_metadata", "fp8_fp4_paged_mqa_logits", "fp8_mqa_logits",
    "fp8_paged_mqa_logits", "tf32_hc_prenorm_gemm",
    "get_symm_buffer_size_for_mega_moe", "get_ring_limit_for_mega_moe", "get_token_alignment_for_mega_moe",
    "fp8_fp4_mega_moe", "bf16_mega_moe",
    # the SM90 Mega MoE of the DeepGEMM build SGLang 0.5.23 installs (its TORCH_LIBRARY ops)
    "fp8_mega_moe", "get_symm_buffer_size_for_sm90_mega_moe", "slice_symm_buffer_for_sm90_mega_moe",
    "mega_moe_pre_dispatch", "mega_moe_pre_dispatch_sm90", "get_block_m_for_mega_moe",
} | {
    # Added to DeepGEMM's TORCH_LIBRARY module by the build SGLang 0.5.23 installs (sgl-deep-gemm 0.2.3.post2).
    "use_deterministic_algorithms", "get_deterministic_algorithms", "batched_syrk", "batched_symm",
    "k_grouped_fp4_gemm_nt_contiguous", "cublaslt_nvfp4_gemm_nt",
    "get_sparse_mqa_logits_metadata", "fp8_fp4_sparse_mqa_logits", "get_paged_sparse_mqa_logits_metadata",
    "fp8_fp4_paged_sparse_mqa_logits", "get_bf16_mega_gate_config", "bf16_mega_gate", "mega_mhc",
    "get_mqa_logits_metadata",
}


@pytest.mark.parametrize("name", LEGACY_OP_NAMES)
def test_every_schema_op_has_its_legacy_name_on_C(name):
    fn = getattr(_C, name)
    assert callable(fn)
    assert name in _C.__all__ and name in dir(_C)


def test_all_lists_exactly_the_legacy_surface():
    assert set(_C.__all__) == set(LEGACY_OP_NAMES) | C_ONLY
    assert not (EXTENSIONS - {"get_jit"}) & set(_C.__all__)
    for name in _C.__all__:
        assert callable(getattr(_C, name)), name


@pytest.mark.parametrize("name", sorted(set(LEGACY_OP_NAMES) - C_ONLY))
def test_forwarded_names_are_the_public_functions_themselves(name):
    assert getattr(_C, name) is getattr(deep_gemm, name)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_function'"):
        _C.not_a_function  # noqa: B018
    assert not hasattr(_C, "jit_cache_dir")


def test_namespace_is_deepgemms_extension_plus_get_jit():
    assert set(_C.__all__) == DEEPGEMM_C_NAMES | {"get_jit"}
    public = {n for n in dir(_C) if not n.startswith("_")}
    assert public == set(_C.__all__)
    # No helper leaks under a public name (typing, torch, importlib, the schema table).
    for name in ("List", "Optional", "Sequence", "Tuple", "torch", "importlib", "SCHEMAS", "annotations",
                 "POSITIONAL_ONLY"):
        assert not hasattr(_C, name), name


def test_get_jit_is_the_runtime_object():
    jit = _C.get_jit()
    assert jit.cache_dir == deep_gemm.get_jit().cache_dir
    assert isinstance(jit.num_compiled_kernels, int)


# ---- positional-only, as pybind without py::arg -----------------------------------------------------------------

POSITIONAL_ONLY = sorted(_C._POSITIONAL_ONLY)


def test_positional_only_set_is_the_documented_one():
    assert set(POSITIONAL_ONLY) == {
        "set_num_sms", "get_num_sms", "set_tc_util", "get_tc_util", "set_pdl", "get_pdl", "set_ignore_compile_dims",
        "set_block_size_multiple_of", "set_mk_alignment_for_contiguous_layout",
        "get_mk_alignment_for_contiguous_layout", "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "init",
        "get_symm_buffer_size_for_mega_moe", "get_ring_limit_for_mega_moe", "get_token_alignment_for_mega_moe",
        "fp8_fp4_mega_moe", "bf16_mega_moe", "fp8_mega_moe", "get_symm_buffer_size_for_sm90_mega_moe",
        "slice_symm_buffer_for_sm90_mega_moe"}


@pytest.mark.parametrize("name", POSITIONAL_ONLY)
def test_positional_only_functions_are_real_positional_only_functions(name):
    fn = getattr(_C, name)
    assert inspect.isfunction(fn)
    kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
    assert kinds <= {inspect.Parameter.POSITIONAL_ONLY}, (name, inspect.signature(fn))


@pytest.mark.parametrize("name", POSITIONAL_ONLY)
def test_positional_only_functions_reject_keywords(name):
    fn = getattr(_C, name)
    params = list(inspect.signature(fn).parameters)
    # Its own parameter names as keywords (dummy values: binding fails before any value is looked at).
    kwargs = {p: 0 for p in params} or {"value": 0}
    with pytest.raises(TypeError, match="positional-only|unexpected keyword"):
        fn(**kwargs)


def test_a_rejected_keyword_call_changes_no_state():
    before = _C.get_num_sms()
    with pytest.raises(TypeError):
        _C.set_num_sms(num_sms=before + 2)
    assert _C.get_num_sms() == before


def test_runtime_knobs_round_trip_through_C():
    saved = (_C.get_tc_util(), _C.get_pdl(), _C.get_mk_alignment_for_contiguous_layout())
    try:
        _C.set_tc_util(55)
        _C.set_pdl(True)
        _C.set_mk_alignment_for_contiguous_layout(64)
        assert (_C.get_tc_util(), _C.get_pdl(), _C.get_mk_alignment_for_contiguous_layout()) == (55, True, 64)
        assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 64  # one state, whoever sets it
        _C.set_block_size_multiple_of(16)
        _C.set_block_size_multiple_of((8, 32))
    finally:
        _C.set_tc_util(saved[0])
        _C.set_pdl(saved[1])
        _C.set_mk_alignment_for_contiguous_layout(saved[2])
        _C.set_block_size_multiple_of(1)


# ---- _C-only names ---------------------------------------------------------------------------------------------


def test_init_records_paths_without_touching_cuda(monkeypatch):
    monkeypatch.setattr(_C, "_INIT_PATHS", {})
    _C.init("/opt/deep_gemm", "/usr/local/cuda")
    assert _C._INIT_PATHS == {"library_root_path": "/opt/deep_gemm", "cuda_home_path_by_python": "/usr/local/cuda"}
    if not torch.cuda.is_available():
        assert not torch.cuda.is_initialized()
    with pytest.raises(TypeError, match="library_root_path must be a str"):
        _C.init(None, "/usr/local/cuda")


@pytest.mark.parametrize("x, element_size", [(1, 4), (7, 2), (128, 1), (129, 4), (0, 8), (33, 16)])
def test_get_tma_aligned_size_matches_the_public_helper(x, element_size):
    expected = align(x, 16 // element_size)
    assert _C.get_tma_aligned_size(x, element_size) == expected
    assert deep_gemm.get_tma_aligned_size(x, element_size) == expected


@pytest.mark.parametrize("tokens, local_experts, topk, ranks", [(384, 8, 2, 1), (4224, 6, 6, 72), (768, 1, 1, 4)])
def test_get_ring_limit_for_mega_moe_follows_the_documented_formula(tokens, local_experts, topk, ranks):
    # spec §10: (ranks*T, min(ranks*T*E_local, align(ranks*T*topk + 383*E_local, 384)))
    low = ranks * tokens
    high = min(ranks * tokens * local_experts, align(ranks * tokens * topk + 383 * local_experts, 384))
    assert _C.get_ring_limit_for_mega_moe(tokens, local_experts, topk, ranks) == (low, high)


def test_get_symm_buffer_size_for_mega_moe_returns_the_legacy_closure():
    assert _C.get_token_alignment_for_mega_moe() == 384
    num_bytes, slice_fn = _C.get_symm_buffer_size_for_mega_moe(1, 8, 384, 2, 256, 128, "fp8xfp4", "swiglu", 3072)
    assert isinstance(num_bytes, int) and num_bytes > 0 and callable(slice_fn)
    buffer = torch.zeros(num_bytes, dtype=torch.int8)
    views = slice_fn(buffer)
    x, x_sf, topk_idx, topk_weights = views[:4]
    assert x.shape == (384, 256) and x.dtype == torch.float8_e4m3fn
    assert topk_idx.shape == (384, 2) and topk_idx.dtype == torch.int64
    assert topk_weights.shape == (384, 2) and topk_weights.dtype == torch.float32
    assert all(v.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr() for v in views if v is not None)


@pytest.mark.parametrize("name", ["fp8_mega_moe", "fp8_fp4_mega_moe", "bf16_mega_moe"])
def test_raw_mega_entry_points_are_the_flat_ops(name):
    # The raw layer entry points take DeepGEMM's flat argument lists (buffer tensor + pointer list) and check them.
    n = len(inspect.signature(getattr(_C, name)).parameters)
    assert n == len(torch._C._dispatch_find_schema_or_throw(f"deep_gemm::{name}", "").schema().arguments)
    y = torch.zeros(4, 256, dtype=torch.bfloat16)
    args = [None] * n
    args[0] = y
    with pytest.raises(Exception):
        getattr(_C, name)(*args)
    assert not y.any()


# ---- the same results as the public API -------------------------------------------------------------------------


def test_fp8_gemm_through_C_equals_the_public_call():
    m, n, k = 5, 256, 384
    a = per_token_cast_to_fp8(torch.randn(m, k), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k), use_ue8m0=False)
    d_public = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    d_legacy = d_public.clone()
    deep_gemm.fp8_gemm_nt(a, b, d_public)
    _C.fp8_fp4_gemm_nt(a, b, d_legacy)
    assert not torch.isnan(d_legacy.float()).any()
    assert_bitwise_equal(d_legacy, d_public, "fp8_fp4_gemm_nt")


def test_mn_major_tma_aligned_tensor_through_C_equals_the_public_call():
    sf = torch.rand(3, 37, 5)
    legacy = _C.get_mn_major_tma_aligned_tensor(sf)
    public = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert_bitwise_equal(legacy, public, "values")
    assert legacy.stride() == public.stride()
    assert legacy.stride()[-2:] == (1, align(37, 4))  # MN-major, TMA-aligned (spec §0.3)
    assert torch.equal(legacy, sf)


def test_bf16_gemm_through_C_equals_the_public_call():
    a, b = torch.randn(7, 64, dtype=torch.bfloat16), torch.randn(24, 64, dtype=torch.bfloat16)
    d_public = torch.empty(7, 24, dtype=torch.float32)
    d_legacy = torch.empty_like(d_public)
    deep_gemm.bf16_gemm_nt(a, b, d_public)
    _C.bf16_gemm_nt(a, b, d_legacy)
    assert_bitwise_equal(d_legacy, d_public, "bf16_gemm_nt")
