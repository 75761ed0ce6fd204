"""The grouping kinds of the FP8 GEMM kernels (their GROUPING constexpr), shared by the tl.* kernel
(gemm/fp8/kernels/gemm.py) and the Gluon kernel (gemm/fp8/kernels/gemm_ws.py). The launchers name them through
``fp8_launch.GROUPING``, plain ints so that importing the launchers does not import Triton;
tests/test_fp8_gemm_plan_cpu.py checks that the two agree."""

import triton.language as tl

DENSE = tl.constexpr(0)
M_IDS = tl.constexpr(1)
M_PSUM = tl.constexpr(2)
MASKED = tl.constexpr(3)
K_GROUPED = tl.constexpr(4)
