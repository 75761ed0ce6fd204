"""The layout family's host fast path: the public ``transform_sf_into_required_layout`` decides "return the input as
is" once per signature token (``layout/api.py``) instead of re-running the op's check on every call, and the layout
launchers replay their launch per signature (``core/plans.replayable_allocating``).

Checked on CPU: the eager path (CPU tensors made eligible, as in ``test_eager_path_cpu.py``) gives the dispatcher path's
results and errors, a cached decision never survives a change of strides, dtype or recipe, fake tensors and modes
still go through the op; with the GPU stubbed, a replayed launch passes the kernel what a fresh launch would."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import deep_gemm
import deep_gemm.core.launch as launch_mod
import deep_gemm.core.plans as plans_mod
from deep_gemm.core import eager, registry
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.layout import reference as ref

NAME = "transform_sf_into_required_layout"


@pytest.fixture
def cpu_as_cuda(eager_calls):
    """Make CPU tensors eligible for the eager path and count the calls that took it (conftest's eager_calls)."""
    return eager_calls(NAME)


def _reference(sf, mn, k, recipe, groups=None, is_sfa=None):
    return ref.transform_sf_into_required_layout_reference(sf, mn, k, list(recipe), groups, is_sfa, False, None)


def test_cached_identity_decision_follows_strides_dtype_and_recipe(cpu_as_cuda):
    mn, k = 8, 512
    k_major = torch.randn(mn, k // 128)
    mn_major = torch.randn(k // 128, mn).T  # same shape, already MN-major and TMA-aligned
    for _ in range(2):  # second round: every decision comes from the cache
        out = deep_gemm.transform_sf_into_required_layout(k_major, mn, k, (1, 128))
        assert out is not k_major and out.stride() == (1, 8) and torch.equal(out, k_major)
        assert deep_gemm.transform_sf_into_required_layout(mn_major, mn, k, (1, 128)) is mn_major
        # Same tensor, other recipes: (128, 128) block scales are kept as laid out; SFB of (1, 128, 128) is (128, 128)
        blocks = torch.randn(1, k // 128)
        assert deep_gemm.transform_sf_into_required_layout(blocks, mn, k, (1, 128, 128), is_sfa=False) is blocks
        out = deep_gemm.transform_sf_into_required_layout(k_major, mn, k, (1, 128, 128), is_sfa=True)
        assert out is not k_major and torch.equal(out, _reference(k_major, mn, k, (1, 128, 128), None, True))
        # Packed int32 scales, MN-major: kept.
        packed = torch.zeros(k // 512, mn, dtype=torch.int32).T
        assert deep_gemm.transform_sf_into_required_layout(packed, mn, k, (1, 128)) is packed
    assert len(cpu_as_cuda) == 4  # only the two copies per round reached the kernel


def test_mn_major_helper_caches_its_decision_per_signature(cpu_as_cuda):
    aligned = torch.randn(2, 5, 8).transpose(1, 2)  # [2, 8, 5], MN-major, 8 % 4 == 0, dense groups
    k_major = torch.randn(2, 8, 5)  # same shape, other strides
    gapped = torch.randn(3, 5, 8).transpose(1, 2)[::2]  # MN-major but groups not dense
    for _ in range(2):
        assert deep_gemm.get_mn_major_tma_aligned_tensor(aligned) is aligned
        for sf in (k_major, gapped):
            out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
            assert out is not sf and out.stride() == (40, 1, 8) and torch.equal(out, sf)
    with pytest.raises(DeepGEMMError) as via_dispatcher:
        torch.ops.deep_gemm.get_mn_major_tma_aligned_tensor.default(k_major.double())
    with pytest.raises(DeepGEMMError) as via_public:
        deep_gemm.get_mn_major_tma_aligned_tensor(k_major.double())
    assert str(via_public.value) == str(via_dispatcher.value)


def test_new_data_at_the_same_signature(cpu_as_cuda):
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        sf = torch.randn(2, 5, 3, generator=g)
        out = deep_gemm.transform_sf_into_required_layout(sf, 5, 384, (1, 128), num_groups=2)
        want = _reference(sf, 5, 384, (1, 128), 2)
        assert out.stride() == want.stride() == (24, 1, 8)
        assert torch.equal(out.view(torch.int32), want.view(torch.int32))
    assert len(cpu_as_cuda) == 3 and len(set(cpu_as_cuda)) == 1


@pytest.mark.parametrize("bad", ["shape", "dtype", "recipe", "is_sfa"])
def test_same_errors_as_the_dispatcher(cpu_as_cuda, bad):
    sf, mn, k, recipe, is_sfa = torch.randn(8, 4), 8, 512, [1, 128], None
    deep_gemm.transform_sf_into_required_layout(sf, mn, k, recipe)  # a good call first: its signature is cached
    before = len(cpu_as_cuda)
    if bad == "shape":
        sf = torch.randn(8, 5)
    elif bad == "dtype":
        sf = sf.double()
    elif bad == "recipe":
        recipe = [2, 64]
    else:
        is_sfa = True
    with pytest.raises(DeepGEMMError) as via_dispatcher:
        torch.ops.deep_gemm.transform_sf_into_required_layout.default(sf, mn, k, recipe, None, is_sfa, False, None)
    for _ in range(2):  # a failing signature is never cached
        with pytest.raises(DeepGEMMError) as via_public:
            deep_gemm.transform_sf_into_required_layout(sf, mn, k, recipe, is_sfa=is_sfa)
        assert str(via_public.value) == str(via_dispatcher.value)
    assert len(cpu_as_cuda) == before


def test_modes_and_fake_tensors_go_through_the_op(cpu_as_cuda, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        sf = torch.empty(8, 4)
        out = deep_gemm.transform_sf_into_required_layout(sf, 8, 512, (1, 128))
        assert out.shape == (8, 4) and out.stride() == (1, 8)
        mn_major = torch.empty(4, 8).T
        assert deep_gemm.transform_sf_into_required_layout(mn_major, 8, 512, (1, 128)) is mn_major
        with pytest.raises(DeepGEMMError):
            deep_gemm.transform_sf_into_required_layout(torch.empty(8, 5), 8, 512, (1, 128))
    sf = torch.randn(8, 4)
    monkeypatch.setattr(eager, "_is_compiling", lambda: True)
    out = deep_gemm.transform_sf_into_required_layout(sf, 8, 512, (1, 128))
    assert torch.equal(out, sf) and out.stride() == (1, 8)
    assert cpu_as_cuda == []


def test_eager_checked_declines_what_eager_op_declines(cpu_as_cuda, monkeypatch):
    sf = torch.randn(8, 4)
    args = (sf, 8, 512, [1, 128], None, None, False, None)
    kernels, full, token = eager.eager_checked(NAME, args)
    assert kernels is registry.kernels_of(NAME) and full == args
    assert token == kernels.checked(full)  # the dispatcher path's token: shared memo and plans
    assert eager.eager_checked(NAME, (None, 8, 512, [1, 128], None, None, False, None)) is None  # no tensor
    assert eager.eager_checked(NAME, (sf.requires_grad_(True), *args[1:])) is None
    monkeypatch.setattr(eager, "_EAGER_PATH", False)
    assert eager.eager_checked(NAME, args) is None


# ---- replay of the layout launchers, GPU stubbed -------------------------------------------------------------------

@pytest.fixture
def stubbed_gpu(monkeypatch):
    """Pretend to run on a GPU host: compile nothing, launch nothing, record every launch's arguments."""
    launched = []
    monkeypatch.setattr(launch_mod, "interpreting", lambda: False)
    monkeypatch.setattr(plans_mod, "interpreting", lambda: False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch_mod, "_ensure_context", lambda index: None)
    monkeypatch.setattr(launch_mod, "launch_compiled", lambda compiled, grid, args, dev: launched.append((grid, args)))
    monkeypatch.setattr(launch_mod.KERNEL_CACHE, "get", lambda key: SimpleNamespace(n_spills=0))
    return launched


def _same_launch(fresh, replayed, fresh_inputs, replayed_inputs):
    """Two launches' arguments agree: scalars equal, each tensor over the same input at the same place and layout."""
    (grid_f, args_f), (grid_r, args_r) = fresh, replayed
    assert grid_f == grid_r and len(args_f) == len(args_r)
    for u, v in zip(args_f, args_r):
        if isinstance(u, torch.Tensor):
            (i,) = [i for i, t in enumerate(fresh_inputs) if t.untyped_storage().data_ptr() ==
                    u.untyped_storage().data_ptr()]
            if type(v) is int:  # a view the replay passes as its address (LaunchPlan._launch)
                assert v - replayed_inputs[i].data_ptr() == u.data_ptr() - fresh_inputs[i].data_ptr()
                continue
            assert v.untyped_storage().data_ptr() == replayed_inputs[i].untyped_storage().data_ptr()
            assert (u.data_ptr() - fresh_inputs[i].data_ptr()) == (v.data_ptr() - replayed_inputs[i].data_ptr())
            assert (u.shape, u.stride(), u.dtype) == (v.shape, v.stride(), v.dtype)
        else:
            assert u == v


@pytest.mark.parametrize("name,args", [
    (NAME, (torch.randn(6, 4), 6, 512, [1, 128], None, None, False, None)),
    (NAME, (torch.randn(4, 6).T, 6, 512, [1, 128], None, None, False, None)),
    (NAME, (torch.randn(2, 5, 3), 5, 384, [1, 1, 128], 2, False, False, None)),
    (NAME, (torch.zeros(2, 3, 8, dtype=torch.int32).transpose(1, 2), 8, 1536, [1, 128], 2, None, False, None)),
    ("get_mn_major_tma_aligned_tensor", (torch.randn(3, 7, 5),)),
    ("get_mn_major_tma_aligned_packed_ue8m0_tensor", (torch.randn(9, 6), None)),
])
def test_replayed_layout_launch_passes_what_a_fresh_launch_would(stubbed_gpu, name, args):
    kernels = registry.kernels_of(name)
    launcher = kernels.triton
    token = kernels.checked(args)
    plans_before = len(launcher.plans)
    first = launcher(*args, signature=token)  # records the plan
    assert len(launcher.plans) == plans_before + 1 and len(stubbed_gpu) == 1
    second = tuple(torch.empty_strided(a.shape, a.stride(), dtype=a.dtype).copy_(a) if isinstance(a, torch.Tensor)
                   else a for a in args)
    replayed = launcher(*second, signature=kernels.checked(second))
    fresh = launcher(*second)  # no signature: the full path
    assert len(stubbed_gpu) == 3 and len(launcher.plans) == plans_before + 1
    for out in (first, replayed):
        assert (out.shape, out.stride(), out.dtype) == (fresh.shape, fresh.stride(), fresh.dtype)
    _same_launch(stubbed_gpu[2], stubbed_gpu[1], (second[0], fresh), (second[0], replayed))


def test_no_plan_without_a_launch(stubbed_gpu):
    kernels = registry.kernels_of(NAME)
    for args in [(torch.randn(0, 4), 0, 512, [1, 128], None, None, False, None),  # empty: nothing launched
                 (torch.randn(2, 4), 200, 512, [128, 128], None, None, False, None)]:  # (128, 128): the reference
        before = len(kernels.triton.plans)
        for _ in range(2):
            out = kernels.run_cuda(args, kernels.checked(args))
            assert torch.equal(out, args[0])
        assert len(kernels.triton.plans) == before and stubbed_gpu == []


@pytest.mark.parametrize("shape,stride,numel", [
    ((5, 3), (3, 1), 15), ((5, 3), (1, 8), 24), ((2, 5, 3), (24, 1, 8), 48), ((4, 6), (6, 1), 24),
    ((4, 6), (256, 1), 1024),  # rows of a padded buffer: storage beyond the last element
    ((4, 6), (8, 1), 30),  # unpadded last row
    ((0, 6), (6, 1), 0), ((), (), 1), ((7,), (1,), 7),
])
def test_allocating_replay_allocates_what_it_recorded(shape, stride, numel):
    recorded = torch.empty(numel).as_strided(shape, stride)
    replay = plans_mod._AllocatingReplay(recorded, [])
    out = replay.run(())
    assert (out.shape, out.stride(), out.dtype, out.device) == (recorded.shape, recorded.stride(), recorded.dtype,
                                                                recorded.device)
    assert out.storage_offset() == 0
    assert out.untyped_storage().nbytes() == recorded.untyped_storage().nbytes()
    assert replay.exact == (numel > 0 and numel == torch.empty_strided(shape, stride).untyped_storage().nbytes() // 4)


def test_view_address_is_the_view_tensors_address():
    base = torch.randn(3, 40)[1:]
    for t in (base.view(torch.int32), base.unsqueeze(0), base.T, base[1:, 3:].view(torch.int32)):
        view = launch_mod._View.of(t, (torch.zeros(2), base))
        assert view.j == 1 and view.ptr((None, base)) == t.data_ptr() == view.tensor((None, base)).data_ptr()
        fresh = torch.randn(3, 40)[1:]
        rebuilt = view.tensor((None, fresh))
        assert view.ptr((None, fresh)) == rebuilt.data_ptr()
        assert (rebuilt.shape, rebuilt.stride(), rebuilt.dtype) == (t.shape, t.stride(), t.dtype)


def test_compile_fullgraph_traces_the_op(cpu_as_cuda):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    @torch.compile(backend=backend, fullgraph=True)
    def step(sf):
        return deep_gemm.transform_sf_into_required_layout(sf, 8, 512, (1, 128)) * 2

    sf = torch.randn(8, 4)
    out = step(sf)
    assert torch.equal(out, sf * 2) and len(graphs) == 1
    assert "deep_gemm.transform_sf_into_required_layout.default" in graphs[0]
    assert cpu_as_cuda == []  # traced and run through the op (its CPU kernel), not the eager path


def test_threads(cpu_as_cuda):
    import threading
    jobs = [torch.randn(8 + 4 * (i % 3), 4) for i in range(6)]
    expected = [_reference(sf, sf.size(0), 512, (1, 128)) for sf in jobs]
    errors, results = [], [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def worker(i):
        try:
            barrier.wait()
            for _ in range(5):
                results[i] = deep_gemm.transform_sf_into_required_layout(jobs[i], jobs[i].size(0), 512, (1, 128))
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for got, want in zip(results, expected):
        assert got.stride() == want.stride() and torch.equal(got, want)
