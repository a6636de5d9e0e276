"""asv benchmarks: ``modlin.matmul`` and ``modlin.ozaki.zgemm`` of dask arrays against the in-memory product.

At a size a 2-core runner affords, on dask's threaded scheduler (a LocalCluster's
startup would dominate; ``modlin bench --table dask`` times one at n = 8192):
``time_dask`` is the product of chunked operands, ``time_in_memory`` the same
product of the NumPy operands, and ``track_tasks`` the graph's size. Skipped
(asv's NotImplementedError in setup) when dask is not installed.
"""

import numpy as np

import modlin

MODULI = {31: 2**31 - 1, 61: 2**61 - 1}


class DaskMatmul:
    params = ([31, 61], [256, 512])
    param_names = ["bits", "chunks"]
    n = 1024

    def setup(self, bits, chunks):
        try:
            import dask.array as da
        except ImportError:
            raise NotImplementedError("dask is not installed") from None
        p = MODULI[bits]
        rng = np.random.default_rng(0)
        self.p = p
        self.a, self.b = (rng.integers(0, p, (self.n, self.n)) for _ in range(2))
        self.da, self.db = (da.from_array(x, chunks=chunks) for x in (self.a, self.b))
        modlin.matmul(self.a[:64, :64], self.b[:64, :64], p)  # compile outside the timing

    def time_dask(self, bits, chunks):
        modlin.matmul(self.da, self.db, self.p).compute(scheduler="threads")

    def time_in_memory(self, bits, chunks):
        modlin.matmul(self.a, self.b, self.p)

    def track_tasks(self, bits, chunks):
        return len(modlin.matmul(self.da, self.db, self.p).__dask_graph__())

    track_tasks.unit = "tasks"


class DaskZgemm:
    """``modlin.ozaki.zgemm`` of dask arrays (scales by dask reductions, residues per chunk pair,
    the CRT per output chunk) against the in-memory call."""

    params = [256, 512]
    param_names = ["chunks"]
    n = 1024

    def setup(self, chunks):
        try:
            import dask.array as da
        except ImportError:
            raise NotImplementedError("dask is not installed") from None
        rng = np.random.default_rng(0)
        self.a, self.b = (rng.standard_normal((self.n, self.n)) + 1j * rng.standard_normal((self.n, self.n))
                          for _ in range(2))
        self.da, self.db = (da.from_array(x, chunks=chunks) for x in (self.a, self.b))
        modlin.ozaki.zgemm(self.a[:64, :64], self.b[:64, :64])  # compile outside the timing

    def time_dask(self, chunks):
        modlin.ozaki.zgemm(self.da, self.db).compute(scheduler="threads")

    def time_in_memory(self, chunks):
        modlin.ozaki.zgemm(self.a, self.b)

    def track_tasks(self, chunks):
        return len(modlin.ozaki.zgemm(self.da, self.db).__dask_graph__())

    track_tasks.unit = "tasks"
