"""``deep_gemm.utils.math``: DeepGEMM's module of integer helpers and FP8/FP4 casts, under its name.

Clients import from here (``from deep_gemm.utils.math import per_block_cast_to_fp8``); the definitions live in
``numeric.py`` (integers, format constants) and ``quant.py`` (the casts), with DeepGEMM's signatures and defaults.
"""

from .numeric import (  # noqa: F401  (the constants are for the package's own modules; not in __all__)
    AMAX_FLOOR, FP4_E2M1_MAX, FP8_E4M3_MAX, TMA_ALIGNMENT_BYTES, align, ceil_div, get_tma_aligned_size)
from .quant import (  # noqa: F401
    cast_back_from_fp4, ceil_to_ue8m0, pack_ue8m0_to_int, per_block_cast_to_fp8, per_channel_cast_to_fp8,
    per_custom_dims_cast_to_fp8, per_token_cast_to_fp4, per_token_cast_to_fp8, transpose_packed_fp4,
    unpack_ue8m0_from_int)

from .nvfp4 import (  # noqa: F401,E402  (DeepGEMM 0.2.3's additions to utils/math.py)
    cast_back_from_fp8, cast_to_ue4m3, pack_ue4m3_to_int, per_token_cast_to_nvfp4,
    transform_ue4m3_sf_into_required_layout, unpack_ue4m3_from_int)

__all__ = [
    "cast_to_ue4m3", "pack_ue4m3_to_int", "unpack_ue4m3_from_int", "per_token_cast_to_nvfp4",
    "transform_ue4m3_sf_into_required_layout", "cast_back_from_fp8",
    "ceil_div", "align", "ceil_to_ue8m0", "pack_ue8m0_to_int", "unpack_ue8m0_from_int",
    "per_token_cast_to_fp8", "per_channel_cast_to_fp8", "per_block_cast_to_fp8", "per_custom_dims_cast_to_fp8",
    "per_token_cast_to_fp4", "transpose_packed_fp4", "cast_back_from_fp4",
]
