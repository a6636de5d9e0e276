"""asv benchmarks: products on 1, 2 (and, on bigger runners, all) cores (``modlin.limits(threads=...)``).

``time_*`` is one product; ``track_ratio_to_dgemm`` its time over a float64 GEMM of
the same size (median of three interleaved pairs): what threads buy shows in its
trend across commits and in the ratio between the threads parameters.
"""

import os
import time

import numpy as np

import modlin

MODULI = {31: 2**31 - 1, 50: 2**50 - 27, 61: 2**61 - 1}


class ThreadedMatmul:
    params = ([31, 50, 61], sorted({1, 2, os.cpu_count() or 1}))
    param_names = ["bits", "threads"]
    n = 2048

    def setup(self, bits, threads):
        p = MODULI[bits]
        rng = np.random.default_rng(0)
        self.p = p
        self.a = rng.integers(0, p, (self.n, self.n), dtype=np.int64)
        self.b = rng.integers(0, p, (self.n, self.n), dtype=np.int64)
        self.out = np.empty((self.n, self.n), dtype=np.int64)
        self.limits = modlin.limits(threads=threads)
        modlin.matmul(self.a, self.b, p, out=self.out)  # compile and fault the pages in outside the timing

    def teardown(self, bits, threads):
        self.limits.restore()

    def time_matmul(self, bits, threads):
        modlin.matmul(self.a, self.b, self.p, out=self.out)

    def track_ratio_to_dgemm(self, bits, threads):
        x = self.a.astype(np.float64)
        ratios = []
        for _ in range(3):
            t0 = time.perf_counter()
            modlin.matmul(self.a, self.b, self.p, out=self.out)
            t1 = time.perf_counter()
            x @ x
            ratios.append((t1 - t0) / (time.perf_counter() - t1))
        return sorted(ratios)[1]

    track_ratio_to_dgemm.unit = "dgemm times"
