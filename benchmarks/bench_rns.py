"""asv benchmarks: residue-number-system products, ``modlin.matmul`` modulo large p and ``modlin.intmul``.

The same cases as ``python -m modlin bench --table rns``: products modulo
``2**61 - 1``, ``2**64 - 59`` and the largest primes below ``2**128`` and
``2**256`` (random residues: int64 below ``2**63``, uint64 up to ``2**64``,
object arrays of Python ints above), and exact integer products of random signed 64-bit (int64) and
256-bit (object array) entries.
"""

import numpy as np

import modlin

# the operands of `modlin bench --table rns`, so that both measure the same cases
from modlin._tools.bench.products import _random_residues as _residues, _random_signed as _signed

from .bench_matmul import ratio_to_dgemm

#: Moduli by label. The 128- and 256-bit ones are galois.prev_prime(2**128) and
#: galois.prev_prime(2**256), hard-coded so that setup does not import galois.
PRIMES = {
    "61": 2**61 - 1,
    "64-59": 2**64 - 59,
    "128": 340282366920938463463374607431768211297,
    "256": 115792089237316195423570985008687907853269984665640564039457584007913129639747,
}
SIZES = [1024, 2048]


class MatmulLargeP:
    """``modlin.matmul(A, B, p)`` for square ``n x n`` operands and p of 61 to 256 bits."""

    params = (list(PRIMES), SIZES)
    param_names = ["p", "n"]
    # one product takes seconds (a minute or more at 256 bits, n = 2048): one call per sample
    number = 1
    repeat = (2, 5, 60.0)
    warmup_time = 0
    timeout = 1800

    def setup(self, p, n):
        self.p = PRIMES[p]
        rng = np.random.default_rng(0)
        self.a = _residues(rng, self.p, (n, n))
        self.b = _residues(rng, self.p, (n, n))
        # JIT compilation and the plan's CRT constants, kept out of the samples:
        # the full-size plan once on a thin slice
        pl = modlin.plan(self.p, n, n, n)
        modlin.matmul(self.a[:8], self.b[:, :8], self.p, plan=pl)

    def time_matmul(self, p, n):
        modlin.matmul(self.a, self.b, self.p)

    def track_ratio_to_dgemm(self, p, n):
        """modlin time over the time of a float64 numpy.matmul of the same size."""
        return ratio_to_dgemm(lambda: modlin.matmul(self.a, self.b, self.p), n)

    track_ratio_to_dgemm.unit = "ratio"
    track_ratio_to_dgemm.timeout = 3600


class IntMul:
    """``modlin.intmul(A, B)``: exact products of random signed 64-bit (int64) or 256-bit (object) entries."""

    params = ([64, 256], SIZES)
    param_names = ["bits", "n"]
    number = 1
    repeat = (2, 5, 60.0)
    warmup_time = 0
    timeout = 1800

    def setup(self, bits, n):
        rng = np.random.default_rng(0)
        self.a = _signed(rng, bits, (n, n))
        self.b = _signed(rng, bits, (n, n))
        # warm-up on a thin slice of the full-size operands (JIT, moduli, CRT constants);
        # the bound, and so the plan, depends on k = n, which the slice keeps
        modlin.intmul(self.a[:8], self.b[:, :8])

    def time_intmul(self, bits, n):
        modlin.intmul(self.a, self.b)



class PythonIntsToPieces:
    """The serial pass that starts a product of Python ints, on ``1024 x 1024`` signed
    entries: into 16-bit pieces, read from the ints' memory, or through ``marshal`` (the
    way taken where CPython's int layout is unknown)."""

    params = ([127, 256], ["objects", "marshal"])
    param_names = ["bits", "reader"]

    def setup(self, bits, reader):
        from modlin._arith import pyints as _pyints

        self.x = _signed(np.random.default_rng(0), bits, (1024, 1024))
        self.read = (lambda x: _pyints.halves_from_objects(x, None)) if reader == "objects" \
            else _pyints.to_halves_marshal
        assert self.read(self.x[:2]) is not None  # kernels compiled, layout checked: outside the samples

    def time_to_pieces(self, bits, reader):
        self.read(self.x)

    def peakmem_to_pieces(self, bits, reader):
        self.time_to_pieces(bits, reader)


class PythonIntsFromLimbs:
    """The serial pass that ends a product of Python ints (of ``1024 x 1024`` entries): the
    ints made from the CRT's 16-bit limbs, through ``marshal`` streams."""

    params = [127, 256]
    param_names = ["bits"]

    def setup(self, bits):
        from modlin._arith import pyints as _pyints

        x = _signed(np.random.default_rng(0), bits, (1024, 1024))
        self.limbs, self.neg = _pyints.to_halves(np.abs(x)), x.ravel() < 0
        _pyints.from_limbs(self.limbs[:, :2], self.neg[:2])

    def time_from_limbs(self, bits):
        from modlin._arith.pyints import from_limbs

        from_limbs(self.limbs, self.neg)

    def peakmem_from_limbs(self, bits):
        self.time_from_limbs(bits)
