"""What a PLUQ decomposition gives: inverses, solutions, kernels and echelon forms mod p.

Each function factors one working copy with :func:`~modlin.linalg._pluq.pluq_inplace`
(``A[P][:, Q] = L U``, ``L = [L1; L2]``, ``U = [U1 U2]`` with ``L1``, ``U1`` of
``r x r``) and finishes with triangular solves and products on its blocks.
"""

from __future__ import annotations

import numpy as np

from modlin.linalg._arith import mul_cost, mulsub, negate, nonzero, parity
from modlin.linalg._bigmod import limb_working, plain, values_dtype
from modlin.linalg._inputs import LinAlgError, as_field, map_matrices, prepare, stack_count
from modlin.linalg._pluq import is_identity, pluq_cost, pluq_inplace
from modlin.linalg._steps import tracked
from modlin.linalg._triangular import invert_cost, invert_triangular, solve_triangular_inplace, trsm_cost
from modlin.typing import ArrayLike

__all__ = ["inv", "solve", "nullspace", "rref", "inverse", "eliminate_factored", "solve_factored", "inverse_cost",
           "solve_cost"]


def inv(A: ArrayLike, p: int | None = None) -> np.ndarray:
    """Inverse of a square matrix modulo a prime ``p``.

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
        the result is exact over the rationals (:doc:`/guide/integers`).

    Returns
    -------
    ndarray, shape (..., n, n)
        ``A**-1 mod p`` with entries in ``[0, p)``: int64 for ``p < 2**63``,
        Python ints above, a ``FieldArray`` for a ``FieldArray`` input, the
        input's python-flint type for a flint matrix.
        Over the rationals (no modulus): a :class:`RationalArray`
        ``(numerator, denominator)``, an ``fmpq_mat`` for python-flint input,
        an object array of ``Fraction`` for ``Fraction`` input.

    Raises
    ------
    LinAlgError
        ``A`` singular modulo ``p`` (the message gives its rank, and its index
        in a stack) or not square; a subclass of ``numpy.linalg.LinAlgError``
        and so of ``ValueError``.
    ValueError
        ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    ``A[P][:, Q] = L U`` by :func:`pluq`, then ``A**-1 = Qm U**-1 L**-1 Pm``:
    ``L`` is inverted (``n**3 / 6`` multiply-adds) and ``U`` solved on the
    result (``n**3 / 2``). With the ``n**3 / 3`` of the decomposition, that is
    ``n**3`` multiply-adds, as many as one product of the same size.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> A = np.array([[1, 2], [3, 4]])
    >>> X = linalg.inv(A, 7)
    >>> X
    array([[5, 1],
           [5, 3]])
    >>> (A @ X) % 7
    array([[1, 0],
           [0, 1]])
    >>> import flint
    >>> F = flint.nmod_mat([[1, 2], [3, 4]], 7)
    >>> linalg.inv(F) == F.inv()
    True
    >>> linalg.inv([[2, 1], [1, 1]])  # over the rationals
    RationalArray(numerator=array([[ 1, -1],
           [-1,  2]]), denominator=1)
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="inv", shapes=("square",), stack=True, limbs=True)
    n = W.shape[-1]
    with tracked("inv", p, stack_count(W), lambda: inverse_cost(p, n)):
        return as_field(map_matrices(lambda w: inverse(w, p), [W], (2,), (n, n), values_dtype(W)), field)


def inverse_cost(p: int, n: int) -> float:
    """Modelled cost of :func:`inverse` of an ``n x n`` matrix: its PLUQ, ``L``'s inverse and
    the solve by ``U`` (:mod:`modlin.linalg._steps`)."""
    return pluq_cost(p, n, n) + invert_cost(p, n) + trsm_cost(p, n, n)


def inverse(W: np.ndarray, p: int, fn: str = "inv", why: str = "") -> np.ndarray:
    """The inverse of one working matrix (overwritten), or LinAlgError when it is singular.

    The message names ``fn``, the function the user called (``matrix_power`` inverts
    for a negative power: naming ``inv`` there would send them looking for a call they
    never made), and starts with ``why``, what needed the inverse."""
    return inverse_and_det(W, p, fn, why)[0]


def inverse_and_det(W: np.ndarray, p: int, fn: str = "inv", why: str = "") -> tuple[np.ndarray, int]:
    """:func:`inverse`, and the determinant modulo ``p`` that its PLUQ gives on the way."""
    n = W.shape[0]
    W = limb_working(W, p)
    P, Q, r = pluq_inplace(W, p)
    if r < n:
        raise LinAlgError(f"{fn}: {why}the matrix is singular modulo {p}: its rank is {r}, not {n}")
    det = 1
    for x in plain(np.diagonal(W)).tolist():
        det = det * x % p
    if parity(P) != parity(Q):
        det = (p - det) % p
    # M = A[P][:, Q] = L U has M**-1 = U**-1 L**-1, and A**-1[i, j] = M**-1[Qinv[i], Pinv[j]]
    X = invert_triangular(W, p, lower=True, unit=True)
    solve_triangular_inplace(W, X, p, left=True, lower=False, unit=False)
    if not (is_identity(P) and is_identity(Q)):
        X = X[np.ix_(np.argsort(Q), np.argsort(P))]
    return plain(X), det


def solve(A: ArrayLike, B: ArrayLike, p: int | None = None) -> np.ndarray:
    """Solve ``A @ X = B`` modulo a prime ``p``, for any shape and rank of ``A``.

    Parameters
    ----------
    A : array_like, shape (..., m, n)
        Integer matrix or a stack of them, a galois ``FieldArray`` or a
        python-flint matrix (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    B : array_like, shape (..., m, k) or (m,)
        Right-hand side(s). As in NumPy 2's ``numpy.linalg.solve``, only a
        1-D ``B`` is a vector (the same one for every matrix of a stack);
        otherwise the leading dimensions of ``A`` and ``B`` broadcast.
    p : int, optional
        A prime modulus, of any size; may be omitted when ``A`` or ``B`` is a
        ``FieldArray``, ``nmod_mat`` or ``fmpz_mod_mat``.
        Omitted for integer or rational input (NumPy integers, object arrays
        of Python ints or ``fractions.Fraction``, ``fmpz_mat``, ``fmpq_mat``),
        ``A`` must be square and
        nonsingular, and the solution is exact over the rationals (:doc:`/guide/integers`).

    Returns
    -------
    ndarray, shape (..., n, k) or (..., n)
        A solution ``X`` with entries in ``[0, p)`` (int64 for ``p < 2**63``,
        Python ints above, a ``FieldArray`` for ``FieldArray`` inputs, the
        python-flint type of flint inputs: a 1-D ``B`` then gives an
        ``n x 1`` matrix). When
        ``A`` has dependent columns the solutions form an affine space; the one
        returned is zero at every non-pivot column of ``A`` (the free variables
        of its reduced row echelon form, see :func:`rref`), so it is unique
        and the same for every call. Add any combination of
        ``nullspace(A, p)``'s columns to get the others.
        Over the rationals (no modulus): the unique solution as a
        :class:`RationalArray` ``(numerator, denominator)`` with the least
        common denominator (an ``fmpq_mat`` for python-flint input, an object
        array of ``Fraction`` for ``Fraction`` input); singular ``A`` raises.

    Raises
    ------
    LinAlgError
        No solution exists (the message names the first column of ``B``
        outside the column space of ``A``, and the rank of ``A``); ``A`` not
        2-D; ``B`` not of ``m`` rows. A subclass of
        ``numpy.linalg.LinAlgError`` and so of ``ValueError``.
    ValueError
        ``p`` not prime; the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    With ``A[P][:, Q] = L U`` (:func:`pluq`): ``Z = L1**-1 B[P][:r]``, the
    system is consistent when ``B[P][r:] = L2 Z``, and ``X[Q[:r]] = U1**-1 Z``
    while ``X[Q[r:]] = 0``. Since ``Q[:r]`` are the pivot columns, this is the
    solution whose free variables are zero.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> A = np.array([[1, 2, 3], [2, 4, 7]])
    >>> x = linalg.solve(A, [1, 3], 11)
    >>> x
    array([9, 0, 1])
    >>> (A @ x) % 11
    array([1, 3])
    >>> linalg.solve([[1, 2], [2, 4]], [1, 3], 11)
    Traceback (most recent call last):
    ...
    modlin.linalg.LinAlgError: solve: A @ X = B has no solution modulo 11: column 0 of B is not in the column space of A (rank 1)
    >>> import flint
    >>> F = flint.nmod_mat([[1, 2], [3, 4]], 11)
    >>> X = linalg.solve(F, flint.nmod_mat([[1], [3]], 11))  # an nmod_mat, as F.solve gives
    >>> F * X == flint.nmod_mat([[1], [3]], 11)
    True
    >>> linalg.solve([[2, 1], [1, 3]], [1, 0])  # over the rationals: X = [3, -1] / 5
    RationalArray(numerator=array([ 3, -1]), denominator=5)
    """
    p, field, (W, Bw) = prepare(p, A, B, names=("A", "B"), fn="solve", shapes=("matrix",), stack=True, limbs=True)
    m, n = W.shape[-2:]
    vector = Bw.ndim == 1  # numpy >= 2: only a 1-D B is a vector; (..., m, k) is a stack of matrices
    rows = Bw.shape[0] if vector else (Bw.shape[-2] if Bw.ndim >= 2 else None)
    if rows != m:
        raise LinAlgError(f"solve: A has shape {W.shape}, so B must have {m} rows (shape ({m},) or (..., {m}, k)); "
                          f"got B of shape {np.shape(B)}")
    cores = (2, 1) if vector else (2, 2)
    k = 1 if vector else Bw.shape[-1]
    with tracked("solve", p, stack_count(W, Bw, cores=cores), lambda: solve_cost(p, m, n, k)):
        if vector:
            X = map_matrices(lambda w, b: _solve(w, b[:, np.newaxis], p)[:, 0], [W, Bw], cores, (n,), values_dtype(W))
        else:
            X = map_matrices(lambda w, b: _solve(w, b, p), [W, Bw], cores, (n, Bw.shape[-1]), values_dtype(W))
    return as_field(X, field)


def solve_cost(p: int, m: int, n: int, k: int) -> float:
    """Modelled cost of :func:`_solve` of an ``m x n`` system (of generic rank) with ``k``
    right-hand sides: the PLUQ, the two triangular solves and the consistency check's product."""
    r = min(m, n)
    return pluq_cost(p, m, n) + 2 * trsm_cost(p, r, k) + mul_cost(p, m - r, r, k)


def _solve(W: np.ndarray, B: np.ndarray, p: int) -> np.ndarray:
    """The solution of one system ``W X = B`` (working matrices, ``W`` overwritten) whose free
    variables are zero, or LinAlgError when there is none."""
    W, B = limb_working(W, p), limb_working(B, p)
    P, Q, r = pluq_inplace(W, p)
    return plain(solve_factored(W, P, Q, r, B, p))


def eliminate_factored(W: np.ndarray, P: np.ndarray, r: int, B: np.ndarray, p: int) -> np.ndarray:
    """``Z = L**-1 B[P]`` from the packed PLUQ ``(W, P, Q, r)`` of ``A`` (a new array; ``B`` is not
    modified): ``Z[:r]`` feeds the back substitution and ``Z[r:]``, zero exactly where ``B`` is in
    the column space of ``A``, is the Schur complement ``B[P[r:]] - A[P[r:], Q[:r]] A[P[:r], Q[:r]]**-1 B[P[:r]]``."""
    Z = B[P]
    solve_triangular_inplace(W[:r, :r], Z[:r], p, left=True, lower=True, unit=True)
    mulsub(Z[r:], W[r:, :r], Z[:r], p)
    return Z


def solve_factored(W: np.ndarray, P: np.ndarray, Q: np.ndarray, r: int, B: np.ndarray, p: int) -> np.ndarray:
    """:func:`_solve` from the packed PLUQ ``(W, P, Q, r)`` of ``A`` (``B`` is not modified)."""
    n = W.shape[1]
    Z = eliminate_factored(W, P, r, B, p)
    rest = Z[r:]
    bad = np.flatnonzero(nonzero(rest).any(axis=0))
    if bad.size:
        raise LinAlgError(f"solve: A @ X = B has no solution modulo {p}: column {bad[0]} of B is not in the "
                          f"column space of A (rank {r})")
    solve_triangular_inplace(W[:r, :r], Z[:r], p, left=True, lower=False, unit=False)
    X = np.zeros((n, Z.shape[1]), dtype=W.dtype)
    X[Q[:r]] = Z[:r]
    return X


def nullspace(A: ArrayLike, p: int | None = None, *, left: bool = False) -> np.ndarray:
    """A basis of the kernel of a matrix modulo a prime ``p``.

    Parameters
    ----------
    A : array_like, shape (m, n)
        Integer matrix, a galois ``FieldArray`` or a python-flint matrix
        (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    p : int, optional
        A prime modulus, of any size; may be omitted for a ``FieldArray``,
        ``nmod_mat`` or ``fmpz_mod_mat``.
        Omitted for integer or rational input (NumPy integers, object arrays
        of Python ints or ``fractions.Fraction``, ``fmpz_mat``, ``fmpq_mat``),
        the kernel is over the rationals (:doc:`/guide/integers`).
    left : bool
        Return the left kernel (vectors ``y`` with ``y @ A = 0``) instead of
        the right one.

    Returns
    -------
    ndarray
        Right kernel (default): ``N`` of shape ``(n, n - rank)`` whose
        **columns** are a basis, ``A @ N = 0``. Left kernel: ``K`` of shape
        ``(m - rank, m)`` whose **rows** are a basis, ``K @ A = 0``. Entries are
        in ``[0, p)`` (int64 for ``p < 2**63``, Python ints above, a
        ``FieldArray`` for a ``FieldArray`` input, the input's python-flint
        type for a flint matrix).

        The basis is the canonical one of the reduced row echelon form: column
        ``j`` of ``N`` is 1 at the ``j``-th non-pivot column of ``A`` (in
        increasing order), 0 at the other non-pivot columns, so ``N`` matches
        python-flint's ``nmod_mat.nullspace``. The left kernel is the same
        construction on ``A.T``: ``nullspace(A, p, left=True)`` equals
        ``nullspace(A.T, p).T``.

        Over the rationals (no modulus): the same basis scaled to primitive
        integer vectors (int64 when the entries fit, else Python ints; an
        ``fmpz_mat`` for python-flint input), certified by ``A @ N = 0``
        checked exactly.

    Raises
    ------
    ValueError
        ``A`` not 2-D, ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    With ``A[P][:, Q] = L U``: ``A x = 0`` exactly when ``U x[Q] = 0``, so
    ``N[Q] = [-U1**-1 U2; I]``; and ``y A = 0`` when ``y[P] L = 0``, so
    ``K[:, P] = [-L2 L1**-1, I]``. One triangular solve after :func:`pluq`.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> A = np.array([[1, 2, 3], [2, 4, 6]])
    >>> N = linalg.nullspace(A, 7)
    >>> N
    array([[5, 4],
           [1, 0],
           [0, 1]])
    >>> (A @ N) % 7
    array([[0, 0],
           [0, 0]])
    >>> linalg.nullspace(A, 7, left=True)
    array([[5, 1]])
    >>> import flint
    >>> linalg.nullspace(flint.nmod_mat(A.tolist(), 7))
    [5, 4]
    [1, 0]
    [0, 1]
    >>> linalg.nullspace([[2, 4, 1], [4, 8, 3]])  # over the rationals
    array([[-2],
           [ 1],
           [ 0]])
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="nullspace", shapes=("matrix",), limbs=True)
    m, n = W.shape
    g = min(m, n)  # the rank of a generic matrix, for the model
    with tracked("nullspace", p, 1, lambda: pluq_cost(p, m, n) + trsm_cost(p, g, (m if left else n) - g, not left)):
        W = limb_working(W, p)
        P, Q, r = pluq_inplace(W, p)
        if left:
            X = np.array(W[r:, :r])
            solve_triangular_inplace(W[:r, :r], X, p, left=False, lower=True, unit=True)
        else:
            X = np.array(W[:r, r:])
            solve_triangular_inplace(W[:r, :r], X, p, left=True, lower=False, unit=False)
        X = plain(X)
    if left:
        K = np.zeros((m - r, m), dtype=X.dtype)
        K[:, P[:r]] = negate(X, p)
        K[np.arange(m - r), P[r:]] = 1
        return as_field(K, field)
    N = np.zeros((n, n - r), dtype=X.dtype)
    N[Q[:r]] = negate(X, p)
    N[Q[r:], np.arange(n - r)] = 1
    return as_field(N, field)


def rref(A: ArrayLike, p: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reduced row echelon form modulo a prime ``p``, with the pivot columns.

    Parameters
    ----------
    A : array_like, shape (m, n)
        Integer matrix, a galois ``FieldArray`` or a python-flint matrix
        (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    p : int, optional
        A prime modulus, of any size; may be omitted for a ``FieldArray``,
        ``nmod_mat`` or ``fmpz_mod_mat``.

    Returns
    -------
    R : ndarray, shape (m, n)
        The reduced row echelon form of ``A`` over ``GF(p)``: its first
        ``rank`` rows are nonzero, row ``i`` has a 1 at column ``pivots[i]``
        and zeros left of it, each pivot column is zero outside its pivot,
        and the other rows are zero. Entries in ``[0, p)`` (int64 for
        ``p < 2**63``, Python ints above, a ``FieldArray`` for a
        ``FieldArray`` input, the input's python-flint type for a flint
        matrix).
    pivots : ndarray of int64, shape (rank,)
        The pivot columns, increasing: the column rank profile of ``A`` (the
        first ``rank`` linearly independent columns).

    Raises
    ------
    ValueError
        ``A`` not 2-D, ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    The rows of ``U`` from :func:`pluq` span the row space of ``A`` (with
    columns permuted by ``Q``), and ``Q[:rank]`` are its pivot columns, so
    ``R[:rank]`` is ``U1**-1 [U1 U2] = [I, U1**-1 U2]`` with its columns put
    back in place and its rows sorted by pivot column: one triangular solve
    after :func:`pluq`.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> R, pivots = linalg.rref([[0, 2, 4, 1], [0, 1, 2, 3], [0, 3, 6, 4]], 7)
    >>> R
    array([[0, 1, 2, 0],
           [0, 0, 0, 1],
           [0, 0, 0, 0]])
    >>> pivots
    array([1, 3])
    >>> import flint
    >>> F = flint.nmod_mat([[0, 2, 4, 1], [0, 1, 2, 3], [0, 3, 6, 4]], 7)
    >>> linalg.rref(F)[0] == F.rref()[0]
    True
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="rref", shapes=("matrix",), limbs=True)
    m, n = W.shape
    g = min(m, n)  # the rank of a generic matrix, for the model
    with tracked("rref", p, 1, lambda: pluq_cost(p, m, n) + trsm_cost(p, g, n - g)):
        W = limb_working(W, p)
        _, Q, r = pluq_inplace(W, p)
        X = np.array(W[:r, r:])
        solve_triangular_inplace(W[:r, :r], X, p, left=True, lower=False, unit=False)
        X = plain(X)
    top = np.zeros((r, n), dtype=X.dtype)
    top[np.arange(r), Q[:r]] = 1
    top[:, Q[r:]] = X
    order = np.argsort(Q[:r], kind="stable")
    R = np.zeros((m, n), dtype=X.dtype)
    R[:r] = top[order]
    return as_field(R, field), Q[:r][order]
