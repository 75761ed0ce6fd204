"""CPU reference of the Mega MoE layer: plain torch, FP32 arithmetic, one process or several on a gloo group.

The fused kernel (DeepGEMM's ``sm90_fp8_mega_moe`` / ``sm100_*_mega_moe``) does, in one launch, per rank:

1. dispatch: every token of every rank (the first ``num_tokens`` rows of that rank's ``x`` / ``x_sf`` /
   ``topk_idx`` / ``topk_weights`` buffer views) is sent once per top-k slot to the rank owning the slot's expert
   (``expert // num_local_experts``); slots holding ``-1`` are masked and go nowhere;
2. L1 per local expert: ``h = x @ W1.T`` with ``W1 = [gate | up]`` (``[2I, H]``);
3. SwiGLU with the clamp: ``silu(min(gate, c)) * clamp(up, -c, c)`` (``c = activation_clamp``; ``None`` = no clamp),
   times the slot's top-k weight (unless the post-expert norm applies the weight at combine time);
4. the intermediate quantised as the kernel stores it between the two GEMMs:

   * SM90 FP8 (``fp8_mega_moe``): FP8 E4M3 with one continuous FP32 scale per (row, 64 columns),
     ``scale = max(amax, 1e-10) / 448``;
   * SM100 FP8 x FP4 (``fp8_fp4_mega_moe``): FP8 E4M3 with one UE8M0 (power-of-two) scale per (row, 32 columns),
     ``scale = ceil_pow2(max(amax, 1e-4) / 448)``;
   * BF16 (``bf16_mega_moe``): rounded to BF16;
5. L2: ``o = a @ W2.T``, rounded to BF16 (the combine buffer is BF16);
6. combine in the token's own rank: ``y[t] = bf16(sum over its routed slots of o)`` (FP32 sum in slot order; shared
   experts add one more slot with weight 1);
7. ``cumulative_local_expert_recv_stats[e] +=`` the number of (token, slot) pairs that expert ``e`` of this rank
   received from all ranks.

The multi-rank form runs each rank in its own process on a ``gloo`` group: the symmetric buffer is then an ordinary
CPU tensor per rank, dispatch is an ``all_gather`` of the input views and combine an ``all_to_all_single`` of the
per-slot expert outputs. Every rank must call collectively, as with the kernel.

The FP32 weights of an expert are dequantised when the layer reaches it (``PerExpert``); rows are gathered per expert
exactly as the kernel's per-expert pools would hold them, so the result is independent of BLOCK_M, waves and arrival
order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

import torch

from ..core.errors import fail, require
from ..utils.quant import fp4_e2m1_to_float, per_token_cast_to_fp8, unpack_ue8m0_from_int

# Gate/up rows are interleaved in chunks of this many rows by the weight transforms.
INTERLEAVE_ROWS = 8
# SM90: one FP32 scale per 128x128 weight block and per (token, 128 channels) of x.
SM90_BLOCK = 128
# SM90: the intermediate's FP32 scales cover 64 columns (one L1 N block after SwiGLU).
SM90_L2_ACT_GROUP = 64
SM90_AMAX_FLOOR = 1e-10
FP8_MAX = 448.0
# SM100 FP8 x FP4: one UE8M0 scale per 32 elements of K (MXFP8 / MXFP4 block scaling).
MX_GROUP = 32

# ---- process groups of CPU buffers ------------------------------------------------------------------------------
# A multi-rank CPU buffer is a plain tensor; the ops find its process group here (keyed by the storage address of
# the buffer, which is what sym_buffer_ptrs[rank_idx] holds). Filled by SymmBuffer / SM90SymmBuffer.
# Counted: buffers built on a ``base`` share its storage, and the group stays known until the last of them is
# destroyed.
_GROUPS: dict[int, tuple[object, int]] = {}
_GROUPS_LOCK = threading.Lock()


def register_cpu_group(buffer: torch.Tensor, group) -> None:
    with _GROUPS_LOCK:
        _, users = _GROUPS.get(buffer.data_ptr(), (None, 0))
        _GROUPS[buffer.data_ptr()] = (group, users + 1)


def unregister_cpu_group(buffer: torch.Tensor) -> None:
    with _GROUPS_LOCK:
        entry = _GROUPS.get(buffer.data_ptr())
        if entry is None:
            return
        if entry[1] <= 1:
            del _GROUPS[buffer.data_ptr()]
        else:
            _GROUPS[buffer.data_ptr()] = (entry[0], entry[1] - 1)


def group_of(buffer: torch.Tensor, num_ranks: int):
    """The gloo group of a multi-rank CPU buffer (None for one rank)."""
    if num_ranks == 1:
        return None
    with _GROUPS_LOCK:
        group = _GROUPS.get(buffer.data_ptr(), (None, 0))[0]
    if group is None:
        fail(f"sym_buffer: a buffer for {num_ranks} ranks must come from SymmBuffer / SM90SymmBuffer on a "
             "torch.distributed group (its process group is unknown)")
    return group


# ---- weight layouts -----------------------------------------------------------------------------------------

def deinterleave_gate_up(t: torch.Tensor, gran: int = INTERLEAVE_ROWS) -> torch.Tensor:
    """Undo the gate/up interleave along dim 1: ``[g0-7, u0-7, g8-15, ...]`` -> ``[gate | up]``."""
    e, n, *rest = t.shape
    chunks = t.reshape(e, n // (2 * gran), 2, gran, *rest)
    return torch.cat([chunks[:, :, 0].reshape(e, n // 2, *rest), chunks[:, :, 1].reshape(e, n // 2, *rest)], dim=1)


def untranspose_sf_for_utccp(sf: torch.Tensor) -> torch.Tensor:
    """Undo the UTCCP row order (within 128 rows, row ``4 p + q`` goes back to ``32 q + p``)."""
    g, mn, k = sf.shape
    return sf.reshape(g, mn // 128, 32, 4, k).transpose(2, 3).reshape(g, mn, k)


def _expand_cols(sf: torch.Tensor, group: int, cols: int) -> torch.Tensor:
    """Per-group scales ``[..., ceil(cols / group)]`` -> per-element ``[..., cols]``."""
    return sf.repeat_interleave(group, dim=-1)[..., :cols]


def dequant_sm90_weights(data: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """FP8 ``[E, N, K]`` with FP32 128x128 block scales ``[E, N/128, K/128]`` -> FP32."""
    scale = sf.float().repeat_interleave(SM90_BLOCK, dim=1)[:, :data.size(1)]
    scale = scale.repeat_interleave(SM90_BLOCK, dim=2)[:, :, :data.size(2)]
    return data.float() * scale


def dequant_mx_weights(data: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """FP8 ``[E, N, K]`` or packed FP4 (int8 ``[E, N, K/2]``) with packed UE8M0 ``int32 [E, N, K/128]`` -> FP32."""
    values = fp4_e2m1_to_float(data) if data.dtype == torch.int8 else data.float()
    return values * _expand_cols(unpack_ue8m0_from_int(sf), MX_GROUP, values.size(-1))


def sm90_l1_weights(l1: torch.Tensor, l1_sf: torch.Tensor) -> torch.Tensor:
    """FP32 ``[E, 2I, H]`` in ``[gate | up]`` order from ``transform_weights_for_mega_moe_sm90``'s output (the data
    rows are interleaved, the block scales are not)."""
    return dequant_sm90_weights(deinterleave_gate_up(l1), l1_sf)


def mx_l1_weights(l1: torch.Tensor, l1_sf: torch.Tensor) -> torch.Tensor:
    """FP32 ``[E, 2I, H]`` (``[gate | up]``) from ``transform_weights_for_mega_moe``'s FP8/FP4 output."""
    return dequant_mx_weights(deinterleave_gate_up(l1), deinterleave_gate_up(untranspose_sf_for_utccp(l1_sf)))


def mx_l2_weights(l2: torch.Tensor, l2_sf: torch.Tensor) -> torch.Tensor:
    return dequant_mx_weights(l2, untranspose_sf_for_utccp(l2_sf))


# ---- activations --------------------------------------------------------------------------------------------

def swiglu(h: torch.Tensor, clamp: Optional[float]) -> torch.Tensor:
    """``silu(min(gate, c)) * clamp(up, -c, c)`` on ``h = [gate | up]`` (FP32). ``fast_math`` only changes how the
    kernel evaluates exp and 1/x; the reference computes the exact function either way."""
    inter = h.size(-1) // 2
    gate, up = h[..., :inter], h[..., inter:]
    if clamp is not None and clamp != float("inf"):
        gate = gate.clamp(max=clamp)
        up = up.clamp(min=-clamp, max=clamp)
    return gate * torch.sigmoid(gate) * up


def _sm90_scale(groups: torch.Tensor) -> torch.Tensor:
    """``max(amax, 1e-10) / 448`` per group (last dim), correctly rounded on every device: torch's CUDA division by
    a Python scalar multiplies by the scalar's rounded reciprocal instead (one ulp off for some amax), so the divisor
    is a tensor on the data's device, as DeepGEMM's kernels divide."""
    amax = groups.abs().amax(dim=-1, keepdim=True).clamp(min=SM90_AMAX_FLOOR)
    return amax / amax.new_full((), FP8_MAX)


def quantize_sm90_intermediate(a: torch.Tensor) -> torch.Tensor:
    """Round-trip through FP8 with one continuous FP32 scale per (row, 64 columns), as the SM90 L1 epilogue."""
    n, inter = a.shape
    groups = a.view(n, inter // SM90_L2_ACT_GROUP, SM90_L2_ACT_GROUP)
    scale = _sm90_scale(groups)
    q = (groups * (1.0 / scale)).to(torch.float8_e4m3fn)
    return (q.float() * scale).view(n, inter)


def quantize_mx_intermediate(a: torch.Tensor) -> torch.Tensor:
    """Round-trip through FP8 with one UE8M0 scale per (row, 32 columns), as the SM100 L1 epilogue."""
    if a.size(0) == 0:
        return a
    q, sf = per_token_cast_to_fp8(a, use_ue8m0=True, gran_k=MX_GROUP)
    return q.float() * _expand_cols(sf, MX_GROUP, a.size(1))


def quantize_bf16_intermediate(a: torch.Tensor) -> torch.Tensor:
    return a.bfloat16().float()


_QUANTIZERS = {"sm90": quantize_sm90_intermediate, "mx": quantize_mx_intermediate,
               "bf16": quantize_bf16_intermediate}


def expert_forward(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, weights: Optional[torch.Tensor],
                   clamp: Optional[float], quant: str) -> torch.Tensor:
    """One expert on its received rows: FP32 ``[n, H]`` holding BF16 values (the combine buffer's precision)."""
    if x.size(0) == 0:
        return x.new_zeros((0, w2.size(0)))
    a = swiglu(x @ w1.t(), clamp)
    if weights is not None:
        a = a * weights.unsqueeze(1)
    a = _QUANTIZERS[quant](a)
    return (a @ w2.t()).bfloat16().float()


# ---- dequantising the dispatched tokens ----------------------------------------------------------------------

def tokens_to_float(x: torch.Tensor, x_sf: Optional[torch.Tensor], kind: str) -> torch.Tensor:
    """The buffer's token rows as FP32: ``kind`` is 'sm90' (FP8, FP32 per-128 scales), 'mx' (FP8, packed UE8M0
    per-32 scales) or 'bf16'."""
    if kind == "bf16":
        return x.float()
    if kind == "sm90":
        return x.float() * _expand_cols(x_sf.float(), SM90_BLOCK, x.size(-1))
    return x.float() * _expand_cols(unpack_ue8m0_from_int(x_sf), MX_GROUP, x.size(-1))


# ---- the layer ----------------------------------------------------------------------------------------------

@dataclass
class Inputs:
    """What one rank dispatches: its buffer views (first ``num_tokens`` rows count)."""
    x: torch.Tensor                  # [T, H] FP8 or BF16
    x_sf: Optional[torch.Tensor]     # [T, H/128] (FP32 or packed int32) or None
    topk_idx: torch.Tensor           # [T, k] int64
    topk_weights: torch.Tensor       # [T, k] float32
    num_tokens: int


class PerExpert:
    """An expert's FP32 weights, dequantised when the layer reaches that expert: ``weights[e]`` is
    ``dequant(*(t[e:e + 1] for t in tensors))[0]``. All experts at once in FP32 would take 4 bytes per weight (16 GiB
    for 256 experts of 4096 x 4096 L1 rows alone, on the GPU when the reference runs there); this keeps one expert's
    alive at a time, and touches only the experts that receive tokens."""

    def __init__(self, dequant, *tensors: torch.Tensor):
        self.dequant, self.tensors = dequant, tensors

    def __getitem__(self, e: int) -> torch.Tensor:
        return self.dequant(*(t[e:e + 1] for t in self.tensors))[0]


@dataclass
class Experts:
    """This rank's experts' weights, FP32 per expert on access (``[gate | up]`` L1 rows), and the optional shared
    expert (FP32)."""
    l1: PerExpert                    # [E_local][2I, H]
    l2: PerExpert                    # [E_local][H, I]
    shared_l1: Optional[torch.Tensor] = None  # [2 I_shared, H]
    shared_l2: Optional[torch.Tensor] = None  # [H, I_shared]


@dataclass
class Options:
    token_kind: str                  # 'sm90' | 'mx' | 'bf16' (how x / x_sf are stored)
    quant: str                       # intermediate quantisation: 'sm90' | 'mx' | 'bf16'
    activation_clamp: Optional[float]
    post_expert_norm: bool = False
    post_expert_norm_weight: Optional[torch.Tensor] = None
    post_expert_norm_eps: float = 1e-6
    post_expert_norm_weight_first: bool = False


def _byte_view(t: torch.Tensor) -> torch.Tensor:
    """Collectives on gloo move plain integer bytes (FP8 has no gloo type)."""
    return t.contiguous().view(torch.uint8)


def _all_gather(group, t: torch.Tensor, num_ranks: int) -> torch.Tensor:
    import torch.distributed as dist
    raw = _byte_view(t)
    out = [torch.empty_like(raw) for _ in range(num_ranks)]
    dist.all_gather(out, raw, group=group)
    return torch.stack(out).view(t.dtype).view(num_ranks, *t.shape)


def _gather_inputs(group, num_ranks: int, mine: Inputs, rows: int) -> tuple[list[Inputs], int]:
    """Every rank's inputs, each cut to ``rows`` rows (the largest token count of any rank)."""
    if num_ranks == 1:
        return [mine], rows
    import torch.distributed as dist
    counts = torch.tensor([mine.num_tokens], dtype=torch.int64)
    all_counts = [torch.empty_like(counts) for _ in range(num_ranks)]
    dist.all_gather(all_counts, counts, group=group)
    counts_list = [int(c.item()) for c in all_counts]
    rows = max(counts_list)
    fields = [mine.x[:rows], mine.topk_idx[:rows], mine.topk_weights[:rows]]
    if mine.x_sf is not None:
        fields.append(mine.x_sf[:rows])
    gathered = [_all_gather(group, f, num_ranks) for f in fields]
    result = []
    for r in range(num_ranks):
        sf = gathered[3][r] if mine.x_sf is not None else None
        result.append(Inputs(gathered[0][r], sf, gathered[1][r], gathered[2][r], counts_list[r]))
    return result, rows


def mega_moe_forward(y: torch.Tensor, inputs: Inputs, experts: Experts, options: Options, group, num_ranks: int,
                     rank_idx: int, num_experts: int, stats: Optional[torch.Tensor]) -> None:
    """Run the layer for this rank: every row of ``y`` is one of this rank's tokens (``inputs.num_tokens ==
    y.size(0)``; a row whose slots are all masked comes out zero, or the shared experts' output) and ``stats``
    gains the slots this rank's experts received."""
    num_local = num_experts // num_ranks
    num_rows = y.size(0)
    everyone, rows = _gather_inputs(group, num_ranks, inputs, num_rows)
    hidden = y.size(1)

    # Expert side: per local expert, its slots from every rank, in (rank, token, slot) order.
    device = y.device
    out = torch.zeros((num_ranks, rows, inputs.topk_idx.size(1), hidden), dtype=torch.float32, device=device)
    received = torch.zeros(num_local, dtype=torch.int64, device=device)
    first = rank_idx * num_local
    for src, data in enumerate(everyone):
        n = data.num_tokens
        if n == 0:
            continue
        idx = data.topk_idx[:n].long()
        local = (idx >= first) & (idx < first + num_local)
        if not bool(local.any()):
            continue
        tokens = tokens_to_float(data.x[:n], None if data.x_sf is None else data.x_sf[:n], options.token_kind)
        weights = data.topk_weights[:n].float()
        for e in torch.unique(idx[local]).tolist():
            t, s = torch.nonzero(idx == e, as_tuple=True)
            received[e - first] += t.numel()
            w = None if options.post_expert_norm else weights[t, s]
            out[src, t, s] = expert_forward(tokens[t], experts.l1[e - first], experts.l2[e - first], w,
                                            options.activation_clamp, options.quant)

    # Combine side: bring every slot's output back to the token's rank.
    if num_ranks > 1:
        import torch.distributed as dist
        back = torch.empty_like(out)
        dist.all_to_all_single(back, out, group=group)
        mine = back.sum(dim=0)  # each (token, slot) comes from exactly one rank: the sum adds zeros only
    else:
        mine = out[0]
    mine = mine[:num_rows]

    n = inputs.num_tokens
    idx = inputs.topk_idx[:num_rows].long()
    routed = (idx >= 0) & (torch.arange(num_rows, device=device).unsqueeze(1) < n)
    if options.post_expert_norm:
        result = _post_norm_combine(mine, routed, inputs.topk_weights[:num_rows].float(), options)
    else:
        result = (mine * routed.unsqueeze(-1)).sum(dim=1)
    if experts.shared_l1 is not None and num_rows > 0:
        tokens = tokens_to_float(inputs.x[:num_rows],
                                 None if inputs.x_sf is None else inputs.x_sf[:num_rows], options.token_kind)
        shared = expert_forward(tokens, experts.shared_l1, experts.shared_l2, None, options.activation_clamp,
                                options.quant)
        valid = (torch.arange(num_rows, device=device) < n).unsqueeze(1)
        result = result + shared * valid
    y.copy_(result.to(y.dtype))
    if stats is not None:
        stats.add_(received.to(stats.dtype))


def _post_norm_combine(outputs: torch.Tensor, routed: torch.Tensor, topk_weights: torch.Tensor,
                       options: Options) -> torch.Tensor:
    """``y = w * sum_s(topk_weight_s * o_s / rms_s)`` with ``rms_s`` over ``o_s`` (or ``w * o_s`` when the weight
    comes first); without a norm weight, ``w = 1``."""
    weight = options.post_expert_norm_weight
    w = None if weight is None else weight.float()
    normed = outputs * w if (w is not None and options.post_expert_norm_weight_first) else outputs
    inv_rms = torch.rsqrt(normed.pow(2).mean(dim=-1, keepdim=True) + options.post_expert_norm_eps)
    scale = (topk_weights * routed).unsqueeze(-1) * inv_rms
    result = (outputs * scale).sum(dim=1)
    return result * w if w is not None else result


# ---- pre-dispatch --------------------------------------------------------------------------------------------

def pre_dispatch_sm90(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, buf_x: torch.Tensor,
                      buf_x_sf: torch.Tensor, buf_topk_idx: torch.Tensor, buf_topk_weights: torch.Tensor,
                      num_tokens: int, group_size: int, routed_scaling_factor: float) -> None:
    """BF16 tokens -> FP8 with a continuous FP32 scale per ``group_size`` channels (``max(amax, 1e-10) / 448``);
    top-k copied (weights times ``routed_scaling_factor``); buffer slots past ``num_tokens`` masked (-1, 0)."""
    n, hidden = num_tokens, x.size(1)
    if n > 0:
        groups = x[:n].float().view(n, hidden // group_size, group_size)
        scale = _sm90_scale(groups)
        buf_x[:n].copy_((groups * (1.0 / scale)).view(n, hidden).to(torch.float8_e4m3fn))
        buf_x_sf[:n].copy_(scale.view(n, hidden // group_size))
        buf_topk_idx[:n].copy_(topk_idx[:n].long())
        buf_topk_weights[:n].copy_(topk_weights[:n].float() * float(routed_scaling_factor))
    buf_topk_idx[n:].fill_(-1)
    buf_topk_weights[n:].fill_(0.0)


def pre_dispatch_mx(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, buf_x: torch.Tensor,
                    buf_x_sf: torch.Tensor, buf_topk_idx: torch.Tensor, buf_topk_weights: torch.Tensor,
                    num_tokens: int, group_size: int, expert_scales: Optional[torch.Tensor]) -> None:
    """BF16 tokens -> FP8 with packed UE8M0 scales per ``group_size`` (32) channels (amax floored at 1e-4, as
    ``per_token_cast_to_fp8``); top-k copied (weights times ``expert_scales[expert]`` when given); buffer slots past
    ``num_tokens`` masked (-1, 0)."""
    n = num_tokens
    if n > 0:
        q, sf = per_token_cast_to_fp8(x[:n].float(), use_ue8m0=True, gran_k=group_size, use_packed_ue8m0=True)
        buf_x[:n].copy_(q)
        buf_x_sf[:n].copy_(sf)
        idx = topk_idx[:n].long()
        weights = topk_weights[:n].float()
        if expert_scales is not None:
            weights = torch.where(idx >= 0, weights * expert_scales.float()[idx.clamp(min=0)], weights)
        buf_topk_idx[:n].copy_(idx)
        buf_topk_weights[:n].copy_(weights)
    buf_topk_idx[n:].fill_(-1)
    buf_topk_weights[n:].fill_(0.0)


def consensus(group, num_ranks: int, error: Optional[BaseException], what: str) -> None:
    """Collective agreement before any rank writes: every rank raises when any rank's arguments were rejected
    (the rejecting rank re-raises its own error; the others name the rank), so no rank is left waiting."""
    if num_ranks == 1 or group is None:
        if error is not None:
            raise error
        return
    import torch.distributed as dist
    flags = torch.tensor([0 if error is None else 1], dtype=torch.int64)
    everyone = [torch.empty_like(flags) for _ in range(num_ranks)]
    dist.all_gather(everyone, flags, group=group)
    if error is not None:
        raise error
    bad = [r for r, f in enumerate(everyone) if int(f.item())]
    require(not bad, f"{what}: rank(s) {bad} rejected their arguments; no rank ran the layer")
