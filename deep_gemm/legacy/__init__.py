"""``deep_gemm.legacy``: DeepGEMM's legacy Triton grouped BF16 GEMMs (``*_tl``), same names and arguments.

Importing this package does not import Triton (the kernels load at the first CUDA call).
"""

from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
