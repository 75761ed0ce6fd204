"""``deep_gemm.bench_kineto`` and ``deep_gemm.calc_diff`` at the top level: DeepGEMM 1.x call sites import them from
the package itself (``from deep_gemm import bench_kineto, calc_diff``); they are ``deep_gemm.testing``'s functions."""

from .testing import bench_kineto, calc_diff

__all__ = ["bench_kineto", "calc_diff"]
