"""Integer powers of square matrices modulo a prime, by repeated squaring on products."""

from __future__ import annotations

import operator

import numpy as np

from modlin.linalg._arith import mul, mul_cost
from modlin.linalg._inputs import as_field, map_matrices, prepare, stack_count
from modlin.linalg._solve import inverse, inverse_cost
from modlin.linalg._steps import tracked
from modlin.typing import ArrayLike

__all__ = ["matrix_power", "power_cost"]


def _power(W: np.ndarray, e: int, p: int) -> np.ndarray:
    """``W**e mod p`` for ``e >= 1``: the bits of ``e`` from the top, a squaring for each bit
    after the first and a product with ``W`` for each further 1 bit."""
    R = W
    for bit in bin(e)[3:]:
        R = mul(R, R, p, lone=True)
        if bit == "1":
            R = mul(R, W, p, lone=True)
    return R


def power_cost(p: int, n: int, e: int) -> float:
    """Modelled cost of :func:`matrix_power` on one ``n x n`` matrix for ``e != 0``: the
    squarings and products of :func:`_power`, and the inverse of a negative power."""
    bits = abs(e).bit_length()
    products = bits - 1 + bin(abs(e)).count("1") - 1
    return products * mul_cost(p, n, n, n) + (inverse_cost(p, n) if e < 0 else 0.0)


def matrix_power(A: ArrayLike, e: int, p: int | None = None) -> np.ndarray:
    """Raise a square matrix (or a stack of them) to the integer power ``e`` modulo a prime ``p``.

    As :func:`numpy.linalg.matrix_power`: ``e = 0`` gives the identity, ``e < 0``
    the power ``-e`` of the inverse.

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Square integer matrix or a stack of them, a galois ``FieldArray`` or a
        python-flint matrix (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    e : int
        The exponent, of any size (a Python int or a NumPy integer).
    p : int, optional
        A prime modulus, of any size; may be omitted for a ``FieldArray``,
        ``nmod_mat`` or ``fmpz_mod_mat``.

    Returns
    -------
    ndarray, shape (..., n, n)
        ``A**e mod p`` with entries in ``[0, p)``: int64 for ``p < 2**63``,
        Python ints above, a ``FieldArray`` for a ``FieldArray`` input, the
        input's python-flint type for a flint matrix.

    Raises
    ------
    LinAlgError
        ``A`` not square (a ``ValueError`` too), or singular modulo ``p`` for
        ``e < 0`` (a negative power needs an invertible matrix).
    TypeError
        ``e`` not an integer (``numpy.linalg.matrix_power``'s message, with the
        value given), or the type errors of :func:`modlin.matmul`.
    ValueError
        ``p`` not prime, or the input errors of :func:`modlin.matmul`.

    Notes
    -----
    Left-to-right binary powering: ``e`` of ``L`` bits with ``k`` ones costs
    ``L - 1`` squarings and ``k - 1`` more products, each one
    :func:`modlin.matmul` of two ``n x n`` matrices; a power of two ``2**s``
    is ``s`` squarings (``matrix_power(A, 2**64)`` is 64 products). ``e < 0``
    adds one :func:`inv` (about one product).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> A = np.array([[1, 1], [1, 0]])  # Fibonacci numbers mod 1000003
    >>> linalg.matrix_power(A, 10, 1000003)
    array([[89, 55],
           [55, 34]])
    >>> F = linalg.matrix_power(A, 2**100, 1000003)  # 100 squarings
    >>> bool((linalg.matrix_power(A, -1, 7) @ A % 7 == np.eye(2)).all())
    True
    >>> linalg.matrix_power(A, 0, 7)
    array([[1, 0],
           [0, 1]])
    """
    try:
        e = operator.index(e)
    except TypeError:
        # numpy's words, with the value: a float such as 2.0 looks like an integer
        raise TypeError(f"matrix_power: exponent must be an integer, got {type(e).__name__} {e!r:.60}; "
                        "pass an int (or a NumPy integer)") from None
    p, field, (W,) = prepare(p, A, names=("A",), fn="matrix_power", shapes=("square",), stack=True)
    n = W.shape[-1]
    if e == 0:
        R = np.zeros(W.shape, dtype=W.dtype)
        R[..., np.arange(n), np.arange(n)] = 1
        return as_field(R, field)
    with tracked("matrix_power", p, stack_count(W), lambda: power_cost(p, n, e)):
        if e < 0:
            why = f"a negative power (e = {e}) needs an invertible matrix, and "
            W = map_matrices(lambda w: inverse(w, p, "matrix_power", why), [W], (2,), (n, n), W.dtype)
        return as_field(map_matrices(lambda w: _power(w, abs(e), p), [W], (2,), (n, n), W.dtype), field)
