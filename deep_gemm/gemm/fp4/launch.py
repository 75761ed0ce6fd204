"""CUDA launchers of the FP4 GEMMs on the dequantising Triton kernel (``kernels._fp4_gemm_kernel``).

Each launcher takes its op's schema arguments after the shared check, reads the tile from ``plan.plan`` and makes
one launch on the current stream, with no host read of device data (so CUDA graphs can capture it). They return
``NotImplemented`` (the op's torch reference then runs) when:

* the kernels are not asked for, which matters only while the family is listed in ``core/gpu_validation.py``
  (then ``Fp4Overrides(kernels=True)`` runs them (``run_launcher(..., launcher_kwargs=dict(overrides=...))`` for the FP4
  ops; ``launcher_kwargs=dict(fp4_overrides=...)`` for the FP8 GEMMs' FP4 forms, which the FP8 launchers hand here);
* the device has no BF16 MMA (below sm_80: ``deep_gemm.core.arch.has_mma``);
* ``cublaslt_nvfp4_gemm_nt``: c is not row-major;
* the FP8 GEMMs' forms: one operand's scales FP32 and the other's packed UE8M0; an M-grouped contiguous alignment
  (``get_mk_alignment_for_contiguous_layout``) no power-of-two tile height from 16 up divides; an
  ``Fp4Overrides.block_k`` that does not divide the K granularity of FP32 scales.

Covered: ``k_grouped_fp4_gemm_nt_contiguous`` (sizes or psum layout, c None / separate / d), ``cublaslt_nvfp4_gemm_nt``
(BF16 or FP32 d, c), and ``fp8_fp4_gemm_nt`` (= ``fp4_gemm_nt``), ``m_grouped_fp8_fp4_gemm_nt_contiguous`` (expert
ids or psum layout) and ``m_grouped_fp8_fp4_gemm_nt_masked`` with FP8 or packed FP4 A and B, and scales at K
granularity 32 or 128 that are packed UE8M0 (int32) on both operands (applied before the dot) or FP32 on both
(any values, B per row or per 128 rows: applied after each 32-K dot, as DeepGEMM's promotion), any operand
strides, BF16 or FP32 d, c.
"""

from __future__ import annotations

import torch

from ...common.operands import FP4_PACKED, written_without_launch
from ...core import arch
from ...core.launch import launch
from ...core.runtime import get_mk_alignment_for_contiguous_layout
from ...utils.math import ceil_div
from ...utils.numeric import group_pad
from . import plan as fp4_plan
from .checks import K_GROUP_SF, NVFP4_BLOCK, TILE_K
from .plan import NO_OVERRIDES, Fp4Overrides

# kernels.py's constexpr codes (kept here as plain ints: this module imports no Triton).
SF_FP32, SF_UE8M0_INT, SF_UE4M3_TILED = 0, 1, 2
DENSE, K_GROUPED, K_GROUPED_PSUM, M_IDS, M_PSUM, MASKED = 0, 1, 2, 3, 4, 5


def _kernel():
    from .kernels import _fp4_gemm_kernel
    return _fp4_gemm_kernel


def _runs(overrides: Fp4Overrides, t: torch.Tensor) -> bool:
    return fp4_plan.kernels_wanted(overrides) and arch.has_mma(arch.sm_of_tensor(t))


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """A one-byte operand (FP8, packed FP4, UE4M3 scales) as uint8: the kernel decodes the bits itself."""
    return t.view(torch.uint8)


def _launch(*, a, b, sfa, sfb, d, c, layout, m, n, k, num_groups, strides_a, strides_b, strides_sfa, strides_sfb,
            col_tiles=(0, 0), strides_d, strides_c=(0, 0), a_fp4, b_fp4, sf_kind, gran_k_a, gran_k_b, gran_n_b=1,
            grouping=DENSE, psum_align=1, zero_gaps=True, scale_after=False, grid_groups=1,
            cfg: fp4_plan.Fp4Config) -> None:
    """One launch over (M x N tiles, ``grid_groups``); the arguments in kernels._fp4_gemm_kernel's order."""
    grid = (ceil_div(m, cfg.block_m) * ceil_div(n, cfg.block_n), grid_groups, 1)
    g_pow2 = group_pad(num_groups)
    has_c = c is not None
    args = (a, b, sfa, sfb, d, c if has_c else d, layout if layout is not None else d, m, n, k, num_groups,
            *strides_a, *strides_b, *strides_sfa, *strides_sfb, *col_tiles, *strides_d, *strides_c,
            cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m, a_fp4, b_fp4, sf_kind, gran_k_a, gran_k_b, gran_n_b,
            grouping, g_pow2, psum_align, zero_gaps, scale_after, has_c)
    config_key = (cfg, a_fp4, b_fp4, sf_kind, gran_k_a, gran_k_b, gran_n_b, grouping, g_pow2, psum_align, zero_gaps,
                  scale_after, has_c, d.dtype)
    launch(_kernel(), grid, args, name="fp4_gemm", config_key=config_key, num_warps=cfg.num_warps,
           num_stages=cfg.num_stages, device_index=d.device.index or 0)


def _strides3(t: torch.Tensor) -> tuple:
    """(group, row, column) strides of a [rows, cols] (group stride 0) or [G, rows, cols] tensor."""
    return tuple(t.stride()) if t.dim() == 3 else (0, *t.stride())


def k_grouped_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d, ks, grouped_layout, c, recipe, compiled_dims,
                                     use_psum_layout, *, overrides: Fp4Overrides = NO_OVERRIDES):
    """K-grouped FP4 (checks.check_k_grouped_fp4_gemm_nt_contiguous): one launch over (tiles, groups); each group's
    K range comes from grouped_layout on the device."""
    if not _runs(overrides, d):
        return NotImplemented
    num_groups, m, n = d.shape
    if m == 0 or n == 0 or num_groups == 0:
        return None
    psum = bool(use_psum_layout)
    cfg = fp4_plan.plan(m, n, overrides)
    _launch(a=_bytes(a), b=_bytes(b), sfa=sfa, sfb=sfb, d=d, c=c, layout=grouped_layout, m=m, n=n, k=a.size(1) * 2,
            num_groups=num_groups, strides_a=(0, a.stride(0), a.stride(1)), strides_b=(0, b.stride(0), b.stride(1)),
            # (scales are [sum_K / 32, rows]: the row stride is dim 1's)
            strides_sfa=(0, sfa.stride(1), sfa.stride(0)), strides_sfb=(0, sfb.stride(1), sfb.stride(0)),
            strides_d=(d.stride(0), d.stride(1)), strides_c=(c.stride(0), c.stride(1)) if c is not None else (0, 0),
            a_fp4=True, b_fp4=True, sf_kind=SF_FP32, gran_k_a=K_GROUP_SF, gran_k_b=K_GROUP_SF,
            grouping=K_GROUPED_PSUM if psum else K_GROUPED,
            psum_align=get_mk_alignment_for_contiguous_layout() if psum else 1, grid_groups=num_groups, cfg=cfg)
    return None


def cublaslt_nvfp4_gemm_nt(a, sfa, b, sfb, d, c, *, overrides: Fp4Overrides = NO_OVERRIDES):
    """NVFP4 (checks.check_cublaslt_nvfp4_gemm_nt): UE4M3 scales per 16 K read from cuBLASLt's tiles."""
    if not _runs(overrides, d):
        return NotImplemented
    m, n = d.shape
    if c is not None and c.numel() > 0 and n > 1 and c.stride(1) != 1:
        return NotImplemented
    k = a.size(1) * 2
    if written_without_launch(d, c, m, n, k):
        return None
    col_tiles = ceil_div(k, TILE_K)
    _launch(a=_bytes(a), b=_bytes(b), sfa=_bytes(sfa), sfb=_bytes(sfb), d=d, c=c, layout=None, m=m, n=n, k=k,
            num_groups=1, strides_a=(0, a.stride(0), a.stride(1)), strides_b=(0, b.stride(0), b.stride(1)),
            strides_sfa=(0, 0, 0), strides_sfb=(0, 0, 0), col_tiles=(col_tiles, col_tiles),
            strides_d=(0, d.stride(0)), strides_c=(0, c.stride(0)) if c is not None else (0, 0),
            a_fp4=True, b_fp4=True, sf_kind=SF_UE4M3_TILED, gran_k_a=NVFP4_BLOCK, gran_k_b=NVFP4_BLOCK,
            cfg=fp4_plan.plan(m, n, overrides))
    return None


def _scale_mode(sfa, sfb):
    """How the FP8 GEMMs' FP4 forms apply scales: (SF_UE8M0_INT, before the dot) for packed UE8M0 on both
    operands, (SF_FP32, after the dot: exact for any FP32 value) for FP32 on both, else None (mixed kinds: the
    reference)."""
    if sfa.dtype == torch.int32 and sfb.dtype == torch.int32:
        return SF_UE8M0_INT, False
    if sfa.dtype == torch.float32 and sfb.dtype == torch.float32:
        return SF_FP32, True
    return None


def _logical_k(a: torch.Tensor) -> int:
    return a.size(-1) * (2 if a.dtype == FP4_PACKED else 1)


def _fp8_form_launch(a, sfa, b, sfb, d, recipe, overrides, *, m, n, num_groups=1, row_align=None, **kwargs):
    """Plan and launch one of the FP8 GEMMs' FP4 forms (``kwargs``: ``_launch``'s grouping arguments). False when
    no tile fits (the caller returns NotImplemented)."""
    sf_kind, scale_after = _scale_mode(sfa, sfb)
    cfg = fp4_plan.plan(m, n, overrides, row_align=row_align,
                        scale_block_k=min(recipe.a[1], recipe.b[1]) if scale_after else None)
    if cfg is None:
        return False
    _launch(a=_bytes(a), b=_bytes(b), sfa=sfa, sfb=sfb, d=d, m=m, n=n, k=_logical_k(a), num_groups=num_groups,
            strides_a=_strides3(a), strides_b=_strides3(b), strides_sfa=_strides3(sfa), strides_sfb=_strides3(sfb),
            a_fp4=a.dtype == FP4_PACKED, b_fp4=b.dtype == FP4_PACKED, sf_kind=sf_kind, gran_k_a=recipe.a[1],
            gran_k_b=recipe.b[1], gran_n_b=recipe.b[0], scale_after=scale_after, cfg=cfg, **kwargs)
    return True


def fp8_fp4_gemm_nt(a, sfa, b, sfb, d, c, recipe, *, overrides: Fp4Overrides = NO_OVERRIDES):
    """The forms of ``fp8_gemm_nt`` (``fp8_fp4_gemm_nt``) the FP8 kernels decline, in NT form (A [M, K] or packed
    [M, K / 2], B [N, K] or packed, any strides; FP4 K-major), with ``recipe`` resolved (``operands.Recipe``)."""
    if not _runs(overrides, d) or _scale_mode(sfa, sfb) is None:
        return NotImplemented
    m, n = d.shape
    if written_without_launch(d, c, m, n, _logical_k(a)):
        return None
    launched = _fp8_form_launch(a, sfa, b, sfb, d, recipe, overrides, m=m, n=n, c=c, layout=None,
                                strides_d=(0, d.stride(0)), strides_c=(0, c.stride(0)) if c is not None else (0, 0))
    return None if launched else NotImplemented


def m_grouped_fp8_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d, grouped_layout, recipe, use_psum_layout,
                                         ensure_zero_padding, *, overrides: Fp4Overrides = NO_OVERRIDES):
    """The FP4 forms of ``m_grouped_fp8_gemm_nt_contiguous`` (NT form: A [M, K], B [G, N, K], packed or FP8). Rows
    of expert -1 are zeros; psum gap rows are zeros with ``ensure_zero_padding``, else left alone (rows past the
    last group's end too: the reference's rules)."""
    if not _runs(overrides, d) or _scale_mode(sfa, sfb) is None:
        return NotImplemented
    m, n = d.shape
    if m == 0 or n == 0:
        return None
    psum = bool(use_psum_layout)
    alignment = get_mk_alignment_for_contiguous_layout()
    launched = _fp8_form_launch(a, sfa, b, sfb, d, recipe, overrides, m=m, n=n, num_groups=b.size(0),
                                row_align=alignment, c=None, layout=grouped_layout, strides_d=(0, d.stride(0)),
                                grouping=M_PSUM if psum else M_IDS, psum_align=alignment if psum else 1,
                                zero_gaps=bool(ensure_zero_padding) or not psum)
    return None if launched else NotImplemented  # (not launched: an alignment no tile height divides)


def m_grouped_fp8_fp4_gemm_nt_masked(a, sfa, b, sfb, d, masked_m, recipe, *,
                                     overrides: Fp4Overrides = NO_OVERRIDES):
    """The FP4 forms of ``m_grouped_fp8_gemm_nt_masked`` (A [G, M_max, K], B [G, N, K], packed or FP8); rows from
    masked_m[g] on are left alone."""
    if not _runs(overrides, d) or _scale_mode(sfa, sfb) is None:
        return NotImplemented
    num_groups, max_m, n = d.shape
    if max_m == 0 or n == 0:
        return None
    launched = _fp8_form_launch(a, sfa, b, sfb, d, recipe, overrides, m=max_m, n=n, num_groups=num_groups, c=None,
                                layout=masked_m, strides_d=(d.stride(0), d.stride(1)), grouping=MASKED,
                                grid_groups=num_groups)
    return None if launched else NotImplemented
