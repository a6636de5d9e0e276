"""``modlin.limits`` per thread (contextvars context), and sizes parsed exactly.

Limits set in one thread are that thread's: threads whose ``with`` blocks end in
any order leave each other's limits alone, a product's worker threads obey the
limits of the thread that called it, and a thread a user starts begins with the
process' defaults unless it runs in a copy of the starter's context. Threads are
ordered with events, so that each interleaving is the one named, every run.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

import modlin
from conftest import rand_ints, ref_matmul
from modlin._engines import threads as _threads
from modlin._runtime import limits as _limits

MiB = 2**20
WAIT = 30  # seconds any thread waits for another before the test fails instead of hanging


@pytest.fixture(autouse=True)
def _restore_limits():
    """Each test starts from the limits in force and leaves them so."""
    token = _limits._current.set(_limits.current())
    yield
    _limits._current.reset(token)


def _thread(fn) -> tuple[threading.Thread, list]:
    """A started thread running ``fn``, and a list that receives its exception, if any."""
    errors: list = []

    def body():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001  raised in the test's thread, by _join
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, errors


def _join(*started):
    for t, errors in started:
        t.join(WAIT)
        assert not t.is_alive(), "a thread of the test hung"
        if errors:
            raise errors[0]


def _wait(event: threading.Event):
    assert event.wait(WAIT), "a thread of the test hung"


# ---------------------------------------------------------------------- per thread

def test_threads_ending_out_of_order_keep_their_own_limits():
    """A sets, B sets, A ends, B ends: with one process-wide value, B's exit put back A's
    1 MiB for the whole process, and A saw B's limits meanwhile."""
    before = modlin.limits.current()
    a_set, b_set, a_done = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with modlin.limits(memory="1MiB"):
            a_set.set()
            _wait(b_set)
            seen["a"] = modlin.limits.current()
        seen["a after"] = modlin.limits.current()
        a_done.set()

    def b():
        _wait(a_set)
        with modlin.limits(memory="3MiB", threads=1):
            b_set.set()
            _wait(a_done)
            seen["b"] = modlin.limits.current()
        seen["b after"] = modlin.limits.current()

    _join(_thread(a), _thread(b))
    default = _limits.defaults()
    assert seen["a"] == _limits.Limits(MiB, default.threads, default.progress)
    assert seen["b"] == _limits.Limits(3 * MiB, 1, default.progress)
    assert seen["a after"] == seen["b after"] == default
    assert modlin.limits.current() == before  # this thread's: never touched


def test_a_plain_call_applies_to_its_thread_only():
    before = modlin.limits.current()
    seen = []

    def set_here():
        modlin.limits(memory=12345)  # no ``with``: at once, for this thread
        seen.append(modlin.limits.current().memory)

    _join(_thread(set_here))
    assert seen == [12345]
    assert modlin.limits.current() == before


def test_a_user_thread_starts_from_the_defaults_and_a_copied_context_carries_the_limits():
    seen = {}
    with modlin.limits(memory="5MiB", threads=1):
        ctx = contextvars.copy_context()
        _join(_thread(lambda: seen.setdefault("fresh", modlin.limits.current())))
    # after the block: the copy keeps the limits of the moment it was made
    _join(_thread(lambda: seen.setdefault("copied", ctx.run(modlin.limits.current))))
    inherit = getattr(sys.flags, "thread_inherit_context", 0)  # free-threaded 3.14: new threads copy it
    assert seen["fresh"] == (ctx.run(modlin.limits.current) if inherit else _limits.defaults())
    assert (seen["copied"].memory, seen["copied"].threads) == (5 * MiB, 1)


def test_restore_in_another_thread_is_refused_and_changes_nothing():
    before = modlin.limits.current()
    lim = modlin.limits(memory="7MiB")
    errors = []

    def elsewhere():
        with pytest.raises(RuntimeError, match="thread"):
            lim.restore()
        errors.append(modlin.limits.current())

    _join(_thread(elsewhere))
    assert errors == [_limits.defaults()]  # that thread's own: untouched
    assert modlin.limits.current().memory == 7 * MiB
    lim.restore()  # here, it works: once
    assert modlin.limits.current() == before
    with modlin.limits(memory="9MiB"):
        lim.restore()  # a second time: nothing (not this block's limits put back)
        assert modlin.limits.current().memory == 9 * MiB
    assert repr(lim).startswith("modlin.limits(memory='7 MiB'")


def _concurrent(job, limits_a: dict, limits_b: dict) -> dict:
    """``job()`` in two threads, each under its own limits, both set before either runs
    its job and both jobs done before either block ends: with one process-wide value,
    both jobs would run under ``limits_b``."""
    a_set, b_set, a_ran, b_ran = (threading.Event() for _ in range(4))
    seen = {}

    def one(name, kw, mine, other, ran, other_ran):
        if name == "b":
            _wait(a_set)
        with modlin.limits(**kw):
            mine.set()
            _wait(other)
            seen[name] = job()
            ran.set()
            _wait(other_ran)

    _join(_thread(lambda: one("a", limits_a, a_set, b_set, a_ran, b_ran)),
          _thread(lambda: one("b", limits_b, b_set, a_set, b_ran, a_ran)))
    return seen


def test_pool_tasks_run_under_the_limits_of_their_caller():
    def job():
        # [first item: this thread, the others: the pool's threads]
        return _threads.run(lambda _: (threading.get_ident(), modlin.limits.current().memory), [0, 1, 2])

    seen = _concurrent(job, {"memory": "1MiB", "threads": 3}, {"memory": "2MiB", "threads": 3})
    for name, budget in (("a", MiB), ("b", 2 * MiB)):
        assert [m for _, m in seen[name]] == [budget] * 3
        caller = seen[name][0][0]
        assert all(t != caller for t, _ in seen[name][1:])  # on the pool's threads


def test_a_products_worker_threads_obey_its_callers_limits(monkeypatch, rng):
    """A real product split into slabs: every slab, on whatever thread, sees the limits in
    force where the product was called."""
    monkeypatch.setattr(_threads, "MIN_WORK", 0)
    monkeypatch.setattr(_threads, "MIN_ROWS", 8)
    monkeypatch.setattr(_threads, "MIN_ENTRIES", 64)
    inside = _threads._inside
    slabs: list = []

    def spy(fn, item):
        slabs.append((threading.current_thread().name, modlin.limits.current()))
        return inside(fn, item)

    monkeypatch.setattr(_threads, "_inside", spy)
    p = 2**31 - 1
    A, B = (rand_ints(rng, shape, 0, p - 1).astype(np.int64) for shape in ((67, 40), (40, 50)))

    def job():
        return modlin.matmul(A, B, p)

    seen = _concurrent(job, {"memory": "48MiB", "threads": 2}, {"memory": "40MiB", "threads": 3})
    want = ref_matmul(A, B, p)
    assert all(np.array_equal(seen[x].astype(object), want) for x in "ab")
    by_budget = {}
    for name, lim in slabs:
        by_budget.setdefault((lim.memory, lim.threads), set()).add(name)
    assert set(by_budget) == {(48 * MiB, 2), (40 * MiB, 3)}
    assert all(any(n.startswith("modlin") for n in names) for names in by_budget.values())


def test_dask_tasks_side_by_side_keep_their_own_worker_limits(monkeypatch):
    """Two tasks on one worker's threads, the first to start ending first: each under its own
    limits, and none left behind (before, the first task's limits held for both)."""
    _dask = pytest.importorskip("modlin._front.dask")
    wanted = {"a": {"memory": 3 * MiB, "threads": 1}, "b": {"memory": 4 * MiB, "threads": 2}}
    name = threading.local()
    monkeypatch.setattr(_dask, "_worker_limits", lambda: wanted[name.value])
    a_started, b_started, a_ended = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a_body():
        a_started.set()
        _wait(b_started)
        return modlin.limits.current()

    def b_body():
        b_started.set()
        _wait(a_ended)
        return modlin.limits.current()

    def task(me, body, ended=None):
        name.value = me
        seen[me] = _dask._task(body)
        seen[me + " after"] = modlin.limits.current()
        if ended is not None:
            ended.set()

    first = _thread(lambda: task("a", a_body, a_ended))
    _wait(a_started)
    _join(first, _thread(lambda: task("b", b_body)))
    for me in "ab":
        assert (seen[me].memory, seen[me].threads) == (wanted[me]["memory"], wanted[me]["threads"])
        assert seen[me + " after"] == _limits.defaults()


# ----------------------------------------------------------------------------- sizes

UNITS = sorted(_limits._UNITS)


def _oracle(text: str, unit: str) -> int | None:
    """The bytes of ``text`` followed by ``unit``, from fractions; None when out of range."""
    value = Fraction(text) * _limits._UNITS[unit.lower()]
    n = value.numerator // value.denominator
    return n if 1 <= n <= _limits.MAX_SIZE else None


@st.composite
def _size_texts(draw):
    whole = draw(st.text("0123456789", max_size=25))
    frac = draw(st.none() | st.text("0123456789", min_size=1, max_size=25))
    if not whole and frac is None:
        whole = "0"
    exp = draw(st.none() | st.integers(-40, 40))
    exp_text = "" if exp is None else draw(st.sampled_from("eE")) + draw(
        st.sampled_from(["", "+"] if exp >= 0 else [""])) + str(exp)
    number = whole + ("" if frac is None else "." + frac) + exp_text
    unit = draw(st.sampled_from(UNITS))
    unit = draw(st.sampled_from([unit, unit.upper(), unit.title()]))
    space = draw(st.sampled_from(["", " ", "  "]))
    return number, unit, space


@given(_size_texts())
def test_parse_size_is_exact(case):
    number, unit, space = case
    text = space + number + space + unit + space
    want = _oracle(number, unit)
    if want is None:
        with pytest.raises(ValueError, match="memory"):
            _limits.parse_size(text)
    else:
        assert _limits.parse_size(text) == want


@pytest.mark.parametrize("text, size", [
    ("1.5GiB", 1610612736), ("1e9", 10**9), ("2.7B", 2), ("0.0009765625KiB", 1), ("1E-3kB", 1),
    ("9223372036854775807", 2**63 - 1), ("8589934591.999999999GiB", 2**63 - 2), (".5KiB", 512),
    ("9007199254740993", 2**53 + 1),  # a float would round it to 2**53
    ("1." + "0" * 5000 + "1KiB", 1024), ("0." + "0" * 5000 + "1e5003", 100),  # longer than int() takes
])
def test_parse_size_exact_cases(text, size):
    assert _limits.parse_size(text) == size


@pytest.mark.parametrize("text, match", [
    ("1e400GiB", "too large"), ("9" * 400, "too large"), ("1e" + "9" * 400, "too large"),
    ("9223372036854775808", "too large"), ("8EiB", "not a size"), ("1" + "0" * 5000, "too large"),
    ("0.5B", "less than one byte"), ("1e-400", "less than one byte"), ("1e-" + "9" * 400, "less than one byte"),
    ("0." + "0" * 5000 + "1TiB", "less than one byte"), ("0e999999999", "positive"), ("0.000", "positive"),
    ("1.", "not a size"), ("1e", "not a size"), (".", "not a size"), ("inf", "not a size"), ("nan", "not a size"),
])
def test_parse_size_refuses_out_of_range(text, match):
    with pytest.raises(ValueError, match=match):
        _limits.parse_size(text)


@given(st.integers(20, 10**30), st.sampled_from(UNITS), st.booleans())
def test_parse_size_huge_or_tiny_exponents(exp, unit, negative):
    text = f"1.5e{'-' if negative else ''}{exp}{unit}"
    with pytest.raises(ValueError, match="less than one byte" if negative else "too large"):
        _limits.parse_size(text)


@pytest.mark.parametrize("size", [np.int64(5), np.int32(5), np.uint64(5), np.int8(5)])
def test_parse_size_takes_numpy_integers(size):
    got = _limits.parse_size(size)
    assert got == 5 and type(got) is int
    with modlin.limits(memory=np.int64(3 * MiB)):
        assert type(modlin.limits.current().memory) is int


@pytest.mark.parametrize("bad, exc", [(2**63, ValueError), (np.uint64(2**63), ValueError), (10**400, ValueError),
                                      (np.int64(0), ValueError), (np.int64(-1), ValueError), (0, ValueError),
                                      (np.bool_(True), TypeError), (False, TypeError), (1e9, TypeError),
                                      (np.float64(1e9), TypeError), (Fraction(3), TypeError), (b"1GiB", TypeError)])
def test_parse_size_refuses_ints_out_of_range_and_other_types(bad, exc):
    with pytest.raises(exc, match="memory"):
        _limits.parse_size(bad)


def test_environment_sizes_out_of_range(monkeypatch):
    monkeypatch.setenv("MODLIN_MEMORY", "1e400GiB")
    with pytest.raises(ValueError, match="MODLIN_MEMORY.*too large"):
        _limits._from_environment()
    monkeypatch.setenv("MODLIN_MEMORY", "1e-3")
    with pytest.raises(ValueError, match="MODLIN_MEMORY.*less than one byte"):
        _limits._from_environment()
