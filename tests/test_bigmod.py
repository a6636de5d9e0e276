"""The multi-limb Montgomery base cases modulo primes beyond 64 bits (modlin.linalg._bigmod)
against the object-array ones they replace and against Python's integers."""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from modlin import linalg
from modlin.linalg import _bigmod as bm
from modlin.linalg._elimination import _eliminate_object

PRIMES = [2**64 + 13, 2**89 - 1, 2**127 - 1, 2**255 - 19, 2**521 - 1]
# 2**521 - 1 is beyond the kernels: the object path; the others cover 3, 4, 8 limbs and the
# first modulus above 2**64
KERNEL_PRIMES = [q for q in PRIMES if bm.fits(q)]


def test_which_moduli_the_kernels_take():
    assert KERNEL_PRIMES == [2**64 + 13, 2**89 - 1, 2**127 - 1, 2**255 - 19]
    assert not bm.fits(2**521 - 1)  # beyond 512 bits
    assert not bm.fits(2**61 - 1)  # a word: the int64 kernels
    assert not bm.fits(3 * (2**127 - 1))  # composite: Fermat's inverse would be wrong
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
@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (5, 1), (3, 7), (8, 4), (17, 17)])
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
