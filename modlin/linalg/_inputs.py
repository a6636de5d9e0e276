"""Input checks and conversions for :mod:`modlin.linalg`, shared by every public function."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._backend import cpu_only
from .._convert import balanced_lift, residues_int64, unwrap_fields
from .._plan import _check_modulus
from ._arith import INT64_LIMIT, reduce

__all__ = ["prepare", "require_prime", "working", "matrix", "square", "as_field", "check_unit_diagonal"]


@lru_cache(maxsize=64)
def _is_prime(p: int) -> bool:
    from .._primes import is_prime

    return is_prime(p)


def require_prime(p: int, fn: str) -> None:
    """ValueError unless ``p`` is prime: ``fn`` needs a field."""
    if not _is_prime(p):
        raise ValueError(
            f"{fn} needs a prime modulus: p = {p} is not prime, so Z/{p}Z is not a field "
            "(ranks, determinants, inverses and echelon forms mod p are defined here for prime p only)"
        )


def working(x, p: int, name: str) -> np.ndarray:
    """A new C-contiguous array of the residues of ``x`` in ``[0, p)``: int64 for ``p < 2**63``,
    Python ints above. ``x`` itself is never modified."""
    if p < INT64_LIMIT:
        return reduce(residues_int64(x, p, name), p)
    r = balanced_lift(x, p, name)
    out = np.empty(r.shape, dtype=object)
    out[...] = r.astype(object) % p
    return out


def prepare(p, *arrays, names: tuple[str, ...], fn: str, prime: bool = True,
            shapes: tuple[str | None, ...] = ()):
    """``(p, field, working copies)`` of the inputs of the public function ``fn``.

    With ``prime`` the modulus must be prime (FieldArrays of GF(p) are prime
    fields already; python-flint's modular matrices may have any modulus).
    ``shapes`` says, operand by operand, whether it must be a ``"matrix"``
    (2-D) or a ``"square"`` one (None: no requirement); shapes are checked
    before any entry is converted, so a bad shape is reported as such whatever
    the modulus.
    """
    cpu_only(f"modlin.linalg.{fn}", *arrays)
    p, field, plain = unwrap_fields(p, *arrays, names=names, fn=f"modlin.linalg.{fn}")
    p = _check_modulus(p)
    for x, name, form in zip(plain, names, shapes):
        if form is not None:
            (square if form == "square" else matrix)(np.shape(x), fn, name)
    if prime and not getattr(field, "is_prime_field", False):
        require_prime(p, fn)
    return p, field, [working(x, p, name) for x, name in zip(plain, names)]


def matrix(shape: tuple[int, ...], fn: str, name: str = "A") -> None:
    """ValueError unless ``shape`` is that of a 2-D matrix."""
    if len(shape) != 2:
        raise ValueError(f"{fn}: {name} must be a 2-D matrix, got an array of shape {shape}")


def square(shape: tuple[int, ...], fn: str, name: str = "A") -> None:
    """ValueError unless ``shape`` is that of a square matrix."""
    matrix(shape, fn, name)
    if shape[0] != shape[1]:
        raise ValueError(f"{fn}: {name} must be square, got shape {shape}")


def check_unit_diagonal(t: np.ndarray, p: int) -> None:
    """ValueError naming the first diagonal entry of ``t`` that is not a unit modulo ``p``."""
    d = np.diagonal(t)
    g = np.gcd(d, p) if d.dtype != object else np.array([math.gcd(x, p) for x in d.tolist()], dtype=object)
    bad = np.flatnonzero(g != 1)
    if bad.size:
        i = int(bad[0])
        why = "zero" if d[i] == 0 else f"not invertible (gcd with p is {g[i]})"
        raise ValueError(f"the triangular matrix is singular modulo {p}: diagonal entry {i} is {why}")


def as_field(x, field):
    """``x`` as a FieldArray of ``field``, or unchanged without one."""
    return x if field is None else field(x)
