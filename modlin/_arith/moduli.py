"""Moduli: residue number system bases, and 2M's moduli with their square roots of -1.

A residue number system computes an integer product modulo pairwise-coprime moduli
``m_1 .. m_N`` with ``M = prod m_i >= 2*bound + 2`` (:class:`Basis`, :func:`cover_count`,
:func:`int8_moduli`, :func:`primes_below`). 2M (Caday, arXiv 2609.05419) multiplies
Gaussian integers modulo ``m`` with two real products, through the two maps
``a + bi -> a +- s b`` where ``s**2 = -1 (mod m)``: it needs ``m`` odd with every prime
factor ``1 (mod 4)`` (:func:`is_twom_modulus`, :func:`sqrt_minus_one`, :func:`twom_moduli`;
:mod:`modlin.gaussian` makes these names public). Also the one check that a modulus is an
integer of at least 2 (:func:`check_modulus`).
"""

from __future__ import annotations

import itertools
import math
import operator
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from modlin._arith.primes import RHO_STEPS, TRIAL_BOUND, factor, prev_prime, primes_between

#: Moduli stay below 2**26 so that a product of two residues is exact in float64.
MAX_RNS_MODULUS = 2**26


@lru_cache(maxsize=None)
def int8_moduli() -> tuple[int, ...]:
    """Pairwise-coprime moduli <= 256, greedily from the top: 256, 255, 253, 251, ..."""
    chosen: list[int] = []
    for m in range(256, 2, -1):
        if all(math.gcd(m, c) == 1 for c in chosen):
            chosen.append(m)
    return tuple(chosen)


#: Per ``top``, the primes below it found so far, in decreasing order: the planner asks for
#: many counts below the same tops, and each prime is searched for once.
_below: dict[int, list[int]] = {}


_below_lock = threading.Lock()


def primes_below(top: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes below ``top`` (fewer if there are not that many)."""

    with _below_lock:
        found = _below.setdefault(top, [])
        q = found[-1] if found else top  # every prime in [q, top) is found
        while len(found) < count and q > 3:  # odd primes only
            if q <= TRIAL_BOUND**2:  # a window at a time, as many as needed
                lo = max(3, q - 64 * (count - len(found)))
                found += primes_between(lo, q)
                q = lo
            else:
                q = prev_prime(q - 1)
                found.append(q)
        return tuple(found[:count])


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
        if math.lcm(*self.moduli) == math.prod(self.moduli):  # pairwise coprime: one check, not N**2
            return
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


def planned_range(bound: int) -> int:
    """The product of moduli the planners give products bounded by ``bound``: the
    ``2 * bound + 2`` of exact recovery with a relative margin of ``2**-33``, which
    keeps :func:`reconstruct` off its exact fallback (see ``AMBIGUOUS``)."""
    return 2 * bound + 2 + (bound >> 32)


def cover_count(moduli, bound: int) -> int | None:
    """How many leading ``moduli`` the planners take for ``bound``: enough for
    :func:`planned_range`, or, from a pool too small for that margin, for exact
    recovery alone (``reconstruct`` settles the few edge values exactly); None if
    even all of them fall short."""
    for need in (planned_range(bound), 2 * bound + 2):
        prod = 1
        for i, q in enumerate(moduli):
            prod *= q
            if prod >= need:
                return i + 1
    return None


#: The least root is the least of ``2**(r-1)`` CRT combinations for ``r`` distinct
#: prime factors: more than this many are refused.
MAX_DISTINCT_FACTORS = 20


def _factors(m: int) -> dict[int, int]:
    """The prime factorisation of ``m``, or ValueError when the bounded search cannot finish it."""
    found, left = factor(m)
    if left > 1:
        raise ValueError(_unfactored(m, left))
    return found


def _unfactored(m: int, left: int) -> str:
    return (f"m = {m} has a {left.bit_length()}-bit composite factor that modlin cannot factor quickly "
            f"(trial division below 2**16, then {RHO_STEPS} steps of Pollard's rho); 2M needs the prime "
            "factors of m: pass a prime or a product of known primes, or use algorithm='3m'")


def why_not_twom(m: int) -> str | None:
    """None if ``m`` admits 2M, else the reason (naming the offending factor).

    ValueError when that depends on a factor the bounded factoring cannot find.
    """
    if m % 2 == 0:
        return f"m = {m} is even (2M divides by 2)"
    found, left = factor(m)
    for q in sorted(found):
        if q % 4 == 3:
            return f"m = {m} has the prime factor {q} = 3 (mod 4), so -1 has no square root mod m"
    if left % 4 == 3:  # an odd number of its prime factors are 3 (mod 4)
        return (f"m = {m} has a factor {left} = 3 (mod 4), so it has a prime factor 3 (mod 4) "
                "and -1 has no square root mod m")
    if left > 1:
        raise ValueError(_unfactored(m, left))
    return None


def is_twom_modulus(m: int) -> bool:
    """True when 2M works modulo ``m``: ``m`` odd, every prime factor ``1 (mod 4)``.

    ``m = 1`` gives False (there is nothing to multiply modulo 1).

    Raises
    ------
    ValueError
        ``m < 1``, or a composite ``m`` that cannot be factored quickly (see
        :func:`sqrt_minus_one`) and is not ruled out by the factors found.

    Examples
    --------
    >>> from modlin import gaussian
    >>> gaussian.is_twom_modulus(221), gaussian.is_twom_modulus(231), gaussian.is_twom_modulus(1)
    (True, False, False)
    """
    if as_index(m) == 1:
        return False
    m = check_modulus(m)
    return m > 2 and why_not_twom(m) is None


@lru_cache(maxsize=256)
def sqrt_minus_one(m: int) -> int:
    """The least ``s`` in ``[0, m)`` with ``s**2 = -1 (mod m)``, of an odd ``m`` whose
    prime factors are all ``1 (mod 4)``.

    ``m`` is factored (:func:`modlin._arith.primes.factor`: trial division below
    ``2**16``, an exact primality test and a bounded Pollard rho; every
    ``m < 2**68`` factors). Modulo each prime factor ``q`` the root is
    ``c**((q-1)/4)`` for the least quadratic non-residue ``c`` (Euler's
    criterion: building ``galois.GF(q)`` for its ``sqrt`` costs most of a
    second per prime, this a few modular powers). Roots are lifted to prime
    powers by Hensel's step and combined by CRT; the least of the
    ``2**r`` combinations (``r`` distinct prime factors) is returned.

    Raises
    ------
    ValueError
        If no square root of -1 exists modulo ``m`` (the message names why),
        or ``m`` cannot be factored quickly (a composite part without prime
        factors below about ``2**34``), or it has more than 20 distinct prime
        factors.

    Examples
    --------
    >>> from modlin import gaussian
    >>> s = gaussian.sqrt_minus_one(221)
    >>> s, (s * s + 1) % 221
    (21, 0)
    >>> gaussian.sqrt_minus_one(2**127 + 29)  # a prime 1 (mod 4): no factoring needed
    70132397335041220679553555900003183873
    """
    m = check_modulus(m)
    if m == 1 or m < 5:
        raise ValueError(f"m = {m} has no square root of -1 usable by 2M; use algorithm='3m'")
    why = why_not_twom(m)
    if why:
        raise ValueError(f"{why}; use algorithm='3m' or 'auto'")
    factors = _factors(m)
    if len(factors) > MAX_DISTINCT_FACTORS:
        raise ValueError(f"m = {m} has {len(factors)} distinct prime factors; the least square root of -1 "
                         f"is one of 2**{len(factors) - 1} candidates, too many to search (at most "
                         f"{MAX_DISTINCT_FACTORS} factors)")
    roots, mods = [], []
    for q, e in factors.items():
        c = 2
        while pow(c, (q - 1) // 2, q) != q - 1:
            c += 1
        s = pow(c, (q - 1) // 4, q)
        qe = q
        for _ in range(1, e):  # Hensel: s <- s - (s^2 + 1) / (2 s)  mod q^(j+1)
            qe *= q
            s = (s - (s * s + 1) * pow(2 * s, -1, qe)) % qe
        roots.append(s)
        mods.append(qe)
    # each prime power has two roots (s and -s): the roots of m are the sums of +-s_i e_i
    # (e_i the CRT idempotents); s and m - s are one pair, so the first sign stays fixed
    terms = [r * (m // q) * pow(m // q, -1, q) % m for r, q in zip(roots, mods)]
    best = m
    for signs in itertools.product((1, -1), repeat=len(terms) - 1):
        x = (terms[0] + sum(t if g > 0 else -t for g, t in zip(signs, terms[1:]))) % m
        best = min(best, x, m - x)
    assert (best * best + 1) % m == 0
    return best


def twom_moduli(limit: int = 255, count: int | None = None) -> tuple[int, ...]:
    """Pairwise-coprime 2M moduli up to ``limit``, greedily from the top.

    With the default ``limit = 255`` these are the int8-compatible 2M moduli:
    241, 233, 229, 221, 205, 197, 193, 181, 173, 157, 149, 137, 113, 109, 101,
    97, 89, 73, 61, 53, 37, 29.

    Examples
    --------
    >>> from modlin import gaussian
    >>> gaussian.twom_moduli()[:5]
    (241, 233, 229, 221, 205)
    """
    chosen: list[int] = []
    for q in range(int(limit), 4, -1):
        if count is not None and len(chosen) >= count:
            break
        if q % 2 and all(math.gcd(q, c) == 1 for c in chosen) and why_not_twom(q) is None:
            chosen.append(q)
    return tuple(chosen)


@lru_cache(maxsize=64)
def twom_primes(bits: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes ``1 (mod 4)`` below ``2**bits``."""
    out: list[int] = []
    q = 2**bits
    while len(out) < count:
        q = prev_prime(q - 1)
        if q % 4 == 1:
            out.append(q)
    return tuple(out)


def as_index(p) -> int | None:
    """``p`` as an int if it is an integer (``operator.index``: int, NumPy ints, flint's fmpz), else None."""
    if isinstance(p, bool):
        return None
    try:
        return operator.index(p)
    except TypeError:
        return None


def check_modulus(p) -> int:
    """``p`` as a Python int: anything :func:`operator.index` takes (int, NumPy integers,
    python-flint's ``fmpz``) except booleans, at least 2."""
    try:
        if isinstance(p, bool):  # operator.index takes True; NumPy's bool_ it refuses itself
            raise TypeError
        p = operator.index(p)
    except TypeError:
        raise TypeError(f"the modulus must be an integer, got {type(p).__name__} {p!r}") from None
    if p < 2:
        raise ValueError(f"the modulus must be at least 2, got {p}")
    return p
