"""Residues of integer matrices modulo a residue number system's moduli.

An int64 matrix enters as it is: each entry's residues come from its three 21-bit pieces
in one pass. Other integers enter as 16-bit two's-complement pieces (:class:`Pieces16`):
a uint64 matrix is viewed as four of them, an object array of Python ints is converted
once (:mod:`modlin._arith.pyints`). The residues are numba kernels over all entries
(:func:`residues`, :class:`Residues`), with the balanced float remainders the other
kernels share (:func:`fmod_inv`, :func:`balance_rem`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from modlin._arith.modular import balanced_lift_int64, int_to_float
from modlin._arith.moduli import Basis
from modlin._arith.pyints import python_ints, to_halves
from modlin._engines.jit import fma, njit
from modlin._engines.threads import run, slabs, workers
from modlin._runtime.calibration import (
    MAX_PIECES,
    OBJECT_STEP,
    PIECE_RESIDUE,
    PIECE_STEP,
    RESIDUE_CHUNK,
    RESIDUE_INT64,
    RESIDUE_STEP,
)
from modlin._runtime.scratch import Arena, take


def pieces_of(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """``x`` (int64, uint64 or object of Python ints) as ``(pieces, signed)``.

    ``pieces`` has shape ``(H, x.size)``, dtype uint16: row ``j`` holds bits
    ``16 j .. 16 j + 15`` of every entry. ``signed`` says whether the top row
    carries a two's-complement sign (always, except for uint64).
    """
    if x.dtype == np.int64 or x.dtype == np.uint64:
        flat = np.ascontiguousarray(x).reshape(-1)
        return np.ascontiguousarray(flat.view(np.uint16).reshape(-1, 4).T), x.dtype == np.int64
    if x.dtype != object:
        raise TypeError(f"pieces_of takes int64, uint64 or object arrays, not {x.dtype}")
    # a block of entries at a time: what the conversion holds beside the pieces stays small
    pieces = object_pieces(x, MAX_PIECES) if x.size else to_halves(x)
    if pieces is None:  # NumPy integer scalars are converted; anything else is refused here
        pieces = to_halves(python_ints(x))
    return pieces, True


def object_pieces(x: np.ndarray, H: int) -> np.ndarray | None:
    """:func:`pieces_of` an object array of Python ints whose values need at most ``H``
    pieces, made :data:`OBJECT_STEP` entries at a time into one array of as many pieces as
    its largest value needs (a whole array's conversion would hold the pieces twice, and
    through ``marshal`` a list and a stream of it all too); None when some entry is not an
    ``int`` or needs more than ``H`` pieces (found before any pieces are made for it)."""
    out = None
    rows = x.reshape(-1, x.shape[-1]) if x.ndim > 1 and x.shape[-1] else x.reshape(1, -1)
    step = max(1, OBJECT_STEP // max(rows.shape[1], 1))
    e = 0
    for r0 in range(0, rows.shape[0], step):
        part = to_halves(rows[r0:r0 + step], H)
        if part is None:
            return None
        if out is None and part.shape[1] == x.size:  # all in one step: no copy
            return part
        if out is None or part.shape[0] > out.shape[0]:  # more pieces than so far (rarely)
            wider = np.empty((part.shape[0], x.size), dtype=np.uint16)
            if out is not None:
                _sign_extend(out[:, :e], wider[:, :e])
            out = wider
        _sign_extend(part, out[:, e:e + part.shape[1]])
        e += part.shape[1]
    return out


def _sign_extend(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst`` = the two's-complement pieces ``src`` with as many more pieces as ``dst`` has rows."""
    dst[:src.shape[0]] = src
    dst[src.shape[0]:] = np.where(src[-1] >= 32768, np.uint16(0xFFFF), np.uint16(0))


@lru_cache(maxsize=128)
def _piece_weights(moduli: tuple[int, ...], H: int, signed: bool, p: int) -> np.ndarray:
    """``w[i, j] = 2**(16 j) mod m_i`` for the ``H`` pieces; then ``-(2**(16 H) mod m_i)``,
    what a two's-complement sign (top bit) takes away; then ``p mod m_i``, the weight of
    the balancing shift (``p = 0``: none)."""
    w = [[pow(2, 16 * j, m) for j in range(H)] + [-pow(2, 16 * H, m) if signed else 0, p % m] for m in moduli]
    return np.array(w, dtype=np.float64)


@njit
def fmod_inv(x, m, minv):  # pragma: no cover - compiled
    """``x mod m`` in ``[0, m)`` for an integer-valued float ``|x| <= 2**53``.

    ``q = floor(x * minv)`` is the true quotient or one off (``minv = fl(1/m)``), so
    one correction each way settles the remainder. ``x - q m`` is one fused
    multiply-add: ``q m`` alone can pass ``2**53`` and round (for ``x`` within about
    ``m`` of ``-2**53``, which sums at the contract's limit reach), while the
    remainder, below ``2 m``, is exact.
    """
    r = fma(-np.floor(x * minv), m, x)
    # selects, not branches nor ``m * (r < 0)``: only these let loops over entries
    # vectorise (a bool times a float does not)
    r += m if r < 0 else 0.0
    r -= m if r >= m else 0.0
    return r


@njit(inline="always")
def balance_rem(r, m, half):  # pragma: no cover - compiled
    """``r`` in ``[0, m)`` moved into ``[-(m//2), (m-1)//2]`` (``half = (m-1)//2``), as a select."""
    return r - (m if r > half else 0.0)


def padded_rows(rows: int, E: int, dtype, arena: Arena | None = None, name: str = "rows") -> np.ndarray:
    """An empty ``(rows, E + pad)`` array whose rows start 64 bytes past a multiple of
    4096 bytes apart: rows a power of two apart alias in the caches, which made the
    loops that walk several rows at once up to ten times slower."""
    item = np.dtype(dtype).itemsize
    pad = ((64 - E * item) % 4096) // item
    return take(arena, name, (rows, E + pad), dtype)


@njit
def _piece_residues(h, shift, start, stride, C, lo, hi, w, moduli, out, o0):  # pragma: no cover - compiled
    """``out[i, o0 + e - lo]`` = the balanced residue modulo ``moduli[i]`` of entry ``e`` of
    a block of the pieces ``h`` (``(H, size)``, C-contiguous) for ``lo <= e < hi``: entry
    ``e`` of the block, ``(e // C, e % C)``, is column ``start + (e // C) * stride + e % C``
    of ``h`` (a block of ``C`` columns of a matrix whose rows are ``stride`` apart; flat
    pieces are one long row). ``shift`` (int8, like a row of ``h``, or empty): the balancing
    shifts; ``w[i]``: the weights of the pieces, of the sign and of the shift
    (:func:`_piece_weights`).

    Each residue is the weighted sum of the entry's pieces, exact in float64 (every term
    is below ``2**16 * 2**26`` and there are at most ``2**11`` pieces), reduced as
    :func:`_int64_residues` reduces. The pieces of :data:`PIECE_STEP` entries are made
    floats once, in cache, and read for every modulus: a few moduli at a time (as a tight
    budget has them made) then cost little more per modulus than all at once.
    """
    H = h.shape[0]
    K = H + 2 if shift.shape[0] else H + 1
    f = np.empty((K, PIECE_STEP))
    for c0 in range(lo, hi, PIECE_STEP):
        c = min(PIECE_STEP, hi - c0)
        r, col, q = c0 // C, c0 % C, 0
        while q < c:  # row segment by row segment, each a contiguous slice (as vectorises)
            n = min(C - col, c - q)
            x0 = start + r * stride + col
            for j in range(H):
                src, dst = h[j, x0:x0 + n], f[j, q:q + n]
                for e in range(n):
                    dst[e] = src[e]
            src, dst = h[H - 1, x0:x0 + n], f[H, q:q + n]
            for e in range(n):
                dst[e] = src[e] >= 32768
            if K > H + 1:
                s, dst = shift[x0:x0 + n], f[H + 1, q:q + n]
                for e in range(n):
                    dst[e] = s[e]
            q += n
            r += 1
            col = 0
        for i in range(moduli.shape[0]):
            m = np.float64(moduli[i])
            minv = 1.0 / m
            half = np.floor((m - 1.0) / 2.0)
            seg = out[i, o0 + c0 - lo:o0 + c0 - lo + c]
            w0, f0 = w[i, 0], f[0]
            for e in range(c):
                seg[e] = w0 * f0[e]
            for j in range(1, K):
                wj, fj = w[i, j], f[j]
                for e in range(c):
                    seg[e] += wj * fj[e]
            for e in range(c):
                seg[e] = balance_rem(fmod_inv(seg[e], m, minv), m, half)


@njit
def limb_residues(x, w, moduli, out, o0, h):  # pragma: no cover - compiled
    """``out[i, o0 + r n + c]`` = the balanced residue modulo ``moduli[i]`` of the non-negative
    integer whose 32-bit limbs (little-endian) are ``x[r, c, :]``: ``x`` ``(m, n, L)`` uint32, any
    strides (a block of a limb array); ``w[i, j] = 2**(16 j) mod m_i`` for ``j < 2 L``;
    ``out`` float64 ``(N, E)``, C-contiguous (the residue rows of the GEMMs' operands, the block
    ``m n`` entries from column ``o0``); ``h`` ``(2 L, n)`` float64 C-contiguous scratch.

    A row's 16-bit halves are made floats once, in ``h``, and read for every modulus; each
    residue is their weighted sum, exact in float64 (``2 L <= 32`` terms below
    ``2**16 * 2**26``), summed and reduced (as :func:`_piece_residues` reduces) in its place in
    ``out``: contiguous there, every loop over entries vectorises (through the block's own
    strides, copies from a scratch row did not: 34 against 31 ns an entry at 127 bits, 90 to
    114 against 82 to 84 at 256)."""
    m, n, L = x.shape
    for r in range(m):
        for j in range(L):
            lo, hi = h[2 * j], h[2 * j + 1]
            for c in range(n):
                v = x[r, c, j]
                lo[c] = v & 0xFFFF
                hi[c] = v >> 16
        base = o0 + r * n
        for i in range(moduli.shape[0]):
            q = np.float64(moduli[i])
            qinv = 1.0 / q
            half = np.floor((q - 1.0) / 2.0)
            seg = out[i, base:base + n]
            w0, h0 = w[i, 0], h[0]
            for c in range(n):
                seg[c] = w0 * h0[c]
            for j in range(1, 2 * L - 1):
                wj, hj = w[i, j], h[j]
                for c in range(n):
                    seg[c] += wj * hj[c]
            wj, hj = w[i, 2 * L - 1], h[2 * L - 1]
            for c in range(n):
                seg[c] = balance_rem(fmod_inv(seg[c] + wj * hj[c], q, qinv), q, half)


@njit
def _int64_residues(x, lo, hi, moduli, w, out, o0, lift, above):  # pragma: no cover - compiled
    """``out[i, o0 + e - lo]`` = the balanced residue of ``x[e]`` modulo ``moduli[i]`` for
    ``lo <= e < hi``: int64 ``x``, moduli up to ``2**31``, ``w[i] = (2**21, 2**42) mod m_i``.
    Entries above ``above`` are taken less ``lift`` first (``lift = 0``, ``above = 2**63 - 1``:
    none), so residues in ``[0, p)`` enter as their balanced lift (``lift = p``, ``above =
    (p - 1) // 2``) without a lifted copy. (Not named ``half``: numba would unify it with the
    float ``half`` below, and ``2**60 - 1`` rounds to ``2**60`` in a float.)

    Each entry is cut into 21-bit pieces, ``x = h2 2**42 + h1 2**21 + h0`` (``h2`` signed,
    below ``2**21`` in magnitude), whose weighted sum ``h2 w2 + h1 w1 + h0`` is congruent
    to ``x`` and below ``2**21 m + 2**21 m + 2**21 <= 2**53``: exact in float64, reduced as
    :func:`_piece_residues` reduces (:func:`fmod_inv`, :func:`balance_rem`) in the same loop (a
    separate call on each row, still in L1, made the kernel 17 to 26 % slower). The
    pieces are made once per :data:`RESIDUE_CHUNK` entries, as floats through
    :func:`~modlin._arith.modular.int_to_float` (AVX2 has no packed int64 conversion).
    """
    f = np.empty((3, RESIDUE_CHUNK))
    for c0 in range(lo, hi, RESIDUE_CHUNK):
        c = min(RESIDUE_CHUNK, hi - c0)
        src = x[c0:c0 + c]
        f0, f1, f2 = f[0], f[1], f[2]
        for e in range(c):
            v = src[e]
            v -= lift if v > above else 0
            f0[e] = int_to_float(v & 0x1FFFFF)
            f1[e] = int_to_float((v >> 21) & 0x1FFFFF)
            f2[e] = int_to_float((v >> 42) + 0x200000) - 2097152.0
        for i in range(moduli.shape[0]):
            m = np.float64(moduli[i])
            minv = 1.0 / m
            half = np.floor((m - 1.0) / 2.0)
            w1, w2 = w[i, 0], w[i, 1]
            seg = out[i, o0 + c0 - lo:o0 + c0 - lo + c]
            for e in range(c):
                seg[e] = balance_rem(fmod_inv(f2[e] * w2 + f1[e] * w1 + f0[e], m, minv), m, half)


@njit(inline="always")
def _compare(h, e, K):  # pragma: no cover - compiled
    """Sign of ``value(h[:, e]) - value(K)`` (-1, 0 or 1) for two's-complement pieces of
    one length: differing signs decide it, equal ones compare as unsigned pieces."""
    H = K.shape[0]
    vneg, kneg = h[H - 1, e] >= 32768, K[H - 1] >= 32768
    if vneg != kneg:
        return -1 if vneg else 1
    for j in range(H - 1, -1, -1):
        if h[j, e] != K[j]:
            return 1 if h[j, e] > K[j] else -1
    return 0


@njit
def _shift_kernel(h, hi, top, lo, bottom, shift):  # pragma: no cover - compiled
    """``shift[e]`` in {-1, 0, 1} such that ``v + shift * p`` is the balanced residue of
    ``v = value(h[:, e])`` modulo ``p``, given the pieces of ``hi = (p-1)//2``, ``top = p - 1``,
    ``lo = -(p//2)`` and ``bottom = -p``. Returns False if some value lies outside
    ``[-p, p)``, for the caller's general path. All four comparisons are made and
    combined without branching: the shift of random residues is unpredictable."""
    bad = False
    for e in range(h.shape[1]):
        up = _compare(h, e, hi) > 0
        down = _compare(h, e, lo) < 0
        bad |= (_compare(h, e, top) > 0) | (_compare(h, e, bottom) < 0)
        shift[e] = np.int8(down) - np.int8(up)
    return not bad


@njit
def _extremes(h):  # pragma: no cover - compiled
    """Indices of the largest and the smallest value of two's-complement pieces ``h``."""
    imax = imin = 0
    for e in range(1, h.shape[1]):
        if _compare(h, e, h[:, imax]) > 0:
            imax = e
        elif _compare(h, e, h[:, imin]) < 0:
            imin = e
    return imax, imin


def _pieces(v: int, H: int) -> np.ndarray:
    """``v`` in ``H`` two's-complement 16-bit pieces."""
    return np.array([(v >> (16 * j)) & 0xFFFF for j in range(H)], dtype=np.uint16)


class Pieces16:
    """An integer array as 16-bit pieces, ``(H, size)``, ready for residues modulo anything.

    An int64 array is kept as it is: its residues come straight from its entries
    (:func:`_int64_residues`), and its pieces are made only if asked for. With ``lift``
    (a ``p < 2**63``; ``x`` then holds residues in ``[0, p)``), it stands for the
    balanced lift of ``x`` modulo ``p``, which the residues make entry by entry.
    """

    #: A block's first entry and the distance between its rows, in the pieces' columns
    #: (:meth:`block`); None for an array's own pieces.
    window = None

    def __init__(self, x: np.ndarray, lift: int = 0, pieces: np.ndarray | None = None):
        self.shape = x.shape
        self.size = x.size
        self.shift, self.p = None, 0  # see balance()
        self.int64 = np.ascontiguousarray(x).reshape(-1) if x.dtype == np.int64 and pieces is None else None
        self.lift = lift if self.int64 is not None else 0
        if pieces is not None:  # made already (:func:`object_pieces`), two's complement
            self._halves, self.signed = pieces, True
        else:
            self._halves, self.signed = (None, True) if self.int64 is not None else pieces_of(x)
        if self._halves is not None and self._halves.shape[0] > MAX_PIECES:
            raise ValueError("integers of more than 32768 bits in two's complement (outside "
                             "[-2**32767, 2**32767)) are not supported")

    @property
    def halves(self) -> np.ndarray:
        """The pieces, ``(H, size)`` uint16 (see :func:`pieces_of`)."""
        if self._halves is None:
            x = balanced_lift_int64(self.int64, self.lift) if self.lift else self.int64
            self._halves = pieces_of(x)[0]
        return self._halves

    def max_abs(self) -> int:
        """The largest ``|value|``, as a Python int (0 when empty)."""
        h = self.halves
        if h.shape[1] == 0:
            return 0
        if not self.signed:  # uint64: pieces compare as the unsigned values they are
            return int(np.ascontiguousarray(h.T).view(np.uint64).max())
        return max(abs(int.from_bytes(h[:, i].tobytes(), "little", signed=True)) for i in _extremes(h))

    def balance(self, p: int) -> bool:
        """Make these the pieces of the balanced residues modulo ``p`` of values in ``[-p, p)``:
        each value gets a shift (-1, 0 or 1) times ``p``, which :meth:`residues` adds.
        False when some value lies outside that range (nothing is changed then)."""
        H = max(self.halves.shape[0], p.bit_length() // 16 + 1)
        h = self.halves
        if H > h.shape[0]:  # sign-extend, so that p and -p fit with their sign bits
            wide = np.empty((H, h.shape[1]), dtype=np.uint16)
            _sign_extend(h, wide)
            h = wide
        shift = np.empty(h.shape[1], dtype=np.int8)
        if not _shift_kernel(h, *(_pieces(v, H) for v in ((p - 1) // 2, p - 1, -(p // 2), -p)), shift):
            return False
        self.shift, self.p = shift, p
        return True

    def nbytes(self) -> int:
        """Bytes these pieces hold beside the array they stand for (the pieces and the
        balancing shifts made so far; an int64 array's entries are its own)."""
        return sum(x.nbytes for x in (self._halves, self.shift) if x is not None)

    @property
    def kept(self) -> bool:
        """Whether these are a block of a matrix's pieces kept for many tiles (:meth:`block`):
        the memory model counts them once, for the whole matrix, not for each product."""
        return self.window is not None

    def block(self, rows: slice, cols: slice) -> Pieces16:
        """The pieces of ``x[rows, cols]`` (``x`` 2-D, not int64), a view of these: the tiles
        of one product read one conversion of an operand of Python ints (~100 ns an entry,
        under the GIL) instead of converting their blocks again."""
        R, C = self.shape
        (r0, r1, _), (c0, c1, _) = rows.indices(R), cols.indices(C)
        out = object.__new__(Pieces16)
        out.__dict__.update(self.__dict__)
        out._halves = self.halves
        out.int64, out.lift = None, 0  # the pieces stand for the entries now
        out.shape, out.size = (r1 - r0, c1 - c0), (r1 - r0) * (c1 - c0)
        out.window = (r0 * C + c0, C)
        return out

    def residues(self, moduli: tuple[int, ...], dtype=np.float64, out: np.ndarray | None = None,
                 rows: slice | None = None) -> np.ndarray:
        """Balanced residues modulo each of ``moduli``, shape ``(len(moduli), *shape)``; with
        ``rows`` (a step-1 slice, for a 2-D array), those of these rows only.

        An int64 array's come from its entries (:meth:`_direct`); otherwise from the
        weighted sums of the pieces (with the sign and the balancing shift), in one pass
        (:func:`_piece_residues`). ``out``, from :func:`padded_rows` with at least
        ``len(moduli)`` rows, is reused rather than allocated (fresh pages cost too).
        """
        E, G = self.size, len(moduli)
        first, shape = 0, self.shape
        if rows is not None:  # the entries of those rows: a range of the flat array (or a block's rows)
            r0, r1, _ = rows.indices(self.shape[0])
            first, E, shape = r0 * self.shape[1], (r1 - r0) * self.shape[1], (r1 - r0, self.shape[1])
        out = padded_rows(G, E, dtype) if out is None else out[:G]
        if self.int64 is not None and self.shift is None and max(moduli) <= 2**31:
            return self._direct(moduli, out, first, E, shape)
        h = self.halves
        shift = self.shift if self.shift is not None else np.zeros(0, dtype=np.int8)
        w = _piece_weights(tuple(moduli), h.shape[0], self.signed, self.p)
        # the entries from first on: a block's rows, each stride apart, or flat pieces as one long row
        base, stride = self.window or (first, 0)
        start, cols = (base + first // shape[-1] * stride, shape[-1]) if self.window else (base, max(E, 1))
        mods = np.array(moduli, dtype=np.int64)
        # float64 words are written in place, other engines' through a float64 chunk
        in_place = out.dtype == np.float64

        def chunks(part: range) -> None:
            s = None if in_place else np.empty((G, step))
            for e0 in part:
                e1 = min(E, e0 + step)
                if in_place:
                    _piece_residues(h, shift, start, stride, cols, e0, e1, w, mods, out, e0)
                else:
                    _piece_residues(h, shift, start, stride, cols, e0, e1, w, mods, s, 0)
                    out[:, e0:e1] = s[:, :e1 - e0]  # small integers: exact in every word dtype

        # as many workers as the work pays for, sharing the chunks evenly (chunks of RESIDUE_STEP
        # alone left one worker 32768 entries of 40000 at n = 200)
        t = workers(E * G * h.shape[0] * PIECE_RESIDUE, -(-E // PIECE_STEP))
        step = min(RESIDUE_STEP, max(1, -(-E // t)))
        starts = range(0, E, step)
        run(chunks, [starts[part] for part in slabs(len(starts), t)])
        return out[:, :E].reshape((G,) + shape)

    def _direct(self, moduli: tuple[int, ...], out: np.ndarray, first: int, E: int, shape) -> np.ndarray:
        """:meth:`residues` of an int64 array's ``E`` entries from ``first`` on, by
        :func:`_int64_residues` (faster than the weighted sums of its four pieces)."""
        G = len(moduli)
        mods = np.array(moduli, dtype=np.int64)
        w = np.array([[pow(2, 21, m), pow(2, 42, m)] for m in moduli], dtype=np.float64)
        # float64 rows are written in place, other words through a float64 chunk
        direct = out.dtype == np.float64
        p, half = np.int64(self.lift), np.int64((self.lift - 1) // 2 if self.lift else 2**63 - 1)

        def chunks(part: slice) -> None:
            lo, hi = part.start * RESIDUE_CHUNK, min(E, part.stop * RESIDUE_CHUNK)
            if direct:
                _int64_residues(self.int64, first + lo, first + hi, mods, w, out, lo, p, half)
                return
            s = np.empty((G, RESIDUE_CHUNK))
            for e0 in range(lo, hi, RESIDUE_CHUNK):
                e1 = min(hi, e0 + RESIDUE_CHUNK)
                _int64_residues(self.int64, first + e0, first + e1, mods, w, s, 0, p, half)
                out[:, e0:e1] = s[:, :e1 - e0]  # small integers: exact in every word dtype

        n = -(-E // RESIDUE_CHUNK)
        run(chunks, slabs(n, workers(RESIDUE_INT64 * E * G, n)))
        return out[:, :E].reshape((G,) + shape)


class Residues:
    """An operand's residues modulo every modulus of a basis, computed once for many products
    with it (:func:`multiply` then reads them instead of converting the operand again).

    Parameters
    ----------
    x : Pieces16
        The operand's pieces (of its balanced residues, for products modulo ``p``); not kept.
    moduli : tuple of int
        The moduli of the products' basis.
    dtype : dtype
        The words of their engine.

    Attributes
    ----------
    shape : tuple of int
        The shape of the operand.
    rows : ndarray
        ``(len(moduli), *shape)``: the balanced residues, as :meth:`Pieces16.residues` makes them.
    """

    def __init__(self, x: Pieces16, moduli: tuple[int, ...], dtype):
        self.shape = x.shape
        self.key = (tuple(moduli), np.dtype(dtype))
        self.rows = x.residues(tuple(moduli), dtype)

    def residues(self, moduli: tuple[int, ...], dtype, out=None, rows: slice | None = None) -> np.ndarray:
        """The residues of ``moduli``, consecutive ones of the basis (``out`` is not needed);
        with ``rows``, of those rows of a 2-D operand."""
        i = self.key[0].index(moduli[0])
        found = self.rows[i:i + len(moduli)]
        return found if rows is None else found[:, rows]


def residues(x: np.ndarray, basis: Basis, dtype=np.float64) -> np.ndarray:
    """Balanced residues of the integer array ``x`` modulo each modulus.

    Returns shape ``(N, *x.shape)`` in ``dtype`` (the words of a GEMM engine),
    entry ``[i, ...]`` congruent to ``x`` modulo ``m_i`` and in
    ``[-(m_i//2), (m_i-1)//2]``, so that it fits the engine's words.
    """
    return Pieces16(x).residues(basis.moduli, dtype)
