"""``modlin.gaussian``: Gaussian-integer products mod m (2M / 3M / 4M), HERK-family
corollaries, ``sqrt_minus_one`` / ``twom_moduli`` and the exact ``intmul`` over Z[i].

Every result is compared EXACTLY with a Python complex-integer oracle: object
arrays of the parts multiplied as ``R = ArBr - AiBi``, ``I = ArBi + AiBr`` and
reduced modulo ``m`` once at the end. Square roots of -1 are checked against brute
force and an independent trial-division test of the 2M condition.

Runtime note: ``sqrt_minus_one`` builds a ``galois.GF(q)`` for each prime factor,
which costs ~0.5-1 s per new prime below 2**31 (JIT compilation); the tests share
moduli wherever they can so the file stays within its time budget.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import modlin
import modlin._algorithms.gaussian
from conftest import as_python_ints
from modlin import gaussian as g
from modlin._arith.moduli import int8_moduli

DESIGN = (241, 233, 229, 221, 205, 197, 193, 181, 173, 157, 149, 137, 113, 109, 101,
          97, 89, 73, 61, 53, 37, 29)
ALGS = ("auto", "2m", "3m", "4m")


# ===================================================================== independent oracles

def prime_factors(n: int) -> set[int]:
    """Prime factors by trial division (independent of galois)."""
    out, d = set(), 2
    while d * d <= n:
        while n % d == 0:
            out.add(d)
            n //= d
        d += 1
    if n > 1:
        out.add(n)
    return out


def twom_ok(m: int) -> bool:
    """2M condition: m odd, > 2, every prime factor 1 (mod 4)."""
    return m > 2 and m % 2 == 1 and all(q % 4 == 1 for q in prime_factors(m))


def _least_root(m):
    """The least s in [0, m) with s*s = -1 (mod m), by brute force."""
    return next(x for x in range(m) if (x * x + 1) % m == 0)


TWOM_UP_TO_255 = [m for m in range(2, 256) if twom_ok(m)]


def _largest_twom_primes(top: int, count: int) -> list[int]:
    import galois

    out, q = [], top
    while len(out) < count:
        q = int(galois.prev_prime(q - 1))
        if q % 4 == 1:
            out.append(q)
    return out


P50 = _largest_twom_primes(2**50, 3)          # three 2M primes just below 2**50
P52 = _largest_twom_primes(2**52, 1)[0]       # the largest 2M prime below 2**52
P40 = _largest_twom_primes(2**40, 1)[0]
LARGE_TWOM = [*P50, P52, 5**22, 221 * P40]    # primes, a prime power and a composite, all < 2**52


def gparts(X):
    """``X`` (complex array, (re, im) tuple, or real array) as object arrays of Python ints."""
    if isinstance(X, tuple):
        return as_python_ints(X[0]), as_python_ints(X[1])
    x = np.asarray(X)
    if x.dtype.kind == "c":
        return as_python_ints(x.real), as_python_ints(x.imag)
    re = as_python_ints(x)
    return re, np.zeros(re.shape, dtype=object)


def _omm(a, b):
    """Object-array matmul with numpy.matmul shape rules (0-d object array for 1-D @ 1-D)."""
    if a.ndim == 1 and b.ndim == 1:
        return np.asarray(sum((int(x) * int(y) for x, y in zip(a, b, strict=True)), 0), dtype=object)
    r = np.matmul(a, b) if a.size and b.size else np.zeros(np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape,
                                                           dtype=object)
    return np.asarray(r, dtype=object)


def _mod(x, m):
    x = np.asarray(x, dtype=object)
    if m is None:
        return x
    if x.size == 0:
        return np.zeros(x.shape, dtype=object)
    return np.asarray(np.frompyfunc(lambda v: int(v) % m, 1, 1)(x), dtype=object).reshape(x.shape)


def gauss_ref(A, B, m=None):
    """Exact ``A @ B`` over Z[i] (reduced mod m when given): object arrays (R, I)."""
    ar, ai = gparts(A)
    br, bi = gparts(B)
    R = _omm(ar, br) - _omm(ai, bi)
    Im = _omm(ar, bi) + _omm(ai, br)
    return _mod(np.asarray(R, dtype=object), m), _mod(np.asarray(Im, dtype=object), m)


def T(x):
    return np.swapaxes(x, -1, -2)


def conjT(X):
    re, im = gparts(X)
    return T(re), T(-im)


def transp(X):
    re, im = gparts(X)
    return T(re), T(im)


def oadd(P, Q, m):
    return _mod(P[0] + Q[0], m), _mod(P[1] + Q[1], m)


def assert_part(C, R, m=None):
    C = np.asarray(C)
    assert C.dtype == np.int64, C.dtype
    assert C.shape == R.shape, (C.shape, R.shape)
    if m is not None and C.size:
        assert C.min() >= 0 and C.max() < m, "result not reduced into [0, m)"
    # as a bool array: np.argwhere of a 0-d True (a 1-D @ 1-D mismatch) has size 0
    mism = np.argwhere(np.asarray(C.astype(object) != R, dtype=bool).reshape(C.shape or (1,)))
    assert mism.size == 0, (
        f"{len(mism)} mismatching entries (m = {m}); first at {tuple(mism[0])}: "
        f"got {C.reshape(C.shape or (1,))[tuple(mism[0])]}, expected {R.reshape(R.shape or (1,))[tuple(mism[0])]}"
    )


def assert_gauss(res, ref, m):
    assert isinstance(res, tuple) and len(res) == 2, type(res)
    assert_part(res[0], ref[0], m)
    assert_part(res[1], ref[1], m)


def assert_hermitian(res, m):
    re, im = (np.asarray(x) for x in res)
    assert np.array_equal(re, T(re))
    assert np.array_equal(im.astype(object), T((m - im.astype(object)) % m))  # Python ints: any m
    assert np.all(np.diagonal(im, axis1=-2, axis2=-1) == 0)


def assert_symmetric(res):
    for x in (res if isinstance(res, tuple) else (res,)):
        x = np.asarray(x)
        assert np.array_equal(x, T(x))


def rand_gauss(rng, shape, lo=-(2**62), hi=2**62):
    """A (re, im) pair of int64 arrays with entries in [lo, hi)."""
    return rng.integers(lo, hi, shape, dtype=np.int64), rng.integers(lo, hi, shape, dtype=np.int64)


def rand_big(seed, shape, bits):
    """Object arrays of signed ints below 2**bits in magnitude, with the extremes +-(2**bits - 1) present."""
    r = random.Random(seed)
    n = math.prod(shape)
    vals = [r.randint(-(2**bits) + 1, 2**bits - 1) for _ in range(n)]
    vals[0], vals[-1] = 2**bits - 1, -(2**bits) + 1
    out = np.empty(n, dtype=object)
    out[:] = vals
    return out.reshape(shape)


def full_pair(shape, v):
    return np.full(shape, v, dtype=np.int64), np.full(shape, v, dtype=np.int64)


def test_oracle_self_check(rng):
    # the object-array oracle agrees with numpy's complex128 product where that is exact
    A = rng.integers(-100, 100, (2, 3, 4)) + 1j * rng.integers(-100, 100, (2, 3, 4))
    B = rng.integers(-100, 100, (4, 5)) + 1j * rng.integers(-100, 100, (4, 5))
    R, Im = gauss_ref(A, B)
    C = A @ B
    assert np.array_equal(R.astype(np.float64), C.real) and np.array_equal(Im.astype(np.float64), C.imag)
    R13, I13 = gauss_ref(A, B, 13)
    assert np.array_equal(R13.astype(np.int64), np.mod(C.real, 13)) and np.array_equal(I13.astype(np.int64),
                                                                                       np.mod(C.imag, 13))
    r, i = gauss_ref(A[0, 0], B[:, 0])  # 1-D @ 1-D
    assert complex(int(r), int(i)) == A[0, 0] @ B[:, 0]


def test_exported():
    assert modlin.gaussian is g
    for name in g.__all__:
        assert callable(getattr(g, name))


# ===================================================================== twom_moduli / is_twom_modulus

def test_twom_moduli_is_the_design_list():
    tm = g.twom_moduli()
    assert tm == DESIGN
    assert len(tm) == 22
    assert all(twom_ok(q) and g.is_twom_modulus(q) and q <= 255 for q in tm)
    for i, a in enumerate(tm):
        for b in tm[i + 1:]:
            assert math.gcd(a, b) == 1, (a, b)
    assert list(tm) == sorted(tm, reverse=True)


def _greedy(limit):
    chosen = []
    for q in range(limit, 2, -1):
        if twom_ok(q) and all(math.gcd(q, c) == 1 for c in chosen):
            chosen.append(q)
    return tuple(chosen)


@pytest.mark.parametrize("limit", [4, 5, 30, 100, 255, 600])
def test_twom_moduli_limits_match_greedy(limit):
    tm = g.twom_moduli(limit)
    assert tm == _greedy(limit)
    assert all(q <= limit and twom_ok(q) for q in tm)
    assert all(math.gcd(a, b) == 1 for i, a in enumerate(tm) for b in tm[i + 1:])


@pytest.mark.parametrize("count", [0, 1, 5, 22, 30])
def test_twom_moduli_count(count):
    assert g.twom_moduli(count=count) == DESIGN[:count]


def test_is_twom_modulus_matches_trial_division():
    for m in range(2, 700):
        assert g.is_twom_modulus(m) == twom_ok(m), m
    for m in (221, 205, 65, 125, 25, 5, 13, 17, 625, 2197, *LARGE_TWOM):
        assert g.is_twom_modulus(m), m
    for m in (2, 3, 4, 6, 7, 9, 15, 21, 231, 255, 256, 3 * P52, 2**52 - 1, 2**31 - 1):
        assert not g.is_twom_modulus(m), m


def test_is_twom_modulus_rejects_bad_moduli():
    assert g.is_twom_modulus(1) is False  # nothing to multiply modulo 1: not a 2M modulus
    for m in (0, -5):
        with pytest.raises(ValueError):
            g.is_twom_modulus(m)
    with pytest.raises(TypeError):
        g.is_twom_modulus(13.0)


# ===================================================================== sqrt_minus_one

@pytest.mark.parametrize("m", TWOM_UP_TO_255 + [5**4, 13**3, 1105, 5 * 13 * 17 * 29])
def test_sqrt_minus_one_is_a_root_and_the_smaller_of_the_pair(m):
    s = g.sqrt_minus_one(m)
    assert isinstance(s, int)
    assert 0 < s < m and (s * s + 1) % m == 0
    assert s < m - s


@pytest.mark.parametrize("m", [m for m in TWOM_UP_TO_255 if len(prime_factors(m)) == 1] + [5**4, 13**3])
def test_sqrt_minus_one_least_for_primes_and_prime_powers(m):
    # modulo an odd prime power there are exactly two roots: s and m - s
    assert g.sqrt_minus_one(m) == _least_root(m)


@pytest.mark.parametrize("m", [P50[0], P52, 5**22, 221 * P40])
def test_sqrt_minus_one_large(m):
    s = g.sqrt_minus_one(m)
    assert 0 < s < m and (s * s + 1) % m == 0 and s < m - s


COMPOSITE_TWOM = [m for m in range(5, 1200) if twom_ok(m) and len(prime_factors(m)) > 1]


def test_sqrt_minus_one_composites_are_roots():
    for m in COMPOSITE_TWOM:
        s = g.sqrt_minus_one(m)
        assert 0 < s < m and (s * s + 1) % m == 0 and s < m - s, m


def test_sqrt_minus_one_least_for_composites():
    wrong = [(m, g.sqrt_minus_one(m), _least_root(m)) for m in COMPOSITE_TWOM
             if g.sqrt_minus_one(m) != _least_root(m)]
    assert not wrong, f"{len(wrong)} of {len(COMPOSITE_TWOM)} composites, (m, got, least): {wrong[:6]}"


@pytest.mark.parametrize("m, factor", [
    (231, "prime factor 3"), (7, "prime factor 7"), (9, "prime factor 3"), (15, "prime factor 3"),
    (35, "prime factor 7"), (5 * 11, "prime factor 11"), (13 * 19, "prime factor 19"),
    (2**31 - 1, f"prime factor {2**31 - 1}"), (3 * P52, "prime factor 3"),
])
def test_sqrt_minus_one_names_the_factor(m, factor):
    with pytest.raises(ValueError, match=factor) as ei:
        g.sqrt_minus_one(m)
    assert "'3m'" in str(ei.value)
    assert "3 (mod 4)" in str(ei.value)


@pytest.mark.parametrize("m", [6, 10, 26, 2 * 221, 2**50])
def test_sqrt_minus_one_even(m):
    with pytest.raises(ValueError, match="even") as ei:
        g.sqrt_minus_one(m)
    assert "'3m'" in str(ei.value)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_sqrt_minus_one_tiny(m):
    with pytest.raises(ValueError, match="'3m'"):
        g.sqrt_minus_one(m)


@pytest.mark.parametrize("m", [1, 0, -5])
def test_sqrt_minus_one_bad_modulus(m):
    with pytest.raises(ValueError):
        g.sqrt_minus_one(m)


# ===================================================================== matmul: every 2M modulus <= 255

@pytest.mark.parametrize("m", TWOM_UP_TO_255)
def test_matmul_every_small_twom_modulus(m, rng):
    assert g.is_twom_modulus(m)
    # unreduced, signed int64 parts (negative and >= m), as pairs and as a complex array
    A = rand_gauss(rng, (3, 5))
    B = rand_gauss(rng, (5, 4))
    ref = gauss_ref(A, B, m)
    for alg in ALGS:
        assert_gauss(g.matmul(A, B, m, algorithm=alg), ref, m)
    Ac = (rng.integers(-300, 300, (3, 5)) + 1j * rng.integers(-300, 300, (3, 5)))
    Bc = (rng.integers(-300, 300, (5, 4)) + 1j * rng.integers(-300, 300, (5, 4)))
    ref = gauss_ref(Ac, Bc, m)
    for alg in ALGS:
        assert_gauss(g.matmul(Ac, Bc, m, algorithm=alg), ref, m)
    # worst case: every part m - 1 (and every part m - 1 against 0 / 1 mixes)
    W = full_pair((4, 37), m - 1)
    V = full_pair((37, 3), m - 1)
    ref = gauss_ref(W, V, m)
    for alg in ALGS:
        assert_gauss(g.matmul(W, V, m, algorithm=alg), ref, m)
    assert all(g.matmul(W, V, m, algorithm=alg)[0].max() == 0 for alg in ALGS)  # (m-1)^2 - (m-1)^2


@pytest.mark.parametrize("m", LARGE_TWOM, ids=["p50a", "p50b", "p50c", "p52", "5^22", "221*p40"])
def test_matmul_large_twom_moduli(m, rng):
    A = rand_gauss(rng, (4, 9), -(2**63), 2**63 - 1)
    B = rand_gauss(rng, (9, 5), -(2**63), 2**63 - 1)
    ref = gauss_ref(A, B, m)
    results = [g.matmul(A, B, m, algorithm=alg) for alg in ALGS]
    for res in results:
        assert_gauss(res, ref, m)
    # worst cases: all parts m - 1; A_r = m - 1 with A_i = 1 (X = A+ B+ near m everywhere)
    W = full_pair((3, 40), m - 1)
    V = full_pair((40, 2), m - 1)
    ref = gauss_ref(W, V, m)
    for alg in ALGS:
        assert_gauss(g.matmul(W, V, m, algorithm=alg), ref, m)
    W2 = (np.full((2, 40), m - 1, dtype=np.int64), np.ones((2, 40), dtype=np.int64))
    V2 = (np.full((40, 2), m - 1, dtype=np.int64), np.full((40, 2), m - 2, dtype=np.int64))
    ref = gauss_ref(W2, V2, m)
    for alg in ALGS:
        assert_gauss(g.matmul(W2, V2, m, algorithm=alg), ref, m)


def test_matmul_big_object_parts():
    r = random.Random(7)
    A = (np.array([[r.randint(-(2**100), 2**100) for _ in range(3)] for _ in range(2)], dtype=object),
         np.array([[r.randint(-(2**100), 2**100) for _ in range(3)] for _ in range(2)], dtype=object))
    B = (np.array([[2**64 - 1, 0], [1, 2**70], [-(2**90), 5]], dtype=object),
         np.array([[3, -(2**80)], [2**63, 1], [0, -1]], dtype=object))
    for m in (221, P52, 231, 2**52 - 1):
        ref = gauss_ref(A, B, m)
        for alg in ALGS if g.is_twom_modulus(m) else ("auto", "3m", "4m"):
            assert_gauss(g.matmul(A, B, m, algorithm=alg), ref, m)


def test_matmul_other_integer_dtypes():
    A = (np.array([[2**64 - 1, 7]], dtype=np.uint64), np.array([[True, False]]))
    B = (np.array([[-128], [127]], dtype=np.int8), np.array([[65535], [3]], dtype=np.uint16))
    for m in (13, 221, P50[0], 15):
        ref = gauss_ref(A, B, m)
        for alg in ALGS if g.is_twom_modulus(m) else ("auto", "3m", "4m"):
            assert_gauss(g.matmul(A, B, m, algorithm=alg), ref, m)


def test_matmul_complex_with_large_integral_floats():
    A = np.array([[2.0**60 - 768 - 1j * 2.0**55, 1e18 + 3j]])
    B = np.array([[1 - 2j], [-(2.0**62) + 1j * 2.0**61]])
    for m in (221, P50[1], 15, 2**52 - 1):
        ref = gauss_ref(A, B, m)
        for alg in ALGS if g.is_twom_modulus(m) else ("auto", "3m", "4m"):
            assert_gauss(g.matmul(A, B, m, algorithm=alg), ref, m)


def test_matmul_docstring_example():
    A = np.array([[1 + 2j, 3j], [4, 5 - 1j]])
    re, im = g.matmul(A, A, 13)
    assert np.array_equal(re, [[10, 10], [11, 11]]) and np.array_equal(im, [[3, 5], [4, 2]])


def test_matmul_numpy_integer_modulus(rng):
    A, B = rand_gauss(rng, (2, 3)), rand_gauss(rng, (3, 2))
    ref = gauss_ref(A, B, 221)
    for alg in ALGS:
        assert_gauss(g.matmul(A, B, np.int64(221), algorithm=alg), ref, 221)


# ===================================================================== 3M / 4M without a square root of -1

NON_TWOM = [2, 3, 4, 6, 7, 9, 11, 15, 21, 231, 255, 256, 2**31 - 1, 2**50, 3 * P50[0], 2**52 - 1]


@pytest.mark.parametrize("m", NON_TWOM)
def test_matmul_3m_4m_without_square_root(m, rng):
    A = rand_gauss(rng, (3, 6), -(2**63), 2**63 - 1)
    B = rand_gauss(rng, (6, 4), -(2**63), 2**63 - 1)
    ref = gauss_ref(A, B, m)
    for alg in ("auto", "3m", "4m"):
        assert_gauss(g.matmul(A, B, m, algorithm=alg), ref, m)
    W = full_pair((2, 33), m - 1)
    V = (np.full((33, 3), m - 1, dtype=np.int64), np.zeros((33, 3), dtype=np.int64))
    ref = gauss_ref(W, V, m)
    for alg in ("auto", "3m", "4m"):
        assert_gauss(g.matmul(W, V, m, algorithm=alg), ref, m)
    with pytest.raises(ValueError, match="'3m'"):
        g.matmul(A, B, m, algorithm="2m")


# ===================================================================== shapes

@pytest.mark.parametrize("m", [221, P50[0], 231])
@pytest.mark.parametrize("sa, sb", [
    ((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((2, 3, 4), (4, 5)), ((4, 5), (2, 5, 3)),
    ((3, 1, 2, 4), (2, 4, 3)), ((2, 0), (0, 3)), ((0, 3), (3, 2)), ((1, 1), (1, 1)),
])
def test_matmul_shapes(sa, sb, m, rng):
    A = rand_gauss(rng, sa, -1000, 1000)
    B = rand_gauss(rng, sb, -1000, 1000)
    ref = gauss_ref(A, B, m)
    for alg in ALGS if g.is_twom_modulus(m) else ("auto", "3m", "4m"):
        res = g.matmul(A, B, m, algorithm=alg)
        assert np.shape(res[0]) == np.matmul(np.zeros(sa), np.zeros(sb)).shape
        assert_gauss(res, ref, m)


def test_matmul_1d_1d_result_type_same_for_all_algorithms():
    a = np.array([1 + 2j, 3 - 1j])
    b = np.array([2 + 1j, 1j])
    types = {alg: tuple(type(x) for x in g.matmul(a, b, 13, algorithm=alg)) for alg in ALGS}
    assert types["3m"] == (np.int64, np.int64)
    assert types["2m"] == types["3m"] == types["4m"] == types["auto"], types


def test_lists_are_plain_matrices_not_pairs():
    # a list of two matrices is a stacked real array of shape (2, 2, 2), not a (real, imag) pair
    L = [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]
    E = np.eye(2, dtype=np.int64) * 3
    re, im = g.matmul(L, E, 13)
    assert re.shape == (2, 2, 2)
    assert np.array_equal(re, (np.array(L) * 3) % 13) and not im.any()
    # a 2-element list of 1-D rows is a 2 x n matrix
    re, im = g.matmul([[1, 2, 3], [4, 5, 6]], [[1], [1], [1]], 13)
    assert re.shape == (2, 1) and np.array_equal(re, [[6], [2]]) and not im.any()


# ===================================================================== HERK / SYRK / HER2K / SYR2K

HERK_MODULI = [13, 221, 125, P50[0], 221 * P40, 231, 2**50, 2]


def _algs(m):
    return ALGS if g.is_twom_modulus(m) else ("auto", "3m", "4m")


@pytest.mark.parametrize("m", HERK_MODULI)
@pytest.mark.parametrize("shape", [(4, 3), (3, 7), (2, 3, 5), (1, 1)])
def test_herk(m, shape, rng):
    A = rand_gauss(rng, shape, -(2**63) + 1, 2**63 - 1)  # -A[1] below must not wrap
    ref = gauss_ref(A, conjT(A), m)
    for alg in _algs(m):
        res = g.herk(A, m, algorithm=alg)
        assert_gauss(res, ref, m)
        assert_hermitian(res, m)
        mm = g.matmul(A, (T(A[0]), T(-A[1])), m, algorithm=alg)
        assert all(np.array_equal(x, y) for x, y in zip(res, mm))
    if not g.is_twom_modulus(m):
        with pytest.raises(ValueError, match="'3m'"):
            g.herk(A, m, algorithm="2m")


@pytest.mark.parametrize("m", HERK_MODULI)
def test_herk_worst_case_and_complex_input(m, rng):
    W = full_pair((3, 41), m - 1)
    for alg in _algs(m):
        res = g.herk(W, m, algorithm=alg)
        assert_gauss(res, gauss_ref(W, conjT(W), m), m)
        assert_hermitian(res, m)
    Ac = rng.integers(-50, 50, (3, 4)) + 1j * rng.integers(-50, 50, (3, 4))
    for alg in _algs(m):
        res = g.herk(Ac, m, algorithm=alg)
        assert_gauss(res, gauss_ref(Ac, conjT(Ac), m), m)
        assert_hermitian(res, m)


def test_herk_docstring_example():
    re, im = g.herk([[1 + 2j, 3]], 13)
    assert (int(re[0, 0]), int(im[0, 0])) == (1, 0)


@pytest.mark.parametrize("m", HERK_MODULI)
@pytest.mark.parametrize("sa, sb", [((4, 3), (4, 3)), ((3, 6), (3, 6)), ((2, 3, 5), (2, 3, 5)),
                                    ((2, 3, 5), (3, 5))])
def test_her2k(m, sa, sb, rng):
    A = rand_gauss(rng, sa, -(2**63), 2**63 - 1)
    B = rand_gauss(rng, sb, -(2**63), 2**63 - 1)
    ref = oadd(gauss_ref(A, conjT(B), None), gauss_ref(B, conjT(A), None), m)
    for alg in _algs(m):
        res = g.her2k(A, B, m, algorithm=alg)
        assert_gauss(res, ref, m)
        assert_hermitian(res, m)
    W = full_pair((3, 17), m - 1)
    V = (np.full((3, 17), m - 1, dtype=np.int64), np.ones((3, 17), dtype=np.int64))
    ref = oadd(gauss_ref(W, conjT(V), None), gauss_ref(V, conjT(W), None), m)
    for alg in _algs(m):
        assert_gauss(g.her2k(W, V, m, algorithm=alg), ref, m)


def test_her2k_docstring_example():
    re, im = g.her2k([[1j]], [[2]], 13)
    assert (int(re[0, 0]), int(im[0, 0])) == (0, 0)


@pytest.mark.parametrize("m", HERK_MODULI)
@pytest.mark.parametrize("shape", [(4, 3), (3, 6), (2, 3, 5)])
def test_syrk_complex(m, shape, rng):
    A = rand_gauss(rng, shape, -(2**63), 2**63 - 1)
    ref = gauss_ref(A, transp(A), m)
    for alg in _algs(m):
        res = g.syrk(A, m, algorithm=alg)
        assert_gauss(res, ref, m)
        assert_symmetric(res)
        mm = g.matmul(A, (T(A[0]), T(A[1])), m, algorithm=alg)
        assert all(np.array_equal(x, y) for x, y in zip(res, mm))
    W = full_pair((3, 17), m - 1)
    for alg in _algs(m):
        assert_gauss(g.syrk(W, m, algorithm=alg), gauss_ref(W, transp(W), m), m)
    Ac = rng.integers(-9, 9, (2, 3)) * 1j + 4
    for alg in _algs(m):
        assert_gauss(g.syrk(Ac, m, algorithm=alg), gauss_ref(Ac, transp(Ac), m), m)


@pytest.mark.parametrize("m", HERK_MODULI)
@pytest.mark.parametrize("shape", [(4, 3), (3, 6), (2, 3, 5)])
def test_syr2k_complex(m, shape, rng):
    A = rand_gauss(rng, shape, -(2**63), 2**63 - 1)
    B = rand_gauss(rng, shape, -(2**63), 2**63 - 1)
    ref = oadd(gauss_ref(A, transp(B), None), gauss_ref(B, transp(A), None), m)
    for alg in _algs(m):
        res = g.syr2k(A, B, m, algorithm=alg)
        assert_gauss(res, ref, m)
        assert_symmetric(res)
    W = full_pair((2, 9), m - 1)
    for alg in _algs(m):
        assert_gauss(g.syr2k(W, W, m, algorithm=alg),
                     oadd(gauss_ref(W, transp(W), None), gauss_ref(W, transp(W), None), m), m)


def real_ref(A, B, m):
    a, b = as_python_ints(A), as_python_ints(B)
    return _mod(np.asarray(_omm(a, T(b)), dtype=object), m)


@pytest.mark.parametrize("m", HERK_MODULI)
@pytest.mark.parametrize("k", [1, 2, 3, 4, 7, 8, 0])
def test_syrk_real_odd_and_even_k(m, k, rng):
    A = rng.integers(-(2**63), 2**63 - 1, (5, k), dtype=np.int64, endpoint=True)
    ref = real_ref(A, A, m)
    for alg in _algs(m):
        res = g.syrk(A, m, algorithm=alg)
        assert isinstance(res, np.ndarray), type(res)     # one array, not a pair
        assert_part(res, ref, m)
        assert_symmetric(res)
    W = np.full((3, k), m - 1, dtype=np.int64)
    for alg in _algs(m):
        assert_part(g.syrk(W, m, algorithm=alg), real_ref(W, W, m), m)


@pytest.mark.parametrize("m", HERK_MODULI)
@pytest.mark.parametrize("k", [1, 2, 3, 6, 9])
def test_syr2k_real_odd_and_even_k(m, k, rng):
    A = rng.integers(-(2**63), 2**63 - 1, (4, k), dtype=np.int64, endpoint=True)
    B = rng.integers(-(2**63), 2**63 - 1, (4, k), dtype=np.int64, endpoint=True)
    ref = _mod(real_ref(A, B, None) + real_ref(B, A, None), m)
    for alg in _algs(m):
        res = g.syr2k(A, B, m, algorithm=alg)
        assert isinstance(res, np.ndarray), type(res)
        assert_part(res, ref, m)
        assert_symmetric(res)
    W, V = np.full((3, k), m - 1, dtype=np.int64), np.full((3, k), m - 2, dtype=np.int64)
    for alg in _algs(m):
        assert_part(g.syr2k(W, V, m, algorithm=alg), _mod(real_ref(W, V, None) + real_ref(V, W, None), m), m)


@pytest.mark.parametrize("m", [221, P50[0], 231])
def test_real_syrk_syr2k_stacked_and_input_kinds(m, rng):
    A = rng.integers(-1000, 1000, (2, 3, 5))
    B = rng.integers(-1000, 1000, (2, 3, 5))
    for alg in _algs(m):
        assert_part(g.syrk(A, m, algorithm=alg), real_ref(A, A, m), m)
        assert_part(g.syr2k(A, B, m, algorithm=alg), _mod(real_ref(A, B, None) + real_ref(B, A, None), m), m)
    big = np.array([[2**80, -(2**70) + 3, 5], [-1, 2**64, 0]], dtype=object)
    kinds = [
        [[1, 2, 3], [4, 5, 6]],                                  # a list: a plain real matrix
        np.array([[1.0, -2.0, 2.0**60], [3.0, 0.0, 7.0]]),      # integral floats
        np.array([[True, False, True], [True, True, False]]),
        np.array([[2**64 - 1, 0, 1], [5, 2**63, 7]], dtype=np.uint64),
        big,
    ]
    for X in kinds:
        for alg in _algs(m):
            res = g.syrk(X, m, algorithm=alg)
            assert isinstance(res, np.ndarray)
            assert_part(res, real_ref(X, X, m), m)
            assert_part(g.syr2k(X, big, m, algorithm=alg),
                        _mod(real_ref(X, big, None) + real_ref(big, X, None), m), m)


@pytest.mark.parametrize("m", [221, P50[0], 231])
def test_real_syrk_agrees_with_pair_form(m, rng):
    A = rng.integers(-(2**40), 2**40, (4, 5))
    Z = np.zeros_like(A)
    for alg in _algs(m):
        re, im = g.syrk((A, Z), m, algorithm=alg)
        assert np.array_equal(g.syrk(A, m, algorithm=alg), re) and not im.any()
        re, im = g.syr2k((A, Z), (A[::-1], Z), m, algorithm=alg)
        assert np.array_equal(g.syr2k(A, A[::-1], m, algorithm=alg), re) and not im.any()


def test_syrk_syr2k_docstring_examples():
    assert np.array_equal(g.syrk(np.array([[1, 2, 3], [4, 5, 6]]), 13), [[1, 6], [6, 12]])
    assert np.array_equal(g.syr2k([[1, 2]], [[3, 4]], 13), [[9]])


@pytest.mark.parametrize("fn, args", [
    (g.herk, (np.ones((2, 2)) * 1j,)), (g.syrk, (np.ones((2, 2)) * 1j,)), (g.syrk, (np.ones((2, 3), int),)),
    (g.her2k, (np.ones((2, 2)) * 1j, np.ones((2, 2)))), (g.syr2k, (np.ones((2, 2)) * 1j, np.ones((2, 2)))),
    (g.syr2k, (np.ones((2, 3), int), np.ones((2, 3), int))),
], ids=["herk", "syrk", "syrk-real", "her2k", "syr2k", "syr2k-real"])
def test_herk_family_errors(fn, args):
    with pytest.raises(ValueError, match="prime factor 3"):
        fn(*args, 231, algorithm="2m")
    with pytest.raises(ValueError, match="even"):
        fn(*args, 2**20, algorithm="2m")
    with pytest.raises(ValueError, match="algorithm must be one of"):
        fn(*args, 13, algorithm="5m")
    with pytest.raises(ValueError, match="algorithm must be one of"):
        fn(*args, 2**64 + 13, algorithm="5m")


def test_herk_family_needs_matrices():
    v = np.array([1 + 1j, 2])
    for fn, args in ((g.herk, (v,)), (g.syrk, (v,)), (g.syrk, (np.array([1, 2]),)), (g.her2k, (v, v)),
                     (g.syr2k, (v, v)), (g.syr2k, (np.array([1, 2]), np.array([3, 4])))):
        for alg in ("auto", "3m"):
            with pytest.raises(ValueError):
                fn(*args, 13, algorithm=alg)


def test_her2k_syr2k_mismatched_shapes():
    for fn in (g.her2k, g.syr2k):
        with pytest.raises(ValueError):
            fn(np.ones((2, 3)) * 1j, np.ones((2, 4)) * 1j, 13)
        with pytest.raises(ValueError):
            fn(np.ones((2, 3)) * 1j, np.ones((3, 3)) * 1j, 13)
    with pytest.raises(ValueError):
        g.syr2k(np.ones((2, 3), int), np.ones((2, 4), int), 13)
    with pytest.raises(ValueError):
        g.syr2k(np.ones((2, 3), int), np.ones((3, 3), int), 13)


# ===================================================================== bad input to matmul

def test_matmul_2m_with_231_names_3():
    with pytest.raises(ValueError, match="prime factor 3") as ei:
        g.matmul([[1]], [[1]], 231, algorithm="2m")
    assert "'3m'" in str(ei.value)


@pytest.mark.parametrize("m", [2, 4, 6, 2**20, 2**51])
def test_matmul_2m_with_even_m(m):
    with pytest.raises(ValueError, match="'3m'"):
        g.matmul([[1]], [[1]], m, algorithm="2m")
    if m > 4:
        with pytest.raises(ValueError, match="even"):
            g.matmul([[1]], [[1]], m, algorithm="2m")


@pytest.mark.parametrize("bad", [
    np.array([[1.5 + 2j]]), np.array([[1 + 0.25j]]), np.array([[np.nan + 1j]]), np.array([[1 + np.inf * 1j]]),
    np.array([[complex(-np.inf, 0)]]),
])
def test_matmul_non_integral_complex(bad):
    for alg in ALGS:
        with pytest.raises(ValueError, match="finite integers"):
            g.matmul(bad, [[1]], 13, algorithm=alg)
        with pytest.raises(ValueError, match="finite integers"):
            g.matmul([[1]], bad, 13, algorithm=alg)
    with pytest.raises(ValueError):
        g.herk(bad, 13)


def test_matmul_non_integral_real_float():
    with pytest.raises(ValueError):
        g.matmul(np.array([[1.5]]), [[1]], 13)
    with pytest.raises(ValueError):
        g.matmul(([[1.5]], [[0]]), [[1]], 13)


@pytest.mark.parametrize("bad", [([[1]],), ([[1]], [[1]], [[1]]), ()])
def test_matmul_tuple_of_wrong_length(bad):
    with pytest.raises(ValueError, match="pair"):
        g.matmul(bad, [[1]], 13)
    with pytest.raises(ValueError, match="pair"):
        g.matmul([[1]], bad, 13)


def test_matmul_mismatched_part_shapes():
    with pytest.raises(ValueError, match="shapes"):
        g.matmul(([[1, 2]], [[1]]), [[1], [1]], 13)
    with pytest.raises(ValueError, match="shapes"):
        g.matmul([[1]], ([[1]], [[1, 2]]), 13)


@pytest.mark.parametrize("m", [13, 231])
def test_matmul_mismatched_matrix_shapes(m):
    for alg in ("auto", "3m", "4m"):
        with pytest.raises(ValueError, match="not aligned"):
            g.matmul(np.ones((2, 3)) * 1j, np.ones((4, 2)) * 1j, m, algorithm=alg)
        with pytest.raises(ValueError, match="broadcast"):
            g.matmul(np.ones((3, 2, 2)) * 1j, np.ones((2, 2, 2)), m, algorithm=alg)


@pytest.mark.parametrize("alg", ["5m", "2M", "", None, "karatsuba"])
def test_matmul_unknown_algorithm(alg):
    for m in (13, 2**52, 2**64 + 13):  # both paths
        with pytest.raises(ValueError, match="algorithm must be one of"):
            g.matmul([[1]], [[1]], m, algorithm=alg)


def test_matmul_modulus_too_small_or_not_an_int():
    for m in (1, 0, -13):
        with pytest.raises(ValueError):
            g.matmul([[1]], [[1]], m)
    for m in (13.0, "13"):
        with pytest.raises(TypeError):
            g.matmul([[1]], [[1]], m)


def test_matmul_complex_parts_inside_a_pair():
    with pytest.raises(TypeError, match="real arrays"):
        g.matmul(([[1]], np.array([[1j]])), [[1]], 13)
    with pytest.raises(TypeError, match="real arrays"):
        g.matmul([[1]], (np.array([[1 + 0j]]), [[1]]), 13)


def test_matmul_non_numeric():
    with pytest.raises(TypeError):
        g.matmul(np.array([["a"]]), [[1]], 13)


# ===================================================================== exact products over Z[i]

def assert_exact_gauss(res, ref, bound):
    """Exact (R, I) with the documented dtype: int64 when bound < 2**63, else Python-int objects."""
    assert isinstance(res, tuple) and len(res) == 2
    for C, R in zip(res, ref):
        C = np.asarray(C)
        want = np.dtype(np.int64) if bound < 2**63 else np.dtype(object)
        assert C.dtype == want, (C.dtype, want)
        assert C.shape == R.shape
        if C.dtype == object:
            assert all(type(v) is int for v in C.ravel())
        mism = np.argwhere(C.astype(object) != R)
        assert mism.size == 0, f"{len(mism)} mismatching entries; first at {tuple(mism[0])}"


def gbound(A, B):
    ar, ai = gparts(A)
    br, bi = gparts(B)
    mx = lambda x: max((abs(int(v)) for v in x.ravel()), default=0)  # noqa: E731
    k = ar.shape[-1]
    return k * (mx(ar) + mx(ai)) * (mx(br) + mx(bi))


@pytest.mark.parametrize("engine, bits", [("fp64", 20), ("fp64", 64), ("fp64", 200), ("int8", 20), ("int8", 62)])
def test_intmul_entry_sizes(engine, bits):
    A = (rand_big(bits, (3, 4), bits), rand_big(bits + 1, (3, 4), bits))
    B = (rand_big(bits + 2, (4, 5), bits), rand_big(bits + 3, (4, 5), bits))
    if bits <= 62:
        A = tuple(x.astype(np.int64) for x in A)
        B = tuple(x.astype(np.int64) for x in B)
    assert_exact_gauss(g.intmul(A, B, engine=engine), gauss_ref(A, B), gbound(A, B))
    # worst case: |every part| = 2**bits - 1 with signs making R = 2 k x**2 (the bound) and I = 0
    x = 2**bits - 1
    W = (np.full((2, 4), -x, dtype=object), np.full((2, 4), -x, dtype=object))
    V = (np.full((4, 3), -x, dtype=object), np.full((4, 3), x, dtype=object))
    res = g.intmul(W, V, engine=engine)
    assert_exact_gauss(res, gauss_ref(W, V), gbound(W, V))
    assert set(np.asarray(res[0], dtype=object).ravel()) == {2 * 4 * x * x}
    assert set(np.asarray(res[1], dtype=object).ravel()) == {0}


def test_intmul_int8_hybrid_uses_3m_moduli():
    # ~90-bit entries: the bound needs more than the 153 bits of the 22 2M moduli
    A = (rand_big(1, (2, 3), 90), rand_big(2, (2, 3), 90))
    B = (rand_big(3, (3, 2), 90), rand_big(4, (3, 2), 90))
    bound = gbound(A, B)
    assert 2 * bound + 2 > math.prod(DESIGN)  # so the 3M int8 moduli must take part for an exact result
    assert_exact_gauss(g.intmul(A, B, engine="int8"), gauss_ref(A, B), bound)


INT8_TOTAL = math.prod(DESIGN) * math.prod(q for q in int8_moduli() if all(math.gcd(q, t) == 1 for t in DESIGN))


@pytest.mark.parametrize("engine, k, bits", [("fp64", 200, 30), ("fp64", 3000, 40), ("int8", 1000, 62),
                                             ("int8", 300, 20)])
def test_intmul_long_inner_dimension(engine, k, bits):
    # a longer k changes the fp64 moduli (smaller primes) and makes the int8 engine block
    A = (rand_big(11, (2, k), bits), rand_big(12, (2, k), bits))
    B = (rand_big(13, (k, 3), bits), rand_big(14, (k, 3), bits))
    assert_exact_gauss(g.intmul(A, B, engine=engine), gauss_ref(A, B), gbound(A, B))
    x = 2**bits - 1
    W = (np.full((1, k), x, dtype=object), np.full((1, k), -x, dtype=object))
    V = (np.full((k, 2), x, dtype=object), np.full((k, 2), x, dtype=object))
    res = g.intmul(W, V, engine=engine)  # R = k (x^2 + x^2), I = k (x^2 - x^2)
    assert_exact_gauss(res, gauss_ref(W, V), gbound(W, V))
    assert int(res[0][0, 0]) == 2 * k * x * x and int(res[1][0, 1]) == 0


def test_intmul_int8_bound_limit():
    # k = 1 and real entries: bound = a * b. 2 * bound + 2 <= INT8_TOTAL is accepted, one more is not.
    a = 2**168 + 12345
    b = (INT8_TOTAL - 2) // 2 // a
    for sa in (1, -1):
        res = g.intmul([[sa * a]], ([[b]], [[0]]), engine="int8")
        assert int(res[0][0, 0]) == sa * a * b and int(res[1][0, 0]) == 0
    with pytest.raises(ValueError, match="int8 moduli") as ei:
        g.intmul([[a]], [[b + 1]], engine="int8")
    assert "fp64" in str(ei.value)
    assert int(g.intmul([[a]], [[b + 1]], engine="fp64")[0][0, 0]) == a * (b + 1)


def test_intmul_int8_too_large():
    A = (rand_big(5, (2, 2), 200), rand_big(6, (2, 2), 200))
    with pytest.raises(ValueError, match="int8 moduli"):
        g.intmul(A, A, engine="int8")


@pytest.mark.parametrize("engine", ["fp64", "int8"])
def test_intmul_complex_input_and_shapes(engine, rng):
    Ac = rng.integers(-1000, 1000, (3, 4)) + 1j * rng.integers(-1000, 1000, (3, 4))
    Bc = rng.integers(-1000, 1000, (4, 2)) - 1j * rng.integers(-1000, 1000, (4, 2))
    assert_exact_gauss(g.intmul(Ac, Bc, engine=engine), gauss_ref(Ac, Bc), gbound(Ac, Bc))
    # complex with large integral floats (exactly representable)
    Af = np.array([[2.0**60 - 1j * 2.0**59, 3 + 0j]])
    Bf = np.array([[-(2.0**62) + 1j], [1j * 2.0**70]])
    assert_exact_gauss(g.intmul(Af, Bf, engine="fp64"), gauss_ref(Af, Bf), gbound(Af, Bf))
    # a real matrix times a complex one, a pair times a complex array
    R = rng.integers(-(2**30), 2**30, (3, 4))
    assert_exact_gauss(g.intmul(R, Bc, engine=engine), gauss_ref(R, Bc), gbound(R, Bc))
    P = rand_gauss(rng, (3, 4), -(2**20), 2**20)
    assert_exact_gauss(g.intmul(P, Bc, engine=engine), gauss_ref(P, Bc), gbound(P, Bc))
    # 1-D and stacked shapes follow numpy.matmul
    for sa, sb in [((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((2, 3, 4), (4, 2)),
                   ((3, 1, 2, 4), (2, 4, 3)), ((2, 0), (0, 3))]:
        A = rand_gauss(rng, sa, -(2**25), 2**25)
        B = rand_gauss(rng, sb, -(2**25), 2**25)
        res = g.intmul(A, B, engine=engine)
        ref = gauss_ref(A, B)
        assert np.shape(res[0]) == ref[0].shape == np.matmul(np.zeros(sa), np.zeros(sb)).shape
        assert_exact_gauss(res, ref, gbound(A, B))


def test_intmul_docstring_example():
    re, im = g.intmul([[2**40 + 1j]], [[2**40 - 1j]])
    assert (int(re[0, 0]), int(im[0, 0])) == (2**80 + 1, 0)


def test_intmul_dtype_boundary():
    # bound = k (|a_r|+|a_i|)(|b_r|+|b_i|): just below 2**63 -> int64, at 2**63 -> object
    A = ([[2**31 - 1]], [[0]])
    B = ([[2**31]], [[2**31]])  # bound (2**31 - 1) * 2**32 < 2**63
    res = g.intmul(A, B)
    assert res[0].dtype == np.int64 and int(res[0][0, 0]) == (2**31 - 1) * 2**31
    A = ([[2**31]], [[0]])
    res = g.intmul(A, B)  # bound exactly 2**63
    assert res[0].dtype == object and res[1][0, 0] == 2**62


def test_intmul_bad_engine_and_shapes():
    with pytest.raises(ValueError, match="engine"):
        g.intmul([[1]], [[1]], engine="fp32")
    with pytest.raises(ValueError, match="not aligned"):
        g.intmul(np.ones((2, 3)) * 1j, np.ones((2, 3)) * 1j)
    with pytest.raises(ValueError, match="pair"):
        g.intmul(([[1]],), [[1]])
    with pytest.raises(TypeError):
        g.intmul(([[1]], np.array([[1j]])), [[1]])
    with pytest.raises(ValueError, match="finite integers"):
        g.intmul(np.array([[1.5j]]), [[1]])


# (a version of intmul seen while writing these tests truncated 1.5 to 1 here)
@pytest.mark.parametrize("A", [np.array([[1.5]]), ([[1.5]], [[0.0]]), ([[1.0]], [[0.5]]), np.array([[np.inf]]),
                               ([[np.nan]], [[0.0]])])
def test_intmul_non_integral_real_floats(A):
    with pytest.raises(ValueError):
        g.intmul(A, [[1]])
    with pytest.raises(ValueError):
        g.intmul([[1]], A, engine="int8")


# ===================================================================== property: 2M == 3M == 4M == oracle

@st.composite
def gauss_case(draw):
    m = draw(st.sampled_from(DESIGN))
    n, k, p = (draw(st.integers(1, 4)) for _ in range(3))
    ints = st.integers(-(2**63), 2**63 - 1)
    mk = lambda r, c: np.array(draw(st.lists(ints, min_size=r * c, max_size=r * c)),  # noqa: E731
                               dtype=np.int64).reshape(r, c)
    return m, (mk(n, k), mk(n, k)), (mk(k, p), mk(k, p))


@settings(max_examples=60)
@given(gauss_case())
def test_property_2m_3m_4m_agree_with_oracle(case):
    m, A, B = case
    ref = gauss_ref(A, B, m)
    for alg in ALGS:
        assert_gauss(g.matmul(A, B, m, algorithm=alg), ref, m)


# ===================================================================== moduli from 2**52 on (RNS path)

# (a name, m): around 2**52 (even, composite, a prime), 3 (mod 4) primes, the int64 dtype's edges 2**63
# and 2**64, primes of 65, 127 and 200 bits, and a 129-bit composite that modlin cannot factor quickly
LARGE_M = {
    "2^52": 2**52, "2^52+1": 2**52 + 1, "p52+21": 2**52 + 21, "2^61-1": 2**61 - 1, "2^63": 2**63,
    "2^64": 2**64, "2^64+13": 2**64 + 13, "2^127-1": 2**127 - 1, "p200": 2**200 - 75,
    "p65*p65": (2**64 + 13) * (2**64 + 37),
}


def test_large_moduli_are_what_they_claim():
    import galois

    for m in (2**52 + 21, 2**61 - 1, 2**64 + 13, 2**64 + 37, 2**127 - 1, 2**200 - 75):
        assert galois.is_prime(m)
    assert not galois.is_prime(2**52 + 1) and (2**52 + 1) % 17 == 0
    assert (2**61 - 1) % 4 == 3 and (2**127 - 1) % 4 == 3  # no square root of -1 modulo them


def gauss_entrywise(A, B, m: int):
    """``A @ B mod m`` over Z[i] with numpy.matmul's shape rules, each entry a sum over k of
    complex products ``(a + bi)(c + di) = (ac - bd) + (ad + bc)i`` of Python ints (no NumPy
    arithmetic), reduced once at the end: object arrays ``(R, I)`` (0-d for 1-D @ 1-D)."""
    (ar, ai), (br, bi) = gparts(A), gparts(B)
    a1, b1 = ar.ndim == 1, br.ndim == 1
    if a1:
        ar, ai = ar[None], ai[None]
    if b1:
        br, bi = br[:, None], bi[:, None]
    n, k = ar.shape[-2:]
    p = br.shape[-1]
    stack = np.broadcast_shapes(ar.shape[:-2], br.shape[:-2])
    ar, ai = (np.broadcast_to(x, stack + (n, k)) for x in (ar, ai))
    br, bi = (np.broadcast_to(x, stack + (k, p)) for x in (br, bi))
    R, Im = np.empty(stack + (n, p), dtype=object), np.empty(stack + (n, p), dtype=object)
    for idx in np.ndindex(*stack):
        for i in range(n):
            for j in range(p):
                re = im = 0
                for t in range(k):
                    a, b = int(ar[idx + (i, t)]), int(ai[idx + (i, t)])
                    c, d = int(br[idx + (t, j)]), int(bi[idx + (t, j)])
                    re += a * c - b * d
                    im += a * d + b * c
                R[idx + (i, j)], Im[idx + (i, j)] = re % m, im % m
    if a1:
        R, Im = R[..., 0, :], Im[..., 0, :]
    if b1:
        R, Im = R[..., 0], Im[..., 0]
    return R, Im


def assert_mod(res, ref, m: int):
    """Parts equal to the oracle's, in ``[0, m)``, of modlin.matmul's dtype for ``m``: int64 up to
    ``2**63``, object arrays of Python ints above."""
    assert isinstance(res, tuple) and len(res) == 2, type(res)
    want = np.dtype(np.int64) if m <= 2**63 else np.dtype(object)
    for C, R in zip(res, ref):
        C = np.array(C, dtype=object) if type(C) is int else np.asarray(C)  # a 1-D @ 1-D scalar
        assert C.dtype == want, (C.dtype, want, m)
        assert C.shape == R.shape, (C.shape, R.shape)
        vals = C.astype(object).ravel()
        if C.dtype == object:
            assert all(type(v) is int for v in vals)
        assert all(0 <= v < m for v in vals), "result not reduced into [0, m)"
        bad = np.flatnonzero(np.asarray(vals != R.ravel(), dtype=bool))
        assert bad.size == 0, f"{bad.size} mismatching entries (m = {m}); first at flat {bad[0]}"


def big_pair(seed: int, shape, m: int):
    """A (real, imag) pair of object arrays of Python ints in ``[-3m, 3m)``, about a third of them
    the edges: ``m - 1``, ``+-m``, ``-1``, ``0``, ``+-(m//2)``, ``m//2 + 1``, ``3m - 1``, ``-3m``."""
    r = random.Random(seed)
    edges = [m - 1, m, -m, -1, 0, 1, m // 2, -(m // 2), m // 2 + 1, 3 * m - 1, -3 * m]
    n = math.prod(shape)

    def one():
        out = np.empty(n, dtype=object)
        out[:] = [r.choice(edges) if r.random() < 0.35 else r.randrange(-3 * m, 3 * m) for _ in range(n)]
        return out.reshape(shape)

    return one(), one()


@pytest.mark.parametrize("m", list(LARGE_M.values()), ids=list(LARGE_M))
def test_matmul_large_moduli_every_algorithm(m, rng):
    # unreduced and negative Python ints, edges included: every algorithm, even or 3 (mod 4) m too
    A, B = big_pair(m % 1000, (3, 5), m), big_pair(m % 997, (5, 4), m)
    ref = gauss_entrywise(A, B, m)
    for alg in ALGS:
        assert_mod(g.matmul(A, B, m, algorithm=alg), ref, m)
    # worst case: every part m - 1, so each part of each term is (m - 1)**2; C_r = 0, C_i = 2k mod m
    W = tuple(np.full((2, 40), m - 1, dtype=object) for _ in range(2))
    V = tuple(np.full((40, 3), m - 1, dtype=object) for _ in range(2))
    for alg in ALGS:
        re, im = g.matmul(W, V, m, algorithm=alg)
        assert_mod((re, im), gauss_entrywise(W, V, m), m)
        assert all(int(v) == 0 for v in re.ravel()) and all(int(v) == 80 % m for v in im.ravel())
    # int64 pairs over the whole int64 range, and a complex array (parts exact up to 2**53)
    A64, B64 = rand_gauss(rng, (2, 6), -(2**63), 2**63 - 1), rand_gauss(rng, (6, 3), -(2**63), 2**63 - 1)
    Ac = rng.integers(-(2**53), 2**53, (2, 4)) + 1j * rng.integers(-(2**53), 2**53, (2, 4))
    Br = rng.integers(-(2**63), 2**63 - 1, (4, 3), dtype=np.int64)  # a real matrix: zero imaginary part
    for alg in ALGS:
        assert_mod(g.matmul(A64, B64, m, algorithm=alg), gauss_entrywise(A64, B64, m), m)
        assert_mod(g.matmul(Ac, Br, m, algorithm=alg), gauss_entrywise(Ac, Br, m), m)


def test_matmul_across_2_52(rng):
    # the same operands on both sides of 2**52, where the multiword path gives way to the RNS one
    A, B = rand_gauss(rng, (3, 7), -(2**63), 2**63 - 1), rand_gauss(rng, (7, 2), -(2**63), 2**63 - 1)
    W, V = full_pair((2, 30), -1), full_pair((30, 2), -1)  # -1 is m - 1 for every m
    for m in (P52, 2**52 - 1, 2**52, 2**52 + 1, 2**52 + 21):
        algs = ALGS if m >= 2**52 or g.is_twom_modulus(m) else ("auto", "3m", "4m")
        for alg in algs:
            assert_mod(g.matmul(A, B, m, algorithm=alg), gauss_entrywise(A, B, m), m)
            assert_mod(g.matmul(W, V, m, algorithm=alg), gauss_entrywise(W, V, m), m)


def test_matmul_large_moduli_2m_needs_no_square_root_of_m():
    # modulo an even m, a 3 (mod 4) prime or a composite modlin cannot factor, 2M modulo m itself
    # is impossible (or unknowable) but the RNS path's primes are all 1 (mod 4): "2m" is accepted
    A, B = big_pair(1, (2, 3), 2**127), big_pair(2, (3, 2), 2**127)
    for m in (2**64, 2**127 - 1, LARGE_M["p65*p65"]):
        with pytest.raises(ValueError):
            g.sqrt_minus_one(m)
        assert_mod(g.matmul(A, B, m, algorithm="2m"), gauss_entrywise(A, B, m), m)


@pytest.mark.parametrize("m", [2**61 - 1, 2**63, 2**64 + 13, 2**200 - 75], ids=["2^61-1", "2^63", "2^64+13", "p200"])
@pytest.mark.parametrize("sa, sb", [
    ((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((2, 3, 4), (4, 5)), ((4, 5), (2, 5, 3)),
    ((3, 1, 2, 4), (2, 4, 3)), ((2, 0), (0, 3)), ((0, 3), (3, 2)), ((2, 0, 3), (3, 2)), ((1, 1), (1, 1)),
])
def test_matmul_large_moduli_shapes(sa, sb, m):
    A, B = big_pair(len(sa), sa, m), big_pair(len(sb) + 7, sb, m)
    ref = gauss_entrywise(A, B, m)
    for alg in ALGS:
        res = g.matmul(A, B, m, algorithm=alg)
        assert np.shape(res[0]) == np.matmul(np.zeros(sa), np.zeros(sb)).shape
        assert_mod(res, ref, m)
        if len(sa) == len(sb) == 1:  # a scalar, as numpy.matmul gives: Python ints above 2**63
            assert all(type(x) is (np.int64 if m <= 2**63 else int) for x in res)


@pytest.mark.parametrize("m", [2**63, 2**64, 2**127 - 1], ids=["2^63", "2^64", "2^127-1"])
def test_matmul_large_moduli_input_kinds(m, rng):
    big = rand_gauss(rng, (6, 10), -(2**63), 2**63 - 1)
    kinds = {
        "strided": (big[0][::2, ::3], big[1][1::2, ::3]),                  # non-contiguous views
        "transposed": (big[0][:4, :3].T, np.asfortranarray(big[1][:3, 4:8])),
        "uint64": (np.array([[2**64 - 1, 2**63], [0, 7], [5, 1]], dtype=np.uint64),
                   np.array([[1, 0], [2**63 + 5, 3], [9, 2**64 - 2]], dtype=np.uint64)),
        "small": (np.array([[-128, 127], [3, 0], [1, 1]], dtype=np.int8), np.array([[True, False]] * 3)),
        "floats": (np.array([[2.0**62, -(2.0**70)], [1e20, 3.0], [-1.0, 0.0]]), np.array([[1.0, 2.0**64]] * 3)),
        "lists": ([[m - 1, -1], [2 * m + 5, 0], [1, 2]], [[0, m], [-m - 1, 7], [3, -(3 * m)]]),
    }
    for name, A in kinds.items():
        keep = [np.array(x, copy=True) for x in A]
        B = big_pair(len(name), (np.shape(A[0])[-1], 3), m)
        ref = gauss_entrywise(A, B, m)
        At, Bt = tuple(x.T for x in B), tuple(np.asarray(x).T for x in A)  # the transposed product, too
        for alg in ALGS:
            assert_mod(g.matmul(A, B, m, algorithm=alg), ref, m)
            assert_mod(g.matmul(At, Bt, m, algorithm=alg), gauss_entrywise(At, Bt, m), m)
        assert all(np.array_equal(np.asarray(x), y) for x, y in zip(A, keep)), name  # left alone
    Ac = np.array([[1 + 2j, -3j], [2.0**60 + 1j, -(2.0**62)]])  # complex128, integral parts
    assert_mod(g.matmul(Ac, Ac, m), gauss_entrywise(Ac, Ac, m), m)


def test_matmul_large_moduli_dtype_boundary():
    # residues fit int64 up to m = 2**63 (its largest is 2**63 - 1); above, Python ints
    A = (np.array([[-1]], dtype=object), np.array([[0]], dtype=object))
    for m, dtype in ((2**63 - 25, np.int64), (2**63, np.int64), (2**63 + 1, object), (2**64, object)):
        re, im = g.matmul(A, A, m)  # (-1)(-1) = 1
        assert re.dtype == dtype and int(re[0, 0]) == 1 and int(im[0, 0]) == 0
        re, im = g.matmul(A, ([[1]], [[0]]), m)  # -1 = m - 1
        assert re.dtype == dtype and int(re[0, 0]) == m - 1


def _exact_tiling(m, alg, shape, batch=1):
    return lambda: modlin._algorithms.gaussian.ExactTile.modular(m, alg, 2, shape).tiling(shape, batch)


@pytest.mark.parametrize("m", [2**63, 2**64 + 13], ids=["2^63", "2^64+13"])
def test_matmul_large_moduli_tiled_within_budget(m, rng):
    from conftest import budgets

    mm, k, n = 120, 90, 100  # no tile size divides them all: uneven last tiles
    A, B = big_pair(11, (mm, k), m), big_pair(12, (k, n), m)
    # the edges in one entry: every term (m - 1)**2, so partial sums of k-panels reach their largest
    for x in A:
        x[0] = m - 1
    for x in B:
        x[:, 0] = m - 1
    want = g.matmul(A, B, m)
    rows, cols = [0, 57, mm - 1], [0, 41, n - 1]
    ref = gauss_entrywise((A[0][rows], A[1][rows]), (B[0][:, cols], B[1][:, cols]), m)
    assert_mod(tuple(x[np.ix_(rows, cols)] for x in want), ref, m)
    grids = set()
    for alg in ("2m", "3m"):
        for budget, t in budgets(_exact_tiling(m, alg, (mm, k, n)), step=1.25):
            with modlin.limits(memory=budget):
                got = g.matmul(A, B, m, algorithm=alg)
            grids.add(t.grid)
            assert all(x.dtype == w.dtype and np.array_equal(x, w) for x, w in zip(got, want)), (alg, t.grid)
    assert (1, 1, 1) in grids and any(gr[1] > 1 for gr in grids), grids  # k-panels, added modulo m


def test_matmul_large_moduli_working_memory_within_the_model(rng):
    from conftest import budgets, traced

    m = 2**63  # int64 results, whose bytes the trace can tell apart from the working memory
    a = rand_gauss(rng, (200, 150), -(2**63), 2**63 - 1)
    b = rand_gauss(rng, (150, 170), -(2**63), 2**63 - 1)
    for budget, t in budgets(_exact_tiling(m, "2m", (200, 150, 170)))[1::2]:
        with modlin.limits(memory=budget):
            (re, im), peak = traced(lambda: g.matmul(a, b, m))
        assert peak - re.nbytes - im.nbytes <= t.peak <= budget, (t.grid, peak, t.peak)


def test_matmul_large_moduli_budget_too_small():
    with modlin.limits(memory="256KiB"), pytest.raises(ValueError, match="too small"):
        g.matmul(np.ones((300, 300)) * (1 + 1j), np.ones((300, 300)), 2**64 + 13)


# --------------------------------------------------------------------- rank-k updates from 2**52 on

def _rank_k_ref(terms, m, conj):
    """``sum(X @ op(Y)^T)`` mod m by the entrywise oracle, ``op`` conjugating when ``conj``."""
    R = Im = 0
    for X, Y in terms:
        yr, yi = gparts(Y)
        r, i = gauss_entrywise(X, (T(yr), T(-yi) if conj else T(yi)), m)
        R, Im = R + r, Im + i
    return _mod(R, m), _mod(Im, m)


@pytest.mark.parametrize("m", [2**61 - 1, 2**63, 2**64, 2**127 - 1], ids=["2^61-1", "2^63", "2^64", "2^127-1"])
@pytest.mark.parametrize("shape", [(4, 3), (3, 7), (2, 3, 5), (1, 1), (3, 0)])
def test_rank_k_large_moduli(m, shape):
    A, B = big_pair(21, shape, m), big_pair(22, shape, m)
    if shape[-1]:  # 2**63: modulo 2**64 its balanced residue is -2**63, whose negation has no int64
        for x in (*A, *B):
            x[(0,) * len(shape)] = 2**63
    for alg in ALGS:
        res = g.herk(A, m, algorithm=alg)
        assert_mod(res, _rank_k_ref([(A, A)], m, True), m)
        assert_hermitian(res, m)
        res = g.her2k(A, B, m, algorithm=alg)
        assert_mod(res, _rank_k_ref([(A, B), (B, A)], m, True), m)
        assert_hermitian(res, m)
        res = g.syrk(A, m, algorithm=alg)
        assert_mod(res, _rank_k_ref([(A, A)], m, False), m)
        assert_symmetric(res)
        res = g.syr2k(A, B, m, algorithm=alg)
        assert_mod(res, _rank_k_ref([(A, B), (B, A)], m, False), m)
        assert_symmetric(res)
        # real operands: one array
        zero = np.zeros(shape, dtype=object)
        got = g.syrk(A[0], m, algorithm=alg)
        assert_mod((got, got), (_rank_k_ref([((A[0], zero),) * 2], m, False)[0],) * 2, m)
        got = g.syr2k(A[0], B[0], m, algorithm=alg)
        assert_mod((got, got), (_rank_k_ref([((A[0], zero), (B[0], zero)), ((B[0], zero), (A[0], zero))], m,
                                            False)[0],) * 2, m)
        assert_symmetric(got)


@pytest.mark.parametrize("m", [2**63, 2**64 + 13], ids=["2^63", "2^64+13"])
def test_rank_k_large_moduli_tiled_within_budget(m):
    from conftest import budgets
    from modlin._planning.tiling import square

    n, k = 90, 70
    A, B = big_pair(31, (n, k), m), big_pair(32, (n, k), m)
    want = g.herk(A, m), g.her2k(A, B, m), g.syrk(A[0], m)
    lines = [0, 45, n - 1]
    sub = lambda X: tuple(x[lines] for x in X)  # noqa: E731
    assert_mod(tuple(x[np.ix_(lines, lines)] for x in want[0]), _rank_k_ref([(sub(A), sub(A))], m, True), m)
    assert_mod(tuple(x[np.ix_(lines, lines)] for x in want[1]),
               _rank_k_ref([(sub(A), sub(B)), (sub(B), sub(A))], m, True), m)
    tiling = lambda: square(modlin._algorithms.gaussian.ExactTile.modular(m, "2m", 2, (n, k, n)).tiling((n, k, n), 1, extra=4))  # noqa: E731
    grids = set()
    for budget, t in budgets(tiling, step=1.25):
        with modlin.limits(memory=budget):
            got = g.herk(A, m), g.her2k(A, B, m), g.syrk(A[0], m)
        grids.add(t.grid)
        assert all(np.array_equal(x, w) for gw, ww in zip(got[:2], want[:2]) for x, w in zip(gw, ww)), t.grid
        assert np.array_equal(got[2], want[2]), t.grid
        assert_hermitian(got[0], m)
    assert any(gr[0] > 1 for gr in grids), grids  # mirrored tiles: C_JI from C_IJ, conjugated modulo m


# --------------------------------------------------------------------- fields, dask, property

def test_large_moduli_fields():
    import flint
    import galois

    for p in (2**61 - 1, 2**127 - 1):
        GF = galois.GF(p)
        Ar, Ai = [[p - 1, 3], [5, 7]], [[1, p - 2], [0, 2]]
        ref = gauss_entrywise((np.array(Ar, dtype=object), np.array(Ai, dtype=object)),
                              (np.array(Ai, dtype=object), np.array(Ar, dtype=object)), p)
        re, im = g.matmul((GF(Ar), GF(Ai)), (GF(Ai), GF(Ar)))  # m from the field
        assert type(re) is GF and type(im) is GF
        assert [[int(v) for v in row] for row in re.tolist()] == ref[0].tolist()
        assert [[int(v) for v in row] for row in im.tolist()] == ref[1].tolist()
        hr, hi = g.herk((GF(Ar), GF(Ai)))
        assert type(hr) is GF and [[int(v) for v in row] for row in hr.tolist()] == \
            _rank_k_ref([((np.array(Ar, dtype=object), np.array(Ai, dtype=object)),) * 2], p, True)[0].tolist()
    q = 2**127 - 1
    F = flint.fmpz_mod_mat([[q - 1, 2], [3, 4]], flint.fmpz_mod_ctx(q))  # -1 2; 3 4
    re, im = g.matmul((F, F), (F, F))  # (1 + i)**2 F**2 = 2i F**2, F**2 = [[7, 6], [9, 22]]
    assert type(re).__name__ == "fmpz_mod_mat" and re.modulus() == q
    assert [[int(v) for v in row] for row in re.tolist()] == [[0, 0], [0, 0]]
    assert [[int(v) for v in row] for row in im.tolist()] == [[14, 12], [18, 44]]


def test_large_moduli_dask():
    da = pytest.importorskip("dask.array")
    m = 2**61 - 1
    rng = np.random.default_rng(3)
    A = rng.integers(-(2**53), 2**53, (6, 8)) + 1j * rng.integers(-(2**53), 2**53, (6, 8))
    B = rand_gauss(rng, (8, 5), -(2**63), 2**63 - 1)
    want = gauss_entrywise(A, B, m)
    re, im = g.matmul(da.from_array(A, chunks=(3, 3)), tuple(da.from_array(x, chunks=(3, 5)) for x in B), m)
    assert_mod((re.compute(), im.compute()), want, m)  # k-chunks combined modulo m
    assert re.dtype == np.int64
    # above 2**63 the lazy result says object, as its chunks are
    m = 2**127 - 1
    re, im = g.matmul(da.from_array(A, chunks=(3, 3)), tuple(da.from_array(x, chunks=(3, 5)) for x in B), m)
    assert re.dtype == im.dtype == object and re.compute().dtype == object
    assert_mod((re.compute(), im.compute()), gauss_entrywise(A, B, m), m)


@st.composite
def large_case(draw):
    m = draw(st.sampled_from(list(LARGE_M.values())) | st.integers(2**52, 2**140))
    n, k, p = draw(st.integers(1, 3)), draw(st.integers(0, 4)), draw(st.integers(1, 3))
    ints = st.integers(-4 * m, 4 * m) | st.sampled_from([m - 1, -m, m // 2, -(m // 2), 2**63, -(2**63)])

    def mk(r, c):
        x = np.empty(r * c, dtype=object)
        x[:] = draw(st.lists(ints, min_size=r * c, max_size=r * c))
        return x.reshape(r, c)

    return m, (mk(n, k), mk(n, k)), (mk(k, p), mk(k, p))


@settings(max_examples=25)
@given(large_case())
def test_property_large_moduli_every_algorithm_agrees_with_oracle(case):
    m, A, B = case
    ref = gauss_entrywise(A, B, m)
    for alg in ALGS:
        assert_mod(g.matmul(A, B, m, algorithm=alg), ref, m)
