"""``modlin bench --table busy``: each public path on a machine where another process holds a core.

Users run modlin on shared machines, beside notebook kernels and CI jobs. There,
every threaded call that hands work to a worker and waits for it pays for the
worker being descheduled (a scheduler slice, milliseconds), and a product made of
hundreds of small GEMMs and passes pays it hundreds of times. This table holds one
core with a busy loop (a child process, bounded in time, killed at the end) and
times each case with the default threads against one thread
(``MODLIN_THREADS=1`` and one BLAS thread), each in a fresh process, the two run
alternately, ``rounds`` times; each figure is the median over the rounds of each
child's median of ``repeats`` calls. ``busy=False`` runs the same without the loop
(the quiet machine's figures, to see that the defaults cost nothing there).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from modlin._tools.bench import STDERR, STDOUT

__all__ = ["BUSY_CASES", "run_busy_table"]

#: label -> (function, bits of the prime, n): the cases of issue 43 (a 61-bit charpoly at
#: n = 1000, 31-bit det at 1500, 31-bit matmul at 2048, 61-bit det at 1000) and fifty
#: 61-bit products at n = 256; and a 127-bit det at n = 1000, whose products and steps run in
#: slabs and side by side on modlin's own workers (issue 46).
BUSY_CASES = {
    "charpoly 61-bit n=1000": ("charpoly", 61, 1000),
    "det 31-bit n=1500": ("det", 31, 1500),
    "matmul 31-bit n=2048": ("matmul", 31, 2048),
    "det 61-bit n=1000": ("det", 61, 1000),
    "50 x matmul 61-bit n=256": ("matmul50", 61, 256),
    "det 127-bit n=1000": ("det", 127, 1000),
}

_PRIMES = {31: 2**31 - 1, 61: 2**61 - 1, 127: 2**127 - 1}

#: The child imports nothing of modlin but its public functions, so that the same table times
#: an older checkout (``PYTHONPATH`` in the children's environment): the "before" figures of
#: a change. ``benchmarks/busy_core.py`` sets the same cases up for asv.
_CHILD = """
import json, sys, time
import numpy as np
import modlin
from modlin import linalg
what, p, n, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
a = rng.integers(0, min(p, 2**62), (n, n))
if p > 2**63:  # Python ints below p
    a = (a.astype(object) * (p // 2**62) + rng.integers(0, 2**62, (n, n)).astype(object)) % p
if what == "charpoly":
    call = lambda: linalg.charpoly(a, p)
elif what == "det":
    call = lambda: linalg.det(a, p)
elif what == "matmul":
    b = rng.integers(0, p, (n, n))
    call = lambda: modlin.matmul(a, b, p)
else:
    bs = [rng.integers(0, p, (n, n)) for _ in range(50)]
    call = lambda: [modlin.matmul(a, b, p) for b in bs]
call()  # kernels loaded, pages faulted in
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    call()
    times.append(time.perf_counter() - t0)
print(json.dumps(times))
"""

#: The busy loop: one core, for at most this many seconds (it is also killed at the end).
_BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"

_ONE_THREAD = {"MODLIN_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _child(what: str, bits: int, n: int, repeats: int, one: bool) -> float:
    """The median time of ``repeats`` calls in a fresh process, default threads or one."""
    env = {k: v for k, v in os.environ.items() if k not in _ONE_THREAD}
    if one:
        env.update(_ONE_THREAD)
    done = subprocess.run([sys.executable, "-c", _CHILD, what, str(_PRIMES[bits]), str(n), str(repeats)],
                          capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"the {what} child failed:\n{done.stderr[-2000:]}")
    return statistics.median(json.loads(done.stdout.strip().splitlines()[-1]))


def run_busy_table(cases=None, rounds: int = 3, repeats: int = 3, busy: bool = True, out=STDOUT,
                   progress=STDERR, limit_s: float = 3600.0) -> list[dict]:
    """Print the table (markdown) and return its rows: per case the default threads' time, one
    thread's, and their ratio (above 1: the threads cost more than they bring).

    ``cases``: labels of :data:`BUSY_CASES` (default all). ``busy=False`` leaves the machine
    quiet. The busy loop stops by itself after ``limit_s`` seconds at the latest.
    """
    from modlin._tools.bench.products import _blas_summary, _cpu_summary

    labels = list(BUSY_CASES) if cases is None else list(cases)
    unknown = [c for c in labels if c not in BUSY_CASES]
    if unknown:
        raise ValueError(f"unknown busy cases {unknown}; choose among {list(BUSY_CASES)}")
    loop = subprocess.Popen([sys.executable, "-c", _BUSY.format(seconds=float(limit_s))]) if busy else None
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    try:
        for label in labels:
            what, bits, n = BUSY_CASES[label]
            runs = {False: [], True: []}
            for r in range(rounds):
                for one in ((False, True) if r % 2 == 0 else (True, False)):  # alternate which goes first
                    runs[one].append(_child(what, bits, n, repeats, one))
                    print(f"  {label}: round {r + 1}/{rounds}, {'one thread' if one else 'default'} "
                          f"{runs[one][-1]:.3f} s", file=progress, flush=True)
            default, single = statistics.median(runs[False]), statistics.median(runs[True])
            rows.append({"case": label, "default": default, "one": single, "ratio": default / single,
                         "runs_default": runs[False], "runs_one": runs[True]})
    finally:
        if loop is not None:
            loop.kill()
            loop.wait()
    pr = lambda *a: print(*a, file=out)  # noqa: E731
    pr(f"modlin bench --table busy ({'one core held by a busy loop' if busy else 'quiet machine'}), {started}")
    pr(f"{_cpu_summary()}; {_blas_summary()}; default threads {_default_threads()}")
    pr(f"fresh process per figure, default and one thread alternately, {rounds} rounds of {repeats} calls; "
       "medians")
    pr("")
    pr("| case | default threads | one thread | default / one |")
    pr("|---|---:|---:|---:|")
    for r in rows:
        pr(f"| {r['case']} | {r['default']:.3f} s | {r['one']:.3f} s | {r['ratio']:.2f} |")
    return rows


def _default_threads() -> int:
    from modlin._runtime.limits import current

    return current().threads
