"""cuBLASLt-style GEMMs on torch's vendor BLAS: the calls (api) and their op registration (ops); argument checks
and the reference are the BF16 family's."""
