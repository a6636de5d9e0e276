"""The Ozaki scheme on dask arrays: :func:`modlin.ozaki.dgemm` and :func:`modlin.ozaki.zgemm`.

The three stages of :mod:`modlin._algorithms.ozaki`, each where the contract lets it run:

(a) *Scales*, from the whole operands: per line (row of ``A``, column of ``B``)
    the Inf/NaN flag and the exponent of the largest entry (one dask reduction),
    then, with those exponents, each chunk's bits for exactness and squared bound
    norms (maxima and exact integer sums over the chunks along ``k``). These are
    computed before the product's graph is built: they are vectors of ``m`` and
    ``n`` entries, and the shifts of :func:`modlin._algorithms.quantize.fast_exponents` (or
    the accurate ones, from the bound product ``abar @ bbar``, a dask product of
    small integers) are taken from them in memory, as the in-memory product does.
    The count of entries the scales round to zero (the AccuracyWarning) is one
    more reduction.
(b) *Residues*, one task per pair of chunks (:func:`modlin._front.dask.blocked_product`):
    both chunks quantised with their lines' shifts, the residues of their exact
    integer product modulo every modulus; the residues of an output chunk's
    k-chunks are added modulo each modulus in a tree.
(c) *Finish*, once per output chunk: the CRT and the one rounding.

The residues are those of the one integer matrix ``A'B'`` and stage (c) rounds each
entry from them alone, so the result is bit for bit that of the in-memory call with
the same moduli, mode and algorithm, whatever the chunks. Lines holding Inf or NaN
take a native dask product's values there, as the in-memory product takes numpy's
(those entries are Inf or NaN in any order of the sums).

Imported by :mod:`modlin.ozaki` only when a dask array comes (dask is then in
``sys.modules``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import dask
import dask.array as da
import numpy as np

from modlin._algorithms import ozaki as core, quantize as _quantize
from modlin._algorithms.quantize import Kernels, Panel, Scales
from modlin._algorithms.tiles import matmul_shapes
from modlin._engines.backend import is_cupy, namespace
from modlin._front.dask import blocked_product, dask_meta, dask_pairs, squeeze_vectors
from modlin._front.inputs import check_operand


def operands(A, B, fn: str) -> tuple[da.Array, da.Array]:
    """``A`` and ``B`` as dask arrays of known chunk sizes (an in-memory one wrapped, as a
    whole along its free axes), their chunks' type checked as the front door checks an
    in-memory operand (no FieldArrays, no python-flint matrices)."""
    if not any(isinstance(x, da.Array) for x in (A, B)):  # only C is lazy: one chunk each
        A, B = (da.from_array(np.asarray(x) if not is_cupy(x) else x, chunks=-1) for x in (A, B))
    a, b = dask_pairs(A, B, fn, fields=False, flint=False, of="numbers")
    for x, name in ((a, "A"), (b, "B")):
        check_operand(dask_meta(x), name, fn, fields=False, flint=False, of="numbers")
    namespace(a._meta, b._meta)  # refuses NumPy and CuPy chunks mixed
    return a, b


def _chunk_stats(y, ex, bad, *, axis: int):
    """A chunk's bits for exactness and squared bound norms per line, stacked along ``axis``
    (two entries per line: what :func:`modlin._algorithms.ozaki._line_stats` takes of one piece)."""
    ps = core.parts(core.zero_lines(y, bad, axis))
    _, bar = _quantize.part_bounds(ps, axis, ex)
    need = _quantize.exact_bits(ps, ex, axis).astype(np.float64)  # below 2**11: exact
    return namespace(y).stack([need, (bar * bar).sum(axis=axis)], axis=axis)


def _chunk_bars(y, ex, bad, *, axis: int):
    """A chunk's integer bounds (uint8, at most ``2**(T_BITS + 1)``), as "accurate" keeps them."""
    _, bar = _quantize.part_bounds(core.parts(core.zero_lines(y, bad, axis)), axis, ex)
    return bar.astype(np.uint8)


def _chunk_lost(y, shift, bad, *, axis: int):
    """How many nonzero entries of the chunk its lines' shifts round to zero, as a 1 x 1 array."""
    return np.full((1, 1), Panel(y, shift, bad, axis).lost(), dtype=np.int64)


def _lines(x: da.Array, axis: int):
    """Lazy per-line statistics of a 2-D dask array (rows for ``axis=1``, columns for
    ``axis=0``): Inf/NaN flags, exponents of the maxima, and the per-chunk stage."""
    parts = [x.real, x.imag] if x.dtype.kind == "c" else [x]
    bad = ~da.isfinite(x).all(axis=axis)
    mx = functools.reduce(da.maximum, [abs(p).max(axis=axis) for p in parts])
    ex = da.frexp(da.where(bad, 0.0, mx))[1].astype(np.int64)
    return bad, ex


def _blockwise(fn: Callable, x: da.Array, vectors, axis: int, dtype, **adjust):
    """``fn(chunk, *its lines' pieces of vectors, axis=axis)`` for every chunk of ``x`` (rows
    for ``axis=1``, columns for ``axis=0``; ``vectors`` of one entry per line, NumPy or dask),
    the results' lengths along ``i`` (lines of ``A``), ``j`` (of ``B``) and ``k`` as
    ``adjust`` sets them (:func:`dask.array.blockwise`'s ``adjust_chunks``), else the chunk's."""
    ind, line = ("ik", "i") if axis == 1 else ("kj", "j")
    chunks = x.chunks[0 if axis == 1 else 1]
    args = [y for v in vectors for y in (v if isinstance(v, da.Array) else da.from_array(v, chunks=(chunks,)), line)]
    return da.blockwise(functools.partial(fn, axis=axis), ind, x, ind, *args, dtype=dtype,
                        adjust_chunks={key: v for key, v in adjust.items() if key in ind} or None, meta=namespace(x._meta).empty((0, 0), dtype=dtype))


def scales(a: da.Array, b: da.Array, mods: core.Moduli, mode: str) -> Scales:
    """Stage (a) of :mod:`modlin._algorithms.ozaki` on 2-D dask operands, computed now: the same
    shifts (int64 NumPy vectors, or CuPy ones for CuPy chunks) as
    :func:`modlin._algorithms.ozaki.scales` of the whole in-memory operands."""
    (bad_a, ex_a), (bad_b, ex_b) = _lines(a, 1), _lines(b, 0)
    bad_a, ex_a, bad_b, ex_b = dask.compute(bad_a, ex_a, bad_b, ex_b)
    lines = {1: (a, ex_a, bad_a), 0: (b, ex_b, bad_b)}
    stats = {}
    for axis, (x, ex, bad) in lines.items():
        st = _blockwise(_chunk_stats, x, (ex, bad), axis, np.float64, k=2)
        pick = (slice(None), slice(0, None, 2)) if axis == 1 else (slice(0, None, 2), slice(None))
        sums = (slice(None), slice(1, None, 2)) if axis == 1 else (slice(1, None, 2), slice(None))
        stats[axis] = (st[pick].max(axis=axis).astype(np.int64), st[sums].sum(axis=axis))
    (need_a, sq_a), (need_b, sq_b) = dask.compute(stats[1], stats[0])
    top = core.lb(mods.basis)
    if mode != "accurate":
        g, h = _quantize.fast_exponents(sq_a, sq_b, top, need_a, need_b)
    else:
        abar = _blockwise(_chunk_bars, a, (ex_a, bad_a), 1, np.uint8).astype(np.float64)
        bbar = _blockwise(_chunk_bars, b, (ex_b, bad_b), 0, np.uint8).astype(np.float64)
        # the bound product's codes are read by three minima in turn: kept (on the cluster, or
        # here with a local scheduler) rather than made three times; one uint8 per result entry
        code = da.matmul(abar, bbar).map_blocks(_quantize.bound_bits, dtype=np.uint8).persist()
        # each minimum over the lazy codes is computed where the exponents' vectors take it
        g, h = _quantize.accurate_exponents(sq_a, sq_b, code, top, need_a, need_b)
        h = np.asarray(h)
    return Scales(g - ex_a, h - ex_b, bad_a, bad_b, ex_a, ex_b)


def lost(a: da.Array, b: da.Array, sc: Scales) -> tuple[int, int]:
    """Nonzero entries of ``A`` and ``B`` that the scales round to zero (for the AccuracyWarning)."""
    counts = [_blockwise(_chunk_lost, x, (shift, bad), axis, np.int64, i=1, j=1, k=1).sum()
              for x, shift, bad, axis in ((a, sc.sa, sc.bad_a, 1), (b, sc.sb, sc.bad_b, 0))]
    return tuple(int(c) for c in dask.compute(*counts))


def _pair(a, b, sa, bad_a, sb, bad_b, *, mods: core.Moduli, kernels: Kernels):
    """Stage (b) of one pair of chunks: the residues of their quantised exact product."""
    return kernels.gemm_residues(mods, Panel(a, sa, bad_a, 1), Panel(b, sb, bad_b, 0))


def _combine(x, y, *, mods: core.Moduli, kernels: Kernels):
    """Residues of two k-chunks' products added modulo each modulus, as new arrays."""
    return kernels.add_residues([r.copy() for r in x], y, mods)


def _finish(res, sa, bad_a, sb, bad_b, *, mods: core.Moduli, dtype, kernels: Kernels):
    """Stage (c) of one output chunk."""
    out = namespace(res[0]).empty(res[0].shape[1:], dtype=dtype)
    return core.finish(res, mods, sa, sb, out, kernels.crt)


def _gemm2d(a: da.Array, b: da.Array, mods: core.Moduli, mode: str, dtype, warn: Callable) -> da.Array:
    """The emulated ``a @ b`` of two 2-D dask arrays (both float64 or both complex128)."""
    if is_cupy(a._meta):  # CuPy chunks: the device's kernels, as in memory
        from modlin._algorithms.gpu import OZAKI as kernels
    else:
        kernels = core.CPU
    sc = scales(a, b, mods, mode)
    for count, name, axis in zip(lost(a, b, sc), "AB", (1, 0)):
        warn(count, name, axis)
    rows = [da.from_array(v, chunks=(a.chunks[0],)) for v in (sc.sa, sc.bad_a)]
    cols = [da.from_array(v, chunks=(b.chunks[1],)) for v in (sc.sb, sc.bad_b)]
    out = blocked_product(a, b, functools.partial(_pair, mods=mods, kernels=kernels),
                          functools.partial(_combine, mods=mods, kernels=kernels),
                          meta=namespace(a._meta).empty(0, dtype=dtype),
                          finish=functools.partial(_finish, mods=mods, dtype=dtype, kernels=kernels),
                          rows=rows, cols=cols, name="modlin-ozaki")
    if sc.bad_a.any() or sc.bad_b.any():
        # IEEE semantics where Inf or NaN enter: a native product's values on those lines
        # (computed whole, as the lines may be anywhere; only when there are any)
        mask = rows[1][:, np.newaxis] | cols[1][np.newaxis, :]
        out = da.where(mask, da.matmul(a, b), out)
    found = core.overflow_fixes(a, b, (sc.sa, sc.bad_a, sc.ea), (sc.sb, sc.bad_b, sc.eb), np.dtype(dtype).kind == "c")
    if found is not None:  # the exact values where the result may overflow, patched into their chunks
        out = out.map_blocks(_patch, *found, dtype=dtype, meta=out._meta)
    return out


def _patch(block, rows, cols, fix, exact, block_info=None):
    """``block`` (a chunk of the result) with the entries of :func:`modlin._algorithms.ozaki.overflow_fixes`'
    ``(rows, cols, fix, exact)`` that fall in it."""
    (r0, r1), (c0, c1) = block_info[0]["array-location"]
    ri, ci = np.nonzero((rows >= r0) & (rows < r1))[0], np.nonzero((cols >= c0) & (cols < c1))[0]
    sub = fix[ri][:, ci]
    if not sub.any():
        return block
    xp = namespace(block)
    block = block.copy()
    at = (xp.asarray(rows[ri] - r0)[:, None], xp.asarray(cols[ci] - c0)[None, :])
    block[at] = xp.where(xp.asarray(sub), xp.asarray(exact[ri][:, ci]), block[at])
    return block


def batched_gemm(a: da.Array, b: da.Array, mods: core.Moduli, mode: str, dtype, warn: Callable) -> da.Array:
    """The emulated ``a @ b`` with :func:`numpy.matmul`'s shape rules (stacks broadcast, one
    product per matrix of the stack, as in memory: the scales are each matrix's own).
    ``warn(count, name, axis)`` is the front door's AccuracyWarning."""
    (m, k, n), full, shape = matmul_shapes(a.shape, b.shape)
    a2 = a[np.newaxis, :] if a.ndim == 1 else a
    b2 = b[:, np.newaxis] if b.ndim == 1 else b
    batch = full[:-2]
    a2 = da.broadcast_to(a2, batch + a2.shape[-2:])
    b2 = da.broadcast_to(b2, batch + b2.shape[-2:])
    if not (m * n and k):  # nothing to emulate: zeros (k = 0), or empty
        out = da.matmul(a2, b2).astype(dtype)
    else:
        mats = [_gemm2d(a2[idx], b2[idx], mods, mode, dtype, warn) for idx in np.ndindex(*batch)]
        out = da.stack(mats).reshape(full) if batch else mats[0]
    return squeeze_vectors(out, a.ndim == 1, b.ndim == 1)  # (indexed away: two vectors give a scalar, as in memory)
