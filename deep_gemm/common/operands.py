"""Operand pieces shared by the op families: ``(data, scale)`` pairs of the public API (``unpack_pair``), scaling
recipes, quantised-operand checks, layout views, dequantisation.

A quantised operand is ``(data, sf)``:

* data: ``float8_e4m3fn`` [..., MN, K], or FP4 E2M1 packed in ``int8`` [..., MN, K/2] (K-major only);
* sf:   FP32 [..., ceil(MN/gran_mn), ceil(K/gran_k)] with any strides (K-major or MN-major, TMA-padded or not), or
        packed UE8M0 ``int32`` [..., MN, ceil(ceil(K/gran_k)/4)] (per-row scales only).

Real value = data * sf[mn // gran_mn, k // gran_k]. Everything here reads metadata only (shapes, strides, dtypes),
so checks run unchanged on real, fake and meta tensors; ``dequantize`` is the reference maths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from ..core.errors import fail, require_dtype
from ..utils.math import TMA_ALIGNMENT_BYTES, ceil_div
from ..utils.quant import fp4_e2m1_to_float, unpack_ue8m0_from_int

FP8 = torch.float8_e4m3fn
FP4_PACKED = torch.int8  # two E2M1 values per byte
QUANT_DTYPES = (FP8, FP4_PACKED)
SF_DTYPES = (torch.float32, torch.int32)
OUT_DTYPES = (torch.bfloat16, torch.float32)
# Scale granularities a recipe may use: per row (1) or per 128-row block along MN; 128 (FP8) or 32 (FP4-style,
# DeepGEMM's SM100 recipes) along K.
GRAN_MN_CHOICES = (1, 128)
GRAN_K_CHOICES = (32, 128)
# Upstream's default recipe on SM90 (A per token per 128 K, B per 128x128 block): the "1D2D" kernel.
DEFAULT_RECIPE = (1, 128, 128)
# With packed UE8M0 (int32) B scales, DeepGEMM's default is per-row B: the "1D1D" kernel.
DEFAULT_RECIPE_INT_SF = (1, 1, 128)


@dataclass(frozen=True)
class Recipe:
    """Scale granularity of both operands: (gran_mn, gran_k) for A and for B."""

    a: tuple[int, int]
    b: tuple[int, int]

    @property
    def is_1d1d(self) -> bool:
        return self.b[0] == 1


def resolve_recipe(recipe: Sequence[int] | None, recipe_a: Sequence[int] | None, recipe_b: Sequence[int] | None,
                   sfb: torch.Tensor) -> Recipe:
    """DeepGEMM's rules: ``recipe=(gran_m_a, gran_n_b, gran_k)`` or both ``recipe_a``/``recipe_b`` = (gran_mn, gran_k),
    never both forms; by default (1, 128, 128), or (1, 1, 128) when sfb is packed UE8M0."""
    # Hot path (every GEMM call resolves its recipe): known recipes come from a small cache, and messages are only
    # formatted on failure.
    if recipe is None and recipe_a is None and recipe_b is None:
        return _DEFAULT_INT_SF if sfb.dtype == torch.int32 else _DEFAULT
    key = (None if recipe is None else tuple(recipe), None if recipe_a is None else tuple(recipe_a),
           None if recipe_b is None else tuple(recipe_b))
    cached = _RECIPES.get(key)
    if cached is not None:
        return cached
    recipe, recipe_a, recipe_b = key
    if recipe is not None:
        if recipe_a is not None or recipe_b is not None:
            fail("recipe: pass either recipe or recipe_a and recipe_b, not both")
        if len(recipe) != 3:
            fail(f"recipe: expected (gran_m_a, gran_n_b, gran_k), got {recipe}")
        result = Recipe((int(recipe[0]), int(recipe[2])), (int(recipe[1]), int(recipe[2])))
    else:
        if recipe_a is None or recipe_b is None:
            fail("recipe_a/recipe_b: expected both or neither, got only "
                 + ("recipe_a" if recipe_a is not None else "recipe_b"))
        if len(recipe_a) != 2:
            fail(f"recipe_a: expected (gran_mn, gran_k), got {recipe_a}")
        if len(recipe_b) != 2:
            fail(f"recipe_b: expected (gran_mn, gran_k), got {recipe_b}")
        result = Recipe((int(recipe_a[0]), int(recipe_a[1])), (int(recipe_b[0]), int(recipe_b[1])))
    for name, (gran_mn, gran_k) in (("A", result.a), ("B", result.b)):
        if gran_mn not in GRAN_MN_CHOICES:
            fail(f"recipe: {name} scale granularity along MN must be one of {GRAN_MN_CHOICES}, got {gran_mn}")
        if gran_k not in GRAN_K_CHOICES:
            fail(f"recipe: {name} scale granularity along K must be one of {GRAN_K_CHOICES}, got {gran_k}")
    if result.a[0] != 1:
        fail(f"recipe: A scales must be per row (gran_m 1), got gran_m {result.a[0]}")
    _RECIPES[key] = result
    return result


_DEFAULT = Recipe((DEFAULT_RECIPE[0], DEFAULT_RECIPE[2]), (DEFAULT_RECIPE[1], DEFAULT_RECIPE[2]))
_DEFAULT_INT_SF = Recipe((DEFAULT_RECIPE_INT_SF[0], DEFAULT_RECIPE_INT_SF[2]),
                         (DEFAULT_RECIPE_INT_SF[1], DEFAULT_RECIPE_INT_SF[2]))
_RECIPES: dict = {}  # validated explicit recipes (a handful of distinct values per process)


_COMPILED_DIMS = frozenset(["", "m", "n", "k", "mn", "nm", "mk", "km", "nk", "kn", "mnk", "mkn", "nmk", "nkm", "kmn",
                            "knm"])


def check_compiled_dims(compiled_dims: str) -> None:
    if compiled_dims not in _COMPILED_DIMS:
        fail(f"compiled_dims: expected a subset of 'mnk' without repeats, got {compiled_dims!r}")


def logical_k(name: str, data: torch.Tensor) -> int:
    """K of a K-major quantised operand (FP4 packs two values per byte)."""
    require_dtype(name, data, QUANT_DTYPES)
    return data.size(-1) * (2 if data.dtype == FP4_PACKED else 1)


def require_tma_aligned(name: str, t: torch.Tensor) -> None:
    """The non-unit strides and the storage offset of t span whole 16-byte units (what TMA descriptors need)."""
    elem = t.element_size()
    for dim in range(t.dim()):
        stride = t.stride(dim)
        if t.size(dim) > 1 and stride != 1 and (stride * elem) % TMA_ALIGNMENT_BYTES != 0:
            fail(f"{name}: expected strides that are multiples of {TMA_ALIGNMENT_BYTES} bytes "
                 f"({TMA_ALIGNMENT_BYTES // elem} elements), got stride {stride} in dim {dim} "
                 f"(shape {tuple(t.shape)})")
    if (t.storage_offset() * elem) % TMA_ALIGNMENT_BYTES != 0:
        fail(f"{name}: expected a 16-byte aligned start, got a storage offset of {t.storage_offset()} elements")


def check_sf(name: str, sf: torch.Tensor, lead: tuple[int, ...], mn: int, k: int, gran: tuple[int, int],
             operand: str) -> None:
    """Scale tensor of an operand with leading dims ``lead`` (e.g. (G,)), ``mn`` rows and ``k`` columns."""
    require_dtype(name, sf, SF_DTYPES)
    gran_mn, gran_k = gran
    if sf.dtype == torch.float32:
        want = (*lead, ceil_div(mn, gran_mn), ceil_div(k, gran_k))
    else:
        if gran_mn != 1:
            fail(f"{name}: packed UE8M0 (int32) scales need per-row granularity, got gran_mn {gran_mn} for {operand}")
        want = (*lead, mn, ceil_div(ceil_div(k, gran_k), 4))
    if tuple(sf.shape) != want:
        what = (f"FP32 scales of {operand}: ceil({mn}/{gran_mn}) x ceil({k}/{gran_k})" if sf.dtype == torch.float32
                else f"packed UE8M0 scales of {operand}: {mn} x ceil(ceil({k}/{gran_k})/4)")
        fail(f"{name}: expected shape {want} ({what}), got {tuple(sf.shape)}")


def check_out(name: str, d: torch.Tensor, shape: tuple[int, ...], dtypes=OUT_DTYPES) -> None:
    require_dtype(name, d, dtypes)
    if tuple(d.shape) != tuple(shape):
        fail(f"{name}: expected shape {tuple(shape)}, got {tuple(d.shape)}")
    if d.numel() > 0 and d.size(-1) > 1 and d.stride(-1) != 1:
        fail(f"{name}: expected a row-major output (stride(-1) == 1), got strides {d.stride()}")


def check_accumulator(c: torch.Tensor | None, d: torch.Tensor) -> None:
    """C (optional) has D's shape and dtype and is row-major; C may be D itself."""
    if c is None:
        return
    if c.dtype != d.dtype:
        fail(f"c: expected the dtype of d ({d.dtype}), got {c.dtype}")
    if tuple(c.shape) != tuple(d.shape):
        fail(f"c: expected the shape of d {tuple(d.shape)}, got {tuple(c.shape)}")
    if c.numel() > 0 and c.size(-1) > 1 and c.stride(-1) != 1:
        fail(f"c: expected a row-major tensor (stride(-1) == 1), got strides {c.stride()}")


def transpose_last2(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-1, -2)


def to_nt(layout: str, a, sfa, b, sfb):
    """Views that turn an nn/tn/tt call into the NT form (A [.., M, K], B [.., N, K]); scales move with their data."""
    if layout[0] == "t":
        a, sfa = transpose_last2(a), (transpose_last2(sfa) if sfa is not None else None)
    if layout[1] == "n":
        b, sfb = transpose_last2(b), (transpose_last2(sfb) if sfb is not None else None)
    return a, sfa, b, sfb


def _expand(sf: torch.Tensor, mn: int, k: int, gran_mn: int, gran_k: int) -> torch.Tensor:
    """Scale per element [..., mn, k] from a scale per (gran_mn x gran_k) block."""
    if sf.dtype == torch.int32:
        sf = unpack_ue8m0_from_int(sf)  # [..., mn, 4 * ceil(sfk / 4)]
    rows = torch.arange(mn, device=sf.device) // gran_mn
    cols = torch.arange(k, device=sf.device) // gran_k
    return sf.float().index_select(-2, rows).index_select(-1, cols)


def dequantize(data: torch.Tensor, sf: torch.Tensor, gran: tuple[int, int]) -> torch.Tensor:
    """FP32 values of a quantised operand [..., MN, K] (K-major or MN-major data; FP4 must be K-major)."""
    values = fp4_e2m1_to_float(data) if data.dtype == FP4_PACKED else data.float()
    return values * _expand(sf, values.size(-2), values.size(-1), *gran)


def write_without_product(d: torch.Tensor, c: torch.Tensor | None) -> None:
    """An empty contraction (K == 0): d = c, or zeros without C (c may be d). Every family's launcher ends here
    instead of launching a kernel with no K blocks."""
    if c is None:
        d.zero_()
    elif c is not d:
        d.copy_(c)


def written_without_launch(d: torch.Tensor, c, m: int, n: int, k: int) -> bool:
    """Whether a GEMM of M x N outputs over K needs no launch: an empty output, or K = 0 (then D = C, or zeros, is
    written here)."""
    if m == 0 or n == 0:
        return True
    if k == 0:
        write_without_product(d, c)
        return True
    return False


def k_grouped_sizes(d: torch.Tensor, c, ks_cpu) -> list[int] | None:
    """The K sizes of a K-grouped call into d [G, M, N], or None when nothing is left to launch
    (``written_without_launch`` over the sum of the K sizes)."""
    _, m, n = d.shape
    ks = [int(x) for x in ks_cpu]
    return None if written_without_launch(d, c, m, n, sum(ks)) else ks


def check_alpha(alpha) -> None:
    """``alpha`` of the dense GEMMs (D = alpha * A @ B + C, DeepGEMM 0.2.3): None (1) or a finite float."""
    if alpha is None:
        return
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        fail(f"alpha: expected a finite float or None (D = alpha * A @ B + C), got {alpha!r}")


def padded_sf_starts(ks: Sequence[int], sf_k_span: int = 128) -> list[int]:
    """DeepGEMM's padded per-group SF layout of the K-grouped FP8 GEMMs (``scheduler/gemm.cuh``,
    ``kUsePaddedSFLayout``): group g's scales start at row ``sum_{h<g} ceil(align(K_h, A) / sf_k_span)`` of the SF's
    K axis, A = ``get_mk_alignment_for_contiguous_layout()``. Returns the G + 1 starts (the last is the rows the
    layout needs)."""
    from ..core.runtime import peek
    alignment = peek("mk_alignment")
    starts = [0]
    for k in ks:
        starts.append(starts[-1] + ceil_div(ceil_div(int(k), alignment) * alignment, sf_k_span))
    return starts


def compact_k_grouped_sf(sf: torch.Tensor, ks: Sequence[int], k_axis: int, sf_k_span: int = 128) -> torch.Tensor:
    """The compact per-group SF (group g's ``K_g / sf_k_span`` rows after those of the groups before it) of a padded
    one: a view of its prefix when the layouts coincide (A = 128), else a gathered copy."""
    starts = padded_sf_starts(ks, sf_k_span)
    compact = [0]
    for k in ks:
        compact.append(compact[-1] + ceil_div(int(k), sf_k_span))
    if starts[:-1] == compact[:-1]:
        return sf.narrow(k_axis, 0, compact[-1])
    index = torch.cat([torch.arange(s, s + (e - c), dtype=torch.int64)
                       for s, c, e in zip(starts, compact, compact[1:])]).to(sf.device)
    return sf.index_select(k_axis, index)


def alpha_arg(alpha) -> float:
    """A public wrapper's ``alpha`` as the schema's float, checked first (a bool or a string would otherwise fail in
    the dispatcher's argument parsing, without naming the argument)."""
    check_alpha(alpha)
    return float(alpha)


def write_output(d: torch.Tensor, acc: torch.Tensor, c: torch.Tensor | None, alpha: float | None = None) -> None:
    """d = (c + alpha * acc) cast to d's dtype (alpha scales only the product, as DeepGEMM's epilogue does); c is
    read before d is written, so c may be d."""
    if alpha is not None:
        acc = acc * alpha
    if c is not None:
        acc = acc + c.float()
    d.copy_(acc.to(d.dtype))


def run_with_alpha(run, d: torch.Tensor, c: torch.Tensor | None, alpha: float):
    """The CUDA route of ``alpha`` where no operand scale can carry it: ``run(out, c)`` (the launcher, alpha-free)
    writes the product into an FP32 scratch without C, then one pass ``d = C + alpha * scratch`` rounds once to d's
    dtype (one FP32 multiply of the accumulator, as DeepGEMM's epilogue). Slower than the plain call by a scratch of
    d's shape and that pass. Returns what ``run`` returns (NotImplemented passes through, d untouched)."""
    scratch = torch.empty(d.shape, dtype=torch.float32, device=d.device)
    out = run(scratch, None)
    if out is NotImplemented:
        return out
    if c is None:
        torch.mul(scratch, alpha, out=d)
    else:
        torch.add(c, scratch, alpha=alpha, out=d)  # (c may be d: element-wise, each element read before written)
    return out


def scale_with_alpha(sf: torch.Tensor, alpha: float) -> torch.Tensor:
    """``alpha * sf`` in sf's own strides (padded, MN-major TMA layouts included): an FP32 per-block scale carries
    the GEMM's ``alpha``, since ``alpha * (a * sfa) @ (b * sfb).T == (a * (alpha * sfa)) @ (b * sfb).T`` (up to one
    FP32 rounding of each scale product), which costs a pass over the scales instead of over d."""
    scaled = torch.empty_strided(sf.size(), sf.stride(), dtype=sf.dtype, device=sf.device)
    return torch.mul(sf, alpha, out=scaled)


def torch_matmul_into(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, c: torch.Tensor | None,
                      fp32_out: bool = False) -> None:
    """d = a @ b, or c + a @ b (c may be d), through torch's cuBLAS calls: mm / addmm for 2-D operands, bmm /
    baddbmm for 3-D ones. ``fp32_out``: half operands into an FP32 d, through aten's ``dtype_out`` overloads (CUDA
    only; the caller checks they exist); else d has the operands' dtype."""
    batched = d.dim() == 3
    aten = torch.ops.aten
    if fp32_out:
        if c is None:
            (aten.bmm if batched else aten.mm).dtype_out(a, b, torch.float32, out=d)
        else:
            (aten.baddbmm if batched else aten.addmm).dtype_out(c, a, b, torch.float32, out=d)
    elif c is None:
        (torch.bmm if batched else torch.mm)(a, b, out=d)
    elif c is d:
        (d.baddbmm_ if batched else d.addmm_)(a, b)
    else:
        (torch.baddbmm if batched else torch.addmm)(c, a, b, out=d)


def unpack_pair(name: str, pair) -> tuple[torch.Tensor, torch.Tensor]:
    """(data, scale) from any length-2 sequence, as DeepGEMM's bindings accept."""
    if type(pair) is tuple and len(pair) == 2:  # the common form, tested first (host time per call)
        return pair
    if isinstance(pair, torch.Tensor) or not hasattr(pair, "__len__") or len(pair) != 2:
        fail(f"{name}: expected a (data, scale) pair, got {type(pair).__name__}")
    return pair[0], pair[1]
