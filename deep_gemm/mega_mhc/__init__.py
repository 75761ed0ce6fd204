"""Fused mHC (manifold-constrained hyper-connections) layer step: ``mega_mhc`` (the post-mix of the four residual
routes, the projection to the next mixes with Sinkhorn normalisation, and the RMSNorm of the next layer input with
optional FP8 + UE8M0 outputs). DeepGEMM projects in TF32; the reference in FP64 and the Triton kernels
(``kernels.py``) in FP32."""

from . import ops  # noqa: F401  (registers the op)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
