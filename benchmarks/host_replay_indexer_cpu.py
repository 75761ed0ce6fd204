"""Python host time of the paged indexer ops (``get_paged_mqa_logits_metadata``, ``fp8_paged_mqa_logits``) on their
replayed path, measured on CPU with the GPU stubbed out (as ``host_replay_cpu.py`` does for the dense FP8 GEMM).

    python benchmarks/host_replay_indexer_cpu.py [--batch B] [--number N] [--rounds R]

Layers (best of interleaved rounds): ``checked`` (the memoised check), ``launcher`` (plan lookup + allocation +
replay down to the stand-in C launcher), ``op path`` (binder + checked + launcher: everything below the dispatcher).
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

os.environ.pop("TRITON_INTERPRET", None)

from triton.runtime import driver as triton_driver  # noqa: E402

import deep_gemm  # noqa: E402,F401
import deep_gemm.core.launch as launch_mod  # noqa: E402
from deep_gemm._internals import torch_api  # noqa: E402
from deep_gemm.attention.kernels import paged as attention_kernels  # noqa: E402
from deep_gemm.attention import launch as attention_launch  # noqa: E402
from deep_gemm.core import registry  # noqa: E402
from host_replay_cpu import best_per_call_us  # noqa: E402
from launch_fakes import FP8_TILE_META, fake_compiled  # noqa: E402

PAGE_META = dict(FP8_TILE_META, block_size=[1, 64, 128])


def stub_gpu():
    """The launch layer on a pretend GPU whose C launcher does nothing."""
    attention_launch.interpreting = launch_mod.interpreting = lambda: False
    torch.cuda.current_device = lambda: 0
    torch_api.current_raw_stream = lambda index: 0
    launch_mod._ensure_context = lambda index: None
    attention_launch._num_sms = lambda t: 132
    c_launch = "".format
    compiled = {}

    def get(key):
        name = key[0]
        if name not in compiled:
            kernel = {"paged_schedule": attention_kernels._paged_schedule_kernel,
                      "fp8_paged_mqa_logits": attention_kernels._fp8_paged_mqa_logits_kernel,
                      "fp8_paged_mqa_logits_persistent":
                          attention_kernels._fp8_paged_mqa_logits_persistent_kernel}[name]
            # (sf_desc: the scales tensor itself unless the lean page loop reads them by TMA)
            meta = {n: PAGE_META for n in kernel.arg_names if n.endswith("_desc") and n != "sf_desc"}
            compiled[name] = fake_compiled(kernel.arg_names, meta, c_launch)
            compiled[name].n_regs, compiled[name].metadata.shared = 168, 42024
        return compiled[name]
    launch_mod.KERNEL_CACHE.get = get
    attention_launch.compiled_kernel = lambda kernel, grid, args, *, name, **kw: get((name,))
    tensor_map = object()
    # fill_tma_descriptor: Triton 3.6; fill_tma_descriptor_tiled: 3.7 and later
    triton_driver._active = SimpleNamespace(utils=SimpleNamespace(fill_tma_descriptor=lambda *args: tensor_map,
                                 fill_tma_descriptor_tiled=lambda *args: tensor_map))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    stub_gpu()
    batch, next_n, heads, dim, block_kv, pages = args.batch, 2, 64, 128, 64, 64
    q = torch.zeros(batch, next_n, heads, dim, dtype=torch.float8_e4m3fn)
    cache = torch.zeros(batch * pages, block_kv, 1, dim + 4, dtype=torch.uint8)
    weights = torch.zeros(batch * next_n, heads)
    lens = torch.full((batch, next_n), pages * block_kv, dtype=torch.int32)
    table = torch.zeros(batch, pages, dtype=torch.int32)
    meta = torch.zeros(133, 2, dtype=torch.int32)
    env = {}
    layers = {}
    for op, call_args in (("get_paged_mqa_logits_metadata", (lens, block_kv, 132)),
                          ("fp8_paged_mqa_logits", (q, cache, weights, lens, table, meta, pages * block_kv))):
        kernels = registry.kernels_of(op)
        binder = registry._Binder(registry.SCHEMAS[op])
        full = binder(call_args, {})
        launcher = kernels.triton_fn()
        sig = kernels.checked(full)
        launcher(*full, signature=sig)  # records the plan

        def op_path(binder=binder, call_args=call_args, kernels=kernels, launcher=launcher):
            full = binder(call_args, {})
            return launcher(*full, signature=kernels.checked(full))
        tag = op.split("_")[-1] if op.startswith("get") else "paged"
        env.update({f"{tag}_kernels": kernels, f"{tag}_full": full, f"{tag}_launcher": launcher, f"{tag}_sig": sig,
                    f"{tag}_op": op_path})
        layers.update({f"{op} checked": f"{tag}_kernels.checked({tag}_full)",
                       f"{op} launcher": f"{tag}_launcher(*{tag}_full, signature={tag}_sig)",
                       f"{op} op path": f"{tag}_op()"})
    best = best_per_call_us(list(layers.values()), env, args.number, args.rounds)
    for label, stmt in layers.items():
        print(f"{label:44s} {best[stmt]:6.2f} us")


if __name__ == "__main__":
    main()
