"""CUDA launcher of ``mega_mhc`` (the op's CUDA kernel calls it after the shared check).

Two launches on the current stream (``kernels.py``), configured by ``plan.plan``, with no host synchronisation (a
CUDA graph can capture the call). Kernel 1's per-split partials go to a fresh FP32 workspace of [splits, T, 32]
(from the caching allocator: a kept per-stream workspace could be taken by another op's launch between the two).

It returns ``NotImplemented`` (the reference runs) where the kernels do not apply: not asked for (the family awaits
its GPU run: ``core/gpu_validation.py``), a GPU without BF16 MMAs (below sm_80), an FP8 output below sm_89 (no
E4M3 conversion in Triton there), a hidden size above ``plan.MAX_NORM_HIDDEN`` (kernel 2 holds a whole row), or
a row tensor (``x``, ``residual``, ``fn``, ``rmsnorm_weight``, ``new_residual``, ``y_bf16``, ``y_fp8``) not starting
at a 16-byte boundary (views at odd offsets).
"""

from __future__ import annotations

import torch

from ..core import arch
from ..core.launch import launch
from ..core.runtime import usable_sms
from ..utils.numeric import next_pow2
from . import plan as mhc_plan


# Bytes: the kernels are specialised on their row tensors starting at 16-byte boundaries (vector loads and stores).
TILE_ALIGNMENT = 16


def _kernels():
    from . import kernels
    return kernels


def mega_mhc(x, residual, shifted_prev_mix, post_mix, comb_res_mix, fn, mix_scales, mix_bases, hc_mult, hc_norm_eps,
             hc_pre_eps, hc_post_scale, sinkhorn_eps, num_sinkhorn_iters, rmsnorm_weight, rmsnorm_eps, rmsnorm_scale,
             new_residual, new_prev_mix, new_post_mix, new_comb_res_mix, y_bf16, y_fp8, y_gemm_sf, y_routed_sf,
             y_shared_sf, shared_sf_block_m, *, overrides: mhc_plan.MhcOverrides = mhc_plan.NO_OVERRIDES):
    """``overrides`` pins the token block / hidden splits and asks for the kernels (tests and sweeps)."""
    if not mhc_plan.kernels_wanted(overrides):
        return NotImplemented
    sm = arch.sm_of_tensor(x)
    if not arch.has_mma(sm) or (y_fp8 is not None and not arch.has_fp8_mma(sm)):
        return NotImplemented
    t, h = x.shape
    if not mhc_plan.supported_hidden(h):
        return NotImplemented
    tiled = (x, residual, fn, new_residual, rmsnorm_weight, y_bf16, y_fp8)
    if any(a is not None and a.data_ptr() % TILE_ALIGNMENT for a in tiled):
        return NotImplemented  # (the kernels are compiled for aligned rows)
    if t == 0:
        return None
    cfg = mhc_plan.plan(t, h, usable_sms(), overrides)
    k = _kernels()
    dev = x.device.index or 0
    n = mhc_plan.PROJ_N
    ws = torch.empty(cfg.splits * t * n, dtype=torch.float32, device=x.device)
    shifted = shifted_prev_mix is not None
    # Shifted mHC: kernel 1 writes the next layer's input u where y_bf16 will go (kernel 2 reads each row before it
    # writes it), or without y_bf16 to a fresh [T, H] buffer.
    if shifted:
        u = y_bf16 if y_bf16 is not None else torch.empty(t, h, dtype=torch.bfloat16, device=x.device)
    else:
        u = new_residual  # (unused)
    chunks = h // cfg.block_h
    launch(k._mhc_post_kernel, (-(-t // cfg.block_t), cfg.splits, 1),
           (x, residual, post_mix, comb_res_mix, shifted_prev_mix if shifted else post_mix, fn, new_residual, u, ws,
            t, chunks, cfg.splits, cfg.block_t, cfg.block_h, n, mhc_plan.PROJ_MMA_M,
            mhc_plan.NUM_ROUTES * (mhc_plan.NUM_ROUTES + 2), mhc_plan.PROJ_SQ_COL, shifted),
           name="mhc_post", config_key=(cfg.block_t, cfg.block_h, shifted), num_warps=cfg.post_warps,
           device_index=dev)

    has_fp8 = y_fp8 is not None
    has_shared = y_shared_sf is not None
    primary = y_routed_sf if y_routed_sf is not None else y_gemm_sf
    # Absent outputs: a tensor of a fixed dtype in their place (never touched: their constexpr switch is off), so a
    # config key always meets the same argument types.
    spare_bf16 = new_residual
    block_m = shared_sf_block_m if has_shared else 1
    words = h // (mhc_plan.SF_GROUP * mhc_plan.SF_PER_WORD)
    s_pow2 = next_pow2(mhc_plan.MAX_SPLITS)
    w_pow2 = cfg.norm_block // (mhc_plan.SF_GROUP * mhc_plan.SF_PER_WORD)
    flags = (shifted, y_bf16 is not None, has_fp8, has_shared)
    launch(k._mhc_norm_kernel, (t, 1, 1),
           (new_residual, u, ws, mix_scales, mix_bases, rmsnorm_weight,
            new_post_mix, new_comb_res_mix, new_prev_mix if shifted else new_post_mix,
            y_bf16 if y_bf16 is not None else spare_bf16, y_fp8 if has_fp8 else spare_bf16,
            primary if has_fp8 else spare_bf16, y_shared_sf if has_shared else spare_bf16,
            t, words, cfg.splits, int(num_sinkhorn_iters), float(hc_norm_eps), float(hc_pre_eps), float(hc_post_scale),
            float(sinkhorn_eps), float(rmsnorm_eps), float(rmsnorm_scale),
            primary.stride(0) if has_fp8 else 0, primary.stride(1) if has_fp8 else 0,
            y_shared_sf.stride(1) if has_shared else 0, block_m, -(-block_m // 128) * 128,
            s_pow2, n, mhc_plan.PROJ_SQ_COL, w_pow2, mhc_plan.SF_GROUP, *flags),
           name="mhc_norm", config_key=(s_pow2, w_pow2, *flags), num_warps=cfg.norm_warps,
           max_registers=cfg.norm_max_registers, device_index=dev)
    return None
