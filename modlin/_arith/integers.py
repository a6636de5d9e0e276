"""Integer matrices as the products read them: fixed-width or Python-int entries, their
largest magnitude, residues modulo ``p`` as int64, balanced lifts and 16-bit pieces.

Each function takes an array a front door has accepted and says, by the operand's name,
what it cannot convert (floats that are not integers, entries past int64 where only int64 fits).
"""

from __future__ import annotations

import numpy as np

from modlin._arith.modular import balanced_lift_int64, balanced_lift_word, reduced_int64
from modlin._arith.pyints import python_ints


def _native(x: np.ndarray) -> np.ndarray:
    """``x`` in native byte order (a copy only when it is not): dtype tests and kernels assume it."""
    return x if x.dtype.isnative else x.astype(x.dtype.newbyteorder("="))


def _integral_floats(x: np.ndarray, name: str) -> np.ndarray:
    """Float ``x`` widened to float64 (longdouble kept) after checking that every entry
    is a finite integer; ValueError naming ``name`` otherwise."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} holds NaN or Inf; pass integer values")
    wide = x.astype(np.longdouble if x.dtype == np.longdouble else np.float64, copy=False)
    if not np.array_equal(wide, np.trunc(wide)):
        raise ValueError(f"{name} holds non-integral floats; round them first (numpy.rint) or pass integers")
    return wide


def float_integers(x: np.ndarray, name: str) -> np.ndarray:
    """The exact integer values of a float array holding integers.

    int64 when every entry is below ``2**63`` in magnitude (the cast is then
    exact), otherwise an object array of Python ints (``int`` of a float is
    exact at any magnitude). Raises ValueError for NaN, Inf or fractions.
    """
    wide = _integral_floats(x, name)
    if not np.any(np.abs(wide) >= 2.0**63):
        return wide.astype(np.int64)
    out = np.empty(wide.shape, dtype=object)
    out[...] = np.frompyfunc(int, 1, 1)(wide)
    return out


def residues_int64(x, p: int, name: str) -> np.ndarray:
    """``x`` as an int64 array congruent to it modulo ``p < 2**63`` (not necessarily reduced).

    Exact for every accepted dtype at every such ``p``, floats of any magnitude
    included. Never modifies ``x``; a copy is made only when the dtype or values need it.
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
        wide = _integral_floats(x, name)
        if int(wide.dtype.type(p)) == p:
            # fmod is exact for floating-point operands, so no value is rounded here
            return np.fmod(wide, wide.dtype.type(p)).astype(np.int64)
        # p itself has no exact float (p > 2**53 for float64): reduce the integers instead
        return residues_int64(float_integers(x, name), p, name)
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
    (:class:`modlin._arith.residues.Pieces16`). Object arrays of Python ints in ``[-p, p)``
    go to pieces directly and are balanced there, without Python arithmetic."""
    from modlin._arith.residues import Pieces16, object_pieces

    x = np.asarray(x)
    if x.dtype == np.int64 and p < 2**63 and x.flags.c_contiguous and reduced_int64(x, p):
        # residues already: the residue kernel lifts them entry by entry, no lifted copy is made
        return Pieces16(x, lift=p)
    if x.dtype == object and x.size:
        # values in [-p, p) fit the pieces of p with a sign; others (or entries that are not
        # plain ints): the general path decides
        pieces = object_pieces(x, p.bit_length() // 16 + 1)
        h = None if pieces is None else Pieces16(x, pieces=pieces)
        if h is not None and h.balance(p):
            return h
    return Pieces16(balanced_lift(x, p, name))


def _checked(x, p: int, name: str) -> np.ndarray:
    """``x`` as exact integers (int64, uint64 or Python ints), or the TypeError or ValueError
    saying why it is not an array of integers."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return float_integers(x, name)
    if x.dtype.kind in "iubO":
        return integers(x, name)
    residues_int64(x, p, name)  # raises the appropriate TypeError
    return x


def residues_object(x, p: int, name: str) -> np.ndarray:
    """The residues of ``x`` modulo ``p`` in ``[0, p)``, a new object array of Python ints
    (one ``%`` per entry; for moduli beyond int64). Never modifies ``x``."""
    x = _checked(x, p, name)
    r = np.empty(x.shape, dtype=object)
    r[...] = x.astype(object) % p
    return r


def balanced_lift(x, p: int, name: str) -> np.ndarray:
    """The residues of ``x`` modulo ``p`` in ``[-(p//2), (p-1)//2]``.

    int64 when ``p <= 2**64`` (every such residue fits), object arrays of Python
    ints above. Never modifies ``x``.
    """
    x = _checked(x, p, name)
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
    r = np.empty(x.shape, dtype=object)  # an array even for 0-d x, whose % would give an int
    r[...] = x.astype(object) % p
    np.subtract(r, p, out=r, where=r > half)
    return r.astype(np.int64) if p <= 2**64 else r


def max_abs(x: np.ndarray) -> int:
    """The largest ``|entry|`` of an integer array, as a Python int (0 when empty)."""
    if x.size == 0:
        return 0
    return max(abs(int(x.max())), abs(int(x.min())))
