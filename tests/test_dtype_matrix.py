"""A test matrix: public function x input dtype x modulus range, against Python-int oracles.

Every public function of modlin that takes integer matrices is called on
operands of every input dtype modlin documents, modulo one modulus of every
size class its algorithms distinguish, and each result is compared with an
oracle that knows nothing of modlin.

Axes
----
function
    ``modlin.matmul``, ``modlin.intmul``; ``modlin.gaussian.matmul``,
    ``herk``, ``syrk``, ``her2k``, ``syr2k``, ``intmul``;
    ``modlin.linalg.rank``, ``det``, ``inv``, ``solve``, ``nullspace``,
    ``rref``, ``pluq``, ``trsm``.
dtype
    ``int8`` ... ``int64``, ``uint8`` ... ``uint64``, ``bool``, ``float32`` and
    ``float64`` holding integers (beyond ``2**53`` too, negative too, up to the
    largest finite float), and ``object`` arrays of Python ints beyond
    ``2**64`` (negative too). Gaussian functions take complex arrays,
    ``(real, imag)`` pairs of every dtype above, and plain real arrays.
modulus
    One prime just below each of ``2**24, 2**26, 2**31, 2**52, 2**53, 2**62,
    2**63, 2**64, 2**127`` (ids ``p24`` ... ``p127``), where modlin's
    algorithms change: the fp32 engine's exactness bound, the size of the RNS
    moduli, int32, ``MAX_MODULUS = 2**52`` (multiword products below, residue
    number systems above; the linalg kernels split limbs from there), ``p``
    exact as a float64, int64 residues (linalg's int64 results need
    ``p < 2**63``), uint64, and object results above; plus ``p = 2, 3``.
    Composite ``2**63``, ``2**64``, ``10**18`` for the functions that take any
    ``p`` (matmul, trsm). The Gaussian functions take ``m < 2**52``: primes
    ``1 (mod 4)`` (2M), primes ``3 (mod 4)`` (3M/4M only), ``5**22`` (2M on a
    prime power), ``2**51`` and ``10**15 + 1`` (no square root of -1).

Operands
--------
:func:`operand` fills a small matrix with the extreme values of the dtype
(``min``, ``max``, ``-1``, ``0``, ``1``), values around the modulus (``p - 1``,
``p``, ``p + 1``, ``-(p - 1)``, the edges ``+-(p - 1) // 2`` of the balanced
range) and random values over the dtype's range, each kept only if the dtype
can hold it (floats may round it: the oracle reads the *converted* values back
with ``int()``, so rounding is no error). Rank-deficient matrices repeat rows
and columns as *different integers congruent mod p* where the dtype allows,
so their dependencies exist modulo ``p`` only.

Oracles
-------
Pure Python integers: products of object arrays reduced once; Gauss-Jordan
elimination modulo ``p`` for ranks, echelon forms, inverses, kernels and
solutions; a fraction-free (Bareiss) determinant over the integers reduced at
the end; substitution for triangular systems. python-flint cross-checks the
elimination oracle itself (:func:`test_oracle_against_flint`).

Every call also checks the result's type, dtype (int64 below the documented
bound, object arrays of Python ``int`` above), range ``[0, p)``, and that the
inputs are left unmodified (values, dtype, shape and strides).

Notes
-----
Ids read ``function-dtype-modulus[-variant]``, e.g. ``rank-float64-p62``.
Everything is small (at most 7 x 7, a few 20 x 20) so the file runs in well
under 90 s once numba's kernels are cached.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import modlin
from modlin import gaussian, linalg

# ===================================================================== moduli

#: One prime just below each power of two where modlin's algorithms change.
PRIMES = {
    "p2": 2,  # the smallest field: bool operands are already reduced, -1 = 1
    "p3": 3,
    "p24": 2**24 - 3,
    "p26": 2**26 - 5,
    "p31": 2**31 - 1,
    "p52": 2**52 - 47,
    "p53": 2**53 - 111,
    "p62": 2**62 - 57,
    "p63": 2**63 - 25,
    "p64": 2**64 - 59,
    "p127": 2**127 - 1,
}
#: matmul (and trsm) take any p >= 2: powers of two at the int64/uint64 edges and a decimal one.
COMPOSITES = {"c2e63": 2**63, "c2e64": 2**64, "c1e18": 10**18}
ALL_MODULI = {**PRIMES, **COMPOSITES}

#: Gaussian moduli (m < 2**52). 2M needs every prime factor 1 (mod 4).
G_TWOM = {"m24": 2**24 - 3, "m26": 2**26 - 27, "m31": 2**31 - 19, "m52": 2**52 - 47, "m5e22": 5**22}
#: No square root of -1 here: primes 3 (mod 4), an even modulus, one with factors 3 (mod 4).
G_THREEM = {"m24q3": 2**24 - 17, "m26q3": 2**26 - 5, "m31q3": 2**31 - 1, "m52q3": 2**52 - 173,
            "m2e51": 2**51, "m1e15": 10**15 + 1}
G_MODULI = {**G_TWOM, **G_THREEM}

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES = INT_DTYPES + ["bool", "float32", "float64", "object"]
EXACT_DTYPES = [d for d in DTYPES if not d.startswith("float")]  # what intmul accepts


def is_probable_prime(n: int) -> bool:
    """Miller-Rabin with the first 20 prime bases (deterministic below 3.3e24, and
    an error probability below 4**-20 above): independent of galois."""
    if n < 2:
        return False
    small = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71]
    for q in small:
        if n % q == 0:
            return n == q
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def int64_result(p: int, *, linalg_fn: bool) -> bool:
    """Whether results modulo ``p`` are int64 (else object arrays of Python ints):
    ``p <= 2**63`` for matmul, ``p < 2**63`` for linalg (as documented)."""
    return p < 2**63 if linalg_fn else p <= 2**63


# ===================================================================== operands

def _np_dtype(name: str):
    return np.dtype(object) if name == "object" else np.dtype(name)


def dtype_range(name: str) -> tuple[int, int]:
    """Smallest and largest integer the dtype holds (floats: +- their largest finite value)."""
    if name == "bool":
        return 0, 1
    if name == "object":
        return -(2**200) - 1, 2**200 + 1
    dt = _np_dtype(name)
    if dt.kind == "f":
        big = int(np.finfo(dt).max)
        return -big, big
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def special_values(name: str, p: int) -> list[int]:
    """The extremes of a dtype and the values around ``p`` that it can hold (as Python ints)."""
    if name == "bool":
        return [0, 1]
    lo, hi = dtype_range(name)
    half = (p - 1) // 2
    cands = [0, 1, -1, 2, -2, lo, hi, lo + 1, hi - 1,
             p - 1, p, p + 1, 2 * p - 1, -(p - 1), -p, -(p + 1),
             half, half + 1, -half, -half - 1,
             2**31 - 1, -(2**31), 2**32 - 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**64)]
    if name.startswith("float"):
        # integers a float holds beyond 2**53, and the neighbours of the float32/float64 limits
        cands += [2**24, 2**24 + 2, -(2**24 + 2), 2**53, 2**53 + 2, -(2**53 + 2),
                  2**62, -(2**62), 2**64 - 2**11, 2**100, -(2**100) - 2**48]
    if name == "object":
        cands += [2**64 + 1, -(2**64) - 1, 2**127 - 1, -(2**127), 2**200 + 7, -(2**200) - 3,
                  p * 2**70 + p - 1, -(p * 2**70) - 1]
    out = []
    for v in cands:
        if lo <= v <= hi and v not in out:
            out.append(v)
    return out


def random_values(name: str, n: int, rng) -> np.ndarray:
    """``n`` random values spread over the dtype's range."""
    dt = _np_dtype(name)
    if name == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    if dt.kind == "f":
        # integral floats of every magnitude: mantissas of up to 24 bits times 2**e
        mant = rng.integers(-(2**24), 2**24, n).astype(np.float64)
        emax = 100 if dt == np.float32 else 900
        exps = rng.integers(0, emax, n)
        small = rng.random(n) < 0.5
        exps[small] = 0
        return np.ldexp(mant, exps).astype(dt)
    vals = [int.from_bytes(rng.bytes(int(rng.integers(1, 26))), "little") * (1 if rng.random() < 0.5 else -1)
            for _ in range(n)]
    return obj_array(vals, (n,))


def obj_array(vals, shape) -> np.ndarray:
    """An object array of the given Python values (never a nested-sequence guess)."""
    out = np.empty(len(vals), dtype=object)
    out[:] = list(vals)
    return out.reshape(shape)


def to_dtype(vals, name: str, shape) -> np.ndarray:
    """Python ints as an array of dtype ``name`` (floats round to nearest, as numpy does)."""
    if name == "object":
        return obj_array([int(v) for v in vals], shape)
    if name.startswith("float"):
        # float() of a Python int rounds correctly; numpy's int -> float32 goes through float64
        # (a double rounding), which is fine: the oracle reads the converted value back
        return np.array([float(v) for v in vals], dtype=np.float64).astype(name).reshape(shape)
    return np.array([int(v) for v in vals], dtype=name).reshape(shape)


def operand(name: str, p: int, shape, seed: int, *, specials: float = 0.5) -> np.ndarray:
    """A ``shape`` array of dtype ``name``: its special values (all of them when there is
    room, a random subset otherwise) planted at random places in random values."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    x = random_values(name, n, rng)
    sv = special_values(name, p)
    if n:
        count = min(len(sv), max(1, int(n * specials))) if specials < 1 else min(len(sv), n)
        chosen = rng.choice(len(sv), size=count, replace=False)
        where = rng.choice(n, size=count, replace=False)
        planted = to_dtype([sv[i] for i in chosen], name, (count,))
        x[where] = planted
    return x.reshape(shape)


def exact(x) -> np.ndarray:
    """The exact integers an array holds, as an object array of Python ints (same shape)."""
    a = np.asarray(x)
    assert a.dtype.kind != "c"
    if a.dtype.kind == "f":
        assert np.all(np.isfinite(a)) and np.array_equal(a, np.trunc(a)), "oracle needs integral floats"
    return obj_array([int(v) for v in a.ravel().tolist()], a.shape)


def rows_of(x) -> list[list[int]]:
    """A 2-D array's exact integers as a list of rows."""
    e = exact(x)
    assert e.ndim == 2
    return [list(r) for r in e.tolist()] if e.shape[0] else []


def congruent_variant(v: int, p: int, name: str) -> int:
    """A value congruent to ``v`` mod ``p`` but a different integer, when the dtype holds one
    exactly (so that dependencies between rows exist modulo p only); else ``v``."""
    lo, hi = dtype_range(name)
    for w in (v - p, v + p, v - 2 * p, v + 2 * p):
        if lo <= w <= hi:
            if name.startswith("float"):
                f = np.array([float(w)]).astype(name)[0]
                if not np.isfinite(f) or int(f) != w:
                    continue
            return w
    return v


def deficient(name: str, p: int, m: int, n: int, seed: int) -> np.ndarray:
    """An ``m x n`` matrix of dtype ``name`` whose last row repeats row 0 and whose last
    column repeats column 1, each entry replaced by a congruent integer where possible;
    row 1 is zero. Rank at most ``min(m - 2, n - 1)`` modulo p."""
    x = operand(name, p, (m, n), seed)
    e = rows_of(x)
    e[1] = [0] * n
    e[m - 1] = [congruent_variant(v, p, name) for v in e[0]]
    for i in range(m):
        e[i][n - 1] = congruent_variant(e[i][1], p, name)
    return to_dtype([v for r in e for v in r], name, (m, n))  # exact: every value is held exactly


def layout(x: np.ndarray, kind: str) -> np.ndarray:
    """``x``'s values in another memory layout: ``C`` as is, ``T`` a transposed view of a
    contiguous copy, ``strided`` a view with steps 2 (rows) and -2 (columns, reversed)."""
    if kind == "C":
        return x
    if kind == "T":
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2) if x.ndim >= 2 else x
    if kind == "strided":
        if x.ndim == 0:
            return x
        big = np.zeros(tuple(2 * s for s in x.shape), dtype=x.dtype)
        idx = tuple(slice(None, None, 2) for _ in x.shape[:-1]) + (slice(None, None, -2),)
        view = big[idx]
        view[...] = x
        assert not view.flags.c_contiguous or x.size <= 1
        return view
    raise AssertionError(kind)


# ===================================================================== checks

class Unmodified:
    """Snapshots the ndarray operands (parts of ``(re, im)`` pairs too) and asserts, on
    exit, that values, dtype, shape and strides are unchanged, even when the call raised."""

    def __init__(self, *operands):
        self.items = []
        for x in operands:
            for y in (x if isinstance(x, tuple) else (x,)):
                if isinstance(y, np.ndarray):
                    self.items.append((y, y.copy(), y.dtype, y.shape, y.strides))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for y, c, dt, shape, strides in self.items:
            assert y.dtype == dt and y.shape == shape and y.strides == strides, "operand's array changed"
            same = np.array_equal(y, c, equal_nan=True) if y.dtype.kind in "fc" else y.tolist() == c.tolist()
            assert same, "an input was modified in place"
        return False


def call(fn, *args, **kw):
    """``fn(*args, **kw)``, asserting that it leaves its array arguments (but ``out``) unmodified."""
    with Unmodified(*args, *(v for k, v in kw.items() if k != "out")):
        return fn(*args, **kw)


def check_residues(C, p: int, *, int64: bool, shape=None) -> list[int]:
    """``C`` is a plain ndarray of residues in ``[0, p)``: int64 when ``int64``, otherwise
    an object array of Python ints. Returns its entries as a flat list of ints."""
    assert type(C) is np.ndarray, type(C)
    if shape is not None:
        assert C.shape == tuple(shape), (C.shape, shape)
    flat = C.ravel().tolist()
    if int64:
        assert C.dtype == np.int64, C.dtype
    else:
        assert C.dtype == object, C.dtype
        bad = [type(v).__name__ for v in flat if type(v) is not int]
        assert not bad, f"object result holds {bad[:3]}, not Python ints"
    vals = [int(v) for v in flat]
    out = [v for v in vals if not 0 <= v < p]
    assert not out, f"result not reduced into [0, p): {out[:3]}"
    return vals


def assert_equal_mod(C, R, p: int, *, int64: bool, what: str = "result") -> None:
    """``C`` (checked by :func:`check_residues`) equals the exact integers ``R`` reduced mod ``p``."""
    R = np.asarray(R, dtype=object)
    got = check_residues(C, p, int64=int64, shape=R.shape)
    want = [int(v) % p for v in R.ravel().tolist()]
    if got != want:
        i = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        idx = np.unravel_index(i, R.shape) if R.shape else ()
        n = sum(a != b for a, b in zip(got, want))
        raise AssertionError(f"{what}: {n} of {len(want)} entries wrong mod p = {p}; first at {idx}: "
                             f"got {got[i]}, expected {want[i]}")


def assert_scalar_mod(c, r: int, p: int, *, int64: bool) -> None:
    """A 1-D @ 1-D result: an int64 scalar (or Python int for object results) equal to ``r mod p``."""
    if int64:
        assert isinstance(c, np.int64), type(c)
    else:
        assert type(c) is int, type(c)
    assert int(c) == r % p


# ===================================================================== Python-int oracles

def ref_product(A, B):
    """The exact integer ``A @ B`` (numpy.matmul shape rules) of the values the arrays hold."""
    a, b = exact(A), exact(B)
    if a.ndim == 1 and b.ndim == 1:
        return sum((x * y for x, y in zip(a.tolist(), b.tolist())), 0)
    r = np.matmul(a, b)
    if r.size == 0:  # numpy's object matmul of empty operands: make the zeros Python ints
        return obj_array([0] * r.size, r.shape)
    return r


def mat_mul(X: list[list[int]], Y: list[list[int]], ncols: int) -> list[list[int]]:
    """Exact product of two lists of rows (``ncols`` columns in ``Y``, for empty ``Y``)."""
    return [[sum(x * Y[t][j] for t, x in enumerate(row)) for j in range(ncols)] for row in X]


def rref_mod(M: list[list[int]], p: int, n: int) -> tuple[list[list[int]], list[int]]:
    """Reduced row echelon form of the ``len(M) x n`` matrix ``M`` modulo a prime ``p``,
    and its pivot columns (Gauss-Jordan on Python ints)."""
    R = [[x % p for x in row] for row in M]
    pivots, r = [], 0
    for c in range(n):
        if r == len(R):
            break
        piv = next((i for i in range(r, len(R)) if R[i][c]), None)
        if piv is None:
            continue
        R[r], R[piv] = R[piv], R[r]
        inv = pow(R[r][c], -1, p)
        R[r] = [x * inv % p for x in R[r]]
        for i in range(len(R)):
            if i != r and R[i][c]:
                f = R[i][c]
                R[i] = [(x - f * y) % p for x, y in zip(R[i], R[r])]
        pivots.append(c)
        r += 1
    return R, pivots


def rank_mod(M, p, n) -> int:
    return len(rref_mod(M, p, n)[1])


def det_bareiss(M: list[list[int]]) -> int:
    """The exact integer determinant by Bareiss' fraction-free elimination (no modulus)."""
    n = len(M)
    if n == 0:
        return 1
    A = [list(r) for r in M]
    sign, prev = 1, 1
    for k in range(n - 1):
        if A[k][k] == 0:
            swap = next((i for i in range(k + 1, n) if A[i][k]), None)
            if swap is None:
                return 0
            A[k], A[swap] = A[swap], A[k]
            sign = -sign
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                A[i][j] = (A[i][j] * A[k][k] - A[i][k] * A[k][j]) // prev
        prev = A[k][k]
    return sign * A[n - 1][n - 1]


def inverse_mod(M, p) -> list[list[int]] | None:
    """The inverse modulo ``p`` by Gauss-Jordan on ``[M | I]``, or None when singular."""
    n = len(M)
    aug = [list(r) + [int(i == j) for j in range(n)] for i, r in enumerate(M)]
    R, piv = rref_mod(aug, p, 2 * n)
    if piv[:n] != list(range(n)):  # [M | I] has rank n: M is invertible iff its pivots are all in M
        return None
    return [r[n:] for r in R[:n]]


def nullspace_mod(M, p, n) -> list[list[int]]:
    """The canonical right-kernel basis (as rows of an ``n x (n - rank)`` matrix): column
    ``j`` is 1 at the j-th free column, 0 at the other free ones, ``-R[i, free]`` at pivot i."""
    R, piv = rref_mod(M, p, n)
    free = [c for c in range(n) if c not in piv]
    N = [[0] * len(free) for _ in range(n)]
    for j, f in enumerate(free):
        N[f][j] = 1
        for i, c in enumerate(piv):
            N[c][j] = (-R[i][f]) % p
    return N


def solve_mod(M, Bcols: list[list[int]], p, n, k) -> list[list[int]] | None:
    """The solution of ``M X = B`` (``B`` of ``k`` columns) that is zero at the free
    columns (``n x k`` rows), or None when some column of ``B`` is not in the column
    space of ``M``."""
    aug = [list(r) + list(b) for r, b in zip(M, Bcols)]
    R, piv = rref_mod(aug, p, n + k)
    if any(c >= n for c in piv):
        return None
    X = [[0] * k for _ in range(n)]
    for i, c in enumerate(piv):
        X[c] = R[i][n:]
    return X


def transpose(M, ncols):
    return [[M[i][j] for i in range(len(M))] for j in range(ncols)]


def zeros_mod(X, p) -> bool:
    return all(v % p == 0 for r in X for v in r)


# ===================================================================== self-tests of the setup

def test_moduli_are_what_they_claim():
    """The primes are prime (two independent tests), the composites are not, and the
    Gaussian moduli have (or lack) the square root of -1 that their class says."""
    import galois

    for p in PRIMES.values():
        assert is_probable_prime(p) and galois.is_prime(p), p
    for p in COMPOSITES.values():
        assert not is_probable_prime(p)
    for m in (2**24 - 3, 2**26 - 27, 2**31 - 19, 2**52 - 47, 2**24 - 17, 2**26 - 5, 2**31 - 1, 2**52 - 173):
        assert is_probable_prime(m) and galois.is_prime(m), m
    # -1 is a square mod m exactly when m is odd with every prime factor 1 (mod 4): Euler's criterion
    for m in (2**24 - 3, 2**26 - 27, 2**31 - 19, 2**52 - 47):
        assert m % 4 == 1 and pow(m - 1, (m - 1) // 2, m) == 1
    for m in (2**24 - 17, 2**26 - 5, 2**31 - 1, 2**52 - 173):
        assert m % 4 == 3
    assert 10**15 + 1 == 7 * 11 * 13 * 211 * 241 * 2161 * 9091  # 7 = 3 (mod 4)
    assert all(m < 2**52 for m in G_MODULI.values())


@pytest.mark.parametrize("name", DTYPES)
def test_operand_builder_hits_the_extremes(name):
    """:func:`operand` plants every special value (rounded for floats) when there is room."""
    p = PRIMES["p64"]
    sv = special_values(name, p)
    x = operand(name, p, (8, 8), seed=1, specials=1.0)
    assert x.dtype == _np_dtype(name)
    held = set(exact(x).ravel().tolist())
    want = set(exact(to_dtype(sv, name, (len(sv),))).ravel().tolist())
    assert want <= held
    lo, hi = dtype_range(name)
    if name in INT_DTYPES:
        assert {lo, hi, 0} <= held and (-1 in held or lo == 0)
    if name == "uint64":
        assert 2**64 - 1 in held
    if name == "float64":
        assert {2**62, -(2**62), 2**53 + 2} <= held and min(held) < 0
    if name == "object":
        assert max(held) > 2**64 and min(held) < -(2**64)


def test_oracle_against_flint():
    """The elimination oracle agrees with FLINT (nmod_mat below 2**64, fmpz_mod_mat above)."""
    import flint

    rng = random.Random(5)
    for p in (2**31 - 1, 2**62 - 57, 2**64 - 59, 2**127 - 1):
        for m, n in ((5, 5), (4, 6), (6, 4)):
            M = [[rng.randrange(-(2**70), 2**70) for _ in range(n)] for _ in range(m)]
            M[-1] = [(a + 3 * b) for a, b in zip(M[0], M[1])]  # rank deficient on purpose
            R, piv = rref_mod(M, p, n)
            flat = [x % p for r in M for x in r]
            if p < 2**64:
                F = flint.nmod_mat(m, n, flat, p)
            else:
                F = flint.fmpz_mod_mat(m, n, flat, flint.fmpz_mod_ctx(p))
            FR, frank = F.rref()
            assert frank == len(piv) == F.rank()
            assert [[int(FR[i, j]) for j in range(n)] for i in range(m)] == R
            if m == n:
                assert det_bareiss(M) % p == int(F.det())


# ===================================================================== modlin.matmul

def _p_ids(d):
    return list(d.items())


MATMUL_MODULI = _p_ids(ALL_MODULI)


@pytest.mark.parametrize("lay", ["C", "T", "strided"])
@pytest.mark.parametrize("pid,p", MATMUL_MODULI, ids=[k for k, _ in MATMUL_MODULI])
@pytest.mark.parametrize("name", DTYPES)
def test_matmul(name, pid, p, lay):
    """``matmul(A, B, p)`` of one dtype, every modulus class, three memory layouts."""
    seed = DTYPES.index(name) * 1000 + len(pid) + p % 997
    A = layout(operand(name, p, (6, 7), seed, specials=1.0), lay)
    B = layout(operand(name, p, (7, 4), seed + 1, specials=0.7), lay)
    C = call(modlin.matmul, A, B, p)
    assert_equal_mod(C, ref_product(A, B), p, int64=int64_result(p, linalg_fn=False))


SHAPES = {
    "1x1": ((1, 1), (1, 1)),
    "0xk": ((0, 3), (3, 2)),
    "kx0": ((2, 3), (3, 0)),
    "k0": ((2, 0), (0, 3)),
    "1d-2d": ((4,), (4, 3)),
    "2d-1d": ((3, 4), (4,)),
    "1d-1d": ((5,), (5,)),
    "stack": ((3, 2, 4), (3, 4, 2)),
    "bcast": ((2, 1, 2, 3), (4, 3, 2)),
    "bcast2d": ((3, 2, 4), (4, 2)),
    "0batch": ((0, 2, 3), (3, 2)),
    "1d-stack": ((3,), (2, 3, 4)),
    "k0-1d": ((0,), (0,)),
}
SHAPE_MODULI = [(k, ALL_MODULI[k]) for k in ("p24", "p31", "p52", "p53", "p63", "c2e63", "c2e64", "p64", "p127")]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("pid,p", SHAPE_MODULI, ids=[k for k, _ in SHAPE_MODULI])
@pytest.mark.parametrize("name", DTYPES)
def test_matmul_shapes(name, pid, p, shape):
    """numpy.matmul's shape rules (1-D, stacks, broadcasting, empty) for every dtype."""
    sa, sb = SHAPES[shape]
    seed = DTYPES.index(name) * 7919 + p % 104729
    A = operand(name, p, sa, seed, specials=1.0)
    B = operand(name, p, sb, seed + 3, specials=1.0)
    C = call(modlin.matmul, A, B, p)
    R = ref_product(A, B)
    int64 = int64_result(p, linalg_fn=False)
    if shape in ("1d-1d", "k0-1d"):
        assert_scalar_mod(C, R, p, int64=int64)
    else:
        assert_equal_mod(C, R, p, int64=int64)


MIXED_MODULI = [(k, ALL_MODULI[k]) for k in ("p52", "p64", "c2e64")]


@pytest.mark.parametrize("pid,p", MIXED_MODULI, ids=[k for k, _ in MIXED_MODULI])
@pytest.mark.parametrize("nb", DTYPES)
@pytest.mark.parametrize("na", DTYPES)
def test_matmul_mixed_dtypes(na, nb, pid, p):
    """A and B of different dtypes (uint64 x int8, float64 x object, ...)."""
    A = operand(na, p, (3, 5), DTYPES.index(na) + 17, specials=1.0)
    B = operand(nb, p, (5, 4), DTYPES.index(nb) + 91, specials=1.0)
    C = call(modlin.matmul, A, B, p)
    assert_equal_mod(C, ref_product(A, B), p, int64=int64_result(p, linalg_fn=False))


@settings(max_examples=25, deadline=None)
@given(na=st.sampled_from(DTYPES), nb=st.sampled_from(DTYPES),
       p=st.sampled_from(list(ALL_MODULI.values())) | st.integers(2, 2**130),
       m=st.integers(0, 4), k=st.integers(0, 6), n=st.integers(0, 4), batch=st.sampled_from([(), (2,)]),
       seed=st.integers(0, 2**32 - 1))
def test_matmul_hypothesis(na, nb, p, m, k, n, batch, seed):
    """Random dtypes, moduli of any size (composite too), shapes and stacks."""
    A = operand(na, p, batch + (m, k), seed)
    B = operand(nb, p, (k, n), seed + 1)
    C = call(modlin.matmul, A, B, p)
    assert_equal_mod(C, ref_product(A, B), p, int64=int64_result(p, linalg_fn=False))


OUT_MODULI = [(k, ALL_MODULI[k]) for k in ("p31", "p52", "p63", "c2e63", "p64", "c2e64", "p127")]


@pytest.mark.parametrize("pid,p", OUT_MODULI, ids=[k for k, _ in OUT_MODULI])
@pytest.mark.parametrize("name", ["int8", "uint64", "float64", "object"])
def test_matmul_out(name, pid, p):
    """``out=`` of the result's dtype, contiguous or a strided view: written in place, returned,
    and nothing outside the view touched."""
    A = operand(name, p, (3, 4), 1, specials=1.0)
    B = operand(name, p, (4, 2), 2, specials=1.0)
    int64 = int64_result(p, linalg_fn=False)
    dt = np.int64 if int64 else object
    R = ref_product(A, B)
    out = np.full((3, 2), 7, dtype=dt)
    assert call(modlin.matmul, A, B, p, out=out) is out
    assert_equal_mod(out, R, p, int64=int64)
    big = np.full((6, 4), 7, dtype=dt)
    view = big[::2, ::-2]
    assert call(modlin.matmul, A, B, p, out=view) is view
    assert_equal_mod(view, R, p, int64=int64)
    assert (big[1::2] == 7).all() and (big[::2, -2::-2] == 7).all()


def test_matmul_object_arrays_of_numpy_integers():
    """Object arrays may hold NumPy integers (int8 ... uint64) beside Python ints."""
    vals = [np.int8(-128), np.uint64(2**64 - 1), np.int64(-(2**63)), 2**100 + 1, -(2**90), np.uint8(255)]
    A = obj_array(vals, (2, 3))
    B = obj_array(vals[::-1], (3, 2))
    for p in (PRIMES["p31"], PRIMES["p52"], PRIMES["p63"], PRIMES["p64"], PRIMES["p127"], 2**64):
        assert_equal_mod(call(modlin.matmul, A, B, p), ref_product(A, B), p, int64=int64_result(p, linalg_fn=False))
        if is_probable_prime(p):
            assert call(linalg.rank, A, p) == rank_mod(rows_of(A), p, 3)
    assert_exact_product(call(modlin.intmul, A, B), A, B)


# ===================================================================== modlin.intmul

def intmul_dtype(A, B) -> bool:
    """Whether intmul's documented result is int64: the bound ``k max|A| max|B| < 2**63``."""
    a, b = exact(A), exact(B)
    k = a.shape[-1] if a.ndim else 1
    amax = max((abs(v) for v in a.ravel().tolist()), default=0)
    bmax = max((abs(v) for v in b.ravel().tolist()), default=0)
    return k * amax * bmax < 2**63


def assert_exact_product(C, A, B) -> None:
    """``C`` is the exact integer product, with the documented dtype."""
    R = ref_product(A, B)
    int64 = intmul_dtype(A, B)
    if not isinstance(R, np.ndarray):  # 1-D @ 1-D
        assert (isinstance(C, np.int64) if int64 else type(C) is int), type(C)
        assert int(C) == R
        return
    assert type(C) is np.ndarray and C.shape == R.shape, (type(C), np.shape(C), R.shape)
    flat = C.ravel().tolist()
    if int64:
        assert C.dtype == np.int64, C.dtype
    else:
        assert C.dtype == object and all(type(v) is int for v in flat), C.dtype
    want = R.ravel().tolist()
    got = [int(v) for v in flat]
    if got != want:
        i = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        raise AssertionError(f"intmul: entry {np.unravel_index(i, R.shape)} is {got[i]}, expected {want[i]}")


@pytest.mark.parametrize("nb", EXACT_DTYPES)
@pytest.mark.parametrize("na", EXACT_DTYPES)
def test_intmul(na, nb):
    """Exact integer products for every pair of integer dtypes (object: beyond 2**64)."""
    p = PRIMES["p64"]  # only shapes the special values ("around p" are just large integers here)
    A = operand(na, p, (4, 6), EXACT_DTYPES.index(na) + 5, specials=1.0)
    B = operand(nb, p, (6, 3), EXACT_DTYPES.index(nb) + 50, specials=1.0)
    assert_exact_product(call(modlin.intmul, A, B), A, B)


@pytest.mark.parametrize("engine", ["fp64", "fp32", "int8"])
@pytest.mark.parametrize("name", EXACT_DTYPES)
def test_intmul_engines(name, engine):
    """Each RNS engine gives the same exact product."""
    A = operand(name, 2**31 - 1, (3, 5), 3, specials=1.0)
    B = operand(name, 2**31 - 1, (5, 2), 4, specials=1.0)
    if engine == "int8" and int8_too_small(A, B):
        # the int8 moduli cover about 2**342: a larger bound is refused, and the message says why
        with Unmodified(A, B), pytest.raises(ValueError, match="int8 moduli"):
            modlin.intmul(A, B, engine=engine)
        A, B = A // 2**130, B // 2**130  # object arrays of ints of up to 70 bits: within int8's reach
    assert_exact_product(call(modlin.intmul, A, B, engine=engine), A, B)


def int8_too_small(A, B) -> bool:
    """Whether ``k max|A| max|B|`` needs more bits than the int8 moduli supply (product ~2**342)."""
    a, b = exact(A), exact(B)
    bound = a.shape[-1] * max(abs(v) for v in a.ravel().tolist()) * max(abs(v) for v in b.ravel().tolist())
    return bound.bit_length() > 330


@pytest.mark.parametrize("lay", ["C", "T", "strided"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("name", EXACT_DTYPES)
def test_intmul_shapes(name, shape, lay):
    """1-D, stacked, broadcast and empty operands, contiguous or not."""
    sa, sb = SHAPES[shape]
    A = layout(operand(name, 2**64 - 59, sa, 11, specials=1.0), lay)
    B = layout(operand(name, 2**64 - 59, sb, 12, specials=1.0), lay)
    assert_exact_product(call(modlin.intmul, A, B), A, B)


@pytest.mark.parametrize("shape", [(2, 2), (0, 2), (2, 0), (3,)])
@pytest.mark.parametrize("side", ["A", "B"])
@pytest.mark.parametrize("fname", ["float32", "float64"])
def test_intmul_refuses_floats(fname, side, shape):
    """Floats are refused with TypeError, even integral, empty or when the other operand is fine."""
    x = np.ones(shape, dtype=fname)
    other = np.ones(shape[::-1] if len(shape) == 2 else shape, dtype=np.int64)
    args = (x, other) if side == "A" else (other, x)
    with Unmodified(*args), pytest.raises(TypeError):
        modlin.intmul(*args)


def test_intmul_refuses_complex():
    with pytest.raises(TypeError):
        modlin.intmul(np.ones((2, 2), complex), np.ones((2, 2), np.int64))


# ===================================================================== modlin.gaussian

G_KINDS = ["complex128", "complex64"] + [f"pair-{d}" for d in DTYPES] + [f"real-{d}" for d in DTYPES]


def g_operand(kind: str, m: int, shape, seed: int):
    """A Gaussian operand: a complex array with integral parts, a ``(re, im)`` pair of
    arrays of one dtype, or a real array (imaginary part zero)."""
    if kind.startswith("complex"):
        part = "float32" if kind == "complex64" else "float64"
        re = operand(part, m, shape, seed, specials=1.0)
        im = operand(part, m, shape, seed + 1, specials=1.0)
        z = np.empty(shape, dtype=kind)
        z.real, z.imag = re, im
        return z
    form, name = kind.split("-", 1)
    re = operand(name, m, shape, seed, specials=1.0)
    if form == "real":
        return re
    return re, operand(name, m, shape, seed + 1, specials=1.0)


def g_exact(X) -> tuple[np.ndarray, np.ndarray]:
    """The exact Gaussian integers ``X`` holds, as object arrays ``(re, im)``."""
    if isinstance(X, tuple):
        return exact(X[0]), exact(X[1])
    x = np.asarray(X)
    if x.dtype.kind == "c":
        return exact(x.real), exact(x.imag)
    e = exact(x)
    return e, obj_array([0] * e.size, e.shape)


def g_product(A, B) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``A @ B`` over Z[i] (object arrays, numpy.matmul shapes)."""
    (ar, ai), (br, bi) = g_exact(A), g_exact(B)
    re = ref_product(ar, br) - ref_product(ai, bi)
    im = ref_product(ar, bi) + ref_product(ai, br)
    return re, im


def g_T(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def assert_gaussian_mod(C, R, m: int, what: str) -> None:
    """``C`` is a pair of int64 arrays in ``[0, m)`` equal to ``R`` reduced mod ``m``."""
    assert isinstance(C, tuple) and len(C) == 2, type(C)
    for c, r, part in zip(C, R, ("real", "imag")):
        assert_equal_mod(c, r, m, int64=True, what=f"{what} ({part} part)")


def g_algorithms(m: int) -> list[str]:
    return ["auto", "2m", "3m", "4m"] if m in G_TWOM.values() else ["auto", "3m", "4m"]


G_MOD_IDS = list(G_MODULI.items())


@pytest.mark.parametrize("mid,m", G_MOD_IDS, ids=[k for k, _ in G_MOD_IDS])
@pytest.mark.parametrize("kind", G_KINDS)
def test_gaussian_matmul(kind, mid, m):
    """Gaussian ``A @ B mod m`` by every algorithm the modulus admits."""
    seed = G_KINDS.index(kind) * 31 + m % 1009
    A = g_operand(kind, m, (4, 5), seed)
    B = g_operand(kind, m, (5, 3), seed + 7)
    R = g_product(A, B)
    for alg in g_algorithms(m):
        assert_gaussian_mod(call(gaussian.matmul, A, B, m, algorithm=alg), R, m, f"matmul {alg}")


G_SHAPE_KINDS = ["complex128", "pair-int64", "pair-uint64", "pair-object", "pair-float64", "real-int8"]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mid,m", [("m31", G_TWOM["m31"]), ("m31q3", G_THREEM["m31q3"])], ids=["m31", "m31q3"])
@pytest.mark.parametrize("kind", G_SHAPE_KINDS)
def test_gaussian_matmul_shapes(kind, mid, m, shape):
    """1-D, stacked, broadcast and empty Gaussian operands, 2M and 3M."""
    sa, sb = SHAPES[shape]
    A = g_operand(kind, m, sa, 5)
    B = g_operand(kind, m, sb, 6)
    re, im = g_product(A, B)
    for alg in g_algorithms(m):
        C = call(gaussian.matmul, A, B, m, algorithm=alg)
        if shape in ("1d-1d", "k0-1d"):
            assert isinstance(C, tuple) and len(C) == 2
            for c, r in zip(C, (re, im)):
                assert_scalar_mod(c, r, m, int64=True)
        else:
            assert_gaussian_mod(C, (re, im), m, f"matmul {alg}")


@pytest.mark.parametrize("lay", ["T", "strided"])
@pytest.mark.parametrize("kind", ["complex128", "pair-int64", "pair-uint64", "pair-object", "real-int32"])
def test_gaussian_matmul_layouts(kind, lay):
    m = G_TWOM["m26"]
    A, B = g_operand(kind, m, (4, 5), 1), g_operand(kind, m, (5, 3), 2)
    R = g_product(A, B)

    def lay_out(X):
        return tuple(layout(x, lay) for x in X) if isinstance(X, tuple) else layout(X, lay)

    A, B = lay_out(A), lay_out(B)
    for alg in g_algorithms(m):
        assert_gaussian_mod(call(gaussian.matmul, A, B, m, algorithm=alg), R, m, f"matmul {alg}")


@pytest.mark.parametrize("kind", G_KINDS)
def test_gaussian_herk(kind):
    """``A A^H mod m``: exact and exactly Hermitian, for a 2M and a 3M modulus of each size."""
    for mid, m in G_MOD_IDS:
        A = g_operand(kind, m, (4, 5), G_KINDS.index(kind) + m % 101)
        ar, ai = g_exact(A)
        R = (ref_product(ar, g_T(ar)) + ref_product(ai, g_T(ai)),
             ref_product(ai, g_T(ar)) - ref_product(ar, g_T(ai)))
        for alg in g_algorithms(m):
            assert_gaussian_mod(call(gaussian.herk, A, m, algorithm=alg), R, m, f"herk {alg} {mid}")


@pytest.mark.parametrize("kind", G_KINDS)
def test_gaussian_syrk(kind):
    """``A A^T mod m``: a ``(re, im)`` pair for Gaussian input, one int64 array for a
    real array (odd k on purpose: the half-width reformulation pads)."""
    for mid, m in G_MOD_IDS:
        A = g_operand(kind, m, (4, 5), G_KINDS.index(kind) + m % 103)
        ar, ai = g_exact(A)
        re = ref_product(ar, g_T(ar)) - ref_product(ai, g_T(ai))
        im = ref_product(ar, g_T(ai)) + ref_product(ai, g_T(ar))
        for alg in g_algorithms(m):
            C = call(gaussian.syrk, A, m, algorithm=alg)
            if kind.startswith("real"):
                assert_equal_mod(C, re, m, int64=True, what=f"syrk {alg} {mid}")
            else:
                assert_gaussian_mod(C, (re, im), m, f"syrk {alg} {mid}")


@pytest.mark.parametrize("kind", G_KINDS)
def test_gaussian_her2k_syr2k(kind):
    """``A B^H + B A^H`` and ``A B^T + B A^T`` mod m (real arrays give one array for syr2k)."""
    for mid, m in (("m26", G_TWOM["m26"]), ("m52", G_TWOM["m52"]), ("m31q3", G_THREEM["m31q3"]),
                   ("m2e51", G_THREEM["m2e51"])):
        A = g_operand(kind, m, (3, 5), G_KINDS.index(kind))
        B = g_operand(kind, m, (3, 5), G_KINDS.index(kind) + 40)
        (ar, ai), (br, bi) = g_exact(A), g_exact(B)
        # A B^H = (ar + i ai)(br^T - i bi^T)
        abh = (ref_product(ar, g_T(br)) + ref_product(ai, g_T(bi)),
               ref_product(ai, g_T(br)) - ref_product(ar, g_T(bi)))
        her = (abh[0] + g_T(abh[0]), abh[1] - g_T(abh[1]))
        abt = (ref_product(ar, g_T(br)) - ref_product(ai, g_T(bi)),
               ref_product(ar, g_T(bi)) + ref_product(ai, g_T(br)))
        sym = (abt[0] + g_T(abt[0]), abt[1] + g_T(abt[1]))
        for alg in g_algorithms(m):
            assert_gaussian_mod(call(gaussian.her2k, A, B, m, algorithm=alg), her, m, f"her2k {alg} {mid}")
            C = call(gaussian.syr2k, A, B, m, algorithm=alg)
            if kind.startswith("real"):
                assert_equal_mod(C, sym[0], m, int64=True, what=f"syr2k {alg} {mid}")
            else:
                assert_gaussian_mod(C, sym, m, f"syr2k {alg} {mid}")


@pytest.mark.parametrize("fn", ["matmul", "herk", "syrk"])
@pytest.mark.parametrize("pid", ["p52", "p53", "p64", "p127"])
def test_gaussian_takes_large_moduli(fn, pid):
    """Gaussian products take every modulus, below ``2**52`` and above (they once refused
    ``m >= 2**52``): the exact Gaussian product reduced modulo ``m``."""
    m = PRIMES[pid]
    A = np.array([[1 + 2j, 3 - 5j]])
    args = (A, A.T, m) if fn == "matmul" else (A, m)
    re, im = getattr(gaussian, fn)(*args)
    parts = [(1, 2), (3, -5)]
    if fn == "herk":  # A @ A^H
        r, i = sum(x * x + y * y for x, y in parts), 0
    else:  # A @ A^T
        r, i = sum(x * x - y * y for x, y in parts), sum(2 * x * y for x, y in parts)
    assert int(re[0, 0]) == r % m and int(im[0, 0]) == i % m, (fn, pid, re, im)
    assert re.dtype == (object if m > 2**63 else np.int64)


def g_intmul_dtype(A, B) -> bool:
    """int64 exactly when ``k (max|Ar| + max|Ai|) (max|Br| + max|Bi|) < 2**63`` (as documented)."""
    (ar, ai), (br, bi) = g_exact(A), g_exact(B)

    def mx(x):
        return max((abs(v) for v in x.ravel().tolist()), default=0)

    k = ar.shape[-1]
    return k * (mx(ar) + mx(ai)) * (mx(br) + mx(bi)) < 2**63


def assert_g_exact(C, A, B) -> None:
    re, im = g_product(A, B)
    int64 = g_intmul_dtype(A, B)
    assert isinstance(C, tuple) and len(C) == 2
    for c, r, part in zip(C, (re, im), ("real", "imag")):
        assert type(c) is np.ndarray and c.shape == r.shape, (type(c), np.shape(c), r.shape)
        if int64:
            assert c.dtype == np.int64, (part, c.dtype)
        else:
            assert c.dtype == object and all(type(v) is int for v in c.ravel().tolist()), (part, c.dtype)
        assert [int(v) for v in c.ravel().tolist()] == r.ravel().tolist(), f"intmul {part} part wrong"


@pytest.mark.parametrize("engine", ["fp64", "int8"])
@pytest.mark.parametrize("kind", G_KINDS)
def test_gaussian_intmul(kind, engine):
    """Exact Gaussian products of every operand kind (floats beyond 2**53, Python ints beyond 2**64)."""
    A = g_operand(kind, 2**64 - 59, (3, 4), G_KINDS.index(kind))
    B = g_operand(kind, 2**64 - 59, (4, 2), G_KINDS.index(kind) + 9)
    (ar, ai), (br, bi) = g_exact(A), g_exact(B)
    if engine == "int8" and int8_too_small(ar + ai, br + bi):
        with Unmodified(A, B), pytest.raises(ValueError, match="fp64"):
            gaussian.intmul(A, B, engine=engine)
        return
    assert_g_exact(call(gaussian.intmul, A, B, engine=engine), A, B)


@pytest.mark.parametrize("shape", ["1x1", "0xk", "kx0", "k0", "stack"])
@pytest.mark.parametrize("kind", ["complex128", "complex64", "pair-int64", "pair-float64", "pair-object",
                                  "real-float64", "real-uint64"])
def test_gaussian_intmul_shapes(kind, shape):
    """Empty and stacked operands are accepted exactly when non-empty ones of that kind are
    (known bug: empty complex operands were refused as floats)."""
    sa, sb = SHAPES[shape]
    A, B = g_operand(kind, 2**31 - 1, sa, 1), g_operand(kind, 2**31 - 1, sb, 2)
    assert_g_exact(call(gaussian.intmul, A, B), A, B)


def test_known_bug_gaussian_intmul_empty_complex():
    """Known bug 3: empty complex operands are refused ("A holds floats")."""
    re, im = gaussian.intmul(np.ones((2, 0), complex), np.ones((0, 3), complex))
    assert re.shape == im.shape == (2, 3) and not re.any() and not im.any()


# ===================================================================== modlin.linalg

LINALG_PRIMES = list(PRIMES.items())
LP_IDS = [k for k, _ in LINALG_PRIMES]


def lp_seed(name, p, salt=0):
    return DTYPES.index(name) * 104729 + p % 7919 + salt


def nonsingular(name, p, n, seed):
    """A square operand that is invertible mod p (by the oracle), from the first seed that works.

    Modulo 2 most large floats are even, so random float matrices are rarely invertible:
    after 50 seeds, the upper triangle is cleared and the diagonal set to 1 (det = 1),
    the rows then permuted, keeping the dtype's values below the diagonal."""
    for s in range(seed, seed + 50):
        A = operand(name, p, (n, n), s)
        if rank_mod(rows_of(A), p, n) == n:
            return A
    e = rows_of(A)
    for i in range(n):
        e[i][i] = 1
        e[i][i + 1:] = [0] * (n - i - 1)
    e = e[::-1]
    A = to_dtype([v for r in e for v in r], name, (n, n))
    assert rank_mod(rows_of(A), p, n) == n
    return A


def li(p):
    return int64_result(p, linalg_fn=True)


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_rank(name, pid, p):
    for shape, build in (((6, 6), "full"), ((5, 7), "deficient"), ((7, 5), "deficient")):
        seed = lp_seed(name, p)
        A = operand(name, p, shape, seed) if build == "full" else deficient(name, p, *shape, seed)
        r = call(linalg.rank, A, p)
        assert type(r) is int
        assert r == rank_mod(rows_of(A), p, shape[1]), (build, shape)


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_det(name, pid, p):
    for A in (operand(name, p, (6, 6), lp_seed(name, p, 1)), deficient(name, p, 5, 5, lp_seed(name, p, 2)),
              operand(name, p, (1, 1), lp_seed(name, p, 3), specials=1.0)):
        d = call(linalg.det, A, p)
        assert type(d) is int and 0 <= d < p
        assert d == det_bareiss(rows_of(A)) % p


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_inv(name, pid, p):
    n = 2 if name == "bool" else 6  # random 0/1 matrices are invertible often enough at n = 2
    A = nonsingular(name, p, n, lp_seed(name, p, 4))
    X = call(linalg.inv, A, p)
    a = rows_of(A)
    want = inverse_mod(a, p)
    assert_equal_mod(X, np.array(want, dtype=object), p, int64=li(p), what="inv")
    prod = mat_mul(a, [list(r) for r in exact(X).tolist()], n)
    assert all((prod[i][j] - (i == j)) % p == 0 for i in range(n) for j in range(n)), "A X != I"
    S = deficient(name, p, 5, 5, lp_seed(name, p, 5))
    if rank_mod(rows_of(S), p, 5) < 5:
        with Unmodified(S), pytest.raises(ValueError, match="singular"):
            linalg.inv(S, p)


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_solve(name, pid, p):
    # square and invertible: X = A**-1 B, unique
    n = 2 if name == "bool" else 5
    A = nonsingular(name, p, n, lp_seed(name, p, 6))
    B = operand(name, p, (n, 3), lp_seed(name, p, 7))
    cases = [(A, B)]
    # rank deficient: B's columns are columns of A (consistent), and a 1-D right-hand side
    D = deficient(name, p, 7, 5, lp_seed(name, p, 8))
    cases += [(D, np.ascontiguousarray(D[:, [0, 2]])), (D, np.ascontiguousarray(D[:, 3]))]
    for A, B in cases:
        X = call(linalg.solve, A, B, p)
        a = rows_of(A)
        b = rows_of(B if B.ndim == 2 else B[:, np.newaxis])
        want = solve_mod(a, b, p, A.shape[1], len(b[0]))
        assert want is not None
        want = np.array(want, dtype=object)
        if B.ndim == 1:
            want = want[:, 0]
        assert_equal_mod(X, want, p, int64=li(p), what=f"solve {A.shape}")
        x = rows_of(X if X.ndim == 2 else X[:, np.newaxis])
        ax = mat_mul(a, x, len(x[0]))
        assert zeros_mod([[u - v for u, v in zip(r, s)] for r, s in zip(ax, b)], p), "A X != B"
    # a right-hand side outside the column space: ValueError, when the oracle says so
    Bad = operand(name, p, (7, 2), lp_seed(name, p, 9))
    if solve_mod(rows_of(D), rows_of(Bad), p, 5, 2) is None:
        with Unmodified(D, Bad), pytest.raises(ValueError, match="no solution"):
            linalg.solve(D, Bad, p)


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_nullspace(name, pid, p):
    for shape in ((5, 7), (7, 5), (6, 6)):
        A = deficient(name, p, *shape, lp_seed(name, p, 10))
        m, n = shape
        a = rows_of(A)
        r = rank_mod(a, p, n)
        N = call(linalg.nullspace, A, p)
        want = nullspace_mod(a, p, n)
        assert_equal_mod(N, np.array(want, dtype=object).reshape(n, n - r), p, int64=li(p), what="nullspace")
        assert zeros_mod(mat_mul(a, [list(x) for x in exact(N).tolist()], n - r), p), "A N != 0"
        assert rank_mod(rows_of(N), p, n - r) == n - r
        K = call(linalg.nullspace, A, p, left=True)
        at = transpose(a, n)
        want_left = transpose(nullspace_mod(at, p, m), m - r)
        assert_equal_mod(K, np.array(want_left, dtype=object).reshape(m - r, m), p, int64=li(p),
                         what="left nullspace")
        assert zeros_mod(mat_mul([list(x) for x in exact(K).tolist()], a, n), p), "K A != 0"


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_rref(name, pid, p):
    for A in (deficient(name, p, 6, 7, lp_seed(name, p, 11)), operand(name, p, (4, 6), lp_seed(name, p, 12))):
        R, piv = call(linalg.rref, A, p)
        want, wpiv = rref_mod(rows_of(A), p, A.shape[1])
        assert_equal_mod(R, np.array(want, dtype=object).reshape(A.shape), p, int64=li(p), what="rref")
        assert type(piv) is np.ndarray and piv.dtype == np.int64 and piv.tolist() == wpiv


def check_pluq(F, A, p) -> None:
    """``F`` is a PLUQ of ``A`` modulo ``p``: its documented form, product and rank profiles."""
    P, L, U, Q, r = F
    m, n = A.shape
    a = rows_of(A)
    rr, piv = rref_mod(a, p, n)
    assert type(r) is int and r == len(piv)
    for perm, size in ((P, m), (Q, n)):
        assert type(perm) is np.ndarray and perm.dtype == np.int64 and sorted(perm.tolist()) == list(range(size))
    lv = check_residues(L, p, int64=li(p), shape=(m, r))
    uv = check_residues(U, p, int64=li(p), shape=(r, n))
    Lr = [lv[i * r:(i + 1) * r] for i in range(m)]
    Ur = [uv[i * n:(i + 1) * n] for i in range(r)]
    for i in range(m):
        for j in range(r):
            if j > i:
                assert Lr[i][j] == 0, "L not lower trapezoidal"
            if j == i:
                assert Lr[i][j] == 1, "L not unit diagonal"
    for i in range(r):
        assert Ur[i][i] != 0, "U has a zero on its diagonal"
        assert all(Ur[i][j] == 0 for j in range(i)), "U not upper trapezoidal"
    Pl, Ql = P.tolist(), Q.tolist()
    permuted = [[a[Pl[i]][Ql[j]] for j in range(n)] for i in range(m)]
    LU = mat_mul(Lr, Ur, n)
    assert zeros_mod([[x - y for x, y in zip(s, t)] for s, t in zip(permuted, LU)], p), "A[P][:, Q] != L U"
    assert sorted(Ql[:r]) == piv, "Q[:rank] is not the column rank profile"
    assert sorted(Pl[:r]) == rref_mod(transpose(a, n), p, m)[1], "P[:rank] is not the row rank profile"
    assert Pl[r:] == sorted(Pl[r:]) and Ql[r:] == sorted(Ql[r:]), "dependent rows/columns not increasing"
    # the rank profile matrix: rank(A[:i, :j]) = #{k < r : P[k] < i and Q[k] < j}
    for i in range(m + 1):
        for j in range(n + 1):
            want = rank_mod([row[:j] for row in a[:i]], p, j)
            assert want == sum(1 for k in range(r) if Pl[k] < i and Ql[k] < j), ("rank profile", i, j)


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_pluq(name, pid, p):
    for A in (deficient(name, p, 6, 7, lp_seed(name, p, 13)), operand(name, p, (5, 4), lp_seed(name, p, 14))):
        check_pluq(call(linalg.pluq, A, p), A, p)


def tri_solve(T, B, p, *, left, lower, unit) -> list[list[int]]:
    """Substitution modulo ``p`` on the named triangle of ``T`` (Python ints)."""
    k = len(T)

    def t(i, j):
        if i == j:
            return 1 if unit else T[i][i]
        inside = j < i if lower else j > i
        return T[i][j] if inside else 0

    if not left:  # X T = B  <=>  T^T X^T = B^T
        Tt = [[t(j, i) for j in range(k)] for i in range(k)]
        Bt = transpose(B, k)
        return transpose(tri_solve(Tt, Bt, p, left=True, lower=not lower, unit=False), len(B))
    w = len(B[0]) if B else 0
    X = [[0] * w for _ in range(k)]
    order = range(k) if lower else range(k - 1, -1, -1)
    for i in order:
        inv = pow(t(i, i) % p, -1, p)
        for c in range(w):
            s = B[i][c] - sum(t(i, j) * X[j][c] for j in range(k) if j != i)
            X[i][c] = s * inv % p
    return X


def unit_diagonal_operand(name, p, k, seed):
    """A ``k x k`` operand (junk in both triangles) whose diagonal entries are units mod p."""
    T = operand(name, p, (k, k), seed)
    e = rows_of(T)
    for i in range(k):
        if math.gcd(e[i][i], p) != 1:
            e[i][i] = 1
    return to_dtype([v for r in e for v in r], name, (k, k))


TRSM_VARIANTS = [(side, lower, unit) for side in ("left", "right") for lower in (True, False) for unit in (False, True)]


def check_trsm(name, p, k=5, w=3, seed=0, int64=None):
    T = unit_diagonal_operand(name, p, k, seed)
    t = rows_of(T)
    if int64 is None:
        int64 = li(p)
    for side, lower, unit in TRSM_VARIANTS:
        shape = (k, w) if side == "left" else (w, k)
        B = operand(name, p, shape, seed + 1)
        X = call(linalg.trsm, T, B, p, side=side, lower=lower, unit_diagonal=unit)
        want = tri_solve(t, rows_of(B), p, left=side == "left", lower=lower, unit=unit)
        assert_equal_mod(X, np.array(want, dtype=object).reshape(shape), p, int64=int64,
                         what=f"trsm side={side} lower={lower} unit={unit}")
    b = operand(name, p, (k,), seed + 2)
    x = call(linalg.trsm, T, b, p)
    want = tri_solve(t, rows_of(b[:, np.newaxis]), p, left=True, lower=True, unit=False)
    assert_equal_mod(x, np.array([r[0] for r in want], dtype=object), p, int64=int64, what="trsm 1-D")


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("name", DTYPES)
def test_trsm(name, pid, p):
    """``T X = B`` / ``X T = B`` on each triangle, unit or not; the other triangle holds junk."""
    check_trsm(name, p, seed=lp_seed(name, p, 15))


TRSM_COMPOSITES = [(k, COMPOSITES[k]) for k in COMPOSITES]


@pytest.mark.parametrize("pid,p", TRSM_COMPOSITES, ids=[k for k, _ in TRSM_COMPOSITES])
@pytest.mark.parametrize("name", DTYPES)
def test_trsm_composite(name, pid, p):
    """trsm takes any p whose diagonal entries are units."""
    check_trsm(name, p, seed=lp_seed(name, p, 16), int64=p < 2**63)


LINALG_FUNCTIONS = ["rank", "det", "inv", "solve", "nullspace", "rref", "pluq", "trsm"]


def run_linalg(fn: str, A, p: int, B=None):
    """One call of a linalg function, checked against the oracle (A square where needed)."""
    a = rows_of(A)
    m, n = A.shape
    if fn == "rank":
        r = call(linalg.rank, A, p)
        assert type(r) is int and r == rank_mod(a, p, n)
    elif fn == "det":
        d = call(linalg.det, A, p)
        assert type(d) is int and d == det_bareiss(a) % p
    elif fn == "inv":
        want = inverse_mod(a, p)
        if want is None:
            with Unmodified(A), pytest.raises(ValueError):
                linalg.inv(A, p)
        else:
            assert_equal_mod(call(linalg.inv, A, p), np.array(want, dtype=object).reshape(n, n), p, int64=li(p))
    elif fn == "solve":
        want = solve_mod(a, rows_of(B), p, n, B.shape[1])
        if want is None:
            with Unmodified(A, B), pytest.raises(ValueError):
                linalg.solve(A, B, p)
        else:
            assert_equal_mod(call(linalg.solve, A, B, p), np.array(want, dtype=object).reshape(n, B.shape[1]),
                             p, int64=li(p))
    elif fn == "nullspace":
        want = np.array(nullspace_mod(a, p, n), dtype=object).reshape(n, n - rank_mod(a, p, n))
        assert_equal_mod(call(linalg.nullspace, A, p), want, p, int64=li(p))
    elif fn == "rref":
        R, piv = call(linalg.rref, A, p)
        want, wpiv = rref_mod(a, p, n)
        assert_equal_mod(R, np.array(want, dtype=object).reshape(m, n), p, int64=li(p))
        assert piv.tolist() == wpiv
    elif fn == "pluq":
        check_pluq(call(linalg.pluq, A, p), A, p)
    elif fn == "trsm":
        if any(math.gcd(a[i][i], p) != 1 for i in range(n)):
            with Unmodified(A, B), pytest.raises(ValueError, match="singular"):
                linalg.trsm(A, B, p)
        else:
            want = tri_solve(a, rows_of(B), p, left=True, lower=True, unit=False)
            assert_equal_mod(call(linalg.trsm, A, B, p), np.array(want, dtype=object).reshape(B.shape),
                             p, int64=li(p))
    else:  # pragma: no cover
        raise AssertionError(fn)


@pytest.mark.parametrize("lay", ["T", "strided"])
@pytest.mark.parametrize("pid,p", [("p31", PRIMES["p31"]), ("p127", PRIMES["p127"])], ids=["p31", "p127"])
@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("fn", LINALG_FUNCTIONS)
def test_linalg_layouts(fn, name, pid, p, lay):
    """Non-contiguous operands (a transposed view, a reversed strided view)."""
    A = nonsingular(name, p, 4, lp_seed(name, p, 17)) if fn in ("inv", "solve", "det", "trsm") else \
        deficient(name, p, 5, 6, lp_seed(name, p, 18))
    B = operand(name, p, (A.shape[0], 2), lp_seed(name, p, 19))
    run_linalg(fn, layout(A, lay), p, layout(B, lay))


BIG_CASES = [("int64", "p31"), ("uint64", "p62"), ("float64", "p52"), ("float64", "p63"),
             ("object", "p64"), ("object", "p127"), ("int8", "p63"), ("float32", "p24")]


@pytest.fixture(params=[False, True], ids=["base", "recursive"])
def thresholds(request, monkeypatch):
    """Recursive: thresholds of 4 rows, so 20 x 20 goes three levels deep in every recursion."""
    if request.param:
        from modlin.linalg import _pluq, _triangular

        for name in ("PLUQ_THRESHOLD", "PLUQ_THRESHOLD_BIG"):
            monkeypatch.setattr(_pluq, name, 4)
        for name in ("TRIANGULAR_THRESHOLD", "TRIANGULAR_THRESHOLD_BIG"):
            monkeypatch.setattr(_triangular, name, 4)
    return request.param


@pytest.mark.parametrize("fn", LINALG_FUNCTIONS)
@pytest.mark.parametrize("name,pid", BIG_CASES, ids=[f"{n}-{p}" for n, p in BIG_CASES])
def test_linalg_20x20(fn, name, pid, thresholds):
    """20 x 20 operands (rank deficient where that is meaningful), with and without the recursion."""
    p = PRIMES[pid]
    if fn in ("inv", "det", "solve", "trsm"):
        A = nonsingular(name, p, 20, lp_seed(name, p, 20)) if fn != "trsm" else \
            unit_diagonal_operand(name, p, 20, lp_seed(name, p, 20))
    else:
        A = deficient(name, p, 20, 18, lp_seed(name, p, 21))
    B = operand(name, p, (20, 3), lp_seed(name, p, 22))
    run_linalg(fn, A, p, B)


# ----------------------------------------------------------------- linalg edge cases

@pytest.mark.parametrize("pid,p", [("p31", PRIMES["p31"]), ("p63", PRIMES["p63"]), ("p127", PRIMES["p127"])],
                         ids=["p31", "p63", "p127"])
@pytest.mark.parametrize("name", ["int64", "uint64", "float64", "object"])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0), (1, 1)])
def test_linalg_small_and_empty(shape, name, pid, p):
    """Empty and 1 x 1 matrices, for every function whose shape rules allow them."""
    A = operand(name, p, shape, 3, specials=1.0)
    m, n = shape
    for fn in ("rank", "nullspace", "rref", "pluq"):
        run_linalg(fn, A, p)
    K = call(linalg.nullspace, A, p, left=True)
    r = rank_mod(rows_of(A), p, n)
    assert K.shape == (m - r, m)
    if m == n:
        B = operand(name, p, (m, 2), 4)
        for fn in ("det", "inv", "solve", "trsm"):
            run_linalg(fn, A, p, B)


@pytest.mark.parametrize("pid,p", LINALG_PRIMES, ids=LP_IDS)
@pytest.mark.parametrize("fn", LINALG_FUNCTIONS)
def test_linalg_refuses_scalars_and_vectors(fn, pid, p):
    """A 0-d or 1-D operand is a ValueError naming the 2-D requirement, for every modulus
    (known bug 2: a 0-d operand with p > 2**64 raised OverflowError)."""
    for x in (np.int64(5), np.array(5), np.array([1, 2, 3])):
        args = (x, x, p) if fn in ("solve", "trsm") else (x, p)
        with pytest.raises(ValueError, match="2-D|square|matrix"):
            getattr(linalg, fn)(*args)


@pytest.mark.parametrize("pid,p", _p_ids(COMPOSITES), ids=list(COMPOSITES))
@pytest.mark.parametrize("fn", ["rank", "det", "inv", "solve", "nullspace", "rref", "pluq"])
def test_linalg_refuses_composite(fn, pid, p):
    A = np.array([[3, 1], [1, 2]])
    args = (A, A, p) if fn == "solve" else (A, p)
    with pytest.raises(ValueError, match="prime"):
        getattr(linalg, fn)(*args)


#: -(2**51) - 0.5 is the largest-magnitude float64 that is not an integer (float32: -(2**22) - 0.5)
BAD_FLOATS = {"nan": np.nan, "inf": -np.inf, "half": 0.5, "frac": -(2.0**51) - 0.5}
REFUSERS = {
    "matmul": lambda A, p: modlin.matmul(A, A, p),
    "rank": linalg.rank, "det": linalg.det, "inv": linalg.inv, "nullspace": linalg.nullspace,
    "rref": linalg.rref, "pluq": linalg.pluq,
    "solve": lambda A, p: linalg.solve(A, A, p), "trsm": lambda A, p: linalg.trsm(A, A, p),
    "gmatmul": lambda A, p: gaussian.matmul(A, A, p), "herk": gaussian.herk, "syrk": gaussian.syrk,
    "gintmul": lambda A, p: gaussian.intmul(A, A),
}


def _refuse_cases():
    """(fn, dtype, modulus id): real functions on real floats at three moduli, Gaussian
    products at one (they take m < 2**52), gaussian.intmul (no modulus) once."""
    out = []
    for fn in REFUSERS:
        gauss = fn in ("gmatmul", "herk", "syrk", "gintmul")
        names = ["float32", "float64"] + (["complex128"] if gauss else [])
        pids = ["none"] if fn == "gintmul" else ["p31"] if gauss else ["p31", "p63", "p127"]
        out += [(fn, name, pid) for name in names for pid in pids]
    return out


@pytest.mark.parametrize("bad", list(BAD_FLOATS))
@pytest.mark.parametrize("fn,name,pid", _refuse_cases(), ids=["-".join(c) for c in _refuse_cases()])
def test_refuses_nan_inf_and_fractions(fn, name, pid, bad):
    """NaN, Inf and non-integral floats are a ValueError everywhere (never silently truncated)."""
    p = PRIMES.get(pid, 0)
    value = -(2.0**22) - 0.5 if name == "float32" and bad == "frac" else BAD_FLOATS[bad]
    part = "float32" if name == "float32" else "float64"
    assert not np.isfinite(value) or np.array(value, dtype=part) != np.trunc(np.array(value, dtype=part))
    re = np.array([[3.0, 1.0], [value, 2.0]])
    if name == "complex128":
        A = np.empty((2, 2), dtype=complex)
        A.real, A.imag = re, re[::-1]  # the bad value in both parts
    else:
        A = re.astype(name)
    with Unmodified(A), pytest.raises(ValueError):
        REFUSERS[fn](A, p)


@pytest.mark.parametrize("fn", ["matmul", "rank", "solve", "trsm"])
def test_real_functions_refuse_complex(fn):
    A = np.array([[1 + 1j, 2], [3, 4]])
    with pytest.raises(TypeError):
        REFUSERS[fn](A, PRIMES["p31"])


def test_known_bug_float_reduction_above_2_53():
    """Known bug 1: floats were reduced modulo float(p), wrong for 2**53 < p < 2**63."""
    assert linalg.rank(np.array([[2.0**62]]), 2**61 - 1) == 1


def test_known_bug_zero_d_big_modulus():
    """Known bug 2: a 0-d operand with p > 2**64 raised OverflowError."""
    with pytest.raises(ValueError, match="must be a 2-D matrix"):
        linalg.rank(np.int64(5), 2**127 - 1)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(DTYPES), p=st.sampled_from(list(PRIMES.values())),
       m=st.integers(1, 6), n=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       fn=st.sampled_from(["rank", "nullspace", "rref", "pluq"]))
def test_linalg_hypothesis(name, p, m, n, seed, fn):
    """Random dtype, prime, shape and (congruence-)rank-deficient structure."""
    A = deficient(name, p, m + 2, n + 1, seed)
    run_linalg(fn, A, p)
