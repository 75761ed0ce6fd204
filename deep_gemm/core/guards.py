"""Metadata guards: one C call that tells whether a call's tensors have the exact metadata of an earlier call's.

The eager path (``eager.eager_op``) keys its memoised check and launch plans on a signature tuple built from each
tensor's shape, strides, dtype, device and alignment. Building and hashing that tuple is most of a replayed call's
host time (2.7 us to build and 0.5 us to look up HC's four-tensor signature, of a 6.9 us public call), nearly all of it
Python attribute reads (~0.08-0.15 us each, seven per tensor). An op called again with tensors of the same metadata (the
common case: the next layer, the next step) can instead ask one guard, built at the earlier call, whether its tensors
match: torch's own ``TensorGuards`` (what ``torch.compile``'s compiled frames check their inputs with) compares Python
type, dispatch keys (device type, autograd and inference state), dtype, device index, requires_grad, sizes and strides
in C++ (~0.4 us for four tensors, ~0.1 us when the first differs).

It is stricter than the signature (Python type, dispatch keys, requires_grad), never looser: storage-offset
alignment and the non-tensor arguments are compared by the caller. A stricter guard only costs a miss (the signature
path runs), so nothing depends on the two agreeing beyond "guard passes => same signature".

``TensorGuards`` is a private torch API (``torch._C._dynamo.guards``): it is probed once with a self-test, and the
eager path builds signatures as before when it is missing or misbehaves (or with ``DG_NO_SIGNATURE_GUARDS=1``).
"""

from __future__ import annotations

import os
import threading

import torch

from .._internals.torch_api import tensor_guards_class

_TensorGuards = tensor_guards_class()

# How many guarded signatures an op keeps, most recent first. A hit at depth i costs i failed guards (~0.1 us each)
# before it; a call matching none pays all of them on top of the signature path. Eight covers the distinct GEMM
# shapes of one transformer layer (projections, experts) cycling step after step.
RECENT_LIMIT = 8

_ENABLED = os.environ.get("DG_NO_SIGNATURE_GUARDS", "0") in ("", "0")
_verdict: list = []  # [bool] once the self-test has run
_lock = threading.Lock()


def _self_test() -> bool:
    """Whether ``TensorGuards`` behaves as this module relies on: exact types, sizes, strides, dtypes and
    requires_grad are checked, for tensors of any metadata (the API has changed keyword arguments before)."""
    try:
        a, b = torch.empty(4, 8), torch.empty(2, 3, dtype=torch.bfloat16)
        guard = _TensorGuards(a, b, dynamic_dims_sizes=None, dynamic_dims_strides=None)
        same = guard.check(torch.empty(4, 8), torch.empty(2, 3, dtype=torch.bfloat16))
        others = [(torch.empty(4, 9), b), (torch.empty(8, 4).T, b), (a.double(), b), (torch.nn.Parameter(a), b),
                  (torch.empty(4, 8, requires_grad=True), b), (a, torch.empty(3, 2, dtype=torch.bfloat16)),
                  (None, b), ([a], b)]
        return same is True and not any(guard.check(x, y) for x, y in others)
    except Exception:  # noqa: BLE001 - any surprise disables the guards
        return False


def available() -> bool:
    """Whether the eager path may use guards (imported, self-tested, not turned off)."""
    if not _verdict:
        with _lock:
            if not _verdict:
                _verdict.append(_ENABLED and _TensorGuards is not None and _self_test())
    return _verdict[0]


def tensor_guard(tensors: tuple):
    """A guard whose ``check(*others)`` is True exactly when ``others`` match ``tensors`` one by one in Python type,
    dispatch keys, dtype, device index, requires_grad, sizes and strides (static: no dimension is left free)."""
    return _TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)
