"""Debug: dump the along-N two-wave variant's outputs at failing shapes for offline analysis (temporary)."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
import deep_gemm  # noqa: E402
from deep_gemm.gemm import fp8_triton  # noqa: E402
from deep_gemm.gemm.operands import dequantize  # noqa: E402
from deep_gemm.testing import calc_diff  # noqa: E402
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
fp8_triton._WS_MODE = "on"
out = os.environ.get("OUT", "/tmp")
dump = {}
for tag, variant in (("n", dict(waves=2, wave_n=True, stages=4)), ("n1", dict(waves=2, wave_n=True, stages=1 + 1))):
    fp8_triton.WS_OVERRIDE = variant
    for m, n, k in [(256, 256, 256), (1024, 256, 256), (256, 256, 128)]:
        torch.manual_seed(0)
        a = per_token_cast_to_fp8(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(n, k, device="cuda", dtype=torch.bfloat16), use_ue8m0=False)
        runs = []
        for rep in range(3):
            d = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            deep_gemm.fp8_gemm_nt(a, b, d)
            runs.append(d.cpu())
        ref = dequantize(a[0], a[1], (1, 128)) @ dequantize(b[0], b[1], (128, 128)).T
        print(tag, (m, n, k), [f"{calc_diff(r.cuda(), ref):.1e}" for r in runs],
              "reps equal", all(torch.equal(runs[0], r) for r in runs), flush=True)
        dump[f"{tag}-{m}x{n}x{k}"] = dict(a=a[0].cpu(), sfa=a[1].cpu(), sfa_stride=a[1].stride(), b=b[0].cpu(),
                                          sfb=b[1].cpu(), d=runs, ref=ref.cpu())
torch.save(dump, os.path.join(out, "dump.pt"))
