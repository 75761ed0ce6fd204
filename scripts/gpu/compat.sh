#!/usr/bin/env bash
# Drop-in compatibility on the GPU. Expected wall time: ~3 minutes warm, ~4 cold (Triton compiles of the
# legacy kernels; DeepGEMM autotunes its legacy kernels once per process). Every step has its own time limit (the
# sum of the limits is ~13 minutes): run it with FAMILIES=compat FAMILY_TIMEOUT=600 bash scripts/gpu/all.sh.
#   1. our GPU tests: legacy Triton kernels vs references, client call patterns, utils, README blocks on the GPU;
#   2. SGLang-/vLLM-style import lines in a fresh process;
#   3. DeepGEMM's own tests that use utils/legacy against our package (SHIM=0): test_layout, test_legacy,
#      test_lazy_init, and the import lines of every DeepGEMM test file; then test_legacy against DeepGEMM itself
#      (same timer) for the perf lines;
#   4. python -m deep_gemm on the GPU;
#   5. only with LEGACY_SWEEP=1 (default off): benchmarks/sweeps/sweep_legacy_tiles.py, the legacy kernels' candidate
#      tiles timed on test_legacy's rows (default arguments: the 4-group rows, 228 (row, tile) timings and 69
#      compiles, ~2-3 minutes warm, ~4-5 cold; limit LEGACY_SWEEP_TIMEOUT, 420 s, and the sweep starts no row
#      after 375 s so its summary still prints; LEGACY_SWEEP_ARGS="--groups 4,8,16" for every row, ~7 minutes).
#      LEGACY_SWEEP=only runs the sweep alone (no DeepGEMM needed):
#        DG=0 FAMILIES=compat FAMILY_TIMEOUT=480 LEGACY_SWEEP=only bash scripts/gpu/all.sh
# Every step runs whatever the earlier ones did; the failed steps are listed at the end.
set -uo pipefail
OUT_DIR=${OUT:?set OUT}/compat
mkdir -p "$OUT_DIR"
export PYTHONPATH=$PWD
RUNNER=scripts/dg/run_dg_tests.py
[ -f "$RUNNER" ] || RUNNER=.dg/tools/run_dg_tests.py
DG_TESTS=.dg/DeepGEMM/tests
FAILED=()
step() {  # step NAME TIMEOUT COMMAND...
  local name=$1 limit=$2; shift 2
  local start=$(date +%s)
  timeout "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $(( $(date +%s) - start )) s" | tee -a "$OUT_DIR/summary.txt"
  [ $rc -ne 0 ] && FAILED+=("$name")
  tail -n 3 "$OUT_DIR/$name.log"
}

# The legacy tile sweep: one line per (row, tile), BEST per row, GEOMEAN per tile; JSON and a summary beside it.
legacy_sweep() {
  # shellcheck disable=SC2086
  step legacy_tile_sweep "${LEGACY_SWEEP_TIMEOUT:-420}" python3 benchmarks/sweeps/sweep_legacy_tiles.py \
    ${LEGACY_SWEEP_ARGS:---groups 4} --budget-s $(( ${LEGACY_SWEEP_TIMEOUT:-420} - 45 )) \
    --out "$OUT_DIR/legacy_tile_sweep.json"
  grep -h "^BEST\|^GEOMEAN\|^BAD\|^FAIL\|^COMPILE-FAIL\|^#" "$OUT_DIR/legacy_tile_sweep.log" \
    > "$OUT_DIR/legacy_tile_sweep_summary.txt" 2>/dev/null
}
if [ "${LEGACY_SWEEP:-0}" = "only" ]; then
  legacy_sweep
  echo "failed steps: ${FAILED[*]:-none}" | tee -a "$OUT_DIR/summary.txt"
  exit 0
fi

# 1. Our tests on the GPU (the dist test is CPU-only and slow: deselected).
step pytest_compat 180 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
  tests/test_compat_legacy.py tests/test_compat_clients.py tests/test_readme.py tests/test_utils_modules.py \
  tests/test_c_shim.py -k "not init_dist"

# 2. Client import lines (SGLang deep_gemm_wrapper / fp8_utils, vLLM utils/deep_gemm.py, DeepJIT-era _C.get_jit).
step client_imports 60 python3 -c "
import deep_gemm
from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor, get_mn_major_tma_aligned_packed_ue8m0_tensor
import deep_gemm.utils.layout
from deep_gemm.utils.math import per_block_cast_to_fp8, per_token_cast_to_fp8, align, ceil_div
from deep_gemm.utils import init_dist, uneven_all_gather
from deep_gemm import fp8_m_grouped_gemm_nt_masked, m_grouped_fp8_gemm_nt_contiguous, fp8_gemm_nt
from deep_gemm import gemm_fp8_fp8_bf16_nt, m_grouped_gemm_fp8_fp8_bf16_nt_contiguous, get_col_major_tma_aligned_tensor
import deep_gemm.legacy
print('get_jit', deep_gemm._C.get_jit().cache_dir, 'num_sms', deep_gemm.get_num_sms())
"

# 3. DeepGEMM's tests against our package, then test_legacy against DeepGEMM for its numbers.
if [ -d "$DG_TESTS" ]; then
  step dg_imports_ours 120 python3 - <<'PY'
import ast, pathlib, sys
sys.path.insert(0, ".dg/DeepGEMM/tests")
bad = 0
for f in sorted(pathlib.Path(".dg/DeepGEMM/tests").glob("*.py")):
    for node in ast.parse(f.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            line = ast.unparse(node)
            try:
                exec(line, {})
            except Exception as e:
                bad += 1
                print(f"FAIL {f.name}: {line}: {type(e).__name__}: {e}")
print("import lines failing:", bad)
sys.exit(1 if bad else 0)
PY
  SHIM=0 step dg_test_layout_ours 90 python3 "$RUNNER" "$DG_TESTS" test_layout
  SHIM=0 step dg_test_legacy_ours 120 python3 "$RUNNER" "$DG_TESTS" test_legacy
  step dg_test_lazy_init_ours 60 python3 "$DG_TESTS/test_lazy_init.py" --num-processes 1
  PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6 SHIM=0 \
    step dg_test_legacy_deepgemm 120 python3 "$RUNNER" "$DG_TESTS" test_legacy
  grep -h "Perf" "$OUT_DIR/dg_test_legacy_ours.log" > "$OUT_DIR/legacy_perf_ours.txt" 2>/dev/null
  grep -h "Perf" "$OUT_DIR/dg_test_legacy_deepgemm.log" > "$OUT_DIR/legacy_perf_deepgemm.txt" 2>/dev/null
  [ -f scripts/dg/compare_perf_lines.py ] && python3 scripts/dg/compare_perf_lines.py \
    "$OUT_DIR/dg_test_legacy_ours.log" "$OUT_DIR/dg_test_legacy_deepgemm.log" > "$OUT_DIR/legacy_perf_compare.txt" 2>&1
else
  echo "no $DG_TESTS: DeepGEMM's tests skipped" | tee -a "$OUT_DIR/summary.txt"
fi

# Lazy initialisation, with the exit status checked (DeepGEMM's script ignores its children's): after
# `import deep_gemm` (and touching its surface) a forked child can still initialise CUDA.
step lazy_init_forked_child 60 python3 -c "
import multiprocessing as mp, torch, deep_gemm, deep_gemm.utils.layout, deep_gemm.legacy
deep_gemm.get_mk_alignment_for_contiguous_layout(); deep_gemm._C.get_jit()
assert not torch.cuda.is_initialized(), 'import deep_gemm initialised CUDA'
def child():
    torch.cuda.set_device(0)
    x = torch.ones(4, device='cuda'); assert float(x.sum()) == 4.0
p = mp.get_context('fork').Process(target=child); p.start(); p.join()
assert p.exitcode == 0, p.exitcode
print('forked child ran CUDA after import deep_gemm')
"

# 4. The demo on the GPU.
step demo 90 python3 -m deep_gemm

# 5. The legacy tile sweep (opt-in).
[ "${LEGACY_SWEEP:-0}" = "1" ] && legacy_sweep

echo "failed steps: ${FAILED[*]:-none}" | tee -a "$OUT_DIR/summary.txt"
