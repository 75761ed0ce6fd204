"""`python -m deep_gemm`: the self-check / demo (see deep_gemm/demo.py)."""

import sys

from .demo import main

sys.exit(main())
