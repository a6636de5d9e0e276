"""The ``modlin`` command: ``demo``, ``plan``, ``bench`` and ``warmup``."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from modlin._front.products import matmul
from modlin._planning.planner import plan
from modlin._tools.bench import STDOUT

__all__ = ["main"]

# Primes of several sizes, one for each regime of the planner (multiword below 2**52,
# residue number systems above).
DEMO_PRIMES = (251, 65521, 1048573, 67108859, 2147483647, 1099511627689, 1125899906842597,
               2**61 - 1, 2**127 - 1)


def _random_residues(rng, p: int, shape) -> np.ndarray:
    """Uniform-ish random residues mod p: int64 when p fits, object arrays of Python ints above."""
    if p <= 2**63:
        return rng.integers(0, p, shape, dtype=np.int64)
    words = -(-p.bit_length() // 62)
    acc = np.zeros(shape, dtype=object)
    for _ in range(words):
        acc = (acc << 62) | rng.integers(0, 2**62, shape, dtype=np.int64).astype(object)
    return acc % p


def _oracle_matmul(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """Independent check: exact Python-integer products, reduced once."""
    return (a.astype(object) @ b.astype(object)) % p


def _median_time(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def demo(n: int = 512, check: int = 96, seed: int = 0, out=STDOUT) -> int:
    """Multiply random matrices modulo primes of several sizes and check each result.

    The full ``n x n`` product is timed beside a float64 ``numpy.matmul`` of the
    same size; a ``check x check`` corner of it is compared with exact Python
    integers (a full oracle at n = 512 would take minutes). Returns the number
    of mismatches (0 when everything is exact).

    Raises
    ------
    ValueError
        If ``n < 1`` or ``check < 1``: an empty corner checks nothing, and its
        "exact" would claim what was never compared.
    """
    for name, size in (("n", n), ("check", check)):
        if size < 1:
            raise ValueError(f"demo needs {name} >= 1 (got {name} = {size}): an empty product checks nothing")
    rng = np.random.default_rng(seed)
    x = rng.random((n, n))
    y = rng.random((n, n))
    check = min(check, n)
    print(f"modlin demo: A @ B mod p for random {n}x{n} matrices; 'check' compares the top-left "
          f"{check}x{check} block of each product with exact Python integers", file=out)
    print(f"{'p':>39} {'bits':>4} {'plan':<42} {'modlin':>9} {'dgemm':>9} {'ratio':>6} {'check':>6}", file=out)
    failures = 0
    for p in DEMO_PRIMES:
        a = _random_residues(rng, p, (n, n))
        b = _random_residues(rng, p, (n, n))
        pl = plan(p, n, n, n)
        c = matmul(a, b, p)
        ok = np.array_equal(c[:check, :check].astype(object), _oracle_matmul(a[:check], b[:, :check], p))
        failures += not ok
        t_mod = _median_time(lambda: matmul(a, b, p))
        t_d = _median_time(lambda: np.matmul(x, y))
        desc = pl.summary
        print(f"{p:>39} {p.bit_length():>4} {desc:<42} {t_mod * 1e3:>7.1f}ms {t_d * 1e3:>7.1f}ms "
              f"{t_mod / t_d:>6.2f} {'exact' if ok else 'WRONG':>6}", file=out)
    print("ratio = modlin time / float64 numpy.matmul time (median of 3, same run)", file=out)
    return failures


def _positive_int(text: str) -> int:
    """An argparse type: an int of at least 1 (``demo -n 0`` would check nothing and call it
    exact; ``warmup --jobs 0`` would compile nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    """The ``modlin`` command's argument parser (docs/reference.rst describes every option)."""
    from modlin import __version__
    from modlin._tools.bench.integers import BIGPRIME_FUNCTIONS
    from modlin._tools.bench.products import LINALG_FUNCTIONS
    from modlin._tools.bench.scale import SCALE_CASES

    ap = argparse.ArgumentParser(prog="modlin", description="Exact A @ B mod p on floating-point GEMMs.")
    ap.add_argument("--version", action="version", version=f"modlin {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p_demo = sub.add_parser("demo", help="multiply random matrices mod several primes and check them")
    p_demo.add_argument("-n", type=_positive_int, default=512, help="matrix size, at least 1 (default 512)")

    p_plan = sub.add_parser("plan", help="print the plan for a product and why it was chosen")
    p_plan.add_argument("p", type=int, help="modulus")
    p_plan.add_argument("--shape", type=int, nargs=3, metavar=("M", "K", "N"), default=(1024, 1024, 1024),
                        help="an M x K by K x N product (default 1024 1024 1024)")
    p_plan.add_argument("--engine", choices=["fp64", "fp32", "int8"], default=None,
                        help="restrict the plan to one GEMM engine (default: the planner weighs fp64 and fp32)")
    p_plan.add_argument("--algorithm", choices=["auto", "multiword", "rns"], default="auto",
                        help="restrict the plan to one algorithm (default auto: the cheaper exact one)")

    p_warm = sub.add_parser("warmup", help="compile every kernel of every path into the cache (for image builds)",
                            description="Compile the numba kernels of every path into modlin's cache directory "
                                        "(MODLIN_CACHE_DIR, else NUMBA_CACHE_DIR/modlin, else the user cache "
                                        "directory), so that later processes load them instead of compiling "
                                        "them on their first call. A wheel built by 'pip install .' already "
                                        "carries them; this is for editable installs and other machine types.")
    p_warm.add_argument("--quiet", action="store_true", help="no progress display and no summary line")
    p_warm.add_argument("--jobs", type=_positive_int, default=None,
                        help="processes compiling side by side, at least 1 (default: the cores this process may use)")

    p_bench = sub.add_parser("bench", help="side-by-side timings against dgemm, python-flint and galois")
    p_bench.add_argument("--table", choices=["multiword", "rns", "gaussian", "linalg", "ozaki", "ozaki-accuracy",
                                             "scale", "dask", "busy", "integers", "bigprime", "all"], default="all",
                         help="integers: linalg over Z and Q against python-flint (sizes default 400 1000); bigprime: "
                              "linalg and matmul modulo 127- to 256-bit primes against python-flint (sizes default "
                              "200 400); "
                              "multiword: moduli below 2**52 against flint and galois; rns: matmul modulo "
                              "61- to 256-bit primes and intmul against flint; gaussian: 2M/3M/4M, herk and "
                              "Z[i] intmul against dgemm and complex128 matmul; linalg: rank, det, inv, "
                              "solve, charpoly, minpoly and matrix_power against one modlin.matmul, flint and "
                              "galois; ozaki: emulated dgemm/zgemm "
                              "against numpy.matmul (about 10 minutes at 1024 and 2048); ozaki-accuracy: their "
                              "error against an exact oracle per moduli count; scale: big products (default sizes "
                              "4096 8192) under the default memory budget and under --memory, time over dgemm, "
                              "first call over steady state, peak memory over the result, tiles (one process "
                              "per row; about an hour here); dask: matmul (and ozaki.zgemm, at n up to 4096) of dask "
                              "arrays on a 2-worker LocalCluster against the in-memory product (needs dask and distributed; "
                              "run with --sizes 8192 for the reference figures); busy: linalg and matmul cases "
                              "with one core held by a busy loop, default threads against one thread, fresh "
                              "processes alternately (--rounds, default 3; --no-busy for the quiet machine); "
                              "all (default): the first four")
    p_bench.add_argument("--sizes", type=int, nargs="+", default=None,
                         help="square matrix sizes n (default 1024 2048; for --table scale 4096 8192)")
    p_bench.add_argument("--memory", default="1GiB",
                         help="the memory budget of --table scale's second column group (default 1GiB)")
    p_bench.add_argument("--cases", nargs="+", default=None, metavar="CASE",
                         help="rows of --table scale, by label (default all: "
                              + " ".join(label for label, _, _ in SCALE_CASES) + "), of --table busy, or of --table integers "
                              "(by function: det solve rank charpoly)")
    p_bench.add_argument("--bits", type=int, nargs="+", default=None,
                         help="bit sizes of the moduli of the multiword table (default 8 20 26 31 40 50), "
                              "of the linalg table (default 20 31 50) and of the bigprime table (default "
                              "127 200 256; 127 is 2**127 - 1, the others the largest primes below 2**bits)")
    p_bench.add_argument("--chunks", type=int, nargs="+", default=[2048],
                         help="chunk sizes of the dask table: square chunks, capped at n (default 2048)")
    p_bench.add_argument("--repeats", type=int, default=3, help="timed runs per figure; medians are shown (default 3)")
    p_bench.add_argument("--rounds", type=int, default=None,
                         help="--table scale: children per row and budget, run alternately; medians over them "
                              "and a 'vs default' column (default 1); --table busy: children per case and "
                              "thread setting (default 3)")
    p_bench.add_argument("--no-busy", action="store_true",
                         help="--table busy: leave the machine quiet (the same cases and columns)")
    p_bench.add_argument("--galois-timeout", type=float, default=60.0,
                         help="seconds after which a galois run is abandoned (default 60)")
    p_bench.add_argument("--no-flint", action="store_true", help="skip python-flint")
    p_bench.add_argument("--no-galois", action="store_true", help="skip galois")
    p_bench.add_argument("--functions", nargs="+", default=None, choices=LINALG_FUNCTIONS + ("matmul",), metavar="F",
                         help=f"functions of the linalg table (default all: {' '.join(LINALG_FUNCTIONS)}) "
                              f"and of the bigprime table (default all: {' '.join(BIGPRIME_FUNCTIONS)})")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``modlin`` console script."""
    args = parser().parse_args(argv)
    try:
        if args.command == "demo":
            return 1 if demo(args.n) else 0
        if args.command == "warmup":
            from modlin._tools.warmup import main as warmup

            return warmup(quiet=args.quiet, jobs=args.jobs)
        if args.command == "plan":
            m, k, n = args.shape
            print(plan(args.p, m, k, n, engine=args.engine, algorithm=args.algorithm).explain())
            return 0
        from modlin._tools.bench.products import (
            LINALG_BITS,
            LINALG_FUNCTIONS,
            run_gaussian_table,
            run_linalg_table,
            run_rns_table,
            run_table,
        )

        if args.table == "scale":
            from modlin._tools.bench.scale import SCALE_CASES, run_scale_table

            run_scale_table(sizes=args.sizes or (4096, 8192), memory=args.memory, repeats=args.repeats,
                            cases=args.cases or SCALE_CASES, rounds=args.rounds or 1)
            return 0
        if args.table == "integers":
            from modlin._tools.bench.integers import run_integers_table

            run_integers_table(sizes=args.sizes or (400, 1000), cases=args.cases, repeats=args.repeats,
                               flint=not args.no_flint)
            return 0
        if args.table == "bigprime":
            from modlin._tools.bench.integers import BIGPRIME_BITS, BIGPRIME_FUNCTIONS, run_bigprime_table

            run_bigprime_table(sizes=args.sizes or (200, 400), bits=args.bits or BIGPRIME_BITS,
                               functions=args.functions or BIGPRIME_FUNCTIONS, repeats=args.repeats,
                               flint=not args.no_flint)
            return 0
        if args.table == "busy":
            from modlin._tools.bench.busy import run_busy_table

            run_busy_table(cases=args.cases, rounds=args.rounds or 3, repeats=args.repeats, busy=not args.no_busy)
            return 0
        args.sizes = args.sizes or [1024, 2048]
        if args.functions and set(args.functions) - set(LINALG_FUNCTIONS):  # before any table runs
            raise ValueError(f"the linalg table has no {sorted(set(args.functions) - set(LINALG_FUNCTIONS))} rows "
                             f"(its functions: {' '.join(LINALG_FUNCTIONS)})")

        if args.table in ("multiword", "all"):
            run_table(sizes=args.sizes, bits=args.bits or (8, 20, 26, 31, 40, 50), repeats=args.repeats,
                      galois_timeout=args.galois_timeout, flint=not args.no_flint, galois=not args.no_galois)
        if args.table == "all":
            print()
        if args.table in ("rns", "all"):
            run_rns_table(sizes=args.sizes, repeats=args.repeats, flint=not args.no_flint)
        if args.table == "all":
            print()
        if args.table in ("gaussian", "all"):
            run_gaussian_table(sizes=args.sizes, repeats=args.repeats)
        if args.table == "all":
            print()
        if args.table in ("linalg", "all"):
            run_linalg_table(sizes=args.sizes, bits=args.bits or LINALG_BITS, repeats=args.repeats,
                             functions=args.functions or LINALG_FUNCTIONS, galois_timeout=args.galois_timeout,
                             flint=not args.no_flint, galois=not args.no_galois)
        if args.table in ("ozaki", "ozaki-accuracy"):
            from modlin._tools.bench.ozaki_tables import run_ozaki_accuracy_table, run_ozaki_table

            if args.table == "ozaki":
                run_ozaki_table(sizes=args.sizes, repeats=args.repeats)
            else:
                run_ozaki_accuracy_table()
        if args.table == "dask":
            from modlin._tools.bench.dask_tables import run_dask_table

            run_dask_table(sizes=args.sizes, chunks=args.chunks, repeats=args.repeats)
        return 0
    except (ValueError, TypeError) as exc:
        print(f"modlin: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
