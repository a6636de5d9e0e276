"""Linear algebra over the integers and the rationals: p-adic lifting and the CRT on top of
linear algebra modulo a word-size prime.

- :func:`solve_integer` solves ``A @ X = B`` for a nonsingular integer ``A`` by Dixon's
  p-adic lifting (J. D. Dixon, "Exact solution of linear equations using p-adic
  expansions", Numer. Math. 40, 1982): one inverse ``C`` of ``A`` modulo a prime ``p``, then
  one digit ``X_i = C S_i mod p`` per step and the exact residual update
  ``S_{i+1} = (S_i - A X_i) / p``, both float64 GEMMs that are exact by the choice of ``p``.
  The common denominator ``d`` comes from one right-hand side ``B v`` lifted far enough for
  rational reconstruction with proven bounds; then ``A @ Y = d B`` is lifted, with the p-adic
  digits of ``d`` fed into the residual, until the residual is exactly zero, which proves
  ``A @ Y = d B`` (the identity the lifting keeps) whatever ``d`` was.
- :func:`det_integer` takes ``d`` for a random right-hand side, which divides ``det(A)``,
  and finds the cofactor ``det(A) / d`` by the CRT modulo a few primes, as many as a bound
  on ``|det(A)|`` asks for: Hadamard's bound on ``A T``, where ``T`` is unit upper
  triangular (so ``det(A T) = det(A)``) and makes the columns of ``A T`` nearly
  orthogonal, computed in floating point with rigorous error bounds. It is within a few
  bits of ``|det(A)|`` where Hadamard's bound on ``A`` is hundreds of bits above it (727
  bits at ``n = 1000``, entries in ``[-2**10, 2**10)``).

Every answer is certified: the stopping rules are proven bounds or exact identities, the
random choices (the prime, ``b``, ``v``, ``u``) only change the time taken.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

import numpy as np

from modlin._arith.crt import crt
from modlin._arith.integers import max_abs
from modlin._arith.primes import is_prime
from modlin._arith.pyints import from_limbs
from modlin._engines.jit import njit
from modlin._front.products import intmul
from modlin._runtime.limits import current as current_limits
from modlin.linalg._inputs import LinAlgError, working
from modlin.linalg._pluq import _det, pluq_cost, pluq_inplace
from modlin.linalg._solve import inverse_and_det, inverse_cost
from modlin.linalg._steps import advance

__all__ = ["det_integer", "solve_integer", "signed_pieces", "hadamard_bound", "det_bound", "lift", "to_ints",
           "rational_reconstruction"]

#: float64 products are exact below this.
_EXACT = 2**53
#: Residuals stay int64 while bounded by this (headroom for one subtraction).
_INT64 = 2**62


# ---- bounds -----------------------------------------------------------------------------

def ceil_norms(A: np.ndarray, axis: int) -> list[int]:
    """``ceil(||line||_2)`` of each column (``axis=0``) or row (``axis=1``), exactly."""
    if A.dtype != object and max_abs(A) < 2**26 and A.shape[axis] < 2**11:
        sq = (A.astype(np.int64) ** 2).sum(axis=axis).tolist()  # < 2**63: exact
    else:
        sq = [int(v) for v in (A.astype(object) ** 2).sum(axis=axis).tolist()]
    out = []
    for s in sq:
        r = math.isqrt(int(s))
        out.append(r if r * r == s else r + 1)
    return out


def signed_pieces(A: np.ndarray, c: int) -> list[np.ndarray]:
    """``[A_0, A_1, ...]`` as float64 arrays with ``A = sum_t 2**(c t) A_t`` and
    ``|A_t| < 2**c``: the base-``2**c`` digits of ``|a|`` carrying the sign of ``a`` (at least
    one piece), so that ``sum_t 2**(c t) |A_t| = |A|`` and every partial sum of the pieces'
    products is bounded as the whole is. Any integer array (object ones of any size)."""
    if A.dtype.kind == "u":
        sign, mag = 1.0, A.astype(np.uint64)
    elif A.dtype != object and (A.size == 0 or A.min() > np.iinfo(np.int64).min):
        sign, mag = np.sign(A.astype(np.int64)).astype(np.float64), np.abs(A.astype(np.int64))
    else:  # Python ints, or int64 holding -2**63 (whose |a| int64 cannot hold)
        sign, mag = np.sign(A.astype(object)).astype(np.float64), np.abs(A.astype(object))
    mask = (1 << c) - 1
    pieces = []
    while not pieces or np.any(mag):
        pieces.append(np.ascontiguousarray((mag & mask).astype(np.float64) * sign))
        mag = mag >> c
    return pieces


def hadamard_bound(A: np.ndarray) -> int:
    """Hadamard's bound on ``|det(A)|``: the least of the products of the (rounded-up) column
    and row norms, an integer."""
    return min(math.prod(ceil_norms(A, 0)), math.prod(ceil_norms(A, 1)))


def _float_det_log2(A: np.ndarray) -> float | None:
    """An upper bound on ``log2 |det(A)|``, proven, from floating point; None when it cannot
    be had (entries beyond ``2**53``, non-finite intermediate values).

    ``T``, the inverse of ``R`` from a QR of ``A`` scaled to a unit diagonal, is upper
    triangular with ones on its diagonal, so ``det(A T) = det(A)`` exactly, whatever the
    rounding of ``T``; the columns of ``A T`` are close to orthogonal, so Hadamard's bound
    on them is close to ``|det(A)|``. ``Y = fl(A T)`` and ``E = fl(|A| |T|)`` bound ``A T``
    entry by entry: ``|A T - Y| <= g |A||T| <= g / (1 - g) E`` with ``g = n u / (1 - n u)``
    for any order of summation (Higham, Accuracy and Stability, 3.5). Norms are computed
    on power-of-two scaled columns (no underflow), rounded up by ``(n + 4) u`` and an
    absolute ``2**-1000`` per entry, and the sum of logarithms gets a margin above its
    rounding errors.
    """
    n = A.shape[0]
    if n == 0 or A.dtype == object or max_abs(A) > _EXACT:
        return None
    Af = A.astype(np.float64)
    with np.errstate(all="ignore"):
        try:
            R = np.linalg.qr(Af, mode="r")
            T = _upper_inverse(R) * np.diagonal(R)[None, :]
        except np.linalg.LinAlgError:
            return None
        T = np.triu(T)
        np.fill_diagonal(T, 1.0)
        if not np.isfinite(T).all():
            return None
        Y = Af @ T
        E = np.abs(Af) @ np.abs(T)
        u = 2.0**-53
        g = n * u / (1 - n * u)
        g = g / (1 - g)
        Y = np.abs(Y)
        top = np.maximum(Y.max(axis=0), E.max(axis=0))
        if not np.isfinite(top).all():
            return None
        if not top.all():
            return -math.inf  # A T has a zero column: det(A) = 0
        scale = np.exp2(np.ceil(np.log2(top)))  # powers of two: exact scaling, no underflow
        Y /= scale
        E /= scale
        up = 1 + (n + 4) * u
        norms = (np.sqrt((Y * Y).sum(axis=0)) * up + g * np.sqrt((E * E).sum(axis=0)) * up) * up + n * 2.0**-1000
        total = float(np.log2(norms).sum() + np.log2(scale).sum())
    if not math.isfinite(total):
        return None
    return total + n * 2.0**-40 + 1e-9 * abs(total) + 1.0


def _upper_inverse(R: np.ndarray) -> np.ndarray:
    """An approximate inverse of the upper triangular ``R`` in float64, by halves:
    ``[[R1, R12], [0, R2]]**-1 = [[R1^-1, -R1^-1 R12 R2^-1], [0, R2^-1]]`` (a third of
    ``numpy.linalg.inv``'s work, in GEMMs; its accuracy does not matter to the bound)."""
    n = R.shape[0]
    if n <= 64:
        return np.triu(np.linalg.inv(R))
    h = n // 2
    T1, T2 = _upper_inverse(R[:h, :h]), _upper_inverse(R[h:, h:])
    T = np.zeros_like(R)
    T[:h, :h], T[h:, h:] = T1, T2
    T[:h, h:] = -(T1 @ R[:h, h:]) @ T2
    return T


def det_bound(A: np.ndarray) -> int:
    """A proven bound on ``|det(A)|``: the least of Hadamard's bound and the floating-point one."""
    h = hadamard_bound(A)
    f = _float_det_log2(A)
    if f is None:
        return h
    if f == -math.inf:
        return 0
    return min(h, 2 ** max(0, math.ceil(f)))


def _numerator_bound(A: np.ndarray, b: np.ndarray) -> int:
    """A bound on ``|det(A_i(b))|`` for every ``i`` (``A`` with column ``i`` replaced by
    ``b``), Cramer's numerators of ``A^-1 b``: ``||b|| prod_{j != i} ||a_j||``."""
    cols = ceil_norms(A, 0)
    nb = ceil_norms(b.reshape(-1, 1), 0)[0]
    low = min(cols) if cols else 1
    prod = math.prod(cols)
    return -(-nb * prod // max(low, 1))


# ---- the prime and the lifting ------------------------------------------------------------

def _prime_limit(n: int) -> int:
    """The largest ``p`` for which ``n`` products of balanced residues, ``((p-1)/2)**2`` each,
    add up exactly in float64."""
    return 2 * math.isqrt(_EXACT // max(n, 1)) + 1


def _random_prime(n: int, rng: random.Random, avoid: set[int]) -> int:
    hi = min(_prime_limit(n), 2**26)
    lo = max(hi // 2, 3)
    while True:
        q = rng.randrange(lo, hi) | 1
        if q not in avoid and is_prime(q):
            return q


class _Lifter:
    """``A`` and its inverse modulo ``p``, with the exact products one lifting step needs."""

    def __init__(self, A: np.ndarray, rng: random.Random, tries: int = 4):
        self.A = A
        self.n = n = A.shape[0]
        self.amax = max_abs(A)
        tried: set[int] = set()
        for _ in range(tries):
            p = _random_prime(n, rng, tried)
            tried.add(p)
            W = working(A, p, "A")
            try:
                C, self.det_p = inverse_and_det(W, p)
            except LinAlgError:
                continue
            self.p = p
            half = (p - 1) // 2
            self.C = np.where(C > half, C - p, C).astype(np.float64)
            break
        else:
            raise LinAlgError("singular")
        # A x exactly, for |x| <= (p-1)/2: A in pieces of c bits (float64 GEMMs exact), the
        # products added in int64 while that cannot overflow, as Python ints otherwise
        c = max(1, (_EXACT // (n * half)).bit_length() - 1)
        self.int64 = self.amax * n * half < 2**60 and A.dtype != object
        self.pieces = [(c * t, P) for t, P in enumerate(signed_pieces(A, c))]

    def times_A(self, x: np.ndarray) -> np.ndarray:
        """``A @ x`` exactly, for int64 ``x`` with ``|x| <= (p-1)/2``."""
        xf = x.astype(np.float64)
        out = None
        for shift, P in self.pieces:
            t = (P @ xf).astype(np.int64)
            if not self.int64:
                t = t.astype(object)
            if shift:
                t <<= shift
            out = t if out is None else out + t
        return out

    def digit(self, s: np.ndarray) -> np.ndarray:
        """``C s mod p``, balanced, int64."""
        p = self.p
        sr = np.remainder(s, p)
        if sr.dtype == object:
            sr = sr.astype(np.int64)
        half = (p - 1) // 2
        sr = np.where(sr > half, sr - p, sr).astype(np.float64)
        x = np.remainder(self.C @ sr, p).astype(np.int64)
        return np.where(x > half, x - p, x)


def _balanced_digits(d: int, p: int) -> list[int]:
    """The balanced base-``p`` digits of ``d``, least significant first."""
    out, half = [], (p - 1) // 2
    while d:
        r = d % p
        if r > half:
            r -= p
        out.append(r)
        d = (d - r) // p
    return out


def _digits(lifter: _Lifter, B: np.ndarray, steps: int, d: int, until_exact: bool):
    """The lifting's steps: yields each digit ``X_i`` (int64, ``B``'s shape) and whether the
    residual is zero after it (only with ``until_exact``, once every digit of ``d`` is in,
    the last one yielded then). See :func:`lift`."""
    p = lifter.p
    feed = _balanced_digits(d, p) if d != 1 else [1]
    bmax = max_abs(B)
    wide = not lifter.int64 or (p // 2 + 1) * bmax + lifter.n * lifter.amax + 1 >= _INT64
    Bw = B.astype(object) if wide else B.astype(np.int64)
    R = np.zeros(B.shape, dtype=object if wide else np.int64)
    for i in range(steps):
        S = R + Bw * feed[i] if i < len(feed) else R
        x = lifter.digit(S)
        ax = lifter.times_A(x)
        if wide:
            ax = ax.astype(object)
        R = (S - ax) // p
        advance(_step_cost, lifter.n, B.shape[1])
        done = until_exact and i + 1 >= len(feed) and not R.any()
        yield x, done
        if done:
            return


def lift(lifter: _Lifter, B: np.ndarray, steps: int, d: int = 1,
         until_exact: bool = False) -> tuple[np.ndarray, bool]:
    """The p-adic digits of the solution ``Y`` of ``A @ Y = d B``: an int32 array of shape
    ``(m,) + B.shape``, ``m = steps``, or fewer with ``until_exact`` when the residual becomes
    zero once every digit of ``d`` has been fed in, in which case ``sum(X_i p**i)`` is exactly
    ``Y`` (returned true). int32 digits (``|X_i| <= (p-1)/2 < 2**25``) hold a 1000 x 50
    solution's 700 digits in 140 MB, less than its Python ints.

    The residual keeps ``d_{<i} B - A X_{<i} = p**i R_i`` (``d_{<i}`` the digits of ``d`` fed
    so far): each step solves ``A X_i = S_i = R_i + delta_i B (mod p)`` and divides
    ``S_i - A X_i`` by ``p`` exactly.
    """
    digits = np.empty((steps,) + B.shape, dtype=np.int32)
    i = 0
    for i, (x, done) in enumerate(_digits(lifter, B, steps, d, until_exact)):
        digits[i] = x
        if done:
            return digits[:i + 1], True
    return digits, False


def lift_ints(lifter: _Lifter, B: np.ndarray, steps: int, d: int = 1, until_exact: bool = False,
              budget: int | None = None) -> tuple[np.ndarray, int, bool]:
    """:func:`lift`'s value ``sum(X_i p**i)`` as Python ints, with the number of digits and
    whether the residual reached zero. The digits are held in blocks of at most ``budget``
    bytes (the memory budget of :func:`modlin.limits` by default), each converted and freed
    before the next is lifted."""
    if budget is None:
        budget = current_limits().memory
    per_step = 4 * max(B.size, 1)
    block = max(1, min(steps, budget // per_step))
    p = lifter.p
    total = np.zeros(B.shape, dtype=object)
    buf = np.empty((block,) + B.shape, dtype=np.int32)
    count, filled, exact, offset = 0, 0, False, 1
    for x, done in _digits(lifter, B, steps, d, until_exact):
        buf[filled] = x
        filled += 1
        count += 1
        exact = done
        if filled == block or done:
            part = to_ints(buf[:filled], p)
            total = part if offset == 1 else total + part * offset
            offset *= p**filled
            filled = 0
    if filled:
        total = total + to_ints(buf[:filled], p) * offset
    return total, count, exact


def _step_cost(n: int, k: int) -> float:
    """Modelled multiply-adds of one lifting step: two ``n x n`` by ``n x k`` products."""
    return 2.0 * n * n * max(k, 1)


def _steps_estimate(A: np.ndarray, k: int) -> float:
    """About how many lifting steps :func:`solve_integer` takes (for the progress display):
    the bits of Hadamard's bound, twice for the denominator and once more for ``A Y = d B``,
    over the bits of the prime."""
    n = A.shape[0]
    bits = n * (math.log2(max(max_abs(A), 1)) + 0.5 * math.log2(max(n, 2)))
    return 3 * bits / math.log2(_prime_limit(n))


def solve_cost(A: np.ndarray, k: int) -> float:
    """Modelled multiply-adds of :func:`solve_integer` with ``k`` right-hand sides."""
    n = A.shape[0]
    p = _prime_limit(n)
    steps = _steps_estimate(A, k)
    return inverse_cost(p, n) + steps / 3 * (2 * _step_cost(n, 1) + _step_cost(n, k))


def nullspace_cost(A: np.ndarray) -> float:
    """Modelled multiply-adds of :func:`nullspace_integer` (and :func:`rank_integer` of the
    matrix it is given): the PLUQ modulo the prime. A rank deficiency adds the lifting of the
    kernel's columns, which the model does not foresee (the display then waits at 99 %)."""
    m, n = A.shape
    return pluq_cost(_prime_limit(max(n, 1)), m, n)


def rank_cost(A: np.ndarray) -> float:
    """Modelled multiply-adds of :func:`rank_integer`: :func:`nullspace_cost` of ``A`` or
    ``A.T``, whichever has no more columns than rows."""
    return nullspace_cost(A.T if A.shape[0] < A.shape[1] else A)


def det_cost(A: np.ndarray) -> float:
    """Modelled multiply-adds of :func:`det_integer`: an inverse and a one-column lifting."""
    n = A.shape[0]
    return inverse_cost(_prime_limit(n), n) + _steps_estimate(A, 1) * 2 / 3 * _step_cost(n, 1)


# ---- p-adic digits to Python ints ---------------------------------------------------------

@lru_cache(maxsize=8)
def _power_limbs(p: int, m: int, L: int) -> np.ndarray:
    """``(m, L)`` float64: the 16-bit limbs of ``p**i``."""
    out = np.zeros((m, L), dtype=np.float64)
    q = 1
    for i in range(m):
        raw = np.frombuffer(q.to_bytes(2 * L, "little"), dtype="<u2")
        out[i] = raw
        q *= p
    return out


@njit
def _carry(S, limbs, neg):  # pragma: no cover - compiled
    """Signed limb sums ``S[e, l]`` (weights ``2**(16 l)``) to the 16-bit limbs of each
    entry's magnitude and its sign."""
    E, L = S.shape
    for e in range(E):
        c = 0
        for j in range(L):
            t = np.int64(S[e, j]) + c
            limbs[j, e] = t & 0xFFFF
            c = t >> 16
        if c < 0:  # two's complement over L limbs: the magnitude is its negation
            neg[e] = True
            b = 1
            for j in range(L):
                v = (limbs[j, e] ^ 0xFFFF) + b
                limbs[j, e] = v & 0xFFFF
                b = v >> 16


def to_ints(digits, p: int) -> np.ndarray:
    """``sum_i digits[i] * p**i`` as Python ints, entry by entry (an object array of the shape
    of one digit array), by float64 GEMMs of the digits by the 16-bit limbs of the powers of
    ``p`` (exact: ``m (p-1)/2 (2**16 - 1) < 2**53``), then carries. ``digits``: an integer
    array ``(m, ...)`` (or a sequence of equal arrays) of balanced digits."""
    D = np.asarray(digits)
    m, shape = D.shape[0], D.shape[1:]
    if m == 0:
        out = np.empty(shape, dtype=object)
        out[...] = 0
        return out
    half = (p - 1) // 2
    most = (_EXACT - 1) // (half * 0xFFFF)
    if m > most:  # more digits than one exact GEMM adds up: the high ones separately
        return to_ints(D[:most], p) + to_ints(D[most:], p) * p**most
    L = (m * p.bit_length() + 2) // 16 + 2
    P = _power_limbs(p, m, L)
    D = D.reshape(m, -1)
    E = D.shape[1]
    out = np.empty(E, dtype=object)
    step = max(1, 2**22 // L)  # entries a chunk: its limb sums take 32 MB
    for e0 in range(0, E, step):
        S = D[:, e0:e0 + step].T.astype(np.float64) @ P
        limbs = np.empty((L, S.shape[0]), dtype=np.int64)
        neg = np.zeros(S.shape[0], dtype=np.bool_)
        _carry(S, limbs, neg)
        out[e0:e0 + step] = from_limbs(limbs, neg)
    return out.reshape(shape)


def _combine(digits: np.ndarray, u: np.ndarray, p: int) -> int:
    """``sum_e u_e sum_i digits[i][e] p**i`` as one Python int: the digits of the combination
    (``u . digits[i]``, int64: ``|u| < 2**8``, ``n < 2**22``) brought back to balanced digits by
    carries, then one :func:`to_ints`."""
    w = (digits.reshape(digits.shape[0], -1).astype(np.int64) @ u).tolist()
    out, carry, half = [], 0, (p - 1) // 2
    for t in w:
        t += carry
        r = t % p
        if r > half:
            r -= p
        out.append(r)
        carry = (t - r) // p
    return int(to_ints([np.array([r], dtype=np.int64) for r in out], p)[0]) + carry * p ** len(out)


def rational_reconstruction(v: int, M: int, N: int, D: int) -> tuple[int, int] | None:
    """The fraction ``a / b`` with ``a = b v (mod M)``, ``|a| <= N``, ``0 < b <= D``, or None;
    unique when ``M > 2 N D`` (Wang's algorithm: the extended Euclidean algorithm on
    ``(M, v)`` stopped at the first remainder ``<= N``)."""
    r0, r1 = M, v % M
    t0, t1 = 0, 1
    while r1 > N:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        t0, t1 = t1, t0 - q * t1
    if t1 == 0 or abs(t1) > D or math.gcd(r1, abs(t1)) != 1:
        return None
    return (r1, t1) if t1 > 0 else (-r1, -t1)


def _steps_for(p: int, bound: int) -> int:
    """The least ``m`` with ``p**m > bound``."""
    m, q = 0, 1
    while q <= bound:
        q *= p
        m += 1
    return m


def _denominator(lifter: _Lifter, A: np.ndarray, b: np.ndarray, D: int, rng: random.Random) -> int:
    """The denominator of ``u . A^-1 b`` for a random small ``u``: a divisor of the least
    common denominator of ``A^-1 b``, hence of ``det(A)``, and equal to it for most ``u``."""
    n = A.shape[0]
    if not np.any(b):  # A^-1 0 = 0
        return 1
    u = [rng.randrange(1, 2**8) for _ in range(n)]
    N = sum(u) * _numerator_bound(A, b)
    m = _steps_for(lifter.p, 2 * N * D)
    digits, _ = lift(lifter, b.reshape(n, 1), m)
    v = _combine(digits, np.array(u, dtype=np.int64), lifter.p) % lifter.p ** m
    M = lifter.p ** m
    ab = rational_reconstruction(v, M, N, D)
    if ab is None:  # not reached: M > 2 N D makes the fraction exist and unique
        raise AssertionError("rational reconstruction failed within its proven bounds")
    return ab[1]


# ---- the public operations over Z and Q -------------------------------------------------------

def _lifter_or_singular(A: np.ndarray, rng: random.Random, fn: str) -> _Lifter:
    try:
        return _Lifter(A, rng)
    except LinAlgError:
        pass
    r = rank_integer(A, rng.randrange(2**32))
    raise LinAlgError(f"{fn}: the matrix is singular over the rationals (its rank is {r}, not {A.shape[0]})"
                      if r < A.shape[0] else
                      f"{fn}: the matrix was singular modulo 4 random primes but not modulo a fifth")


def det_integer(A: np.ndarray, seed: int | None = None) -> int:
    """``det(A)`` of a square integer matrix, exactly (int64 or object array in)."""
    n = A.shape[0]
    if n == 0:
        return 1
    if n <= 2:
        a = A.astype(object)
        return int(a[0, 0]) if n == 1 else int(a[0, 0] * a[1, 1] - a[0, 1] * a[1, 0])
    rng = random.Random(seed)
    D = det_bound(A)
    if D == 0:
        return 0
    try:
        lifter = _Lifter(A, rng)
    except LinAlgError:  # singular modulo 4 random primes: almost surely singular, which a
        # kernel checked over Z proves; otherwise the CRT of determinants modulo primes
        if rank_integer(A, rng.randrange(2**32)) < n:
            return 0
        return _det_multimodular(A, D, rng)
    b = np.array([rng.randrange(-2**8, 2**8) for _ in range(n)], dtype=np.int64)
    d = _denominator(lifter, A, b, D, rng)
    # det = d s with |s| <= D / d: s modulo primes until their product exceeds 2 D / d
    bound = 2 * (D // d) + 1
    residues = [(lifter.p, lifter.det_p * pow(d, -1, lifter.p) % lifter.p)]
    modulus = lifter.p
    used = {lifter.p}
    while modulus <= bound:
        q = _random_prime(n, rng, used)
        used.add(q)
        if d % q == 0:
            continue
        dq = _det(working(A, q, "A"), q)
        residues.append((q, dq * pow(d, -1, q) % q))
        modulus *= q
    s = crt([r for _, r in residues], [q for q, _ in residues])
    if s > modulus // 2:
        s -= modulus
    return d * s


def _det_multimodular(A: np.ndarray, D: int, rng: random.Random) -> int:
    """``det(A)`` by the CRT of determinants modulo primes whose product exceeds ``2 D``
    (the path when ``A`` was singular modulo the lifting's primes: often ``det(A) = 0``,
    which a prime that sees ``det != 0`` disproves early)."""
    n = A.shape[0]
    residues, modulus, used = [], 1, set()
    while modulus <= 2 * D:
        q = _random_prime(n, rng, used)
        used.add(q)
        W = working(A, q, "A")
        residues.append((q, _det(W, q)))
        modulus *= q
    s = crt([r for _, r in residues], [q for q, _ in residues])
    return s - modulus if s > modulus // 2 else s


def solve_integer(A: np.ndarray, B: np.ndarray, seed: int | None = None, fn: str = "solve") -> tuple[np.ndarray, int]:
    """``(Y, d)`` with ``A @ Y = d B``, ``Y`` an integer matrix (object array of Python ints)
    and ``d > 0`` the least common denominator of ``A^-1 B``: ``X = Y / d`` exactly."""
    n, k = B.shape
    rng = random.Random(seed)
    if n == 0:
        return np.zeros((n, k), dtype=object), 1
    lifter = _lifter_or_singular(A, rng, fn)
    p = lifter.p
    if k == 0:
        return np.zeros((n, k), dtype=object), 1
    D = det_bound(A)
    for _ in range(4):  # B v = 0 for a nonzero B would give d = 1: draw another v
        v = np.array([rng.randrange(1, 2**8) for _ in range(k)], dtype=np.int64) if k > 1 else np.ones(1, np.int64)
        bv = B @ v if B.dtype != object and max_abs(B) * int(v.sum()) < _INT64 else B.astype(object) @ v.astype(object)
        if np.any(bv) or not np.any(B):
            break
    d = _denominator(lifter, A, np.asarray(bv), D, rng)
    NB = max(_numerator_bound(A, B[:, j]) for j in range(k))
    # Y = d A^-1 B: its entries are a / b with |a| <= NB and b | det / d (d divides det), so
    # b <= D / d; integral when d is the common denominator, and then |Y| <= NB. p**m > 2 NB D / d
    # covers both: the residual reaches zero, or every entry is reconstructed (unique)
    Dq = -(-D // d)
    m = _steps_for(p, 2 * NB * Dq) + 1
    Y, count, exact = lift_ints(lifter, B, m, d=d, until_exact=True)
    if not exact:  # some entry's denominator does not divide d (B v lost a factor of it)
        Y, f = _reconstruct_each(Y, p**count, NB, Dq)
        d *= f
    g = d
    for y in Y.reshape(-1).tolist():
        if g == 1:
            break
        g = math.gcd(g, int(y))
    if g > 1:
        Y = Y // g
        d //= g
    return Y, d


def _reconstruct_each(X: np.ndarray, M: int, N: int, D: int) -> tuple[np.ndarray, int]:
    """``(Y, f)``: each entry of ``X`` (integers modulo ``M``) as the fraction ``a / b`` with
    ``|a| <= N``, ``0 < b <= D`` (unique for ``M > 2 N D``), ``f`` the least common multiple of
    the ``b`` and ``Y = X f`` as integers. Fast when ``D`` is small: Euclid stops within a
    few steps of ``M``."""
    fracs = []
    f = 1
    for v in X.reshape(-1).tolist():
        ab = rational_reconstruction(int(v), M, N, D)
        if ab is None:
            raise AssertionError("rational reconstruction failed within its proven bounds")
        fracs.append(ab)
        f = f * ab[1] // math.gcd(f, ab[1])
    Y = np.empty(X.shape, dtype=object)
    Y.reshape(-1)[:] = [a * (f // b) for a, b in fracs]
    return Y, f


def nullspace_integer(A: np.ndarray, seed: int | None = None) -> tuple[np.ndarray, int]:
    """``(N, r)``: a basis of the right kernel of ``A`` over Q as the columns of an integer
    matrix ``N`` (each column primitive) and the rank ``r`` of ``A``, both certified.

    The rank profile modulo a random prime gives ``r_p <= rank(A)`` and a block ``A11`` of
    ``A`` nonsingular modulo ``p``, hence over Q; the kernel candidate is
    ``[-A11^-1 A12; I]`` (scaled to integers), and ``A N = 0``, checked exactly, proves
    that the kernel has dimension ``n - r_p``, so ``rank(A) = r_p``. An unlucky prime (one
    dividing a minor that matters) fails the check and another is drawn.
    """
    m, n = A.shape
    rng = random.Random(seed)
    tried: set[int] = set()
    for _ in range(8):
        p = _random_prime(max(n, 1), rng, tried)
        tried.add(p)
        W = working(A, p, "A")
        P, Q, r = pluq_inplace(W, p)
        if r == n:  # full column rank modulo p, hence over Q
            return np.zeros((n, 0), dtype=np.int64), r
        rows, cols, free = P[:r], Q[:r], np.sort(Q[r:])  # Q[:r]: the column rank profile
        N = np.zeros((n, n - r), dtype=object)
        if r:
            Y, d = solve_integer(np.ascontiguousarray(A[np.ix_(rows, cols)]),
                                 np.ascontiguousarray(-A[np.ix_(rows, free)]), rng.randrange(2**32))
            N[cols] = Y
        else:
            d = 1
        N[free, np.arange(n - r)] = d
        for j in range(n - r):  # primitive columns
            g = 0
            for v in N[:, j].tolist():
                g = math.gcd(g, v)
                if g == 1:
                    break
            if g > 1:
                N[:, j] //= g
        if m == 0 or not np.any(intmul(A, N)):
            return N, r
    raise AssertionError("no prime among 8 random ones gave the rank of the matrix")


def rank_integer(A: np.ndarray, seed: int | None = None) -> int:
    """The rank of an integer matrix over Q, certified (see :func:`nullspace_integer`;
    full rank modulo one prime certifies itself)."""
    m, n = A.shape
    if m < n:
        return nullspace_integer(np.ascontiguousarray(A.T), seed)[1]
    return nullspace_integer(A, seed)[1]
