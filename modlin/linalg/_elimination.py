"""The base cases of the recursions: row elimination of a small block, and the inverse
of a small triangular matrix.

int64 blocks (``p < 2**63``) go through single-threaded numba kernels (they
alternate with multithreaded BLAS calls, see :mod:`modlin._arith.modular`); object
blocks (``p > 2**63``) modulo odd ``p < 2**512`` through the multi-limb Montgomery
kernels of :mod:`modlin.linalg._bigmod`, others through NumPy operations on Python
ints, one pivot at a time.
"""

from __future__ import annotations

import numpy as np

from modlin._engines.jit import njit
from modlin.linalg._arith import inverse, is_wide, kernel_montgomery, mulmod, redc
from modlin.linalg._bigmod import eliminate_big, fits, is_limbs, lower_inverse_big, lower_solve_big
from modlin.linalg._steps import advance, elimination_cost, inversion_cost, substitution_cost

__all__ = ["pluq_base", "lower_inverse", "triangular_inverse", "substitutes", "substitute"]


# --------------------------------------------------------------------------- PLUQ of a small block

@njit(inline="always")
def _scaled(lam, p, mont, montg):  # pragma: no cover - compiled
    """The factor of :func:`_submul_by`'s updates by ``lam``: ``lam`` itself, or where ``montg``
    (a wide odd ``p``, ``mont`` its :func:`~modlin.linalg._arith.kernel_montgomery` constants)
    its Montgomery form ``lam R mod p`` (one :func:`~modlin.linalg._arith.redc` by ``R**2``)."""
    return redc(lam, mont[2], p, mont[0]) if montg else lam


@njit(inline="always")
def _mul_by(x, f, p, pinv, wide, mont, montg):  # pragma: no cover - compiled
    """``lam x mod p`` for ``f = _scaled(lam)``: where ``montg``, Montgomery's product of the
    residue ``x`` by the form ``lam R`` is ``lam x mod p`` itself, at less than half the cost of
    :func:`~modlin.linalg._arith.mulmod`'s limb-split product (no form to convert back)."""
    return redc(x, f, p, mont[0]) if montg else mulmod(x, f, p, pinv, wide)


@njit(inline="always")
def _submul_by(c, x, f, p, pinv, wide, mont, montg):  # pragma: no cover - compiled
    """``(c - lam x) mod p`` for ``f = _scaled(lam)`` (see :func:`_mul_by`)."""
    t = c - _mul_by(x, f, p, pinv, wide, mont, montg)
    return t + p * (t < 0)


@njit
def _eliminate(a, p, wide, mont, pivot_rows, cols):  # pragma: no cover - compiled
    """Row-by-row elimination of the C-contiguous block ``a``, in place; returns the rank.

    Rows are taken in order; the pivot of a row is its nonzero entry (after the
    updates by the pivots above it) in the column of least original index, so
    the pivots are the rank profile matrix of ``a``. A pivot's column is swapped
    to position ``r`` (``cols`` tracks the original index at each position), its
    multipliers are stored below it, and the rows below are updated (``mont``:
    :func:`~modlin.linalg._arith.kernel_montgomery`'s constants).
    """
    m, n = a.shape
    pinv = 1.0 / np.float64(p)
    montg = mont[0] != 0  # kernel_montgomery's placeholders (0) where p is narrow or even
    for c in range(n):
        cols[c] = c
    r = 0
    for i in range(m):
        best = -1
        first = n
        for c in range(r, n):
            if a[i, c] != 0 and cols[c] < first:
                best = c
                first = cols[c]
        if best < 0:
            continue
        if best != r:
            for y in range(m):
                a[y, best], a[y, r] = a[y, r], a[y, best]
            cols[best], cols[r] = cols[r], cols[best]
        pivot_rows[r] = i
        inv = inverse(a[i, r], p)
        u = a[i, r + 1:]
        for y in range(i + 1, m):
            lam = a[y, r]
            if lam != 0:
                lam = mulmod(lam, inv, p, pinv, wide)
                a[y, r] = lam
                f = _scaled(lam, p, mont, montg)
                row = a[y, r + 1:]
                for c in range(row.shape[0]):
                    row[c] = _submul_by(row[c], u[c], f, p, pinv, wide, mont, montg)
        r += 1
    return r


def _eliminate_object(a: np.ndarray, p: int, pivot_rows: np.ndarray, cols: np.ndarray) -> int:
    """:func:`_eliminate` on an object array of Python ints (one NumPy update per pivot)."""
    m, n = a.shape
    cols[:] = np.arange(n)
    r = 0
    for i in range(m):
        nz = r + np.flatnonzero(a[i, r:] != 0)
        if nz.size == 0:
            continue
        best = int(nz[np.argmin(cols[nz])])
        if best != r:
            a[:, [r, best]] = a[:, [best, r]]
            cols[[r, best]] = cols[[best, r]]
        pivot_rows[r] = i
        lam = a[i + 1:, r] * pow(int(a[i, r]), -1, p) % p
        a[i + 1:, r] = lam
        a[i + 1:, r + 1:] = (a[i + 1:, r + 1:] - np.outer(lam, a[i, r + 1:])) % p
        r += 1
    return r


def pluq_base(A: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray, int]:
    """PLUQ of a small block, in place: returns ``(P, Q, r)`` and leaves ``A`` in packed form.

    On return ``A`` holds ``A_orig[P][:, Q]``'s factors: ``L`` (unit lower, not
    stored) below the diagonal of its first ``r`` columns, ``U`` on and above the
    diagonal of its first ``r`` rows, zeros in ``A[r:, r:]``. The non-pivot rows
    ``P[r:]`` and columns ``Q[r:]`` are in increasing order, which the recursion
    relies on to reveal the rank profile matrix.
    """
    m, n = A.shape
    a = np.ascontiguousarray(A)
    pivot_rows = np.empty(m, dtype=np.int64)
    cols = np.empty(n, dtype=np.int64)
    if is_limbs(a) or (a.dtype == object and fits(p)):
        r = eliminate_big(a, p, pivot_rows, cols)
    elif a.dtype == object:
        r = _eliminate_object(a, p, pivot_rows, cols)
    else:
        r = int(_eliminate(a, np.int64(p), is_wide(p), kernel_montgomery(p, is_wide(p)), pivot_rows, cols))
    advance(elimination_cost, p, m, n, r, a.dtype != np.int64)
    others = np.ones(m, dtype=bool)
    others[pivot_rows[:r]] = False
    P = np.concatenate([pivot_rows[:r], np.flatnonzero(others)])
    order = np.concatenate([np.arange(r), r + np.argsort(cols[r:], kind="stable")])
    Q = cols[order]
    if a is not A or not (np.array_equal(P, np.arange(m)) and np.array_equal(order, np.arange(n))):
        A[...] = a[np.ix_(P, order)]
    return P, Q, r


# --------------------------------------------------------------------------- triangular inverse

@njit
def _lower_inverse(t, p, wide, mont, unit, x):  # pragma: no cover - compiled
    """``x = t**-1 mod p`` for the lower triangle of ``t`` (its diagonal taken as ones
    when ``unit``): row ``i`` of ``x`` is ``t[i,i]**-1 (e_i - sum_j<i t[i,j] x[j])``
    (``mont``: as for :func:`_eliminate`)."""
    k = t.shape[0]
    pinv = 1.0 / np.float64(p)
    montg = mont[0] != 0  # kernel_montgomery's placeholders (0) where p is narrow or even
    x[:, :] = 0
    for i in range(k):
        row = x[i, :i]
        for j in range(i):
            lam = t[i, j]
            if lam != 0:
                f = _scaled(lam, p, mont, montg)
                xj = x[j, :j + 1]
                for c in range(j + 1):
                    row[c] = _submul_by(row[c], xj[c], f, p, pinv, wide, mont, montg)
        if unit:
            x[i, i] = 1
        else:
            d = inverse(t[i, i], p)
            f = _scaled(d, p, mont, montg)
            for c in range(i):
                row[c] = _mul_by(row[c], f, p, pinv, wide, mont, montg)
            x[i, i] = d


def lower_inverse(T: np.ndarray, p: int, unit: bool) -> np.ndarray:
    """The inverse of the lower triangle of ``T`` modulo ``p`` (a new array).

    The diagonal entries must be units modulo ``p`` (the caller checks); with
    ``unit`` they are taken as ones and not read.
    """
    k = T.shape[0]
    if is_limbs(T) or (T.dtype == object and fits(p)):
        x = lower_inverse_big(T, p, unit)
    elif T.dtype == object:
        x = np.zeros((k, k), dtype=object)
        for i in range(k):
            d = 1 if unit else pow(int(T[i, i]), -1, p)
            x[i, :i] = (-d * (T[i, :i] @ x[:i, :i])) % p if i else x[i, :i]
            x[i, i] = d
    else:
        x = np.empty((k, k), dtype=np.int64)
        _lower_inverse(np.ascontiguousarray(T), np.int64(p), is_wide(p), kernel_montgomery(p, is_wide(p)), unit, x)
    advance(inversion_cost, p, k, T.dtype != np.int64)
    return x


def triangular_inverse(T: np.ndarray, p: int, lower: bool, unit: bool) -> np.ndarray:
    """The inverse of the lower (or upper) triangle of ``T`` modulo ``p``, C-contiguous.

    An upper triangle is a lower one read backwards: ``U**-1 = J (J U J)**-1 J``
    with ``J`` the reversal.
    """
    if lower:
        return lower_inverse(T, p, unit)
    return np.ascontiguousarray(lower_inverse(T[::-1, ::-1], p, unit)[::-1, ::-1])


# --------------------------------------------------------------------------- triangular substitution

def substitutes(p: int, k: int, w: int) -> bool:
    """Whether a ``k x k`` triangle's solve against ``w`` columns (or rows) is done by
    :func:`substitute` rather than by its inverse and a product: for the compiled big-prime
    kernels when ``k**2 w / 2`` updates are at most the inverse's ``k**3 / 6`` (the product,
    with its residue conversions and CRT, comes on top of those)."""
    return fits(p) and 3 * w <= k


def substitute(T: np.ndarray, B: np.ndarray, p: int, *, left: bool, lower: bool, unit: bool) -> None:
    """In place: ``B <- T**-1 B`` (``left``) or ``B <- B T**-1``, for the triangle of the object
    (or limb) matrix ``T`` modulo a :func:`substitutes` ``p``. Every case is a lower left solve: an
    upper triangle read backwards (``J U J`` is lower, ``J`` the reversal), a right solve
    transposed (``B T**-1 = (T**-T B**T)**T``)."""
    k = T.shape[0]
    if not left:  # B T**-1 = (T**T**-1 B**T)**T, and T**T is upper when T is lower
        T, B, lower = T.T, B.T, not lower
    if lower:
        B[...] = lower_solve_big(T, B, p, unit)
    else:
        B[::-1] = lower_solve_big(T[::-1, ::-1], B[::-1], p, unit)
    advance(substitution_cost, p, k, B.shape[1])

