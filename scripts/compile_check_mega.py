"""Compile the Mega MoE kernels (deep_gemm/mega/kernels.py) for sm_90a on any machine (no GPU needed): every variant
the launchers pick (both BLOCK_Ms, clamp on/off, fast math on/off, the pre-dispatch's index dtypes; the BF16 layer's
dispatch, L1 / L2 routed and dense (shared experts), the combine with shared experts; the several-rank kernels of
the FP8 layer: count publication, scan, peer dispatch, L2 with the peer epilogue, the barrier; the FP8 x FP4 layer's
dispatch and decoding L1 / L2, routed and dense, FP4 and FP8 weights, deep_gemm/mega/fp8_fp4_kernels.py), with
registers, spills, shared memory and wgmma (QGMMA FP8, HGMMA BF16) counts, the cheap first check before spending GPU
time.

    python scripts/compile_check_mega.py

Run without TRITON_INTERPRET. Fails when a variant does not compile, spills, or overflows shared memory.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from compile_check import SM90, int_args, report_variants, thunk_builders  # noqa: E402
from compile_check_hc import _compile  # noqa: E402



def builders(target=SM90) -> list:
    """(name, a function compiling it) for every kernel variant the launcher (deep_gemm/mega/launch.py) picks."""
    return thunk_builders(_thunks(target))



def _thunks(target):
    from deep_gemm.mega import kernels as k
    from deep_gemm.mega import launch as ml
    from deep_gemm.mega import plan as mp
    e_pow2 = 256
    yield "route", lambda: _compile(k._route_kernel, {
        "topk_idx_ptr": "*i64", "counts_ptr": "*i32", "slot_pos_ptr": "*i32",
        **int_args("num_slots", "first_expert", "num_local")}, dict(BLOCK=ml.ROUTE_BLOCK), 4, target=target)
    for stats in (False, True):
        yield f"scan stats={stats}", lambda stats=stats: _compile(k._scan_kernel, {
            "counts_ptr": "*i32", "stats_ptr": "*i32", "starts_ptr": "*i32", "ends_ptr": "*i32",
            "tile_end_ptr": "*i32", "num_local": "i32"}, dict(BLOCK_M=64, E_POW2=e_pow2, HAS_STATS=stats), 4,
            target=target)
    # FP32 token scales (fp8_mega_moe) and packed UE8M0 ones (fp8_fp4_mega_moe)
    for sf, tag in (("fp32", ""), ("i32", "fp8_fp4 ")):
        yield f"{tag}dispatch k=8", lambda sf=sf: _compile(k._dispatch_kernel, {
            "x_ptr": "*fp8e4nv", "x_sf_ptr": f"*{sf}", "topk_idx_ptr": "*i64", "topk_w_ptr": "*fp32",
            "slot_pos_ptr": "*i32", "starts_ptr": "*i32", "pool_ptr": "*fp8e4nv", "pool_sf_ptr": f"*{sf}",
            "row_src_ptr": "*i32", "row_w_ptr": "*fp32",
            **int_args("first_expert", "num_local", "hidden", "stride_x", "stride_pool", "sf_cols", "stride_pool_sf")},
            dict(NUM_TOPK=8, K_POW2=8, BLOCK_H=ml.DISPATCH_BLOCK_H, SF_POW2=64, HAS_SF=True), 4, target=target)
    yield "bf16 dispatch k=6", lambda: _compile(k._dispatch_kernel, {
        "x_ptr": "*bf16", "x_sf_ptr": "*fp32", "topk_idx_ptr": "*i64", "topk_w_ptr": "*fp32", "slot_pos_ptr": "*i32",
        "starts_ptr": "*i32", "pool_ptr": "*bf16", "pool_sf_ptr": "*fp32", "row_src_ptr": "*i32",
        "row_w_ptr": "*fp32", **int_args("first_expert", "num_local", "hidden", "stride_x", "stride_pool", "sf_cols",
                                      "stride_pool_sf")},
        dict(NUM_TOPK=6, K_POW2=8, BLOCK_H=ml.DISPATCH_BLOCK_H, SF_POW2=1, HAS_SF=False), 4, target=target)
    for bm in mp.SUPPORTED_BLOCK_M:
        cfg = mp.plan_bf16(1 if bm == 64 else 10**6, 1, 1, mp.MegaOverrides(bm))
        bk = mp.BF16_BLOCK_K
        for dense in (False, True):
            tag = " shared" if dense else ""
            for clamp, fast in ((True, True), (False, False)):
                yield f"bf16 l1{tag} bm={bm} clamp={clamp} fast={fast}", \
                    lambda bm=bm, cfg=cfg, clamp=clamp, fast=fast, dense=dense: _compile(k._bf16_l1_kernel, {
                        "a_desc": f"tensordesc<bf16{[bm, bk]}>", "b_desc": f"tensordesc<bf16{[mp.BLOCK_N, bk]}>",
                        "tile_end_ptr": "*i32", "ends_ptr": "*i32", "row_w_ptr": "*fp32", "l2a_ptr": "*bf16",
                        **int_args("num_local", "inter", "hidden", "stride_l2a", "dense_rows"), "clamp": "fp32"},
                        dict(BM=bm, BN=mp.BLOCK_N, BK=bk, E_POW2=e_pow2, HAS_CLAMP=clamp, FAST_MATH=fast,
                             NUM_STAGES=cfg.l1_stages, DENSE=dense), cfg.num_warps, cfg.l1_stages, target=target)
            yield f"bf16 l2{tag} bm={bm}", lambda bm=bm, cfg=cfg, bk=bk, dense=dense: _compile(k._bf16_l2_kernel, {
                "a_desc": f"tensordesc<bf16{[bm, bk]}>", "b_desc": f"tensordesc<bf16{[mp.BLOCK_N, bk]}>",
                "tile_end_ptr": "*i32", "ends_ptr": "*i32", "row_src_ptr": "*i32", "combine_ptr": "*bf16",
                **int_args("num_local", "inter", "hidden", "num_tokens_cap", "dense_rows")},
                dict(BM=bm, BN=mp.BLOCK_N, BK=bk, E_POW2=e_pow2, NUM_TOPK=6, NUM_STAGES=cfg.l2_stages, DENSE=dense),
                cfg.num_warps, cfg.l2_stages, target=target)
    for bm in mp.SUPPORTED_BLOCK_M:
        cfg = mp.plan(1 if bm == 64 else 10**6, 1, 1, mp.MegaOverrides(bm), target.arch)
        for clamp, fast in ((True, True), (False, False)):
            name = f"l1 bm={bm} clamp={clamp} fast={fast}"
            yield name, lambda bm=bm, cfg=cfg, clamp=clamp, fast=fast: _compile(k._l1_kernel, {
                "a_desc": f"tensordesc<fp8e4nv{[bm, mp.L1_BLOCK_K]}>",
                "b_desc": f"tensordesc<fp8e4nv{[mp.BLOCK_N, mp.L1_BLOCK_K]}>",
                "pool_sf_ptr": "*fp32", "l1_sf_ptr": "*fp32", "tile_end_ptr": "*i32", "ends_ptr": "*i32",
                "row_w_ptr": "*fp32", "l2a_ptr": "*fp8e4nv", "l2a_sf_ptr": "*fp32",
                **int_args("num_local", "inter", "hidden", "stride_sf_e", "stride_sf_n", "stride_pool_sf", "stride_l2a",
                        "stride_l2a_sf"), "clamp": "fp32"},
                dict(BM=bm, BN=mp.BLOCK_N, BK=mp.L1_BLOCK_K, E_POW2=e_pow2, HAS_CLAMP=clamp, FAST_MATH=fast,
                     NUM_STAGES=cfg.l1_stages), cfg.num_warps, cfg.l1_stages, target=target)
        yield f"l2 bm={bm}", lambda bm=bm, cfg=cfg: _compile_l2(k._l2_kernel, {"combine_ptr": "*bf16"}, bm, cfg,
                                                               e_pow2, target)
    yield "combine k=6", lambda: _compile(k._combine_kernel, {
        "topk_idx_ptr": "*i64", "combine_ptr": "*bf16", "y_ptr": "*bf16",
        **int_args("first_expert", "num_local", "hidden", "num_tokens_cap", "stride_y")},
        dict(NUM_TOPK=6, BLOCK_H=ml.COMBINE_BLOCK_H), 4, target=target)
    yield "bf16 combine shared k=6", lambda: _compile(k._combine_shared_kernel, {
        "topk_idx_ptr": "*i64", "combine_ptr": "*bf16", "shared_ptr": "*bf16", "y_ptr": "*bf16",
        **int_args("first_expert", "num_local", "hidden", "num_tokens_cap", "stride_y")},
        dict(NUM_TOPK=6, BLOCK_H=ml.COMBINE_BLOCK_H), 4, target=target)
    yield from _rank_thunks(k, ml, mp, target)
    yield from _fp8_fp4_thunks(mp, e_pow2, target)
    for idx in ("i32", "i64"):
        yield f"pre_dispatch idx={idx}", lambda idx=idx: _compile(k._pre_dispatch_kernel, {
            "x_ptr": "*bf16", "idx_ptr": f"*{idx}", "w_ptr": "*fp32", "bx_ptr": "*fp8e4nv", "bsf_ptr": "*fp32",
            "bidx_ptr": "*i64", "bw_ptr": "*fp32",
            **int_args("num_tokens", "hidden", "stride_x", "stride_idx", "stride_w"), "routed_scale": "fp32"},
            dict(NUM_TOPK=6, K_POW2=8, GROUPS_POW2=64, GROUP=128), 4, target=target)



def _compile_l2(kernel, destination: dict, bm: int, cfg, e_pow2: int, target):
    """An FP8 L2 kernel: ``_l2_kernel`` or ``_l2_ranks_kernel``, whose signatures differ only in where the rows go
    (``destination``: the local combine area, or the peer table and the combine area's offset)."""
    from deep_gemm.mega import plan as mp
    return _compile(kernel, {
        "a_desc": f"tensordesc<fp8e4nv{[bm, mp.L2_BLOCK_K]}>",
        "b_desc": f"tensordesc<fp8e4nv{[mp.BLOCK_N, mp.L2_BLOCK_K]}>",
        "l2a_sf_ptr": "*fp32", "l2_sf_ptr": "*fp32", "tile_end_ptr": "*i32", "ends_ptr": "*i32",
        "row_src_ptr": "*i32", **destination,
        **int_args("num_local", "inter", "hidden", "stride_sf_e", "stride_sf_n", "stride_l2a_sf", "num_tokens_cap")},
        dict(BM=bm, BN=mp.BLOCK_N, BK=mp.L2_BLOCK_K, E_POW2=e_pow2, NUM_TOPK=6, NUM_STAGES=cfg.l2_stages),
        cfg.num_warps, cfg.l2_stages, target=target)


def _fp8_fp4_thunks(mp, e_pow2, target):
    """The FP8 x FP4 layer's own kernels (``launch.fp8_fp4_mega_moe``; its dispatch is with the others): the
    decoding L1 / L2 routed and dense (shared experts), FP4 and FP8 weights, at both BLOCK_Ms."""
    from deep_gemm.mega import fp8_fp4_kernels as f
    for bm in mp.SUPPORTED_BLOCK_M:
        cfg = mp.plan_fp8_fp4(1 if bm == 64 else 10**6, 1, 1, mp.MegaOverrides(bm), target.arch)
        tile = dict(BM=bm, BN=cfg.block_n, BK=mp.FP8_FP4_BLOCK_K, E_POW2=e_pow2)
        for fp4 in (True, False):
            for dense in (False, True):
                tag = f"bm={bm} {'fp4' if fp4 else 'fp8'} weights" + (" shared" if dense else "")
                for clamp, fast in ((True, True), (False, False)):
                    yield f"fp8_fp4 l1 {tag} clamp={clamp} fast={fast}", \
                        lambda cfg=cfg, tile=tile, fp4=fp4, dense=dense, clamp=clamp, fast=fast: _compile(
                            f._fp8_fp4_l1_kernel, {
                                "a_ptr": "*u8", "a_sf_ptr": "*i32", "b_ptr": "*u8", "b_sf_ptr": "*i32",
                                "tile_end_ptr": "*i32", "ends_ptr": "*i32", "row_w_ptr": "*fp32",
                                "l2a_ptr": "*fp8e4nv", "l2a_sf_ptr": "*u8",
                                **int_args("num_local", "inter", "hidden", "stride_asf_r", "stride_asf_k",
                                           "stride_b_e", "stride_bsf_e", "stride_l2a", "stride_l2a_sf",
                                           "dense_rows"), "clamp": "fp32"},
                            dict(tile, B_FP4=fp4, HAS_CLAMP=clamp, FAST_MATH=fast, NUM_STAGES=cfg.l1_stages,
                                 DENSE=dense), cfg.num_warps, cfg.l1_stages, target=target)
                yield f"fp8_fp4 l2 {tag}", lambda cfg=cfg, tile=tile, fp4=fp4, dense=dense: _compile(
                    f._fp8_fp4_l2_kernel, {
                        "a_ptr": "*u8", "a_sf_ptr": "*i32", "b_ptr": "*u8", "b_sf_ptr": "*i32",
                        "tile_end_ptr": "*i32", "ends_ptr": "*i32", "row_src_ptr": "*i32", "combine_ptr": "*bf16",
                        **int_args("num_local", "inter", "hidden", "stride_asf_k", "stride_b_e", "stride_bsf_e",
                                   "num_tokens_cap", "dense_rows")},
                    dict(tile, NUM_TOPK=6, B_FP4=fp4, NUM_STAGES=cfg.l2_stages, DENSE=dense), cfg.num_warps,
                    cfg.l2_stages, target=target)


def _rank_thunks(k, ml, mp, target):
    """The several-rank kernels of ``fp8_mega_moe`` (``launch.fp8_mega_moe_rank_phases``): count publication, the
    rank-aware scan, the peer dispatch, L2 with the peer epilogue, the barrier (8 ranks, 256 experts)."""
    r_pow2, e_pow2, l_pow2 = 8, 256, 32
    yield "ranks publish_counts", lambda: _compile(k._publish_counts_kernel, {
        "counts_ptr": "*i32", "table_ptr": "*i64", **int_args("recv_off", "rank", "num_ranks", "num_experts")},
        dict(E_POW2=e_pow2), 4, target=target)
    for stats in (False, True):
        yield f"ranks scan stats={stats}", lambda stats=stats: _compile(k._scan_ranks_kernel, {
            "recv_ptr": "*i32", "stats_ptr": "*i32", "send_base_ptr": "*i32", "starts_ptr": "*i32",
            "ends_ptr": "*i32", "tile_end_ptr": "*i32", "overflow_ptr": "*i32", "status_ptr": "*i32",
            **int_args("rank", "num_ranks", "num_local", "max_tiles")},
            dict(BLOCK_M=64, R_POW2=r_pow2, L_POW2=l_pow2, HAS_STATS=stats), 4, target=target)
    yield "ranks dispatch k=8", lambda: _compile(k._dispatch_ranks_kernel, {
        "x_ptr": "*fp8e4nv", "x_sf_ptr": "*fp32", "topk_idx_ptr": "*i64", "topk_w_ptr": "*fp32",
        "slot_pos_ptr": "*i32", "send_base_ptr": "*i32", "overflow_ptr": "*i32", "table_ptr": "*i64",
        "combine_ptr": "*bf16", **int_args("pool_off", "pool_sf_off", "row_src_off", "row_w_off", "rank", "num_local",
                                           "hidden", "sf_cols", "stride_pool_sf", "num_tokens_cap")},
        dict(NUM_TOPK=8, K_POW2=8, BLOCK_H=ml.DISPATCH_BLOCK_H, SF_POW2=64), 4, target=target)
    for bm in mp.SUPPORTED_BLOCK_M:
        cfg = mp.plan(1 if bm == 64 else 10**6, 1, 1, mp.MegaOverrides(bm), target.arch)
        yield f"ranks l2 bm={bm}", lambda bm=bm, cfg=cfg: _compile_l2(
            k._l2_ranks_kernel, {"table_ptr": "*i64", "combine_off": "i32"}, bm, cfg, l_pow2, target)
    yield "ranks barrier", lambda: _compile(k._barrier_kernel, {
        "table_ptr": "*i64", "signals_off": "i64", "signals_ptr": "*i32", "epoch_ptr": "*i32", "status_ptr": "*i32",
        **int_args("rank", "num_ranks", "max_spins")}, dict(R_POW2=r_pow2), 1, target=target)


if __name__ == "__main__":
    sys.exit(report_variants("mega", builders(), ("QGMMA", "HGMMA", "UTMALDG", "LDL", "STL")))
