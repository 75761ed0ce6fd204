"""Layout family: scale factors into the layouts the GEMM kernels read (MN-major TMA-aligned, packed UE8M0)."""

from . import ops  # noqa: F401  (registers the ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
