"""The FP8 GEMM kernels: the tl.* kernel (gemm) and the warp-specialised Gluon kernel (gemm_ws)."""
