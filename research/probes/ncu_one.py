"""One warm 4096x4096x7168 FP8 GEMM for Nsight Compute (profile the third launch: the first two compile/warm).

    python research/probes/ncu_one.py M N K [BM,BN,SPLIT]   # optional: that tile config (DG_FP8_WS picks the kernel)
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import deep_gemm  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

m, n, k = (int(x) for x in (sys.argv[1:4] if len(sys.argv) > 3 else (4096, 4096, 7168)))
a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
if len(sys.argv) > 4:
    from deep_gemm.gemm import fp8_configs, fp8_triton
    from deep_gemm.gemm.operands import resolve_recipe
    bm, bn, split = (int(x) for x in sys.argv[4].split(","))
    cfg = fp8_configs._config(bm, bn, split)
    recipe = resolve_recipe(None, None, None, b[1])
    for _ in range(3):
        fp8_triton._launch_dense(a[0], a[1], b[0], b[1], d, None, recipe.b[0] == 1,
                                 overrides=fp8_triton.Fp8Overrides(config=cfg))
else:
    for _ in range(3):
        deep_gemm.fp8_gemm_nt(a, b, d)
torch.cuda.synchronize()
