"""Which deep_gemm ops went through torch.library.opcheck in this test run (filled by conftest)."""

OPCHECKED: set = set()
FULL_RUN = False
