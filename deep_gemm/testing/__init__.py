"""Testing and benchmarking helpers (DeepGEMM's ``deep_gemm.testing``)."""

from .numeric import assert_bitwise_equal, calc_diff, count_bytes  # noqa: F401
