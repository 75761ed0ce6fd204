"""The ``get_mqa_logits_metadata`` Triton kernel (``deep_gemm/attention/metadata/kernels.py``) in Triton's
interpreter on CPU, bit for bit against the reference: several SM budgets (odd ones put a padding word before the
spans), every head count, zero rows, rows without work, inverted and negative ranges, ranges past the KV's end,
and more Q blocks (2100 rows of 8 heads: 263) than one chunk of the kernel's walk.

The GPU run of the same kernel is in test_mqa_metadata_gpu.py."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.attention.metadata import plan as md_plan
from deep_gemm.attention.metadata import reference as md_ref
from triton_harness import DEVICE, triton_launcher

KERNELS = md_plan.MetadataOverrides(kernels=True)
OP = "get_mqa_logits_metadata"


def _kernel(*args):
    args = tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args)
    deep_gemm.core.registry.kernels_of(OP).check(*args)
    out = triton_launcher(OP)(*args, overrides=KERNELS)
    assert out is not NotImplemented
    return out.cpu()


@pytest.fixture(params=(1, 7, 20))
def num_sms(request, monkeypatch):
    for module in (md_plan, md_ref):
        monkeypatch.setattr(module, "schedule_sms", lambda: request.param)
    return request.param


@pytest.mark.parametrize("num_q, num_kv, num_heads", [
    (13, 3000, 32), (0, 10, 64), (1, 5, 8), (600, 20000, 16), (5, 0, 32), (2100, 4000, 8)],
    ids=lambda v: str(v))
def test_bitwise(num_sms, num_q, num_kv, num_heads):
    g = torch.Generator().manual_seed(num_q * 3 + num_kv + num_heads)
    ks = torch.randint(-50, num_kv + 50, (num_q,), generator=g, dtype=torch.int32)
    ke = ks + torch.randint(-10, 3000, (num_q,), generator=g, dtype=torch.int32)  # inverted rows, past the end
    if num_q > 3:
        ke[:3] = ks[:3]  # rows without work
    got = _kernel(ks, ke, num_kv, num_heads)
    assert torch.equal(got, md_ref.get_mqa_logits_metadata_reference(ks, ke, num_kv, num_heads))
    assert got.numel() == md_plan.metadata_words(num_q, num_heads, num_sms)


def test_declines_beyond_32_bits():
    assert md_plan.kernel_fits(2**17, 64, 2**17)
    assert not md_plan.kernel_fits(2**20, 64, 2**20)  # 2^19 Q blocks x (2^12 + 1) > 2^31
