"""Small helpers DeepGEMM's test scripts use: the GPU generation, test decorators and output suppression.

Everything here works without a GPU (``get_arch_major()`` is then 0), so test modules can import it anywhere.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable, Union

import torch

# A condition is either a plain bool or a callable evaluated at call time (e.g. ``lambda: get_arch_major() >= 10``).
Condition = Union[bool, Callable[[], Any]]


def get_arch_major() -> int:
    """Major compute capability of the current CUDA device (9 on Hopper, 10 on Blackwell); 0 without CUDA."""
    if not torch.cuda.is_available():
        return 0
    return torch.cuda.get_device_capability()[0]


def _holds(condition: Condition) -> bool:
    return bool(condition() if callable(condition) else condition)


def test_filter(condition: Condition):
    """Decorator: run the test function only when ``condition`` holds (checked at each call).

    A filtered-out call prints one line saying so and returns None; otherwise the function's result is returned.

    >>> @test_filter(lambda: get_arch_major() >= 10)
    ... def test_sm100_only(): ...
    """

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if _holds(condition):
                return func(*args, **kwargs)
            print(f"{func.__name__}: skipped (filtered by {getattr(condition, '__name__', condition)})")
            return None

        return wrapper

    return decorator


# The name starts with "test" but is a decorator factory: keep pytest from collecting it when a test module
# imports it by name.
test_filter.__test__ = False


def ignore_env(name: str, condition: Condition):
    """Decorator: when ``condition`` holds, run the function with environment variable ``name`` unset.

    The variable's previous value (if any) is restored afterwards, also when the function raises. Used for knobs
    that a given test must not see (e.g. a forced code path that the test's configuration does not support).
    """

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not _holds(condition):
                return func(*args, **kwargs)
            saved = os.environ.pop(name, None)
            try:
                return func(*args, **kwargs)
            finally:
                if saved is not None:
                    os.environ[name] = saved

        return wrapper

    return decorator


class empty_suppress:
    """A context manager that does nothing: the stand-in for ``suppress_stdout_stderr`` when output is wanted."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        return None


class suppress_stdout_stderr:
    """Silence everything written to stdout and stderr inside the ``with`` block, at the file-descriptor level.

    Redirecting file descriptors 1 and 2 (not only ``sys.stdout``) also silences C/C++ and CUDA libraries, e.g. the
    profiler's own messages. Python-level writes are sent to the null device too, whatever ``sys.stdout`` is at the
    time (pytest replaces it). Everything is restored on exit, also when the block raises.
    """

    _FDS = (1, 2)

    def __enter__(self):
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        self._devnull = open(os.devnull, "w")
        self._saved_fds = [os.dup(fd) for fd in self._FDS]
        for fd in self._FDS:
            os.dup2(self._devnull.fileno(), fd)
        self._saved_streams = (sys.stdout, sys.stderr)
        sys.stdout = sys.stderr = self._devnull
        return self

    def __exit__(self, *exc_info) -> None:
        sys.stdout, sys.stderr = self._saved_streams
        for fd, saved in zip(self._FDS, self._saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        self._devnull.close()
        return None
