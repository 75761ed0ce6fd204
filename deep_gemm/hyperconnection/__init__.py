"""HyperConnection family: the TF32 pre-norm GEMM with row sums of squares (``tf32_hc_prenorm_gemm``)."""

from . import ops  # noqa: F401  (registers the ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
