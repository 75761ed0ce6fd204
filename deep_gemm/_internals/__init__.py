"""The one place deep_gemm touches private torch and Triton internals, or API whose form changed between releases.

Everything version-dependent lives in this package, one module per subject:

* ``triton_launcher``: calling a compiled Triton kernel's C launcher directly (the host fast path), per launcher ABI,
  with Triton's public compiled-kernel launch as the fallback for a Triton it does not know;
* ``torch_api``: the private ``torch._C`` entry points of the host fast path, each with a public fallback;
* ``gluon``: Gluon (``triton.experimental.gluon``) calls whose form changed between Triton releases;
* ``COMPILE_OPTIONS`` (here): compile options whose default changed between releases, pinned to what the kernels
  were tuned and verified with.

Each module knows the versions it was written and tested against (the support matrix in the README); an unknown
version takes the public path: slower host time, the same results, never an exception.
"""

from __future__ import annotations

import functools
import re

# Compile options every kernel launch and compile check passes. FP fusion (a * b + c as one FMA) is Triton's default
# up to 3.9, which warns that the default is going off: the kernels' numerics (the FP8 promotion is one FFMA per
# element) and speed were measured with it on, so it is asked for.
COMPILE_OPTIONS = {"enable_fp_fusion": True}


def parse_version(text: str) -> tuple[int, int, int]:
    """``"3.8.0"`` / ``"2.14.1+cu130"`` / ``"3.9.0.dev20261101"`` -> (major, minor, patch); missing parts are 0."""
    parts = [int(p) for p in re.findall(r"\d+", text.split("+")[0])[:3]]
    return tuple(parts + [0] * (3 - len(parts)))  # type: ignore[return-value]


@functools.lru_cache(maxsize=None)
def triton_version() -> tuple[int, int, int] | None:
    """The installed Triton's version, or None without Triton (imports Triton's top-level package)."""
    try:
        import triton
    except ImportError:
        return None
    return parse_version(triton.__version__)


@functools.lru_cache(maxsize=None)
def torch_version() -> tuple[int, int, int]:
    import torch

    return parse_version(torch.__version__)
