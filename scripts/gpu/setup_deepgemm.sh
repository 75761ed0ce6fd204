#!/usr/bin/env bash
# On the GPU machine: make DeepGEMM (the CUDA original, prepared in .dg/ by scripts/dg/prepare-deepgemm.sh on the
# CPU side and carried; docs/BENCHMARKING.md) importable for same-run comparisons. Builds it in place (~75 s) unless a carried build
# (.dg/DeepGEMM/deep_gemm/_C*.so) is already there. Afterwards run DeepGEMM as
#   PYTHONPATH=$PWD/.dg/DeepGEMM LD_PRELOAD=/lib/x86_64-linux-gnu/libstdc++.so.6 python3 ...
# (`dg_env` below prints those variables; the LD_PRELOAD works around a std::regex crash in its JIT on that image).
set -euo pipefail
LOG=${1:-/tmp/dg-build.log}
if [ ! -d .dg/DeepGEMM ]; then echo "no .dg/DeepGEMM: carry .dg (see docs/BENCHMARKING.md)" >&2; exit 1; fi
# The comparison tools travel with the repository: .dg/tools is always this checkout's scripts/dg.
mkdir -p .dg/tools && cp scripts/dg/* .dg/tools/
if ls .dg/DeepGEMM/deep_gemm/_C*.so > /dev/null 2>&1; then
  (cd .dg/DeepGEMM && ln -sfn $PWD/third-party/cutlass/include/cutlass deep_gemm/include/cutlass \
     && ln -sfn $PWD/third-party/cutlass/include/cute deep_gemm/include/cute)
  echo "DeepGEMM: using the carried build"
else
  start=$(date +%s)
  OUT=$(dirname "$LOG") bash .dg/tools/build-deepgemm-on-device.sh
  echo "DeepGEMM: built in $(( $(date +%s) - start )) s"
fi
