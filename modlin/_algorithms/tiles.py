"""The tile driver: one product run tile by tile, and the shapes of NumPy's matmul.

A :class:`~modlin._planning.tiling.Tiling` (chosen by the planner within the memory
budget) cuts a product into output tiles and k-panels; :func:`drive` calls the caller's
tile product on each, adds k-panels' partial products with the caller's ``add`` and
hands each finished tile to ``finish``, with a progress bar on long work
(:func:`progress`). :func:`stack_items` walks the matrices of stacked operands, and
:func:`matmul_shapes` / :func:`as_matrix` give NumPy's matmul broadcasting.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np

from modlin._engines.backend import namespace
from modlin._planning.tiling import Tiling
from modlin._runtime.progress import bar as progress_bar, wanted


@contextmanager
def progress(total: int, cost: float, what: str):
    """A progress bar over ``total`` tile products (None unless :func:`modlin.limits` asks for
    progress and ``cost``, the modelled multiply-adds of all of them, is expected to take
    longer than :data:`modlin._runtime.progress.MIN_SECONDS`); closed on exit."""
    shown = None
    if wanted(cost):
        shown = progress_bar(total, what, "tile")
    try:
        yield shown
    finally:
        if shown is not None:
            shown.close()


def drive(tiling: Tiling, product: Callable[[slice, slice, slice], Any], *,
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


def matmul_shapes(sa: tuple[int, ...], sb: tuple[int, ...]):
    """``numpy.matmul`` shape rules: ``((m, k, n), full shape, result shape)``, or ValueError."""
    if len(sa) == 0 or len(sb) == 0:
        raise ValueError("matmul: operands must have at least one dimension (use * for scalars)")
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise ValueError(
            f"matmul: shapes {sa} and {sb} are not aligned: A has {k} columns but B has {k2} rows"
        )
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(f"matmul: stack shapes {a2[:-2]} and {b2[:-2]} do not broadcast") from None
    full = batch + (m, n)
    shape = full[:-2] + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
    return (m, k, n), full, shape


def as_matrix(x: np.ndarray, side: int) -> np.ndarray:
    """A 1-D operand as a row (``side=0``, the left operand) or a column (``side=1``)."""
    if x.ndim != 1:
        return x
    return x[np.newaxis, :] if side == 0 else x[:, np.newaxis]
