"""Testing helpers of ``bf16_mega_gate``'s kernels: inputs for every argument form, one run of the Triton path (the
whole op, or the routing kernel alone on given logits), and the comparison with the torch reference (shared by the
interpreter tests, the GPU tests and the sanitizer cases).

Tolerance rules:

* Indices (``topk_idx``, ``unmapped_topk_idx``): bit for bit, except on rows of the normal path whose reference rank
  keys hold a near tie among their K + 1 largest (consecutive gap within ``TIE_SHARE`` of the row's largest |key|,
  some fifty FP32 ulps), where the kernel's FP32 scores, a few ulps off the reference's (the GPU's exp and log), may
  order the tied experts either way; at most ``MAX_TIE_ROWS_SHARE`` of the rows may be excused. Raw-logit keys (no
  bias) are never excused in effect: both paths rank the same FP32 logits.
* The kernel and the reference see the same logits: ``run_route`` feeds both the reference's FP32 logits;
  ``run_op`` (the gate GEMM too) takes inputs on a grid (``grid=True``: x a multiple of 1/64, weight an integer, both
  at most 4 in magnitude), where every FP32 partial sum of the GEMM is exact, in any order.
* Weights: ``WEIGHT_RTOL`` / ``WEIGHT_ATOL`` (FP32 scoring and a sum in another order); the hashed force_random
  weights and the shared / masked slots bit for bit.
"""

from __future__ import annotations

from typing import Optional

import torch

from ..mega_gate.reference import bf16_mega_gate_reference, gate_from_logits, score  # noqa: F401

TIE_SHARE = 2.0 ** -18
MAX_TIE_ROWS_SHARE = 0.02
WEIGHT_RTOL, WEIGHT_ATOL = 2e-5, 1e-7
# grid inputs: x in multiples of 1/GRID_X_STEPS, both operands' integers within +-GRID_MAX (the GEMM's FP32 partial
# sums stay exact while H * GRID_MAX^2 * GRID_X_STEPS < 2^24, any H up to 2^15)
GRID_X_STEPS, GRID_MAX = 64, 4

# the op's arguments after x and weight, in schema order
ARG_NAMES = ("num_topk", "use_shared_as_routed", "num_shared_experts", "routed_scaling_factor", "ep_rank",
             "scoring_func", "mask", "bias", "image_bias", "image_token_mask", "fix_routing_mask", "to_physical_map",
             "logical_count", "unmapped_topk_idx", "force_random", "out_idx", "out_weights")


def make_inputs(tokens: int, experts: int, topk: int, *, hidden: int = 256, shared: int = 0, scoring: str = "sigmoid",
                bias: Optional[str] = None, mask: bool = False, fix: bool = False, replicas: int = 0,
                random: bool = False, out: bool = False, unmapped: bool = False, ep_rank: int = 3, seed: int = 0,
                grid: bool = False, device="cpu") -> dict:
    """The op's arguments as keywords. ``bias``: None, 'bias', 'image' (image bias only) or 'both'; ``replicas``: D
    of an EP map (0: none); ``unmapped``: an ``unmapped_topk_idx`` to write (``fix`` implies one, holding the
    fixed experts, some out of range to exercise the clamp), with a row stride wider than K; ``grid``: x and weight on
    the grid above (the GEMM exact)."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.rand(*shape, generator=g)

    def flags():
        return (rand(tokens) < 0.5).to(device)

    if grid:
        x = torch.randint(-GRID_MAX, GRID_MAX + 1, (tokens, hidden), generator=g) / GRID_X_STEPS
        w = torch.randint(-GRID_MAX, GRID_MAX + 1, (experts, hidden), generator=g).float()
    else:
        x, w = torch.randn(tokens, hidden, generator=g) / 8, torch.randn(experts, hidden, generator=g)
    d = dict(x=x.bfloat16().to(device), weight=w.bfloat16().to(device),
             num_topk=topk, use_shared_as_routed=shared > 0, num_shared_experts=max(shared, 1),
             routed_scaling_factor=2.5, ep_rank=ep_rank, scoring_func=scoring)
    d.update({k: None for k in ARG_NAMES if k not in d})
    if bias in ("bias", "both"):
        d["bias"] = (rand(experts) - 0.5).to(device)
    if bias in ("image", "both"):
        d["image_bias"] = (rand(experts) - 0.5).to(device)
        d["image_token_mask"] = flags()
    if mask:
        d["mask"] = flags()
    if fix or unmapped:
        wide = torch.randint(-1, experts + 1, (tokens, topk + 3), generator=g).to(device)
        d["unmapped_topk_idx"] = wide[:, :topk]
    if fix:
        d["fix_routing_mask"] = flags()
    if replicas:
        d["to_physical_map"] = torch.randint(0, 4 * experts, (experts + shared, replicas), generator=g,
                                             dtype=torch.int32).to(device)
        d["logical_count"] = torch.randint(1, replicas + 1, (experts + shared,), generator=g,
                                           dtype=torch.int32).to(device)
    if random:
        d["force_random"] = flags()
    if out:
        d["out_idx"] = torch.full((tokens, topk + shared), -7, dtype=torch.int64, device=device)
        d["out_weights"] = torch.full((tokens, topk + shared), -7.0, device=device)
    return d


def logits_of(d: dict) -> torch.Tensor:
    """The reference's logits (FP64 sums rounded to FP32)."""
    return (d["x"].double() @ d["weight"].double().T).float()


def _clone(d: dict) -> dict:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in d.items()}


def run_op(d: dict, overrides=None):
    """(kernel result, reference result, argument copies each wrote into): the op's check, then its Triton launcher
    with ``overrides`` (``kernels=True`` by default) on one copy of the arguments and the reference on another.
    Fails if the launcher declines (so a test never passes by running the reference)."""
    from ..core.registry import kernels_of
    from ..mega_gate.plan import MegaGateOverrides

    mine, theirs = _clone(d), _clone(d)
    kernels = kernels_of("bf16_mega_gate")
    full = tuple(mine[k] for k in ("x", "weight") + ARG_NAMES)
    kernels.check(*full)
    got = kernels.triton(*full, overrides=overrides if overrides is not None else MegaGateOverrides(kernels=True))
    assert got is not NotImplemented, "the bf16_mega_gate launcher declined"
    want = bf16_mega_gate_reference(*(theirs[k] for k in ("x", "weight") + ARG_NAMES))
    return got, want, mine, theirs


def run_route(d: dict, logits: torch.Tensor, overrides=None):
    """``run_op`` for the routing kernel alone: both paths on the same FP32 ``logits``."""
    from ..mega_gate import launch
    from ..mega_gate.plan import MegaGateOverrides

    mine, theirs = _clone(d), _clone(d)
    got = launch.route(logits, *(mine[k] for k in ARG_NAMES),
                       overrides=overrides if overrides is not None else MegaGateOverrides(kernels=True))
    want = gate_from_logits(logits, *(theirs[k] for k in ARG_NAMES))
    return got, want, mine, theirs


def _rank_keys(d: dict, logits: torch.Tensor) -> torch.Tensor:
    scored = score(logits, d["scoring_func"])
    if d["bias"] is None and d["image_bias"] is None:
        return logits
    token_bias = d["bias"][None, :] if d["bias"] is not None else torch.zeros_like(scored[:1])
    if d["image_bias"] is not None:
        token_bias = torch.where(d["image_token_mask"][:, None], d["image_bias"][None, :], token_bias)
    return scored + token_bias


def tie_rows(d: dict, logits: torch.Tensor, share: float) -> torch.Tensor:
    """bool [T]: normal-path rows with a near tie among their K + 1 largest rank keys."""
    keys = _rank_keys(d, logits.double().float())
    k = d["num_topk"]
    top = keys.sort(dim=1, descending=True).values[:, :k + 1]
    if top.size(1) < 2:
        return torch.zeros(keys.size(0), dtype=torch.bool, device=keys.device)
    gap = (top[:, :-1] - top[:, 1:]).min(dim=1).values
    tied = gap <= share * keys.abs().amax(dim=1)
    for name in ("fix_routing_mask", "force_random"):
        if d[name] is not None:
            tied &= ~d[name]
    if d["mask"] is not None:
        tied &= d["mask"]
    return tied


def compare(d: dict, logits: torch.Tensor, got, want, mine: dict, theirs: dict) -> int:
    """Assert the rules above; returns how many rows near ties excused."""
    tied = tie_rows(d, logits, TIE_SHARE)
    assert int(tied.sum()) <= MAX_TIE_ROWS_SHARE * max(1, tied.numel()), f"{int(tied.sum())} near-tie rows"
    keep = ~tied
    (gi, gw), (wi, ww) = got, want
    assert gi.dtype == torch.int64 and gw.dtype == torch.float32 and gi.shape == wi.shape and gw.shape == ww.shape
    assert torch.equal(gi[keep], wi[keep]), _first_diff(gi, wi, keep)
    torch.testing.assert_close(gw[keep], ww[keep], rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL)
    k = d["num_topk"]
    exact = torch.ones_like(gw, dtype=torch.bool)
    exact[:, :k] = False  # shared slots: exactly 1
    if d["force_random"] is not None:
        exact |= d["force_random"][:, None]
    if d["mask"] is not None:
        exact |= ~d["mask"][:, None]
    assert torch.equal(gw[exact], ww[exact])
    for name in ("out_idx", "out_weights"):
        if d[name] is not None:
            assert torch.equal(mine[name][keep], (gi if name == "out_idx" else gw)[keep]), name
    if d["unmapped_topk_idx"] is not None:
        assert torch.equal(mine["unmapped_topk_idx"][keep], theirs["unmapped_topk_idx"][keep]), \
            _first_diff(mine["unmapped_topk_idx"], theirs["unmapped_topk_idx"], keep)
    return int(tied.sum())


def _first_diff(a, b, keep) -> str:
    bad = ((a != b).any(dim=1) & keep).nonzero()
    if not len(bad):
        return "equal"
    r = int(bad[0])
    return f"{len(bad)} rows differ, first {r}: got {a[r].tolist()}, want {b[r].tolist()}"
