"""Every numeric tolerance the tests use, with the reason for its size (calc_diff unless stated)."""

TOLERANCES = {
    # Reference (FP32 matmul of dequantised values) vs float64 oracle, FP32 output: only FP32 summation order.
    "reference_fp32_out": 1e-9,
    # Same with a BF16 output: BF16 rounding (2^-9 relative) dominates; calc_diff ~ err^2 / 2 < 1e-5.
    "reference_bf16_out": 1e-5,
    # Triton kernels vs the float64 oracle on FP8 inputs (DeepGEMM's own bar for FP8 GEMMs).
    "kernel_fp8": 1e-3,
    # Indexer kernels on the GPU, FP32 logits: the FP8 q.k products are summed by the tensor cores (wgmma FP8
    # accumulation is not IEEE FP32 summation); measured on the H200 2.5e-9 to 1.3e-8 against the float64 oracle.
    "kernel_fp8_logits_fp32": 1e-7,
}
