"""Pair the rows of two runs of one benchmark script (this package, DeepGEMM) and print DeepGEMM time / our time per
case (> 1: ours faster) and geometric means per table.

    python benchmarks/compare_providers.py OURS.json DEEPGEMM.json [--out SUMMARY.md]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from harness import case_key, geomean  # noqa: E402


def compare(ours: dict, dg: dict) -> list[str]:
    theirs = {case_key(r): r for r in dg["results"]}
    lines, tables = [], {}
    for row in ours["results"]:
        other = theirs.get(case_key(row))
        if other is None or not row.get("us") or not other.get("us"):
            continue
        ratio = other["us"] / row["us"]
        tables.setdefault(row.get("table", "all"), []).append(ratio)
        case = ", ".join(f"{k}={v}" for k, v in row.items() if k not in ("table",) and k not in _SKIP)
        lines.append(f"| {row.get('table', '')} | {case} | {row['us']:.1f} | {other['us']:.1f} | {ratio:.2f}x |")
    head = [f"ours: {ours['meta'].get('provider')} ({ours['meta'].get('date')}, {ours['meta'].get('gpu')}); "
            f"yardstick: {dg['meta'].get('provider')} (same device call, same timer)", "",
            "| table | case | ours us | DeepGEMM us | DeepGEMM time / ours |", "|---|---|---|---|---|"]
    tail = ["", "| table | geomean (DeepGEMM time / ours) | rows |", "|---|---|---|"]
    tail += [f"| {t} | {geomean(rs):.3f}x | {len(rs)} |" for t, rs in tables.items()]
    return head + lines + tail


_SKIP = frozenset(("us", "tflops", "gbps", "diff", "torch_us", "vs_torch", "note"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ours")
    p.add_argument("deepgemm")
    p.add_argument("--out")
    args = p.parse_args()
    with open(args.ours) as f, open(args.deepgemm) as g:
        lines = compare(json.load(f), json.load(g))
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
