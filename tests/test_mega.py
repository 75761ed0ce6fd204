"""Mega MoE buffer contract: sizes, slice layout, views, ring limits, weight transform, argument checks.

The fused layers' entry points are tested here for argument validation; their results against an independent
loop are in test_mega_moe_cpu.py and test_mega_moe_gloo.py. Buffers for more than one rank need CUDA
symmetric memory and an initialised process group: only the error path of that branch runs here.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.core.schemas import SCHEMAS
from deep_gemm.mega import buffer as mega_buffer
from deep_gemm.testing import assert_bitwise_equal

ops = torch.ops.deep_gemm
FP8_OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
BLOCK_M_CANDIDATES = (8, 16, 32, 64, 96, 128, 192)  # DeepGEMM's Mega MoE BLOCK_M candidates, restated
EXPORTED = ("x", "x_sf", "topk_idx", "topk_weights", "l1_acts", "l1_acts_sf", "l2_acts", "l2_acts_sf")


@dataclass(frozen=True)
class Case:
    num_ranks: int
    num_experts: int
    tokens: int
    topk: int
    hidden: int
    inter: int
    mma_type: str
    ring: int | None = None  # None: the largest ring allowed

    @property
    def id(self) -> str:
        return (f"r{self.num_ranks}-e{self.num_experts}-t{self.tokens}-k{self.topk}-h{self.hidden}-i{self.inter}-"
                f"{self.mma_type}-ring{self.ring}")

    def ring_tokens(self) -> int:
        if self.ring is not None:
            return self.ring
        return expected_ring_limit(self.tokens, self.num_experts // self.num_ranks, self.topk, self.num_ranks)[1]

    def args(self) -> tuple:
        return (self.num_ranks, self.num_experts, self.tokens, self.topk, self.hidden, self.inter, self.mma_type,
                "swiglu", self.ring_tokens())


CASES = [
    Case(1, 8, 384, 2, 256, 128, "fp8xfp4"),
    Case(1, 8, 384, 2, 256, 128, "bf16xbf16"),
    Case(1, 8, 384, 2, 256, 128, "fp8xfp4", ring=384),      # smallest ring: one expert per wave
    Case(4, 16, 768, 6, 384, 256, "fp8xfp4"),               # top-k larger than the local expert count
    Case(2, 2, 384, 1, 128, 384, "bf16xbf16"),             # one local expert, top-1
    Case(2, 6, 1152, 3, 640, 128, "fp8xfp4", ring=2304),
]
CASE_IDS = [c.id for c in CASES]


def expected_ring_limit(tokens: int, local: int, topk: int, ranks: int) -> tuple[int, int]:
    """The spec's formula, written out: (ranks*T, min(ranks*T*E_local, align(ranks*T*topk + 383*E_local, 384)))."""
    received = ranks * tokens
    if local == 1:
        return received, received
    padded = received * topk + 383 * local
    return received, min(received * local, -(-padded // 384) * 384)


def expected_views(case: Case) -> dict[str, tuple[torch.dtype, tuple, tuple]]:
    """(dtype, sizes, strides) of every exported view, derived from the spec's description."""
    fp8 = case.mma_type == "fp8xfp4"
    token = torch.float8_e4m3fn if fp8 else torch.bfloat16
    ring = case.ring_tokens()
    # SF rows of the ring: per candidate BLOCK_M, ring/bm blocks each padded to a multiple of 128 rows.
    sf_ring = 0
    for bm in BLOCK_M_CANDIDATES:
        sf_ring = max(sf_ring, (ring // bm) * (-(-bm // 128) * 128))
    h_sf = case.hidden // 128 if fp8 else 0
    i_sf = case.inter // 128 if fp8 else 0
    t, k = case.tokens, case.topk
    return {
        "x": (token, (t, case.hidden), (case.hidden, 1)),
        "x_sf": (torch.int32, (t, h_sf), (max(h_sf, 1), 1)),
        "topk_idx": (torch.int64, (t, k), (k, 1)),
        "topk_weights": (torch.float32, (t, k), (k, 1)),
        "l1_acts": (token, (ring, case.hidden), (case.hidden, 1)),
        "l1_acts_sf": (torch.int32, (sf_ring, h_sf), (1, sf_ring)),
        "l2_acts": (token, (ring, case.inter), (case.inter, 1)),
        "l2_acts_sf": (torch.int32, (sf_ring, i_sf), (1, sf_ring)),
    }


def _zeros(n: int) -> torch.Tensor:
    return torch.zeros(n, dtype=torch.int8)


# ---- sizes, regions, layout ------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_regions_tile_the_buffer(case):
    num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*case.args())
    plan = mega_buffer.plan_symm_buffer(*case.args())
    assert plan.num_bytes == num_bytes
    regions = sorted(plan.regions, key=lambda r: r.offset)
    assert [r.name for r in regions] == [r.name for r in plan.regions], "regions must be laid out in order"
    cursor = 0
    for r in regions:
        assert r.offset % 128 == 0, f"{r.name} at {r.offset} is not 128-byte aligned"
        assert cursor <= r.offset < cursor + 128, f"{r.name}: gap or overlap before offset {r.offset}"
        cursor = r.end
    assert num_bytes % 128 == 0 and cursor <= num_bytes < cursor + 128
    # The regions hidden from the layout have the sizes the spec's kernel needs.
    ring = case.ring_tokens()
    assert plan.region("l1_topk_weights").nbytes == ring * 4
    assert plan.region("combine").nbytes == case.topk * case.tokens * case.hidden * 2
    assert plan.region("workspace").nbytes >= 128 + case.num_experts * 16


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_exported_views_match_spec(case):
    num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*case.args())
    buf = _zeros(num_bytes)
    views = ops._slice_symm_buffer_for_mega_moe(buf, layout)
    expected = expected_views(case)
    assert len(views) == len(EXPORTED)
    for name, view in zip(EXPORTED, views):
        dtype, sizes, strides = expected[name]
        assert view.dtype == dtype, name
        assert tuple(view.shape) == sizes, name
        if view.numel():
            assert view.stride() == strides, name
    # Through the public legacy pair: None for the scales of SF-free MMA.
    n2, slice_fn = deep_gemm.get_symm_buffer_size_for_mega_moe(*case.args())
    assert n2 == num_bytes
    public = slice_fn(buf)
    for name, view, op_view in zip(EXPORTED, public, views):
        if name.endswith("_sf") and case.mma_type == "bf16xbf16":
            assert view is None
        else:
            assert view.data_ptr() == op_view.data_ptr() and view.shape == op_view.shape


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_views_alias_buffer_at_documented_offsets(case):
    num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*case.args())
    _, slices = mega_buffer.decode_layout(layout)
    buf = _zeros(num_bytes)
    views = ops._slice_symm_buffer_for_mega_moe(buf, layout)
    raw = buf.view(torch.uint8)
    for index, (spec, view) in enumerate(zip(slices, views)):
        if view.numel() == 0:  # SF slices of bf16xbf16: zero bytes (torch reports data_ptr 0 for them)
            continue
        assert view.data_ptr() == buf.data_ptr() + spec.offset
        i, j = view.size(0) - 1, view.size(1) // 2
        item = view.element_size()
        byte_offset = spec.offset + (i * view.stride(0) + j * view.stride(1)) * item
        value = torch.tensor([index + 1]).to(view.dtype)  # non-zero in every dtype; fp8 1.0 = 0x38
        before = raw.clone()
        view[i, j] = value[0]
        changed = (raw != before).nonzero().flatten().tolist()
        assert changed and set(changed) <= set(range(byte_offset, byte_offset + item)), EXPORTED[index]
        assert torch.equal(raw[byte_offset:byte_offset + item], value.view(torch.uint8)), EXPORTED[index]


def test_layout_round_trip_and_format():
    case = CASES[3]
    plan = mega_buffer.plan_symm_buffer(*case.args())
    layout = mega_buffer.encode_layout(plan)
    num_bytes, slices = mega_buffer.decode_layout(layout)
    assert num_bytes == plan.num_bytes
    for spec, region in zip(slices, plan.exported):
        assert (spec.offset, spec.dtype, spec.sizes, spec.strides) == (
            region.offset, region.dtype, region.sizes, region.strides)
    # The format, read by hand: header, then offset / c10 ScalarType number / ndim / sizes / strides.
    assert layout[:3] == [mega_buffer.LAYOUT_VERSION, plan.num_bytes, 8]
    x = plan.region("x")
    assert layout[3:3 + 7] == [x.offset, 24, 2, case.tokens, case.hidden, case.hidden, 1]
    op_bytes, op_layout = ops.get_symm_buffer_size_for_mega_moe(*case.args())
    assert (op_bytes, list(op_layout)) == (plan.num_bytes, layout)


# ---- fake, meta, compile ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [CASES[0], CASES[1]], ids=[CASES[0].id, CASES[1].id])
def test_slice_under_fake_and_meta(case):
    num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*case.args())
    real = ops._slice_symm_buffer_for_mega_moe(_zeros(num_bytes), layout)
    with FakeTensorMode():
        fake_buf = torch.empty(num_bytes, dtype=torch.int8)
        fake = ops._slice_symm_buffer_for_mega_moe(fake_buf, layout)
        meta = [(v.shape, v.stride(), v.dtype, v.storage_offset()) for v in fake]
    assert meta == [(v.shape, v.stride(), v.dtype, v.storage_offset()) for v in real]
    on_meta = ops._slice_symm_buffer_for_mega_moe(torch.empty(num_bytes, dtype=torch.int8, device="meta"), layout)
    assert [(v.shape, v.stride(), v.dtype, v.device.type) for v in on_meta] == [
        (v.shape, v.stride(), v.dtype, "meta") for v in real]


def test_slice_under_torch_compile():
    case = CASES[0]
    num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*case.args())

    def fill(buf: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        x, x_sf, topk_idx, topk_weights, l1, l1_sf, l2, l2_sf = ops._slice_symm_buffer_for_mega_moe(buf, layout)
        topk_idx[: idx.size(0)].copy_(idx)
        topk_weights[: weights.size(0)].copy_(weights)
        l1_sf[:, 0].fill_(7)  # MN-major view: a column is contiguous
        return topk_weights.sum() + x_sf.sum()

    idx = torch.randint(0, case.num_experts, (100, case.topk))
    weights = torch.rand(100, case.topk)
    eager_buf, compiled_buf = _zeros(num_bytes), _zeros(num_bytes)
    expected = fill(eager_buf, idx, weights)
    got = torch.compile(fill, fullgraph=True, backend="aot_eager")(compiled_buf, idx, weights)
    torch.testing.assert_close(got, expected)
    assert torch.equal(compiled_buf, eager_buf)
    assert eager_buf.abs().sum() > 0


def test_opcheck_ops():
    for case in (CASES[0], CASES[1]):
        args = case.args()
        torch.library.opcheck(ops.get_symm_buffer_size_for_mega_moe.default, args)
        num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*args)
        utils = FP8_OPCHECK_UTILS if case.mma_type == "fp8xfp4" else None
        kwargs = {"test_utils": utils} if utils else {}
        torch.library.opcheck(ops._slice_symm_buffer_for_mega_moe.default, (_zeros(num_bytes), layout), **kwargs)
    torch.library.opcheck(ops.get_ring_limit_for_mega_moe.default, (384, 8, 2, 1))
    torch.library.opcheck(ops.get_token_alignment_for_mega_moe.default, ())


def test_schemas_are_the_table():
    for name in ("get_symm_buffer_size_for_mega_moe", "_slice_symm_buffer_for_mega_moe",
                 "get_token_alignment_for_mega_moe", "get_ring_limit_for_mega_moe"):
        schema = str(torch._C._dispatch_find_schema_or_throw(f"deep_gemm::{name}", "").schema())
        assert schema == f"deep_gemm::{SCHEMAS[name]}"


# ---- alignment and ring limits ---------------------------------------------------------------------------------

def test_token_alignment():
    value = deep_gemm.get_token_alignment_for_mega_moe()
    assert value == ops.get_token_alignment_for_mega_moe() == 384
    assert all(value % bm == 0 for bm in BLOCK_M_CANDIDATES)
    assert not any(all(v % bm == 0 for bm in BLOCK_M_CANDIDATES) for v in range(1, value))


def test_ring_limit_formula():
    gen = torch.Generator().manual_seed(1)
    combos = [(384, 1, 1, 1), (384, 8, 2, 1), (4224, 6, 6, 72), (768, 16, 8, 8), (384, 2, 6, 4)]
    for _ in range(40):
        t = 384 * int(torch.randint(1, 12, (), generator=gen))
        combos.append((t, int(torch.randint(1, 40, (), generator=gen)), int(torch.randint(1, 9, (), generator=gen)),
                       int(torch.randint(1, 65, (), generator=gen))))
    for combo in combos:
        expected = expected_ring_limit(*combo)
        assert deep_gemm.get_ring_limit_for_mega_moe(*combo) == expected, combo
        assert tuple(ops.get_ring_limit_for_mega_moe(*combo)) == expected, combo
        assert expected[0] % 384 == 0 and expected[1] % 384 == 0


@pytest.mark.parametrize("args, pattern", [
    ((0, 8, 2, 1), r"num_max_tokens_per_rank: expected a positive integer, got 0"),
    ((100, 8, 2, 1), r"num_max_tokens_per_rank: expected a multiple of 384.*got 100"),
    ((384, 0, 2, 1), r"num_local_experts: expected a positive integer, got 0"),
    ((384, 8, 0, 1), r"num_topk: expected a positive integer, got 0"),
    ((384, 8, 2, -1), r"num_ranks: expected a positive integer, got -1"),
])
def test_ring_limit_errors(args, pattern):
    with pytest.raises(DeepGEMMError, match=pattern):
        deep_gemm.get_ring_limit_for_mega_moe(*args)
    with pytest.raises(DeepGEMMError, match=pattern):
        ops.get_ring_limit_for_mega_moe(*args)


_GOOD = dict(num_ranks=1, num_experts=8, num_max_tokens_per_rank=384, num_topk=2, hidden=256,
             intermediate_hidden=128, mma_type="fp8xfp4", activation="swiglu", num_ring_tokens=3072)


@pytest.mark.parametrize("change, pattern", [
    (dict(num_ranks=0), r"num_ranks: expected a positive integer, got 0"),
    (dict(num_experts=0), r"num_experts: expected a positive integer, got 0"),
    (dict(num_ranks=3), r"num_experts: expected a multiple of num_ranks \(3\), got 8"),
    (dict(num_topk=9), r"num_topk: expected at most num_experts \(8\), got 9"),
    (dict(num_topk=0), r"num_topk: expected a positive integer, got 0"),
    (dict(hidden=200), r"hidden: expected a multiple of 128, got 200"),
    (dict(intermediate_hidden=-128), r"intermediate_hidden: expected a positive integer, got -128"),
    (dict(intermediate_hidden=64), r"intermediate_hidden: expected a multiple of 128, got 64"),
    (dict(mma_type="fp8xfp8"), r"mma_type: expected one of fp8xfp4, bf16xbf16, got 'fp8xfp8'"),
    (dict(activation="gelu"), r"activation: expected 'swiglu'.*got 'gelu'"),
    (dict(num_max_tokens_per_rank=400), r"num_max_tokens_per_rank: expected a multiple of 384.*got 400"),
    (dict(num_ring_tokens=1000), r"num_ring_tokens: expected a multiple of 384.*got 1000"),
    (dict(num_ring_tokens=3456), r"num_ring_tokens: expected a value in \[384, 3072\].*got 3456"),
    (dict(num_ranks=2, num_ring_tokens=384), r"num_ring_tokens: expected a value in \[768, 3072\].*got 384"),
])
def test_size_errors(change, pattern):
    args = tuple({**_GOOD, **change}.values())
    with pytest.raises(DeepGEMMError, match=pattern):
        ops.get_symm_buffer_size_for_mega_moe(*args)
    with pytest.raises(DeepGEMMError, match=pattern):
        deep_gemm.get_symm_buffer_size_for_mega_moe(*args)


def test_slice_errors():
    num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(*_GOOD.values())
    layout = list(layout)
    buf = _zeros(num_bytes)
    snapshot = buf.clone()
    bad = [
        (buf, [], r"layout: expected a Mega MoE layout of version 1.*got version an empty list"),
        (buf, [7] + layout[1:], r"layout: expected a Mega MoE layout of version 1.*got version 7"),
        (buf, layout[:-1], r"layout: .*truncated"),
        (buf, layout + [0], r"layout: 1 trailing values after 8 slices"),
        (buf, layout[:4] + [99] + layout[5:], r"layout: slice 0 has unknown dtype code 99"),
        (buf, layout[:1] + [1024] + layout[2:], r"layout: slice 0 .* lies outside the 1024-byte buffer"),
        (buf, layout[:3] + [layout[3] + 1] + layout[4:], r"layout: slice 0 .* misaligned"),
        (buf, layout[:8] + [1, 256] + layout[10:], r"layout: slice 0 strides \(1, 256\) are not a permutation"),
        (buf[:-128], layout, rf"buffer: expected at least {num_bytes} bytes.*got {num_bytes - 128}"),
        (buf.view(torch.uint8), layout, r"buffer: expected dtype int8, got uint8"),
        (buf.view(2, -1), layout, r"buffer: expected a 1-D tensor"),
        (torch.zeros(2 * num_bytes, dtype=torch.int8)[::2], layout, r"buffer: expected a contiguous tensor"),
    ]
    for buffer, lay, pattern in bad:
        with pytest.raises(DeepGEMMError, match=pattern):
            ops._slice_symm_buffer_for_mega_moe(buffer, lay)
    assert torch.equal(buf, snapshot)


# ---- SymmBuffer ------------------------------------------------------------------------------------------------

def test_symm_buffer_single_process():
    sym = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, num_ring_tokens=3072, device="cpu")
    num_bytes, slice_fn = deep_gemm.get_symm_buffer_size_for_mega_moe(1, 8, 384, 2, 256, 128, "fp8xfp4",
                                                                      "swiglu", 3072)
    assert sym.buffer.dtype == torch.int8 and sym.buffer.numel() == num_bytes
    assert not sym.buffer.any()
    assert sym.handle.buffer_ptrs == [sym.buffer.data_ptr()]
    assert (sym.num_ranks, sym.rank_idx, sym.num_experts, sym.num_max_tokens_per_rank, sym.num_topk, sym.hidden,
            sym.intermediate_hidden, sym.num_ring_tokens, sym.mma_type) == (
        1, 0, 8, 384, 2, 256, 128, 3072, "fp8xfp4")
    for name, expected in zip(EXPORTED, slice_fn(sym.buffer)):
        view = getattr(sym, name)
        assert (view.data_ptr(), view.shape, view.stride(), view.dtype) == (
            expected.data_ptr(), expected.shape, expected.stride(), expected.dtype)
    sym.topk_idx[3, 1] = 5
    assert sym.buffer.any()
    sym.destroy()
    assert sym.buffer is None and sym.handle is None and sym.x is None and sym.l2_acts_sf is None


def test_symm_buffer_group_of_one_and_bf16():
    group = types.SimpleNamespace(size=lambda: 1, rank=lambda: 0)
    sym = deep_gemm.SymmBuffer(group, 8, 384, 2, 256, 128, num_ring_tokens=3072, mma_type="bf16xbf16", device="cpu")
    assert sym.x.dtype == torch.bfloat16 and sym.x_sf is None and sym.l1_acts_sf is None and sym.l2_acts_sf is None


def test_symm_buffer_several_ranks_needs_symmetric_memory():
    # A real multi-rank buffer needs CUDA, symmetric memory and an initialised process group: not available here.
    group = types.SimpleNamespace(size=lambda: 2, rank=lambda: 1)
    if torch.cuda.is_available():
        pytest.skip("needs a multi-process launch on a CUDA machine")
    with pytest.raises(DeepGEMMError, match=r"group: .*2 ranks"):
        deep_gemm.SymmBuffer(group, 8, 384, 2, 256, 128, num_ring_tokens=3072)


def test_symm_buffer_takes_deepgemms_arguments_in_order():
    """DeepGEMM 0.2.3's order: (group, experts, tokens, top-k, hidden, intermediate, num_shared_experts, mma_type,
    activation, base); the token capacity is aligned to 384 and the ring is DeepGEMM's choice unless asked for."""
    sym = deep_gemm.SymmBuffer(None, 8, 100, 2, 256, 128, 1, "bf16xbf16", "swiglu", None, device="cpu")
    chosen = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 100, 2, 256, 128, 1, mma_type="bf16xbf16",
                                                    device="cpu")
    assert (sym.num_max_tokens_per_rank, sym.num_shared_experts, sym.mma_type, sym.activation) == (
        384, 1, "bf16xbf16", "swiglu")
    assert (sym.num_ring_tokens, sym.buffer.numel()) == (chosen.num_ring_tokens, chosen.buffer.numel())
    with pytest.raises(DeepGEMMError, match=r"num_shared_experts: expected a non-negative integer, got -1"):
        deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, -1, device="cpu")
    with pytest.raises(DeepGEMMError, match=r"num_max_tokens_per_rank: expected a positive integer, got 0"):
        deep_gemm.SymmBuffer(None, 8, 0, 2, 256, 128, device="cpu")


def test_symm_buffer_reuses_a_base_buffer():
    base = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, num_ring_tokens=3072, device="cpu")
    base.buffer.fill_(7)  # (a reused buffer is not zeroed again)
    small = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, 0, "bf16xbf16", base=base, num_ring_tokens=384)
    assert small.buffer is base.buffer and small.handle is base.handle
    assert small.buffer.numel() >= deep_gemm.get_symm_buffer_size_for_mega_moe(
        1, 8, 384, 2, 256, 128, "bf16xbf16", "swiglu", 384)[0]
    assert small.x.dtype == torch.bfloat16
    assert small.x.untyped_storage().data_ptr() == base.buffer.untyped_storage().data_ptr()
    assert bool((small.buffer == 7).all())
    small.destroy()
    assert small.buffer is None and base.buffer is not None and base.x is not None
    with pytest.raises(DeepGEMMError, match=r"base: this configuration needs \d+ bytes, the base buffer has \d+"):
        deep_gemm.SymmBuffer(None, 8, 384, 2, 512, 128, base=base, num_ring_tokens=3072)  # (twice the hidden)
    with pytest.raises(DeepGEMMError, match=r"base: expected a SymmBuffer of the same process group"):
        deep_gemm.SymmBuffer(types.SimpleNamespace(size=lambda: 1, rank=lambda: 0), 8, 384, 2, 256, 128,
                             base=base, num_ring_tokens=3072)
    assert deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, base=base, num_ring_tokens=3072,
                                device="cpu").buffer is base.buffer
    with pytest.raises(DeepGEMMError, match=r"device: expected the base buffer's device \(cpu\), got meta"):
        deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, base=base, num_ring_tokens=3072, device="meta")
    with pytest.raises(DeepGEMMError, match=r"base: expected a SymmBuffer, got Tensor"):
        deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, base=base.buffer, num_ring_tokens=3072)
    base.destroy()
    with pytest.raises(DeepGEMMError, match=r"base: expected a live SymmBuffer, got one that was destroyed"):
        deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, base=base, num_ring_tokens=3072)


def test_cpu_group_of_a_shared_buffer_outlives_the_first_destroy():
    from deep_gemm.mega import reference
    buf, group = torch.zeros(8, dtype=torch.int8), object()
    reference.register_cpu_group(buf, group)
    reference.register_cpu_group(buf, group)  # (a second SymmBuffer on the same storage, built on a base)
    reference.unregister_cpu_group(buf)
    assert reference.group_of(buf, 2) is group
    reference.unregister_cpu_group(buf)
    with pytest.raises(DeepGEMMError, match=r"its process group is unknown"):
        reference.group_of(buf, 2)


def test_get_symm_buffer_for_mega_moe_ring_choice():
    sym = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 100, 2, 256, 128, device="cpu")
    assert sym.num_max_tokens_per_rank == 384
    assert sym.num_ring_tokens == expected_ring_limit(384, 8, 2, 1)[1]  # decode ring clamped to the max
    # Decode-sized reference ring: 4224 tokens, 6 local experts, top-6, 72 ranks.
    decode_ring = expected_ring_limit(4224, 6, 6, 72)[1]
    sym = deep_gemm.get_symm_buffer_for_mega_moe(None, 512, 384, 8, 128, 128, device="cpu")
    assert sym.num_ring_tokens == min(max(decode_ring, 384), expected_ring_limit(384, 512, 8, 1)[1])
    with pytest.warns(DeprecationWarning, match="use_fp8_dispatch"):
        sym = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 384, 2, 256, 128, use_fp8_dispatch=True,
                                                     device="cpu")
    with pytest.raises(DeepGEMMError, match=r"use_fp8_dispatch: False contradicts mma_type='fp8xfp4'"):
        deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 384, 2, 256, 128, use_fp8_dispatch=False)
    with pytest.raises(DeepGEMMError, match=r"num_experts: expected a positive multiple of the group size"):
        deep_gemm.get_symm_buffer_for_mega_moe(types.SimpleNamespace(size=lambda: 3, rank=lambda: 0),
                                               8, 384, 2, 256, 128)


def test_prefill_ring_is_clamped():
    # 6144 tokens per rank is prefill-sized: 768 Ki ring tokens, clamped to this tiny deployment's maximum.
    expected = min(max(768 * 1024, 6144), expected_ring_limit(6144, 2, 1, 1)[1])
    low, high = deep_gemm.get_ring_limit_for_mega_moe(6144, 2, 1, 1)
    assert expected == high and low == 6144


# ---- weight transform ------------------------------------------------------------------------------------------

def bitwise(x: torch.Tensor, y: torch.Tensor) -> None:
    # Flattened first: assert_bitwise_equal cannot byte-view a tensor whose size-1 last dim has a stride != 1.
    assert x.shape == y.shape
    assert_bitwise_equal(x.reshape(-1), y.reshape(-1))


def loop_interleave(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(t)
    half = t.size(1) // 2
    row = 0
    for chunk in range(half // 8):
        for part in (0, 1):  # gate, then up
            for i in range(8):
                out[:, row] = t[:, part * half + chunk * 8 + i]
                row += 1
    return out


def loop_utccp(sf: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(sf)
    for base in range(0, sf.size(1), 128):
        for q in range(4):
            for p in range(32):
                out[:, base + 4 * p + q] = sf[:, base + 32 * q + p]
    return out


@pytest.mark.parametrize("experts, inter, k", [(1, 8, 32), (3, 24, 64), (2, 64, 256)])
def test_transform_bf16(experts, inter, k):
    l1 = torch.randn(experts, 2 * inter, k).bfloat16()
    l2 = torch.randn(experts, k, inter).bfloat16()
    l1_copy = l1.clone()
    out1, out2 = deep_gemm.transform_weights_for_mega_moe(l1, l2)
    bitwise(out1, loop_interleave(l1))
    assert out2 is l2 and torch.equal(l1, l1_copy)
    assert out1.data_ptr() != l1.data_ptr()


@pytest.mark.parametrize("fp4", [False, True])
def test_transform_fp8_fp4(fp4):
    experts, inter, hidden = 2, 64, 256
    if fp4:
        l1 = torch.randint(-128, 128, (experts, 2 * inter, hidden // 2), dtype=torch.int8)
        l2 = torch.randint(-128, 128, (experts, hidden, inter // 2), dtype=torch.int8)
    else:
        l1 = torch.randn(experts, 2 * inter, hidden).to(torch.float8_e4m3fn)
        l2 = torch.randn(experts, hidden, inter).to(torch.float8_e4m3fn)
    l1_sf = torch.randint(0, 2**31 - 1, (experts, 2 * inter, hidden // 128), dtype=torch.int32)
    # An MN-major SF (DeepGEMM's TMA-aligned layout): the output must keep the strides.
    l2_sf = torch.randint(0, 2**31 - 1, (experts, inter // 128 + 1, hidden), dtype=torch.int32).transpose(1, 2)
    inputs = [t.clone() for t in (l1, l1_sf, l2, l2_sf)]
    (o1, o1_sf), (o2, o2_sf) = deep_gemm.transform_weights_for_mega_moe((l1, l1_sf), (l2, l2_sf))
    bitwise(o1, loop_interleave(l1))
    bitwise(o1_sf, loop_utccp(loop_interleave(l1_sf)))
    bitwise(o2_sf, loop_utccp(l2_sf))
    assert o2_sf.stride() == l2_sf.stride()
    assert o2 is l2
    for before, after in zip(inputs, (l1, l1_sf, l2, l2_sf)):
        bitwise(after, before)


def test_transform_errors():
    l1 = torch.zeros(2, 32, 128, dtype=torch.bfloat16)
    l2 = torch.zeros(2, 128, 16, dtype=torch.bfloat16)
    sf = torch.zeros(2, 32, 1, dtype=torch.int32)
    sf128 = torch.zeros(2, 128, 1, dtype=torch.int32)
    l1_128 = torch.zeros(2, 128, 128, dtype=torch.bfloat16)
    cases = [
        ((l1, l2, "gelu"), r"activation: expected 'swiglu'.*got 'gelu'"),
        (((l1, sf), l2), r"l1_weights, l2_weights: expected both \(data, sf\) pairs .* got tuple and Tensor"),
        ((l1[:, :24], l2), r"l1_weights: expected dim 1 .* multiple of 16, got 24"),
        ((l1[None], l2), r"l1_weights: expected a 2-D or 3-D tensor, got shape \(1, 2, 32, 128\)"),
        (((l1_128, sf128[:1]), (l2, sf128)), r"l1_weights\[1\]: expected \(2, 128\) in the leading dims"),
        (((l1, sf), (l2, sf128)), r"l1_weights\[1\]: expected dim 1 to be a multiple of 128, got 32"),
        (((l1, sf128), (l2, sf)), r"l2_weights\[1\]: expected dim 1 to be a multiple of 128, got 32"),
        (((l1, sf.float()), (l2, sf)), r"l1_weights\[1\]: expected dtype int32, got float32"),
        (((l1, sf128[None]), (l2, sf128)), r"l1_weights\[1\]: expected a 2-D or 3-D tensor"),
    ]
    for args, pattern in cases:
        with pytest.raises(DeepGEMMError, match=pattern):
            deep_gemm.transform_weights_for_mega_moe(*args)


# ---- the fused layers: argument checks (results: test_mega_moe_cpu.py) ------------------------------------------

def _fp8_setup():
    sym = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, num_ring_tokens=3072, device="cpu")
    l1 = (torch.zeros(8, 256, 128, dtype=torch.int8), torch.zeros(8, 256, 2, dtype=torch.int32))
    l2 = (torch.zeros(8, 256, 64, dtype=torch.int8), torch.zeros(8, 256, 1, dtype=torch.int32))
    y = torch.zeros(100, 256, dtype=torch.bfloat16)
    return y, l1, l2, sym


def test_fp8_fp4_mega_moe_validates_then_runs_the_reference():
    y, l1, l2, sym = _fp8_setup()
    stats = torch.zeros(8, dtype=torch.int32)
    deep_gemm.fp8_fp4_mega_moe(y, l1, l2, sym, cumulative_local_expert_recv_stats=stats)
    # A zeroed buffer routes both slots of every token to expert 0, with zero tokens and zero weights.
    assert not y.any() and stats.tolist() == [200] + [0] * 7
    stats.zero_()
    bad = [
        (dict(recipe=(1, 1, 128)), r"recipe: expected \(1, 1, 32\)"),
        (dict(activation="relu"), r"activation: expected 'swiglu'"),
        (dict(activation_clamp=-1.0), r"activation_clamp: expected None or a value >= 0, got -1.0"),
        (dict(y=torch.zeros(400, 256, dtype=torch.bfloat16)), r"y: expected at most num_max_tokens_per_rank \(384\)"),
        (dict(y=y.float()), r"y: expected dtype bfloat16, got float32"),
        (dict(l1=(l1[0][:, :128], l1[1])), r"l1_weights: expected shape \(8, 256, 128\)"),
        (dict(l2=(l2[0].bfloat16(), l2[1])), r"l2_weights: expected dtype float8_e4m3fn or int8, got bfloat16"),
        (dict(l1=(l1[0], l1[1][..., :1])), r"l1_weights_sf: expected shape \(8, 256, 2\)"),
        (dict(stats=torch.zeros(4, dtype=torch.int32)), r"cumulative_local_expert_recv_stats: .*8 elements"),
        (dict(stats=torch.zeros(8, dtype=torch.int64)), r"cumulative_local_expert_recv_stats: expected dtype int32"),
        (dict(y=torch.zeros(100, 256, dtype=torch.bfloat16, device="meta")), r"y: expected device cpu"),
        (dict(sym=object()), r"sym_buffer: fp8_fp4_mega_moe expects a SymmBuffer, got object"),
        (dict(l1=l1[0]), r"l1_weights: expected a \(data, scale\) pair, got Tensor"),
    ]
    y.fill_(1.0)
    for change, pattern in bad:
        args = dict(y=y, l1=l1, l2=l2, sym=sym, stats=stats, recipe=(1, 1, 32), activation="swiglu",
                    activation_clamp=None)
        args.update(change)
        with pytest.raises(DeepGEMMError, match=pattern):
            deep_gemm.fp8_fp4_mega_moe(args["y"], args["l1"], args["l2"], args["sym"],
                                       cumulative_local_expert_recv_stats=args["stats"], recipe=args["recipe"],
                                       activation=args["activation"], activation_clamp=args["activation_clamp"])
    assert (y == 1.0).all() and not stats.any()
    sym.destroy()
    with pytest.raises(DeepGEMMError, match=r"sym_buffer: the buffer was destroyed"):
        deep_gemm.fp8_fp4_mega_moe(y, l1, l2, sym)


def test_bf16_mega_moe_validates_then_runs_the_reference():
    sym = deep_gemm.SymmBuffer(None, 8, 384, 2, 256, 128, num_ring_tokens=3072, mma_type="bf16xbf16", device="cpu")
    l1 = torch.zeros(8, 256, 256, dtype=torch.bfloat16)
    l2 = torch.zeros(8, 256, 128, dtype=torch.bfloat16)
    y = torch.ones(10, 256, dtype=torch.bfloat16)
    deep_gemm.bf16_mega_moe(y, l1, l2, sym)
    assert not y.any()
    y.fill_(1.0)
    with pytest.raises(DeepGEMMError, match=r"l2_weights: expected a contiguous tensor"):
        deep_gemm.bf16_mega_moe(y, l1, torch.zeros(8, 128, 256, dtype=torch.bfloat16).transpose(1, 2), sym)
    with pytest.raises(DeepGEMMError, match=r"sym_buffer: bf16_mega_moe needs a buffer built with "
                                            r"mma_type='bf16xbf16', got 'fp8xfp4'"):
        deep_gemm.bf16_mega_moe(y, l1, l2, _fp8_setup()[3])
    assert (y == 1.0).all()


def test_exports():
    assert set(deep_gemm.mega.__all__) >= {"SymmBuffer", "get_symm_buffer_for_mega_moe",
                                           "transform_weights_for_mega_moe", "fp8_fp4_mega_moe", "bf16_mega_moe"}
    assert "_slice_symm_buffer_for_mega_moe" not in deep_gemm.mega.__all__
    assert deep_gemm.SymmBuffer is deep_gemm.mega.SymmBuffer
    assert math.lcm(*BLOCK_M_CANDIDATES) == 384


def test_size_and_slice_in_one_compiled_graph():
    # Ops returning tuples of ints trace under fullgraph (Dynamo evaluates them while tracing: they are pure).
    def fn(buf: torch.Tensor) -> torch.Tensor:
        num_bytes, layout = ops.get_symm_buffer_size_for_mega_moe(1, 8, 384, 2, 256, 128, "bf16xbf16", "swiglu",
                                                                  3072)
        low, high = ops.get_ring_limit_for_mega_moe(384, 8, 2, 1)
        x = ops._slice_symm_buffer_for_mega_moe(buf, layout)[0]
        x.fill_(1.5)
        return x.float().sum() + num_bytes + high - low

    eager_buf = _zeros(ops.get_symm_buffer_size_for_mega_moe(*CASES[1].args())[0])
    compiled_buf = eager_buf.clone()
    expected = fn(eager_buf)
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(compiled_buf)
    torch.testing.assert_close(got, expected)
    assert torch.equal(compiled_buf, eager_buf)
