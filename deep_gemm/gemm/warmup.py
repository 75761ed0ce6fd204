"""Compile kernels ahead of time, so a server pays no first-call compilation on its hot path.

    deep_gemm.warmup([("fp8_gemm_nt", dict(m=m, n=2112, k=7168)) for m in (1, 2, 4, 8, 16, 32, 64, 128)])
    deep_gemm.warmup([("m_grouped_fp8_gemm_nt_masked", dict(num_groups=32, max_m=256, n=7168, k=3072,
                                                            expected_m=64))])

Each entry names an op and the sizes it will see; ``warmup`` runs the op once on zero-filled inputs of those sizes
(on ``device``, default the current CUDA device), which resolves the config (autotuning it when enabled) and
compiles the kernel into the process cache. Returns how many kernels were compiled. On CPU it is a no-op (0).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import torch

from ..core.errors import fail
from ..core.runtime import KERNEL_CACHE
from ..utils.math import ceil_div

__all__ = ["warmup"]

_FP8 = torch.float8_e4m3fn
# Per-block B scales by default (the 1D2D recipe); DeepGEMM's contiguous-layout alignment for M-grouped rows.
_SF_BLOCK = 128


def _zeros(shape, dtype, device):
    return torch.zeros(shape, dtype=dtype, device=device)


def _ones(shape, device):
    return torch.ones(shape, dtype=torch.float32, device=device)


def _dense(device, m, n, k, out_dtype=torch.bfloat16, recipe=None):
    import deep_gemm
    per_row_b = recipe is not None and tuple(recipe)[1] == 1
    a = (_zeros((m, k), _FP8, device), _ones((m, ceil_div(k, _SF_BLOCK)), device))
    b = (_zeros((n, k), _FP8, device),
         _ones((n if per_row_b else ceil_div(n, _SF_BLOCK), ceil_div(k, _SF_BLOCK)), device))
    d = _zeros((m, n), out_dtype, device)
    deep_gemm.fp8_gemm_nt(a, b, d, c=d if out_dtype == torch.float32 else None, recipe=recipe)


def _masked(device, num_groups, max_m, n, k, expected_m):
    import deep_gemm
    a = (_zeros((num_groups, max_m, k), _FP8, device), _ones((num_groups, max_m, ceil_div(k, _SF_BLOCK)), device))
    b = (_zeros((num_groups, n, k), _FP8, device),
         _ones((num_groups, ceil_div(n, _SF_BLOCK), ceil_div(k, _SF_BLOCK)), device))
    d = _zeros((num_groups, max_m, n), torch.bfloat16, device)
    masked_m = torch.full((num_groups,), min(expected_m, max_m), dtype=torch.int32, device=device)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m)


def _contiguous(device, m, n, k, num_groups, use_psum_layout=False):
    import deep_gemm
    a = (_zeros((m, k), _FP8, device), _ones((m, ceil_div(k, _SF_BLOCK)), device))
    b = (_zeros((num_groups, n, k), _FP8, device),
         _ones((num_groups, ceil_div(n, _SF_BLOCK), ceil_div(k, _SF_BLOCK)), device))
    d = _zeros((m, n), torch.bfloat16, device)
    if use_psum_layout:
        layout = torch.full((num_groups,), m, dtype=torch.int32, device=device)
    else:
        layout = torch.zeros(m, dtype=torch.int32, device=device)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout, use_psum_layout=use_psum_layout)


def _k_grouped(device, ks, m, n, layout="nt"):
    import deep_gemm
    sum_k = sum(ks)
    if layout == "nt":
        a = (_zeros((sum_k * m,), _FP8, device), _ones((m, sum_k // _SF_BLOCK), device))
        b = (_zeros((sum_k * n,), _FP8, device), _ones((n, sum_k // _SF_BLOCK), device))
    else:
        a = (_zeros((sum_k, m), _FP8, device), _ones((sum_k // _SF_BLOCK, m), device))
        b = (_zeros((sum_k, n), _FP8, device), _ones((sum_k // _SF_BLOCK, n), device))
    d = _zeros((len(ks), m, n), torch.float32, device)
    fn = getattr(deep_gemm, f"k_grouped_fp8_gemm_{layout}_contiguous")
    fn(a, b, d, list(ks), torch.tensor(list(ks), dtype=torch.int32, device=device), c=d)


_BUILDERS = {
    "fp8_gemm_nt": _dense,
    "m_grouped_fp8_gemm_nt_masked": _masked,
    "m_grouped_fp8_gemm_nt_contiguous": _contiguous,
    "k_grouped_fp8_gemm_nt_contiguous": lambda device, **kw: _k_grouped(device, layout="nt", **kw),
    "k_grouped_fp8_gemm_tn_contiguous": lambda device, **kw: _k_grouped(device, layout="tn", **kw),
}


def warmup(calls: Sequence[tuple], device: Optional[Union[str, torch.device]] = None) -> int:
    """Compile the kernels the given calls will need. ``calls``: ``(op_name, sizes)`` pairs; op names and sizes:

    * ``"fp8_gemm_nt"``: ``m, n, k`` (+ ``out_dtype``, ``recipe``; FP32 out implies ``c = d``)
    * ``"m_grouped_fp8_gemm_nt_masked"``: ``num_groups, max_m, n, k, expected_m``
    * ``"m_grouped_fp8_gemm_nt_contiguous"``: ``m, n, k, num_groups`` (+ ``use_psum_layout``)
    * ``"k_grouped_fp8_gemm_{nt,tn}_contiguous"``: ``ks, m, n``

    Returns the number of kernels compiled (0 on a machine without CUDA, where nothing is compiled).
    """
    calls = list(calls)
    for name, sizes in calls:
        if name not in _BUILDERS:
            fail(f"calls: unknown op {name!r}; warmup knows {sorted(_BUILDERS)}")
        if not isinstance(sizes, Mapping):
            fail(f"calls: expected (op_name, dict of sizes) pairs, got {type(sizes).__name__} for {name!r}")
    if device is None and not torch.cuda.is_available():
        return 0
    device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if device.type != "cuda":
        return 0
    before = len(KERNEL_CACHE)
    for name, sizes in calls:
        _BUILDERS[name](device, **dict(sizes))
    torch.cuda.synchronize(device)
    return len(KERNEL_CACHE) - before
