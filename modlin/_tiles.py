"""The tile scheduler: one product cut into tiles whose working memory fits a budget.

Every product algorithm states its working memory for an ``mt x kt`` by
``kt x nt`` product (a *workspace model*, written beside the algorithm), and
its modelled time (the planner's cost model). :func:`choose` picks the tile
shape with the lowest modelled total time among those whose workspace fits:
output panels first (rows of ``A``, columns of ``B``), then, when even thin
panels would not fit, panels of ``k`` as well, whose partial products are
combined exactly by the caller (a sum modulo ``p`` for products mod ``p``).

One mechanism serves every path; a :class:`Tiling` is plain data, shown by
``explain()``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import numpy as np

from ._backend import namespace
from ._limits import current as current_limits, format_size
from ._progress import bar as progress_bar, wanted

__all__ = ["Tiling", "Arena", "budget", "choose", "run", "progress", "scratch", "MIN_TILE"]

#: Tiles are never cut thinner than this (or the dimension itself): below it GEMMs
#: lose most of their speed, and a budget that needs thinner tiles is refused.
MIN_TILE = 64

#: Modelled cost, in multiply-adds of a large fp64 GEMM per output entry, of adding
#: one k-panel's partial product into the result (one element-wise pass).
COMBINE_PASS = 40.0


@dataclass(frozen=True)
class Tiling:
    """How a product ``(m, k, n)`` is cut: tiles of ``tile = (mt, kt, nt)``.

    Attributes
    ----------
    shape : tuple of int
        ``(m, k, n)`` of the product (of one matrix of a stack).
    tile : tuple of int
        ``(mt, kt, nt)``: at most ``mt`` rows of ``A``, ``kt`` columns of ``A``
        (rows of ``B``) and ``nt`` columns of ``B`` per tile; the last tile of a
        dimension may be smaller.
    peak : int
        Modelled working memory of one tile, in bytes (beyond operands and result).
    budget : int
        The memory budget it was chosen for.
    cost : float
        Modelled time of all the tile products, in multiply-adds of a large fp64 GEMM.
    kept : int
        Bytes of ``B``'s conversion made once and kept for every tile (counted in ``peak``):
        an operand of Python ints, whose conversion costs more than its re-reading.
    """

    shape: tuple[int, int, int]
    tile: tuple[int, int, int]
    peak: int
    budget: int
    cost: float = 0.0
    kept: int = 0

    @property
    def grid(self) -> tuple[int, int, int]:
        """Tiles along ``m``, ``k`` and ``n``."""
        return tuple(-(-d // t) if d else 1 for d, t in zip(self.shape, self.tile))

    @property
    def count(self) -> int:
        """Number of tile products."""
        return math.prod(self.grid)

    def blocks(self) -> Iterator[tuple[slice, slice, slice]]:
        """``(rows, inner, cols)`` slices of every tile, the k-panels of one output tile
        consecutive (so its partial products can be combined as they come)."""
        (m, k, n), (mt, kt, nt) = self.shape, self.tile
        for i0 in range(0, max(m, 1), mt):
            for j0 in range(0, max(n, 1), nt):
                for k0 in range(0, max(k, 1), kt):
                    yield slice(i0, i0 + mt), slice(k0, k0 + kt), slice(j0, j0 + nt)

    def describe(self, combined: str = "combined mod p") -> str:
        """One line for ``explain()``; ``combined`` says how the partial products of k-panels
        are combined."""
        peak = f"modelled working memory {format_size(self.peak)} (budget {format_size(self.budget)})"
        if self.count == 1:
            return f"1 tile (the whole product), {peak}"
        a, c, b = self.grid
        mt, kt, nt = self.tile
        panels = f", k in {c} panels {combined}" if c > 1 else ""
        kept = f", B converted once ({format_size(self.kept)} kept)" if self.kept else ""
        return f"{self.count} tiles of {mt}x{kt} @ {kt}x{nt} ({a} x {b} output tiles{panels}{kept}), {peak}"


#: Bytes of a GPU's free memory the tiles leave to cuBLAS' workspace, CuPy's kernels and
#: the pool's rounding, or a tenth of it where that is more: those allocations do not
#: shrink with the budget, and a tenth of a few hundred MiB is too thin a margin for them
#: (squeezed products on an H200, benchmarks/gpu_report.py).
GPU_RESERVE = 64 * 2**20


def device_budget(free: int) -> int:
    """The tiles' budget on a GPU with ``free`` bytes free (the pool's free blocks counted)."""
    return max(0, free - max(free // 10, GPU_RESERVE))


def budget(xp=np) -> int:
    """The memory budget of a product on ``xp``'s arrays: :func:`modlin.limits`' for NumPy;
    for CuPy the device's free memory, counting what CuPy's memory pool holds free, less
    what CuPy and cuBLAS need for themselves (:func:`device_budget`; the host budget is
    about host memory, it does not apply there)."""
    if xp is np:
        return current_limits().memory
    try:
        free, _ = xp.cuda.Device().mem_info
        free += xp.get_default_memory_pool().free_bytes()
    except AttributeError:  # not CuPy's API (a stand-in without a device): the host budget
        return current_limits().memory
    return device_budget(int(free))


def _sizes(d: int) -> list[int]:
    """Candidate tile sizes for a dimension ``d``: ``ceil(d/s)`` for growing ``s``, equal
    tiles (so no tiny last tile), down to :data:`MIN_TILE`."""
    if d <= MIN_TILE:
        return [max(d, 1)]
    out, s = [], 1
    while True:
        t = -(-d // s)
        if t < MIN_TILE:
            break
        if not out or t != out[-1]:
            out.append(t)
        s = s + 1 if s < 8 else int(s * 1.25) + 1
    if out[-1] != MIN_TILE:
        out.append(MIN_TILE)
    return out


def choose(shape: tuple[int, int, int], workspace: Callable[[int, int, int], int], budget: int,
           cost: Callable[[int, int, int], float], *, split_k: bool = True,
           combine: float = COMBINE_PASS) -> Tiling:
    """The cheapest tiling of ``shape`` whose tiles' ``workspace(mt, kt, nt)`` fits ``budget``.

    ``cost(mt, kt, nt)`` is the modelled time of one tile product; k-panels add
    ``combine`` (default :data:`COMBINE_PASS`) per output entry each. With ``split_k=False`` only
    output panels are considered (for products whose partial sums could not be
    combined exactly).

    Raises
    ------
    ValueError
        When even the smallest tile does not fit: the message names its size.
    """
    m, k, n = shape
    one = (max(m, 1), max(k, 1), max(n, 1))
    whole = workspace(*one)
    if whole <= budget:
        return Tiling(shape, one, whole, budget, cost(*one))
    best = None
    for kt in _sizes(k) if split_k else [max(k, 1)]:
        ks = -(-k // kt) if k else 1
        for mt in _sizes(m):
            # the widest column panels that fit (workspace grows with nt), down to half the
            # widest: a narrower tile leaves more of the budget to its schedule (an RNS
            # tile's groups of moduli)
            sizes = _sizes(n)
            first = next((i for i, nt in enumerate(sizes) if workspace(mt, kt, nt) <= budget), len(sizes))
            for nt in sizes[first:]:
                if 2 * nt < sizes[first]:
                    break
                tiles = (-(-m // mt) if m else 1) * (-(-n // nt) if n else 1)
                total = tiles * ks * cost(mt, kt, nt) + (ks - 1) * m * n * combine
                if best is None or total < best[0]:
                    best = (total, (mt, kt, nt))
    if best is None:
        t = tuple(min(max(d, 1), MIN_TILE) for d in shape)
        if not split_k:
            t = (t[0], max(k, 1), t[2])
        need = workspace(*t)
        raise ValueError(
            f"the memory budget of {format_size(budget)} is too small for this product: its smallest tile "
            f"({t[0]}x{t[1]} @ {t[1]}x{t[2]}) needs {format_size(need)} ({need} bytes); raise it with "
            f"modlin.limits(memory=...) or MODLIN_MEMORY (for CuPy arrays the budget is the device's free "
            f"memory: free some)"
        )
    total, tile = best
    return Tiling(shape, tile, workspace(*tile), budget, total)


def square(tiling: Tiling) -> Tiling:
    """``tiling`` with square output tiles (the smaller of ``mt`` and ``nt``), for symmetric
    products walked by block pairs (:func:`run` with ``pairs=True``): a workspace that grows
    with the tile still fits."""
    mt, kt, nt = tiling.tile
    t = min(mt, nt)
    return replace(tiling, tile=(t, kt, t))


@contextmanager
def progress(total: int, cost: float, what: str):
    """A progress bar over ``total`` tile products (None unless :func:`modlin.limits` asks for
    progress and ``cost``, the modelled multiply-adds of all of them, is expected to take
    longer than :data:`modlin._progress.MIN_SECONDS`); closed on exit."""
    shown = None
    if wanted(cost):
        shown = progress_bar(total, what, "tile")
    try:
        yield shown
    finally:
        if shown is not None:
            shown.close()


def run(tiling: Tiling, product: Callable[[slice, slice, slice], Any], *,
        add: Callable[[Any, Any], Any] | None = None, finish: Callable[[slice, slice, Any], None] | None = None,
        bar=None, pairs: bool = False) -> None:
    """The tile loop every tiled product runs.

    For each output tile ``(rows, cols)``, ``product(rows, inner, cols)`` gives the
    partial result of each k-panel ``inner``, in order; from the second one on,
    ``acc = add(acc, part)`` combines them (exactly: a sum modulo ``p``, or modulo each
    modulus of residues); then ``finish(rows, cols, acc)`` (when given) completes the
    tile. ``bar`` (from :func:`progress`) advances once per tile product.

    With ``pairs=True`` (square tiles, :func:`square`, of a square output) only the
    tiles on and above the diagonal are visited: symmetric products compute the tile
    ``(I, J)`` and its mirror ``(J, I)`` together.
    """
    k = tiling.shape[1]
    acc = None
    for rows, inner, cols in tiling.blocks():
        if pairs and rows.start > cols.start:
            continue
        part = product(rows, inner, cols)
        acc = part if inner.start == 0 else add(acc, part)
        part = None  # dropped now, not when the next panel's is made: its scratch is idle again
        if inner.stop >= k:
            if finish is not None:
                finish(rows, cols, acc)
            acc = None
        if bar is not None:
            bar.update(1)


def stack_items(stack: tuple[int, ...], tiling_of: Callable[[int], Tiling], a, b):
    """How a stack of products is tiled: ``(tiling, items, rounds)``.

    The whole stack at once (``tiling_of(batch)``) when even its smallest tiles fit
    side by side, else one matrix at a time (``tiling_of(1)``; its ValueError when
    not even that fits). ``items`` yields ``(index, a, b)`` for each round, ``a`` and
    ``b`` being arrays or lists of arrays (the parts of one operand), broadcast to the
    stack and indexed alike.
    """
    try:
        return tiling_of(math.prod(stack)), [((), a, b)], 1
    except ValueError:
        if not stack:
            raise
    tiling = tiling_of(1)

    def whole(x):
        return [whole(t) for t in x] if isinstance(x, list) else namespace(x).broadcast_to(x, stack + x.shape[-2:])

    def pick(x, idx):
        return [pick(t, idx) for t in x] if isinstance(x, list) else x[idx]

    a, b = whole(a), whole(b)
    return tiling, ((idx, pick(a, idx), pick(b, idx)) for idx in np.ndindex(stack)), math.prod(stack)


def pair_count(tiling: Tiling) -> int:
    """Tile products :func:`run` makes with ``pairs=True``."""
    a, c, _ = tiling.grid
    return a * (a + 1) // 2 * c


#: Idle scratch buffers kept between products: up to the whole memory budget while products
#: follow one another, then, :data:`POOL_DECAY` seconds after the last buffer fell idle, at
#: most this fraction of it.
POOL_SHARE = 0.25
#: Modelled cost of a byte of working memory a product maps afresh, in multiply-adds of a
#: large fp64 GEMM on 2 cores: the kernel zeroes and maps each page when it is first
#: written (0.2 s per GiB measured here, where the GEMM does 6e10 multiply-adds a second).
#: What lies beyond :data:`POOL_SHARE` of the budget is charged so, by the planner
#: (multiword against residue plans) and by :meth:`modlin.RNSPlan.schedule`.
FRESH_BYTE = 12.0
#: Seconds idle scratch beyond :data:`POOL_SHARE` of the budget is kept after the last
#: product: a loop of products finds its buffers again, a finished computation returns them.
POOL_DECAY = 2.0
#: Smaller scratch arrays are plain ``np.empty``: the C allocator reuses small blocks without
#: new pages, and a pool of many would be slow to search.
POOL_MIN = 2**20


class _Pool:
    """Scratch memory reused from product to product (numpy only).

    Fresh memory is slow the first time it is written: the kernel maps it page by
    page (measured here, 3.5 ms to allocate and fill 8 MiB against 0.3 ms to refill
    it; a 2M product at n = 1024 spent a third of its time so on its words,
    sums and results). The pool keeps the buffers of finished products, up to
    :data:`POOL_SHARE` of the memory budget, and hands them to the next ones.

    A buffer is handed out again only when nothing refers to it: every array made
    from it (views, reshapes, views of those) holds a reference to the buffer
    itself, as its base, so the buffer is idle exactly when the pool's list holds
    the only reference. A result that is a view of scratch is therefore never
    overwritten while it is alive, whoever holds it.

    The pool never adds to a product's peak: before it takes fresh memory it frees
    every idle buffer (an identical product finds all its buffers idle and takes
    none). Between products it holds at most the memory budget, so that products that
    follow one another map nothing afresh (on the development machine fresh memory cost
    0.1 to 2.6 s per GiB, a 61-bit product at ``n = 4096`` under a 1 GiB budget 7.2
    GEMM times against 6.6 with its buffers kept); :data:`POOL_DECAY` seconds after the
    last array it handed out died, a background thread frees idle buffers beyond
    :data:`POOL_SHARE` of the budget.
    """

    def __init__(self):
        self._bufs: list[np.ndarray] = []  # least recently handed out first
        self._lock = threading.RLock()  # trims run when arrays die, maybe inside empty()
        self._deadline: float | None = None  # when idle buffers beyond the share go
        self._decayer: threading.Thread | None = None
        self._busy = 0  # products inside :meth:`holding`
        # the budget where the last array died, for the background trim: limits are per
        # thread (contextvars context), and that thread has none of its own (modlin._limits)
        self._budget = 0

    @contextmanager
    def holding(self) -> Iterator[None]:
        """No decay while inside: for a product whose stages run seconds without scratch (the
        ozaki scales read the whole operands first), so that its tiles find the buffers the
        previous product left. The decay's delay starts again on exit."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                self._deadline = time.monotonic() + POOL_DECAY

    def _idle(self, i: int, dying: int = 0) -> bool:
        # the list's reference and getrefcount's own argument: no array uses it; the buffer
        # (of id ``dying``) of an array being finalised is still its base, one more
        return sys.getrefcount(self._bufs[i]) <= (3 if id(self._bufs[i]) == dying else 2)

    def empty(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialised C-contiguous array: an idle buffer of at least its size (and at
        most twice, plus a MiB), else a new one; below :data:`POOL_MIN` bytes, ``np.empty``."""
        dtype = np.dtype(dtype)
        need = math.prod(shape) * dtype.itemsize
        if need < POOL_MIN:
            return np.empty(shape, dtype=dtype)
        with self._lock:
            best = None
            for i in range(len(self._bufs)):
                size = self._bufs[i].size
                if need <= size <= 2 * need + 2**20 and (best is None or size < self._bufs[best].size) \
                        and self._idle(i):
                    best = i
            if best is None:
                self._trim(0)
                buf = np.empty(need, dtype=np.uint8)
            else:
                buf = self._bufs.pop(best)
            self._bufs.append(buf)
            out = buf[:need].view(dtype).reshape(shape)
        # an id, not the buffer: the callback must not hold a reference to it (the buffer
        # outlives the callback, the dying array being its base until then)
        weakref.finalize(out, self._died, id(buf)).atexit = False
        return out

    def _died(self, dying: int) -> None:
        """An array handed out is being finalised (``dying``: its buffer's id): keep idle
        buffers up to the budget, and those beyond its share for :data:`POOL_DECAY` seconds."""
        with self._lock:
            self._budget = current_limits().memory
            self._trim(self._budget, dying)
            self._deadline = time.monotonic() + POOL_DECAY
            if self._decayer is None:
                self._decayer = threading.Thread(target=self._decay, name="modlin-pool", daemon=True)
                self._decayer.start()

    def _decay(self) -> None:
        """The background thread: once the deadline passes with no array dying since, trim
        idle buffers to the share of the budget (that of the last array to die), and end."""
        while True:
            with self._lock:
                left = POOL_DECAY if self._busy else self._deadline - time.monotonic()
                if left <= 0:
                    self._trim(int(self._budget * POOL_SHARE))
                    self._decayer = None
                    return
            time.sleep(left)

    def _trim(self, cap: int | None = None, dying: int = 0) -> None:
        """Free the least recently used idle buffers beyond ``cap`` bytes (default: the
        share of the budget); ``dying``: the id of the buffer of an array being finalised
        (which runs this, as that buffer may be idle once it is gone)."""
        with self._lock:
            if cap is None:
                cap = int(current_limits().memory * POOL_SHARE)
            idle = [i for i in range(len(self._bufs)) if self._idle(i, dying)]
            total = sum(self._bufs[i].size for i in idle)
            drop = set()
            for i in idle:
                if total <= cap:
                    break
                total -= self._bufs[i].size
                drop.add(i)
            if drop:
                self._bufs[:] = [b for i, b in enumerate(self._bufs) if i not in drop]

    def idle_bytes(self) -> int:
        with self._lock:
            return sum(self._bufs[i].size for i in range(len(self._bufs)) if self._idle(i))

    def held_bytes(self) -> int:
        with self._lock:
            return sum(b.size for b in self._bufs)


_POOL = _Pool()


def holding():
    """:meth:`_Pool.holding` of the scratch pool: its idle buffers wait for the product inside."""
    return _POOL.holding()


def scratch(shape: tuple[int, ...], dtype, xp=np):
    """An uninitialised C-contiguous work array: from the pool of scratch memory for NumPy
    (:class:`_Pool`), a plain ``xp.empty`` for CuPy (whose own pool does this)."""
    if xp is not np:
        return xp.empty(shape, dtype=dtype)
    return _POOL.empty(tuple(shape), dtype)


class Arena:
    """Named buffers reused from tile to tile.

    Fresh memory is slow the first time it is touched (the kernel maps each page
    as it is written): a product whose tiles allocated their words and
    accumulators anew would pay that for every tile. ``take`` returns a view of
    the buffer of that name, grown when a larger one is asked for, so a tiled
    product holds at most one buffer of each kind, as its workspace model counts.
    """

    def __init__(self):
        self._buffers: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialised C-contiguous array of ``shape`` and ``dtype`` in buffer ``name``."""
        dtype = np.dtype(dtype)
        need = math.prod(shape) * dtype.itemsize
        buf = self._buffers.get(name)
        if buf is None or buf.size < need:
            self._buffers.pop(name, None)  # back to the pool, before a larger one is taken
            buf = self._buffers[name] = scratch((max(need, 1),), np.uint8)
        return buf[:need].view(dtype).reshape(shape)


def take(arena: Arena | None, name: str, shape: tuple[int, ...], dtype, xp=np):
    """``arena.take(...)``, or without an arena a :func:`scratch` array."""
    return scratch(shape, dtype, xp) if arena is None else arena.take(name, shape, dtype)
