"""Exact products of dask arrays, chunk pair by chunk pair.

:func:`modlin.matmul`, :func:`modlin.intmul` and :func:`modlin.gaussian.matmul`
hand a ``dask.array.Array`` operand to this module, which builds a lazy graph of
in-memory modlin products. It is imported only then (dask is already in
``sys.modules``): ``import modlin`` never imports dask.

The graph (:func:`blocked_product`) is the one of ``dask.array.matmul``, with
exact arithmetic in place of floating-point sums:

1. *pair*: one task per output chunk and k-chunk, a :func:`dask.array.blockwise`
   layer that keeps the contracted index ``k`` (so chunk pairs are never
   concatenated along k). Each task runs modlin's in-memory product, planned for
   the chunk's shape, through the public function itself: the same checks, the
   same plans, CuPy chunks on their GPU.
2. *combine*: for every output chunk, a tree over its k-chunks (``split_every``
   partials per task) of an exact associative combination: additions modulo
   ``p`` for products mod ``p``, exact integer sums for :func:`modlin.intmul`.
   Sums in a tree over any grouping of ``k`` are the same exact sums, so the
   result does not depend on the chunks.
3. *finish*: optionally, one task per output chunk on the combined partial (a
   FieldArray's type here; for the Ozaki scheme, the CRT and the unscaling).

Its size is ``O(output chunks x k-chunks)`` tasks, and no task holds more than
two operand chunks or ``split_every`` partials.
"""

from __future__ import annotations

import functools
import math
import string
import sys
from collections.abc import Callable, Sequence

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from modlin._algorithms import rns as _rns
from modlin._algorithms.gaussian import result_dtype
from modlin._algorithms.tiles import matmul_shapes
from modlin._arith import crt as _crt
from modlin._arith.integers import max_abs, residues_int64
from modlin._arith.modular import add_into
from modlin._engines.backend import is_cupy, is_dask, namespace
from modlin._front.flint import kind_of
from modlin._front.inputs import check_operand, field_of, unwrap_fields
from modlin._planning.planner import plan as make_plan
from modlin._planning.rnsplan import RNSPlan, as_moduli, rns_plan
from modlin._runtime.calibration import SPLIT_EVERY, WORKER_MEMORY_SHARE
from modlin._runtime.limits import blas_threads, current, limits

# blockwise index letters: i, j, k for the matrix axes, the others for stacks and lead axes
_BATCH = [c for c in string.ascii_letters if c not in "ijk"]


def _worker_limits() -> dict | None:
    """The :func:`modlin.limits` of a task on a dask.distributed worker, or None elsewhere.

    dask runs up to ``nthreads`` tasks on a worker at once, so each gets the cores its
    BLAS sees (distributed pins BLAS to one thread in worker processes) divided by that
    count, and :data:`WORKER_MEMORY_SHARE` of the worker's memory limit divided by it too.
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:  # a local scheduler: the caller's limits hold
        return None
    nthreads = max(1, worker.state.nthreads)
    wanted = {"threads": max(1, blas_threads() // nthreads)}
    limit = worker.memory_manager.memory_limit
    if limit:
        wanted["memory"] = min(current().memory, max(1, int(limit) // (WORKER_MEMORY_SHARE * nthreads)))
    return wanted


def _task(fn: Callable, *chunks):
    """``fn(*chunks)`` under the worker's limits: the body of every pair and finish task.

    :func:`modlin.limits` are per thread (contextvars context), so each task sets its
    worker's for itself, and tasks running side by side on a worker's threads never
    restore each other's. Elsewhere the limits of the task's context hold: the caller's
    under dask's local threaded scheduler, which runs each task in a copy of the caller's
    context (dask releases since dask/dask#12224, early 2026; older ones run them under
    the process' defaults), and the caller's own with ``scheduler="sync"``.
    """
    wanted = _worker_limits()
    if not wanted:
        return fn(*chunks)
    with limits(**wanted):
        return fn(*chunks)


def _fold(combine: Callable, partials: list):
    """One task of the tree along k: ``combine`` folded over ``partials``."""
    return _task(functools.reduce, combine, partials)


def blocked_product(a, b, pair: Callable, combine: Callable, *, meta, finish: Callable | None = None,
                    rows: Sequence = (), cols: Sequence = (), lead: tuple[int, ...] = (),
                    split_every: int = SPLIT_EVERY, name: str = "modlin-product") -> da.Array:
    """A lazy ``A @ B`` of dask arrays from a product of chunk pairs and an exact combination.

    Parameters
    ----------
    a, b : dask.array.Array or tuple of them
        The operands, with :func:`numpy.matmul`'s shape rules (stacks broadcast, a
        1-D operand is promoted to a row or a column and the added axis removed from
        the result). An operand given as a tuple of arrays of one shape ("parts", e.g.
        the real and imaginary parts of a Gaussian matrix) passes one chunk of each.
        Chunks along ``k`` (and along stack axes) are unified by rechunking, so they
        may differ between the operands. Chunk sizes must be known (no NaN).
    pair : callable
        ``pair(*a_chunks, *b_chunks, *row_chunks, *col_chunks) -> partial``: the
        product of one chunk of each part of ``a`` (a matrix, or a stack of them,
        ``(..., mi, kk)``) by one of each part of ``b`` (``(..., kk, nj)``). The
        partial may be any object: an array, a tuple of arrays, a stacked array of
        residues. It must not be a view of a chunk.
    combine : callable
        ``combine(x, y) -> partial``: an exact, associative combination of two
        partials of the same output chunk (their sum mod p, their exact sum, residues
        summed modulo each modulus). It must return a new object and not modify its
        arguments: the scheduler may hold them elsewhere. It is applied in a tree
        over the k-chunks, ``split_every`` partials per task, in an order that is not
        specified, so the result must not depend on it.
    meta : array
        An array of the output chunks' type and dtype (a NumPy, CuPy or FieldArray
        array), of any shape: only its type and dtype are used.
    finish : callable, optional
        ``finish(partial, *row_chunks, *col_chunks) -> output chunk``, run once per
        output chunk on the combination of all its partials; its result has shape
        ``lead + (..., mi, nj)``. Default: the combined partial is the chunk (it
        must then have that shape).
    rows, cols : sequence of dask.array.Array
        Per-row data of ``A`` (arrays of shape ``A.shape[:-1]``, after the promotion
        of a 1-D ``A`` to a row: ``(1,)``) and per-column data of ``B`` (shape
        ``B.shape[:-2] + (n,)``, ``(n,)`` for a 1-D ``B``), such as the row and column
        scales of the Ozaki scheme computed beforehand by dask reductions. Their
        chunks along the rows (columns) are passed to ``pair`` and ``finish`` with the
        chunks of ``A`` (``B``) they belong to.
    lead : tuple of int
        Leading axes of every output chunk, ahead of the stack and matrix axes (one
        chunk along them): ``(2,)`` for the real and imaginary parts of a Gaussian
        product stacked in one array.
    split_every : int
        Partials combined per task of the tree (at least 2).
    name : str
        Prefix of the graph's keys.

    Returns
    -------
    dask.array.Array
        Shape ``lead + numpy.matmul's result shape``, chunked like the rows of ``A``'s
        chunks and the columns of ``B``'s (stack axes as unified).

    Notes
    -----
    Every callable ends up in the graph, so on dask.distributed it is pickled to
    workers in other processes: use top-level functions, or :func:`functools.partial`
    of them with small arguments (a modulus, a plan), never closures over arrays.
    On a worker, ``pair``, ``combine`` and ``finish`` run under
    :func:`modlin.limits` derived from the worker's threads and memory limit.

    For the Ozaki scheme, for instance: row scales of ``A`` and column scales of ``B``
    from dask reductions passed as ``rows`` and ``cols``; ``pair`` quantizes its
    chunks with them and returns the residues of their product modulo every modulus
    (one stacked integer array); ``combine`` adds residues modulo each modulus;
    ``finish`` runs the CRT and unscales with the same scales.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from functools import partial
    >>> from modlin._front.dask import add_mod, blocked_product
    >>> import modlin
    >>> A = da.from_array(np.arange(12).reshape(3, 4), chunks=(2, 3))
    >>> B = da.from_array(np.arange(8).reshape(4, 2), chunks=(1, 1))
    >>> C = blocked_product(A, B, partial(modlin.matmul, p=7), partial(add_mod, p=7),
    ...                     meta=np.empty(0, dtype=np.int64))
    >>> C.chunks
    ((2, 1), (1, 1))
    >>> C.compute(scheduler="sync")
    array([[0, 6],
           [6, 0],
           [5, 1]])
    """
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    a_parts, b_parts = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    for parts, what in ((a_parts, "A"), (b_parts, "B")):
        if any(x.shape != parts[0].shape for x in parts):
            raise ValueError(f"{what}: its parts have different shapes {[x.shape for x in parts]}")
    (_, _, _), full, _ = matmul_shapes(a_parts[0].shape, b_parts[0].shape)
    a_row, b_col = a_parts[0].ndim == 1, b_parts[0].ndim == 1
    if a_row:  # numpy.matmul's promotion; the added axis is indexed away at the end
        a_parts = tuple(x[np.newaxis] for x in a_parts)
    if b_col:
        b_parts = tuple(x[..., np.newaxis] for x in b_parts)
    nb = len(full) - 2
    batch = "".join(_BATCH[:nb])
    a_ind = batch[nb - (a_parts[0].ndim - 2):] + "ik"
    b_ind = batch[nb - (b_parts[0].ndim - 2):] + "kj"
    r_ind, c_ind = a_ind[:-1], b_ind[:-2] + "j"
    for extra, ind, shape, what in ((rows, r_ind, a_parts[0].shape[:-1], "rows"),
                                    (cols, c_ind, b_parts[0].shape[:-2] + b_parts[0].shape[-1:], "cols")):
        for x in extra:
            if x.shape != shape:
                raise ValueError(f"{what}: expected arrays of shape {shape}, got {x.shape}")
    extras = [(x, r_ind) for x in rows] + [(x, c_ind) for x in cols]
    token = tokenize(a_parts, b_parts, pair, combine, finish, rows, cols, lead, split_every)
    args = [y for x in a_parts for y in (x, a_ind)] + [y for x in b_parts for y in (x, b_ind)]
    args += [y for x, ind in extras for y in (x, ind)]
    out_ind = batch + "ij"
    # partials need not be arrays: their dask arrays are never computed, the output's meta stands in
    partials = da.blockwise(functools.partial(_task, pair), out_ind + "k", *args, name=f"{name}-pair-{token}",
                            dtype=meta.dtype, meta=_empty(meta, len(out_ind) + 1))
    if finish is None:
        out = _tree(partials, combine, split_every, f"{name}-{token}", lead, _empty(meta, len(lead) + len(out_ind)))
        return squeeze_vectors(out, a_row, b_col)
    combined = _tree(partials, combine, split_every, f"{name}-combine-{token}", (), _empty(meta, len(out_ind)))
    letters = _BATCH[nb:nb + len(lead)]
    out = da.blockwise(functools.partial(_task, finish), "".join(letters) + out_ind, combined, out_ind,
                       *[y for x, ind in extras for y in (x, ind)], name=f"{name}-{token}",
                       new_axes=dict(zip(letters, lead)), dtype=meta.dtype, meta=_empty(meta, len(lead) + len(out_ind)))
    return squeeze_vectors(out, a_row, b_col)


def _empty(meta, ndim: int):
    """An empty array of ``meta``'s type and dtype with ``ndim`` axes."""
    return meta.reshape(-1)[:0].reshape((0,) * ndim)


def _tree(partials: da.Array, combine: Callable, split_every: int, name: str, lead: tuple[int, ...],
          meta) -> da.Array:
    """The partials (last axis: the k-chunks) combined along k: ``split_every`` per task."""
    dsk = {}
    zeros = (0,) * len(lead)
    nk = partials.numblocks[-1]
    for idx in np.ndindex(*partials.numblocks[:-1]):
        keys = [(partials.name, *idx, kk) for kk in range(nk)]
        level = 0
        while len(keys) > split_every:
            groups = [keys[g:g + split_every] for g in range(0, len(keys), split_every)]
            keys = []
            for g, group in enumerate(groups):
                key = (f"{name}-level{level}", *idx, g)
                dsk[key] = (_fold, combine, group) if len(group) > 1 else group[0]
                keys.append(key)
            level += 1
        dsk[(name, *zeros, *idx)] = (_fold, combine, keys) if len(keys) > 1 else keys[0]
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[partials])
    chunks = tuple((s,) for s in lead) + partials.chunks[:-1]
    return da.Array(graph, name, chunks=chunks, meta=meta)


def squeeze_vectors(x: da.Array, a_row: bool, b_col: bool) -> da.Array:
    """``x`` without the axes that the promotion of 1-D operands added."""
    if not (a_row or b_col):
        return x
    return x[(Ellipsis, 0 if a_row else slice(None), 0 if b_col else slice(None))]


def add_mod(x, y, p: int):
    """``(x + y) mod p`` for residues in ``[0, p)``, as a new array (``combine`` of a product mod p)."""
    out = x.copy()
    add_into(out, y.copy(), p)  # add_into consumes its second operand: a copy, as chunks are shared
    return out


def _known(x: da.Array, name: str) -> da.Array:
    if any(math.isnan(s) for s in x.shape):
        raise ValueError(f"{name} has unknown chunk sizes (NaN, e.g. after boolean indexing): modlin needs "
                         f"them to plan the product; call {name}.compute_chunk_sizes() first")
    return x


def _as_dask(x, name: str, fn: str, like: da.Array, side: int | None, **checks) -> da.Array:
    """An operand as a dask array: dask arrays as they are, an in-memory one (beside a dask
    array ``like``) checked by the front door and wrapped: chunked as ``like`` when that is
    another part of the same operand (``side=None``), else whole along its free axes and
    along ``k`` as ``like``, the other operand (``side``: 0 for ``A``, 1 for ``B``).
    ``checks`` are :func:`modlin._front.inputs.check_operand`'s options of the front door."""
    if is_dask(x):
        return _known(x, name)
    x = check_operand(x, name, fn, **checks)
    if kind_of(x) is not None:
        raise TypeError(f"{name} is a python-flint matrix beside a dask array: {fn} takes dask arrays of "
                        f"NumPy, CuPy or galois chunks; convert {name} to a NumPy array (or wrap it with "
                        "dask.array.from_array) first")
    x_ = x if hasattr(x, "ndim") and hasattr(x, "shape") else np.asarray(x)
    if side is None:  # (a part of another shape is refused with the shapes, later)
        return da.from_array(x_, chunks=like.chunks if x_.shape == like.shape else -1)
    chunks = [-1] * x_.ndim
    k_axis = -1 if side == 0 else max(x_.ndim - 2, 0)
    k_like = like.chunks[-1 if side == 1 else max(like.ndim - 2, 0)]
    if x_.ndim and x_.shape[k_axis] == sum(k_like):
        chunks[k_axis] = k_like
    return da.from_array(x_, chunks=tuple(chunks))


def dask_pairs(A, B, fn: str, **checks) -> tuple[da.Array, da.Array]:
    """Both operands as dask arrays of known chunk sizes (one of them, at least, already is;
    ``checks`` as for :func:`_as_dask`)."""
    if is_dask(A):
        A = _known(A, "A")
        return A, _as_dask(B, "B", fn, A, 1, **checks)
    B = _known(B, "B")
    return _as_dask(A, "A", fn, B, 0, **checks), B


def dask_meta(x: da.Array):
    """The operand's empty chunk, with its type and dtype, as a matrix (so that the front
    door's result on it is an array even for 1-D operands): what the front door checks."""
    return x._meta.reshape((0,) * max(x.ndim, 2))


def _plain(x):
    """A chunk as its NumPy array: FieldArrays' residues are summed as int64, not in the field."""
    return x.view(np.ndarray) if field_of(x) is not None else x


def _mod_pair(a, b, p: int, plan, eager):
    return eager(_plain(a), _plain(b), p, plan=plan)


def _residue_pair(a, b, p: int, plan, residues):
    return residues(_plain(a), _plain(b), p, plan)


def _add_residues(x, y, moduli: tuple[int, ...]):
    """``combine`` of residue partials: their sum modulo each modulus, as a new array."""
    return _rns.add_residues(x.copy(), y, moduli)


def _crt_task(res, basis, p: int, field):
    """``finish`` of residue partials: one CRT per output chunk (and the field's type)."""
    out = _crt.reconstruct(res, basis, p=p)
    return out if field is None else field(out)


def matmul(A, B, p, out, plan, *, eager, check_plan, residues) -> da.Array:
    """:func:`modlin.matmul` of dask arrays (at least one of ``A``, ``B`` is one). ``eager`` is
    the in-memory front door, ``check_plan`` its plan check and ``residues`` its product of
    one pair of chunks as residues (:func:`modlin._algorithms.products.chunk_residues`), passed in by it:
    this module sits below the front doors, which import it only when a dask array comes.

    When the whole product's plan is a residue number system, each pair of chunks gives
    its residues modulo the plan's moduli (chosen for the whole ``k``), the tree adds them
    modulo each modulus, and one CRT per output chunk ends it: the CRT runs once per
    output entry, as in memory, instead of once per k-chunk. Other plans multiply each
    pair of chunks modulo ``p`` (planned for the chunks) and add the products modulo ``p``.
    """

    if out is not None:
        raise TypeError("out= is not supported with dask arrays (the result is lazy): store it with "
                        "dask.array.store or .to_zarr instead")
    a, b = dask_pairs(A, B, "modlin.matmul")
    (m, k, n), _, _ = matmul_shapes(a.shape, b.shape)
    p, field, _ = unwrap_fields(p, dask_meta(a), dask_meta(b), names=("A", "B"), fn="modlin.matmul")
    meta = eager(dask_meta(a), dask_meta(b), p)  # the in-memory front door on empty chunks: its checks, its dtype
    gpu = is_cupy(a._meta) or is_cupy(b._meta)
    for x, name in ((a, "A"), (b, "B")):
        if not is_cupy(x._meta):  # (the GPU path checks dtypes even on empty operands)
            residues_int64(_plain(dask_meta(x)), 2, name)  # the dtype checks of the chunks' conversion
    if plan is not None:
        check_plan(plan, p, k)
    whole = plan if plan is not None or gpu or not (m and k and n) else make_plan(p, m, k, n)
    if isinstance(whole, RNSPlan) and not gpu:
        pair = functools.partial(_residue_pair, p=p, plan=whole, residues=residues)
        # residue partials are N int32 per entry: combined two at a time, so that few are held at once
        return blocked_product(a, b, pair, functools.partial(_add_residues, moduli=whole.moduli), meta=meta,
                               finish=functools.partial(_crt_task, basis=whole.basis, p=p, field=field),
                               split_every=2, name="modlin-matmul")
    return blocked_product(a, b, functools.partial(_mod_pair, p=p, plan=plan, eager=eager), functools.partial(add_mod, p=p),
                           meta=meta, finish=field, name="modlin-matmul")


def _dtype_bound(dtype) -> int | None:
    """The largest ``|entry|`` any array of this dtype can hold (None for object arrays)."""
    if dtype.kind == "b":
        return 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return max(-int(info.min), int(info.max))
    return None


def _int_pair(a, b, as_object: bool, engine, moduli, eager):
    c = eager(a, b, engine=engine, moduli=moduli)
    return c.astype(object) if as_object and c.dtype != object else c


def intmul(A, B, engine, moduli, *, eager) -> da.Array:
    """:func:`modlin.intmul` of dask arrays (at least one of ``A``, ``B`` is one).

    The result's dtype must be known before the graph is built, so the bound
    ``k * max|A| * max|B|`` comes from the dtypes when they prove that it fits int64,
    else from the entries themselves: one dask reduction over both operands, run here
    (the only computation before the product, and only the one the dtype needs).
    ``eager`` is the in-memory front door (see :func:`matmul`).
    """

    a, b = dask_pairs(A, B, "modlin.intmul")
    (m, k, n), _, _ = matmul_shapes(a.shape, b.shape)
    moduli = None if moduli is None else as_moduli(moduli)
    eager(dask_meta(a), dask_meta(b))  # the in-memory front door on empty chunks: dtypes, types
    bounds = [_dtype_bound(x.dtype) for x in (a, b)]
    if None in bounds or k * bounds[0] * bounds[1] >= 2**63:
        if a.size and b.size:
            lo_a, hi_a, lo_b, hi_b = dask.compute(a.min(), a.max(), b.min(), b.max())
            bounds = [max_abs(np.array([lo_a, hi_a])), max_abs(np.array([lo_b, hi_b]))]
        else:
            bounds = [0, 0]
    bound = k * bounds[0] * bounds[1]
    if engine is not None or moduli is not None:  # their errors here, for the whole product
        rns_plan(None, max(bound, 1), (m, k, n), engine=engine, moduli=moduli)
    as_object = bound >= 2**63
    pair = functools.partial(_int_pair, as_object=as_object, engine=engine, moduli=moduli, eager=eager)
    return blocked_product(a, b, pair, np.add, meta=np.empty(0, dtype=object if as_object else np.int64),
                           name="modlin-intmul")


def _gauss_pair(*chunks, na: int, m: int, algorithm: str, eager):
    chunks = [_plain(x) for x in chunks]
    A = chunks[0] if na == 1 else tuple(chunks[:na])
    B = chunks[na] if len(chunks) == na + 1 else tuple(chunks[na:])
    re, im = eager(A, B, m, algorithm=algorithm)
    return namespace(re).stack([re, im])


def gaussian_matmul(A, B, m, algorithm: str, *, gaussian) -> tuple[da.Array, da.Array]:
    """:func:`modlin.gaussian.matmul` of dask arrays (at least one of the parts is one);
    ``gaussian`` is the module of the in-memory front door, passed in by it (see :func:`matmul`)."""
    fn = "modlin.gaussian.matmul"
    gaussian._flatten({"A": A, "B": B})  # the front door's check of (real, imag) pairs
    pa, pb = (X if isinstance(X, tuple) else (X,) for X in (A, B))
    da_a, da_b = (next((x for x in parts if is_dask(x)), None) for parts in (pa, pb))
    pa = tuple(_as_dask(x, "A", fn, da_b, 0) if da_a is None else _as_dask(x, "A", fn, da_a, None) for x in pa)
    pb = tuple(_as_dask(x, "B", fn, pa[0], 1) if da_b is None else _as_dask(x, "B", fn, da_b, None) for x in pb)
    metas = [tuple(map(dask_meta, parts)) if len(parts) > 1 else dask_meta(parts[0]) for parts in (pa, pb)]
    m, field, _ = gaussian._front(m, fn, A=metas[0], B=metas[1])
    gaussian.matmul(*metas, m, algorithm=algorithm)  # the in-memory front door on empty chunks
    alg = gaussian._choose(algorithm, gaussian._check_m(m))
    pair = functools.partial(_gauss_pair, na=len(pa), m=m, algorithm=alg, eager=gaussian.matmul)
    meta = namespace(dask_meta(pa[0])).empty(0, dtype=result_dtype(m))  # Python ints above 2**63, as in memory
    C = blocked_product(pa, pb, pair, functools.partial(add_mod, p=m), meta=meta if field is None else field(meta),
                        finish=field, lead=(2,), name="modlin-gaussian-matmul")
    return C[0], C[1]
