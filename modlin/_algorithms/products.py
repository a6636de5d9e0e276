"""The products of integer matrices, tile by tile: modulo ``p`` (multiword or RNS plans)
and exact (:func:`integer_product`, the engine of :func:`modlin.intmul`).

:func:`tile_product` runs a plan over the tiles of one product within the memory budget:
operands converted once per tile (or once for the whole product), partial products over
k-panels added modulo ``p`` (or as residues), results written into the caller's array.
The GPU path (:func:`gpu_matmul`) runs the device stage tables of
:mod:`modlin._algorithms.gpu`.
"""

from __future__ import annotations

import math

import numpy as np

from modlin._algorithms import gpu as _gpu, multiword as _multiword, rns as _rns
from modlin._algorithms.tiles import as_matrix, drive, matmul_shapes, progress, stack_items
from modlin._arith import crt as _crt, residues as _residues
from modlin._arith.integers import balanced_halves, integers, max_abs, residues_int64
from modlin._arith.modular import add_into
from modlin._arith.moduli import check_modulus
from modlin._engines.backend import namespace
from modlin._engines.gemm import ENGINES, get_engine
from modlin._planning import contract as _contract
from modlin._planning.plan import Plan, gemm_model_cost
from modlin._planning.planner import plan as make_plan
from modlin._planning.rnsplan import RNSPlan, as_moduli, rns_plan
from modlin._planning.tiling import budget, choose
from modlin._runtime.limits import current as current_limits, format_size
from modlin._runtime.scratch import Arena, take


class Prepared:
    """A left operand converted once for many products ``a @ b mod p`` under one plan.

    Made by :func:`prepare_left`; :func:`tile_product` takes it in place of ``a`` and reads its
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
    for the products :func:`tile_product` makes with it under ``plan`` (or a plan that splits
    left operands alike: the same modulus and left words, or the same basis and engine)."""
    if isinstance(plan, Plan):
        return Prepared(a, _multiword.Words(plan, residues_int64(a, p, "A")))
    return Prepared(a, _residues.Residues(balanced_halves(a, p, "A"), plan.basis.moduli, get_engine(plan.engine).dtype))


def tile_product(plan: Plan | RNSPlan, a: np.ndarray | Prepared, b: np.ndarray, p: int | None, result: np.ndarray,
             *, as_object: bool = False, residues: bool = False, held: tuple = (None, None)) -> None:
    """``result[...] = a @ b mod p`` (2-D or stacked operands, any accepted dtype), tile by
    tile within the memory budget of :func:`modlin.limits` (:meth:`Plan.tiling`).
    With ``p = None`` (an :class:`RNSPlan` of :func:`modlin.intmul`), the exact
    product of int64, uint64 or object operands, as Python ints when ``as_object``.
    With ``residues`` (an :class:`RNSPlan`), ``result`` (int32, shape ``(N,) + the
    product's``) takes the product's residues modulo each of the plan's ``N`` moduli, in
    ``[0, m_i)``, instead: the residues of chunks of ``k`` add up (:func:`modlin._algorithms.rns.add_residues`)
    to those of the whole product, which one CRT turns into it.

    A stack is tiled as a whole, or matrix by matrix when even its smallest tiles would
    not fit together. Each tile's operands are converted as its product needs them
    (int64 residues, or the pieces of balanced residues), so no whole-operand copy is
    made. Partial products over k-panels are added modulo ``p`` (multiword plans), or as
    residues modulo each modulus before the tile's one CRT (residue number systems).
    A :class:`Prepared` ``a`` (2-D) skips the conversion of the tiles that span it.
    ``held``: the pieces (:class:`modlin._arith.residues.Pieces16`, or None) of 2-D ``a`` and ``b`` made
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
    whole_a = prepared if prepared is not None and tiling.grid[:2] == (1, 1) else None  # every tile reads all of a
    what = "modlin.intmul" if p is None else f"modlin.matmul mod a {p.bit_length()}-bit p"
    with progress(rounds * tiling.count, batch * tiling.count * plan.cost(tiling.tile), what) as bar:
        for idx, x, y in items:
            dst = result[lead + idx]
            if multiword:
                tiles = _MultiwordTiles(plan, x, y, dst, p, whole_a, arena)
            else:
                tiles = _RNSTiles(plan, x, y, dst, p, whole_a, arena, tiling, held, pinned, as_object, residues)
            drive(tiling, tiles.product, add=tiles.add, finish=tiles.finish, bar=bar)


def _contiguous_int64(t, p: int, name: str, arena: Arena | None) -> np.ndarray:
    """``t``'s residues modulo ``p`` as a C-contiguous int64 array (in the arena's buffer
    ``name`` when one is given and a copy is needed)."""
    r = residues_int64(t, p, name)
    if r.flags.c_contiguous:
        return r
    if arena is None:
        return np.ascontiguousarray(r)
    buf = arena.take(name, r.shape, np.int64)
    np.copyto(buf, r)
    return buf


class _MultiwordTiles:
    """The tile products of a multiword plan over one matrix of a stack: each k-panel's
    product modulo ``p`` (its operands' words made from the panels, or read from a
    :class:`Prepared` ``a`` that the tile spans), the k-panels added modulo ``p`` into the
    result's own tile."""

    finish = None

    def __init__(self, plan: Plan, x, y, dst, p: int, prepared, arena: Arena | None):
        self.plan, self.x, self.y, self.dst, self.p, self.prepared, self.arena = plan, x, y, dst, p, prepared, arena

    def product(self, rows: slice, inner: slice, cols: slice) -> np.ndarray:
        tile = self.dst[..., rows, cols]
        part = tile if inner.start == 0 else take(self.arena, "part", tile.shape, np.int64)
        a = self.prepared if self.prepared is not None else _contiguous_int64(self.x[..., rows, inner], self.p, "A",
                                                                                  self.arena)
        _multiword.multiply(self.plan, a, _contiguous_int64(self.y[..., inner, cols], self.p, "B", self.arena), part,
                            self.arena)
        return part

    def add(self, tile: np.ndarray, part: np.ndarray) -> np.ndarray:
        add_into(tile, part, self.p)
        return tile


class _RNSTiles:
    """The tile products of a residue number system over one matrix of a stack. A tile that
    spans ``k`` goes from its products straight through the CRT into the result (or its
    residues, with ``residues``); k-panels' products are reduced and added into the tile's
    residues, which :meth:`finish` turns into the result. The operands enter as 16-bit
    pieces (balanced residues modulo ``p``, or the integers themselves for ``p = None``):
    ``held`` ones, a :class:`Prepared` ``a``, ``B``'s kept whole when the tiling keeps them,
    or each block's, ``A``'s made once per row of tiles."""

    def __init__(self, plan: RNSPlan, x, y, dst, p: int | None, prepared, arena: Arena | None, tiling, held: tuple,
                 pinned: int, as_object: bool, residues: bool):
        self.plan, self.x, self.y, self.dst, self.p, self.prepared, self.arena = plan, x, y, dst, p, prepared, arena
        self.tiling, self.held, self.pinned, self.as_object, self.residues = tiling, held, pinned, as_object, residues
        self.kept_b = self._pieces(y, "B") if tiling.kept else None  # converted once, read by every tile
        self.last_a = None, None  # a tile's A block and its pieces, for the next tile of its row

    def _pieces(self, x, name: str):
        return _residues.Pieces16(x) if self.p is None else balanced_halves(x, self.p, name)

    def _a(self, rows: slice, inner: slice):
        if self.prepared is not None:
            return self.prepared
        if self.held[0] is not None:
            return self.held[0].block(rows, inner)
        if self.last_a[0] != (rows, inner):
            self.last_a = None, None  # freed before the next block's are made
            self.last_a = (rows, inner), self._pieces(self.x[..., rows, inner], "A")
        return self.last_a[1]

    def _b(self, inner: slice, cols: slice):
        if self.kept_b is not None:
            return self.kept_b.block(inner, cols)
        if self.held[1] is not None:
            return self.held[1].block(inner, cols)
        return self._pieces(self.y[..., inner, cols], "B")

    def product(self, rows: slice, inner: slice, cols: slice):
        plan, tile, arena = self.plan, self.dst[..., rows, cols], self.arena
        xt, yt = self._a(rows, inner), self._b(inner, cols)
        first = inner.start == 0
        whole = first and inner.stop >= self.tiling.shape[1] and not self.residues  # the CRT straight from the products
        # into the result itself where the CRT can write there
        direct = whole and tile.flags.c_contiguous and tile.dtype == _crt.out_dtype(self.p, self.as_object)
        # what the tile holds apart from the result: its int64 entries, and the k-panels'
        # residues; and B's pieces when they are kept
        memory = self.tiling.budget - self.tiling.kept - self.pinned \
            - (0 if direct else 8 + (0 if whole else 4 * len(plan.moduli))) * tile.size
        if whole:
            if direct:
                _rns.multiply(plan, xt, yt, as_object=self.as_object, memory=memory, arena=arena, out=tile)
            else:
                tile[...] = _rns.multiply(plan, xt, yt, as_object=self.as_object, memory=memory, arena=arena)
            return None
        # k-panels: each panel's products reduced and added into the tile's residues
        rc, full = _rns.product_residues(plan, xt, yt, memory=memory, arena=arena)
        # padded rows, which the CRT reads as they are (no float64 copy of N products)
        acc = _residues.padded_rows(len(plan.moduli), math.prod(full), np.int32, arena, "residues")
        return _rns.reduce_residues(rc, math.prod(full), plan.basis, acc, add=not first)

    def add(self, acc, part):
        return part  # each panel's products were added into the tile's residues already

    def finish(self, rows: slice, cols: slice, acc) -> None:
        if acc is None:
            return
        plan, tile = self.plan, self.dst[..., rows, cols]
        E = tile.size // len(plan.moduli) if self.residues else tile.size
        if self.residues:
            tile[...] = acc[:, :E].reshape(tile.shape)
        elif tile.dtype == np.int64 and tile.flags.c_contiguous:  # the CRT writes into the result
            _crt.reconstruct_rows(acc, E, plan.basis, self.p, self.as_object, tile)
        else:
            tile[...] = _crt.reconstruct_rows(acc, E, plan.basis, self.p, self.as_object).reshape(tile.shape)


def chunk_residues(a, b, p: int, plan: RNSPlan) -> np.ndarray:
    """The residues of ``a @ b`` modulo each modulus of ``plan`` (int32, ``(N, ...)`` of the
    product's shape, in ``[0, m_i)``), within the memory budget: the partial product of one
    pair of chunks of a dask product (:mod:`modlin._front.dask`), whose k-chunks' residues add up
    before one CRT per output chunk. ``a``, ``b``: chunks of at least 2 dimensions, of any
    dtype :func:`matmul` accepts (FieldArrays as their NumPy residues)."""
    a, b = np.asarray(a), np.asarray(b)
    _, full, _ = matmul_shapes(a.shape, b.shape)
    out = np.zeros((len(plan.moduli),) + full, dtype=np.int32)
    if out.size and a.shape[-1]:
        tile_product(plan, a, b, p, out, residues=True)
    return out


def _gpu_operand(x, p: int, name: str):
    """A CuPy integer array as int64 congruent to it modulo ``p`` (the GPU kernels reduce
    any int64 as they read it: an int64 operand is used as it is, with no pass)."""
    if x.dtype.kind not in "biu":
        raise TypeError(f"{name}: on the GPU, matmul takes integer or boolean CuPy arrays, not {x.dtype}; "
                        "convert integral floats with .astype(cupy.int64) after checking them")
    if x.dtype == np.uint64:  # values from 2**63 up: reduced first, into int64 range
        return device_residues(x, p)
    return x.astype(np.int64, copy=False)


def device_residues(x, p: int):
    """A CuPy array of integers (of an integer dtype, or integral floats below ``2**63``)
    reduced into ``[0, p)`` as int64, on the device."""
    if x.dtype == np.uint64:  # below p < 2**63 after the reduction: the same bits as int64
        return (x % np.uint64(p)).view(np.int64)
    return x.astype(np.int64, copy=False) % p  # one array: an int64 operand is not copied first


def gpu_matmul(A, B, p, out, plan):
    """:func:`matmul` on CuPy arrays: the plan is made for the GPU's engines and every
    pass runs on the device."""

    xp = namespace(A, B, out)
    if p is None:
        raise TypeError("matmul on CuPy arrays needs the modulus p")
    p = check_modulus(p)
    if p >= 2**63:
        raise ValueError(f"on the GPU, p must be below 2**63 (int64 results); got a {p.bit_length()}-bit p")
    a, b = _gpu_operand(A, p, "A"), _gpu_operand(B, p, "B")
    (m, k, n), full, shape = matmul_shapes(a.shape, b.shape)
    if plan is None:
        plan = make_plan(p, m, k, n, device="cuda")
    elif not isinstance(plan, (Plan, RNSPlan)) or plan.p != p or plan.device != "cuda":
        raise ValueError("plan must be a modlin.plan(..., device='cuda') plan for this p")
    a, b = as_matrix(a, 0), as_matrix(b, 1)
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

        drive(tiling, product, add=add, finish=finish)
    result = result.reshape(shape)
    if out is not None:
        if out.shape != shape or out.dtype != np.int64:
            raise ValueError(f"out must be an int64 CuPy array of shape {shape}")
        out[...] = result
        return out
    return result


def single_gemm_exact(a, b, k: int) -> bool:
    """Whether one float64 GEMM computes ``a @ b`` exactly: fixed-width operands (arrays,
    not the pieces of object arrays) whose partial sums stay within ``2**53`` (the
    contract with ``c_max = 0``)."""
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype != object and b.dtype != object
            and _contract.is_exact(k, max_abs(a), max_abs(b), 0, ENGINES["fp64"].L))


def _float_gemm(a: np.ndarray, b: np.ndarray, full: tuple[int, ...]) -> np.ndarray:
    """``a @ b`` (int64) by float64 GEMMs when :func:`single_gemm_exact` holds, tile by tile
    within the memory budget: each tile converts its panels to float64 and k-panels add in
    float64, exactly, since every partial sum of the product is within ``2**53`` too."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    c = np.empty(full, dtype=np.int64)
    if c.size == 0:
        return c

    def tiling_of(batch):
        # the float64 panels, the tile's product and, with k-panels, the running sum
        return choose((m, k, n), lambda mt, kt, nt: 8 * batch * (mt * kt + kt * nt + 2 * mt * nt),
                      current_limits().memory, lambda mt, kt, nt: batch * gemm_model_cost(mt, kt, nt))

    tiling, items, _ = stack_items(full[:-2], tiling_of, a, b)
    for idx, x, y in items:
        dst = c[idx]

        def product(rows, inner, cols):
            return ENGINES["fp64"].gemm(x[..., rows, inner].astype(np.float64), y[..., inner, cols].astype(np.float64))

        def finish(rows, cols, acc):
            dst[..., rows, cols] = acc

        drive(tiling, product, add=lambda acc, part: np.add(acc, part, out=acc), finish=finish)
    return c


def _operand(x, name: str, side: int):
    """An intmul operand as ``(matrix, what the RNS reads, largest |entry|)``: fixed-width
    arrays as they are, object arrays also as the 16-bit pieces the RNS reads (one
    conversion pass, no Python arithmetic on the entries), which give the bound."""

    x = np.asarray(x)
    if x.dtype == object and x.size:
        x = as_matrix(x, side)
        h = _residues.Pieces16(x)
        return x, h, h.max_abs()
    x = as_matrix(integers(x, name), side)
    return x, x, max_abs(x)


def integer_product(A, B, *, engine: str | None = None, moduli=None) -> np.ndarray:
    """The exact product of integer arrays (checked by the caller: fixed-width integers or
    object arrays of Python ints, NumPy matmul shapes), the engine of :func:`modlin.intmul`:
    one float64 GEMM when ``k * max|A| * max|B| <= 2**53``, else a residue number system,
    tiled within the memory budget. The result has the broadcast shape (int64 below
    ``2**63``, Python ints above)."""
    (m, k, n), full, shape = matmul_shapes(np.shape(A), np.shape(B))
    (a, ha, amax), (b, hb, bmax) = _operand(A, "A", 0), _operand(B, "B", 1)
    bound = k * amax * bmax
    as_object = bound >= 2**63
    dtype = object if as_object else np.int64
    if moduli is None and engine is None and single_gemm_exact(a, b, k):
        c = _float_gemm(a, b, full)
    elif not np.prod(full):
        c = np.zeros(full, dtype=dtype)
    else:
        pl = rns_plan(None, bound, (m, k, n), engine=engine,
                      moduli=None if moduli is None else as_moduli(moduli))
        try:
            whole = pl.tiling((m, k, n), batch=math.prod(full[:-2])).count == 1
        except ValueError:  # not even the whole stack's smallest tiles fit: the driver decides
            whole = False
        if whole:
            c = _rns.multiply(pl, ha, hb, as_object=as_object)  # the pieces made for the bound
        else:  # tile by tile within the memory budget, reading blocks of the pieces made for the bound
            held = tuple(h if isinstance(h, _residues.Pieces16) and len(full) == 2 else None for h in (ha, hb))
            del ha, hb  # a stack's tiles convert their own blocks
            c = np.empty(full, dtype=dtype)
            tile_product(pl, a, b, None, c, as_object=as_object, held=held)
    return c.reshape(shape)
