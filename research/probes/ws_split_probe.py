"""Where the one-wave kernel's split-K time goes: time split configs with parts of the split-K work removed (results
are wrong on purpose), next to the unsplit config of the same tile.

    full       the kernel as shipped
    nostore    the splits do not publish their partials
    noatomic   no arrival counter: the last split by index reduces (no atomic, no counter reset)
    noreads    the reducing split does not read the partials back
    noreduce   all three: split-K is only the K-range bookkeeping
    noload     the producer arrives on `ready` without its A and B loads (staged scales still load)

Each variant is compiled from a patched copy of kernels/fp8_gemm_ws.py (research/probes/ws_variants.py).
Prints us per (shape, config, variant): the benchmark's kernel timer (profiler kernel time, L2 flushed before each
call; CUDA events around back-to-back calls would time the host, which is slower than these kernels).

    python research/probes/ws_split_probe.py [M,N,K:BN:SPLIT ...]
"""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from bench_fp8_gemm import KernelTimer  # noqa: E402
from deep_gemm.gemm import fp8_configs, fp8_triton  # noqa: E402
from deep_gemm.gemm.kernels import fp8_gemm_ws  # noqa: E402
from deep_gemm.gemm.operands import resolve_recipe  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from ws_variants import NOLOAD, patched_module, use_kernel  # noqa: E402

STORE = "    gl.store(slab + split * SLAB + offs, part)\n"
ATOMIC = ('    arrived = gl.atomic_add(counter_ptr + slot, 1, sem="acq_rel", scope="gpu")\n'
          "    last = arrived == SPLIT_K - 1\n")
READ = '                total += gl.load(slab + s * SLAB + offs, cache_modifier=".cg")\n'
RESET = '        gl.atomic_xchg(counter_ptr + slot, 0, sem="relaxed", scope="gpu")\n'
PATCHES = {
    "nostore": [(STORE, "")],
    "noatomic": [(ATOMIC, "    last = split == SPLIT_K - 1\n"), (RESET, "")],
    "noreads": [(READ, "                total += part\n")],
    "noload": [NOLOAD],
}
PATCHES["noreduce"] = PATCHES["nostore"] + PATCHES["noatomic"] + PATCHES["noreads"]


def variant_module(name):
    return patched_module(f"split_{name}", PATCHES.get(name, []))


cases = sys.argv[1:] or ["128,7168,2048:64:1", "128,7168,2048:64:2", "128,7168,2048:128:1", "128,7168,2048:128:4",
                         "128,4096,7168:128:1", "128,4096,7168:128:4"]
original = fp8_gemm_ws._fp8_gemm_ws_kernel
time_us = KernelTimer(reps=15)
def ws_on(cfg):
    return fp8_triton.Fp8Overrides(ws_mode="on", waves=1, config=cfg)
for case in cases:
    shape, bn, split = case.split(":")
    m, n, k = (int(x) for x in shape.split(","))
    cfg = fp8_configs._config(128, int(bn), int(split))
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    r = resolve_recipe(None, None, None, b[1])
    names = ["full", "noload"] + (["nostore", "noatomic", "noreads", "noreduce"] if cfg.split_k > 1 else [])
    for name in names:
        use_kernel(original if name == "full" else variant_module(name)._fp8_gemm_ws_kernel)
        us = time_us(lambda: fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, False, overrides=ws_on(cfg)))
        print(f"{m}x{n}x{k} 128x{bn} split{split} {name:9s} {us:8.1f} us", flush=True)
use_kernel(original)
