"""Random inputs of the SM90 FP8, the FP8 x FP4 and the BF16 Mega MoE layers on any device (GPU tests and
``benchmarks/bench_mega_moe.py``).

``sm90_weights`` quantises random weights the way DeepSeek-V3-style checkpoints store them (FP8 with FP32 128x128
block scales, L1 rows in ``[gate | up]`` order) one expert at a time, so the FP32 temporaries stay one expert's size;
``transform_weights_for_mega_moe_sm90`` turns them into what ``fp8_mega_moe`` takes. ``fp8_fp4_weights`` quantises
them to FP4 (or FP8) with UE8M0 scales per 32 and ``bf16_weights`` draws BF16 weights, the same way
(``transform_weights_for_mega_moe`` interleaves either for ``fp8_fp4_mega_moe`` / ``bf16_mega_moe``);
``fp8_fp4_buffer`` / ``bf16_buffer`` build a one-rank ``fp8xfp4`` / ``bf16xbf16`` buffer on any device. ``routing``
draws top-k expert ids (distinct per token, optionally masked with -1, optionally leaving odd experts idle) and
weights. ``run_fp8_mega_moe_kernels`` / ``run_fp8_fp4_mega_moe_kernels`` / ``run_bf16_mega_moe_kernels`` /
``run_pre_dispatch_sm90_kernel`` run the ops on their Triton kernels (asking for them with
``MegaOverrides(kernels=True)``, so a decline surfaces instead of the reference running), the way the public calls
would.
"""

from __future__ import annotations

from typing import Optional

import torch

from ..utils.math import align
from ..utils.quant import per_block_cast_to_fp8

__all__ = ["sm90_weights", "bf16_weights", "fp8_fp4_weights", "bf16_buffer", "fp8_fp4_buffer", "routing",
           "run_fp8_mega_moe_kernels", "run_bf16_mega_moe_kernels", "run_fp8_fp4_mega_moe_kernels",
           "run_pre_dispatch_sm90_kernel"]


def sm90_weights(num_experts: int, hidden: int, intermediate: int, device, seed: int = 0):
    """((W1 FP8 [E, 2I, H], FP32 [E, 2I/128, H/128]), (W2 FP8 [E, H, I], FP32 [E, H/128, I/128])), ``[gate | up]``."""
    g = torch.Generator(device=device).manual_seed(seed)
    fp8 = torch.float8_e4m3fn
    w1 = torch.empty(num_experts, 2 * intermediate, hidden, dtype=fp8, device=device)
    w2 = torch.empty(num_experts, hidden, intermediate, dtype=fp8, device=device)
    s1 = torch.empty(num_experts, 2 * intermediate // 128, hidden // 128, device=device)
    s2 = torch.empty(num_experts, hidden // 128, intermediate // 128, device=device)
    for e in range(num_experts):
        a = torch.randn(2 * intermediate, hidden, generator=g, device=device) / hidden ** 0.5
        w1[e], s1[e] = per_block_cast_to_fp8(a, use_ue8m0=False)
        b = torch.randn(hidden, intermediate, generator=g, device=device) / intermediate ** 0.5
        w2[e], s2[e] = per_block_cast_to_fp8(b, use_ue8m0=False)
    return (w1, s1), (w2, s2)


def bf16_weights(num_experts: int, hidden: int, intermediate: int, device, seed: int = 0):
    """(W1 BF16 [E, 2I, H] in ``[gate | up]`` order, W2 BF16 [E, H, I]), drawn one expert at a time."""
    g = torch.Generator(device=device).manual_seed(seed)
    w1 = torch.empty(num_experts, 2 * intermediate, hidden, dtype=torch.bfloat16, device=device)
    w2 = torch.empty(num_experts, hidden, intermediate, dtype=torch.bfloat16, device=device)
    for e in range(num_experts):
        w1[e] = torch.randn(2 * intermediate, hidden, generator=g, device=device) / hidden ** 0.5
        w2[e] = torch.randn(hidden, intermediate, generator=g, device=device) / intermediate ** 0.5
    return w1, w2


def fp8_fp4_weights(num_experts: int, hidden: int, intermediate: int, device, seed: int = 0, fp4: bool = True):
    """((W1 [E, 2I, H], sf), (W2 [E, H, I], sf)) in ``[gate | up]`` order, FP4 E2M1 packed in int8 (half the
    columns) or FP8 E4M3 (``fp4=False``), with packed UE8M0 scales per 32 (``int32 [E, N, K / 128]``), quantised one
    expert at a time; ``transform_weights_for_mega_moe`` turns them into what ``fp8_fp4_mega_moe`` takes."""
    from ..utils.quant import per_token_cast_to_fp4, per_token_cast_to_fp8
    g = torch.Generator(device=device).manual_seed(seed)

    def cast(w):
        if fp4:
            return per_token_cast_to_fp4(w, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
        return per_token_cast_to_fp8(w, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)

    out = []
    for rows, cols in ((2 * intermediate, hidden), (hidden, intermediate)):
        pairs = [cast(torch.randn(rows, cols, generator=g, device=device) / cols ** 0.5) for _ in range(num_experts)]
        out.append((torch.stack([q for q, _ in pairs]), torch.stack([sf for _, sf in pairs])))
    return tuple(out)


def _ring_buffer(num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int, intermediate: int,
                 device, num_ring_tokens: Optional[int], mma_type: str):
    from ..mega import api
    tokens = align(num_max_tokens_per_rank, api.get_token_alignment_for_mega_moe())
    if num_ring_tokens is None:
        num_ring_tokens = api.get_ring_limit_for_mega_moe(tokens, num_experts, num_topk, 1)[1]
    return api.SymmBuffer(None, num_experts, tokens, num_topk, hidden, intermediate, mma_type=mma_type,
                          num_ring_tokens=num_ring_tokens, device=device)


def bf16_buffer(num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int, intermediate: int,
                device, num_ring_tokens: Optional[int] = None):
    """A one-rank ``bf16xbf16`` ``SymmBuffer`` on any device (``get_symm_buffer_for_mega_moe`` gives Hopper GPUs the
    SM90 FP8 buffer, as DeepGEMM does); the ring defaults to the largest useful one."""
    return _ring_buffer(num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate, device,
                        num_ring_tokens, "bf16xbf16")


def fp8_fp4_buffer(num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int, intermediate: int,
                   device, num_ring_tokens: Optional[int] = None):
    """A one-rank ``fp8xfp4`` ``SymmBuffer`` on any device (as ``bf16_buffer``)."""
    return _ring_buffer(num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate, device,
                        num_ring_tokens, "fp8xfp4")


def routing(num_tokens: int, num_experts: int, num_topk: int, device, masked: float = 0.0,
            idle_experts: bool = False, seed: int = 0, bf16_x: bool = True, hidden: Optional[int] = None):
    """(x BF16 [T, H] or None, topk_idx int64 [T, k], topk_weights FP32 [T, k]); ids distinct per token, -1 for a
    masked slot (``masked`` = share of slots; 1.0 masks all)."""
    g = torch.Generator(device=device).manual_seed(seed + 1)
    scores = torch.rand(num_tokens, num_experts, generator=g, device=device)
    if idle_experts:
        scores[:, 1::2] = -1.0
    idx = scores.topk(num_topk, dim=1).indices
    if masked >= 1.0:
        idx[:] = -1
    elif masked > 0:
        idx[torch.rand(num_tokens, num_topk, generator=g, device=device) < masked] = -1
    weights = torch.rand(num_tokens, num_topk, generator=g, device=device) + 0.25
    x = None
    if bf16_x and hidden is not None:
        x = torch.randn(num_tokens, hidden, generator=g, device=device).bfloat16()
    return x, idx, weights


def _run_kernels(op: str, args: tuple, block_m: Optional[int] = None) -> None:
    from ..core.registry import run_launcher
    from ..mega.plan import MegaOverrides
    if run_launcher(op, *args, launcher_kwargs={"overrides": MegaOverrides(block_m, kernels=True)}) \
            is NotImplemented:
        raise RuntimeError(f"{op}: its Triton launcher declined these arguments")


def run_fp8_mega_moe_kernels(y, l1_weights, l2_weights, sym_buffer, stats=None, activation_clamp=None,
                             fast_math: bool = True, block_m: Optional[int] = None) -> None:
    """``fp8_mega_moe(y, l1_weights, l2_weights, sym_buffer, stats, activation_clamp=..., fast_math=...)`` on the
    Triton kernels (``block_m`` pins the tile); raises when the launcher declines."""
    from ..mega.api import fp8_mega_moe_op_args
    _run_kernels("fp8_mega_moe", fp8_mega_moe_op_args(y, l1_weights, l2_weights, sym_buffer, stats,
                                                      activation_clamp=activation_clamp, fast_math=fast_math), block_m)


def run_bf16_mega_moe_kernels(y, l1_weights, l2_weights, sym_buffer, stats=None, activation_clamp=None,
                              fast_math: bool = True, block_m: Optional[int] = None, shared_l1_weights=None,
                              shared_l2_weights=None) -> None:
    """``bf16_mega_moe(y, l1_weights, l2_weights, sym_buffer, cumulative_local_expert_recv_stats=stats, ...)`` on the
    Triton kernels (``block_m`` pins the tile); raises when the launcher declines."""
    from ..mega.api import bf16_mega_moe_op_args
    _run_kernels("bf16_mega_moe", bf16_mega_moe_op_args(y, l1_weights, l2_weights, sym_buffer, shared_l1_weights,
                                                        shared_l2_weights, cumulative_local_expert_recv_stats=stats,
                                                        activation_clamp=activation_clamp, fast_math=fast_math),
                 block_m)


def run_fp8_fp4_mega_moe_kernels(y, l1_weights, l2_weights, sym_buffer, stats=None, activation_clamp=None,
                                 fast_math: bool = True, block_m: Optional[int] = None, shared_l1_weights=None,
                                 shared_l2_weights=None) -> None:
    """``fp8_fp4_mega_moe(y, l1_weights, l2_weights, sym_buffer, cumulative_local_expert_recv_stats=stats, ...)`` on
    the Triton kernels (``block_m`` pins the tile); raises when the launcher declines."""
    from ..mega.api import fp8_fp4_mega_moe_op_args
    _run_kernels("fp8_fp4_mega_moe", fp8_fp4_mega_moe_op_args(
        y, l1_weights, l2_weights, sym_buffer, shared_l1_weights, shared_l2_weights,
        cumulative_local_expert_recv_stats=stats, activation_clamp=activation_clamp, fast_math=fast_math), block_m)


def run_pre_dispatch_sm90_kernel(x, topk_idx, topk_weights, sym_buffer, num_tokens: int, group_size: int = 128,
                                 routed_scaling_factor: float = 1.0) -> None:
    """``mega_moe_pre_dispatch_sm90`` into ``sym_buffer``'s input views on the Triton kernel."""
    b = sym_buffer
    _run_kernels("mega_moe_pre_dispatch_sm90", (x, topk_idx, topk_weights, b.x, b.x_sf, b.topk_idx, b.topk_weights,
                                                num_tokens, group_size, routed_scaling_factor))
