"""Front-end input handling: validation, galois and python-flint interop, and residues as int64."""

from __future__ import annotations

import numbers
import operator
import sys

import numpy as np

from ._modular import balanced_lift_int64, balanced_lift_word, reduced_int64
from ._pyints import python_ints

__all__ = ["field_of", "check_operand", "unwrap_fields", "integer_operands", "trans_code", "float_integers",
           "residues_int64", "integers", "balanced_lift", "balanced_halves"]


def field_of(x) -> type | None:
    """The galois ``FieldArray`` class of ``x``, or None (galois is not imported for this)."""
    galois = sys.modules.get("galois")
    if galois is not None and isinstance(x, galois.FieldArray):
        return type(x)
    return None


def _is_masked(x) -> bool:
    ma = sys.modules.get("numpy.ma")  # no masked array exists before numpy.ma is imported
    return ma is not None and isinstance(x, ma.MaskedArray)


def _is_sparse(x) -> bool:
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(x))


def check_operand(x, name: str, fn: str, *, fields: bool = True, flint: bool = True, of: str = "integers"):
    """``x`` if ``fn`` can read it as a matrix, else a TypeError naming the operand and what to pass.

    Every public function calls this on each operand before any conversion or
    kernel. It refuses ``None``, strings, ``dict`` s and other objects that are
    not arrays; scipy.sparse matrices and arrays (modlin multiplies dense
    matrices); NumPy masked arrays (the mask would be silently ignored); and
    ragged nested sequences. A nested sequence is returned as the
    :func:`numpy.asarray` of it, so it is converted once. ``fields=False``
    (functions of integers or floats, not of residues) also refuses galois
    ``FieldArray`` s and python-flint's ``nmod_mat`` / ``fmpz_mod_mat``;
    ``flint=False`` refuses ``fmpz_mat`` as well. ``of`` names what the
    entries should be, for the messages.

    ``flint=False`` is what the floating-point functions (:mod:`modlin.ozaki`)
    pass, and only they: every exact function takes ``fmpz_mat``. Their
    messages therefore suggest conversions to float arrays, which those
    functions take (an object array of ``fmpz`` or Python ints they refuse as
    not numeric), and name :func:`modlin.intmul` / :func:`modlin.matmul` for
    exact products.
    """
    from ._backend import is_cupy
    from ._flint import MODULAR, kind_of

    plain = f"NumPy arrays (or nested lists) of {of}"
    if x is None:
        raise TypeError(f"{name} is None: {fn} needs {plain}")
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{name} is a string ({x!r:.20}): {fn} needs {plain}")
    if is_cupy(x):
        return x
    if _is_masked(x):
        raise TypeError(f"{name} is a NumPy masked array, whose mask {fn} would ignore: pass "
                        f"{name}.filled(value) to give the masked entries a value, or {name}.data to drop the mask")
    if _is_sparse(x):
        raise TypeError(f"{name} is a scipy.sparse {type(x).__name__}: {fn} multiplies dense matrices; "
                        f"pass {name}.toarray()")
    field = field_of(x)
    kind = None if field is not None else kind_of(x)
    if not fields and (field is not None or kind in MODULAR):
        what = f"a galois FieldArray of {field.name}" if field is not None else f"a python-flint {kind}"
        # a float function (flint=False) refuses object arrays, which large residues
        # would give: suggest float arrays there
        view = (f"{name}.view(numpy.ndarray)" if field is not None
                else f"numpy.array([[int(e) for e in row] for row in {name}.tolist()])")
        if not flint:
            view = (f"{name}.view(numpy.ndarray).astype(float)" if field is not None
                    else f"numpy.array([[int(e) for e in row] for row in {name}.tolist()], dtype=float)")
        raise TypeError(f"{name} is {what}: {fn} takes {of}, not residues modulo p. For the product "
                        f"modulo p use modlin.matmul (it keeps the type); to take the representatives "
                        f"in [0, p) as {of}, pass {view}")
    if kind == "fmpz_mat" and not flint:
        # only the float functions refuse fmpz_mat; an object array of its fmpz
        # entries they would refuse as not numeric, so suggest a float array
        raise TypeError(f"{name} is a python-flint fmpz_mat: {fn} multiplies floats; pass "
                        f"numpy.array({name}.tolist(), dtype=float) (entries beyond 2**53 in magnitude "
                        f"are rounded), or for the exact product use modlin.intmul({name}, ...) "
                        f"(or modlin.matmul modulo p), which take fmpz_mat")
    if field is not None or kind is not None or isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple)):
        try:
            return np.asarray(x)
        except ValueError:
            raise TypeError(f"{name} is a ragged nested sequence (rows of different lengths): "
                            f"{fn} needs rectangular {plain}") from None
    if isinstance(x, (numbers.Number, np.generic)) or any(
            hasattr(x, a) for a in ("__array__", "__array_interface__", "__array_struct__")):
        return x  # scalars (refused later by shape) and array-likes NumPy converts
    raise TypeError(f"{name} is a {type(x).__name__}, not a matrix: {fn} needs {plain}")


def _index(p) -> int | None:
    """``p`` as an int if it is an integer (``operator.index``: int, NumPy ints, flint's fmpz), else None."""
    if isinstance(p, bool):
        return None
    try:
        return operator.index(p)
    except TypeError:
        return None


def unwrap_fields(p, *arrays, names: tuple[str, ...] | None = None, fn: str = "modlin.matmul",
                  modulus: str = "p"):
    """Return ``(p, field, arrays as plain ndarrays/objects)`` after checking the operands.

    Each operand goes through :func:`check_operand` first. galois
    ``FieldArray`` s and python-flint matrices are unwrapped; ``field`` is the
    type the result should have: the ``FieldArray`` class, a
    :class:`modlin._flint.FlintType`, or None for plain operands. ``p`` may be
    None when an operand fixes it: a ``FieldArray``, an ``nmod_mat`` or
    ``fmpz_mod_mat``, or an object array of python-flint ``nmod`` /
    ``fmpz_mod`` entries. Every modulus so fixed must be the same one, and equal
    ``p`` when ``p`` is given too. Plain operands mixed with them are read as
    integers. ``names`` name the operands in messages (default ``A``, ``B``, ...),
    ``modulus`` the modulus (``"p"``, or ``"m"`` for :mod:`modlin.gaussian`).
    """
    from ._flint import FlintType, kind_of, scalar_entries, to_array

    names = names or tuple("ABCDEFGH"[: len(arrays)])
    arrays = [check_operand(x, name, fn) for x, name in zip(arrays, names)]
    fields, flints, fixed = [], [], []  # fixed: (modulus, where it comes from)
    plain = []
    for x, name in zip(arrays, names):
        f = field_of(x)
        if f is not None:
            if f.degree != 1:
                raise ValueError(
                    f"{f.name} is an extension field; modlin multiplies over prime fields GF(p) "
                    "and integers mod p only"
                )
            fields.append(f)
            x = x.view(np.ndarray)
        elif (kind := kind_of(x)) is not None:
            x, ft = to_array(x, kind)
            flints.append(ft)
            if ft.modulus is not None:
                fixed.append((ft.modulus, f"{name}, an {ft.name}"))
        elif isinstance(x, np.ndarray) and x.dtype == object:
            found = scalar_entries(x)
            if found is not None:
                x, moduli = found
                fixed.extend((q, f"python-flint entries of {name} modulo {q}") for q in sorted(moduli))
        plain.append(x)
    field = None
    if fields and flints:
        raise TypeError("operands mix galois FieldArrays and python-flint matrices; convert them to one kind first")
    if fields:
        field = fields[0]
        if any(f is not field for f in fields[1:]):
            raise ValueError(
                f"operands belong to different fields ({', '.join(sorted({f.name for f in fields}))}); "
                "convert them to one field first"
            )
        fixed.insert(0, (int(field.characteristic), f"the operands' field {field.name}"))
    elif flints:
        modular = [f for f in flints if f.modulus is not None]
        if len({f.kind for f in modular}) > 1:
            raise TypeError("operands mix python-flint nmod_mat and fmpz_mod_mat; convert them to one type first")
        field = modular[0] if modular else FlintType("fmpz_mat")
    if len({q for q, _ in fixed}) > 1:
        raise ValueError(f"operands have different moduli: {'; '.join(w for _, w in fixed)}")
    if fixed:
        q, where = fixed[0]
        if p is None:
            p = q
        elif _index(p) is not None and _index(p) != q:
            if field is not None and not isinstance(field, FlintType):
                where = f"the operands' field {field.name}"
            raise ValueError(f"modulus {modulus} = {p} does not match {where}; "
                             f"omit {modulus} or pass {q}")
    if p is None:
        raise TypeError(f"the modulus {modulus} is required unless an operand fixes it "
                        "(a galois FieldArray, a python-flint nmod_mat or fmpz_mod_mat)")
    return p, field, plain


def integer_operands(*arrays, names: tuple[str, ...], fn: str):
    """``(flint type or None, arrays)`` for a function of integers (:func:`modlin.intmul`).

    Each operand goes through :func:`check_operand` with ``fields=False``;
    python-flint ``fmpz_mat`` operands are unwrapped, and the result should be
    an ``fmpz_mat`` when one was given. ``fmpz`` entries of object arrays become
    Python ints; ``nmod`` / ``fmpz_mod`` entries are residues, refused as
    ``FieldArray`` s are.
    """
    from ._flint import FlintType, kind_of, scalar_entries, to_array

    arrays = [check_operand(x, name, fn, fields=False) for x, name in zip(arrays, names)]
    out, ftype = [], None
    for x, name in zip(arrays, names):
        if kind_of(x) is not None:
            x, ftype = to_array(x, "fmpz_mat")[0], FlintType("fmpz_mat")
        elif isinstance(x, np.ndarray) and x.dtype == object:
            found = scalar_entries(x)
            if found is not None:
                if found[1]:
                    raise TypeError(f"{name} holds python-flint residues (nmod or fmpz_mod entries): {fn} takes "
                                    "integers; for the product modulo p use modlin.matmul, or convert them with int()")
                x = found[0]
        out.append(x)
    return ftype, out


#: BLAS transposition codes, as scipy.linalg.blas and solve_triangular spell them.
_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


def trans_code(value, name: str = "trans") -> int:
    """``0`` (no transpose), ``1`` (transpose) or ``2`` (conjugate transpose) from scipy's
    spellings: the ints 0, 1, 2 (also as bools or integral floats, which scipy's wrappers
    take too) or the letters ``'N'``, ``'T'``, ``'C'`` (either case)."""
    key = value.upper() if isinstance(value, str) else value
    if isinstance(key, (bool, np.bool_)):
        key = int(key)
    elif isinstance(key, (float, np.floating)) and float(key).is_integer():
        key = int(key)
    try:
        if isinstance(key, (str, int, np.integer)) and key in _TRANS:
            return _TRANS[key]
    except TypeError:  # unhashable
        pass
    raise ValueError(f"{name} must be 0, 1, 2 or 'N', 'T', 'C' (no transpose, transpose, conjugate "
                     f"transpose), got {value!r}")


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
    (:class:`modlin._rns._Halves`). Object arrays of Python ints in ``[-p, p)``
    go to pieces directly and are balanced there, without Python arithmetic."""
    from ._rns import _Halves, object_pieces

    x = np.asarray(x)
    if x.dtype == np.int64 and p < 2**63 and x.flags.c_contiguous and reduced_int64(x, p):
        # residues already: the residue kernel lifts them entry by entry, no lifted copy is made
        return _Halves(x, lift=p)
    if x.dtype == object and x.size:
        # values in [-p, p) fit the pieces of p with a sign; others (or entries that are not
        # plain ints): the general path decides
        pieces = object_pieces(x, p.bit_length() // 16 + 1)
        h = None if pieces is None else _Halves(x, pieces=pieces)
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
        x = float_integers(x, name)
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
    r = np.empty(x.shape, dtype=object)  # an array even for 0-d x, whose % would give an int
    r[...] = x.astype(object) % p
    np.subtract(r, p, out=r, where=r > half)
    return r.astype(np.int64) if p <= 2**64 else r


def _matmul_shapes(sa: tuple[int, ...], sb: tuple[int, ...]):
    """``numpy.matmul`` shape rules: ``((m, k, n), full shape, result shape)``, or ValueError."""
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError("matmul: operands must have at least one dimension (use * for scalars)")
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise ValueError(
            f"matmul: shapes {sa} and {sb} are not aligned: A has {k} columns but B has {k2} rows"
        )
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(f"matmul: stack shapes {a2[:-2]} and {b2[:-2]} do not broadcast") from None
    full = batch + (m, n)
    shape = full[:-2] + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
    return (m, k, n), full, shape


def max_abs(x: np.ndarray) -> int:
    """The largest ``|entry|`` of an integer array, as a Python int (0 when empty)."""
    if x.size == 0:
        return 0
    return max(abs(int(x.max())), abs(int(x.min())))
