"""Batched symmetric products: ``batched_syrk`` (D = A @ A^T) and ``batched_symm`` (D = A @ B with A symmetric)."""

from . import ops  # noqa: F401  (registers the ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
