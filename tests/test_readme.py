"""README.md as a user reads it: every ```python block runs as written (each in a fresh namespace, on the device it
picks itself: the CPU reference here, the Triton kernels on a GPU), and the README cites only repository files."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(index, capsys):
    code = BLOCKS[index]
    # A real module in sys.modules, as a user's script would be: torch.compile (Dynamo) imports the module named by
    # a traced function's globals, and on the GPU a bare exec namespace fails there with ModuleNotFoundError.
    module = types.ModuleType(f"readme_block_{index}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(code, f"README.md python block {index}", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    printed = capsys.readouterr().out
    if "calc_diff" in code:  # the quick start prints its error against float64
        assert float(printed.split()[-1]) < 1e-3
    if "torch.equal(compiled" in code:
        assert printed.strip().endswith("True")


def test_readme_cites_only_repository_paths():
    assert "shared/" not in README and "ROADMAP" not in README
    for path in re.findall(r"`((?:deep_gemm|tests|scripts|benchmarks|docs|research)/[\w./-]+)`", README):
        if "*" in path or "{" in path:
            continue
        assert (ROOT / path).exists(), path


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
               "get_symm_buffer_for_mega_moe", "legacy.m_grouped_bf16_gemm_nt_contiguous_tl"):
        assert re.search(rf"^{re.escape(op)}\s", out, flags=re.M), op
    assert "error: calc_diff" in out


def test_package_cites_no_file_outside_the_repository():
    # Notes that live outside the repository (the project's shared folder, its roadmap) mean nothing to a user.
    outside = re.compile(r"shared/|ROADMAP|KERNEL-NOTES|ANCHORS\.md|CI\.md|DEEPGEMM-SIDE-BY-SIDE|/work/")
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for path in sorted((ROOT / "deep_gemm").rglob("*.py*")) if path.suffix in (".py", ".pyi")
            for n, line in enumerate(path.read_text().splitlines(), 1) if outside.search(line)]
    assert not hits, "\n".join(hits)


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
