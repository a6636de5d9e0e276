"""``modlin bench --table integers``: linear algebra over Z and Q against python-flint.

Each row times one call of modlin (no modulus: exact over the integers and rationals)
and, where python-flint is installed and ``flint`` is set, the same call of
``fmpz_mat``, alternately, ``repeats`` times; medians, their ratio, whether the answers
agree, modlin's peak traced memory and the share of its time spent in its float64 GEMMs
(the lifting's products of :func:`modlin.linalg._integers.lift`; for ``charpoly``, the Krylov
products of :func:`modlin.linalg._charpoly_z.krylov_products`).
Entries are uniform in ``[-2**10, 2**10)`` (the issue's matrices).
"""

from __future__ import annotations

import datetime
import time
import tracemalloc
from fractions import Fraction
from statistics import median

import numpy as np

from modlin import linalg
from modlin._tools.bench import STDERR, STDOUT
from modlin._tools.bench.products import _flint_module, _fmt_ratio, _fmt_s, _print_header, _timed

__all__ = ["INTEGER_CASES", "run_integers_table", "BIGPRIME_BITS", "run_bigprime_table"]

#: label -> (function, number of right-hand sides)
INTEGER_CASES = {
    "det": ("det", 0),
    "solve, 1 rhs": ("solve", 1),
    "solve, 50 rhs": ("solve", 50),
    "rank": ("rank", 0),
    "charpoly": ("charpoly", 0),
}


def _calls(what: str, a: np.ndarray, b: np.ndarray | None, flint_mod):
    """modlin's call, python-flint's (or None) and a comparison of their answers."""
    if what == "det":
        return lambda: linalg.det(a), None if flint_mod is None else (lambda: _fa(a, flint_mod).det()), \
            lambda x, y: int(x) == int(y)
    if what == "solve":
        def same(x, y):
            fr = x.fractions()
            return all(Fraction(int(y[i, j].p), int(y[i, j].q)) == fr[i, j]
                       for i in range(fr.shape[0]) for j in range(fr.shape[1]))
        return lambda: linalg.solve(a, b), None if flint_mod is None else (
            lambda: _fa(a, flint_mod).solve(_fa(b, flint_mod))), same
    if what == "rank":
        return lambda: linalg.rank(a), None if flint_mod is None else (lambda: _fa(a, flint_mod).rank()), \
            lambda x, y: int(x) == int(y)
    return lambda: linalg.charpoly(a), None if flint_mod is None else (lambda: _fa(a, flint_mod).charpoly()), \
        lambda x, y: [int(v) for v in x] == [int(v) for v in y.coeffs()]


def _fa(x: np.ndarray, flint_mod):
    return flint_mod.fmpz_mat(x.tolist())


def _alternate(mine, theirs, same, answer, repeats: int):
    """``repeats`` runs of ``mine`` (returning ``(seconds, extra)``), each followed by one of
    ``theirs`` (or none): the medians of both, whether ``theirs``' first answer equals
    ``answer`` (``"yes"``, ``"NO"``, ``"-"`` without it) and the extras."""
    t_mine, t_theirs, extras, check = [], [], [], "-"
    for i in range(repeats):
        t, extra = mine()
        t_mine.append(t)
        extras.append(extra)
        if theirs is not None:
            t0 = time.perf_counter()
            ref = theirs()
            t_theirs.append(time.perf_counter() - t0)
            if i == 0:
                check = "yes" if same(answer, ref) else "NO"
    return median(t_mine), (median(t_theirs) if t_theirs else None), check, extras


def _gemm_share(call) -> tuple[float, float]:
    """``(seconds, share of them in the GEMMs)`` of one call, by timing the lifter's two
    products and the charpoly's Krylov products."""
    from modlin.linalg import _charpoly_z, _integers

    spent = [0.0]
    hooks = [(_integers._Lifter, "digit"), (_integers._Lifter, "times_A"), (_charpoly_z, "krylov_products")]
    real = [getattr(owner, name) for owner, name in hooks]

    def timed(fn):
        def wrapper(*args):
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[0] += time.perf_counter() - t0
        return wrapper

    for (owner, name), fn in zip(hooks, real):
        setattr(owner, name, timed(fn))
    try:
        total = _timed(call)
    finally:
        for (owner, name), fn in zip(hooks, real):
            setattr(owner, name, fn)
    return total, spent[0] / total if total else 0.0


def _open_table(out, flint: bool, call: str, repeats: int, columns: list[str]):
    """``(python-flint or None, print)``: the run's header and the table's first two lines."""
    flint_mod = _flint_module() if flint else None

    def pr(*a):
        print(*a, file=out, flush=True)

    _print_header(pr, datetime.datetime.now().astimezone(), call, flint_mod, False,
                  f"median of {repeats}, modlin and python-flint alternately")
    pr("| " + " | ".join(c.lstrip(">") for c in columns) + " |")
    pr("|" + "|".join("---:" if c.startswith(">") else "---" for c in columns) + "|")
    return flint_mod, pr


def run_integers_table(sizes=(400, 1000), cases=None, repeats=1, flint=True, out=STDOUT,
                       progress=STDERR, seed=0, flint_limit=1000):
    """Print the Markdown table; python-flint runs up to ``n = flint_limit``; the charpoly rows
    stop at ``n = 400`` (beyond, minutes for python-flint). ``cases``: row labels or
    function names (default all)."""
    wanted = cases
    cases = [label for label, (what, _) in INTEGER_CASES.items()
             if wanted is None or label in wanted or what in wanted]
    if not cases:
        raise ValueError(f"no integers-table rows match {wanted!r}: use labels of {list(INTEGER_CASES)} or "
                         "function names (det, solve, rank, charpoly)")
    flint_mod, pr = _open_table(out, flint, f"run_integers_table(sizes={list(sizes)}, cases={cases}, repeats={repeats})",
                                repeats, ["case", ">n", ">modlin", ">python-flint", ">flint / modlin", "same",
                                          ">peak MiB", ">in GEMMs"])
    rng = np.random.default_rng(seed)
    for n in sizes:
        a = rng.integers(-2**10, 2**10, (n, n))
        for label in cases:
            what, k = INTEGER_CASES[label]
            b = rng.integers(-2**10, 2**10, (n, k)) if k else None
            if what == "charpoly" and n > 400:
                continue  # python-flint takes minutes beyond: the charpoly rows stop at n = 400
            mine, theirs, same = _calls(what, a, b, flint_mod)
            if n > flint_limit:
                theirs = None
            print(f"integers: {label} n={n}", file=progress, flush=True)
            tracemalloc.start()
            answer = mine()
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            tm, tt, check, shares = _alternate(lambda: _gemm_share(mine), theirs, same, answer, repeats)
            pr(f"| {label} | {n} | {_fmt_s(tm)} | {'-' if tt is None else _fmt_s(tt)} | "
               f"{_fmt_ratio(None if tt is None else tt / tm)} | {check} | {peak:.0f} | {median(shares):.0%} |")
    pr()
    pr("modlin: `linalg.<function>(A)` with no modulus (exact over Z and Q); python-flint: the "
       "`fmpz_mat` method of the same name. Entries uniform in [-2**10, 2**10). 'peak MiB': "
       "modlin's peak traced memory (tracemalloc) in its first call.")


#: The big-prime table's moduli: 127-bit (a Mersenne prime), 200- and 256-bit primes.
BIGPRIME_BITS = (127, 200, 256)
BIGPRIME_FUNCTIONS = ("det", "solve", "inv", "rank", "matmul")


def _big_prime(bits: int) -> int:
    from modlin._arith.primes import prev_prime

    return 2**127 - 1 if bits == 127 else prev_prime(2**bits)


def run_bigprime_table(sizes=(200, 400), bits=BIGPRIME_BITS, functions=BIGPRIME_FUNCTIONS, repeats=3,
                       flint=True, out=STDOUT, progress=STDERR, seed=0):
    """``modlin bench --table bigprime``: linear algebra and products modulo primes of 127 to 256
    bits against python-flint's ``fmpz_mod_mat`` (random entries in ``[0, p)``; ``solve`` with
    one right-hand side), the two run alternately; medians of ``repeats``."""
    import modlin

    unknown = sorted(set(functions) - set(BIGPRIME_FUNCTIONS))
    if unknown:
        raise ValueError(f"the bigprime table has no {unknown} rows (its functions: {' '.join(BIGPRIME_FUNCTIONS)})")
    flint_mod, pr = _open_table(out, flint, f"run_bigprime_table(sizes={list(sizes)}, bits={list(bits)}, "
                                f"functions={list(functions)}, repeats={repeats})", repeats,
                                ["p", ">n", "function", ">modlin", ">python-flint", ">flint / modlin", "same"])
    rng = np.random.default_rng(seed)
    for b in bits:
        p = _big_prime(b)
        for n in sizes:
            a = rng.integers(0, 2**62, (n, n)).astype(object) * (p // 2**62)
            a = (a + rng.integers(0, 2**62, (n, n)).astype(object)) % p
            rhs = a[:, 0] * 3 % p
            ctx = None if flint_mod is None else flint_mod.fmpz_mod_ctx(p)
            fa = None if ctx is None else flint_mod.fmpz_mod_mat(a.tolist(), ctx)
            for fn in functions:
                print(f"bigprime: {fn} {b} bits n={n}", file=progress, flush=True)
                if fn == "matmul":
                    mine = lambda: modlin.matmul(a, a, p)  # noqa: E731
                    theirs = None if fa is None else (lambda: fa * fa)
                    same = lambda x, y: x.tolist() == [[int(v) for v in row] for row in y.tolist()]  # noqa: E731
                elif fn == "solve":
                    mine = lambda: linalg.solve(a, rhs, p)  # noqa: E731
                    fb = None if fa is None else flint_mod.fmpz_mod_mat([[int(v)] for v in rhs.tolist()], ctx)
                    theirs = None if fa is None else (lambda: fa.solve(fb))
                    same = lambda x, y: [int(v) for v in x.tolist()] == [int(r[0]) for r in y.tolist()]  # noqa: E731
                else:
                    mine = lambda fn=fn: getattr(linalg, fn)(a, p)  # noqa: E731
                    theirs = None if fa is None else (lambda fn=fn: getattr(fa, fn)())
                    if fn == "inv":
                        same = lambda x, y: x.tolist() == [[int(v) for v in row] for row in y.tolist()]  # noqa: E731
                    else:
                        same = lambda x, y: int(x) == int(y)  # noqa: E731
                answer = mine()
                tm, tt, check, _ = _alternate(lambda: (_timed(mine), None), theirs, same, answer, repeats)
                pr(f"| {b}-bit | {n} | {fn} | {_fmt_s(tm)} | {'-' if tt is None else _fmt_s(tt)} | "
                   f"{_fmt_ratio(None if tt is None else tt / tm)} | {check} |")
    pr()
    pr("modlin: `linalg.<function>(A, p)` (`solve` with one right-hand side) and `modlin.matmul(A, A, p)`; "
       "python-flint: the `fmpz_mod_mat` method (`*` for the product). Entries uniform in [0, p).")
