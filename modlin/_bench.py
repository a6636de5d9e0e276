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

import numpy as np

from ._matmul import matmul
from ._plan import plan

__all__ = ["run_table"]

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


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


# --------------------------------------------------------------------------- galois child


def _galois_child(conn, a, b, p, repeats):
    """Runs in a spawned process: build GF(p), convert, warm up, then time ``x @ y``.

    Sends ``("ready", setup_seconds)``, then ``("time", seconds)`` after each
    product, then ``("done", None)``; ``("error", message)`` on failure.
    """
    try:
        t0 = time.perf_counter()
        import galois

        GF = galois.GF(p)
        x = GF(a)
        y = GF(b)
        w = min(8, x.shape[0])
        _ = x[:w, :w] @ y[:w, :w]  # compile galois' JIT kernels outside the timing
        conn.send(("ready", time.perf_counter() - t0))
        for _ in range(repeats):
            t = time.perf_counter()
            _ = x @ y
            conn.send(("time", time.perf_counter() - t))
        conn.send(("done", None))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except Exception:
            pass
    finally:
        conn.close()


def _time_galois(a, b, p, repeats, timeout):
    """Times galois in a child process. Returns ``(times, status)``.

    ``status`` is ``"ok"``, ``"timeout"`` (the first product took longer than
    ``timeout``: ``times`` is empty), ``"partial"`` (a later product did: the
    runs that finished are returned) or ``"error: ..."``.
    """
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_galois_child, args=(child, a, b, p, repeats), daemon=True)
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
    """Thread count of the OpenBLAS that numpy loaded (Linux only), or None."""
    import ctypes

    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                     "openblas_get_num_threads64_", "openblas_get_num_threads"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                return int(fn())
    return None


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
    from . import __version__

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
              flint=True, galois=True, out=sys.stdout, progress=sys.stderr, seed=0):
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
                "engine": pl.engine, "u": pl.u, "v": pl.v, "variant": pl.variant, "block": pl.block,
                "gemms": pl.gemm_count(), "model_cost": pl.relative_cost(),
            }

            say(f"{tag}: modlin + dgemm ({repeats} interleaved runs) ...")
            c = matmul(a, bb, p)  # warm-up, and the result checked against flint
            np.matmul(x, y)
            t_mod, t_d = [], []
            for _ in range(repeats):
                t_mod.append(_timed(lambda: matmul(a, bb, p)))
                t_d.append(_timed(lambda: np.matmul(x, y)))
            row["modlin_s"] = _median(t_mod)
            row["dgemm_s"] = _median(t_d)
            row["modlin_dgemm"] = _median([tm / td for tm, td in zip(t_mod, t_d)])

            row["flint_s"] = row["flint_modlin"] = row["flint_exact"] = None
            row["flint_single_run"] = False
            if flint_mod is not None:
                if p >= 2**63:  # nmod_mat's limit; unreachable below 2**52, kept for clarity
                    notes.append(f"n={n}, {b} bits: p too large for nmod_mat")
                else:
                    say(f"{tag}: flint ...")
                    t_f, c_f, single = _time_flint(flint_mod, a, bb, p, repeats)
                    row["flint_s"] = _median(t_f)
                    row["flint_modlin"] = row["flint_s"] / row["modlin_s"]
                    row["flint_exact"] = bool(np.array_equal(c, c_f))
                    row["flint_single_run"] = single
                    if not row["flint_exact"]:
                        say(f"{tag}: WARNING modlin's product differs from flint's")
            del c

            row["galois_s"] = row["galois_modlin"] = None
            row["galois_status"] = None
            if galois:
                say(f"{tag}: galois (timeout {galois_timeout:g} s) ...")
                t_g, status = _time_galois(a, bb, p, repeats, galois_timeout)
                row["galois_status"] = status
                if t_g:
                    row["galois_s"] = _median(t_g)
                    row["galois_modlin"] = row["galois_s"] / row["modlin_s"]
                if status == "partial":
                    notes.append(f"n={n}, {b} bits: galois median of {len(t_g)} run(s); "
                                 f"run {len(t_g) + 1} exceeded {galois_timeout:g} s")
                elif status.startswith("error"):
                    notes.append(f"n={n}, {b} bits: galois failed ({status[7:]})")
            rows.append(row)

    args = (f"sizes={sizes}, bits={bits}, repeats={repeats}, galois_timeout={galois_timeout:g}, "
            f"flint={bool(flint)}, galois={bool(galois)}, seed={seed}")
    _print_table(rows, out, started, flint_mod, galois, repeats, galois_timeout, notes, args)
    return rows


def _print_table(rows, out, started, flint_mod, use_galois, repeats, galois_timeout, notes, args):
    pr = lambda s="": print(s, file=out)  # noqa: E731
    pr(f"# modlin bench, {started:%Y-%m-%d %H:%M %Z}")
    pr()
    pr(f"- command: `{_command_line()}`")
    pr(f"- run_table({args})")
    pr(f"- versions: {_versions(flint_mod, use_galois)}")
    pr(f"- BLAS: {_blas_summary()}")
    pr(f"- machine: {_cpu_summary()}, {platform.system()} {platform.release()}")
    pr(f"- times: median of {repeats} run(s) in this one process; random int64 operands in [0, p), "
       "p the largest prime below 2**bits")
    pr()
    pr("| n | p bits | plan (engine (u,v) variant, #GEMMs) | modlin s | modlin/dgemm | flint/modlin | galois/modlin |")
    pr("|---:|---:|:---|---:|---:|---:|---:|")
    marks = {"single": "¹", "timeout": "²", "inexact": "³"}
    used = set()
    for r in rows:
        desc = f"{r['engine']} ({r['u']},{r['v']}) {r['variant']}, {r['gemms']}"
        fl = "-"
        if r["flint_s"] is not None:
            fl = _fmt_ratio(r["flint_modlin"])
            if r["flint_single_run"]:
                fl += marks["single"]
                used.add("single")
            if not r["flint_exact"]:
                fl += " " + marks["inexact"]
                used.add("inexact")
        ga = "-"
        if r["galois_status"] == "timeout":
            ga = f"> {galois_timeout:g} s ({'>' + _fmt_ratio(galois_timeout / r['modlin_s'])}){marks['timeout']}"
            used.add("timeout")
        elif r["galois_s"] is not None:
            ga = _fmt_ratio(r["galois_modlin"])
        elif r["galois_status"] and r["galois_status"].startswith("error"):
            ga = "error"
        pr(f"| {r['n']} | {r['bits']} | {desc} | {_fmt_s(r['modlin_s'])} | {_fmt_ratio(r['modlin_dgemm'])} "
           f"| {fl} | {ga} |")
    pr()
    pr("modlin/dgemm: median over the runs of (modlin time / time of the float64 numpy.matmul "
       "of the same size run right after it). flint/modlin and galois/modlin: median time over median "
       "modlin time; above 1 means modlin is faster.")
    flint_rows = [r for r in rows if r["flint_exact"] is not None]
    if flint_rows:
        bad = [r for r in flint_rows if not r["flint_exact"]]
        pr(f"Exactness: modlin's product equals python-flint's in {len(flint_rows) - len(bad)} of "
           f"{len(flint_rows)} cases.")
    if "single" in used:
        pr(f"¹ one flint run only: it took more than {FLINT_SINGLE_RUN_S:g} s.")
    if "timeout" in used:
        pr(f"² galois' first product did not finish in {galois_timeout:g} s; the child process was killed "
           "(the ratio is a lower bound).")
    if "inexact" in used:
        pr("³ modlin's product DIFFERS from python-flint's.")
    for note in notes:
        pr(f"- {note}")
