"""A C++ caller that knows nothing of deep_gemm's Python code reaches its ops through the dispatcher.

The extension below does not link or include anything of deep_gemm: it looks ops up by name with
``c10::Dispatcher::singleton().findSchemaOrThrow("deep_gemm::<op>", "")`` and calls them through ``typed<...>()``.
For ops whose kernels are Python functions, a ``typed<>`` signature that does not match the schema does NOT throw
(the arguments are boxed by the C++ types given), so every call here checks results, and the typed signatures are
the contract a C++ user should copy:

    tf32_hc_prenorm_gemm               void(const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&,
                                            std::optional<int64_t>)
    get_symm_buffer_size_for_mega_moe  std::tuple<int64_t, std::vector<int64_t>>(int64_t x6, c10::string_view,
                                            c10::string_view, int64_t)
    _slice_symm_buffer_for_mega_moe    std::vector<at::Tensor>(const at::Tensor&, c10::ArrayRef<int64_t>)
    get_ring_limit_for_mega_moe        std::tuple<int64_t, int64_t>(int64_t, int64_t, int64_t, int64_t)
    get_token_alignment_for_mega_moe   int64_t()
    set_num_sms / get_num_sms          void(int64_t) / int64_t()
    jit_cache_dir                      std::string(int64_t)

The extension registers its entry points as ops of its own (``TORCH_LIBRARY``), so it compiles against
``torch/library.h`` only, without the Python binding headers (cached afterwards under the build directory below).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

import deep_gemm
from deep_gemm.core.schemas import SCHEMAS
from deep_gemm.mega import buffer as mega_buffer

pytestmark = pytest.mark.slow

_CPP = r"""
#include <torch/library.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/op_registration/infer_schema.h>

#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

c10::OperatorHandle find(const std::string& name) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "");
}

// The C++ signatures of the ops, one alias each: used for the calls and checked against the schemas below.
using HcPrenormSig = void(const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&, std::optional<int64_t>);
using SymmSizeSig = std::tuple<int64_t, std::vector<int64_t>>(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                              c10::string_view, c10::string_view, int64_t);
using SliceSig = std::vector<at::Tensor>(const at::Tensor&, c10::ArrayRef<int64_t>);
using RingLimitSig = std::tuple<int64_t, int64_t>(int64_t, int64_t, int64_t, int64_t);
using TokenAlignmentSig = int64_t();
using SetNumSmsSig = void(int64_t);
using GetNumSmsSig = int64_t();
using GetJitSig = int64_t();
using JitCacheDirSig = std::string(int64_t);
// Deliberately wrong: num_splits as a plain int, and an int32 where the schema has int (= int64_t).
using WrongHcPrenormSig = void(const at::Tensor&, const at::Tensor&, at::Tensor&, at::Tensor&, int64_t);
using WrongRingLimitSig = std::tuple<int64_t, int64_t>(int64_t, int64_t, int64_t, double);

// "" when the schema c10 infers from Sig has the op's argument and return types, else c10's description of the
// difference (the check c10 runs when a C++ kernel is registered; Python kernels never get it).
template <class Sig>
std::string signature_difference(const std::string& name) {
    const auto inferred = c10::inferFunctionSchemaFlattenedReturns<Sig>();
    const auto difference = c10::findSchemaDifferences(inferred, find(name).schema());
    return difference.has_value() ? *difference : std::string();
}

}  // namespace

c10::Dict<std::string, std::string> signature_differences() {
    c10::Dict<std::string, std::string> out;
    const std::map<std::string, std::string> all = {
        {"tf32_hc_prenorm_gemm", signature_difference<HcPrenormSig>("deep_gemm::tf32_hc_prenorm_gemm")},
        {"get_symm_buffer_size_for_mega_moe",
         signature_difference<SymmSizeSig>("deep_gemm::get_symm_buffer_size_for_mega_moe")},
        {"_slice_symm_buffer_for_mega_moe",
         signature_difference<SliceSig>("deep_gemm::_slice_symm_buffer_for_mega_moe")},
        {"get_ring_limit_for_mega_moe", signature_difference<RingLimitSig>("deep_gemm::get_ring_limit_for_mega_moe")},
        {"get_token_alignment_for_mega_moe",
         signature_difference<TokenAlignmentSig>("deep_gemm::get_token_alignment_for_mega_moe")},
        {"set_num_sms", signature_difference<SetNumSmsSig>("deep_gemm::set_num_sms")},
        {"get_num_sms", signature_difference<GetNumSmsSig>("deep_gemm::get_num_sms")},
        {"get_jit", signature_difference<GetJitSig>("deep_gemm::get_jit")},
        {"jit_cache_dir", signature_difference<JitCacheDirSig>("deep_gemm::jit_cache_dir")},
        {"wrong:tf32_hc_prenorm_gemm", signature_difference<WrongHcPrenormSig>("deep_gemm::tf32_hc_prenorm_gemm")},
        {"wrong:get_ring_limit_for_mega_moe",
         signature_difference<WrongRingLimitSig>("deep_gemm::get_ring_limit_for_mega_moe")},
    };
    for (const auto& [name, difference] : all) {
        out.insert(name, difference);
    }
    return out;
}

std::string schema_of(c10::string_view name) {
    std::ostringstream out;
    out << find(std::string(name)).schema();
    return out.str();
}

void hc_prenorm(const at::Tensor& a, const at::Tensor& b, at::Tensor& d, at::Tensor& sqr_sum,
                std::optional<int64_t> num_splits) {
    static auto op = find("deep_gemm::tf32_hc_prenorm_gemm").typed<HcPrenormSig>();
    op.call(a, b, d, sqr_sum, num_splits);
}

std::tuple<int64_t, std::vector<int64_t>> symm_size(int64_t num_ranks, int64_t num_experts, int64_t num_tokens,
                                                    int64_t num_topk, int64_t hidden, int64_t intermediate_hidden,
                                                    c10::string_view mma_type, c10::string_view activation,
                                                    int64_t num_ring_tokens) {
    static auto op = find("deep_gemm::get_symm_buffer_size_for_mega_moe").typed<SymmSizeSig>();
    return op.call(num_ranks, num_experts, num_tokens, num_topk, hidden, intermediate_hidden,
                   mma_type, activation, num_ring_tokens);
}

std::vector<at::Tensor> slice_buffer(const at::Tensor& buffer, std::vector<int64_t> layout) {
    static auto op = find("deep_gemm::_slice_symm_buffer_for_mega_moe").typed<SliceSig>();
    return op.call(buffer, layout);
}

std::tuple<int64_t, int64_t> ring_limit(int64_t tokens, int64_t local_experts, int64_t topk, int64_t ranks) {
    static auto op = find("deep_gemm::get_ring_limit_for_mega_moe").typed<RingLimitSig>();
    return op.call(tokens, local_experts, topk, ranks);
}

int64_t token_alignment() {
    static auto op = find("deep_gemm::get_token_alignment_for_mega_moe").typed<TokenAlignmentSig>();
    return op.call();
}

void set_num_sms(int64_t n) {
    static auto op = find("deep_gemm::set_num_sms").typed<SetNumSmsSig>();
    op.call(n);
}

int64_t get_num_sms() {
    static auto op = find("deep_gemm::get_num_sms").typed<GetNumSmsSig>();
    return op.call();
}

std::string jit_cache_dir() {
    static auto get_jit = find("deep_gemm::get_jit").typed<GetJitSig>();
    static auto op = find("deep_gemm::jit_cache_dir").typed<JitCacheDirSig>();
    return op.call(get_jit.call());
}

// c10::ScalarType numbers of the dtypes the Mega MoE layout serialises (the layout stores them as ints).
std::vector<int64_t> scalar_type_codes() {
    return {static_cast<int64_t>(at::kChar), static_cast<int64_t>(at::kInt), static_cast<int64_t>(at::kLong),
            static_cast<int64_t>(at::kFloat), static_cast<int64_t>(at::kBFloat16),
            static_cast<int64_t>(at::kFloat8_e4m3fn)};
}

// The test's entry points, as ops of their own: no Python binding code to compile.
TORCH_LIBRARY(dg_cpp_dispatcher_test, m) {
    m.def("signature_differences", &signature_differences);
    m.def("schema_of", &schema_of);
    m.def("hc_prenorm(Tensor a, Tensor b, Tensor(a!) d, Tensor(b!) sqr_sum, int? num_splits) -> ()", &hc_prenorm);
    m.def("symm_size", &symm_size);
    m.def("slice_buffer", &slice_buffer);
    m.def("ring_limit", &ring_limit);
    m.def("token_alignment", &token_alignment);
    m.def("set_num_sms", &set_num_sms);
    m.def("get_num_sms", &get_num_sms);
    m.def("jit_cache_dir", &jit_cache_dir);
    m.def("scalar_type_codes", &scalar_type_codes);
}
"""

@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    """The extension's entry points (``torch.ops.dg_cpp_dispatcher_test``), built once per pytest run."""
    from torch.utils.cpp_extension import load

    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler on PATH (set CXX)")
    # A persistent cache directory makes reruns instant; a pytest tmp dir keeps CI hermetic.
    build_dir = os.environ.get("DG_TEST_CPP_BUILD_DIR") or str(tmp_path_factory.mktemp("dg_cpp_dispatcher"))
    os.makedirs(build_dir, exist_ok=True)
    source = Path(build_dir) / "dg_cpp_dispatcher_test.cpp"
    if not source.exists() or source.read_text() != _CPP:  # (an unchanged source keeps the cached build)
        source.write_text(_CPP)
    load(name="dg_cpp_dispatcher_test", sources=[str(source)], build_directory=build_dir, extra_cflags=["-O0"],
         is_python_module=False, verbose=False)
    return torch.ops.dg_cpp_dispatcher_test


def test_typed_signatures_match_the_schemas(ext):
    differences = ext.signature_differences()
    for name, difference in differences.items():
        if name.startswith("wrong:"):
            assert difference, f"{name}: a wrong signature must be reported (else the check proves nothing)"
        else:
            assert difference == "", f"{name}: {difference}"


@pytest.mark.parametrize("name", ["tf32_hc_prenorm_gemm", "get_symm_buffer_size_for_mega_moe",
                                  "_slice_symm_buffer_for_mega_moe", "get_ring_limit_for_mega_moe",
                                  "get_token_alignment_for_mega_moe", "set_num_sms", "get_num_sms", "jit_cache_dir"])
def test_schema_seen_from_cpp_is_the_table(ext, name):
    assert ext.schema_of(f"deep_gemm::{name}") == f"deep_gemm::{SCHEMAS[name]}"


@pytest.mark.parametrize("m, n, k, num_splits", [(13, 24, 128, None), (64, 8, 64, None), (0, 16, 64, None),
                                                 (37, 32, 320, 3), (5, 8, 128, 4)])
def test_tf32_hc_prenorm_gemm_from_cpp(ext, m, n, k, num_splits):
    a = torch.randn(m, k).bfloat16()
    b = torch.randn(n, k)
    shape = (m, n) if num_splits is None else (num_splits, m, n)
    d = torch.full(shape, float("nan"))
    sqr_sum = torch.full(shape[:-1], float("nan"))
    ext.hc_prenorm(a, b, d, sqr_sum, num_splits)
    if num_splits is not None:
        d, sqr_sum = d.sum(0), sqr_sum.sum(0)
    expected_d = a.double() @ b.double().T   # BF16 A is exact in FP64; TF32 rounding of B bounds the error
    expected_sqr = (a.double() ** 2).sum(-1)
    assert deep_gemm.testing.calc_diff(d, expected_d) < 1e-5
    torch.testing.assert_close(sqr_sum.double(), expected_sqr, rtol=1e-5, atol=1e-5)
    # And bit for bit what the Python face computes.
    d2 = torch.empty(shape)
    s2 = torch.empty(shape[:-1])
    torch.ops.deep_gemm.tf32_hc_prenorm_gemm(a, b, d2, s2, num_splits)
    if num_splits is not None:
        d2, s2 = d2.sum(0), s2.sum(0)
    assert torch.equal(d, d2) and torch.equal(sqr_sum, s2)


def test_tf32_hc_prenorm_gemm_errors_cross_into_cpp(ext):
    a = torch.randn(4, 64).bfloat16()
    b = torch.randn(24, 64)
    d = torch.zeros(4, 24)
    with pytest.raises(RuntimeError, match=r"sqr_sum: expected shape \(4,\)"):
        ext.hc_prenorm(a, b, d, torch.zeros(5), None)
    assert not d.any()


@pytest.mark.parametrize("args", [
    (1, 8, 384, 2, 256, 128, "fp8xfp4", "swiglu", 3072),
    (2, 6, 1152, 3, 640, 128, "bf16xbf16", "swiglu", 2304),
])
def test_mega_ops_from_cpp(ext, args):
    num_bytes, layout = ext.symm_size(*args)
    py_bytes, py_layout = torch.ops.deep_gemm.get_symm_buffer_size_for_mega_moe(*args)
    assert (num_bytes, list(layout)) == (py_bytes, list(py_layout))
    # The strings really arrived: a different mma_type changes the answer, a wrong one raises.
    other = "bf16xbf16" if args[6] == "fp8xfp4" else "fp8xfp4"
    assert ext.symm_size(*args[:6], other, *args[7:])[0] != num_bytes
    with pytest.raises(RuntimeError, match=r"mma_type: expected one of .*got 'fp4xfp4'"):
        ext.symm_size(*args[:6], "fp4xfp4", *args[7:])
    buf = torch.zeros(num_bytes, dtype=torch.int8)
    views = ext.slice_buffer(buf, list(layout))
    expected = torch.ops.deep_gemm._slice_symm_buffer_for_mega_moe(buf, layout)
    assert len(views) == 8
    for v, e in zip(views, expected):
        assert (v.shape, v.stride(), v.dtype, v.data_ptr()) == (e.shape, e.stride(), e.dtype, e.data_ptr())
    views[2][1, 0] = 42  # topk_idx, written from the C++-returned view
    assert expected[2][1, 0] == 42
    tokens, experts, topk, ranks = args[2], args[1] // args[0], args[3], args[0]
    assert ext.ring_limit(tokens, experts, topk, ranks) == deep_gemm.get_ring_limit_for_mega_moe(
        tokens, experts, topk, ranks)
    assert ext.token_alignment() == 384


def test_layout_dtype_codes_are_cpp_scalar_types(ext):
    dtypes = [torch.int8, torch.int32, torch.int64, torch.float32, torch.bfloat16, torch.float8_e4m3fn]
    assert ext.scalar_type_codes() == [mega_buffer._DTYPE_CODES[d] for d in dtypes]


def test_runtime_state_is_shared_with_cpp(ext, monkeypatch, tmp_path):
    saved = deep_gemm.core.runtime._STATE.num_sms
    try:
        ext.set_num_sms(1)
        assert deep_gemm.get_num_sms() == 1
        deep_gemm.set_num_sms(2 if not torch.cuda.is_available() else 1)
        assert ext.get_num_sms() == deep_gemm.get_num_sms()
        with pytest.raises(RuntimeError, match=r"num_sms: expected an integer in \[0, \d+\], got -1"):
            ext.set_num_sms(-1)
    finally:
        deep_gemm.core.runtime.set_num_sms(saved)
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path))
    assert ext.jit_cache_dir() == str(tmp_path)
