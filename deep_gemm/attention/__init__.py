"""MQA-logits family (DeepSeek V3.2 indexer): non-paged and paged logits and the paged work-split metadata; sparse/
(the V4 block-sparse logits) and metadata/ (get_mqa_logits_metadata) register their ops when the public surface
imports them."""

from . import ops  # noqa: F401  (registers the attention ops)
from .api import *  # noqa: F401,F403
from .api import __all__  # noqa: F401
