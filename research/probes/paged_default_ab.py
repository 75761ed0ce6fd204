"""A/B of the paged decode kernel's configs in one process, alternating, each row timed 4 times per config (median).

Session 29 (issue 17): the lean page loop (PagedConfig.lean_page_loop: scales through their own TMA descriptor, a
32-bit page index; no local memory under the row-pair default's 128-register cap, where the plain loop spilled 2
loads + 2 stores per page per warp) against the plain loop with every other field of the shape's default, on the
bench's paged rows. On the row-pair shapes (next_n >= 2, H=64) the lean loop is the new default and the plain one the
session-24 default; on the others (next_n=1, H=32) the plain loop stays the default and the lean one is the
alternative. Also checks every written logit of the two configs bitwise (the same arithmetic; only addressing
differs).

    PYTHONPATH=$PWD python research/probes/paged_default_ab.py [--rows B,NEXT_N,H,D,AVG;...] [--reps 10]
    PYTHONPATH=$PWD python research/probes/paged_default_ab.py --field register_page_scales   # session 30
    PYTHONPATH=$PWD python research/probes/paged_default_ab.py --field num_stages=6
    PUBLIC_VS_LAUNCHER=1 PYTHONPATH=$PWD python research/probes/paged_default_ab.py   # see public_vs_launcher
"""

import argparse
import ast
import dataclasses
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

import deep_gemm  # noqa: E402
from bench_mqa_logits import BLOCK_KV, PAGED, PAGED_QUICK, paged_inputs  # noqa: E402
from deep_gemm._ops.library import run_launcher  # noqa: E402
from deep_gemm.attention.triton_launch import paged_default_config  # noqa: E402
from harness import kernel_times_by_name  # noqa: E402

# The bench rows issue 17 names (bench_mqa_logits.PAGED): row pairs at H=64 (long and many short contexts), one-row
# atoms, and H=32 row pairs.
AB_ROWS = [PAGED[3], PAGED[5], PAGED[2], PAGED[4], PAGED[6], PAGED[1]]


def configs_of(next_n: int, h: int, d: int, field: str = "lean_page_loop") -> dict:
    """{name: PagedConfig}: the shape's default with the plain and with the lean page loop, default first; with
    another boolean PagedConfig field (--field register_page_scales, session 30): the default with that field on
    against off."""
    default = paged_default_config(next_n, h, d, BLOCK_KV, False)
    if "=" in field:  # FIELD=VALUE (e.g. num_stages=6): the default against the default with that value
        name, value = field.split("=", 1)
        return {"default": default, field: dataclasses.replace(default, **{name: ast.literal_eval(value)})}
    if field != "lean_page_loop":  # the field on against off; the default's setting named first
        on, off = (dataclasses.replace(default, **{field: v}) for v in (True, False))
        return {f"{field} (default)": on, "off": off} if getattr(default, field) else {"default": default, field: on}
    plain, lean = (dataclasses.replace(default, lean_page_loop=on) for on in (False, True))
    return {"lean (default)": lean, "plain": plain} if default.lean_page_loop else \
        {"plain (default)": plain, "lean": lean}


def ab_row(batch, next_n, h, d, avg, reps, rounds=4, field="lean_page_loop"):
    num_sms = deep_gemm.get_num_sms()
    q, cache, w, lens2d, table, max_len, _ = paged_inputs(batch, next_n, h, d, avg)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms)
    configs = configs_of(next_n, h, d, field)

    def call(cfg, clean=False):
        return run_launcher("fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta, max_len, clean,
                            torch.float32, None, launcher_kwargs=dict(config=cfg))

    # Bits compared with clean_logits (every column written; raw calls leave junk past each context).
    first, second = (call(cfg, clean=True).view(torch.int32) for cfg in configs.values())
    same = torch.equal(first, second)
    del first, second
    times = {name: [] for name in configs}
    for _ in range(rounds):
        for name, cfg in configs.items():
            t = kernel_times_by_name(lambda cfg=cfg: call(cfg), ("paged_mqa_logits",), reps=reps)
            times[name].append(t["paged_mqa_logits"])
    med = {name: statistics.median(v) for name, v in times.items()}
    (n0, t0), (n1, t1) = med.items()
    print(f"BSZ={batch} NextN={next_n} H={h} L={avg}: {n0} {t0:.1f} us, {n1} {t1:.1f} us, {n1}/{n0} time "
          f"{t1 / t0:.3f} | bitwise {'SAME' if same else 'DIFFERENT'} | runs "
          f"{ {n: [round(x, 1) for x in v] for n, v in times.items()} }", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", help="B,NEXT_N,H,D,AVG rows separated by ';' (default: AB_ROWS)")
    parser.add_argument("--quick", action="store_true", help="bench_mqa_logits.PAGED_QUICK")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--field", default="lean_page_loop",
                        help="boolean PagedConfig field A/B'd against the default (lean_page_loop: plain vs lean), "
                             "or FIELD=VALUE (the default against the default with that value)")
    args = parser.parse_args()
    rows = AB_ROWS
    if args.quick:
        rows = PAGED_QUICK
    if args.rows:
        rows = [tuple(int(x) for x in r.split(",")) for r in args.rows.split(";")]
    torch.manual_seed(0)
    for row in rows:
        ab_row(*row, reps=args.reps, field=args.field)
        torch.cuda.empty_cache()


if __name__ == "__main__" and not os.environ.get("PUBLIC_VS_LAUNCHER"):
    main()


def public_vs_launcher():
    """The public op against its launcher with the default and with the default config passed explicitly, and the
    registers of every compiled paged kernel (does the public path run the default config?)."""
    from deep_gemm._triton.launch import KERNEL_CACHE
    num_sms = deep_gemm.get_num_sms()
    batch, next_n, h, d, avg = PAGED_QUICK[1]
    q, cache, w, lens2d, table, max_len, _ = paged_inputs(batch, next_n, h, d, avg)
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens2d, BLOCK_KV, num_sms)
    calls = {
        "public": lambda: deep_gemm.fp8_fp4_paged_mqa_logits((q, None), cache, w, lens2d, table, meta, max_len,
                                                             clean_logits=False, logits_dtype=torch.float32),
        "launcher default": lambda: run_launcher("fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta,
                                                 max_len, False, torch.float32, None),
        "launcher default config": lambda: run_launcher(
            "fp8_fp4_paged_mqa_logits", q, None, cache, w, lens2d, table, meta, max_len, False, torch.float32, None,
            launcher_kwargs=dict(config=paged_default_config(next_n, h, d, BLOCK_KV, False)))}
    for _ in range(2):
        for name, fn in calls.items():
            t = kernel_times_by_name(fn, ("paged_mqa_logits",), reps=10)["paged_mqa_logits"]
            print(f"{name}: {t:.1f} us", flush=True)
    for key, ck in list(KERNEL_CACHE._entries.items()):
        if "paged" in str(key[0]):
            print(key[0], "warps/stages/pdl/i64/maxnreg", key[3:], "regs", getattr(ck, "n_regs", "?"), flush=True)


if __name__ == "__main__" and os.environ.get("PUBLIC_VS_LAUNCHER"):
    public_vs_launcher()
