"""Object arrays of Python ints to 16-bit pieces and back, by the fastest way this
interpreter allows.

Three ways, each checked once per process before it is used, the same results from each:
CPython's own int objects read and made by numba kernels (:mod:`modlin._arith.pyints_cpython`,
which depends on CPython's int layout); :mod:`marshal` streams parsed and written by numba
kernels (:mod:`modlin._arith.pyints_marshal`, portable wherever marshal's int format is
CPython's); ``int.to_bytes`` / ``int.from_bytes`` entry by entry (anywhere; slowest).
:func:`to_halves`, :func:`from_limbs` and :class:`IntWriter` take the first that passed.
"""

from __future__ import annotations

import numpy as np

from modlin._arith.pyints_cpython import (
    all_exact_ints,
    c_api,
    halves_from_objects,
    int_layout,
    objects_from_limbs,
    objects_read_ok,
    objects_write_ok,
    slots_of,
)
from modlin._arith.pyints_marshal import (
    MAX_MARSHAL_ENTRIES,
    check_limbs,
    from_limbs_bytes,
    ints_marshal,
    marshal_ok,
    to_halves_bytes,
    to_halves_marshal,
)


def python_ints(x: np.ndarray) -> np.ndarray:
    """An object array of Python ints equal to ``x``; TypeError for anything else.

    The check looks at the set of entry types (one fast pass); entries are
    converted only when some are NumPy integer scalars.
    """
    if x.size and all_exact_ints(x):  # the common case, without a walk in Python
        return x
    types = set(map(type, x.flat))
    for t in types:
        if issubclass(t, (bool, np.bool_)) or not issubclass(t, (int, np.integer)):
            bad = next(e for e in x.flat if type(e) is t)
            raise TypeError(f"object arrays must hold Python or NumPy integers; found {t.__name__} {bad!r}")
    return x if types <= {int} else np.frompyfunc(int, 1, 1)(x)


def to_halves(x: np.ndarray, most: int | None = None) -> np.ndarray | None:
    """Python ints as 16-bit two's-complement pieces.

    Parameters
    ----------
    x : numpy.ndarray
        Array of Python ints, any shape and strides (normally ``dtype=object``;
        other dtypes go through ``tolist`` too, so an int64 array works and a
        float array gives None).
    most : int, optional
        The most pieces the caller takes: None is returned when an entry needs more
        (before any are made for it).

    Returns
    -------
    numpy.ndarray or None
        C-contiguous uint16 array of shape ``(H, x.size)``: row ``j`` holds bits
        ``16j .. 16j+15`` of the two's complement of every entry of
        ``x.ravel()``, with the smallest ``H >= 1`` such that
        ``-2**(16H-1) <= v < 2**(16H-1)`` for every entry ``v`` (the top row
        carries the sign). None when some entry is not exactly of type
        ``int``: ``bool``, numpy integer scalars, ``int`` subclasses, floats
        and anything else are refused, so that the caller's slower path can
        convert or report them.

    Examples
    --------
    >>> to_halves(np.array([1, -1, 2**16], dtype=object))
    array([[    1, 65535,     0],
           [    0, 65535,     1]], dtype=uint16)
    >>> to_halves(np.array([1, True], dtype=object)) is None
    True
    """
    if x.dtype == object and objects_read_ok():
        return halves_from_objects(x, most)
    if marshal_ok("read") and x.size <= MAX_MARSHAL_ENTRIES:
        h = to_halves_marshal(x)
    else:
        h = to_halves_bytes(x)
    return None if h is None or (most is not None and h.shape[0] > most) else h


class IntWriter:
    """Python ints from the limbs of their magnitudes, given a chunk of entries at a time.

    ``w = IntWriter(E)``, then ``w.add(limbs, neg)`` for consecutive chunks of
    entries (``limbs`` of shape ``(L, c)`` and ``neg`` as for :func:`from_limbs`),
    then ``w.result()``: :func:`from_limbs` of the chunks side by side, without
    the whole ``(L, E)`` limbs ever existing; ``IntWriter(E, out)`` writes them into
    ``out``, a C-contiguous object array of ``E`` entries (a result's own), whose
    entries are replaced (no array of ``E`` entries is made and copied). Each chunk is
    converted as it comes, while its limbs are still in cache: on CPython the
    ints are made by a kernel (:func:`objects_from_limbs`, about twice as fast
    as ``marshal``), elsewhere through one marshal buffer reused from chunk to
    chunk.

    Examples
    --------
    >>> w = IntWriter(3)
    >>> w.add(np.array([[1, 0], [0, 1]], dtype=np.uint16), np.array([False, True]))
    >>> w.add(np.array([[5], [0]], dtype=np.uint16))
    >>> w.result()
    array([1, -65536, 5], dtype=object)
    """

    def __init__(self, E: int, out: np.ndarray | None = None):
        if out is not None and (out.dtype != object or out.size != E or not out.flags.c_contiguous):
            raise ValueError(f"an IntWriter writes into a C-contiguous object array of {E} entries")
        self._out = np.empty(E, dtype=object) if out is None else out.reshape(E)
        self._filled = 0
        self._direct = objects_write_ok()
        self._slots = slots_of(self._out) if self._direct else None
        self._buf = None

    def add(self, limbs: np.ndarray, neg: np.ndarray | None = None) -> None:
        """Append the next ``limbs.shape[1]`` entries."""
        limbs, neg = check_limbs(limbs, neg)
        a = self._filled
        b = a + limbs.shape[1]
        if b > self._out.size:
            raise ValueError(f"{b} entries given to an IntWriter of {self._out.size}")
        if self._direct and limbs.dtype == np.uint16:  # (other limbs are checked on the way below)
            if objects_from_limbs(limbs, neg, self._slots[a:b], *c_api(), int_layout() == 1) < b - a:
                raise MemoryError(f"Python ints of {b - a} entries")
        elif marshal_ok("write"):
            self._buf = ints_marshal(limbs, neg, self._out[a:b], self._buf)
        else:
            self._out[a:b] = from_limbs_bytes(limbs, neg)
        self._filled = b

    def result(self) -> np.ndarray:
        """The 1-D object array of all ``E`` entries."""
        if self._filled != self._out.size:
            raise ValueError(f"{self._filled} of the IntWriter's {self._out.size} entries given")
        return self._out


def from_limbs(limbs: np.ndarray, neg: np.ndarray | None = None) -> np.ndarray:
    """Python ints from the 16-bit pieces of their magnitudes.

    Parameters
    ----------
    limbs : numpy.ndarray
        Shape ``(L, E)``, uint16, int64 or float64: ``limbs[j, e]`` is an
        integer in ``[0, 65536)``, bits ``16j .. 16j+15`` of the magnitude of
        entry ``e``.
    neg : numpy.ndarray, optional
        Bool, shape ``(E,)``: entry ``e`` is ``-magnitude`` where true (a zero
        magnitude gives 0 either way).

    Returns
    -------
    numpy.ndarray
        1-D object array of length ``E`` of Python ints.

    Raises
    ------
    ValueError
        On a limb outside ``[0, 65536)`` or not an integer, or on bad shapes.
    TypeError
        On another dtype of ``limbs``.

    Examples
    --------
    >>> limbs = np.array([[1, 0, 5], [0, 1, 0]], dtype=np.uint16)
    >>> from_limbs(limbs, np.array([False, True, True]))
    array([1, -65536, -5], dtype=object)
    """
    limbs, neg = check_limbs(limbs, neg)
    w = IntWriter(limbs.shape[1])
    w.add(limbs, neg)
    return w.result()
