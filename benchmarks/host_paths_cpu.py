"""Host time per call of the public entry points, on CPU with the GPU stubbed out: the dispatcher path against the
eager path (``_ops/eager.eager_op``), per op of ``benchmarks/host_overhead.py``'s slow list.

    python benchmarks/host_paths_cpu.py [--number N] [--rounds R] [--profile NAME]

Tensors live on the CPU; every launcher runs its real host code (configs, plans, replay, descriptor cache) down to
the compiled kernel's C launcher, which is a do-nothing stand-in (``host_replay_cpu.stub_gpu``, generalised to any
kernel), so the numbers are the Python work per call. Columns (us per call, best of interleaved rounds):

* ``kernel``      binder + memoised check + launcher: the op's CUDA kernel as the dispatcher runs it;
* ``dispatcher``  the same kernel called through a ``torch.ops`` op of the same schema (what every call cost before
                  the eager path; the dispatcher's own share is ``dispatcher - kernel``);
* ``eager``       ``eager_op(name)`` with the same arguments (its CUDA test passes CPU tensors here, see below);
* ``public``      the public function (``deep_gemm.<name>``), which now takes the eager path;
* ``public_before`` the public function as it was (``public - eager + dispatcher``).

The eager path's eligibility test asks ``x.is_cuda``; for CPU tensors this script swaps in the same function with
the test inverted (same cost). ``--profile NAME`` prints a cProfile of the public call of one case.

CUDA-only calls are not in the numbers: stream and device queries, the C launcher's driver call, and the capture
query a replay makes for a plan that keeps buffers on a stream other than the default (the HC case's plan keeps
its sub-split workspace, as on the H200: M 16, K 1024 plans 2 sub-splits on 132 SMs); CPU tensors never ask it.

"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import os
import pstats
import sys
import time
import timeit

import torch

# --root DIR: time the deep_gemm of another checkout (e.g. the commit before the eager path; public column only).
_HERE = os.path.dirname(__file__)
_ROOT = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else os.path.join(_HERE, "..")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, _ROOT)

os.environ.pop("TRITON_INTERPRET", None)

from types import SimpleNamespace  # noqa: E402

from triton.runtime import driver as triton_driver  # noqa: E402

import deep_gemm  # noqa: E402
import deep_gemm.core.launch as launch_mod  # noqa: E402
from deep_gemm._internals import torch_api  # noqa: E402
from deep_gemm.core import eager, registry, runtime  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from launch_fakes import fake_compiled  # noqa: E402

# Plausible per-descriptor metadata (the stand-in encoder only hashes it).
_META = {"swizzle": 3, "elem_size": 1, "elem_type": 0, "block_size": [128, 128], "fp4_padded": False}


def stub_gpu() -> None:
    """Every launch layer believes it runs on a GPU whose C launcher and descriptor encoder do nothing."""
    interpreting, get_num_sms = launch_mod.interpreting, runtime.get_num_sms
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("deep_gemm"):
            if getattr(mod, "interpreting", None) is interpreting:
                mod.interpreting = lambda: False
            if getattr(mod, "get_num_sms", None) is get_num_sms:
                mod.get_num_sms = lambda: 132
    launch_mod.interpreting = lambda: False
    torch.cuda.current_device = lambda: 0
    torch_api.current_raw_stream = lambda index: 0
    launch_mod._ensure_context = lambda index: None
    c_launch = "".format  # a C callable that takes any arguments and does nothing

    def get_or_compile(key, build):
        entry = runtime.KERNEL_CACHE._entries.get(key)
        if entry is None:
            kernel = dict(zip(build.__code__.co_freevars, [c.cell_contents for c in build.__closure__]))["kernel"]
            # (sf_desc: the paged indexer passes its scales tensor itself unless the lean page loop reads them by TMA)
            meta = {name: _META for name in kernel.arg_names if name.endswith("desc") and name != "sf_desc"}
            entry = runtime.KERNEL_CACHE._entries[key] = fake_compiled(kernel.arg_names, meta, c_launch)
            entry.n_regs, entry.metadata.shared = 128, 64 * 1024  # (what occupancy decisions read)
        return entry
    runtime.KERNEL_CACHE.get_or_compile = get_or_compile
    tensor_map = object()
    # fill_tma_descriptor: Triton 3.6; fill_tma_descriptor_tiled: 3.7 and later
    triton_driver._active = SimpleNamespace(utils=SimpleNamespace(fill_tma_descriptor=lambda *args: tensor_map,
                                 fill_tma_descriptor_tiled=lambda *args: tensor_map))
    # The eager path's CUDA test, inverted for CPU tensors (same cost per tensor): in the generic signature and in
    # the generated per-op ones (made at each op's first call, after this).
    if hasattr(eager, "_eager_signature"):
        source = inspect.getsource(eager._eager_signature).replace("not x.is_cuda", "x.is_cuda")
        exec(compile(source, eager.__file__, "exec"), eager.__dict__)
    if hasattr(eager, "_EAGER_DEVICE_TEST"):
        eager._EAGER_DEVICE_TEST = "is_cpu"


def cases() -> dict:
    """(public call, op name, flat op arguments) per case: the slow list of the host-time issues (16, 18)."""
    m, n, k = 16, 256, 512
    a = per_token_cast_to_fp8(torch.randn(m, k), use_ue8m0=False)
    a_mn = (a[0], deep_gemm.get_mn_major_tma_aligned_tensor(a[1]))
    b = per_block_cast_to_fp8(torch.randn(n, k), use_ue8m0=False)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    g, t = 4, 64
    ag = per_token_cast_to_fp8(torch.randn(g * t, k), use_ue8m0=False)
    ag = (ag[0].view(g, t, k), ag[1].view(g, t, k // 128))
    ag_mn = (ag[0], deep_gemm.get_mn_major_tma_aligned_tensor(ag[1]))
    sf_vllm = torch.empty_strided((g, t, k // 128), (t * (k // 128), 1, t))
    sf_vllm.copy_(ag[1])
    bq = [per_block_cast_to_fp8(torch.randn(n, k), use_ue8m0=False) for _ in range(g)]
    bg = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
    dg = torch.empty(g, t, n, dtype=torch.bfloat16)
    masked_m = torch.full((g,), 16, dtype=torch.int32)
    ac = per_token_cast_to_fp8(torch.randn(g * 128, k), use_ue8m0=False)
    dc = torch.empty(g * 128, n, dtype=torch.bfloat16)
    ends = torch.tensor([100, 228, 300, 500], dtype=torch.int32)
    x = torch.randn(m, k, dtype=torch.bfloat16)
    w = torch.randn(n, k, dtype=torch.bfloat16)
    hx, hw = torch.randn(m, 1024, dtype=torch.bfloat16), torch.randn(24, 1024)
    hd, hs = torch.empty(m, 24), torch.empty(m)
    sf = torch.randn(m, k // 128).abs()
    return {
        "tf32_hc_prenorm_gemm": (lambda: deep_gemm.tf32_hc_prenorm_gemm(hx, hw, hd, hs),
                                 "tf32_hc_prenorm_gemm", (hx, hw, hd, hs, None)),
        "m_grouped_fp8_gemm_nt_masked (MN-major sfa)":
            (lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(ag_mn, bg, dg, masked_m, 16),
             "m_grouped_fp8_gemm_nt_masked", (*ag_mn, *bg, dg, masked_m, 16, None, None, None, "nk", False)),
        "m_grouped_fp8_gemm_nt_masked (vLLM sfa)":
            (lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked((ag[0], sf_vllm), bg, dg, masked_m, 16),
             "m_grouped_fp8_gemm_nt_masked", (ag[0], sf_vllm, *bg, dg, masked_m, 16, None, None, None, "nk", False)),
        "fp8_gemm_nt (K-major sfa)": (lambda: deep_gemm.fp8_gemm_nt(a, b, d), "fp8_gemm_nt", (*a, *b, d)),
        "fp8_gemm_nt (MN-major sfa)": (lambda: deep_gemm.fp8_gemm_nt(a_mn, b, d), "fp8_gemm_nt", (*a_mn, *b, d)),
        "m_grouped_fp8_gemm_nt_contiguous (psum)":
            (lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(ac, bg, dc, ends, use_psum_layout=True),
             "m_grouped_fp8_gemm_nt_contiguous",
             (*ac, *bg, dc, ends, None, None, None, "nk", False, True, True, None)),
        "bf16_gemm_nt": (lambda: deep_gemm.bf16_gemm_nt(x, w, d), "bf16_gemm_nt", (x, w, d)),
        "transform_sf_into_required_layout": (lambda: deep_gemm.transform_sf_into_required_layout(sf, m, k, (1, 128)),
                                              "transform_sf_into_required_layout",
                                              (sf, m, k, [1, 128], None, None, False, None)),
        **indexer_cases(),
    }


def indexer_cases() -> dict:
    """benchmarks/host_overhead.py's indexer cases (prefill logits without the clean pass, the paged schedule, a
    paged decode step)."""
    fp8 = torch.float8_e4m3fn
    s, sk, h, d = 128, 1024, 64, 128
    q = torch.randn(s, h, d).to(fp8)
    kv = (torch.randn(sk, d).to(fp8), torch.rand(sk))
    w = torch.randn(s, h)
    ks = torch.zeros(s, dtype=torch.int32)
    ke = torch.arange(sk - s + 1, sk + 1, dtype=torch.int32)
    batch, next_n, block_kv, pages = 64, 2, 64, 16
    lens = torch.full((batch, next_n), pages * block_kv - 7, dtype=torch.int32)
    pq = torch.randn(batch, next_n, h, d).to(fp8)
    cache = torch.randint(0, 100, (batch * pages, block_kv, 1, d + 4), dtype=torch.uint8)
    pw = torch.randn(batch * next_n, h)
    table = torch.arange(batch * pages, dtype=torch.int32).view(batch, pages)
    meta = torch.zeros(132 + 1, 2, dtype=torch.int32)  # (its values are never read on the host)
    max_len = pages * block_kv
    return {
        "fp8_mqa_logits (compressed)":
            (lambda: deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=False, max_seqlen_k=sk),
             "fp8_mqa_logits", (q, *kv, w, ks, ke, False, sk)),
        "get_paged_mqa_logits_metadata":
            (lambda: deep_gemm.get_paged_mqa_logits_metadata(lens, block_kv, 132),
             "get_paged_mqa_logits_metadata", (lens, block_kv, 132, None)),
        "fp8_paged_mqa_logits":
            (lambda: deep_gemm.fp8_paged_mqa_logits(pq, cache, pw, lens, table, meta, max_len),
             "fp8_paged_mqa_logits", (pq, cache, pw, lens, table, meta, max_len, False, None)),
    }


_SCRATCH = torch.library.Library("deep_gemm_host_bench", "DEF")


def dispatcher_op(name: str):
    """A torch.ops op of ``name``'s schema whose CPU kernel is ``name``'s CUDA kernel (binder, check, launcher)."""
    schema = registry.SCHEMAS[registry.ALIASES.get(name, name)]
    op_name = schema.split("(", 1)[0]
    if not hasattr(torch.ops.deep_gemm_host_bench, op_name):
        kernels = registry.kernels_of(name)
        binder = registry._Binder(schema)  # (these three calls exist in checkouts before the eager path too)
        launcher = kernels.triton_fn()
        _SCRATCH.define(schema)

        def cuda_kernel(*args, **kwargs):  # the op's CUDA kernel (core/registry.register), for a Triton launcher
            full = binder(args, kwargs)
            token = kernels.checked(full)
            out = launcher(*full, signature=token) if getattr(launcher, "accepts_signature", False) \
                else launcher(*full)
            return kernels.reference(*full) if out is NotImplemented else out
        _SCRATCH.impl(op_name, cuda_kernel, "CPU")
    return getattr(torch.ops.deep_gemm_host_bench, op_name).default


def best_us(stmts: dict, number: int, rounds: int) -> dict:
    # CPU time of this thread: a busy host (other processes) disturbs it less than wall time.
    timers = {label: timeit.Timer(fn, timer=time.thread_time) for label, fn in stmts.items()}
    best = dict.fromkeys(stmts, float("inf"))
    for _ in range(rounds):
        for label, timer in timers.items():
            best[label] = min(best[label], timer.timeit(number) / number * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile")
    parser.add_argument("--root", help="the checkout whose deep_gemm to time (default: this one)")
    args = parser.parse_args()
    stub_gpu()
    print(f"deep_gemm from {os.path.dirname(deep_gemm.__file__)}")
    if not hasattr(eager, "eager_op"):
        # A checkout without the eager path: its public functions would reach the CPU reference through the
        # dispatcher, so time what they reach on CUDA: the dispatcher op running the CUDA kernel (the public
        # function's own unpacking, ~1 us here, comes on top).
        for label, (_, name, flat) in cases().items():
            op = dispatcher_op(name)
            op(*flat), op(*flat)
            t = best_us({"d": lambda: op(*flat)}, args.number, args.rounds)["d"]
            print(f"{label:46s} dispatcher {t:7.2f} us/call", flush=True)
        return
    print(f"{'case':46s} {'kernel':>7s} {'dispatch':>8s} {'eager':>7s} {'public':>7s} {'before':>7s}  us/call")
    for label, (public, name, flat) in cases().items():
        kernels = registry.kernels_of(name)
        op = dispatcher_op(name)
        eager_fn = eager.eager_op(name)

        def kernel_path():
            full = kernels.binder(flat, {})
            return kernels.run_cuda(full, kernels.checked(full))
        for fn in (kernel_path, lambda: op(*flat), lambda: eager_fn(*flat), public):
            fn(), fn()  # compile stand-ins, record plans
        if args.profile and args.profile in label:
            prof = cProfile.Profile()
            prof.runcall(lambda: [public() for _ in range(20000)])
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        t = best_us({"kernel": kernel_path, "dispatcher": lambda: op(*flat), "eager": lambda: eager_fn(*flat),
                     "public": public}, args.number, args.rounds)
        before = t["public"] - t["eager"] + t["dispatcher"]
        print(f"{label:46s} {t['kernel']:7.2f} {t['dispatcher']:8.2f} {t['eager']:7.2f} {t['public']:7.2f} "
              f"{before:7.2f}", flush=True)


if __name__ == "__main__":
    main()
