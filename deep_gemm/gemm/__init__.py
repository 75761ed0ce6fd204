"""GEMM families: FP8 (dense, M-grouped, K-grouped), BF16 and cuBLASLt-style GEMMs; fp4/ (K-grouped FP4, NVFP4) and
symmetric/ (batched SYRK / SYMM) register their ops when the public surface imports them."""

from .fp8 import ops as fp8_ops  # noqa: F401  (registers the FP8 ops)
from .bf16 import ops as bf16_ops  # noqa: F401  (registers the BF16 GEMM ops)
from .cublaslt import ops as cublaslt_ops  # noqa: F401  (registers the vendor-BLAS GEMM ops)
