"""GEMM engines: the only code that knows which hardware multiplies the words.

An engine multiplies integer words held in ``dtype`` and accumulates in
``acc_dtype``; every partial sum of magnitude at most ``L`` is exact, so a
product whose partial sums never leave ``[-L, L]`` is computed without
rounding (see :mod:`modlin._planning.contract`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from modlin._engines import cuda as _cuda
from modlin._engines.backend import is_cupy
from modlin._engines.threads import blas_at_most, blas_count, gemm_threads
from modlin._runtime.calibration import GPU_RELATIVE_COST

#: Where a product runs: NumPy arrays on the CPU, CuPy arrays on a CUDA GPU.
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Engine:
    """A GEMM over one word type.

    Attributes
    ----------
    name : str
        ``"fp64"``, ``"fp32"`` or ``"int8"``.
    dtype : numpy.dtype
        The word type the GEMM multiplies.
    acc_dtype : numpy.dtype
        The type of its results (the accumulator).
    L : int
        Largest magnitude a partial sum may reach and stay exact:
        ``2**53`` (fp64), ``2**24`` (fp32), ``2**31 - 1`` (int8 words, int32 sums).
    relative_cost : float
        Time of one multiply-add relative to an fp64 GEMM (cost model input).
    max_modulus : int
        Largest modulus whose words the engine holds.
    multiword : bool
        Whether products may split residues into several words (int8 words are
        residues modulo p <= 256 in ``[-128, 127]``, never split).
    automatic : bool
        Whether the planner considers the engine without being asked.
    """

    name: str
    dtype: np.dtype
    acc_dtype: np.dtype
    L: int
    relative_cost: float
    max_modulus: int
    multiword: bool = True
    automatic: bool = True

    @property
    def L_text(self) -> str:
        """``L`` written as a power of two (``"2**53"``, ``"2**31 - 1"``)."""
        for e in range(64):
            if self.L == 2**e:
                return f"2**{e}"
            if self.L == 2**e - 1:
                return f"2**{e} - 1"
        return str(self.L)

    def gemm(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``a @ b`` exactly (within the contract), into ``out`` if given.

        On CuPy arrays: cuBLAS DGEMM/SGEMM, or ``gemmEx`` with int8 inputs and
        int32 sums (tensor cores) for the int8 engine.
        """
        if self.name == "int8" and is_cupy(a):
            return _cuda.gemm_i8(a, b, out)
        if is_cupy(a):
            return np.matmul(a, b, out=out)
        # BLAS on the threads of modlin.limits, no more than other processes leave free; a
        # cap only where it lowers BLAS' count (entering one costs a few us a GEMM)
        threads = gemm_threads()
        with blas_at_most(threads) if threads < blas_count() else contextlib.nullcontext():
            if self.name != "int8":
                return np.matmul(a, b, out=out)
            # The int8 engine is the GPU's (int8 tensor cores, int32 sums). Here it is
            # emulated exactly: every int32 sum the contract admits is below 2**31 < 2**53,
            # so an fp64 GEMM of the same words returns the same integers.
            c = np.matmul(a.astype(np.float64), b.astype(np.float64))
        if out is None:
            return c.astype(self.acc_dtype)
        np.copyto(out, c, casting="unsafe")
        return out


ENGINES: dict[str, Engine] = {
    # The floating-point reduction (arXiv 2601.07508, Alg 2.1) needs p < 2**52.
    "fp64": Engine("fp64", np.dtype(np.float64), np.dtype(np.float64), 2**53, 1.0, 2**52 - 1),
    # SGEMM runs at about twice the DGEMM rate on the CPUs we measured. The cap
    # 2**23 is not a bound of the proof: reductions run in float64 and the contract
    # keeps every fp32 accumulator within 2**24, so it alone would admit (3,3) words
    # up to p ~ 2**25; but lambda falls as 1/p**2 and the planner never picks fp32
    # above a few thousand, so the engine stops at 2**23, where its tests stop.
    "fp32": Engine("fp32", np.dtype(np.float32), np.dtype(np.float32), 2**24, 0.5, 2**23),
    # Emulated on the CPU (several times slower than fp64): used only when asked.
    "int8": Engine("int8", np.dtype(np.int8), np.dtype(np.int32), 2**31 - 1, 4.0, 256,
                   multiword=False, automatic=False),
}


def get_engine(name: str) -> Engine:
    """Return the engine called ``name``; a clear ValueError for an unknown one."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(
            f"unknown engine {name!r}; choose one of {sorted(ENGINES)}"
        ) from None


def _check_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    return device


def engines_on(device: str) -> tuple[str, ...]:
    """The engines the planner weighs by itself on ``device``."""
    if _check_device(device) == "cuda":
        return tuple(GPU_RELATIVE_COST)
    return tuple(e.name for e in ENGINES.values() if e.automatic)


def relative_cost(engine: str, device: str = "cpu") -> float:
    """Time of one multiply-add of ``engine`` on ``device``, relative to an fp64 GEMM there."""
    if _check_device(device) == "cuda":
        try:
            return GPU_RELATIVE_COST[engine]
        except KeyError:
            raise ValueError(f"the {engine} engine does not run on the GPU; use one of "
                             f"{sorted(GPU_RELATIVE_COST)}") from None
    return get_engine(engine).relative_cost
