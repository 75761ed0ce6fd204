"""THE plan of an ``fp8_mega_moe`` call at one rank: BLOCK_M and the pipeline depths (pure: sizes in, a frozen
config out; ``launch.py`` only reads it).

The layer's two GEMMs stream every routed expert's weights once per M tile of that expert, so what decides the speed
is how many M tiles an expert's tokens make: with few tokens per expert (decode) one 64-row tile (one wgmma M) per
expert reads each weight byte once; from 64 expected tokens per expert on, 128-row tiles halve the weight reads per
token (two warpgroups per program). The N tile is 128 weight rows in both GEMMs (L1: 64 gate + 64 up columns, which
is one 64-column scale group of the intermediate after SwiGLU; L2: one 128-row weight scale block).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core import gpu_validation
from ..core.errors import require

# Expected tokens per expert above which the 128-row tile is used.
SMALL_BLOCK_M_MAX_TOKENS = 64
BLOCK_N = 128
L1_BLOCK_K = 128          # one 128-channel scale block of x and of the L1 weights per K step
L2_BLOCK_K = 64           # one 64-column scale group of the intermediate per K step
STAGES = {64: (4, 6), 128: (4, 5)}   # (L1, L2) pipeline depth per BLOCK_M: (BM + BN) x BK bytes per stage
WARPS = {64: 4, 128: 8}   # one warpgroup per 64 rows
SUPPORTED_BLOCK_M = (64, 128)


@dataclass(frozen=True)
class MegaConfig:
    block_m: int
    l1_stages: int
    l2_stages: int
    num_warps: int


@dataclass(frozen=True)
class MegaOverrides:
    """The only way to force a variant (tests, sweeps): ``block_m`` in ``SUPPORTED_BLOCK_M``; ``kernels`` runs the
    Triton kernels while they await their GPU run (``core/gpu_validation.py``)."""
    block_m: Optional[int] = None
    kernels: bool = False


NO_OVERRIDES = MegaOverrides()


def kernels_wanted(overrides: MegaOverrides) -> bool:
    return gpu_validation.kernels_wanted("mega", overrides.kernels)


def expected_tokens_per_expert(num_tokens: int, num_topk: int, num_local_experts: int) -> int:
    return -(-num_tokens * num_topk // num_local_experts)


def plan(num_tokens: int, num_topk: int, num_local_experts: int,
         overrides: MegaOverrides = NO_OVERRIDES) -> MegaConfig:
    if overrides.block_m is not None:
        require(overrides.block_m in SUPPORTED_BLOCK_M,
                f"MegaOverrides.block_m: expected one of {SUPPORTED_BLOCK_M}, got {overrides.block_m}")
        block_m = overrides.block_m
    elif expected_tokens_per_expert(num_tokens, num_topk, num_local_experts) <= SMALL_BLOCK_M_MAX_TOKENS:
        block_m = 64
    else:
        block_m = 128
    l1_stages, l2_stages = STAGES[block_m]
    return MegaConfig(block_m, l1_stages, l2_stages, WARPS[block_m])


def max_m_tiles(num_tokens: int, num_topk: int, num_local_experts: int, block_m: int) -> int:
    """A bound on the M tiles of a call without reading the routing: every expert that receives a slot adds at
    most one partial tile to the full ones."""
    slots = num_tokens * num_topk
    return -(-slots // block_m) + min(num_local_experts, slots)
