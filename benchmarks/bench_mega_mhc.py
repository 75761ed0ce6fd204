"""mega_mhc: kernel time (us) and GB/s of this package's Triton kernels at DeepSeek V4's shapes, against a device
copy of the same bytes timed in the same process (the bandwidth a memory-bound step can reach). DeepGEMM runs
``mega_mhc`` on SM100 only, so on Hopper there is no DeepGEMM row to compare with.

    PYTHONPATH=$PWD python benchmarks/bench_mega_mhc.py --out $OUT/ours

Bytes per call (what the step must move at least): x and the four routes read, the new residual written, fn read once,
y written (BF16 and / or FP8 with its scales), the mixes (small). The kernels also re-read the new residual (from L2
where it still is) and, per token block, fn from L2: not counted.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, write_results  # noqa: E402

HIDDEN = (4096, 7168)
TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 8192)
FORMS = ("bf16+fp8", "fp8_shared")


def _bytes(tokens: int, hidden: int, form: str) -> int:
    r = 4
    moved = tokens * hidden * 2 * (1 + 2 * r) + 24 * r * hidden * 4 + tokens * (r * r + 2 * r) * 4 * 2
    y = tokens * hidden * (1 + (2 if form == "bf16+fp8" else 0)) + tokens * hidden // 128 * 4 * (
        2 if form == "fp8_shared" else 1)
    return moved + y


def rows(timer, tokens_list, hidden_list, forms):
    from deep_gemm.mega_mhc.plan import MhcOverrides
    from deep_gemm.testing.mega_mhc import make_inputs, make_outputs, run_kernels
    results = []
    for hidden in hidden_list:
        for form in forms:
            for tokens in tokens_list:
                d = make_inputs(tokens, hidden, shifted=form == "fp8_shared", device="cuda", sinkhorn_iters=20)
                out = make_outputs(d, "gemm" if form == "bf16+fp8" else "routed", bf16=form == "bf16+fp8",
                                   block_m=192)
                overrides = MhcOverrides(kernels=True)
                us = timer(lambda: run_kernels(d, out, overrides))
                nbytes = _bytes(tokens, hidden, form)
                src = torch.zeros(nbytes // 4, dtype=torch.bfloat16, device="cuda")
                dst = torch.empty_like(src)
                # (an elementwise kernel: a device-to-device memcpy is not among the timer's kernels)
                copy_us = timer(lambda: torch.neg(src, out=dst))
                row = dict(table="mega_mhc", m=tokens, k=hidden, form=form, us=us, gbps=nbytes / us / 1e3,
                           note=f"copy of the same bytes {copy_us:.1f} us")
                print(f" > mega_mhc (t={tokens:5}, h={hidden}, {form:10}): {us:7.1f} us | "
                      f"{nbytes / us / 1e3:5.0f} GB/s | copy {copy_us:6.1f} us", flush=True)
                results.append(row)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    parser.add_argument("--hidden", default=",".join(map(str, HIDDEN)))
    parser.add_argument("--forms", default=",".join(FORMS))
    args = parser.parse_args()
    timer = KernelTimer()
    results = rows(timer, [int(t) for t in args.tokens.split(",")], [int(h) for h in args.hidden.split(",")],
                   args.forms.split(","))
    write_results(args.out, "bench_mega_mhc", results)


if __name__ == "__main__":
    main()
