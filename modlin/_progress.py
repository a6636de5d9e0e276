"""Progress displays on standard error: tqdm when it is installed, else one updating line.

Products show one when :func:`modlin.limits` has ``progress=True`` (or
``MODLIN_PROGRESS=1``) and the cost model expects them to take longer than
:data:`MIN_SECONDS`; ``modlin warmup`` always does unless ``--quiet``.
"""

from __future__ import annotations

import sys
import time
from functools import lru_cache

import numpy as np

__all__ = ["bar", "expected_seconds", "MIN_SECONDS"]

#: Products expected to take less than this show no progress.
MIN_SECONDS = 2.0


class _Line:
    """A progress display on one updating line of a stream, where tqdm is not installed."""

    def __init__(self, total: int, desc: str, stream):
        self.total, self.done, self.desc, self.stream, self.width, self.text = total, 0, desc, stream, 0, ""

    def set_description(self, text: str) -> None:
        self.text = text
        line = f"{self.desc} [{self.done}/{self.total}] {text}"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def update(self, n: int = 1) -> None:
        self.done += n
        self.set_description(self.text)

    def close(self) -> None:
        self.set_description("done")
        self.stream.write("\n")
        self.stream.flush()


def bar(total: int, desc: str, unit: str, stream=None):
    """A progress display of ``total`` steps (``update``, ``set_description``, ``close``)."""
    stream = sys.stderr if stream is None else stream
    try:
        from tqdm import tqdm
    except ImportError:
        return _Line(total, desc, stream)
    return tqdm(total=total, desc=desc, file=stream, unit=unit)


@lru_cache(maxsize=1)
def _gemm_rate() -> float:
    """Multiply-adds per second of a float64 GEMM here (one 384**3 product, timed once)."""
    x = np.ones((384, 384))
    x @ x
    t0 = time.perf_counter()
    x @ x
    return 384**3 / max(time.perf_counter() - t0, 1e-6)


def expected_seconds(cost: float) -> float:
    """Seconds for ``cost`` multiply-adds of the cost model (units of a large fp64 GEMM)."""
    return cost / _gemm_rate()
