"""GPU soak: every op family called from several threads on two streams for a while, with random shapes (odd and
zero sizes included), each call's CUDA result compared with the same call on CPU copies of its inputs (the CPU
kernels are the torch references). Prints one line per family (calls, failures, worst difference) and exits 1 on
any failure or exception.

    PYTHONPATH=$PWD python scripts/gpu/soak.py [--seconds 120] [--threads 8]
    compute-sanitizer --tool memcheck python scripts/gpu/soak.py --seconds 20 --threads 2   # a shorter run

Every thread draws a family and a shape from its own seeded generator, builds the inputs on the GPU, runs the call
on its stream (thread i on stream i % 2), waits for that stream, and checks the result against the CPU call: GEMMs by
calc_diff, the scale-layout ops bit for bit. First calls compile concurrently (the launch path's first-compile
locking is part of what is soaked).
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import traceback

import torch

import deep_gemm
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn
GEMM_TOL = 1e-4   # same FP8 / BF16 inputs on both sides: FP32 summation order only
DEV = "cuda"      # --device cpu: a dry run of the plumbing (both sides then run the CPU kernels)


def _cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, tuple):
        return tuple(_cpu(v) for v in x)
    return x


def _fp8_rows(m, k):
    return per_token_cast_to_fp8(torch.randn(m, k, device=DEV), use_ue8m0=False)


def _fp8_blocks(n, k):
    return per_block_cast_to_fp8(torch.randn(n, k, device=DEV), use_ue8m0=False)


# Each case: (function, its arguments with CUDA tensors, index of the written argument or None for a returned
# tensor, "bitwise" or a calc_diff tolerance).

def fp8_dense(r):
    m, n, k = r.choice([0, 1, 7, 64, 129, 300]), r.choice([64, 128, 200, 512]), r.choice([128, 384, 1024])
    d = torch.empty(m, n, dtype=BF16, device=DEV)
    return deep_gemm.fp8_gemm_nt, (_fp8_rows(m, k), _fp8_blocks(n, k), d), 2, GEMM_TOL


def fp8_contiguous(r):
    g, n, k = r.randint(1, 4), r.choice([128, 256]), r.choice([128, 512])
    rows = [r.choice([0, 1, 60, 128, 200]) for _ in range(g)]
    ids = torch.cat([torch.full((-(-x // 128) * 128,), e, dtype=torch.int32) for e, x in enumerate(rows)]
                    + [torch.zeros(0, dtype=torch.int32)])
    for e, x in enumerate(rows):  # padding rows of each segment: -1
        start = sum(-(-y // 128) * 128 for y in rows[:e])
        ids[start + x:start + -(-x // 128) * 128] = -1
    m = ids.numel()
    b = [_fp8_blocks(n, k) for _ in range(g)]
    bq = (torch.stack([t[0] for t in b]), torch.stack([t[1] for t in b]))
    d = torch.empty(m, n, dtype=BF16, device=DEV)
    return deep_gemm.m_grouped_fp8_gemm_nt_contiguous, (_fp8_rows(m, k), bq, d, ids.to(DEV)), 2, GEMM_TOL


def fp8_masked(r):
    g, max_m, n, k = r.randint(1, 4), r.choice([8, 64, 128]), r.choice([128, 256]), r.choice([128, 512])
    a = _fp8_rows(g * max_m, k)
    a = (a[0].view(g, max_m, k), a[1].view(g, max_m, -1))
    b = [_fp8_blocks(n, k) for _ in range(g)]
    bq = (torch.stack([t[0] for t in b]), torch.stack([t[1] for t in b]))
    masked = torch.tensor([r.randint(0, max_m) for _ in range(g)], dtype=torch.int32, device=DEV)
    d = torch.zeros(g, max_m, n, dtype=BF16, device=DEV)
    return deep_gemm.m_grouped_fp8_gemm_nt_masked, (a, bq, d, masked, max(1, max_m // 2)), 2, GEMM_TOL


def bf16_dense(r):
    m, n, k = r.choice([0, 1, 5, 64, 130]), r.choice([64, 136, 256]), r.choice([64, 200, 512])
    a, b = torch.randn(m, k, device=DEV).to(BF16), torch.randn(n, k, device=DEV).to(BF16)
    d = torch.empty(m, n, dtype=BF16, device=DEV)
    return deep_gemm.bf16_gemm_nt, (a, b, d), 2, GEMM_TOL


def bf16_k_grouped(r):
    ks = [r.choice([0, 64, 128, 192]) for _ in range(r.randint(1, 3))]
    m, n = r.choice([64, 128]), r.choice([64, 128])
    a = torch.randn(sum(ks), m, device=DEV).to(BF16)
    b = torch.randn(sum(ks), n, device=DEV).to(BF16)
    d = torch.zeros(len(ks), m, n, device=DEV)
    layout = torch.tensor(ks, dtype=torch.int32, device=DEV)
    return deep_gemm.k_grouped_bf16_gemm_tn_contiguous, (a, b, d, ks, layout), 2, GEMM_TOL


def einsum(r):
    bsz, h, rr, dd = r.choice([1, 7, 33]), r.choice([4, 16]), r.choice([64, 128]), r.choice([64, 192])
    a = torch.randn(bsz, h, rr, device=DEV).to(BF16)
    b = torch.randn(h, dd, rr, device=DEV).to(BF16)
    d = torch.empty(bsz, h, dd, dtype=BF16, device=DEV)
    return deep_gemm.einsum, ("bhr,hdr->bhd", a, b, d), 3, GEMM_TOL


def hc(r):
    m, k, splits = r.choice([0, 1, 13, 137]), r.choice([1024, 7168]), r.choice([None, 4, 16])
    lead = () if splits is None else (splits,)
    a, b = torch.randn(m, k, device=DEV).to(BF16), torch.randn(24, k, device=DEV)
    d, s = torch.empty(*lead, m, 24, device=DEV), torch.empty(*lead, m, device=DEV)
    return deep_gemm.tf32_hc_prenorm_gemm, (a, b, d, s, splits), 2, 1e-5  # (the CPU side rounds B to TF32 too)


def mqa(r):
    s, sk, h, dd = r.choice([1, 9, 64]), r.choice([1, 50, 300]), r.choice([16, 64]), r.choice([64, 128])
    q = torch.randn(s, h, dd, device=DEV).to(FP8)
    kv = (torch.randn(sk, dd, device=DEV).to(FP8), torch.rand(sk, device=DEV) + 0.25)
    w = torch.randn(s, h, device=DEV)
    ks = torch.randint(0, max(sk, 1), (s,), dtype=torch.int32, device=DEV)
    ke = torch.minimum(ks + torch.randint(0, sk + 1, (s,), dtype=torch.int32, device=DEV),
                       torch.tensor(sk, device=DEV)).to(torch.int32)
    return deep_gemm.fp8_mqa_logits, (q, kv, w, ks, ke, True), None, GEMM_TOL


def layout(r):
    mn, sfk = r.choice([1, 7, 128, 333]), r.choice([1, 3, 56])
    sf = torch.rand(mn, sfk, device=DEV) + 0.1
    return deep_gemm.get_mn_major_tma_aligned_tensor, (sf,), None, "bitwise"


def mega(r):
    from deep_gemm.testing.mega_moe import routing, run_fp8_mega_moe_kernels, sm90_weights
    e, hidden, inter, k = r.choice([4, 8]), r.choice([256, 512]), r.choice([128, 256]), r.choice([1, 2, 4])
    t = r.choice([0, 1, 17, 100])
    l1, l2 = deep_gemm.transform_weights_for_mega_moe_sm90(*sm90_weights(e, hidden, inter, DEV, r.randint(0, 99)))
    x, idx, w = routing(t, e, k, DEV, masked=r.choice([0.0, 0.3]), hidden=hidden, seed=r.randint(0, 99))
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, e, max(t, 1), k, hidden, inter, device=DEV)
    deep_gemm.mega_moe_pre_dispatch_sm90(x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, num_tokens=t)

    def call(y, l1, l2, buffer):
        # The buffer travels as its tensor; the CPU side wraps its copy in a CPU buffer of the same sizes.
        if buffer.device.type == "cpu":
            target = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, e, max(t, 1), k, hidden, inter,
                                                                 device="cpu")
            target.buffer.copy_(buffer)
            deep_gemm.fp8_mega_moe(y, l1, l2, target, activation_clamp=10.0)
            return
        run_fp8_mega_moe_kernels(y, l1, l2, buf, activation_clamp=10.0)  # (opt-in: deep_gemm/mega/plan.py)
    y = torch.empty(t, hidden, dtype=BF16, device=DEV)
    return call, (y, l1, l2, buf.buffer), 0, 2e-4


def mhc(r):
    from deep_gemm.testing.mega_mhc import make_inputs, make_outputs, op_args, run_kernels
    t, hidden, shifted = r.choice([0, 1, 17, 100]), r.choice([1024, 4096]), r.choice([False, True])
    d = make_inputs(t, hidden, shifted, seed=r.randint(0, 99), device=DEV)
    named = op_args(d, make_outputs(d, None))  # (BF16 y: the FP8 scales' strided views do not survive .cpu())
    names = list(named)

    def call(*values):
        args = dict(zip(names, values))
        if args["x"].device.type == "cpu":
            deep_gemm.mega_mhc(**args)
            return
        run_kernels(args, {})  # (opt-in: deep_gemm/mega_mhc/plan.py)
    return call, tuple(named.values()), names.index("y_bf16"), 1e-5


FAMILIES = {f.__name__: f for f in (fp8_dense, fp8_contiguous, fp8_masked, bf16_dense, bf16_k_grouped, einsum, hc,
                                    mqa, layout, mega, mhc)}


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.rows = {name: [0, 0, 0.0] for name in FAMILIES}
        self.errors: list[str] = []

    def add(self, name, ok, diff):
        with self.lock:
            row = self.rows[name]
            row[0] += 1
            row[1] += 0 if ok else 1
            row[2] = max(row[2], diff)


class _NoStream:
    """The CPU dry run's stand-in for a CUDA stream."""

    def synchronize(self):
        pass


def one_call(name, r, stream):
    fn, args, out_index, tol = FAMILIES[name](r)
    cpu_args = _cpu(args)
    if DEV == "cuda":
        with torch.cuda.stream(stream):
            result = fn(*args)
    else:
        result = fn(*args)
    stream.synchronize()
    want = fn(*cpu_args)
    got = args[out_index] if out_index is not None else result
    want = cpu_args[out_index] if out_index is not None else want
    if isinstance(got, tuple):  # (the HC op writes d and sqr_sum)
        got, want = got[0], want[0]
    got = got.cpu()
    if tol == "bitwise":
        ok = torch.equal(got, want)
        return ok, 0.0 if ok else 1.0
    if got.numel() == 0:
        return True, 0.0
    got_f, want_f = got.double(), want.double()
    if not torch.equal(torch.isinf(got_f), torch.isinf(want_f)):  # (-inf marks logits outside a window)
        return False, float("inf")
    finite = torch.isfinite(want_f)
    got_f, want_f = got_f[finite], want_f[finite]
    diff = calc_diff(got_f, want_f) if got_f.abs().sum() + want_f.abs().sum() > 0 else 0.0
    if name == "hc":  # sqr_sum too
        diff = max(diff, calc_diff(args[3].cpu(), cpu_args[3]))
    return diff < tol, float(diff)


def worker(index, deadline, streams, tally, only):
    r = random.Random(1000 + index)
    torch.manual_seed(1000 + index)
    names = only or list(FAMILIES)
    while time.monotonic() < deadline:
        name = r.choice(names)
        try:
            ok, diff = one_call(name, r, streams[index % len(streams)])
        except Exception:  # noqa: BLE001  (reported, counted as a failure)
            with tally.lock:
                tally.errors.append(f"{name}: {traceback.format_exc(limit=4)}")
            ok, diff = False, float("inf")
        tally.add(name, ok, diff)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--only", default="", help="comma-separated families")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the cases' plumbing")
    args = parser.parse_args()
    global DEV
    DEV = args.device
    only = [n for n in args.only.split(",") if n]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()] if DEV == "cuda" else [_NoStream(), _NoStream()]
    tally = Tally()
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=worker, args=(i, deadline, streams, tally, only)) for i in range(args.threads)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if DEV == "cuda":
        torch.cuda.synchronize()
    print(f"soak: {args.threads} threads, 2 streams, {time.monotonic() - start:.0f} s")
    failed = 0
    for name, (calls, failures, worst) in tally.rows.items():
        print(f"  {name:15} calls {calls:5}  failures {failures:3}  worst diff {worst:.2e}")
        failed += failures
    for e in tally.errors[:10]:
        print("ERROR", e)
    print("SOAK:", "FAIL" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
