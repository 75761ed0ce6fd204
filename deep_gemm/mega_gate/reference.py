"""CPU reference of ``bf16_mega_gate`` (the semantics of DeepGEMM's SM100 kernel) and of its configuration.

Per token, in this order of precedence:

1. ``mask[t]`` False: every slot gets index -1 and weight 0 (``unmapped_topk_idx`` row: -1).
2. ``force_random[t]``: ``K' = K + S`` distinct experts drawn from ``N`` physical experts (``E + S``, or
   ``sum(logical_count)`` with an EP map) by DeepGEMM's hash of ``(ep_rank, token, slot)``; weights are hashed
   uniforms in (0, 1]; indices are physical, unmapped; ``unmapped_topk_idx`` row: -1.
3. ``fix_routing_mask[t]``: the K routed experts are the given ``unmapped_topk_idx[t]``.
4. otherwise the K experts of highest rank key, ties to the lower index: the scored logit plus the token's bias
   (``image_bias`` for image tokens, else ``bias``) when a bias is given, else the raw logit (scoring is monotonic).

Logits are ``x @ weight.T`` (FP64 sums rounded to FP32; DeepGEMM accumulates in FP32). Scoring: ``sigmoid``,
``sqrtsoftplus`` (``sqrt(log1p(exp(v)))``, ``sqrt(v)`` above 20) or ``identity``, in FP32. Routed weights are the
selected *unbiased* scores over their sum (+1e-20) times ``routed_scaling_factor``; with ``use_shared_as_routed``
the S shared experts follow as logical experts ``E .. E + S - 1`` with weight 1. With an EP map, logical expert l of
token t goes to ``to_physical_map[l, (ep_rank + 23333 t) mod 2^32 mod logical_count[l]]``; ``unmapped_topk_idx``
receives the routed logical indices. Non-finite scores, which DeepGEMM's kernel traps on, are not diagnosed.
"""

from __future__ import annotations

import torch

from ..core.determinism import deterministic
from ..core.runtime import get_num_sms
from .checks import effective_shared
from .plan import DEFAULT_SM100_SMS, mega_gate_config

_MASK32 = 0xFFFFFFFF


def get_bf16_mega_gate_config_reference(num_tokens, hidden, num_routed_experts, num_topk):
    num_sms = get_num_sms() or DEFAULT_SM100_SMS
    return mega_gate_config(num_tokens, hidden, num_routed_experts, num_sms, deterministic())


def score(values: torch.Tensor, scoring_func: str) -> torch.Tensor:
    if scoring_func == "sigmoid":
        return 1.0 / (1.0 + torch.exp(-values))
    if scoring_func == "sqrtsoftplus":
        return torch.sqrt(torch.where(values > 20.0, values, torch.log1p(torch.exp(values))))
    return values


def _hash(v: torch.Tensor) -> torch.Tensor:
    """DeepGEMM's 32-bit integer hash on int64 tensors holding uint32 values."""
    v = v ^ (v >> 16)
    v = (v * 0x7FEB352D) & _MASK32
    v = v ^ (v >> 15)
    v = (v * 0x846CA68B) & _MASK32
    return v ^ (v >> 16)


def random_topk(num_tokens: int, physical_topk: int, num_physical_experts, ep_rank: int, device):
    """(indices int64 [T, K'], weights FP32 [T, K']) of the force_random path. ``num_physical_experts``: int or an
    int64 0-d tensor."""
    token = torch.arange(num_tokens, device=device, dtype=torch.int64)[:, None]
    lane = torch.arange(physical_topk, device=device, dtype=torch.int64)[None, :]
    seed = _hash((ep_rank & _MASK32) ^ ((token * 0x9E3779B9) & _MASK32) ^ ((lane * 0x85EBCA6B) & _MASK32))
    bits = (0x3F800000 | (_hash(seed ^ 0xC2B2AE35) >> 9)).to(torch.int32)
    weights = bits.view(torch.float32) - 1.0 + 2.0 ** -24
    candidate = _hash(seed) % (num_physical_experts - lane)
    selected = torch.full_like(candidate, -1)
    big = torch.iinfo(torch.int64).max
    for _ in range(physical_topk):
        active = selected < 0
        values = torch.where(active, candidate, big)
        low = values.min(dim=1, keepdim=True).values
        low_lane = (values == low).int().argmax(dim=1, keepdim=True)  # the first lane holding the minimum
        chosen = active & (lane == low_lane)
        bump = active & (candidate >= low) & (low_lane < lane)
        selected = torch.where(chosen, candidate, selected)
        candidate = candidate + bump.long()
    return selected, weights


def _map_physical(logical: torch.Tensor, ep_rank: int, to_physical_map, logical_count) -> torch.Tensor:
    tokens = torch.arange(logical.size(0), device=logical.device, dtype=torch.int64)[:, None]
    counts = logical_count.long()[logical.clamp(min=0)]
    duplicate = ((ep_rank + tokens * 23333) & _MASK32) % counts.clamp(min=1)
    return to_physical_map.long()[logical.clamp(min=0), duplicate]


def bf16_mega_gate_reference(x, weight, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor,
                             ep_rank, scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask,
                             to_physical_map, logical_count, unmapped_topk_idx, force_random, out_idx, out_weights):
    logits = (x.double() @ weight.double().T).float()  # [T, E]
    return gate_from_logits(logits, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor,
                            ep_rank, scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask,
                            to_physical_map, logical_count, unmapped_topk_idx, force_random, out_idx, out_weights)


def gate_from_logits(logits, num_topk, use_shared_as_routed, num_shared_experts, routed_scaling_factor, ep_rank,
                     scoring_func, mask, bias, image_bias, image_token_mask, fix_routing_mask, to_physical_map,
                     logical_count, unmapped_topk_idx, force_random, out_idx, out_weights):
    """Everything after the gate GEMM, on given FP32 logits ``[T, E]`` (the op's arguments without ``x`` and
    ``weight``): lets a test feed the kernels and the reference the same logits."""
    num_tokens, num_experts = logits.shape
    shared = effective_shared(use_shared_as_routed, num_shared_experts)
    device = logits.device
    scored = score(logits, scoring_func)

    # 4. the normal path: rank, select (ties to the lower index), weigh the unbiased scores
    if bias is not None or image_bias is not None:
        token_bias = bias[None, :] if bias is not None else torch.zeros_like(scored[:1])
        if image_bias is not None:
            token_bias = torch.where(image_token_mask[:, None], image_bias[None, :], token_bias)
        keys = scored + token_bias
    else:
        keys = logits
    order = torch.sort(keys, dim=1, descending=True, stable=True).indices[:, :num_topk]
    # 3. fixed routing: the given experts (read before anything is written)
    if fix_routing_mask is not None:
        fixed = unmapped_topk_idx.long().clamp(0, num_experts - 1)
        order = torch.where(fix_routing_mask[:, None], fixed, order)
    selected = scored.gather(1, order)
    weights = selected / (selected.sum(dim=1, keepdim=True) + 1e-20) * routed_scaling_factor
    logical = order
    if shared:
        shared_idx = torch.arange(num_experts, num_experts + shared, device=device).expand(num_tokens, shared)
        logical = torch.cat([order, shared_idx], dim=1)
        weights = torch.cat([weights, torch.ones(num_tokens, shared, device=device)], dim=1)
    physical = logical if to_physical_map is None else _map_physical(logical, ep_rank, to_physical_map, logical_count)
    unmapped = order

    # 2. force_random
    if force_random is not None:
        total = num_experts + shared if logical_count is None else logical_count.long().sum()
        rand_idx, rand_w = random_topk(num_tokens, num_topk + shared, total, ep_rank, device)
        physical = torch.where(force_random[:, None], rand_idx, physical)
        weights = torch.where(force_random[:, None], rand_w, weights)
        unmapped = torch.where(force_random[:, None], -1, unmapped)
    # 1. masked tokens
    if mask is not None:
        physical = torch.where(mask[:, None], physical, -1)
        weights = torch.where(mask[:, None], weights, 0.0)
        unmapped = torch.where(mask[:, None], unmapped, -1)

    if unmapped_topk_idx is not None:
        unmapped_topk_idx.copy_(unmapped)
    if out_idx is not None:
        out_idx.copy_(physical)
        out_weights.copy_(weights)
    return physical.clone(), weights.float().clone()
