"""The eager path (``core/eager.eager_op``): public wrappers call an op's CUDA kernel without the dispatcher for
plain eager calls, and hand everything else to the dispatcher op.

On CPU the eager path's CUDA test is inverted (``cpu_as_cuda``: the same function with ``x.is_cuda`` negated), so
the CPU tensors of these tests take the path the GPU's CUDA tensors take; the kernel behind it is the op's CUDA
kernel (the Triton launcher, in the interpreter). Checked: it is taken exactly when the call is plain; it gives the
dispatcher path's results and errors (nothing written before an error); new data at the same metadata is honoured;
concurrent calls; torch.compile, FakeTensorMode and torch function/dispatch modes go through the op.
"""

from __future__ import annotations

import threading

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import deep_gemm
from deep_gemm.core import eager, registry
from deep_gemm.core.errors import DeepGEMMError

M, N, K = 5, 8, 128


@pytest.fixture
def cpu_as_cuda(eager_calls):
    """Make CPU tensors eligible for the eager path and count the calls that took it (conftest's eager_calls)."""
    return eager_calls("tf32_hc_prenorm_gemm")


def _hc_inputs(seed: int = 0, m: int = M):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, K, generator=g).to(torch.bfloat16)
    b = torch.randn(N, K, generator=g)
    return a, b, torch.full((m, N), 7.0), torch.full((m,), 7.0)


def _launcher_result(a, b, num_splits=None):
    """What the op's CUDA kernel computes for these inputs (the dispatcher's CPU kernel is the reference)."""
    d = torch.empty(M, N) if num_splits is None else torch.empty(num_splits, M, N)
    s = torch.empty(M) if num_splits is None else torch.empty(num_splits, M)
    registry.run_launcher("tf32_hc_prenorm_gemm", a, b, d, s, num_splits)
    return d, s


def test_eager_signature_is_the_memo_signature(cpu_as_cuda):
    a, b, d, s = _hc_inputs()
    for args in [(a, b, d, s, None), (a, b, d, s, 3), (a[1:], b, d[1:], s[1:], None), (a, [1, 2], 2.5, "nk", True)]:
        assert eager._eager_signature(args) == registry._signature(args)


def test_generated_signatures_are_the_eager_signature(cpu_as_cuda, monkeypatch):
    """Each op's generated signature (eager._specialised_eager_signature) gives ``_eager_signature``'s key: on its
    fast case (here with the device test inverted, as cpu_as_cuda inverts the generic one) and on every call it
    hands to the generic function (lists, a given optional tensor, other devices, wrong types, other lengths)."""
    monkeypatch.setattr(eager, "_EAGER_DEVICE_TEST", "is_cpu")
    a, b, d, s = _hc_inputs()
    hc = eager._specialised_eager_signature(registry.kernels_of("tf32_hc_prenorm_gemm").binder.kinds)
    masked_kinds = registry.kernels_of("m_grouped_fp8_gemm_nt_masked").binder.kinds
    masked = eager._specialised_eager_signature(masked_kinds)
    fp8 = eager._specialised_eager_signature(registry.kernels_of("fp8_gemm_nt").binder.kinds)
    g = torch.empty(2, 16, 128).to(torch.float8_e4m3fn)
    masked_args = (g, torch.empty(2, 16, 1), g[:, :8], torch.empty(2, 1, 1),
                   torch.empty(2, 16, 8, dtype=torch.bfloat16), torch.empty(2, dtype=torch.int32), 4, None, None, None,
                   "nk", False)
    w = torch.empty(4, 128, requires_grad=True)
    cases = [(hc, (a, b, d, s, None)), (hc, (a, b, d, s, 3)), (hc, (a[1:], b, d[1:], s[1:], None)),
             (hc, (a, b, d, s)), (hc, (a, [1, 2], 2.5, "nk", True)), (hc, (a, b, None, s, None)),
             (hc, (a, w, d, s, None)), (hc, (a.to("meta"), b, d, s, None)),
             (masked, masked_args), (masked, masked_args[:7] + ([1, 128, 128], None, None, "nk", False)),
             (fp8, (g[0], torch.empty(16, 1), g[1], torch.empty(1, 1), d, None, None, None, None, "nk", False)),
             (fp8, (g[0], torch.empty(16, 1), g[1], torch.empty(1, 1), d, d, None, None, None, "nk", False))]
    for fn, args in cases:
        assert fn(args) == eager._eager_signature(args)
    with torch.no_grad():
        assert hc((a, w, d, s, None)) == eager._eager_signature((a, w, d, s, None)) is not None


def test_eager_path_taken_and_equal_to_the_cuda_kernel(cpu_as_cuda):
    a, b, d, s = _hc_inputs()
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert len(cpu_as_cuda) == 1
    want_d, want_s = _launcher_result(a, b)
    assert torch.equal(d, want_d) and torch.equal(s, want_s)
    d3, s3 = torch.empty(2, M, N), torch.empty(2, M)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d3, s3, num_splits=2)
    want_d3, want_s3 = _launcher_result(a, b, 2)
    assert len(cpu_as_cuda) == 2 and torch.equal(d3, want_d3) and torch.equal(s3, want_s3)


def test_new_data_at_the_same_metadata(cpu_as_cuda):
    """The second call shares the first's signature token (and any plan) but must compute on its own tensors."""
    first, second = _hc_inputs(1), _hc_inputs(2)
    deep_gemm.tf32_hc_prenorm_gemm(*first)
    deep_gemm.tf32_hc_prenorm_gemm(*second)
    assert len(cpu_as_cuda) == 2 and cpu_as_cuda[0] == cpu_as_cuda[1] is not None
    for a, b, d, s in (first, second):
        want_d, want_s = _launcher_result(a, b)
        assert torch.equal(d, want_d) and torch.equal(s, want_s)


@pytest.mark.parametrize("bad", ["dtype", "shape", "splits"])
def test_same_errors_as_the_dispatcher_and_nothing_written(cpu_as_cuda, bad):
    a, b, d, s = _hc_inputs()
    num_splits = None
    if bad == "dtype":
        b = b.double()
    elif bad == "shape":
        d = torch.full((M, N + 8), 7.0)
    else:
        num_splits = 0
    with pytest.raises(DeepGEMMError) as via_dispatcher:
        torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(a, b, d, s, num_splits)
    with pytest.raises(DeepGEMMError) as via_eager:
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s, num_splits)
    assert str(via_eager.value) == str(via_dispatcher.value)
    assert len(cpu_as_cuda) == 0  # the check raised before the kernel ran
    assert bool((d == 7.0).all()) and bool((s == 7.0).all())


def test_falls_back_to_the_dispatcher(cpu_as_cuda, monkeypatch):
    a, b, d, s = _hc_inputs()
    want_d, want_s = d.clone(), s.clone()
    torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default(a, b, want_d, want_s, None)  # the CPU reference

    class Passing(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Counting(TorchDispatchMode):
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Passing():
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    with Counting():
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert "deep_gemm.tf32_hc_prenorm_gemm.default" in Counting.ops
    b_grad = b.clone().requires_grad_(True)
    deep_gemm.tf32_hc_prenorm_gemm(a, b_grad, d, s)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    monkeypatch.setattr(eager, "_is_compiling", lambda: True)
    deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
    assert cpu_as_cuda == []  # every call above went through the dispatcher (whose CPU kernel is the reference)
    assert torch.equal(d, want_d) and torch.equal(s, want_s)
    monkeypatch.undo()
    with torch.no_grad():  # requires_grad without grad mode: plain
        deep_gemm.tf32_hc_prenorm_gemm(a, b_grad, d, s)


def test_fake_tensors_and_compile_go_through_the_op(hc_compiled_graph):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b = torch.empty(M, K, dtype=torch.bfloat16), torch.empty(N, K)
        d, s = torch.empty(M, N), torch.empty(M)
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)  # the fake kernel: check only
        with pytest.raises(DeepGEMMError):
            deep_gemm.tf32_hc_prenorm_gemm(a, b, torch.empty(M, N + 8), s)
    a, b, d, s = _hc_inputs()
    assert "deep_gemm.tf32_hc_prenorm_gemm.default" in hc_compiled_graph(a, b, d, s)


def test_threads(cpu_as_cuda):
    inputs = [_hc_inputs(10 + i) for i in range(4)]
    wants = [_launcher_result(a, b) for a, b, _, _ in inputs]
    errors = []

    def worker(i):
        try:
            a, b, d, s = inputs[i]
            for _ in range(2):
                deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cpu_as_cuda) == 8
    for (_, _, d, s), (want_d, want_s) in zip(inputs, wants):
        assert torch.equal(d, want_d) and torch.equal(s, want_s)


def test_every_public_wrapper_uses_the_eager_path():
    """The families' wrappers reach the ops through ``eager_ops`` (one mechanism), not ``torch.ops`` directly."""
    from deep_gemm.einsum import api as einsum_api
    from deep_gemm.gemm.bf16 import api as bf16_api
    from deep_gemm.gemm.fp8 import api as fp8_api
    from deep_gemm.hyperconnection import api as hc_api
    from deep_gemm.layout import api as layout_api
    for module in (fp8_api, bf16_api, hc_api, einsum_api, layout_api):
        assert module._ops is eager.eager_ops, module.__name__
    assert eager.eager_ops.fp8_gemm_nt.default.op is torch.ops.deep_gemm.fp8_gemm_nt.default


def test_eager_path_can_be_turned_off(monkeypatch):
    """DG_NO_EAGER_PATH=1 (read at import) makes eager_op hand out the dispatcher op itself."""
    monkeypatch.setattr(eager, "_EAGER_PATH", False)
    assert eager.eager_op("tf32_hc_prenorm_gemm") is torch.ops.deep_gemm.tf32_hc_prenorm_gemm.default


# torch.jit.trace is deprecated but still what older integrations call: the test uses it on purpose.
@pytest.mark.filterwarnings("ignore:`torch.jit.trace` is deprecated:DeprecationWarning")
def test_jit_trace_records_the_op(cpu_as_cuda):
    """torch.jit.trace records dispatcher ops: a traced call must go through the op (and appear in the graph)."""
    a, b, d, s = _hc_inputs()

    def step(a, b, d, s):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
        return s + 0

    traced = torch.jit.trace(step, (a, b, d, s), check_trace=False)
    assert cpu_as_cuda == []
    assert "deep_gemm::tf32_hc_prenorm_gemm" in str(traced.graph)
