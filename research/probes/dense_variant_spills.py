"""Shared memory and spilled bytes per thread of the warp-specialised variants sweep_fp8_configs.py forces on the dense
rows (sm_90a, no GPU; run without TRITON_INTERPRET): python research/probes/dense_variant_spills.py"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from compile_check import compile_fp8_gemm_ws, spilled_bytes  # noqa: E402

# (name, compile_check.compile_fp8_gemm_ws arguments): the sweep's variant and the budget the plan would keep
CASES = [
    ("m256-s3 r232", dict(bm=256, waves=2, stages=3)),
    ("m256-s4 r232", dict(bm=256, waves=2, stages=4)),
    ("m256-s4 r224", dict(bm=256, waves=2, stages=4, consumer_regs=224, producer_regs=56)),
    ("m256-s4 r240", dict(bm=256, waves=2, stages=4, consumer_regs=240, producer_regs=32)),
    ("n256-s3 r224", dict(waves=2, wave_n=True, stages=3, consumer_regs=224, producer_regs=56)),
    ("n256-s4 r232", dict(waves=2, wave_n=True, stages=4)),
    ("n256-s4 r224", dict(waves=2, wave_n=True, stages=4, consumer_regs=224, producer_regs=56)),
    ("n256-s4 r240", dict(waves=2, wave_n=True, stages=4, consumer_regs=240, producer_regs=32)),
    ("1d1d r232", dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True)),
    ("1d1d r224", dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True,
                       consumer_regs=224, producer_regs=56)),
    ("1d1d r240", dict(waves=2, wave_n=True, stages=3, b_per_row=True, has_c=True, out="fp32", c_tma=True,
                       consumer_regs=240, producer_regs=32)),
]
for name, cfg in CASES:
    t = time.time()
    try:
        ck = compile_fp8_gemm_ws(**cfg)
        print(f"{name:14s} smem {ck.metadata.shared:6d} spilled {spilled_bytes(ck.asm['cubin']):4d} B"
              f"  {time.time() - t:.0f}s", flush=True)
    except Exception as e:  # noqa: BLE001 - report and build the rest
        print(f"{name:14s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
