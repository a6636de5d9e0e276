"""Scratch memory: a process-wide pool of buffers reused from product to product, and arenas.

A tiled product needs the same temporaries tile after tile and product after product; the
pool (:func:`scratch`) hands back buffers a previous caller released instead of asking the
allocator for fresh pages (whose first touch costs :data:`FRESH_BYTE` ns a byte), keeps at
most the memory budget (then :data:`POOL_SHARE` of it) and lets idle buffers decay.
An :class:`Arena` names the buffers of one product so its tiles reuse them.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from modlin._runtime.calibration import POOL_DECAY, POOL_MIN, POOL_SHARE
from modlin._runtime.limits import current as current_limits


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
        # thread (contextvars context), and that thread has none of its own (modlin._runtime.limits)
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
