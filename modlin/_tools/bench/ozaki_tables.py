"""Tables for ``modlin bench``: :mod:`modlin.ozaki` timed against NumPy, and its accuracy.

:func:`run_ozaki_table` times :func:`modlin.ozaki.dgemm` and
:func:`modlin.ozaki.zgemm` (per engine, algorithm and moduli count) against
NumPy's float64 and complex128 ``matmul`` of the same size, with the
conventions of :mod:`modlin._tools.bench.products`: one process, each emulated product
followed at once by the NumPy product, the ratio column the median of the
per-pair ratios. Its error column compares with the exact product on a sample
of entries (Python integers).

:func:`run_ozaki_accuracy_table` measures the maximum componentwise relative
error against an exact oracle on GEMMul8's inputs ``(rand - 0.5) * exp(phi *
randn)``, per ``phi`` and per moduli count, with NumPy's own error beside it.

This module is not imported by ``import modlin``.
"""

from __future__ import annotations

import datetime
import math
import warnings
from fractions import Fraction
from statistics import median

import numpy as np

from modlin import ozaki
from modlin._tools.bench import STDERR, STDOUT
from modlin._tools.bench.products import _fmt_ratio, _fmt_s, _paired, _print_header, _timed

__all__ = ["run_ozaki_table", "run_ozaki_accuracy_table"]

#: Entries of the exact sample behind the error column of :func:`run_ozaki_table`:
#: rows x columns, drawn once per size (an exact product of all n**2 entries would
#: take longer than the products timed).
SAMPLE = (16, 128)


# --------------------------------------------------------------------------- exact oracle


def _exact_ints(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``(X, e)`` with ``x == X * 2**e`` exactly: ``X`` an object array of Python ints.

    Every finite double is ``mantissa * 2**exponent`` with a 53-bit integer
    mantissa; one common exponent for the whole array makes the products of
    two such arrays exact integer products.
    """
    mant, ex = np.frexp(x)
    mi = np.ldexp(mant, 53).astype(np.int64)  # exact: |mant| < 1 holds 53 bits
    ex = ex.astype(np.int64) - 53
    nz = mi != 0
    e0 = int(ex[nz].min()) if nz.any() else 0
    shift = np.where(nz, ex - e0, 0).astype(object)
    return mi.astype(object) << shift, e0


def _exact_product(a: np.ndarray, b: np.ndarray) -> tuple[list, int] | tuple[list, list, int]:
    """The exact ``a @ b`` as Python ints over a power of two: ``(C, e)`` for real
    operands, ``(C_re, C_im, e)`` for complex ones (``C * 2**e``, nested lists)."""
    if a.dtype.kind != "c":
        ai, ea = _exact_ints(a)
        bi, eb = _exact_ints(b)
        return (ai @ bi).tolist(), ea + eb
    # one exponent for both parts of an operand, so that the four products share it
    ar, ai_, br, bi_ = a.real, a.imag, b.real, b.imag
    pa, ea = _exact_ints(np.stack([ar, ai_]))
    pb, eb = _exact_ints(np.stack([br, bi_]))
    re = pa[0] @ pb[0] - pa[1] @ pb[1]
    im = pa[0] @ pb[1] + pa[1] @ pb[0]
    return re.tolist(), im.tolist(), ea + eb


def _as_fraction(v: int, e: int) -> Fraction:
    return Fraction(v * 2**e) if e >= 0 else Fraction(v, 2**-e)


def _errors(c: np.ndarray, exact, denom: np.ndarray | None) -> float:
    """Max over entries of ``|c - exact| / d``: ``d = denom`` (e.g. ``|A||B|``) if given,
    else ``|exact|`` (componentwise; entries whose exact value is 0 are skipped)."""
    worst = 0.0
    if c.dtype.kind != "c":
        E, e = exact
        for i, row in enumerate(E):
            for j, v in enumerate(row):
                x = _as_fraction(v, e)
                d = float(denom[i, j]) if denom is not None else abs(float(x))
                if d:
                    worst = max(worst, float(abs(Fraction(float(c[i, j])) - x)) / d)
        return worst
    Er, Ei, e = exact
    for i in range(len(Er)):
        for j in range(len(Er[i])):
            xr, xi = _as_fraction(Er[i][j], e), _as_fraction(Ei[i][j], e)
            dr = float(Fraction(float(c[i, j].real)) - xr)
            di = float(Fraction(float(c[i, j].imag)) - xi)
            d = float(denom[i, j]) if denom is not None else float(np.hypot(float(xr), float(xi)))
            if d:
                worst = max(worst, float(np.hypot(dr, di)) / d)
    return worst


def _fmt_err(x: float | None) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else f"{x:.1e}"


def _say(progress, msg):
    if progress is not None:
        print(msg, file=progress, flush=True)


# --------------------------------------------------------------------------- speed table


def _cases(n, counts, thin_above, thin_counts):
    """The rows at size ``n``: ``(function, engine, algorithm, moduli count or None)``."""
    cs = [c for c in counts if c in thin_counts] if n > thin_above else list(counts)
    rows = [("dgemm", "fp64", "-", None)] + [("dgemm", "int8", "-", c) for c in cs]
    rows.append(("zgemm", "fp64", "2m", None))
    rows += [("zgemm", "int8", alg, c) for alg in ("2m", "3m", "4m") for c in cs]
    return rows


def run_ozaki_table(sizes=(1024, 2048), counts=(8, 12, 16, 20), repeats=3, thin_above=1024,
                    thin_counts=(8, 16), out=STDOUT, progress=STDERR, seed=0):
    """Time :func:`modlin.ozaki.dgemm` and :func:`~modlin.ozaki.zgemm` against NumPy; print a table.

    Rows, for each size ``n`` (``n x n`` times ``n x n``): ``dgemm`` on the
    fp64 engine with its default moduli (those for ``k = n``) and on the int8 engine with each of
    ``counts`` moduli; ``zgemm`` on the fp64 engine (default moduli, 2M) and
    on the int8 engine with 2M, 3M and 4M and each of ``counts``; and NumPy's
    float64 and complex128 ``matmul``. Sizes above ``thin_above`` run only
    the counts in ``thin_counts`` (one n = 2048 product with 20 int8 moduli
    and 4M takes half a minute on two cores); the default run took about
    nine minutes on a loaded two-core machine.

    Parameters
    ----------
    sizes : sequence of int
        Square sizes ``n``.
    counts : sequence of int
        int8 moduli counts.
    repeats : int
        Timed pairs (emulated product, then NumPy's) per row; medians are reported.
    thin_above : int
        Sizes above this one run only ``thin_counts``.
    thin_counts : sequence of int
        The counts kept above ``thin_above``.
    out, progress : file
        Where the table, and the progress lines, go.
    seed : int
        Seed of the random operands, uniform in ``[-0.5, 0.5)`` (real and
        imaginary parts).

    Returns
    -------
    list of dict
        One row per case: times in seconds, the ratio to NumPy and the error.
    """
    sizes = [int(n) for n in sizes]
    counts = [int(c) for c in counts]
    thin_counts = [int(c) for c in thin_counts]
    repeats = max(1, int(repeats))
    for n in sizes:
        if n < 1:
            raise ValueError(f"sizes must be positive, got {n}")
    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        x, y = rng.random((n, n)) - 0.5, rng.random((n, n)) - 0.5
        z = x + 1j * (rng.random((n, n)) - 0.5)
        w = y + 1j * (rng.random((n, n)) - 0.5)
        ri = np.sort(rng.choice(n, min(SAMPLE[0], n), replace=False))
        cj = np.sort(rng.choice(n, min(SAMPLE[1], n), replace=False))
        _say(progress, f"n={n}: exact products of a {len(ri)} x {len(cj)} sample ...")
        ref = {}
        for kind, a, b in (("dgemm", x, y), ("zgemm", z, w)):
            sa, sb = a[ri], b[:, cj]
            ref[kind] = (_exact_product(sa, sb), np.abs(sa) @ np.abs(sb))
        native = {"dgemm": lambda: np.matmul(x, y), "zgemm": lambda: np.matmul(z, w)}
        for kind in ("dgemm", "zgemm"):
            exact, absab = ref[kind]
            c = native[kind]()
            t = median([_timed(native[kind]) for _ in range(repeats)])
            rows.append({"n": n, "function": f"numpy.matmul ({'float64' if kind == 'dgemm' else 'complex128'})",
                         "engine": "-", "algorithm": "-", "moduli": "-", "bits": None, "gemms": None,
                         "time_s": t, "ratio": None, "error": _errors(c[np.ix_(ri, cj)], exact, absab)})
        cases = _cases(n, counts, thin_above, thin_counts)
        for idx, (kind, engine, alg, count) in enumerate(cases, 1):
            fn = ozaki.dgemm if kind == "dgemm" else ozaki.zgemm
            kw = {"engine": engine, "moduli": count}
            if kind == "zgemm":
                kw["algorithm"] = alg
            a, b = (x, y) if kind == "dgemm" else (z, w)
            # the defaults depend on k (here n): ozaki.default_bits(n)
            mods, algs = ozaki.moduli_for("real" if kind == "dgemm" else "complex", engine=engine,
                                          moduli=count, algorithm=alg if kind == "zgemm" else "auto", k=n)
            gemms = sum({"real": 1, "2m": 2, "3m": 3, "4m": 4}[g] for g in algs)
            _say(progress, f"n={n} [{idx}/{len(cases)}] {kind} {engine} {alg} {len(mods)} moduli ...")
            # a thin product compiles the numba kernels for these dtypes outside the timing
            fn(a[:8], b[:, :8], **kw)
            last = {}
            t_mod, _, ratio = _paired(lambda: last.__setitem__("c", fn(a, b, **kw)), native[kind], repeats)
            exact, absab = ref[kind]
            err = _errors(last.pop("c")[np.ix_(ri, cj)], exact, absab)
            rows.append({"n": n, "function": f"ozaki.{kind}", "engine": engine, "algorithm": alg,
                         "moduli": f"{len(mods)}" + (" (default)" if count is None else ""),
                         "bits": math.log2(math.prod(mods)), "gemms": gemms,
                         "time_s": t_mod, "ratio": ratio, "error": err})
    args = (f"sizes={sizes}, counts={counts}, repeats={repeats}, thin_above={thin_above}, "
            f"thin_counts={thin_counts}, seed={seed}")
    _print_ozaki_table(rows, out, started, repeats, args, thin_above, thin_counts, sizes)
    return rows


def _print_ozaki_table(rows, out, started, repeats, args, thin_above, thin_counts, sizes):
    pr = lambda s="": print(s, file=out)  # noqa: E731
    _print_header(pr, started, f"run_ozaki_table({args})", None, False,
                  f"median of {repeats} run(s) in this one process; operands uniform in [-0.5, 0.5) "
                  "(both parts for complex)")
    pr("| n | function | engine | algorithm | moduli | log2 M | GEMMs | modlin s | ratio to NumPy matmul "
       "| max error / (abs(A) abs(B)) |")
    pr("|---:|:---|:---|:---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        bits = "-" if r["bits"] is None else f"{r['bits']:.0f}"
        gemms = "-" if r["gemms"] is None else str(r["gemms"])
        ratio = "1 (reference)" if r["ratio"] is None else _fmt_ratio(r["ratio"])
        pr(f"| {r['n']} | {r['function']} | {r['engine']} | {r['algorithm']} | {r['moduli']} | {bits} "
           f"| {gemms} | {_fmt_s(r['time_s'])} | {ratio} | {_fmt_err(r['error'])} |")
    pr()
    pr("ratio to NumPy matmul: median over the runs of (ozaki time / time of numpy.matmul of the same size "
       "and dtype, float64 for dgemm and complex128 for zgemm, run right after it); below 1 would mean the "
       "emulation is faster. GEMMs: real integer GEMMs per product (one per modulus for dgemm, 2, 3 or 4 "
       "per modulus for 2M, 3M, 4M); on the CPU each int8 GEMM is emulated by a float64 one. "
       f"Max error: max over a random sample of {SAMPLE[0]} rows x {SAMPLE[1]} columns of "
       "|C - C_exact| / (|A| |B|), C_exact the exact product computed with Python integers "
       "(|.| the complex modulus for zgemm); the numpy.matmul rows give NumPy's error on the same entries.")
    if any(n > thin_above for n in sizes):
        pr(f"Sizes above {thin_above} run the moduli counts {list(thin_counts)} only.")


# --------------------------------------------------------------------------- accuracy table


def gemmul8_inputs(rng, shape, phi: float, complex_: bool = False) -> np.ndarray:
    """GEMMul8's test matrices ``(rand - 0.5) * exp(phi * randn)`` (each part, for complex).

    ``phi`` widens the spread of magnitudes: 0 gives entries uniform in
    ``[-0.5, 0.5)``, 2 entries spanning about ten orders of magnitude.
    """
    def real():
        return (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))

    return real() + 1j * real() if complex_ else real()


def _accuracy_cases(counts):
    """``(label, function, keyword arguments)`` per row, grouped by function and mode."""
    cases = []
    for label, fn, extra in (("dgemm fast", ozaki.dgemm, {"mode": "fast"}),
                             ("dgemm accurate", ozaki.dgemm, {"mode": "accurate"}),
                             ("zgemm 2M fast", ozaki.zgemm, {"mode": "fast", "algorithm": "2m"})):
        cases += [(label, fn, {**extra, "engine": e}) for e in ("fp64", "int8")]  # the defaults
        cases += [(label, fn, {**extra, "engine": "int8", "moduli": c}) for c in counts]
    return cases


def run_ozaki_accuracy_table(m=16, n=16, k=1024, phis=(0.0, 0.5, 1.0, 2.0), counts=tuple(range(8, 23, 2)),
                             trials=4, out=STDOUT, progress=STDERR, seed=0):
    """Error of :mod:`modlin.ozaki` against an exact oracle, per ``phi`` and moduli count; print a table.

    For each ``phi``, ``A`` (``m x k``) and ``B`` (``k x n``) are GEMMul8's
    inputs ``(rand - 0.5) * exp(phi * randn)`` (real for ``dgemm``, both
    parts for ``zgemm``); the exact product is computed with Python integers
    and each entry of every result is compared with it. Rows: ``dgemm``
    (fast and accurate scaling) and ``zgemm`` (2M, fast scaling) with the
    default moduli of the fp64 and of the int8 engine for this ``k`` (the
    fewest with ``M >= 2**ozaki.default_bits(k)``: ``2**124`` up to
    ``k = 1024``, one bit more per doubling of ``k``) and with each of
    ``counts`` int8 moduli, and NumPy's float64 and complex128 ``matmul``.

    Parameters
    ----------
    m, n, k : int
        The product's shape (``m x k`` times ``k x n``).
    phis : sequence of float
        GEMMul8's ``phi``, one column each.
    counts : sequence of int
        int8 moduli counts (at most 22: 2M has 22 int8 moduli).
    trials : int
        Independent draws per ``phi``; the maximum over them is reported.
    out, progress : file
        Where the table, and the progress lines, go.
    seed : int
        Seed of the random operands.

    Returns
    -------
    list of dict
        One row per case, with ``errors`` (one per ``phi``) and ``warned``
        (the ``phi`` at which an :class:`~modlin.ozaki.AccuracyWarning` was raised).
    """
    phis = [float(p) for p in phis]
    counts = [int(c) for c in counts]
    trials = max(1, int(trials))
    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    cases = _accuracy_cases(counts)
    labels = [("numpy.matmul float64", None, {}), ("numpy.matmul complex128", None, {})] + cases
    errs = {i: [0.0] * len(phis) for i in range(len(labels))}
    warned = {i: set() for i in range(len(labels))}
    for t in range(trials):
        for p, phi in enumerate(phis):
            _say(progress, f"trial {t + 1}/{trials}, phi = {phi:g}: exact products ...")
            a, b = gemmul8_inputs(rng, (m, k), phi), gemmul8_inputs(rng, (k, n), phi)
            za, zb = gemmul8_inputs(rng, (m, k), phi, True), gemmul8_inputs(rng, (k, n), phi, True)
            exact = {False: _exact_product(a, b), True: _exact_product(za, zb)}
            for i, (label, fn, kw) in enumerate(labels):
                cplx = "zgemm" in label or "complex" in label
                x, y = (za, zb) if cplx else (a, b)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ozaki.AccuracyWarning)
                    c = np.matmul(x, y) if fn is None else fn(x, y, **kw)
                if any(issubclass(w.category, ozaki.AccuracyWarning) for w in caught):
                    warned[i].add(phi)
                errs[i][p] = max(errs[i][p], _errors(c, exact[cplx], None))
    rows = []
    for i, (label, fn, kw) in enumerate(labels):
        if fn is None:
            engine, count, bits = "-", "-", None
        else:
            kind = "complex" if "zgemm" in label else "real"
            # the defaults for this k (ozaki.default_bits(k)), as the products above used
            mods, _ = ozaki.moduli_for(kind, engine=kw["engine"], moduli=kw.get("moduli"),
                                       algorithm=kw.get("algorithm", "auto"), k=k)
            engine = kw["engine"]
            count = f"{len(mods)}" + (" (default)" if "moduli" not in kw else "")
            bits = math.log2(math.prod(mods))
        rows.append({"case": label, "engine": engine, "moduli": count, "bits": bits,
                     "errors": errs[i], "warned": sorted(warned[i])})
    args = f"m={m}, n={n}, k={k}, phis={phis}, counts={counts}, trials={trials}, seed={seed}"
    _print_accuracy_table(rows, out, started, args, phis, m, n, k, trials)
    return rows


def _print_accuracy_table(rows, out, started, args, phis, m, n, k, trials):
    pr = lambda s="": print(s, file=out)  # noqa: E731
    _print_header(pr, started, f"run_ozaki_accuracy_table({args})", None, False,
                  "not timed (errors only)")
    pr("| case | engine | moduli | log2 M | " + " | ".join(f"phi = {p:g}" for p in phis) + " |")
    pr("|:---|:---|---:|---:|" + "---:|" * len(phis))
    any_warned = False
    for r in rows:
        bits = "-" if r["bits"] is None else f"{r['bits']:.0f}"
        cells = []
        for phi, e in zip(phis, r["errors"]):
            cell = _fmt_err(e)
            if phi in r["warned"]:
                cell += " ¹"
                any_warned = True
            cells.append(cell)
        pr(f"| {r['case']} | {r['engine']} | {r['moduli']} | {bits} | " + " | ".join(cells) + " |")
    pr()
    pr(f"Max componentwise relative error max |C_ij - C_exact_ij| / |C_exact_ij| over the {m} x {n} entries "
       f"of a {m} x {k} by {k} x {n} product{'' if trials == 1 else f', over {trials} draws'}, C_exact "
       "computed exactly with Python integers (|.| the complex modulus for complex products). Inputs: "
       "(rand - 0.5) * exp(phi * randn) (each part, for complex), as GEMMul8's tests. Float64 has "
       "unit roundoff 1.1e-16: a correctly rounded result has error at most that. "
       f"(default): the count ozaki uses for k = {k}, the fewest moduli with M >= 2**{ozaki.default_bits(k):.4g}.")
    if any_warned:
        pr("¹ ozaki raised an AccuracyWarning (nonzero entries rounded to zero by the scaling).")


# --------------------------------------------------------------------------- the spread rule

def _partwise(c: np.ndarray, exact) -> float:
    """The largest componentwise relative error of ``c`` against the exact product, each part
    of a complex entry on its own (an exact zero must come out zero)."""
    parts = [(c.real if c.dtype.kind == "c" else c, exact[0])] + ([(c.imag, exact[1])] if c.dtype.kind == "c" else [])
    e = exact[-1]
    worst = 0.0
    for got, E in parts:
        for i, row in enumerate(E):
            for j, v in enumerate(row):
                x = _as_fraction(v, e)
                g = float(got[i, j])
                if not math.isfinite(g):
                    return math.inf
                if x == 0:
                    worst = worst if g == 0 else math.inf
                else:
                    worst = max(worst, float(abs(Fraction(g) - x) / abs(x)))
    return worst


SPREAD_SHAPES = (((12, 300), (300, 10)), ((40, 1000), (1000, 30)), ((8, 3000), (3000, 8)))


def run_spread_calibration(phis=(1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0), shapes=SPREAD_SHAPES, seeds=3,
                           out=STDOUT, progress=STDERR) -> list[dict]:
    """The measurement behind :data:`modlin.ozaki.SPREAD_FREE`: for GEMMul8's inputs per
    ``phi``, shape, seed, kind and engine, the operands' spread ``L = L_A + L_B``
    (:func:`modlin.ozaki.spread_bits` before its offset) and the fewest moduli (from the
    spread-free default up) whose componentwise error is no larger than
    ``numpy.matmul``'s; ``margin`` is ``L`` less the bits beyond the default that one
    modulus fewer had (not enough): the rule ``L - SPREAD_FREE`` reaches the count needed
    exactly when ``SPREAD_FREE < margin``. Prints one line a case and the smallest margin.
    (The last shape runs one seed: its oracle takes longest.)"""
    rows = []
    for kind in ("real", "complex"):
        cplx = kind == "complex"
        fn = ozaki.zgemm if cplx else ozaki.dgemm
        for phi in phis:
            for si, (sa, sb) in enumerate(shapes):
                for seed in range(seeds if si < len(shapes) - 1 else 1):
                    rng = np.random.default_rng([seed, int(phi * 2), cplx, si, 7])
                    A, B = gemmul8_inputs(rng, sa, phi, cplx), gemmul8_inputs(rng, sb, phi, cplx)
                    exact = _exact_product(A, B)
                    native = _partwise(A @ B, exact)
                    k = sa[1]
                    L = ozaki._line_spread(A, 1) + ozaki._line_spread(B, 0)
                    for engine in ("fp64", "int8"):
                        base = len(ozaki.moduli_for(kind, engine=engine, k=k)[0])
                        count = base
                        while _partwise(fn(A, B, engine=engine, moduli=count), exact) > native and count < base + 12:
                            count += 1
                        mods = ozaki.moduli_for(kind, engine=engine, k=k, moduli=count)[0]
                        below = (math.log2(math.prod(mods[:-1])) - ozaki.default_bits(k)) if count > base else None
                        row = {"kind": kind, "phi": phi, "shape": f"{sa[0]}x{sa[1]}@{sb[0]}x{sb[1]}", "seed": seed,
                               "engine": engine, "L": L, "extra": count - base,
                               "margin": None if below is None else L - below}
                        rows.append(row)
                        _say(progress, f"{kind} phi={phi} {row['shape']} seed {seed} {engine}: L = {L:.1f}, "
                                       f"{row['extra']} more")
    needed = [r["margin"] for r in rows if r["margin"] is not None]
    print(f"ozaki spread calibration: {len(rows)} cases, {len(needed)} needing more moduli than the default", file=out)
    for r in rows:
        m = "" if r["margin"] is None else f", margin {r['margin']:.1f}"
        print(f"  {r['kind']:7s} phi={r['phi']:<4} {r['shape']:18s} seed {r['seed']} {r['engine']}: "
              f"L = {r['L']:5.1f}, {r['extra']} more moduli{m}", file=out)
    if needed:
        print(f"smallest margin {min(needed):.1f}: SPREAD_FREE must stay below it "
              f"(now {ozaki.SPREAD_FREE})", file=out)
    return rows
