"""The ``bf16_mega_gate`` Triton path (``deep_gemm/mega_gate/{launch,kernels}.py``) in Triton's interpreter on CPU
against the op's reference, with the tolerance rules of ``deep_gemm/testing/mega_gate.py``: the routing kernel alone
on the reference's own logits (selection bit for bit) over every scoring function, bias form, mask, force_random,
fixed routing, shared-as-routed experts and EP map, odd and zero token counts, E = 256 and odd-sized E; then the
whole op (BF16 GEMM + routing) on inputs where the GEMM is exact; and the plan.

The GPU runs of the same kernels are in test_mega_gate_gpu.py."""

from __future__ import annotations

import pytest
import torch

from deep_gemm.mega_gate import plan as gate_plan
from deep_gemm.testing import mega_gate as G
import interpreter_bf16  # noqa: F401  (BF16 tl.dot in the interpreter, for the gate GEMM)
from triton_harness import DEVICE

ROUTE_CASES = [
    dict(tokens=7, experts=20, topk=4, scoring="identity"),
    dict(tokens=9, experts=20, topk=4, scoring="sigmoid", bias="bias"),
    dict(tokens=9, experts=60, topk=6, scoring="sqrtsoftplus", bias="image"),
    dict(tokens=13, experts=28, topk=4, scoring="sigmoid", bias="both", mask=True, out=True),
    dict(tokens=11, experts=20, topk=4, shared=2, scoring="sqrtsoftplus", bias="both", fix=True),
    dict(tokens=10, experts=24, topk=3, shared=1, replicas=3, unmapped=True, mask=True),
    dict(tokens=12, experts=20, topk=4, shared=2, random=True, mask=True, unmapped=True),
    dict(tokens=12, experts=20, topk=4, shared=2, replicas=5, random=True, fix=True, mask=True, out=True,
         bias="bias", ep_rank=2 ** 31 + 5),
    dict(tokens=5, experts=256, topk=8, shared=1, scoring="sigmoid", bias="bias", replicas=2, mask=True),
    dict(tokens=3, experts=4, topk=4),                       # K = E: every expert, in key order
    dict(tokens=0, experts=20, topk=4, bias="bias", mask=True, random=True, unmapped=True),
]


def _id(case: dict) -> str:
    return "-".join(f"{k}{v}" for k, v in case.items())


@pytest.mark.parametrize("case", ROUTE_CASES, ids=_id)
def test_route_matches_reference_on_the_same_logits(case):
    d = G.make_inputs(device=DEVICE, seed=len(_id(case)), **case)
    logits = G.logits_of(d)
    assert G.compare(d, logits, *G.run_route(d, logits)) == 0


def test_route_ties_go_to_the_lower_index():
    """Logits on a coarse grid: many exact ties, each broken toward the lower expert as the stable sort does."""
    d = G.make_inputs(tokens=9, experts=32, topk=8, scoring="identity", device=DEVICE)
    logits = torch.randint(0, 4, (9, 32), generator=torch.Generator().manual_seed(1)).float().to(DEVICE)
    (gi, gw), (wi, ww), _, _ = G.run_route(d, logits)
    assert torch.equal(gi, wi)
    torch.testing.assert_close(gw, ww, rtol=G.WEIGHT_RTOL, atol=G.WEIGHT_ATOL)


@pytest.mark.parametrize("block_t", [1, 4])
def test_route_forced_token_blocks(block_t):
    d = G.make_inputs(tokens=6, experts=20, topk=4, bias="bias", mask=True, random=True, device=DEVICE)
    logits = G.logits_of(d)
    got = G.run_route(d, logits, gate_plan.MegaGateOverrides(block_t=block_t, kernels=True))
    assert G.compare(d, logits, *got) == 0


@pytest.mark.parametrize("case", [
    dict(tokens=5, experts=20, topk=4, scoring="sigmoid", bias="both", mask=True, unmapped=True),
    dict(tokens=9, experts=24, topk=6, shared=2, hidden=512, scoring="sqrtsoftplus", replicas=2, random=True,
         fix=True, out=True),
    dict(tokens=0, experts=20, topk=4),
], ids=_id)
def test_op_gemm_and_route(case):
    d = G.make_inputs(device=DEVICE, seed=3, grid=True, **case)
    assert G.compare(d, G.logits_of(d), *G.run_op(d)) == 0


def test_plan():
    cfg = gate_plan.kernel_plan(256, 9, 1)
    assert (cfg.block_t, cfg.block_e, cfg.block_k, cfg.block_c) == (8, 256, 16, 512)
    assert gate_plan.kernel_plan(512, 8, 0).block_t == 4
    assert gate_plan.kernel_plan(4, 4, 0).block_t == gate_plan.MAX_SELECT_TOKENS
    assert gate_plan.kernel_plan(4, 32, 0).block_t == gate_plan.SELECT_SLOT_ELEMS // 32
    assert gate_plan.kernel_plan(20, 4, 0, gate_plan.MegaGateOverrides(block_t=2)).block_t == 2
    with pytest.raises(Exception):
        gate_plan.kernel_plan(20, 4, 0, gate_plan.MegaGateOverrides(block_t=3))
    assert gate_plan.compile_configs()


def test_declines_unless_asked():
    from deep_gemm.core import gpu_validation
    from deep_gemm.core.registry import kernels_of
    if gpu_validation.kernels_by_default(gate_plan.FAMILY):
        pytest.skip("the family's kernels run by default")
    d = G.make_inputs(tokens=2, experts=8, topk=2, device=DEVICE)
    full = tuple(d[k] for k in ("x", "weight") + G.ARG_NAMES)
    assert kernels_of("bf16_mega_gate").triton(*full) is NotImplemented
