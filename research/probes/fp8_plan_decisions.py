"""Record what the FP8 launchers run, on the CPU: for a grid of problems (every grouping, layout, recipe, output,
C, DeepSeek and odd shapes), every kernel launch each call makes (kernel name, compile key, grid, warps, stages).

    python research/probes/fp8_plan_decisions.py OUT.json

Tensors are FakeTensorMode tensors on a fake CUDA device (metadata only, no GPU); Triton is never called: the
launch and compile entry points are replaced by recorders (the register budget rule sees builds without spills).
Run it before and after a launcher refactor and compare the two files: equal files mean the same kernels, configs
and grids run, so speed cannot move.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from types import SimpleNamespace

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import deep_gemm  # noqa: E402
from deep_gemm._ops.library import _Binder, kernels_of  # noqa: E402
from deep_gemm._ops.schemas import SCHEMAS  # noqa: E402

FP8, F32, BF16 = torch.float8_e4m3fn, torch.float32, torch.bfloat16
LAUNCHES: list = []


def _record_launch(kernel, grid, args, *, name, config_key, num_warps, num_stages=1, device_index=0, record=None,
                   **_):
    LAUNCHES.append(dict(name=name, config_key=repr(config_key), grid=list(grid), num_warps=num_warps,
                         num_stages=num_stages))


def _fake_compiled(kernel, grid, args, *, name, config_key, num_warps, num_stages=1, device_index=0, **_):
    return SimpleNamespace(n_spills=0)


def _patch():
    """Replace Triton-facing entry points in every loaded launcher module (and row slicing, which fake CUDA tensors
    do not support on a CPU-only torch build, by ``narrow``)."""
    getitem = torch.Tensor.__getitem__

    def row_slice(self, index):
        if isinstance(index, slice) and index.step is None and self.device.type == "cuda":
            start, stop, _ = index.indices(self.size(0))
            return self.narrow(0, start, max(0, stop - start))
        return getitem(self, index)
    torch.Tensor.__getitem__ = row_slice
    import deep_gemm._triton.scratch as scratch
    scratch.stream_of = lambda t: None
    scratch.capturing = lambda t: False
    for modname in list(sys.modules):
        if not modname.startswith("deep_gemm"):
            continue
        mod = sys.modules[modname]
        for attr, value in (("launch", _record_launch), ("compiled_kernel", _fake_compiled),
                            ("interpreting", lambda: False), ("stream_of", lambda t: None),
                            ("capturing", lambda t: False)):
            if hasattr(mod, attr) and modname != "deep_gemm._triton.launch":
                setattr(mod, attr, value)
        if hasattr(mod, "_transposed_copy"):
            mod._transposed_copy = lambda x: torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _cases():
    dense = [(m, n, k) for m in (1, 16, 64, 100, 128, 129, 256, 512, 2112, 4096)
             for n, k in ((2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168),
                          (7168, 2048), (200, 256), (448, 7168))]
    for m, n, k in dense:
        for out in (BF16, F32):
            yield ("fp8_gemm_nt", dict(m=m, n=n, k=k, out=out, c=False, b_rows=False))
    for m, n, k in dense[::3]:
        yield ("fp8_gemm_nt", dict(m=m, n=n, k=k, out=F32, c=True, b_rows=False))
        yield ("fp8_gemm_nt", dict(m=m, n=n, k=k, out=F32, c=True, b_rows=True))
        yield ("fp8_gemm_nt", dict(m=m, n=n, k=k, out=F32, c=False, b_rows=True))
        for layout in ("nn", "tn", "tt"):
            yield (f"fp8_gemm_{layout}", dict(m=m, n=n, k=k, out=BF16, c=False, b_rows=False))
    for g, per, n, k in ((4, 8192, 6144, 7168), (8, 4096, 4096, 2048), (3, 100, 2112, 512), (4, 8192, 7168, 3072)):
        for psum in (False, True):
            for layout in ("nt", "nn"):
                yield (f"m_grouped_fp8_gemm_{layout}_contiguous", dict(g=g, per=per, n=n, k=k, psum=psum, zero=psum))
    for g, mmax, em, n, k in ((32, 4096, 20, 7168, 3072), (6, 4096, 1024, 6144, 7168), (32, 4096, 192, 4096, 2048),
                              (4, 200, 50, 2112, 7168), (2, 384, 300, 576, 512)):
        yield ("m_grouped_fp8_gemm_nt_masked", dict(g=g, mmax=mmax, em=em, n=n, k=k))
    for g, m, n, kpg in ((4, 4096, 7168, 8192), (8, 4096, 7168, 4096), (16, 7168, 2048, 2048), (3, 256, 384, 256)):
        for layout in ("nt", "tn"):
            yield (f"k_grouped_fp8_gemm_{layout}_contiguous", dict(g=g, m=m, n=n, kpg=kpg))
    for m in (128, 4096):
        yield ("fp8_gemm_nt_skip_head_mid", dict(m=m, n=32768, k=512))


def _args(op, p):
    e = lambda *s, dtype=FP8: torch.empty(*s, dtype=dtype, device="cuda")  # noqa: E731
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    if op.startswith("fp8_gemm_n") or op.startswith("fp8_gemm_t"):
        if op == "fp8_gemm_nt_skip_head_mid":
            m, n, k = p["m"], p["n"], p["k"]
            return (e(m, k), e(m, cdiv(k, 128), dtype=F32), e(n, k), e(cdiv(n, 128), cdiv(k, 128), dtype=F32),
                    e(m, n + n // 256 * 64, dtype=BF16), [128, 64, 128])
        m, n, k = p["m"], p["n"], p["k"]
        layout = op[-2:]
        a = e(m, k) if layout[0] == "n" else e(k, m).t()
        b = e(n, k) if layout[1] == "t" else e(k, n).t()
        sfa = e(cdiv(k, 128), m, dtype=F32).t()  # MN-major A scales
        sfb = e(n, cdiv(k, 128), dtype=F32) if p["b_rows"] else e(cdiv(n, 128), cdiv(k, 128), dtype=F32)
        if layout[0] == "t":
            sfa = e(m, cdiv(k, 128), dtype=F32)
        d = e(m, n, dtype=p["out"])
        recipe = [1, 1, 128] if p["b_rows"] else None
        return (a, sfa, b, sfb, d, d if p["c"] else None, recipe)
    if op.startswith("m_grouped") and "contiguous" in op:
        g, per, n, k = p["g"], p["per"], p["n"], p["k"]
        m = g * per
        b = e(g, n, k) if op.endswith("nt_contiguous") else e(g, k, n).transpose(1, 2)
        sfb = e(g, cdiv(n, 128), cdiv(k, 128), dtype=F32)
        if not op.endswith("nt_contiguous"):
            sfb = sfb.transpose(1, 2)
        layout = e(g, dtype=torch.int32) if p["psum"] else e(m, dtype=torch.int32)
        return (e(m, k), e(cdiv(k, 128), m, dtype=F32).t(), b, sfb, e(m, n, dtype=BF16), layout, None, None, None,
                "nk", False, p["psum"], p["zero"])
    if op.startswith("m_grouped") and "masked" in op:
        g, mmax, n, k = p["g"], p["mmax"], p["n"], p["k"]
        return (e(g, mmax, k), e(g, cdiv(k, 128), mmax, dtype=F32).transpose(1, 2), e(g, n, k),
                e(g, cdiv(n, 128), cdiv(k, 128), dtype=F32), e(g, mmax, n, dtype=BF16), e(g, dtype=torch.int32),
                p["em"])
    if op.startswith("k_grouped"):
        g, m, n, kpg = p["g"], p["m"], p["n"], p["kpg"]
        ks = [kpg] * g
        tot = sum(ks)
        if op.endswith("nt_contiguous"):
            a, b = e(m * tot), e(n * tot)
            sfa, sfb = e(m, tot // 128, dtype=F32), e(n, tot // 128, dtype=F32)
        else:
            a, b = e(tot, m), e(tot, n)
            sfa, sfb = e(tot // 128, m, dtype=F32), e(tot // 128, n, dtype=F32)
        d = e(g, m, n, dtype=F32)
        return (a, sfa, b, sfb, d, ks, e(g, dtype=torch.int32), d)
    raise ValueError(op)


def main(out_path: str):
    deep_gemm.set_num_sms(132)
    for mod in ("deep_gemm.gemm.fp8_triton",):
        importlib.import_module(mod)
    _patch()
    rows = []
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    for op, params in _cases():
        kernels = kernels_of(op)
        LAUNCHES.clear()
        with mode:
            full = _Binder(SCHEMAS[op])(_args(op, params), {})
            try:
                result = kernels.triton(*full)
                outcome = "declined" if result is NotImplemented else "ran"
            except Exception as exc:  # noqa: BLE001
                outcome = f"error {type(exc).__name__}: {str(exc)[:200]}"
        rows.append(dict(op=op, params={k: str(v) for k, v in params.items()}, outcome=outcome,
                         launches=list(LAUNCHES)))
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
    errors = [r for r in rows if r["outcome"].startswith("error")]
    print(f"{len(rows)} cases, {sum(len(r['launches']) for r in rows)} launches, {len(errors)} errors -> {out_path}")
    for r in errors[:10]:
        print(" ", r["op"], r["params"], r["outcome"])


if __name__ == "__main__":
    main(sys.argv[1])
