"""One check per MQA-logits op (DeepSeek V3.2 indexer), shared by the CPU (reference), CUDA and fake kernels.

Each check takes exactly the op's schema arguments, reads metadata only (dtype, shape, strides, device), and raises
``DeepGEMMError`` naming the argument before anything is allocated or written. Data-dependent contracts (ks <= ke,
block ids in range, context lengths within the block table) would need a device sync; they are documented on the
public functions instead and the references stay memory-safe when they are broken.

Accepted values are the union of DeepGEMM's SM90 and SM100 limits (head counts 8 and 16, block_kv 32, next_n > 2,
packed FP4 Q/KV, BF16 weights with BF16 logits; DeepGEMM's SM90 kernels cover H in {32, 64}, block_kv 64, next_n in
{1, 2}, FP8 only); our Triton kernels cover all of them. Older call forms are accepted where they are unambiguous:
1-D ``context_lens`` and ``[SK, 1]`` KV scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.data_checks import require_values
from ..core.errors import require, require_contiguous, require_dim, require_dtype, require_same_device
from ..core.runtime import INT32_MAX, get_num_sms

FP8 = torch.float8_e4m3fn
FP4_PACKED = torch.int8  # two E2M1 values per byte, the even element in the low nibble
# Query heads per token: one 128-row MMA tile holds 128 / H queries, so H must divide 128. SM90 builds 32 and 64;
# SM100 adds 8 and 16.
HEAD_COUNTS = (8, 16, 32, 64)
MMA_TILE_ROWS = 128
# Head dimensions with kernels upstream: FP8 32/64/128; packed FP4 needs whole 32-value scale groups and 16-byte
# rows of packed data, so 64/128.
HEAD_DIMS_FP8 = (32, 64, 128)
HEAD_DIMS_FP4 = (64, 128)
# FP4 operands carry one UE8M0 scale per 32 values along D (MXFP4), four exponent bytes packed per int32.
FP4_SF_GRANULARITY = 32
UE8M0_PER_INT32 = 4
LOGITS_DTYPES = (torch.float32, torch.bfloat16)
WEIGHT_DTYPES = (torch.float32, torch.bfloat16)
# Tokens per page of the paged KV cache: SM90 reads 64, SM100 32 or 64.
BLOCK_KV_CHOICES = (32, 64)
# Bytes of the per-token KV scale stored after each page's values (FP32, or packed UE8M0 int32 for FP4).
KV_SCALE_BYTES = 4


@dataclass(frozen=True)
class QueryShape:
    """Checked query operand: leading dims (S,) or (B, next_n), heads, logical head dim, FP4 or FP8."""

    lead: tuple[int, ...]
    num_heads: int
    head_dim: int
    is_fp4: bool


def _name(t: torch.dtype) -> str:
    return str(t).replace("torch.", "")


def _check_query(q: torch.Tensor, q_sf: torch.Tensor | None, lead_names: str) -> QueryShape:
    """Q [*lead, H, D] FP8 (no scale) or [*lead, H, D/2] packed FP4 with int32 UE8M0 scales [*lead, H]."""
    num_lead = len(lead_names.split(","))
    require_dim("q", q, num_lead + 2)
    require_dtype("q", q, (FP8, FP4_PACKED))
    is_fp4 = q.dtype == FP4_PACKED
    if is_fp4:
        require(q_sf is not None, "q_sf: packed FP4 queries (int8) need their UE8M0 scales "
                                  f"(int32 [{lead_names}, H], one byte per {FP4_SF_GRANULARITY} values); got None")
    else:
        require(q_sf is None, "q_sf: FP8 queries take no scale (fold it into weights); expected None, got a "
                              f"{_name(q_sf.dtype) if q_sf is not None else ''} tensor")
    require_contiguous("q", q)
    num_heads = q.size(-2)
    head_dim = q.size(-1) * (2 if is_fp4 else 1)
    require(num_heads in HEAD_COUNTS,
            f"q: expected a head count H in {HEAD_COUNTS} (128 / H queries per {MMA_TILE_ROWS}-row tile), "
            f"got H = {num_heads} (shape {tuple(q.shape)})")
    dims = HEAD_DIMS_FP4 if is_fp4 else HEAD_DIMS_FP8
    require(head_dim in dims,
            f"q: expected a head dim D in {dims} for {'packed FP4' if is_fp4 else 'FP8'} queries, got D = {head_dim} "
            f"(shape {tuple(q.shape)})")
    lead = tuple(q.shape[:num_lead])
    if is_fp4:
        require_dtype("q_sf", q_sf, (torch.int32,))
        require(tuple(q_sf.shape) == (*lead, num_heads),
                f"q_sf: expected shape {(*lead, num_heads)} ([{lead_names}, H], packed UE8M0), "
                f"got {tuple(q_sf.shape)}")
        require_contiguous("q_sf", q_sf)
    return QueryShape(lead, num_heads, head_dim, is_fp4)


def _check_weights(weights: torch.Tensor, rows: int, rows_text: str, num_heads: int,
                   logits_dtype: torch.dtype) -> None:
    require_dim("weights", weights, 2)
    require(tuple(weights.shape) == (rows, num_heads),
            f"weights: expected shape {(rows, num_heads)} ([{rows_text}, H]), got {tuple(weights.shape)}")
    require_dtype("weights", weights, WEIGHT_DTYPES)
    if weights.dtype == torch.bfloat16:
        require(logits_dtype == torch.bfloat16,
                f"weights: BF16 weights need BF16 logits (logits_dtype=torch.bfloat16), got {_name(logits_dtype)}")
    require(weights.numel() == 0 or weights.stride(1) == 1,
            f"weights: expected contiguous heads (stride(1) == 1), got strides {weights.stride()}")


def _check_logits_dtype(logits_dtype) -> None:
    require(logits_dtype in LOGITS_DTYPES,
            f"logits_dtype: expected torch.float32 or torch.bfloat16, got {logits_dtype}")


def _check_int_vector(name: str, t: torch.Tensor, length: int, what: str) -> None:
    require_dtype(name, t, (torch.int32,))
    require_dim(name, t, 1)
    require(t.size(0) == length, f"{name}: expected {length} entries ({what}), got {t.size(0)}")
    require_contiguous(name, t)


# ---- non-paged ---------------------------------------------------------------------------------------------------

def check_fp8_fp4_mqa_logits(q, q_sf, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                             max_seqlen_k, logits_dtype, schedule_meta=None) -> QueryShape:
    require_same_device(q=q, q_sf=q_sf, kv=kv, kv_sf=kv_sf, weights=weights,
                        cu_seq_len_k_start=cu_seq_len_k_start, cu_seq_len_k_end=cu_seq_len_k_end)
    _check_logits_dtype(logits_dtype)
    shape = _check_query(q, q_sf, "S")
    (seq_len,) = shape.lead
    require_dim("kv", kv, 2)
    require(kv.dtype == q.dtype, f"kv: expected dtype {_name(q.dtype)} (the dtype of q: FP8 with FP8, packed FP4 "
                                 f"with packed FP4), got {_name(kv.dtype)}")
    require(kv.size(1) == q.size(-1),
            f"kv: expected {q.size(-1)} columns (head dim D = {shape.head_dim} of q"
            f"{', packed two per byte' if shape.is_fp4 else ''}), got shape {tuple(kv.shape)}")
    require_contiguous("kv", kv)
    seq_len_kv = kv.size(0)
    require_dtype("kv_sf", kv_sf, (torch.int32,) if shape.is_fp4 else (torch.float32,))
    # [SK] as DeepGEMM documents it, or [SK, 1] (what per-row casts return with keepdim, and some clients pass).
    require(kv_sf.dim() == 1 or (kv_sf.dim() == 2 and kv_sf.size(1) == 1),
            f"kv_sf: expected shape ({seq_len_kv},) or ({seq_len_kv}, 1) (one scale per KV row), "
            f"got {tuple(kv_sf.shape)}")
    require(kv_sf.size(0) == seq_len_kv,
            f"kv_sf: expected shape ({seq_len_kv},) or ({seq_len_kv}, 1) (one scale per KV row), "
            f"got {tuple(kv_sf.shape)}")
    require_contiguous("kv_sf", kv_sf)
    _check_weights(weights, seq_len, "S", shape.num_heads, logits_dtype)
    _check_int_vector("cu_seq_len_k_start", cu_seq_len_k_start, seq_len, "one KV start per query")
    _check_int_vector("cu_seq_len_k_end", cu_seq_len_k_end, seq_len, "one KV end per query")
    require(0 <= max_seqlen_k <= INT32_MAX,
            f"max_seqlen_k: expected an integer in [0, {INT32_MAX}] (0 = uncompressed [S, SK] logits), "
            f"got {max_seqlen_k}")
    require(max_seqlen_k == 0 or not clean_logits,
            f"clean_logits: compressed logits (max_seqlen_k = {max_seqlen_k} > 0) cannot be cleaned; "
            "pass clean_logits=False")
    if schedule_meta is not None:
        _check_schedule_meta(schedule_meta, q, seq_len, shape.num_heads)
    return shape


def _check_schedule_meta(schedule_meta, q, seq_len: int, num_heads: int) -> None:
    """``get_mqa_logits_metadata``'s schedule for these queries: int32, 1-D, contiguous, on q's device, of the
    length it returns for (S, H) at the current ``get_num_sms()``. Our kernels schedule themselves and the
    reference needs no schedule, so only its form is checked."""
    from .metadata.plan import metadata_words, schedule_sms
    require_same_device(q=q, schedule_meta=schedule_meta)
    require_dtype("schedule_meta", schedule_meta, (torch.int32,))
    require_dim("schedule_meta", schedule_meta, 1)
    require_contiguous("schedule_meta", schedule_meta)
    words = metadata_words(seq_len, num_heads, schedule_sms())
    require(schedule_meta.size(0) == words,
            f"schedule_meta: expected shape ({words},) (get_mqa_logits_metadata for S = {seq_len} queries of "
            f"H = {num_heads} heads over {schedule_sms()} SMs), got {tuple(schedule_meta.shape)}")


def check_fp8_mqa_logits(q, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end, clean_logits,
                         max_seqlen_k) -> QueryShape:
    require_dtype("q", q, (FP8,))
    return check_fp8_fp4_mqa_logits(q, None, kv, kv_sf, weights, cu_seq_len_k_start, cu_seq_len_k_end,
                                    clean_logits, max_seqlen_k, torch.float32)


# ---- paged -------------------------------------------------------------------------------------------------------

def _check_no_indices(indices) -> None:
    require(indices is None, "indices: varlen scheduling (per-token request ids) is an SM100 feature without a "
                             "specified schedule; pass None and one block-table row per query row")


def _check_context_lens(context_lens: torch.Tensor, shape: tuple[int, int] | None = None) -> tuple[int, int]:
    """[B, next_n] (one length per query row), or the older 1-D form [B] (vLLM 0.11, the V3.2-era SGLang indexer):
    one length per sequence, its next_n rows causal (row n sees ``context_lens[b] - next_n + n + 1`` tokens, as
    DeepGEMM's 1-D path did). Returns (B, next_n), next_n = 1 for 1-D lengths without a query shape."""
    require_dtype("context_lens", context_lens, (torch.int32,))
    require_dim("context_lens", context_lens, (1, 2))
    require_contiguous("context_lens", context_lens)
    if context_lens.dim() == 1:
        batch = context_lens.size(0)
        if shape is not None:
            require(batch == shape[0],
                    f"context_lens: expected shape {shape} ([B, next_n], one length per query row) or ({shape[0]},) "
                    f"([B], one length per sequence), got {tuple(context_lens.shape)}")
            return shape
        return batch, 1
    if shape is not None:
        require(tuple(context_lens.shape) == shape,
                f"context_lens: expected shape {shape} ([B, next_n], one length per query row) or ({shape[0]},) "
                f"([B], one length per sequence), got {tuple(context_lens.shape)}")
    require(context_lens.size(1) >= 1,
            f"context_lens: expected next_n >= 1 columns, got shape {tuple(context_lens.shape)}")
    return context_lens.size(0), context_lens.size(1)


def _check_block_kv(block_kv: int, name: str, what: str = "") -> None:
    require(block_kv in BLOCK_KV_CHOICES,
            f"{name}: expected block_kv in {BLOCK_KV_CHOICES} (tokens per KV page){what}, got {block_kv}")


def check_get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms, indices) -> tuple[int, int]:
    require_same_device(context_lens=context_lens, indices=indices)
    batch, next_n = _check_context_lens(context_lens)
    _check_block_kv(block_kv, "block_kv")
    require(1 <= num_sms <= INT32_MAX, f"num_sms: expected an integer in [1, {INT32_MAX}], got {num_sms}")
    _check_no_indices(indices)
    return batch, next_n


def kv_cache_token_bytes(head_dim: int, is_fp4: bool) -> int:
    """Bytes per token of a fused KV-cache page: the values, then (in the page's tail) the 4-byte scale."""
    return (head_dim // 2 if is_fp4 else head_dim) + KV_SCALE_BYTES


def check_fp8_fp4_paged_mqa_logits(q, q_sf, kv_cache, weights, context_lens, block_table, schedule_meta,
                                   max_context_len, clean_logits, logits_dtype, indices) -> QueryShape:
    require_same_device(q=q, q_sf=q_sf, kv_cache=kv_cache, weights=weights, context_lens=context_lens,
                        block_table=block_table, schedule_meta=schedule_meta, indices=indices)
    _check_logits_dtype(logits_dtype)
    shape = _check_query(q, q_sf, "B, next_n")
    batch, next_n = shape.lead
    require(next_n >= 1, f"q: expected next_n >= 1 query rows per sequence, got shape {tuple(q.shape)}")

    token_bytes = kv_cache_token_bytes(shape.head_dim, shape.is_fp4)
    require_dtype("kv_cache", kv_cache, (torch.uint8,))
    require_dim("kv_cache", kv_cache, 4)
    num_blocks, block_kv, num_kv_heads, last = kv_cache.shape
    _check_block_kv(block_kv, "kv_cache", " in dim 1")
    require(num_kv_heads == 1, f"kv_cache: expected one KV head (dim 2 == 1), got shape {tuple(kv_cache.shape)}")
    require(last == token_bytes,
            f"kv_cache: expected {token_bytes} bytes per token in dim 3 (D{'/2' if shape.is_fp4 else ''} value bytes "
            f"+ {KV_SCALE_BYTES} scale bytes, D = {shape.head_dim}), got shape {tuple(kv_cache.shape)}")
    require(kv_cache.stride(1) == token_bytes and kv_cache.stride(3) == 1,
            f"kv_cache: expected stride(1) == {token_bytes} and stride(3) == 1 (dense tokens within a page), "
            f"got strides {kv_cache.stride()}")
    require(kv_cache.stride(0) % KV_SCALE_BYTES == 0 and kv_cache.storage_offset() % KV_SCALE_BYTES == 0,
            f"kv_cache: expected a page stride and start that are multiples of {KV_SCALE_BYTES} bytes (scales are "
            f"read as 4-byte words), got stride(0) = {kv_cache.stride(0)}, "
            f"storage offset {kv_cache.storage_offset()}")

    _check_weights(weights, batch * next_n, "B * next_n", shape.num_heads, logits_dtype)
    _check_context_lens(context_lens, (batch, next_n))
    require_dtype("block_table", block_table, (torch.int32,))
    require_dim("block_table", block_table, 2)
    require(block_table.size(0) == batch,
            f"block_table: expected {batch} rows (one per sequence, B of q), got shape {tuple(block_table.shape)}")
    require(block_table.size(1) <= 1 or block_table.stride(1) == 1,
            f"block_table: expected contiguous rows (stride(1) == 1), got strides {block_table.stride()}")

    require_dtype("schedule_meta", schedule_meta, (torch.int32,))
    require_dim("schedule_meta", schedule_meta, 2)
    require(schedule_meta.size(0) >= 2 and schedule_meta.size(1) == 2,
            f"schedule_meta: expected shape [num_sms + 1, 2] (get_paged_mqa_logits_metadata), "
            f"got {tuple(schedule_meta.shape)}")
    num_sms = get_num_sms()
    require(num_sms == 0 or schedule_meta.size(0) == num_sms + 1,
            f"schedule_meta: expected {num_sms + 1} rows (get_num_sms() = {num_sms}, plus one), "
            f"got {schedule_meta.size(0)}; build it with num_sms=get_num_sms()")
    require_contiguous("schedule_meta", schedule_meta)

    require(0 <= max_context_len <= INT32_MAX,
            f"max_context_len: expected an integer in [0, {INT32_MAX}], got {max_context_len}")
    _check_no_indices(indices)
    return shape


def check_fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                               clean_logits, indices) -> QueryShape:
    require_dtype("q", q, (FP8,))
    return check_fp8_fp4_paged_mqa_logits(q, None, kv_cache, weights, context_lens, block_table, schedule_meta,
                                          max_context_len, clean_logits, torch.float32, indices)


# ---- Data checks: values of the index tensors (CPU kernels always; CUDA in the checked mode) ---------------------
#
# Each takes the op's arguments by schema name (``core.registry.set_data_check``) and raises DeepGEMMError naming the
# argument, the first bad index and its value, before any logits are written.

def _at(t: torch.Tensor, i: int) -> int:
    return int(t.reshape(-1)[i])


def check_data_mqa_logits(*, kv, cu_seq_len_k_start, cu_seq_len_k_end, **_) -> None:
    """Windows inside the KV rows: 0 <= ks[i] <= ke[i] <= SK (with compressed logits, max_seqlen_k > 0, a longer
    window keeps its first max_seqlen_k keys: the output's columns)."""
    ks, ke, seq_len_kv = cu_seq_len_k_start, cu_seq_len_k_end, kv.size(0)
    starts, ends = ks.long(), ke.long()
    conditions = [
        (starts < 0, lambda i: f"cu_seq_len_k_start: expected window starts >= 0, got cu_seq_len_k_start[{i}] = "
                               f"{_at(ks, i)}"),
        (ends > seq_len_kv, lambda i: f"cu_seq_len_k_end: expected window ends at most SK = {seq_len_kv} (rows of "
                                      f"kv), got cu_seq_len_k_end[{i}] = {_at(ke, i)}"),
        (starts > ends, lambda i: f"cu_seq_len_k_start: expected window starts at most their ends, got "
                                  f"cu_seq_len_k_start[{i}] = {_at(ks, i)} > cu_seq_len_k_end[{i}] = {_at(ke, i)}"),
    ]
    require_values(conditions)


def check_data_paged_mqa_logits(*, q, kv_cache, context_lens, block_table, max_context_len, **_) -> None:
    """context_lens in [0, max_context_len], each sequence's pages within the block table's columns, and every
    block-table entry a sequence uses (its first ceil(context_len / block_kv) columns) a page of kv_cache."""
    num_blocks, block_kv = kv_cache.size(0), kv_cache.size(1)
    batch, columns = block_table.shape
    lens = context_lens.long()
    # tokens each sequence sees: its last query row's length (1-D: context_lens[b]; 2-D: the row maximum)
    seq_lens = (lens if lens.dim() == 1 else lens.amax(dim=1) if lens.size(1) else lens.sum(dim=1)).clamp(min=0)
    pages = (seq_lens + block_kv - 1) // block_kv
    used = torch.arange(columns, device=block_table.device)[None, :] < pages[:, None]
    table = block_table.long()
    shape = tuple(context_lens.shape)

    def where(i: int) -> str:
        return "[" + (str(i) if len(shape) == 1 else f"{i // shape[1]}, {i % shape[1]}") + "]"

    require_values([
        (lens < 0, lambda i: f"context_lens: expected non-negative lengths, got context_lens{where(i)} = "
                             f"{_at(context_lens, i)}"),
        (lens > max_context_len,
         lambda i: f"context_lens: expected lengths at most max_context_len = {max_context_len}, got "
                   f"context_lens{where(i)} = {_at(context_lens, i)}"),
        (pages > columns,
         lambda i: f"context_lens: sequence {i} sees {int(seq_lens[i])} tokens, {int(pages[i])} pages of "
                   f"{block_kv}, but block_table has {columns} columns"),
        (used & ((table < 0) | (table >= num_blocks)),
         lambda i: f"block_table: expected page ids in [0, {num_blocks}) (the pages of kv_cache) in the columns a "
                   f"sequence uses, got block_table[{i // columns}, {i % columns}] = {int(table.reshape(-1)[i])}"),
    ])
