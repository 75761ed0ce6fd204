"""The eager path: public wrappers call an op's CUDA kernel without the dispatcher (``eager_op``, ``eager_ops``),
for plain eager calls on CUDA tensors, with the signature tokens and metadata guards that let a repeated call skip
rebuilding its signature. Everything it cannot prove plain goes to the dispatcher op (``registry.py``).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from .._internals import torch_api
from . import guards as metadata_guards
from .registry import CHECK_MEMO_LIMIT, _KERNELS, _PLAIN_TYPES, OpKernels
from .runtime import _STATE as _RUNTIME
from .schemas import ALIASES


# ---- The eager path: public wrappers calling an op's CUDA kernel without the dispatcher ---------------------------
#
# A call through ``torch.ops`` costs ~3 us of dispatcher work on top of the Python kernel
# (``benchmarks/host_paths_cpu.py`` measures it per op), a third of DeepGEMM's whole host time per call. A plain
# eager call on CUDA tensors gains nothing from it: the dispatcher would pick the CUDA kernel registered in registry.py,
# which is a Python function. ``eager_op`` calls that same
# function (binder, memoised check, launcher or reference: ``OpKernels.run_cuda``) directly, and hands every call it
# cannot prove plain to the dispatcher op, so the op stays THE path for everything that needs the dispatcher:
#
# * torch.compile / torch.export tracing (``torch.compiler.is_compiling()``, tested first so that Dynamo, which
#   folds it to True, traces only the dispatcher call);
# * an active TorchDispatchMode (FakeTensorMode, proxy tracing, functionalisation, debug modes), TorchFunctionMode,
#   functorch transform (vmap, grad), the autograd profiler (which records dispatcher ops by name) or a
#   torch.jit.trace (which records dispatcher ops);
# * any tensor argument that is not a plain ``torch.Tensor`` (or ``nn.Parameter``, which disables
#   ``__torch_function__``) on CUDA, or that requires grad while grad mode is on (the autograd fallback);
# * calls with no tensor at all (the dispatcher's error path) and ops without tensor arguments.
#
# What the dispatcher does for such a call besides running the kernel is nothing observable: Python kernels get no
# device guard (the launchers select the tensors' device themselves), an op without an autograd formula adds no
# graph under no_grad or without tensors requiring grad, and in-place writes by a Python kernel bump no version
# counter either way. The check, its errors (raised before anything is written), the memo and the launch plans are
# the ones the dispatcher path uses, keyed by the same signature (``_eager_signature`` builds ``_signature``'s
# tuple), so both paths share tokens and plans. CUDA-graph capture and threads behave as on the dispatcher path
# (the kernel is the same function; the guards read thread-local state).

_PLAIN_TENSOR_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))
if torch_api.EAGER_PROBES is not None:
    _dispatch_modes, _function_modes, _functorch_active, _jit_tracing, _profiling = torch_api.EAGER_PROBES
else:  # this torch lacks one of them: every call takes the dispatcher
    _dispatch_modes = _function_modes = _functorch_active = _jit_tracing = _profiling = lambda: True
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def _eager_signature(args: tuple):
    """``_signature(args)`` when the call may skip the dispatcher (every tensor a plain CUDA tensor outside
    autograd, at least one tensor), else None. One pass over the arguments does both."""
    key = [_RUNTIME.version]
    tensors = 0
    for x in args:
        cls = type(x)
        if cls in _PLAIN_TYPES:
            key.append(x)
        elif cls in _PLAIN_TENSOR_TYPES:
            if not x.is_cuda or (x.requires_grad and _grad_enabled()):
                return None
            tensors += 1
            offset = x.storage_offset()
            key.append((x.shape, x.stride(), x.dtype, x.get_device(),
                        (offset * x.element_size()) & 15 if offset else 0))
        elif cls is list or cls is tuple:
            if not all(isinstance(v, (int, float, bool)) for v in x):
                return None
            key.append(tuple(x))
        else:
            return None  # tensor subclasses (fake, functional, ...), subclasses of plain types: the dispatcher
    return tuple(key) if tensors else None


def _modes_active() -> bool:
    return bool(_dispatch_modes() or _function_modes() or _functorch_active() or _profiling() or _jit_tracing())


# The device test of the generated signatures (benchmarks/host_paths_cpu.py, which times CPU tensors through the
# CUDA kernels, sets "is_cpu" before the first call).
_EAGER_DEVICE_TEST = "is_cuda"


def _specialised_eager_signature(kinds: tuple) -> Callable[[tuple], Any]:
    """``_eager_signature`` for one schema's argument kinds ("Tensor", "Tensor?", "value"), generated as straight-line
    code: no loop, no per-argument type dispatch, no list. The signature is half of an eager call's host time, most
    of it per-tensor attribute reads that cannot be avoided; the loop around them costs ~15 % more (3.5 against
    4.1 us for the masked GEMM's six tensors and six values).

    The fast case is the common call: every Tensor argument a plain CUDA tensor outside autograd, every Tensor?
    argument None, every other argument of a plain type. Any other call (lists, a given optional tensor, CPU
    tensors, wrong types) returns ``_eager_signature(args)``, so the result is always that function's."""
    n = len(kinds)
    names = [f"a{i}" for i in range(n)]
    tensors = [x for x, kind in zip(names, kinds) if kind == "Tensor"]
    if not tensors:
        return lambda args: _eager_signature(args)
    fast_case = " and ".join(
        [f"type({x}) in _PLAIN_TENSOR_TYPES" for x in tensors]
        + [f"{x} is None" for x, kind in zip(names, kinds) if kind == "Tensor?"]
        + [f"type({x}) in _PLAIN_TYPES" for x, kind in zip(names, kinds) if kind == "value"]
        + [f"{x}.{_EAGER_DEVICE_TEST}" for x in tensors])
    grad = " or ".join(f"{x}.requires_grad" for x in tensors)
    parts = {x: (f"({x}.shape, {x}.stride(), {x}.dtype, {x}.get_device(), "
                 f"({x}_offset * {x}.element_size()) & 15 if {x}_offset else 0)") for x in tensors}
    lines = [
        "def signature(args):",
        f"    if len(args) != {n}:",
        "        return _eager_signature(args)",
        f"    {', '.join(names)}{',' if n == 1 else ''} = args",
        f"    if not ({fast_case}) or (({grad}) and _grad_enabled()):",
        "        return _eager_signature(args)",
        *[f"    {x}_offset = {x}.storage_offset()" for x in tensors],
        f"    return (_RUNTIME.version, {', '.join(parts.get(x, x) for x in names)},)",
    ]
    namespace: dict = {}
    exec(compile("\n".join(lines), f"<eager signature {kinds}>", "exec"), globals(), namespace)
    return namespace["signature"]


def _eager_signature_of(kernels: OpKernels) -> Callable[[tuple], Any]:
    """The op's ``_specialised_eager_signature``, generated at its first eager call."""
    fn = kernels.eager_signature
    if fn is None:
        fn = kernels.eager_signature = _specialised_eager_signature(kernels.binder.kinds)
    return fn


# ---- Eager tokens: the signature's token without the signature, for calls that repeat a recent one ----------------
#
# An eager call needs its signature's token (memoised check, launch plans). Most calls repeat the metadata of a recent
# call of the same op, and for those one guard (``guards.py``: a C check of the tensors' types, dispatch keys,
# dtypes, devices, requires_grad, sizes and strides against an earlier call's) plus the storage-offset alignment and
# the non-tensor arguments prove the signature equal, so its token is reused without building or hashing the
# signature (HC: ~1 us instead of ~3.2 us). Everything else builds the signature as before and
# leaves a guard for the calls after it (``_remember``). Tokens are the memo's: a guarded call and a signature-built
# call with equal metadata get the same token, so they share plans with the dispatcher path.

# Argument types a guarded signature compares by value (lists and tuples: the int lists the public wrappers build).
_GUARD_VALUE_TYPES = _PLAIN_TYPES | {list, tuple}


def _specialised_eager_token(kernels: OpKernels) -> Callable[[tuple], Any]:
    """The op's eager token function: ``full`` (the bound arguments) -> the token of ``_eager_signature(full)``
    (the check runs, and may raise, at a signature's first call), or None when that is None (the dispatcher's call).

    Generated per schema as straight-line code. Its guarded case is the specialised signature's common call (every
    Tensor argument of a plain tensor type, every Tensor? argument None) with non-tensor arguments of plain types or
    lists/tuples; the guards of the op's recent signatures are tried most recent first."""
    kinds = kernels.binder.kinds
    signature = _eager_signature_of(kernels)
    names = [f"a{i}" for i in range(len(kinds))]
    tensors = [x for x, kind in zip(names, kinds) if kind == "Tensor"]
    if not tensors or not metadata_guards.available():
        lines = ["def token_of(full):", "    return _slow_token(kernels, signature, full, None)"]
    else:
        values = [x for x, kind in zip(names, kinds) if kind == "value"]
        guarded_case = " and ".join(
            [f"type({x}) in _PLAIN_TENSOR_TYPES" for x in tensors]
            + [f"{x} is None" for x, kind in zip(names, kinds) if kind == "Tensor?"]
            + [f"type({x}) in _GUARD_VALUE_TYPES" for x in values])
        residues = ", ".join(f"({x}_o * {x}.element_size()) & 15 if {x}_o else 0" for x in tensors)
        lines = [
            "def token_of(full):",
            f"    if len(full) != {len(kinds)}:",
            "        return _slow_token(kernels, signature, full, None)",
            f"    {', '.join(names)}{',' if len(names) == 1 else ''} = full",
            f"    if not ({guarded_case}):",
            "        return _slow_token(kernels, signature, full, None)",
            *[f"    {x}_o = {x}.storage_offset()" for x in tensors],
            # (None for the common all-zero offsets: one test instead of a tuple per call)
            f"    offsets = ({residues},) if ({' or '.join(f'{x}_o' for x in tensors)}) else None",
            f"    values = ({''.join(f'{x}, ' for x in values)})",
            "    version = _RUNTIME.version",
            "    for e_version, e_offsets, e_values, guard, token in kernels.recent:",
            "        if e_version == version and e_offsets == offsets and e_values == values \\",
            f"                and guard.check({', '.join(tensors)}):",
            "            return token",
            "    return _slow_token(kernels, signature, full, (offsets, values))",
        ]
    # (made inside a factory: the op's kernels and signature function are closure cells, not globals)
    source = "\n".join(["def make(kernels, signature):", *[f"    {line}" for line in lines], "    return token_of"])
    namespace: dict = {}
    exec(compile(source, f"<eager token {kinds}>", "exec"), globals(), namespace)
    return namespace["make"](kernels, signature)


def _slow_token(kernels: OpKernels, signature, full: tuple, probe):
    """The token through the signature (memo lookup, check at its first call); with ``probe`` (the guarded case's
    (offsets, values)), also leaves a guard for the next calls with this metadata."""
    sig = signature(full)
    if sig is None:
        return None
    token = kernels._passed.get(sig)
    if token is None:
        token = kernels.token(sig, full)  # (the check: may raise, and then nothing is remembered)
    if probe is not None:
        _remember(kernels, full, sig[0], probe, token)
    return token


def _remember(kernels: OpKernels, full: tuple, version: int, probe: tuple, token) -> None:
    """Put the guarded signature of this call (just checked, under ``token``) first in ``kernels.recent``. Not for
    tensors that require grad (eligible only under no_grad, which the guard cannot see) or that fail the eager
    path's device test (the tests' CPU stand-in leaves no guard unless it sets the test to CPU too)."""
    offsets, values = probe
    tensors = tuple(full[i] for i, kind in enumerate(kernels.binder.kinds) if kind == "Tensor")
    if any(t.requires_grad or not getattr(t, _EAGER_DEVICE_TEST) for t in tensors):
        return
    guard = kernels._guards.get(token)
    if guard is None or not guard.check(*tensors):  # (same token, other Python type or dispatch keys)
        if len(kernels._guards) >= CHECK_MEMO_LIMIT:
            kernels._guards.clear()
        guard = kernels._guards[token] = metadata_guards.tensor_guard(tensors)
    values = tuple(list(v) if type(v) is list else v for v in values)  # (the caller may change its list later)
    kernels.recent = ((version, offsets, values, guard, token), *kernels.recent[:metadata_guards.RECENT_LIMIT - 1])


def _eager_token_of(kernels: OpKernels) -> Callable[[tuple], Any]:
    """The op's ``_specialised_eager_token``, generated at its first eager call."""
    fn = kernels.eager_token
    if fn is None:
        fn = kernels.eager_token = _specialised_eager_token(kernels)
    return fn


_NO_KWARGS: dict = {}
# DG_NO_EAGER_PATH=1 (read at import): the public functions call the dispatcher ops themselves (A/B host-time runs,
# or a way around the eager path should it ever misbehave).
_EAGER_PATH = os.environ.get("DG_NO_EAGER_PATH", "0") in ("", "0")


def eager_op(name: str) -> Callable[..., Any]:
    """The callable a public wrapper uses for op ``name`` (canonical or alias): ``torch.ops.deep_gemm.<name>.default``
    with the same arguments, results and errors, which skips the dispatcher for plain eager calls on CUDA tensors
    (see the comment above). Kernels are looked up on the first call (families register on import)."""
    op = getattr(torch.ops.deep_gemm, name).default
    if not _EAGER_PATH:
        return op
    canonical = ALIASES.get(name, name)
    resolved: list = []

    def call(*args, **kwargs):
        # (_modes_active, inlined: every call pays these tests)
        if kwargs or _is_compiling() or _dispatch_modes() or _function_modes() or _functorch_active() \
                or _profiling() or _jit_tracing():
            return op(*args, **kwargs)
        if not resolved:
            kernels = _KERNELS.get(canonical)
            # (one append of a tuple: concurrent first calls leave one or two equal entries, never a mix)
            resolved.append((kernels, kernels.binder if kernels is not None else None))
        kernels, binder = resolved[0]
        if binder is None:
            return op(*args)
        # (the binder's first case, inlined: the public wrappers pass every argument or a prefix)
        full = args if len(args) == len(binder.names) else args + binder.defaults[len(args):]
        # (read per call, not kept here: tests regenerate it with their CPU stand-in and restore it after)
        token_of = kernels.eager_token
        token = token_of(full) if token_of is not None else _eager_token_of(kernels)(full)
        if token is None:
            return op(*args)
        return kernels.run_cuda(full, token)

    call.__name__ = call.__qualname__ = name
    call.op = op
    return call


class _EagerNamespace:
    """``torch.ops.deep_gemm`` for the public wrappers: ``ops.<name>.default`` is ``eager_op(name)``; anything
    else (``ops.<name>`` itself, overload packets) is the dispatcher's."""

    def __getattr__(self, name: str):
        packet = getattr(torch.ops.deep_gemm, name)
        entry = _EagerPacket(packet, eager_op(name))
        setattr(self, name, entry)
        return entry


class _EagerPacket:
    __slots__ = ("packet", "default")

    def __init__(self, packet, default):
        self.packet, self.default = packet, default

    def __call__(self, *args, **kwargs):
        return self.default(*args, **kwargs)


eager_ops = _EagerNamespace()


def eager_checked(name: str, args: tuple):
    """What ``eager_op(name)(*args)`` would run, up to the launch: ``(kernels, full, token)`` once the memoised check
    passed (it raises the op's ``DeepGEMMError`` otherwise), or None when the call must go through the dispatcher op
    (tracing, modes, tensors that are not plain CUDA tensors, keyword-free calls only). For public wrappers that
    decide something per signature before launching (e.g. returning their input as is): they can key that decision
    on the token (equal tokens, equal signatures; tokens are never reused) and then call
    ``kernels.run_cuda(full, token)``, instead of running the op's check themselves on every call."""
    if not _EAGER_PATH or _is_compiling() or _dispatch_modes() or _function_modes() or _functorch_active() \
            or _profiling() or _jit_tracing():
        return None
    kernels = _KERNELS.get(ALIASES.get(name, name))
    if kernels is None or kernels.binder is None:
        return None
    full = kernels.binder(args, _NO_KWARGS)
    token = _eager_token_of(kernels)(full)
    return None if token is None else (kernels, full, token)
