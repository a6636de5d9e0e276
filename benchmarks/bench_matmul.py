"""asv benchmarks: ``modlin.matmul`` against float64 dgemm, planning overhead, python-flint.

Run with ``asv run`` (or ``asv run --python=same`` in an environment that has
modlin installed). Moduli are the largest primes below ``2**bits``, the same as
``python -m modlin bench`` uses; operands are random int64 in ``[0, p)``.
"""

import time
from statistics import median

import numpy as np

import modlin

#: Largest prime below 2**bits (galois.prev_prime(2**bits)), hard-coded so that
#: setup does not import galois.
PRIMES = {
    8: 251,
    20: 1048573,
    24: 16777213,
    26: 67108859,
    31: 2147483647,
    40: 1099511627689,
    50: 1125899906842597,
}
#: 24 bits: a (1,1)-product at the end of its range, 16 blocks of 128 at k = 2048; 31
#: bits: a (1,2)-product whose two word pairs take blocks of 256 and 512.
BITS = [8, 20, 24, 26, 31, 40, 50]
SIZES = [512, 1024, 2048]


def _operands(n, p, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, p, (n, n), dtype=np.int64)
    b = rng.integers(0, p, (n, n), dtype=np.int64)
    return a, b


def ratio_to_dgemm(fn, n: int, repeats: int = 3) -> float:
    """Median over ``repeats`` runs of ``fn``'s time over that of an ``n x n`` float64 matmul.

    Each run of ``fn`` is followed at once by the dgemm, so that load from
    elsewhere on a shared machine hits both sides of a ratio alike.
    """
    rng = np.random.default_rng(1)
    x = rng.random((n, n))
    y = rng.random((n, n))
    fn()  # warm-up
    np.matmul(x, y)
    ratios = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        np.matmul(x, y)
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
    return median(ratios)


class MatmulModP:
    """``modlin.matmul(A, B, p)`` for square ``n x n`` int64 operands."""

    params = (BITS, SIZES)
    param_names = ["bits", "n"]
    # one product at n = 2048 takes seconds on a 2-core machine: one call per sample
    number = 1
    repeat = (3, 10, 20.0)
    warmup_time = 0.2
    timeout = 600

    def setup(self, bits, n):
        self.p = PRIMES[bits]
        self.a, self.b = _operands(n, self.p)
        # The first product in a process JIT-compiles modlin's numba kernels
        # (about 0.3 s): run the full-size plan once on a thin slice to keep
        # that out of the samples.
        pl = modlin.plan(self.p, n, n, n)
        modlin.matmul(self.a[:8], self.b[:, :8], self.p, plan=pl)

    def time_matmul(self, bits, n):
        modlin.matmul(self.a, self.b, self.p)

    def peakmem_matmul(self, bits, n):
        modlin.matmul(self.a, self.b, self.p)

    def track_ratio_to_dgemm(self, bits, n):
        """modlin time over the time of a float64 numpy.matmul of the same size."""
        return ratio_to_dgemm(lambda: modlin.matmul(self.a, self.b, self.p), n)

    track_ratio_to_dgemm.unit = "ratio"


class MatmulLarge:
    """The block schedule at 4096, where most passes are (31 bits: 24 GEMMs of k <= 512,
    a pass after each but the first; 50 bits: the planner's choice, an RNS), as a
    ratio to dgemm on every core of ``modlin.limits``."""

    params = [[31, 50]]
    param_names = ["bits"]
    number = 1
    repeat = (2, 5, 60.0)
    warmup_time = 0.0
    timeout = 900

    def setup(self, bits):
        MatmulModP.setup(self, bits, 4096)

    def track_ratio_to_dgemm(self, bits):
        """modlin time over the time of a float64 numpy.matmul of the same size."""
        return ratio_to_dgemm(lambda: modlin.matmul(self.a, self.b, self.p), 4096)

    track_ratio_to_dgemm.unit = "ratio"


class Dgemm:
    """Baseline: float64 ``numpy.matmul`` of the same sizes."""

    params = [SIZES]
    param_names = ["n"]
    number = 1
    repeat = (3, 10, 20.0)
    warmup_time = 0.2
    timeout = 300

    def setup(self, n):
        rng = np.random.default_rng(0)
        self.x = rng.random((n, n))
        self.y = rng.random((n, n))

    def time_matmul(self, n):
        np.matmul(self.x, self.y)


class Plan:
    """Planning overhead: ``modlin.plan(p, 1024, 1024, 1024)``."""

    params = [BITS]
    param_names = ["bits"]
    timeout = 120

    def setup(self, bits):
        self.p = PRIMES[bits]

    def time_plan(self, bits):
        modlin.plan(self.p, 1024, 1024, 1024)


class FlintNmodMat:
    """Comparison: python-flint ``nmod_mat`` product (operands built in setup)."""

    params = (BITS, [512, 1024])
    param_names = ["bits", "n"]
    number = 1
    repeat = (3, 10, 20.0)
    warmup_time = 0.2
    timeout = 600

    def setup(self, bits, n):
        try:
            import flint
        except ImportError:
            raise NotImplementedError("python-flint is not installed")
        p = PRIMES[bits]
        a, b = _operands(n, p)
        self.fa = flint.nmod_mat(a.tolist(), p)
        self.fb = flint.nmod_mat(b.tolist(), p)

    def time_matmul(self, bits, n):
        self.fa * self.fb
