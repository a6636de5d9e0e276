"""python-flint interop: ``nmod_mat``, ``fmpz_mod_mat`` and ``fmpz_mat`` in, the same type out.

python-flint is recognised through ``sys.modules`` and never imported here: a
program that never imported it cannot hold its objects, so importing modlin
stays cheap and python-flint stays optional (as CuPy is detected in
:mod:`modlin._engines.backend`).

A flint matrix becomes a NumPy array of its entries' integer values (int64 or
uint64 where they fit, Python ints otherwise) and the result goes back with
:class:`FlintType`, which plays the part of a galois ``FieldArray`` class for
the front doors: callable on a result, with a ``name`` for messages. python-flint
has no buffer interface, so both directions go through one Python int per entry
(``entries()`` then ``int``; a flat list of ints to the constructor): 0.1 to
0.7 s for a 500 x 500 round trip, by the size of the entries, at the speed of
python-flint's own ``entries()`` and constructors (docs/guide/matmul.rst).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from modlin._arith.pyints import all_exact_ints

#: The python-flint matrix types modlin reads, in the order they are tested.
KINDS = ("nmod_mat", "fmpz_mod_mat", "fmpz_mat")


#: The types whose entries carry a modulus (the result keeps it).
MODULAR = ("nmod_mat", "fmpz_mod_mat")


def _flint():
    return sys.modules.get("flint")


def kind_of(x) -> str | None:
    """``"nmod_mat"``, ``"fmpz_mod_mat"`` or ``"fmpz_mat"`` for a python-flint matrix, else None."""
    flint = _flint()
    if flint is None:
        return None
    for kind in KINDS:
        t = getattr(flint, kind, None)
        if isinstance(t, type) and isinstance(x, t):
            return kind
    return None


@lru_cache(maxsize=64)
def _context(p: int):
    """One ``fmpz_mod_ctx`` per modulus: python-flint cannot give back an operand's own
    context, and contexts of one modulus compare equal and mix freely."""
    return _flint().fmpz_mod_ctx(p)


@lru_cache(maxsize=64)
def _poly_context(p: int):
    """One ``fmpz_mod_poly_ctx`` per modulus, for the same reason as :func:`_context`."""
    return _flint().fmpz_mod_poly_ctx(p)


@dataclass(frozen=True)
class FlintType:
    """The python-flint type of a result: ``kind`` and, for modular kinds, the modulus.

    Called on a result array it returns that type: a matrix for a 2-D array, a
    column matrix for a 1-D one (python-flint matrices are 2-D; callers that know
    a vector is a row reshape it first), and for a 0-d one the scalar of the
    type's ring: ``nmod`` for ``nmod_mat``, ``fmpz_mod`` for ``fmpz_mod_mat``
    (as python-flint's own ``det`` returns), a Python int for ``fmpz_mat``.
    """

    kind: str
    modulus: int | None = None

    @property
    def name(self) -> str:
        return self.kind if self.modulus is None else f"{self.kind} modulo {self.modulus}"

    @property
    def is_prime_field(self) -> bool:
        """Always False: python-flint's modular matrices accept composite moduli, so
        :mod:`modlin.linalg` checks primality itself (a galois ``GF(p)`` is prime already)."""
        return False

    def check_product(self, shape: tuple[int, ...]) -> None:
        """ValueError, before any work, for a product whose result is a stack of matrices."""
        if len(shape) > 2:
            raise ValueError(f"the result has shape {shape}, a stack of matrices, which python-flint "
                             "matrices cannot hold: pass NumPy arrays for stacks")

    def product(self, c: np.ndarray, a_ndim: int):
        """A product ``A @ B`` as this type: with a 1-D ``A`` (and a matrix ``B``) a 1 x n row."""
        return self(c[np.newaxis] if c.ndim == 1 and a_ndim == 1 else c)

    def poly(self, coeffs: list[int]):
        """The python-flint polynomial of this type's ring with ``coeffs`` (low to high degree):
        ``nmod_poly``, ``fmpz_mod_poly`` or ``fmpz_poly``, as the matrices' own ``charpoly`` returns."""
        flint = _flint()
        if self.kind == "nmod_mat":
            return flint.nmod_poly(coeffs, self.modulus)
        if self.kind == "fmpz_mod_mat":
            return _poly_context(self.modulus)(coeffs)
        return flint.fmpz_poly(coeffs)

    def __call__(self, x):
        flint = _flint()
        x = np.asarray(x)
        if x.ndim == 0:
            v = int(x)
            if self.kind == "nmod_mat":
                return flint.nmod(v, self.modulus)
            if self.kind == "fmpz_mod_mat":
                return _context(self.modulus)(v)
            return v
        if x.ndim == 1:
            x = x[:, np.newaxis]
        if x.ndim != 2:
            raise ValueError(f"python-flint matrices are 2-D; this result has shape {x.shape}: "
                             "pass NumPy arrays for stacks of matrices")
        m, n = x.shape
        entries = x.ravel().tolist()  # Python ints, the constructors' fastest input
        if self.kind == "nmod_mat":
            return flint.nmod_mat(m, n, entries, self.modulus)
        if self.kind == "fmpz_mod_mat":
            return flint.fmpz_mod_mat(m, n, entries, _context(self.modulus))
        return flint.fmpz_mat(m, n, entries)


def to_array(x, kind: str) -> tuple[np.ndarray, FlintType]:
    """A python-flint matrix as an array of its entries' integer values, and its type.

    int64 when every value fits (always for moduli up to ``2**63``), uint64 for
    ``nmod_mat`` moduli up to ``2**64``, Python ints in an object array otherwise.
    The values of modular entries are their representatives in ``[0, n)``.
    """
    m, n = x.nrows(), x.ncols()
    modulus = None if kind == "fmpz_mat" else int(x.modulus())
    # int() of each entry is the only exact way out of python-flint (no buffer interface)
    values = list(map(int, x.entries()))
    if modulus is not None and modulus <= 2**63:
        a = np.array(values, dtype=np.int64)
    elif modulus is not None and modulus <= 2**64:
        a = np.array(values, dtype=np.uint64)
    else:
        try:
            a = np.array(values, dtype=np.int64)  # OverflowError beyond int64, never a rounding
        except OverflowError:
            a = np.empty(len(values), dtype=object)
            a[:] = values
    return a.reshape(m, n), FlintType(kind, modulus)


def _entry_modulus(e) -> int:
    """The modulus of an ``nmod`` or ``fmpz_mod`` entry. ``fmpz_mod`` has no accessor for
    it, but ``-1`` there is ``n - 1``."""
    if hasattr(e, "modulus"):
        return int(e.modulus())
    one = e - e + 1
    return int(-one) + 1


def scalar_entries(x: np.ndarray) -> tuple[np.ndarray, set[int]] | None:
    """An object array holding python-flint scalars as one of Python ints, and the moduli
    of its modular entries (``nmod``, ``fmpz_mod``); None when it holds none.

    Only called on object arrays while python-flint is imported; one pass over
    the entry types, as :func:`modlin._arith.pyints.python_ints` makes.
    """
    flint = _flint()
    if flint is None or x.dtype != object or x.size == 0 or all_exact_ints(x):
        return None
    types = set(map(type, x.flat))
    scalar = tuple(t for t in (getattr(flint, n, None) for n in ("fmpz", "nmod", "fmpz_mod")) if isinstance(t, type))
    if not any(issubclass(t, scalar) for t in types):
        return None
    modular = tuple(t for t in (getattr(flint, n, None) for n in ("nmod", "fmpz_mod")) if isinstance(t, type))
    moduli = {_entry_modulus(e) for e in x.flat if isinstance(e, modular)}
    conv = np.empty(x.shape, dtype=object)
    conv[...] = np.frompyfunc(lambda e: int(e) if isinstance(e, scalar) else e, 1, 1)(x)
    return conv, moduli
