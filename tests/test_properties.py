"""Property-based tests (hypothesis) of every op family's CPU reference against an independent float64
computation written here (explicit loops / broadcasting, no deep_gemm dequantisation code), over random shapes
(0, 1, odd, non-multiples), layouts, dtypes and group structures; plus random bad data ("a DeepGEMMError and an
untouched output, or the correct result").

Profiles (tests/conftest.py): "ci" (default, derandomized) and "gpu" (HYPOTHESIS_PROFILE=gpu, more examples).
Each family's tests together draw >= 200 examples under "ci": the BF16, FP8 and FP4 GEMMs, the symmetric products,
the MQA logits (contiguous and paged) and their schedule metadata, block-sparse MQA, layout, HyperConnection,
einsum, the Mega MoE layer (one rank) and pre-dispatch, bf16_mega_gate and mega_mhc.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import deep_gemm  # noqa: E402
from deep_gemm.testing.grouping import contiguous_layout  # noqa: E402
from deep_gemm.core.errors import DeepGEMMError  # noqa: E402
from deep_gemm.utils import ceil_to_ue8m0, per_block_cast_to_fp8, per_token_cast_to_fp8  # noqa: E402

BF16, FP8 = torch.bfloat16, torch.float8_e4m3fn

# The "ci" profile's per-test example count times this factor (the "gpu" profile's count scales the same way).
def examples(n: int):
    base = settings.default.max_examples
    return settings(max_examples=max(1, base * n // 60))


def close(got: torch.Tensor, want: torch.Tensor, rel: float, what: str = "") -> None:
    got, want = got.double(), want.double()
    assert got.shape == want.shape, what
    if want.numel() == 0:
        return
    scale = want.abs().max().clamp(min=1.0)
    err = (got - want).abs().max()
    assert err <= rel * scale, f"{what}: max error {float(err)} vs scale {float(scale)}"


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape, gen, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


@contextlib.contextmanager
def mk_alignment(alignment: int):
    """The contiguous layouts' group alignment set for the block, restored to the default after it."""
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    try:
        yield
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)


small = st.sampled_from([0, 1, 2, 3, 5, 7, 8, 13, 16, 31, 33])
seeds = st.integers(0, 2 ** 31 - 1)
mult8 = st.sampled_from([8, 16, 24, 40, 64])


# ---- BF16 GEMMs -------------------------------------------------------------------------------------------------

@examples(120)
@given(m=small, n=mult8, k=mult8, layout=st.sampled_from(["nt", "nn", "tn", "tt"]),
       out=st.sampled_from([BF16, torch.float32]), accumulate=st.booleans(), seed=seeds)
def test_bf16_dense(m, n, k, layout, out, accumulate, seed):
    if layout[0] == "t" and m % 8:
        m = m + (8 - m % 8)  # MN-major A needs its M stride 16-byte aligned
    gen = seeded(seed)
    a, b = randn(m, k, gen=gen, dtype=BF16), randn(n, k, gen=gen, dtype=BF16)
    a_arg = a if layout[0] == "n" else a.T.contiguous()  # "t": given as [K, M]
    b_arg = b if layout[1] == "t" else b.T.contiguous()  # "n": given as [K, N]
    if out == torch.float32 and accumulate:
        c = randn(m, n, gen=gen)
    else:
        c = None
    d = torch.zeros(m, n, dtype=out)
    getattr(deep_gemm, f"bf16_gemm_{layout}")(a_arg, b_arg, d, c=c)
    want = (a.double()[:, None, :] * b.double()[None, :, :]).sum(-1) + (c.double() if c is not None else 0)
    close(d, want, 1e-2 if out == BF16 else 1e-5, f"bf16_gemm_{layout}")


@st.composite
def group_sizes(draw, max_groups=4, max_rows=40):
    g = draw(st.integers(1, max_groups))
    return [draw(st.sampled_from([0, 1, 3, 8, 17, max_rows])) for _ in range(g)]


@examples(60)
@given(ms=group_sizes(), n=mult8, k=mult8, psum=st.booleans(), layout=st.sampled_from(["nt", "nn"]), seed=seeds)
def test_bf16_m_grouped_contiguous(ms, n, k, psum, layout, seed):
    align = 8
    deep_gemm.set_mk_alignment_for_contiguous_layout(align)
    try:
        gen = seeded(seed)
        total, ids, ends = contiguous_layout(ms, align)
        a, b = randn(total, k, gen=gen, dtype=BF16), randn(len(ms), n, k, gen=gen, dtype=BF16)
        b_arg = b if layout == "nt" else b.transpose(1, 2).contiguous()  # "nn": given as [G, K, N]
        d = torch.full((total, n), 7.0, dtype=BF16)
        layout_t = torch.tensor(ends, dtype=torch.int32) if psum else ids
        getattr(deep_gemm, f"m_grouped_bf16_gemm_{layout}_contiguous")(a, b_arg, d, layout_t, use_psum_layout=psum,
                                                                       ensure_zero_padding=True)
        want = torch.zeros(total, n, dtype=torch.float64)
        for r in range(total):
            if ids[r] >= 0:
                want[r] = (a[r].double()[None, :] * b[int(ids[r])].double()).sum(-1)
        if psum:  # rows past the last group's end are the reference's zeros too
            pass
        close(d, want, 1e-2, "m_grouped_bf16")
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)


@examples(60)
@given(g=st.integers(1, 4), max_m=small, n=mult8, k=mult8, data=st.data())
def test_bf16_masked(g, max_m, n, k, data):
    gen = seeded(data.draw(seeds))
    masked = [data.draw(st.integers(0, max_m)) for _ in range(g)]
    a, b = randn(g, max_m, k, gen=gen, dtype=BF16), randn(g, n, k, gen=gen, dtype=BF16)
    d = torch.full((g, max_m, n), 3.0, dtype=BF16)
    deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, torch.tensor(masked, dtype=torch.int32), max(1, max_m))
    want = torch.full((g, max_m, n), 3.0, dtype=torch.float64)
    for i in range(g):
        want[i, :masked[i]] = a[i, :masked[i]].double() @ b[i].double().T
    close(d, want, 1e-2, "masked")


@examples(60)
@given(ks=st.lists(st.sampled_from([0, 8, 16, 24, 40]), min_size=1, max_size=4), m=mult8, n=mult8,
       accumulate=st.booleans(), seed=seeds)
def test_bf16_k_grouped(ks, m, n, accumulate, seed):
    gen = seeded(seed)
    a, b = randn(sum(ks), m, gen=gen, dtype=BF16), randn(sum(ks), n, gen=gen, dtype=BF16)
    c = randn(len(ks), m, n, gen=gen) if accumulate else None
    d = torch.zeros(len(ks), m, n)
    deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, ks, torch.tensor(ks, dtype=torch.int32), c=c)
    want, start = torch.zeros(len(ks), m, n, dtype=torch.float64), 0
    for g, kg in enumerate(ks):
        want[g] = a[start:start + kg].double().T @ b[start:start + kg].double()
        start += kg
    close(d, want + (c.double() if c is not None else 0), 1e-5, "k_grouped_bf16")


# ---- FP8 GEMMs -------------------------------------------------------------------------------------------------

def dequant_rows(data: torch.Tensor, sf: torch.Tensor, gran_mn: int, gran_k: int = 128) -> torch.Tensor:
    """float64 values of a quantised [MN, K] operand, one scale block at a time."""
    values = data.double().clone()
    for i in range(sf.size(0)):
        for j in range(sf.size(1)):
            values[i * gran_mn:(i + 1) * gran_mn, j * gran_k:(j + 1) * gran_k] *= float(sf[i, j])
    return values


@examples(120)
@given(m=small, n=st.sampled_from([16, 64, 136]), k=st.sampled_from([128, 256, 384]), ue8m0=st.booleans(),
       out=st.sampled_from([BF16, torch.float32]), seed=seeds)
def test_fp8_dense_nt(m, n, k, ue8m0, out, seed):
    gen = seeded(seed)
    x, w = randn(m, k, gen=gen), randn(n, k, gen=gen)
    a, sfa = per_token_cast_to_fp8(x, use_ue8m0=ue8m0)
    b, sfb = per_block_cast_to_fp8(w, use_ue8m0=ue8m0)
    d = torch.zeros(m, n, dtype=out)
    deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d)
    want = dequant_rows(a, sfa, 1) @ dequant_rows(b, sfb, 128).T
    close(d, want, 1e-2 if out == BF16 else 1e-5, "fp8_gemm_nt")


@examples(60)
@given(ms=group_sizes(max_rows=130), n=st.sampled_from([16, 64]), psum=st.booleans(), seed=seeds)
def test_fp8_m_grouped_contiguous(ms, n, psum, seed):
    k, align = 128, 128
    gen = seeded(seed)
    total, ids, ends = contiguous_layout(ms, align)
    a, sfa = per_token_cast_to_fp8(randn(total, k, gen=gen), use_ue8m0=False)
    bs = [per_block_cast_to_fp8(randn(n, k, gen=gen), use_ue8m0=False) for _ in ms]
    b, sfb = torch.stack([x[0] for x in bs]), torch.stack([x[1] for x in bs])
    d = torch.zeros(total, n, dtype=BF16)
    layout_t = torch.tensor(ends, dtype=torch.int32) if psum else ids
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, layout_t, use_psum_layout=psum,
                                               ensure_zero_padding=True)
    va = dequant_rows(a, sfa, 1)
    want = torch.zeros(total, n, dtype=torch.float64)
    for g in range(len(ms)):
        rows = ids == g
        want[rows] = va[rows] @ dequant_rows(b[g], sfb[g], 128).T
    close(d, want, 1e-2, "m_grouped_fp8")


@examples(60)
@given(g=st.integers(1, 3), max_m=small, n=st.sampled_from([16, 64]), data=st.data())
def test_fp8_masked(g, max_m, n, data):
    k = 128
    gen = seeded(data.draw(seeds))
    masked = [data.draw(st.integers(0, max_m)) for _ in range(g)]
    aq = [per_token_cast_to_fp8(randn(max_m, k, gen=gen), use_ue8m0=False) for _ in range(g)]
    bq = [per_block_cast_to_fp8(randn(n, k, gen=gen), use_ue8m0=False) for _ in range(g)]
    a, sfa = torch.stack([x[0] for x in aq]), torch.stack([x[1] for x in aq])
    b, sfb = torch.stack([x[0] for x in bq]), torch.stack([x[1] for x in bq])
    d = torch.full((g, max_m, n), 2.0, dtype=BF16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked((a, sfa), (b, sfb), d, torch.tensor(masked, dtype=torch.int32),
                                           max(1, max_m))
    want = torch.full((g, max_m, n), 2.0, dtype=torch.float64)
    for i in range(g):
        want[i, :masked[i]] = (dequant_rows(a[i], sfa[i], 1) @ dequant_rows(b[i], sfb[i], 128).T)[:masked[i]]
    close(d, want, 1e-2, "masked_fp8")


@examples(30)
@given(ks=st.lists(st.sampled_from([0, 128, 256]), min_size=1, max_size=3), m=st.sampled_from([16, 48]),
       n=st.sampled_from([16, 32]), seed=seeds)
def test_fp8_k_grouped_tn(ks, m, n, seed):
    gen = seeded(seed)
    xs = [randn(kg, m, gen=gen) for kg in ks]
    ys = [randn(kg, n, gen=gen) for kg in ks]
    # tn: A [sum K, M] MN-major, scales per 128 K rows (per_token over the transposed operand)
    qa = [per_token_cast_to_fp8(x.T.contiguous(), use_ue8m0=False) if x.size(0) else None for x in xs]
    qb = [per_token_cast_to_fp8(y.T.contiguous(), use_ue8m0=False) if y.size(0) else None for y in ys]
    a = torch.cat([q[0].T for q in qa if q is not None] or [torch.empty(0, m, dtype=FP8)]).contiguous()
    sfa = torch.cat([q[1].T for q in qa if q is not None] or [torch.empty(0, m)]).contiguous()
    b = torch.cat([q[0].T for q in qb if q is not None] or [torch.empty(0, n, dtype=FP8)]).contiguous()
    sfb = torch.cat([q[1].T for q in qb if q is not None] or [torch.empty(0, n)]).contiguous()
    d = torch.zeros(len(ks), m, n)
    if sum(ks) == 0:
        return
    deep_gemm.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, ks, torch.tensor(ks, dtype=torch.int32))
    want = torch.zeros(len(ks), m, n, dtype=torch.float64)
    for g in range(len(ks)):
        if qa[g] is not None:
            want[g] = dequant_rows(qa[g][0], qa[g][1], 1) @ dequant_rows(qb[g][0], qb[g][1], 1).T
    close(d, want, 1e-5, "k_grouped_fp8")


def psum_k_groups(data, num_groups: int, alignment: int, sum_k_slack: int):
    """Random K psum ends (empty groups, padding after unaligned ends) and the sum_K that holds them."""
    ends, previous = [], 0
    for _ in range(num_groups):
        if data.draw(st.booleans()):  # an empty group repeats the previous end
            ends.append(previous)
            continue
        start = -(-previous // alignment) * alignment
        previous = start + data.draw(st.integers(0, 40))
        ends.append(previous)
    return ends, previous + data.draw(st.integers(0, sum_k_slack))


def k_psum_truth(a, b, ends, alignment):
    """float64 [G, M, N]: group g sums K rows [align(end[g-1]), end[g]) of a.T @ b (rank-1 updates)."""
    want = torch.zeros(len(ends), a.size(1), b.size(1), dtype=torch.float64)
    previous = 0
    for g, end in enumerate(ends):
        for kk in range(-(-previous // alignment) * alignment, end):
            want[g] += a[kk].double()[:, None] * b[kk].double()[None, :]
        previous = end
    return want


@examples(120)
@given(g=st.integers(1, 4), m=mult8, n=mult8, alignment=st.sampled_from([8, 16, 128]),
       accumulate=st.booleans(), data=st.data())
def test_bf16_k_grouped_psum(g, m, n, alignment, accumulate, data):
    ends, sum_k = psum_k_groups(data, g, alignment, 9)
    gen = seeded(data.draw(seeds))
    a, b = randn(sum_k, m, gen=gen, dtype=BF16), randn(sum_k, n, gen=gen, dtype=BF16)
    c = randn(g, m, n, gen=gen) if accumulate else None
    d = torch.full((g, m, n), float("nan"))
    with mk_alignment(alignment):
        deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, None, torch.tensor(ends, dtype=torch.int32), c=c,
                                                     use_psum_layout=True)
    want = k_psum_truth(a, b, ends, alignment) + (c.double() if accumulate else 0)
    close(d, want, 1e-5, f"k_grouped_bf16 psum {ends}")


def fp8_k_psum_operand(data, gen, sum_k: int, rows: int, ends, alignment: int, extra_scale_rows: int):
    """A [sum_K, rows] FP8 operand of the K psum layout, NaN in every gap row (never read), and its compact scales:
    ceil(K_g / 128) power-of-two rows per group, one group after the other, then extra unused rows. Returns
    (data, scales, float64 values with gap rows zero)."""
    values = randn(sum_k, rows, gen=gen).to(FP8)
    values.view(torch.uint8)[:] = torch.where(torch.zeros(sum_k, 1, dtype=torch.bool), 0, 0x7F)  # NaN everywhere
    scales, truth, previous = [], torch.zeros(sum_k, rows, dtype=torch.float64), 0
    for end in ends:
        start = -(-previous // alignment) * alignment
        if end > start:
            values[start:end] = randn(end - start, rows, gen=gen).to(FP8)
            sf = torch.exp2(torch.randint(-3, 4, (-(-(end - start) // 128), rows), generator=gen).float())
            scales.append(sf)
            truth[start:end] = values[start:end].double() * sf.double().repeat_interleave(128, 0)[:end - start]
        previous = end
    scales.append(torch.exp2(torch.randint(-3, 4, (extra_scale_rows, rows), generator=gen).float()))
    return values, torch.cat(scales), truth


@examples(120)
@given(g=st.integers(1, 4), m=st.sampled_from([16, 32, 48]), n=st.sampled_from([16, 32]),
       alignment=st.sampled_from([32, 128, 256]),
       accumulate=st.booleans(), data=st.data())
def test_fp8_k_grouped_psum(g, m, n, alignment, accumulate, data):
    """The FP8 K psum layout (tn): random ends (empty groups, unaligned ends, groups past 128 rows), compact scales
    per group, NaN in the gap rows: the float64 sums of each group's scaled rows."""
    ends, previous = [], 0
    for _ in range(g):
        start = -(-previous // alignment) * alignment
        previous = previous if data.draw(st.booleans()) else start + data.draw(st.integers(1, 300))
        ends.append(previous)
    sum_k = previous + data.draw(st.integers(0, 9))
    gen = seeded(data.draw(seeds))
    extra = data.draw(st.integers(0, 2))
    a, sfa, av = fp8_k_psum_operand(data, gen, sum_k, m, ends, alignment, extra)
    b, sfb, bv = fp8_k_psum_operand(data, gen, sum_k, n, ends, alignment, extra)
    c = randn(g, m, n, gen=gen) if accumulate else None
    d = torch.full((g, m, n), float("nan"))
    with mk_alignment(alignment):
        deep_gemm.k_grouped_fp8_gemm_tn_contiguous((a, sfa), (b, sfb), d, None, torch.tensor(ends, dtype=torch.int32),
                                                   c=c, use_psum_layout=True)
    close(d, k_psum_truth(av, bv, ends, alignment) + (c.double() if accumulate else 0), 1e-5,
          f"k_grouped_fp8 psum {ends}")


# ---- FP4 GEMMs ----------------------------------------------------------------------------------------------------

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def e2m1_values(packed: torch.Tensor) -> torch.Tensor:
    """float64 [rows, 2 * bytes] of packed E2M1 pairs (the even element in the low nibble), by table."""
    rows, width = packed.shape
    out = torch.zeros(rows, 2 * width, dtype=torch.float64)
    for r in range(rows):
        for j in range(width):
            byte = int(packed[r, j]) & 0xFF
            for half, code in enumerate((byte & 0x0F, byte >> 4)):
                out[r, 2 * j + half] = (-1.0 if code & 0x8 else 1.0) * E2M1[code & 0x7]
    return out


@examples(120)
@given(g=st.integers(1, 3), m=st.integers(1, 9), n=st.integers(1, 9), psum=st.booleans(),
       accumulate=st.booleans(), data=st.data())
def test_fp4_k_grouped(g, m, n, psum, accumulate, data):
    alignment = 32
    if psum:
        ends, sum_k = psum_k_groups(data, g, alignment, 0)
        sum_k = -(-sum_k // 32) * 32  # whole scale blocks of 32 K
        ks, layout = None, ends
    else:
        ks = [32 * data.draw(st.integers(0, 3)) for _ in range(g)]
        sum_k, layout = sum(ks), ks
    gen = seeded(data.draw(seeds))
    a = torch.randint(-128, 128, (m, sum_k // 2), dtype=torch.int8, generator=gen)
    b = torch.randint(-128, 128, (n, sum_k // 2), dtype=torch.int8, generator=gen)
    sfa = torch.exp2(torch.randint(-4, 5, (sum_k // 32, m), generator=gen).float())
    sfb = torch.exp2(torch.randint(-4, 5, (sum_k // 32, n), generator=gen).float())
    c = randn(g, m, n, gen=gen) if accumulate else None
    d = torch.full((g, m, n), float("nan"))
    with mk_alignment(alignment):
        deep_gemm.k_grouped_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, ks, torch.tensor(layout, dtype=torch.int32),
                                                   c=c, use_psum_layout=psum)
    # [sum_K, M] / [sum_K, N] scaled values, then the K-grouped float64 sums
    av = (e2m1_values(a) * sfa.double().T.repeat_interleave(32, dim=1)).T
    bv = (e2m1_values(b) * sfb.double().T.repeat_interleave(32, dim=1)).T
    if psum:
        want = k_psum_truth(av, bv, ends, alignment)
    else:
        want, start = torch.zeros(g, m, n, dtype=torch.float64), 0
        for i, k_size in enumerate(ks):
            want[i] = av[start:start + k_size].T @ bv[start:start + k_size]
            start += k_size
    close(d, want + (c.double() if accumulate else 0), 1e-6, f"k_grouped_fp4 {layout} psum={psum}")


@examples(80)
@given(m=st.integers(1, 9), n=st.integers(1, 9), blocks=st.integers(0, 3), out=st.sampled_from([BF16, torch.float32]),
       seed=seeds)
def test_fp4_k_grouped_sizes_vs_dense(m, n, blocks, out, seed):
    """One group of K = 32 * blocks is the dense product: the K-grouped FP4 GEMM against the FP8 x FP4 dense GEMM's
    FP4 form (same operands, packed UE8M0 scales); d written once by each (a rounding to BF16 for BF16 d)."""
    gen = seeded(seed)
    k = 32 * blocks
    a = torch.randint(-128, 128, (m, k // 2), dtype=torch.int8, generator=gen)
    b = torch.randint(-128, 128, (n, k // 2), dtype=torch.int8, generator=gen)
    sfa = torch.exp2(torch.randint(-4, 5, (k // 32, m), generator=gen).float())
    sfb = torch.exp2(torch.randint(-4, 5, (k // 32, n), generator=gen).float())
    d = torch.full((1, m, n), float("nan"))
    deep_gemm.k_grouped_fp4_gemm_nt_contiguous((a, sfa), (b, sfb), d, [k], torch.tensor([k], dtype=torch.int32))
    av = e2m1_values(a) * sfa.double().T.repeat_interleave(32, dim=1)
    bv = e2m1_values(b) * sfb.double().T.repeat_interleave(32, dim=1)
    close(d[0], av @ bv.T, 1e-6, "k_grouped_fp4 one group")


# ---- symmetric products -------------------------------------------------------------------------------------------

@examples(100)
@given(batch=st.sampled_from([None, 1, 3]), m=small, k=small, dtype=st.sampled_from([BF16, torch.float32]),
       transposed=st.booleans(), seed=seeds)
def test_batched_syrk(batch, m, k, dtype, transposed, seed):
    gen = seeded(seed)
    lead = () if batch is None else (batch,)
    a = randn(*lead, m, k, gen=gen, dtype=dtype)
    if transposed:  # column-major storage of the same values
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2)
    d = torch.full((*lead, m, m), float("nan"), dtype=dtype)
    deep_gemm.batched_syrk(a, d)
    want = (a.double()[..., :, None, :] * a.double()[..., None, :, :]).sum(-1)
    close(d, want, 1e-2 if dtype == BF16 else 1e-5, "batched_syrk")


@examples(100)
@given(batch=st.sampled_from([None, 1, 3]), m=small, n=small, dtype=st.sampled_from([BF16, torch.float32]),
       seed=seeds)
def test_batched_symm(batch, m, n, dtype, seed):
    gen = seeded(seed)
    lead = () if batch is None else (batch,)
    half = randn(*lead, m, m, gen=gen)
    a = (half + half.transpose(-1, -2)).to(dtype)
    b = randn(*lead, m, n, gen=gen, dtype=dtype)
    d = torch.full((*lead, m, n), float("nan"), dtype=dtype)
    deep_gemm.batched_symm(a, b, d)
    want = (a.double()[..., :, :, None] * b.double()[..., None, :, :]).sum(-2)
    close(d, want, 1e-2 if dtype == BF16 else 1e-5, "batched_symm")


# ---- attention (MQA logits) ---------------------------------------------------------------------------------------

@examples(120)
@given(s=small, sk=st.sampled_from([1, 7, 50, 129]), h=st.sampled_from([8, 16]), d=st.sampled_from([32, 64]),
       data=st.data())
def test_mqa_logits(s, sk, h, d, data):
    gen = seeded(data.draw(seeds))
    q, kv = randn(s, h, d, gen=gen).to(FP8), randn(sk, d, gen=gen).to(FP8)
    kv_sf, w = torch.rand(sk, generator=gen) + 0.25, randn(s, h, gen=gen)
    ks = torch.tensor([data.draw(st.integers(0, sk)) for _ in range(s)], dtype=torch.int32)
    ke = torch.tensor([data.draw(st.integers(int(x), sk)) for x in ks], dtype=torch.int32)
    out = deep_gemm.fp8_mqa_logits(q, (kv, kv_sf), w, ks, ke)
    want = torch.full((s, sk), float("-inf"), dtype=torch.float64)
    for i in range(s):
        lo, hi = int(ks[i]), int(ke[i])
        if hi > lo:
            scores = (q[i].double() @ kv[lo:hi].double().T).clamp(min=0)
            want[i, lo:hi] = (w[i].double() @ scores) * kv_sf[lo:hi].double()
    got = out[:, :sk].double()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = torch.isfinite(want)
    close(got[finite], want[finite], 1e-5, "mqa_logits")


@examples(80)
@given(batch=st.integers(1, 3), next_n=st.sampled_from([1, 2]), block_kv=st.sampled_from([32, 64]),
       data=st.data())
def test_paged_mqa_logits(batch, next_n, block_kv, data):
    from deep_gemm.attention.reference import pack_paged_kv_cache
    h, d, max_len = 8, 32, 150
    gen = seeded(data.draw(seeds))
    lens = [data.draw(st.integers(next_n, max_len)) for _ in range(batch)]
    values = [randn(n, d, gen=gen).to(FP8) for n in lens]
    scales = [torch.rand(n, generator=gen) + 0.25 for n in lens]
    kv_cache, table = pack_paged_kv_cache(values, scales, block_kv, spare_pages=1)
    q, w = randn(batch, next_n, h, d, gen=gen).to(FP8), randn(batch * next_n, h, gen=gen)
    context_lens = torch.tensor(lens, dtype=torch.int32).reshape(batch)
    deep_gemm.set_num_sms(4)
    try:
        meta = deep_gemm.get_paged_mqa_logits_metadata(context_lens, block_kv, 4)
        out = deep_gemm.fp8_paged_mqa_logits(q, kv_cache, w, context_lens, table, meta, max_len)
    finally:
        deep_gemm.set_num_sms(0)
    want = torch.full((batch * next_n, max_len), float("-inf"), dtype=torch.float64)
    for b in range(batch):
        keys = values[b].double() * scales[b].double()[:, None]
        for n in range(next_n):
            visible = lens[b] - next_n + n + 1
            scores = (q[b, n].double() @ keys[:visible].T).clamp(min=0)
            want[b * next_n + n, :visible] = w[b * next_n + n].double() @ scores
    got = out[:, :max_len].double()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = torch.isfinite(want)
    close(got[finite], want[finite], 1e-5, "paged")


def ue8m0_word_scales(words: torch.Tensor) -> torch.Tensor:
    """float64 [..., 128]: the scale of each element from int32 words of four UE8M0 bytes (byte g: elements 32g..)."""
    w = words.long() & 0xFFFFFFFF
    exps = torch.stack([(w >> (8 * g)) & 0xFF for g in range(4)], dim=-1)
    return torch.exp2((exps - 127).double()).repeat_interleave(32, dim=-1)


@examples(120)
@given(nq=st.integers(0, 4), num_kv=st.integers(0, 70), sbk=st.sampled_from([8, 16]), fp4=st.booleans(),
       unaligned=st.booleans(), data=st.data())
def test_sparse_mqa_logits(nq, num_kv, sbk, fp4, unaligned, data):
    """Block-sparse indexer logits (32 heads x 128): column j * sbk + t of row i is sum_h relu(q_h . k) * w_h for
    token t of the row's j-th selected block (start idx * sbk, plus ks % sbk when unaligned), -inf for unused slots
    and tokens past the KV; against a float64 loop with the E2M1 / UE8M0 decoding written here."""
    heads, dim, num_max = 32, 128, 4
    gen = seeded(data.draw(seeds))
    ks = [data.draw(st.integers(0, num_kv)) for _ in range(nq)]
    if not unaligned:
        ks = [k - k % sbk for k in ks]
    ke = [data.draw(st.integers(k, num_kv)) for k in ks]
    counts = [min(num_max, -(-(e - b) // sbk)) for b, e in zip(ks, ke)]
    blocks = -(-num_kv // sbk) + 1
    rows = [sorted(data.draw(st.lists(st.integers(0, blocks), min_size=c, max_size=c, unique=True))) + [0] * (4 - c)
            for c in counts]
    indices = torch.tensor(rows, dtype=torch.int32).reshape(nq, num_max)

    def operand(n):
        if fp4:
            return torch.randint(-128, 128, (n, dim // 2), dtype=torch.int8, generator=gen)
        return (torch.randn(n, dim, generator=gen) * 2).to(FP8)

    def words(n):
        exps = torch.randint(125, 130, (n, 4), generator=gen, dtype=torch.int32)
        return exps[:, 0] | (exps[:, 1] << 8) | (exps[:, 2] << 16) | (exps[:, 3] << 24)

    width = dim // 2 if fp4 else dim
    q, q_sf = operand(nq * heads).reshape(nq, heads, width), words(nq * heads).reshape(nq, heads)
    kv, kv_sf = operand(num_kv), words(num_kv)
    w = randn(nq, heads, gen=gen, dtype=BF16)
    dtype = torch.int8 if fp4 else FP8
    meta = deep_gemm.get_sparse_mqa_logits_metadata(torch.tensor(ks, dtype=torch.int32),
                                                    torch.tensor(ke, dtype=torch.int32), num_kv, indices, dtype, sbk,
                                                    use_unaligned_ks=unaligned)
    out = deep_gemm.fp8_fp4_sparse_mqa_logits((q, q_sf), (kv, kv_sf), w, meta, num_max, sbk,
                                              use_unaligned_ks=unaligned)

    def values(x, sf):
        raw = e2m1_values(x.reshape(-1, width)) if fp4 else x.reshape(-1, width).double()
        return raw.reshape(*sf.shape, dim) * ue8m0_word_scales(sf)

    qv, kvv = values(q, q_sf), values(kv, kv_sf)
    want = torch.full((nq, num_max * sbk), float("-inf"), dtype=torch.float64)
    for i in range(nq):
        for j in range(counts[i]):
            start = rows[i][j] * sbk + (ks[i] % sbk if unaligned else 0)
            for t in range(sbk):
                token = start + t
                if token < num_kv:
                    scores = (qv[i] @ kvv[token]).clamp(min=0)
                    want[i, j * sbk + t] = float(scores @ w[i].double())
    got = out.double()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = torch.isfinite(want)
    close(got[finite], want[finite], 8e-3, "sparse_mqa_logits")


@examples(80)
@given(nq=st.integers(1, 3), pages=st.integers(1, 4), page_kv=st.sampled_from([32, 64]), sbk=st.sampled_from([8, 16]),
       fp4=st.booleans(), data=st.data())
def test_paged_sparse_mqa_logits(nq, pages, page_kv, sbk, fp4, data):
    """The paged form: row i's logical block idx lies in page idx // (page_kv / sbk) of its block-table row, at
    (idx % (page_kv / sbk)) * sbk within it; the fused cache holds each page's token values, then their scale words
    (512-byte aligned pages). Against a float64 loop over the physical tokens, decoded here."""
    heads, dim, num_max = 32, 128, 4
    gen = seeded(data.draw(seeds))
    width = dim // 2 if fp4 else dim
    token_bytes = width + 4
    stride = -(-page_kv * token_bytes // 512) * 512
    values = torch.randint(0, 256, (pages, page_kv, width), dtype=torch.uint8, generator=gen)
    if not fp4:  # finite E4M3 codes only (0x7F / 0xFF are NaN)
        values = torch.where((values & 0x7F) == 0x7F, values ^ 0x01, values)
    exps = torch.randint(125, 130, (pages, page_kv, 4), dtype=torch.uint8, generator=gen)
    raw = torch.zeros(pages, stride, dtype=torch.uint8)
    raw[:, :page_kv * width] = values.reshape(pages, -1)
    raw[:, page_kv * width:page_kv * token_bytes] = exps.reshape(pages, -1)
    cache = raw.reshape(-1).as_strided((pages, page_kv, 1, token_bytes), (stride, token_bytes, token_bytes, 1))
    table = torch.stack([torch.randperm(pages, generator=gen) for _ in range(nq)]).int()
    bpp = page_kv // sbk
    lens = [data.draw(st.integers(0, pages * page_kv)) for _ in range(nq)]
    counts = [min(num_max, -(-n // sbk)) for n in lens]
    rows = [data.draw(st.lists(st.integers(0, pages * bpp - 1), min_size=c, max_size=c)) + [0] * (num_max - c)
            for c in counts]
    q_bytes = torch.randint(0, 256, (nq, 1, heads, width), dtype=torch.uint8, generator=gen)
    if not fp4:
        q_bytes = torch.where((q_bytes & 0x7F) == 0x7F, q_bytes ^ 0x01, q_bytes)
    q = q_bytes.view(torch.int8 if fp4 else FP8)
    q_exps = torch.randint(125, 130, (nq, 1, heads, 4), dtype=torch.uint8, generator=gen)
    q_sf = q_exps.view(torch.int32).reshape(nq, 1, heads)
    w = randn(nq, heads, gen=gen, dtype=BF16)
    dtype = torch.int8 if fp4 else FP8
    meta = deep_gemm.get_paged_sparse_mqa_logits_metadata(torch.tensor(lens, dtype=torch.int32), table,
                                                          torch.arange(nq, dtype=torch.int32), page_kv,
                                                          torch.tensor(rows, dtype=torch.int32), dtype, sbk)
    out = deep_gemm.fp8_fp4_paged_sparse_mqa_logits((q, q_sf), cache, w, meta, num_max, sbk)

    def decode(codes, exps_bytes):  # codes uint8 [width], exponents uint8 [4] -> float64 [128]
        vals = e2m1_values(codes.view(torch.int8)[None])[0] if fp4 else codes.view(FP8).double()
        return vals * torch.exp2((exps_bytes.double() - 127)).repeat_interleave(32)

    want = torch.full((nq, num_max * sbk), float("-inf"), dtype=torch.float64)
    for i in range(nq):
        qv = torch.stack([decode(q_bytes[i, 0, h], q_exps[i, 0, h]) for h in range(heads)])
        for j in range(counts[i]):
            page = int(table[i, rows[i][j] // bpp])
            for t in range(sbk):
                token = (rows[i][j] % bpp) * sbk + t
                key = decode(values[page, token], exps[page, token])
                want[i, j * sbk + t] = float((qv @ key).clamp(min=0) @ w[i].double())
    got = out.double()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = torch.isfinite(want)
    close(got[finite], want[finite], 8e-3, "paged_sparse_mqa_logits")


@examples(200)
@given(nq=st.integers(0, 40), num_kv=st.integers(0, 3000), heads=st.sampled_from([8, 16, 32, 64]),
       sms=st.integers(1, 9), data=st.data())
def test_mqa_logits_metadata_partitions_the_work(nq, num_kv, heads, sms, data):
    """get_mqa_logits_metadata: each Q block's span (base = the rows' smallest clipped ks rounded down to 4 tokens,
    splits of 256 tokens up to their largest clipped ke), and the SMs' (start block, start split, count) words cut
    that work into contiguous pieces in order, every split exactly once, balanced to one split and one segment."""
    from deep_gemm.attention.metadata.plan import SPLIT_KV
    ks = [data.draw(st.integers(-5, num_kv + 5)) for _ in range(nq)]
    ke = [data.draw(st.integers(-5, num_kv + 300)) for _ in range(nq)]
    deep_gemm.set_num_sms(sms)
    try:
        meta = deep_gemm.get_mqa_logits_metadata(torch.tensor(ks, dtype=torch.int32),
                                                 torch.tensor(ke, dtype=torch.int32), num_kv, heads).tolist()
    finally:
        deep_gemm.set_num_sms(0)
    bq = max(1, 128 // heads)
    blocks = -(-nq // bq)
    first = (3 * sms + 1) // 2 * 2
    assert len(meta) == first + 2 * blocks
    splits = []
    for b in range(blocks):
        rows = range(b * bq, min(nq, (b + 1) * bq))
        lo = min(min(max(ks[r], 0), num_kv) for r in rows)
        hi = max(min(max(ke[r], 0), num_kv) for r in rows)
        base = lo // 4 * 4
        splits.append(-(-max(hi - base, 0) // SPLIT_KV))
        assert meta[first + 2 * b:first + 2 * b + 2] == [base, splits[-1]], b
    before = [sum(splits[:b]) for b in range(blocks + 1)]  # splits before each block (the global coordinate)
    coordinate, counts = 0, []
    for sm in range(sms):
        block, offset, count = meta[2 * sm], meta[2 * sm + 1], meta[2 * sms + sm]
        assert count >= 0
        if count:
            assert 0 <= block < blocks and 0 <= offset < splits[block], (sm, block, offset)
            assert before[block] + offset == coordinate, (sm, "pieces must follow one another")
        counts.append(count)
        coordinate += count
    assert coordinate == before[-1], "every split exactly once"
    # balance: the cost (a split, plus one per block begun) is cut into equal shares; no SM gets more splits
    total_cost = before[-1] + sum(1 for n in splits if n)
    assert max(counts) <= -(-total_cost // sms) + 1, (counts, total_cost)


# ---- layout ------------------------------------------------------------------------------------------------------

@examples(120)
@given(g=st.sampled_from([None, 1, 3]), mn=small, sfk=st.integers(1, 9), seed=seeds)
def test_packed_ue8m0(g, mn, sfk, seed):
    gen = seeded(seed)
    lead = () if g is None else (g,)
    sf = ceil_to_ue8m0(torch.rand(*lead, mn, sfk, generator=gen) * 100 + 1e-3)
    packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    if mn == 0:
        assert packed.shape == (*lead, 0, -(-sfk // 4))
        return
    got = torch.empty(packed.shape, dtype=torch.int32).copy_(packed).view(torch.uint8).reshape(*lead, mn, -1)[..., :sfk]
    want = torch.log2(sf.double()).round().long() + 127
    assert torch.equal(got.long(), want)


@examples(120)
@given(g=st.sampled_from([None, 2]), mn=small, k=st.integers(1, 9), seed=seeds)
def test_mn_major_tma_aligned(g, mn, k, seed):
    lead = () if g is None else (g,)
    sf = torch.rand(*lead, mn, k, generator=seeded(seed))
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    assert torch.equal(out, sf) and (mn <= 1 or out.stride(-2) == 1)


# ---- HyperConnection, einsum -------------------------------------------------------------------------------------

@examples(200)
@given(m=small, n=st.sampled_from([8, 16, 24]), k=st.sampled_from([64, 128, 448]),
       splits=st.sampled_from([None, 1, 3]), seed=seeds)
def test_hc_prenorm(m, n, k, splits, seed):
    gen = seeded(seed)
    a, b = randn(m, k, gen=gen, dtype=BF16), randn(n, k, gen=gen)
    lead = () if splits is None else (splits,)
    d, sq = torch.zeros(*lead, m, n), torch.zeros(*lead, m)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, sq, num_splits=splits)
    if splits is not None:
        d, sq = d.sum(0), sq.sum(0)
    close(d, (a.double()[:, None, :] * b.double()[None]).sum(-1), 2e-3, "hc d")
    close(sq, (a.double() ** 2).sum(-1), 1e-5, "hc sqr_sum")


@examples(200)
@given(s=st.integers(0, 3), m=small, n=mult8, k=mult8, seed=seeds)
def test_einsum_bmk_bnk_mn(s, m, n, k, seed):
    gen = seeded(seed)
    a, b = randn(s, m, k, gen=gen, dtype=BF16), randn(s, n, k, gen=gen, dtype=BF16)
    d = torch.zeros(m, n)
    deep_gemm.einsum("bmk,bnk->mn", a, b, d)
    want = sum(((a[i].double()[:, None, :] * b[i].double()[None]).sum(-1) for i in range(s)),
               torch.zeros(m, n, dtype=torch.float64))
    close(d, want, 1e-5, "einsum")


# ---- Mega MoE (one rank) ------------------------------------------------------------------------------------------

@examples(120)
@given(experts=st.sampled_from([2, 4, 6]), tokens=st.integers(0, 12), hidden=st.sampled_from([128, 256]),
       inter=st.sampled_from([128, 256]), clamp=st.sampled_from([None, 1.0, 10.0]), shared=st.booleans(),
       stats=st.booleans(), data=st.data())
def test_bf16_mega_moe(experts, tokens, hidden, inter, clamp, shared, stats, data):
    """bf16_mega_moe at world size 1 against a float64 loop over tokens and slots: SwiGLU with the clamp, times the
    top-k weight, rounded to BF16 (the layer's intermediate), L2 rounded to BF16, summed over the routed slots, plus
    the shared expert; the received-token statistics exact. Besides calc_diff (blind to a common scale error), the
    mean error must stay within a few BF16 roundings of the mean value."""
    from deep_gemm.testing.mega_moe import bf16_buffer, bf16_weights
    topk = data.draw(st.integers(1, min(3, experts)))
    gen = seeded(data.draw(seeds))
    w1, w2 = bf16_weights(experts, hidden, inter, "cpu", seed=data.draw(st.integers(0, 9)))
    idx = torch.rand(tokens, experts, generator=gen).argsort(dim=1)[:, :topk]  # distinct experts per token
    idx[torch.rand(tokens, topk, generator=gen) < data.draw(st.sampled_from([0.0, 0.3, 1.0]))] = -1
    weights = torch.rand(tokens, topk, generator=gen) + 0.25
    x = randn(tokens, hidden, gen=gen, dtype=BF16)
    buf = bf16_buffer(experts, max(tokens, 1), topk, hidden, inter, "cpu")
    buf.x[:tokens].copy_(x)
    buf.topk_idx[:tokens].copy_(idx)
    buf.topk_idx[tokens:].fill_(-1)
    buf.topk_weights[:tokens].copy_(weights)
    l1, l2 = deep_gemm.transform_weights_for_mega_moe(w1, w2, mma_type="bf16xbf16")
    extra = {}
    if shared:
        s1, s2 = bf16_weights(1, hidden, inter, "cpu", seed=7)
        extra = dict(zip(("shared_l1_weights", "shared_l2_weights"),
                         deep_gemm.transform_weights_for_mega_moe(s1[0], s2[0], mma_type="bf16xbf16")))
    counts = torch.arange(experts, dtype=torch.int32) * 5 if stats else None
    before = None if counts is None else counts.clone()
    y = torch.full((tokens, hidden), float("nan"), dtype=BF16)
    deep_gemm.bf16_mega_moe(y, l1, l2, buf, cumulative_local_expert_recv_stats=counts, activation_clamp=clamp,
                            **extra)

    def expert(w_up_gate, w_down, token, weight=1.0):
        h = w_up_gate.double() @ token  # [gate | up]
        gate, up = h[:h.numel() // 2], h[h.numel() // 2:]
        if clamp is not None:
            gate, up = gate.clamp(max=clamp), up.clamp(-clamp, clamp)
        act = (gate * torch.sigmoid(gate) * up * weight).to(BF16).double()
        return (w_down.double() @ act).to(BF16).double()

    want = torch.zeros(tokens, hidden, dtype=torch.float64)
    for t in range(tokens):
        xt = x[t].double()
        for slot in range(topk):
            e = int(idx[t, slot])
            if e >= 0:
                want[t] += expert(w1[e], w2[e], xt, float(weights[t, slot]))
        if shared:
            want[t] += expert(s1[0], s2[0], xt)
    if tokens and (shared or bool((idx >= 0).any())):
        want = want.to(BF16).double()  # the layer's last rounding
        assert deep_gemm.testing.calc_diff(y, want) < 1e-4
        assert (y.double() - want).abs().mean() <= 5e-4 * want.abs().mean()
    elif tokens:
        assert not y.float().any(), "tokens with every slot masked and no shared expert must come out zero"
    if counts is not None:
        received = torch.bincount(idx[idx >= 0], minlength=experts).int()
        assert torch.equal(counts, before + received)


@examples(80)
@given(tokens=st.integers(0, 9), hidden=st.sampled_from([128, 384]), topk=st.integers(1, 4),
       scaling=st.sampled_from([1.0, 2.5]), seed=seeds)
def test_mega_moe_pre_dispatch_sm90(tokens, hidden, topk, scaling, seed):
    """FP8 tokens with one FP32 scale per 128 channels, ``max(amax, 1e-10) / 448`` (DeepGEMM's formula), bitwise;
    the top-k copied with the weights scaled; the buffer's slots past the tokens masked."""
    gen = seeded(seed)
    capacity = tokens + 3
    x = randn(tokens, hidden, gen=gen, dtype=BF16) * float(torch.rand(1, generator=gen) * 100)
    idx = torch.randint(-1, 8, (tokens, topk), generator=gen)
    w = torch.rand(tokens, topk, generator=gen)
    buf_x = torch.zeros(capacity, hidden, dtype=FP8)
    buf_sf = torch.zeros(capacity, hidden // 128)
    buf_idx = torch.full((capacity, topk), 5, dtype=torch.int64)
    buf_w = torch.full((capacity, topk), 9.0)
    deep_gemm.mega_moe_pre_dispatch_sm90(x, idx, w, buf_x, buf_sf, buf_idx, buf_w, tokens,
                                         routed_scaling_factor=scaling)
    for t in range(tokens):
        for g in range(hidden // 128):
            block = x[t, g * 128:(g + 1) * 128].float()
            scale = torch.tensor(max(float(block.abs().max()), 1e-10), dtype=torch.float32) / \
                torch.tensor(448.0, dtype=torch.float32)
            assert torch.equal(buf_sf[t, g], scale), (t, g)
            assert torch.equal(buf_x[t, g * 128:(g + 1) * 128].view(torch.uint8),
                               (block * (1.0 / scale)).to(FP8).view(torch.uint8)), (t, g)
    assert torch.equal(buf_idx[:tokens], idx) and torch.equal(buf_w[:tokens], w * scaling)
    assert bool((buf_idx[tokens:] == -1).all()) and bool((buf_w[tokens:] == 0).all())


# ---- MoE gate ------------------------------------------------------------------------------------------------------

@examples(200)
@given(tokens=st.integers(0, 6), experts=st.sampled_from([4, 8, 12]), scoring=st.sampled_from(
    ["identity", "sigmoid", "sqrtsoftplus"]), biased=st.booleans(), masked=st.booleans(),
    shared=st.sampled_from([0, 1, 2]), data=st.data())
def test_bf16_mega_gate(tokens, experts, scoring, biased, masked, shared, data):
    """bf16_mega_gate's routing path: the K experts of highest scored logit (plus the bias, for ranking only), the
    weights their unbiased scores over the sum times the scaling, the shared experts after them with weight 1,
    masked tokens -1 / 0; against float64 here (tokens whose K-th and next keys nearly tie are not compared)."""
    # (with shared experts as routed: K a multiple of S, and E a multiple of K / S, as DeepGEMM's kernel requires)
    valid = [k for k in range(1, min(4, experts) + 1)
             if not shared or (k % shared == 0 and experts % (k // shared) == 0)]
    hidden, topk = 256, data.draw(st.sampled_from(valid))
    scaling = data.draw(st.sampled_from([1.0, 2.5]))
    gen = seeded(data.draw(seeds))
    x, weight = randn(tokens, hidden, gen=gen, dtype=BF16), randn(experts, hidden, gen=gen, dtype=BF16) * 0.1
    bias = randn(experts, gen=gen) if biased else None
    mask = torch.rand(tokens, generator=gen) < 0.7 if masked else None
    idx, w = deep_gemm.bf16_mega_gate(x, weight, topk, bool(shared), max(shared, 1), scaling, 0, scoring_func=scoring,
                                      mask=mask, bias=bias)
    assert idx.shape == (tokens, topk + shared) and w.shape == idx.shape
    logits = x.double() @ weight.double().T
    if scoring == "sigmoid":
        scores = torch.sigmoid(logits)
    elif scoring == "sqrtsoftplus":
        scores = torch.sqrt(torch.nn.functional.softplus(logits))
    else:
        scores = logits
    keys = scores + (bias.double() if biased else 0)
    for t in range(tokens):
        if masked and not bool(mask[t]):
            assert bool((idx[t] == -1).all()) and bool((w[t] == 0).all()), t
            continue
        order = sorted(range(experts), key=lambda e: (-float(keys[t, e]), e))
        if topk < experts and abs(float(keys[t, order[topk - 1]] - keys[t, order[topk]])) < \
                1e-4 * (1 + abs(float(keys[t, order[topk]]))):
            continue  # a near-tie: FP32 and float64 may pick differently
        chosen = order[:topk]
        assert sorted(idx[t, :topk].tolist()) == sorted(chosen), (t, idx[t].tolist(), chosen)
        total = sum(float(scores[t, e]) for e in chosen) + 1e-20
        for slot in range(topk):
            e = int(idx[t, slot])
            want = float(scores[t, e]) / total * scaling
            assert abs(float(w[t, slot]) - want) <= 1e-4 * max(1.0, abs(want)), (t, e, float(w[t, slot]), want)
        assert idx[t, topk:].tolist() == list(range(experts, experts + shared))
        assert bool((w[t, topk:] == 1).all())


# ---- mega_mhc -----------------------------------------------------------------------------------------------------

@examples(200)
@given(tokens=st.integers(0, 4), shifted=st.booleans(), iters=st.integers(1, 12), fp8=st.booleans(),
       scale=st.sampled_from([1e-3, 1.0, 30.0]), seed=seeds)
def test_mega_mhc(tokens, shifted, iters, fp8, scale, seed):
    """One mHC step (4 routes, hidden 1024) against float64 written here: the post-mixed residual (rounded to
    BF16), the 24 projections scaled by the residual's RMS, sigmoid pre / post mixes, a Sinkhorn-normalised comb,
    the RMSNorm'd next-layer input and its FP8 form (UE8M0 exponent: the smallest e with amax / 2^e <= 448, at least
    -22; four per int32 word)."""
    r, h = 4, 1024
    gen = seeded(seed)
    x = (randn(tokens, h, gen=gen) * scale).to(BF16)
    residual = (randn(tokens, r, h, gen=gen) * scale).to(BF16)
    post_mix, comb_res_mix = torch.rand(tokens, r, 1, generator=gen), torch.rand(tokens, r, r, generator=gen)
    fn = randn(24, r * h, gen=gen) * 0.02
    mix_scales, mix_bases = torch.rand(3, generator=gen) + 0.5, randn(24, gen=gen) * 0.1
    weight = (torch.rand(h, generator=gen) + 0.5).to(BF16)
    prev = torch.rand(tokens, r, 1, generator=gen) if shifted else None
    eps = dict(hc_norm_eps=1e-6, hc_pre_eps=1e-2, hc_post_scale=2.0, sinkhorn_eps=1e-6, rmsnorm_eps=1e-6)
    outs = dict(new_residual=torch.empty(tokens, r, h, dtype=BF16),
                new_prev_mix=torch.empty(tokens, r, 1) if shifted else None, new_post_mix=torch.empty(tokens, r, 1),
                new_comb_res_mix=torch.empty(tokens, r, r), y_bf16=torch.empty(tokens, h, dtype=BF16))
    if fp8:
        rows = max(4, -(-tokens // 4) * 4)
        outs.update(y_fp8=torch.empty(tokens, h, dtype=FP8),
                    y_gemm_sf=torch.zeros(rows * (h // 128), dtype=torch.int32).as_strided((tokens, h // 128),
                                                                                          (1, rows)))
    deep_gemm.mega_mhc(x, residual, prev, post_mix, comb_res_mix, fn, mix_scales, mix_bases, 4, eps["hc_norm_eps"],
                       eps["hc_pre_eps"], eps["hc_post_scale"], eps["sinkhorn_eps"], iters, weight, eps["rmsnorm_eps"],
                       1.5, **outs)
    for t in range(tokens):
        mixed = torch.stack([post_mix[t, o, 0].double() * x[t].double()
                             + sum(comb_res_mix[t, i, o].double() * residual[t, i].double() for i in range(r))
                             for o in range(r)])
        nr = mixed.to(BF16)
        assert torch.equal(outs["new_residual"][t], nr), t
        flat = nr.double().reshape(-1)
        rms = 1.0 / torch.sqrt((flat * flat).mean() + eps["hc_norm_eps"])
        a = (fn.double() @ flat) * rms * mix_scales.double()[[0] * r + [1] * r + [2] * (r * r)] + mix_bases.double()
        pre = torch.sigmoid(a[:r]) + eps["hc_pre_eps"]
        close(outs["new_post_mix"][t, :, 0], torch.sigmoid(a[r:2 * r]) * eps["hc_post_scale"], 1e-5, "post")
        comb = torch.softmax(a[2 * r:].reshape(r, r), dim=1) + eps["sinkhorn_eps"]
        comb = comb / (comb.sum(0, keepdim=True) + eps["sinkhorn_eps"])
        for _ in range(iters - 1):
            comb = comb / (comb.sum(1, keepdim=True) + eps["sinkhorn_eps"])
            comb = comb / (comb.sum(0, keepdim=True) + eps["sinkhorn_eps"])
        close(outs["new_comb_res_mix"][t], comb, 1e-5, "comb")
        if shifted:
            close(outs["new_prev_mix"][t, :, 0], pre, 1e-5, "prev")
        coeff = prev[t, :, 0].double() if shifted else pre
        u = (coeff[:, None] * nr.double()).sum(0).to(BF16).double()
        y = u / torch.sqrt((u * u).mean() + eps["rmsnorm_eps"]) * 1.5 * weight.double()
        close(outs["y_bf16"][t], y, 2 ** -7, "y")
        if fp8:
            yb = outs["y_bf16"][t].double()
            for g in range(h // 32):
                amax = float(yb[g * 32:(g + 1) * 32].abs().max())
                e = -22
                while amax / 2.0 ** e > 448:
                    e += 1
                while e > -22 and amax / 2.0 ** (e - 1) <= 448:
                    e -= 1
                word = int(outs["y_gemm_sf"][t, g // 4]) & 0xFFFFFFFF
                assert (word >> (8 * (g % 4))) & 0xFF == e + 127, (t, g, e)
                want = (yb[g * 32:(g + 1) * 32] / 2.0 ** e).float().to(FP8)
                assert torch.equal(outs["y_fp8"][t, g * 32:(g + 1) * 32].view(torch.uint8), want.view(torch.uint8))


# ---- random bad data: a DeepGEMMError and an untouched output, or the correct result ---------------------------

@examples(120)
@given(g=st.integers(1, 3), data=st.data())
def test_bad_grouped_data(g, data):
    n, k, total = 16, 16, 16
    deep_gemm.set_mk_alignment_for_contiguous_layout(8)
    try:
        gen = seeded(data.draw(seeds))
        a, b = randn(total, k, gen=gen, dtype=BF16), randn(g, n, k, gen=gen, dtype=BF16)
        psum = data.draw(st.booleans())
        if psum:
            values = sorted(data.draw(st.integers(-4, total + 4)) for _ in range(g))
            if data.draw(st.booleans()):
                values = values[::-1]
        else:
            values = [data.draw(st.integers(-3, g + 1)) for _ in range(total)]
        layout = torch.tensor(values, dtype=torch.int32)
        d = torch.full((total, n), 5.0, dtype=BF16)
        before = d.clone()
        try:
            deep_gemm.m_grouped_bf16_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=psum,
                                                        ensure_zero_padding=True)
        except DeepGEMMError:
            assert torch.equal(d, before)
            valid = (all(x >= y for x, y in zip(values[1:], values)) and values[0] >= 0 and values[-1] <= total) \
                if psum else all(-1 <= x < g for x in values)
            assert not valid, f"a valid layout was refused: {values}"
            return
        # accepted: the data was valid, and the result is the float64 one
        ids = torch.full((total,), -1)
        if psum:
            assert all(x >= y for x, y in zip(values[1:], values)) and values[0] >= 0 and values[-1] <= total
            prev = 0
            for gi, end in enumerate(values):
                start = -(-prev // 8) * 8
                if end > start:
                    ids[start:end] = gi
                prev = end
        else:
            assert all(-1 <= x < g for x in values)
            ids = layout.long()
        want = torch.zeros(total, n, dtype=torch.float64)
        for r in range(total):
            if ids[r] >= 0:
                want[r] = (a[r].double()[None] * b[int(ids[r])].double()).sum(-1)
        close(d, want, 1e-2, "accepted layout")
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)


@examples(120)
@given(g=st.integers(1, 4), data=st.data())
def test_bad_k_psum_ends(g, data):
    """Random K psum ends, valid or not: a DeepGEMMError with d untouched, or the float64 result."""
    alignment, sum_k, m, n = 8, 24, 8, 8
    ends = [data.draw(st.integers(-2, sum_k + 2)) for _ in range(g)]
    gen = seeded(data.draw(seeds))
    a, b = randn(sum_k, m, gen=gen, dtype=BF16), randn(sum_k, n, gen=gen, dtype=BF16)
    d = torch.full((g, m, n), 5.0)
    before = d.clone()
    valid, previous = ends[-1] <= sum_k, 0
    for end in ends:
        valid = valid and (end == previous or end >= -(-previous // alignment) * alignment)
        previous = end
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    try:
        deep_gemm.k_grouped_bf16_gemm_tn_contiguous(a, b, d, None, torch.tensor(ends, dtype=torch.int32),
                                                     use_psum_layout=True)
    except DeepGEMMError:
        assert torch.equal(d, before) and not valid, f"valid ends were refused: {ends}"
        return
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(128)
    assert valid, f"bad ends were accepted: {ends}"
    close(d, k_psum_truth(a, b, ends, alignment), 1e-5, f"accepted ends {ends}")


@examples(80)
@given(data=st.data())
def test_bad_masked_and_windows(data):
    gen = seeded(data.draw(seeds))
    g, max_m, n, k = 2, 4, 8, 8
    masked = [data.draw(st.integers(-2, max_m + 2)) for _ in range(g)]
    a, b = randn(g, max_m, k, gen=gen, dtype=BF16), randn(g, n, k, gen=gen, dtype=BF16)
    d = torch.full((g, max_m, n), 1.0, dtype=BF16)
    before = d.clone()
    try:
        deep_gemm.m_grouped_bf16_gemm_nt_masked(a, b, d, torch.tensor(masked, dtype=torch.int32), 2)
        assert all(0 <= x <= max_m for x in masked)
    except DeepGEMMError:
        assert torch.equal(d, before) and not all(0 <= x <= max_m for x in masked)
    s, sk = 3, 10
    ks = [data.draw(st.integers(-2, sk + 2)) for _ in range(s)]
    ke = [data.draw(st.integers(-2, sk + 2)) for _ in range(s)]
    q, kv = randn(s, 8, 32, gen=gen).to(FP8), randn(sk, 32, gen=gen).to(FP8)
    valid = all(0 <= x <= y <= sk for x, y in zip(ks, ke))
    try:
        out = deep_gemm.fp8_mqa_logits(q, (kv, torch.ones(sk)), randn(s, 8, gen=gen),
                                       torch.tensor(ks, dtype=torch.int32), torch.tensor(ke, dtype=torch.int32))
        assert valid
        for i in range(s):
            assert torch.isfinite(out[i, :sk]).sum() == ke[i] - ks[i]
    except DeepGEMMError:
        assert not valid
