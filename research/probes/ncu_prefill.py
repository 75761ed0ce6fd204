"""One warm fp8_mqa_logits prefill call for Nsight Compute (profile the third launch of the logits kernel).

    python research/probes/ncu_prefill.py [S SK H D WINDOWS]   # default: 2048 65536 64 128 causal (a bench row)

Uses benchmarks/bench_mqa_logits.py's input builder so the profiled call is the benchmark's row.
"""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import deep_gemm  # noqa: E402
from bench_mqa_logits import prefill_inputs  # noqa: E402

args = sys.argv[1:]
s, sk, h, d = (int(x) for x in (args[:4] if len(args) >= 4 else (2048, 65536, 64, 128)))
windows = args[4] if len(args) > 4 else "causal"
q, kv, w, ks, ke = prefill_inputs(s, sk, h, d, windows)
for _ in range(3):
    deep_gemm.fp8_mqa_logits(q, kv, w, ks, ke, clean_logits=False)
torch.cuda.synchronize()
