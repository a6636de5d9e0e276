"""Products on several threads: the same results for any number of workers, concurrent
calls from several Python threads, and BLAS' threads put back afterwards.

The thresholds below which products stay on one thread are lowered to zero, so
that the small matrices here are split into slabs (uneven ones: 67 rows in 2 and
3) and every flat pass into several ranges.
"""

from __future__ import annotations

import math
import threading

import flint
import numpy as np
import pytest

import modlin
from conftest import rand_ints, ref_matmul
from modlin import gaussian, ozaki
from modlin._engines import threads as _threads
from modlin._runtime import limits as _limits

P31, P50, P61, P127 = 2**31 - 1, 1125899906842597, 2**61 - 1, 2**127 - 1


def _blas_threads() -> list[int]:
    """The threads of the BLAS libraries modlin controls (read from the libraries now)."""
    return [lib["num_threads"] for lib in _threads._controller().select(user_api="blas").info()]


@pytest.fixture(autouse=True)
def _split_everything(monkeypatch):
    """Every job is split, however small; the limits in force are put back afterwards."""
    monkeypatch.setattr(_threads, "MIN_WORK", 0)
    monkeypatch.setattr(_threads, "MIN_ROWS", 8)
    monkeypatch.setattr(_threads, "MIN_ENTRIES", 64)
    token = _limits._current.set(_limits.current())
    blas = _blas_threads()
    yield
    _limits._current.reset(token)
    assert _blas_threads() == blas  # no region left BLAS on one thread


def _each_threads(fn):
    """``fn()`` under threads = 1, 2 and 3; all three results, which must be equal."""
    out = []
    for t in (1, 2, 3):
        with modlin.limits(threads=t):
            out.append(fn())
    return out


# one shape per plan kind: (1,2) and (2,3) in place, concatenated B or A words, RNS
# (int64 and object results), the fp32 engine
MATMUL_CASES = [
    (P31, (67, 40, 50), "fp64", "horner"),
    (P50, (67, 40, 50), "fp64", "horner"),
    (P50, (67, 129, 20), "fp64", "concat-b"),
    (P50, (20, 129, 67), "fp64", "concat-a"),
    (2**20 - 3, (67, 300, 31), "fp32", "concat-b"),
    (P61, (67, 40, 50), "fp64", None),
    (P127, (67, 40, 50), "fp64", None),
]


@pytest.mark.parametrize("p, shape, engine, variant", MATMUL_CASES)
def test_matmul_same_for_any_threads(rng, p, shape, engine, variant):
    m, k, n = shape
    pl = modlin.plan(p, m, k, n, engine=engine, variant=variant)
    assert getattr(pl, "variant", None) == variant  # the case tests the plan it is meant to
    A = rand_ints(rng, (m, k), 0, p)
    B = rand_ints(rng, (k, n), 0, p)
    A[0, :] = B[:, 0] = p - 1  # the worst case sits in some slab
    a, b = (x if p > 2**63 else x.astype(np.int64) for x in (A, B))
    results = _each_threads(lambda: modlin.matmul(a, b, p, plan=pl))
    expect = ref_matmul(A, B, p)
    for r in results:
        assert r.dtype == results[0].dtype and np.array_equal(r, expect)


def test_stacked_and_tiled_products_same_for_any_threads(rng):
    A = rand_ints(rng, (2, 150, 130), 0, P50).astype(np.int64)
    B = rand_ints(rng, (130, 140), 0, P50).astype(np.int64)
    expect = ref_matmul(A, B, P50)
    for budget in (None, "1MiB"):
        with modlin.limits(memory=budget):
            assert (modlin.plan(P50, 150, 130, 140).tiling().count > 1) == (budget is not None)
            for r in _each_threads(lambda: modlin.matmul(A, B, P50)):
                assert np.array_equal(r, expect)


@pytest.mark.parametrize("bits", [20, 200])
def test_intmul_same_for_any_threads(rng, bits):
    A = rand_ints(rng, (67, 30), -2**bits, 2**bits)
    B = rand_ints(rng, (30, 41), -2**bits, 2**bits)
    a, b = (x.astype(np.int64) if bits < 63 else x for x in (A, B))
    expect = A @ B
    for r in _each_threads(lambda: modlin.intmul(a, b)):
        assert [int(v) for v in r.ravel()] == [int(v) for v in expect.ravel()]


@pytest.mark.parametrize("m, algorithm", [(1048577, "2m"), (1048583, "3m"), (P31, "4m")])
def test_gaussian_same_for_any_threads(rng, m, algorithm):
    ar, ai = rand_ints(rng, (67, 30), 0, m), rand_ints(rng, (67, 30), 0, m)
    br, bi = rand_ints(rng, (30, 50), 0, m), rand_ints(rng, (30, 50), 0, m)
    expect = ((ref_matmul(ar, br, m) - ref_matmul(ai, bi, m)) % m, (ref_matmul(ar, bi, m) + ref_matmul(ai, br, m)) % m)
    A = (ar.astype(np.int64), ai.astype(np.int64))
    B = (br.astype(np.int64), bi.astype(np.int64))
    for re, im in _each_threads(lambda: gaussian.matmul(A, B, m, algorithm=algorithm)):
        assert np.array_equal(re, expect[0]) and np.array_equal(im, expect[1])


def test_ozaki_bit_identical_for_any_threads(rng):
    A = rng.standard_normal((67, 80)) + 1j * rng.standard_normal((67, 80))
    B = rng.standard_normal((80, 45)) + 1j * rng.standard_normal((80, 45))
    # 2M moduli's two GEMMs and 4M's four run side by side on 2 threads, 3M's three in turn
    runs = [_each_threads(lambda alg=alg: ozaki.zgemm(A, B, algorithm=alg)) for alg in ("2m", "3m", "4m")]
    runs += [_each_threads(lambda alg=alg: ozaki.zherk(A, algorithm=alg)) for alg in ("2m", "3m", "4m")]
    runs.append(_each_threads(lambda: ozaki.dgemm(A.real, B.real, mode="accurate")))
    for z in runs:
        for r in z[1:]:
            assert np.array_equal(r.view(np.uint64), z[0].view(np.uint64))
    assert np.allclose(runs[0][0], A @ B, rtol=1e-12, atol=1e-12)
    assert np.allclose(runs[3][0], A @ A.conj().T, rtol=1e-12, atol=1e-12)


def test_concurrent_products_from_python_threads(rng):
    # several Python threads share the pool and the BLAS limit: every result exact
    cases = [(p, rand_ints(rng, (67, 40), 0, p), rand_ints(rng, (40, 33), 0, p)) for p in (P31, P50, P61, P127)] * 2
    expect = [ref_matmul(a, b, p) for p, a, b in cases]
    got: list = [None] * len(cases)
    errors: list = []

    def work(i):
        p, a, b = cases[i]
        try:
            for _ in range(3):
                got[i] = modlin.matmul(a if p > 2**63 else a.astype(np.int64), b if p > 2**63 else b.astype(np.int64), p)
        except Exception as exc:  # noqa: BLE001  reported below
            errors.append(exc)

    with modlin.limits(threads=2):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    for g, e in zip(got, expect):
        assert np.array_equal(g, e)


# ------------------------------------------------------------------------ the machinery

def test_region_limits_blas_and_restores_once():
    before = _blas_threads()
    with _threads.region(2):
        assert set(_blas_threads()) <= {1}
        with _threads.region(3):  # nested: still one, and not restored by the inner exit
            assert set(_blas_threads()) <= {1}
        assert set(_blas_threads()) <= {1}
    assert _blas_threads() == before
    with _threads.region(1):  # one worker: BLAS keeps its own threads
        assert _blas_threads() == before


def test_pass_gemms_keep_blas_on_one_thread(rng, monkeypatch):
    """The CRT's small GEMMs (the limbs' of an integer result above ``2**63``: results modulo
    ``p`` have none, their sums are loops in one kernel) run with BLAS on one thread even when
    the product's own GEMMs use BLAS' threads (``threads=1``): on BLAS' threads they would leave
    its workers spinning into the next product. Seen from the kernel each GEMM feeds. (The
    residues are one numba pass, without GEMMs.)"""
    from modlin._arith import crt as _crt

    seen = set()
    kernel = _crt._carry

    def spy(*args):
        seen.update(_blas_threads())
        return kernel(*args)

    monkeypatch.setattr(_crt, "_carry", spy)
    a, b = rand_ints(rng, (40, 30), 0, P127), rand_ints(rng, (30, 20), 0, P127)
    with modlin.limits(threads=1):
        got = modlin.intmul(a, b)
    assert np.array_equal(got, a.astype(object).dot(b.astype(object)))
    assert seen == {1}


def test_blas_gemms_keeps_products_off_slabs_on_this_thread_only():
    with modlin.limits(threads=2):
        assert _threads.gemm_workers(2**40, 4096, 64) == 2
        with _threads.blas_gemms():
            assert _threads.gemm_workers(2**40, 4096, 64) == 1
            with _threads.blas_gemms():  # nested: still on, and not turned off by the inner exit
                pass
            assert _threads.gemm_workers(2**40, 4096, 64) == 1
            other = []
            worker = threading.Thread(target=lambda: other.append(_threads.gemm_workers(2**40, 4096, 64)))
            worker.start()
            worker.join()
            assert other == [2]  # another Python thread's products are not affected
        assert _threads.gemm_workers(2**40, 4096, 64) == 2


def test_linalg_products_on_blas_threads_and_powers_as_matmul(rng, monkeypatch):
    # elimination's products never run in slabs; matrix_power's whole-matrix ones as matmul's
    seen = []
    gemm_workers = _threads.gemm_workers
    monkeypatch.setattr(_threads, "gemm_workers",
                        lambda *a, **kw: seen.append(getattr(_threads._local, "blas_gemms", False)) or gemm_workers(*a, **kw))
    for mod in ("_algorithms.rns", "_algorithms.multiword"):
        monkeypatch.setattr(f"modlin.{mod}.gemm_workers", _threads.gemm_workers)
    A = rand_ints(rng, (160, 160), 0, P61)
    with modlin.limits(threads=2):
        det = modlin.linalg.det(A, P61)
        assert seen and all(seen)
        seen.clear()
        power = modlin.linalg.matrix_power(A, 5, P61)
        assert seen and not any(seen)
    assert det == int(flint.nmod_mat(A.tolist(), P61).det())
    assert np.array_equal(power, ref_matmul(ref_matmul(ref_matmul(ref_matmul(A, A, P61), A, P61), A, P61), A, P61))


def test_run_raises_after_every_item_finished():
    done = []

    def fn(i):
        if i == 1:
            raise ZeroDivisionError("slab 1")
        done.append(i)
        return i

    with pytest.raises(ZeroDivisionError, match="slab 1"):
        _threads.run(fn, [0, 1, 2, 3])
    assert sorted(done) == [0, 2, 3]
    assert _threads.run(lambda i: i * i, [3, 1, 2]) == [9, 1, 4]


def test_by_moduli_when_slabs_would_be_thin_and_every_worker_gets_a_modulus():
    from modlin._runtime.calibration import MODULI_SPLIT_ROWS

    assert _threads.by_moduli(MODULI_SPLIT_ROWS * 2 - 1, 2, 2)
    assert not _threads.by_moduli(MODULI_SPLIT_ROWS * 2, 2, 2)  # slabs of MODULI_SPLIT_ROWS rows
    assert not _threads.by_moduli(10, 2, 3)  # a worker without a modulus
    assert not _threads.by_moduli(10, 12, 1)  # one worker: nothing to share
    with modlin.limits(threads=3):
        assert _threads.by_moduli(10, 3) and not _threads.by_moduli(10, 2)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_in_order_consumes_in_order_with_few_waiting(threads, ahead):
    """Every result consumed once, in order, on the calling thread; never more than ``ahead``
    claimed and not yet consumed; the calls spread over the workers (slow ones make the
    caller take later items itself)."""
    import time

    lock, state, callers = threading.Lock(), {"claimed": 0, "consumed": 0, "most": 0}, set()
    me = threading.get_ident()

    def fn(i):
        with lock:
            state["claimed"] += 1
            state["most"] = max(state["most"], state["claimed"] - state["consumed"])
            callers.add(threading.get_ident())
        time.sleep(0.002 if i % 3 else 0.0)
        return i * i

    got = []

    def consume(i, r):
        assert threading.get_ident() == me
        got.append((i, r))
        with lock:
            state["consumed"] += 1

    _threads.in_order(fn, list(range(17)), consume, threads, ahead)
    assert got == [(i, i * i) for i in range(17)]
    assert state["most"] <= ahead
    assert len(callers) <= threads
    if threads > 1 and ahead > 1:
        assert len(callers) > 1


def test_in_order_raises_after_the_workers_stop():
    def fn(i):
        if i == 5:
            raise ZeroDivisionError("item 5")
        return i

    got = []
    with pytest.raises(ZeroDivisionError, match="item 5"):
        _threads.in_order(fn, list(range(12)), lambda i, r: got.append(r), 2, 3)
    assert got == list(range(len(got))) and len(got) <= 5

    def bad_consume(i, r):
        if i == 2:
            raise KeyError("consumer")

    with pytest.raises(KeyError, match="consumer"):
        _threads.in_order(lambda i: i, list(range(12)), bad_consume, 2, 3)
    # inside a pool task it runs on that task's thread alone
    assert _threads.run(lambda k: _collect(k), [0, 1]) == [list(range(6))] * 2


def _collect(_):
    out = []
    _threads.in_order(lambda i: i, list(range(6)), lambda i, r: out.append(r), 2, 2)
    return out


def test_side_by_side_products_each_on_one_blas_thread():
    seen = []

    def call(i):
        seen.append((i, threading.get_ident(), tuple(_blas_threads())))
        return i * i

    calls = [lambda i=i: call(i) for i in range(4)]
    with modlin.limits(threads=2):
        assert _threads.side_by_side(calls, 10**9) == [0, 1, 4, 9]  # in order
        assert len({t for _, t, _ in seen}) == 2 and all(set(b) <= {1} for _, _, b in seen)
        seen.clear()
        assert _threads.side_by_side(calls[:3], 10**9) == [0, 1, 4]  # 3 on 2 workers: in turn
        assert {t for _, t, _ in seen} == {threading.get_ident()}
        assert all(b == tuple(_blas_threads()) for _, _, b in seen)  # on BLAS' own threads
    for threads in (1, 4):  # one worker; more workers than calls (cores left idle): in turn
        with modlin.limits(threads=threads):
            seen.clear()
            assert _threads.side_by_side(calls[:2], 10**9) == [0, 1]
            assert {t for _, t, _ in seen} == {threading.get_ident()}
    with modlin.limits(threads=4):
        seen.clear()
        assert _threads.side_by_side(calls, 10**9) == [0, 1, 4, 9]
        # one call on this thread, the others on the pool's, all with BLAS on one thread
        assert [t for _, t, _ in seen].count(threading.get_ident()) == 1
        assert all(set(b) <= {1} for _, _, b in seen)


def test_each_covers_every_entry_once():
    with modlin.limits(threads=3):
        seen = np.zeros(1000, dtype=int)

        def mark(r):
            seen[r.start:r.stop] += 1
            return len(r)

        sizes = _threads.each(mark, 1000)
    assert len(sizes) == 3 and sum(sizes) == 1000 and (seen == 1).all()
    assert _threads.each(lambda r: len(r), 0) == [0]


def test_workers_small_jobs_threads_one_and_nesting(monkeypatch):
    monkeypatch.setattr(_threads, "MIN_WORK", 100)
    with modlin.limits(threads=4):
        assert _threads.workers(99, 10) == 1  # too small to split
        assert _threads.workers(100, 10) == 4
        assert _threads.workers(100, 2) == 2  # no more parts than there are
        assert _threads.row_workers(100, 8 * 3) == 3
        # deep GEMMs keep BLAS' own threads (concurrent one-thread GEMMs serialize in OpenBLAS)
        assert _threads.gemm_workers(100, 8 * 3, _threads.MAX_SLAB_K) == 3
        assert _threads.gemm_workers(100, 8 * 3, _threads.MAX_SLAB_K + 1) == 1
        # whole GEMMs shared out (a residue number system's moduli): as many workers as GEMMs,
        # whatever the rows; deep ones still on BLAS' threads
        assert _threads.gemm_workers(100, 8, 64, whole=3) == 3
        assert _threads.gemm_workers(100, 8, 64, whole=11) == 4
        assert _threads.gemm_workers(100, 8, _threads.MAX_SLAB_K + 1, whole=11) == 1
        # inside a worker, jobs run where they are: pool tasks never wait on other tasks
        assert _threads.run(lambda _: _threads.workers(100, 10), [0, 1]) == [1, 1]
    with modlin.limits(threads=1):
        assert _threads.workers(10**12, 10) == 1


@pytest.mark.parametrize("n, parts", [(0, 3), (1, 3), (10, 3), (67, 2), (67, 3), (64, 64)])
def test_slabs_partition(n, parts):
    s = _threads.slabs(n, parts)
    assert s[0].start == 0 and s[-1].stop == n
    assert all(a.stop == b.start for a, b in zip(s, s[1:]))
    sizes = [x.stop - x.start for x in s]
    assert max(sizes) - min(sizes) <= 1 and len(s) == max(1, min(parts, n))


# ------------------------------------------------------------------------ BLAS under the limits

def test_blas_caps_nest_and_concur_the_least_wins():
    own = _blas_threads()
    if not own or max(own) < 2:
        pytest.skip("BLAS runs on one thread here")
    with _threads.blas_at_most(2):
        assert _blas_threads() == [min(2, t) for t in own]
        with _threads.blas_at_most(1):
            assert set(_blas_threads()) == {1}
        assert _blas_threads() == [min(2, t) for t in own]
    assert _blas_threads() == own
    # two Python threads whose caps end in either order: BLAS' own count comes back last
    inside, release = threading.Event(), threading.Event()

    def other():
        with _threads.blas_at_most(1):
            inside.set()
            release.wait(5)

    # (OpenBLAS may ignore a count set from another thread: the bookkeeping is checked there)
    t = threading.Thread(target=other)
    with _threads.blas_at_most(2):
        t.start()
        inside.wait(5)
        assert _threads._blas_now[0] == 1  # the other thread's cap is the least
    assert _threads._blas_now[0] == 1 and _threads._caps == {1: 1}  # ours ended first: the other's holds
    release.set()
    t.join()
    assert _threads._blas_now[0] is None and not _threads._caps
    assert _blas_threads() == own


def _gemm_blas_threads(monkeypatch) -> list:
    """The BLAS thread counts seen by every float GEMM of the engines, recorded as they run."""
    seen = []
    real = np.matmul

    def spy(*args, **kw):
        seen.append((args[0].shape, args[1].shape, max(_blas_threads())))
        return real(*args, **kw)

    monkeypatch.setattr(np, "matmul", spy)
    return seen


def test_limits_threads_one_holds_blas_to_one_thread(rng, monkeypatch):
    own = max(_blas_threads() or [1])
    if own < 2:
        pytest.skip("BLAS runs on one thread here")
    monkeypatch.setattr(_threads, "free_cores", lambda: own)  # a quiet machine
    monkeypatch.setattr(_threads, "MIN_WORK", 2**60)  # no slabs: GEMMs on the calling thread
    a = rand_ints(rng, (200, 200), 0, P61)
    seen = _gemm_blas_threads(monkeypatch)
    with modlin.limits(threads=1):
        one = modlin.matmul(a, a, P61)
    assert seen and {t for *_, t in seen} == {1}, seen
    seen.clear()
    with modlin.limits(threads=own):
        assert np.array_equal(modlin.matmul(a, a, P61), one)
    assert {t for *_, t in seen} == {own}, seen
    seen.clear()
    monkeypatch.setattr(_threads, "free_cores", lambda: 1)  # another process holds the other cores
    with modlin.limits(threads=own):
        assert np.array_equal(modlin.matmul(a, a, P61), one)
    assert {t for *_, t in seen} == {1}, seen
    assert max(_blas_threads()) == own  # BLAS' own count is back


def test_default_threads_respect_affinity_and_quota(monkeypatch):
    monkeypatch.delenv("MODLIN_THREADS", raising=False)
    monkeypatch.setattr(_limits, "blas_threads", lambda: 8)
    for cpus, quota, want in [(range(8), None, 8), (range(3), None, 3), (range(8), 2.5, 3), (range(8), 0.5, 1)]:
        _limits.available_cpus.cache_clear()
        monkeypatch.setattr(_limits.os, "sched_getaffinity", lambda pid, c=cpus: set(c))
        monkeypatch.setattr(_limits, "_cgroup_cpus", lambda q=quota: q)
        assert _limits.available_cpus() == min(len(cpus), math.ceil(quota) if quota else 99)
        assert _limits._from_environment().threads == want
    _limits.available_cpus.cache_clear()
    monkeypatch.setenv("MODLIN_THREADS", "5")  # asked for: taken as given
    assert _limits._from_environment().threads == 5


def test_free_cores_counts_the_other_processes_cpu_time(monkeypatch):
    clock, busy, own = [100.0], [50.0], [3.0]
    monkeypatch.setattr(_threads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(_threads.time, "process_time", lambda: own[0])
    monkeypatch.setattr(_threads, "_cpu_seconds", lambda: busy[0])
    monkeypatch.setattr(_threads, "available_cpus", lambda: 4)
    monkeypatch.setattr(_threads, "_cpu_seen", [None])
    assert _threads.free_cores() == 4  # a first reading: no window yet
    clock[0] += 0.1
    busy[0] += 0.3
    assert _threads.free_cores() == 4  # within the window: the reading is kept
    clock[0] += 0.4  # 0.5 s: the machine spent 2.3 s busy, 0.8 of them ours: 3 cores' worth elsewhere
    busy[0] += 2.0
    own[0] += 0.8
    assert _threads.free_cores() == 1
    clock[0] += 1.0  # a second: ours 1.9 s, others 0.1 s
    busy[0] += 2.0
    own[0] += 1.9
    assert _threads.free_cores() == 4
    clock[0] += 1.0  # the others take everything and more: still one core
    busy[0] += 4.0
    assert _threads.free_cores() == 1
    monkeypatch.setattr(_threads, "_cpu_seconds", lambda: None)  # not Linux: every core free
    clock[0] += 1.0
    assert _threads.free_cores() == 4


def test_free_cores_reads_a_busy_neighbour():
    import subprocess
    import sys
    import time

    if _threads._cpu_seconds() is None or _limits.available_cpus() < 2:
        pytest.skip("no /proc/stat or a single core")
    loop = subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 20\n"
                             "while time.monotonic() < end:\n    pass\n"])
    try:
        time.sleep(0.5)
        _threads._cpu_seen[0] = None
        _threads.free_cores()
        time.sleep(_threads.BUSY_WINDOW + 0.3)
        assert _threads.free_cores() <= _limits.available_cpus() - 1
    finally:
        loop.kill()
        loop.wait()
        _threads._cpu_seen[0] = None
