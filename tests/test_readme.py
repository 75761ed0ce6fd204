"""The README and the docs as a user reads them: the two commands exist and do what the README says, every python
block runs as written (each in a fresh namespace, on the device it picks itself: the CPU reference here, the
Triton kernels on a GPU), every environment variable of the README's table is read by the package, every path the
docs cite exists, and the tree carries no lab-notebook words."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# The documents a user or a maintainer reads; their python blocks must run, their paths must exist.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").rglob("*.md")),
        *sorted((ROOT / "scripts").rglob("*.md"))]
RUNNABLE = [ROOT / "README.md", ROOT / "docs" / "EXAMPLES.md"]
BLOCKS = [(path.relative_to(ROOT).as_posix(), block) for path in RUNNABLE
          for block in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)]
# Repository paths as the docs cite them: a top-level folder of this repository, then a path.
CITED = re.compile(r"(?<![\w./-])((?:deep_gemm|tests|scripts|benchmarks|docs|\.ci)/[\w./*{},-]*[\w/*}])")
# Words of a lab notebook (built here so that this file does not contain them): numbered runs and tracker items.
NOTEBOOK = re.compile(r"\b(?:" + "ses" + r"sions?|GPU calls? \d+|device calls? \d+|\bcall \d+\b|" + "iss"
                      + r"ues? \d+)\b", re.I)


def _package_sources() -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "deep_gemm").rglob("*.py")))


def test_two_commands_exist_and_do_what_the_readme_says():
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    assert "bash scripts/run_demo.sh" in section and "bash scripts/run_tests.sh" in section
    demo = (ROOT / "scripts" / "run_demo.sh").read_text()
    tests = (ROOT / "scripts" / "run_tests.sh").read_text()
    assert "scripts/setup_env.sh" in demo and "-m deep_gemm" in demo
    assert "scripts/setup_env.sh" in tests and "-m pytest tests" in tests
    for script in ("run_demo.sh", "run_tests.sh", "setup_env.sh", "generate_pyi.py", "run_matrix.sh"):
        assert (ROOT / "scripts" / script).is_file(), script
    # CI runs the README's test command.
    assert "bash scripts/run_tests.sh" in (ROOT / ".ci" / "run").read_text()


def test_runnable_docs_have_examples():
    assert len(BLOCKS) >= 8
    assert {doc for doc, _ in BLOCKS} == {"README.md", "docs/EXAMPLES.md"}


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"{doc}-{i}" for i, (doc, _) in enumerate(BLOCKS)])
def test_python_block_runs_as_written(index, capsys):
    doc, code = BLOCKS[index]
    # A real module in sys.modules, as a user's script would be: torch.compile (Dynamo) imports the module named by
    # a traced function's globals, and on the GPU a bare exec namespace fails there with ModuleNotFoundError.
    module = types.ModuleType(f"doc_block_{index}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(code, f"{doc} python block {index}", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    printed = capsys.readouterr().out
    if "calc_diff" in code:  # the quick start prints its error against float64
        assert float(printed.split()[-1]) < 1e-3
    if "torch.equal(compiled" in code:
        assert printed.strip().endswith("True")


def test_every_environment_variable_of_the_readme_is_read_by_the_package():
    section = README.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    names = [name for row in re.findall(r"^\| ([^|]+)\|", section, flags=re.M)
             for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)]
    assert "DG_JIT_CACHE_DIR" in names and "TRITON_INTERPRET" in names
    sources = _package_sources()
    unread = [name for name in names if f'"{name}"' not in sources]
    assert not unread, unread


def test_docs_cite_only_paths_in_the_tree():
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        for path in CITED.findall(text):
            if any(c in path for c in "*{}"):  # a pattern (tests/test_eager_path*.py) or a set of files
                continue
            if not (ROOT / path.rstrip("/")).exists():
                missing.append(f"{doc.relative_to(ROOT)}: {path}")
        if doc.parent == ROOT / "benchmarks" / "results":  # result files cite each other by file name
            for name in re.findall(r"`(\d{4}-\d\d-\d\d-[\w.-]+\.(?:md|json|log))`", text):
                if not (doc.parent / name).exists():
                    missing.append(f"{doc.relative_to(ROOT)}: {name}")
    assert not missing, "\n".join(missing)


def test_docs_cite_nothing_outside_the_repository():
    outside = re.compile(r"\.\./shared|shared/tools|ROADMAP|KERNEL-NOTES|ANCHORS\.md|/work/|research/")
    hits = [f"{doc.relative_to(ROOT)}: {line.strip()}" for doc in DOCS
            for line in doc.read_text().splitlines() if outside.search(line)]
    assert not hits, "\n".join(hits)


def test_code_cites_no_file_outside_the_repository():
    # Notes that live outside the repository (the project's shared folder, its roadmap) mean nothing to a user.
    # research/ left the tree (git history keeps it): what it decided is in docs/TUNING.md.
    outside = re.compile(r"shared/|ROADMAP|KERNEL-NOTES|ANCHORS\.md|CI\.md|DEEPGEMM-SIDE-BY-SIDE|/work/|research/")
    sources = [*sorted((ROOT / "deep_gemm").rglob("*.py*")), *sorted((ROOT / "scripts").rglob("*.py")),
               *sorted((ROOT / "benchmarks").rglob("*.py"))]
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for path in sources if path.suffix in (".py", ".pyi")
            for n, line in enumerate(path.read_text().splitlines(), 1) if outside.search(line)]
    assert not hits, "\n".join(hits)


def _tree_files() -> list[Path]:
    """The repository's files as git sees them (tracked, and untracked ones not ignored); without git, every file
    outside hidden folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout.decode()
        files = [ROOT / name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*") if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    return [p for p in files if p.is_file()]


def test_no_notebook_words_in_the_tree():
    hits = []
    for path in _tree_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if NOTEBOOK.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not hits, f"{len(hits)} lines:\n" + "\n".join(hits[:60])


def test_demo_help_does_not_run_the_demo(capsys):
    from deep_gemm.demo import main
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "calc_diff" in out and "fp8_gemm_nt" not in out


def test_demo_covers_every_family_and_passes_on_cpu(capsys):
    from deep_gemm.demo import main
    assert main(["--device", "cpu"]) == 0
    out = capsys.readouterr().out
    for op in ("fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
               "k_grouped_fp8_gemm_tn_contiguous", "bf16_gemm_nt", "einsum", "fp8_einsum", "fp8_mqa_logits",
               "fp8_paged_mqa_logits", "tf32_hc_prenorm_gemm", "get_mn_major_tma_aligned_tensor",
               "get_symm_buffer_for_mega_moe", "legacy.m_grouped_bf16_gemm_nt_contiguous_tl",
               "k_grouped_fp4_gemm_nt_contiguous", "batched_syrk", "fp8_fp4_sparse_mqa_logits",
               "get_mqa_logits_metadata", "bf16_mega_gate", "mega_mhc", "fp8_mega_moe"):
        assert re.search(rf"^{re.escape(op)}\s", out, flags=re.M), op
    assert "error: calc_diff" in out
    # every registered family with a device kernel (not the host-only knobs) has a row
    from deep_gemm.core import registry
    shown = {registry.FAMILY.get(line.split()[0]) for line in out.splitlines() if line.split()}
    with_kernels = {registry.FAMILY[name] for name, k in registry._KERNELS.items() if k.triton is not None}
    assert with_kernels <= shown, with_kernels - shown


def _setup_env_table() -> tuple[str, dict[str, str]]:
    """scripts/setup_env.sh's default torch and its table torch minor version -> Triton."""
    script = (ROOT / "scripts" / "setup_env.sh").read_text()
    default = re.search(r"TORCH_VERSION=\$\{TORCH_VERSION:-([\d.]+)\}", script).group(1)
    table = dict(entry.split("=") for entry in re.search(r'TRITON_FOR_TORCH="([^"]+)"', script).group(1).split())
    return default, table


def test_support_table_and_install_block_follow_setup_env():
    # The README's support table, its Install block and the setup script name the same torch -> Triton pairs.
    default, table = _setup_env_table()
    section = README.split("## Supported versions", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| \**([\d.]+)\** [^|]*\| ([\d.]+) \|", section, flags=re.M)
    assert {torch.rsplit(".", 1)[0] for torch, _ in rows} == set(table)
    for torch, triton in rows:
        assert table[torch.rsplit(".", 1)[0]] == triton, torch
    install = README.split("## Install", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert f"pip install torch=={default} " in install
    assert f"pip install triton=={table[default.rsplit('.', 1)[0]]} " in install


class _Item:
    """What conftest._sample reads of a collected test: its module, class and function name, and its node id."""

    def __init__(self, module, function, param=None, cls=None):
        self.module = types.SimpleNamespace(__name__=module)
        self.cls = cls
        self.originalname = function
        self.name = function if param is None else f"{function}[{param}]"


def test_matrix_sample_keeps_every_test_function(monkeypatch):
    """DG_TEST_SAMPLE (the support matrix's quick pass) keeps each test function's first N parametrisations and
    its last: fewer cases, the same functions; a value that is not a positive integer is refused."""
    from conftest import _sample

    class Config:
        deselected = []
        hook = type("Hook", (), {"pytest_deselected": staticmethod(lambda items: Config.deselected.extend(items))})

    test_class = type("TestC", (), {})
    every = ([_Item("test_a", "test_one", p) for p in range(5)] + [_Item("test_a", "test_plain")]
             + [_Item("test_a", "test_one", p, cls=test_class) for p in range(3)]
             + [_Item("test_b", "test_one", p) for p in range(2)] + [_Item("test_b", "test_two", p) for p in range(4)])
    groups = {}
    for item in every:
        groups.setdefault((item.module.__name__, item.cls, item.originalname), []).append(item)
    for n, kept_per_function in (("1", {5: 2, 1: 1, 3: 2, 2: 2, 4: 2}), ("2", {5: 3, 1: 1, 3: 3, 2: 2, 4: 3})):
        monkeypatch.setenv("DG_TEST_SAMPLE", n)
        items, Config.deselected = list(every), []
        _sample(Config, items)
        assert len(items) + len(Config.deselected) == len(every)
        for cases in groups.values():
            kept = [item for item in items if item in cases]
            first = int(n)
            assert kept == cases[:first] + [c for c in cases[-1:] if c not in cases[:first]]
            assert len(kept) == kept_per_function[len(cases)]
    for bad in ("zero", "0", "-1"):
        monkeypatch.setenv("DG_TEST_SAMPLE", bad)
        with pytest.raises(pytest.UsageError, match="DG_TEST_SAMPLE"):
            _sample(Config, list(every))
    # The collection hook reads the variable: a real collection with a bad value is refused.
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                          "tests/test_launch_plan.py"], cwd=ROOT, env=dict(os.environ, DG_TEST_SAMPLE="zero"),
                         capture_output=True, text=True)
    assert run.returncode != 0 and "DG_TEST_SAMPLE" in run.stdout + run.stderr
