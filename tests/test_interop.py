"""Interop and front doors: python-flint matrices and scalars, galois in modlin.gaussian,
scipy's BLAS / solve_triangular keyword names, clear refusals of what no function reads,
and the bounded factoring behind 2M's square roots of -1.

Oracles are independent of modlin: python-flint's own products, determinants,
inverses and echelon forms (FLINT's modular arithmetic, no floating point),
scipy.linalg.blas, and Python ints.
"""

from __future__ import annotations

import subprocess
import sys
import time

import flint
import galois
import numpy as np
import pytest
import scipy.linalg.blas as blas
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

import modlin
from conftest import rand_ints
from modlin import gaussian, linalg, ozaki

P63 = 2**63 - 25  # the largest prime below 2**63
P64 = 2**64 - 59  # the largest prime below 2**64: an nmod_mat modulus, uint64 entries
P127 = 2**127 - 1  # a Mersenne prime: fmpz_mod_mat, Python-int entries
NMOD_PRIMES = [2, 7, 2**31 - 1, P63, P64]


def nmod(rng, m, n, p, worst=False):
    """A random ``nmod_mat``; ``worst`` fills it with ``p - 1`` (the largest products)."""
    vals = [p - 1] * (m * n) if worst else rand_ints(rng, (m * n,), 0, p - 1).tolist()
    return flint.nmod_mat(m, n, vals, p)


def fmpz_mod(rng, m, n, p, worst=False):
    ctx = flint.fmpz_mod_ctx(p)
    vals = [p - 1] * (m * n) if worst else rand_ints(rng, (m * n,), 0, p - 1).tolist()
    return flint.fmpz_mod_mat(m, n, vals, ctx)


def ints(M) -> list[list[int]]:
    """A python-flint matrix as nested lists of Python ints."""
    return [[int(e) for e in row] for row in M.tolist()]


# ===================================================================== python-flint: matmul

@pytest.mark.parametrize("p", NMOD_PRIMES)
@pytest.mark.parametrize("worst", [False, True], ids=["random", "p-1"])
def test_nmod_mat_product_matches_flint(p, worst, rng):
    A, B = nmod(rng, 5, 7, p, worst), nmod(rng, 7, 3, p, worst)
    C = modlin.matmul(A, B)
    assert type(C) is flint.nmod_mat and C.modulus() == p
    assert C == A * B
    assert modlin.matmul(A, B, p) == C  # p given and matching


@pytest.mark.parametrize("shape", [(0, 3, 2), (2, 0, 3), (3, 2, 0), (1, 1, 1), (0, 0, 0)])
@pytest.mark.parametrize("p", [7, P64])
def test_nmod_mat_empty_and_1x1(shape, p, rng):
    m, k, n = shape
    A, B = nmod(rng, m, k, p, worst=True), nmod(rng, k, n, p, worst=True)
    C = modlin.matmul(A, B)
    assert type(C) is flint.nmod_mat and (C.nrows(), C.ncols()) == (m, n) and C.modulus() == p
    assert C == A * B


@pytest.mark.parametrize("p", [P127, 2**64 + 13, 10**40 + 1])  # prime, prime, composite
def test_fmpz_mod_mat_product_matches_flint(p, rng):
    for worst in (False, True):
        A, B = fmpz_mod(rng, 4, 6, p, worst), fmpz_mod(rng, 6, 2, p, worst)
        C = modlin.matmul(A, B)
        assert type(C) is flint.fmpz_mod_mat and int(C.modulus()) == p
        assert C == A * B
    E = modlin.matmul(fmpz_mod(rng, 0, 3, p), fmpz_mod(rng, 3, 2, p))
    assert type(E) is flint.fmpz_mod_mat and (E.nrows(), E.ncols()) == (0, 2)


def test_fmpz_mat_product_modulo_p_and_exact(rng):
    vals = [int(v) for v in rng.integers(-(2**62), 2**62, 12)] + [2**200, -(3**150), 0, 1]
    A = flint.fmpz_mat(4, 4, vals)
    for p in (7, P64, P127):
        C = modlin.matmul(A, A, p)
        assert type(C) is flint.fmpz_mat
        assert ints(C) == [[int(e) % p for e in row] for row in (A * A).tolist()]
    Z = modlin.intmul(A, A)
    assert type(Z) is flint.fmpz_mat and Z == A * A
    small = flint.fmpz_mat(2, 3, [1, -2, 3, 4, 5, -6])
    assert modlin.intmul(small, small.transpose()) == small * small.transpose()


def test_mixed_nmod_mat_and_numpy(rng):
    """A NumPy operand beside an nmod_mat is read as integers (negative, unreduced, uint64)."""
    p = P64
    A = nmod(rng, 3, 4, p)
    for B in (rng.integers(-(2**62), 2**62, (4, 2)), np.full((4, 2), 2**64 - 1, dtype=np.uint64),
              np.array([[2**100, -1]] * 4, dtype=object)):
        want = A * flint.nmod_mat([[int(v) % p for v in row] for row in B.tolist()], p)
        C = modlin.matmul(A, B)
        assert type(C) is flint.nmod_mat and C == want
        assert modlin.matmul(B.T, A.transpose()) == want.transpose()


def test_vectors_beside_flint_matrices(rng):
    A = nmod(rng, 3, 4, 11)
    v, w = np.array([1, 2, 3]), np.array([1, 0, 2, 5])
    row = modlin.matmul(v, A)
    assert type(row) is flint.nmod_mat and (row.nrows(), row.ncols()) == (1, 4)
    assert row == flint.nmod_mat([v.tolist()], 11) * A
    col = modlin.matmul(A, w)
    assert (col.nrows(), col.ncols()) == (3, 1) and col == A * flint.nmod_mat([[x] for x in w.tolist()], 11)


def test_flint_modulus_checks(rng):
    A = nmod(rng, 2, 2, 7)
    for q in (7, np.uint64(7), flint.fmpz(7)):
        assert modlin.matmul(A, A, q) == A * A
    with pytest.raises(ValueError, match=r"p = 11 does not match A, an nmod_mat modulo 7; omit p or pass 7"):
        modlin.matmul(A, A, 11)
    with pytest.raises(ValueError, match="different moduli"):
        modlin.matmul(A, nmod(rng, 2, 2, 11))
    with pytest.raises(TypeError, match="mix python-flint nmod_mat and fmpz_mod_mat"):
        modlin.matmul(A, fmpz_mod(rng, 2, 2, 7))
    with pytest.raises(TypeError, match="mix galois FieldArrays and python-flint"):
        modlin.matmul(A, galois.GF(7)([[1, 0], [0, 1]]))
    with pytest.raises(TypeError, match="modulus p is required"):
        modlin.matmul(flint.fmpz_mat(2, 2, [1, 2, 3, 4]), np.eye(2, dtype=int))
    with pytest.raises(TypeError, match="out= takes NumPy arrays"):
        modlin.matmul(A, A, out=np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="stack of matrices"):
        modlin.matmul(A, np.ones((3, 2, 2), dtype=int))


def test_fmpz_modulus_everywhere():
    A = np.array([[3, 4], [5, 6]])
    assert np.array_equal(modlin.matmul(A, A, flint.fmpz(7)), (A @ A) % 7)
    assert modlin.plan(flint.fmpz(7), 2, 2, 2).p == 7
    assert linalg.det(A, flint.fmpz(7)) == (18 - 20) % 7
    re, _ = gaussian.matmul(A, A, flint.fmpz(13))
    assert np.array_equal(re, (A @ A) % 13)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4), st.sampled_from(NMOD_PRIMES + [6, 2**64 - 1]),
       st.integers(0, 2**32))
def test_nmod_mat_products_property(m, k, n, p, seed):
    rng = np.random.default_rng(seed)
    A, B = nmod(rng, m, k, p, worst=seed % 3 == 0), nmod(rng, k, n, p)
    assert modlin.matmul(A, B) == A * B


# ===================================================================== python-flint scalars in object arrays

def test_flint_scalars_in_object_arrays():
    p = 7
    A = np.array([[flint.nmod(3, p), flint.nmod(6, p)], [flint.nmod(1, p), 5]], dtype=object)
    B = np.array([[flint.fmpz(2**70)], [flint.fmpz(-1)]], dtype=object)
    want = [[(3 * 2**70 - 6) % p], [(2**70 - 5) % p]]
    C = modlin.matmul(A, B)  # the nmod entries fix p
    assert isinstance(C, np.ndarray) and C.tolist() == want
    assert modlin.matmul(A, B, 7).tolist() == want
    with pytest.raises(ValueError, match="does not match python-flint entries of A modulo 7"):
        modlin.matmul(A, B, 11)
    A[0, 0] = flint.nmod(3, 11)
    with pytest.raises(ValueError, match="different moduli"):
        modlin.matmul(A, B)
    ctx = flint.fmpz_mod_ctx(P127)
    F = np.array([[ctx(P127 - 1), ctx(2)]], dtype=object)
    assert modlin.matmul(F, [[P127 - 1], [1]]).tolist() == [[3]]
    assert modlin.intmul(B.T, B).tolist() == [[2**140 + 1]]
    with pytest.raises(TypeError, match="python-flint residues"):
        modlin.intmul(A, B)


# ===================================================================== python-flint: linalg

def _nonsingular(rng, n, p, kind):
    """A random nonsingular matrix whose diagonal entries are units too (the triangles that
    trsm reads of it are then invertible)."""
    while True:
        A = nmod(rng, n, n, p) if kind == "nmod" else fmpz_mod(rng, n, n, p)
        if A.rank() == n and all(int(A[i, i]) for i in range(n)):
            return A


def same_type(M, rows):
    """A matrix of ``M``'s python-flint type and modulus with the given rows."""
    p = int(M.modulus())
    if isinstance(M, flint.nmod_mat):
        return flint.nmod_mat(rows, p) if rows else flint.nmod_mat(0, 0, [], p)
    return flint.fmpz_mod_mat(rows, flint.fmpz_mod_ctx(p))


@pytest.mark.parametrize("p, kind", [(7, "nmod"), (P63, "nmod"), (P64, "nmod"), (P127, "fmpz_mod")])
def test_linalg_on_flint_matches_flint(p, kind, rng):
    A = _nonsingular(rng, 5, p, kind)
    typ = type(A)
    B = nmod(rng, 5, 2, p) if kind == "nmod" else fmpz_mod(rng, 5, 2, p)
    assert linalg.rank(A) == A.rank() == 5 and isinstance(linalg.rank(A), int)
    d = linalg.det(A)
    assert type(d) is type(A.det()) and d == A.det()
    Ai = linalg.inv(A)
    assert type(Ai) is typ and Ai == A.inv()
    X = linalg.solve(A, B)
    assert type(X) is typ and A * X == B
    R, pivots = linalg.rref(A)
    assert type(R) is typ and R == A.rref()[0] and list(pivots) == list(range(5))
    S = A * flint.fmpz_mat(5, 3, [1, 0, 1, 0, 1, 1, 1, 1, 2, 0, 0, 0, 2, 1, 3])
    N = linalg.nullspace(S.transpose())  # S^T is 3 x 5: a kernel of dimension 5 - rank
    assert type(N) is typ and (N.nrows(), N.ncols()) == (5, 5 - S.rank())
    assert not any(int(e) for e in (S.transpose() * N).entries())
    P, L, U, Q, r = linalg.pluq(S)
    assert r == S.rank() and type(L) is typ and type(U) is typ
    assert L * U == same_type(S, [[S[int(i), int(j)] for j in Q] for i in P])
    lower = same_type(A, [[A[i, j] if j <= i else 0 for j in range(5)] for i in range(5)])
    T = linalg.trsm(A, B)  # reads the lower triangle of A
    assert type(T) is typ and lower * T == B


def test_linalg_flint_worst_and_empty():
    p = P64
    J = flint.nmod_mat(3, 3, [p - 1] * 9, p)  # rank 1, every entry p - 1
    assert linalg.rank(J) == J.rank() == 1
    assert linalg.det(J) == J.det() == 0
    one = flint.nmod_mat(1, 1, [p - 1], p)
    assert linalg.inv(one) == one.inv() and linalg.det(one) == flint.nmod(p - 1, p)
    empty = flint.nmod_mat(0, 0, [], p)
    d = linalg.det(empty)
    assert type(d) is flint.nmod and d == 1
    assert linalg.rank(flint.nmod_mat(0, 3, [], p)) == 0
    e = linalg.inv(empty)
    assert type(e) is flint.nmod_mat and e.nrows() == 0


def test_linalg_flint_composite_modulus():
    A = flint.nmod_mat(2, 2, [1, 0, 3, 1], 12)
    with pytest.raises(ValueError, match="needs a prime modulus: p = 12"):
        linalg.rank(A)
    # a triangular solve needs units on the diagonal only
    X = linalg.trsm(A, flint.nmod_mat(2, 1, [1, 1], 12))
    assert type(X) is flint.nmod_mat and A * X == flint.nmod_mat(2, 1, [1, 1], 12)


def test_linalg_fmpz_mat_with_p():
    A = flint.fmpz_mat(2, 2, [2**100, 1, 3, -4])
    p = 2**61 - 1
    assert linalg.det(A, p) == int(A.det()) % p and isinstance(linalg.det(A, p), int)
    Ai = linalg.inv(A, p)
    assert type(Ai) is flint.fmpz_mat
    assert [[int(e) % p for e in row] for row in (A * Ai).tolist()] == [[1, 0], [0, 1]]


def test_importing_modlin_does_not_import_flint():
    code = "import sys, modlin, modlin.linalg, modlin.gaussian, modlin.ozaki; print('flint' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_flint_round_trip_speed(rng):
    """Conversion is one Python int per entry each way; 300 x 300 takes well under a second."""
    p = P64
    A = nmod(rng, 300, 300, p)
    t = time.perf_counter()
    arr, ftype = modlin._front.flint.to_array(A, "nmod_mat")
    back = ftype(arr)
    assert time.perf_counter() - t < 5  # generous: a loaded two-core runner
    assert back == A and arr.dtype == np.uint64


# ===================================================================== refusals at every front door
# Each section registers its functions here; the tests at the end of the file run them all.

MASKED = np.ma.array([[1, 2], [3, 4]], mask=[[0, 1], [0, 0]])
BAD = {
    "None": (None, "is None"),
    "csr_matrix": (sp.csr_matrix(np.eye(2)), "scipy.sparse csr_matrix.*toarray"),
    "csr_array": (sp.csr_array(np.eye(2)), "scipy.sparse csr_array"),
    "ragged": ([[1, 2], [3]], "ragged"),
    "masked": (MASKED, "masked array.*filled"),
    "dict": ({"a": 1}, "is a dict, not a matrix"),
    "string": ("abc", "is a string"),
    "set": ({1, 2}, "is a set"),
}
OK2 = np.array([[1, 2], [3, 4]])
#: functions of two operands, A (T for trsm) and B
FUNCTIONS = {
    "matmul": (lambda a, b: modlin.matmul(a, b, 7)),
    "intmul": (lambda a, b: modlin.intmul(a, b)),
    "linalg.solve": (lambda a, b: linalg.solve(a, b, 7)),
    "linalg.trsm": (lambda a, b: linalg.trsm(a, b, 7)),
}
#: functions of one operand A (C where the name ends in " C")
ONE_OPERAND = {f"linalg.{f}": (lambda a, f=f: getattr(linalg, f)(a, 7))
               for f in ("rank", "det", "inv", "nullspace", "rref", "pluq")}
#: functions of integers or floats, which refuse residues (FieldArrays, nmod_mat)
RESIDUE_REFUSERS = {"intmul": (lambda a: modlin.intmul(a, a))}


# ===================================================================== galois in modlin.gaussian

@pytest.mark.parametrize("m", [13, 2**31 - 1])  # a 2M prime, and one 3 (mod 4) (3M)
def test_gaussian_takes_the_modulus_from_field_arrays(m, rng):
    GF = galois.GF(m)
    ar, ai, br, bi = (GF(rng.integers(0, m, (3, 3))) for _ in range(4))
    for fn, args in ((gaussian.matmul, ((ar, ai), (br, bi))), (gaussian.herk, ((ar, ai),)),
                     (gaussian.her2k, ((ar, ai), (br, bi))), (gaussian.syrk, ((ar, ai),)),
                     (gaussian.syr2k, ((ar, ai), (br, bi))), (gaussian.syrk, (ar,)), (gaussian.syr2k, (ar, br))):
        got = fn(*args)
        plain = fn(*[tuple(x.view(np.ndarray) for x in a) if isinstance(a, tuple) else a.view(np.ndarray)
                     for a in args], m)
        parts = got if isinstance(got, tuple) else (got,)
        want = plain if isinstance(plain, tuple) else (plain,)
        assert all(type(x) is GF for x in parts), fn.__name__
        assert all(np.array_equal(x.view(np.ndarray), y) for x, y in zip(parts, want)), fn.__name__
        with_m = fn(*args, m)  # m given, and matching the field
        assert all(type(x) is GF for x in (with_m if isinstance(with_m, tuple) else (with_m,)))
    with pytest.raises(ValueError, match=rf"m = 5 does not match .*GF\({m}\)"):
        gaussian.matmul((ar, ai), (br, bi), 5)
    with pytest.raises(TypeError, match="modulus m is required"):
        gaussian.matmul(np.eye(2), np.eye(2))
    # a plain operand beside a FieldArray is read as integers
    plain = rng.integers(-(2**40), 2**40, (3, 3))
    re, im = gaussian.matmul((ar, ai), plain)
    want_re, want_im = gaussian.matmul((ar.view(np.ndarray), ai.view(np.ndarray)), plain, m)
    assert type(re) is GF and type(im) is GF
    assert np.array_equal(re.view(np.ndarray), want_re) and np.array_equal(im.view(np.ndarray), want_im)


def test_gaussian_oracle_python_ints(rng):
    m = 13
    GF = galois.GF(m)
    ar, ai, br, bi = (rng.integers(0, m, (2, 3)) for _ in range(4))
    re, im = gaussian.matmul((GF(ar), GF(ai)), (GF(br.T), GF(bi.T)))
    for i in range(2):
        for j in range(2):
            z = sum(complex(int(ar[i, t]), int(ai[i, t])) * complex(int(br[j, t]), int(bi[j, t])) for t in range(3))
            assert (int(re[i, j]), int(im[i, j])) == (int(z.real) % m, int(z.imag) % m)


FUNCTIONS.update({
    "gaussian.matmul": (lambda a, b: gaussian.matmul(a, b, 13)),
    "gaussian.her2k": (lambda a, b: gaussian.her2k(a, b, 13)),
    "gaussian.syr2k": (lambda a, b: gaussian.syr2k(a, b, 13)),
    "gaussian.intmul": (lambda a, b: gaussian.intmul(a, b)),
})
ONE_OPERAND.update({
    "gaussian.herk": (lambda a: gaussian.herk(a, 13)),
    "gaussian.syrk": (lambda a: gaussian.syrk(a, 13)),
})
RESIDUE_REFUSERS["gaussian.intmul"] = lambda a: gaussian.intmul(a, a)


def test_gaussian_pair_parts_are_named():
    with pytest.raises(TypeError, match=r"^B \(imaginary part\) is None"):
        gaussian.matmul((OK2, OK2), (OK2, None), 13)


# ===================================================================== bounded factoring for 2M

def _prime_1mod4(start):
    q = galois.next_prime(start)
    while q % 4 != 1:
        q = galois.next_prime(q)
    return int(q)


def test_is_twom_modulus_of_one():
    assert gaussian.is_twom_modulus(1) is False


def test_unfactorable_moduli_are_refused_quickly():
    q1 = _prime_1mod4(2**64)
    q2 = _prime_1mod4(q1)
    for m in (q1 * q2, 5 * q1 * q2):
        for fn in (gaussian.is_twom_modulus, gaussian.sqrt_minus_one):
            t = time.perf_counter()
            with pytest.raises(ValueError, match="cannot factor quickly"):
                fn(m)
            assert time.perf_counter() - t < 10


def test_large_moduli_decided_without_full_factoring():
    q1 = _prime_1mod4(2**64)
    q2 = _prime_1mod4(q1)
    assert gaussian.is_twom_modulus(3 * q1 * q2) is False  # a small factor 3 (mod 4)
    q3 = int(galois.next_prime(2**70))
    while q3 % 4 != 3:
        q3 = int(galois.next_prime(q3))
    assert gaussian.is_twom_modulus(q1 * q3) is False  # 3 (mod 4) itself: some factor is
    with pytest.raises(ValueError, match="3 \\(mod 4\\)"):
        gaussian.sqrt_minus_one(q1 * q3)


@pytest.mark.parametrize("m", [_prime_1mod4(2**127), _prime_1mod4(2**26) * _prime_1mod4(2**25),
                               _prime_1mod4(2**33) * _prime_1mod4(2**60), 5**3 * _prime_1mod4(2**200)])
def test_sqrt_minus_one_of_large_factorable_moduli(m):
    s = gaussian.sqrt_minus_one(m)
    assert (s * s + 1) % m == 0 and 0 < s < m - s
    assert gaussian.is_twom_modulus(m)


# ===================================================================== scipy's BLAS names in modlin.ozaki

@pytest.fixture
def real(rng):
    return rng.standard_normal((4, 3)), rng.standard_normal((4, 5)), rng.standard_normal((3, 5))


def test_dgemm_trans_matches_scipy_and_the_explicit_transpose(real):
    A, B, Cm = real
    got = ozaki.dgemm(A, B, trans_a=1)
    assert np.array_equal(got, ozaki.dgemm(A.T.copy(), B))
    assert np.allclose(got, blas.dgemm(1.0, A, B, trans_a=1), rtol=1e-14, atol=1e-14)
    assert np.array_equal(ozaki.dgemm(A, B, trans_a=2), got)  # 2 (C) is T for real matrices
    assert np.array_equal(ozaki.dgemm(B, A, trans_a="T"), ozaki.dgemm(B.T.copy(), A))
    D = B.T @ np.diag([1.0, -2.0, 3.0, 0.5])  # 5 x 4
    assert np.array_equal(ozaki.dgemm(A, D, trans_a=1, trans_b=1), ozaki.dgemm(A.T.copy(), D.T.copy()))
    with_c = ozaki.dgemm(A, B, trans_a=1, beta=2.0, c=Cm)
    assert np.array_equal(with_c, ozaki.dgemm(A, B, trans_a=1, beta=2.0, C=Cm))
    assert np.allclose(with_c, blas.dgemm(1.0, A, B, beta=2.0, c=Cm, trans_a=1), rtol=1e-14, atol=1e-14)
    with pytest.raises(TypeError, match="C and c are one argument"):
        ozaki.dgemm(A, B, trans_a=1, beta=1.0, C=Cm, c=Cm)
    for bad in (3, -1, "X", 1.5, 3.0, None, [1]):
        with pytest.raises(ValueError, match="trans_a must be 0, 1, 2"):
            ozaki.dgemm(A, B, trans_a=bad)
    # scipy's wrappers take bools and integral floats: so does modlin
    for same in (True, 1.0, np.int8(1), np.True_):
        assert np.array_equal(ozaki.dgemm(A, B, trans_a=same), got)
    assert np.array_equal(ozaki.dgemm(A.T.copy(), B, trans_a=False), got)


def test_scipy_calls_port_with_every_keyword(rng):
    """Each of scipy.linalg.blas's calls, every keyword spelled as scipy spells it, gives
    scipy's result (within rounding) once alpha moves to a keyword; overwrite_c never
    modifies c."""
    A, B = rng.standard_normal((4, 3)), rng.standard_normal((4, 5))
    Z, W = A + 1j * rng.standard_normal((4, 3)), B + 1j * rng.standard_normal((4, 5))
    c = rng.standard_normal((3, 5))
    cz = c + 1j * rng.standard_normal((3, 5))
    s3, h4 = rng.standard_normal((3, 3)), rng.standard_normal((4, 4))
    h4 = h4 + h4.T + 0j
    calls = [
        (ozaki.dgemm(A, B, alpha=2.0, beta=0.5, c=c.copy(), trans_a=True, trans_b=False, overwrite_c=1),
         blas.dgemm(2.0, A, B, beta=0.5, c=c.copy(), trans_a=True, trans_b=False, overwrite_c=1)),
        (ozaki.zgemm(Z, W, alpha=1 - 2j, beta=0.5j, c=cz.copy(), trans_a=2, overwrite_c=True),
         blas.zgemm(1 - 2j, Z, W, beta=0.5j, c=cz.copy(), trans_a=2, overwrite_c=True)),
        (ozaki.dsyrk(A, alpha=3.0, beta=1.0, c=s3.copy(), trans=1, lower=1, overwrite_c=0),
         np.tril(blas.dsyrk(3.0, A, beta=1.0, c=s3.copy(), trans=1, lower=1, overwrite_c=0))),
        (ozaki.zherk(Z, alpha=0.5, beta=2.0, c=h4.copy(), trans=0, lower=0, overwrite_c=1),
         np.triu(blas.zherk(0.5, Z, beta=2.0, c=h4.copy(), trans=0, lower=0, overwrite_c=1))),
    ]
    for got, want in calls:
        assert np.allclose(got, want, rtol=1e-13, atol=1e-13), (got, want)
    # overwrite_c: c is read, never written
    keep = c.copy()
    ozaki.dgemm(A, B, beta=1.0, c=c, trans_a=1, overwrite_c=True)
    assert np.array_equal(c, keep)
    with pytest.raises(TypeError, match="overwrite_c must be a bool"):
        ozaki.dgemm(A, B, trans_a=1, overwrite_c="yes")
    # longdouble is rounded to float64 first, as scipy rounds it
    L = A.astype(np.longdouble) + np.longdouble(2) ** -60
    assert np.array_equal(ozaki.dgemm(L, B, trans_a=1), ozaki.dgemm(L.astype(np.float64), B, trans_a=1))
    assert blas.dgemm(1.0, L, B, trans_a=1).dtype == ozaki.dgemm(L, B, trans_a=1).dtype == np.float64


def test_zgemm_conjugate_transpose(rng):
    Z = rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))
    W = rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))
    got = ozaki.zgemm(Z, W, trans_b=2)
    assert np.array_equal(got, ozaki.zgemm(Z, W.conj().T.copy()))
    assert np.allclose(got, blas.zgemm(1.0, Z, W, trans_b=2), rtol=1e-14, atol=1e-14)
    assert np.array_equal(ozaki.zgemm(Z, W, trans_b="T"), ozaki.zgemm(Z, W.T.copy()))
    assert np.array_equal(ozaki.zgemm(Z, Z, trans_a="C"), ozaki.zgemm(Z.conj().T.copy(), Z))


def test_dsyrk_trans_and_lower_match_scipy(real):
    A = real[0]
    full = ozaki.dsyrk(A, trans=1)
    assert np.array_equal(full, ozaki.dsyrk(A.T.copy()))
    assert np.array_equal(full, full.T)  # the default: the full symmetric matrix
    assert np.allclose(full, A.T @ A, rtol=1e-14)
    for lower in (0, 1, False, True):
        for trans in (0, 1):
            got = ozaki.dsyrk(A, trans=trans, lower=lower)
            ref = blas.dsyrk(1.0, A, trans=trans, lower=lower)
            assert np.allclose(got, ref, rtol=1e-14, atol=1e-14), (trans, lower)
            # the other triangle is zero, as scipy returns it without c
            other = np.triu(got, 1) if lower else np.tril(got, -1)
            assert not other.any()
    C = np.ones((4, 4))
    got = ozaki.dsyrk(A, lower=True, beta=1.0, c=C)
    assert np.allclose(np.tril(got), np.tril(blas.dsyrk(1.0, A, beta=1.0, c=C, lower=1)), rtol=1e-14)


def test_zherk_trans_and_lower_match_scipy(rng):
    Z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    got = ozaki.zherk(Z, trans=2)
    assert np.array_equal(got, ozaki.zherk(Z.conj().T.copy()))
    assert np.allclose(np.triu(got), blas.zherk(1.0, Z, trans=2), rtol=1e-14, atol=1e-14)
    low = ozaki.zherk(Z, lower=True)
    assert np.allclose(low, blas.zherk(1.0, Z, lower=1), rtol=1e-14, atol=1e-14)
    assert not np.triu(low, 1).any()
    with pytest.raises(ValueError, match="not Hermitian"):
        ozaki.zherk(Z, trans=1)


# ===================================================================== trsm: scipy.linalg.solve_triangular's names

@pytest.mark.parametrize("p", [7, 2**61 - 1, P127])
def test_trsm_trans(p, rng):
    k = 5
    T = [[int(v) % p for v in row] for row in rng.integers(0, 2**62, (k, k))]
    for i in range(k):
        T[i][i] = T[i][i] or 1
    B = [[int(v) % p for v in row] for row in rng.integers(0, 2**62, (k, 2))]
    Tobj, Bobj = np.array(T, dtype=object), np.array(B, dtype=object)
    for lower in (True, False):
        tri = np.tril(Tobj) if lower else np.triu(Tobj)
        for trans in (0, 1, 2, "N", "T", "C", "t"):
            X = linalg.trsm(Tobj, Bobj, p, lower=lower, trans=trans)
            op = tri if trans in (0, "N") else tri.T
            assert ((op.dot(X.astype(object)) - Bobj) % p == 0).all(), (lower, trans)
            Y = linalg.trsm(Tobj, Bobj.T, p, side="right", lower=lower, trans=trans)
            assert ((Y.astype(object).dot(op) - Bobj.T) % p == 0).all(), (lower, trans)
    with pytest.raises(ValueError, match="trans must be 0, 1, 2"):
        linalg.trsm(Tobj, Bobj, p, trans=3)


def test_trsm_trans_on_flint(rng):
    A = _nonsingular(rng, 5, P64, "nmod")
    B = nmod(rng, 5, 2, P64)
    lower = same_type(A, [[A[i, j] if j <= i else 0 for j in range(5)] for i in range(5)])
    X = linalg.trsm(A, B, trans=1)
    assert type(X) is flint.nmod_mat and lower.transpose() * X == B


FUNCTIONS.update({
    "ozaki.dgemm": (lambda a, b: ozaki.dgemm(a, b)),
    "ozaki.zgemm": (lambda a, b: ozaki.zgemm(a, b)),
})
ONE_OPERAND.update({
    "ozaki.dsyrk": (lambda a: ozaki.dsyrk(a)),
    "ozaki.zherk": (lambda a: ozaki.zherk(a)),
    "ozaki.dgemm C": (lambda a: ozaki.dgemm(OK2, OK2, beta=1.0, C=a)),
})
RESIDUE_REFUSERS.update({
    "ozaki.dgemm": lambda a: ozaki.dgemm(a, a), "ozaki.zgemm": lambda a: ozaki.zgemm(a, a),
    "ozaki.dsyrk": lambda a: ozaki.dsyrk(a), "ozaki.zherk": lambda a: ozaki.zherk(a),
})


def test_ozaki_refuses_fmpz_mat():
    with pytest.raises(TypeError, match="A is a python-flint fmpz_mat"):
        ozaki.dgemm(flint.fmpz_mat(1, 1, [1]), [[1.0]])


# ===================================================================== refusals: the tests

@pytest.mark.parametrize("bad", BAD, ids=list(BAD))
@pytest.mark.parametrize("fn", FUNCTIONS, ids=list(FUNCTIONS))
def test_two_operand_refusals_name_the_operand(fn, bad):
    x, match = BAD[bad]
    first = "T" if fn == "linalg.trsm" else "A"
    with pytest.raises(TypeError, match=rf"^{first} .*{match}"):
        FUNCTIONS[fn](x, OK2)
    with pytest.raises(TypeError, match=rf"^B .*{match}"):
        FUNCTIONS[fn](OK2, x)


# C=None means "no C", not a bad operand
@pytest.mark.parametrize("fn, bad", [(f, b) for f in ONE_OPERAND for b in BAD if not (f.endswith(" C") and b == "None")],
                         ids=lambda v: v)
def test_one_operand_refusals_name_the_operand(fn, bad):
    x, match = BAD[bad]
    with pytest.raises(TypeError, match=rf"^{'C' if fn.endswith(' C') else 'A'} .*{match}"):
        ONE_OPERAND[fn](x)


@pytest.mark.parametrize("fn", RESIDUE_REFUSERS, ids=list(RESIDUE_REFUSERS))
def test_integer_and_float_functions_refuse_residues(fn):
    for bad in (galois.GF(7)([[1, 2], [3, 4]]), flint.nmod_mat(2, 2, [1, 2, 3, 4], 7),
                flint.fmpz_mod_mat(2, 2, [1, 2, 3, 4], flint.fmpz_mod_ctx(7))):
        with pytest.raises(TypeError, match=r"^A is a (galois FieldArray|python-flint nmod_mat|python-flint "
                                            r"fmpz_mod_mat).*modlin.matmul"):
            RESIDUE_REFUSERS[fn](bad)


def test_refusals_come_before_any_kernel(monkeypatch):
    """A bad second operand is refused before the first is converted, planned or multiplied."""

    def boom(*args, **kwargs):
        raise AssertionError("work began before the operands were checked")

    from modlin._algorithms import products as _products
    from modlin._front import products as _front

    for name in ("residues_int64", "balanced_halves", "make_plan"):
        monkeypatch.setattr(_products, name, boom)
    monkeypatch.setattr(_front, "make_plan", boom)
    with pytest.raises(TypeError, match="^B is None"):
        modlin.matmul(OK2, None, 7)


def test_masked_array_without_masked_entries_is_still_refused():
    with pytest.raises(TypeError, match="masked"):
        modlin.matmul(np.ma.array(OK2), OK2, 7)


def test_array_likes_are_still_accepted():
    class Wrapped:
        def __array__(self, dtype=None, copy=None):
            return OK2

    assert np.array_equal(modlin.matmul(Wrapped(), OK2, 7), (OK2 @ OK2) % 7)
    assert np.array_equal(modlin.matmul(((1, 2), (3, 4)), OK2, 7), (OK2 @ OK2) % 7)
