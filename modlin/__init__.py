"""modlin: exact linear algebra over Z/pZ and the integers on floating-point GEMMs.

The main entry points are :func:`matmul` (``A @ B mod p`` for any ``p``),
:func:`intmul` (exact integer products) and :func:`plan` (how a product will
be computed, and why it is exact). :mod:`modlin.gaussian` holds Gaussian-integer
products (2M), :mod:`modlin.linalg` linear algebra modulo a prime (rank, det, inv,
solve, nullspace, rref, PLUQ) and :mod:`modlin.ozaki` float GEMMs emulated on exact
integer ones.
"""

from modlin import gaussian, linalg, ozaki  # noqa: F401  (the public subpackages, in __all__)
from modlin._engines.gemm import ENGINES
from modlin._front.products import intmul, matmul
from modlin._planning.plan import MAX_MODULUS, Plan
from modlin._planning.planner import plan
from modlin._planning.rnsplan import RNSPlan
from modlin._runtime.limits import limits

__version__ = "0.2.0.dev0"

__all__ = ["matmul", "intmul", "plan", "limits", "Plan", "RNSPlan", "MAX_MODULUS", "ENGINES", "gaussian", "linalg", "ozaki", "__version__"]
