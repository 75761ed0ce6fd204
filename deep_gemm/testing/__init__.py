"""Testing and benchmarking helpers (DeepGEMM's ``deep_gemm.testing``)."""

from .bench import bench, bench_kineto  # noqa: F401
from .numeric import assert_bitwise_equal, calc_diff, count_bytes  # noqa: F401
from .utils import (  # noqa: F401
    empty_suppress, get_arch_major, ignore_env, suppress_stdout_stderr, test_filter)

__all__ = [
    "assert_bitwise_equal", "bench", "bench_kineto", "calc_diff", "count_bytes", "empty_suppress", "get_arch_major",
    "ignore_env", "suppress_stdout_stderr", "test_filter",
]
