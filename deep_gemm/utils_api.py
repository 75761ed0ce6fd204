"""The ``deep_gemm.utils`` names DeepGEMM re-exports at the top level (``from .utils import *``)."""

from .utils import __all__ as _utils_all
from .utils import *  # noqa: F401,F403

__all__ = list(_utils_all)
