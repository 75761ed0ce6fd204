"""``deep_gemm.utils.dist``: DeepGEMM's small torch.distributed helpers for multi-GPU tests and examples.

``init_dist`` reads the cluster from the environment as DeepGEMM's does: ``MASTER_ADDR`` (default 127.0.0.1),
``MASTER_PORT`` (8361), ``WORLD_SIZE`` (the number of nodes, 1) and ``RANK`` (this node's index, 0); each node runs
``num_local_ranks`` processes. Nothing here runs at import.
"""

from __future__ import annotations

import inspect
import os
from typing import Optional, Tuple

import torch
import torch.distributed as dist

__all__ = ["init_dist", "uneven_all_gather", "dist_print"]

# The local rank given to init_dist (dist_print prints once per node from local rank 0).
_local_rank: Optional[int] = None


def init_dist(local_rank: int, num_local_ranks: int,
              backend: str = "nccl") -> Tuple[int, int, dist.ProcessGroup]:
    """Join the process group (TCP rendezvous at ``MASTER_ADDR:MASTER_PORT``) and make ``cuda:<local_rank>`` this
    process's device and the default device of new tensors (for the NCCL backend).

    Returns ``(global rank, world size, a group of every rank)``. ``backend`` is ours (DeepGEMM always uses NCCL):
    ``"gloo"`` runs the same code on CPU-only machines.
    """
    global _local_rank
    known = getattr(dist.Backend, "backend_list", None)
    if known is not None and backend.lower() not in known:
        from ..core.errors import fail
        fail(f"backend: expected a registered torch.distributed backend ({', '.join(known)}), got {backend!r}")
    address = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "8361"))
    num_nodes = int(os.environ.get("WORLD_SIZE", "1"))
    node_rank = int(os.environ.get("RANK", "0"))
    _local_rank = local_rank

    world_size = num_nodes * num_local_ranks
    kwargs = dict(backend=backend, init_method=f"tcp://{address}:{port}", world_size=world_size,
                  rank=node_rank * num_local_ranks + local_rank)
    uses_cuda = backend == "nccl"
    # Binding the group to its device lets NCCL set up eagerly (torch >= 2.3 takes device_id).
    if uses_cuda and "device_id" in inspect.signature(dist.init_process_group).parameters:
        kwargs["device_id"] = torch.device("cuda", local_rank)
    dist.init_process_group(**kwargs)
    if uses_cuda:
        torch.set_default_device("cuda")
        torch.cuda.set_device(local_rank)
    return dist.get_rank(), dist.get_world_size(), dist.new_group(list(range(world_size)))


def uneven_all_gather(tensor: torch.Tensor, dim: int = 0,
                      group: Optional[dist.ProcessGroup] = None) -> torch.Tensor:
    """All-gather tensors whose size along ``dim`` differs per rank; returns them concatenated along ``dim`` in
    rank order. Every other dimension must agree. Each rank's size is exchanged first (one small all-gather, read
    on the host), then every tensor is zero-padded to the largest size, gathered, and trimmed back."""
    world_size = dist.get_world_size(group)
    local_size = torch.tensor([tensor.size(dim)], dtype=torch.long, device=tensor.device)
    sizes = [torch.empty_like(local_size) for _ in range(world_size)]
    dist.all_gather(sizes, local_size, group=group)
    sizes = [int(s.item()) for s in sizes]
    longest = max(sizes)

    padded = tensor.contiguous()
    if tensor.size(dim) < longest:
        pad_shape = list(tensor.shape)
        pad_shape[dim] = longest - tensor.size(dim)
        padded = torch.cat([padded, tensor.new_zeros(pad_shape)], dim=dim)
    gathered = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(gathered, padded, group=group)
    return torch.cat([part.narrow(dim, 0, size) for part, size in zip(gathered, sizes)], dim=dim)


def dist_print(s: str = "", once_in_node: bool = False) -> None:
    """Print ``s`` (from local rank 0 only with ``once_in_node``), then wait at a barrier for every rank."""
    if _local_rank is None:
        raise RuntimeError("dist_print: call init_dist first")
    if not once_in_node or _local_rank == 0:
        print(s, flush=True)
    dist.barrier()
