"""Exactness of ``modlin.matmul`` for every plan the planner considers.

For a representative modulus of every regime (and composite moduli), every
candidate ``(engine, u, v, variant)`` is run on adversarial inputs (entries at
the balanced extremes, words at their bounds, unreduced and int64-extreme
values) at inner dimensions just below, at and just above its block size, with
blocks forced small so that many reductions happen on small matrices. The
result is compared with exact Python integers, and for a few moduli with
python-flint as well.
"""

from __future__ import annotations

import dataclasses
import functools

import galois
import numpy as np
import pytest

import modlin
from conftest import assert_exact, flint_matmul, ref_matmul
from modlin._engines.gemm import ENGINES
from modlin._planning.plan import candidates

# --------------------------------------------------------------------- moduli

#: A prime (or the named composite) for every regime of the planner.
PRIMES = [
    3, 251, 65521, 2**20 - 3, 2**24 - 3, 2**26 - 5, 2**31 - 1, 2**35 - 31,
    2**40 - 87, 2**50 - 27, 2**52 - 47,
    8388593,  # largest prime below 2**23: the largest prime the fp32 engine takes
]
COMPOSITES = [
    4, 6, 256, 1000, 2**23 - 1, 2**23, 2**32, 10**12,
    2**51 * 3 // 2,  # even, 52 bits
    2**52 - 1,  # the largest admissible modulus
]
#: 2 is prime but also the smallest modulus.
MODULI = sorted({2, *PRIMES, *COMPOSITES})

SHAPE = (8, 8, 8)  # the shape candidates are asked for (it only steers the cost model)


def engine_top(name: str) -> int:
    """Largest modulus an engine's plans take."""
    eng = ENGINES[name]
    return getattr(eng, "max_modulus", 2**52 - 1 if name == "fp64" else 2**23 - 1)


def all_candidates(p: int) -> list[modlin.Plan]:
    """The planner's candidates, plus those of engines it only uses when asked (int8)."""
    out = candidates(p, SHAPE)
    for name in ENGINES:
        if name not in {c.engine for c in out} and name not in ("fp64", "fp32"):
            out += candidates(p, SHAPE, (name,))
    return out


def test_moduli_are_what_the_suite_says():
    for p in PRIMES + [2]:
        assert galois.is_prime(p), p
    for p in COMPOSITES:
        assert not galois.is_prime(p), p
    assert max(MODULI) == modlin.MAX_MODULUS - 1 == 2**52 - 1
    assert (2**51 * 3 // 2) % 2 == 0 and (2**51 * 3 // 2).bit_length() == 52
    # the largest admissible modulus is accepted, the next one refused
    modlin.plan(2**52 - 1, 2, 2, 2, algorithm="multiword")
    with pytest.raises(ValueError, match="2\\*\\*52"):
        modlin.plan(2**52, 2, 2, 2, algorithm="multiword")


# --------------------------------------------------------------------- inputs

def word_extremes(p: int, s: int, w: int) -> set[int]:
    """Values in ``[-p//2, p//2]`` whose balanced base-``2**s`` words sit at their bounds."""
    h = p // 2
    if w == 1:
        return {h, -h}
    D = 2 ** (s * (w - 1))
    top = (2 * h + D) // (2 * D)
    low = sum(2 ** (s - 1) * 2 ** (s * i) for i in range(w - 1))
    out = set()
    for t in (top, top - 1):
        for x in (t * D - low, t * D + low, -t * D - low, -t * D + low):
            if -h <= x <= h:
                out.add(x)
    return out


def extremes(p: int, pl: modlin.Plan | None = None, *, unreduced: bool = True) -> list[int]:
    """Adversarial entries for products modulo ``p`` (all fit in int64)."""
    h = p // 2
    vals = {0, 1, -1, p - 1, 1 - p, h, -h, h - 1, 1 - h, (p - 1) // 2, -((p - 1) // 2), (-(p - 1)) // 2}
    if unreduced:
        vals |= {p, -p, 3 * p + h, -5 * p - h, 2**63 - 1, -(2**63), 2**62 + 12345}
    if pl is not None:
        vals |= word_extremes(p, pl.a_shift, pl.u) | word_extremes(p, pl.b_shift, pl.v)
    return sorted(vals)


def adversarial_operands(p: int, pl: modlin.Plan, k: int, rng, *, unreduced: bool = True):
    """``A`` (m x k) and ``B`` (k x n): one constant row / column per extreme value, so
    that every pair of extremes meets in some entry with ``k`` equal terms (the
    largest accumulator a GEMM can produce), plus mixed and random rows/columns."""
    ev = extremes(p, pl, unreduced=unreduced)
    h = p // 2
    pool = np.array(ev, dtype=np.int64)
    rows = [np.full(k, x, dtype=np.int64) for x in ev]
    rows += [rng.choice(pool, k), rng.choice(pool, k),
             rng.integers(0, p, k, dtype=np.int64), rng.integers(-h, h + 1, k, dtype=np.int64)]
    cols = [np.full(k, x, dtype=np.int64) for x in ev]
    cols += [rng.choice(pool, k), rng.choice(pool, k),
             rng.integers(0, p, k, dtype=np.int64), rng.integers(-h, h + 1, k, dtype=np.int64)]
    A = np.stack(rows)  # (m, k)
    B = np.stack(cols, axis=1)  # (k, n)
    return A, B


def run_and_check(p, pl, k, rng, **kw):
    A, B = adversarial_operands(p, pl, k, rng, **kw)
    A0, B0 = A.copy(), B.copy()
    C = modlin.matmul(A, B, p, plan=pl)
    assert_exact(C, A, B, p)
    assert np.array_equal(A, A0) and np.array_equal(B, B0)


def plan_id(pl: modlin.Plan) -> str:
    return f"{pl.engine}-({pl.u},{pl.v})-{pl.variant}-lambda={pl.block}"


# ------------------------------------------------------- every candidate, forced blocks

#: (block, inner dimensions) pairs: one below, at, above the block, and many blocks.
FORCED = {1: (1, 2, 3), 2: (1, 2, 3, 5), 3: (2, 3, 4, 10)}


@pytest.mark.parametrize("p", MODULI)
def test_every_candidate_with_small_blocks(p, rng):
    cands = all_candidates(p)
    assert cands, f"no plan at all for p = {p}"
    for c in cands:
        c.check()
        for block, ks in FORCED.items():
            if block > c.block:
                continue
            pl = dataclasses.replace(c, block=block)
            pl.check()
            for k in ks:
                try:
                    run_and_check(p, pl, k, rng)
                except AssertionError as exc:
                    raise AssertionError(f"{plan_id(c)} forced block {block}, k = {k}: {exc}") from None


#: Blocks up to this size are also run at their own lambda (k = lambda - 1, lambda, lambda + 1).
NATIVE_LIMIT = 2100


@pytest.mark.parametrize("p", MODULI)
def test_every_candidate_around_its_own_block(p, rng):
    ran = 0
    for c in all_candidates(p):
        lam = c.block
        if lam > NATIVE_LIMIT:
            continue
        for k in sorted({max(lam - 1, 1), lam, lam + 1}):
            try:
                run_and_check(p, c, k, rng, unreduced=k <= 64)
            except AssertionError as exc:
                raise AssertionError(f"{plan_id(c)}, k = {k}: {exc}") from None
            ran += 1
    if p >= 2**40:  # every plan for a large modulus has a small block
        assert ran > 0


@pytest.mark.parametrize("p", [251, 2**24 - 3, 2**31 - 1, 2**35 - 31, 2**40 - 87, 2**50 - 27, 2**52 - 47, 8388593])
def test_worst_case_at_each_word_pairs_block(p):
    """Every GEMM writes a fresh array (``c_max = 0``) and each word pair has its own block
    (:meth:`Plan.blocks`): all entries ``p - 1``, and the balanced extremes ``+-(p-1)/2`` in
    every combination of signs, with ``k`` at, one past and several multiples of each block,
    so that every GEMM reaches its bound and the accumulator grows over many passes."""
    h = (p - 1) // 2
    ran = 0
    for c in all_candidates(p):
        for lam in sorted(set(c.blocks().values())):
            if lam > NATIVE_LIMIT:
                continue
            for k in sorted({lam, lam + 1, 2 * lam, 3 * lam, 3 * lam + 1}):
                for x, y in ((p - 1, p - 1), (h, h), (-h, h), (-h, -h)):
                    A, B = np.full((3, k), x, dtype=np.int64), np.full((k, 2), y, dtype=np.int64)
                    try:
                        assert_exact(modlin.matmul(A, B, p, plan=c), A, B, p)
                    except AssertionError as exc:
                        raise AssertionError(f"{plan_id(c)}, k = {k}, entries {x}, {y}: {exc}") from None
                    ran += 1
    assert ran > 0


@pytest.mark.parametrize("p", [2**24 - 3, 2**31 - 1, 2**40 - 87, 2**52 - 47, 2**52 - 1, 10**12, 1000])
def test_chosen_plan_over_several_blocks(p, rng):
    """Without ``plan=``: the planner's choice, with k past its block when the block is small."""
    pl0 = modlin.plan(p, 6, 64, 6)
    k = pl0.block * 2 + 3 if pl0.block <= 400 else 64
    pl = modlin.plan(p, 6, k, 6)
    A = rng.integers(-(2**63), 2**63 - 1, (6, k), endpoint=True, dtype=np.int64)
    B = rng.integers(0, p, (k, 6), dtype=np.int64)
    B[:, 0] = p - 1
    B[:, 1] = p // 2
    A[0] = -(p // 2)
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)


# ------------------------------------------------------- the largest modulus of each (u, v)

def _admits(p: int, engine: str, u: int, v: int) -> list[modlin.Plan]:
    return [c for c in candidates(p, SHAPE, (engine,)) if (c.u, c.v) == (u, v)]


@functools.lru_cache(maxsize=None)
def largest_moduli() -> dict[tuple[str, int, int], int]:
    """For each (engine, u, v): the largest p with an exact plan, by bisection."""
    out = {}
    for engine in ENGINES:
        top = engine_top(engine)
        words = {(c.u, c.v) for c in candidates(2, SHAPE, (engine,))}
        for u, v in sorted(words):
            if _admits(top, engine, u, v):
                out[(engine, u, v)] = top
                continue
            lo, hi = 2, top  # admits(lo), not admits(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _admits(mid, engine, u, v):
                    lo = mid
                else:
                    hi = mid
            out[(engine, u, v)] = lo
    return out


_WORDS = [(e, u, v) for e in ("fp64", "fp32")
          for u, v in ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (1, 4), (4, 1), (2, 2), (2, 3), (3, 2), (3, 3))]
_WORDS += [(e, 1, 1) for e in ENGINES if e not in ("fp64", "fp32")]


def test_largest_moduli_table_is_complete():
    table = largest_moduli()
    assert set(table) == set(_WORDS)
    # more words never admit fewer moduli; (1,1) fp64 stops below 2**28, fp32 below 2**14
    for (engine, u, v), pmax in table.items():
        assert pmax == table[(engine, v, u)]  # symmetric in (u, v)
        for (e2, u2, v2), p2 in table.items():
            if e2 == engine and u2 >= u and v2 >= v:
                assert p2 >= pmax
    assert table[("fp64", 1, 1)] < 2**28 and table[("fp32", 1, 1)] < 2**14
    # no engine takes a modulus beyond its own limit, nor fp64 one of 2**52
    for engine in ENGINES:
        assert not candidates(engine_top(engine) + 1, SHAPE, (engine,))
    assert engine_top("fp64") == 2**52 - 1


@pytest.mark.parametrize("key", _WORDS, ids=lambda k: f"{k[0]}-{k[1]}x{k[2]}")
def test_largest_modulus_of_each_word_shape(key, rng):
    engine, u, v = key
    pmax = largest_moduli()[key]
    plans = _admits(pmax, engine, u, v)
    assert plans
    pl = modlin.plan(pmax, *SHAPE, engine=engine, words=(u, v))
    assert (pl.engine, pl.u, pl.v) == key
    top = engine_top(engine)
    if pmax < top:
        # one past the largest: no exact plan with these words
        assert not _admits(pmax + 1, engine, u, v)
        with pytest.raises(ValueError, match="no exact plan"):
            modlin.plan(pmax + 1, *SHAPE, engine=engine, words=(u, v))
    for p in sorted({pmax, pmax - 1}):
        for c in _admits(p, engine, u, v):
            lam = c.block
            ks = sorted({max(lam - 1, 1), lam, lam + 1}) if lam <= NATIVE_LIMIT else [1, 2, 7]
            for k in ks:
                run_and_check(p, c, k, rng, unreduced=k <= 64)
            for block in (1, 2, 3):
                if block < lam:
                    pl = dataclasses.replace(c, block=block)
                    for k in FORCED[block]:
                        run_and_check(p, pl, k, rng)


# ------------------------------------------------------- composite moduli

@pytest.mark.parametrize("p", [4, 6, 1000, 2**32, 10**12, 2**51 * 3 // 2, 2**52 - 1])
def test_composite_moduli_with_zero_divisors(p, rng):
    """Entries sharing factors with p, exact ties at p/2 for even p, and random values."""
    h = p // 2
    g = 2 if p % 2 == 0 else 3
    vals = np.array([h, -h, p // g, -(p // g), g, p - g, p - 1, 2 * h, 0], dtype=np.int64)
    A = np.concatenate([np.tile(vals, (3, 1)), rng.integers(0, p, (3, vals.size))])
    B = np.concatenate([np.tile(vals[:, None], (1, 4)), rng.integers(-h, h + 1, (vals.size, 4))], axis=1)
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    for c in candidates(p, SHAPE):
        assert_exact(modlin.matmul(A, B, p, plan=dataclasses.replace(c, block=min(c.block, 2))), A, B, p)


# ------------------------------------------------------- python-flint cross-check

@pytest.mark.parametrize("p", [65521, 2**31 - 1, 2**35 - 31, 2**40 - 87, 2**50 - 27, 2**52 - 47, 10**12])
def test_agrees_with_python_flint(p, rng):
    A = rng.integers(0, p, (17, 40), dtype=np.int64)
    B = rng.integers(0, p, (40, 9), dtype=np.int64)
    A[0] = p - 1
    B[:, 0] = p - 1
    A[1] = p // 2
    B[:, 1] = (p + 1) // 2
    F = flint_matmul(A, B, p)
    assert np.array_equal(F, ref_matmul(A, B, p))  # the two oracles agree
    assert_exact(modlin.matmul(A, B, p), A, B, p, oracle=flint_matmul)
    for c in candidates(p, (17, 40, 9)):
        pl = dataclasses.replace(c, block=min(c.block, 7))
        assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p, oracle=flint_matmul)


# ------------------------------------------------------- BLAS-sized products

@pytest.mark.parametrize("p, shape", [
    (251, (256, 256, 256)),  # the planner picks sgemm here
    (65521, (200, 1100, 64)),
    (2**24 - 3, (96, 300, 80)),  # (1,1) with lambda = 128: three reductions
    (2**31 - 1, (96, 700, 80)),
    (2**52 - 47, (64, 3100, 48)),  # (2,3) with lambda = 1535
    (2**52 - 1, (1, 2000, 300)),  # a thin product: concatenated words
    (2**50 - 27, (300, 2000, 1)),
])
def test_blas_sized_products_against_flint(p, shape, rng):
    """Sizes where BLAS blocks, packs and threads its GEMMs; extremes planted in every block."""
    m, k, n = shape
    A = rng.integers(0, p, (m, k), dtype=np.int64)
    B = rng.integers(0, p, (k, n), dtype=np.int64)
    A[: max(1, m // 4)] = p // 2  # rows of the largest balanced residue
    B[:, : max(1, n // 4)] = -(p // 2)
    A[-1] = p - 1
    pl = modlin.plan(p, m, k, n)
    if p == 251:
        assert pl.engine == "fp32"
    C = modlin.matmul(A, B, p)
    assert_exact(C, A, B, p, oracle=flint_matmul)


# --------------------------------------------------------------------- prepared left operands

@pytest.mark.parametrize("p, shape, thin", [
    (2**31 - 1, (150, 140, 24), True),   # multiword, concat-b (linalg's thin plan)
    (2**31 - 1, (150, 140, 24), False),  # multiword, the planner's variant
    (2**50 - 27, (150, 140, 24), True),  # multiword, more words
    (2**61 - 1, (150, 140, 24), True),   # RNS, int64 residues
    (2**127 - 1, (90, 80, 12), True),    # RNS, Python ints
])
def test_prepared_left_operand(p, shape, thin):
    """A left operand converted once (:func:`modlin._algorithms.products.prepare_left`) gives products
    bit-identical to the plain ones, for several right operands, also when the memory
    budget tiles the product (the tiles then convert its source), and refuses a plan that
    splits it otherwise."""
    from modlin._algorithms.products import prepare_left
    from modlin.linalg import _arith

    m, k, n = shape
    rng = np.random.default_rng(p % 1000)
    dtype = np.int64 if p < 2**63 else object

    def residues(*s):
        x = rng.integers(0, 2**62, s).astype(object) * 2**70 + rng.integers(0, 2**62, s).astype(object)
        return (x % p).astype(dtype)

    a = residues(m, k)
    a[0, :] = p - 1  # the balanced extremes
    a[1, :] = p // 2
    a0 = a.copy()
    pl = _arith.thin_plan(p, k, n) if thin else _arith._plan(p, m, k, n)
    A = prepare_left(pl, a, p)
    for _ in range(3):
        b = residues(k, n)
        b[:, 0] = p - 1
        want = ref_matmul(a, b, p)
        got = _arith.mul(A, b, p, pl)
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, _arith.mul(a, b, p, pl))
        assert np.array_equal(np.asarray(got, dtype=object), want)
    budget = pl.tiling((m, k, n)).peak + 8 * (m * k + k * n + m * n)
    while pl.tiling((m, k, n), budget=budget).grid[:2] == (1, 1):
        budget = budget * 3 // 4
    with modlin.limits(memory=budget):  # tiles of a: its prepared parts are not used
        assert np.array_equal(np.asarray(_arith.mul(A, b, p, pl), dtype=object), want)
    assert np.array_equal(a, a0)
    other = modlin.plan(p, m, k, n, algorithm="multiword", words=(pl.u + 1, pl.v)) if p < 2**52 else \
        modlin.plan(p, 4 * k, 4 * k, 4 * k)
    if p < 2**52 or other.moduli != pl.moduli:
        with pytest.raises(ValueError, match="made for|split for"):
            _arith.mul(A, b, p, other)
