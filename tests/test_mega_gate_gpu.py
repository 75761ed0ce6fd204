"""The ``bf16_mega_gate`` Triton path on a GPU against the torch reference run on the same GPU, with the tolerance
rules of ``deep_gemm/testing/mega_gate.py``: the routing kernel on the reference's own logits at DeepSeek V3 / V4
router shapes (thousands of tokens, every scoring function, bias forms, masks, force_random, fixed routing,
shared-as-routed experts, an EP map), the whole op (BF16 GEMM + routing) on grid inputs where the GEMM is exact,
bit-identical repeats, and CUDA-graph capture."""

from __future__ import annotations

import pytest
import torch

from deep_gemm.mega_gate import plan as gate_plan
from deep_gemm.testing import mega_gate as G

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

DEV = "cuda"
ON = gate_plan.MegaGateOverrides(kernels=True)

# (hidden, E, K, scoring): DeepSeek V4 (sqrtsoftplus) and V3 (sigmoid) routers, and the largest E
ROUTERS = [(4096, 256, 6, "sqrtsoftplus"), (7168, 384, 6, "sqrtsoftplus"), (7168, 256, 8, "sigmoid"),
           (7168, 512, 16, "identity")]
FORMS = [
    dict(bias="bias", shared=1, mask=True, unmapped=True),                          # serving: bias, 1 shared
    dict(bias="both", replicas=4, mask=True, out=True, unmapped=True),              # image bias, EP map
    dict(shared=2, random=True, fix=True, mask=True, replicas=3),                   # load testing, fixed routing
    dict(),                                                                         # bare
]


def _id(x) -> str:
    return "-".join(f"{k}{v}" for k, v in x.items()) if isinstance(x, dict) else "-".join(map(str, x))


def _shared_ok(experts, topk, shared):
    return shared == 0 or (topk % shared == 0 and experts % (topk // shared) == 0)


# (shared-as-routed needs E a multiple of K / S: the combinations the op's check rejects are left out)
PAIRS = [(r, f) for r in ROUTERS for f in FORMS if _shared_ok(r[1], r[2], f.get("shared", 0))]


@pytest.mark.parametrize("tokens", [1, 7, 333, 4096, 16384])
@pytest.mark.parametrize("router,form", PAIRS, ids=[f"{_id(r)}-{_id(f)}" for r, f in PAIRS])
def test_route_on_reference_logits(tokens, router, form):
    hidden, experts, topk, scoring = router
    d = G.make_inputs(tokens, experts, topk, hidden=256, scoring=scoring, seed=tokens, device=DEV, **form)
    logits = (torch.randn(tokens, experts, generator=torch.Generator().manual_seed(tokens)) * 3).to(DEV)
    G.compare(d, logits, *G.run_route(d, logits))


@pytest.mark.parametrize("tokens", [1, 100, 4096])
@pytest.mark.parametrize("router", ROUTERS[:3], ids=_id)
def test_op_on_grid_inputs(tokens, router):
    hidden, experts, topk, scoring = router
    shared = 1 if _shared_ok(experts, topk, 1) else 0
    d = G.make_inputs(tokens, experts, topk, hidden=hidden, scoring=scoring, seed=tokens, grid=True, device=DEV,
                      bias="bias", shared=shared, mask=True, replicas=2, unmapped=True)
    G.compare(d, G.logits_of(d), *G.run_op(d))


@pytest.mark.parametrize("block_t", [1, 2, 16, gate_plan.MAX_SELECT_TOKENS])
def test_forced_token_blocks(block_t):
    d = G.make_inputs(1000, 64, 8, scoring="sigmoid", bias="both", random=True, mask=True, device=DEV)
    logits = G.logits_of(d)
    G.compare(d, logits, *G.run_route(d, logits, gate_plan.MegaGateOverrides(block_t=block_t, kernels=True)))


def test_repeats_are_bit_identical():
    d = G.make_inputs(2048, 256, 6, hidden=4096, scoring="sqrtsoftplus", bias="bias", device=DEV)
    (i1, w1), *_ = G.run_op(d)
    (i2, w2), *_ = G.run_op(d)
    assert torch.equal(i1, i2) and torch.equal(w1.view(torch.int32), w2.view(torch.int32))


def test_cuda_graph_capture():
    """The dispatcher's path (GEMM + routing) captured once and replayed on new inputs written in place."""
    from deep_gemm.core.registry import run_launcher
    d = G.make_inputs(512, 384, 6, hidden=4096, scoring="sqrtsoftplus", bias="bias", shared=1, grid=True,
                      mask=True, replicas=2, out=True, device=DEV)
    args = {k: d[k] for k in ("x", "weight") + G.ARG_NAMES}

    def call():
        return run_launcher("bf16_mega_gate", **args, launcher_kwargs=dict(overrides=ON))

    call()  # (compiles outside the capture)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        idx, w = call()
    fresh = G.make_inputs(512, 384, 6, hidden=4096, scoring="sqrtsoftplus", bias="bias", shared=1, grid=True,
                          mask=True, replicas=2, out=True, seed=9, device=DEV)
    for k in ("x", "bias", "mask"):
        d[k].copy_(fresh[k])
    graph.replay()
    torch.cuda.synchronize()
    want = G.bf16_mega_gate_reference(*({**d, "out_idx": None, "out_weights": None}[k]
                                        for k in ("x", "weight") + G.ARG_NAMES))
    G.compare(d, G.logits_of(d), (idx, w), want, d, d)
