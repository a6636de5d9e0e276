"""asv benchmarks: :mod:`modlin.linalg` over Z and Q (no modulus) beside python-flint's ``fmpz_mat``.

The cases of ``python -m modlin bench --table integers``: random ``n x n`` matrices with
entries in ``[-2**10, 2**10)``; det, solve with 1 and 50 right-hand sides, rank and charpoly;
``charpoly62``: entries in ``[-2**62, 2**62)`` (the charpoly's GEMMs on pieces of ``A``), at ``n = 100``.
``track_ratio_to_flint`` is what the issue's targets are stated in (python-flint's time over
modlin's, both measured in one run); ``peakmem_*`` the memory of modlin's call.
"""

import time

import numpy as np

from modlin import linalg

try:
    import flint
except ImportError:  # pragma: no cover - python-flint is a test dependency
    flint = None


def _case(n, k=0, seed=0, bits=10):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2**bits, 2**bits, (n, n))
    b = rng.integers(-2**10, 2**10, (n, k)) if k else None
    return a, b


class Integers:
    params = ([100, 400, 1000], ["det", "solve1", "solve50", "rank", "charpoly", "charpoly62"])
    param_names = ["n", "function"]
    timeout = 600

    def setup(self, n, function):
        if function == "charpoly" and n > 400 or function == "solve50" and n > 400:
            raise NotImplementedError  # minutes each: the n = 1000 rows are in the bench table
        if function == "charpoly62" and n > 100:
            raise NotImplementedError  # python-flint takes minutes
        self.a, self.b = _case(n, 50 if function == "solve50" else 1 if function == "solve1" else 0,
                               bits=62 if function == "charpoly62" else 10)

    def _call(self, function):
        if function == "det":
            return linalg.det(self.a)
        if function.startswith("solve"):
            return linalg.solve(self.a, self.b)
        if function == "rank":
            return linalg.rank(self.a)
        return linalg.charpoly(self.a)

    def _flint(self, function):
        fa = flint.fmpz_mat(self.a.tolist())
        if function == "det":
            return fa.det()
        if function.startswith("solve"):
            return fa.solve(flint.fmpz_mat(self.b.tolist()))
        if function == "rank":
            return fa.rank()
        return fa.charpoly()

    def time_modlin(self, n, function):
        self._call(function)

    def peakmem_modlin(self, n, function):
        self._call(function)

    def track_ratio_to_flint(self, n, function):
        if flint is None:
            raise NotImplementedError
        t0 = time.perf_counter()
        self._call(function)
        t1 = time.perf_counter()
        self._flint(function)
        t2 = time.perf_counter()
        return (t2 - t1) / (t1 - t0)

    track_ratio_to_flint.unit = "flint time / modlin time"


class BigPrimes:
    """linalg modulo 127- to 256-bit primes (the compiled multi-limb base cases), as
    ``modlin bench --table bigprime``: random residues, ``solve`` with one right-hand side."""

    params = ([127, 200, 256], [200, 400], ["det", "solve", "inv", "rank"])
    param_names = ["bits", "n", "function"]
    timeout = 300

    def setup(self, bits, n, function):
        from modlin._tools.bench.integers import _big_prime

        self.p = p = _big_prime(bits)
        rng = np.random.default_rng(0)
        hi = np.array([[int(v) for v in row] for row in rng.integers(0, 2**62, (n, n))], dtype=object)
        lo = np.array([[int(v) for v in row] for row in rng.integers(0, 2**62, (n, n))], dtype=object)
        self.a = (hi * (p // 2**62) + lo) % p
        self.b = self.a[:, 0] * 3 % p

    def _call(self, function):
        if function == "solve":
            return linalg.solve(self.a, self.b, self.p)
        return getattr(linalg, function)(self.a, self.p)

    def time_modlin(self, bits, n, function):
        self._call(function)

    def peakmem_modlin(self, bits, n, function):
        self._call(function)


class LimbProducts:
    """The big-prime recursions' products on limb arrays (``linalg._bigmod.limb_product``):
    ``c - a @ b mod p`` from limbs to limbs, the shapes of their blocks at ``n = 200`` and
    ``n = 1000``."""

    params = ([127, 256], [100, 500])
    param_names = ["bits", "n"]

    def setup(self, bits, n):
        from modlin._tools.bench.integers import _big_prime
        from modlin.linalg._bigmod import to_limb_array

        self.p = p = _big_prime(bits)
        rng = np.random.default_rng(0)
        hi = np.array([[int(v) for v in row] for row in rng.integers(0, 2**62, (n, n))], dtype=object)
        lo = np.array([[int(v) for v in row] for row in rng.integers(0, 2**62, (n, n))], dtype=object)
        self.a = to_limb_array((hi * (p // 2**62) + lo) % p, p)
        self.c = self.a.copy()

    def time_limb_product(self, bits, n):
        from modlin.linalg._bigmod import limb_product

        limb_product(self.a, self.a, self.p, self.c, subtract=True)

    def peakmem_limb_product(self, bits, n):
        from modlin.linalg._bigmod import limb_product

        limb_product(self.a, self.a, self.p, self.c, subtract=True)
