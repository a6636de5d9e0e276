"""The base cases of :mod:`modlin.linalg` modulo primes beyond 64 bits, in compiled code.

Residues are held as ``L`` 32-bit limbs (in uint64 slots, little-endian) in Montgomery form
``x R mod p``, ``R = 2**(32 L)``; a product is one CIOS Montgomery multiplication (Koç,
Acar and Kaliski, "Analyzing and comparing Montgomery multiplication algorithms", IEEE
Micro 16(3), 1996): ``2 L**2`` 32 x 32-bit multiply-adds, each sum below ``2**64``. Inverses
are Fermat's ``x**(p-2)``, so a kernel never leaves compiled code. The object-array base
cases did one NumPy operation on Python ints per pivot, 95 % of a 127-bit ``det`` at
``n = 200`` (issue 46).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from modlin._arith.primes import is_prime
from modlin._arith.pyints import from_limbs, to_halves
from modlin._engines.jit import njit

__all__ = ["MAX_LIMBS", "fits", "to_limbs", "from_limbs32", "eliminate_big", "lower_inverse_big"]

#: The most 32-bit limbs of a modulus the kernels take (moduli below ``2**512``).
MAX_LIMBS = 16

_M32 = np.uint64(0xFFFFFFFF)


@lru_cache(maxsize=64)
def fits(p: int) -> bool:
    """Whether the kernels take the modulus ``p``: a prime (Fermat's inverses need one; so
    does Montgomery's form an odd modulus), beyond 63 bits and below ``2**512``."""
    return 2**63 <= p < 2 ** (32 * MAX_LIMBS) and is_prime(p)


@lru_cache(maxsize=32)
def constants(p: int) -> tuple[int, np.ndarray, np.uint64, np.ndarray, np.ndarray, np.ndarray]:
    """``(L, p, -p**-1 mod 2**32, R**2 mod p, R mod p, p - 2)`` as limbs, for a :func:`fits` ``p``."""
    L = -(-p.bit_length() // 32)
    R = 1 << (32 * L)

    def limbs(v: int) -> np.ndarray:
        return np.array([(v >> (32 * j)) & 0xFFFFFFFF for j in range(L)], dtype=np.uint64)

    return (L, limbs(p), np.uint64(-pow(p, -1, 2**32) % 2**32), limbs(R * R % p), limbs(R % p), limbs(p - 2))


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
    for i in range(m):
        best = -1
        first = n
        for c in range(r, n):
            if not _is_zero(a[i, c]) and cols[c] < first:
                best = c
                first = cols[c]
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


def eliminate_big(a: np.ndarray, p: int, pivot_rows: np.ndarray, cols: np.ndarray) -> int:
    """Row elimination of an object block of residues modulo a :func:`fits` ``p``, in place (as
    :func:`modlin.linalg._elimination._eliminate_object`); returns the rank."""
    L, pl, pp, r2, one, e = constants(p)
    limbs = np.ascontiguousarray(to_limbs(a, L))
    r = int(_eliminate_big(limbs, pl, pp, r2, one, e, pivot_rows, cols))
    a[...] = from_limbs32(limbs)
    return r


def lower_inverse_big(T: np.ndarray, p: int, unit: bool) -> np.ndarray:
    """The inverse of the lower triangle of an object matrix modulo a :func:`fits` ``p``."""
    L, pl, pp, r2, one, e = constants(p)
    k = T.shape[0]
    tr = np.ascontiguousarray(to_limbs(T, L))  # the strict upper triangle is never read
    x = np.zeros((k, k, L), dtype=np.uint64)
    _lower_inverse_big(tr, pl, pp, r2, one, e, unit, x)
    return from_limbs32(x)
