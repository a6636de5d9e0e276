"""galois ``FieldArray`` operands: results in the same field, checked against galois itself."""

from __future__ import annotations

import galois
import numpy as np
import pytest

import modlin
from conftest import ref_matmul

PRIME_FIELDS = [7, 65521, 2**31 - 1, 2**50 - 27]  # the last one is stored as an object array


@pytest.fixture(scope="module", params=PRIME_FIELDS, ids=lambda p: f"GF({p})")
def GF(request):
    return galois.GF(request.param)


@pytest.fixture(scope="module")
def GF7():
    return galois.GF(7)


def field_ints(X) -> np.ndarray:
    """A FieldArray's entries as an object array of Python ints."""
    return np.array([int(e) for e in X.view(np.ndarray).ravel()], dtype=object).reshape(X.shape)


def random_field(GF, shape, rng):
    return GF(rng.integers(0, GF.order, shape, dtype=np.int64).astype(GF.dtypes[-1]))


def test_round_trip_matches_galois(GF, rng):
    p = int(GF.order)
    A = random_field(GF, (5, 7), rng)
    B = random_field(GF, (7, 3), rng)
    A[0] = p - 1
    B[:, 0] = p - 1
    A0, B0 = A.copy(), B.copy()
    C = modlin.matmul(A, B)
    assert type(C) is GF
    assert C.shape == (5, 3)
    assert np.array_equal(C, A @ B)  # galois' own field arithmetic
    assert np.array_equal(field_ints(C), ref_matmul(field_ints(A), field_ints(B), p))
    assert np.array_equal(A, A0) and np.array_equal(B, B0) and type(A) is GF


def test_p_given_matching(GF, rng):
    p = int(GF.order)
    A = random_field(GF, (3, 4), rng)
    B = random_field(GF, (4, 2), rng)
    expect = A @ B
    for q in (p, np.int64(p), np.uint64(p)):
        C = modlin.matmul(A, B, q)
        assert type(C) is GF and np.array_equal(C, expect)


def test_p_mismatch(GF):
    p = int(GF.order)
    A = GF.Ones((2, 2))
    for q in (p + 1, p - 1, 2, 2 * p):
        with pytest.raises(ValueError, match=rf"p = {q} does not match .*GF\({p}\)"):
            modlin.matmul(A, A, q)


def test_field_times_plain_ndarray(GF, rng):
    """A plain operand (negative, unreduced, any dtype) is read modulo the field's order."""
    p = int(GF.order)
    A = random_field(GF, (4, 5), rng)
    B = rng.integers(-(2**62), 2**62, (5, 3))
    C = modlin.matmul(A, B)
    assert type(C) is GF
    assert np.array_equal(field_ints(C), ref_matmul(field_ints(A), B, p))
    assert np.array_equal(C, A @ GF(np.remainder(B, p).astype(GF.dtypes[-1])))
    # plain @ field as well
    D = modlin.matmul(B.T, A.T)
    assert type(D) is GF and np.array_equal(D, C.T)


def test_vectors_and_stacks(GF, rng):
    p = int(GF.order)
    v = random_field(GF, (5,), rng)
    M = random_field(GF, (3, 5, 2), rng)
    r = modlin.matmul(v, M)
    assert type(r) is GF and r.shape == (3, 2)
    assert np.array_equal(r, np.stack([v @ M[i] for i in range(3)]))
    s = modlin.matmul(v, v)
    assert isinstance(s, GF) and np.ndim(s) == 0
    assert int(s) == sum(int(a) * int(a) for a in v) % p


def test_out_field_array(GF7, rng):
    A = GF7.Random((3, 4), seed=1)
    B = GF7.Random((4, 2), seed=2)
    out = GF7.Zeros((3, 2))
    r = modlin.matmul(A, B, out=out)
    assert r is out and np.array_equal(out, A @ B)
    with pytest.raises(TypeError, match=r"out must be a GF\(7\) FieldArray"):
        modlin.matmul(A, B, out=np.zeros((3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        modlin.matmul(A, B, out=GF7.Zeros((2, 3)))


def test_small_fields_hand_checked():
    GF2 = galois.GF(2)
    A = GF2([[1, 1], [0, 1]])
    # [[1,1],[0,1]]^2 = [[1,2],[0,1]] = [[1,0],[0,1]] over GF(2)
    C = modlin.matmul(A, A)
    assert type(C) is GF2 and C.tolist() == [[1, 0], [0, 1]]
    GF5 = galois.GF(5)
    assert modlin.matmul(GF5([[2, 3]]), GF5([[4], [4]])).tolist() == [[0]]  # 8 + 12 = 20


def test_extension_fields_refused():
    for q in (2**8, 3**2):
        GFq = galois.GF(q)
        A = GFq([[1, 2], [3, 4]])
        with pytest.raises(ValueError, match="extension field"):
            modlin.matmul(A, A)
        with pytest.raises(ValueError, match="extension field"):
            modlin.matmul(A, np.eye(2, dtype=np.int64), 2)


def test_mixed_fields_refused(GF7):
    GF11 = galois.GF(11)
    with pytest.raises(ValueError, match=r"different fields.*GF\(11\).*GF\(7\)"):
        modlin.matmul(GF7.Ones((2, 2)), GF11.Ones((2, 2)))
    with pytest.raises(ValueError, match="different fields"):
        modlin.matmul(GF11.Ones((2, 2)), GF7.Ones((2, 2)), 7)


def test_field_beyond_the_multiword_limit():
    # GF(2**61 - 1) is past the multiword products: its product goes through RNS
    GFbig = galois.GF(2**61 - 1)
    A = GFbig([[2**61 - 2, 2], [3, 2**60]])
    C = modlin.matmul(A, A)
    assert type(C) is GFbig
    assert np.array_equal(C, A @ A)


def test_non_integer_p_with_field(GF7):
    with pytest.raises(TypeError, match="integer"):
        modlin.matmul(GF7.Ones((2, 2)), GF7.Ones((2, 2)), 7.0)
