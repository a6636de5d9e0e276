"""Peak RSS increase and time of one ``modlin.matmul`` on fresh n x n int64 operands.

Usage: ``python benchmarks/peak_rss.py N BITS`` (BITS in 31, 50, 61, 127), or
``python benchmarks/peak_rss.py N zgemm`` (``ozaki.zgemm`` on complex128 operands) or
``N gauss2m`` (``gaussian.matmul`` with 2M modulo a 21-bit prime, on ``(real, imag)``
int64 pairs), with ``MODLIN_MEMORY`` set to the budget to try. Prints the tiles chosen, the time
over one float64 GEMM of the same size (measured just before, in the same
process) and the peak resident memory beyond the operands, measured by the
kernel (``VmHWM`` after resetting it through ``/proc/self/clear_refs``; Linux
only), with and without the result. One product per process: the first call
on fresh operands, as a user meets it.
"""

import sys
import time

import numpy as np

import modlin
import modlin._algorithms.gaussian

PRIMES = {31: 2**31 - 1, 50: 2**50 - 27, 61: 2**61 - 1, 127: 2**127 - 1}


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def _operands(n: int, what: str, rng):
    """The operands, the product to measure and a line naming it and its tiles."""
    if what == "zgemm":
        from modlin import ozaki
        from modlin._algorithms import ozaki_tiles

        a, b = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)) for _ in range(2))
        mods = ozaki._resolve("complex", "auto", None, "auto", k=n)
        tiles = ozaki_tiles.product_tiling(mods, True, (n, n, n), "fast", False)[0]
        return a, b, ozaki.zgemm, f"ozaki.zgemm tiles={tiles.count}"
    if what == "gauss2m":
        from modlin import gaussian

        m = gaussian.twom_primes(21, 1)[0]
        a, b = ((rng.integers(0, m, (n, n)), rng.integers(0, m, (n, n))) for _ in range(2))
        pl = modlin.plan(m, n, n, n)
        tiles = modlin._algorithms.gaussian.gauss_tiling(pl, "2m", isinstance(pl, modlin.Plan), (n, n, n), 1)
        return a, b, lambda x, y: gaussian.matmul(x, y, m), f"gaussian.matmul 2M 21-bit tiles={tiles.count}"
    p = PRIMES[int(what)]
    a = rng.integers(0, min(p, 2**62), (n, n))
    b = rng.integers(0, min(p, 2**62), (n, n))
    return a, b, lambda x, y: modlin.matmul(x, y, p), f"{what}-bit tiles={modlin.plan(p, n, n, n).tiling().count}"


def _nbytes(c) -> int:
    return sum(x.nbytes for x in c) if isinstance(c, tuple) else c.nbytes


def main(n: int, what: str) -> None:
    rng = np.random.default_rng(0)
    a, b, product, name = _operands(n, what, rng)
    small = tuple(x[:300, :300] for x in a) if isinstance(a, tuple) else a[:300, :300]
    product(small, small)  # compile outside the measurement
    x, y = rng.random((n, n)), rng.random((n, n))
    t0 = time.perf_counter()
    x @ y
    dgemm = time.perf_counter() - t0
    del x, y
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM to the current RSS
    base = _status("VmRSS")
    t0 = time.perf_counter()
    c = product(a, b)
    took = time.perf_counter() - t0
    extra = _status("VmHWM") - base
    size = _nbytes(c)
    print(f"n={n} {name} budget={modlin.limits.current().memory / 2**30:.2f} GiB "
          f"time/dgemm={took / dgemm:.2f} extra peak={extra / 2**20:.0f} MiB "
          f"(beyond the {size / 2**20:.0f} MiB result: {(extra - size) / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
