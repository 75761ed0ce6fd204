"""BF16 GEMM calls for compute-sanitizer: small odd shapes through every BF16 op and path (layouts and majorness, C
accumulation, split-K, expert ids with padding rows, psum gaps, masked rows, empty K groups), each checked against an
FP32 torch reference. ``CASES = [(name, fn), ...]``: fn runs one call and raises on a mismatch (the runner in
scripts/gpu/ runs each under the sanitizer's tools)."""

from __future__ import annotations

from dataclasses import replace

import torch

import deep_gemm
from deep_gemm.core.registry import run_launcher
from deep_gemm.gemm.bf16 import launch as bf16_launch
from deep_gemm.gemm.bf16 import plan as bf16_plan
from deep_gemm.gemm.bf16.plan import Bf16Config, Bf16Overrides
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
            result = run_launcher(f"bf16_gemm_{layout}", a, b, d, c, "nk",
                                  launcher_kwargs=dict(overrides=Bf16Overrides(split_k=split)))
            if result is NotImplemented:
                raise AssertionError("the launcher declined the call")
        torch.cuda.synchronize()
        _expect(d, ref, f"bf16_gemm_{layout} {m}x{n}x{k}")
    return run


def _dense_tail_split(m, n, k, accumulate=False):
    """Split-K of the tiles past split_from only (the plan's last-wave split), forced on small sizes."""

    def run():
        a, b = _rand(m, k), _rand(n, k)
        d = _rand(m, n)
        c = d if accumulate else None
        ref = a.float() @ b.float().T + (d.float() if accumulate else 0)
        cfg = Bf16Config(64, 64, 64, 4, 4, split_k=3, split_from=5)
        over = Bf16Overrides(config=cfg, ws=False)
        if run_launcher("bf16_gemm_nt", a, b, d, c, "nk", launcher_kwargs=dict(overrides=over)) is NotImplemented:
            raise AssertionError("the launcher declined the call")
        torch.cuda.synchronize()
        _expect(d, ref, f"bf16_gemm_nt tail split {m}x{n}x{k}")
    return run


def _dense_ws_tail(m, n, k):
    """The WS kernel's whole waves, then the tl.* kernel's split pieces of the last wave (two launches)."""
    def run():
        a, b = _rand(m, k), _rand(n, k)
        d = _rand(m, n)
        over = Bf16Overrides(ws_tail=True)
        call = bf16_launch._call(0, m, n, k, 1, d, None, True, True, True)
        if bf16_plan.plan(call, over).kernel != "ws_tail":
            raise AssertionError("the plan did not pick the WS + split-tail path")
        if run_launcher("bf16_gemm_nt", a, b, d, None, "nk", launcher_kwargs=dict(overrides=over)) is NotImplemented:
            raise AssertionError("the launcher declined the call")
        torch.cuda.synchronize()
        _expect(d, a.float() @ b.float().T, f"bf16_gemm_nt ws_tail {m}x{n}x{k}")
    return run


def _forced_ws(op, m, n, d, c, over):
    """Fail unless the plan for this call runs the warp-specialised kernel (the path the case names)."""
    call = bf16_launch._call(0 if op.startswith("bf16") else 1, m, n, 1, 1, d, c, True, True, True)
    if bf16_plan.plan(call, over).kernel != "ws":
        raise AssertionError(f"{op}: the plan did not pick the warp-specialised kernel")


def _dense_ws(m, n, k, bn, out=BF16, accumulate=False, layout="nt", tail=0):
    """``tail``: the 128 x (bn + tail) tile (Bf16Config.block_n_tail), its config forced whole."""
    def run():
        a_mk, b_nk = _rand(m, k), _rand(n, k)
        a = a_mk.T.contiguous() if layout[0] == "t" else a_mk
        b = b_nk.T.contiguous() if layout[1] == "n" else b_nk
        d = _rand(m, n, dtype=out)
        c = d if accumulate else None
        ref = a_mk.float() @ b_nk.float().T + (d.float() if accumulate else 0)
        over = Bf16Overrides(ws=True, block_m=128, block_n=bn, split_k=1) if not tail else \
            Bf16Overrides(ws=True, config=Bf16Config(128, bn, 64, 5, 4, block_n_tail=tail))
        _forced_ws("bf16_gemm_nt", m, n, d, c, over)
        ran = run_launcher(f"bf16_gemm_{layout}", a, b, d, c, "nk", launcher_kwargs=dict(overrides=over))
        if ran is NotImplemented:
            raise AssertionError("the launcher declined the call")
        torch.cuda.synchronize()
        _expect(d, ref, f"ws bf16_gemm_{layout} {m}x{n}x{k}", 1e-5 if out == BF16 else 1e-9)
    return run


def _contiguous(layout, psum, ws=False, zero_gaps=True, uniform=None):
    """zero_gaps=False: gap rows left untouched (DeepGEMM's SM90 default), which the WS kernel stores slab by slab
    (TMA inside a group, masked pointer stores on the slab holding its end); uniform: the layout's values marked
    warp-uniform (redux.sync)."""
    def run():
        ms, n, k, align = [37, 0, 130], 72, 192, 128  # (an MN-major B needs a K block dividing K)
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
        if ws:
            over = Bf16Overrides(ws=True, block_m=128, block_n=128, uniform_tiles=uniform)
            result = run_launcher(f"m_grouped_bf16_gemm_{layout}_contiguous", a, b_arg, d, ends if psum else ids, "nk",
                                  psum, zero_gaps, launcher_kwargs=dict(overrides=over))
            if result is NotImplemented:
                raise AssertionError("the launcher declined the call")
        else:
            getattr(deep_gemm, f"m_grouped_bf16_gemm_{layout}_contiguous")(a, b_arg, d, ends if psum else ids,
                                                                           use_psum_layout=psum)
        torch.cuda.synchronize()
        valid = torch.zeros(total, dtype=torch.bool, device="cuda")
        for g, (s, mg) in enumerate(zip(starts, ms)):
            valid[s:s + mg] = True
            if mg:
                _expect(d[s:s + mg], a[s:s + mg].float() @ b[g].float().T, f"{layout} group {g}")
        if not zero_gaps and not torch.all(d[~valid] == 3.0):
            raise AssertionError("gap rows were written")
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


def _masked_split_k(num_sms=0):
    """The tl.* masked kernel with its last wave split along K (forced: Bf16Config(32, 128, 128, 5, 4, split_k=4), the
    plan's decode tile): 12 tiles of 32 x 128, all in the last wave of 132 SMs (4 pieces each), or with num_sms = 5
    two whole waves and a last wave of 2 tiles in 2 pieces each (5 // 2). Rows past masked_m stay untouched; K = 520
    is 5 K blocks of 128, the last padded by TMA. A second call must give the same bits (counters reset)."""
    def run():
        from deep_gemm import runtime
        g, max_m, n, k = 3, 100, 136, 520
        a, b = _rand(g, max_m, k), _rand(g, n, k)
        masked = [0, 100, 33]
        masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
        over = Bf16Overrides(config=bf16_plan.Bf16Config(32, 128, 128, 5, 4, split_k=4))
        previous = runtime.get_num_sms()
        if num_sms:
            runtime.set_num_sms(num_sms)
        try:
            outs = []
            for _ in range(2):
                d = torch.full((g, max_m, n), 3.0, device="cuda", dtype=BF16)
                if run_launcher("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, 20, "nk",
                                launcher_kwargs=dict(overrides=over)) is NotImplemented:
                    raise AssertionError("the launcher declined the call")
                outs.append(d)
            torch.cuda.synchronize()
        finally:
            runtime.set_num_sms(previous)
        d = outs[0]
        for i, m in enumerate(masked):
            if m:
                _expect(d[i, :m], a[i, :m].float() @ b[i].float().T, f"masked split group {i}")
            if not torch.all(d[i, m:] == 3.0):
                raise AssertionError(f"masked split group {i}: rows past masked_m were written")
        if not torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)):
            raise AssertionError("masked split: a second call gave other bits")
    return run


def _k_grouped_ref(a, b, c, ks):
    """FP32 reference of a K-grouped call: C[g] + A_g^T B_g, group g owning rows ks[:g].sum() onward of A and B."""
    ref = c.clone()
    start = 0
    for i, kg in enumerate(ks):
        ref[i] += a[start:start + kg].float().T @ b[start:start + kg].float()
        start += kg
    return ref

def _k_grouped():
    ks, m, n = [128, 0, 256], 72, 40
    a, b = _rand(sum(ks), m), _rand(sum(ks), n)
    c = _rand(len(ks), m, n, dtype=torch.float32)
    ref = _k_grouped_ref(a, b, c, ks)
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, c, ks, layout, c)
    torch.cuda.synchronize()
    _expect(c, ref, "k_grouped", 1e-9)



def _masked_ws(g, max_m, n, k, masked_m, expected, bn=None, bm=None):
    """Masked calls on the warp-specialised kernel (its MASKED grouping: tiles placed on the device from masked_m,
    whole slabs by TMA, the slab holding a group's end by pointers): forced (bn given; bm = 64: the 64-row tile whose
    consumers split its columns, SPLIT_N) or the plan's own choice (the default takes it past
    bf16_plan.MASKED_WS_MIN_EXPECTED_M expected rows)."""
    def run():
        a, b = _rand(g, max_m, k), _rand(g, n, k)
        masked = torch.tensor(masked_m, dtype=torch.int32, device="cuda")
        d = torch.full((g, max_m, n), 3.0, device="cuda", dtype=BF16)
        over = Bf16Overrides() if bn is None else Bf16Overrides(ws=True, block_n=bn, block_m=bm)
        call = bf16_launch._call(bf16_plan.GROUPING["masked"], max_m, n, k, g, d, None, True, True, False,
                                 expected_m=expected, d_aligned=True)  # (the launcher's view of these aligned rows)
        if bf16_plan.plan(call, over).kernel != "ws":
            raise AssertionError("masked: the plan did not pick the warp-specialised kernel")
        if run_launcher("m_grouped_bf16_gemm_nt_masked", a, b, d, masked, expected, "nk",
                        launcher_kwargs=dict(overrides=over)) is NotImplemented:
            raise AssertionError("the launcher declined the call")
        torch.cuda.synchronize()
        for i, m in enumerate(masked_m):
            if m:
                _expect(d[i, :m], a[i, :m].float() @ b[i].float().T, f"ws masked group {i}")
            if not torch.all(d[i, m:] == 3.0):
                raise AssertionError(f"ws masked group {i}: rows past masked_m were written")
    return run


def _k_grouped_ws(ks, m, n, c_kind):
    """K-grouped calls on the warp-specialised kernel (forced: at these sizes the plan's cost model prefers tl.*'s
    64 x 64 tiles; large calls with M % 64 == 0 take it by default): FP32 C and D by TMA over [G*M, N]; M = 192
    leaves the last tile's upper slab past M (it must store nothing: those rows are the next group's); an empty
    group stores C (or zeros)."""
    def run():
        a, b = _rand(sum(ks), m), _rand(sum(ks), n)
        d = _rand(len(ks), m, n, dtype=torch.float32)
        c = {"d": d, "none": None, "other": _rand(len(ks), m, n, dtype=torch.float32)}[c_kind]
        ref = _k_grouped_ref(a, b, torch.zeros_like(d) if c is None else c, ks)
        layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
        call = bf16_launch._call(bf16_plan.GROUPING["k_grouped"], m, n, sum(ks), len(ks), d, c, False, False, False,
                                 k_divisor=bf16_plan.k_divisor_of(ks), d_aligned=True)
        call = replace(call, c_tma=c is not None)  # (C is D or laid out as D: the launcher's c_tma)
        over = Bf16Overrides(ws=True)
        if bf16_plan.plan(call, over).kernel != "ws":
            raise AssertionError("k_grouped: the plan did not pick the warp-specialised kernel")
        if run_launcher("k_grouped_bf16_gemm_tn_contiguous", a, b, d, ks, layout, c, "mn", False,
                        launcher_kwargs=dict(overrides=over)) is NotImplemented:
            raise AssertionError("the launcher declined the call")
        torch.cuda.synchronize()
        _expect(d, ref, f"ws k_grouped {m}x{n} c={c_kind}", 1e-9)
    return run

CASES = [
    *[(f"dense_{layout}_40x72x200", _dense(layout, 40, 72, 200)) for layout in ("nt", "nn", "tn", "tt")],
    ("dense_nt_1x40x1000_fp32_acc", _dense("nt", 1, 40, 1000, torch.float32, True)),
    ("dense_nn_129x136x72_acc", _dense("nn", 129, 136, 72, BF16, True)),
    ("dense_nt_5x200x4096_split4", _dense("nt", 5, 200, 4096, split=4)),
    ("dense_nt_200x300x520_tail_split", _dense_tail_split(200, 300, 520)),
    ("dense_nt_130x136x200_tail_split_acc", _dense_tail_split(130, 136, 200, True)),
    ("dense_nt_2048x1152x1024_ws_tail", _dense_ws_tail(2048, 1152, 1024)),
    ("m_grouped_nt_ids", _contiguous("nt", False)),
    ("m_grouped_nn_psum", _contiguous("nn", True)),
    ("m_grouped_nt_ids_ws", _contiguous("nt", False, ws=True)),
    ("m_grouped_nn_psum_ws", _contiguous("nn", True, ws=True)),
    ("m_grouped_nt_psum_ws_untouched_gaps_uniform", _contiguous("nt", True, ws=True, zero_gaps=False, uniform=True)),
    ("dense_nt_ws_130x72x200_128x256", _dense_ws(130, 72, 200, 256)),
    ("dense_tn_ws_136x200x72_acc", _dense_ws(136, 200, 72, 128, accumulate=True, layout="tn")),
    ("dense_nn_ws_129x136x200_fp32_acc", _dense_ws(129, 136, 200, 128, torch.float32, True, layout="nn")),
    ("dense_nt_ws_tail_130x296x200_128x128t16", _dense_ws(130, 296, 200, 128, tail=16)),
    ("dense_tn_ws_tail_200x520x136_128x128t64", _dense_ws(200, 520, 136, 128, layout="tn", tail=64)),
    ("masked", _masked),
    ("k_grouped_with_empty_group", _k_grouped),
    ("masked_ws_forced_128x256_200x136", _masked_ws(3, 200, 136, 136, [0, 200, 129], 150, 256)),
    ("masked_ws_forced_128x128_200x136", _masked_ws(3, 200, 136, 136, [129, 0, 65], 150, 128)),
    ("masked_ws_default_640x72", _masked_ws(2, 640, 72, 136, [600, 517], 600)),
    ("masked_ws_forced_64x256_split_n_200x136", _masked_ws(3, 200, 136, 136, [0, 200, 65], 150, 256, 64)),
    ("masked_split_k_100x136", _masked_split_k()),
    ("masked_split_k_last_wave_100x136", _masked_split_k(5)),
    ("k_grouped_ws_192x136_c_is_d", _k_grouped_ws([128, 0, 256], 192, 136, "d")),
    ("k_grouped_ws_128x72_no_c", _k_grouped_ws([64, 192], 128, 72, "none")),
    ("k_grouped_ws_256x40_c_separate", _k_grouped_ws([0, 128, 64], 256, 40, "other")),
]

if __name__ == "__main__":
    for name, fn in CASES:
        fn()
        print("ok", name)
