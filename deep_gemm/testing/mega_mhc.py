"""Testing helpers of ``mega_mhc``'s kernels: inputs, caller-allocated outputs, one kernel run, and the comparison
against the torch reference with the tolerance rules of each output (shared by the interpreter tests, the GPU
tests and the sanitizer / benchmark scripts).

Tolerance rules (the kernels compute in FP32 where the reference works in FP64 between the same BF16 roundings):

* ``new_residual``: one rounding of an FP32 sum of five products vs the FP64 sum: equal, or one BF16 ulp apart
  where the FP32 sum lands next to a rounding boundary, or (terms cancelling to far less than their sizes) within
  FP32's error of the terms, ``NR_CANCEL_SHARE`` of their magnitude sum; at most ``NR_MISMATCH_SHARE`` of the
  elements differ. Inputs on a coarse grid (``grid_inputs=True``) make the FP32 sum exact: there bit for bit.
* Everything downstream is compared with the reference re-run on the kernel's own ``new_residual`` (identity
  mixing: x = 0, post_mix = 0, comb_res_mix = I reproduces it bit for bit), so that a one-ulp difference above,
  which moves the 24 projections by up to ``|fn| ulp``, does not hide or fake an error:
  - ``new_post_mix`` / ``new_comb_res_mix`` / ``new_prev_mix``: FP32 mix maths, rtol ``MIX_RTOL``, atol ``MIX_ATOL``;
  - ``y_bf16``: at most ``Y_MAX_ULPS`` BF16 ulps (an FP32 coefficient rounds ``u`` one ulp the other way, and y
    rounds again), or within ``Y_CANCEL_SHARE`` of the row's largest |y| (u near zero by cancellation), and at most
    ``Y_MISMATCH_SHARE`` of the elements differ at all;
  - ``y_fp8`` and the scale words: bit for bit the reference's quantisation (``reference.quantise_y``) of the
    kernel's own BF16 y, in every scale layout (the shared-expert rows, padded rows untouched).
"""

from __future__ import annotations

import torch

from ..mega_mhc.checks import NUM_HC_OUTPUTS, NUM_ROUTES, shared_sf_rows
from ..mega_mhc.reference import mega_mhc_reference, quantise_y, shared_sf_row

NR_MISMATCH_SHARE = 1e-3
NR_CANCEL_SHARE = 2.0 ** -21      # a few FP32 roundings of the largest term
MIX_RTOL, MIX_ATOL = 1e-4, 1e-5
Y_MAX_ULPS = 2
Y_CANCEL_SHARE = 2.0 ** -12
Y_MISMATCH_SHARE = 1e-2
R = NUM_ROUTES


def make_inputs(tokens: int, hidden: int, shifted: bool, seed: int = 0, device="cpu", grid_inputs: bool = False,
                sinkhorn_iters: int = 5) -> dict:
    """The op's inputs as keywords. ``grid_inputs``: x, residual on multiples of 1/32 below 4 and the mixes on
    multiples of 1/16, so that every post-mix sum is exact in FP32."""
    # (drawn on the device: the GPU tests' 8192 x 4 x 7168 routes would take seconds on the host)
    g = dict(generator=torch.Generator(device=device).manual_seed(seed), device=device)
    if grid_inputs:
        x = torch.randint(-127, 128, (tokens, hidden), **g) / 32
        residual = torch.randint(-127, 128, (tokens, R, hidden), **g) / 32
        post_mix = torch.randint(0, 17, (tokens, R, 1), **g) / 16
        comb = torch.randint(0, 17, (tokens, R, R), **g) / 16
    else:
        x = torch.randn(tokens, hidden, **g)
        residual = torch.randn(tokens, R, hidden, **g)
        post_mix = torch.rand(tokens, R, 1, **g)
        comb = torch.rand(tokens, R, R, **g)
    d = dict(
        x=x.bfloat16(), residual=residual.bfloat16(),
        shifted_prev_mix=torch.rand(tokens, R, 1, **g) if shifted else None,
        post_mix=post_mix.float(), comb_res_mix=comb.float(),
        fn=torch.randn(NUM_HC_OUTPUTS, R * hidden, **g) * (1.0 / (R * hidden) ** 0.5),
        mix_scales=torch.rand(3, **g) + 0.5, mix_bases=torch.randn(NUM_HC_OUTPUTS, **g) * 0.1,
        hc_mult=R, hc_norm_eps=1e-6, hc_pre_eps=1e-4, hc_post_scale=2.0, sinkhorn_eps=1e-6,
        num_sinkhorn_iters=sinkhorn_iters, rmsnorm_weight=(torch.rand(hidden, **g) + 0.5).bfloat16(),
        rmsnorm_eps=1e-6, rmsnorm_scale=1.25)
    return d


def make_outputs(d: dict, fp8: str | None, bf16: bool = True, block_m: int = 3) -> dict:
    """Outputs filled with NaN / a marker; ``fp8`` None, "gemm" (TMA-aligned column-major words), "routed" (routed
    row-major plus the shared-expert layout of ``block_m``-row blocks, its storage under key ``_storage``)."""
    t, h = d["x"].shape
    dev = d["x"].device
    out = dict(new_residual=torch.full_like(d["residual"], float("nan")),
               new_prev_mix=torch.full((t, R, 1), float("nan"), device=dev)
               if d["shifted_prev_mix"] is not None else None,
               new_post_mix=torch.full((t, R, 1), float("nan"), device=dev),
               new_comb_res_mix=torch.full((t, R, R), float("nan"), device=dev),
               y_bf16=torch.full((t, h), float("nan"), device=dev).bfloat16() if bf16 else None,
               y_fp8=None, y_gemm_sf=None, y_routed_sf=None, y_shared_sf=None, shared_sf_block_m=0)
    words = h // 128
    if fp8:
        out["y_fp8"] = torch.zeros(t, h, dtype=torch.float8_e4m3fn, device=dev)
        if fp8 == "gemm":
            rows = max(4, (t + 3) // 4 * 4)  # TMA-aligned: a multiple of 4 (4 for no tokens)
            out["y_gemm_sf"] = torch.full((rows * words,), 0x5A5A5A5A, dtype=torch.int32,
                                          device=dev).as_strided((t, words), (1, rows))
        else:
            rows = shared_sf_rows(t, block_m)
            storage = torch.full((max(rows, 1) * words,), 0x5A5A5A5A, dtype=torch.int32, device=dev)
            out["y_routed_sf"] = torch.full((t, words), 0x5A5A5A5A, dtype=torch.int32, device=dev)
            out["y_shared_sf"] = storage.as_strided((t, words), (1, max(rows, 1)))
            out["shared_sf_block_m"] = block_m
            out["_storage"] = storage
    return out


def op_args(d: dict, out: dict) -> dict:
    return {k: v for k, v in {**d, **out}.items() if not k.startswith("_")}


def _bound(d: dict, out: dict) -> tuple:
    from ..core.registry import _Binder
    from ..core.schemas import SCHEMAS
    return _Binder(SCHEMAS["mega_mhc"])((), op_args(d, out))


def reference_outputs(d: dict, fp8: str | None, bf16: bool = True, block_m: int = 3) -> dict:
    """The torch reference's outputs on ``d``, on d's device (the reference itself, whatever the op's CUDA kernel
    runs)."""
    from ..core.registry import kernels_of
    out = make_outputs(d, fp8, bf16, block_m)
    full = _bound(d, out)
    kernels_of("mega_mhc").check(*full)
    mega_mhc_reference(*full)
    return out


def run_kernels(d: dict, out: dict, overrides=None) -> None:
    """The op's check, then its Triton launcher with ``overrides`` (``kernels=True`` by default); fails if the
    launcher declines (so a test never passes by running the reference)."""
    from ..core.registry import kernels_of
    from ..mega_mhc.plan import MhcOverrides

    full = _bound(d, out)
    kernels = kernels_of("mega_mhc")
    kernels.check(*full)
    result = kernels.triton(*full, overrides=overrides if overrides is not None else MhcOverrides(kernels=True))
    assert result is not NotImplemented, "the mega_mhc launcher declined"


def _ordered(bits: torch.Tensor) -> torch.Tensor:
    """BF16 bit patterns as integers that order like the values (so a difference counts ulps)."""
    b = bits.view(torch.int16).to(torch.int32)
    return torch.where(b < 0, -(b & 0x7FFF), b)


def bf16_ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (_ordered(a) - _ordered(b)).abs()


def compare(d: dict, got: dict, fp8: str | None, block_m: int = 3, exact_residual: bool = False) -> None:
    """Assert the tolerance rules of the module docstring (the kernel's outputs ``got`` of a call on ``d``)."""
    bf16 = got["y_bf16"] is not None
    ref = reference_outputs(d, fp8, True, block_m)
    ulps = bf16_ulps(got["new_residual"], ref["new_residual"])
    if exact_residual:
        assert int(ulps.max()) == 0, "new_residual: not bit for bit on grid inputs"
    # FP32's rounding error of the five terms, where they cancel to far less than their sizes
    terms = (d["post_mix"].double().abs() * d["x"].double().abs()[:, None, :]
             + torch.einsum("tio,tih->toh", d["comb_res_mix"].double().abs(), d["residual"].double().abs()))
    near = (got["new_residual"].double() - ref["new_residual"].double()).abs() <= terms * NR_CANCEL_SHARE
    assert bool(((ulps <= 1) | near).all()), "new_residual: beyond one BF16 ulp"
    assert float((ulps > 0).float().mean()) <= NR_MISMATCH_SHARE, "new_residual: too many differences"

    # steps 2-5 of the reference on the kernel's own new_residual
    t, h = d["x"].shape
    same = dict(d, x=torch.zeros_like(d["x"]), residual=got["new_residual"].clone(),
                post_mix=torch.zeros_like(d["post_mix"]),
                comb_res_mix=torch.eye(R, device=d["x"].device).expand(t, R, R).contiguous())
    ref = reference_outputs(same, fp8, True, block_m)
    assert torch.equal(ref["new_residual"], got["new_residual"])
    for key in ("new_post_mix", "new_comb_res_mix", "new_prev_mix"):
        if ref[key] is not None:
            torch.testing.assert_close(got[key], ref[key], rtol=MIX_RTOL, atol=MIX_ATOL, msg=key)
    y_ref = ref["y_bf16"]
    if bf16:
        y = got["y_bf16"]
        diff = (y.double() - y_ref.double()).abs()
        near = diff <= y_ref.double().abs().amax(dim=1, keepdim=True) * Y_CANCEL_SHARE
        assert bool(((bf16_ulps(y, y_ref) <= Y_MAX_ULPS) | near).all()), "y_bf16: beyond the tolerance"
        assert float((diff > 0).float().mean()) <= Y_MISMATCH_SHARE, "y_bf16: too many differences"
    if fp8 is None:
        return
    assert bf16, "compare: FP8 outputs are checked against the kernel's own y_bf16"
    q, words = quantise_y(got["y_bf16"])
    assert torch.equal(got["y_fp8"].view(torch.uint8), q.view(torch.uint8)), "y_fp8"
    primary = got["y_gemm_sf"] if fp8 == "gemm" else got["y_routed_sf"]
    assert torch.equal(primary, words), "scale words"
    if fp8 != "gemm":
        storage = got["_storage"]
        rows = shared_sf_rows(t, block_m)
        want = torch.full_like(storage, 0x5A5A5A5A)
        table = want.as_strided((rows, h // 128), (1, max(rows, 1)))
        table[shared_sf_row(torch.arange(t, device=storage.device), block_m)] = words
        assert torch.equal(storage, want), "y_shared_sf: words or padded rows"
