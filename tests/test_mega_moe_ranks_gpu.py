"""``fp8_mega_moe`` over several GPUs (symmetric memory, one process per GPU): the several-rank kernels against the
reference (``mega_moe_rank_cases.expected``) on 2, 4 and 8 ranks: two eager calls (statistics accumulate), the
status word clear, then one call captured in a CUDA graph and replayed. Skipped without at least that many CUDA
devices; ``scripts/gpu/mega_ranks.sh`` runs it as a script and keeps the ranks' results (one JSON file per world size).

NVLink multicast stays off in every process (``MULTICAST_OFF``): the kernels only use peer pointers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import pytest
import torch

# Set before any process group or symmetric memory exists, in the parent and in every rank.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
DEADLINE_S = 300

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA devices")]


def _rank_case(sc, block_m, masked_rank, with_stats, group, rank: int) -> dict:
    import deep_gemm
    from deep_gemm.mega import launch as mega_launch
    from deep_gemm.mega import plan as mega_plan
    from deep_gemm.mega.api import fp8_mega_moe_op_args
    from deep_gemm.testing import calc_diff
    from mega_moe_cases import CAPACITY, local_weights
    from mega_moe_rank_cases import check_rank, expected, scenario_data

    dev = torch.device("cuda", rank)
    data = scenario_data(sc, masked_rank)
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(group, sc.num_experts, CAPACITY, sc.topk, sc.hidden, sc.inter,
                                                      device=dev)
    n = data.x[rank].size(0)
    deep_gemm.mega_moe_pre_dispatch_sm90(data.x[rank].to(dev), data.topk_idx[rank].to(dev),
                                         data.topk_weights[rank].to(dev), buf.x, buf.x_sf, buf.topk_idx,
                                         buf.topk_weights, num_tokens=n)
    (l1, l1_sf), (l2, l2_sf) = local_weights(sc, data, rank)
    weights = ((l1.to(dev), l1_sf.to(dev)), (l2.to(dev), l2_sf.to(dev)))
    local = sc.num_experts // sc.num_ranks
    start = torch.arange(local, dtype=torch.int32) * 3 + 11
    stats = start.to(dev) if with_stats else None
    y = torch.full((n, sc.hidden), 7.0, dtype=torch.bfloat16, device=dev)
    kernels = deep_gemm.core.registry.kernels_of("fp8_mega_moe")
    overrides = mega_plan.MegaOverrides(block_m, kernels=True)
    args = fp8_mega_moe_op_args(y, *weights, buf, stats, activation_clamp=sc.clamp, fast_math=sc.fast_math)
    kernels.check(*args)
    for _ in range(2):
        assert kernels.triton(*args, overrides=overrides) is None
    torch.cuda.synchronize(dev)
    mega_launch.check_status(buf)
    want_y, want_stats = expected(sc, data, calls=2)
    check_rank(y.cpu(), want_y[rank], None if stats is None else stats.cpu(), start, want_stats[rank], rank)
    eager_diff = calc_diff(y.cpu(), want_y[rank]) if n else 0.0

    # One call captured (after the eager calls compiled the kernels and made the peer table) and replayed.
    graph_args = fp8_mega_moe_op_args(y, *weights, buf, None, activation_clamp=sc.clamp, fast_math=sc.fast_math)
    y.fill_(7.0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        assert kernels.triton(*graph_args, overrides=overrides) is None
    graph.replay()
    torch.cuda.synchronize(dev)
    mega_launch.check_status(buf)
    check_rank(y.cpu(), want_y[rank], None, None, None, rank)
    buf.destroy()
    return {"scenario": sc.id, "block_m": block_m, "rank": rank, "tokens": n, "eager_diff": float(eager_diff),
            "graph_replay": "ok"}


def _worker(rank: int, world: int, port: int, tests_dir: str, out_dir) -> None:
    os.environ.update(MULTICAST_OFF)
    sys.path.insert(0, tests_dir)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    import torch.distributed as dist
    from mega_moe_rank_cases import scenarios
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120),
                            device_id=torch.device("cuda", rank))
    results = []
    try:
        for case in scenarios(world):
            results.append(_rank_case(*case, dist.group.WORLD, rank))
            dist.barrier()
    finally:
        if out_dir:
            with open(os.path.join(out_dir, f"world{world}_rank{rank}.json"), "w") as f:
                json.dump(results, f, indent=1)
        dist.destroy_process_group()


def run_world(world: int, out_dir=None) -> None:
    """Spawn ``world`` ranks (one per GPU) and wait for them, at most DEADLINE_S seconds."""
    from mega_moe_cases import free_port, spawn_ranks
    os.environ.update(MULTICAST_OFF)
    try:
        if not spawn_ranks(_worker, (world, free_port(), os.path.dirname(os.path.abspath(__file__)), out_dir), world,
                           DEADLINE_S):
            raise TimeoutError(f"{world} GPU ranks did not finish within {DEADLINE_S} s (a rank hangs)")
    finally:
        if out_dir:  # one file per world size (what each rank finished, also when one failed)
            merged = {}
            for rank in range(world):
                path = os.path.join(out_dir, f"world{world}_rank{rank}.json")
                if os.path.exists(path):
                    with open(path) as f:
                        merged[rank] = json.load(f)
                    os.remove(path)
            with open(os.path.join(out_dir, f"world{world}.json"), "w") as f:
                json.dump(merged, f, indent=1)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_ranks_on_gpus(world):
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} CUDA devices")
    run_world(world)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="fp8_mega_moe over several GPUs against the reference")
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--out", default=None, help="directory for one JSON file of results per rank")
    ns = parser.parse_args()
    if ns.out:
        os.makedirs(ns.out, exist_ok=True)
    run_world(ns.world, ns.out)
    print(f"world {ns.world}: ok")
