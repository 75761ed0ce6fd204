"""Checks of the grouped-GEMM arguments shared by the FP8 and BF16 families (M-grouped layouts, masked_m, the
K-grouped host sizes and output). Metadata only, like every check; each raises DeepGEMMError naming the argument."""

from __future__ import annotations

from collections.abc import Sequence

import torch

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


def check_ks_cpu(ks_cpu: Sequence[int] | None, use_psum_layout: bool, k_multiple: int = 1) -> list[int]:
    """The host list of per-group K sizes, each a non-negative multiple of ``k_multiple`` (the K-grouped psum
    layout is SM100-only upstream and not supported)."""
    if use_psum_layout:
        fail("use_psum_layout: the K-grouped psum layout is not supported (DeepGEMM runs it on SM100 only); "
             "pass ks_cpu with the per-group K sizes")
    if ks_cpu is None or len(ks_cpu) == 0:
        fail("ks_cpu: expected the non-empty list of per-group K sizes")
    for i, k_size in enumerate(ks_cpu):
        if k_size < 0 or k_size % k_multiple != 0:
            what = f"multiples of {k_multiple}" if k_multiple > 1 else "K sizes"
            fail(f"ks_cpu: expected non-negative {what}, got {k_size} for group {i}")
    return [int(x) for x in ks_cpu]


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
