"""Primality, previous primes, factors and CRT of Python ints, without importing galois.

The planners need primes just below ``2**26`` (residue number systems) or ``2**21``
(2M moduli) and the factors of moduli that are usually prime. galois answers all of
these, but importing it costs a few tenths of a second (and numba's initialisation
with it) in every process whose first product needs one. Below
:data:`DETERMINISTIC_LIMIT` the Miller-Rabin test with the first thirteen primes as
bases is exact (Sorenson and Webster, "Strong pseudoprimes to twelve prime bases",
Math. Comp. 86 (2017): no strong pseudoprime to the bases 2..37 is below
``3.3 * 10**24``); above it, and for factoring composites with a large cofactor,
galois is asked. The answers are galois's, except on the strong pseudoprimes that
galois 0.4 takes for primes (3825123056546413051 = 149491 * 747451 * 34233211 is
one): for the planners' moduli, below ``2**26``, the two always agree.
"""

from __future__ import annotations

import math

__all__ = ["is_prime", "prev_prime", "factors", "crt"]

#: Miller-Rabin with :data:`_BASES` decides primality exactly below this bound.
DETERMINISTIC_LIMIT = 3317044064679887385961981
_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
#: Trial division by the odd numbers up to this bound before galois is asked to factor.
_TRIAL = 1 << 12


def is_prime(n: int) -> bool:
    """Whether the integer ``n`` is prime (exact; galois beyond :data:`DETERMINISTIC_LIMIT`)."""
    if n < 2:
        return False
    for q in _BASES:
        if n % q == 0:
            return n == q
    if n >= DETERMINISTIC_LIMIT:
        import galois

        return bool(galois.is_prime(n))
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _BASES:
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


def factors(m: int) -> dict[int, int]:
    """The prime factorisation of ``m >= 1`` as ``{prime: exponent}``, primes increasing."""
    out: dict[int, int] = {}
    for q in (2,) + tuple(range(3, _TRIAL, 2)):
        if q * q > m:
            break
        while m % q == 0:
            out[q] = out.get(q, 0) + 1
            m //= q
    if m > 1:
        if is_prime(m):
            out[m] = out.get(m, 0) + 1
        else:
            import galois

            primes, exps = galois.factors(m)
            for q, e in zip(primes, exps):
                out[int(q)] = out.get(int(q), 0) + int(e)
    return dict(sorted(out.items()))


def crt(residues, moduli) -> int:
    """The ``x`` in ``[0, prod(moduli))`` congruent to each residue modulo its (pairwise
    coprime) modulus."""
    M = math.prod(moduli)
    x = 0
    for r, q in zip(residues, moduli):
        c = M // q
        x += r * c * pow(c, -1, q)
    return x % M
