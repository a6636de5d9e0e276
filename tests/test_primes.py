"""modlin._arith.primes gives galois's answers without importing galois."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import flint
import galois
import pytest

from modlin._arith import crt as _crt, primes as _primes

RNG = random.Random(7)
SMALL = list(range(-3, 3000))
LARGE = [RNG.randrange(2**20, 2**80) for _ in range(1500)]
# strong pseudoprimes to several small bases, Carmichael numbers, Mersenne numbers, and the limit
TRICKY = [2047, 1373653, 25326001, 3215031751, 2152302898747, 3474749660383, 341550071728321,
          3825123056546413051, 318665857834031151167461, 561, 41041, 825265, 321197185,
          2**61 - 1, 2**89 - 1, 2**127 - 1, 2**64 - 59, 2**64 + 13,
          _primes.DETERMINISTIC_LIMIT - 2, _primes.DETERMINISTIC_LIMIT + 2]


#: Strong pseudoprimes to the bases 2..23 and 2..37 that galois 0.4 calls prime (with their factors).
GALOIS_WRONG = {3825123056546413051: (149491, 747451, 34233211),
                318665857834031151167461: (399165290221, 798330580441)}


@pytest.mark.parametrize("chunk", range(4))
def test_is_prime_matches_galois(chunk):
    values = [n for n in (SMALL + LARGE + TRICKY)[chunk::4] if n not in GALOIS_WRONG]
    assert [_primes.is_prime(n) for n in values] == [bool(galois.is_prime(n)) if n >= 0 else False
                                                     for n in values]


def test_pseudoprimes_are_composite():
    for n, fs in GALOIS_WRONG.items():
        assert math.prod(fs) == n and not _primes.is_prime(n)


def test_prev_prime_matches_galois():
    for n in [2, 3, 4, 5, 2**21, 2**26, 2**26 - 5, 2**40 + 7] + [RNG.randrange(3, 2**60) for _ in range(200)]:
        assert _primes.prev_prime(n) == int(galois.prev_prime(n)), n
    with pytest.raises(ValueError):
        _primes.prev_prime(1)


def test_factors_match_galois():
    values = list(range(2, 2000)) + [RNG.randrange(2, 2**52) for _ in range(200)] + [
        1, 221 * 2**10, 5**7 * 13**3, (2**31 - 1) * (2**29 - 3), 4099 * 4111, 2**52 - 1,
        (2**61 - 1) ** 3, 65537**4 * 3, (2**33 - 9) * (2**34 - 41)]  # powers and two rho-sized factors
    for m in values:
        ps, es = galois.factors(m) if m > 1 else ([], [])
        found, left = _primes.factor(m)
        assert left == 1 and found == {int(q): int(e) for q, e in zip(ps, es)}, m
        assert list(found) == sorted(found)


def test_factoring_is_bounded():
    """A product of two 80-bit primes is out of the bounded rho's reach: reported, not run."""
    q1, q2 = _primes.prev_prime(2**80), _primes.prev_prime(2**79)
    found, left = _primes.factor(12 * q1 * q2)
    assert found == {2: 2, 3: 1} and left == q1 * q2
    assert _primes._perfect_power(q1**3) == (q1, 3) and _primes._perfect_power(q1) == (q1, 1)


def test_crt():
    mods = [221, 229, 233, 4]
    for x in [0, 1, 12345, 221 * 229 * 233 * 4 - 1]:
        assert _crt.crt([x % q for q in mods], mods) == x
    assert _crt.crt((5,), (7,)) == 5


def test_planning_does_not_import_galois():
    # primes for residue number systems and 2M moduli come from modlin._arith.primes
    code = ("import sys, numpy as np, modlin\n"
            "modlin.plan(2**127 - 1, 64, 64, 64); modlin.plan(2**31 - 1, 64, 64, 64)\n"
            "modlin.gaussian.sqrt_minus_one(2097133); modlin.ozaki.moduli_for('complex')\n"
            "print('galois' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_small_primes_are_the_primes_below_the_trial_bound():
    small = _primes._small_primes()
    assert small == tuple(int(q) for q in galois.primes(_primes.TRIAL_BOUND - 1))
    assert small[-1] == 65521 and len(small) == 6542  # pi(2**16) = 6542


def test_primes_below_any_order_of_counts():
    from modlin._arith.moduli import primes_below

    top = 2**22 + 1001  # a top no plan uses, so the search starts here
    expected = [int(q) for q in galois.primes(top - 1)[::-1][:12]]
    for count in (5, 2, 12, 7, 0):
        assert primes_below(top, count) == tuple(expected[:count])
    assert primes_below(20, 10) == (19, 17, 13, 11, 7, 5, 3)
    big = 2**32 + 1000  # above the sieve's reach: prime by prime
    q1 = int(galois.prev_prime(big - 1))
    q2 = int(galois.prev_prime(q1 - 1))
    assert primes_below(big, 2) == (q1, q2)


@pytest.mark.parametrize("lo, hi", [(0, 0), (0, 3), (2, 3), (3, 3), (10, 5), (0, 3000), (2**22 - 5000, 2**22),
                                    (2**26 - 4096, 2**26 + 1), (65521, 65536 + 200), (2**32 - 2000, 2**32)])
def test_primes_between_is_the_primes_of_the_window_largest_first(lo, hi):
    assert _primes.primes_between(lo, hi) == [q for q in range(hi - 1, lo - 1, -1) if _primes.is_prime(q)]


def test_primes_between_refuses_windows_beyond_its_sieve():
    with pytest.raises(ValueError, match="sieves below"):
        _primes.primes_between(2**32, 2**32 + 10)


#: Factorisations of the bounds of _primes._BASE_COUNTS (the least strong pseudoprimes to the
#: first 1, 2, 3, 4, 5, 6, 7, 9, 12, 13 prime bases, OEIS A014233)
_PSEUDOPRIME_FACTORS = ((23, 89), (829, 1657), (2251, 11251), (151, 751, 28351), (6763, 10627, 29947),
                        (1303, 16927, 157543), (10670053, 32010157), (149491, 747451, 34233211),
                        (399165290221, 798330580441), (1287836182261, 2575672364521))


@pytest.mark.parametrize("bound, factors", list(zip([b for b, _ in _primes._BASE_COUNTS], _PSEUDOPRIME_FACTORS)))
def test_is_prime_at_each_base_count_bound(bound, factors):
    # each bound is the least strong pseudoprime to the bases used below it: composite (galois
    # 0.4 takes some of these bounds for primes, hence the known factors), and the numbers
    # around it are decided as python-flint decides them
    assert math.prod(factors) == bound and not _primes.is_prime(bound)
    for n in range(bound - 60, bound + 60):
        assert _primes.is_prime(n) == bool(flint.fmpz(n).is_prime()), n


def _next_prime(x: int) -> int:
    x |= 1
    while not flint.fmpz(x).is_prime():
        x += 2
    return x


def test_baillie_psw_beyond_the_deterministic_limit():
    """Above DETERMINISTIC_LIMIT is_prime is Baillie-PSW: against python-flint's proven answers
    on random odd numbers of 82 to 300 bits, primes, products of two primes and squares."""
    rng = random.Random(7)
    for bits in (82, 100, 128, 200, 300):
        for _ in range(150):
            x = rng.getrandbits(bits) | (1 << (bits - 1)) | 1
            if x >= _primes.DETERMINISTIC_LIMIT:
                assert _primes.is_prime(x) == bool(flint.fmpz(x).is_prime()), x
    for _ in range(40):
        q, r = _next_prime(rng.getrandbits(90) | 2**89), _next_prime(rng.getrandbits(60) | 2**59)
        assert _primes.is_prime(q) and not _primes.is_prime(q * r) and not _primes.is_prime(q * q)


def test_is_prime_below_the_trial_bound_matches_the_sieve():
    primes = set(_primes._small_primes())
    assert all(_primes.is_prime(n) == (n in primes) for n in range(_primes.TRIAL_BOUND))
