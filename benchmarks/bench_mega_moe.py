"""The SM90 FP8 Mega MoE layer at world size 1: the fused layer (``fp8_mega_moe``) against two unfused pipelines
built from this package's own ops, at the DeepSeek shapes, tokens per rank 8..8192; with ``--bf16`` the BF16 layer
(``bf16_mega_moe`` on its Triton kernels) against the unfused BF16 ``contiguous`` pipeline; with ``--fp8-fp4`` the
FP8 x FP4 layer (``fp8_fp4_mega_moe`` with FP4 weights on its Triton kernels) against its torch reference on CUDA,
which is what the op runs without the kernels (the package has no unfused FP8 x FP4 MoE pipeline), so the ratio says
what the kernels buy over today's CUDA path, not how close they come to a tuned pipeline.

    PYTHONPATH=$PWD python benchmarks/bench_mega_moe.py --out $OUT/ours [--shapes small] [--tokens 8,256]
                                                          [--bf16 | --fp8-fp4]

Every variant starts from the same pre-dispatched FP8 tokens (``mega_moe_pre_dispatch_sm90``'s buffer rows) and
ends with BF16 ``y``; the pre-dispatch itself is not timed. The unfused pipelines (what an engine without the fused
layer runs at one rank; no all-to-all is needed there):

* ``contiguous``: sort the slots by expert on the GPU, read the per-expert counts on the host (one sync), gather the
  rows into 128-row-aligned expert segments, ``m_grouped_fp8_gemm_nt_contiguous`` (L1, ``[gate | up]`` weights),
  SwiGLU x top-k weight in torch, ``per_token_cast_to_fp8``, ``m_grouped_fp8_gemm_nt_contiguous`` (L2), and
  ``index_add_`` into the tokens;
* ``masked`` (up to 1024 tokens): no host sync; the slots scattered into ``[E, T, H]`` expert slabs,
  ``m_grouped_fp8_gemm_nt_masked`` for both GEMMs, SwiGLU and quantisation on the gathered valid rows only.

``us``: kernel time per call (L2 flushed, harness.KernelTimer: the sum of the call's kernel times, host gaps
excluded); ``call_us``: wall time per call in a loop of calls (host time and the contiguous pipeline's sync
included). ``vs_unfused``: the faster unfused pipeline's time / the fused layer's time, per timer (``--bf16``:
``vs_contiguous``; ``--fp8-fp4``: ``vs_reference``, the same ratio against that one baseline).

``floor_us``: the weight floor, the bytes of the experts the routing reaches (weights and scales of L1 and L2, each
read once by every variant) over HBM's read bandwidth measured in the same run (a large device reduction, L2
flushed). At few tokens both the fused layer and the unfused pipelines are bound by it, so ``unfused / floor`` is
the most any fused layer could gain over them there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, calc_diff, write_results  # noqa: E402

SHAPES = {"v3": (4096, 2048, 256, 6), "v3-671b": (7168, 3072, 384, 6), "small": (2048, 1024, 64, 6)}
TOKENS = (8, 32, 128, 256, 1024, 4096, 8192)
MASKED_MAX_TOKENS = 1024
INTERLEAVE_ROWS = 8  # transform_weights_for_mega_moe's gate/up chunks


def swiglu(h: torch.Tensor, inter: int, weights: torch.Tensor, clamp) -> torch.Tensor:
    gate, up = h[:, :inter].float(), h[:, inter:].float()
    if clamp is not None:
        gate, up = gate.clamp(max=clamp), up.clamp(-clamp, clamp)
    return torch.nn.functional.silu(gate) * up * weights[:, None]


def sorted_slots(idx: torch.Tensor, num_experts: int):
    """(order of the slots by expert with masked slots last, their experts, their rank within their expert, number
    of valid slots as a device scalar, counts per expert)."""
    flat = idx.flatten()
    keyed = torch.where(flat >= 0, flat, num_experts)
    order = torch.argsort(keyed, stable=True)
    experts = keyed[order]
    counts = torch.bincount(keyed, minlength=num_experts + 1)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(flat.numel(), device=idx.device) - starts[experts]
    return order, experts, rank, counts


def unfused_contiguous(buf, n, l1_raw, l2, weights, y, clamp, num_experts, num_topk, inter):
    import deep_gemm
    from deep_gemm.utils import per_token_cast_to_fp8
    idx = buf.topk_idx[:n]
    order, experts, rank, counts = sorted_slots(idx, num_experts)
    counts_host = counts[:num_experts].tolist()  # the contiguous layout's sizes: one host sync
    valid = sum(counts_host)
    padded = [-(-c // 128) * 128 for c in counts_host]
    seg = torch.tensor([0] + padded[:-1], device=idx.device).cumsum(0)
    order, experts, rank = order[:valid], experts[:valid], rank[:valid]
    rows = seg[experts] + rank
    tokens = order // num_topk
    m = max(sum(padded), 128)
    hidden = y.size(1)
    a = torch.zeros(m, hidden, dtype=torch.float8_e4m3fn, device=y.device)
    a_sf = torch.ones(m, hidden // 128, device=y.device)
    a[rows] = buf.x[tokens]
    a_sf[rows] = buf.x_sf[tokens]
    ids = torch.full((m,), -1, dtype=torch.int32, device=y.device)
    ids[rows] = experts.int()
    h = torch.empty(m, 2 * inter, dtype=torch.bfloat16, device=y.device)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a, a_sf), l1_raw, h, ids)
    act = swiglu(h[rows], inter, buf.topk_weights[:n].flatten()[order], clamp)
    q = torch.zeros(m, inter, dtype=torch.float8_e4m3fn, device=y.device)
    q_sf = torch.ones(m, inter // 128, device=y.device)
    q[rows], q_sf[rows] = per_token_cast_to_fp8(act, use_ue8m0=False)
    o = torch.empty(m, hidden, dtype=torch.bfloat16, device=y.device)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((q, q_sf), l2, o, ids)
    out = torch.zeros(n, hidden, device=y.device).index_add_(0, tokens, o[rows].float())
    y.copy_(out)


def unfused_contiguous_bf16(buf, n, l1, l2, y, clamp, num_experts, num_topk, inter):
    """The ``contiguous`` pipeline in BF16: the same sort and gather, ``m_grouped_bf16_gemm_nt_contiguous`` for both
    GEMMs (L1 on the layer's interleaved rows, whose output columns are put back in ``[gate | up]`` order), the
    intermediate rounded to BF16."""
    import deep_gemm
    idx = buf.topk_idx[:n]
    order, experts, rank, counts = sorted_slots(idx, num_experts)
    counts_host = counts[:num_experts].tolist()  # one host sync
    valid = sum(counts_host)
    padded = [-(-c // 128) * 128 for c in counts_host]
    seg = torch.tensor([0] + padded[:-1], device=idx.device).cumsum(0)
    order, experts, rank = order[:valid], experts[:valid], rank[:valid]
    rows = seg[experts] + rank
    tokens = order // num_topk
    m = max(sum(padded), 128)
    hidden = y.size(1)
    a = torch.zeros(m, hidden, dtype=torch.bfloat16, device=y.device)
    a[rows] = buf.x[tokens]
    ids = torch.full((m,), -1, dtype=torch.int32, device=y.device)
    ids[rows] = experts.int()
    h = torch.empty(m, 2 * inter, dtype=torch.bfloat16, device=y.device)
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, l1, h, ids)
    chunks = h[rows].view(-1, inter // INTERLEAVE_ROWS, 2, INTERLEAVE_ROWS)
    gate_up = torch.cat([chunks[:, :, 0].reshape(-1, inter), chunks[:, :, 1].reshape(-1, inter)], dim=1)
    q = torch.zeros(m, inter, dtype=torch.bfloat16, device=y.device)
    q[rows] = swiglu(gate_up, inter, buf.topk_weights[:n].flatten()[order], clamp).bfloat16()
    o = torch.empty(m, hidden, dtype=torch.bfloat16, device=y.device)
    deep_gemm.m_grouped_bf16_gemm_nt_contiguous(q, l2, o, ids)
    out = torch.zeros(n, hidden, device=y.device).index_add_(0, tokens, o[rows].float())
    y.copy_(out)


def unfused_masked(buf, n, l1_raw, l2, weights, y, clamp, num_experts, num_topk, inter):
    import deep_gemm
    from deep_gemm.utils import per_token_cast_to_fp8
    idx = buf.topk_idx[:n]
    order, experts, rank, counts = sorted_slots(idx, num_experts)
    max_m = max(-(-n // 64) * 64, 64)
    hidden = y.size(1)
    # Masked slots sort last with expert id E: all of them land in row 0 of a spare slab that no GEMM reads.
    valid = experts < num_experts
    spare_rank = torch.where(valid, rank, 0)
    a = torch.zeros(num_experts + 1, max_m, hidden, dtype=torch.float8_e4m3fn, device=y.device)
    a_sf = torch.ones(num_experts + 1, max_m, hidden // 128, device=y.device)
    tokens = order // num_topk
    a[experts, spare_rank] = buf.x[tokens]
    a_sf[experts, spare_rank] = buf.x_sf[tokens]
    masked_m = counts[:num_experts].int()
    expected = max(-(-n * num_topk // num_experts), 1)
    h = torch.empty(num_experts, max_m, 2 * inter, dtype=torch.bfloat16, device=y.device)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((a[:num_experts], a_sf[:num_experts]), l1_raw, h, masked_m, expected)
    e_v, r_v = torch.where(valid, experts, 0), spare_rank
    act = swiglu(h[e_v, r_v], inter, buf.topk_weights[:n].flatten()[order], clamp) * valid[:, None]
    q = torch.zeros(num_experts + 1, max_m, inter, dtype=torch.float8_e4m3fn, device=y.device)
    q_sf = torch.ones(num_experts + 1, max_m, inter // 128, device=y.device)
    q[experts, r_v], q_sf[experts, r_v] = per_token_cast_to_fp8(act, use_ue8m0=False)
    o = torch.empty(num_experts, max_m, hidden, dtype=torch.bfloat16, device=y.device)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((q[:num_experts], q_sf[:num_experts]), l2, o, masked_m, expected)
    out = torch.zeros(n, hidden, device=y.device).index_add_(0, tokens, o[e_v, r_v].float() * valid[:, None])
    y.copy_(out)


def hbm_read_bytes_per_s(timer, gib: int = 2) -> float:
    """HBM's read bandwidth as a reduction over ``gib`` GiB sees it (kernel time, L2 flushed)."""
    x = torch.ones(gib << 28, dtype=torch.float32, device="cuda")
    us = timer(x.sum)
    return (gib << 30) / (us * 1e-6)


def nbytes(obj) -> int:
    """The bytes of a tensor or of the tensors in a (nested) tuple or list."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    return sum(nbytes(o) for o in obj)


def weight_floor_us(idx: torch.Tensor, num_experts: int, weights, bytes_per_s: float) -> float:
    """The weight floor of a call (see the module's docstring): the experts ``idx`` reaches times each one's share
    of ``weights`` (L1 and L2, scales included), over ``bytes_per_s``."""
    reached = int(torch.unique(idx[idx >= 0]).numel())
    return reached * nbytes(weights) / num_experts / bytes_per_s * 1e6


def wall_us(fn, iters: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def run_shape(name, tokens_list, timer, bytes_per_s, clamp=10.0):
    import deep_gemm
    from deep_gemm.testing.mega_moe import routing, run_fp8_mega_moe_kernels, sm90_weights
    hidden, inter, num_experts, num_topk = SHAPES[name]
    l1_raw, l2 = sm90_weights(num_experts, hidden, inter, "cuda")
    l1, l2 = deep_gemm.transform_weights_for_mega_moe_sm90(l1_raw, l2)
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, num_experts, max(tokens_list), num_topk, hidden, inter)
    results = []
    for n in tokens_list:
        x, idx, w = routing(n, num_experts, num_topk, "cuda", hidden=hidden, seed=n)
        deep_gemm.mega_moe_pre_dispatch_sm90(x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights,
                                             num_tokens=n)
        ys = {}
        variants = {"fused": lambda y: run_fp8_mega_moe_kernels(y, l1, l2, buf, activation_clamp=clamp),
                    "contiguous": lambda y: unfused_contiguous(buf, n, l1_raw, l2, w, y, clamp, num_experts,
                                                               num_topk, inter)}
        if n <= MASKED_MAX_TOKENS:
            variants["masked"] = lambda y: unfused_masked(buf, n, l1_raw, l2, w, y, clamp, num_experts, num_topk,
                                                          inter)
        times = {}
        for variant, fn in variants.items():
            y = torch.empty(n, hidden, dtype=torch.bfloat16, device="cuda")
            times[variant] = (timer(lambda: fn(y)), wall_us(lambda: fn(y)))
            ys[variant] = y
        diff = max(calc_diff(ys["fused"], ys[v]) for v in ys if v != "fused")
        floor = weight_floor_us(idx, num_experts, (l1, l2), bytes_per_s)
        best_k = min(t[0] for v, t in times.items() if v != "fused")
        best_w = min(t[1] for v, t in times.items() if v != "fused")
        fused_k, fused_w = times["fused"]
        for variant, (us, call_us) in times.items():
            row = dict(table="mega_moe", shape=name, tokens=n, variant=variant, us=us, call_us=call_us, diff=diff,
                       floor_us=floor)
            if variant == "fused":
                row["note"] = f"vs_unfused kernel {best_k / us:.2f}x, wall {best_w / call_us:.2f}x"
            results.append(row)
        print(f" > {name} T={n:5}: fused {fused_k:8.1f} us ({fused_w:8.1f} wall) | "
              + " | ".join(f"{v} {t[0]:8.1f} ({t[1]:8.1f})" for v, t in times.items() if v != "fused")
              + f" | vs unfused {best_k / fused_k:.2f}x kernel, {best_w / fused_w:.2f}x wall | floor {floor:.1f} us"
              f" (fused {fused_k / floor:.2f}x, unfused {best_k / floor:.2f}x of it) | diff {diff:.1e}",
              flush=True)
    return results


def run_shape_bf16(name, tokens_list, timer, bytes_per_s, clamp=10.0):
    from deep_gemm.testing.mega_moe import bf16_buffer, bf16_weights, routing, run_bf16_mega_moe_kernels
    import deep_gemm
    hidden, inter, num_experts, num_topk = SHAPES[name]
    l1, l2 = bf16_weights(num_experts, hidden, inter, "cuda")
    for e in range(num_experts):  # interleaved in place, one expert at a time (no second copy of all of L1)
        l1[e] = deep_gemm.transform_weights_for_mega_moe(l1[e:e + 1], l2[e:e + 1])[0][0]
    buf = bf16_buffer(num_experts, max(tokens_list), num_topk, hidden, inter, "cuda")
    results = []
    for n in tokens_list:
        x, idx, w = routing(n, num_experts, num_topk, "cuda", hidden=hidden, seed=n)
        buf.x[:n].copy_(x)
        buf.topk_idx[:n].copy_(idx)
        buf.topk_idx[n:].fill_(-1)
        buf.topk_weights[:n].copy_(w)
        results += time_pair(timer, "bf16", name, n, hidden, "contiguous",
                             weight_floor_us(idx, num_experts, (l1, l2), bytes_per_s),
                             lambda y: run_bf16_mega_moe_kernels(y, l1, l2, buf, activation_clamp=clamp),
                             lambda y: unfused_contiguous_bf16(buf, n, l1, l2, y, clamp, num_experts, num_topk,
                                                               inter))
    return results


def time_pair(timer, layer, name, n, hidden, other, floor, fused, baseline) -> list:
    """The rows of one (shape, tokens) of a layer: its fused kernels (``fused_<layer>``) and one baseline
    (``<other>_<layer>``), each timed on its own ``y``; the fused row notes the ratio and one line is printed.
    ``floor``: the call's weight floor in us (weight_floor_us)."""
    times, ys = {}, {}
    variants = {f"fused_{layer}": fused, f"{other}_{layer}": baseline}
    for variant, fn in variants.items():
        y = torch.empty(n, hidden, dtype=torch.bfloat16, device="cuda")
        times[variant] = (timer(lambda: fn(y)), wall_us(lambda: fn(y)))
        ys[variant] = y
    diff = calc_diff(*ys.values())
    (fk, fw), (uk, uw) = times.values()
    rows = []
    for variant, (us, call_us) in times.items():
        row = dict(table=f"mega_moe_{layer}", shape=name, tokens=n, variant=variant, us=us, call_us=call_us,
                   diff=diff, floor_us=floor)
        if variant == f"fused_{layer}":
            row["note"] = f"vs_{other} kernel {uk / us:.2f}x, wall {uw / call_us:.2f}x"
        rows.append(row)
    print(f" > {layer} {name} T={n:5}: fused {fk:8.1f} us ({fw:8.1f} wall) | {other} {uk:8.1f} ({uw:8.1f}) | "
          f"vs {other} {uk / fk:.2f}x kernel, {uw / fw:.2f}x wall | floor {floor:.1f} us (fused {fk / floor:.2f}x, "
          f"{other} {uk / floor:.2f}x of it) | diff {diff:.1e}", flush=True)
    return rows


def run_shape_fp8_fp4(name, tokens_list, timer, bytes_per_s, clamp=10.0):
    """``fp8_fp4_mega_moe`` with FP4 weights on its Triton kernels against its reference on CUDA (what the op runs
    without them: the package has no unfused FP8 x FP4 MoE pipeline to compare with)."""
    from deep_gemm.mega import layer as mega_layer
    from deep_gemm.mega.api import fp8_fp4_mega_moe_op_args
    from deep_gemm.testing.mega_moe import fp8_fp4_buffer, fp8_fp4_weights, routing, run_fp8_fp4_mega_moe_kernels
    import deep_gemm
    hidden, inter, num_experts, num_topk = SHAPES[name]
    l1, l2 = deep_gemm.transform_weights_for_mega_moe(*fp8_fp4_weights(num_experts, hidden, inter, "cuda"))
    buf = fp8_fp4_buffer(num_experts, max(tokens_list), num_topk, hidden, inter, "cuda")
    results = []
    for n in tokens_list:
        x, idx, w = routing(n, num_experts, num_topk, "cuda", hidden=hidden, seed=n)
        deep_gemm.mega_moe_pre_dispatch(x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, n)
        results += time_pair(timer, "fp8_fp4", name, n, hidden, "reference",
                             weight_floor_us(idx, num_experts, (l1, l2), bytes_per_s),
                             lambda y: run_fp8_fp4_mega_moe_kernels(y, l1, l2, buf, activation_clamp=clamp),
                             lambda y: mega_layer.fp8_fp4_mega_moe(
                                 *fp8_fp4_mega_moe_op_args(y, l1, l2, buf, activation_clamp=clamp)))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench_out")
    parser.add_argument("--shapes", default="v3,v3-671b")
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    parser.add_argument("--reps", type=int, default=10)
    layers = parser.add_mutually_exclusive_group()
    layers.add_argument("--bf16", action="store_true", help="the BF16 layer (bf16_mega_moe) instead of the FP8 one")
    layers.add_argument("--fp8-fp4", action="store_true",
                        help="the FP8 x FP4 layer (fp8_fp4_mega_moe) against its reference on CUDA")
    args = parser.parse_args()
    timer = KernelTimer(args.reps)
    tokens = [int(t) for t in args.tokens.split(",")]
    run, stem = ((run_shape_bf16, "bench_mega_moe_bf16") if args.bf16 else
                 (run_shape_fp8_fp4, "bench_mega_moe_fp8_fp4") if args.fp8_fp4 else (run_shape, "bench_mega_moe"))
    bytes_per_s = hbm_read_bytes_per_s(timer)
    print(f" > HBM read bandwidth {bytes_per_s / 1e12:.2f} TB/s", flush=True)
    results = []
    for name in args.shapes.split(","):
        results += run(name, tokens, timer, bytes_per_s)
        torch.cuda.empty_cache()  # (the shape's weights went with run_shape's frame)
    write_results(args.out, stem, results, dict(world_size=1, hbm_read_bytes_per_s=bytes_per_s))


if __name__ == "__main__":
    main()
