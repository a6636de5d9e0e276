"""Side-by-side timings for ``modlin bench``: modlin against dgemm, python-flint and galois.

Everything is measured in one run of one process (galois in a child process it
can be killed in), so the ratios in the table compare like with like:

* ``modlin/dgemm``: each timed :func:`modlin.matmul` is followed at once by a
  float64 :func:`numpy.matmul` of the same size, and the column is the median
  of the per-pair ratios, so that load from elsewhere on a shared machine hits
  both sides of a ratio alike;
* ``flint/modlin``: median python-flint ``nmod_mat`` product time over median
  modlin time (the ``nmod_mat`` operands are built outside the timing);
* ``galois/modlin``: the same with a ``galois.GF(p)`` product (operands
  converted outside the timing, a small product first to compile galois' JIT
  kernels). A galois run that exceeds ``galois_timeout`` is killed and reported
  as a lower bound.

:func:`run_rns_table` is a second table, with the same conventions, for the
residue-number-system products: :func:`modlin.matmul` modulo primes of 61 to
256 bits and :func:`modlin.intmul` of 64- and 256-bit integers, against
python-flint's ``nmod_mat``, ``fmpz_mod_mat`` and ``fmpz_mat``.
:func:`run_linalg_table` times :mod:`modlin.linalg` (rank, det, inv, solve,
charpoly, minpoly, matrix_power) against one :func:`modlin.matmul` of the same
size, python-flint and galois.

This module is not imported by ``import modlin``; python-flint and galois are
optional here (python-flint is only needed for its column).
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import platform
import shlex
import sys
import time
from statistics import median

import numpy as np

from modlin._front.products import matmul
from modlin._planning.planner import plan
from modlin._tools.bench import STDERR, STDOUT

__all__ = ["run_table", "run_rns_table", "run_linalg_table"]

#: A flint product that takes longer than this (seconds) is not repeated.
FLINT_SINGLE_RUN_S = 120.0

#: Seconds a galois child may spend importing galois, building GF(p) and converting operands.
GALOIS_SETUP_S = 300.0


def _prime(bits: int) -> int:
    """Largest prime below ``2**bits``."""
    import galois

    return int(galois.prev_prime(2**bits))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _paired(run, reference, repeats: int) -> tuple[float, float, float]:
    """``repeats`` timings of ``run``, each followed at once by one of ``reference``: the
    median of each and the median of the per-pair ratios (the figure the machine's
    load disturbs least)."""
    t_run, t_ref = [], []
    for _ in range(repeats):
        t_run.append(_timed(run))
        t_ref.append(_timed(reference))
    return median(t_run), median(t_ref), median([a / b for a, b in zip(t_run, t_ref)])


def _record_flint(row: dict, t_f: list, single: bool, exact: bool, warn) -> None:
    """python-flint's columns of a table row from its timings; ``warn`` reports a mismatch."""
    row["flint_s"] = median(t_f)
    row["flint_modlin"] = row["flint_s"] / row["modlin_s"]
    row["flint_exact"] = bool(exact)
    row["flint_single_run"] = single
    if not exact:
        warn("WARNING modlin's result differs from python-flint's")


def _record_galois(row: dict, t_g: list, status: str, label: str, galois_timeout: float, notes: list) -> None:
    """galois' columns of a table row from :func:`_time_galois`; partial runs and failures
    become footnotes about ``label``."""
    row["galois_status"] = status
    if t_g:
        row["galois_s"] = median(t_g)
        row["galois_modlin"] = row["galois_s"] / row["modlin_s"]
    if status == "partial":
        notes.append(f"{label}: galois median of {len(t_g)} run(s); run {len(t_g) + 1} exceeded {galois_timeout:g} s")
    elif status.startswith("error"):
        notes.append(f"{label}: galois failed ({status[7:]})")


# --------------------------------------------------------------------------- galois child


#: What a galois child times, by name: ``fn(x, y)`` on FieldArrays (``y`` is unused by
#: rank, det and inv, and a vector for solve).
_GALOIS_OPS = {
    "matmul": lambda x, y: x @ y,
    "rank": lambda x, y: np.linalg.matrix_rank(x),
    "det": lambda x, y: np.linalg.det(x),
    "inv": lambda x, y: np.linalg.inv(x),
    "solve": lambda x, y: np.linalg.solve(x, y),
    "charpoly": lambda x, y: x.characteristic_poly(),
    "minpoly": lambda x, y: x.minimal_poly(),
    "matrix_power": lambda x, y: np.linalg.matrix_power(x, POWER),
}


def _galois_child(conn, a, b, p, repeats, op="matmul"):
    """Runs in a spawned process: build GF(p), convert, warm up, then time ``op`` (``x @ y``
    by default, or one of :data:`_GALOIS_OPS`).

    Sends ``("ready", setup_seconds)``, then ``("time", seconds)`` after each
    run, then ``("done", None)``; ``("error", message)`` on failure.
    """
    try:
        t0 = time.perf_counter()
        import galois

        fn = _GALOIS_OPS[op]
        GF = galois.GF(p)
        x = GF(a)
        y = GF(b)
        w = min(8, x.shape[0])
        _ = fn(x[:w, :w], y[:w, :w] if y.ndim == 2 else y[:w])  # compile galois' JIT kernels outside the timing
        conn.send(("ready", time.perf_counter() - t0))
        for _ in range(repeats):
            t = time.perf_counter()
            _ = fn(x, y)
            conn.send(("time", time.perf_counter() - t))
        conn.send(("done", None))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except Exception:
            pass
    finally:
        conn.close()


def _time_galois(a, b, p, repeats, timeout, op="matmul"):
    """Times galois' ``op`` (see :func:`_galois_child`) in a child process. Returns ``(times, status)``.

    ``status`` is ``"ok"``, ``"timeout"`` (the first run took longer than
    ``timeout``: ``times`` is empty), ``"partial"`` (a later run did: the
    runs that finished are returned) or ``"error: ..."``.
    """
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_galois_child, args=(child, a, b, p, repeats, op), daemon=True)
    proc.start()
    child.close()
    times: list[float] = []
    status = "ok"
    try:
        if not parent.poll(GALOIS_SETUP_S + timeout):
            return times, f"error: galois setup did not finish in {GALOIS_SETUP_S:.0f} s"
        kind, val = parent.recv()
        if kind != "ready":
            return times, f"error: {val}"
        for _ in range(repeats):
            if not parent.poll(timeout):
                status = "partial" if times else "timeout"
                break
            kind, val = parent.recv()
            if kind != "time":
                status = f"error: {val}"
                break
            times.append(val)
        return times, status
    except EOFError:
        return times, "error: galois child exited unexpectedly"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        parent.close()


# --------------------------------------------------------------------------- flint


def _flint_module():
    try:
        import flint
    except ImportError:
        return None
    return flint


def _time_flint(flint, a, b, p, repeats):
    """Times ``nmod_mat * nmod_mat``. Returns ``(times, product as int64 ndarray, single_run)``."""
    fa = flint.nmod_mat(a.tolist(), p)
    fb = flint.nmod_mat(b.tolist(), p)
    times = []
    single = False
    fc = None
    for i in range(repeats):
        t0 = time.perf_counter()
        fc = fa * fb
        times.append(time.perf_counter() - t0)
        if i == 0 and times[0] > FLINT_SINGLE_RUN_S and repeats > 1:
            single = True
            break
    c = np.array([[int(e) for e in row] for row in fc.tolist()], dtype=np.int64)
    return times, c, single


# --------------------------------------------------------------------------- header


def _blas_summary() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        parts = [str(blas.get("name", "?")), str(blas.get("version", ""))]
        extra = blas.get("openblas configuration")
        if extra and extra != "unknown":
            parts.append(f"({extra})")
        summary = " ".join(x for x in parts if x)
    except Exception:
        summary = "unknown"
    n_threads = _openblas_threads()
    if n_threads is not None:
        summary += f"; {n_threads} thread(s)"
    env = [f"{v}={os.environ[v]}" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
           if v in os.environ]
    return summary + (f"; {', '.join(env)}" if env else "")


def _openblas_threads() -> int | None:
    """Threads of the BLAS numpy uses (threadpoolctl), or None when it cannot tell."""
    try:
        from threadpoolctl import threadpool_info

        counts = [lib["num_threads"] for lib in threadpool_info() if lib.get("user_api") == "blas"]
    except Exception:  # threadpoolctl unable to inspect the libraries
        return None
    return max(counts) if counts else None


def _cpu_summary() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


def _command_line() -> str:
    argv = list(sys.argv)
    if argv and argv[0].replace("\\", "/").endswith("modlin/__main__.py"):
        argv = ["python", "-m", "modlin"] + argv[1:]
    elif argv and os.path.basename(argv[0]) == "modlin":
        argv = ["modlin"] + argv[1:]
    return " ".join(shlex.quote(x) for x in argv)


def _versions(flint, use_galois) -> str:
    from modlin import __version__

    vs = [f"modlin {__version__}", f"numpy {np.__version__}", f"python {platform.python_version()}"]
    if flint is not None:
        vs.append(f"python-flint {getattr(flint, '__version__', '?')}")
    if use_galois:
        try:
            import galois

            vs.append(f"galois {galois.__version__}")
        except ImportError:
            pass
    return ", ".join(vs)


def _print_header(pr, started, call, flint_mod, use_galois, times):
    """The block above each table: date, command, arguments, versions, BLAS, machine."""
    pr(f"# modlin bench, {started:%Y-%m-%d %H:%M %Z}")
    pr()
    pr(f"- command: `{_command_line()}`")
    pr(f"- {call}")
    pr(f"- versions: {_versions(flint_mod, use_galois)}")
    pr(f"- BLAS: {_blas_summary()}")
    pr(f"- machine: {_cpu_summary()}, {platform.system()} {platform.release()}")
    pr(f"- times: {times}")
    pr()


# --------------------------------------------------------------------------- table


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}x"
    if x >= 10:
        return f"{x:.1f}x"
    return f"{x:.2f}x"


def _fmt_s(x: float) -> str:
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def run_table(sizes=(1024, 2048), bits=(8, 20, 26, 31, 40, 50), repeats=3, galois_timeout=60.0,
              flint=True, galois=True, out=STDOUT, progress=STDERR, seed=0):
    """Time modlin against dgemm, python-flint and galois; print a Markdown table.

    Parameters
    ----------
    sizes : sequence of int
        Square sizes ``n`` (``n x n`` times ``n x n``).
    bits : sequence of int
        Bit sizes of the moduli; for each, the largest prime below ``2**bits``.
    repeats : int
        Timed runs of each measurement; the median is reported.
    galois_timeout : float
        Seconds after which one galois product is abandoned (its child process
        killed); a first product that long is reported as ``> galois_timeout``.
    flint, galois : bool
        Whether to time python-flint (``nmod_mat``) and galois (``GF(p)``).
    out, progress : file
        Where the table, and the progress lines, go.
    seed : int
        Seed of the random operands.

    Returns
    -------
    list of dict
        One row per ``(n, bits)``, with the times in seconds and the ratios.
    """
    sizes = [int(n) for n in sizes]
    bits = [int(b) for b in bits]
    repeats = max(1, int(repeats))
    galois_timeout = float(galois_timeout)
    for b in bits:
        if not 2 <= b <= 52:
            raise ValueError(f"bit sizes must be in [2, 52] (moduli below 2**52), got {b}")
    for n in sizes:
        if n < 1:
            raise ValueError(f"sizes must be positive, got {n}")

    flint_mod = _flint_module() if flint else None
    flint_note = None
    if flint and flint_mod is None:
        flint_note = "python-flint is not installed: flint column skipped"

    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    primes = {b: _prime(b) for b in bits}
    total = len(sizes) * len(bits)
    rows = []
    notes: list[str] = []
    if flint_note:
        notes.append(flint_note)

    def say(msg):
        if progress is not None:
            print(msg, file=progress, flush=True)

    idx = 0
    for n in sizes:
        x = rng.random((n, n))
        y = rng.random((n, n))
        for b in bits:
            idx += 1
            p = primes[b]
            tag = f"[{idx}/{total}] n={n} p={b} bits"
            a = rng.integers(0, p, (n, n), dtype=np.int64)
            bb = rng.integers(0, p, (n, n), dtype=np.int64)
            pl = plan(p, n, n, n)
            row = {
                "n": n, "bits": b, "p": p,
                "plan": pl.summary,
                "gemms": pl.gemm_count(), "model_cost": pl.relative_cost(),
            }

            say(f"{tag}: modlin + dgemm ({repeats} interleaved runs) ...")
            c = matmul(a, bb, p)  # warm-up, and the result checked against flint
            np.matmul(x, y)
            row["modlin_s"], row["dgemm_s"], row["modlin_dgemm"] = _paired(
                lambda: matmul(a, bb, p), lambda: np.matmul(x, y), repeats)

            row["flint_s"] = row["flint_modlin"] = row["flint_exact"] = None
            row["flint_single_run"] = False
            if flint_mod is not None:
                if p >= 2**63:  # nmod_mat's limit; unreachable below 2**52, kept for clarity
                    notes.append(f"n={n}, {b} bits: p too large for nmod_mat")
                else:
                    say(f"{tag}: flint ...")
                    t_f, c_f, single = _time_flint(flint_mod, a, bb, p, repeats)
                    _record_flint(row, t_f, single, np.array_equal(c, c_f), lambda m: say(f"{tag}: {m}"))
            del c

            row["galois_s"] = row["galois_modlin"] = None
            row["galois_status"] = None
            if galois:
                say(f"{tag}: galois (timeout {galois_timeout:g} s) ...")
                t_g, status = _time_galois(a, bb, p, repeats, galois_timeout)
                _record_galois(row, t_g, status, f"n={n}, {b} bits", galois_timeout, notes)
            rows.append(row)

    args = (f"sizes={sizes}, bits={bits}, repeats={repeats}, galois_timeout={galois_timeout:g}, "
            f"flint={bool(flint)}, galois={bool(galois)}, seed={seed}")
    _print_table(rows, out, started, flint_mod, galois, repeats, galois_timeout, notes, args)
    return rows


def _flint_cell(r, marks, used) -> str:
    """The flint/modlin cell of a row, with its footnote marks (recorded in ``used``)."""
    if r["flint_s"] is None:
        return "-"
    fl = _fmt_ratio(r["flint_modlin"])
    if r["flint_single_run"]:
        fl += marks["single"]
        used.add("single")
    if not r["flint_exact"]:
        fl += " " + marks["inexact"]
        used.add("inexact")
    return fl


def _print_table(rows, out, started, flint_mod, use_galois, repeats, galois_timeout, notes, args):
    pr = lambda s="": print(s, file=out)  # noqa: E731
    _print_header(pr, started, f"run_table({args})", flint_mod, use_galois,
                  f"median of {repeats} run(s) in this one process; random int64 operands in [0, p), "
                  "p the largest prime below 2**bits")
    pr("| n | p bits | plan, #GEMMs | modlin s | modlin/dgemm | flint/modlin | galois/modlin |")
    pr("|---:|---:|:---|---:|---:|---:|---:|")
    used = set()
    for r in rows:
        desc = f"{r['plan']}, {r['gemms']}"
        pr(f"| {r['n']} | {r['bits']} | {desc} | {_fmt_s(r['modlin_s'])} | {_fmt_ratio(r['modlin_dgemm'])} "
           f"| {_flint_cell(r, _MARKS, used)} | {_galois_cell(r, used, galois_timeout)} |")
    pr()
    pr("modlin/dgemm: median over the runs of (modlin time / time of the float64 numpy.matmul "
       "of the same size run right after it). flint/modlin and galois/modlin: median time over median "
       "modlin time; above 1 means modlin is faster.")
    _footnotes(pr, rows, used, galois_timeout, "product", notes)


#: Footnote marks of the flint and galois columns.
_MARKS = {"single": "¹", "timeout": "²", "inexact": "³", "skipped": "⁴"}


def _galois_cell(r: dict, used: set, galois_timeout: float) -> str:
    if r["galois_status"] in ("timeout", "skipped"):
        used.add(r["galois_status"])
        return (f"> {galois_timeout:g} s ({'>' + _fmt_ratio(galois_timeout / r['modlin_s'])})"
                f"{_MARKS[r['galois_status']]}")
    if r["galois_s"] is not None:
        return _fmt_ratio(r["galois_modlin"])
    if r["galois_status"] and r["galois_status"].startswith("error"):
        return "error"
    return "-"


def _footnotes(pr, rows: list, used: set, galois_timeout: float, what: str, notes: list) -> None:
    """The exactness line and the footnotes of the marks in ``used``."""
    flint_rows = [r for r in rows if r["flint_exact"] is not None]
    if flint_rows:
        bad = [r for r in flint_rows if not r["flint_exact"]]
        pr(f"Exactness: modlin's {what} equals python-flint's in {len(flint_rows) - len(bad)} of "
           f"{len(flint_rows)} cases.")
    if "single" in used:
        pr(f"¹ one flint run only: it took more than {FLINT_SINGLE_RUN_S:g} s.")
    if "timeout" in used:
        pr(f"² galois' first {'product' if what == 'product' else 'run'} did not finish in "
           f"{galois_timeout:g} s; the child process was killed (the ratio is a lower bound).")
    if "inexact" in used:
        pr(f"³ modlin's {what} DIFFERS from python-flint's.")
    if "skipped" in used:
        pr(f"⁴ galois not run: it exceeded {galois_timeout:g} s at a smaller n (the ratio is a lower bound).")
    for note in notes:
        pr(f"- {note}")


# --------------------------------------------------------------------------- RNS table

#: ``galois.prev_prime(2**128)`` and ``galois.prev_prime(2**256)`` (hard-coded: no galois import needed).
PRIME_128 = 340282366920938463463374607431768211297
PRIME_256 = 115792089237316195423570985008687907853269984665640564039457584007913129639747

#: The matmul rows of the RNS table: (label, p).
RNS_MODULI = (
    ("p = 2^61-1", 2**61 - 1),
    ("p = 2^64-59", 2**64 - 59),
    ("p 128-bit", PRIME_128),
    ("p 256-bit", PRIME_256),
)

#: The intmul rows of the RNS table: bits of the signed entries.
INTMUL_BITS = (64, 256)


def _random_words(rng, bits: int, shape) -> np.ndarray:
    """Uniform integers in ``[0, 2**bits)`` as an object array, from 62-bit int64 draws."""
    words = -(-bits // 62)
    acc = np.zeros(shape, dtype=object)
    for _ in range(words):
        acc = (acc << 62) | rng.integers(0, 2**62, shape, dtype=np.int64).astype(object)
    return acc >> (62 * words - bits)


def _random_residues(rng, p: int, shape) -> np.ndarray:
    """Random residues in ``[0, p)``: int64 for ``p <= 2**63``, uint64 up to ``2**64``,
    object arrays of Python ints above (the types a user holds such residues in)."""
    if p <= 2**63:
        return rng.integers(0, p, shape, dtype=np.int64)
    if p <= 2**64:
        return rng.integers(0, p, shape, dtype=np.uint64)
    return _random_words(rng, p.bit_length() + 62, shape) % p  # 62 extra bits: bias below 2**-62


def _random_signed(rng, bits: int, shape) -> np.ndarray:
    """Uniform integers in ``[-2**(bits-1), 2**(bits-1))``: int64 for 64 bits, object arrays above."""
    if bits <= 64:
        lo = -(2 ** (bits - 1))
        return rng.integers(lo, -lo - 1, shape, dtype=np.int64, endpoint=True)
    return _random_words(rng, bits, shape) - 2 ** (bits - 1)


def _intmul_plan(a: np.ndarray, b: np.ndarray, n: int):
    """What :func:`modlin.intmul` does for ``n x n`` operands: ``(summary, #GEMMs, model cost)``."""
    from modlin._algorithms.products import single_gemm_exact
    from modlin._arith.integers import max_abs
    from modlin._planning.rnsplan import rns_plan

    if single_gemm_exact(a, b, n):
        return "1 dgemm", 1, 1.0
    pl = rns_plan(None, n * max_abs(a) * max_abs(b), (n, n, n))
    return pl.summary, pl.gemm_count(), pl.relative_cost()


def _time_flint_product(fa, fb, repeats):
    """Times ``fa * fb``. Returns ``(times, last product, single_run)``."""
    return _time_flint_call(lambda: fa * fb, repeats)


def _time_flint_call(fcall, repeats):
    """Times ``fcall()`` (one run only if the first exceeds :data:`FLINT_SINGLE_RUN_S`).
    Returns ``(times, last result, single_run)``."""
    times = []
    single = False
    res = None
    for i in range(repeats):
        t0 = time.perf_counter()
        res = fcall()
        times.append(time.perf_counter() - t0)
        if i == 0 and times[0] > FLINT_SINGLE_RUN_S and repeats > 1:
            single = True
            break
    return times, res, single


def _flint_operands(flint, a, b, p):
    """python-flint matrices for a product mod ``p`` (``None``: integer product) and the type's name."""
    if p is None:
        return flint.fmpz_mat(a.tolist()), flint.fmpz_mat(b.tolist()), "fmpz_mat"
    if p < 2**64:
        return flint.nmod_mat(a.tolist(), p), flint.nmod_mat(b.tolist(), p), "nmod_mat"
    ctx = flint.fmpz_mod_ctx(p)
    return flint.fmpz_mod_mat(a.tolist(), ctx), flint.fmpz_mod_mat(b.tolist(), ctx), "fmpz_mod_mat"


def run_rns_table(sizes=(1024, 2048), repeats=3, flint=True, out=STDOUT, progress=STDERR, seed=0):
    """Time modlin's residue-number-system products against dgemm and python-flint; print a Markdown table.

    Rows, for each size: :func:`modlin.matmul` modulo ``2**61 - 1``,
    ``2**64 - 59`` and the largest primes below ``2**128`` and ``2**256``
    (random residues: int64 below ``2**63``, object arrays of Python ints
    above), and :func:`modlin.intmul` of random signed 64-bit (int64) and
    256-bit (object) entries. The conventions are those of :func:`run_table`:
    each modlin product is followed at once by a float64 :func:`numpy.matmul`
    of the same size (``modlin/dgemm`` is the median of the per-pair ratios),
    and python-flint (``nmod_mat`` below ``2**64``, ``fmpz_mod_mat`` above,
    ``fmpz_mat`` for integer products; operands built outside the timing)
    is timed and checked against modlin's result.

    Parameters
    ----------
    sizes : sequence of int
        Square sizes ``n`` (``n x n`` times ``n x n``).
    repeats : int
        Timed runs of each measurement; the median is reported.
    flint : bool
        Whether to time (and check against) python-flint.
    out, progress : file
        Where the table, and the progress lines, go.
    seed : int
        Seed of the random operands.

    Returns
    -------
    list of dict
        One row per ``(n, case)``, with the times in seconds and the ratios.
    """
    sizes = [int(n) for n in sizes]
    repeats = max(1, int(repeats))
    for n in sizes:
        if n < 1:
            raise ValueError(f"sizes must be positive, got {n}")

    flint_mod = _flint_module() if flint else None
    notes: list[str] = []
    if flint and flint_mod is None:
        notes.append("python-flint is not installed: flint column skipped")

    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    cases = [("matmul", label, p, None) for label, p in RNS_MODULI]
    cases += [("intmul", f"{bits}-bit signed entries", None, bits) for bits in INTMUL_BITS]
    total = len(sizes) * len(cases)
    rows = []

    def say(msg):
        if progress is not None:
            print(msg, file=progress, flush=True)

    idx = 0
    for n in sizes:
        x = rng.random((n, n))
        y = rng.random((n, n))
        for kind, label, p, bits in cases:
            idx += 1
            case = f"{kind} {label}"
            tag = f"[{idx}/{total}] n={n} {case}"
            if kind == "matmul":
                a = _random_residues(rng, p, (n, n))
                bb = _random_residues(rng, p, (n, n))
                pl = plan(p, n, n, n)
                desc, gemms, cost = pl.summary, pl.gemm_count(), pl.relative_cost()
                run = lambda: matmul(a, bb, p)  # noqa: E731
            else:
                from modlin._front.products import intmul

                a = _random_signed(rng, bits, (n, n))
                bb = _random_signed(rng, bits, (n, n))
                desc, gemms, cost = _intmul_plan(a, bb, n)
                run = lambda: intmul(a, bb)  # noqa: E731
            row = {
                "n": n, "case": case, "kind": kind, "p": p, "entry_bits": bits,
                "plan": desc, "gemms": gemms, "model_cost": cost,
            }

            say(f"{tag}: modlin + dgemm ({repeats} interleaved runs) ...")
            c = run()  # warm-up, and the result checked against flint
            np.matmul(x, y)
            row["modlin_s"], row["dgemm_s"], row["modlin_dgemm"] = _paired(run, lambda: np.matmul(x, y), repeats)

            row["flint_s"] = row["flint_modlin"] = row["flint_exact"] = row["flint_type"] = None
            row["flint_single_run"] = False
            if flint_mod is not None:
                fa, fb, ftype = _flint_operands(flint_mod, a, bb, p)
                row["flint_type"] = ftype
                say(f"{tag}: flint {ftype} ...")
                t_f, fc, single = _time_flint_product(fa, fb, repeats)
                del fa, fb
                expected = [int(e) for e in fc.entries()]
                del fc
                exact = c.shape == (n, n) and c.ravel().tolist() == expected
                del expected
                _record_flint(row, t_f, single, exact, lambda m: say(f"{tag}: {m}"))
            c = a = bb = run = None  # free the operands before the next size
            rows.append(row)

    args = f"sizes={sizes}, repeats={repeats}, flint={bool(flint)}, seed={seed}"
    _print_rns_table(rows, out, started, flint_mod, repeats, notes, args)
    return rows


def _print_rns_table(rows, out, started, flint_mod, repeats, notes, args):
    pr = lambda s="": print(s, file=out)  # noqa: E731
    _print_header(pr, started, f"run_rns_table({args})", flint_mod, False,
                  f"median of {repeats} run(s) in this one process; matmul: random residues in [0, p) "
                  "(int64 for p < 2**63, object arrays of Python ints above), 128/256-bit p the largest "
                  "prime below 2**128/2**256; intmul: uniform signed entries, int64 for 64 bits, object "
                  "arrays of Python ints for 256 bits")
    pr("| n | case | plan, #GEMMs | modlin s | modlin/dgemm | flint/modlin | flint type |")
    pr("|---:|:---|:---|---:|---:|---:|:---|")
    marks = {"single": "¹", "inexact": "²"}
    used = set()
    for r in rows:
        desc = f"{r['plan']}, {r['gemms']}"
        fl = _flint_cell(r, marks, used)
        pr(f"| {r['n']} | {r['case']} | {desc} | {_fmt_s(r['modlin_s'])} | {_fmt_ratio(r['modlin_dgemm'])} "
           f"| {fl} | {r['flint_type'] or '-'} |")
    pr()
    pr("modlin/dgemm: median over the runs of (modlin time / time of the float64 numpy.matmul "
       "of the same size run right after it). flint/modlin: median python-flint product time over median "
       "modlin time; above 1 means modlin is faster. plan: the residue number system modlin used "
       "(for intmul, the plan for the bound n * max|A| * max|B|; \"1 dgemm\" when one float64 GEMM is exact).")
    flint_rows = [r for r in rows if r["flint_exact"] is not None]
    if flint_rows:
        bad = [r for r in flint_rows if not r["flint_exact"]]
        pr(f"Exactness: modlin's product equals python-flint's in {len(flint_rows) - len(bad)} of "
           f"{len(flint_rows)} cases.")
    if "single" in used:
        pr(f"¹ one flint run only: it took more than {FLINT_SINGLE_RUN_S:g} s.")
    if "inexact" in used:
        pr("² modlin's product DIFFERS from python-flint's.")
    for note in notes:
        pr(f"- {note}")


# --------------------------------------------------------------------------- Gaussian table

#: Moduli of the Gaussian table: primes 1 (mod 4), so that 2M applies, near 2**20 and 2**40.
GAUSSIAN_MODULI = {20: 1048573, 40: 1099511627689}


def run_gaussian_table(sizes=(1024, 2048), repeats=3, out=STDOUT, progress=STDERR, seed=0):
    """Time :mod:`modlin.gaussian` against dgemm and NumPy's complex128 matmul; print a table.

    Rows, for each ``n``: ``gaussian.matmul`` with 2M, 3M and 4M modulo primes
    near ``2**20`` and ``2**40``; ``gaussian.herk`` beside the 2M product of
    ``A`` and ``A^H``; ``gaussian.intmul`` of 20-bit entries. Columns: modlin
    time, its ratio to one float64 GEMM of the same size (each run followed at
    once by the dgemm, median of per-pair ratios), and NumPy complex128
    ``matmul`` time over modlin's (exact only for small entries).
    """
    from modlin import gaussian

    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    rows = []

    def say(msg):
        if progress is not None:
            print(msg, file=progress, flush=True)

    for n in sizes:
        x, y = rng.random((n, n)), rng.random((n, n))
        zc = (rng.random((n, n)) + 1j * rng.random((n, n)), rng.random((n, n)) + 1j * rng.random((n, n)))
        t_c = median([_timed(lambda: np.matmul(*zc)) for _ in range(repeats)])
        cases = []
        for bits, m in GAUSSIAN_MODULI.items():
            A = tuple(rng.integers(0, m, (n, n)) for _ in range(2))
            B = tuple(rng.integers(0, m, (n, n)) for _ in range(2))
            for alg in ("2m", "3m", "4m"):
                cases.append((f"matmul {alg} m~2^{bits}", lambda A=A, B=B, m=m, alg=alg: gaussian.matmul(A, B, m, algorithm=alg)))
            AH = (A[0].T, (m - A[1].T) % m)
            cases.append((f"herk m~2^{bits}", lambda A=A, m=m: gaussian.herk(A, m)))
            cases.append((f"matmul 2m A A^H m~2^{bits}", lambda A=A, AH=AH, m=m: gaussian.matmul(A, AH, m, algorithm="2m")))
        A20 = tuple(rng.integers(-2**19, 2**19, (n, n)) for _ in range(2))
        B20 = tuple(rng.integers(-2**19, 2**19, (n, n)) for _ in range(2))
        cases.append(("intmul 20-bit entries", lambda: gaussian.intmul(A20, B20)))
        for name, fn in cases:
            say(f"n={n}: {name} ...")
            fn()  # warm-up
            t_mod, _, ratio = _paired(fn, lambda: np.matmul(x, y), repeats)
            rows.append({"n": n, "case": name, "modlin_s": t_mod, "modlin_dgemm": ratio,
                         "complex_modlin": t_c / t_mod})
    pr = lambda s="": print(s, file=out)  # noqa: E731
    _print_header(pr, started, f"run_gaussian_table(sizes={list(sizes)}, repeats={repeats}, seed={seed})",
                  None, False, f"median of {repeats} run(s) in this one process; random residues "
                  "(real, imag) pairs of int64")
    pr("| n | case | modlin s | modlin/dgemm | complex128 matmul / modlin |")
    pr("|---:|:---|---:|---:|---:|")
    for r in rows:
        pr(f"| {r['n']} | {r['case']} | {_fmt_s(r['modlin_s'])} | {_fmt_ratio(r['modlin_dgemm'])} "
           f"| {_fmt_ratio(r['complex_modlin'])} |")
    pr()
    pr("modlin/dgemm: median of (modlin time / float64 numpy.matmul time of the same size run right after). "
       "complex128 matmul / modlin: above 1 means modlin is faster than NumPy's complex GEMM (ZGEMM), which "
       "is exact only for small entries.")
    return rows


# --------------------------------------------------------------------------- linalg table

#: The linalg table's functions built on one PLUQ, and those built on Krylov bases and powers.
ELIMINATION_FUNCTIONS = ("rank", "det", "inv", "solve")
POLYNOMIAL_FUNCTIONS = ("charpoly", "minpoly", "matrix_power")

#: The functions of the linalg table, in its order.
LINALG_FUNCTIONS = ELIMINATION_FUNCTIONS + POLYNOMIAL_FUNCTIONS

#: The exponent of the table's ``matrix_power`` rows: 64 squarings.
POWER = 2**64

#: Bit sizes of the linalg table's moduli (the largest primes below ``2**bits``).
LINALG_BITS = (20, 31, 50)


def linalg_case(function: str, a: np.ndarray, b: np.ndarray, p: int):
    """A callable running ``modlin.linalg.<function>`` on ``a`` (``solve``: with right-hand side ``b``)."""
    from modlin import linalg

    if function == "solve":
        return lambda: linalg.solve(a, b, p)
    if function == "matrix_power":
        return lambda: linalg.matrix_power(a, POWER, p)
    return lambda: getattr(linalg, function)(a, p)


def flint_case(flint, function: str, a: np.ndarray, b: np.ndarray, p: int):
    """The python-flint ``nmod_mat`` counterpart of :func:`linalg_case` (operands built here, outside
    any timing)."""
    fa = flint.nmod_mat(a.tolist(), p)
    if function == "solve":
        fb = flint.nmod_mat(len(b), 1, b.tolist(), p)
        return lambda: fa.solve(fb)
    if function == "matrix_power":  # nmod_mat ** takes exponents below 2**64 only: the same squarings
        return lambda: _flint_power(fa, POWER)
    return getattr(fa, function)


def _flint_power(fa, e: int):
    """``fa ** e`` for ``e`` a power of two, by squarings."""
    for _ in range(e.bit_length() - 1):
        fa = fa * fa
    return fa


def _same_result(function: str, mine, theirs) -> bool:
    """Whether modlin's and python-flint's results of ``function`` are equal."""
    if function in ("rank", "det"):
        return int(mine) == int(theirs)
    if function in ("charpoly", "minpoly"):
        return np.asarray(mine).tolist() == [int(c) for c in theirs.coeffs()]
    return np.asarray(mine).ravel().tolist() == [int(e) for e in theirs.entries()]


def run_linalg_table(sizes=(1024, 2048), bits=LINALG_BITS, functions=LINALG_FUNCTIONS, repeats=3,
                     galois_timeout=60.0, flint=True, galois=True, out=STDOUT, progress=STDERR, seed=0):
    """Time :mod:`modlin.linalg` against one :func:`modlin.matmul`, python-flint and galois; print a table.

    For each ``n`` of ``sizes`` and each bit size, a random ``n x n`` matrix of
    residues modulo the largest prime below ``2**bits`` (nonsingular with
    overwhelming probability) goes through each of ``functions`` (``solve``
    with one random right-hand side, ``matrix_power`` with ``e = 2**64``,
    which python-flint gets as 64 squarings of ``nmod_mat`` products). Columns: modlin's time; its ratio to one
    :func:`modlin.matmul` of two ``n x n`` matrices modulo the same prime, run
    right after each call (median of the per-pair ratios); python-flint's
    ``nmod_mat`` time over modlin's (results checked equal); galois' time over
    modlin's, galois running in a child process killed after
    ``galois_timeout`` seconds (then reported as a lower bound, and not tried
    again at larger sizes).

    Returns
    -------
    list of dict
        One row per ``(n, bits, function)``, with the times in seconds and the ratios.
    """
    sizes = [int(n) for n in sizes]
    bits = [int(b) for b in bits]
    functions = list(functions)
    repeats = max(1, int(repeats))
    galois_timeout = float(galois_timeout)
    for b in bits:
        if not 2 <= b <= 62:
            raise ValueError(f"bit sizes of the linalg table must be in [2, 62], got {b}")
    for n in sizes:
        if n < 1:
            raise ValueError(f"sizes must be positive, got {n}")
    for fn in functions:
        if fn not in LINALG_FUNCTIONS:
            raise ValueError(f"unknown linalg function {fn!r}; choose from {', '.join(LINALG_FUNCTIONS)}")

    flint_mod = _flint_module() if flint else None
    notes: list[str] = []
    if flint and flint_mod is None:
        notes.append("python-flint is not installed: flint column skipped")
    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    primes = {b: _prime(b) for b in bits}
    galois_gave_up: set[tuple[int, str]] = set()
    total = len(sizes) * len(bits) * len(functions)
    rows = []

    def say(msg):
        if progress is not None:
            print(msg, file=progress, flush=True)

    idx = 0
    for n in sizes:
        for b in bits:
            p = primes[b]
            a = rng.integers(0, p, (n, n), dtype=np.int64)
            mb = rng.integers(0, p, (n, n), dtype=np.int64)
            rhs = rng.integers(0, p, n, dtype=np.int64)
            for fn in functions:
                idx += 1
                tag = f"[{idx}/{total}] n={n} p={b} bits {fn}"
                call = linalg_case(fn, a, rhs, p)
                row = {"n": n, "bits": b, "p": p, "function": fn}
                say(f"{tag}: modlin + matmul ({repeats} interleaved runs) ...")
                mine = call()  # warm-up (compilation, plans), and the result checked against flint
                matmul(a, mb, p)
                row["modlin_s"], row["matmul_s"], row["modlin_matmul"] = _paired(
                    call, lambda: matmul(a, mb, p), repeats)

                row["flint_s"] = row["flint_modlin"] = row["flint_exact"] = None
                row["flint_single_run"] = False
                if flint_mod is not None:
                    say(f"{tag}: flint ...")
                    fcall = flint_case(flint_mod, fn, a, rhs, p)
                    t_f, theirs, single = _time_flint_call(fcall, repeats)
                    _record_flint(row, t_f, single, _same_result(fn, mine, theirs), lambda m: say(f"{tag}: {m}"))
                del mine

                row["galois_s"] = row["galois_modlin"] = row["galois_status"] = None
                if galois and (b, fn) in galois_gave_up:
                    row["galois_status"] = "skipped"
                elif galois:
                    say(f"{tag}: galois (timeout {galois_timeout:g} s) ...")
                    t_g, status = _time_galois(a, rhs, p, repeats, galois_timeout, op=fn)
                    _record_galois(row, t_g, status, f"n={n}, {b} bits, {fn}", galois_timeout, notes)
                    if status == "timeout":
                        galois_gave_up.add((b, fn))
                rows.append(row)

    args = (f"sizes={sizes}, bits={bits}, functions={functions}, repeats={repeats}, "
            f"galois_timeout={galois_timeout:g}, flint={bool(flint)}, galois={bool(galois)}, seed={seed}")
    _print_linalg_table(rows, out, started, flint_mod, galois, repeats, galois_timeout, notes, args)
    return rows


def _print_linalg_table(rows, out, started, flint_mod, use_galois, repeats, galois_timeout, notes, args):
    pr = lambda s="": print(s, file=out)  # noqa: E731
    _print_header(pr, started, f"run_linalg_table({args})", flint_mod, use_galois,
                  f"median of {repeats} run(s) in this one process; random n x n int64 matrices of residues "
                  "modulo p, the largest prime below 2**bits; solve with one random right-hand side; "
                  "matrix_power with e = 2**64")
    pr("| n | p bits | function | modlin s | modlin/matmul | flint/modlin | galois/modlin |")
    pr("|---:|---:|:---|---:|---:|---:|---:|")
    used = set()
    for r in rows:
        pr(f"| {r['n']} | {r['bits']} | {r['function']} | {_fmt_s(r['modlin_s'])} "
           f"| {_fmt_ratio(r['modlin_matmul'])} | {_flint_cell(r, _MARKS, used)} "
           f"| {_galois_cell(r, used, galois_timeout)} |")
    pr()
    pr("modlin/matmul: median over the runs of (modlin time / time of one modlin.matmul of two n x n "
       "matrices modulo the same p, run right after it). flint/modlin and galois/modlin: median time over "
       "median modlin time; above 1 means modlin is faster.")
    _footnotes(pr, rows, used, galois_timeout, "result", notes)
