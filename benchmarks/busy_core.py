"""asv benchmarks: public paths with one core held by a busy loop, default threads against one.

On a shared machine another process often holds a core. There a threaded call
that waits for a descheduled worker pays a scheduler slice, and linear algebra
makes hundreds of calls. ``setup`` starts a bounded busy loop (a child process,
killed in ``teardown``); ``threads`` is "default" (:func:`modlin.limits`'
default) or 1 (``modlin.limits(threads=1)``, which holds BLAS to one thread too).
The ratio of the two across commits is what matters; ``modlin bench --table busy``
prints it side by side in fresh processes.
"""

import subprocess
import sys

import numpy as np

import modlin
from modlin import linalg

_BUSY = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


class BusyCore:
    params = (["charpoly61", "det31", "det61", "det127", "matmul31", "matmul61x50"], ["default", 1])
    param_names = ["case", "threads"]
    timeout = 600
    number = 1
    repeat = 3

    def setup(self, case, threads):
        rng = np.random.default_rng(0)
        p = 2**61 - 1 if "61" in case else 2**127 - 1 if "127" in case else 2**31 - 1
        n = {"charpoly61": 1000, "det31": 1500, "det61": 1000, "det127": 1000, "matmul31": 2048, "matmul61x50": 256}[case]
        a = rng.integers(0, min(p, 2**62), (n, n))
        if p > 2**63:  # Python ints below p
            a = (a.astype(object) * (p // 2**62) + rng.integers(0, 2**62, (n, n)).astype(object)) % p
        if case.startswith("charpoly"):
            self.call = lambda: linalg.charpoly(a, p)
        elif case.startswith("det"):
            self.call = lambda: linalg.det(a, p)
        elif case == "matmul31":
            b = rng.integers(0, p, (n, n))
            self.call = lambda: modlin.matmul(a, b, p)
        else:
            bs = [rng.integers(0, p, (n, n)) for _ in range(50)]
            self.call = lambda: [modlin.matmul(a, b, p) for b in bs]
        self.limits = modlin.limits(threads=threads) if threads != "default" else None
        self.call()  # kernels loaded before the core is taken
        self.loop = subprocess.Popen([sys.executable, "-c", _BUSY])

    def teardown(self, case, threads):
        self.loop.kill()
        self.loop.wait()
        if self.limits is not None:
            self.limits.restore()

    def time_call(self, case, threads):
        self.call()
