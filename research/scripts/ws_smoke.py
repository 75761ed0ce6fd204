"""Quick correctness smoke test of the warp-specialised FP8 kernel (run with a short timeout: a pipeline bug shows
up as a hang). Exit code 0 only if every case matches the fp32 reference."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from deep_gemm._ops.library import run_launcher  # noqa: E402
from deep_gemm.gemm.fp8_plan import Fp8Overrides  # noqa: E402
from deep_gemm.gemm.operands import dequantize  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
WS_ON = dict(overrides=Fp8Overrides(ws_mode="on"))  # exercise the warp-specialised kernel whatever the default
ok = True
for m, n, k in [(256, 256, 512), (129, 200, 208), (4096, 4096, 7168), (300, 576, 7168)]:
    a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
    d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert run_launcher("fp8_gemm_nt", a[0], a[1], b[0], b[1], d, launcher_kwargs=WS_ON) is not NotImplemented
    torch.cuda.synchronize()
    diff = calc_diff(d, dequantize(a[0], a[1], (1, 128)) @ dequantize(b[0], b[1], (128, 128)).T)
    ok &= diff < 1e-3
    print(f"ws smoke {m}x{n}x{k}: calc_diff {diff:.2e}", flush=True)
# A grouped (psum) and a masked case through the same kernel.
g, n, k = 4, 512, 1024
ends = torch.tensor([100, 300, 700, 1000], dtype=torch.int32, device="cuda")
a = per_token_cast_to_fp8(torch.randn(1024, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
bq = [per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False) for _ in range(g)]
b = (torch.stack([q[0] for q in bq]), torch.stack([q[1] for q in bq]))
d = torch.full((1024, n), float("nan"), device="cuda", dtype=torch.bfloat16)
assert run_launcher("m_grouped_fp8_gemm_nt_contiguous", a[0], a[1], b[0], b[1], d, ends, use_psum_layout=True,
                    launcher_kwargs=WS_ON) is not NotImplemented
starts = [0, 128, 384, 768]
for i in range(g):
    s_, e_ = starts[i], int(ends[i])
    ref = dequantize(a[0][s_:e_], a[1][s_:e_], (1, 128)) @ dequantize(b[0][i], b[1][i], (128, 128)).T
    diff = calc_diff(d[s_:e_], ref)
    ok &= diff < 1e-3
    print(f"ws smoke psum group {i}: calc_diff {diff:.2e}", flush=True)
sys.exit(0 if ok else 1)
