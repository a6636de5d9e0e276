"""GPU report: check modlin's public functions on CuPy arrays, then time them.

Run on a machine with a CUDA GPU and CuPy::

    python benchmarks/gpu_report.py --out docs/gpu-results.md

First every public function is run on CuPy inputs and compared with the CPU
result of the same call on NumPy inputs (bit for bit where the function is
exact, and for the float emulation bit for bit too: the GPU and CPU paths
compute the same correctly rounded values). Then one table: ozaki.zgemm
(2M, 3M, 4M; 8, 12, 16 moduli) and ozaki.dgemm against CuPy's own
ZGEMM/DGEMM at n = 4096 and 8192 with their accuracy beside the speed;
gaussian.matmul 2M against 3M; matmul modulo 20-, 31-, 50- and 61-bit
primes against a float64 ``cupy.matmul`` of the same size. Each time is the median of ``--repeats``
runs after a warm-up, the stream synchronised around each run.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
import traceback

import numpy as np

PRIMES = {20: 1048573, 31: 2147483647, 50: 2**50 - 27, 61: 2**61 - 1}


def _timeit(fn, repeats: int) -> float:
    import cupy as cp

    fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeats):
        cp.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.get_current_stream().synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _gen(rng, shape, phi, cplx):
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x


def check(lines: list[str]) -> bool:
    """Every public function on CuPy inputs against its CPU result; one line per check."""
    import cupy as cp

    import modlin
    from modlin import ozaki

    rng = np.random.default_rng(0)
    ok = True

    def record(name, fn):
        nonlocal ok
        try:
            good, detail = fn()
        except Exception as exc:  # a GPU failure must not stop the report
            good, detail = False, f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            traceback.print_exc()
        ok &= good
        lines.append(f"| {name} | {'ok' if good else 'FAILED'} | {detail} |")

    for bits, p in PRIMES.items():
        for (m, k, n) in ((64, 300, 48), (257, 1031, 129)):
            A = rng.integers(-(2**62), 2**62, (m, k))
            B = rng.integers(0, p, (k, n))

            def run(A=A, B=B, p=p):
                got = modlin.matmul(cp.asarray(A), cp.asarray(B), p).get()
                want = modlin.matmul(A, B, p)
                return np.array_equal(got, want), f"{m}x{k}x{n}"

            record(f"matmul mod {bits}-bit p", run)
    for p in (PRIMES[31], PRIMES[61]):
        A = np.full((40, 2000), p - 1)

        def worst(A=A, p=p):
            got = modlin.matmul(cp.asarray(A), cp.asarray(A.T.copy()), p).get()
            return np.array_equal(got, modlin.matmul(A, A.T, p)), "all entries p - 1"

        record(f"matmul worst case mod {p.bit_length()}-bit p", worst)
    for phi in (0.0, 1.0):
        A, B = _gen(rng, (96, 700), phi, False), _gen(rng, (700, 80), phi, False)
        Z, W = _gen(rng, (96, 700), phi, True), _gen(rng, (700, 80), phi, True)
        for mode in ("fast", "accurate"):
            record(f"ozaki.dgemm phi={phi} {mode}", lambda A=A, B=B, mode=mode: (
                np.array_equal(ozaki.dgemm(cp.asarray(A), cp.asarray(B), mode=mode).get(),
                               ozaki.dgemm(A, B, engine="int8", mode=mode)), "int8, default moduli"))
            for alg in ("2m", "3m", "4m", "hybrid"):
                record(f"ozaki.zgemm {alg} phi={phi} {mode}", lambda Z=Z, W=W, mode=mode, alg=alg: (
                    np.array_equal(ozaki.zgemm(cp.asarray(Z), cp.asarray(W), mode=mode, algorithm=alg,
                                               moduli=24 if alg == "hybrid" else None).get(),
                                   ozaki.zgemm(Z, W, engine="int8", mode=mode, algorithm=alg,
                                               moduli=24 if alg == "hybrid" else None)), "int8"))
        record(f"ozaki.dsyrk phi={phi}", lambda A=A: (
            np.array_equal(ozaki.dsyrk(cp.asarray(A)).get(), ozaki.dsyrk(A, engine="int8")), "int8"))
        record(f"ozaki.zherk phi={phi}", lambda Z=Z: (
            np.array_equal(ozaki.zherk(cp.asarray(Z)).get(), ozaki.zherk(Z, engine="int8")), "int8"))
    # k beyond one int32 accumulator: the split path
    A, B = _gen(rng, (4, 2**17 + 9), 0.5, False), _gen(rng, (2**17 + 9, 3), 0.5, False)
    record("ozaki.dgemm k = 2**17 + 9", lambda: (
        np.array_equal(ozaki.dgemm(cp.asarray(A), cp.asarray(B)).get(), ozaki.dgemm(A, B, engine="int8")),
        "4x131081x3"))
    for m in (1000000009, 2**50 - 27):
        for alg in ("2m", "3m", "4m"):
            G = rng.integers(0, m, (70, 300)) + 1j * rng.integers(0, m, (70, 300))
            H = rng.integers(0, m, (300, 50)) + 1j * rng.integers(0, m, (300, 50))

            def gauss(G=G, H=H, m=m, alg=alg):
                got = modlin.gaussian.matmul(cp.asarray(G), cp.asarray(H), m, algorithm=alg)
                want = modlin.gaussian.matmul(G, H, m, algorithm=alg)
                return all(np.array_equal(g.get(), w) for g, w in zip(got, want)), f"{m.bit_length()}-bit m"

            record(f"gaussian.matmul {alg}", gauss)
    return ok


def _relerr(x, ref):
    import cupy as cp

    den = cp.abs(ref)
    den = cp.where(den == 0, 1.0, den)
    return float(cp.max(cp.abs(x - ref) / den))


def table(lines: list[str], sizes, repeats: int) -> None:
    import cupy as cp

    import modlin
    from modlin import ozaki

    rng = np.random.default_rng(1)
    lines += ["| n | product | setting | time s | vs native | max rel. error | native error |",
              "|---:|:---|:---|---:|---:|---:|---:|"]
    for n in sizes:
        A = cp.asarray(_gen(rng, (n, n), 0.5, False))
        B = cp.asarray(_gen(rng, (n, n), 0.5, False))
        t_d = _timeit(lambda: A @ B, repeats)
        ref = ozaki.dgemm(A, B, moduli=30)  # about 2**230: far beyond double accuracy
        nat = _relerr(A @ B, ref)
        for count in (12, 16):
            t = _timeit(lambda: ozaki.dgemm(A, B, moduli=count), repeats)
            err = _relerr(ozaki.dgemm(A, B, moduli=count), ref)
            lines.append(f"| {n} | ozaki.dgemm | int8, {count} moduli | {t:.4f} | {t_d / t:.2f}x faster | "
                         f"{err:.1e} | {nat:.1e} |")
        ref = None
        Z = A + 1j * cp.asarray(_gen(rng, (n, n), 0.5, False))
        W = B + 1j * cp.asarray(_gen(rng, (n, n), 0.5, False))
        A = B = None  # free the device memory before the complex matrices
        t_z = _timeit(lambda: Z @ W, repeats)
        ref = ozaki.zgemm(Z, W, moduli=30, algorithm="hybrid")
        nat = _relerr(Z @ W, ref)
        times = {}
        for alg in ("2m", "3m", "4m"):
            for count in (8, 12, 16):
                t = _timeit(lambda: ozaki.zgemm(Z, W, moduli=count, algorithm=alg), repeats)
                times[alg, count] = t
                err = _relerr(ozaki.zgemm(Z, W, moduli=count, algorithm=alg), ref)
                lines.append(f"| {n} | ozaki.zgemm | {alg.upper()}, {count} moduli | {t:.4f} | "
                             f"{t_z / t:.2f}x faster | {err:.1e} | {nat:.1e} |")
        lines.append(f"| {n} | ZGEMM (cupy) | native | {t_z:.4f} | 1.00x | | |")
        lines.append(f"| {n} | 2M vs 3M | 16 moduli | | 2M {times['3m', 16] / times['2m', 16]:.2f}x faster | | |")
        Z = W = ref = None
        m = 1000000009  # a 30-bit prime 1 (mod 4)
        Gr, Gi = cp.asarray(rng.integers(0, m, (n, n))), cp.asarray(rng.integers(0, m, (n, n)))
        gt = {alg: _timeit(lambda: modlin.gaussian.matmul((Gr, Gi), (Gi, Gr), m, algorithm=alg), repeats)
              for alg in ("2m", "3m")}
        lines.append(f"| {n} | gaussian.matmul | 30-bit m, 2M | {gt['2m']:.4f} | 2M {gt['3m'] / gt['2m']:.2f}x "
                     f"faster than 3M ({gt['3m']:.4f} s) | exact | |")
        Gr = Gi = None
        X = cp.asarray(rng.integers(0, 2**31 - 1, (n, n)))
        Y = cp.asarray(rng.integers(0, 2**31 - 1, (n, n)))
        F, G = X.astype(cp.float64), Y.astype(cp.float64)
        t_f = _timeit(lambda: F @ G, repeats)
        for bits, p in PRIMES.items():
            pl = modlin.plan(p, n, n, n, device="cuda")
            t = _timeit(lambda: modlin.matmul(X, Y, p), repeats)
            lines.append(f"| {n} | matmul mod p | {bits}-bit p, {pl.summary if hasattr(pl, 'summary') else pl.engine} "
                         f"| {t:.4f} | {t / t_f:.2f}x DGEMM time | exact | |")
            if bits == 31:
                fp = modlin.plan(p, n, n, n, device="cuda", engine="fp64", algorithm="multiword")
                t_mw = _timeit(lambda: modlin.matmul(X, Y, p, plan=fp), repeats)
                lines.append(f"| {n} | matmul mod p | 31-bit p, best fp64 multiword plan | {t_mw:.4f} | "
                             f"{t_mw / t_f:.2f}x DGEMM time; chosen plan {t_mw / t:.2f}x faster | exact | |")
        X = Y = F = G = None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="also write the report (markdown) to this file")
    parser.add_argument("--no-table", action="store_true", help="only the correctness checks")
    args = parser.parse_args(argv)

    import cupy as cp

    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = dev["name"].decode() if isinstance(dev["name"], bytes) else dev["name"]
    lines = [f"# modlin on the GPU ({datetime.date.today().isoformat()})", "",
             f"GPU: {name}; CuPy {cp.__version__}; CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}; "
             f"Python {platform.python_version()}; NumPy {np.__version__}.", "",
             f"Command: `python benchmarks/gpu_report.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
             "", "## Correctness: CuPy inputs against the CPU result", "",
             "| check | result | detail |", "|:---|:---|:---|"]
    t0 = time.perf_counter()
    ok = check(lines)
    lines += ["", f"Checks took {time.perf_counter() - t0:.0f} s.", ""]
    if not args.no_table:
        lines += ["## Speed and accuracy", "",
                  "Times are medians of runs after a warm-up. Errors are max componentwise relative errors "
                  "against ozaki with 30 moduli (M about 2**230) on inputs (rand - 0.5) * exp(0.5 randn).", ""]
        t0 = time.perf_counter()
        try:
            table(lines, args.sizes, args.repeats)
        except Exception:
            traceback.print_exc()
            lines.append("| table stopped by an error: see the log | | | | | | |")
        lines += ["", f"Table took {time.perf_counter() - t0:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
