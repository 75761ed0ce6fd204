"""Fused MoE gate (``bf16_mega_gate``: BF16 gate GEMM + scoring + top-k + EP mapping) and its launch configuration
(``get_bf16_mega_gate_config``)."""

from . import ops  # noqa: F401  (registers the ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
