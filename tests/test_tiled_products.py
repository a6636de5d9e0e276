"""``modlin.ozaki`` and ``modlin.gaussian`` under the memory budget: the same tile scheduler
as ``modlin.matmul``, results unchanged by the tiling.

Ozaki results must keep every bit (the residues are those of one integer matrix, and
each entry is rounded from them alone); Gaussian results are exact residues. Every
tiled result is compared with the untiled run and with an exact oracle (Python
integers); budgets are scanned from the whole product's down to the smallest tile's,
so that 1, 2, 7 or more tiles, k-panels and uneven last tiles all occur.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_ozaki import gemmul8

import modlin
import modlin._algorithms.gaussian
from conftest import budgets, rand_ints, same_bits, traced
from modlin import gaussian, ozaki
from modlin._algorithms import ozaki_tiles
from modlin._engines import threads as _threads
from modlin._runtime import limits as _limits


@pytest.fixture(autouse=True)
def _restore_limits():
    token = _limits._current.set(_limits.current())
    yield
    _limits._current.reset(token)



# ---------------------------------------------------------------------------- ozaki

def _ozaki_tiling(fn, a, b, kw):
    """The tiling ``fn`` (an ozaki function) uses for ``a`` (and ``b``) under the budget in force."""
    complex_ = fn in (ozaki.zgemm, ozaki.zherk)
    symmetric = fn in (ozaki.dsyrk, ozaki.zherk)
    kind = "syrk" if fn is ozaki.dsyrk else ("complex" if complex_ else "real")
    shape = (a.shape[-2], a.shape[-1], a.shape[-2] if symmetric else b.shape[-1])
    mods = ozaki._resolve(kind, kw.get("engine", "auto"), kw.get("moduli"), kw.get("algorithm", "auto"),
                          k=shape[1], spread=ozaki._default_spread(kw.get("moduli"), a, b))
    return lambda: ozaki_tiles.product_tiling(mods, complex_, shape, kw.get("mode", "fast"), symmetric)[0]


def _ozaki_case(rng, fn, m, k, n, phi=1.0):
    complex_ = fn in (ozaki.zgemm, ozaki.zherk)
    a = gemmul8(rng, (m, k), phi, complex_)
    b = None if fn in (ozaki.dsyrk, ozaki.zherk) else gemmul8(rng, (k, n), phi, complex_)
    return a, b


def _call(fn, a, b, **kw):
    return fn(a, **kw) if b is None else fn(a, b, **kw)


def _check_ozaki_across_budgets(fn, a, b, most=7, **kw):
    want = _call(fn, a, b, **kw)
    counts = set()
    for budget, t in budgets(_ozaki_tiling(fn, a, b, kw)):
        with modlin.limits(memory=budget):
            got = _call(fn, a, b, **kw)
        counts.add(t.count)
        assert same_bits(got, want), (fn.__name__, kw, t.tile, t.grid)
    assert 1 in counts and any(1 < c <= 4 for c in counts) and max(counts) >= most, counts
    return want


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("fn, kw", [(ozaki.dgemm, {}), (ozaki.zgemm, {}), (ozaki.zgemm, {"algorithm": "3m"}),
                                    (ozaki.zgemm, {"engine": "int8", "moduli": 18, "algorithm": "hybrid"}),
                                    (ozaki.dsyrk, {}), (ozaki.zherk, {}),
                                    (ozaki.zherk, {"engine": "int8", "algorithm": "4m", "moduli": 16})],
                         ids=["dgemm", "zgemm", "zgemm-3m", "zgemm-int8-hybrid", "dsyrk", "zherk", "zherk-int8-4m"])
def test_ozaki_bit_identical_across_budgets(fn, kw, mode, rng):
    a, b = _ozaki_case(rng, fn, 301, 150, 230, phi=2.0)
    _check_ozaki_across_budgets(fn, a, b, mode=mode, **kw)


@pytest.mark.parametrize("fn", [ozaki.dgemm, ozaki.zgemm, ozaki.dsyrk, ozaki.zherk])
def test_ozaki_tiled_integers_match_the_oracle(fn, rng):
    """Small integers: the emulation is exact, so every tiling gives Python's exact product."""
    complex_ = fn in (ozaki.zgemm, ozaki.zherk)
    a = rand_ints(rng, (200, 130), -(2**20), 2**20).astype(np.float64)
    if complex_:
        a = a + 1j * rand_ints(rng, (200, 130), -(2**20), 2**20).astype(np.float64)
    b = None
    if fn in (ozaki.dgemm, ozaki.zgemm):
        b = rand_ints(rng, (130, 150), -(2**20), 2**20).astype(np.float64) * (1 - 1j if complex_ else 1)
    bo = a.conj().T if b is None else b
    exact = np.array([[sum(complex(x) * complex(y) for x, y in zip(row, col)) if complex_ else
                       float(sum(int(x) * int(y) for x, y in zip(row, col))) for col in bo.T.tolist()]
                      for row in a.tolist()])
    if complex_:  # every part below 2**48: exact in float64, however Python summed it
        exact = exact.astype(np.complex128)
    got = _check_ozaki_across_budgets(fn, a, b, most=4)
    assert np.array_equal(got, exact)


def test_ozaki_tiled_alpha_beta_inf_nan_and_stacks(rng):
    a, b = _ozaki_case(rng, ozaki.zgemm, 200, 90, 170)
    a[3, 5] = np.inf
    a[150, 0] = np.nan
    b[7, 100] = -np.inf
    c = gemmul8(rng, (200, 170), 1.0, True)
    kw = dict(alpha=1.5 - 2j, beta=0.25 + 1j, C=c)
    want = ozaki.zgemm(a, b, **kw)
    assert np.isnan(want[150]).all() and not np.isfinite(want[:, 100]).any()
    # the IEEE lines and the BLAS scalars as on the whole result
    assert same_bits(want[:100, :90], (1.5 - 2j) * ozaki.zgemm(a, b)[:100, :90] + (0.25 + 1j) * c[:100, :90])
    for budget, t in budgets(_ozaki_tiling(ozaki.zgemm, a, b, {})):
        with modlin.limits(memory=budget):
            assert same_bits(ozaki.zgemm(a, b, **kw), want), t.grid
    # dsyrk with a NaN row, alpha and beta, lower triangle
    x, _ = _ozaki_case(rng, ozaki.dsyrk, 200, 90, 200)
    x[60, 3] = np.nan
    s = gemmul8(rng, (200, 200), 1.0)
    want = ozaki.dsyrk(x, alpha=-0.5, beta=2.0, C=s, lower=True)
    for budget, t in budgets(_ozaki_tiling(ozaki.dsyrk, x, None, {})):
        with modlin.limits(memory=budget):
            assert same_bits(ozaki.dsyrk(x, alpha=-0.5, beta=2.0, C=s, lower=True), want), t.grid
    # stacks broadcast, 1-D operands
    A = gemmul8(rng, (3, 1, 130, 70), 1.0)
    B = gemmul8(rng, (2, 70, 90), 1.0)
    v = gemmul8(rng, (70,), 1.0)
    want = ozaki.dgemm(A, B), ozaki.dgemm(A, v), ozaki.dgemm(v, B)
    budget = budgets(_ozaki_tiling(ozaki.dgemm, A[0, 0], B[0], {}))[-1][0]
    with modlin.limits(memory=budget):
        got = ozaki.dgemm(A, B), ozaki.dgemm(A, v), ozaki.dgemm(v, B)
    assert all(same_bits(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("fn, kw", [(ozaki.zgemm, {}), (ozaki.dgemm, {"mode": "accurate"}),
                                    (ozaki.zgemm, {"engine": "int8"}), (ozaki.zherk, {}),
                                    (ozaki.zgemm, {"algorithm": "4m"})],
                         ids=["zgemm", "dgemm-accurate", "zgemm-int8", "zherk", "zgemm-4m"])
def test_ozaki_working_memory_within_the_model(fn, kw, rng, monkeypatch):
    """The workspace model bounds what the product allocates beyond its operands and result
    (numpy's allocations, traced), for every tiling, a modulus' GEMMs side by side on two
    threads however small."""
    monkeypatch.setattr(_threads, "MIN_WORK", 0)
    a, b = _ozaki_case(rng, fn, 260, 200, 230)
    for budget, t in budgets(_ozaki_tiling(fn, a, b, kw))[1:]:
        with modlin.limits(memory=budget, threads=2):
            c, peak = traced(lambda: _call(fn, a, b, **kw))
        assert peak - c.nbytes <= t.peak <= budget, (t.grid, peak - c.nbytes, t.peak)


def test_ozaki_budget_too_small():
    a = np.ones((300, 300))
    with modlin.limits(memory="64KiB"):
        for call in (lambda: ozaki.dgemm(a, a), lambda: ozaki.zherk(a + 0j)):
            with pytest.raises(ValueError, match=r"budget of 64 KiB is too small.*smallest tile \(64x64 @ 64x64\)"):
                call()


def test_ozaki_progress(monkeypatch, capsys, rng):
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr("modlin._runtime.progress.MIN_SECONDS", -1.0)
    a, b = _ozaki_case(rng, ozaki.zgemm, 200, 64, 200)
    budget, t = budgets(_ozaki_tiling(ozaki.zgemm, a, b, {}))[-1]
    with modlin.limits(memory=budget, progress=True):
        ozaki.zgemm(a, b)
    err = capsys.readouterr().err
    assert err.startswith("\rmodlin.ozaki product [1/") and err.endswith(f"[{t.count}/{t.count}] done\n")


# ---------------------------------------------------------------------------- gaussian

def _gauss_tiling(m, alg, shape, batch=1):
    pl = modlin.plan(m, *shape)
    words = alg == "2m" and isinstance(pl, modlin.Plan)
    return lambda: modlin._algorithms.gaussian.gauss_tiling(pl, alg, words, shape, batch)


def _ref_gauss(ar, ai, br, bi, m):
    def mm(x, y):
        return x.astype(object) @ y.astype(object)
    return (mm(ar, br) - mm(ai, bi)) % m, (mm(ar, bi) + mm(ai, br)) % m


M21 = 2**21 - 19  # the largest 21-bit prime 1 (mod 4): one GEMM per real product at these k


@pytest.mark.parametrize("m, alg", [(M21, "2m"), (M21, "3m"), (M21, "4m"),
                                    (221, "2m"), (2**31 - 1, "3m"), (2**50 - 27, "auto"),
                                    (65537 * 257, "2m")],
                         ids=["21bit-2m", "21bit-3m", "21bit-4m", "221-2m", "31bit-3m", "50bit-auto", "composite-2m"])
def test_gaussian_tiled_equal_untiled_and_exact(m, alg, rng):
    ar, ai = rand_ints(rng, (230, 150), 0, m), rand_ints(rng, (230, 150), 0, m)
    br, bi = rand_ints(rng, (150, 170), 0, m), rand_ints(rng, (150, 170), 0, m)
    ar[:3], bi[:, :3] = m - 1, m - 1  # worst-case lines
    alg_used = gaussian._choose(alg, m)
    want = gaussian.matmul((ar, ai), (br, bi), m, algorithm=alg)
    ref = _ref_gauss(ar, ai, br, bi, m)
    assert all(np.array_equal(w.astype(object), r) for w, r in zip(want, ref))
    counts = set()
    for budget, t in budgets(_gauss_tiling(m, alg_used, (230, 150, 170))):
        with modlin.limits(memory=budget):
            got = gaussian.matmul((ar, ai), (br, bi), m, algorithm=alg)
        counts.add(t.count)
        assert all(g.dtype == np.int64 and np.array_equal(g, w) for g, w in zip(got, want)), t.grid
    assert 1 in counts and any(1 < c <= 4 for c in counts) and max(counts) >= 7, counts


def test_gaussian_tiled_worst_case_stacks_and_vectors(rng):
    m = M21
    A = np.full((150, 300), (m - 1) * (1 + 1j))
    B = np.full((300, 130), (m - 1) * (1 - 1j))
    want = gaussian.matmul(A, B, m)
    assert int(want[0][0, 0]) == (2 * 300 * (m - 1) ** 2) % m and int(want[1][0, 0]) == 0
    small = budgets(_gauss_tiling(m, "2m", (150, 300, 130)))[-1][0]
    with modlin.limits(memory=small):
        got = gaussian.matmul(A, B, m)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    # stacks, tiled as a whole or matrix by matrix; 1-D operands
    Ar = rand_ints(rng, (3, 1, 120, 80), 0, m), rand_ints(rng, (3, 1, 120, 80), 0, m)
    Br = rand_ints(rng, (2, 80, 90), 0, m), rand_ints(rng, (2, 80, 90), 0, m)
    v = rand_ints(rng, (80,), 0, m), rand_ints(rng, (80,), 0, m)
    cases = [(Ar, Br), (Ar, v), (v, Br), (v, v)]
    wants = [gaussian.matmul(x, y, m) for x, y in cases]
    for budget in (small, budgets(_gauss_tiling(m, "2m", (120, 80, 90), batch=6))[-1][0]):
        with modlin.limits(memory=budget):
            for (x, y), w in zip(cases, wants):
                g = gaussian.matmul(x, y, m)
                assert all(np.array_equal(gi, wi) for gi, wi in zip(g, w))
    r = _ref_gauss(v[0][None], v[1][None], v[0][:, None], v[1][:, None], m)
    assert (int(wants[3][0]), int(wants[3][1])) == (r[0][0, 0], r[1][0, 0])


def test_gaussian_working_memory_within_the_model(rng):
    m = M21
    a = rand_ints(rng, (260, 200), 0, m), rand_ints(rng, (260, 200), 0, m)
    b = rand_ints(rng, (200, 230), 0, m), rand_ints(rng, (200, 230), 0, m)
    for alg in ("2m", "3m"):
        for budget, t in budgets(_gauss_tiling(m, alg, (260, 200, 230)))[1::2]:
            with modlin.limits(memory=budget):
                (re, im), peak = traced(lambda: gaussian.matmul(a, b, m, algorithm=alg))
            assert peak - re.nbytes - im.nbytes <= t.peak <= budget, (alg, t.grid, peak, t.peak)


def test_gaussian_budget_too_small():
    with modlin.limits(memory="64KiB"):
        with pytest.raises(ValueError, match=r"budget of 64 KiB is too small.*smallest tile \(64x64 @ 64x64\)"):
            gaussian.matmul(np.ones((300, 300)) * (1 + 1j), np.ones((300, 300)) * 1j, 13)


def _rank_k_tiling(m, alg, real, n, k):
    pl = modlin.plan(m, n, k, n)
    words = alg == "2m" and isinstance(pl, modlin.Plan) and not real
    from modlin._planning.tiling import square

    return lambda: square(modlin._algorithms.gaussian.gauss_tiling(pl, alg, words, (n, k, n), 1, extra=4))


@pytest.mark.parametrize("m, alg, names", [
    (M21, "2m", "herk her2k syrk syr2k syrk-real syr2k-real"), (M21, "3m", "herk syr2k"),
    (2**31 - 1, "4m", "her2k syrk"), (2**50 - 27, "2m", "herk syr2k-real")],
    ids=["21bit-2m", "21bit-3m", "31bit-4m", "50bit-2m"])
def test_gaussian_rank_k_tiled_equal_untiled_and_exact(m, alg, names, rng):
    n, k = 160, 150
    a = rand_ints(rng, (n, k), 0, m), rand_ints(rng, (n, k), 0, m)
    b = rand_ints(rng, (n, k), 0, m), rand_ints(rng, (n, k), 0, m)
    a[0][:2] = m - 1
    x, y = a[0] - 7, b[1] + 3  # real operands, not reduced
    calls = {
        "herk": lambda: gaussian.herk(a, m, algorithm=alg),
        "her2k": lambda: gaussian.her2k(a, b, m, algorithm=alg),
        "syrk": lambda: gaussian.syrk(a, m, algorithm=alg),
        "syr2k": lambda: gaussian.syr2k(a, b, m, algorithm=alg),
        "syrk-real": lambda: gaussian.syrk(x, m, algorithm=alg),
        "syr2k-real": lambda: gaussian.syr2k(x, y, m, algorithm=alg),
    }
    r = slice(0, 12)  # the oracle checks a band of rows: Python integers are slow
    conj = (a[0].T, (m - a[1].T) % m)
    conj_b = (b[0].T, (m - b[1].T) % m)

    def add(p, q):
        return tuple((u.astype(object) + v) % m for u, v in zip(p, q))

    def xo(u):
        return u.astype(object)

    refs = {
        "herk": _ref_gauss(a[0][r], a[1][r], *conj, m),
        "her2k": add(_ref_gauss(a[0][r], a[1][r], *conj_b, m), _ref_gauss(b[0][r], b[1][r], *conj, m)),
        "syrk": _ref_gauss(a[0][r], a[1][r], a[0].T, a[1].T, m),
        "syr2k": add(_ref_gauss(a[0][r], a[1][r], b[0].T, b[1].T, m), _ref_gauss(b[0][r], b[1][r], a[0].T, a[1].T, m)),
        "syrk-real": (xo(x[r]) @ xo(x.T)) % m,
        "syr2k-real": (xo(x[r]) @ xo(y.T) + xo(y[r]) @ xo(x.T)) % m,
    }
    for name in names.split():
        want = calls[name]()
        ref = refs[name]
        if name.endswith("real"):
            assert np.array_equal(want[r].astype(object), ref), name
        else:
            assert all(np.array_equal(w[r].astype(object), v) for w, v in zip(want, ref)), name
        counts = set()
        for budget, t in budgets(_rank_k_tiling(m, gaussian._choose(alg, m), name.endswith("real"), n, k)):
            with modlin.limits(memory=budget):
                got = calls[name]()
            counts.add(t.grid)
            got, w = (got, want) if name.endswith("real") else (np.stack(got), np.stack(want))
            assert np.array_equal(got, w), (name, t.grid)
        assert (1, 1, 1) in counts and len(counts) >= 3 and max(g[0] * g[1] for g in counts) >= 3, counts


def test_gaussian_rank_k_stacks(rng):
    m = M21
    A = rand_ints(rng, (2, 150, 90), 0, m), rand_ints(rng, (2, 150, 90), 0, m)
    B = rand_ints(rng, (150, 90), 0, m), rand_ints(rng, (150, 90), 0, m)
    want = gaussian.her2k(A, B, m), gaussian.syrk(tuple(x[1] for x in A), m)
    budget = budgets(_rank_k_tiling(m, "2m", False, 150, 90))[-1][0]
    with modlin.limits(memory=budget):
        got = gaussian.her2k(A, B, m), gaussian.syrk(tuple(x[1] for x in A), m)
    assert all(np.array_equal(np.stack(g), np.stack(w)) for g, w in zip(got, want))


# ---------------------------------------------------------------------------- gaussian.intmul

def _intmul_tiling(a, b, engine="fp64", batch=1):
    """The tiling ``gaussian.intmul(a, b)`` uses under the budget in force, for ``(real, imag)``
    pairs of integer matrices (one matrix of a stack, ``batch`` at once)."""
    (mm, k), n = a[0].shape[-2:], b[0].shape[-1]
    amax = sum(max(abs(int(v)) for v in x.ravel()) for x in a)
    bmax = sum(max(abs(int(v)) for v in x.ravel()) for x in b)
    bound = k * amax * bmax
    tile = modlin._algorithms.gaussian.ExactTile(*modlin._algorithms.gaussian.intmul_moduli(bound, k, engine), (mm, k, n), engine, bound >= 2**63)
    pieces = max(4, max(amax, bmax).bit_length() // 16 + 1)
    return lambda: tile.tiling((mm, k, n), batch, pieces)


def _pair_oracle(a, b, rows, cols):
    """``a @ b`` of Gaussian matrices as ``(real, imag)`` pairs of Python ints, entry by entry
    over ``rows`` x ``cols`` (nothing of modlin's, nor NumPy's arithmetic)."""
    ar, ai = (x.tolist() for x in a)
    br, bi = (x.T.tolist() for x in b)
    return ([[sum(x * y for x, y in zip(ar[i], br[j])) - sum(x * y for x, y in zip(ai[i], bi[j])) for j in cols]
             for i in rows],
            [[sum(x * y for x, y in zip(ar[i], bi[j])) + sum(x * y for x, y in zip(ai[i], br[j])) for j in cols]
             for i in rows])


def _check_intmul_across_budgets(a, b, engine="fp64", most=7):
    want = gaussian.intmul(a, b, engine=engine)
    counts, grids = set(), set()
    for budget, t in budgets(_intmul_tiling(a, b, engine), step=1.25):  # fine enough to meet 2 tiles
        with modlin.limits(memory=budget):
            got = gaussian.intmul(a, b, engine=engine)
        counts.add(t.count)
        grids.add(t.grid)
        assert all(g.dtype == w.dtype and np.array_equal(g, w) for g, w in zip(got, want)), (engine, t.grid)
    assert 1 in counts and 2 in counts and max(counts) >= most, counts
    assert any(g[1] > 1 for g in grids), grids  # k-panels, added exactly
    return want


@pytest.mark.parametrize("engine", ["fp64", "int8"])
@pytest.mark.parametrize("bits", [20, 62, 100])
def test_gaussian_intmul_tiled_equal_untiled_and_exact(engine, bits, rng):
    # no tile size divides them all (uneven last tiles), and k long enough that every case meets
    # k-panels before the budgets run out (the CRT's scratch, smaller since its chunks shrank,
    # had left 230 x 150 x 170 at 100 bits without them)
    m, k, n = 130, 350, 110
    lo, hi = -(2**bits), 2**bits - 1
    a = rand_ints(rng, (m, k), lo, hi), rand_ints(rng, (m, k), lo, hi)
    b = rand_ints(rng, (k, n), lo, hi), rand_ints(rng, (k, n), lo, hi)
    # worst-case lines: the largest magnitudes of both signs, meeting in one entry
    a[0][0], a[1][0], b[0][:, 0], b[1][:, 0] = lo, hi, lo, lo
    a[0][-1], a[1][-1], b[0][:, -1], b[1][:, -1] = hi, lo, hi, lo
    if bits < 62:
        a, b = tuple(x.astype(np.int64) for x in a), tuple(x.astype(np.int64) for x in b)
    before = [x.copy() for x in (*a, *b)]
    want = _check_intmul_across_budgets(a, b, engine)
    assert all(np.array_equal(x, y) for x, y in zip(before, (*a, *b)))  # the operands are left alone
    assert want[0].dtype == (np.int64 if bits < 31 else object)
    obj = [tuple(x.astype(object) for x in p) for p in (a, b)]
    assert np.array_equal(want[0], obj[0][0] @ obj[1][0] - obj[0][1] @ obj[1][1])
    assert np.array_equal(want[1], obj[0][0] @ obj[1][1] + obj[0][1] @ obj[1][0])
    rows, cols = [0, 1, 117, m - 1], [0, 64, 100, n - 1]
    re, im = _pair_oracle(a, b, rows, cols)
    assert want[0][np.ix_(rows, cols)].tolist() == re and want[1][np.ix_(rows, cols)].tolist() == im
    assert re[0][0] == k * (lo * lo - hi * lo) and im[-1][-1] == k * 2 * hi * lo  # the extremes, of both signs


def test_gaussian_intmul_tiled_thin_wide_stacks_and_vectors(rng):
    big = 2**70
    # thin and wide: a single row or column of output, long k
    for m, k, n in ((1, 700, 300), (300, 700, 1), (3, 40, 600)):
        a = rand_ints(rng, (m, k), -big, big), rand_ints(rng, (m, k), -big, big)
        b = rand_ints(rng, (k, n), -big, big), rand_ints(rng, (k, n), -big, big)
        want = gaussian.intmul(a, b)
        budget = budgets(_intmul_tiling(a, b))[-1][0]
        with modlin.limits(memory=budget):
            got = gaussian.intmul(a, b)
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), (m, k, n)
        rows, cols = [0, m - 1], [0, n - 1]
        assert [w[np.ix_(rows, cols)].tolist() for w in want] == list(_pair_oracle(a, b, rows, cols))
    # stacks (broadcast, tiled as a whole or matrix by matrix), complex input, 1-D operands
    A = rng.integers(-(2**40), 2**40, (3, 1, 120, 80)) + 1j * rng.integers(-(2**40), 2**40, (3, 1, 120, 80))
    B = rng.integers(-(2**40), 2**40, (2, 80, 90)), rng.integers(-(2**40), 2**40, (2, 80, 90))
    v = rng.integers(-(2**40), 2**40, 80), rng.integers(-(2**40), 2**40, 80)
    cases = [(A, B), (A, v), (v, B), (v, v)]
    wants = [gaussian.intmul(x, y) for x, y in cases]
    parts = (A.real.astype(np.int64), A.imag.astype(np.int64)), B
    one = budgets(_intmul_tiling(tuple(x[0, 0] for x in parts[0]), tuple(x[0] for x in parts[1])))[-1][0]
    whole = budgets(_intmul_tiling(tuple(x[0, 0] for x in parts[0]), tuple(x[0] for x in parts[1]), batch=6))
    for budget in (one, whole[-1][0], whole[0][0]):
        with modlin.limits(memory=budget):
            for (x, y), w in zip(cases, wants):
                g = gaussian.intmul(x, y)
                assert all(gi.shape == wi.shape and np.array_equal(gi, wi) for gi, wi in zip(g, w))
    for idx in ((0, 0), (2, 1)):
        pa = tuple(x[idx[0], 0] for x in parts[0])
        pb = tuple(x[idx[1]] for x in parts[1])
        want = _pair_oracle(pa, pb, [0, 119], [0, 89])
        assert [w[idx][np.ix_([0, 119], [0, 89])].tolist() for w in wants[0]] == list(want)
    vv = _pair_oracle(tuple(x[None] for x in v), tuple(x[:, None] for x in v), [0], [0])
    assert (int(wants[3][0]), int(wants[3][1])) == (vv[0][0][0], vv[1][0][0])


def test_gaussian_intmul_working_memory_within_the_model(rng):
    a = rand_ints(rng, (260, 200), -(2**20), 2**20), rand_ints(rng, (260, 200), -(2**20), 2**20)
    b = rand_ints(rng, (200, 230), -(2**20), 2**20), rand_ints(rng, (200, 230), -(2**20), 2**20)
    a, b = tuple(x.astype(np.int64) for x in a), tuple(x.astype(np.int64) for x in b)
    for engine in ("fp64", "int8"):
        for budget, t in budgets(_intmul_tiling(a, b, engine))[1::2]:
            with modlin.limits(memory=budget):
                (re, im), peak = traced(lambda: gaussian.intmul(a, b, engine=engine))
            assert peak - re.nbytes - im.nbytes <= t.peak <= budget, (engine, t.grid, peak, t.peak)


def test_gaussian_intmul_budget_too_small_and_progress(monkeypatch, capsys, rng):
    import sys

    a = np.ones((300, 300), dtype=np.int64) * (1 + 1j)
    with modlin.limits(memory="256KiB"), pytest.raises(
            ValueError, match=r"budget of 256 KiB is too small.*smallest tile \(64x64 @ 64x64\) needs [0-9.]+ [KM]iB"):
        gaussian.intmul(a, a)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr("modlin._runtime.progress.MIN_SECONDS", -1.0)
    x = rng.integers(-9, 9, (200, 64)), rng.integers(-9, 9, (200, 64))
    y = rng.integers(-9, 9, (64, 200)), rng.integers(-9, 9, (64, 200))
    budget, t = budgets(_intmul_tiling(x, y))[-1]
    with modlin.limits(memory=budget, progress=True):
        gaussian.intmul(x, y)
    err = capsys.readouterr().err
    assert err.startswith("\rmodlin.gaussian.intmul") and err.endswith(f"[{t.count}/{t.count}] done\n"), err
