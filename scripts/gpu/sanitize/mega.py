"""Sanitizer cases of the SM90 FP8, the BF16 and the FP8 x FP4 Mega MoE layers (see README.md in this folder): every
launch of ``fp8_mega_moe`` / ``bf16_mega_moe`` / ``fp8_fp4_mega_moe`` at one rank (route, scan, dispatch, L1 with
SwiGLU (and FP8 quantisation), L2, combine) on small odd routings with both BLOCK_Ms (the ring layers' pool in the
ring and in the per-stream workspace, shared experts, FP4 and FP8 weights), and the pre-dispatch kernel, each checked
against the op's torch reference on the same buffer contents."""

from __future__ import annotations

import torch

import deep_gemm
from deep_gemm.mega import layer as mega_layer
from deep_gemm.mega.api import bf16_mega_moe_op_args, fp8_fp4_mega_moe_op_args, fp8_mega_moe_op_args
from deep_gemm.testing import calc_diff
from deep_gemm.testing.mega_moe import (bf16_buffer, bf16_weights, fp8_fp4_buffer, fp8_fp4_weights, routing,
                                        run_bf16_mega_moe_kernels, run_fp8_fp4_mega_moe_kernels,
                                        run_fp8_mega_moe_kernels, run_pre_dispatch_sm90_kernel, sm90_weights)


def _layer(tokens, experts, hidden, inter, topk, masked, block_m):
    def case():
        l1, l2 = deep_gemm.transform_weights_for_mega_moe_sm90(*sm90_weights(experts, hidden, inter, "cuda"))
        x, idx, w = routing(tokens, experts, topk, "cuda", masked=masked, hidden=hidden)
        ys, stats = [], []
        for kernel in (True, False):
            buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, experts, tokens, topk, hidden, inter,
                                                              device="cuda")
            run_pre_dispatch_sm90_kernel(x, idx, w, buf, tokens)
            y = torch.full((tokens, hidden), 3.0, dtype=torch.bfloat16, device="cuda")
            s = torch.zeros(experts, dtype=torch.int32, device="cuda")
            if kernel:
                run_fp8_mega_moe_kernels(y, l1, l2, buf, s, activation_clamp=10.0, block_m=block_m)
            else:
                mega_layer.fp8_mega_moe(*fp8_mega_moe_op_args(y, l1, l2, buf, s, activation_clamp=10.0))
            ys.append(y)
            stats.append(s)
        torch.cuda.synchronize()
        if not torch.equal(stats[0], stats[1]) or calc_diff(ys[0], ys[1]) > 2e-4:
            raise AssertionError(f"differs from the reference: {calc_diff(ys[0], ys[1])}")
    return case


def _ring_layer(kind, tokens, experts, hidden, inter, topk, masked, block_m, ring=None, shared=0):
    """A ``bf16_mega_moe`` or ``fp8_fp4_mega_moe`` case (``kind``: 'bf16', 'fp4' or 'fp8' weights; the FP8 x FP4
    layer's tokens through its pre-dispatch)."""
    def case():
        fp4 = kind == "fp4"
        if kind == "bf16":
            draw, buffer, run, op, op_args, tol = (bf16_weights, bf16_buffer, run_bf16_mega_moe_kernels,
                                                   mega_layer.bf16_mega_moe, bf16_mega_moe_op_args, 1e-4)
        else:
            draw = lambda *a, **kw: fp8_fp4_weights(*a, **kw, fp4=fp4)  # noqa: E731
            buffer, run, op, op_args, tol = (fp8_fp4_buffer, run_fp8_fp4_mega_moe_kernels,
                                             mega_layer.fp8_fp4_mega_moe, fp8_fp4_mega_moe_op_args, 1e-3)
        l1, l2 = deep_gemm.transform_weights_for_mega_moe(*draw(experts, hidden, inter, "cuda"))
        x, idx, w = routing(tokens, experts, topk, "cuda", masked=masked, hidden=hidden)
        extra = {}
        if shared:
            s1, s2 = draw(1, hidden, inter * shared, "cuda", seed=3)
            s1, s2 = (s1[0], s2[0]) if kind == "bf16" else ((s1[0][0], s1[1][0]), (s2[0][0], s2[1][0]))
            s1, s2 = deep_gemm.transform_weights_for_mega_moe(s1, s2)
            extra = dict(shared_l1_weights=s1, shared_l2_weights=s2)
        ys, stats = [], []
        for kernel in (True, False):
            buf = buffer(experts, tokens, topk, hidden, inter, "cuda", ring)
            if kind == "bf16":
                buf.x[:tokens].copy_(x)
                buf.topk_idx[:tokens].copy_(idx)
                buf.topk_idx[tokens:].fill_(-1)
                buf.topk_weights[:tokens].copy_(w)
            else:
                deep_gemm.mega_moe_pre_dispatch(x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, tokens)
            y = torch.full((tokens, hidden), 3.0, dtype=torch.bfloat16, device="cuda")
            s = torch.zeros(experts, dtype=torch.int32, device="cuda")
            if kernel:
                run(y, l1, l2, buf, s, activation_clamp=10.0, block_m=block_m, **extra)
            else:
                op(*op_args(y, l1, l2, buf, cumulative_local_expert_recv_stats=s, activation_clamp=10.0, **extra))
            ys.append(y)
            stats.append(s)
        torch.cuda.synchronize()
        if not torch.equal(stats[0], stats[1]) or calc_diff(ys[0], ys[1]) > tol:
            raise AssertionError(f"differs from the reference: {calc_diff(ys[0], ys[1])}")
    return case


CASES = [
    ("layer_t13_e6_k3_bm64", _layer(13, 6, 384, 256, 3, 0.3, 64)),
    ("layer_t70_e4_k2_bm128", _layer(70, 4, 256, 128, 2, 0.0, 128)),
    ("layer_t5_e8_k4_all_masked", _layer(5, 8, 256, 128, 4, 1.0, 64)),
    ("bf16_layer_t13_e6_k3_bm64", _ring_layer("bf16", 13, 6, 384, 256, 3, 0.3, 64)),
    ("bf16_layer_t70_e4_k2_bm128", _ring_layer("bf16", 70, 4, 256, 128, 2, 0.0, 128)),
    ("bf16_layer_t90_e8_k6_pool_in_workspace", _ring_layer("bf16", 90, 8, 256, 128, 6, 0.1, None, ring=384)),
    ("bf16_layer_t37_e8_k2_shared2", _ring_layer("bf16", 37, 8, 256, 128, 2, 0.2, 64, shared=2)),
    ("fp8_fp4_layer_t13_e6_k3_bm64", _ring_layer("fp4", 13, 6, 384, 256, 3, 0.3, 64)),
    ("fp8_fp4_layer_t70_e4_k2_bm128_fp8w", _ring_layer("fp8", 70, 4, 256, 128, 2, 0.0, 128)),
    ("fp8_fp4_layer_t90_e8_k6_pool_in_workspace", _ring_layer("fp4", 90, 8, 256, 128, 6, 0.1, None, ring=384)),
    ("fp8_fp4_layer_t37_e8_k2_shared2", _ring_layer("fp4", 37, 8, 256, 128, 2, 0.2, 64, shared=2)),
]
