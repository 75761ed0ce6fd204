"""Where the host time of a replayed ``tf32_hc_prenorm_gemm`` call goes, layer by layer, on CPU with the GPU stubbed
(``benchmarks/host_paths_cpu.stub_gpu``): each row times one layer called directly, so the difference between two
rows is what the outer layer adds. The case is host_overhead.py's HC call (M 16, N 24, K 1024: sub-splits 2, so
its plan keeps a workspace and arrival counters).

    CUDA_VISIBLE_DEVICES= PYTHONPATH=$PWD python research/probes/hc_host_layers_cpu.py [--number N] [--rounds R]

What the stub cannot show: the CUDA-only calls (stream and device queries, the capture query, the C launcher's
cuLaunchKernelEx); CPU tensors skip the replay's capture query whatever the stream.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))

import host_paths_cpu as bench  # noqa: E402  (puts this checkout and tests/ on sys.path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    bench.stub_gpu()
    import deep_gemm
    from deep_gemm._ops import library

    public, name, flat = bench.cases()["tf32_hc_prenorm_gemm"]
    kernels = library.kernels_of(name)
    eager = library.eager_op(name)
    for _ in range(3):
        public()
    full = kernels.binder(flat, {})
    token = kernels.checked(full)
    run = kernels.triton
    inputs = full[:4]
    (plan,) = run.plans.values()
    assert plan.keeps_buffers and plan.direct is not None, "expected a direct plan holding the workspace"
    words = plan.direct.words.copy()
    layers = {
        "public deep_gemm.tf32_hc_prenorm_gemm": public,
        "eager_op (modes, signature, memo)": lambda: eager(*flat),
        "OpKernels.run_cuda": lambda: kernels.run_cuda(full, token),
        "replayable call (picker, key, plan lookup)": lambda: run.call(full, token),
        "LaunchPlan.run (device, context)": lambda: plan.run(inputs),
        "_DirectReplay.run (words, pointers, TMA maps)": lambda: plan.direct.run(inputs),
        "C launcher stand-in": lambda: plan.direct.c_launch(*words),
    }
    best = bench.best_us(layers, args.number, args.rounds)
    print(f"deep_gemm from {os.path.dirname(deep_gemm.__file__)}; torch {torch.__version__}")
    for label, us in best.items():
        print(f"{label:48s} {us:6.2f} us")


if __name__ == "__main__":
    main()
