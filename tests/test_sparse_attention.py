"""Block-sparse MQA logits (DeepSeek V4 indexer), contiguous and paged: metadata + logits against explicit float64
loops (values decoded from bytes, scales from each word's bytes), opcheck, compile / export and bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError

OPS = torch.ops.deep_gemm
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
H, D = 32, 128


def _words(rows: int, gen) -> torch.Tensor:
    """int32 scale words: four UE8M0 bytes each, exponents 2^-2 .. 2^2."""
    exps = torch.randint(125, 130, (rows, 4), generator=gen, dtype=torch.int32)
    return (exps[:, 0] | (exps[:, 1] << 8) | (exps[:, 2] << 16) | (exps[:, 3] << 24)).to(torch.int32)


def _decode(row: torch.Tensor, word: int, fp4: bool) -> list:
    if fp4:
        values = []
        for byte in row.view(torch.uint8).tolist():
            for code in (byte & 0xF, byte >> 4):
                v = E2M1[code & 7]
                values.append(-v if code & 8 else v)
    else:
        values = row.float().tolist()
    word &= 0xFFFFFFFF
    return [v * 2.0 ** (((word >> (8 * (j // 32))) & 0xFF) - 127) for j, v in enumerate(values)]


def _qk(num: int, fp4: bool, gen, lead=()):
    if fp4:
        data = torch.randint(-128, 128, (*lead, num, D // 2), generator=gen, dtype=torch.int8)
    else:
        data = (torch.randn(*lead, num, D, generator=gen) * 2).to(torch.float8_e4m3fn)
    return data


def _oracle(q, q_sf, weights, key_of, starts, block, fp4):
    """key_of(token) -> decoded list or None (no such token); starts[i] = KV start per slot (-1 unused)."""
    rows = []
    for i in range(q.size(0)):
        qs = [_decode(q[i, h], int(q_sf[i, h]), fp4) for h in range(H)]
        w = weights[i].float().tolist()
        row = []
        for start in starts[i]:
            for t in range(block):
                key = key_of(start + t) if start >= 0 else None
                if key is None:
                    row.append(float("-inf"))
                    continue
                total = 0.0
                for h in range(H):
                    dot = sum(a * b for a, b in zip(qs[h], key))
                    total += max(dot, 0.0) * w[h]
                row.append(total)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(q.size(0), len(starts[0]) * block if starts else 0)


def _assert_logits(got, want):
    assert got.dtype == torch.bfloat16
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got.float()), finite)
    assert torch.equal(got.float()[~finite], want.float()[~finite])
    # one BF16 rounding of the exact sum: within half a BF16 ulp (2^-9 relative)
    err = (got.double()[finite] - want[finite]).abs()
    assert bool((err <= want[finite].abs() * 2.0 ** -8 + 1e-30).all()), err.max()


@pytest.mark.parametrize("fp4", (False, True))
@pytest.mark.parametrize("block,unaligned", [(8, False), (16, False), (8, True)])
def test_contiguous_matches_loops(fp4, block, unaligned):
    gen = torch.Generator().manual_seed(block + 2 * fp4 + unaligned)
    num_kv, num_max = 70, 4
    ks = [0, 16, 48, 5, 60] if not unaligned else [3, 13, 50, 5, 0]
    ke = [30, 70, 49, 5, 200]  # row 3: empty range; row 4: ke past num_kv (clipped)
    if not unaligned:
        ks[3] = 0
    nq = len(ks)
    rows = []
    for s, e in zip(ks, ke):
        s2, e2 = min(s, num_kv), max(min(s, num_kv), min(e, num_kv))
        n = min(num_max, -(-(e2 - s2) // block))
        first = s2 // block
        chosen = sorted(first + k for k in range(n))  # every block of the range, increasing
        rows.append(chosen + [0] * (num_max - n))
    idx = torch.tensor(rows, dtype=torch.int32)
    meta = deep_gemm.get_sparse_mqa_logits_metadata(torch.tensor(ks, dtype=torch.int32),
                                                    torch.tensor(ke, dtype=torch.int32), num_kv, idx,
                                                    torch.int8 if fp4 else torch.float8_e4m3fn, block, unaligned)
    assert meta.dtype == torch.uint8 and meta.dim() == 1
    q, q_sf = _qk(nq, fp4, gen, ()), None
    q = _qk(H, fp4, gen, (nq,))
    q_sf = _words(nq * H, gen).view(nq, H)
    kv, kv_sf = _qk(num_kv, fp4, gen), _words(num_kv, gen)
    weights = torch.randn(nq, H, generator=gen).bfloat16()
    got = deep_gemm.fp8_fp4_sparse_mqa_logits((q, q_sf), (kv, kv_sf), weights, meta, num_max, block, unaligned)
    assert got.shape == (nq, num_max * block) and got.stride(0) % 512 == 0
    starts = []
    for i, (s, e) in enumerate(zip(ks, ke)):
        s2, e2 = min(s, num_kv), max(min(s, num_kv), min(e, num_kv))
        n = min(num_max, -(-(e2 - s2) // block))
        phase = s % block if unaligned else 0
        starts.append([rows[i][j] * block + phase if j < n else -1 for j in range(num_max)])
    keys = [_decode(kv[t], int(kv_sf[t]), fp4) for t in range(num_kv)]
    want = _oracle(q, q_sf, weights, lambda t: keys[t] if t < num_kv else None, starts, block, fp4)
    _assert_logits(got, want)


def _paged_cache(pages: int, page_kv: int, fp4: bool, gen, pad_pages_to=512):
    """A fused cache [pages, page_kv, 1, bytes]: per page the values of all tokens, then their scale words."""
    value_bytes = D // 2 if fp4 else D
    token_bytes = value_bytes + 4
    page_bytes = page_kv * token_bytes
    stride = -(-page_bytes // pad_pages_to) * pad_pages_to
    buffer = torch.zeros(pages * stride, dtype=torch.uint8)
    data = _qk(pages * page_kv, fp4, gen)
    words = _words(pages * page_kv, gen)
    raw = data.view(torch.uint8).reshape(pages, page_kv * value_bytes)
    sf = words.view(torch.uint8).reshape(pages, page_kv * 4)
    for p in range(pages):
        buffer[p * stride:p * stride + page_kv * value_bytes] = raw[p]
        buffer[p * stride + page_kv * value_bytes:p * stride + page_bytes] = sf[p]
    cache = buffer.as_strided((pages, page_kv, 1, token_bytes), (stride, token_bytes, token_bytes, 1))
    keys = [_decode(data[t], int(words[t]), fp4) for t in range(pages * page_kv)]
    return cache, keys


@pytest.mark.parametrize("fp4", (False, True))
@pytest.mark.parametrize("block,page_kv", [(8, 32), (16, 64)])
def test_paged_matches_loops(fp4, block, page_kv):
    gen = torch.Generator().manual_seed(page_kv + fp4)
    pages, num_max = 6, 4
    cache, keys = _paged_cache(pages, page_kv, fp4, gen)
    context = [page_kv * 2 + 3, 1, 0, page_kv * 3]
    nq = len(context)
    table = torch.stack([torch.randperm(pages, generator=gen)[:3] for _ in range(nq)]).to(torch.int32)
    per_page = page_kv // block
    rows = []
    for c in context:
        n = min(num_max, -(-c // block))
        total = -(-c // block)
        chosen = sorted(torch.randperm(max(total, 1), generator=gen)[:n].tolist()) if n else []
        rows.append(chosen + [0] * (num_max - n))
    idx = torch.tensor(rows, dtype=torch.int32)
    meta = deep_gemm.get_paged_sparse_mqa_logits_metadata(torch.tensor(context, dtype=torch.int32), table,
                                                          torch.arange(nq, dtype=torch.int32), page_kv, idx,
                                                          torch.int8 if fp4 else torch.float8_e4m3fn, block)
    q = _qk(H, fp4, gen, (nq, 1))
    q_sf = _words(nq * H, gen).view(nq, 1, H)
    weights = torch.randn(nq, H, generator=gen).bfloat16()
    got = deep_gemm.fp8_fp4_paged_sparse_mqa_logits((q, q_sf), cache, weights, meta, num_max, block)
    starts = []
    for i, c in enumerate(context):
        n = min(num_max, -(-c // block))
        starts.append([int(table[i, rows[i][j] // per_page]) * page_kv + (rows[i][j] % per_page) * block
                       if j < n else -1 for j in range(num_max)])
    want = _oracle(q[:, 0], q_sf[:, 0], weights, lambda t: keys[t], starts, block, fp4)
    _assert_logits(got, want)


def _small_contiguous(fp4=False, nq=2, num_kv=16):
    gen = torch.Generator().manual_seed(11)
    ks = torch.zeros(nq, dtype=torch.int32)
    ke = torch.full((nq,), num_kv, dtype=torch.int32)
    idx = torch.arange(4, dtype=torch.int32).repeat(nq, 1)
    q = _qk(H, fp4, gen, (nq,))
    return dict(ks=ks, ke=ke, idx=idx, q=q, q_sf=_words(nq * H, gen).view(nq, H), kv=_qk(num_kv, fp4, gen),
                kv_sf=_words(num_kv, gen), w=torch.randn(nq, H, generator=gen).bfloat16(), num_kv=num_kv)


def test_zero_query_rows():
    a = _small_contiguous(nq=0)
    meta = deep_gemm.get_sparse_mqa_logits_metadata(a["ks"], a["ke"], a["num_kv"], a["idx"], torch.float8_e4m3fn, 8)
    out = deep_gemm.fp8_fp4_sparse_mqa_logits((a["q"], a["q_sf"]), (a["kv"], a["kv_sf"]), a["w"], meta, 4, 8)
    assert out.shape == (0, 32)


FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


def test_opcheck_and_fake():
    # Packed FP4 operands (int8): the full opcheck set runs (test_schema cannot multiply FP8 tensors on the CPU).
    a = _small_contiguous(fp4=True)
    f8 = _small_contiguous(fp4=False)
    meta_args = (a["ks"], a["ke"], a["num_kv"], a["idx"], torch.int8, 8, False)
    torch.library.opcheck(OPS.get_sparse_mqa_logits_metadata.default, meta_args)
    meta = OPS.get_sparse_mqa_logits_metadata(*meta_args)
    torch.library.opcheck(OPS.fp8_fp4_sparse_mqa_logits.default,
                          (a["q"], a["q_sf"], a["kv"], a["kv_sf"], a["w"], meta, 4, 8, False))
    torch.library.opcheck(OPS.fp8_fp4_sparse_mqa_logits.default,
                          (f8["q"], f8["q_sf"], f8["kv"], f8["kv_sf"], f8["w"], meta, 4, 8, False),
                          test_utils=FP8_OPCHECK_UTILS)
    gen = torch.Generator().manual_seed(3)
    cache, _ = _paged_cache(2, 128, True, gen)  # 128 tokens of 68 bytes: dense pages are 512-byte multiples
    assert cache.is_contiguous()  # (opcheck's dynamic-shape test re-makes inputs contiguous)
    table = torch.tensor([[1, 0], [0, 1]], dtype=torch.int32)
    pargs = (torch.tensor([40, 9], dtype=torch.int32), table, torch.tensor([0, 0], dtype=torch.int32), 128,
             torch.tensor([[0, 1, 2, 3], [0, 1, 0, 0]], dtype=torch.int32), torch.int8, 8)
    torch.library.opcheck(OPS.get_paged_sparse_mqa_logits_metadata.default, pargs)
    pmeta = OPS.get_paged_sparse_mqa_logits_metadata(*pargs)
    torch.library.opcheck(OPS.fp8_fp4_paged_sparse_mqa_logits.default,
                          (a["q"][:, None], a["q_sf"][:, None], cache, a["w"], pmeta, 4, 8))
    with FakeTensorMode() as mode:
        fake = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in f8.items()}
        fmeta = OPS.get_sparse_mqa_logits_metadata(fake["ks"], fake["ke"], 16, fake["idx"], torch.float8_e4m3fn, 8)
        out = OPS.fp8_fp4_sparse_mqa_logits(fake["q"], fake["q_sf"], fake["kv"], fake["kv_sf"], fake["w"], fmeta, 4, 8)
        assert out.shape == (2, 32) and out.stride() == (512, 1)


def test_compile_and_export():
    a = _small_contiguous(fp4=True)

    def f(ks, ke, idx, q, q_sf, kv, kv_sf, w):
        meta = deep_gemm.get_sparse_mqa_logits_metadata(ks, ke, kv.shape[0], idx, torch.int8, 8)
        return deep_gemm.fp8_fp4_sparse_mqa_logits((q, q_sf), (kv, kv_sf), w, meta, 4, 8).float() + 1

    args = (a["ks"], a["ke"], a["idx"], a["q"], a["q_sf"], a["kv"], a["kv_sf"], a["w"])
    eager = f(*args)
    assert torch.equal(torch.compile(f, fullgraph=True, backend="aot_eager")(*args), eager)

    class M(torch.nn.Module):
        def forward(self, *xs):
            return f(*xs)

    assert torch.equal(torch.export.export(M(), args).module()(*args), eager)


def _bad_logits(**over):
    a = _small_contiguous()
    meta = OPS.get_sparse_mqa_logits_metadata(a["ks"], a["ke"], a["num_kv"], a["idx"], torch.float8_e4m3fn, 8)
    args = dict(q=a["q"], q_sf=a["q_sf"], kv=a["kv"], kv_sf=a["kv_sf"], weights=a["w"], metadata=meta,
                num_max_sparse_blocks=4, sparse_block_kv=8, use_unaligned_ks=False)
    args.update(over)
    return OPS.fp8_fp4_sparse_mqa_logits, args


def _bad_meta(**over):
    a = _small_contiguous()
    args = dict(cu_seq_len_k_start=a["ks"], cu_seq_len_k_end=a["ke"], num_kv_tokens=16,
                sparse_kv_block_indices=a["idx"], qk_dtype=torch.float8_e4m3fn, sparse_block_kv=8)
    args.update(over)
    return OPS.get_sparse_mqa_logits_metadata, args


BAD = [
    (_bad_meta, dict(sparse_block_kv=32), r"sparse_block_kv: expected one of \(8, 16\)"),
    (_bad_meta, dict(qk_dtype=torch.bfloat16), r"qk_dtype: expected torch.float8_e4m3fn or torch.int8"),
    (_bad_meta, dict(cu_seq_len_k_end=torch.zeros(3, dtype=torch.int32)), r"cu_seq_len_k_end: expected 2 entries"),
    (_bad_meta, dict(sparse_kv_block_indices=torch.zeros(2, 4)), r"sparse_kv_block_indices: expected dtype int32"),
    (_bad_meta, dict(num_kv_tokens=-1), r"num_kv_tokens: expected an integer in \[0"),
    (_bad_logits, dict(num_max_sparse_blocks=6), r"num_max_sparse_blocks: expected a multiple of 4"),
    (_bad_logits, dict(q_sf=None), r"q_sf: expected the query scales"),
    (_bad_logits, dict(q=torch.zeros(2, 16, 128, dtype=torch.float8_e4m3fn)),
     r"q: expected shape \[num_q_tokens, 32, 128\]"),
    (_bad_logits, dict(kv=torch.zeros(16, 64, dtype=torch.int8)), r"kv: expected dtype float8_e4m3fn"),
    (_bad_logits, dict(kv_sf=torch.zeros(15, dtype=torch.int32)), r"kv_sf: expected shape \(16,\)"),
    (_bad_logits, dict(weights=torch.zeros(2, 32)), r"weights: expected dtype bfloat16"),
    (_bad_logits, dict(metadata=torch.zeros(10, dtype=torch.uint8)), r"metadata: expected \d+ bytes"),
]


@pytest.mark.parametrize("index", range(len(BAD)))
def test_bad_inputs(index):
    build, over, message = BAD[index]
    op, args = build(**over)
    with pytest.raises(DeepGEMMError, match=message):
        op(**args)


def test_paged_bad_cache():
    a = _small_contiguous()
    gen = torch.Generator().manual_seed(3)
    cache, _ = _paged_cache(2, 32, False, gen)
    meta = OPS.get_paged_sparse_mqa_logits_metadata(torch.tensor([40, 9], dtype=torch.int32),
                                                    torch.tensor([[1, 0], [0, 1]], dtype=torch.int32),
                                                    torch.tensor([0, 0], dtype=torch.int32), 32,
                                                    torch.zeros(2, 4, dtype=torch.int32), torch.float8_e4m3fn, 8)
    dense = torch.zeros(2 * 32 * 132, dtype=torch.uint8).view(2, 32, 1, 132)  # page stride 4224: not 512-aligned
    with pytest.raises(DeepGEMMError, match=r"kv_cache: expected dense tokens .* multiple of 512 bytes"):
        OPS.fp8_fp4_paged_sparse_mqa_logits(a["q"][:, None], a["q_sf"][:, None], dense, a["w"], meta, 4, 8)
    with pytest.raises(DeepGEMMError, match=r"q: expected next_n == 1"):
        OPS.fp8_fp4_paged_sparse_mqa_logits(a["q"][:, None].expand(2, 2, 32, 128).contiguous(),
                                            a["q_sf"][:, None], cache, a["w"], meta, 4, 8)
    with pytest.raises(DeepGEMMError, match=r"page_kv: expected a positive multiple of sparse_block_kv = 16"):
        OPS.get_paged_sparse_mqa_logits_metadata(torch.tensor([40, 9], dtype=torch.int32),
                                                 torch.tensor([[1, 0], [0, 1]], dtype=torch.int32),
                                                 torch.tensor([0, 0], dtype=torch.int32), 24,
                                                 torch.zeros(2, 4, dtype=torch.int32), torch.float8_e4m3fn, 16)


@pytest.mark.parametrize("lens,indices,message", [
    ([40, 9], [[0, 1, 2, 8], [0, 0, 0, 0]],
     r"sparse_kv_block_indices: expected the used slots' logical blocks in \[0, 8\) .* "
     r"sparse_kv_block_indices\[0, 3\] = 8"),
    ([40, 9], [[0, 1, 2, 3], [-1, 5, 5, 5]], r"sparse_kv_block_indices\[1, 0\] = -1"),
    ([40, -1], [[0, 1, 2, 3], [0, 0, 0, 0]],
     r"context_lens: expected non-negative lengths, got context_lens\[1\] = -1"),
], ids=["past_the_table", "negative", "negative_length"])
def test_paged_metadata_bad_data_raises(lens, indices, message):
    """A used slot's logical block outside the row's block table would read another request's page (the CPU
    kernel checks it; CUDA in the checked mode). Unused slots (past ceil(len / sparse_block_kv)) may hold anything:
    row 1 (9 tokens: two blocks) has 5s in its unused slots."""
    args = (torch.tensor(lens, dtype=torch.int32), torch.tensor([[1, 0], [0, 1]], dtype=torch.int32),
            torch.tensor([0, 1], dtype=torch.int32), 32, torch.tensor(indices, dtype=torch.int32), torch.float8_e4m3fn,
            8)
    with pytest.raises(DeepGEMMError, match=message):
        OPS.get_paged_sparse_mqa_logits_metadata(*args)
    good = [[0, 1, 2, 3], [1, 0, 99, -7]]  # row 1 uses two slots; the rest is ignored
    OPS.get_paged_sparse_mqa_logits_metadata(torch.tensor([40, 9], dtype=torch.int32), *args[1:4],
                                             torch.tensor(good, dtype=torch.int32), *args[5:])


def test_backends_say_triton():
    """Triton kernels (attention/sparse/kernels.py), on by default."""
    report = deep_gemm.backends()
    for name in ("get_sparse_mqa_logits_metadata", "fp8_fp4_sparse_mqa_logits",
                 "get_paged_sparse_mqa_logits_metadata", "fp8_fp4_paged_sparse_mqa_logits"):
        assert report[name].startswith("triton") and "opt-in" not in report[name], report[name]
