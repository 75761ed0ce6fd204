"""``deep_gemm.utils``, laid out as DeepGEMM's: ``math`` (integer helpers, FP8/FP4 casts), ``layout`` (scale-layout
helpers, contiguous-layout alignments) and ``dist`` (torch.distributed helpers), with the names of ``math`` and
``layout`` and dist's ``init_dist`` / ``uneven_all_gather`` importable from ``deep_gemm.utils`` itself.

``quant`` and ``numeric`` hold the definitions ``math`` re-exports. ``layout`` is loaded on first use: its functions
are the op families' own, and the families import ``deep_gemm.utils`` while they load.
"""

from . import dist, math  # noqa: F401
from .dist import init_dist, uneven_all_gather  # noqa: F401
from .math import *  # noqa: F401,F403

# deep_gemm.utils.layout.__all__ (a test keeps the two equal).
LAYOUT_NAMES = (
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
)

__all__ = sorted(set(math.__all__) | set(LAYOUT_NAMES) | {"init_dist", "uneven_all_gather"})


def __getattr__(name: str):
    # PEP 562: `deep_gemm.utils.layout` and its names resolve on first access (star-imports included).
    if name == "layout" or name in LAYOUT_NAMES:
        import importlib
        layout = importlib.import_module(f"{__name__}.layout")  # `from . import` would ask __getattr__ again
        value = layout if name == "layout" else getattr(layout, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(LAYOUT_NAMES) | {"layout"})
