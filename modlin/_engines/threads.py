"""Every core for a product: its rows split across worker threads, BLAS on one thread each.

A product's element-wise passes (reductions, word splits, residues, CRT) are
memory-bound loops that numba compiles without the GIL (``nogil``), so they
scale across Python threads. They cannot simply run beside BLAS' own threads:
after each GEMM, OpenBLAS' workers keep spinning for a while, and a pass split
across the same cores right after a GEMM gains nothing (measured here: 2
threads, 19 ms per pass over a 4096 x 4096 float64 matrix either way). So a
product on ``T = limits().threads`` cores runs *everything* in ``T`` workers,
each on its own slab of rows: the GEMMs with BLAS limited to one thread per
worker (threadpoolctl), the passes on the slab each GEMM just wrote. The slabs
share the other side's words or residues, so no work is repeated, and nothing
spins. On this 2-core machine that is 10-20 % faster than one slab on BLAS'
two threads even before the passes are counted.

:func:`region` is the one entry point: inside it, BLAS runs on one thread
(reference-counted, so nested and concurrent regions restore it once, when the
last one ends). :func:`run` maps a function over slabs on a shared pool, the
caller taking the first slab; pool tasks never wait on other tasks, so
products started from several Python threads at once cannot deadlock. Each
task runs in a copy of the caller's :mod:`contextvars` context, so that it sees
the caller's :func:`modlin.limits` (the pool's threads are shared by every
product of the process, and limits are per context).
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from typing import Callable, Iterator, Sequence, TypeVar

from modlin._runtime.calibration import (
    BUSY_WINDOW,
    MAX_SLAB_K,
    MIN_ENTRIES,
    MIN_ROWS,
    MIN_WORK,
    MODULI_SPLIT_ROWS,
    PASS,
)
from modlin._runtime.limits import available_cpus, current as current_limits

T = TypeVar("T")


_lock = threading.Lock()


_pool: list[ThreadPoolExecutor] = []


_pool_size = [0]


_local = threading.local()


def workers(work: float, most: int) -> int:
    """How many workers a job of ``work`` multiply-adds (or entry-passes), splittable into
    at most ``most`` parts, gets: ``limits().threads``, fewer for small jobs, and one
    inside a worker (nested jobs run where they are: pool tasks never wait on others)."""
    t = current_limits().threads
    if t <= 1 or work < MIN_WORK or getattr(_local, "inside", False):
        return 1
    return max(1, min(t, most))


def row_workers(work: float, rows: int) -> int:
    """:func:`workers` for a job split into slabs of rows, each at least :data:`MIN_ROWS` thick."""
    return workers(work, rows // MIN_ROWS)


def by_moduli(rows: int, moduli: int, threads: int | None = None) -> bool:
    """Whether a residue number system's product of ``rows`` rows and ``moduli`` moduli on
    ``threads`` workers (default: :func:`modlin.limits`') gives each worker whole GEMMs of its
    share of the moduli rather than a slab of rows: when slabs would be thinner than
    :data:`MODULI_SPLIT_ROWS` and every worker gets a modulus. The products
    (:func:`modlin._algorithms.rns.product_residues`) and the planner's cost both ask here."""
    t = current_limits().threads if threads is None else threads
    return 1 < t <= moduli and rows < MODULI_SPLIT_ROWS * t


def gemm_workers(work: float, rows: int, depth: int, *, whole: int = 0) -> int:
    """:func:`row_workers` for a job whose GEMM calls are ``depth`` deep in ``k``: one (BLAS'
    own threads) when they are deeper than :data:`MAX_SLAB_K`, or inside :func:`blas_gemms`.
    With ``whole``, the job is that many whole GEMMs shared out between the workers instead
    of slabs of rows (:func:`workers` over them)."""
    if depth > MAX_SLAB_K or getattr(_local, "blas_gemms", False):
        return 1
    return workers(work, whole) if whole else row_workers(work, rows)


@contextmanager
def blas_gemms() -> Iterator[None]:
    """The products made inside, on this thread, run their GEMMs on BLAS' own threads, never
    in slabs (their passes are still split). For linalg's many products of mixed sizes:
    the small ones run on BLAS' threads anyway (:data:`MIN_WORK`), and one-thread slabs
    right after them share the cores with OpenBLAS' still spinning workers. Measured here
    (medians of 15 interleaved runs): 61-bit charpoly at n = 1000 0.49 s against 0.59 s with
    slabs, 31-bit 0.21 against 0.23, 61-bit det 0.15 against 0.18; a lone product is
    faster in slabs (31-bit at n = 2048: 0.40 against 0.44 s)."""
    before = getattr(_local, "blas_gemms", False)
    _local.blas_gemms = True
    try:
        yield
    finally:
        _local.blas_gemms = before


def slabs(n: int, parts: int) -> list[slice]:
    """``parts`` contiguous slices covering ``range(n)``, sizes differing by at most one."""
    parts = max(1, min(parts, n)) if n else 1
    q, r = divmod(n, parts)
    bounds = [i * q + min(i, r) for i in range(parts + 1)]
    return [slice(bounds[i], bounds[i + 1]) for i in range(parts)]


@lru_cache(maxsize=1)
def _controller():
    """threadpoolctl's view of the loaded libraries, inspected once (that takes milliseconds)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextmanager
def region(threads: int) -> Iterator[None]:
    """While inside, BLAS uses one thread (when ``threads > 1``): the workers are the threads."""
    if threads <= 1:
        yield
        return
    with quiet_blas():
        yield


@contextmanager
def quiet_blas() -> Iterator[None]:
    """While inside, BLAS uses one thread, whatever the workers. For the small GEMMs of the
    passes (residues' weights, the CRT's limbs, ``k <= 6``): on BLAS' threads they gain
    nothing, and they would leave OpenBLAS' workers spinning, which halves the speed of the
    one-thread slabs of the product that follows (measured here: a 61-bit product at
    n = 500 spent 30 ms instead of 15 in its slabs' GEMMs, after residues made on BLAS'
    threads)."""
    with blas_at_most(1):
        yield


_caps: dict[int, int] = {}  # BLAS thread caps in force (the least wins) -> how many hold each


_blas_now: list = [None, None, None]  # [the cap applied, BLAS' own counts before the first, the count set]


@lru_cache(maxsize=1)
def _blas_libraries() -> list:
    """The BLAS libraries threadpoolctl drives (selected once: every GEMM enters a cap)."""
    try:
        return list(_controller().select(user_api="blas").lib_controllers)
    except Exception:  # threadpoolctl missing or unable to inspect the libraries
        return []


def blas_count() -> int:
    """The threads BLAS uses now (the most over its libraries; 0 when none can be read)."""
    try:
        return max((lib.num_threads for lib in _blas_libraries()), default=0)
    except Exception:
        return 0


def _apply_caps() -> None:
    """Give BLAS the least cap in force (under ``_lock``), or its own counts back when none is.
    Only a count that changes is set: every GEMM of a product enters a cap, and most leave
    BLAS' count as it was."""
    want = min(_caps) if _caps else None
    if want == _blas_now[0]:
        return
    libs = _blas_libraries()
    try:
        own = _blas_now[1] if _blas_now[1] is not None else [lib.num_threads for lib in libs]
        now = _blas_now[2] if _blas_now[2] is not None else own
        target = list(own) if want is None else [min(want, o) for o in own]
        for lib, t, c in zip(libs, target, now):
            if t != c:
                lib.set_num_threads(t)
        _blas_now[1:] = [None, None] if want is None else [own, target]
    except Exception:  # a BLAS threadpoolctl cannot drive: it keeps its threads
        _blas_now[1:] = [None, None]
    _blas_now[0] = want


@contextmanager
def blas_at_most(threads: int) -> Iterator[None]:
    """While inside, BLAS uses at most ``threads`` threads. BLAS' thread count belongs to the
    whole process, and products run side by side from several Python threads: so the caps
    in force are counted, the least of them applies, and BLAS gets its own count back when
    the last one ends (setting it costs about 2 us, threadpoolctl's controller)."""
    threads = max(1, int(threads))
    with _lock:
        _caps[threads] = _caps.get(threads, 0) + 1
        _apply_caps()
    try:
        yield
    finally:
        with _lock:
            _caps[threads] -= 1
            if not _caps[threads]:
                del _caps[threads]
            _apply_caps()


def gemm_threads() -> int:
    """BLAS threads for a GEMM on the calling thread: the threads of :func:`modlin.limits` (so
    that ``limits(threads=1)`` holds BLAS to one thread too), no more than the cores other
    processes leave free (:func:`free_cores`). Small GEMMs are left to BLAS' own judgement:
    capping them to one thread set BLAS' count back and forth around every GEMM of a
    linalg call, 2.5 % of a 31-bit det at n = 1500 on a quiet machine, where two threads
    already paid from 128**3 multiply-adds (1.34 times one thread's speed there)."""
    t = current_limits().threads
    return t if t <= 1 else min(t, free_cores())


_cpu_seen: list = [None]  # (wall clock, the machine's busy CPU seconds, this process' CPU seconds, free cores)


def _cpu_seconds() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (Linux ``/proc/stat``:
    user, nice, system, irq, softirq and steal, the hypervisor's share of a virtual machine),
    or None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in (fields[1:9] + ["0"] * 8)[:8])
    return (user + nice + system + irq + softirq + steal) / ticks


def free_cores() -> int:
    """The cores this process may use (:func:`modlin._runtime.limits.available_cpus`) less those other
    processes kept busy lately, at least 1: the machine's busy CPU time less this process' own
    over the last :data:`BUSY_WINDOW` seconds or more (read from ``/proc/stat``, about 20 us a
    reading; where it cannot be read, every core counts as free).

    On a machine where another process keeps a core busy, a GEMM on BLAS' threads waits for
    its worker whenever the scheduler has put it behind that process: linalg's hundreds of
    medium GEMMs then ran up to twice as slow as on one thread, while on a quiet machine
    their threads save 10-25 % (``modlin bench --table busy``). A count of runnable threads
    (``/proc/loadavg``) was tried first and misread this process' own BLAS workers, which
    spin for a while after each GEMM, as another process' some of the time."""
    now = time.monotonic()
    seen = _cpu_seen[0]
    if seen is not None and now - seen[0] < BUSY_WINDOW:
        return seen[3]
    busy, own = _cpu_seconds(), time.process_time()
    cores = available_cpus()
    if busy is None or seen is None or seen[1] is None:
        free = cores
    else:
        others = max(0.0, (busy - seen[1]) - (own - seen[2])) / (now - seen[0])
        free = max(1, cores - round(others))
    _cpu_seen[0] = (now, busy, own, free)
    return free


def _executor(size: int) -> ThreadPoolExecutor:
    with _lock:
        if _pool_size[0] < size:
            old = _pool[0] if _pool else None
            _pool[:] = [ThreadPoolExecutor(max_workers=size, thread_name_prefix="modlin")]
            _pool_size[0] = size
            if old is not None:
                old.shutdown(wait=False)
        return _pool[0]


def _inside(fn, item):
    _local.inside = True
    try:
        return fn(item)
    finally:
        _local.inside = False


def run(fn: Callable[[T], object], items: Sequence[T]) -> list:
    """``[fn(item) for item in items]``, the items in parallel (the first on this thread).

    Every item runs under this thread's :func:`modlin.limits` (in a copy of its context).
    An exception in any item is raised here, after every item has finished.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    pool = _executor(len(items) - 1)
    # one copy of the context per task: a context runs on one thread at a time
    futures = [pool.submit(contextvars.copy_context().run, _inside, fn, item) for item in items[1:]]
    try:
        first = _inside(fn, items[0])
    finally:
        rest = [f.exception() for f in futures]  # wait for every slab before raising
    for err in rest:
        if err is not None:
            raise err
    return [first] + [f.result() for f in futures]


def in_order(fn: Callable[[T], object], items: Sequence[T], consume: Callable[[int, object], None],
             threads: int, ahead: int) -> None:
    """``consume(i, fn(items[i]))`` for every ``i`` in order, on this thread, while the ``fn``
    calls run on ``threads`` workers, this thread among them: it takes the next unclaimed
    item whenever the result it must consume next is not ready. At most ``ahead`` results
    wait to be consumed (the workers wait for room; this thread never waits on a worker
    that is not computing).

    For work whose last step needs the GIL (Python ints made from a CRT's limbs): the
    workers' compiled kernels release it, so the limbs of later items are made while this
    thread makes the ints of earlier ones, instead of rounds of one then the other.
    An exception in any call is raised here, after every worker has stopped.
    """
    n = len(items)
    if threads <= 1 or n <= 1 or getattr(_local, "inside", False):  # a pool task never waits on others
        for i, item in enumerate(items):
            consume(i, fn(item))
        return
    cv = threading.Condition()
    state = {"claimed": 0, "consumed": 0, "failed": None}
    done: dict[int, object] = {}

    def claim(wait: bool) -> int | None:  # under cv
        while True:
            i = state["claimed"]
            if i >= n or state["failed"] is not None:
                return None
            if i - state["consumed"] < ahead:
                state["claimed"] = i + 1
                return i
            if not wait:
                return None
            cv.wait()

    def compute(i: int) -> None:
        try:
            r = fn(items[i])
        except BaseException as err:  # noqa: BLE001 - raised by the consumer
            with cv:
                state["failed"] = state["failed"] or err
                cv.notify_all()
            return
        with cv:
            done[i] = r
            cv.notify_all()

    def worker(_) -> None:
        while True:
            with cv:
                i = claim(True)
            if i is None:
                return
            compute(i)

    pool = _executor(threads - 1)
    futures = [pool.submit(contextvars.copy_context().run, _inside, worker, None) for _ in range(threads - 1)]
    try:
        for i in range(n):
            while True:
                with cv:
                    if state["failed"] is not None:
                        raise state["failed"]
                    if i in done:
                        r = done.pop(i)
                        break
                    # item i itself when no worker took it, else a later one while it is made
                    mine = claim(False)
                    if mine is None:
                        cv.wait()
                        continue
                _inside(compute, mine)
            consume(i, r)
            with cv:
                state["consumed"] = i + 1
                cv.notify_all()
    except BaseException:
        with cv:
            state["failed"] = state["failed"] or RuntimeError("stopped")
            cv.notify_all()
        raise
    finally:
        for f in futures:
            f.cancel() or f.exception()


def side_by_side(calls: Sequence[Callable[[], T]], work: float) -> list[T]:
    """``[call() for call in calls]`` for independent products (``work`` multiply-adds in
    all), each on one BLAS thread, as many at once as there are workers, when the calls
    divide evenly among all of them (``limits().threads``: with fewer calls than threads,
    side by side would leave cores idle); else one after the other on BLAS' threads.

    For the few deep GEMMs of one modulus (an Ozaki 2M modulus' two): side by side they
    pack their own operands and leave no BLAS worker spinning, so the residues made next
    run at full speed. Measured here (2 threads, two 2048 x 4096 x 2048 GEMMs and then a
    2M residue pass over 2048 x 4096 complex entries, medians of 5): GEMMs 0.74 s against
    0.83 s one after the other, and the pass after them 0.041 s against 0.075 s."""
    t = workers(work, len(calls))
    if t <= 1 or t < current_limits().threads or len(calls) % t:
        return [call() for call in calls]
    with region(t):
        done = run(lambda group: [call() for call in group], [calls[s] for s in slabs(len(calls), t)])
    return [x for group in done for x in group]


def each_row(fn: Callable[[slice], T], rows: int, cols: int, passes: float = 1.0) -> list[T]:
    """``fn(part)`` over slabs of rows (slices) covering ``range(rows)``, in parallel: an
    element-wise job of ``passes`` passes over a ``rows x cols`` matrix of any strides,
    which row-wise kernels walk slab by slab."""
    t = row_workers(rows * cols * passes * PASS, rows)
    with region(t):
        return run(fn, slabs(rows, t))


def each(fn: Callable[[range], T], n: int, passes: float = 1.0) -> list[T]:
    """``fn(part)`` over contiguous ranges covering ``range(n)``, in parallel: a flat
    element-wise job of ``passes`` passes over ``n`` entries (for the cost model, each
    pass over an entry is :data:`~modlin._runtime.calibration.PASS` multiply-adds)."""
    t = workers(n * passes * PASS, n // MIN_ENTRIES)
    parts = [range(s.start, s.stop) for s in slabs(n, t)]
    with region(t):
        return run(fn, parts)
