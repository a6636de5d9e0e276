"""asv benchmarks: products under a memory budget (``modlin.limits``), tiled or whole.

``peakmem_*`` is the peak memory of the process during one product, ``time_*``
its time, and ``track_tiles`` the number of tiles the scheduler chose, for a
budget that holds the whole product and for budgets that force tiles, at a size
a 2-core runner affords; ``ozaki.zgemm``, ``gaussian.matmul`` (2M), and ``intmul``'s
single float64 GEMM and residue number system likewise.
"""

import numpy as np

import modlin

MODULI = {31: 2**31 - 1, 50: 2**50 - 27, 61: 2**61 - 1, 127: 2**127 - 1}


class TiledMatmul:
    params = ([31, 50, 61, 127], ["4GiB", "64MiB", "16MiB"])
    param_names = ["bits", "memory"]
    n = 1536

    def setup(self, bits, memory):
        p = MODULI[bits]
        rng = np.random.default_rng(0)
        self.p = p
        self.a = rng.integers(0, min(p, 2**62), (self.n, self.n), dtype=np.int64)
        self.b = rng.integers(0, min(p, 2**62), (self.n, self.n), dtype=np.int64)
        if p > 2**63:  # residues of every size, as Python ints: converted once, not per tile
            self.a, self.b = self.a.astype(object) * 3 % p, self.b.astype(object) * 5 % p
        self.limits = modlin.limits(memory=memory)  # in force for the benchmark's process
        modlin.matmul(self.a[:64, :64], self.b[:64, :64], p)  # compile outside the timing

    def teardown(self, bits, memory):
        self.limits.restore()

    def time_matmul(self, bits, memory):
        modlin.matmul(self.a, self.b, self.p)

    def peakmem_matmul(self, bits, memory):
        modlin.matmul(self.a, self.b, self.p)

    def track_tiles(self, bits, memory):
        pl = modlin.plan(self.p, self.n, self.n, self.n)
        return (pl.tiling(objects=(True, True)) if self.p > 2**63 else pl.tiling()).count

    track_tiles.unit = "tiles"


class TiledOzakiZgemm:
    """``ozaki.zgemm`` under a budget that holds the whole product and ones that force tiles."""

    params = (["4GiB", "128MiB", "32MiB"],)
    param_names = ["memory"]
    n = 1024
    timeout = 600

    def setup(self, memory):
        from modlin import ozaki

        rng = np.random.default_rng(0)
        self.a, self.b = (rng.standard_normal((self.n, self.n)) + 1j * rng.standard_normal((self.n, self.n))
                          for _ in range(2))
        self.zgemm = ozaki.zgemm
        self.limits = modlin.limits(memory=memory)
        ozaki.zgemm(self.a[:64, :64], self.b[:64, :64])  # compile outside the timing

    def teardown(self, memory):
        self.limits.restore()

    def time_zgemm(self, memory):
        self.zgemm(self.a, self.b)

    def peakmem_zgemm(self, memory):
        self.zgemm(self.a, self.b)


class TiledGaussian2M:
    """``gaussian.matmul`` with 2M modulo a 21-bit prime, whole or in tiles."""

    params = (["4GiB", "64MiB", "16MiB"],)
    param_names = ["memory"]
    n = 1536

    def setup(self, memory):
        from modlin import gaussian

        self.m = gaussian.twom_primes(21, 1)[0]
        rng = np.random.default_rng(0)
        self.a = tuple(rng.integers(0, self.m, (self.n, self.n)) for _ in range(2))
        self.b = tuple(rng.integers(0, self.m, (self.n, self.n)) for _ in range(2))
        self.matmul = gaussian.matmul
        self.limits = modlin.limits(memory=memory)
        gaussian.matmul(tuple(x[:64, :64] for x in self.a), tuple(x[:64, :64] for x in self.b), self.m)

    def teardown(self, memory):
        self.limits.restore()

    def time_matmul(self, memory):
        self.matmul(self.a, self.b, self.m)

    def peakmem_matmul(self, memory):
        self.matmul(self.a, self.b, self.m)


class TiledIntmulFloat64:
    """``intmul`` where one float64 GEMM is exact (``k * max|A| * max|B| <= 2**53``): float64
    panels per tile, k-panels added in float64, whole or in tiles."""

    params = (["4GiB", "64MiB", "16MiB"],)
    param_names = ["memory"]
    n = 1536

    def setup(self, memory):
        rng = np.random.default_rng(0)
        # 20-bit entries: n * 2**40 < 2**53, the single-GEMM path
        self.a, self.b = (rng.integers(-(2**20), 2**20, (self.n, self.n)) for _ in range(2))
        self.limits = modlin.limits(memory=memory)
        modlin.intmul(self.a[:64, :64], self.b[:64, :64])

    def teardown(self, memory):
        self.limits.restore()

    def time_intmul(self, memory):
        modlin.intmul(self.a, self.b)

    def peakmem_intmul(self, memory):
        modlin.intmul(self.a, self.b)


class TiledIntmulRNS(TiledIntmulFloat64):
    """``intmul`` of Python ints through a residue number system, whole or in tiles: the
    tiles read blocks of the pieces made for the bound (held within the budget), and
    k-panels add into int32 residues that each tile's CRT reads in place."""

    params = (["4GiB", "96MiB", "48MiB"],)  # the pieces alone take 28 MiB
    n = 1024

    def setup(self, memory):
        rng = np.random.default_rng(0)
        self.a, self.b = (rng.integers(-(2**62), 2**62, (self.n, self.n)).astype(object) * 2**38 for _ in range(2))
        self.limits = modlin.limits(memory=memory)
        modlin.intmul(self.a[:64, :64], self.b[:64, :64])
