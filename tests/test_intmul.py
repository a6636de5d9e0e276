"""``modlin.intmul``: exact integer matrix products of any entry size.

Results are compared EXACTLY with Python integers (object-array ``numpy.matmul``)
and with python-flint's ``fmpz_mat``. The result dtype is part of the contract:
int64 when the bound ``k * max|A| * max|B|`` is below ``2**63``, otherwise an
object array of Python ints.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import modlin
from conftest import as_python_ints, from_flint, rand_ints
from modlin._arith.moduli import int8_moduli

INT8_RANGE = math.prod(int8_moduli())  # the int8 engine covers bounds below about INT8_RANGE / 2


# ----------------------------------------------------------------- oracles

def ref_intmul(A, B):
    """Exact ``A @ B`` with Python ints, ``numpy.matmul`` shape rules (a Python int for 1-D @ 1-D)."""
    a = as_python_ints(A)
    b = as_python_ints(B)
    if a.ndim == 1 and b.ndim == 1:
        return sum((int(x) * int(y) for x, y in zip(a, b, strict=True)), 0)
    r = np.matmul(a, b)
    return np.zeros(r.shape, dtype=object) if r.size == 0 else np.asarray(r, dtype=object)


def flint_intmul(A, B) -> np.ndarray:
    """``A @ B`` for 2-D operands with python-flint's ``fmpz_mat``."""
    import flint

    a = as_python_ints(A)
    b = as_python_ints(B)
    m, k = a.shape
    k2, n = b.shape
    assert k == k2
    return from_flint(flint.fmpz_mat(m, k, [int(x) for x in a.ravel()]) * flint.fmpz_mat(k, n, [int(x) for x in b.ravel()]))


def max_abs(x) -> int:
    vals = [abs(int(v)) for v in as_python_ints(x).ravel()]
    return max(vals, default=0)


def expected_dtype(A, B):
    k = np.shape(A)[-1]
    return np.dtype(np.int64) if k * max_abs(A) * max_abs(B) < 2**63 else np.dtype(object)


def assert_int_exact(C, A, B, oracle=ref_intmul) -> None:
    """``C`` is the exact ``A @ B``, with the documented dtype."""
    R = oracle(A, B)
    dt = expected_dtype(A, B)
    if isinstance(R, int):
        if dt == np.int64:
            assert isinstance(C, np.integer) and C.dtype == np.int64, type(C)
        else:
            assert isinstance(C, int), type(C)
        assert int(C) == R
        return
    assert isinstance(C, np.ndarray), type(C)
    assert C.dtype == dt, (C.dtype, dt)
    assert C.shape == R.shape, (C.shape, R.shape)
    if C.dtype == object:
        assert all(type(v) is int for v in C.ravel()), "object results must hold Python ints"
    mism = np.argwhere(C.astype(object) != R)
    assert mism.size == 0, (
        f"{len(mism)} mismatching entries; first at {tuple(mism[0])}: "
        f"got {C[tuple(mism[0])]}, expected {R[tuple(mism[0])]}"
    )


def int8_fits(A, B) -> bool:
    return 2 * np.shape(A)[-1] * max_abs(A) * max_abs(B) + 2 <= INT8_RANGE


ENGINES = [None, "fp64", "fp32", "int8"]


# ===================================================================== worst cases

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bits", [1, 20, 26, 31, 32, 53, 63, 64, 200, 1000])
def test_worst_case_all_negative(bits, engine):
    """All entries -(2**b - 1): every product at its maximum, all of one sign (the bound attained)."""
    x = 2**bits - 1
    m, k, n = 3, 13, 4
    A = np.full((m, k), -x, dtype=object)
    B = np.full((k, n), -x, dtype=object)
    if bits <= 63:
        A = A.astype(np.int64)
        B = B.astype(np.int64)
    if engine == "int8" and not int8_fits(A, B):
        with pytest.raises(ValueError, match="int8 moduli"):
            modlin.intmul(A, B, engine=engine)
        return
    C = modlin.intmul(A, B, engine=engine)
    assert_int_exact(C, A, B)
    assert set(C.astype(object).ravel()) == {k * x * x}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bits", [20, 64, 200, 1000])
def test_worst_case_mixed_signs(bits, engine, rng):
    x = 2**bits - 1
    signs_a = rng.choice([-1, 1], (4, 11))
    signs_b = rng.choice([-1, 1], (11, 5))
    A = (signs_a.astype(object) * x)
    B = (signs_b.astype(object) * x)
    B[:, 0] = signs_a[0].astype(object) * x  # C[0, 0] reaches +k*x*x, C[0, 1] reaches -k*x*x
    B[:, 1] = -signs_a[0].astype(object) * x
    if engine == "int8" and not int8_fits(A, B):
        with pytest.raises(ValueError, match="int8 moduli"):
            modlin.intmul(A, B, engine=engine)
        return
    C = modlin.intmul(A, B, engine=engine)
    assert_int_exact(C, A, B)
    assert_int_exact(C, A, B, oracle=flint_intmul)
    assert C[0, 0] == 11 * x * x and C[0, 1] == -11 * x * x


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bits", [20, 64, 200, 1000])
def test_random_entries(bits, engine, rng):
    A = rand_ints(rng, (5, 17), -(2**bits - 1), 2**bits - 1)
    B = rand_ints(rng, (17, 6), -(2**bits - 1), 2**bits - 1)
    if engine == "int8" and not int8_fits(A, B):
        return
    assert_int_exact(modlin.intmul(A, B, engine=engine), A, B, oracle=flint_intmul)


def test_unbalanced_sizes(rng):
    # a 1000-bit matrix times a small one, and a 3000-bit one times 1-bit entries
    A = rand_ints(rng, (3, 8), -(2**1000), 2**1000)
    B = rng.integers(-3, 3, (8, 4))
    assert_int_exact(modlin.intmul(A, B), A, B, oracle=flint_intmul)
    A = rand_ints(rng, (2, 5), -(2**3000), 2**3000)
    B = rng.integers(0, 2, (5, 2)).astype(bool)
    assert_int_exact(modlin.intmul(A, B), A, B)


# ===================================================================== the int64 / object boundary

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("A, B", [
    ([[2**31, 2**31]], [[2**30], [2**30]]),            # bound 2**62: int64
    ([[2**31, 2**31]], [[2**31], [-2**31]]),           # bound 2**63: object (though the product is 0)
    ([[2**63 - 1]], [[1]]),                            # bound 2**63 - 1: int64
    ([[2**63 - 1]], [[-1]]),
    ([[-2**63]], [[1]]),                               # bound 2**63: object, value -2**63
    ([[2**62 + 12345, 3]], [[-1], [5]]),
    ([[2**31 - 1, 2**31 - 1]], [[-2**31], [-2**31]]),  # bound just below 2**63: int64 near -2**63
    ([[2**26, -2**26]], [[2**26], [2**26]]),           # bound 2**53: one fp64 GEMM
    ([[2**26 + 1, 1]], [[2**26], [2**26]]),            # just above 2**53
], ids=lambda v: str(v) if len(str(v)) < 30 else None)
def test_dtype_boundary(A, B, engine):
    A = np.array(A, dtype=np.int64)
    B = np.array(B, dtype=np.int64)
    assert_int_exact(modlin.intmul(A, B, engine=engine), A, B)
    # object operands give the same values and the same dtype rule
    assert_int_exact(modlin.intmul(A.astype(object), B.astype(object), engine=engine), A, B)


# ===================================================================== inputs

@pytest.mark.parametrize("engine", [None, "int8"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                                   np.uint64, ">i4", ">u8", "<i2"])
def test_integer_dtypes(dtype, engine, rng):
    dt = np.dtype(dtype)
    info = np.iinfo(dt)
    native = dt.newbyteorder("=")
    A = rng.integers(info.min, info.max, (2, 3, 4), dtype=native, endpoint=True).astype(dt)
    B = rng.integers(info.min, info.max, (4, 5), dtype=native, endpoint=True).astype(dt)
    A[0, 0, :] = info.max
    B[:, 0] = info.min if info.min else info.max
    assert_int_exact(modlin.intmul(A, B, engine=engine), A, B)


def test_bool_and_uint64_extremes():
    A = np.array([[True, False, True]])
    B = np.array([[True], [True], [True]])
    assert_int_exact(modlin.intmul(A, B), A, B)
    U = np.array([[2**64 - 1, 2**63, 1]], dtype=np.uint64)
    V = np.array([[2**64 - 1], [2**64 - 1], [2**64 - 1]], dtype=np.uint64)
    assert_int_exact(modlin.intmul(U, V), U, V)
    S = np.array([[-1], [-2**63], [2**63 - 1]], dtype=np.int64)
    assert_int_exact(modlin.intmul(U, S), U, S)
    # a huge entry times zeros: bound 0, the one-GEMM path must not round anything
    Z = np.zeros((3, 1), dtype=np.int64)
    assert_int_exact(modlin.intmul(U, Z), U, Z)


def test_object_arrays_of_numpy_integers():
    A = np.array([[np.int64(-5), np.uint64(2**64 - 1), 7]], dtype=object)
    B = np.array([[np.int8(3)], [np.uint32(2**32 - 1)], [2**100]], dtype=object)
    assert_int_exact(modlin.intmul(A, B), A, B)


def test_lists_are_accepted():
    assert_int_exact(modlin.intmul([[1, -2], [3, 4]], [[5], [-(2**70)]]), [[1, -2], [3, 4]], [[5], [-(2**70)]])


def test_inputs_not_modified(rng):
    A = rand_ints(rng, (3, 4), -(2**200), 2**200)
    B = rng.integers(-2**63, 2**63 - 1, (4, 2), endpoint=True)
    A0, B0 = A.copy(), B.copy()
    modlin.intmul(A, B)
    assert (A == A0).all() and np.array_equal(B, B0)


@pytest.mark.parametrize("bad", [
    np.ones((2, 2)), np.ones((2, 2), dtype=np.float32), np.array([[1.0, 2.0], [3.0, 4.0]]),
    np.ones((2, 2), dtype=np.float16),
])
def test_floats_refused(bad):
    good = np.ones((2, 2), dtype=np.int64)
    with pytest.raises(TypeError, match="float"):
        modlin.intmul(bad, good)
    with pytest.raises(TypeError, match="float"):
        modlin.intmul(good, bad)


@pytest.mark.parametrize("value", [2.5, 2.0, Fraction(2), True, None, "3", 1 + 0j])
def test_object_non_integers_refused(value):
    A = np.array([[1, value]], dtype=object)
    with pytest.raises(TypeError, match="integers"):
        modlin.intmul(A, np.ones((2, 1), dtype=np.int64))
    with pytest.raises(TypeError, match="integers"):
        modlin.intmul(np.ones((1, 2), dtype=np.int64), A.T)


def test_other_types_refused():
    good = np.ones((2, 2), dtype=np.int64)
    with pytest.raises(TypeError, match="complex"):
        modlin.intmul(np.ones((2, 2), dtype=complex), good)
    with pytest.raises(TypeError, match="complex"):
        modlin.intmul(good, np.ones((2, 2), dtype=np.complex64))
    with pytest.raises(TypeError):
        modlin.intmul(np.array([["1", "2"], ["3", "4"]]), good)
    with pytest.raises(TypeError):
        modlin.intmul(np.ones((2, 2), dtype="m8[s]"), good)


def test_shape_errors():
    with pytest.raises(ValueError, match="not aligned"):
        modlin.intmul(np.ones((2, 3), dtype=np.int64), np.ones((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="not aligned"):
        modlin.intmul(np.ones(3, dtype=np.int64), np.ones(4, dtype=np.int64))
    with pytest.raises(ValueError, match="broadcast"):
        modlin.intmul(np.ones((2, 2, 3), dtype=np.int64), np.ones((3, 3, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="at least one dimension"):
        modlin.intmul(np.int64(3), np.ones((2, 2), dtype=np.int64))
    # the shape is checked before the entries
    with pytest.raises(ValueError, match="not aligned"):
        modlin.intmul(np.ones((2, 3)), np.ones((2, 3)))


def test_unknown_engine():
    with pytest.raises(ValueError, match="unknown engine"):
        modlin.intmul(np.ones((2, 2), dtype=np.int64), np.ones((2, 2), dtype=np.int64), engine="fp16")


# ===================================================================== shapes

@pytest.mark.parametrize("engine", [None, "int8"])
def test_one_dimensional(engine, rng):
    a = rand_ints(rng, (6,), -(2**100), 2**100)
    b = rand_ints(rng, (6,), -(2**90), 2**90)
    M = rng.integers(-2**40, 2**40, (6, 3))
    r = modlin.intmul(a, b, engine=engine)
    assert isinstance(r, int) and r == ref_intmul(a, b)
    assert_int_exact(modlin.intmul(a, M, engine=engine), a, M)
    assert_int_exact(modlin.intmul(M.T, b, engine=engine), M.T, b)
    small = modlin.intmul(np.array([1, 2]), np.array([3, 4]), engine=engine)
    assert isinstance(small, np.integer) and small.dtype == np.int64 and small == 11


@pytest.mark.parametrize("engine", [None, "int8"])
def test_batches_and_broadcasting(engine, rng):
    A = rng.integers(-2**40, 2**40, (3, 1, 2, 5))
    B = rng.integers(-2**40, 2**40, (4, 5, 3))
    assert_int_exact(modlin.intmul(A, B, engine=engine), A, B)
    Ao = rand_ints(rng, (2, 3, 4), -(2**150), 2**150)
    Bo = rand_ints(rng, (4, 2), -(2**10), 2**10)
    assert_int_exact(modlin.intmul(Ao, Bo, engine=engine), Ao, Bo)
    assert_int_exact(modlin.intmul(Bo.T, Ao.swapaxes(-1, -2), engine=engine), Bo.T, Ao.swapaxes(-1, -2))


@pytest.mark.parametrize("engine", [None, "fp64", "int8"])
@pytest.mark.parametrize("sa, sb", [((0, 5), (5, 4)), ((3, 5), (5, 0)), ((0, 5), (5, 0)), ((2, 0, 5), (5, 3))])
def test_empty_outputs(sa, sb, engine):
    A = np.ones(sa, dtype=np.int64)
    B = np.ones(sb, dtype=np.int64)
    C = modlin.intmul(A, B, engine=engine)
    assert C.shape == np.matmul(A, B).shape and C.dtype == np.int64


@pytest.mark.parametrize("dtype", [np.int64, object])
@pytest.mark.parametrize("sa, sb", [((3, 0), (0, 4)), ((0,), (0,)), ((2, 3, 0), (0, 2))])
def test_k_zero_default_engine(sa, sb, dtype):
    C = modlin.intmul(np.zeros(sa, dtype=dtype), np.zeros(sb, dtype=dtype))
    R = np.matmul(np.zeros(sa), np.zeros(sb))
    assert np.shape(C) == R.shape and np.all(np.asarray(C) == 0)


@pytest.mark.parametrize("engine", ["fp64", "int8"])
@pytest.mark.parametrize("sa, sb", [((3, 0), (0, 4)), ((0,), (0,))])
def test_k_zero_with_engine(sa, sb, engine):
    C = modlin.intmul(np.zeros(sa, dtype=np.int64), np.zeros(sb, dtype=np.int64), engine=engine)
    assert np.shape(C) == np.matmul(np.zeros(sa), np.zeros(sb)).shape and np.all(np.asarray(C) == 0)


# ===================================================================== thin products

@pytest.mark.parametrize("engine", [None, "int8"])
def test_thin_k_100000_worst_case(engine):
    k = 100_000
    x = 2**40 - 1
    A = np.full((3, k), -x, dtype=np.int64)
    B = np.full((k, 2), -x, dtype=np.int64)
    B[::2, 1] = x
    C = modlin.intmul(A, B, engine=engine)
    assert C.dtype == object and C.shape == (3, 2)
    assert (C[:, 0] == k * x * x).all() and (C[:, 1] == 0).all()


def test_thin_k_100000_random(rng):
    k = 100_000
    A = rng.integers(-2**63, 2**63 - 1, (3, k), endpoint=True)
    B = rng.integers(0, 2**64 - 1, (k, 2), dtype=np.uint64, endpoint=True)
    assert_int_exact(modlin.intmul(A, B), A, B, oracle=flint_intmul)


def test_thin_big_entries(rng):
    k = 5_000
    A = rand_ints(rng, (2, k), -(2**200), 2**200)
    B = rand_ints(rng, (k, 2), -(2**200), 2**200)
    assert_int_exact(modlin.intmul(A, B), A, B, oracle=flint_intmul)


# ===================================================================== user moduli

PRIMES_20: list[int] = []


def _primes_20():
    if not PRIMES_20:
        import galois

        q = 2**20
        while len(PRIMES_20) < 12:
            q = int(galois.prev_prime(q - 1))
            PRIMES_20.append(q)
    return tuple(PRIMES_20)


def test_user_moduli_tuple(rng):
    A = rand_ints(rng, (3, 5), -(2**100), 2**100)
    B = rand_ints(rng, (5, 2), -(2**100), 2**100)
    # 12 primes of 20 bits: M has ~240 bits >= 2 * 5 * 2**200 + 2
    assert_int_exact(modlin.intmul(A, B, moduli=_primes_20()), A, B)
    assert_int_exact(modlin.intmul(A, B, moduli=_primes_20()[::-1]), A, B)
    C = modlin.intmul(A[:, :2], B[:2], moduli=int8_moduli()[:30], engine="int8")
    assert_int_exact(C, A[:, :2], B[:2])


@pytest.mark.parametrize("wrap", [list, np.array], ids=["list", "ndarray"])
def test_user_moduli_list(wrap):
    A = np.array([[2**40, -3], [5, 7]], dtype=np.int64)
    assert_int_exact(modlin.intmul(A, A, moduli=wrap(_primes_20()[:6])), A, A)


def test_user_moduli_errors():
    A = np.array([[2**40, -3], [5, 7]], dtype=np.int64)
    with pytest.raises(ValueError, match="pairwise coprime"):
        modlin.intmul(A, A, moduli=(2**26 - 5, 2**26 - 5, 2**25 - 39, 65521))
    with pytest.raises(ValueError, match="pairwise coprime"):
        modlin.intmul(A, A, moduli=(6, 2**26 - 5, 2**25 - 39, 10))
    with pytest.raises(ValueError, match="add moduli"):
        modlin.intmul(A, A, moduli=(2**26 - 5, 2**25 - 39))
    with pytest.raises(ValueError, match="add moduli"):
        modlin.intmul(A, A, moduli=())
    with pytest.raises(ValueError, match=r"2\*\*26"):
        modlin.intmul(A, A, moduli=(2**26, 2**26 - 5, 2**25 - 39, 65521))
    with pytest.raises(ValueError, match=r"2\*\*26"):
        modlin.intmul(A, A, moduli=(1, 2**26 - 5, 2**25 - 39, 65521))


# ===================================================================== huge entries

def test_entries_of_3000_bits(rng):
    A = rand_ints(rng, (2, 3), -(2**3000), 2**3000)
    B = rand_ints(rng, (3, 2), -(2**3000), 2**3000)
    assert_int_exact(modlin.intmul(A, B), A, B, oracle=flint_intmul)
    assert_int_exact(modlin.intmul(A, B, engine="fp64"), A, B)


def test_entries_of_6000_bits_automatic():
    A = np.array([[2**6000 - 1, 2], [3, -(2**6000 - 1)]], dtype=object)
    assert_int_exact(modlin.intmul(A, A), A, A)


def test_entries_of_6000_bits_fp64():
    A = np.array([[2**6000 - 1, 2], [3, -(2**6000 - 1)]], dtype=object)
    assert_int_exact(modlin.intmul(A, A, engine="fp64"), A, A)


# ===================================================================== agreement with matmul

@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**127 - 1, 10**30])
def test_intmul_mod_p_is_matmul(p, rng):
    A = rand_ints(rng, (3, 2, 7), -(2**150), 2**150)
    B = rand_ints(rng, (7, 4), -(2**150), 2**150)
    C = modlin.intmul(A, B)
    assert (np.asarray(modlin.matmul(A, B, p)).astype(object) == C % p).all()


# ===================================================================== properties

@st.composite
def int_products(draw):
    bits_a = draw(st.sampled_from([1, 8, 26, 31, 32, 52, 53, 63, 64, 65, 100, 300, 1000]))
    bits_b = draw(st.sampled_from([1, 8, 32, 64, 200]))
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 12)), draw(st.integers(1, 4))

    def entries(bits, count):
        top = 2**bits - 1
        e = st.one_of(st.integers(-top, top), st.sampled_from([top, -top, 0, 1, -1]))
        return draw(st.lists(e, min_size=count, max_size=count))

    A = np.array(entries(bits_a, m * k), dtype=object).reshape(m, k)
    B = np.array(entries(bits_b, k * n), dtype=object).reshape(k, n)
    if bits_a <= 63 and draw(st.booleans()):
        A = A.astype(np.int64)
    if bits_b <= 63 and draw(st.booleans()):
        B = B.astype(np.int64)
    return A, B


@given(int_products(), st.sampled_from([None, "fp64", "fp32", "int8"]))
def test_property_intmul(prod, engine):
    A, B = prod
    if engine == "int8" and not int8_fits(A, B):
        return
    assert_int_exact(modlin.intmul(A, B, engine=engine), A, B)


@settings(max_examples=40)
@given(st.data())
def test_property_intmul_batched_against_flint(data):
    bits = data.draw(st.integers(1, 400))
    batch, m, k, n = (data.draw(st.integers(1, 3)) for _ in range(4))
    top = 2**bits - 1
    ints = st.integers(-top, top)
    A = np.array(data.draw(st.lists(ints, min_size=batch * m * k, max_size=batch * m * k)),
                 dtype=object).reshape(batch, m, k)
    B = np.array(data.draw(st.lists(ints, min_size=k * n, max_size=k * n)), dtype=object).reshape(k, n)
    C = modlin.intmul(A, B)
    assert_int_exact(C, A, B)
    for i in range(batch):
        assert (C[i].astype(object) == flint_intmul(A[i], B)).all()
