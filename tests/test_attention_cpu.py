"""The indexer's Triton kernels (attention/kernels/) against the float64 oracles of
test_attention_reference_cpu.py, in the interpreter on CPU (small shapes); the GPU runs are test_attention_gpu.py."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from deep_gemm.core import runtime
from deep_gemm.core.registry import _Binder, backends, kernels_of
from deep_gemm.core.schemas import SCHEMAS
from deep_gemm.attention import launch as attention_launch
from deep_gemm.attention import plan as attention_plan
from deep_gemm.attention.plan import AttentionOverrides
from deep_gemm.testing import assert_bitwise_equal, calc_diff

from tolerances import TOLERANCES  # noqa: E402
from test_attention_reference_cpu import (  # noqa: F401 (num_sms_8: fixture)
    NEG_INF, SCHEDULE_CASES, MqaCase, PagedCase, assert_logits_close, make_mqa, make_paged, num_sms_8, oracle_mqa,
    oracle_paged, oracle_schedule)

ops = torch.ops.deep_gemm
FP8 = torch.float8_e4m3fn
INDEXER_OPS = ("fp8_fp4_mqa_logits", "fp8_mqa_logits", "get_paged_mqa_logits_metadata", "fp8_fp4_paged_mqa_logits",
               "fp8_paged_mqa_logits")


def _prefill(cfg, **more) -> AttentionOverrides:
    """The prefill kernel forced onto ``cfg``."""
    return AttentionOverrides(prefill=cfg, **more)


def _paged(cfg) -> AttentionOverrides:
    """The paged kernel forced onto ``cfg``."""
    return AttentionOverrides(paged=cfg)


ON_GPU = torch.cuda.is_available()


def to_device(t):
    """A CPU tensor on the GPU (when there is one) with its storage, offset and strides (misalignment and page
    padding included), so the small cases below also run the compiled kernels; anything else as it is."""
    if not ON_GPU or not isinstance(t, torch.Tensor):
        return t
    raw = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).cuda()
    return raw.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())


def run_launcher(op_name: str, *args, **launcher_kwargs):
    """The op's check, then its Triton launcher: in the interpreter on CPU tensors, or on copies of them on the GPU
    (the result comes back to the CPU). Fails if the launcher declines."""
    full = tuple(to_device(a) for a in _Binder(SCHEMAS[op_name])(args, {}))
    kernels_of(op_name).check(*full)
    out = kernels_of(op_name).triton(*full, **launcher_kwargs)
    assert out is not NotImplemented, f"the Triton launcher of {op_name} declined these arguments"
    return out.cpu()


def misaligned_copy(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of t whose first byte is 8 bytes past a 16-byte boundary (no TMA over it)."""
    flat = torch.empty(t.numel() * t.element_size() + 8, dtype=torch.uint8, device=t.device)[8:]
    out = flat.view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


def assert_kernel_logits_close(out, want, check_mask):
    """The kernels' outputs against the float64 oracle: in the interpreter (CPU) as tight as the reference; on the
    GPU with the tensor cores' FP8 accumulation (tests/tolerances.py)."""
    # ON_GPU, not out.is_cuda: run_launcher brings the result back to the CPU.
    tolerance = TOLERANCES["kernel_fp8_logits_fp32"] if ON_GPU and out.dtype == torch.float32 else None
    assert_logits_close(out, want, want != NEG_INF, check_mask=check_mask, tolerance=tolerance)


def test_indexer_ops_run_triton_on_cuda():
    for name in INDEXER_OPS:
        assert backends()[name].startswith("triton"), (name, backends()[name])


# ---- prefill (interpreter) -------------------------------------------------------------------------------------

PREFILL_CASES = [
    MqaCase(7, 50, 32, 32), MqaCase(16, 129, 64, 128), MqaCase(9, 100, 8, 64), MqaCase(10, 64, 16, 32),
    MqaCase(12, 90, 32, 128, logits=torch.bfloat16), MqaCase(6, 70, 64, 64, logits=torch.bfloat16, bf16_weights=True),
    MqaCase(11, 96, 32, 64, fp4=True), MqaCase(5, 0, 32, 64), MqaCase(0, 40, 32, 128),
]


def _check_mqa(args, oracle_inputs, out, case, clean, max_k):
    want = oracle_mqa(*oracle_inputs, args[4], args[5], args[6])
    assert out.dtype == case.logits
    if max_k == 0:
        assert out.shape == (case.s, case.sk)
        assert_kernel_logits_close(out, want, check_mask=clean)
        return
    assert out.shape == (case.s, max_k)
    ks, ke = args[5].long(), args[6].long()
    for i in range(case.s):  # out[i, t] = logits[i, ks + t] for the valid keys of row i
        lo, hi = max(int(ks[i]), 0), min(int(ke[i]), case.sk)
        if hi > lo:
            got = out[i, lo - int(ks[i]):hi - int(ks[i])].double()
            assert torch.isfinite(got).all()
            assert calc_diff(got, want[i, lo:hi]) < 1e-5


@pytest.mark.parametrize("clean,max_k", [(True, 0), (False, 0), (False, 200)], ids=["clean", "raw", "compressed"])
@pytest.mark.parametrize("case", PREFILL_CASES, ids=str)
def test_prefill_kernel_matches_oracle(case, clean, max_k):
    args, oracle_inputs = make_mqa(case)
    out = run_launcher("fp8_fp4_mqa_logits", *args, clean, max_k, case.logits)
    _check_mqa(args, oracle_inputs, out, case, clean, max_k)


def test_prefill_kernel_without_tma_and_column_scales():
    """Misaligned Q/KV take the pointer loads; [SK, 1] scales are read like [SK]."""
    case = MqaCase(13, 77, 64, 64)
    args, oracle_inputs = make_mqa(case)
    q, q_sf, kv, kv_sf, w, ks, ke = args
    moved = (misaligned_copy(q), q_sf, misaligned_copy(kv), kv_sf[:, None], w, ks, ke)
    assert moved[0].data_ptr() % 16 and moved[2].data_ptr() % 16
    out = run_launcher("fp8_fp4_mqa_logits", *moved, True, 0, torch.float32)
    _check_mqa(args, oracle_inputs, out, case, True, 0)


def test_prefill_kernel_causal_windows_skip_blocks_and_place_inf_exactly():
    """A causal prefill (DeepGEMM's test without context parallelism) and a context-parallel pair of chunks."""
    s, sk = 24, 160
    for ks, ke in [(torch.zeros(s, dtype=torch.int32), torch.arange(s, dtype=torch.int32) + (sk - s)),
                   (torch.full((s,), 40, dtype=torch.int32), torch.arange(s, dtype=torch.int32) * 3 + 41)]:
        case = MqaCase(s, sk, 32, 64)
        args, oracle_inputs = make_mqa(case)
        args = args[:5] + (ks, ke.to(torch.int32))
        out = run_launcher("fp8_fp4_mqa_logits", *args, True, 0, torch.float32)
        _check_mqa(args, oracle_inputs, out, case, True, 0)


def test_prefill_kernel_splits_kv_ranges_across_programs(num_sms_8):
    """With few query blocks the KV range of each is cut into parts (grid axis 1); windows straddle the parts."""
    case = MqaCase(4, 400, 64, 32)
    args, oracle_inputs = make_mqa(case)
    assert attention_plan.prefill_kv_splits(2, 400, 8, min_keys=64) == 6
    short_splits = AttentionOverrides(min_keys_per_split=64)
    for clean, max_k in [(True, 0), (False, 410)]:
        out = run_launcher("fp8_fp4_mqa_logits", *args, clean, max_k, torch.float32, overrides=short_splits)
        _check_mqa(args, oracle_inputs, out, case, clean, max_k)


@pytest.mark.parametrize("first_col", [0, 1], ids=["vector", "unaligned"])
@pytest.mark.parametrize("min_part", [1, 8192], ids=["parts", "whole_rows"])
def test_clean_kernel_parts(num_sms_8, first_col, min_part):
    """Rows cut into column parts (or not): -inf exactly outside each window, inside untouched (empty, inverted,
    negative and overlong windows included, window edges on and off block bounds), with whole blocks in vector
    stores, and on an output whose rows start unaligned (per element)."""
    rows, cols = 9, 100
    buffer = to_device(torch.randn(rows, 256))
    out, before_full = buffer[:, first_col:first_col + cols], buffer.clone()
    ks = to_device(torch.tensor([0, 5, -3, 70, 50, 99, 16, 17, 0], dtype=torch.int32))
    ke = to_device(torch.tensor([100, 37, 20, 40, 500, 99, 48, 31, 0], dtype=torch.int32))
    attention_launch.clean_rows(out, ks, ke, cols,
                                overrides=AttentionOverrides(clean_block=16, clean_min_part=min_part))
    buffer, before_full, ks, ke = (t.cpu() for t in (buffer, before_full, ks, ke))
    out, before = buffer[:, first_col:first_col + cols], before_full[:, first_col:first_col + cols]
    col = torch.arange(cols)[None, :]
    inside = (col >= ks[:, None]) & (col < ke[:, None])
    assert torch.equal(out[inside], before[inside])
    assert (out[~inside] == NEG_INF).all()
    untouched = torch.ones(256, dtype=torch.bool)
    untouched[first_col:first_col + cols] = False
    assert torch.equal(buffer[:, untouched], before_full[:, untouched])  # columns outside out are never written


def test_prefill_kernel_is_bitwise_repeatable_and_configs_agree():
    case = MqaCase(9, 130, 64, 128)
    args, _ = make_mqa(case)
    first = run_launcher("fp8_fp4_mqa_logits", *args, True, 0, torch.float32)
    assert_bitwise_equal(first, run_launcher("fp8_fp4_mqa_logits", *args, True, 0, torch.float32), "repeat")
    valid = first != NEG_INF
    for cfg in (attention_plan.PrefillConfig(block_kv=128, num_warps=8, num_stages=3),
                attention_plan.PrefillConfig(block_kv=64, num_warps=8, num_stages=4, score_cols=256)):
        other = run_launcher("fp8_fp4_mqa_logits", *args, True, 0, torch.float32, overrides=_prefill(cfg))
        assert torch.equal(other == NEG_INF, ~valid), cfg
        assert calc_diff(other[valid].double(), first[valid].double()) < 1e-9, cfg


@pytest.mark.parametrize("windows", ["causal", "chunks", "random", "splits"])
@pytest.mark.parametrize("max_k", [0, 150])
def test_prefill_instruction_levers_give_the_same_bits(windows, max_k, num_sms_8):
    # fma_relu computes the same products ((s + |s|) * w/2 == max(s, 0) * w exactly) and interior only drops tests
    # that hold inside every window: every output bit equals the default's. Windows: causal (the interior loop runs
    # most blocks), context-parallel chunks starting mid-block, random (mostly no interior), and KV splits (parts end
    # mid-window); odd S leaves a last query block with a query past S (no interior there).
    s, sk, h, d = 9, 300, 32, 64
    min_keys = 64 if windows == "splits" else None
    args, _ = make_mqa(MqaCase(s, sk, h, d))
    i = torch.arange(s, dtype=torch.int32)
    ks, ke = {"causal": (torch.zeros(s, dtype=torch.int32), i + (sk - s)),
              "chunks": (torch.full((s,), 37, dtype=torch.int32), i * 7 + 230),
              "random": (args[5], args[6]),
              "splits": (torch.zeros(s, dtype=torch.int32), i + (sk - s))}[windows]
    ks, ke = ks.cpu(), ke.cpu().to(torch.int32)
    args = args[:5] + (ks, ke)  # (CPU tensors: run_launcher moves every argument to the GPU when there is one)
    clean = max_k == 0  # (every element then written: the kernel's in-window ones, the clean pass's -inf)
    base = run_launcher("fp8_fp4_mqa_logits", *args, clean, max_k, torch.float32,
                        overrides=AttentionOverrides(min_keys_per_split=min_keys)).cpu()
    written = torch.ones_like(base, dtype=torch.bool)
    if max_k:  # compressed: column c of row r is key ks[r] + c, written when that key is in the window
        key = ks.long()[:, None] + torch.arange(max_k)[None, :]
        written = (key >= ks.clamp(min=0).long()[:, None]) & (key < ke.clamp(max=sk).long()[:, None])
    assert written.any()
    for cfg in (attention_plan.PrefillConfig(fma_relu=True), attention_plan.PrefillConfig(interior=True),
                attention_plan.PrefillConfig(interior=True, lean_interior=False),
                attention_plan.PrefillConfig(fma_relu=True, interior=True)):
        other = run_launcher("fp8_fp4_mqa_logits", *args, clean, max_k, torch.float32,
                             overrides=_prefill(cfg, min_keys_per_split=min_keys)).cpu()
        assert torch.equal(other[written], base[written]), cfg


@pytest.mark.parametrize("windows", ["causal", "chunks"])
@pytest.mark.parametrize("max_k,logits", [(0, torch.float32), (150, torch.float32), (0, torch.bfloat16)],
                         ids=["plain", "compressed", "bf16"])
@pytest.mark.parametrize("h", [64, 32])
def test_prefill_lean_interior_gives_the_same_bits(windows, max_k, logits, h, num_sms_8):
    # The lean interior loop (int32 output offsets from row q0, key scales prefetched into registers) stores the same
    # values as the interior loop before it, every bit, at the default tile of H >= 32; S = 5 leaves a query block
    # past S (no interior there), SK = 300 a partial last key block, chunks start mid-block.
    s, sk, d = 5, 300, 64
    args, _ = make_mqa(MqaCase(s, sk, h, d))
    i = torch.arange(s, dtype=torch.int32)
    ks, ke = {"causal": (torch.zeros(s, dtype=torch.int32), i + (sk - s)),
              "chunks": (torch.full((s,), 37, dtype=torch.int32), i * 7 + 230)}[windows]
    args = args[:5] + (ks, ke)
    new = attention_plan.prefill_config(h, d, False)
    assert new.interior and new.lean_interior
    old = dataclasses.replace(new, lean_interior=False)
    want = run_launcher("fp8_fp4_mqa_logits", *args, max_k == 0, max_k, logits, overrides=_prefill(old)).cpu()
    got = run_launcher("fp8_fp4_mqa_logits", *args, max_k == 0, max_k, logits, overrides=_prefill(new)).cpu()
    if max_k:  # compressed: columns past a row's window are not written by either
        key = ks.long()[:, None] + torch.arange(max_k)[None, :]
        written = (key >= ks.clamp(min=0).long()[:, None]) & (key < ke.clamp(max=sk).long()[:, None])
        got, want = got[written], want[written]
    assert torch.equal(got.view(torch.int16 if logits == torch.bfloat16 else torch.int32),
                       want.view(torch.int16 if logits == torch.bfloat16 else torch.int32))


# ---- paged (interpreter) ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("lens,next_n,num_sms", SCHEDULE_CASES, ids=[f"case{i}" for i in range(len(SCHEDULE_CASES))])
def test_schedule_kernel_matches_python_walk(lens, next_n, num_sms):
    last = torch.tensor(lens, dtype=torch.int32).view(-1, 1)
    context_lens = torch.cat([last * k // next_n + 1 for k in range(1, next_n)] + [last], dim=1).contiguous()
    meta = run_launcher("get_paged_mqa_logits_metadata", context_lens, 64, num_sms, None)
    assert meta.shape == (num_sms + 1, 2) and meta.dtype == torch.int32
    assert [tuple(r) for r in meta.tolist()] == oracle_schedule(context_lens, num_sms)
    if next_n == 1:  # 1-D lengths: the same schedule as [B, 1]
        meta_1d = run_launcher("get_paged_mqa_logits_metadata", context_lens.view(-1), 64, num_sms, None)
        assert torch.equal(meta_1d, meta)
        assert torch.equal(ops.get_paged_mqa_logits_metadata(context_lens.view(-1), 64, num_sms), meta)


PAGED_KERNEL_CASES = [
    PagedCase(3, 1, 32, 128), PagedCase(4, 2, 64, 64), PagedCase(2, 2, 32, 32, block_kv=32),
    PagedCase(1, 1, 64, 128, page_pad=4), PagedCase(4, 3, 16, 64, block_kv=32), PagedCase(2, 1, 8, 32),
    PagedCase(3, 2, 32, 64, logits=torch.bfloat16), PagedCase(2, 2, 32, 128, fp4=True),
    PagedCase(2, 1, 64, 64, block_kv=32, fp4=True, page_pad=16), PagedCase(0, 1, 32, 64),
]


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "raw"])
@pytest.mark.parametrize("case", PAGED_KERNEL_CASES, ids=str)
def test_paged_kernel_matches_oracle(case, clean, num_sms_8):
    args, (q64, keys) = make_paged(case)
    out = run_launcher("fp8_fp4_paged_mqa_logits", *args, clean, case.logits, None)
    want = oracle_paged(q64, keys, args[3], args[4], args[7])
    assert out.shape == (case.b * case.next_n, args[7]) and out.dtype == case.logits
    assert_kernel_logits_close(out, want, check_mask=clean)


@pytest.mark.parametrize("next_n", [1, 2, 3])
def test_paged_kernel_one_dimensional_context_lens(next_n, num_sms_8):
    """1-D lengths (vLLM 0.11, older SGLang): row n of sequence b sees context_lens[b] - next_n + n + 1 tokens.
    next_n=3: the schedule of 1-D lengths counts one atom per sequence, the persistent kernel two (on the persistent
    kernel the rows of the uncovered atoms would be left unwritten)."""
    args, (q64, keys) = make_paged(PagedCase(3, next_n, 32, 64))
    q, q_sf, kv_cache, weights, context_lens, block_table, _, max_len = args
    lens_1d = context_lens[:, -1].contiguous()
    meta = run_launcher("get_paged_mqa_logits_metadata", lens_1d, 64, 8, None)
    out = run_launcher("fp8_fp4_paged_mqa_logits", q, q_sf, kv_cache, weights, lens_1d, block_table, meta, max_len,
                       True, torch.float32, None)
    per_row = (lens_1d[:, None] - next_n + 1 + torch.arange(next_n, dtype=torch.int32)[None, :]).clamp(min=0)
    want = oracle_paged(q64, keys, weights, per_row, max_len)
    assert_kernel_logits_close(out, want, check_mask=True)
    reference = ops.fp8_fp4_paged_mqa_logits(q, q_sf, kv_cache, weights, lens_1d, block_table, meta.to(q.device),
                                             max_len, True, torch.float32, None)  # CPU: the reference kernel
    assert_logits_close(reference, want, want != NEG_INF, check_mask=True)


def test_paged_kernel_context_beyond_block_table(num_sms_8):
    args, _ = make_paged(PagedCase(2, 1, 32, 64))
    q, q_sf, kv_cache, weights, context_lens, block_table, meta, _ = args
    lens = torch.full_like(context_lens, 500)
    out = run_launcher("fp8_fp4_paged_mqa_logits", q, q_sf, kv_cache, weights, lens, block_table[:, :1], meta, 200,
                       True, torch.float32, None)
    assert (out[:, 64:] == NEG_INF).all()


def test_paged_kernel_bitwise_repeatable(num_sms_8):
    args, (q64, keys) = make_paged(PagedCase(3, 2, 64, 128))
    valid = oracle_paged(q64, keys, args[3], args[4], args[7]) != NEG_INF
    grid = attention_plan.PAGED_GRID_CONFIG
    first = run_launcher("fp8_fp4_paged_mqa_logits", *args, False, torch.float32, None, overrides=_paged(grid))
    again = run_launcher("fp8_fp4_paged_mqa_logits", *args, False, torch.float32, None,
                         overrides=_paged(dataclasses.replace(grid, tokens_per_program=128)))
    assert torch.equal(first[valid], again[valid])  # every token is reduced alone: the split cannot matter
    persistent = run_launcher("fp8_fp4_paged_mqa_logits", *args, False, torch.float32, None)
    lanes_1 = run_launcher("fp8_fp4_paged_mqa_logits", *args, False, torch.float32, None,
                           overrides=_paged(attention_plan.PagedConfig(programs_per_sm=1)))
    assert torch.equal(persistent[valid], lanes_1[valid])
    assert_kernel_logits_close(persistent, oracle_paged(q64, keys, args[3], args[4], args[7]), check_mask=False)


@pytest.mark.parametrize("num_sms", [1, 3, 8])
@pytest.mark.parametrize("case", [PagedCase(5, 2, 64, 32), PagedCase(4, 3, 16, 32),
                                  PagedCase(3, 2, 32, 32, block_kv=32), PagedCase(3, 1, 8, 64, fp4=True)], ids=str)
def test_persistent_paged_kernel_follows_any_schedule(case, num_sms):
    """The persistent kernel walks schedule_meta: every schedule (one SM, SM ranges that start and end inside a
    sequence, SMs with nothing to do) and every lane count cover each page once; empty and odd contexts, clean and
    raw, match the oracle; the result does not depend on the schedule or the lanes (bitwise)."""
    args, (q64, keys) = make_paged(case)
    q, q_sf, kv_cache, weights, context_lens, block_table, _, max_len = args
    context_lens = context_lens.clone()
    context_lens[1] = 0  # an empty context between two others
    previous = runtime.get_num_sms()
    runtime.set_num_sms(num_sms)
    try:
        meta = run_launcher("get_paged_mqa_logits_metadata", context_lens, case.block_kv, num_sms, None)
        want = oracle_paged(q64, keys, weights, context_lens, max_len)
        outs = []
        for clean, lanes in ((True, 3), (True, 1), (False, 3)):
            out = run_launcher("fp8_fp4_paged_mqa_logits", q, q_sf, kv_cache, weights, context_lens, block_table,
                               meta, max_len, clean, torch.float32, None,
                               overrides=_paged(attention_plan.PagedConfig(programs_per_sm=lanes)))
            assert_kernel_logits_close(out, want, check_mask=clean)
            outs.append(out)
    finally:
        runtime.set_num_sms(previous)
    valid = want != NEG_INF
    for out in outs[1:]:
        assert torch.equal(out[valid], outs[0][valid])


# The persistent kernel's register levers (PagedConfig): each must place -inf exactly as the default does and match
# the oracle; shapes they do not apply to (one-row atoms, FP4, H < 16) fall back to the one-dot kernel.
PAGED_REGISTER_VARIANTS = [
    attention_plan.PagedConfig(aligned_q_loads=True),
    attention_plan.PagedConfig(row_dots=True),
    attention_plan.PagedConfig(row_dots=True, aligned_q_loads=True, num_stages=7),
]


@pytest.mark.parametrize("variant", PAGED_REGISTER_VARIANTS, ids=lambda c: f"rowdots{int(c.row_dots)}"
                         f"-alignq{int(c.aligned_q_loads)}-s{c.num_stages}")
@pytest.mark.parametrize("case", [PagedCase(5, 2, 64, 32), PagedCase(4, 3, 16, 32), PagedCase(3, 4, 32, 64),
                                  PagedCase(3, 1, 8, 64)], ids=str)
def test_persistent_paged_register_variants_match_default(case, variant, num_sms_8):
    """Row dots and vector Q loads: clean and raw, the oracle's values and -inf placement, and within rounding of the
    default kernel (row dots sum each row's heads in another order). next_n=3: the second row of the last atom is
    masked; misaligned Q: the vector loads are not used and the result is the same."""
    args, (q64, keys) = make_paged(case)
    q, q_sf, kv_cache, weights, context_lens, block_table, meta, max_len = args
    want = oracle_paged(q64, keys, weights, context_lens, max_len)
    valid = want != NEG_INF
    for clean in (True, False):
        default = run_launcher("fp8_fp4_paged_mqa_logits", *args, clean, torch.float32, None)
        for q_in in (q, misaligned_copy(q)):
            out = run_launcher("fp8_fp4_paged_mqa_logits", q_in, q_sf, kv_cache, weights, context_lens, block_table,
                               meta, max_len, clean, torch.float32, None, overrides=_paged(variant))
            assert_kernel_logits_close(out, want, check_mask=clean)
            if clean:  # (raw: only the valid logits are written)
                assert torch.equal(out == NEG_INF, default == NEG_INF)
            assert calc_diff(out[valid].double(), default[valid].double()) < 1e-9


def _assert_paged_launches_give_the_same_bits(case, base, variant):
    """The paged launcher with configs ``base`` and ``variant`` on ``case``: every bit equal with clean_logits, and
    without it every logit the clean output has finite (the rest is left unwritten)."""
    args, _ = make_paged(case)

    def run(clean, cfg):
        return run_launcher("fp8_fp4_paged_mqa_logits", *args, clean, case.logits, None, overrides=_paged(cfg))

    want = run(True, base)
    assert_bitwise_equal(run(True, variant), want, "clean")
    valid = want != NEG_INF
    assert_bitwise_equal(run(False, variant)[valid], run(False, base)[valid], "raw")


@pytest.mark.parametrize("case", [PagedCase(5, 2, 64, 32), PagedCase(3, 3, 64, 64, logits=torch.bfloat16),
                                  PagedCase(2, 2, 32, 32, block_kv=32), PagedCase(2, 1, 64, 64, page_pad=4),
                                  PagedCase(2, 2, 32, 128, fp4=True)], ids=str)
def test_lean_page_loop_gives_the_same_bits(case, num_sms_8):
    """The lean page loop (scales through their own TMA descriptor, a 32-bit page index, one store limit per row)
    against the plain loop with the same tile: every output bit equal with clean_logits, every finite logit equal
    without (the rest is left unwritten; padded pages: no TMA, only the index changes; FP4: no scale descriptor)."""
    plain = attention_plan.PagedConfig(num_stages=7, aligned_q_loads=True)
    _assert_paged_launches_give_the_same_bits(case, plain, dataclasses.replace(plain, lean_page_loop=True))


@pytest.mark.parametrize("case", [PagedCase(2, 2, 64, 128), PagedCase(3, 3, 64, 64, logits=torch.bfloat16),
                                  PagedCase(2, 2, 32, 32, block_kv=32), PagedCase(2, 1, 64, 64, page_pad=4),
                                  PagedCase(2, 2, 32, 128, fp4=True)], ids=str)
def test_register_page_scales_give_the_same_bits(case, num_sms_8):
    """Page scales in registers one page ahead (PagedConfig.register_page_scales) against the scales through the
    shared ring, every other field the shape's default (the first case: the row-pair default, lean loop): the same
    products in the same order, so every bit equal with clean_logits and every finite logit without (FP4: the field
    is ignored)."""
    default = attention_plan.paged_default_config(case.next_n, case.h, case.d, case.block_kv, case.fp4)
    _assert_paged_launches_give_the_same_bits(case, *(dataclasses.replace(default, register_page_scales=on)
                                                      for on in (False, True)))


# ---- host fast path (CPU, GPU launch stubbed) ------------------------------------------------------------------

class _Compiled:
    """Stands in for a compiled kernel: LaunchPlan only keeps it and hands it back to launch_compiled."""


@pytest.fixture
def stubbed_launches(monkeypatch):
    """Launches recorded instead of run: the launcher's full path and a replay both end in ``launch_compiled``."""
    from deep_gemm.core import launch as launch_module
    from deep_gemm.core import plans as plans_module
    calls = []
    compiled = {}

    def fake_launch(kernel, grid, args, *, name, config_key, num_warps, num_stages=1, device_index=0, record=None,
                    max_registers=None):
        ck = compiled.setdefault((name, config_key), _Compiled())
        calls.append((name, ck, grid, list(args)))
        if record is not None:
            record.append((ck, grid, tuple(args), device_index))

    def fake_launch_compiled(ck, grid, args, device_index):
        name = next(n for (n, _), c in compiled.items() if c is ck)
        calls.append((name, ck, grid, list(args)))

    monkeypatch.setattr(attention_launch, "launch", fake_launch)
    # The persistent paged launcher sizes its lanes from the compiled kernel's registers: 128 (4 lanes fit).
    monkeypatch.setattr(attention_launch, "compiled_kernel", lambda *a, **k: SimpleNamespace(
        n_regs=128, metadata=SimpleNamespace(shared=32768)))
    monkeypatch.setattr(attention_launch, "interpreting", lambda: False)
    monkeypatch.setattr(launch_module, "interpreting", lambda: False)
    monkeypatch.setattr(plans_module, "interpreting", lambda: False)  # the replay wrapper records only off it
    monkeypatch.setattr(launch_module, "launch_compiled", fake_launch_compiled)
    monkeypatch.setattr(launch_module, "_ensure_context", lambda device_index: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return calls


def _same_launch(fresh, replayed, fresh_out, replayed_out):
    """Equal launches up to the output: every argument equal, tensors by address and layout, the output slot holding
    each call's own output."""
    assert fresh[0] == replayed[0] and fresh[1] is replayed[1] and fresh[2] == replayed[2]
    assert len(fresh[3]) == len(replayed[3])
    for a, b in zip(fresh[3], replayed[3]):
        if isinstance(a, torch.Tensor):
            if type(b) is int:  # a view a replay passes as its address (launch.LaunchPlan._launch, _View.ptr)
                in_out = a.untyped_storage().data_ptr() == fresh_out.untyped_storage().data_ptr()
                assert b == (replayed_out.data_ptr() + a.data_ptr() - fresh_out.data_ptr() if in_out else a.data_ptr())
            elif a.data_ptr() == fresh_out.data_ptr() and a.shape == fresh_out.shape:
                assert b.data_ptr() == replayed_out.data_ptr()
            else:
                assert (a.data_ptr(), a.shape, a.stride(), a.dtype) == (b.data_ptr(), b.shape, b.stride(), b.dtype)
        elif hasattr(a, "block_shape"):
            assert (a.base.data_ptr(), tuple(a.shape), tuple(a.strides), tuple(a.block_shape)) == \
                   (b.base.data_ptr(), tuple(b.shape), tuple(b.strides), tuple(b.block_shape))
        else:
            assert a == b


def test_replayed_calls_launch_what_a_fresh_call_would(stubbed_launches, num_sms_8):
    """Second calls with a signature replay the first call's launches (prefill + clean, paged, schedule) for the
    new tensors; the full path with the same tensors makes identical launches."""
    mqa_args, _ = make_mqa(MqaCase(9, 100, 64, 128))
    paged_args, _ = make_paged(PagedCase(3, 2, 64, 128))
    cases = [("fp8_fp4_mqa_logits", mqa_args + (True, 0, torch.float32), 2),
             ("fp8_fp4_mqa_logits", mqa_args + (False, 120, torch.bfloat16), 1),
             ("fp8_fp4_paged_mqa_logits", paged_args + (True, torch.float32, None), 1),
             ("get_paged_mqa_logits_metadata", (paged_args[4], 64, 8, None), 1)]
    for op, args, launches in cases:
        run = kernels_of(op).triton
        assert run.accepts_signature
        run(*args, signature=("test", op, len(run.plans)))  # records
        token = ("test", op, len(run.plans) - 1)
        assert any(key[0] == token for key in run.plans), f"{op}: the first call recorded no plan"
        fresh_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        stubbed_launches.clear()
        replayed_out = run(*fresh_args, signature=token)
        replayed = list(stubbed_launches)
        stubbed_launches.clear()
        fresh_out = run(*fresh_args)  # no signature: the full path
        fresh = list(stubbed_launches)
        assert len(replayed) == len(fresh) == launches, op
        assert replayed_out.shape == fresh_out.shape and replayed_out.stride() == fresh_out.stride()
        assert replayed_out.untyped_storage().nbytes() == fresh_out.untyped_storage().nbytes()
        for f, r in zip(fresh, replayed):
            _same_launch(f, r, fresh_out, replayed_out)


def test_one_dimensional_context_lens_under_fake_tensors(num_sms_8):
    """The 1-D forms trace like the 2-D ones: fake outputs with the real sizes and strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    args, _ = make_paged(PagedCase(3, 2, 32, 64))
    q, q_sf, kv_cache, weights, context_lens, block_table, meta, max_len = args
    lens_1d = context_lens[:, -1].contiguous()
    real = ops.fp8_fp4_paged_mqa_logits(q, q_sf, kv_cache, weights, lens_1d, block_table, meta, max_len, False,
                                        torch.float32, None)
    with FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t
                     for t in (q, q_sf, kv_cache, weights, lens_1d, block_table, meta)]
        fake = ops.fp8_fp4_paged_mqa_logits(*fake_args, max_len, False, torch.float32, None)
        fake_meta = ops.get_paged_mqa_logits_metadata(fake_args[4], 64, 8)
    assert fake.shape == real.shape and fake.stride() == real.stride()
    assert fake_meta.shape == (9, 2)


def test_persistent_paged_lanes_are_capped_by_what_fits_on_an_sm():
    """More lanes than fit at once would run the last ones after the others (twice the time): capped by registers
    (allocated per warp in units of 256) and shared memory of the compiled kernel (sm_90a: 65536 registers, 228 KiB
    with 1 KiB kept per program)."""
    def compiled(regs, smem):
        return SimpleNamespace(n_regs=regs, metadata=SimpleNamespace(shared=smem))
    assert attention_launch.resident_programs(compiled(168, 42024), 4, 4) == 3
    assert attention_launch.resident_programs(compiled(128, 42024), 4, 4) == 4
    assert attention_launch.resident_programs(compiled(128, 100 * 1024), 4, 4) == 2
    assert attention_launch.resident_programs(compiled(255, 49412), 4, 4) == 2
    assert attention_launch.resident_programs(compiled(64, 1024), 4, 3) == 3
    assert attention_launch.resident_programs(compiled(96, 57856), 4, 5) == 3  # (227 KiB // 56.5 KiB would say 4)
    assert attention_launch.resident_programs(compiled(255, 240 * 1024), 4, 4) == 1  # never below one lane


def test_persistent_paged_lanes_split_long_contexts_inside_atoms():
    """Contexts of several 256-token splits, 2 schedule entries of 4 lanes: lane parts start and end inside atoms
    (mid-sequence splits); clean output equals the oracle and one lane's output bitwise."""
    case = PagedCase(3, 2, 16, 32)
    args, (q64, keys) = make_paged(case, max_context_len=1100)
    q, q_sf, kv_cache, weights, context_lens, block_table, _, max_len = args
    previous = runtime.get_num_sms()
    runtime.set_num_sms(2)
    try:
        meta = run_launcher("get_paged_mqa_logits_metadata", context_lens, case.block_kv, 2, None)
        outs = [run_launcher("fp8_fp4_paged_mqa_logits", q, q_sf, kv_cache, weights, context_lens, block_table, meta,
                             max_len, True, torch.float32, None,
                             overrides=_paged(attention_plan.PagedConfig(programs_per_sm=lanes))) for lanes in (4, 1)]
    finally:
        runtime.set_num_sms(previous)
    want = oracle_paged(q64, keys, weights, context_lens, max_len)
    assert_kernel_logits_close(outs[0], want, check_mask=True)
    assert torch.equal(outs[0], outs[1])


def test_paged_kernel_choice_follows_the_schedule_and_the_measured_stages():
    """The persistent kernel runs only where the schedule counts its atoms (1-D lengths: next_n <= 2; the grid
    kernel otherwise); 7 stages only for the FP8 H=64 D=128 row-pair tile measured faster on the H200."""
    lens_1d, lens_2d = torch.ones(4, dtype=torch.int32), torch.ones(4, 3, dtype=torch.int32)
    assert [attention_launch.schedule_matches_persistent_atoms(lens_1d, n) for n in (1, 2, 3, 4)] == \
           [True, True, False, False]
    assert attention_launch.schedule_matches_persistent_atoms(lens_2d, 3)
    default = attention_plan.PagedConfig(aligned_q_loads=True)
    for next_n in (2, 4):
        row_pairs = attention_plan.paged_default_config(next_n, 64, 128, 64, False)
        assert row_pairs.num_stages == attention_plan.PAGED_ROW_PAIR_STAGES
        assert row_pairs.max_registers == attention_plan.PAGED_ROW_PAIR_MAX_REGISTERS and row_pairs.aligned_q_loads
        assert row_pairs.lean_page_loop and row_pairs.register_page_scales
    for args in [(1, 64, 128, 64, False), (2, 32, 128, 64, False), (2, 64, 128, 32, False), (2, 64, 128, 64, True)]:
        assert attention_plan.paged_default_config(*args) == default, args


def test_prefill_default_config_follows_the_measured_levers():
    # FP8 at H >= 32: the interior loop and the 128-register cap (attention_plan.PREFILL_MAX_REGISTERS' measurements);
    # fewer heads keep the plain tile, FP4 its 2-stage tile.
    cfg = attention_plan.prefill_config(64, 128, False)
    assert cfg.interior and cfg.max_registers == attention_plan.PREFILL_MAX_REGISTERS
    assert not cfg.fma_relu and cfg == attention_plan.prefill_config(32, 32, False)
    assert attention_plan.prefill_config(16, 64, False) == attention_plan.PrefillConfig()
    fp4 = attention_plan.prefill_config(64, 128, True)
    assert fp4.num_stages == 2 and not fp4.interior
