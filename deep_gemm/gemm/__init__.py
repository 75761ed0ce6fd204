"""GEMM families: FP8 (dense, M-grouped, K-grouped), BF16 and cuBLASLt-style GEMMs."""

from . import fp8_ops  # noqa: F401  (registers the FP8 ops)
from . import bf16_ops  # noqa: F401  (registers the BF16 GEMM ops)
from . import cublaslt_ops  # noqa: F401  (registers the vendor-BLAS GEMM ops)
