"""Argument checks of ``mega_mhc`` (DeepGEMM's host asserts, as errors naming the argument)."""

from __future__ import annotations

import torch

from ..core.errors import require, require_contiguous, require_dtype, require_same_device

NUM_ROUTES = 4
NUM_HC_OUTPUTS = NUM_ROUTES * (NUM_ROUTES + 2)
HIDDEN_MULTIPLE = 16 * 64          # DeepGEMM's default split count times its K block
HIDDEN_PER_SF, HIDDEN_PER_SF_WORD = 32, 128
MAX_TOKENS = 1 << 20


def _dense(name: str, t, shape: tuple, dtype) -> None:
    require_dtype(name, t, (dtype,))
    require(tuple(t.shape) == shape, f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    require_contiguous(name, t)


def shared_sf_rows(num_tokens: int, block_m: int) -> int:
    return -(-num_tokens // block_m) * (-(-block_m // 128) * 128)


def check_mega_mhc(x, residual, shifted_prev_mix, post_mix, comb_res_mix, fn, mix_scales, mix_bases, hc_mult,
                   hc_norm_eps, hc_pre_eps, hc_post_scale, sinkhorn_eps, num_sinkhorn_iters, rmsnorm_weight,
                   rmsnorm_eps, rmsnorm_scale, new_residual, new_prev_mix, new_post_mix, new_comb_res_mix,
                   y_bf16, y_fp8, y_gemm_sf, y_routed_sf, y_shared_sf, shared_sf_block_m) -> None:
    require_same_device(x=x, residual=residual, shifted_prev_mix=shifted_prev_mix, post_mix=post_mix,
                        comb_res_mix=comb_res_mix, fn=fn, mix_scales=mix_scales, mix_bases=mix_bases,
                        rmsnorm_weight=rmsnorm_weight, new_residual=new_residual, new_prev_mix=new_prev_mix,
                        new_post_mix=new_post_mix, new_comb_res_mix=new_comb_res_mix, y_bf16=y_bf16, y_fp8=y_fp8,
                        y_gemm_sf=y_gemm_sf, y_routed_sf=y_routed_sf, y_shared_sf=y_shared_sf)
    require((shifted_prev_mix is None) == (new_prev_mix is None),
            "shifted_prev_mix, new_prev_mix: expected both (shifted mHC) or neither (normal mHC)")
    require((y_routed_sf is None) == (y_shared_sf is None), "y_routed_sf, y_shared_sf: expected both or neither")
    require(y_gemm_sf is None or y_routed_sf is None, "y_gemm_sf, y_routed_sf: expected at most one scale layout")
    require(y_bf16 is not None or y_fp8 is not None, "y_bf16, y_fp8: expected at least one output")
    require((y_fp8 is not None) == (y_gemm_sf is not None or y_routed_sf is not None),
            "y_fp8: expected together with its scales (y_gemm_sf, or y_routed_sf and y_shared_sf)")
    require((shared_sf_block_m > 0) if y_shared_sf is not None else shared_sf_block_m == 0,
            f"shared_sf_block_m: expected > 0 with y_shared_sf and 0 without, got {shared_sf_block_m}")
    require(hc_mult == NUM_ROUTES, f"hc_mult: expected {NUM_ROUTES} (routes of DeepGEMM's kernel), got {hc_mult}")
    require(num_sinkhorn_iters >= 1, f"num_sinkhorn_iters: expected >= 1, got {num_sinkhorn_iters}")
    require_dtype("x", x, (torch.bfloat16,))
    require(x.dim() == 2, f"x: expected [T, H], got shape {tuple(x.shape)}")
    t, h = x.shape
    require(t <= MAX_TOKENS, f"x: expected at most {MAX_TOKENS} tokens, got {t}")
    require(h > 0 and h % HIDDEN_MULTIPLE == 0, f"x: expected H a positive multiple of {HIDDEN_MULTIPLE}, got {h}")
    _dense("x", x, (t, h), torch.bfloat16)
    _dense("residual", residual, (t, NUM_ROUTES, h), torch.bfloat16)
    _dense("post_mix", post_mix, (t, NUM_ROUTES, 1), torch.float32)
    _dense("comb_res_mix", comb_res_mix, (t, NUM_ROUTES, NUM_ROUTES), torch.float32)
    _dense("fn", fn, (NUM_HC_OUTPUTS, NUM_ROUTES * h), torch.float32)
    _dense("mix_scales", mix_scales, (3,), torch.float32)
    _dense("mix_bases", mix_bases, (NUM_HC_OUTPUTS,), torch.float32)
    _dense("rmsnorm_weight", rmsnorm_weight, (h,), torch.bfloat16)
    _dense("new_residual", new_residual, (t, NUM_ROUTES, h), torch.bfloat16)
    _dense("new_post_mix", new_post_mix, (t, NUM_ROUTES, 1), torch.float32)
    _dense("new_comb_res_mix", new_comb_res_mix, (t, NUM_ROUTES, NUM_ROUTES), torch.float32)
    if shifted_prev_mix is not None:
        _dense("shifted_prev_mix", shifted_prev_mix, (t, NUM_ROUTES, 1), torch.float32)
        _dense("new_prev_mix", new_prev_mix, (t, NUM_ROUTES, 1), torch.float32)
    if y_bf16 is not None:
        _dense("y_bf16", y_bf16, (t, h), torch.bfloat16)
    if y_fp8 is not None:
        _dense("y_fp8", y_fp8, (t, h), torch.float8_e4m3fn)
    words = h // HIDDEN_PER_SF_WORD
    for name, sf in (("y_gemm_sf", y_gemm_sf), ("y_routed_sf", y_routed_sf), ("y_shared_sf", y_shared_sf)):
        if sf is None:
            continue
        require_dtype(name, sf, (torch.int32,))
        require(tuple(sf.shape) == (t, words), f"{name}: expected shape {(t, words)} ([T, H / 128]), "
                                               f"got {tuple(sf.shape)}")
    if y_gemm_sf is not None:
        require(y_gemm_sf.stride(0) == 1 and y_gemm_sf.stride(1) >= t and y_gemm_sf.stride(1) % 4 == 0,
                f"y_gemm_sf: expected a TMA-aligned column-major tensor (stride(0) == 1, stride(1) >= T and a "
                f"multiple of 4), got strides {y_gemm_sf.stride()}")
    if y_routed_sf is not None:
        require_contiguous("y_routed_sf", y_routed_sf)
    if y_shared_sf is not None:
        rows = shared_sf_rows(t, shared_sf_block_m)
        require(y_shared_sf.stride(0) == 1 and y_shared_sf.stride(1) >= rows,
                f"y_shared_sf: expected column-major words over {rows} padded rows (stride(0) == 1, "
                f"stride(1) >= {rows}), got strides {y_shared_sf.stride()}")
        needed = y_shared_sf.storage_offset() + rows + (words - 1) * y_shared_sf.stride(1)
        have = y_shared_sf.untyped_storage().nbytes() // 4
        require(needed <= have, f"y_shared_sf: its storage must hold {needed} words (padded shared-expert rows), "
                                f"has {have}")
