"""Primality, previous primes and factors of Python ints, without importing galois.

The planners need primes just below ``2**26`` (residue number systems) or ``2**21``
(2M moduli) and the factors of moduli that are usually prime (2M needs them). galois answers all of
these, but importing it costs a few tenths of a second (and numba's initialisation
with it) in every process whose first product needs one. Below
:data:`DETERMINISTIC_LIMIT` the Miller-Rabin test with the first thirteen primes (2..41) as
bases (fewer below smaller bounds, :data:`_BASE_COUNTS`) is exact (Sorenson and
Webster, "Strong pseudoprimes to twelve prime bases",
Math. Comp. 86 (2017): no strong pseudoprime to the bases 2..41 is below
``3.3 * 10**24``, none to 2..37 below ``3.18 * 10**23``); above it the Baillie-PSW test decides (those bases, then a strong
Lucas test: no composite is known to pass, and FLINT and PARI decide with it; galois
0.4's ten Miller-Rabin bases take the limit itself, a strong pseudoprime to 2..41, for
a prime). Factoring is bounded (:func:`factor`), so a
modulus that cannot be factored quickly is reported instead of left to run. The answers are galois's, except on the strong pseudoprimes that
galois 0.4 takes for primes (3825123056546413051 = 149491 * 747451 * 34233211 is
one): for the planners' moduli, below ``2**26``, the two always agree.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

#: Miller-Rabin with :data:`_BASES` decides primality exactly below this bound.
DETERMINISTIC_LIMIT = 3317044064679887385961981


#: ``(bound, b)``: below ``bound`` the first ``b`` of :data:`_BASES` suffice, the least
#: strong pseudoprime to those bases being ``bound`` itself (OEIS A014233; Jaeschke,
#: Math. Comp. 61 (1993), and Sorenson and Webster for the last two). The planners test
#: numbers below ``2**33`` (cheaper with 5 bases than 13) thousands of times per process.
_BASE_COUNTS = ((2047, 1), (1373653, 2), (25326001, 3), (3215031751, 4), (2152302898747, 5),
                (3474749660383, 6), (341550071728321, 7), (3825123056546413051, 9),
                (318665857834031151167461, 12), (DETERMINISTIC_LIMIT, 13))


_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


#: Bounds of :func:`factor`: trial division by the primes below ``TRIAL_BOUND``, then for
#: each composite cofactor at most ``RHO_STEPS`` steps of Pollard's rho (Brent's variant),
#: which finds prime factors up to about ``2**34`` (a factor ``q`` needs about
#: ``sqrt(q)`` steps). Every ``m < 2**68`` therefore factors completely; a larger one
#: when all but one of its prime factors are below ``2**34``.
TRIAL_BOUND = 2**16


RHO_STEPS = 2**18


def is_prime(n: int) -> bool:
    """Whether the integer ``n`` is prime: exact below :data:`DETERMINISTIC_LIMIT`, the
    Baillie-PSW test beyond (no composite is known to pass it)."""
    if n < 2:
        return False
    for q in _BASES:
        if n % q == 0:
            return n == q
    if n >= DETERMINISTIC_LIMIT:
        return _strong_probable_prime(n, _BASES) and _strong_lucas(n)
    return _strong_probable_prime(n, _BASES[:next(b for bound, b in _BASE_COUNTS if n < bound)])


def _strong_probable_prime(n: int, bases) -> bool:
    """Miller-Rabin: whether the odd ``n`` passes the strong test to every base."""
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in bases:
        x = pow(a, d, n)
        if x == 1 or x == n - 1:
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _jacobi(a: int, n: int) -> int:
    """The Jacobi symbol ``(a / n)`` for odd ``n > 0``."""
    a %= n
    result = 1
    while a:
        while a % 2 == 0:
            a //= 2
            if n % 8 in (3, 5):
                result = -result
        a, n = n, a
        if a % 4 == 3 and n % 4 == 3:
            result = -result
        a %= n
    return result if n == 1 else 0


def _strong_lucas(n: int) -> bool:
    """The strong Lucas probable-prime test with Selfridge's parameters, for odd ``n`` with
    no small factor: with the strong test to base 2, the Baillie-PSW test, which no
    composite is known to pass (FLINT and PARI decide primality with it)."""
    if math.isqrt(n) ** 2 == n:
        return False  # no D with (D / n) = -1 exists for a square
    D = 5
    while _jacobi(D, n) != -1:
        D = -D - 2 if D > 0 else -D + 2
    P, Q = 1, (1 - D) // 4
    d, s = n + 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1

    def half(x: int) -> int:  # x / 2 mod n
        return (x + n if x % 2 else x) // 2 % n

    U, V, Qk = 1, P, Q % n  # U_1, V_1, Q**1, then up the bits of d
    for bit in bin(d)[3:]:
        U, V, Qk = U * V % n, (V * V - 2 * Qk) % n, Qk * Qk % n
        if bit == "1":
            U, V, Qk = half(P * U + V), half(D * U + P * V), Qk * Q % n
    if U == 0 or V == 0:
        return True
    for _ in range(s - 1):
        V, Qk = (V * V - 2 * Qk) % n, Qk * Qk % n
        if V == 0:
            return True
    return False


def prev_prime(n: int) -> int:
    """The largest prime ``<= n`` (``n >= 2``), as ``galois.prev_prime``."""
    if n < 2:
        raise ValueError(f"there is no prime <= {n}")
    if n == 2:
        return 2
    q = n if n % 2 else n - 1
    while not is_prime(q):
        q -= 2
    return q


def primes_between(lo: int, hi: int) -> list[int]:
    """The primes ``q`` with ``lo <= q < hi <= TRIAL_BOUND**2``, largest first: a sieve of the
    window by the primes below ``sqrt(hi)``, every multiple struck out by one NumPy indexing
    (a tenth of a millisecond for a window of 2**10 below 2**26, where :func:`prev_prime`
    tests each odd number in turn: 15 ms of the planning of a first 127-bit product)."""
    if hi > TRIAL_BOUND**2:
        raise ValueError(f"primes_between sieves below {TRIAL_BOUND}**2, not up to {hi}")
    lo = max(lo, 2)
    if hi <= lo:
        return []
    qs = _small_primes_array()
    qs = qs[qs * qs < hi]
    first = np.maximum(qs * qs, -(-lo // qs) * qs)  # the first multiple in the window that is not q
    counts = np.maximum((hi - 1 - first) // qs + 1, 0)
    start = np.cumsum(counts) - counts
    step = np.repeat(qs, counts)
    hits = np.repeat(first - lo, counts) + step * (np.arange(int(counts.sum())) - np.repeat(start, counts))
    prime = np.ones(hi - lo, dtype=bool)
    prime[hits] = False
    return (lo + np.flatnonzero(prime)[::-1]).tolist()


@lru_cache(maxsize=1)
def _small_primes_array() -> np.ndarray:
    """The primes below :data:`TRIAL_BOUND` (Eratosthenes' sieve, in NumPy: a fraction of a
    millisecond, where testing each number cost a fifth of a second at the first
    factorisation of a process)."""
    sieve = np.ones(TRIAL_BOUND, dtype=bool)
    sieve[:2] = False
    for q in range(2, math.isqrt(TRIAL_BOUND - 1) + 1):
        if sieve[q]:
            sieve[q * q::q] = False
    return np.flatnonzero(sieve)


@lru_cache(maxsize=1)
def _small_primes() -> tuple[int, ...]:
    """:func:`_small_primes_array` as Python ints."""
    return tuple(_small_primes_array().tolist())


def _root(c: int, k: int) -> int:
    """``floor(c ** (1/k))`` for ``c >= 1``, exactly (Newton on Python ints)."""
    x = 1 << -(-c.bit_length() // k)  # above the root
    while True:
        y = ((k - 1) * x + c // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y


def _perfect_power(c: int) -> tuple[int, int]:
    """``(b, k)`` with ``c = b**k`` and ``k`` as large as possible (``k = 1``: none)."""
    for k in range(c.bit_length(), 1, -1):
        b = _root(c, k)
        if b > 1 and b**k == c:
            base, e = _perfect_power(b)
            return base, e * k
    return c, 1


def _rho(n: int, steps: int) -> int | None:
    """A nontrivial factor of the odd composite ``n`` (not a perfect power) within ``steps``
    squarings of Pollard's rho in Brent's form, or None."""
    used = 0
    for c in range(1, 64):
        y, r, q, g, x, ys = 2, 1, 1, 1, 2, 2
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(128, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += 128
            used += 2 * r
            r *= 2
            if used > steps:
                return None
        if g == n:  # the batch overshot: step back one squaring at a time
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    return None


@lru_cache(maxsize=256)
def factor(m: int) -> tuple[dict[int, int], int]:
    """The prime factors of ``m >= 1`` found within the bounds above, as ``{prime: exponent}``
    (primes increasing), and the product of what is left unfactored (1 when complete)."""
    found: dict[int, int] = {}
    for q in _small_primes():
        if q * q > m:
            break
        while m % q == 0:
            m //= q
            found[q] = found.get(q, 0) + 1
    left, todo = 1, [m] if m > 1 else []
    while todo:
        c = todo.pop()
        if c < TRIAL_BOUND**2 or is_prime(c):  # no factor below TRIAL_BOUND: c is prime
            found[c] = found.get(c, 0) + 1
            continue
        base, k = _perfect_power(c)
        if k > 1:
            todo += [base] * k
            continue
        d = _rho(c, RHO_STEPS)
        if d is None:
            left *= c
        else:
            todo += [d, c // d]
    return dict(sorted(found.items())), left
