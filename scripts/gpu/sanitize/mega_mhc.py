"""Sanitizer cases of ``mega_mhc`` (see README.md in this folder): both kernels on small odd token counts, each
token block, uneven hidden splits, normal and shifted mode and every scale layout, checked against the op's torch
reference with the tolerance rules of ``deep_gemm/testing/mega_mhc.py``."""

from __future__ import annotations

import torch

from deep_gemm.mega_mhc.plan import MhcOverrides
from deep_gemm.testing.mega_mhc import compare, make_inputs, make_outputs, run_kernels


def _case(tokens, hidden, shifted, fp8, block_t, splits, block_m=3):
    def case():
        d = make_inputs(tokens, hidden, shifted, seed=tokens, device="cuda")
        out = make_outputs(d, fp8, True, block_m)
        run_kernels(d, out, MhcOverrides(block_t, splits, kernels=True))
        torch.cuda.synchronize()
        compare(d, out, fp8, block_m)
    return case


CASES = [
    ("t1_decode_gemm_sf", _case(1, 1024, False, "gemm", 16, 5)),
    ("t17_shifted_shared_sf", _case(17, 2048, True, "routed", 16, 3, block_m=5)),
    ("t45_block32_bf16_only", _case(45, 1024, False, None, 32, 7)),
]
