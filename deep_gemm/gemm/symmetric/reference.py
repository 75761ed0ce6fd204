"""CPU references of ``batched_syrk`` / ``batched_symm``: FP64 products, rounded once to the output dtype."""

from __future__ import annotations


def batched_syrk_reference(a, d) -> None:
    a64 = a.double()
    d.copy_((a64 @ a64.mT).to(d.dtype))


def batched_symm_reference(a, b, d) -> None:
    d.copy_((a.double() @ b.double()).to(d.dtype))
