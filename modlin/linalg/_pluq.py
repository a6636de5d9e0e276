"""Block-recursive PLUQ decomposition modulo a prime, revealing the rank profile matrix.

The recursion is the one of FFPACK (Dumas, Pernet and Sultan): split ``A`` in
four blocks, factor the top-left one, and recurse on the Schur complements
that remain, every update being a triangular solve or a product, so that all
but ``O(n * PLUQ_THRESHOLD**2)`` of the work goes through :func:`modlin.matmul`.
It works in place on one working copy of ``A``; permutations are index
arrays, applied only to the rows and columns that move.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from modlin._runtime.calibration import PLUQ_THRESHOLD, PLUQ_THRESHOLD_BIG
from modlin.linalg._arith import INT64_LIMIT, independent, mul_cost, mulsub, parity
from modlin.linalg._bigmod import limb_working, plain, values_dtype
from modlin.linalg._elimination import pluq_base
from modlin.linalg._inputs import as_field, map_matrices, prepare, stack_count
from modlin.linalg._steps import elimination_cost, tracked
from modlin.linalg._triangular import solve_triangular_inplace, trsm_cost
from modlin.typing import ArrayLike

__all__ = ["PLUQ", "pluq", "rank", "det", "pluq_inplace", "pluq_cost", "is_identity", "PLUQ_THRESHOLD", "PLUQ_THRESHOLD_BIG"]


class PLUQ(NamedTuple):
    """The result of :func:`pluq`: ``A[P][:, Q] == L @ U (mod p)``."""

    #: Row permutation, an int64 index array (a permutation of ``range(m)``).
    P: np.ndarray
    #: ``m x rank``, unit lower trapezoidal.
    L: np.ndarray
    #: ``rank x n``, upper trapezoidal with a nonzero diagonal.
    U: np.ndarray
    #: Column permutation, an int64 index array (a permutation of ``range(n)``).
    Q: np.ndarray
    #: The rank of ``A`` modulo ``p``.
    rank: int


def _moved(perm: np.ndarray) -> tuple[int, int]:
    """The smallest range ``[lo, hi)`` outside which ``perm`` is the identity (empty: ``(0, 0)``)."""
    moved = np.flatnonzero(perm != np.arange(perm.size))
    return (int(moved[0]), int(moved[-1]) + 1) if moved.size else (0, 0)


def is_identity(perm: np.ndarray) -> bool:
    """Whether the index array ``perm`` leaves every position in place."""
    return _moved(perm)[1] == 0


def permute_rows(X: np.ndarray, perm: np.ndarray) -> None:
    """In place: ``X <- X[perm]``, copying only the rows that move."""
    lo, hi = _moved(perm)
    if hi > lo and X.shape[1]:
        X[lo:hi] = X[perm[lo:hi]]


def permute_cols(X: np.ndarray, perm: np.ndarray) -> None:
    """In place: ``X <- X[:, perm]``, copying only the columns that move."""
    lo, hi = _moved(perm)
    if hi > lo and X.shape[0]:
        X[:, lo:hi] = X[:, perm[lo:hi]]


def pluq_inplace(A: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray, int]:
    """PLUQ of the residue block ``A`` (a view of a working copy), in place.

    Returns ``(P, Q, r)`` and leaves ``A`` in packed form, as
    :func:`modlin.linalg._elimination.pluq_base` describes: ``L`` below the
    diagonal of ``A[:, :r]``, ``U`` on and above it in ``A[:r]``, zeros in
    ``A[r:, r:]``. The pivots ``(P[k], Q[k])``, ``k < r``, are the rank profile
    matrix of ``A``, and ``P[r:]``, ``Q[r:]`` are increasing.

    With ``A = [[A1, A2], [A3, A4]]`` (``A1`` of ``m1 x n1``), after
    ``A1 = P1 [L1; M1] [U1 V1] Q1`` of rank ``r1`` and the solves ``D = L1**-1 B1``,
    ``E = C1 U1**-1`` (``B``, ``C``: the rows of ``A2`` and columns of ``A3``
    permuted alike), three Schur complements remain: ``F = B2 - M1 D`` (right of
    ``A1``'s dependent rows), ``G = C2 - E V1`` (below its dependent columns) and
    ``H = A4 - E D``. ``F`` and ``G`` are factored (ranks ``r2``, ``r3``), their
    pivots eliminated from ``H``, and what is left of ``H`` is factored last
    (rank ``r4``). The pivots are then gathered in the order ``A1, F, G, H`` and
    the dependent rows and columns moved after them, keeping their order.
    """
    m, n = A.shape
    if m == 0 or n == 0:
        return np.arange(m), np.arange(n), 0
    t = PLUQ_THRESHOLD if p < INT64_LIMIT else PLUQ_THRESHOLD_BIG
    if m <= t and n <= t:
        return pluq_base(A, p)
    m1 = m // 2 if m > t else m
    n1 = n // 2 if n > t else n

    P1, Q1, r1 = pluq_inplace(A[:m1, :n1], p)
    permute_rows(A[:m1, n1:], P1)
    permute_cols(A[m1:, :n1], Q1)
    if r1:
        L1U1 = A[:r1, :r1]
        D, E = A[:r1, n1:], A[m1:, :r1]
        independent(A, trsm_cost(p, r1, n - n1) + trsm_cost(p, r1, m - m1, left=False),
                    lambda: solve_triangular_inplace(L1U1, D, p, left=True, lower=True, unit=True),
                    lambda: solve_triangular_inplace(L1U1, E, p, left=False, lower=False, unit=False))
        independent(A, mul_cost(p, m1 - r1, r1, n - n1) + mul_cost(p, m - m1, r1, n1 - r1),
                    lambda: mulsub(A[r1:m1, n1:], A[r1:m1, :r1], D, p),   # F = B2 - M1 D
                    lambda: mulsub(A[m1:, r1:n1], E, A[:r1, r1:n1], p))   # G = C2 - E V1
        mulsub(A[m1:, n1:], E, D, p)                 # H = A4 - E D

    P2, Q2, r2 = pluq_inplace(A[r1:m1, n1:], p)
    permute_rows(A[r1:m1, :r1], P2)
    permute_cols(A[:r1, n1:], Q2)
    permute_cols(A[m1:, n1:], Q2)
    P3, Q3, r3 = pluq_inplace(A[m1:, r1:n1], p)
    permute_rows(A[m1:, :r1], P3)
    permute_rows(A[m1:, n1:], P3)
    permute_cols(A[:r1, r1:n1], Q3)

    if r2:  # eliminate F's pivots from H: [X; K] = H[:, :r2] U2**-1, then H[:, r2:] -= [X; K] V2
        XK = A[m1:, n1:n1 + r2]
        solve_triangular_inplace(A[r1:r1 + r2, n1:n1 + r2], XK, p, left=False, lower=False, unit=False)
        mulsub(A[m1:, n1 + r2:], XK, A[r1:r1 + r2, n1 + r2:], p)
    if r3:  # and G's: O3 = L3**-1 H2, then R = H4 - M3 O3
        O3 = A[m1:m1 + r3, n1 + r2:]
        solve_triangular_inplace(A[m1:m1 + r3, r1:r1 + r3], O3, p, left=True, lower=True, unit=True)
        mulsub(A[m1 + r3:, n1 + r2:], A[m1 + r3:, r1:r1 + r3], O3, p)
    P4, Q4, r4 = pluq_inplace(A[m1 + r3:, n1 + r2:], p)
    permute_rows(A[m1 + r3:, :n1 + r2], P4)
    permute_cols(A[:m1 + r3, n1 + r2:], Q4)

    rows = np.concatenate([P1, np.arange(m1, m)])
    rows[r1:m1] = rows[r1:m1][P2]
    rows[m1:] = rows[m1:][P3]
    rows[m1 + r3:] = rows[m1 + r3:][P4]
    cols = np.concatenate([Q1, np.arange(n1, n)])
    cols[n1:] = cols[n1:][Q2]
    cols[r1:n1] = cols[r1:n1][Q3]
    cols[n1 + r2:] = cols[n1 + r2:][Q4]
    ar = np.arange
    row_order = np.concatenate([ar(r1 + r2), ar(m1, m1 + r3 + r4), ar(r1 + r2, m1), ar(m1 + r3 + r4, m)])
    col_order = np.concatenate([ar(r1), ar(n1, n1 + r2), ar(r1, r1 + r3), ar(n1 + r2, n1 + r2 + r4),
                                ar(r1 + r3, n1), ar(n1 + r2 + r4, n)])
    permute_rows(A, row_order)
    permute_cols(A, col_order)
    return rows[row_order], cols[col_order], r1 + r2 + r3 + r4


def pluq_cost(p: int, m: int, n: int) -> float:
    """Modelled cost of :func:`pluq_inplace` on an ``m x n`` matrix of generic rank profile
    (every block of full rank): the same recursion, its products, triangular solves and
    base cases priced (:mod:`modlin.linalg._steps`). About the cost of ``n**3 / 3``
    multiply-adds in products for a square matrix."""
    if m == 0 or n == 0:
        return 0.0
    t = PLUQ_THRESHOLD if p < INT64_LIMIT else PLUQ_THRESHOLD_BIG
    if m <= t and n <= t:
        return elimination_cost(p, m, n, min(m, n), p >= INT64_LIMIT)
    m1 = m // 2 if m > t else m
    n1 = n // 2 if n > t else n
    r1 = min(m1, n1)
    r2, r3 = min(m1 - r1, n - n1), min(m - m1, n1 - r1)  # F and G: what A1's rank leaves
    cost = pluq_cost(p, m1, n1) + pluq_cost(p, m1 - r1, n - n1) + pluq_cost(p, m - m1, n1 - r1)
    if r1:  # D, E, and the Schur complements F, G, H
        cost += trsm_cost(p, r1, n - n1) + trsm_cost(p, r1, m - m1, left=False)
        cost += mul_cost(p, m1 - r1, r1, n - n1) + mul_cost(p, m - m1, r1, n1 - r1) + mul_cost(p, m - m1, r1, n - n1)
    if r2:
        cost += trsm_cost(p, r2, m - m1, left=False) + mul_cost(p, m - m1, r2, n - n1 - r2)
    if r3:
        cost += trsm_cost(p, r3, n - n1 - r2) + mul_cost(p, m - m1 - r3, r3, n - n1 - r2)
    return cost + pluq_cost(p, m - m1 - r3, n - n1 - r2)


def _factors(W: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """``(L, U)`` unpacked from the packed form of :func:`pluq_inplace`."""
    L = np.tril(W[:, :r], -1)
    L[np.arange(r), np.arange(r)] = 1
    return L, np.triu(W[:r])


def pluq(A: ArrayLike, p: int | None = None) -> PLUQ:
    """PLUQ decomposition modulo a prime ``p``, revealing the rank profiles.

    Parameters
    ----------
    A : array_like, shape (m, n)
        Integer matrix (any integers, reduced modulo ``p``; integral floats,
        object arrays of Python ints, a galois ``FieldArray`` or a
        python-flint ``nmod_mat``, ``fmpz_mod_mat`` or ``fmpz_mat``).
    p : int, optional
        A prime modulus, of any size. May be omitted when ``A`` is a
        ``FieldArray``, ``nmod_mat`` or ``fmpz_mod_mat`` (whose modulus must
        then be prime).

    Returns
    -------
    PLUQ
        A named tuple ``(P, L, U, Q, rank)`` with ``A[P][:, Q] == L @ U``
        modulo ``p``, that is ``A = Pm @ L @ U @ Qm`` for the permutation
        matrices ``Pm = I_m[:, P]`` and ``Qm = I_n[Q]``:

        - ``P``, ``Q``: int64 index arrays, permutations of ``range(m)`` and
          ``range(n)``;
        - ``L``: ``m x rank``, unit lower trapezoidal;
        - ``U``: ``rank x n``, upper trapezoidal with nonzero diagonal;
        - ``rank``: the rank of ``A`` modulo ``p``, an int.

        ``L`` and ``U`` hold residues in ``[0, p)`` (int64 for ``p < 2**63``,
        Python ints above, FieldArrays for a ``FieldArray`` input, the
        input's python-flint type for a flint matrix).

        The pivots reveal the **rank profile matrix** of ``A``: for every
        ``i, j``, the rank of ``A[:i, :j]`` is the number of ``k < rank`` with
        ``P[k] < i`` and ``Q[k] < j``. In particular ``sorted(Q[:rank])`` is
        the column rank profile (the pivot columns of :func:`rref`) and
        ``sorted(P[:rank])`` the row rank profile. The dependent rows
        ``P[rank:]`` and columns ``Q[rank:]`` are in increasing order.

    Raises
    ------
    ValueError
        ``A`` not 2-D, ``p`` not prime, or the input errors of
        :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    The algorithm is FFPACK's block-recursive PLUQ (Dumas, Pernet and Sultan,
    2013): ``A`` is cut into four blocks, the top-left one is factored
    recursively, the others are updated by triangular solves (:func:`trsm`)
    and products, and three more recursive calls factor what remains. Blocks
    of at most ``PLUQ_THRESHOLD`` rows and columns (128; 64 beyond 64-bit ``p``) are eliminated row by row
    by a compiled kernel, choosing in each row the nonzero entry of least
    column index. For an ``n x n`` matrix of full rank the work is
    ``n**3 / 3`` multiply-adds, nearly all inside :func:`modlin.matmul`.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> A = np.array([[0, 2, 4], [1, 1, 1], [1, 3, 5]])
    >>> P, L, U, Q, r = linalg.pluq(A, 7)
    >>> r
    2
    >>> P, Q
    (array([0, 1, 2]), array([1, 0, 2]))
    >>> L
    array([[1, 0],
           [4, 1],
           [5, 1]])
    >>> U
    array([[2, 0, 4],
           [0, 1, 6]])
    >>> bool(np.array_equal(A[P][:, Q] % 7, (L @ U) % 7))
    True
    >>> import flint
    >>> F = flint.nmod_mat(A.tolist(), 7)
    >>> f = linalg.pluq(F)  # L and U are nmod_mat
    >>> f.L * f.U == flint.nmod_mat([[int(F[i, j]) for j in f.Q] for i in f.P], 7)
    True
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="pluq", shapes=("matrix",), limbs=True)
    with tracked("pluq", p, 1, lambda: pluq_cost(p, *W.shape)):
        P, Q, r = pluq_inplace(W, p)
    L, U = _factors(plain(W), r)
    return PLUQ(P, as_field(L, field), as_field(U, field), Q, r)


def rank(A: ArrayLike, p: int | None = None) -> int:
    """Rank of a matrix modulo a prime ``p``.

    Parameters
    ----------
    A : array_like, shape (..., m, n)
        Integer matrix or a stack of them, a galois ``FieldArray`` or a
        python-flint matrix (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    p : int, optional
        A prime modulus, of any size; may be omitted for a ``FieldArray``,
        ``nmod_mat`` or ``fmpz_mod_mat``.
        Omitted for integer or rational input (NumPy integers, object arrays
        of Python ints or ``fractions.Fraction``, ``fmpz_mat``, ``fmpq_mat``),
        the result is exact over the rationals (certified) (:doc:`/guide/integers`).

    Returns
    -------
    int or ndarray of int64
        The rank of ``A`` over ``GF(p)``; for a stack, an array of the ranks
        of its matrices, of the leading shape.

    Raises
    ------
    LinAlgError
        ``A`` of fewer than 2 dimensions (a ``ValueError`` too).
    ValueError
        ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    One :func:`pluq` without assembling its factors.

    Examples
    --------
    >>> from modlin import linalg
    >>> linalg.rank([[1, 2], [2, 4]], 7), linalg.rank([[1, 2], [3, 4]], 7)
    (1, 2)
    >>> linalg.rank([[1, 2], [3, 4]], 2)  # det = -2 = 0 mod 2
    1
    >>> linalg.rank([[1, 2], [3, 4]])  # over the rationals
    2
    >>> import flint
    >>> linalg.rank(flint.nmod_mat([[1, 2], [2, 4]], 7))  # p from the nmod_mat
    1
    """
    p, _, (W,) = prepare(p, A, names=("A",), fn="rank", shapes=("matrix",), stack=True, limbs=True)
    with tracked("rank", p, stack_count(W), lambda: pluq_cost(p, *W.shape[-2:])):
        r = map_matrices(lambda w: pluq_inplace(limb_working(w, p), p)[2], [W], (2,), (), np.int64)
    return int(r) if r.ndim == 0 else r


def det(A: ArrayLike, p: int | None = None) -> int | np.ndarray:
    """Determinant of a square matrix modulo a prime ``p``.

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Square integer matrix or a stack of them, a galois ``FieldArray`` or
        a python-flint matrix (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    p : int, optional
        A prime modulus, of any size; may be omitted for a ``FieldArray``,
        ``nmod_mat`` or ``fmpz_mod_mat``.
        Omitted for integer or rational input (NumPy integers, object arrays
        of Python ints or ``fractions.Fraction``, ``fmpz_mat``, ``fmpq_mat``),
        the result is exact over the integers or rationals (:doc:`/guide/integers`).

    Returns
    -------
    int, ndarray, FieldArray, nmod or fmpz_mod
        ``det(A) mod p`` in ``[0, p)`` as a Python int; a 0-d ``FieldArray``
        for a ``FieldArray`` input, and for an ``nmod_mat`` or
        ``fmpz_mod_mat`` the python-flint scalar of its ring (``nmod``,
        ``fmpz_mod``), as python-flint's own ``det`` returns (a Python int
        for an ``fmpz_mat``). The determinant of a ``0 x 0`` matrix is 1.
        For a stack, an array of the leading shape (int64 below ``2**63``,
        Python ints above, or a ``FieldArray``).
        Over the integers (no modulus): ``det(A)`` exactly, a Python int
        (``fmpz`` for an ``fmpz_mat``; ``Fraction`` / ``fmpq`` for rational
        input; an object array for a stack), certified.

    Raises
    ------
    LinAlgError
        ``A`` not square (a ``ValueError`` too).
    ValueError
        ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    From :func:`pluq`: ``det(A) = sign(P) sign(Q) prod(diag(U))``, and 0 when
    the rank is below ``n``.

    Examples
    --------
    >>> from modlin import linalg
    >>> linalg.det([[1, 2], [3, 4]], 7)  # -2 mod 7
    5
    >>> linalg.det([[1, 2], [2, 4]], 7)
    0
    >>> import flint
    >>> d = linalg.det(flint.nmod_mat([[1, 2], [3, 4]], 7))
    >>> d, type(d).__name__
    (5, 'nmod')
    >>> linalg.det([[[1, 2], [3, 4]], [[2, 0], [0, 3]]], 7)  # a stack
    array([5, 6])
    >>> linalg.det([[1, 2], [3, 4]])  # no modulus: over the integers
    -2
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="det", shapes=("square",), stack=True, limbs=True)
    with tracked("det", p, stack_count(W), lambda: pluq_cost(p, *W.shape[-2:])):
        d = map_matrices(lambda w: _det(w, p), [W], (2,), (), values_dtype(W))
    d = d.item() if d.ndim == 0 else d
    return d if field is None else field(d)


def _det(W: np.ndarray, p: int) -> int:
    """The determinant of one working matrix (overwritten)."""
    n = W.shape[0]
    W = limb_working(W, p)
    P, Q, r = pluq_inplace(W, p)
    if r < n:
        return 0
    d = 1
    for x in plain(np.diagonal(W)).tolist():
        d = d * x % p
    return (p - d) % p if parity(P) != parity(Q) else d
