"""deep_gemm.legacy: DeepGEMM's legacy Triton grouped BF16 GEMMs, against float64 definitions written here.

CPU: the Triton kernels run in the interpreter at small shapes (tails in M, N and K included), and the torch
definitions in reference.py are checked too. GPU (marked ``gpu``): the compiled kernels at DeepGEMM's shapes.
"""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm import legacy
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.legacy import api as legacy_api
from deep_gemm.legacy import reference
from deep_gemm.legacy.plan import LegacyOverrides, LegacyTile
from deep_gemm.testing import calc_diff

BF16 = torch.bfloat16


@pytest.fixture
def alignment():
    """A small contiguous-layout alignment keeps interpreter runs short (BLOCK_M follows it)."""
    saved = deep_gemm.get_mk_alignment_for_contiguous_layout()
    deep_gemm.set_mk_alignment_for_contiguous_layout(32)
    yield 32
    deep_gemm.set_mk_alignment_for_contiguous_layout(saved)


def _m_layout(segments, alignment):
    """Expert id per row: each expert's rows then -1 padding up to the alignment."""
    parts = []
    for expert, rows in enumerate(segments):
        padded = -(-rows // alignment) * alignment
        parts.append(torch.tensor([expert] * rows + [-1] * (padded - rows), dtype=torch.int32))
    return torch.cat(parts)


def _expected_m(a_rows, b_nk, m_indices):
    """float64: row r = a_rows[r] @ b_nk[m_indices[r]].T, zero where m_indices is -1 or a_rows is absent."""
    out = torch.zeros(m_indices.numel(), b_nk.size(1), dtype=torch.float64)
    for r, e in enumerate(m_indices.tolist()):
        if e >= 0 and a_rows[r] is not None:
            out[r] = b_nk[e].double() @ a_rows[r].double()
    return out


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("fused", [False, True])
def test_m_grouped_matches_definition(layout, fused, alignment):
    torch.manual_seed(1)
    n, k, segments = 48, 80, (33, 0, 20)
    m_indices = _m_layout(segments, alignment)
    m = m_indices.numel()
    b_nk = torch.randn(len(segments), n, k, dtype=BF16)
    b = b_nk if layout == "nt" else b_nk.mT.contiguous()
    d = torch.full((m, n), float("nan"), dtype=BF16)
    if fused:
        a = torch.randn(m + 7, k, dtype=BF16)
        row_indices = torch.randint(0, a.size(0), (m,), dtype=torch.int32)
        row_indices[3] = -1
        getattr(legacy, f"a_fused_m_grouped_bf16_gemm_{layout}_contiguous_tl")(a, b, d, (m_indices, row_indices))
        a_rows = [a[i] if i >= 0 else None for i in row_indices.tolist()]
    else:
        a = torch.randn(m, k, dtype=BF16)
        getattr(legacy, f"m_grouped_bf16_gemm_{layout}_contiguous_tl")(a, b, d, m_indices)
        a_rows = list(a)
    want = _expected_m(a_rows, b_nk, m_indices)
    assert not d.isnan().any()
    assert calc_diff(d, want) < 1e-5
    assert torch.equal(d[m_indices < 0], torch.zeros_like(d[m_indices < 0]))
    # The torch definition (what CPU tensors run without the interpreter) agrees.
    d_ref = torch.empty_like(d)
    reference.m_grouped(a, b_nk if layout == "nt" else b.mT, d_ref, m_indices, row_indices if fused else None)
    assert calc_diff(d_ref, want) < 1e-5


def _k_handle(group_ks, total):
    starts, ends, pos = [], [], 0
    for kg in group_ks:
        starts.append(pos)
        ends.append(pos + kg)
        pos += kg
    assert pos <= total
    return torch.tensor(starts, dtype=torch.int32), torch.tensor(ends, dtype=torch.int32)


@pytest.mark.parametrize("fused", ["a", "b"])
@pytest.mark.parametrize("acc", [False, True])
def test_k_grouped_matches_definition(fused, acc, alignment):
    torch.manual_seed(2)
    m, n, group_ks = 40, 24, (32, 0, 70, 26)       # K tails inside a block, an empty group
    k = 128
    k_start, k_end = _k_handle(group_ks, k)
    src_rows = k + 5
    k_indices = torch.randint(0, src_rows, (k,), dtype=torch.int32)
    k_indices[7] = -1
    if fused == "a":
        a, b = torch.randn(src_rows, m, dtype=BF16), torch.randn(k, n, dtype=BF16)
    else:
        a, b = torch.randn(k, m, dtype=BF16), torch.randn(src_rows, n, dtype=BF16)
    d0 = torch.randn(len(group_ks), m, n)
    d = d0.clone()
    getattr(legacy, f"{fused}_fused_k_grouped_bf16_gemm_tn_contiguous_tl")(a, b, d, (k_indices, k_start, k_end), acc)
    want = d0.double() if acc else torch.zeros_like(d0, dtype=torch.float64)
    want = want.clone()
    for g, (s, e) in enumerate(zip(k_start.tolist(), k_end.tolist())):
        for kk in range(s, e):
            src = k_indices[kk].item()
            ra = (a[src] if src >= 0 else torch.zeros(m, dtype=BF16)) if fused == "a" else a[kk]
            rb = b[kk] if fused == "a" else (b[src] if src >= 0 else torch.zeros(n, dtype=BF16))
            want[g] += torch.outer(ra.double(), rb.double())
    assert calc_diff(d, want) < 1e-6
    if not acc:
        assert torch.equal(d[1], torch.zeros_like(d[1]))  # the empty group is zeroed
    d_ref = d0.clone()
    reference.k_grouped(a, b, d_ref, k_indices, k_start, k_end, acc, gather_a=fused == "a")
    assert calc_diff(d_ref, want) < 1e-6


@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_m_grouped_non_default_tile_matches_definition(layout, alignment):
    """The internal helper with another tile (what a tile sweep times) gives the
    definition's result; a block_m above the alignment is capped to it (16 here would also be legal)."""
    torch.manual_seed(5)
    n, k, segments = 40, 72, (20, 37)
    m_indices = _m_layout(segments, alignment)
    m = m_indices.numel()
    b_nk = torch.randn(len(segments), n, k, dtype=BF16)
    b = b_nk if layout == "nt" else b_nk.mT.contiguous().mT
    a = torch.randn(m + 3, k, dtype=BF16)
    row_indices = torch.randperm(m + 3)[:m].int()
    d = torch.full((m, n), float("nan"), dtype=BF16)
    tile = LegacyTile(block_m=256, block_n=16, block_k=32, num_warps=4, num_stages=2)
    legacy_api._m_grouped(a, b, d, m_indices, row_indices, LegacyOverrides(m_grouped_tile=tile))
    want = _expected_m([a[i] for i in row_indices.tolist()], b_nk, m_indices)
    assert not d.isnan().any()
    assert calc_diff(d, want) < 1e-5


def test_k_grouped_non_default_tile_matches_definition(alignment):
    torch.manual_seed(6)
    m, n, group_ks = 24, 40, (40, 0, 56)
    k = 96
    k_start, k_end = _k_handle(group_ks, k)
    k_indices = torch.randperm(k).int()
    a, b = torch.randn(k, m, dtype=BF16), torch.randn(k, n, dtype=BF16)
    d0 = torch.randn(len(group_ks), m, n)
    d = d0.clone()
    tile = LegacyTile(block_m=16, block_n=32, block_k=32, num_warps=4, num_stages=2)
    legacy_api._k_grouped(a, b, d, (k_indices, k_start, k_end), True, gather_a=False,
                          overrides=LegacyOverrides(k_grouped_tile=tile))
    want = d0.double().clone()
    reference.k_grouped(a, b, want, k_indices, k_start, k_end, True, gather_a=False)
    assert calc_diff(d, want) < 1e-6
    assert torch.equal(d[1], d0[1])  # the empty group is left as it was (acc)


def test_legacy_tile_rejects_bad_values():
    with pytest.raises(ValueError, match="block_n: expected a power of two"):
        LegacyTile(block_m=128, block_n=96, block_k=64, num_warps=8, num_stages=3)
    with pytest.raises(ValueError, match="num_stages: expected a positive int"):
        LegacyTile(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=0)
    assert LegacyTile(128, 256, 64, 8, 3).smem_bytes() == (128 + 256) * 64 * 2 * 3


def test_bad_arguments_raise_deepgemm_error(alignment):
    a, b = torch.randn(64, 32, dtype=BF16), torch.randn(2, 16, 32, dtype=BF16)
    d, idx = torch.empty(64, 16, dtype=BF16), torch.zeros(64, dtype=torch.int32)
    with pytest.raises(DeepGEMMError, match="m_indices: expected a contiguous 1-D int32"):
        legacy.m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, idx.long())
    with pytest.raises(DeepGEMMError, match="a: expected 16 columns|a: expected 32 columns|a: expected"):
        legacy.m_grouped_bf16_gemm_nt_contiguous_tl(a[:, :16].contiguous(), b, d, idx)
    with pytest.raises(DeepGEMMError, match="multiple of the contiguous-layout alignment"):
        legacy.m_grouped_bf16_gemm_nt_contiguous_tl(a[:40], b, d[:40], idx[:40])
    with pytest.raises(DeepGEMMError, match="mappings: expected a"):
        legacy.a_fused_m_grouped_bf16_gemm_nt_contiguous_tl(a, b, d, idx)
    with pytest.raises(DeepGEMMError, match="handle: expected a"):
        legacy.b_fused_k_grouped_bf16_gemm_tn_contiguous_tl(a, a, torch.empty(1, 32, 32), (idx, idx), True)


def test_zero_rows_is_a_no_op(alignment):
    d = torch.empty(0, 16, dtype=BF16)
    legacy.m_grouped_bf16_gemm_nt_contiguous_tl(torch.empty(0, 32, dtype=BF16), torch.randn(2, 16, 32, dtype=BF16),
                                                d, torch.empty(0, dtype=torch.int32))


# ---- GPU: DeepGEMM's shapes ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("fused", [False, True])
def test_m_grouped_gpu(layout, fused):
    torch.manual_seed(3)
    groups, n, k = 4, 4096, 7168
    m_indices = _m_layout((3000, 1, 128, 513), 128).cuda()
    m = m_indices.numel()
    b_nk = torch.randn(groups, n, k, dtype=BF16, device="cuda")
    b = b_nk if layout == "nt" else b_nk.mT.contiguous()
    a = torch.randn(m, k, dtype=BF16, device="cuda")
    d = torch.empty(m, n, dtype=BF16, device="cuda")
    if fused:
        rows = torch.randperm(m, device="cuda").int()
        getattr(legacy, f"a_fused_m_grouped_bf16_gemm_{layout}_contiguous_tl")(a, b, d, (m_indices, rows))
        a_used = a[rows.long()]
    else:
        getattr(legacy, f"m_grouped_bf16_gemm_{layout}_contiguous_tl")(a, b, d, m_indices)
        a_used = a
    ref = torch.empty_like(d)
    reference.m_grouped(a_used, b_nk, ref, m_indices, None)
    assert calc_diff(d, ref) < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("fused", ["a", "b"])
def test_k_grouped_gpu(fused):
    torch.manual_seed(4)
    m, n, group_ks = 4096, 7168, (2048, 0, 1024, 4096)
    k = sum(group_ks)
    k_start, k_end = (t.cuda() for t in _k_handle(group_ks, k))
    k_indices = torch.randperm(k, device="cuda").int()
    a = torch.randn(k, m, dtype=BF16, device="cuda")
    b = torch.randn(k, n, dtype=BF16, device="cuda")
    d = torch.randn(len(group_ks), m, n, device="cuda")
    ref = d.clone()
    getattr(legacy, f"{fused}_fused_k_grouped_bf16_gemm_tn_contiguous_tl")(a, b, d, (k_indices, k_start, k_end), True)
    reference.k_grouped(a, b, ref, k_indices, k_start, k_end, True, gather_a=fused == "a")
    assert calc_diff(d, ref) < 1e-4
