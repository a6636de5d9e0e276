"""What ``modlin.matmul`` accepts and refuses: dtypes, shapes, layouts, ``out=``, errors."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import modlin
from conftest import assert_exact
from modlin._planning.plan import candidates

#: One modulus per size class, prime and composite.
SOME_MODULI = [2, 7, 2**16, 2**31 - 1, 10**12, 2**52 - 47, 2**52 - 1]

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def int_operand(dtype, shape, rng):
    """Random entries over the dtype's whole range, with its min and max planted."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    flat = x.reshape(-1)
    special = [info.min, info.max, info.max - 1, info.min + 1, 0, 1]
    flat[: len(special)] = np.array(special[: flat.size], dtype=dtype)
    return x


def plans_for(p, k_block=2):
    """Every variant once, with a small forced block so several reductions happen."""
    seen, out = set(), []
    for c in candidates(p, (4, 4, 4)):
        key = (c.engine, c.variant, c.u > 1, c.v > 1)
        if key not in seen:
            seen.add(key)
            out.append(dataclasses.replace(c, block=min(c.block, k_block)))
    return out


# ----------------------------------------------------------------- dtypes

@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("p", SOME_MODULI)
def test_integer_dtypes_full_range(dtype, p, rng):
    A = int_operand(dtype, (4, 6), rng)
    B = int_operand(dtype, (6, 3), rng)
    A0, B0 = A.copy(), B.copy()
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    assert A.dtype == dtype and np.array_equal(A, A0) and np.array_equal(B, B0)


def test_uint64_top_values(rng):
    """Values >= 2**63 must be reduced as the unsigned numbers they are."""
    top = np.array([[2**64 - 1, 2**63, 2**63 + 1, 2**64 - 2]], dtype=np.uint64)
    col = np.array([[1], [1], [1], [1]], dtype=np.uint64)
    for p in [3, 1000003, 2**31 - 1, 2**52 - 47, 2**52 - 1]:
        assert_exact(modlin.matmul(top, col, p), top, col, p)
        assert int(modlin.matmul(top[:, :1], col[:1], p)[0, 0]) == (2**64 - 1) % p
    # hand-checked: 2**64 - 1 = 3 * 5 * 17 * 257 * 641 * 65537 * 6700417
    assert modlin.matmul(top[:, :1], col[:1], 641)[0, 0] == 0
    assert modlin.matmul(top[:, :1], col[:1], 7)[0, 0] == (2**64 - 1) % 7 == 1


def test_uint64_non_native_byte_order():
    p = 1000003
    x = np.array([[2**64 - 1, 2**63]], dtype=">u8")
    one = np.array([[1], [0]])
    assert int(modlin.matmul(x, one, p)[0, 0]) == (2**64 - 1) % p


@pytest.mark.parametrize("dtype", [">i2", ">i4", ">i8", ">u2", ">u4", ">f4", ">f8", "<i8", "<u8"])
def test_non_native_byte_order(dtype, rng):
    lo = -(2**15) if dtype[1] in "if" else 0
    A = rng.integers(lo, 2**15, (3, 5)).astype(dtype)
    B = rng.integers(lo, 2**15, (5, 2)).astype(dtype)
    if dtype[1:] in ("i8", "u8", "f8"):
        A[0, 0] = 2**62 + 3 if dtype[1] != "f" else 2.0**62
    assert A.dtype == np.dtype(dtype)
    for p in [7, 2**31 - 1, 2**52 - 47]:
        assert_exact(modlin.matmul(A, B, p), A, B, p)


def test_mixed_integer_dtypes(rng):
    p = 2**31 - 1
    for da, db in [(np.int8, np.uint64), (np.uint8, np.int64), (np.int32, np.uint16), (np.bool_, np.uint64)]:
        A = rng.integers(0, 2, (3, 4)).astype(da) if da is np.bool_ else int_operand(da, (3, 4), rng)
        B = int_operand(db, (4, 5), rng)
        assert_exact(modlin.matmul(A, B, p), A, B, p)


def test_bool_operands(rng):
    A = rng.integers(0, 2, (5, 7)).astype(bool)
    B = rng.integers(0, 2, (7, 3)).astype(bool)
    for p in [2, 3, 7, 2**40 - 87]:
        C = modlin.matmul(A, B, p)
        assert_exact(C, A, B, p)
        # hand-checkable meaning: the number of common ones, mod p
        counts = A.astype(np.int64) @ B.astype(np.int64)
        assert np.array_equal(C, counts % p)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("p", [2, 7, 65521, 2**31 - 1, 2**52 - 47, 2**52 - 1])
def test_integral_float_dtypes(dtype, p, rng):
    """Negative values, values above p and above int64 (exactly representable ones)."""
    lim = {np.float16: 2048, np.float32: 2**24, np.float64: 2**53}.get(dtype, 2**53)
    A = rng.integers(-lim, lim, (4, 6)).astype(dtype)
    B = rng.integers(-lim, lim, (6, 3)).astype(dtype)
    big = [-lim, lim, p, -p, p + 1] if dtype is np.float16 else [-lim, lim, p, -p, p + 1, 2.0**70, -(3.0**40)]
    if dtype is np.float16:
        big = [v for v in big if abs(v) <= 65504]
    A.reshape(-1)[: len(big)] = np.array(big, dtype=dtype)
    B.reshape(-1)[-len(big):] = np.array(big[::-1], dtype=dtype)
    if dtype is not np.float16:
        A[3, 5] = np.finfo(dtype).max  # an integral float far beyond int64
    A0, B0 = A.copy(), B.copy()
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    assert np.array_equal(A, A0) and np.array_equal(B, B0)


def test_float_and_integer_operands_mixed(rng):
    p = 2**50 - 27
    A = rng.integers(-(2**53), 2**53, (3, 4)).astype(np.float64)
    B = int_operand(np.int64, (4, 2), rng)
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    assert_exact(modlin.matmul(B.T, A.T, p), B.T, A.T, p)


@pytest.mark.parametrize("p", [2, 7, 2**31 - 1, 2**52 - 47, 2**52 - 1])
def test_object_arrays_of_huge_python_ints(p, rng):
    vals = [10**40, -(10**40), 2**64, -(2**64) - 1, 2**100 + 1, -(3**90), p * 10**30, -p, 0, 1,
            np.int64(-5), np.uint64(2**64 - 1), 2**63 - 1]
    A = np.empty((3, len(vals)), dtype=object)
    for i in range(3):
        A[i] = vals[i:] + vals[:i]
    B = np.array([[int(x) * (j + 1) - j for j in range(4)] for x in rng.integers(-(10**6), 10**6, len(vals))],
                 dtype=object)
    B[0, 0] = 7**50
    A0, B0 = A.copy(), B.copy()
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    assert np.array_equal(A, A0) and np.array_equal(B, B0)
    # nested lists holding Python ints beyond int64 become object arrays the same way
    assert_exact(modlin.matmul(A.tolist(), B.tolist(), p), A, B, p)


def test_hand_checked_small_products():
    # [[1, 2], [3, 4]]^2 = [[7, 10], [15, 22]] -> mod 5: [[2, 0], [0, 2]]
    A = np.array([[1, 2], [3, 4]])
    assert modlin.matmul(A, A, 5).tolist() == [[2, 0], [0, 2]]
    # (p-1)^2 + 2 = p^2 - 2p + 3 = 3 mod p (the docstring example)
    p = 2**50 - 27
    assert modlin.matmul([[p - 1, 1]], [[p - 1], [2]], p).tolist() == [[3]]
    # -1 * -1 = 1 for every modulus, and 1 * 1 = 1 mod 2
    assert modlin.matmul([[-1]], [[-1]], 2**52 - 1).tolist() == [[1]]
    assert modlin.matmul([[1]], [[1]], 2).tolist() == [[1]]


# ----------------------------------------------------------------- shapes

@pytest.mark.parametrize("p", [7, 2**31 - 1, 2**52 - 47])
@pytest.mark.parametrize("sa, sb", [
    ((0, 5), (5, 3)), ((4, 5), (5, 0)), ((4, 0), (0, 3)), ((0, 0), (0, 0)), ((0, 2, 3), (3, 4)),
    ((2, 3, 0), (2, 0, 5)), ((0,), (0,)), ((0,), (0, 3)), ((4, 0), (0,)),
])
def test_empty_operands(sa, sb, p):
    A = np.ones(sa, dtype=np.int64)
    B = np.ones(sb, dtype=np.int64)
    C = modlin.matmul(A, B, p)
    expect = np.matmul(A, B)
    assert np.shape(C) == expect.shape
    assert np.asarray(C).dtype == np.int64
    assert np.all(np.asarray(C) == 0)  # k = 0: empty sums vanish; empty results have no entries
    assert_exact(C, A, B, p)


@pytest.mark.parametrize("p", [2, 251, 2**20 - 3, 2**31 - 1, 2**52 - 47])
def test_zero_inner_dimension_every_plan(p):
    A = np.ones((3, 0), dtype=np.int64)
    B = np.ones((0, 4), dtype=np.int64)
    for c in candidates(p, (3, 0, 4)):
        out = np.full((3, 4), 99, dtype=np.int64)
        C = modlin.matmul(A, B, p, plan=c, out=out)
        assert np.array_equal(out, np.zeros((3, 4))) and np.array_equal(C, out)


@pytest.mark.parametrize("p", [2, 7, 2**31 - 1, 2**52 - 47])
def test_one_by_one(p):
    for a, b in [(p - 1, p - 1), (-1, 1), (p // 2, p // 2), (2**63 - 1, -(2**63)), (0, 5)]:
        C = modlin.matmul(np.array([[a]]), np.array([[b]]), p)
        assert C.shape == (1, 1) and C.dtype == np.int64
        assert int(C[0, 0]) == (a * b) % p  # Python's % is the oracle here


@pytest.mark.parametrize("p", [7, 2**31 - 1, 2**52 - 47])
def test_one_dimensional_operands(p, rng):
    v = rng.integers(-(2**62), 2**62, 5)
    w = rng.integers(-(2**62), 2**62, 5)
    M = rng.integers(-(2**62), 2**62, (5, 3))
    N = rng.integers(-(2**62), 2**62, (4, 5))
    # vector @ matrix -> (3,), matrix @ vector -> (4,)
    r1 = modlin.matmul(v, M, p)
    assert r1.shape == (3,)
    assert_exact(r1, v, M, p)
    r2 = modlin.matmul(N, v, p)
    assert r2.shape == (4,)
    assert_exact(r2, N, v, p)
    # vector @ vector -> a NumPy int64 scalar, as numpy.matmul returns
    s = modlin.matmul(v, w, p)
    assert np.ndim(s) == 0 and isinstance(s, np.int64)
    assert int(s) == sum(int(x) * int(y) for x, y in zip(v, w)) % p
    # Python lists work as well
    assert_exact(modlin.matmul(v.tolist(), M.tolist(), p), v, M, p)


@pytest.mark.parametrize("sa, sb", [
    ((2, 1, 3, 4), (5, 4, 2)), ((5, 4, 2), (2, 1)), ((4,), (5, 4, 2)), ((5, 3, 4), (4,)),
    ((1, 3, 4), (6, 4, 2)), ((3, 1, 2, 3), (1, 4, 3, 2)), ((2, 3, 4), (2, 4, 5)), ((3, 4), (2, 2, 4, 1)),
])
def test_stacked_and_broadcast(sa, sb, rng):
    for p in [7, 2**31 - 1, 2**52 - 1]:
        A = rng.integers(-(2**62), 2**62, sa)
        B = rng.integers(-(2**62), 2**62, sb)
        C = modlin.matmul(A, B, p)
        assert C.shape == np.matmul(A.astype(float), B.astype(float)).shape
        assert_exact(C, A, B, p)
        for pl in plans_for(p):  # every variant on stacks, with several k-blocks
            assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)


def test_broadcast_batch_is_per_slice(rng):
    """A batch of one broadcast against many equals the products one by one."""
    p = 2**40 - 87
    A = rng.integers(0, p, (1, 3, 4))
    B = rng.integers(0, p, (6, 4, 2))
    C = modlin.matmul(A, B, p)
    for i in range(6):
        assert np.array_equal(C[i], modlin.matmul(A[0], B[i], p))


# ----------------------------------------------------------------- layouts

@pytest.mark.parametrize("p", [7, 65521, 2**31 - 1, 2**52 - 47])
def test_non_contiguous_and_fortran_inputs(p, rng):
    big = rng.integers(-(2**63), 2**63 - 1, (12, 15), endpoint=True)
    views = {
        "steps": (big[::2, ::3], big[1:11:2, 2::5]),  # (6, 5) @ (5, 3)
        "transposes": (big[:6, :5].T, big[:3, :6].T),  # (5, 6) @ (6, 3)
        "negative strides": (big[::-2, ::-3], big[::-1, ::-5][:5]),  # (6, 5) @ (5, 3)
        "fortran": (np.asfortranarray(big[:4, :6]), np.asfortranarray(big[:6, :3])),
        "fortran int32/uint32": (np.asfortranarray(big[:4, :6].astype(np.int32)),
                                 np.asfortranarray(big[:6, :3].astype(np.uint32))),
    }
    for name, (A, B) in views.items():
        assert not (A.flags.c_contiguous and B.flags.c_contiguous), name
        before = big.copy()
        C = modlin.matmul(A, B, p)
        assert_exact(C, A, B, p)
        assert np.array_equal(big, before), name
        for pl in plans_for(p):
            assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)


def test_stacked_non_contiguous(rng):
    p = 2**52 - 47
    base = rng.integers(0, p, (4, 6, 8))
    A = base[::2, :, ::2]  # (2, 6, 4)
    B = base[1::2, ::-1, :5].transpose(0, 2, 1)[:, :4]  # (2, 4, 6)
    assert_exact(modlin.matmul(A, B, p), A, B, p)


# ----------------------------------------------------------------- out=

@pytest.mark.parametrize("p", [7, 2**31 - 1, 2**52 - 47])
def test_out_receives_the_result(p, rng):
    A = rng.integers(0, p, (4, 5))
    B = rng.integers(0, p, (5, 3))
    out = np.full((4, 3), -1, dtype=np.int64)
    C = modlin.matmul(A, B, p, out=out)
    assert_exact(out, A, B, p)
    assert np.shares_memory(C, out) and np.array_equal(C, out)
    for pl in plans_for(p):
        out[...] = -1
        modlin.matmul(A, B, p, out=out, plan=pl)
        assert_exact(out, A, B, p)


def test_out_is_the_returned_object():
    A = np.arange(6).reshape(2, 3)
    B = np.arange(12).reshape(3, 4)
    o = np.zeros((2, 4), dtype=np.int64)
    assert np.matmul(A, B, out=o) is o  # what numpy.matmul does
    out = np.zeros((2, 4), dtype=np.int64)
    assert modlin.matmul(A, B, 7, out=out) is out


def test_out_zero_dimensional_is_returned():
    v = np.array([1, 2, 3])
    out = np.zeros((), dtype=np.int64)
    r = modlin.matmul(v, v, 5, out=out)
    assert int(out) == 14 % 5  # written ...
    assert r is out  # ... and returned


def test_out_zero_dimensional_receives_the_value():
    v = np.array([1, 2, 3])
    w = np.array([4, 5, 6])
    out = np.zeros((), dtype=np.int64)
    r = modlin.matmul(v, w, 5, out=out)
    assert int(out) == 32 % 5 == int(r)


def test_out_non_contiguous(rng):
    p = 2**40 - 87
    A = rng.integers(0, p, (4, 5))
    B = rng.integers(0, p, (5, 3))
    # a strided window in a larger array: only the window is written
    big = np.full((8, 7), -7, dtype=np.int64)
    window = big[::2, 1:7:2]
    r = modlin.matmul(A, B, p, out=window)
    assert r is window
    assert_exact(window, A, B, p)
    mask = np.ones(big.shape, bool)
    mask[::2, 1:7:2] = False
    assert np.all(big[mask] == -7)
    # a transposed (Fortran-ordered) out
    fo = np.zeros((3, 4), dtype=np.int64).T
    assert not fo.flags.c_contiguous
    r = modlin.matmul(A, B, p, out=fo)
    assert r is fo
    assert_exact(fo, A, B, p)


def test_out_for_stacks_and_vectors(rng):
    p = 2**31 - 1
    A = rng.integers(0, p, (2, 1, 3, 4))
    B = rng.integers(0, p, (5, 4, 2))
    out = np.empty((2, 5, 3, 2), dtype=np.int64)
    modlin.matmul(A, B, p, out=out)
    assert_exact(out, A, B, p)
    v = rng.integers(0, p, 4)
    out1 = np.empty((5, 2), dtype=np.int64)
    modlin.matmul(v, B, p, out=out1)
    assert_exact(out1, v, B, p)


@pytest.mark.parametrize("bad", [np.int32, np.float64, np.uint64, object])
def test_out_wrong_dtype(bad):
    A = np.ones((2, 3), dtype=np.int64)
    with pytest.raises(TypeError, match="int64"):
        modlin.matmul(A, A.T, 7, out=np.zeros((2, 2), dtype=bad))


def test_out_wrong_kind_and_shape():
    A = np.ones((2, 3), dtype=np.int64)
    with pytest.raises(TypeError, match="out must be"):
        modlin.matmul(A, A.T, 7, out=[[0, 0], [0, 0]])
    with pytest.raises(ValueError, match=r"out has shape \(2, 3\).*result has shape \(2, 2\)"):
        modlin.matmul(A, A.T, 7, out=np.zeros((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        modlin.matmul(A, A.T, 7, out=np.zeros((1, 2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):  # vector @ vector has shape ()
        modlin.matmul(A[0], A[0], 7, out=np.zeros((1,), dtype=np.int64))
    ro = np.zeros((2, 2), dtype=np.int64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        modlin.matmul(A, A.T, 7, out=ro)
    assert np.all(ro == 0)


# ----------------------------------------------------------------- inputs not modified

@pytest.mark.parametrize("p", [2, 2**31 - 1, 2**52 - 1])
def test_inputs_never_modified(p, rng):
    operands = [
        (rng.integers(-(2**63), 2**63 - 1, (3, 4), endpoint=True), rng.integers(0, 2**62, (4, 2))),
        (int_operand(np.uint64, (3, 4), rng), int_operand(np.int8, (4, 2), rng)),
        (rng.integers(-(2**50), 2**50, (3, 4)).astype(float), rng.integers(0, 9, (4, 2)).astype(np.float32)),
        (np.array([[10**30, -5, 3, p + 1]] * 3, dtype=object), rng.integers(-3, 3, (4, 2))),
    ]
    for A, B in operands:
        A0, B0 = A.copy(), B.copy()
        flags = (A.flags.writeable, B.flags.writeable)
        for pl in [None, *plans_for(p)]:
            modlin.matmul(A, B, p, plan=pl)
            assert np.array_equal(A, A0) and np.array_equal(B, B0)
            assert A.dtype == A0.dtype and B.dtype == B0.dtype
        assert (A.flags.writeable, B.flags.writeable) == flags


def test_read_only_inputs_are_fine(rng):
    p = 2**31 - 1
    A = rng.integers(0, p, (3, 4))
    B = rng.integers(0, p, (4, 2))
    A.flags.writeable = False
    B.flags.writeable = False
    assert_exact(modlin.matmul(A, B, p), A, B, p)


# ----------------------------------------------------------------- errors

A23 = np.arange(6).reshape(2, 3)
B34 = np.arange(12).reshape(3, 4)


@pytest.mark.parametrize("p", [1, 0, -1, -(2**60)])
def test_modulus_too_small(p):
    with pytest.raises(ValueError, match="at least 2"):
        modlin.matmul(A23, B34, p)


@pytest.mark.parametrize("p", [2**52, 2**52 + 1, 2**63, 2**64 + 5, 10**30])
def test_moduli_beyond_multiword_go_through_rns(p):
    # no upper limit on p: beyond 2**52 the planner takes a residue number system
    assert isinstance(modlin.plan(p, 2, 3, 4), modlin.RNSPlan)
    got = modlin.matmul(A23, B34, p)
    assert got.dtype == (np.int64 if p <= 2**63 else object)
    assert (got.astype(object) == (A23.astype(object) @ B34.astype(object)) % p).all()


@pytest.mark.parametrize("p", [7.0, 7.5, "7", True, Fraction(7), Decimal(7), 7 + 0j, [7]])
def test_modulus_not_an_integer(p):
    with pytest.raises(TypeError, match="modulus must be an integer"):
        modlin.matmul(A23, B34, p)


def test_modulus_missing():
    with pytest.raises(TypeError, match="modulus p is required"):
        modlin.matmul(A23, B34)


@pytest.mark.parametrize("p", [np.int64(7), np.uint64(7), np.int8(7), 7])
def test_numpy_integer_modulus(p):
    assert np.array_equal(modlin.matmul(A23, B34, p), (A23 @ B34) % 7)


def test_shape_mismatch():
    with pytest.raises(ValueError, match=r"not aligned.*3 columns.*2 rows"):
        modlin.matmul(A23, A23, 7)
    with pytest.raises(ValueError, match="not aligned"):
        modlin.matmul(np.ones(3), np.ones(4), 7)
    with pytest.raises(ValueError, match="not aligned"):
        modlin.matmul(np.ones((2, 3)), np.ones(4), 7)
    with pytest.raises(ValueError, match="do not broadcast"):
        modlin.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 4)), 7)


@pytest.mark.parametrize("scalar", [3, np.int64(3), np.array(5), 2.0, np.array(2**64 - 1, dtype=np.uint64)])
def test_scalar_operands(scalar):
    with pytest.raises(ValueError, match="at least one dimension"):
        modlin.matmul(scalar, B34, 7)
    with pytest.raises(ValueError, match="at least one dimension"):
        modlin.matmul(B34, scalar, 7)


def test_scalar_object_operand():
    with pytest.raises(ValueError, match="at least one dimension"):
        modlin.matmul(10**40, B34, 7)


def test_complex_operands():
    with pytest.raises(TypeError, match="A is complex"):
        modlin.matmul(A23 + 0j, B34, 7)
    with pytest.raises(TypeError, match="B is complex"):
        modlin.matmul(A23, B34.astype(np.complex64), 7)


@pytest.mark.parametrize("dtype", ["U5", "S5", "datetime64[s]", "timedelta64[s]", "V8"])
def test_non_numeric_dtypes(dtype):
    with pytest.raises(TypeError, match="not numeric"):
        modlin.matmul(A23.astype(dtype), B34, 7)
    with pytest.raises(TypeError, match="B has dtype"):
        modlin.matmul(A23, B34.astype(dtype), 7)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nan_and_inf(bad, dtype):
    A = A23.astype(dtype)
    A[1, 2] = bad
    with pytest.raises(ValueError, match="A holds NaN or Inf"):
        modlin.matmul(A, B34, 7)
    with pytest.raises(ValueError, match="B holds NaN or Inf"):
        modlin.matmul(B34.T, A.T, 7)


@pytest.mark.parametrize("bad", [0.5, -2.25, 1e-300, 2.0**51 + 0.5, -(2.0**40) - 0.25])
def test_non_integral_floats(bad):
    A = A23.astype(np.float64)
    A[0, 0] = bad
    with pytest.raises(ValueError, match="A holds non-integral floats"):
        modlin.matmul(A, B34, 7)
    with pytest.raises(ValueError, match="B holds non-integral"):
        modlin.matmul(B34.T, A.T, 7)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.longdouble])
def test_non_integral_floats_other_widths(dtype):
    A = A23.astype(dtype)
    A[1, 0] = -1.5
    with pytest.raises(ValueError, match="non-integral"):
        modlin.matmul(A, B34, 7)


@pytest.mark.parametrize("bad", [2.5, 3.0, "a", None, Fraction(1, 2), Decimal(3), 1j, [1]])
def test_object_arrays_with_non_integers(bad):
    A = np.array([[1, 10**40, 3], [4, 5, 6]], dtype=object)
    A[1, 1] = bad
    with pytest.raises(TypeError, match="object arrays must hold Python or NumPy integers"):
        modlin.matmul(A, B34, 7)


def test_empty_object_array():
    A = np.empty((2, 0), dtype=object)
    B = np.empty((0, 3), dtype=object)
    C = modlin.matmul(A, B, 7)
    assert C.shape == (2, 3) and C.dtype == np.int64 and not C.any()


def test_plan_argument_type():
    with pytest.raises(TypeError, match="plan must be a modlin.Plan"):
        modlin.matmul(A23, B34, 7, plan="fp64")
    with pytest.raises(TypeError, match="plan must be a modlin.Plan"):
        modlin.matmul(A23, B34, 7, plan=dataclasses.asdict(modlin.plan(7, 2, 3, 4)))


# ------------------------------------------- one conversion for every function: regressions

WIDE_PRIMES = [2**53 - 111, 2**61 - 1, 2**62 - 57, 2**63 - 25]


@pytest.mark.parametrize("p", [7, 2**52 - 47] + WIDE_PRIMES + [2**64 - 59, 2**127 - 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.longdouble])
def test_float_residues_are_exact_at_every_modulus(p, dtype):
    """Floats >= 2**53 (and ones whose magnitude passes 2**63) reduce exactly, though
    float(p) rounds above 2**53: ``residues_int64`` and ``balanced_lift`` agree with ints."""
    from modlin._arith.integers import balanced_lift, float_integers, residues_int64

    x = np.array([[2.0**62, -(2.0**62), 2.0**100, -(2.0**70), 2.0**53 + 2, 3.0], [-1.0, 0.0, -0.0, 1.0, 5.0, 2.0**63]],
                 dtype=dtype)
    ints = [int(v) for v in x.ravel().tolist()]
    assert float_integers(x, "A").ravel().tolist() == ints
    assert [int(v) % p for v in balanced_lift(x, p, "A").ravel()] == [v % p for v in ints]
    if p < 2**63:
        assert [int(v) % p for v in residues_int64(x, p, "A").ravel()] == [v % p for v in ints]


@pytest.mark.parametrize("p", WIDE_PRIMES)
def test_linalg_float_inputs_above_2_53(p):
    """The reproducer: 2**62 mod 2**61 - 1 is 2, not 0."""
    A = np.array([[2.0**62]])
    want = 2**62 % p
    assert modlin.linalg.rank(A, p) == 1
    assert int(modlin.linalg.det(A, p)) == want
    assert int(modlin.linalg.inv(A, p)[0, 0]) * want % p == 1
    assert int(modlin.linalg.solve(A, np.array([[2.0**62]]), p)[0, 0]) == 1
    assert int(modlin.linalg.trsm(A.astype(np.float32), np.array([[float(want)]]), p)[0, 0]) == 1


@pytest.mark.parametrize("p", [7, 2**61 - 1, 2**64 - 59, 2**127 - 1])
@pytest.mark.parametrize("fn", ["rank", "det", "inv", "pluq", "rref", "nullspace"])
def test_linalg_shape_checked_before_conversion(fn, p):
    with pytest.raises(ValueError, match="2-D matrix"):
        getattr(modlin.linalg, fn)(np.int64(5), p)
    with pytest.raises(ValueError, match="2-D matrix"):
        getattr(modlin.linalg, fn)(np.array(2**100, dtype=object), p)


def test_balanced_lift_of_a_scalar_above_2_64():
    from modlin._arith.integers import balanced_lift

    p = 2**127 - 1
    assert balanced_lift(np.int64(5), p, "A").tolist() == 5
    assert balanced_lift(np.array(p - 1, dtype=object), p, "A").tolist() == -1


def test_gaussian_intmul_empty_float_operands():
    for A, B in ((np.ones((2, 0), complex), np.ones((0, 3), complex)), (np.ones((2, 0)), np.ones((0, 3)))):
        re, im = modlin.gaussian.intmul(A, B)
        assert re.shape == im.shape == (2, 3) and not re.any() and not im.any()
