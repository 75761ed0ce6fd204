"""Argument checks of ``bf16_mega_gate`` and ``get_bf16_mega_gate_config`` (DeepGEMM's host asserts, as errors)."""

from __future__ import annotations

import math

import torch

from ..core.errors import require, require_contiguous, require_dim, require_dtype, require_same_device
from .plan import MAX_ROUTED_EXPERTS, MAX_TOKENS

SCORING_FUNCS = ("sigmoid", "sqrtsoftplus", "identity")
MAX_TOPK = 32


def _check_sizes(num_tokens: int, hidden: int, num_routed_experts: int, num_topk: int, allow_zero_tokens: bool):
    low = 0 if allow_zero_tokens else 1
    require(low <= num_tokens <= MAX_TOKENS,
            f"num_tokens: expected an integer in [{low}, {MAX_TOKENS}], got {num_tokens}")
    require(hidden > 0 and hidden % 256 == 0, f"hidden: expected a positive multiple of 256, got {hidden}")
    require(0 < num_routed_experts <= MAX_ROUTED_EXPERTS and num_routed_experts % 4 == 0,
            f"num_routed_experts: expected a multiple of 4 in [4, {MAX_ROUTED_EXPERTS}], got {num_routed_experts}")
    require(0 < num_topk <= min(num_routed_experts, MAX_TOPK),
            f"num_topk: expected an integer in [1, min(num_routed_experts, {MAX_TOPK})], got {num_topk}")


def check_get_bf16_mega_gate_config(num_tokens, hidden, num_routed_experts, num_topk) -> None:
    _check_sizes(num_tokens, hidden, num_routed_experts, num_topk, allow_zero_tokens=False)


def _optional(name: str, t, shape: tuple, dtype, contiguous: bool = True) -> None:
    if t is None:
        return
    require_dtype(name, t, (dtype,))
    require(tuple(t.shape) == shape, f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if contiguous:
        require_contiguous(name, t)


def effective_shared(use_shared_as_routed: bool, num_shared_experts: int) -> int:
    return num_shared_experts if use_shared_as_routed else 0


def check_bf16_mega_gate(x, weight, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor,
                         ep_rank, scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask,
                         to_physical_map, logical_count, unmapped_topk_idx, force_random, out_idx, out_weights):
    require_same_device(x=x, weight=weight, mask=mask, bias=bias, image_bias=image_bias,
                        image_token_mask=image_token_mask, fix_routing_mask=fix_routing_mask,
                        to_physical_map=to_physical_map, logical_count=logical_count,
                        unmapped_topk_idx=unmapped_topk_idx, force_random=force_random, out_idx=out_idx,
                        out_weights=out_weights)
    for name, t in (("x", x), ("weight", weight)):
        require_dtype(name, t, (torch.bfloat16,))
        require_dim(name, t, 2)
        require_contiguous(name, t)
    num_tokens, hidden = x.shape
    num_experts = weight.size(0)
    require(weight.size(1) == hidden, f"weight: expected [num_routed_experts, {hidden}] (hidden of x), "
                                      f"got {tuple(weight.shape)}")
    _check_sizes(num_tokens, hidden, num_experts, num_topk, allow_zero_tokens=True)
    require(ep_rank >= 0, f"ep_rank: expected a non-negative rank, got {ep_rank}")
    require(math.isfinite(routed_scaling_factor),
            f"routed_scaling_factor: expected a finite number, got {routed_scaling_factor}")
    require(scoring_func in SCORING_FUNCS, f"scoring_func: expected one of {SCORING_FUNCS}, got {scoring_func!r}")
    if use_shared_as_routed:
        require(num_shared_experts in (1, 2),
                f"num_shared_experts: expected 1 or 2 with use_shared_as_routed, got {num_shared_experts}")
        require(num_topk % num_shared_experts == 0,
                f"num_topk: expected a multiple of num_shared_experts = {num_shared_experts}, got {num_topk}")
        require(num_experts % (num_topk // num_shared_experts) == 0,
                f"weight: expected num_routed_experts a multiple of num_topk / num_shared_experts = "
                f"{num_topk // num_shared_experts}, got {num_experts}")
    shared = effective_shared(use_shared_as_routed, num_shared_experts)
    physical_topk = num_topk + shared
    require(physical_topk <= MAX_TOPK,
            f"num_topk: num_topk + shared experts must be <= {MAX_TOPK}, got {physical_topk}")
    _optional("mask", mask, (num_tokens,), torch.bool)
    _optional("bias", bias, (num_experts,), torch.float32)
    require((image_bias is None) == (image_token_mask is None),
            "image_bias, image_token_mask: expected both or neither")
    _optional("image_bias", image_bias, (num_experts,), torch.float32)
    _optional("image_token_mask", image_token_mask, (num_tokens,), torch.bool)
    require((to_physical_map is None) == (logical_count is None),
            "to_physical_map, logical_count: expected both or neither")
    if to_physical_map is not None:
        require_dim("to_physical_map", to_physical_map, 2)
        require(to_physical_map.size(1) > 0,
                f"to_physical_map: expected at least one physical slot per expert, got {tuple(to_physical_map.shape)}")
        _optional("to_physical_map", to_physical_map, (num_experts + shared, to_physical_map.size(1)), torch.int32)
        _optional("logical_count", logical_count, (num_experts + shared,), torch.int32)
    if unmapped_topk_idx is not None:
        _optional("unmapped_topk_idx", unmapped_topk_idx, (num_tokens, num_topk), torch.int64, contiguous=False)
        require(unmapped_topk_idx.numel() == 0 or unmapped_topk_idx.stride(1) == 1,
                f"unmapped_topk_idx: expected stride(1) == 1, got strides {unmapped_topk_idx.stride()}")
    if fix_routing_mask is not None:
        require(unmapped_topk_idx is not None,
                "fix_routing_mask: needs unmapped_topk_idx (the fixed experts are read from it)")
        _optional("fix_routing_mask", fix_routing_mask, (num_tokens,), torch.bool)
    _optional("force_random", force_random, (num_tokens,), torch.bool)
    require((out_idx is None) == (out_weights is None), "out: expected (topk_idx, topk_weights) or None")
    _optional("out_idx", out_idx, (num_tokens, physical_topk), torch.int64)
    _optional("out_weights", out_weights, (num_tokens, physical_topk), torch.float32)
