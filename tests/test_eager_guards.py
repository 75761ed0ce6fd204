"""The eager path's metadata guards (``core/guards.py``, ``core/eager._specialised_eager_token``): a call repeating
the metadata of one of the op's recent calls reuses that signature's token through one C guard instead of building
the signature.

Checked on CPU (CPU tensors made eligible: conftest's ``eager_calls``): a guarded call gets exactly the token the
signature path (and the dispatcher path) gives; every metadata change the signature sees (shape, strides, dtype,
alignment, non-tensor arguments, runtime knobs) misses the guard, and so do Python type and requires_grad; errors are
still raised before anything is written; lists kept by a guard are copies; more signatures than the guards kept;
threads; tracing, fake tensors and dispatch modes still go through the op after guards exist; without guards the
signature path serves every call.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import deep_gemm
from deep_gemm.core import eager, guards, registry, runtime
from deep_gemm.core.errors import DeepGEMMError

NAME = "tf32_hc_prenorm_gemm"
M, N, K = 5, 8, 128


@pytest.fixture
def hc(monkeypatch, eager_calls):
    """CPU tensors on the eager path; ``taken``: tokens that reached the kernel, ``slow``: the calls that built the
    signature (True where the call was guardable and left a guard)."""
    taken = eager_calls(NAME)
    slow = []
    slow_token = eager._slow_token

    def counting(kernels, signature, full, probe):
        if kernels.name == NAME:
            slow.append(probe is not None)
        return slow_token(kernels, signature, full, probe)
    monkeypatch.setattr(eager, "_slow_token", counting)
    return SimpleNamespace(taken=taken, slow=slow, kernels=registry.kernels_of(NAME))


def _inputs(seed: int = 0, m: int = M):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, K, generator=g).to(torch.bfloat16)
    b = torch.randn(N, K, generator=g)
    return a, b, torch.full((m, N), 7.0), torch.full((m,), 7.0)


def _want(a, b, d, s, num_splits=None):
    want_d, want_s = torch.empty_like(d), torch.empty_like(s)
    registry.run_launcher(NAME, a, b, want_d, want_s, num_splits)
    return want_d, want_s


def _signature_token(hc, *args):
    """The token the dispatcher path's memo gives these arguments."""
    return hc.kernels.checked(hc.kernels.binder(args, {}))


def test_guards_work_on_this_torch():
    assert guards._self_test() and guards.available()


def test_repeated_metadata_takes_the_guard_with_the_signature_token(hc):
    first, second = _inputs(1), _inputs(2)
    deep_gemm.tf32_hc_prenorm_gemm(*first)
    deep_gemm.tf32_hc_prenorm_gemm(*second)
    assert hc.slow == [True]  # the second call matched the first's guard
    assert hc.taken[0] == hc.taken[1] == _signature_token(hc, *second, None)
    for args in (first, second):
        want_d, want_s = _want(*args)
        assert torch.equal(args[2], want_d) and torch.equal(args[3], want_s)


def _variants():
    """(label, arguments) that differ from ``_inputs()`` in something the signature or the guard sees."""
    a, b, d, s = _inputs()
    padded = torch.full((M, N + 8), 7.0)[:, :N]  # other strides
    shifted = torch.full((M * N + 8,), 7.0)[8:].view(M, N)  # storage offset 32 bytes: the same signature
    return [
        ("shape", (*_inputs(m=M + 1), None)),
        ("strides", (a, b, padded, s, None)),
        ("offset, same alignment", (a, b, shifted, s, None)),
        ("splits", (a, b, torch.empty(2, M, N), torch.empty(2, M), 2)),
        ("parameter", (a, torch.nn.Parameter(b, requires_grad=False), d, s, None)),
    ]


@pytest.mark.parametrize("label", [v[0] for v in _variants()])
def test_what_the_signature_sees_misses_the_guard(hc, label):
    base = _inputs()
    deep_gemm.tf32_hc_prenorm_gemm(*base)
    args = dict(_variants())[label]
    deep_gemm.tf32_hc_prenorm_gemm(*args)
    assert hc.slow == [True, True]  # built the signature again
    assert hc.taken[1] == _signature_token(hc, *args)
    assert (hc.taken[1] == hc.taken[0]) == (label in ("offset, same alignment", "parameter"))
    want_d, want_s = _want(*args)
    assert torch.equal(args[2], want_d) and torch.equal(args[3], want_s)
    deep_gemm.tf32_hc_prenorm_gemm(*args)  # now guarded too
    assert hc.slow == [True, True] and hc.taken[2] == hc.taken[1]


def test_runtime_knobs_miss_the_guard(hc):
    args = _inputs()
    deep_gemm.tf32_hc_prenorm_gemm(*args)
    before = runtime.get_tc_util()
    runtime.set_tc_util(50)
    try:
        deep_gemm.tf32_hc_prenorm_gemm(*args)
    finally:
        runtime.set_tc_util(before)
    assert hc.slow == [True, True] and hc.taken[0] != hc.taken[1]


def test_errors_after_a_guard_and_nothing_written(hc):
    """A guard never stands in for the check of other metadata: misaligned or mis-shaped arguments after a guarded
    call raise the dispatcher's error before anything is written."""
    a, b, d, s = _inputs()
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    misaligned = torch.full((M * K + 1,), 1.0).to(torch.bfloat16)[1:].view(M, K)  # same shape and strides as a
    for bad in [(misaligned, b, d, s, None), (a, b.double(), d, s, None), (a, b, torch.full((M, N + 8), 7.0), s, None)]:
        out = [torch.full_like(x, 7.0) for x in bad[2:4]]
        bad = (*bad[:2], *out, bad[4])
        with pytest.raises(DeepGEMMError) as via_dispatcher:
            torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(*bad)
        with pytest.raises(DeepGEMMError) as via_eager:
            deep_gemm.tf32_hc_prenorm_gemm(*bad)
        assert str(via_eager.value) == str(via_dispatcher.value)
        assert bool((bad[2] == 7.0).all()) and bool((bad[3] == 7.0).all())
    assert len(hc.taken) == 1


def test_requires_grad_is_never_guarded(hc):
    a, b, d, s = _inputs()
    w = b.clone().requires_grad_(True)
    with torch.no_grad():  # eligible without grad mode, but no guard is left for it
        deep_gemm.tf32_hc_prenorm_gemm(a, w, d, s)
        deep_gemm.tf32_hc_prenorm_gemm(a, w, d, s)
    assert hc.slow == [True, True] and hc.kernels.recent == ()
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)  # guards b without grad
    deep_gemm.tf32_hc_prenorm_gemm(a, w, d, s)  # grad mode on: the dispatcher (the CPU reference)
    assert len(hc.taken) == 3


def test_guarded_lists_are_copies(eager_calls):
    """A guard compares non-tensor arguments by value; the list a caller passed may change after the call."""
    name = "transform_sf_into_required_layout"
    eager_calls(name)
    kernels = registry.kernels_of(name)
    op = eager.eager_op(name)
    sf = torch.randn(8, 4)
    recipe = [1, 128]
    first = op(sf, 8, 512, recipe, None, None, False, None)
    recipe[0] = 128  # (128, 128) block scales for a [8, 512] operand want [1, 4] scales: the check must run
    with pytest.raises(DeepGEMMError):
        op(sf, 8, 512, recipe, None, None, False, None)
    recipe[0] = 1
    assert torch.equal(op(sf, 8, 512, recipe, None, None, False, None), first)
    kept = kernels.recent[0][2][2]  # (values of the guarded entry: mn, k, recipe, ...)
    assert len(kernels.recent) == 1 and kept == [1, 128] and kept is not recipe


def test_more_signatures_than_guards(hc):
    shapes = range(1, guards.RECENT_LIMIT + 3)
    for _ in range(2):
        for m in shapes:
            args = (*_inputs(m, m), None)
            deep_gemm.tf32_hc_prenorm_gemm(*args)
            assert hc.taken[-1] == _signature_token(hc, *args)
            want_d, want_s = _want(*args[:4])
            assert torch.equal(args[2], want_d) and torch.equal(args[3], want_s)
    assert len(hc.kernels.recent) == guards.RECENT_LIMIT
    # The most recent ones hit: no signature built.
    before = len(hc.slow)
    deep_gemm.tf32_hc_prenorm_gemm(*_inputs(0, shapes[-1]))
    assert len(hc.slow) == before


def test_threads_with_several_shapes(hc):
    inputs = [_inputs(20 + i, m=1 + i % 3) for i in range(6)]
    wants = [_want(*x) for x in inputs]
    errors = []

    def worker(i):
        try:
            for _ in range(20):
                deep_gemm.tf32_hc_prenorm_gemm(*inputs[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(hc.taken) == 20 * len(inputs)
    assert set(hc.taken) == {_signature_token(hc, *x, None) for x in inputs}
    for (_, _, d, s), (want_d, want_s) in zip(inputs, wants):
        assert torch.equal(d, want_d) and torch.equal(s, want_s)


def test_tracing_and_modes_go_through_the_op_after_a_guard(hc, hc_compiled_graph):
    """Guards exist for these very tensors; compile, export, fake tensors and dispatch modes still reach the op."""
    a, b, d, s = _inputs()
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert len(hc.kernels.recent) == 1 and len(hc.taken) == 2
    assert "deep_gemm.tf32_hc_prenorm_gemm.default" in hc_compiled_graph(a, b, d, s)

    class Step(torch.nn.Module):
        def forward(self, a, b, d, s):
            deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
            return s + 0

    exported = torch.export.export(Step(), (a, b, d, s))
    assert "deep_gemm.tf32_hc_prenorm_gemm.default" in str(exported.graph)

    class Counting(TorchDispatchMode):
        seen: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Counting():
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert "deep_gemm.tf32_hc_prenorm_gemm.default" in Counting.seen
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(x) for x in (a, b, d, s)]
        deep_gemm.tf32_hc_prenorm_gemm(*fake)
    assert len(hc.taken) == 2  # none of these reached the CUDA kernel


def test_without_guards_every_call_builds_the_signature(hc, monkeypatch):
    monkeypatch.setattr(guards, "_verdict", [False])
    first, second = _inputs(1), _inputs(2)
    deep_gemm.tf32_hc_prenorm_gemm(*first)
    deep_gemm.tf32_hc_prenorm_gemm(*second)
    assert hc.slow == [False, False] and hc.kernels.recent == ()
    assert hc.taken[0] == hc.taken[1] == _signature_token(hc, *second, None)
