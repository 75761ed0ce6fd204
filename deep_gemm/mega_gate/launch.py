"""CUDA launcher of ``bf16_mega_gate`` (the op's CUDA kernel calls it after the shared check).

Two launches on the current stream, no host synchronisation (a CUDA graph can capture the call): the gate GEMM
``logits = x @ weight.T`` by the package's BF16 GEMM launcher (``gemm/bf16/launch.py``, FP32 output: its own plan
and kernels, FP32 accumulation) into a fresh [T, E] FP32 buffer, then ``kernels._gate_route_kernel`` per block of
tokens (``plan.kernel_plan``), which writes fresh outputs (the op returns new tensors) and, when given, ``out`` and
``unmapped_topk_idx`` too. ``route`` is the second launch alone, on given logits (tests compare it with
``reference.gate_from_logits`` on the same logits, selection bit for bit).

It returns ``NotImplemented`` (the reference runs) where the path does not apply: not asked for while the family
awaits a GPU run (``core/gpu_validation.py``), a GPU without BF16 MMAs (below sm_80), and logits the BF16 GEMM launcher
declines (it then runs nothing). Every argument form of the op is covered otherwise.
"""

from __future__ import annotations

import torch

from ..core import arch
from ..core.launch import launch
from . import plan as gate_plan
from .checks import effective_shared

SCORING_CODES = {"identity": 0, "sigmoid": 1, "sqrtsoftplus": 2}


def _kernels():
    from . import kernels
    return kernels


def _bytes(t):
    """A bool [T] mask as its uint8 bytes (a view: the kernel loads bytes), or None."""
    return None if t is None else t.view(torch.uint8)


def route(logits, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor, ep_rank, scoring_func,
          mask, bias, image_bias, image_token_mask, fix_routing_mask, to_physical_map, logical_count,
          unmapped_topk_idx, force_random, out_idx, out_weights, *,
          overrides: gate_plan.MegaGateOverrides = gate_plan.NO_OVERRIDES):
    """The routing kernel on FP32 ``logits`` [T, E] (contiguous) and the op's other arguments (checked by the caller).

    Returns
    -------
    (Tensor, Tensor)
        ``topk_idx`` int64 [T, K + S] and ``topk_weights`` FP32 [T, K + S], fresh tensors.
    """
    t, e = logits.shape
    s = effective_shared(use_shared_as_routed, num_shared_experts)
    slots = num_topk + s
    idx = torch.empty(t, slots, dtype=torch.int64, device=logits.device)
    weights = torch.empty(t, slots, dtype=torch.float32, device=logits.device)
    if t == 0:
        return idx, weights
    cfg = gate_plan.kernel_plan(e, slots, s, overrides)
    # Absent tensors: a tensor of a fixed dtype in their place (never touched: their constexpr switch is off), so
    # a config key always meets the same argument types.
    flags = (bias is not None, image_bias is not None, mask is not None, fix_routing_mask is not None,
             unmapped_topk_idx is not None, to_physical_map is not None, force_random is not None,
             out_idx is not None)
    spare_byte = _bytes(mask) if mask is not None else torch.empty(1, dtype=torch.uint8, device=logits.device)
    spare_i32 = torch.empty(1, dtype=torch.int32, device=logits.device)
    unmapped = unmapped_topk_idx if unmapped_topk_idx is not None else idx
    unmapped_stride = unmapped_topk_idx.stride(0) if unmapped_topk_idx is not None else 0
    scoring = SCORING_CODES[scoring_func]
    launch(_kernels()._gate_route_kernel, (-(-t // cfg.block_t), 1, 1),
           (logits, bias if bias is not None else logits, image_bias if image_bias is not None else logits,
            _bytes(image_token_mask) if image_token_mask is not None else spare_byte, spare_byte,
            _bytes(fix_routing_mask) if fix_routing_mask is not None else spare_byte, unmapped,
            to_physical_map if to_physical_map is not None else spare_i32,
            logical_count if logical_count is not None else spare_i32,
            _bytes(force_random) if force_random is not None else spare_byte,
            idx, weights, out_idx if out_idx is not None else idx, out_weights if out_weights is not None else weights,
            t, e, num_topk, s, to_physical_map.size(1) if to_physical_map is not None else 1, int(ep_rank),
            unmapped_stride, float(routed_scaling_factor),
            cfg.block_t, cfg.block_e, cfg.block_k, cfg.block_c, scoring, *flags),
           name="mega_gate_route", config_key=(cfg.block_t, cfg.block_e, cfg.block_k, cfg.block_c, scoring, *flags),
           num_warps=cfg.warps, device_index=logits.device.index or 0)
    return idx, weights


def bf16_mega_gate(x, weight, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor, ep_rank,
                   scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask, to_physical_map,
                   logical_count, unmapped_topk_idx, force_random, out_idx, out_weights, *,
                   overrides: gate_plan.MegaGateOverrides = gate_plan.NO_OVERRIDES):
    """``overrides`` pins the routing kernel's token block and asks for the kernels (tests and sweeps)."""
    if not gate_plan.kernels_wanted(overrides) or not arch.has_mma(arch.sm_of_tensor(x)):
        return NotImplemented
    from ..gemm.bf16 import launch as bf16_launch  # (imports no Triton either)

    logits = torch.empty(x.size(0), weight.size(0), dtype=torch.float32, device=x.device)
    if x.size(0) > 0 and bf16_launch.bf16_gemm_nt(x, weight, logits, None, "nk") is NotImplemented:
        return NotImplemented
    return route(logits, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor, ep_rank,
                 scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask, to_physical_map,
                 logical_count, unmapped_topk_idx, force_random, out_idx, out_weights, overrides=overrides)
