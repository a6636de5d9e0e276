"""The characteristic polynomial over Z from Krylov sequences of all primes at once
(:mod:`modlin.linalg._charpoly_z`): its layout (pieces of ``A``, prime sizes) keeps every
float64 product exact, Berlekamp-Massey finds minimal polynomials, a prime whose sequence
falls short gets the charpoly modulo that prime another way, and the result is python-flint's
``fmpz_mat.charpoly`` on random, structured and extreme matrices."""

from __future__ import annotations

import random

import flint
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from modlin import linalg
from modlin._arith.crt import crt, crt_rows
from modlin.linalg import _charpoly_z as cz


def ref(A) -> list[int]:
    A = np.asarray(A, dtype=object)
    if A.shape[0] == 0:
        return [1]
    return [int(c) for c in flint.fmpz_mat([[int(v) for v in row] for row in A]).charpoly().coeffs()]


# ---- the layout ------------------------------------------------------------------------------

@given(st.integers(1, 5000), st.integers(0, 2**200))
@settings(max_examples=300, deadline=None)
def test_layout_keeps_products_exact(n, amax):
    bits, c, T = cz._layout(n, amax)
    assert cz._MIN_BITS <= bits <= cz._MAX_BITS
    piece = amax if c == 0 else 2**c - 1
    assert n * piece * 2 ** (bits - 1) <= 2**52
    if c:
        assert c * T >= max(amax.bit_length(), 1)  # the pieces cover every bit of |a|
        assert c + bits <= 52  # Horner's rule over the pieces: residue * 2**c stays exact


def test_layout_one_piece_for_small_entries():
    assert cz._layout(400, 1024) == (34, 0, 1)
    bits, c, T = cz._layout(400, 2**63)
    assert c > 0 and T > 1


@pytest.mark.parametrize("dtype", [np.int64, object])
def test_pieces_sum_back_to_A(dtype):
    rng = np.random.default_rng(3)
    A = rng.integers(-(2**62), 2**62, (6, 6)).astype(dtype)
    A[0, 0] = -(2**62)
    if dtype is object:
        A[1, 1] = -(2**200) + 7
        A[2, 3] = 2**150
    amax = max(abs(int(v)) for v in A.ravel())
    _, c, T = cz._layout(6, amax)
    parts = cz._pieces(A, c)
    assert len(parts) == T
    assert all(np.abs(t).max() < 2**c for t in parts)
    back = sum(t.astype(np.int64).astype(object) * 2 ** (c * i) for i, t in enumerate(parts))
    assert (back == A.astype(object)).all()


def test_pieces_of_int64_least():
    A = np.array([[-(2**63), 1], [2**63 - 1, 0]], dtype=np.int64)
    _, c, T = cz._layout(2, 2**63)
    back = sum(t.astype(np.int64).astype(object) * 2 ** (c * i) for i, t in enumerate(cz._pieces(A, c)))
    assert (back == A.astype(object)).all()


# ---- Berlekamp-Massey --------------------------------------------------------------------------

def _sequence(coeffs, start, length, p):
    """The sequence of the monic recurrence ``coeffs`` (low degree first, leading 1 left out)."""
    s = list(start)
    while len(s) < length:
        d = len(coeffs)
        s.append(-sum(c * s[-d + i] for i, c in enumerate(coeffs)) % p)
    return s


@given(st.lists(st.integers(0, 2**31), min_size=1, max_size=12), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_berlekamp_massey_finds_the_recurrence(coeffs, rnd):
    p = 2**31 - 1
    n = len(coeffs)
    coeffs = [c % p for c in coeffs]
    start = [rnd.randrange(p) for _ in range(n)]
    S = np.array(_sequence(coeffs, start, 2 * n, p), dtype=np.int64).reshape(2 * n, 1)
    F = np.zeros((1, n + 1), dtype=np.int64)
    ok = np.zeros(1, dtype=np.bool_)
    cz._berlekamp_massey(S, np.array([p], dtype=np.int64), n, 0, 1, F, ok)
    if ok[0]:  # degree n: then it is the recurrence itself
        assert F[0].tolist() == coeffs + [1]
    else:  # shorter: only when the Hankel matrix of the sequence is singular
        M = [[int(S[i + j, 0]) for j in range(n)] for i in range(n)]
        assert flint.nmod_mat(M, p).rank() < n


def test_berlekamp_massey_fibonacci_and_zero():
    p = 1_000_003
    S = np.array(_sequence([p - 1, p - 1], [0, 1], 4, p), dtype=np.int64)[:, None]  # x^2 - x - 1
    F = np.zeros((1, 3), dtype=np.int64)
    ok = np.zeros(1, dtype=np.bool_)
    cz._berlekamp_massey(S, np.array([p], dtype=np.int64), 2, 0, 1, F, ok)
    assert ok[0] and F[0].tolist() == [p - 1, p - 1, 1]
    ok[0] = True
    cz._berlekamp_massey(np.zeros((4, 1), dtype=np.int64), np.array([p], dtype=np.int64), 2, 0, 1, F, ok)
    assert not ok[0]


# ---- the whole -----------------------------------------------------------------------------------

def _hadamard(k):
    H = np.array([[1]])
    for _ in range(k):
        H = np.block([[H, H], [H, -H]])
    return H


def _hilbert_scaled(n):
    """Hilbert's matrix times the lcm of its denominators: integers, ill-conditioned."""
    import math

    m = math.lcm(*range(1, 2 * n))
    return np.array([[m // (i + j + 1) for j in range(n)] for i in range(n)], dtype=object)


def _unimodular(r, n):
    L = np.tril(r.integers(-3, 4, (n, n)), -1) + np.eye(n, dtype=np.int64)
    U = np.triu(r.integers(-3, 4, (n, n)), 1) + np.eye(n, dtype=np.int64)
    return L @ U


CASES = {
    "hilbert scaled": lambda r: _hilbert_scaled(12),
    "unimodular": lambda r: _unimodular(r, 15),
    "random 10-bit": lambda r: r.integers(-(2**10), 2**10, (40, 40)),
    "random 1x1": lambda r: r.integers(-5, 5, (1, 1)),
    "2x2": lambda r: np.array([[1, 2], [3, 4]]),
    "hadamard 32": lambda r: _hadamard(5),
    "near 2**62": lambda r: r.integers(2**62 - 100, 2**62, (9, 9)) * r.choice([-1, 1], (9, 9)),
    "far beyond int64": lambda r: np.array([[int(v) * 2**100 + 1 for v in row] for row in r.integers(-9, 9, (6, 6))],
                                           dtype=object),
    "zero": lambda r: np.zeros((7, 7), dtype=np.int64),
    "scalar": lambda r: 5 * np.eye(8, dtype=np.int64),
    "repeated blocks": lambda r: np.kron(np.eye(3, dtype=np.int64), r.integers(-3, 3, (4, 4))),
    "nilpotent": lambda r: np.triu(r.integers(-9, 9, (10, 10)), 1),
    "0/1": lambda r: r.integers(0, 2, (60, 60)),
    "uint8": lambda r: r.integers(0, 256, (20, 20)).astype(np.uint8),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_flint(name):
    A = CASES[name](np.random.default_rng(len(name)))
    assert cz.charpoly_integer(A.astype(np.int64) if A.dtype == np.uint8 else A, seed=1) == ref(A)


def test_empty():
    assert cz.charpoly_integer(np.zeros((0, 0), dtype=np.int64)) == [1]


@pytest.mark.parametrize("every", [1, 2, 3])
def test_primes_whose_sequence_falls_short(monkeypatch, every):
    """A prime whose sequence does not certify its polynomial gets it modulo that prime
    another way: forcing that on every prime, or on some, changes nothing."""
    seq = cz._sequence_charpolys

    def some_fail(*args):
        F, ok = seq(*args)
        ok[::every] = False
        F[~ok] = -1  # garbage that must not be used
        return F, ok

    monkeypatch.setattr(cz, "_sequence_charpolys", some_fail)
    rng = np.random.default_rng(every)
    for n in (5, 30, 170):  # Hessenberg and block Krylov for the fallback
        A = rng.integers(-50, 50, (n, n))
        assert cz.charpoly_integer(A, seed=2) == ref(A)


def test_groups_of_primes(monkeypatch):
    """Primes run in groups when the memory budget asks: the same answer."""
    monkeypatch.setattr(cz, "_group", lambda n, T, P: 3)
    A = np.random.default_rng(9).integers(-(2**20), 2**20, (25, 25))
    assert cz.charpoly_integer(A, seed=4) == ref(A)


@given(st.integers(1, 12), st.integers(0, 200), st.integers(0, 2**32))
@settings(max_examples=60, deadline=None)
def test_random_sizes_and_widths(n, width, seed):
    rng = random.Random(seed)
    A = np.array([[rng.randrange(-(2**width), 2**width + 1) for _ in range(n)] for _ in range(n)], dtype=object)
    assert cz.charpoly_integer(A, seed=seed) == ref(A)


def test_seeds_change_nothing():
    A = np.random.default_rng(5).integers(-99, 99, (30, 30))
    assert {tuple(cz.charpoly_integer(A, seed=s)) for s in range(4)} == {tuple(ref(A))}


def test_public_door_uses_it():
    A = np.random.default_rng(6).integers(-(2**10), 2**10, (50, 50))
    assert linalg.charpoly(A).tolist() == ref(A)


def test_cost_model_counts_the_gemms():
    A = np.random.default_rng(7).integers(-(2**10), 2**10, (100, 100))
    bits, _, T = cz._layout(100, int(np.abs(A).max()))
    P = len(cz._random_primes(bits, 2 * cz.charpoly_bound(A) + 1, random.Random(0)))
    cost = cz.charpoly_integer_cost(A)
    assert 2 * 100 * T * 100**2 * (P - 1) <= cost <= 2 * 2 * 100 * T * 100**2 * (P + 1)


# ---- the CRT of rows -------------------------------------------------------------------------------

@given(st.lists(st.integers(0, 2**40), min_size=1, max_size=5))
def test_crt_rows_against_crt(values):
    moduli = [1_000_003, 998_244_353, 2**31 - 1, 1_000_000_007]
    M = 1
    for m in moduli:
        M *= m
    rows = [[v % m for m in moduli] for v in values]
    assert crt_rows(rows, moduli) == [v % M for v in values] == [crt(r, moduli) for r in rows]


@pytest.mark.parametrize("A", [
    np.array([[-5, 7], [0, 2**62]]),
    np.array([[True, False], [False, True]]),
    np.array([[2**64 - 1, 3]], dtype=np.uint64),
    np.array([[-(2**63), 1]]),
    np.array([[-(2**200) + 3, 5]], dtype=object),
    np.zeros((0, 3), dtype=np.int64),
], ids=["int64", "bool", "uint64", "int64-least", "object", "empty"])
def test_signed_pieces_every_dtype(A):
    """The pieces the lifting and the charpoly's GEMMs share: digits of |a| with a's sign, each
    below 2**c, summing back to A, their magnitudes summing back to |A|."""
    from modlin.linalg._integers import signed_pieces

    c = 13
    P = signed_pieces(A, c)
    assert P and all(p.dtype == np.float64 and (np.abs(p) < 2**c).all() for p in P)
    back = sum(p.astype(np.int64).astype(object) * 2 ** (c * t) for t, p in enumerate(P))
    mags = sum(np.abs(p).astype(np.int64).astype(object) * 2 ** (c * t) for t, p in enumerate(P))
    assert (back == A.astype(object)).all() and (mags == np.abs(A.astype(object))).all()
