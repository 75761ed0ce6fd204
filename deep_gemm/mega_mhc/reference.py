"""CPU reference of ``mega_mhc``: the semantics of DeepGEMM's SM100 kernel, in FP64 between its BF16 rounding points.

Per token t (R = 4 routes, hidden H):

1. post-mix: ``new_residual[o] = bf16(post_mix[o] * x + sum_i comb_res_mix[i, o] * residual[i])``.
2. projection: ``h = new_residual.flatten() @ fn.T`` (24 outputs; DeepGEMM: TF32 MMA) and
   ``r = rsqrt(sum(new_residual^2) / (R H) + hc_norm_eps)``; ``a_j = h_j r mix_scales[s_j] + mix_bases[j]`` with
   s = 0 for the R pre outputs, 1 for the R post outputs, 2 for the R x R comb outputs.
3. mixes: ``pre = sigmoid(a_pre) + hc_pre_eps``; ``post = sigmoid(a_post) * hc_post_scale``; ``comb`` (row-major
   R x R) is Sinkhorn-normalised: row softmax, ``+ eps``, divide by column sums ``+ eps``, then
   ``num_sinkhorn_iters - 1`` rounds of dividing by row sums ``+ eps`` and column sums ``+ eps``. Written:
   ``new_post_mix``, ``new_comb_res_mix``, and in shifted mode ``new_prev_mix = pre``.
4. next-layer input: normal mode ``u = bf16(sum_r pre[r] new_residual[r])``; shifted mode
   ``u = bf16(sum_r shifted_prev_mix[r] new_residual[r])``. RMSNorm: ``y = bf16(u rsqrt(mean(u^2) + rmsnorm_eps)
   rmsnorm_scale rmsnorm_weight)`` into ``y_bf16``.
5. FP8: per 32 elements of y, the UE8M0 exponent that maps the group's amax into E4M3's 448 (DeepGEMM's bit
   ceiling on the BF16 amax, floored at 2^-22 / 448); ``y_fp8 = e4m3(bf16(y / 2^e))``; four exponents per int32
   word (byte j = group j of the word's 128 elements) into ``y_gemm_sf`` / ``y_routed_sf`` and, in the Mega MoE
   shared-expert layout, ``y_shared_sf`` (token t's row: block ``t // M`` of ``align(M, 128)`` rows, then
   ``(i & ~127) + 4 (i & 31) + ((i >> 5) & 3)`` for ``i = t % M``; the padded rows lie in its storage past the view).
"""

from __future__ import annotations

import torch

from .checks import HIDDEN_PER_SF, HIDDEN_PER_SF_WORD, NUM_ROUTES, shared_sf_rows

_BF16_MANTISSA_BITS = 7
_E4M3_MAX_MANTISSA = 0x60       # mantissa of 1.75 (448 = 1.75 * 2^8), in BF16's 7 bits
_E4M3_MAX_EXPONENT = 8
_MIN_SF_EXPONENT = 105          # 2^-22: DeepGEMM's floor (its per-token casts clamp amax at 1e-4)


def ue8m0_exponents(amax_bf16: torch.Tensor) -> torch.Tensor:
    """Biased UE8M0 exponents (int32) of BF16 group maxima, by DeepGEMM's integer ceiling."""
    bits = amax_bf16.view(torch.int16).to(torch.int32) & 0xFFFF
    rounded = (bits + ((1 << _BF16_MANTISSA_BITS) - 1) - _E4M3_MAX_MANTISSA) >> _BF16_MANTISSA_BITS
    return rounded.clamp(min=_MIN_SF_EXPONENT + _E4M3_MAX_EXPONENT) - _E4M3_MAX_EXPONENT


def _sinkhorn(comb: torch.Tensor, eps: float, iters: int) -> torch.Tensor:
    v = torch.exp(comb - comb.amax(dim=-1, keepdim=True))
    v = v / v.sum(dim=-1, keepdim=True) + eps
    v = v / (v.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        v = v / (v.sum(dim=-1, keepdim=True) + eps)
        v = v / (v.sum(dim=-2, keepdim=True) + eps)
    return v


def shared_sf_row(tokens: torch.Tensor, block_m: int) -> torch.Tensor:
    i = tokens % block_m
    return tokens // block_m * (-(-block_m // 128) * 128) + (i & ~127) + (i & 31) * 4 + ((i >> 5) & 3)


def quantise_y(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 5 on BF16 ``y`` [T, H]: (E4M3 [T, H], int32 scale words [T, H / 128], four UE8M0 exponents each)."""
    t, h = y.shape
    groups = y.view(t, h // HIDDEN_PER_SF, HIDDEN_PER_SF)
    exps = ue8m0_exponents(groups.abs().amax(dim=2))                     # [t, h / 32]
    inverse = ((254 - exps) << 23).view(torch.float32)                   # 2^(127 - e), exact
    scaled = (groups.float() * inverse[:, :, None]).to(torch.bfloat16)   # exact: a power of two
    q = scaled.float().to(torch.float8_e4m3fn).view(t, h)
    words = exps.to(torch.uint8).view(t, h // HIDDEN_PER_SF_WORD, 4).contiguous().view(torch.int32)[..., 0]
    return q, words


def mega_mhc_reference(x, residual, shifted_prev_mix, post_mix, comb_res_mix, fn, mix_scales, mix_bases, hc_mult,
                       hc_norm_eps, hc_pre_eps, hc_post_scale, sinkhorn_eps, num_sinkhorn_iters, rmsnorm_weight,
                       rmsnorm_eps, rmsnorm_scale, new_residual, new_prev_mix, new_post_mix, new_comb_res_mix,
                       y_bf16, y_fp8, y_gemm_sf, y_routed_sf, y_shared_sf, shared_sf_block_m) -> None:
    t, h = x.shape
    if t == 0:
        return
    r = NUM_ROUTES
    # 1. post-mix of the routes (the BF16 rounding every consumer reads)
    mixed = post_mix.double() * x.double()[:, None, :] + torch.einsum("tio,tih->toh", comb_res_mix.double(),
                                                                      residual.double())
    nr = mixed.to(torch.bfloat16)
    nr64 = nr.double()
    # 2. projection and its RMS
    hc = nr64.reshape(t, r * h) @ fn.double().T
    rms = torch.rsqrt((nr64 * nr64).sum(dim=(1, 2)) / (r * h) + hc_norm_eps)[:, None]
    which = torch.tensor([0] * r + [1] * r + [2] * (r * r), device=x.device)
    affine = hc * rms * mix_scales.double()[which] + mix_bases.double()
    # 3. mixes
    pre = torch.sigmoid(affine[:, :r]) + hc_pre_eps
    post = torch.sigmoid(affine[:, r:2 * r]) * hc_post_scale
    comb = _sinkhorn(affine[:, 2 * r:].reshape(t, r, r), sinkhorn_eps, num_sinkhorn_iters)
    # 4. next-layer input and its RMSNorm
    coeff = shifted_prev_mix.double()[:, :, 0] if shifted_prev_mix is not None else pre
    u = torch.einsum("tr,trh->th", coeff, nr64).to(torch.bfloat16).double()
    scale = torch.rsqrt((u * u).mean(dim=1, keepdim=True) + rmsnorm_eps) * rmsnorm_scale
    y = (u * scale * rmsnorm_weight.double()).to(torch.bfloat16)

    new_residual.copy_(nr)
    new_post_mix.copy_(post[:, :, None].float())
    new_comb_res_mix.copy_(comb.float())
    if new_prev_mix is not None:
        new_prev_mix.copy_(pre[:, :, None].float())
    if y_bf16 is not None:
        y_bf16.copy_(y)
    if y_fp8 is None:
        return
    # 5. FP8 with UE8M0 scales per 32 elements, four per int32 word
    q, words = quantise_y(y)
    y_fp8.copy_(q)
    primary = y_routed_sf if y_routed_sf is not None else y_gemm_sf
    primary.copy_(words)
    if y_shared_sf is not None:
        rows = shared_sf_rows(t, shared_sf_block_m)
        storage = y_shared_sf.as_strided((rows, words.size(1)), (1, y_shared_sf.stride(1)))
        storage[shared_sf_row(torch.arange(t, device=x.device), shared_sf_block_m)] = words
