"""Residue number systems: moduli, residues of integer matrices, CRT reconstruction.

An integer matrix product ``C = A B`` with ``|C| <= bound`` is computed modulo
pairwise-coprime moduli ``m_1 .. m_N`` with ``M = prod m_i >= 2*bound + 2``
and rebuilt by the CRT, ``C = sum_i y_i M/m_i - k M``, as 16-bit limbs (or
directly modulo ``p``). The residue layer never sees a GEMM: products modulo
each ``m_i`` go through :mod:`modlin._multiword` with a plan per modulus.

An int64 matrix enters as it is: each entry's residues come from its three
21-bit pieces in one pass. Each modulus' product is kept as float64 sums, which
the CRT reduces itself, or, where memory is dear, reduced into int32 residues as
its GEMM ends (:func:`product_residues`). Other integers enter as 16-bit two's-complement
pieces: a uint64 matrix is viewed as four of them, an object array of Python
ints is converted once (:mod:`modlin._pyints`). Residues, CRT weights, carries and the reduction
modulo ``p`` are numba kernels over all entries, and the results leave as
int64 or, through :mod:`modlin._pyints`, as Python ints.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import _multiword
from ._engines import get_engine
from ._jit import fma, njit
from ._limits import current as current_limits
from ._modular import _to_float, balanced_lift_int64
from ._pyints import IntWriter, python_ints, to_halves
from ._threads import each, gemm_workers, quiet_blas, region, row_workers, run, slabs, workers
from ._tiles import Arena, take

__all__ = ["Basis", "Residues", "int8_moduli", "cover_count", "pieces_of", "planned_range", "residues", "reconstruct"]

#: Moduli stay below 2**26 so that a product of two residues is exact in float64.
MAX_RNS_MODULUS = 2**26


# --------------------------------------------------------------------------- moduli

@lru_cache(maxsize=None)
def int8_moduli() -> tuple[int, ...]:
    """Pairwise-coprime moduli <= 256, greedily from the top: 256, 255, 253, 251, ..."""
    chosen: list[int] = []
    for m in range(256, 2, -1):
        if all(math.gcd(m, c) == 1 for c in chosen):
            chosen.append(m)
    return tuple(chosen)


#: Per ``top``, the primes below it found so far, in decreasing order: the planner asks for
#: many counts below the same tops, and each prime is searched for once.
_below: dict[int, list[int]] = {}
_below_lock = threading.Lock()


def primes_below(top: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes below ``top`` (fewer if there are not that many)."""
    from ._primes import TRIAL_BOUND, prev_prime, primes_between

    with _below_lock:
        found = _below.setdefault(top, [])
        q = found[-1] if found else top  # every prime in [q, top) is found
        while len(found) < count and q > 3:  # odd primes only
            if q <= TRIAL_BOUND**2:  # a window at a time, as many as needed
                lo = max(3, q - 64 * (count - len(found)))
                found += primes_between(lo, q)
                q = lo
            else:
                q = prev_prime(q - 1)
                found.append(q)
        return tuple(found[:count])


@dataclass(frozen=True)
class Basis:
    """Pairwise-coprime moduli and the constants of their CRT.

    Attributes
    ----------
    moduli : tuple of int
        The moduli, each below ``2**26``.
    """

    moduli: tuple[int, ...]

    def __post_init__(self):
        for m in self.moduli:
            if not isinstance(m, int) or m < 2 or m >= MAX_RNS_MODULUS:
                raise ValueError(
                    f"RNS moduli must be integers in [2, 2**26) (products of two residues must be "
                    f"exact in float64), got {m!r}"
                )
        if math.lcm(*self.moduli) == math.prod(self.moduli):  # pairwise coprime: one check, not N**2
            return
        for i, a in enumerate(self.moduli):
            for b in self.moduli[:i]:
                if math.gcd(a, b) != 1:
                    raise ValueError(
                        f"RNS moduli must be pairwise coprime: {b} and {a} share the factor {math.gcd(a, b)}"
                    )

    @property
    def M(self) -> int:
        """Product of the moduli: the dynamic range."""
        return math.prod(self.moduli)

    def covers(self, bound: int) -> bool:
        """True when every integer ``|c| <= bound`` is recovered from its residues."""
        return self.M >= 2 * bound + 2

    @property
    def half_digits(self) -> np.ndarray:
        """Mixed-radix digits of ``(M - 1) // 2``: values above it are negative."""
        h = (self.M - 1) // 2
        digits = []
        for m in self.moduli:
            digits.append(h % m)
            h //= m
        return np.array(digits, dtype=np.int64)

    @property
    def garner_inverses(self) -> np.ndarray:
        """``inv[i, j] = m_j**-1 mod m_i`` for ``j < i``."""
        n = len(self.moduli)
        inv = np.zeros((n, n), dtype=np.int64)
        for i, mi in enumerate(self.moduli):
            for j in range(i):
                inv[i, j] = pow(self.moduli[j], -1, mi)
        return inv


def planned_range(bound: int) -> int:
    """The product of moduli the planners give products bounded by ``bound``: the
    ``2 * bound + 2`` of exact recovery with a relative margin of ``2**-33``, which
    keeps :func:`reconstruct` off its exact fallback (see ``AMBIGUOUS``)."""
    return 2 * bound + 2 + (bound >> 32)


def cover_count(moduli, bound: int) -> int | None:
    """How many leading ``moduli`` the planners take for ``bound``: enough for
    :func:`planned_range`, or, from a pool too small for that margin, for exact
    recovery alone (``reconstruct`` settles the few edge values exactly); None if
    even all of them fall short."""
    for need in (planned_range(bound), 2 * bound + 2):
        prod = 1
        for i, q in enumerate(moduli):
            prod *= q
            if prod >= need:
                return i + 1
    return None


# --------------------------------------------------------------------------- pieces

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


#: The most 16-bit pieces an integer may have (32768 bits): :class:`_Halves` refuses more.
MAX_PIECES = 2**11
#: Python ints converted to pieces at a time by :func:`object_pieces`: what the conversion
#: holds beside the pieces (a block's pieces; through ``marshal``, also its list and stream,
#: about ``3 H + 4`` bytes an entry) stays small.
OBJECT_STEP = 2**16


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


#: Entries processed together by the kernels below: their working set stays in cache.
CHUNK = 2048
#: Entries per call of :func:`_piece_residues` in :meth:`_Halves.residues`.
RESIDUE_STEP = 32768
#: Entries whose pieces :func:`_piece_residues` holds as floats at once (in the L1 cache).
PIECE_STEP = 256
#: Cost of one residue of an int64 entry (:func:`_int64_residues`), in multiply-adds of a
#: large fp64 GEMM, for splitting it across workers: measured here at n = 2048 with six
#: moduli, 34 on one worker and 18 on two (the pieces' GEMMs they replaced: 48 and 35).
RESIDUE_INT64 = 30.0


@njit
def _fmod(x, m, minv):  # pragma: no cover - compiled
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
def _balanced(r, m, half):  # pragma: no cover - compiled
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
                seg[e] = _balanced(_fmod(seg[e], m, minv), m, half)


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
    :func:`_piece_residues` reduces (:func:`_fmod`, :func:`_balanced`) in the same loop (a
    separate call on each row, still in L1, made the kernel 17 to 26 % slower). The
    pieces are made once per :data:`CHUNK` entries, as floats through
    :func:`~modlin._modular._to_float` (AVX2 has no packed int64 conversion).
    """
    f = np.empty((3, CHUNK))
    for c0 in range(lo, hi, CHUNK):
        c = min(CHUNK, hi - c0)
        src = x[c0:c0 + c]
        f0, f1, f2 = f[0], f[1], f[2]
        for e in range(c):
            v = src[e]
            v -= lift if v > above else 0
            f0[e] = _to_float(v & 0x1FFFFF)
            f1[e] = _to_float((v >> 21) & 0x1FFFFF)
            f2[e] = _to_float((v >> 42) + 0x200000) - 2097152.0
        for i in range(moduli.shape[0]):
            m = np.float64(moduli[i])
            minv = 1.0 / m
            half = np.floor((m - 1.0) / 2.0)
            w1, w2 = w[i, 0], w[i, 1]
            seg = out[i, o0 + c0 - lo:o0 + c0 - lo + c]
            for e in range(c):
                seg[e] = _balanced(_fmod(f2[e] * w2 + f1[e] * w1 + f0[e], m, minv), m, half)


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


class _Halves:
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

    def block(self, rows: slice, cols: slice) -> _Halves:
        """The pieces of ``x[rows, cols]`` (``x`` 2-D, not int64), a view of these: the tiles
        of one product read one conversion of an operand of Python ints (~100 ns an entry,
        under the GIL) instead of converting their blocks again."""
        R, C = self.shape
        (r0, r1, _), (c0, c1, _) = rows.indices(R), cols.indices(C)
        out = object.__new__(_Halves)
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
            s = None if in_place else np.empty((G, RESIDUE_STEP))
            for e0 in part:
                e1 = min(E, e0 + RESIDUE_STEP)
                if in_place:
                    _piece_residues(h, shift, start, stride, cols, e0, e1, w, mods, out, e0)
                else:
                    _piece_residues(h, shift, start, stride, cols, e0, e1, w, mods, s, 0)
                    out[:, e0:e1] = s[:, :e1 - e0]  # small integers: exact in every word dtype

        starts = range(0, E, RESIDUE_STEP)
        t = workers(E * (G + 1) * (h.shape[0] + 2), len(starts))  # the pieces' floats, then each modulus
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
            lo, hi = part.start * CHUNK, min(E, part.stop * CHUNK)
            if direct:
                _int64_residues(self.int64, first + lo, first + hi, mods, w, out, lo, p, half)
                return
            s = np.empty((G, CHUNK))
            for e0 in range(lo, hi, CHUNK):
                e1 = min(hi, e0 + CHUNK)
                _int64_residues(self.int64, first + e0, first + e1, mods, w, s, 0, p, half)
                out[:, e0:e1] = s[:, :e1 - e0]  # small integers: exact in every word dtype

        n = -(-E // CHUNK)
        run(chunks, slabs(n, workers(RESIDUE_INT64 * E * G, n)))
        return out[:, :E].reshape((G,) + shape)


class Residues:
    """An operand's residues modulo every modulus of a basis, computed once for many products
    with it (:func:`multiply` then reads them instead of converting the operand again).

    Parameters
    ----------
    x : _Halves
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
        ``(len(moduli), *shape)``: the balanced residues, as :meth:`_Halves.residues` makes them.
    """

    def __init__(self, x: _Halves, moduli: tuple[int, ...], dtype):
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
    return _Halves(x).residues(basis.moduli, dtype)


# --------------------------------------------------------------------------- CRT

@njit
def _garner_step(t, c, m, minv, w):  # pragma: no cover - compiled
    """``t <- ((t - c) mod m) * w mod m`` over 1-D float64 slices (vectorises): one step of
    Garner's mixed-radix digits, which :mod:`modlin._crtfloat` needs for its sign test.
    Two loops: with both reductions in one, LLVM vectorises neither."""
    for e in range(t.shape[0]):
        t[e] = _fmod(t[e] - c[e], m, minv) * w
    for e in range(t.shape[0]):
        t[e] = _fmod(t[e], m, minv)


#: Moduli summed by one product against the limb constants: each term is below
#: ``2**26 * 2**16``, so a sum of ``2**10`` of them plus the carries stays exact in float64.
CRT_BLOCK = 1024
#: Entries whose ``sum(y_i / m_i)`` has a fraction this close to 1/2 are rebuilt exactly.
#: The float sum is within ``N * 2**-51`` of the true one; bases chosen by the planner
#: keep every covered value at least ``2**-34`` away (:func:`planned_range`).
AMBIGUOUS = 2.0**-36


@njit
def _weigh(x, y, f, k, m, minv, w):  # pragma: no cover - compiled
    """``y <- (x mod m) * w mod m`` (``x`` may be ``y`` itself, or int32 residues); ``k + f += y / m``
    kept as whole part ``k`` and fraction ``f`` (so the float error does not grow with ``k``),
    over 1-D slices. Two loops: with both reductions in one, LLVM vectorises neither
    (1.25 -> 0.69 ns per entry and modulus)."""
    for e in range(y.shape[0]):
        y[e] = _fmod(x[e], m, minv) * w
    for e in range(y.shape[0]):
        v = _fmod(y[e], m, minv)
        y[e] = v
        s = f[e] + v * minv
        whole = np.floor(s)
        k[e] += whole
        f[e] = s - whole


@njit
def _crt_weights(x, lo, hi, moduli, w, k, flag, work, y):  # pragma: no cover - compiled
    """Residues ``x[i, e]``, ``lo <= e < hi`` (float64 integers below ``2**53`` in magnitude,
    or int32 residues, congruent to ``C`` modulo ``m_i``; only read) -> ``y[i, e - lo] = x_i w_i
    mod m_i``, with ``w_i = (M / m_i)**-1 mod m_i``, so that ``C = sum y_i M / m_i - k M``.

    ``k[e] = round(sum_i y_i / m_i)``: the sum is ``C / M + k`` and ``|C| < M / 2``.
    ``flag[e]`` marks a fraction too close to 1/2 for the float sum to round it surely.
    ``work``: float64 scratch of shape ``(2, CHUNK)``; ``y``: float64 ``(N, hi - lo)``.
    """
    N = x.shape[0]
    f = work[0]
    kk = work[1]
    for e0 in range(lo, hi, CHUNK):
        e1 = min(hi, e0 + CHUNK)
        c = e1 - e0
        f[:c] = 0.0
        kk[:c] = 0.0
        for i in range(N):
            m = np.float64(moduli[i])
            _weigh(x[i, e0:e1], y[i, e0 - lo:e1 - lo], f[:c], kk[:c], m, 1.0 / m, np.float64(w[i]))
        for e in range(c):
            flag[e0 + e] = abs(f[e] - 0.5) < AMBIGUOUS
            k[e0 + e] = kk[e] + (f[e] >= 0.5)


@njit
def _crt_modp(x, lo, hi, moduli, w, cl, ch, kl, kh, p, flag, out, work, sums):  # pragma: no cover - compiled
    """The CRT of entries ``lo <= e < hi`` straight to int64 residues modulo ``p < 2**63``,
    in one pass per chunk: ``out[e] = sum_i y_i c_i + k (-M mod p) mod p``, with ``y_i``,
    ``k`` and ``flag`` as :func:`_crt_weights` makes them and ``c_i = M / m_i mod p``. ``x``
    (float64 sums, or int32 residues) is only read: the ``y_i`` of a chunk live in ``work[2]``.

    The constants are split in 32-bit halves (``cl``, ``ch``, ``kl``, ``kh``: uint64) so
    that both sums are exact in uint64: terms below ``2**26 * 2**32`` and at most
    ``2 N <= 62`` of them. The value ``V = h 2**32 + l`` is below ``(N + 1) 2**26 p``,
    so a float64 quotient ``V / p`` (below ``2**32``, error below ``2**-19``) biased down
    by ``2**-10`` is the true one or one less; ``V - q p`` computed modulo ``2**64`` is
    then in ``[0, 2 p)`` and one conditional subtraction finishes. ``work``: float64
    ``(3, CHUNK)``; ``sums``: uint64 ``(2, CHUNK)``.
    """
    N = x.shape[0]
    f, kk = work[0], work[1]
    sl, sh = sums[0], sums[1]
    up = np.uint64(p)
    pf = np.float64(p)
    for e0 in range(lo, hi, CHUNK):
        e1 = min(hi, e0 + CHUNK)
        c = e1 - e0
        f[:c] = 0.0
        kk[:c] = 0.0
        sl[:c] = 0
        sh[:c] = 0
        for i in range(N):
            m = np.float64(moduli[i])
            y = work[2, :c]
            _weigh(x[i, e0:e1], y, f[:c], kk[:c], m, 1.0 / m, np.float64(w[i]))
            a, b = cl[i], ch[i]
            for e in range(c):
                v = np.uint64(y[e])
                sl[e] += v * a
                sh[e] += v * b
        for e in range(c):
            flag[e0 + e] = abs(f[e] - 0.5) < AMBIGUOUS
            k = np.uint64(kk[e] + (f[e] >= 0.5))
            lo_ = sl[e] + k * kl
            hi_ = sh[e] + k * kh
            q = max(np.floor((np.float64(hi_) * 4294967296.0 + np.float64(lo_)) / pf - 2.0**-10), 0.0)
            r = (hi_ << np.uint64(32)) + lo_ - np.uint64(q) * up
            if r >= up:
                r -= up
            out[e0 + e] = np.int64(r)


#: The most moduli the fused CRT (:func:`_crt_modp`) takes (a :class:`Basis` keeps each below ``2**26``).
FUSED_MAX_N = 31


def fused_crt(p: int | None, N: int) -> bool:
    """Whether the CRT of ``N`` moduli modulo ``p`` is :func:`_crt_modp`'s one pass (what
    :func:`reconstruct` runs, and what the RNS cost model prices)."""
    return p is not None and p < 2**63 and N <= FUSED_MAX_N


@lru_cache(maxsize=64)
def _fused_constants(moduli: tuple[int, ...], p: int):
    """For :func:`_crt_modp`: the 32-bit halves of the ``M / m_i mod p`` and of ``-M mod p``."""
    M = math.prod(moduli)
    c = [(M // m) % p for m in moduli]
    k = -M % p
    return (np.array([v & 0xFFFFFFFF for v in c], dtype=np.uint64), np.array([v >> 32 for v in c], dtype=np.uint64),
            np.uint64(k & 0xFFFFFFFF), np.uint64(k >> 32))


@njit
def _carry(t, acc, top, carry):  # pragma: no cover - compiled
    """``acc + t`` (float64 ``(L, c)``, exact integers) normalised into 16-bit limbs in ``acc``;
    what passes the top limb is added to ``top`` (``carry``: scratch of ``c`` entries).
    Limb-outer loops vectorise over entries."""
    L, c = t.shape
    carry[:] = 0.0
    for j in range(L):
        for e in range(c):
            v = t[j, e] + acc[j, e] + carry[e]
            hi = np.floor(v * (1.0 / 65536.0))
            acc[j, e] = v - hi * 65536.0
            carry[e] = hi
    for e in range(c):
        top[e] += carry[e]


@njit
def _sub_limbs(acc, q, pl, top, b):  # pragma: no cover - compiled
    """``acc <- acc - q * pl`` in 16-bit limbs (float64), the final borrow added to ``top``
    (``b``: scratch of ``c`` entries). Each ``q * pl[j]`` is below ``2**53``: ``q < 2**37``,
    limbs below ``2**16``."""
    L, c = acc.shape
    b[:] = 0.0
    for j in range(L):
        for e in range(c):
            v = acc[j, e] - q[e] * pl[j] + b[e]
            hi = np.floor(v * (1.0 / 65536.0))
            acc[j, e] = v - hi * 65536.0
            b[e] = hi
    for e in range(c):
        top[e] += b[e]


@njit
def _reduce(acc, top, pl, ps, d, work):  # pragma: no cover - compiled
    """``V = top * 2**(16 L) + value(acc)``, with ``0 <= V < 2**37 p``, reduced modulo ``p``
    into ``acc`` (``top`` becomes 0); ``pl`` are the limbs of ``p`` (``L >= 3``) and ``ps`` is
    ``p / 2**(16 (L - 3))`` as a float (at least ``2**32`` unless ``L = 3``).

    The quotient is estimated from the top three limbs: its error is below ``2**-13``
    (rounding of a quotient below ``2**37``, and the dropped limbs), so biased down by
    ``2**-10`` it is the true one or one less, and one conditional subtraction is left.
    ``d`` (shaped like ``acc``) and ``work`` (``(3, c)``) are scratch.
    """
    L, c = acc.shape
    q, below, b = work[0], work[1], work[2]
    for e in range(c):
        vs = ((top[e] * 65536.0 + acc[L - 1, e]) * 65536.0 + acc[L - 2, e]) * 65536.0 + acc[L - 3, e]
        q[e] = max(np.floor(vs / ps - 2.0**-10), 0.0)
    _sub_limbs(acc, q, pl, top, b)  # now 0 <= V < 2p: top is 0 or 1
    for j in range(L):  # loops: an array copy would bring back the import that the scratch avoids
        for e in range(c):
            d[j, e] = acc[j, e]
    for e in range(c):
        below[e] = top[e]
    q[:] = 1.0
    _sub_limbs(d, q, pl, below, b)  # V - p, non-negative iff below >= 0
    for j in range(L):
        for e in range(c):
            acc[j, e] += (below[e] >= 0.0) * (d[j, e] - acc[j, e])
    top[:] = 0.0


@njit
def _negate(acc, top, carry):  # pragma: no cover - compiled
    """Magnitudes of two's-complement values (``top`` is -1 for negatives, else 0; ``carry``:
    scratch of ``c`` entries)."""
    L, c = acc.shape
    carry[:] = 1.0
    for j in range(L):
        for e in range(c):
            ng = top[e] < 0.0
            v = 65535.0 - acc[j, e] + carry[e]
            hi = v >= 65536.0
            carry[e] = hi
            acc[j, e] += ng * (v - 65536.0 * hi - acc[j, e])


@njit
def _limbs_to_int64(acc, neg, out):  # pragma: no cover - compiled
    """``out = (-1)**neg * value(acc[:4])`` for magnitudes below ``2**63``; without signs, the
    bits of values below ``2**64`` (read as uint64). Pairs of limbs are joined in float64
    (exact below ``2**32``), so each entry takes two conversions, in loops over entries."""
    L = acc.shape[0]
    for e in range(out.shape[0]):
        lo = acc[0, e] + (65536.0 * acc[1, e] if L > 1 else 0.0)
        hi = (acc[2, e] if L > 2 else 0.0) + (65536.0 * acc[3, e] if L > 3 else 0.0)
        v = (np.int64(hi) << 32) | np.int64(lo)
        out[e] = v - 2 * v * neg[e]


def _limbs16(v: int, L: int) -> np.ndarray:
    return np.array([(v >> (16 * j)) & 0xFFFF for j in range(L)], dtype=np.float64)


@lru_cache(maxsize=64)
def _crt_constants(moduli: tuple[int, ...], p: int | None):
    """Per basis (and ``p``): the weights ``w_i``, the limbs of ``M / m_i`` (mod ``p``), of
    what ``k`` multiplies (``M`` negated, or ``-M mod p``), of ``p``, and ``p``'s scale."""
    M = math.prod(moduli)
    N = len(moduli)
    cof = [M // m for m in moduli]
    w = np.array([pow(c % m, -1, m) if m > 1 else 0 for c, m in zip(cof, moduli)], dtype=np.int64)
    if p is None:
        L = (N * M).bit_length() // 16 + 1
        return w, np.stack([_limbs16(c, L) for c in cof]), -_limbs16(M, L), None, None
    L = max(-(-p.bit_length() // 16), 3)
    cst = np.stack([_limbs16(c % p, L) for c in cof])
    return w, cst, _limbs16(-M % p, L), _limbs16(p, L), p / 2 ** (16 * (L - 3))


def reconstruct(res: np.ndarray, basis: Basis, *, p: int | None = None, as_object: bool = False,
                arena: Arena | None = None) -> np.ndarray:
    """Integers from their residues ``res`` (shape ``(N, ...)``: integers congruent to the
    values modulo ``m_i``, below ``2**53`` in magnitude; usually in ``[0, m_i)``).

    Returns the signed values (each in ``[-(M//2), (M-1)//2]``) as int64, or as an
    object array of Python ints when ``as_object``; with ``p``, the values
    modulo ``p`` in ``[0, p)`` (int64 for ``p <= 2**63``, object above).
    The CRT's workspace (a copy of ``res`` in padded rows: int32 residues stay int32, which
    the CRT reads as they are; anything else becomes float64) comes from ``arena`` when given.

    The CRT is ``C = sum_i y_i M/m_i - k M`` with ``y_i = res_i (M/m_i)**-1 mod m_i``
    and ``k = round(sum_i y_i / m_i)``. The sum is a float64 product of the ``y``
    with the 16-bit limbs of the ``M/m_i`` (reduced modulo ``p`` first when ``p``
    is given), exact since its terms are below ``2**42``; carries and one
    reduction modulo ``p`` run in limb-outer loops over chunks of entries. An
    entry whose ``k`` the float sum cannot settle (its value within a relative
    ``2**-34`` of ``M/2``) is rebuilt with Python integers.
    """
    N = len(basis.moduli)
    E = math.prod(res.shape[1:])
    x = padded_rows(N, E, np.int32 if res.dtype == np.int32 else np.float64, arena, "products")
    x[:, :E] = res.reshape(N, E)
    return _reconstruct_rows(x, E, basis, p, as_object).reshape(res.shape[1:])


def _crt_step(N: int, L: int) -> int:
    """Entries per chunk of the CRT's limb loops (their buffers stay in cache)."""
    return max(1024, min(16384, 2**18 // (L + min(N, CRT_BLOCK))))


def crt_scratch(N: int, modulus: int, E: int, workers: int = 1) -> int:
    """Bytes of the CRT's chunk buffers for ``N`` moduli, ``E`` results and results modulo
    ``modulus`` (or up to it): limb sums, accumulators, weights and conversion buffers, of
    one chunk for each of ``workers`` (no more chunks than ``E`` fills)."""
    L = max(-(-modulus.bit_length() // 16), 3) + 1
    return 8 * min(_crt_step(N, L) * workers, E) * (4 * L + 4 + N)


def _reconstruct_rows(x: np.ndarray, E: int, basis: Basis, p: int | None, as_object: bool,
                      out: np.ndarray | None = None) -> np.ndarray:
    """:func:`reconstruct` of the first ``E`` columns of ``x``, a C-contiguous ``(N, E + pad)``
    array (see :func:`padded_rows`) of float64 sums or int32 residues, only read; returns
    the flat result, written into ``out`` (C-contiguous int64, of ``E`` entries) when given: only for int64
    results (``p <= 2**63``, or ``p = None`` without ``as_object``)."""
    N = len(basis.moduli)
    w, cst, kfac, pl, ps = _crt_constants(basis.moduli, p)
    L = cst.shape[1]
    k = np.empty(E)
    flag = np.empty(E, dtype=np.bool_)
    moduli = np.array(basis.moduli, dtype=np.int64)
    # int64 words, or for 2**63 < p <= 2**64 uint64 ones that become Python ints by
    # numpy's cast (2.5x faster than through marshal)
    small = (p is not None and p <= 2**64) or (p is None and not as_object)
    if out is not None and not (small and (p is None or p <= 2**63)):
        raise ValueError("out= takes int64 results only")
    out = (np.empty(E, dtype=np.int64) if out is None else out.reshape(E)) if small else None
    neg = np.zeros(E, dtype=np.bool_)
    step = _crt_step(N, L)

    def entries(part: range) -> list:
        """The CRT of the entries ``part``: written to ``out``, or as limbs to be written."""
        if not part:
            return []
        limbs = []
        t = None
        # the kernels' scratch comes from here: one allocating inside would make numba's cached
        # kernel import numba.np.arrayobj on its first load (40 ms of a first call)
        scratch = np.empty((2, CHUNK))
        for e0 in range(part.start, part.stop, step):
            e1 = min(part.stop, e0 + step)
            c = e1 - e0
            if t is None or c < step:  # whole buffers: numba vectorises loops over C-contiguous arrays
                t, d, work, y = np.empty((L, c)), np.empty((L, c)), np.empty((3, c)), np.empty((N, c))
            # the chunk's weights in a buffer that stays in cache: the products are only read
            # (float64 sums, or int32 residues half their size)
            _crt_weights(x, e0, e1, moduli, w, k, flag, scratch, y)
            acc = np.multiply.outer(kfac, k[e0:e1])  # -k M (mod p): at most N * 2**16 per limb
            top = np.zeros(c)
            for i0 in range(0, N, CRT_BLOCK):
                i1 = min(N, i0 + CRT_BLOCK)
                np.matmul(cst[i0:i1].T, y[i0:i1], out=t)
                _carry(t, acc, top, work[0])
                if p is not None:
                    _reduce(acc, top, pl, ps, d, work)
            if p is None:
                neg[e0:e1] = top < 0
                _negate(acc, top, work[0])
            if small:
                _limbs_to_int64(acc, neg[e0:e1], out[e0:e1])
            else:  # the limbs are integers below 2**16 by construction
                limbs.append(acc.astype(np.uint16))
        return limbs

    starts = range(0, E, step)
    t = workers(E * (N + 4 * L), len(starts))
    if fused_crt(p, N):
        # one pass per chunk, nothing but the result written (3x faster than the limbs)
        cl, ch, kl, kh = _fused_constants(basis.moduli, p)

        def fused(part: slice) -> None:
            lo, hi = part.start * CHUNK, min(E, part.stop * CHUNK)
            _crt_modp(x, lo, hi, moduli, w, cl, ch, kl, kh, p, flag, out, np.empty((3, CHUNK)),
                      np.empty((2, CHUNK), dtype=np.uint64))

        chunks = -(-E // CHUNK)
        run(fused, slabs(chunks, workers(E * N * 4, chunks)))
    elif small:  # one range of entries per worker
        with quiet_blas():  # the limbs' GEMMs are at most CRT_BLOCK deep, mostly a few
            run(lambda part: entries(range(part.start * step, min(E, part.stop * step))),
                slabs(len(starts), t))
    else:
        # Python ints are made under the GIL, by this thread: the workers' limbs are
        # written a round of chunks at a time, so only ``t`` chunks' limbs exist at once
        writer = IntWriter(E)
        with quiet_blas():
            for r0 in range(0, len(starts), t):
                rounds = [range(e0, min(E, e0 + step)) for e0 in starts[r0:r0 + t]]
                for part, limbs in zip(rounds, run(entries, rounds)):
                    writer.add(limbs[0], neg[part.start:part.stop])
        out = writer.result()
    if p is not None and p > 2**63:
        out = out.view(np.uint64).astype(object) if small else out
    for e in np.flatnonzero(flag):  # both CRTs leave x as it was
        out[e] = _exact_entry(x[:, e], basis, p)
    return out


def _exact_entry(x: np.ndarray, basis: Basis, p: int | None) -> int:
    """One entry of :func:`reconstruct` from its residues ``x_i``, with Python integers."""
    M = basis.M
    w = _crt_constants(basis.moduli, p)[0]
    y = [int(v) * int(wi) % m for v, wi, m in zip(x, w, basis.moduli)]
    c = sum(yi * (M // m) for yi, m in zip(y, basis.moduli)) % M
    c = c - M if c > (M - 1) // 2 else c
    return c if p is None else c % p


def product_residues(pl, a: np.ndarray, b: np.ndarray, *, memory: int | None = None,
                     arena: Arena | None = None) -> tuple[np.ndarray, tuple[int, ...]]:
    """The first stage of :func:`multiply`: ``(rc, shape)``, the products of ``a @ b`` modulo
    each modulus of ``pl.basis`` as rows ``rc[i, :E]`` (``E`` entries of the result's
    ``shape``, each row padded): what :func:`reconstruct` (or :func:`reduce_residues`) takes.

    Within ``memory`` bytes (default: the budget of :func:`modlin.limits`;
    :meth:`RNSPlan.schedule` decides) ``rc`` is float64, integers congruent to the product
    modulo ``m_i`` and below ``2**53`` in magnitude, made from the residues of as many
    moduli at a time as fit; beyond the pool's share of the budget (or where its groups
    would read the operands more often), ``rc`` is int32 (host plans only), the products
    reduced into ``[0, m_i)`` (half the memory, one more pass), made from the residues of
    a group of moduli and a panel of rows of ``a`` at a time. Arguments as for :func:`multiply`
    (``a`` may be its :class:`Residues`)."""
    basis = pl.basis
    eng = get_engine(pl.engine)
    dtype = eng.dtype
    ha, hb = (x if isinstance(x, (_Halves, Residues)) else _Halves(x) for x in (a, b))
    if isinstance(ha, Residues) and ha.key != (basis.moduli, np.dtype(dtype)):
        raise ValueError("these Residues were made for another basis or engine")
    full = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    E = math.prod(full)
    k = a.shape[-1]
    subs = pl.subplans
    memory = current_limits().memory if memory is None else memory
    prepared = isinstance(ha, Residues)
    # panels of rows only for a 2-D product: a stack's rows are not a range of its entries
    group, panel = pl.schedule(0 if prepared else ha.size, hb.size, E, k, full[-2] if len(full) == 2 else 0,
                               memory, kept=getattr(hb, "kept", False))
    rc = padded_rows(len(basis.moduli), E, np.float64 if panel is None else np.int32, arena, "products")
    if not E:
        return rc, full
    # fresh for each call, unlike the products: they are freed before the CRT's arrays exist
    # (of A, a panel's when the products come in panels)
    bufs = [None if prepared else padded_rows(min(group, len(subs)), ha.size if panel is None else panel * k, dtype),
            padded_rows(min(group, len(subs)), hb.size, dtype)]
    if panel is not None:
        wide = take(arena, "panel", (panel, full[-1]), np.float64)  # one product's panel, before its reduction
    for i0 in range(0, len(subs), group):
        q = basis.moduli[i0:i0 + group]
        rb = hb.residues(q, dtype, bufs[1])
        for r0 in range(0, full[-2], panel or full[-2] or 1):
            part = None if panel is None else slice(r0, min(full[-2], r0 + panel))
            ra = ha.residues(q, dtype, bufs[0], rows=part)
            rows = full[-2] if part is None else part.stop - part.start
            work = rows * full[-1] * math.prod(full[:-2]) * k * len(q)
            # panels: in slabs at any depth, so that each product's reduction runs on its own
            # slab right after it (after a GEMM on BLAS' threads, a pass split across the same
            # cores competes with BLAS' spinning workers)
            t = gemm_workers(work, rows, min(k, min(s.block for s in subs))) if part is None else \
                row_workers(work, rows)

            def products(slab: slice) -> None:  # those of one slab of rows, on one worker
                for i, sub in enumerate(subs[i0:i0 + group]):
                    if part is None:
                        out = rc[i0 + i, :E].reshape(full)[..., slab, :]
                    else:
                        out = wide[:rows][slab]
                    if eng.dtype == np.float64 and sub.gemm_count() == 1:
                        # one exact GEMM: the CRT (or the reduction below) reduces its sums
                        eng.gemm(ra[i][..., slab, :], rb[i], out=out)
                    else:
                        _multiword.multiply_words(sub, ra[i:i + 1][..., slab, :], rb[i:i + 1], out)
                    if part is not None:  # into [0, m_i), as int32, the rows of rc
                        n = full[-1]
                        src, dst = out.reshape(1, -1), rc[i0 + i:i0 + i + 1, (part.start + slab.start) * n:]
                        _reduce_rows_kernel(src, np.array(q[i:i + 1], dtype=np.int64), dst, False, 0, src.shape[1])

            with region(t):
                run(products, slabs(rows, t))
    return rc, full


def multiply(pl, a: np.ndarray, b: np.ndarray, *, as_object: bool = False, memory: int | None = None,
             arena: Arena | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (or ``a @ b mod pl.p``) through the RNS plan ``pl`` (an :class:`RNSPlan`).

    ``a`` and ``b`` are integer arrays (int64, uint64 or object), or their
    :class:`_Halves`, of shapes ``(..., m, k)`` and ``(..., k, n)`` whose integer product is bounded by
    ``pl.bound``; ``a`` may be its :class:`Residues` for this basis and engine. Each modulus'
    product is one multiword plan; only the residues, their products and the result are
    allocated, within ``memory`` bytes (:func:`product_residues`, :meth:`RNSPlan.schedule`;
    default: the budget of :func:`modlin.limits`). The products' matrices, the
    largest buffer and the only one alive from the first GEMM to the end of the
    CRT, come from ``arena`` when given (the tiles of one product reuse them). The CRT
    writes into ``out`` when given (a C-contiguous int64 array of the result's shape, for
    int64 results), which is returned.
    """
    rc, full = product_residues(pl, a, b, memory=memory, arena=arena)
    return _reconstruct_rows(rc, math.prod(full), pl.basis, pl.p, as_object, out).reshape(full)


# --------------------------------------------------------------------------- residues summed

@njit
def _reduce_rows_kernel(src, moduli, dst, add, lo, hi):  # pragma: no cover - compiled
    """``dst[i, e] = (src[i, e] (+ dst[i, e] when add)) mod moduli[i]`` for ``lo <= e < hi``:
    ``src`` float64 integers below ``2**53`` in magnitude, ``dst`` residues in ``[0, m_i)``."""
    for i in range(dst.shape[0]):
        m = np.float64(moduli[i])
        minv = 1.0 / m
        x, y = src[i, lo:hi], dst[i, lo:hi]  # 1-D slices: loops over offset indices do not vectorise (5x)
        if add:
            for e in range(hi - lo):
                r = _fmod(x[e], m, minv) + y[e]
                y[e] = r - (m if r >= m else 0.0)
        else:
            for e in range(hi - lo):
                y[e] = _fmod(x[e], m, minv)


def reduce_residues(rc: np.ndarray, E: int, basis: Basis, out: np.ndarray, *, add: bool = False) -> np.ndarray:
    """``out = rc mod m_i`` (``add``: ``out = (out + rc) mod m_i``) row by row, for products
    ``rc`` of :func:`product_residues` (``E`` entries per row) and residues ``out`` of shape
    ``(N, ...)``, or padded rows ``(N, E + pad)`` (:func:`padded_rows`, what the CRT reads), in
    ``[0, m_i)`` (int32 or float64): the residues of two products (of two k-panels, or chunks,
    of one product) add up to those of their sum. Returns ``out``."""
    rows = out.reshape(len(basis.moduli), -1)
    q = np.asarray(basis.moduli, dtype=np.int64)
    each(lambda part: _reduce_rows_kernel(rc, q, rows, add, part.start, part.stop), E, len(q))
    return out


@njit
def _add_rows_kernel(x, y, q, lo, hi):  # pragma: no cover - compiled
    """``x = (x + y) mod q[i]`` row by row over ``lo <= e < hi``, residues in ``[0, q[i])``."""
    for i in range(x.shape[0]):
        qi = np.int64(q[i])
        for e in range(lo, hi):
            s = np.int64(x[i, e]) + np.int64(y[i, e])
            x[i, e] = s - qi if s >= qi else s


def add_residues(acc: np.ndarray, part: np.ndarray, moduli: tuple[int, ...]) -> np.ndarray:
    """``acc = (acc + part) mod m_i`` in place, for residues of shape ``(N, ...)`` in
    ``[0, m_i)`` (the same dtype, any integer or float type holding them). Returns ``acc``."""
    q = np.asarray(moduli, dtype=np.int64)
    x, y = acc.reshape(len(q), -1), np.ascontiguousarray(part).reshape(len(q), -1)
    each(lambda r: _add_rows_kernel(x, y, q, r.start, r.stop), x.shape[1], len(q))
    return acc
