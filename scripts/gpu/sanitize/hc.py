"""Sanitizer cases of the HyperConnection prenorm GEMM (see README.md in this folder; the layout kernels' cases are
in layout.py): small odd shapes, each run through the Triton launcher (forced configs where the heuristic would pick
another path) and checked against the torch reference."""

from __future__ import annotations

import torch

from deep_gemm.core.registry import run_launcher
from deep_gemm.hyperconnection import plan as hc_plan
from deep_gemm.hyperconnection.plan import HcOverrides
from deep_gemm.hyperconnection.reference import round_to_tf32, split_k_blocks
from deep_gemm.testing import calc_diff

BLOCK_K = 64


def _hc(m, n, k, num_splits, config=None):
    def case():
        a = torch.randn(m, k, device="cuda").bfloat16()
        b = torch.randn(n, k, device="cuda")
        lead = () if num_splits is None else (num_splits,)
        d = torch.full((*lead, m, n), float("nan"), device="cuda")
        s = torch.full((*lead, m), float("nan"), device="cuda")
        extra = {} if config is None else dict(overrides=HcOverrides(config=config))
        result = run_launcher("tf32_hc_prenorm_gemm", a, b, d, s, num_splits, launcher_kwargs=extra)
        if result is NotImplemented:
            raise RuntimeError("the Triton launcher declined")
        torch.cuda.synchronize()
        b64 = round_to_tf32(b).double()
        for split in range(num_splits or 1):
            lo, hi = split_k_blocks(k // BLOCK_K, num_splits or 1, split)
            part = a.double()[:, lo * BLOCK_K:hi * BLOCK_K]
            want = part @ b64[:, lo * BLOCK_K:hi * BLOCK_K].T
            got = d if num_splits is None else d[split]
            got_s = s if num_splits is None else s[split]
            if hi == lo:
                ok = not got.any() and not got_s.any()
            else:
                ok = calc_diff(got, want) < 1e-10 and calc_diff(got_s, part.square().sum(-1)) < 1e-10
            if not ok:
                raise AssertionError(f"split {split} differs from the reference")
    return case


CASES = [
    ("hc_m13_unsplit_sub_reduce", _hc(13, 24, 1088, None, hc_plan.HcConfig(16, 32, 3, 5, 4))),
    ("hc_m37_splits5_empty", _hc(37, 8, 256, 5)),
    ("hc_m70_n64_sub2", _hc(70, 64, 640, 2, hc_plan.HcConfig(64, 64, 3, 2, 1))),
    ("hc_m1_n128", _hc(1, 128, 448, None)),
    ("hc_m131_heuristic", _hc(131, 24, 7168, None)),
]
