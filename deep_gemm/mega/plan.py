"""THE plan of an ``fp8_mega_moe``, ``bf16_mega_moe`` or ``fp8_fp4_mega_moe`` call at one rank: BLOCK_M and the
pipeline depths (pure: sizes in, a frozen config out; ``launch.py`` only reads it).

The layer's two GEMMs stream every routed expert's weights once per M tile of that expert, so what decides the speed
is how many M tiles an expert's tokens make: with few tokens per expert (decode) one 64-row tile (one wgmma M) per
expert reads each weight byte once; from 64 expected tokens per expert on, 128-row tiles halve the weight reads per
token (two warpgroups per program). The N tile is 128 weight rows in both GEMMs (L1: 64 gate + 64 up columns, which
is one 64-column scale group of the intermediate after SwiGLU; L2: one 128-row weight scale block).

The BF16 layer (``plan_bf16``) tiles the same way, with 64-wide K steps (64 BF16 = one 128-byte swizzled row): a
stage holds (BM + BN) x 64 x 2 bytes (24 KiB at BM 64, 32 KiB at BM 128), so four stages fit either tile.

The FP8 x FP4 layer (``plan_fp8_fp4``) decodes its operands in registers, so its tiles follow the FP4 GEMM's
register budget instead: 32-wide K steps, 64 x 64 tiles on one warpgroup or 128 x 128 on two (BLOCK_M as above).

Opt-in: one ``MegaOverrides.kernels`` switch asks for the kernels of any layer while they await their GPU run.
Each layer's kernels have a key of their own in ``core/gpu_validation.py`` (sub-families of ``mega``: the
registry's family of every layer stays ``mega``): the FP8 one-rank kernels (``mega``), the BF16 ones
(``mega_bf16``) and the FP8 x FP4 ones (``mega_fp8_fp4``) passed theirs and run by default; ``fp8_mega_moe``
over several CUDA ranks (``mega_ranks``) raises ``NotImplementedError`` until its multi-GPU run unless
``MegaOverrides(kernels=True)`` reaches the launcher. Its BLOCK_M follows the token capacity of all ranks
(``launch.rank_block_m``): every rank must choose the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core import arch, gpu_validation
from ..core.errors import require

# Expected tokens per expert above which the 128-row tile is used.
SMALL_BLOCK_M_MAX_TOKENS = 64
BLOCK_N = 128
L1_BLOCK_K = 128          # one 128-channel scale block of x and of the L1 weights per K step
L2_BLOCK_K = 64           # one 64-column scale group of the intermediate per K step
STAGES = {64: (4, 6), 128: (4, 5)}   # (L1, L2) pipeline depth per BLOCK_M: (BM + BN) x BK bytes per stage
# Shared memory a pipelined kernel keeps besides its stages (barriers, layout-conversion scratch): 3 KB measured in
# the sm_120 build of the L1 kernel; where an architecture holds fewer stages than STAGES asks (101 KB parts: sm_89,
# sm_120), the depth drops until (stages - 1) stages and this reserve fit (Triton keeps one stage fewer in flight).
STAGE_RESERVE = 8 * 1024
WARPS = {64: 4, 128: 8}   # one warpgroup per 64 rows
SUPPORTED_BLOCK_M = (64, 128)


@dataclass(frozen=True)
class MegaConfig:
    block_m: int
    l1_stages: int
    l2_stages: int
    num_warps: int
    block_n: int = BLOCK_N


@dataclass(frozen=True)
class MegaOverrides:
    """The only way to force a variant (tests, sweeps): ``block_m`` in ``SUPPORTED_BLOCK_M``; ``kernels`` runs the
    Triton kernels while they await their GPU run (``core/gpu_validation.py``)."""
    block_m: Optional[int] = None
    kernels: bool = False


NO_OVERRIDES = MegaOverrides()


# The BF16 layer's key in core/gpu_validation.AWAITING_GPU (see the module docstring).
BF16_KEY = "mega_bf16"
# The key of ``fp8_mega_moe`` over several CUDA ranks (launch.py's ``fp8_mega_moe_rank_phases``).
RANKS_KEY = "mega_ranks"
BF16_BLOCK_K = 64         # one 128-byte row of BF16 per K step (the widest TMA swizzle)
BF16_STAGES = {64: (4, 4), 128: (4, 4)}   # (L1, L2) pipeline depth per BLOCK_M: (BM + BN) x 64 x 2 bytes per stage


# The FP8 x FP4 layer (``plan_fp8_fp4``): its kernels decode both operands to BF16 in registers (Hopper has no FP4
# MMA), which bounds the tile as in the FP4 GEMM (gemm/fp4/plan.py): one 32-wide UE8M0 block per K step, and the N tile
# as wide as the M tile (64 x 64 on one warpgroup, 128 x 128 on two), at least 64 (one 32-column scale group of the
# intermediate after SwiGLU). The pointer loads of a stage are (BM + BN) x 32 bytes at most (FP8 weights).
FP8_FP4_KEY = "mega_fp8_fp4"
FP8_FP4_BLOCK_K = 32
FP8_FP4_BLOCK_N = {64: 64, 128: 128}
FP8_FP4_STAGES = 3


def kernels_wanted(overrides: MegaOverrides) -> bool:
    return gpu_validation.kernels_wanted("mega", overrides.kernels)


def bf16_kernels_wanted(overrides: MegaOverrides) -> bool:
    return gpu_validation.kernels_wanted(BF16_KEY, overrides.kernels)


def rank_kernels_wanted(overrides: MegaOverrides) -> bool:
    """Whether ``fp8_mega_moe`` over several CUDA ranks runs its kernels (else the layer raises
    ``NotImplementedError``): the ``mega_ranks`` key gates them until their multi-GPU run."""
    return gpu_validation.kernels_wanted(RANKS_KEY, overrides.kernels)


def expected_tokens_per_expert(num_tokens: int, num_topk: int, num_local_experts: int) -> int:
    return -(-num_tokens * num_topk // num_local_experts)


def plan(num_tokens: int, num_topk: int, num_local_experts: int,
         overrides: MegaOverrides = NO_OVERRIDES, sm: int = arch.SM90) -> MegaConfig:
    """The FP8 layer's config on ``sm`` (the pipeline depths fit that architecture's shared memory)."""
    if overrides.block_m is not None:
        require(overrides.block_m in SUPPORTED_BLOCK_M,
                f"MegaOverrides.block_m: expected one of {SUPPORTED_BLOCK_M}, got {overrides.block_m}")
        block_m = overrides.block_m
    elif expected_tokens_per_expert(num_tokens, num_topk, num_local_experts) <= SMALL_BLOCK_M_MAX_TOKENS:
        block_m = 64
    else:
        block_m = 128
    l1_stages, l2_stages = STAGES[block_m]
    l1_stages = _stages_that_fit(l1_stages, (block_m + BLOCK_N) * L1_BLOCK_K, sm)
    l2_stages = _stages_that_fit(l2_stages, (block_m + BLOCK_N) * L2_BLOCK_K, sm)
    return MegaConfig(block_m, l1_stages, l2_stages, WARPS[block_m])


def _stages_that_fit(stages: int, stage_bytes: int, sm: int) -> int:
    """``stages``, or fewer where the architecture's shared memory cannot hold them (never below 2)."""
    fit = 1 + (arch.shared_memory(sm) - STAGE_RESERVE) // stage_bytes
    return max(2, min(stages, fit))


def plan_bf16(num_tokens: int, num_topk: int, num_local_experts: int,
              overrides: MegaOverrides = NO_OVERRIDES) -> MegaConfig:
    """The BF16 layer's config: the FP8 layer's BLOCK_M choice, its own pipeline depths."""
    block_m = plan(num_tokens, num_topk, num_local_experts, overrides).block_m
    l1_stages, l2_stages = BF16_STAGES[block_m]
    return MegaConfig(block_m, l1_stages, l2_stages, WARPS[block_m])


def fp8_fp4_kernels_wanted(overrides: MegaOverrides) -> bool:
    return gpu_validation.kernels_wanted(FP8_FP4_KEY, overrides.kernels)


def plan_fp8_fp4(num_tokens: int, num_topk: int, num_local_experts: int,
                 overrides: MegaOverrides = NO_OVERRIDES, sm: int = arch.SM90) -> MegaConfig:
    """The FP8 x FP4 layer's config: the FP8 layer's BLOCK_M choice, the N tile and depth of its decoding GEMMs."""
    block_m = plan(num_tokens, num_topk, num_local_experts, overrides, sm).block_m
    block_n = FP8_FP4_BLOCK_N[block_m]
    stages = _stages_that_fit(FP8_FP4_STAGES, (block_m + block_n) * FP8_FP4_BLOCK_K, sm)
    return MegaConfig(block_m, stages, stages, WARPS[block_m], block_n)


def max_m_tiles(num_tokens: int, num_topk: int, num_local_experts: int, block_m: int) -> int:
    """A bound on the M tiles of a call without reading the routing: every expert that receives a slot adds at
    most one partial tile to the full ones."""
    slots = num_tokens * num_topk
    return -(-slots // block_m) + min(num_local_experts, slots)


def pool_rows_needed(num_tokens: int, num_topk: int, num_local_experts: int, block_m: int) -> int:
    """Pool rows a call can fill, padding included (``max_m_tiles`` whole tiles; the routing may repeat an expert
    within a token, so no tighter per-expert bound holds)."""
    return max_m_tiles(num_tokens, num_topk, num_local_experts, block_m) * block_m
