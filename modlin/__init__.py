"""modlin: exact linear algebra over Z/pZ on floating-point GEMMs.

The main entry points are :func:`matmul` (``A @ B mod p``) and :func:`plan`
(how a product will be computed, and why it is exact).
"""

from ._engines import ENGINES
from ._matmul import matmul
from ._plan import MAX_MODULUS, Plan, plan

__version__ = "0.1.0"

__all__ = ["matmul", "plan", "Plan", "MAX_MODULUS", "ENGINES", "__version__"]
