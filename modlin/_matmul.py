"""``modlin.matmul``: the public product modulo p."""

from __future__ import annotations

import numpy as np

from . import _multiword
from ._convert import residues_int64, unwrap_fields
from ._plan import Plan, _check_modulus, plan as make_plan
from .typing import ArrayLike

__all__ = ["matmul"]


def matmul(A: ArrayLike, B: ArrayLike, p: int | None = None, *, out: np.ndarray | None = None,
           plan: Plan | None = None) -> np.ndarray:
    """Matrix product modulo ``p``, exactly.

    Follows :func:`numpy.matmul` semantics: 2-D operands multiply as matrices,
    stacks of matrices (``...`` dimensions) broadcast, and a 1-D operand is
    promoted to a row (``A``) or column (``B``) whose added axis is removed from
    the result.

    Parameters
    ----------
    A, B : array_like
        Integer matrices: any NumPy integer or boolean dtype (negative and
        unreduced entries included, ``uint64`` up to ``2**64 - 1``), float
        arrays holding integers, object arrays of Python ints, or galois
        ``FieldArray`` s of one prime field.
    p : int, optional
        The modulus, ``2 <= p < 2**52``, prime or composite. May be omitted when
        an operand is a ``FieldArray``; if given, it must equal the field's order.
    out : ndarray, optional
        Where to write the result: int64 with the result's shape (a
        ``FieldArray`` of the operands' field when they are FieldArrays).
    plan : Plan, optional
        A plan from :func:`modlin.plan` to run instead of choosing one. It is
        checked against the exactness contract first.

    Returns
    -------
    ndarray
        ``A @ B mod p`` as int64 with entries in ``[0, p)``, or a ``FieldArray``
        of the operands' field.

    Raises
    ------
    ValueError
        Mismatched shapes, ``p < 2`` or ``p >= 2**52``, NaN/Inf or non-integral
        floats, a plan for another modulus or that breaks the contract, an
        extension field, or operands from different fields.
    TypeError
        Non-numeric or complex operands, a non-integer modulus, a bad ``out``.

    Notes
    -----
    The product is computed with floating-point GEMMs on small integer words
    (seed 001): ``A`` and ``B`` are reduced into the balanced range
    ``[-p//2, p//2]``, split into words when ``p`` is large, and multiplied in
    blocks small enough that no partial sum exceeds ``2**53`` (``2**24`` for
    the fp32 engine). See :func:`modlin.plan` and :meth:`Plan.explain`.

    Examples
    --------
    >>> import numpy as np, modlin
    >>> A = np.array([[1, 2], [3, 4]])
    >>> modlin.matmul(A, A, 5)
    array([[2, 0],
           [0, 2]])
    >>> p = 2**50 - 27  # a 50-bit prime: (p-1)**2 needs 100 bits, the result is exact
    >>> modlin.matmul([[p - 1, 1]], [[p - 1], [2]], p)
    array([[3]])
    """
    p, field, (A, B) = unwrap_fields(p, A, B)
    p = _check_modulus(p)
    if np.ndim(A) == 0 or np.ndim(B) == 0:
        raise ValueError("matmul: operands must have at least one dimension (use * for scalars)")
    a = residues_int64(A, p, "A")
    b = residues_int64(B, p, "B")
    a2 = a[np.newaxis, :] if a.ndim == 1 else a
    b2 = b[:, np.newaxis] if b.ndim == 1 else b
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise ValueError(
            f"matmul: shapes {np.shape(A)} and {np.shape(B)} are not aligned: "
            f"A has {k} columns but B has {k2} rows"
        )
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: stack shapes {a2.shape[:-2]} and {b2.shape[:-2]} do not broadcast"
        ) from None
    full = batch + (m, n)
    shape = full[:-2] + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())

    if plan is None:
        plan = make_plan(p, m, k, n)
    else:
        if not isinstance(plan, Plan):
            raise TypeError(f"plan must be a modlin.Plan, got {type(plan).__name__}")
        if plan.p != p:
            raise ValueError(f"plan was made for p = {plan.p}, not p = {p}; make one with modlin.plan")
        plan.check()

    direct = out is not None and field is None and _usable_out(out, shape)
    if out is not None and not direct:
        _check_out(out, shape, field)
    result = out if direct else np.empty(full, dtype=np.int64)
    target = result.reshape(full) if direct else result
    if target.size:
        _multiword.multiply(plan, a2, b2, target)
    if direct:
        return out
    result = result.reshape(shape)
    if out is not None:
        out.view(np.ndarray)[...] = result
        return out
    if field is not None:
        return field(result)
    return result[()] if result.ndim == 0 else result


def _usable_out(out, shape) -> bool:
    return (
        type(out) is np.ndarray
        and out.dtype == np.int64
        and out.shape == shape
        and out.flags.c_contiguous
        and out.flags.writeable
    )


def _check_out(out, shape, field) -> None:
    if field is not None:
        if type(out) is not field:
            raise TypeError(f"out must be a {field.name} FieldArray when the operands are")
    elif not isinstance(out, np.ndarray) or out.dtype != np.int64:
        raise TypeError("out must be a numpy.ndarray of dtype int64")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, but the result has shape {shape}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
