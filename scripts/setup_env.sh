#!/usr/bin/env bash
# Create (or reuse) the virtual environment VENV (default .venv): torch, the Triton that torch pins, numpy, pytest,
# and deep_gemm installed in editable mode.
#
#   TORCH_VERSION  the torch to install, an exact release (default 2.14.1, the torch vLLM 0.34 and SGLang 0.5.23
#                  run); 2.11.0 to 2.15.0 are supported. An existing venv with another torch is changed in place.
#   VENV           the venv directory (default .venv).
#   VENV_SYSTEM=1  create the venv with --system-site-packages, to use a torch the machine already has: without an
#                  explicit TORCH_VERSION, a visible torch is kept as it is.
#   PYTHON         the interpreter that creates the venv (default python3).
#
# torch goes first and pinned: an unpinned torch pulled in by `pip install -e .` would resolve to whatever is newest.
# Triton then follows torch's own requirement (a CUDA torch from PyPI pins the Triton it was built with and brings
# it); CPU builds of torch declare no Triton, so TRITON_FOR_TORCH below gives the one the CUDA build of the same
# minor version pins. Everything comes from the package index pip is configured with (PyPI on a fresh machine).
# Running it again changes nothing when the venv already holds that stack.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
KEEP_TORCH=0
if [ -z "${TORCH_VERSION:-}" ] && [ "${VENV_SYSTEM:-0}" = 1 ]; then KEEP_TORCH=1; fi
TORCH_VERSION=${TORCH_VERSION:-2.14.1}

# torch minor version -> the Triton its CUDA wheels on PyPI pin; used for CPU builds of torch, which pin none.
TRITON_FOR_TORCH="2.11=3.6.0 2.12=3.7.1 2.13=3.7.1 2.14=3.8.0 2.15=3.9.0"

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "setup_env.sh: $PY is not Python 3.10 or newer; set PYTHON to one that is" >&2
    exit 1
  fi
  venv_args=()
  if [ "${VENV_SYSTEM:-0}" = 1 ]; then venv_args=(--system-site-packages); fi
  if ! "$PY" -m venv ${venv_args[@]+"${venv_args[@]}"} "$VENV"; then
    rm -rf "$VENV"
    echo "setup_env.sh: $PY cannot create a venv (on Debian and Ubuntu: apt install python3-venv)" >&2
    exit 1
  fi
fi
pip_install() { "$VENV/bin/python" -m pip install -q "$@"; }

# What the venv holds, as "torch triton numpy pytest wanted-triton" ("-" for what is missing). wanted-triton is the
# requirement to install: torch's own (importlib.metadata, e.g. "triton~=3.8.0"), else the table's entry for torch's
# minor version ("triton==3.7.1"); "ok" when the installed Triton satisfies it.
stack() {
  "$VENV/bin/python" - "$TRITON_FOR_TORCH" <<'PYTHON'
import importlib.metadata as md
import sys

from pip._vendor.packaging.requirements import Requirement  # pip's copy of `packaging`: every venv has it


def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "-"


torch, triton = version("torch"), version("triton")
wanted = None
if torch != "-":
    for text in md.requires("torch") or []:
        req = Requirement(text)
        if req.name == "triton" and (req.marker is None or req.marker.evaluate({"extra": ""})):
            wanted = req
    if wanted is None:  # a CPU build
        table = dict(entry.split("=") for entry in sys.argv[1].split())
        minor = ".".join(torch.split("+")[0].split(".")[:2])
        if minor in table:
            wanted = Requirement(f"triton=={table[minor]}")
if wanted is not None and triton != "-" and wanted.specifier.contains(triton, prereleases=True):
    wanted = "ok"
print(torch, triton, version("numpy"), version("pytest"), str(wanted or "-").replace(" ", ""))
PYTHON
}

read -r have_torch have_triton have_numpy have_pytest want_triton <<< "$(stack)"
if [ "$KEEP_TORCH" = 1 ] && [ "$have_torch" != - ]; then
  TORCH_VERSION=${have_torch%%+*}
fi
if [ "${have_torch%%+*}" != "$TORCH_VERSION" ]; then
  echo "installing torch==$TORCH_VERSION into $VENV (found: $have_torch)"
  pip_install "torch==$TORCH_VERSION"
  read -r have_torch have_triton have_numpy have_pytest want_triton <<< "$(stack)"
fi
if [ "$want_triton" = - ]; then
  echo "setup_env.sh: no Triton known for torch $have_torch (supported: torch 2.11 to 2.15)" >&2
  exit 1
fi

# Triton 3.6's interpreter (the CPU test path) breaks with numpy >= 2.4; later Triton releases work with it.
triton_next=$have_triton
if [ "$want_triton" != ok ]; then triton_next=${want_triton##*[=~]}; fi
case "$triton_next" in 3.6.*) numpy_spec="numpy<2.4" ;; *) numpy_spec="numpy" ;; esac
numpy_too_new=0
if [ "$numpy_spec" = "numpy<2.4" ] && [ "$have_numpy" != - ] \
   && [ "$(printf '%s\n' "$have_numpy" 2.4 | sort -V | head -1)" = 2.4 ]; then
  numpy_too_new=1
fi
if [ "$want_triton" != ok ] || [ "$have_numpy" = - ] || [ "$have_pytest" = - ] || [ "$numpy_too_new" = 1 ]; then
  packages=("$numpy_spec" pytest hypothesis)
  if [ "$want_triton" != ok ]; then packages=("$want_triton" "${packages[@]}"); fi
  pip_install "${packages[@]}"
fi
# The property-based tests (tests/test_properties_*.py) need hypothesis, next to pytest.
"$VENV/bin/python" -c "import hypothesis" 2>/dev/null || pip_install hypothesis

"$VENV/bin/python" -m pip install -q --no-deps -e .
echo "environment ready: $VENV ($("$VENV/bin/python" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'))"
