"""The base cases of :mod:`modlin.linalg` modulo primes beyond 64 bits, in compiled code.

Residues are held as ``L`` 32-bit limbs, little-endian. Up to :data:`PLANES_MAX_LIMBS` limbs
the blocks are limb planes (``(L, rows, cols)`` uint32, plain residues) and a row update
``row_y -= l row_i`` is one :func:`_row_op`: Montgomery's product of the multiplier's form
``l R`` with the whole row, in vector loops over the row's entries. Beyond, an entry is a
limb vector (uint64 slots) in Montgomery form ``x R mod p``, ``R = 2**(32 L)``, and a product
is one CIOS Montgomery multiplication (Koç, Acar and Kaliski, "Analyzing and comparing
Montgomery multiplication algorithms", IEEE Micro 16(3), 1996): ``2 L**2`` 32 x 32-bit
multiply-adds, each sum below ``2**64``; the CIOS products also serve the planes' scalar
work (multipliers, pivots). Inverses are Fermat's ``x**(p-2)``, so a kernel never leaves
compiled code. The object-array base cases did one NumPy operation on Python ints per
pivot, 95 % of a 127-bit ``det`` at ``n = 200`` (issue 46).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from modlin._arith.primes import is_prime
from modlin._arith.pyints import from_limbs, to_halves
from modlin._engines.jit import njit
from modlin._runtime.calibration import PLANES_MAX_LIMBS

__all__ = ["MAX_LIMBS", "fits", "limbs", "to_limbs", "from_limbs32", "to_planes", "from_planes", "eliminate_big",
           "lower_inverse_big", "lower_solve_big"]

#: The most 32-bit limbs of a modulus the kernels take (moduli below ``2**512``).
MAX_LIMBS = 16

_M32 = np.uint64(0xFFFFFFFF)


@lru_cache(maxsize=64)
def fits(p: int) -> bool:
    """Whether the kernels take the modulus ``p``: a prime (Fermat's inverses need one; so
    does Montgomery's form an odd modulus), beyond 63 bits and below ``2**512``."""
    return 2**63 <= p < 2 ** (32 * MAX_LIMBS) and is_prime(p)


def limbs(p: int) -> int:
    """How many 32-bit limbs the kernels give a residue modulo ``p``."""
    return -(-p.bit_length() // 32)


@lru_cache(maxsize=32)
def constants(p: int) -> tuple[int, np.ndarray, np.uint64, np.ndarray, np.ndarray, np.ndarray]:
    """``(L, p, -p**-1 mod 2**32, R**2 mod p, R mod p, p - 2)`` as limbs, for a :func:`fits` ``p``."""
    L = limbs(p)
    R = 1 << (32 * L)

    def as_limbs(v: int) -> np.ndarray:
        return np.array([(v >> (32 * j)) & 0xFFFFFFFF for j in range(L)], dtype=np.uint64)

    return (L, as_limbs(p), np.uint64(-pow(p, -1, 2**32) % 2**32), as_limbs(R * R % p), as_limbs(R % p),
            as_limbs(p - 2))


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
    """The inverse of :func:`to_limbs`: an object array of Python ints of shape ``a.shape[:-1]``."""
    L = a.shape[-1]
    flat = a.reshape(-1, L)
    pieces = np.empty((2 * L, flat.shape[0]), dtype=np.int64)
    pieces[0::2] = (flat & np.uint64(0xFFFF)).T
    pieces[1::2] = (flat >> np.uint64(16)).T
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
def _sub_mod(a, b, p, out):  # pragma: no cover - compiled
    """``out = a - b mod p`` for limb vectors in ``[0, p)``."""
    L = p.shape[0]
    borrow = np.uint64(0)
    for j in range(L):
        s = a[j] - b[j] - borrow
        out[j] = s & _M32
        borrow = s >> np.uint64(63)
    if borrow:
        c = np.uint64(0)
        for j in range(L):
            s = out[j] + p[j] + c
            out[j] = s & _M32
            c = s >> np.uint64(32)


@njit(inline="always")
def _is_zero(a):  # pragma: no cover - compiled
    for j in range(a.shape[0]):
        if a[j] != 0:
            return False
    return True


@njit
def _mont_inverse(a, p, pp, one, e, out, t, w):  # pragma: no cover - compiled
    """``out = a**(p-2)`` in Montgomery form (the inverse of a unit ``a``): left-to-right
    square and multiply over the bits of ``e = p - 2``; ``w``: an ``L``-limb scratch."""
    L = p.shape[0]
    for j in range(L):
        out[j] = one[j]
    for jj in range(L - 1, -1, -1):
        word = e[jj]
        for bit in range(31, -1, -1):
            _mont_mul(out, out, p, pp, out, t)
            if (word >> np.uint64(bit)) & np.uint64(1):
                _mont_mul(out, a, p, pp, out, t)
    return out


@njit
def _to_montgomery(a, p, pp, r2, t):  # pragma: no cover - compiled
    m, n, _ = a.shape
    for y in range(m):
        for c in range(n):
            _mont_mul(a[y, c], r2, p, pp, a[y, c], t)


@njit
def _from_montgomery(a, p, pp, t):  # pragma: no cover - compiled
    m, n, L = a.shape
    plain_one = np.zeros(L, dtype=np.uint64)
    plain_one[0] = 1
    for y in range(m):
        for c in range(n):
            _mont_mul(a[y, c], plain_one, p, pp, a[y, c], t)


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


@njit
def _eliminate_big(a, p, pp, r2, one, e, pivot_rows, cols):  # pragma: no cover - compiled
    """:func:`modlin.linalg._elimination._eliminate` on limb vectors (the same pivots, the same
    packed result), in Montgomery form inside."""
    m, n, L = a.shape
    t = np.zeros(L + 2, dtype=np.uint64)
    w = np.zeros(L, dtype=np.uint64)
    inv = np.zeros(L, dtype=np.uint64)
    lam = np.zeros(L, dtype=np.uint64)
    prod = np.zeros(L, dtype=np.uint64)
    tmp = np.zeros(L, dtype=np.uint64)
    _to_montgomery(a, p, pp, r2, t)
    for c in range(n):
        cols[c] = c
    r = 0
    nz = np.zeros(n, dtype=np.bool_)
    for i in range(m):
        for c in range(r, n):
            nz[c] = not _is_zero(a[i, c])
        best = _least_pivot(nz, cols, r)
        if best < 0:
            continue
        if best != r:
            for y in range(m):
                for j in range(L):
                    tmp[j] = a[y, best, j]
                    a[y, best, j] = a[y, r, j]
                    a[y, r, j] = tmp[j]
            cols[best], cols[r] = cols[r], cols[best]
        pivot_rows[r] = i
        _mont_inverse(a[i, r], p, pp, one, e, inv, t, w)
        for y in range(i + 1, m):
            if _is_zero(a[y, r]):
                continue
            _mont_mul(a[y, r], inv, p, pp, lam, t)
            for j in range(L):
                a[y, r, j] = lam[j]
            for c in range(r + 1, n):
                _mont_mul(lam, a[i, c], p, pp, prod, t)
                _sub_mod(a[y, c], prod, p, a[y, c])
        r += 1
    _from_montgomery(a, p, pp, t)
    return r


@njit
def _lower_inverse_big(tr, p, pp, r2, one, e, unit, x):  # pragma: no cover - compiled
    """:func:`modlin.linalg._elimination._lower_inverse` on limb vectors (``tr`` is
    overwritten: it is taken to Montgomery form)."""
    k, _, L = tr.shape
    t = np.zeros(L + 2, dtype=np.uint64)
    w = np.zeros(L, dtype=np.uint64)
    d = np.zeros(L, dtype=np.uint64)
    prod = np.zeros(L, dtype=np.uint64)
    _to_montgomery(tr, p, pp, r2, t)
    x[:, :, :] = 0
    for i in range(k):
        for j in range(i):
            lam = tr[i, j]
            if _is_zero(lam):
                continue
            for c in range(j + 1):
                if _is_zero(x[j, c]):
                    continue
                _mont_mul(lam, x[j, c], p, pp, prod, t)
                _sub_mod(x[i, c], prod, p, x[i, c])
        if unit:
            for j in range(L):
                x[i, i, j] = one[j]
        else:
            _mont_inverse(tr[i, i], p, pp, one, e, d, t, w)
            for c in range(i):
                _mont_mul(x[i, c], d, p, pp, x[i, c], t)
            for j in range(L):
                x[i, i, j] = d[j]
    _from_montgomery(x, p, pp, t)


# ---- row operations on limb planes: the updates of the base cases, vectorised over a row -----

_S32 = np.uint64(32)
_S63 = np.uint64(63)


@njit
def _row_op(D, yd, S, ys, lo, hi, lam, p, pp, acc, tmp, flag, mrow, subtract):  # pragma: no cover - compiled
    """``D[:, yd, lo:hi] -= lam u R**-1`` (``subtract``) or ``= lam u R**-1``, ``u = S[:, ys,
    lo:hi]``, modulo ``p``: for ``lam = l R mod p`` (Montgomery form) the plain ``l u``.

    ``D`` and ``S`` are limb planes (``(L, rows, cols)`` uint32, residues in ``[0, p)``),
    ``D`` may be ``S``. Every loop below runs over the row's entries with the limb fixed: one
    pass per limb pair, each a vector loop (uint32 operands widened to uint64 multiply as one
    32 x 32-bit product per lane). The product ``lam u`` is accumulated with its carries
    delayed (each 64-bit cell takes at most ``4 L + 2`` values below ``2**32``), then reduced
    by Montgomery's method one limb at a time (separated operand scanning), the result
    (below ``2p``) brought below ``p``, and subtracted. ``acc``: ``(2 L + 1, w)`` uint64,
    ``tmp``: ``(L, w)`` uint64, ``flag``: ``(w,)`` uint64, ``mrow``: ``(w,)`` uint32 scratch."""
    L = p.shape[0]
    w = hi - lo
    if w <= 0:
        return
    for j in range(2 * L + 1):
        aj = acc[j]
        for c in range(w):
            aj[c] = 0
    for a in range(L):
        la = lam[a]
        for b in range(L):
            src = S[b, ys, lo:hi]
            r0, r1 = acc[a + b], acc[a + b + 1]
            for c in range(w):
                prod = la * np.uint64(src[c])
                r0[c] += prod & _M32
                r1[c] += prod >> _S32
    for j in range(L):  # Montgomery: clear the low limbs, one at a time
        aj = acc[j]
        for c in range(w):
            mrow[c] = np.uint32(aj[c] & _M32) * np.uint32(pp)
        for k in range(L):
            pk = p[k]
            r0, r1 = acc[j + k], acc[j + k + 1]
            for c in range(w):
                prod = np.uint64(mrow[c]) * pk
                r0[c] += prod & _M32
                r1[c] += prod >> _S32
        nx = acc[j + 1]
        for c in range(w):
            nx[c] += aj[c] >> _S32
    for k in range(L):  # normalise the carries of the high half: the result, below 2p
        ak, nx = acc[L + k], acc[L + k + 1]
        for c in range(w):
            nx[c] += ak[c] >> _S32
            ak[c] &= _M32
    for c in range(w):
        flag[c] = 0  # the borrow of result - p
    for k in range(L):
        ak, tk, pk = acc[L + k], tmp[k], p[k]
        for c in range(w):
            d = ak[c] - pk - flag[c]
            tk[c] = d & _M32
            flag[c] = d >> _S63
    top = acc[2 * L]
    for c in range(w):
        flag[c] = 1 if top[c] != 0 or flag[c] == 0 else 0  # result >= p: take result - p
    for k in range(L):
        ak, tk = acc[L + k], tmp[k]
        for c in range(w):
            ak[c] = tk[c] if flag[c] else ak[c]
    if not subtract:
        for k in range(L):
            ak, dk = acc[L + k], D[k, yd, lo:hi]
            for c in range(w):
                dk[c] = np.uint32(ak[c])
        return
    for c in range(w):
        flag[c] = 0
    for k in range(L):  # D - result, then + p where that borrowed
        ak, dk, tk = acc[L + k], D[k, yd, lo:hi], tmp[k]
        for c in range(w):
            d = np.uint64(dk[c]) - ak[c] - flag[c]
            tk[c] = d & _M32
            flag[c] = d >> _S63
    carry = acc[0]  # free now
    for c in range(w):
        carry[c] = 0
    for k in range(L):
        dk, tk, pk = D[k, yd, lo:hi], tmp[k], p[k]
        for c in range(w):
            s = tk[c] + (pk if flag[c] else np.uint64(0)) + carry[c]
            dk[c] = np.uint32(s & _M32)
            carry[c] = s >> _S32


@njit
def _row_scratch(L, w):  # pragma: no cover - compiled
    """:func:`_row_op`'s scratch for rows of up to ``w`` entries, and ``L + 2`` limbs for the
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


@njit
def _eliminate_planes(A, p, pp, r2, one, e, pivot_rows, cols):  # pragma: no cover - compiled
    """:func:`modlin.linalg._elimination._eliminate` on limb planes ``A`` (``(L, m, n)``
    uint32, plain residues): the same pivots, the same packed result. Each row update is one
    :func:`_row_op` with the multiplier in Montgomery form."""
    L, m, n = A.shape
    acc, tmp, flag, mrow, t = _row_scratch(L, n)
    V = np.zeros((5, L), dtype=np.uint64)
    w, x, inv, inv2, lam = V[0], V[1], V[2], V[3], V[4]
    for c in range(n):
        cols[c] = c
    r = 0
    nz = np.zeros(n, dtype=np.bool_)
    for i in range(m):
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
        _mont_inverse(x, p, pp, one, e, inv, t, w)  # its inverse, Montgomery form: v**-1 R
        _mont_mul(inv, r2, p, pp, inv2, t)  # v**-1 R**2: a product with it is Montgomery's l R
        for y in range(i + 1, m):
            _load(A, y, r, x)
            if _is_zero(x):
                continue
            _mont_mul(x, inv2, p, pp, lam, t)  # l R
            _mont_mul(x, inv, p, pp, x, t)  # l
            _store(A, y, r, x)
            _row_op(A, y, A, i, r + 1, n, lam, p, pp, acc, tmp, flag, mrow, True)
        r += 1
    return r


@njit
def _lower_inverse_planes(tr, p, pp, r2, one, e, unit, x):  # pragma: no cover - compiled
    """:func:`modlin.linalg._elimination._lower_inverse` on limb planes (``(L, k, k)`` uint32,
    plain residues; ``x`` is written)."""
    L, k, _ = tr.shape
    acc, tmp, flag, mrow, t = _row_scratch(L, k)
    V = np.zeros((3, L), dtype=np.uint64)
    w, v, d = V[0], V[1], V[2]
    x[:, :, :] = 0
    for i in range(k):
        for j in range(i):
            _load(tr, i, j, v)
            if _is_zero(v):
                continue
            _mont_mul(v, r2, p, pp, v, t)
            _row_op(x, i, x, j, 0, j + 1, v, p, pp, acc, tmp, flag, mrow, True)
        if unit:
            x[0, i, i] = 1
        else:
            _load(tr, i, i, v)
            _mont_mul(v, r2, p, pp, v, t)
            _mont_inverse(v, p, pp, one, e, d, t, w)  # d R, d = t_ii**-1
            _row_op(x, i, x, i, 0, i, d, p, pp, acc, tmp, flag, mrow, False)
            for j in range(L):
                v[j] = 0
            v[0] = 1
            _mont_mul(d, v, p, pp, d, t)
            _store(x, i, i, d)


@njit
def _lower_solve_planes(tr, b, p, pp, r2, one, e, unit):  # pragma: no cover - compiled
    """``b <- t**-1 b`` in place by substitution, for the lower triangle of ``tr`` (its
    diagonal taken as ones when ``unit``): limb planes, ``tr`` ``(L, k, k)`` and ``b``
    ``(L, k, w)``; row ``i`` of ``b`` is ``t_ii**-1 (b_i - sum_j<i t_ij b_j)``, one
    :func:`_row_op` per nonzero ``t_ij``: ``k**2 w / 2`` updates."""
    L, k, _ = tr.shape
    w = b.shape[2]
    acc, tmp, flag, mrow, t = _row_scratch(L, w)
    V = np.zeros((3, L), dtype=np.uint64)
    s, v, d = V[0], V[1], V[2]
    for i in range(k):
        for j in range(i):
            _load(tr, i, j, v)
            if _is_zero(v):
                continue
            _mont_mul(v, r2, p, pp, v, t)
            _row_op(b, i, b, j, 0, w, v, p, pp, acc, tmp, flag, mrow, True)
        if not unit:
            _load(tr, i, i, v)
            _mont_mul(v, r2, p, pp, v, t)
            _mont_inverse(v, p, pp, one, e, d, t, s)
            _row_op(b, i, b, i, 0, w, d, p, pp, acc, tmp, flag, mrow, False)


def lower_solve_big(T: np.ndarray, B: np.ndarray, p: int, unit: bool) -> np.ndarray:
    """``T**-1 B`` for the lower triangle of an object matrix ``T`` and an object block ``B``
    modulo a :func:`fits` ``p``, by substitution (a new object array)."""
    L, pl, pp, r2, one, e = constants(p)
    b = to_planes(B, L)
    _lower_solve_planes(to_planes(T, L), b, pl, pp, r2, one, e, unit)
    return from_planes(b)


def to_planes(x: np.ndarray, L: int) -> np.ndarray:
    """Residues in ``[0, p)`` (an object array, 2-D) as limb planes ``(L, m, n)`` uint32."""
    return np.ascontiguousarray(to_limbs(x, L).astype(np.uint32).transpose(2, 0, 1))


def from_planes(a: np.ndarray) -> np.ndarray:
    """The inverse of :func:`to_planes`: an object array of Python ints."""
    return from_limbs32(np.ascontiguousarray(a.transpose(1, 2, 0)).astype(np.uint64))


def eliminate_big(a: np.ndarray, p: int, pivot_rows: np.ndarray, cols: np.ndarray) -> int:
    """Row elimination of an object block of residues modulo a :func:`fits` ``p``, in place (as
    :func:`modlin.linalg._elimination._eliminate_object`); returns the rank."""
    L, pl, pp, r2, one, e = constants(p)
    if L > PLANES_MAX_LIMBS:
        limbs = np.ascontiguousarray(to_limbs(a, L))
        r = int(_eliminate_big(limbs, pl, pp, r2, one, e, pivot_rows, cols))
        a[...] = from_limbs32(limbs)
        return r
    planes = to_planes(a, L)
    r = int(_eliminate_planes(planes, pl, pp, r2, one, e, pivot_rows, cols))
    a[...] = from_planes(planes)
    return r


def lower_inverse_big(T: np.ndarray, p: int, unit: bool) -> np.ndarray:
    """The inverse of the lower triangle of an object matrix modulo a :func:`fits` ``p``."""
    L, pl, pp, r2, one, e = constants(p)
    k = T.shape[0]
    if L > PLANES_MAX_LIMBS:
        limbs = np.ascontiguousarray(to_limbs(T, L))  # the strict upper triangle is never read
        out = np.zeros((k, k, L), dtype=np.uint64)
        _lower_inverse_big(limbs, pl, pp, r2, one, e, unit, out)
        return from_limbs32(out)
    tr = to_planes(T, L)  # the strict upper triangle is never read
    x = np.zeros((L, k, k), dtype=np.uint32)
    _lower_inverse_planes(tr, pl, pp, r2, one, e, unit, x)
    return from_planes(x)
