"""deep_gemm: DeepGEMM's kernels in Triton, every op a torch.ops.deep_gemm dispatcher op."""

from ._ops.library import backends, define_all

define_all()

from . import runtime  # noqa: E402,F401  (registers the runtime knob ops)
from . import gemm  # noqa: E402,F401
from .gemm.fp8_api import *  # noqa: E402,F401,F403
