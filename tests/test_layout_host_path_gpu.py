"""The layout family's host fast path on the GPU: replayed launches (``core/plans.replayable_allocating``, views
passed to the C launcher as addresses) and the per-signature as-is decision of the public functions give the torch
reference bit for bit on new data at the same metadata, in a CUDA graph too."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.layout import reference as ref

pytestmark = pytest.mark.gpu


def _same(out, want):
    assert out.shape == want.shape and out.stride() == want.stride() and out.dtype == want.dtype
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))


def _fp32(shape, transposed=False):
    sf = torch.randn(shape, device="cuda")
    return sf.transpose(-1, -2).contiguous().transpose(-1, -2) if transposed else sf


@pytest.mark.parametrize("shape,mn,k,recipe,groups,is_sfa", [
    ((16, 4), 16, 512, (1, 128), None, None),
    ((129, 57), 129, 7168 + 128, (1, 128, 128), None, True),
    ((3, 1000, 57), 1000, 7168 + 128, (1, 1, 128), 3, False),
    ((5, 3), 5, 96, (1, 32), None, None),
])
@pytest.mark.parametrize("transposed", (False, True))
def test_replayed_transform_on_new_data(shape, mn, k, recipe, groups, is_sfa, transposed):
    for _ in range(4):  # the first call records, the others replay
        sf = _fp32(shape, transposed)
        out = deep_gemm.transform_sf_into_required_layout(sf, mn, k, recipe, num_groups=groups, is_sfa=is_sfa)
        want = ref.transform_sf_into_required_layout_reference(sf, mn, k, list(recipe), groups, is_sfa, False, None)
        if out is sf:  # already MN-major and TMA-aligned
            assert want.stride() == sf.stride() and torch.equal(want, sf)
        else:
            _same(out, want)
    torch.cuda.synchronize()


def test_replayed_packed_and_mn_major_helpers_on_new_data():
    for _ in range(4):
        sf = torch.exp2(torch.randint(-20, 20, (2, 300, 9), device="cuda").float())
        _same(deep_gemm.get_mn_major_tma_aligned_tensor(sf), ref.get_mn_major_tma_aligned_tensor_reference(sf))
        packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
        _same(packed, ref.get_mn_major_tma_aligned_packed_ue8m0_tensor_reference(sf, None))
        out = deep_gemm.transform_sf_into_required_layout(packed, 300, 9 * 128, (1, 128), num_groups=2)
        assert out is packed
        canonical = torch.ops.deep_gemm.transform_sf_into_required_layout(packed, 300, 9 * 128, [1, 128], 2)
        _same(canonical, packed)


def test_replayed_transform_in_a_cuda_graph():
    sf = torch.randn(64, 4, device="cuda")
    for _ in range(2):
        deep_gemm.transform_sf_into_required_layout(sf, 64, 512, (1, 128))  # record, then replay
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = deep_gemm.transform_sf_into_required_layout(sf, 64, 512, (1, 128))
    sf.copy_(torch.randn_like(sf))
    graph.replay()
    torch.cuda.synchronize()
    assert out.stride() == (1, 64) and torch.equal(out, sf)
