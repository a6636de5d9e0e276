"""Products in a residue number system: the GEMMs modulo each modulus, their reduction
into residues, and the CRT that rebuilds the product (:mod:`modlin._arith.crt`).

The residue layer never sees a GEMM directly: products modulo each ``m_i`` go through
:mod:`modlin._algorithms.multiword` with a plan per modulus. Each modulus' product is kept
as float64 sums, which the CRT reduces itself, or, where memory is dear, reduced into int32
residues as its GEMM ends (:func:`product_residues`).
"""

from __future__ import annotations

import math

import numpy as np

from modlin._algorithms import multiword as _multiword
from modlin._arith.crt import reconstruct_rows
from modlin._arith.moduli import Basis
from modlin._arith.residues import Pieces16, Residues, fmod_inv, padded_rows
from modlin._engines.gemm import get_engine
from modlin._engines.jit import njit
from modlin._engines.threads import by_moduli, each, gemm_workers, region, row_workers, run, slabs
from modlin._runtime.limits import current as current_limits
from modlin._runtime.scratch import Arena, take


def product_residues(pl, a: np.ndarray, b: np.ndarray, *, memory: int | None = None,
                     arena: Arena | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
    """The first stage of :func:`multiply`: ``(rc, shape)``, the products of ``a @ b`` modulo
    each modulus of ``pl.basis`` as rows ``rc[i, :E]`` (``E`` entries of the result's
    ``shape``, each row padded): what :func:`reconstruct` (or :func:`reduce_residues`) takes.

    Within ``memory`` bytes (default: the budget of :func:`modlin.limits`;
    :meth:`RNSPlan.schedule` decides) ``rc`` is float64, integers congruent to the product
    modulo ``m_i`` and below ``2**53`` in magnitude, made from the residues of as many
    moduli at a time as fit; beyond the pool's share of the budget (or where its groups
    would read the operands more often), ``rc`` is int32 (host plans only), the products
    reduced into ``[0, m_i)`` (half the memory, one more pass), made from the residues of
    a group of moduli and a panel of rows of ``a`` at a time. Arguments as for :func:`multiply`
    (``a`` may be its :class:`Residues`)."""
    basis = pl.basis
    eng = get_engine(pl.engine)
    dtype = eng.dtype
    ha, hb = (x if isinstance(x, (Pieces16, Residues)) else Pieces16(x) for x in (a, b))
    if isinstance(ha, Residues) and ha.key != (basis.moduli, np.dtype(dtype)):
        raise ValueError("these Residues were made for another basis or engine")
    full = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    E = math.prod(full)
    k = a.shape[-1]
    subs = pl.subplans
    memory = current_limits().memory if memory is None else memory
    prepared = isinstance(ha, Residues)
    # panels of rows only for a 2-D product: a stack's rows are not a range of its entries
    group, panel = pl.schedule(0 if prepared else ha.size, hb.size, E, k, full[-2] if len(full) == 2 else 0,
                               memory, kept=getattr(hb, "kept", False))
    rc = padded_rows(len(basis.moduli), E, np.float64 if panel is None else np.int32, arena, "products")
    if not E:
        return rc, full
    # fresh for each call, unlike the products: they are freed before the CRT's arrays exist
    # (of A, a panel's when the products come in panels)
    bufs = [None if prepared else padded_rows(min(group, len(subs)), ha.size if panel is None else panel * k, dtype),
            padded_rows(min(group, len(subs)), hb.size, dtype)]
    if panel is not None:
        wide = take(arena, "panel", (panel, full[-1]), np.float64)  # one product's panel, before its reduction
    for i0 in range(0, len(subs), group):
        q = basis.moduli[i0:i0 + group]
        rb = hb.residues(q, dtype, bufs[1])
        for r0 in range(0, full[-2], panel or full[-2] or 1):
            part = None if panel is None else slice(r0, min(full[-2], r0 + panel))
            ra = ha.residues(q, dtype, bufs[0], rows=part)
            rows = full[-2] if part is None else part.stop - part.start
            work = rows * full[-1] * math.prod(full[:-2]) * k * len(q)
            # panels: in slabs at any depth, so that each product's reduction runs on its own
            # slab right after it (after a GEMM on BLAS' threads, a pass split across the same
            # cores competes with BLAS' spinning workers)
            # short products: each worker takes whole GEMMs of its share of the moduli (when every
            # worker has one)
            whole = part is None and by_moduli(rows, len(q))
            t = gemm_workers(work, rows, min(k, min(s.block for s in subs)), whole=len(q) if whole else 0) \
                if part is None else row_workers(work, rows)

            def products(slab: slice, mods: slice = slice(None)) -> None:  # rows and moduli of one worker
                for i in range(len(q))[mods]:
                    sub = subs[i0 + i]
                    if part is None:
                        out = rc[i0 + i, :E].reshape(full)[..., slab, :]
                    else:
                        out = wide[:rows][slab]
                    if eng.dtype == np.float64 and sub.gemm_count() == 1:
                        # one exact GEMM: the CRT (or the reduction below) reduces its sums
                        eng.gemm(ra[i][..., slab, :], rb[i], out=out)
                    else:
                        _multiword.multiply_words(sub, ra[i:i + 1][..., slab, :], rb[i:i + 1], out)
                    if part is not None:  # into [0, m_i), as int32, the rows of rc
                        n = full[-1]
                        src, dst = out.reshape(1, -1), rc[i0 + i:i0 + i + 1, (part.start + slab.start) * n:]
                        _reduce_rows_kernel(src, np.array(q[i:i + 1], dtype=np.int64), dst, False, 0, src.shape[1])

            with region(t):
                if whole:
                    run(lambda mods: products(slice(None), mods), slabs(len(q), t))
                else:
                    run(products, slabs(rows, t))
    return rc, full


def multiply(pl, a: np.ndarray, b: np.ndarray, *, as_object: bool = False, memory: int | None = None,
             arena: Arena | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (or ``a @ b mod pl.p``) through the RNS plan ``pl`` (an :class:`RNSPlan`).

    ``a`` and ``b`` are integer arrays (int64, uint64 or object), or their
    :class:`Pieces16`, of shapes ``(..., m, k)`` and ``(..., k, n)`` whose integer product is bounded by
    ``pl.bound``; ``a`` may be its :class:`Residues` for this basis and engine. Each modulus'
    product is one multiword plan; only the residues, their products and the result are
    allocated, within ``memory`` bytes (:func:`product_residues`, :meth:`RNSPlan.schedule`;
    default: the budget of :func:`modlin.limits`). The products' matrices, the
    largest buffer and the only one alive from the first GEMM to the end of the
    CRT, come from ``arena`` when given (the tiles of one product reuse them). The CRT
    writes into ``out`` when given (a C-contiguous array of the result's shape: int64 for
    int64 results, object for Python ints made from limbs, see :func:`reconstruct_rows`),
    which is returned.
    """
    rc, full = product_residues(pl, a, b, memory=memory, arena=arena)
    return reconstruct_rows(rc, math.prod(full), pl.basis, pl.p, as_object, out).reshape(full)


@njit
def _reduce_rows_kernel(src, moduli, dst, add, lo, hi):  # pragma: no cover - compiled
    """``dst[i, e] = (src[i, e] (+ dst[i, e] when add)) mod moduli[i]`` for ``lo <= e < hi``:
    ``src`` float64 integers below ``2**53`` in magnitude, ``dst`` residues in ``[0, m_i)``."""
    for i in range(dst.shape[0]):
        m = np.float64(moduli[i])
        minv = 1.0 / m
        x, y = src[i, lo:hi], dst[i, lo:hi]  # 1-D slices: loops over offset indices do not vectorise (5x)
        if add:
            for e in range(hi - lo):
                r = fmod_inv(x[e], m, minv) + y[e]
                y[e] = r - (m if r >= m else 0.0)
        else:
            for e in range(hi - lo):
                y[e] = fmod_inv(x[e], m, minv)


def reduce_residues(rc: np.ndarray, E: int, basis: Basis, out: np.ndarray, *, add: bool = False) -> np.ndarray:
    """``out = rc mod m_i`` (``add``: ``out = (out + rc) mod m_i``) row by row, for products
    ``rc`` of :func:`product_residues` (``E`` entries per row) and residues ``out`` of shape
    ``(N, ...)``, or padded rows ``(N, E + pad)`` (:func:`padded_rows`, what the CRT reads), in
    ``[0, m_i)`` (int32 or float64): the residues of two products (of two k-panels, or chunks,
    of one product) add up to those of their sum. Returns ``out``."""
    rows = out.reshape(len(basis.moduli), -1)
    q = np.asarray(basis.moduli, dtype=np.int64)
    each(lambda part: _reduce_rows_kernel(rc, q, rows, add, part.start, part.stop), E, len(q))
    return out


@njit
def _add_rows_kernel(x, y, q, lo, hi):  # pragma: no cover - compiled
    """``x = (x + y) mod q[i]`` row by row over ``lo <= e < hi``, residues in ``[0, q[i])``."""
    for i in range(x.shape[0]):
        qi = np.int64(q[i])
        for e in range(lo, hi):
            s = np.int64(x[i, e]) + np.int64(y[i, e])
            x[i, e] = s - qi if s >= qi else s


def add_residues(acc: np.ndarray, part: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """``acc = (acc + part) mod m_i`` in place, for residues of shape ``(N, ...)`` in
    ``[0, m_i)`` (the same dtype, any integer or float type holding them). Returns ``acc``."""
    q = np.asarray(moduli, dtype=np.int64)
    x, y = acc.reshape(len(q), -1), np.ascontiguousarray(part).reshape(len(q), -1)
    each(lambda r: _add_rows_kernel(x, y, q, r.start, r.stop), x.shape[1], len(q))
    return acc
