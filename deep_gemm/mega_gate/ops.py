"""Registers ``bf16_mega_gate`` and ``get_bf16_mega_gate_config``. DeepGEMM runs the gate only on SM100; here the
CUDA path (``launch.py``) is the package's BF16 GEMM for the logits and one Triton routing kernel, from sm_80 on.
The kernels run by default (they passed their GPU tests); the reference runs where they decline."""

from __future__ import annotations

import torch

from ..core import arch, gpu_validation
from ..core.registry import register
from . import launch as launchers  # (imports no Triton: its kernels load at the first launch)
from .checks import check_bf16_mega_gate, check_get_bf16_mega_gate_config, effective_shared
from .plan import FAMILY
from .reference import bf16_mega_gate_reference, get_bf16_mega_gate_config_reference


def _fake_bf16_mega_gate(x, weight, num_topk, use_shared_as_routed, num_shared_experts, *rest):
    slots = num_topk + effective_shared(use_shared_as_routed, num_shared_experts)
    return (x.new_empty((x.size(0), slots), dtype=torch.int64),
            x.new_empty((x.size(0), slots), dtype=torch.float32))


register("bf16_mega_gate", check=check_bf16_mega_gate, reference=bf16_mega_gate_reference, fake=_fake_bf16_mega_gate,
         triton=launchers.bf16_mega_gate, arch=arch.ANY_MMA,
         triton_note=gpu_validation.opt_in_note(
             FAMILY, "logits the BF16 GEMM launcher declines run the reference"))
register("get_bf16_mega_gate_config", check=check_get_bf16_mega_gate_config,
         reference=get_bf16_mega_gate_config_reference)
