"""The block-sparse MQA Triton kernels (DeepSeek V4 indexer) on one GPU: both metadata kernels bit for bit against
the references, and the logits kernel, contiguous (prefill) and paged (decode), FP8 and FP4, against the reference
run on the same GPU at DeepSeek V4's sizes (32 heads of 128, sparse blocks of 8 and 16 tokens, 64-token pages, up
to 2048 selected blocks per row), and under CUDA-graph capture. The kernels are asked for explicitly
(``SparseOverrides(kernels=True)``), so a future opt-in period (core/gpu_validation.py) does not skip them.

The reference works in FP64 on [rows, columns, 128] gathers, so it runs on row slices of at most
REFERENCE_ELEMENTS (row, column) pairs (rows are independent: the slice's metadata is rebuilt from the slice's
inputs)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from deep_gemm.attention.sparse import plan as sparse_plan
from deep_gemm.attention.sparse import reference as ref
from deep_gemm.core.registry import run_launcher
from sparse_mqa_cases import assert_logits_match, make_paged_cache, make_qk, make_words, select_blocks

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

KERNELS = sparse_plan.SparseOverrides(kernels=True)
FP8, FP4 = torch.float8_e4m3fn, torch.int8
REFERENCE_ELEMENTS = 2**21  # (row, column) pairs per reference slice: a 2 GiB FP64 gather
CUDA = "cuda"


def _kernel(name, *args, overrides=KERNELS):
    out = run_launcher(name, *args, launcher_kwargs=dict(overrides=overrides))
    assert out is not NotImplemented, f"the launcher of {name} declined"
    return out


def _row_slices(rows: int, cols: int):
    step = max(1, REFERENCE_ELEMENTS // cols)
    return [slice(r0, min(r0 + step, rows)) for r0 in range(0, rows, step)]


@dataclass(frozen=True)
class Prefill:
    rows: int
    num_kv: int
    num_max: int
    block: int
    fp4: bool
    unaligned: bool = False
    steps: int | None = None

    def __str__(self):
        return (f"q{self.rows}-kv{self.num_kv}-s{self.num_max}x{self.block}-{'fp4' if self.fp4 else 'fp8'}"
                f"{'-unaligned' if self.unaligned else ''}{f'-steps{self.steps}' if self.steps else ''}")


PREFILL = [
    Prefill(1024, 32768, 512, 8, True),
    Prefill(1024, 32768, 512, 8, False, unaligned=True),
    Prefill(512, 65536, 2048, 16, True, unaligned=True),
    Prefill(768, 20000, 256, 16, False),
    Prefill(333, 9001, 124, 8, True, steps=3),
    Prefill(4, 100000, 4096, 8, False),  # few rows, the most blocks the op takes: one step per program
]


def _prefill_inputs(c: Prefill, seed: int):
    g = torch.Generator().manual_seed(seed)
    # Causal-like windows: row r ends at a position spread over the KV, starts up to 40 % of it earlier.
    ke = torch.linspace(c.num_kv // 8, c.num_kv, c.rows).long()
    ks = (ke - (torch.rand(c.rows, generator=g) * 0.4 * c.num_kv).long()).clamp(min=0)
    if not c.unaligned:
        ks = ks // c.block * c.block
    ks, ke = ks.to(torch.int32).to(CUDA), ke.to(torch.int32).to(CUDA)
    idx = select_blocks(ks, ke, c.num_kv, c.num_max, c.block, g)
    q, q_sf = make_qk((c.rows, 32), c.fp4, g, CUDA), make_words((c.rows, 32), g).to(CUDA)
    kv, kv_sf = make_qk((c.num_kv,), c.fp4, g, CUDA), make_words((c.num_kv,), g).to(CUDA)
    weights = torch.randn(c.rows, 32, generator=g).bfloat16().to(CUDA)
    return ks, ke, idx, q, q_sf, kv, kv_sf, weights


@pytest.mark.parametrize("c", PREFILL, ids=str)
def test_prefill_metadata_and_logits(c):
    ks, ke, idx, q, q_sf, kv, kv_sf, weights = _prefill_inputs(c, c.rows + c.num_max)
    dtype = FP4 if c.fp4 else FP8
    meta_args = (ks, ke, c.num_kv, idx, dtype, c.block, c.unaligned)
    meta = _kernel("get_sparse_mqa_logits_metadata", *meta_args)
    assert torch.equal(meta, ref.get_sparse_mqa_logits_metadata_reference(*meta_args))
    got = _kernel("fp8_fp4_sparse_mqa_logits", q, q_sf, kv, kv_sf, weights, meta, c.num_max, c.block, c.unaligned,
                  overrides=sparse_plan.SparseOverrides(c.steps, kernels=True))
    for r in _row_slices(c.rows, c.num_max * c.block):
        part = ref.get_sparse_mqa_logits_metadata_reference(ks[r], ke[r], c.num_kv, idx[r], dtype, c.block,
                                                            c.unaligned)
        want = ref.fp8_fp4_sparse_mqa_logits_reference(q[r], q_sf[r], kv, kv_sf, weights[r], part, c.num_max,
                                                       c.block, c.unaligned)
        assert_logits_match(got[r], want)


@dataclass(frozen=True)
class Decode:
    rows: int
    pages: int
    page_kv: int
    num_max: int
    block: int
    fp4: bool
    steps: int | None = None

    def __str__(self):
        return (f"q{self.rows}-p{self.pages}x{self.page_kv}-s{self.num_max}x{self.block}-"
                f"{'fp4' if self.fp4 else 'fp8'}{f'-steps{self.steps}' if self.steps else ''}")


DECODE = [
    Decode(128, 4096, 64, 512, 8, True),
    Decode(256, 4096, 64, 512, 8, False),
    Decode(64, 8192, 64, 2048, 16, True),
    Decode(512, 2048, 64, 256, 16, False),
    Decode(37, 1000, 128, 100, 8, True, steps=2),
]


def _decode_inputs(c: Decode, seed: int):
    g = torch.Generator().manual_seed(seed)
    cache = make_paged_cache(c.pages, c.page_kv, c.fp4, g, device=CUDA)
    cols = c.pages // 4  # each request's table: a quarter of the pool
    table = torch.stack([torch.randperm(c.pages, generator=g)[:cols] for _ in range(c.rows)]).to(torch.int32)
    lens = torch.randint(1, cols * c.page_kv + 1, (c.rows,), generator=g, dtype=torch.int32)
    lens[0] = 0
    idx = select_blocks(torch.zeros_like(lens), lens, cols * c.page_kv, c.num_max, c.block, g)
    q, q_sf = make_qk((c.rows, 1, 32), c.fp4, g, CUDA), make_words((c.rows, 1, 32), g).to(CUDA)
    weights = torch.randn(c.rows, 32, generator=g).bfloat16().to(CUDA)
    return cache, table.to(CUDA), lens.to(CUDA), idx.to(CUDA), q, q_sf, weights


@pytest.mark.parametrize("c", DECODE, ids=str)
def test_decode_metadata_and_logits(c):
    cache, table, lens, idx, q, q_sf, weights = _decode_inputs(c, c.rows + c.pages)
    dtype = FP4 if c.fp4 else FP8
    request = torch.arange(c.rows, dtype=torch.int32, device=CUDA)
    meta_args = (lens, table, request, c.page_kv, idx, dtype, c.block)
    meta = _kernel("get_paged_sparse_mqa_logits_metadata", *meta_args)
    assert torch.equal(meta, ref.get_paged_sparse_mqa_logits_metadata_reference(*meta_args))
    got = _kernel("fp8_fp4_paged_sparse_mqa_logits", q, q_sf, cache, weights, meta, c.num_max, c.block,
                  overrides=sparse_plan.SparseOverrides(c.steps, kernels=True))
    for r in _row_slices(c.rows, c.num_max * c.block):
        part = ref.get_paged_sparse_mqa_logits_metadata_reference(lens[r], table[r], request[r], c.page_kv, idx[r],
                                                                  dtype, c.block)
        want = ref.fp8_fp4_paged_sparse_mqa_logits_reference(q[r], q_sf[r], cache, weights[r], part, c.num_max,
                                                             c.block)
        assert_logits_match(got[r], want)


def test_cuda_graph_capture_and_replay():
    """Metadata and logits (contiguous and paged) captured in one graph: replays on new inputs in the same buffers
    give what eager calls give."""
    c = Prefill(256, 8192, 256, 8, True, unaligned=True)
    d = Decode(64, 512, 64, 256, 16, False)
    ks, ke, idx, q, q_sf, kv, kv_sf, weights = _prefill_inputs(c, 1)
    cache, table, lens, pidx, pq, pq_sf, pweights = _decode_inputs(d, 2)
    request = torch.arange(d.rows, dtype=torch.int32, device=CUDA)

    def step():
        meta = _kernel("get_sparse_mqa_logits_metadata", ks, ke, c.num_kv, idx, FP4, c.block, True)
        out = _kernel("fp8_fp4_sparse_mqa_logits", q, q_sf, kv, kv_sf, weights, meta, c.num_max, c.block, True)
        pmeta = _kernel("get_paged_sparse_mqa_logits_metadata", lens, table, request, d.page_kv, pidx, FP8, d.block)
        pout = _kernel("fp8_fp4_paged_sparse_mqa_logits", pq, pq_sf, cache, pweights, pmeta, d.num_max, d.block)
        return out, pout

    step()  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    g = torch.Generator().manual_seed(3)
    for t, fresh in ((q, make_qk((c.rows, 32), True, g, CUDA)), (kv, make_qk((c.num_kv,), True, g, CUDA)),
                     (pq, make_qk((d.rows, 1, 32), False, g, CUDA))):
        t.copy_(fresh)
    ke.copy_((ke - 100).clamp(min=0))
    lens.copy_(lens // 2)
    graph.replay()
    torch.cuda.synchronize()
    eager = step()
    for got, want in zip(captured, eager):
        assert torch.equal(got, want)
