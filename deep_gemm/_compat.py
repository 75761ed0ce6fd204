"""Call forms of older DeepGEMM releases that engines still use, on top of the current API.

* ``cu_seq_len_k_start=`` / ``cu_seq_len_k_end=`` on ``fp8_mqa_logits`` and ``ks_cpu=`` on the K-grouped GEMMs:
  our earlier names of what DeepGEMM 0.2.3 calls ``ks`` / ``ke`` and ``ks``.
* ``m_indices=``: the keyword DeepGEMM 2.0 gave the M-grouped contiguous GEMMs' expert-index tensor, since renamed
  ``grouped_layout`` (SGLang's MoE warm-up still passes ``m_indices=``). The public functions accept both spellings;
  their signatures (and stubs, and the dispatcher schemas) show the current one.
* DeepGEMM 1.x names that vLLM and SGLang still resolve when the current one is missing:
  ``gemm_fp8_fp8_bf16_nt``, ``m_grouped_gemm_fp8_fp8_bf16_nt_contiguous``, ``m_grouped_gemm_fp8_fp8_bf16_nt_masked``
  and ``get_col_major_tma_aligned_tensor``. Their 1.x scale layouts (FP32, per-token A, per-block B) are the current
  defaults, so each is the current function under the old parameter names.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Callable, Tuple

import torch

from .core.errors import fail

Pair = Tuple[torch.Tensor, torch.Tensor]

# (function name, old keyword, current keyword)
RENAMED_KEYWORDS = (
    ("m_grouped_fp8_gemm_nt_contiguous", "m_indices", "grouped_layout"),
    ("m_grouped_fp8_gemm_nn_contiguous", "m_indices", "grouped_layout"),
    ("m_grouped_bf16_gemm_nt_contiguous", "m_indices", "grouped_layout"),
    ("m_grouped_bf16_gemm_nn_contiguous", "m_indices", "grouped_layout"),
    # DeepGEMM 0.2.3 names the legacy MQA-logits bounds ks / ke, and the K-grouped GEMMs' host group sizes ks
    ("fp8_mqa_logits", "cu_seq_len_k_start", "ks"),
    ("fp8_mqa_logits", "cu_seq_len_k_end", "ke"),
    ("k_grouped_fp8_gemm_nt_contiguous", "ks_cpu", "ks"),
    ("k_grouped_fp8_gemm_tn_contiguous", "ks_cpu", "ks"),
    ("k_grouped_bf16_gemm_tn_contiguous", "ks_cpu", "ks"),
)

V1_NAMES = ("gemm_fp8_fp8_bf16_nt", "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous",
            "m_grouped_gemm_fp8_fp8_bf16_nt_masked", "get_col_major_tma_aligned_tensor")


def accept_renamed_keyword(fn: Callable, old: str, new: str) -> Callable:
    """``fn`` that also takes its parameter ``new`` under the keyword ``old``.

    Passing both (by keyword, or ``new`` positionally and ``old`` by keyword) is ambiguous and raises
    ``DeepGEMMError`` saying which to keep. Calls without ``old`` go straight through (one dict lookup)."""
    params = list(inspect.signature(fn).parameters)
    if new not in params or old in params:  # the family changed its signature: nothing to rename (tests notice)
        return fn
    position = params.index(new)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if old in kwargs:
            value = kwargs.pop(old)
            if new in kwargs or len(args) > position:
                fail(f"{old}: the former name of {new}; pass {new} only (both were given to {fn.__name__})")
            kwargs[new] = value
        return fn(*args, **kwargs)

    wrapper.__doc__ = (fn.__doc__ or "") + f"\n    ``{old}=`` is accepted as the former name of ``{new}``.\n"
    return wrapper


def _package():
    return sys.modules[__package__]


def _require_tensors(**tensors) -> None:
    # Named by the 1.x parameter names (the current function would name `a`, `d`, `grouped_layout`).
    for name, value in tensors.items():
        if isinstance(value, tuple):  # an operand pair
            if len(value) != 2 or not all(isinstance(t, torch.Tensor) for t in value):
                fail(f"{name}: expected a (data, scale) pair of tensors")
        elif not isinstance(value, torch.Tensor):
            fail(f"{name}: expected a tensor, got {type(value).__name__}")


def _pair(value) -> tuple:
    """Any length-2 sequence (DeepGEMM's bindings accept lists too) as a tuple; anything else fails the check."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def gemm_fp8_fp8_bf16_nt(lhs: Pair, rhs: Pair, out: torch.Tensor) -> None:
    """DeepGEMM 1.x name of ``fp8_gemm_nt(lhs, rhs, out)`` (A scales 1x128, B scales 128x128, BF16 out)."""
    _require_tensors(lhs=_pair(lhs), rhs=_pair(rhs), out=out)
    _package().fp8_gemm_nt(lhs, rhs, out)


def m_grouped_gemm_fp8_fp8_bf16_nt_contiguous(lhs: Pair, rhs: Pair, out: torch.Tensor,
                                              m_indices: torch.Tensor) -> None:
    """DeepGEMM 1.x name of ``m_grouped_fp8_gemm_nt_contiguous(lhs, rhs, out, m_indices)``."""
    _require_tensors(lhs=_pair(lhs), rhs=_pair(rhs), out=out, m_indices=m_indices)
    _package().m_grouped_fp8_gemm_nt_contiguous(lhs, rhs, out, m_indices)


def m_grouped_gemm_fp8_fp8_bf16_nt_masked(lhs: Pair, rhs: Pair, out: torch.Tensor, masked_m: torch.Tensor,
                                          expected_m: int) -> None:
    """DeepGEMM 1.x name of ``m_grouped_fp8_gemm_nt_masked(lhs, rhs, out, masked_m, expected_m)``."""
    _require_tensors(lhs=_pair(lhs), rhs=_pair(rhs), out=out, masked_m=masked_m)
    _package().m_grouped_fp8_gemm_nt_masked(lhs, rhs, out, masked_m, expected_m)


def get_col_major_tma_aligned_tensor(x: torch.Tensor) -> torch.Tensor:
    """DeepGEMM 1.x name of ``get_mn_major_tma_aligned_tensor(x)`` (a fresh MN-major, TMA-aligned copy)."""
    _require_tensors(x=x)
    return _package().get_mn_major_tma_aligned_tensor(x)


def install(namespace: dict) -> list:
    """Wrap the renamed-keyword functions in ``namespace`` (a package's globals) and add the 1.x names. Aliases
    that are the same object as a wrapped function (``m_grouped_fp8_fp4_gemm_nt_contiguous``) get the same wrapper.
    Returns the names added."""
    for name, old, new in RENAMED_KEYWORDS:
        original = namespace[name]
        wrapped = accept_renamed_keyword(original, old, new)
        for alias, value in list(namespace.items()):
            if value is original:
                namespace[alias] = wrapped
    namespace.update({name: globals()[name] for name in V1_NAMES})
    return list(V1_NAMES)
