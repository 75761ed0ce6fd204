"""BF16 in Triton's CPU interpreter: the one patch every interpreter test of a BF16 kernel uses.

Triton 3.6's interpreter keeps bfloat16 values as raw uint16 bits (numpy has no bfloat16), and two of its builder
methods get them wrong:
- ``create_dot`` hands those bits to ``np.matmul`` as integers, so a BF16 ``tl.dot`` multiplies bit patterns
  (relative error ~1e10);
- ``create_fp_to_fp`` converts fp32 -> bf16 with its own bit arithmetic, whose rounding carry can spill into the
  exponent and which does not round to nearest-even on ties; its fp32 -> fp8 e4m3 conversion is wrong for ~2 % of
  values (e.g. 31.35 -> 16) and does not saturate.

``install()`` (idempotent; done on import) widens BF16 dot operands to fp32 (bits << 16, exact) so the dot runs in
fp32 like the tensor cores' FP32 accumulation, and routes every conversion to or from bf16 through torch's own casts
(RTNE, NaN/inf kept), and every conversion to fp8 e4m3 through torch's (RTNE, saturating). On a GPU nothing is
patched: the interpreter is not in use.

Usage in a test module: ``import interpreter_bf16  # noqa: F401`` before launching a kernel. The patch relies on the
interpreter's internals (``InterpreterBuilder``); ``tests/test_interpreter_bf16.py`` checks it bit-exactly against
torch, so a Triton upgrade that changes those internals fails there first.
"""

from __future__ import annotations

import os

import numpy as np
import torch

_INSTALLED = False


def _bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _torch_cast(data: np.ndarray, src, dst) -> np.ndarray:
    """Cast numpy-held Triton data through torch (bf16 held as uint16 bits); float -> int truncates as in C."""
    import triton.language as tl

    def to_torch(arr, dtype):
        if dtype == tl.bfloat16:
            return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(arr))

    torch_dtype = {tl.bfloat16: torch.bfloat16, tl.float16: torch.float16, tl.float32: torch.float32,
                   tl.float64: torch.float64, tl.int32: torch.int32, tl.int64: torch.int64, tl.int16: torch.int16,
                   tl.int8: torch.int8}[dst]
    out = to_torch(data, src).to(torch_dtype)
    if dst == tl.bfloat16:
        return out.view(torch.int16).numpy().view(np.uint16).reshape(data.shape)
    return out.numpy().reshape(data.shape)


def _to_e4m3_bits(data: np.ndarray) -> np.ndarray:
    """fp32 -> float8_e4m3fn as torch casts it (RTNE, saturating to +-448, NaN kept), held as uint8 bits."""
    out = torch.from_numpy(np.ascontiguousarray(data, dtype=np.float32)).to(torch.float8_e4m3fn)
    return out.view(torch.uint8).numpy().reshape(data.shape)


def install() -> None:
    """Patch the interpreter's builder once (no-op when the interpreter is not in use)."""
    global _INSTALLED
    if _INSTALLED or os.environ.get("TRITON_INTERPRET") != "1":
        return
    import triton.language as tl
    from triton.runtime.interpreter import InterpreterBuilder, TensorHandle

    plain_floats = (tl.bfloat16, tl.float16, tl.float32, tl.float64)
    original_dot = InterpreterBuilder.create_dot
    original_fp_to_fp = InterpreterBuilder.create_fp_to_fp
    original_cast = InterpreterBuilder.cast_impl

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            def widen(h):
                if h.dtype.scalar == tl.bfloat16:
                    return _bf16_bits_to_f32(h.data)
                return h.data.astype(np.float32)
            out = np.matmul(widen(a), widen(b), dtype=np.float32)
            return TensorHandle(out.astype(d.data.dtype) + d.data, d.dtype.scalar)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        src_t, dst_t = src.dtype.scalar, dst_type.scalar
        if dst_t == tl.float8e4nv and src_t in plain_floats:
            return TensorHandle(_to_e4m3_bits(_torch_cast(src.data, src_t, tl.float32)), dst_t)
        if (src_t == tl.bfloat16 or dst_t == tl.bfloat16) and src_t in plain_floats and dst_t in plain_floats:
            return TensorHandle(_torch_cast(src.data, src_t, dst_t), dst_t)
        return original_fp_to_fp(self, src, dst_type, rounding_mode)

    def cast_impl(self, src, dst_type):
        # fp_ext / fp_trunc / int <-> float: the original truncates fp32 -> bf16 and reads bf16 bits as integers.
        src_t, dst_t = src.dtype.scalar, dst_type.scalar
        if (src_t == tl.bfloat16 or dst_t == tl.bfloat16) and src_t != dst_t:
            return TensorHandle(_torch_cast(src.data, src_t, dst_t), dst_t)
        return original_cast(self, src, dst_type)

    InterpreterBuilder.create_dot = create_dot
    InterpreterBuilder.cast_impl = cast_impl
    # The create_fp_ext / create_fp_trunc / create_*i_to_fp lambdas call self.cast_impl: the patch reaches them.
    InterpreterBuilder.create_fp_to_fp = create_fp_to_fp
    _INSTALLED = True


install()
