"""The ``dask`` table of ``modlin bench``: products of dask arrays on a LocalCluster.

:func:`run_dask_table` times :func:`modlin.matmul` (and :func:`modlin.ozaki.zgemm`)
of two ``n x n`` dask arrays on a ``distributed.LocalCluster`` of two worker processes with one thread each
(distributed pins each worker's BLAS to one thread, so the cluster uses the
machine's two cores as the in-memory product's BLAS does) against the in-memory
product of the same NumPy operands in this process. The operands are persisted
on the workers first, and the product is timed until its chunks are computed
there (``persist``): a pipeline that writes its result to storage does not
gather it into one process either (zgemm's scales, computed when the product is
built, are inside the timing). The result is gathered once, outside the
timings, and checked equal (bit for bit) to the in-memory one.

Each worker's peak resident memory during the timed products comes from a
thread sampling it (psutil, every 20 ms) in the worker; the graph size is the
number of tasks of the product, the operands' chunks excluded.

This module is not imported by ``import modlin``; it needs dask and distributed.
"""

from __future__ import annotations

import datetime
import threading
import time
from statistics import median

import numpy as np

from modlin._front.products import matmul
from modlin._tools.bench import STDERR, STDOUT
from modlin._tools.bench.products import _fmt_ratio, _fmt_s, _print_header, _timed
from modlin.ozaki import zgemm

__all__ = ["run_dask_table"]

#: Moduli of the table: a multiword plan and a residue number system.
DASK_MODULI = (2**31 - 1, 2**61 - 1)

#: The largest n of the zgemm rows: the issue's size; at 8192 one in-memory run takes minutes here.
ZGEMM_MAX_N = 4096

#: Seconds between two samples of a worker's resident memory.
SAMPLE_S = 0.02

_sampler: dict = {}  # in a worker process: its sampling thread, stop event and peak


def _start_sampling() -> None:
    """In a worker: sample this process' resident memory until :func:`_stop_sampling`."""
    import psutil

    proc, stop, peak = psutil.Process(), threading.Event(), [0]

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            stop.wait(SAMPLE_S)

    thread = threading.Thread(target=sample, daemon=True)
    _sampler.update(thread=thread, stop=stop, peak=peak)
    thread.start()


def _stop_sampling() -> int:
    """In a worker: stop sampling and return the peak resident memory, in bytes."""
    _sampler["stop"].set()
    _sampler["thread"].join()
    return _sampler["peak"][0]


def _cases(sizes, moduli, zgemm_rows: bool):
    """``(n, label, make_operands, product)`` of every row: each modulus at each size, then
    :func:`modlin.ozaki.zgemm` at each size capped at :data:`ZGEMM_MAX_N`."""
    for n in sizes:
        for p in moduli:
            yield n, f"matmul mod 2^{p.bit_length()}-{2**p.bit_length() - p}", \
                lambda rng, n=n, p=p: (rng.integers(0, p, (n, n)), rng.integers(0, p, (n, n))), \
                lambda a, b, p=p: matmul(a, b, p)
    for n in sorted({min(n, ZGEMM_MAX_N) for n in sizes}) if zgemm_rows else ():
        yield n, "ozaki.zgemm", \
            lambda rng, n=n: tuple(rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)) for _ in "ab"), \
            zgemm


def _same_bits(x, y) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def run_dask_table(sizes=(8192,), chunks=(2048,), moduli=DASK_MODULI, repeats=3, out=STDOUT,
                   progress=STDERR, seed=0, zgemm_rows=True):
    """Time :func:`modlin.matmul` and :func:`modlin.ozaki.zgemm` of dask arrays on a 2-worker
    LocalCluster; print a table.

    Rows: each ``n`` of ``sizes``, each chunk size of ``chunks`` (square chunks,
    at most ``n``) and each modulus; then zgemm (default moduli and algorithm) at
    each ``n`` capped at :data:`ZGEMM_MAX_N` (none with ``zgemm_rows=False``).
    Columns: the in-memory product's time, the
    dask product's, their ratio (median of per-pair ratios, each dask run
    followed at once by an in-memory one), the graph's tasks and the largest
    peak resident memory of a worker.
    """
    import dask
    import dask.array as da
    import distributed

    started = datetime.datetime.now().astimezone()
    rng = np.random.default_rng(seed)
    rows, header = [], []
    # the header before the cluster starts: distributed sets its workers' BLAS environment here too
    _print_header(lambda s="": header.append(s), started, f"run_dask_table(sizes={list(sizes)}, chunks={list(chunks)}, "
                  f"repeats={repeats}, seed={seed}, zgemm_rows={zgemm_rows}); dask {dask.__version__}, distributed {distributed.__version__}; "
                  "LocalCluster(n_workers=2, threads_per_worker=1, processes=True)",
                  None, False, f"median of {repeats} run(s); random int64 residues (zgemm: complex normals); "
                  "in-memory products in this "
                  "process (BLAS threads as shown), dask products on the workers (one BLAS thread each)")

    def say(msg):
        if progress is not None:
            print(msg, file=progress, flush=True)

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        for n, label, make, product in _cases(sizes, moduli, zgemm_rows):
            a, b = make(rng)
            want = product(a, b)  # also the warm-up of the in-memory side
            for c in sorted({min(c, n) for c in chunks}):
                say(f"n={n}, chunks {c}, {label} ...")
                dA, dB = (client.persist(da.from_array(x, chunks=c)) for x in (a, b))
                distributed.wait([dA, dB])
                lazy = product(dA, dB)
                tasks = len(lazy.__dask_graph__()) - dA.npartitions - dB.npartitions
                got = client.compute(lazy, sync=True)  # warm-up: the workers compile or load kernels
                exact = _same_bits(got, want)
                del got
                client.run(_start_sampling)
                t_dask, t_mem = [], []
                for _ in range(repeats):
                    t_dask.append(_timed(lambda dA=dA, dB=dB: distributed.wait(client.persist(product(dA, dB)))))
                    t_mem.append(_timed(lambda: product(a, b)))
                peak = max(client.run(_stop_sampling).values())
                del dA, dB, lazy
                rows.append({"n": n, "chunks": c, "product": label, "memory_s": median(t_mem),
                             "dask_s": median(t_dask), "ratio": median([x / y for x, y in zip(t_dask, t_mem)]),
                             "tasks": tasks, "peak_bytes": peak, "exact": exact})
                time.sleep(0.5)  # let the workers release the last results before the next row

    pr = lambda s="": print(s, file=out)  # noqa: E731
    for line in header:
        pr(line)
    pr("| n | chunks | product | in-memory s | dask s | dask / in-memory | tasks | peak RSS per worker | exact |")
    pr("|---:|---:|:---|---:|---:|---:|---:|---:|:---:|")
    for r in rows:
        pr(f"| {r['n']} | {r['chunks']} | {r['product']} "
           f"| {_fmt_s(r['memory_s'])} | {_fmt_s(r['dask_s'])} | {_fmt_ratio(r['ratio'])} | {r['tasks']} "
           f"| {r['peak_bytes'] / 2**20:.0f} MiB | {'yes' if r['exact'] else 'NO'} |")
    pr()
    pr("dask / in-memory: median of per-pair ratios (target: at most 1.3 at n = 8192, chunks 2048, and for zgemm "
       "at n = 4096). tasks: the "
       "product's graph, without the operands' chunks. peak RSS: the larger of the two workers' peak resident "
       "memory over the timed runs (the operands' chunks included). exact: the gathered dask result equals the "
       "in-memory one bit for bit.")
    return rows
