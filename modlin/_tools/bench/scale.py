"""``modlin bench --table scale``: big products within a memory budget, on every core.

Each row is measured in a fresh child process, so that its peak memory is its
own: the child builds fresh ``n x n`` operands, compiles on a small product,
then resets the kernel's high-water mark (``/proc/self/clear_refs``, Linux) and
runs the product once, as a user meets it (*first call*); then ``repeats``
products into the same output, each followed at once by a float64
:func:`numpy.matmul` of the same size, whose per-pair ratios give the
*time / dgemm* column (median). The steady products run as a loop of products
does, with the scratch pool keeping their buffers (:func:`modlin._runtime.scratch.holding`):
otherwise it frees what exceeds a quarter of the budget two seconds after each
product, during the dgemm that follows, and the dgemm ran up to 30 % slower for
it (127 bits, ``n = 4096``, untiled: 2.0-2.6 s against 1.76-1.83 after a tiled
product), which flattered the products that free the most. *Peak extra* is the resident memory the first
call added beyond the operands, over the size of the result (1.0: no working
memory beyond the result). Each row runs under ``MODLIN_MEMORY`` = the budget
of its column group (the default budget, and the one given).

With ``rounds`` > 1 each row's two children run that many times, alternately (default
budget, the given one, default, ...): the figures are medians over the rounds (peak
memory: the largest), and *vs default* is the ratio of the two budgets' medians. One
child per budget, minutes apart, is at the mercy of this machine's swings (the same
127-bit product measured 12 to 18 GEMM times within minutes); alternating children see
the same swings.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from statistics import median

from modlin._tools.bench import STDERR, STDOUT

__all__ = ["run_scale_table", "scale_cases", "SCALE_CASES"]

#: The rows: (label, kind, argument). ``matmul``: modulo the prime; ``zgemm``: ozaki.zgemm.
SCALE_CASES = (
    ("2^31-1", "matmul", 2**31 - 1),
    ("50-bit", "matmul", 2**50 - 27),
    ("2^61-1", "matmul", 2**61 - 1),
    ("127-bit", "matmul", 2**127 - 1),
    ("ozaki.zgemm", "zgemm", None),
)

_CHILD = r"""
import json, sys, time
from statistics import median
import numpy as np
import modlin
from modlin import ozaki
from modlin._algorithms import ozaki_tiles
from modlin._runtime.scratch import holding

kind, arg, n, repeats = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return None

rng = np.random.default_rng(0)
if kind == "matmul":
    p = int(arg)
    lo = min(p, 2**62)
    a, b = rng.integers(0, lo, (n, n)), rng.integers(0, lo, (n, n))
    if p > 2**63:
        a, b = a.astype(object) * 3 % p, b.astype(object) * 5 % p
    call = lambda out=None: modlin.matmul(a, b, p, out=out) if p <= 2**63 else modlin.matmul(a, b, p)
    small = lambda: modlin.matmul(a[:200, :200], b[:200, :200], p)
    pl = modlin.plan(p, n, n, n)
    tiles = (pl.tiling(objects=(True, True)) if p > 2**63 else pl.tiling()).count
else:
    a = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    b = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    call = lambda out=None: ozaki.zgemm(a, b)
    small = lambda: ozaki.zgemm(a[:200, :200], b[:200, :200])
    tiles = ozaki_tiles.product_tiling(ozaki._resolve("complex", "auto", None, "auto", k=n), True, (n, n, n), "fast", False)[0].count
small()
x, y = rng.random((n, n)), rng.random((n, n))
d = np.empty((n, n))
np.matmul(x, y, out=d)
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    base = status("VmRSS")
except OSError:
    base = None
t0 = time.perf_counter()
c = call()
first = time.perf_counter() - t0
peak = None if base is None else status("VmHWM") - base
ratios, steady = [], []
with holding():  # as in a loop of products: no idle scratch freed during the dgemms
    for _ in range(repeats):
        t0 = time.perf_counter()
        call(c if kind == "matmul" and c.dtype != object else None)
        t1 = time.perf_counter()
        np.matmul(x, y, out=d)
        t2 = time.perf_counter()
        steady.append(t1 - t0)
        ratios.append((t1 - t0) / (t2 - t1))
print(json.dumps(dict(ratios=ratios, first=first / median(steady),
                      peak=peak, result=c.nbytes if c.dtype != object else 8 * c.size, tiles=tiles)))
"""


def _merge(runs: list[dict]) -> dict:
    """One budget's children of a row as one row: every product/dgemm pair's ratio pooled
    (``ratio``: their median), the median first/steady, the largest peak."""
    good = [r for r in runs if "error" not in r]
    if len(good) < len(runs):
        return next(r for r in runs if "error" in r)
    peaks = [r["peak"] for r in good]
    ratios = [x for r in good for x in r["ratios"]]
    return dict(ratio=median(ratios), ratios=ratios, first=median([r["first"] for r in good]),
                peak=None if None in peaks else max(peaks), result=good[0]["result"], tiles=good[0]["tiles"],
                rounds=len(good))


def _row(kind: str, arg, n: int, repeats: int, memory: str | None) -> dict:
    env = dict(os.environ)
    if memory is None:
        env.pop("MODLIN_MEMORY", None)
    else:
        env["MODLIN_MEMORY"] = memory
    r = subprocess.run([sys.executable, "-c", _CHILD, kind, json.dumps(arg), str(n), str(repeats)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _cells(r: dict) -> list[str]:
    if "error" in r:
        return ["error", "", "", ""]
    peak = "n/a" if r["peak"] is None else f"{r['peak'] / r['result']:.2f}"
    return [f"{r['ratio']:.2f}", f"{r['first']:.2f}", peak, str(r["tiles"])]


def _versus(r: dict, base: dict) -> str:
    return "" if "error" in r or "error" in base else f"{r['ratio'] / base['ratio']:.2f}"


def run_scale_table(sizes=(4096, 8192), memory: str = "1GiB", repeats: int = 3, cases=SCALE_CASES,
                    out=STDOUT, progress=STDERR, rounds: int = 1) -> list[dict]:
    """Time and peak memory of big products under the default budget and under ``memory``.

    The header is printed first and each row as soon as its children have
    run, so that a long table (about an hour here) shows what it has measured
    even when it is stopped early.

    Parameters
    ----------
    sizes : sequence of int
        Square sizes ``n`` (the issue's targets are at 4096 and 8192).
    memory : str
        The second budget (``MODLIN_MEMORY`` of its children), e.g. ``"1GiB"``.
    repeats : int
        Steady-state products per child; the medians are shown.
    cases : sequence
        Rows, as in :data:`SCALE_CASES`, or their labels (``"2^61-1"``);
        ``ozaki.zgemm`` rows run at the sizes up to 4096.
    out, progress : file
        Where the table, and the progress display, go.
    rounds : int
        Children per row and budget, run alternately; medians over them, and the
        second budget's time over the default's (*vs default*).

    Returns
    -------
    list of dict
        One per row and budget, as measured (``ratio``, ``ratios``: every pair's,
        ``first``, ``peak``, ``result``, ``tiles``, ``rounds``).

    Examples
    --------
    >>> from modlin._tools.bench.scale import run_scale_table
    >>> rows = run_scale_table(sizes=(256,), repeats=1, cases=["2^31-1"])  # doctest: +SKIP
    """
    from modlin._runtime.limits import current, default_memory, format_size
    from modlin._runtime.progress import bar
    from modlin._tools.bench.products import _print_header

    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    cases = scale_cases(cases)
    started = datetime.datetime.now().astimezone()

    def pr(*args):
        print(*args, file=out, flush=True)

    threads = current().threads
    per = f"{repeats} product/dgemm pairs per child, {rounds} child(ren) per row and budget, run alternately"
    _print_header(pr, started, f"run_scale_table(sizes={tuple(sizes)}, memory={memory!r}, repeats={repeats}, "
                  f"rounds={rounds})", None, False, f"medians of {per}; {threads} thread(s)")
    default = format_size(default_memory())
    pr(f"| product | n | time/dgemm ({default}) | first/steady | peak extra/result | tiles "
       f"| time/dgemm ({memory}) | first/steady | peak extra/result | tiles | vs default |")
    pr("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    jobs = [(label, kind, arg, n) for n in sizes for label, kind, arg in cases if kind != "zgemm" or n <= 4096]
    display = bar(2 * rounds * len(jobs), "modlin bench --table scale", "product", stream=progress)
    rows = []
    for label, kind, arg, n in jobs:
        runs = {None: [], memory: []}
        for i in range(rounds):
            for budget in runs:
                display.set_description(f"{label} n={n} budget={budget or 'default'} round {i + 1}/{rounds}")
                runs[budget].append(_row(kind, arg, n, repeats, budget))
                display.update(1)
        base, small = _merge(runs[None]), _merge(runs[memory])
        rows += [dict(base, label=label, n=n, budget=None), dict(small, label=label, n=n, budget=memory)]
        pr(f"| {label} | {n} | " + " | ".join(_cells(base) + _cells(small) + [_versus(small, base)]) + " |")
    display.close()
    for r in rows:
        if "error" in r:
            pr(f"\n- {r['label']} n={r['n']} budget={r['budget']}: {r['error']}")
    pr()
    pr("Peak extra: resident memory the first call added beyond its operands, over the result's size "
       "(Linux VmHWM; the largest over the rounds). first/steady: the first call on fresh operands over "
       "the steady-state median. vs default: the second budget's time/dgemm over the default's.")
    return rows


def scale_cases(cases) -> tuple:
    """The rows of :data:`SCALE_CASES` that ``cases`` names: rows, or their labels.

    Raises ``ValueError`` naming the known labels for a label that is none of them.
    """
    known = {case[0]: case for case in SCALE_CASES}
    picked = []
    for case in cases:
        if isinstance(case, str):
            if case not in known:
                raise ValueError(f"unknown scale case {case!r}; the cases are {', '.join(known)}")
            case = known[case]
        picked.append(tuple(case))
    return tuple(picked)
