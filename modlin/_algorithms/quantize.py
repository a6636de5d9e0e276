"""Ozaki-II quantisation: float matrices to integer matrices by power-of-two scales.

Row ``i`` of ``A`` becomes ``A'_i = rint(A_i * 2**sa_i)`` and column ``j`` of
``B`` becomes ``B'_j = rint(B_j * 2**sb_j)``: integers held exactly in float64.
The scales are chosen so that ``sum_k |A'_ik| |B'_kj| <= bound`` for every
``(i, j)``; the integer product ``A'B'`` is then recovered exactly from its
residues modulo moduli whose product ``M >= 2*bound + 2``, and
``C_ij = (A'B')_ij * 2**-(sa_i + sb_j)`` carries only the truncation error.

The proof runs through small integer bounds. With ``ex_i`` the exponent of the
row maximum (``max |A_i| < 2**ex_i``), ``Abar = ceil(|A| * 2**(T_BITS - ex_i))``
is an integer in ``[0, 2**T_BITS]`` (per part, for complex input: the parts'
bounds are added). Writing ``sa_i = g_i - ex_i`` with ``g_i >= T_BITS``,
``|A'_ik| <= ceil(2**(g_i - T_BITS) * 2**(T_BITS - ex_i) |A_ik|) <= 2**(g_i - T_BITS) Abar_ik``,
so ``sum_k |A'_ik||B'_kj| <= 2**(g_i + h_j - 2 T_BITS) (Abar Bbar)_ij``. "Fast" scaling
bounds ``(Abar Bbar)_ij`` by ``||Abar_i|| ||Bbar_j||`` (Cauchy-Schwarz; exact
integer sums of squares); "accurate" scaling computes ``Abar Bbar`` exactly
with one GEMM of small integers. Either way every bound is an integer
inequality, checked in integer exponents, never in rounded floats.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from modlin._arith.residues import balance_rem, fmod_inv
from modlin._engines.backend import is_cupy, namespace
from modlin._engines.jit import njit
from modlin._engines.threads import each, each_row
from modlin._runtime.calibration import L1_CHUNK
from modlin._runtime.scratch import scratch

#: Bits of the integer bounds ``Abar``: sums of ``k`` products of them stay exact in
#: float64 (and in int32 for ``k <= 2**19`` on an int8 engine).
T_BITS = 5


#: Most bits kept for the largest entry of a row or column: scaled integers stay
#: below ``2**85``, so the residue kernel's split at ``2**32`` leaves a high part
#: below ``2**53``.
G_MAX = 84


def _ceil_log2(x: np.ndarray) -> np.ndarray:
    """``ceil(log2 x)`` for non-negative integer-valued float64 ``x`` (0 for ``x <= 1``)."""
    xp = namespace(x)
    return xp.frexp(xp.maximum(x - 1.0, 0.0))[1].astype(np.int64)


def part_bounds(parts: list[np.ndarray], axis: int, ex: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ex, bar)``: the exponent of each row (``axis=1``) or column (``axis=0``)
    maximum over all ``parts``, and the integer bounds ``bar`` (float64, the sum
    over parts of ``ceil(|part| * 2**(T_BITS - ex))``, never 0 where a part is not).

    ``ex`` may be given (that of whole lines, for a piece of them): each bound depends
    only on its entry and ``ex``, so pieces of lines get the bounds the lines would."""
    xp = namespace(parts[0])
    if ex is None:
        if parts[0].shape[axis] == 0:  # empty lines: nothing to bound
            mx = xp.zeros(parts[0].shape[1 - axis])
        else:
            mx = functools.reduce(xp.maximum, [xp.abs(x).max(axis=axis) for x in parts])
        ex = xp.frexp(mx)[1].astype(np.int64)  # max < 2**ex (and 0 for a zero line)
    shift = xp.expand_dims(T_BITS - ex, axis)
    bar = xp.zeros(parts[0].shape)
    for x in parts:
        # ldexp is exact except where it underflows; a nonzero entry never bounds to 0
        bar += xp.maximum(xp.ceil(xp.ldexp(xp.abs(x), shift)), x != 0)
    return ex, bar


def bound_bits(w: np.ndarray) -> np.ndarray:
    """``ceil(log2 w)`` of the exact bound products ``w = abar @ bbar`` (below ``2**53``) as
    uint8, 255 where ``w == 0``: all :func:`accurate_exponents` needs of ``w``, in an
    eighth of its memory."""
    xp = namespace(w)
    return xp.where(w > 0, _ceil_log2(w), 255).astype(np.uint8)


def check_bits(least: int, what: str) -> None:
    """Refuse scales that keep fewer than T_BITS bits of some line (``least`` bits)."""
    if least < T_BITS:
        raise ValueError(
            f"the moduli are too few for this product: the scales of {what} would keep fewer than "
            f"{T_BITS} bits; use more moduli"
        )


def _check_bits(g: np.ndarray, what: str) -> np.ndarray:
    if g.size:
        check_bits(int(g.min()), what)
    return g


def exact_bits(parts: list[np.ndarray], ex: np.ndarray, axis: int) -> np.ndarray:
    """Per row (``axis=1``) or column (``axis=0``): the fewest bits ``g`` for which
    ``rint(x * 2**(g - ex))`` is exact for every entry ``x`` of the line in every part,
    at least ``T_BITS``. More bits than that cannot make the line more accurate."""
    xp = namespace(parts[0])
    need = xp.full(ex.shape, T_BITS, dtype=np.int64)
    if parts[0].shape[axis] == 0:
        return need
    top = xp.expand_dims(ex, axis)
    for x in parts:
        f, e = xp.frexp(x)  # x = f * 2**e with |f| in [0.5, 1)
        mant = xp.abs(xp.ldexp(f, 53)).astype(np.int64)  # an integer below 2**53
        low = xp.frexp((mant & -mant).astype(np.float64))[1] - 1  # trailing zero bits
        lsb = e.astype(np.int64) - 53 + low  # x is an odd multiple of 2**lsb
        need = xp.maximum(need, xp.where(x != 0, top - lsb, 0).max(axis=axis))
    return need


def fast_exponents(sq_a: np.ndarray, sq_b: np.ndarray, lb: int, need_a=None, need_b=None):
    """Bits ``(g, h)`` for rows of ``A`` and columns of ``B`` from the norms of the bounds,
    so that ``2**(g_i + h_j - 2 T_BITS) ||abar_i|| ||bbar_j|| <= 2**lb``, given the squared
    norms ``sq_a = (abar * abar).sum(axis=1)`` and ``sq_b = (bbar * bbar).sum(axis=0)``
    (sums of small integers: exact, in any order, so they may be summed by pieces).

    The constraint separates: with ``ca_i = ceil(log2 ||abar_i||)``, rows take
    ``g_i = ha - ca_i`` and columns ``h_j = hb - cb_j`` for any ``ha + hb = lb + 2 T_BITS``.
    The split is even, except that a side which is exact with fewer bits
    (``need_a``, ``need_b`` from :func:`exact_bits`) leaves the rest to the other.
    """
    xp = namespace(sq_a)
    ca = (_ceil_log2(sq_a) + 1) // 2
    cb = (_ceil_log2(sq_b) + 1) // 2
    cap_a = xp.full(ca.shape, G_MAX, dtype=np.int64) if need_a is None else xp.minimum(G_MAX, need_a)
    cap_b = xp.full(cb.shape, G_MAX, dtype=np.int64) if need_b is None else xp.minimum(G_MAX, need_b)
    total = lb + 2 * T_BITS
    ha = total // 2
    hb = total - ha
    use_a = int((cap_a + ca).max()) if ca.size else 0  # the most the rows can use
    use_b = int((cap_b + cb).max()) if cb.size else 0
    if use_a < ha:
        ha, hb = use_a, total - use_a
    elif use_b < hb:
        ha, hb = total - use_b, use_b
    g = xp.minimum(cap_a, ha - ca)
    h = xp.minimum(cap_b, hb - cb)
    return _check_bits(g, "A's rows"), _check_bits(h, "B's columns")


def accurate_exponents(sq_a: np.ndarray, sq_b: np.ndarray, code: np.ndarray, lb: int, need_a=None, need_b=None,
                       rows: int | None = None):
    """Bits ``(g, h)`` from ``w = abar @ bbar`` (exact), so that
    ``2**(g_i + h_j - 2 T_BITS) w_ij <= 2**lb`` for every ``(i, j)``; ``w`` is given as
    ``code = bound_bits(w)``, the squared norms as for :func:`fast_exponents`.

    Starts from the fast exponents (feasible here too, since ``w_ij`` is at most
    the product of the norms), gives each row half of its slack, then each
    column all that the rows leave, then the rows whatever is left: never
    fewer bits than "fast" keeps, and shared between both sides. Each of the three
    steps is a minimum over rows or columns, taken over panels of ``rows`` rows of
    ``code`` at a time (all of them by default), so that its int64 temporaries stay
    small; minima of integers do not depend on the panels.
    """
    xp = namespace(code)
    g, h = fast_exponents(sq_a, sq_b, lb, need_a, need_b)
    m, n = code.shape
    if m == 0 or n == 0:
        return g, h
    cap_a = xp.full(m, G_MAX, dtype=np.int64) if need_a is None else xp.minimum(G_MAX, need_a)
    cap_b = G_MAX if need_b is None else xp.minimum(G_MAX, need_b)
    top = lb + 2 * T_BITS
    panels = [slice(r, r + (rows or m)) for r in range(0, m, rows or m)]

    def room(r):  # g_i + h_j <= room_ij
        c = code[r]
        return xp.where(c != 255, top - c.astype(np.int64), 4 * G_MAX)

    g = g.copy()
    for r in panels:
        g[r] = xp.maximum(g[r], xp.minimum(cap_a[r], g[r] + (room(r) - g[r, None] - h).min(axis=1) // 2))
    col = functools.reduce(xp.minimum, [(room(r) - g[r, None]).min(axis=0) for r in panels])
    h = xp.maximum(h, xp.minimum(cap_b, col))
    for r in panels:
        g[r] = xp.maximum(g[r], xp.minimum(cap_a[r], (room(r) - h).min(axis=1)))
    return g, h


@dataclass(frozen=True)
class Scales:
    """Stage (a)'s result: ``A' = rint(A * 2**sa)`` by rows, ``B' = rint(B * 2**sb)`` by
    columns (int64 shifts, shapes ``(m,)`` and ``(n,)``), the rows of ``A`` and
    columns of ``B`` holding Inf or NaN (bool), quantised as zeros and computed natively
    in :func:`~modlin._algorithms.ozaki.native_lines`, and the exponents ``ea``, ``eb`` of each line's largest part
    (``max |x| < 2**e``; 0 for zero lines and those holding Inf or NaN), which tell
    :func:`~modlin._algorithms.ozaki.exact_overflow` where a result may overflow."""

    sa: np.ndarray
    sb: np.ndarray
    bad_a: np.ndarray
    bad_b: np.ndarray
    ea: np.ndarray
    eb: np.ndarray
    #: What the host knows without reading the device, when stage (a) sent it in its one
    #: transfer: whether any row of ``A``, any column of ``B`` holds Inf or NaN, the
    #: largest ``ea`` and ``eb``, and how many nonzero entries of ``A`` and ``B`` the shifts
    #: round to zero (None: read the arrays, count the entries, when needed).
    summary: tuple[bool, bool, int, int, int, int] | None = None

    def any_bad(self) -> tuple[bool, bool] | None:
        """Whether any row of ``A`` and any column of ``B`` hold Inf or NaN, if known on the host."""
        return None if self.summary is None else self.summary[:2]

    def lost(self) -> tuple[int, int] | None:
        """The nonzero entries of ``A`` and ``B`` that round to zero, if stage (a) counted them."""
        return None if self.summary is None else self.summary[4:6]


@dataclass(frozen=True)
class Kernels:
    """Ozaki-II's stages on one kind of array, the table the tile loop takes them from
    (:data:`modlin._algorithms.ozaki.CPU`, :data:`modlin._algorithms.gpu.OZAKI`): stage (b)'s
    ``gemm_residues``, ``syrk_residues`` and ``add_residues`` of a tile, the CRT of
    :func:`~modlin._algorithms.ozaki.finish` (``crt(res, basis, sa, sb,
    out)``, writing every part's residues into the tile ``out``), and ``memory``,
    the bytes the residue kernels allocate for a tile beside the residues they return
    (``memory(mods, tile, pairs, parts)``, ``parts`` 2 for complex operands, for
    :func:`~modlin._algorithms.ozaki.workspace`), and ``line_bytes``, the device memory stage (a)'s
    kernels keep per line of the operands beyond the CPU's."""

    gemm_residues: Callable
    syrk_residues: Callable
    add_residues: Callable
    crt: Callable
    memory: Callable[..., int]
    line_bytes: int = 0
    #: Stage (a) on the device, where it has its own kernels: ``line_stats(x, axis, lines,
    #: inner, bars)`` as :func:`modlin._algorithms.ozaki._line_stats` (its tuple may carry more after the four), and
    #: ``fast_scales(stats_a, stats_b, lb, symmetric)`` giving "fast" mode's :class:`Scales`
    #: (with its summary) from them.
    line_stats: Callable | None = None
    fast_scales: Callable | None = None
    #: "accurate" mode on the device: ``bound_code(w, out)`` writes :func:`bound_bits` of a
    #: tile of the bound product into ``out``; ``accurate_scales(stats_a, stats_b, code, lb,
    #: symmetric)`` gives the :class:`Scales` (with its summary) from the codes.
    bound_code: Callable | None = None
    accurate_scales: Callable | None = None


class Panel:
    """Stage (b)'s operand: a panel ``x`` of ``A``'s rows (``axis=1``) or of ``B``'s columns
    (``axis=0``), float64 or complex128, with the shifts of its lines, standing for the
    integers ``rint(x * 2**shift)`` (lines holding Inf or NaN, ``bad``, as zeros).

    The residue kernels (:func:`residues`, :func:`twom_residues`; on CuPy arrays those of
    :mod:`modlin._algorithms.gpu`) quantise each entry as they read it: the integers are never
    stored (they took as much memory as the panel, and a pass of their own). :meth:`lost`
    counts the nonzero entries they round to zero.
    """

    def __init__(self, x, shift, bad, axis: int):
        self.x, self.shift, self.bad, self.axis = x, shift, bad, axis
        self._halves = False

    @classmethod
    def integers(cls, x: np.ndarray) -> "Panel":
        """The integer-valued float64 or complex128 ``x`` (1-D or 2-D) itself: shifts 0."""
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        return cls(x2, np.zeros(x2.shape[0], dtype=np.int64), np.zeros(x2.shape[0], dtype=bool), 1)

    @property
    def shape(self) -> tuple[int, int]:
        """The shape of the integer matrix: real SYRK's :meth:`halves` have half the columns."""
        r, c = self.x.shape
        return (r, (c + 1) // 2) if self._halves else (r, c)

    @property
    def parts(self) -> int:
        """How many parts the integers have: 2 for complex panels and for :meth:`halves`."""
        return 2 if self._halves or self.x.dtype.kind == "c" else 1

    def halves(self) -> "Panel":
        """Real SYRK's ``Z = A_1 + i A_2`` of a real row panel: its two halves of columns as
        the parts (the second padded with a zero column when the width is odd)."""
        if self.axis != 1 or self.x.dtype.kind == "c":
            raise ValueError("halves are those of a real panel of rows")
        h = Panel(self.x, self.shift, self.bad, 1)
        h._halves = True
        return h

    def lost(self) -> int:
        """How many nonzero entries of the panel's finite lines round to zero (NumPy: one pass
        of a kernel; CuPy, a Dask task's chunk: array expressions. A whole product on CuPy
        counts them in stage (a) instead: :meth:`Scales.lost`)."""
        if namespace(self.x) is not np:
            xp = namespace(self.x)
            keep = ~xp.expand_dims(self.bad, self.axis)
            shift = xp.expand_dims(self.shift, self.axis)
            parts = [self.x.real, self.x.imag] if self.x.dtype.kind == "c" else [self.x]
            # rint(x 2**s) == 0 for a nonzero x: as the kernels' two exact factors give it
            return int(sum(xp.count_nonzero((xp.rint(xp.ldexp(p, shift)) == 0) & (p != 0) & keep) for p in parts))
        q = Panel(self.x, self.shift, self.bad, self.axis) if self._halves else _panel(self)[0]  # x's entries
        flat, rs, fr, fc, layout = q._layout()
        rows, width = q.x.shape
        return sum(sum(each_row(lambda r, p=p: _lost_kernel(flat, rs, r.start, r.stop, width, *p, *fr, *fc),
                                rows, width)) for p in layout)

    def _layout(self):
        """The panel as the kernels read it: one C-contiguous float64 array spanning it
        (``flat``), its row stride in doubles, the row and column factors (each a pair
        ``2**(s//2), 2**(s - s//2)`` whose successive products scale exactly; a panel of
        rows has no column factors, and a panel of columns rows' factors 1: ``2**s`` alone
        may overflow or be subnormal, the shifts reaching about -1019 and 1157, while
        ``x * 2**s`` is below ``2**85``; a bad line's first factor 0), and per part its
        ``(offset, step, length)`` in a row of ``flat``, the part read as zero beyond it."""
        x = self.x
        if (x.shape[1] > 1 and x.strides[1] != x.itemsize) or x.strides[0] < 0 or x.strides[0] % 8:
            x = np.ascontiguousarray(x)  # neither rows nor columns contiguous: the front door copies those
        r, c = x.shape
        v = x.view(np.float64) if x.dtype.kind == "c" else x
        rs = v.strides[0] // 8 if r > 1 else 0
        span = (r - 1) * rs + v.shape[1] if r and c else 0
        flat = np.lib.stride_tricks.as_strided(v, shape=(span,), strides=(8,)) if span else np.zeros(1)
        half = self.shift // 2
        f1 = np.ldexp(1.0, half)
        f1[self.bad] = 0.0
        f2 = np.ldexp(1.0, self.shift - half)
        none, ones = np.empty(0), np.ones(r)
        fr, fc = ((f1, f2), (none, none)) if self.axis == 1 else ((ones, ones), (f1, f2))
        if x.dtype.kind == "c":
            layout = [(0, 2, c), (1, 2, c)]
        elif self._halves:
            h = (c + 1) // 2
            layout = [(0, 1, h), (h, 1, c - h)]
        else:
            layout = [(0, 1, c)]
        return flat, rs, fr, fc, layout


@njit(inline="always")
def _folded(v, m, minv, c32):  # pragma: no cover - compiled
    """An integer-valued float64 in ``[0, 2**53)`` congruent to ``v`` modulo ``m``, for an
    integer-valued ``|v| < 2**85`` and ``m < 2**26``: ``v = hi * 2**32 + lo`` with
    ``hi < 2**53`` and ``0 <= lo < 2**32`` exactly, and ``(hi mod m) * (2**32 mod m) + lo < 2**53``."""
    hi = np.floor(v * 2.0**-32)
    lo = v - hi * 2.0**32
    return fmod_inv(hi, m, minv) * c32 + lo


@njit(inline="always")
def _read(row, off, step, length, c0, c, buf):  # pragma: no cover - compiled
    """``buf[:stop] =`` the part's raw entries ``c0 .. c0 + stop`` of one row (``step`` 1 or 2),
    ``stop`` (returned) the chunk's ``c`` cut at the part's length. The reads take a slice
    and a constant step: with a computed index LLVM cannot prove it non-negative, keeps
    numba's wraparound test, and vectorises nothing."""
    stop = max(0, min(c, length - c0))
    src = row[off + c0 * step:]
    if step == 1:
        for e in range(stop):
            buf[e] = src[e]
    else:
        for e in range(stop):
            buf[e] = src[2 * e]
    return stop


@njit(inline="always")
def _load(row, off, step, length, c0, c, a1, a2, c1, c2, buf):  # pragma: no cover - compiled
    """``buf[:c] = rint(x * 2**shift)`` of the part's entries ``c0 .. c0 + c`` of one row, with
    the row's factors ``a1, a2`` or, where ``c1`` is not empty, the columns' ``c1, c2`` (zero
    past the part's length, and in bad columns: those whose first factor is 0)."""
    stop = _read(row, off, step, length, c0, c, buf)
    for e in range(stop, c):
        buf[e] = 0.0
    if c1.shape[0] == 0:  # a panel of rows: its row's factors only
        for e in range(c):
            buf[e] = np.rint(buf[e] * a1 * a2)
        return
    f1, f2 = c1[c0:c0 + c], c2[c0:c0 + c]
    for e in range(c):
        v = np.rint(buf[e] * f1[e] * f2[e])
        buf[e] = v if f1[e] != 0.0 else 0.0


@njit
def _lost_kernel(flat, rs, i0, i1, width, off, step, length, r1, r2, c1, c2):  # pragma: no cover - compiled
    """How many nonzero entries of rows ``i0 .. i1`` of a part (in good lines) round to zero."""
    buf, zero = np.empty(L1_CHUNK), np.empty(L1_CHUNK)
    lost = 0
    for i in range(i0, i1):
        if r1[i] == 0.0:
            continue
        row = flat[i * rs:]
        for c0 in range(0, width, L1_CHUNK):
            c = min(L1_CHUNK, width - c0)
            _load(row, off, step, length, c0, c, r1[i], r2[i], c1, c2, buf)
            # the zeros of x (bad columns' entries count as zeros: 0 in buf too)
            stop = _read(row, off, step, length, c0, c, zero)
            if c1.shape[0]:
                f1 = c1[c0:c0 + c]
                for e in range(stop):
                    zero[e] = zero[e] if f1[e] != 0.0 else 0.0
            for e in range(stop):
                lost += 1 if (buf[e] == 0.0 and zero[e] != 0.0) else 0
    return lost


@njit
def _residues_kernel(flat, rs, i0, i1, width, off, step, length, r1, r2, c1, c2, m, out):  # pragma: no cover
    """``out = rint(x * 2**shift) mod m``, balanced, for rows ``i0 .. i1`` of a panel, chunk by
    chunk: :func:`_folded` and the reduction of its result in two loops, since with both
    reductions in one LLVM vectorises neither."""
    mf = np.float64(m)
    minv = 1.0 / mf
    c32 = np.float64(2**32 % m)
    half = np.floor((mf - 1.0) / 2.0)
    buf = np.empty(L1_CHUNK)
    for i in range(i0, i1):
        row, dst = flat[i * rs:], out[i]
        if r1[i] == 0.0:
            dst[:] = 0
            continue
        for c0 in range(0, width, L1_CHUNK):
            c = min(L1_CHUNK, width - c0)
            _load(row, off, step, length, c0, c, r1[i], r2[i], c1, c2, buf)
            for e in range(c):
                buf[e] = _folded(buf[e], mf, minv, c32)
            for e in range(c):
                dst[c0 + e] = balance_rem(fmod_inv(buf[e], mf, minv), mf, half)


@njit
def _twom_kernel(flat, rs, i0, i1, width, ro, rstep, rlen, io, istep, ilen, r1, r2, c1, c2, m, s, plus,
                 minus):  # pragma: no cover - compiled
    """``plus, minus = xr +- s*xi mod m`` (balanced) of the quantised parts, for rows
    ``i0 .. i1`` of a panel, chunk by chunk: one loop per chained reduction (with two
    chained in one loop, LLVM vectorises neither)."""
    mf = np.float64(m)
    minv = 1.0 / mf
    c32 = np.float64(2**32 % m)
    half = np.floor((mf - 1.0) / 2.0)
    sf = np.float64(s)
    r, t = np.empty(L1_CHUNK), np.empty(L1_CHUNK)
    for i in range(i0, i1):
        row, dp, dm = flat[i * rs:], plus[i], minus[i]
        if r1[i] == 0.0:
            dp[:] = 0
            dm[:] = 0
            continue
        for c0 in range(0, width, L1_CHUNK):
            c = min(L1_CHUNK, width - c0)
            _load(row, ro, rstep, rlen, c0, c, r1[i], r2[i], c1, c2, r)
            _load(row, io, istep, ilen, c0, c, r1[i], r2[i], c1, c2, t)
            for e in range(c):
                r[e] = _folded(r[e], mf, minv, c32)
                t[e] = _folded(t[e], mf, minv, c32)
            for e in range(c):  # r + s t and r - s t stay below m + m**2 < 2**53: reduced once
                r[e] = fmod_inv(r[e], mf, minv)
                t[e] = fmod_inv(t[e], mf, minv) * sf
            for e in range(c):
                dp[c0 + e] = balance_rem(fmod_inv(r[e] + t[e], mf, minv), mf, half)
                dm[c0 + e] = balance_rem(fmod_inv(r[e] - t[e], mf, minv), mf, half)


def _panel(x) -> tuple[Panel, bool]:
    """``x`` as a :class:`Panel` the kernels read by rows, and whether that is its transpose:
    a panel whose columns are contiguous (a Fortran-ordered operand's) is read as its
    transpose, whose residues are the transpose of its own, rather than copied."""
    p = x if isinstance(x, Panel) else Panel.integers(np.asarray(x))
    y = p.x
    if y.shape[0] > 1 and y.shape[1] > 1 and y.strides[0] == y.itemsize and not p._halves:
        return Panel(y.T, p.shift, p.bad, 1 - p.axis), True
    return p, False


def residues(x, m: int, dtype, part: int = 0) -> np.ndarray:
    """Balanced residues (in ``[-(m//2), (m-1)//2]``) modulo ``m < 2**26``, in ``dtype`` (an
    engine's word type), of part ``part`` (0 real, 1 imaginary) of a :class:`Panel`'s
    integers, or of an integer-valued float64 array ``x`` (its shape kept)."""
    p, flip = _panel(x)
    flat, rs, fr, fc, layout = p._layout()
    out = scratch(p.shape, dtype)
    width = p.shape[1]
    each_row(lambda r: _residues_kernel(flat, rs, r.start, r.stop, width, *layout[part], *fr, *fc, m, out),
             p.shape[0], width)
    out = out.T if flip else out
    return out if isinstance(x, Panel) else out.reshape(np.shape(x))


def twom_residues(x, m: int, s: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """2M's images ``xr +- s*xi mod m`` (balanced, in ``dtype``) of a complex :class:`Panel`'s
    integers (or real SYRK's :meth:`Panel.halves`), or of an integer-valued complex128 array."""
    p, flip = _panel(x)
    flat, rs, fr, fc, layout = p._layout()
    plus, minus = scratch(p.shape, dtype), scratch(p.shape, dtype)
    width = p.shape[1]
    each_row(lambda r: _twom_kernel(flat, rs, r.start, r.stop, width, *layout[0], *layout[1], *fr, *fc, m, s,
                                    plus, minus), p.shape[0], width, 2)
    plus, minus = (plus.T, minus.T) if flip else (plus, minus)
    return (plus, minus) if isinstance(x, Panel) else (plus.reshape(np.shape(x)), minus.reshape(np.shape(x)))


@njit
def _stats_kernel(flat, rs, i0, i1, width, o0, s0, o1, s1, nparts, r1, r2, c1, c2, ex, need, sq, keep,
                  bars):  # pragma: no cover - compiled
    """:func:`line_stats` of rows ``i0 .. i1`` of a panel (lines are its rows where ``c1`` is
    empty, else its columns): entry by entry, the bound ``sum over parts of
    ceil(|x| * 2**(T_BITS - ex))`` (at least 1 where ``x != 0``; the factors carry the
    shift, 0 on bad lines), its square into ``sq`` and into ``bars`` (with ``keep``), and
    ``ex - lsb(x)`` into ``need``."""
    rowlines = c1.shape[0] == 0
    for i in range(i0, i1):
        if r1[i] == 0.0:
            if keep:
                bars[i, :] = 0
            continue
        row = flat[i * rs:]
        for j in range(width):
            line = i if rowlines else j
            f1, f2 = (r1[i], r2[i]) if rowlines else (c1[j], c2[j])
            bound = 0.0
            if f1 != 0.0:
                for p in range(nparts):
                    v = row[o0 + j * s0] if p == 0 else row[o1 + j * s1]
                    if v != 0.0:
                        bound += max(np.ceil(abs(v) * f1 * f2), 1.0)
                        fr, e = math.frexp(v)  # v = fr * 2**e, |fr| in [0.5, 1)
                        mant = np.int64(abs(fr) * 2.0**53)  # an integer below 2**53
                        low = math.frexp(np.float64(mant & -mant))[1] - 1  # its trailing zero bits
                        need[line] = max(need[line], ex[line] - (e - 53 + low))
                sq[line] += bound * bound
            if keep:
                bars[i, j] = np.uint8(bound)


@njit
def _maxima_kernel(flat, rs, i0, i1, width, o0, s0, o1, s1, nparts, rowlines, mx, bad):  # pragma: no cover
    """:func:`line_maxima` of rows ``i0 .. i1`` of a panel (lines: its rows or its columns)."""
    for i in range(i0, i1):
        row = flat[i * rs:]
        for j in range(width):
            line = i if rowlines else j
            for p in range(nparts):
                a = abs(row[o0 + j * s0] if p == 0 else row[o1 + j * s1])
                if a < np.inf:
                    mx[line] = max(mx[line], a)
                else:  # Inf or NaN
                    bad[line] = True


def line_maxima(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """``(bad, mx)`` of a NumPy piece ``x`` (float64 or complex128), per row (``axis=1``) or
    column (``axis=0``): whether it holds Inf or NaN, and the largest finite ``|part|``
    of its entries, in one pass."""
    lines = x.shape[1 - axis]
    p, flip = _panel(Panel(x, np.zeros(lines, dtype=np.int64), np.zeros(lines, dtype=bool), axis))
    flat, rs, _, _, layout = p._layout()
    rows, width = p.x.shape
    (o0, s0, _), (o1, s1, _) = layout[0], layout[-1]

    def slab(r):
        mx, bad = np.zeros(lines), np.zeros(lines, dtype=bool)
        _maxima_kernel(flat, rs, r.start, r.stop, width, o0, s0, o1, s1, len(layout), p.axis == 1, mx, bad)
        return bad, mx

    found = each_row(slab, rows, width)
    return functools.reduce(np.logical_or, [f[0] for f in found]), functools.reduce(np.maximum, [f[1] for f in found])


@njit
def _spread_kernel(bits, rs, i0, i1, width, o0, s0, o1, s1, nparts, rowlines, top, total, count):  # pragma: no cover
    """:func:`line_spread` of rows ``i0 .. i1`` of a panel, from the doubles' bits."""
    for i in range(i0, i1):
        row = bits[i * rs:]
        for j in range(width):
            line = i if rowlines else j
            for p in range(nparts):
                b = row[o0 + j * s0] if p == 0 else row[o1 + j * s1]
                e = (b >> 52) & 2047  # the biased exponent: 0 for zeros and subnormals, 2047 for Inf, NaN
                if b << 1 != 0 and e != 2047:
                    top[line] = max(top[line], e)
                    total[line] += e
                    count[line] += 1


def line_spread(x, axis: int):
    """``(top, total, count)`` per row (``axis=1``) or column (``axis=0``) of ``x`` (float64 or
    complex128; NumPy, CuPy or dask): the largest binary exponent of a nonzero finite part, the
    sum of those exponents and their count (int64 vectors; subnormals count with the
    smallest exponent). ``top - total / count`` is how far, in bits, a line's largest entry
    stands above its typical one, which sets the default moduli of :mod:`modlin.ozaki`."""

    if not isinstance(x, np.ndarray) or is_cupy(x):  # CuPy or dask: array expressions
        if is_cupy(x):
            xp = namespace(x)
        else:
            import dask.array as xp
        ps = [x.real, x.imag] if x.dtype.kind == "c" else [x]
        tops, totals, counts = [], [], []
        for q in ps:
            live = (q != 0) & xp.isfinite(q)
            e = xp.where(live, xp.frexp(q)[1], 0).astype(np.int64)
            tops.append(xp.where(live, e, -(2**40)).max(axis=axis))
            totals.append(e.sum(axis=axis))
            counts.append(live.sum(axis=axis).astype(np.int64))
        return functools.reduce(xp.maximum, tops), sum(totals), sum(counts)
    lines = x.shape[1 - axis]
    p, flip = _panel(Panel(x, np.zeros(lines, dtype=np.int64), np.zeros(lines, dtype=bool), axis))
    flat, rs, _, _, layout = p._layout()
    rows, width = p.x.shape
    (o0, s0, _), (o1, s1, _) = layout[0], layout[-1]
    bits = flat.view(np.int64)

    def slab(r):
        top, total, count = np.full(lines, -(2**40), dtype=np.int64), np.zeros(lines, np.int64), np.zeros(lines, np.int64)
        _spread_kernel(bits, rs, r.start, r.stop, width, o0, s0, o1, s1, len(layout), p.axis == 1, top, total, count)
        return top, total, count

    found = each_row(slab, rows, width)
    return (functools.reduce(np.maximum, [f[0] for f in found]), sum(f[1] for f in found),
            sum(f[2] for f in found))


def line_stats(x: np.ndarray, ex: np.ndarray, bad: np.ndarray, axis: int, bars: np.ndarray | None = None):
    """What stage (a) takes of a NumPy piece ``x`` (float64 or complex128) of whole lines'
    exponents ``ex`` (rows, ``axis=1``; columns, ``axis=0``), in one pass:
    ``(need, sq)``, the bits :func:`exact_bits` gives and the squared norms of the bounds
    of :func:`part_bounds` (``(bar * bar).sum(axis)``), lines in ``bad`` counting as
    zeros; the bounds themselves written into ``bars`` (uint8, ``x``'s shape) when given.
    The same integers as those functions' numpy passes, without their temporaries."""
    lines = x.shape[1 - axis]
    p, flip = _panel(Panel(x, T_BITS - ex, bad, axis))
    flat, rs, fr, fc, layout = p._layout()
    rows, width = p.x.shape
    (o0, s0, _), (o1, s1, _) = layout[0], layout[-1]
    keep = bars is not None
    target = (bars.T if flip else bars) if keep else np.zeros((0, 0), dtype=np.uint8)

    def slab(r):
        need, sq = np.full(lines, T_BITS, dtype=np.int64), np.zeros(lines)
        _stats_kernel(flat, rs, r.start, r.stop, width, o0, s0, o1, s1, len(layout), *fr, *fc, ex, need, sq, keep,
                      target)
        return need, sq

    found = each_row(slab, rows, width, 2)
    return (functools.reduce(np.maximum, [f[0] for f in found]), functools.reduce(np.add, [f[1] for f in found]))


@njit
def _twom_combine_kernel(X, Y, m, inv2, inv2s, re, im):  # pragma: no cover - compiled
    mf = np.float64(m)
    minv = 1.0 / mf
    for e in range(X.shape[0]):
        re[e] = fmod_inv((X[e] + Y[e]) * inv2, mf, minv)  # below 2m * m < 2**53: exact
        im[e] = fmod_inv((X[e] - Y[e]) * inv2s, mf, minv)


def twom_combine(X: np.ndarray, Y: np.ndarray, m: int, s: int, re: np.ndarray, im: np.ndarray) -> None:
    """2M's post-processing in one pass: ``re = (X + Y)/2``, ``im = (X - Y)/(2s)`` modulo
    ``m < 2**26``, from float64 products ``X, Y`` in ``[0, m)``, into ``re`` and ``im``
    (contiguous, any dtype holding ``[0, m)``)."""
    x, y, dr, di = np.ascontiguousarray(X).reshape(-1), np.ascontiguousarray(Y).reshape(-1), re.reshape(-1), im.reshape(-1)
    inv2, inv2s = np.float64((m + 1) // 2), np.float64(pow(2 * s, -1, m))
    each(lambda r: _twom_combine_kernel(x[r.start:r.stop], y[r.start:r.stop], m, inv2, inv2s, dr[r.start:r.stop],
                                        di[r.start:r.stop]), x.size, 2)
