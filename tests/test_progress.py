"""``modlin._runtime.progress``: the plain line's times, and one display covering a whole computation.

The line is checked on a clock of our own (the ``time`` module that
``modlin._runtime.progress`` sees replaced, not the process' own), so its times are exact
and no test waits; tqdm is hidden (``sys.modules["tqdm"] = None``,
so ``import tqdm`` raises ImportError) where the plain line is meant.
"""

from __future__ import annotations

import io
import sys
import time
from types import SimpleNamespace

import pytest

import modlin
from modlin._runtime import progress as _progress


class Clock:
    """A stand-in for ``time.monotonic``: the seconds set by the test."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(_progress, "time", SimpleNamespace(monotonic=c, perf_counter=time.perf_counter))
    return c


@pytest.fixture
def no_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)


def visible(text: str) -> list[str]:
    """What each write left on the line: the text after its last carriage return."""
    return [part.rstrip() for part in text.split("\r") if part.strip()]


def test_line_shows_elapsed_and_remaining(clock, no_tqdm):
    buf = io.StringIO()
    line = _progress.bar(3, "work", "step", buf)
    assert isinstance(line, _progress._Line)
    line.set_description("first")
    assert visible(buf.getvalue())[-1] == "work [0/3] first [00:00<?]"  # nothing done: no estimate yet
    clock.now = 4.0
    line.update(1)
    assert visible(buf.getvalue())[-1] == "work [1/3] first [00:04<00:08]"  # 2 steps left at 4 s each
    clock.now = 65.0
    line.update(1)
    assert visible(buf.getvalue())[-1] == "work [2/3] first [01:05<00:32]"
    clock.now = 66.0
    line.update(1)
    assert visible(buf.getvalue())[-1] == "work [3/3] first [01:06<00:00]"
    line.close()
    text = buf.getvalue()
    # the last line, cleared first (no padding trails it), then one newline for the whole display
    assert text.endswith("\rwork [3/3] done\n") and text.count("\n") == 1


def test_line_without_steps_and_hours(clock, no_tqdm):
    """Times from an hour on read H:MM:SS; a display whose steps carry no text has no gap for it."""
    buf = io.StringIO()
    line = _progress.bar(2, "long", "tile", buf)
    clock.now = 3725.0
    line.update(1)
    assert visible(buf.getvalue()) == ["long [1/2] [1:02:05<1:02:05]"]
    assert _progress._clock(59.9) == "00:59" and _progress._clock(36000) == "10:00:00"


def test_line_refreshes_at_most_every_refresh_seconds(clock, no_tqdm):
    """Thousands of quick steps write a few lines, not thousands: the first, one per
    :data:`REFRESH` seconds, and the last."""
    buf = io.StringIO()
    line = _progress.bar(1000, "many", "step", buf)
    for i in range(1000):
        clock.now = i * 0.001  # 1 s in all
        line.update(1)
    writes = visible(buf.getvalue())
    assert writes[0].startswith("many [1/1000]") and writes[-1].startswith("many [1000/1000]")
    assert len(writes) <= 1 + 1 / _progress.REFRESH + 1


def test_line_closed_early_says_where_it_stopped(clock, no_tqdm):
    """Closed before its last step (the work raised), the line keeps its count and times: not "done"."""
    buf = io.StringIO()
    line = _progress.bar(4, "cut", "step", buf)
    clock.now = 2.0
    line.update(1)
    line.close()
    text = buf.getvalue()
    assert text.endswith("\rcut [1/4] [00:02<00:06]\n") and "done" not in text and text.count("\n") == 1


def test_covering_decides_by_the_products_rule(monkeypatch, capsys, no_tqdm):
    """One display for a whole computation, by the rule of the products' bars: progress asked
    for and the model's seconds above MIN_SECONDS; the bars asked for inside it are silent."""
    with modlin.limits(progress=False), _progress.covering(10, 1e30, "off", "%") as shown:
        assert shown is None
    with modlin.limits(progress=True):
        with _progress.covering(10, 1.0, "short", "%") as shown:  # one multiply-add
            assert shown is None
            inner = _progress.bar(5, "inner", "tile")  # a product's bar, inside a covered computation
            inner.update(5)
            inner.close()
        assert capsys.readouterr().err == ""
        monkeypatch.setattr(_progress, "MIN_SECONDS", -1.0)
        with _progress.covering(2, 1.0, "whole", "%") as shown:
            for _ in range(2):
                _progress.bar(3, "inner", "tile").update(3)
                shown.update(1)
        outside = _progress.bar(1, "after", "tile")  # the cover ends with the computation
        assert isinstance(outside, _progress._Line)
    err = capsys.readouterr().err
    assert err.endswith("\rwhole [2/2] done\n") and err.count("\n") == 1 and "inner" not in err


def test_covering_reaches_modlin_worker_threads(monkeypatch, no_tqdm):
    """Worker threads run their tasks in a copy of the caller's context: covered there too,
    and another thread of the user's own is not."""
    import threading

    from modlin._engines.threads import run

    with modlin.limits(progress=True, threads=2), _progress.covering(1, 0.0, "whole", "%"):
        kinds = run(lambda _: type(_progress.bar(1, "inner", "tile")).__name__, [0, 1, 2])
        other = []
        t = threading.Thread(target=lambda: other.append(type(_progress.bar(1, "x", "tile", io.StringIO()))))
        t.start()
        t.join()
    assert kinds == ["_Silent"] * 3 and other == [_progress._Line]


def test_gemm_rate_is_the_fastest_of_several(monkeypatch):
    """A moment's load must not make every product look long: the rate is the best of its timings."""
    times = iter([0.0, 9.0, 10.0, 10.5, 20.0, 20.25])  # timings of 9, 0.5 and 0.25 s
    monkeypatch.setattr(_progress, "time", SimpleNamespace(perf_counter=lambda: next(times),
                                                           monotonic=time.monotonic))
    _progress._gemm_rate.cache_clear()
    try:
        assert _progress._gemm_rate() == 384**3 / 0.25
    finally:
        _progress._gemm_rate.cache_clear()
