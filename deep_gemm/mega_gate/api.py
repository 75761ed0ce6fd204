"""Public fused MoE gate API, call-compatible with DeepGEMM 0.2.3's ``bf16_mega_gate`` and
``get_bf16_mega_gate_config``."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..core.errors import fail
from ..core.eager import eager_ops

__all__ = ["get_bf16_mega_gate_config", "bf16_mega_gate"]

_ops = eager_ops


def get_bf16_mega_gate_config(num_tokens: int, hidden: int, num_routed_experts: int, num_topk: int) -> dict:
    """DeepGEMM's SM100 launch configuration of :func:`bf16_mega_gate` for this problem and ``get_num_sms()`` (a
    B200's 148 SMs without a GPU): ``{'block_tokens', 'num_mma_ctas', 'num_split_k', 'num_expert_groups',
    'num_gate_warpgroups', 'num_sms'}``. Deterministic mode pins ``num_split_k`` to 1. Informational here: our
    kernels do not read it."""
    return dict(torch.ops.deep_gemm.get_bf16_mega_gate_config(int(num_tokens), int(hidden), int(num_routed_experts),
                                                              int(num_topk)))


def bf16_mega_gate(x: torch.Tensor, weight: torch.Tensor, num_topk: int, use_shared_as_routed: bool,
                   num_shared_experts: int, routed_scaling_factor: float, ep_rank: int,
                   scoring_func: str = "identity", mask: Optional[torch.Tensor] = None,
                   bias: Optional[torch.Tensor] = None, image_bias: Optional[torch.Tensor] = None,
                   image_token_mask: Optional[torch.Tensor] = None, fix_routing_mask: Optional[torch.Tensor] = None,
                   to_physical_map: Optional[torch.Tensor] = None, logical_count: Optional[torch.Tensor] = None,
                   unmapped_topk_idx: Optional[torch.Tensor] = None, force_random: Optional[torch.Tensor] = None,
                   out: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Fused MoE gate: ``x @ weight.T``, scoring, top-k with optional bias, shared experts and EP mapping.

    Parameters
    ----------
    x : Tensor
        BF16 ``[T, H]`` contiguous, ``H`` a multiple of 256 (``T`` up to 2**20; 0 is allowed).
    weight : Tensor
        BF16 ``[E, H]`` contiguous, ``E`` a multiple of 4, at most 512.
    num_topk : int
        K routed experts per token (at most 32, and at most E).
    use_shared_as_routed, num_shared_experts : bool, int
        With ``use_shared_as_routed``, the S = ``num_shared_experts`` (1 or 2) shared experts follow the routed ones
        in the output as logical experts ``E .. E + S - 1`` with weight 1 (K' = K + S slots); otherwise S = 0.
    routed_scaling_factor : float
        Routed weights are the selected unbiased scores over their sum, times this.
    ep_rank : int
        This rank: seeds the replica choice of the EP map and the ``force_random`` draw.
    scoring_func : str
        ``'identity'`` (default), ``'sigmoid'`` or ``'sqrtsoftplus'``.
    mask : Tensor, optional
        bool ``[T]``; False tokens get index -1 and weight 0 everywhere.
    bias, image_bias, image_token_mask : Tensor, optional
        FP32 ``[E]`` biases added to the scores for ranking only (image tokens, ``image_token_mask`` bool ``[T]``,
        use ``image_bias`` instead of ``bias``); both image arguments or neither.
    fix_routing_mask : Tensor, optional
        bool ``[T]``: those tokens take their K routed experts from ``unmapped_topk_idx`` (required then).
    to_physical_map, logical_count : Tensor, optional
        int32 ``[E + S, D]`` replicas of each logical expert and int32 ``[E + S]`` how many are valid; both or
        neither.
    unmapped_topk_idx : Tensor, optional
        int64 ``[T, K]`` (stride(1) == 1): receives the routed logical experts (-1 for masked / random tokens).
    force_random : Tensor, optional
        bool ``[T]``: those tokens get hashed random experts and weights (load testing).
    out : (Tensor, Tensor), optional
        int64 / FP32 ``[T, K']`` outputs to write and return.

    Returns
    -------
    (Tensor, Tensor)
        ``topk_idx`` int64 ``[T, K']`` (physical experts with an EP map) and ``topk_weights`` FP32 ``[T, K']``.
    """
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            fail(f"out: expected a (topk_idx, topk_weights) pair, got {type(out).__name__}")
        out_idx, out_weights = out
    else:
        out_idx = out_weights = None
    result = _ops.bf16_mega_gate.default(
        x, weight, int(num_topk), bool(use_shared_as_routed), int(num_shared_experts), float(routed_scaling_factor),
        int(ep_rank), scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask, to_physical_map,
        logical_count, unmapped_topk_idx, force_random, out_idx, out_weights)
    return (out_idx, out_weights) if out is not None else tuple(result)
