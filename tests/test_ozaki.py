"""``modlin.ozaki``: float64 / complex128 GEMMs emulated on exact integer GEMMs (Ozaki-II).

Every accuracy claim is checked against an independent EXACT oracle. A finite
double is an integer times ``2**-1074``, so a product of doubles is an integer
times ``2**-2148`` and a sum of such products is exact in Python integers
(object arrays, ``numpy.matmul``'s shape rules). Exact values are rounded to
double with ``int / int`` (CPython rounds that correctly, to nearest-even, at
subnormal precision too, and raises OverflowError past the double range).

Error measure: the componentwise relative error ``max |C - E| / |E|`` over the
entries (over the real and the imaginary part separately for complex
results). Where the exact value ``E`` is zero the error is 0 if ``C`` is zero
too and infinite otherwise (the emulation has no excuse there).

Inputs are GEMMul8's: ``(rand - 0.5) * exp(phi * randn)``, phi in {0, 0.5, 1, 2}.
Shapes are small (m, n <= 24, k <= 256) so that the pure-Python oracle stays fast.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, strategies as st

from modlin import ozaki
from modlin._arith.crt import to_double
from modlin._arith.moduli import Basis, int8_moduli, is_twom_modulus, twom_moduli

PHIS = (0.0, 0.5, 1.0, 2.0)
ENGINES = ("int8", "fp64")
MODES = ("fast", "accurate")
U = 2.0**-53  # unit roundoff
SHIFT = 1074  # a finite double is an integer times 2**-SHIFT


# ===================================================================== the exact oracle

def _dyadic(x) -> int:
    """The finite double ``x`` as the exact integer ``x * 2**SHIFT``."""
    n, d = float(x).as_integer_ratio()
    return n * ((1 << SHIFT) // d)


_dyadic_u = np.frompyfunc(_dyadic, 1, 1)


def as_dyadic(x: np.ndarray) -> np.ndarray:
    """Object array of the exact integers ``x * 2**SHIFT`` (x finite, real)."""
    x = np.asarray(x, dtype=np.float64)
    assert np.all(np.isfinite(x)), "oracle needs finite inputs"
    if x.size == 0:
        return np.zeros(x.shape, dtype=object)
    return np.asarray(_dyadic_u(x), dtype=object).reshape(x.shape)


def _omatmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.matmul(a, b)
    return np.asarray(r, dtype=object)


def exact(A, B):
    """The exact ``A @ B`` as integers times ``2**(-2*SHIFT)``: an object array for real
    input, a pair ``(re, im)`` of object arrays for complex input (2-D operands)."""
    A, B = np.asarray(A), np.asarray(B)
    if A.dtype.kind != "c" and B.dtype.kind != "c":
        return _omatmul(as_dyadic(A), as_dyadic(B))
    ar, ai, br, bi = (as_dyadic(x) for x in (A.real, A.imag, B.real, B.imag))
    return _omatmul(ar, br) - _omatmul(ai, bi), _omatmul(ar, bi) + _omatmul(ai, br)


def _round(p: int) -> float:
    """The double nearest ``p * 2**(-2*SHIFT)`` (ties to even; +-inf beyond the range)."""
    try:
        return p / (1 << (2 * SHIFT))
    except OverflowError:
        return -math.inf if p < 0 else math.inf


def rounded(P) -> np.ndarray:
    """Correctly rounded doubles (complex128 for a (re, im) pair) of an exact product."""
    if isinstance(P, tuple):
        return rounded(P[0]) + 1j * rounded(P[1])
    out = np.empty(P.shape)
    for idx in np.ndindex(P.shape):
        out[idx] = _round(int(P[idx]))
    return out


def _relerr_real(C: np.ndarray, P: np.ndarray) -> np.ndarray:
    C = np.asarray(C, dtype=np.float64)
    assert C.shape == P.shape, (C.shape, P.shape)
    out = np.empty(P.shape)
    for idx in np.ndindex(P.shape):
        p, c = int(P[idx]), float(C[idx])
        if not math.isfinite(c):
            out[idx] = math.inf
        elif p == 0:
            out[idx] = 0.0 if c == 0 else math.inf
        else:
            out[idx] = float(Fraction(abs((_dyadic(c) << SHIFT) - p), abs(p)))
    return out


def relerr(C, P) -> np.ndarray:
    """Componentwise relative errors of ``C`` against the exact product ``P`` (see the
    module docstring; complex: the larger of the real and the imaginary part's error)."""
    if isinstance(P, tuple):
        C = np.asarray(C)
        return np.maximum(_relerr_real(C.real, P[0]), _relerr_real(C.imag, P[1]))
    return _relerr_real(C, P)


def max_relerr(C, P) -> float:
    e = relerr(C, P)
    return float(e.max()) if e.size else 0.0


def _faithful_real(C: np.ndarray, P: np.ndarray) -> list:
    """Indices where ``C`` is NOT one of the two doubles bracketing the exact value."""
    bad = []
    for idx in np.ndindex(P.shape):
        p, c = int(P[idx]), float(C[idx])
        if not math.isfinite(c):
            bad.append(idx)
            continue
        ci = _dyadic(c) << SHIFT
        if ci == p:
            continue
        nxt = np.nextafter(c, math.inf if ci < p else -math.inf)
        ni = _dyadic(nxt) << SHIFT if math.isfinite(nxt) else None
        if ni is None or not (min(ci, ni) <= p <= max(ci, ni)):
            bad.append(idx)
    return bad


def assert_faithful(C, P) -> None:
    """Every entry of ``C`` is the exact value or one of its two neighbouring doubles."""
    C = np.asarray(C)
    if isinstance(P, tuple):
        bad = _faithful_real(C.real, P[0]) + _faithful_real(C.imag, P[1])
    else:
        bad = _faithful_real(C, P)
    assert not bad, f"{len(bad)} entries are not faithfully rounded; first at {bad[0]}"


def assert_correctly_rounded(C, P) -> None:
    R = rounded(P)
    C = np.asarray(C)
    assert C.shape == R.shape, (C.shape, R.shape)
    mism = np.argwhere(~((C == R) | (np.isnan(C) & np.isnan(R))))
    assert mism.size == 0, (
        f"{len(mism)} entries differ from the correctly rounded exact product; first at "
        f"{tuple(mism[0])}: got {C[tuple(mism[0])]!r}, expected {R[tuple(mism[0])]!r}"
    )


# ===================================================================== inputs

def gemmul8(rng, shape, phi, complex_=False) -> np.ndarray:
    """GEMMul8's test matrices: ``(rand - 0.5) * exp(phi * randn)`` (each part for complex)."""
    def part():
        return (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return part() + 1j * part() if complex_ else part()


M_, K_, N_ = 16, 128, 16


@lru_cache(maxsize=None)
def case(kind: str, phi: float, seed: int = 0):
    """Fixed inputs and their exact product per (kind, phi, seed): the same everywhere."""
    rng = np.random.default_rng([int(phi * 2), kind == "complex", seed])
    cplx = kind == "complex"
    A = gemmul8(rng, (M_, K_), phi, cplx)
    B = gemmul8(rng, (K_, N_), phi, cplx)
    A.setflags(write=False)
    B.setflags(write=False)
    return A, B, exact(A, B)


def emulate(kind, A, B, **kw):
    return (ozaki.dgemm if kind == "real" else ozaki.zgemm)(A, B, **kw)


# ===================================================================== the oracle itself

def test_oracle_self_check(rng):
    # integer-valued doubles: numpy's product is exact and must agree with the oracle
    A = rng.integers(-1000, 1000, (3, 5)).astype(float)
    B = rng.integers(-1000, 1000, (5, 4)).astype(float)
    assert np.array_equal(rounded(exact(A, B)), A @ B)
    Z = A + 1j * rng.integers(-9, 9, (3, 5))
    W = B - 1j * rng.integers(-9, 9, (5, 4))
    assert np.array_equal(rounded(exact(Z, W)), Z @ W)
    # dyadic conversion is exact at the extremes
    assert _dyadic(5e-324) == 1 and _dyadic(-1.0) == -(1 << SHIFT)
    assert _round(1 << (2 * SHIFT)) == 1.0 and _round(-(1 << (2 * SHIFT + 1025))) == -math.inf
    assert _round(1) == 0.0  # 2**-2148 rounds to zero
    # ties to even: 1 + 2**-53 is halfway between 1 and 1 + 2**-52
    assert _round((1 << (2 * SHIFT)) + (1 << (2 * SHIFT - 53))) == 1.0
    # relative errors: exact zeros give 0 only for an exact zero
    P = exact(np.array([[1.0, -1.0]]), np.array([[1.0], [1.0]]))
    assert relerr(np.array([[0.0]]), P)[0, 0] == 0.0
    assert relerr(np.array([[1e-300]]), P)[0, 0] == math.inf
    P1 = exact(np.array([[3.0]]), np.array([[1.0]]))
    assert relerr(np.array([[3.0 * (1 + 2**-52)]]), P1)[0, 0] == pytest.approx(2**-52)
    # faithful: the bracketing neighbours pass, one more ulp fails
    P3 = exact(np.array([[1.0, 2**-60]]), np.array([[1.0], [1.0]]))  # 1 + 2**-60
    assert_faithful(np.array([[1.0]]), P3)
    assert_faithful(np.array([[1.0 + 2**-52]]), P3)
    with pytest.raises(AssertionError):
        assert_faithful(np.array([[1.0 - 2**-53]]), P3)
    with pytest.raises(AssertionError):
        assert_faithful(np.array([[1.0 + 2**-51]]), P3)


# ===================================================================== accuracy vs the moduli

COUNTS = tuple(range(8, 23, 2))


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("phi", PHIS)
def test_error_falls_as_moduli_grow(kind, phi):
    # int8 engine; for zgemm the 22 int8 moduli with a square root of -1 (2M)
    A, B, P = case(kind, phi)
    extra = {} if kind == "real" else {"algorithm": "2m"}
    errs = [max_relerr(emulate(kind, A, B, engine="int8", moduli=c, **extra), P) for c in COUNTS]
    table = ", ".join(f"{c}: {e:.2e}" for c, e in zip(COUNTS, errs))
    # monotone non-increasing, up to the rounding of the result itself (a few units of 2**-53)
    for c0, e0, c1, e1 in zip(COUNTS, errs, COUNTS[1:], errs[1:]):
        assert e1 <= e0 + 4 * U, f"error grew from {c0} to {c1} moduli: {table}"
    # and strictly much smaller at the top: a million times, down to the final rounding
    assert errs[0] > 1e-9, table  # 8 int8 moduli (~64 bits) cannot be near double accuracy
    assert errs[-1] <= 1e-6 * errs[0], table
    assert errs[-1] <= 4 * U, table


# The int8 engine's defaults are 16 int8 moduli (dgemm) and 17 int8 2M moduli (zgemm),
# M >= 2**124. With one fewer (M ~ 2**117) they lost to NumPy (OpenBLAS) on some of these
# inputs once phi >= 1, by up to 2.6x (real phi=2: 2.64, 2.08, 1.16 on seeds 0-2; complex
# phi=2: 2.56, 1.14, 0.37), and on 2-4 of 10 further phi=2 inputs by up to 8x; one more
# modulus never lost. NumPy's error depends on OpenBLAS's summation order (its kernel is
# picked per CPU), so the margins here may move on other machines.


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("phi", PHIS)
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_default_moduli_no_worse_than_numpy(kind, phi, engine, mode):
    ratios = []
    for seed in range(3):
        A, B, P = case(kind, phi, seed)
        native = max_relerr(A @ B, P)
        ratios.append(max_relerr(emulate(kind, A, B, engine=engine, mode=mode), P) / native)
    assert max(ratios) <= 1.0, (
        f"{engine}/{mode} error / numpy's error = {', '.join(f'{r:.2f}' for r in ratios)} (phi = {phi}, {kind})")


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("phi", [2.5, 3.0, 4.0, 5.0, 6.0])
@pytest.mark.parametrize("engine", ENGINES)
def test_default_moduli_no_worse_than_numpy_on_wide_exponent_ranges(kind, phi, engine):
    # GEMMul8's inputs past phi = 2: the moduli grow with the operands' exponent spread
    # (spread_bits). 16 int8 moduli once lost to numpy by 7x at phi = 3 and 11x at phi = 4.
    ratios = []
    for seed in range(2):
        rng = np.random.default_rng([seed, int(phi * 2), kind == "complex", 2026])
        A, B = gemmul8(rng, (12, 300), phi, kind == "complex"), gemmul8(rng, (300, 10), phi, kind == "complex")
        P = exact(A, B)
        native = max_relerr(A @ B, P)
        for mode in MODES:
            ratios.append(max_relerr(emulate(kind, A, B, engine=engine, mode=mode), P) / native)
    assert max(ratios) <= 1.0, (phi, kind, engine, ratios)


def test_spread_bits():
    rng = np.random.default_rng(7)
    g = rng.standard_normal((40, 200))
    assert ozaki.spread_bits(g, g.T) == 0 == ozaki.spread_bits(g)  # well scaled: the plain default
    bits = [ozaki.spread_bits(gemmul8(rng, (40, 200), phi)) for phi in (0.0, 2.0, 4.0, 6.0)]
    assert bits[0] == 0 and bits == sorted(bits) and bits[-1] > 30, bits
    # L_A is the most, over the rows, of (top exponent - mean exponent of the nonzero entries)
    x = np.array([[2.0**40, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    assert ozaki._line_spread(x, 1) == pytest.approx(40 - 40 / 3)
    assert ozaki.spread_bits(x, np.ones((4, 2))) == math.ceil(40 - 40 / 3 - ozaki.SPREAD_FREE)
    # capped where the scaling keeps no more bits; empty operands and zeros spread nothing
    wide = np.array([[2.0**1000] + [2.0**-1000] * 9])
    assert ozaki.spread_bits(wide, wide.T) == ozaki.SPREAD_CAP
    assert ozaki.spread_bits(np.zeros((3, 0)), np.zeros((0, 2))) == 0 == ozaki.spread_bits(np.zeros((2, 2)))
    # stacks and vectors: the widest matrix counts
    assert ozaki.spread_bits(np.stack([g, wide.repeat(20, axis=1)[:, :200].repeat(40, axis=0)]), g.T) > 0
    assert ozaki.spread_bits(wide[0], wide[0]) == ozaki.SPREAD_CAP
    # the count a product uses: moduli_for with its spread; the pool bounds it, never an error
    for kind, engine in [("real", "fp64"), ("real", "int8"), ("complex", "int8"), ("syrk", "int8")]:
        plain = ozaki.moduli_for(kind, engine=engine, k=300)[0]
        more = ozaki.moduli_for(kind, engine=engine, k=300, spread=30)[0]
        assert more[:len(plain)] == plain and math.prod(more) >= 2**154 > math.prod(more[:-1])
        ozaki.moduli_for(kind, engine=engine, k=2**17, spread=ozaki.SPREAD_CAP)
    assert len(ozaki.moduli_for("complex", engine="int8", algorithm="2m", k=2**17, spread=54)[0]) == 22
    with pytest.raises(ValueError, match="spread must be"):
        ozaki.moduli_for("real", spread=-1)
    # the product takes it: with the default, a phi = 6 product equals the explicit count
    A, B = gemmul8(rng, (6, 100), 6.0), gemmul8(rng, (100, 5), 6.0)
    mods = ozaki.moduli_for("real", k=100, spread=ozaki.spread_bits(A, B))[0]
    assert len(mods) > len(ozaki.moduli_for("real", k=100)[0])
    assert np.array_equal(ozaki.dgemm(A, B), ozaki.dgemm(A, B, moduli=list(mods)))


def test_default_moduli_grow_with_k():
    # log2(k / 1024) more bits of M past k = 1024: the bound on |A'||B'| sums k terms
    for kind, engine in [("real", "int8"), ("complex", "int8"), ("real", "fp64"), ("syrk", "int8")]:
        for k in (1, 1024, 1025, 2049, 16384, 2**17 + 3):
            mods = ozaki.moduli_for(kind, engine=engine, k=k)[0]
            need = Fraction(2**124 * max(k, 1024), 1024)  # 2**(124 + log2(k / 1024)), exactly
            assert math.prod(mods) >= need > math.prod(mods[:-1]), (kind, engine, k)


@pytest.mark.parametrize("engine", ENGINES)
def test_default_moduli_no_worse_than_numpy_at_large_k(engine):
    # k = 16384, phi = 2, complex: where M of 2**124 (k = 1024's default) lost to numpy
    rng = np.random.default_rng([16384, 2])
    A, B = gemmul8(rng, (4, 16384), 2.0, True), gemmul8(rng, (16384, 4), 2.0, True)
    P = exact(A, B)
    assert max_relerr(ozaki.zgemm(A, B, engine=engine), P) <= max_relerr(A @ B, P)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("small", ["A", "B"])
def test_an_operand_exact_in_few_bits_leaves_its_bits_to_the_other(mode, small):
    # B of small integers is exact with 4 bits per column: the scaling gives A the rest,
    # so 10 int8 moduli (M ~ 2**79) already round correctly (an even split: about 3e-9)
    rng = np.random.default_rng(5)
    A, B = gemmul8(rng, (16, 256), 1.0, False), rng.integers(-8, 9, (256, 16)).astype(float)
    if small == "A":
        A, B = B.T.copy(), A.T.copy()
    P = exact(A, B)
    assert max_relerr(ozaki.dgemm(A, B, engine="int8", moduli=10, mode=mode), P) <= U
    Z, W = A + 1j * A[::-1], B - 2j * B[::-1]  # complex: exactness is per line over both parts
    assert max_relerr(ozaki.zgemm(Z, W, engine="int8", moduli=10, mode=mode), exact(Z, W)) <= U


def test_exact_bits(rng):
    from modlin._algorithms.quantize import exact_bits, part_bounds

    x = np.array([[1.0, 0.5, 0.0], [3.0, 2.0**-30, -1.5], [0.0, 0.0, 0.0], [2.0**-1074, 2.0**-1060, 0.0]])
    ex, _ = part_bounds([x], axis=1)
    # row max 1 (ex 1) and lsb 2**-1: 2 bits; max 3 (ex 2), lsb 2**-30: 32 bits; zeros: T_BITS
    np.testing.assert_array_equal(exact_bits([x], ex, axis=1), [5, 32, 5, 15])
    y = gemmul8(rng, (7, 9), 2.0, False)
    ex, _ = part_bounds([y], axis=0)
    need = exact_bits([y], ex, axis=0)
    for j in range(9):  # with need bits every entry scales to an integer, with one fewer not all
        s = need[j] - ex[j]
        assert np.all(np.ldexp(y[:, j], s) == np.rint(np.ldexp(y[:, j], s)))
        assert need[j] == 5 or not np.all(np.ldexp(y[:, j], s - 1) == np.rint(np.ldexp(y[:, j], s - 1)))


def test_default_fp64_moduli_are_well_above_numpy():
    # the CPU default (6 fp64 moduli, M ~ 2**126) is far more accurate than numpy at phi <= 1
    for kind in ("real", "complex"):
        for phi in PHIS[:3]:
            A, B, P = case(kind, phi)
            assert max_relerr(emulate(kind, A, B), P) <= 0.1 * max_relerr(A @ B, P), (kind, phi)


# ===================================================================== 2M = 3M = 4M, bit for bit

TWOM14 = twom_moduli()[:14]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("phi", [0.5, 2.0])
def test_2m_3m_4m_bit_identical(engine, mode, phi):
    A, B, _ = case("complex", phi)
    ref = ozaki.zgemm(A, B, moduli=TWOM14, algorithm="2m", engine=engine, mode=mode)
    for alg in ("3m", "4m", "auto", "hybrid"):
        got = ozaki.zgemm(A, B, moduli=TWOM14, algorithm=alg, engine=engine, mode=mode)
        assert got.dtype == np.complex128
        assert np.array_equal(got, ref), alg


@pytest.mark.parametrize("engine", ENGINES)
def test_hybrid_bit_identical_to_3m_and_4m(engine):
    # a list mixing 2M moduli with moduli without a square root of -1 (256, 255, 253, ...)
    A, B, P = case("complex", 1.0)
    mods = int8_moduli()[:16]
    assert any(is_twom_modulus(q) for q in mods) and not all(is_twom_modulus(q) for q in mods)
    ref = ozaki.zgemm(A, B, moduli=mods, algorithm="hybrid", engine=engine)
    for alg in ("3m", "4m", "auto"):
        assert np.array_equal(ozaki.zgemm(A, B, moduli=mods, algorithm=alg, engine=engine), ref), alg
    assert max_relerr(ref, P) <= 1e-13
    # a count beyond the 22 int8 2M moduli: "auto" becomes the hybrid, equal to 3M on its list
    mods24, algs24 = ozaki.moduli_for("complex", engine="int8", moduli=24)
    assert algs24[:22] == ("2m",) * 22 and set(algs24[22:]) == {"3m"}
    auto = ozaki.zgemm(A, B, moduli=24, engine="int8")
    assert np.array_equal(auto, ozaki.zgemm(A, B, moduli=mods24, algorithm="hybrid", engine="int8"))
    assert np.array_equal(auto, ozaki.zgemm(A, B, moduli=mods24, algorithm="3m", engine="int8"))
    assert np.array_equal(auto, ozaki.zgemm(A, B, moduli=mods24, algorithm="4m", engine="int8"))
    assert_faithful(auto, P)


# ===================================================================== faithful and exact rounding

FAITHFUL = [("int8", 22), ("fp64", 8)]


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("engine, count", FAITHFUL)
@pytest.mark.parametrize("mode", MODES)
def test_faithful_rounding(kind, engine, count, mode):
    for phi in PHIS:
        A, B, P = case(kind, phi)
        extra = {"algorithm": "2m"} if kind == "complex" and engine == "int8" else {}
        C = emulate(kind, A, B, engine=engine, moduli=count, mode=mode, **extra)
        assert_faithful(C, P)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_cancellation_exact(engine, mode):
    x = np.array([[1e16, 1.0, -1e16]])
    y = np.array([[1.0], [1.0], [1.0]])
    assert (x @ y)[0, 0] != 1.0  # numpy sums in order and loses the 1
    assert ozaki.dgemm(x, y, engine=engine, mode=mode)[0, 0] == 1.0
    z = ozaki.zgemm(x * (1 + 1j), y * (1 - 2j), engine=engine, mode=mode)
    assert z[0, 0] == (1 + 1j) * (1 - 2j)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_integer_inputs_correctly_rounded(engine, mode, rng):
    # 31-bit integers, k = 64: exact products reach 2**67, beyond 53 bits; the result is the
    # correctly rounded exact integer (default moduli keep every input bit)
    A = rng.integers(-(2**31), 2**31, (6, 64)).astype(float)
    B = rng.integers(-(2**31), 2**31, (64, 5)).astype(float)
    P = exact(A, B)
    C = ozaki.dgemm(A, B, engine=engine, mode=mode)
    assert_correctly_rounded(C, P)
    Z = A[:, :32] + 1j * A[:, 32:]
    W = B[:32] - 1j * B[32:]
    assert_correctly_rounded(ozaki.zgemm(Z, W, engine=engine, mode=mode), exact(Z, W))
    # small integers: the exact result is representable and returned exactly
    a = rng.integers(-(2**20), 2**20, (5, 64)).astype(float)
    b = rng.integers(-(2**20), 2**20, (64, 7)).astype(float)
    ref = (a.astype(np.int64) @ b.astype(np.int64)).astype(float)  # |.| < 2**47: exact
    assert np.array_equal(ozaki.dgemm(a, b, engine=engine, mode=mode), ref)


@st.composite
def _int_matrices(draw, complex_):
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    ints = st.integers(-(2**12), 2**12)

    def mat(r, c):
        x = np.array(draw(st.lists(ints, min_size=r * c, max_size=r * c)), dtype=float).reshape(r, c)
        if complex_:
            y = np.array(draw(st.lists(ints, min_size=r * c, max_size=r * c)), dtype=float).reshape(r, c)
            return x + 1j * y
        return x

    return mat(m, k), mat(k, n)


@given(ab=_int_matrices(False), engine=st.sampled_from(ENGINES), mode=st.sampled_from(MODES))
def test_property_small_integers_exact_real(ab, engine, mode):
    A, B = ab
    ref = np.array(np.matmul(A.astype(np.int64).astype(object), B.astype(np.int64).astype(object)), dtype=float)
    assert np.array_equal(ozaki.dgemm(A, B, engine=engine, mode=mode), ref)


@given(ab=_int_matrices(True), engine=st.sampled_from(ENGINES), mode=st.sampled_from(MODES),
       alg=st.sampled_from(["auto", "3m", "4m"]))
def test_property_small_integers_exact_complex(ab, engine, mode, alg):
    A, B = ab
    assert np.array_equal(ozaki.zgemm(A, B, engine=engine, mode=mode, algorithm=alg), rounded(exact(A, B)))


_moderate = st.one_of(
    st.just(0.0),
    st.builds(lambda s, x: s * x, st.sampled_from([1.0, -1.0]), st.floats(2.0**-10, 1000.0)),
)


@st.composite
def _float_matrices(draw, complex_):
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))

    def mat(r, c):
        x = np.array(draw(st.lists(_moderate, min_size=r * c, max_size=r * c))).reshape(r, c)
        if complex_:
            return x + 1j * np.array(draw(st.lists(_moderate, min_size=r * c, max_size=r * c))).reshape(r, c)
        return x

    return mat(m, k), mat(k, n)


@given(ab=_float_matrices(False), setting=st.sampled_from(FAITHFUL), mode=st.sampled_from(MODES))
def test_property_correctly_rounded_real(ab, setting, mode):
    # exponents within 2**+-10: with 22 int8 / 8 fp64 moduli every input bit is kept, so the
    # result is the exact product rounded once (even through cancellation)
    A, B = ab
    engine, count = setting
    assert_correctly_rounded(ozaki.dgemm(A, B, engine=engine, moduli=count, mode=mode), exact(A, B))


@given(ab=_float_matrices(True), setting=st.sampled_from(FAITHFUL), mode=st.sampled_from(MODES))
def test_property_correctly_rounded_complex(ab, setting, mode):
    A, B = ab
    engine, count = setting
    C = ozaki.zgemm(A, B, engine=engine, moduli=count, mode=mode)
    assert_correctly_rounded(C, exact(A, B))


@pytest.mark.parametrize("k", [1, 3, 64, 128, 1000])
def test_extreme_inputs_fill_the_crt_range(k):
    # every entry just below a power of two, all of one sign per line: the integer products
    # reach the bound the scaling promises (|A'B'| <= M/2), where an off-by-one would wrap
    x = np.nextafter(1.0, 0.0)
    A = np.full((3, k), x)
    A[1] *= -1
    B = np.full((k, 2), -x)
    P = exact(A, B)
    Z, W = A * (1 + 1j), B * (1 - 1j)  # a purely real product
    PZ = exact(Z, W)
    for engine, few in (("int8", 8), ("fp64", 3)):
        for mode in MODES:
            assert max_relerr(ozaki.dgemm(A, B, engine=engine, mode=mode), P) <= 4 * U
            assert max_relerr(ozaki.dgemm(A, B, engine=engine, mode=mode, moduli=few), P) <= 2.0**-20
            assert max_relerr(ozaki.zgemm(Z, W, engine=engine, mode=mode), PZ) <= 4 * U
            assert max_relerr(ozaki.zgemm(Z, W, engine=engine, mode=mode, moduli=few), PZ) <= 2.0**-20
            assert max_relerr(ozaki.dsyrk(A, engine=engine, mode=mode, moduli=few), exact(A, A.T)) <= 2.0**-20
            assert max_relerr(ozaki.zherk(Z, engine=engine, mode=mode, moduli=few),
                              exact(Z, Z.conj().T)) <= 2.0**-20


# ===================================================================== CRT to a correctly rounded double

BASES = {
    "int8x22": Basis(int8_moduli()[:22]),  # M ~ 2**171, includes the even 256
    "fp64x8": Basis(tuple(ozaki.moduli_for("real", engine="fp64", moduli=8)[0])),  # M ~ 2**168
    "near2**26": Basis((2**26 - 5, 2**26 - 3, 2**26 - 1)),  # M ~ 2**78
    "pair": Basis((255, 256)),
    "single": Basis((251,)),
}


def _expected_double(v: int, S: int) -> float:
    """``v * 2**-S`` correctly rounded by Python (Fractions / ints round to nearest-even)."""
    try:
        return float(Fraction(v) * Fraction(2) ** -S)
    except OverflowError:
        return -math.inf if v < 0 else math.inf


def _check_to_double(basis: Basis, pairs) -> None:
    """Residues built with Python ``%``; ``S`` split between ``sa`` (rows) and ``sb`` (cols)."""
    vs = [v for v, _ in pairs]
    Ss = [S for _, S in pairs]
    res = np.array([[v % q for v in vs] for q in basis.moduli], dtype=np.int64)
    # one column: S in sa; one row: sa = 7 for the row and S - 7 in sb
    out = to_double(res.reshape(len(basis.moduli), len(vs), 1), basis, np.array(Ss), np.array([0]))
    out2 = to_double(res.reshape(len(basis.moduli), 1, len(vs)), basis, np.array([7]), np.array(Ss) - 7)
    for i, (v, S) in enumerate(pairs):
        want = _expected_double(v, S)
        for got in (out[i, 0], out2[0, i]):
            assert got == want and math.copysign(1, got) == math.copysign(1, want) or v == 0 and got == 0, (
                f"v = {v}, S = {S}: got {got!r}, expected {want!r}")


def _bound(basis):
    return (basis.M - 1) // 2


@st.composite
def _value_and_shift(draw, basis: Basis):
    h = _bound(basis)
    kind = draw(st.sampled_from(["any", "edge", "tie", "tie-ish", "small"]))
    if kind == "any":
        v = draw(st.integers(-h, h))
    elif kind == "edge":
        v = draw(st.sampled_from([0, 1, -1, h, -h, h - 1, -(h - 1)]))
    elif kind == "small":
        v = draw(st.integers(-min(h, 1000), min(h, 1000)))
    else:
        # odd * 2**j with more than 53 significant bits: "tie" sits exactly half an ulp between
        # two doubles (54 bits ending in 1), "tie-ish" is one unit off a tie
        if h.bit_length() <= 56:
            v = draw(st.integers(-h, h))  # too small a basis for 54-bit values
        else:
            head = draw(st.integers(2**52, 2**53 - 1))
            mant = (head << 1) | 1  # 54 bits, the last one set
            v = mant << draw(st.integers(0, h.bit_length() - 56))  # below 2**(bits of h - 2) <= h
            if kind == "tie-ish":
                v += draw(st.sampled_from([-1, 1]))
            v = -v if draw(st.booleans()) else v
    nb = max(abs(v).bit_length(), 1)
    # the exponent E = nb - 1 - S of the result: anywhere, or next to the subnormal range,
    # the underflow to zero, the largest finite doubles and the overflow to infinity
    target = draw(st.one_of(
        st.integers(-1200, 1100),
        st.sampled_from([-1076, -1075, -1074, -1073, -1023, -1022, -1021, 1022, 1023, 1024, 1025]),
        st.integers(-1080, -1018),
        st.integers(1020, 1026),
    ))
    return v, nb - 1 - target


@pytest.mark.parametrize("name", list(BASES))
@given(data=st.data())
def test_to_double_property(name, data):
    basis = BASES[name]
    pairs = data.draw(st.lists(_value_and_shift(basis), min_size=1, max_size=8))
    _check_to_double(basis, pairs)


def test_to_double_ties_and_edges():
    basis = BASES["int8x22"]
    h = _bound(basis)
    pairs = [
        (0, 0), (0, 5000), (0, -5000),
        (h, 0), (-h, 0), (h, h.bit_length() + 1070), (-h, -900),  # -h * 2**900 overflows
        ((2**53 + 1), 0), ((2**53 + 3), 0), (-(2**53 + 1), 0),  # ties to even: 2**53, 2**53 + 4
        ((2**53 + 1) << 40, 40), ((2**53 + 3) << 60, -3),
        ((2**54 - 1) << 10, -960),  # exactly halfway between the largest double and 2**1024: inf
        ((2**54 - 3) << 10, -960),  # halfway below it: rounds to even, finite
        (1, 1074), (1, 1075), (3, 1075), (3, 1076), (1, 1076), (5, 1076),  # subnormal ties
        (2**52 - 1, 1074), (2**53 - 1, 1075), (2**53 - 1, 1074 + 53),  # the normal/subnormal boundary
        ((2 * 12345 + 1) << 50, 1075 + 50), (((2 * 12345 + 1) << 50) + 1, 1075 + 50),  # subnormal tie, and +1
        ((2 * 12344 + 1) << 50, 1075 + 50), (-((2 * 12344 + 1) << 50), 1075 + 50),
        (2**20 + 1, 1095), (2**20, 1095), (-(2**20 + 1), 1095),  # just above / at half the least subnormal
    ]
    _check_to_double(basis, pairs)
    # the same values in a basis of large moduli (3 limbs of CRT digits)
    b3 = BASES["near2**26"]
    h3 = _bound(b3)
    _check_to_double(b3, [(v, S) for v, S in pairs if abs(v) <= h3] + [(h3, 0), (-h3, 1100), (h3 - 1, -990)])
    # spot checks of the expectations themselves
    assert _expected_double(2**53 + 1, 0) == 2.0**53 and _expected_double(2**53 + 3, 0) == 2.0**53 + 4
    assert _expected_double(1, 1075) == 0.0 and _expected_double(3, 1075) == 2 * 5e-324
    assert _expected_double((2**54 - 1) << 10, -960) == math.inf


def test_to_double_matrix_shifts(rng):
    # a 2-D block with per-row and per-column shifts, values near +-M/2
    basis = BASES["fp64x8"]
    h = _bound(basis)
    m, n = 5, 4
    r = np.random.default_rng(7)
    vals = [[int(r.integers(-(2**62), 2**62)) * (h // 2**62) + int(r.integers(-9, 9)) for _ in range(n)]
            for _ in range(m)]
    sa = np.array([-1000, -3, 0, 50, 1100])
    sb = np.array([0, 1, -60, 100])
    res = np.array([[[vals[i][j] % q for j in range(n)] for i in range(m)] for q in basis.moduli])
    out = to_double(res, basis, sa, sb)
    want = np.array([[_expected_double(vals[i][j], int(sa[i] + sb[j])) for j in range(n)] for i in range(m)])
    assert np.array_equal(out, want)


# ===================================================================== special values

def _assert_like_native(C, N, scale) -> None:
    """NaN where ``N`` has NaN, the same infinities (signs too), finite entries within
    ``1e-12 * scale`` (``scale = |A| @ |B|``) of ``N``; per part for complex results."""
    parts = [(C.real, N.real), (C.imag, N.imag)] if np.iscomplexobj(N) else [(C, N)]
    for c, n in parts:
        assert np.array_equal(np.isnan(c), np.isnan(n)), (c, n)
        assert np.array_equal(np.isinf(c), np.isinf(n)), (c, n)
        inf = np.isinf(n)
        assert np.array_equal(np.sign(c[inf]), np.sign(n[inf]))
        fin = np.isfinite(n)
        assert np.all(np.abs(c[fin] - n[fin]) <= 1e-12 * scale[fin]), np.max(np.abs(c[fin] - n[fin]) / scale[fin])


# numpy warns "invalid value encountered in matmul" where inf - inf or inf * 0 happen; so
# does the emulation, which hands those lines to numpy
_IEEE_WARNING = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@_IEEE_WARNING
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_inf_nan_rows_and_columns(kind, engine, mode, rng):
    cplx = kind == "complex"
    A = gemmul8(rng, (7, 12), 1.0, cplx)
    B = gemmul8(rng, (12, 6), 1.0, cplx)
    A[1, 3] = np.inf
    A[2, 7] = -np.inf
    A[4, 0] = np.nan
    A[5, 2], A[5, 9] = np.inf, -np.inf  # inf - inf: NaN in every entry of that row
    B[5, 2] = -np.inf
    B[9, 4] = np.nan
    B[:, 5] = 0.0
    B[11, 5] = np.inf  # one inf among zeros: +-inf where A's row is finite, NaN where A has inf/NaN
    if cplx:
        A[6, 4] = complex(1.0, np.inf)  # an infinite imaginary part only
    A0, B0 = A.copy(), B.copy()
    C = emulate(kind, A, B, engine=engine, mode=mode)
    N = A @ B
    scale = np.abs(np.where(np.isfinite(A), A, 0)) @ np.abs(np.where(np.isfinite(B), B, 0)) + 1e-300
    if cplx:
        scale = 2 * scale  # |Re| and |Im| of a complex product: at most 2 |a||b| per term
    _assert_like_native(C, N, scale)
    assert np.array_equal(A, A0, equal_nan=True) and np.array_equal(B, B0, equal_nan=True)
    # entries away from the non-finite lines are the emulated product of the finite part
    good_r = np.isfinite(A).all(axis=1)
    good_c = np.isfinite(B).all(axis=0)
    sub = emulate(kind, A[good_r], B[:, good_c], engine=engine, mode=mode)
    assert np.array_equal(C[np.ix_(good_r, good_c)], sub)


@_IEEE_WARNING
@pytest.mark.parametrize("engine", ENGINES)
def test_inf_nan_in_syrk_and_herk(engine, rng):
    A = gemmul8(rng, (5, 9), 1.0)
    A[2, 4] = np.inf
    A[3, 1] = np.nan
    C = ozaki.dsyrk(A, engine=engine)
    N = A @ A.T
    scale = np.abs(np.nan_to_num(A, posinf=0, neginf=0)) @ np.abs(np.nan_to_num(A, posinf=0, neginf=0)).T + 1e-300
    _assert_like_native(C, N, scale)
    Z = gemmul8(rng, (4, 6), 1.0, True)
    Z[1, 2] = complex(-np.inf, 0.5)
    H = ozaki.zherk(Z, engine=engine)
    NH = Z @ Z.conj().T
    for c, n in ((H.real, NH.real), (H.imag, NH.imag)):
        assert np.array_equal(np.isnan(c), np.isnan(n)) and np.array_equal(np.isinf(c), np.isinf(n))
    fin = np.isfinite(NH)
    assert np.all(fin[[0, 2, 3]][:, [0, 2, 3]])
    assert np.allclose(H[fin], NH[fin], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_zero_rows_and_columns(engine, mode, rng):
    A = gemmul8(rng, (6, 20), 1.0)
    B = gemmul8(rng, (20, 5), 1.0)
    A[2] = 0.0
    A[4] = -0.0
    B[:, 3] = 0.0
    C = ozaki.dgemm(A, B, engine=engine, mode=mode)
    assert np.all(C[[2, 4]] == 0) and np.all(C[:, 3] == 0)
    assert max_relerr(C, exact(A, B)) <= 1e-13
    assert np.array_equal(ozaki.dgemm(np.zeros((3, 4)), B[:4], engine=engine, mode=mode), np.zeros((3, 5)))
    assert np.array_equal(ozaki.dgemm(A[:, :4], np.zeros((4, 2)), engine=engine, mode=mode), np.zeros((6, 2)))
    Z = A + 1j * np.roll(A, 1, axis=1)
    Z[2] = 0.0
    W = B - 2j * B
    CZ = ozaki.zgemm(Z, W, engine=engine, mode=mode)
    assert np.all(CZ[2] == 0) and np.all(CZ[:, 3] == 0)
    assert max_relerr(CZ, exact(Z, W)) <= 1e-13
    S = ozaki.dsyrk(A, engine=engine, mode=mode)
    assert np.all(S[[2, 4]] == 0) and np.all(S[:, [2, 4]] == 0)
    H = ozaki.zherk(Z, engine=engine, mode=mode)
    assert np.all(H[2] == 0) and np.all(H[:, 2] == 0)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_subnormal_inputs(engine, mode):
    A, B, _ = case("real", 0.5)
    # subnormal inputs and subnormal results: within one (subnormal) ulp of the exact product
    As = A * 2.0**-1060
    assert np.any((As != 0) & (np.abs(As) < 2.0**-1022))
    Cs = ozaki.dgemm(As, B, engine=engine, mode=mode)
    assert np.all(np.abs(Cs) < 2.0**-1000) and np.any(Cs != 0)
    assert_faithful(Cs, exact(As, B))
    # subnormal inputs, normal results: exactly the product of the same bits at a normal scale
    A14 = np.rint(A * 2.0**14) * 2.0**-14  # bits that survive the scaling to 2**-1060
    Asub = np.ldexp(A14, -1060)
    assert np.array_equal(np.ldexp(Asub, 1060), A14)
    Bbig = np.ldexp(B, 100)
    C = ozaki.dgemm(Asub, Bbig, engine=engine, mode=mode)
    ref = ozaki.dgemm(A14, B, engine=engine, mode=mode)
    assert np.all(np.abs(ref) > 2.0**-60)
    assert np.array_equal(C, np.ldexp(ref, -960))
    P = exact(Asub, Bbig)
    assert max_relerr(C, P) == max_relerr(ref, exact(A14, B))
    assert max_relerr(C, P) <= max_relerr(Asub @ Bbig, P)
    # complex, the imaginary part subnormal
    Z = A + 1j * As
    assert_faithful(ozaki.zgemm(Z * 2.0**-40, B, engine=engine, mode=mode, moduli=8 if engine == "fp64" else 22),
                    exact(Z * 2.0**-40, B))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_huge_inputs_overflow_as_the_exact_result(engine, mode, rng):
    A = (rng.random((4, 8)) + 0.5) * 1e300 * rng.choice([-1.0, 1.0], (4, 8))
    B = (rng.random((8, 6)) + 0.5) * np.array([1e-300, 1.0, 1e-8, 1e7, 1e8, 1e10])
    P = exact(A, B)
    R = rounded(P)
    assert np.isinf(R).any() and np.isfinite(R).any()
    C = ozaki.dgemm(A, B, engine=engine, mode=mode)
    assert np.array_equal(np.isinf(C), np.isinf(R)) and np.array_equal(np.sign(C), np.sign(R))
    fin = np.isfinite(R)
    assert not np.isnan(C).any()
    assert np.all(np.abs(C[fin] - R[fin]) <= 1e-14 * np.abs(R[fin]))
    # numpy's partial sums overflow (inf - inf = NaN); the exact result is finite and returned
    x = np.array([[1e300, 1e300, -1e300]])
    y = np.array([[1e10], [-1e10], [1.0]])
    with np.errstate(all="ignore"):
        assert not np.isfinite((x @ y)[0, 0])
    assert ozaki.dgemm(x, y, engine=engine, mode=mode)[0, 0] == -1e300
    # a finite sum of products past the double range is +-inf
    assert ozaki.dgemm(x[:, :2], -np.array([[1e10], [1.0]]), engine=engine, mode=mode)[0, 0] == -np.inf


def _exactly_rounded(A, B) -> np.ndarray:
    """The exact ``A @ B`` correctly rounded entry by entry (complex parts each on their own,
    without ``re + 1j * im``, whose ``1j * inf`` has a NaN real part)."""
    P = exact(A, B)
    if not isinstance(P, tuple):
        return rounded(P)
    out = np.empty(P[0].shape, dtype=np.complex128)
    out.real, out.imag = rounded(P[0]), rounded(P[1])
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_overflow_hidden_in_truncated_entries_is_infinite(engine, mode):
    # The scaling rounds 1e10 (beside 1e300 in B's column) and 1e-300, 1.0 (beside 1e300 in
    # A's row) to zero: the truncated product is 0, the exact one 1e310 + 2, which rounds to
    # inf. It once came out as 0.
    A = np.array([[1e300, 1e-300, 1.0], [1.0, 2.0, 3.0]])
    B = np.array([[1e10, 1.0], [1e300, 2.0], [1.0, 1.0]])
    kw = dict(engine=engine, mode=mode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozaki.AccuracyWarning)
        for sign in (1.0, -1.0):
            C = ozaki.dgemm(sign * A, B, **kw)
            assert np.array_equal(C, _exactly_rounded(sign * A, B)), C
            assert C[0, 0] == sign * np.inf
        Z = ozaki.zgemm(1j * A, B, **kw)
        assert np.array_equal(Z, _exactly_rounded(1j * A, B)), Z
        assert Z[0, 0] == complex(0.0, np.inf)
        # the transpose of the same product: the roles of rows and columns swapped
        assert np.array_equal(ozaki.dgemm(B.T, A.T, **kw), _exactly_rounded(B.T, A.T))
        # a stack, alpha and a C: the exact entries go through BLAS's epilogue like the others
        S = ozaki.dgemm(np.stack([A, -A]), B, alpha=2.0, beta=1.0, C=np.ones((2, 2)), **kw)
        assert S[0, 0, 0] == np.inf and S[1, 0, 0] == -np.inf and S[0, 1, 1] == 2 * 8.0 + 1
        # rank-k updates: A A^T has 1e300 * 1e10 + 1e-300 * 1e300 + 1 at (0, 1) of [A; B^T]
        X = np.vstack([A[:1], B[:, :1].T])
        assert np.array_equal(ozaki.dsyrk(X, **kw), _exactly_rounded(X, X.T))
        H = np.vstack([A[:1], B[:, :1].T + np.array([0, 0, 1j])])
        assert np.array_equal(ozaki.zherk(H, **kw), _exactly_rounded(H, H.conj().T))


@pytest.mark.parametrize("engine", ENGINES)
def test_overflow_threshold_decided_by_the_exact_sum(engine):
    # a0 b0 is the largest double, (2**53 - 1) * 2**971; a1 b1 = +-2**970 or 2**950 is all
    # in entries the scaling drops. Exactly halfway to 2**1024 rounds to even: inf.
    top = 2.0**1000 * (2.0**24 - 2.0**-29)
    assert top == np.finfo(np.float64).max
    for a1, want in ((2.0**-40, np.inf), (2.0**-60, top), (-(2.0**-40), np.nextafter(top, 0)), (2.0**-41, top)):
        A = np.array([[2.0**1000, a1]])
        B = np.array([[2.0**24 - 2.0**-29], [2.0**1010]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ozaki.AccuracyWarning)
            C = ozaki.dgemm(A, B, engine=engine)
        assert C[0, 0] == want == _exactly_rounded(A, B)[0, 0], (a1, C[0, 0], want)


@st.composite
def _wide_huge(draw):
    """Matrices whose lines mix entries near the top of the double range with ones far below
    them (dropped by the scaling), so that some results overflow only through the dropped ones."""
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    exps = st.sampled_from([-1074, -600, -300, -40, 0, 10, 40, 300, 480, 500, 511, 512, 700, 1000, 1023])

    def mat(shape):
        e = np.array(draw(st.lists(exps, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])))
        mant = np.array(draw(st.lists(st.floats(-2.0, 2.0, allow_nan=False, exclude_min=True),
                                      min_size=e.size, max_size=e.size)))
        return np.ldexp(np.clip(mant, -1.999, 1.999), np.minimum(e, 1022)).reshape(shape)

    return mat((m, k)), mat((k, n))


@given(ab=_wide_huge(), engine=st.sampled_from(ENGINES), mode=st.sampled_from(MODES))
def test_property_results_at_risk_of_overflow_are_exact(ab, engine, mode):
    A, B = ab
    R = _exactly_rounded(A, B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozaki.AccuracyWarning)
        C = ozaki.dgemm(A, B, engine=engine, mode=mode)
    assert np.array_equal(np.isinf(C), np.isinf(R)) and np.array_equal(np.sign(C[np.isinf(C)]), np.sign(R[np.isinf(R)]))
    # where k max|a_i| max|b_j| may reach 2**1024, the exact product's rounding
    ea = np.frexp(np.abs(A).max(axis=1))[1]
    eb = np.frexp(np.abs(B).max(axis=0))[1]
    risky = ea[:, None] + eb[None, :] + (A.shape[1] - 1).bit_length() >= 1024
    assert np.array_equal(C[risky], R[risky]), (C, R)


def test_overflow_in_dropped_entries_of_dask_operands():
    da = pytest.importorskip("dask.array")
    A = np.array([[1e300, 1e-300, 1.0], [1.0, 2.0, 3.0], [4.0, -1e300, 5.0]])
    B = np.array([[1e10, 1.0, 2.0], [1e300, 2.0, -1e10], [1.0, 1.0, 3.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozaki.AccuracyWarning)
        got = ozaki.dgemm(da.from_array(A, chunks=2), da.from_array(B, chunks=(2, 1))).compute()
        want = ozaki.dgemm(A, B)
    assert np.array_equal(got, want) and np.array_equal(want, _exactly_rounded(A, B))
    assert got[0, 0] == np.inf and got[2, 2] == np.inf


@given(re=_wide_huge(), im=_wide_huge(), engine=st.sampled_from(ENGINES))
def test_property_complex_results_at_risk_of_overflow_are_exact(re, im, engine):
    (Ar, Br), (Ai, Bi) = re, im
    if Ar.shape != Ai.shape or Br.shape != Bi.shape:
        Ai, Bi = Ar[::-1, ::-1].copy(), Br[::-1, ::-1].copy()
    A, B = Ar + 1j * Ai, Br - 1j * Bi
    R = _exactly_rounded(A, B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ozaki.AccuracyWarning)
        C = ozaki.zgemm(A, B, engine=engine)
    for got, want in ((C.real, R.real), (C.imag, R.imag)):
        assert np.array_equal(np.isinf(got), np.isinf(want)), (C, R)
    # the complex bound: k max|part of a_i| max|part of b_j|, twice (two products a part)
    ea = np.frexp(np.maximum(np.abs(A.real), np.abs(A.imag)).max(axis=1))[1]
    eb = np.frexp(np.maximum(np.abs(B.real), np.abs(B.imag)).max(axis=0))[1]
    risky = ea[:, None] + eb[None, :] + (A.shape[1] - 1).bit_length() + 1 >= 1024
    assert np.array_equal(C[risky], R[risky]), (C, R)


def test_warnings_name_the_callers_line():
    # With Python's default filter (once per location) a second call that drops entries
    # warns again: every call's warning names the line that called, not contextlib's.
    A, B = np.array([[1e200, 1.0]]), np.array([[0.0], [1.0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        ozaki.dgemm(A, B)
        ozaki.dgemm(A, B)
        ozaki.dsyrk(A)
    ours = [w for w in caught if issubclass(w.category, ozaki.AccuracyWarning)]
    assert {w.filename for w in ours} == {__file__}, [w.filename for w in ours]
    assert len({w.lineno for w in ours}) == 3 and len(ours) == 3


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", MODES)
def test_exponent_span_too_wide_warns(engine, mode):
    with pytest.warns(ozaki.AccuracyWarning, match=r"nonzero entries of A .*rounded to zero"):
        C = ozaki.dgemm(np.array([[1e200, 1.0]]), np.array([[0.0], [1.0]]), engine=engine, mode=mode)
    assert C.shape == (1, 1)
    with pytest.warns(ozaki.AccuracyWarning, match=r"nonzero entries of B .*rounded to zero"):
        ozaki.dgemm(np.array([[0.0, 1.0]]), np.array([[1e-250], [1.0]]), engine=engine, mode=mode)
    with pytest.warns(ozaki.AccuracyWarning, match="rounded to zero"):
        ozaki.zgemm(np.array([[1e200j, 1.0]]), np.array([[0.0], [1.0]]), engine=engine, mode=mode)
    with pytest.warns(ozaki.AccuracyWarning, match="rounded to zero"):
        ozaki.dsyrk(np.array([[1e200, 1.0]]), engine=engine, mode=mode)
    # ordinary inputs, even phi = 2, never warn
    with warnings.catch_warnings():
        warnings.simplefilter("error", ozaki.AccuracyWarning)
        for kind in ("real", "complex"):
            A, B, _ = case(kind, 2.0)
            emulate(kind, A, B, engine=engine, mode=mode)


# ===================================================================== k beyond the int32 accumulator

K_BIG = 2**17 + 3


def test_k_beyond_int32_accumulator_exact_dyadics():
    # 21-bit dyadic inputs: the exact products fit int64, every input bit is kept, so the
    # result is the exact sum rounded once
    r = np.random.default_rng(3)
    ia = r.integers(-(2**20), 2**20, (2, K_BIG))
    ib = r.integers(-(2**20), 2**20, (K_BIG, 2))
    ia[:, 0], ib[0, :] = 2**20 - 1, 2**20 - 1  # the extremes
    A, B = ia * 2.0**-20, ib * 2.0**-20
    exact_int = ia @ ib  # |.| < 2**57: exact in int64
    want = np.array([[float(int(v)) * 2.0**-40 for v in row] for row in exact_int])
    for mode in MODES:
        C = ozaki.dgemm(A, B, engine="int8", mode=mode)
        assert np.array_equal(C, want), mode
    # complex (2M on int8)
    Z = A + 1j * A[::-1]
    W = B - 1j * B[:, ::-1]
    re = ia @ ib + ia[::-1] @ ib[:, ::-1]
    im = ia[::-1] @ ib - ia @ ib[:, ::-1]
    CZ = ozaki.zgemm(Z, W, engine="int8")
    assert np.array_equal(CZ.real, np.array([[float(int(v)) * 2.0**-40 for v in row] for row in re]))
    assert np.array_equal(CZ.imag, np.array([[float(int(v)) * 2.0**-40 for v in row] for row in im]))


@pytest.mark.parametrize("engine", ENGINES)
def test_k_beyond_int32_accumulator_random_doubles(engine):
    r = np.random.default_rng(4)
    A = gemmul8(r, (2, K_BIG), 0.5)
    B = gemmul8(r, (K_BIG, 2), 0.5)
    P = exact(A, B)
    native = max_relerr(A @ B, P)
    for mode in MODES:
        err = max_relerr(ozaki.dgemm(A, B, engine=engine, mode=mode), P)
        assert err <= min(native, 1e-14), (mode, err, native)


def test_k_beyond_int32_accumulator_needs_the_split():
    # Built so that, for one t, the int8 residues modulo 256 are -128 (all of A) and -128 / -127
    # (B): one int32 sum over all of k would pass 2**31 (= 128 * 128 * (2**17 + 3) - 128) and
    # land on a wrong residue (128 != 0 mod 256). Several t cover several scalings; each result
    # must be the exact value rounded once.
    for t in range(36, 46):
        x = 1 + 2.0**-t
        x2 = x + 2.0**-(t + 7)
        A = np.full((2, K_BIG), x)
        A[1] = -x
        B = np.full((K_BIG, 2), x)
        B[0, 0] = x2
        B[:, 1] *= -1
        v0 = float(Fraction(x) ** 2 * (K_BIG - 1) + Fraction(x) * Fraction(x2))
        vx = float(Fraction(x) ** 2 * K_BIG)
        want = np.array([[v0, -vx], [-v0, vx]])
        C = ozaki.dgemm(A, B, engine="int8")
        assert np.array_equal(C, want), (t, C - want)


# ===================================================================== alpha, beta, C

@pytest.mark.parametrize("engine", ENGINES)
def test_alpha_beta_semantics(engine, rng):
    A, B, P = case("real", 1.0)
    C0 = gemmul8(rng, (M_, N_), 1.0)
    C = C0.copy()
    AB = ozaki.dgemm(A, B, engine=engine)
    for alpha, beta in [(2.5, -0.75), (1.0, 1.0), (-1.0, 0.5), (0.5, 0.0)]:
        got = ozaki.dgemm(A, B, engine=engine, alpha=alpha, beta=beta, C=C)
        assert got.dtype == np.float64 and got.shape == (M_, N_)
        assert np.array_equal(got, alpha * AB + beta * C0), (alpha, beta)
    assert np.array_equal(C, C0)  # C is never modified
    # beta = 0: C is not read (NaN there is ignored), and may be absent
    nanC = np.full((M_, N_), np.nan)
    assert np.array_equal(ozaki.dgemm(A, B, engine=engine, beta=0.0, C=nanC), AB)
    assert np.array_equal(ozaki.dgemm(A, B, engine=engine, alpha=3.0), 3.0 * AB)
    # alpha = 0: A and B are not read (NaN in A gives beta * C)
    An = np.array(A)
    An[0, 0] = np.nan
    got = ozaki.dgemm(An, B, engine=engine, alpha=0.0, beta=2.0, C=C0)
    assert np.array_equal(got, 2.0 * C0)
    assert np.array_equal(ozaki.dgemm(An, B, engine=engine, alpha=0.0), np.zeros((M_, N_)))
    # C broadcasts as in BLAS-like NumPy code: a row added to every row
    row = C0[0]
    assert np.array_equal(ozaki.dgemm(A, B, engine=engine, beta=1.0, C=row), AB + row)
    # integer C is converted
    Ci = np.arange(M_ * N_).reshape(M_, N_)
    assert np.array_equal(ozaki.dgemm(A, B, engine=engine, beta=-1.0, C=Ci), AB - Ci)


def test_alpha_beta_complex_and_rank_k(rng):
    A, B, _ = case("complex", 0.5)
    C0 = gemmul8(rng, (M_, N_), 0.5, True)
    C = C0.copy()
    AB = ozaki.zgemm(A, B)
    alpha, beta = 1.5 - 2j, 0.25 + 1j
    got = ozaki.zgemm(A, B, alpha=alpha, beta=beta, C=C)
    assert got.dtype == np.complex128
    assert np.array_equal(got, alpha * AB + beta * C0)
    assert np.array_equal(C, C0)
    nanC = np.full((M_, N_), complex(np.nan, np.nan))
    assert np.array_equal(ozaki.zgemm(A, B, beta=0, C=nanC), AB)
    An = np.array(A)
    An[3, 3] = complex(np.nan, 1)
    assert np.array_equal(ozaki.zgemm(An, B, alpha=0, beta=beta, C=C0), beta * C0)
    # dsyrk / zherk: real scalars, the same conventions
    X = gemmul8(rng, (6, 9), 1.0)
    S0 = gemmul8(rng, (6, 6), 1.0)
    S0 = S0 + S0.T
    S = S0.copy()
    assert np.array_equal(ozaki.dsyrk(X, alpha=-2.0, beta=0.5, C=S), -2.0 * ozaki.dsyrk(X) + 0.5 * S0)
    assert np.array_equal(S, S0)
    assert np.array_equal(ozaki.dsyrk(X, beta=0, C=np.full((6, 6), np.nan)), ozaki.dsyrk(X))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    assert np.array_equal(ozaki.dsyrk(Xn, alpha=0, beta=1.0, C=S0), S0)
    Z = gemmul8(rng, (5, 7), 1.0, True)
    H0 = np.eye(5) + 0j
    assert np.array_equal(ozaki.zherk(Z, alpha=0.5, beta=-1.0, C=H0), 0.5 * ozaki.zherk(Z) - H0)
    with pytest.raises(TypeError, match="real"):
        ozaki.zherk(Z, alpha=1j)


def test_inputs_never_modified(rng):
    base = gemmul8(rng, (12, 18), 1.0)
    base[3, 4] = np.inf
    base[5, 0] = np.nan
    base[7] = 0.0
    A = base[::2, 1:]  # a writable, strided view (6, 17)
    B = base[:, ::-1].T[1:, ::2].copy(order="F")  # (17, 6), Fortran order
    C = gemmul8(rng, (6, 6), 1.0)
    Z = A + 1j * A[::-1]
    copies = [x.copy() for x in (base, B, C, Z)]
    ozaki.dgemm(A, B, alpha=2.0, beta=-1.0, C=C)
    ozaki.dgemm(A, B, engine="int8", mode="accurate", alpha=0.0, beta=1.0, C=C)
    ozaki.zgemm(Z, B, algorithm="3m", engine="int8", beta=1j, C=C)
    ozaki.dsyrk(A, beta=1.0, C=C)
    ozaki.zherk(Z, beta=2.0, C=C)
    for x, c in zip((base, B, C, Z), copies):
        assert np.array_equal(x, c, equal_nan=True)


def test_alpha_beta_errors():
    A, B = np.ones((3, 4)), np.ones((4, 2))
    with pytest.raises(ValueError, match="C is missing"):
        ozaki.dgemm(A, B, beta=1.0)
    with pytest.raises(ValueError, match="C is missing"):
        ozaki.zgemm(A, B, beta=1j)
    with pytest.raises(ValueError, match="C is missing"):
        ozaki.dsyrk(A, beta=2.0)
    with pytest.raises(ValueError, match=r"C has shape \(2, 3\)"):
        ozaki.dgemm(A, B, beta=1.0, C=np.ones((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        ozaki.dgemm(A, B, beta=1.0, C=np.ones((3, 2, 2)))
    with pytest.raises(ValueError, match="shape"):
        ozaki.zherk(A, beta=1.0, C=np.ones((4, 4)))
    with pytest.raises(TypeError, match="C must be"):
        ozaki.dgemm(A, B, beta=1.0, C=np.ones((3, 2)) * 1j)
    with pytest.raises(TypeError, match="C must be"):
        ozaki.dgemm(A, B, beta=1.0, C=np.array([["a", "b"]] * 3))
    with pytest.raises(TypeError, match="alpha must be a number"):
        ozaki.dgemm(A, B, alpha="2")
    with pytest.raises(TypeError, match="beta must be a number"):
        ozaki.dgemm(A, B, beta=None)
    with pytest.raises(TypeError, match="alpha must be real"):
        ozaki.dgemm(A, B, alpha=1 + 1j)
    # a complex scalar with no imaginary part is accepted by dgemm
    assert np.array_equal(ozaki.dgemm(A, B, alpha=2 + 0j), 2 * (A @ B))


# ===================================================================== dsyrk and zherk

@pytest.mark.parametrize("k", [127, 128])
@pytest.mark.parametrize("phi", PHIS)
def test_dsyrk_against_oracle_and_dgemm(k, phi):
    rng = np.random.default_rng([k, int(2 * phi)])
    A = gemmul8(rng, (12, k), phi)
    A.setflags(write=False)
    P = exact(A, A.T)
    for engine in ENGINES:
        mods = ozaki.moduli_for("syrk", engine=engine)[0]
        ref = max_relerr(ozaki.dgemm(A, A.T, engine=engine, moduli=mods), P)
        for mode in MODES:
            S = ozaki.dsyrk(A, engine=engine, mode=mode)
            assert S.dtype == np.float64 and S.shape == (12, 12)
            assert np.array_equal(S, S.T), "dsyrk must be exactly symmetric"
            err = max_relerr(S, P)
            assert err <= 2 * ref + 4 * U, (engine, mode, err, ref)
        if engine == "fp64":
            assert max_relerr(ozaki.dsyrk(A), P) <= max_relerr(A @ A.T, P)
    # faithful with many moduli; and 25 int8 moduli: 22 with a square root of -1, 3 without
    assert_faithful(ozaki.dsyrk(A, engine="int8", moduli=22), P)
    assert_faithful(ozaki.dsyrk(A, engine="fp64", moduli=8), P)
    mods, algs = ozaki.moduli_for("syrk", engine="int8", moduli=25)
    assert algs.count("real") == 3 and algs.count("2m") == 22
    S25 = ozaki.dsyrk(A, engine="int8", moduli=25)
    assert np.array_equal(S25, S25.T)
    assert_faithful(S25, P)


def _assert_hermitian(H):
    assert np.array_equal(H, H.conj().T), "not exactly Hermitian"
    assert np.all(np.diagonal(H).imag == 0), "diagonal not real"


@pytest.mark.parametrize("k", [127, 128])
@pytest.mark.parametrize("phi", PHIS)
def test_zherk_against_oracle_and_zgemm(k, phi):
    rng = np.random.default_rng([k, int(2 * phi), 1])
    Z = gemmul8(rng, (10, k), phi, True)
    Z.setflags(write=False)
    P = exact(Z, Z.conj().T)
    for engine in ENGINES:
        ref = max_relerr(ozaki.zgemm(Z, Z.conj().T, engine=engine), P)
        for mode in MODES:
            H = ozaki.zherk(Z, engine=engine, mode=mode)
            assert H.dtype == np.complex128 and H.shape == (10, 10)
            _assert_hermitian(H)
            err = max_relerr(H, P)
            assert err <= 2 * ref + 4 * U, (engine, mode, err, ref)
    assert_faithful(ozaki.zherk(Z, engine="int8", moduli=22), P)
    assert_faithful(ozaki.zherk(Z, engine="fp64", moduli=8), P)
    # hybrid beyond the 22 int8 2M moduli; 3M and 4M on int8 moduli
    for kw in ({"algorithm": "hybrid", "moduli": 25}, {"algorithm": "3m"}, {"algorithm": "4m"},
               {"algorithm": "3m", "moduli": 22}):
        H = ozaki.zherk(Z, engine="int8", **kw)
        _assert_hermitian(H)
        # against the 2M product of the same M (the default less the spread's moduli, which
        # the 3M pool's coarser steps need not reach)
        twom = len(ozaki.moduli_for("complex", engine="int8", k=Z.shape[1])[0])
        assert max_relerr(H, P) <= 2 * max_relerr(ozaki.zherk(Z, engine="int8", moduli=twom), P) + 4 * U, kw
    assert_faithful(ozaki.zherk(Z, engine="int8", algorithm="hybrid", moduli=25), P)


@pytest.mark.parametrize("engine", ENGINES)
def test_zherk_2m_3m_4m_bit_identical(engine, rng):
    Z = gemmul8(rng, (9, 33), 1.0, True)
    ref = ozaki.zherk(Z, moduli=TWOM14, algorithm="2m", engine=engine)
    for alg in ("3m", "4m", "hybrid", "auto"):
        assert np.array_equal(ozaki.zherk(Z, moduli=TWOM14, algorithm=alg, engine=engine), ref), alg


def test_rank_k_exact_on_integers(rng):
    # integer inputs: dsyrk == dgemm(A, A.T) == the exact product, zherk likewise; k odd and even
    for k in (1, 2, 7, 8):
        A = rng.integers(-1000, 1000, (5, k)).astype(float)
        want = (A.astype(np.int64) @ A.T.astype(np.int64)).astype(float)
        for engine in ENGINES:
            assert np.array_equal(ozaki.dsyrk(A, engine=engine), want)
            assert np.array_equal(ozaki.dgemm(A, A.T, engine=engine), want)
            assert np.array_equal(ozaki.dsyrk(A, engine=engine, moduli=[256, 255, 253, 251, 241, 239, 233]),
                                  want)  # only 241 and 233 have a square root of -1 here
        Z = A + 1j * rng.integers(-1000, 1000, (5, k))
        Hw = rounded(exact(Z, Z.conj().T))
        for engine in ENGINES:
            assert np.array_equal(ozaki.zherk(Z, engine=engine), Hw)
    # empty and shape errors
    assert np.array_equal(ozaki.dsyrk(np.zeros((3, 0))), np.zeros((3, 3)))
    assert ozaki.zherk(np.zeros((0, 4), dtype=complex)).shape == (0, 0)
    with pytest.raises(ValueError, match="2-D"):
        ozaki.dsyrk(np.ones(4))
    with pytest.raises(ValueError, match="2-D"):
        ozaki.zherk(np.ones((2, 3, 4)))
    with pytest.raises(TypeError, match="zgemm"):
        ozaki.dsyrk(np.ones((2, 2)) * 1j)


# ===================================================================== shapes and dtypes (numpy.matmul's rules)

@pytest.mark.parametrize("fn", ["dgemm", "zgemm"])
def test_matmul_shapes(fn, rng):
    f = getattr(ozaki, fn)
    ints = lambda *s: rng.integers(-50, 50, s).astype(float)  # noqa: E731  exact in numpy too
    cases = [
        (ints(5), ints(5)),  # 1-D @ 1-D: a scalar
        (ints(4), ints(4, 3)),
        (ints(3, 4), ints(4)),
        (ints(2, 1, 3, 4), ints(5, 4, 2)),  # stacks broadcast
        (ints(3, 4), ints(2, 4, 2)),
        (ints(1, 1), ints(1, 1)),
        (ints(0, 4), ints(4, 3)),  # empty
        (ints(3, 0), ints(0, 2)),  # k = 0: zeros
        (ints(2, 0, 3), ints(3, 0)),
        (ints(0), ints(0)),
    ]
    for a, b in cases:
        if fn == "zgemm":
            a, b = a + 1j * a[..., ::-1], b - 2j * b
        got = f(a, b)
        want = np.matmul(a, b)
        assert np.shape(got) == np.shape(want), (a.shape, b.shape)
        assert np.asarray(got).dtype == (np.complex128 if fn == "zgemm" else np.float64)
        assert np.array_equal(got, want), (a.shape, b.shape)
        if np.ndim(want) == 0:
            assert isinstance(got, (np.floating, np.complexfloating)) and not isinstance(got, np.ndarray)


def test_stacks_equal_their_slices(rng):
    A = gemmul8(rng, (3, 1, 6, 20), 1.0)
    B = gemmul8(rng, (4, 20, 5), 1.0)
    C = ozaki.dgemm(A, B, engine="int8")
    assert C.shape == (3, 4, 6, 5)
    for i in range(3):
        for j in range(4):
            assert np.array_equal(C[i, j], ozaki.dgemm(A[i, 0], B[j], engine="int8"))
    assert max_relerr(C[2, 1], exact(A[2, 0], B[1])) <= 1e-13
    Z = A + 1j * A[..., ::-1]
    W = B[:2] - 1j * B[:2]
    CZ = ozaki.zgemm(Z, W)
    assert np.array_equal(CZ[1, 1], ozaki.zgemm(Z[1, 0], W[1]))


def test_non_contiguous_views(rng):
    big = gemmul8(rng, (30, 40), 1.0)
    A = big[::2, 1::3]  # (15, 13), strided
    B = big[5:18, ::-5]  # (13, 8), a negative step
    assert not A.flags.c_contiguous and not B.flags.c_contiguous
    ref = ozaki.dgemm(np.ascontiguousarray(A), np.ascontiguousarray(B))
    assert np.array_equal(ozaki.dgemm(A, B), ref)
    assert np.array_equal(ozaki.dgemm(np.asfortranarray(A), np.asfortranarray(B)), ref)
    At = np.ascontiguousarray(A.T).T  # a transposed view (Fortran order)
    Bt = np.ascontiguousarray(B.T).T
    assert np.array_equal(ozaki.dgemm(At, Bt), ref)
    assert np.array_equal(ozaki.dgemm(B.T, A.T), ozaki.dgemm(np.ascontiguousarray(B.T), np.ascontiguousarray(A.T)))
    assert max_relerr(ref, exact(A, B)) <= 1e-13
    # complex views: transposes and conjugates of strided slices
    Z = big[::3, ::2] + 1j * big[1::3, 1::2]  # (10, 20)
    W = Z.T[::-1, ::2]  # (20, 5)
    refz = ozaki.zgemm(np.ascontiguousarray(Z), np.ascontiguousarray(W))
    assert np.array_equal(ozaki.zgemm(Z, W), refz)
    assert np.array_equal(ozaki.zherk(Z[:, ::2]), ozaki.zherk(np.ascontiguousarray(Z[:, ::2])))
    assert np.array_equal(ozaki.dsyrk(big[::3, ::7]), ozaki.dsyrk(np.ascontiguousarray(big[::3, ::7])))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int8, np.float32, np.float16, np.bool_])
def test_dtypes_converted_as_numpy_would(dtype, rng):
    A = rng.integers(0, 2 if dtype is np.bool_ else 100, (4, 6)).astype(dtype)
    B = rng.integers(0, 2 if dtype is np.bool_ else 100, (6, 3)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        A = (A / 7).astype(dtype)
        B = (B / 3).astype(dtype)
    got = ozaki.dgemm(A, B)
    assert got.dtype == np.float64
    want = ozaki.dgemm(A.astype(np.float64), B.astype(np.float64))
    assert np.array_equal(got, want)
    assert_correctly_rounded(got, exact(A.astype(np.float64), B.astype(np.float64)))
    z = ozaki.zgemm(A, B)
    assert z.dtype == np.complex128 and np.array_equal(z, want + 0j)
    # mixed: a Python list and a float32 array
    assert np.array_equal(ozaki.dgemm(A.tolist(), B.astype(np.float32)),
                          ozaki.dgemm(np.array(A.tolist(), dtype=float), B.astype(np.float32).astype(float)))


def test_complex64_to_zgemm(rng):
    Z = (gemmul8(rng, (3, 5), 0.5, True)).astype(np.complex64)
    W = (gemmul8(rng, (5, 2), 0.5, True)).astype(np.complex64)
    got = ozaki.zgemm(Z, W)
    assert got.dtype == np.complex128
    assert np.array_equal(got, ozaki.zgemm(Z.astype(np.complex128), W.astype(np.complex128)))


def test_bad_operands():
    A, B = np.ones((3, 4)), np.ones((4, 2))
    with pytest.raises(TypeError, match="zgemm"):
        ozaki.dgemm(A * 1j, B)
    with pytest.raises(TypeError, match="zgemm"):
        ozaki.dgemm(A, B.astype(np.complex64))
    with pytest.raises(TypeError, match="numeric"):
        ozaki.dgemm(np.array([[1, 2]], dtype=object), np.ones((2, 1)))
    with pytest.raises(TypeError, match="numeric"):
        ozaki.zgemm(np.array([["a", "b"]]), np.ones((2, 1)))
    with pytest.raises(TypeError, match="numeric"):
        ozaki.dgemm(A, np.array([[1.0]] * 4, dtype=object))
    with pytest.raises(TypeError, match="numeric"):
        ozaki.dsyrk(np.array([["x"]]))
    with pytest.raises(ValueError, match="not aligned"):
        ozaki.dgemm(A, A)
    with pytest.raises(ValueError, match="not aligned"):
        ozaki.zgemm(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="broadcast"):
        ozaki.dgemm(np.ones((2, 3, 4)), np.ones((3, 4, 2)))
    with pytest.raises(ValueError, match="at least one dimension"):
        ozaki.dgemm(np.float64(2.0), B)


# ===================================================================== argument errors and moduli_for

def test_argument_errors():
    A, B = np.ones((3, 4)), np.ones((4, 2))
    Z = A + 1j
    with pytest.raises(ValueError, match="mode must be one of"):
        ozaki.dgemm(A, B, mode="exact")
    with pytest.raises(ValueError, match="mode must be one of"):
        ozaki.zherk(Z, mode="slow")
    with pytest.raises(ValueError, match="engine must be one of"):
        ozaki.dgemm(A, B, engine="fp32")
    with pytest.raises(ValueError, match="engine must be one of"):
        ozaki.dsyrk(A, engine="gpu")
    with pytest.raises(ValueError, match="algorithm must be one of"):
        ozaki.zgemm(Z, B, algorithm="5m")
    with pytest.raises(ValueError, match="algorithm must be one of"):
        ozaki.zherk(Z, algorithm="karatsuba")
    for bad in (0, -3, False):
        with pytest.raises(ValueError, match="positive count"):
            ozaki.dgemm(A, B, moduli=bad)
    with pytest.raises(ValueError, match="must not be empty"):
        ozaki.dgemm(A, B, moduli=[])
    with pytest.raises(ValueError, match="pairwise coprime"):
        ozaki.dgemm(A, B, moduli=[255, 253, 85])
    with pytest.raises(ValueError, match="pairwise coprime"):
        ozaki.zgemm(Z, B, moduli=[241, 241])
    with pytest.raises(ValueError, match="int8 moduli must be at most 256"):
        ozaki.dgemm(A, B, engine="int8", moduli=[256, 257])
    with pytest.raises(ValueError, match=r"2\*\*26"):
        ozaki.dgemm(A, B, engine="fp64", moduli=[2**26 + 1])
    with pytest.raises(TypeError, match="integers"):
        ozaki.dgemm(A, B, moduli=[241.5, 233])
    with pytest.raises(TypeError, match="count or a sequence"):
        ozaki.dgemm(A, B, moduli=2.5)
    for q in (3, 7):
        with pytest.raises(ValueError, match=f"square root of -1.*{q}"):
            ozaki.zgemm(Z, B, algorithm="2m", moduli=[241, q])
        with pytest.raises(ValueError, match="square root of -1"):
            ozaki.zherk(Z, algorithm="2m", moduli=[q, 233], engine="int8")
    with pytest.raises(ValueError, match="square root of -1"):
        ozaki.zgemm(Z, B, algorithm="2m", moduli=[256, 241])  # even
    with pytest.raises(ValueError, match="22 moduli.*hybrid"):
        ozaki.zgemm(Z, B, algorithm="2m", engine="int8", moduli=23)
    with pytest.raises(ValueError, match="moduli"):
        ozaki.dgemm(A, B, engine="int8", moduli=10**3)  # more than the pool holds
    with pytest.raises(ValueError, match="too few"):
        ozaki.dgemm(A, B, engine="int8", moduli=1)
    # without "2m", the same moduli lacking a square root of -1 are fine (3M on them)
    assert np.array_equal(ozaki.zgemm(Z, B, moduli=[241, 7, 3, 233, 229, 256]), Z @ B)


def test_moduli_for():
    mods, algs = ozaki.moduli_for("real", engine="int8")
    assert mods == int8_moduli()[:16] and set(algs) == {"real"}
    mods, algs = ozaki.moduli_for("complex", engine="int8")
    assert mods == twom_moduli()[:17] and set(algs) == {"2m"}
    assert ozaki.moduli_for("complex", engine="int8") == ozaki.moduli_for(engine="int8")
    for kind in ("real", "complex", "syrk"):
        mods, algs = ozaki.moduli_for(kind, engine="fp64")
        assert len(mods) == 6 and all(q < 2**21 and q % 4 == 1 and is_twom_modulus(q) for q in mods)
        assert ozaki.moduli_for(kind) == (mods, algs)  # "auto" is fp64 on the CPU
        Basis(mods)
    # every default is the fewest moduli whose product reaches 2**124
    for kind, engine in [("real", "int8"), ("complex", "int8"), ("syrk", "int8"), ("real", "fp64")]:
        mods = ozaki.moduli_for(kind, engine=engine)[0]
        assert math.prod(mods) >= 2**124 > math.prod(mods[:-1]), (kind, engine)
    # counts: 2M while it lasts, then 3M (hybrid), or the plain real product for syrk
    mods, algs = ozaki.moduli_for("complex", engine="int8", moduli=24)
    assert algs == ("2m",) * 22 + ("3m",) * 2 and mods[:22] == twom_moduli()
    Basis(mods)
    mods, algs = ozaki.moduli_for("syrk", engine="int8", moduli=25)
    assert algs == ("2m",) * 22 + ("real",) * 3
    Basis(mods)
    mods, algs = ozaki.moduli_for("complex", engine="int8", algorithm="3m")
    assert set(algs) == {"3m"} and mods == int8_moduli()[:len(mods)]
    assert ozaki.moduli_for("complex", engine="int8", moduli=[241, 3])[1] == ("2m", "3m")
    assert ozaki.moduli_for("real", moduli=[5, 7]) == ((5, 7), ("real", "real"))
    with pytest.raises(ValueError, match="kind must be"):
        ozaki.moduli_for("quaternion")
    with pytest.raises(ValueError, match="engine must be"):
        ozaki.moduli_for("real", engine="tpu")


@pytest.mark.parametrize("m", [3, 241, 255, 8388593, 2**26 - 5])
def test_quantized_residues_against_python_ints(rng, m):
    # the residue kernel's whole range, integer-valued doubles below 2**85: near -2**85 its
    # high part (v / 2**32) reaches -2**53, where a reduction without a fused multiply-add
    # once returned wrong residues (-(2**85) + 2**33, -(2**85 - 2**32))
    from modlin._algorithms import quantize as _quantize

    top = 2.0**85 - 2.0**32
    edges = [0.0, -0.0, 1.0, -1.0, 2.0**32 - 1, -(2.0**32) - 1, 2.0**53, -(2.0**53), 2.0**84, -(2.0**84),
             top, -top, -(2.0**85) + 2.0**33, 2.0**85 - 2.0**33]
    x = np.concatenate([edges, np.rint(np.ldexp(rng.uniform(-1.0, 1.0, 3000), rng.integers(0, 86, 3000)))])
    got = _quantize.residues(x, m, np.int64)
    exact = [int(v) % m for v in x]
    assert got.tolist() == [r - m if r > (m - 1) // 2 else r for r in exact]



def _exact_quantized(x: np.ndarray, shift: np.ndarray, bad: np.ndarray, axis: int) -> list[list[int]]:
    """``rint(x * 2**shift)`` by Python's exact rounding (half to even), bad lines as zeros."""
    out = []
    for i in range(x.shape[0]):
        row = []
        for j in range(x.shape[1]):
            line = i if axis == 1 else j
            v = Fraction(float(x[i, j])) if not bad[line] else Fraction(0)
            row.append(round(v * Fraction(2) ** int(shift[line])))
        out.append(row)
    return out


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("axis", [1, 0])
def test_panel_kernels_quantise_as_they_read(rng, complex_, layout, axis):
    # stage (b)'s kernels scale and round each entry as they read it (the quantised panel is
    # never stored): against Python's exact rint(x * 2**shift) for lines from subnormal to
    # 1e308 maxima (shifts about 1157 and -940), entries rounded to zero, a line holding
    # Inf or NaN, zeros, and panels wider than a kernel chunk
    from modlin._algorithms import quantize as _quantize
    from modlin._arith.moduli import sqrt_minus_one

    r, c = (13, 530) if axis == 1 else (530, 11)
    lines = r if axis == 1 else c

    def draw():
        mag = np.ldexp(rng.uniform(0.5, 1.0, (r, c)), rng.integers(-60, 1, (r, c)))
        top = np.array([-1070, -1030, 1000, 1020, 0, -300] + list(rng.integers(-1000, 1000, lines - 6)))
        x = mag * np.ldexp(1.0, np.expand_dims(top, axis)) * rng.choice([-1.0, 1.0], (r, c))
        x[rng.random((r, c)) < 0.1] = 0.0
        return x

    x = draw() + 1j * draw() if complex_ else draw()
    bad = np.zeros(lines, dtype=bool)
    bad[3] = True
    line = (3, slice(None)) if axis == 1 else (slice(None), 3)
    x[line][5] = np.inf
    x[line][7] = np.nan
    parts = [x.real, x.imag] if complex_ else [x]
    mx = np.maximum.reduce([np.where(np.expand_dims(bad, axis), 0, abs(p)).max(axis=axis) for p in parts])
    g = rng.integers(_quantize.T_BITS, _quantize.G_MAX + 1, lines)
    shift = g - np.frexp(mx)[1]
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "strided":
        big = np.zeros((2 * r, 3 * c), dtype=x.dtype)
        big[::2, ::3] = x
        x = big[::2, ::3]
    panel = _quantize.Panel(x, shift, bad, axis)
    before = x.copy()
    want = [_exact_quantized(p, shift, bad, axis) for p in parts]
    lost = sum(1 for p, w in zip(parts, want) for i in range(r) for j in range(c)
               if w[i][j] == 0 and p[i, j] != 0 and not bad[i if axis == 1 else j])
    assert lost > 0 and panel.lost() == lost

    def balanced(v, m):
        v %= m
        return v - m if v > (m - 1) // 2 else v

    for m in (241, 2097133):
        for part, w in enumerate(want):
            got = _quantize.residues(panel, m, np.float64, part)
            assert got.tolist() == [[balanced(v, m) for v in row] for row in w]
        if complex_:
            s = sqrt_minus_one(m)
            plus, minus = _quantize.twom_residues(panel, m, s, np.float64)
            assert plus.tolist() == [[balanced(a + s * b, m) for a, b in zip(*rows)] for rows in zip(*want)]
            assert minus.tolist() == [[balanced(a - s * b, m) for a, b in zip(*rows)] for rows in zip(*want)]
        elif axis == 1:  # real SYRK's halves: Z = A_1 + i A_2, the second padded with a zero column
            s = sqrt_minus_one(m)
            h = (c + 1) // 2
            z = [(row[:h], row[h:] + [0] * (2 * h - c)) for row in want[0]]
            plus, minus = _quantize.twom_residues(panel.halves(), m, s, np.float64)
            assert plus.tolist() == [[balanced(a + s * b, m) for a, b in zip(*rows)] for rows in z]
            assert minus.tolist() == [[balanced(a - s * b, m) for a, b in zip(*rows)] for rows in z]
            assert panel.halves().lost() == lost
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("axis", [1, 0])
def test_line_stats_kernel_matches_the_numpy_passes(rng, complex_, layout, axis):
    # stage (a)'s one-pass kernel gives the integers of part_bounds and exact_bits: entries
    # from subnormal to 1e308, odd multiples of every power of two, zeros, Inf and NaN lines
    from modlin._algorithms import ozaki as core, quantize as _quantize

    r, c = (9, 300) if axis == 1 else (300, 7)
    lines = r if axis == 1 else c

    def draw():
        x = np.ldexp(rng.integers(-(2**53) + 1, 2**53, (r, c)).astype(np.float64),
                     rng.integers(-1126, 970, (r, c)))
        x[rng.random((r, c)) < 0.2] = 0.0
        x[rng.random((r, c)) < 0.05] = 5e-324
        return x

    x = draw() + 1j * draw() if complex_ else draw()
    line = (2, slice(None)) if axis == 1 else (slice(None), 2)
    x[line][4] = np.nan
    x[(0, slice(None)) if axis == 1 else (slice(None), 0)][1] = -np.inf
    bad = ~np.isfinite(x).all(axis=axis)  # the lines holding Inf or NaN
    assert bad[0] and bad[2]
    if layout == "F":
        x = np.asfortranarray(x)
    ps = core.parts(core.zero_lines(x, bad, axis))
    mx = np.maximum.reduce([abs(p).max(axis=axis) for p in ps])
    ex = np.frexp(mx)[1].astype(np.int64)
    _, bar = _quantize.part_bounds(ps, axis, ex)
    want_need = _quantize.exact_bits(ps, ex, axis)
    bars = np.full(x.shape, 255, dtype=np.uint8)
    need, sq = _quantize.line_stats(x, ex, bad, axis, bars)
    assert need.tolist() == want_need.tolist() and want_need.max() > 60
    assert sq.tolist() == (bar * bar).sum(axis=axis).tolist()
    assert bars.tolist() == bar.astype(np.uint8).tolist()
    assert len(need) == lines
    got_bad, got_mx = _quantize.line_maxima(x, axis)
    assert got_bad.tolist() == bad.tolist()
    assert got_mx[~bad].tolist() == mx[~bad].tolist() and np.isfinite(got_mx).all()
