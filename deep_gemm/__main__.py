"""`python -m deep_gemm [--help] [--device cuda|cpu]`: the self-check / demo (see deep_gemm/demo.py)."""

import sys

from .demo import main

sys.exit(main(sys.argv[1:]))
