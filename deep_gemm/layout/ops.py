"""Registers the scale-factor layout ops: one check, one reference, one fake kernel and one Triton launcher each."""

from __future__ import annotations

from ..core.registry import register, set_data_check
from ..core.plans import replayable_allocating
from . import checks
from . import launch as _LAUNCHERS  # (imports no Triton at import time)
from . import reference as ref


# Launchers that make at most one launch into a fresh output and take ``record=``: replayed per signature.
_REPLAYED = ("get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
             "transform_sf_into_required_layout")


def _triton(name: str):
    if _LAUNCHERS is None:
        return None
    launcher = getattr(_LAUNCHERS, name)
    return replayable_allocating(launcher) if name in _REPLAYED else launcher


def _fake_of(geometry_of):
    """Fake kernel allocating the geometry ``geometry_of(*args)`` computes (the reference allocates the same)."""

    def fake(*args):
        return ref.allocate(geometry_of(*args), args[0].device)  # args[0] is sf in every layout op

    return fake


_OPS = {
    "get_mn_major_tma_aligned_tensor": ref.get_mn_major_tma_aligned_tensor_reference,
    "get_mn_major_tma_aligned_packed_ue8m0_tensor": ref.get_mn_major_tma_aligned_packed_ue8m0_tensor_reference,
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor":
        ref.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_reference,
    "transform_sf_into_required_layout": ref.transform_sf_into_required_layout_reference,
}

for _name, _reference in _OPS.items():
    register(_name, check=getattr(checks, f"check_{_name}"), reference=_reference,
             fake=_fake_of(getattr(checks, f"geometry_{_name}")), triton=_triton(_name))

# Data checks (UE8M0 packing needs powers of two; group sizes as declared): always on the CPU, on CUDA in the
# checked mode (core/checks_mode.py).
for _name in ("get_mn_major_tma_aligned_packed_ue8m0_tensor", "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"):
    set_data_check(_name, getattr(checks, f"check_data_{_name}"))
