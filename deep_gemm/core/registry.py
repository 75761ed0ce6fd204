"""The ``deep_gemm`` torch.library namespace: defines every schema and wires each op's kernels.

Every op with tensor arguments gets three kernels that all run the op's ONE check function first:

* CPU   -> the reference (plain torch, fp32/fp64): the semantics every other backend must match;
* CUDA  -> a Triton launcher when one is registered (it may return ``NotImplemented`` for argument combinations it
           does not cover, e.g. FP4 operands), otherwise the same reference on the GPU;
* fake  -> shapes and strides only (FakeTensorMode, torch.compile, torch.export).

Ops without tensor arguments (runtime knobs, buffer-size helpers) are registered once under
``CompositeExplicitAutograd`` (the ``CPU`` key never sees them: no tensor, no device to dispatch on).

Python kernels registered through ``Library.impl`` receive only the arguments the caller passed, so each kernel first
fills in the schema defaults (``_Binder``); the op implementations always see the full positional argument list.
No op logic lives here.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .._internals import torch_api
from . import arch as _arch
from . import first_import as _first_import
from .errors import DeepGEMMError
from .runtime import _STATE as _RUNTIME
from .schemas import ALIASES, FAMILY, SCHEMAS

NAMESPACE = "deep_gemm"
LIB = torch.library.Library(NAMESPACE, "DEF")

# ScalarType defaults arrive as their enum number (see schemas.py); map the ones our schemas use.
_SCALAR_TYPE_BY_NUMBER = {5: torch.float16, 6: torch.float32, 15: torch.bfloat16}

# Set DG_FORCE_REFERENCE=1 to run the torch reference on CUDA too (debugging, A/B benchmarks).
_FORCE_REFERENCE = os.environ.get("DG_FORCE_REFERENCE", "0") not in ("", "0")


class _Binder:
    """Turns (args, kwargs) as the dispatcher hands them over into the full positional argument tuple."""

    def __init__(self, schema: str):
        parsed = torch_api.parse_schema(f"{NAMESPACE}::{schema}")
        self.names = tuple(a.name for a in parsed.arguments)
        self.index = {n: i for i, n in enumerate(self.names)}
        scalar_type_args = {a.strip().split(" ")[-1].split("=")[0]
                            for a in schema.split("(", 1)[1].rsplit(")", 1)[0].split(",")
                            if a.strip().startswith("ScalarType")}
        defaults = []
        for a in parsed.arguments:
            if not a.has_default_value():
                defaults.append(_MISSING)
            elif a.name in scalar_type_args and isinstance(a.default_value, int):
                defaults.append(_SCALAR_TYPE_BY_NUMBER[a.default_value])
            else:
                default = a.default_value
                defaults.append(list(default) if isinstance(default, (list, tuple)) else default)
        self.defaults = tuple(defaults)
        self.has_tensor_args = any("Tensor" in str(a.type) for a in parsed.arguments)
        # (position, name) of every argument that must be a tensor (not Tensor?): the dispatcher lets None through.
        self.required_tensors = tuple((i, a.name) for i, a in enumerate(parsed.arguments) if str(a.type) == "Tensor")
        # Per argument: "Tensor", "Tensor?" or "value" (what _specialised_eager_signature generates code for).
        self.kinds = tuple(t if t in ("Tensor", "Tensor?") else "value" for t in map(str, (a.type for a in
                                                                                          parsed.arguments)))

    def __call__(self, args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        if not kwargs:  # the public wrappers' form: positional arguments, the schema defaults fill the tail
            return args if n == len(self.names) else args + self.defaults[n:]
        full = list(args) + list(self.defaults[n:])
        for key, value in kwargs.items():
            full[self.index[key]] = value
        return tuple(full)


class _Missing:
    def __repr__(self) -> str:
        return "<required>"


_MISSING = _Missing()

# Memoised checks: an op's check is a function of its arguments' metadata (shapes, strides, dtypes, devices,
# 16-byte alignment of the start, non-tensor values) and of the runtime knobs, so a call whose metadata signature
# already passed needs no second check. That is most of the host time of a small GEMM (~25 us of ~70 us of
# Python). Bounded: cleared when it grows past this many signatures.
CHECK_MEMO_LIMIT = 4096


# Exact types whose values go into a signature as they are (the common case, tested first: isinstance against
# torch.Tensor goes through its metaclass and costs more than a set lookup of the type).
_PLAIN_TYPES = frozenset((type(None), int, float, bool, str, torch.dtype))
def _signature(args: tuple):
    """What a check can see of ``args``: hashable, or None when some argument cannot be keyed (the check runs).

    Per tensor: shape, strides, dtype, device index (``get_device()``: -1 on CPU, cheaper than ``.device``) and the
    start's byte offset mod 16 (what the TMA alignment checks see; the offset is read only when non-zero). Plain
    values as they are, lists and tuples of numbers as tuples, and the runtime knobs' version first."""
    key = [_RUNTIME.version]
    for x in args:
        cls = type(x)
        if cls in _PLAIN_TYPES:
            key.append(x)
        elif cls is torch.Tensor or isinstance(x, torch.Tensor):
            offset = x.storage_offset()
            misalignment = (offset * x.element_size()) & 15 if offset else 0
            key.append((x.shape, x.stride(), x.dtype, x.get_device(), misalignment))
        elif isinstance(x, (int, float, bool, str, torch.dtype)):  # subclasses of the plain types
            key.append(x)
        elif isinstance(x, (list, tuple)):
            if not all(isinstance(v, (int, float, bool)) for v in x):
                return None
            key.append(tuple(x))
        else:
            return None
    return tuple(key)


# What ``OpKernels.checked`` hands on: one small int per distinct signature, never reused in the process. Launchers
# key their launch plans on it; hashing and comparing an int costs a fraction of a nested signature tuple (which
# Python re-hashes on every lookup).
_SIGNATURE_TOKENS = itertools.count(1)


@dataclass
class OpKernels:
    """What one op runs: its check, its reference (CPU kernel), its fake kernel and its optional Triton launcher."""

    name: str
    check: Callable[..., None]
    reference: Callable[..., Any]
    fake: Callable[..., Any] | None = None
    # The CUDA launcher (same arguments as the reference). Launcher modules import Triton and their kernels lazily,
    # at the first launch, so wiring the function itself keeps `import deep_gemm` free of Triton.
    triton: Callable[..., Any] | None = None
    triton_note: str = ""
    # What the launcher needs of the GPU architecture (deep_gemm.backends(); the launcher and its plan enforce it).
    arch: _arch.OpArch = _arch.ANY_MMA

    # signature -> its token (see _SIGNATURE_TOKENS)
    _passed: dict = field(default_factory=dict, repr=False)
    # The schema binder of an op registered with tensor arguments (``register``); None for the others, which the
    # eager path always hands to the dispatcher.
    binder: Any = field(default=None, repr=False)
    # The op's eager signature function (``_eager_signature_of``), made at its first eager call.
    eager_signature: Any = field(default=None, repr=False)
    # The op's eager token function (``_eager_token_of``), made at its first eager call, and what it keeps: the
    # guarded signatures of its recent calls, most recent first (``_remember``: (version, offsets, values, guard,
    # token) each; replaced as a whole, never mutated, so concurrent calls read one consistent tuple), and the guard
    # built per token (a miss on a signature seen before reuses it).
    eager_token: Any = field(default=None, repr=False)
    recent: tuple = field(default=(), repr=False)
    _guards: dict = field(default_factory=dict, repr=False)
    # (launcher, its ``call(full, token)``) for launchers of ``core/plans.replayable``: run_cuda calls it for a
    # token, sparing the keyword and argument packs of ``launcher(*full, signature=token)``.
    _call: tuple = field(default=(None, None), repr=False)
    # The op's data check (``set_data_check``): validates the values of its index tensors (same arguments as the
    # check). The CPU kernel always runs it; on CUDA only the checked mode does (``core/checks_mode.py``).
    data_check: Callable[..., None] | None = field(default=None, repr=False)

    def __post_init__(self):
        call = getattr(self.triton, "call", None)
        if call is not None and getattr(self.triton, "accepts_signature", False):
            self._call = (self.triton, call)

    def checked(self, full: tuple):
        """Run the check unless these arguments' metadata signature already passed it (see CHECK_MEMO_LIMIT).

        Returns the signature's token: equal tokens stand for equal signatures (a token is never reused; the same
        signature gets a new token only after the memo was cleared). None when the arguments cannot be keyed."""
        sig = _signature(full)
        if sig is None:
            self.check(*full)
            return None
        return self.token(sig, full)

    def token(self, sig: tuple, full: tuple):
        """``checked`` for a signature already built (the eager path builds it while testing its eligibility)."""
        token = self._passed.get(sig)
        if token is None:
            self.check(*full)
            if len(self._passed) >= CHECK_MEMO_LIMIT:
                self._passed.clear()
            # setdefault: concurrent first calls with one signature agree on its token
            token = self._passed.setdefault(sig, next(_SIGNATURE_TOKENS))
        return token

    def triton_fn(self) -> Callable[..., Any] | None:
        """The CUDA launcher, or None when there is none or DG_FORCE_REFERENCE is set."""
        return None if _FORCE_REFERENCE else self.triton

    def run_cuda(self, full: tuple, token):
        """What the op's CUDA kernel does once the check has passed (``token`` from ``checked``): the Triton
        launcher (with the token where it keeps per-signature plans), or the reference where there is none or it
        declines the arguments. The dispatcher's CUDA kernel and the eager path (``eager_op``) both end here."""
        fn = self.triton  # (triton_fn(), inlined: every eager call comes here)
        if fn is not None and not _FORCE_REFERENCE:
            _first_import.ensure_triton()  # (threads' first launches must not import Triton concurrently)
            launcher, call = self._call
            if token is not None and fn is launcher:
                out = call(full, token)
            else:
                out = fn(*full, signature=token) if getattr(fn, "accepts_signature", False) else fn(*full)
            if out is not NotImplemented:
                return out
        return self.reference(*full)


_KERNELS: dict[str, OpKernels] = {}
_defined = False
_define_lock = threading.Lock()


def define_all() -> None:
    """Define every schema of the table (idempotent)."""
    global _defined
    with _define_lock:
        if _defined:
            return
        for schema in SCHEMAS.values():
            LIB.define(schema)
        _defined = True


def names_for(name: str) -> list[str]:
    """The canonical name and every alias bound to it."""
    return [name] + [alias for alias, canonical in ALIASES.items() if canonical == name]


def register(name: str, *, check: Callable[..., None], reference: Callable[..., Any],
             fake: Callable[..., Any] | None = None, triton: Callable[..., Any] | None = None,
             triton_note: str = "", arch: _arch.OpArch = _arch.ANY_MMA) -> None:
    """Register the kernels of op ``name`` (and of its aliases).

    ``check(*args)`` validates everything that can be validated from metadata (it runs on fake tensors too) and
    raises ``DeepGEMMError``. ``reference(*args)`` is the CPU kernel. ``fake(*args)`` builds the outputs of ops
    that return tensors (in-place ops need none). ``triton`` is the CUDA launcher, called with the reference's
    arguments (plus ``signature=`` when it has ``accepts_signature``); it may return ``NotImplemented`` for
    argument combinations it does not cover, and the reference runs instead. Its module must not import Triton at
    import time. ``arch`` (``deep_gemm.core.arch.OpArch``) says what the launcher needs of the GPU architecture, for
    ``backends()``: the launcher itself declines (or its plan avoids) what the device cannot run.
    """
    define_all()
    if name in _KERNELS:
        raise RuntimeError(f"deep_gemm::{name} registered twice")
    binder = _Binder(SCHEMAS[name])
    check = _requiring_tensors(name, check, binder.required_tensors)
    kernels = OpKernels(name, check, reference, fake, triton, triton_note, arch)
    kernels.binder = binder if binder.has_tensor_args else None  # (the eager path serves only ops with tensors)
    _KERNELS[name] = kernels

    def reference_kernel(*args, **kwargs):
        full = binder(args, kwargs)
        check(*full)
        if kernels.data_check is not None:  # (the data is on the host: always checked, before anything is written)
            run_data_check(kernels, full)
        return reference(*full)

    def cuda_kernel(*args, **kwargs):
        full = binder(args, kwargs)
        # Launchers that keep per-signature launch plans get the token of the signature the check was memoised
        # under (OpKernels.checked).
        return kernels.run_cuda(full, kernels.checked(full))

    def fake_kernel(*args, **kwargs):
        full = binder(args, kwargs)
        check(*full)
        return fake(*full) if fake is not None else None

    def no_backend_kernel(*args, **kwargs):
        check(*binder(args, kwargs))
        raise DeepGEMMError(f"{name}: no kernel for the device of these tensors (deep_gemm has CPU and CUDA kernels)")

    for op in names_for(name):
        if not binder.has_tensor_args:
            LIB.impl(op, reference_kernel, "CompositeExplicitAutograd")
            continue
        LIB.impl(op, reference_kernel, "CPU")
        LIB.impl(op, cuda_kernel, "CUDA")
        torch.library.register_fake(f"{NAMESPACE}::{op}", fake_kernel, lib=LIB)
        # Every other key, notably a call whose tensor arguments are all None (nothing to dispatch on): the check
        # names the None argument, instead of the dispatcher's "There were no tensor arguments" error.
        LIB.impl(op, no_backend_kernel, "CompositeExplicitAutograd")


# ---- Data checks (the checked mode, core/checks_mode.py) -----------------------------------------------------------
#
# Off by default. On, every op with a data check gets an instance attribute ``run_cuda`` shadowing the class method:
# the data check (torch reductions on the device, one host sync), then the method. Off, the attribute is deleted, so
# the dispatcher's CUDA kernel and the eager path (both call ``kernels.run_cuda``) run exactly what they ran before.

_DATA_CHECKS = False


def data_checks_enabled() -> bool:
    return _DATA_CHECKS


def set_data_checks_enabled(enabled: bool) -> None:
    global _DATA_CHECKS
    _DATA_CHECKS = bool(enabled)
    for kernels in list(_KERNELS.values()):
        _install_data_check(kernels)


def set_data_check(name: str, data_check: Callable[..., None]) -> None:
    """Give op ``name`` its data check: called with the op's arguments by schema name (keywords; it takes the ones it
    needs and ``**_`` for the rest), raising ``DeepGEMMError`` (see ``OpKernels``)."""
    kernels = kernels_of(name)
    kernels.data_check = data_check
    _install_data_check(kernels)


def run_data_check(kernels: OpKernels, full: tuple) -> None:
    kernels.data_check(**dict(zip(kernels.binder.names, full)))


def refuse_in_capture(name: str) -> None:
    """A checked call syncs with the host: inside a CUDA-graph capture it raises instead."""
    # (a capture needs an initialised CUDA context; without one the query itself would fail on CUDA-less hosts)
    if torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing():
        raise DeepGEMMError(f"{name}: the checked mode (deep_gemm.set_checks('data') / DG_CHECKS=data) reads index "
                            "tensors on the host, which a CUDA-graph capture forbids; capture with "
                            "deep_gemm.set_checks('off') and validate the inputs in an eager call first")


def _install_data_check(kernels: OpKernels) -> None:
    if _DATA_CHECKS and kernels.data_check is not None:
        kernels.run_cuda = _checked_run_cuda(kernels)
    else:
        kernels.__dict__.pop("run_cuda", None)


def _checked_run_cuda(kernels: OpKernels) -> Callable[..., Any]:
    unchecked = OpKernels.run_cuda.__get__(kernels)
    name = kernels.name

    def run_cuda(full: tuple, token):
        refuse_in_capture(name)
        run_data_check(kernels, full)
        return unchecked(full, token)

    return run_cuda


def _requiring_tensors(name: str, check: Callable[..., None], required: tuple) -> Callable[..., None]:
    """``check`` preceded by a test that no required tensor argument is None: the dispatcher passes None for a
    ``Tensor`` argument through to the kernels, where the op's own check would fail with an AttributeError. Runs
    only where the check runs (a memoised signature has already passed it)."""
    if not required:
        return check

    def checked(*full):
        for index, arg in required:
            if full[index] is None:
                raise DeepGEMMError(f"{arg}: expected a tensor, got None ({name} requires it)")
        check(*full)

    checked.__wrapped__ = check
    return checked


def register_composite(name: str, fn: Callable[..., Any]) -> None:
    """Register an op whose implementation is plain torch view/shape code valid on every backend and under tracing
    (``CompositeImplicitAutograd``): e.g. slicing a buffer into views."""
    define_all()
    binder = _Binder(SCHEMAS[name])
    _KERNELS[name] = OpKernels(name, lambda *a: None, fn)

    def composite(*args, **kwargs):
        return fn(*binder(args, kwargs))

    LIB.impl(name, composite, "CompositeImplicitAutograd")


def run_launcher(name: str, *args, launcher_kwargs: dict | None = None, **kwargs):
    """Run op ``name``'s CUDA launcher as its CUDA kernel does (the memoised check, then the launcher with the
    signature token where it takes one), with extra keyword arguments for the launcher: how sweeps, benchmarks and
    tests force plan choices (e.g. ``launcher_kwargs=dict(overrides=Fp8Overrides(...))``) without any global.
    Returns the launcher's result: ``NotImplemented`` when it declines the arguments (the reference does not run)."""
    kernels = kernels_of(name)
    if kernels.triton is None:
        raise RuntimeError(f"deep_gemm::{name} has no CUDA launcher")
    full = _Binder(SCHEMAS[ALIASES.get(name, name)])(args, kwargs)
    token = kernels.checked(full)
    _first_import.ensure_triton()
    extra = dict(launcher_kwargs or {})
    if getattr(kernels.triton, "accepts_signature", False):
        extra["signature"] = token
    return kernels.triton(*full, **extra)


def kernels_of(name: str) -> OpKernels:
    return _KERNELS[ALIASES.get(name, name)]


def registered_ops() -> list[str]:
    """Every dispatcher name (aliases included) that has kernels."""
    return sorted(op for name in _KERNELS for op in names_for(name))


def backends(device: int | str | torch.device | None = None) -> dict[str, str]:
    """Which implementation each op runs on CUDA tensors of ``device``: 'triton', 'triton (portable)' (the op's
    sm_90a-only kernels, the warp-specialised Gluon ones, are not available on this architecture: its portable
    ``tl.*`` kernels run), 'reference' (torch on the GPU: no Triton kernel runs this op on this architecture, e.g.
    FP8 below sm_89, or DG_FORCE_REFERENCE is set) or 'host' (ops without tensors). A note in parentheses says
    where a Triton op still falls back to the reference ('triton (note)', 'triton (portable; note)').

    ``device``: None (the current CUDA device; without CUDA, an sm_90 device: what the kernels target, or the
    capability forced with ``deep_gemm.core.arch.forced_capability``), a device index, ``"cuda:N"`` or a
    ``torch.device``. A CPU device reports 'reference' for every op with tensors (its kernels are the references).
    Reading a device's capability initialises CUDA."""
    sm = _arch.report_sm(device)
    result = {}
    for name in sorted(_KERNELS):
        k = _KERNELS[name]
        if not _Binder(SCHEMAS[name]).has_tensor_args:
            backend = "host"
        elif k.triton is not None and not _FORCE_REFERENCE and sm is not None:
            backend = k.arch.backend(sm, k.triton_note)
        else:
            backend = "reference"
        for op in names_for(name):
            result[op] = backend
    return result


def family_of(name: str) -> str:
    return FAMILY[name]
