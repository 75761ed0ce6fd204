"""DeepGEMM's library-wide deterministic mode: ``use_deterministic_algorithms`` / ``get_deterministic_algorithms``.

DeepGEMM binds both as ``torch.ops.deep_gemm`` ops taking keywords (``enable``); so do we. The flag lives with the
runtime knobs: setting it bumps the knobs' version, so memoised checks and launch plans keyed on that version are
rebuilt after a change.

What the flag means, kernel by kernel:

* Every deep_gemm kernel is run-to-run deterministic: split-K partial tiles are reduced by the last arriving CTA in
  slot order (``gemm/*/kernels``, ``einsum/kernels.py``, ``hyperconnection/kernels.py``), never with floating-point
  atomics. What changes with the shape is the *order* of the K reduction, because the plans pick a split-K factor
  from M, N, K and the SM budget. With the flag on:

  - FP8 / BF16 GEMMs (``gemm/fp8/plan.py`` and ``configs.py``, ``gemm/bf16/plan.py``) plan no split-K: not the
    decode rows' split, the one-wave split tiles, the WS kernel's split tail nor the masked last wave's split (an
    explicit ``Overrides(split_k=...)`` still splits). Dense FP8 calls also keep one kernel and tile at every M,
    the ``tl.*`` kernel's 64 x 128 tile (``configs.DETERMINISTIC_TILE``): on the GPU, a 16-row tile (``mma.sync``)
    and a 64-row one (``wgmma``) gave one row different last bits. The flag travels in the call the plan sees
    (``Fp8Call.deterministic``, ``Bf16Call.deterministic``), so plans cached either way are told apart. Each row
    then reduces K in one order whatever M is (batch invariance, what SGLang's batch-invariant mode asks of it).
  - ``einsum`` ``bmk,bnk->mn`` (``einsum/plan.bmk_plan``): one batch range (no split over ``b``) and the 64-row
    tile at every shape, where the default plan picks both from M, N and the SMs.
  - ``tf32_hc_prenorm_gemm`` (``hyperconnection/plan.plan``): 64-row blocks (one MMA path) and the K sub-splits of
    a one-block call at every M, where the default plan takes 16-row blocks for short M and fewer sub-splits as
    the row blocks fill the SMs. The caller's ``num_splits`` is part of the result and unchanged.
  The other einsum forms and the indexer kernels have no M-dependent reduction to pin.

* DeepGEMM itself additionally avoids cuBLASLt in ``einsum('bhr,hdr->bhd')`` / ``'bhd,hdr->bhr'`` under this mode;
  our einsum never calls a vendor BLAS there, so nothing changes for it.

What the plans fix is the order of the K (and batch) reduction, and for FP8 and HC the MMA instruction (tiles of
16 or 32 rows run ``mma.sync``, 64 rows and more ``wgmma``). BF16's small tiles keep ``mma.sync``: its products are
exact in FP32 and its GPU test found the same bits at every M. The GPU tests
``test_deterministic_mode_is_batch_invariant`` (FP8, BF16, HC, einsum) compare one row's bits across M = 1 to 4096.
What the mode costs per family: ``benchmarks/bench_deterministic.py`` (einsum's one batch range is the dear one:
up to 12x on small outputs with long batches).

The CPU references sum in FP64 in one fixed order and are unaffected.
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

from .registry import register
from .runtime import _STATE

__all__ = ["use_deterministic_algorithms", "get_deterministic_algorithms"]

_ops = torch.ops.deep_gemm
_FLAG = {"enabled": False}


def _set(enable: bool) -> None:
    if not isinstance(enable, bool):
        from .errors import DeepGEMMError
        raise DeepGEMMError(f"enable: expected a bool, got {type(enable).__name__}")
    with _STATE.lock:
        _FLAG["enabled"] = enable
        _STATE.version += 1


def _get() -> bool:
    with _STATE.lock:
        return _FLAG["enabled"]


def deterministic() -> bool:
    """The flag as kernels' plans read it (no dispatcher call)."""
    return _FLAG["enabled"]


def use_deterministic_algorithms(enable: bool) -> None:
    """Ask every deep_gemm kernel for a reduction order independent of the problem's batch size (see the module
    docstring for which kernels that concerns). Process-wide; default off, as DeepGEMM."""
    _ops.use_deterministic_algorithms(enable)


def get_deterministic_algorithms() -> bool:
    """Whether deterministic mode is on."""
    if torch.compiler.is_compiling():
        return _FLAG["enabled"]  # (Dynamo guards on the value read; it cannot enter the lock)
    return _ops.get_deterministic_algorithms()


def _no_check(*_args) -> None:
    return None


def _use_reference(enable):
    _set(enable)


def _get_reference():
    return _get()


_use_reference.__name__ = "use_deterministic_algorithms"
_get_reference.__name__ = "get_deterministic_algorithms"
register("use_deterministic_algorithms", check=_no_check, reference=_use_reference)
register("get_deterministic_algorithms", check=_no_check, reference=_get_reference)
_register_effectful_op(_ops.use_deterministic_algorithms.default, _EffectType.ORDERED)
