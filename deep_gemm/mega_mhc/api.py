"""Public fused mHC step, call-compatible with DeepGEMM 0.2.3's ``mega_mhc``."""

from __future__ import annotations

from typing import Optional

import torch

from ..core.eager import eager_ops

__all__ = ["mega_mhc"]

_ops = eager_ops


def mega_mhc(x: torch.Tensor, residual: torch.Tensor, shifted_prev_mix: Optional[torch.Tensor],
             post_mix: torch.Tensor, comb_res_mix: torch.Tensor, fn: torch.Tensor, mix_scales: torch.Tensor,
             mix_bases: torch.Tensor, hc_mult: int, hc_norm_eps: float, hc_pre_eps: float, hc_post_scale: float,
             sinkhorn_eps: float, num_sinkhorn_iters: int, rmsnorm_weight: torch.Tensor, rmsnorm_eps: float,
             rmsnorm_scale: float, new_residual: torch.Tensor, new_prev_mix: Optional[torch.Tensor],
             new_post_mix: torch.Tensor, new_comb_res_mix: torch.Tensor, y_bf16: Optional[torch.Tensor] = None,
             y_fp8: Optional[torch.Tensor] = None, y_gemm_sf: Optional[torch.Tensor] = None,
             y_routed_sf: Optional[torch.Tensor] = None, y_shared_sf: Optional[torch.Tensor] = None,
             shared_sf_block_m: int = 0) -> None:
    """One fused mHC step (see ``deep_gemm/mega_mhc/reference.py`` for the exact semantics).

    Inputs: ``x`` BF16 ``[T, H]`` (H a multiple of 1024), ``residual`` BF16 ``[T, 4, H]``, ``post_mix`` FP32
    ``[T, 4, 1]``, ``comb_res_mix`` FP32 ``[T, 4, 4]``, ``fn`` FP32 ``[24, 4 H]``, ``mix_scales`` FP32 ``[3]``,
    ``mix_bases`` FP32 ``[24]``, ``rmsnorm_weight`` BF16 ``[H]``; ``hc_mult`` must be 4. Shifted mHC passes
    ``shifted_prev_mix`` and ``new_prev_mix`` (FP32 ``[T, 4, 1]``), normal mHC neither.

    Outputs (written in place): ``new_residual``, ``new_post_mix``, ``new_comb_res_mix`` (shapes of their inputs),
    ``new_prev_mix`` (shifted), and at least one of ``y_bf16`` (BF16 ``[T, H]``) and ``y_fp8`` (E4M3 ``[T, H]``).
    With ``y_fp8``, its UE8M0 scales (int32 ``[T, H / 128]``, four per word) go to ``y_gemm_sf`` (TMA-aligned
    column-major) or to both ``y_routed_sf`` (row-major) and ``y_shared_sf`` (the Mega MoE shared-expert layout
    of ``shared_sf_block_m``-row blocks; it writes padded rows in its storage beyond the view, so that form is for
    eager calls: torch.compile's functionalisation would clone only the view).
    """
    _ops.mega_mhc.default(
        x, residual, shifted_prev_mix, post_mix, comb_res_mix, fn, mix_scales, mix_bases, int(hc_mult),
        float(hc_norm_eps), float(hc_pre_eps), float(hc_post_scale), float(sinkhorn_eps), int(num_sinkhorn_iters),
        rmsnorm_weight, float(rmsnorm_eps), float(rmsnorm_scale), new_residual, new_prev_mix, new_post_mix,
        new_comb_res_mix, y_bf16, y_fp8, y_gemm_sf, y_routed_sf, y_shared_sf, int(shared_sf_block_m))
