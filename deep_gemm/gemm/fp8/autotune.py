"""Opt-in autotuning of FP8 GEMM configs, persisted on disk per GPU and Triton version.

Off by default (the deterministic heuristic in gemm/fp8/configs.py decides). With ``DG_AUTOTUNE=1`` (or
``deep_gemm.set_autotune(True)``), the first call of a new problem shape times a pruned set of legal configs on
copies of its outputs, keeps the fastest, and records it in
``<cache_dir>/autotune/fp8_gemm-<gpu>-triton<version>.json`` (``cache_dir()`` is ``$DG_JIT_CACHE_DIR`` or
``~/.deep_gemm``); later processes read the choice back instead of re-tuning. Tuning compiles several kernels (seconds
per shape): run it ahead of time with ``deep_gemm.warmup``, not on a latency-critical path.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
import threading
from typing import Callable

from ...core.runtime import cache_dir
from . import configs

_STATE = {"enabled": os.environ.get("DG_AUTOTUNE", "0") == "1"}
_LOCK = threading.Lock()
# Timed repetitions per candidate after one warm-up call (compile) - the median is kept.
TUNE_REPS = 5


def set_autotune(enable: bool) -> None:
    """Turn opt-in autotuning of FP8 GEMM configs on or off for this process."""
    _STATE["enabled"] = bool(enable)


def autotune_enabled() -> bool:
    return _STATE["enabled"]


def shortlist(problem: configs.Fp8GemmProblem) -> list[configs.Fp8GemmConfig]:
    """The candidates worth timing: the heuristic's choice and its neighbours (tile height, width, split)."""
    legal = configs.candidates(problem)
    base = configs.heuristic(problem)
    splits = {base.split_k, max(1, base.split_k // 2), base.split_k * 2}
    picked = [c for c in legal if c.split_k in splits and abs(c.block_m.bit_length() - base.block_m.bit_length()) <= 1]
    return sorted(set(picked), key=lambda c: (c != base, c.block_m, c.block_n, c.split_k))


class AutotuneCache:
    """Problem -> best config, in memory and in one JSON file (atomic rewrite on every new entry)."""

    def __init__(self, path: str):
        self.path = path
        self._entries: dict[str, dict] | None = None

    @staticmethod
    def key(problem: configs.Fp8GemmProblem) -> str:
        # (without the device's shared memory: the file is per GPU model, which decides it, and the keys stay those
        # of the files written before the field existed)
        fields = dataclasses.asdict(problem)
        fields.pop("smem_bytes")
        return json.dumps(fields, sort_keys=True)

    def _load(self) -> dict[str, dict]:
        if self._entries is None:
            try:
                with open(self.path) as f:
                    self._entries = json.load(f)
            except (OSError, ValueError):
                self._entries = {}
        return self._entries

    def get(self, problem: configs.Fp8GemmProblem) -> configs.Fp8GemmConfig | None:
        with _LOCK:
            entry = self._load().get(self.key(problem))
        return configs.Fp8GemmConfig(**entry) if entry else None

    def put(self, problem: configs.Fp8GemmProblem, config: configs.Fp8GemmConfig) -> None:
        with _LOCK:
            entries = self._load()
            entries[self.key(problem)] = dataclasses.asdict(config)
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(entries, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)  # atomic: concurrent readers see the old or the new file, never half


def _default_cache() -> AutotuneCache:
    import torch
    import triton

    gpu = torch.cuda.get_device_name().replace(" ", "_") if torch.cuda.is_available() else "cpu"
    return AutotuneCache(os.path.join(cache_dir(), "autotune", f"fp8_gemm-{gpu}-triton{triton.__version__}.json"))


_CACHE: dict[str, AutotuneCache] = {}


def disk_cache() -> AutotuneCache:
    path_key = cache_dir()
    cache = _CACHE.get(path_key)
    if cache is None:
        cache = _CACHE[path_key] = _default_cache()
    return cache


def cuda_timer(run: Callable[[], None]) -> float:
    """Median seconds of ``run`` over TUNE_REPS timed calls (CUDA events), after one warm-up call."""
    import torch

    run()
    times = []
    for _ in range(TUNE_REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def tune(problem: configs.Fp8GemmProblem, run_with: Callable[[configs.Fp8GemmConfig], None],
         timer: Callable[[Callable[[], None]], float] = cuda_timer,
         cache: AutotuneCache | None = None) -> configs.Fp8GemmConfig:
    """The fastest shortlisted config for ``problem`` (from the disk cache when known), recorded for next time."""
    cache = cache or disk_cache()
    known = cache.get(problem)
    if known is not None and known in configs.candidates(problem):
        return known
    timings = []
    for config in shortlist(problem):
        try:
            timings.append((timer(lambda: run_with(config)), config))
        except Exception:  # noqa: BLE001 - a config that fails to compile or launch is just not a candidate
            continue
    best = min(timings, key=lambda t: t[0])[1] if timings else configs.heuristic(problem)
    cache.put(problem, best)
    return best
