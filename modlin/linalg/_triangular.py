"""Triangular solves (TRSM) modulo ``p``: a recursion whose work is done by products.

``T X = B`` with ``T = [[T11, 0], [T21, T22]]`` splits into ``T11 X1 = B1``,
``B2 <- B2 - T21 X1`` (one :func:`modlin.matmul`) and ``T22 X2 = B2``; the other
three cases (upper, and ``X T = B``) are the same with the halves in another
order. Below :data:`TRIANGULAR_THRESHOLD` rows, the triangle is inverted by a kernel and
``X = T**-1 B`` is one more product: twice the multiply-adds of a substitution,
but at GEMM speed rather than one modular operation at a time.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from modlin._front.inputs import trans_code
from modlin._runtime.calibration import TRIANGULAR_THRESHOLD, TRIANGULAR_THRESHOLD_BIG
from modlin.linalg._arith import INT64_LIMIT, independent, mul, mul_cost, mulsub, negate
from modlin.linalg._bigmod import DOTS_MAX_COLUMNS, limb_working, plain
from modlin.linalg._elimination import substitute, substitutes, triangular_inverse
from modlin.linalg._inputs import as_field, check_unit_diagonal, prepare
from modlin.linalg._steps import inversion_cost, substitution_cost, tracked
from modlin.typing import ArrayLike

__all__ = ["trsm", "solve_triangular_inplace", "invert_triangular", "trsm_cost", "invert_cost", "TRIANGULAR_THRESHOLD",
           "TRIANGULAR_THRESHOLD_BIG", "threshold"]


def solve_triangular_inplace(T: np.ndarray, B: np.ndarray, p: int, *, left: bool, lower: bool,
                             unit: bool) -> None:
    """In place: ``B <- T**-1 B`` (``left``) or ``B <- B T**-1``, for the triangle of ``T``.

    ``T`` and ``B`` are residue blocks (possibly views into one larger matrix,
    never overlapping), the diagonal of ``T`` made of units modulo ``p`` (or
    ignored when ``unit``).
    """
    k = T.shape[0]
    if k == 0 or B.size == 0:
        return
    if B.dtype != np.int64 and by_substitution(p, k, B.shape[1] if left else B.shape[0]):
        substitute(T, B, p, left=left, lower=lower, unit=unit)
        return
    if k <= threshold(p):
        Tinv = triangular_inverse(T, p, lower, unit)
        B[...] = mul(Tinv, B, p, temporary=True) if left else mul(B, Tinv, p, temporary=True)
        return
    h = k // 2
    T11, T22 = T[:h, :h], T[h:, h:]
    kw = {"left": left, "lower": lower, "unit": unit}
    if left:
        B1, B2 = B[:h], B[h:]
        if lower:
            solve_triangular_inplace(T11, B1, p, **kw)
            mulsub(B2, T[h:, :h], B1, p)
            solve_triangular_inplace(T22, B2, p, **kw)
        else:
            solve_triangular_inplace(T22, B2, p, **kw)
            mulsub(B1, T[:h, h:], B2, p)
            solve_triangular_inplace(T11, B1, p, **kw)
    else:
        B1, B2 = B[:, :h], B[:, h:]
        if lower:
            solve_triangular_inplace(T22, B2, p, **kw)
            mulsub(B1, B2, T[h:, :h], p)
            solve_triangular_inplace(T11, B1, p, **kw)
        else:
            solve_triangular_inplace(T11, B1, p, **kw)
            mulsub(B2, B1, T[:h, h:], p)
            solve_triangular_inplace(T22, B2, p, **kw)


def invert_triangular(T: np.ndarray, p: int, *, lower: bool, unit: bool) -> np.ndarray:
    """The inverse of the lower (or upper) triangle of ``T`` modulo ``p``, a new array.

    ``[[T11, 0], [T21, T22]]**-1 = [[X11, 0], [X21, X22]]`` with ``Xii = Tii**-1``
    (recursively) and ``X21 = -T22**-1 T21 T11**-1`` from two half-size
    triangular solves: ``k**3 / 6`` multiply-adds in all, the same count as
    substitution, but in products.
    """
    k = T.shape[0]
    if k <= threshold(p):
        return triangular_inverse(T, p, lower, unit)
    h = k // 2
    X = np.zeros((k, k), dtype=T.dtype)

    def half(s: slice) -> None:
        X[s, s] = invert_triangular(T[s, s], p, lower=lower, unit=unit)

    independent(T, invert_cost(p, h) + invert_cost(p, k - h), lambda: half(slice(None, h)), lambda: half(slice(h, None)))
    kw = {"lower": lower, "unit": unit}
    if lower:
        W = X[h:, :h]
        W[...] = negate(T[h:, :h], p)
        solve_triangular_inplace(T[:h, :h], W, p, left=False, **kw)
        solve_triangular_inplace(T[h:, h:], W, p, left=True, **kw)
    else:
        W = X[:h, h:]
        W[...] = negate(T[:h, h:], p)
        solve_triangular_inplace(T[h:, h:], W, p, left=False, **kw)
        solve_triangular_inplace(T[:h, :h], W, p, left=True, **kw)
    return X


def by_substitution(p: int, k: int, w: int) -> bool:
    """Whether a ``k x k`` triangle's solve against ``w`` columns (or rows) is one substitution
    (:func:`substitutes` primes): below the recursion's threshold as :func:`substitutes` says,
    and at every size against at most ``DOTS_MAX_COLUMNS`` columns, where the recursion's
    products are matrix-vector products that still pay every residue of the triangle.
    Measured here (medians of 5, limb arrays): ``k = 1000``, one column, 15 ms against 24 at
    127 bits and 43 against 62 at 256; four columns 38 against 48 (127 bits); but sixteen
    columns at ``k = 500``, 27 against 15."""
    return substitutes(p, k, w) and (k <= threshold(p) or w <= DOTS_MAX_COLUMNS)


def threshold(p: int) -> int:
    """The size below which a triangle is inverted by a kernel: ``TRIANGULAR_THRESHOLD``, or
    ``TRIANGULAR_THRESHOLD_BIG`` for residues beyond 64 bits."""
    return TRIANGULAR_THRESHOLD if p < INT64_LIMIT else TRIANGULAR_THRESHOLD_BIG


def trsm_cost(p: int, k: int, w: int, left: bool = True) -> float:
    """Modelled cost of :func:`solve_triangular_inplace` with a ``k x k`` triangle and ``w``
    columns of ``B`` (``left``) or rows: the same recursion, its products and base-case
    inverses priced (:mod:`modlin.linalg._steps`)."""
    if k == 0 or w == 0:
        return 0.0
    if by_substitution(p, k, w):
        return substitution_cost(p, k, w)
    if k <= threshold(p):
        product = mul_cost(p, k, k, w) if left else mul_cost(p, w, k, k)
        return inversion_cost(p, k, p >= INT64_LIMIT) + product
    h = k // 2
    update = mul_cost(p, k - h, h, w) if left else mul_cost(p, w, k - h, h)
    return trsm_cost(p, h, w, left) + trsm_cost(p, k - h, w, left) + update


def invert_cost(p: int, k: int) -> float:
    """Modelled cost of :func:`invert_triangular` of a ``k x k`` triangle."""
    if k <= threshold(p):
        return inversion_cost(p, k, p >= INT64_LIMIT)
    h = k // 2
    return invert_cost(p, h) + invert_cost(p, k - h) + trsm_cost(p, h, k - h, left=False) + trsm_cost(p, k - h, h)


def trsm(T: ArrayLike, B: ArrayLike, p: int | None = None, *, side: Literal["left", "right"] = "left",
         lower: bool = True, unit_diagonal: bool = False, trans: int | str = 0) -> np.ndarray:
    """Solve a triangular system modulo ``p``: ``op(T) @ X = B`` or ``X @ op(T) = B``.

    Like BLAS ``trsm`` (and :func:`scipy.linalg.solve_triangular`, whose
    keyword names ``lower``, ``trans`` and ``unit_diagonal`` it takes), only
    the triangle of ``T`` named by ``lower`` is read; the other one may hold
    anything. ``op(T)`` is ``T`` or its transpose.

    .. note:: The default ``lower=True`` differs from scipy's
       ``solve_triangular``, whose default ``lower=False`` reads the upper
       triangle: pass ``lower=False`` explicitly for scipy's behaviour.

    Parameters
    ----------
    T : array_like, shape (k, k)
        The triangular matrix (any integers; they are reduced modulo ``p``),
        a galois ``FieldArray`` or a python-flint ``nmod_mat``,
        ``fmpz_mod_mat`` or ``fmpz_mat``.
    B : array_like, shape (k, w) or (k,) for ``side="left"``; (w, k) for ``side="right"``
        The right-hand side.
    p : int, optional
        The modulus, ``p >= 2``. May be omitted when ``T`` or ``B`` is a galois
        ``FieldArray``, an ``nmod_mat`` or an ``fmpz_mod_mat``. It need not be
        prime: the solve needs only the inverses of the diagonal entries, so it
        works modulo any ``p`` whose diagonal entries are units (every ``p``
        with ``unit_diagonal=True``).
    side : {"left", "right"}
        ``"left"`` solves ``T @ X = B``, ``"right"`` solves ``X @ T = B``.
    lower : bool
        Read the lower triangle of ``T`` (default) or the upper one.
    unit_diagonal : bool
        Take the diagonal of ``T`` as all ones, without reading it.
    trans : {0, 1, 2, "N", "T", "C"}
        As in :func:`scipy.linalg.solve_triangular`: ``0`` / ``"N"`` solves
        with ``T``, ``1`` / ``"T"`` with ``T.T`` and ``2`` / ``"C"`` with the
        conjugate transpose, which for residues modulo ``p`` is ``T.T`` as
        well. ``lower`` names the triangle of ``T`` itself, so ``lower=True``
        with ``trans=1`` solves with the upper triangular ``T.T``.

    Returns
    -------
    ndarray
        ``X``, of the shape of ``B``, with entries in ``[0, p)``: int64 for
        ``p < 2**63``, an object array of Python ints above, a
        ``FieldArray`` when an input is one, or the python-flint type of
        flint inputs.

    Raises
    ------
    LinAlgError
        ``T`` not square, or a diagonal entry of ``T`` that is zero modulo
        ``p`` (or not a unit, for composite ``p``); a ``ValueError`` too.
    ValueError
        ``B`` of the wrong shape, an unknown ``side`` or ``trans``, or the
        input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand).

    Notes
    -----
    The triangle is split in halves recursively; each level solves two
    half-size systems and makes one product with :func:`modlin.matmul`.
    Triangles of at most ``TRIANGULAR_THRESHOLD`` rows (128; 64 beyond 64-bit ``p``) are inverted by a kernel and
    multiplied with ``B``, so nearly all the work runs in GEMMs: ``k**2 * w / 2``
    multiply-adds in all for ``B`` of width ``w``, at the speed of the product. Modulo
    primes beyond 64 bits a base triangle against at most a third as many columns is
    solved by substitution in the compiled kernels instead (fewer updates than its inverse,
    and no product).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> T = np.array([[2, 0], [3, 1]])
    >>> X = linalg.trsm(T, [[4], [5]], 7)
    >>> X
    array([[2],
           [6]])
    >>> (T @ X) % 7
    array([[4],
           [5]])
    >>> linalg.trsm(T, [[4, 5]], 7, side="right", lower=True, unit_diagonal=True)
    array([[3, 5]])

    ``trans=1`` solves with ``T.T`` (the upper triangular ``[[2, 3], [0, 1]]``):

    >>> Y = linalg.trsm(T, [[4], [5]], 7, trans=1)
    >>> (T.T @ Y) % 7
    array([[4],
           [5]])
    >>> import flint
    >>> F = flint.nmod_mat(T.tolist(), 7)
    >>> linalg.trsm(F, flint.nmod_mat([[4], [5]], 7))
    [2]
    [6]
    """
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    transposed = trans_code(trans) != 0  # residues have no conjugate: "C" is "T"
    p, field, (t, b) = prepare(p, T, B, names=("T", "B"), fn="trsm", prime=False, shapes=("square",))
    if transposed:  # the named triangle of T, transposed, is the other triangle of T.T
        t, lower = np.ascontiguousarray(t.T), not lower
    k = t.shape[0]
    vector = b.ndim == 1 and side == "left"
    if vector:
        b = b[:, np.newaxis]
    if b.ndim != 2:
        raise ValueError(f"trsm: B must be a matrix{' or a vector' if side == 'left' else ''}, "
                         f"got shape {b.shape}")
    axis = 0 if side == "left" else 1
    if b.shape[axis] != k:
        what = "rows" if side == "left" else "columns"
        raise ValueError(f"trsm: T is {k}x{k}, so B must have {k} {what} for side={side!r}; "
                         f"B has shape {b.shape}")
    if not unit_diagonal:
        check_unit_diagonal(t, p)
    left = side == "left"
    with tracked("trsm", p, 1, lambda: trsm_cost(p, k, b.shape[1 if left else 0], left)):
        t, b = limb_working(t, p), limb_working(b, p)  # modulo a big prime: blocks in limbs
        solve_triangular_inplace(t, b, p, left=left, lower=bool(lower), unit=bool(unit_diagonal))
        b = plain(b)
    return as_field(b[:, 0] if vector else b, field)
