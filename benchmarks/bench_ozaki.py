"""asv benchmarks: ``modlin.ozaki`` float GEMMs emulated on exact integer GEMMs.

The cases of ``modlin._tools.bench.ozaki_tables.run_ozaki_table``: ``ozaki.dgemm`` and
``ozaki.zgemm`` (2M, 3M, 4M) on the fp64 engine with its default moduli and
on the int8 engine (emulated exactly on the CPU) with 8 to 20 moduli, with
the ratio to NumPy's matmul of the same size and dtype (float64 for dgemm,
complex128 for zgemm). The NumPy baselines themselves are timed by
``bench_matmul.Dgemm`` and ``bench_gaussian.ComplexBaseline``. On the CPU the
emulation is several times slower than NumPy: these cases track that cost,
the GPU is where it is meant to win.
"""

import time

import numpy as np

from modlin import ozaki

SIZES = [1024, 2048]
#: "default" is the engine's own count for k = n (``ozaki.default_bits(n)``: fp64
#: 6 moduli, about 2**126, up to n = 2048, 7 beyond); the fp64 engine runs only
#: that, the int8 engine only the explicit counts.
MODULI = ["default", 8, 12, 16, 20]
ENGINES = ["fp64", "int8"]


def _operands(n, complex_, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, n)) - 0.5, rng.random((n, n)) - 0.5
    if complex_:
        a = a + 1j * (rng.random((n, n)) - 0.5)
        b = b + 1j * (rng.random((n, n)) - 0.5)
    return a, b


def _count(engine, moduli):
    """The ``moduli=`` argument, or NotImplementedError (asv: skip) for an unbenchmarked pair."""
    if (engine == "fp64") != (moduli == "default"):
        raise NotImplementedError("fp64 runs its default moduli only, int8 the explicit counts")
    return None if moduli == "default" else moduli


def ratio_to_numpy(fn, a, b, repeats=3):
    """Median over ``repeats`` runs of ``fn``'s time over that of ``numpy.matmul(a, b)``.

    Each run of ``fn`` is followed at once by NumPy's product, so that load
    from elsewhere on a shared machine hits both sides of a ratio alike.
    """
    fn()  # warm-up
    np.matmul(a, b)
    ratios = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        np.matmul(a, b)
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
    return sorted(ratios)[len(ratios) // 2]


class Dgemm:
    """``ozaki.dgemm(A, B)`` for ``n x n`` float64 operands uniform in [-0.5, 0.5)."""

    params = (ENGINES, MODULI, SIZES)
    param_names = ["engine", "moduli", "n"]
    number = 1
    repeat = (3, 10, 30.0)
    timeout = 900

    def setup(self, engine, moduli, n):
        self.kw = {"engine": engine, "moduli": _count(engine, moduli)}
        self.a, self.b = _operands(n, False)
        # compile the numba kernels on a thin slice, outside the samples
        ozaki.dgemm(self.a[:8], self.b[:, :8], **self.kw)

    def time_dgemm(self, engine, moduli, n):
        ozaki.dgemm(self.a, self.b, **self.kw)

    def track_ratio_to_numpy(self, engine, moduli, n):
        """ozaki.dgemm time over the time of a float64 numpy.matmul of the same operands."""
        return ratio_to_numpy(lambda: ozaki.dgemm(self.a, self.b, **self.kw), self.a, self.b)

    track_ratio_to_numpy.unit = "ratio"


class Zgemm:
    """``ozaki.zgemm(A, B, algorithm=...)`` for ``n x n`` complex128 operands."""

    params = (["2m", "3m", "4m"], ENGINES, MODULI, SIZES)
    param_names = ["algorithm", "engine", "moduli", "n"]
    number = 1
    repeat = (3, 10, 30.0)
    # 4M with 20 int8 moduli at n = 2048 is 80 GEMMs: tens of seconds per call on two cores
    timeout = 1800

    def setup(self, algorithm, engine, moduli, n):
        self.kw = {"engine": engine, "moduli": _count(engine, moduli), "algorithm": algorithm}
        self.a, self.b = _operands(n, True)
        ozaki.zgemm(self.a[:8], self.b[:, :8], **self.kw)

    def time_zgemm(self, algorithm, engine, moduli, n):
        ozaki.zgemm(self.a, self.b, **self.kw)

    def track_ratio_to_numpy(self, algorithm, engine, moduli, n):
        """ozaki.zgemm time over the time of a complex128 numpy.matmul of the same operands."""
        return ratio_to_numpy(lambda: ozaki.zgemm(self.a, self.b, **self.kw), self.a, self.b)

    track_ratio_to_numpy.unit = "ratio"


class RankK:
    """``ozaki.dsyrk(A)`` and ``ozaki.zherk(A)`` of ``n x n`` operands, default moduli (for k = n)."""

    params = (SIZES,)
    param_names = ["n"]
    number = 1
    repeat = (3, 10, 30.0)
    timeout = 900

    def setup(self, n):
        self.x, _ = _operands(n, False)
        self.z, _ = _operands(n, True)
        ozaki.dsyrk(self.x[:8])
        ozaki.zherk(self.z[:8])

    def time_dsyrk(self, n):
        ozaki.dsyrk(self.x)

    def time_zherk(self, n):
        ozaki.zherk(self.z)


class SpreadAndOverflow:
    """The passes the default moduli and the overflow check add: ``spread_bits`` (one pass over
    each operand) and a product some of whose entries may overflow through truncated ones
    (GEMMul8's phi = 2 inputs scaled by 2**500, 256 x 64 @ 64 x 256: about 200 entries of 17
    rows and 98 columns take the exact path of ``overflow_fixes``)."""

    params = [[1024, 2048]]
    param_names = ["n"]
    timeout = 600

    def setup(self, n):
        rng = np.random.default_rng(0)
        self.a = (rng.random((n, n)) - 0.5) * np.exp(2 * rng.standard_normal((n, n)))
        self.b = (rng.random((n, n)) - 0.5) * np.exp(2 * rng.standard_normal((n, n)))
        k = 64  # the exact path runs on Python ints: a thin inner dimension keeps it to seconds
        self.wa, self.wb = self.a[:256, :k] * 2.0**500, self.b[:k, :256] * 2.0**500
        ozaki.spread_bits(self.a[:8], self.b[:, :8])

    def time_spread_bits(self, n):
        ozaki.spread_bits(self.a, self.b)

    def peakmem_spread_bits(self, n):
        ozaki.spread_bits(self.a, self.b)

    def time_overflow_exact_path(self, n):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ozaki.dgemm(self.wa, self.wb)
