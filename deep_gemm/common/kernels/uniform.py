"""Device helper shared by the warp-specialised kernels (warp_uniform, Gluon) and the tl.* BF16 kernel
(tl_warp_uniform): a value every lane of a warp holds, marked so for ptxas.

A value read from a grouped layout (a load, or a reduction over a per-group vector) is per-lane as far as ptxas
knows, even where every lane holds the same one. Where it bounds a loop (a tile's K blocks) or feeds the addresses
of its TMA loads, the loop becomes divergent and loses the uniform datapath: its address arithmetic moves to vector
registers and back (R2UR) every K block. ``redux.sync`` writes a uniform register (SASS REDUX), so what is computed
from its result can stay uniform.
"""

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def warp_uniform(x, UNIFORM: gl.constexpr):
    """x, an int32 scalar all 32 lanes of the warp hold and execute this with, marked warp-uniform when UNIFORM
    (one redux.sync.max: the maximum of equal values is the value, so the bits never change)."""
    if UNIFORM:
        x = gl.inline_asm_elementwise("redux.sync.max.u32 $0, $1, 0xffffffff;", "=r,r", [x], dtype=gl.int32,
                                      is_pure=True, pack=1)
    return x


@triton.jit
def tl_warp_uniform(x, UNIFORM: tl.constexpr):
    """warp_uniform for the tl.* kernels: the same redux.sync on a scalar every lane holds (bits unchanged). Never set
    UNIFORM under TRITON_INTERPRET (the interpreter has no inline assembly; the plan leaves it off there)."""
    if UNIFORM:
        x = tl.inline_asm_elementwise("redux.sync.max.u32 $0, $1, 0xffffffff;", "=r,r", [x], dtype=tl.int32,
                                      is_pure=True, pack=1)
    return x
