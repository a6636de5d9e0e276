"""The memory budget: ``modlin.limits``, the tile scheduler, and products cut into tiles.

Products are exact whatever the tiling, so every tiled result is compared with
the untiled one and with Python integers; the tilings are found by scanning
budgets, so that 1, 2, a handful and many tiles, k-panels and uneven last tiles
all occur.
"""

from __future__ import annotations

import numpy as np
import pytest

import modlin
from conftest import rand_ints, ref_matmul
from modlin._algorithms import tiles as _tiles
from modlin._planning import tiling as _tiling
from modlin._runtime import limits as _limits, scratch as _scratch


@pytest.fixture(autouse=True)
def _restore_limits():
    """Each test starts from the limits in force and leaves them so."""
    token = _limits._current.set(_limits.current())
    yield
    _limits._current.reset(token)


# ------------------------------------------------------------------------ limits

@pytest.mark.parametrize("text, size", [
    (1024, 1024), ("1024", 1024), ("1.5GiB", 3 * 2**29), ("512 MiB", 2**29), ("2GB", 2 * 10**9),
    ("1e9", 10**9), ("64kib", 2**16), ("3k", 3000), (" 7 B ", 7), ("1TiB", 2**40),
])
def test_parse_size(text, size):
    assert _limits.parse_size(text) == size


@pytest.mark.parametrize("bad, exc", [("", ValueError), ("GiB", ValueError), ("1.5 parsecs", ValueError),
                                      (0, ValueError), (-5, ValueError), ("-1GiB", ValueError),
                                      (True, TypeError), (1.5, TypeError), (None, TypeError)])
def test_parse_size_refuses(bad, exc):
    with pytest.raises(exc, match="memory"):
        _limits.parse_size(bad)


def test_limits_context_manager_and_global_setter():
    before = modlin.limits.current()
    with modlin.limits(memory="64MiB", threads=3, progress=True) as lim:
        now = modlin.limits.current()
        assert (now.memory, now.threads, now.progress) == (2**26, 3, True)
        assert "64 MiB" in repr(lim)
        with modlin.limits(threads=1):  # nested: only what is given changes
            assert modlin.limits.current() == _limits.Limits(2**26, 1, True)
        assert modlin.limits.current() == now
    assert modlin.limits.current() == before
    modlin.limits(memory=12345)  # a plain call sets it at once, for this thread
    assert modlin.limits.current().memory == 12345 and modlin.limits.current().threads == before.threads


@pytest.mark.parametrize("bad", [dict(threads=0), dict(threads=1.5), dict(threads="x"), dict(threads=float("inf")),
                                 dict(progress="maybe"), dict(memory="lots"), dict(memory="1e400GiB")])
def test_limits_refuse_bad_values(bad):
    before = modlin.limits.current()
    with pytest.raises(ValueError):
        modlin.limits(**bad)
    assert modlin.limits.current() == before


def test_limits_from_the_environment(monkeypatch):
    monkeypatch.setenv("MODLIN_MEMORY", "1.5GiB")
    monkeypatch.setenv("MODLIN_THREADS", "5")
    monkeypatch.setenv("MODLIN_PROGRESS", "1")
    assert _limits._from_environment() == _limits.Limits(3 * 2**29, 5, True)
    monkeypatch.setenv("MODLIN_MEMORY", "much")
    with pytest.raises(ValueError, match="MODLIN_MEMORY"):
        _limits._from_environment()
    for var in ("MODLIN_MEMORY", "MODLIN_THREADS", "MODLIN_PROGRESS"):
        monkeypatch.delenv(var)
    lim = _limits._from_environment()
    assert lim.memory == _limits.default_memory() <= _limits.DEFAULT_MEMORY_CAP
    assert lim.threads == _limits.blas_threads() >= 1 and lim.progress is False


# ------------------------------------------------------------------- the scheduler

def test_scheduler_covers_every_entry_once():
    shape = (301, 257, 130)
    ws = lambda mt, kt, nt: 8 * (mt * kt + kt * nt + mt * nt)  # noqa: E731
    cost = lambda mt, kt, nt: mt * kt * nt + 50 * (mt * kt + kt * nt)  # noqa: E731
    seen = set()
    for budget in (10**9, 600_000, 300_000, 150_000, 100_000):
        t = _tiling.choose(shape, ws, budget, cost)
        assert t.peak == ws(*t.tile) <= budget
        hits = np.zeros((shape[0], shape[1], shape[2]), dtype=np.int64)[:, :1, :]
        kcover = np.zeros((shape[0], shape[1], shape[2]), dtype=bool)
        for rows, inner, cols in t.blocks():
            hits[rows, :, cols] += inner.start == 0
            kcover[rows, inner, cols] = True
        assert (hits == 1).all() and kcover.all()
        seen.add(t.count)
    assert len(seen) >= 4 and 1 in seen


def test_scheduler_without_k_panels_and_too_small_budgets():
    ws = lambda mt, kt, nt: 8 * (mt * kt + kt * nt + mt * nt)  # noqa: E731
    cost = lambda mt, kt, nt: float(mt * kt * nt)  # noqa: E731
    t = _tiling.choose((500, 4000, 500), ws, 8 * (64 * 4000 * 2 + 64 * 64), cost, split_k=False)
    assert t.tile[1] == 4000 and t.grid[1] == 1
    with pytest.raises(ValueError, match=r"smallest tile \(64x4000 @ 4000x64\) needs"):
        _tiling.choose((500, 4000, 500), ws, 1000, cost, split_k=False)
    with pytest.raises(ValueError, match=r"too small.*smallest tile \(64x64 @ 64x64\).*modlin.limits"):
        _tiling.choose((500, 4000, 500), ws, 1000, cost)
    # tiny dimensions are their own smallest tiles
    assert _tiling.choose((3, 5, 2), ws, 10**6, cost).tile == (3, 5, 2)


# ------------------------------------------------------------------ tiled products

MODULI = [251, 65521, 2**31 - 1, 2**50 - 27, 2**61 - 1, 2**64 - 59, 2**127 - 1]


def _tilings(p, shape, batch=1):
    """Budgets from the whole product's down to the smallest tile's, one per distinct tiling."""
    pl = modlin.plan(p, *shape)
    out, budget = {}, pl.tiling(shape, batch=batch).peak * 2
    while True:
        try:
            t = pl.tiling(shape, batch=batch, budget=budget)
        except ValueError:
            break
        out.setdefault((t.tile, t.grid), budget)
        budget = int(budget / 1.6)
    return list(out.values())


@pytest.mark.parametrize("p", MODULI, ids=lambda p: f"{p.bit_length()}bit")
def test_tiled_products_equal_untiled(p, rng):
    # RNS tiles carry the CRT's fixed buffers: larger products reach as many tiles
    m, k, n = (301, 257, 130) if p < 2**52 else (601, 257, 330)
    A = rand_ints(rng, (m, k), 0, p)
    B = rand_ints(rng, (k, n), 0, p)
    want = modlin.matmul(A, B, p)
    assert np.array_equal(want[:40].astype(object), ref_matmul(A[:40], B, p))  # the untiled run is exact
    budgets = _tilings(p, (m, k, n))
    counts = set()
    for budget in budgets:
        with modlin.limits(memory=budget):
            counts.add(modlin.plan(p, m, k, n).tiling().count)
            got = modlin.matmul(A, B, p)
        assert got.dtype == want.dtype and np.array_equal(got, want), budget
    assert 1 in counts and max(counts) >= 7 and len(counts) >= 3


@pytest.mark.parametrize("p", [2**31 - 1, 2**50 - 27, 2**61 - 1], ids=lambda p: f"{p.bit_length()}bit")
def test_tiled_worst_case_across_lambda(p):
    """All entries p - 1, k one past a multiword block, cut into k-panels at and off
    the block boundary."""
    pl = modlin.plan(p, 200, 200, 200)
    k = pl.block + 1 if isinstance(pl, modlin.Plan) and pl.block < 4000 else 700
    A = np.full((130, k), p - 1, dtype=np.int64)
    B = np.full((k, 70), p - 1, dtype=np.int64)
    want = ref_matmul(A, B, p)
    for budget in _tilings(p, (130, k, 70)):
        with modlin.limits(memory=budget):
            got = modlin.matmul(A, B, p)
        assert np.array_equal(got.astype(object), want)


@pytest.mark.parametrize("p", [2**31 - 1, 2**61 - 1], ids=lambda p: f"{p.bit_length()}bit")
def test_tiled_stacks_one_d_and_thin(p, rng):
    A = rand_ints(rng, (3, 1, 150, 90), 0, p)
    B = rand_ints(rng, (2, 90, 70), 0, p)
    want = modlin.matmul(A, B, p)
    small = min(_tilings(p, (150, 90, 70)))  # too small for a whole stack of tiles
    with modlin.limits(memory=small):
        assert np.array_equal(modlin.matmul(A, B, p), want)
    with modlin.limits(memory=_tilings(p, (150, 90, 70), batch=6)[-1]):
        assert np.array_equal(modlin.matmul(A, B, p), want)
    v = rand_ints(rng, (90,), 0, p)
    thin = rand_ints(rng, (2000, 90), 0, p)
    with modlin.limits(memory=small):
        assert np.array_equal(modlin.matmul(thin, v, p), modlin.matmul(thin, v[:, None], p)[:, 0])
        assert np.array_equal(modlin.matmul(v, thin.T, p).astype(object), ref_matmul(v[None], thin.T, p)[0])


def test_tiled_inputs_of_every_kind(rng):
    """Float, uint64, object and non-contiguous operands go through the same per-tile
    conversion; inputs are never modified."""
    p = 2**61 - 1
    A = rand_ints(rng, (200, 120), 0, 2**62).astype(np.float64)
    B = rand_ints(rng, (120, 90), 0, 2**64 - 1).astype(np.uint64)
    Bo = (B.astype(object) * 2**70) + 5
    At = np.asfortranarray(A)[:, ::-1]
    copies = [x.copy() for x in (A, B, Bo, At)]
    budget = min(_tilings(p, (200, 120, 90)))
    for x, y in ((A, B), (A, Bo), (At, B)):
        want = ref_matmul(np.array([[int(v) for v in row] for row in x.tolist()], dtype=object), y, p)
        with modlin.limits(memory=budget):
            assert modlin.plan(p, 200, 120, 90).tiling().count > 1
            assert np.array_equal(modlin.matmul(x, y, p).astype(object), want)
    for x, c in zip((A, B, Bo, At), copies):
        assert np.array_equal(x, c)


def test_budget_too_small_for_one_tile():
    A = np.ones((500, 500), dtype=np.int64)
    for p in (2**31 - 1, 2**127 - 1):
        with modlin.limits(memory="16KiB"):
            with pytest.raises(ValueError, match=r"memory budget of 16 KiB is too small.*smallest tile"):
                modlin.matmul(A, A, p)
            with pytest.raises(ValueError, match="too small"):
                modlin.plan(p, 500, 500, 500).explain()


def test_explain_shows_the_tiles():
    pl = modlin.plan(2**31 - 1, 4096, 4096, 4096)
    with modlin.limits(memory="64MiB"):
        t = pl.tiling()
        text = pl.explain()
    assert t.count > 1 and t.peak <= 2**26
    assert f"tiles     : {t.count} tiles of {t.tile[0]}x{t.tile[1]} @ {t.tile[1]}x{t.tile[2]}" in text
    assert "budget 64 MiB" in text
    with modlin.limits(memory="4GiB"):
        assert "1 tile (the whole product)" in modlin.plan(2**61 - 1, 512, 512, 512).explain()


# ------------------------------------------------------------------------ progress

def test_progress_over_tiles(monkeypatch, capsys):
    """With progress on, a product expected to run long shows its tiles on stderr (here
    without tqdm, so on one updating line); short ones and progress off show nothing."""
    import sys

    from modlin._runtime import progress as _progress

    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    A = np.ones((300, 300), dtype=np.int64)
    p = 2**31 - 1
    budget = min(_tilings(p, (300, 300, 300)))
    with modlin.limits(memory=budget, progress=True):
        count = modlin.plan(p, 300, 300, 300).tiling().count
        modlin.matmul(A, A, p)  # far below MIN_SECONDS
        assert capsys.readouterr().err == ""
        monkeypatch.setattr(_progress, "MIN_SECONDS", -1.0)
        monkeypatch.setattr("modlin._runtime.progress.MIN_SECONDS", -1.0)
        C = modlin.matmul(A, A, p)
    err = capsys.readouterr().err
    assert int(C[0, 0]) == 300 and count > 1
    assert err.startswith("\rmodlin.matmul mod a 31-bit p [1/") and err.endswith(f"[{count}/{count}] done\n")
    with modlin.limits(memory=budget, progress=False):
        modlin.matmul(A, A, p)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("p", [2**31 - 1, 2**61 - 1], ids=lambda p: f"{p.bit_length()}bit")
def test_linalg_products_follow_the_budget(p, monkeypatch, rng):
    """The block recursions' products go through the tiles too: same results under a
    budget that cuts them, and the scheduler is asked for every product."""
    import modlin.linalg._pluq as pluq_mod

    monkeypatch.setattr(pluq_mod, "PLUQ_THRESHOLD", 16)  # recurse, so that products happen
    monkeypatch.setattr(pluq_mod, "PLUQ_THRESHOLD_BIG", 16)
    A = rand_ints(rng, (300, 300), 0, p)
    want = modlin.linalg.det(A, p), modlin.linalg.inv(A, p)
    seen = []
    real = _tiling.choose

    def spy(shape, *args, **kw):
        t = real(shape, *args, **kw)
        seen.append(t.count)
        return t

    monkeypatch.setattr("modlin._planning.plan.choose_tiles", spy)
    modlin._planning.plan._tiled.cache_clear()  # tilings cached by an earlier test would not reach the spy
    with modlin.limits(memory="600KiB" if p < 2**52 else "2MiB"):
        got = modlin.linalg.det(A, p), modlin.linalg.inv(A, p)
    assert got[0] == want[0] and np.array_equal(got[1], want[1])
    assert seen and max(seen) > 1


def test_tiled_intmul_is_exact(rng):
    """intmul's residue number systems follow the budget too; k-panels add exactly."""
    from modlin._arith import residues as _residues
    from modlin._arith.integers import max_abs
    from modlin._planning.rnsplan import rns_plan

    cases = [
        (rand_ints(rng, (150, 90), -(2**62), 2**62), rand_ints(rng, (90, 70), -(2**62), 2**62)),
        (rand_ints(rng, (150, 90), 0, 2**64 - 1).astype(np.uint64), rand_ints(rng, (90, 70), 0, 2**40)),
        (rand_ints(rng, (2, 150, 90), -(2**200), 2**200), rand_ints(rng, (90, 70), -(2**200), 2**200)),
        (rand_ints(rng, (150, 90), -(2**20), 2**20), rand_ints(rng, (90, 70), -(2**40), 2**40)),  # int64 result
    ]
    for A, B in cases:
        want = modlin.intmul(A, B)
        assert np.array_equal(want.astype(object), A.astype(object) @ B.astype(object))
        batch = A.size // (150 * 90)
        pl = rns_plan(None, 90 * max_abs(A.astype(object)) * max_abs(B.astype(object)), (150, 90, 70))
        # a 2-D product's tiles read the pieces of object operands made for the bound, held throughout
        held = sum(_residues.Pieces16(x).nbytes() for x in (A, B) if x.dtype == object and batch == 1)
        counts, budget = set(), 2 * pl.tiling((150, 90, 70), batch=batch).peak
        while True:
            try:
                counts.add(pl.tiling((150, 90, 70), batch=batch, budget=budget, held=held).count)
            except ValueError:
                break
            with modlin.limits(memory=budget):
                got = modlin.intmul(A, B)
            assert got.dtype == want.dtype and np.array_equal(got, want), budget
            budget = int(budget / 1.15)
        assert 1 in counts and max(counts) > 2


def test_tiled_single_gemm_intmul(monkeypatch):
    """An intmul exact in float64 GEMMs follows the budget too: output panels and k-panels,
    the partial sums at the contract's edge (k * a_max * b_max = 2**53, every term of one sign)."""
    from modlin._planning import tiling as _tiling

    seen = []
    choose = _tiling.choose
    from modlin._algorithms import products as _products

    monkeypatch.setattr(_products, "choose", lambda *a, **k: seen.append(choose(*a, **k)) or seen[-1])
    k = 256
    A = np.full((2, 150, k), 2**23, dtype=np.int64)
    B = np.full((k, 130), -(2**22), dtype=np.int64)
    A[0, 3, :] = -(2**23)
    A[1, :, 7] = 5
    want = (A.astype(object) @ B.astype(object)).astype(np.int64)
    assert -want.min() == 2**53  # at the bound
    for budget in (None, "1MiB", "400KiB", "200KiB"):
        seen.clear()
        with modlin.limits(memory=budget):
            got = modlin.intmul(A, B)
        assert got.dtype == np.int64 and np.array_equal(got, want), budget
        assert (seen[-1].count > 1) == (budget is not None)
    assert seen[-1].grid[1] > 1  # the smallest budget cut k into panels too
    with modlin.limits(memory="10KiB"), pytest.raises(ValueError, match="smallest tile"):
        modlin.intmul(A[0], B)


# --------------------------------------------------------------------- scratch pool

def test_scratch_is_reused_only_when_nothing_refers_to_it():
    pool = _scratch._Pool()
    a = pool.empty((256, 512), np.float64)  # 1 MiB
    view = a.reshape(-1)[5:].view(np.int64)  # derived twice: still refers to the buffer
    del a
    b = pool.empty((256, 512), np.float64)
    assert not np.shares_memory(view, b)
    address = view.__array_interface__["data"][0] - 5 * 8
    del view
    c = pool.empty((512, 256), np.int64)  # the same size: the idle buffer comes back
    assert c.__array_interface__["data"][0] == address
    assert not np.shares_memory(b, c)


def test_small_scratch_is_plain_memory():
    pool = _scratch._Pool()
    a = pool.empty((100, 10), np.float64)
    assert a.shape == (100, 10) and a.flags.c_contiguous and pool.held_bytes() == 0


def test_scratch_pool_holds_its_buffers_while_a_product_runs(monkeypatch):
    # a product whose first stage runs longer than the decay without scratch (ozaki's scales)
    # still finds the buffers the previous product left
    import time

    monkeypatch.setattr(_scratch, "POOL_DECAY", 0.1)
    pool = _scratch._Pool()
    with modlin.limits(memory="4MiB"):
        with pool.holding():
            a, b = pool.empty((2**17,), np.float64), pool.empty((2**17,), np.float64)  # 1 MiB each
            del a, b  # idle: the share is 1 MiB
            time.sleep(0.4)
            assert pool.held_bytes() == 2 * 2**20  # no decay inside
        for _ in range(100):  # after it, the decay trims to the share
            if pool.held_bytes() == 2**20:
                break
            time.sleep(0.05)
        assert pool.held_bytes() == 2**20


def test_tile_loop_drops_each_panel_before_the_next(rng):
    # run() must not hold the previous k-panel's part (or the previous tile's sum) while the
    # next is made: their scratch would not be idle, and the pool would map fresh memory
    import weakref

    tiling = _tiling.Tiling((4, 6, 4), (2, 2, 2), 0, 1)
    alive = []

    class Part:
        pass

    def product(rows, inner, cols):
        assert sum(r() is not None for r in alive) == (inner.start > 0)  # only the tile's running sum
        p = Part()
        alive.append(weakref.ref(p))
        return p

    _tiles.drive(tiling, product, add=lambda acc, part: acc, finish=lambda rows, cols, acc: None)
    assert len(alive) == tiling.count


def test_scratch_pool_keeps_the_budget_then_a_share_of_it(monkeypatch):
    import time

    monkeypatch.setattr(_scratch, "POOL_DECAY", 0.2)
    pool = _scratch._Pool()
    with modlin.limits(memory="4MiB"):  # keeps at most 4 MiB idle, then 1 MiB
        held = [pool.empty((2**17,), np.float64) for _ in range(5)]  # 1 MiB each
        assert pool.idle_bytes() == 0 and pool.held_bytes() == 5 * 2**20
        del held  # as they die, the idle ones beyond the budget are freed
        assert pool.idle_bytes() == pool.held_bytes() == 4 * 2**20
        again = [pool.empty((2**17,), np.float64) for _ in range(4)]  # the next product finds them
        assert pool.idle_bytes() == 0 and pool.held_bytes() == 4 * 2**20
        del again
        time.sleep(0.1)  # within the decay, a death resets it
        last = pool.empty((2**17,), np.float64)
        del last
        time.sleep(0.15)
        assert pool.held_bytes() == 4 * 2**20
        for _ in range(100):  # then the background thread frees those beyond the share
            if pool.held_bytes() == 2**20:
                break
            time.sleep(0.05)
        assert pool.idle_bytes() == pool.held_bytes() == 2**20
        assert pool._decayer is None


def test_scratch_pool_frees_idle_buffers_before_taking_fresh_memory():
    pool = _scratch._Pool()
    with modlin.limits(memory="1GiB"):
        small = pool.empty((2**17,), np.float64)
        del small  # 1 MiB idle, within the share
        assert pool.idle_bytes() == 2**20
        big = pool.empty((2**20,), np.float64)  # does not fit the idle one: it goes first
        assert pool.held_bytes() == big.nbytes == 2**23
        del big
        again = pool.empty((2**20 - 5,), np.float64)  # fits the idle buffer: nothing new
        assert pool.held_bytes() == 2**23 and again.size == 2**20 - 5


def test_scratch_under_concurrent_threads():
    import threading

    pool = _scratch._Pool()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(40):
            n = int(rng.integers(2**17, 2**19))  # 1-4 MiB of int64
            a = pool.empty((n,), np.int64)
            a[:] = seed
            b = pool.empty((n,), np.int64)
            b[:] = -seed
            if not (a == seed).all() or not (b == -seed).all():
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_products_reuse_scratch_and_stay_exact(rng):
    from modlin import gaussian

    p = 2**31 - 1
    a, b = rng.integers(0, p, (70, 90)), rng.integers(0, p, (90, 60))
    first = modlin.matmul(a, b, p)
    again = modlin.matmul(a, b, p)  # on the first product's scratch, now idle
    assert np.array_equal(first, ref_matmul(a, b, p)) and np.array_equal(first, again)
    m = 1048601  # 1 mod 4
    parts = [rng.integers(0, m, (40, 50)) for _ in range(2)], [rng.integers(0, m, (50, 30)) for _ in range(2)]
    one = gaussian.matmul(*parts, m, algorithm="2m")
    two = gaussian.matmul(*parts, m, algorithm="2m")
    assert all(np.array_equal(u, v) for u, v in zip(one, two))
    assert not np.shares_memory(one[0], two[0]) and not np.shares_memory(first, again)


def test_empty_scratch_takes_nothing_from_the_pool():
    pool = _scratch._Pool()
    for shape, dtype in (((0,), np.float64), ((3, 0), np.int64), ((0, 0, 2), np.int32)):
        a = pool.empty(shape, dtype)
        assert a.shape == shape and a.dtype == dtype
    assert pool.held_bytes() == 0


def test_tiled_python_ints_are_converted_once(rng, monkeypatch):
    """Operands of Python ints (~100 ns an entry to convert, under the GIL) are converted
    once however many tiles read them: ``A`` block by block of rows, each kept for its row
    of tiles, ``B`` whole and kept when the tiling says so (``Tiling.kept``); the result
    is exact, equal to the untiled one, and the working memory (less the result's ints)
    stays within the modelled peak."""
    import sys

    from conftest import traced
    from modlin._arith import residues as _residues

    p = 2**127 - 1
    m, k, n = 400, 300, 500
    A, B = rand_ints(rng, (m, k), -p, 2 * p), rand_ints(rng, (k, n), 0, p)  # some unreduced
    A[0, 0], B[-1, -1] = p - 1, p - 1
    want = modlin.matmul(A, B, p)
    assert np.array_equal(want[:30], ref_matmul(A[:30], B, p))
    converted = []
    real = _residues.object_pieces

    def spy(x, H):
        converted.append(x.size)
        return real(x, H)

    monkeypatch.setattr(_residues, "object_pieces", spy)  # read by the conversions at call time
    pl = modlin.plan(p, m, k, n)
    kinds, reduced = set(), A % p
    for budget in (12 << 20, 8 << 20, 5 << 20):
        with modlin.limits(memory=budget):
            t = pl.tiling((m, k, n), objects=(True, True))
            assert t.count > 1 and t.grid[1] == 1 and t.peak <= budget
            kinds.add(t.kept > 0)
            converted.clear()
            got = modlin.matmul(A, B, p)
            assert np.array_equal(got, want)
            # a block of A with unreduced entries is converted again after its lift (the general path)
            assert sum(converted) <= 2 * m * k + (k * n if t.kept else t.grid[0] * k * n)
            if t.kept:
                assert "B converted once" in t.describe()
                got, peak = traced(lambda: modlin.matmul(reduced, B, p))
                result = got.nbytes + sum(sys.getsizeof(v) for v in got.flat)
                assert peak - result <= 1.05 * t.peak
    assert True in kinds


@pytest.mark.parametrize("p, shape, sizes", [(2**61 - 1, (150, 3000, 120), (4, 3)), (2**127 - 1, (90, 1500, 70), (4, 3)),
                                             (None, (80, 2000, 60), (5.25, 5))])
def test_rns_k_panels_within_the_budget(p, shape, sizes, rng, monkeypatch):
    """An RNS tile cut into k-panels adds each panel's residues into padded int32 rows that
    its one CRT reads as they are (no float64 copy of the tile's ``N`` residues, which used to
    be made), written into the result itself where it is int64; ``intmul``'s tiles read
    blocks of the pieces it made for its bound (it used to convert them again, and the
    pieces it had made were beyond the budget). The results are exact and equal to the
    untiled ones, and the working memory (beyond the result and its Python ints) stays
    within the budget."""
    import sys

    from conftest import traced

    m, k, n = shape
    big = p is None or p > 2**64
    lo, hi = (-(2**70), 2**70) if p is None else (0, p)
    A, B = (rand_ints(rng, s, lo, hi) if big else rng.integers(lo, hi, s) for s in ((m, k), (k, n)))
    A[0, :], B[:, -1] = hi - 1, hi - 1  # worst case: the largest entries in one row and column
    product = (lambda: modlin.intmul(A, B)) if p is None else (lambda: modlin.matmul(A, B, p))
    want = product()
    exact = A[:4].astype(object) @ B.astype(object)
    assert np.array_equal(want[:4], exact if p is None else exact % p)
    calls = {"reconstruct": 0, "reduce_residues": 0, "pieces_of": 0}
    from modlin._algorithms import rns as _rns
    from modlin._arith import crt as _crt, residues as _residues

    # each spied on in the module that looks it up
    where = {"reconstruct": _crt, "reduce_residues": _rns, "pieces_of": _residues}
    for name in calls:
        real = getattr(where[name], name)
        monkeypatch.setattr(where[name], name, lambda *a, _real=real, _name=name, **kw: calls.__setitem__(
            _name, calls[_name] + 1) or _real(*a, **kw))
    for budget in (int(size * 2**20) for size in sizes):  # k-panels; and uneven row tiles at the smaller
        with modlin.limits(memory=budget):
            calls.update(reduce_residues=0, pieces_of=0)
            got, peak = traced(product)
            assert np.array_equal(got, want)
            assert calls["reduce_residues"] > 2  # k-panels, each added into the tile's residues
            if p is None:  # A's and B's pieces, made once for the bound, are the tiles' too (traced calls twice)
                assert calls["pieces_of"] == 2 * 2
            result = got.nbytes + (sum(sys.getsizeof(v) for v in got.flat) if got.dtype == object else 0)
            assert peak - result <= budget
    assert calls["reconstruct"] == 0
    if p is None:  # a budget that cannot hold the pieces beside the smallest tile says so
        with modlin.limits(memory=2 << 20), pytest.raises(ValueError, match=r"too small.*needs.*includes the "
                                                                          r"[0-9.]+ MiB of the operands' 16-bit pieces"):
            product()
