"""Progress displays on standard error: tqdm when it is installed, else one updating line.

Products show one when :func:`modlin.limits` has ``progress=True`` (or
``MODLIN_PROGRESS=1``) and the cost model expects them to take longer than
:data:`MIN_SECONDS` (:func:`wanted`); ``modlin warmup`` always does unless
``--quiet``. A computation made of many products (a :mod:`modlin.linalg` call)
shows one display for all of its work (:func:`covering`), and the products
inside it none of their own.

The plain line, without tqdm, reads ``desc [done/total] text [elapsed<remaining]``
(times as tqdm writes them, ``MM:SS``; the remaining time is the elapsed one scaled
by the steps left, ``?`` before the first step), ends as ``desc [total/total] done``
and a newline. It is written whatever standard error is (a terminal, a file, a
pipe): ``progress=True`` is the request to see it.
"""

from __future__ import annotations

import contextvars
import sys
import time
from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from modlin._runtime.calibration import MIN_SECONDS, REFRESH
from modlin._runtime.limits import current as current_limits

#: Set while one display covers a whole computation (:func:`covering`): the bars asked for
#: inside it are silent. A ContextVar, as the limits are: modlin's worker threads run their
#: tasks in a copy of the caller's context, so the products they run see it too, and
#: another thread's computation is not silenced by this one.
_covered: contextvars.ContextVar[bool] = contextvars.ContextVar("modlin.progress.covered", default=False)


def _clock(seconds: float) -> str:
    """``MM:SS``, or ``H:MM:SS`` from an hour on, as tqdm writes times."""
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class _Line:
    """A progress display on one updating line of a stream, where tqdm is not installed."""

    def __init__(self, total: int, desc: str, stream):
        self.total, self.done, self.desc, self.stream, self.width, self.text = total, 0, desc, stream, 0, ""
        self.start = time.monotonic()
        self.written: float | None = None  # when the line was last written

    def _times(self) -> str:
        """``[elapsed<remaining]``: the remaining time assumes the steps left go as fast as those done."""
        elapsed = time.monotonic() - self.start
        left = _clock(elapsed * max(self.total - self.done, 0) / self.done) if self.done > 0 else "?"
        return f"[{_clock(elapsed)}<{left}]"

    def _show(self) -> None:
        line = " ".join(part for part in (f"{self.desc} [{self.done}/{self.total}]", self.text, self._times()) if part)
        self.stream.write("\r" + line.ljust(self.width))  # spaces over what a longer line left
        self.stream.flush()
        self.width = len(line)
        self.written = time.monotonic()

    def set_description(self, text: str) -> None:
        self.text = text
        self._show()

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.written is None or self.done >= self.total or time.monotonic() - self.written >= REFRESH:
            self._show()

    def close(self) -> None:
        if self.done >= self.total:
            line = f"{self.desc} [{self.done}/{self.total}] done"
        else:  # stopped short (an exception): the line as it stood, with its times, not "done"
            line = " ".join(part for part in (f"{self.desc} [{self.done}/{self.total}]", self.text,
                                              self._times()) if part)
        # the line cleared first, not padded: nothing trails after the last word
        self.stream.write("\r" + " " * self.width + "\r" + line + "\n")
        self.stream.flush()


class _Silent:
    """The display of a bar asked for inside a covered computation (:func:`covering`):
    it shows nothing, the computation's own display counts the work."""

    def set_description(self, text: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def bar(total: int, desc: str, unit: str, stream=None):
    """A progress display of ``total`` steps (``update``, ``set_description``, ``close``);
    a silent one inside a computation that shows its own (:func:`covering`)."""
    if _covered.get():
        return _Silent()
    stream = sys.stderr if stream is None else stream
    try:
        from tqdm import tqdm
    except ImportError:
        return _Line(total, desc, stream)
    return tqdm(total=total, desc=desc, file=stream, unit=unit)


def wanted(cost: float) -> bool:
    """Whether work of ``cost`` modelled multiply-adds shows progress: :func:`modlin.limits`
    asks for it and :func:`expected_seconds` exceeds :data:`MIN_SECONDS` (the products' rule,
    :func:`modlin._algorithms.tiles.progress`)."""
    return current_limits().progress and expected_seconds(cost) > MIN_SECONDS


@contextmanager
def covering(total: int, cost: float, desc: str, unit: str):
    """One display of ``total`` steps for a whole computation of ``cost`` modelled
    multiply-adds (None unless :func:`wanted`), closed on exit; while it lasts, every bar
    asked for inside it (the products' own) is silent, shown or not: one computation, at
    most one display, never a bar per product on top of it."""
    shown = bar(total, desc, unit) if wanted(cost) else None
    token = _covered.set(True)
    try:
        yield shown
    finally:
        _covered.reset(token)
        if shown is not None:
            shown.close()


@lru_cache(maxsize=1)
def _gemm_rate() -> float:
    """Multiply-adds per second of a float64 GEMM here: the fastest of three 384**3 products
    (after one that wakes BLAS' threads), timed once. The fastest, as timings are: one timing
    alone is at the mercy of a moment's load on the machine, and a slow one makes every
    product look longer than it is."""
    x = np.ones((384, 384))
    x @ x
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        x @ x
        best = min(best, time.perf_counter() - t0)
    return 384**3 / max(best, 1e-6)


def expected_seconds(cost: float) -> float:
    """Seconds for ``cost`` multiply-adds of the cost model (units of a large fp64 GEMM)."""
    return cost / _gemm_rate()
