"""Pure-torch helpers: integer maths, FP8/FP4 casts, UE8M0 packing, alignment getters/setters."""

from ..config import (get_k_alignment_for_contiguous_layout, get_m_alignment_for_contiguous_layout,  # noqa: F401
                      get_mk_alignment_for_contiguous_layout, get_theoretical_mk_alignment_for_contiguous_layout,
                      set_mk_alignment_for_contiguous_layout)
from .math import align, ceil_div, get_tma_aligned_size  # noqa: F401
from .quant import (  # noqa: F401
    cast_back_from_fp4, ceil_to_ue8m0, pack_ue8m0_to_int, per_block_cast_to_fp8, per_channel_cast_to_fp8,
    per_custom_dims_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8, transpose_packed_fp4,
    unpack_ue8m0_from_int)

__all__ = [
    "ceil_div", "align", "get_tma_aligned_size",
    "ceil_to_ue8m0", "pack_ue8m0_to_int", "unpack_ue8m0_from_int",
    "per_token_cast_to_fp8", "per_channel_cast_to_fp8", "per_block_cast_to_fp8", "per_custom_dims_cast_to_fp8",
    "per_token_cast_to_fp4", "transpose_packed_fp4", "cast_back_from_fp4",
    "get_mk_alignment_for_contiguous_layout", "set_mk_alignment_for_contiguous_layout",
    "get_m_alignment_for_contiguous_layout", "get_k_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
]
