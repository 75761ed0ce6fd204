#!/usr/bin/env python
"""Record the public surface of a DeepGEMM build into ``tests/data/deepgemm_api.json`` (what ``tests/test_api_drift.py``
compares ours against).

The build's compiled extension cannot be imported without its CUDA runtime, so nothing is imported: the Python
sources are read by AST (``deep_gemm/__init__.py``, ``mega/__init__.py`` and the ``utils`` modules its top level
star-imports), and the schemas of the ops its ``_C`` binds are read as strings out of ``_C.so`` (a TORCH_LIBRARY
module keeps each ``m.def`` schema verbatim). Per public name: its kind and, for functions, each parameter's name,
kind and default (``repr`` of the literal; ``null`` when required). A name bound to ``_C.<op>`` takes the op's
schema parameters.

Usage:
    python scripts/record_deepgemm_api.py /path/to/unpacked/deep_gemm [--out tests/data/deepgemm_api.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "data" / "deepgemm_api.json"

# Imports of the top level that are not DeepGEMM API (standard library, typing, torch).
_FOREIGN_MODULES = {"os", "sys", "types", "torch", "typing", "__future__", "warnings"}


def _default(node: ast.expr | None):
    if node is None:
        return None
    try:
        return repr(ast.literal_eval(node))
    except ValueError:
        return ast.unparse(node)


def _params(fn: ast.FunctionDef) -> list[dict]:
    args = fn.args
    out = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(positional, defaults)):
        kind = "positional_only" if i < len(args.posonlyargs) else "positional_or_keyword"
        out.append({"name": a.arg, "kind": kind, "default": _default(d)})
    if args.vararg:
        out.append({"name": args.vararg.arg, "kind": "var_positional", "default": None})
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append({"name": a.arg, "kind": "keyword_only", "default": _default(d)})
    if args.kwarg:
        out.append({"name": args.kwarg.arg, "kind": "var_keyword", "default": None})
    return out


def _schema_params(schema: str) -> list[dict]:
    inner = schema.split("(", 1)[1].rsplit(") ->", 1)[0]
    out = []
    depth, part, parts = 0, "", []
    for ch in inner:
        depth += ch in "([" and 1 or 0
        depth -= ch in ")]" and 1 or 0
        if ch == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += ch
    if part.strip():
        parts.append(part)
    for p in parts:
        decl, _, default = p.strip().partition("=")
        out.append({"name": decl.split()[-1], "kind": "positional_or_keyword", "default": default or None})
    return out


def _schemas_from_library(so: Path) -> dict[str, str]:
    if not so.exists():
        return {}
    text = so.read_bytes().decode("latin-1")
    found = {}
    for match in re.finditer(r"([a-z_][a-z0-9_]*)\((?:[^()\x00]|\([a-z!]*\))*\) -> [^\x00]*", text):
        found.setdefault(match.group(1), match.group(0))
    return found


def _module_defs(path: Path) -> dict[str, ast.AST]:
    """Public top-level functions and classes a module defines (what a star import of it brings that is API)."""
    tree = ast.parse(path.read_text())
    return {n.name: n for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}


def _walk_top_level(body):
    for node in body:
        if isinstance(node, ast.Try):
            yield from _walk_top_level(node.body)
        else:
            yield node


def _entry(node, schemas, known) -> dict:
    if isinstance(node, ast.FunctionDef):
        return {"kind": "function", "params": _params(node)}
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        return {"kind": "class", "params": _params(init)[1:] if init else []}
    return {"kind": "other", "params": None}


def record(package: Path) -> dict:
    schemas = _schemas_from_library(package / "_C.so")
    names: dict[str, dict] = {}
    tree = ast.parse((package / "__init__.py").read_text())
    for node in _walk_top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            names[node.name] = _entry(node, schemas, names)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if not isinstance(target, ast.Name) or target.id.startswith("_"):
                    continue
                value = node.value
                if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "_C":
                    schema = schemas.get(value.attr)
                    names[target.id] = {"kind": "op", "op": value.attr,
                                        "params": _schema_params(schema) if schema else None}
                elif isinstance(value, ast.Name) and value.id in names:
                    names[target.id] = {**names[value.id], "alias_of": value.id}
                else:
                    names[target.id] = {"kind": "other", "params": None}
        elif isinstance(node, ast.ImportFrom) and node.level >= 1:
            module = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    source = package / module.replace(".", "/")
                    path = source / "__init__.py" if source.is_dir() else source.with_suffix(".py")
                    sub = ast.parse(path.read_text())
                    for inner in sub.body:  # a package's own star imports (utils: layout, math) and named ones
                        if isinstance(inner, ast.ImportFrom) and inner.level == 1:
                            for a in inner.names:
                                sub_path = path.parent / f"{inner.module}.py"
                                defs = _module_defs(sub_path) if sub_path.exists() else {}
                                if a.name == "*":
                                    for name, d in defs.items():
                                        names.setdefault(name, _entry(d, schemas, names))
                                elif inner.module and a.name in defs:
                                    names.setdefault(a.asname or a.name, _entry(defs[a.name], schemas, names))
                    for name, d in _module_defs(path).items():
                        names.setdefault(name, _entry(d, schemas, names))
                    continue
                public = alias.asname or alias.name
                if public.startswith("_"):
                    continue
                if not module:  # from . import mega, testing, utils
                    names[public] = {"kind": "module", "params": None}
                    continue
                source = package / module.replace(".", "/")
                path = source / "__init__.py" if source.is_dir() else source.with_suffix(".py")
                defs = _module_defs(path) if path.exists() else {}
                names[public] = _entry(defs[alias.name], schemas, names) if alias.name in defs else \
                    {"kind": "other", "params": None}
    version = (package / "VERSION").read_text().strip() if (package / "VERSION").exists() else "unknown"
    return {"deepgemm_version": version, "source": "sgl-deep-gemm (the build SGLang 0.5.23 installs)",
            "names": dict(sorted(names.items())),
            "c_ops": {name: _schema_params(s) for name, s in sorted(schemas.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package", type=Path, help="the unpacked deep_gemm package directory of the build")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    data = record(args.package)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}: {len(data['names'])} public names, {len(data['c_ops'])} _C ops "
          f"(DeepGEMM {data['deepgemm_version']})")


if __name__ == "__main__":
    main()
