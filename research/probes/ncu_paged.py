"""One warm fp8_paged_mqa_logits call for Nsight Compute, under this package or DeepGEMM (profile the third launch
of the logits kernel). Uses benchmarks/bench_mqa_logits.py's input builder, so the profiled call is a bench row.

    python research/probes/ncu_paged.py [B NEXT_N H D AVG_CTX] [--plain]   # default: 256 2 64 128 65536

--plain (this package only): the default config with the plain page loop (lean_page_loop=False, the session-24
default on row pairs) through the launcher, for a same-call comparison with the lean one.
"""

import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.append(os.path.join(ROOT, "benchmarks"))  # after DeepGEMM when it is first on the path
import deep_gemm  # noqa: E402
from bench_mqa_logits import BLOCK_KV, paged_inputs  # noqa: E402

plain = "--plain" in sys.argv
args = [a for a in sys.argv[1:] if a != "--plain"]
batch, next_n, h, d, avg = (int(x) for x in (args[:5] if len(args) >= 5 else (256, 2, 64, 128, 65536)))
torch.manual_seed(0)
q, cache, w, lens2d, table, max_len, lens = paged_inputs(batch, next_n, h, d, avg)
meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, deep_gemm.get_num_sms())
for _ in range(3):
    if plain:
        import dataclasses

        from deep_gemm._ops.library import run_launcher
        from deep_gemm.attention.triton_launch import paged_default_config
        cfg = dataclasses.replace(paged_default_config(next_n, h, d, BLOCK_KV, False), lean_page_loop=False)
        run_launcher("fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta, max_len, False,
                     torch.float32, None, launcher_kwargs=dict(config=cfg))
    else:
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens2d, table, meta, max_len, clean_logits=False,
                                           logits_dtype=torch.float32)
torch.cuda.synchronize()
print("bytes read", int(lens.sum()) * (d + 4))
