"""Mega MoE scenarios shared by the single-process and the gloo tests: inputs built identically on every rank from a
seed, the layer run through the public API, and an independent float64 per-token loop as the expectation.

The expectation never calls deep_gemm.mega: it dequantises the weights and the dispatched tokens with its own
indexing (block scales expanded here, gate/up kept in their original order), and walks every token's top-k slots
one by one. It does not round the intermediate to FP8 / BF16 (the layer does), so agreement is measured with
calc_diff.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Optional

import torch

import deep_gemm
from deep_gemm.utils import (cast_back_from_fp4, per_block_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8,
                             unpack_ue8m0_from_int)

CAPACITY = 384


@dataclass(frozen=True)
class Scenario:
    kind: str                      # 'sm90' (fp8_mega_moe), 'fp8fp4' (fp8_fp4_mega_moe) or 'bf16' (bf16_mega_moe)
    tokens: tuple = (24,)          # tokens per rank (one entry per rank)
    num_experts: int = 8
    hidden: int = 512
    inter: int = 256
    topk: int = 2
    masked: float = 0.0            # share of top-k slots set to -1 (1.0: all)
    clamp: Optional[float] = None
    fast_math: bool = True
    idle_experts: bool = False     # odd experts get no token
    shared: int = 0                # shared experts (fp8fp4 / bf16)
    post_norm: Optional[str] = None  # None, 'plain', 'weight' or 'weight_first'
    seed: int = 0
    y_rows: Optional[int] = None   # rows of y when it differs from the token count (SGLang's max(n, 1))
    fp8_weights: bool = False      # fp8fp4 with FP8 (not FP4) weights, same per-32 UE8M0 scales

    @property
    def num_ranks(self) -> int:
        return len(self.tokens)

    @property
    def id(self) -> str:
        parts = [self.kind, f"r{self.num_ranks}", f"t{'-'.join(map(str, self.tokens))}", f"e{self.num_experts}",
                 f"h{self.hidden}", f"i{self.inter}", f"k{self.topk}", f"m{self.masked}", f"c{self.clamp}",
                 "fast" if self.fast_math else "exact"]
        if self.idle_experts:
            parts.append("idle")
        if self.shared:
            parts.append(f"shared{self.shared}")
        if self.post_norm:
            parts.append(f"norm-{self.post_norm}")
        if self.y_rows is not None:
            parts.append(f"y{self.y_rows}")
        if self.fp8_weights:
            parts.append("fp8w")
        return "-".join(parts)


@dataclass
class Global:
    """Everything every rank knows (built from the seed alone)."""
    x: list                        # per rank: BF16 [n, H]
    topk_idx: list                 # per rank: int32 [n, k]
    topk_weights: list             # per rank: FP32 [n, k]
    l1: tuple                      # the layer's L1 operand for all experts (before slicing to a rank)
    l2: tuple
    w1: torch.Tensor               # float64 [E, 2I, H], [gate | up], as the quantised weights dequantise
    w2: torch.Tensor               # float64 [E, H, I]
    shared: Optional[tuple] = None           # (layer operand l1, l2) of the shared experts
    shared_w: Optional[tuple] = None         # float64 (w1 [2 I_s, H], w2 [H, I_s])
    norm_weight: Optional[torch.Tensor] = None
    extra: dict = field(default_factory=dict)


def _block_dequant(q: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    out = q.double().clone()
    for i in range(sf.size(0)):
        for j in range(sf.size(1)):
            out[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] *= float(sf[i, j])
    return out


def _quantise(kind: str, w: torch.Tensor):
    """One weight matrix -> (layer data, layer scale or None, float64 dequantised)."""
    if kind == "sm90":
        q, sf = per_block_cast_to_fp8(w, use_ue8m0=False)
        return q, sf, _block_dequant(q, sf)
    if kind == "fp8fp4-fp8w":
        q, sf = per_token_cast_to_fp8(w, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
        return q, sf, q.double() * unpack_ue8m0_from_int(sf).double().repeat_interleave(32, dim=1)
    if kind == "fp8fp4":
        q, sf = per_token_cast_to_fp4(w, use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
        return q, sf, cast_back_from_fp4(q, sf, gran_k=32, use_packed_ue8m0=True).double()
    b = w.bfloat16()
    return b, None, b.double()


@functools.lru_cache(maxsize=16)
def _weights(kind: str, e: int, h: int, i: int, shared: int, norm: bool):
    """Quantised weights, cached across scenarios of one shape (quantising FP4 on CPU is the slow part)."""
    g = torch.Generator().manual_seed(7)
    w1 = torch.randn(e, 2 * i, h, generator=g) / h ** 0.5
    w2 = torch.randn(e, h, i, generator=g) / i ** 0.5
    q1 = [_quantise(kind, w1[j]) for j in range(e)]
    q2 = [_quantise(kind, w2[j]) for j in range(e)]
    w1d = torch.stack([d for _, _, d in q1])
    w2d = torch.stack([d for _, _, d in q2])
    if kind.startswith("bf16"):
        l1, l2 = torch.stack([q for q, _, _ in q1]), torch.stack([q for q, _, _ in q2])
    else:
        l1 = (torch.stack([q for q, _, _ in q1]), torch.stack([s for _, s, _ in q1]))
        l2 = (torch.stack([q for q, _, _ in q2]), torch.stack([s for _, s, _ in q2]))
    shared_ops = shared_w = None
    if shared:
        s1 = torch.randn(2 * i * shared, h, generator=g) / h ** 0.5
        s2 = torch.randn(h, i * shared, generator=g) / (i * shared) ** 0.5
        (a1, b1, d1), (a2, b2, d2) = _quantise(kind, s1), _quantise(kind, s2)
        shared_ops = ((a1, b1), (a2, b2)) if not kind.startswith("bf16") else (a1, a2)
        shared_w = (d1, d2)
    norm_weight = torch.rand(h, generator=g) + 0.5 if norm else None
    return l1, l2, w1d, w2d, shared_ops, shared_w, norm_weight


def build_global(sc: Scenario) -> Global:
    g = torch.Generator().manual_seed(1000 + sc.seed)
    e, h, i, k = sc.num_experts, sc.hidden, sc.inter, sc.topk
    xs, idxs, weights = [], [], []
    for n in sc.tokens:
        xs.append(torch.randn(n, h, generator=g).bfloat16())
        scores = torch.randn(n, e, generator=g)
        if sc.idle_experts:
            scores[:, 1::2] = -float("inf")
        tw, ti = scores.topk(k, dim=1)
        tw = torch.rand(n, k, generator=g) + 0.25
        if sc.masked >= 1.0:
            ti[:] = -1
        elif sc.masked > 0:
            ti[torch.rand(n, k, generator=g) < sc.masked] = -1
        idxs.append(ti.int())
        weights.append(tw.float())
    weight_kind = sc.kind + ("-fp8w" if sc.fp8_weights else "")
    l1, l2, w1d, w2d, shared_ops, shared_w, norm_weight = _weights(
        weight_kind, e, h, i, sc.shared, sc.post_norm in ("weight", "weight_first"))
    data = Global(xs, idxs, weights, l1, l2, w1d, w2d, shared_ops, shared_w, norm_weight)
    return data


# ---- the layer through the public API ------------------------------------------------------------------------

def make_buffer(sc: Scenario, group, ring: Optional[int] = None):
    """The scenario's buffer on CPU; ``ring``: the SM100-style buffer's ring size in tokens (None: the default)."""
    e, h, i, k = sc.num_experts, sc.hidden, sc.inter, sc.topk
    if sc.kind == "sm90":
        return deep_gemm.get_symm_buffer_for_sm90_mega_moe(group, e, CAPACITY, k, h, i, device="cpu")
    mma = "fp8xfp4" if sc.kind == "fp8fp4" else "bf16xbf16"
    if ring is not None:
        return deep_gemm.SymmBuffer(group, e, CAPACITY, k, h, i, num_ring_tokens=ring, mma_type=mma, device="cpu")
    return deep_gemm.get_symm_buffer_for_mega_moe(group, e, CAPACITY, k, h, i, sc.shared, mma_type=mma,
                                                  device="cpu")


def local_weights(sc: Scenario, data: Global, rank: int):
    local = sc.num_experts // sc.num_ranks
    part = slice(rank * local, (rank + 1) * local)

    def cut(w):
        return tuple(t[part].contiguous() for t in w) if isinstance(w, tuple) else w[part].contiguous()

    l1, l2 = cut(data.l1), cut(data.l2)
    if sc.kind == "sm90":
        return deep_gemm.transform_weights_for_mega_moe_sm90(l1, l2)
    return deep_gemm.transform_weights_for_mega_moe(l1, l2)


def fill_buffer(sc: Scenario, data: Global, buf, rank: int) -> None:
    x, ti, tw = data.x[rank], data.topk_idx[rank], data.topk_weights[rank]
    n = x.size(0)
    if sc.kind == "sm90":
        deep_gemm.mega_moe_pre_dispatch_sm90(x, ti, tw, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights,
                                             num_tokens=n)
    elif sc.kind == "fp8fp4":
        deep_gemm.mega_moe_pre_dispatch(x, ti, tw, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, n)
    else:
        buf.x[:n].copy_(x)
        buf.topk_idx[:n].copy_(ti)
        buf.topk_idx[n:].fill_(-1)
        buf.topk_weights[:n].copy_(tw)


def run_layer(sc: Scenario, data: Global, buf, rank: int, stats: torch.Tensor) -> torch.Tensor:
    l1, l2 = local_weights(sc, data, rank)
    n = data.x[rank].size(0)
    rows = n if sc.y_rows is None else sc.y_rows
    y = torch.full((rows, sc.hidden), 7.0, dtype=torch.bfloat16)
    kwargs = dict(cumulative_local_expert_recv_stats=stats, activation_clamp=sc.clamp, fast_math=sc.fast_math)
    if sc.kind == "sm90":
        deep_gemm.fp8_mega_moe(y, l1, l2, buf, **kwargs)
        return y
    if sc.shared:
        s1, s2 = data.shared
        if sc.kind == "fp8fp4":
            s1, s2 = deep_gemm.transform_weights_for_mega_moe(s1, s2)
        else:
            s1, s2 = deep_gemm.transform_weights_for_mega_moe(s1, s2)
        kwargs.update(shared_l1_weights=s1, shared_l2_weights=s2)
    if sc.post_norm:
        kwargs.update(post_expert_norm=True, post_expert_norm_weight=data.norm_weight,
                      post_expert_norm_weight_first=sc.post_norm == "weight_first")
    fn = deep_gemm.fp8_fp4_mega_moe if sc.kind == "fp8fp4" else deep_gemm.bf16_mega_moe
    fn(y, l1, l2, buf, **kwargs)
    return y


def run_kernels_and_reference(sc: Scenario, op_args, block_m: Optional[int] = None,
                              stats_start: Optional[torch.Tensor] = None, calls: int = 1, ring: Optional[int] = None):
    """A one-rank ``fp8fp4`` or ``bf16`` scenario on its Triton kernels (the op's check, then its launcher with
    ``MegaOverrides(block_m, kernels=True)``, in Triton's interpreter) and on its reference, each ``calls`` times on
    one filled buffer; ``op_args`` builds the op's flat arguments (``*_mega_moe_op_args``). Returns (kernel y,
    reference y, kernel stats, reference stats, the buffer's bytes after the kernels, the buffer, (l1, l2))."""
    from deep_gemm.core.registry import kernels_of
    from deep_gemm.mega.plan import MegaOverrides
    from triton_harness import DEVICE, triton_launcher

    op = {"fp8fp4": "fp8_fp4_mega_moe", "bf16": "bf16_mega_moe"}[sc.kind]
    data = build_global(sc)
    buf = make_buffer(sc, None, ring)
    fill_buffer(sc, data, buf, 0)
    l1, l2 = local_weights(sc, data, 0)
    extra = {}
    if sc.shared:
        s1, s2 = deep_gemm.transform_weights_for_mega_moe(*data.shared)
        extra = dict(shared_l1_weights=s1, shared_l2_weights=s2)
    results, after = [], None
    for use_kernel in (True, False):
        stats = None if stats_start is None else stats_start.clone()
        y = torch.full((data.x[0].size(0), sc.hidden), 7.0, dtype=torch.bfloat16)
        for _ in range(calls):
            args = op_args(y, l1, l2, buf, cumulative_local_expert_recv_stats=stats, activation_clamp=sc.clamp,
                           fast_math=sc.fast_math, **extra)
            if not use_kernel:
                getattr(torch.ops.deep_gemm, op)(*args)
                continue
            dev = tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args)
            kernels_of(op).check(*dev)
            assert triton_launcher(op)(*dev, overrides=MegaOverrides(block_m, kernels=True)) is None
            at = {id(a): i for i, a in enumerate(args)}  # (the device copies of y, stats and the buffer)
            y, after = dev[at[id(y)]].cpu(), dev[at[id(buf.buffer)]].cpu()
            stats = None if stats is None else dev[at[id(stats)]].cpu()
        results.append((y, stats))
    (yk, sk), (yr, sr) = results
    return yk, yr, sk, sr, after, buf, (l1, l2)


def assert_layer_agrees(yk, yr, sk, sr, tolerance: float) -> None:
    """Kernel results (y, statistics or None) against the reference's: finite; exact zeros where the reference's
    y is all zero (no tokens, or every slot masked), else within ``tolerance`` (calc_diff); equal statistics."""
    from deep_gemm.testing import calc_diff
    assert torch.isfinite(yk.float()).all()
    if yr.numel() == 0 or yr.float().abs().sum() == 0:
        assert not yk.any()
    else:
        assert calc_diff(yk, yr) < tolerance
    if sk is not None:
        assert torch.equal(sk, sr)


def ring_views_after(sc: Scenario, buf, buffer_after: torch.Tensor, pool_rows: int = 0) -> dict:
    """The one-rank ring kernels' view (``buffer.ring_kernel_views``) of a buffer's bytes after a call, the pool
    arrays sized for ``pool_rows`` rows."""
    from deep_gemm.mega import buffer as mega_buffer
    mma = "fp8xfp4" if sc.kind == "fp8fp4" else "bf16xbf16"
    plan = mega_buffer.plan_symm_buffer(1, sc.num_experts, CAPACITY, sc.topk, sc.hidden, sc.inter, mma, "swiglu",
                                        buf.num_ring_tokens)
    return mega_buffer.ring_kernel_views(buffer_after, plan, sc.num_experts, CAPACITY, sc.topk, pool_rows)


# ---- the independent expectation -----------------------------------------------------------------------------

def dispatched_tokens(sc: Scenario, buf, n: int) -> torch.Tensor:
    """The rank's tokens as the buffer holds them, float64."""
    if sc.kind == "sm90":
        return buf.x[:n].double() * buf.x_sf[:n].double().repeat_interleave(128, dim=1)
    if sc.kind == "fp8fp4":
        return buf.x[:n].double() * unpack_ue8m0_from_int(buf.x_sf[:n]).double().repeat_interleave(32, dim=1)
    return buf.x[:n].double()


def _ffn(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, clamp: Optional[float]) -> torch.Tensor:
    h = w1 @ x
    inter = h.numel() // 2
    gate, up = h[:inter], h[inter:]
    if clamp is not None:
        gate = torch.clamp(gate, max=clamp)
        up = torch.clamp(up, min=-clamp, max=clamp)
    return w2 @ (gate * torch.sigmoid(gate) * up)


def expected_output(sc: Scenario, data: Global, tokens: torch.Tensor, rank: int) -> torch.Tensor:
    n = data.x[rank].size(0)
    rows = n if sc.y_rows is None else sc.y_rows
    out = torch.zeros(rows, sc.hidden, dtype=torch.float64)
    ti, tw = data.topk_idx[rank], data.topk_weights[rank]
    w = None if data.norm_weight is None else data.norm_weight.double()
    for t in range(n):
        acc = torch.zeros(sc.hidden, dtype=torch.float64)
        for s in range(sc.topk):
            e = int(ti[t, s])
            if e < 0:
                continue
            o = _ffn(tokens[t], data.w1[e], data.w2[e], sc.clamp)
            if sc.post_norm:
                v = o * w if sc.post_norm == "weight_first" else o
                o = o / torch.sqrt((v * v).mean() + 1e-6)
                if w is not None:
                    o = o * w
            acc += float(tw[t, s]) * o
        if data.shared_w is not None:
            acc += _ffn(tokens[t], data.shared_w[0], data.shared_w[1], sc.clamp)
        out[t] = acc
    return out


def expected_received(sc: Scenario, data: Global, rank: int) -> torch.Tensor:
    local = sc.num_experts // sc.num_ranks
    counts = torch.zeros(local, dtype=torch.int32)
    for ti in data.topk_idx:
        for j in range(local):
            counts[j] += int((ti == rank * local + j).sum())
    return counts


def run_and_expect(sc: Scenario, group, rank: int):
    """(y, stats after, expected y float64, expected stats) for this rank."""
    data = build_global(sc)
    buf = make_buffer(sc, group)
    fill_buffer(sc, data, buf, rank)
    local = sc.num_experts // sc.num_ranks
    start = torch.arange(local, dtype=torch.int32) * 3 + 11
    stats = start.clone()
    y = run_layer(sc, data, buf, rank, stats)
    tokens = dispatched_tokens(sc, buf, data.x[rank].size(0))
    expected = expected_output(sc, data, tokens, rank)
    buf.destroy()
    return y, stats, expected, start + expected_received(sc, data, rank)


# ---- processes -------------------------------------------------------------------------------------------------

def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(worker, args: tuple, world: int, deadline_s: float) -> bool:
    """Run ``worker(rank, *args)`` in ``world`` spawned processes; False (after terminating them) when they have not
    all finished within ``deadline_s`` seconds, so a rank that hangs fails its test instead of stalling the suite.
    A rank's exception is raised here."""
    import time

    import torch.multiprocessing as mp
    ctx = mp.start_processes(worker, args=args, nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + deadline_s
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            return False
    return True


def assert_graph_replay_matches_eager(step, out: torch.Tensor, statics, fresh) -> None:
    """CUDA-graph capture of a Mega MoE step: ``step()`` runs once on a side stream (its first-call compiles stay
    outside the capture), is captured, the ``fresh`` inputs are copied into the ``statics`` it reads, the graph is
    replayed, and its ``out`` must equal, bit for bit, an eager ``step()`` on the same inputs."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for static, new in zip(statics, fresh):
        static.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    replayed = out.clone()
    step()
    torch.cuda.synchronize()
    assert torch.equal(replayed, out)


@dataclass(frozen=True)
class GpuCase:
    """A one-rank layer of the Mega MoE GPU test files: sizes, routing (``masked``: the share of -1 slots; ``idle``:
    experts nobody routes to) and the layer's options."""
    tokens: int
    experts: int = 16
    hidden: int = 512
    inter: int = 512
    topk: int = 4
    masked: float = 0.0
    clamp: Optional[float] = None
    fast_math: bool = True
    idle: bool = False
    block_m: Optional[int] = None

    def _options(self) -> str:
        return ""

    def __str__(self):
        return (f"t{self.tokens}-e{self.experts}-h{self.hidden}-i{self.inter}-k{self.topk}-m{self.masked}-"
                f"c{self.clamp}-{'fast' if self.fast_math else 'exact'}{'-idle' if self.idle else ''}"
                f"{f'-bm{self.block_m}' if self.block_m else ''}{self._options()}")


@dataclass(frozen=True)
class RingCase(GpuCase):
    """A layer of the ring-buffer layers (BF16, FP8 x FP4): the ring's size and the shared experts besides."""
    ring: Optional[int] = None  # None: the largest ring; else the ring size in tokens
    shared: int = 0  # shared experts (their intermediate: shared x inter)

    def _options(self) -> str:
        return f"{f'-ring{self.ring}' if self.ring else ''}{f'-shared{self.shared}' if self.shared else ''}"


def assert_calls_repeat_bitwise(run, tokens: int, hidden: int, calls: int = 3) -> None:
    """``run(y)`` (one layer call writing y) gives the same bits every call: the workspace is left as found and
    where a row lands in the pools does not change the result."""
    ys = []
    for _ in range(calls):
        y = torch.empty(tokens, hidden, dtype=torch.bfloat16, device="cuda")
        run(y)
        ys.append(y)
    assert all(torch.equal(ys[0], y) for y in ys[1:])


def assert_public_call_agrees(run_kernels, run_public, tokens: int, hidden: int, tolerance: float) -> None:
    """The public call (the reference while a family's kernels are opt-in, the kernels after) agrees with the
    kernels on the same layer (each writing its own y)."""
    from deep_gemm.testing import calc_diff
    y_k = torch.empty(tokens, hidden, dtype=torch.bfloat16, device="cuda")
    y_p = torch.empty_like(y_k)
    run_kernels(y_k)
    run_public(y_p)
    torch.cuda.synchronize()
    assert calc_diff(y_k, y_p) < tolerance
