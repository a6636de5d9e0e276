"""Front-end input handling: validation, galois interop, and residues as int64."""

from __future__ import annotations

import numbers
import sys

import numpy as np

from ._modular import balanced_lift_int64, balanced_lift_word
from ._pyints import python_ints

__all__ = ["field_of", "unwrap_fields", "residues_int64", "integers", "balanced_lift", "balanced_halves"]


def field_of(x) -> type | None:
    """The galois ``FieldArray`` class of ``x``, or None (galois is not imported for this)."""
    galois = sys.modules.get("galois")
    if galois is not None and isinstance(x, galois.FieldArray):
        return type(x)
    return None


def unwrap_fields(p, *arrays):
    """Return ``(p, field, arrays as plain ndarrays/objects)`` after checking galois fields.

    ``p`` may be None when a FieldArray fixes it. All FieldArrays must share one
    prime field, whose order must equal ``p`` when both are given.
    """
    fields = []
    plain = []
    for x in arrays:
        f = field_of(x)
        if f is not None:
            if f.degree != 1:
                raise ValueError(
                    f"{f.name} is an extension field; modlin multiplies over prime fields GF(p) "
                    "and integers mod p only"
                )
            fields.append(f)
            x = x.view(np.ndarray)
        plain.append(x)
    field = None
    if fields:
        field = fields[0]
        if any(f is not field for f in fields[1:]):
            raise ValueError(
                f"operands belong to different fields ({', '.join(sorted({f.name for f in fields}))}); "
                "convert them to one field first"
            )
        if p is None:
            p = int(field.characteristic)
        elif isinstance(p, numbers.Integral) and int(p) != int(field.order):
            raise ValueError(
                f"modulus p = {p} does not match the operands' field {field.name}; "
                "omit p or pass the field's order"
            )
    if p is None:
        raise TypeError("the modulus p is required unless an operand is a galois FieldArray")
    return p, field, plain


def _native(x: np.ndarray) -> np.ndarray:
    """``x`` in native byte order (a copy only when it is not): dtype tests and kernels assume it."""
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def residues_int64(x, p: int, name: str) -> np.ndarray:
    """``x`` as an int64 array congruent to it modulo ``p`` (not necessarily reduced).

    Never modifies ``x``; a copy is made only when the dtype or values need it.
    """
    x = _native(np.asarray(x))
    kind = x.dtype.kind
    if kind == "i" and x.dtype.itemsize == 8:
        return x
    if kind in "iub":
        if x.dtype == np.uint64:
            return np.remainder(x, np.uint64(p)).astype(np.int64)
        return x.astype(np.int64)
    if kind == "f":
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} holds NaN or Inf; matmul needs integer values")
        wide = x.astype(np.longdouble if x.dtype == np.longdouble else np.float64, copy=False)
        if not np.array_equal(wide, np.trunc(wide)):
            raise ValueError(
                f"{name} holds non-integral floats; round them first (numpy.rint) or pass integers"
            )
        # fmod is exact for floating-point operands, so no value is rounded here
        return np.fmod(wide, wide.dtype.type(p)).astype(np.int64)
    if kind == "O":
        if x.size == 0:
            return x.astype(np.int64)
        return (python_ints(x) % p).astype(np.int64)
    if kind == "c":
        raise TypeError(
            f"{name} is complex; matmul multiplies real integer matrices "
            "(Gaussian-integer products are planned in modlin.gaussian)"
        )
    raise TypeError(f"{name} has dtype {x.dtype}, which is not numeric; pass integer arrays")


def integers(x, name: str) -> np.ndarray:
    """``x`` as exact integers for :func:`modlin.intmul`: int64, uint64 or object of Python ints."""
    x = _native(np.asarray(x))
    kind = x.dtype.kind
    if kind in "iub":
        return x if x.dtype in (np.int64, np.uint64) else x.astype(np.int64)
    if kind == "O":
        if x.size == 0:
            return x.astype(np.int64)
        return python_ints(x)
    if kind == "f":
        raise TypeError(
            f"{name} holds floats; intmul multiplies integers exactly: convert first "
            "(e.g. x.astype(np.int64) after checking the values are integral)"
        )
    if kind == "c":
        raise TypeError(f"{name} is complex; intmul multiplies real integer matrices")
    raise TypeError(f"{name} has dtype {x.dtype}, which is not an integer type")


def balanced_halves(x, p: int, name: str):
    """:func:`balanced_lift` as the 16-bit pieces a residue number system reads
    (:class:`modlin._rns._Halves`). Object arrays of Python ints in ``[-p, p)``
    go to pieces directly and are balanced there, without Python arithmetic."""
    from ._rns import _Halves

    x = np.asarray(x)
    if x.dtype == object and x.size:
        try:
            h = _Halves(x)
        except (TypeError, ValueError):  # not plain ints, or too large: the general path decides
            h = None
        if h is not None and h.balance(p):
            return h
    return _Halves(balanced_lift(x, p, name))


def balanced_lift(x, p: int, name: str) -> np.ndarray:
    """The residues of ``x`` modulo ``p`` in ``[-(p//2), (p-1)//2]``.

    int64 when ``p <= 2**64`` (every such residue fits), object arrays of Python
    ints above. Never modifies ``x``.
    """
    x = np.asarray(x)
    if x.dtype.kind == "f":
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} holds NaN or Inf; matmul needs integer values")
        if not np.array_equal(x, np.trunc(x)):
            raise ValueError(f"{name} holds non-integral floats; round them first (numpy.rint) or pass integers")
        # exact: every finite float is an integer here, and int() converts it exactly
        x = np.frompyfunc(int, 1, 1)(x) if x.size else x.astype(np.int64)
    elif x.dtype.kind in "iubO":
        x = integers(x, name)
    else:
        residues_int64(x, p, name)  # raises the appropriate TypeError
    half = (p - 1) // 2
    if p <= 2**64 and x.dtype != object:
        if x.dtype == np.int64 and p < 2**63:
            return balanced_lift_int64(x, p)
        if p < 2**64:
            if x.dtype == np.int64 or p >= 2**63:
                return balanced_lift_word(x, p)
            return balanced_lift_int64(np.remainder(x, np.uint64(p)).astype(np.int64), p)  # uint64, p < 2**63
        # p = 2**64: the balanced residue of a 64-bit word is the word read as int64
        return x.astype(np.int64) if x.dtype == np.int64 else x.view(np.int64).copy()
    r = x.astype(object) % p
    if p <= 2**64:
        return np.where(r > half, r - p, r).astype(np.int64)
    return np.where(r > half, r - p, r)
