"""The block-sparse MQA Triton kernels (``deep_gemm/attention/sparse/kernels.py``) in Triton's interpreter on CPU:
both metadata kernels bit for bit against the references (unaligned ks, clipped and empty ranges, zero rows, indices
past the count and past the block table), and the logits kernel, contiguous and paged, FP8 and FP4, against the
FP64 reference (unused slots, tokens past the KV's end, several pages with padded page strides, several steps per
program, and the GPU's BF16 dot operands).

The GPU runs of the same kernels, at DeepSeek V4 sizes, are in test_sparse_mqa_gpu.py."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.attention.sparse import launch as sparse_launch
from deep_gemm.attention.sparse import plan as sparse_plan
from deep_gemm.attention.sparse import reference as ref
from deep_gemm.testing import calc_diff
import interpreter_bf16  # noqa: F401  (torch-exact fp32 -> bf16 casts in the interpreter)
from sparse_mqa_cases import LOGITS_TOLERANCE, assert_logits_match, make_paged_cache, make_qk, make_words, select_blocks
from triton_harness import DEVICE, triton_launcher

KERNELS = sparse_plan.SparseOverrides(kernels=True)
FP8, FP4 = torch.float8_e4m3fn, torch.int8


def _run(name, *args, overrides=KERNELS):
    args = tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args)
    deep_gemm.core.registry.kernels_of(name).check(*args)
    out = triton_launcher(name)(*args, overrides=overrides)
    assert out is not NotImplemented, f"the launcher of {name} declined"
    return out.cpu()


# ---- metadata --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("num_q, num_max, block, unaligned", [
    (5, 4, 8, False), (7, 12, 16, True), (3, 300, 8, True), (0, 8, 8, False), (4, 0, 16, False)],
    ids=lambda v: str(v))
def test_contiguous_metadata_bitwise(num_q, num_max, block, unaligned):
    g = torch.Generator().manual_seed(num_q * 31 + num_max)
    num_kv = 1000
    ks = torch.randint(-20, 1100, (num_q,), generator=g, dtype=torch.int32)
    ke = ks + torch.randint(-5, 400, (num_q,), generator=g, dtype=torch.int32)
    if num_q >= 3:
        ks[0], ke[0] = 40, 40      # an empty range
        ks[1], ke[1] = 999, 5000   # clipped to num_kv
        ks[2] = -7                 # a negative start: phase from Python's modulo
    # Indices past each row's count are garbage (negative, huge): the metadata marks those slots -1.
    idx = torch.randint(-3, 2**27, (num_q, num_max), generator=g, dtype=torch.int32)
    args = (ks, ke, num_kv, idx, FP8, block, unaligned)
    want = ref.get_sparse_mqa_logits_metadata_reference(*args)
    assert torch.equal(_run("get_sparse_mqa_logits_metadata", *args), want)


@pytest.mark.parametrize("num_q, num_max, block, page_kv, lens_2d", [
    (6, 8, 8, 32, False), (4, 20, 16, 64, True), (0, 4, 8, 64, False), (3, 260, 16, 16, False)],
    ids=lambda v: str(v))
def test_paged_metadata_bitwise(num_q, num_max, block, page_kv, lens_2d):
    g = torch.Generator().manual_seed(num_q * 7 + num_max)
    cols = 5
    lens = torch.randint(-3, cols * page_kv + 50, (num_q,), generator=g, dtype=torch.int32)
    # A block table with padded rows (stride(0) > its width) and page ids of a large pool.
    table = torch.randint(0, 50000, (num_q, cols + 3), generator=g, dtype=torch.int32)[:, :cols]
    idx = torch.randint(-2, cols * page_kv // block + 4, (num_q, num_max), generator=g, dtype=torch.int32)
    context = lens.view(num_q, 1) if lens_2d else lens
    args = (context, table, torch.arange(num_q, dtype=torch.int32), page_kv, idx, FP4, block)
    want = ref.get_paged_sparse_mqa_logits_metadata_reference(*args)
    assert torch.equal(_run("get_paged_sparse_mqa_logits_metadata", *args), want)


# ---- logits ----------------------------------------------------------------------------------------------------

CONTIGUOUS = [  # (num_q, num_kv, num_max, block, unaligned, fp4, steps)
    (3, 100, 8, 8, True, False, None),
    (4, 77, 12, 16, False, True, None),
    (2, 130, 16, 8, False, False, 2),   # two steps of 8 blocks in one program
    (5, 53, 4, 16, True, True, 1),      # odd KV length, tokens past its end
    (0, 16, 4, 8, False, False, None),
]


@pytest.mark.parametrize("num_q, num_kv, num_max, block, unaligned, fp4, steps", CONTIGUOUS, ids=lambda v: str(v))
def test_contiguous_logits(num_q, num_kv, num_max, block, unaligned, fp4, steps):
    g = torch.Generator().manual_seed(num_q + num_kv + num_max)
    ks = torch.randint(0, num_kv // 2, (num_q,), generator=g, dtype=torch.int32)
    if not unaligned:
        ks = ks // block * block
    ke = ks + torch.randint(0, num_kv, (num_q,), generator=g, dtype=torch.int32)
    if num_q >= 2:
        ke[1] = ks[1]  # a row without blocks: all -inf
    idx = select_blocks(ks, ke, num_kv, num_max, block, g)
    meta = ref.get_sparse_mqa_logits_metadata_reference(ks, ke, num_kv, idx, FP4 if fp4 else FP8, block, unaligned)
    q, q_sf = make_qk((num_q, 32), fp4, g), make_words((num_q, 32), g)
    kv, kv_sf = make_qk((num_kv,), fp4, g), make_words((num_kv,), g)
    weights = torch.randn(num_q, 32, generator=g).bfloat16()
    args = (q, q_sf, kv, kv_sf, weights, meta, num_max, block, unaligned)
    want = ref.fp8_fp4_sparse_mqa_logits_reference(*args)
    got = _run("fp8_fp4_sparse_mqa_logits", *args, overrides=sparse_plan.SparseOverrides(steps, kernels=True))
    assert got.shape == want.shape and got.stride() == want.stride()
    assert_logits_match(got, want)


PAGED = [  # (num_q, pages, page_kv, num_max, block, fp4, steps)
    (3, 6, 32, 8, 8, False, None),
    (4, 5, 64, 12, 16, True, None),
    (2, 9, 16, 16, 8, True, 2),
    (3, 4, 128, 4, 16, False, None),
]


@pytest.mark.parametrize("num_q, pages, page_kv, num_max, block, fp4, steps", PAGED, ids=lambda v: str(v))
def test_paged_logits(num_q, pages, page_kv, num_max, block, fp4, steps):
    g = torch.Generator().manual_seed(num_q + pages + page_kv)
    cache = make_paged_cache(pages, page_kv, fp4, g)
    cols = 3
    table = torch.stack([torch.randperm(pages, generator=g)[:cols] for _ in range(num_q)]).to(torch.int32)
    lens = torch.randint(0, cols * page_kv + 1, (num_q,), generator=g, dtype=torch.int32)
    lens[0] = 0  # a row without blocks
    idx = select_blocks(torch.zeros_like(lens), lens, cols * page_kv, num_max, block, g)
    meta = ref.get_paged_sparse_mqa_logits_metadata_reference(lens, table, torch.arange(num_q, dtype=torch.int32),
                                                               page_kv, idx, FP4 if fp4 else FP8, block)
    q, q_sf = make_qk((num_q, 1, 32), fp4, g), make_words((num_q, 1, 32), g)
    weights = torch.randn(num_q, 32, generator=g).bfloat16()
    args = (q, q_sf, cache, weights, meta, num_max, block)
    want = ref.fp8_fp4_paged_sparse_mqa_logits_reference(*args)
    got = _run("fp8_fp4_paged_sparse_mqa_logits", *args, overrides=sparse_plan.SparseOverrides(steps, kernels=True))
    assert_logits_match(got, want)


@pytest.mark.parametrize("fp4", (False, True))
def test_bf16_dot_operands(monkeypatch, fp4):
    """The GPU's variant (BF16 dot operands, DOT_BF16) in the interpreter: the dequantised values survive the cast
    exactly, so the logits match the FP32-operand variant's bit for bit."""
    g = torch.Generator().manual_seed(7 + fp4)
    num_q, num_kv, num_max, block = 3, 90, 8, 8
    ks = torch.tensor([0, 10, 33], dtype=torch.int32)
    ke = torch.tensor([90, 60, 80], dtype=torch.int32)
    idx = select_blocks(ks, ke, num_kv, num_max, block, g)
    meta = ref.get_sparse_mqa_logits_metadata_reference(ks, ke, num_kv, idx, FP4 if fp4 else FP8, block, True)
    q, q_sf = make_qk((num_q, 32), fp4, g), make_words((num_q, 32), g)
    kv, kv_sf = make_qk((num_kv,), fp4, g), make_words((num_kv,), g)
    args = (q, q_sf, kv, kv_sf, torch.randn(num_q, 32, generator=g).bfloat16(), meta, num_max, block, True)
    fp32_operands = _run("fp8_fp4_sparse_mqa_logits", *args)
    monkeypatch.setattr(sparse_launch, "interpreting", lambda: False)  # the launcher then picks DOT_BF16
    bf16_operands = _run("fp8_fp4_sparse_mqa_logits", *args)
    assert torch.equal(bf16_operands, fp32_operands)
    assert_logits_match(bf16_operands, ref.fp8_fp4_sparse_mqa_logits_reference(*args))


def test_kernel_metadata_feeds_kernel_logits():
    """The kernels' own metadata drives the logits kernel (the path a caller takes)."""
    g = torch.Generator().manual_seed(5)
    num_q, num_kv, num_max, block = 3, 90, 8, 8
    ks = torch.tensor([0, 10, 33], dtype=torch.int32)
    ke = torch.tensor([90, 60, 34], dtype=torch.int32)
    idx = select_blocks(ks, ke, num_kv, num_max, block, g)
    meta = _run("get_sparse_mqa_logits_metadata", ks, ke, num_kv, idx, FP8, block, True)
    q, q_sf = make_qk((num_q, 32), False, g), make_words((num_q, 32), g)
    kv, kv_sf = make_qk((num_kv,), False, g), make_words((num_kv,), g)
    weights = torch.randn(num_q, 32, generator=g).bfloat16()
    args = (q, q_sf, kv, kv_sf, weights, meta, num_max, block, True)
    assert_logits_match(_run("fp8_fp4_sparse_mqa_logits", *args), ref.fp8_fp4_sparse_mqa_logits_reference(*args))


def test_launchers_decline_unaligned_storage():
    g = torch.Generator().manual_seed(1)
    idx = torch.zeros(2, 4, dtype=torch.int32)
    ks = torch.zeros(2, dtype=torch.int32)
    args = (ks, ks + 8, 16, idx, FP8, 8, False)
    # A metadata buffer whose words are not 4-byte aligned runs the reference.
    meta = ref.get_sparse_mqa_logits_metadata_reference(*args)
    shifted = torch.empty(meta.numel() + 1, dtype=torch.uint8)[1:]
    shifted.copy_(meta)
    q, q_sf = make_qk((2, 32), False, g), make_words((2, 32), g)
    kv, kv_sf = make_qk((16,), False, g), make_words((16,), g)
    largs = (q, q_sf, kv, kv_sf, torch.ones(2, 32).bfloat16(), shifted, 4, 8, False)
    deep_gemm.core.registry.kernels_of("fp8_fp4_sparse_mqa_logits").check(*largs)
    assert triton_launcher("fp8_fp4_sparse_mqa_logits")(*largs, overrides=KERNELS) is NotImplemented
    # So does a kv whose rows do not start at 16-byte multiples (the kernels' vector loads).
    kv_shifted = torch.empty(17 * 128, dtype=torch.uint8)[8:8 + 16 * 128].view(torch.float8_e4m3fn).view(16, 128)
    kv_shifted.copy_(kv)
    largs = (q, q_sf, kv_shifted, kv_sf, torch.ones(2, 32).bfloat16(), meta, 4, 8, False)
    deep_gemm.core.registry.kernels_of("fp8_fp4_sparse_mqa_logits").check(*largs)
    assert triton_launcher("fp8_fp4_sparse_mqa_logits")(*largs, overrides=KERNELS) is NotImplemented


def test_plan():
    cfg = sparse_plan.plan(1, 4096, 8, 132)
    assert cfg.blocks_per_step == 8 and cfg.steps == 1  # one row: as many programs as possible
    cfg = sparse_plan.plan(4096, 512, 16, 132)
    assert cfg.blocks_per_step == 4 and cfg.steps == sparse_plan.MAX_STEPS
    assert sparse_plan.grid(4096, 512, cfg) == (4096, 512 // (4 * sparse_plan.MAX_STEPS), 1)
    assert sparse_plan.plan(7, 12, 8, 132, sparse_plan.SparseOverrides(steps=3)).steps == 3
    with pytest.raises(deep_gemm.DeepGEMMError, match="SparseOverrides.steps"):
        sparse_plan.plan(7, 12, 8, 132, sparse_plan.SparseOverrides(steps=0))
    assert sparse_plan.metadata_grid(0, 0) == (1, 1, 1)


def test_calc_diff_threshold_is_meaningful():
    """LOGITS_TOLERANCE passes one BF16 rounding of every element and rejects a 3 % error (a wrong scale
    byte or token is worse)."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 256, generator=g).double()
    assert calc_diff(x.bfloat16(), x) < LOGITS_TOLERANCE
    assert calc_diff((x * (1 + 1 / 32)).bfloat16(), x) > 10 * LOGITS_TOLERANCE
