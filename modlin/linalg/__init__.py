"""Exact linear algebra modulo a prime ``p``, on top of :func:`modlin.matmul`.

A block-recursive PLUQ decomposition (FFPACK's, revealing the rank profile
matrix) does nearly all of its work in triangular solves and products of
blocks, and everything else is built on it, so every speed-up of the product
speeds up all of linear algebra:

- :func:`pluq` -- ``A[P][:, Q] = L @ U`` with the rank and rank profiles;
- :func:`rank`, :func:`det`, :func:`inv`;
- :func:`solve` -- ``A @ X = B`` for any shape and rank, or a clear error;
- :func:`nullspace` -- right (columns) or left (rows) kernel bases;
- :func:`rref` -- reduced row echelon form and pivot columns;
- :func:`trsm` -- triangular solves, BLAS-style (any modulus whose diagonal
  entries are units);
- :func:`charpoly`, :func:`minpoly` -- characteristic and minimal polynomials,
  from Krylov bases (block Krylov and a polynomial determinant, or Krylov
  stages split off by Schur complements);
- :func:`matrix_power` -- ``A**e`` for any integer ``e``, by squarings.

:func:`det`, :func:`inv`, :func:`solve`, :func:`rank`, :func:`charpoly` and
:func:`matrix_power` take stacks ``(..., n, n)`` as ``numpy.linalg`` does.
Singular and inconsistent systems (and non-square matrices) raise
:class:`LinAlgError`, a subclass of ``numpy.linalg.LinAlgError`` (a
``ValueError``).

Every function takes a modulus of any size (int64 results below ``2**63``,
object arrays of Python ints above), galois ``FieldArray`` s and python-flint
``nmod_mat`` / ``fmpz_mod_mat`` / ``fmpz_mat`` matrices in and out (the same
type comes back; ``det`` of an ``nmod_mat`` is an ``nmod``, ``charpoly`` and
``minpoly`` give ``galois.Poly`` and python-flint polynomials).
All but :func:`trsm` need a prime modulus and refuse a composite one.

With ``modlin.limits(progress=True)`` (or ``MODLIN_PROGRESS=1``), a call of
:func:`det`, :func:`rank`, :func:`inv`, :func:`solve`, :func:`nullspace`,
:func:`rref`, :func:`pluq`, :func:`trsm`, :func:`charpoly` or :func:`minpoly`
(a stack included) that the cost model expects to take more than about two
seconds shows one progress display on standard error for all of its work, in
percent of its modelled cost, with the elapsed and remaining times; the products
it makes show no bar of their own.
"""

from modlin.linalg._api import charpoly, det, inv, nullspace, rank, solve
from modlin.linalg._charpoly import minpoly
from modlin.linalg._inputs import LinAlgError
from modlin.linalg._pluq import PLUQ, pluq
from modlin.linalg._power import matrix_power
from modlin.linalg._rational import RationalArray
from modlin.linalg._solve import rref
from modlin.linalg._triangular import trsm

__all__ = ["pluq", "PLUQ", "rank", "det", "inv", "solve", "nullspace", "rref", "trsm", "charpoly", "minpoly",
           "matrix_power", "LinAlgError", "RationalArray"]
