"""Inputs of the block-sparse MQA ops for the kernel tests (CPU interpreter and GPU): FP8 / packed FP4 values,
UE8M0 scale words, fused paged caches, selected blocks, and the one logits comparison with its tolerance."""

from __future__ import annotations

import torch

from deep_gemm.testing import calc_diff

HEADS, HEAD_DIM = 32, 128
PAGE_ALIGN = 512  # bytes: the paged cache's page stride is a multiple of this (the op's check)
# Kernel vs FP64 reference: both round once to BF16; the kernel's sum is FP32 (products of the exactly dequantised
# BF16 operands are exact, the accumulation rounds at ~2^-24 of the running magnitude). Where the two pre-rounding
# values straddle a BF16 rounding boundary they differ by one BF16 ulp (2^-8 relative): even if every element did,
# calc_diff would be (2^-8)^2 / 2 = 7.6e-6. A wrong scale byte, head or token is >= 1e-4.
LOGITS_TOLERANCE = 1e-5


def make_words(shape: tuple, gen: torch.Generator, low: int = 122, high: int = 133) -> torch.Tensor:
    """int32 UE8M0 words of ``shape``: four exponent bytes each, scales 2^(low - 127) .. 2^(high - 128)."""
    exps = torch.randint(low, high, (*shape, 4), generator=gen, dtype=torch.int32)
    return exps[..., 0] | (exps[..., 1] << 8) | (exps[..., 2] << 16) | (exps[..., 3] << 24)


def make_qk(lead: tuple, fp4: bool, gen: torch.Generator, device="cpu") -> torch.Tensor:
    """[*lead, 128] FP8 values, or [*lead, 64] packed E2M1 bytes (every code, signed zeros included)."""
    if fp4:
        return torch.randint(-128, 128, (*lead, HEAD_DIM // 2), generator=gen, dtype=torch.int8).to(device)
    return (torch.randn(*lead, HEAD_DIM, generator=gen) * 3).to(torch.float8_e4m3fn).to(device)


def make_paged_cache(pages: int, page_kv: int, fp4: bool, gen: torch.Generator, extra_pad: int = PAGE_ALIGN,
                     device="cpu") -> torch.Tensor:
    """A fused cache uint8 [pages, page_kv, 1, value_bytes + 4] (per page: every token's values, then their scale
    words), its page stride padded to a multiple of PAGE_ALIGN bytes plus ``extra_pad``."""
    value_bytes = HEAD_DIM // 2 if fp4 else HEAD_DIM
    token_bytes = value_bytes + 4
    page_bytes = page_kv * token_bytes
    stride = -(-page_bytes // PAGE_ALIGN) * PAGE_ALIGN + extra_pad
    buffer = torch.randint(0, 256, (pages * stride,), generator=gen, dtype=torch.int32).to(torch.uint8)
    values = make_qk((pages, page_kv), fp4, gen).view(torch.uint8).reshape(pages, page_kv * value_bytes)
    words = make_words((pages, page_kv), gen).view(torch.uint8).reshape(pages, page_kv * 4)
    pages_view = buffer.view(pages, stride)
    pages_view[:, :page_kv * value_bytes] = values
    pages_view[:, page_kv * value_bytes:page_bytes] = words
    buffer = buffer.to(device)
    return buffer.as_strided((pages, page_kv, 1, token_bytes), (stride, token_bytes, token_bytes, 1))


def select_blocks(ks: torch.Tensor, ke: torch.Tensor, num_kv: int, num_max: int, block: int,
                  gen: torch.Generator) -> torch.Tensor:
    """int32 [rows, num_max] on ks's device: per row, n = min(num_max, ceil(clipped range / block)) unique
    increasing block indices among the range's blocks (from ks // block), then garbage (ignored by the ops).
    ``gen`` is a CPU generator (the random keys are drawn on the CPU, so a case is the same on every device)."""
    rows = ks.numel()
    begin = ks.long().cpu().clamp(min=0, max=num_kv)
    total = (torch.maximum(begin, ke.long().cpu().clamp(max=num_kv)) - begin + block - 1) // block
    n = total.clamp(max=num_max)
    width = max(int(total.max()) if rows else 0, num_max, 1)
    keys = torch.rand(rows, width, generator=gen)
    keys[torch.arange(width)[None, :] >= total[:, None]] = 2.0  # past the range: never among the first n
    chosen = keys.argsort(dim=1)[:, :num_max].sort(dim=1).values + ks.long().cpu().clamp(min=0)[:, None] // block
    garbage = torch.randint(-5, 10**6, (rows, num_max), generator=gen)
    out = torch.where(torch.arange(num_max)[None, :] < n[:, None], chosen, garbage)
    return out.to(torch.int32).to(ks.device)


def assert_logits_match(got: torch.Tensor, want: torch.Tensor) -> None:
    """-inf exactly where the reference has it, the finite values within LOGITS_TOLERANCE (calc_diff)."""
    assert got.dtype == want.dtype == torch.bfloat16 and got.shape == want.shape
    got, want = got.float().cpu(), want.float().cpu()
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got), finite)
    assert torch.equal(got[~finite], want[~finite])
    if finite.any() and want[finite].abs().sum() > 0:
        assert calc_diff(got[finite], want[finite]) < LOGITS_TOLERANCE
    else:
        assert torch.equal(got[finite], want[finite])
