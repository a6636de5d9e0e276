"""Products modulo any p >= 2 through residue number systems (RNS / multimodular CRT).

Every result is compared EXACTLY with independent oracles: Python integers
(object-array products reduced once) and python-flint (``nmod_mat`` for
``p < 2**64``, ``fmpz_mod_mat`` above). The internals (``Basis``, ``residues``,
``reconstruct``, ``pieces_of``, ``balanced_lift``, ``choose_moduli``) are
checked against their contracts only (congruences and ranges), so that their
implementation can change underneath.
"""

from __future__ import annotations

import dataclasses
import math

import galois
import numpy as np
import pytest
from hypothesis import given, strategies as st

import modlin
from conftest import flint_matmul, rand_ints, ref_matmul
from modlin._arith.crt import reconstruct
from modlin._arith.integers import balanced_lift
from modlin._arith.moduli import Basis, int8_moduli
from modlin._arith.residues import pieces_of, residues
from modlin._planning.rnsplan import RNSPlan, choose_moduli

# ----------------------------------------------------------------- moduli

P256 = int(galois.next_prime(2**255))      # a 256-bit prime
P1024 = int(galois.prev_prime(2**1024))    # a 1024-bit prime
BELOW_2_52 = int(galois.prev_prime(2**52))
ABOVE_2_52 = int(galois.next_prime(2**52))
BELOW_2_63 = int(galois.prev_prime(2**63))  # 2**63 - 25
ABOVE_2_63 = int(galois.next_prime(2**63))

#: Moduli that must go through RNS (p >= 2**52), primes and composites.
BIG_MODULI = [
    2**52, ABOVE_2_52, 2**61 - 1, BELOW_2_63, 2**63 - 1, 2**63, 2**63 + 1, ABOVE_2_63,
    2**64 - 59, 2**64 - 1, 2**64, 2**64 + 1, 10**30, 2**100, 3**80, 2**127 - 1, P256, P1024,
]
#: Moduli whose int8 RNS is possible: 2*bits(p) + log2(k) stays under the ~341 bits of int8_moduli().
INT8_OK = [p for p in BIG_MODULI if p.bit_length() <= 128]

MODULUS_IDS = {2**52: "2^52", ABOVE_2_52: "nextprime(2^52)", 2**61 - 1: "2^61-1", BELOW_2_63: "prevprime(2^63)",
               2**63 - 1: "2^63-1", 2**63: "2^63", 2**63 + 1: "2^63+1", ABOVE_2_63: "nextprime(2^63)",
               2**64 - 59: "2^64-59", 2**64 - 1: "2^64-1", 2**64: "2^64", 2**64 + 1: "2^64+1",
               10**30: "10^30", 2**100: "2^100", 3**80: "3^80", 2**127 - 1: "2^127-1", P256: "p256",
               P1024: "p1024", BELOW_2_52: "prevprime(2^52)"}


def pid(p):
    return MODULUS_IDS.get(p, str(p))


# ----------------------------------------------------------------- oracles

def result_dtype(p: int):
    return np.dtype(np.int64) if p <= 2**63 else np.dtype(object)


def assert_mod_exact(C, A, B, p: int, oracle=ref_matmul) -> None:
    """``C`` is ``A @ B mod p``: the documented dtype, entries in ``[0, p)``, equal to ``oracle``."""
    R = oracle(A, B, p)
    if isinstance(R, int):  # 1-D @ 1-D: a scalar
        if p <= 2**63:
            assert isinstance(C, np.integer) and C.dtype == np.int64, type(C)
        else:
            assert isinstance(C, int), type(C)
        assert int(C) == R
        return
    assert isinstance(C, np.ndarray), type(C)
    assert C.dtype == result_dtype(p), (C.dtype, p)
    assert C.shape == R.shape, (C.shape, R.shape)
    if C.size:
        vals = C.astype(object)
        assert all(0 <= int(v) < p for v in vals.ravel()), "result not reduced into [0, p)"
        if C.dtype == object:
            assert all(type(v) is int for v in C.ravel()), "object results must hold Python ints"
    mism = np.argwhere(C.astype(object) != R)
    assert mism.size == 0, (
        f"{len(mism)} mismatching entries mod p = {p}; first at {tuple(mism[0])}: "
        f"got {C[tuple(mism[0])]}, expected {R[tuple(mism[0])]}"
    )


def gf(p: int):
    """``galois.GF(p)`` without the (slow, for big p) primitive-element search: modlin uses none."""
    return galois.GF(p, primitive_element=2, verify=False)


# ===================================================================== Basis

def test_basis_M_and_covers():
    b = Basis((2**26 - 5, 65521, 256, 255))
    assert b.M == (2**26 - 5) * 65521 * 256 * 255
    # covers(bound) iff every |c| <= bound is recovered: M >= 2*bound + 2
    top = (b.M - 2) // 2
    assert b.covers(0) and b.covers(top)
    assert not b.covers(top + 1)
    assert Basis((3,)).covers(0) and not Basis((3,)).covers(1)
    assert Basis((2, 3)).covers(2) and not Basis((2, 3)).covers(3)
    assert Basis(()).M == 1 and not Basis(()).covers(0)


def test_basis_is_frozen_and_hashable():
    b = Basis((7, 11))
    assert hash(b) == hash(Basis((7, 11)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.moduli = (3,)


@pytest.mark.parametrize("moduli", [(6, 10), (7, 7), (2**26 - 5, 3, 9), (256, 2), (255, 253, 51)])
def test_basis_refuses_common_factors(moduli):
    with pytest.raises(ValueError, match="pairwise coprime"):
        Basis(moduli)


@pytest.mark.parametrize("moduli", [(1,), (0, 3), (-7, 3), (2**26,), (3, 2**40), (3.0, 5), (7, "11")])
def test_basis_refuses_bad_moduli(moduli):
    with pytest.raises(ValueError, match=r"\[2, 2\*\*26\)"):
        Basis(moduli)


def test_basis_accepts_largest_modulus():
    assert Basis((2**26 - 1, 2**26 - 3)).M == (2**26 - 1) * (2**26 - 3)


def test_int8_moduli():
    mods = int8_moduli()
    assert mods[:4] == (256, 255, 253, 251)
    assert all(2 <= q <= 256 for q in mods)
    assert all(math.gcd(a, b) == 1 for i, a in enumerate(mods) for b in mods[:i])
    Basis(mods)  # valid basis
    # every int8 word of a balanced residue fits [-128, 127]
    assert all(-(q // 2) >= -128 and (q - 1) // 2 <= 127 for q in mods)


# ===================================================================== pieces

def _pieces_value(pieces: np.ndarray, signed: bool) -> list[int]:
    out = []
    H = pieces.shape[0]
    for col in pieces.T:
        v = sum(int(w) << (16 * j) for j, w in enumerate(col))
        if signed and v >> (16 * H - 1):
            v -= 1 << (16 * H)
        out.append(v)
    return out


EDGE = sorted({s * (2**e + d) for e in (0, 15, 16, 31, 32, 33, 62, 63, 64, 65, 127, 128, 200, 1000)
               for d in (-1, 0, 1) for s in (1, -1)})


def test_pieces_of_int64():
    x = np.array([-2**63, -2**32, -1, 0, 1, 2**31, 2**32 - 1, 2**63 - 1], dtype=np.int64).reshape(2, 4)
    pieces, signed = pieces_of(x)
    assert signed and pieces.dtype == np.uint16 and pieces.shape == (4, 8)
    assert _pieces_value(pieces, signed) == [int(v) for v in x.ravel()]


def test_pieces_of_uint64():
    x = np.array([0, 1, 2**32, 2**63, 2**64 - 1], dtype=np.uint64)
    pieces, signed = pieces_of(x)
    assert not signed and pieces.dtype == np.uint16 and pieces.shape == (4, 5)
    assert _pieces_value(pieces, signed) == [int(v) for v in x]


@pytest.mark.parametrize("values", [EDGE, [0], [-1], [2**31 - 1], [-2**31], [2**31], [-(2**4000) + 17, 5]])
def test_pieces_of_object(values):
    x = np.empty(len(values), dtype=object)
    x[:] = values
    pieces, signed = pieces_of(x)
    assert signed and pieces.dtype == np.uint16 and pieces.shape[1] == len(values)
    assert _pieces_value(pieces, signed) == list(values)


def test_pieces_of_refuses_other_dtypes():
    with pytest.raises(TypeError):
        pieces_of(np.array([1, 2], dtype=np.int32))
    with pytest.raises(TypeError):
        pieces_of(np.array([1.0]))
    with pytest.raises(TypeError, match="integers; found float 2.5"):
        pieces_of(np.array([1, 2.5], dtype=object))
    pieces, _ = pieces_of(np.array([np.int64(-3), 2**70], dtype=object))  # NumPy integers are converted
    assert _pieces_value(pieces, True) == [-3, 2**70]


# ===================================================================== residues

BASES = [
    Basis((2**26 - 5, 2**26 - 27, 2**25 - 39, 65521, 256, 255, 7)),
    Basis(int8_moduli()),
    Basis((3,)),
    Basis((2, 3, 5, 7)),
]


def _assert_residues(r, x, basis):
    """``r[i, ...]`` is an integer congruent to ``x`` modulo ``m_i``, of magnitude below ``m_i``."""
    assert r.shape == (len(basis.moduli),) + x.shape
    flat = r.reshape(len(basis.moduli), -1)
    xs = [int(v) for v in x.ravel()]
    for i, m in enumerate(basis.moduli):
        for rv, v in zip(flat[i], xs):
            iv = int(rv)
            assert iv == rv, "residue is not an integer"
            assert abs(iv) < m and (iv - v) % m == 0, (m, v, rv)


@pytest.mark.parametrize("basis", BASES, ids=lambda b: f"{len(b.moduli)}moduli")
def test_residues_int64(basis, rng):
    x = np.concatenate([rng.integers(-2**63, 2**63 - 1, 200, endpoint=True),
                        np.array([-2**63, -2**63 + 1, -2**32, -1, 0, 1, 2**32, 2**63 - 1])]).reshape(8, 26)
    _assert_residues(residues(x, basis), x, basis)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8])
@pytest.mark.parametrize("threads", [1, 2])
def test_residues_int64_every_word_dtype(dtype, threads, rng, monkeypatch):
    # int64 residues come straight from the entries (no pieces): in place for float64 words,
    # through a float64 chunk for the others; many uneven chunks, split across workers
    from modlin._arith.residues import Pieces16
    from modlin._engines import threads as _threads
    from modlin._runtime.calibration import RESIDUE_CHUNK

    monkeypatch.setattr(_threads, "MIN_WORK", 0)  # jobs of any size split across the workers

    moduli = int8_moduli()[:3] if dtype == np.int8 else (2**23 - 15, 2**22 - 3, 65521, 7)
    E = 5 * RESIDUE_CHUNK + 37
    x = rng.integers(-2**63, 2**63 - 1, E, endpoint=True)
    x[:4] = [-2**63, 2**63 - 1, -1, 2**42]
    with modlin.limits(threads=threads):
        r = Pieces16(x).residues(moduli, dtype)
    assert r.dtype == dtype
    _assert_residues(r, x, Basis(moduli))


@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=40),
       st.lists(st.integers(2, 2**31), min_size=1, max_size=4))
def test_int64_residues_kernel_against_python_ints(values, moduli):
    # the kernel's bound: 21-bit pieces times weights below m <= 2**31 stay below 2**53
    from modlin._arith.residues import _int64_residues

    x = np.array(values, dtype=np.int64)
    w = np.array([[pow(2, 21, m), pow(2, 42, m)] for m in moduli], dtype=np.float64)
    out = np.empty((len(moduli), x.size))
    _int64_residues(x, 0, x.size, np.array(moduli, dtype=np.int64), w, out, 0, np.int64(0), np.int64(2**63 - 1))
    for i, m in enumerate(moduli):
        want = [v % m - m * (v % m > (m - 1) // 2) for v in values]
        assert out[i].tolist() == want


def test_int64_residues_at_the_kernels_bound():
    # the largest pieces (top piece -2**21 and 2**21 - 1, the others 2**21 - 1) with the
    # largest weights the moduli give, for the largest modulus the kernel takes
    from modlin._arith.residues import _int64_residues

    x = np.array([-2**63, 2**63 - 1, -2**63 + 2**42 - 1, -(2**42) - 1, 2**42 - 1], dtype=np.int64)
    for m in (2**31, 2**31 - 1, 2**26 - 5, 2**21 + 1):
        w = np.array([[pow(2, 21, m), pow(2, 42, m)]], dtype=np.float64)
        out = np.empty((1, x.size))
        _int64_residues(x, 0, x.size, np.array([m], dtype=np.int64), w, out, 0, np.int64(0), np.int64(2**63 - 1))
        assert out[0].tolist() == [int(v) % m - m * (int(v) % m > (m - 1) // 2) for v in x]


@pytest.mark.parametrize("basis", BASES, ids=lambda b: f"{len(b.moduli)}moduli")
def test_residues_uint64(basis, rng):
    x = np.concatenate([rng.integers(0, 2**64 - 1, 100, dtype=np.uint64, endpoint=True),
                        np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1], dtype=np.uint64)])
    _assert_residues(residues(x, basis), x, basis)


@pytest.mark.parametrize("basis", BASES, ids=lambda b: f"{len(b.moduli)}moduli")
def test_residues_object(basis, rng):
    x = np.concatenate([np.array(EDGE, dtype=object), rand_ints(rng, (61,), -2**3000, 2**3000)]).reshape(2, -1)
    _assert_residues(residues(x, basis), x, basis)


@pytest.mark.parametrize("x", [np.zeros((3, 0), dtype=np.int64), np.zeros((0,), dtype=np.uint64)],
                         ids=["int64", "uint64"])
def test_residues_of_empty_arrays(x):
    r = residues(x, BASES[0])
    assert r.shape == (len(BASES[0].moduli),) + x.shape


# ===================================================================== reconstruct

def _canonical(values, basis) -> np.ndarray:
    return np.array([[v % m for v in values] for m in basis.moduli], dtype=np.int64)


def _signed_values(basis, rng, count=300):
    M = basis.M
    lo, hi = -(M // 2), (M - 1) // 2
    edge = [hi, hi - 1, lo, lo + 1, 0, 1, -1]
    return edge + [int(v) for v in rand_ints(rng, (count,), lo, hi)]


RECON_BASES = [
    Basis(tuple(int(galois.prev_prime(2**26 - 100 * i)) for i in range(1, 13))),  # ~312 bits
    Basis((2**26 - 5, 2**25, 3**16)),      # composite moduli (a power of 2, a power of 3)
    Basis(int8_moduli()[:20]),
    Basis((2, 3, 5, 7, 11, 13)),
    Basis((3,)),
]


@pytest.mark.parametrize("basis", RECON_BASES, ids=lambda b: f"{b.M.bit_length()}bits")
def test_reconstruct_signed_object(basis, rng):
    vals = _signed_values(basis, rng)
    got = reconstruct(_canonical(vals, basis), basis, as_object=True)
    assert got.dtype == object and got.shape == (len(vals),)
    assert [int(v) for v in got] == vals


@pytest.mark.parametrize("basis", [Basis((2**26 - 5, 2**26 - 27)), Basis(int8_moduli()[:7]),
                                   Basis((2**26 - 5, 2**25 - 39, 2039)), Basis((5, 7))],
                         ids=lambda b: f"{b.M.bit_length()}bits")
def test_reconstruct_signed_int64(basis, rng):
    assert basis.M < 2**63  # all signed values fit int64
    vals = _signed_values(basis, rng)
    got = reconstruct(_canonical(vals, basis), basis)
    assert got.dtype == np.int64
    assert [int(v) for v in got] == vals


def test_reconstruct_int64_extremes():
    # M > 2**64: values of magnitude up to 2**63 - 1 come back as int64 without overflow
    basis = Basis((2**26 - 5, 2**26 - 27, 2**25 - 39))
    vals = [2**63 - 1, -(2**63 - 1), -2**63, 2**62, -2**62 - 12345, 0]
    got = reconstruct(_canonical(vals, basis), basis)
    assert got.dtype == np.int64 and [int(v) for v in got] == vals


def test_reconstruct_keeps_shape():
    basis = RECON_BASES[0]
    vals = np.array([[-5, 2**200], [3**100, -(2**250)], [0, 7]], dtype=object)
    res = np.stack([np.vectorize(lambda v, m=m: v % m, otypes=[np.int64])(vals) for m in basis.moduli])
    assert res.shape == (len(basis.moduli), 3, 2)
    got = reconstruct(res, basis, as_object=True)
    assert got.shape == (3, 2) and (got == vals).all()
    for p in (2**61 - 1, 2**127 - 1):
        assert (reconstruct(res, basis, p=p).astype(object) == vals % p).all()


MOD_P = [2, 3, 7, 2**26 - 5, 2**31 - 1, 2**52 - 1, 2**52 + 1, 2**62 - 57, BELOW_2_63, 2**63 - 1, 2**63,
         2**63 + 1, 2**64 - 59, 2**64 - 1, 2**64, 2**64 + 13, 2**127 - 1, 10**40, P256]


@pytest.mark.parametrize("basis", RECON_BASES[:3], ids=lambda b: f"{b.M.bit_length()}bits")
@pytest.mark.parametrize("p", MOD_P, ids=pid)
def test_reconstruct_modulo_p(basis, p, rng):
    vals = _signed_values(basis, rng, count=200)
    got = reconstruct(_canonical(vals, basis), basis, p=p)
    assert got.dtype == result_dtype(p)
    assert [int(v) for v in got] == [v % p for v in vals]


def test_reconstruct_modulo_p_near_2_63(rng):
    # many random p in [2**62, 2**63]: the uint64 modular Horner of the reconstruction
    basis = RECON_BASES[0]
    vals = _signed_values(basis, rng, count=500)
    res = _canonical(vals, basis)
    for p in [int(v) for v in rand_ints(rng, (20,), 2**62, 2**63)] + [2**63, 2**63 - 1]:
        got = reconstruct(res, basis, p=p)
        assert got.dtype == np.int64
        assert [int(v) for v in got] == [v % p for v in vals], p


@pytest.mark.parametrize("p", [None, 2**61 - 1, 2**63])
def test_multiply_writes_into_out(p, rng):
    # the CRT writes straight into a given int64 result (matmul's tiles that span it)
    from modlin._algorithms import rns as _rns

    e = 40 if p else 25  # exact products that fit int64
    a, b = rng.integers(-2**e, 2**e, (30, 20)), rng.integers(-2**e, 2**e, (20, 25))
    pl = modlin.plan(p, 30, 20, 25) if p else _intmul_plan(a, b)
    out = np.full((30, 25), -7, dtype=np.int64)
    got = _rns.multiply(pl, a, b, out=out)
    exact = (a.astype(object) @ b.astype(object)).tolist()
    want = [[v if p is None else v % p for v in row] for row in exact]
    assert np.shares_memory(got, out) and out.tolist() == want


def test_multiply_out_takes_its_results_kind_only(rng):
    """``out=`` is int64 for int64 results, an object array for Python ints made from limbs
    (written in place: the entries it held are replaced), and refused for anything else."""
    from modlin._algorithms import rns as _rns

    p = 2**64 - 59  # results in [0, p) do not fit int64, and become ints by numpy's cast
    a, b = rng.integers(0, 2**62, (4, 3)), rng.integers(0, 2**62, (3, 5))
    for dtype in (np.int64, object):
        with pytest.raises(ValueError, match="out= takes int64 results, or object ones"):
            _rns.multiply(modlin.plan(p, 4, 3, 5), a, b, out=np.empty((4, 5), dtype=dtype))
    p = 2**127 - 1
    a, b = rand_ints(rng, (7, 9), 0, p), rand_ints(rng, (9, 6), 0, p)
    a[0], b[:, 0] = p - 1, p - 1
    pl = modlin.plan(p, 7, 9, 6)
    with pytest.raises(ValueError, match="out= takes int64 results, or object ones"):
        _rns.multiply(pl, a, b, out=np.empty((7, 6), dtype=np.int64))
    out = np.full((7, 6), "old", dtype=object)
    got = _rns.multiply(pl, a, b, out=out)
    assert np.shares_memory(got, out) and _same(out, ref_matmul(a, b, p))
    # exact products as Python ints, into a given object array
    a, b = rand_ints(rng, (5, 4), -2**100, 2**100), rand_ints(rng, (4, 3), -2**100, 2**100)
    out = np.zeros((5, 3), dtype=object)
    got = _rns.multiply(_intmul_plan(a, b), a, b, as_object=True, out=out)
    assert np.shares_memory(got, out) and out.tolist() == (a.astype(object) @ b.astype(object)).tolist()


def _intmul_plan(a, b):
    """The RNS plan of the exact integer product ``a @ b``."""
    from modlin._arith.integers import max_abs
    from modlin._planning.rnsplan import rns_plan

    return rns_plan(None, a.shape[1] * max_abs(a) * max_abs(b), (a.shape[0], a.shape[1], b.shape[1]))


# ===================================================================== balanced_lift

LIFT_INPUTS = {
    "int8": np.array([-128, -1, 0, 1, 127], dtype=np.int8),
    "uint8": np.array([0, 200, 255], dtype=np.uint8),
    "int16": np.array([-2**15, 2**15 - 1], dtype=np.int16),
    "uint16": np.array([0, 2**16 - 1], dtype=np.uint16),
    "int32": np.array([-2**31, 2**31 - 1], dtype=np.int32),
    "uint32": np.array([0, 2**32 - 1], dtype=np.uint32),
    "int64": np.array([-2**63, -2**63 + 1, -2**62, -1, 0, 1, 2**62, 2**63 - 1], dtype=np.int64),
    "uint64": np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "float64": np.array([-2.0**70, -2.0**63, -1.0, -0.0, 0.0, 2.0**63, 2.0**64, 2.0**64 * 3, 1e300]),
    "float32": np.array([-2.0**40, 3.0, 2.0**100], dtype=np.float32),
    "float16": np.array([-2048.0, 65504.0], dtype=np.float16),
    "longdouble": np.array([2**64 - 1, -(2**64 - 1), 2**63 + 1], dtype=np.longdouble),
    "object": np.array([-2**200, -2**64, -2**63 - 1, 2**63, 2**64 - 1, 2**64, 3**100, np.int64(-5),
                        np.uint64(2**64 - 1), np.int8(-3)], dtype=object),
    ">i8": np.array([-2**63, 2**62 + 12345], dtype=">i8"),
    ">u8": np.array([2**64 - 1, 2**63 + 5], dtype=">u8"),
    "2d": np.array([[2**63 - 1, -2**63], [5, -7]], dtype=np.int64),
    "empty": np.zeros((0, 3), dtype=np.int64),
    "empty-f": np.zeros((2, 0)),
    "empty-o": np.zeros((0,), dtype=object),
}

LIFT_P = [2, 3, 2**52, 2**63 - 25, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 59, 2**64 - 1, 2**64, 2**64 + 1,
          2**127 - 1, 10**30]


@pytest.mark.parametrize("p", LIFT_P, ids=pid)
@pytest.mark.parametrize("name", list(LIFT_INPUTS))
def test_balanced_lift(name, p):
    x = LIFT_INPUTS[name]
    before = x.copy()
    r = balanced_lift(x, p, "A")
    assert np.array_equal(x, before) and x.dtype == before.dtype  # input untouched
    assert r.dtype == (np.int64 if p <= 2**64 else object), r.dtype
    assert r.shape == x.shape
    xs = [int(v) for v in x.ravel()]
    for v, got in zip(xs, r.ravel()):
        got = int(got)
        assert (got - v) % p == 0, (v, got)
        assert -(p // 2) <= got <= (p - 1) // 2, (v, got)


@pytest.mark.parametrize("p", [2**61 - 1, 2**64, 2**127 - 1], ids=pid)
def test_balanced_lift_errors(p):
    with pytest.raises(ValueError, match="non-integral"):
        balanced_lift(np.array([1.5]), p, "A")
    with pytest.raises(ValueError, match="NaN or Inf"):
        balanced_lift(np.array([np.nan]), p, "A")
    with pytest.raises(ValueError, match="NaN or Inf"):
        balanced_lift(np.array([-np.inf]), p, "B")
    with pytest.raises(TypeError, match="complex"):
        balanced_lift(np.array([1 + 0j]), p, "A")
    with pytest.raises(TypeError, match="integers"):
        balanced_lift(np.array([1, 2.0], dtype=object), p, "A")
    with pytest.raises(TypeError, match="integers"):
        balanced_lift(np.array([1, True], dtype=object), p, "A")
    with pytest.raises(TypeError):
        balanced_lift(np.array(["7"]), p, "A")


# ===================================================================== choose_moduli

@pytest.mark.parametrize("engine", ["fp64", "fp32", "int8"])
@pytest.mark.parametrize("bound", [0, 1, 2**20, 2**53, 2**63 - 1, 2**64, 2**127, 2**200, 2**330, 2**2000],
                         ids=lambda b: f"2^{b.bit_length()}")
def test_choose_moduli_covers_the_bound(bound, engine):
    shape = (16, 64, 16)
    if engine == "int8" and 2 * bound + 2 > math.prod(int8_moduli()):
        with pytest.raises(ValueError, match="int8 moduli"):
            choose_moduli(bound, shape, engine)
        return
    mods = choose_moduli(bound, shape, engine)
    basis = Basis(tuple(mods))  # pairwise coprime, each in [2, 2**26)
    assert basis.covers(bound)
    if engine == "int8":
        assert set(mods) <= set(int8_moduli())
    if engine == "fp32":
        assert max(mods) <= modlin.ENGINES["fp32"].max_modulus
    RNSPlan(None, bound, tuple(mods), engine, shape).check()


# ===================================================================== plan

@pytest.mark.parametrize("p", BIG_MODULI, ids=pid)
def test_plan_beyond_2_52_is_rns(p):
    pl = modlin.plan(p, 8, 16, 4)
    assert isinstance(pl, RNSPlan)
    assert pl.p == p and pl.shape == (8, 16, 4)
    assert pl.bound == 16 * (p // 2) ** 2
    assert pl.engine in ("fp64", "fp32")  # int8 is never chosen unless asked
    assert pl.basis.covers(pl.bound)
    pl.check()
    with pytest.raises(ValueError, match=r"2\*\*52"):
        modlin.plan(p, 8, 16, 4, algorithm="multiword")
    with pytest.raises(ValueError, match=r"2\*\*52"):
        modlin.plan(p, 8, 16, 4, words=(2, 2))


def test_rnsplan_attributes():
    p = 2**127 - 1
    pl = modlin.plan(p, 32, 100, 16)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pl.p = 5
    subs = pl.subplans
    assert len(subs) == len(pl.moduli) == len(pl.basis.moduli)
    assert [s.p for s in subs] == list(pl.moduli)
    assert all(s.engine == pl.engine for s in subs)
    for s in subs:
        s.check()
    assert pl.gemm_count() == sum(s.gemm_count() for s in subs) >= len(pl.moduli)
    assert pl.cost() > 0 and pl.relative_cost() > 0
    assert math.isclose(pl.relative_cost(), pl.cost() / modlin._planning.plan.gemm_model_cost(32, 100, 16))
    assert pl.cost((64, 100, 16)) > pl.cost()
    text = pl.explain()
    assert "residue number system" in text and f"{len(pl.moduli)} pairwise-coprime moduli" in text
    assert "127 bits" in text and "GEMM" in text
    assert hash(pl) == hash(modlin.plan(p, 32, 100, 16))  # plain, hashable data


@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**127 - 1, BELOW_2_52, 1000003, 7], ids=pid)
def test_int8_plan_only_when_asked(p):
    pl = modlin.plan(p, 16, 50, 16, engine="int8")
    if isinstance(pl, RNSPlan):
        assert pl.engine == "int8" and set(pl.moduli) <= set(int8_moduli())
        assert all(s.engine == "int8" for s in pl.subplans)
        pl.check()
    else:  # p <= 256: one int8 word
        assert p <= 256 and pl.engine == "int8"
    auto = modlin.plan(p, 16, 50, 16)
    assert auto.engine != "int8"


@pytest.mark.parametrize("p", [P256, P1024, 2**200], ids=pid)
def test_int8_refuses_bounds_beyond_its_moduli(p):
    with pytest.raises(ValueError, match="int8 moduli"):
        modlin.plan(p, 4, 4, 4, engine="int8")


def test_algorithm_rns_for_small_moduli():
    for p in (2, 3, 251, 65521, 2**31 - 1, BELOW_2_52):
        pl = modlin.plan(p, 4, 6, 5, algorithm="rns")
        assert isinstance(pl, RNSPlan) and pl.p == p
        A = np.full((4, 6), p - 1, dtype=np.int64)
        B = np.full((6, 5), p - 1, dtype=np.int64)
        assert_mod_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)
        assert isinstance(modlin.plan(p, 4, 6, 5, algorithm="multiword"), modlin.Plan)


@pytest.mark.parametrize("p", [2**50 - 27, BELOW_2_52, 2**52 - 1], ids=pid)
def test_auto_takes_the_cheaper_algorithm_below_2_52(p):
    shape = (512, 512, 512)
    auto = modlin.plan(p, *shape)
    multi = modlin.plan(p, *shape, algorithm="multiword")
    rns = modlin.plan(p, *shape, algorithm="rns")
    assert isinstance(multi, modlin.Plan) and isinstance(rns, RNSPlan)
    assert auto.cost() == min(multi.cost(), rns.cost())
    # (with the current cost model, RNS wins for large products with p near 2**52)
    # every one of them runs exactly on a smaller product (k <= 512)
    rng = np.random.default_rng(1)
    A = rng.integers(-2**63, 2**63 - 1, (5, 300), endpoint=True)
    B = rng.integers(0, 2**64 - 1, (300, 3), dtype=np.uint64, endpoint=True)
    for pl in (auto, multi, rns):
        assert_mod_exact(modlin.matmul(A, B, p, plan=pl), A, B, p, oracle=flint_matmul)
    # small products keep multiword plans
    assert isinstance(modlin.plan(p, 4, 4, 4), modlin.Plan)


# ----------------------------------------------------------------- user moduli

GOOD_MODULI = [
    (2**26 - 5, 2**26 - 27, 2**25 - 39, 65521, 256, 255, 253, 251, 7),   # mixed sizes, composites
    tuple(int(galois.prev_prime(2**24 - 1000 * i)) for i in range(8)),
    int8_moduli()[:30],
]


@pytest.mark.parametrize("moduli", GOOD_MODULI, ids=["mixed", "24-bit primes", "int8 moduli"])
@pytest.mark.parametrize("as_list", [False, True], ids=["tuple", "list"])
def test_user_moduli(moduli, as_list, rng):
    p = 2**61 - 1
    given_moduli = list(moduli) if as_list else tuple(moduli)
    pl = modlin.plan(p, 6, 9, 4, moduli=given_moduli)
    assert isinstance(pl, RNSPlan) and pl.moduli == tuple(moduli) and pl.engine == "fp64"
    A = rand_ints(rng, (6, 9), -5 * p, 5 * p)
    B = np.full((9, 4), p - 1, dtype=np.int64)
    assert_mod_exact(modlin.matmul(A, B, p, plan=pl), A, B, p, oracle=flint_matmul)
    # moduli force RNS even for a small p
    pl7 = modlin.plan(7, 3, 3, 3, moduli=given_moduli)
    assert isinstance(pl7, RNSPlan) and pl7.p == 7


def test_user_moduli_with_int8_engine():
    p = 2**61 - 1
    pl = modlin.plan(p, 4, 8, 4, engine="int8", moduli=int8_moduli()[:20])
    assert pl.engine == "int8"
    A = np.full((4, 8), p - 1, dtype=np.int64)
    assert_mod_exact(modlin.matmul(A, A.T, p, plan=pl), A, A.T, p)
    with pytest.raises(ValueError):  # 257 does not fit one int8 word
        modlin.plan(p, 4, 8, 4, engine="int8", moduli=(257,) + int8_moduli()[:20])


@pytest.mark.parametrize("moduli", [(2**26 - 5, 2**26 - 5, 2**25 - 39, 65521, 255, 253),
                                    (6, 10, 2**26 - 5, 2**26 - 27, 2**25 - 39, 65521),
                                    (2**25 - 39, 2**26 - 5, 2**26 - 27, 255, 256, 2**20)],
                         ids=["repeated", "6-10", "256-2^20"])
def test_user_moduli_not_coprime(moduli):
    with pytest.raises(ValueError, match="pairwise coprime"):
        modlin.plan(2**61 - 1, 4, 4, 4, moduli=moduli)


@pytest.mark.parametrize("moduli", [(2**26 - 5,), (2**26 - 5, 2**26 - 27), (), (3, 5, 7, 11, 13)],
                         ids=["one", "two", "none", "tiny"])
def test_user_moduli_too_small(moduli):
    with pytest.raises(ValueError, match="add moduli"):
        modlin.plan(2**61 - 1, 4, 4, 4, moduli=moduli)


@pytest.mark.parametrize("bad", [1, 0, -3, 2**26, 2**64])
def test_user_moduli_out_of_range(bad):
    with pytest.raises(ValueError, match=r"2\*\*26"):
        modlin.plan(2**61 - 1, 4, 4, 4, moduli=(bad, 2**26 - 5, 2**26 - 27, 2**25 - 39, 65521, 253))


def test_user_moduli_with_multiword_restrictions():
    mods = (2**26 - 5, 2**26 - 27)
    for kw in ({"algorithm": "multiword"}, {"words": (1, 1)}, {"variant": "horner"}):
        with pytest.raises(ValueError, match="moduli="):
            modlin.plan(1000003, 4, 4, 4, moduli=mods, **kw)


def test_user_moduli_must_be_integers():
    with pytest.raises((TypeError, ValueError)):
        modlin.plan(7, 1, 1, 1, moduli=[3.5, 5, 11])


# ----------------------------------------------------------------- plan= in matmul

def test_matmul_runs_a_given_rns_plan():
    p = 2**127 - 1
    pl = modlin.plan(p, 4, 10, 3)
    A = np.full((4, 10), p - 1, dtype=object)
    B = np.full((10, 3), -(p - 1), dtype=object)
    assert_mod_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)
    # smaller k and other m, n are fine (the bound only grows with k)
    assert_mod_exact(modlin.matmul(A[:2, :7], B[:7], p, plan=pl), A[:2, :7], B[:7], p)
    # a bigger k is refused
    A11 = np.full((4, 11), p - 1, dtype=object)
    with pytest.raises(ValueError, match="k = 11"):
        modlin.matmul(A11, A11.T, p, plan=pl)
    # another p is refused
    with pytest.raises(ValueError, match="plan was made for p"):
        modlin.matmul(A, B, 2**127 + 1, plan=pl)
    with pytest.raises(ValueError, match="plan was made for p"):
        modlin.matmul(A, B, 2**61 - 1, plan=pl)
    with pytest.raises(TypeError, match="plan must be"):
        modlin.matmul(A, B, p, plan=pl.moduli)


def test_matmul_checks_a_hand_made_rns_plan():
    p = 2**61 - 1
    pl = modlin.plan(p, 4, 10, 4)
    A = np.full((4, 10), p - 1, dtype=np.int64)
    short = dataclasses.replace(pl, moduli=pl.moduli[:-2])
    with pytest.raises(ValueError, match="add moduli"):
        short.check()
    with pytest.raises(ValueError, match="add moduli"):
        modlin.matmul(A, A.T, p, plan=short)
    twice = dataclasses.replace(pl, moduli=pl.moduli[:-1] + pl.moduli[:1])
    with pytest.raises(ValueError, match="pairwise coprime"):
        modlin.matmul(A, A.T, p, plan=twice)
    # an honest plan whose bound is too small for this k is refused before running
    low = dataclasses.replace(pl, bound=(p // 2) ** 2)
    low.check()
    with pytest.raises(ValueError, match="k = 10"):
        modlin.matmul(A, A.T, p, plan=low)
    # a plan for integer products (p None) is not a plan for p
    ip = modlin._planning.rnsplan.rns_plan(None, 10 * (p // 2) ** 2, (4, 10, 4))
    with pytest.raises(ValueError, match="plan was made for p"):
        modlin.matmul(A, A.T, p, plan=ip)


def test_multiword_plan_refused_for_big_p():
    pl = modlin.plan(BELOW_2_52, 4, 4, 4, algorithm="multiword")
    with pytest.raises(ValueError, match="plan was made for p"):
        modlin.matmul(np.ones((4, 4), dtype=np.int64), np.ones((4, 4), dtype=np.int64), 2**61 - 1, plan=pl)
    forged = dataclasses.replace(pl, p=2**61 - 1)
    with pytest.raises(ValueError, match=r"2\*\*52"):
        modlin.matmul(np.ones((4, 4), dtype=np.int64), np.ones((4, 4), dtype=np.int64), 2**61 - 1, plan=forged)


# ===================================================================== matmul: worst cases

@pytest.mark.parametrize("engine", [None, "fp64", "int8"])
@pytest.mark.parametrize("p", BIG_MODULI + [BELOW_2_52], ids=pid)
def test_worst_case_all_p_minus_1(p, engine):
    """All entries p - 1: every product (p-1)**2 at its maximum, the bound attained."""
    m, k, n = 3, 17, 4
    A = np.full((m, k), p - 1, dtype=object)
    B = np.full((k, n), p - 1, dtype=object)
    if engine == "int8" and p not in INT8_OK and p != BELOW_2_52:
        with pytest.raises(ValueError, match="int8 moduli"):
            modlin.plan(p, m, k, n, engine=engine)
        return
    pl = modlin.plan(p, m, k, n, engine=engine, algorithm="rns")
    C = modlin.matmul(A, B, p, plan=pl)
    assert_mod_exact(C, A, B, p)
    assert_mod_exact(C, A, B, p, oracle=flint_matmul)
    assert set(C.astype(object).ravel()) == {(k * (p - 1) ** 2) % p}


@pytest.mark.parametrize("p", BIG_MODULI, ids=pid)
def test_worst_case_balanced_extremes(p):
    """Entries at both ends of the balanced range, -(p//2) and (p-1)//2, with unreduced copies."""
    lo, hi = -(p // 2), (p - 1) // 2
    vals = np.array([lo, hi, lo + p, hi - p, lo - 3 * p, hi + 5 * p, p - 1, -(p - 1)], dtype=object)
    A = np.resize(vals, (4, 16))
    B = np.resize(vals[::-1], (16, 3))
    C = modlin.matmul(A, B, p)
    assert_mod_exact(C, A, B, p)
    assert_mod_exact(C, A, B, p, oracle=flint_matmul)


@pytest.mark.parametrize("p", [2**61 - 1, BELOW_2_63, 2**63, 2**64 - 59, 2**64, 2**127 - 1], ids=pid)
def test_machine_integer_extremes(p, rng):
    """int64 / uint64 operands at their limits (-2**63, 2**64 - 1), reduced inside modlin."""
    A = np.array([[-2**63, 2**63 - 1, -1, 0], [2**63 - 1, -2**63, -2**63, -2**63]], dtype=np.int64)
    B = np.array([[2**64 - 1, 0], [2**64 - 2, 2**63], [2**64 - 1, 2**64 - 1], [1, 2**63 + 1]], dtype=np.uint64)
    for a, b in ((A, B), (A, A.T), (B.T, B)):
        assert_mod_exact(modlin.matmul(a, b, p), a, b, p, oracle=flint_matmul)


# ===================================================================== matmul: random inputs

@pytest.mark.parametrize("p", BIG_MODULI + [BELOW_2_52], ids=pid)
def test_random_big_entries(p, rng):
    A = rand_ints(rng, (5, 23), -(p**2) - 7, p**2 + 7)   # unreduced, negative
    B = rand_ints(rng, (23, 6), -3 * p, 3 * p)
    C = modlin.matmul(A, B, p)
    assert_mod_exact(C, A, B, p, oracle=flint_matmul)


@pytest.mark.parametrize("p", [ABOVE_2_52, 2**61 - 1, 2**63, 2**64 - 59, 2**64, 10**30, 2**127 - 1], ids=pid)
def test_random_machine_dtypes(p, rng):
    for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dt)
        A = rng.integers(info.min, info.max, (4, 9), dtype=dt, endpoint=True)
        B = rng.integers(info.min, info.max, (9, 5), dtype=dt, endpoint=True)
        assert_mod_exact(modlin.matmul(A, B, p), A, B, p, oracle=flint_matmul)
        assert_mod_exact(modlin.matmul(A.astype(A.dtype.newbyteorder(">")), B, p), A, B, p)
    Ab = rng.integers(0, 2, (4, 9)).astype(bool)
    assert_mod_exact(modlin.matmul(Ab, Ab.T, p), Ab, Ab.T, p)


@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**64 + 1, 2**127 - 1, P256], ids=pid)
def test_integral_floats(p):
    # floats are converted exactly (2.0**80 is exactly 2**80), whatever their size
    A = np.array([[2.0**80, -3.0, 1e300, -0.0], [2.0**64, 2.0**63, -(2.0**63), 7.0]])
    B = np.array([[1.0, 2.0**70], [-(2.0**100), 5.0], [-7.0, 1.0], [2.0**53 + 2, -1.0]])
    assert_mod_exact(modlin.matmul(A, B, p), A, B, p, oracle=flint_matmul)
    A32 = A[:, :2].astype(np.float32)
    assert_mod_exact(modlin.matmul(A32, B[:2], p), A32, B[:2], p)


@pytest.mark.parametrize("p", [2**61 - 1, 2**127 - 1], ids=pid)
def test_input_errors(p):
    one = np.ones((1, 1), dtype=np.int64)
    for bad, exc in ((np.array([[1.5]]), ValueError), (np.array([[np.nan]]), ValueError),
                     (np.array([[np.inf]]), ValueError), (np.array([[1 + 1j]]), TypeError),
                     (np.array([[1.0]], dtype=object), TypeError), (np.array([["7"]]), TypeError)):
        with pytest.raises(exc):
            modlin.matmul(bad, one, p)
        with pytest.raises(exc):
            modlin.matmul(one, bad, p)
    with pytest.raises(ValueError, match="not aligned"):
        modlin.matmul(np.ones((2, 3), dtype=np.int64), np.ones((2, 3), dtype=np.int64), p)
    with pytest.raises(ValueError, match="at least one dimension"):
        modlin.matmul(np.int64(3), one, p)


@pytest.mark.parametrize("p", [2**61 - 1, 2**63, 2**64, 2**127 - 1], ids=pid)
def test_inputs_not_modified(p):
    A = np.array([[-2**63, 2**63 - 1], [5, -7]], dtype=np.int64)
    B = np.array([[2**200, -(2**300)], [p, -p]], dtype=object)
    A0, B0 = A.copy(), B.copy()
    modlin.matmul(A, B, p)
    assert np.array_equal(A, A0) and (B == B0).all()


@pytest.mark.parametrize("p", [2**61 - 1, 2**63, 2**64 - 59, 2**127 - 1], ids=pid)
def test_more_entries_than_a_kernel_chunk(p, rng):
    # 60 x 70 = 4200 result entries and 4800 + 5600 input entries: several chunks of the kernels
    A = rand_ints(rng, (60, 80), -p, p)
    B = rng.integers(-2**63, 2**63 - 1, (80, 70), endpoint=True)
    assert_mod_exact(modlin.matmul(A, B, p), A, B, p, oracle=flint_matmul)


def test_reconstruct_many_entries(rng):
    basis = RECON_BASES[0]
    vals = _signed_values(basis, rng, count=5000)
    res = _canonical(vals, basis)
    assert [int(v) for v in reconstruct(res, basis, as_object=True)] == vals
    for p in (2**61 - 1, 2**63, 2**127 - 1):
        assert [int(v) for v in reconstruct(res, basis, p=p)] == [v % p for v in vals]


# ===================================================================== thin products

@pytest.mark.parametrize("engine", [None, "int8"])
@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**127 - 1], ids=pid)
def test_thin_worst_case_k_100000(p, engine):
    k = 100_000
    A = np.full((3, k), p - 1, dtype=object)
    B = np.full((k, 2), p - 1, dtype=object)
    C = modlin.matmul(A, B, p, plan=modlin.plan(p, 3, k, 2, engine=engine))
    assert C.dtype == result_dtype(p) and C.shape == (3, 2)
    assert set(C.astype(object).ravel()) == {(k * (p - 1) ** 2) % p}


@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59], ids=pid)
def test_thin_random_k_100000(p, rng):
    k = 100_000
    A = rng.integers(-2**63, 2**63 - 1, (3, k), endpoint=True)
    B = rng.integers(0, 2**64 - 1, (k, 2), dtype=np.uint64, endpoint=True)
    assert_mod_exact(modlin.matmul(A, B, p), A, B, p, oracle=flint_matmul)


def test_thin_big_modulus_random_k_20000(rng):
    p, k = 2**127 - 1, 20_000
    A = rand_ints(rng, (2, k), -(p - 1), p - 1)
    B = rand_ints(rng, (k, 2), 0, p - 1)
    assert_mod_exact(modlin.matmul(A, B, p), A, B, p)


# ===================================================================== shapes

@pytest.mark.parametrize("p", [2**61 - 1, 2**64, 2**127 - 1], ids=pid)
@pytest.mark.parametrize("sa, sb", [((0, 5), (5, 4)), ((3, 5), (5, 0)), ((0, 5), (5, 0)), ((2, 0, 5), (5, 3)),
                                    ((3, 5), (0, 5, 2))])
def test_empty_outputs(sa, sb, p):
    A = np.ones(sa, dtype=np.int64)
    B = np.ones(sb, dtype=np.int64)
    C = modlin.matmul(A, B, p)
    assert C.shape == np.matmul(A, B).shape and C.dtype == result_dtype(p)


@pytest.mark.parametrize("p", [2**61 - 1, 2**64, 2**127 - 1], ids=pid)
@pytest.mark.parametrize("sa, sb", [((3, 0), (0, 4)), ((0,), (0,)), ((0,), (0, 3)), ((2, 4, 0), (0, 1))])
def test_k_zero(sa, sb, p):
    A = np.zeros(sa, dtype=np.int64)
    B = np.zeros(sb, dtype=np.int64)
    C = modlin.matmul(A, B, p)
    R = np.matmul(A, B)
    assert np.shape(C) == R.shape and np.all(np.asarray(C) == 0)


@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**127 - 1], ids=pid)
def test_one_dimensional_operands(p, rng):
    a = rand_ints(rng, (7,), -p, p)
    b = rand_ints(rng, (7,), 0, 2 * p)
    M = rand_ints(rng, (7, 3), -p, p)
    assert_mod_exact(modlin.matmul(a, b, p), a, b, p)
    assert_mod_exact(modlin.matmul(a, M, p), a, M, p)
    assert_mod_exact(modlin.matmul(M.T, b, p), M.T, b, p)


@pytest.mark.parametrize("p", [2**61 - 1, 2**63, 2**64 + 1, 2**127 - 1], ids=pid)
def test_batches_and_broadcasting(p, rng):
    A = rng.integers(-2**63, 2**63 - 1, (3, 1, 2, 5), endpoint=True)
    B = rand_ints(rng, (4, 5, 3), -p, p)
    assert_mod_exact(modlin.matmul(A, B, p), A, B, p)
    assert_mod_exact(modlin.matmul(A[0, 0], B, p), A[0, 0], B, p)
    assert_mod_exact(modlin.matmul(A, B[0], p), A, B[0], p)
    with pytest.raises(ValueError, match="broadcast"):
        modlin.matmul(np.ones((2, 2, 5), dtype=np.int64), np.ones((3, 5, 2), dtype=np.int64), p)


@pytest.mark.parametrize("p", [2**61 - 1, 2**63, 2**64, 2**127 - 1], ids=pid)
def test_out_parameter(p, rng):
    A = rng.integers(-2**63, 2**63 - 1, (2, 3, 6), endpoint=True)
    B = rand_ints(rng, (6, 4), -p, p)
    R = ref_matmul(A, B, p)
    out = np.empty((2, 3, 4), dtype=result_dtype(p))
    assert modlin.matmul(A, B, p, out=out) is out
    assert (out.astype(object) == R).all()
    strided = np.empty((2, 4, 3), dtype=result_dtype(p)).swapaxes(-1, -2)
    assert modlin.matmul(A, B, p, out=strided) is strided
    assert (strided.astype(object) == R).all()
    wrong = np.empty((2, 3, 4), dtype=object if p <= 2**63 else np.int64)
    with pytest.raises(TypeError, match="dtype"):
        modlin.matmul(A, B, p, out=wrong)
    with pytest.raises(ValueError, match="shape"):
        modlin.matmul(A, B, p, out=np.empty((3, 4), dtype=result_dtype(p)))


# ===================================================================== galois

@pytest.mark.parametrize("p", [2**61 - 1, int(galois.prev_prime(2**64)), 2**127 - 1, P256, P1024], ids=pid)
def test_galois_big_prime_fields(p, rng):
    GF = gf(p)
    A = GF(rand_ints(rng, (3, 5), 0, p - 1))
    B = GF(rand_ints(rng, (5, 2), 0, p - 1))
    A[0, :] = p - 1
    B[:, 0] = p - 1
    for C in (modlin.matmul(A, B), modlin.matmul(A, B, p)):
        assert type(C) is GF
        R = flint_matmul(A.view(np.ndarray), B.view(np.ndarray), p)
        assert all(int(c) == int(r) for c, r in zip(np.asarray(C).ravel(), R.ravel()))
    with pytest.raises(ValueError, match="does not match"):
        modlin.matmul(A, B, p + 2)
    out = GF.Zeros((3, 2))
    assert modlin.matmul(A, B, out=out) is out
    assert np.array_equal(out, modlin.matmul(A, B))


# ===================================================================== p without limit

@pytest.mark.parametrize("bits", [4000, 6000])
def test_huge_modulus_fp64(bits):
    p = 2**bits + 1
    A = np.array([[p - 1, 2], [3, -(p // 2)]], dtype=object)
    C = modlin.matmul(A, A, p, plan=modlin.plan(p, 2, 2, 2, engine="fp64"))
    assert_mod_exact(C, A, A, p)


def test_huge_modulus_automatic():
    p = 2**6000 + 1
    A = np.array([[p - 1, 2], [3, -(p // 2)]], dtype=object)
    assert_mod_exact(modlin.matmul(A, A, p), A, A, p)


# ===================================================================== properties

SPECIAL = st.sampled_from(BIG_MODULI + [BELOW_2_52, 2**52 - 1, 2, 3])
BIG_P = st.one_of(SPECIAL, st.integers(2**52, 2**66), st.integers(2, 2**300),
                  st.integers(1, 1100).map(lambda b: 2**b + 1))


@st.composite
def products(draw):
    p = draw(BIG_P)
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 12)), draw(st.integers(1, 4))
    entry = st.one_of(st.integers(-3 * p, 3 * p), st.sampled_from([p - 1, -(p - 1), p // 2, -(p // 2), 0, p]))
    A = np.array(draw(st.lists(entry, min_size=m * k, max_size=m * k)), dtype=object).reshape(m, k)
    B = np.array(draw(st.lists(entry, min_size=k * n, max_size=k * n)), dtype=object).reshape(k, n)
    return p, A, B


@given(products(), st.sampled_from(["auto", "rns", "int8"]))
def test_property_matmul_big_p(prod, how):
    p, A, B = prod
    m, k = A.shape
    n = B.shape[1]
    if how == "int8":
        if 2 * (k * (p // 2) ** 2) + 2 > math.prod(int8_moduli()):
            return
        pl = modlin.plan(p, m, k, n, engine="int8", algorithm="rns")
    else:
        pl = modlin.plan(p, m, k, n, algorithm=how)
    C = modlin.matmul(A, B, p, plan=pl)
    assert_mod_exact(C, A, B, p)


@given(p=st.integers(2**52, 2**64 + 2), data=st.data())
def test_property_machine_integers_against_flint(p, data):
    m, k, n = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 30)), data.draw(st.integers(1, 5))
    A = np.array(data.draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=m * k, max_size=m * k)),
                 dtype=np.int64).reshape(m, k)
    B = np.array(data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=k * n, max_size=k * n)),
                 dtype=np.uint64).reshape(k, n)
    assert_mod_exact(modlin.matmul(A, B, p), A, B, p, oracle=flint_matmul)


# ===================================================================== kernel paths of the CRT and residues

@pytest.mark.parametrize("p", [None, 2**61 - 1, 2**127 - 1, P256], ids=pid)
def test_reconstruct_in_blocks_of_moduli(p, rng, monkeypatch):
    # more moduli than one exact float64 sum takes: the sum goes in blocks (here of 3)
    import modlin._arith.crt as crt

    monkeypatch.setattr(crt, "CRT_BLOCK", 3)
    basis = RECON_BASES[0]  # 12 moduli: four blocks
    vals = _signed_values(basis, rng)
    got = reconstruct(_canonical(vals, basis), basis, p=p, as_object=p is None)
    assert [int(v) for v in got] == [v if p is None else v % p for v in vals]


def _crt_oracle(x: np.ndarray, basis: Basis, p: int) -> list[int]:
    """The CRT of unreduced residue rows ``x`` (float64 integers) with Python ints, modulo ``p``."""
    M = basis.M
    out = []
    for e in range(x.shape[1]):
        c = sum(int(x[i, e]) % m * (M // m) * pow(M // m, -1, m) for i, m in enumerate(basis.moduli)) % M
        out.append((c - M if c > (M - 1) // 2 else c) % p)
    return out


FUSED_BASES = [
    Basis(tuple(int(galois.prev_prime(2**23 - 50 * i)) for i in range(6))),  # a 61-bit product's basis
    Basis(tuple(int(galois.prev_prime(2**26 - 100 * i)) for i in range(1, 32))),  # the most the fused CRT takes
    Basis((2**26 - 5, 2**25, 3**16)),  # composite moduli
    Basis(int8_moduli()[:20]),
]


@pytest.mark.parametrize("basis", FUSED_BASES, ids=lambda b: f"{len(b.moduli)}moduli")
@pytest.mark.parametrize("p", [2, 3, 2**31 - 1, 2**52 + 21, 2**61 - 1, 2**62 + 135, BELOW_2_63], ids=pid)
def test_fused_crt_on_unreduced_products(basis, p, rng, monkeypatch):
    # the rows a product leaves (integers up to 2**53 in magnitude, not reduced) straight to
    # residues modulo p < 2**63 in one pass; the limbs' path, forced, agrees
    import modlin._arith.crt as crt
    import modlin._arith.residues as rns

    E = 300
    x = rns.padded_rows(len(basis.moduli), E, np.float64)
    x[:, :E] = rand_ints(rng, (len(basis.moduli), E), -2**53 + 1, 2**53 - 1).astype(np.float64)
    x[:, 0], x[:, 1], x[:, 2] = 0, 2**53 - 1, -(2**53 - 1)  # the extremes of a product's sums
    expect = _crt_oracle(x[:, :E], basis, p)
    calls = []
    monkeypatch.setattr(crt, "_crt_modp", lambda *a, _k=crt._crt_modp: calls.append(1) or _k(*a))
    got = crt.reconstruct_rows(x.copy(), E, basis, p, False)
    assert calls and got.dtype == np.int64 and [int(v) for v in got] == expect
    monkeypatch.setattr(crt, "FUSED_MAX_N", 0)
    assert [int(v) for v in crt.reconstruct_rows(x.copy(), E, basis, p, False)] == expect


@pytest.mark.parametrize("p", [2**61 - 1, BELOW_2_63, 2**63 - 2**40 + 1], ids=pid)
def test_fused_crt_largest_sums(p):
    # every y_i = m_i - 1 with 31 moduli just below 2**26 and p just below 2**63: the
    # uint64 sums reach 62 * 2**58 and the quotient its largest
    import modlin._arith.crt as crt
    import modlin._arith.residues as rns

    basis = FUSED_BASES[1]
    M, q = basis.M, basis.moduli
    w = [pow(M // m, -1, m) for m in q]
    ys = [[m - 1 for m in q], [1] * len(q), [m // 2 for m in q], [0] * len(q)]
    x = rns.padded_rows(len(q), len(ys), np.float64)
    for e, y in enumerate(ys):  # residues whose weighted y_i are these
        x[:, e] = [yi * pow(wi, -1, m) % m for yi, wi, m in zip(y, w, q)]
    expect = _crt_oracle(x[:, :len(ys)], basis, p)
    assert [int(v) for v in crt.reconstruct_rows(x, len(ys), basis, p, False)] == expect


def test_fused_crt_limits_fall_back_to_limbs(rng, monkeypatch):
    # 32 moduli, or p >= 2**63: the limbs' path, still exact
    import modlin._arith.crt as crt
    import modlin._arith.residues as rns

    monkeypatch.setattr(crt, "_crt_modp", lambda *a: pytest.fail("the fused CRT was used"))
    for basis, p in [(Basis(tuple(int(galois.prev_prime(2**26 - 100 * i)) for i in range(1, 33))), 2**61 - 1),
                     (FUSED_BASES[0], 2**63 + 29)]:
        x = rns.padded_rows(len(basis.moduli), 50, np.float64)
        x[:, :50] = rand_ints(rng, (len(basis.moduli), 50), -2**52, 2**52).astype(np.float64)
        expect = _crt_oracle(x[:, :50], basis, p)
        assert [int(v) for v in crt.reconstruct_rows(x, 50, basis, p, False)] == expect


@pytest.mark.parametrize("m", [3, 255, 4194301, 2**23 + 1, 8388593, 2**24 + 1, 2**26 - 5])
def test_residues_of_sums_at_the_contract_limit(m):
    # a GEMM's sums reach 2**53 in magnitude (k a_max b_max <= 2**53): x - floor(x / m) m
    # with a plain product once lost a bit there (q m beyond 2**53), for negative x within
    # about m of -2**53; the reductions of the CRT and of k-panels go through it
    import modlin._algorithms.rns as rns_products
    import modlin._arith.residues as rns

    j = np.arange(0, 3 * 2**16, dtype=np.int64)
    x = np.concatenate([-(2**53) + j, 2**53 - j, -j, j])
    src = rns.padded_rows(1, x.size, np.float64)
    src[0, :x.size] = x.astype(np.float64)  # every one an exact float (|x| <= 2**53)
    dst = np.empty((1, x.size), dtype=np.float64)
    rns_products._reduce_rows_kernel(src, np.array([m], dtype=np.int64), dst, False, 0, x.size)
    bad = np.flatnonzero(dst[0].astype(np.int64) != x % m)
    assert bad.size == 0, x[bad[:5]]


def test_rns_product_whose_sums_reach_minus_2_53():
    # a wrong answer before fmod_inv's fused multiply-add: moduli admitting sums of exactly
    # 2**53 (k = 128 products of (2**23) * (-2**23) modulo 2**24 + 1) and operands there
    p, k = 2**31 - 1, 128
    plan = modlin.plan(p, 4, k, 4, algorithm="rns", moduli=(2**24 + 1, 16777213, 16777199))
    A = np.full((4, k), 2**23, dtype=np.int64)
    B = np.full((k, 4), p - 2**23, dtype=np.int64)  # balanced: -2**23
    assert (modlin.matmul(A, B, p, plan=plan) == (2**23 * (p - 2**23) * k) % p).all()
    assert np.array_equal(modlin.matmul(A, B, p, plan=plan), ref_matmul(A, B, p))


def test_planned_bases_never_need_the_exact_fallback(rng):
    # planned_range's margin keeps every |C| <= bound off the rounding boundary of k
    import modlin._arith.crt as crt
    import modlin._arith.moduli as moduli
    import modlin._arith.residues as rns

    for bound in (2**40, 2**61 * 1000, 2**200 + 12345, 2**700):
        basis = Basis(choose_moduli(bound, (64, 1000, 64), "fp64"))
        assert basis.covers(bound) and basis.M >= moduli.planned_range(bound)
        vals = [bound, -bound, bound - 1, -bound + 1] + [int(v) for v in rand_ints(rng, (200,), -bound, bound)]
        x = _canonical(vals, basis).astype(np.float64)
        k, flag = np.empty(len(vals)), np.empty(len(vals), dtype=np.bool_)
        crt._crt_weights(x, 0, len(vals), np.array(basis.moduli, dtype=np.int64), crt._crt_constants(basis.moduli, None)[0],
                         k, flag, np.empty((2, rns.RESIDUE_CHUNK)), np.empty(x.shape))
        assert not flag.any()
        assert [int(v) for v in reconstruct(_canonical(vals, basis), basis, as_object=True)] == vals


def test_exact_fallback_at_the_edge_of_a_tight_basis():
    # M = 2 * bound + 2 exactly: the extremes sit where the float sum cannot round k surely
    basis = Basis((2**26 - 5, 2**26 - 27, 2**25 - 39))
    M = basis.M
    vals = [-(M // 2), (M - 1) // 2, -(M // 2) + 1, (M - 1) // 2 - 1, 0]
    assert [int(v) for v in reconstruct(_canonical(vals, basis), basis, as_object=True)] == vals
    for p in (2**61 - 1, 2**100 + 277):
        assert [int(v) for v in reconstruct(_canonical(vals, basis), basis, p=p)] == [v % p for v in vals]


@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**127 - 1, P256], ids=pid)
def test_rns_product_in_groups_and_chunks(p, rng, monkeypatch):
    # residues computed a few moduli and a few entries at a time, reusing their buffers
    import modlin._algorithms.rns as rns_products
    import modlin._arith.residues as rns

    # a memory budget that holds the residues of two moduli at a time
    from modlin._arith.integers import balanced_halves

    monkeypatch.setattr(rns, "RESIDUE_STEP", 37)  # and 37 entries per GEMM
    A = rand_ints(rng, (10, 15), 0, p)
    B = rand_ints(rng, (15, 13), 0, p)
    pl = modlin.plan(p, 10, 15, 13)
    assert len(pl.moduli) > 2
    memory = pl.workspace(group=2, panels=False)
    # rows=0: a stack's product, whose products are float64 rows (no panels of rows)
    assert pl.schedule(150, 195, 130, 15, 0, memory) == (2, None)
    assert pl.schedule(150, 195, 130, 15, 0, memory - 1) == (1, None)
    got = rns_products.multiply(pl, balanced_halves(A, p, "A"), balanced_halves(B, p, "B"), memory=memory)
    assert _same(got, ref_matmul(A, B, p))


def _same(got, want):
    return got.shape == want.shape and all(int(g) == int(w) for g, w in zip(got.ravel(), want.ravel()))


@pytest.mark.parametrize("p", [2**61 - 1, 2**62 - 57, BELOW_2_63], ids=pid)
def test_rns_products_as_int32_panels(p, rng):
    """Below the pool's share of the budget the products are int32 residues made a
    modulus and a panel of rows at a time (uneven last panel), read by the fused CRT:
    exact, and the same as the float64 products', with a prepared left operand too."""
    import modlin._algorithms.rns as rns_products
    import modlin._arith.residues as rns
    from modlin._arith.integers import balanced_halves

    m, k, n = 301, 150, 70
    A = rand_ints(rng, (m, k), 0, p)
    B = rand_ints(rng, (k, n), 0, p)
    A[0], B[:, 0] = p - 1, p - 1
    A[1], B[:, 1] = (p - 1) // 2, (p + 1) // 2  # the balanced extremes
    pl = modlin.plan(p, m, k, n, algorithm="rns")
    want = ref_matmul(A, B, p)
    Bb_full = [[v - p if v > (p - 1) // 2 else v for v in col] for col in B.T.tolist()]
    whole = pl.workspace(panels=False)
    counts = set()
    for memory in (pl._memory(m * k, k * n, m * n, k, 1, 1.0), pl._memory(m * k, k * n, m * n, k, 1, 0.4),
                   pl._memory(m * k, k * n, m * n, k, 1, 64 / m)):
        assert memory < whole
        group, panel = pl.schedule(m * k, k * n, m * n, k, m, memory)
        assert group == 1 and panel is not None
        counts.add(-(-m // panel))
        rc, _ = rns_products.product_residues(pl, balanced_halves(A, p, "A"), balanced_halves(B, p, "B"), memory=memory)
        assert rc.dtype == np.int32
        half = (p - 1) // 2
        Ab = [[v - p if v > half else v for v in row] for row in A[:3].tolist()]
        for i, q in enumerate(pl.moduli):  # the residues of the balanced operands' product, in [0, q)
            rows = [[sum(a * b for a, b in zip(ra, cb)) % q for cb in Bb_full] for ra in Ab]
            assert rc[i, :m * n].reshape(m, n)[:3].tolist() == rows
        got = rns_products.multiply(pl, balanced_halves(A, p, "A"), balanced_halves(B, p, "B"), memory=memory)
        assert _same(got, want)
        prepared = rns.Residues(balanced_halves(A, p, "A"), pl.moduli, np.float64)
        assert _same(rns_products.multiply(pl, prepared, balanced_halves(B, p, "B"), memory=memory), want)
    assert counts == {1, 2}  # 151 and 150 rows
    # the float64 products when they fit in what the pool keeps
    with modlin.limits(memory=4 * whole):
        assert pl.schedule(m * k, k * n, m * n, k, m, whole)[1] is None


def test_rns_int32_products_only_where_the_host_crt_reads_them():
    pl = modlin.plan(2**61 - 1, 300, 150, 70, device="cuda")  # the GPU's CRT kernel reads float64 sums
    whole = pl.workspace(panels=False)
    assert pl.workspace() == whole
    assert pl.schedule(300 * 150, 150 * 70, 300 * 70, 150, 300, whole // 2)[1] is None
    for pl in (modlin.plan(2**61 - 1, 300, 150, 70), modlin.plan(2**127 - 1, 300, 150, 70)):  # fused CRT, limbs
        assert pl.workspace() < pl.workspace(panels=False)
        # a stack's rows are not a range of its entries: no panels
        assert pl.schedule(300 * 150, 150 * 70, 300 * 70, 150, 0, pl.workspace() + 1)[1] is None


@pytest.mark.parametrize("p", [2**61 - 1, 2**127 - 1, P256], ids=pid)
def test_rns_int32_products_in_groups_of_moduli(p, rng, monkeypatch):
    """Int32 products made from the residues of several moduli at a time, in panels of rows
    (uneven last panel), the fused CRT's and the limbs': exact, and each group reads the
    operands' pieces once (fewer groups than moduli)."""
    import modlin._algorithms.rns as rns_products
    import modlin._arith.residues as rns
    import modlin._planning.rnsplan as rnsplan
    from modlin._arith.integers import balanced_halves

    monkeypatch.setattr(rnsplan, "GEMM_ROWS", 64)  # panels of 64 rows or more, at this size
    monkeypatch.setattr(rnsplan, "_schedule", rnsplan._schedule.__wrapped__)  # none kept for the real one
    m, k, n = 301, 600, 70  # A's residues weigh most: its panels make room for more moduli
    A = rand_ints(rng, (m, k), 0, p)
    B = rand_ints(rng, (k, n), 0, p)
    A[0], B[:, 0] = p - 1, p - 1
    A[1], B[:, 1] = (p - 1) // 2, (p + 1) // 2  # the balanced extremes
    pl = modlin.plan(p, m, k, n, algorithm="rns")
    N = len(pl.moduli)
    assert N >= 4
    group = -(-N // 2)  # two groups, each at most half the moduli
    with modlin.limits(threads=1):  # the CRT's buffers are per worker
        memory = pl._memory(m * k, k * n, m * n, k, group, 76 / m)
    with modlin.limits(memory=memory, threads=1):
        assert pl._memory(m * k, k * n, m * n, k, 1) > memory / 4  # float64 products: beyond the pool's share
        got_group, panel = pl.schedule(m * k, k * n, m * n, k, m, memory)
        assert got_group >= group and panel is not None and 64 <= panel < m
        reads = []
        real = rns.Pieces16.residues
        monkeypatch.setattr(rns.Pieces16, "residues",
                            lambda self, q, *a, **kw: reads.append(len(q)) or real(self, q, *a, **kw))
        rc, _ = rns_products.product_residues(pl, balanced_halves(A, p, "A"), balanced_halves(B, p, "B"), memory=memory)
        got = rns_products.multiply(pl, balanced_halves(A, p, "A"), balanced_halves(B, p, "B"), memory=memory)
    assert rc.dtype == np.int32
    # per group, B's residues once and A's once per panel
    assert max(reads) == got_group and len(reads) == 2 * -(-N // got_group) * (1 + -(-m // panel))
    assert _same(got, ref_matmul(A, B, p))



@pytest.mark.parametrize("p", [2**50 - 27, 2**61 - 1], ids=pid)
def test_int32_groups_weigh_memory_mapped_afresh(p, monkeypatch):
    """Beyond the pool's share of the budget every call maps the workspace afresh: the
    schedule takes smaller groups of moduli when the memory they save costs more, in the
    model, than their extra reads of the operands (n = 4096 under the default 4 GiB)."""
    import modlin._planning.rnsplan as rnsplan
    from modlin._planning.plan import device_pass_scale
    from modlin._runtime.calibration import POOL_SHARE

    n = 4096
    budget = 4 * 2**30
    monkeypatch.setattr(rnsplan, "_schedule", rnsplan._schedule.__wrapped__)  # each schedule weighed afresh
    with modlin.limits(memory=budget, threads=2):
        pl = modlin.plan(p, n, n, n, algorithm="rns")
        args = (n * n, n * n, n * n, n, n, budget)
        schedule = pl.schedule(*args)
        fresh_byte = rnsplan.FRESH_BYTE
        monkeypatch.setattr(rnsplan, "FRESH_BYTE", 0.0)
        largest = pl.schedule(*args)
        memory = {s: pl._memory(n * n, n * n, n * n, n, s[0], s[1] / n) for s in (schedule, largest)}
    assert None not in (schedule[1], largest[1])  # int32 products: float64 ones do not fit in the pool
    assert schedule[0] < largest[0] and memory[schedule] < memory[largest]
    # fewer moduli a group: more reads of the operands, repaid by the memory saved
    pool = POOL_SHARE * budget
    rereads = pl._passes(n * n, n * n, n * n, *schedule) - pl._passes(n * n, n * n, n * n, *largest)
    saved = fresh_byte * device_pass_scale(pl.device, None) * (
        (memory[largest] - pool) - max(memory[schedule] - pool, 0.0))
    assert 0 < rereads < saved


@pytest.mark.parametrize("p", [None, 2**61 - 1, 2**63 + 29, 2**127 - 1], ids=pid)
def test_limb_crt_reads_int32_residues(p, rng, monkeypatch):
    """The limbs' CRT only reads the products: int32 residues and float64 sums congruent
    to them give the same results, the entries at the edge of a tight basis (rebuilt with
    Python ints) too, and neither input changes."""
    import modlin._arith.crt as crt
    import modlin._arith.residues as rns

    monkeypatch.setattr(crt, "FUSED_MAX_N", 0)  # the limbs' path for every p
    basis = Basis((2**26 - 5, 2**26 - 27, 2**25 - 39))
    M, q = basis.M, basis.moduli
    vals = [-(M // 2), (M - 1) // 2, -(M // 2) + 1, 0, 1, -1] + [int(v) for v in rand_ints(rng, (300,), -(M // 2), M // 2)]
    E = len(vals)
    x32 = rns.padded_rows(len(q), E, np.int32)
    x32[:, :E] = [[v % m for v in vals] for m in q]
    x64 = rns.padded_rows(len(q), E, np.float64)  # unreduced sums, as a product leaves them
    x64[:, :E] = [[v % m + int(j) * m for v, j in zip(vals, rand_ints(rng, (E,), -2**26, 2**26))] for m in q]
    before = x32[:, :E].copy(), x64[:, :E].copy()
    want = vals if p is None else [v % p for v in vals]
    for x in (x32, x64):
        got = crt.reconstruct_rows(x, E, basis, p, p is None)
        assert [int(v) for v in got] == want
    assert np.array_equal(x32[:, :E], before[0]) and np.array_equal(x64[:, :E], before[1])


@pytest.mark.parametrize("p", [2**61 - 1, 2**64 - 59, 2**64, 2**127 - 1, P256], ids=pid)
def test_object_operands_in_range_are_balanced_as_pieces(p, rng):
    from modlin._arith.integers import balanced_halves

    half = (p - 1) // 2
    vals = [0, 1, -1, p - 1, -p, half, half + 1, -(p // 2), -(p // 2) - 1, (p + 1) // 2]
    vals += [int(v) for v in rand_ints(rng, (40,), -p, p)]
    x = np.empty(len(vals), dtype=object)
    x[:] = vals
    before = x.copy()
    h = balanced_halves(x, p, "A")
    assert h.shift is not None  # the fast path took them
    moduli = (2**26 - 5, 2**25 - 39, 65521, 256)
    r = h.residues(moduli)
    for i, m in enumerate(moduli):
        for j, v in enumerate(vals):
            b = v % p
            b = b - p if b > half else b
            assert int(r[i, j]) % m == b % m and -(m // 2) <= r[i, j] <= (m - 1) // 2
    assert all(a is b for a, b in zip(x, before))  # not modified


@pytest.mark.parametrize("p", [2**64 - 59, 2**127 - 1], ids=pid)
@pytest.mark.parametrize("bad", ["p", "-p-1", "huge"])
def test_object_operands_out_of_range_take_the_general_path(p, bad, rng):
    from modlin._arith.integers import balanced_halves

    x = rand_ints(rng, (4, 5), 0, p)
    x[1, 2] = {"p": p, "-p-1": -p - 1, "huge": 3 * p**3 + 7}[bad]
    h = balanced_halves(x, p, "A")
    assert h.shift is None  # balanced by balanced_lift, with Python arithmetic
    B = rand_ints(rng, (5, 3), 0, p)
    assert _same(modlin.matmul(x, B, p), ref_matmul(x, B, p))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8])
@pytest.mark.parametrize("E", [0, 1, 512, 4096, 2**20, 2**20 + 3])
def test_padded_rows_avoid_power_of_two_strides(dtype, E):
    from modlin._arith.residues import padded_rows

    a = padded_rows(3, E, dtype)
    assert a.dtype == dtype and a.shape[0] == 3 and a.shape[1] >= E and a.flags.c_contiguous
    assert a.strides[0] % 4096 == 64


@pytest.mark.parametrize("p", [None, 2**61 - 1, P256], ids=pid)
def test_reconstruct_takes_unreduced_residues(p, rng):
    # a single exact GEMM's sums go to the CRT unreduced: any integers below 2**53 congruent to C
    basis = RECON_BASES[0]
    vals = _signed_values(basis, rng)
    res = _canonical(vals, basis).astype(np.float64)
    shifts = rand_ints(rng, res.shape, -2**26, 2**26).astype(np.float64)
    res += shifts * np.array(basis.moduli, dtype=np.float64)[:, None]
    assert np.abs(res).max() < 2**53 and (res < 0).any()
    got = reconstruct(res, basis, p=p, as_object=p is None)
    assert [int(v) for v in got] == [v if p is None else v % p for v in vals]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8])
def test_residues_over_several_chunks(dtype, rng):
    # more entries than one GEMM of the residue pass takes, and a ragged last chunk
    import modlin._arith.residues as rns

    E = 3 * rns.RESIDUE_STEP + 17
    x = rand_ints(rng, (E,), -2**100, 2**100)
    basis = Basis(int8_moduli()[:5]) if dtype == np.int8 else Basis((2**26 - 5, 2**23 - 15, 65521, 256, 7))
    if dtype == np.float32:
        basis = Basis((4093, 4091, 256, 7))  # balanced residues exact in float32
    r = residues(x, basis, dtype)
    assert r.dtype == dtype
    # balanced: in [-(m//2), (m-1)//2]
    for i, m in enumerate(basis.moduli):
        assert r[i].min() >= -(m // 2) and r[i].max() <= (m - 1) // 2
    _assert_residues(r.astype(np.int64), x, basis)


@pytest.mark.parametrize("p", [2**63, 2**63 + 29, 2**64 - 59, 2**64 - 1, 2**64], ids=pid)
@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_balanced_lift_of_machine_words(p, dtype, rng):
    # the one-pass kernel for 2**63 <= p < 2**64 (and the bit view at p = 2**64), against Python ints
    info = np.iinfo(dtype)
    edges = [info.min, info.max, 0, 1, p - 1, p, p + 1, (p - 1) // 2, (p + 1) // 2, -(p // 2), -(p // 2) - 1]
    x = np.concatenate([rng.integers(info.min, info.max, 500, dtype=dtype, endpoint=True),
                        np.array([v for v in edges if info.min <= v <= info.max], dtype=dtype)])
    before = x.copy()
    got = balanced_lift(x, p, "A")
    want = [(v % p) - p * ((v % p) > (p - 1) // 2) for v in x.tolist()]
    assert got.dtype == np.int64 and [int(g) for g in got] == want
    assert np.array_equal(x, before)


@pytest.mark.parametrize("p", [2, 3, 2**31 - 1, 2**61 - 1, BELOW_2_63], ids=pid)
def test_reduced_int64_operands_are_lifted_entry_by_entry(p, rng):
    """int64 residues in [0, p) enter the residue kernel as they are, each lifted there (no
    lifted copy); the residues, pieces and extremes are those of the balanced lift."""
    from modlin._arith.integers import balanced_halves
    from modlin._arith.modular import balanced_lift_int64, reduced_int64

    half = (p - 1) // 2
    edge = [0, 1, p - 1, half, half + 1, (p + 1) // 2]
    x = np.array(edge + [int(v) % p for v in rand_ints(rng, (3000,), 0, p)], dtype=np.int64).reshape(6, -1)
    before = x.copy()
    h = balanced_halves(x, p, "A")
    assert h.lift == p
    lifted = [v - p if v > half else v for v in x.ravel().tolist()]
    moduli = (2**26 - 5, 2**21 + 1, 65521, 7, 2, 2**31 - 1)
    r = h.residues(moduli)
    for i, m in enumerate(moduli):
        assert [int(v) % m for v in r[i].ravel()] == [v % m for v in lifted]
        assert all(-(m // 2) <= int(v) <= (m - 1) // 2 for v in r[i].ravel())
    assert np.array_equal(h.residues(moduli, rows=slice(2, 5)), r[:, 2:5])
    assert h.max_abs() == max(abs(v) for v in lifted)
    assert np.array_equal(h.halves, balanced_halves(balanced_lift_int64(x, p), p, "A").halves)
    assert np.array_equal(x, before)
    # anything outside [0, p) takes the lifted copy
    for bad in (-1, p, -(2**63), 2**63 - 1):
        y = x.copy()
        y[3, 7] = bad
        assert not reduced_int64(y, p) and balanced_halves(y, p, "B").lift == 0
    assert reduced_int64(np.zeros((0, 3), dtype=np.int64), p)
    assert balanced_halves(np.asfortranarray(x), p, "A").lift == 0  # not contiguous: lifted as before


@pytest.mark.parametrize("p", [2**100 + 277, 2**127 - 1, P256], ids=pid)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8])
def test_residues_of_blocks_of_kept_pieces(p, dtype, rng):
    """A block of an operand's pieces (``Pieces16.block``: what a tile reads of an operand
    converted once) has the residues of the block converted alone: with and without the
    balancing shifts, of some of its rows, uneven blocks at every edge."""
    import modlin._arith.residues as rns
    from modlin._arith.integers import balanced_halves

    x = rand_ints(rng, (37, 29), -p, p)
    x[0, 0], x[-1, -1], x[5, 3] = -p, p - 1, (p - 1) // 2
    basis = Basis(int8_moduli()[:5]) if dtype == np.int8 else Basis((2**26 - 5, 2**23 - 15, 65521, 256, 7))
    if dtype == np.float32:
        basis = Basis((4093, 4091, 256, 7))
    balanced = balanced_halves(x, p, "x")
    assert balanced.shift is not None  # the shifts' path
    plain = rns.Pieces16(x)  # values as they are: no shifts
    for h, lift in ((balanced, lambda v: v % p - p * (v % p > (p - 1) // 2)), (plain, lambda v: v)):
        for rows, cols in ((slice(0, 37), slice(0, 29)), (slice(3, 20), slice(7, 8)), (slice(36, 37), slice(0, 29)),
                           (slice(10, 37), slice(5, 29)), (slice(0, 1), slice(28, 29))):
            blk = h.block(rows, cols)
            assert blk.kept and blk.shape == x[rows, cols].shape
            want = np.vectorize(lift, otypes=[object])(x[rows, cols])
            got = blk.residues(basis.moduli, dtype)
            assert got.dtype == dtype and got.shape == (len(basis.moduli),) + want.shape
            _assert_residues(got.astype(np.int64), want, basis)
            part = slice(1, max(2, want.shape[0] - 1))
            _assert_residues(blk.residues(basis.moduli, dtype, rows=part).astype(np.int64), want[part], basis)


def test_object_pieces_in_steps(rng, monkeypatch):
    """Python ints are made pieces a few rows at a time: a later step needing more pieces
    widens the earlier ones (sign-extended), entries needing more than allowed, or not
    plain ints, give None; and a huge ``p`` with small entries keeps few pieces."""
    import modlin._arith.residues as rns

    monkeypatch.setattr(rns, "OBJECT_STEP", 40)
    x = rand_ints(rng, (9, 13), -2**20, 2**20)
    x[6, 2], x[7, 0] = -2**100, 2**100 - 1  # past the first steps
    got = rns.object_pieces(x, 8)
    assert np.array_equal(got, pieces_of(x)[0])
    assert rns.object_pieces(x, 6) is None  # 101 bits and a sign do not fit 6 pieces
    y = x.copy()
    y[8, 12] = np.int64(3)
    assert rns.object_pieces(y, 8) is None
    p = 2**40000 + 1  # far more pieces than the entries need
    A = rand_ints(rng, (3, 50), -2**64, 2**64)
    B = rand_ints(rng, (50, 2), 0, 2**64)
    assert _same(modlin.matmul(A, B, p), ref_matmul(A, B, p))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("p", [2**61 - 1, 2**127 - 1, P256], ids=pid)
def test_short_products_split_by_moduli(p, threads, rng, monkeypatch):
    """Short products (slabs thinner than MODULI_SPLIT_ROWS) give each worker whole GEMMs of
    its share of the moduli, forced here on small shapes: exact against Python's integers for
    2-D products, stacks, entries p - 1 and k past one block of the moduli (several GEMMs a
    modulus, beyond 64 bits), and the split was taken (every worker ran whole GEMMs)."""
    import threading

    import modlin._algorithms.rns as rns_products
    from modlin._engines import threads as _threads

    monkeypatch.setattr(_threads, "MIN_WORK", 0)
    if p > 2**64:  # the blocks this test means to meet
        pl = modlin.plan(p, 13, 500, 7)
        assert pl.gemm_count() > len(pl.moduli)
    calls = []
    real = rns_products._multiword.multiply_words

    def spy(sub, a, b, out):
        calls.append((threading.get_ident(), a.shape[-2]))
        return real(sub, a, b, out)

    monkeypatch.setattr(rns_products._multiword, "multiply_words", spy)
    gemm = rns_products.get_engine("fp64").gemm

    def gemm_spy(self, a, b, out=None):
        calls.append((threading.get_ident(), a.shape[-2]))
        return gemm(a, b, out)

    monkeypatch.setattr(type(rns_products.get_engine("fp64")), "gemm", gemm_spy)
    with modlin.limits(threads=threads):
        for shape_a, shape_b in (((40, 300), (300, 30)), ((2, 20, 90), (90, 25)), ((13, 500), (500, 7))):
            A, B = rand_ints(rng, shape_a, 0, p), rand_ints(rng, shape_b, 0, p)
            A[..., 0, :], B[..., :, 0] = p - 1, p - 1
            calls.clear()
            got = modlin.matmul(A, B, p)
            assert (np.asarray(got, dtype=object) == ref_matmul(A, B, p)).all(), (shape_a, shape_b)
            assert calls and {rows for _, rows in calls} == {shape_a[-2]}, calls  # whole GEMMs only
            assert len({who for who, _ in calls}) > 1  # on more than one worker


def test_short_products_planned_by_the_slowest_workers_share(monkeypatch):
    """A product split by moduli costs the slowest worker's share: on two threads an odd
    count of moduli is charged one more modulus' GEMMs, an even count nothing more, and
    products of 128 rows a worker or more (split by rows) nothing more. So at 127 bits and
    n = 200 the planner takes 12 single-GEMM moduli of 22 bits on two threads, where on one
    it takes 11 of 24 bits in two blocks each."""
    from modlin._engines import threads as _threads

    p = 2**127 - 1
    shape = (200, 200, 200)
    bound = modlin.plan(p, *shape).bound
    odd = RNSPlan(p, bound, choose_moduli(bound, shape, "fp64", threads=1), "fp64", shape)
    even = RNSPlan(p, bound, choose_moduli(bound, shape, "fp64", threads=2), "fp64", shape)
    assert len(odd.moduli) == 11 and odd.gemm_count() == 22
    assert len(even.moduli) == 12 and even.gemm_count() == 12
    charged = {(pl.moduli, m, t): pl.cost((m, 200, 200), threads=t) for pl in (odd, even)
               for m in (200, 256) for t in (1, 2)}
    monkeypatch.setattr(_threads, "MODULI_SPLIT_ROWS", 0)  # no product is split by moduli
    for (moduli, m, t), cost in charged.items():
        plain = RNSPlan(p, bound, moduli, "fp64", shape).cost((m, 200, 200), threads=t)
        if len(moduli) == 11 and m == 200 and t == 2:
            assert cost > plain * 1.03
        else:
            assert cost == plain
