"""Our public surface against the DeepGEMM build we mirror (``tests/data/deepgemm_api.json``, recorded from the
build SGLang 0.5.23 installs by ``scripts/record_deepgemm_api.py``).

Every public name of that build must exist here, and every parameter of its functions must be accepted here under
the same name, at the same position, with the same default. What does not yet is listed below, one entry per gap
with what it needs; the test fails both when a new gap appears (the next drift) and when a listed gap is closed (so
the lists shrink as work lands; nothing is skipped silently)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import deep_gemm

DATA = json.loads((Path(__file__).parent / "data" / "deepgemm_api.json").read_text())

# Public names of the build that deep_gemm lacks: name -> what it needs.
MISSING_NAMES = {
    # the build's own infrastructure
    "find_cuda_home": "the build's nvcc locator for its C++ JIT; no CUDA build here (Triton finds its own way)",
    "persistent_envs": "the build's baked-in environment (setup-time JIT settings); nothing to bake here",
}

# (function, parameter) -> what it needs: parameters of the build that our function of that name does not accept
# under that name and position, or whose default differs.
PARAMETER_GAPS: dict = {}


def _our_params(obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    params = list(inspect.signature(target).parameters.values())
    return params[1:] if inspect.isclass(obj) else params


def _repr_default(p: inspect.Parameter):
    if p.default is inspect.Parameter.empty:
        return None
    value = p.default
    return repr(tuple(value) if isinstance(value, list) else value)


def _normalise(default):
    """The build's default as recorded (a repr, or a schema literal for ops), comparable with ours."""
    if default is None:
        return None
    if default in ("True", "False", "None"):
        return default
    if default.startswith("torch."):  # a dtype written by its alias (torch.float is torch.float32)
        import torch
        value = getattr(torch, default[len("torch."):], None)
        return repr(value) if value is not None else default
    try:
        import ast
        value = ast.literal_eval(default)
    except (ValueError, SyntaxError):
        return default
    return repr(tuple(value) if isinstance(value, list) else value)


def parameter_gaps() -> dict:
    gaps = {}
    for name, entry in DATA["names"].items():
        if entry["params"] is None or name in MISSING_NAMES or not hasattr(deep_gemm, name):
            continue
        obj = getattr(deep_gemm, name)
        if not callable(obj):
            continue
        ours = _our_params(obj)
        by_name = {p.name: (i, p) for i, p in enumerate(ours)}
        for i, theirs in enumerate(entry["params"]):
            key = (name, theirs["name"])
            if theirs["kind"] in ("var_positional", "var_keyword"):
                continue
            if theirs["name"] not in by_name:
                at = ours[i].name if i < len(ours) else None
                gaps[key] = f"not accepted (position {i} is {at!r} here)" if at else "not accepted"
                continue
            j, p = by_name[theirs["name"]]
            if j != i:
                gaps[key] = f"at position {j} here, {i} there"
            elif p.kind == inspect.Parameter.POSITIONAL_ONLY and theirs["kind"] != "positional_only":
                gaps[key] = "positional-only here"
            elif _normalise(theirs["default"]) != _repr_default(p):
                gaps[key] = f"default {_repr_default(p)} here, {theirs['default']} there"
    return gaps


def test_records_the_mirrored_version():
    assert DATA["deepgemm_version"] == "0.2.3.post2"


@pytest.mark.parametrize("name", sorted(DATA["names"]))
def test_public_name_exists(name):
    if name in MISSING_NAMES:
        assert not hasattr(deep_gemm, name), f"{name} landed: remove it from MISSING_NAMES"
        return
    assert hasattr(deep_gemm, name), f"deep_gemm.{name} is missing (DeepGEMM {DATA['deepgemm_version']} has it)"


def test_missing_names_are_names_of_the_build():
    assert set(MISSING_NAMES) <= set(DATA["names"])


def test_parameters_match_or_are_listed_gaps():
    found = parameter_gaps()
    new = {k: v for k, v in found.items() if k not in PARAMETER_GAPS}
    closed = sorted(k for k in PARAMETER_GAPS if k not in found)
    assert not new, "parameters that differ from DeepGEMM's: " + "; ".join(f"{k}: {v}" for k, v in sorted(new.items()))
    assert not closed, f"gaps closed: remove them from PARAMETER_GAPS: {closed}"


@pytest.mark.parametrize("op", sorted(DATA["c_ops"]))
def test_c_ops_of_the_build_are_reachable(op):
    """The build's TORCH_LIBRARY ops are its ``_C`` names; each is on our ``_C`` or its public function is listed
    missing above."""
    public_missing = op in MISSING_NAMES or op in _C_ONLY_MISSING
    assert hasattr(deep_gemm._C, op) != public_missing, (
        f"_C.{op}: " + ("landed: remove it from the missing lists" if public_missing else "missing"))


# Ops the build binds only on its _C (no top-level function of that name), that we lack.
_C_ONLY_MISSING = {
    "slice_symm_buffer_for_mega_moe": "Mega MoE: ours is _slice_symm_buffer_for_mega_moe with a serialised layout",
    "preprocess_sf": "the build's SM100 scale-factor preprocessing op (no public function)",
}
