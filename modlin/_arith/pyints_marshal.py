"""Python ints through :mod:`marshal` streams, and entry by entry: the portable ways.

Converting entry by entry with ``int.to_bytes`` / ``int.from_bytes`` costs
about 240 / 140 ns per entry, almost all of it interpreter overhead.
``marshal.dumps`` / ``marshal.loads`` walk a whole list in C (35-60 ns per
entry), and their serialisation of ints is a simple format that numba kernels
parse and write at a few ns per entry. With ``version=2`` (no ``FLAG_REF``
back-references) a list of ints is, in CPython's ``Python/marshal.c``::

    b'['  int32 count                       (little-endian throughout)
    per entry, either
      b'i'  int32 value                     (value fits in signed 32 bits)
      b'l'  int32 n  |n| x uint16 digit     (15-bit digits, least significant
                                             first, top digit nonzero;
                                             n < 0 for a negative value)

Any other type code (``'T'``/``'F'`` bools, ``'g'`` floats, ``'s'`` for
objects with the buffer protocol such as numpy scalars, ``'N'``, strings, ...)
means the entry is not an exact ``int``; ``marshal.dumps`` raises
``ValueError`` for objects it cannot serialise at all (``int`` subclasses,
``Fraction``, ...).

The format is an implementation detail of CPython, so :func:`marshal_ok`
checks it once per process against ``int.to_bytes`` / ``int.from_bytes`` on
boundary values; if the check fails, the public functions use per-entry
``int.to_bytes`` / ``int.from_bytes`` instead (same results, slower).
"""

from __future__ import annotations

import marshal
import math
import struct
from functools import cache

import numpy as np

from modlin._engines.jit import njit
from modlin._runtime.calibration import PYINTS_BLOCK, PYINTS_FLUSH, PYINTS_MAX_FIRST_BUFFER, PYINTS_STREAM_ENTRIES

# Type codes of Python/marshal.c.
_LIST = ord("[")


_INT = ord("i")


_LONG = ord("l")


#: Marshal lists carry a signed 32-bit count.
MAX_MARSHAL_ENTRIES = 2**31 - 1


@njit(inline="always")
def _load_le(buf, pos, nbytes):  # pragma: no cover - compiled
    """The little-endian unsigned int of ``nbytes`` (a constant 1..8) bytes at
    ``buf[pos]`` (uint8), as int64 (wrapping for 8 bytes).

    LLVM merges the byte loads into one unaligned load when it can tell that
    their indices do not wrap around: unsigned indices tell it, where signed
    ones get numba's handling of negative indices. Little-endian machines only:
    elsewhere :func:`marshal_ok` fails and the kernels are not used.
    """
    p = np.uint64(pos)
    v = np.int64(0)
    for k in range(nbytes):
        v |= np.int64(buf[p + np.uint64(k)]) << (8 * k)
    return v


@njit(inline="always")
def _read_i32(buf, pos):  # pragma: no cover - compiled
    """The signed little-endian int32 at ``buf[pos:pos + 4]`` (as int64)."""
    return np.int64(np.int32(_load_le(buf, pos, 4)))


@njit(inline="always")
def _write_i32(buf, pos, v):  # pragma: no cover - compiled
    """Write ``v`` (an int64 in signed or unsigned 32-bit range) as 4 LE bytes."""
    u = v & 0xFFFFFFFF  # two's complement of a negative v
    buf[pos] = u & 0xFF
    buf[pos + 1] = (u >> 8) & 0xFF
    buf[pos + 2] = (u >> 16) & 0xFF
    buf[pos + 3] = (u >> 24) & 0xFF


@njit(inline="always")
def _read_u16(buf, pos):  # pragma: no cover - compiled
    """The little-endian uint16 at ``buf[pos:pos + 2]`` (as int64): a digit."""
    return _load_le(buf, pos, 2)


@njit(inline="always")
def bit_length(x):  # pragma: no cover - compiled
    """Bits of an integer ``0 <= x < 2**53`` (``int.bit_length``; digits, limbs and pieces are
    below ``2**32``): exact in float64, so frexp's exponent (no branch: a loop that stops at
    the top bit mispredicts on random data). The only definition: a looping one defined
    later in this module once replaced it in every kernel, since numba reads the module's
    globals when it compiles."""
    return math.frexp(np.float64(x))[1]


@njit
def _long_pieces(buf, d0, nd, neg):  # pragma: no cover - compiled
    """The fewest pieces (at least 1) holding the ``'l'`` entry of ``nd`` digits
    from ``buf[d0]``, negative when ``neg``."""
    # bit length b of the magnitude; marshal normalises (top digit nonzero),
    # but skipping zero top digits costs nothing here
    top = nd - 1
    while top >= 0 and _read_u16(buf, d0 + 2 * top) == 0:
        top -= 1
    if top < 0:
        return 1
    d = _read_u16(buf, d0 + 2 * top)
    b = 15 * top + bit_length(d)
    # v >= 0 needs b <= 16H - 1. v = -m needs m <= 2**(16H-1): one piece fewer
    # exactly when m is a power of two 2**(b-1) and 16 | b.
    h = b // 16 + 1
    if neg and b % 16 == 0:
        for k in range(top):
            if _read_u16(buf, d0 + 2 * k):
                return h
        if (d & (d - 1)) == 0:
            h -= 1
    return h


@njit
def _scan_marshal(buf, count):  # pragma: no cover - compiled
    """Validate a ``marshal.dumps(list, 2)`` stream of ``count`` ints.

    Returns ``(ok, H)``: ``ok`` is False on any type code other than
    ``'i'``/``'l'`` (an entry that is not an exact int) or a malformed stream;
    ``H >= 1`` is the fewest 16-bit pieces holding every entry in two's
    complement.

    An entry only matters when it needs more than the ``H`` found so far, which
    its top digit tells without a bit length (a library call) or a branch on
    its sign; the exact count is worked out only for the entries that fail that
    test, few after the first.
    """
    n = buf.shape[0]
    if n < 5 or buf[0] != _LIST or _read_i32(buf, 1) != count:
        return False, 1
    H = 1
    pos = 5
    for _ in range(count):
        if pos + 5 > n:
            return False, 1
        code = _load_le(buf, pos, 1)
        if (code - _INT) * (code - _LONG) != 0:  # one test, no branch on which
            return False, 1
        is_long = code == _LONG
        v = _read_i32(buf, pos + 1)
        nd = abs(v) if is_long else np.int64(0)
        d0 = pos + 5
        pos = d0 + 2 * nd
        if pos > n:
            return False, 1
        # a magnitude below 2**(16H - 1) fits H pieces whatever the sign: for an
        # 'i' entry |v| itself; for an 'l' entry a nonzero top digit below 2**r,
        # r = 16H - 1 - 15 (nd - 1) (clamped: shifts stay below 64). The rest (a
        # zero top digit, -2**(16H - 1)) is counted exactly. top is read for an
        # 'i' entry too (bytes of v, unused): no branch on the type.
        top = _read_u16(buf, pos - 2)
        x = top if is_long else abs(v)
        r = min(max(16 * H + 14 - 15 * nd, 0), 16) if is_long else min(16 * H - 1, 32)
        if not (((x != 0) | (not is_long)) & (x < (np.int64(1) << r))):
            h_int = 1 + np.int64((v < -32768) | (v > 32767))
            H = max(H, _long_pieces(buf, d0, nd, v < 0) if is_long else h_int)
    return pos == n, H


@njit
def _block_words(CH, NEG, LOW, R, C, tile):  # pragma: no cover - compiled
    """The two's complement of ``PYINTS_BLOCK`` entries, 64 bits per row, into
    ``tile[:, k]`` for entry (lane) ``k``.

    Lane ``k`` holds chunks ``CH[:, k]`` (the 8-byte words from its first
    digit on, past its end too), sign ``NEG[k]`` (0 or -1), digit bits ``R[k]``
    (0 for an ``'i'`` entry) and ``LOW[k]`` (the magnitude of an ``'i'`` entry,
    else 0); ``C`` is scratch. Every step is the same for all lanes, with
    masks for what differs (type, sign, length), so that the loops over lanes
    vectorise (the whole kernel, E = 2**22: 14.6 -> 11.8 ns per entry at
    ``H = 17``, 43 -> 34 at ``H = 65``, against the same steps an entry at a
    time).
    """
    # four 15-bit digits per chunk to 60 contiguous bits: digits 1 and 3 down
    # one bit (two 30-bit pairs), then the upper pair down two. A digit past
    # the entry with its 16th bit set spoils only its own bits and those above,
    # masked off below.
    for j in range(CH.shape[0]):
        ch = CH[j]
        for k in range(PYINTS_BLOCK):
            x = ch[k]
            x -= (x >> 1) & 0x3FFF80003FFF8000
            ch[k] = (x & 0x3FFFFFFF) | ((x >> 2) & 0x0FFFFFFFC0000000)
    # a negative value is negated as ~m + 1, the carry running up the words
    for k in range(PYINTS_BLOCK):
        C[k] = -NEG[k]
    for i in range(tile.shape[0]):
        # word i < 15 is bits 4i .. 4i + 63 of chunks i and i + 1; 15 words
        # span 16 chunks exactly, so word 15 starts afresh at chunk 16
        lo = CH[i + i // 15]
        hi = CH[i + i // 15 + 1]
        off = 4 * (i % 15)
        first = -np.int64(i == 0)
        row = tile[i]
        for k in range(PYINTS_BLOCK):
            w = (lo[k] >> off) | (hi[k] << (60 - off))
            r = R[k] - 64 * i  # bits of the entry left from this word on
            w &= np.int64(-1) if r >= 64 else (np.int64(1) << max(r, 0)) - 1
            w |= LOW[k] & first
            row[k] = (w ^ NEG[k]) + C[k]
            C[k] &= np.int64(w == 0)


@njit(inline="always")
def _transpose_block(tile, T, c0):  # pragma: no cover - compiled
    """Pieces of ``tile`` (column ``s PYINTS_BLOCK / 4 + q`` holding entry ``4 q + s``)
    into columns ``c0 .. c0 + PYINTS_BLOCK / 4`` of ``T`` (row ``4 i + u`` holding
    piece ``4 i + u`` of entries ``4 q .. 4 q + 3``, one int64 for four).

    4 x 4 transposes of 16-bit fields in int64 registers, the same steps for
    every ``q``, so that they vectorise (0.5 ns per entry at ``H = 17``; copying
    pieces one by one takes several).
    """
    quarter = PYINTS_BLOCK // 4
    lo16 = 0x0000FFFF0000FFFF
    lo32 = 0x00000000FFFFFFFF
    for i in range(tile.shape[0]):
        for q in range(quarter):
            a = tile[i, q]
            b = tile[i, quarter + q]
            c = tile[i, 2 * quarter + q]
            d = tile[i, 3 * quarter + q]
            ab02 = (a & lo16) | ((b & lo16) << 16)
            ab13 = ((a >> 16) & lo16) | (b & ~lo16)
            cd02 = (c & lo16) | ((d & lo16) << 16)
            cd13 = ((c >> 16) & lo16) | (d & ~lo16)
            T[4 * i, c0 + q] = (ab02 & lo32) | (cd02 << 32)
            T[4 * i + 1, c0 + q] = (ab13 & lo32) | (cd13 << 32)
            T[4 * i + 2, c0 + q] = ((ab02 >> 32) & lo32) | (cd02 & ~lo32)
            T[4 * i + 3, c0 + q] = ((ab13 >> 32) & lo32) | (cd13 & ~lo32)


@njit
def _halves_from_marshal(buf, out, work, T, T16):  # pragma: no cover - compiled
    """Fill ``out[:, e]`` (uint16, ``(H, E)``) with the two's-complement pieces
    of entry ``e`` of a stream already validated by :func:`_scan_marshal`
    (``work``, ``T``: :func:`_reader_scratch`'s buffers, ``T16`` the uint16 view of ``T``).

    Entries go ``PYINTS_BLOCK`` at a time: a pass over their headers (a chain from
    each entry's start to the next one's) copies each entry's chunks into a
    column of ``CH``; :func:`_block_words` makes ``ceil(H / 4)`` int64 words of
    each, turned around four by four into a buffer of rows for ``PYINTS_FLUSH``
    entries, copied out row by row: writing each entry's column straight into
    ``out`` touches ``H`` lines ``2 E`` bytes apart, which share one cache set
    when ``E`` is a power of two (4.5x slower at ``H = 64``).
    """
    H, E = out.shape
    W = (H + 3) // 4
    nc = work.shape[0] - W - 4
    reach = 8 * nc
    CH = work[:nc]
    NEG, LOW, R, C = work[nc], work[nc + 1], work[nc + 2], work[nc + 3]
    tile = work[nc + 4:]
    n = buf.shape[0]
    pos = 5
    for e0 in range(0, E, PYINTS_BLOCK):
        nb = min(PYINTS_BLOCK, E - e0)  # lanes past nb keep stale values, not copied out
        for b in range(nb):
            col = (b & 3) * (PYINTS_BLOCK // 4) + (b >> 2)  # see _transpose_block
            v = _read_i32(buf, pos + 1)
            is_long = _load_le(buf, pos, 1) == _LONG
            nd = abs(v) if is_long else np.int64(0)
            d0 = pos + 5
            if d0 + reach <= n:
                for j in range(nc):
                    CH[j, col] = _load_le(buf, d0 + 8 * j, 8)
            else:  # the last few entries: their chunks would read past the stream
                for j in range(nc):
                    x = np.int64(0)
                    for t in range(min(8, n - d0 - 8 * j)):
                        x |= np.int64(buf[d0 + 8 * j + t]) << (8 * t)
                    CH[j, col] = x
            NEG[col] = -np.int64(v < 0)
            LOW[col] = np.int64(0) if is_long else abs(v)
            R[col] = 15 * nd
            pos = d0 + 2 * nd
        _block_words(CH, NEG, LOW, R, C, tile)
        c = e0 % PYINTS_FLUSH
        _transpose_block(tile, T, c // 4)
        if c + nb == PYINTS_FLUSH or e0 + nb == E:
            for j in range(H):
                # 1-d views indexed from 0: indices that numba need not wrap
                # (if negative) let LLVM vectorise the copy (5x faster)
                dst = out[j, e0 - c:e0 + nb]
                src = T16[j]
                for k in range(c + nb):
                    dst[k] = src[k]


def _reader_scratch(H: int) -> tuple[np.ndarray, np.ndarray]:
    """The buffers of :func:`_halves_from_marshal` for ``H`` pieces: rows of :data:`PYINTS_BLOCK`
    lanes for each entry block's ``nc`` chunks (up to word ``W - 1``'s upper one), its signs,
    low values, chunk counts and carries, and its ``W`` words; and the rows of :data:`PYINTS_FLUSH`
    entries' pieces. Made here, not in the kernel: allocating there would make its cached
    code import ``numba.np.arrayobj`` when first loaded (40 ms of a first call)."""
    W = (H + 3) // 4
    nc = W + (W - 1) // 15 + 1
    return np.zeros((nc + 4 + W, PYINTS_BLOCK), dtype=np.int64), np.empty((4 * W, PYINTS_FLUSH // 4), dtype=np.int64)


def to_halves_marshal(x: np.ndarray) -> np.ndarray | None:
    """:func:`to_halves` through ``marshal.dumps`` and two numba passes."""
    E = x.size
    try:
        buf = np.frombuffer(marshal.dumps(x.ravel().tolist(), 2), dtype=np.uint8)
    except ValueError:  # an object marshal cannot serialise: not an exact int
        return None
    ok, H = _scan_marshal(buf, E)
    if not ok:
        return None
    out = np.empty((H, E), dtype=np.uint16)
    if E:
        work, T = _reader_scratch(H)
        _halves_from_marshal(buf, out, work, T, T.view(np.uint16))
    return out


def to_halves_bytes(x: np.ndarray) -> np.ndarray | None:
    """:func:`to_halves` through ``int.to_bytes`` entry by entry (the fallback)."""
    lst = x.ravel().tolist()
    if not lst:
        return np.zeros((1, 0), dtype=np.uint16)
    if any(type(v) is not int for v in lst):
        return None
    # v >= 0 fits H pieces iff v < 2**(16H-1); v < 0 iff ~v = -v-1 < 2**(16H-1)
    big = max(max(lst), ~min(lst))
    H = big.bit_length() // 16 + 1
    raw = b"".join([v.to_bytes(2 * H, "little", signed=True) for v in lst])
    pieces = np.frombuffer(raw, dtype=np.uint16).reshape(len(lst), H)
    return np.ascontiguousarray(pieces.T)


@njit
def _append_marshal(limbs, neg, e_start, e_stop, buf, pos, tile, most):  # pragma: no cover - compiled
    """Append the marshal items of ``±magnitude`` per entry ``e_start <= e < e_stop`` to
    ``buf[:pos]``, as far as ``buf`` surely holds them. (Bounds rather than a slice of
    ``limbs``: the kernel is compiled for C-contiguous limbs only, where slices of columns
    would need a second specialisation.)

    Returns ``(pos, e)``: the stream is now ``buf[:pos]`` and holds the entries before ``e``
    (``e < e_stop`` when the next block of entries might not fit: :func:`_write_marshal`
    then grows ``buf`` and goes on); ``pos = -1`` on a limb that is not an integer in
    ``[0, 65536)``.

    Limbs are read through ``tile`` (int64 ``(PYINTS_BLOCK, L + 1)``, its last column zero),
    filled row by row: reading each entry's column of ``limbs`` touches ``L`` lines ``E``
    items apart, which share one cache set when ``E`` is a power of two. The extra zero
    column lets every 15-bit digit be cut from two neighbouring limbs without a branch.
    ``most``: the bytes of the longest entry, :func:`_most_bytes` of ``L``.
    """
    L = limbs.shape[0]
    for e0 in range(e_start, e_stop, PYINTS_BLOCK):
        nb = min(PYINTS_BLOCK, e_stop - e0)
        if pos + nb * most > buf.shape[0]:
            return pos, e0
        bad = False
        for j in range(L):
            lv = limbs[j, e0:e0 + nb]  # indexed from 0, as LLVM vectorises best
            for b in range(nb):
                x = lv[b]
                ok = (x >= 0) & (x <= 0xFFFF)  # False for NaN too
                h = np.int64(x) if ok else np.int64(0)
                bad |= (not ok) | (h != x)  # h != x: a fractional float
                tile[b, j] = h
        if bad:
            return np.int64(-1), e0
        for b in range(nb):
            t = L - 1  # the top nonzero limb
            while t >= 0 and tile[b, t] == 0:
                t -= 1
            sign = neg[e0 + b]
            if t <= 1:
                m = tile[b, 0] if t >= 0 else np.int64(0)
                if t == 1:
                    m |= tile[b, 1] << 16
                if m < 2**31 or (sign and m == 2**31):  # fits TYPE_INT
                    buf[pos] = _INT
                    _write_i32(buf, pos + 1, -m if sign else m)
                    pos += 5
                    continue
            nd = (16 * t + bit_length(tile[b, t]) + 14) // 15
            buf[pos] = _LONG
            _write_i32(buf, pos + 1, -nd if sign else nd)
            pos += 5
            # exactly nd 15-bit digits, so the top one is nonzero (normalised);
            # digit i is bits 15 i .. 15 i + 14, within limbs q and q + 1
            for i in range(nd):
                q = (15 * i) >> 4
                d = ((tile[b, q] | (tile[b, q + 1] << 16)) >> ((15 * i) & 15)) & 0x7FFF
                buf[pos + 2 * i] = d & 0xFF
                buf[pos + 2 * i + 1] = d >> 8
            pos += 2 * nd
    return pos, e_stop


def _most_bytes(L: int) -> int:
    """Bytes of the longest marshal item of an entry of ``L`` 16-bit limbs: its header and
    ``ceil(16 L / 15)`` 15-bit digits of two bytes."""
    return 5 + 2 * ((16 * L + 14) // 15)


def _write_marshal(limbs: np.ndarray, neg: np.ndarray, e_start: int, e_stop: int,
                   buf: np.ndarray) -> tuple[np.ndarray, int]:
    """The ``marshal.dumps(list, 2)`` stream of ``±magnitude`` per entry ``e_start <= e <
    e_stop``, as ``(buf, n)`` with the stream ``buf[:n]`` (``n = -1`` on a bad limb), written
    into ``buf`` (at least 5 bytes) or into a larger buffer if it does not fit, twice as
    large each time, so each entry is written once."""
    L = limbs.shape[0]
    most = np.int64(_most_bytes(L))
    buf[0] = _LIST
    buf[1:5] = np.frombuffer(struct.pack("<i", e_stop - e_start), dtype=np.uint8)
    tile = np.zeros((PYINTS_BLOCK, L + 1), dtype=np.int64)
    pos, e = 5, e_start
    while True:
        pos, e = _append_marshal(limbs, neg, e, e_stop, buf, np.int64(pos), tile, most)
        if pos < 0 or e == e_stop:
            return buf, int(pos)
        grown = np.empty(max(2 * buf.shape[0], pos + PYINTS_BLOCK * int(most)), dtype=np.uint8)
        grown[:pos] = buf[:pos]
        buf = grown


_LIMB_DTYPES = (np.dtype(np.uint16), np.dtype(np.int64), np.dtype(np.float64))


def check_limbs(
    limbs: np.ndarray, neg: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Shape and dtype checks; C-contiguous views (or copies) for the kernels."""
    limbs = np.asarray(limbs)
    if limbs.ndim != 2:
        raise ValueError(f"limbs must have shape (L, E), got {limbs.shape}")
    if limbs.dtype not in _LIMB_DTYPES:
        raise TypeError(f"limbs must be uint16, int64 or float64, not {limbs.dtype}")
    E = limbs.shape[1]
    if neg is None:
        neg = np.zeros(E, dtype=np.bool_)
    else:
        neg = np.ascontiguousarray(neg, dtype=np.bool_)
        if neg.shape != (E,):
            raise ValueError(f"neg must have shape ({E},), got {neg.shape}")
    return np.ascontiguousarray(limbs), neg


def ints_marshal(limbs: np.ndarray, neg: np.ndarray, out: np.ndarray, buf: np.ndarray | None = None) -> np.ndarray:
    """Fill the object array ``out`` with the Python ints of checked ``limbs`` and
    ``neg`` (see :func:`from_limbs`), one marshal stream per :data:`PYINTS_STREAM_ENTRIES`
    entries written into ``buf`` and read by ``marshal.loads``. Returns the buffer
    (perhaps grown), for the next call."""
    L, E = limbs.shape
    if buf is None:
        buf = np.empty(max(5, min(5 + min(E, PYINTS_STREAM_ENTRIES) * _most_bytes(L), PYINTS_MAX_FIRST_BUFFER)), dtype=np.uint8)
    for e0 in range(0, E, PYINTS_STREAM_ENTRIES):
        e1 = min(E, e0 + PYINTS_STREAM_ENTRIES)
        buf, n = _write_marshal(limbs, neg, e0, e1, buf)
        if n < 0:
            raise ValueError("limbs must hold integers in [0, 65536)")
        out[e0:e1] = marshal.loads(buf[:n])  # exactly the stream
    return buf


def from_limbs_marshal(
    limbs: np.ndarray, neg: np.ndarray | None = None
) -> np.ndarray:
    """:func:`from_limbs` through numba passes and ``marshal.loads``."""
    limbs, neg = check_limbs(limbs, neg)
    out = np.empty(limbs.shape[1], dtype=object)
    ints_marshal(limbs, neg, out)
    return out


def from_limbs_bytes(
    limbs: np.ndarray, neg: np.ndarray | None = None
) -> np.ndarray:
    """:func:`from_limbs` through ``int.from_bytes`` entry by entry (the fallback)."""
    limbs, neg = check_limbs(limbs, neg)
    L, E = limbs.shape
    with np.errstate(invalid="ignore"):  # NaN or out of range: caught just below
        u = limbs.astype(np.uint16)
    if limbs.dtype != np.uint16 and not np.array_equal(u, limbs):
        raise ValueError("limbs must hold integers in [0, 65536)")
    raw = np.ascontiguousarray(u.T).tobytes()
    step = 2 * L
    out = np.empty(E, dtype=object)
    out[:] = [int.from_bytes(raw[i * step : (i + 1) * step], "little")
              for i in range(E)]
    out[neg] = -out[neg]
    return out


#: Boundary values of the marshal int format (int32 or long, 15-bit digits)
#: and of the pieces.
CHECK_VALUES = (0, 1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**15,
                 -(2**15), 2**30, 2**45 - 1, -(2**45), -(2**200) + 7,
                 2**1000 + 3, -(2**1007))


def refuses_non_ints(read) -> bool:
    """Whether ``read`` (a reader of object arrays) gives None for an entry that is not
    exactly an ``int``, first or last."""
    class _Sub(int):
        pass
    for bad in (True, 1.0, None, "7", np.int64(3), _Sub(3)):
        y = np.empty(2, dtype=object)
        y[:] = [1, bad]
        if read(y) is not None or read(y[::-1]) is not None:
            return False
    return True


def check_limbs_of(vals: list) -> tuple[np.ndarray, np.ndarray]:
    """``(limbs, neg)`` of ``vals`` as :func:`from_limbs` takes them (by ``int.to_bytes``)."""
    H = max(max(vals), ~min(vals)).bit_length() // 16 + 1
    mags = b"".join([abs(v).to_bytes(2 * H, "little") for v in vals])
    limbs = np.ascontiguousarray(np.frombuffer(mags, dtype=np.uint16).reshape(len(vals), H).T)
    return limbs, np.array([v < 0 for v in vals], dtype=np.bool_)


def _reads_ok() -> bool:
    """Whether the kernels parse ``marshal.dumps`` streams of :data:`CHECK_VALUES` as
    ``int.to_bytes`` writes them, and refuse non-ints."""
    vals = list(CHECK_VALUES)
    x = np.empty(len(vals), dtype=object)
    x[:] = vals
    h = to_halves_marshal(x)
    ref = to_halves_bytes(x)
    if h is None or ref is None or h.shape != ref.shape or not np.array_equal(h, ref):
        return False
    return refuses_non_ints(to_halves_marshal)


def _writes_ok() -> bool:
    """Whether ``marshal.loads`` reads the streams the kernels write for :data:`CHECK_VALUES`
    back as those ints."""
    vals = list(CHECK_VALUES)
    back = from_limbs_marshal(*check_limbs_of(vals))
    return back.tolist() == vals and all(type(v) is int for v in back)


@cache
def marshal_ok(direction: str = "both") -> bool:
    """Whether this interpreter's marshal int format is the one the kernels assume, for
    ``direction`` "read" (:func:`to_halves`), "write" (:func:`from_limbs`, :class:`IntWriter`)
    or "both".

    Round trips :data:`CHECK_VALUES` through the marshal paths and compares with
    ``int.to_bytes`` / ``int.from_bytes``; also checks that non-ints are refused.
    Run once per process and direction, when first needed (it also compiles or
    loads that direction's kernels: a process that only reads Python ints, or only
    writes them, never compiles the other direction's).
    """
    try:
        return (direction == "write" or _reads_ok()) and (direction == "read" or _writes_ok())
    except Exception:  # noqa: BLE001  any surprise: not the format we assume
        return False
