"""Two plans live here (pure: sizes in, frozen config out).

1. The launch configuration DeepGEMM's SM100 mega gate picks (``get_bf16_mega_gate_config``), as plain integer
   logic: candidates over (expert groups, MMA CTAs, split-K), each with the token tile that spreads the tokens over
   the worker groups of ``num_sms``, ranked by token columns, launched SMs, MMA CTAs, then fewer splits and waves.
   Deterministic mode (``use_deterministic_algorithms``) pins split-K to 1, as DeepGEMM's does. Informational: our
   kernels do not read it.
2. THE plan of our Triton path (``launch.py``, ``kernels.py``): the logits ``x @ weight.T`` come from the package's
   BF16 GEMM (its own plan), then one routing kernel per block of ``block_t`` tokens holds the block's ``[block_t,
   next_pow2(E)]`` FP32 logits in registers and does everything else. ``kernel_plan`` sizes that block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..core import gpu_validation
from ..core.errors import require
from ..utils.numeric import next_pow2

BLOCK_K = 64
MAX_BLOCK_TOKENS, MIN_BLOCK_TOKENS = 256, 16
EXPERT_ALIGNMENT = 128
MAX_TOKENS = 1 << 20
MAX_LOGICAL_CTAS = 64
MAX_GATE_WARPGROUPS = 7
TOPK_TOKENS_PER_WARPGROUP = 4
TRANSPOSE_COLS_PER_WARPGROUP = 8
MAX_SPLIT_K = 8
MAX_ROUTED_EXPERTS = 512
# Without a GPU (get_num_sms() == 0) the configuration is the one for a B200, the SM100 part with 148 SMs.
DEFAULT_SM100_SMS = 148


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _align(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


@dataclass(frozen=True)
class _Candidate:
    num_expert_groups: int
    num_mma_ctas: int
    num_split_k: int
    block_tokens: int
    num_token_cols: int
    num_launch_sms: int
    num_waves: int


def _wave_tile(num_tokens: int, num_workers: int) -> int:
    waves = _ceil_div(_ceil_div(num_tokens, MAX_BLOCK_TOKENS), num_workers)
    return min(MAX_BLOCK_TOKENS, _align(_ceil_div(num_tokens, waves * num_workers), MIN_BLOCK_TOKENS))


def _token_cols(block_tokens: int, experts_per_group: int, num_mma_ctas: int) -> int:
    return block_tokens // num_mma_ctas if experts_per_group == EXPERT_ALIGNMENT else block_tokens


def _num_waves(num_tokens: int, num_workers: int) -> int:
    return _ceil_div(_ceil_div(num_tokens, _wave_tile(num_tokens, num_workers)), num_workers)


def _doubling_free(num_tokens: int, num_sms: int, c: _Candidate) -> bool:
    """Whether twice the task CTAs would serve as well (such candidates are skipped)."""
    doubled = 2 * c.num_expert_groups * c.num_mma_ctas * c.num_split_k
    if doubled > num_sms or doubled >= MAX_LOGICAL_CTAS:
        return False
    workers = num_sms // doubled
    if c.num_mma_ctas == 1 and c.num_split_k != MAX_SPLIT_K:
        return _num_waves(num_tokens, workers) <= c.num_waves + 2
    if c.num_mma_ctas == 2 and c.num_split_k == 1 and c.num_waves == 1:
        return _wave_tile(num_tokens, workers) == c.block_tokens
    return False


def _candidates(num_tokens: int, hidden: int, num_experts: int, num_sms: int) -> list:
    out = []
    for groups in range(1, num_experts // EXPERT_ALIGNMENT + 1):
        if num_experts % (EXPERT_ALIGNMENT * groups):
            continue
        per_group = num_experts // groups
        if per_group > 2 * EXPERT_ALIGNMENT:
            continue
        for ctas in (1, 2):
            if per_group > EXPERT_ALIGNMENT and ctas != 2:
                continue
            split = 1
            while split <= MAX_SPLIT_K:
                tasks = groups * ctas * split
                if not (hidden % (split * BLOCK_K) or (ctas == 2 and split == MAX_SPLIT_K) or tasks > num_sms
                        or tasks >= MAX_LOGICAL_CTAS):
                    workers = num_sms // tasks
                    tile = _wave_tile(num_tokens, workers)
                    blocks = _ceil_div(num_tokens, tile)
                    cols = min(_token_cols(tile, per_group, ctas), MAX_GATE_WARPGROUPS * TRANSPOSE_COLS_PER_WARPGROUP)
                    c = _Candidate(groups, ctas, split, tile, cols, min(workers, blocks) * tasks,
                                   _ceil_div(blocks, workers))
                    if not _doubling_free(num_tokens, num_sms, c):
                        out.append(c)
                split *= 2
    return out


def _rank(c: _Candidate) -> tuple:
    return (-c.num_token_cols, -c.num_launch_sms, -c.num_mma_ctas, c.num_split_k, c.num_waves)


def _balanced(units: int) -> int:
    return _ceil_div(units, _ceil_div(units, MAX_GATE_WARPGROUPS))


def mega_gate_config(num_tokens: int, hidden: int, num_routed_experts: int, num_sms: int,
                     deterministic: bool) -> dict:
    experts = _align(num_routed_experts, EXPERT_ALIGNMENT)
    candidates = _candidates(num_tokens, hidden, experts, num_sms)
    if not candidates:
        from ..core.errors import DeepGEMMError
        raise DeepGEMMError(f"num_sms: no mega gate configuration fits {num_sms} SMs")
    best = min(candidates, key=_rank)  # (min_element: the first of equal ranks)
    split = 1 if deterministic else best.num_split_k
    per_group = experts // best.num_expert_groups
    if best.num_waves > 1:
        warpgroups = MAX_GATE_WARPGROUPS
    else:
        tasks = best.num_expert_groups * best.num_mma_ctas * split  # (after deterministic mode, as DeepGEMM)
        transpose_units = _ceil_div(_token_cols(best.block_tokens, per_group, best.num_mma_ctas),
                                    TRANSPOSE_COLS_PER_WARPGROUP)
        topk_units = _ceil_div(best.block_tokens, TOPK_TOKENS_PER_WARPGROUP * tasks)
        warpgroups = max(_balanced(transpose_units), _balanced(topk_units))
    return {"block_tokens": best.block_tokens, "num_mma_ctas": best.num_mma_ctas, "num_split_k": split,
            "num_expert_groups": best.num_expert_groups, "num_gate_warpgroups": warpgroups,
            "num_sms": best.num_launch_sms}


# ---- 2. the Triton path's plan ---------------------------------------------------------------------------------

FAMILY = "mega_gate"
# The routing kernel's [BT, next_pow2(E)] tiles (logits / scores, rank keys, a taken mask) live in registers: at
# 16 FP32 elements per thread and 4 warps a tile is 2048 elements, so with the three tiles and the K-loop's
# temporaries a program takes 72-134 registers at DeepSeek's router sizes, 26-156 over all variants, no spills
# (sm_90a, Triton 3.6-3.9; scripts/compile_check_mega_gate.py prints them). E = 512 gives 4 tokens per program,
# E = 256 8.
SELECT_TILE_ELEMS = 2048
# The [BT, next_pow2(K + S)] slot tiles (indices, scores, and the force_random path's int64 candidates) at 4
# elements per thread: 512 elements, so a small E cannot grow the token block past what the int64 tiles afford.
SELECT_SLOT_ELEMS = 512
SELECT_WARPS = 4
# Most tokens per routing program (small E): 64 rows already amortise the per-program bias / count loads.
MAX_SELECT_TOKENS = 64


@dataclass(frozen=True)
class GateKernelConfig:
    block_t: int        # tokens per routing program (a power of two)
    block_e: int        # next_pow2(E): the expert columns a program holds
    block_k: int        # next_pow2(K + S): the output slots
    block_c: int        # next_pow2(E + S): logical_count's entries (summed for force_random with an EP map)
    warps: int = SELECT_WARPS


@dataclass(frozen=True)
class MegaGateOverrides:
    """The only way to force a variant (tests, sweeps): ``block_t`` a power of two in [1, ``MAX_SELECT_TOKENS``];
    ``kernels`` runs the Triton path while it awaits its GPU run (``core/gpu_validation.py``)."""
    block_t: Optional[int] = None
    kernels: bool = False


NO_OVERRIDES = MegaGateOverrides()


def kernels_wanted(overrides: MegaGateOverrides) -> bool:
    return gpu_validation.kernels_wanted(FAMILY, overrides.kernels)


def kernel_plan(num_experts: int, num_slots: int, num_shared: int,
                overrides: MegaGateOverrides = NO_OVERRIDES) -> GateKernelConfig:
    """Routing-kernel config for ``num_experts`` routed experts (E), ``num_slots`` output slots (K + S) and
    ``num_shared`` shared-as-routed experts (S)."""
    block_e = next_pow2(num_experts)
    block_k = next_pow2(num_slots)
    if overrides.block_t is not None:
        bt = overrides.block_t
        require(1 <= bt <= MAX_SELECT_TOKENS and bt & (bt - 1) == 0,
                f"MegaGateOverrides.block_t: expected a power of two in [1, {MAX_SELECT_TOKENS}], got {bt}")
    else:
        bt = max(1, min(MAX_SELECT_TOKENS, SELECT_TILE_ELEMS // block_e, SELECT_SLOT_ELEMS // block_k))
    return GateKernelConfig(bt, block_e, block_k, next_pow2(num_experts + num_shared))


def compile_configs() -> list[tuple[GateKernelConfig, int, int, int]]:
    """(config, E, K, S) of the routing-kernel variants the plan picks over DeepSeek V3 / V4 router sizes and the
    extremes the checks allow (for scripts/compile_check_mega_gate.py)."""
    seen, out = set(), []
    for experts, topk, shared in ((256, 8, 1), (384, 6, 1), (512, 8, 0), (512, 16, 2), (4, 4, 0), (60, 4, 2)):
        cfg = kernel_plan(experts, topk + shared, shared)
        if cfg not in seen:
            seen.add(cfg)
            out.append((cfg, experts, topk, shared))
    return out
