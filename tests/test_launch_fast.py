"""The direct launch path (core/launch.py): deep_gemm calls Triton's C launcher itself instead of Triton's Python
wrapper around it, with encoded TMA descriptors taken from a cache.

CPU only: the C launcher is a recorder and descriptor encoding a deterministic fake (``launch_fakes``), but the
wrapper compared against is Triton's own (``wrap_handle_tensordesc``), so what is asserted is "the C launcher gets
exactly the arguments it would have got from Triton". Also the memo key of op checks (core/registry.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from launch_fakes import (ANNOTATED, BF16_TILE_META, FP8_TILE_META, SCRATCH_WORD, FakeDriver, FakeTensorMap,
                          RecordingCLauncher, fake_compiled, kernel_descriptor_meta, launch_with)
from triton.backends.nvidia import driver as nvidia_driver
from triton.runtime import driver as triton_driver
from triton.tools.tensor_descriptor import TensorDescriptor

import deep_gemm.core.launch as launch_mod
from deep_gemm._internals import torch_api, triton_launcher
from deep_gemm.core.plans import PlanCache
from deep_gemm.core import registry
from deep_gemm.gemm.fp8 import launch as fp8_launch
from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

STREAM = 0xC0FFEE
GRID = (3, 1, 1)
FP4_META = dict(FP8_TILE_META, fp4_padded=True)


@pytest.fixture
def fake_gpu(monkeypatch):
    """Triton's active driver encodes fake descriptors; the current stream and device are fixed; caches start
    empty."""
    fake = FakeDriver()
    monkeypatch.setattr(triton_driver, "_active", fake)
    monkeypatch.setattr(torch_api, "current_raw_stream", lambda index: STREAM)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launch_mod, "_ensure_context", lambda index: None)
    monkeypatch.setattr(launch_mod, "interpreting", lambda: False)
    monkeypatch.setattr(launch_mod, "_DIRECT", {})
    launch_mod.clear_tma_descriptor_cache()
    yield fake
    launch_mod.clear_tma_descriptor_cache()


def _same_words(ours, theirs):
    """Word by word: tensors must be the same object, everything else equal (fake tensor maps compare their
    encoding inputs)."""
    assert len(ours) == len(theirs)
    for i, (x, y) in enumerate(zip(ours, theirs)):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            assert x is y, f"word {i}"
        else:
            assert type(x) is type(y) and x == y, f"word {i}: {x!r} != {y!r}"


def _tritons_words(compiled, args, scratch=None):
    """What Triton's own wrapper hands the C launcher for ``args`` (a fresh recorder, the same wrapper code)."""
    recorder = RecordingCLauncher()
    signature = {i: ("tensordesc" if isinstance(a, (launch_mod.FastDescriptor, TensorDescriptor)) else "i32")
                 for i, a in enumerate(args)}
    launch_with(nvidia_driver.wrap_handle_tensordesc(recorder, signature, compiled.metadata.tensordesc_meta),
                compiled, GRID, STREAM, args, scratch)
    return recorder.calls[0]


def _kernel(metas, c_launch):
    """A kernel (a_desc, x_ptr, M, b_desc, y_ptr, BLOCK) with descriptors a_desc and b_desc."""
    names = ["a_desc", "x_ptr", "M", "b_desc", "y_ptr", "BLOCK"]
    return fake_compiled(names, dict(zip(["a_desc", "b_desc"], metas)), c_launch)


def _arguments(seed, padding="zero"):
    """(args for _kernel, the tensors they were made from)."""
    torch.manual_seed(seed)
    a = torch.empty(256, 512, dtype=torch.uint8)
    b = torch.empty(128, 64, dtype=torch.bfloat16)
    x, y = torch.empty(8), torch.empty(8)
    a_desc = launch_mod.FastDescriptor(a, (256, 512), (512, 1), (128, 128))
    b_desc = (TensorDescriptor(b, [128, 64], [64, 1], [64, 64], padding=padding) if padding == "nan"
              else launch_mod.FastDescriptor(b, (128, 64), (64, 1), (64, 64)))
    return [a_desc, x, 4096, b_desc, y, 128], (a, x, b, y)


METAS = {"with metadata": (FP8_TILE_META, BF16_TILE_META), "without metadata": (None, None),
         "fp4 padded": (FP4_META, BF16_TILE_META)}


@pytest.mark.parametrize("metas", METAS.values(), ids=METAS.keys())
@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_direct_launch_passes_what_tritons_wrapper_would(fake_gpu, metas, padding, monkeypatch):
    c_launch = RecordingCLauncher()
    compiled = _kernel(metas, c_launch)
    args, _ = _arguments(0, padding)
    launch_mod.launch_compiled(compiled, GRID, args, 0)  # first launch: verified against Triton's wrapper
    direct = launch_mod._direct_launcher(compiled)
    assert direct is not None and direct.verified
    args2, _ = _arguments(1, padding)
    with monkeypatch.context() as patch:  # later launches never enter Triton's wrapper: it would fail loudly
        patch.setattr(nvidia_driver, "make_tensordesc_arg", None)
        launch_mod.launch_compiled(compiled, GRID, args2, 0)
    _same_words(c_launch.calls[0], _tritons_words(compiled, args))
    _same_words(c_launch.calls[1], _tritons_words(compiled, args2))


@pytest.mark.parametrize("metas", METAS.values(), ids=METAS.keys())
def test_direct_replay_passes_what_tritons_wrapper_would(fake_gpu, metas):
    c_launch = RecordingCLauncher()
    compiled = _kernel(metas, c_launch)
    args, (a, x, b, y) = _arguments(0)
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    persistent = y  # a buffer the plan keeps (e.g. split-K counters)
    plan = launch_mod.LaunchPlan.from_record([(compiled, GRID, tuple(args), 0)], (a, x, b), persistent=(persistent,))
    assert plan.direct is not None
    for seed in (1, 2):
        _, (a2, x2, b2, _) = _arguments(seed)
        plan.run((a2, x2, b2))
        expected = [launch_mod.FastDescriptor(a2, (256, 512), (512, 1), (128, 128)), x2, 4096,
                    launch_mod.FastDescriptor(b2, (128, 64), (64, 1), (64, 64)), persistent, 128]
        # (a replay passes tensors as their addresses: the C launcher then skips its per-pointer driver query)
        _same_words(_addresses(c_launch.calls[-1]), _addresses(_tritons_words(compiled, expected)))


def test_direct_replay_reallocates_per_call_buffers(fake_gpu):
    c_launch = RecordingCLauncher()
    compiled = _kernel((FP8_TILE_META, BF16_TILE_META), c_launch)
    args, (a, x, b, workspace) = _arguments(0)
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    plan = launch_mod.LaunchPlan.from_record([(compiled, GRID, tuple(args), 0)], (a, x, b), scratch=(workspace,))
    plan.run((a, x, b))
    plan.run((a, x, b))
    slot = plan.direct.fresh_words[0][0]
    first, second = c_launch.calls[-2][slot], c_launch.calls[-1][slot]
    assert first is not second and first is not workspace
    assert (first.shape, first.dtype) == (workspace.shape, workspace.dtype)
    assert all(word is None for word in (plan.direct.words[w[0]] for w in plan.direct.tensor_words))


def test_plans_keep_no_tensor_of_the_recording_call(fake_gpu):
    c_launch = RecordingCLauncher()
    compiled = _kernel((FP8_TILE_META, BF16_TILE_META), c_launch)
    args, inputs = _arguments(0)
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    plan = launch_mod.LaunchPlan.from_record([(compiled, GRID, tuple(args), 0)], inputs)
    kept = plan.template + plan.direct.words
    assert not any(isinstance(w, (torch.Tensor, launch_mod.FastDescriptor)) for w in kept)


def _fake_fp8_kernels(monkeypatch, c_launch):
    """The FP8 kernels' parameter lists behind fake compiled kernels whose C launcher is ``c_launch``."""
    compiled = {}

    def get(key):
        if key[0] not in compiled:
            kernel = (fp8_launch._tl_kernel() if key[0] == "fp8_gemm"
                      else __import__("deep_gemm.gemm.fp8.kernels.gemm_ws", fromlist=["_"])._fp8_gemm_ws_kernel)
            compiled[key[0]] = fake_compiled(kernel.arg_names, kernel_descriptor_meta(kernel), c_launch)
        return compiled[key[0]]
    monkeypatch.setattr(fp8_launch, "interpreting", lambda: False)
    monkeypatch.setattr(launch_mod.KERNEL_CACHE, "get", get)
    monkeypatch.setattr(fp8_launch, "usable_sms", lambda: 132)
    monkeypatch.setattr(fp8_launch, "_WS_BUDGETS", {})  # (budgets chosen from stub kernels stay here)


def _addresses(words):
    """A launch's words with every tensor replaced by its address (a replay passes derived views as addresses)."""
    return [w.data_ptr() if isinstance(w, torch.Tensor) else w for w in words]


def test_dense_gemm_replay_matches_a_fresh_direct_launch(fake_gpu, monkeypatch):
    """Through the dense FP8 launcher, with the real kernels' parameter lists: a replayed plan hands the C launcher
    the words a fresh launch of the same call does (which test_direct_launch_* compare with Triton's)."""
    c_launch = RecordingCLauncher()
    _fake_fp8_kernels(monkeypatch, c_launch)
    monkeypatch.setattr(fp8_launch, "PLANS", PlanCache())
    kernels = registry.kernels_of("fp8_gemm_nt")
    binder = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])

    def operands(seed):
        torch.manual_seed(seed)
        a = per_token_cast_to_fp8(torch.randn(256, 512, dtype=torch.bfloat16), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(384, 512, dtype=torch.bfloat16), use_ue8m0=False)
        return binder((a[0], a[1], b[0], b[1], torch.empty(256, 384, dtype=torch.bfloat16)), {})

    def call(full, use_plan):
        sig = kernels.checked(full)
        kernels.triton_fn()(*full, signature=sig if use_plan else None)
        return c_launch.calls[-1]
    first = operands(0)  # kept alive: the second call's tensors cannot reuse its addresses
    call(first, True)  # records
    (plan,) = fp8_launch.PLANS.values()
    assert plan.direct is not None
    second = operands(1)
    before = fake_gpu.encodes
    replayed = call(second, True)
    # The new tensors' descriptors encoded at most once each (five descriptor parameters; two over the same tensor
    # and layout share one encoding) ...
    encoded = fake_gpu.encodes - before
    assert 3 <= encoded <= 5
    fresh = call(second, False)
    assert fake_gpu.encodes - before == encoded  # ... and a fresh launch with the same tensors hits the cache
    _same_words(_addresses(replayed), _addresses(fresh))  # (a replay passes tensors as their addresses)


def test_masked_replay_rebuilds_the_views_the_launcher_derives(fake_gpu, monkeypatch):
    """The masked launcher reshapes A, B (and D, for its TMA view) inside the launch: a replayed plan rebuilds
    those views from the new call's tensors (same storage, same offset) and hands the C launcher the words a fresh
    launch of the same call does, addresses included."""
    c_launch = RecordingCLauncher()
    _fake_fp8_kernels(monkeypatch, c_launch)
    kernels = registry.kernels_of("m_grouped_fp8_gemm_nt_masked")
    launcher = kernels.triton
    launcher.plans.clear()
    binder = registry._Binder(registry.SCHEMAS["m_grouped_fp8_gemm_nt_masked"])
    g, max_m, n, k = 3, 256, 384, 512

    def operands(seed):
        torch.manual_seed(seed)
        a = per_token_cast_to_fp8(torch.randn(g * max_m, k, dtype=torch.bfloat16), use_ue8m0=False)
        bq = [per_block_cast_to_fp8(torch.randn(n, k, dtype=torch.bfloat16), use_ue8m0=False) for _ in range(g)]
        d = torch.empty(g, max_m, n, dtype=torch.bfloat16)
        return binder((a[0].view(g, max_m, k), a[1].view(g, max_m, -1), torch.stack([q[0] for q in bq]),
                       torch.stack([q[1] for q in bq]), d, torch.tensor([5, 0, 200], dtype=torch.int32), 100), {})

    def call(full, use_plan):
        sig = kernels.checked(full)
        launcher(*full, signature=sig if use_plan else None)
        return c_launch.calls[-1]
    first = operands(0)
    call(first, True)  # records
    plans = launcher.plans
    assert len(plans) == 1
    (plan,) = plans.values()
    assert plan.direct is not None and plan.view_slots + plan.view_desc_slots, "no derived view recorded"
    second = operands(1)
    replayed = call(second, True)
    assert len(plans) == 1  # replayed, not recorded again
    fresh = call(second, False)
    assert _addresses(replayed) == _addresses(fresh)
    assert _addresses(replayed) != _addresses(call(first, False))
    launcher.plans.clear()  # (recorded over stub kernels: no later call may replay them)


# ---- the descriptor cache -------------------------------------------------------------------------------------

LAYOUT = dict(swizzle=3, elem_size=1, elem_type=0, block_size=(128, 128), shape=(256, 512), strides=(512, 1),
              padding=0, device_index=0)


def _encoded(data_ptr=0x10000, **changes):
    return launch_mod.tma_descriptor(data_ptr, launch_mod.tma_layout(**dict(LAYOUT, **changes)))


def test_descriptor_cache_reuses_identical_encodings(fake_gpu):
    first = _encoded()
    assert _encoded() is first and fake_gpu.encodes == 1
    assert first == FakeTensorMap((0x10000, 3, 1, 0, (128, 128), (256, 512), (512, 1), 0))
    # Lists and tuples are the same inputs.
    assert _encoded(block_size=[128, 128], shape=[256, 512], strides=[512, 1]) is first


@pytest.mark.parametrize("change", [dict(data_ptr=0x20000), dict(shape=(128, 512)), dict(strides=(1024, 1)),
                                    dict(block_size=(64, 128)), dict(swizzle=2), dict(elem_size=2),
                                    dict(elem_type=10), dict(padding=1), dict(device_index=1)],
                         ids=lambda c: next(iter(c)))
def test_descriptor_cache_encodes_anew_when_any_input_differs(fake_gpu, change):
    first = _encoded()
    other = _encoded(**change)
    assert other is not first and fake_gpu.encodes == 2
    if "device_index" not in change:  # the device is part of the key, not of the encoding
        assert other != first


def test_descriptor_cache_is_bounded(fake_gpu, monkeypatch):
    monkeypatch.setattr(launch_mod, "TMA_DESCRIPTOR_CACHE_LIMIT", 4)
    maps = [_encoded(0x10000 * (i + 1)) for i in range(6)]
    assert len(launch_mod._TMA_DESCRIPTORS) == 4
    assert _encoded(0x10000 * 6) is maps[5]  # the newest are kept
    assert _encoded(0x10000) is not maps[0] and fake_gpu.encodes == 7  # the oldest was dropped


# ---- falling back to Triton's own launch ---------------------------------------------------------------------------

def _fallback_launches(compiled, args):
    """Launch twice through launch_compiled; both must have gone through Triton's own launch (``compiled[grid]``,
    which calls ``CudaLauncher.__call__`` and so ``compiled.run.launch``) with Triton's words."""
    seen = []
    wrapper = compiled.run.launch
    compiled.run.launch = lambda *words: (seen.append(words), wrapper(*words))
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    assert len(seen) == 2
    assert launch_mod._direct_launcher(compiled) is None


def test_a_wrapper_other_than_tritons_takes_tritons_path(fake_gpu):
    c_launch = RecordingCLauncher()
    compiled = _kernel((FP8_TILE_META, BF16_TILE_META), c_launch)
    args = _arguments(0)[0]
    _fallback_launches(compiled, args)  # the wrapper is now a lambda around Triton's
    _same_words(c_launch.calls[-1], _tritons_words(compiled, args))


def test_an_unknown_triton_takes_tritons_own_launch(fake_gpu, monkeypatch):
    monkeypatch.setattr(triton_launcher, "triton_version", lambda: (3, 99, 0))
    c_launch = RecordingCLauncher()
    compiled = _kernel((FP8_TILE_META, BF16_TILE_META), c_launch)
    assert triton_launcher.Abi.of(compiled) is None
    args = _arguments(0)[0]
    _fallback_launches(compiled, args)
    _same_words(c_launch.calls[-1], _tritons_words(compiled, args))
    assert not launch_mod.tf32_rounding_available(compiled) or ANNOTATED  # (3.7+ descriptors carry the flag)


def test_every_supported_triton_has_a_direct_launch():
    """The support matrix's Triton releases each map to a launcher ABI, and so does the installed one (CI runs
    this file under every supported stack: a release whose launch silently took the slow path would fail here)."""
    assert triton_launcher.abi_names() == {(3, 6): "positional", (3, 7): "annotated", (3, 8): "annotated",
                                           (3, 9): "annotated"}
    assert triton_launcher.installed_abi() is not None
    assert triton_launcher.installed_abi().name == ("annotated" if ANNOTATED else "positional")


def test_kernels_without_descriptors_launch_directly_and_replay_addresses(fake_gpu):
    """Triton leaves the C launcher of a kernel without descriptor arguments unwrapped: launches call it with
    Triton's words, and a replayed plan passes its tensors as addresses (no data_ptr() call and driver pointer query
    per argument in the C launcher)."""
    c_launch = RecordingCLauncher()
    compiled = fake_compiled(["x_ptr", "y_ptr", "M"], {}, c_launch)
    assert compiled.run.launch is c_launch  # Triton does not wrap it
    x, y = torch.empty(4), torch.empty(8)
    args = [x, y, 7]
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    direct = launch_mod._direct_launcher(compiled)
    assert direct is not None and direct.verified and direct.descriptors == ()
    _same_words(c_launch.calls[0], _tritons_words(compiled, args))
    plan = launch_mod.LaunchPlan.from_record([(compiled, GRID, tuple(args), 0)], (x, y))
    assert plan.direct is not None
    x2, y2 = torch.empty(4), torch.empty(8)
    plan.run((x2, y2))
    assert c_launch.calls[-1] == tuple(_addresses(_tritons_words(compiled, [x2, y2, 7])))


def test_a_launcher_that_is_not_tritons_takes_its_own_path(fake_gpu):
    from types import SimpleNamespace
    compiled = _kernel((FP8_TILE_META, BF16_TILE_META), RecordingCLauncher())
    compiled.run = SimpleNamespace(**{k: getattr(compiled.run, k) for k in vars(compiled.run)})
    assert triton_launcher.Abi.of(compiled) is None


def test_a_flattening_that_differs_from_tritons_falls_back_for_good(fake_gpu, monkeypatch):
    c_launch = RecordingCLauncher()
    compiled = _kernel((FP8_TILE_META, BF16_TILE_META), c_launch)
    args, inputs = _arguments(0)
    with monkeypatch.context() as patch, pytest.warns(RuntimeWarning, match="keeps Triton's launch"):
        patch.setattr(launch_mod, "_descriptor_words", lambda desc, meta, abi, device: [desc.base])
        launch_mod.launch_compiled(compiled, GRID, args, 0)
    assert launch_mod._direct_launcher(compiled) is None
    _same_words(c_launch.calls[-1], _tritons_words(compiled, args))  # launched by Triton's own launch
    assert launch_mod.LaunchPlan.from_record([(compiled, GRID, tuple(args), 0)], inputs).direct is None


# ---- op check memo keys -------------------------------------------------------------------------------------------

def _reference_signature(args):
    """The memo key as first written (before the cheaper formulation): what _signature must still equal."""
    key = [registry._RUNTIME.version]
    for x in args:
        if isinstance(x, torch.Tensor):
            offset = x.storage_offset()
            key.append((x.shape, x.stride(), x.dtype, x.get_device(),
                        (offset * x.element_size()) & 15 if offset else 0))
        elif x is None or isinstance(x, (int, float, bool, str, torch.dtype)):
            key.append(x)
        elif isinstance(x, (list, tuple)):
            if not all(isinstance(v, (int, float, bool)) for v in x):
                return None
            key.append(tuple(x))
        else:
            return None
    return tuple(key)


class _Flag(int):
    pass


SIGNATURE_CASES = {
    "tensors": (torch.empty(4, 8), torch.empty(8, 4).t(), torch.empty(64, dtype=torch.uint8)[3:19].view(4, 4)),
    "offsets": (torch.empty(64)[4:8], torch.empty(64)[1:5], torch.empty(64, dtype=torch.bfloat16)[8:12]),
    "parameter": (torch.nn.Parameter(torch.empty(2, 2)), None),
    "plain": (None, 3, 2.5, True, "nk", torch.float32, _Flag(2)),
    "lists": ([1, 2, 3], (4, 5), [], [1.5, True]),
    "unkeyable list": ([1, "x"],),
    "unkeyable object": (object(),),
}


@pytest.mark.parametrize("args", SIGNATURE_CASES.values(), ids=SIGNATURE_CASES.keys())
def test_signature_equals_the_reference_formulation(args):
    assert registry._signature(args) == _reference_signature(args)


def test_signature_separates_what_checks_see():
    base = torch.empty(64)
    variants = [base[:16].view(4, 4), base[:16].view(2, 8), base[:16].view(4, 4).t(), base[2:18].view(4, 4),
                base[1:17].view(4, 4), base[:16].view(4, 4).double(), base[:16].view(4, 4).to(torch.bfloat16)]
    keys = {registry._signature((v,)) for v in variants}
    assert len(keys) == len(variants)
    # Starts 16 and 32 bytes in are as aligned as the base: the same key.
    assert registry._signature((base[4:20].view(4, 4),)) == registry._signature((base[8:24].view(4, 4),)) == \
        registry._signature((base[:16].view(4, 4),))


def test_check_tokens_stand_for_signatures():
    kernels = registry.kernels_of("fp8_gemm_nt")
    binder = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])

    def full(m):
        a = per_token_cast_to_fp8(torch.randn(m, 128, dtype=torch.bfloat16), use_ue8m0=False)
        b = per_block_cast_to_fp8(torch.randn(128, 128, dtype=torch.bfloat16), use_ue8m0=False)
        return binder((a[0], a[1], b[0], b[1], torch.empty(m, 128, dtype=torch.bfloat16)), {})
    first = kernels.checked(full(16))
    assert isinstance(first, int)
    assert kernels.checked(full(16)) == first  # new tensors, same metadata
    assert kernels.checked(full(32)) != first


def test_binder_fills_defaults_with_and_without_keywords():
    binder = registry._Binder(registry.SCHEMAS["fp8_gemm_nt"])
    t = tuple(torch.empty(1) for _ in range(5))
    positional = binder(t, {})
    assert positional[:5] == t and positional[5:] == binder.defaults[5:]
    assert binder(t, {"compiled_dims": "mn"})[9] == "mn"
    assert binder(t, {"compiled_dims": "mn"})[:9] == positional[:9]


def test_direct_replay_allocates_global_scratch_per_call(fake_gpu, monkeypatch):
    """Kernels with global scratch get a fresh buffer of grid * num_ctas * size bytes per replay (the generated
    straight-line replay, ``_DirectReplay._straight_line``, as the recording launch)."""
    c_launch = RecordingCLauncher()
    names = ["a_desc", "x_ptr", "M", "b_desc", "y_ptr", "BLOCK"]
    compiled = fake_compiled(names, dict(zip(["a_desc", "b_desc"], (FP8_TILE_META, BF16_TILE_META))), c_launch,
                             global_scratch_size=256)
    args, (a, x, b, y) = _arguments(0)
    allocated = []
    empty = torch.empty

    def cpu_empty(*shape, dtype=None, device=None, **kwargs):
        if device is not None and str(device).startswith("cuda"):
            allocated.append((shape, dtype, str(device)))
            device = "cpu"
        return empty(*shape, dtype=dtype, device=device, **kwargs)
    monkeypatch.setattr(torch, "empty", cpu_empty)
    launch_mod.launch_compiled(compiled, GRID, args, 0)
    plan = launch_mod.LaunchPlan.from_record([(compiled, GRID, tuple(args), 0)], (a, x, b, y))
    assert plan.direct is not None and plan.direct.scratch_bytes == 3 * 256 * compiled.run.num_ctas
    plan.run((a, x, b, y))
    plan.run((a, x, b, y))
    want = ((plan.direct.scratch_bytes,), torch.uint8, "cuda:0")
    assert allocated == [want] * 3  # the recording launch, then each replay
    first, second = c_launch.calls[-2][SCRATCH_WORD], c_launch.calls[-1][SCRATCH_WORD]
    assert first is not second and first.numel() == plan.direct.scratch_bytes


def test_cooperative_launches_only_grids_whose_programs_are_all_resident(fake_gpu, monkeypatch):
    """A cooperative launch (kernels whose programs wait for each other) is made only when every program fits on
    the device at once (``programs_per_sm`` x SMs); otherwise ``launch`` returns False and launches nothing, so the
    caller can run another kernel rather than meet the driver's refusal. The flag is part of the compiled kernel's
    key (Triton builds it into the launcher's metadata)."""
    c_launch = RecordingCLauncher()
    compiled = _kernel(METAS["with metadata"], c_launch)
    compiled.n_regs, compiled.metadata.shared = 96, 98336  # (the bmk grid-reduction kernel's 64 x 128 tile)
    compiled.run.launch_cooperative_grid = True
    keys = []
    monkeypatch.setattr(launch_mod.KERNEL_CACHE, "get", lambda key: keys.append(key) or compiled)
    monkeypatch.setattr(launch_mod, "device_num_sms", lambda index: 3)
    args, _ = _arguments(0)
    options = dict(name="k", config_key=("cfg",), num_warps=4, cooperative=True)
    assert launch_mod.programs_per_sm(compiled, 4) == 2  # two 97 KB programs per SM
    assert launch_mod.launch(None, (6, 1, 1), args, **options)
    assert not launch_mod.launch(None, (7, 1, 1), args, **options)
    assert len(c_launch.calls) == 1 and c_launch.calls[0][5] is True  # (word 5: the cooperative-grid flag)
    assert launch_mod.launch(None, (7, 1, 1), args, **dict(options, cooperative=False))
    assert keys[0][-1] is True and keys[-1][-1] is False


def test_programs_per_sm_counts_registers_shared_memory_and_warps():
    def compiled(regs, smem):
        return SimpleNamespace(n_regs=regs, metadata=SimpleNamespace(shared=smem))
    per_sm = launch_mod.programs_per_sm
    assert per_sm(compiled(96, 131104), 8) == 1  # the 128 x 128 tile: 128 KB of stages
    assert per_sm(compiled(96, 98336), 4) == 2
    assert per_sm(compiled(90, 1024), 4) == 5  # 90 -> 96 registers per thread: 12288 per program
    assert per_sm(compiled(32, 0), 4) == 16  # 64 warps
    assert per_sm(compiled(16, 0), 1) == 32  # the block limit
    assert per_sm(compiled(255, 0), 16) == 0  # 256 x 512 threads: more than an SM's registers


def test_the_interpreter_refuses_cooperative_launches(monkeypatch):
    monkeypatch.setattr(launch_mod, "interpreting", lambda: True)
    with pytest.raises(ValueError, match="cooperative launch cannot run in Triton's interpreter"):
        launch_mod.launch(None, (1, 1, 1), (), name="k", config_key=(), num_warps=4, cooperative=True)
