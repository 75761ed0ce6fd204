"""The ``get_mqa_logits_metadata`` Triton kernel on one GPU, bit for bit against the reference run on the same GPU:
prefill-sized batches (up to 64K query rows, 128K KV tokens) at every head count, the device's SM count
and a few forced budgets, and under CUDA-graph capture. The kernel is asked for explicitly
(``MetadataOverrides(kernels=True)``), so a future opt-in period (core/gpu_validation.py) does not skip it."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.attention.metadata import plan as md_plan
from deep_gemm.attention.metadata import reference as md_ref
from deep_gemm.core.registry import run_launcher

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

KERNELS = md_plan.MetadataOverrides(kernels=True)
OP = "get_mqa_logits_metadata"


def _kernel(*args):
    out = run_launcher(OP, *args, launcher_kwargs=dict(overrides=KERNELS))
    assert out is not NotImplemented
    return out


def _ranges(num_q: int, num_kv: int, seed: int):
    """Windows [ks, ke) ending anywhere in the KV, of any length up to the whole KV; every 97th row empty."""
    g = torch.Generator().manual_seed(seed)
    ke = torch.randint(1, num_kv + 1, (num_q,), generator=g)
    ks = (ke - torch.randint(0, num_kv + 1, (num_q,), generator=g)).clamp(min=0)
    ke[::97] = ks[::97]
    return ks.to(torch.int32).cuda(), ke.to(torch.int32).cuda()


@pytest.mark.parametrize("num_heads", (8, 16, 32, 64))
@pytest.mark.parametrize("num_q, num_kv", [(4096, 8192), (65536, 131072), (777, 100000), (1, 1), (0, 16)])
def test_bitwise_device_sms(num_q, num_kv, num_heads):
    ks, ke = _ranges(num_q, num_kv, num_q + num_heads)
    got = _kernel(ks, ke, num_kv, num_heads)
    assert torch.equal(got, md_ref.get_mqa_logits_metadata_reference(ks, ke, num_kv, num_heads))


@pytest.mark.parametrize("num_sms", (1, 77, 148))
def test_bitwise_forced_sms(num_sms):
    before = deep_gemm.get_num_sms()
    deep_gemm.set_num_sms(min(num_sms, before))
    try:
        ks, ke = _ranges(8192, 65536, num_sms)
        got = _kernel(ks, ke, 65536, 64)
        assert torch.equal(got, md_ref.get_mqa_logits_metadata_reference(ks, ke, 65536, 64))
    finally:
        deep_gemm.set_num_sms(before)


def test_cuda_graph_capture_and_replay():
    ks, ke = _ranges(4096, 32768, 5)
    _kernel(ks, ke, 32768, 64)  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = _kernel(ks, ke, 32768, 64)
    new_ks, new_ke = _ranges(4096, 32768, 6)
    ks.copy_(new_ks)
    ke.copy_(new_ke)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, md_ref.get_mqa_logits_metadata_reference(ks, ke, 32768, 64))
