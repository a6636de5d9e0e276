"""GEMM engines: the only code that knows which hardware multiplies the words.

An engine is a floating-point GEMM with a known exact range: every integer of
magnitude at most ``L = 2**t`` is representable, so a product whose partial sums
never leave ``[-L, L]`` is computed without rounding (see :mod:`modlin._contract`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Engine", "ENGINES", "get_engine"]


@dataclass(frozen=True)
class Engine:
    """A GEMM over one floating-point type.

    Attributes
    ----------
    name : str
        ``"fp64"`` or ``"fp32"``.
    dtype : numpy.dtype
        The word type the GEMM multiplies.
    t : int
        Significand precision in bits; integers up to ``2**t`` are exact.
    relative_cost : float
        Time of one multiply-add relative to an fp64 GEMM (cost model input).
    """

    name: str
    dtype: np.dtype
    t: int
    relative_cost: float

    @property
    def L(self) -> int:
        """Largest magnitude an accumulator may reach and stay exact."""
        return 2**self.t

    def gemm(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``a @ b`` with the engine's BLAS (``numpy.matmul``), into ``out`` if given."""
        return np.matmul(a, b, out=out)


ENGINES: dict[str, Engine] = {
    "fp64": Engine("fp64", np.dtype(np.float64), 53, 1.0),
    # SGEMM runs at about twice the DGEMM rate on the CPUs we measured.
    "fp32": Engine("fp32", np.dtype(np.float32), 24, 0.5),
}


def get_engine(name: str) -> Engine:
    """Return the engine called ``name``; a clear ValueError for an unknown one."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(
            f"unknown engine {name!r}; choose one of {sorted(ENGINES)}"
        ) from None
