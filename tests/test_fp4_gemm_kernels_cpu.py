"""The dequantising FP4 GEMM kernel (``deep_gemm/gemm/fp4/kernels.py``) in Triton's interpreter on CPU, through its
launchers, against the ops' FP64 references: K-grouped FP4 (sizes and psum layouts, zero-size groups, C none /
separate / d), NVFP4 with cuBLASLt's scale tiles (BF16 and FP32 d), and the FP4 forms of ``fp8_fp4_gemm_nt``
(FP8 or packed FP4 operands, packed UE8M0 scales, K granularity 32 or 128), at odd sizes; plus what the launchers
decline. The GPU runs of the same kernel are in test_fp4_gemm_gpu.py."""

from __future__ import annotations

import pytest
import torch

import deep_gemm
from deep_gemm.testing.grouping import contiguous_layout
import interpreter_bf16  # noqa: F401  (BF16 dots and casts as the GPU does them)
from deep_gemm.core.registry import kernels_of
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.gemm.fp4 import launch as fp4_launch
from deep_gemm.gemm.fp4 import plan as fp4_plan
from deep_gemm.gemm.fp4.plan import Fp4Overrides
from deep_gemm.gemm.fp4.reference import to_cublaslt_tiled_sf
from deep_gemm.testing import calc_diff
from deep_gemm.utils import pack_ue8m0_to_int, per_token_cast_to_fp4, per_token_cast_to_fp8
from triton_harness import DEVICE

ops = torch.ops.deep_gemm
# Kernel vs FP64 reference. Every product is exact (BF16 holds every scaled E2M1 / E4M3 value used here), so what is
# left is FP32 accumulation order: a relative error of ~sqrt(K) * 2^-24 per output (~1e-6 at K = 256, more where
# the sum cancels), and calc_diff is about its square: 1e-10 for FP32 d leaves that room (the cases here measure 0:
# their sums are exact in FP32). A lost sign bit or scales read one block off measure ~0.8. A BF16 d is rounded once
# by both sides; the order only flips a rare rounding by one BF16 ulp (2^-8 relative).
TOL = {torch.float32: 1e-10, torch.bfloat16: 1e-6}
# Small tiles keep the interpreter fast and give odd sizes several partial tiles; one case per op runs the plan's.
SMALL = Fp4Overrides(block_m=16, block_n=32, block_k=32, num_warps=4, kernels=True)
PLAN = Fp4Overrides(kernels=True)


def _fp4_bytes(rows: int, k: int, gen) -> torch.Tensor:
    return torch.randint(-128, 128, (rows, k // 2), dtype=torch.int8, generator=gen)


def _run(name: str, args: tuple, overrides: Fp4Overrides) -> tuple:
    """The op's check, then its launcher on DEVICE copies of ``args`` (returned: the outputs are among them)."""
    kernels_of(name).check(*args)
    dev = tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args)
    out = kernels_of(name).triton(*dev, overrides=overrides)
    assert out is None, f"the launcher of {name} declined"
    return dev


# ---- K-grouped ----------------------------------------------------------------------------------------------------

def _kg_operands(m, n, sum_k, gen, exp_a=(-3, 4), exp_b=(-3, 4)):
    sfa = torch.exp2(torch.randint(*exp_a, (-(-sum_k // 32), m), generator=gen).float())
    sfb = torch.exp2(torch.randint(*exp_b, (-(-sum_k // 32), n), generator=gen).float())
    return _fp4_bytes(m, sum_k, gen), sfa, _fp4_bytes(n, sum_k, gen), sfb


def _kg_case(m, n, ks, c_kind, overrides, psum_ends=None, sum_k=None, exps=((-3, 4), (-3, 4))):
    gen = torch.Generator().manual_seed(m * 7 + n * 3 + len(ks))
    sum_k = sum(ks) if sum_k is None else sum_k
    a, sfa, b, sfb = _kg_operands(m, n, sum_k, gen, *exps)
    g = len(ks)
    layout = torch.tensor(psum_ends if psum_ends is not None else ks, dtype=torch.int32)
    psum = psum_ends is not None
    c = torch.randn(g, m, n, generator=gen) if c_kind != "none" else None
    d_ref = torch.randn(g, m, n, generator=gen) if c_kind == "same" else torch.full((g, m, n), float("nan"))
    d_ker = d_ref.clone()
    c_ref, c_ker = {"none": (None, None), "other": (c, c), "same": (d_ref, d_ker)}[c_kind]
    ks_arg = None if psum else ks
    ops.k_grouped_fp4_gemm_nt_contiguous(a, sfa, b, sfb, d_ref, ks_arg, layout, c_ref, [1, 1, 32], "mn", psum)
    args = (a, sfa, b, sfb, d_ker, ks_arg, layout, c_ker, [1, 1, 32], "mn", psum)
    dev = _run("k_grouped_fp4_gemm_nt_contiguous", args, overrides)
    return dev[4].cpu(), d_ref


KG_CASES = [
    (37, 45, [64, 0, 96, 32], "none", SMALL),
    (5, 19, [32, 128], "other", SMALL),
    (33, 17, [0, 64, 0], "same", SMALL),
    (2, 3, [0, 0], "other", SMALL),        # no K at all: d = c
    (70, 130, [96, 64], "none", PLAN),     # the plan's tile: partial 64 x 128 tiles
]


@pytest.mark.parametrize("m,n,ks,c_kind,overrides", KG_CASES,
                         ids=[f"{m}x{n}-ks{'_'.join(map(str, ks))}-c{c}-{'plan' if o is PLAN else 'small'}"
                              for m, n, ks, c, o in KG_CASES])
def test_k_grouped_matches_reference(m, n, ks, c_kind, overrides):
    got, want = _kg_case(m, n, ks, c_kind, overrides)
    assert calc_diff(got, want) < TOL[torch.float32]
    assert not got.isnan().any()


@pytest.mark.parametrize("alignment", (128, 48, 33))
def test_k_grouped_psum_layout(alignment):
    """Groups start at align(previous end, alignment): 33 puts starts on odd K (mid-byte, mid scale block)."""
    before = deep_gemm.get_mk_alignment_for_contiguous_layout()
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    try:
        # ends: 40, 40 (empty), 40 + alignment + 50; K axis long enough for the last aligned start
        second = -(-40 // alignment) * alignment
        ends = [40, 40, second + 50]
        got, want = _kg_case(9, 21, [0, 0, 0], "other", SMALL, psum_ends=ends, sum_k=-(-ends[-1] // 32) * 32)
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(before)
    assert calc_diff(got, want) < TOL[torch.float32]


def test_k_grouped_wide_scale_exponents():
    """UE8M0 scales from 2^-60 to 2^59 (scaled values stay inside BF16's normal range: exact)."""
    got, want = _kg_case(17, 18, [64, 96], "none", SMALL, exps=((-60, 60), (-60, 1)))
    assert calc_diff(got, want) < TOL[torch.float32]


# ---- NVFP4 --------------------------------------------------------------------------------------------------------

def _nvfp4_operand(rows, k, gen):
    scales = (torch.rand(rows, k // 16, generator=gen) * 3 + 0.01).to(torch.float8_e4m3fn)
    return _fp4_bytes(rows, k, gen), to_cublaslt_tiled_sf(scales.view(torch.uint8))


NV_CASES = [
    (37, 45, 96, torch.bfloat16, "none", SMALL),
    (130, 3, 160, torch.float32, "other", SMALL),   # M past one 128-row scale tile
    (1, 1, 32, torch.float32, "same", SMALL),
    (9, 140, 64, torch.bfloat16, "same", SMALL),    # N past one 128-row scale tile
    (65, 129, 96, torch.float32, "none", PLAN),
]


@pytest.mark.parametrize("m,n,k,dtype,c_kind,overrides", NV_CASES,
                         ids=[f"{m}x{n}x{k}-{str(t)[6:]}-c{c}-{'plan' if o is PLAN else 'small'}"
                              for m, n, k, t, c, o in NV_CASES])
def test_nvfp4_matches_reference(m, n, k, dtype, c_kind, overrides):
    gen = torch.Generator().manual_seed(m + n + k)
    a, sfa = _nvfp4_operand(m, k, gen)
    b, sfb = _nvfp4_operand(n, k, gen)
    c = torch.randn(m, n, generator=gen).to(dtype) if c_kind != "none" else None
    d_ref = torch.randn(m, n, generator=gen).to(dtype)
    d_ker = d_ref.clone()
    c_ref, c_ker = {"none": (None, None), "other": (c, c), "same": (d_ref, d_ker)}[c_kind]
    ops.cublaslt_nvfp4_gemm_nt(a, sfa, b, sfb, d_ref, c_ref)
    dev = _run("cublaslt_nvfp4_gemm_nt", (a, sfa, b, sfb, d_ker, c_ker), overrides)
    assert calc_diff(dev[4].cpu(), d_ref) < TOL[dtype]


# ---- fp8_fp4_gemm_nt's FP4 forms ------------------------------------------------------------------------------------

def _quant(x: torch.Tensor, fp4: bool, gran_k: int):
    """(data, packed UE8M0 int32 scales); the last word of scales may be partial (padded with 1.0)."""
    if fp4:
        return per_token_cast_to_fp4(x, use_ue8m0=True, gran_k=gran_k, use_packed_ue8m0=True)
    q, sf = per_token_cast_to_fp8(x, use_ue8m0=True, gran_k=gran_k)
    pad = (-sf.size(1)) % 4
    return q, pack_ue8m0_to_int(torch.cat([sf, sf.new_ones(sf.size(0), pad)], dim=1))


def _kind(fp4: bool) -> str:
    return "fp4" if fp4 else "fp8"


DENSE_CASES = [
    (37, 45, 96, False, True, 32, 32, torch.bfloat16, "none"),   # FP8 x FP4, DeepGEMM's SM100 recipe
    (19, 33, 160, True, True, 32, 32, torch.float32, "other"),
    (16, 20, 256, False, False, 128, 32, torch.float32, "same"),  # FP8 x FP8, int32 scales, mixed granularity
    (5, 7, 384, True, False, 32, 128, torch.bfloat16, "other"),
]


@pytest.mark.parametrize("m,n,k,a_fp4,b_fp4,gran_a,gran_b,dtype,c_kind", DENSE_CASES,
                         ids=[f"{m}x{n}x{k}-a{_kind(fa)}{ga}-b{_kind(fb)}{gb}-{str(t)[6:]}-c{c}"
                              for m, n, k, fa, fb, ga, gb, t, c in DENSE_CASES])
def test_fp8_fp4_gemm_nt_matches_reference(m, n, k, a_fp4, b_fp4, gran_a, gran_b, dtype, c_kind):
    gen = torch.Generator().manual_seed(m * n + k)
    a = _quant(torch.randn(m, k, generator=gen), a_fp4, gran_a)
    b = _quant(torch.randn(n, k, generator=gen), b_fp4, gran_b)
    c = torch.randn(m, n, generator=gen).to(dtype) if c_kind != "none" else None
    d_ref = torch.randn(m, n, generator=gen).to(dtype)
    d_ker = d_ref.clone()
    c_ref, c_ker = {"none": (None, None), "other": (c, c), "same": (d_ref, d_ker)}[c_kind]
    recipe_a, recipe_b = [1, gran_a], [1, gran_b]
    ops.fp8_fp4_gemm_nt(a[0], a[1], b[0], b[1], d_ref, c_ref, None, recipe_a, recipe_b)
    args = (a[0], a[1], b[0], b[1], d_ker, c_ker, None, recipe_a, recipe_b, "", False, None)
    kernels_of("fp8_fp4_gemm_nt").check(*args)
    dev = tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in args)
    assert kernels_of("fp8_fp4_gemm_nt").triton(*dev, fp4_overrides=SMALL) is None
    assert calc_diff(dev[4].cpu(), d_ref) < TOL[dtype]


def _stacked(x: torch.Tensor, fp4: bool, gran_k: int):
    """_quant of every group of x [G, rows, K], stacked."""
    pairs = [_quant(x[g], fp4, gran_k) for g in range(x.size(0))]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def _run_fp8_launcher(name: str, args: tuple) -> tuple:
    kernels_of(name).check(*args)
    dev = tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in args)
    assert kernels_of(name).triton(*dev, fp4_overrides=SMALL) is None, f"the launcher of {name} declined"
    return dev


M_GROUPED_CASES = [
    ("ids", 128, [5, 0, 130], False, True),
    ("ids", 32, [33, 7, 0], True, False),
    ("psum", 128, [40, 0, 100], False, True),     # gaps left alone
    ("psum", 32, [17, 64, 0, 3], True, True),     # gaps zeroed; M past the last group's end
]


@pytest.mark.parametrize("kind,alignment,counts,a_fp4,zero_gaps", M_GROUPED_CASES,
                         ids=[f"{k}-align{al}-{'_'.join(map(str, c))}-a{_kind(f)}-zero{z}"
                              for k, al, c, f, z in M_GROUPED_CASES])
def test_m_grouped_contiguous_matches_reference(kind, alignment, counts, a_fp4, zero_gaps):
    before = deep_gemm.get_mk_alignment_for_contiguous_layout()
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    try:
        gen = torch.Generator().manual_seed(sum(counts) + alignment)
        n, k, g = 40, 96, len(counts)
        rows, ids, ends = contiguous_layout(counts, alignment)
        if not any(counts):
            rows = 0  # (contiguous_layout keeps one segment; the spare one below is it)
        m = rows + alignment  # (a spare aligned segment: rows of no group)
        ids = torch.cat([ids[:rows], torch.full((alignment,), -1, dtype=torch.int32)])
        layout = ids if kind == "ids" else torch.tensor(ends, dtype=torch.int32)
        a = _quant(torch.randn(m, k, generator=gen), a_fp4, 32)
        b = _stacked(torch.randn(g, n, k, generator=gen), True, 32)
        d_ref = torch.randn(m, n, generator=gen).to(torch.bfloat16)
        d_ker = d_ref.clone()
        psum = kind == "psum"
        common = (None, [1, 32], [1, 32], "", False, psum, zero_gaps)
        ops.m_grouped_fp8_fp4_gemm_nt_contiguous(a[0], a[1], b[0], b[1], d_ref, layout, *common)
        dev = _run_fp8_launcher("m_grouped_fp8_fp4_gemm_nt_contiguous",
                                (a[0], a[1], b[0], b[1], d_ker, layout, *common, None))
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(before)
    got = dev[4].cpu()
    assert calc_diff(got, d_ref) < TOL[torch.bfloat16]
    assert torch.equal(got == 0, d_ref == 0)  # zeroed rows, and the untouched ones, where the reference has them


@pytest.mark.parametrize("a_fp4", (False, True))
def test_m_grouped_masked_matches_reference(a_fp4):
    gen = torch.Generator().manual_seed(11)
    g, max_m, n, k = 3, 40, 33, 128
    masked_m = torch.tensor([3, 0, max_m], dtype=torch.int32)
    a = _stacked(torch.randn(g, max_m, k, generator=gen), a_fp4, 32)
    b = _stacked(torch.randn(g, n, k, generator=gen), True, 32)
    d_ref = torch.randn(g, max_m, n, generator=gen).to(torch.bfloat16)
    d_ker = d_ref.clone()
    common = (None, [1, 32], [1, 32], "", False)
    ops.m_grouped_fp8_fp4_gemm_nt_masked(a[0], a[1], b[0], b[1], d_ref, masked_m, 16, *common)
    dev = _run_fp8_launcher("m_grouped_fp8_fp4_gemm_nt_masked",
                            (a[0], a[1], b[0], b[1], d_ker, masked_m, 16, *common))
    got = dev[4].cpu()
    assert calc_diff(got, d_ref) < TOL[torch.bfloat16]
    assert torch.equal(got[0, 3:], d_ref[0, 3:]) and torch.equal(got[1], d_ref[1])  # rows past masked_m kept


# ---- what the launchers decline ---------------------------------------------------------------------------------


def test_declined_forms():
    gen = torch.Generator().manual_seed(2)
    a, sfa = _nvfp4_operand(4, 32, gen)
    d = torch.zeros(4, 4)
    c = torch.zeros(4, 4).t()  # column-major c
    assert fp4_launch.cublaslt_nvfp4_gemm_nt(a, sfa, a, sfa, d, c, overrides=PLAN) is NotImplemented
    # One operand's scales FP32, the other's packed UE8M0: the reference
    q, sf = per_token_cast_to_fp4(torch.randn(4, 64, generator=gen), use_ue8m0=True, gran_k=32)
    packed = _quant(torch.randn(4, 64, generator=gen), True, 32)
    fp8_launcher = kernels_of("fp8_fp4_gemm_nt").triton
    assert fp8_launcher(q, sf, packed[0], packed[1], d, None, None, [1, 32], [1, 32], "", False,
                        fp4_overrides=PLAN) is NotImplemented


FP32_SCALE_CASES = [
    (37, 45, 96, "fp8", "fp4", 32, 32, 1, torch.bfloat16, "none"),
    (19, 150, 256, "fp4", "fp8", 32, 128, 128, torch.float32, "same"),   # B per 128 x 128 block
    (9, 20, 112, "fp8", "fp8", 32, 32, 1, torch.float32, "other"),       # K not a multiple of 32
]


@pytest.mark.parametrize("m,n,k,a_kind,b_kind,gran_a,gran_b,gran_n,dtype,c_kind", FP32_SCALE_CASES,
                         ids=[f"{m}x{n}x{k}-a{fa}{ga}-b{fb}{gb}x{gn}-{str(t)[6:]}-c{c}"
                              for m, n, k, fa, fb, ga, gb, gn, t, c in FP32_SCALE_CASES])
def test_fp8_fp4_gemm_nt_fp32_scales(m, n, k, a_kind, b_kind, gran_a, gran_b, gran_n, dtype, c_kind):
    """FP32 scales of any value (not powers of two): applied after each 32-K dot."""
    gen = torch.Generator().manual_seed(m + n + k)

    def operand(rows, kind, gran_mn, gran_k):
        data = (_fp4_bytes(rows, k, gen) if kind == "fp4"
                else torch.randn(rows, k, generator=gen).to(torch.float8_e4m3fn))
        return data, torch.rand(-(-rows // gran_mn), -(-k // gran_k), generator=gen) + 0.1

    a = operand(m, a_kind, 1, gran_a)
    b = operand(n, b_kind, gran_n, gran_b)
    c = torch.randn(m, n, generator=gen).to(dtype) if c_kind != "none" else None
    d_ref = torch.randn(m, n, generator=gen).to(dtype)
    d_ker = d_ref.clone()
    c_ref, c_ker = {"none": (None, None), "other": (c, c), "same": (d_ref, d_ker)}[c_kind]
    recipe_a, recipe_b = [1, gran_a], [gran_n, gran_b]
    ops.fp8_fp4_gemm_nt(a[0], a[1], b[0], b[1], d_ref, c_ref, None, recipe_a, recipe_b)
    args = (a[0], a[1], b[0], b[1], d_ker, c_ker, None, recipe_a, recipe_b, "", False, None)
    kernels_of("fp8_fp4_gemm_nt").check(*args)
    dev = tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in args)
    assert kernels_of("fp8_fp4_gemm_nt").triton(*dev, fp4_overrides=SMALL) is None
    assert calc_diff(dev[4].cpu(), d_ref) < TOL[dtype]


def test_backends_report_the_kernel():
    report = deep_gemm.backends()
    for name in ("k_grouped_fp4_gemm_nt_contiguous", "cublaslt_nvfp4_gemm_nt"):
        assert report[name].startswith("triton"), report[name]
    assert "opt-in" not in report["fp8_fp4_gemm_nt"], report["fp8_fp4_gemm_nt"]


# ---- the plan ---------------------------------------------------------------------------------------------------

def test_plan_tiles():
    big, small = fp4_plan.plan(4096, 7168), fp4_plan.plan(1, 7168)
    assert (big.block_m, big.block_n, big.block_k, big.num_warps) == (128, 128, 32, 8)
    assert (small.block_m, small.block_n, small.num_warps) == (64, 64, 4)
    assert fp4_plan.plan(4096, 7168, scale_block_k=32).block_n == fp4_plan.SCALE_AFTER_BLOCK_N
    # M-grouped: BLOCK_M divides the alignment (halved down to 16), else no tile
    assert [fp4_plan.plan(4096, 7168, row_align=a).block_m for a in (128, 64, 48, 256)] == [128, 64, 16, 128]
    assert fp4_plan.plan(4096, 7168, row_align=64).num_warps == 4  # (8 warps only for 128-row tiles)
    assert fp4_plan.plan(4096, 7168, row_align=33) is None
    assert fp4_plan.plan(4096, 7168, Fp4Overrides(block_m=128), row_align=64) is None
    # FP32 scales after the dot: each K step inside one scale block
    assert fp4_plan.plan(4096, 7168, Fp4Overrides(block_k=64), scale_block_k=32) is None
    assert set(fp4_plan.compile_configs()) | set(fp4_plan.compile_configs(True)) >= {
        fp4_plan.plan(4096, 7168), fp4_plan.plan(1, 1), fp4_plan.plan(4096, 7168, scale_block_k=32)}


def test_plan_rejects_bad_overrides():
    with pytest.raises(DeepGEMMError, match="Fp4Overrides.block_k"):
        fp4_plan.plan(64, 64, Fp4Overrides(block_k=48))
    with pytest.raises(DeepGEMMError, match="Fp4Overrides.block_m"):
        fp4_plan.plan(64, 64, Fp4Overrides(block_m=8))
