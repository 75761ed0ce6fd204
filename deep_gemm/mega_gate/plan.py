"""The launch configuration DeepGEMM's SM100 mega gate picks (``get_bf16_mega_gate_config``), as plain integer
logic: candidates over (expert groups, MMA CTAs, split-K), each with the token tile that spreads the tokens over the
worker groups of ``num_sms``, ranked by token columns, launched SMs, MMA CTAs, then fewer splits and waves.
Deterministic mode (``use_deterministic_algorithms``) pins split-K to 1, as DeepGEMM's does."""

from __future__ import annotations

from dataclasses import dataclass

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
