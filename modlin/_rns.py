"""Residue number systems: moduli, residues of integer matrices, CRT reconstruction.

An integer matrix product ``C = A B`` with ``|C| <= bound`` is computed modulo
pairwise-coprime moduli ``m_1 .. m_N`` with ``M = prod m_i >= 2*bound + 2``
and rebuilt by Garner's mixed-radix algorithm: ``C = x_1 + m_1 (x_2 + m_2 (...))``
with digits ``0 <= x_i < m_i``, shifted down by ``M`` when it exceeds ``(M-1)/2``.
The residue layer never sees a GEMM: products modulo each ``m_i`` go through
:mod:`modlin._multiword` with a plan per modulus.

Integers enter as 32-bit two's-complement limbs: an int64 matrix is viewed as
two limbs without a copy, an object array of Python ints is converted once
(one pass of ``int.to_bytes``). Residues, digits and reconstruction are numba
kernels over all entries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

__all__ = ["Basis", "int8_moduli", "limbs_of", "residues", "reconstruct"]

LIMB = 32
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


@lru_cache(maxsize=64)
def primes_below(top: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes below ``top`` (fewer if there are not that many)."""
    import galois

    out: list[int] = []
    q = top
    while len(out) < count and q > 3:
        q = int(galois.prev_prime(q - 1))
        out.append(q)
    return tuple(out)


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


# --------------------------------------------------------------------------- limbs

def limbs_of(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """``x`` (int64, uint64 or object of Python ints) as ``(limbs, signed)``.

    ``limbs`` has shape ``(x.size, L)``, dtype uint32, least significant first;
    ``signed`` says whether the top limb carries a two's-complement sign.
    """
    if x.dtype == np.int64 or x.dtype == np.uint64:
        flat = np.ascontiguousarray(x).reshape(-1)
        return flat.view(np.uint32).reshape(-1, 2), x.dtype == np.int64
    if x.dtype != object:
        raise TypeError(f"limbs_of takes int64, uint64 or object arrays, not {x.dtype}")
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.zeros((0, 1), dtype=np.uint32), True
    big = max(max(flat), -min(flat))
    nbytes = 4 * (int(big).bit_length() // LIMB + 1)
    buf = b"".join([int(v).to_bytes(nbytes, "little", signed=True) for v in flat])
    return np.frombuffer(buf, dtype=np.uint32).reshape(flat.size, nbytes // 4), True


@lru_cache(maxsize=128)
def _half_limb_powers(moduli: tuple[int, ...], nhalves: int) -> np.ndarray:
    """``pw[i, j] = 2**(16 j) mod m_i`` for ``j <= nhalves`` (the last weighs the sign)."""
    return np.array([[pow(2, 16 * j, m) for j in range(nhalves + 1)] for m in moduli], dtype=np.float64)


#: Entries processed together by the kernels below: their working set stays in cache.
CHUNK = 2048


@numba.njit(cache=True)
def _fmod(x, m, minv):  # pragma: no cover - compiled
    """``x mod m`` in ``[0, m)`` for an integer-valued float ``0 <= |x| < 2**53``.

    ``floor(x * minv)`` is the true quotient or one off (``minv = fl(1/m)``), so
    one correction each way settles the remainder; ``q * m`` stays exact.
    """
    r = x - np.floor(x * minv) * m
    r += m * (r < 0)  # branch-free, so that loops over entries vectorise
    r -= m * (r >= m)
    return r


@numba.njit(cache=True)
def _axpy(acc, h, w):  # pragma: no cover - compiled
    """``acc += h * w`` over 1-D slices (a loop from 0 vectorises; offset indices do not)."""
    for e in range(acc.shape[0]):
        acc[e] += np.float64(h[e]) * w


@numba.njit(cache=True)
def _sign_fmod(acc, top, w, m, minv, out):  # pragma: no cover - compiled
    """``out = (acc - w * [top >= 2**15]) mod m``, balanced into ``[-(m//2), (m-1)//2]``,
    over 1-D slices (``out`` in the engine's word dtype)."""
    half = np.floor((m - 1.0) / 2.0)
    for e in range(acc.shape[0]):
        r = _fmod(acc[e] - w * (top[e] >= 32768), m, minv)
        out[e] = r - m * (r > half)


@numba.njit(cache=True)
def _residues_kernel(halves, signed, moduli, pw, out):  # pragma: no cover - compiled
    """``out[i, e] = value(halves[:, e]) mod moduli[i]``, balanced: in ``[-(m_i//2), (m_i-1)//2]``.

    ``halves[j, e]`` are 16-bit pieces (least significant first, the top one
    carrying a two's-complement sign when ``signed``). Each term ``h * pw`` is
    below ``2**16 * 2**26 = 2**42``, so a sum of up to ``2**11`` of them is
    exact in float64 before the one reduction.
    """
    H, E = halves.shape
    N = moduli.shape[0]
    buf = np.empty(CHUNK)
    for e0 in range(0, E, CHUNK):
        e1 = min(E, e0 + CHUNK)
        acc = buf[: e1 - e0]
        for i in range(N):
            m = np.float64(moduli[i])
            acc[:] = 0.0
            for j in range(H):
                _axpy(acc, halves[j, e0:e1], pw[i, j])
            _sign_fmod(acc, halves[H - 1, e0:e1], pw[i, H] if signed else 0.0, m, 1.0 / m, out[i, e0:e1])


class _Halves:
    """An integer array as 16-bit pieces, ``(H, size)``, ready for residues modulo anything."""

    def __init__(self, x: np.ndarray):
        limbs, self.signed = limbs_of(x)
        self.shape = x.shape
        self.halves = np.ascontiguousarray(limbs.view(np.uint16).reshape(limbs.shape[0], 2 * limbs.shape[1]).T)
        if self.halves.shape[0] > 2**11:
            raise ValueError("integers above 32768 bits are not supported")

    def residues(self, moduli: tuple[int, ...], dtype=np.float64) -> np.ndarray:
        out = np.empty((len(moduli), self.halves.shape[1]), dtype=dtype)
        if self.halves.shape[1]:
            _residues_kernel(self.halves, self.signed, np.array(moduli, dtype=np.int64),
                             _half_limb_powers(moduli, self.halves.shape[0]), out)
        return out.reshape((len(moduli),) + self.shape)


def residues(x: np.ndarray, basis: Basis, dtype=np.float64) -> np.ndarray:
    """Balanced residues of the integer array ``x`` modulo each modulus.

    Returns shape ``(N, *x.shape)`` in ``dtype`` (the words of a GEMM engine),
    entry ``[i, ...]`` congruent to ``x`` modulo ``m_i`` and in
    ``[-(m_i//2), (m_i-1)//2]``, so that it fits the engine's words.
    """
    return _Halves(x).residues(basis.moduli, dtype)


# --------------------------------------------------------------------------- CRT

@numba.njit(cache=True)
def _garner_step(t, c, m, minv, w):  # pragma: no cover - compiled
    """``t <- ((t - c) mod m) * w mod m`` over 1-D float64 slices (vectorises)."""
    for e in range(t.shape[0]):
        t[e] = _fmod(_fmod(t[e] - c[e], m, minv) * w, m, minv)


@numba.njit(cache=True)
def _garner_kernel(x, moduli, inv):  # pragma: no cover - compiled
    """Residues ``x[i, e]`` (float64) -> mixed-radix digits, in place (Garner).

    ``x_i = (((c_i - x_0) inv_i0 - x_1) inv_i1 - ...) mod m_i``. With every
    modulus below ``2**26`` each product of two residues is below ``2**52``:
    exact in float64. Entries go in chunks so that the rows stay in cache.
    """
    N, E = x.shape
    for e0 in range(0, E, CHUNK):
        e1 = min(E, e0 + CHUNK)
        for i in range(1, N):
            m = np.float64(moduli[i])
            minv = 1.0 / m
            for j in range(i):
                _garner_step(x[i, e0:e1], x[j, e0:e1], m, minv, np.float64(inv[i, j]))


@numba.njit(cache=True)
def _negative(x, e, half):  # pragma: no cover - compiled
    """Whether the mixed-radix number ``x[:, e]`` exceeds ``(M-1)//2`` (digits ``half``)."""
    for i in range(x.shape[0] - 1, -1, -1):
        if x[i, e] != half[i]:
            return x[i, e] > half[i]
    return False


@numba.njit(cache=True)
def _to_int64_kernel(x, moduli, half, out):  # pragma: no cover - compiled
    """Signed values of mixed-radix numbers, for ``|value| < 2**63``.

    A value above ``(M-1)/2`` is ``U - M = sum (x_i - (m_i - 1)) P_i - 1``:
    Horner on those non-positive digits keeps every prefix within the result's
    magnitude, so int64 never overflows.
    """
    N, E = x.shape
    for e in range(E):
        neg = _negative(x, e, half)
        v = np.int64(0)
        for i in range(N - 1, -1, -1):
            d = np.int64(x[i, e])
            if neg:
                d -= moduli[i] - 1
            v = v * moduli[i] + d
        out[e] = v - 1 if neg else v


@numba.njit(cache=True)
def _mulmod_small(s, m, p, invp):  # pragma: no cover - compiled
    """``s * m mod p`` for uint64 ``0 <= s < p <= 2**63`` and ``0 <= m < 2**26``.

    The quotient is estimated in floating point (relative error below 2**-50 on
    a quotient below 2**26, so an absolute error below 2**-24) and biased down
    by 2**-20: it is the true quotient or one less. The remainder, computed
    modulo 2**64 with wrapping uint64 products, is then in ``[0, 2p)``.
    """
    qf = np.float64(s) * np.float64(m) * invp - 2.0**-20
    q = np.uint64(qf) if qf > 0 else np.uint64(0)
    r = s * m - q * p
    if r >= p:
        r -= p
    return r


@numba.njit(cache=True)
def _horner_modp(s, d, m, p, invp):  # pragma: no cover - compiled
    """``s <- (s * m + d) mod p`` over 1-D uint64 slices (``s < p``, ``d`` reduced below ``p``)."""
    for e in range(s.shape[0]):
        t = _mulmod_small(s[e], m, p, invp) + d[e]
        s[e] = t - p * (t >= p)


@numba.njit(cache=True)
def _to_modp_kernel(x, moduli, half, p, m_mod_p, out):  # pragma: no cover - compiled
    """Values of mixed-radix numbers modulo ``p <= 2**63``, in ``[0, p)`` (uint64 throughout:
    numba would turn mixed signed/unsigned arithmetic into floats)."""
    N, E = x.shape
    invp = 1.0 / np.float64(p)
    d = np.empty(CHUNK, dtype=np.uint64)
    for e0 in range(0, E, CHUNK):
        e1 = min(E, e0 + CHUNK)
        s = out[e0:e1]
        s[:] = 0
        dd = d[: e1 - e0]
        for i in range(N - 1, -1, -1):
            for e in range(e1 - e0):
                dd[e] = np.uint64(x[i, e0 + e]) % p if np.uint64(moduli[i]) > p else np.uint64(x[i, e0 + e])
            _horner_modp(s, dd, np.uint64(moduli[i]), p, invp)
        for e in range(e0, e1):
            if _negative(x, e, half):
                v = out[e]
                out[e] = v - m_mod_p if v >= m_mod_p else v + (p - m_mod_p)


@numba.njit(cache=True)
def _to_limbs_kernel(x, moduli, half, m_limbs, out, neg):  # pragma: no cover - compiled
    """Magnitudes of mixed-radix numbers as 32-bit limbs, signs in ``neg``."""
    N, E = x.shape
    L = out.shape[1]
    mask = np.uint64(0xFFFFFFFF)
    for e in range(E):
        for j in range(L):
            out[e, j] = 0
        for i in range(N - 1, -1, -1):
            carry = np.uint64(x[i, e])
            m = np.uint64(moduli[i])
            for j in range(L):
                t = np.uint64(out[e, j]) * m + carry
                out[e, j] = np.uint32(t & mask)
                carry = t >> np.uint64(32)
        negative = _negative(x, e, half)
        neg[e] = negative
        if negative:  # magnitude M - U
            borrow = np.int64(0)
            for j in range(L):
                t = np.int64(m_limbs[j]) - np.int64(out[e, j]) - borrow
                borrow = np.int64(1) if t < 0 else np.int64(0)
                out[e, j] = np.uint32(t + (borrow << 32))


def reconstruct(res: np.ndarray, basis: Basis, *, p: int | None = None, as_object: bool = False,
                overwrite: bool = False) -> np.ndarray:
    """Integers from their residues ``res`` (shape ``(N, ...)``, entries in ``[0, m_i)``).

    Returns the signed values (each in ``[-(M-1)/2, M/2]``) as int64, or as an
    object array of Python ints when ``as_object``; with ``p``, the values
    modulo ``p`` in ``[0, p)`` (int64 for ``p <= 2**63``, object above).
    With ``overwrite``, a float64 ``res`` is used as workspace (and destroyed).
    """
    N = len(basis.moduli)
    shape = res.shape[1:]
    moduli = np.array(basis.moduli, dtype=np.int64)
    x = res.reshape(N, -1).astype(np.float64, copy=not overwrite)
    E = x.shape[1]
    if E:
        _garner_kernel(x, moduli, basis.garner_inverses)
    half = basis.half_digits.astype(np.float64)
    if p is not None and p <= 2**63:
        out = np.empty(E, dtype=np.uint64)
        if E:
            _to_modp_kernel(x, moduli, half, np.uint64(p), np.uint64(basis.M % p), out)
        return out.view(np.int64).reshape(shape)
    if p is None and not as_object:
        out = np.empty(E, dtype=np.int64)
        if E:
            _to_int64_kernel(x, moduli, half, out)
        return out.reshape(shape)
    L = basis.M.bit_length() // LIMB + 1
    m_limbs = np.frombuffer(basis.M.to_bytes(4 * L, "little"), dtype=np.uint32).copy()
    limbs = np.empty((E, L), dtype=np.uint32)
    neg = np.empty(E, dtype=np.bool_)
    if E:
        _to_limbs_kernel(x, moduli, half, m_limbs, limbs, neg)
    raw = limbs.tobytes()
    step = 4 * L
    vals = [int.from_bytes(raw[i * step:(i + 1) * step], "little") for i in range(E)]
    out = np.empty(E, dtype=object)
    out[:] = vals
    out[neg] = -out[neg]
    if p is not None:
        out %= p
    return out.reshape(shape)


def multiply(pl, a: np.ndarray, b: np.ndarray, *, as_object: bool = False) -> np.ndarray:
    """``a @ b`` (or ``a @ b mod pl.p``) through the RNS plan ``pl`` (an :class:`RNSPlan`).

    ``a`` and ``b`` are integer arrays (int64, uint64 or object) of shapes
    ``(..., m, k)`` and ``(..., k, n)`` whose integer product is bounded by
    ``pl.bound``. Each modulus' product is one multiword plan; only the
    residues, their products and the result are allocated.
    """
    from . import _multiword
    from ._engines import get_engine

    basis = pl.basis
    dtype = get_engine(pl.engine).dtype
    ha, hb = _Halves(a), _Halves(b)
    full = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    rc = np.empty((len(basis.moduli),) + full, dtype=np.float64)
    if rc.size:
        # one modulus at a time, so only one pair of residue matrices is alive;
        # balanced residues are the single words of each modulus' (1,1)-product
        for i, sub in enumerate(pl.subplans):
            q = (basis.moduli[i],)
            _multiword.multiply_words(sub, ha.residues(q, dtype), hb.residues(q, dtype), rc[i])
    return reconstruct(rc, basis, p=pl.p, as_object=as_object, overwrite=True)
