"""Runtime knobs and the kernel-runtime handle: deep_gemm.core.runtime, the public wrappers and torch.ops.deep_gemm.

Every test starts and ends with the knobs at their values before the test (``restore_knobs``). Without a GPU the
device SM count is 0, so ``get_num_sms()`` reports 0 when no budget is set.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

import deep_gemm
from deep_gemm.core import runtime
from deep_gemm.core.errors import DeepGEMMError
from deep_gemm.core.schemas import FAMILY, SCHEMAS

ops = torch.ops.deep_gemm
NUM_THREADS = 8
RUNTIME_OPS = [name for name, family in FAMILY.items() if family == "runtime"]


@pytest.fixture(autouse=True)
def restore_knobs():
    s = runtime._STATE
    saved = (s.num_sms, s.tc_util, s.pdl, s.ignore_compile_dims, s.block_m_multiple_of, s.block_n_multiple_of,
             s.mk_alignment)
    yield
    num_sms, tc_util, pdl, ignore, block_m, block_n, alignment = saved
    runtime.set_num_sms(num_sms)
    runtime.set_tc_util(tc_util)
    runtime.set_pdl(pdl)
    runtime.set_ignore_compile_dims(ignore)
    runtime.set_block_size_multiple_of(block_m, block_n)
    runtime.set_mk_alignment_for_contiguous_layout(alignment)
    assert (s.num_sms, s.tc_util, s.pdl, s.ignore_compile_dims, s.block_m_multiple_of, s.block_n_multiple_of,
            s.mk_alignment) == saved


def test_defaults():
    # A fresh process (the fixture restores these after every test, so they hold here too).
    assert runtime.get_tc_util() == ops.get_tc_util() == 100
    assert runtime.get_pdl() is False and ops.get_pdl() is False
    assert runtime.get_ignore_compile_dims() is False
    assert runtime.get_block_size_multiple_of() == (1, 1)
    assert runtime.get_mk_alignment_for_contiguous_layout() == ops.get_mk_alignment_for_contiguous_layout() == 128
    assert runtime.get_num_sms() == ops.get_num_sms() == runtime.device_num_sms()
    if not torch.cuda.is_available():
        assert runtime.get_num_sms() == 0


def test_schemas_are_the_table():
    for name in RUNTIME_OPS:
        schema = str(torch._C._dispatch_find_schema_or_throw(f"deep_gemm::{name}", "").schema())
        assert schema == f"deep_gemm::{SCHEMAS[name]}", name


# ---- round trips through the three faces -----------------------------------------------------------------------

# (setter, getter, values): each face sets, every face reads the same value back.
KNOBS = [
    ("set_num_sms", "get_num_sms", [4, 2, 1]),
    ("set_tc_util", "get_tc_util", [1, 55, 100]),
    ("set_pdl", "get_pdl", [True, False]),
    ("set_mk_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout", [64, 256, 128]),
]


@pytest.mark.parametrize("setter, getter, values", KNOBS, ids=[k[0] for k in KNOBS])
def test_knob_round_trip(setter, getter, values):
    if setter == "set_num_sms" and torch.cuda.is_available():
        values = [v for v in values if v <= runtime.device_num_sms()]
    faces = [getattr(runtime, setter), getattr(ops, setter), getattr(deep_gemm, setter)]
    for face in faces:
        for value in values:
            face(value)
            assert getattr(runtime, getter)() == value
            assert getattr(ops, getter)() == value
            assert getattr(deep_gemm, getter)() == value


def test_num_sms_zero_means_all():
    ops.set_num_sms(1)
    ops.set_num_sms(0)
    assert ops.get_num_sms() == runtime.device_num_sms()
    assert runtime._STATE.num_sms == 0


def test_tc_util_zero_means_unset():
    ops.set_tc_util(40)
    ops.set_tc_util(0)
    assert ops.get_tc_util() == deep_gemm.get_tc_util() == 100


def test_ignore_compile_dims():
    for face in (runtime.set_ignore_compile_dims, ops.set_ignore_compile_dims, deep_gemm.set_ignore_compile_dims):
        face(True)
        assert runtime.get_ignore_compile_dims() is True
        face(False)
        assert runtime.get_ignore_compile_dims() is False


def test_block_size_multiple_of():
    runtime.set_block_size_multiple_of(2, 4)
    assert runtime.get_block_size_multiple_of() == (2, 4)
    ops.set_block_size_multiple_of(8, 16)
    assert runtime.get_block_size_multiple_of() == (8, 16)
    deep_gemm.set_block_size_multiple_of(32)          # one int: both
    assert runtime.get_block_size_multiple_of() == (32, 32)
    deep_gemm.set_block_size_multiple_of((1, 256))    # a pair
    assert runtime.get_block_size_multiple_of() == (1, 256)


def test_alignment_legacy_getters_and_theoretical():
    ops.set_mk_alignment_for_contiguous_layout(64)
    assert deep_gemm.get_m_alignment_for_contiguous_layout() == deep_gemm.get_k_alignment_for_contiguous_layout() == 64
    for expected_m in (None, 0, 1, 33, 4096):
        assert runtime.get_theoretical_mk_alignment_for_contiguous_layout(expected_m) == 128
        assert ops.get_theoretical_mk_alignment_for_contiguous_layout(expected_m) == 128
        assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(expected_m) == 128
    assert ops.get_theoretical_mk_alignment_for_contiguous_layout() == 128


def test_public_knobs_take_the_builds_keywords():
    """The public setters take DeepGEMM's parameter names by keyword (its torch-op bindings allow it); the old
    names are not accepted, and ``deep_gemm._C`` keeps the positional-only forms."""
    before = deep_gemm.get_num_sms()
    deep_gemm.set_num_sms(new_num_sms=before)
    assert deep_gemm.get_num_sms() == before
    deep_gemm.set_mk_alignment_for_contiguous_layout(new_value=64)
    assert deep_gemm.get_mk_alignment_for_contiguous_layout() == 64
    deep_gemm.set_mk_alignment_for_contiguous_layout(new_value=128)
    tc = deep_gemm.get_tc_util()
    deep_gemm.set_tc_util(new_tc_util=tc)
    assert deep_gemm.get_tc_util() == tc
    pdl = deep_gemm.get_pdl()
    deep_gemm.set_pdl(enable=pdl)
    assert deep_gemm.get_pdl() == pdl
    deep_gemm.set_ignore_compile_dims(ignore=False)
    with pytest.raises(TypeError):
        deep_gemm.set_num_sms(num_sms=4)
    with pytest.raises(TypeError):
        deep_gemm.set_mk_alignment_for_contiguous_layout(alignment=64)
    with pytest.raises(TypeError):
        deep_gemm._C.set_num_sms(new_num_sms=4)
    with pytest.raises(TypeError):
        deep_gemm._C.set_mk_alignment_for_contiguous_layout(new_value=64)


def test_theoretical_alignment_accepts_num_groups():
    for num_groups in (None, 1, 8, 256):
        assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(4096, num_groups) == 128
        assert deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(expected_m=1, num_groups=num_groups) == 128
    with pytest.raises(deep_gemm.DeepGEMMError, match="num_groups"):
        deep_gemm.get_theoretical_mk_alignment_for_contiguous_layout(128, -1)


# ---- out-of-range values ---------------------------------------------------------------------------------------

BAD = [
    ("set_num_sms", (-1,), r"num_sms: expected an integer in \[0, \d+\], got -1"),
    ("set_tc_util", (101,), r"tc_util: expected an integer in \[0, 100\], got 101"),
    ("set_tc_util", (-1,), r"tc_util: expected an integer in \[0, 100\], got -1"),
    ("set_mk_alignment_for_contiguous_layout", (0,), r"alignment: expected an integer in \[1, \d+\], got 0"),
    ("set_mk_alignment_for_contiguous_layout", (-128,), r"alignment: expected an integer in \[1, \d+\], got -128"),
    ("set_block_size_multiple_of", (0, 1), r"block_m_multiple_of: expected an integer in \[1, 256\], got 0"),
    ("set_block_size_multiple_of", (1, 0), r"block_n_multiple_of: expected an integer in \[1, 256\], got 0"),
    ("set_block_size_multiple_of", (1, 257), r"block_n_multiple_of: expected an integer in \[1, 256\], got 257"),
    ("get_theoretical_mk_alignment_for_contiguous_layout", (-1,), r"expected_m: expected an integer in \[0, \d+\]"),
]


@pytest.mark.parametrize("name, args, pattern", BAD, ids=[f"{b[0]}{b[1]}" for b in BAD])
def test_out_of_range(name, args, pattern):
    before = (runtime._STATE.num_sms, runtime._STATE.tc_util, runtime._STATE.mk_alignment,
              runtime.get_block_size_multiple_of())
    for face in (getattr(runtime, name), getattr(ops, name)):
        with pytest.raises(DeepGEMMError, match=pattern):
            face(*args)
    # Nothing changed.
    assert before == (runtime._STATE.num_sms, runtime._STATE.tc_util, runtime._STATE.mk_alignment,
                      runtime.get_block_size_multiple_of())


@pytest.mark.gpu
def test_num_sms_above_device_count():
    with pytest.raises(DeepGEMMError, match=r"num_sms: expected an integer in \[0, \d+\]"):
        ops.set_num_sms(runtime.device_num_sms() + 1)


def test_opcheck():
    cases = {
        "set_num_sms": (3,), "get_num_sms": (), "set_tc_util": (70,), "get_tc_util": (), "set_pdl": (True,),
        "get_pdl": (), "set_ignore_compile_dims": (False,), "set_block_size_multiple_of": (2, 2),
        "set_mk_alignment_for_contiguous_layout": (128,), "get_mk_alignment_for_contiguous_layout": (),
        "get_theoretical_mk_alignment_for_contiguous_layout": (None,), "get_jit": (), "jit_cache_dir": (1,),
        "jit_num_compiled_kernels": (1,), "jit_clear_cache": (1,),
    }
    assert set(cases) == set(RUNTIME_OPS)
    if torch.cuda.is_available():
        cases["set_num_sms"] = (min(2, runtime.device_num_sms()),)
    for name, args in cases.items():
        # opcheck's AOT-dispatch utils cannot compare str results (assert_close has no str pair): schema + fake only.
        utils = {"test_utils": ("test_schema", "test_faketensor")} if name == "jit_cache_dir" else {}
        torch.library.opcheck(getattr(ops, name).default, args, **utils)


# ---- the kernel-runtime handle ---------------------------------------------------------------------------------

def test_get_jit_handle():
    handle = ops.get_jit()
    assert handle == 1
    jit = deep_gemm.get_jit()
    assert isinstance(jit, runtime.JITRuntime) and jit.handle == handle
    assert "JITRuntime(handle=1" in repr(jit)


def test_jit_cache_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path / "dg"))
    assert ops.jit_cache_dir(ops.get_jit()) == str(tmp_path / "dg")
    assert deep_gemm.get_jit().cache_dir == str(tmp_path / "dg")
    monkeypatch.delenv("DG_JIT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ops.jit_cache_dir(1) == os.path.join(str(tmp_path / "home"), ".deep_gemm")
    monkeypatch.setenv("DG_JIT_CACHE_DIR", "")  # empty: the default
    assert ops.jit_cache_dir(1) == os.path.join(str(tmp_path / "home"), ".deep_gemm")


def test_jit_count_and_clear():
    cache = runtime.KERNEL_CACHE
    jit = ops.get_jit()
    before = ops.jit_num_compiled_kernels(jit)
    assert before == len(cache)
    keys = [("test_runtime", object()) for _ in range(3)]
    built = [cache.get_or_compile(key, lambda i=i: f"kernel{i}") for i, key in enumerate(keys)]
    assert built == ["kernel0", "kernel1", "kernel2"]
    assert ops.jit_num_compiled_kernels(jit) == deep_gemm.get_jit().num_compiled_kernels == before + 3
    assert cache.get(keys[1]) == "kernel1"
    assert ops.jit_clear_cache(jit) == before + 3
    assert ops.jit_num_compiled_kernels(jit) == 0 and cache.get(keys[1]) is None
    assert deep_gemm.get_jit().clear() == 0


@pytest.mark.parametrize("name", ["jit_cache_dir", "jit_num_compiled_kernels", "jit_clear_cache"])
def test_unknown_handle(name):
    for handle in (0, 2, -1):
        with pytest.raises(DeepGEMMError, match=rf"jit: unknown runtime handle {handle}; get one from get_jit\(\)"):
            getattr(ops, name)(handle)


# ---- threads ---------------------------------------------------------------------------------------------------

def _run_threads(target, n: int = NUM_THREADS) -> list:
    results: list = [None] * n
    errors: list = []
    start = threading.Barrier(n)

    def worker(i: int) -> None:
        try:
            start.wait()
            results[i] = target(i)
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_kernel_cache_same_key_builds_once():
    cache = runtime.KernelCache()
    calls = []
    lock = threading.Lock()

    def build():
        with lock:
            calls.append(threading.get_ident())
        time.sleep(0.02)  # widen the window in which the other threads ask for the same key
        return object()

    results = _run_threads(lambda i: cache.get_or_compile(("gemm", 128), build))
    assert len(calls) == 1
    assert all(r is results[0] for r in results)
    assert len(cache) == 1


def test_kernel_cache_different_keys_build_each_once():
    cache = runtime.KernelCache()
    counts: dict = {}
    lock = threading.Lock()

    def build_for(key):
        def build():
            with lock:
                counts[key] = counts.get(key, 0) + 1
            time.sleep(0.005)
            return ("kernel", key)
        return build

    def worker(i: int):
        # Every thread asks for every key, starting at a different one.
        return [cache.get_or_compile(k, build_for(k)) for k in [(j + i) % NUM_THREADS for j in range(NUM_THREADS)]]

    results = _run_threads(worker)
    assert counts == {k: 1 for k in range(NUM_THREADS)}
    for row in results:
        assert sorted(row) == [("kernel", k) for k in range(NUM_THREADS)]
    assert len(cache) == NUM_THREADS and cache.clear() == NUM_THREADS and len(cache) == 0


def test_knobs_from_threads_stay_consistent():
    values = list(range(1, NUM_THREADS + 1))

    def worker(i: int):
        value = values[i]
        seen = []
        for _ in range(200):
            ops.set_block_size_multiple_of(value, value)
            m, n = runtime.get_block_size_multiple_of()
            assert m == n, "a torn (block_m, block_n) pair"
            seen.append(m)
            ops.set_tc_util(value)
            assert 1 <= ops.get_tc_util() <= NUM_THREADS
            ops.set_mk_alignment_for_contiguous_layout(64 * value)
            assert ops.get_mk_alignment_for_contiguous_layout() % 64 == 0
        return seen

    seen = _run_threads(worker)
    assert all(set(s) <= set(values) for s in seen)
    m, n = runtime.get_block_size_multiple_of()
    assert m == n and m in values
    assert ops.get_tc_util() in values
    assert ops.get_mk_alignment_for_contiguous_layout() // 64 in values


# ---- torch.compile ---------------------------------------------------------------------------------------------

def test_getters_under_compile_with_graph_breaks():
    # The getters return a bare int, which Dynamo cannot put in a graph (see the xfail below): it breaks the graph
    # there, runs the op eagerly on every call, and so sees every change.
    ops.set_mk_alignment_for_contiguous_layout(64)

    def fn(x):
        return x * ops.get_mk_alignment_for_contiguous_layout() + ops.get_tc_util()

    compiled = torch.compile(fn, backend="aot_eager")
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), fn(x))
    ops.set_mk_alignment_for_contiguous_layout(256)
    ops.set_tc_util(7)
    torch.testing.assert_close(compiled(x), torch.full((3,), 256.0 + 7))


@pytest.mark.parametrize("getter", [
    pytest.param("op", marks=pytest.mark.xfail(strict=True, raises=torch._dynamo.exc.Unsupported,
                                               reason="torch 2.13 Dynamo rejects custom ops returning a bare int "
                                                      "('op returned non-Tensor'); the public getters handle it")),
    "public"])
def test_getters_fullgraph(getter):
    get_num_sms = ops.get_num_sms if getter == "op" else deep_gemm.get_num_sms
    get_alignment = (ops.get_mk_alignment_for_contiguous_layout if getter == "op"
                     else deep_gemm.get_mk_alignment_for_contiguous_layout)
    ops.set_num_sms(2)
    compiled = torch.compile(lambda x: x * get_num_sms() + get_alignment(), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0 + 128))
    ops.set_num_sms(1)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 1.0 + 128))


def test_setter_inside_compiled_region_runs_every_call():
    def fn(x):
        ops.set_pdl(True)
        return x + 1

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    compiled(torch.ones(2))
    ops.set_pdl(False)
    compiled(torch.ones(2))
    assert ops.get_pdl() is True
