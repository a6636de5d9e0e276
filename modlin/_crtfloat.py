"""CRT reconstruction straight to correctly rounded doubles.

Ozaki-II recovers the integer product ``C' = A'B'`` (up to ``M/2`` in magnitude,
far beyond 53 bits) from its residues and returns ``C' * 2**-S`` for a
per-entry power of two ``S``. Here each entry is rebuilt exactly, as 32-bit
limbs, by Garner's mixed-radix digits, and then rounded once, to nearest with
ties to even, at the precision the result has (53 bits, fewer where it is
subnormal; infinity past the largest double). Nothing is rounded before that
last step, so the float result is the correctly rounded value of the exact
scaled integer product.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from ._pyints import _bit_length
from ._rns import CHUNK, Basis, _garner_step
from ._threads import each

__all__ = ["to_double"]


@njit(inline="always")
def _round_limbs(limb, nl, S):  # pragma: no cover - compiled
    """``value(limb[:nl]) * 2**-S`` rounded to the nearest double (ties to even)."""
    j = nl - 1
    while j >= 0 and limb[j] == 0:
        j -= 1
    if j < 0:
        return 0.0
    nb = 32 * j + _bit_length(limb[j])
    E = nb - 1 - S  # the exponent of the leading bit of the result
    keep = 53 if E >= -1022 else E + 1075  # bits a subnormal result holds
    if keep < 0:
        return 0.0
    # the leading 64 bits as `top`, and whether any bit below them is set
    sticky = False
    if nb <= 64:
        top = limb[0] | (limb[1] << np.uint64(32)) if j >= 1 else limb[0]
        top <<= np.uint64(64 - nb)
    else:
        lo = nb - 64
        w = lo // 32
        off = np.uint64(lo % 32)
        top = (limb[w] >> off) | (limb[w + 1] << (np.uint64(32) - off))
        if off:
            top |= limb[w + 2] << (np.uint64(64) - off)
            sticky = (limb[w] & ((np.uint64(1) << off) - np.uint64(1))) != 0
        for i in range(w):
            sticky = sticky or limb[i] != 0
    if keep == 0:  # between 2**-1075 and 2**-1074: up unless exactly the tie
        rest = top & np.uint64(0x7FFFFFFFFFFFFFFF)
        return 5e-324 if (rest != 0 or sticky) else 0.0
    drop = np.uint64(64 - keep)
    q = top >> drop
    rem = top & ((np.uint64(1) << drop) - np.uint64(1))
    half = np.uint64(1) << (drop - np.uint64(1))
    if rem > half or (rem == half and (sticky or (q & np.uint64(1)))):
        q += np.uint64(1)
    return np.ldexp(np.float64(q), nb - keep - S)


@njit
def _exact_entry(buf, e, neg, moduli, limb, S):  # pragma: no cover - compiled
    """The correctly rounded ``value * 2**-S`` of the mixed-radix digits ``buf[:, e]`` (a
    magnitude; with ``neg`` the complemented value's), through exact 32-bit limbs."""
    N = buf.shape[0]
    mask = np.uint64(0xFFFFFFFF)
    limb[:] = 0
    nl = 1
    for i in range(N - 1, -1, -1):  # value = value * m_i + x_i
        m = np.uint64(moduli[i])
        carry = np.uint64(buf[i, e])
        if neg:
            carry = m - np.uint64(1) - carry + np.uint64(i == 0)
        for t in range(nl):
            v = limb[t] * m + carry
            limb[t] = v & mask
            carry = v >> np.uint64(32)
        if carry:
            limb[nl] = carry
            nl += 1
    return _round_limbs(limb, nl, S)


@njit
def _to_double_kernel(res, lo_e, hi_e, moduli, inv, half, sa, sb, out):  # pragma: no cover - compiled
    """``out[i, j] = round(C'_ij * 2**-(sa_i + sb_j))`` from residues ``res[:, i*n + j]``,
    for the flat entries ``lo_e <= i*n + j < hi_e``.

    Per chunk, in loops that vectorise: Garner digits; the sign (digits above
    those of ``(M-1)/2``); the magnitude in double-double by Horner on the
    digits, complemented for a negative value (``M - U = sum((m_i - 1 - x_i) P_i) + 1``),
    with exact products (Dekker's split: 26-bit halves times moduli below
    ``2**26``). Its high part is the correctly rounded magnitude unless the exact
    value may lie across a rounding boundary (within the error bound), or the
    result is subnormal: those rare entries are left NaN (never a result here: the
    values are finite integers), counted in the return value, for :func:`_exact_entries`
    to rebuild exactly in limbs. (A separate kernel, compiled only when some entry needs
    it: the exact path is most of this one's code.)
    """
    N = res.shape[0]
    n = sb.shape[0]
    buf = np.empty((N, CHUNK))
    hi = np.empty(CHUNK)
    lo = np.empty(CHUNK)
    sgn = np.empty(CHUNK)
    rel = (N + 2) * 2.0**-100  # bound on the double-double's relative error
    exact = 0
    row, col = lo_e // n, lo_e % n
    for e0 in range(lo_e, hi_e, CHUNK):
        e1 = min(hi_e, e0 + CHUNK)
        c = e1 - e0
        for i in range(N):
            for e in range(c):
                buf[i, e] = res[i, e0 + e]
        for i in range(1, N):
            mf = np.float64(moduli[i])
            for j in range(i):
                _garner_step(buf[i, :c], buf[j, :c], mf, 1.0 / mf, np.float64(inv[i, j]))
        # sign: compare the digits with those of (M-1)/2 from the top (0: equal so far)
        sgn[:c] = 0.0
        for i in range(N - 1, -1, -1):
            h = half[i]
            for e in range(c):
                x = buf[i, e]
                d = (1.0 if x > h else 0.0) - (1.0 if x < h else 0.0)  # selects: they vectorise
                sgn[e] = d if sgn[e] == 0.0 else sgn[e]
        for e in range(c):
            ng = sgn[e] > 0.0
            mtop = np.float64(moduli[N - 1])
            hi[e] = buf[N - 1, e] + ((mtop - 1.0 - 2.0 * buf[N - 1, e] + (N == 1)) if ng else 0.0)
            lo[e] = 0.0
        for i in range(N - 2, -1, -1):
            mf = np.float64(moduli[i])
            one = 1.0 * (i == 0)
            for e in range(c):
                ng = sgn[e] > 0.0
                d = buf[i, e] + ((mf - 1.0 - 2.0 * buf[i, e] + one) if ng else 0.0)
                x = hi[e]
                t = 134217729.0 * x  # Dekker: x = x1 + x2, x1 with 26 bits, so x1*mf is exact
                x1 = t - (t - x)
                p1 = x1 * mf
                p2 = (x - x1) * mf
                s = p1 + p2  # TwoSum
                bb = s - p1
                err = (p1 - (s - bb)) + (p2 - bb)
                q = err + lo[e] * mf + d
                h2 = s + q  # FastTwoSum (|s| >= |q|)
                lo[e] = q - (h2 - s)
                hi[e] = h2
        for e in range(c):
            # every value within twice the error bound of hi + lo rounds to hi (rounding is
            # monotone, so checking both ends suffices): hi is the rounded magnitude
            h, lw = hi[e], lo[e]
            d = 2.0 * rel * h
            unsure = (h + (lw + d) != h) | (h + (lw - d) != h)
            sgn[e] = (1.0 if sgn[e] > 0.0 else 0.0) + (2.0 if unsure else 0.0)
        for e in range(c):
            S = sa[row] + sb[col]
            flag = sgn[e]
            ng = flag == 1.0 or flag == 3.0
            v = math.ldexp(hi[e], -S)
            # unsure, or at most 2**-1022: hi was rounded to 53 bits and ldexp would round a
            # subnormal again (even up to exactly 2**-1022), so those are rounded once, exactly
            if flag >= 2.0 or (v <= 2.2250738585072014e-308 and hi[e] != 0.0):
                out[e0 + e] = np.nan
                exact += 1
            else:
                out[e0 + e] = -v if ng else v
            col += 1
            if col == n:
                row, col = row + 1, 0
    return exact


@njit
def _exact_entries(res, moduli, inv, half, L, sa, sb, idx, out):  # pragma: no cover - compiled
    """``out[e]`` for the entries ``e`` in ``idx`` that :func:`_to_double_kernel` left to the
    exact path: the Garner digits and the sign of each, as that kernel computes them
    (the same operations on one entry), then the value rebuilt in 32-bit limbs and
    rounded once (:func:`_exact_entry`)."""
    N = res.shape[0]
    n = sb.shape[0]
    buf = np.empty((N, 1))
    limb = np.zeros(L + 2, dtype=np.uint64)  # two spare limbs: the rounding reads past the top
    for t in range(idx.shape[0]):
        e = idx[t]
        for i in range(N):
            buf[i, 0] = res[i, e]
        for i in range(1, N):
            mf = np.float64(moduli[i])
            for j in range(i):
                _garner_step(buf[i, :1], buf[j, :1], mf, 1.0 / mf, np.float64(inv[i, j]))
        sgn = 0.0
        for i in range(N - 1, -1, -1):
            x = buf[i, 0]
            h = half[i]
            d = (1.0 if x > h else 0.0) - (1.0 if x < h else 0.0)
            sgn = d if sgn == 0.0 else sgn
        ng = sgn > 0.0
        v = _exact_entry(buf, 0, ng, moduli, limb, sa[e // n] + sb[e % n])
        out[e] = -v if ng else v


def to_double(res: np.ndarray, basis: Basis, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """The correctly rounded doubles ``C'_ij * 2**-(sa_i + sb_j)`` of the integers ``C'``
    (``|C'| <= (M-1)/2``) whose residues are ``res`` (shape ``(N, m, n)``, entries in
    ``[0, m_i)``, any integer or float dtype)."""
    N, m, n = res.shape
    L = basis.M.bit_length() // 32 + 1
    out = np.empty(m * n)
    if out.size:
        args = (res.reshape(N, -1), np.array(basis.moduli, dtype=np.int64), basis.garner_inverses,
                basis.half_digits.astype(np.float64))
        sa, sb = np.asarray(sa, dtype=np.int64), np.asarray(sb, dtype=np.int64)
        flat = args[0]
        unsure = each(lambda r: _to_double_kernel(flat, r.start, r.stop, *args[1:], sa, sb, out), out.size,
                      3 * len(basis.moduli))
        if any(unsure):
            _exact_entries(*args, L, sa, sb, np.flatnonzero(np.isnan(out)), out)
    return out.reshape(m, n)
