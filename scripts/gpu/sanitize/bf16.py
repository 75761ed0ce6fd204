"""BF16 GEMM calls for compute-sanitizer: small odd shapes through every BF16 op and path (layouts and majorness, C
accumulation, split-K, expert ids with padding rows, psum gaps, masked rows, empty K groups), each checked against an
FP32 torch reference. ``CASES = [(name, fn), ...]``: fn runs one call and raises on a mismatch (the runner in
scripts/gpu/ runs each under the sanitizer's tools)."""

from __future__ import annotations

import torch

import deep_gemm
from deep_gemm._ops.library import run_launcher
from deep_gemm.gemm.bf16_plan import Bf16Overrides
from deep_gemm.testing import calc_diff

BF16 = torch.bfloat16


def _rand(*shape, dtype=BF16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _expect(out, ref, what, bound=1e-5):
    diff = calc_diff(out, ref)
    if not diff < bound:
        raise AssertionError(f"{what}: calc_diff {diff:.3e} >= {bound:.0e}")


def _dense(layout, m, n, k, out=BF16, accumulate=False, split=None):
    def run():
        a_mk, b_nk = _rand(m, k), _rand(n, k)
        a = a_mk.T.contiguous() if layout[0] == "t" else a_mk
        b = b_nk.T.contiguous() if layout[1] == "n" else b_nk
        d = _rand(m, n, dtype=out)
        ref = a_mk.float() @ b_nk.float().T + (d.float() if accumulate else 0)
        c = d if accumulate else None
        if split is None:
            getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d, c=c)
        else:
            run_launcher(f"bf16_gemm_{layout}", a, b, d, c, "nk",
                         launcher_kwargs=dict(overrides=Bf16Overrides(split_k=split)))
        torch.cuda.synchronize()
        _expect(d, ref, f"bf16_gemm_{layout} {m}x{n}x{k}")
    return run


def _contiguous(layout, psum):
    def run():
        ms, n, k, align = [37, 0, 130], 72, 200, 128
        starts, total = [], 0
        for mg in ms:
            starts.append(total)
            total += (mg + align - 1) // align * align
        a, b = _rand(total, k), _rand(len(ms), n, k)
        ids = torch.full((total,), -1, dtype=torch.int32, device="cuda")
        for g, (s, mg) in enumerate(zip(starts, ms)):
            ids[s:s + mg] = g
        ends = torch.tensor([s + mg for s, mg in zip(starts, ms)], dtype=torch.int32, device="cuda")
        d = torch.full((total, n), 3.0, device="cuda", dtype=BF16)
        b_arg = b if layout == "nt" else b.transpose(1, 2).contiguous()
        getattr(deep_gemm, f"m_grouped_bf16_gemm_{layout}_contiguous")(a, b_arg, d, ends if psum else ids,
                                                                       use_psum_layout=psum)
        torch.cuda.synchronize()
        for g, (s, mg) in enumerate(zip(starts, ms)):
            if mg:
                _expect(d[s:s + mg], a[s:s + mg].float() @ b[g].float().T, f"{layout} group {g}")
    return run


def _masked():
    g, max_m, n, k = 3, 100, 72, 136
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    masked = torch.tensor([0, 100, 33], dtype=torch.int32, device="cuda")
    d = torch.full((g, max_m, n), 3.0, device="cuda", dtype=BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, 40)
    torch.cuda.synchronize()
    for i, m in enumerate(masked.tolist()):
        if m:
            _expect(d[i, :m], a[i, :m].float() @ b[i].float().T, f"masked group {i}")
        if not torch.all(d[i, m:] == 3.0):
            raise AssertionError(f"masked group {i}: rows past masked_m were written")


def _k_grouped():
    ks, m, n = [128, 0, 256], 72, 40
    a, b = _rand(sum(ks), m), _rand(sum(ks), n)
    c = _rand(len(ks), m, n, dtype=torch.float32)
    ref = c.clone()
    start = 0
    for i, kg in enumerate(ks):
        ref[i] += a[start:start + kg].float().T @ b[start:start + kg].float()
        start += kg
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, c, ks, layout, c)
    torch.cuda.synchronize()
    _expect(c, ref, "k_grouped", 1e-9)


CASES = [
    *[(f"dense_{layout}_40x72x200", _dense(layout, 40, 72, 200)) for layout in ("nt", "nn", "tn", "tt")],
    ("dense_nt_1x40x1000_fp32_acc", _dense("nt", 1, 40, 1000, torch.float32, True)),
    ("dense_nn_129x136x72_acc", _dense("nn", 129, 136, 72, BF16, True)),
    ("dense_nt_5x200x4096_split4", _dense("nt", 5, 200, 4096, split=4)),
    ("m_grouped_nt_ids", _contiguous("nt", False)),
    ("m_grouped_nn_psum", _contiguous("nn", True)),
    ("masked", _masked),
    ("k_grouped_with_empty_group", _k_grouped),
]

if __name__ == "__main__":
    for name, fn in CASES:
        fn()
        print("ok", name)
