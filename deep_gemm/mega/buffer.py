"""The Mega MoE symmetric buffer: its byte plan, the ring-capacity limits, and the serialised slice layout.

DeepGEMM sizes one ``int8`` buffer per rank (symmetric memory when several ranks share it) and carves it into
regions, in this order (every region starts at a multiple of ``REGION_ALIGNMENT`` bytes):

=====================  ===========================================  ====================================  =========
region                 shape (elements)                             dtype                                 exported
=====================  ===========================================  ====================================  =========
workspace              signals, counters, dispatch/combine indices  (bytes)                               no
x                      ``[T, H]``                                   FP8 e4m3 (``fp8xfp4``) or BF16        yes
x_sf                   ``[T, H/128]``, K-major                      int32: 4 UE8M0 bytes (per 32 of K)    yes
topk_idx               ``[T, k]``                                   int64                                 yes
topk_weights           ``[T, k]``                                   float32                               yes
l1_acts                ``[R, H]``                                   as x                                  yes
l1_acts_sf             ``[R_sf, H/128]``, MN-major                  int32                                 yes
l1_topk_weights        ``[R]``                                      float32                               no
l2_acts                ``[R, I]``                                   as x                                  yes
l2_acts_sf             ``[R_sf, I/128]``, MN-major                  int32                                 yes
combine                ``[k, T, H]``                                BF16                                  no
=====================  ===========================================  ====================================  =========

``T`` = ``num_max_tokens_per_rank`` (a multiple of the token alignment, 384), ``H`` = hidden, ``I`` =
intermediate_hidden, ``k`` = num_topk, ``R`` = ``num_ring_tokens``, ``R_sf`` = the SF ring: for every candidate
BLOCK_M the ring holds ``R / BLOCK_M`` blocks whose scale rows are padded to 128 (the UTCCP copy granularity), so
``R_sf = max_bm (R / bm) * align(bm, 128)`` (= 16 R, from BLOCK_M 8). MN-major scale views have strides
``(1, R_sf)``. With ``bf16xbf16`` there are no scales: the three ``*_sf`` regions are empty (``[T, 0]`` /
``[R_sf, 0]`` int32 views of zero bytes).

The sizes follow DeepGEMM's own plan (``csrc/apis/mega.hpp`` at the spec's commit; facts only): per-token byte
counts, ring and SF-ring token counts and region order match. Two differences, so ``num_bytes`` is close to but not
byte-identical with DeepGEMM's: the workspace is our estimate of DeepGEMM's signal and index area (the same
components, see ``_workspace_bytes``), and every region is 128-byte aligned where DeepGEMM packs them back to back
(at most 127 padding bytes per region). Nothing outside this package reads the buffer, so only self-consistency
matters until the fused kernel lands.

Serialised layout (``int[]``, the second result of ``get_symm_buffer_size_for_mega_moe``; our format, versioned)::

    [LAYOUT_VERSION, num_bytes, num_slices,
     then per slice: byte_offset, dtype_code, ndim, size_0..size_{ndim-1}, stride_0..stride_{ndim-1}]

``dtype_code`` is c10's ``ScalarType`` number (so a C++ caller can ``static_cast<c10::ScalarType>`` it); strides are
in elements and must be a permutation of a dense row-major layout (that is what makes the views expressible with
``view``/``permute`` only, which torch.compile can functionalise; ``as_strided`` it cannot). The slices are the eight
exported regions in the order of the table. ``encode_layout`` and ``decode_layout`` are the only writer and reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm
from typing import Sequence

import torch

from ..core.errors import fail, require
from ..utils.math import TMA_ALIGNMENT_BYTES, align

# Candidate BLOCK_M values of DeepGEMM's Mega MoE kernel (the heuristic picks one per call).
CANDIDATE_BLOCK_M = (8, 16, 32, 64, 96, 128, 192)
# Largest candidate: every expert's slice of the token pool may need up to BLOCK_M - 1 padding rows.
MAX_CANDIDATE_BLOCK_M = max(CANDIDATE_BLOCK_M)
# Smallest candidate: the ring is tracked in blocks of this many tokens (one counter each).
MIN_CANDIDATE_BLOCK_M = min(CANDIDATE_BLOCK_M)
# Token counts (per-rank capacity, ring size) are multiples of every candidate BLOCK_M: their LCM, 384.
TOKEN_ALIGNMENT = lcm(*CANDIDATE_BLOCK_M)
# UTCCP copies scale factors in groups of 128 rows, so each block's SF rows are padded to 128.
SF_ROW_PADDING = 128
# The kernel's block scaling: one UE8M0 exponent byte per 32 elements of K (MXFP8); 4 bytes packed in one int32.
SF_GRAN_K = 32
SF_PER_INT32 = 4
# hidden and intermediate_hidden: whole 128-element K blocks (4 packed SF bytes x 32 = one int32 column each).
HIDDEN_ALIGNMENT = SF_GRAN_K * SF_PER_INT32
# Every region starts on a 128-byte boundary: TMA needs 16 B, and 128 B (one L2 line) keeps regions that
# different SMs update from sharing cache lines.
REGION_ALIGNMENT = 128
# Workspace: barrier and task-scheduler counters sit on their own 128-byte line (hot atomics).
_SIGNAL_HEADER_BYTES = 128
# Per ring block the kernel keeps four uint32 counters: L1 full/empty and L2 full/empty.
_RING_COUNTERS_PER_BLOCK = 4
# Combine write-back metadata per pooled token: (rank, token, top-k slot), three uint32.
_TOKEN_SRC_METADATA_BYTES = 12

# DeepGEMM's MMA kinds: FP8 activations x FP4 weights with UE8M0 scales, or plain BF16 (no scales).
MMA_TYPES = ("fp8xfp4", "bf16xbf16")
ACTIVATIONS = ("swiglu",)
# Bump when the serialised layout changes meaning; decode_layout rejects other versions.
LAYOUT_VERSION = 1
_HEADER_LEN = 3  # version, num_bytes, num_slices

# c10::ScalarType numbers of the dtypes the buffer uses (fixed by c10's ABI; the C++ test checks them).
_DTYPE_CODES = {
    torch.int8: 1, torch.int32: 3, torch.int64: 4, torch.float32: 6, torch.bfloat16: 15, torch.float8_e4m3fn: 24,
}
_DTYPES_BY_CODE = {code: dtype for dtype, code in _DTYPE_CODES.items()}

EXPORTED = ("x", "x_sf", "topk_idx", "topk_weights", "l1_acts", "l1_acts_sf", "l2_acts", "l2_acts_sf")


@dataclass(frozen=True)
class Region:
    """One region of the buffer: ``nbytes`` bytes at ``offset``; exported regions also carry their view."""

    name: str
    offset: int
    nbytes: int
    dtype: torch.dtype | None = None
    sizes: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass(frozen=True)
class BufferPlan:
    num_bytes: int
    regions: tuple[Region, ...]

    def region(self, name: str) -> Region:
        return next(r for r in self.regions if r.name == name)

    @property
    def exported(self) -> tuple[Region, ...]:
        return tuple(self.region(name) for name in EXPORTED)


# ---- argument checks (also the check functions of the size/ring ops) ------------------------------------------

def _require_positive(name: str, value: int) -> None:
    require(value >= 1, f"{name}: expected a positive integer, got {value}")


def _require_token_aligned(name: str, value: int) -> None:
    require(value % TOKEN_ALIGNMENT == 0,
            f"{name}: expected a multiple of {TOKEN_ALIGNMENT} (get_token_alignment_for_mega_moe()), got {value}")


def check_ring_limit_args(num_max_tokens_per_rank: int, num_local_experts: int, num_topk: int,
                          num_ranks: int) -> None:
    for name, value in (("num_max_tokens_per_rank", num_max_tokens_per_rank),
                        ("num_local_experts", num_local_experts), ("num_topk", num_topk), ("num_ranks", num_ranks)):
        _require_positive(name, value)
    _require_token_aligned("num_max_tokens_per_rank", num_max_tokens_per_rank)


def _check_model_sizes(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                       intermediate_hidden: int, *more_positive: tuple[str, int]) -> None:
    """The checks both buffer layouts share: every size (and each ``(name, value)`` of ``more_positive``) positive,
    experts split evenly over the ranks, at most ``num_experts`` per token, hidden sizes multiples of 128."""
    for name, value in (("num_ranks", num_ranks), ("num_experts", num_experts),
                        ("num_max_tokens_per_rank", num_max_tokens_per_rank), ("num_topk", num_topk),
                        ("hidden", hidden), ("intermediate_hidden", intermediate_hidden), *more_positive):
        _require_positive(name, value)
    require(num_experts % num_ranks == 0,
            f"num_experts: expected a multiple of num_ranks ({num_ranks}), got {num_experts}")
    require(num_topk <= num_experts, f"num_topk: expected at most num_experts ({num_experts}), got {num_topk}")
    for name, value in (("hidden", hidden), ("intermediate_hidden", intermediate_hidden)):
        require(value % HIDDEN_ALIGNMENT == 0, f"{name}: expected a multiple of {HIDDEN_ALIGNMENT}, got {value}")


def check_size_args(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                    intermediate_hidden: int, mma_type: str, activation: str, num_ring_tokens: int) -> None:
    _check_model_sizes(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                       ("num_ring_tokens", num_ring_tokens))
    require(mma_type in MMA_TYPES, f"mma_type: expected one of {', '.join(MMA_TYPES)}, got {mma_type!r}")
    require(activation in ACTIVATIONS, f"activation: expected 'swiglu' (the only activation), got {activation!r}")
    _require_token_aligned("num_max_tokens_per_rank", num_max_tokens_per_rank)
    _require_token_aligned("num_ring_tokens", num_ring_tokens)
    low, high = ring_limit(num_max_tokens_per_rank, num_experts // num_ranks, num_topk, num_ranks)
    require(low <= num_ring_tokens <= high,
            f"num_ring_tokens: expected a value in [{low}, {high}] (get_ring_limit_for_mega_moe), "
            f"got {num_ring_tokens}")


# ---- sizes -----------------------------------------------------------------------------------------------------

def _wave_pool_tokens(num_ranks: int, num_topk: int, num_max_tokens_per_rank: int, num_experts_per_wave: int,
                      block_m: int) -> int:
    """Tokens one wave of ``num_experts_per_wave`` local experts can receive, with per-expert BLOCK_M padding."""
    received = num_max_tokens_per_rank * num_ranks
    if num_experts_per_wave == 1:
        return received
    # Every token to every expert of the wave, or every routed copy here plus up to block_m - 1 padding per expert.
    return min(received * num_experts_per_wave,
               align(received * num_topk + num_experts_per_wave * (block_m - 1), block_m))


def ring_limit(num_max_tokens_per_rank: int, num_local_experts: int, num_topk: int, num_ranks: int) -> tuple[int, int]:
    """(smallest ring: one expert per wave, largest useful ring: all local experts in one wave)."""
    return (_wave_pool_tokens(num_ranks, num_topk, num_max_tokens_per_rank, 1, TOKEN_ALIGNMENT),
            _wave_pool_tokens(num_ranks, num_topk, num_max_tokens_per_rank, num_local_experts, TOKEN_ALIGNMENT))


def sf_ring_tokens(num_ring_tokens: int) -> int:
    """SF rows of the ring: each BLOCK_M block's scale rows padded to 128, worst case over the candidates."""
    return max((num_ring_tokens // bm) * align(bm, SF_ROW_PADDING) for bm in CANDIDATE_BLOCK_M)


def _workspace_bytes(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                     num_ring_tokens: int) -> int:
    experts_per_rank = num_experts // num_ranks
    # Worst-case pooled tokens: every rank's tokens, each routed to min(k, local experts) local experts, plus
    # per-expert BLOCK_M padding for the largest candidate.
    pool_tokens = align(num_ranks * num_max_tokens_per_rank * min(num_topk, experts_per_rank)
                        + experts_per_rank * (MAX_CANDIDATE_BLOCK_M - 1), TOKEN_ALIGNMENT)
    ring_blocks = num_ring_tokens // MIN_CANDIDATE_BLOCK_M
    num_bytes = _SIGNAL_HEADER_BYTES
    num_bytes += num_experts * 8 * 2                                  # per-expert send / receive counts (uint64)
    num_bytes += experts_per_rank * 8                                 # per-local-expert received sums (uint64)
    num_bytes += ring_blocks * 4 * _RING_COUNTERS_PER_BLOCK           # ring counters (uint32)
    num_bytes += num_experts * num_max_tokens_per_rank * 4            # dispatch source token/top-k index (uint32)
    num_bytes += pool_tokens * _TOKEN_SRC_METADATA_BYTES              # combine write-back metadata
    return num_bytes


def _row_major_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """torch's contiguous strides (a dimension of size 0 counts as 1, as torch.empty does)."""
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def plan_symm_buffer(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                     intermediate_hidden: int, mma_type: str, activation: str, num_ring_tokens: int) -> BufferPlan:
    """Every region of the buffer (see the module docstring). Validates the arguments first."""
    check_size_args(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                    mma_type, activation, num_ring_tokens)
    with_sf = mma_type == "fp8xfp4"
    token_dtype = torch.float8_e4m3fn if with_sf else torch.bfloat16
    tokens, ring, topk = num_max_tokens_per_rank, num_ring_tokens, num_topk
    sf_ring = sf_ring_tokens(ring)
    sf_cols = (lambda k: k // HIDDEN_ALIGNMENT) if with_sf else (lambda k: 0)

    regions: list[Region] = []
    cursor = 0

    def add(name: str, nbytes: int, dtype: torch.dtype | None = None, sizes: tuple[int, ...] = (),
            mn_major: bool = False) -> None:
        nonlocal cursor
        offset = align(cursor, REGION_ALIGNMENT)
        strides: tuple[int, ...] = ()
        if dtype is not None:
            if mn_major:  # [rows, cols] stored column by column: strides (1, rows)
                strides = (1, max(sizes[0], 1))
            else:
                strides = _row_major_strides(sizes)
            elements = 1
            for s in sizes:
                elements *= s
            assert elements * dtype.itemsize == nbytes, name
        regions.append(Region(name, offset, nbytes, dtype, sizes, strides))
        cursor = offset + nbytes

    token_bytes = token_dtype.itemsize
    add("workspace", _workspace_bytes(num_ranks, num_experts, tokens, topk, ring))
    add("x", tokens * hidden * token_bytes, token_dtype, (tokens, hidden))
    add("x_sf", tokens * sf_cols(hidden) * 4, torch.int32, (tokens, sf_cols(hidden)))
    add("topk_idx", tokens * topk * 8, torch.int64, (tokens, topk))
    add("topk_weights", tokens * topk * 4, torch.float32, (tokens, topk))
    add("l1_acts", ring * hidden * token_bytes, token_dtype, (ring, hidden))
    add("l1_acts_sf", sf_ring * sf_cols(hidden) * 4, torch.int32, (sf_ring, sf_cols(hidden)), mn_major=True)
    add("l1_topk_weights", ring * 4)
    add("l2_acts", ring * intermediate_hidden * token_bytes, token_dtype, (ring, intermediate_hidden))
    add("l2_acts_sf", sf_ring * sf_cols(intermediate_hidden) * 4, torch.int32,
        (sf_ring, sf_cols(intermediate_hidden)), mn_major=True)
    add("combine", topk * tokens * hidden * torch.bfloat16.itemsize)
    return BufferPlan(align(cursor, REGION_ALIGNMENT), tuple(regions))


# ---- the serialised layout -------------------------------------------------------------------------------------

def encode_layout(plan: BufferPlan) -> list[int]:
    """The ``int[]`` handed to ``_slice_symm_buffer_for_mega_moe`` (format in the module docstring)."""
    out = [LAYOUT_VERSION, plan.num_bytes, len(EXPORTED)]
    for region in plan.exported:
        out += [region.offset, _DTYPE_CODES[region.dtype], len(region.sizes), *region.sizes, *region.strides]
    return out


@dataclass(frozen=True)
class SliceSpec:
    offset: int
    dtype: torch.dtype
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.sizes:
            n *= s
        return n

    @property
    def order(self) -> tuple[int, ...]:
        """Dimensions from outermost to innermost in memory (the permutation of a dense row-major block)."""
        return tuple(sorted(range(len(self.sizes)), key=lambda d: (-self.strides[d], d)))


def decode_layout(layout: Sequence[int]) -> tuple[int, list[SliceSpec]]:
    """(num_bytes, slices) from a serialised layout; raises DeepGEMMError on anything malformed."""
    layout = [int(v) for v in layout]
    if len(layout) < _HEADER_LEN or layout[0] != LAYOUT_VERSION:
        got = layout[0] if layout else "an empty list"
        fail(f"layout: expected a Mega MoE layout of version {LAYOUT_VERSION} "
             f"(from get_symm_buffer_size_for_mega_moe), got version {got}")
    num_bytes, num_slices = layout[1], layout[2]
    require(num_bytes >= 0 and num_slices >= 0,
            f"layout: expected non-negative num_bytes and slice count, got {num_bytes} and {num_slices}")
    slices, pos = [], _HEADER_LEN
    for index in range(num_slices):
        if pos + 3 > len(layout):
            fail(f"layout: truncated at slice {index} (length {len(layout)})")
        offset, code, ndim = layout[pos:pos + 3]
        pos += 3
        require(code in _DTYPES_BY_CODE,
                f"layout: slice {index} has unknown dtype code {code} (known: {sorted(_DTYPES_BY_CODE)})")
        require(ndim >= 1 and pos + 2 * ndim <= len(layout),
                f"layout: slice {index} has a bad rank {ndim} or is truncated (length {len(layout)})")
        sizes, strides = tuple(layout[pos:pos + ndim]), tuple(layout[pos + ndim:pos + 2 * ndim])
        pos += 2 * ndim
        spec = SliceSpec(offset, _DTYPES_BY_CODE[code], sizes, strides)
        require(min(sizes) >= 0, f"layout: slice {index} has negative sizes {sizes}")
        require(offset >= 0 and offset % TMA_ALIGNMENT_BYTES == 0 and offset + spec.nbytes <= num_bytes,
                f"layout: slice {index} ({spec.nbytes} bytes at offset {offset}) is misaligned (offsets are "
                f"multiples of {TMA_ALIGNMENT_BYTES}) or lies outside the {num_bytes}-byte buffer")
        dense = _row_major_strides([sizes[d] for d in spec.order])
        require(tuple(strides[d] for d in spec.order) == dense,
                f"layout: slice {index} strides {strides} are not a permutation of a dense layout of {sizes}")
        slices.append(spec)
    require(pos == len(layout), f"layout: {len(layout) - pos} trailing values after {num_slices} slices")
    return num_bytes, slices


def slice_buffer(buffer: torch.Tensor, layout: Sequence[int]) -> list[torch.Tensor]:
    """Views of ``buffer`` described by ``layout``: narrow -> dtype view -> shape view -> permute only, so the
    result aliases the buffer on every backend (real, meta, fake) and torch.compile can functionalise writes."""
    num_bytes, slices = decode_layout(layout)
    require(buffer.dtype == torch.int8, f"buffer: expected dtype int8, got {str(buffer.dtype).replace('torch.', '')}")
    require(buffer.dim() == 1, f"buffer: expected a 1-D tensor, got shape {tuple(buffer.shape)}")
    require(buffer.stride(0) == 1 or buffer.numel() <= 1,
            f"buffer: expected a contiguous tensor, got stride {buffer.stride()}")
    require(buffer.numel() >= num_bytes,
            f"buffer: expected at least {num_bytes} bytes (the layout's num_bytes), got {buffer.numel()}")
    views = []
    for spec in slices:
        order = spec.order
        stored_sizes = [spec.sizes[d] for d in order]
        raw = buffer.narrow(0, spec.offset, spec.nbytes)
        view = raw.view(spec.dtype).view(stored_sizes)
        inverse = sorted(range(len(order)), key=lambda i: order[i])
        views.append(view.permute(inverse) if order != tuple(range(len(order))) else view)
    return views


# ---- the SM90 FP8 buffer -----------------------------------------------------------------------------------------
# DeepGEMM's Hopper kernel predates the ring: every local expert's received tokens sit in one pool at once. Its
# regions, in order (each 128-byte aligned; P = pool tokens, P_sf = SF pool rows):
#
#   workspace      barrier/grid-sync counters, per-expert send/receive counts, per-pool-block L1 arrival counters and
#                  L2 arrival masks, per-(expert, rank, token) source top-k slots, per-pool-token combine metadata
#   x              [T, H]       FP8 e4m3
#   x_sf           [T, H/128]   FP32, K-major (one continuous scale per 128 channels: mega_moe_pre_dispatch_sm90)
#   topk_idx       [T, k]       int64
#   topk_weights   [T, k]       float32
#   l1_acts        [P, H]       FP8 e4m3
#   l1_acts_sf     [P_sf, H/128] FP32, MN-major
#   l1_topk_weights [P]         float32 (not exported)
#   l2_acts        [P, I]       FP8 e4m3
#   l2_acts_sf     [P_sf, I/64] FP32, MN-major (one scale per 64 intermediate columns: one L1 N block)
#   combine        [k, T, H]    BF16 (not exported)
#
# P = align(num_ranks * T * min(k, E_local) + E_local * (max BLOCK_M - 1), TOKEN_ALIGNMENT) (every routed copy plus
# per-expert BLOCK_M padding); the SM90 BLOCK_Ms are multiples of 64 (WGMMA M) so P_sf = (P / 64) * 128 (each
# 64-row block's scale rows padded to 128, the largest over the SM90 candidates).

# For the SM90 kernels this layout is the contract: the caller-filled input views
# (x, x_sf, topk_idx, topk_weights: what mega_moe_pre_dispatch_sm90 writes and what peers read over NVLink through
# handle.buffer_ptrs), then kernel-private regions at fixed offsets every rank computes alike (same sizes on every
# rank, so a peer's region is its base pointer plus the same offset): the workspace (zeroed at allocation; counters
# must be left zero again at the end of each call, so calls need no host-side reset and graph capture works), the
# L1 / L2 activation pools with their MN-major FP32 scales (rows grouped per expert, each expert's slice padded to
# BLOCK_M, scale rows padded per 64-row block to 128), the per-pool-row top-k weights, and the BF16 combine area
# [k, T, H] that remote L2 epilogues write into before the local top-k reduction.
#
# How the Triton kernels (``kernels.py``) use the kernel-private regions at one rank: the workspace starts with four
# int32 arrays of E_local entries (the per-expert arrival counters, zero between calls; the expert slices' pool
# starts and ends; the prefix sum of M tiles per expert), then one int32 pool position per (token, slot) and one
# int32 source (token * k + slot) per pool row (``sm90_workspace_arrays``); a pool row r keeps its scales at
# ``l1_acts_sf[r, :]`` / ``l2_acts_sf[r, :]`` (rows past P unused) and its top-k weight at ``l1_topk_weights[r]``.
# Over several ranks the same regions serve, with the workspace arrays of ``sm90_rank_workspace_arrays`` (peers
# write into this rank's pool rows, receive table, signal pad and combine area): the plan does not grow.
SM90_CANDIDATE_BLOCK_M = (64, 128, 192)
SM90_X_SF_GRAN = 128
SM90_L2_ACTS_SF_GRAN = 64
_SM90_BARRIER_BYTES = 32
_SM90_SF_ROW_PADDING = 128


def check_sm90_size_args(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int, hidden: int,
                         intermediate_hidden: int, use_fp8_dispatch: bool, activation: str) -> None:
    _check_model_sizes(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden)
    require(bool(use_fp8_dispatch), "use_fp8_dispatch: the SM90 Mega MoE dispatches FP8 tokens only (expected True)")
    require(activation in ACTIVATIONS, f"activation: expected 'swiglu' (the only activation), got {activation!r}")
    _require_token_aligned("num_max_tokens_per_rank", num_max_tokens_per_rank)


def sm90_pool_tokens(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int) -> int:
    local = num_experts // num_ranks
    return align(num_ranks * num_max_tokens_per_rank * min(num_topk, local)
                 + local * (max(SM90_CANDIDATE_BLOCK_M) - 1), TOKEN_ALIGNMENT)


def _sm90_workspace_bytes(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int) -> int:
    local = num_experts // num_ranks
    pool = sm90_pool_tokens(num_ranks, num_experts, num_max_tokens_per_rank, num_topk)
    pool_blocks = pool // min(SM90_CANDIDATE_BLOCK_M)
    num_bytes = _SM90_BARRIER_BYTES
    num_bytes += num_experts * 8 * 2                                   # per-expert send / receive counts
    num_bytes += local * 8                                             # per-local-expert received sums
    num_bytes += align(pool_blocks, 2) * 4                             # L1 arrival counters
    num_bytes += pool_blocks * 8                                       # L2 arrival masks
    num_bytes += local * num_ranks * num_ranks * num_max_tokens_per_rank * 4  # source top-k slot per received token
    num_bytes += pool * _TOKEN_SRC_METADATA_BYTES                      # combine write-back metadata
    return align(num_bytes, 16)


def plan_sm90_symm_buffer(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                          hidden: int, intermediate_hidden: int, use_fp8_dispatch: bool,
                          activation: str) -> BufferPlan:
    """Every region of the SM90 FP8 buffer (table above). Validates the arguments first."""
    check_sm90_size_args(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden, intermediate_hidden,
                         use_fp8_dispatch, activation)
    tokens, topk = num_max_tokens_per_rank, num_topk
    pool = sm90_pool_tokens(num_ranks, num_experts, tokens, topk)
    sf_pool = (pool // min(SM90_CANDIDATE_BLOCK_M)) * _SM90_SF_ROW_PADDING
    fp8, f32 = torch.float8_e4m3fn, torch.float32
    regions: list[Region] = []
    cursor = 0

    def add(name, nbytes, dtype=None, sizes=(), mn_major=False):
        nonlocal cursor
        offset = align(cursor, REGION_ALIGNMENT)
        strides: tuple[int, ...] = ()
        if dtype is not None:
            strides = (1, max(sizes[0], 1)) if mn_major else _row_major_strides(sizes)
        regions.append(Region(name, offset, nbytes, dtype, tuple(sizes), strides))
        cursor = offset + nbytes

    h_sf, i_sf = hidden // SM90_X_SF_GRAN, intermediate_hidden // SM90_L2_ACTS_SF_GRAN
    add("workspace", _sm90_workspace_bytes(num_ranks, num_experts, tokens, topk))
    add("x", tokens * hidden, fp8, (tokens, hidden))
    add("x_sf", tokens * h_sf * 4, f32, (tokens, h_sf))
    add("topk_idx", tokens * topk * 8, torch.int64, (tokens, topk))
    add("topk_weights", tokens * topk * 4, f32, (tokens, topk))
    add("l1_acts", pool * hidden, fp8, (pool, hidden))
    add("l1_acts_sf", sf_pool * h_sf * 4, f32, (sf_pool, h_sf), mn_major=True)
    add("l1_topk_weights", pool * 4)
    add("l2_acts", pool * intermediate_hidden, fp8, (pool, intermediate_hidden))
    add("l2_acts_sf", sf_pool * i_sf * 4, f32, (sf_pool, i_sf), mn_major=True)
    add("combine", topk * tokens * hidden * torch.bfloat16.itemsize)
    return BufferPlan(align(cursor, REGION_ALIGNMENT), tuple(regions))


def slice_sm90_buffer(buffer: torch.Tensor, num_ranks: int, num_experts: int, num_max_tokens_per_rank: int,
                      num_topk: int, hidden: int, intermediate_hidden: int, use_fp8_dispatch: bool,
                      activation: str) -> list[torch.Tensor]:
    """The eight exported views of an SM90 buffer (x, x_sf, topk_idx, topk_weights, l1_acts, l1_acts_sf, l2_acts,
    l2_acts_sf), through the same view-only slicer as the SM100 buffer."""
    plan = plan_sm90_symm_buffer(num_ranks, num_experts, num_max_tokens_per_rank, num_topk, hidden,
                                 intermediate_hidden, use_fp8_dispatch, activation)
    return slice_buffer(buffer, encode_layout(plan))


# int32 arrays the SM90 kernels keep in the workspace, in order: (name, number of elements).
def sm90_workspace_arrays(num_local_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                          pool_tokens: int) -> tuple[tuple[str, int], ...]:
    return (("counts", num_local_experts), ("starts", num_local_experts), ("ends", num_local_experts),
            ("tile_end", num_local_experts), ("slot_pos", num_max_tokens_per_rank * num_topk),
            ("row_src", pool_tokens))


# Several ranks: the int32 arrays of the rank-aware kernels, in order. ``counts`` holds this rank's slots per global
# expert (zero between calls); ``recv_counts`` is the ``[R, E]`` table every rank writes its counts row into;
# ``send_base`` the pool row (at the expert's rank) where this rank's slots of each global expert begin;
# ``signals`` / ``epoch`` the barrier's signal pad (slot r: the barrier count rank r last posted here) and this rank's
# own barrier count, both only growing; ``overflow`` the scan's per-call pool-overflow flag; ``status`` sticky error
# bits (kernels.py: barrier timeouts per peer, pool overflow), read by launch.py's ``check_status``.
STATUS_OVERFLOW = 1 << 30  # (bits below: peers a barrier gave up on)


def sm90_rank_workspace_arrays(num_ranks: int, num_experts: int, num_max_tokens_per_rank: int, num_topk: int,
                               pool_tokens: int) -> tuple[tuple[str, int], ...]:
    local = num_experts // num_ranks
    return (("signals", num_ranks), ("epoch", 1), ("status", 1), ("overflow", 1), ("counts", num_experts),
            ("starts", local), ("ends", local), ("tile_end", local), ("send_base", num_experts),
            ("recv_counts", num_ranks * num_experts), ("slot_pos", num_max_tokens_per_rank * num_topk),
            ("row_src", pool_tokens))


def sm90_kernel_views(buffer: torch.Tensor, plan: BufferPlan, num_local_experts: int, num_max_tokens_per_rank: int,
                      num_topk: int, num_ranks: int = 1) -> dict[str, torch.Tensor] | None:
    """Every region of an SM90 buffer as the kernels address it (exported views, the private regions as flat typed
    views, and the workspace arrays of ``sm90_workspace_arrays``, or for several ranks of
    ``sm90_rank_workspace_arrays``); None when the workspace cannot hold those arrays (fewer local experts than half
    the top-k: the launcher then declines)."""
    views = dict(zip(EXPORTED, slice_buffer(buffer, encode_layout(plan))))
    pool = views["l1_acts"].size(0)
    region = plan.region("l1_topk_weights")
    views["l1_topk_weights"] = buffer.narrow(0, region.offset, region.nbytes).view(torch.float32)
    region = plan.region("combine")
    views["combine"] = buffer.narrow(0, region.offset, region.nbytes).view(torch.bfloat16)
    workspace = plan.region("workspace")
    if num_ranks == 1:
        arrays = sm90_workspace_arrays(num_local_experts, num_max_tokens_per_rank, num_topk, pool)
    else:
        arrays = sm90_rank_workspace_arrays(num_ranks, num_local_experts * num_ranks, num_max_tokens_per_rank,
                                            num_topk, pool)
    if sum(n for _, n in arrays) * 4 > workspace.nbytes:
        return None
    ints = buffer.narrow(0, workspace.offset, workspace.nbytes).view(torch.int32)
    cursor = 0
    for name, n in arrays:
        views[name] = ints.narrow(0, cursor, n)
        cursor += n
    return views


# ---- the SM100-style buffer as the one-rank BF16 kernels use it ---------------------------------------------------
# ``bf16_mega_moe``'s Triton kernels (one rank) need the whole token pool at once, where DeepGEMM's fused kernel
# streams it through the ring in waves of experts. The workspace starts with the same int32 arrays as the SM90
# kernels' (``sm90_workspace_arrays``: counters zero between calls, pool starts / ends, M-tile prefix sums, a pool
# position per (token, slot), a source per pool row); the pool is the ring itself (``l1_acts`` / ``l2_acts``
# rows, ``l1_topk_weights``) when the ring holds every row a call can fill, which the ring sizes
# ``get_symm_buffer_for_mega_moe`` picks do for most shapes. Otherwise the pool arrays (``POOL_ARRAYS``) live in a
# per-stream workspace of the launcher (``core/scratch.py``). The BF16 combine area ``[k, T, H]`` is the buffer's.
POOL_ARRAYS = ("l1_acts", "l2_acts", "l1_topk_weights", "row_src")


def ring_kernel_views(buffer: torch.Tensor, plan: BufferPlan, num_local_experts: int, num_max_tokens_per_rank: int,
                      num_topk: int, pool_rows: int) -> dict[str, torch.Tensor] | None:
    """Every region of a ``bf16xbf16`` buffer as the BF16 kernels address it, for a call filling at most
    ``pool_rows`` pool rows: the exported views, ``combine`` (flat BF16) and the workspace arrays; the
    ``POOL_ARRAYS`` entries are None when the ring or the workspace cannot hold ``pool_rows`` rows. None when the
    workspace cannot hold even the per-expert and per-slot arrays (the launcher then declines)."""
    views = dict(zip(EXPORTED, slice_buffer(buffer, encode_layout(plan))))
    region = plan.region("combine")
    views["combine"] = buffer.narrow(0, region.offset, region.nbytes).view(torch.bfloat16)
    workspace = plan.region("workspace")
    ints = buffer.narrow(0, workspace.offset, workspace.nbytes // 4 * 4).view(torch.int32)
    arrays = sm90_workspace_arrays(num_local_experts, num_max_tokens_per_rank, num_topk, pool_rows)
    fixed = sum(n for name, n in arrays if name != "row_src")
    if fixed > ints.numel():
        return None
    cursor = 0
    for name, n in arrays:
        views[name] = ints.narrow(0, cursor, n) if cursor + n <= ints.numel() else None
        cursor += n
    ring = views["l1_acts"].size(0)
    if views["row_src"] is None or pool_rows > ring:
        for name in POOL_ARRAYS:
            views[name] = None
    else:
        region = plan.region("l1_topk_weights")
        views["l1_topk_weights"] = buffer.narrow(0, region.offset, region.nbytes).view(torch.float32)
    return views
