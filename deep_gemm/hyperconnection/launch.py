"""CUDA launcher of ``tf32_hc_prenorm_gemm`` (the op's CUDA kernel calls it after the shared check).

One launch per call (``kernels._hc_prenorm_kernel``), configured by ``plan.plan`` (resolved once per call shape)
and recorded per argument signature, so a repeated call shape replays it (``core/plans.replayable``: the second
call costs the dispatcher, the memoised check and the C launcher).

B reaches the tensor cores rounded to TF32: through a TMA map encoded as TFLOAT32 (``launch.Tf32RoundingDescriptor``)
where the launch encodes it so (``launch.tf32_rounding_available``: the direct launch path, or Triton's own launch
from 3.7 on) on a device with TMA (sm_90 and later), else through pointers with the rounding done in registers
(interpreter, sm_80 / sm_89: there Triton lowers descriptors to plain loads, which do not round). Both round to nearest
even.
"""

from __future__ import annotations

from ..core import arch
from ..core.launch import (Tf32RoundingDescriptor, compiled_kernel, descriptor, tf32_rounding_available,
                              interpreting, launch)
from ..core.determinism import deterministic
from ..core.plans import ConfigCache, replayable
from ..core.scratch import arrival_counters, stream_workspace
from ..core.runtime import usable_sms
from . import plan as hc_plan
from .checks import BLOCK_K

CONFIGS = ConfigCache()


def config_of(m: int, n: int, k: int, splits: int, sm: int = arch.SM90) -> hc_plan.HcConfig:
    num_sms = usable_sms()
    return CONFIGS.get((m, n, k, splits, num_sms, sm, deterministic()), lambda key: hc_plan.plan(*key))


def _kernel():
    from .kernels import _hc_prenorm_kernel
    return _hc_prenorm_kernel


@replayable("tf32_hc_prenorm_gemm")
def tf32_hc_prenorm_gemm(a, b, d, sqr_sum, num_splits, *, recorder=None,
                         overrides: hc_plan.HcOverrides = hc_plan.NO_OVERRIDES):
    """``overrides`` pins a config (tests and sweeps; it is part of the replay key as a launcher keyword)."""
    m, k = a.shape
    n = b.size(0)
    if m == 0:
        return None
    sm = arch.sm_of_tensor(d)
    if not arch.has_mma(sm):
        return NotImplemented
    splits = 1 if num_splits is None else num_splits
    cfg = overrides.config if overrides.config is not None else config_of(m, n, k, splits, sm)
    programs = hc_plan.programs(m, splits, cfg)
    if programs > hc_plan.MAX_PROGRAMS:
        return NotImplemented  # more splits than one launch has programs: the reference writes them
    tiles = programs // cfg.sub
    tile_elems = cfg.block_m * cfg.block_n + cfg.block_m
    if cfg.sub > 1:
        # Both kept per stream (the workspace too: core/scratch.stream_workspace), so a replay allocates nothing.
        ws, counters = stream_workspace(d, tiles * cfg.sub * tile_elems), arrival_counters(d, tiles)
        if recorder is not None:
            recorder.persistent += [ws, counters]
    else:
        ws, counters = d, d  # (unused)
    a_desc = descriptor(a, (m, k), (a.stride(0) if m > 1 else k, 1), (cfg.block_m, BLOCK_K))
    stride_ds = d.stride(0) if d.dim() == 3 else 0
    stride_dm = d.stride(-2) if m > 1 else n
    grid = (programs, 1, 1)
    device_index = d.device.index or 0

    def args(b_tma: bool):
        b_desc = Tf32RoundingDescriptor(b, (n, k), (b.stride(0), 1), (cfg.block_n, BLOCK_K)) if b_tma else a_desc
        return (a_desc, b_desc, b, d, sqr_sum, ws, counters, m, n, k, splits, cfg.sub, b.stride(0), stride_dm,
                stride_ds, cfg.block_m, cfg.block_n, BLOCK_K, cfg.stages, b_tma, cfg.reduce, cfg.red_chunk)

    def key(b_tma: bool):
        return (cfg, b_tma)

    b_tma = False
    if not interpreting() and arch.has_tma(sm):
        compiled = compiled_kernel(_kernel(), grid, args(True), name="hc_prenorm", config_key=key(True),
                                   num_warps=cfg.num_warps, num_stages=cfg.stages, device_index=device_index)
        b_tma = tf32_rounding_available(compiled)
    launch(_kernel(), grid, args(b_tma), name="hc_prenorm", config_key=key(b_tma), num_warps=cfg.num_warps,
           num_stages=cfg.stages, device_index=device_index,
           record=recorder.launches if recorder is not None else None)
    return None

