"""Public Mega MoE API, call-for-call compatible with DeepGEMM's ``deep_gemm.mega``, its SM90 top-level names and its
``_C`` helpers.

What works today: the symmetric buffers (the SM100-style ring buffer and the SM90 FP8 pool buffer: sizes, slice
layout, allocation for one process, or for several CPU processes on a gloo group), the weight transforms, the
pre-dispatch ops and the fused layers (``fp8_mega_moe``, ``fp8_fp4_mega_moe``, ``bf16_mega_moe``;
``deep_gemm/mega/reference.py`` states the semantics). ``fp8_mega_moe`` and ``mega_moe_pre_dispatch_sm90`` have
Triton kernels for one CUDA rank; so has ``bf16_mega_moe`` (the post-expert norm takes the reference), and
``fp8_fp4_mega_moe`` (opt-in with ``MegaOverrides(kernels=True)`` until its GPU run). The reference runs on CPU
tensors (one process, or one process per rank on a gloo group) and, for the other layers and forms, as a slow
correctness path on one CUDA rank. Several CUDA ranks (symmetric memory) raise ``NotImplementedError``: not
implemented in this release, except ``fp8_mega_moe``, whose several-rank kernels run when asked for with
``MegaOverrides(kernels=True)`` through its launcher until they have passed their multi-GPU run
(``deep_gemm/mega/launch.py``).
"""

from __future__ import annotations

import types
import warnings
from typing import Callable, Optional, Tuple, Union

import torch

from ..core import registry as _registry
from ..core.errors import DeepGEMMError, fail, require, require_dim, require_dtype
from ..common.operands import unpack_pair
from ..utils.math import align
from . import buffer as _buffer
from . import layer as _layer
from . import reference as _reference

_ops = torch.ops.deep_gemm
Pair = Tuple[torch.Tensor, torch.Tensor]

__all__ = [
    "get_symm_buffer_size_for_mega_moe", "get_token_alignment_for_mega_moe", "get_ring_limit_for_mega_moe",
    "SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe",
    "fp8_fp4_mega_moe", "bf16_mega_moe",
    "SM90SymmBuffer", "get_symm_buffer_for_sm90_mega_moe", "transform_weights_for_mega_moe_sm90",
    "transform_scales_for_mega_moe", "fp8_mega_moe", "nvfp4_mega_moe", "mega_moe_pre_dispatch",
    "mega_moe_pre_dispatch_sm90", "get_block_m_for_mega_moe",
]

# Per-rank token capacities at or above this are prefill-sized: they get a fixed ring, not the decode-sized one.
PREFILL_TOKENS_THRESHOLD = 6144
# Prefill ring: 768 Ki tokens (about 8 GB of activations at DeepSeek V4 sizes; one expert per wave).
PREFILL_RING_TOKENS = 768 * 1024
# Decode ring: the largest ring a 4096-token, 72-rank, 6-local-expert, top-6 deployment can use (~18 GB there), so
# the wave heuristic can choose freely up to EP72 decoding.
DECODE_RING_REFERENCE = (4096, 6, 6, 72)  # (tokens per rank, local experts, top-k, ranks)
# L1 rows are regrouped in chunks of this many rows: [gate 0-7, up 0-7, gate 8-15, up 8-15, ...].
INTERLEAVE_ROWS = 8
# UTCCP (tensor-memory copy of scale factors) reads 128 rows as 4 groups of 32: rows are transposed in that tile.
UTCCP_ROWS, UTCCP_GROUPS = 128, 4
_MISSING_KERNEL = ("the fused Mega MoE kernel is not implemented in this release (it comes with expert-parallel MoE); "
                   "until then use "
                   "DeepEP-style dispatch, m_grouped_fp8_gemm_nt_contiguous and combine")


# ---- the _C helpers (positional-only, as DeepGEMM's pybind functions) -------------------------------------------

def get_token_alignment_for_mega_moe() -> int:
    """Per-rank token capacities and ring sizes are multiples of this (384: the LCM of the candidate BLOCK_Ms
    8, 16, 32, 64, 96, 128 and 192).

    Example
    -------
    >>> deep_gemm.get_token_alignment_for_mega_moe()
    384
    """
    return _ops.get_token_alignment_for_mega_moe()


def get_ring_limit_for_mega_moe(num_max_tokens_per_rank: int, num_local_experts: int, num_topk: int,
                                num_ranks: int, /) -> tuple[int, int]:
    """Bounds of the activation ring, in tokens: ``(min, max)``.

    ``min = num_ranks * T`` (one expert per wave: every rank's tokens may go to it); ``max = min(num_ranks * T *
    E_local, align(num_ranks * T * num_topk + E_local * 383, 384))`` (all local experts in one wave: every routed copy
    plus up to 383 padding rows per expert), and ``max = min`` when ``E_local == 1``.

    Parameters
    ----------
    num_max_tokens_per_rank : int
        ``T``, a positive multiple of ``get_token_alignment_for_mega_moe()``.
    num_local_experts, num_topk, num_ranks : int
        Positive.

    Example
    -------
    >>> deep_gemm.get_ring_limit_for_mega_moe(384, 8, 2, 1)
    (384, 3072)
    """
    low, high = _ops.get_ring_limit_for_mega_moe(num_max_tokens_per_rank, num_local_experts, num_topk, num_ranks)
    return low, high


SliceFn = Callable[[torch.Tensor], tuple]


def get_symm_buffer_size_for_mega_moe(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                                      hidden: int, intermediate_hidden: int, mma_type: str, activation: str,
                                      num_ring_tokens: int, /) -> tuple[int, SliceFn]:
    """Bytes of the Mega MoE symmetric buffer, and a function that slices a buffer into its views.

    Parameters
    ----------
    num_ranks : int
        Expert-parallel world size (``num_experts`` must be a multiple).
    num_experts, num_topk : int
        Total experts and experts per token (``1 <= num_topk <= num_experts``).
    num_max_tokens_per_rank : int
        ``T``, a multiple of ``get_token_alignment_for_mega_moe()`` (384).
    hidden, intermediate_hidden : int
        ``H`` and ``I``, multiples of 128.
    mma_type : str
        ``'fp8xfp4'`` (FP8 activations with UE8M0 scales, FP4 weights) or ``'bf16xbf16'``.
    activation : str
        ``'swiglu'``.
    num_ring_tokens : int
        ``R``, a multiple of 384 within ``get_ring_limit_for_mega_moe(T, num_experts // num_ranks, num_topk,
        num_ranks)``.

    Returns
    -------
    (int, callable)
        ``num_bytes`` and ``slice_fn(buffer)`` that takes a 1-D ``int8`` tensor of at least ``num_bytes`` bytes and
        returns views aliasing it: ``(x [T, H], x_sf [T, H/128] int32 K-major, topk_idx [T, k] int64,
        topk_weights [T, k] float32, l1_acts [R, H], l1_acts_sf int32 MN-major, l2_acts [R, I], l2_acts_sf int32
        MN-major)``; token views are FP8 e4m3 for ``fp8xfp4`` and BF16 for ``bf16xbf16`` (whose ``*_sf`` are None).
        The views come from the ``torch.ops.deep_gemm._slice_symm_buffer_for_mega_moe`` op and the serialised
        layout ``torch.ops.deep_gemm.get_symm_buffer_size_for_mega_moe`` returns (format in
        ``deep_gemm/mega/buffer.py``).

    Example
    -------
    >>> num_bytes, slice_fn = deep_gemm.get_symm_buffer_size_for_mega_moe(1, 8, 384, 2, 256, 128,
    ...                                                                    'fp8xfp4', 'swiglu', 3072)
    >>> x, x_sf, topk_idx, topk_weights, *_ = slice_fn(torch.zeros(num_bytes, dtype=torch.int8))
    """
    num_bytes, layout = _ops.get_symm_buffer_size_for_mega_moe(
        num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden, mma_type, activation,
        num_ring_tokens)
    layout = tuple(layout)
    with_sf = mma_type == "fp8xfp4"

    def slice_fn(buffer: torch.Tensor) -> tuple:
        views = _ops._slice_symm_buffer_for_mega_moe(buffer, list(layout))
        # DeepGEMM returns undefined tensors (None in Python) for the scales of SF-free MMA types.
        return tuple(v if with_sf or not name.endswith("_sf") else None for name, v in zip(_buffer.EXPORTED, views))

    return num_bytes, slice_fn


# ---- the buffer ------------------------------------------------------------------------------------------------

def _world(group) -> tuple[int, int]:
    """(world size, rank) of a process group; None stands for a single process."""
    if group is None:
        return 1, 0
    return int(group.size()), int(group.rank())


class SymmBuffer:
    """The zeroed ``int8`` buffer a Mega MoE call works in, with views of its input regions.

    Parameters (DeepGEMM's, in its order)
    ----------
    group : torch.distributed.ProcessGroup or None
        Expert-parallel group. ``None`` or a group of size 1: a plain ``torch.zeros`` allocation. Larger groups use
        ``torch.distributed._symmetric_memory`` (allocation plus rendezvous, so every rank can address every other
        rank's buffer); that path needs CUDA and an initialised process group and is not exercised by the CPU tests.
    num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden : int
        Model sizes, as for ``get_symm_buffer_size_for_mega_moe``; ``num_max_tokens_per_rank`` is rounded up to
        ``get_token_alignment_for_mega_moe()`` (384), as DeepGEMM does.
    num_shared_experts : int
        Shared experts the layer computes next to the routed ones (their weights go to the layer call; recorded on
        the buffer).
    mma_type, activation : str
        ``'fp8xfp4'`` or ``'bf16xbf16'``; ``'swiglu'``.
    base : SymmBuffer, optional
        A live buffer of the same group whose memory (and handle) this one reuses instead of allocating: its bytes
        must cover this configuration's. Both then alias the same storage, so only one of them may be in use by a
        call at a time. The memory is not zeroed again.
    num_ring_tokens : int, keyword-only, optional (our extension)
        ``R``, the ring's token capacity: a multiple of 384 within ``get_ring_limit_for_mega_moe(T, num_experts //
        num_ranks, num_topk, num_ranks)``. Default: DeepGEMM's ring choice (``get_symm_buffer_for_mega_moe``).
    device : torch.device or str, keyword-only, optional (our extension)
        Where a single-process buffer lives; default CUDA when available, else CPU.

    Attributes
    ----------
    The constructor arguments (``num_max_tokens_per_rank`` aligned), ``num_ring_tokens``, ``num_ranks``,
    ``rank_idx``, ``buffer`` (1-D ``int8``), ``handle`` (``handle.buffer_ptrs``: one address per rank), and the views
    ``x``, ``x_sf``, ``topk_idx``, ``topk_weights``, ``l1_acts``, ``l1_acts_sf``, ``l2_acts``, ``l2_acts_sf``
    (scales are None for ``bf16xbf16``). Before a call the caller copies its ``T <= num_max_tokens_per_rank`` tokens
    into the first rows of ``x``, ``x_sf``, ``topk_idx`` and ``topk_weights``.

    Example
    -------
    >>> buf = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, num_ring_tokens=3072, device='cpu')
    >>> buf.x[:T].copy_(x_fp8); buf.topk_idx[:T].copy_(topk_idx)
    """

    def __init__(self, group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                 intermediate_hidden: int, num_shared_experts: int = 0, mma_type: str = "fp8xfp4",
                 activation: str = "swiglu", base: Optional["SymmBuffer"] = None, *,
                 num_ring_tokens: Optional[int] = None, device: Union[torch.device, str, None] = None):
        require(num_shared_experts >= 0,
                f"num_shared_experts: expected a non-negative integer, got {num_shared_experts!r}")
        num_ranks, rank_idx = _world(group)
        tokens = _aligned_tokens(num_max_tokens_per_rank)
        if num_ring_tokens is None:
            num_ring_tokens = _default_ring_tokens(tokens, num_experts, num_topk, num_ranks)
        num_bytes, slice_fn = get_symm_buffer_size_for_mega_moe(
            num_ranks, num_experts, tokens, num_topk, hidden, intermediate_hidden, mma_type, activation,
            num_ring_tokens)
        if base is not None:
            _check_base(base, group, num_bytes, device)
        self.group = group
        self.num_ranks, self.rank_idx = num_ranks, rank_idx
        self.num_experts = num_experts
        self.num_max_tokens_per_rank = tokens
        self.num_topk = num_topk
        self.hidden = hidden
        self.intermediate_hidden = intermediate_hidden
        self.num_ring_tokens = num_ring_tokens
        self.mma_type = mma_type
        self.activation = activation
        self.num_shared_experts = num_shared_experts
        if base is None:
            self.buffer, self.handle = _allocate(group, num_ranks, num_bytes, device)
        else:
            self.buffer, self.handle = base.buffer, base.handle
            if _is_cpu_process_group(group, self.buffer.device):
                _reference.register_cpu_group(self.buffer, group)  # (counted: the base's destroy keeps it known)
        (self.x, self.x_sf, self.topk_idx, self.topk_weights,
         self.l1_acts, self.l1_acts_sf, self.l2_acts, self.l2_acts_sf) = slice_fn(self.buffer)

    def destroy(self) -> None:
        """Drop the buffer, its handle and every view (the memory is freed once no other reference remains: a
        buffer built on this one as ``base`` keeps it)."""
        _release(self)

    def __repr__(self) -> str:
        return _describe(self, "num_ring_tokens", "mma_type")


def _aligned_tokens(num_max_tokens_per_rank: int) -> int:
    require(num_max_tokens_per_rank >= 1,
            f"num_max_tokens_per_rank: expected a positive integer, got {num_max_tokens_per_rank!r}")
    return align(num_max_tokens_per_rank, get_token_alignment_for_mega_moe())


def _default_ring_tokens(tokens: int, num_experts: int, num_topk: int, num_ranks: int) -> int:
    """DeepGEMM's ring choice for ``tokens`` (aligned) per rank: 768 Ki tokens when the capacity is prefill-sized,
    else the largest ring of a 4224-token, 72-rank, 6-local-expert, top-6 deployment; either clamped into
    ``get_ring_limit_for_mega_moe``."""
    require(num_experts >= 1 and num_experts % num_ranks == 0,
            f"num_experts: expected a positive multiple of the group size ({num_ranks}), got {num_experts}")
    alignment = get_token_alignment_for_mega_moe()
    low, high = get_ring_limit_for_mega_moe(tokens, num_experts // num_ranks, num_topk, num_ranks)
    if tokens >= PREFILL_TOKENS_THRESHOLD:
        ring = align(PREFILL_RING_TOKENS, alignment)
    else:
        ref_tokens, ref_experts, ref_topk, ref_ranks = DECODE_RING_REFERENCE
        ring = get_ring_limit_for_mega_moe(align(ref_tokens, alignment), ref_experts, ref_topk, ref_ranks)[1]
    return min(max(ring, low), high)


def _check_base(base, group, num_bytes: int, device) -> None:
    """``SymmBuffer(base=...)``: a live buffer of the same group, as large as this configuration needs."""
    require(isinstance(base, SymmBuffer), f"base: expected a SymmBuffer, got {type(base).__name__}")
    require(base.buffer is not None and base.handle is not None,
            "base: expected a live SymmBuffer, got one that was destroyed")
    require(base.group is group, "base: expected a SymmBuffer of the same process group")
    require(num_bytes <= base.buffer.numel(),
            f"base: this configuration needs {num_bytes} bytes, the base buffer has {base.buffer.numel()}")
    if device is not None:
        want, have = torch.device(device), base.buffer.device
        require(want.type == have.type and want.index in (None, have.index),
                f"device: expected the base buffer's device ({have}), got {device}")


def _release(sym_buffer) -> None:
    """A symmetric buffer's ``destroy``: forget its CPU group, drop the buffer, its handle, group and views."""
    if sym_buffer.buffer is not None:
        _reference.unregister_cpu_group(sym_buffer.buffer)
    sym_buffer.handle = sym_buffer.buffer = sym_buffer.group = None
    for view in _buffer.EXPORTED:
        setattr(sym_buffer, view, None)


def _describe(sym_buffer, *extra: str) -> str:
    """A symmetric buffer's ``repr``: its class, the sizes both buffers have, then ``extra`` attributes and bytes."""
    fields = ("num_ranks", "num_experts", "num_max_tokens_per_rank", "num_topk", "hidden", "intermediate_hidden",
              *extra)
    nbytes = None if sym_buffer.buffer is None else sym_buffer.buffer.numel()
    described = ", ".join(f"{name}={getattr(sym_buffer, name)!r}" for name in fields)
    return f"{type(sym_buffer).__name__}({described}, num_bytes={nbytes})"


def _is_cpu_process_group(group, device) -> bool:
    """A torch.distributed group whose buffer lives on the CPU (gloo): the reference's multi-rank form."""
    try:
        import torch.distributed as dist
    except Exception:  # builds without distributed support
        return False
    if not (dist.is_available() and isinstance(group, dist.ProcessGroup)):
        return False
    if device is None:
        return not torch.cuda.is_available()
    return torch.device(device).type == "cpu"


def _allocate(group, num_ranks: int, num_bytes: int, device):
    """(zeroed int8 buffer, handle with ``buffer_ptrs``): plain memory for one rank, a CPU tensor per rank on a gloo
    group (the reference exchanges through collectives), symmetric memory for several CUDA ranks."""
    if num_ranks == 1:
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        buf = torch.zeros(num_bytes, dtype=torch.int8, device=device)
        return buf, types.SimpleNamespace(buffer_ptrs=[buf.data_ptr()])
    if _is_cpu_process_group(group, device):
        import torch.distributed as dist
        buf = torch.zeros(num_bytes, dtype=torch.int8)
        mine = torch.tensor([buf.data_ptr()], dtype=torch.int64)
        ptrs = [torch.empty_like(mine) for _ in range(num_ranks)]
        dist.all_gather(ptrs, mine, group=group)
        _reference.register_cpu_group(buf, group)
        return buf, types.SimpleNamespace(buffer_ptrs=[int(p.item()) for p in ptrs])
    return _allocate_symmetric(group, num_bytes, device)


def _allocate_symmetric(group, num_bytes: int, device):
    """A zeroed symmetric-memory buffer shared by every rank of ``group``, and its rendezvous handle."""
    try:
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
    except Exception as exc:  # the module is absent or fails to import on builds without distributed support
        raise DeepGEMMError(
            f"group: a Mega MoE buffer for {group.size()} ranks needs torch.distributed._symmetric_memory, "
            f"which this PyTorch build cannot import ({exc}); use group=None for a single process") from exc
    if not torch.cuda.is_available():
        fail(f"group: a symmetric buffer for {group.size()} ranks needs CUDA devices; this process has none")
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    require(device.type == "cuda", f"device: symmetric memory lives on CUDA devices, got {device}")
    buf = symm_mem.empty(num_bytes, dtype=torch.int8, device=device)
    handle = symm_mem.rendezvous(buf, group=group)
    buf.zero_()
    dist.barrier(group=group)
    torch.cuda.synchronize(device)
    return buf, handle


def get_symm_buffer_for_mega_moe(group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                                 intermediate_hidden: int, num_shared_experts: int = 0,
                                 use_fp8_dispatch: Optional[bool] = None, mma_type: str = "fp8xfp4",
                                 activation: str = "swiglu", *,
                                 device: Union[torch.device, str, None] = None) -> Union[SymmBuffer, "SM90SymmBuffer"]:
    """A ``SymmBuffer`` sized for ``num_max_tokens_per_rank`` tokens per rank, with DeepGEMM's ring choice.

    The token capacity is rounded up to 384. The ring holds 768 Ki tokens when the capacity is prefill-sized
    (>= 6144 per rank), else the largest ring of a 4224-token, 72-rank, 6-local-expert, top-6 deployment; either is
    then clamped into ``get_ring_limit_for_mega_moe``.

    Parameters
    ----------
    group : torch.distributed.ProcessGroup or None
        Expert-parallel group (None: one process).
    num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden : int
        Model sizes; ``num_experts`` a multiple of the group size, ``hidden`` and ``intermediate_hidden`` multiples
        of 128.
    num_shared_experts : int
        Shared experts the layer computes next to the routed ones (their weights go to the layer call; recorded on
        the buffer).
    use_fp8_dispatch : bool, optional
        Deprecated: must agree with ``mma_type`` (FP8 dispatch iff ``mma_type`` starts with ``fp8``); warns.
    mma_type : str
        ``'fp8xfp4'`` or ``'bf16xbf16'``.
    activation : str
        ``'swiglu'``.
    device : keyword-only, optional
        As for ``SymmBuffer``.

    Example
    -------
    >>> buf = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 100, 2, 256, 128, device='cpu')
    >>> buf.num_max_tokens_per_rank, buf.num_ring_tokens
    (384, 3072)
    """
    if use_fp8_dispatch is not None:
        require(bool(use_fp8_dispatch) == (mma_type.split("x")[0] == "fp8"),
                f"use_fp8_dispatch: {use_fp8_dispatch} contradicts mma_type={mma_type!r}")
    if _is_sm90_device(device):
        # As DeepGEMM: on Hopper the Mega MoE is the SM90 FP8 layer, whatever the mma_type asked for beyond FP8.
        require(mma_type.split("x")[0] == "fp8",
                f"mma_type: the SM90 Mega MoE dispatches FP8 tokens (expected an fp8 mma_type), got {mma_type!r}")
        return get_symm_buffer_for_sm90_mega_moe(group, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                                 intermediate_hidden, True, activation, device=device)
    if use_fp8_dispatch is not None:
        warnings.warn("`use_fp8_dispatch` will be deprecated in the future, please use `mma_type`",
                      DeprecationWarning, stacklevel=2)
    return SymmBuffer(group, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                      num_shared_experts, mma_type=mma_type, activation=activation, device=device)


def _is_sm90_device(device) -> bool:
    """Whether a buffer for ``device`` (None: the current CUDA device when there is one) lands on a Hopper GPU."""
    if device is not None and torch.device(device).type != "cuda":
        return False
    if not torch.cuda.is_available():
        return False
    index = None if device is None else torch.device(device).index
    return torch.cuda.get_device_capability(index)[0] == 9


# ---- weights ---------------------------------------------------------------------------------------------------

def _permute_rows(t: torch.Tensor, source_rows: torch.Tensor) -> torch.Tensor:
    """``out[:, r] = t[:, source_rows[r]]`` in fresh storage with t's strides (DeepGEMM keeps the layout). One
    expert at a time: the transform's peak memory is the weights and their copy (a whole-tensor gather would add a
    third, 6 GiB for 256 FP8 experts of 6144 x 4096)."""
    out = torch.empty_like(t)
    for e in range(t.size(0)):
        out[e].copy_(t[e].index_select(0, source_rows))
    return out


def _interleave_gate_up(name: str, t: torch.Tensor) -> torch.Tensor:
    """Rows ``[gate | up]`` -> ``[gate 0-7, up 0-7, gate 8-15, up 8-15, ...]`` (dim 1 of ``[E, 2I, ...]``)."""
    require_dim(name, t, (2, 3))
    if t.dim() == 2:  # one matrix (shared experts): as a group of one
        return _interleave_gate_up(name, t.unsqueeze(0)).squeeze(0)
    rows = t.size(1)
    require(rows % (2 * INTERLEAVE_ROWS) == 0,
            f"{name}: expected dim 1 (2 x intermediate_hidden: gate rows then up rows) to be a multiple of "
            f"{2 * INTERLEAVE_ROWS}, got {rows}")
    r = torch.arange(rows, device=t.device)
    chunk, within = r // (2 * INTERLEAVE_ROWS), r % (2 * INTERLEAVE_ROWS)
    is_up = within >= INTERLEAVE_ROWS
    source = chunk * INTERLEAVE_ROWS + within - is_up.long() * INTERLEAVE_ROWS + is_up.long() * (rows // 2)
    return _permute_rows(t, source)


PACKED_FP4_MMA_TYPES = ("mxf4xmxf4", "nvfp4xnvfp4")
PACKED_INTERLEAVE_ROWS = 16


def _interleave_gate_up_packed_fp4(name: str, t: torch.Tensor) -> torch.Tensor:
    """The packed-FP4 (dense ``kind::mxf4``) interleave: per 16 gate rows and 16 up rows,
    ``[gate even, up even, gate odd, up odd]`` (8 rows each), dim 1 of ``[E, 2I, ...]`` or dim 0 of ``[2I, ...]``."""
    require_dim(name, t, (2, 3))
    if t.dim() == 2:
        return _interleave_gate_up_packed_fp4(name, t.unsqueeze(0)).squeeze(0)
    rows = t.size(1)
    require(rows % (2 * PACKED_INTERLEAVE_ROWS) == 0,
            f"{name}: expected dim 1 (2 x intermediate_hidden) to be a multiple of {2 * PACKED_INTERLEAVE_ROWS}, "
            f"got {rows}")
    half = rows // 2
    r = torch.arange(rows, device=t.device)
    chunk, within = r // (2 * PACKED_INTERLEAVE_ROWS), r % (2 * PACKED_INTERLEAVE_ROWS)
    part, j = within // (PACKED_INTERLEAVE_ROWS // 2), within % (PACKED_INTERLEAVE_ROWS // 2)
    # part 0: gate even rows, 1: up even rows, 2: gate odd rows, 3: up odd rows
    source = chunk * PACKED_INTERLEAVE_ROWS + 2 * j + (part >= 2).long() + (part % 2 == 1).long() * half
    return _permute_rows(t, source)


def _check_utccp_sf(name: str, sf: torch.Tensor) -> None:
    require_dim(name, sf, (2, 3))
    if sf.dim() == 2:
        sf = sf.unsqueeze(0)
    require_dtype(name, sf, (torch.int32,))
    require(sf.size(1) % UTCCP_ROWS == 0,
            f"{name}: expected dim 1 to be a multiple of {UTCCP_ROWS}, got {sf.size(1)}")


def _transpose_sf_for_utccp(sf: torch.Tensor) -> torch.Tensor:
    """Within every 128 rows, row ``32 q + p`` moves to ``4 p + q`` (the order UTCCP reads packed UE8M0 scales)."""
    if sf.dim() == 2:
        return _transpose_sf_for_utccp(sf.unsqueeze(0)).squeeze(0)
    group_rows = UTCCP_ROWS // UTCCP_GROUPS
    r = torch.arange(sf.size(1), device=sf.device)
    source = (r // UTCCP_ROWS) * UTCCP_ROWS + (r % UTCCP_GROUPS) * group_rows + (r % UTCCP_ROWS) // UTCCP_GROUPS
    return _permute_rows(sf, source)


def _is_pair(x) -> bool:
    return isinstance(x, (tuple, list)) and len(x) == 2


def transform_weights_for_mega_moe(l1_weights: Union[torch.Tensor, Pair], l2_weights: Union[torch.Tensor, Pair],
                                   activation: str = "swiglu", mma_type: str = "fp8xfp4"):
    """Reorder expert weights into the layout the Mega MoE kernel reads (fresh tensors; inputs are not modified).

    Parameters
    ----------
    l1_weights : Tensor or (Tensor, Tensor)
        ``W1 [E_local, 2I, K]`` (rows: I gate rows, then I up rows; ``2I`` a multiple of 16), K-major. BF16 alone, or
        ``(data, sf)`` for FP8/FP4: data FP8 or FP4 packed in int8, sf packed UE8M0 ``int32 [E_local, 2I, *]``.
    l2_weights : Tensor or (Tensor, Tensor)
        ``W2 [E_local, H, I]`` alone (BF16) or ``(data, sf)`` with sf ``int32 [E_local, H, *]``.
    activation : str
        ``'swiglu'``.
    mma_type : str
        ``'fp8xfp4'`` / ``'bf16xbf16'``: 8-row gate/up chunks; ``'mxf4xmxf4'`` / ``'nvfp4xnvfp4'`` (packed FP4
        activations): per 16 gate and 16 up rows, ``[gate even, up even, gate odd, up odd]``.

    Returns
    -------
    (l1, l2) in the input's form (2-D ``[2I, K]`` / ``[H, I]`` matrices, e.g. shared experts, are accepted too).
    L1 rows (and, for pairs, L1 SF rows) go from ``[gate | up]`` to interleaved 8-row chunks
    ``[g0-7, u0-7, g8-15, u8-15, ...]``; for pairs both SF tensors are then permuted for UTCCP: within each 128
    rows, row ``32 q + p`` moves to row ``4 p + q`` (SF rows must be multiples of 128). BF16 L2 and FP8 L2 data are
    returned as given. Outputs keep the inputs' strides.

    Example
    -------
    >>> l1, l2 = deep_gemm.transform_weights_for_mega_moe((w1_fp4, w1_sf), (w2_fp4, w2_sf))
    """
    require(activation in _buffer.ACTIVATIONS,
            f"activation: expected 'swiglu' (the only activation), got {activation!r}")
    require(mma_type in _buffer.MMA_TYPES + PACKED_FP4_MMA_TYPES,
            f"mma_type: expected one of {', '.join(_buffer.MMA_TYPES + PACKED_FP4_MMA_TYPES)}, got {mma_type!r}")
    if _is_pair(l1_weights) != _is_pair(l2_weights):
        fail("l1_weights, l2_weights: expected both (data, sf) pairs (FP8/FP4) or both tensors (BF16), got "
             f"{type(l1_weights).__name__} and {type(l2_weights).__name__}")
    if not _is_pair(l1_weights):
        return _interleave_gate_up("l1_weights", l1_weights), l2_weights
    (l1, l1_sf), (l2, l2_sf) = l1_weights, l2_weights
    _check_utccp_sf("l1_weights[1]", l1_sf)
    _check_utccp_sf("l2_weights[1]", l2_sf)
    rows = l1.dim() - 1
    require(tuple(l1_sf.shape[:rows]) == tuple(l1.shape[:rows]),
            f"l1_weights[1]: expected {tuple(l1.shape[:rows])} in the leading dims (one SF row per weight row), "
            f"got shape {tuple(l1_sf.shape)}")
    interleave = _interleave_gate_up_packed_fp4 if mma_type in PACKED_FP4_MMA_TYPES else _interleave_gate_up
    l1_out = interleave("l1_weights[0]", l1)
    l1_sf_out = _transpose_sf_for_utccp(interleave("l1_weights[1]", l1_sf))
    return (l1_out, l1_sf_out), (l2, _transpose_sf_for_utccp(l2_sf))


def transform_scales_for_mega_moe(l1_scales: torch.Tensor,
                                  l2_scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Canonical ``[gate; up]`` packed FP4 scale tensors -> the Mega MoE layout: L1 gets the packed-FP4 gate/up
    interleave and the UTCCP row order, L2 the UTCCP row order (``int32``, ``[E, N, *]`` or ``[N, *]``, N a
    multiple of 128).

    Example
    -------
    >>> l1_sf, l2_sf = deep_gemm.transform_scales_for_mega_moe(l1_sf, l2_sf)
    """
    _check_utccp_sf("l1_scales", l1_scales)
    _check_utccp_sf("l2_scales", l2_scales)
    return (_transpose_sf_for_utccp(_interleave_gate_up_packed_fp4("l1_scales", l1_scales)),
            _transpose_sf_for_utccp(l2_scales))


def transform_weights_for_mega_moe_sm90(l1_weights: Pair, l2_weights: Pair) -> tuple[Pair, Pair]:
    """Weights for ``fp8_mega_moe``: L1 data rows interleaved in 8-row gate/up chunks (as SGLang's
    ``build_sm90_mega_moe_experts_weights``); the FP32 128x128 block scales and L2 stay as given (the kernel maps
    interleaved rows back to ``[gate | up]`` scale blocks itself).

    Parameters
    ----------
    l1_weights : (Tensor, Tensor)
        FP8 ``[E_local, 2I, H]`` (``[gate | up]`` rows) and FP32 ``[E_local, 2I/128, H/128]``.
    l2_weights : (Tensor, Tensor)
        FP8 ``[E_local, H, I]`` and FP32 ``[E_local, H/128, I/128]``.

    Example
    -------
    >>> l1, l2 = deep_gemm.transform_weights_for_mega_moe_sm90((w13, w13_sf), (w2, w2_sf))
    """
    l1, l1_sf = unpack_pair("l1_weights", l1_weights)
    unpack_pair("l2_weights", l2_weights)
    require_dim("l1_weights[0]", l1, 3)
    return (_interleave_gate_up("l1_weights[0]", l1), l1_sf), l2_weights


# ---- the SM90 FP8 buffer -----------------------------------------------------------------------------------------

class SM90SymmBuffer:
    """The zeroed ``int8`` buffer of the SM90 FP8 Mega MoE (``fp8_mega_moe``), with views of its input regions.

    Parameters
    ----------
    group : torch.distributed.ProcessGroup or None
        Expert-parallel group: None / size 1 (plain allocation), a gloo group (a CPU tensor per rank; the reference
        exchanges through collectives) or a CUDA group (symmetric memory).
    num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden : int
        ``num_max_tokens_per_rank`` a multiple of 384 (``get_symm_buffer_for_sm90_mega_moe`` rounds it up);
        ``hidden`` and ``intermediate_hidden`` multiples of 128; ``num_experts`` a multiple of the group size.
    use_fp8_dispatch : bool
        True (the SM90 layer dispatches FP8 tokens).
    activation : str
        ``'swiglu'``.
    device : keyword-only, optional (our extension)
        Where a single-process buffer lives; default CUDA when available, else CPU.

    Attributes
    ----------
    The arguments, ``num_ranks``, ``rank_idx``, ``buffer``, ``handle.buffer_ptrs`` and the views ``x`` (FP8
    ``[T, H]``), ``x_sf`` (FP32 ``[T, H/128]``), ``topk_idx`` (int64 ``[T, k]``), ``topk_weights`` (FP32
    ``[T, k]``), ``l1_acts``, ``l1_acts_sf``, ``l2_acts``, ``l2_acts_sf`` (layout: ``deep_gemm/mega/buffer.py``).
    ``mega_moe_pre_dispatch_sm90`` fills the input views.

    Example
    -------
    >>> buf = deep_gemm.SM90SymmBuffer(None, 8, 384, 2, 512, 256, device='cpu')
    """

    def __init__(self, group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                 intermediate_hidden: int, use_fp8_dispatch: bool = True, activation: str = "swiglu", *,
                 device: Union[torch.device, str, None] = None):
        num_ranks, rank_idx = _world(group)
        layout_args = (num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                       bool(use_fp8_dispatch), activation)
        num_bytes = _ops.get_symm_buffer_size_for_sm90_mega_moe(*layout_args)
        self.group = group
        self.num_ranks, self.rank_idx = num_ranks, rank_idx
        self.num_experts = num_experts
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        self.num_topk = num_topk
        self.hidden = hidden
        self.intermediate_hidden = intermediate_hidden
        self.use_fp8_dispatch = bool(use_fp8_dispatch)
        self.activation = activation
        self.mma_type = "fp8xfp8"
        self.buffer, self.handle = _allocate(group, num_ranks, num_bytes, device)
        (self.x, self.x_sf, self.topk_idx, self.topk_weights,
         self.l1_acts, self.l1_acts_sf, self.l2_acts, self.l2_acts_sf) = \
            _ops._slice_symm_buffer_for_sm90_mega_moe(self.buffer, *layout_args)

    def destroy(self) -> None:
        """Drop the buffer, its handle and every view."""
        _release(self)

    def __repr__(self) -> str:
        return _describe(self)


def get_symm_buffer_for_sm90_mega_moe(group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                                      hidden: int, intermediate_hidden: int, use_fp8_dispatch: bool = True,
                                      activation: str = "swiglu", *,
                                      device: Union[torch.device, str, None] = None) -> SM90SymmBuffer:
    """An ``SM90SymmBuffer`` for ``num_max_tokens_per_rank`` (rounded up to 384) tokens per rank.

    Example
    -------
    >>> buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 100, 2, 512, 256, device='cpu')
    >>> buf.num_max_tokens_per_rank
    384
    """
    require(num_max_tokens_per_rank >= 1,
            f"num_max_tokens_per_rank: expected a positive integer, got {num_max_tokens_per_rank}")
    tokens = align(num_max_tokens_per_rank, get_token_alignment_for_mega_moe())
    return SM90SymmBuffer(group, num_experts, tokens, num_topk, hidden, intermediate_hidden, use_fp8_dispatch,
                          activation, device=device)


# ---- the fused layer ---------------------------------------------------------------------------------------------

def _require_buffer(fn: str, sym_buffer, cls, mma_type: Optional[str]) -> None:
    require(isinstance(sym_buffer, cls), f"sym_buffer: {fn} expects a {cls.__name__}, got "
                                         f"{type(sym_buffer).__name__}")
    require(sym_buffer.buffer is not None, "sym_buffer: the buffer was destroyed")
    if mma_type is not None:
        require(sym_buffer.mma_type == mma_type,
                f"sym_buffer: {fn} needs a buffer built with mma_type={mma_type!r}, got {sym_buffer.mma_type!r}")


def _cpu_group(sym_buffer):
    """The gloo group of a multi-rank CPU buffer, else None."""
    if not isinstance(sym_buffer, (SymmBuffer, SM90SymmBuffer)) or sym_buffer.buffer is None:
        return None
    if sym_buffer.num_ranks > 1 and sym_buffer.buffer.device.type == "cpu":
        return sym_buffer.group
    return None


def _agreed_args(fn: str, sym_buffer, build: Callable[[], tuple]) -> tuple:
    """``build()`` validates and returns the op's arguments; on a multi-rank CPU buffer every rank learns whether
    any rank rejected its arguments before any rank writes or exchanges anything, so all raise together."""
    group = _cpu_group(sym_buffer)
    error, args = None, None
    try:
        args = build()
        if group is not None:  # (the op checks its routing data too, after the ranks agreed: do it before)
            kernels = _registry.kernels_of(fn)
            if kernels.data_check is not None:
                _registry.run_data_check(kernels, args)
    except Exception as exc:  # any rejection (DeepGEMMError, or e.g. a TypeError) must reach the other ranks
        error = exc
    if group is not None:
        _reference.consensus(group, sym_buffer.num_ranks, error, fn)
    elif error is not None:
        raise error
    return args


def fp8_mega_moe_op_args(y: torch.Tensor, l1_weights: Pair, l2_weights: Pair, sym_buffer: SM90SymmBuffer,
                         cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                         recipe: Tuple[int, int, int] = (128, 128, 128), activation: str = "swiglu",
                         activation_clamp: Optional[float] = None, fast_math: bool = True) -> tuple:
    """The ``fp8_mega_moe`` op's flat arguments (its schema order) for :func:`fp8_mega_moe`'s arguments, unchecked
    (the op checks them): what the public call hands the op, and what tests and benchmarks hand its launcher."""
    l1, l1_sf = unpack_pair("l1_weights", l1_weights)
    l2, l2_sf = unpack_pair("l2_weights", l2_weights)
    return (y, l1, l1_sf, l2, l2_sf, cumulative_local_expert_recv_stats, sym_buffer.buffer,
            list(sym_buffer.handle.buffer_ptrs), sym_buffer.rank_idx, sym_buffer.num_max_tokens_per_rank,
            sym_buffer.num_experts, sym_buffer.num_topk, [int(v) for v in recipe], activation, activation_clamp,
            bool(fast_math))


def fp8_mega_moe(y: torch.Tensor, l1_weights: Pair, l2_weights: Pair, sym_buffer: SM90SymmBuffer,
                 cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                 recipe: Tuple[int, int, int] = (128, 128, 128), activation: str = "swiglu",
                 activation_clamp: Optional[float] = None, fast_math: bool = True) -> None:
    """The SM90 FP8 Mega MoE layer: dispatch, L1, SwiGLU, L2 and combine into ``y``.

    Semantics in ``deep_gemm/mega/reference.py``: ``y[t] = sum over t's routed slots s of
    bf16(q(silu(min(g, c)) * clamp(u, -c, c) * w_s) @ W2.T)`` with ``[g | u] = x_t @ W1.T``, ``q`` the FP8 round
    trip with one FP32 scale per (row, 64 columns); masked slots (-1) contribute nothing.

    Parameters
    ----------
    y : Tensor
        BF16 ``[T, H]``, written; ``T <= sym_buffer.num_max_tokens_per_rank`` is the number of tokens this rank
        dispatches (the first T rows of the buffer's input views, filled by ``mega_moe_pre_dispatch_sm90``).
    l1_weights, l2_weights : (Tensor, Tensor)
        From ``transform_weights_for_mega_moe_sm90``: FP8 ``W1 [E_local, 2I, H]`` (interleaved rows) with FP32
        128x128 block scales ``[E_local, 2I/128, H/128]`` (``[gate | up]`` order), FP8 ``W2 [E_local, H, I]`` with
        ``[E_local, H/128, I/128]``.
    sym_buffer : SM90SymmBuffer
    cumulative_local_expert_recv_stats : Tensor, optional
        int32 ``[E_local]``; tokens received per local expert are added.
    recipe : (128, 128, 128)
    activation, activation_clamp, fast_math
        ``'swiglu'``; the clamp (None: none); fast math changes only the kernel's exp / reciprocal.

    One CUDA rank runs the Triton kernels (``deep_gemm/mega/kernels.py``: six launches, no host synchronisation,
    CUDA-graph capturable).
    CPU buffers run the reference (one process or a gloo group: call on every rank); several CUDA ranks raise
    ``NotImplementedError``, unless their kernels are asked for (``MegaOverrides(kernels=True)`` through the
    launcher, until their multi-GPU run): four phases between cross-rank barriers over the symmetric buffer's peer
    addresses, no host synchronisation; ``deep_gemm.mega.launch.check_status(sym_buffer)`` then reports a rank that
    missed a barrier.

    Example
    -------
    >>> deep_gemm.mega_moe_pre_dispatch_sm90(x, topk_idx, topk_weights, buf.x, buf.x_sf, buf.topk_idx,
    ...                                      buf.topk_weights, num_tokens=x.size(0))
    >>> deep_gemm.fp8_mega_moe(y, l1, l2, buf, activation_clamp=10.0)
    """
    def build() -> tuple:
        _require_buffer("fp8_mega_moe", sym_buffer, SM90SymmBuffer, None)
        args = fp8_mega_moe_op_args(y, l1_weights, l2_weights, sym_buffer, cumulative_local_expert_recv_stats,
                                    recipe, activation, activation_clamp, fast_math)
        _layer.check_fp8_mega_moe(*args)
        l2 = args[3]
        require(l2.size(2) == sym_buffer.intermediate_hidden and y.size(1) == sym_buffer.hidden,
                f"l2_weights: expected the buffer's hidden x intermediate ({sym_buffer.hidden}, "
                f"{sym_buffer.intermediate_hidden}), got {tuple(l2.shape[1:])}")
        return args

    _ops.fp8_mega_moe(*_agreed_args("fp8_mega_moe", sym_buffer, build))


def _pair_or_none(name: str, pair):
    return (None, None) if pair is None else unpack_pair(name, pair)


def _check_buffer_sizes(sym_buffer, y: torch.Tensor, inter: int) -> None:
    require(y.size(1) == sym_buffer.hidden, f"y: expected the buffer's hidden ({sym_buffer.hidden}) columns, got "
                                            f"{y.size(1)}")
    require(inter == sym_buffer.intermediate_hidden,
            f"l2_weights: expected the buffer's intermediate_hidden ({sym_buffer.intermediate_hidden}), got {inter}")


def fp8_fp4_mega_moe_op_args(y: torch.Tensor, l1_weights: Pair, l2_weights: Pair, sym_buffer: SymmBuffer,
                             shared_l1_weights: Optional[Pair] = None, shared_l2_weights: Optional[Pair] = None,
                             cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                             recipe: Tuple[int, int, int] = (1, 1, 32), activation: str = "swiglu",
                             activation_clamp: Optional[float] = None, fast_math: bool = True,
                             use_x_scales: bool = False, l1_alphas: Optional[torch.Tensor] = None,
                             l2_alphas: Optional[torch.Tensor] = None, l2_act_scales: Optional[torch.Tensor] = None,
                             weight_layout: str = "megamoe", global_num_tokens: Optional[int] = None,
                             post_expert_norm: bool = False, post_expert_norm_weight: Optional[torch.Tensor] = None,
                             post_expert_norm_eps: float = 1e-6, post_expert_norm_weight_first: bool = False) -> tuple:
    """The ``fp8_fp4_mega_moe`` op's flat arguments (its schema order) for :func:`fp8_fp4_mega_moe`'s arguments,
    the (data, sf) pairs unpacked and otherwise unchecked (the op checks them): what the public call hands the op,
    and what tests and benchmarks hand its launcher."""
    l1, l1_sf = unpack_pair("l1_weights", l1_weights)
    l2, l2_sf = unpack_pair("l2_weights", l2_weights)
    sh1, sh1_sf = _pair_or_none("shared_l1_weights", shared_l1_weights)
    sh2, sh2_sf = _pair_or_none("shared_l2_weights", shared_l2_weights)
    return (y, l1, l1_sf, l2, l2_sf, sh1, sh1_sf, sh2, sh2_sf, cumulative_local_expert_recv_stats,
            sym_buffer.buffer, list(sym_buffer.handle.buffer_ptrs), sym_buffer.rank_idx,
            sym_buffer.num_max_tokens_per_rank, sym_buffer.num_experts, sym_buffer.num_topk,
            [int(v) for v in recipe], sym_buffer.mma_type, activation, activation_clamp, bool(fast_math),
            bool(use_x_scales), l1_alphas, l2_alphas, l2_act_scales, bool(post_expert_norm),
            post_expert_norm_weight, float(post_expert_norm_eps), bool(post_expert_norm_weight_first),
            weight_layout == "trtllm", global_num_tokens, sym_buffer.num_ring_tokens)


def fp8_fp4_mega_moe(y: torch.Tensor, l1_weights: Pair, l2_weights: Pair, sym_buffer: SymmBuffer,
                     shared_l1_weights: Optional[Pair] = None, shared_l2_weights: Optional[Pair] = None,
                     cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                     recipe: Tuple[int, int, int] = (1, 1, 32), activation: str = "swiglu",
                     activation_clamp: Optional[float] = None, fast_math: bool = True, use_x_scales: bool = False,
                     l1_alphas: Optional[torch.Tensor] = None, l2_alphas: Optional[torch.Tensor] = None,
                     l2_act_scales: Optional[torch.Tensor] = None, weight_layout: str = "megamoe",
                     global_num_tokens: Optional[int] = None, post_expert_norm: bool = False,
                     post_expert_norm_weight: Optional[torch.Tensor] = None, post_expert_norm_eps: float = 1e-6,
                     post_expert_norm_weight_first: bool = False) -> None:
    """Fused expert-parallel MoE layer, FP8 activations x FP8/FP4 weights with UE8M0 scales per 32.

    Semantics (``deep_gemm/mega/reference.py``): the first ``T = y.size(0)`` tokens of the buffer's input views
    (``x``, ``x_sf``, ``topk_idx``, ``topk_weights``; ``mega_moe_pre_dispatch`` fills them) are dispatched to their
    experts; per expert ``[g | u] = x @ W1.T``, ``a = silu(min(g, c)) * clamp(u, -c, c) * topk_weight``, ``a``
    quantised to FP8 per 32 (UE8M0), ``o = bf16(a @ W2.T)``; ``y`` = the sum of a token's slots (plus the shared
    experts' output when given).

    Parameters
    ----------
    y : Tensor
        ``[T, H]`` BF16, written; ``T <= sym_buffer.num_max_tokens_per_rank``.
    l1_weights, l2_weights : (Tensor, Tensor)
        From ``transform_weights_for_mega_moe``: ``W1 [E_local, 2I, H]``, ``W2 [E_local, H, I]`` (FP4 packed in
        int8 with half the columns, or FP8), contiguous; scales packed UE8M0 ``int32 [E_local, N, K/128]``.
    sym_buffer : SymmBuffer
        Built with ``mma_type='fp8xfp4'``.
    shared_l1_weights, shared_l2_weights : (Tensor, Tensor), optional
        Shared experts computed on this rank's tokens with weight 1: ``[2 I_s, H]`` / ``[H, I_s]`` (``I_s`` a
        multiple of I; transformed as the routed weights).
    cumulative_local_expert_recv_stats : Tensor, optional
        int32 ``[E_local]``; tokens received per local expert are added to it.
    recipe : (int, int, int)
        ``(1, 1, 32)`` (``(1, 1, 16)`` is NVFP4: its buffer kind is not in this release).
    activation, activation_clamp, fast_math
        ``'swiglu'``; clamp None (no clamp) or >= 0; fast math only changes the kernel's exp / reciprocal.
    use_x_scales, l1_alphas, l2_alphas, l2_act_scales
        NVFP4-only upstream: must stay False / None here.
    weight_layout : str
        ``'megamoe'`` (``'trtllm'`` needs NVFP4 weights).
    global_num_tokens : int, optional
        Tokens sent by all ranks this call, in ``[0, ranks x num_max_tokens_per_rank]``; selects a tile only.
    post_expert_norm, post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first
        RMS-normalise every expert output before the combine: ``y = w * sum_s(topk_weight_s * o_s / rms(o_s))``
        (``rms`` of ``w * o_s`` when the weight comes first; ``w = 1`` without a weight); the top-k weight then
        moves from L1 to the combine. Not with shared experts.

    Runs the reference on CPU buffers (one process or a gloo group: call on every rank). One CUDA rank (sm_90 /
    sm_100) runs Triton kernels (``deep_gemm/mega/fp8_fp4_kernels.py``: the FP8 / FP4 operands decoded and scaled to
    BF16 in registers, exactly, and multiplied by BF16 MMAs into FP32; six launches, eight with shared experts, no
    host synchronisation, CUDA-graph capturable) when asked with ``MegaOverrides(kernels=True)`` until they have
    passed their GPU run, and otherwise the reference (slow); the post-expert norm always takes the reference.
    Several CUDA ranks raise ``NotImplementedError`` (not implemented in this release).

    Example
    -------
    >>> deep_gemm.fp8_fp4_mega_moe(y, l1, l2, buf, cumulative_local_expert_recv_stats=stats)
    """
    def build() -> tuple:
        require(weight_layout in _layer.WEIGHT_LAYOUTS,
                f"weight_layout: expected 'megamoe' or 'trtllm', got {weight_layout!r}")
        _require_buffer("fp8_fp4_mega_moe", sym_buffer, SymmBuffer, None)
        require(sym_buffer.mma_type == "fp8xfp4",
                f"sym_buffer: fp8_fp4_mega_moe needs a buffer built with mma_type='fp8xfp4', got "
                f"{sym_buffer.mma_type!r}")
        args = fp8_fp4_mega_moe_op_args(y, l1_weights, l2_weights, sym_buffer, shared_l1_weights,
                                        shared_l2_weights, cumulative_local_expert_recv_stats, recipe, activation,
                                        activation_clamp, fast_math, use_x_scales, l1_alphas, l2_alphas,
                                        l2_act_scales, weight_layout, global_num_tokens, post_expert_norm,
                                        post_expert_norm_weight, post_expert_norm_eps, post_expert_norm_weight_first)
        _layer.check_fp8_fp4_mega_moe(*args)
        _check_buffer_sizes(sym_buffer, y, args[4].size(2) * 128)
        return args

    _ops.fp8_fp4_mega_moe(*_agreed_args("fp8_fp4_mega_moe", sym_buffer, build))


def nvfp4_mega_moe(y: torch.Tensor, l1_weights: Pair, l2_weights: Pair, sym_buffer: SymmBuffer,
                   shared_l1_weights: Optional[Pair] = None, shared_l2_weights: Optional[Pair] = None,
                   cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None, activation: str = "swiglu",
                   activation_clamp: Optional[float] = None, fast_math: bool = True, use_x_scales: bool = False,
                   l1_alphas: Optional[torch.Tensor] = None, l2_alphas: Optional[torch.Tensor] = None,
                   l2_act_scales: Optional[torch.Tensor] = None, weight_layout: str = "megamoe",
                   global_num_tokens: Optional[int] = None, post_expert_norm: bool = False,
                   post_expert_norm_weight: Optional[torch.Tensor] = None, post_expert_norm_eps: float = 1e-6,
                   post_expert_norm_weight_first: bool = False) -> None:
    """``fp8_fp4_mega_moe`` with the NVFP4 recipe ``(1, 1, 16)``, as DeepGEMM. This release has no
    ``nvfp4xnvfp4`` buffer, so every call raises ``DeepGEMMError`` (after the same argument checks).

    Example
    -------
    >>> deep_gemm.nvfp4_mega_moe(y, l1, l2, buf)   # DeepGEMMError: no nvfp4xnvfp4 buffer in this release
    """
    fp8_fp4_mega_moe(y, l1_weights, l2_weights, sym_buffer, shared_l1_weights, shared_l2_weights,
                     cumulative_local_expert_recv_stats, recipe=(1, 1, 16), activation=activation,
                     activation_clamp=activation_clamp, fast_math=fast_math, use_x_scales=use_x_scales,
                     l1_alphas=l1_alphas, l2_alphas=l2_alphas, l2_act_scales=l2_act_scales,
                     weight_layout=weight_layout, global_num_tokens=global_num_tokens,
                     post_expert_norm=post_expert_norm, post_expert_norm_weight=post_expert_norm_weight,
                     post_expert_norm_eps=post_expert_norm_eps,
                     post_expert_norm_weight_first=post_expert_norm_weight_first)


def bf16_mega_moe_op_args(y: torch.Tensor, l1_weights: torch.Tensor, l2_weights: torch.Tensor,
                          sym_buffer: SymmBuffer, shared_l1_weights: Optional[torch.Tensor] = None,
                          shared_l2_weights: Optional[torch.Tensor] = None,
                          cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                          activation: str = "swiglu", activation_clamp: Optional[float] = None,
                          fast_math: bool = True, weight_layout: str = "megamoe",
                          global_num_tokens: Optional[int] = None, post_expert_norm: bool = False,
                          post_expert_norm_weight: Optional[torch.Tensor] = None, post_expert_norm_eps: float = 1e-6,
                          post_expert_norm_weight_first: bool = False) -> tuple:
    """The ``bf16_mega_moe`` op's flat arguments (its schema order) for :func:`bf16_mega_moe`'s arguments, unchecked
    (the op checks them): what the public call hands the op, and what tests and benchmarks hand its launcher."""
    return (y, l1_weights, l2_weights, shared_l1_weights, shared_l2_weights, cumulative_local_expert_recv_stats,
            sym_buffer.buffer, list(sym_buffer.handle.buffer_ptrs), sym_buffer.rank_idx,
            sym_buffer.num_max_tokens_per_rank, sym_buffer.num_experts, sym_buffer.num_topk, activation,
            activation_clamp, bool(fast_math), bool(post_expert_norm), post_expert_norm_weight,
            float(post_expert_norm_eps), bool(post_expert_norm_weight_first), weight_layout == "trtllm",
            global_num_tokens, sym_buffer.num_ring_tokens)


def bf16_mega_moe(y: torch.Tensor, l1_weights: torch.Tensor, l2_weights: torch.Tensor, sym_buffer: SymmBuffer,
                  shared_l1_weights: Optional[torch.Tensor] = None, shared_l2_weights: Optional[torch.Tensor] = None,
                  cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None, activation: str = "swiglu",
                  activation_clamp: Optional[float] = None, fast_math: bool = True, weight_layout: str = "megamoe",
                  global_num_tokens: Optional[int] = None, post_expert_norm: bool = False,
                  post_expert_norm_weight: Optional[torch.Tensor] = None, post_expert_norm_eps: float = 1e-6,
                  post_expert_norm_weight_first: bool = False) -> None:
    """Fused expert-parallel MoE layer in BF16.

    As ``fp8_fp4_mega_moe`` with BF16 tokens, BF16 weights ``W1 [E_local, 2I, H]`` (L1 rows interleaved by
    ``transform_weights_for_mega_moe``), ``W2 [E_local, H, I]``, no scales, the intermediate rounded to BF16, and a
    buffer built with ``mma_type='bf16xbf16'``. Shared experts: BF16 ``[2 I_s, H]`` / ``[H, I_s]``.

    One CUDA rank (sm_90 / sm_100) runs Triton kernels (``deep_gemm/mega/kernels.py``: six launches, eight with
    shared experts, no host synchronisation, CUDA-graph capturable) when asked with ``MegaOverrides(kernels=True)``
    until they have passed their GPU run; the post-expert norm takes the reference.

    Example
    -------
    >>> deep_gemm.bf16_mega_moe(y, l1, l2, buf)
    """
    def build() -> tuple:
        require(weight_layout in _layer.WEIGHT_LAYOUTS,
                f"weight_layout: expected 'megamoe' or 'trtllm', got {weight_layout!r}")
        _require_buffer("bf16_mega_moe", sym_buffer, SymmBuffer, "bf16xbf16")
        args = bf16_mega_moe_op_args(y, l1_weights, l2_weights, sym_buffer, shared_l1_weights, shared_l2_weights,
                                     cumulative_local_expert_recv_stats, activation, activation_clamp, fast_math,
                                     weight_layout, global_num_tokens, post_expert_norm, post_expert_norm_weight,
                                     post_expert_norm_eps, post_expert_norm_weight_first)
        _layer.check_bf16_mega_moe(*args)
        _check_buffer_sizes(sym_buffer, y, l2_weights.size(2))
        return args

    _ops.bf16_mega_moe(*_agreed_args("bf16_mega_moe", sym_buffer, build))


# ---- pre-dispatch and BLOCK_M --------------------------------------------------------------------------------------

def mega_moe_pre_dispatch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, buf_x: torch.Tensor,
                          buf_x_sf: torch.Tensor, buf_topk_idx: torch.Tensor, buf_topk_weights: torch.Tensor,
                          num_tokens: int, group_size: int = 32, mma_type: str = "fp8xfp4",
                          buf_x_scales: Optional[torch.Tensor] = None,
                          expert_scales: Optional[torch.Tensor] = None) -> None:
    """Fill a ``SymmBuffer``'s input views from BF16 tokens: ``x[:num_tokens]`` cast to FP8 with packed UE8M0
    scales per ``group_size`` (32) channels, top-k indices copied (int32 or int64 in, int64 out), weights copied
    (times ``expert_scales[expert]`` when given); buffer slots from ``num_tokens`` on are masked (index -1,
    weight 0).

    Example
    -------
    >>> deep_gemm.mega_moe_pre_dispatch(x, topk_idx, topk_weights, buf.x, buf.x_sf, buf.topk_idx,
    ...                                 buf.topk_weights, x.size(0))
    """
    _ops.mega_moe_pre_dispatch(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights,
                               num_tokens, group_size, mma_type, buf_x_scales, expert_scales)


def mega_moe_pre_dispatch_sm90(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
                               buf_x: torch.Tensor, buf_x_sf: torch.Tensor, buf_topk_idx: torch.Tensor,
                               buf_topk_weights: torch.Tensor, num_tokens: int, group_size: int = 128,
                               routed_scaling_factor: float = 1.0) -> None:
    """Fill an ``SM90SymmBuffer``'s input views from BF16 tokens: ``x[:num_tokens]`` cast to FP8 with one FP32 scale
    per 128 channels (``max(amax, 1e-10) / 448``), top-k indices copied, weights times ``routed_scaling_factor``;
    slots from ``num_tokens`` on are masked (index -1, weight 0).

    Example
    -------
    >>> deep_gemm.mega_moe_pre_dispatch_sm90(x, topk_idx, topk_weights, buf.x, buf.x_sf, buf.topk_idx,
    ...                                      buf.topk_weights, num_tokens=n, routed_scaling_factor=2.5)
    """
    _ops.mega_moe_pre_dispatch_sm90(x, topk_idx, topk_weights, buf_x, buf_x_sf, buf_topk_idx, buf_topk_weights,
                                    num_tokens, group_size, float(routed_scaling_factor))


def get_block_m_for_mega_moe(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_tokens: int,
                             num_topk: int, mma_type: str = "fp8xfp4",
                             global_num_tokens: Optional[int] = None) -> int:
    """The BLOCK_M the fused kernel uses for these sizes (callers lay out shared-expert scales with it): the smallest
    of 8, 16, 32, 64, 96, 128, 192 that holds the expected tokens per expert (``global_num_tokens``, else
    ``num_ranks * num_tokens``, times top-k over the experts), else 192. Pass the kernel call's
    ``global_num_tokens``.

    Example
    -------
    >>> deep_gemm.get_block_m_for_mega_moe(1, 8, 384, 100, 2)
    32
    """
    return int(_ops.get_block_m_for_mega_moe(num_ranks, num_experts, num_max_tokens_per_rank, num_tokens, num_topk,
                                             mma_type, global_num_tokens))
