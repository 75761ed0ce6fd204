"""Compile the block-sparse MQA kernels (deep_gemm/attention/sparse/kernels.py) and the MQA-logits schedule kernel
(deep_gemm/attention/metadata/kernels.py) for sm_90a on any machine (no GPU needed): every variant the launchers
pick (the sparse metadata kernel contiguous with and without unaligned ks and paged, at both sparse block sizes; the
logits kernel contiguous and paged, FP8 and FP4, both block sizes, one and the most steps per program; the schedule
kernel at every head count, with and without the padding word), with registers, spills, shared memory and BF16
wgmma (HGMMA) counts, the cheap first check before spending GPU time.

    python scripts/compile_check_sparse_mqa.py

Run without TRITON_INTERPRET. Fails when a variant does not compile, spills, or overflows shared memory.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_check import SM90, int_args, report_variants, thunk_builders  # noqa: E402
from compile_check_hc import _compile  # noqa: E402

HEADS, HEAD_DIM = 32, 128



def builders(target=SM90) -> list:
    """(name, a function compiling it) for every kernel variant the launcher (attention/sparse/launch.py) picks."""
    return thunk_builders(_thunks(target))



def _thunks(target):
    from deep_gemm.attention.sparse import kernels as k
    from deep_gemm.attention.sparse import plan as sp
    from deep_gemm.attention.sparse.checks import SPARSE_BLOCK_KV_CHOICES
    for sbk in SPARSE_BLOCK_KV_CHOICES:
        for paged, unaligned in ((False, False), (False, True), (True, False)):
            yield f"metadata sbk={sbk} paged={paged} unaligned={unaligned}", \
                lambda sbk=sbk, paged=paged, unaligned=unaligned: _compile(k._sparse_mqa_metadata_kernel, {
                    "first_ptr": "*i32", "end_ptr": "*i32", "bt_ptr": "*i32", "idx_ptr": "*i32", "out_ptr": "*i32",
                    **int_args("num_q", "num_max", "num_kv", "page_kv", "table_cols", "stride_bt")},
                    dict(SBK=sbk, PAGED=paged, UNALIGNED=unaligned, BLOCK=sp.METADATA_BLOCK), sp.METADATA_WARPS,
                    target=target)
    for sbk in SPARSE_BLOCK_KV_CHOICES:
        for paged in (False, True):
            for fp4 in (False, True):
                for steps in (1, sp.MAX_STEPS):
                    cfg = sp.plan(1, 4096, sbk, 1, sp.SparseOverrides(steps=steps))
                    values = "*i8" if fp4 else "*fp8e4nv"
                    yield f"logits sbk={sbk} paged={paged} fp4={fp4} steps={steps}", \
                        lambda cfg=cfg, values=values, sbk=sbk, paged=paged, fp4=fp4: _compile(
                            k._fp8_fp4_sparse_mqa_logits_kernel, {
                                "q_ptr": values, "q_sf_ptr": "*i32", "kv_ptr": values, "kv_sf_ptr": "*i32",
                                "w_ptr": "*bf16", "meta_ptr": "*i32", "out_ptr": "*bf16",
                                **int_args("num_max", "num_tokens", "page_kv", "stride_page", "stride_w",
                                           "stride_out")},
                            dict(H=HEADS, D=HEAD_DIM, SBK=sbk, BLOCKS=cfg.blocks_per_step, STEPS=cfg.steps,
                                 PAGED=paged, IS_FP4=fp4, DOT_BF16=True), cfg.num_warps, target=target)
    from deep_gemm.attention.metadata import kernels as mk
    from deep_gemm.attention.metadata import plan as mp
    from deep_gemm.attention.metadata.checks import HEAD_COUNTS
    for heads in HEAD_COUNTS:
        for pad in (False, True):
            yield f"mqa_metadata heads={heads} pad={pad}", lambda heads=heads, pad=pad: _compile(
                mk._mqa_logits_metadata_kernel, {"ks_ptr": "*i32", "ke_ptr": "*i32", "out_ptr": "*i32",
                                                 **int_args("num_q", "num_kv", "num_sms")},
                dict(BQ=mp.block_q(heads), SPLIT_KV=mp.SPLIT_KV, SEGMENT_COST=mp.SEGMENT_COST,
                     SPLIT_COST=mp.SPLIT_COST, SPAN_OFFSET_PAD=pad, CHUNK=mp.KERNEL_CHUNK), mp.KERNEL_WARPS,
                target=target)


if __name__ == "__main__":
    sys.exit(report_variants("sparse_mqa", builders(), ("HGMMA", "HMMA", "LDL", "STL")))
