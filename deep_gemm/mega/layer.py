"""The Mega MoE layer ops (flat, DeepGEMM's ``_C`` argument lists): their checks and their reference kernels.

Each op's check validates everything that metadata tells (it also runs on fake tensors) and raises
``DeepGEMMError`` naming the argument; the kernels then call ``reference.py``. The buffer is described by the same
arguments DeepGEMM's kernels size it with (``len(sym_buffer_ptrs)`` ranks, experts, token capacity, top-k, hidden
from ``y``, intermediate from ``l2_weights``; plus the ring for the SM100 buffer), so the views are recomputed here.

On one CUDA rank ``fp8_mega_moe``, ``bf16_mega_moe`` and the SM90 pre-dispatch run Triton kernels
(``launch.py``), and so does ``fp8_fp4_mega_moe`` when asked for (``MegaOverrides(kernels=True)``, while it awaits its
GPU run); the other layer ops run the same reference on CUDA tensors (a slow correctness path); several CUDA ranks
raise ``NotImplementedError``,
except ``fp8_mega_moe`` when its several-rank kernels are asked for (``MegaOverrides(kernels=True)`` through the
launcher, while the ``mega_ranks`` key awaits their multi-GPU run in ``core/gpu_validation.py``).
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..core.data_checks import index_text, require_values
from ..core.errors import (
    fail, require, require_dim, require_dtype, require_same_device, require_shape)
from . import buffer as _buffer
from . import reference as _ref

FP8, BF16, F32, I32, I64 = torch.float8_e4m3fn, torch.bfloat16, torch.float32, torch.int32, torch.int64
SM90_RECIPE = (128, 128, 128)
MX_RECIPE = (1, 1, 32)
NVFP4_RECIPE = (1, 1, 16)
WEIGHT_LAYOUTS = ("megamoe", "trtllm")
_MULTI_GPU = ("the Mega MoE over several CUDA ranks (symmetric memory) is not implemented in this release; one CUDA "
              "rank runs, and CPU ranks on a gloo group run the reference (fp8_mega_moe has kernels for several CUDA "
              "ranks, opt-in with MegaOverrides(kernels=True) through its launcher until their multi-GPU run, "
              "see deep_gemm/mega/launch.py)")


# ---- shared checks ---------------------------------------------------------------------------------------------

def _check_common(y, stats, sym_buffer, ptrs: Sequence[int], rank_idx: int, num_max_tokens_per_rank: int,
                  num_experts: int, num_topk: int, activation: str, activation_clamp) -> int:
    """Checks every layer op shares; returns the number of ranks."""
    num_ranks = len(ptrs)
    require(num_ranks >= 1, "sym_buffer_ptrs: expected one address per rank, got an empty list")
    require(0 <= rank_idx < num_ranks, f"rank_idx: expected a value in [0, {num_ranks}), got {rank_idx}")
    require(num_experts >= 1 and num_experts % num_ranks == 0,
            f"num_experts: expected a positive multiple of the number of ranks ({num_ranks}), got {num_experts}")
    require(activation in _buffer.ACTIVATIONS,
            f"activation: expected 'swiglu' (the only activation), got {activation!r}")
    if activation_clamp is not None:
        require(activation_clamp >= 0, f"activation_clamp: expected None or a value >= 0, got {activation_clamp}")
    require_dtype("y", y, (BF16,))
    require_dim("y", y, 2)
    require(y.size(0) <= num_max_tokens_per_rank,
            f"y: expected at most num_max_tokens_per_rank ({num_max_tokens_per_rank}) rows (the buffer's token "
            f"capacity), got {y.size(0)}")
    require(y.stride(-1) == 1 or y.numel() == 0, f"y: expected unit stride in the last dim, got {y.stride()}")
    require_dtype("sym_buffer", sym_buffer, (torch.int8,))
    require_dim("sym_buffer", sym_buffer, 1)
    if stats is not None:
        local = num_experts // num_ranks
        require_dtype("cumulative_local_expert_recv_stats", stats, (I32,))
        require(stats.numel() == local and stats.is_contiguous(),
                f"cumulative_local_expert_recv_stats: expected a contiguous tensor of {local} elements (local "
                f"experts), got shape {tuple(stats.shape)}")
    return num_ranks


def _check_buffer_bytes(sym_buffer, num_bytes: int) -> None:
    require(sym_buffer.numel() >= num_bytes,
            f"sym_buffer: expected at least {num_bytes} bytes for these sizes (wrong buffer?), got "
            f"{sym_buffer.numel()}")


def _check_weight(name: str, w, dtypes, shape, what: str) -> None:
    require_dtype(name, w, dtypes)
    require_dim(name, w, len(shape))
    require_shape(name, w, shape, what)
    require(w.is_contiguous(), f"{name}: expected a contiguous tensor, got strides {w.stride()}")


def _group(sym_buffer, num_ranks: int):
    if num_ranks > 1 and sym_buffer.device.type != "cpu":
        raise NotImplementedError(_MULTI_GPU)
    return _ref.group_of(sym_buffer, num_ranks)


# ---- the data contract (values of the routing) --------------------------------------------------------------

def _check_topk_ids(topk_idx: torch.Tensor, num_tokens: int, num_experts: int) -> None:
    """Expert ids of the dispatched rows in ``[-1, num_experts)``: an id outside would be dropped silently."""
    ids = topk_idx[:num_tokens]
    bad = (ids < -1) | (ids >= num_experts)

    def message(first: int) -> str:
        return (f"sym_buffer.topk_idx: expected expert ids in [-1, {num_experts}) (-1: a masked slot) in the first "
                f"{num_tokens} rows (the tokens y holds), got topk_idx{index_text(ids.shape, first)} = "
                f"{int(ids.reshape(-1)[first])}")
    require_values([(bad, message)])


def check_data_fp8_mega_moe(*, y, l2_weights, sym_buffer, sym_buffer_ptrs, num_max_tokens_per_rank, num_experts,
                            num_topk, **_) -> None:
    plan = _sm90_plan(y, l2_weights, sym_buffer_ptrs, num_max_tokens_per_rank, num_experts, num_topk)
    _check_topk_ids(_views(sym_buffer, plan)["topk_idx"], y.size(0), num_experts)


def check_data_ring_mega_moe(*, y, l2_weights, sym_buffer, sym_buffer_ptrs, num_max_tokens_per_rank, num_experts,
                             num_topk, num_ring_tokens, l2_weights_sf=None, **_) -> None:
    """Data check of ``fp8_fp4_mega_moe`` (``l2_weights_sf`` given) and ``bf16_mega_moe``."""
    mma_type = "fp8xfp4" if l2_weights_sf is not None else "bf16xbf16"
    inter = l2_weights_sf.size(2) * 128 if l2_weights_sf is not None else l2_weights.size(2)
    plan = _ring_plan(len(sym_buffer_ptrs), num_experts, num_max_tokens_per_rank, num_topk, y.size(1), inter,
                      mma_type, num_ring_tokens)
    _check_topk_ids(_views(sym_buffer, plan)["topk_idx"], y.size(0), num_experts)


# ---- SM90 FP8 ----------------------------------------------------------------------------------------------------

def _sm90_plan(y, l2, ptrs, num_max_tokens_per_rank, num_experts, num_topk):
    return _buffer.plan_sm90_symm_buffer(len(ptrs), num_experts, num_max_tokens_per_rank, num_topk, y.size(1),
                                         l2.size(2), True, "swiglu")


def check_fp8_mega_moe(y, l1, l1_sf, l2, l2_sf, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank,
                       num_experts, num_topk, recipe, activation, activation_clamp, fast_math) -> None:
    num_ranks = _check_common(y, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts, num_topk,
                              activation, activation_clamp)
    require(tuple(int(v) for v in recipe) == SM90_RECIPE,
            f"recipe: expected {SM90_RECIPE} (128x128 weight blocks, per-128 token scales), got {tuple(recipe)}")
    require_dim("l2_weights", l2, 3)
    require_dtype("l2_weights", l2, (FP8,))
    local = num_experts // num_ranks
    hidden, inter = y.size(1), l2.size(2)
    require(hidden % 128 == 0, f"y: expected hidden (dim 1) to be a multiple of 128, got {hidden}")
    require(inter % 128 == 0, f"l2_weights: expected intermediate_hidden (dim 2) to be a multiple of 128, got {inter}")
    _check_weight("l1_weights", l1, (FP8,), (local, 2 * inter, hidden), "[local experts, 2 x intermediate, hidden]")
    _check_weight("l2_weights", l2, (FP8,), (local, hidden, inter), "[local experts, hidden, intermediate]")
    _check_weight("l1_weights_sf", l1_sf, (F32,), (local, 2 * inter // 128, hidden // 128),
                  "FP32 128x128 block scales in [gate | up] row order")
    _check_weight("l2_weights_sf", l2_sf, (F32,), (local, hidden // 128, inter // 128), "FP32 128x128 block scales")
    _check_buffer_bytes(sym_buffer, _sm90_plan(y, l2, ptrs, num_max_tokens_per_rank, num_experts,
                                               num_topk).num_bytes)
    require_same_device(sym_buffer=sym_buffer, y=y, l1_weights=l1, l1_weights_sf=l1_sf, l2_weights=l2,
                        l2_weights_sf=l2_sf, cumulative_local_expert_recv_stats=stats)


def _views(sym_buffer, plan):
    views = _buffer.slice_buffer(sym_buffer, _buffer.encode_layout(plan))
    return dict(zip(_buffer.EXPORTED, views))


def fp8_mega_moe(y, l1, l1_sf, l2, l2_sf, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts,
                 num_topk, recipe, activation, activation_clamp, fast_math) -> None:
    num_ranks = len(ptrs)
    group = _group(sym_buffer, num_ranks)
    views = _views(sym_buffer, _sm90_plan(y, l2, ptrs, num_max_tokens_per_rank, num_experts, num_topk))
    inputs = _ref.Inputs(views["x"], views["x_sf"], views["topk_idx"], views["topk_weights"], y.size(0))
    experts = _ref.Experts(_ref.PerExpert(_ref.sm90_l1_weights, l1, l1_sf),
                           _ref.PerExpert(_ref.dequant_sm90_weights, l2, l2_sf))
    options = _ref.Options("sm90", "sm90", activation_clamp)
    _ref.mega_moe_forward(y, inputs, experts, options, group, num_ranks, rank_idx, num_experts, stats)


# ---- SM100 FP8 x FP4 and BF16 --------------------------------------------------------------------------------

def _check_sm100_extras(mma_type: str, shared_l1, shared_l2, post_expert_norm: bool, post_expert_norm_weight,
                        post_expert_norm_eps: float, use_trtllm_weights: bool, global_num_tokens, num_ranks: int,
                        num_max_tokens_per_rank: int, hidden: int, inter: int) -> None:
    require(not use_trtllm_weights,
            f"weight_layout: 'trtllm' packed weights need the nvfp4xnvfp4 MMA; this buffer is {mma_type!r} "
            "(expected 'megamoe')")
    require((shared_l1 is None) == (shared_l2 is None),
            "shared_l1_weights, shared_l2_weights: expected both or neither")
    if global_num_tokens is not None:
        limit = num_ranks * num_max_tokens_per_rank
        require(0 <= global_num_tokens <= limit,
                f"global_num_tokens: expected a value in [0, {limit}] (ranks x num_max_tokens_per_rank), got "
                f"{global_num_tokens}")
    if post_expert_norm:
        require(shared_l1 is None, "post_expert_norm: not supported together with shared experts")
        require(post_expert_norm_eps >= 0, f"post_expert_norm_eps: expected a value >= 0, got {post_expert_norm_eps}")
    if post_expert_norm_weight is not None:
        require(post_expert_norm, "post_expert_norm_weight: given without post_expert_norm=True")
        require_dtype("post_expert_norm_weight", post_expert_norm_weight, (F32, BF16))
        require(tuple(post_expert_norm_weight.shape) == (hidden,),
                f"post_expert_norm_weight: expected shape ({hidden},), got {tuple(post_expert_norm_weight.shape)}")
    if shared_l1 is not None:
        require_dim("shared_l1_weights", shared_l1, 2)
        require_dim("shared_l2_weights", shared_l2, 2)
        shared_inter = shared_l2.size(1) * (2 if shared_l2.dtype == torch.int8 else 1)  # FP4: two per byte
        require(shared_inter >= inter and shared_inter % inter == 0,
                f"shared_l2_weights: expected dim 1 (shared intermediate) to be a positive multiple of "
                f"intermediate_hidden ({inter}), got {shared_inter}")
        require(shared_l2.size(0) == hidden,
                f"shared_l2_weights: expected dim 0 to be hidden ({hidden}), got {shared_l2.size(0)}")


def _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter, mma_type, num_ring_tokens):
    return _buffer.plan_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, inter,
                                    mma_type, "swiglu", num_ring_tokens)


def check_fp8_fp4_mega_moe(y, l1, l1_sf, l2, l2_sf, shared_l1, shared_l1_sf, shared_l2, shared_l2_sf, stats,
                           sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts, num_topk, recipe,
                           mma_type, activation, activation_clamp, fast_math, use_x_scales, l1_alphas, l2_alphas,
                           l2_act_scales, post_expert_norm, post_expert_norm_weight, post_expert_norm_eps,
                           post_expert_norm_weight_first, use_trtllm_weights, global_num_tokens,
                           num_ring_tokens) -> None:
    num_ranks = _check_common(y, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts, num_topk,
                              activation, activation_clamp)
    recipe = tuple(int(v) for v in recipe)
    if recipe == NVFP4_RECIPE or mma_type in ("nvfp4xnvfp4", "mxf4xmxf4"):
        fail(f"mma_type: {mma_type!r} / recipe {recipe} (FP4 activations) needs a buffer kind this release does not "
             "have; expected mma_type='fp8xfp4' with recipe (1, 1, 32)")
    require(mma_type == "fp8xfp4", f"mma_type: expected 'fp8xfp4', got {mma_type!r}")
    require(recipe == MX_RECIPE, f"recipe: expected {MX_RECIPE}, got {recipe}")
    require(not use_x_scales, "use_x_scales: only for the nvfp4xnvfp4 MMA (per-token outer scales)")
    for name, t in (("l1_alphas", l1_alphas), ("l2_alphas", l2_alphas), ("l2_act_scales", l2_act_scales)):
        require(t is None, f"{name}: only for the nvfp4xnvfp4 MMA (global scales); expected None")
    require_dim("l2_weights", l2, 3)
    require_dtype("l2_weights", l2, (FP8, torch.int8))
    local = num_experts // num_ranks
    hidden = y.size(1)
    packed = l2.dtype == torch.int8
    inter = l2.size(2) * (2 if packed else 1)
    _check_sm100_extras(mma_type, shared_l1, shared_l2, post_expert_norm, post_expert_norm_weight,
                        post_expert_norm_eps, use_trtllm_weights, global_num_tokens, num_ranks,
                        num_max_tokens_per_rank, hidden, inter)
    for name, t in (("y", hidden), ("l2_weights", inter)):
        require(t % 128 == 0, f"{name}: expected hidden / intermediate sizes to be multiples of 128, got {t}")
    dtypes = (FP8, torch.int8)
    div = lambda k: k // 2 if packed else k  # noqa: E731  (FP4 E2M1 packs two values per byte)
    _check_weight("l1_weights", l1, dtypes, (local, 2 * inter, div(hidden)),
                  "[local experts, 2 x intermediate, hidden] (FP4: hidden / 2 bytes)")
    require(l1.dtype == l2.dtype, f"l1_weights: expected the dtype of l2_weights ({l2.dtype}), got {l1.dtype}")
    _check_weight("l2_weights", l2, dtypes, (local, hidden, div(inter)), "[local experts, hidden, intermediate]")
    _check_weight("l1_weights_sf", l1_sf, (I32,), (local, 2 * inter, hidden // 128),
                  "packed UE8M0, one int32 per 128 of K")
    _check_weight("l2_weights_sf", l2_sf, (I32,), (local, hidden, inter // 128), "packed UE8M0, one int32 per 128 of K")
    if shared_l1 is not None:
        require(shared_l1_sf is not None and shared_l2_sf is not None,
                "shared_l1_weights, shared_l2_weights: expected (data, sf) pairs")
        shared_inter = shared_l2.size(1) * (2 if shared_l2.dtype == torch.int8 else 1)
        sdiv = (lambda k: k // 2) if shared_l1.dtype == torch.int8 else (lambda k: k)
        _check_weight("shared_l1_weights", shared_l1, dtypes, (2 * shared_inter, sdiv(hidden)),
                      "[2 x shared intermediate, hidden]")
        _check_weight("shared_l1_weights_sf", shared_l1_sf, (I32,), (2 * shared_inter, hidden // 128),
                      "packed UE8M0")
        _check_weight("shared_l2_weights_sf", shared_l2_sf, (I32,), (hidden, shared_inter // 128), "packed UE8M0")
    _check_buffer_bytes(sym_buffer, _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                               inter, "fp8xfp4", num_ring_tokens).num_bytes)
    require_same_device(sym_buffer=sym_buffer, y=y, l1_weights=l1, l1_weights_sf=l1_sf, l2_weights=l2,
                        l2_weights_sf=l2_sf, shared_l1_weights=shared_l1, shared_l2_weights=shared_l2,
                        cumulative_local_expert_recv_stats=stats, post_expert_norm_weight=post_expert_norm_weight)


def _options(token_kind, quant, activation_clamp, post_expert_norm, weight, eps, weight_first):
    return _ref.Options(token_kind, quant, activation_clamp, post_expert_norm, weight, eps, weight_first)


def fp8_fp4_mega_moe(y, l1, l1_sf, l2, l2_sf, shared_l1, shared_l1_sf, shared_l2, shared_l2_sf, stats, sym_buffer,
                     ptrs, rank_idx, num_max_tokens_per_rank, num_experts, num_topk, recipe, mma_type, activation,
                     activation_clamp, fast_math, use_x_scales, l1_alphas, l2_alphas, l2_act_scales, post_expert_norm,
                     post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first,
                     use_trtllm_weights, global_num_tokens, num_ring_tokens) -> None:
    num_ranks = len(ptrs)
    group = _group(sym_buffer, num_ranks)
    inter = l2_sf.size(2) * 128
    views = _views(sym_buffer, _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, y.size(1),
                                          inter, "fp8xfp4", num_ring_tokens))
    inputs = _ref.Inputs(views["x"], views["x_sf"], views["topk_idx"], views["topk_weights"], y.size(0))
    experts = _ref.Experts(_ref.PerExpert(_ref.mx_l1_weights, l1, l1_sf), _ref.PerExpert(_ref.mx_l2_weights, l2, l2_sf))
    if shared_l1 is not None:
        experts.shared_l1 = _ref.mx_l1_weights(shared_l1.unsqueeze(0), shared_l1_sf.unsqueeze(0))[0]
        experts.shared_l2 = _ref.mx_l2_weights(shared_l2.unsqueeze(0), shared_l2_sf.unsqueeze(0))[0]
    options = _options("mx", "mx", activation_clamp, post_expert_norm, post_expert_norm_weight, post_expert_norm_eps,
                       post_expert_norm_weight_first)
    _ref.mega_moe_forward(y, inputs, experts, options, group, num_ranks, rank_idx, num_experts, stats)


def check_bf16_mega_moe(y, l1, l2, shared_l1, shared_l2, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank,
                        num_experts, num_topk, activation, activation_clamp, fast_math, post_expert_norm,
                        post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first,
                        use_trtllm_weights, global_num_tokens, num_ring_tokens) -> None:
    num_ranks = _check_common(y, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank, num_experts, num_topk,
                              activation, activation_clamp)
    require_dim("l2_weights", l2, 3)
    require_dtype("l2_weights", l2, (BF16,))
    local = num_experts // num_ranks
    hidden, inter = y.size(1), l2.size(2)
    for name, t in (("y", hidden), ("l2_weights", inter)):
        require(t % 128 == 0, f"{name}: expected hidden / intermediate sizes to be multiples of 128, got {t}")
    _check_sm100_extras("bf16xbf16", shared_l1, shared_l2, post_expert_norm, post_expert_norm_weight,
                        post_expert_norm_eps, use_trtllm_weights, global_num_tokens, num_ranks,
                        num_max_tokens_per_rank, hidden, inter)
    _check_weight("l1_weights", l1, (BF16,), (local, 2 * inter, hidden), "[local experts, 2 x intermediate, hidden]")
    _check_weight("l2_weights", l2, (BF16,), (local, hidden, inter), "[local experts, hidden, intermediate]")
    if shared_l1 is not None:
        _check_weight("shared_l1_weights", shared_l1, (BF16,), (2 * shared_l2.size(1), hidden),
                      "[2 x shared intermediate, hidden]")
        _check_weight("shared_l2_weights", shared_l2, (BF16,), (hidden, shared_l2.size(1)),
                      "[hidden, shared intermediate]")
    _check_buffer_bytes(sym_buffer, _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                               inter, "bf16xbf16", num_ring_tokens).num_bytes)
    require_same_device(sym_buffer=sym_buffer, y=y, l1_weights=l1, l2_weights=l2, shared_l1_weights=shared_l1,
                        shared_l2_weights=shared_l2, cumulative_local_expert_recv_stats=stats,
                        post_expert_norm_weight=post_expert_norm_weight)


def bf16_mega_moe(y, l1, l2, shared_l1, shared_l2, stats, sym_buffer, ptrs, rank_idx, num_max_tokens_per_rank,
                  num_experts, num_topk, activation, activation_clamp, fast_math, post_expert_norm,
                  post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first, use_trtllm_weights,
                  global_num_tokens, num_ring_tokens) -> None:
    num_ranks = len(ptrs)
    group = _group(sym_buffer, num_ranks)
    views = _views(sym_buffer, _ring_plan(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, y.size(1),
                                          l2.size(2), "bf16xbf16", num_ring_tokens))
    inputs = _ref.Inputs(views["x"], None, views["topk_idx"], views["topk_weights"], y.size(0))
    experts = _ref.Experts(_ref.PerExpert(lambda w: _ref.deinterleave_gate_up(w.float()), l1),
                           _ref.PerExpert(lambda w: w.float(), l2))
    if shared_l1 is not None:
        experts.shared_l1 = _ref.deinterleave_gate_up(shared_l1.float().unsqueeze(0))[0]
        experts.shared_l2 = shared_l2.float()
    options = _options("bf16", "bf16", activation_clamp, post_expert_norm, post_expert_norm_weight,
                       post_expert_norm_eps, post_expert_norm_weight_first)
    _ref.mega_moe_forward(y, inputs, experts, options, group, num_ranks, rank_idx, num_experts, stats)


# ---- pre-dispatch ---------------------------------------------------------------------------------------------

def _check_pre_dispatch(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens: int,
                        group_size: int, sf_dtype, sf_cols: int) -> None:
    require_dtype("x", x, (BF16,))
    require_dim("x", x, 2)
    hidden = x.size(1)
    require(hidden % 128 == 0, f"x: expected hidden (dim 1) to be a multiple of 128, got {hidden}")
    require_dtype("topk_idx", topk_idx, (I32, I64))
    require_dim("topk_idx", topk_idx, 2)
    num_topk = topk_idx.size(1)
    require_dtype("topk_weights", topk_weights, (F32,))
    require_dtype("buf_x", buf_x, (FP8,))
    require_dim("buf_x", buf_x, 2)
    capacity = buf_x.size(0)
    require(0 <= num_tokens <= capacity,
            f"num_tokens: expected a value in [0, {capacity}] (the buffer's token capacity), got {num_tokens}")
    require(x.size(0) >= num_tokens, f"x: expected at least num_tokens ({num_tokens}) rows, got {x.size(0)}")
    require(topk_idx.size(0) >= num_tokens and tuple(topk_weights.shape[1:]) == (num_topk,)
            and topk_weights.size(0) >= num_tokens,
            f"topk_idx, topk_weights: expected [>= {num_tokens}, k] each with the same k, got "
            f"{tuple(topk_idx.shape)} and {tuple(topk_weights.shape)}")
    require_shape("buf_x", buf_x, (capacity, hidden), "[capacity, hidden]")
    require_dtype("buf_x_sf", buf_x_sf, (sf_dtype,))
    require_shape("buf_x_sf", buf_x_sf, (capacity, sf_cols), f"one scale column per {group_size} channels")
    require_dtype("buf_topk_idx", buf_topk_idx, (I64,))
    require_shape("buf_topk_idx", buf_topk_idx, (capacity, num_topk), "[capacity, k]")
    require_dtype("buf_topk_weights", buf_topk_weights, (F32,))
    require_shape("buf_topk_weights", buf_topk_weights, (capacity, num_topk), "[capacity, k]")
    require_same_device(x=x, topk_idx=topk_idx, topk_weights=topk_weights, buf_x=buf_x, buf_x_sf=buf_x_sf,
                        buf_topk_idx=buf_topk_idx, buf_topk_weights=buf_topk_weights)


def check_pre_dispatch_sm90(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                            group_size, routed_scaling_factor) -> None:
    require(group_size == 128,
            f"group_size: the SM90 pre-dispatch uses per-128 scales (expected 128), got {group_size}")
    hidden = x.size(-1) if isinstance(x, torch.Tensor) and x.dim() == 2 else 0
    _check_pre_dispatch(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                        group_size, F32, hidden // 128)


def pre_dispatch_sm90(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                      group_size, routed_scaling_factor) -> None:
    _ref.pre_dispatch_sm90(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                           group_size, routed_scaling_factor)


def check_pre_dispatch(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                       group_size, mma_type, buf_x_scales, expert_scales) -> None:
    require(mma_type == "fp8xfp4",
            f"mma_type: expected 'fp8xfp4' (the FP8-dispatch buffer of this release), got {mma_type!r}")
    require(group_size == _ref.MX_GROUP,
            f"group_size: expected {_ref.MX_GROUP} (the buffer's x_sf holds one UE8M0 byte per 32 channels), "
            f"got {group_size}")
    require(buf_x_scales is None, "buf_x_scales: only for the nvfp4xnvfp4 MMA (per-token outer scales); expected None")
    hidden = x.size(-1) if isinstance(x, torch.Tensor) and x.dim() == 2 else 0
    _check_pre_dispatch(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                        group_size, I32, hidden // 128)
    if expert_scales is not None:
        require_dtype("expert_scales", expert_scales, (F32,))
        require_dim("expert_scales", expert_scales, 1)
        require_same_device(x=x, expert_scales=expert_scales)


def pre_dispatch(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens, group_size,
                 mma_type, buf_x_scales, expert_scales) -> None:
    _ref.pre_dispatch_mx(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights, num_tokens,
                         group_size, expert_scales)


# ---- BLOCK_M ------------------------------------------------------------------------------------------------------

def check_block_m(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_tokens: int, num_topk: int,
                  mma_type: str, global_num_tokens: Optional[int]) -> None:
    for name, value in (("num_ranks", num_ranks), ("num_experts", num_experts),
                        ("num_max_tokens_per_rank", num_max_tokens_per_rank), ("num_topk", num_topk)):
        require(value >= 1, f"{name}: expected a positive integer, got {value}")
    require(num_experts % num_ranks == 0,
            f"num_experts: expected a multiple of num_ranks ({num_ranks}), got {num_experts}")
    require(0 <= num_tokens <= num_max_tokens_per_rank,
            f"num_tokens: expected a value in [0, {num_max_tokens_per_rank}], got {num_tokens}")
    require(mma_type in _buffer.MMA_TYPES or mma_type in ("fp8", "fp8xfp8"),
            f"mma_type: expected one of {', '.join(_buffer.MMA_TYPES)}, got {mma_type!r}")
    if global_num_tokens is not None:
        limit = num_ranks * num_max_tokens_per_rank
        require(0 <= global_num_tokens <= limit,
                f"global_num_tokens: expected a value in [0, {limit}] (ranks x num_max_tokens_per_rank), got "
                f"{global_num_tokens}")


def block_m(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_tokens: int, num_topk: int,
            mma_type: str, global_num_tokens: Optional[int]) -> int:
    """Our BLOCK_M choice: the smallest candidate that holds the expected tokens per expert (all ranks' tokens
    times top-k over the experts; ``global_num_tokens`` when given, else ``num_ranks * num_tokens``), else the
    largest. It only selects a tile, never the result."""
    tokens = global_num_tokens if global_num_tokens is not None else num_ranks * num_tokens
    expected = -(-tokens * num_topk // num_experts)
    for candidate in _buffer.CANDIDATE_BLOCK_M:
        if candidate >= expected:
            return candidate
    return _buffer.CANDIDATE_BLOCK_M[-1]
