"""DeepGEMM's small API names: deterministic mode, top-level bench_kineto / calc_diff, set_block_size_multiple_of's
``value`` keyword, and get_paged_mqa_logits_metadata(..., get_num_sms()) without a GPU."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm import runtime
from deep_gemm.core.errors import DeepGEMMError


def test_deterministic_flag_round_trip(restore_deterministic):
    assert deep_gemm.get_deterministic_algorithms() is False  # DeepGEMM's default
    version = runtime._STATE.version
    deep_gemm.use_deterministic_algorithms(True)
    assert deep_gemm.get_deterministic_algorithms() is True
    assert torch.ops.deep_gemm.get_deterministic_algorithms() is True
    assert deep_gemm._C.get_deterministic_algorithms() is True
    assert runtime._STATE.version > version, "memoised checks and plans are keyed on the knobs' version"
    deep_gemm.use_deterministic_algorithms(enable=False)  # the op's keyword, as DeepGEMM's binding takes it
    assert deep_gemm.get_deterministic_algorithms() is False


def test_deterministic_flag_inside_compile(restore_deterministic):
    deep_gemm.use_deterministic_algorithms(True)

    def f(x):
        return x + 1 if deep_gemm.get_deterministic_algorithms() else x - 1

    assert torch.equal(torch.compile(f, fullgraph=True, backend="eager")(torch.zeros(2)), torch.ones(2))


def test_testing_helpers_at_top_level():
    from deep_gemm import bench_kineto, calc_diff  # DeepGEMM 1.x import form
    assert bench_kineto is deep_gemm.testing.bench_kineto and calc_diff is deep_gemm.testing.calc_diff
    assert "bench_kineto" in deep_gemm.__all__ and "calc_diff" in deep_gemm.__all__


def test_set_block_size_multiple_of_value_keyword():
    try:
        deep_gemm.set_block_size_multiple_of(value=16)
        assert runtime.get_block_size_multiple_of() == (16, 16)
        deep_gemm.set_block_size_multiple_of(value=(8, 32))
        assert runtime.get_block_size_multiple_of() == (8, 32)
        with pytest.raises(TypeError):
            deep_gemm._C.set_block_size_multiple_of(value=4)  # the binding's form stays positional-only
    finally:
        deep_gemm.set_block_size_multiple_of(1)


def test_paged_metadata_with_get_num_sms_without_gpu():
    if deep_gemm.get_num_sms() != 0:
        pytest.skip("a device SM count is known")
    lens = torch.tensor([[300], [0], [70]], dtype=torch.int32)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, 64, deep_gemm.get_num_sms())
    assert meta.shape == (2, 2) and meta.dtype == torch.int32  # a one-SM schedule
    assert meta.tolist() == deep_gemm.get_paged_mqa_logits_metadata(lens, 64, 1).tolist()
    with pytest.raises(DeepGEMMError, match=r"num_sms: expected an integer in \[1"):
        torch.ops.deep_gemm.get_paged_mqa_logits_metadata(lens, 64, 0)  # the op itself stays strict
