"""``modlin.linalg``: charpoly, minpoly, matrix_power, stacked inputs and LinAlgError.

Oracles: python-flint's ``charpoly`` / ``minpoly`` / ``**`` (``nmod_mat`` below
``2**64``, ``fmpz_mod_mat`` above), galois' ``characteristic_poly`` /
``minimal_poly`` / ``numpy.linalg.matrix_power``, and with Python ints a
Berkowitz characteristic polynomial, the Cayley-Hamilton identity and
``minpoly(A)(A) = 0``. Both algorithms run: the block Krylov path at its
default threshold (``n = 200``) and, with ``MIN_BLOCK_KRYLOV`` lowered, on
small matrices; the Krylov stages everywhere else (and where a block Krylov
basis is singular: identity, zero, derogatory matrices).
"""

from __future__ import annotations

import flint
import galois
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from test_linalg import fmat, native, rand

from conftest import StepRecorder
from modlin import linalg
from modlin.linalg import _charpoly

P61, P63, P127 = 2**61 - 1, 2**63 - 25, 2**127 - 1
#: 2, 3 and primes of 31, 61, 63 and 127 bits
PRIMES = [2, 3, 2**31 - 1, P61, P63, P127]


@pytest.fixture
def block(monkeypatch):
    """The block Krylov path from n = 4 on (with 2 to 4 vectors), so small matrices take it."""
    monkeypatch.setattr(_charpoly, "MIN_BLOCK_KRYLOV", 4)


# ===================================================================== oracles and matrices

def coeffs(f) -> list[int]:
    return [int(c) for c in f.coeffs()]


def flint_charpoly(A, p) -> list[int]:
    return coeffs(fmat(A, p).charpoly()) if len(A) else [1]


def flint_minpoly(A, p) -> list[int]:
    return coeffs(fmat(A, p).minpoly()) if len(A) else [1]


def berkowitz(A, p) -> list[int]:
    """det(xI - A) mod p by Berkowitz's division-free algorithm, on Python ints (low to high)."""
    A = [[int(x) % p for x in row] for row in np.asarray(A, dtype=object)]
    n = len(A)
    v = [1]  # charpoly of the leading 0 x 0 block, high to low
    for r in range(n):
        a = A[r][r]
        R = A[r][:r]
        C = [A[i][r] for i in range(r)]
        M = [row[:r] for row in A[:r]]
        # Toeplitz column: 1, -a, -R C, -R M C, ...
        t = [1, -a]
        w = C
        for _ in range(r):
            t.append(-sum(x * y for x, y in zip(R, w)))
            w = [sum(M[i][j] * w[j] for j in range(r)) for i in range(r)]
        v = [sum(t[i - j] * v[j] for j in range(len(v)) if 0 <= i - j < len(t)) % p for i in range(r + 2)]
    return v[::-1]


def evaluate(f: list[int], A, p) -> np.ndarray:
    """f(A) mod p with Python ints (Horner)."""
    A = np.asarray(A, dtype=object) % p
    n = len(A)
    R = np.zeros((n, n), dtype=object)
    eye = np.eye(n, dtype=int).astype(object)
    for c in reversed(f):
        R = (R.dot(A) + c * eye) % p
    return R


def divides(g: list[int], f: list[int], p) -> bool:
    return not _charpoly._pmod(f, g, p)


def companion(c: list[int], p) -> np.ndarray:
    """The companion matrix of x**n + c[n-1] x**(n-1) + ... + c[0]."""
    n = len(c)
    C = np.zeros((n, n), dtype=object)
    C[np.arange(1, n), np.arange(n - 1)] = 1
    if n:
        C[:, -1] = [(-x) % p for x in c]
    return C


def structured(kind, n, p, rng) -> np.ndarray:
    """Random, nilpotent, diagonalizable, companion, identity, zero or derogatory n x n matrices."""
    if kind == "random":
        return rand(rng, (n, n), p)
    if kind == "identity":
        return np.eye(n, dtype=int).astype(object)
    if kind == "zero":
        return np.zeros((n, n), dtype=object)
    if kind == "companion":
        return companion(list(rand(rng, n, p)), p)
    S = rand(rng, (n, n), p)
    while fmat(S, p).rank() < n:
        S = rand(rng, (n, n), p)
    Si = np.array(linalg.inv(native(S, p), p), dtype=object)
    if kind == "nilpotent":  # strictly upper triangular, conjugated
        D = np.triu(rand(rng, (n, n), p), 1)
    elif kind == "diagonalizable":  # repeated eigenvalues among few
        D = np.diag(rand(rng, n, min(p, 3)) if n else np.zeros(0, dtype=object))
    elif n < 4:  # derogatory from n = 2 on: a scalar matrix
        D = np.eye(n, dtype=int).astype(object) * int(rand(rng, (), p))
    else:  # derogatory: three equal blocks and one more, conjugated
        k = n // 4
        B = rand(rng, (k, k), p)
        D = np.zeros((n, n), dtype=object)
        for s in range(0, 3 * k, k):
            D[s:s + k, s:s + k] = B
        D[3 * k:, 3 * k:] = rand(rng, (n - 3 * k, n - 3 * k), p)
    return (S.dot(D) % p).dot(Si) % p


KINDS = ["random", "nilpotent", "diagonalizable", "companion", "identity", "zero", "derogatory"]


def check(A, p):
    """charpoly and minpoly of A against flint, with their documented dtype."""
    A = native(A, p)
    A0 = A.copy()
    f, g = linalg.charpoly(A, p), linalg.minpoly(A, p)
    assert f.dtype == g.dtype == (np.int64 if p < 2**63 else object)
    assert f.tolist() == flint_charpoly(A, p)
    assert g.tolist() == flint_minpoly(A, p)
    assert np.array_equal(A, A0)
    return f.tolist(), g.tolist()


# ===================================================================== charpoly and minpoly

@pytest.mark.parametrize("p", PRIMES)
@pytest.mark.parametrize("kind", KINDS)
def test_kinds_stages(rng, p, kind):
    for n in (0, 1, 2, 9):
        f, g = check(structured(kind, n, p, rng), p)
        assert divides(g, f, p)
    if kind == "derogatory":
        assert len(g) < len(f)


@pytest.mark.parametrize("p", [5, 2**31 - 1, P61, P63, P127])
@pytest.mark.parametrize("kind", KINDS)
def test_kinds_block_krylov(block, rng, p, kind):
    """The block Krylov path (and its fallback where the basis is singular) on n = 5 .. 17."""
    for n in (5, 12, 17):
        f, g = check(structured(kind, n, p, rng), p)
        assert divides(g, f, p)


def test_block_krylov_runs(block, rng, monkeypatch):
    """The block Krylov path answers for a random matrix (no fallback), int64 and object."""
    stages = []
    monkeypatch.setattr(_charpoly, "_stages", lambda *a: stages.append(1) or [])
    for p in (101, 2**31 - 1, P127):
        A = native(rand(rng, (13, 13), p), p)
        assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)
    assert not stages


@pytest.mark.parametrize("p", [101, 2**31 - 1, P61, P63])
def test_block_krylov_zero_pivots(block, rng, monkeypatch, p):
    """Sparse matrices make evaluations whose elimination meets a zero pivot: those are
    evaluated again and eliminated with row exchanges (:func:`_charpoly._dets_pivoting`)."""
    calls = []
    pivoting = _charpoly._dets_pivoting
    monkeypatch.setattr(_charpoly, "_dets_pivoting", lambda *a: calls.append(1) or pivoting(*a))
    n = 12
    shift = np.roll(np.eye(n, dtype=np.int64), 1, axis=0)  # a cyclic permutation
    for A in (companion(list(rand(rng, n, p)), p), companion([0] * n, p), shift,
              shift * rand(rng, (n, 1), p)):
        A = native(A, p)
        assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)
    assert calls


@pytest.mark.parametrize("p", [2**31 - 1, P61, P63])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_evaluations_split_across_threads(block, rng, monkeypatch, p, threads):
    """The evaluations and determinants of block Krylov, cut into ranges of points for the
    threads (forced here on small matrices): the same polynomial whatever the cut, also when
    some ranges meet zero pivots."""
    import modlin
    from modlin._engines import threads as _threads

    monkeypatch.setattr(_threads, "MIN_WORK", 0)
    monkeypatch.setattr(_charpoly, "MIN_POINTS", 3)
    shift = np.roll(np.eye(30, dtype=np.int64), 1, axis=0)
    with modlin.limits(threads=threads):
        for A in (rand(rng, (37, 37), p), shift, companion([0] * 30, p)):
            A = native(A, p)
            assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)


@pytest.mark.parametrize("p", [2**31 - 1, P127])
def test_default_threshold_n200(rng, p):
    """n = 200 at the default threshold: block Krylov for a random matrix, stages for a derogatory one."""
    assert _charpoly.MIN_BLOCK_KRYLOV <= 200
    A = native(rand(rng, (200, 200), p), p)
    assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)
    if p < 2**63:
        assert linalg.minpoly(A, p).tolist() == flint_minpoly(A, p)
        check(structured("derogatory", 200, p, rng), p)


@pytest.mark.parametrize("p", [2**50 - 27, P61])
def test_block_krylov_default_threshold_wide(rng, p):
    """n = 100 at the default threshold for moduli whose thin products take other plans (a
    50-bit p once found no thin multiword plan and failed)."""
    A = native(rand(rng, (100, 100), p), p)
    assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)


def many_factors(kind, n, p, rng) -> np.ndarray:
    """n x n matrices with more invariant factors than block Krylov has vectors: copies of one
    6 x 6 block, a random block beside a large scalar one, a scalar matrix; each also
    conjugated by a random matrix (``-dense``), so that no entry is structurally zero."""
    base = kind.removesuffix("-dense")
    if base == "copies":
        B = rand(rng, (6, 6), p)
        D = np.zeros((n, n), dtype=object)
        for s in range(0, n - 5, 6):
            D[s:s + 6, s:s + 6] = B
    elif base == "scalar-block":
        D = np.eye(n, dtype=int).astype(object) * int(rand(rng, (), p))
        D[:n // 5, :n // 5] = rand(rng, (n // 5, n // 5), p)
    else:  # scalar
        D = np.eye(n, dtype=int).astype(object) * int(rand(rng, (), p))
    if not kind.endswith("-dense"):
        return D
    S = rand(rng, (n, n), p)
    while fmat(S, p).rank() < n:
        S = rand(rng, (n, n), p)
    Si = np.array(linalg.inv(native(S, p), p), dtype=object)
    return (S.dot(D) % p).dot(Si) % p


@pytest.mark.parametrize("p", PRIMES)
@pytest.mark.parametrize("kind", ["copies", "copies-dense", "scalar-block-dense", "scalar"])
def test_many_invariant_factors_large_n(rng, p, kind):
    """n = 102 >= MIN_BLOCK_KRYLOV with more invariant factors than block Krylov's 8 vectors:
    for p >= n the Krylov space of the vectors is split off and the quotient goes on (block
    Krylov again, the stages, or a scalar matrix); for p = 2 and 3 the stages take it all."""
    n = 102
    assert n >= _charpoly.MIN_BLOCK_KRYLOV and _charpoly.block_size(n) < n // 6
    f, g = check(many_factors(kind, n, p, rng), p)
    assert divides(g, f, p) and len(g) < len(f)


def test_block_krylov_quotient_runs(rng, monkeypatch):
    """A matrix with 17 copies of a block (more than the 8 vectors) takes the block Krylov path
    twice, the second time on the quotient, and the stages never."""
    p = 2**31 - 1
    sizes = []
    block_krylov = _charpoly._block_krylov
    monkeypatch.setattr(_charpoly, "_block_krylov", lambda W, p, rng: sizes.append(len(W)) or block_krylov(W, p, rng))
    monkeypatch.setattr(_charpoly, "MIN_BLOCK_KRYLOV", 1)  # every quotient, down to the last copy
    monkeypatch.setattr(_charpoly, "_stages", lambda *a: pytest.fail("the stages ran"))
    A = native(many_factors("copies-dense", 102, p, rng), p)
    assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)
    assert len(sizes) >= 2 and sizes[0] == 102 and sizes[1] < 102


def test_block_krylov_zero_vectors(rng, monkeypatch):
    """Vectors that span nothing (all zero: not impossible, only unlikely) split off ``U = 0``;
    the quotient, the whole matrix, goes on with fresh vectors."""
    p = 2**31 - 1
    draws = []
    random = _charpoly._random

    def first_zero(rng, shape, p, dtype):
        draws.append(shape)
        x = random(rng, shape, p, dtype)
        return x * 0 if len(draws) == 1 else x

    monkeypatch.setattr(_charpoly, "_random", first_zero)
    A = native(rand(rng, (100, 100), p), p)
    assert linalg.charpoly(A, p).tolist() == flint_charpoly(A, p)
    assert len(draws) == 2


def py_squarefree(f: list[int], p: int) -> bool:
    """Whether f (monic, low to high) has no repeated factor: gcd(f, f') = 1, with Python ints."""
    def trim(a):
        a = [x % p for x in a]
        while a and a[-1] == 0:
            a.pop()
        return a

    def rem(a, b):
        a = trim(a)
        inv = pow(b[-1], -1, p)
        while len(a) >= len(b):
            q, s = a[-1] * inv % p, len(a) - len(b)
            a = trim([x - q * b[i - s] if i >= s else x for i, x in enumerate(a)])
        return a

    a, b = trim(f), trim([i * c for i, c in enumerate(f)][1:])
    if not b:
        return len(a) <= 1
    while b:
        a, b = b, rem(a, b)
    return len(a) == 1


@pytest.mark.parametrize("p", PRIMES)
def test_squarefree_against_python(rng, p):
    """_squarefree agrees with a pure-Python gcd(f, f') on products of random monic factors,
    with and without a repeated one, and on p-th powers (f' = 0) for small p."""
    cases = [[1], [5 % p, 1], [0, 0, 1]]
    for _ in range(12):
        parts = [list(rand(rng, int(rng.integers(1, 4)), p)) + [1] for _ in range(int(rng.integers(1, 4)))]
        if rng.integers(0, 2):
            parts.append(parts[0])  # a repeated factor
        f = [1]
        for g in parts:
            f = _charpoly._pmul(f, g, p)
        cases.append(f)
    if p < 10:
        cases.append([1] + [0] * (p - 1) + [1])  # x**p + 1 = (x + 1)**p: derivative 0
    long = [list(rand(rng, 5, p)) + [1] for _ in range(40)]  # degree 200: long remainder sequences
    for repeat in (False, True):
        f = [1]
        for g in long + long[:1] * repeat:
            f = _charpoly._pmul(f, g, p)
        cases.append(f)
    for f in cases:
        assert _charpoly._squarefree(f, p) == py_squarefree(f, p), (f, p)


@pytest.mark.parametrize("p", [2, 3, 2**31 - 1, P127])
def test_cayley_hamilton_python_ints(rng, p):
    """charpoly equals Berkowitz's, and f(A) = 0 for charpoly and minpoly, in Python ints."""
    for kind in KINDS:
        A = structured(kind, 6, p, rng)
        f = linalg.charpoly(native(A, p), p).tolist()
        g = linalg.minpoly(native(A, p), p).tolist()
        assert f == berkowitz(A, p)
        assert not evaluate(f, A, p).any() and not evaluate(g, A, p).any()
        # no monic polynomial of lower degree annihilates A: I, A, ..., A**(deg g - 1) are independent
        powers = np.array([evaluate([0] * k + [1], A, p).ravel() for k in range(len(g) - 1)], dtype=object)
        assert len(g) == 1 or fmat(powers, p).rank() == len(g) - 1


def test_one_by_one_and_empty():
    assert linalg.charpoly([[3]], 7).tolist() == [4, 1]
    assert linalg.minpoly([[3]], 7).tolist() == [4, 1]
    assert linalg.charpoly(np.zeros((0, 0)), 7).tolist() == [1]
    assert linalg.minpoly(np.zeros((0, 0)), P127).tolist() == [1]
    assert linalg.charpoly(np.zeros((0, 0)), P127).dtype == object


def test_input_types_and_unreduced(rng):
    p = 2**31 - 1
    A = rng.integers(-2**62, 2**62, (7, 7))
    expect = flint_charpoly(A % p, p)
    for X in (A, A.astype(object), A.tolist(), (A % p).astype(np.uint64), A - 3 * p):
        assert linalg.charpoly(X, p).tolist() == expect
    small = A % 1000
    assert linalg.charpoly(small.astype(np.float64), p).tolist() == flint_charpoly(small, p)


# ===================================================================== galois and python-flint

@pytest.mark.parametrize("p", [7, P127])
def test_galois_poly(rng, p):
    """galois.Poly over the input's field, equal to flint's. (galois' own ``minimal_poly`` is no
    oracle: it returns the characteristic polynomial of block-diagonal ``diag(B, B)``, and its
    ``characteristic_poly`` compiles for seconds.)"""
    GF = galois.GF(p)
    M = rand(rng, (6, 6), p)
    M[3:, 3:], M[:3, 3:], M[3:, :3] = M[:3, :3], 0, 0  # diag(B, B): minpoly of degree 3
    A = GF(native(M, p))
    A0 = A.copy()
    f, g = linalg.charpoly(A), linalg.minpoly(A)
    assert isinstance(f, galois.Poly) and f.field is GF and isinstance(g, galois.Poly) and g.field is GF
    assert [int(c) for c in f.coeffs[::-1]] == flint_charpoly(M, p)
    assert [int(c) for c in g.coeffs[::-1]] == flint_minpoly(M, p) and g.degree == 3
    assert np.array_equal(A, A0)
    S = linalg.charpoly(GF(np.stack([A, A.T])))
    assert S.shape == (2,) and S[0] == f and S[1] == f


def test_flint_polys(rng):
    F = fmat(rand(rng, (5, 5), 11), 11)
    f = linalg.charpoly(F)
    assert isinstance(f, flint.nmod_poly) and f == F.charpoly() and linalg.minpoly(F) == F.minpoly()
    G = fmat(rand(rng, (5, 5), P127), P127)
    g = linalg.charpoly(G)
    assert isinstance(g, flint.fmpz_mod_poly) and g == G.charpoly() and linalg.minpoly(G) == G.minpoly()
    Z = flint.fmpz_mat([[1, 2], [3, 4]])
    z = linalg.charpoly(Z, 7)
    assert isinstance(z, flint.fmpz_poly) and coeffs(z) == [5, 2, 1]


# ===================================================================== matrix_power

@pytest.mark.parametrize("p", [2, 2**31 - 1, P61, P127])
def test_matrix_power(rng, p):
    A = native(rand(rng, (6, 6), p), p)
    A0 = A.copy()
    F = fmat(A, p)
    for e in (0, 1, 2, 3, 13, 64):
        X = linalg.matrix_power(A, e, p)
        assert X.dtype == A.dtype and X.shape == (6, 6)
        assert [int(x) for x in X.ravel()] == [int(x) for x in (F**e).entries()]
    # large exponents against Python-int repeated squaring
    for e in (2**64, 2**100 + 12345):
        R = np.eye(6, dtype=int).astype(object)
        B = np.asarray(A, dtype=object) % p
        k = e
        while k:
            if k & 1:
                R = R.dot(B) % p
            B = B.dot(B) % p
            k >>= 1
        assert np.array_equal(np.asarray(linalg.matrix_power(A, e, p), dtype=object), R)
    assert np.array_equal(A, A0)


def test_matrix_power_negative_and_zero(rng):
    p = 2**31 - 1
    A = rng.integers(0, p, (5, 5))
    Ai = linalg.inv(A, p)
    assert np.array_equal(linalg.matrix_power(A, -1, p), Ai)
    assert np.array_equal(linalg.matrix_power(A, -3, p), linalg.matrix_power(Ai, 3, p))
    assert np.array_equal(linalg.matrix_power(A, np.int8(0), p), np.eye(5, dtype=np.int64))
    assert linalg.matrix_power(np.zeros((0, 0)), 5, p).shape == (0, 0)
    with pytest.raises(np.linalg.LinAlgError, match="singular modulo 7"):
        linalg.matrix_power([[1, 2], [2, 4]], -1, 7)


def test_matrix_power_errors_name_matrix_power_and_the_value():
    """The user called matrix_power, not inv: the message names it and says why an inverse
    was needed; a float exponent is shown, as 2.0 looks like an integer."""
    for A, e in (([[1, 2], [2, 4]], -1), (np.array([np.eye(2, dtype=int), [[1, 2], [2, 4]]]), -3)):
        with pytest.raises(np.linalg.LinAlgError) as info:
            linalg.matrix_power(A, e, 7)
        message = str(info.value)
        assert message.startswith("matrix_power: a negative power") and "invertible" in message, message
        assert f"e = {e}" in message and "singular modulo 7" in message and "inv:" not in message, message
    with pytest.raises(np.linalg.LinAlgError, match=r"^inv: the matrix is singular"):
        linalg.inv([[1, 2], [2, 4]], 7)  # inv's own message is unchanged
    for e in (2.0, np.float64(2), "2", None):
        with pytest.raises(TypeError, match=r"^matrix_power: exponent must be an integer, got ") as info:
            linalg.matrix_power([[1]], e, 7)
        assert repr(e) in str(info.value)


def test_matrix_power_stacks_and_types(rng):
    p = 7
    A = rng.integers(0, p, (2, 3, 4, 4))
    X = linalg.matrix_power(A, 5, p)
    assert X.shape == A.shape
    for i in range(2):
        for j in range(3):
            assert np.array_equal(X[i, j], np.linalg.matrix_power(A[i, j], 5) % p)
    GF = galois.GF(p)
    G = GF(A[0])
    Y = linalg.matrix_power(G, 2**70 + 1)
    assert type(Y) is GF and np.array_equal(Y, np.linalg.matrix_power(G, 2**70 + 1))
    F = fmat(A[0, 0], p)
    assert linalg.matrix_power(F, 9) == F**9


@pytest.mark.parametrize("call, exc, match", [
    (lambda: linalg.matrix_power([[1, 2]], 2, 7), np.linalg.LinAlgError, r"matrix_power: A must be square"),
    (lambda: linalg.matrix_power(np.ones((3, 2, 3)), 2, 7), np.linalg.LinAlgError,
     r"the last 2 dimensions of A must be square"),
    (lambda: linalg.matrix_power([1, 2], 2, 7), np.linalg.LinAlgError, r"must be a 2-D matrix or a stack"),
    (lambda: linalg.matrix_power([[1]], 2.0, 7), TypeError, r"exponent must be an integer"),
    (lambda: linalg.matrix_power([[1]], "2", 7), TypeError, r"exponent must be an integer"),
    (lambda: linalg.matrix_power([[1]], 2, 8), ValueError, r"needs a prime modulus"),
    (lambda: linalg.charpoly([[1, 2]], 7), np.linalg.LinAlgError, r"charpoly: A must be square"),
    (lambda: linalg.charpoly([[1]], 15), ValueError, r"charpoly needs a prime modulus: p = 15"),
    (lambda: linalg.minpoly(np.eye(2)[None], 7), ValueError, r"minpoly: A must be a 2-D matrix"),
    (lambda: linalg.minpoly([[1]], 2**64), ValueError, r"not prime"),
    (lambda: linalg.charpoly([[0.5]], 7), ValueError, r"non-integral"),
    (lambda: linalg.minpoly([[1]]), TypeError, r"modulus p is required"),  # charpoly without p: over Z
])
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ===================================================================== stacks

@pytest.mark.parametrize("p", [7, 2**31 - 1, P127])
def test_stacks(rng, p):
    A = native(rand(rng, (2, 3, 5, 5), p), p)
    A[1, 2] = 0  # one singular matrix in the stack
    A0 = A.copy()
    d = linalg.det(A, p)
    r = linalg.rank(A, p)
    f = linalg.charpoly(A, p)
    assert d.shape == r.shape == (2, 3) and f.shape == (2, 3, 6)
    assert d.dtype == f.dtype == A.dtype and r.dtype == np.int64
    for i in range(2):
        for j in range(3):
            assert d[i, j] == linalg.det(A[i, j], p) and r[i, j] == linalg.rank(A[i, j], p)
            assert f[i, j].tolist() == flint_charpoly(A[i, j], p)
    with pytest.raises(np.linalg.LinAlgError, match=r"singular .* at index \(1, 2\) of the stack"):
        linalg.inv(A, p)
    good = A[0]
    X = linalg.inv(good, p)
    assert X.shape == (3, 5, 5)
    for j in range(3):
        assert np.array_equal(X[j], linalg.inv(good[j], p))
    assert np.array_equal(A, A0)


def test_solve_broadcasting(rng):
    """numpy >= 2 rules: a 1-D b is one vector for every matrix; (..., n, k) stacks broadcast."""
    p = 2**31 - 1
    A = rng.integers(0, p, (3, 4, 4))
    b = rng.integers(0, p, 4)
    x = linalg.solve(A, b, p)
    assert x.shape == (3, 4)
    for i in range(3):
        assert np.array_equal(x[i], linalg.solve(A[i], b, p))
    B = rng.integers(0, p, (2, 1, 4, 2))
    X = linalg.solve(A, B, p)
    assert X.shape == (2, 3, 4, 2)
    for i in range(2):
        for j in range(3):
            assert np.array_equal(X[i, j], linalg.solve(A[j], B[i, 0], p))
    assert linalg.solve(A, np.zeros((3, 4, 0), dtype=int), p).shape == (3, 4, 0)
    assert linalg.det(np.zeros((0, 3, 3)), p).shape == (0,)
    GF = galois.GF(p)  # galois' numpy.linalg takes single matrices: compared one by one
    G = GF(A)
    xs, Xi, d = linalg.solve(G, GF(b)), linalg.inv(G), linalg.det(G)
    assert type(xs) is GF and type(Xi) is GF and type(d) is GF and d.shape == (3,)
    for i in range(3):
        assert np.array_equal(xs[i], np.linalg.solve(G[i], GF(b))) and np.array_equal(Xi[i], np.linalg.inv(G[i]))
        assert d[i] == np.linalg.det(G[i])


def test_linalg_error_compat():
    """Singular and inconsistent systems raise modlin's LinAlgError: numpy's, and a ValueError too."""
    assert issubclass(linalg.LinAlgError, np.linalg.LinAlgError) and issubclass(linalg.LinAlgError, ValueError)
    with pytest.raises(linalg.LinAlgError, match=r"singular modulo 7: its rank is 1, not 2"):
        linalg.inv([[1, 2], [2, 4]], 7)
    with pytest.raises(np.linalg.LinAlgError, match=r"no solution modulo 7"):
        linalg.solve([[1, 2], [2, 4]], [1, 3], 7)
    with pytest.raises(ValueError, match=r"diagonal entry 1 is zero"):
        linalg.trsm([[1, 0], [1, 0]], [[1], [1]], 7)


# ===================================================================== properties

@st.composite
def matrices(draw):
    p = draw(st.sampled_from([2, 3, 5, 65521, 2**31 - 1, P61, P127]))
    n = draw(st.integers(0, 8))
    blocks = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    return p, n, blocks, seed


@settings(max_examples=30)
@given(matrices(), st.booleans())
def test_property(case, fast):
    """Random block-diagonal-by-similarity matrices: flint agrees, minpoly | charpoly, minpoly(A) = 0."""
    p, n, blocks, seed = case
    rng = np.random.default_rng(seed)
    A = np.zeros((n, n), dtype=object)
    B = rand(rng, (max(1, n // blocks),) * 2, min(p, 4))
    for s in range(0, n - len(B) + 1, len(B)):
        A[s:s + len(B), s:s + len(B)] = B
    A = (A + np.triu(rand(rng, (n, n), p), 1) * rng.integers(0, 2)) % p
    old = _charpoly.MIN_BLOCK_KRYLOV
    _charpoly.MIN_BLOCK_KRYLOV = 4 if fast else old
    try:
        f, g = check(A, p)
    finally:
        _charpoly.MIN_BLOCK_KRYLOV = old
    assert divides(g, f, p) and not evaluate(g, A, p).any()


# ===================================================================== progress

def progress_matrices(p, rng):
    """A generic matrix (its first Krylov vectors span the space) and a stack of two."""
    return native(rand(rng, (24, 24), p), p), native(rand(rng, (2, 24, 24), p), p)


@pytest.mark.parametrize("path", ["block", "stages"])
@pytest.mark.parametrize("p", [P61, P127], ids=["61bit", "127bit"])
def test_progress_one_display(monkeypatch, capsys, rng, p, path):
    """charpoly and minpoly, on both paths and on a stack: with progress on and the call
    expected to run long, one line on stderr up to 100 % with its times, no product's bar; the
    same polynomials."""
    import re
    import sys

    import modlin
    from modlin._runtime import progress as _progress

    if path == "block":
        monkeypatch.setattr(_charpoly, "MIN_BLOCK_KRYLOV", 4)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    A, S = progress_matrices(p, rng)
    calls = [("charpoly", "", lambda: linalg.charpoly(A, p)), ("minpoly", "", lambda: linalg.minpoly(A, p)),
             ("charpoly", ", 2 matrices", lambda: linalg.charpoly(S, p))]
    for fn, count, call in calls:
        off = call()
        with monkeypatch.context() as m, modlin.limits(progress=True):
            m.setattr(_progress, "_gemm_rate", lambda: 1.0)  # one multiply-add a second: all is long
            on = call()
        err = capsys.readouterr().err
        assert np.array_equal(on, off) and on.dtype == off.dtype
        desc = f"modlin.linalg.{fn} mod a {p.bit_length()}-bit p{count}"
        assert err.startswith(f"\r{desc} [") and err.endswith(f"\r{desc} [100/100] done\n"), err
        assert err.count("\n") == 1 and "modlin.matmul" not in err
        assert re.search(r"\[00:[0-9]{2}<(00:[0-9]{2}|\?)\]", err), err
        with modlin.limits(progress=False):
            call()
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize("path", ["block", "stages"])
@pytest.mark.parametrize("p", [2**31 - 1, P61, P127], ids=["31bit", "61bit", "127bit"])
def test_progress_follows_the_modelled_work(monkeypatch, rng, p, path):
    """The Krylov products, PLUQs and the polynomial determinant's points advance the display by
    their modelled cost: on a generic matrix the model foresaw them all (99 before the call
    returns), and the count never passes 100."""
    import modlin
    from modlin._runtime import progress as _progress

    recorder = StepRecorder()
    steps = recorder.steps

    if path == "block":
        monkeypatch.setattr(_charpoly, "MIN_BLOCK_KRYLOV", 4)
    monkeypatch.setattr(_progress, "bar", lambda *args, **kwargs: recorder)
    monkeypatch.setattr(_progress, "MIN_SECONDS", -1.0)
    A, _ = progress_matrices(p, rng)
    for call in (linalg.charpoly, linalg.minpoly):
        steps.clear()
        with modlin.limits(progress=True):
            call(A, p)
        assert sum(steps) == 100 and len(steps) > 3 and steps[-1] <= 2, (call.__name__, steps)
