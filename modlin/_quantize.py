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

import numpy as np

from ._backend import namespace
from ._jit import njit
from ._rns import _balanced, _fmod
from ._threads import each

__all__ = ["T_BITS", "G_MAX", "part_bounds", "bound_bits", "exact_bits", "fast_exponents", "accurate_exponents",
           "quantize", "residues", "twom_residues", "twom_combine"]

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


def _check_bits(g: np.ndarray, what: str) -> np.ndarray:
    if g.size and int(g.min()) < T_BITS:
        raise ValueError(
            f"the moduli are too few for this product: the scales of {what} would keep fewer than "
            f"{T_BITS} bits; use more moduli"
        )
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


def quantize(x: np.ndarray, shift: np.ndarray, axis: int) -> tuple[np.ndarray, int]:
    """``rint(x * 2**shift)`` along rows (``axis=1``) or columns (``axis=0``), and how
    many nonzero entries it rounded to zero (what the scale could not keep)."""
    xp = namespace(x)
    q = xp.rint(xp.ldexp(x, xp.expand_dims(shift, axis)))
    lost = int(xp.count_nonzero(q == 0)) - int(xp.count_nonzero(x == 0))
    return q, lost


# --------------------------------------------------------------------------- residues

#: Entries per chunk of the residue kernels: their buffers stay in the L1 cache.
_CHUNK = 512


@njit(inline="always")
def _folded(v, m, minv, c32):  # pragma: no cover - compiled
    """An integer-valued float64 in ``[0, 2**53)`` congruent to ``v`` modulo ``m``, for an
    integer-valued ``|v| < 2**85`` and ``m < 2**26``: ``v = hi * 2**32 + lo`` with
    ``hi < 2**53`` and ``0 <= lo < 2**32`` exactly, and ``(hi mod m) * (2**32 mod m) + lo < 2**53``."""
    hi = np.floor(v * 2.0**-32)
    lo = v - hi * 2.0**32
    return _fmod(hi, m, minv) * c32 + lo


@njit
def _residues_kernel(x, m, out):  # pragma: no cover - compiled
    """``out = x mod m``, balanced, chunk by chunk: :func:`_folded` and the reduction of
    its result in two loops, since with both reductions in one LLVM vectorises neither."""
    mf = np.float64(m)
    minv = 1.0 / mf
    c32 = np.float64(2**32 % m)
    half = np.floor((mf - 1.0) / 2.0)
    buf = np.empty(_CHUNK)
    for e0 in range(0, x.shape[0], _CHUNK):
        e1 = min(e0 + _CHUNK, x.shape[0])
        src, dst = x[e0:e1], out[e0:e1]
        for e in range(e1 - e0):
            buf[e] = _folded(src[e], mf, minv, c32)
        for e in range(e1 - e0):
            dst[e] = _balanced(_fmod(buf[e], mf, minv), mf, half)


@njit
def _twom_kernel(xr, xi, m, s, plus, minus):  # pragma: no cover - compiled
    """``plus, minus = xr +- s*xi mod m``, balanced, chunk by chunk: one loop per chained
    reduction (with two chained in one loop, LLVM vectorises neither)."""
    mf = np.float64(m)
    minv = 1.0 / mf
    c32 = np.float64(2**32 % m)
    half = np.floor((mf - 1.0) / 2.0)
    sf = np.float64(s)
    r, t = np.empty(_CHUNK), np.empty(_CHUNK)
    for e0 in range(0, xr.shape[0], _CHUNK):
        e1 = min(e0 + _CHUNK, xr.shape[0])
        sr, si, dp, dm = xr[e0:e1], xi[e0:e1], plus[e0:e1], minus[e0:e1]
        c = e1 - e0
        for e in range(c):
            r[e] = _folded(sr[e], mf, minv, c32)
            t[e] = _folded(si[e], mf, minv, c32)
        for e in range(c):
            r[e] = _fmod(r[e], mf, minv)
            t[e] = _fmod(t[e], mf, minv) * sf
        for e in range(c):
            t[e] = _fmod(t[e], mf, minv)
        for e in range(c):
            dp[e] = _balanced(_fmod(r[e] + t[e], mf, minv), mf, half)
            dm[e] = _balanced(_fmod(r[e] - t[e], mf, minv), mf, half)


def residues(x: np.ndarray, m: int, dtype) -> np.ndarray:
    """Balanced residues (in ``[-(m//2), (m-1)//2]``) of the integer-valued float64 ``x``
    modulo ``m < 2**26``, in ``dtype`` (an engine's word type)."""
    out = np.empty(x.shape, dtype=dtype)
    src, dst = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
    each(lambda r: _residues_kernel(src[r.start:r.stop], m, dst[r.start:r.stop]), src.size)
    return out


def twom_residues(xr: np.ndarray, xi: np.ndarray, m: int, s: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """2M's images ``xr +- s*xi mod m`` (balanced, in ``dtype``) of integer-valued float64 parts."""
    plus, minus = np.empty(xr.shape, dtype=dtype), np.empty(xr.shape, dtype=dtype)
    sr, si = np.ascontiguousarray(xr).reshape(-1), np.ascontiguousarray(xi).reshape(-1)
    dp, dm = plus.reshape(-1), minus.reshape(-1)
    each(lambda r: _twom_kernel(sr[r.start:r.stop], si[r.start:r.stop], m, s, dp[r.start:r.stop], dm[r.start:r.stop]),
         sr.size, 2)
    return plus, minus


@njit
def _twom_combine_kernel(X, Y, m, inv2, inv2s, re, im):  # pragma: no cover - compiled
    mf = np.float64(m)
    minv = 1.0 / mf
    for e in range(X.shape[0]):
        re[e] = _fmod((X[e] + Y[e]) * inv2, mf, minv)  # below 2m * m < 2**53: exact
        im[e] = _fmod((X[e] - Y[e]) * inv2s, mf, minv)


def twom_combine(X: np.ndarray, Y: np.ndarray, m: int, s: int, re: np.ndarray, im: np.ndarray) -> None:
    """2M's post-processing in one pass: ``re = (X + Y)/2``, ``im = (X - Y)/(2s)`` modulo
    ``m < 2**26``, from float64 products ``X, Y`` in ``[0, m)``, into ``re`` and ``im``
    (contiguous, any dtype holding ``[0, m)``)."""
    x, y, dr, di = np.ascontiguousarray(X).reshape(-1), np.ascontiguousarray(Y).reshape(-1), re.reshape(-1), im.reshape(-1)
    inv2, inv2s = np.float64((m + 1) // 2), np.float64(pow(2 * s, -1, m))
    each(lambda r: _twom_combine_kernel(x[r.start:r.stop], y[r.start:r.stop], m, inv2, inv2s, dr[r.start:r.stop],
                                        di[r.start:r.stop]), x.size, 2)
