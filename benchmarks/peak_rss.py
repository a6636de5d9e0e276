"""Peak RSS increase and time of one ``modlin.matmul`` on fresh n x n int64 operands.

Usage: ``python benchmarks/peak_rss.py N BITS`` (BITS in 31, 50, 61, 127), with
``MODLIN_MEMORY`` set to the budget to try. Prints the tiles chosen, the time
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

PRIMES = {31: 2**31 - 1, 50: 2**50 - 27, 61: 2**61 - 1, 127: 2**127 - 1}


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def main(n: int, bits: int) -> None:
    p = PRIMES[bits]
    rng = np.random.default_rng(0)
    a = rng.integers(0, min(p, 2**62), (n, n))
    b = rng.integers(0, min(p, 2**62), (n, n))
    modlin.matmul(a[:300, :300], b[:300, :300], p)  # compile outside the measurement
    x, y = rng.random((n, n)), rng.random((n, n))
    t0 = time.perf_counter()
    x @ y
    dgemm = time.perf_counter() - t0
    del x, y
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM to the current RSS
    base = _status("VmRSS")
    t0 = time.perf_counter()
    c = modlin.matmul(a, b, p)
    took = time.perf_counter() - t0
    extra = _status("VmHWM") - base
    tiles = modlin.plan(p, n, n, n).tiling()
    print(f"n={n} {bits}-bit budget={modlin.limits.current().memory / 2**30:.2f} GiB tiles={tiles.count} "
          f"time/dgemm={took / dgemm:.2f} extra peak={extra / 2**20:.0f} MiB "
          f"(beyond the {c.nbytes / 2**20:.0f} MiB result: {(extra - c.nbytes) / 2**20:.0f} MiB)")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
