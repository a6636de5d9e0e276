"""asv benchmarks: ``modlin.linalg`` (rank, det, inv, solve) against one ``modlin.matmul``.

The cases of ``python -m modlin bench --table linalg``: random ``n x n``
matrices of residues modulo the largest primes below ``2**20``, ``2**31`` and
``2**50`` (nonsingular with overwhelming probability), ``solve`` with one
right-hand side. The ``track_ratio_to_matmul`` figures are what the issue's
targets are stated in: the time of one call over that of one
``modlin.matmul`` of two ``n x n`` matrices modulo the same prime.
"""

import time

import numpy as np

import modlin
from modlin._bench import LINALG_FUNCTIONS, flint_case, linalg_case

from .bench_matmul import PRIMES, _median

BITS = [20, 31, 50]
SIZES = [1024, 2048]


def ratio_to_matmul(fn, a, b, p, repeats: int = 3) -> float:
    """Median over ``repeats`` runs of ``fn``'s time over that of ``modlin.matmul(a, b, p)``.

    Each run of ``fn`` is followed at once by the product, so that load from
    elsewhere on a shared machine hits both sides of a ratio alike.
    """
    fn()  # warm-up
    modlin.matmul(a, b, p)
    ratios = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        modlin.matmul(a, b, p)
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
    return _median(ratios)


class Linalg:
    """``linalg.rank``, ``det``, ``inv`` and ``solve`` (one right-hand side) of an ``n x n`` matrix."""

    params = (list(LINALG_FUNCTIONS), BITS, SIZES)
    param_names = ["function", "bits", "n"]
    # one call at n = 2048 takes up to seconds on a 2-core machine: one call per sample
    number = 1
    repeat = (3, 10, 30.0)
    warmup_time = 0
    timeout = 900

    def setup(self, function, bits, n):
        self.p = PRIMES[bits]
        rng = np.random.default_rng(0)
        self.a = rng.integers(0, self.p, (n, n), dtype=np.int64)
        self.b = rng.integers(0, self.p, (n, n), dtype=np.int64)
        self.call = linalg_case(function, self.a, self.b[:, 0], self.p)
        # numba compilation, and the plans of the recursion's block shapes, kept out of the samples
        self.call()

    def time_linalg(self, function, bits, n):
        self.call()

    def track_ratio_to_matmul(self, function, bits, n):
        """Time of the call over that of one ``modlin.matmul`` of the same size and modulus."""
        return ratio_to_matmul(self.call, self.a, self.b, self.p)

    track_ratio_to_matmul.unit = "ratio"


class FlintNmodMat:
    """Comparison: python-flint ``nmod_mat`` rank, det, inv and solve (operands built in setup)."""

    params = (list(LINALG_FUNCTIONS), BITS, [1024])
    param_names = ["function", "bits", "n"]
    number = 1
    repeat = (3, 10, 30.0)
    warmup_time = 0
    timeout = 900

    def setup(self, function, bits, n):
        try:
            import flint
        except ImportError:
            raise NotImplementedError("python-flint is not installed")
        p = PRIMES[bits]
        rng = np.random.default_rng(0)
        a = rng.integers(0, p, (n, n), dtype=np.int64)
        b = rng.integers(0, p, (n, n), dtype=np.int64)[:, 0]
        self.call = flint_case(flint, function, a, b, p)

    def time_linalg(self, function, bits, n):
        self.call()
