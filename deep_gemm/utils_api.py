"""The ``deep_gemm.utils`` names DeepGEMM re-exports at the top level (``from .utils import *``)."""

from .utils import __all__ as _utils_all
from .utils import *  # noqa: F401,F403

# The torch.distributed helpers are attributes of deep_gemm (as in DeepGEMM) but not in its __all__: they set up
# process groups, which the stub tests cannot call on a single CPU process.
__all__ = [name for name in _utils_all if name not in ("init_dist", "uneven_all_gather")]
