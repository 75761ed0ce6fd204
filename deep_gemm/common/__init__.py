"""Pieces shared by every op family: integer helpers, operand helpers, and (kernels/) Triton / Gluon building blocks
that several families' kernels use."""
