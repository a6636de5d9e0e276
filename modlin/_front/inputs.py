"""Input checks at the front door: what an operand is (NumPy, galois, python-flint, masked,
sparse), whether its entries are integers, and the clear error when they are not."""

from __future__ import annotations

import numbers
import sys

import numpy as np

from modlin._arith.moduli import as_index
from modlin._engines.backend import is_cupy
from modlin._front.flint import MODULAR, FlintType, kind_of, scalar_entries, to_array


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


def unwrap_fields(p, *arrays, names: tuple[str, ...] | None = None, fn: str = "modlin.matmul",
                  modulus: str = "p"):
    """Return ``(p, field, arrays as plain ndarrays/objects)`` after checking the operands.

    Each operand goes through :func:`check_operand` first. galois
    ``FieldArray`` s and python-flint matrices are unwrapped; ``field`` is the
    type the result should have: the ``FieldArray`` class, a
    :class:`modlin._front.flint.FlintType`, or None for plain operands. ``p`` may be
    None when an operand fixes it: a ``FieldArray``, an ``nmod_mat`` or
    ``fmpz_mod_mat``, or an object array of python-flint ``nmod`` /
    ``fmpz_mod`` entries. Every modulus so fixed must be the same one, and equal
    ``p`` when ``p`` is given too. Plain operands mixed with them are read as
    integers. ``names`` name the operands in messages (default ``A``, ``B``, ...),
    ``modulus`` the modulus (``"p"``, or ``"m"`` for :mod:`modlin.gaussian`).
    """

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
        elif as_index(p) is not None and as_index(p) != q:
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


