"""Scale-layout cases for the compute-sanitizer batch: the MN-major copy, the UE8M0 pack and the K-grouped pack
through their Triton launchers, on odd row counts and on inputs under 8 columns (``layout/plan.py``'s ``tile``: narrow
tiles: 1, 3, 4 and 7 columns), with K-major, MN-major and grouped strides; each compared bit for bit with the torch
reference. ``CASES = [(name, fn), ...]``."""

from __future__ import annotations

import torch

from deep_gemm.core.registry import kernels_of, run_launcher
from deep_gemm.layout import plan as layout_plan


def _launch(op: str, *args):
    """The op's Triton launcher (its check first); a declined launch is a failure, not a silent reference run."""
    out = run_launcher(op, *args)
    if out is NotImplemented:
        raise RuntimeError(f"the Triton launcher of {op} declined")
    return out


def _same(out: torch.Tensor, want: torch.Tensor, what: str) -> None:
    if out.shape != want.shape or out.stride() != want.stride() or out.dtype != want.dtype:
        raise AssertionError(f"{what}: {tuple(out.shape)}/{out.stride()} against {tuple(want.shape)}/{want.stride()}")
    if not torch.equal(out.view(torch.int32), want.view(torch.int32)):
        raise AssertionError(f"{what}: bits differ from the reference")


def _power_of_two_scales(*shape: int) -> torch.Tensor:
    return torch.exp2(torch.randint(-20, 20, shape, device="cuda").float())


def _input(groups: int, rows: int, cols: int, mn_major: bool) -> torch.Tensor:
    sf = _power_of_two_scales(groups, rows, cols)
    if mn_major:  # rows contiguous (what a transposed-contiguous scale tensor looks like)
        sf = sf.transpose(-1, -2).contiguous().transpose(-1, -2)
    return sf[0] if groups == 1 else sf


def _copy_and_pack(groups: int, rows: int, cols: int, mn_major: bool):
    def run():
        narrow = layout_plan.tile(cols)[1] < layout_plan.BLOCK_COLS
        if narrow != (cols < layout_plan.NARROW_COLS):
            raise AssertionError(f"{cols} columns: expected the {'narrow' if cols < 8 else 'wide'} tile")
        sf = _input(groups, rows, cols, mn_major)
        for op in ("get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor"):
            args = (sf,) if op == "get_mn_major_tma_aligned_tensor" else (sf, None)
            _same(_launch(op, *args), kernels_of(op).reference(*args), f"{op} {groups}x{rows}x{cols}")
        torch.cuda.synchronize()
    return run


def _k_grouped(mn: int, ks: list[int]):
    def run():
        sf = _power_of_two_scales(sum(ks) // 128, mn)
        layout = torch.tensor(ks, dtype=torch.int32, device="cuda")
        args = (sf, layout, ks, 128, 128, False)
        op = "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor"
        _same(_launch(op, *args), kernels_of(op).reference(*args), f"{op} mn={mn} ks={ks}")
        torch.cuda.synchronize()
    return run


CASES = [
    ("narrow_1col_k_major_odd_rows", _copy_and_pack(1, 1001, 1, False)),
    ("narrow_1col_mn_major_grouped", _copy_and_pack(3, 517, 1, True)),
    ("narrow_3col_k_major_grouped", _copy_and_pack(2, 333, 3, False)),
    ("narrow_4col_mn_major_odd_rows", _copy_and_pack(1, 4097, 4, True)),
    ("narrow_7col_k_major_odd_rows", _copy_and_pack(1, 259, 7, False)),
    ("wide_57col_k_major_grouped", _copy_and_pack(3, 130, 57, False)),
    ("wide_57col_mn_major_odd_rows", _copy_and_pack(1, 1001, 57, True)),
    ("k_grouped_pack_empty_group", _k_grouped(1004, [256, 0, 384, 128])),
]
