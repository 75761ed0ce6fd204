"""Registers the Mega MoE buffer ops: the size/layout helper, the slicer, the token alignment and the ring limits.

The three integer ops have no tensor arguments (registered under CompositeExplicitAutograd by the library); the
slicer returns views of its input, so it is a composite op (``CompositeImplicitAutograd``): plain view code that
runs unchanged on real, meta and fake tensors and traces under torch.compile.
"""

from __future__ import annotations

from ..core import arch, gpu_validation
from ..core.registry import register, register_composite, set_data_check
from . import buffer
from . import launch as launchers  # (imports no Triton: its kernels load at the first launch)


def _no_check(*_args) -> None:
    return None


def get_symm_buffer_size_for_mega_moe(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                                      hidden: int, intermediate_hidden: int, mma_type: str, activation: str,
                                      num_ring_tokens: int) -> tuple[int, list[int]]:
    plan = buffer.plan_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                   intermediate_hidden, mma_type, activation, num_ring_tokens)
    return plan.num_bytes, buffer.encode_layout(plan)


def get_token_alignment_for_mega_moe() -> int:
    return buffer.TOKEN_ALIGNMENT


register("get_symm_buffer_size_for_mega_moe", check=buffer.check_size_args,
         reference=get_symm_buffer_size_for_mega_moe)
register_composite("_slice_symm_buffer_for_mega_moe", buffer.slice_buffer)
register("get_token_alignment_for_mega_moe", check=_no_check, reference=get_token_alignment_for_mega_moe)
register("get_ring_limit_for_mega_moe", check=buffer.check_ring_limit_args, reference=buffer.ring_limit)

# ---- the SM90 buffer and the layer ops ---------------------------------------------------------------------------
from . import layer  # noqa: E402


def get_symm_buffer_size_for_sm90_mega_moe(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int,
                                           num_topk: int, hidden: int, intermediate_hidden: int,
                                           use_fp8_dispatch: bool, activation: str) -> int:
    return buffer.plan_sm90_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                        intermediate_hidden, use_fp8_dispatch, activation).num_bytes


register("get_symm_buffer_size_for_sm90_mega_moe", check=buffer.check_sm90_size_args,
         reference=get_symm_buffer_size_for_sm90_mega_moe)
register_composite("_slice_symm_buffer_for_sm90_mega_moe", buffer.slice_sm90_buffer)
register("get_block_m_for_mega_moe", check=layer.check_block_m, reference=layer.block_m)
# The layer and pre-dispatch ops only write their caller's tensors: no fake outputs to build.
register("fp8_mega_moe", check=layer.check_fp8_mega_moe, reference=layer.fp8_mega_moe,
         triton=launchers.fp8_mega_moe, arch=arch.FP8_OPS,
         triton_note=gpu_validation.opt_in_note("mega", launchers.RANKS_NOTE))
# The BF16 layer's kernels need TMA (tensor descriptors); the FP8 x FP4 layer's are compile-checked for sm_90a and
# run on the parts with sm_90's shared memory (sm_90 / sm_100), awaiting their GPU run under their own key.
RING_MEGA_ARCH = arch.OpArch(min_sm=arch.SM90)
register("fp8_fp4_mega_moe", check=layer.check_fp8_fp4_mega_moe, reference=layer.fp8_fp4_mega_moe,
         triton=launchers.fp8_fp4_mega_moe, arch=RING_MEGA_ARCH,
         triton_note=gpu_validation.opt_in_note("mega_fp8_fp4", f"one rank; {launchers.FP8_FP4_DECLINED}"))
register("bf16_mega_moe", check=layer.check_bf16_mega_moe, reference=layer.bf16_mega_moe,
         triton=launchers.bf16_mega_moe, arch=RING_MEGA_ARCH,
         triton_note=gpu_validation.opt_in_note("mega_bf16", f"one rank; {launchers.BF16_DECLINED}"))
set_data_check("fp8_mega_moe", layer.check_data_fp8_mega_moe)
set_data_check("fp8_fp4_mega_moe", layer.check_data_ring_mega_moe)
set_data_check("bf16_mega_moe", layer.check_data_ring_mega_moe)
register("mega_moe_pre_dispatch", check=layer.check_pre_dispatch, reference=layer.pre_dispatch)
register("mega_moe_pre_dispatch_sm90", check=layer.check_pre_dispatch_sm90, reference=layer.pre_dispatch_sm90,
         triton=launchers.pre_dispatch_sm90, arch=arch.FP8_OPS,
         triton_note=gpu_validation.opt_in_note("mega"))
