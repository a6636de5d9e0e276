"""asv benchmarks: ``modlin.linalg`` against one ``modlin.matmul``.

The cases of ``python -m modlin bench --table linalg``: random ``n x n``
matrices of residues modulo the largest primes below ``2**20``, ``2**31`` and
``2**50`` (nonsingular with overwhelming probability) for rank, det, inv and
solve (one right-hand side); modulo ``2**31 - 1`` and ``2**61 - 1`` at
``n = 500, 1000, 2000`` for charpoly, minpoly and ``matrix_power(A, 2**64)``. The ``track_ratio_to_matmul`` figures are what the issue's
targets are stated in: the time of one call over that of one
``modlin.matmul`` of two ``n x n`` matrices modulo the same prime.
"""

import time
from statistics import median

import numpy as np

import modlin
from modlin._tools.bench.products import ELIMINATION_FUNCTIONS, POLYNOMIAL_FUNCTIONS, flint_case, linalg_case

from .bench_matmul import PRIMES

BITS = [20, 31, 50]
SIZES = [1024, 2048]

#: The polynomial and power cases: primes of 31 and 61 bits (the latter above the multiword range).
POLY_PRIMES = {31: 2**31 - 1, 61: 2**61 - 1}
POLY_SIZES = [500, 1000, 2000]


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
    return median(ratios)


class Linalg:
    """``linalg.rank``, ``det``, ``inv`` and ``solve`` (one right-hand side) of an ``n x n`` matrix."""

    params = (list(ELIMINATION_FUNCTIONS), BITS, SIZES)
    param_names = ["function", "bits", "n"]
    # one call at n = 2048 takes up to seconds on a 2-core machine: one call per sample
    number = 1
    repeat = (3, 10, 30.0)
    warmup_time = 0
    timeout = 900

    primes = PRIMES

    def setup(self, function, bits, n):
        self.p = self.primes[bits]
        rng = np.random.default_rng(0)
        self.a = rng.integers(0, self.p, (n, n), dtype=np.int64)
        self.b = rng.integers(0, self.p, (n, n), dtype=np.int64)
        self.call = linalg_case(function, self.a, self.b[:, 0], self.p)
        self.warm_up(function)

    def warm_up(self, function):
        """numba compilation, and the plans of the recursion's block shapes, kept out of the samples."""
        self.call()

    def time_linalg(self, function, bits, n):
        self.call()

    def track_ratio_to_matmul(self, function, bits, n):
        """Time of the call over that of one ``modlin.matmul`` of the same size and modulus."""
        return ratio_to_matmul(self.call, self.a, self.b, self.p)

    track_ratio_to_matmul.unit = "ratio"


class FlintNmodMat:
    """Comparison: python-flint ``nmod_mat`` rank, det, inv and solve (operands built in setup)."""

    params = (list(ELIMINATION_FUNCTIONS), BITS, [1024])
    primes = PRIMES
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
        p = self.primes[bits]
        rng = np.random.default_rng(0)
        a = rng.integers(0, p, (n, n), dtype=np.int64)
        b = rng.integers(0, p, (n, n), dtype=np.int64)[:, 0]
        self.call = flint_case(flint, function, a, b, p)

    def time_linalg(self, function, bits, n):
        self.call()


class WideLinalg(Linalg):
    """:class:`Linalg` modulo a 61-bit prime: products through residue number systems, base
    cases in Montgomery form (``linalg._elimination``)."""

    params = (list(ELIMINATION_FUNCTIONS), [61], [1024])
    primes = POLY_PRIMES

    def peakmem_linalg(self, function, bits, n):
        self.call()


class FlintWideLinalg(FlintNmodMat):
    """Comparison: python-flint ``nmod_mat`` for :class:`WideLinalg`."""

    params = (list(ELIMINATION_FUNCTIONS), [61], [1024])
    primes = POLY_PRIMES


class Polynomials(Linalg):
    """``linalg.charpoly``, ``minpoly`` and ``matrix_power(A, 2**64)`` of an ``n x n`` matrix."""

    params = (list(POLYNOMIAL_FUNCTIONS), list(POLY_PRIMES), POLY_SIZES)
    primes = POLY_PRIMES
    # matrix_power at n = 2000 is 64 products, a minute on a 2-core machine: few samples
    repeat = (1, 3, 60.0)
    timeout = 1800

    def warm_up(self, function):
        """numba compilation and the plans on a 200 x 200 matrix (a call at n = 2000 takes minutes)."""
        linalg_case(function, self.a[:200, :200], self.b[:200, 0], self.p)()

    def track_ratio_to_matmul(self, function, bits, n):
        """Time of the call over that of one ``modlin.matmul`` of the same size and modulus (the
        issue's budget for ``matrix_power(A, 2**64)`` is 1.1 x 128 of them)."""
        return ratio_to_matmul(self.call, self.a, self.b, self.p, repeats=1)

    track_ratio_to_matmul.unit = "ratio"


class FlintPolynomials(FlintNmodMat):
    """Comparison: python-flint ``nmod_mat.charpoly``, ``minpoly`` and 64 squarings."""

    params = (list(POLYNOMIAL_FUNCTIONS), list(POLY_PRIMES), POLY_SIZES)
    primes = POLY_PRIMES
    repeat = (1, 3, 60.0)
    timeout = 1800


class ManyInvariantFactors:
    """``linalg.charpoly`` at ``n = 500`` of matrices with more invariant factors than block
    Krylov has vectors, conjugated by a random matrix (so that python-flint, timed alongside,
    meets no structural zeros): 50 copies of one 10 x 10 block, or a random 100 x 100 block
    beside a scalar 400 x 400 one."""

    params = (["copies", "scalar-block"], list(POLY_PRIMES), [500])
    param_names = ["kind", "bits", "n"]
    timeout = 900  # python-flint's call takes seconds at 61 bits

    def setup(self, kind, bits, n):
        import flint

        p = self.p = POLY_PRIMES[bits]
        rng = np.random.default_rng(0)
        if kind == "copies":
            d = np.kron(np.eye(n // 10, dtype=np.int64), rng.integers(0, p, (10, 10), dtype=np.int64))
        else:
            d = np.eye(n, dtype=np.int64) * 3
            d[:n // 5, :n // 5] = rng.integers(0, p, (n // 5, n // 5), dtype=np.int64)
        s = rng.integers(0, p, (n, n), dtype=np.int64)
        self.a = modlin.matmul(modlin.matmul(s, d, p), modlin.linalg.inv(s, p), p)
        self.f = flint.nmod_mat(self.a.tolist(), p)
        modlin.linalg.charpoly(self.a, p)  # numba compilation and plans

    def time_charpoly(self, kind, bits, n):
        modlin.linalg.charpoly(self.a, self.p)

    def time_minpoly(self, kind, bits, n):
        """Derogatory matrices: the Krylov stages and the least common multiple of their
        vectors' minimal polynomials, on the matrix converted once (not per vector)."""
        modlin.linalg.minpoly(self.a, self.p)

    def track_ratio_to_flint(self, kind, bits, n):
        """python-flint's ``nmod_mat.charpoly`` time over modlin's (medians of 3 interleaved runs)."""
        ratios = []
        for _ in range(3):
            t0 = time.perf_counter()
            modlin.linalg.charpoly(self.a, self.p)
            t1 = time.perf_counter()
            self.f.charpoly()
            ratios.append((time.perf_counter() - t1) / (t1 - t0))
        return median(ratios)

    track_ratio_to_flint.unit = "ratio"
