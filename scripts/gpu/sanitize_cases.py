"""Run the sanitizer cases of every kernel family in one process: what scripts/gpu/sanitize.sh runs under each
compute-sanitizer tool (one process per tool: compiles and module loads are paid once).

    python scripts/gpu/sanitize_cases.py                    # every family's cases
    python scripts/gpu/sanitize_cases.py --only fp8/dense   # cases whose "family/name" contains any given substring
    python scripts/gpu/sanitize_cases.py --list             # names only (no GPU needed)

Cases come from scripts/gpu/sanitize/<family>.py, each exposing ``CASES = [(name, fn), ...]``; ``fn()`` runs one
small call of one kernel path on fresh random data and raises when the result differs from the reference (the
convention: scripts/gpu/sanitize/README.md). Every case is followed by a device synchronisation, so an error the
kernel raised (an aborted launch) is charged to that case. Prints one line per case and a last line
``CASES: <correct>/<total> correct``; exits 1 when any case failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CASE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sanitize")


def families() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(CASE_DIR) if f.endswith(".py") and not f.startswith("_"))


def load_cases(family: str) -> list[tuple[str, object]]:
    """The family file's CASES, checked against the convention (unique string names, callables)."""
    spec = importlib.util.spec_from_file_location(f"sanitize_{family}", os.path.join(CASE_DIR, f"{family}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = list(getattr(module, "CASES"))
    names = [name for name, _ in cases]
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"{family}.py: CASES names must be unique non-empty strings, got {names}")
    if not all(callable(fn) for _, fn in cases):
        raise ValueError(f"{family}.py: every CASES entry is (name, callable)")
    return [(f"{family}/{name}", fn) for name, fn in cases]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="substrings of 'family/name' to run")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    cases, load_errors = [], []
    for family in families():
        try:
            cases += load_cases(family)
        except Exception as error:  # noqa: BLE001  (one broken family file must not hide the others)
            load_errors.append(family)
            print(f"LOAD {family}: FAIL {type(error).__name__}: {error}", flush=True)
    if args.only:
        cases = [(name, fn) for name, fn in cases if any(s in name for s in args.only)]
    if args.list:
        print("\n".join(name for name, _ in cases))
        return 0
    import torch
    correct = 0
    for name, fn in cases:
        start = time.time()
        try:
            torch.manual_seed(0)
            fn()
            torch.cuda.synchronize()
            correct += 1
            print(f"CASE {name}: ok ({time.time() - start:.1f} s)", flush=True)
        except Exception as error:  # noqa: BLE001  (report and go on: the summary counts failures)
            print(f"CASE {name}: FAIL ({time.time() - start:.1f} s) {type(error).__name__}: {error}", flush=True)
            traceback.print_exc(limit=4)
    print(f"CASES: {correct}/{len(cases)} correct" + (f", family files failing to load: {load_errors}"
                                                       if load_errors else ""), flush=True)
    return 0 if correct == len(cases) and not load_errors else 1


if __name__ == "__main__":
    sys.exit(main())
