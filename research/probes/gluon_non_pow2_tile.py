"""Does Gluon (Triton 3.6) take a 144-wide tile for the warp-specialised BF16 kernel (issue 15, N = 576)? Compiles
three variants for sm_90a on the CPU and prints which lower: (1) a [64, 144] FP32 NVMMA accumulator from one
wgmma with instr_shape N = 144; (2) a [144, 64] NVMMA shared buffer filled by one TMA load (no register tensor of
that shape); (3) that buffer sliced into its first 128 and last 16 rows, each feeding its own wgmma into a [64, 128]
and a [64, 16] accumulator.

    python research/probes/gluon_non_pow2_tile.py
"""

from __future__ import annotations

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

SM90 = GPUTarget("cuda", 90, 32)


@gluon.jit
def _probe(a_desc, b_desc, out_ptr, VARIANT: gl.constexpr, BN: gl.constexpr):
    a_s = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(a_desc, [0, 0], bar, a_s)
    tma.async_copy_global_to_shared(b_desc, [0, 0], bar, b_s)
    mbarrier.wait(bar, 0)
    if VARIANT == 1:
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
        acc = gl.zeros([64, BN], gl.float32, layout=mma)
        acc = warpgroup_mma(a_s, b_s.permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        rows = gl.arange(0, 64, layout=gl.SliceLayout(1, mma))
        gl.store(out_ptr + rows, gl.sum(acc, axis=1))
    else:
        mma0: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
        mma1: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16])
        acc0 = gl.zeros([64, 128], gl.float32, layout=mma0)
        acc1 = gl.zeros([64, 16], gl.float32, layout=mma1)
        acc0 = warpgroup_mma(a_s, b_s.slice(0, 128, dim=0).permute((1, 0)), acc0, is_async=True)
        acc1 = warpgroup_mma(a_s, b_s.slice(128, 16, dim=0).permute((1, 0)), acc1, is_async=True)
        acc0 = warpgroup_mma_wait(num_outstanding=0, deps=(acc0, acc1))
        rows0 = gl.arange(0, 64, layout=gl.SliceLayout(1, mma0))
        rows1 = gl.arange(0, 64, layout=gl.SliceLayout(1, mma1))
        gl.store(out_ptr + rows0, gl.sum(acc0, axis=1))
        gl.store(out_ptr + 64 + rows1, gl.sum(acc1, axis=1))


def desc_sig(block):
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16)
    return f"tensordesc<bf16{list(block)},{layout!r}>"


def compile_variant(variant: int, bn: int = 144):
    sig = {"a_desc": desc_sig([64, 64]), "b_desc": desc_sig([bn, 64]), "out_ptr": "*fp32", "VARIANT": "constexpr",
           "BN": "constexpr"}
    fn = _probe
    src = GluonASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index("VARIANT"),): variant,
                                                           (fn.arg_names.index("BN"),): bn})
    return triton.compile(src, target=SM90, options={"num_warps": 4, "num_stages": 1})


if __name__ == "__main__":
    for variant, label in ((1, "[64, 144] accumulator, one wgmma N = 144"),
                           (2, "[144, 64] TMA/shared B, sliced 128 + 16, two wgmmas")):
        try:
            ck = compile_variant(variant)
            sass = ck.asm.get("ptx", "")
            print(f"variant {variant} ({label}): compiles, smem {ck.metadata.shared}, "
                  f"wgmma lines {sass.count('wgmma.mma_async')}")
        except Exception as exc:  # noqa: BLE001  (the answer is whether it lowers)
            print(f"variant {variant} ({label}): FAILS {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
