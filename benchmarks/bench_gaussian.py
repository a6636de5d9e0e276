"""asv benchmarks: ``modlin.gaussian`` products (2M, 3M, 4M, HERK, exact Z[i] products).

The cases of ``python -m modlin bench --table gaussian``: products modulo primes
1 (mod 4) near ``2**20`` and ``2**40`` with each algorithm, HERK beside the 2M
product of ``A`` and ``A^H``, and the exact product of 20-bit Gaussian entries,
with NumPy's complex128 matmul as the reference.
"""

import numpy as np

from modlin import gaussian
from modlin._tools.bench.products import GAUSSIAN_MODULI

from .bench_matmul import ratio_to_dgemm

SIZES = [1024, 2048]


class GaussianMatmul:
    """``gaussian.matmul(A, B, m, algorithm=...)`` for ``n x n`` (real, imag) pairs."""

    params = (list(GAUSSIAN_MODULI), ["2m", "3m", "4m"], SIZES)
    param_names = ["bits", "algorithm", "n"]
    number = 1
    repeat = (3, 10, 30.0)
    timeout = 900

    def setup(self, bits, algorithm, n):
        self.m = GAUSSIAN_MODULI[bits]
        rng = np.random.default_rng(0)
        self.A = tuple(rng.integers(0, self.m, (n, n)) for _ in range(2))
        self.B = tuple(rng.integers(0, self.m, (n, n)) for _ in range(2))
        gaussian.matmul(tuple(x[:8] for x in self.A), tuple(x[:, :8] for x in self.B), self.m, algorithm=algorithm)

    def time_matmul(self, bits, algorithm, n):
        gaussian.matmul(self.A, self.B, self.m, algorithm=algorithm)

    def track_ratio_to_dgemm(self, bits, algorithm, n):
        """modlin time over the time of one float64 numpy.matmul of the same size."""
        return ratio_to_dgemm(lambda: gaussian.matmul(self.A, self.B, self.m, algorithm=algorithm), n)

    track_ratio_to_dgemm.unit = "ratio"


class Herk:
    """``gaussian.herk(A, m)`` (one GEMM) beside the 2M product ``A @ A^H`` (two)."""

    params = (list(GAUSSIAN_MODULI), SIZES)
    param_names = ["bits", "n"]
    number = 1
    repeat = (3, 10, 30.0)
    timeout = 900

    def setup(self, bits, n):
        self.m = GAUSSIAN_MODULI[bits]
        rng = np.random.default_rng(0)
        self.A = tuple(rng.integers(0, self.m, (n, n)) for _ in range(2))
        self.AH = (self.A[0].T, (self.m - self.A[1].T) % self.m)
        gaussian.herk(tuple(x[:8] for x in self.A), self.m)

    def time_herk(self, bits, n):
        gaussian.herk(self.A, self.m)

    def time_matmul_2m_a_ah(self, bits, n):
        gaussian.matmul(self.A, self.AH, self.m, algorithm="2m")


class ComplexBaseline:
    """NumPy's complex128 matmul (ZGEMM), exact only for small entries."""

    params = (SIZES,)
    param_names = ["n"]
    number = 1
    repeat = (3, 10, 30.0)

    def setup(self, n):
        rng = np.random.default_rng(0)
        self.a = rng.random((n, n)) + 1j * rng.random((n, n))
        self.b = rng.random((n, n)) + 1j * rng.random((n, n))

    def time_matmul(self, n):
        np.matmul(self.a, self.b)


class GaussianIntmul:
    """``gaussian.intmul`` of 20-bit Gaussian entries (RNS over 2M primes)."""

    params = (SIZES,)
    param_names = ["n"]
    number = 1
    repeat = (2, 5, 60.0)
    timeout = 1800

    def setup(self, n):
        rng = np.random.default_rng(0)
        self.A = tuple(rng.integers(-2**19, 2**19, (n, n)) for _ in range(2))
        self.B = tuple(rng.integers(-2**19, 2**19, (n, n)) for _ in range(2))
        gaussian.intmul(tuple(x[:8] for x in self.A), tuple(x[:, :8] for x in self.B))

    def time_intmul(self, n):
        gaussian.intmul(self.A, self.B)
