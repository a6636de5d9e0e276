"""Which array library the operands live in: NumPy (CPU) or CuPy (GPU), or dask.

CuPy and dask arrays are recognised through ``sys.modules`` without importing
CuPy or dask, so the CPU path never pays for (or needs) them. The result of every public function
lives where its operands do; mixing the two is refused, because moving a
matrix between host and device silently would cost more than the product.
"""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np


def is_cupy(x) -> bool:
    """Whether ``x`` is a CuPy array (False when CuPy was never imported)."""
    cp = sys.modules.get("cupy")
    return cp is not None and isinstance(x, cp.ndarray)


def is_dask(x) -> bool:
    """Whether ``x`` is a ``dask.array.Array`` (False when dask.array was never imported)."""
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(x, da.Array)


def namespace(*arrays) -> ModuleType:
    """``cupy`` when the operands are CuPy arrays, ``numpy`` otherwise.

    ``None`` entries are ignored. Operands that are neither (lists, scalars,
    galois arrays) count as NumPy.

    Raises
    ------
    TypeError
        When NumPy and CuPy operands are mixed.
    """
    kinds = {is_cupy(x) for x in arrays if x is not None}
    if kinds == {True}:
        return sys.modules["cupy"]
    if kinds == {True, False}:
        raise TypeError(
            "operands mix NumPy and CuPy arrays; move them to one device first "
            "(cupy.asarray(x) for the GPU, x.get() for the host)"
        )
    return np


def cpu_only(name: str, *arrays) -> None:
    """Refuse CuPy operands in a function that has no GPU path yet, saying so."""
    flat = [y for x in arrays for y in (x if isinstance(x, tuple) else (x,))]
    if any(is_cupy(x) for x in flat):
        raise TypeError(f"{name} does not run on CuPy arrays yet; pass NumPy arrays (x.get()), "
                        "or use modlin.matmul / modlin.ozaki, which do")
