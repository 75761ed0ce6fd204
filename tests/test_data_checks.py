"""Data-dependent contracts (values of index tensors): the CPU kernels always check them, CUDA in the checked mode
(``deep_gemm.set_checks("data")`` / ``DG_CHECKS=data``). Each bad call raises DeepGEMMError naming the argument, the
first bad index and its value, and leaves the output untouched. The checked mode's CUDA hook is exercised with CPU
tensors (``OpKernels.run_cuda`` is what the CUDA kernel and the eager path call), its capture refusal with a
monkeypatched ``torch.cuda.is_current_stream_capturing``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import deep_gemm
from deep_gemm.core import registry
from deep_gemm.core.errors import DeepGEMMError
from fp8_inputs import contiguous_grouped_inputs, k_grouped_inputs
from test_attention_reference_cpu import MqaCase, PagedCase, make_mqa, make_paged

BF16 = torch.bfloat16


@pytest.fixture
def checks_off():
    yield
    deep_gemm.set_checks("off")


def _untouched(d: torch.Tensor, fn, match: str) -> None:
    before = d.clone()
    with pytest.raises(DeepGEMMError, match=match):
        fn()
    assert torch.equal(d, before), "the output was written before the error"


# ---- M-grouped contiguous --------------------------------------------------------------------------------------

def _bf16_contiguous(num_groups=3, m=128, n=16, k=32):
    a, b = torch.randn(m, k).to(BF16), torch.randn(num_groups, n, k).to(BF16)
    d = torch.randn(m, n).to(BF16)
    ids = torch.randint(-1, num_groups, (m,), dtype=torch.int32)
    return a, b, d, ids


@pytest.mark.parametrize("bad, index, value", [(3, 5, 3), (-2, 0, -2), (100, 127, 100)])
def test_m_grouped_expert_ids_out_of_range(bad, index, value):
    a, b, d, ids = _bf16_contiguous()
    ids[index] = bad
    match = rf"grouped_layout: expected expert ids in \[-1, 3\) .*got grouped_layout\[{index}\] = {value}"
    _untouched(d, lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, ids), match)


def test_m_grouped_fp8_expert_ids_out_of_range():
    (a, sfa), (b, sfb), ids, _ = contiguous_grouped_inputs([5, 70], 64, 128)
    d = torch.randn(a.size(0), 64).to(BF16)
    ids[130] = 2
    _untouched(d, lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, ids),
               r"grouped_layout\[130\] = 2")


@pytest.mark.parametrize("ends, match", [
    ([40, 30, 100], r"non-decreasing .*grouped_layout\[1\] = 30 < grouped_layout\[0\] = 40"),
    ([-1, 30, 100], r"grouped_layout\[0\] = -1 < 0"),
    ([40, 60, 129], r"at most M = 128 .*grouped_layout\[2\] = 129"),
])
def test_m_grouped_psum_ends(ends, match):
    a, b, d, _ = _bf16_contiguous()
    layout = torch.tensor(ends, dtype=torch.int32)
    _untouched(d, lambda: deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=True),
               match)


def test_m_grouped_psum_equal_ends_are_empty_groups():
    a, b, d, _ = _bf16_contiguous()
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, torch.tensor([0, 0, 128], dtype=torch.int32),
                                               use_psum_layout=True)
    torch.testing.assert_close(d.float(), a.float() @ b[2].float().T, rtol=2e-2, atol=2e-2)


# ---- masked ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("masked, index, value", [([3, 9, 2], 1, 9), ([3, -1, 2], 1, -1)])
def test_masked_m_out_of_range(masked, index, value):
    g, max_m, n, k = 3, 8, 16, 32
    a, b = torch.randn(g, max_m, k).to(BF16), torch.randn(g, n, k).to(BF16)
    d = torch.randn(g, max_m, n).to(BF16)
    masked_m = torch.tensor(masked, dtype=torch.int32)
    _untouched(d, lambda: deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, 4),
               rf"masked_m: expected valid row counts in \[0, 8\] .*got masked_m\[{index}\] = {value}")


def test_masked_m_at_max_m_is_valid():
    g, max_m, n, k = 2, 8, 16, 32
    a, b = torch.randn(g, max_m, k).to(BF16), torch.randn(g, n, k).to(BF16)
    d = torch.zeros(g, max_m, n).to(BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, torch.tensor([8, 0], dtype=torch.int32), 4)
    assert (d[1] == 0).all()


# ---- K-grouped ---------------------------------------------------------------------------------------------------

def test_k_grouped_ks_disagrees_with_ks_cpu():
    ks, m, n = [32, 0, 64], 16, 16
    a, b = torch.randn(sum(ks), m).to(BF16), torch.randn(sum(ks), n).to(BF16)
    d = torch.randn(3, m, n)
    wrong = torch.tensor([32, 64, 0], dtype=torch.int32)
    _untouched(d, lambda: deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, wrong),
               r"grouped_layout\[1\] = 64 where ks_cpu\[1\] = 0")


def test_k_grouped_fp8_ks_disagrees_with_ks_cpu():
    ks = [128, 256]
    (a, sfa), (b, sfb), _, _ = k_grouped_inputs("tn", ks, 16, 16)
    d = torch.randn(2, 16, 16)
    wrong = torch.tensor([256, 128], dtype=torch.int32)
    _untouched(d, lambda: deep_gemm.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, ks, wrong),
               r"grouped_layout\[0\] = 256 where ks_cpu\[0\] = 128")


# ---- MQA logits --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("row, ks, ke, match", [
    (2, 0, 51, r"cu_seq_len_k_end: expected window ends at most SK = 50 .*cu_seq_len_k_end\[2\] = 51"),
    (1, 30, 20, r"cu_seq_len_k_start\[1\] = 30 > cu_seq_len_k_end\[1\] = 20"),
    (0, -1, 20, r"cu_seq_len_k_start: expected window starts >= 0, got cu_seq_len_k_start\[0\] = -1"),
])
def test_mqa_logits_bad_windows_raise(row, ks, ke, match):
    (q, _, kv, kv_sf, weights, starts, ends), _ = make_mqa(MqaCase(4, 50, 32, 32))
    starts[row], ends[row] = ks, ke
    with pytest.raises(DeepGEMMError, match=match):
        deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), weights, starts, ends)


def _paged():
    args, _ = make_paged(PagedCase(3, 2, 32, 64))
    return list(args)


def test_paged_page_id_outside_cache(num_sms_8):
    args = _paged()
    q, _, kv_cache, weights, context_lens, block_table, meta, max_len = args
    block_table = block_table.clone()
    block_table[1, 0] = kv_cache.size(0)
    with pytest.raises(DeepGEMMError, match=rf"block_table: expected page ids in \[0, {kv_cache.size(0)}\).*"
                                            rf"block_table\[1, 0\] = {kv_cache.size(0)}"):
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens, block_table, meta, max_len)


def test_paged_unused_block_table_entries_may_be_anything(num_sms_8):
    # make_paged fills unused entries with 12345 (out of range): only the pages a sequence uses are checked.
    args = _paged()
    q, _, kv_cache, weights, context_lens, block_table, meta, max_len = args
    assert (block_table == 12345).any()
    deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens, block_table, meta, max_len)


def test_paged_context_len_over_max(num_sms_8):
    q, _, kv_cache, weights, context_lens, block_table, meta, max_len = _paged()
    with pytest.raises(DeepGEMMError, match=r"context_lens: expected lengths at most max_context_len = 100"):
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, context_lens.clamp(min=101), block_table,
                                           meta, 100)


@pytest.fixture
def num_sms_8():
    deep_gemm.set_num_sms(8)
    yield
    deep_gemm.set_num_sms(0)


# ---- layout and utils ------------------------------------------------------------------------------------------

def test_packed_ue8m0_refuses_non_powers_of_two():
    sf = deep_gemm.utils.ceil_to_ue8m0(torch.rand(8, 6) + 0.1)
    sf[3, 4] = 0.75
    with pytest.raises(DeepGEMMError, match=r"sf: expected non-negative powers of two .*sf\[3, 4\] = 0.75"):
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    sf[3, 4] = -0.5
    with pytest.raises(DeepGEMMError, match=r"sf\[3, 4\] = -0.5"):
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    sf[3, 4] = 0.5
    deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)


def test_packed_ue8m0_psum_checks_only_rows_inside_groups():
    deep_gemm.set_mk_alignment_for_contiguous_layout(4)
    try:
        sf = deep_gemm.utils.ceil_to_ue8m0(torch.rand(16, 4) + 0.1)
        sf[2:4] = 0.3  # gap rows of group 0 (ends at 2, group 1 starts at 4): garbage is allowed there
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, torch.tensor([2, 9], dtype=torch.int32))
        with pytest.raises(DeepGEMMError, match=r"sf\[2, 0\] = 0.3"):
            deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, torch.tensor([3, 9], dtype=torch.int32))
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)


@pytest.mark.parametrize("call", [
    lambda: deep_gemm.utils.per_block_cast_to_fp8(torch.rand(4), False),
    lambda: deep_gemm.utils.per_token_cast_to_fp8(torch.rand(4), False),
    lambda: deep_gemm.utils.per_channel_cast_to_fp8(torch.rand(100, 4), False),
    lambda: deep_gemm.utils.per_token_cast_to_fp4(torch.rand(4, 3), False),
])
def test_utils_raise_deepgemm_error_not_assert(call):
    with pytest.raises(DeepGEMMError):
        call()


def test_no_assert_statements_in_public_helpers():
    import pathlib
    import re
    root = pathlib.Path(deep_gemm.__file__).parent
    for path in [*(root / "utils").glob("*.py"), *root.glob("*/api.py"), *root.glob("*/checks.py")]:
        assert not re.search(r"^\s*assert ", path.read_text(), re.M), path


# ---- the checked mode -----------------------------------------------------------------------------------------

DATA_CHECKED = ["m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_gemm_nt_masked",
                "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
                "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nn_contiguous",
                "m_grouped_bf16_gemm_nt_masked", "k_grouped_bf16_gemm_tn_contiguous", "fp8_mqa_logits",
                "fp8_fp4_mqa_logits", "fp8_paged_mqa_logits", "fp8_fp4_paged_mqa_logits",
                "get_mn_major_tma_aligned_packed_ue8m0_tensor",
                "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor", "fp8_mega_moe", "fp8_fp4_mega_moe",
                "bf16_mega_moe", "k_grouped_fp4_gemm_nt_contiguous", "get_paged_sparse_mqa_logits_metadata"]


def test_mode_switch_installs_and_removes_the_hook(checks_off):
    assert deep_gemm.get_checks() == "off"
    # Off: no op carries an instance run_cuda, so the dispatcher's CUDA kernel and the eager path run the class
    # method, exactly as before the checked mode existed.
    assert all("run_cuda" not in k.__dict__ for k in registry._KERNELS.values())
    deep_gemm.set_checks("data")
    assert deep_gemm.get_checks() == "data"
    hooked = {k.name for k in registry._KERNELS.values() if "run_cuda" in k.__dict__}
    assert hooked == set(DATA_CHECKED)
    deep_gemm.set_checks("off")
    assert all("run_cuda" not in k.__dict__ for k in registry._KERNELS.values())
    with pytest.raises(DeepGEMMError, match="mode: expected one of"):
        deep_gemm.set_checks("everything")


def test_checked_cuda_path_raises_before_launch(checks_off, monkeypatch):
    a, b, d, ids = _bf16_contiguous()
    ids[7] = 9
    kernels = registry.kernels_of("m_grouped_bf16_gemm_nt_contiguous")
    full = kernels.binder((a, b, d, ids), {})
    launched = []
    monkeypatch.setattr(kernels, "triton", lambda *args, **kw: launched.append(1))
    deep_gemm.set_checks("data")
    before = d.clone()
    with pytest.raises(DeepGEMMError, match=r"grouped_layout\[7\] = 9"):
        kernels.run_cuda(full, None)
    assert not launched and torch.equal(d, before)
    ids[7] = 0
    kernels.run_cuda(full, None)  # valid data: the launcher runs
    assert launched == [1]
    deep_gemm.set_checks("off")
    ids[7] = 9
    kernels.run_cuda(full, None)  # off: trusted, as DeepGEMM does
    assert launched == [1, 1]


def test_checked_mode_refuses_cuda_graph_capture(checks_off, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(DeepGEMMError, match="CUDA-graph capture"):
        deep_gemm.set_checks("data")
    assert deep_gemm.get_checks() == "off"
    deep_gemm.set_checks("off")  # turning it off is always allowed
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    deep_gemm.set_checks("data")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    a, b, d, ids = _bf16_contiguous()
    kernels = registry.kernels_of("m_grouped_bf16_gemm_nt_contiguous")
    with pytest.raises(DeepGEMMError, match=r"m_grouped_bf16_gemm_nt_contiguous: the checked mode .* CUDA-graph"):
        kernels.run_cuda(kernels.binder((a, b, d, ids), {}), None)


@pytest.mark.parametrize("value, expected", [("data", "data"), ("off", "off"), ("", "off"), ("bogus", "error")])
def test_dg_checks_environment(value, expected):
    env = dict(os.environ, DG_CHECKS=value)
    code = ("import deep_gemm\ntry:\n    print(deep_gemm.get_checks())\nexcept Exception as e:\n    print('error')")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if expected == "error":
        assert result.returncode != 0 and "DG_CHECKS: expected one of" in result.stderr
    else:
        assert result.stdout.strip() == expected, result.stderr


# ---- Mega MoE routing ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [8, -2, 1000])
def test_mega_moe_expert_ids_out_of_range(bad):
    from mega_moe_cases import Scenario, build_global, fill_buffer, local_weights, make_buffer
    sc = Scenario("sm90", tokens=(6,), topk=2, hidden=256, inter=128)
    data = build_global(sc)
    buf = make_buffer(sc, None)
    fill_buffer(sc, data, buf, 0)
    buf.topk_idx[4, 1] = bad
    l1, l2 = local_weights(sc, data, 0)
    y = torch.zeros(6, 256, dtype=BF16)
    _untouched(y, lambda: deep_gemm.fp8_mega_moe(y, l1, l2, buf),
               rf"sym_buffer.topk_idx: expected expert ids in \[-1, 8\) .*topk_idx\[4, 1\] = {bad}")
    buf.topk_idx[4, 1] = -1
    buf.topk_idx[6, 0] = 99  # past the tokens y holds: not routed, not checked
    deep_gemm.fp8_mega_moe(y, l1, l2, buf)
