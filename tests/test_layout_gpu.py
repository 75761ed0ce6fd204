"""The layout ops on the GPU: DeepGEMM's test_layout_reference_cpu shapes (SM90, gran_k 128) through the dispatcher ops,
bit for bit against the torch references, and the public API's pass-through of inputs already in layout."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.layout import reference as ref

pytestmark = pytest.mark.gpu
OPS = torch.ops.deep_gemm


def _same(out, want):
    assert out.shape == want.shape and out.stride() == want.stride() and out.dtype == want.dtype
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))


ROWS = [(mn, k, g, t) for mn in (4096, 4097, 8192) for k in (128, 7168, 7296) for g in (1, 2, 4) for t in (True, False)]


@pytest.mark.parametrize("mn,k,groups,transposed", ROWS)
def test_deepgemm_layout_rows(mn, k, groups, transposed):
    sf_k = -(-k // 128)
    sf = torch.rand(groups * mn, sf_k, device="cuda") + 0.5
    sf = torch.exp2(torch.ceil(torch.log2(sf)))
    sf = sf if groups == 1 else sf.view(groups, mn, sf_k)
    sf = sf if transposed else sf.transpose(-1, -2).contiguous().transpose(-1, -2)
    _same(OPS.get_mn_major_tma_aligned_tensor(sf), ref.get_mn_major_tma_aligned_tensor_reference(sf))
    _same(OPS.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf),
          ref.get_mn_major_tma_aligned_packed_ue8m0_tensor_reference(sf, None))
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert torch.equal(out, sf)
    # DeepGEMM's rule for returning the input: MN-major with the column stride TMA-aligned, groups dense (with
    # sf_k == 1 torch keeps a unit column stride: that input is copied, by DeepGEMM too).
    aligned = -(-mn // 4) * 4
    in_layout = sf.stride()[-2:] == (1, aligned) and (sf.dim() == 2 or sf.stride(0) == aligned * sf_k)
    assert (out is sf) == in_layout


@pytest.mark.parametrize("mn", (4096, 7168))
@pytest.mark.parametrize("num_groups,avg_k", [(16, 2048), (8, 4096), (72, 384), (128, 256)])
def test_deepgemm_k_grouped_rows(mn, num_groups, avg_k):
    g = torch.Generator().manual_seed(num_groups)
    ks = [int(x) // 128 * 128 for x in (torch.rand(num_groups, generator=g) * 0.6 + 0.7) * avg_k]
    sf = torch.exp2(torch.randint(-20, 20, (sum(ks) // 128, mn), device="cuda").float())
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    args = (sf, layout, ks, 128, 128, False)
    _same(OPS.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(*args),
          ref.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_reference(*args))


def test_layout_ops_in_a_cuda_graph():
    sf = torch.randn(3, 1000, 57, device="cuda")
    OPS.get_mn_major_tma_aligned_tensor(sf)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = OPS.get_mn_major_tma_aligned_tensor(sf)
    sf.copy_(torch.randn_like(sf))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, sf)
