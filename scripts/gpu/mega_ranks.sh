#!/usr/bin/env bash
# fp8_mega_moe over several GPUs (symmetric memory, one process per GPU, spawned by
# tests/test_mega_moe_ranks_gpu.py): the several-rank kernels against the reference on 2, 4 and 8 GPUs (those the
# machine has), eager and CUDA-graph replay. NVLink multicast stays off in every process. Writes $OUT/mega_ranks/:
# a JSON file (every rank's results) and a log per world size. A passing run is what lets the mega_ranks key leave
# AWAITING_GPU in deep_gemm/core/gpu_validation.py.
#   bash scripts/gpu/mega_ranks.sh            (about a minute per world size)
set -uo pipefail
D=${OUT:?run on the device machine with OUT set}/mega_ranks; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$D/gpu.txt"
nvidia-smi topo -m > "$D/topo.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$D/gpu.txt"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
status=0
for world in 2 4 8; do
  if [ "$gpus" -lt "$world" ]; then echo "world $world: skipped ($gpus GPUs)"; continue; fi
  start=$(date +%s)
  timeout "${MEGA_RANKS_TIMEOUT:-330}" python3 tests/test_mega_moe_ranks_gpu.py --world "$world" --out "$D" \
    > "$D/world$world.log" 2>&1
  rc=$?
  echo "world $world: exit $rc in $(( $(date +%s) - start )) s"
  if [ $rc -ne 0 ]; then status=1; tail -20 "$D/world$world.log"; fi
done
exit $status
