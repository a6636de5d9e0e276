"""Front-end input handling: validation, galois interop, and residues as int64."""

from __future__ import annotations

import numbers
import sys

import numpy as np

__all__ = ["field_of", "unwrap_fields", "residues_int64"]


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


def _object_residue(p: int):
    def residue(e):
        if isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, np.integer)):
            raise TypeError(
                f"object arrays must hold Python or NumPy integers; found {type(e).__name__} {e!r}"
            )
        return int(e) % p

    return np.frompyfunc(residue, 1, 1)


def residues_int64(x, p: int, name: str) -> np.ndarray:
    """``x`` as an int64 array congruent to it modulo ``p`` (not necessarily reduced).

    Never modifies ``x``; a copy is made only when the dtype or values need it.
    """
    x = np.asarray(x)
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
        return _object_residue(p)(x).astype(np.int64)
    if kind == "c":
        raise TypeError(
            f"{name} is complex; matmul multiplies real integer matrices "
            "(Gaussian-integer products are planned in modlin.gaussian)"
        )
    raise TypeError(f"{name} has dtype {x.dtype}, which is not numeric; pass integer arrays")
