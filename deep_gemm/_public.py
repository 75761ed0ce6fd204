"""Assembles the public surface from the family API modules (each declares its own ``__all__``)."""

from __future__ import annotations

import importlib

# (module, why it is public). Families that a later stage adds are picked up here and nowhere else.
_API_MODULES = (
    "deep_gemm.core.config",       # runtime knobs, alignment getters, get_jit
    "deep_gemm.core.checks_mode",  # set_checks / get_checks: data-contract checks on CUDA (debugging aid)
    "deep_gemm.gemm.fp8.api",      # FP8 dense / M-grouped / K-grouped GEMMs
    "deep_gemm.gemm.bf16.api",     # BF16 and cuBLASLt GEMMs
    "deep_gemm.gemm.warmup",       # ahead-of-time kernel compilation
    "deep_gemm.gemm.fp8.autotune_api",  # opt-in FP8 config autotuning
    "deep_gemm.einsum",            # einsum, fp8_einsum
    "deep_gemm.attention",         # MQA logits (indexer)
    "deep_gemm.hyperconnection",   # tf32_hc_prenorm_gemm
    "deep_gemm.layout",            # scale-factor layout helpers
    "deep_gemm.mega",              # Mega MoE buffer contract
    "deep_gemm.utils",             # utils names DeepGEMM re-exports at top level (``from .utils import *``)
    "deep_gemm.core.determinism",  # use_deterministic_algorithms / get_deterministic_algorithms
    "deep_gemm.gemm.symmetric",    # batched_syrk, batched_symm
    "deep_gemm.testing_api",       # bench_kineto, calc_diff (DeepGEMM 1.x imported them from the top level)
    "deep_gemm.gemm.fp4",          # fp4_* aliases, K-grouped FP4 and NVFP4 GEMMs
    "deep_gemm.attention.sparse",  # block-sparse MQA logits (DeepSeek V4 indexer)
    "deep_gemm.mega_gate",         # bf16_mega_gate, get_bf16_mega_gate_config
    "deep_gemm.mega_mhc",          # mega_mhc
    "deep_gemm.attention.metadata",  # get_mqa_logits_metadata
)

__all__: list[str] = []
for _name in _API_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as error:  # a family module not written yet
        if error.name != _name:
            raise
        continue
    for _symbol in getattr(_module, "__all__", ()):
        globals()[_symbol] = getattr(_module, _symbol)
        if _symbol not in __all__:
            __all__.append(_symbol)
