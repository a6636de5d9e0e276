"""``modlin bench --table busy``: the table's rows, its children and the busy loop's end."""

from __future__ import annotations

import io

import pytest

from modlin._tools import cli
from modlin._tools.bench import busy as _bench_busy


def test_busy_table_rows_and_the_loop_ends(monkeypatch):
    monkeypatch.setattr(_bench_busy, "BUSY_CASES", {"det tiny": ("det", 31, 40), "matmul tiny": ("matmul", 61, 30)})
    started = []
    real = _bench_busy.subprocess.Popen

    def popen(args, *rest, **kw):
        proc = real(args, *rest, **kw)
        if "while time.monotonic()" in args[-1]:  # the busy loop (subprocess.run opens the children)
            started.append(proc)
        return proc

    monkeypatch.setattr(_bench_busy.subprocess, "Popen", popen)
    out = io.StringIO()
    rows = _bench_busy.run_busy_table(rounds=2, repeats=1, out=out, progress=io.StringIO(), limit_s=60)
    assert [r["case"] for r in rows] == ["det tiny", "matmul tiny"]
    for r in rows:
        assert len(r["runs_default"]) == len(r["runs_one"]) == 2
        assert r["default"] > 0 and r["one"] > 0 and r["ratio"] == pytest.approx(r["default"] / r["one"])
    text = out.getvalue()
    assert "one core held by a busy loop" in text and "| det tiny |" in text and "default / one" in text
    assert len(started) == 1 and started[0].poll() is not None  # the loop was stopped
    quiet = _bench_busy.run_busy_table(cases=["det tiny"], rounds=1, repeats=1, busy=False, out=io.StringIO(),
                                       progress=io.StringIO())
    assert len(quiet) == 1 and len(started) == 1  # no loop without busy
    with pytest.raises(ValueError, match="unknown busy cases"):
        _bench_busy.run_busy_table(cases=["nope"], out=io.StringIO())


def test_cli_busy_table(monkeypatch):
    seen = {}
    monkeypatch.setattr(_bench_busy, "run_busy_table", lambda **kw: seen.update(kw))
    assert cli.main(["bench", "--table", "busy", "--no-busy", "--rounds", "5", "--cases", "det 31-bit n=1500"]) == 0
    assert seen == {"cases": ["det 31-bit n=1500"], "rounds": 5, "repeats": 3, "busy": False}
    assert cli.main(["bench", "--table", "busy"]) == 0
    assert seen["rounds"] == 3 and seen["busy"] is True and seen["cases"] is None
