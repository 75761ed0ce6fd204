"""deep_gemm: DeepGEMM's kernels in Triton, every op a torch.ops.deep_gemm dispatcher op."""

from ._ops.library import backends, define_all

define_all()

from . import runtime  # noqa: E402,F401  (registers the runtime knob ops)
from . import gemm, einsum, attention, hyperconnection, layout, mega  # noqa: E402,F401  (register their ops)
from .gemm.fp8_api import *  # noqa: E402,F401,F403
from .einsum import *  # noqa: E402,F401,F403
from .attention import *  # noqa: E402,F401,F403
from .hyperconnection import *  # noqa: E402,F401,F403
from .layout import *  # noqa: E402,F401,F403
from .mega import *  # noqa: E402,F401,F403
