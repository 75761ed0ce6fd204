"""One warm fp8_paged_mqa_logits call for Nsight Compute, under this package or DeepGEMM (profile the third launch
of the logits kernel). Uses benchmarks/bench_mqa_logits.py's input builder, so the profiled call is a bench row.

    python research/probes/ncu_paged.py [B NEXT_N H D AVG_CTX]   # default: 256 2 64 128 65536
"""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.append(os.path.join(ROOT, "benchmarks"))  # after DeepGEMM when it is first on the path
import deep_gemm  # noqa: E402
from bench_mqa_logits import BLOCK_KV, paged_inputs  # noqa: E402

args = sys.argv[1:]
batch, next_n, h, d, avg = (int(x) for x in (args[:5] if len(args) >= 5 else (256, 2, 64, 128, 65536)))
torch.manual_seed(0)
q, cache, w, lens2d, table, max_len, lens = paged_inputs(batch, next_n, h, d, avg)
meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, deep_gemm.get_num_sms())
for _ in range(3):
    deep_gemm.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens2d, table, meta, max_len, clean_logits=False,
                                       logits_dtype=torch.float32)
torch.cuda.synchronize()
print("bytes read", int(lens.sum()) * (d + 4))
