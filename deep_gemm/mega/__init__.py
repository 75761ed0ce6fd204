"""Mega MoE: the symmetric buffer contract (sizes, slice layout, ring limits), the weight transform, and the fused
kernel entry points (which raise NotImplementedError until expert-parallel MoE lands)."""

from . import ops  # noqa: F401  (registers the mega ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
