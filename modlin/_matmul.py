"""``modlin.matmul``: the public product modulo p."""

from __future__ import annotations

import math

import numpy as np

from . import _multiword, _rns
from ._backend import is_dask, namespace
from ._convert import _matmul_shapes, balanced_halves, check_operand, residues_int64, unwrap_fields
from ._engines import get_engine
from ._flint import FlintType
from ._limits import format_size
from ._modular import add_into
from ._plan import Plan, _check_modulus
from ._planner import plan as make_plan
from ._rnsplan import RNSPlan
from ._tiles import Arena, budget, progress, run, stack_items, take
from .typing import ArrayLike

__all__ = ["matmul"]


def matmul(A: ArrayLike, B: ArrayLike, p: int | None = None, *, out: np.ndarray | None = None,
           plan: Plan | None = None) -> np.ndarray:
    """Matrix product modulo ``p``, exactly.

    Follows :func:`numpy.matmul` semantics: 2-D operands multiply as matrices,
    stacks of matrices (``...`` dimensions) broadcast, and a 1-D operand is
    promoted to a row (``A``) or column (``B``) whose added axis is removed from
    the result.

    Parameters
    ----------
    A, B : array_like
        Integer matrices: any NumPy integer or boolean dtype (negative and
        unreduced entries included, ``uint64`` up to ``2**64 - 1``), float
        arrays holding integers, object arrays of Python ints (or of
        python-flint ``fmpz`` / ``nmod`` / ``fmpz_mod`` scalars), galois
        ``FieldArray`` s of one prime field, or python-flint ``nmod_mat``,
        ``fmpz_mod_mat`` and ``fmpz_mat`` matrices. A plain operand beside a
        ``FieldArray`` or flint matrix is read as integers. Or CuPy integer
        arrays (both operands): the product then runs on their GPU, planned
        for its engines (``modlin.plan(..., device="cuda")``), for ``p < 2**63``.
        Or ``dask.array.Array`` s (one or both; of NumPy, CuPy or FieldArray
        chunks): the product is then lazy, chunk pair by chunk pair
        (:doc:`/guide/distributed`).
    p : int, optional
        The modulus, any integer ``p >= 2``, prime or composite: an ``int``, a
        NumPy integer or a python-flint ``fmpz`` (anything :func:`operator.index`
        takes). May be omitted when an operand fixes it (a ``FieldArray``, an
        ``nmod_mat`` or ``fmpz_mod_mat``, ``nmod`` entries); if given, it must
        equal that modulus.
    out : ndarray, optional
        Where to write the result: an array of the result's dtype and shape
        (a ``FieldArray`` of the operands' field when they are FieldArrays).
        Not with python-flint operands, whose result is always a new matrix.
    plan : Plan or RNSPlan, optional
        A plan from :func:`modlin.plan` to run instead of choosing one. It is
        checked first: against the exactness contract (a :class:`Plan`), or for
        moduli that cover this product's bound (an :class:`RNSPlan`).

    Returns
    -------
    ndarray, FieldArray or python-flint matrix
        ``A @ B mod p`` with entries in ``[0, p)``: int64 for ``p <= 2**63``,
        an object array of Python ints above, or a ``FieldArray`` of the
        operands' field. python-flint operands give the same flint type: an
        ``nmod_mat`` or ``fmpz_mod_mat`` with the operands' modulus, or an
        ``fmpz_mat`` of the residues when only ``fmpz_mat`` s are given (a
        1-D NumPy operand beside them makes a ``1 x n`` or ``n x 1`` matrix,
        two 1-D ones the scalar ``nmod`` / ``fmpz_mod``). CuPy operands give
        a CuPy result on their device; dask operands a lazy dask array of the
        same dtype, chunked as the rows of ``A`` and the columns of ``B``
        (``out`` is then refused: store the result with :func:`dask.array.store`).

    Raises
    ------
    ValueError
        Mismatched shapes, ``p < 2``, NaN/Inf or non-integral floats, a plan
        for another modulus, one that breaks the contract or whose moduli are
        too few for this ``k``, an extension field, operands from different
        fields or of different moduli, or python-flint operands whose
        product would be a stack of matrices.
    TypeError
        Operands that are not matrices (``None``, strings, ``dict`` s, ragged
        nested lists, scipy.sparse matrices, NumPy masked arrays: the
        message names the operand), non-numeric or complex operands, a
        non-integer modulus, a bad ``out``, NumPy and CuPy operands mixed,
        FieldArrays and python-flint matrices mixed, or ``nmod_mat`` and
        ``fmpz_mod_mat`` mixed.

    Notes
    -----
    The product is computed with floating-point GEMMs on small integer words
    (arXiv 2601.07508): ``A`` and ``B`` are reduced into the balanced range
    ``[-p//2, p//2]``, split into words when ``p`` is large, and multiplied in
    blocks small enough that no partial sum exceeds ``2**53`` (``2**24`` for
    the fp32 engine). Beyond ``2**52`` (or where the cost model prefers it),
    the integer product of the balanced operands is computed modulo several
    small primes and rebuilt by CRT (a residue number system). See
    :func:`modlin.plan`, :meth:`Plan.explain` and :meth:`RNSPlan.explain`.

    Examples
    --------
    >>> import numpy as np, modlin
    >>> A = np.array([[1, 2], [3, 4]])
    >>> modlin.matmul(A, A, 5)
    array([[2, 0],
           [0, 2]])
    >>> p = 2**50 - 27  # a 50-bit prime: (p-1)**2 needs 100 bits, the result is exact
    >>> modlin.matmul([[p - 1, 1]], [[p - 1], [2]], p)
    array([[3]])

    python-flint matrices come back as the same type, with their modulus:

    >>> import flint
    >>> F = flint.nmod_mat([[1, 2], [3, 4]], 5)
    >>> C = modlin.matmul(F, F)
    >>> C, type(C).__name__, C.modulus()
    ([2, 0]
    [0, 2], 'nmod_mat', 5)
    """
    if is_dask(A) or is_dask(B):
        from ._dask import matmul as dask_matmul

        return dask_matmul(A, B, p, out, plan, eager=matmul, check_plan=_check_plan, residues=chunk_residues)
    # before the device is decided, so that None or a dict beside a CuPy array is named as such
    A, B = check_operand(A, "A", "modlin.matmul"), check_operand(B, "B", "modlin.matmul")
    if namespace(A, B, out) is not np:
        return _gpu_matmul(A, B, p, out, plan)
    p, field, (A, B) = unwrap_fields(p, A, B, names=("A", "B"), fn="modlin.matmul")
    p = _check_modulus(p)
    (m, k, n), full, shape = _matmul_shapes(np.shape(A), np.shape(B))
    if isinstance(field, FlintType):
        if out is not None:
            raise TypeError("out= takes NumPy arrays and FieldArrays; with python-flint operands "
                            "the result is a new matrix: omit out")
        field.check_product(shape)

    if plan is None:
        plan = make_plan(p, m, k, n)
    else:
        _check_plan(plan, p, k)

    dtype = np.int64 if p <= 2**63 else object
    direct = out is not None and field is None and _usable_out(out, shape, dtype)
    if out is not None and not direct:
        _check_out(out, shape, field, dtype)
    result = out.reshape(full) if direct else np.empty(full, dtype=dtype)
    if result.size:
        _product(plan, _as_matrix(np.asarray(A), 0), _as_matrix(np.asarray(B), 1), p, result)
    result = out if direct else result
    if direct:
        return out
    result = result.reshape(shape)
    if out is not None:
        out.view(np.ndarray)[...] = result
        return out
    if field is not None:
        return field.product(result, np.ndim(A)) if isinstance(field, FlintType) else field(result)
    return result[()] if result.ndim == 0 else result


def _check_plan(plan, p: int, k: int) -> None:
    """Refuse a ``plan=`` argument that cannot compute a product mod ``p`` with this ``k``."""
    if not isinstance(plan, (Plan, RNSPlan)):
        raise TypeError(f"plan must be a modlin.Plan or modlin.RNSPlan, got {type(plan).__name__}")
    if plan.p != p:
        raise ValueError(f"plan was made for p = {plan.p}, not p = {p}; make one with modlin.plan")
    plan.check()
    if isinstance(plan, RNSPlan) and plan.bound < k * (p // 2) ** 2:
        raise ValueError(
            f"the RNS plan covers products with k <= {plan.bound // max((p // 2) ** 2, 1)}, "
            f"not k = {k}; make one for this shape with modlin.plan"
        )


class Prepared:
    """A left operand converted once for many products ``a @ b mod p`` under one plan.

    Made by :func:`prepare_left`; :func:`_product` takes it in place of ``a`` and reads its
    words (a multiword plan) or residues (an RNS plan) instead of converting ``a`` again,
    whenever a tile spans all of ``a`` (else it converts the tiles of ``source``).

    Attributes
    ----------
    source : ndarray
        The operand, a 2-D array of residues (not copied: it must not change while in use).
    parts : _multiword.Words or _rns.Residues
        Its conversion for the plan.
    """

    def __init__(self, source: np.ndarray, parts):
        self.source, self.parts = source, parts
        self.shape = source.shape


def prepare_left(plan: Plan | RNSPlan, a: np.ndarray, p: int) -> Prepared:
    """``a`` (2-D, residues modulo ``p``: int64 below ``2**63``, else Python ints) converted once
    for the products :func:`_product` makes with it under ``plan`` (or a plan that splits
    left operands alike: the same modulus and left words, or the same basis and engine)."""
    if isinstance(plan, Plan):
        return Prepared(a, _multiword.Words(plan, residues_int64(a, p, "A")))
    return Prepared(a, _rns.Residues(balanced_halves(a, p, "A"), plan.basis.moduli, get_engine(plan.engine).dtype))


def _product(plan: Plan | RNSPlan, a: np.ndarray | Prepared, b: np.ndarray, p: int | None, result: np.ndarray,
             *, as_object: bool = False, residues: bool = False, held: tuple = (None, None)) -> None:
    """``result[...] = a @ b mod p`` (2-D or stacked operands, any accepted dtype), tile by
    tile within the memory budget of :func:`modlin.limits` (:meth:`Plan.tiling`).
    With ``p = None`` (an :class:`RNSPlan` of :func:`modlin.intmul`), the exact
    product of int64, uint64 or object operands, as Python ints when ``as_object``.
    With ``residues`` (an :class:`RNSPlan`), ``result`` (int32, shape ``(N,) + the
    product's``) takes the product's residues modulo each of the plan's ``N`` moduli, in
    ``[0, m_i)``, instead: the residues of chunks of ``k`` add up (:func:`modlin._rns.add_residues`)
    to those of the whole product, which one CRT turns into it.

    A stack is tiled as a whole, or matrix by matrix when even its smallest tiles would
    not fit together. Each tile's operands are converted as its product needs them
    (int64 residues, or the pieces of balanced residues), so no whole-operand copy is
    made. Partial products over k-panels are added modulo ``p`` (multiword plans), or as
    residues modulo each modulus before the tile's one CRT (residue number systems).
    A :class:`Prepared` ``a`` (2-D) skips the conversion of the tiles that span it.
    ``held``: the pieces (:class:`modlin._rns._Halves`, or None) of 2-D ``a`` and ``b`` made
    already (:func:`modlin.intmul` makes them for its bound): the tiles read blocks of them,
    and the tiling counts their bytes beside every tile.
    """
    prepared = a.parts if isinstance(a, Prepared) else None
    a = a.source if prepared is not None else a
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    stack = result.shape[1 if residues else 0:-2]
    batch = math.prod(stack)
    multiword = isinstance(plan, Plan)
    # Python ints cost more to convert than to re-read: their tiling counts it (2-D products)
    objects = (a.dtype == object and held[0] is None, b.dtype == object and held[1] is None) if not stack \
        else (False, False)
    pinned = sum(h.nbytes() for h in held if h is not None)
    tiling_of = (lambda count: plan.tiling((m, k, n), batch=count)) if multiword else (
        lambda count: plan.tiling((m, k, n), batch=count, residues=residues, objects=objects, held=pinned))
    try:
        tiling, items, rounds = stack_items(stack, tiling_of, a, b)
    except ValueError as e:
        if not pinned:
            raise
        raise ValueError(f"{e}; what the smallest tile needs includes the {format_size(pinned)} of the operands' "
                         "16-bit pieces, made for the bound and read by every tile") from None
    arena = Arena() if tiling.count * rounds > 1 else None  # tiles reuse their buffers
    lead = (slice(None),) if residues else ()
    whole_a = prepared is not None and tiling.grid[:2] == (1, 1)  # every tile reads all of a
    last_a = [None, None]  # an RNS tile's A block and its pieces, for the next tile of its row

    def pieces(x, name):
        return _rns._Halves(x) if p is None else balanced_halves(x, p, name)

    def pieces_a(x, rows, inner):
        if last_a[0] != (rows, inner):
            last_a[:] = None, None  # freed before the next block's are made
            last_a[:] = (rows, inner), pieces(x[..., rows, inner], "A")
        return last_a[1]

    def int64_residues(t, name):
        r = residues_int64(t, p, name)
        if r.flags.c_contiguous:
            return r
        if arena is None:
            return np.ascontiguousarray(r)
        buf = arena.take(name, r.shape, np.int64)
        np.copyto(buf, r)
        return buf

    def add(tile, part):
        if p is None:  # exact partial sums: the bound covers every one of them
            np.add(tile, part, out=tile)
        else:
            add_into(tile, part, p)
        return tile

    what = "modlin.intmul" if p is None else f"modlin.matmul mod a {p.bit_length()}-bit p"
    with progress(rounds * tiling.count, batch * tiling.count * plan.cost(tiling.tile), what) as bar:
        for idx, x, y in items:
            dst = result[lead + idx]
            kept_b = pieces(y, "B") if tiling.kept else None  # converted once, read by every tile
            last_a[:] = None, None

            def product(rows, inner, cols):
                xt, yt, tile = x[..., rows, inner], y[..., inner, cols], dst[..., rows, cols]
                first = inner.start == 0
                if multiword:
                    part = tile if first else take(arena, "part", tile.shape, np.int64)
                    _multiword.multiply(plan, prepared if whole_a else int64_residues(xt, "A"),
                                        int64_residues(yt, "B"), part, arena)
                    return part
                xt = prepared if whole_a else held[0].block(rows, inner) if held[0] is not None \
                    else pieces_a(x, rows, inner)
                yt = kept_b.block(inner, cols) if kept_b is not None else held[1].block(inner, cols) \
                    if held[1] is not None else pieces(yt, "B")
                whole = first and inner.stop >= k and not residues  # the CRT straight from the products
                direct = whole and tile.dtype == np.int64 and tile.flags.c_contiguous  # into the result itself
                # what the tile holds apart from the result: its int64 entries, and the k-panels'
                # residues; and B's pieces when they are kept
                memory = tiling.budget - tiling.kept - pinned \
                    - (0 if direct else 8 + (0 if whole else 4 * len(plan.moduli))) * tile.size
                if whole:
                    if direct:
                        _rns.multiply(plan, xt, yt, memory=memory, arena=arena, out=tile)
                    else:
                        tile[...] = _rns.multiply(plan, xt, yt, as_object=as_object, memory=memory, arena=arena)
                    return None
                # k-panels: each panel's products reduced and added into the tile's residues
                rc, full = _rns.product_residues(plan, xt, yt, memory=memory, arena=arena)
                # padded rows, which the CRT reads as they are (no float64 copy of N products)
                acc = _rns.padded_rows(len(plan.moduli), math.prod(full), np.int32, arena, "residues")
                return _rns.reduce_residues(rc, math.prod(full), plan.basis, acc, add=not first)

            def finish(rows, cols, acc):
                if acc is None:
                    return
                tile = dst[..., rows, cols]
                E = tile.size // len(plan.moduli) if residues else tile.size
                if residues:
                    tile[...] = acc[:, :E].reshape(tile.shape)
                elif tile.dtype == np.int64 and tile.flags.c_contiguous:  # the CRT writes into the result
                    _rns._reconstruct_rows(acc, E, plan.basis, p, as_object, tile)
                else:
                    tile[...] = _rns._reconstruct_rows(acc, E, plan.basis, p, as_object).reshape(tile.shape)

            if multiword:
                run(tiling, product, add=add, bar=bar)
            else:  # the products added themselves into the tile's residues
                run(tiling, product, add=lambda acc, part: part, finish=finish, bar=bar)


def chunk_residues(a, b, p: int, plan: RNSPlan) -> np.ndarray:
    """The residues of ``a @ b`` modulo each modulus of ``plan`` (int32, ``(N, ...)`` of the
    product's shape, in ``[0, m_i)``), within the memory budget: the partial product of one
    pair of chunks of a dask product (:mod:`modlin._dask`), whose k-chunks' residues add up
    before one CRT per output chunk. ``a``, ``b``: chunks of at least 2 dimensions, of any
    dtype :func:`matmul` accepts (FieldArrays as their NumPy residues)."""
    a, b = np.asarray(a), np.asarray(b)
    _, full, _ = _matmul_shapes(a.shape, b.shape)
    out = np.zeros((len(plan.moduli),) + full, dtype=np.int32)
    if out.size and a.shape[-1]:
        _product(plan, a, b, p, out, residues=True)
    return out


def _gpu_operand(x, p: int, name: str):
    """A CuPy integer array as int64 congruent to it modulo ``p`` (the GPU kernels reduce
    any int64 as they read it: an int64 operand is used as it is, with no pass)."""
    if x.dtype.kind not in "biu":
        raise TypeError(f"{name}: on the GPU, matmul takes integer or boolean CuPy arrays, not {x.dtype}; "
                        "convert integral floats with .astype(cupy.int64) after checking them")
    if x.dtype == np.uint64:  # values from 2**63 up: reduced first, into int64 range
        return _device_residues(x, p)
    return x.astype(np.int64, copy=False)


def _device_residues(x, p: int):
    """A CuPy array of integers (of an integer dtype, or integral floats below ``2**63``)
    reduced into ``[0, p)`` as int64, on the device."""
    if x.dtype == np.uint64:  # below p < 2**63 after the reduction: the same bits as int64
        return (x % np.uint64(p)).view(np.int64)
    return x.astype(np.int64, copy=False) % p  # one array: an int64 operand is not copied first


def _gpu_matmul(A, B, p, out, plan):
    """:func:`matmul` on CuPy arrays: the plan is made for the GPU's engines and every
    pass runs on the device."""
    from . import _gpu

    xp = namespace(A, B, out)
    if p is None:
        raise TypeError("matmul on CuPy arrays needs the modulus p")
    p = _check_modulus(p)
    if p >= 2**63:
        raise ValueError(f"on the GPU, p must be below 2**63 (int64 results); got a {p.bit_length()}-bit p")
    a, b = _gpu_operand(A, p, "A"), _gpu_operand(B, p, "B")
    (m, k, n), full, shape = _matmul_shapes(a.shape, b.shape)
    if plan is None:
        plan = make_plan(p, m, k, n, device="cuda")
    elif not isinstance(plan, (Plan, RNSPlan)) or plan.p != p or plan.device != "cuda":
        raise ValueError("plan must be a modlin.plan(..., device='cuda') plan for this p")
    a, b = _as_matrix(a, 0), _as_matrix(b, 1)
    result = xp.empty(full, dtype=np.int64)
    if result.size:
        # the same tile loop as on the host, within the device's free memory
        tiling = plan.tiling((m, k, n), batch=math.prod(full[:-2]), budget=budget(xp))
        direct = {}  # the tiles whose first k-panel's product was written into the result itself

        def product(rows, inner, cols):
            x, y, tile = a[..., rows, inner], b[..., inner, cols], result[..., rows, cols]
            into = inner.start == 0 and (tile.flags.c_contiguous or not isinstance(plan, Plan))
            part = tile if into else xp.empty(tile.shape, np.int64)
            if into:
                direct[(rows.start, cols.start)] = part
            if isinstance(plan, Plan):
                _multiword.multiply(plan, xp.ascontiguousarray(x), xp.ascontiguousarray(y), part,
                                    stages=_gpu.MULTIWORD)
            else:
                _gpu.rns_multiply(plan, x, y, part)
            return part

        def add(acc, part):
            add_into(acc, part, p)
            return acc

        def finish(rows, cols, acc):
            # where the first k-panel's product went into the tile itself (and the others
            # were added to it there), nothing is left to copy
            if acc is not direct.get((rows.start, cols.start)):
                result[..., rows, cols] = acc

        run(tiling, product, add=add, finish=finish)
    result = result.reshape(shape)
    if out is not None:
        if out.shape != shape or out.dtype != np.int64:
            raise ValueError(f"out must be an int64 CuPy array of shape {shape}")
        out[...] = result
        return out
    return result


def _as_matrix(x: np.ndarray, side: int) -> np.ndarray:
    """A 1-D operand as a row (``side=0``, the left operand) or a column (``side=1``)."""
    if x.ndim != 1:
        return x
    return x[np.newaxis, :] if side == 0 else x[:, np.newaxis]


def _usable_out(out, shape, dtype) -> bool:
    return (
        type(out) is np.ndarray
        and out.dtype == dtype
        and out.shape == shape
        and out.flags.c_contiguous
        and out.flags.writeable
    )


def _check_out(out, shape, field, dtype) -> None:
    if field is not None:
        if type(out) is not field:
            raise TypeError(f"out must be a {field.name} FieldArray when the operands are")
    elif not isinstance(out, np.ndarray) or out.dtype != dtype:
        raise TypeError(f"out must be a numpy.ndarray of dtype {np.dtype(dtype)} (the result's dtype for this p)")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, but the result has shape {shape}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
