"""Integer helpers and the numeric constants of DeepGEMM's FP8/FP4 formats (named once, used everywhere).

Imported by the package's own modules; `deep_gemm.utils.math` re-exports the helpers under DeepGEMM's module name."""

from __future__ import annotations

# Largest finite float8_e4m3fn value: scales map a block's absolute maximum onto it.
FP8_E4M3_MAX = 448.0
# Largest finite FP4 E2M1 value.
FP4_E2M1_MAX = 6.0
# Floor on a block's absolute maximum before it becomes a scale, so all-zero blocks get a finite, non-zero scale.
AMAX_FLOOR = 1e-4
# TMA needs 16-byte aligned global strides and base addresses.
TMA_ALIGNMENT_BYTES = 16


def ceil_div(x: int, y: int) -> int:
    """Smallest integer >= x / y, for non-negative x and positive y."""
    return (x + y - 1) // y


def next_pow2(x: int) -> int:
    """Smallest power of two >= x (1 for x <= 1)."""
    return 1 << (x - 1).bit_length() if x > 1 else 1


def group_pad(num_groups: int) -> int:
    """Lanes of a kernel's per-group vector (its G_PAD): a power of two >= num_groups, at least 2 (a Triton vector
    has at least two lanes)."""
    return max(2, next_pow2(num_groups))


def align(x: int, y: int) -> int:
    """x rounded up to a multiple of y."""
    return ceil_div(x, y) * y


def get_tma_aligned_size(mn: int, element_size: int) -> int:
    """mn rounded up so that mn elements of ``element_size`` bytes span a multiple of 16 bytes."""
    if TMA_ALIGNMENT_BYTES % element_size != 0:
        from ..core.errors import fail
        fail(f"element_size: expected a divisor of {TMA_ALIGNMENT_BYTES}, got {element_size}")
    return align(mn, TMA_ALIGNMENT_BYTES // element_size)
