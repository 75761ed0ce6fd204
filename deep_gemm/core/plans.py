"""The host fast path every kernel family shares: configs resolved once per problem, and launches recorded once
per argument signature and replayed (``launch.LaunchPlan``).

A launcher that sets ``accepts_signature = True`` receives the token of the metadata signature its op's check was
memoised under (``core/registry.py``); equal tokens mean equal shapes, strides, dtypes, alignment and knob state, so
the first call's launch can be replayed for the next call's tensors. ``PlanCache`` keys plans on that token plus
what the signature cannot see (which arguments are the same tensor, the stream) and on whatever the launcher adds.
"""

from __future__ import annotations

import threading
from operator import itemgetter
from typing import Any, Callable, Sequence

import torch

from .._internals import torch_api
from .launch import LaunchPlan, interpreting
from .scratch import capturing, stream_capturing, stream_of

# Plans (and configs) kept per family before the cache is dropped and rebuilt: bounded memory for processes that see
# many shapes; a dropped entry costs one full-path call.
PLAN_LIMIT = 4096


class Recorder:
    """What one launcher call launched, and which of its tensors were per-call scratch or persistent buffers."""

    __slots__ = ("launches", "scratch", "persistent")

    def __init__(self):
        self.launches, self.scratch, self.persistent = [], [], []


class TensorPicker:
    """How a launcher called with one signature token finds its inputs: ``take(args)`` picks the tensors (in order)
    by the positions the token's signature fixes (a tensor and None or a plain value key differently), and
    ``may_alias`` says whether two of them could be one object.

    Picking by position spares a replay testing every argument (``isinstance`` against ``torch.Tensor`` costs ~80
    ns per non-tensor argument: ~1 us for the grouped GEMMs' twelve arguments). One object has
    one shape, strides, dtype and device, and equal tokens mean equal ones: tensors that differ in these at the
    first call with a token differ at every call with it, so only a token with two alike tensors pays for
    ``aliasing`` (most ops' tensors all differ: operands, scales and outputs of other shapes or dtypes)."""

    __slots__ = ("take", "may_alias")

    def __init__(self, args: Sequence[Any]):
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        if len(positions) >= 2:
            self.take = itemgetter(*positions)
        elif positions:
            i = positions[0]
            self.take = lambda a: (a[i],)
        else:
            self.take = lambda a: ()
        metadata = {(tuple(args[i].shape), args[i].stride(), args[i].dtype, args[i].device) for i in positions}
        self.may_alias = len(metadata) < len(positions)


def _picker(pickers: dict, signature, args: Sequence[Any]) -> TensorPicker:
    """The ``TensorPicker`` of a signature token, made at its first call (bounded like the plans)."""
    picker = pickers.get(signature)
    if picker is None:
        if len(pickers) >= PLAN_LIMIT:
            pickers.clear()
        picker = pickers[signature] = TensorPicker(args)
    return picker


def aliasing(inputs: Sequence[Any]) -> tuple | None:
    """Which inputs are the same object (each input's first position among identical ones), None when all are
    distinct (the common case, cheaper to hash): a signature sees each tensor's metadata, not that ``c is d``, and a
    plan's slots depend on it."""
    if len({*map(id, inputs)}) == len(inputs):
        return None
    ids = [*map(id, inputs)]
    return (*map(ids.index, ids),)


class _BoundedCache:
    """A dict of at most ``limit`` entries (emptied whole when full: the working set refills it), the part
    ``PlanCache`` and ``ConfigCache`` share."""

    def __init__(self, limit: int = PLAN_LIMIT):
        self.limit = limit
        self._entries: dict = {}

    def _store(self, key, value) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries


class PlanCache(_BoundedCache):
    """Recorded launches keyed by (launcher key, signature token, aliasing, stream).

    Plans are per stream because a plan may hold split-K counters, which belong to the stream it was recorded on
    (``scratch``); a plan holding such buffers is neither replayed into nor recorded from a graph capture (a
    captured launch needs counters of its own)."""

    def key(self, head: tuple, signature, inputs: Sequence[Any], out: torch.Tensor):
        """The plan key of a call, or None when the call has no signature (it then always takes the full path)."""
        if signature is None:
            return None
        return (*head, signature, aliasing(inputs), stream_of(out))

    def replay(self, key, inputs: Sequence[Any], out: torch.Tensor) -> bool:
        """Run the plan recorded under ``key`` for these inputs; False when there is none (or it may not run now)."""
        if key is None:
            return False
        plan = self._entries.get(key)
        if plan is None or (plan.keeps_buffers and capturing(out)):
            return False
        plan.run(inputs)
        return True

    def record(self, key, inputs: Sequence[Any], out: torch.Tensor, recorder: Recorder | None) -> None:
        """Keep what ``recorder`` saw as the plan of ``key`` (when it is one replayable launch)."""
        if key is None or recorder is None or (recorder.persistent and capturing(out)):
            return
        plan = LaunchPlan.from_record(recorder.launches, inputs, recorder.scratch, recorder.persistent)
        if plan is not None:
            self._store(key, plan)

    def keys(self):
        return self._entries.keys()

    def values(self):
        return self._entries.values()

    def __iter__(self):
        return iter(self._entries)


class ConfigCache(_BoundedCache):
    """A family's configs, resolved once per problem (a frozen dataclass) by ``resolve(problem)``; concurrent first
    calls resolve once."""

    def __init__(self, limit: int = PLAN_LIMIT):
        super().__init__(limit)
        self._lock = threading.Lock()

    def get(self, problem, resolve: Callable[[Any], Any]):
        cfg = self._entries.get(problem)
        if cfg is None:
            with self._lock:
                cfg = self._entries.get(problem)
                if cfg is None:
                    cfg = resolve(problem)
                    self._store(problem, cfg)
        return cfg

    def put(self, problem, cfg) -> None:
        """Pin a problem's config (benchmark sweeps time hand-picked configs through the normal launch path)."""
        self._entries[problem] = cfg

    def pop(self, problem) -> None:
        self._entries.pop(problem, None)


def replayable(name: str):
    """Give a launcher the per-signature replay fast path: ``launcher(*args, recorder=..., **launcher_kwargs)``
    becomes ``run(*args, signature=None, **launcher_kwargs)``, which replays the launch recorded by an earlier call
    with the same signature token and the same launcher keyword arguments (e.g. overrides), or runs the launcher
    and records its launch. ``run.call(args, signature)`` is ``run(*args, signature=signature)`` for a token (not
    None) and no keyword arguments: what the op's CUDA kernel calls (``_ops/library.OpKernels.run_cuda``).

    The inputs a plan fills in per call are the call's tensor arguments; tensors the launcher derives from them
    without copying (reshapes, transposes, slices) are re-derived (``launch._View``). A call is recorded only when
    it made exactly one launch through ``launch.launch(record=recorder.launches)`` and every tensor argument of that
    launch is an input, a view of one, scratch or a persistent buffer; so a launcher must do nothing observable
    outside that launch except work whose result that launch reads (a copy: then no plan is recorded) or calls that
    make no launch at all (e.g. empty problems)."""
    def wrap(launcher):
        cache = PlanCache()

        plans = cache._entries

        pickers: dict = {}  # signature token -> TensorPicker

        def call(args: tuple, signature):
            """``run(*args, signature=signature)`` with ``signature`` not None, its arguments as one tuple: the op's
            CUDA kernel's path (``OpKernels.run_cuda``), without building keyword and argument packs."""
            picker = pickers.get(signature)
            if picker is None:
                picker = _picker(pickers, signature, args)
            inputs = picker.take(args)
            anchor = inputs[0]
            # PlanCache.key and .replay, inlined (stream_of and stream_capturing too): every replayed call's path.
            stream = torch_api.current_raw_stream(anchor.get_device()) if anchor.is_cuda else None
            key = (name, signature, aliasing(inputs) if picker.may_alias else None, stream)
            plan = plans.get(key)
            # (None and the legacy default stream, 0, are never captured: scratch.LEGACY_DEFAULT_STREAM)
            if plan is not None and not (plan.keeps_buffers and stream and torch_api.is_current_stream_capturing()):
                plan.run(inputs)
                return None
            return launch_and_record(args, inputs, anchor, key, {})

        def run(*args, signature=None, **launcher_kwargs):
            if signature is not None and not launcher_kwargs:
                return call(args, signature)
            key = None
            if signature is not None:
                picker = pickers.get(signature)
                if picker is None:
                    picker = _picker(pickers, signature, args)
                inputs = picker.take(args)
                anchor = inputs[0]
                stream = stream_of(anchor)
                key = (name, *sorted(launcher_kwargs.items()), signature,
                       aliasing(inputs) if picker.may_alias else None, stream)
                plan = plans.get(key)
                if plan is not None and not (plan.keeps_buffers and stream_capturing(stream)):
                    plan.run(inputs)
                    return None
            else:
                inputs = tuple([a for a in args if isinstance(a, torch.Tensor)])  # (a list: faster than a genexpr)
                anchor = inputs[0]
            return launch_and_record(args, inputs, anchor, key, launcher_kwargs)

        def launch_and_record(args, inputs, anchor, key, launcher_kwargs):
            recorder = Recorder() if key is not None else None
            result = launcher(*args, recorder=recorder, **launcher_kwargs)
            if result is not NotImplemented:
                cache.record(key, inputs, anchor, recorder)
            return result

        run.__name__ = run.__qualname__ = name
        run.__doc__ = launcher.__doc__
        run.accepts_signature = True
        run.call = call
        run.plans = cache
        return run
    return wrap


class _AllocatingReplay:
    """What a call with one metadata signature did: the output's allocation and its launches (``LaunchPlan``s whose
    inputs are the call's tensors plus the output), replayed for the next call with that signature."""

    __slots__ = ("numel", "shape", "stride", "dtype", "device", "plans", "exact")

    def __init__(self, out: torch.Tensor, plans: list):
        self.numel = out.untyped_storage().nbytes() // out.element_size()
        self.shape, self.stride, self.dtype, self.device = tuple(out.shape), out.stride(), out.dtype, out.device
        self.plans = plans
        # Whether torch.empty_strided (one call) allocates exactly that storage (its size: the last element reached
        # by the strides, plus one); outputs in a padded buffer keep the two-call form.
        self.exact = 0 < self.numel == 1 + sum((size - 1) * stride for size, stride in zip(self.shape, self.stride)) \
            and min(self.shape, default=1) > 0

    def run(self, inputs: tuple) -> torch.Tensor:
        if self.exact:
            out = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=self.device)
        else:
            out = torch.empty(self.numel, dtype=self.dtype, device=self.device).as_strided(self.shape, self.stride)
        inputs = inputs + (out,)
        for plan in self.plans:
            plan.run(inputs)
        return out


def replayable_allocating(launcher):
    """``replayable`` for a launcher that allocates and returns its output and may make several launches: the first
    call with a signature token runs ``launcher(..., record=[])`` and keeps its launches; later calls allocate the
    output and replay them (no config, shape or descriptor logic). Calls with launcher keyword arguments (forced
    configs) take the full path. Its launches must hold no split-K counters (plans are not keyed by stream; the
    indexer kernels, its users, keep none)."""
    plans: dict = {}
    pickers: dict = {}  # signature token -> TensorPicker (see replayable)

    def run(*args, signature=None, **launcher_kwargs):
        if signature is None or launcher_kwargs:
            return launcher(*args, **launcher_kwargs)
        return call(args, signature)

    def call(args: tuple, signature):
        """``run(*args, signature=signature)`` with ``signature`` not None (see ``replayable``'s ``call``)."""
        picker = pickers.get(signature)
        if picker is None:
            picker = _picker(pickers, signature, args)
        inputs = picker.take(args)
        key = (signature, aliasing(inputs) if picker.may_alias else None)
        replay = plans.get(key)
        if replay is not None:
            return replay.run(inputs)
        record: list = []
        out = launcher(*args, record=record)
        if out is not NotImplemented and record and not interpreting():
            recorded = [LaunchPlan.from_record([launch_record], inputs + (out,)) for launch_record in record]
            if all(plan is not None for plan in recorded):
                if len(plans) >= PLAN_LIMIT:
                    plans.clear()
                plans[key] = _AllocatingReplay(out, recorded)
        return out

    run.__name__ = run.__qualname__ = launcher.__name__
    run.__doc__ = launcher.__doc__
    run.accepts_signature = True
    run.call = call
    run.plans = plans
    return run
