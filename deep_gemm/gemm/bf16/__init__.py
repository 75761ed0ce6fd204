"""BF16 GEMMs (dense, M-grouped, masked, K-grouped): public functions (api), op registration (ops), argument checks
(checks), the plain-torch reference (reference), the pure planner (plan), the launcher that reads the plan (launch)
and the Triton / Gluon kernels (kernels/)."""
