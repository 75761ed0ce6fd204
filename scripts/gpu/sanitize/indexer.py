"""Indexer cases for the compute-sanitizer batch: each runs one small call with odd sizes (ragged windows, keys past
the window ends, partial pages, unused table entries, misaligned operands for the pointer-load paths) through the
Triton kernels and raises if it differs from the torch reference. ``CASES = [(name, fn), ...]``."""

from __future__ import annotations

import torch

import deep_gemm
from deep_gemm.attention.plan import AttentionOverrides, PagedConfig
from deep_gemm.core.registry import kernels_of, run_launcher
from deep_gemm.testing import calc_diff

FP8 = torch.float8_e4m3fn
NEG_INF = float("-inf")


def _launch(op: str, *args, **launcher_kwargs):
    """The op's Triton launcher (its check first); a declined launch is a failure, not a silent reference run."""
    out = run_launcher(op, *args, launcher_kwargs=launcher_kwargs) if launcher_kwargs else run_launcher(op, *args)
    if out is NotImplemented:
        raise RuntimeError(f"the Triton launcher of {op} declined")
    return out


def _compare(out, want, clean: bool, what: str) -> None:
    valid = want != NEG_INF
    if clean and not torch.equal(out == NEG_INF, ~valid):
        raise AssertionError(f"{what}: -inf placement differs from the reference")
    diff = calc_diff(out[valid].double(), want[valid].double()) if valid.any() else 0.0
    if not diff < 1e-5:
        raise AssertionError(f"{what}: calc_diff {diff}")


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    flat = torch.empty(t.numel() * t.element_size() + 8, dtype=torch.uint8, device=t.device)[8:]
    out = flat.view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


def _prefill(misaligned: bool, compressed: bool, wide_windows: bool = False):
    """wide_windows: every row sees keys [0, sk), so all key blocks but the partial last one take the kernel's
    interior loop (the default at H >= 32), the rest its tested loop."""
    def run():
        s, sk, h, d = 37, 301, 32, 64
        q = torch.randn(s, h, d, device="cuda").to(FP8)
        kv, kv_sf = torch.randn(sk, d, device="cuda").to(FP8), torch.rand(sk, device="cuda") + 0.1
        if misaligned:
            q, kv = _misaligned(q), _misaligned(kv)
        w = torch.randn(s, h, device="cuda")
        ks = torch.randint(-5, sk, (s,), device="cuda", dtype=torch.int32)
        ke = (ks + torch.randint(-3, sk, (s,), device="cuda", dtype=torch.int32)).int()
        if wide_windows:
            ks, ke = torch.zeros_like(ks), torch.full_like(ke, sk)
        max_k = 320 if compressed else 0
        out = _launch("fp8_mqa_logits", q, kv, kv_sf, w, ks, ke, not compressed, max_k)
        want = kernels_of("fp8_mqa_logits").reference(q, kv, kv_sf, w, ks, ke, not compressed, max_k)
        if compressed:
            inside = torch.arange(max_k, device="cuda")[None, :] < (ke.clamp(max=sk) - ks)[:, None]
            inside &= (torch.arange(max_k, device="cuda")[None, :] + ks[:, None]) >= 0
            want = torch.where(inside, want, NEG_INF)
            out = torch.where(inside, out, NEG_INF)
        _compare(out, want, True, "prefill")
        torch.cuda.synchronize()
    return run


def _paged(next_n: int, one_dim: bool, page_pad: int, config=None):
    def run():
        batch, h, d, block_kv = 5, 64, 128, 64
        lens = torch.tensor([1, 63, 64, 200, 333][:batch], device="cuda", dtype=torch.int32)
        pages = (lens + block_kv - 1) // block_kv
        num_pages = int(pages.sum()) + 3
        storage = torch.randint(0, 120, (num_pages, block_kv * (d + 4) + page_pad), dtype=torch.uint8, device="cuda")
        scales = torch.rand(num_pages, block_kv, device="cuda") + 0.1
        storage[:, block_kv * d:block_kv * (d + 4)] = scales.view(torch.uint8).view(num_pages, -1)
        cache = storage[:, :block_kv * (d + 4)].view(num_pages, block_kv, 1, d + 4)
        table = torch.randint(0, num_pages, (batch, 6), device="cuda", dtype=torch.int32)  # pages may repeat
        q = torch.randn(batch, next_n, h, d, device="cuda").to(FP8)
        w = torch.randn(batch * next_n, h, device="cuda")
        context = lens if one_dim else torch.stack([lens // 2 + i for i in range(next_n - 1)] + [lens], 1).int()
        context = context.contiguous()
        meta = _launch("get_paged_mqa_logits_metadata", context, block_kv, deep_gemm.get_num_sms(), None)
        want_meta = kernels_of("get_paged_mqa_logits_metadata").reference(context, block_kv, deep_gemm.get_num_sms(),
                                                                          None)
        if not torch.equal(meta, want_meta):
            raise AssertionError("paged schedule differs from the reference")
        kwargs = {} if config is None else {"overrides": AttentionOverrides(paged=config)}
        out = _launch("fp8_paged_mqa_logits", q, cache, w, context, table, meta, 350, True, None, **kwargs)
        want = kernels_of("fp8_paged_mqa_logits").reference(q, cache, w, context, table, meta, 350, True, None)
        _compare(out, want, True, "paged")
        torch.cuda.synchronize()
    return run


CASES = [
    ("prefill_tma_clean", _prefill(False, False)),
    ("prefill_pointer_loads_clean", _prefill(True, False)),
    ("prefill_compressed", _prefill(False, True)),
    ("prefill_interior_wide_windows", _prefill(False, False, wide_windows=True)),
    ("paged_next_n1", _paged(1, False, 0)),
    ("paged_next_n2_pointer_loads", _paged(2, False, 4)),  # page stride not a multiple of 16: no TMA
    ("paged_1d_context_lens", _paged(2, True, 0)),
    # The register levers (row dots, 16-byte Q loads, 7 stages), timed as candidates for the default.
    ("paged_next_n2_register_levers", _paged(2, False, 0, PagedConfig(num_stages=7, row_dots=True,
                                                                      aligned_q_loads=True))),
    ("paged_next_n2_maxnreg_128", _paged(2, False, 0, PagedConfig(num_stages=7, aligned_q_loads=True,
                                                                  max_registers=128))),
    # The row pair's default (the lean page loop) with its page scales in registers (opt-in).
    ("paged_next_n2_register_page_scales", _paged(2, False, 0, PagedConfig(
        num_stages=7, aligned_q_loads=True, max_registers=128, lean_page_loop=True, register_page_scales=True))),
]
