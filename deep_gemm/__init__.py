"""deep_gemm: DeepGEMM's FP8/BF16 GEMM, MoE, indexer, HyperConnection and layout kernels for Hopper in Triton.

Every operator is a ``torch.ops.deep_gemm`` dispatcher op with a CPU reference kernel, a fake kernel and a CUDA
kernel (Triton, or the torch reference until a Triton kernel covers it: see ``deep_gemm.backends()``). The names
below keep DeepGEMM's Python API call for call. Importing this package never initialises CUDA or imports Triton.
"""

from .core.errors import DeepGEMMError
from .core.registry import backends, define_all

define_all()

# Every family registers its ops when imported.
from .core import arch  # noqa: E402,F401  (deep_gemm.arch: the architecture gate, forced_capability)
from .core import runtime, runtime_ops  # noqa: E402,F401  (runtime knob ops)
from . import gemm, einsum, attention, hyperconnection, layout, mega  # noqa: E402,F401
from . import testing, utils  # noqa: E402
from . import _public  # noqa: E402

from ._public import *  # noqa: E402,F401,F403
from . import _compat  # noqa: E402

# `m_indices=` on the M-grouped GEMMs and DeepGEMM 1.x names (`deep_gemm/_compat.py`).
_V1_NAMES = _compat.install(globals())

from . import _C  # noqa: E402,F401  (the legacy `deep_gemm._C` surface, a pure-Python shim)
from . import legacy  # noqa: E402,F401  (DeepGEMM's legacy Triton kernels; Triton is imported on first launch)

__version__ = "0.1.0"
__all__ = ["backends", "DeepGEMMError", "testing", "utils", "legacy", "__version__"] + list(_public.__all__) + _V1_NAMES
