"""Registers the einsum ops: one check and one reference each (both only write ``d``: no fake kernel needed)."""

from __future__ import annotations

from .._ops.library import register
from . import checks, reference

register("einsum", check=checks.check_einsum, reference=reference.einsum_reference)
register("fp8_einsum", check=checks.check_fp8_einsum, reference=reference.fp8_einsum_reference)
