"""The pure plan of the scale-factor layout kernels: their tiles (``tile``: a program's MN rows x columns, narrow
for inputs of a few columns), warps and grid limits. The kernels have one variant per tile; nothing here launches.
"""

from __future__ import annotations

from ..utils.numeric import next_pow2

# Tile of the copy and pack kernels: 64 MN rows (the output's contiguous dim: 256-byte stores) x 32 columns.
BLOCK_MN = 64
BLOCK_COLS = 32
# K-grouped pack: 1 packed row x 1024 MN columns (the contiguous dim of both sides): one long row per program streams
# two to three times faster than 16 x 128 tiles.
BLOCK_PACKED_ROWS = 1
BLOCK_K_GROUPED_MN = 1024
NUM_WARPS = 4
# Narrow inputs (fewer than NARROW_COLS columns, e.g. one scale column at K = 128) take a tile as narrow as they are
# and up to NARROW_MAX_ROWS MN rows, so a program moves a few hundred elements instead of 64. The same rule at 14
# packed columns (K = 7168) makes the MN-contiguous pack slower, so wider inputs keep the 64 x 32 tile.
NARROW_COLS = 8
NARROW_MAX_ROWS = 512
# CUDA's limit on the y and z grid dimensions.
MAX_GRID_YZ = 65535


def tile(cols: int) -> tuple[int, int]:
    """(MN rows, columns) of a program's tile for ``cols`` columns: BLOCK_MN x BLOCK_COLS, or below NARROW_COLS
    the next power of two >= cols wide and as many rows as keep BLOCK_MN * BLOCK_COLS elements (<= NARROW_MAX_ROWS)."""
    if cols >= NARROW_COLS:
        return BLOCK_MN, BLOCK_COLS
    width = next_pow2(cols)
    return min(NARROW_MAX_ROWS, BLOCK_MN * BLOCK_COLS // width), width
