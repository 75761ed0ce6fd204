"""``get_mqa_logits_metadata``: the per-SM split-K schedule of the contiguous-KV indexer logits
(``fp8_fp4_mqa_logits(..., schedule_meta=...)`` in DeepGEMM 0.2.3)."""

from . import ops  # noqa: F401  (registers the op)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
