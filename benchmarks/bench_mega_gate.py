"""bf16_mega_gate: kernel time (us) of this package's Triton path (the BF16 gate GEMM + the routing kernel) at
DeepSeek V3 / V4 router shapes, with the routing kernel alone and the torch reference on the same GPU (what runs by
default while the family awaits its GPU run). DeepGEMM runs the gate on SM100 only, so on Hopper there is no
DeepGEMM row to compare with.

    PYTHONPATH=$PWD python benchmarks/bench_mega_gate.py --out $OUT/ours

Serving form: sqrtsoftplus (V4) or sigmoid (V3) scores, a bias, one shared expert routed where E allows it, a token
mask, an EP map of two replicas, ``unmapped_topk_idx`` written.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from harness import KernelTimer, write_results  # noqa: E402

# (hidden, E, K, scoring)
ROUTERS = ((4096, 256, 6, "sqrtsoftplus"), (7168, 384, 6, "sqrtsoftplus"), (7168, 256, 8, "sigmoid"))
TOKENS = (1, 16, 128, 1024, 4096)


def rows(timer, tokens_list):
    from deep_gemm.core.registry import run_launcher
    from deep_gemm.mega_gate import launch
    from deep_gemm.mega_gate.plan import MegaGateOverrides
    from deep_gemm.mega_gate.reference import bf16_mega_gate_reference
    from deep_gemm.testing.mega_gate import ARG_NAMES, logits_of, make_inputs
    on = MegaGateOverrides(kernels=True)
    results = []
    for hidden, experts, topk, scoring in ROUTERS:
        shared = 1 if experts % topk == 0 else 0
        for tokens in tokens_list:
            d = make_inputs(tokens, experts, topk, hidden=hidden, scoring=scoring, bias="bias", shared=shared,
                            mask=True, replicas=2, unmapped=True, device="cuda")
            full = {k: d[k] for k in ("x", "weight") + ARG_NAMES}
            rest = [d[k] for k in ARG_NAMES]
            logits = logits_of(d)
            us = timer(lambda: run_launcher("bf16_mega_gate", **full, launcher_kwargs=dict(overrides=on)))
            route_us = timer(lambda: launch.route(logits, *rest, overrides=on))
            ref_us = timer(lambda: bf16_mega_gate_reference(*full.values()))
            row = dict(table="mega_gate", m=tokens, n=experts, k=hidden, form=f"{scoring} top{topk}+{shared}",
                       us=us, note=f"routing kernel {route_us:.1f} us; torch reference {ref_us:.1f} us")
            print(f" > mega_gate (t={tokens:5}, h={hidden}, e={experts}, k={topk}+{shared}): {us:7.1f} us | "
                  f"routing {route_us:6.1f} us | reference {ref_us:8.1f} us", flush=True)
            results.append(row)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    args = parser.parse_args()
    results = rows(KernelTimer(), [int(t) for t in args.tokens.split(",")])
    write_results(args.out, "bench_mega_gate", results)


if __name__ == "__main__":
    main()
