"""The characteristic polynomial over Z: multimodular, with the Krylov work of every prime in
one float64 GEMM per step.

Modulo a prime ``p``, the sequence ``s_i = u^T A^i v mod p`` (``i < 2n``, random ``u`` and
``v``) has a minimal polynomial ``f_p``, found by the Berlekamp-Massey algorithm from its
``2n`` terms (the sequence satisfies the recurrence of ``det(x I - A)``, of order ``n``, so
``2n`` terms determine it). ``f_p`` divides the minimal polynomial of ``A``, which divides
``det(x I - A)``; when ``deg f_p = n`` the two monic polynomials are equal, so ``f_p`` *is*
the characteristic polynomial modulo ``p``, whatever ``u`` and ``v`` were. The randomness
only decides how often that happens (almost always, when ``A`` is cyclic, i.e. its minimal
and characteristic polynomials agree); a prime where it does not gets the characteristic
polynomial modulo ``p`` from :func:`modlin.linalg.charpoly` instead.

The point is the vectors ``x_i = A^i v``: ``A``'s entries are the same integers modulo every
prime, so the ``x_i`` of all primes, as the columns of one ``n x P`` matrix ``X`` of balanced
residues, advance by one GEMM ``A @ X`` and a reduction of each column modulo its prime. The
GEMM is exact in float64 when ``n * max|A| * (p - 1) / 2 <= 2**52`` (headroom for the
reduction's multiple of ``p``); larger entries are cut into pieces
``A = sum_t 2**(c t) A_t`` with ``|A_t| < 2**c``, one GEMM each, whose reduced products
are recombined by Horner's rule in float64 (``c + bits <= 52`` keeps that exact). One
prime at a time, the same work would be ``2n`` matrix-vector products per prime, far below
GEMM speed.

Cost: ``2n`` steps of ``T n**2 P`` multiply-adds (``T`` pieces, ``P`` primes, about
``bits / log2 p`` of them for a coefficient bound of ``bits`` bits), then ``P``
Berlekamp-Massey runs of about ``4 n**2`` modular products and the CRT of ``n + 1``
coefficients. Certified: the answer is the CRT of the exact polynomials modulo primes whose
product exceeds twice :func:`charpoly_bound`.
"""

from __future__ import annotations

import math
import random

import numpy as np

from modlin._arith.crt import crt_rows
from modlin._arith.integers import max_abs
from modlin._arith.modular import mulmod1
from modlin._arith.primes import is_prime
from modlin._engines.jit import njit
from modlin._engines.threads import each_row, region, run, slabs, workers
from modlin._runtime.calibration import HESSENBERG_MAX_N, KERNEL_UPDATE
from modlin._runtime.limits import current as current_limits
from modlin.linalg._arith import inverse
from modlin.linalg._charpoly import _charpoly, charpoly_cost
from modlin.linalg._inputs import working
from modlin.linalg._integers import ceil_norms, signed_pieces
from modlin.linalg._steps import advance

__all__ = ["charpoly_bound", "charpoly_integer", "charpoly_integer_cost"]

#: The GEMM's sums stay below this in magnitude (2**53 less room for the multiple of ``p``
#: the reduction subtracts, which must stay exact too).
_SUMS = 2**52
#: Primes stay below ``2**40``: the projection ``u`` then has entries from ``2**12`` values
#: at least (``u p < 2**52``), and a short minimal polynomial is rare (each linear factor of
#: the characteristic polynomial takes it with a chance ``2**-12``).
_MAX_BITS = 40
#: The smallest primes considered: below, the chance of a short minimal polynomial (about
#: ``n / p`` for a cyclic matrix) and the number of primes grow.
_MIN_BITS = 20


def charpoly_bound(A: np.ndarray) -> int:
    """A bound on every coefficient of ``det(x I - A)``: the coefficient of ``x**(n-k)`` is
    a sum of principal ``k x k`` minors, each at most the product of its rows' norms
    (Hadamard), so at most ``e_k(||a_1||, ..., ||a_n||)``; the least of that over rows and
    columns, maximised over ``k``."""
    best = None
    for axis in (0, 1):
        e = [1]
        for c in ceil_norms(A, axis):
            e = [a + c * b for a, b in zip(e + [0], [0] + e)]
        top = max(e)
        best = top if best is None else min(best, top)
    return best


# ---- the layout: pieces of A and the size of the primes --------------------------------------

def _layout(n: int, amax: int) -> tuple[int, int, int]:
    """``(bits, c, T)``: primes below ``2**bits``, ``A`` cut into ``T`` pieces of ``c`` bits
    (``c = 0``: one piece, ``A`` itself), chosen for the fewest GEMMs per bit of modulus.

    A piece's entries are below ``2**c`` (or ``amax + 1`` whole) in magnitude and the
    residues at most ``2**(bits - 1)``, so ``n`` products add up to at most
    ``n * 2**c * 2**(bits - 1) <= 2**52``."""
    logn = max(n - 1, 1).bit_length()  # n <= 2**logn
    width = max(amax.bit_length(), 1)
    best = None
    for bits in range(_MIN_BITS, _MAX_BITS + 1):
        if n * amax * 2 ** (bits - 1) <= _SUMS:
            c, T = 0, 1
        else:
            c = 53 - bits - logn
            if c < 1:
                break
            T = -(-width // c)
        key = (T / bits, -bits)
        if best is None or key < best[0]:
            best = (key, (bits, c, T))
    if best is None:
        raise ValueError(f"charpoly over Z of a {n} x {n} matrix: too large for exact float64 products")
    return best[1]


def _pieces(A: np.ndarray, c: int) -> list[np.ndarray]:
    """``A`` as float64 GEMM operands: ``[A]`` when ``c = 0``, else its
    :func:`~modlin.linalg._integers.signed_pieces` of ``c`` bits."""
    return [np.ascontiguousarray(A, dtype=np.float64)] if c == 0 else signed_pieces(A, c)


def _random_primes(bits: int, bound: int, rng: random.Random) -> list[int]:
    """Distinct random primes in ``[2**(bits-1), 2**bits)`` whose product exceeds ``bound``."""
    primes: list[int] = []
    seen: set[int] = set()
    M = 1
    while M <= bound:
        q = rng.randrange(2 ** (bits - 1), 2**bits) | 1
        if q not in seen and is_prime(q):
            seen.add(q)
            primes.append(q)
            M *= q
    return primes


# ---- kernels ------------------------------------------------------------------------------

@njit(inline="always")
def _reduce(y, p, pinv):  # pragma: no cover - compiled
    """``y mod p`` in ``[0, p)`` for an integral float64 ``|y| < 2**53 - 4p`` (float64 ``p``):
    the quotient's floor is within 2 of ``y / p``, so ``y - q p`` is exact (``|q p| < 2**53``)."""
    r = y - np.floor(y * pinv) * p
    r = r + p if r < 0 else r
    r = r + p if r < 0 else r
    r = r - p if r >= p else r
    return r - p if r >= p else r


@njit
def _next_vectors(Y, scale, qf, qinv, U, X, s, lo, hi):  # pragma: no cover - compiled
    """Rows ``lo:hi`` of one step for every prime (column ``j``, prime ``qf[j]``):
    ``x = sum_t scale**t Y[t, :, j] mod qf[j]`` into ``X`` as balanced residues, and
    ``s[j] = sum_i U[i, j] x_i mod qf[j]`` over these rows.

    Every float here is an exact integer: ``Y`` below ``2**52`` in magnitude, ``U qf`` below
    ``2**52``, and Horner's rule over the pieces multiplies residues below ``2**bits`` by
    ``scale = 2**c`` with ``c + bits <= 52`` (:func:`_layout`)."""
    T, _, P = Y.shape
    acc = np.empty(P)
    for j in range(P):
        s[j] = 0.0
    for i in range(lo, hi):
        # 1-D slices, one loop over the primes each: these loops vectorise
        top, xi, ui = Y[T - 1, i], X[i], U[i]
        for j in range(P):
            acc[j] = _reduce(top[j], qf[j], qinv[j])
        for t in range(T - 2, -1, -1):
            yt = Y[t, i]
            for j in range(P):
                acc[j] = _reduce(acc[j] * scale + _reduce(yt[j], qf[j], qinv[j]), qf[j], qinv[j])
        for j in range(P):
            p = qf[j]
            r = acc[j]
            xi[j] = r - p if r > 0.5 * p else r
            s[j] = _reduce(s[j] + ui[j] * r, p, qinv[j])


@njit
def _berlekamp_massey(S, q, n, lo, hi, F, ok):  # pragma: no cover - compiled
    """For primes ``lo:hi``: the minimal polynomial of the sequence ``S[:, j]`` modulo
    ``q[j]`` (Massey's algorithm); when of degree ``n``, its coefficients, low degree first,
    into ``F[j]`` and ``ok[j] = True``.

    The connection polynomial ``C`` (``C[0] = 1``, degree at most the length ``L``) gives the
    minimal polynomial ``x**L C(1/x)``."""
    N = S.shape[0]
    C = np.zeros(N + 1, dtype=np.int64)
    B = np.zeros(N + 1, dtype=np.int64)
    Tm = np.zeros(N + 1, dtype=np.int64)
    for j in range(lo, hi):
        p = q[j]
        pinv = 1.0 / np.float64(p)
        C[:] = 0
        B[:] = 0
        C[0] = 1
        B[0] = 1
        L = 0
        LB = 0  # the degree bound of B
        m = 1
        b = np.int64(1)
        TL = 0
        for i in range(N):
            d = S[i, j]
            for k in range(1, L + 1):
                d += mulmod1(C[k], S[i - k, j], p, pinv)
                d -= p if d >= p else 0
            if d == 0:
                m += 1
                continue
            coef = mulmod1(d, inverse(b, p), p, pinv)
            grow = 2 * L <= i
            if grow:
                Tm[: L + 1] = C[: L + 1]
                TL = L
            for k in range(LB + 1):  # C -= coef x**m B
                t = C[k + m] - mulmod1(coef, B[k], p, pinv)
                C[k + m] = t + p if t < 0 else t
            if grow:
                L = i + 1 - L
                B[:] = 0
                B[: TL + 1] = Tm[: TL + 1]
                LB = TL
                b = d
                m = 1
            else:
                m += 1
        ok[j] = L == n
        if L == n:
            for k in range(n + 1):
                F[j, k] = C[n - k]


# ---- the algorithm --------------------------------------------------------------------------

def _step_cost(n: int, T: int, P: int) -> float:
    """Modelled multiply-adds of one step: the GEMMs, and a reduction of each entry."""
    return T * n * n * P + 8.0 * n * P * T


def charpoly_integer_cost(A: np.ndarray) -> float:
    """Modelled multiply-adds of :func:`charpoly_integer` for a generic (cyclic) ``A``."""
    n = A.shape[0]
    if n == 0:
        return 0.0
    bits, _, T = _layout(n, max_abs(A))
    P = (2 * charpoly_bound(A) + 1).bit_length() // (bits - 1) + 1
    return 2 * n * _step_cost(n, T, P) + 4.0 * n * n * P


def _group(n: int, T: int, P: int) -> int:
    """How many primes run together: all of them while their vectors (``T + 1`` float64
    matrices ``n x P``, the projections' and the sequences' ``2n x P``) take at most a
    quarter of the memory budget, and at least 64 (thinner GEMMs lose speed)."""
    per_prime = 8 * (n * (T + 3) + 2 * n)
    return max(64, min(P, int(current_limits().memory // 4 // per_prime)))


def _sequence_charpolys(pieces: list[np.ndarray], c: int, primes: list[int], n: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The characteristic polynomials modulo ``primes`` (rows of an int64 array, low degree
    first) where the sequences certify them, and which they certify (bools)."""
    P, T = len(primes), len(pieces)
    q = np.array(primes, dtype=np.int64)
    qinv = 1.0 / q.astype(np.float64)
    qf = q.astype(np.float64)
    U = rng.integers(0, 2 ** (52 - max(primes).bit_length()), size=(n, P)).astype(np.float64)
    Y = np.empty((T, n, P))
    Y[0] = rng.integers(-(q >> 1), (q >> 1) + 1, size=(n, P), dtype=np.int64)
    X = np.empty((n, P))
    S = np.empty((2 * n, P))
    for i in range(2 * n):
        if i:
            krylov_products(pieces, X, Y)
        Yi = Y if i else Y[:1]
        parts = each_row(lambda r, Yi=Yi: _reduce_part(Yi, 2.0**c, qf, qinv, U, X, r), n, P, 4.0 * Yi.shape[0])
        S[i] = parts[0] if len(parts) == 1 else np.sum(parts, axis=0) % qf
        advance(_step_cost, n, T, P)
    F = np.zeros((P, n + 1), dtype=np.int64)
    ok = np.zeros(P, dtype=np.bool_)
    t = workers(4.0 * n * n * P * KERNEL_UPDATE, P)
    Si = S.astype(np.int64)
    with region(t):
        run(lambda r: _berlekamp_massey(Si, q, n, r.start, r.stop, F, ok), slabs(P, t))
    return F, ok


def krylov_products(pieces: list[np.ndarray], X: np.ndarray, Y: np.ndarray) -> None:
    """``Y[t] = A_t @ X`` for every piece: the GEMMs of one step (exact, see the module)."""
    for t, At in enumerate(pieces):
        np.matmul(At, X, out=Y[t])


def _reduce_part(Y, scale, qf, qinv, U, X, rows: slice) -> np.ndarray:
    s = np.empty(len(qf))
    _next_vectors(Y, scale, qf, qinv, U, X, s, rows.start, rows.stop)
    return s


def _charpoly_mod(A: np.ndarray, p: int) -> list[int]:
    """The characteristic polynomial modulo one prime ``p < 2**50``, whatever ``A``: Hessenberg
    for small ``n``, :func:`modlin.linalg.charpoly`'s block Krylov above."""
    W = working(A, p, "A")
    n = A.shape[0]
    if n <= HESSENBERG_MAX_N:
        f = np.empty(n + 1, dtype=np.int64)
        _hessenberg_charpoly(W, p, f)
        advance(charpoly_cost, p, n)
        return f.tolist()
    return list(_charpoly(W, p))


def charpoly_integer(A: np.ndarray, seed: int | None = None) -> list[int]:
    """The characteristic polynomial of a square integer matrix, low degree first, exact:
    the CRT of the polynomials modulo primes whose product exceeds twice
    :func:`charpoly_bound`."""
    n = A.shape[0]
    if n == 0:
        return [1]
    bits, c, T = _layout(n, max_abs(A))
    pieces = _pieces(A, c)
    rng = random.Random(seed)
    primes = _random_primes(bits, 2 * charpoly_bound(A) + 1, rng)
    res = np.empty((len(primes), n + 1), dtype=np.int64)  # residues below 2**40
    g = _group(n, T, len(primes))
    for lo in range(0, len(primes), g):
        part = primes[lo:lo + g]
        F, ok = _sequence_charpolys(pieces, c, part, n, np.random.default_rng(rng.getrandbits(64)))
        for j, p in enumerate(part):
            res[lo + j] = F[j] if ok[j] else _charpoly_mod(A, p)
    M = math.prod(primes)
    half = M // 2
    return [v - M if v > half else v for v in crt_rows(res.T, primes)]


@njit
def _hessenberg_charpoly(H, p, out):  # pragma: no cover - compiled
    """The characteristic polynomial of ``H`` (overwritten) modulo a prime ``p < 2**50``, low
    degree first, into ``out`` (``n + 1`` entries): ``H`` brought to upper Hessenberg form by
    similarities (elimination below the subdiagonal, the inverse operation on columns),
    then the recurrence ``P_m = (x - h_mm) P_{m-1} - sum_i h_im (prod_{j=i+1..m} h_{j,j-1})
    P_{i-1}``. About ``(10/3) n**3`` products: for small ``n``, where the block-Krylov
    charpoly's per-call work dominates."""
    n = H.shape[0]
    pinv = 1.0 / np.float64(p)
    for j in range(n - 2):
        piv = -1
        for i in range(j + 1, n):
            if H[i, j] != 0:
                piv = i
                break
        if piv < 0:
            continue
        if piv != j + 1:
            for c in range(n):
                t = H[piv, c]
                H[piv, c] = H[j + 1, c]
                H[j + 1, c] = t
            for r in range(n):
                t = H[r, piv]
                H[r, piv] = H[r, j + 1]
                H[r, j + 1] = t
        inv = inverse(H[j + 1, j], p)
        for i in range(j + 2, n):
            if H[i, j] == 0:
                continue
            u = mulmod1(H[i, j], inv, p, pinv)
            for c in range(j, n):  # row_i -= u row_{j+1}
                t = H[i, c] - mulmod1(u, H[j + 1, c], p, pinv)
                H[i, c] = t + p if t < 0 else t
            for r in range(n):  # col_{j+1} += u col_i
                t = H[r, j + 1] + mulmod1(u, H[r, i], p, pinv)
                H[r, j + 1] = t - p if t >= p else t
    P = np.zeros((n + 1, n + 1), dtype=np.int64)  # P[m]: the polynomial of the leading m x m block
    P[0, 0] = 1
    for m in range(1, n + 1):
        h = H[m - 1, m - 1]
        for d in range(m + 1):  # (x - h) P_{m-1}
            t = P[m - 1, d - 1] if d > 0 else 0
            t -= mulmod1(h, P[m - 1, d], p, pinv) if d < m else 0
            P[m, d] = t + p if t < 0 else t
        prod = 1
        for i in range(m - 1, 0, -1):  # i = m-1 .. 1 (1-based): h_{i,m} prod_{j=i+1..m} h_{j,j-1}
            prod = mulmod1(prod, H[i, i - 1], p, pinv)
            c = mulmod1(H[i - 1, m - 1], prod, p, pinv)
            if c == 0:
                continue
            for d in range(i):
                t = P[m, d] - mulmod1(c, P[i - 1, d], p, pinv)
                P[m, d] = t + p if t < 0 else t
    for d in range(n + 1):
        out[d] = P[n, d]
