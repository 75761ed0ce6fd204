"""Torch references of the FP8 GEMM ops: dequantise, then matmul in FP32. Registered as the CPU kernels, used on
CUDA until a Triton kernel covers a case, and reused by tests and benchmarks.

Semantics (shared with the Triton kernels; see the public docstrings):
* dense: D = C + A @ B.T, where C may be D itself; K == 0 gives D = C (or 0).
* M-grouped contiguous: rows whose expert id is -1 are written as zeros; with the psum layout the gap rows between
  groups are written as zeros when ensure_zero_padding, else left untouched (the Triton kernels zero each group's
  padding rows when ensure_zero_padding and may write them otherwise; rows past the last group's padded end are
  unspecified: the reference zeroes them, the kernels leave them).
* masked: rows >= masked_m[g] are left untouched.
Grouped references never read index tensors on the host, so the CUDA fallback stays capturable in CUDA graphs.
"""

from __future__ import annotations

import torch

from ...core.runtime import get_mk_alignment_for_contiguous_layout
from ...common.operands import compact_k_grouped_sf, dequantize, resolve_recipe, to_nt, write_output


def make_dense_reference(layout: str):
    def reference(a, sfa, b, sfb, d, c, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast, alpha=None):
        a, sfa, b, sfb = to_nt(layout, a, sfa, b, sfb)
        r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
        write_output(d, dequantize(a, sfa, r.a) @ dequantize(b, sfb, r.b).T, c, alpha)

    reference.__name__ = f"fp8_gemm_{layout}_reference"
    return reference


def head_split_columns(n: int, head_splits, device) -> torch.Tensor:
    """Output column of each of the n result columns: each head's left|right parts are separated by mid columns."""
    left, mid, right = (int(x) for x in head_splits)
    cols = torch.arange(n, device=device)
    return cols + (cols + right) // (left + right) * mid


def fp8_gemm_nt_skip_head_mid_reference(a, sfa, b, sfb, d, head_splits, recipe, compiled_dims, disable_ue8m0_cast):
    r = resolve_recipe(recipe, None, None, sfb)
    out = dequantize(a, sfa, r.a) @ dequantize(b, sfb, r.b).T
    d[:, head_split_columns(b.size(0), head_splits, d.device)] = out.to(d.dtype)


def psum_starts(ends: torch.Tensor) -> torch.Tensor:
    """First row (M psum) or K row (K psum) of every group of a psum layout, int64 [G]: the previous group's end
    aligned up to ``get_mk_alignment_for_contiguous_layout()`` (0 for the first group)."""
    alignment = get_mk_alignment_for_contiguous_layout()
    ends = ends.long()
    previous = torch.cat([ends.new_zeros(1), ends[:-1]])
    return (previous + alignment - 1) // alignment * alignment


def k_group_bounds(grouped_layout: torch.Tensor, use_psum_layout: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(start, end) K of every group of a K-grouped layout (sizes, or psum ends), int64 [G] each, computed on the
    device (no host read of grouped_layout)."""
    layout = grouped_layout.long()
    if use_psum_layout:
        return psum_starts(layout), layout
    ends = torch.cumsum(layout, 0)
    return ends - layout, ends


def k_psum_scale_rows(grouped_layout: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per group of a K-grouped psum layout with compact per-group scales (DeepGEMM's FP8 K psum layout: group g's
    K_g = end[g] - start[g] rows own ceil(K_g / 128) scale rows, the groups' scale rows one after the other), on the
    device: (first K row, end K row, scale rows) of every group."""
    starts, ends = k_group_bounds(grouped_layout, True)
    sizes = (ends - starts).clamp(min=0)
    return starts, ends, (sizes + K_SCALE_BLOCK - 1) // K_SCALE_BLOCK


def k_psum_rows(grouped_layout: torch.Tensor, sum_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """K rows of the FP8 K psum layout (``k_psum_scale_rows``), on the device: (group of every K row, -1 for gap
    rows; scale row of every K row)."""
    starts, ends, scale_rows = k_psum_scale_rows(grouped_layout)
    first_scale = torch.cumsum(scale_rows, 0) - scale_rows
    k = torch.arange(sum_k, device=grouped_layout.device)[:, None]
    inside = (k >= starts[None, :]) & (k < ends[None, :])  # [sum_K, G]
    group = torch.where(inside.any(dim=1), inside.int().argmax(dim=1), -1)
    at = group.clamp(min=0)
    scale_row = torch.where(group >= 0, first_scale[at] + (k[:, 0] - starts[at]) // K_SCALE_BLOCK, 0)
    return group, scale_row


def _k_psum_dequantize(data: torch.Tensor, sf: torch.Tensor, group: torch.Tensor, scale_row: torch.Tensor):
    """[sum_K, rows] FP8 with compact per-group scales [scale rows, rows] -> FP32, gap rows zero whatever they hold
    (never read, as DeepGEMM's kernel never loads them). A scale row past sf (ends the data check refuses) reads as
    zero rather than out of bounds."""
    padded = torch.cat([sf.float(), sf.new_zeros((1, sf.size(1)), dtype=torch.float32)])
    row = torch.where((group >= 0) & (scale_row < sf.size(0)), scale_row, sf.size(0))
    return torch.where((group >= 0)[:, None], data.float() * padded[row], 0.0)


def row_groups(grouped_layout: torch.Tensor, m: int, num_groups: int, use_psum_layout: bool) -> torch.Tensor:
    """Group of every row (int64 [M]), -1 for padding / gap rows, computed on the device (no host sync)."""
    if not use_psum_layout:
        return grouped_layout.long()
    ends = grouped_layout.long()
    starts = psum_starts(ends)
    rows = torch.arange(m, device=grouped_layout.device)[:, None]
    inside = (rows >= starts[None, :]) & (rows < ends[None, :])  # [M, G]
    return torch.where(inside.any(dim=1), inside.int().argmax(dim=1), -1)


def m_grouped_rows_matmul(a_values: torch.Tensor, b_values: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """out[r] = a[r] @ b[groups[r]].T, zero where groups[r] == -1. One dense matmul per group, selected by mask, so
    no row index ever travels to the host."""
    out = a_values.new_zeros((a_values.size(0), b_values.size(1)))
    for g in range(b_values.size(0)):
        out = torch.where((groups == g)[:, None], a_values @ b_values[g].T, out)
    return out


def write_grouped_rows(d: torch.Tensor, out: torch.Tensor, groups: torch.Tensor, keep_gaps: bool) -> None:
    """d = out, except rows of no group, which keep their old contents when ``keep_gaps``."""
    if keep_gaps:
        out = torch.where((groups >= 0)[:, None], out, d.float())
    d.copy_(out.to(d.dtype))


def make_m_grouped_contiguous_reference(layout: str):
    def reference(a, sfa, b, sfb, d, grouped_layout, recipe, recipe_a, recipe_b, compiled_dims, disable_ue8m0_cast,
                  use_psum_layout, ensure_zero_padding, expected_m_for_psum_layout=None):
        if layout[1] == "n":
            b, sfb = b.transpose(-1, -2), sfb.transpose(-1, -2)
        r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
        groups = row_groups(grouped_layout, a.size(0), b.size(0), use_psum_layout)
        out = m_grouped_rows_matmul(dequantize(a, sfa, r.a), dequantize(b, sfb, r.b), groups)
        write_grouped_rows(d, out, groups, keep_gaps=use_psum_layout and not ensure_zero_padding)

    reference.__name__ = f"m_grouped_fp8_gemm_{layout}_contiguous_reference"
    return reference


def write_masked_rows(d: torch.Tensor, out: torch.Tensor, masked_m: torch.Tensor) -> None:
    """d[g, r] = out[g, r] for r < masked_m[g]; other rows keep their contents."""
    valid = torch.arange(d.size(1), device=d.device)[None, :] < masked_m.long()[:, None]
    d.copy_(torch.where(valid[:, :, None], out.to(d.dtype), d))


def m_grouped_fp8_gemm_nt_masked_reference(a, sfa, b, sfb, d, masked_m, expected_m, recipe, recipe_a, recipe_b,
                                           compiled_dims, disable_ue8m0_cast):
    r = resolve_recipe(recipe, recipe_a, recipe_b, sfb)
    out = torch.bmm(dequantize(a, sfa, r.a), dequantize(b, sfb, r.b).transpose(1, 2))
    write_masked_rows(d, out, masked_m)


K_SCALE_BLOCK = 128


def k_group_operand(layout: str, data: torch.Tensor, sf: torch.Tensor, rows: int, k_start: int, k_size: int):
    """Group slice of a K-grouped operand as (values [rows, K_g] FP8, scales [rows, K_g/128]) in K-last form."""
    sf_lo, sf_hi = k_start // K_SCALE_BLOCK, (k_start + k_size) // K_SCALE_BLOCK
    if layout == "nt":
        values = data[k_start * rows:(k_start + k_size) * rows].view(rows, k_size)
        return values, sf[:, sf_lo:sf_hi]
    return data[k_start:k_start + k_size].T, sf[sf_lo:sf_hi].T


def make_k_grouped_reference(layout: str):
    def reference(a, sfa, b, sfb, d, ks_cpu, grouped_layout, c, recipe, compiled_dims, use_psum_layout,
                  use_padded_sf_layout=False):
        if use_psum_layout:  # tn (the check): group bounds and scale rows from the device ends, no host read
            group, scale_row = k_psum_rows(grouped_layout, a.size(0))
            a_values = _k_psum_dequantize(a, sfa, group, scale_row)
            b_values = _k_psum_dequantize(b, sfb, group, scale_row)
            acc = torch.zeros(d.shape, dtype=torch.float32, device=d.device)
            for g in range(d.size(0)):
                acc[g] = torch.where((group == g)[:, None], a_values, 0.0).T @ b_values
            write_output(d, acc, c)
            return
        if use_padded_sf_layout:
            k_axis = 1 if layout == "nt" else 0
            sfa = compact_k_grouped_sf(sfa, ks_cpu, k_axis, K_SCALE_BLOCK)
            sfb = compact_k_grouped_sf(sfb, ks_cpu, k_axis, K_SCALE_BLOCK)
        num_groups, m, n = d.shape
        acc = torch.zeros((num_groups, m, n), dtype=torch.float32, device=d.device)
        k_start = 0
        for g, k_size in enumerate(int(x) for x in ks_cpu):
            if k_size > 0:
                a_g, sfa_g = k_group_operand(layout, a, sfa, m, k_start, k_size)
                b_g, sfb_g = k_group_operand(layout, b, sfb, n, k_start, k_size)
                gran = (1, K_SCALE_BLOCK)
                acc[g] = dequantize(a_g, sfa_g, gran) @ dequantize(b_g, sfb_g, gran).T
            k_start += k_size
        write_output(d, acc, c)

    reference.__name__ = f"k_grouped_fp8_gemm_{layout}_contiguous_reference"
    return reference
