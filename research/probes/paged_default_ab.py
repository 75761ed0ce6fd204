"""A/B of the paged decode kernel's session-24 default (16-byte Q loads, 128-register cap, 7 stages) against the
session-23 one (7 stages) in one process, alternating, on the bench's quick paged rows: call 3's sweep put the new
one 4.6-5.0 % ahead, call 4's bench (a separate process) showed the same time as call 2's with the old default.

    PYTHONPATH=$PWD python research/probes/paged_default_ab.py
"""

import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

import deep_gemm  # noqa: E402
from bench_mqa_logits import BLOCK_KV, PAGED_QUICK, paged_inputs  # noqa: E402
from deep_gemm._ops.library import run_launcher  # noqa: E402
from deep_gemm.attention.triton_launch import PagedConfig, paged_default_config  # noqa: E402
from harness import kernel_times_by_name  # noqa: E402


def main():
    num_sms = deep_gemm.get_num_sms()
    for batch, next_n, h, d, avg in PAGED_QUICK:
        q, cache, w, lens2d, table, max_len, _ = paged_inputs(batch, next_n, h, d, avg)
        meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms)
        configs = {"s23 (7 stages)": PagedConfig(num_stages=7),
                   "s24 default": paged_default_config(next_n, h, d, BLOCK_KV, False)}
        times = {name: [] for name in configs}
        for _ in range(4):
            for name, cfg in configs.items():
                t = kernel_times_by_name(lambda cfg=cfg: run_launcher(
                    "fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta, max_len, False,
                    torch.float32, None, launcher_kwargs=dict(config=cfg)), ("paged_mqa_logits",), reps=10)
                times[name].append(t["paged_mqa_logits"])
        old, new = (statistics.median(v) for v in times.values())
        print(f"BSZ={batch} NextN={next_n} L={avg}: s23 {old:.1f} us, s24 {new:.1f} us, {old / new:.3f}x "
              f"(runs: {[round(x, 1) for v in times.values() for x in v]})", flush=True)


if __name__ == "__main__" and not os.environ.get("PUBLIC_VS_LAUNCHER"):
    main()


def public_vs_launcher():
    """The public op against its launcher with the default and with the session-24 config passed explicitly, and the
    registers of every compiled paged kernel (does the public path run the default config?)."""
    from deep_gemm._triton.launch import KERNEL_CACHE
    num_sms = deep_gemm.get_num_sms()
    batch, next_n, h, d, avg = PAGED_QUICK[1]
    q, cache, w, lens2d, table, max_len, _ = paged_inputs(batch, next_n, h, d, avg)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms)
    calls = {
        "public": lambda: deep_gemm.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens2d, table, meta, max_len,
                                                             clean_logits=False, logits_dtype=torch.float32),
        "launcher default": lambda: run_launcher("fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta,
                                                 max_len, False, torch.float32, None),
        "launcher s24 config": lambda: run_launcher(
            "fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta, max_len, False, torch.float32, None,
            launcher_kwargs=dict(config=paged_default_config(next_n, h, d, BLOCK_KV, False)))}
    for _ in range(2):
        for name, fn in calls.items():
            t = kernel_times_by_name(fn, ("paged_mqa_logits",), reps=10)["paged_mqa_logits"]
            print(f"{name}: {t:.1f} us", flush=True)
    for key, ck in list(KERNEL_CACHE._entries.items()):
        if "paged" in str(key[0]):
            print(key[0], "warps/stages/pdl/i64/maxnreg", key[3:], "regs", getattr(ck, "n_regs", "?"), flush=True)


if __name__ == "__main__" and os.environ.get("PUBLIC_VS_LAUNCHER"):
    public_vs_launcher()
