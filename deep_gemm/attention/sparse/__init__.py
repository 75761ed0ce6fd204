"""DeepSeek V4 indexer: block-sparse MQA logits over selected KV blocks, contiguous and paged
(``get_sparse_mqa_logits_metadata``, ``fp8_fp4_sparse_mqa_logits``, ``get_paged_sparse_mqa_logits_metadata``,
``fp8_fp4_paged_sparse_mqa_logits``)."""

from . import ops  # noqa: F401  (registers the ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
