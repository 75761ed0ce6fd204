"""FP8 GEMMs (dense, M-grouped, K-grouped; FP4 operands): public functions (api), op registration (ops), argument
checks (checks), the plain-torch reference (reference), the pure planner (plan, over the tile heuristic in configs),
the launcher that reads the plan (launch), opt-in autotuning (autotune) and the Triton / Gluon kernels (kernels/)."""
