"""The typed stubs (deep_gemm/__init__.pyi, deep_gemm/_C.pyi) are current and promise only what the runtime does.

DeepGEMM's own stubs were regex-parsed from C++ and advertised C++ parameter names (``fused_kv_cache`` where
Python takes ``kv_cache``). Here every stub function is called with every keyword the stub advertises, on small
valid CPU arguments built by the table ``CASES`` below, and the values and results must fit the stub's types.
``CASES`` spells DeepGEMM's parameter names, so a family that renames a parameter fails here too.
"""

from __future__ import annotations

import ast
import collections.abc
import functools
import importlib.util
import inspect
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Tuple  # noqa: F401  (Optional, Tuple: string annotations)

import pytest
import torch

import deep_gemm
from deep_gemm import _C
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.utils import (ceil_to_ue8m0, pack_ue8m0_to_int, per_block_cast_to_fp8, per_token_cast_to_fp4,
                             per_token_cast_to_fp8)

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("generate_pyi", ROOT / "scripts" / "generate_pyi.py")
generate_pyi = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_pyi)

STUBS = {"deep_gemm": (deep_gemm, generate_pyi.INIT_STUB), "deep_gemm._C": (_C, generate_pyi.C_STUB)}
FP8, BF16, F32, I32 = torch.float8_e4m3fn, torch.bfloat16, torch.float32, torch.int32


# ---- argument builders: small valid CPU arguments per function, by DeepGEMM's parameter names ------------------

def _token(x):
    return per_token_cast_to_fp8(x, use_ue8m0=False)  # 1 x 128 scales (the A operand)


def _block(x):
    return per_block_cast_to_fp8(x, use_ue8m0=False)  # 128 x 128 scales (the B operand)


def _stack(pairs):
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def _t(pair, dims=(0, 1)):
    return pair[0].transpose(*dims), pair[1].transpose(*dims)


def _fp8_dense(layout):
    def build():
        m, n, k = 4, 128, 256
        a, b = _token(torch.randn(m, k)), _block(torch.randn(n, k))
        return dict(a=_t(a) if layout[0] == "t" else a, b=_t(b) if layout[1] == "n" else b,
                    d=torch.empty(m, n, dtype=BF16))
    return build


def _contiguous_layout(rows_per_group=(128, 128)):
    return torch.cat([torch.full((r,), g, dtype=I32) for g, r in enumerate(rows_per_group)])


def _fp8_m_grouped(layout):
    def build():
        b = _stack([_block(torch.randn(128, 128)) for _ in range(2)])
        return dict(a=_token(torch.randn(256, 128)), b=b if layout == "nt" else _t(b, (1, 2)),
                    d=torch.empty(256, 128, dtype=BF16), grouped_layout=_contiguous_layout())
    return build


def _fp8_masked():
    return dict(a=_stack([_token(torch.randn(32, 128)) for _ in range(2)]),
                b=_stack([_block(torch.randn(128, 128)) for _ in range(2)]), d=torch.empty(2, 32, 128, dtype=BF16),
                masked_m=torch.tensor([5, 32], dtype=I32), expected_m=16)


def _fp8_k_grouped(layout):
    def build():
        ks, m, n = [128, 256], 16, 32
        qa = [_token(torch.randn(m, kg)) for kg in ks]
        qb = [_token(torch.randn(n, kg)) for kg in ks]
        if layout == "nt":  # per group a row-major [MN, K_g] block, flattened; scales [MN, sum K / 128]
            a = (torch.cat([q[0].flatten() for q in qa]), torch.cat([q[1] for q in qa], dim=1))
            b = (torch.cat([q[0].flatten() for q in qb]), torch.cat([q[1] for q in qb], dim=1))
        else:  # [sum K, MN] MN-major
            a = (torch.cat([q[0].T for q in qa]).contiguous(), torch.cat([q[1].T for q in qa]).contiguous())
            b = (torch.cat([q[0].T for q in qb]).contiguous(), torch.cat([q[1].T for q in qb]).contiguous())
        return dict(a=a, b=b, d=torch.zeros(2, m, n), ks=ks, grouped_layout=torch.tensor(ks, dtype=I32))
    return build


def _bf16_dense(layout):
    def build():
        m, n, k = 8, 16, 32  # M-major A: its row stride M must be 16-byte aligned (TMA)
        a = torch.randn(k, m, dtype=BF16) if layout[0] == "t" else torch.randn(m, k, dtype=BF16)
        b = torch.randn(k, n, dtype=BF16) if layout[1] == "n" else torch.randn(n, k, dtype=BF16)
        return dict(a=a, b=b, d=torch.empty(m, n))
    return build


def _bf16_m_grouped(layout):
    def build():
        b = torch.randn(2, 16, 32, dtype=BF16)
        return dict(a=torch.randn(256, 32, dtype=BF16), b=b if layout == "nt" else b.transpose(1, 2),
                    d=torch.empty(256, 16, dtype=BF16), grouped_layout=_contiguous_layout())
    return build


def _fp8_einsum():
    batch, heads, r, dim = 2, 2, 128, 128
    x = _token(torch.randn(batch * heads, r))
    w = _stack([_block(torch.randn(dim, r)) for _ in range(heads)])
    return dict(expr="bhr,hdr->bhd", a=(x[0].view(batch, heads, r), x[1].view(batch, heads, -1)), b=w,
                d=torch.empty(batch, heads, dim, dtype=BF16))


def _mqa(pair_q):
    def build():
        s, h, dim, sk = 4, 32, 32, 16
        q = torch.randn(s, h, dim).to(FP8)
        # fp8_fp4_mqa_logits names the bounds cu_seq_len_k_start / _end, the legacy fp8_mqa_logits ks / ke
        start, end = ("cu_seq_len_k_start", "cu_seq_len_k_end") if pair_q else ("ks", "ke")
        return {"q": (q, None) if pair_q else q, "kv": (torch.randn(sk, dim).to(FP8), torch.rand(sk) + 0.5),
                "weights": torch.randn(s, h), start: torch.zeros(s, dtype=I32), end: torch.full((s,), sk, dtype=I32)}
    return build


PAGED_SMS = 4  # schedule_meta has get_num_sms() + 1 rows; the autouse fixture restores the knob


def _paged(pair_q):
    def build():
        deep_gemm.set_num_sms(PAGED_SMS)
        batch, h, dim, block_kv = 2, 32, 32, 64
        context_lens = torch.tensor([[70], [5]], dtype=I32)
        kv_cache = torch.zeros(3, block_kv * (dim + 4), dtype=torch.uint8).view(3, block_kv, 1, dim + 4)
        q = torch.randn(batch, 1, h, dim).to(FP8)
        return dict(q=(q, None) if pair_q else q, kv_cache=kv_cache, weights=torch.randn(batch, h),
                    context_lens=context_lens, block_table=torch.tensor([[0, 1], [2, 0]], dtype=I32),
                    schedule_meta=deep_gemm.get_paged_mqa_logits_metadata(context_lens, block_kv, PAGED_SMS),
                    max_context_len=128)
    return build


def _k_grouped_sf():
    ks = [256, 128]
    return dict(sf=ceil_to_ue8m0(torch.rand(3, 8)), grouped_layout=torch.tensor(ks, dtype=I32), ks_cpu=ks,
                gran_k=128, k_alignment=128)


MEGA = dict(num_experts=8, num_max_tokens_per_rank=384, num_topk=2, hidden=256, intermediate_hidden=128)
MEGA_SIZE_ARGS = dict(num_ranks=1, **MEGA, mma_type="fp8xfp4", activation="swiglu", num_ring_tokens=3072)


def _symm_buffer(mma_type):
    return deep_gemm.SymmBuffer(None, *MEGA.values(), num_ring_tokens=3072, mma_type=mma_type, device="cpu")


def _fp8_fp4_mega_moe():
    return dict(y=torch.zeros(4, 256, dtype=BF16),
                l1_weights=(torch.zeros(8, 256, 128, dtype=torch.int8), torch.zeros(8, 256, 2, dtype=I32)),
                l2_weights=(torch.zeros(8, 256, 64, dtype=torch.int8), torch.zeros(8, 256, 1, dtype=I32)),
                sym_buffer=_symm_buffer("fp8xfp4"), cumulative_local_expert_recv_stats=torch.zeros(8, dtype=I32))


def _bf16_mega_moe():
    return dict(y=torch.zeros(4, 256, dtype=BF16), l1_weights=torch.zeros(8, 256, 256, dtype=BF16),
                l2_weights=torch.zeros(8, 256, 128, dtype=BF16), sym_buffer=_symm_buffer("bf16xbf16"))


def _sm90_buffer():
    return deep_gemm.SM90SymmBuffer(None, *MEGA.values(), device="cpu")


def _fp8_mega_moe():
    return dict(y=torch.zeros(4, 256, dtype=BF16),
                l1_weights=(torch.zeros(8, 256, 256, dtype=FP8), torch.ones(8, 2, 2)),
                l2_weights=(torch.zeros(8, 256, 128, dtype=FP8), torch.ones(8, 2, 1)),
                sym_buffer=_sm90_buffer(), cumulative_local_expert_recv_stats=torch.zeros(8, dtype=I32))


def _pre_dispatch(buffer):
    def build():
        buf = buffer()
        return dict(x=torch.randn(4, 256, dtype=BF16), topk_idx=torch.zeros(4, 2, dtype=I32),
                    topk_weights=torch.rand(4, 2), buf_x=buf.x, buf_x_sf=buf.x_sf, buf_topk_idx=buf.topk_idx,
                    buf_topk_weights=buf.topk_weights, num_tokens=4)
    return build


def _raw_mega(kind):
    """The flat layer ops of _C (DeepGEMM's argument lists) on a zeroed buffer of one rank."""
    def build():
        common = dict(cumulative_local_expert_recv_stats=None, rank_idx=0, num_max_tokens_per_rank=384,
                      num_experts=8, num_topk=2, activation="swiglu", activation_clamp=None, fast_math=True)
        y = torch.zeros(4, 256, dtype=BF16)
        if kind == "fp8":
            buf = _sm90_buffer()
            return dict(y=y, l1_weights=torch.zeros(8, 256, 256, dtype=FP8), l1_weights_sf=torch.ones(8, 2, 2),
                        l2_weights=torch.zeros(8, 256, 128, dtype=FP8), l2_weights_sf=torch.ones(8, 2, 1),
                        sym_buffer=buf.buffer, sym_buffer_ptrs=buf.handle.buffer_ptrs, recipe=[128, 128, 128],
                        **common)
        norm = dict(post_expert_norm=False, post_expert_norm_weight=None, post_expert_norm_eps=1e-6,
                    post_expert_norm_weight_first=False, use_trtllm_weights=False, global_num_tokens=None,
                    num_ring_tokens=3072)
        if kind == "fp8_fp4":
            buf = _symm_buffer("fp8xfp4")
            w = _fp8_fp4_mega_moe()
            return dict(y=y, l1_weights=w["l1_weights"][0], l1_weights_sf=w["l1_weights"][1],
                        l2_weights=w["l2_weights"][0], l2_weights_sf=w["l2_weights"][1], shared_l1_weights=None,
                        shared_l1_weights_sf=None, shared_l2_weights=None, shared_l2_weights_sf=None,
                        sym_buffer=buf.buffer, sym_buffer_ptrs=buf.handle.buffer_ptrs, recipe=[1, 1, 32],
                        mma_type="fp8xfp4", use_x_scales=False, l1_alphas=None, l2_alphas=None,
                        l2_act_scales=None, **common, **norm)
        buf = _symm_buffer("bf16xbf16")
        w = _bf16_mega_moe()
        return dict(y=y, l1_weights=w["l1_weights"], l2_weights=w["l2_weights"], shared_l1_weights=None,
                    shared_l2_weights=None, sym_buffer=buf.buffer, sym_buffer_ptrs=buf.handle.buffer_ptrs,
                    **common, **norm)
    return build


def _fp4_pair():
    return per_token_cast_to_fp4(torch.randn(4, 128), use_ue8m0=True)


@dataclass(frozen=True)
class Case:
    build: Callable[[], dict]
    raises: tuple = ()            # the error the call must raise (functions that exist but cannot run here)
    match: str = ""


def _case(**values):
    return Case(lambda: dict(values))


NO_ARGS = _case()
CASES: dict[str, Case] = {
    # FP8 GEMMs
    **{f"fp8_gemm_{lay}": Case(_fp8_dense(lay)) for lay in ("nt", "nn", "tn", "tt")},
    "fp8_gemm_nt_skip_head_mid": Case(lambda: dict(a=_token(torch.randn(4, 128)), b=_block(torch.randn(256, 128)),
                                                   d=torch.empty(4, 320, dtype=BF16), head_splits=(128, 64, 128))),
    **{f"m_grouped_fp8_gemm_{lay}_contiguous": Case(_fp8_m_grouped(lay)) for lay in ("nt", "nn")},
    "m_grouped_fp8_gemm_nt_masked": Case(_fp8_masked),
    **{f"k_grouped_fp8_gemm_{lay}_contiguous": Case(_fp8_k_grouped(lay)) for lay in ("nt", "tn")},
    # BF16 and vendor-BLAS GEMMs
    **{f"{kind}_gemm_{lay}": Case(_bf16_dense(lay))
       for kind in ("bf16", "cublaslt") for lay in ("nt", "nn", "tn", "tt")},
    **{f"m_grouped_bf16_gemm_{lay}_contiguous": Case(_bf16_m_grouped(lay)) for lay in ("nt", "nn")},
    "m_grouped_bf16_gemm_nt_masked": Case(lambda: dict(
        a=torch.randn(2, 8, 32, dtype=BF16), b=torch.randn(2, 16, 32, dtype=BF16), d=torch.empty(2, 8, 16, dtype=BF16),
        masked_m=torch.tensor([3, 8], dtype=I32), expected_m=4)),
    "k_grouped_bf16_gemm_tn_contiguous": Case(lambda: dict(
        a=torch.randn(384, 8, dtype=BF16), b=torch.randn(384, 16, dtype=BF16), d=torch.empty(2, 8, 16),
        ks=[128, 256], grouped_layout=torch.tensor([128, 256], dtype=I32), c=torch.zeros(2, 8, 16))),
    # einsum
    "einsum": Case(lambda: dict(expr="bhr,hdr->bhd", a=torch.randn(2, 4, 32, dtype=BF16),
                                b=torch.randn(4, 16, 32, dtype=BF16), d=torch.empty(2, 4, 16, dtype=BF16))),
    "fp8_einsum": Case(_fp8_einsum),
    # attention (indexer logits)
    "fp8_fp4_mqa_logits": Case(_mqa(pair_q=True)),
    "fp8_mqa_logits": Case(_mqa(pair_q=False)),
    "get_paged_mqa_logits_metadata": _case(context_lens=torch.tensor([[70], [5]], dtype=I32), block_kv=64,
                                           num_sms=4),
    "fp8_fp4_paged_mqa_logits": Case(_paged(pair_q=True)),
    "fp8_paged_mqa_logits": Case(_paged(pair_q=False)),
    # hyperconnection
    "tf32_hc_prenorm_gemm": Case(lambda: dict(a=torch.randn(4, 64, dtype=BF16), b=torch.randn(8, 64),
                                              d=torch.empty(4, 8), sqr_sum=torch.empty(4))),
    # layout
    "transform_sf_into_required_layout": Case(lambda: dict(sf=torch.rand(4, 2), mn=4, k=256, recipe=(1, 128, 128),
                                                           is_sfa=True)),
    "get_mn_major_tma_aligned_tensor": Case(lambda: dict(sf=torch.rand(5, 3))),
    "get_mn_major_tma_aligned_packed_ue8m0_tensor": Case(lambda: dict(sf=ceil_to_ue8m0(torch.rand(8, 6)))),
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor": Case(_k_grouped_sf),
    "get_tma_aligned_size": _case(mn=7, element_size=4),
    # runtime knobs (values that leave the state as the fixture restores it anyway)
    "set_num_sms": Case(lambda: dict(new_num_sms=deep_gemm.get_num_sms())),
    "set_tc_util": _case(new_tc_util=100),
    "set_autotune": Case(lambda: dict(enable=deep_gemm.autotune_enabled())),
    "warmup": _case(calls=[("fp8_gemm_nt", dict(m=1, n=128, k=128))], device="cpu"),
    "set_pdl": Case(lambda: dict(enable=deep_gemm.get_pdl())),
    "set_checks": Case(lambda: dict(mode=deep_gemm.get_checks())),
    "set_ignore_compile_dims": _case(ignore=False),
    "set_block_size_multiple_of": _case(value=1),
    "set_mk_alignment_for_contiguous_layout": Case(lambda: dict(
        new_value=deep_gemm.get_mk_alignment_for_contiguous_layout())),
    "get_theoretical_mk_alignment_for_contiguous_layout": _case(expected_m=256, num_groups=4),
    **{name: NO_ARGS for name in ("get_num_sms", "get_tc_util", "get_pdl", "get_mk_alignment_for_contiguous_layout",
                                  "get_jit", "backends", "get_token_alignment_for_mega_moe",
                                  "autotune_enabled", "get_checks")},
    # DeepGEMM 1.x names (deep_gemm/_compat.py): the current functions under the old parameter names
    "gemm_fp8_fp8_bf16_nt": Case(lambda: dict(zip(("lhs", "rhs", "out"), _fp8_dense("nt")().values()))),
    "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous": Case(lambda: dict(zip(("lhs", "rhs", "out", "m_indices"),
                                                                       _fp8_m_grouped("nt")().values()))),
    "m_grouped_gemm_fp8_fp8_bf16_nt_masked": Case(lambda: dict(zip(
        ("lhs", "rhs", "out", "masked_m", "expected_m"), _fp8_masked().values()))),
    "get_col_major_tma_aligned_tensor": Case(lambda: dict(x=torch.rand(5, 3))),
    # torch.distributed helpers: called without a process group (one is never created in the test process)
    "init_dist": Case(lambda: dict(local_rank=0, num_local_ranks=1, backend="no_such_backend"),
                      raises=(ValueError,), match="backend: expected a registered"),
    "uneven_all_gather": Case(lambda: dict(tensor=torch.zeros(2, 3), dim=0, group=None),
                              raises=(ValueError, RuntimeError), match="process group"),
    # utils
    "ceil_div": _case(x=7, y=2),
    "align": _case(x=7, y=4),
    "ceil_to_ue8m0": Case(lambda: dict(x=torch.rand(3, 4))),
    "pack_ue8m0_to_int": Case(lambda: dict(x=ceil_to_ue8m0(torch.rand(2, 8)))),
    "unpack_ue8m0_from_int": Case(lambda: dict(packed_sf=pack_ue8m0_to_int(ceil_to_ue8m0(torch.rand(2, 8))))),
    "per_token_cast_to_fp8": Case(lambda: dict(x=torch.randn(4, 200), use_ue8m0=False)),
    "per_channel_cast_to_fp8": Case(lambda: dict(x=torch.randn(256, 8), use_ue8m0=False)),
    "per_block_cast_to_fp8": Case(lambda: dict(x=torch.randn(130, 140), use_ue8m0=True)),
    "per_custom_dims_cast_to_fp8": Case(lambda: dict(x=torch.randn(16, 32), dims=(0,), use_ue8m0=False)),
    "per_token_cast_to_fp4": Case(lambda: dict(x=torch.randn(4, 128), use_ue8m0=True)),
    "transpose_packed_fp4": Case(lambda: dict(a=_fp4_pair()[0])),
    "cast_back_from_fp4": Case(lambda: dict(zip(("packed", "sf"), _fp4_pair()))),
    # Mega MoE
    "get_ring_limit_for_mega_moe": _case(num_max_tokens_per_rank=384, num_local_experts=8, num_topk=2, num_ranks=1),
    "get_symm_buffer_size_for_mega_moe": _case(**MEGA_SIZE_ARGS),
    "SymmBuffer": _case(group=None, **MEGA, num_ring_tokens=3072, device="cpu"),
    "get_symm_buffer_for_mega_moe": _case(group=None, **MEGA, device="cpu"),
    "transform_weights_for_mega_moe": Case(lambda: dict(
        l1_weights=(torch.zeros(2, 256, 64, dtype=torch.int8), torch.zeros(2, 256, 1, dtype=I32)),
        l2_weights=(torch.zeros(2, 128, 64, dtype=torch.int8), torch.zeros(2, 128, 1, dtype=I32)))),
    "fp8_fp4_mega_moe": Case(_fp8_fp4_mega_moe),
    "bf16_mega_moe": Case(_bf16_mega_moe),
    "nvfp4_mega_moe": Case(_fp8_fp4_mega_moe, raises=(deep_gemm.DeepGEMMError,), match="FP4 activations"),
    "fp8_mega_moe": Case(_fp8_mega_moe),
    "SM90SymmBuffer": _case(group=None, **MEGA, device="cpu"),
    "get_symm_buffer_for_sm90_mega_moe": _case(group=None, **MEGA, device="cpu"),
    "transform_weights_for_mega_moe_sm90": Case(lambda: dict(
        l1_weights=(torch.zeros(2, 32, 128, dtype=FP8), torch.ones(2, 1, 1)),
        l2_weights=(torch.zeros(2, 128, 16, dtype=FP8), torch.ones(2, 1, 1)))),
    "transform_scales_for_mega_moe": Case(lambda: dict(l1_scales=torch.zeros(2, 256, 1, dtype=I32),
                                                       l2_scales=torch.zeros(2, 128, 1, dtype=I32))),
    "mega_moe_pre_dispatch": Case(_pre_dispatch(lambda: _symm_buffer("fp8xfp4"))),
    "mega_moe_pre_dispatch_sm90": Case(_pre_dispatch(_sm90_buffer)),
    "get_block_m_for_mega_moe": _case(num_ranks=1, num_experts=8, num_max_tokens_per_rank=384, num_tokens=100,
                                      num_topk=2),
}
# Names of DeepGEMM's later API (sgl-deep-gemm 0.2.3.post2).
CASES.update({
    "use_deterministic_algorithms": Case(lambda: dict(enable=deep_gemm.get_deterministic_algorithms())),
    "get_deterministic_algorithms": NO_ARGS,
    "batched_syrk": Case(lambda: dict(a=torch.randn(2, 3, 5), d=torch.empty(2, 3, 3))),
    "batched_symm": Case(lambda: dict(a=torch.eye(3).expand(2, 3, 3), b=torch.randn(2, 3, 4),
                                      d=torch.empty(2, 3, 4))),
    "bench_kineto": Case(lambda: dict(fn=lambda: None, kernel_names="gemm"), raises=(RuntimeError,), match="CUDA"),
    "calc_diff": Case(lambda: dict(x=torch.ones(3), y=torch.ones(3))),
    "k_grouped_fp4_gemm_nt_contiguous": Case(lambda: dict(
        a=(torch.zeros(2, 32, dtype=torch.int8), torch.ones(2, 2)), b=(torch.zeros(3, 32, dtype=torch.int8),
                                                                    torch.ones(2, 3)),
        d=torch.empty(1, 2, 3), ks=[64], grouped_layout=torch.tensor([64], dtype=I32))),
    "cublaslt_nvfp4_gemm_nt": Case(lambda: dict(
        a=(torch.zeros(2, 16, dtype=torch.int8), torch.zeros(512, dtype=torch.uint8)),
        b=(torch.zeros(3, 16, dtype=torch.int8), torch.zeros(512, dtype=torch.uint8)), d=torch.empty(2, 3))),
    "get_sparse_mqa_logits_metadata": Case(lambda: dict(
        cu_seq_len_k_start=torch.zeros(2, dtype=I32), cu_seq_len_k_end=torch.full((2,), 16, dtype=I32),
        num_kv_tokens=16, sparse_kv_block_indices=torch.zeros(2, 4, dtype=I32), qk_dtype=torch.int8,
        sparse_block_kv=8, use_unaligned_ks=False)),
    "get_paged_sparse_mqa_logits_metadata": Case(lambda: dict(
        context_lens=torch.full((2,), 16, dtype=I32), block_table=torch.zeros(2, 1, dtype=I32),
        indices=torch.zeros(2, dtype=I32), page_kv=128, sparse_kv_block_indices=torch.zeros(2, 4, dtype=I32),
        qk_dtype=torch.int8, sparse_block_kv=8)),
    "fp8_fp4_sparse_mqa_logits": Case(lambda: dict(
        q=(torch.zeros(2, 32, 64, dtype=torch.int8), torch.zeros(2, 32, dtype=I32)),
        kv=(torch.zeros(16, 64, dtype=torch.int8), torch.zeros(16, dtype=I32)),
        weights=torch.zeros(2, 32, dtype=BF16), metadata=torch.zeros(4 * (4 + 2 * 5), dtype=torch.uint8),
        num_max_sparse_blocks=4, sparse_block_kv=8, use_unaligned_ks=False)),
    "fp8_fp4_paged_sparse_mqa_logits": Case(lambda: dict(
        q=(torch.zeros(2, 1, 32, 64, dtype=torch.int8), torch.zeros(2, 1, 32, dtype=I32)),
        kv_cache=torch.zeros(1, 128, 1, 68, dtype=torch.uint8), weights=torch.zeros(2, 32, dtype=BF16),
        metadata=torch.zeros(4 * (4 + 2 * 5), dtype=torch.uint8), num_max_sparse_blocks=4, sparse_block_kv=8)),
    "get_bf16_mega_gate_config": _case(num_tokens=16, hidden=256, num_routed_experts=8, num_topk=2),
    "bf16_mega_gate": Case(lambda: dict(
        x=torch.zeros(2, 256, dtype=BF16), weight=torch.zeros(8, 256, dtype=BF16), num_topk=2,
        use_shared_as_routed=True, num_shared_experts=1, routed_scaling_factor=1.0, ep_rank=0,
        scoring_func="sigmoid", mask=torch.ones(2, dtype=torch.bool), bias=torch.zeros(8),
        unmapped_topk_idx=torch.zeros(2, 2, dtype=torch.int64), force_random=torch.zeros(2, dtype=torch.bool),
        out=(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3)))),  # (paired optionals: tests/test_mega_gate)
    "mega_mhc": Case(lambda: dict(
        x=torch.zeros(1, 1024, dtype=BF16), residual=torch.zeros(1, 4, 1024, dtype=BF16),
        shifted_prev_mix=torch.zeros(1, 4, 1), post_mix=torch.zeros(1, 4, 1), comb_res_mix=torch.zeros(1, 4, 4),
        fn=torch.zeros(24, 4096), mix_scales=torch.ones(3), mix_bases=torch.zeros(24), hc_mult=4,
        hc_norm_eps=1e-6, hc_pre_eps=1e-6, hc_post_scale=2.0, sinkhorn_eps=1e-6, num_sinkhorn_iters=2,
        rmsnorm_weight=torch.ones(1024, dtype=BF16), rmsnorm_eps=1e-6, rmsnorm_scale=1.0,
        new_residual=torch.zeros(1, 4, 1024, dtype=BF16), new_prev_mix=torch.zeros(1, 4, 1),
        new_post_mix=torch.zeros(1, 4, 1), new_comb_res_mix=torch.zeros(1, 4, 4),
        y_bf16=None, y_fp8=None, y_gemm_sf=None, y_routed_sf=None, y_shared_sf=None, shared_sf_block_m=0),
        # every keyword bound; no output asked for, so it raises (outputs are tested in tests/test_mega_mhc.py)
        raises=(DeepGEMMError,), match="at least one output"),
    "get_mqa_logits_metadata": Case(lambda: dict(cu_seq_len_k_start=torch.zeros(2, dtype=I32),
                                                 cu_seq_len_k_end=torch.full((2,), 9, dtype=I32), num_kv_tokens=9,
                                                 num_heads=32)),
    "cast_to_ue4m3": Case(lambda: dict(x=torch.rand(2, 4))),
    "pack_ue4m3_to_int": Case(lambda: dict(x=torch.rand(2, 4))),
    "unpack_ue4m3_from_int": Case(lambda: dict(packed_sf=torch.zeros(2, 1, dtype=I32))),
    "per_token_cast_to_nvfp4": Case(lambda: dict(x=torch.randn(2, 64), gran_k=16, use_packed_ue4m3=True)),
    "transform_ue4m3_sf_into_required_layout": Case(lambda: dict(sf=torch.rand(4, 4), mn=4)),
    "cast_back_from_fp8": Case(lambda: dict(x_fp8=torch.zeros(2, 128, dtype=torch.float8_e4m3fn),
                                            sf=torch.ones(2, 1), gran_k=128, use_packed_ue8m0=False)),
})
# _C functions whose legacy signature differs from the public function of the same name.
C_CASES: dict[str, Case] = {
    "init": _case(library_root_path="/opt/deep_gemm", cuda_home_path_by_python="/usr/local/cuda"),
    "fp8_fp4_mega_moe": Case(_raw_mega("fp8_fp4")),
    "fp8_mega_moe": Case(_raw_mega("fp8")),
    "get_symm_buffer_size_for_sm90_mega_moe": _case(num_ranks=1, **MEGA, use_fp8_dispatch=True,
                                                    activation="swiglu"),
    "slice_symm_buffer_for_sm90_mega_moe": Case(lambda: dict(
        buffer=_sm90_buffer().buffer, num_ranks=1, **MEGA, use_fp8_dispatch=True, activation="swiglu")),
    "bf16_mega_moe": Case(_raw_mega("bf16")),
}


@pytest.fixture(autouse=True)
def _restore_runtime_state(monkeypatch):
    saved = (deep_gemm.get_num_sms(), deep_gemm.get_pdl(), deep_gemm.get_mk_alignment_for_contiguous_layout())
    monkeypatch.setattr(_C, "_INIT_PATHS", dict(_C._INIT_PATHS))
    yield
    deep_gemm.set_num_sms(saved[0] if torch.cuda.is_available() else 0)
    deep_gemm.set_pdl(saved[1])
    deep_gemm.set_mk_alignment_for_contiguous_layout(saved[2])
    deep_gemm.set_block_size_multiple_of(1)
    deep_gemm.set_ignore_compile_dims(False)


# ---- reading the stubs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StubParam:
    name: str
    kind: inspect._ParameterKind
    has_default: bool
    annotation: str


@dataclass(frozen=True)
class StubFunction:
    name: str           # the name in the stub (an alias has its own name and its target's parameters)
    params: tuple
    returns: str
    is_class: bool
    origin: Path        # the stub that defines it (annotations are evaluated there)


def _annotation(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation is not None else "Any"


def _params(args: ast.arguments, skip_self: bool) -> tuple:
    k = inspect.Parameter
    positional = [(a, k.POSITIONAL_ONLY) for a in args.posonlyargs] + [(a, k.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = [StubParam(a.arg, kind, d is not None, _annotation(a)) for (a, kind), d in zip(positional, defaults)]
    if args.vararg:
        out.append(StubParam(args.vararg.arg, k.VAR_POSITIONAL, False, _annotation(args.vararg)))
    out += [StubParam(a.arg, k.KEYWORD_ONLY, d is not None, _annotation(a))
            for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append(StubParam(args.kwarg.arg, k.VAR_KEYWORD, False, _annotation(args.kwarg)))
    return tuple(out[1:] if skip_self else out)


@functools.lru_cache(maxsize=None)
def read_stub(path: Path) -> tuple[dict[str, StubFunction], ast.Module]:
    tree = ast.parse(path.read_text())
    found: dict[str, StubFunction] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = StubFunction(node.name, _params(node.args, False), ast.unparse(node.returns), False,
                                            path)
        elif isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id.endswith("Error")
                                                    for b in node.bases):
            continue  # exception classes: Exception's own constructor, nothing advertised
        elif isinstance(node, ast.ClassDef):
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            params = _params(init.args, True) if init else ()
            found[node.name] = StubFunction(node.name, params, node.name, True, path)
        elif isinstance(node, ast.ImportFrom) and node.module == "deep_gemm" and node.level == 0:
            source = read_stub(generate_pyi.INIT_STUB)[0]  # re-exported from the package's stub
            for alias in node.names:
                target = source[alias.name]
                found[alias.asname] = StubFunction(alias.asname, target.params, target.returns, target.is_class,
                                                   target.origin)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in found):
            target = found[node.value.id]
            found[node.targets[0].id] = StubFunction(node.targets[0].id, target.params, target.returns,
                                                     target.is_class, target.origin)
    return found, tree


def stub_namespace(module, tree: ast.Module) -> dict:
    """What the stub's annotations refer to: its imports and the module's own classes."""
    namespace: dict = {}
    exec(compile(ast.Module([n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                             and not (isinstance(n, ast.ImportFrom) and n.level)], []), "<stub>", "exec"),
         namespace)
    namespace.update({name: getattr(module, name) for name in getattr(module, "__all__", ())
                      if inspect.isclass(getattr(module, name, None))})
    return namespace


# (A missing stub file fails test_committed_stubs_equal_a_fresh_generation, not the collection.)
STUB_FUNCTIONS = [(module_name, fn) for module_name, (_, path) in STUBS.items() if path.exists()
                  for fn in read_stub(path)[0].values()]


def _id(item) -> str:
    return f"{item[0]}.{item[1].name}"


# ---- (1) the committed stubs are a fresh generation -------------------------------------------------------------

def test_committed_stubs_equal_a_fresh_generation():
    for path, text in generate_pyi.render_all().items():
        assert path.exists(), f"{path} is missing: run `python scripts/generate_pyi.py`"
        assert path.read_text() == text, f"{path.name} is stale: run `python scripts/generate_pyi.py`"


def test_stubs_cover_every_public_name():
    for module_name, (module, path) in STUBS.items():
        found, tree = read_stub(path)
        listed = next(ast.literal_eval(n.value) for n in tree.body
                      if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__all__")
        assert sorted(listed) == sorted(module.__all__), module_name
        callables = {n for n in module.__all__ if callable(getattr(module, n))
                     and not (isinstance(getattr(module, n), type) and issubclass(getattr(module, n), BaseException))}
        assert callables <= set(found), f"{module_name}: no stub for {sorted(callables - set(found))}"
        exceptions = {n for n in module.__all__ if isinstance(getattr(module, n), type)
                      and issubclass(getattr(module, n), BaseException)}
        declared = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert exceptions <= declared, f"{module_name}: no stub for {sorted(exceptions - declared)}"


# ---- (2) stub parameters are the runtime parameters ---------------------------------------------------------------

@pytest.mark.parametrize("item", STUB_FUNCTIONS, ids=_id)
def test_stub_parameters_are_the_runtime_parameters(item):
    module_name, fn = item
    obj = getattr(STUBS[module_name][0], fn.name)
    sig = inspect.signature(obj.__init__ if fn.is_class else obj)
    runtime = [p for p in sig.parameters.values()][1 if fn.is_class else 0:]
    assert [(p.name, p.kind, p.default is not inspect.Parameter.empty) for p in runtime] == \
        [(p.name, p.kind, p.has_default) for p in fn.params]


# ---- (3) every advertised keyword is accepted, with values of the advertised types -------------------------------

def _conforms(value, tp) -> bool:
    if tp is Any or tp is inspect.Parameter.empty:
        return True
    if tp is None or tp is type(None):
        return value is None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return any(_conforms(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(_conforms(v, a) for v, a in zip(value, args))
    if origin in (list, collections.abc.Sequence):
        ok = isinstance(value, list) if origin is list else isinstance(value, (list, tuple))
        return ok and all(_conforms(v, args[0]) for v in value) if args else ok
    if origin is collections.abc.Callable:
        return callable(value)
    if origin is dict:
        return isinstance(value, dict)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, tp)


def _case_for(module_name: str, name: str, obj) -> Case:
    if module_name == "deep_gemm._C" and name in C_CASES:
        return C_CASES[name]
    canonical = getattr(obj, "__name__", name)
    case = CASES.get(name) or CASES.get(canonical)
    if case is None:
        pytest.fail(f"no argument builder for {module_name}.{name}: add one to CASES in tests/test_stubs.py")
    return case


@pytest.mark.parametrize("item", STUB_FUNCTIONS, ids=_id)
def test_every_advertised_keyword_is_accepted(item):
    module_name, fn = item
    module = STUBS[module_name][0]
    obj = getattr(module, fn.name)
    namespace = stub_namespace(deep_gemm if fn.origin == generate_pyi.INIT_STUB else module, read_stub(fn.origin)[1])
    case = _case_for(module_name, fn.name, obj)
    values = case.build()
    names = {p.name for p in fn.params}
    unknown = set(values) - names
    assert not unknown, f"{fn.name} takes no parameter {sorted(unknown)} (DeepGEMM's name?)"
    runtime = inspect.signature(obj.__init__ if fn.is_class else obj).parameters
    args, kwargs = [], {}
    for p in fn.params:
        if p.name in values:
            value = values[p.name]
        elif runtime[p.name].default is not inspect.Parameter.empty:
            value = runtime[p.name].default
        else:
            pytest.fail(f"the builder of {fn.name} gives no value for its required parameter {p.name!r}")
        annotation = eval(p.annotation, namespace)  # noqa: S307  (our own stub text)
        assert _conforms(value, annotation), f"{fn.name}: {p.name}={value!r} does not fit `{p.annotation}`"
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            args.append(value)
        else:
            kwargs[p.name] = value  # every advertised keyword, defaults included
    if case.raises:
        with pytest.raises(case.raises, match=case.match):
            obj(*args, **kwargs)
        return
    result = obj(*args, **kwargs)
    returns = eval(fn.returns, namespace)  # noqa: S307
    assert _conforms(result, returns), f"{fn.name} returned {type(result).__name__}, the stub says `{fn.returns}`"


def test_the_paged_logits_keyword_is_kv_cache():
    # The upstream bug this suite exists for: a stub promising `fused_kv_cache` where the runtime takes `kv_cache`.
    found, _ = read_stub(generate_pyi.INIT_STUB)
    for name in ("fp8_fp4_paged_mqa_logits", "fp8_paged_mqa_logits"):
        params = [p.name for p in found[name].params]
        assert "kv_cache" in params and "fused_kv_cache" not in params


# ---- the generator itself ----------------------------------------------------------------------------------------

def _synthetic_module():
    import types

    module = types.ModuleType("synthetic")

    def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                             clean_logits=False, indices=None):
        """Named after a real op: types come from its schema."""

    def helper(x: int, /, y: Optional[float] = float("inf"), *rest: int, flag: bool = True,
               dtype: torch.dtype = torch.bfloat16, **extra: str) -> Tuple[int, ...]:
        """Not an op: annotations are used."""

    class Widget:
        def __init__(self, size: int, *, name: str = "w") -> None:
            self.size = size

        def grow(self, by: int = 1) -> int:
            return self.size + by

    module.fp8_paged_mqa_logits, module.helper, module.Widget = fp8_paged_mqa_logits, helper, Widget
    module.helper_alias = helper
    return module


def test_generator_takes_names_from_the_runtime_and_types_from_the_schema():
    module = _synthetic_module()
    text = generate_pyi.render_stub(module, ["fp8_paged_mqa_logits", "helper", "helper_alias", "Widget"])
    ast.parse(text)
    squashed = re.sub(r"\s+", "", text).replace(",)", ")")  # long signatures are wrapped one parameter a line
    assert "kv_cache:torch.Tensor" in squashed and "fused_kv_cache" not in text
    assert "max_context_len:int" in squashed and "indices:Optional[torch.Tensor]=None" in squashed
    assert "fast_math" not in text and ")->torch.Tensor:..." in squashed  # the schema's return
    assert ("defhelper(x:int,/,y:Optional[float]=...,*rest:int,flag:bool=True,dtype:torch.dtype=torch.bfloat16,"
            "**extra:str)->Tuple[int,...]:...") in squashed
    assert "helper_alias = helper" in text
    assert "class Widget:" in text and "def __init__(self, size: int, *, name: str = 'w') -> None: ..." in text
    assert "def grow(self, by: int = 1) -> int: ..." in text
    assert text == generate_pyi.render_stub(module, ["Widget", "helper_alias", "helper", "fp8_paged_mqa_logits"])


def test_check_mode_fails_on_stale_stubs(tmp_path, monkeypatch, capsys):
    for attr in ("INIT_STUB", "C_STUB", "PY_TYPED"):
        monkeypatch.setattr(generate_pyi, attr, tmp_path / getattr(generate_pyi, attr).name)
    monkeypatch.setattr(generate_pyi, "ROOT", tmp_path)
    assert generate_pyi.main(["--check"]) == 1  # nothing written yet
    assert generate_pyi.main([]) == 0
    assert generate_pyi.main(["--check"]) == 0
    stub = tmp_path / "__init__.pyi"
    stub.write_text(stub.read_text().replace("kv_cache", "fused_kv_cache"))
    assert generate_pyi.main(["--check"]) == 1
    assert "fused_kv_cache" in capsys.readouterr().out
