"""``deep_gemm.utils.layout``: DeepGEMM's module of scale-layout helpers and contiguous-layout alignments.

SGLang and vLLM import from here (``from deep_gemm.utils.layout import get_mn_major_tma_aligned_tensor``). The
functions are the package's own (``deep_gemm.layout``, ``deep_gemm.core.config``): same objects as ``deep_gemm.<name>``.
"""

from ..core.config import (get_k_alignment_for_contiguous_layout, get_m_alignment_for_contiguous_layout,
                      get_mk_alignment_for_contiguous_layout, get_theoretical_mk_alignment_for_contiguous_layout,
                      set_mk_alignment_for_contiguous_layout)
from ..layout.api import (get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor,
                          get_mn_major_tma_aligned_packed_ue8m0_tensor, get_mn_major_tma_aligned_tensor)
from .numeric import get_tma_aligned_size

__all__ = [
    "get_tma_aligned_size", "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
]  # == deep_gemm.utils.LAYOUT_NAMES
