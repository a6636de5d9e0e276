"""Ozaki-II products tile by tile: a 2-D product (:func:`gemm2d`) or rank-k update
(:func:`herk2d`) of float64 or complex128 matrices, NumPy or CuPy, within the memory budget.

Stage (a) runs once over the whole operands; each output tile then sums the residues of its
k-panels (stage (b)) and goes through stage (c), all by the kernels of the arrays' device
(:func:`kernels_for`): :mod:`modlin._algorithms.ozaki` on the CPU, :mod:`modlin._algorithms.gpu`
on CUDA. The entries lost to the scaling are handed to the caller's ``warn``
(:mod:`modlin.ozaki` turns them into its AccuracyWarning).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from modlin._algorithms import gpu as _gpu, ozaki as core
from modlin._algorithms.ozaki import Moduli as _Moduli
from modlin._algorithms.quantize import Kernels, Panel
from modlin._algorithms.tiles import drive, progress
from modlin._engines.backend import namespace
from modlin._planning.tiling import budget, choose, pair_count, square
from modlin._runtime.calibration import OZAKI_COMBINE_PASS, OZAKI_OPERAND_PASS, OZAKI_RESULT_PASS
from modlin._runtime.scratch import holding

#: Real GEMMs per modulus of one tile product (:func:`modlin._algorithms.ozaki.gemm_residues`); a
#: symmetric tile takes half of a GEMM's (2M: one GEMM of the pair's two per tile).
_GEMMS = {"real": 1.0, "2m": 2.0, "3m": 3.0, "4m": 4.0}


_SYMMETRIC_GEMMS = {"real": 1.0, "2m": 1.0, "3m": 2.0, "4m": 2.0}


def kernels_for(xp) -> Kernels:
    """The kernels of stages (b) and (c) on ``xp``'s arrays: NumPy's or CuPy's."""
    if xp is np:
        return core.CPU

    return _gpu.OZAKI


def product_tiling(mods: _Moduli, complex_: bool, shape, mode: str, symmetric: bool, xp=np):
    """The tiles of one 2-D product on ``xp``'s arrays within their budget (:func:`modlin.limits`'
    for NumPy, the device's free memory for CuPy), and the modelled cost of one tile product."""
    kernels = kernels_for(xp)
    gemms = sum((_SYMMETRIC_GEMMS if symmetric else _GEMMS)[a] for a in mods.algorithms)
    N = len(mods.moduli)

    def cost(mt, kt, nt):
        return gemms * mt * nt * kt + N * (OZAKI_OPERAND_PASS * (mt * kt + kt * nt) + OZAKI_RESULT_PASS * mt * nt)

    def memory(mt, kt, nt):
        if symmetric:  # the tiles are made square afterwards: model the larger side
            mt = nt = max(mt, nt)
        return core.workspace(mods, complex_, shape, (mt, kt, nt), mode, symmetric, kernels)

    parts = 2 if complex_ else 1
    tiling = choose(shape, memory, budget(xp), cost, combine=OZAKI_COMBINE_PASS * N * parts)
    return (square(tiling) if symmetric else tiling), cost


@holding()  # stage (a) reads the operands for seconds without scratch: the pool waits for the tiles
def gemm2d(a: np.ndarray, b: np.ndarray, mods: _Moduli, mode: str, out: np.ndarray, epilogue,
           warn: Callable[[int, str, int], None]) -> None:
    """``out[...] = epilogue(the emulated a @ b)`` for two 2-D matrices (both float64 or both
    complex128, NumPy or CuPy), tile by tile within the memory budget: stage (a) once, then
    per output tile the residues of its k-panels (stage (b), summed modulo each modulus) and
    stage (c), by the kernels of the arrays' device (:func:`kernels_for`).
    ``epilogue(tile, rows, cols)`` finishes each tile of ``out`` in place (BLAS' alpha, beta);
    ``warn(count, name, axis)`` is told the entries of ``a`` and ``b`` the scaling lost."""
    xp = namespace(a)
    kernels = kernels_for(xp)
    m, k = a.shape
    n = b.shape[1]
    tiling, cost = product_tiling(mods, a.dtype.kind == "c", (m, k, n), mode, False, xp)
    sc = core.scales(a, b, mods, mode, tiling, kernels)
    risk = core.may_overflow(sc, k, a.dtype.kind == "c")  # once, not per tile (a host read on CuPy)
    known = sc.lost()  # the lost entries, when stage (a) counted them (the GPU's kernels)
    lost = [0, 0]  # else those of A's and B's panels, counted as they are made
    held = {}  # the quantised row panel of A, reused across the column panels

    def product(rows, inner, cols):
        if held.get("key") != (rows.start, inner.start):
            held["qa"] = Panel(a[rows, inner], sc.sa[rows], sc.bad_a[rows], 1)
            held["key"] = (rows.start, inner.start)
            if cols.start == 0 and known is None:
                lost[0] += held["qa"].lost()
        qb = Panel(b[inner, cols], sc.sb[cols], sc.bad_b[cols], 0)
        if rows.start == 0 and known is None:
            lost[1] += qb.lost()
        return kernels.gemm_residues(mods, held["qa"], qb)

    def finish(rows, cols, res):
        tile = out[rows, cols]
        core.finish(res, mods, sc.sa[rows], sc.sb[cols], tile, kernels.crt)
        core.native_lines(tile, a[rows], b[:, cols], sc.bad_a[rows], sc.bad_b[cols], sc.any_bad())
        if risk:
            core.exact_overflow(tile, a[rows], b[:, cols], (sc.sa[rows], sc.bad_a[rows], sc.ea[rows]),
                                (sc.sb[cols], sc.bad_b[cols], sc.eb[cols]))
        epilogue(tile, rows, cols)

    with progress(tiling.count, tiling.count * cost(*tiling.tile), "modlin.ozaki product") as bar:
        drive(tiling, product, add=lambda acc, part: kernels.add_residues(acc, part, mods), finish=finish, bar=bar)
    lost_a, lost_b = known if known is not None else lost
    warn(lost_a, "A", 1)
    warn(lost_b, "B", 0)


@holding()
def herk2d(a: np.ndarray, mods: _Moduli, mode: str, out: np.ndarray, epilogue,
           warn: Callable[[int, str, int], None]) -> None:
    """``out[...] = epilogue(the emulated a @ a^T)`` (real) or ``a @ a^H`` (complex) of a 2-D
    matrix, by pairs of square tiles ``(I, J)`` and ``(J, I)``, ``I <= J``, within the budget
    (:func:`modlin._algorithms.ozaki.syrk_residues`, or the kernels of the arrays' device)."""
    xp = namespace(a)
    kernels = kernels_for(xp)
    n, k = a.shape
    tiling, cost = product_tiling(mods, a.dtype.kind == "c", (n, k, n), mode, True, xp)
    sc = core.scales(a, None, mods, mode, tiling, kernels)
    risk = core.may_overflow(sc, k, a.dtype.kind == "c")
    known = sc.lost()
    lost = [0]

    def panel(rows, inner, count):
        q = Panel(a[rows, inner], sc.sa[rows], sc.bad_a[rows], 1)
        if count and known is None:
            lost[0] += q.lost()
        return q

    def product(rows, inner, cols):
        qa = panel(rows, inner, True)
        if rows == cols:
            return kernels.syrk_residues(mods, qa), None
        return kernels.syrk_residues(mods, qa, panel(cols, inner, False))

    def add(acc, part):
        return tuple(x if x is None else kernels.add_residues(x, y, mods) for x, y in zip(acc, part))

    def finish(rows, cols, res):
        for (r, c), rc in zip(((rows, cols), (cols, rows)), res):
            if rc is None:
                continue
            tile = out[r, c]
            core.finish(rc, mods, sc.sa[r], sc.sa[c], tile, kernels.crt)
            native_rank_k(tile, a[r], a[c], sc.bad_a[r], sc.bad_a[c], sc.any_bad())
            if risk:
                core.exact_overflow(tile, a[r], a[c].conj().T, (sc.sa[r], sc.bad_a[r], sc.ea[r]),
                                    (sc.sa[c], sc.bad_a[c], sc.ea[c]))
            epilogue(tile, r, c)

    with progress(pair_count(tiling), pair_count(tiling) * cost(*tiling.tile), "modlin.ozaki rank-k update") as bar:
        drive(tiling, product, add=add, finish=finish, bar=bar, pairs=True)
    warn(known[0] if known is not None else lost[0], "A", 1)


def native_rank_k(tile, a_rows, a_cols, bad_r, bad_c, any_bad=None) -> None:
    """:func:`modlin._algorithms.ozaki.native_lines` of ``a a^H``: the native rows, then the
    columns as the conjugate transpose of the native rows of ``a_cols`` (so the result
    stays Hermitian there too)."""
    if any_bad is not None and not any_bad[0]:
        return
    if bad_r.any():
        tile[bad_r, :] = a_rows[bad_r] @ a_cols.conj().T
    if bad_c.any():
        tile[:, bad_c] = (a_cols[bad_c] @ a_rows.conj().T).conj().T
