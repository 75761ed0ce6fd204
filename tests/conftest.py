"""Test-run setup shared by every test module.

Without a GPU, Triton kernels run in Triton's interpreter: TRITON_INTERPRET must be set before triton is imported
(deep_gemm imports triton lazily, so setting it here is early enough). Every test then runs with the interpreter's
comparisons typed int1 (tests/interpreter_masks.py).
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import deep_gemm  # noqa: E402,F401  (registers the ops)
import interpreter_masks  # noqa: E402,F401  (comparisons typed int1 in the interpreter)
import opcheck_registry  # noqa: E402

_opcheck = torch.library.opcheck


def _recording_opcheck(op, *args, **kwargs):
    name = getattr(op, "_name", None) or str(op)
    if name.startswith("deep_gemm::"):
        opcheck_registry.OPCHECKED.add(name.split("::", 1)[1].split(".")[0])
    return _opcheck(op, *args, **kwargs)


torch.library.opcheck = _recording_opcheck


def pytest_collection_modifyitems(config, items):
    # Checks of the whole run (mark after_all) run after every other test, wherever they were collected; the opcheck
    # coverage check is meaningful only when every test module was collected.
    items.sort(key=lambda item: item.get_closest_marker("after_all") is not None)
    collected = {item.module.__name__ for item in items}
    every = {p.stem for p in __import__("pathlib").Path(__file__).parent.glob("test_*.py")}
    opcheck_registry.FULL_RUN = every <= collected
    _sample(config, items)
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _sample(config, items):
    """DG_TEST_SAMPLE=N keeps, of each test function's parametrisations, the first N and the last (deselecting the
    rest): the support matrix's quick pass over the other torch/Triton stacks, where what breaks is an API or a
    compile, not one shape; the full suite runs every case on the default stack."""
    n = os.environ.get("DG_TEST_SAMPLE")
    if not n:
        return
    if not n.isdigit() or int(n) < 1:
        raise pytest.UsageError(f"DG_TEST_SAMPLE: expected a positive integer, got {n!r}")
    first = int(n)
    groups: dict = {}
    for item in items:
        key = (item.module.__name__, getattr(item.cls, "__name__", None), getattr(item, "originalname", item.name))
        groups.setdefault(key, []).append(item)
    keep = set()
    for group in groups.values():
        keep.update(id(item) for item in group[:first] + group[-1:])
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in keep])
    items[:] = [item for item in items if id(item) in keep]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def restore_deterministic():
    """Deterministic mode (``use_deterministic_algorithms``) as it was before the test, whatever the test sets."""
    before = deep_gemm.get_deterministic_algorithms()
    yield
    deep_gemm.use_deterministic_algorithms(before)


@pytest.fixture
def deterministic_mode(restore_deterministic):
    """Deterministic mode on for the test."""
    deep_gemm.use_deterministic_algorithms(True)


# ---- The eager-path and torch.compile harness shared by the eager-path tests of every family ---------------------

@pytest.fixture
def eager_calls(monkeypatch):
    """``eager_calls(op_name)``: CPU tensors on the eager path (``core/eager.eager_op``). The eager path takes only
    CUDA tensors, so this swaps in the same ``_eager_signature`` with its CUDA test inverted (and the generated per-op
    signatures and metadata guards with it) and returns the list the signature tokens of the calls that reached
    ``op_name``'s CUDA kernel (its Triton launcher, in the interpreter) are appended to."""
    import inspect

    from deep_gemm.core import eager, registry

    def count(op_name: str) -> list:
        if torch.cuda.is_available():
            pytest.skip("CPU tensors through the CUDA kernel need the interpreter (the *_gpu.py files cover GPUs)")
        source = inspect.getsource(eager._eager_signature).replace("not x.is_cuda", "x.is_cuda")
        namespace = dict(eager.__dict__)
        exec(compile(source, eager.__file__, "exec"), namespace)
        monkeypatch.setattr(eager, "_eager_signature", namespace["_eager_signature"])
        # The generated per-op functions and the metadata guards they leave (eager._remember) take CPU tensors too
        # while the test runs; every op's are regenerated inside it and restored after it, so no CPU guard outlives
        # it.
        monkeypatch.setattr(eager, "_EAGER_DEVICE_TEST", "is_cpu")
        for each in registry._KERNELS.values():
            for attr, value in (("eager_signature", None), ("eager_token", None), ("recent", ()), ("_guards", {})):
                monkeypatch.setattr(each, attr, value)
        kernels = registry.kernels_of(op_name)
        taken = []
        run_cuda = kernels.run_cuda

        def counting(full, token):
            taken.append(token)
            return run_cuda(full, token)
        monkeypatch.setattr(kernels, "run_cuda", counting)
        return taken

    return count


@pytest.fixture
def hc_compiled_graph():
    """``hc_compiled_graph(a, b, d, s)``: the one FX graph ``torch.compile(fullgraph=True)`` traces for a step calling
    the public ``tf32_hc_prenorm_gemm`` (the eager path must leave the dispatcher op in it, never its own fast
    path)."""
    return _hc_compiled_graph


def _hc_compiled_graph(a, b, d, s) -> str:
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    @torch.compile(backend=backend, fullgraph=True)
    def step(a, b, d, s):
        deep_gemm.tf32_hc_prenorm_gemm(a, b, d, s)
        return d.sum() + s.sum()

    step(a, b, d, s)
    assert len(graphs) == 1
    return graphs[0]


# ---- Hypothesis profiles (tests/test_properties.py) --------------------------------------------------------------
# "ci" (default): derandomized (the same examples every run, reproducible in CI), sized for the CPU references;
# "gpu": more examples, random; select with HYPOTHESIS_PROFILE=gpu.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is in the test extra; without it the property tests skip (importorskip)
    pass
else:
    _QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=_QUIET,
                              print_blob=True)
    settings.register_profile("gpu", max_examples=600, deadline=None, suppress_health_check=_QUIET, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
