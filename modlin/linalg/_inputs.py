"""Input checks and conversions for :mod:`modlin.linalg`, shared by every public function."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from modlin._arith.integers import residues_int64, residues_object
from modlin._arith.moduli import check_modulus
from modlin._arith.primes import is_prime
from modlin._engines.backend import cpu_only
from modlin._front.inputs import unwrap_fields
from modlin.linalg._arith import INT64_LIMIT, reduce
from modlin.linalg._bigmod import fits, limb_residues_of

__all__ = ["LinAlgError", "prepare", "require_prime", "working", "matrix", "square", "as_field",
           "check_unit_diagonal", "map_matrices", "stack_count"]


class LinAlgError(np.linalg.LinAlgError):
    """A matrix that the operation cannot take: singular, inconsistent, or of the wrong shape.

    A subclass of :class:`numpy.linalg.LinAlgError` (itself a ``ValueError``),
    so that code written for ``numpy.linalg`` or galois catches it, and code
    that caught the ``ValueError`` modlin raised before keeps working.
    """

    __module__ = "modlin.linalg"  # where users import it from, as tracebacks and the docs name it


@lru_cache(maxsize=64)
def _is_prime(p: int) -> bool:
    return is_prime(p)


def require_prime(p: int, fn: str) -> None:
    """ValueError unless ``p`` is prime: ``fn`` needs a field."""
    if not _is_prime(p):
        raise ValueError(
            f"{fn} needs a prime modulus: p = {p} is not prime, so Z/{p}Z is not a field "
            "(ranks, determinants, inverses and echelon forms mod p are defined here for prime p only)"
        )


def working(x, p: int, name: str, limbs: bool = False) -> np.ndarray:
    """A new C-contiguous array of the residues of ``x`` in ``[0, p)``: int64 for ``p < 2**63``,
    Python ints above, or with ``limbs`` a limb array modulo the primes of
    :mod:`modlin.linalg._bigmod` (:func:`~modlin.linalg._bigmod.limb_residues_of`). ``x`` itself is
    never modified."""
    if p < INT64_LIMIT:
        return reduce(residues_int64(x, p, name), p)
    if limbs and fits(p):
        return limb_residues_of(x, p, name)
    return residues_object(x, p, name)


def prepare(p, *arrays, names: tuple[str, ...], fn: str, prime: bool = True,
            shapes: tuple[str | None, ...] = (), stack: bool = False, limbs: bool = False):
    """``(p, field, working copies)`` of the inputs of the public function ``fn``.

    With ``prime`` the modulus must be prime (FieldArrays of GF(p) are prime
    fields already; python-flint's modular matrices may have any modulus).
    ``shapes`` says, operand by operand, whether it must be a ``"matrix"``
    (2-D) or a ``"square"`` one (None: no requirement); with ``stack`` a stack
    of them (``(..., m, n)``, as ``numpy.linalg`` takes) is accepted too; ``limbs``: the
    working copies are limb arrays where :func:`working` makes them (for ``fn`` that take them).
    Shapes are checked before any entry is converted, so a bad shape is
    reported as such whatever the modulus.
    """
    cpu_only(f"modlin.linalg.{fn}", *arrays)
    p, field, plain = unwrap_fields(p, *arrays, names=names, fn=f"modlin.linalg.{fn}")
    p = check_modulus(p)
    for x, name, form in zip(plain, names, shapes):
        if form is not None:
            (square if form == "square" else matrix)(np.shape(x), fn, name, stack=stack)
    if prime:  # a galois field's order too: GF(n, verify=False) takes a composite n
        require_prime(p, fn)
    return p, field, [working(x, p, name, limbs) for x, name in zip(plain, names)]


def matrix(shape: tuple[int, ...], fn: str, name: str = "A", *, stack: bool = False) -> None:
    """LinAlgError unless ``shape`` is that of a 2-D matrix (or, with ``stack``, of a stack of them)."""
    if len(shape) != 2 and not (stack and len(shape) > 2):
        what = "a 2-D matrix or a stack of them, (..., m, n)" if stack else "a 2-D matrix"
        raise LinAlgError(f"{fn}: {name} must be {what}, got an array of shape {shape}")


def square(shape: tuple[int, ...], fn: str, name: str = "A", *, stack: bool = False) -> None:
    """LinAlgError unless ``shape`` is that of a square matrix (or, with ``stack``, of a stack of them)."""
    matrix(shape, fn, name, stack=stack)
    if shape[-2] != shape[-1]:
        what = f"the last 2 dimensions of {name}" if len(shape) > 2 else name
        raise LinAlgError(f"{fn}: {what} must be square, got shape {shape}")


def check_unit_diagonal(t: np.ndarray, p: int) -> None:
    """LinAlgError naming the first diagonal entry of ``t`` that is not a unit modulo ``p``."""
    d = np.diagonal(t)
    g = np.gcd(d, p) if d.dtype != object else np.array([math.gcd(x, p) for x in d.tolist()], dtype=object)
    bad = np.flatnonzero(g != 1)
    if bad.size:
        i = int(bad[0])
        why = "zero" if d[i] == 0 else f"not invertible (gcd with p is {g[i]})"
        raise LinAlgError(f"the triangular matrix is singular modulo {p}: diagonal entry {i} is {why}")


def as_field(x, field):
    """``x`` as a FieldArray of ``field``, or unchanged without one."""
    return x if field is None else field(x)


def map_matrices(f, arrays: list[np.ndarray], cores: tuple[int, ...], out_core: tuple[int, ...], dtype):
    """``f`` on each matrix of stacked working arrays, the results gathered in one array.

    The last ``cores[i]`` dimensions of ``arrays[i]`` are what ``f`` takes (2
    for a matrix, 1 for a vector); the leading ones broadcast against each
    other, as in ``numpy.linalg``. Each call returns an array of shape
    ``out_core`` (or a scalar for ``()``), written into the result of shape
    ``leading + out_core`` and ``dtype``. ``f`` gets writable arrays it may
    overwrite (copies where the stacks were broadcast).
    """
    lead = np.broadcast_shapes(*(a.shape[:a.ndim - c] for a, c in zip(arrays, cores)))
    arrays = [a if a.shape[:a.ndim - c] == lead else np.broadcast_to(a, lead + a.shape[a.ndim - c:])
              for a, c in zip(arrays, cores)]
    out = np.empty(lead + tuple(out_core), dtype=dtype)
    for idx in np.ndindex(lead):
        try:
            out[idx] = f(*(x if x.flags.writeable else x.copy() for x in (a[idx] for a in arrays)))
        except LinAlgError as exc:
            if not lead:
                raise
            raise LinAlgError(f"{exc} (the matrix at index {idx} of the stack)") from None
    return out


def stack_count(*arrays: np.ndarray, cores: tuple[int, ...] = (2,)) -> int:
    """How many matrices :func:`map_matrices` runs ``f`` on for these working arrays (the last
    ``cores[i]`` dimensions of ``arrays[i]`` being one item): the size of their broadcast
    leading shape, 1 for a lone matrix."""
    return math.prod(np.broadcast_shapes(*(a.shape[:a.ndim - c] for a, c in zip(arrays, cores))))
