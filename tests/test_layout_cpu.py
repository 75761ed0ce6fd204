"""The layout ops' Triton launchers (interpreter on the CPU, the device on a GPU) against their torch references,
bit for bit, with the same sizes, strides and dtypes; and the public API's pass-through of inputs already in layout."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.layout import reference as ref
from triton_harness import DEVICE, triton_launcher


def _same(out, want):
    assert out.shape == want.shape and out.stride() == want.stride() and out.dtype == want.dtype
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))


def _powers_of_two(*shape):
    x = torch.ldexp(torch.ones(shape), torch.randint(-126, 128, shape))
    return torch.where(torch.rand(shape) < 0.5, x, -x).to(DEVICE)


def _layouts(t):
    strided = torch.empty(*t.shape[:-1], t.size(-1) * 2, device=t.device)[..., ::2]
    strided.copy_(t)
    return [t, t.transpose(-1, -2).contiguous().transpose(-1, -2), strided]


# (Narrow inputs take tiles of up to layout_plan.NARROW_MAX_ROWS rows: 1100 x 1 and 600 x 3 span several.)
SHAPES = [(5, 3), (129, 7), (2, 65, 57), (64, 1), (3, 4, 130), (2, 1100, 1), (600, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mn_major_copy_and_pack(shape):
    for sf in _layouts(torch.randn(shape, device=DEVICE)):
        _same(triton_launcher("get_mn_major_tma_aligned_tensor")(sf),
              ref.get_mn_major_tma_aligned_tensor_reference(sf))
    for sf in _layouts(_powers_of_two(*shape)):
        _same(triton_launcher("get_mn_major_tma_aligned_packed_ue8m0_tensor")(sf, None),
              ref.get_mn_major_tma_aligned_packed_ue8m0_tensor_reference(sf, None))


@pytest.mark.parametrize("ks,psum,k_alignment", [([256, 0, 384, 128], False, 128), ([128] * 5, False, 128),
                                                  ([64, 32, 96], False, 32), ([256, 300, 700], True, 32),
                                                  ([0, 128, 129], True, 64)])
def test_k_grouped_pack(ks, psum, k_alignment):
    gran_k = 32
    if psum:
        num_sf_rows = sum(-(-max(0, e - ((p + k_alignment - 1) // k_alignment * k_alignment)) // gran_k)
                          for p, e in zip([0] + ks[:-1], ks))
        ks_cpu = None
    else:
        num_sf_rows, ks_cpu = sum(ks) // gran_k, ks
    sf = _powers_of_two(num_sf_rows, 16)
    layout = torch.tensor(ks, dtype=torch.int32, device=DEVICE)
    args = (sf, layout, ks_cpu, gran_k, k_alignment, psum)
    _same(triton_launcher("get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor")(*args),
          ref.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_reference(*args))


@pytest.mark.parametrize("dtype", (torch.float32, torch.int32))
def test_transform_per_row(dtype):
    sf = torch.randn(2, 100, 56, device=DEVICE) if dtype == torch.float32 else \
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(_powers_of_two(2, 100, 56).abs().cpu()).to(DEVICE)
    k = 7168 if dtype == torch.float32 else 56 * 128
    args = (sf, 100, k, [1, 128], 2, None, False, None)
    _same(triton_launcher("transform_sf_into_required_layout")(*args),
          ref.transform_sf_into_required_layout_reference(*args))


def test_public_api_returns_inputs_already_in_layout():
    sf = torch.randn(56, 132, device=DEVICE).T  # [132, 56], MN-major, 132 % 4 == 0
    assert deep_gemm.get_mn_major_tma_aligned_tensor(sf) is sf
    assert deep_gemm.transform_sf_into_required_layout(sf, 132, 7168, (1, 128, 128), is_sfa=True) is sf
    block = torch.randn(2, 56, device=DEVICE)
    assert deep_gemm.transform_sf_into_required_layout(block, 256, 7168, (1, 128, 128), is_sfa=False) is block
    odd = torch.randn(56, 131, device=DEVICE).T  # 131 rows: the column stride is not TMA-aligned
    out = deep_gemm.get_mn_major_tma_aligned_tensor(odd)
    assert out is not odd and out.stride() == (1, 132) and torch.equal(out, odd)
