"""FP4 GEMMs of DeepGEMM's later API: the fp4_* aliases, k_grouped_fp4_gemm_nt_contiguous and
cublaslt_nvfp4_gemm_nt against explicit float64 loops (E2M1 decoded from a table, scales read by index), the NVFP4
utils bitwise, opcheck, compile / export and bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.gemm.fp4.reference import to_cublaslt_tiled_sf
from deep_gemm.testing import calc_diff

KG = torch.ops.deep_gemm.k_grouped_fp4_gemm_nt_contiguous.default
NV = torch.ops.deep_gemm.cublaslt_nvfp4_gemm_nt.default
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
# FP64 products rounded once to FP32 (BF16): the loops' float64 sums differ by half an output ulp at most.
TOL = {torch.float32: 1e-12, torch.bfloat16: 1e-4}


def _e2m1(code: int) -> float:
    value = E2M1[code & 7]
    return -value if code & 8 else value


def _unpack_row(row: torch.Tensor) -> list:
    out = []
    for byte in row.tolist():
        byte &= 0xFF
        out += [_e2m1(byte & 0xF), _e2m1(byte >> 4)]
    return out


def test_fp4_aliases_are_the_fp8_fp4_functions():
    assert deep_gemm.fp4_gemm_nt is deep_gemm.fp8_fp4_gemm_nt
    assert deep_gemm.m_grouped_fp4_gemm_nt_contiguous is deep_gemm.m_grouped_fp8_fp4_gemm_nt_contiguous
    assert deep_gemm.m_grouped_fp4_gemm_nt_masked is deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked
    for name in ("fp4_gemm_nt", "m_grouped_fp4_gemm_nt_contiguous", "m_grouped_fp4_gemm_nt_masked"):
        assert not hasattr(torch.ops.deep_gemm, name), "a Python alias in DeepGEMM, not an op of its own"


# ---- NVFP4 ----------------------------------------------------------------------------------------------------------

def _nvfp4_operand(rows: int, k: int, gen):
    data = torch.randint(-128, 128, (rows, k // 2), dtype=torch.int8, generator=gen)
    scales = (torch.rand(rows, k // 16, generator=gen) * 3 + 0.01).to(torch.float8_e4m3fn)
    return data, scales, to_cublaslt_tiled_sf(scales.view(torch.uint8))


def _nvfp4_oracle(a, tiled_a, b, tiled_b, k):
    def scale(tiled, r, j):
        flat = tiled.reshape(-1)
        col_tiles = -(-k // 64)
        index = ((r // 128) * col_tiles + j // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + j % 4
        return float(flat[index:index + 1].view(torch.float8_e4m3fn).float())

    def values(data, tiled):
        return [[v * scale(tiled, r, j // 16) for j, v in enumerate(_unpack_row(data[r]))]
                for r in range(data.size(0))]

    va, vb = values(a, tiled_a), values(b, tiled_b)
    out = torch.tensor([[sum(x * y for x, y in zip(ra, rb)) for rb in vb] for ra in va], dtype=torch.float64)
    return out.reshape(a.size(0), b.size(0))


@pytest.mark.parametrize("m,n,k", [(3, 5, 32), (1, 1, 64), (130, 2, 96), (0, 3, 32), (4, 0, 32)])
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float32))
@pytest.mark.parametrize("with_c", (False, True))
def test_nvfp4_matches_loops(m, n, k, dtype, with_c):
    gen = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a, _, sfa = _nvfp4_operand(m, k, gen)
    b, _, sfb = _nvfp4_operand(n, k, gen)
    d = torch.full((m, n), float("nan"), dtype=dtype)
    c = torch.randn(m, n, generator=gen).to(dtype) if with_c else None
    deep_gemm.cublaslt_nvfp4_gemm_nt((a, sfa), (b, sfb), d, c)
    want = _nvfp4_oracle(a, sfa, b, sfb, k) + (c.double() if with_c else 0)
    if want.numel():
        assert calc_diff(d, want) < TOL[dtype]
        assert not d.isnan().any()


def test_nvfp4_c_may_be_d():
    gen = torch.Generator().manual_seed(3)
    a, _, sfa = _nvfp4_operand(4, 64, gen)
    b, _, sfb = _nvfp4_operand(6, 64, gen)
    d = torch.randn(4, 6, generator=gen)
    want = _nvfp4_oracle(a, sfa, b, sfb, 64) + d.double()
    deep_gemm.cublaslt_nvfp4_gemm_nt((a, sfa), (b, sfb), d, d)
    assert calc_diff(d, want) < 1e-12


def test_nvfp4_utils_bitwise():
    x = torch.tensor([[0.0] * 16 + [6.0, -3.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0, 0.1, 1.0, 4.0, -6.0,
                                    2.0, 0.5]])
    packed, sf = deep_gemm.per_token_cast_to_nvfp4(x)
    assert sf.tolist() == [[0.0, 1.0]]  # amax 6 -> scale 1 (exact in E4M3); an all-zero group gets 0
    codes = [c for byte in packed[0].tolist() for c in ((byte & 0xF), (byte >> 4) & 0xF)]
    # ties go to the even code: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4
    assert codes[16:] == [7, 8 | 5, 0, 2, 2, 4, 4, 6, 6, 8 | 6, 0, 2, 6, 8 | 7, 4, 1]
    assert codes[:16] == [0] * 16
    words = deep_gemm.pack_ue4m3_to_int(torch.tensor([[1.0, 2.0, 0.5, 448.0]]))
    assert words.dtype == torch.int32 and deep_gemm.unpack_ue4m3_from_int(words).tolist() == [[1.0, 2.0, 0.5, 448.0]]
    assert deep_gemm.cast_to_ue4m3(torch.tensor([1.06])).tolist() == [1.0]
    sf = torch.rand(8, 8) * 4
    layout = deep_gemm.transform_ue4m3_sf_into_required_layout(sf, 8)
    assert layout.shape == (8, 2) and layout.stride() == (1, 8)  # MN-major int32 words
    assert torch.equal(deep_gemm.unpack_ue4m3_from_int(layout), deep_gemm.cast_to_ue4m3(sf))
    q = torch.randn(3, 256).to(torch.float8_e4m3fn)
    s = torch.rand(3, 2)
    assert torch.equal(deep_gemm.cast_back_from_fp8(q, s), q.float() * s.repeat_interleave(128, dim=1))


# ---- K-grouped FP4 ----------------------------------------------------------------------------------------------

def _kg_inputs(m, n, sum_k, gen):
    a = torch.randint(-128, 128, (m, sum_k // 2), dtype=torch.int8, generator=gen)
    b = torch.randint(-128, 128, (n, sum_k // 2), dtype=torch.int8, generator=gen)
    sfa = torch.exp2(torch.randint(-3, 4, (sum_k // 32, m), generator=gen).float())
    sfb = torch.exp2(torch.randint(-3, 4, (sum_k // 32, n), generator=gen).float())
    return a, sfa, b, sfb


def _kg_oracle(a, sfa, b, sfb, ranges):
    va = [[v * float(sfa[j // 32, r]) for j, v in enumerate(_unpack_row(a[r]))] for r in range(a.size(0))]
    vb = [[v * float(sfb[j // 32, r]) for j, v in enumerate(_unpack_row(b[r]))] for r in range(b.size(0))]
    out = torch.zeros(len(ranges), a.size(0), b.size(0), dtype=torch.float64)
    for g, (lo, hi) in enumerate(ranges):
        for i in range(a.size(0)):
            for j in range(b.size(0)):
                out[g, i, j] = sum(va[i][t] * vb[j][t] for t in range(lo, hi))
    return out


@pytest.mark.parametrize("m,n,ks", [(3, 5, [64, 0, 96]), (1, 2, [32]), (0, 3, [64]), (2, 3, [0, 0])])
@pytest.mark.parametrize("with_c", ("none", "other", "same"))
def test_k_grouped_fp4_matches_loops(m, n, ks, with_c):
    gen = torch.Generator().manual_seed(sum(ks) + m)
    a, sfa, b, sfb = _kg_inputs(m, n, sum(ks), gen)
    d = torch.full((len(ks), m, n), float("nan"))
    c = {"none": None, "other": torch.randn(len(ks), m, n, generator=gen), "same": d}[with_c]
    if with_c == "same":
        d.normal_(generator=gen)
    base = d.clone().double() if with_c == "same" else (c.double() if c is not None else 0)
    layout = torch.tensor(ks, dtype=torch.int32)
    deep_gemm.k_grouped_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, ks, layout, c)
    starts = [sum(ks[:g]) for g in range(len(ks))]
    want = _kg_oracle(a, sfa, b, sfb, [(s, s + k) for s, k in zip(starts, ks)]) + base
    if want.numel():
        assert calc_diff(d, want) < 1e-12 or torch.equal(d.double(), want)


def test_k_grouped_fp4_psum_layout():
    """Group g covers [align(end[g-1], 128), end[g]): logical ends need no alignment."""
    gen = torch.Generator().manual_seed(7)
    a, sfa, b, sfb = _kg_inputs(2, 3, 320, gen)
    d = torch.zeros(2, 2, 3)
    deep_gemm.k_grouped_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, None, torch.tensor([100, 300], dtype=torch.int32),
                                               use_psum_layout=True)
    want = _kg_oracle(a, sfa, b, sfb, [(0, 100), (128, 300)])
    assert calc_diff(d, want) < 1e-12


# ---- graph citizens and errors --------------------------------------------------------------------------------

def test_opcheck():
    gen = torch.Generator().manual_seed(1)
    a, sfa, b, sfb = _kg_inputs(3, 4, 128, gen)
    layout = torch.tensor([64, 64], dtype=torch.int32)
    torch.library.opcheck(KG, (a, sfa, b, sfb, torch.zeros(2, 3, 4), [64, 64], layout, None, [1, 1, 32], "mn", False))
    na, _, nsfa = _nvfp4_operand(3, 64, gen)
    nb, _, nsfb = _nvfp4_operand(4, 64, gen)
    torch.library.opcheck(NV, (na, nsfa.reshape(-1), nb, nsfb.reshape(-1), torch.zeros(3, 4, dtype=torch.bfloat16),
                               None))


def test_compile_and_export():
    gen = torch.Generator().manual_seed(2)
    na, _, nsfa = _nvfp4_operand(3, 64, gen)
    nb, _, nsfb = _nvfp4_operand(4, 64, gen)

    def f(a, sfa, b, sfb):
        d = torch.empty(a.shape[0], b.shape[0])
        deep_gemm.cublaslt_nvfp4_gemm_nt((a, sfa), (b, sfb), d)
        return d * 2

    args = (na, nsfa, nb, nsfb)
    eager = f(*args)
    assert torch.equal(torch.compile(f, fullgraph=True, backend="aot_eager")(*args), eager)

    class M(torch.nn.Module):
        def forward(self, *a):
            return f(*a)

    assert torch.equal(torch.export.export(M(), args).module()(*args), eager)


def test_fake_mode_checks():
    gen = torch.Generator().manual_seed(4)
    a, sfa, b, sfb = _kg_inputs(3, 4, 128, gen)
    with FakeTensorMode() as mode:
        fa, fsfa, fb, fsfb = (mode.from_tensor(t) for t in (a, sfa, b, sfb))
        d = torch.empty(2, 3, 4)
        KG(fa, fsfa, fb, fsfb, d, [64, 64], torch.tensor([64, 64], dtype=torch.int32))
        with pytest.raises(DeepGEMMError, match=r"ks: expected sum\(ks\) == sum_K = 128"):
            KG(fa, fsfa, fb, fsfb, d, [64, 32], torch.tensor([64, 32], dtype=torch.int32))


def _nv_args(**over):
    gen = torch.Generator().manual_seed(5)
    a, _, sfa = _nvfp4_operand(3, 64, gen)
    b, _, sfb = _nvfp4_operand(4, 64, gen)
    args = dict(a=a, sfa=sfa, b=b, sfb=sfb, d=torch.empty(3, 4, dtype=torch.bfloat16), c=None)
    args.update(over)
    return args


def _kg_args(**over):
    a, sfa, b, sfb = _kg_inputs(3, 4, 128, torch.Generator().manual_seed(6))
    args = dict(a=a, sfa=sfa, b=b, sfb=sfb, d=torch.empty(2, 3, 4), ks=[64, 64],
                grouped_layout=torch.tensor([64, 64], dtype=torch.int32), c=None, recipe=[1, 1, 32],
                compiled_dims="mn", use_psum_layout=False)
    args.update(over)
    return args


BAD = [
    (NV, _nv_args, dict(a=torch.zeros(3, 32, dtype=torch.uint8)), r"a: expected dtype int8"),
    (NV, _nv_args, dict(b=torch.zeros(4, 16, dtype=torch.int8)), r"a, b: expected the same K, got 64 and 32"),
    (NV, _nv_args, dict(a=torch.zeros(3, 8, dtype=torch.int8), b=torch.zeros(4, 8, dtype=torch.int8)),
     r"a: expected K \(2 \* a.size\(1\)\) a multiple of 32, got 16"),
    (NV, _nv_args, dict(sfa=torch.zeros(100, dtype=torch.uint8)), r"sfa: expected 512 UE4M3 bytes"),
    (NV, _nv_args, dict(sfb=torch.zeros(512)), r"sfb: expected dtype uint8 or int8"),
    (NV, _nv_args, dict(d=torch.empty(3, 4, dtype=torch.float16)), r"d: expected dtype bfloat16 or float32"),
    (NV, _nv_args, dict(d=torch.empty(2, 4, dtype=torch.bfloat16)), r"a: expected 2 rows \(M of d\)"),
    (NV, _nv_args, dict(c=torch.empty(3, 4)), r"c: expected dtype bfloat16"),
    (KG, _kg_args, dict(recipe=[1, 1, 128]), r"recipe: the K-grouped FP4 GEMM uses .* \(1, 1, 32\)"),
    (KG, _kg_args, dict(d=torch.empty(2, 3, 4, dtype=torch.bfloat16)), r"d: expected dtype float32"),
    (KG, _kg_args, dict(ks=None), r"ks: expected 2 per-group K sizes without the psum layout"),
    (KG, _kg_args, dict(ks=[48, 80]), r"ks: expected non-negative multiples of 32"),
    (KG, _kg_args, dict(grouped_layout=torch.tensor([128], dtype=torch.int32)), r"grouped_layout: expected 2"),
    (KG, _kg_args, dict(sfa=torch.ones(3, 4)), r"sfa: expected shape \(4, 3\) \(\[sum_K / 32, M\]"),
    (KG, _kg_args, dict(compiled_dims="xy"), r"compiled_dims: expected a string of the letters m, n, k"),
]


@pytest.mark.parametrize("index", range(len(BAD)))
def test_bad_inputs(index):
    op, build, over, message = BAD[index]
    args = build(**over)
    d_before = args["d"].clone()
    with pytest.raises(DeepGEMMError, match=message):
        op(**args)
    assert torch.equal(args["d"].nan_to_num(), d_before.nan_to_num()), "nothing is written before the error"


def test_backends_say_triton():
    report = deep_gemm.backends()
    for name in ("k_grouped_fp4_gemm_nt_contiguous", "cublaslt_nvfp4_gemm_nt"):
        assert report[name].startswith("triton") and "opt-in" not in report[name], name
