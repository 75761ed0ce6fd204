"""MQA-logits ops (DeepSeek V3.2 indexer) on CPU: references against independent float64 loops, the paged schedule
against a plain Python walk, output layouts, determinism, opcheck, fake tensors and bad inputs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core import runtime
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import assert_bitwise_equal, calc_diff
from deep_gemm.utils import align, ceil_div, per_token_cast_to_fp4

from tolerances import TOLERANCES

ops = torch.ops.deep_gemm
FP8 = torch.float8_e4m3fn
NEG_INF = float("-inf")
FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
# UE8M0 exponent bytes the tests draw scales from (2^-5 .. 2^5 around the bias 127).
UE8M0_LOW, UE8M0_HIGH = 122, 133


# ---- independent decoding (float64, no deep_gemm code) ------------------------------------------------------------

def _e2m1(code: int) -> float:
    """E2M1 value of a 4-bit code from its fields: sign, 2-bit exponent (bias 1), 1-bit mantissa."""
    sign = -1.0 if code & 8 else 1.0
    exponent, mantissa = (code >> 1) & 3, code & 1
    magnitude = mantissa * 0.5 if exponent == 0 else 2.0 ** (exponent - 1) * (1.0 + 0.5 * mantissa)
    return sign * magnitude


E2M1_TABLE = torch.tensor([_e2m1(c) for c in range(16)], dtype=torch.float64)


def decode_fp4(packed: torch.Tensor, sf_int32: torch.Tensor) -> torch.Tensor:
    """int8 [..., D/2] and int32 [...] (UE8M0 bytes, one per 32 values) -> float64 [..., D]."""
    byte = packed.to(torch.int32) % 256
    values = torch.stack((E2M1_TABLE[byte % 16], E2M1_TABLE[byte // 16]), dim=-1).flatten(-2)
    exponents = [(sf_int32.to(torch.int64) >> (8 * i)) % 256 for i in range(4)]
    out = values.clone()
    for g in range(values.size(-1) // 32):
        out[..., g * 32:(g + 1) * 32] *= torch.pow(2.0, (exponents[g] - 127).double()).unsqueeze(-1)
    return out


def random_fp4(*lead: int, head_dim: int):
    """Random packed FP4 data [*lead, D/2] and int32 UE8M0 scales [*lead]; unused scale bytes hold junk (255)."""
    packed = torch.randint(-128, 128, (*lead, head_dim // 2), dtype=torch.int8)
    scale_bytes = torch.full((*lead, 4), 255, dtype=torch.uint8)
    scale_bytes[..., :head_dim // 32] = torch.randint(UE8M0_LOW, UE8M0_HIGH, (*lead, head_dim // 32),
                                                      dtype=torch.uint8)
    return packed, scale_bytes.view(torch.int32).squeeze(-1)


def assert_logits_close(actual: torch.Tensor, expected: torch.Tensor, valid: torch.Tensor, check_mask: bool,
                        tolerance: float | None = None):
    """Valid entries within the tolerance of the output dtype (or ``tolerance``); -inf exactly at invalid entries
    when check_mask."""
    if check_mask:
        assert torch.equal(actual == NEG_INF, ~valid), "-inf mask differs from the valid range"
    got, want = actual.double()[valid], expected[valid]
    assert torch.isfinite(got).all()
    key = "reference_fp32_out" if actual.dtype == torch.float32 else "reference_bf16_out"
    assert calc_diff(got, want) < (tolerance if tolerance is not None else TOLERANCES[key])


# ---- non-paged ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MqaCase:
    s: int
    sk: int
    h: int
    d: int
    fp4: bool = False
    logits: torch.dtype = torch.float32
    bf16_weights: bool = False

    def __str__(self) -> str:
        kind = "fp4" if self.fp4 else "fp8"
        out = "bf16" if self.logits == torch.bfloat16 else "fp32"
        return f"{kind}-s{self.s}-sk{self.sk}-h{self.h}-d{self.d}-{out}{'-bf16w' if self.bf16_weights else ''}"


MQA_CASES = [
    MqaCase(7, 50, 32, 32), MqaCase(16, 129, 64, 128), MqaCase(1, 300, 32, 64), MqaCase(33, 77, 64, 64),
    MqaCase(0, 40, 32, 128), MqaCase(5, 0, 32, 64), MqaCase(9, 100, 8, 64), MqaCase(10, 64, 16, 32),
    MqaCase(12, 90, 32, 128, logits=torch.bfloat16), MqaCase(6, 70, 64, 64, logits=torch.bfloat16, bf16_weights=True),
    MqaCase(11, 96, 32, 64, fp4=True), MqaCase(8, 130, 64, 128, fp4=True, logits=torch.bfloat16),
]


def make_mqa(case: MqaCase):
    """Inputs in the op's flat form plus float64 (q, kv, kv_scale) for the oracle."""
    if case.fp4:
        q, q_sf = random_fp4(case.s, case.h, head_dim=case.d)
        kv, kv_sf = random_fp4(case.sk, head_dim=case.d)
        q64, kv64, kv_scale = decode_fp4(q, q_sf), decode_fp4(kv, kv_sf), torch.ones(case.sk, dtype=torch.float64)
    else:
        q, q_sf = torch.randn(case.s, case.h, case.d).to(FP8), None
        kv, kv_sf = torch.randn(case.sk, case.d).to(FP8), torch.rand(case.sk) + 0.25
        q64, kv64, kv_scale = q.double(), kv.double(), kv_sf.double()
    weights = torch.randn(case.s, case.h).to(torch.bfloat16 if case.bf16_weights else torch.float32)
    # Ranges include empty ones and ones reaching SK (0 <= ks <= ke <= SK: the data contract, checked on the CPU;
    # windows outside it raise, see test_mqa_logits_bad_windows_raise).
    ks = torch.randint(-3, max(case.sk, 1), (case.s,), dtype=torch.int32)
    ke = (ks + torch.randint(-2, case.sk + 5, (case.s,), dtype=torch.int32)).to(torch.int32)
    ks = ks.clamp(min=0)
    ke = torch.maximum(ke.clamp(max=case.sk), ks).to(torch.int32)
    return (q, q_sf, kv, kv_sf, weights, ks, ke), (q64, kv64, kv_scale)


def oracle_mqa(q64, kv64, kv_scale, weights, ks, ke) -> torch.Tensor:
    """float64 logits [S, SK] (-inf outside each row's range), one query row at a time over its explicit range."""
    s, sk = q64.size(0), kv64.size(0)
    out = torch.full((s, sk), NEG_INF, dtype=torch.float64)
    w = weights.double()
    for i in range(s):
        lo, hi = max(int(ks[i]), 0), min(int(ke[i]), sk)
        if lo >= hi:
            continue
        scores = (q64[i] @ kv64[lo:hi].T).clamp(min=0)  # [H, n]
        out[i, lo:hi] = (w[i] @ scores) * kv_scale[lo:hi]
    return out


def call_mqa(args, clean_logits, max_seqlen_k, logits_dtype, via_ops=False):
    q, q_sf, kv, kv_sf, weights, ks, ke = args
    if via_ops:
        return ops.fp8_fp4_mqa_logits(q, q_sf, kv, kv_sf, weights, ks, ke, clean_logits, max_seqlen_k, logits_dtype)
    return deep_gemm.fp8_fp4_mqa_logits((q, q_sf), (kv, kv_sf), weights, ks, ke, clean_logits=clean_logits,
                                        max_seqlen_k=max_seqlen_k, logits_dtype=logits_dtype)


@pytest.mark.parametrize("via_ops", [False, True], ids=["api", "ops"])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "noclean"])
@pytest.mark.parametrize("case", MQA_CASES, ids=str)
def test_mqa_logits_matches_oracle(case, clean, via_ops):
    args, (q64, kv64, kv_scale) = make_mqa(case)
    out = call_mqa(args, clean, 0, case.logits, via_ops)
    expected = oracle_mqa(q64, kv64, kv_scale, args[4], args[5], args[6])
    assert out.shape == (case.s, case.sk) and out.dtype == case.logits
    assert_logits_close(out, expected, expected != NEG_INF, check_mask=clean)


@pytest.mark.parametrize("case", [c for c in MQA_CASES if c.s > 0 and c.sk > 0], ids=str)
def test_mqa_logits_compressed_matches_oracle(case):
    args, (q64, kv64, kv_scale) = make_mqa(case)
    ks, ke = args[5], args[6]
    full = oracle_mqa(q64, kv64, kv_scale, args[4], ks, ke)
    max_seqlen_k = case.sk // 2 + 3  # shorter than some ranges: those are cut at max_seqlen_k columns
    out = call_mqa(args, False, max_seqlen_k, case.logits)
    assert out.shape == (case.s, max_seqlen_k)
    expected = torch.full((case.s, max_seqlen_k), NEG_INF, dtype=torch.float64)
    for i in range(case.s):
        for t in range(max_seqlen_k):
            j = int(ks[i]) + t
            if 0 <= j < case.sk and j < int(ke[i]):
                expected[i, t] = full[i, j]
    assert_logits_close(out, expected, expected != NEG_INF, check_mask=False)


def test_legacy_fp8_mqa_logits_equals_new_name():
    args, _ = make_mqa(MqaCase(9, 70, 64, 64))
    q, _, kv, kv_sf, weights, ks, ke = args
    for clean, max_k in ((True, 0), (False, 0), (False, 33)):
        legacy = deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), weights, ks, ke, clean_logits=clean, max_seqlen_k=max_k)
        assert_bitwise_equal(legacy, call_mqa(args, clean, max_k, torch.float32), "legacy vs fp8_fp4")
        assert_bitwise_equal(legacy, ops.fp8_mqa_logits(q, kv, kv_sf, weights, ks, ke, clean, max_k), "ops")


def test_mqa_logits_accepts_deepgemm_fp4_casts():
    """Operands produced by deep_gemm.utils.per_token_cast_to_fp4 (gran 32, packed UE8M0) go in as they come out."""
    s, sk, h, d = 6, 45, 32, 128
    q_packed, q_sf = per_token_cast_to_fp4(torch.randn(s * h, d), use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
    kv, kv_sf = per_token_cast_to_fp4(torch.randn(sk, d), use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
    q, q_sf, kv_sf = q_packed.view(s, h, d // 2), q_sf.view(s, h), kv_sf.view(sk)
    weights = torch.randn(s, h)
    ks = torch.zeros(s, dtype=torch.int32)
    ke = torch.full((s,), sk, dtype=torch.int32)
    out = deep_gemm.fp8_fp4_mqa_logits((q, q_sf), (kv, kv_sf), weights, ks, ke)
    expected = oracle_mqa(decode_fp4(q, q_sf), decode_fp4(kv, kv_sf), torch.ones(sk, dtype=torch.float64),
                          weights, ks, ke)
    assert_logits_close(out, expected, expected != NEG_INF, check_mask=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("s,sk,h,max_k", [(7, 50, 32, 0), (7, 50, 64, 0), (5, 300, 8, 0), (0, 3, 16, 0),
                                          (7, 50, 32, 1), (9, 600, 64, 257), (3, 0, 32, 10)])
def test_mqa_logits_layout(s, sk, h, max_k, dtype):
    """[S, cols] view of a [align(S, 128/H), 1 KiB-aligned stride] buffer, exactly DeepGEMM's allocation."""
    case = MqaCase(s, sk, h, 64)
    args, _ = make_mqa(case)
    out = call_mqa(args, max_k == 0, max_k, dtype)
    elems_per_kib = 1024 // out.element_size()
    stride = align(sk + 256, elems_per_kib) if max_k == 0 else align(align(max_k, 256), elems_per_kib)
    assert out.shape == (s, max_k or sk) and out.stride() == (stride, 1) and out.dtype == dtype
    assert out.untyped_storage().nbytes() == align(s, 128 // h) * stride * out.element_size()
    assert out.storage_offset() == 0
    for t in args:
        if t is not None and out.numel() and t.numel():
            assert out.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


def test_mqa_logits_bitwise_deterministic():
    args, _ = make_mqa(MqaCase(20, 200, 64, 128))
    first = call_mqa(args, True, 0, torch.float32)
    for _ in range(3):
        assert_bitwise_equal(first, call_mqa(args, True, 0, torch.float32), "repeat")
    assert_bitwise_equal(call_mqa(args, False, 99, torch.bfloat16), call_mqa(args, False, 99, torch.bfloat16))


# ---- paged schedule ----------------------------------------------------------------------------------------------

def oracle_schedule(context_lens: torch.Tensor, num_sms: int) -> list[tuple[int, int]]:
    """Walk the work list in Python: per-SM item counts, then the (atom, split) where each SM's first item lies."""
    batch, next_n = context_lens.shape
    atoms = 1 if next_n == 1 else (next_n + 1) // 2
    splits = [ceil_div(max(int(c), 0), 256) for c in context_lens[:, -1]]
    total = sum(splits) * atoms
    per_sm, extra = divmod(total, num_sms)
    counts = [per_sm] * (num_sms - extra) + [per_sm + 1] * extra
    rows, start = [], 0
    for count in counts:
        row = (0, 0) if batch == 0 else ((batch - 1) * atoms, 0)  # no item left: the last sequence
        seen = 0
        for b in range(batch):
            items = splits[b] * atoms
            if start < seen + items:
                atom, split = divmod(start - seen, splits[b])
                row = (b * atoms + atom, split)
                break
            seen += items
        rows.append(row)
        start += count
    rows.append((batch * atoms, 0))
    return rows


SCHEDULE_CASES = [
    # (context lengths of the last row per sequence, next_n, num_sms)
    ([300, 5, 1000], 2, 5), ([256, 257, 0, 4096], 1, 7), ([0, 0], 1, 4), ([1], 2, 1), ([70000], 1, 132),
    ([513, 100, 2000, 31, 256, 9000], 2, 16), ([5000, 3000], 4, 9), ([777, 0, 12], 3, 3), ([], 1, 4),
]


@pytest.mark.parametrize("lens,next_n,num_sms", SCHEDULE_CASES, ids=[f"case{i}" for i in range(len(SCHEDULE_CASES))])
def test_paged_metadata_matches_python_walk(lens, next_n, num_sms):
    last = torch.tensor(lens, dtype=torch.int32).view(-1, 1)  # the schedule reads only the last column
    context_lens = torch.cat([last * k // next_n + 1 for k in range(1, next_n)] + [last], dim=1).contiguous()
    for meta in (deep_gemm.get_paged_mqa_logits_metadata(context_lens, 64, num_sms),
                 ops.get_paged_mqa_logits_metadata(context_lens, 32, num_sms)):
        assert meta.dtype == torch.int32 and meta.shape == (num_sms + 1, 2) and meta.is_contiguous()
        assert [tuple(r) for r in meta.tolist()] == oracle_schedule(context_lens, num_sms)


def test_paged_metadata_balances_work():
    """Consecutive start points differ by qq or qq + 1 items, the larger shares on the last SMs."""
    lens = torch.randint(0, 5000, (37,), dtype=torch.int32)
    context_lens = torch.stack([lens // 2, lens], dim=1).contiguous()
    num_sms = 24
    meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, 64, num_sms).tolist()
    splits = [ceil_div(int(c), 256) for c in lens]
    offsets = [0]
    for s in splits:
        offsets.append(offsets[-1] + s)
    item = [offsets[a] + split for a, split in meta]
    shares = [b - a for a, b in zip(item, item[1:])]
    per_sm, extra = divmod(offsets[-1], num_sms)
    assert shares == [per_sm] * (num_sms - extra) + [per_sm + 1] * extra


# ---- paged logits ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PagedCase:
    b: int
    next_n: int
    h: int
    d: int
    block_kv: int = 64
    fp4: bool = False
    logits: torch.dtype = torch.float32
    page_pad: int = 0  # extra bytes between pages (stride(0) larger than a page)

    def __str__(self) -> str:
        kind = "fp4" if self.fp4 else "fp8"
        out = "bf16" if self.logits == torch.bfloat16 else "fp32"
        return (f"{kind}-b{self.b}-n{self.next_n}-h{self.h}-d{self.d}-bkv{self.block_kv}-{out}"
                f"{f'-pad{self.page_pad}' if self.page_pad else ''}")


PAGED_CASES = [
    PagedCase(3, 1, 32, 128), PagedCase(4, 2, 64, 64), PagedCase(2, 2, 32, 32, block_kv=32),
    PagedCase(1, 1, 64, 128, page_pad=64), PagedCase(4, 3, 16, 64, block_kv=32), PagedCase(2, 1, 8, 32),
    PagedCase(3, 2, 32, 64, logits=torch.bfloat16), PagedCase(2, 2, 32, 128, fp4=True),
    PagedCase(3, 1, 64, 64, block_kv=32, fp4=True, page_pad=16), PagedCase(0, 1, 32, 64),
]


def make_paged(case: PagedCase, max_context_len: int = 300):
    """Random context lengths, a shuffled page pool (spare pages and slot tails are NaN/junk bytes) and the
    float64 keys of every sequence for the oracle."""
    bkv, d = case.block_kv, case.d
    value_bytes = d // 2 if case.fp4 else d
    token_bytes = value_bytes + 4
    last = torch.randint(0, max_context_len - 20, (case.b,), dtype=torch.int32)
    if case.b:
        last[0] = bkv * 2  # a context that fills whole pages
    cols = [torch.randint(0, max_context_len, (case.b,), dtype=torch.int32) for _ in range(case.next_n - 1)]
    context_lens = torch.stack([torch.minimum(c, last) for c in cols] + [last], dim=1).contiguous()
    pages_per_seq = [ceil_div(int(n), bkv) for n in last]
    num_pages = sum(pages_per_seq) + 2
    max_blocks = max(pages_per_seq + [0]) + 1
    storage = torch.full((num_pages, bkv * token_bytes + case.page_pad), 0xFF, dtype=torch.uint8)
    block_table = torch.full((case.b, max_blocks), 12345, dtype=torch.int32)  # unused entries: out of range
    order = torch.randperm(num_pages).tolist()
    keys = []
    for b in range(case.b):
        n_tokens = int(last[b])
        if case.fp4:
            data, sf = random_fp4(n_tokens, head_dim=d)
            keys.append(decode_fp4(data, sf))
            data_bytes, sf_bytes = data.view(torch.uint8), sf.view(torch.uint8).view(n_tokens, 4)
        else:
            values, scales = torch.randn(n_tokens, d).to(FP8), torch.rand(n_tokens) + 0.25
            keys.append(values.double() * scales.double()[:, None])
            data_bytes, sf_bytes = values.view(torch.uint8), scales.view(torch.uint8).view(n_tokens, 4)
        for p in range(pages_per_seq[b]):
            page = order.pop()
            block_table[b, p] = page
            tokens = slice(p * bkv, min((p + 1) * bkv, n_tokens))
            count = tokens.stop - tokens.start
            storage[page, :count * value_bytes] = data_bytes[tokens].reshape(-1)
            storage[page, bkv * value_bytes:bkv * value_bytes + count * 4] = sf_bytes[tokens].reshape(-1)
    kv_cache = storage[:, :bkv * token_bytes].view(num_pages, bkv, 1, token_bytes)
    if case.fp4:
        q, q_sf = random_fp4(case.b, case.next_n, case.h, head_dim=d)
        q64 = decode_fp4(q, q_sf)
    else:
        q, q_sf = torch.randn(case.b, case.next_n, case.h, d).to(FP8), None
        q64 = q.double()
    weights = torch.randn(case.b * case.next_n, case.h)
    meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, bkv, 8)
    return (q, q_sf, kv_cache, weights, context_lens, block_table, meta, max_context_len), (q64, keys)


def test_pack_paged_kv_cache_round_trips_through_the_byte_views():
    """The demo's and client tests' cache packer writes what the reference reads: tokens in page order, values then
    scales per page, zeroed tails and spare pages, the block table naming consecutive pages."""
    from deep_gemm.attention.reference import decode_kv_tokens, pack_paged_kv_cache, paged_kv_bytes
    lens, block_kv, d = (70, 5, 0, 64), 32, 16
    values = [torch.randn(n, d).to(FP8) for n in lens]
    scales = [torch.rand(n) + 0.25 for n in lens]
    kv_cache, table = pack_paged_kv_cache(values, scales, block_kv, spare_pages=2)
    assert kv_cache.shape == (3 + 1 + 0 + 2 + 2, block_kv, 1, d + 4) and kv_cache.dtype == torch.uint8
    assert table.tolist() == [[0, 1, 2], [3, 0, 0], [0, 0, 0], [4, 5, 0]]
    page_values, page_scales = paged_kv_bytes(kv_cache, d, False)
    for b, n in enumerate(lens):
        tokens = torch.arange(n)
        pages = table[b][tokens // block_kv].long()
        got = decode_kv_tokens(page_values[pages, tokens % block_kv], page_scales[pages, tokens % block_kv], False)
        assert torch.equal(got, values[b].float() * scales[b][:, None])
    assert not kv_cache[6:].any()  # spare pages stay zero


def oracle_paged(q64, keys, weights, context_lens, max_context_len) -> torch.Tensor:
    batch, next_n = context_lens.shape
    out = torch.full((batch * next_n, max_context_len), NEG_INF, dtype=torch.float64)
    w = weights.double()
    for b in range(batch):
        for n in range(next_n):
            r, length = b * next_n + n, min(int(context_lens[b, n]), max_context_len)
            if length > 0:
                out[r, :length] = w[r] @ (q64[b, n] @ keys[b][:length].T).clamp(min=0)
    return out


@pytest.fixture
def num_sms_8():
    """Pretend the device has 8 SMs (schedule_meta must have get_num_sms() + 1 rows); restored afterwards."""
    previous = runtime.get_num_sms()
    runtime.set_num_sms(8)
    yield 8
    runtime.set_num_sms(previous)


def call_paged(args, clean_logits, logits_dtype, via_ops=False):
    q, q_sf, kv_cache, weights, context_lens, block_table, meta, max_context_len = args
    if via_ops:
        return ops.fp8_fp4_paged_mqa_logits(q, q_sf, kv_cache, weights, context_lens, block_table, meta,
                                            max_context_len, clean_logits, logits_dtype, None)
    return deep_gemm.fp8_fp4_paged_mqa_logits((q, q_sf), kv_cache, weights, context_lens, block_table, meta,
                                              max_context_len, clean_logits=clean_logits, logits_dtype=logits_dtype)


@pytest.mark.parametrize("via_ops", [False, True], ids=["api", "ops"])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "noclean"])
@pytest.mark.parametrize("case", PAGED_CASES, ids=str)
def test_paged_mqa_logits_matches_oracle(case, clean, via_ops, num_sms_8):
    args, (q64, keys) = make_paged(case)
    out = call_paged(args, clean, case.logits, via_ops)
    expected = oracle_paged(q64, keys, args[3], args[4], args[7])
    assert out.shape == (case.b * case.next_n, args[7]) and out.dtype == case.logits
    assert_logits_close(out, expected, expected != NEG_INF, check_mask=clean)


def test_paged_context_beyond_block_table_raises(num_sms_8):
    """Tokens past max_blocks * block_kv have no page, context lengths past max_context_len no column: both raise
    (they used to be masked / truncated silently), naming the first bad sequence, before anything is written."""
    args, _ = make_paged(PagedCase(2, 1, 32, 64))
    q, _, kv_cache, weights, context_lens, block_table, meta, _ = args
    narrow = block_table[:, :1]  # one page (64 tokens) per sequence
    lens = torch.full_like(context_lens, 500)
    with pytest.raises(DeepGEMMError, match=r"context_lens: expected lengths at most max_context_len = 200, got "
                                            r"context_lens\[0, 0\] = 500"):
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, lens, narrow, meta, 200, clean_logits=True)
    with pytest.raises(DeepGEMMError, match=r"context_lens: sequence 0 sees 500 tokens, 8 pages of 64, but "
                                            r"block_table has 1 columns"):
        deep_gemm.fp8_fp4_paged_mqa_logits((q, None), kv_cache, weights, lens, narrow, meta, 500, clean_logits=True)


def test_legacy_fp8_paged_mqa_logits_equals_new_name(num_sms_8):
    args, _ = make_paged(PagedCase(3, 2, 64, 128))
    q, _, kv_cache, weights, context_lens, block_table, meta, max_len = args
    legacy = deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, meta, max_len)
    assert_bitwise_equal(legacy, call_paged(args, False, torch.float32), "legacy vs fp8_fp4")
    assert_bitwise_equal(legacy, ops.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, meta,
                                                          max_len, False, None), "ops")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("max_len", [0, 1, 255, 300, 1025])
def test_paged_mqa_logits_layout(max_len, dtype, num_sms_8):
    args, _ = make_paged(PagedCase(2, 2, 32, 64), max_context_len=300)
    lens = args[4].clamp(max=max_len)  # (context lengths past max_context_len raise)
    out = call_paged(args[:4] + (lens,) + args[5:-1] + (max_len,), False, dtype)
    stride = align(align(max_len, 256), 1024 // out.element_size())
    assert out.shape == (4, max_len) and out.dtype == dtype
    if max_len:
        assert out.stride() == (stride, 1)
        assert out.untyped_storage().nbytes() == 4 * stride * out.element_size()


def test_paged_mqa_logits_bitwise_deterministic(num_sms_8):
    args, _ = make_paged(PagedCase(4, 2, 64, 128))
    first = call_paged(args, False, torch.float32)
    for _ in range(3):
        assert_bitwise_equal(first, call_paged(args, False, torch.float32), "repeat")


# ---- opcheck, fake tensors ---------------------------------------------------------------------------------------

def _mqa_flat(case: MqaCase, clean=True, max_k=0, dtype=torch.float32):
    args, _ = make_mqa(case)
    return args + (clean, max_k, dtype)


@pytest.mark.parametrize("clean,max_k", [(True, 0), (False, 40)])
def test_opcheck_mqa_logits(clean, max_k):
    torch.library.opcheck(ops.fp8_fp4_mqa_logits.default, _mqa_flat(MqaCase(6, 50, 32, 64), clean, max_k),
                          test_utils=FP8_OPCHECK_UTILS)
    # Packed FP4 has no fp8 tensors: the full default set (test_schema included) runs.
    torch.library.opcheck(ops.fp8_fp4_mqa_logits.default,
                          _mqa_flat(MqaCase(6, 50, 32, 64, fp4=True), clean, max_k, torch.bfloat16))
    q, _, kv, kv_sf, w, ks, ke = make_mqa(MqaCase(5, 33, 64, 32))[0]
    torch.library.opcheck(ops.fp8_mqa_logits.default, (q, kv, kv_sf, w, ks, ke, clean, max_k),
                          test_utils=FP8_OPCHECK_UTILS)


def test_opcheck_paged_ops(num_sms_8):
    args, _ = make_paged(PagedCase(2, 2, 32, 64))
    q, _, kv_cache, weights, context_lens, block_table, meta, max_len = args
    torch.library.opcheck(ops.get_paged_mqa_logits_metadata.default, (context_lens, 64, 8, None))
    torch.library.opcheck(ops.fp8_fp4_paged_mqa_logits.default,
                          (q, None, kv_cache, weights, context_lens, block_table, meta, max_len, False,
                           torch.float32, None), test_utils=FP8_OPCHECK_UTILS)
    torch.library.opcheck(ops.fp8_paged_mqa_logits.default,
                          (q, kv_cache, weights, context_lens, block_table, meta, max_len, True, None),
                          test_utils=FP8_OPCHECK_UTILS)
    fp4_args, _ = make_paged(PagedCase(2, 1, 32, 64, fp4=True))
    torch.library.opcheck(ops.fp8_fp4_paged_mqa_logits.default,
                          fp4_args + (True, torch.bfloat16, None))


def _fake_matches_real(op, args):
    real = op(*args)
    with FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        fake = op(*fake_args)
    assert (fake.shape, fake.stride(), fake.dtype, fake.storage_offset()) == \
        (real.shape, real.stride(), real.dtype, real.storage_offset())
    assert fake.untyped_storage().nbytes() == real.untyped_storage().nbytes()


@pytest.mark.parametrize("clean,max_k,dtype", [(True, 0, torch.float32), (False, 0, torch.bfloat16),
                                               (False, 77, torch.float32)])
def test_fake_tensor_mqa_logits(clean, max_k, dtype):
    _fake_matches_real(ops.fp8_fp4_mqa_logits.default, _mqa_flat(MqaCase(13, 90, 16, 64), clean, max_k, dtype))
    q, _, kv, kv_sf, w, ks, ke = make_mqa(MqaCase(3, 20, 64, 32))[0]
    _fake_matches_real(ops.fp8_mqa_logits.default, (q, kv, kv_sf, w, ks, ke, clean, max_k))


def test_fake_tensor_paged_ops(num_sms_8):
    args, _ = make_paged(PagedCase(3, 2, 32, 64))
    q, _, kv_cache, weights, context_lens, block_table, meta, max_len = args
    _fake_matches_real(ops.get_paged_mqa_logits_metadata.default, (context_lens, 64, 8, None))
    _fake_matches_real(ops.fp8_fp4_paged_mqa_logits.default,
                       (q, None, kv_cache, weights, context_lens, block_table, meta, max_len, False,
                        torch.bfloat16, None))
    _fake_matches_real(ops.fp8_paged_mqa_logits.default,
                       (q, kv_cache, weights, context_lens, block_table, meta, 1000, False, None))


def test_compile_fullgraph_mqa_logits():
    args, _ = make_mqa(MqaCase(6, 50, 32, 64))

    def fn(*a):
        return deep_gemm.fp8_fp4_mqa_logits((a[0], None), (a[2], a[3]), a[4], a[5], a[6]) * 2

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    assert_bitwise_equal(compiled(*args), fn(*args), "compiled")


# ---- bad inputs --------------------------------------------------------------------------------------------------

def _replace(args: tuple, index: int, value) -> tuple:
    return args[:index] + (value,) + args[index + 1:]


def assert_rejected(op, args: tuple, index: int, value, message: str) -> None:
    """op with args[index] replaced by value raises DeepGEMMError matching message and leaves every input as it was."""
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(DeepGEMMError, match=message):
        op(*_replace(args, index, value))
    for a, b in zip(args, before):
        if isinstance(a, torch.Tensor):
            assert_bitwise_equal(a, b, "input changed")


MQA_BAD = [
    # (argument index, replacement builder, message regex)
    (0, lambda a: a[0].float(), r"q: expected dtype float8_e4m3fn or int8, got float32"),
    (0, lambda a: a[0][:, :, :16].contiguous(), r"q: expected a head dim D in \(32, 64, 128\).*got D = 16"),
    (0, lambda a: torch.randn(6, 48, 64).to(FP8), r"q: expected a head count H in \(8, 16, 32, 64\).*H = 48"),
    (0, lambda a: a[0].transpose(0, 1).contiguous().transpose(0, 1), r"q: expected a contiguous tensor"),
    (0, lambda a: a[0][0], r"q: expected a 3-D tensor"),
    (1, lambda a: torch.zeros(6, 32, dtype=torch.int32), r"q_sf: FP8 queries take no scale"),
    (2, lambda a: a[2][:, :32].contiguous(), r"kv: expected 64 columns"),
    (2, lambda a: torch.zeros(50, 32, dtype=torch.int8), r"kv: expected dtype float8_e4m3fn"),
    (3, lambda a: a[3][:10], r"kv_sf: expected shape \(50,\) or \(50, 1\)"),
    (3, lambda a: a[3][:, None].expand(-1, 2), r"kv_sf: expected shape \(50,\) or \(50, 1\)"),
    (3, lambda a: a[3].to(torch.int32), r"kv_sf: expected dtype float32, got int32"),
    (4, lambda a: a[4][:, :16], r"weights: expected shape \(6, 32\)"),
    (4, lambda a: a[4].t().contiguous().t(), r"weights: expected contiguous heads"),
    (4, lambda a: a[4].to(torch.bfloat16), r"weights: BF16 weights need BF16 logits"),
    (4, lambda a: a[4].half(), r"weights: expected dtype float32 or bfloat16, got float16"),
    (5, lambda a: a[5].long(), r"cu_seq_len_k_start: expected dtype int32, got int64"),
    (5, lambda a: a[5][:3], r"cu_seq_len_k_start: expected 6 entries"),
    (6, lambda a: torch.zeros(12, dtype=torch.int32)[::2], r"cu_seq_len_k_end: expected a contiguous tensor"),
    (6, lambda a: a[6].view(6, 1), r"cu_seq_len_k_end: expected a 1-D tensor"),
    (8, lambda a: -1, r"max_seqlen_k: expected an integer in \[0, 2147483647\]"),
    (8, lambda a: 16, r"clean_logits: compressed logits \(max_seqlen_k = 16 > 0\) cannot be cleaned"),
    (9, lambda a: torch.float16, r"logits_dtype: expected torch.float32 or torch.bfloat16"),
    (6, lambda a: torch.zeros(6, dtype=torch.int32, device="meta"), r"cu_seq_len_k_end: expected device cpu"),
]


@pytest.mark.parametrize("index,build,message", MQA_BAD, ids=[m[2][:40] for m in MQA_BAD])
def test_mqa_logits_bad_inputs(index, build, message):
    args = _mqa_flat(MqaCase(6, 50, 32, 64))
    assert_rejected(ops.fp8_fp4_mqa_logits, args, index, build(args), message)


def test_mqa_logits_bad_fp4_inputs():
    args = _mqa_flat(MqaCase(6, 50, 32, 64, fp4=True))
    with pytest.raises(DeepGEMMError, match=r"q_sf: packed FP4 queries \(int8\) need their UE8M0 scales"):
        ops.fp8_fp4_mqa_logits(*_replace(args, 1, None))
    with pytest.raises(DeepGEMMError, match=r"q_sf: expected shape \(6, 32\)"):
        ops.fp8_fp4_mqa_logits(*_replace(args, 1, args[1][:3]))
    with pytest.raises(DeepGEMMError, match=r"kv_sf: expected dtype int32, got float32"):
        ops.fp8_fp4_mqa_logits(*_replace(args, 3, args[3].float()))
    with pytest.raises(DeepGEMMError, match=r"kv: expected dtype int8 \(the dtype of q"):
        ops.fp8_fp4_mqa_logits(*_replace(args, 2, torch.zeros(50, 64).to(FP8)))
    narrow = torch.zeros(6, 32, 16, dtype=torch.int8)
    with pytest.raises(DeepGEMMError, match=r"q: expected a head dim D in \(64, 128\) for packed FP4.*D = 32"):
        ops.fp8_fp4_mqa_logits(*_replace(args, 0, narrow))
    q, _, kv, kv_sf, w, ks, ke = make_mqa(MqaCase(6, 50, 32, 64, fp4=True))[0]
    with pytest.raises(DeepGEMMError, match=r"q: expected dtype float8_e4m3fn, got int8"):
        ops.fp8_mqa_logits(q, kv, kv_sf, w, ks, ke, True, 0)
    with pytest.raises(DeepGEMMError, match=r"q: expected a \(data, scale\) pair"):
        deep_gemm.fp8_fp4_mqa_logits(q, (kv, kv_sf), w, ks, ke)


def test_paged_metadata_bad_inputs():
    lens = torch.randint(0, 500, (3, 2), dtype=torch.int32)
    cases = [
        ((lens.long(), 64, 8, None), r"context_lens: expected dtype int32, got int64"),
        ((lens[None], 64, 8, None), r"context_lens: expected a 1-D or 2-D tensor"),
        ((lens.t(), 64, 8, None), r"context_lens: expected a contiguous tensor"),
        ((lens[:, :0], 64, 8, None), r"context_lens: expected next_n >= 1"),
        ((lens, 128, 8, None), r"block_kv: expected block_kv in \(32, 64\).*got 128"),
        ((lens, 64, 0, None), r"num_sms: expected an integer in \[1, 2147483647\], got 0"),
        ((lens, 64, 8, torch.zeros(3, dtype=torch.int32)), r"indices: varlen scheduling"),
        ((lens, 64, 8, torch.zeros(3, dtype=torch.int32, device="meta")), r"indices: expected device cpu"),
    ]
    for args, message in cases:
        with pytest.raises(DeepGEMMError, match=message):
            ops.get_paged_mqa_logits_metadata(*args)


PAGED_BAD = [
    (0, lambda a: a[0][:, :1], r"q: expected a contiguous tensor"),
    (0, lambda a: a[0].float(), r"q: expected dtype float8_e4m3fn or int8"),
    (0, lambda a: a[0][:, :0].contiguous(), r"q: expected next_n >= 1"),
    (2, lambda a: a[2].view(torch.int8), r"kv_cache: expected dtype uint8, got int8"),
    (2, lambda a: a[2][:, :, :, :-1], r"kv_cache: expected 68 bytes per token"),
    (2, lambda a: a[2][:, ::2], r"kv_cache: expected stride\(1\) == 68 and stride\(3\) == 1"),
    (2, lambda a: a[2].view(-1, 16, 1, 68), r"kv_cache: expected block_kv in \(32, 64\).* in dim 1, got 16"),
    (2, lambda a: torch.zeros(8, 64 * 68 + 2, dtype=torch.uint8)[:, :64 * 68].view(8, 64, 1, 68),
     r"kv_cache: expected a page stride and start that are multiples of 4 bytes"),
    (2, lambda a: a[2].expand(-1, -1, 2, -1), r"kv_cache: expected one KV head"),
    (3, lambda a: a[3][:2], r"weights: expected shape \(4, 32\) \(\[B \* next_n, H\]\)"),
    (4, lambda a: a[4][:, :1].contiguous(), r"context_lens: expected shape \(2, 2\)"),
    (5, lambda a: a[5].long(), r"block_table: expected dtype int32"),
    (5, lambda a: a[5][:1], r"block_table: expected 2 rows"),
    (5, lambda a: a[5].t().contiguous().t(), r"block_table: expected contiguous rows"),
    (6, lambda a: torch.zeros(5, 2, dtype=torch.int32), r"schedule_meta: expected 9 rows \(get_num_sms\(\) = 8"),
    (6, lambda a: torch.zeros(9, 3, dtype=torch.int32), r"schedule_meta: expected shape \[num_sms \+ 1, 2\]"),
    (6, lambda a: a[6].float(), r"schedule_meta: expected dtype int32"),
    (7, lambda a: -5, r"max_context_len: expected an integer in \[0, 2147483647\], got -5"),
    (9, lambda a: torch.int32, r"logits_dtype: expected torch.float32 or torch.bfloat16"),
    (10, lambda a: torch.zeros(2, dtype=torch.int32), r"indices: varlen scheduling"),
    (4, lambda a: a[4].to("meta"), r"context_lens: expected device cpu"),
]


@pytest.mark.parametrize("index,build,message", PAGED_BAD, ids=[m[2][:40] for m in PAGED_BAD])
def test_paged_mqa_logits_bad_inputs(index, build, message, num_sms_8):
    args, _ = make_paged(PagedCase(2, 2, 32, 64))
    flat = args + (False, torch.float32, None)
    assert_rejected(ops.fp8_fp4_paged_mqa_logits, flat, index, build(flat), message)


def test_paged_mqa_logits_bad_fp4_cache(num_sms_8):
    args, _ = make_paged(PagedCase(2, 1, 32, 64, fp4=True))
    q, q_sf, kv_cache, weights, context_lens, block_table, meta, max_len = args
    fp8_sized = torch.zeros(4, 64, 1, 68, dtype=torch.uint8)
    with pytest.raises(DeepGEMMError, match=r"kv_cache: expected 36 bytes per token in dim 3 \(D/2 value bytes"):
        ops.fp8_fp4_paged_mqa_logits(q, q_sf, fp8_sized, weights, context_lens, block_table, meta, max_len, False,
                                     torch.float32, None)
    with pytest.raises(DeepGEMMError, match=r"q_sf: expected shape \(2, 1, 32\)"):
        ops.fp8_fp4_paged_mqa_logits(q, q_sf[:, :, :8], kv_cache, weights, context_lens, block_table, meta,
                                     max_len, False, torch.float32, None)
    with pytest.raises(DeepGEMMError, match=r"q: expected dtype float8_e4m3fn, got int8"):
        ops.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, meta, max_len, False, None)


def test_schedule_meta_rows_free_without_device_count():
    """With no GPU and no set_num_sms (get_num_sms() == 0) any [N + 1, 2] schedule is accepted."""
    if runtime.get_num_sms() != 0:
        pytest.skip("a device SM count is known")
    args, _ = make_paged(PagedCase(1, 1, 32, 64))
    meta = deep_gemm.get_paged_mqa_logits_metadata(args[4], 64, 3)
    out = call_paged(args[:6] + (meta, args[7]), False, torch.float32)
    assert out.shape == (1, args[7])
    assert math.isfinite(float(out[0, 0])) == bool(args[4][0, 0] > 0)


# ---- CUDA fallback (GPU machine only) ----------------------------------------------------------------------------

def _to_cuda(args: tuple) -> tuple:
    return tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)
