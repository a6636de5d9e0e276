"""Two one-thread GEMMs on row slabs against one GEMM on BLAS' two threads.

The question behind :data:`modlin._engines.threads.MAX_SLAB_K`: does a GEMM split into
row slabs, each on its own Python thread with BLAS limited to one thread, run as
fast as the same GEMM on BLAS' own threads? Each timing starts 0.3 s after the
last BLAS call, because OpenBLAS' workers keep spinning for a while (``2**28``
cycles by default) after a call on its threads, and a slab timed inside that
window runs at about half speed (which once made the slabs look slower).

Run it from the repository root: ``python benchmarks/slabs_vs_blas.py``. Not an
asv benchmark: asv would time each call right after the previous one.
"""

from __future__ import annotations

import statistics
import time

SHAPES = [(2048, 1024, 2048), (4096, 1024, 4096), (4096, 255, 4096), (2048, 128, 2048), (1000, 1000, 48),
          (1024, 1024, 1024)]


def main(rounds: int = 4) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    pool = ThreadPoolExecutor(1)
    rng = np.random.default_rng(0)
    print("| m x k x n | BLAS' 2 threads | 2 slabs, 1 thread each | slabs / BLAS |")
    print("|---|---:|---:|---:|")
    for m, k, n in SHAPES:
        a, b, out = rng.random((m, k)), rng.random((k, n)), np.empty((m, n))
        h = m // 2
        reps = max(3, int(4e9 / (m * k * n)))

        def blas():
            for _ in range(reps):
                np.matmul(a, b, out=out)

        def slab(rows):
            for _ in range(reps):
                np.matmul(a[rows], b, out=out[rows])

        def slabs():
            other = pool.submit(slab, slice(h, m))
            slab(slice(0, h))
            other.result()

        times = {"blas": [], "slabs": []}
        for r in range(rounds + 1):
            for name, fn in (("blas", blas), ("slabs", slabs)):
                time.sleep(0.3)  # nothing left spinning from the previous call
                limit = controller.limit(limits=1, user_api="blas") if name == "slabs" else None
                t0 = time.perf_counter()
                fn()
                dt = (time.perf_counter() - t0) / reps
                if limit is not None:
                    limit.restore_original_limits()
                if r:  # the first round warms up
                    times[name].append(dt)
        tb, ts = statistics.median(times["blas"]), statistics.median(times["slabs"])
        print(f"| {m} x {k} x {n} | {tb * 1e3:.2f} ms | {ts * 1e3:.2f} ms | {ts / tb:.2f} |", flush=True)


if __name__ == "__main__":
    main()
