"""The public API's way into the ops: straight to the op's CUDA kernel when the dispatcher would do nothing else.

``deep_gemm.fp8_gemm_nt(...)`` and the other public functions call ``ops.<name>.default(*args)`` from this module
instead of ``torch.ops.deep_gemm.<name>.default(*args)``. Both run the same CUDA kernel (``library.register``: the
op's one check, then its Triton launcher). The dispatcher's own share of a call, a Python kernel behind a C++
dispatcher op, costs ~6 us on the CPU CI host and ~11 us on the H200 host (2026-11-30), more than the kernel's
Python path itself (check memo + launch plan replay, ~9 us there), and the issue's host budget is 10 us per call.

So a call takes the direct route only when the dispatcher would run that kernel and nothing around it:

* not while torch.compile / torch.export trace (Dynamo constant-folds ``is_compiling()``, so the traced graph holds
  the ``torch.ops`` call and the fast path never appears in it);
* no Python dispatch mode (FakeTensorMode, make_fx's proxy mode, FlopCounterMode, ...), no torch-function mode
  (``with torch.device(...)``), no functorch transform (vmap, grad, functionalize) and no profiler (which records
  the op by name) is active;
* every tensor argument is a plain ``torch.Tensor`` (no subclass: FakeTensor, FunctionalTensor, DTensor, ...) on a
  CUDA device that does not require grad (the dispatcher's autograd fallback then decides), and the op takes no
  tensor lists.

Otherwise the call goes through ``torch.ops`` as before. What the dispatcher does on top of the kernel in the
plain case, bumping the version counter of each argument the schema marks as written (``Tensor(a!)``), the direct
route does too, so autograd's saved-tensor checks see the same versions. ``DG_EAGER_DIRECT=0`` turns the direct
route off (A/B measurements, debugging).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from . import library
from .schemas import ALIASES, SCHEMAS

DIRECT_ENABLED = os.environ.get("DG_EAGER_DIRECT", "1") not in ("", "0")

_is_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._len_torch_function_stack
_profiling = torch._C._autograd._profiler_enabled
_functorch_active = torch._C._are_functorch_transforms_active
_increment_version = torch._C._increment_version
_Tensor = torch.Tensor


def _schema_facts(name: str) -> tuple[tuple[int, ...], bool]:
    """(positions of the arguments the schema writes, whether any argument is a tensor list)."""
    parsed = torch._C.parse_schema(f"{library.NAMESPACE}::{SCHEMAS[name]}")
    written = tuple(i for i, a in enumerate(parsed.arguments)
                    if a.alias_info is not None and a.alias_info.is_write)
    tensor_list = any(str(a.type).startswith(("Tensor[]", "List[Tensor]", "Optional[List[Tensor]]", "Tensor?[]"))
                      for a in parsed.arguments)
    return written, tensor_list


def _plain_cuda_call(args: tuple) -> bool:
    """Whether the dispatcher would hand ``args`` straight to the op's CUDA kernel (see the module docstring)."""
    if _is_compiling() or _dispatch_modes() or _function_modes() or _profiling() or _functorch_active():
        return False
    seen_tensor = False
    for x in args:
        if type(x) is _Tensor:
            if not x.is_cuda or x.requires_grad:
                return False
            seen_tensor = True
        elif isinstance(x, _Tensor):  # a subclass: its own dispatch applies
            return False
    return seen_tensor


class EagerOp:
    """``torch.ops.deep_gemm.<name>.default`` with the direct route for plain eager CUDA calls (positional
    arguments only: the public functions pass the schema's leading arguments in order)."""

    __slots__ = ("op", "name", "_cuda", "_written", "_direct")

    def __init__(self, name: str):
        canonical = ALIASES.get(name, name)
        self.name = name
        self.op = getattr(torch.ops.deep_gemm, name).default
        self._written, tensor_list = _schema_facts(canonical)
        self._cuda: Callable[..., Any] | None = None
        # Ops without a CUDA kernel of ours (runtime knobs, composite view ops) and ops taking tensor lists always
        # go through the dispatcher.
        self._direct = DIRECT_ENABLED and not tensor_list

    def __call__(self, *args):
        if self._direct and _plain_cuda_call(args):
            cuda = self._cuda
            if cuda is None:
                cuda = self._cuda = library.cuda_kernel_of(self.name)
                if cuda is None:
                    self._direct = False
                    return self.op(*args)
            out = cuda(*args)
            written = [args[i] for i in self._written if i < len(args) and args[i] is not None]
            if written:
                _increment_version(written)
            return out
        return self.op(*args)

    @property
    def default(self) -> EagerOp:
        # Call sites read ``ops.<name>.default(...)`` as they would with torch.ops.
        return self


class _Namespace:
    """``ops.<name>`` -> the op's EagerOp (created once per name)."""

    def __init__(self):
        self._ops: dict[str, EagerOp] = {}

    def __getattr__(self, name: str) -> EagerOp:
        if name.startswith("_") and name not in SCHEMAS and name not in ALIASES:
            raise AttributeError(name)
        op = self._ops.get(name)
        if op is None:
            if name not in SCHEMAS and name not in ALIASES:
                raise AttributeError(f"deep_gemm has no op named {name!r}")
            op = self._ops.setdefault(name, EagerOp(name))
        return op


ops = _Namespace()
