"""einsum family: DeepGEMM's hard-coded BF16 and FP8 einsum expressions as batched GEMMs."""

from . import ops  # noqa: F401  (registers the einsum ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
