"""Tilings: one product cut into tiles whose working memory fits a budget.

Every product algorithm states its working memory for an ``mt x kt`` by ``kt x nt``
product (a *workspace model*, written beside the algorithm), and its modelled time (the
planner's cost model). :func:`choose` picks the tile shape with the lowest modelled total
time among those whose workspace fits: output panels first (rows of ``A``, columns of
``B``), then, when even thin panels would not fit, panels of ``k`` as well, whose partial
products are combined exactly by the caller (a sum modulo ``p`` for products mod ``p``).
A :class:`Tiling` is plain data, shown by ``explain()``; :mod:`modlin._algorithms.tiles`
runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np

from modlin._runtime.calibration import GPU_RESERVE, MIN_TILE, PASS
from modlin._runtime.limits import current as current_limits, format_size


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
           combine: float = PASS) -> Tiling:
    """The cheapest tiling of ``shape`` whose tiles' ``workspace(mt, kt, nt)`` fits ``budget``.

    ``cost(mt, kt, nt)`` is the modelled time of one tile product; k-panels add
    ``combine`` (default :data:`PASS`) per output entry each. With ``split_k=False`` only
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
    products walked by block pairs (:func:`modlin._algorithms.tiles.drive` with ``pairs=True``): a workspace that grows
    with the tile still fits."""
    mt, kt, nt = tiling.tile
    t = min(mt, nt)
    return replace(tiling, tile=(t, kt, t))


def pair_count(tiling: Tiling) -> int:
    """Tile products :func:`modlin._algorithms.tiles.drive` makes with ``pairs=True``."""
    a, c, _ = tiling.grid
    return a * (a + 1) // 2 * c
