"""asv benchmarks: products under a memory budget (``modlin.limits``), tiled or whole.

``peakmem_*`` is the peak memory of the process during one product, ``time_*``
its time, and ``track_tiles`` the number of tiles the scheduler chose, for a
budget that holds the whole product and for budgets that force tiles, at a size
a 2-core runner affords.
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
        self.limits = modlin.limits(memory=memory)  # in force for the benchmark's process
        modlin.matmul(self.a[:64, :64], self.b[:64, :64], p)  # compile outside the timing

    def teardown(self, bits, memory):
        self.limits.restore()

    def time_matmul(self, bits, memory):
        modlin.matmul(self.a, self.b, self.p)

    def peakmem_matmul(self, bits, memory):
        modlin.matmul(self.a, self.b, self.p)

    def track_tiles(self, bits, memory):
        return modlin.plan(self.p, self.n, self.n, self.n).tiling().count

    track_tiles.unit = "tiles"
