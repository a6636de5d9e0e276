"""Python ints read and made in place, on CPython's int layout.

Reading: on CPython, whose ints are a size-and-sign word and 30-bit digits after
the object's header, a numba kernel reads every entry's digits straight from its
memory (:func:`halves_from_objects`, about 40 ns an entry at 127 bits, most of it
the memory's latency), with the GIL held, so that no other thread can drop an
entry while it is read. :func:`objects_read_ok` checks that layout once per process
against ``int.to_bytes`` on boundary values. Writing: there, the ints
of a product's results are made the same way, by a kernel that asks the
interpreter for each new int (``_PyLong_New``) and writes its digits and its
size and sign (:func:`objects_from_limbs`, checked once per process by
:func:`objects_write_ok`). Elsewhere (another interpreter, a free-threaded
build) both go through :mod:`marshal`.

Everything here depends on that layout; :func:`objects_read_ok` and :func:`objects_write_ok` are its self-checks.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import sysconfig
from functools import cache

import numpy as np

from modlin._arith.pyints_marshal import (
    CHECK_VALUES,
    bit_length,
    check_limbs_of,
    refuses_non_ints,
    to_halves_bytes,
)
from modlin._engines.jit import call_int64, call_void, njit, peek_int64, peek_uint32, poke_int64, poke_uint32
from modlin._runtime.calibration import PYINTS_FLUSH, PYINTS_TILED_PIECES

#: Offsets (bytes) in a CPython int object of its type pointer, of the word that holds its
#: size and sign, and of its 30-bit digits (least significant first).
_TYPE, _SIZE, _DIGITS = 8, 16, 24


def int_layout() -> int | None:
    """How this interpreter's ints keep their size and sign: 0 for a signed count of digits
    (CPython up to 3.11), 1 for a tag (3.12 on: ``digits << 3 | sign``, sign 0 for positive,
    1 for zero, 2 for negative); None for anything else (other interpreters, free-threaded
    builds, other digits or word sizes), where :func:`to_halves` goes through ``marshal``."""
    if sys.implementation.name != "cpython" or sys.byteorder != "little" or struct.calcsize("P") != 8 \
            or sys.int_info.bits_per_digit != 30 or sys.int_info.sizeof_digit != 4 \
            or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    return 0 if sys.version_info < (3, 12) else 1


@njit(inline="always")
def _digits(a, int_type, tagged):  # pragma: no cover - compiled
    """``(count, negative)`` of the digits of the int object at address ``a``; a count of
    -1 when the object is not exactly an ``int`` (its type is not ``int_type``)."""
    if peek_int64(a + _TYPE) != int_type:
        return -1, False
    w = peek_int64(a + _SIZE)
    if tagged:
        return w >> 3, (w & 3) == 2
    return (w if w >= 0 else -w), w < 0


@njit(nogil=False)
def _objects_need(ptrs, int_type, tagged):  # pragma: no cover - compiled
    """The pieces :func:`to_halves` needs for the int objects at ``ptrs``; 0 when one is not
    exactly an ``int``. Holds the GIL, as every kernel that reads objects: no other thread
    can drop an entry while it is read."""
    H = 1
    for e in range(ptrs.shape[0]):
        a = ptrs[e]
        nd, neg = _digits(a, int_type, tagged)
        if nd < 0:
            return 0
        if nd == 0:
            continue
        top = peek_uint32(a + _DIGITS + 4 * (nd - 1))
        bits = 30 * (nd - 1) + bit_length(top)
        if neg:  # -2**b needs no more pieces than 2**b - 1
            power = top & (top - 1) == 0
            for i in range(nd - 1):
                power = power and peek_uint32(a + _DIGITS + 4 * i) == 0
            if power:
                bits -= 1
        H = max(H, bits // 16 + 1)
    return H


@njit(nogil=False)
def _objects_halves(ptrs, int_type, tagged, out, tile):  # pragma: no cover - compiled
    """:func:`to_halves` of the int objects at ``ptrs`` into ``out`` (``(Hb, E)`` uint16, as
    many rows as the caller expects to need), in one pass over them: returns the pieces
    needed (the first rows of ``out`` hold them), 0 when an entry is not exactly an ``int``,
    -1 when one needs more than ``Hb`` pieces (``out`` is then unfinished). With a ``tile``
    of ``(Hb, T)``, ``T > 0``, the pieces of ``T`` entries at a time are gathered there and
    then copied row by row (for many pieces: written straight, every entry's pieces touch
    ``Hb`` rows far apart). Holds the GIL (see :func:`_objects_need`)."""
    Hb, E = out.shape
    T = tile.shape[1]
    step = T if T else max(E, 1)
    H = 1
    for e0 in range(0, E, step):
        e1 = min(E, e0 + step)
        buf, off = (tile, e0) if T else (out, 0)
        for e in range(e0, e1):
            a = ptrs[e]
            nd, neg = _digits(a, int_type, tagged)
            if nd < 0:
                return 0
            c = e - off
            acc = np.uint64(0)
            nb, i = 0, 0
            carry = np.uint64(1)  # two's complement: the pieces of |v| inverted, plus one
            for j in range(Hb):
                while nb < 16 and i < nd:
                    acc |= np.uint64(peek_uint32(a + _DIGITS + 4 * i)) << np.uint64(nb)
                    nb += 30
                    i += 1
                piece = acc & np.uint64(0xFFFF)
                acc >>= np.uint64(16)
                nb = max(nb - 16, 0)
                if neg:
                    piece = (~piece & np.uint64(0xFFFF)) + carry
                    carry = piece >> np.uint64(16)
                    piece &= np.uint64(0xFFFF)
                buf[j, c] = piece
            # |v| beyond Hb pieces, or the top piece's bit not the sign
            if i < nd or acc != 0 or (buf[Hb - 1, c] >= 32768) != neg:
                return -1
            sign = np.uint16(0xFFFF) if neg else np.uint16(0)
            h = Hb
            while h > H and buf[h - 1, c] == sign and (buf[h - 2, c] >= 32768) == neg:
                h -= 1
            H = h
        if T:
            for j in range(Hb):
                src, dst = tile[j], out[j, e0:e1]
                for c in range(e1 - e0):
                    dst[c] = src[c]
    return H


@njit(nogil=False)
def _objects_all_of(ptrs, int_type):  # pragma: no cover - compiled
    """Whether every object at ``ptrs`` is exactly of the type at ``int_type`` (holds the GIL,
    see :func:`_objects_need`)."""
    for e in range(ptrs.shape[0]):
        if peek_int64(ptrs[e] + _TYPE) != int_type:
            return False
    return True


def all_exact_ints(x: np.ndarray) -> bool | None:
    """Whether every entry of the object array ``x`` is exactly a Python ``int`` (no bool, no
    subclass), read from the objects' type pointers: 1 ms where a walk over ``map(type, ...)``
    takes 24 (10**6 entries); None where this interpreter's objects are not read this way
    (:func:`objects_read_ok`)."""
    if x.dtype != object:
        raise TypeError(f"all_exact_ints reads object arrays only, not {x.dtype}")
    if not objects_read_ok():
        return None
    flat = np.ascontiguousarray(x).reshape(-1)  # holds every entry alive while they are read
    return bool(_objects_all_of(slots_of(flat), id(int)))


def halves_from_objects(x: np.ndarray, most: int | None) -> np.ndarray | None:
    """:func:`to_halves` of an object array, read straight from its ints' memory: three to
    four times as fast as through ``marshal`` (25 against 99 ns an entry at 127 bits, medians of 7 on
    1024 x 1024; 50 against 152 at 256 bits), and nothing
    but the pieces allocated. As many pieces as a sample of the entries needs are written
    in one pass; should a later entry need more, the entries are measured and written again."""
    if x.dtype != object:  # its entries would be read as addresses
        raise TypeError(f"halves_from_objects reads object arrays only, not {x.dtype}")
    flat = np.ascontiguousarray(x).reshape(-1)  # the array (or its copy) holds every entry alive
    E = flat.size
    if not E:
        return np.zeros((1, 0), dtype=np.uint16)
    ptrs = slots_of(flat)
    tagged = int_layout() == 1
    sample = flat[:: max(1, E // 64)].tolist()
    if any(type(v) is not int for v in sample):
        return None
    Hb = max(max(sample), ~min(sample)).bit_length() // 16 + 1
    if most is not None and Hb > most:
        return None
    H = -1
    for measured in (False, True):
        if measured:  # some entry needs more pieces than the sample's
            Hb = _objects_need(ptrs, id(int), tagged)
            if not Hb or (most is not None and Hb > most):
                return None
        out = np.empty((Hb, E), dtype=np.uint16)
        tile = np.empty((Hb, PYINTS_FLUSH if Hb > PYINTS_TILED_PIECES else 0), dtype=np.uint16)
        H = _objects_halves(ptrs, id(int), tagged, out, tile)
        if H >= 0:
            break
    return out[:H] if H > 0 else None


@njit(nogil=False)
def objects_from_limbs(limbs, neg, slots, new, release, tagged):  # pragma: no cover - compiled
    """``slots[e]`` = a new int of value ``±limbs[:, e]`` (uint16 limbs of the magnitude,
    least significant first; ``-`` where ``neg[e]``) for every entry ``e``, made by the
    interpreter's ``_PyLong_New`` (the address ``new``) and given its 30-bit digits and its
    size and sign word here; what ``slots`` held (references of an object array's entries)
    is released (``Py_DecRef``, the address ``release``). Returns the entries written:
    fewer only when the interpreter could not make one (its MemoryError then pending).
    Holds the GIL: it makes objects."""
    L, E = limbs.shape
    for e in range(E):
        top = L
        while top > 0 and limbs[top - 1, e] == 0:
            top -= 1
        bits = 0
        if top:
            bits = 16 * (top - 1) + bit_length(limbs[top - 1, e])
        nd = (bits + 29) // 30
        obj = call_int64(new, nd)
        if obj == 0:
            return e
        acc = np.uint64(0)
        nb, j = 0, 0
        for d in range(nd):
            while nb < 30 and j < top:
                acc |= np.uint64(limbs[j, e]) << np.uint64(nb)
                nb += 16
                j += 1
            poke_uint32(obj + _DIGITS + 4 * d, np.uint32(acc & np.uint64(0x3FFFFFFF)))
            acc >>= np.uint64(30)
            nb = max(nb - 30, 0)
        negative = neg[e] and nd > 0
        if tagged:
            poke_int64(obj + _SIZE, (nd << 3) | (2 if negative else (0 if nd else 1)))
        else:
            poke_int64(obj + _SIZE, -nd if negative else nd)
        old = slots[e]
        slots[e] = obj
        call_void(release, old)
    return E


@cache
def c_api() -> tuple[int, int] | None:
    """The addresses of ``_PyLong_New`` and ``Py_DecRef`` in this interpreter, or None."""
    try:
        return tuple(ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value
                     for name in ("_PyLong_New", "Py_DecRef"))
    except (AttributeError, ValueError):
        return None


def slots_of(out: np.ndarray) -> np.ndarray:
    """The entries of the C-contiguous object array ``out`` as the addresses they hold
    (int64, a view of its memory: writing one replaces a reference, not counted)."""
    return np.ctypeslib.as_array((ctypes.c_int64 * out.size).from_address(out.ctypes.data)) if out.size \
        else np.zeros(0, dtype=np.int64)


@cache
def objects_read_ok() -> bool:
    """Whether :func:`to_halves` may read ints straight from their memory: this interpreter's
    ints are laid out as :func:`int_layout` knows, and :data:`CHECK_VALUES` come out as
    ``int.to_bytes`` writes them (in one pass, and measured first), non-ints refused."""
    try:
        if int_layout() is None:
            return False
        x = np.empty(len(CHECK_VALUES), dtype=object)
        x[:] = list(CHECK_VALUES)
        ref = to_halves_bytes(x)
        # as they are (the sample is every entry), and at odd places among zeros, which the
        # sample (every other entry, of 128 or more) misses: measured, and written again
        spread = np.zeros(4 * len(x) + 128, dtype=object)
        spread[1:2 * len(x):2] = x
        for y in (x, spread):
            h = halves_from_objects(y, None)
            if h is None or not np.array_equal(h, to_halves_bytes(y)):
                return False
        if halves_from_objects(x, ref.shape[0] - 1) is not None:
            return False
        return refuses_non_ints(lambda y: halves_from_objects(y, None))
    except Exception:  # noqa: BLE001  any surprise: not the layout we assume
        return False


@cache
def objects_write_ok() -> bool:
    """Whether :class:`IntWriter` may make ints itself (:func:`objects_from_limbs`): this
    interpreter's ints are laid out as :func:`int_layout` knows, its C API has the
    functions, and the ints made for :data:`CHECK_VALUES` (and zeros, and ones made
    negative) are those values, as Python's own arithmetic sees them."""
    try:
        if int_layout() is None or c_api() is None:
            return False
        vals = list(CHECK_VALUES) + [0, 5, -(2**29), 2**30 - 1, -(2**30), 2**60]
        limbs, neg = check_limbs_of(vals)
        neg[vals.index(0)] = True  # -0 is 0
        out = np.empty(len(vals), dtype=object)
        if objects_from_limbs(limbs, neg, slots_of(out), *c_api(), int_layout() == 1) != len(vals):
            return False
        back = out.tolist()
        return back == vals and all(type(v) is int and int(str(v)) == v and hash(v) == hash(int(str(v)))
                                    and v - 1 + 1 == v and (v < 0) == (int(str(v)) < 0) for v in back)
    except Exception:  # noqa: BLE001  any surprise: not the layout we assume
        return False
