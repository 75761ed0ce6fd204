"""Every launched kernel leaves Triton no argument value to specialise on.

``core/launch.py`` caches compiled kernels by config (and whether some int needs 64 bits), not by argument values,
so a runtime int that Triton specialised (== 1, divisible by 16) or a pointer it assumed 16-byte aligned would bake
one call's value into the binary that every later call of that config reuses. Each ``_*_kernel`` therefore lists
its runtime ints in ``do_not_specialize`` and its pointers in ``do_not_specialize_on_alignment``, except where a
reason below says why the value cannot vary."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import deep_gemm

# kernel (or kernel.parameter) -> why Triton may specialise on it
EXEMPT = {
    "_transpose_kernel": "launched through Triton's own launcher (kernel[grid]), whose cache keys the specialisation",
    "_fp8_gemm_ws_kernel.ws_ptr": "the package's own split-K workspace, always a fresh 16-byte-aligned allocation",
    **{f"_mhc_post_kernel.{p}": "mega_mhc's launcher passes only row tensors on a 16-byte boundary (vector loads)"
       for p in ("x_ptr", "res_ptr", "fn_ptr", "nr_ptr", "u_ptr")},
    **{f"_mhc_norm_kernel.{p}": "mega_mhc's launcher passes only row tensors on a 16-byte boundary (vector loads)"
       for p in ("nr_ptr", "u_ptr", "weight_ptr", "y_ptr", "y_fp8_ptr")},
    **{f"_mhc_norm_kernel.{p}": "an FP32 scalar (the op's float argument): Triton specialises on no float value"
       for p in ("hc_norm_eps", "hc_pre_eps", "hc_post_scale", "sinkhorn_eps", "rmsnorm_eps", "rmsnorm_scale")},
    "_gate_route_kernel.scale": "an FP32 scalar (routed_scaling_factor): Triton specialises on no float value",
}
_SKIP_MODULES = ("deep_gemm.__main__", "deep_gemm.demo")


def _kernels():
    found = []
    for info in pkgutil.walk_packages(deep_gemm.__path__, "deep_gemm."):
        if info.name in _SKIP_MODULES:
            continue
        module = importlib.import_module(info.name)
        for attr, obj in vars(module).items():
            fn = getattr(obj, "fn", None)
            if attr.endswith("_kernel") and fn is not None and fn.__module__ == info.name:
                found.append((attr, obj, fn))
    return found


def _names(options, key, params):
    return {params[x] if isinstance(x, int) else x for x in (options.get(key) or ())}


def test_no_launched_kernel_specialises_on_argument_values():
    kernels = _kernels()
    assert len(kernels) >= 27  # every family's kernels were found (legacy's *_impl run through kernel[grid])
    gaps = []
    for attr, obj, fn in kernels:
        if attr in EXEMPT:
            continue
        params = list(inspect.signature(fn).parameters)
        options = getattr(obj, "kwargs", None) or dict(  # (jit object or interpreter)
            do_not_specialize=getattr(obj, "do_not_specialize", ()),
            do_not_specialize_on_alignment=getattr(obj, "do_not_specialize_on_alignment", ()))
        no_value = _names(options, "do_not_specialize", params)
        no_alignment = _names(options, "do_not_specialize_on_alignment", params)
        for p in inspect.signature(fn).parameters.values():
            if "constexpr" in str(p.annotation) or f"{attr}.{p.name}" in EXEMPT or "desc" in p.name:
                continue
            wanted = no_alignment if p.name.endswith("_ptr") else no_value
            if p.name not in wanted:
                gaps.append(f"{fn.__module__}.{attr}({p.name})")
    assert not gaps, gaps
