"""The public API's direct route to the CUDA kernel (``deep_gemm/_ops/eager.py``): taken only for plain eager CUDA
calls, and then indistinguishable from the dispatcher's route (result, version counters); everything that must see
the op (dispatch modes, fake tensors, the profiler, torch.compile, autograd) still goes through ``torch.ops``."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import deep_gemm
from deep_gemm._ops import eager, library
from deep_gemm.gemm.operands import dequantize
from deep_gemm.testing import calc_diff
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

from tolerances import TOLERANCES

TOL = TOLERANCES["kernel_fp8"]
PUBLIC_MODULES = ["deep_gemm.gemm.fp8_api", "deep_gemm.gemm.bf16_api", "deep_gemm.attention.api",
                  "deep_gemm.hyperconnection.api", "deep_gemm.einsum.api", "deep_gemm.layout.api"]


def _operands(m, n, k, device):
    a = per_token_cast_to_fp8(torch.randn(m, k, device=device, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, device=device, dtype=torch.bfloat16), use_ue8m0=False)
    return a, b


def _ref(a, b):
    return dequantize(a[0], a[1], (1, 128)) @ dequantize(b[0], b[1], (128, 128)).T


class _Counting:
    """An EagerOp whose direct route is counted (the op's real CUDA kernel still runs)."""

    def __init__(self, name):
        self.op = eager.EagerOp(name)
        self.direct_calls = 0
        kernel = library.cuda_kernel_of(name)

        def counted(*args):
            self.direct_calls += 1
            return kernel(*args)
        self.op._cuda = counted

    def __call__(self, *args):
        return self.op(*args)


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


# --- CPU: the rules that do not need a GPU -------------------------------------------------------------------------

def test_public_modules_call_through_the_eager_namespace():
    import importlib
    for name in PUBLIC_MODULES:
        assert importlib.import_module(name)._ops is eager.ops, name


def test_schema_facts_name_the_written_arguments():
    assert eager._schema_facts("fp8_gemm_nt") == ((4,), False)  # d is argument 4 and the only Tensor(a!)
    written, _ = eager._schema_facts("tf32_hc_prenorm_gemm")
    assert written == (2, 3)  # d and sqr_sum


def test_unknown_op_names_raise():
    with pytest.raises(AttributeError, match="no op named"):
        eager.ops.fp8_gemm_xx
    assert eager.ops.fp8_gemm_nt is eager.ops.fp8_gemm_nt.default


@pytest.mark.parametrize("make", [
    lambda: (torch.zeros(4),),                              # a CPU tensor: the dispatcher picks the CPU kernel
    lambda: (torch.zeros(4, device="meta"),),               # meta: the fake kernel
    lambda: (1, "nk", None),                                # no tensor at all
])
def test_non_cuda_calls_take_the_dispatcher(make):
    assert not eager._plain_cuda_call(make())


def test_cpu_calls_bump_the_written_tensor_once():
    a, b = _operands(16, 128, 256, "cpu")
    d = torch.empty(16, 128, dtype=torch.bfloat16)
    before = d._version
    deep_gemm.fp8_gemm_nt(a, b, d)
    assert d._version == before + 1
    assert calc_diff(d, _ref(a, b)) < TOL


# --- GPU: the direct route itself ----------------------------------------------------------------------------------

gpu = pytest.mark.gpu


@gpu
def test_plain_cuda_call_goes_direct_with_the_same_result_and_version():
    a, b = _operands(37, 256, 384, "cuda")
    op = _Counting("fp8_gemm_nt")
    d_direct = torch.empty(37, 256, device="cuda", dtype=torch.bfloat16)
    d_dispatch = torch.empty_like(d_direct)
    v_direct, v_dispatch = d_direct._version, d_dispatch._version
    op(a[0], a[1], b[0], b[1], d_direct)
    torch.ops.deep_gemm.fp8_gemm_nt(a[0], a[1], b[0], b[1], d_dispatch)
    assert op.direct_calls == 1
    assert torch.equal(d_direct, d_dispatch)
    assert d_direct._version - v_direct == d_dispatch._version - v_dispatch == 1
    assert calc_diff(d_direct, _ref(a, b)) < TOL


@gpu
def test_bad_arguments_raise_the_same_error_on_the_direct_route():
    a, b = _operands(16, 128, 256, "cuda")
    d = torch.empty(16, 64, device="cuda", dtype=torch.bfloat16)  # wrong N
    op = _Counting("fp8_gemm_nt")
    with pytest.raises(RuntimeError) as direct:
        op(a[0], a[1], b[0], b[1], d)
    with pytest.raises(RuntimeError) as dispatched:
        torch.ops.deep_gemm.fp8_gemm_nt(a[0], a[1], b[0], b[1], d)
    assert op.direct_calls == 1
    assert str(direct.value).splitlines()[0] == str(dispatched.value).splitlines()[0]


@gpu
def test_dispatch_modes_and_the_profiler_still_see_the_op():
    a, b = _operands(16, 128, 256, "cuda")
    d = torch.empty(16, 128, device="cuda", dtype=torch.bfloat16)
    op = _Counting("fp8_gemm_nt")
    with _Recorder() as recorder:
        op(a[0], a[1], b[0], b[1], d)
    assert "deep_gemm.fp8_gemm_nt.default" in recorder.seen
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        op(a[0], a[1], b[0], b[1], d)
    assert any(e.name == "deep_gemm::fp8_gemm_nt" for e in prof.events())
    assert op.direct_calls == 0


@gpu
def test_fake_tensors_and_autograd_inputs_take_the_dispatcher():
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = _Counting("fp8_gemm_nt")
    with FakeTensorMode():
        a, b = _operands(16, 128, 256, "cuda")
        op(a[0], a[1], b[0], b[1], torch.empty(16, 128, device="cuda", dtype=torch.bfloat16))
    a, b = _operands(16, 128, 256, "cuda")
    c = torch.zeros(16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    d = torch.empty(16, 128, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():  # c is only read; the dispatcher (not the direct route) decides what autograd does
        op(a[0], a[1], b[0], b[1], d, c)
    assert op.direct_calls == 0
    assert calc_diff(d, _ref(a, b)) < TOL


@gpu
def test_compiled_public_call_holds_the_op():
    a, b = _operands(64, 256, 256, "cuda")

    def block(x_fp8, x_sf, w_fp8, w_sf):
        d = torch.empty(x_fp8.size(0), w_fp8.size(0), device="cuda", dtype=torch.bfloat16)
        deep_gemm.fp8_gemm_nt((x_fp8, x_sf), (w_fp8, w_sf), d)
        return d.float()

    gm = torch.fx.experimental.proxy_tensor.make_fx(block, tracing_mode="fake")(a[0], a[1], b[0], b[1])
    assert any(n.target is torch.ops.deep_gemm.fp8_gemm_nt.default for n in gm.graph.nodes)
    got = torch.compile(block, fullgraph=True)(a[0], a[1], b[0], b[1])
    assert calc_diff(got, _ref(a, b)) < TOL


@gpu
def test_direct_route_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(eager, "DIRECT_ENABLED", False)
    op = _Counting("fp8_gemm_nt")
    a, b = _operands(16, 128, 256, "cuda")
    d = torch.empty(16, 128, device="cuda", dtype=torch.bfloat16)
    op(a[0], a[1], b[0], b[1], d)
    assert op.direct_calls == 0
    assert calc_diff(d, _ref(a, b)) < TOL
