"""The ops DeepGEMM 0.2.3 added, timed against a yardstick in the same process with the same timer (kernel time, L2
flushed before every call, median of reps). Upstream DeepGEMM has no Hopper kernel for the sparse ops, so their
yardstick is the best torch composition at hand, our torch reference on the GPU; the other tables time what the
new arguments cost against the call without them, or our path against the plain torch call:

    PYTHONPATH=$PWD python benchmarks/bench_new_ops.py [--out DIR] [--tables sparse,metadata,alpha,symmetric]

Rows: our time ``us``, the yardstick's ``yardstick_us`` (named in ``yardstick``), ``ratio`` = yardstick / ours
(above 1: ours is faster), and a check that both computed the same thing: ``diff`` (calc_diff over the entries
both must define) for float outputs, ``equal`` (bit for bit) for integer metadata.

* sparse: block-sparse MQA logits (DeepSeek V4 indexer, 32 heads of 128), ``fp8_fp4_sparse_mqa_logits`` at prefill
  sizes and ``fp8_fp4_paged_sparse_mqa_logits`` at decode sizes, FP8 and packed FP4, and both metadata builders,
  against the torch references (``deep_gemm/attention/sparse/reference.py``, what the ops run where the kernels
  decline) called on the GPU with the same arguments. The logits reference works in FP64 on [rows, columns, 128]
  gathers: it is the correctness yardstick, not a tuned composition, so a BF16 torch composition would sit closer.
  ``inf_match``: -inf (unused slots) in the same places.
* metadata: ``get_mqa_logits_metadata`` against its torch reference, and ``fp8_fp4_mqa_logits`` given that
  ``schedule_meta`` (ours) against the same call without it (yardstick). The schedule is checked, not read, so the
  kernel times should match; ``host_us`` / ``yardstick_host_us`` (one call on an idle GPU) show what passing it
  costs the host. ``diff`` / ``equal`` over the in-window logits (the rest is unspecified without clean_logits).
  ``fp8_mqa_logits`` has no ``schedule_meta`` argument, so it has no row here.
* alpha: ``fp8_gemm_nt`` / ``bf16_gemm_nt`` with ``alpha=0.5`` (ours) against ``alpha=None`` (yardstick): the
  ratio is what alpha costs (1: free); ``diff`` compares d with 0.5 x the plain product.
* symmetric: ``batched_syrk`` / ``batched_symm`` against the ``torch.bmm`` a user would write: the overhead of our
  path over the plain composition.

This package only: the yardsticks are its reference modules, and DeepGEMM has no Hopper kernel for the sparse ops.
"""

from __future__ import annotations

import argparse
import statistics
import time
import traceback
from functools import partial
from typing import Callable, NamedTuple

import torch

from bench_fp8_gemm import fp8_operands  # (first: it puts this repository's package on the path where needed)
import deep_gemm
from deep_gemm.attention.metadata.reference import get_mqa_logits_metadata_reference
from deep_gemm.attention.sparse import reference as sparse_ref
from deep_gemm.utils import align
from harness import KernelTimer, calc_diff, provider, write_results

# Module constants rather than arguments so that a CPU smoke run can swap in "cpu" and tiny shapes (the ops run
# their references on CPU tensors); the timer itself needs CUDA.
DEVICE = "cuda"
REPS = 10
FP8, FP4 = torch.float8_e4m3fn, torch.int8
HEADS, HEAD_DIM = 32, 128  # the only query shape the block-sparse ops take (attention/sparse/checks.py)
PAGE_KV = 64               # tokens per page of the paged cache (DeepSeek's indexer cache)
PAGE_ALIGN = 512           # bytes: the paged cache's page stride is a multiple of this (the op's check)

# (num_q, num_kv, num_max_sparse_blocks, sparse_block_kv): prefill over a compressed KV. The FP64 reference gathers
# num_q * num_max * block * 128 doubles: 16 GiB at the last row, which keeps its peak (~30 GiB) inside an H100.
SPARSE_PREFILL = [(2048, 8192, 256, 16), (4096, 32768, 128, 16), (2048, 32768, 512, 16)]
# (batch, next_n, average context, num_max_sparse_blocks, sparse_block_kv): decode over a paged cache, next_n rows
# per request (the op takes one query per row; rows of a request share its block table).
SPARSE_DECODE = [(64, 1, 32768, 512, 16), (128, 2, 16384, 512, 16), (128, 1, 8192, 128, 16)]
# (S, SK, H): prefill of the dense indexer logits (D = 128), causal windows.
MQA_PREFILL = [(2048, 8192, 64), (4096, 32768, 64)]
GEMM_M = (1, 128, 4096)
GEMM_NK = ((7168, 2048), (2112, 7168))
# (batch, M, K, dtype): syrk d = a a^T [batch, M, M]; (batch, M, N, dtype): symm d = a b, a symmetric [M, M].
SYRK = [(8, 1536, 5120, torch.bfloat16), (64, 512, 2048, torch.bfloat16), (8, 1024, 4096, torch.float32)]
SYMM = [(8, 1536, 5120, torch.bfloat16), (64, 512, 2048, torch.bfloat16), (8, 1024, 4096, torch.float32)]

# The ops whose backends() entry goes into the results: what "ours" ran (a kernel, or a reference while opt-in).
OPS = ("fp8_fp4_sparse_mqa_logits", "fp8_fp4_paged_sparse_mqa_logits", "get_sparse_mqa_logits_metadata",
       "get_paged_sparse_mqa_logits_metadata", "get_mqa_logits_metadata", "fp8_fp4_mqa_logits", "fp8_gemm_nt",
       "bf16_gemm_nt", "batched_syrk", "batched_symm")


class Case(NamedTuple):
    name: str
    ours: Callable[[], torch.Tensor]       # returns our output
    yardstick: Callable[[], torch.Tensor]  # returns the yardstick's output
    compare: Callable[[torch.Tensor, torch.Tensor], dict]
    yardstick_name: str
    host: bool = False                     # also time the host side of one call


# ---- inputs ------------------------------------------------------------------------------------------------------
# Re-created here rather than imported from tests/sparse_mqa_cases.py: the tests draw on the CPU (a case is then the
# same on every device), which at these sizes (hundreds of MB of cache) would take seconds per case; here every draw
# is on the device. The layouts are the ops' (attention/sparse/checks.py).

def _generator(seed: int) -> torch.Generator:
    return torch.Generator(device=DEVICE).manual_seed(seed)


def _words(shape: tuple, gen: torch.Generator) -> torch.Tensor:
    """int32 UE8M0 words: four exponent bytes each, scales 2^-5 .. 2^5 (one per 32 values)."""
    exps = torch.randint(122, 133, (*shape, 4), generator=gen, device=DEVICE, dtype=torch.int32)
    return exps[..., 0] | (exps[..., 1] << 8) | (exps[..., 2] << 16) | (exps[..., 3] << 24)


def _qk(lead: tuple, fp4: bool, gen: torch.Generator) -> torch.Tensor:
    """[*lead, 128] FP8 values, or [*lead, 64] packed E2M1 bytes (every code)."""
    if fp4:
        return torch.randint(-128, 128, (*lead, HEAD_DIM // 2), generator=gen, device=DEVICE, dtype=torch.int8)
    return (torch.randn(*lead, HEAD_DIM, generator=gen, device=DEVICE) * 3).to(FP8)


def _paged_cache(pages: int, fp4: bool, gen: torch.Generator) -> torch.Tensor:
    """uint8 [pages, PAGE_KV, 1, value_bytes + 4]: per page every token's values, then their scale words; the page
    stride rounded up to PAGE_ALIGN bytes."""
    value_bytes = HEAD_DIM // 2 if fp4 else HEAD_DIM
    token_bytes = value_bytes + 4
    page_bytes = PAGE_KV * token_bytes
    stride = align(page_bytes, PAGE_ALIGN)
    buffer = torch.zeros(pages, stride, dtype=torch.uint8, device=DEVICE)
    buffer[:, :PAGE_KV * value_bytes] = _qk((pages, PAGE_KV), fp4, gen).view(torch.uint8).reshape(pages, -1)
    buffer[:, PAGE_KV * value_bytes:page_bytes] = _words((pages, PAGE_KV), gen).view(torch.uint8).reshape(pages, -1)
    return buffer.as_strided((pages, PAGE_KV, 1, token_bytes), (stride, token_bytes, token_bytes, 1))


def _select_blocks(first: torch.Tensor, count: torch.Tensor, num_max: int, gen: torch.Generator) -> torch.Tensor:
    """int32 [rows, num_max]: per row min(num_max, count) unique increasing block indices drawn from
    [first, first + count) (as an indexer's top-k picks blocks of the row's range), then -1 (ignored by the ops)."""
    rows = first.numel()
    width = max(int(count.max()) if rows else 0, num_max, 1)
    keys = torch.rand(rows, width, generator=gen, device=DEVICE)
    keys[torch.arange(width, device=DEVICE)[None, :] >= count[:, None]] = 2.0  # past the range: never drawn
    chosen = keys.argsort(dim=1)[:, :num_max].sort(dim=1).values + first[:, None]
    used = torch.arange(num_max, device=DEVICE)[None, :] < count.clamp(max=num_max)[:, None]
    return torch.where(used, chosen, -1).to(torch.int32).contiguous()


def _causal(num_q: int, num_kv: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Query i sees keys [0, num_kv - num_q + i + 1): the last num_q tokens of a prefix of num_kv."""
    ks = torch.zeros(num_q, dtype=torch.int32, device=DEVICE)
    ke = (torch.arange(num_q, device=DEVICE) + num_kv - num_q + 1).clamp(min=0, max=num_kv).to(torch.int32)
    return ks, ke


# ---- checks ------------------------------------------------------------------------------------------------------

def _same_bits(got: torch.Tensor, want: torch.Tensor) -> dict:
    return dict(equal=bool(got.shape == want.shape and torch.equal(got, want)))


def _same_logits(got: torch.Tensor, want: torch.Tensor) -> dict:
    """-inf in the same places, calc_diff over the finite entries."""
    finite = torch.isfinite(want)
    return dict(diff=calc_diff(got[finite], want[finite]), inf_match=bool(torch.equal(torch.isfinite(got), finite)))


def _same_in_window(window: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> dict:
    got, want = got[window], want[window]
    return dict(diff=calc_diff(got, want), equal=bool(torch.equal(got, want)))


def _half_of(got: torch.Tensor, want: torch.Tensor) -> dict:
    return dict(diff=calc_diff(got, 0.5 * want.double()))


def _close(got: torch.Tensor, want: torch.Tensor) -> dict:
    return dict(diff=calc_diff(got, want))


# ---- tables ------------------------------------------------------------------------------------------------------

def _metadata_case(name: str, shape: str, *args):
    """A sparse metadata builder's row (ours against its torch reference) and the metadata the logits rows read."""
    ours = partial(getattr(deep_gemm, name), *args)
    case = Case(f"{name} {shape}", ours, partial(getattr(sparse_ref, f"{name}_reference"), *args), _same_bits,
                "torch reference")
    return case, ours()


def sparse_cases():
    for num_q, num_kv, num_max, block in SPARSE_PREFILL:
        gen = _generator(num_q + num_kv + num_max)
        ks, ke = _causal(num_q, num_kv)
        count = (ke.long() - ks.long() + block - 1) // block  # (ks = 0: aligned, the whole range inside the KV)
        idx = _select_blocks(ks.long() // block, count, num_max, gen)
        shape = f"q={num_q} kv={num_kv} s={num_max}x{block}"
        case, meta = _metadata_case("get_sparse_mqa_logits_metadata", shape, ks, ke, num_kv, idx, FP8, block, False)
        yield case
        for fp4 in (False, True):
            q, q_sf = _qk((num_q, HEADS), fp4, gen), _words((num_q, HEADS), gen)
            kv, kv_sf = _qk((num_kv,), fp4, gen), _words((num_kv,), gen)
            weights = torch.randn(num_q, HEADS, generator=gen, device=DEVICE).bfloat16()
            yield Case(f"fp8_fp4_sparse_mqa_logits {'fp4' if fp4 else 'fp8'} {shape}",
                       partial(deep_gemm.fp8_fp4_sparse_mqa_logits, (q, q_sf), (kv, kv_sf), weights, meta, num_max,
                               block),
                       partial(sparse_ref.fp8_fp4_sparse_mqa_logits_reference, q, q_sf, kv, kv_sf, weights, meta,
                               num_max, block, False),
                       _same_logits, "FP64 torch reference")
    for batch, next_n, avg, num_max, block in SPARSE_DECODE:
        gen = _generator(batch * next_n + avg + num_max)
        lens = torch.randint(int(0.7 * avg), int(1.3 * avg), (batch,), generator=gen, device=DEVICE,
                             dtype=torch.int32)
        pages = (lens + PAGE_KV - 1) // PAGE_KV
        max_pages, total = int(pages.max()), int(pages.sum())
        pool = torch.randperm(total, generator=gen, device=DEVICE, dtype=torch.int32)  # scattered pages
        starts = torch.cumsum(pages, 0) - pages
        cols = torch.arange(max_pages, device=DEVICE)[None, :]
        table = torch.where(cols < pages[:, None], pool[(starts[:, None] + cols).clamp(max=total - 1)], 0)
        table = table.to(torch.int32)
        rows = batch * next_n
        request = torch.arange(batch, dtype=torch.int32, device=DEVICE).repeat_interleave(next_n)
        row_table = table.repeat_interleave(next_n, dim=0).contiguous()
        # A request's rows are its last next_n positions: the last row sees the whole context.
        back = torch.arange(next_n - 1, -1, -1, device=DEVICE)
        row_lens = (lens[:, None].long() - back[None, :]).clamp(min=0).reshape(-1).to(torch.int32).contiguous()
        idx = _select_blocks(torch.zeros(rows, dtype=torch.long, device=DEVICE),
                             (row_lens.long() + block - 1) // block, num_max, gen)
        shape = f"b={batch} next_n={next_n} ctx={avg} s={num_max}x{block}"
        case, meta = _metadata_case("get_paged_sparse_mqa_logits_metadata", shape, row_lens, row_table, request,
                                    PAGE_KV, idx, FP8, block)
        yield case
        for fp4 in (False, True):
            cache = _paged_cache(total, fp4, gen)
            q, q_sf = _qk((rows, 1, HEADS), fp4, gen), _words((rows, 1, HEADS), gen)
            weights = torch.randn(rows, HEADS, generator=gen, device=DEVICE).bfloat16()
            yield Case(f"fp8_fp4_paged_sparse_mqa_logits {'fp4' if fp4 else 'fp8'} {shape}",
                       partial(deep_gemm.fp8_fp4_paged_sparse_mqa_logits, (q, q_sf), cache, weights, meta, num_max,
                               block),
                       partial(sparse_ref.fp8_fp4_paged_sparse_mqa_logits_reference, q, q_sf, cache, weights, meta,
                               num_max, block),
                       _same_logits, "FP64 torch reference")


def metadata_cases():
    for s, sk, h in MQA_PREFILL:
        gen = _generator(s + sk + h)
        ks, ke = _causal(s, sk)
        shape = f"s={s} sk={sk} h={h}"
        meta_args = (ks, ke, sk, h)
        yield Case(f"get_mqa_logits_metadata {shape}", partial(deep_gemm.get_mqa_logits_metadata, *meta_args),
                   partial(get_mqa_logits_metadata_reference, *meta_args), _same_bits, "torch reference")
        schedule = deep_gemm.get_mqa_logits_metadata(*meta_args)
        columns = torch.arange(sk, device=DEVICE)[None, :]
        window = (columns >= ks[:, None]) & (columns < ke[:, None])
        for fp4 in (False, True):
            q = _qk((s, h), fp4, gen)
            kv = _qk((sk,), fp4, gen)
            if fp4:
                q_sf, kv_sf = _words((s, h), gen), _words((sk,), gen)
            else:  # FP8 queries carry no scale; keys one FP32 scale per row
                q_sf, kv_sf = None, torch.rand(sk, generator=gen, device=DEVICE) + 0.5
            weights = torch.randn(s, h, generator=gen, device=DEVICE)
            call = partial(deep_gemm.fp8_fp4_mqa_logits, (q, q_sf), (kv, kv_sf), weights, ks, ke)
            yield Case(f"fp8_fp4_mqa_logits schedule_meta {'fp4' if fp4 else 'fp8'} {shape}",
                       partial(call, schedule_meta=schedule), call, partial(_same_in_window, window),
                       "no schedule_meta", host=True)


def _gemm(fn, a, b, d, alpha):
    fn(a, b, d, alpha=alpha)
    return d


def alpha_cases():
    for n, k in GEMM_NK:
        for m in GEMM_M:
            a, b = fp8_operands(m, n, k)
            d, plain = (torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16) for _ in range(2))
            yield Case(f"fp8_gemm_nt alpha=0.5 m={m} n={n} k={k}", partial(_gemm, deep_gemm.fp8_gemm_nt, a, b, d, 0.5),
                       partial(_gemm, deep_gemm.fp8_gemm_nt, a, b, plain, None), _half_of, "alpha=None")
    for n, k in GEMM_NK:
        for m in GEMM_M:
            a = torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16)
            b = torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16)
            d, plain = (torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16) for _ in range(2))
            yield Case(f"bf16_gemm_nt alpha=0.5 m={m} n={n} k={k}",
                       partial(_gemm, deep_gemm.bf16_gemm_nt, a, b, d, 0.5),
                       partial(_gemm, deep_gemm.bf16_gemm_nt, a, b, plain, None), _half_of, "alpha=None")


def _syrk(a, d):
    deep_gemm.batched_syrk(a, d)
    return d


def _symm(a, b, d):
    deep_gemm.batched_symm(a, b, d)
    return d


def symmetric_cases():
    for batch, m, k, dtype in SYRK:
        a = torch.randn(batch, m, k, device=DEVICE).to(dtype)
        d = torch.empty(batch, m, m, device=DEVICE, dtype=dtype)
        yield Case(f"batched_syrk b={batch} m={m} k={k} {str(dtype).replace('torch.', '')}", partial(_syrk, a, d),
                   partial(torch.bmm, a, a.mT), _close, "torch.bmm(a, a.mT)")
    for batch, m, n, dtype in SYMM:
        x = torch.randn(batch, m, m, device=DEVICE)
        a = (x + x.mT).to(dtype)  # symmetric, as the op's contract asks
        b = torch.randn(batch, m, n, device=DEVICE).to(dtype)
        d = torch.empty(batch, m, n, device=DEVICE, dtype=dtype)
        yield Case(f"batched_symm b={batch} m={m} n={n} {str(dtype).replace('torch.', '')}",
                   partial(_symm, a, b, d), partial(torch.bmm, a, b), _close, "torch.bmm(a, b)")


TABLES = dict(sparse=sparse_cases, metadata=metadata_cases, alpha=alpha_cases, symmetric=symmetric_cases)


# ---- measurement -------------------------------------------------------------------------------------------------

def _sync() -> None:
    if torch.device(DEVICE).type == "cuda":
        torch.cuda.synchronize()


def host_us(fn, reps: int = REPS) -> float:
    """Median host time (us) of one call started on an idle GPU: launches, checks and allocations, no kernel time
    (the call returns once its kernels are queued)."""
    fn()
    times = []
    for _ in range(reps):
        _sync()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    _sync()
    return statistics.median(times) * 1e6


def measure(table: str, case: Case, timer) -> dict:
    us, yardstick_us = timer(case.ours), timer(case.yardstick)
    ratio = yardstick_us / us if us > 0 else float("nan")
    row = dict(table=table, case=case.name, yardstick=case.yardstick_name, us=round(us, 2),
               yardstick_us=round(yardstick_us, 2), ratio=round(ratio, 3))
    row.update(case.compare(case.ours(), case.yardstick()))
    text = "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                     if k in ("diff", "equal", "inf_match"))
    if case.host:
        row.update(host_us=round(host_us(case.ours), 2), yardstick_host_us=round(host_us(case.yardstick), 2))
        text += f"  host {row['host_us']:.1f} / {row['yardstick_host_us']:.1f} us"
    print(f"{case.name:66s} {us:9.1f} us  {case.yardstick_name} {yardstick_us:9.1f} us  x{ratio:.2f}  {text}",
          flush=True)
    return row


def _release() -> None:
    """Hands the previous case's cached blocks back (the FP64 references cache tens of GB)."""
    if torch.device(DEVICE).type == "cuda":
        torch.cuda.empty_cache()


def run_table(table: str, timer, rows: list) -> None:
    """Every case of ``table``; a failing case prints its error and the table goes on, a failing builder ends the
    table (the script goes on to the next)."""
    try:
        for case in TABLES[table]():
            try:
                rows.append(measure(table, case, timer))
            except Exception as exc:  # noqa: BLE001 - report and carry on
                print(f"ERROR {table}: {case.name}: {type(exc).__name__}: {exc}", flush=True)
                traceback.print_exc()
            _release()
    except Exception as exc:  # noqa: BLE001 - report and carry on
        print(f"ERROR {table}: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc()
    _release()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--tables", default=",".join(TABLES),
                        help=f"comma-separated subset of {','.join(TABLES)} (default: all)")
    args = parser.parse_args()
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    unknown = [t for t in tables if t not in TABLES]
    if unknown or not tables:
        parser.error(f"--tables: expected names among {','.join(TABLES)}, got {args.tables!r}")
    if provider() != "deep_gemm":
        raise SystemExit("bench_new_ops.py times this package's ops against its own references: put this repository "
                         "first on PYTHONPATH")
    backends = deep_gemm.backends()
    used = {op: backends.get(op) for op in OPS}
    for op, backend in used.items():
        print(f"backend {op}: {backend}")
    timer = KernelTimer(reps=REPS)
    rows = []
    for table in tables:
        run_table(table, timer, rows)
    if args.out:
        write_results(args.out, "bench_new_ops", rows, extra=dict(backends=used))


if __name__ == "__main__":
    main()
