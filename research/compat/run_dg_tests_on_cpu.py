"""DeepGEMM's tests/test_layout.py and test_legacy.py against our package on a machine without a GPU.

Their tensors are created with device='cuda'; here torch's factory functions map that to the CPU, the benchmark
timer is a stub and shapes are reduced where the CPU reference would take minutes (test_legacy, test_sf_layout).
A CPU pre-check of the SHIM=0 runs in scripts/gpu/compat.sh, not a replacement for them.

    PYTHONPATH=$PWD python research/compat/run_dg_tests_on_cpu.py layout|layout_k|legacy
    TRITON_INTERPRET=1 PYTHONPATH=$PWD python research/compat/run_dg_tests_on_cpu.py legacy   # our Triton kernels
"""
import functools, os, sys, torch
for name in ("randn", "empty", "zeros", "tensor", "arange", "full", "ones", "randint", "empty_like"):
    orig = getattr(torch, name)
    def wrap(orig):
        @functools.wraps(orig)
        def f(*a, **k):
            if k.get("device") == "cuda":
                k["device"] = "cpu"
            return orig(*a, **k)
        return f
    setattr(torch, name, wrap(orig))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".dg", "DeepGEMM", "tests"))
import deep_gemm, deep_gemm.testing as T
T.bench_kineto = lambda *a, **k: 1e-6
T.get_arch_major = lambda: 9
import generators
generators.get_arch_major = lambda: 9
import test_layout
test_layout.bench_kineto = T.bench_kineto
test_layout.get_arch_major = lambda: 9
test_layout.test_sf_layout_kernels = test_layout.test_sf_layout_kernels
which = sys.argv[1]
if which == "layout_k":
    test_layout.test_k_grouped_sf_layout_kernels()
elif which == "layout":
    # a reduced enumerate: small mn/k
    def small():
        for use_ue8m0 in (False, True):
            for with_transpose in (True, False):
                for mn in (64, 65):
                    for k in (128, 512, 640):
                        for num_groups in (1, 2):
                            deep_gemm.set_mk_alignment_for_contiguous_layout(128)
                            yield mn, k, with_transpose, use_ue8m0, num_groups, 128
    test_layout.enumerate_sf_layout = small
    test_layout.test_sf_layout_kernels()
print("OK", which)
if which == "legacy":
    import test_legacy
    from generators import MajorTypeAB, KernelType
    test_legacy.bench_kineto = T.bench_kineto
    def small_m(dtype):
        for num_groups, em in ((2, 100), (3, 60)):
            for n, k in ((256, 192), (128, 320)):
                for major_b in (MajorTypeAB.KMajor, MajorTypeAB.MNMajor):
                    yield None, None, num_groups, em, n, k, MajorTypeAB.KMajor, major_b, False, False
    def small_k(dtype):
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)
        for num_groups, m, n in ((2, 64, 128), (3, 128, 64)):
            ks = [128 * (i + 1) for i in range(num_groups)]
            yield num_groups, m, n, MajorTypeAB.MNMajor, MajorTypeAB.MNMajor, ks, ks, 128, 128, 128, False
    test_legacy.enumerate_m_grouped_contiguous = small_m
    test_legacy.enumerate_k_grouped_contiguous = small_k
    test_legacy.test_m_grouped_gemm_contiguous_tl()
    test_legacy.test_k_grouped_gemm_contiguous_tl()
    print("OK legacy")
