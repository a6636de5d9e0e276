"""The base cases of :mod:`modlin.linalg` modulo primes beyond 64 bits, in compiled code, and the
limb arrays its recursions keep their blocks in.

Residues are held as ``L`` 32-bit limbs, little-endian. Between base cases a working matrix
is a limb array (:func:`limb_working`): its products are :func:`limb_product`'s, from limbs to
limbs through a residue number system, so Python ints are made only where the user's arrays
enter and leave. A base case's block is limb planes (``(L, rows, cols)`` uint32, plain
residues), and the kernels compute a row at a time from the rows above it with delayed
reduction: the products of the multipliers' forms ``l R' mod p`` and the rows are summed
unreduced (:func:`_mac`), and each entry is reduced once, by Montgomery's method
(:func:`_redc_into`). Scalars (pivots, multipliers) are CIOS Montgomery products (Koç, Acar
and Kaliski, "Analyzing and comparing Montgomery multiplication algorithms", IEEE Micro
16(3), 1996) of limb vectors in Montgomery form ``x R mod p``, ``R = 2**(32 L)``; inverses are
the binary extended Euclidean algorithm's (:func:`_mont_inverse`), so a kernel never leaves
compiled code.

ns per update, elimination of a 64 x 64 block on the 2-core machine, delayed reduction against
the CIOS products one entry at a time that served beyond 8 limbs before (2026-12-07, one
run, interleaved, both with Fermat's inverses): 127-bit 28 / 93, 255-bit 100 / 220, 301-bit
131 / 256, 384-bit 213 / 524, 512-bit 474 / 947; with the binary inverses, 21 at 127 bits and
59 at 255. The object-array base cases (one NumPy operation on Python ints per pivot)
were 95 % of a 127-bit ``det`` at ``n = 200`` (issue 46).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from modlin._arith.crt import crt_weights, reconstruct_limbs
from modlin._arith.integers import residues_object
from modlin._arith.moduli import MAX_RNS_MODULUS, Basis, cover_count, primes_below
from modlin._arith.primes import is_prime
from modlin._arith.pyints import from_limbs, to_halves
from modlin._arith.residues import limb_residues, padded_rows
from modlin._engines.jit import njit
from modlin._engines.threads import region, run, slabs, workers
from modlin._runtime.calibration import LIMB_CRT, LIMB_RESIDUE, LIMB_SLAB_ROWS
from modlin._runtime.limits import current as current_limits

__all__ = ["MAX_LIMBS", "fits", "limbs", "to_limbs", "from_limbs32", "to_planes", "from_planes", "eliminate_big",
           "lower_inverse_big", "lower_solve_big", "limb_dtype", "is_limbs", "to_limb_array", "from_limb_array",
           "limb_product", "limb_tiles", "limb_negate", "limb_nonzero", "limb_working", "limb_residues_of", "plain", "values_dtype"]

#: Substitutions against at most this many columns take dot products (:func:`_lower_solve_dots`):
#: us for a 50 x 50 triangle, dots / rows, 127-bit: 76 / 209 at 1 column, 182 / 262 at 4, 321 / 306
#: at 8; 255-bit: 228 / 633, 486 / 757, 813 / 877 (one run, 2026-12-07).
DOTS_MAX_COLUMNS = 4

#: The most 32-bit limbs of a modulus the kernels take (moduli below ``2**512``).
MAX_LIMBS = 16

_M32 = np.uint64(0xFFFFFFFF)
_S1 = np.uint64(1)
_S31 = np.uint64(31)


@lru_cache(maxsize=64)
def fits(p: int) -> bool:
    """Whether the kernels take the modulus ``p``: a prime (every nonzero pivot must be a unit;
    Montgomery's form needs an odd modulus), beyond 63 bits and below ``2**512``."""
    return 2**63 <= p < 2 ** (32 * MAX_LIMBS) and is_prime(p)


def limbs(p: int) -> int:
    """How many 32-bit limbs the kernels give a residue modulo ``p``."""
    return -(-p.bit_length() // 32)


@lru_cache(maxsize=32)
def constants(p: int) -> tuple[int, np.ndarray, np.uint64, np.ndarray]:
    """``(L, p, -p**-1 mod 2**32, R**2 mod p)`` as limbs, for a :func:`fits` ``p``."""
    L = limbs(p)
    R = 1 << (32 * L)

    def as_limbs(v: int) -> np.ndarray:
        return np.array([(v >> (32 * j)) & 0xFFFFFFFF for j in range(L)], dtype=np.uint64)

    return L, as_limbs(p), np.uint64(-pow(p, -1, 2**32) % 2**32), as_limbs(R * R % p)


def to_limbs(x: np.ndarray, L: int) -> np.ndarray:
    """Residues in ``[0, p)`` (an object array of Python ints) as ``x.shape + (L,)`` uint64 limbs."""
    flat = x.reshape(-1)
    h = to_halves(flat, 2 * L + 1)
    if h is None:  # entries that are not exactly int (numpy integers in an object array)
        h = to_halves(np.array([int(v) for v in flat.tolist()] + [0], dtype=object)[:-1], 2 * L + 1)
    out = np.zeros((flat.size, L), dtype=np.uint64)
    for j in range(min(h.shape[0], 2 * L)):
        out[:, j // 2] |= h[j].astype(np.uint64) << np.uint64(16 * (j % 2))
    return out.reshape(x.shape + (L,))


def from_limbs32(a: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_limbs`: an object array of Python ints of shape ``a.shape[:-1]``
    (``a``: 32-bit limbs of any unsigned dtype, last axis). The little-endian limbs of an entry,
    read as 16-bit words, are its 16-bit pieces in order, which :func:`from_limbs` turns into ints
    straight from uint16 (from int64 pieces it went through marshal streams: 190 against 55 ns an
    entry at 127 bits)."""
    L = a.shape[-1]
    flat = np.ascontiguousarray(a.reshape(-1, L), dtype="<u4")
    pieces = np.ascontiguousarray(flat.view("<u2").T).astype(np.uint16, copy=False)
    return from_limbs(pieces).reshape(a.shape[:-1])


@njit(inline="always")
def _mont_mul(a, b, p, pp, out, t):  # pragma: no cover - compiled
    """``out = a b R**-1 mod p`` (CIOS) for limb vectors ``a, b < p``; ``t``: ``L + 2`` scratch
    slots. ``out`` may be ``a`` or ``b``."""
    L = p.shape[0]
    for j in range(L + 2):
        t[j] = 0
    for i in range(L):
        bi = b[i]
        c = np.uint64(0)
        for j in range(L):  # t += a b_i: each sum below (2**32 - 1)**2 + 2 (2**32 - 1) < 2**64
            s = t[j] + a[j] * bi + c
            t[j] = s & _M32
            c = s >> np.uint64(32)
        s = t[L] + c
        t[L] = s & _M32
        t[L + 1] = s >> np.uint64(32)
        m = (t[0] * pp) & _M32
        s = t[0] + m * p[0]  # t + m p: a multiple of 2**32, shifted down one limb
        c = s >> np.uint64(32)
        for j in range(1, L):
            s = t[j] + m * p[j] + c
            t[j - 1] = s & _M32
            c = s >> np.uint64(32)
        s = t[L] + c
        t[L - 1] = s & _M32
        t[L] = t[L + 1] + (s >> np.uint64(32))
    _reduce_once(t, p, out)


@njit(inline="always")
def _reduce_once(t, p, out):  # pragma: no cover - compiled
    """``out = t - p`` if ``t >= p`` else ``t``, for ``t < 2p`` in ``L + 1`` limbs."""
    L = p.shape[0]
    ge = t[L] != 0
    if not ge:
        ge = True
        for j in range(L - 1, -1, -1):
            if t[j] != p[j]:
                ge = t[j] > p[j]
                break
    if ge:
        borrow = np.uint64(0)
        for j in range(L):
            s = t[j] - p[j] - borrow  # wraps below zero: the top bit says so
            out[j] = s & _M32
            borrow = s >> np.uint64(63)
    else:
        for j in range(L):
            out[j] = t[j]


@njit(inline="always")
def _is_zero(a):  # pragma: no cover - compiled
    for j in range(a.shape[0]):
        if a[j] != 0:
            return False
    return True


@njit(inline="always")
def _shr1(u, top):  # pragma: no cover - compiled
    """``u <- (u + top 2**(32 L)) / 2`` for an even ``u + top 2**(32 L)`` (``top``: 0 or 1)."""
    L = u.shape[0]
    for j in range(L - 1):
        u[j] = (u[j] >> _S1) | ((u[j + 1] & _S1) << _S31)
    u[L - 1] = (u[L - 1] >> _S1) | (top << _S31)


@njit(inline="always")
def _halve_mod(x, p):  # pragma: no cover - compiled
    """``x <- x / 2 mod p`` for ``x`` in ``[0, p)``, ``p`` odd: ``x / 2``, or ``(x + p) / 2``."""
    c = np.uint64(0)
    if x[0] & _S1:
        for j in range(p.shape[0]):
            s = x[j] + p[j] + c
            x[j] = s & _M32
            c = s >> _S32
    _shr1(x, c)


@njit(inline="always")
def _geq(u, v):  # pragma: no cover - compiled
    for j in range(u.shape[0] - 1, -1, -1):
        if u[j] != v[j]:
            return u[j] > v[j]
    return True


@njit(inline="always")
def _sub_limbs(u, v):  # pragma: no cover - compiled
    """``u <- u - v`` for ``u >= v``."""
    borrow = np.uint64(0)
    for j in range(u.shape[0]):
        s = u[j] - v[j] - borrow
        u[j] = s & _M32
        borrow = s >> _S63


@njit(inline="always")
def _sub_mod(x, y, p):  # pragma: no cover - compiled
    """``x <- x - y mod p`` for ``x, y`` in ``[0, p)``."""
    borrow = np.uint64(0)
    for j in range(x.shape[0]):
        s = x[j] - y[j] - borrow
        x[j] = s & _M32
        borrow = s >> _S63
    if borrow:
        c = np.uint64(0)
        for j in range(x.shape[0]):
            s = x[j] + p[j] + c
            x[j] = s & _M32
            c = s >> _S32


@njit(inline="always")
def _is_one(u):  # pragma: no cover - compiled
    if u[0] != 1:
        return False
    for j in range(1, u.shape[0]):
        if u[j] != 0:
            return False
    return True


@njit
def _mont_inverse(a, p, pp, r2, out, t, w):  # pragma: no cover - compiled
    """``out = a**-1 R`` for the Montgomery form ``a R`` of a unit ``a`` (``out`` may not be ``a``):
    the binary extended Euclidean algorithm on the plain ``a`` (Hankerson, Menezes and Vanstone,
    "Guide to elliptic curve cryptography", algorithm 2.22), about ``2 bits`` steps of shifts
    and subtractions: 3.5 times faster than Fermat's ``a**(p-2)`` at 127 bits, whose ~190
    Montgomery products were half of a 64 x 64 block's elimination. ``w``: ``(4, L)`` scratch."""
    L = p.shape[0]
    u, v, x1, x2 = w[0], w[1], w[2], w[3]
    for j in range(L):
        x2[j] = 0
        x1[j] = 0
        v[j] = p[j]
    x1[0] = 1
    _mont_mul(a, x1, p, pp, u, t)  # the plain a
    while not _is_one(u) and not _is_one(v):
        while not u[0] & _S1:
            _shr1(u, np.uint64(0))
            _halve_mod(x1, p)
        while not v[0] & _S1:
            _shr1(v, np.uint64(0))
            _halve_mod(x2, p)
        if _geq(u, v):
            _sub_limbs(u, v)
            _sub_mod(x1, x2, p)
        else:
            _sub_limbs(v, u)
            _sub_mod(x2, x1, p)
    _mont_mul(x1 if _is_one(u) else x2, r2, p, pp, out, t)  # a**-1 R


@njit(inline="always")
def _least_pivot(nz, cols, r):  # pragma: no cover - compiled
    """The position ``c >= r`` of a nonzero entry (``nz[c]``) whose original column ``cols[c]``
    is least, -1 when there is none: the pivot rule of every elimination kernel (see
    :func:`modlin.linalg._elimination._eliminate`)."""
    best = -1
    first = cols.shape[0]
    for c in range(r, nz.shape[0]):
        if nz[c] and cols[c] < first:
            best = c
            first = cols[c]
    return best


# ---- row operations on limb planes: the updates of the base cases, vectorised over a row -----

_S32 = np.uint64(32)
_S63 = np.uint64(63)


@njit
def _montgomery_cells(acc, lo, hi, p, pp, steps, tmp, flag, mrow):  # pragma: no cover - compiled
    """``tmp[:, :w] = V 2**(-32 steps) mod p`` (``w = hi - lo``) for the sums ``V`` of :func:`_mac`
    in ``acc[:, lo:hi]``: ``steps`` steps of Montgomery's reduction (separated operand scanning,
    one limb at a time, in vector loops over the entries), the carries of the high cells
    normalised, and the result, below ``2 p`` when ``V < 2**(32 steps) p``, brought below ``p``.
    ``acc`` needs ``steps + L + 1`` cells and is left holding garbage; ``tmp`` ``(L, >= w)``,
    ``flag`` ``(>= w,)`` uint64 and ``mrow`` ``(>= w,)`` uint32 scratch."""
    L = p.shape[0]
    w = hi - lo
    for j in range(steps):  # clear the low limbs, one at a time
        aj = acc[j, lo:hi]
        for c in range(w):
            mrow[c] = np.uint32(aj[c] & _M32) * np.uint32(pp)
        for k in range(L):
            pk = p[k]
            r0, r1 = acc[j + k, lo:hi], acc[j + k + 1, lo:hi]
            for c in range(w):
                prod = np.uint64(mrow[c]) * pk
                r0[c] += prod & _M32
                r1[c] += prod >> _S32
        nx = acc[j + 1, lo:hi]
        for c in range(w):
            nx[c] += aj[c] >> _S32
    for k in range(steps, steps + L):  # the high cells: the result, normalised
        ak, nx = acc[k, lo:hi], acc[k + 1, lo:hi]
        for c in range(w):
            nx[c] += ak[c] >> _S32
            ak[c] &= _M32
    for c in range(w):
        flag[c] = 0  # the borrow of result - p
    for k in range(L):
        ak, tk, pk = acc[steps + k, lo:hi], tmp[k], p[k]
        for c in range(w):
            d = ak[c] - pk - flag[c]
            tk[c] = d & _M32
            flag[c] = d >> _S63
    top = acc[steps + L, lo:hi]
    for c in range(w):
        flag[c] = 1 if top[c] != 0 or flag[c] == 0 else 0  # result >= p: take result - p
    for k in range(L):
        ak, tk = acc[steps + k, lo:hi], tmp[k]
        for c in range(w):
            tk[c] = tk[c] if flag[c] else ak[c]


@njit
def _scale_row(D, yd, S, ys, lo, hi, lam, p, pp, acc, tmp, flag, mrow):  # pragma: no cover - compiled
    """``D[:, yd, lo:hi] = lam u R**-1 mod p``, ``u = S[:, ys, lo:hi]``: for ``lam = l R mod p``
    (Montgomery form) the plain ``l u``. ``D`` and ``S`` are limb planes (``(L, rows, cols)``
    uint32, residues in ``[0, p)``), ``D`` may be ``S``: :func:`_mac`, then ``L`` steps of
    :func:`_montgomery_cells`. ``acc``: ``(2 L + 1, w)`` uint64, ``tmp``: ``(L, w)`` uint64,
    ``flag``: ``(w,)`` uint64, ``mrow``: ``(w,)`` uint32 scratch."""
    L = p.shape[0]
    w = hi - lo
    if w <= 0:
        return
    for j in range(2 * L + 1):
        aj = acc[j]
        for c in range(w):
            aj[c] = 0
    _mac(acc, lam, S[:, :, lo:hi], ys, 0, w)
    _montgomery_cells(acc, 0, w, p, pp, L, tmp, flag, mrow)
    for k in range(L):
        tk, dk = tmp[k], D[k, yd, lo:hi]
        for c in range(w):
            dk[c] = np.uint32(tk[c])


@njit
def _row_scratch(L, w):  # pragma: no cover - compiled
    """:func:`_scale_row`'s scratch for rows of up to ``w`` entries, and ``L + 2`` limbs for the
    CIOS products: ``(acc, tmp, flag, mrow, t)``."""
    return (np.zeros((2 * L + 1, w), dtype=np.uint64), np.zeros((L, w), dtype=np.uint64),
            np.zeros(w, dtype=np.uint64), np.zeros(w, dtype=np.uint32), np.zeros(L + 2, dtype=np.uint64))


@njit(inline="always")
def _load(A, y, c, out):  # pragma: no cover - compiled
    for k in range(out.shape[0]):
        out[k] = np.uint64(A[k, y, c])


@njit(inline="always")
def _store(A, y, c, x):  # pragma: no cover - compiled
    for k in range(x.shape[0]):
        A[k, y, c] = np.uint32(x[k])


# ---- delayed reduction: sums of many products reduced once -----------------------------------
#
# A base case's entry takes many updates ``x -= l_k u_k``. Reduced one by one, each would cost a
# Montgomery reduction and a subtraction beside its product; here the products are
# accumulated unreduced in 64-bit cells (:func:`_mac`) and the sum is reduced once
# (:func:`_redc_into`): the left-looking elimination, inverse and substitution below compute a
# row at a time from the rows above it, as the row-by-row kernels did, with a third of their
# work per update (2.4x faster on 127-bit 64 x 64 blocks).


@lru_cache(maxsize=32)
def lazy_constant(p: int) -> np.ndarray:
    """``R' R mod p`` as limbs (``R = 2**(32 L)``, ``R' = 2**(32 (L + 1))``): Montgomery's product of
    ``x R`` (or plain ``x``) with it is ``x R R'`` (``x R'``), the form :func:`_mac` takes."""
    L = limbs(p)
    v = (1 << (32 * (2 * L + 1))) % p
    return np.array([(v >> (32 * j)) & 0xFFFFFFFF for j in range(L)], dtype=np.uint64)


@njit
def _mac(acc, lam, S, ys, lo, hi):  # pragma: no cover - compiled
    """``acc[:, lo:hi] += lam u`` for ``u = S[:, ys, lo:hi]`` (limb planes) and ``lam`` an ``L``-limb
    vector, unreduced: cell ``j`` of an entry holds a sum of 32-bit pieces of weight ``2**(32 j)``,
    at most ``2 L`` of them a call (below ``2**64`` for up to ``2**20`` calls on ``L <= 8``).
    No reduction: :func:`_redc_into` (or :func:`_scale_row`) makes residues of the sums."""
    L = lam.shape[0]
    w = hi - lo
    for a in range(L):
        la = lam[a] & _M32  # known below 2**32: one 32 x 32-bit vector multiply per lane
        if la == 0:
            continue
        for b in range(L):
            src = S[b, ys, lo:hi]
            r0, r1 = acc[a + b, lo:hi], acc[a + b + 1, lo:hi]
            for c in range(w):
                prod = la * np.uint64(src[c])
                r0[c] += prod & _M32
                r1[c] += prod >> _S32


@njit
def _redc_into(acc, D, yd, lo, hi, p, pp, tmp, flag, mrow):  # pragma: no cover - compiled
    """``D[:, yd, lo:hi] <- (D - V R'**-1) mod p`` for the sums ``V`` of :func:`_mac` in
    ``acc[:, lo:hi]`` (``2 L + 2`` cells, left zero), ``R' = 2**(32 (L + 1))``: ``L + 1`` steps of
    :func:`_montgomery_cells` take ``V < 2**32 R p`` below ``p`` (the sums of up to ``2**32``
    products of a residue and a form ``l R'`` below ``R p``), then a subtraction.
    Scratch as for :func:`_scale_row`."""
    L = p.shape[0]
    w = hi - lo
    if w <= 0:
        return
    _montgomery_cells(acc, lo, hi, p, pp, L + 1, tmp, flag, mrow)
    for c in range(w):
        flag[c] = 0
    for k in range(L):  # D - result, then + p where that borrowed
        dk, tk = D[k, yd, lo:hi], tmp[k]
        for c in range(w):
            d = np.uint64(dk[c]) - tk[c] - flag[c]
            tk[c] = d & _M32
            flag[c] = d >> _S63
    carry = mrow  # free now: a carry is 0 or 1
    for c in range(w):
        carry[c] = 0
    for k in range(L):
        dk, tk, pk = D[k, yd, lo:hi], tmp[k], p[k]
        for c in range(w):
            s = tk[c] + (pk if flag[c] else np.uint64(0)) + np.uint64(carry[c])
            dk[c] = np.uint32(s & _M32)
            carry[c] = np.uint32(s >> _S32)
    for j in range(2 * L + 2):
        aj = acc[j, lo:hi]
        for c in range(w):
            aj[c] = 0


@njit
def _lazy_scratch(L, w):  # pragma: no cover - compiled
    """Scratch of the delayed-reduction kernels: :func:`_row_scratch`'s, with ``2 L + 2`` zeroed cells."""
    acc, tmp, flag, mrow, t = _row_scratch(L, w)
    return np.zeros((2 * L + 2, w), dtype=np.uint64), tmp, flag, mrow, t, acc


@njit
def _diagonal_inverses(tr, p, pp, r2, t):  # pragma: no cover - compiled
    """``out[i] = t_ii**-1 R mod p`` (Montgomery forms) for the diagonal of the planes ``tr``, by
    Montgomery's trick: one inverse of the product and three products an entry."""
    L, k, _ = tr.shape
    out = np.zeros((k, L), dtype=np.uint64)
    pre = np.zeros((k, L), dtype=np.uint64)
    V = np.zeros((2, L), dtype=np.uint64)
    x, acc = V[0], V[1]
    w = np.zeros((4, L), dtype=np.uint64)
    for i in range(k):
        _load(tr, i, i, x)
        _mont_mul(x, r2, p, pp, x, t)  # x R
        if i:
            _mont_mul(pre[i - 1], x, p, pp, pre[i], t)
        else:
            for j in range(L):
                pre[0, j] = x[j]
    if k == 0:
        return out
    _mont_inverse(pre[k - 1], p, pp, r2, acc, t, w)  # (x_0 ... x_{k-1})**-1 R
    for i in range(k - 1, 0, -1):
        _mont_mul(acc, pre[i - 1], p, pp, out[i], t)
        _load(tr, i, i, x)
        _mont_mul(x, r2, p, pp, x, t)
        _mont_mul(acc, x, p, pp, acc, t)
    for j in range(L):
        out[0, j] = acc[j]
    return out


@njit
def _eliminate_lazy(A, p, pp, r2, c1, pivot_rows, cols):  # pragma: no cover - compiled
    """:func:`modlin.linalg._elimination._eliminate` on limb planes ``A`` (``(L, m, n)`` uint32,
    plain residues): the same pivots, the same packed result. Left-looking, with delayed
    reduction: row ``i`` takes every pivot row's update at once (:func:`_mac`), each of its
    entries reduced once (:func:`_redc_into`); those left of the pivots are reduced one at a
    time, in order, since each multiplier ``l_ik`` enters the entries right of it.
    ``c1``: :func:`lazy_constant`."""
    L, m, n = A.shape
    acc, tmp, flag, mrow, t, racc = _lazy_scratch(L, n)
    V = np.zeros((3, L), dtype=np.uint64)
    x, lam, inv = V[0], V[1], V[2]
    w = np.zeros((4, L), dtype=np.uint64)
    invs = np.zeros((min(m, n), 2, L), dtype=np.uint64)  # each pivot's u**-1 R and u**-1 R R'
    for c in range(n):
        cols[c] = c
    r = 0
    nz = np.zeros(n, dtype=np.bool_)
    for i in range(m):
        for k in range(r):
            _redc_into(acc, A, i, k, k + 1, p, pp, tmp, flag, mrow)  # a_ik - the updates so far
            _load(A, i, k, x)
            if _is_zero(x):
                continue
            _mont_mul(x, invs[k, 1], p, pp, lam, t)  # l R'
            _mont_mul(x, invs[k, 0], p, pp, x, t)  # l
            _store(A, i, k, x)
            if k + 1 < n:
                _mac(acc, lam, A, pivot_rows[k], k + 1, n)
        _redc_into(acc, A, i, r, n, p, pp, tmp, flag, mrow)
        for c in range(r, n):
            nz[c] = False
        for k in range(L):
            row = A[k, i]
            for c in range(r, n):
                nz[c] |= row[c] != 0
        best = _least_pivot(nz, cols, r)
        if best < 0:
            continue
        if best != r:
            for k in range(L):
                for y in range(m):
                    v = A[k, y, best]
                    A[k, y, best] = A[k, y, r]
                    A[k, y, r] = v
            cols[best], cols[r] = cols[r], cols[best]
        pivot_rows[r] = i
        _load(A, i, r, x)
        _mont_mul(x, r2, p, pp, x, t)  # the pivot in Montgomery form
        _mont_inverse(x, p, pp, r2, inv, t, w)  # u**-1 R
        for j in range(L):
            invs[r, 0, j] = inv[j]
        _mont_mul(inv, c1, p, pp, invs[r, 1], t)  # u**-1 R R'
        r += 1
    return r


@njit
def _lower_inverse_lazy(tr, p, pp, r2, c1, unit, x):  # pragma: no cover - compiled
    """:func:`modlin.linalg._elimination._lower_inverse` on limb planes (``(L, k, k)`` uint32,
    plain residues; ``x`` is written), with delayed reduction: row ``i`` of ``x`` is
    ``-t_ii**-1 sum_j<i t_ij x_j``, the sum reduced once per entry."""
    L, k, _ = tr.shape
    acc, tmp, flag, mrow, t, racc = _lazy_scratch(L, k)
    V = np.zeros((2, L), dtype=np.uint64)
    v, d = V[0], V[1]
    x[:, :, :] = 0
    inv = _diagonal_inverses(tr, p, pp, r2, t) if not unit else np.zeros((0, L), dtype=np.uint64)
    for i in range(k):
        for j in range(i):
            _load(tr, i, j, v)
            if _is_zero(v):
                continue
            _mont_mul(v, c1, p, pp, v, t)  # t_ij R'
            _mac(acc, v, x, j, 0, j + 1)
        _redc_into(acc, x, i, 0, i, p, pp, tmp, flag, mrow)
        if unit:
            x[0, i, i] = 1
        else:
            for j in range(L):
                d[j] = inv[i, j]  # d R, d = t_ii**-1
            _scale_row(x, i, x, i, 0, i, d, p, pp, racc, tmp, flag, mrow)
            for j in range(L):
                v[j] = 0
            v[0] = 1
            _mont_mul(d, v, p, pp, d, t)
            _store(x, i, i, d)


@njit
def _lower_solve_lazy(tr, b, p, pp, r2, c1, unit):  # pragma: no cover - compiled
    """``b <- t**-1 b`` in place by substitution, for the lower triangle of ``tr`` (its diagonal
    taken as ones when ``unit``): limb planes, ``tr`` ``(L, k, k)`` and ``b`` ``(L, k, w)``. Row
    ``i`` of ``b`` is ``t_ii**-1 (b_i - sum_j<i t_ij b_j)``, the sum of all rows above it
    reduced once per entry: ``k**2 w / 2`` products."""
    L, k, _ = tr.shape
    wd = b.shape[2]
    acc, tmp, flag, mrow, t, racc = _lazy_scratch(L, wd)
    V = np.zeros((2, L), dtype=np.uint64)
    v, d = V[0], V[1]
    inv = _diagonal_inverses(tr, p, pp, r2, t) if not unit else np.zeros((0, L), dtype=np.uint64)
    for i in range(k):
        for j in range(i):
            _load(tr, i, j, v)
            if _is_zero(v):
                continue
            _mont_mul(v, c1, p, pp, v, t)
            _mac(acc, v, b, j, 0, wd)
        if i:
            _redc_into(acc, b, i, 0, wd, p, pp, tmp, flag, mrow)
        if not unit:
            for j in range(L):
                d[j] = inv[i, j]
            _scale_row(b, i, b, i, 0, wd, d, p, pp, racc, tmp, flag, mrow)


@njit
def _lower_solve_dots(tr, b, p, pp, r2, c1, unit):  # pragma: no cover - compiled
    """:func:`_lower_solve_lazy` for a few columns: entry ``(i, c)`` of ``b`` takes the dot product
    ``sum_j<i t_ij b_jc`` in vector loops over ``j`` (the row kernels' loops over ``b``'s columns
    would be one entry long), from the finished ``b_jc`` in the form ``b_jc R'``, summed unreduced
    and reduced once."""
    L, k, _ = tr.shape
    wd = b.shape[2]
    acc, tmp, flag, mrow, t, racc = _lazy_scratch(L, k)
    cells = np.zeros((2 * L + 2, 1), dtype=np.uint64)
    x = np.zeros(L, dtype=np.uint64)
    col = np.zeros((L, k), dtype=np.uint32)  # the column's finished entries, in the form b R'
    one32 = np.zeros((L, 1, 1), dtype=np.uint32)
    inv = _diagonal_inverses(tr, p, pp, r2, t) if not unit else np.zeros((0, L), dtype=np.uint64)
    for c in range(wd):
        for i in range(k):
            if i:
                for a in range(L):  # the products t_ij (b_j R'), all j < i, cell by cell
                    ta = tr[a, i, :i]
                    for bb in range(L):
                        cb = col[bb, :i]
                        r0, r1 = acc[a + bb, :i], acc[a + bb + 1, :i]
                        for j in range(i):
                            prod = np.uint64(ta[j]) * np.uint64(cb[j])
                            r0[j] += prod & _M32
                            r1[j] += prod >> _S32
                for q in range(2 * L + 2):
                    aq = acc[q, :i]
                    tot = np.uint64(0)
                    for j in range(i):
                        tot += aq[j]
                        aq[j] = 0
                    cells[q, 0] = tot
                one32[:, 0, 0] = b[:, i, c]
                _redc_into(cells, one32, 0, 0, 1, p, pp, tmp, flag, mrow)
                for q in range(L):
                    b[q, i, c] = one32[q, 0, 0]
            _load(b, i, c, x)
            if not unit:
                _mont_mul(x, inv[i], p, pp, x, t)  # x d
                _store(b, i, c, x)
            _mont_mul(x, c1, p, pp, x, t)  # x R'
            for q in range(L):
                col[q, i] = np.uint32(x[q])


def lower_solve_big(T: np.ndarray, B: np.ndarray, p: int, unit: bool) -> np.ndarray:
    """``T**-1 B`` for the lower triangle of ``T`` and a block ``B`` (object or limb arrays)
    modulo a :func:`fits` ``p``, by substitution (a new array like ``B``)."""
    L, pl, pp, r2 = constants(p)
    b = _planes(B, L)
    solve = _lower_solve_dots if b.shape[2] <= DOTS_MAX_COLUMNS else _lower_solve_lazy
    solve(_planes(T, L), b, pl, pp, r2, lazy_constant(p), unit)
    return _unplanes(b, B)


def to_planes(x: np.ndarray, L: int) -> np.ndarray:
    """Residues in ``[0, p)`` (an object array, 2-D) as limb planes ``(L, m, n)`` uint32."""
    return np.ascontiguousarray(to_limbs(x, L).astype(np.uint32).transpose(2, 0, 1))


def from_planes(a: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_planes`: an object array of Python ints."""
    return from_limbs32(a.transpose(1, 2, 0))


def _planes(x: np.ndarray, L: int) -> np.ndarray:
    """Limb planes of an object or a limb array (a new array)."""
    return np.ascontiguousarray(x["l"].transpose(2, 0, 1)) if is_limbs(x) else to_planes(x, L)


def _unplanes(planes: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Limb planes back as an array of ``like``'s kind (a new array)."""
    if not is_limbs(like):
        return from_planes(planes)
    out = np.empty(planes.shape[1:], dtype=like.dtype)
    out["l"] = planes.transpose(1, 2, 0)
    return out


def eliminate_big(a: np.ndarray, p: int, pivot_rows: np.ndarray, cols: np.ndarray) -> int:
    """Row elimination of a block of residues (an object or a limb array) modulo a :func:`fits`
    ``p``, in place (as :func:`modlin.linalg._elimination._eliminate_object`); returns the rank."""
    L, pl, pp, r2 = constants(p)
    planes = _planes(a, L)
    r = int(_eliminate_lazy(planes, pl, pp, r2, lazy_constant(p), pivot_rows, cols))
    a[...] = _unplanes(planes, a)
    return r


def lower_inverse_big(T: np.ndarray, p: int, unit: bool) -> np.ndarray:
    """The inverse of the lower triangle of ``T`` (an object or a limb array) modulo a
    :func:`fits` ``p``, an array of the same kind."""
    L, pl, pp, r2 = constants(p)
    k = T.shape[0]
    tr = _planes(T, L)  # the strict upper triangle is never read
    x = np.zeros((L, k, k), dtype=np.uint32)
    _lower_inverse_lazy(tr, pl, pp, r2, lazy_constant(p), unit, x)
    return _unplanes(x, T)


# ---- limb arrays: the working matrices of the big-prime recursions ------------------------------
#
# A limb array is a 2-D array of a structured dtype with one field, ``l``: the ``L`` 32-bit limbs
# of a residue in [0, p). It slices, permutes and copies as the 2-D array it is (the recursions
# need nothing else of their blocks), and ``x["l"]`` is its ``(rows, cols, L)`` uint32 view, which
# the kernels read and write: the blocks stay limbs from the first product to the last, and Python
# ints are made only where the user's arrays enter and leave.


@lru_cache(maxsize=16)
def limb_dtype(L: int) -> np.dtype:
    """The dtype of a limb array of ``L`` limbs."""
    return np.dtype([("l", np.uint32, (L,))])


def is_limbs(x: np.ndarray) -> bool:
    """Whether ``x`` is a limb array."""
    return x.dtype.names == ("l",)


def to_limb_array(x: np.ndarray, p: int) -> np.ndarray:
    """Residues in ``[0, p)`` (an object array of Python ints) as a new limb array, for a :func:`fits` ``p``."""
    L = limbs(p)
    h = to_halves(x, 2 * L + 1) if x.size else None
    if h is None:  # empty, or entries that are not exactly int (numpy integers in an object array)
        out = np.empty(x.shape, dtype=limb_dtype(L))
        if x.size:
            out["l"] = to_limbs(x, L)
        return out
    return _from_pieces(h, x.shape, L)


def _from_pieces(h: np.ndarray, shape: tuple[int, ...], L: int) -> np.ndarray:
    """A limb array of ``shape`` from the two's-complement pieces ``h`` (``(H, size)``, ``H <= 2 L + 1``)
    of values in ``[0, 2**(32 L))``: the pieces past ``2 L`` are their zero signs, and the 16-bit
    pieces of an entry, side by side, are its little-endian 32-bit limbs."""
    out = np.empty(shape, dtype=limb_dtype(L))
    wide = np.zeros((h.shape[1], 2 * L), dtype=np.uint16)
    wide[:, :min(h.shape[0], 2 * L)] = h[:2 * L].T
    out.reshape(-1)["l"] = wide.view(np.uint32)
    return out


@njit
def _residues_already(h, ph):  # pragma: no cover - compiled
    """Whether every entry of the two's-complement pieces ``h`` (``(H, size)``) lies in ``[0, p)``,
    ``ph`` the ``H`` pieces of ``p``: a comparison from the top piece down."""
    H, E = h.shape
    for e in range(E):
        if h[H - 1, e] >= 32768:
            return False
        below = False
        for j in range(H - 1, -1, -1):
            if h[j, e] != ph[j]:
                below = h[j, e] < ph[j]
                break
        if not below:
            return False
    return True


def limb_residues_of(x, p: int, name: str) -> np.ndarray:
    """The residues of the integers ``x`` modulo a :func:`fits` ``p`` as a new limb array: the
    working copy of the big-prime functions that keep their blocks in limbs. Python ints already
    in ``[0, p)`` (what users of modular matrices pass) become limbs straight from their pieces, with
    no Python arithmetic; anything else through :func:`modlin._arith.integers.residues_object`,
    whose errors it raises. ``x`` is never modified."""
    L = limbs(p)
    a = np.asarray(x)
    if a.dtype == object and a.size:
        h = to_halves(a, 2 * L + 1)
        if h is not None:
            ph = np.array([(p >> (16 * j)) & 0xFFFF for j in range(h.shape[0])], dtype=np.uint16)
            if _residues_already(h, ph):
                return _from_pieces(h, a.shape, L)
    return to_limb_array(residues_object(x, p, name), p)


def from_limb_array(x: np.ndarray) -> np.ndarray:
    """A limb array's residues as an object array of Python ints."""
    if x.size == 0:
        return np.zeros(x.shape, dtype=object)
    return from_limbs32(x["l"])


def limb_working(W: np.ndarray, p: int) -> np.ndarray:
    """A working matrix as a limb array where the big-prime kernels take ``p`` (an object ``W``
    modulo a :func:`fits` ``p``), else ``W`` itself: the recursions then keep their blocks in
    limbs (see :func:`limb_product`)."""
    return to_limb_array(W, p) if W.dtype == object and fits(p) else W


def values_dtype(W: np.ndarray) -> np.dtype:
    """The dtype of the residues a working matrix ``W`` gives back: object for a limb array."""
    return np.dtype(object) if is_limbs(W) else W.dtype


def plain(x: np.ndarray) -> np.ndarray:
    """A limb array's residues as Python ints (an object array), anything else as it is."""
    return from_limb_array(x) if is_limbs(x) else x


def limb_nonzero(x: np.ndarray) -> np.ndarray:
    """``x != 0`` for a limb array."""
    return (x["l"] != 0).any(axis=-1)


def limb_negate(x: np.ndarray, p: int) -> np.ndarray:
    """``-x mod p`` for a limb array, as a new one."""
    out = np.zeros(x.shape, dtype=x.dtype)
    if x.size:
        _negate_limbs(x["l"], constants(p)[1], out["l"])
    return out


@njit
def _negate_limbs(x, p, out):  # pragma: no cover - compiled
    m, n, L = x.shape
    for r in range(m):
        for c in range(n):
            nz = False
            for j in range(L):
                nz |= x[r, c, j] != 0
            if nz:
                borrow = np.uint64(0)
                for j in range(L):
                    s = p[j] - np.uint64(x[r, c, j]) - borrow
                    out[r, c, j] = np.uint32(s & _M32)
                    borrow = s >> np.uint64(63)


@lru_cache(maxsize=64)
def product_basis(p: int, depth: int) -> tuple[Basis, np.ndarray, np.ndarray]:
    """The moduli of :func:`limb_product` for products of up to ``2**depth`` terms modulo ``p``,
    the weights ``2**(16 j) mod m_i`` of the halves of ``L`` limbs, and those weights times the
    CRT's ``w_i`` (:func:`modlin._arith.crt.crt_weights`), with which the left operand's residues
    carry the CRT's weight at no cost.

    One GEMM per modulus: a sum of ``k`` products of balanced residues is below
    ``k ((m - 1) / 2)**2 <= 2**53`` for the moduli below ``2 sqrt(2**53 / k) + 1`` (24 bits at
    ``k = 128``), the largest primes there, as many as cover ``k (p - 1)**2`` (entries in
    ``[0, p)``) with the CRT's margin."""
    k = 1 << depth
    top = min(MAX_RNS_MODULUS, 2 * math.isqrt(2**53 // k) + 1)
    bound = k * (p - 1) ** 2
    pool = primes_below(top, 4 * bound.bit_length() // max(top.bit_length() - 2, 1) + 8)
    basis = Basis(pool[:cover_count(pool, bound)])
    L = limbs(p)
    cw = crt_weights(basis.moduli)
    w = np.array([[pow(2, 16 * j, q) for j in range(2 * L)] for q in basis.moduli], dtype=np.float64)
    wa = np.array([[pow(2, 16 * j, q) * int(c) % q for j in range(2 * L)] for q, c in zip(basis.moduli, cw)],
                  dtype=np.float64)
    return basis, w, wa


def limb_tiles(m: int, k: int, n: int, N: int, memory: int) -> tuple[int, int, int]:
    """``(mt, kt, nt)``: the tiles of :func:`limb_product` whose float64 residues and products,
    ``8 N (mt kt + kt nt + mt nt)`` bytes, keep within ``memory`` (the largest dimension halved
    until they do; at least one entry each)."""
    t = [m, k, n]
    while 8 * N * (t[0] * t[1] + t[1] * t[2] + t[0] * t[2]) > memory and max(t) > 1:
        i = t.index(max(t))
        t[i] = -(-t[i] // 2)
    return t[0], t[1], t[2]


def limb_product(a: np.ndarray, b: np.ndarray, p: int, out: np.ndarray, *, subtract: bool = False) -> None:
    """``out = a @ b mod p`` (or ``out <- out - a @ b mod p`` with ``subtract``) for limb arrays
    (blocks of larger ones: any strides), in a residue number system of moduli below ``2**26``
    (:func:`product_basis`): the residues straight from the limbs (:func:`limb_residues`), one
    float64 GEMM per modulus, and the CRT straight back to limbs modulo ``p``, subtracted where
    it is stored (:func:`modlin._arith.crt.reconstruct_limbs`). No Python int is made, and no
    plan: the big-prime recursions' products are many and small (the object route's conversions
    and planning were three quarters of a 127-bit ``det`` at ``n = 200``).

    Within the memory budget of :func:`modlin.limits`: beyond it the product runs in tiles
    (:func:`limb_tiles`), each tile of the inner dimension subtracted in turn (a product into
    ``out`` is then ``-(0 - a @ b)``)."""
    (m, k), n = a.shape, b.shape[1]
    if m * n == 0:
        return
    if k == 0:
        if not subtract:
            out["l"][...] = 0
        return
    basis, w, wa = product_basis(p, max(k - 1, 0).bit_length())
    N = len(basis.moduli)
    mt, kt, nt = limb_tiles(m, k, n, N, current_limits().memory)
    if kt < k and not subtract:
        out["l"][...] = 0
    for r0 in range(0, m, mt):
        for c0 in range(0, n, nt):
            o = out[r0:r0 + mt, c0:c0 + nt]
            for k0 in range(0, k, kt):
                _limb_tile(a[r0:r0 + mt, k0:k0 + kt], b[k0:k0 + kt, c0:c0 + nt], p, basis, w, wa, o,
                           subtract or kt < k)
    if kt < k and not subtract:
        _negate_limbs(out["l"], constants(p)[1], out["l"])


def _limb_tile(a: np.ndarray, b: np.ndarray, p: int, basis: Basis, w: np.ndarray, wa: np.ndarray,
               out: np.ndarray, subtract: bool) -> None:
    """One tile of :func:`limb_product` (``basis`` chosen for the whole inner dimension; ``a``'s
    residues with the CRT's weights in, ``wa``).

    ``b``'s residues are split between the workers; then each worker takes a slab of ``a``'s
    rows through everything: their residues, their ``N`` GEMMs on one BLAS thread, and the CRT
    of their rows of the result. A result wider than tall is made as its transpose, so that
    the slabs are of its longer side. No GEMM runs on BLAS' threads, so no BLAS worker is left
    spinning beside the residues and CRT that follow a GEMM, as it did when the GEMMs ran on
    BLAS' two threads between passes split in two (2**127 - 1 at n = 1000, medians of 7
    interleaved runs: det 0.74 s against 0.89, solve 0.77 against 0.89; the small products
    of the recursions' lower levels, half of their product time, are mostly residues and CRT).
    """
    (m, k), n = a.shape, b.shape[1]
    if n > m:  # C.T = B.T A.T: the same residues, weights and CRT (the weights go with the left side)
        a, b, out = b.T, a.T, out.T
        m, n = n, m
    N = len(basis.moduli)
    q = np.array(basis.moduli, dtype=np.int64)
    ra, rb, rc = padded_rows(N, m * k, np.float64), padded_rows(N, k * n, np.float64), padded_rows(N, m * n, np.float64)
    va, vb, vc = ra[:, :m * k].reshape(N, m, k), rb[:, :k * n].reshape(N, k, n), rc[:, :m * n].reshape(N, m, n)
    la, lb, lo = a["l"], b["l"], out["l"]
    L = la.shape[2]

    def b_part(sl: slice) -> None:
        limb_residues(lb[sl], w, q, rb, sl.start * n, np.empty((2 * L, n)))

    def slab(sl: slice) -> None:
        limb_residues(la[sl], wa, q, ra, sl.start * k, np.empty((2 * L, k)))
        for i in range(N):
            np.matmul(va[i, sl], vb[i], out=vc[i, sl])
        reconstruct_limbs(rc[:, sl.start * n:sl.stop * n], basis, p, lo[sl], subtract=subtract, weighted=True)

    run(b_part, slabs(k, workers(k * n * N * LIMB_RESIDUE, k)))
    t = workers(N * (m * k * n + m * k * LIMB_RESIDUE + m * n * LIMB_CRT), m // LIMB_SLAB_ROWS)
    with region(t):
        run(slab, slabs(m, t))
