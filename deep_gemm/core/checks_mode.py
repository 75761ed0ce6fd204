"""The checked mode: data-dependent contracts validated before a CUDA launch (a debugging aid, off by default).

Every op's check reads metadata only, so it is memoised and costs nothing on repeated calls. Some contracts depend
on the *values* of index tensors (expert ids, psum ends, ``masked_m``, the K-grouped sizes, block-table page ids,
context lengths, attention windows). The CPU kernels always check them (the data is on the host); on CUDA a check
costs reductions on the device and one host sync per call, so it runs only in the checked mode:

    deep_gemm.set_checks("data")   # or DG_CHECKS=data in the environment (read at import)
    deep_gemm.set_checks("off")    # the default
    deep_gemm.get_checks()         # -> "off" | "data"

How the default path stays free: an op with data contracts carries its data check in ``OpKernels.data_check``
(``registry.set_data_check``); turning the mode on shadows that op's ``OpKernels.run_cuda`` by an instance
attribute that runs the data check first, turning it off deletes the shadow. The dispatcher's CUDA kernel and the
eager path both call ``kernels.run_cuda``, so with the mode off not one instruction is added to either.

A data check syncs with the host, which a CUDA-graph capture forbids: ``set_checks("data")`` during a capture,
and a checked call during a capture, raise ``DeepGEMMError`` instead.
"""

from __future__ import annotations

import os


from . import registry
from .errors import DeepGEMMError

__all__ = ["set_checks", "get_checks"]

MODES = ("off", "data")


def set_checks(mode: str, /) -> None:
    """``"data"``: validate data-dependent contracts (index tensors' values) on CUDA before each launch of the ops
    that have them (torch reductions plus one host sync per call; not allowed inside a CUDA-graph capture).
    ``"off"`` (the default): CUDA calls trust their index tensors, as DeepGEMM does. The CPU kernels always check."""
    if mode not in MODES:
        raise DeepGEMMError(f"mode: expected one of {MODES}, got {mode!r}")
    if mode == "data":
        registry.refuse_in_capture("set_checks")
    registry.set_data_checks_enabled(mode == "data")


def get_checks() -> str:
    """The checked mode: ``"data"`` or ``"off"``."""
    return "data" if registry.data_checks_enabled() else "off"


def _from_environment() -> None:
    value = os.environ.get("DG_CHECKS", "").strip().lower()
    if value in ("", "0", "off"):
        return
    if value not in MODES:
        raise DeepGEMMError(f"DG_CHECKS: expected one of {MODES}, got {value!r}")
    registry.set_data_checks_enabled(value == "data")


_from_environment()
