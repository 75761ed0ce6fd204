"""Which deep_gemm ops went through torch.library.opcheck in this test session (filled by conftest)."""

OPCHECKED: set = set()
FULL_RUN = False
