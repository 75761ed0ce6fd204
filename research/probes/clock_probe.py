"""SM clock, board power and throttle reasons while one FP8 GEMM runs back to back (session 13).

The benchmark times single calls with an L2 flush between them; this probe loops one kernel for a few seconds with
no gaps (what a training step or a long prefill sees) and samples `nvidia-smi` every 100 ms, for deep_gemm's
kernel, torch's block-wise scaled_mm (cuBLAS, same maths) and a BF16 matmul of the same shape. It prints the
sustained time per call and the samples of the middle third of the loop (past the ramp-up).

    python research/probes/clock_probe.py [M N K]
"""

import os
import subprocess
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_fp8_gemm as bench  # noqa: E402
from deep_gemm.gemm import fp8_triton  # noqa: E402
from deep_gemm.gemm.operands import resolve_recipe  # noqa: E402

QUERY = ("clocks.sm,power.draw,clocks_throttle_reasons.active,clocks_throttle_reasons.sw_power_cap,"
         "clocks_throttle_reasons.hw_slowdown,temperature.gpu")
SECONDS = 4.0


def sustained(tag: str, fn) -> None:
    """Loop `fn` for SECONDS (synchronising every 20 calls so the launch queue stays short) while sampling."""
    sampler = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader", "-lms", "100"],
                               stdout=subprocess.PIPE, text=True)
    start, calls = time.time(), 0
    while time.time() - start < SECONDS:
        fn()
        calls += 1
        if calls % 20 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    elapsed = time.time() - start
    sampler.terminate()
    samples = sampler.stdout.read().strip().splitlines()
    print(f"== {tag}: {calls} calls in {elapsed:.2f} s -> {elapsed / calls * 1e6:.1f} us/call")
    print(f"   ({QUERY})")
    for line in samples[len(samples) // 3:][:12]:
        print("  ", line)


def main() -> None:
    m, n, k = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 7168, 16384)
    a, b = bench.fp8_operands(m, n, k)
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    r = resolve_recipe(None, None, None, b[1])

    def ours():
        fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, r.b[0] == 1)
    ours()
    torch.cuda.synchronize()
    print(f"{m}x{n}x{k}, {torch.cuda.get_device_name()}")
    sustained("deep_gemm fp8_gemm_nt (1D2D)", ours)
    blockwise = bench.torch_blockwise(a, b, m)
    if blockwise is not None:
        sustained("torch block-wise scaled_mm (cuBLAS)", blockwise)
    a16, b16 = a[0].to(torch.bfloat16), b[0].to(torch.bfloat16)
    sustained("torch BF16 matmul", lambda: torch.matmul(a16, b16.t()))


if __name__ == "__main__":
    main()
