"""The one source of benchmark shapes, with DeepGEMM's H200 figures (measured 2026-11-29 on
the lent H200 with DeepGEMM's own kineto timer, L2 flushed) for the ratio column."""

# (M, N, K) -> DeepGEMM microseconds, FP8 1D2D NT, BF16 out.
DENSE_1D2D_DG_US = {
    (1, 2112, 7168): 14.1, (1, 576, 7168): 9.9, (1, 24576, 1536): 17.1, (1, 32768, 512): 8.5,
    (1, 7168, 16384): 41.2, (1, 4096, 7168): 16.8, (1, 7168, 2048): 8.0,
    (128, 2112, 7168): 10.9, (128, 576, 7168): 9.2, (128, 24576, 1536): 17.1, (128, 32768, 512): 10.3,
    (128, 7168, 16384): 43.4, (128, 4096, 7168): 13.8, (128, 7168, 2048): 9.2,
    (4096, 2112, 7168): 94.3, (4096, 576, 7168): 32.4, (4096, 24576, 1536): 231.4, (4096, 32768, 512): 127.4,
    (4096, 7168, 16384): 646.2, (4096, 4096, 7168): 165.3, (4096, 7168, 2048): 91.0,
}

# Weight-gradient 1D1D (FP32 out accumulated into C): (M, N, K) -> DeepGEMM TFLOPS.
DENSE_1D1D_DG_TFLOPS = {(4096, 4096, 7168): 975, (7168, 4096, 16384): 1060, (2112, 4096, 7168): 927}

# M-grouped contiguous (psum layout, 4 groups of ~8192 rows): (G, rows per group, N, K) -> DeepGEMM TFLOPS.
M_GROUPED_CONTIGUOUS_DG_TFLOPS = {
    (4, 8192, 6144, 7168): 1465, (4, 8192, 7168, 3072): 1399, (4, 8192, 4096, 4096): 1413,
    (4, 8192, 4096, 2048): 1359,
}

# M-grouped masked: (G, expected m per group, N, K) -> (DeepGEMM us, TFLOPS, GB/s).
MASKED_DG = {
    (32, 20, 7168, 3072): (203, 136, 3520), (32, 20, 4096, 4096): (159, 133, 3435),
    (6, 20, 6144, 7168): (83, 129, 3196), (32, 192, 6144, 7168): (540, 1011, 2837),
    (32, 192, 4096, 2048): (123, 839, 2706), (6, 1024, 6144, 7168): (429, 1353, 918),
    (6, 1024, 4096, 4096): (165, 1260, 1078),
}
# DeepGEMM's masked tests allocate Mmax = 4096 rows per group and mark ~m valid.
MASKED_MAX_M = 4096

# K-grouped (MoE weight gradient), no recorded DeepGEMM H200 figure: (G, M, N, K per group).
K_GROUPED = [(4, 4096, 7168, 8192), (8, 4096, 7168, 4096), (16, 7168, 2048, 2048)]
