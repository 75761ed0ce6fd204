"""Which op families run their Triton kernels by default on CUDA.

A family's kernels are checked on the CPU before they ever reach a GPU: in Triton's interpreter against the torch
reference on random data, and compiled for sm_90a with every supported Triton (spills, wgmma). That catches most
mistakes but not all (races, real TMA / wgmma lowering, shared-memory limits), so a family whose kernels have not
yet passed their GPU tests is listed in ``AWAITING_GPU``: on CUDA its ops run the torch reference (slow, known
correct) unless the caller asks for the kernels through the family's ``Overrides(kernels=True)`` (tests, the
sanitizer cases, benchmarks). A family leaves the list in the change that records its passing GPU run under
``benchmarks/results/``; ``deep_gemm.backends()`` reports a listed family's ops as ``triton (opt-in: ...)``.
"""

from __future__ import annotations

# family (as core.registry.FAMILY names it, or a sub-family of SUB_FAMILIES) -> the Overrides class that asks for
# its kernels (what backends() tells the reader to use).
AWAITING_GPU: dict[str, str] = {"mega_ranks": "MegaOverrides"}

# Keys that gate part of a family's kernels on their own (the family's other kernels passed their GPU run
# already) -> that family. The sub-family's launchers ask ``kernels_wanted(sub_family, ...)``.
# bf16_mega_moe's kernels and fp8_fp4_mega_moe's at one rank (both passed); fp8_mega_moe's over several CUDA ranks
# (symmetric memory). fp8_mega_moe's at one rank passed.
SUB_FAMILIES: dict[str, str] = {"mega_bf16": "mega", "mega_ranks": "mega", "mega_fp8_fp4": "mega"}


def kernels_by_default(family: str) -> bool:
    """Whether ``family``'s CUDA launchers run their kernels when no override asks for them."""
    return family not in AWAITING_GPU


def kernels_wanted(family: str, requested: bool) -> bool:
    """Whether a launcher of ``family`` runs its kernels: by default, or because ``Overrides(kernels=True)``."""
    return requested or kernels_by_default(family)


def opt_in_note(family: str, extra: str = "") -> str:
    """The ``backends()`` note of an op of ``family``: says how to run its kernels while they await a GPU run."""
    parts = []
    if not kernels_by_default(family):
        parts.append(f"opt-in: the reference runs unless {AWAITING_GPU[family]}(kernels=True), until the kernels "
                     "have passed their GPU tests")
    if extra:
        parts.append(extra)
    return "; ".join(parts)
