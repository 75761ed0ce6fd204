"""Small builders shared by the BF16 GEMM and einsum tests."""

import torch

BF16 = torch.bfloat16


def randn(*shape, dtype=BF16) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def output_and_accumulator(shape, out_dtype, accumulate: str):
    """(d, c, c_value): d prefilled with random values; c None, d itself, or a distinct tensor."""
    d = randn(*shape, dtype=out_dtype)
    if accumulate == "none":
        return d, None, 0.0
    c = d if accumulate == "d" else randn(*shape, dtype=out_dtype)
    return d, c, c.double().clone()
