"""The Mega MoE layer on CPU, one process: the reference against an independent float64 per-token loop, the
pre-dispatch ops, the SM90 buffer, argument errors (raised before anything is written) and the ops' registration.

Multi-rank runs (gloo) are in test_mega_moe_gloo.py; both build their scenarios with mega_moe_cases.py.
"""

from __future__ import annotations

import math

import pytest
import torch

import deep_gemm
from deep_gemm import _C
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.core.schemas import SCHEMAS
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_token_cast_to_fp8, unpack_ue8m0_from_int

from mega_moe_cases import CAPACITY, Scenario, build_global, fill_buffer, local_weights, make_buffer, run_and_expect

ops = torch.ops.deep_gemm
TOLERANCE = 0.01


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Hundreds of small float64 mat-vecs: with threads on a loaded 2-core machine each costs ~50x more.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

SCENARIOS = [
    # SM90 FP8 (fp8_mega_moe, what SGLang calls on Hopper): top-k, hidden, masks, clamps, fast math
    *[Scenario("sm90", tokens=(24,), topk=k) for k in (1, 2, 4, 6, 8)],
    Scenario("sm90", tokens=(12,), hidden=2048, inter=256, topk=6, clamp=10.0),
    *[Scenario("sm90", tokens=(24,), topk=4, masked=m) for m in (0.3, 0.7, 1.0)],
    *[Scenario("sm90", tokens=(20,), topk=2, clamp=c, fast_math=f)
      for c, f in ((1.0, True), (10.0, False), (math.inf, True), (None, False))],
    Scenario("sm90", tokens=(0,)),
    Scenario("sm90", tokens=(0,), y_rows=1),                  # SGLang's y of max(num_tokens, 1) rows
    Scenario("sm90", tokens=(CAPACITY,), hidden=512, inter=128, topk=2, masked=0.3),
    Scenario("sm90", tokens=(16,), num_experts=16, topk=4, idle_experts=True),
    # SM100-style FP8 x FP4 and BF16
    Scenario("fp8fp4", tokens=(16,), topk=2, clamp=10.0),
    Scenario("fp8fp4", tokens=(12,), topk=6, masked=0.3, fast_math=False),
    Scenario("fp8fp4", tokens=(10,), topk=2, shared=1),
    Scenario("fp8fp4", tokens=(10,), topk=4, masked=0.3, post_norm="weight"),
    Scenario("fp8fp4", tokens=(0,), topk=2),
    Scenario("fp8fp4", tokens=(12,), topk=4, clamp=10.0, fp8_weights=True),
    Scenario("bf16", tokens=(16,), topk=4, masked=0.3),
    Scenario("bf16", tokens=(10,), hidden=2048, topk=2, clamp=1.0, shared=2),
    Scenario("bf16", tokens=(10,), topk=2, post_norm="plain"),
    Scenario("bf16", tokens=(10,), topk=4, post_norm="weight_first"),
]


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_layer_matches_per_token_loop(sc):
    y, stats, expected, expected_stats = run_and_expect(sc, None, 0)
    assert y.shape == expected.shape and y.dtype == torch.bfloat16
    assert torch.isfinite(y.float()).all()
    assert calc_diff(y, expected) < TOLERANCE
    assert torch.equal(stats, expected_stats)
    # Tokens whose slots are all masked (and without shared experts) come out exactly zero.
    data = build_global(sc)
    idx = data.topk_idx[0]
    if sc.shared == 0 and idx.size(0):
        silent = (idx < 0).all(dim=1)
        assert not y[:idx.size(0)][silent].any()
    if sc.y_rows is not None:
        assert not y.any()


def test_stats_accumulate_over_calls():
    sc = Scenario("sm90", tokens=(20,), topk=4)
    data = build_global(sc)
    buf = make_buffer(sc, None)
    fill_buffer(sc, data, buf, 0)
    l1, l2 = local_weights(sc, data, 0)
    stats = torch.zeros(8, dtype=torch.int32)
    y = torch.empty(20, 512, dtype=torch.bfloat16)
    deep_gemm.fp8_mega_moe(y, l1, l2, buf, stats)
    first = stats.clone()
    deep_gemm.fp8_mega_moe(y, l1, l2, buf, stats)
    assert torch.equal(stats, 2 * first)
    assert int(first.sum()) == int((data.topk_idx[0] >= 0).sum())


def test_sm90_clamp_changes_the_result():
    base = Scenario("sm90", tokens=(16,), topk=2)
    y_none = run_and_expect(base, None, 0)[0]
    y_one = run_and_expect(Scenario("sm90", tokens=(16,), topk=2, clamp=1.0), None, 0)[0]
    y_inf = run_and_expect(Scenario("sm90", tokens=(16,), topk=2, clamp=math.inf), None, 0)[0]
    assert torch.equal(y_none, y_inf)
    assert calc_diff(y_none, y_one) > 1e-3


# ---- pre-dispatch ---------------------------------------------------------------------------------------------

def test_pre_dispatch_sm90_contents():
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 10, 3, 256, 128, device="cpu")
    x = torch.randn(7, 256).bfloat16()
    x[2] = 0  # an all-zero token: scale floor, no NaN
    idx = torch.randint(0, 8, (9, 3), dtype=torch.int32)
    weights = torch.rand(9, 3)
    buf.topk_idx.fill_(5)
    buf.topk_weights.fill_(3.0)
    deep_gemm.mega_moe_pre_dispatch_sm90(x, idx, weights, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights,
                                         num_tokens=5, routed_scaling_factor=2.5)
    groups = x[:5].float().view(5, 2, 128)
    scale = groups.abs().amax(-1).clamp(min=1e-10) / 448
    assert torch.equal(buf.x_sf[:5], scale)
    expected = (groups / scale.unsqueeze(-1)).view(5, 256).to(torch.float8_e4m3fn)
    assert torch.equal(buf.x[:5].view(torch.uint8), expected.view(torch.uint8))
    assert torch.equal(buf.topk_idx[:5], idx[:5].long())
    assert torch.equal(buf.topk_weights[:5], weights[:5] * 2.5)
    assert (buf.topk_idx[5:] == -1).all() and not buf.topk_weights[5:].any()
    assert not buf.x[5:].view(torch.uint8).any()   # rows past num_tokens are not written
    dequant = buf.x[:5].float() * buf.x_sf[:5].repeat_interleave(128, 1)
    assert calc_diff(dequant, x[:5].float()) < 1e-3


def test_pre_dispatch_mx_contents():
    buf = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 10, 2, 256, 128, device="cpu")
    x = torch.randn(6, 256).bfloat16()
    idx = torch.tensor([[0, 3], [-1, 7], [2, -1], [1, 1], [4, 5], [6, 0]], dtype=torch.int64)
    weights = torch.rand(6, 2)
    scales = torch.rand(8) + 0.5
    deep_gemm.mega_moe_pre_dispatch(x, idx, weights, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, 6,
                                    expert_scales=scales)
    q, sf = per_token_cast_to_fp8(x.float(), use_ue8m0=True, gran_k=32, use_packed_ue8m0=True)
    assert torch.equal(buf.x[:6].view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(buf.x_sf[:6], sf)
    expected = torch.where(idx >= 0, weights * scales[idx.clamp(min=0)], weights)
    assert torch.equal(buf.topk_weights[:6], expected)
    assert (buf.topk_idx[6:] == -1).all()
    dequant = buf.x[:6].float() * unpack_ue8m0_from_int(buf.x_sf[:6]).repeat_interleave(32, 1)
    assert calc_diff(dequant, x.float()) < 1e-3


def test_pre_dispatch_errors_write_nothing():
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 10, 2, 256, 128, device="cpu")
    x, idx, w = torch.randn(4, 256).bfloat16(), torch.zeros(4, 2, dtype=torch.int32), torch.rand(4, 2)
    views = (buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights)
    snapshot = buf.buffer.clone()
    bad = [
        (dict(num_tokens=385), r"num_tokens: expected a value in \[0, 384\]"),
        (dict(num_tokens=5), r"x: expected at least num_tokens \(5\) rows"),
        (dict(group_size=64), r"group_size: .*expected 128"),
        (dict(x=torch.randn(4, 200).bfloat16()), r"x: expected hidden \(dim 1\) to be a multiple of 128"),
        (dict(x=torch.randn(4, 256)), r"x: expected dtype bfloat16"),
        (dict(buf_x_sf=buf.x_sf[:, :1]), r"buf_x_sf: expected shape"),
    ]
    for change, pattern in bad:
        args = dict(x=x, topk_idx=idx, topk_weights=w, buf_x=views[0], buf_x_sf=views[1], buf_topk_idx=views[2],
                    buf_topk_weights=views[3], num_tokens=4)
        args.update(change)
        with pytest.raises(DeepGEMMError, match=pattern):
            deep_gemm.mega_moe_pre_dispatch_sm90(**args)
    with pytest.raises(DeepGEMMError, match=r"group_size: expected 32"):
        mx = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 10, 2, 256, 128, device="cpu")
        deep_gemm.mega_moe_pre_dispatch(x, idx, w, mx.x, mx.x_sf, mx.topk_idx, mx.topk_weights, 4, 128)
    assert torch.equal(buf.buffer, snapshot)


# ---- the SM90 buffer and the API surface --------------------------------------------------------------------

def test_sm90_buffer_views_and_routing():
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 100, 6, 512, 256, device="cpu")
    assert buf.num_max_tokens_per_rank == 384 and not buf.buffer.any()
    assert buf.buffer.numel() == ops.get_symm_buffer_size_for_sm90_mega_moe(1, 8, 384, 6, 512, 256, True, "swiglu")
    assert (buf.x.dtype, tuple(buf.x.shape)) == (torch.float8_e4m3fn, (384, 512))
    assert (buf.x_sf.dtype, tuple(buf.x_sf.shape), buf.x_sf.stride()) == (torch.float32, (384, 4), (4, 1))
    assert (buf.topk_idx.dtype, tuple(buf.topk_idx.shape)) == (torch.int64, (384, 6))
    assert (buf.topk_weights.dtype, tuple(buf.topk_weights.shape)) == (torch.float32, (384, 6))
    assert buf.l1_acts_sf.stride(0) == 1 and buf.l2_acts_sf.size(1) == 256 // 64
    views = _C.slice_symm_buffer_for_sm90_mega_moe(buf.buffer, 1, 8, 384, 6, 512, 256, True, "swiglu")
    assert [v.data_ptr() for v in views] == [getattr(buf, n).data_ptr() for n in
                                             ("x", "x_sf", "topk_idx", "topk_weights", "l1_acts", "l1_acts_sf",
                                              "l2_acts", "l2_acts_sf")]
    buf.destroy()
    assert buf.buffer is None and buf.x is None
    with pytest.raises(DeepGEMMError, match=r"use_fp8_dispatch"):
        deep_gemm.SM90SymmBuffer(None, 8, 384, 2, 512, 256, False, device="cpu")
    with pytest.raises(DeepGEMMError, match=r"hidden: expected a multiple of 128, got 200"):
        deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 384, 2, 200, 256, device="cpu")
    # On CPU (or any non-Hopper device) get_symm_buffer_for_mega_moe keeps the SM100-style buffer.
    other = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 384, 2, 512, 256, 1, device="cpu")
    assert isinstance(other, deep_gemm.SymmBuffer) and other.num_shared_experts == 1


def test_transform_weights_for_sm90_interleaves_data_only():
    data = torch.arange(2 * 32 * 128, dtype=torch.float32).view(2, 32, 128).to(torch.float8_e4m3fn)
    sf = torch.rand(2, 1, 1)
    l2 = (torch.zeros(2, 128, 16, dtype=torch.float8_e4m3fn), torch.rand(2, 1, 1))
    (l1_out, sf_out), l2_out = deep_gemm.transform_weights_for_mega_moe_sm90((data, sf), l2)
    assert sf_out is sf and l2_out is l2
    rows = [*range(0, 8), *range(16, 24), *range(8, 16), *range(24, 32)]
    assert torch.equal(l1_out.view(torch.uint8), data[:, rows].view(torch.uint8))


def test_transform_scales_packed_fp4_order():
    sf = torch.arange(256, dtype=torch.int32).view(1, 256, 1)
    l1_sf, l2_sf = deep_gemm.transform_scales_for_mega_moe(sf, sf.clone())
    # packed interleave: per 16 gate and 16 up rows, [gate even, up even, gate odd, up odd]
    half = 128
    order = []
    for c in range(half // 16):
        g, u = list(range(c * 16, c * 16 + 16)), list(range(half + c * 16, half + c * 16 + 16))
        order += g[0::2] + u[0::2] + g[1::2] + u[1::2]
    interleaved = sf[:, order]
    utccp = interleaved.view(1, 2, 4, 32, 1).transpose(2, 3).reshape(1, 256, 1)
    assert torch.equal(l1_sf, utccp)
    assert torch.equal(l2_sf, sf.view(1, 2, 4, 32, 1).transpose(2, 3).reshape(1, 256, 1))


def test_block_m():
    assert deep_gemm.get_block_m_for_mega_moe(1, 8, 384, 100, 2) == 32
    assert deep_gemm.get_block_m_for_mega_moe(1, 8, 384, 0, 2) == 8
    assert deep_gemm.get_block_m_for_mega_moe(8, 256, 384, 384, 8) == 96
    assert deep_gemm.get_block_m_for_mega_moe(1, 8, 384, 384, 8) == 192
    assert deep_gemm.get_block_m_for_mega_moe(2, 8, 384, 1, 2, global_num_tokens=700) == 192
    with pytest.raises(DeepGEMMError, match=r"global_num_tokens: expected a value in \[0, 768\]"):
        deep_gemm.get_block_m_for_mega_moe(2, 8, 384, 1, 2, global_num_tokens=769)


def test_exports_and_c_names():
    for name in ("fp8_mega_moe", "SM90SymmBuffer", "get_symm_buffer_for_sm90_mega_moe",
                 "transform_weights_for_mega_moe_sm90", "transform_scales_for_mega_moe", "mega_moe_pre_dispatch",
                 "mega_moe_pre_dispatch_sm90", "get_block_m_for_mega_moe", "nvfp4_mega_moe"):
        assert name in deep_gemm.__all__ and callable(getattr(deep_gemm, name))
    for name in ("fp8_mega_moe", "fp8_fp4_mega_moe", "bf16_mega_moe", "mega_moe_pre_dispatch",
                 "mega_moe_pre_dispatch_sm90", "get_block_m_for_mega_moe", "get_symm_buffer_size_for_sm90_mega_moe",
                 "slice_symm_buffer_for_sm90_mega_moe"):
        assert callable(getattr(_C, name))


# ---- errors: DeepGEMMError naming the argument, nothing written -----------------------------------------------

def _sm90_setup():
    sc = Scenario("sm90", tokens=(8,), topk=2)
    data = build_global(sc)
    buf = make_buffer(sc, None)
    fill_buffer(sc, data, buf, 0)
    l1, l2 = local_weights(sc, data, 0)
    return buf, l1, l2


def test_fp8_mega_moe_errors_write_nothing():
    buf, l1, l2 = _sm90_setup()
    y = torch.full((8, 512), 3.0, dtype=torch.bfloat16)
    stats = torch.zeros(8, dtype=torch.int32)
    snapshot = buf.buffer.clone()
    other = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 384, 2, 1024, 256, device="cpu")
    bad = [
        (dict(y=torch.zeros(385, 512, dtype=torch.bfloat16)), r"y: expected at most num_max_tokens_per_rank \(384\)"),
        (dict(y=torch.zeros(8, 512)), r"y: expected dtype bfloat16"),
        (dict(recipe=(1, 1, 32)), r"recipe: expected \(128, 128, 128\)"),
        (dict(activation="gelu"), r"activation: expected 'swiglu'"),
        (dict(activation_clamp=-2.0), r"activation_clamp: expected None or a value >= 0"),
        (dict(l1=(l1[0][:, :256], l1[1])), r"l1_weights: expected shape \(8, 512, 512\)"),
        (dict(l2=(l2[0], l2[1].double())), r"l2_weights_sf: expected dtype float32"),
        (dict(stats=torch.zeros(4, dtype=torch.int32)), r"cumulative_local_expert_recv_stats: .*8 elements"),
        (dict(buf=object()), r"sym_buffer: fp8_mega_moe expects a SM90SymmBuffer, got object"),
        (dict(buf=make_buffer(Scenario("bf16"), None)), r"sym_buffer: fp8_mega_moe expects a SM90SymmBuffer"),
        (dict(buf=other), r"y: expected the buffer's hidden|l1_weights: expected shape|l2_weights: expected"),
    ]
    for change, pattern in bad:
        args = dict(y=y, l1=l1, l2=l2, buf=buf, stats=stats, recipe=(128, 128, 128), activation="swiglu",
                    activation_clamp=None)
        args.update(change)
        with pytest.raises(DeepGEMMError, match=pattern):
            deep_gemm.fp8_mega_moe(args["y"], args["l1"], args["l2"], args["buf"], args["stats"], args["recipe"],
                                   args["activation"], args["activation_clamp"])
    assert (y == 3.0).all() and not stats.any() and torch.equal(buf.buffer, snapshot)


def test_raw_op_errors():
    buf, l1, l2 = _sm90_setup()
    y = torch.zeros(8, 512, dtype=torch.bfloat16)
    base = [y, l1[0], l1[1], l2[0], l2[1], None, buf.buffer, [buf.buffer.data_ptr()], 0, 384, 8, 2,
            [128, 128, 128], "swiglu", None, True]
    with pytest.raises(DeepGEMMError, match=r"num_experts: expected a positive multiple of the number of ranks"):
        args = list(base)
        args[7], args[10] = [1, 2], 7
        ops.fp8_mega_moe(*args)
    with pytest.raises(DeepGEMMError, match=r"sym_buffer: expected at least \d+ bytes"):
        args = list(base)
        args[6] = buf.buffer[:1000]
        ops.fp8_mega_moe(*args)
    with pytest.raises(DeepGEMMError, match=r"rank_idx: expected a value in \[0, 1\)"):
        args = list(base)
        args[8] = 1
        ops.fp8_mega_moe(*args)
    # A two-rank layout on a buffer no process group owns
    big = torch.zeros(ops.get_symm_buffer_size_for_sm90_mega_moe(2, 16, 384, 2, 512, 256, True, "swiglu"),
                      dtype=torch.int8)
    args = list(base)
    args[6], args[7], args[10] = big, [1, 2], 16
    with pytest.raises(DeepGEMMError, match=r"sym_buffer: a buffer for 2 ranks must come from"):
        ops.fp8_mega_moe(*args)
    assert not y.any()


def test_fp8_fp4_and_bf16_errors():
    sc = Scenario("fp8fp4", tokens=(4,))
    data = build_global(sc)
    buf = make_buffer(sc, None)
    l1, l2 = local_weights(sc, data, 0)
    y = torch.full((4, 512), 2.0, dtype=torch.bfloat16)
    for kwargs, pattern in (
        (dict(recipe=(1, 1, 16)), r"mma_type: .*FP4 activations"),
        (dict(weight_layout="trtllm"), r"weight_layout: 'trtllm'"),
        (dict(weight_layout="other"), r"weight_layout: expected 'megamoe' or 'trtllm'"),
        (dict(use_x_scales=True), r"use_x_scales: only for the nvfp4xnvfp4"),
        (dict(global_num_tokens=400), r"global_num_tokens: expected a value in \[0, 384\]"),
        (dict(post_expert_norm_weight=torch.ones(512)), r"post_expert_norm_weight: given without"),
        (dict(shared_l1_weights=l1), r"shared_l1_weights, shared_l2_weights: expected both or neither"),
    ):
        with pytest.raises(DeepGEMMError, match=pattern):
            deep_gemm.fp8_fp4_mega_moe(y, l1, l2, buf, **kwargs)
    with pytest.raises(DeepGEMMError, match=r"mma_type: .*FP4 activations"):
        deep_gemm.nvfp4_mega_moe(y, l1, l2, buf)
    with pytest.raises(DeepGEMMError, match=r"sym_buffer: bf16_mega_moe needs a buffer built with "
                                            r"mma_type='bf16xbf16', got 'fp8xfp4'"):
        deep_gemm.bf16_mega_moe(y, torch.zeros(8, 512, 512, dtype=torch.bfloat16),
                                torch.zeros(8, 512, 256, dtype=torch.bfloat16), buf)
    assert (y == 2.0).all()


# ---- registration: schemas, fake tensors, opcheck ---------------------------------------------------------------

NEW_OPS = ("fp8_mega_moe", "fp8_fp4_mega_moe", "bf16_mega_moe", "mega_moe_pre_dispatch", "mega_moe_pre_dispatch_sm90",
           "get_block_m_for_mega_moe", "get_symm_buffer_size_for_sm90_mega_moe",
           "_slice_symm_buffer_for_sm90_mega_moe")


def test_schemas_are_the_table():
    for name in NEW_OPS:
        schema = str(torch._C._dispatch_find_schema_or_throw(f"deep_gemm::{name}", "").schema())
        assert schema == f"deep_gemm::{SCHEMAS[name]}"


def _fp8_mega_moe_args(n: int = 6):
    buf, l1, l2 = _sm90_setup()
    y = torch.zeros(n, 512, dtype=torch.bfloat16)
    stats = torch.zeros(8, dtype=torch.int32)
    return (y, l1[0], l1[1], l2[0], l2[1], stats, buf.buffer, [buf.buffer.data_ptr()], 0, 384, 8, 2,
            [128, 128, 128], "swiglu", 10.0, True)


def _sm100_args(kind: str):
    sc = Scenario(kind, tokens=(5,), topk=2, masked=0.3)
    data = build_global(sc)
    buf = make_buffer(sc, None)
    from mega_moe_cases import fill_buffer
    fill_buffer(sc, data, buf, 0)
    l1, l2 = local_weights(sc, data, 0)
    y = torch.zeros(5, 512, dtype=torch.bfloat16)
    stats = torch.zeros(8, dtype=torch.int32)
    ptrs = [buf.buffer.data_ptr()]
    if kind == "fp8fp4":
        return (y, l1[0], l1[1], l2[0], l2[1], None, None, None, None, stats, buf.buffer, ptrs, 0, 384, 8, 2,
                [1, 1, 32], "fp8xfp4", "swiglu", None, True, False, None, None, None, False, None, 1e-6, False,
                False, None, buf.num_ring_tokens)
    return (y, l1, l2, None, None, stats, buf.buffer, ptrs, 0, 384, 8, 2, "swiglu", None, True, False, None, 1e-6,
            False, False, None, buf.num_ring_tokens)


def _pre_dispatch_args(sm90: bool):
    x = torch.randn(5, 256).bfloat16()
    idx = torch.randint(-1, 8, (5, 2), dtype=torch.int32)
    w = torch.rand(5, 2)
    if sm90:
        buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 10, 2, 256, 128, device="cpu")
        return (x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, 5, 128, 1.5)
    buf = deep_gemm.get_symm_buffer_for_mega_moe(None, 8, 10, 2, 256, 128, device="cpu")
    return (x, idx, w, buf.x, buf.x_sf, buf.topk_idx, buf.topk_weights, 5, 32, "fp8xfp4", None, torch.rand(8))


# test_schema compares inputs before/after through arithmetic that FP8 tensors lack; the BF16 op runs it.
OPCHECK_UTILS = ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")


def test_opcheck_layer_and_pre_dispatch_ops():
    torch.library.opcheck(ops.fp8_mega_moe.default, _fp8_mega_moe_args(), test_utils=OPCHECK_UTILS)
    torch.library.opcheck(ops.fp8_fp4_mega_moe.default, _sm100_args("fp8fp4"), test_utils=OPCHECK_UTILS)
    torch.library.opcheck(ops.bf16_mega_moe.default, _sm100_args("bf16"))
    torch.library.opcheck(ops.mega_moe_pre_dispatch_sm90.default, _pre_dispatch_args(True), test_utils=OPCHECK_UTILS)
    torch.library.opcheck(ops.mega_moe_pre_dispatch.default, _pre_dispatch_args(False), test_utils=OPCHECK_UTILS)
    torch.library.opcheck(ops.get_block_m_for_mega_moe.default, (1, 8, 384, 100, 2, "fp8xfp4", None))
    torch.library.opcheck(ops.get_symm_buffer_size_for_sm90_mega_moe.default,
                          (1, 8, 384, 2, 512, 256, True, "swiglu"))


def test_fake_tensors_run_the_checks():
    from torch._subclasses.fake_tensor import FakeTensorMode
    args = _fp8_mega_moe_args()
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        ops.fp8_mega_moe(*fake)
        bad = list(fake)
        bad[12] = [1, 1, 32]
        with pytest.raises(DeepGEMMError, match=r"recipe: expected \(128, 128, 128\)"):
            ops.fp8_mega_moe(*bad)
    assert not args[0].any()


def test_sm90_slice_under_compile():
    nbytes = ops.get_symm_buffer_size_for_sm90_mega_moe(1, 8, 384, 2, 256, 128, True, "swiglu")

    def fn(buf):
        views = ops._slice_symm_buffer_for_sm90_mega_moe(buf, 1, 8, 384, 2, 256, 128, True, "swiglu")
        views[3].fill_(0.5)
        return views[3].sum()

    eager, compiled = torch.zeros(nbytes, dtype=torch.int8), torch.zeros(nbytes, dtype=torch.int8)
    expected = fn(eager)
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(compiled)
    assert float(got) == float(expected) == 0.5 * 384 * 2
    assert torch.equal(eager, compiled)


# ---- the SGLang SM90 call path, as sglang/srt/layers/moe/mega_moe_sm90.py makes it -----------------------------

def _sglang_style_weight_prep(w13: torch.Tensor, gran: int = 8) -> torch.Tensor:
    """Interleave only the L1 data rows in 8-row gate/up chunks (what SGLang's weight builder does, restated)."""
    groups, n, k = w13.shape
    gate = w13[:, :n // 2].reshape(groups, n // 2 // gran, gran, k)
    up = w13[:, n // 2:].reshape(groups, n // 2 // gran, gran, k)
    return torch.stack([gate, up], dim=2).reshape(groups, n, k)


@pytest.mark.parametrize("num_tokens", [0, 9])
def test_sglang_sm90_call_path(num_tokens):
    sc = Scenario("sm90", tokens=(num_tokens,), topk=4, masked=0.3, clamp=10.0)
    data = build_global(sc)
    (w13, w13_sf), (w2, w2_sf) = data.l1, data.l2
    l1 = (_sglang_style_weight_prep(w13), w13_sf)
    assert torch.equal(l1[0].view(torch.uint8),
                       deep_gemm.transform_weights_for_mega_moe_sm90(data.l1, data.l2)[0][0].view(torch.uint8))
    buf = deep_gemm.get_symm_buffer_for_sm90_mega_moe(None, 8, 512, 4, 512, 256, device="cpu")
    hidden_states = torch.cat([data.x[0], torch.randn(3, 512).bfloat16()])  # extra rows past num_tokens
    topk_ids = torch.cat([data.topk_idx[0], torch.zeros(3, 4, dtype=torch.int32)])
    topk_weights = torch.cat([data.topk_weights[0], torch.ones(3, 4)])
    deep_gemm.mega_moe_pre_dispatch_sm90(hidden_states, topk_ids, topk_weights, buf.x, buf.x_sf, buf.topk_idx,
                                         buf.topk_weights, num_tokens=num_tokens, group_size=128,
                                         routed_scaling_factor=2.0)
    y = torch.empty((max(num_tokens, 1), 512), dtype=torch.bfloat16)
    deep_gemm.fp8_mega_moe(y, l1, (w2, w2_sf), buf, recipe=(128, 128, 128), activation="swiglu",
                           activation_clamp=10.0, fast_math=True)
    y = y[:num_tokens]
    from mega_moe_cases import dispatched_tokens, expected_output
    expected = expected_output(sc, data, dispatched_tokens(sc, buf, num_tokens), 0) * 2.0
    assert y.shape == expected.shape
    assert calc_diff(y, expected) < TOLERANCE


# ---- the intermediate's quantisation, pinned (the float64 loop above does not round it) ------------------------

@pytest.mark.parametrize("kind", ["sm90", "fp8fp4", "bf16"])
def test_intermediate_rounding_is_the_kernels(kind):
    """Top-1 tokens through one expert, emulated here step by step in FP32 with the kernel's rounding of the
    intermediate: SM90 FP8 with a continuous scale per 64 columns, SM100 FP8 with a UE8M0 scale per 32, BF16."""
    sc = Scenario(kind, tokens=(16,), topk=1, clamp=10.0)
    data = build_global(sc)
    y, _, _, _ = run_and_expect(sc, None, 0)
    from mega_moe_cases import dispatched_tokens
    buf = make_buffer(sc, None)
    fill_buffer(sc, data, buf, 0)
    x = dispatched_tokens(sc, buf, 16).float()
    emulated, unrounded = torch.zeros(16, 512), torch.zeros(16, 512)
    for t in range(16):
        e = int(data.topk_idx[0][t, 0])
        h = data.w1[e].float() @ x[t]
        g, u = h[:256].clamp(max=10.0), h[256:].clamp(-10.0, 10.0)
        a = g * torch.sigmoid(g) * u * data.topk_weights[0][t, 0]
        if kind == "sm90":
            groups = a.view(4, 64)
            scale = groups.abs().amax(-1, keepdim=True).clamp(min=1e-10) / 448
            q = ((groups * (1 / scale)).to(torch.float8_e4m3fn).float() * scale).view(256)
        elif kind == "fp8fp4":
            groups = a.view(8, 32)
            scale = torch.exp2(torch.ceil(torch.log2(groups.abs().amax(-1, keepdim=True).clamp(min=1e-4) / 448)))
            q = ((groups / scale).to(torch.float8_e4m3fn).float() * scale).view(256)
        else:
            q = a.bfloat16().float()
        emulated[t] = (data.w2[e].float() @ q).bfloat16().float()
        unrounded[t] = data.w2[e].float() @ a
    assert calc_diff(y, emulated) < 1e-6
    if kind != "bf16":
        assert calc_diff(y, unrounded) > 1e-5   # the rounding is visible, so the first check pins it


def test_reference_dequantises_only_routed_experts(monkeypatch):
    """The reference holds one expert's FP32 weights at a time and touches only experts that receive tokens (the
    whole layer in FP32 would not fit a GPU at DeepSeek sizes)."""
    from deep_gemm.mega import reference
    seen = []
    original = reference.PerExpert.__getitem__
    monkeypatch.setattr(reference.PerExpert, "__getitem__", lambda self, e: seen.append(e) or original(self, e))
    sc = Scenario("sm90", tokens=(16,), num_experts=16, topk=4, idle_experts=True)
    y, _, expected, _ = run_and_expect(sc, None, 0)
    assert calc_diff(y, expected) < TOLERANCE
    used = sorted(set(build_global(sc).topk_idx[0].flatten().tolist()) - {-1})
    assert sorted(set(seen)) == used and all(e % 2 == 0 for e in used)  # (odd experts are idle)
    assert len(seen) == 2 * len(used)  # L1 and L2 once each
