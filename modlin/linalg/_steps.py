"""The progress of a :mod:`modlin.linalg` call: its modelled cost, and one display for all of it.

A call shows progress by the products' rule (:func:`modlin._runtime.progress.wanted`:
:func:`modlin.limits` asks for it, and the cost model expects more than
:data:`modlin._runtime.progress.MIN_SECONDS`), its cost being what its algorithm's model
(beside the algorithm: :func:`~modlin.linalg._pluq.pluq_cost`,
:func:`~modlin.linalg._triangular.trsm_cost`, ...) adds up for a matrix of generic
rank profile, in the multiply-adds of a large fp64 GEMM that price the products.
The display counts percent of that cost: the steps that do the work (each product,
each base-case elimination or triangular inverse, the evaluations of a polynomial
determinant) advance it by their own modelled cost as they finish, so it moves
at the pace of the work, and the remaining time it shows follows. Work the model
did not foresee (a rank-deficient matrix needs less, a charpoly's quotients more)
ends the count early, or holds it at 99 % until the call returns.

The products inside a call show no bar of their own (:func:`modlin._runtime.progress.covering`).
"""

from __future__ import annotations

import contextvars
import threading
from contextlib import contextmanager
from typing import Callable

from modlin._planning.rnsplan import RNSPlan
from modlin._runtime.calibration import (
    BIG_INVERSE,
    BIG_UPDATE,
    CALIBRATION_THREADS,
    KERNEL_UPDATE,
    LIMB_CRT,
    LIMB_RESIDUE,
    OBJECT_INVERSE,
    OBJECT_PIECE,
    OBJECT_POINTS,
    OBJECT_UPDATE,
    OBJECT_UPDATE_BITS,
    POINT_UPDATE,
    PROGRESS_STEPS as STEPS,
)
from modlin._runtime.limits import current as current_limits, planning_threads
from modlin._runtime.progress import covering
from modlin.linalg._bigmod import fits, limbs, product_basis

__all__ = ["tracked", "advance", "product_cost", "limb_product_cost", "elimination_cost", "inversion_cost", "substitution_cost",
           "points_cost", "STEPS"]


# Costs of the base cases, in multiply-adds of a large fp64 GEMM on the 2-core development
# machine (0.0185 ns each, see modlin._planning.rnsplan.OBJECT_PIECE). Rough (the fastest of two or
# three runs, on a machine busy with other work): they decide when a call shows progress
# and how its display moves, nothing else. Measured on pluq_base and lower_inverse of
# 128 x 128 blocks, and on _det_poly at n = 600, b = 24 (int64) or n = 300, b = 16 (Python ints).


def _serial() -> float:
    """The cost of one thread's work relative to the GEMMs', which use every core."""
    return planning_threads(None) / CALIBRATION_THREADS


def product_cost(pl, m: int, k: int, n: int, objects: bool, prepared: bool = False) -> float:
    """Modelled cost of an ``m x k`` by ``k x n`` product with the plan ``pl``: its own
    (:meth:`modlin.Plan.cost`), and for Python-int operands (``objects``) their conversion
    to 16-bit pieces (:data:`modlin._planning.rnsplan.OBJECT_PIECE`; not that of a ``prepared`` left one)."""
    if m * n == 0 or k == 0:
        return 0.0
    cost = pl.cost((m, k, n))
    if objects and isinstance(pl, RNSPlan):
        cost += OBJECT_PIECE * pl.pieces() * ((0 if prepared else m * k) + k * n) * _serial()
    return cost


def limb_product_cost(p: int, m: int, k: int, n: int) -> float:
    """Modelled cost of :func:`~modlin.linalg._bigmod.limb_product` of an ``m x k`` by a ``k x n``
    limb array: one GEMM per modulus, the residues of both operands and the CRT of the result
    (:data:`~modlin._runtime.calibration.LIMB_RESIDUE`, :data:`~modlin._runtime.calibration.LIMB_CRT`
    per entry and modulus)."""
    if m * n == 0 or k == 0:
        return 0.0
    N = len(product_basis(p, max(k - 1, 0).bit_length())[0].moduli)
    return N * (m * k * n + LIMB_RESIDUE * (m * k + k * n) + LIMB_CRT * m * n)


def elimination_cost(p: int, m: int, n: int, r: int, objects: bool) -> float:
    """Modelled cost of the base case's elimination of an ``m x n`` block of rank ``r``
    (:func:`~modlin.linalg._elimination.pluq_base`): pivot ``i`` updates ``(m-1-i)(n-1-i)``
    entries (about ``m n r - (m + n) r**2 / 2 + r**3 / 3`` in all)."""
    a, b = m - 1, n - 1
    updates = r * a * b - (a + b) * r * (r - 1) // 2 + (r - 1) * r * (2 * r - 1) // 6
    return max(updates, 0) * (_object_update(p) if objects else KERNEL_UPDATE) * _serial()


def _object_update(p: int) -> float:
    """One update of a base case on residues beyond int64: the compiled multi-limb kernels'
    (:mod:`modlin.linalg._bigmod`, about ``L**2`` limb products) where they take ``p``,
    NumPy's loops on Python ints elsewhere."""
    if fits(p):
        return BIG_UPDATE * limbs(p) ** 2
    return OBJECT_UPDATE + OBJECT_UPDATE_BITS * p.bit_length() ** 1.6


def inversion_cost(p: int, k: int, objects: bool) -> float:
    """Modelled cost of the inverse of a small ``k x k`` triangle
    (:func:`~modlin.linalg._elimination.lower_inverse`): ``k**3 / 6`` updates."""
    per = _object_update(p) * (BIG_INVERSE if fits(p) else OBJECT_INVERSE) if objects else KERNEL_UPDATE
    return k**3 / 6 * per * _serial()


def substitution_cost(p: int, k: int, w: int) -> float:
    """Modelled cost of a ``k x k`` triangle's substitution against ``w`` columns
    (:func:`~modlin.linalg._elimination.substitute`): ``k**2 w / 2`` updates of the
    big-prime kernels."""
    return k * k * w / 2 * _object_update(p) * _serial()


def points_cost(p: int, r: int, m: int, q: int, objects: bool) -> float:
    """Modelled cost of a ``m x m`` polynomial matrix's determinant of degree ``r`` from ``r``
    points (:func:`~modlin.linalg._charpoly._det_poly`, beyond its product for Python ints):
    Horner's rule at each point (``m**2 q`` updates, a product for Python ints), an
    elimination (``m**3 / 3``), and the interpolation (``r**2``, one thread)."""
    if objects:
        return (r * m**3 / 3 * OBJECT_POINTS + r * r) * _object_update(p) * _serial()
    return r * (m * m * q + m**3 / 3) * POINT_UPDATE + r * r * KERNEL_UPDATE * _serial()


class _Call:
    """The modelled cost done so far in one call, and its display (None: not shown)."""

    def __init__(self, total: float, shown):
        self.total, self.shown, self.done, self.steps = total, shown, 0.0, 0
        self.lock = threading.Lock()  # steps may finish on worker threads

    def add(self, cost: float) -> None:
        with self.lock:
            self.done += cost
            # 99 at most until the call returns: the model may have foreseen less than there is
            step = min(STEPS - 1, int(STEPS * self.done / self.total)) if self.total > 0 else 0
            if step > self.steps:
                self.shown.update(step - self.steps)
                self.steps = step

    def finish(self) -> None:
        if self.shown is not None and self.steps < STEPS:
            self.shown.update(STEPS - self.steps)
            self.steps = STEPS


#: The call in progress in this context (thread, or a worker's copy of its context).
_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("modlin.linalg.call", default=None)


@contextmanager
def tracked(fn: str, p: int | None, count: int, cost: Callable[[], float]):
    """The progress of the public function ``fn`` (modulo ``p``, or over Z and Q for None)
    on ``count`` matrices, each of ``cost()``
    modelled multiply-adds (asked only when :func:`modlin.limits` wants progress): one display
    for the whole call when it is expected to run long, advanced by :func:`advance`, and no
    bar of the products inside it either way. Inside another call, that call's display counts."""
    if _call.get() is not None or not current_limits().progress:
        yield
        return
    total = count * cost()
    where = "over Z and Q" if p is None else f"mod a {p.bit_length()}-bit p"
    desc = f"modlin.linalg.{fn} {where}" + ("" if count == 1 else f", {count} matrices")
    with covering(STEPS, total, desc, "%") as shown:
        state = _Call(total, shown)
        token = _call.set(state)
        try:
            yield
        finally:
            _call.reset(token)
        state.finish()  # not on an exception: the display stops where the work did


def advance(cost: Callable[..., float], *args) -> None:
    """A step of the work is done: the display of the call in progress, if shown, advances by
    ``cost(*args)`` (not computed otherwise: steps are many, and most calls show nothing)."""
    state = _call.get()
    if state is not None and state.shown is not None:
        state.add(cost(*args))
