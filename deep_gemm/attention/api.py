"""Public MQA-logits API (DeepSeek V3.2 indexer), call-for-call compatible with DeepGEMM.

Each function unpacks the ``(data, scale)`` pairs and calls the flat ``torch.ops.deep_gemm`` op. Every function
returns a fresh tensor and mutates nothing. Logits are views of padded buffers whose rows start on 1 KiB boundaries:
they are row-major but not contiguous; use ``.stride(0)`` when handing them to a kernel.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..core.eager import eager_ops
from ..core.errors import fail

from ..common.operands import unpack_pair

__all__ = [
    "fp8_fp4_mqa_logits",
    "fp8_mqa_logits",
    "get_paged_mqa_logits_metadata",
    "fp8_fp4_paged_mqa_logits",
    "fp8_paged_mqa_logits",
]

_ops = eager_ops  # torch.ops.deep_gemm, skipping the dispatcher for plain eager CUDA calls (core/registry.py)
QPair = Sequence[Optional[torch.Tensor]]


def fp8_fp4_mqa_logits(q: QPair, kv: Sequence[torch.Tensor], weights: torch.Tensor,
                       cu_seq_len_k_start: torch.Tensor, cu_seq_len_k_end: torch.Tensor, clean_logits: bool = False,
                       max_seqlen_k: int = 0, logits_dtype: torch.dtype = torch.float32,
                       schedule_meta: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Indexer logits of S queries against SK keys: ``sum_h weights[i, h] * relu(q[i, h] . k[j])``.

    Parameters
    ----------
    q : (Tensor, Tensor or None)
        ``(Q, None)`` with Q ``float8_e4m3fn [S, H, D]`` contiguous, or ``(Q, Q_SF)`` with Q packed FP4 E2M1
        ``int8 [S, H, D/2]`` (low nibble = even element) and Q_SF ``int32 [S, H]`` holding ``D/32`` UE8M0 exponent
        bytes (one per 32 values along D; DeepGEMM SM100).
    kv : (Tensor, Tensor)
        ``(KV, KV_SF)``: FP8 ``[SK, D]`` with FP32 ``[SK]`` (or ``[SK, 1]``) scales, or (with FP4 Q) packed FP4
        ``int8 [SK, D/2]`` with ``int32 [SK]`` UE8M0 scales. Both contiguous.
    weights : Tensor
        ``[S, H]`` FP32 (or BF16 when ``logits_dtype`` is BF16), heads contiguous (``stride(1) == 1``).
    cu_seq_len_k_start, cu_seq_len_k_end : Tensor
        ``int32 [S]`` contiguous: query i sees keys ``[ks[i], ke[i])``.
    clean_logits : bool
        Write -inf outside ``[ks[i], ke[i])``; otherwise those entries are unspecified. Must be False when
        compressed. Default False, as DeepGEMM 0.2.3 (earlier releases of ours defaulted to True).
    max_seqlen_k : int
        0: logits ``[S, SK]``. > 0 ("compressed"): logits ``[S, max_seqlen_k]`` with
        ``out[i, t] = logits[i, ks[i] + t]`` for ``t < ke[i] - ks[i]``, the rest unspecified.
    logits_dtype : torch.dtype
        ``torch.float32`` or ``torch.bfloat16``.
    schedule_meta : Tensor, optional
        :func:`get_mqa_logits_metadata`'s split-K schedule for these queries (int32 1-D, of the length it returns
        for (S, H) at the current ``get_num_sms()``). Checked, not read: our kernels schedule themselves and the
        logits do not depend on the schedule.

    Returns
    -------
    Tensor
        FP32 (or BF16) ``[S, SK]`` view of a ``[align(S, 128 / H), align(SK + 256, 1024 / elt)]`` buffer, or
        ``[S, max_seqlen_k]`` of ``[align(S, 128 / H), align(align(max_seqlen_k, 256), 1024 / elt)]``.

    Maths: FP8 ``logits[i, j] = kv_sf[j] * sum_h weights[i, h] * relu(Q[i, h] . KV[j])``; FP4 dequantises both
    operands per 32 values first. FP32 accumulation; bitwise deterministic. Constraints: H in {8, 16, 32, 64}
    (DeepGEMM's SM90 kernel: 32, 64; ours on Hopper takes all four, FP4 included), D in {32, 64, 128} (FP4: 64,
    128). ks/ke are not range-checked (it would need a device sync); keys outside ``[0, SK)`` count as invalid.

    Example
    -------
    >>> q_fp8 = q.to(torch.float8_e4m3fn)                                     # q [S, H, D] bf16
    >>> kv_fp8 = deep_gemm.utils.per_custom_dims_cast_to_fp8(kv, (0,), False)  # kv [SK, D] bf16
    >>> logits = deep_gemm.fp8_fp4_mqa_logits((q_fp8, None), kv_fp8, weights, ks, ke)
    """
    q_data, q_sf = unpack_pair("q", q)
    kv_data, kv_sf = unpack_pair("kv", kv)
    return _ops.fp8_fp4_mqa_logits.default(q_data, q_sf, kv_data, kv_sf, weights, cu_seq_len_k_start,
                                           cu_seq_len_k_end, bool(clean_logits), int(max_seqlen_k), logits_dtype,
                                           schedule_meta)


def fp8_mqa_logits(q: torch.Tensor, kv: Sequence[torch.Tensor], weights: torch.Tensor,
                   ks: torch.Tensor, ke: torch.Tensor, clean_logits: bool = False,
                   max_seqlen_k: int = 0) -> torch.Tensor:
    """Legacy form of :func:`fp8_fp4_mqa_logits`: plain FP8 ``q [S, H, D]`` (no scale), FP32 logits. ``ks`` /
    ``ke`` are its ``cu_seq_len_k_start`` / ``cu_seq_len_k_end`` (DeepGEMM's names here; the long names are
    accepted as keywords). ``clean_logits`` defaults to False, as DeepGEMM 0.2.3.

    >>> logits = deep_gemm.fp8_mqa_logits(q_fp8, (kv_fp8, kv_sf), weights, ks, ke, clean_logits=False)
    """
    kv_data, kv_sf = unpack_pair("kv", kv)
    for name, bound in (("ks", ks), ("ke", ke)):  # (the op's check names them cu_seq_len_k_start / _end)
        if not isinstance(bound, torch.Tensor):
            fail(f"{name}: expected an int32 [S] tensor of KV {'starts' if name == 'ks' else 'ends'}, "
                 f"got {type(bound).__name__}")
    return _ops.fp8_mqa_logits.default(q, kv_data, kv_sf, weights, ks, ke, bool(clean_logits), int(max_seqlen_k))


def get_paged_mqa_logits_metadata(context_lens: torch.Tensor, block_kv: int, num_sms: int,
                                  indices: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Per-SM work split of :func:`fp8_fp4_paged_mqa_logits`; compute once per batch, reuse across layers.

    Parameters
    ----------
    context_lens : Tensor
        ``int32 [B, next_n]`` contiguous, the valid context length of every query row; or the older 1-D form
        ``int32 [B]`` (vLLM 0.11, the V3.2-era SGLang indexer), scheduled as ``[B, 1]``.
    block_kv : int
        Tokens per KV-cache page, 32 or 64 (DeepGEMM's SM90 kernel: 64). The split size is 256 tokens regardless.
    num_sms : int
        SMs the paged kernel will run on; must equal ``get_num_sms()`` at that time. 0 is taken only while
        ``get_num_sms()`` is 0 (no GPU, no ``set_num_sms``): a one-SM schedule for the CPU reference.
    indices : None
        Varlen request ids (DeepGEMM SM100) are not supported; must be None.

    Returns
    -------
    Tensor
        ``int32 [num_sms + 1, 2]``: row s = (first query atom, first 256-token KV split) of SM s; the last row is
        ``(B * atoms, 0)``. A sequence has ``ceil(next_n / 2)`` atoms of two rows when next_n >= 2, else one atom of
        one row, each with ``ceil(context_lens[b, -1] / 256)`` splits. With ``total = qq * num_sms + r`` work items,
        the first ``num_sms - r`` SMs take qq and the last r take qq + 1. Computed on the device (no host sync).

    Example
    -------
    >>> meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, 64, deep_gemm.get_num_sms())
    """
    num_sms = int(num_sms)
    if num_sms == 0 and _no_device_sm_count():
        # DeepGEMM's own pattern, get_paged_mqa_logits_metadata(..., get_num_sms()), on a machine without a GPU:
        # get_num_sms() is 0 there. Schedule for one SM; the CPU reference reads no schedule, and the logits op
        # accepts any [N + 1, 2] schedule while get_num_sms() is 0.
        num_sms = 1
    return _ops.get_paged_mqa_logits_metadata.default(context_lens, int(block_kv), num_sms, indices)


def _no_device_sm_count() -> bool:
    from ..core.runtime import get_num_sms
    return get_num_sms() == 0


def fp8_fp4_paged_mqa_logits(q: QPair, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                             block_table: torch.Tensor, schedule_meta: torch.Tensor, max_context_len: int,
                             clean_logits: bool = False, logits_dtype: torch.dtype = torch.float32,
                             indices: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Decode-time indexer logits over a paged KV cache (next_n query rows per sequence).

    Parameters
    ----------
    q : (Tensor, Tensor or None)
        ``(Q, None)`` with Q ``float8_e4m3fn [B, next_n, H, D]`` contiguous, or ``(Q, Q_SF)`` with Q packed FP4
        ``int8 [B, next_n, H, D/2]`` and Q_SF ``int32 [B, next_n, H]`` UE8M0 bytes, one per 32 values (SM100).
    kv_cache : Tensor
        ``uint8 [num_blocks, block_kv, 1, D + 4]`` (FP4: ``D/2 + 4``), ``stride(1) == D + 4``, ``stride(3) == 1``,
        page stride and start multiples of 4 bytes. Page ``blk`` (at byte ``blk * stride(0)``) holds ``block_kv``
        tokens of FP8 values (token-major), then ``block_kv`` FP32 scales (FP4: packed E2M1 values, then int32 UE8M0
        scales); the 4-D shape is only a byte view of that.
    weights : Tensor
        ``[B * next_n, H]`` FP32 (BF16 needs BF16 logits), heads contiguous.
    context_lens : Tensor
        ``int32 [B, next_n]`` contiguous: row ``b * next_n + n`` sees tokens ``t < context_lens[b, n]``. The older
        1-D form ``int32 [B]`` means DeepGEMM's causal rows: row n sees ``t < context_lens[b] - next_n + n + 1``.
    block_table : Tensor
        ``int32 [B, max_blocks]``, ``stride(1) == 1``: page of token t of sequence b is
        ``block_table[b, t // block_kv]``. Page ids must lie in ``[0, num_blocks)`` (not checked: it would need a
        sync) and contexts must fit the table (tokens past ``max_blocks * block_kv`` count as invalid).
    schedule_meta : Tensor
        ``int32 [num_sms + 1, 2]`` from :func:`get_paged_mqa_logits_metadata` with ``num_sms == get_num_sms()``.
    max_context_len : int
        Columns of the result (>= every context length you want to read).
    clean_logits : bool
        Write -inf at ``t >= context_lens[b, n]``; otherwise those entries are unspecified. DeepGEMM rejects True
        here; accepting it is a deliberate superset.
    logits_dtype : torch.dtype
        ``torch.float32`` or ``torch.bfloat16``.
    indices : None
        Varlen request ids (SM100) are not supported; must be None.

    Returns
    -------
    Tensor
        ``[B * next_n, max_context_len]`` view of a buffer with row stride
        ``align(align(max_context_len, 256), 1024 / elt)``:
        ``logits[b * next_n + n, t] = sum_h weights[., h] * relu(Q[b, n, h] . K_t)`` with ``K_t`` the dequantised
        token (FP8 value times its scale). FP32 accumulation; bitwise deterministic. H in {8, 16, 32, 64}, D in
        {32, 64, 128} (FP4: 64, 128), block_kv 32 or 64, next_n >= 1 (DeepGEMM's SM90 kernel: H 32 or 64, D 128,
        block_kv 64, next_n 1 or 2, FP8; ours on Hopper takes every combination listed).

    Example
    -------
    >>> meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, 64, deep_gemm.get_num_sms())
    >>> logits = deep_gemm.fp8_fp4_paged_mqa_logits((q_fp8, None), kv_cache, weights, context_lens, block_table,
    ...                                             meta, max_context_len)
    """
    q_data, q_sf = unpack_pair("q", q)
    return _ops.fp8_fp4_paged_mqa_logits.default(q_data, q_sf, kv_cache, weights, context_lens, block_table,
                                                 schedule_meta, int(max_context_len), bool(clean_logits),
                                                 logits_dtype, indices)


def fp8_paged_mqa_logits(q: torch.Tensor, kv_cache: torch.Tensor, weights: torch.Tensor, context_lens: torch.Tensor,
                         block_table: torch.Tensor, schedule_meta: torch.Tensor, max_context_len: int,
                         clean_logits: bool = False, indices: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Legacy form of :func:`fp8_fp4_paged_mqa_logits`: plain FP8 ``q [B, next_n, H, D]``, FP32 logits.

    >>> logits = deep_gemm.fp8_paged_mqa_logits(q_fp8, kv_cache, weights, context_lens, block_table, meta, 4096)
    """
    return _ops.fp8_paged_mqa_logits.default(q, kv_cache, weights, context_lens, block_table, schedule_meta,
                                             int(max_context_len), bool(clean_logits), indices)
