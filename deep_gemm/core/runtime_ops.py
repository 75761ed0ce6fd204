"""Registers the runtime knobs and the kernel-cache handle (``deep_gemm/runtime.py``) as dispatcher ops.

Kept apart from ``runtime.py`` so that the dispatcher plumbing (``core/registry.py``, which reads the knobs' version
for its memoised checks) and the knobs import in one direction only.
"""

from __future__ import annotations

import torch
from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

from .registry import register
from .runtime import (get_jit, get_mk_alignment_for_contiguous_layout, get_num_sms, get_pdl,
                      get_theoretical_mk_alignment_for_contiguous_layout, get_tc_util, jit_cache_dir,
                      jit_clear_cache, jit_num_compiled_kernels, set_block_size_multiple_of,
                      set_ignore_compile_dims, set_mk_alignment_for_contiguous_layout, set_num_sms, set_pdl,
                      set_tc_util)


def _no_check(*_args) -> None:
    return None


for _fn in (set_num_sms, get_num_sms, set_tc_util, get_tc_util, set_pdl, get_pdl, set_ignore_compile_dims,
            set_block_size_multiple_of, set_mk_alignment_for_contiguous_layout,
            get_mk_alignment_for_contiguous_layout, get_theoretical_mk_alignment_for_contiguous_layout,
            get_jit, jit_cache_dir, jit_num_compiled_kernels, jit_clear_cache):
    register(_fn.__name__, check=_no_check, reference=_fn)

# Setters only have side effects: declared ordered-effectful, compiled graphs keep them (and their order) instead of
# dropping them as dead code after tracing.
for _fn in (set_num_sms, set_tc_util, set_pdl, set_ignore_compile_dims, set_block_size_multiple_of,
            set_mk_alignment_for_contiguous_layout, jit_clear_cache):
    _register_effectful_op(getattr(torch.ops.deep_gemm, _fn.__name__).default, _EffectType.ORDERED)
