"""Public Mega MoE API, call-for-call compatible with DeepGEMM's ``deep_gemm.mega`` and its ``_C`` helpers.

What works today: the symmetric buffer (sizes, slice layout, allocation for one process), the ring limits, and the
weight transform. The fused kernel itself (EP dispatch -> L1 GEMM -> SwiGLU -> L2 GEMM -> EP combine in one launch)
is DeepGEMM SM100-only and not implemented in this release (it comes with expert-parallel MoE): ``fp8_fp4_mega_moe`` and
``bf16_mega_moe`` validate their arguments and then raise ``NotImplementedError``; they never fake a result.
"""

from __future__ import annotations

import types
import warnings
from typing import Callable, Optional, Tuple, Union

import torch

from ..core.errors import (
    DeepGEMMError, fail, require, require_contiguous, require_dim, require_dtype, require_same_device, require_shape)
from ..common.operands import unpack_pair
from ..utils.math import align
from . import buffer as _buffer

_ops = torch.ops.deep_gemm
Pair = Tuple[torch.Tensor, torch.Tensor]

__all__ = [
    "get_symm_buffer_size_for_mega_moe", "get_token_alignment_for_mega_moe", "get_ring_limit_for_mega_moe",
    "SymmBuffer", "get_symm_buffer_for_mega_moe", "transform_weights_for_mega_moe",
    "fp8_fp4_mega_moe", "bf16_mega_moe",
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

    Parameters
    ----------
    group : torch.distributed.ProcessGroup or None
        Expert-parallel group. ``None`` or a group of size 1: a plain ``torch.zeros`` allocation. Larger groups use
        ``torch.distributed._symmetric_memory`` (allocation plus rendezvous, so every rank can address every other
        rank's buffer); that path needs CUDA and an initialised process group and is not exercised by the CPU tests.
    num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden, num_ring_tokens, mma_type,
    activation
        As for ``get_symm_buffer_size_for_mega_moe`` (``num_max_tokens_per_rank`` already aligned to 384).
    device : torch.device or str, optional (keyword-only, our extension)
        Where a single-process buffer lives; default CUDA when available, else CPU.

    Attributes
    ----------
    The constructor arguments, ``num_ranks``, ``rank_idx``, ``buffer`` (1-D ``int8``, zeroed), ``handle``
    (``handle.buffer_ptrs``: one address per rank), and the views ``x``, ``x_sf``, ``topk_idx``, ``topk_weights``,
    ``l1_acts``, ``l1_acts_sf``, ``l2_acts``, ``l2_acts_sf`` (scales are None for ``bf16xbf16``). Before a call the
    caller copies its ``T <= num_max_tokens_per_rank`` tokens into the first rows of ``x``, ``x_sf``, ``topk_idx``
    and ``topk_weights``.

    Example
    -------
    >>> buf = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, 3072, device='cpu')
    >>> buf.x[:T].copy_(x_fp8); buf.topk_idx[:T].copy_(topk_idx)
    """

    def __init__(self, group, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                 intermediate_hidden: int, num_ring_tokens: int, mma_type: str = "fp8xfp4",
                 activation: str = "swiglu", *, device: Union[torch.device, str, None] = None):
        num_ranks, rank_idx = _world(group)
        num_bytes, slice_fn = get_symm_buffer_size_for_mega_moe(
            num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden, mma_type,
            activation, num_ring_tokens)
        self.group = group
        self.num_ranks, self.rank_idx = num_ranks, rank_idx
        self.num_experts = num_experts
        self.num_max_tokens_per_rank = num_max_tokens_per_rank
        self.num_topk = num_topk
        self.hidden = hidden
        self.intermediate_hidden = intermediate_hidden
        self.num_ring_tokens = num_ring_tokens
        self.mma_type = mma_type
        self.activation = activation
        if num_ranks == 1:
            if device is None:
                device = "cuda" if torch.cuda.is_available() else "cpu"
            self.buffer = torch.zeros(num_bytes, dtype=torch.int8, device=device)
            self.handle = types.SimpleNamespace(buffer_ptrs=[self.buffer.data_ptr()])
        else:
            self.buffer, self.handle = _allocate_symmetric(group, num_bytes, device)
        (self.x, self.x_sf, self.topk_idx, self.topk_weights,
         self.l1_acts, self.l1_acts_sf, self.l2_acts, self.l2_acts_sf) = slice_fn(self.buffer)

    def destroy(self) -> None:
        """Drop the buffer, its handle and every view (the memory is freed once no other reference remains)."""
        self.handle = self.buffer = self.group = None
        self.x = self.x_sf = self.topk_idx = self.topk_weights = None
        self.l1_acts = self.l1_acts_sf = self.l2_acts = self.l2_acts_sf = None

    def __repr__(self) -> str:
        nbytes = None if self.buffer is None else self.buffer.numel()
        return (f"SymmBuffer(num_ranks={self.num_ranks}, num_experts={self.num_experts}, "
                f"num_max_tokens_per_rank={self.num_max_tokens_per_rank}, num_topk={self.num_topk}, "
                f"hidden={self.hidden}, intermediate_hidden={self.intermediate_hidden}, "
                f"num_ring_tokens={self.num_ring_tokens}, mma_type={self.mma_type!r}, num_bytes={nbytes})")


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
                                 intermediate_hidden: int, use_fp8_dispatch: Optional[bool] = None,
                                 mma_type: str = "fp8xfp4", activation: str = "swiglu", *,
                                 device: Union[torch.device, str, None] = None) -> SymmBuffer:
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
    num_ranks, _ = _world(group)
    require(num_experts >= 1 and num_experts % num_ranks == 0,
            f"num_experts: expected a positive multiple of the group size ({num_ranks}), got {num_experts}")
    require(num_max_tokens_per_rank >= 1,
            f"num_max_tokens_per_rank: expected a positive integer, got {num_max_tokens_per_rank}")
    alignment = get_token_alignment_for_mega_moe()
    tokens = align(num_max_tokens_per_rank, alignment)
    low, high = get_ring_limit_for_mega_moe(tokens, num_experts // num_ranks, num_topk, num_ranks)
    if tokens >= PREFILL_TOKENS_THRESHOLD:
        ring = align(PREFILL_RING_TOKENS, alignment)
    else:
        ref_tokens, ref_experts, ref_topk, ref_ranks = DECODE_RING_REFERENCE
        ring = get_ring_limit_for_mega_moe(align(ref_tokens, alignment), ref_experts, ref_topk, ref_ranks)[1]
    ring = min(max(ring, low), high)
    if use_fp8_dispatch is not None:
        require(bool(use_fp8_dispatch) == (mma_type.split("x")[0] == "fp8"),
                f"use_fp8_dispatch: {use_fp8_dispatch} contradicts mma_type={mma_type!r}")
        warnings.warn("`use_fp8_dispatch` will be deprecated in the future, please use `mma_type`",
                      DeprecationWarning, stacklevel=2)
    return SymmBuffer(group, num_experts, tokens, num_topk, hidden, intermediate_hidden, ring,
                      mma_type=mma_type, activation=activation, device=device)


# ---- weights ---------------------------------------------------------------------------------------------------

def _permute_rows(t: torch.Tensor, source_rows: torch.Tensor) -> torch.Tensor:
    """``out[:, r] = t[:, source_rows[r]]`` in fresh storage with t's strides (DeepGEMM keeps the layout)."""
    out = torch.empty_like(t)
    out.copy_(t.index_select(1, source_rows))
    return out


def _interleave_gate_up(name: str, t: torch.Tensor) -> torch.Tensor:
    """Rows ``[gate | up]`` -> ``[gate 0-7, up 0-7, gate 8-15, up 8-15, ...]`` (dim 1 of ``[E, 2I, ...]``)."""
    require_dim(name, t, 3)
    rows = t.size(1)
    require(rows % (2 * INTERLEAVE_ROWS) == 0,
            f"{name}: expected dim 1 (2 x intermediate_hidden: gate rows then up rows) to be a multiple of "
            f"{2 * INTERLEAVE_ROWS}, got {rows}")
    r = torch.arange(rows, device=t.device)
    chunk, within = r // (2 * INTERLEAVE_ROWS), r % (2 * INTERLEAVE_ROWS)
    is_up = within >= INTERLEAVE_ROWS
    source = chunk * INTERLEAVE_ROWS + within - is_up.long() * INTERLEAVE_ROWS + is_up.long() * (rows // 2)
    return _permute_rows(t, source)


def _check_utccp_sf(name: str, sf: torch.Tensor) -> None:
    require_dim(name, sf, 3)
    require_dtype(name, sf, (torch.int32,))
    require(sf.size(1) % UTCCP_ROWS == 0,
            f"{name}: expected dim 1 to be a multiple of {UTCCP_ROWS}, got {sf.size(1)}")


def _transpose_sf_for_utccp(sf: torch.Tensor) -> torch.Tensor:
    """Within every 128 rows, row ``32 q + p`` moves to ``4 p + q`` (the order UTCCP reads packed UE8M0 scales)."""
    group_rows = UTCCP_ROWS // UTCCP_GROUPS
    r = torch.arange(sf.size(1), device=sf.device)
    source = (r // UTCCP_ROWS) * UTCCP_ROWS + (r % UTCCP_GROUPS) * group_rows + (r % UTCCP_ROWS) // UTCCP_GROUPS
    return _permute_rows(sf, source)


def _is_pair(x) -> bool:
    return isinstance(x, (tuple, list)) and len(x) == 2


def transform_weights_for_mega_moe(l1_weights: Union[torch.Tensor, Pair], l2_weights: Union[torch.Tensor, Pair],
                                   activation: str = "swiglu"):
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

    Returns
    -------
    (l1, l2) in the input's form. L1 rows (and, for pairs, L1 SF rows) go from ``[gate | up]`` to interleaved
    8-row chunks ``[g0-7, u0-7, g8-15, u8-15, ...]``; for pairs both SF tensors are then permuted for UTCCP: within
    each 128 rows, row ``32 q + p`` moves to row ``4 p + q`` (SF rows must be multiples of 128). BF16 L2 and FP8 L2
    data are returned as given. Outputs keep the inputs' strides.

    Example
    -------
    >>> l1, l2 = deep_gemm.transform_weights_for_mega_moe((w1_fp4, w1_sf), (w2_fp4, w2_sf))
    """
    require(activation in _buffer.ACTIVATIONS,
            f"activation: expected 'swiglu' (the only activation), got {activation!r}")
    if _is_pair(l1_weights) != _is_pair(l2_weights):
        fail("l1_weights, l2_weights: expected both (data, sf) pairs (FP8/FP4) or both tensors (BF16), got "
             f"{type(l1_weights).__name__} and {type(l2_weights).__name__}")
    if not _is_pair(l1_weights):
        return _interleave_gate_up("l1_weights", l1_weights), l2_weights
    (l1, l1_sf), (l2, l2_sf) = l1_weights, l2_weights
    _check_utccp_sf("l1_weights[1]", l1_sf)
    _check_utccp_sf("l2_weights[1]", l2_sf)
    require(tuple(l1_sf.shape[:2]) == tuple(l1.shape[:2]),
            f"l1_weights[1]: expected {tuple(l1.shape[:2])} in the first two dims (one SF row per weight row), "
            f"got shape {tuple(l1_sf.shape)}")
    l1_out = _interleave_gate_up("l1_weights[0]", l1)
    l1_sf_out = _transpose_sf_for_utccp(_interleave_gate_up("l1_weights[1]", l1_sf))
    return (l1_out, l1_sf_out), (l2, _transpose_sf_for_utccp(l2_sf))


# ---- the fused kernels (argument checks only, for now) -----------------------------------------------------------

def _check_mega_moe(fn: str, y, l1, l1_sf, l2, l2_sf, sym_buffer, stats, activation, activation_clamp,
                    mma_type: str) -> None:
    require(isinstance(sym_buffer, SymmBuffer), f"sym_buffer: expected a SymmBuffer, got {type(sym_buffer).__name__}")
    require(sym_buffer.buffer is not None, "sym_buffer: the buffer was destroyed")
    require(sym_buffer.mma_type == mma_type,
            f"sym_buffer: {fn} needs a buffer built with mma_type={mma_type!r}, got {sym_buffer.mma_type!r}")
    require(activation in _buffer.ACTIVATIONS,
            f"activation: expected 'swiglu' (the only activation), got {activation!r}")
    if activation_clamp is not None:
        require(activation_clamp >= 0, f"activation_clamp: expected None or a value >= 0, got {activation_clamp}")
    hidden, inter = sym_buffer.hidden, sym_buffer.intermediate_hidden
    local = sym_buffer.num_experts // sym_buffer.num_ranks
    require_dtype("y", y, (torch.bfloat16,))
    require_dim("y", y, 2)
    require(y.size(0) <= sym_buffer.num_max_tokens_per_rank and y.size(1) == hidden,
            f"y: expected shape [T <= {sym_buffer.num_max_tokens_per_rank}, {hidden}] (the buffer's capacity and "
            f"hidden), got {tuple(y.shape)}")
    weight_dtypes = (torch.bfloat16,) if mma_type == "bf16xbf16" else (torch.float8_e4m3fn, torch.int8)
    for name, w, rows, k in (("l1_weights", l1, 2 * inter, hidden), ("l2_weights", l2, hidden, inter)):
        require_dtype(name, w, weight_dtypes)
        require_dim(name, w, 3)
        cols = k // 2 if w.dtype == torch.int8 else k  # FP4 E2M1 packs two values per byte
        require_shape(name, w, (local, rows, cols), "[local experts, N, K] with K-major rows")
        require_contiguous(name, w)
    for name, sf, rows, k in (("l1_weights sf", l1_sf, 2 * inter, hidden), ("l2_weights sf", l2_sf, hidden, inter)):
        if sf is None:
            continue
        require_dtype(name, sf, (torch.int32,))
        require_shape(name, sf, (local, rows, k // (_buffer.SF_GRAN_K * _buffer.SF_PER_INT32)),
                      "packed UE8M0, one int32 per 128 of K")
    if stats is not None:
        require_dtype("cumulative_local_expert_recv_stats", stats, (torch.int32,))
        require(stats.numel() == local and stats.is_contiguous(),
                f"cumulative_local_expert_recv_stats: expected a contiguous tensor of {local} elements (local "
                f"experts), got shape {tuple(stats.shape)}")
    require_same_device(sym_buffer=sym_buffer.buffer, y=y, l1_weights=l1, l2_weights=l2,
                        cumulative_local_expert_recv_stats=stats)


def fp8_fp4_mega_moe(y: torch.Tensor, l1_weights: Pair, l2_weights: Pair, sym_buffer: SymmBuffer,
                     cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None,
                     recipe: Tuple[int, int, int] = (1, 1, 32), activation: str = "swiglu",
                     activation_clamp: Optional[float] = None, fast_math: bool = True) -> None:
    """Fused expert-parallel MoE layer, FP8 activations x FP4 weights (NOT IMPLEMENTED YET: validates, then raises).

    Semantics (DeepGEMM): tokens already copied into ``sym_buffer`` (``x``, ``x_sf``, ``topk_idx``,
    ``topk_weights``, first ``T = y.size(0)`` rows) are dispatched to their experts' ranks; per local expert
    ``h = x @ W1.T``, ``a = silu(min(gate, clamp)) * clamp(up, -clamp, clamp) * topk_weight`` quantised to FP8 per 32
    (UE8M0), ``o = a @ W2.T``; results are combined (summed over top-k) into ``y`` [T, H] BF16 on the tokens' rank.

    Parameters
    ----------
    y : Tensor
        ``[T, H]`` BF16, written in place; ``T <= sym_buffer.num_max_tokens_per_rank``.
    l1_weights, l2_weights : (Tensor, Tensor)
        From ``transform_weights_for_mega_moe``: ``W1 [E_local, 2I, H]``, ``W2 [E_local, H, I]`` (FP4 packed in
        int8 with half the columns, or FP8), contiguous; scales packed UE8M0 ``int32 [E_local, N, K/128]``.
    sym_buffer : SymmBuffer
        Built with ``mma_type='fp8xfp4'``.
    cumulative_local_expert_recv_stats : Tensor, optional
        int32 ``[E_local]``; tokens received per local expert are added to it.
    recipe : (int, int, int)
        ``(1, 1, 32)`` only.
    activation, activation_clamp, fast_math
        ``'swiglu'``; clamp None (= +inf) or >= 0; fast math toggles approximate exp in SwiGLU.

    Raises
    ------
    DeepGEMMError on bad arguments; NotImplementedError otherwise (the kernel is not implemented in this release).

    Example
    -------
    >>> deep_gemm.fp8_fp4_mega_moe(y, l1, l2, buf)   # raises NotImplementedError today
    """
    l1, l1_sf = unpack_pair("l1_weights", l1_weights)
    l2, l2_sf = unpack_pair("l2_weights", l2_weights)
    require(tuple(int(v) for v in recipe) == (1, 1, 32), f"recipe: expected (1, 1, 32), got {tuple(recipe)}")
    _check_mega_moe("fp8_fp4_mega_moe", y, l1, l1_sf, l2, l2_sf, sym_buffer, cumulative_local_expert_recv_stats,
                    activation, activation_clamp, "fp8xfp4")
    raise NotImplementedError(f"fp8_fp4_mega_moe: {_MISSING_KERNEL}")


def bf16_mega_moe(y: torch.Tensor, l1_weights: torch.Tensor, l2_weights: torch.Tensor, sym_buffer: SymmBuffer,
                  cumulative_local_expert_recv_stats: Optional[torch.Tensor] = None, activation: str = "swiglu",
                  activation_clamp: Optional[float] = None, fast_math: bool = True) -> None:
    """Fused expert-parallel MoE layer in BF16 (NOT IMPLEMENTED YET: validates, then raises).

    As ``fp8_fp4_mega_moe`` with BF16 weights ``W1 [E_local, 2I, H]`` (L1 rows interleaved by
    ``transform_weights_for_mega_moe``), ``W2 [E_local, H, I]``, no scales, and a buffer built with
    ``mma_type='bf16xbf16'``.

    Raises
    ------
    DeepGEMMError on bad arguments; NotImplementedError otherwise (the kernel is not implemented in this release).

    Example
    -------
    >>> deep_gemm.bf16_mega_moe(y, l1, l2, buf)   # raises NotImplementedError today
    """
    _check_mega_moe("bf16_mega_moe", y, l1_weights, None, l2_weights, None, sym_buffer,
                    cumulative_local_expert_recv_stats, activation, activation_clamp, "bf16xbf16")
    raise NotImplementedError(f"bf16_mega_moe: {_MISSING_KERNEL}")
