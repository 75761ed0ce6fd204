"""In-process A/B of the prefill interior loop: PrefillConfig.lean_interior on (the default at H >= 32) against off
(the loop before it), on the three prefill rows of the same-call table against DeepGEMM, alternating old / new
twice, every output bit compared. DeepGEMM's times are those of research/results/2026-12-03-h200-s29-call5/
prefill_compare.txt (same GPU, same timer), not re-measured here.

    python research/probes/prefill_lean_ab.py        (GPU; from the repository root, PYTHONPATH=.)
"""

import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

from bench_mqa_logits import prefill_inputs  # noqa: E402
from harness import kernel_times_by_name  # noqa: E402

from deep_gemm._ops.library import run_launcher  # noqa: E402
from deep_gemm.attention import triton_launch  # noqa: E402

# (S, SK, H, D, windows, DeepGEMM us from the session-29 call-5 same-call table)
ROWS = [(2048, 8192, 64, 128, "causal", 222.5), (2048, 65536, 64, 128, "causal", 1885.6),
        (8192, 65536, 64, 128, "cp", 3838.8)]
REPS = int(os.environ.get("AB_REPS", "10"))


def main():
    new = triton_launch.prefill_config(64, 128, False)
    old = dataclasses.replace(new, lean_interior=False)
    print(f"new {new}\nold {old}", flush=True)
    for s, sk, h, d, windows, dg_us in ROWS:
        q, kv, w, ks, ke = prefill_inputs(s, sk, h, d, windows)
        args = (q, None, kv[0], kv[1], w, ks, ke, True, 0, torch.float32)  # (clean: every element written)

        def call(cfg, args=args):
            return run_launcher("fp8_fp4_mqa_logits", *args, launcher_kwargs=dict(config=cfg))

        same = torch.equal(call(old).view(torch.int32), call(new).view(torch.int32))
        times = {"old": [], "new": []}
        for _ in range(2):
            for tag, cfg in (("old", old), ("new", new)):
                times[tag].append(kernel_times_by_name(lambda: call(cfg), ("mqa_logits",), reps=REPS)["mqa_logits"])
        t_old, t_new = min(times["old"]), min(times["new"])
        print(f"prefill S={s} SK={sk} H={h} D={d} {windows}: old {t_old:8.1f} us {times['old']}  new {t_new:8.1f} us "
              f"{times['new']}  new/old {t_new / t_old:.3f}  DeepGEMM {dg_us} us: old {dg_us / t_old:.3f}x "
              f"new {dg_us / t_new:.3f}x  bits {'same' if same else 'DIFFER'}", flush=True)
        del q, kv, w, ks, ke, args
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
