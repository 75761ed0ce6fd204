"""The grouped tile order shared by the GEMM-shaped kernels: GROUP_M row blocks sweep the column blocks together, so
a B tile is reused from L2 by the row blocks of its group. ``tile_coords`` for the tl.* kernels (FP8 and BF16 GEMM,
einsum), ``swizzle`` for the warp-specialised Gluon kernels; ``add``, the Gluon kernels' scan / reduction combiner.
"""

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@triton.jit
def tile_coords(tile, num_m_blocks, num_n_blocks, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M M-blocks share the N sweep, so B tiles are reused from L2."""
    per_group = GROUP_M * num_n_blocks
    group = tile // per_group
    first_m = group * GROUP_M
    rows = tl.minimum(num_m_blocks - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@gluon.jit
def swizzle(tile, num_m_blocks, num_n_blocks, GROUP_M: gl.constexpr):
    """Grouped order: GROUP_M M-blocks share the N sweep, so B tiles are reused from L2."""
    per_group = GROUP_M * num_n_blocks
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m_blocks - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@gluon.jit
def add(a, b):
    return a + b
