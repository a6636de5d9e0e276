"""The multi-limb Montgomery base cases modulo primes beyond 64 bits (modlin.linalg._bigmod)
against the object-array ones they replace and against Python's integers."""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from modlin import linalg
from modlin.linalg import _bigmod as bm
from modlin.linalg._elimination import _eliminate_object

P300 = 2**300 + 157  # the least prime above 2**300: 10 limbs
PRIMES = [2**64 + 13, 2**89 - 1, 2**127 - 1, 2**255 - 19, P300, 2**521 - 1]
# 2**521 - 1 is beyond the kernels: the object path; the others cover 3, 4, 8 and 10 limbs and
# the first modulus above 2**64
KERNEL_PRIMES = [q for q in PRIMES if bm.fits(q)]


def test_which_moduli_the_kernels_take():
    assert all(not bm.fits(q) for q in range(2**300 + 1, P300, 2))
    assert KERNEL_PRIMES == [2**64 + 13, 2**89 - 1, 2**127 - 1, 2**255 - 19, P300]
    assert not bm.fits(2**521 - 1)  # beyond 512 bits
    assert not bm.fits(2**61 - 1)  # a word: the int64 kernels
    assert not bm.fits(3 * (2**127 - 1))  # composite: a nonzero pivot need not be a unit
    assert not bm.fits(2**128)


@pytest.mark.parametrize("p", KERNEL_PRIMES)
def test_limbs_round_trip(p):
    x = np.array([0, 1, p - 1, p // 2, 2**32, 2**64 - 1, p - 2**32], dtype=object)
    limbs = bm.to_limbs(x, bm.constants(p)[0])
    assert limbs.dtype == np.uint64 and limbs.max() < 2**32
    assert list(bm.from_limbs32(limbs)) == list(x)


def _block(rng, p, m, n, density=0.8, worst=False):
    def entry():
        if rng.random() >= density:
            return 0
        return p - 1 - rng.randrange(3) if worst else rng.randrange(p)
    return np.array([[entry() for _ in range(n)] for _ in range(m)], dtype=object).reshape(m, n)


@pytest.mark.parametrize("p", KERNEL_PRIMES)
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (5, 1), (3, 7), (8, 4), (6, 9), (17, 17), (33, 33)])
@pytest.mark.parametrize("worst", [False, True])
def test_elimination_matches_the_object_kernel(p, shape, worst):
    rng = random.Random(hash((p, shape, worst)) % 2**32)
    m, n = shape
    a = _block(rng, p, m, n, worst=worst)
    if m > 2:
        a[2] = a[0] * 3 % p  # a dependent row: rank-deficient
    ref, got = a.copy(), a.copy()
    pr1, c1 = np.empty(m, np.int64), np.empty(n, np.int64)
    pr2, c2 = np.empty(m, np.int64), np.empty(n, np.int64)
    r1 = _eliminate_object(ref, p, pr1, c1)
    r2 = bm.eliminate_big(got, p, pr2, c2)
    assert r1 == r2
    assert list(pr1[:r1]) == list(pr2[:r2]) and list(c1) == list(c2)
    assert (ref == got).all()


@pytest.mark.parametrize("p", KERNEL_PRIMES)
@pytest.mark.parametrize("k", [0, 1, 2, 11])
@pytest.mark.parametrize("unit", [True, False])
def test_lower_inverse_is_the_inverse(p, k, unit):
    rng = random.Random(k * 7 + unit)
    T = _block(rng, p, k, k, density=0.9)
    for i in range(k):
        T[i, i] = rng.randrange(1, p)
    X = bm.lower_inverse_big(T, p, unit)
    L = np.tril(T)
    if unit:
        np.fill_diagonal(L, 1)
    if k:
        assert (L.dot(X) % p == np.eye(k, dtype=object)).all()
        assert (np.triu(X, 1) == 0).all()


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.integers(0, 2**32), st.sampled_from(KERNEL_PRIMES))
def test_det_and_inverse_modulo_big_primes_against_python(n, seed, p):
    rng = random.Random(seed)
    A = _block(rng, p, n, n, density=0.7)
    # Python-int oracle: Gaussian elimination with Fractions is slow; mod p directly
    M = [[int(v) for v in row] for row in A.tolist()]
    det = 1
    for c in range(n):
        piv = next((r for r in range(c, n) if M[r][c] % p), None)
        if piv is None:
            det = 0
            break
        if piv != c:
            M[c], M[piv] = M[piv], M[c]
            det = -det
        det = det * M[c][c] % p
        inv = pow(M[c][c], -1, p)
        for r in range(c + 1, n):
            f = M[r][c] * inv % p
            M[r] = [(x - f * y) % p for x, y in zip(M[r], M[c])]
    assert linalg.det(A, p) == det % p
    if det % p:
        X = linalg.inv(A, p)
        assert (A.dot(X) % p == np.eye(n, dtype=object)).all()


def test_input_is_not_modified_and_numpy_ints_in_object_arrays():
    p = 2**127 - 1
    a = np.array([[np.int64(3), 5], [7, np.int64(11)]], dtype=object)
    keep = a.copy()
    assert linalg.det(a, p) == (3 * 11 - 5 * 7) % p
    assert (a == keep).all()


@given(st.integers(0, 2**32), st.sampled_from([2**64 + 13, 2**89 - 1, 2**127 - 1, 2**255 - 19]))
@settings(max_examples=40, deadline=None)
def test_row_scaling_against_python(seed, p):
    """``D = l u R**-1`` for the form ``l R``, against Python's integers, entries from the whole
    range, ends included."""
    rng = random.Random(seed)
    L, pl, pp, *_ = bm.constants(p)
    w = rng.randrange(1, 20)
    u = [rng.choice([0, 1, p - 1, rng.randrange(p)]) for _ in range(w)]
    lam = rng.choice([1, p - 1, rng.randrange(p)])
    S = bm.to_planes(np.array([u], dtype=object), L)
    D = np.zeros_like(S)
    lam_limbs = bm.to_limbs(np.array([lam], dtype=object), L)[0]
    acc, tmp = np.zeros((2 * L + 1, w), np.uint64), np.zeros((L, w), np.uint64)
    flag, mrow = np.zeros(w, np.uint64), np.zeros(w, np.uint32)
    Rinv = pow(2 ** (32 * L), -1, p)
    bm._scale_row(D, 0, S, 0, 0, w, lam_limbs, pl, pp, acc, tmp, flag, mrow)
    assert bm.from_planes(D)[0].tolist() == [lam * y * Rinv % p for y in u]


@given(st.integers(0, 2**32), st.sampled_from([2**64 + 13, 2**127 - 1, 2**255 - 19]),
       st.sampled_from([1, 2, 7, 300]))
@settings(max_examples=40, deadline=None)
def test_delayed_sums_against_python(seed, p, terms):
    """``D - sum_t l_t u_t R'**-1 mod p`` from unreduced sums of ``terms`` products (up to 300,
    all of them ``p - 1`` times ``p - 1`` in the worst draws), against Python's integers."""
    rng = random.Random(seed)
    L, pl, pp, *_ = bm.constants(p)
    w = rng.randrange(1, 12)
    worst = rng.random() < 0.3
    draw = (lambda: p - 1) if worst else (lambda: rng.choice([0, 1, p - 1, rng.randrange(p)]))
    rows = [[draw() for _ in range(w)] for _ in range(terms)]
    lams = [draw() for _ in range(terms)]
    d = [rng.choice([0, p - 1, rng.randrange(p)]) for _ in range(w)]
    S = bm.to_planes(np.array(rows, dtype=object), L)
    D = bm.to_planes(np.array([d], dtype=object), L)
    acc = np.zeros((2 * L + 2, w), np.uint64)
    tmp, flag, mrow = np.zeros((L, w), np.uint64), np.zeros(w, np.uint64), np.zeros(w, np.uint32)
    for t, lam in enumerate(lams):
        bm._mac(acc, bm.to_limbs(np.array([lam], dtype=object), L)[0], S, t, 0, w)
    bm._redc_into(acc, D, 0, 0, w, pl, pp, tmp, flag, mrow)
    Rinv = pow(2 ** (32 * (L + 1)), -1, p)
    want = [(d[c] - sum(lam * row[c] for lam, row in zip(lams, rows)) * Rinv) % p for c in range(w)]
    assert bm.from_planes(D)[0].tolist() == want
    assert not acc.any()  # left zero for the next row


@pytest.mark.parametrize("p", KERNEL_PRIMES)
def test_lazy_constant(p):
    L = bm.limbs(p)
    assert int(bm.from_limbs32(bm.lazy_constant(p)[None])[0]) == 2 ** (32 * (2 * L + 1)) % p


@pytest.mark.parametrize("p", KERNEL_PRIMES)
def test_limb_arrays(p):
    """Limb arrays: round trip, negation, nonzero, the working copy and its way back."""
    x = np.array([[0, 1, p - 1], [p // 2, 2**32, p - 2**32]], dtype=object)
    a = bm.to_limb_array(x, p)
    assert bm.is_limbs(a) and a.shape == x.shape and a["l"].shape == x.shape + (bm.limbs(p),)
    assert (bm.from_limb_array(a) == x).all() and (bm.plain(a) == x).all()
    assert (bm.from_limb_array(bm.limb_negate(a, p)) == (-x) % p).all()
    assert (bm.limb_nonzero(a) == (x != 0)).all()
    assert bm.is_limbs(bm.limb_working(x, p)) and bm.limb_working(x, 2**61 - 1) is x
    assert bm.plain(x) is x
    assert bm.from_limb_array(bm.to_limb_array(np.zeros((0, 3), dtype=object), p)).shape == (0, 3)
    # a permutation and a block, as the recursions take them
    assert (bm.from_limb_array(a[::-1, 1:]) == x[::-1, 1:]).all()


@settings(max_examples=200, deadline=None)
@given(moduli=st.lists(st.integers(2, 2**26 - 1), min_size=1, max_size=12),
       p=st.one_of(st.integers(2, 2**64), st.sampled_from([2**127 - 1, 2**255 - 19, 2**40000 + 1])))
def test_cofactors_modulo_p(moduli, p):
    """``(M / m_i) mod p`` by one division by ``m_i`` (moduli sharing a factor with ``p``, or with
    each other, included), and the 16-bit limbs of the constants, against Python ints."""
    from modlin._arith.crt import _cofactors_mod, _limbs16

    M = math.prod(moduli)
    assert _cofactors_mod(M, tuple(moduli), [M // m for m in moduli], p) == [M // m % p for m in moduli]
    L = max(-(-p.bit_length() // 16), 3)
    v = M % p
    assert _limbs16(v, L).tolist() == [(v >> (16 * j)) & 0xFFFF for j in range(L)]
    assert _limbs16(M, 2).tolist() == [M & 0xFFFF, (M >> 16) & 0xFFFF]  # the low limbs only


@pytest.mark.parametrize("depth", [0, 1, 7, 9, 12])
@pytest.mark.parametrize("p", [2**64 + 13, 2**127 - 1, 2**255 - 19, P300])
def test_product_basis_is_exact(p, depth):
    """One GEMM per modulus is exact for up to 2**depth terms, and the moduli cover the product
    of entries in [0, p) with the CRT's margin."""
    from modlin._arith.moduli import planned_range

    basis, w, wa = bm.product_basis(p, depth)
    k = 2**depth
    assert all(k * ((q - 1) // 2) ** 2 <= 2**53 for q in basis.moduli)
    assert basis.M >= planned_range(k * (p - 1) ** 2)
    assert w.shape == (len(basis.moduli), 2 * bm.limbs(p))
    assert all(w[i, j] == pow(2, 16 * j, q) for i, q in enumerate(basis.moduli) for j in range(w.shape[1]))
    M = basis.M
    assert all(wa[i, j] == pow(2, 16 * j, q) * pow(M // q, -1, q) % q
               for i, q in enumerate(basis.moduli) for j in range(w.shape[1]))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([2**64 + 13, 2**127 - 1, 2**255 - 19, P300]),
       st.integers(0, 9), st.integers(0, 140), st.integers(0, 9), st.booleans())
def test_limb_product_against_python(seed, p, m, k, n, subtract):
    """``a @ b mod p`` (and ``c - a @ b``) on limb arrays, against Python's integers: empty
    shapes, k = 0, inner dimensions past 128 (another basis), entries p - 1, strided blocks."""
    rng = random.Random(seed)
    worst = rng.random() < 0.3
    A = _block(rng, p, m + 2, k + 1, density=0.9, worst=worst)
    B = _block(rng, p, k + 3, n, density=0.9, worst=worst)
    C = _block(rng, p, m, n)
    a, b = bm.to_limb_array(A, p)[1:m + 1, :k], bm.to_limb_array(B, p)[2:k + 2]
    c = bm.to_limb_array(C, p)
    bm.limb_product(a, b, p, c, subtract=subtract)
    prod = A[1:m + 1, :k].dot(B[2:k + 2]) if k else np.zeros((m, n), dtype=object)
    want = (C - prod) % p if subtract else prod % p
    assert (bm.from_limb_array(c) == want).all()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([2**127 - 1, 2**255 - 19]), st.integers(1, 40),
       st.integers(1, 70), st.integers(1, 40), st.booleans(), st.sampled_from([1, 2, 3]))
def test_limb_product_in_slabs(seed, p, m, k, n, subtract, threads):
    """The tiles' slabs (forced on small shapes: every product split, slabs of one row up), taller
    results in slabs of their rows and wider ones as their transposes, on 1 to 3 workers:
    the same residues as Python's integers, strided blocks and entries p - 1 included."""
    import modlin
    from modlin._engines import threads as _threads

    rng = random.Random(seed)
    A = _block(rng, p, m + 1, k, density=0.9, worst=rng.random() < 0.3)
    B = _block(rng, p, k, 2 * n, density=0.9)
    C = _block(rng, p, m, n)
    a, b, c = bm.to_limb_array(A, p)[1:], bm.to_limb_array(B, p)[:, ::2], bm.to_limb_array(C, p)
    with pytest.MonkeyPatch.context() as mp, modlin.limits(threads=threads):
        mp.setattr(_threads, "MIN_WORK", 0)
        mp.setattr(bm, "LIMB_SLAB_ROWS", 1)
        bm.limb_product(a, b, p, c, subtract=subtract)
    prod = A[1:].dot(B[:, ::2])
    assert (bm.from_limb_array(c) == ((C - prod) % p if subtract else prod % p)).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_limb_crt_settles_ambiguous_entries_exactly(weighted):
    """Entries within the float sum's doubt of M / 2 are rebuilt with Python ints, sums that
    carry the CRT's weights (``weighted``) too."""
    from modlin._arith.crt import crt_weights, reconstruct_limbs
    from modlin._arith.residues import padded_rows

    p = 2**127 - 1
    basis = bm.product_basis(p, 7)[0]
    M = basis.M
    cw = crt_weights(basis.moduli) if weighted else np.ones(len(basis.moduli))
    values = [(M - 1) // 2, (M - 1) // 2 - 3, -(M // 2) + 1, 0, 12345]
    x = padded_rows(len(basis.moduli), len(values), np.float64)
    for i, q in enumerate(basis.moduli):
        x[i, :len(values)] = [v * int(cw[i]) % q for v in values]
    out = np.zeros((1, len(values), bm.limbs(p)), dtype=np.uint32)
    reconstruct_limbs(x, basis, p, out, weighted=weighted)
    got = bm.from_limbs32(out[0].astype(np.uint64))
    assert got.tolist() == [v % p for v in values]


@pytest.mark.parametrize("p", [2**127 - 1, 2**255 - 19])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [True, False])
@pytest.mark.parametrize("w", [1, 3, 30])  # 1 and 3: by substitution; 30: by the inverse
@pytest.mark.parametrize("k", [24, 100])  # below and past the recursion's threshold
def test_triangular_solves_substitution_and_inverse(p, side, lower, unit, w, k):
    """trsm modulo a big prime, narrow right-hand sides by substitution (the compiled row
    updates; at every size for at most DOTS_MAX_COLUMNS), wide ones by the triangle's inverse
    and a product (past the threshold, in the recursion): all against Python ints."""
    from modlin.linalg._triangular import by_substitution

    assert by_substitution(p, k, w) == (w <= 4 if k > 64 else w <= 8)
    rng = random.Random(hash((p, side, lower, unit, w, k)) % 2**32)
    T = _block(rng, p, k, k, worst=w == 3)
    for i in range(k):
        T[i, i] = rng.randrange(1, p)
    B = _block(rng, p, k, w) if side == "left" else _block(rng, p, w, k)
    Tri = np.tril(T) if lower else np.triu(T)
    if unit:
        np.fill_diagonal(Tri, 1)
    X = linalg.trsm(T, B, p, side=side, lower=lower, unit_diagonal=unit)
    got = Tri.dot(X) if side == "left" else X.dot(Tri)
    assert ((got - B) % p == 0).all()


@pytest.mark.parametrize("p", [2**64 + 13, 2**127 - 1, 2**255 - 19, P300])
@pytest.mark.parametrize("k, w", [(1, 1), (5, 2), (24, 1), (24, 4), (33, 9)])
def test_substitution_kernels_agree(p, k, w):
    """Substitution by dot products (few columns) and by rows, bit for bit, and against Python
    ints: diagonals of 1 and p - 1, worst entries, both unit flags."""
    rng = random.Random(hash((p, k, w)) % 2**32)
    L, pl, pp, r2 = bm.constants(p)
    c1 = bm.lazy_constant(p)
    T = _block(rng, p, k, k, worst=w % 2 == 0)
    for i in range(k):
        T[i, i] = rng.choice([1, p - 1, rng.randrange(1, p)])
    B = _block(rng, p, k, w, worst=True)
    for unit in (True, False):
        b1, b2 = bm.to_planes(B, L), bm.to_planes(B, L)
        bm._lower_solve_dots(bm.to_planes(T, L), b1, pl, pp, r2, c1, unit)
        bm._lower_solve_lazy(bm.to_planes(T, L), b2, pl, pp, r2, c1, unit)
        assert (b1 == b2).all()
        Tl = np.tril(T)
        if unit:
            np.fill_diagonal(Tl, 1)
        assert ((Tl.dot(bm.from_planes(b1)) - B) % p == 0).all()


@pytest.mark.parametrize("p", KERNEL_PRIMES)
@pytest.mark.parametrize("k", [1, 2, 17])
def test_diagonal_inverses(p, k):
    """Montgomery's trick against Python's inverses, ones and p - 1 on the diagonal included."""
    rng = random.Random(k)
    L, pl, pp, r2 = bm.constants(p)
    T = _block(rng, p, k, k)
    for i in range(k):
        T[i, i] = [1, p - 1, rng.randrange(1, p)][i % 3]
    got = bm._diagonal_inverses(bm.to_planes(T, L), pl, pp, r2, np.zeros(L + 2, np.uint64))
    R = 2 ** (32 * L)
    assert bm.from_limbs32(got).tolist() == [pow(int(T[i, i]), -1, p) * R % p for i in range(k)]


@given(st.integers(0, 2**32), st.sampled_from(KERNEL_PRIMES))
@settings(max_examples=60, deadline=None)
def test_inverse_against_python(seed, p):
    """The binary extended Euclidean inverse of Montgomery forms, 1 and p - 1 included."""
    rng = random.Random(seed)
    L, pl, pp, r2 = bm.constants(p)
    R = 2 ** (32 * L)
    for a in (1, 2, p - 1, p - 2, rng.randrange(1, p), rng.randrange(1, 2**40)):
        form = bm.to_limbs(np.array([a * R % p], dtype=object), L)[0]
        out = np.zeros(L, np.uint64)
        bm._mont_inverse(form, pl, pp, r2, out, np.zeros(L + 2, np.uint64), np.zeros((4, L), np.uint64))
        assert int(bm.from_limbs32(out[None])[0]) == pow(a, -1, p) * R % p


@pytest.mark.parametrize("p", [2**64 + 13, 2**127 - 1, 2**255 - 19])
def test_limb_working_copies(p):
    """limb_residues_of: Python ints already reduced go straight to limbs; negative, unreduced,
    wide, NumPy-integer and int64 inputs through the residues; bad entries get the same errors
    as the object path; inputs are never modified."""
    cases = [
        np.array([[0, 1, p - 1], [p // 2, 2**32, 5]], dtype=object),  # residues already
        np.array([[-1, p, 2 * p + 3], [-p, 10**200, -(10**90)]], dtype=object),  # unreduced
        np.array([[np.int64(-7), 3], [np.uint8(200), 2**70]], dtype=object),  # NumPy ints inside
        np.array([[-(2**63), 2**63 - 1], [0, -5]], dtype=np.int64),
        np.array([[250, 3]], dtype=np.uint8),
        np.zeros((0, 4), dtype=object),
    ]
    for x in cases:
        keep = x.copy()
        got = bm.limb_residues_of(x, p, "A")
        assert bm.is_limbs(got) and got.shape == x.shape
        want = np.array([int(v) % p for v in x.reshape(-1).tolist()], dtype=object).reshape(x.shape)
        assert (bm.from_limb_array(got) == want).all()
        assert x.dtype == keep.dtype and (x == keep).all()
    for bad in (np.array([[1.5, 2]], dtype=object), np.array([["a", 1]], dtype=object)):
        with pytest.raises((TypeError, ValueError)) as err:
            bm.limb_residues_of(bad, p, "A")
        with pytest.raises(type(err.value)) as ref:
            from modlin._arith.integers import residues_object

            residues_object(bad, p, "A")
        assert str(err.value) == str(ref.value)


@given(st.integers(1, 3000), st.integers(1, 3000), st.integers(1, 3000), st.integers(1, 40),
       st.integers(2**10, 2**32))
@settings(max_examples=200, deadline=None)
def test_limb_tiles_keep_within_the_budget(m, k, n, N, memory):
    mt, kt, nt = bm.limb_tiles(m, k, n, N, memory)
    assert 1 <= mt <= m and 1 <= kt <= k and 1 <= nt <= n
    assert 8 * N * (mt * kt + kt * nt + mt * nt) <= memory or (mt, kt, nt) == (1, 1, 1)
    if 8 * N * (m * k + k * n + m * n) <= memory:
        assert (mt, kt, nt) == (m, k, n)  # whole when it fits


@pytest.mark.parametrize("p", [2**127 - 1, 2**255 - 19])
@pytest.mark.parametrize("memory", ["64KiB", "1MiB"])
@pytest.mark.parametrize("subtract", [False, True])
def test_limb_product_in_tiles(p, memory, subtract):
    """Under a small budget the limb product runs in tiles of rows, columns and the inner
    dimension (subtracted in turn): the same result, against Python ints."""
    import modlin

    rng = random.Random(hash((p, memory, subtract)) % 2**32)
    m, k, n = 37, 150, 29
    A, B, C = _block(rng, p, m, k, worst=True), _block(rng, p, k, n), _block(rng, p, m, n)
    N = len(bm.product_basis(p, (k - 1).bit_length())[0].moduli)
    with modlin.limits(memory=memory):
        tiles = bm.limb_tiles(m, k, n, N, modlin.limits.current().memory)
        assert tiles != (m, k, n)
        c = bm.to_limb_array(C, p)
        bm.limb_product(bm.to_limb_array(A, p), bm.to_limb_array(B, p), p, c, subtract=subtract)
    want = (C - A.dot(B)) % p if subtract else A.dot(B) % p
    assert (bm.from_limb_array(c) == want).all()


def test_linalg_in_limbs_under_a_small_budget():
    """det, solve and inv modulo a 127-bit prime under a 256 KiB budget (their products in
    tiles) agree with the unconstrained ones, and inv is the inverse."""
    import modlin

    p = 2**127 - 1
    rng = random.Random(5)
    A = _block(rng, p, 90, 90, density=1.0)
    b = _block(rng, p, 90, 2)
    d, x, X = linalg.det(A, p), linalg.solve(A, b, p), linalg.inv(A, p)
    with modlin.limits(memory="256KiB"):
        assert linalg.det(A, p) == d
        assert (linalg.solve(A, b, p) == x).all()
        assert (linalg.inv(A, p) == X).all()
    assert (A.dot(X) % p == np.eye(90, dtype=object)).all()
    assert ((A.dot(x) - b) % p == 0).all()
