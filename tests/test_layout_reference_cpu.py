"""Scale-factor layout ops: bitwise vs per-element Python re-derivations, exact strides, fresh storage, opcheck,
FakeTensorMode metadata and bad inputs."""

from __future__ import annotations

import math
import struct

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import deep_gemm
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.testing import assert_bitwise_equal as _assert_bitwise_equal

ops = torch.ops.deep_gemm
MN_MAJOR = ops.get_mn_major_tma_aligned_tensor.default
PACKED = ops.get_mn_major_tma_aligned_packed_ue8m0_tensor.default
K_GROUPED = ops.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor.default
TRANSFORM = ops.transform_sf_into_required_layout.default


def assert_bitwise_equal(x: torch.Tensor, y: torch.Tensor, label: str = "") -> None:
    """deep_gemm.testing.assert_bitwise_equal on flattened tensors: it cannot byte-view a tensor torch calls
    contiguous whose size-1 last dim has a non-unit stride (e.g. MN-major [MN, 1])."""
    assert x.shape == y.shape, f"{label}: shape {tuple(x.shape)} != {tuple(y.shape)}"
    _assert_bitwise_equal(x.flatten(), y.flatten(), label)


# ---- independent re-derivations (plain Python, per element) -----------------------------------------------------

def _aligned4(x: int) -> int:
    return -(-x // 4) * 4


def _expected_strides(shape) -> tuple:
    """DeepGEMM's MN-major TMA-aligned strides, spelled out: MN contiguous, columns every align(MN, 4)."""
    col = _aligned4(shape[-2])
    return (1, col) if len(shape) == 2 else (col * shape[-1], 1, col)


def _exponent_byte(value: float) -> int:
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    return (bits >> 23) & 0xFF


def _pack4(exponent_bytes) -> int:
    """Four bytes, the first in the lowest position, as a signed 32-bit integer."""
    return int.from_bytes(bytes(exponent_bytes), "little", signed=True)


def _packed_rows(rows, keep_row=lambda r: True):
    """[MN][SFK] floats -> [MN][ceil(SFK/4)] packed ints (rows rejected by keep_row pack to 0)."""
    out = []
    for r, row in enumerate(rows):
        words = []
        for i in range(0, len(row), 4):
            chunk = [(_exponent_byte(v) if keep_row(r) else 0) for v in row[i:i + 4]]
            words.append(_pack4(chunk + [0] * (4 - len(chunk))))
        out.append(words)
    return out


def _psum_ranges(ends, alignment):
    starts, previous = [], 0
    for g, end in enumerate(ends):
        starts.append(0 if g == 0 else math.ceil(previous / alignment) * alignment)
        previous = end
    return list(zip(starts, ends))


def _k_grouped_oracle(sf_rows, mn, group_ks, gran_k, total_rows):
    """Per group: ceil(SFK_g / 4) packed rows, each packing 4 consecutive SF rows of that group only."""
    out, cursor = [], 0
    for kg in group_ks:
        count = -(-kg // gran_k)
        for first in range(0, count, 4):
            row = []
            for col in range(mn):
                chunk = [_exponent_byte(sf_rows[cursor + first + j][col]) if first + j < count else 0 for j in range(4)]
                row.append(_pack4(chunk))
            out.append(row)
        cursor += count
    out += [[0] * mn for _ in range(total_rows - len(out))]
    return torch.tensor(out, dtype=torch.int32).view(total_rows, mn)


def _powers_of_two(*shape) -> torch.Tensor:
    """Random FP32 powers of two over the whole UE8M0 range, plus zeros."""
    exponents = torch.randint(-126, 128, shape)
    values = torch.ldexp(torch.ones(shape), exponents.float())
    return torch.where(torch.rand(shape) < 0.1, torch.zeros(shape), values)


def _assert_fresh(out: torch.Tensor, *inputs: torch.Tensor) -> None:
    for t in inputs:
        if out.untyped_storage().nbytes() and t.untyped_storage().nbytes():  # empty storages all sit at address 0
            assert out.untyped_storage().data_ptr() != t.untyped_storage().data_ptr(), "output aliases an input"


def _layouts(t: torch.Tensor):
    """The same logical tensor as contiguous, MN-major (already TMA-aligned when MN % 4 == 0) and strided copies."""
    mn_major = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    strided = torch.empty(*t.shape[:-1], t.size(-1) * 2)[..., ::2]
    strided.copy_(t)
    return {"contiguous": t, "mn_major": mn_major, "strided": strided}


SHAPES = [(mn, sfk) if g is None else (g, mn, sfk) for mn in (4, 5, 129) for sfk in (1, 3, 7) for g in (None, 1, 2)]


def _over_shapes_layouts_and_paths(test):
    """Every shape x input layout x (public API, dispatcher op)."""
    test = pytest.mark.parametrize("via", ("api", "op"))(test)
    test = pytest.mark.parametrize("layout", ("contiguous", "mn_major", "strided"))(test)
    return pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))(test)


# ---- get_mn_major_tma_aligned_tensor ----------------------------------------------------------------------------

@_over_shapes_layouts_and_paths
def test_mn_major_tma_aligned(shape, layout, via):
    sf = _layouts(torch.randn(shape))[layout]
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf) if via == "api" else MN_MAJOR(sf)
    assert out.stride() == _expected_strides(shape)
    assert out.dtype == torch.float32 and tuple(out.shape) == shape
    assert out.tolist() == sf.tolist()
    assert_bitwise_equal(out, sf)
    if via == "api" and sf.stride() == _expected_strides(shape):
        assert out is sf, "an input already in the layout is returned as is (DeepGEMM launches nothing)"
    else:
        _assert_fresh(out, sf)


# ---- get_mn_major_tma_aligned_packed_ue8m0_tensor ---------------------------------------------------------------

@_over_shapes_layouts_and_paths
def test_packed_ue8m0(shape, layout, via):
    sf = _layouts(_powers_of_two(*shape))[layout]
    out = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf) if via == "api" else PACKED(sf, None)
    packed_shape = (*shape[:-1], -(-shape[-1] // 4))
    assert out.dtype == torch.int32 and tuple(out.shape) == packed_shape
    assert out.stride() == _expected_strides(packed_shape)
    groups = [sf.tolist()] if len(shape) == 2 else sf.tolist()
    want = torch.tensor([_packed_rows(rows) for rows in groups], dtype=torch.int32).view(packed_shape)
    assert_bitwise_equal(out, want)
    _assert_fresh(out, sf)


def test_packed_ue8m0_round_trips_through_utils():
    sf = _powers_of_two(37, 8)
    out = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    assert_bitwise_equal(deep_gemm.utils.unpack_ue8m0_from_int(out), sf)
    assert_bitwise_equal(out, deep_gemm.utils.pack_ue8m0_to_int(sf))


@pytest.mark.parametrize("shape", [(5, 0), (2, 0, 3), (0, 6)], ids=str)
def test_empty_scales(shape):
    for op, args, cols in ((MN_MAJOR, (), shape[-1]), (PACKED, (None,), -(-shape[-1] // 4))):
        out = op(torch.zeros(shape), *args)
        want_shape = (*shape[:-1], cols)
        assert tuple(out.shape) == want_shape and out.stride() == _expected_strides(want_shape)


def test_packed_ue8m0_refuses_what_it_cannot_represent():
    """The CPU kernel checks the data (it used to drop sign and mantissa silently): a negative scale, a mantissa or a
    denormal raise, naming the first bad element; zero mantissas (powers of two, +inf) pack to their exponents."""
    sf = torch.tensor([[4.0, 0.5, 1.0, 2.0 ** -126, float("inf")]])
    assert PACKED(sf, None).tolist() == [[_pack4([129, 126, 127, 1]), _pack4([255, 0, 0, 0])]]
    for index, bad in ((1, -0.75), (0, 3.0), (3, 2.0 ** -130)):
        wrong = sf.clone()
        wrong[0, index] = bad
        with pytest.raises(DeepGEMMError, match=rf"sf: expected non-negative powers of two .*got sf\[0, {index}\]"):
            PACKED(wrong, None)


PSUM_CASES = [
    # (mn, sfk, alignment, group ends)
    (129, 3, 128, [5, 129]),  # group 1 starts at 128: rows 5..127 are a gap
    (40, 5, 8, [3, 3, 17, 30]),  # an empty group, gaps and a tail (30..39) outside every group
    (12, 4, 4, [12]),  # one group covering everything
    (9, 2, 4, [0, 2]),  # empty first group
]


@pytest.mark.parametrize("mn,sfk,alignment,ends", PSUM_CASES, ids=[f"mn{c[0]}-{c[3]}" for c in PSUM_CASES])
def test_packed_ue8m0_psum_layout(mn, sfk, alignment, ends):
    sf = _powers_of_two(mn, sfk)
    psum = torch.tensor(ends, dtype=torch.int32)
    saved = deep_gemm.get_mk_alignment_for_contiguous_layout()
    deep_gemm.set_mk_alignment_for_contiguous_layout(alignment)
    try:
        out = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, psum_layout=psum)
        out_op = PACKED(sf, psum)
    finally:
        deep_gemm.set_mk_alignment_for_contiguous_layout(saved)
    ranges = _psum_ranges(ends, alignment)
    want = torch.tensor(_packed_rows(sf.tolist(), lambda r: any(lo <= r < hi for lo, hi in ranges)),
                        dtype=torch.int32).view(mn, -(-sfk // 4))
    assert_bitwise_equal(out, want)
    assert_bitwise_equal(out_op, want)
    assert out.stride() == _expected_strides(want.shape)


# ---- get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor ------------------------------------------------------

K_GROUPED_CASES = [
    # (mn, gran_k, k_alignment, group K sizes)
    (4, 32, 32, [64, 0, 96, 32]),
    (8, 128, 128, [640, 0, 512]),
    (132, 128, 128, [128, 256, 384, 0]),
    (12, 32, 64, [0, 0, 192]),
    (4, 32, 32, [0, 0]),  # no scale rows at all: [0, MN]
    (16, 128, 128, [128 * 9]),
]


@pytest.mark.parametrize("mn,gran_k,k_alignment,ks", K_GROUPED_CASES, ids=[str(c) for c in K_GROUPED_CASES])
@pytest.mark.parametrize("via", ("api", "op"))
def test_k_grouped_packed(mn, gran_k, k_alignment, ks, via):
    num_sf_rows = sum(kg // gran_k for kg in ks)
    sf = _powers_of_two(num_sf_rows, mn)
    layout = torch.tensor(ks, dtype=torch.int32)
    if via == "api":
        out = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, layout, ks, gran_k, k_alignment)
    else:
        out = K_GROUPED(sf, layout, ks, gran_k, k_alignment, False)
    rows = sum(-(-(kg // gran_k) // 4) for kg in ks)
    assert_bitwise_equal(out, _k_grouped_oracle(sf.tolist(), mn, ks, gran_k, rows))
    assert out.is_contiguous() and tuple(out.shape) == (rows, mn)
    _assert_fresh(out, sf, layout)


PSUM_K_CASES = [
    # (mn, gran_k, k_alignment, cumulative K ends, also pass ks_cpu)
    (8, 32, 64, [64, 64, 160, 224], False),  # an empty group; group 2 spans [64, 160): 3 rows, K not aligned
    (4, 128, 128, [0, 384, 640], False),  # empty first group
    (4, 128, 128, [0, 384, 640], True),
    (12, 32, 32, [32, 96, 96, 416], False),
    (12, 32, 32, [32, 96, 96, 416], True),
]


@pytest.mark.parametrize("mn,gran_k,k_alignment,ends,with_ks", PSUM_K_CASES, ids=[str(c) for c in PSUM_K_CASES])
def test_k_grouped_packed_psum(mn, gran_k, k_alignment, ends, with_ks):
    spans = [hi - lo for lo, hi in _psum_ranges(ends, k_alignment)]
    num_sf_rows = sum(-(-kg // gran_k) for kg in spans)
    sf = _powers_of_two(num_sf_rows, mn)
    ks = spans if with_ks else None
    out = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
        sf, torch.tensor(ends, dtype=torch.int32), ks, gran_k, k_alignment, use_psum_layout=True)
    # Without ks_cpu the row count is DeepGEMM's upper bound; rows past the groups' own are 0.
    rows = sum(-(-(-(-kg // gran_k)) // 4) for kg in spans) if with_ks else (num_sf_rows + 3 * len(ends)) // 4
    assert_bitwise_equal(out, _k_grouped_oracle(sf.tolist(), mn, spans, gran_k, rows))


# ---- transform_sf_into_required_layout -------------------------------------------------------------------------

@pytest.mark.parametrize("mn,k", [(5, 384), (129, 1000), (4, 128)])
@pytest.mark.parametrize("groups", (None, 2))
@pytest.mark.parametrize("recipe,is_sfa", [((1, 128, 128), True), ((1, 1, 128), False), ((1, 128), None),
                                           ((1, 32), None)])
def test_transform_per_row_fp32_becomes_mn_major(mn, k, groups, recipe, is_sfa):
    gran_k = recipe[-1]
    shape = (mn, -(-k // gran_k)) if groups is None else (groups, mn, -(-k // gran_k))
    sf = torch.randn(shape)
    out = deep_gemm.transform_sf_into_required_layout(sf, mn, k, recipe, num_groups=groups, is_sfa=is_sfa)
    assert out.stride() == _expected_strides(shape)
    assert_bitwise_equal(out, sf)
    _assert_fresh(out, sf)


def _contiguous_strides(shape):
    strides, running = [], 1
    for size in reversed(shape):
        strides.insert(0, running)
        running *= size
    return tuple(strides)


@pytest.mark.parametrize("n,k", [(130, 300), (128, 128), (1, 129)])
@pytest.mark.parametrize("groups", (None, 3))
@pytest.mark.parametrize("transposed", (False, True))
def test_transform_block_fp32_is_copied_as_laid_out(n, k, groups, transposed):
    shape = (-(-n // 128), -(-k // 128)) if groups is None else (groups, -(-n // 128), -(-k // 128))
    sf = torch.randn(shape)
    if transposed:
        sf = sf.transpose(-1, -2).contiguous().transpose(-1, -2)
    out = ops.transform_sf_into_required_layout.default(sf, n, k, [1, 128, 128], groups, False, False, None)
    assert out.stride() == sf.stride()
    assert_bitwise_equal(out, sf)
    _assert_fresh(out, sf)


@pytest.mark.parametrize("mn,k,gran_k", [(5, 512, 128), (129, 2048, 32), (8, 4096, 128)])
@pytest.mark.parametrize("groups", (None, 2))
def test_transform_packed_int_is_copied_canonically(mn, k, gran_k, groups):
    shape = (mn, -(-k // gran_k)) if groups is None else (groups, mn, -(-k // gran_k))
    packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(_powers_of_two(*shape))
    out = deep_gemm.transform_sf_into_required_layout(packed, mn, k, (1, gran_k), num_groups=groups)
    assert out is packed, "packed scales pass through the public API as they are (DeepGEMM launches nothing)"
    out = ops.transform_sf_into_required_layout.default(packed, mn, k, [1, gran_k], groups, None, False, None)
    assert out.stride() == packed.stride()
    assert_bitwise_equal(out, packed)
    _assert_fresh(out, packed)
    # A wider (still aligned) column stride is accepted and normalised.
    wide = torch.zeros(*shape[:-2], packed.size(-1), _aligned4(mn) + 4, dtype=torch.int32)
    wide = wide.transpose(-1, -2)[..., :mn, :]
    wide.copy_(packed)
    assert deep_gemm.transform_sf_into_required_layout(wide, mn, k, (1, gran_k), num_groups=groups) is wide
    out_wide = ops.transform_sf_into_required_layout.default(wide, mn, k, [1, gran_k], groups, None, False, None)
    assert out_wide.stride() == packed.stride()
    assert_bitwise_equal(out_wide, packed)


# ---- opcheck and FakeTensorMode ---------------------------------------------------------------------------------

def _sample_calls():
    sf2 = _powers_of_two(5, 3)
    sf3 = _powers_of_two(2, 129, 7)
    ks = [64, 0, 96]
    psum = torch.tensor([3, 5], dtype=torch.int32)
    block = torch.randn(2, 3)
    packed = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(_powers_of_two(5, 4))
    return [
        pytest.param(MN_MAJOR, (sf2,), id="mn_major-2d"),
        pytest.param(MN_MAJOR, (sf3.transpose(-1, -2).contiguous().transpose(-1, -2),), id="mn_major-3d"),
        pytest.param(PACKED, (sf3, None), id="packed-3d"),
        pytest.param(PACKED, (sf2, psum), id="packed-psum"),
        pytest.param(K_GROUPED, (_powers_of_two(5, 8), torch.tensor(ks, dtype=torch.int32), ks, 32, 32, False),
                     id="k_grouped"),
        pytest.param(K_GROUPED, (_powers_of_two(5, 8), torch.tensor([64, 64, 160], dtype=torch.int32), None, 32, 32,
                                 True), id="k_grouped-psum"),
        pytest.param(TRANSFORM, (sf2, 5, 300, [1, 128, 128], None, True, False, None), id="transform-per-row"),
        pytest.param(TRANSFORM, (block.T.contiguous().T, 200, 300, [128, 128], None, None, False, None),
                     id="transform-block-transposed"),
        pytest.param(TRANSFORM, (packed, 5, 512, [1, 128], None, None, False, None), id="transform-packed"),
    ]


@pytest.mark.parametrize("op,args", _sample_calls())
def test_opcheck(op, args):
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("op,args", _sample_calls())
def test_fake_tensor_metadata(op, args):
    real = op(*args)
    with FakeTensorMode() as mode:
        fake_args = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        fake = op(*fake_args)
    assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype)


# ---- bad inputs ------------------------------------------------------------------------------------------------

def _bad(op, args, pattern, name):
    return pytest.param(op, args, pattern, id=name)


_SF = torch.rand(8, 4)
_PACKED_INT = deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(_powers_of_two(5, 8))

BAD = [
    _bad(MN_MAJOR, (_SF.bfloat16(),), r"sf: expected dtype float32, got bfloat16", "mn-dtype"),
    _bad(MN_MAJOR, (torch.rand(8),), r"sf: expected a 2-D or 3-D tensor, got shape \(8,\)", "mn-1d"),
    _bad(MN_MAJOR, (torch.rand(1, 2, 8, 4),), r"sf: expected a 2-D or 3-D tensor", "mn-4d"),
    _bad(PACKED, (_SF.int(), None), r"sf: expected dtype float32, got int32", "packed-dtype"),
    _bad(PACKED, (torch.rand(2, 8, 4), torch.tensor([8], dtype=torch.int32)),
         r"sf: expected one batch of scales with psum_layout", "packed-psum-3d"),
    _bad(PACKED, (torch.rand(4, 8).T, torch.tensor([8], dtype=torch.int32)), r"sf: expected a contiguous tensor",
         "packed-psum-noncontiguous"),
    _bad(PACKED, (_SF, torch.tensor([8])), r"psum_layout: expected dtype int32, got int64", "packed-psum-int64"),
    _bad(PACKED, (_SF, torch.zeros(0, dtype=torch.int32)), r"psum_layout: expected at least one group end",
         "packed-psum-empty"),
    _bad(PACKED, (_SF, torch.tensor([[8]], dtype=torch.int32)), r"psum_layout: expected a 1-D tensor",
         "packed-psum-2d"),
    _bad(PACKED, (_SF, torch.tensor([8], dtype=torch.int32, device="meta")),
         r"psum_layout: expected device cpu \(the device of sf\), got meta", "packed-psum-device"),
    _bad(K_GROUPED, (torch.rand(3, 6), torch.tensor([96], dtype=torch.int32), [96], 32, 32, False),
         r"sf: expected MN \(dim 1\) to be a multiple of 4", "kg-mn"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), [96], 64, 32, False),
         r"gran_k: expected one of \(32, 128\), got 64", "kg-gran"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), [96], 32, 48, False),
         r"k_alignment: expected a multiple of 32, got 48", "kg-alignment"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), [96], 32, 0, False),
         r"k_alignment: expected an integer in \[1, 2147483647\], got 0", "kg-alignment-zero"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), [64, 32], 32, 32, False),
         r"ks_cpu: expected 1 group K sizes .* got 2", "kg-ks-len"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), [96], 32, 64, False),
         r"ks_cpu: expected non-negative multiples of k_alignment 64 and gran_k 32, got 96 for group 0",
         "kg-ks-unaligned"),
    _bad(K_GROUPED, (torch.rand(4, 8), torch.tensor([96], dtype=torch.int32), [96], 32, 32, False),
         r"sf: expected sum\(ks_cpu\) / gran_k = 3 scale rows", "kg-ks-sum"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), None, 32, 32, False),
         r"ks_cpu: expected the per-group K sizes", "kg-no-ks"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), [], 32, 32, False),
         r"ks_cpu: expected the per-group K sizes", "kg-empty-ks"),
    _bad(K_GROUPED, (torch.rand(8, 3).T, torch.tensor([96], dtype=torch.int32), [96], 32, 32, False),
         r"sf: expected a contiguous tensor", "kg-noncontiguous"),
    _bad(K_GROUPED, (torch.rand(3, 8), torch.tensor([96]), [96], 32, 32, False),
         r"grouped_layout: expected dtype int32, got int64", "kg-layout-dtype"),
    _bad(K_GROUPED, (torch.rand(0, 8), torch.zeros(0, dtype=torch.int32), None, 32, 32, True),
         r"grouped_layout: expected 1 to 128 groups, got 0", "kg-no-groups"),
    _bad(K_GROUPED, (torch.rand(0, 8), torch.zeros(129, dtype=torch.int32), None, 32, 32, True),
         r"grouped_layout: expected 1 to 128 groups, got 129", "kg-too-many-groups"),
    _bad(TRANSFORM, (_SF, 8, 512, [1, 128, 128], None, None, False, None),
         r"is_sfa: expected True \(SFA\) or False \(SFB\) with a 3-element recipe", "tr-no-is-sfa"),
    _bad(TRANSFORM, (_SF, 8, 512, [1, 128], None, True, False, None),
         r"is_sfa: expected None with a 2-element recipe", "tr-extra-is-sfa"),
    _bad(TRANSFORM, (_SF, 8, 512, [1, 1, 1, 128], None, None, False, None),
         r"recipe: expected \(gran_m_a, gran_n_b, gran_k\) or \(gran_mn, gran_k\), got \(1, 1, 1, 128\)",
         "tr-recipe-len"),
    _bad(TRANSFORM, (_SF, 8, 512, [0, 128], None, None, False, None),
         r"recipe \(gran_mn\): expected an integer in \[1, 2147483647\], got 0", "tr-recipe-zero"),
    _bad(TRANSFORM, (_SF, 8, 640, [1, 128], None, None, False, None),
         r"sf: expected the last two dims to be \(8, 5\) = \(ceil\(8 / 1\), ceil\(640 / 128\)\), got shape \(8, 4\)",
         "tr-shape"),
    _bad(TRANSFORM, (_SF, 8, 512, [1, 128], 1, None, False, None), r"sf: expected a 3-D tensor", "tr-groups-dim"),
    _bad(TRANSFORM, (_SF[None].expand(2, 8, 4), 8, 512, [1, 128], 3, None, False, None),
         r"sf: expected 3 groups \(num_groups\) in dim 0, got shape \(2, 8, 4\)", "tr-groups"),
    _bad(TRANSFORM, (_SF, -8, 512, [1, 128], None, None, False, None),
         r"mn: expected an integer in \[0, 2147483647\], got -8", "tr-mn-negative"),
    _bad(TRANSFORM, (_SF, 8, 2**31, [1, 128], None, None, False, None),
         r"k: expected an integer in \[0, 2147483647\], got 2147483648", "tr-k-huge"),
    _bad(TRANSFORM, (_SF.half(), 8, 512, [1, 128], None, None, False, None),
         r"sf: expected dtype float32 or int32, got float16", "tr-dtype"),
    _bad(TRANSFORM, (torch.rand(1, 16), 8, 512, [1, 32, 32], None, False, False, None),
         r"sf: Unknown SF transformation for float32 scales with granularity \(gran_mn 32, gran_k 32\)",
         "tr-unknown-fp32"),
    _bad(TRANSFORM, (torch.rand(1, 4), 128, 512, [128, 128], None, None, False, torch.tensor([1])),
         r"psum_layout: expected dtype int32, got int64", "tr-psum-dtype"),
    _bad(TRANSFORM, (torch.zeros(1, 1, dtype=torch.int32), 128, 512, [128, 128], None, None, False, None),
         r"sf: Unknown SF transformation for int32 scales with granularity \(gran_mn 128, gran_k 128\)",
         "tr-unknown-int"),
    _bad(TRANSFORM, (torch.rand(3, 10)[:, :5], 300, 640, [128, 128], None, None, False, None),
         r"sf: expected \(128, 128\) block scales to be contiguous or contiguous after transposing",
         "tr-block-strided"),
    _bad(TRANSFORM, (_PACKED_INT.contiguous(), 5, 1024, [1, 128], None, None, False, None),
         r"sf: expected MN-major packed scales \(stride\(-2\) == 1\)", "tr-packed-k-major"),
    _bad(TRANSFORM, (torch.zeros(2, 6, dtype=torch.int32).T[:5, :], 5, 1024, [1, 128], None, None, False, None),
         r"sf: expected a column stride >= align\(MN, 4\) = 8 and a multiple of 4", "tr-packed-stride"),
]


@pytest.mark.parametrize("op,args,pattern", BAD)
def test_bad_inputs(op, args, pattern):
    before = [a.clone() for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    with pytest.raises(DeepGEMMError, match=pattern):
        op(*args)
    after = [a for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    for old, new in zip(before, after):
        assert_bitwise_equal(new, old, "inputs must be untouched")


def test_bad_inputs_through_api():
    with pytest.raises(DeepGEMMError, match=r"is_sfa: expected True"):
        deep_gemm.transform_sf_into_required_layout(_SF, 8, 512, (1, 128, 128))
    with pytest.raises(DeepGEMMError, match=r"ks_cpu: expected the per-group K sizes"):
        deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
            torch.rand(3, 8), torch.tensor([96], dtype=torch.int32), None, 32, 32)
    with pytest.raises(TypeError):
        deep_gemm.get_mn_major_tma_aligned_tensor(sf=_SF)  # positional-only, like DeepGEMM's binding
