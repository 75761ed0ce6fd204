"""Sanitizer cases of the SM90 FP8 Mega MoE layer (see README.md in this folder): every launch of ``fp8_mega_moe``
at one rank (route, scan, dispatch, L1 with SwiGLU and quantisation, L2, combine) on small odd routings with both
BLOCK_Ms, and the pre-dispatch kernel, each checked against the op's torch reference on the same buffer contents."""

from __future__ import annotations

import torch

import deep_gemm
from deep_gemm.core.registry import run_launcher
from deep_gemm.mega import layer as mega_layer
from deep_gemm.mega.plan import MegaOverrides
from deep_gemm.testing import calc_diff
from deep_gemm.testing.mega_moe import routing, sm90_weights


def _layer(tokens, experts, hidden, inter, topk, masked, block_m):
    def case():
        l1, l2 = deep_gemm.transform_weights_for_mega_moe_sm90(*sm90_weights(experts, hidden, inter, "cuda"))
        x, idx, w = routing(tokens, experts, topk, "cuda", masked=masked, hidden=hidden)
        ys, stats = [], []
        for kernel in (True, False):
            buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, experts, tokens, topk, hidden, inter,
                                                              device="cuda")
            pre = (x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, tokens, 128, 1.0)
            if run_launcher("mega_moe_pre_dispatch_sm90", *pre,
                            launcher_kwargs={"overrides": MegaOverrides(kernels=True)}) is NotImplemented:
                raise RuntimeError("the pre-dispatch launcher declined")
            y = torch.full((tokens, hidden), 3.0, dtype=torch.bfloat16, device="cuda")
            s = torch.zeros(experts, dtype=torch.int32, device="cuda")
            args = (y, l1[0], l1[1], l2[0], l2[1], s, buf.buffer, list(buf.handle.buffer_ptrs), 0,
                    buf.num_max_tokens_per_rank, experts, topk, [128, 128, 128], "swiglu", 10.0, True)
            if kernel:
                if run_launcher("fp8_mega_moe", *args,
                                launcher_kwargs={"overrides": MegaOverrides(block_m, kernels=True)}) is NotImplemented:
                    raise RuntimeError("the Triton launcher declined")
            else:
                mega_layer.fp8_mega_moe(*args)
            ys.append(y)
            stats.append(s)
        torch.cuda.synchronize()
        if not torch.equal(stats[0], stats[1]) or calc_diff(ys[0], ys[1]) > 2e-4:
            raise AssertionError(f"differs from the reference: {calc_diff(ys[0], ys[1])}")
    return case


CASES = [
    ("layer_t13_e6_k3_bm64", _layer(13, 6, 384, 256, 3, 0.3, 64)),
    ("layer_t70_e4_k2_bm128", _layer(70, 4, 256, 128, 2, 0.0, 128)),
    ("layer_t5_e8_k4_all_masked", _layer(5, 8, 256, 128, 4, 1.0, 64)),
]
