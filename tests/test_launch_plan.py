"""The host fast path: memoised argument checks (core/registry.py) and launch plans (core/launch.py).

Runs on CPU with the GPU pieces stubbed (no kernel is launched): what matters here is that a replayed plan hands
the kernel exactly the arguments a fresh launch would, that a check memo never lets bad input through, and that
plans refuse what they cannot re-derive. The GPU tests check replayed results against the reference."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import deep_gemm
import deep_gemm.core.launch as launch_mod
from deep_gemm._internals import torch_api
from deep_gemm.core.plans import PlanCache
from deep_gemm.core import registry
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.gemm.fp8 import launch as fp8_launch
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8


COMPILED = SimpleNamespace(n_spills=0)


@pytest.fixture
def stubbed_gpu(monkeypatch):
    """Pretend to run on a GPU host: compile nothing, launch nothing, record every launch's arguments."""
    launched = []
    monkeypatch.setattr(fp8_launch, "interpreting", lambda: False)
    monkeypatch.setattr(launch_mod, "interpreting", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch_mod, "_ensure_context", lambda index: None)
    monkeypatch.setattr(launch_mod, "launch_compiled", lambda compiled, grid, args, dev: launched.append((grid, args)))
    # (a loaded kernel that spills nothing: the warp-specialised launcher reads n_spills to pick a register budget)
    monkeypatch.setattr(launch_mod.KERNEL_CACHE, "get", lambda key: COMPILED)
    monkeypatch.setattr(fp8_launch, "usable_sms", lambda: 132)
    monkeypatch.setattr(fp8_launch, "PLANS", PlanCache())
    monkeypatch.setattr(fp8_launch, "_WS_BUDGETS", {})  # (budgets chosen from stub kernels stay here)
    return launched


def _operands(m, n, k, seed):
    torch.manual_seed(seed)
    a = per_token_cast_to_fp8(torch.randn(m, k, dtype=torch.bfloat16), use_ue8m0=False)
    b = per_block_cast_to_fp8(torch.randn(n, k, dtype=torch.bfloat16), use_ue8m0=False)
    return a, b, torch.empty(m, n, dtype=torch.bfloat16)


def _call(a, b, d, signature=True):
    kernels = registry.kernels_of("fp8_gemm_nt")
    full = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])((a[0], a[1], b[0], b[1], d, None, None, None, None,
                                                             "nk", False), {})
    sig = kernels.checked(full)
    kernels.triton_fn()(*full, signature=sig if signature else None)


def _same_args(x, y, tensors_x, tensors_y):
    """x and y are launch argument tuples; tensors_x[i] in x must correspond to tensors_y[i] in y."""
    assert len(x) == len(y)
    for u, v in zip(x, y):
        if isinstance(u, torch.Tensor):
            i = next(i for i, t in enumerate(tensors_x) if t is u)
            assert v is tensors_y[i]
        elif isinstance(u, launch_mod.FastDescriptor):
            i = next(i for i, t in enumerate(tensors_x) if t is u.base)
            assert v.base is tensors_y[i]
            assert (u.shape, u.strides, u.block_shape, u.gluon) == (v.shape, v.strides, v.block_shape, v.gluon)
        else:
            assert u == v


@pytest.mark.parametrize("m,n,k", [(16, 128, 128), (1, 2112, 7168), (4096, 576, 256)])
def test_replayed_plan_passes_the_arguments_a_fresh_launch_would(stubbed_gpu, m, n, k):
    first = _operands(m, n, k, 0)
    _call(*first)  # records the plan
    assert len(fp8_launch.PLANS) == 1
    second = _operands(m, n, k, 1)
    _call(*second)  # replays it
    _call(*second, signature=False)  # the full path, for comparison
    (grid_plan, replayed), (grid_fresh, fresh) = stubbed_gpu[1], stubbed_gpu[2]
    assert grid_plan == grid_fresh
    ts = (second[0][0], second[0][1], second[1][0], second[1][1], second[2])
    scratch = [i for i, u in enumerate(fresh) if isinstance(u, torch.Tensor) and not any(u is t for t in ts)]
    if scratch:  # split-K workspace / counters: same metadata, the workspace freshly allocated per call
        for i in scratch:
            assert replayed[i].shape == fresh[i].shape and replayed[i].dtype == fresh[i].dtype
        keep = [i for i in range(len(fresh)) if i not in scratch]
        _same_args([fresh[i] for i in keep], [replayed[i] for i in keep], ts, ts)
    else:
        _same_args(fresh, replayed, ts, ts)


def test_aliased_arguments_get_their_own_plans(stubbed_gpu):
    """c is d and c separate have the same metadata signature but different argument slots."""
    a, b, d = _operands(256, 128, 128, 0)
    kernels = registry.kernels_of("fp8_gemm_nt")
    binder = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])

    def call(c, d):
        full = binder((a[0], a[1], b[0], b[1], d, c, None, None, None, "nk", False), {})
        kernels.triton_fn()(*full, signature=kernels.checked(full))
        return stubbed_gpu[-1][1]
    args_alias = call(d, d)
    c = torch.zeros_like(d)
    args_separate = call(c, d)
    assert len(fp8_launch.PLANS) == 2
    assert any(x is c for x in args_separate) and not any(x is c for x in args_alias)
    # And replays keep them apart.
    assert any(x is c for x in call(c, d))
    assert not any(x is c for x in call(d, d))


def test_clearing_the_kernel_cache_retires_plans(stubbed_gpu):
    a, b, d = _operands(16, 128, 128, 0)
    _call(a, b, d)
    keys_before = set(fp8_launch.PLANS)
    deep_gemm.get_jit().clear()
    _call(a, b, d)
    assert set(fp8_launch.PLANS) - keys_before  # a new plan, recorded after the clear


def test_plan_refuses_tensors_it_cannot_rederive(stubbed_gpu):
    x, y = torch.zeros(4), torch.zeros(4)
    record = [("compiled", (1, 1, 1), (x, y, 3), 0)]
    assert launch_mod.LaunchPlan.from_record(record, (x,)) is None  # y made inside the launcher
    assert launch_mod.LaunchPlan.from_record(record, (x,), persistent=(y,)) is not None
    assert launch_mod.LaunchPlan.from_record(record, (x, y)).tensor_slots == [(0, 0), (1, 1)]
    assert launch_mod.LaunchPlan.from_record(record + record, (x, y)) is None  # two launches


def test_memoised_check_still_rejects_bad_input():
    a, b, d = _operands(16, 128, 128, 0)
    deep_gemm.fp8_gemm_nt(a, b, d)  # CPU reference; the CUDA kernel memoises the same way
    kernels = registry.kernels_of("fp8_gemm_nt")
    binder = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])
    good = binder((a[0], a[1], b[0], b[1], d, None, None, None, None, "nk", False), {})
    kernels.checked(good)
    kernels.checked(good)  # memoised
    bad_d = torch.empty(16, 64, dtype=torch.bfloat16)
    with pytest.raises(DeepGEMMError, match="d: expected shape"):
        kernels.checked(binder((a[0], a[1], b[0], b[1], bad_d, None, None, None, None, "nk", False), {}))
    # Same shape, strides and dtype as the memoised call, but A starts off a 16-byte boundary: TMA cannot load it.
    misaligned = torch.empty(16 * 128 + 16, dtype=a[0].dtype)[1:1 + 16 * 128].view(16, 128)
    misaligned.copy_(a[0])
    with pytest.raises(DeepGEMMError, match="16-byte aligned start"):
        kernels.checked(binder((misaligned, a[1], b[0], b[1], d, None, None, None, None, "nk", False), {}))


def test_knob_changes_invalidate_memoised_signatures():
    kernels = registry.kernels_of("fp8_gemm_nt")
    a, b, d = _operands(16, 128, 128, 0)
    full = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])((a[0], a[1], b[0], b[1], d, None, None, None, None,
                                                             "nk", False), {})
    before = kernels.checked(full)
    deep_gemm.set_pdl(deep_gemm.get_pdl())
    assert kernels.checked(full) != before


def test_replays_pick_each_tokens_tensors_by_position(stubbed_gpu):
    """plans.replayable picks a replay's inputs by the positions its signature token fixes (plans.TensorPicker): a
    token whose optional argument is a tensor, and one whose is None, each get their own positions and plans, and a
    replay hands the kernel the new call's tensors."""
    from deep_gemm.core.plans import TensorPicker, replayable

    assert TensorPicker((1, torch.empty(1), None, "x", torch.empty(2))).take((0, "a", 1, 2, "b")) == ("a", "b")
    assert TensorPicker((None, torch.empty(1))).take(("x", "y")) == ("y",)
    assert TensorPicker((None, 3)).take((1, 2)) == ()
    fresh = []

    def launcher(x, c, n, *, recorder=None):
        fresh.append(c is None)
        args = (x, c if c is not None else x, n)
        launch_mod.launch(None, (1, 1, 1), args, name="probe", config_key=(c is None,), num_warps=4,
                          record=recorder.launches)

    run = replayable("probe")(launcher)
    x, c = torch.empty(4), torch.empty(4)
    run(x, None, 3, signature="no c")  # records
    run(x, c, 3, signature="with c")  # records: a tensor where the first token had None
    assert len(run.plans) == 2 and fresh == [True, False]
    x2, c2 = torch.empty(4), torch.empty(4)
    run(x2, None, 3, signature="no c")  # replays
    assert stubbed_gpu[-1][1][0] is x2 and stubbed_gpu[-1][1][1] is x2
    run(x2, c2, 3, signature="with c")  # replays
    assert len(run.plans) == 2 and fresh == [True, False]  # no launcher call: both replayed
    got = stubbed_gpu[-1][1]
    assert got[0] is x2 and got[1] is c2 and got[2] == 3


def test_only_alike_tensors_are_tested_for_aliasing():
    """A token whose tensors all differ in shape, strides, dtype or device cannot see one object twice (equal tokens,
    equal metadata), so its replays skip ``aliasing``; alike tensors keep the test, and aliased calls get plans
    of their own."""
    from deep_gemm.core.plans import TensorPicker

    a, b = torch.empty(4, 8), torch.empty(8, 4)
    assert not TensorPicker((a, b, None, 3)).may_alias
    assert not TensorPicker((a, a.t().contiguous().t(), a.to(torch.bfloat16))).may_alias  # (strides, dtype)
    c = torch.empty(4, 8)
    assert TensorPicker((a, b, c)).may_alias  # a and c are alike: they may be one object at another call
    assert TensorPicker((a, b, a)).may_alias


def test_run_cuda_calls_replayable_launchers_positionally(stubbed_gpu, monkeypatch):
    """OpKernels.run_cuda hands a token to a replayable launcher's ``call(full, token)`` (no keyword or argument
    packs); a call without a token (arguments that cannot be keyed) still takes ``launcher(*full, signature=None)``,
    the full path, which records nothing."""
    from deep_gemm.core.plans import replayable

    seen = []

    def launcher(x, n, *, recorder=None):
        seen.append(recorder is not None)
        launch_mod.launch(None, (1, 1, 1), (x, n), name="probe", config_key=(), num_warps=4,
                          record=recorder.launches if recorder is not None else None)

    run = replayable("probe")(launcher)
    kernels = registry.OpKernels("probe", check=lambda *a: None, reference=lambda *a: "reference", triton=run)
    assert kernels._call == (run, run.call)
    x = torch.empty(4)
    kernels.run_cuda((x, 3), None)
    assert seen == [False] and len(run.plans) == 0
    kernels.run_cuda((x, 3), "token")  # records
    kernels.run_cuda((torch.empty(4), 3), "token")  # replays
    assert seen == [False, True] and len(run.plans) == 1 and len(stubbed_gpu) == 3


class _CudaLooking(torch.Tensor):
    """A CPU tensor that reports itself as a CUDA tensor of device 0 (what the replay path reads of its anchor)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def is_cuda(self):
        return True

    def get_device(self):
        return 0


@pytest.fixture
def fake_streams(monkeypatch):
    """The current raw stream and whether it captures, as the test sets them; counts the capture queries."""
    state = SimpleNamespace(stream=0, capturing=False, queries=0)

    def is_capturing():
        state.queries += 1
        return state.capturing
    monkeypatch.setattr(torch_api, "current_raw_stream", lambda index: state.stream)
    monkeypatch.setattr(torch_api, "is_current_stream_capturing", is_capturing)
    return state


def test_capture_test_skips_the_legacy_default_stream(fake_streams):
    """scratch.stream_capturing: CPU (None) and the legacy default stream (0, which no capture can include) are
    answered without asking CUDA; any other stream asks."""
    from deep_gemm.core.scratch import LEGACY_DEFAULT_STREAM, capturing, stream_capturing

    fake_streams.capturing = True
    assert not stream_capturing(None) and not stream_capturing(LEGACY_DEFAULT_STREAM)
    assert not capturing(torch.empty(1))  # a CPU tensor
    assert not capturing(torch.empty(1).as_subclass(_CudaLooking))  # on the default stream
    assert fake_streams.queries == 0
    fake_streams.stream = 7
    assert stream_capturing(7) and capturing(torch.empty(1).as_subclass(_CudaLooking))
    fake_streams.capturing = False
    assert not stream_capturing(7)
    assert fake_streams.queries == 3


@pytest.mark.parametrize("keyword", [False, True], ids=["call", "run with launcher keywords"])
def test_plans_that_keep_buffers_replay_outside_captures_only(stubbed_gpu, fake_streams, keyword):
    """A plan holding persistent buffers (split-K counters, the HC workspace) replays on the default stream without
    a capture query; on another stream it asks on every replay, replays when not capturing, and when capturing runs
    the launcher (fresh buffers, nothing recorded), so the captured graph never shares the stream's buffers."""
    from deep_gemm.core.plans import replayable

    launches = []

    def launcher(x, n, *, recorder=None, tag=None):
        launches.append(fake_streams.capturing)
        kept = torch.zeros(4)  # (stands for the per-stream counters)
        if recorder is not None:
            recorder.persistent.append(kept)
        launch_mod.launch(None, (1, 1, 1), (x, kept, n), name="probe", config_key=(), num_warps=4,
                          record=recorder.launches if recorder is not None else None)

    run = replayable("probe")(launcher)
    extra = {"tag": "t"} if keyword else {}

    def call():
        run(torch.empty(4).as_subclass(_CudaLooking), 3, signature="token", **extra)

    call()  # records on the default stream
    fake_streams.capturing = True  # (a capture elsewhere: the default stream is never part of it)
    call()
    assert launches == [False] and len(stubbed_gpu) == 2 and fake_streams.queries == 0
    fake_streams.stream, fake_streams.capturing = 7, False
    call()  # records for stream 7
    call()  # replays after one query
    assert launches == [False, False] and len(run.plans) == 2 and fake_streams.queries >= 1
    queries = fake_streams.queries
    fake_streams.capturing = True
    call()  # captured: the launcher runs, and records nothing
    assert launches == [False, False, True] and len(run.plans) == 2 and fake_streams.queries > queries
