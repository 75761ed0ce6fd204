"""Sanitizer cases of ``bf16_mega_gate`` (see README.md in this folder): the whole Triton path (BF16 GEMM + routing
kernel) on small odd token counts, partial token blocks and odd expert counts, every optional argument form (biases,
masks, fixed routing, force_random, shared-as-routed experts, an EP map, caller outputs), checked against the op's
torch reference with the tolerance rules of ``deep_gemm/testing/mega_gate.py``."""

from __future__ import annotations

import torch

from deep_gemm.testing import mega_gate as G

DEVICE = "cuda"


def _case(tokens, experts, topk, **form):
    def case():
        d = G.make_inputs(tokens, experts, topk, seed=tokens, grid=True, device=DEVICE, **form)
        got = G.run_op(d)
        torch.cuda.synchronize()
        G.compare(d, G.logits_of(d), *got)
    return case


CASES = [
    ("t5_e20_bias_mask", _case(5, 20, 4, scoring="sigmoid", bias="both", mask=True, unmapped=True)),
    ("t37_e256_ep_map_shared", _case(37, 256, 8, shared=1, scoring="sqrtsoftplus", bias="bias", replicas=3,
                                     out=True)),
    ("t13_e60_random_fixed", _case(13, 60, 4, shared=2, random=True, fix=True, mask=True, replicas=2)),
]
