"""Registers ``bf16_mega_gate`` and ``get_bf16_mega_gate_config``. No Triton kernel: on CUDA the torch reference
runs on the device (DeepGEMM runs the gate only on SM100; ``deep_gemm.backends()`` reports 'reference')."""

from __future__ import annotations

import torch

from ..core.registry import register
from .checks import check_bf16_mega_gate, check_get_bf16_mega_gate_config, effective_shared
from .reference import bf16_mega_gate_reference, get_bf16_mega_gate_config_reference


def _fake_bf16_mega_gate(x, weight, num_topk, use_shared_as_routed, num_shared_experts, *rest):
    slots = num_topk + effective_shared(use_shared_as_routed, num_shared_experts)
    return (x.new_empty((x.size(0), slots), dtype=torch.int64),
            x.new_empty((x.size(0), slots), dtype=torch.float32))


register("bf16_mega_gate", check=check_bf16_mega_gate, reference=bf16_mega_gate_reference, fake=_fake_bf16_mega_gate)
register("get_bf16_mega_gate_config", check=check_get_bf16_mega_gate_config,
         reference=get_bf16_mega_gate_config_reference)
