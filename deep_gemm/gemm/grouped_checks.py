"""Checks of the grouped-GEMM arguments shared by the FP8 and BF16 families (M-grouped layouts, masked_m, the
K-grouped host sizes and output). Metadata only, like every check; each raises DeepGEMMError naming the argument."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.data_checks import require_values
from ..core.errors import fail, require_contiguous, require_dim, require_dtype
from ..core.runtime import INT32_MAX, get_mk_alignment_for_contiguous_layout
from ..common.operands import check_accumulator, check_out


def check_grouped_layout(grouped_layout: torch.Tensor, num_groups: int, m: int, use_psum_layout: bool) -> None:
    """int32 contiguous: [G] cumulative group ends (psum) or [M] expert ids, M a multiple of the alignment."""
    require_dtype("grouped_layout", grouped_layout, (torch.int32,))
    require_dim("grouped_layout", grouped_layout, 1)
    require_contiguous("grouped_layout", grouped_layout)
    if use_psum_layout:
        if grouped_layout.size(0) != num_groups:
            fail(f"grouped_layout: expected {num_groups} cumulative group ends (use_psum_layout=True), "
                 f"got {grouped_layout.size(0)} entries")
        return
    if grouped_layout.size(0) != m:
        fail(f"grouped_layout: expected one expert id per row of a ({m}), got {grouped_layout.size(0)} entries")
    alignment = get_mk_alignment_for_contiguous_layout()
    if m % alignment != 0:
        fail(f"a: expected M to be a multiple of the contiguous-layout alignment {alignment} "
             f"(expert segments are padded to it), got M = {m}")


def check_expected_m_for_psum_layout(expected_m_for_psum_layout, use_psum_layout: bool) -> None:
    """The psum-layout config hint: only with the psum layout, and a positive 32-bit value."""
    if expected_m_for_psum_layout is None:
        return
    if not use_psum_layout:
        fail("expected_m_for_psum_layout: only meaningful with use_psum_layout=True")
    if not 0 < expected_m_for_psum_layout <= INT32_MAX:
        fail(f"expected_m_for_psum_layout: expected a positive integer, got {expected_m_for_psum_layout}")


def check_masked_m(masked_m: torch.Tensor, num_groups: int, expected_m: int) -> None:
    """masked_m int32 [G] contiguous on the device; expected_m a positive 32-bit hint."""
    require_dtype("masked_m", masked_m, (torch.int32,))
    require_dim("masked_m", masked_m, 1)
    require_contiguous("masked_m", masked_m)
    if masked_m.size(0) != num_groups:
        fail(f"masked_m: expected {num_groups} entries, got {masked_m.size(0)}")
    if not 0 < expected_m <= INT32_MAX:
        fail(f"expected_m: expected a positive integer, got {expected_m}")


def check_ks_cpu(ks_cpu: Sequence[int] | None, k_multiple: int = 1) -> list[int]:
    """The host list of per-group K sizes, each a non-negative multiple of ``k_multiple`` (the layout without psum
    ends; the psum layout's optional host sizes take ``check_k_psum_sizes``)."""
    if ks_cpu is None or len(ks_cpu) == 0:
        fail("ks_cpu: expected the non-empty list of per-group K sizes")
    for i, k_size in enumerate(ks_cpu):
        if k_size < 0 or k_size % k_multiple != 0:
            what = f"multiples of {k_multiple}" if k_multiple > 1 else "K sizes"
            fail(f"ks_cpu: expected non-negative {what}, got {k_size} for group {i}")
    return [int(x) for x in ks_cpu]


def check_k_psum_sizes(ks_cpu: Sequence[int] | None, num_groups: int, sum_k: int) -> None:
    """The K-grouped psum layout's optional host sizes: absent (or empty), or one per group, each a multiple of the
    group alignment (``get_mk_alignment_for_contiguous_layout()``), summing to ``sum_k`` (DeepGEMM's contract)."""
    if ks_cpu is None or len(ks_cpu) == 0:
        return
    alignment = get_mk_alignment_for_contiguous_layout()
    if len(ks_cpu) != num_groups:
        fail(f"ks_cpu: expected {num_groups} per-group K sizes (G of d) or none with use_psum_layout=True, "
             f"got {len(ks_cpu)}")
    for i, k_size in enumerate(ks_cpu):
        if k_size < 0 or k_size % alignment != 0:
            fail(f"ks_cpu: expected non-negative multiples of the group alignment {alignment} with "
                 f"use_psum_layout=True, got {k_size} for group {i}")
    total = sum(int(k) for k in ks_cpu)
    if total != sum_k:
        fail(f"ks_cpu: expected sizes summing to sum_K = {sum_k} (rows of a), got {total}")


def check_k_grouped_output(d: torch.Tensor, c: torch.Tensor | None, grouped_layout: torch.Tensor,
                           num_groups: int) -> tuple[int, int]:
    """D FP32 [G, M, N] contiguous, C (optional) like D, grouped_layout int32 [G] (the K sizes). Returns (M, N)."""
    require_dim("d", d, 3)
    if d.size(0) != num_groups:
        fail(f"d: expected {num_groups} groups (len(ks_cpu)), got {d.size(0)}")
    check_out("d", d, tuple(d.shape), dtypes=(torch.float32,))
    require_contiguous("d", d)
    check_accumulator(c, d)
    require_dtype("grouped_layout", grouped_layout, (torch.int32,))
    if tuple(grouped_layout.shape) != (num_groups,):
        fail(f"grouped_layout: expected the {num_groups} group K sizes, got shape {tuple(grouped_layout.shape)}")
    return d.size(1), d.size(2)


# ---- Data checks: the values of the index tensors (CPU kernels always; CUDA in the checked mode) -----------------
#
# Each takes the op's arguments by schema name (``core.registry.set_data_check``) and raises DeepGEMMError naming the
# argument, the first bad index and its value, before anything is written.

def _at(t: torch.Tensor, i: int) -> int:
    return int(t.reshape(-1)[i])


def check_data_grouped_layout(grouped_layout: torch.Tensor, num_groups: int, m: int, use_psum_layout: bool) -> None:
    """Expert ids in [-1, G); or psum ends non-decreasing, non-negative and at most M."""
    gl = grouped_layout
    if use_psum_layout:
        ends = gl.long()
        previous = torch.cat([ends.new_zeros(1), ends[:-1]])
        require_values([
            (ends < previous,
             lambda i: "grouped_layout: expected non-decreasing cumulative group ends (use_psum_layout=True), got "
                       + (f"grouped_layout[0] = {_at(gl, 0)} < 0" if i == 0 else
                          f"grouped_layout[{i}] = {_at(gl, i)} < grouped_layout[{i - 1}] = {_at(gl, i - 1)}")),
            (ends > m,
             lambda i: f"grouped_layout: expected cumulative group ends at most M = {m} (the rows of a), got "
                       f"grouped_layout[{i}] = {_at(gl, i)}"),
        ])
        return
    require_values([
        ((gl < -1) | (gl >= num_groups),
         lambda i: f"grouped_layout: expected expert ids in [-1, {num_groups}) (-1 marks padding rows), got "
                   f"grouped_layout[{i}] = {_at(gl, i)}"),
    ])


def check_data_masked_m(masked_m: torch.Tensor, max_m: int) -> None:
    """Every masked_m[g] in [0, max_m]."""
    require_values([
        ((masked_m < 0) | (masked_m > max_m),
         lambda i: f"masked_m: expected valid row counts in [0, {max_m}] (max_m, dim 1 of a), got "
                   f"masked_m[{i}] = {_at(masked_m, i)}"),
    ])


def check_data_ks(grouped_layout: torch.Tensor, ks_cpu: Sequence[int]) -> None:
    """The device K sizes (``grouped_layout``, DeepGEMM's ``ks`` tensor) equal the host list ``ks_cpu``."""
    expected = torch.tensor([int(x) for x in ks_cpu], dtype=torch.int64, device=grouped_layout.device)
    if expected.numel() != grouped_layout.numel():  # (the metadata check already refused this)
        fail(f"grouped_layout: expected {expected.numel()} K sizes (len(ks_cpu)), got {grouped_layout.numel()}")
    require_values([
        (grouped_layout.long() != expected,
         lambda i: f"grouped_layout: expected the K sizes of ks_cpu (the device copy of the same list), got "
                   f"grouped_layout[{i}] = {_at(grouped_layout, i)} where ks_cpu[{i}] = {int(ks_cpu[i])}"),
    ])


def check_data_k_psum_ends(grouped_layout: torch.Tensor, sum_k: int) -> None:
    """K-grouped psum ends: group g spans [align(end[g-1]), end[g]) with ``align`` the group alignment, so every end
    either repeats the previous one (an empty group) or is at least the previous one aligned up; the last is at most
    sum_K."""
    from .fp8.reference import psum_starts
    gl = grouped_layout
    alignment = get_mk_alignment_for_contiguous_layout()
    ends = gl.long()
    previous = torch.cat([ends.new_zeros(1), ends[:-1]])
    start = psum_starts(ends)
    require_values([
        ((ends != previous) & (ends < start),
         lambda i: f"grouped_layout: expected each K end to repeat the previous one (an empty group) or to reach the "
                   f"previous one aligned up to {alignment} (use_psum_layout=True), got "
                   + (f"grouped_layout[0] = {_at(gl, 0)}" if i == 0 else
                      f"grouped_layout[{i}] = {_at(gl, i)} after grouped_layout[{i - 1}] = {_at(gl, i - 1)}")),
        (ends > sum_k,
         lambda i: f"grouped_layout: expected K ends at most sum_K = {sum_k}, got grouped_layout[{i}] = {_at(gl, i)}"),
    ])


def check_data_m_grouped_contiguous(*, a, b, grouped_layout, use_psum_layout, **_) -> None:
    """Data check of ``m_grouped_*_contiguous`` (FP8 and BF16; B is [G, N, K] or [G, K, N])."""
    check_data_grouped_layout(grouped_layout, b.size(0), a.size(0), use_psum_layout)


def check_data_m_grouped_masked(*, a, masked_m, **_) -> None:
    """Data check of ``m_grouped_*_nt_masked`` (A is [G, max_m, K])."""
    check_data_masked_m(masked_m, a.size(1))


def check_data_k_grouped(*, ks_cpu, grouped_layout, **_) -> None:
    """Data check of ``k_grouped_fp8_gemm_*_contiguous``."""
    check_data_ks(grouped_layout, ks_cpu)


def check_data_k_grouped_tn(*, a, ks_cpu, grouped_layout, use_psum_layout, **_) -> None:
    """Data check of ``k_grouped_bf16_gemm_tn_contiguous`` (A is [sum_K, M]): the K sizes, or the psum ends."""
    if use_psum_layout:
        check_data_k_psum_ends(grouped_layout, a.size(0))
    else:
        check_data_ks(grouped_layout, ks_cpu)


def check_data_k_grouped_fp8_tn(*, a, sfa, sfb, ks_cpu, grouped_layout, use_psum_layout, **_) -> None:
    """Data check of ``k_grouped_fp8_gemm_tn_contiguous``: the K sizes, or the psum ends and the compact scale rows
    they need (ceil(K_g / 128) per group) against the rows sfa and sfb hold."""
    if not use_psum_layout:
        check_data_ks(grouped_layout, ks_cpu)
        return
    from .fp8.reference import k_psum_scale_rows
    check_data_k_psum_ends(grouped_layout, a.size(0))
    needed = k_psum_scale_rows(grouped_layout)[2].sum().reshape(1)

    def message(name, rows):
        return lambda i: (f"{name}: expected the {int(needed[0])} scale rows along K that the psum ends of "
                          f"grouped_layout need (ceil(K_g / 128) per group), got {rows}")
    require_values([(needed > sf.size(0), message(name, sf.size(0))) for name, sf in (("sfa", sfa), ("sfb", sfb))])


def check_data_k_grouped_packed_nt(*, a, ks, grouped_layout, use_psum_layout, **_) -> None:
    """Data check of ``k_grouped_fp4_gemm_nt_contiguous`` (A is packed FP4 [M, sum_K / 2]): the psum ends, or the K
    sizes where the host list is given."""
    if use_psum_layout:
        check_data_k_psum_ends(grouped_layout, 2 * a.size(1))
    elif ks is not None and len(ks) > 0:
        check_data_ks(grouped_layout, ks)
