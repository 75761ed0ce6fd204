"""batched_syrk / batched_symm: reference vs explicit float64 loops, strides, opcheck, compile/export, bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import calc_diff

SYRK = torch.ops.deep_gemm.batched_syrk.default
SYMM = torch.ops.deep_gemm.batched_symm.default

# The reference sums in FP64 and rounds each output once: FP32 outputs differ from the loops' by half an ulp
# (calc_diff ~ 1e-14), BF16 outputs by half a BF16 ulp (calc_diff ~ 1e-5 at most).
TOL = {torch.float32: 1e-12, torch.bfloat16: 1e-4}


def _loops_syrk(a: torch.Tensor) -> torch.Tensor:
    batch = a.shape[:-2]
    a3 = (a if a.dim() == 3 else a[None]).double()
    out = torch.zeros(a3.size(0), a3.size(1), a3.size(1), dtype=torch.float64)
    for b in range(a3.size(0)):
        for i in range(a3.size(1)):
            for j in range(a3.size(1)):
                out[b, i, j] = sum(float(a3[b, i, k]) * float(a3[b, j, k]) for k in range(a3.size(2)))
    return out.reshape(*batch, a3.size(1), a3.size(1))


def _loops_symm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a3, b3 = (a if a.dim() == 3 else a[None]).double(), (b if b.dim() == 3 else b[None]).double()
    out = torch.zeros(a3.size(0), a3.size(1), b3.size(2), dtype=torch.float64)
    for z in range(a3.size(0)):
        for i in range(a3.size(1)):
            for j in range(b3.size(2)):
                out[z, i, j] = sum(float(a3[z, i, k]) * float(b3[z, k, j]) for k in range(a3.size(2)))
    return out.reshape(*b.shape[:-2], a3.size(1), b3.size(2))


def _strided(shape, dtype, k_major: bool, pad=(3, 5)):
    """A [..., r, c] view of a padded buffer, row-major (k_major) or column-major."""
    *batch, r, c = shape
    if k_major:
        return torch.randn(*batch, r + pad[0], c + pad[1]).to(dtype)[..., :r, :c]
    return torch.randn(*batch, c + pad[1], r + pad[0]).to(dtype)[..., :c, :r].mT


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("batch,m,k",
                         [((), 5, 7), ((3,), 4, 9), ((2,), 1, 1), ((2,), 0, 4), ((2,), 3, 0), ((0,), 2, 2)])
@pytest.mark.parametrize("k_major", (True, False))
def test_syrk_matches_loops(dtype, batch, m, k, k_major):
    torch.manual_seed(0)
    a = _strided((*batch, m, k), dtype, k_major)
    d = _strided((*batch, m, m), dtype, not k_major)
    deep_gemm.batched_syrk(a, d)
    want = _loops_syrk(a)
    if want.numel():
        assert calc_diff(d, want) < TOL[dtype] or torch.equal(d.double(), want.to(dtype).double())
    assert torch.equal(d, d.mT), "D = A A^T is symmetric bit for bit"


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("batch,m,n", [((), 5, 7), ((3,), 4, 1), ((2,), 0, 3), ((2,), 3, 0)])
@pytest.mark.parametrize("majors", [(True, True), (False, True), (True, False)])
def test_symm_matches_loops(dtype, batch, m, n, majors):
    torch.manual_seed(1)
    a = _strided((*batch, m, m), dtype, majors[0])
    a.copy_(a + a.mT)
    b = _strided((*batch, m, n), dtype, majors[1])
    d = torch.full((*batch, m, n), float("nan"), dtype=dtype)
    deep_gemm.batched_symm(a, b, d)
    want = _loops_symm(a, b)
    if want.numel():
        assert calc_diff(d, want) < TOL[dtype]


def test_opcheck_and_fake():
    a = torch.randn(2, 3, 5)
    torch.library.opcheck(SYRK, (a, torch.zeros(2, 3, 3)))
    s = torch.randn(2, 3, 3)
    torch.library.opcheck(SYMM, (s + s.mT, torch.randn(2, 3, 4), torch.zeros(2, 3, 4)))
    with FakeTensorMode() as mode:
        fa, fd = mode.from_tensor(a), mode.from_tensor(torch.zeros(2, 3, 4))
        with pytest.raises(DeepGEMMError, match=r"d: expected \[\.\.\., 3, 3\]"):
            SYRK(fa, fd)


def test_compile_and_export():
    def f(a, b):
        d = torch.empty(a.shape[0], a.shape[1], a.shape[1])
        deep_gemm.batched_syrk(a, d)
        out = torch.empty(a.shape[0], a.shape[1], b.shape[2])
        deep_gemm.batched_symm(d, b, out)
        return out

    a, b = torch.randn(2, 3, 5), torch.randn(2, 3, 4)
    eager = f(a, b)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b)
    assert torch.equal(eager, compiled)

    class M(torch.nn.Module):
        def forward(self, a, b):
            return f(a, b)

    program = torch.export.export(M(), (a, b))
    assert torch.equal(program.module()(a, b), eager)


BAD = [
    (lambda: SYRK(torch.randn(3, 4).half(), torch.empty(3, 3).half()), r"a: expected dtype bfloat16 or float32"),
    (lambda: SYRK(torch.randn(3, 4), torch.empty(3, 3).bfloat16()), r"d: expected dtype float32, got bfloat16"),
    (lambda: SYRK(torch.randn(3, 4), torch.empty(3, 4)), r"d: expected \[\.\.\., 3, 3\]"),
    (lambda: SYRK(torch.randn(2, 3, 4), torch.empty(3, 3)), r"a, b, d: expected all 2-D or all 3-D"),
    (lambda: SYRK(torch.randn(2, 3, 4), torch.empty(1, 3, 3)), r"d: expected batch size 2"),
    (lambda: SYRK(torch.randn(3, 8)[:, ::2], torch.empty(3, 3)), r"a: expected each matrix row- or column-major"),
    (lambda: SYRK(torch.randn(3, 4, 5, 6), torch.empty(3, 3)), r"a: expected a 2-D or 3-D tensor"),
    (lambda: SYMM(torch.randn(3, 4), torch.randn(3, 2), torch.empty(3, 2)), r"a: expected square matrices"),
    (lambda: SYMM(torch.randn(3, 3), torch.randn(4, 2), torch.empty(3, 2)), r"b: expected \[\.\.\., 3, N\]"),
    (lambda: SYMM(torch.randn(3, 3), torch.randn(3, 2), torch.empty(3, 3)), r"d: expected \[\.\.\., 3, 2\]"),
    (lambda: SYMM(torch.randn(3, 3), torch.randn(3, 2).bfloat16(), torch.empty(3, 2)), r"b: expected dtype float32"),
]


@pytest.mark.parametrize("index", range(len(BAD)))
def test_bad_inputs_raise_before_writing(index):
    call, message = BAD[index]
    with pytest.raises(DeepGEMMError, match=message):
        call()


def test_backend_is_cublas():
    report = deep_gemm.backends()
    assert report["batched_syrk"] == report["batched_symm"] == "triton (cuBLAS through torch)"


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("d_row_major", (True, False))
@pytest.mark.parametrize("batch", ((), (3,)))
def test_cuda_launchers_write_strided_d(dtype, d_row_major, batch):
    """The CUDA launchers (cuBLAS through torch.matmul) on CPU tensors: the product lands in d whatever its
    layout, padded strides included, and the padding is untouched."""
    from deep_gemm.gemm.symmetric import launch
    a = _strided((*batch, 5, 7), dtype, True)
    b = _strided((*batch, 5, 4), dtype, False)
    tol = 1e-10 if dtype == torch.float32 else 1e-4
    for name, shape in (("syrk", (*batch, 5, 5)), ("symm", (*batch, 5, 4))):
        sym = (a[..., :5, :5] + a[..., :5, :5].mT).contiguous()
        rows, cols = shape[-2:]
        # d inside a padded buffer of 9s: row-major [rows + 2, cols + 3], or column-major (the buffer transposed)
        full = torch.full((*batch, rows + 2, cols + 3) if d_row_major else (*batch, cols + 3, rows + 2), 9.0)
        full = full.to(dtype)
        d = full[..., :rows, :cols] if d_row_major else full[..., :cols, :rows].mT
        if name == "syrk":
            assert launch.batched_syrk(a, d) is None
            want = _loops_syrk(a)
        else:
            assert launch.batched_symm(sym, b, d) is None
            want = _loops_symm(sym, b)
        assert calc_diff(d, want) < tol
        inside = torch.zeros_like(full, dtype=torch.bool)
        (inside[..., :rows, :cols] if d_row_major else inside[..., :cols, :rows]).fill_(True)
        assert (full[~inside].float() == 9.0).all() and (~inside).any()
    assert launch.batched_syrk(torch.empty(0, 3, dtype=dtype), torch.empty(0, 0, dtype=dtype)) is NotImplemented
