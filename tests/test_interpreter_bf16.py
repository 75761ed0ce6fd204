"""The interpreter's BF16 patch (tests/interpreter_bf16.py) against torch: dots, casts both ways, stores."""

import os

import pytest
import torch

import interpreter_bf16  # noqa: F401

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="patches the CPU interpreter only")


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a, b, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, TRANS_B: tl.constexpr):
        m = tl.arange(0, M)
        n = tl.arange(0, N)
        k = tl.arange(0, K)
        x = tl.load(a + m[:, None] * K + k[None, :])
        if TRANS_B:
            y = tl.trans(tl.load(b + n[:, None] * K + k[None, :]))
        else:
            y = tl.load(b + k[:, None] * N + n[None, :])
        acc = tl.dot(x, y, tl.full((M, N), 1.0, tl.float32))
        tl.store(c + m[:, None] * N + n[None, :], acc)

    @triton.jit
    def cast_kernel(src, bf16_out, f32_out, i32_out, N: tl.constexpr):
        n = tl.arange(0, N)
        x = tl.load(src + n)  # fp32
        h = x.to(tl.bfloat16)
        tl.store(bf16_out + n, h)
        tl.store(f32_out + n, h.to(tl.float32) * 2.0)
        tl.store(i32_out + n, h.to(tl.int32))

    @triton.jit
    def store_kernel(src, dst, N: tl.constexpr):
        n = tl.arange(0, N)
        tl.store(dst + n, tl.load(src + n))  # fp32 value into a bf16 pointer: implicit cast

    return dot_kernel, cast_kernel, store_kernel


@pytest.mark.parametrize("trans_b", [False, True])
def test_bf16_dot_matches_fp32_matmul(trans_b):
    dot_kernel, _, _ = _kernels()
    a = torch.randn(16, 32).bfloat16()
    b = torch.randn(16, 32).bfloat16() if trans_b else torch.randn(32, 16).bfloat16()
    c = torch.empty(16, 16)
    dot_kernel[(1,)](a, b, c, 16, 16, 32, trans_b)
    ref = a.double() @ (b.double().T if trans_b else b.double()) + 1.0
    assert torch.allclose(c.double(), ref, rtol=1e-5, atol=1e-4)


def test_bf16_casts_are_torch_casts():
    _, cast_kernel, store_kernel = _kernels()
    n = 1024
    # Ties and carries: values whose low 16 bits are exactly 0x8000 (ties) and mantissas of all ones (carry into the
    # exponent), plus specials.
    bits = torch.randint(0, 2**31 - 1, (n,), dtype=torch.int64)
    bits[:64] = (bits[:64] & ~0xFFFF) | 0x8000
    bits[64:128] = (bits[64:128] & 0x7F800000) | 0x007FFFFF
    src = bits.to(torch.int32).view(torch.float32).clone()
    src[src.isnan()] = 0.5
    src[src.abs() > 1e30] = -3.0
    src[128:132] = torch.tensor([float("inf"), float("-inf"), 0.0, -0.0])
    src[132:140] = torch.randn(8) * 1000
    bf16_out = torch.empty(n, dtype=torch.bfloat16)
    f32_out = torch.empty(n)
    i32_out = torch.empty(n, dtype=torch.int32)
    cast_kernel[(1,)](src, bf16_out, f32_out, i32_out, n)
    expected = src.bfloat16()
    assert torch.equal(bf16_out.view(torch.int16), expected.view(torch.int16))
    assert torch.equal(f32_out, expected.float() * 2.0)
    finite = expected.float().abs() < 2**30
    assert torch.equal(i32_out[finite], expected.float()[finite].to(torch.int32))
    stored = torch.empty(n, dtype=torch.bfloat16)
    store_kernel[(1,)](src, stored, n)
    assert torch.equal(stored.view(torch.int16), expected.view(torch.int16))


def test_fp8_e4m3_casts_are_torch_casts():
    import triton
    import triton.language as tl

    @triton.jit
    def to_fp8(x, y, N: tl.constexpr):
        o = tl.arange(0, N)
        tl.store(y + o, tl.load(x + o).to(tl.float8e4nv))

    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.randn(4000, generator=g) * 100, torch.tensor([31.35, 600.0, -1e6, 2.0 ** -10, 0.0])])
    x = torch.cat([x, torch.zeros(4096 - x.numel())])
    y = torch.empty(4096, dtype=torch.float8_e4m3fn)
    to_fp8[(1,)](x, y, 4096)
    assert torch.equal(y.view(torch.uint8), x.to(torch.float8_e4m3fn).view(torch.uint8))
