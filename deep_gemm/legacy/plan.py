"""The tile of a legacy kernel launch: block sizes, warps and pipeline stages, one frozen value per kernel kind.

The public ``*_tl`` functions always use the defaults below; the internal helpers of ``api.py`` take
``LegacyOverrides`` (another tile) so that a sweep or a test can force candidates without a global switch or a public
keyword.
"""

from __future__ import annotations

import dataclasses

from ..core import arch

# What a tile's pipelined A and B tiles may use of a device's shared memory: its opt-in limit less this margin
# (barriers, layout-conversion scratch).
SMEM_MARGIN = 4096


@dataclasses.dataclass(frozen=True)
class LegacyTile:
    """block_m is an upper bound for M-grouped launches: the M block must also divide the contiguous-layout
    alignment (a tile reads its expert from its first row), so the launch uses the largest power of two that does
    both. K-grouped launches use block_m as given."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"LegacyTile.{field.name}: expected a positive int, got {value!r}")
        for name in ("block_m", "block_n", "block_k", "num_warps"):
            value = getattr(self, name)
            if value & (value - 1):
                raise ValueError(f"LegacyTile.{name}: expected a power of two, got {value}")

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        """Shared memory of the pipelined A and B tiles (what bounds the stage count)."""
        return (self.block_m + self.block_n) * self.block_k * elem_bytes * self.num_stages

    def for_sm(self, sm: int) -> "LegacyTile":
        """This tile on an ``sm`` device: the same, with as many of its stages as fit the device's shared memory
        (at least one: the K loop unpipelined). The default tiles fit sm_90 and sm_80 as they are."""
        per_stage = self.smem_bytes() // self.num_stages
        stages = max(1, min(self.num_stages, (arch.shared_memory(sm) - SMEM_MARGIN) // per_stage))
        return self if stages == self.num_stages else dataclasses.replace(self, num_stages=stages)

    def label(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k}/w{self.num_warps}/s{self.num_stages}"


# Today's tiles (scripts/compile_check_legacy.py: pipelined, no spills on sm_90a at 8 warps).
M_GROUPED_TILE = LegacyTile(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3)
K_GROUPED_TILE = LegacyTile(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3)


@dataclasses.dataclass(frozen=True)
class LegacyOverrides:
    """Forced tiles for sweeps and tests (None = the kernel kind's default tile, M_GROUPED_TILE / K_GROUPED_TILE)."""

    m_grouped_tile: LegacyTile | None = None
    k_grouped_tile: LegacyTile | None = None


NO_OVERRIDES = LegacyOverrides()
