"""Mega MoE: the symmetric buffers (the SM100-style ring buffer and the SM90 FP8 pool buffer), the weight transforms,
the pre-dispatch ops and the fused layer: a torch reference (``reference.py``) on CPU (one process or a gloo group)
and on one CUDA rank, and Triton kernels for the SM90 FP8 layer at one CUDA rank (``kernels.py``)."""

from . import ops  # noqa: F401  (registers the mega ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
