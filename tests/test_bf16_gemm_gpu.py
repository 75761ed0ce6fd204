"""BF16 GEMM Triton kernels on the GPU: DeepSeek shapes (DeepGEMM's test_bf16 rows) and odd shapes against an FP32
torch reference with calc_diff, every layout and op, empty groups and untouched rows, split-K, the replay fast
path, CUDA-graph capture and replay, torch.compile, and first-time compilation from 8 threads. Skipped without
CUDA."""

from __future__ import annotations

import threading

import pytest
import torch

import deep_gemm
from deep_gemm.gemm.bf16 import plan as bf16_plan
from deep_gemm.gemm.bf16.plan import Bf16Overrides
from deep_gemm.gemm.bf16.plan import Bf16Config
from deep_gemm.testing import calc_diff

from triton_harness import run_forced
from test_bf16_gemm_cpu import BENCH_ROWS

pytestmark = pytest.mark.gpu
BF16 = torch.bfloat16
TOL = 1e-5  # DeepGEMM's own bound for BF16 GEMMs
DEEPSEEK_NK = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
ODD = [(1, 8, 8), (37, 200, 208), (37, 4096, 7168), (129, 1000, 384), (4095, 2112, 7168), (256, 576, 136),
       (1000, 1000, 1000)]


def _rand(*shape, dtype=BF16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _ref(a_mk, b_nk, c=None):
    torch.backends.cuda.matmul.allow_tf32 = False
    out = a_mk.float() @ b_nk.float().T
    return out if c is None else out + c.float()


def _row_major(x):
    """x in row-major storage; rows padded to 16 bytes where needed (TMA), so odd sizes stay legal."""
    rows, cols = x.shape
    if cols % 8 == 0:
        return x.contiguous()
    buf = torch.empty(rows, (cols + 7) // 8 * 8, device=x.device, dtype=x.dtype)
    buf[:, :cols] = x
    return buf[:, :cols]


def _given(layout, a_mk, b_nk):
    """a, b as a caller of the ``layout`` op passes them (contiguous, as DeepGEMM's test does, or row-padded)."""
    a = _row_major(a_mk.T) if layout[0] == "t" else a_mk
    b = _row_major(b_nk.T) if layout[1] == "n" else b_nk
    return a, b


def test_backend_is_triton():
    backends = deep_gemm.backends()
    for op in ("bf16_gemm_nt", "bf16_gemm_tn", "m_grouped_bf16_gemm_nt_contiguous", "m_grouped_bf16_gemm_nt_masked",
               "k_grouped_bf16_gemm_tn_contiguous"):
        assert backends[op].startswith("triton"), (op, backends[op])


@pytest.mark.parametrize("m", [1, 128, 4096])
@pytest.mark.parametrize("n,k", DEEPSEEK_NK)
@pytest.mark.parametrize("accumulate", [False, True])
def test_dense_deepseek_shapes(m, n, k, accumulate):
    a, b = _rand(m, k), _rand(n, k)
    d = _rand(m, n) * 32 if accumulate else torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
    ref = _ref(a, b, d if accumulate else None)
    deep_gemm.bf16_gemm_nt(a, b, d, c=d if accumulate else None)
    assert calc_diff(d, ref) < TOL


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
@pytest.mark.parametrize("m,n,k", [(4096, 7168, 2048), (7168, 4096, 4096), (256, 129280, 512)])
def test_dense_layouts_fp32_out(layout, m, n, k):
    a_mk, b_nk = _rand(m, k), _rand(n, k)
    a, b = _given(layout, a_mk, b_nk)
    d = _rand(m, n, dtype=torch.float32)
    ref = _ref(a_mk, b_nk, d)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d, c=d)
    assert calc_diff(d, ref) < 1e-9
    d2 = torch.empty(m, n, device="cuda", dtype=BF16)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d2)
    assert calc_diff(d2, _ref(a_mk, b_nk)) < TOL


@pytest.mark.parametrize("m,n,k", ODD)
def test_dense_odd_shapes(m, n, k):
    for layout in ("nt", "tn"):
        a_mk, b_nk = _rand(m, k), _rand(n, k)
        a, b = _given(layout, a_mk, b_nk)
        c = _rand(m, n)
        d = torch.empty(m, n, device="cuda", dtype=BF16)
        getattr(deep_gemm, f"bf16_gemm_{layout}")(a, b, d, c=c)
        assert calc_diff(d, _ref(a_mk, b_nk, c)) < TOL, layout


@pytest.mark.parametrize("split", [2, 4, 8])
@pytest.mark.parametrize("m,n,k", [(1, 2112, 7168), (64, 576, 7168), (37, 200, 4096)])
def test_split_k(split, m, n, k):
    a, b = _rand(m, k), _rand(n, k)
    d = _rand(m, n, dtype=torch.float32)
    ref = _ref(a, b, d)
    run_forced("bf16_gemm_nt", a, b, d, d, "nk", overrides=Bf16Overrides(split_k=split))
    assert calc_diff(d, ref) < 1e-9
    # Deterministic: the last split sums the partials in split order.
    outs = []
    for _ in range(3):
        e = torch.empty(m, n, device="cuda", dtype=BF16)
        run_forced("bf16_gemm_nt", a, b, e, None, "nk", overrides=Bf16Overrides(split_k=split))
        outs.append(e)
    assert all(torch.equal(outs[0], e) for e in outs[1:])


@pytest.mark.parametrize("m,n,k", [(1, 2112, 7168), (128, 576, 7168), (4096, 4096, 512), (37, 200, 208)])
def test_repeated_calls_replay_the_launch_plan(monkeypatch, m, n, k):
    """The first call of a signature plans and launches (and records); later calls replay the recorded launch
    without planning: the launcher's planning path runs once, results stay right with fresh tensors."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    bf16_launch.PLANS.clear()  # (earlier tests may have recorded this signature already)
    planned = []
    execute = bf16_launch._execute
    monkeypatch.setattr(bf16_launch, "_execute", lambda *a, **kw: (planned.append(1), execute(*a, **kw))[1])
    for _ in range(4):
        a, b = _rand(m, k), _rand(n, k)
        d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
        deep_gemm.bf16_gemm_nt(a, b, d)
        assert calc_diff(d, _ref(a, b)) < TOL
    assert len(planned) == 1 and len(bf16_launch.PLANS) == 1


def _contiguous(num_groups, ms, n, k, alignment=128, psum=False):
    starts, total = [], 0
    for mg in ms:
        starts.append(total)
        total += (mg + alignment - 1) // alignment * alignment
    a = _rand(total, k)
    b = _rand(num_groups, n, k)
    ids = torch.full((total,), -1, dtype=torch.int32, device="cuda")
    ref = torch.zeros(total, n, device="cuda")
    for g, (s, mg) in enumerate(zip(starts, ms)):
        ids[s:s + mg] = g
        a[s + mg:s + (mg + alignment - 1) // alignment * alignment] = 0
        ref[s:s + mg] = _ref(a[s:s + mg], b[g])
    ends = torch.tensor([s + mg for s, mg in zip(starts, ms)], dtype=torch.int32, device="cuda")
    return a, b, (ends if psum else ids), ref, starts


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("ms,n,k", [([8192, 0, 8000, 3], 4096, 4096), ([300, 5000, 1], 7168, 3072),
                                    ([1, 0, 129], 576, 7168)])
def test_m_grouped_contiguous(layout, psum, ms, n, k):
    a, b, grouped, ref, starts = _contiguous(len(ms), ms, n, k, psum=psum)
    d = torch.full((a.size(0), n), 7.0, device="cuda", dtype=BF16)
    b_arg = b if layout == "nt" else b.transpose(1, 2).contiguous()
    getattr(deep_gemm, f"m_grouped_bf16_gemm_{layout}_contiguous")(a, b_arg, d, grouped, use_psum_layout=psum)
    for s, mg in zip(starts, ms):
        if mg:
            assert calc_diff(d[s:s + mg], ref[s:s + mg]) < TOL
    if not psum:
        assert torch.all(d[grouped == -1] == 0)


@pytest.mark.parametrize("n,k", [(2112, 7168), (576, 7168), (24576, 1536)])
def test_deterministic_mode_is_batch_invariant(n, k):
    """use_deterministic_algorithms(True): a row's result is the same bits whatever the batch (M = 1 would split K
    by default); a request of one row against the same row in 1, 64 and 4096-row batches."""
    a, b = _rand(4096, k), _rand(n, k)
    before = deep_gemm.get_deterministic_algorithms()
    deep_gemm.use_deterministic_algorithms(True)
    try:
        rows = {}
        for m in (1, 64, 4096):
            d = torch.empty(m, n, device="cuda", dtype=BF16)
            deep_gemm.bf16_gemm_nt(a[:m], b, d)
            rows[m] = d[:1].clone()
    finally:
        deep_gemm.use_deterministic_algorithms(before)
    assert calc_diff(rows[1], _ref(a[:1], b)) < TOL
    for m in (64, 4096):
        assert torch.equal(rows[1].view(torch.int16), rows[m].view(torch.int16)), f"row 0 differs at M = {m}"


@pytest.mark.parametrize("walk", [None, True, False])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("g,expected,n,k", [(32, 20, 4096, 4096), (6, 192, 7168, 3072), (6, 1024, 4096, 2048),
                                            (5, 3, 200, 136)])
def test_psum_decode_form(g, expected, n, k, layout, walk):
    """DeepGEMM's masked-through-psum form: A of G x Mmax rows, group g's ~expected rows from align(end[g-1]),
    expected_m_for_psum_layout given, gaps left untouched; by the default plan and with the group-end walk forced
    on and off."""
    max_m = 4096 if n > 1000 else 256
    ms = torch.randint(int(expected * 0.7), int(expected * 1.3) + 1, (g,)).tolist()
    ms[1] = 0
    a = _rand(g * max_m, k)
    b = _rand(g, n, k)
    ends, starts, prev = [], [], 0
    for mg in ms:
        starts.append((prev + 127) // 128 * 128)
        prev = starts[-1] + mg
        ends.append(prev)
    d = torch.full((g * max_m, n), 7.0, device="cuda", dtype=BF16)
    b_arg = b if layout == "nt" else b.transpose(1, 2).contiguous()
    layout_t = torch.tensor(ends, dtype=torch.int32, device="cuda")
    args = (a, b_arg, d, layout_t, "nk", True, False, expected)
    if layout == "nt" or k % 16 == 0:
        run_forced(f"m_grouped_bf16_gemm_{layout}_contiguous", *args, overrides=Bf16Overrides(psum_walk=walk))
    else:  # stacked N-major B: no K step (16 at least) stays inside a group, the launcher declines, the reference runs
        getattr(deep_gemm, f"m_grouped_bf16_gemm_{layout}_contiguous")(*args)
    owned = torch.zeros(g * max_m, dtype=torch.bool, device="cuda")
    for group, (s, e) in enumerate(zip(starts, ends)):  # (an empty group shares its start with the next one)
        owned[s:e] = True
        if e > s:
            assert calc_diff(d[s:e], _ref(a[s:e], b[group])) < TOL
    assert torch.all(d[~owned] == 7.0), "rows of no group are untouched"


@pytest.mark.parametrize("g,expected,n,k", [(32, 192, 6144, 7168), (6, 1024, 7168, 3072), (32, 20, 4096, 4096),
                                            (6, 20, 4096, 2048), (4, 100, 200, 136)])
def test_masked(g, expected, n, k):
    max_m = 4096 if n > 1000 else 256
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    masked = torch.randint(int(expected * 0.7), int(expected * 1.3) + 1, (g,), device="cuda", dtype=torch.int32)
    masked[0] = 0
    d = torch.full((g, max_m, n), 7.0, device="cuda", dtype=BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, expected)
    for i, m in enumerate(masked.tolist()):
        if m:
            assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL
        assert torch.all(d[i, m:] == 7.0), "rows past masked_m are untouched"


# More than 2^31 output elements (72 x 4160 x 8192, 4.9 GB of D): the last groups' offsets pass int32; only the
# last two groups have rows.
@pytest.mark.parametrize("over", [None, Bf16Overrides(ws=False), Bf16Overrides(ws=True)])
def test_masked_output_past_int32_offsets(over):
    g, max_m, n, k = 72, 4160, 8192, 128
    assert (g - 1) * max_m * n > 2 ** 31
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    masked = torch.zeros(g, device="cuda", dtype=torch.int32)
    masked[g - 2], masked[g - 1] = 129, max_m
    d = torch.full((g, max_m, n), 7.0, device="cuda", dtype=BF16)
    _masked_run(a, b, d, masked, max_m, over)
    torch.cuda.synchronize()
    for i in (g - 2, g - 1):
        m = int(masked[i])
        assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL, i
        assert torch.all(d[i, m:] == 7.0), f"rows past masked_m are untouched (group {i})"
    assert torch.all(d[: g - 2] == 7.0), "groups without rows are untouched"


# Masked decode rows (DeepGEMM's G = 6 / 32 x 20 expected rows) and the split of their last wave
# (bf16_plan.masked_split: 6 x 6144 x 7168 and 6 x 4096 x 4096 split; gemm/bf16/kernels/gemm.py cuts the last wave's
# tiles on the device). Mmax 64: the plan sees the expected rows, not Mmax, and the rows past masked_m must stay
# untouched either way.
MASKED_NK = [(6144, 7168), (7168, 3072), (4096, 4096), (4096, 2048)]


def _masked_run(a, b, d, masked, expected, over):
    if over is None:
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, expected)
    else:
        run_forced("m_grouped_bf16_gemm_nt_masked", a, b, d, masked, expected, "nk", overrides=over)


def _masked_check(a, b, masked, expected, over, max_m=64, calls=2):
    """Run the masked op ``calls`` times on fresh sentinel-filled D; check each group's rows against FP32 torch,
    the rows past masked_m untouched, and the same bits every call. Returns D."""
    g, n = b.size(0), b.size(1)
    outs = []
    for _ in range(calls):
        d = torch.full((g, max_m, n), 7.0, device="cuda", dtype=BF16)
        _masked_run(a, b, d, masked, expected, over)
        outs.append(d)
    torch.cuda.synchronize()
    d = outs[0]
    for i, m in enumerate(masked.tolist()):
        if m:
            assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL, (over, i)
        assert torch.all(d[i, m:] == 7.0), f"rows past masked_m are untouched ({over}, group {i})"
    for other in outs[1:]:
        assert torch.equal(other.view(torch.int16), d.view(torch.int16)), f"the same bits every call ({over})"
    return d


@pytest.mark.parametrize("g", [6, 32])
@pytest.mark.parametrize("n,k", MASKED_NK)
def test_masked_decode_rows_split_k(g, n, k):
    """The plan (split where masked_split says), unsplit and a forced split of 4, each against the reference."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    expected, max_m = 20, 64
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    masked = torch.randint(14, 27, (g,), device="cuda", dtype=torch.int32)  # (DeepGEMM's expected_m x 0.7-1.3)
    call = bf16_launch._call(bf16_plan.GROUPING["masked"], max_m, n, k, g, torch.empty(1, device="cuda", dtype=BF16),
                             None, True, True, False, expected_m=expected, d_aligned=True)
    split = bf16_plan.plan(call).config.split_k
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if sms == 132:  # (the rows the plan splits on the H200)
        assert split == {(6, 6144, 7168): 4, (6, 4096, 4096): 2}.get((g, n, k), 1), split
    plan = _masked_check(a, b, masked, expected, None, max_m)
    unsplit = _masked_check(a, b, masked, expected, Bf16Overrides(split_k=1), max_m)
    _masked_check(a, b, masked, expected, Bf16Overrides(split_k=4), max_m)
    if split == 1:
        assert torch.equal(plan.view(torch.int16), unsplit.view(torch.int16))


@pytest.mark.parametrize("masked", [[0, 40, 20, 17, 26, 5], [0, 0, 0, 0, 0, 0], [33, 64, 1, 0, 2, 31]])
@pytest.mark.parametrize("split", [None, 2, 8])
def test_masked_split_k_empty_and_tall_groups(masked, split):
    """Empty groups (no tile, no piece), groups past one 32-row tile, single rows; the plan's split and forced ones
    (the kernel cuts the last wave into min(split, 132 // its tiles) pieces)."""
    g, max_m, n, k = 6, 64, 4096, 4096
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    over = None if split is None else Bf16Overrides(split_k=split)
    _masked_check(a, b, torch.tensor(masked, dtype=torch.int32, device="cuda"), 20, over, max_m)


def test_masked_split_k_in_cuda_graph():
    """A captured masked call whose plan splits its last wave (6 x 4096 x 4096, 20 expected rows): replays give the
    eager bits, and masked_m changed between replays changes the tiles, the last wave and its split on the device
    (192 tiles: a last wave of 60 in 2 pieces; 160: 28 in 2; 224: 92, unsplit; 0 tiles)."""
    g, max_m, n, k = 6, 64, 4096, 4096
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    masked = torch.full((g,), 20, dtype=torch.int32, device="cuda")
    d = torch.full((g, max_m, n), 7.0, device="cuda", dtype=BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, 20)  # (compile outside the capture)
    eager = d.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, 20)
    for _ in range(3):
        d.fill_(7.0)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(d.view(torch.int16), eager.view(torch.int16))
    for values in ([0, 20, 20, 20, 20, 20], [40, 20, 20, 20, 20, 20], [0] * 6, [26, 14, 1, 64, 0, 20]):
        masked.copy_(torch.tensor(values, dtype=torch.int32))
        d.fill_(7.0)
        graph.replay()
        torch.cuda.synchronize()
        for i, m in enumerate(values):
            if m:
                assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL, (values, i)
            assert torch.all(d[i, m:] == 7.0), (values, i)


@pytest.mark.parametrize("g,m,n,k_per", [(4, 4096, 7168, 8192), (8, 7168, 2048, 4096), (16, 4096, 7168, 2048),
                                         (3, 200, 136, 256)])
def test_k_grouped(g, m, n, k_per):
    ks = [(int(k_per * f) + 127) // 128 * 128 for f in torch.linspace(0.7, 1.3, g).tolist()]
    ks[1] = 0  # an empty group: D[1] = C[1]
    a, b = _rand(sum(ks), m), _rand(sum(ks), n)
    c = _rand(g, m, n, dtype=torch.float32) * 32
    ref = c.clone()
    start = 0
    for i, kg in enumerate(ks):
        ref[i] += _ref(a[start:start + kg].T, b[start:start + kg].T)
        start += kg
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, c, ks, layout, c)
    assert calc_diff(c, ref) < 1e-9


def test_k_grouped_psum_layout_on_the_reference():
    """use_psum_layout on CUDA: the torch reference (no host read of the ends, so a CUDA graph can capture it);
    padding K rows between a group's end and the next aligned start reach no group."""
    ends = [300, 300, 1000, 1408]  # groups [0, 300), empty, [384, 1000), [1024, 1408)
    m, n = 256, 200
    a, b = _rand(1408, m), _rand(1408, n)
    c = _rand(4, m, n, dtype=torch.float32)
    ref = c.clone()
    previous = 0
    for i, end in enumerate(ends):
        start = (previous + 127) // 128 * 128
        ref[i] += _ref(a[start:end].T, b[start:end].T)
        previous = end
    layout = torch.tensor(ends, dtype=torch.int32, device="cuda")
    d = torch.empty_like(c)
    graph = torch.cuda.CUDAGraph()
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, None, layout, c, use_psum_layout=True)  # (warm-up)
    with torch.cuda.graph(graph):
        deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, None, layout, c, use_psum_layout=True)
    d.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert calc_diff(d, ref) < 1e-9


@pytest.mark.parametrize("m,n,k", [(4096, 2112, 7168), (4096, 2176, 7168), (4096, 576, 7168), (4095, 600, 1000),
                                   (300, 1000, 64)])
@pytest.mark.parametrize("accumulate", [False, True])
def test_last_wave_split(m, n, k, accumulate):
    """Split-K of the tiles past the whole waves (Bf16Config.split_from): the plan's own choice (4096 x 2176: the WS
    kernel's whole waves, then the tl.* kernel's pieces; 4096 x 2112 and x 576 without C: the WS kernel's
    128 x (128 + tail) tile), without the WS kernel, and forced ones (split_from past
    the tiles, every tile split); the same bits on every call."""
    a, b = _rand(m, k), _rand(n, k)
    c = _rand(m, n) * 8 if accumulate else None
    ref = _ref(a, b, c)
    tiles = -(-m // 128) * -(-n // 128)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    overs = [Bf16Overrides(), Bf16Overrides(ws=False)]
    overs += [Bf16Overrides(config=Bf16Config(128, 128, 64, 4, 8, split_k=s, split_from=f))
              for s, f in ((4, tiles // sms * sms), (16, tiles + 5), (3, 0))]
    for over in overs:
        outs = []
        for _ in range(2):  # the second call replays the recorded launch
            d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
            run_forced("bf16_gemm_nt", a, b, d, c, "nk", overrides=over)
            outs.append(d)
        assert calc_diff(outs[0], ref) < TOL, over
        assert torch.equal(outs[0], outs[1]), over


def _captured(call, d, eager):
    """call() captured in a CUDA graph whose replays rewrite d (cleared to NaN first) with eager's bits, 3 times."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for _ in range(3):
        d.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(d, eager)
    return graph


@pytest.mark.parametrize("m,split", [(1, None), (64, 4), (4096, None)])
def test_cuda_graph_capture_and_replay(m, split):
    n, k = 2112, 7168
    a, b = _rand(m, k), _rand(n, k)
    d = torch.empty(m, n, device="cuda", dtype=BF16)
    over = Bf16Overrides(split_k=split) if split else None

    def call():
        if over is None:
            deep_gemm.bf16_gemm_nt(a, b, d)
        else:
            run_forced("bf16_gemm_nt", a, b, d, None, "nk", overrides=over)
    call()  # compile outside the capture
    eager = d.clone()
    assert calc_diff(eager, _ref(a, b)) < TOL
    graph = _captured(call, d, eager)
    a.copy_(_rand(m, k))
    graph.replay()
    torch.cuda.synchronize()
    assert calc_diff(d, _ref(a, b)) < TOL


def test_masked_in_cuda_graph_reads_masked_m_on_device():
    g, max_m, n, k = 4, 256, 512, 1024
    a, b = _rand(g, max_m, k), _rand(g, n, k)
    masked = torch.tensor([10, 0, 256, 77], dtype=torch.int32, device="cuda")
    d = torch.zeros(g, max_m, n, device="cuda", dtype=BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, 64)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, masked, 64)
    masked.copy_(torch.tensor([200, 3, 0, 256], dtype=torch.int32))
    d.zero_()
    graph.replay()
    torch.cuda.synchronize()
    for i, m in enumerate(masked.tolist()):
        if m:
            assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL
        assert torch.all(d[i, m:] == 0)


def test_torch_compile_fullgraph():
    a, b = _rand(256, 512), _rand(384, 512)

    def block(x, w):
        d = torch.empty(x.size(0), w.size(0), device=x.device, dtype=BF16)
        torch.ops.deep_gemm.bf16_gemm_nt(x, w, d, None, "nk")
        return d.float().relu()

    compiled = torch.compile(block, fullgraph=True)
    got = compiled(a, b)
    assert calc_diff(got, _ref(a, b).relu()) < TOL


def test_eight_threads_compile_and_run():
    shapes = [(1 + 37 * i, 256 + 64 * i, 512 + 128 * (i % 3)) for i in range(8)]
    errors = []

    def work(i):
        try:
            m, n, k = shapes[i]
            a, b = _rand(m, k), _rand(n, k)
            d = torch.empty(m, n, device="cuda", dtype=BF16 if i % 2 else torch.float32)
            layout = ("nt", "tn", "nn", "tt")[i % 4]
            a_in, b_in = _given(layout, a, b)
            getattr(deep_gemm, f"bf16_gemm_{layout}")(a_in, b_in, d)
            torch.cuda.current_stream().synchronize()
            assert calc_diff(d, _ref(a, b)) < TOL
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append((i, repr(exc)))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(shapes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
@pytest.mark.parametrize("m,n,k,bn", [(4096, 2112, 7168, 256), (4096, 576, 7168, 128), (300, 1000, 200, 256),
                                      (129, 24576, 1536, 128), (4096, 7168, 2048, 256)])
def test_warp_specialised_opt_in(layout, m, n, k, bn):
    """The Gluon WS kernel forced (Bf16Overrides(ws=True)) on 128-row tiles: every majorness, M/N/K tails."""
    a_mk, b_nk = _rand(m, k), _rand(n, k)
    a, b = _given(layout, a_mk, b_nk)
    over = Bf16Overrides(ws=True, block_m=128, block_n=bn, split_k=1)
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    call = bf16_launch._call(0, m, n, k, 1, torch.empty(m, n, device="cuda", dtype=BF16), None, layout[0] == "n",
                             layout[1] == "t", True)
    assert bf16_plan.plan(call, over).kernel == "ws"
    for _ in range(2):  # the second call replays the recorded launch
        d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
        run_forced(f"bf16_gemm_{layout}", a, b, d, None, "nk", overrides=over)
        assert calc_diff(d, _ref(a_mk, b_nk)) < TOL


@pytest.mark.parametrize("layout", ["nt", "tn"])
@pytest.mark.parametrize("m,n,k,tail", [(4096, 576, 7168, 16), (4095, 576, 7168, 16), (300, 200, 208, 16),
                                        (300, 200, 208, 64), (129, 2112, 7168, 64), (1000, 1000, 1000, 32)])
def test_warp_specialised_tile_with_tail_columns(layout, m, n, k, tail):
    """The Gluon WS kernel's 128 x (128 + tail) tile (TAIL_N), forced: M not a multiple of 128, N ending in the main
    block, in the tail, or with a tail wholly past N (N = 200: the second 144-wide tile's tail starts at column 272);
    K-major ("nt") and MN-major ("tn": A as [K, M], B as [K, N]) operands."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    from deep_gemm.gemm.bf16.plan import Bf16Config
    a_mk, b_nk = _rand(m, k), _rand(n, k)
    a, b = _given(layout, a_mk, b_nk)
    over = Bf16Overrides(ws=True, config=Bf16Config(128, 128, 64, 5, 4, block_n_tail=tail))
    call = bf16_launch._call(0, m, n, k, 1, torch.empty(m, n, device="cuda", dtype=BF16), None, layout[0] == "n",
                             layout[1] == "t", True)
    p = bf16_plan.plan(call, over)
    assert p.kernel == "ws" and p.config.block_n_tail == tail, p
    for _ in range(2):  # the second call replays the recorded launch
        d = torch.full((m, n), float("nan"), device="cuda", dtype=BF16)
        run_forced(f"bf16_gemm_{layout}", a, b, d, None, "nk", overrides=over)
        assert calc_diff(d, _ref(a_mk, b_nk)) < TOL
        assert not d.isnan().any(), "every column of D is written (the tail slabs included)"


@pytest.mark.parametrize("psum", [False, True])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("ms,n,k,bn", [([8192, 0, 8000, 3], 4096, 4096, 256), ([300, 5000, 1], 7168, 3072, 128)])
def test_warp_specialised_m_grouped_opt_in(layout, psum, ms, n, k, bn):
    """The Gluon WS kernel forced on M-grouped contiguous layouts: empty groups, padding rows, gap rows zeroed."""
    a, b, grouped, ref, starts = _contiguous(len(ms), ms, n, k, psum=psum)
    b_arg = b if layout == "nt" else b.transpose(1, 2).contiguous()
    over = Bf16Overrides(ws=True, block_m=128, block_n=bn)
    for _ in range(2):  # the second call replays the recorded launch
        d = torch.full((a.size(0), n), 7.0, device="cuda", dtype=BF16)
        run_forced(f"m_grouped_bf16_gemm_{layout}_contiguous", a, b_arg, d, grouped, "nk", psum, True,
                   overrides=over)
        valid = torch.zeros(a.size(0), dtype=torch.bool, device="cuda")
        for s, mg in zip(starts, ms):
            valid[s:s + mg] = True
            if mg:
                assert calc_diff(d[s:s + mg], ref[s:s + mg]) < TOL
        assert torch.all(d[~valid] == 0), "padding and gap rows are stored as zeros"


@pytest.mark.parametrize("uniform", [False, True])
@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("ms,spare,n,k,bn", [([100, 0, 8000, 3], 256, 576, 3072, 256),
                                             ([300, 5000, 1], 0, 4096, 2048, 256),
                                             ([256, 5000, 64], 128, 1000, 1024, 128)])
def test_warp_specialised_psum_with_untouched_gaps(layout, uniform, ms, spare, n, k, bn):
    """The Gluon WS kernel forced on the psum layout with gap rows left untouched (DeepGEMM's SM90 default): group
    ends inside either 64-row slab of a tile, on a slab edge and on a tile edge, an empty group, ``spare`` rows of A
    and D past every group (tiles without a group), N not a multiple of the tile. Every bit equals the default plan's
    (the tl.* kernel: the same wgmma K order in FP32), gap rows keep their sentinel; with and without the layout's
    values marked warp-uniform."""
    a, b, ends, ref, starts = _contiguous(len(ms), ms, n, k, psum=True)
    a = torch.cat([a, _rand(spare, k)])
    b_arg = b if layout == "nt" else b.transpose(1, 2).contiguous()
    outs = []
    for over in (Bf16Overrides(ws=False), Bf16Overrides(ws=True, block_n=bn, uniform_tiles=uniform)):
        for _ in range(2):  # the second call replays the recorded launch
            d = torch.full((a.size(0), n), 7.0, device="cuda", dtype=BF16)
            run_forced(f"m_grouped_bf16_gemm_{layout}_contiguous", a, b_arg, d, ends, "nk", True, False,
                       overrides=over)
        outs.append(d)
    valid = torch.zeros(a.size(0), dtype=torch.bool, device="cuda")
    for s, mg in zip(starts, ms):
        valid[s:s + mg] = True
        if mg:
            assert calc_diff(outs[1][s:s + mg], ref[s:s + mg]) < TOL
    assert torch.all(outs[1][~valid] == 7.0), "gap rows and rows past every group are left untouched"
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("out", [BF16, torch.float32])
@pytest.mark.parametrize("c_kind", ["d", "distinct"])
@pytest.mark.parametrize("m,n,k,bn", [(4096, 2112, 7168, 256), (300, 1000, 200, 128), (4096, 7168, 2048, 128)])
def test_warp_specialised_accumulate_opt_in(out, c_kind, m, n, k, bn):
    """The Gluon WS kernel forced, with C loaded by TMA (C is D, or laid out like it); FP32 D on 128 x 128 tiles."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    if out == torch.float32 and bn == 256:
        bn = 128
    a, b = _rand(m, k), _rand(n, k)
    d = _rand(m, n, dtype=out)
    c = d if c_kind == "d" else _rand(m, n, dtype=out)
    ref = _ref(a, b, c)
    over = Bf16Overrides(ws=True, block_m=128, block_n=bn, split_k=1)
    call = bf16_launch._call(0, m, n, k, 1, d, c, True, True, True)
    assert bf16_plan.plan(call, over).kernel == "ws"
    run_forced("bf16_gemm_nt", a, b, d, c, "nk", overrides=over)
    assert calc_diff(d, ref) < (TOL if out == BF16 else 1e-9)


# K-grouped on the WS kernel (Bf16Overrides(ws=True); bf16_plan.AUTO_WS_K_GROUPED): bench_bf16_gemm's K_GROUPED rows
# and odd ones: M an odd multiple of 64 (the last tile's upper slab stores nothing), M and N not multiples of the tile,
# one group, 16 groups, empty groups first, inside and last. (G, M, N, K per group, indices of empty groups)
K_GROUPED_WS_CASES = [(4, 4096, 7168, 8192, (1,)), (8, 7168, 2048, 4096, ()), (16, 4096, 7168, 2048, (0, 7, 15)),
                      (1, 256, 256, 512, ()), (2, 128, 128, 128, (0,)), (3, 192, 200, 384, (1,)),
                      (2, 320, 1000, 1024, ()), (16, 128, 136, 128, (2, 3))]


def _k_grouped_operands(g, m, n, k_per, empty):
    ks = [0 if i in empty else (int(k_per * f) + 127) // 128 * 128 for i, f in enumerate(
        torch.linspace(0.7, 1.3, g).tolist())]
    a, b = _rand(sum(ks), m), _rand(sum(ks), n)
    layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
    prod = torch.zeros(g, m, n, device="cuda")
    start = 0
    for i, kg in enumerate(ks):
        if kg:
            prod[i] = _ref(a[start:start + kg].T, b[start:start + kg].T)
        start += kg
    return ks, a, b, layout, prod


def _spy_ws(monkeypatch):
    """Counts the launcher's WS kernel launches (bf16_launch._execute_ws), so a test sees which kernel ran."""
    from deep_gemm.gemm.bf16 import launch as bf16_launch
    launches = []
    real = bf16_launch._execute_ws

    def spy(*args, **kwargs):
        launches.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(bf16_launch, "_execute_ws", spy)
    return launches


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("c_kind", ["d", "none", "distinct"])
@pytest.mark.parametrize("g,m,n,k_per,empty", K_GROUPED_WS_CASES)
def test_k_grouped_warp_specialised(monkeypatch, g, m, n, k_per, empty, c_kind, uniform):
    """K-grouped on the Gluon WS kernel: D = C + A_g^T B_g against an FP32 reference (calc_diff per group), empty
    groups D[g] = C[g] exactly (zeros without C), the same bits on every call and with or without the warp-uniform
    K range."""
    launches = _spy_ws(monkeypatch)
    ks, a, b, layout, prod = _k_grouped_operands(g, m, n, k_per, empty)
    c0 = _rand(g, m, n, dtype=torch.float32)
    over = Bf16Overrides(ws=True, uniform_tiles=uniform)
    outs = []
    for _ in range(2):
        if c_kind == "d":
            d = c0.clone()
            c = d
        else:
            d = torch.full((g, m, n), float("nan"), device="cuda")
            c = None if c_kind == "none" else c0
        run_forced("k_grouped_bf16_gemm_tn_contiguous", a, b, d, ks, layout, c, "mn", False, overrides=over)
        outs.append(d)
    assert len(launches) == 2 and launches[0].block_n == 128, launches
    base = torch.zeros_like(c0) if c_kind == "none" else c0
    for i, kg in enumerate(ks):
        if kg:
            assert calc_diff(outs[0][i] - base[i], prod[i]) < TOL, (i, kg)
            assert calc_diff(outs[0][i], prod[i] + base[i]) < TOL, (i, kg)
        else:
            assert torch.equal(outs[0][i], base[i]), f"empty group {i}: D = C (or zeros)"
    assert torch.equal(outs[0], outs[1]), "the same bits on every call"


@pytest.mark.parametrize("g,m,n,k_per,empty", [(3, 200, 136, 256, (1,)), (2, 96, 64, 128, ())])
def test_k_grouped_warp_specialised_declines_to_tl(monkeypatch, g, m, n, k_per, empty):
    """M not a multiple of 64 (a 64-row slab of [G*M, N] would straddle two groups): ws=True runs the tl.* kernel."""
    launches = _spy_ws(monkeypatch)
    ks, a, b, layout, prod = _k_grouped_operands(g, m, n, k_per, empty)
    c = _rand(g, m, n, dtype=torch.float32)
    ref = prod + c
    run_forced("k_grouped_bf16_gemm_tn_contiguous", a, b, c, ks, layout, c, "mn", False,
               overrides=Bf16Overrides(ws=True))
    assert not launches
    assert calc_diff(c, ref) < TOL


@pytest.mark.parametrize("over", [Bf16Overrides(ws=False, uniform_tiles=True), Bf16Overrides(ws=False)])
def test_k_grouped_tl_uniform_same_bits(over):
    """The tl.* kernel's K-grouped K range marked warp-uniform or not: the same bits (and right)."""
    ks, a, b, layout, prod = _k_grouped_operands(4, 512, 384, 1024, (2,))
    c = _rand(4, 512, 384, dtype=torch.float32)
    outs = []
    for o in (Bf16Overrides(ws=False, uniform_tiles=False), over):
        d = torch.full_like(c, float("nan"))
        run_forced("k_grouped_bf16_gemm_tn_contiguous", a, b, d, ks, layout, c, "mn", False, overrides=o)
        outs.append(d)
    assert calc_diff(outs[1], prod + c) < TOL
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("c_kind", ["distinct", "none"])
def test_k_grouped_warp_specialised_cuda_graph(monkeypatch, c_kind):
    """K-grouped on the WS kernel captured in a CUDA graph: replays read the K sizes on the device and write the
    eager call's bits."""
    launches = _spy_ws(monkeypatch)
    ks, a, b, layout, prod = _k_grouped_operands(8, 1024, 2048, 1024, (3,))
    c = _rand(8, 1024, 2048, dtype=torch.float32) if c_kind == "distinct" else None
    d = torch.empty(8, 1024, 2048, device="cuda")
    over = Bf16Overrides(ws=True)

    def call():
        run_forced("k_grouped_bf16_gemm_tn_contiguous", a, b, d, ks, layout, c, "mn", False, overrides=over)
    call()  # compile outside the capture
    eager = d.clone()
    assert calc_diff(eager, prod + (c if c is not None else 0)) < TOL
    _captured(call, d, eager)
    assert launches


# ---- Masked calls on the warp-specialised kernel ------------------------------------------------------------------
# ``m_grouped_bf16_gemm_nt_masked`` on the warp-specialised Gluon kernel (gemm/bf16/kernels/gemm_ws.py, GROUPING
# MASKED).

def _run(a, b, d, masked_m, expected, over):
    run_forced("m_grouped_bf16_gemm_nt_masked", a, b, d, masked_m, expected, "nk", overrides=over)


def _sentinel(shape):
    """D's starting bits: random BF16 values, so an untouched row is recognisable bit for bit."""
    return torch.randn(*shape, device="cuda").to(BF16)


def _check(a, b, d, d0, masked):
    """Valid rows against the FP32 reference, rows past masked_m bit for bit D's starting values."""
    for i, m in enumerate(masked):
        m = min(m, a.size(1))
        if m:
            assert calc_diff(d[i, :m], _ref(a[i, :m], b[i])) < TOL, (i, m)
        assert torch.equal(d[i, m:].view(torch.int16), d0[i, m:].view(torch.int16)), f"group {i}: rows past {m}"


# (G, Mmax, N, K, masked_m): rows of 0, 1, 127, 128, 129 and Mmax; Mmax and N not multiples of the tile; G = 1, 32
# and 40 (G_PAD 64: two groups per lane of the producer's vector).
MASKED_ODD = [(6, 300, 200, 256, [0, 1, 127, 128, 129, 300]), (1, 4096, 4096, 1024, [4096]), (1, 130, 136, 64, [129]),
       (32, 257, 1000, 512, [(37 * i) % 258 for i in range(32)]), (40, 130, 256, 128, [i * 3 for i in range(40)]),
       (4, 64, 512, 192, [64, 0, 63, 1]), (3, 512, 384, 320, [0, 0, 0])]


@pytest.mark.gpu
@pytest.mark.parametrize("g, max_m, n, k, masked", MASKED_ODD, ids=lambda v: str(v) if not isinstance(v, list) else "m")
@pytest.mark.parametrize("bn, uniform", [(128, True), (256, True), (256, False)])
def test_masked_ws_odd_shapes(g, max_m, n, k, masked, bn, uniform):
    a, b = torch.randn(g, max_m, k, device="cuda").to(BF16), torch.randn(g, n, k, device="cuda").to(BF16)
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    d0 = _sentinel((g, max_m, n))
    outs = []
    for _ in range(2):  # (the second call replays the recorded launch)
        d = d0.clone()
        _run(a, b, d, masked_m, max(1, sum(masked) // g), Bf16Overrides(ws=True, block_n=bn, uniform_tiles=uniform))
        _check(a, b, d, d0, masked)
        outs.append(d)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the same bits call after call"
    d = d0.clone()
    _run(a, b, d, masked_m, max(1, sum(masked) // g), Bf16Overrides(ws=False))
    _check(a, b, d, d0, masked)
    for i, m in enumerate(masked):
        if m:
            assert calc_diff(d[i, :m], outs[0][i, :m]) < TOL


@pytest.mark.gpu
def test_masked_ws_mn_major_b():
    g, max_m, n, k = 4, 384, 512, 448
    a = torch.randn(g, max_m, k, device="cuda").to(BF16)
    b = torch.randn(g, k, n, device="cuda").to(BF16).transpose(1, 2)  # [G, N, K] view of an MN-major B
    masked = [384, 5, 200, 0]
    d0 = _sentinel((g, max_m, n))
    d = d0.clone()
    _run(a, b, d, torch.tensor(masked, dtype=torch.int32, device="cuda"), 150, Bf16Overrides(ws=True))
    _check(a, b, d, d0, masked)


def _bench_row(groups, expected, n, k):
    """A bench_bf16_gemm-like masked row: masked_m = expected x U(0.7, 1.3) (seeded), Mmax 4096; D a sentinel."""
    gen = torch.Generator().manual_seed(0)
    masked = [int(expected * (0.7 + 0.6 * float(torch.rand(1, generator=gen)))) for _ in range(groups)]
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    a = torch.randn(groups, 4096, k, device="cuda").to(BF16)
    b = torch.randn(groups, n, k, device="cuda").to(BF16)
    return masked, masked_m, a, b, _sentinel((groups, 4096, n))


@pytest.mark.gpu
@pytest.mark.parametrize("groups, expected", BENCH_ROWS)
@pytest.mark.parametrize("n, k", [(6144, 7168), (4096, 2048)])
def test_masked_ws_deepgemm_shapes(groups, expected, n, k):
    """bench_bf16_gemm's masked rows (masked_m = expected x 0.7-1.3, Mmax 4096) on both WS tiles and the plan."""
    masked, masked_m, a, b, d0 = _bench_row(groups, expected, n, k)
    for over in (Bf16Overrides(ws=True, block_n=256), Bf16Overrides(ws=True, block_n=128), Bf16Overrides()):
        d = d0.clone()
        _run(a, b, d, masked_m, expected, over)
        _check(a, b, d, d0, masked)


@pytest.mark.gpu
@pytest.mark.parametrize("bn", [128, 256])
def test_masked_ws_cuda_graph_reads_masked_m_on_the_device(bn):
    g, max_m, n, k = 4, 320, 512, 1024
    a, b = torch.randn(g, max_m, k, device="cuda").to(BF16), torch.randn(g, n, k, device="cuda").to(BF16)
    masked_m = torch.tensor([10, 0, 320, 77], dtype=torch.int32, device="cuda")
    d0 = _sentinel((g, max_m, n))
    d = d0.clone()
    over = Bf16Overrides(ws=True, block_n=bn)
    _run(a, b, d, masked_m, 64, over)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _run(a, b, d, masked_m, 64, over)
    for masked in ([200, 3, 0, 320], [0, 0, 0, 0], [129, 128, 127, 1], [10, 0, 320, 77]):
        masked_m.copy_(torch.tensor(masked, dtype=torch.int32))
        d.copy_(d0)
        graph.replay()
        torch.cuda.synchronize()
        _check(a, b, d, d0, masked)


# The 64 x BN tile (the kernel's SPLIT_N: the consumers split its columns). Shapes chosen so that each build is one
# compile (grid = every SM, G_PAD 8): (G, Mmax, N, K, masked_m) with rows of 0, 1, 63, 64, 65 and Mmax; Mmax not a
# multiple of 64; N not a multiple of BN (300: the last tile column's upper half wholly past N at BN 256; 72: every
# tile's at BN 256, its lower half partly).
ODD64 = [(6, 1000, 300, 256, [0, 1, 63, 64, 65, 1000]),
         (8, 1100, 72, 192, [1099, 128, 127, 129, 0, 1100, 3, 200])]


@pytest.mark.gpu
@pytest.mark.parametrize("g, max_m, n, k, masked", ODD64, ids=lambda v: str(v) if not isinstance(v, list) else "m")
@pytest.mark.parametrize("bn", [256, 128])
def test_masked_ws64_odd_shapes(g, max_m, n, k, masked, bn):
    a, b = torch.randn(g, max_m, k, device="cuda").to(BF16), torch.randn(g, n, k, device="cuda").to(BF16)
    masked_m = torch.tensor(masked, dtype=torch.int32, device="cuda")
    d0 = _sentinel((g, max_m, n))
    over = Bf16Overrides(ws=True, block_m=64, block_n=bn)
    outs = []
    for _ in range(2):  # (the second call replays the recorded launch)
        d = d0.clone()
        _run(a, b, d, masked_m, max(1, sum(masked) // g), over)
        _check(a, b, d, d0, masked)
        outs.append(d)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the same bits call after call"


@pytest.mark.gpu
def test_masked_ws64_deepgemm_row():
    """bench_bf16_gemm's G = 32 x 192 row (masked_m = 192 x 0.7-1.3, Mmax 4096), N x K = 4096 x 2048, on the 64 x 256
    tile (forced: Bf16Overrides(ws=True, block_m=64))."""
    groups, expected, n, k = 32, 192, 4096, 2048
    masked, masked_m, a, b, d0 = _bench_row(groups, expected, n, k)
    d = d0.clone()
    _run(a, b, d, masked_m, expected, Bf16Overrides(ws=True, block_m=64, block_n=256))
    _check(a, b, d, d0, masked)
