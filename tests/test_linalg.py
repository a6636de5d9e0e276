"""``modlin.linalg``: PLUQ, rank, det, inv, solve, nullspace, rref and trsm modulo p.

Every result is checked exactly, against python-flint (``nmod_mat`` below
``2**64``, ``fmpz_mod_mat`` above) and against the definitions: ``A[P][:, Q] =
L U`` with the rank profile matrix brute-forced from the ranks of leading
submatrices, ``A inv(A) = I``, ``A X = B``, ``A N = 0`` with ``N`` of full
column rank ``n - rank``, ``T X = B``. Most tests lower the recursion
thresholds (``PLUQ_THRESHOLD`` and ``TRIANGULAR_THRESHOLD``) so that matrices of
a dozen rows exercise several levels of the recursion.
"""

from __future__ import annotations

import flint
import galois
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import StepRecorder
from modlin import linalg
from modlin.linalg import _arith, _elimination, _pluq, _triangular

#: p = 2, 3; 31-, 50-bit primes (narrow int64 kernels); 2**61 - 1 and the largest prime
#: below 2**63 (wide int64 kernels); the largest prime below 2**64 and 2**127 - 1 (object arrays).
SMALL_PRIMES = [2, 3]
PRIMES = [2, 3, 2**31 - 1, 2**50 - 27, 2**61 - 1]
P63 = 2**63 - 25
P64 = 2**64 - 59
P127 = 2**127 - 1
BIG_PRIMES = [P63, P64, P127]


@pytest.fixture
def recursion(monkeypatch):
    """Thresholds of 4 rows: a 20 x 20 matrix goes three levels deep in every recursion."""
    for name in ("PLUQ_THRESHOLD", "PLUQ_THRESHOLD_BIG"):
        monkeypatch.setattr(_pluq, name, 4)
    for name in ("TRIANGULAR_THRESHOLD", "TRIANGULAR_THRESHOLD_BIG"):
        monkeypatch.setattr(_triangular, name, 4)


# ===================================================================== oracles and matrices

def rand(rng, shape, p) -> np.ndarray:
    """Uniform residues in [0, p) as an object array (186 random bits reduced: negligible bias)."""
    x = np.zeros(shape, dtype=object)
    for _ in range(3):
        x = (x << 62) + rng.integers(0, 2**62, shape).astype(object)
    return x % p


def low_rank(rng, m, n, r, p) -> np.ndarray:
    """A random m x n matrix of rank at most r (exactly r with high probability for large p)."""
    return (rand(rng, (m, r), p) @ rand(rng, (r, n), p)) % p


def native(A, p):
    """``A`` as a user would hold it: int64 below 2**63, Python ints above."""
    return np.asarray(A).astype(np.int64) if p < 2**63 else np.asarray(A, dtype=object)


def ints(X) -> np.ndarray:
    """Any result (ndarray, FieldArray) as an object array of Python ints."""
    X = np.asarray(X.view(np.ndarray) if isinstance(X, galois.FieldArray) else X)
    return np.array([int(e) for e in X.ravel()], dtype=object).reshape(X.shape)


def fmat(A, p):
    """python-flint matrix of ``A`` modulo ``p``."""
    A = ints(A)
    m, n = A.shape
    entries = [int(x) % p for x in A.ravel()]
    if p < 2**64:
        return flint.nmod_mat(m, n, entries, p)
    return flint.fmpz_mod_mat(m, n, entries, flint.fmpz_mod_ctx(p))


def from_flint(M) -> np.ndarray:
    return np.array([int(x) for x in M.entries()], dtype=object).reshape(M.nrows(), M.ncols())


def flint_rank(A, p) -> int:
    return fmat(A, p).rank() if min(np.shape(A)) else 0


def mulmod(A, B, p) -> np.ndarray:
    A, B = ints(A), ints(B)
    if A.shape[1] == 0:
        return np.zeros((A.shape[0], B.shape[1]), dtype=object)
    return (A @ B) % p


def rank_profile_matrix(A, p) -> set[tuple[int, int]]:
    """The pivots of the rank profile matrix, from the ranks of all leading submatrices."""
    m, n = A.shape
    rk = np.zeros((m + 1, n + 1), dtype=int)
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            rk[i, j] = flint_rank(A[:i, :j], p)
    # (i, j) is a pivot when the leading (i+1) x (j+1) rank gains 1 over the inclusion-exclusion
    return {(i, j) for i in range(m) for j in range(n)
            if rk[i + 1, j + 1] - rk[i, j + 1] - rk[i + 1, j] + rk[i, j] == 1}


def check_pluq(A, p, res, *, profile=True):
    """``res`` is a PLUQ of ``A`` modulo ``p`` with every documented property."""
    P, L, U, Q, r = res
    m, n = np.shape(A)
    A = ints(A) % p
    L, U = ints(L), ints(U)
    assert sorted(P.tolist()) == list(range(m)) and sorted(Q.tolist()) == list(range(n))
    assert L.shape == (m, r) and U.shape == (r, n)
    assert r == flint_rank(A, p)
    assert all(0 <= x < p for x in L.ravel()) and all(0 <= x < p for x in U.ravel())
    assert np.array_equal(np.triu(L[:r], 1), np.zeros((r, r), dtype=object)), "L not lower"
    assert all(L[i, i] == 1 for i in range(r)), "L not unit"
    assert np.array_equal(np.tril(U[:, :r], -1), np.zeros((r, r), dtype=object)), "U not upper"
    assert all(U[i, i] != 0 for i in range(r)), "U singular"
    assert np.array_equal(A[P][:, Q], mulmod(L, U, p)), "A[P][:, Q] != L @ U"
    assert list(P[r:]) == sorted(P[r:]) and list(Q[r:]) == sorted(Q[r:])
    if profile:
        assert set(zip(P[:r].tolist(), Q[:r].tolist())) == rank_profile_matrix(A, p)


def rref_oracle(A, p):
    """python-flint's reduced row echelon form and its pivot columns."""
    if min(np.shape(A)) == 0:
        return np.zeros(np.shape(A), dtype=object), []
    R = from_flint(fmat(A, p).rref()[0])
    pivots = [int(np.flatnonzero(row)[0]) for row in R if row.any()]
    return R, pivots


def solution_oracle(A, B, p):
    """The solution of ``A X = B`` that is zero at the non-pivot columns (rref of ``[A | B]``), or None."""
    n = np.shape(A)[1]
    R, pivots = rref_oracle(np.hstack([ints(A), ints(B)]), p)
    if any(c >= n for c in pivots):
        return None
    X = np.zeros((n, np.shape(B)[1]), dtype=object)
    for i, c in enumerate(pivots):
        X[c] = R[i, n:]
    return X


# matrices of a given shape and rank, with zero rows and columns among them
CASES = [
    # (m, n, rank)
    (1, 1, 1), (1, 1, 0), (12, 12, 12), (12, 12, 7), (13, 9, 9), (9, 14, 9), (17, 11, 5),
    (11, 19, 4), (16, 16, 1), (10, 10, 0), (20, 20, 20), (6, 21, 3),
]


def case_matrix(rng, m, n, r, p, zero_lines=True):
    A = low_rank(rng, m, n, r, p)
    if zero_lines and m > 2 and n > 2 and r < min(m, n):
        A[m // 2] = 0
        A[:, n // 3] = 0
    return A


# ===================================================================== pluq and rank

@pytest.mark.parametrize("p", PRIMES)
@pytest.mark.parametrize("m, n, r", CASES)
def test_pluq_recursive(recursion, rng, p, m, n, r):
    A = native(case_matrix(rng, m, n, r, p), p)
    check_pluq(A, p, linalg.pluq(A, p), profile=m * n <= 150)


@pytest.mark.parametrize("p", BIG_PRIMES)
@pytest.mark.parametrize("m, n, r", [(1, 1, 1), (9, 9, 9), (10, 7, 4), (6, 11, 6), (8, 8, 0)])
def test_pluq_large_moduli(recursion, rng, p, m, n, r):
    A = native(case_matrix(rng, m, n, r, p), p)
    res = linalg.pluq(A, p)
    assert res.L.dtype == (np.int64 if p < 2**63 else object)
    check_pluq(A, p, res)


def test_pluq_profile_not_transpositions(recursion):
    """A matrix whose rank profile matrix is not the identity pattern of a plain LU: the
    pivots must be (0, 2), (1, 0), (2, 1) and the dependent row 3 must come last."""
    A = np.array([[0, 0, 1, 5], [1, 2, 3, 4], [1, 3, 3, 4], [2, 5, 7, 13]])
    P, L, U, Q, r = linalg.pluq(A, 11)
    assert r == 3
    assert list(zip(P[:3].tolist(), Q[:3].tolist())) == [(0, 2), (1, 0), (2, 1)]
    assert P[3] == 3 and Q[3] == 3
    check_pluq(A, 11, (P, L, U, Q, r))


@pytest.mark.parametrize("m, n, r", [(127, 127, 127), (129, 129, 129), (128, 130, 100), (131, 128, 128),
                                     (200, 150, 140), (258, 258, 258)])
def test_default_thresholds(rng, m, n, r):
    """Sizes around the default base-case (128) and TRSM (128) thresholds, p = 2**31 - 1."""
    assert _pluq.PLUQ_THRESHOLD == 128 and _triangular.TRIANGULAR_THRESHOLD == 128
    assert _pluq.PLUQ_THRESHOLD_BIG == 64 and _triangular.TRIANGULAR_THRESHOLD_BIG == 64
    p = 2**31 - 1
    A = native(case_matrix(rng, m, n, r, p, zero_lines=False), p)
    res = linalg.pluq(A, p)
    check_pluq(A, p, res, profile=False)
    if m == n:
        F = fmat(A, p)
        assert linalg.det(A, p) == int(F.det())
        if r == n:
            assert np.array_equal(ints(linalg.inv(A, p)), from_flint(F.inv()))


@pytest.mark.parametrize("p", PRIMES + BIG_PRIMES)
def test_rank_det_against_flint(recursion, rng, p):
    for m, n, r in CASES:
        A = native(case_matrix(rng, m, n, r, p), p)
        F = fmat(A, p)
        assert linalg.rank(A, p) == F.rank()
        if m == n:
            assert linalg.det(A, p) == int(F.det())


def test_det_sign_of_permutations():
    """Odd row and column permutations: the sign must follow (p = 11, det = -1 for a swap)."""
    J = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1]])
    assert linalg.det(J, 11) == 10
    assert linalg.det(np.array([[0, 0, 2], [0, 3, 0], [5, 0, 0]]), 11) == (-30) % 11
    assert linalg.det(J, 2) == 1


# ===================================================================== inverse

@pytest.mark.parametrize("p", PRIMES + BIG_PRIMES)
def test_inv(recursion, rng, p):
    for n in (1, 2, 7, 16, 21):
        A = native(case_matrix(rng, n, n, n, p), p)
        if flint_rank(A, p) < n:  # possible for p = 2, 3
            continue
        X = linalg.inv(A, p)
        assert X.dtype == (np.int64 if p < 2**63 else object)
        assert np.array_equal(mulmod(A, X, p), np.eye(n, dtype=int).astype(object))
        assert np.array_equal(mulmod(X, A, p), np.eye(n, dtype=int).astype(object))
        assert np.array_equal(ints(X), from_flint(fmat(A, p).inv()))


def test_inv_permuted(recursion, rng):
    """A nonsingular matrix with zero leading minors: P and Q are not the identity."""
    p = 2**31 - 1
    A = native(rand(rng, (13, 13), p), p)
    A[:6, :5] = 0
    P, _, _, Q, r = linalg.pluq(A, p)
    assert r == 13 and (list(P) != list(range(13)) or list(Q) != list(range(13)))
    assert np.array_equal(mulmod(A, linalg.inv(A, p), p), np.eye(13, dtype=int).astype(object))


# ===================================================================== solve

@pytest.mark.parametrize("p", PRIMES + [P127])
def test_solve_consistent(recursion, rng, p):
    for m, n, r in CASES:
        A = native(case_matrix(rng, m, n, r, p), p)
        B = mulmod(A, rand(rng, (n, 3), p), p)
        X = linalg.solve(A, native(B, p), p)
        assert X.shape == (n, 3)
        assert np.array_equal(mulmod(A, X, p), B)
        assert np.array_equal(ints(X), solution_oracle(A, B, p))


def test_solve_vector_and_square(recursion, rng):
    p = 2**50 - 27
    A = native(rand(rng, (11, 11), p), p)
    b = native(rand(rng, (11,), p), p)
    x = linalg.solve(A, b, p)
    assert x.shape == (11,)
    assert np.array_equal(mulmod(A, x[:, None], p)[:, 0], ints(b))
    assert np.array_equal(ints(x), from_flint(fmat(A, p).solve(fmat(b[:, None], p)))[:, 0])


def test_solve_free_variables_zero(recursion):
    """Columns 1 and 3 depend on column 0 and 2: the returned solution is zero there."""
    A = np.array([[1, 2, 0, 0], [0, 0, 1, 3], [1, 2, 1, 3]])
    x = linalg.solve(A, [4, 5, 9], 7)
    assert x.tolist() == [4, 0, 5, 0]


@pytest.mark.parametrize("p", [3, 2**31 - 1, P127])
def test_solve_inconsistent(recursion, rng, p):
    A = case_matrix(rng, 10, 8, 4, p)  # row 5 is zero
    B = mulmod(A, rand(rng, (8, 3), p), p)
    B[5, 1] = 1
    assert solution_oracle(A, B[:, 1:2], p) is None
    with pytest.raises(ValueError, match=r"no solution modulo .*column 1 of B .*\(rank 4\)"):
        linalg.solve(native(A, p), native(B, p), p)


def test_solve_zero_matrix():
    assert linalg.solve(np.zeros((2, 3), dtype=int), [0, 0], 5).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match=r"column 0 of B .*\(rank 0\)"):
        linalg.solve(np.zeros((2, 3), dtype=int), [0, 1], 5)


# ===================================================================== nullspace and rref

@pytest.mark.parametrize("p", PRIMES + [P127])
def test_nullspace(recursion, rng, p):
    for m, n, r in CASES:
        A = native(case_matrix(rng, m, n, r, p), p)
        rk = flint_rank(A, p)
        N = linalg.nullspace(A, p)
        assert N.shape == (n, n - rk)
        assert not mulmod(A, N, p).any()
        assert flint_rank(N, p) == n - rk
        if p < 2**64 and m and n:
            FN, nullity = fmat(A, p).nullspace()
            assert nullity == n - rk
            assert np.array_equal(ints(N), from_flint(FN)[:, :nullity])
        K = linalg.nullspace(A, p, left=True)
        assert K.shape == (m - rk, m)
        assert not mulmod(K, A, p).any()
        assert flint_rank(K, p) == m - rk
        assert np.array_equal(ints(K), ints(linalg.nullspace(np.asarray(A).T, p)).T)


@pytest.mark.parametrize("p", PRIMES + BIG_PRIMES)
def test_rref(recursion, rng, p):
    for m, n, r in CASES:
        A = native(case_matrix(rng, m, n, r, p), p)
        R, pivots = linalg.rref(A, p)
        R_ref, piv_ref = rref_oracle(A, p)
        assert pivots.tolist() == piv_ref
        assert np.array_equal(ints(R), R_ref)


# ===================================================================== trsm

def triangular(rng, k, p, lower, unit, garbage=True):
    T = rand(rng, (k, k), p)
    for i in range(k):
        T[i, i] = 1 if unit else (T[i, i] or 1)
    keep = np.tril(np.ones((k, k), dtype=bool)) if lower else np.triu(np.ones((k, k), dtype=bool))
    clean = np.where(keep, T, 0)
    noisy = np.where(keep, T, rand(rng, (k, k), p)) if garbage else clean
    if unit and garbage:
        for i in range(k):
            noisy[i, i] = 5  # not read with unit_diagonal=True
    return clean, noisy


@pytest.mark.parametrize("p", [2, 2**31 - 1, 2**61 - 1, P127])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_trsm(recursion, rng, p, side, lower, unit):
    k, w = 13, 6
    clean, noisy = triangular(rng, k, p, lower, unit)
    B = rand(rng, (k, w) if side == "left" else (w, k), p)
    X = linalg.trsm(native(noisy, p), native(B, p), p, side=side, lower=lower, unit_diagonal=unit)
    assert X.shape == B.shape
    got = mulmod(clean, X, p) if side == "left" else mulmod(X, clean, p)
    assert np.array_equal(got, B)


def test_trsm_vector_and_composite(recursion, rng):
    p = 2**31 - 1
    clean, noisy = triangular(rng, 9, p, True, False)
    b = rand(rng, (9,), p)
    x = linalg.trsm(native(noisy, p), native(b, p), p)
    assert x.shape == (9,) and np.array_equal(mulmod(clean, x[:, None], p)[:, 0], b)
    # composite moduli: a unit diagonal, or diagonal entries coprime to m
    m = 2**40
    clean, noisy = triangular(rng, 9, m, False, True)
    X = linalg.trsm(native(noisy, m), native(b[:, None], m), m, lower=False, unit_diagonal=True)
    assert np.array_equal(mulmod(clean, X, m), b[:, None] % m)
    T = np.array([[3, 0], [4, 5]])
    X = linalg.trsm(T, [[1], [2]], m)  # 3 and 5 are units modulo 2**40
    assert np.array_equal(mulmod(T, X, m), np.array([[1], [2]], dtype=object))


# ===================================================================== edge cases

@pytest.mark.parametrize("p", [5, P127])
def test_empty(p):
    for shape in [(0, 0), (0, 4), (3, 0)]:
        A = np.zeros(shape, dtype=np.int64 if p < 2**63 else object)
        m, n = shape
        P, L, U, Q, r = linalg.pluq(A, p)
        assert r == 0 and L.shape == (m, 0) and U.shape == (0, n) and P.shape == (m,) and Q.shape == (n,)
        assert linalg.rank(A, p) == 0
        assert linalg.nullspace(A, p).shape == (n, n)
        assert linalg.nullspace(A, p, left=True).shape == (m, m)
        R, piv = linalg.rref(A, p)
        assert R.shape == shape and piv.shape == (0,)
        assert linalg.solve(A, np.zeros((m, 2), dtype=int), p).shape == (n, 2)
    assert linalg.det(np.zeros((0, 0)), p) == 1
    assert linalg.inv(np.zeros((0, 0)), p).shape == (0, 0)
    assert linalg.trsm(np.zeros((0, 0)), np.zeros((0, 3)), p).shape == (0, 3)


def test_one_by_one():
    assert linalg.rank([[0]], 7) == 0 and linalg.rank([[14]], 7) == 0 and linalg.rank([[3]], 7) == 1
    assert linalg.det([[3]], 7) == 3 and linalg.inv([[3]], 7).tolist() == [[5]]
    assert linalg.solve([[3]], [1], 7).tolist() == [5]
    assert linalg.nullspace([[0]], 7).tolist() == [[1]] and linalg.nullspace([[2]], 7).shape == (1, 0)


def test_zero_and_rank_one(recursion, rng):
    p = 2**31 - 1
    Z = np.zeros((9, 14), dtype=np.int64)
    P, _, _, Q, r = linalg.pluq(Z, p)
    assert r == 0 and list(P) == list(range(9)) and list(Q) == list(range(14))
    assert linalg.rref(Z, p)[1].size == 0
    assert np.array_equal(ints(linalg.nullspace(Z, p)), np.eye(14, dtype=int).astype(object))
    u = native(rand(rng, (9, 1), p), p)
    v = native(rand(rng, (1, 14), p), p)
    A = (u.astype(object) @ v.astype(object)) % p
    assert linalg.rank(native(A, p), p) == 1
    check_pluq(native(A, p), p, linalg.pluq(native(A, p), p), profile=False)


# ===================================================================== inputs

def test_inputs_not_modified_and_unreduced(recursion, rng):
    p = 2**31 - 1
    A = rng.integers(-2**62, 2**62, (10, 12))  # negative and unreduced
    A0 = A.copy()
    check_pluq(A, p, linalg.pluq(A, p), profile=False)
    assert linalg.rank(A, p) == flint_rank(A, p)
    linalg.nullspace(A, p)
    linalg.rref(A, p)
    linalg.solve(A, A[:, :2], p)
    assert np.array_equal(A, A0)
    S = A[:, :10].copy()
    S0 = S.copy()
    linalg.inv(S, p), linalg.det(S, p), linalg.trsm(S, S, p)
    assert np.array_equal(S, S0)


def test_input_types(recursion, rng):
    p = 2**31 - 1
    A = rng.integers(0, 2**40, (9, 9))
    expect = linalg.det(A, p)
    assert linalg.det(A.astype(object), p) == expect
    assert linalg.det(A.astype(np.float64), p) == expect
    assert linalg.det(A.astype(np.uint64), p) == expect
    assert linalg.det(A.tolist(), p) == expect
    assert linalg.det(A - 5 * p, p) == expect
    assert linalg.det(A.astype(object) + 2**70, p) == linalg.det((A + 2**70 % p) % p, p)


def test_non_contiguous_views(recursion, rng):
    p = 2**50 - 27
    big = native(rand(rng, (30, 40), p), p)
    for A in (big[::2, ::3], big[3:20, 5:30].T, np.asfortranarray(big[:14, :14])):
        assert not A.flags.c_contiguous
        check_pluq(A, p, linalg.pluq(A, p), profile=False)
        if A.shape[0] == A.shape[1]:
            assert np.array_equal(mulmod(A, linalg.inv(A, p), p), np.eye(A.shape[0], dtype=int).astype(object))


# ===================================================================== galois

@pytest.fixture(scope="module", params=[7, P127], ids=lambda p: f"GF({p})")
def GF(request):
    return galois.GF(request.param)


def test_field_arrays(recursion, rng, GF):
    p = int(GF.order)
    A = GF(native(rand(rng, (8, 8), p), p) if p < 2**63 else rand(rng, (8, 8), p))
    while np.linalg.matrix_rank(A) < 8:  # galois' own rank
        A = GF(native(rand(rng, (8, 8), p), p) if p < 2**63 else rand(rng, (8, 8), p))
    A0 = A.copy()
    X = linalg.inv(A)
    assert type(X) is GF and np.array_equal(A @ X, GF.Identity(8))
    assert np.array_equal(X, np.linalg.inv(A))
    d = linalg.det(A)
    assert type(d) is GF and d == np.linalg.det(A)
    assert linalg.rank(A) == 8 and linalg.rank(A, p) == 8
    P, L, U, Q, _ = linalg.pluq(A)
    assert type(L) is GF and type(U) is GF and np.array_equal(A[P][:, Q], L @ U)
    b = A[:, 0]
    x = linalg.solve(A, b)
    assert type(x) is GF and np.array_equal(A @ x, b)
    S = A.copy()
    S[:, 3] = S[:, 1] + S[:, 2]
    N = linalg.nullspace(S)
    assert type(N) is GF and N.shape == (8, 1) and not (S @ N).any()
    R, piv = linalg.rref(S)
    assert type(R) is GF and np.array_equal(R, S.row_reduce()) and piv.tolist() == [0, 1, 2, 4, 5, 6, 7]
    T = A.copy()
    T[np.arange(8), np.arange(8)] = 1
    y = linalg.trsm(T, b)
    assert type(y) is GF and np.array_equal(GF(np.tril(T.view(np.ndarray))) @ y, b)
    assert np.array_equal(A, A0)


def test_field_errors(GF):
    A = GF.Identity(3)
    with pytest.raises(ValueError, match="does not match"):
        linalg.rank(A, 11 if int(GF.order) != 11 else 13)
    with pytest.raises(ValueError, match="different fields"):
        linalg.solve(A, galois.GF(5).Identity(3))
    with pytest.raises(ValueError, match="extension field"):
        linalg.rank(galois.GF(2**3).Identity(2))


# ===================================================================== errors

@pytest.mark.parametrize("fn, args", [
    (linalg.pluq, ()), (linalg.rank, ()), (linalg.det, ()), (linalg.inv, ()),
    (linalg.nullspace, ()), (linalg.rref, ()), (linalg.solve, ([1, 2],)),
])
def test_composite_modulus_refused(fn, args):
    A = [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match=rf"{fn.__name__} needs a prime modulus: p = 15 is not prime"):
        fn(A, *args, 15)
    with pytest.raises(ValueError, match=r"p = 18446744073709551616 is not prime, so Z/18446744073709551616Z"):
        fn(A, *args, 2**64)


def test_singular_inverse():
    with pytest.raises(ValueError, match=r"singular modulo 7: its rank is 1, not 2"):
        linalg.inv([[1, 2], [2, 4]], 7)
    with pytest.raises(ValueError, match=r"singular modulo 2: its rank is 1, not 2"):
        linalg.inv([[1, 3], [1, 1]], 2)
    with pytest.raises(ValueError, match=r"its rank is 0, not 3"):
        linalg.inv(np.zeros((3, 3), dtype=int), 2**127 - 1)


@pytest.mark.parametrize("call, match", [
    (lambda: linalg.rank([1, 2, 3], 7),
     r"rank: A must be a 2-D matrix or a stack of them, \(\.\.\., m, n\), got an array of shape \(3,\)"),
    (lambda: linalg.pluq(np.zeros((2, 2, 2)), 7), r"pluq: A must be a 2-D matrix"),
    (lambda: linalg.rref(5, 7), r"rref: A must be a 2-D matrix"),
    (lambda: linalg.nullspace([1], 7), r"nullspace: A must be a 2-D matrix"),
    (lambda: linalg.det([[1, 2, 3], [4, 5, 6]], 7), r"det: A must be square, got shape \(2, 3\)"),
    (lambda: linalg.inv([[1, 2]], 7), r"inv: A must be square"),
    (lambda: linalg.solve([[1, 2], [3, 4]], [1, 2, 3], 7), r"solve: A has shape \(2, 2\), so B must have 2 rows"),
    (lambda: linalg.solve([[1, 2], [3, 4]], np.ones((2, 3, 2)), 7), r"B must have 2 rows"),
    (lambda: linalg.solve([1, 2], [1], 7), r"solve: A must be a 2-D matrix"),
    (lambda: linalg.trsm([[1, 2]], [[1]], 7), r"trsm: T must be square"),
    (lambda: linalg.trsm(np.eye(2), np.ones((3, 1)), 7), r"T is 2x2, so B must have 2 rows"),
    (lambda: linalg.trsm(np.eye(2), np.ones((2, 3)), 7, side="right"), r"B must have 2 columns"),
    (lambda: linalg.trsm(np.eye(2), np.ones(2), 7, side="right"), r"B must be a matrix, got shape \(2,\)"),
    (lambda: linalg.trsm(np.eye(2), np.ones((2, 1)), 7, side="top"), r"side must be 'left' or 'right'"),
    (lambda: linalg.trsm([[1, 0], [1, 7]], [[1], [1]], 7), r"singular modulo 7: diagonal entry 1 is zero"),
    (lambda: linalg.trsm([[3, 0], [1, 2]], [[1], [1]], 12),
     r"singular modulo 12: diagonal entry 0 is not invertible \(gcd with p is 3\)"),
    (lambda: linalg.rank([[0.5, 1]], 7), r"non-integral floats"),
    (lambda: linalg.rank([[np.nan, 1]], 7), r"NaN or Inf"),
    (lambda: linalg.rank([[1, 2]], 1), r"at least 2"),
    (lambda: linalg.det([[1]], 2**127), r"not prime"),
])
def test_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call, match", [
    (lambda: linalg.rank([[1j, 1]], 7), r"complex"),
    (lambda: linalg.rank([["a", "b"]], 7), r"not numeric"),
    (lambda: linalg.rank([[1, 2]], 7.0), r"modulus must be an integer"),
    (lambda: linalg.pluq([[1, 2]]), r"modulus p is required"),  # rank without p works over Q
    (lambda: linalg.rank(np.array([[1, 2.5]], dtype=object), 7), r"object arrays must hold"),
])
def test_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


# ===================================================================== kernels

@pytest.mark.parametrize("p", [3, 2**31 - 1, 2**52 - 47, 2**52 + 21, 2**61 - 1, P63])
def test_mulmod_extremes(p):
    """The scalar kernels at the ends of their ranges, against Python ints."""
    vals = [0, 1, 2, p // 2, p // 2 + 1, p - 2, p - 1, (p * 3) // 7, 2**26 % p, (2**50 + 12345) % p]
    pinv = 1.0 / p
    wide = _arith.is_wide(p)
    for a in vals:
        for b in vals:
            assert _arith.mulmod(np.int64(a), np.int64(b), np.int64(p), pinv, wide) == a * b % p
            assert _arith.submul(np.int64(b), np.int64(a), np.int64(b), np.int64(p), pinv, wide) == (b - a * b) % p
        if a:
            assert _arith.inverse(np.int64(a), np.int64(p)) * a % p == 1


@pytest.mark.parametrize("p", [7, 2**61 - 1])
def test_object_base_case_matches_kernel(rng, p):
    """The object-array base case (used above 2**63) gives the int64 kernel's packed result."""
    A = case_matrix(rng, 9, 11, 5, p)
    a64, aobj = native(A, p), np.asarray(A, dtype=object).copy()
    P1, Q1, r1 = _elimination.pluq_base(a64, p)
    P2, Q2, r2 = _elimination.pluq_base(aobj, p)
    assert r1 == r2 == 5 and np.array_equal(P1, P2) and np.array_equal(Q1, Q2)
    assert np.array_equal(ints(a64), ints(aobj))
    T, _ = triangular(rng, 8, p, True, False)
    assert np.array_equal(ints(_elimination.lower_inverse(native(T, p), p, False)),
                          ints(_elimination.lower_inverse(np.asarray(T, dtype=object), p, False)))


# ===================================================================== properties

@st.composite
def systems(draw):
    p = draw(st.sampled_from([2, 3, 5, 65521, 2**31 - 1, 2**61 - 1]))
    m = draw(st.integers(0, 9))
    n = draw(st.integers(0, 9))
    r = draw(st.integers(0, min(m, n)))
    seed = draw(st.integers(0, 2**32 - 1))
    return p, m, n, r, seed


@settings(max_examples=40)
@given(systems(), st.sampled_from([1, 2, 3]))
def test_property_pluq(sys_, t):
    p, m, n, r, seed = sys_
    rng = np.random.default_rng(seed)
    A = native(low_rank(rng, m, n, r, p), p)
    old = (_pluq.PLUQ_THRESHOLD, _triangular.TRIANGULAR_THRESHOLD, _pluq.PLUQ_THRESHOLD_BIG,
           _triangular.TRIANGULAR_THRESHOLD_BIG)
    _pluq.PLUQ_THRESHOLD = _triangular.TRIANGULAR_THRESHOLD = t
    _pluq.PLUQ_THRESHOLD_BIG = _triangular.TRIANGULAR_THRESHOLD_BIG = t
    try:
        res = linalg.pluq(A, p)
        N = linalg.nullspace(A, p)
        R, piv = linalg.rref(A, p)
        B = mulmod(A, rand(rng, (n, 2), p), p)
        X = linalg.solve(A, native(B, p), p)
    finally:
        (_pluq.PLUQ_THRESHOLD, _triangular.TRIANGULAR_THRESHOLD, _pluq.PLUQ_THRESHOLD_BIG,
         _triangular.TRIANGULAR_THRESHOLD_BIG) = old
    check_pluq(A, p, res)
    rk = res.rank
    assert N.shape == (n, n - rk) and not mulmod(A, N, p).any() and flint_rank(N, p) == n - rk
    assert piv.tolist() == sorted(res.Q[:rk].tolist())
    assert np.array_equal(ints(R), rref_oracle(A, p)[0])
    assert np.array_equal(mulmod(A, X, p), B) and not ints(X)[np.setdiff1d(np.arange(n), piv)].any()


# ===================================================================== bench table

def test_bench_table():
    """``modlin bench --table linalg`` at a tiny size: every row timed, flint agrees, galois runs."""
    import io

    from modlin._tools.bench import products as _bench

    buf = io.StringIO()
    rows = _bench.run_linalg_table(sizes=[24], bits=[20, 31], repeats=1, galois=False, out=buf, progress=None)
    text = buf.getvalue()
    assert [(r["bits"], r["function"]) for r in rows] == [(b, f) for b in (20, 31) for f in _bench.LINALG_FUNCTIONS]
    assert all(r["flint_exact"] and r["modlin_s"] > 0 and r["modlin_matmul"] > 0 for r in rows)
    assert "| 24 | 31 | inv |" in text and "| 24 | 20 | charpoly |" in text and "| 24 | 31 | matrix_power |" in text
    assert "equals python-flint's in 14 of 14 cases" in text
    rows = _bench.run_linalg_table(sizes=[8], bits=[20], functions=["det"], repeats=1, flint=False,
                                   galois_timeout=120, out=buf, progress=None)
    assert rows[0]["galois_status"] == "ok" and rows[0]["galois_s"] > 0
    with pytest.raises(ValueError, match="unknown linalg function 'lu'"):
        _bench.run_linalg_table(sizes=[8], functions=["lu"], out=buf, progress=None)


# ===================================================================== progress

def same(a, b) -> bool:
    """Equal results: arrays entry by entry, tuples (``PLUQ``, ``rref``'s) item by item."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b)) and np.asarray(a).dtype == np.asarray(b).dtype


def progress_calls(p, rng) -> dict:
    """A call of every function on generic matrices, large enough for several levels of the
    recursions under the ``recursion`` fixture; stacks as ``numpy.linalg`` takes them."""
    A = native(rand(rng, (20, 20), p), p)
    S = native(rand(rng, (3, 12, 12), p), p)
    B = native(rand(rng, (20, 3), p), p)
    W = native(rand(rng, (20, 8), p), p)  # past DOTS_MAX_COLUMNS: big-prime TRSMs then recurse
    return {
        "det": lambda: linalg.det(A, p),
        "rank": lambda: linalg.rank(S, p),
        "inv": lambda: linalg.inv(S, p),
        "solve": lambda: linalg.solve(A, B, p),
        "solve-stack": lambda: linalg.solve(S, B[:12, 0], p),  # one vector for every matrix
        "nullspace": lambda: linalg.nullspace(A[:9], p),
        "nullspace-left": lambda: linalg.nullspace(A[:, :9], p, left=True),
        "rref": lambda: linalg.rref(A[:9], p),
        "pluq": lambda: linalg.pluq(A, p),
        "trsm": lambda: linalg.trsm(A, W, p, unit_diagonal=True),
        "trsm-right": lambda: linalg.trsm(A, W.T, p, side="right", lower=False, unit_diagonal=True),
        "matrix_power": lambda: linalg.matrix_power(A, 13, p),
        "matrix_power-inverse": lambda: linalg.matrix_power(S, -5, p),
    }


PROGRESS_CALLS = ["det", "rank", "inv", "solve", "solve-stack", "nullspace", "nullspace-left", "rref", "pluq",
                  "trsm", "trsm-right", "matrix_power", "matrix_power-inverse"]


@pytest.mark.parametrize("p", [2**31 - 1, P127], ids=["31bit", "127bit"])
@pytest.mark.parametrize("name", PROGRESS_CALLS)
def test_progress_one_display_per_call(recursion, monkeypatch, capsys, rng, p, name):
    """With progress on, a call the model expects to run long writes one line on stderr (tqdm
    hidden: the plain line, with its elapsed and remaining times) up to 100 %, and none of the
    products inside it a bar of its own, though each of them is then expected to run long
    too; a short call and progress off write nothing; the results are the same."""
    import re
    import sys

    import modlin
    from modlin._runtime import progress as _progress

    monkeypatch.setitem(sys.modules, "tqdm", None)
    call = progress_calls(p, rng)[name]
    off = call()
    with modlin.limits(progress=True):
        assert same(call(), off)  # a 20 x 20 matrix: far below two seconds
        assert capsys.readouterr().err == ""
        monkeypatch.setattr(_progress, "_gemm_rate", lambda: 1.0)  # one multiply-add a second: all is long
        on = call()
    err = capsys.readouterr().err
    assert same(on, off)
    fn = name.split("-")[0]
    count = {"rank": ", 3 matrices", "inv": ", 3 matrices", "solve-stack": ", 3 matrices",
             "matrix_power-inverse": ", 3 matrices"}.get(name, "")
    desc = f"modlin.linalg.{fn} mod a {p.bit_length()}-bit p{count}"
    assert err.startswith(f"\r{desc} [") and err.endswith(f"\r{desc} [100/100] done\n"), err
    assert err.count("\n") == 1 and "modlin.matmul" not in err
    assert re.search(r"\[[0-9]+/100\] \[00:[0-9]{2}<(00:[0-9]{2}|\?)\]", err), err
    with modlin.limits(progress=False):
        assert same(call(), off)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("p", [2**31 - 1, 2**61 - 1, P127], ids=["31bit", "61bit", "127bit"])
@pytest.mark.parametrize("name", PROGRESS_CALLS)
def test_progress_follows_the_modelled_work(recursion, monkeypatch, rng, p, name):
    """The display counts percent of the modelled cost, each product, elimination and inverse
    advancing it by its own cost as it finishes: on a generic matrix the model foresaw the
    whole work (the count reaches 99 before the call returns), and the count never passes 100."""
    import modlin
    from modlin._runtime import progress as _progress

    recorder = StepRecorder()
    steps = recorder.steps

    monkeypatch.setattr(_progress, "bar", lambda *args, **kwargs: recorder)
    monkeypatch.setattr(_progress, "MIN_SECONDS", -1.0)
    with modlin.limits(progress=True):
        progress_calls(p, rng)[name]()
    assert sum(steps) == 100 and len(steps) > 3 and steps[-1] <= 2, steps


def test_progress_of_a_call_that_raises(recursion, monkeypatch, capsys, rng):
    """A singular matrix met after its PLUQ: the line stops where the work did, not at 'done'."""
    import sys

    import modlin
    from modlin._runtime import progress as _progress

    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr(_progress, "MIN_SECONDS", -1.0)
    p = 2**31 - 1
    A = native(low_rank(rng, 20, 20, 15, p), p)
    with modlin.limits(progress=True), pytest.raises(linalg.LinAlgError, match="rank is 15"):
        linalg.inv(A, p)
    err = capsys.readouterr().err
    assert err.startswith("\rmodlin.linalg.inv mod a 31-bit p [") and err.count("\n") == 1
    assert "done" not in err and "[100/100]" not in err


@pytest.mark.parametrize("p", [P127, 2**255 - 19], ids=["127bit", "255bit"])
def test_big_prime_steps_side_by_side(recursion, rng, monkeypatch, p):
    """The independent steps of the recursions beyond 64 bits (PLUQ's two triangular solves and
    its two Schur complements, a triangle's two halves' inverses), forced side by side on
    small matrices: they ran on two threads, and det, solve, inv, rank and nullspace match
    python-flint on full-rank and rank-deficient matrices."""
    import threading

    import modlin
    from modlin._engines import threads as _threads

    monkeypatch.setattr(_threads, "MIN_WORK", 0)
    seen = []
    original = _arith.side_by_side

    def spy(steps, work):
        idents = set()

        def traced(step):
            def run():
                idents.add(threading.get_ident())
                step()
            return run

        out = original([traced(s) for s in steps], work)
        seen.append(len(idents))
        return out

    monkeypatch.setattr(_arith, "side_by_side", spy)
    with modlin.limits(threads=2):
        A, D = rand(rng, (24, 24), p), low_rank(rng, 21, 23, 13, p)
        B = rand(rng, (24, 5), p)
        assert linalg.det(A, p) == int(fmat(A, p).det())
        X = linalg.solve(A, B, p)
        assert (mulmod(A, X, p) == B).all()
        assert (from_flint(fmat(A, p).inv()) == ints(linalg.inv(A, p))).all()
        assert linalg.rank(D, p) == flint_rank(D, p) == 13
        N = linalg.nullspace(D, p)
        assert N.shape == (23, 10) and not mulmod(D, N, p).any()
    assert seen and max(seen) == 2
