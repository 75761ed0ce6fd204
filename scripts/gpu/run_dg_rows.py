"""DeepGEMM's own tests through run_dg_tests.py (one timer for both packages), on every ROW_STRIDE-th row of each
test's enumeration only, so a same-call yardstick of several test functions fits a few minutes. Both packages skip
the same rows (the enumerations do not depend on the package), so their " > Perf" lines still pair in
compare_perf_lines.py; a run cut by its time limit pairs the rows both sides reached.

    ROW_STRIDE=2 python scripts/gpu/run_dg_rows.py .dg/DeepGEMM/tests test_fp8_fp4:test_m_grouped_gemm_masked
"""

import itertools
import os
import runpy
import sys

tests_dir = sys.argv[1]
stride = int(os.environ.get("ROW_STRIDE", "1"))
sys.path.insert(0, tests_dir)
try:
    import generators  # noqa: E402  (DeepGEMM's tests/generators.py: the row enumerations its test files import)
except Exception as e:  # noqa: BLE001  (run_dg_tests.py then reports the test file's import failure itself)
    print(f"run_dg_rows: generators not importable ({type(e).__name__}: {e}); every row runs", flush=True)
    stride = 1


def _every(gen_fn):
    def rows(*args, **kwargs):
        return itertools.islice(gen_fn(*args, **kwargs), 0, None, stride)
    return rows


if stride > 1:
    for name in dir(generators):
        # (the *_test_variants helpers enumerate correctness variants of one row, not rows: kept whole)
        if name.startswith("enumerate_") and not name.endswith("_variants"):
            setattr(generators, name, _every(getattr(generators, name)))
_dg = sys.modules.get("deep_gemm")
print(f"run_dg_rows: deep_gemm from {getattr(_dg, '__file__', None)}, every {stride} row(s)", flush=True)
tools = os.path.join(os.path.dirname(__file__), "..", "dg")
if not os.path.exists(os.path.join(tools, "run_dg_tests.py")):
    tools = ".dg/tools"
sys.argv = [os.path.join(tools, "run_dg_tests.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
