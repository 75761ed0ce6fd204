"""Kernel building blocks shared by several families: the GEMM grouping kinds (groupings), warp-uniform marks
(uniform) and the bit-exact transposing copy (transpose)."""
