"""Python host time of a replayed dense FP8 GEMM launch, measured on CPU with the GPU stubbed out.

    python benchmarks/host_replay_cpu.py [--shape M N K] [--number N] [--rounds R]

The C pieces a GPU host runs (the compiled launcher, TMA descriptor encoding, stream and device queries) are replaced
by near-free stand-ins, so the numbers are the Python work of each layer: what a change to that work saves on the
GPU host too (scaled by the hosts' single-thread speed). The real ``fill_tma_descriptor`` also costs more than the
stand-in, so descriptor-cache hits save more there than measured here. Layers timed (best of interleaved rounds):

* ``signature``  the op's memo key (``core/registry._signature``);
* ``checked``    memoised check (signature + lookup);
* ``plan.run``   replay of the recorded launch down to the C launcher call;
* ``launch_compiled``  the same launch without a plan (launchers that keep none, e.g. grouped GEMMs);
* ``launcher``   the dense launcher with a signature (plan lookup + replay);
* ``op path``    binder + checked + launcher (everything below the dispatcher).
"""

from __future__ import annotations

import argparse
import os
import sys
import timeit
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

os.environ.pop("TRITON_INTERPRET", None)

from triton.runtime import driver as triton_driver  # noqa: E402  (the DriverConfig object)

import deep_gemm  # noqa: E402,F401
import deep_gemm.core.launch as launch_mod  # noqa: E402
from deep_gemm._internals import torch_api  # noqa: E402
from deep_gemm.core import registry  # noqa: E402
from deep_gemm.gemm.fp8 import launch as fp8_launch  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402
from launch_fakes import fake_compiled, kernel_descriptor_meta  # noqa: E402


def stub_gpu():
    """Make the launch layer believe it runs on a GPU whose C launcher does nothing."""
    fp8_launch.interpreting = launch_mod.interpreting = lambda: False
    torch.cuda.current_device = lambda: 0
    torch_api.current_raw_stream = lambda index: 0
    launch_mod._ensure_context = lambda index: None
    fp8_launch.usable_sms = lambda: 132
    # A C-implemented callable that accepts any arguments and does nothing: the compiled launcher's stand-in.
    c_launch = "".format
    compiled = {}

    def get(key):
        name = key[0]
        if name not in compiled:
            kernel = fp8_launch._tl_kernel() if name == "fp8_gemm" else __import__(
                "deep_gemm.gemm.fp8.kernels.gemm_ws", fromlist=["_"])._fp8_gemm_ws_kernel
            compiled[name] = fake_compiled(kernel.arg_names, kernel_descriptor_meta(kernel), c_launch)
        return compiled[name]
    launch_mod.KERNEL_CACHE.get = get
    # fill_tma_descriptor's stand-in: returns one object (the real one encodes 128 bytes in C).
    tensor_map = object()
    triton_driver._active = SimpleNamespace(
        utils=SimpleNamespace(fill_tma_descriptor=lambda *args: tensor_map,  # (3.6; 3.7+ below)
                                 fill_tma_descriptor_tiled=lambda *args: tensor_map))


def best_per_call_us(stmts, env, number: int, rounds: int) -> dict:
    """Best time per call of each statement over ``rounds`` interleaved rounds (interleaving spreads a noisy host's
    slow spells over every statement; the minimum is the least disturbed run)."""
    timers = {s: timeit.Timer(s, globals=env) for s in stmts}
    best = dict.fromkeys(stmts, float("inf"))
    for _ in range(rounds):
        for stmt, timer in timers.items():
            best[stmt] = min(best[stmt], timer.timeit(number) / number * 1e6)
    return best


def _plan_arguments(plan, inputs) -> list:
    """The kernel arguments a plan replays ``inputs`` with (as its Triton-wrapper path builds them)."""
    args = list(plan.template)
    for pos, j in plan.tensor_slots:
        args[pos] = inputs[j]
    for pos, j, shape, strides, block, gluon in plan.desc_slots:
        args[pos] = launch_mod.FastDescriptor(inputs[j], shape, strides, block, gluon)
    for pos, shape, dtype, device in plan.fresh_slots:
        args[pos] = torch.empty(shape, dtype=dtype, device=device)
    return args


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=int, nargs=3, default=(16, 128, 128))
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    stub_gpu()
    m, n, k = args.shape
    a = per_token_cast_to_fp8(torch.randn(m, k, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, dtype=torch.bfloat16), use_ue8m0=False)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    kernels = registry.kernels_of("fp8_gemm_nt")
    binder = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])
    call_args = (a[0], a[1], b[0], b[1], d)
    full = binder(call_args, {})
    launcher = kernels.triton_fn()
    sig = kernels.checked(full)
    launcher(*full, signature=sig)  # records the plan
    (plan,) = fp8_launch.PLANS.values()
    inputs = (a[0], a[1], b[0], b[1], d, None)

    def op_path():
        full = binder(call_args, {})
        launcher(*full, signature=kernels.checked(full))
    env = dict(registry=registry, kernels=kernels, full=full, plan=plan, inputs=inputs, launcher=launcher, sig=sig,
               op_path=op_path, launch_mod=launch_mod, plan_args=_plan_arguments(plan, inputs))
    direct = getattr(plan, "direct", None) is not None
    print(f"deep_gemm from {os.path.dirname(deep_gemm.__file__)}; shape {m}x{n}x{k}; direct replay: {direct}")
    layers = {"signature": "registry._signature(full)", "checked": "kernels.checked(full)",
              "plan.run": "plan.run(inputs)",
              "launch_compiled": "launch_mod.launch_compiled(plan.compiled, plan.grid, plan_args, 0)",
              "launcher": "launcher(*full, signature=sig)", "op path": "op_path()"}
    best = best_per_call_us(list(layers.values()), env, args.number, args.rounds)
    for label, stmt in layers.items():
        print(f"{label:16s} {best[stmt]:6.2f} us")


if __name__ == "__main__":
    main()
