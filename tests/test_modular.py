"""The element-wise kernels of ``modlin._arith.modular`` against Python-integer arithmetic.

``Reduction`` claims bounds (``c_max``, ``r_max``) and exactness conditions; the
kernels ``step`` and ``finalize`` rely on them. Here every claim is checked on
adversarial values (exact multiples of p, rounding ties of ``y/p``, ``+-y_max``,
values next to ``2**53``) by converting the kernel's floating-point output back
to Python ints. ``balanced_words`` must reconstruct its input modulo p and stay
within ``word_bounds``. 2M's images (``twom_split``, ``twom_words``) and their
inverse (``twom_combine``) are checked against Python ints too.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

import modlin
from modlin._arith.modular import (
    FLOAT_MULMOD_MAX,
    Reduction,
    add_into,
    balanced_words,
    finalize,
    step,
    twom_combine,
    twom_split,
    twom_words,
    word_bounds,
)
from modlin._planning.plan import Plan, candidates

KERNEL_L = 2**53  # the kernels compute in float64

PS = [2, 3, 5, 7, 251, 256, 65521, 2**20 - 3, 2**23, 2**24 - 3, 2**31 - 1, 2**32, 10**12,
      2**40 - 87, 2**50 - 27, 2**51 * 3 // 2, 2**52 - 47, 2**52 - 1]


def red_for(p: int, y_max: int, t: int = 53) -> Reduction:
    return Reduction.for_bound(p, y_max=y_max, t=t)


def conditions_hold(p: int, y_max: int, z: int, t: int) -> bool:
    """The exactness conditions of the Reduction docstring, evaluated here from scratch."""
    L = 2**t
    c = y_max // p + 1 + -(-3 * y_max // (p * L))
    r = p // 2 + 1 + -(-3 * y_max // L)
    lo = p % 2**z
    return p < 2 ** (t - 1) and c * (p >> z) <= L and c * lo <= L and r + c * lo <= L


# ----------------------------------------------------------------- Reduction

@given(p=st.integers(2, 2**52 - 1), y_max=st.one_of(st.integers(1, 2**110), st.integers(1, 110).map(lambda e: 2**e)),
       t=st.sampled_from([53, 24]))
@example(p=2649533564365308, y_max=473680299660230853582893, t=53)  # only r + c*p_lo <= L fails
@example(p=6653598, y_max=62120038149, t=24)
def test_for_bound_invariants(p, y_max, t):
    try:
        red = red_for(p, y_max, t)
    except ValueError as exc:
        assert "no exact floating-point reduction" in str(exc)
        assert not any(conditions_hold(p, y_max, z, t) for z in range(p.bit_length() + 1))
        return
    assert (red.p, red.y_max, red.t) == (p, y_max, t)
    assert red.is_exact() and conditions_hold(p, y_max, red.z, t)
    # the smallest split that works
    assert red.z == 0 or not conditions_hold(p, y_max, red.z - 1, t)
    assert red.p_hi + red.p_lo == p
    assert red.p_hi % 2**red.z == 0 and 0 <= red.p_lo < 2**red.z
    assert red.r_max >= p // 2 and red.c_max >= y_max // p
    q, hi, lo = red.constants()
    assert q == 1.0 / p and hi == red.p_hi and lo == red.p_lo  # both halves exact in float64


@pytest.mark.parametrize("p, y_max, t", [(2649533564365308, 473680299660230853582893, 53),
                                          (6653598, 62120038149, 24), (5933586, 36844961545, 24)])
def test_for_bound_needs_room_for_the_remainder(p, y_max, t):
    """Splits exist with ``c*p_hi`` and ``c*p_lo`` exact, but ``r + c*p_lo`` would leave 2**t."""
    L = 2**t
    c = y_max // p + 1 + -(-3 * y_max // (p * L))
    r = p // 2 + 1 + -(-3 * y_max // L)
    assert any(c * (p >> z) <= L and c * (p % 2**z) <= L for z in range(p.bit_length() + 1))
    with pytest.raises(ValueError, match="no exact floating-point reduction"):
        red_for(p, y_max, t)
    assert all(r + c * (p % 2**z) > L or c * (p >> z) > L for z in range(p.bit_length() + 1))


def test_for_bound_refuses_large_moduli():
    with pytest.raises(ValueError, match="no exact floating-point reduction"):
        red_for(2**52, 2**53)
    with pytest.raises(ValueError, match="no exact floating-point reduction"):
        red_for(2**23, 2**24, t=24)
    red_for(2**52 - 1, 2**53)  # the largest modulus is fine


def test_accumulator_reduction_bounds():
    for p in PS:
        red = red_for(p, 2**53)
        assert red.r_max == p // 2 + 4  # 1 + ceil(3 * 2**53 / 2**53)
        assert 2**53 // p < red.c_max <= 2**53 // p + 4


# ----------------------------------------------------------------- kernel inputs

def adversarial_y(p: int, y_max: int) -> list[int]:
    """Integers ``|y| <= y_max`` that stress ``rint(y * fl(1/p))``: multiples of p,
    halfway points between multiples, their neighbours, and the ends of the range."""
    y_max = min(y_max, KERNEL_L)  # inputs must be exact float64 integers
    top = y_max // p
    vals = {0, 1, p - 1, p, p + 1, p // 2, (p + 1) // 2, y_max, y_max - 1, y_max - 2}
    for j in {1, 2, 3, top // 3, top // 2, top - 1, top, max(top - 7, 0)}:
        for d in (0, 1, -1, p // 2, (p + 1) // 2, (p - 1) // 2, p - 1):
            vals.add(j * p + d)
    vals = {v for v in vals if 0 <= v <= y_max}
    return sorted(vals | {-v for v in vals})


def to_ints(x: np.ndarray) -> list[int]:
    assert np.all(np.isfinite(x)) and np.array_equal(x, np.trunc(x)), "kernel produced a non-integer"
    return [int(v) for v in x.ravel()]


def check_reduced(got: list[int], expect: list[int], p: int, bound: int):
    for g, e in zip(got, expect, strict=True):
        assert (g - e) % p == 0, f"{g} is not congruent to {e} mod {p}"
        assert abs(g) <= bound, f"|{g}| exceeds the bound {bound}"


# ----------------------------------------------------------------- step

@pytest.mark.parametrize("p", PS)
def test_step_reduces_anything_up_to_2_53(p):
    red = red_for(p, 2**53)
    ys = adversarial_y(p, 2**53)
    x = np.array(ys, dtype=np.float64).reshape(1, -1)
    step(x, None, red)
    check_reduced(to_ints(x), ys, p, red.r_max)


@pytest.mark.parametrize("p", PS)
def test_step_with_addend(p, rng):
    """``x + red(t)`` with ``t`` a fresh GEMM output reaching 2**53 in both signs: ``x`` kept
    (a reduced accumulator), or reduced first (a GEMM output itself)."""
    red = red_for(p, 2**53)
    ts = adversarial_y(p, 2**53)
    t = np.array(ts, dtype=np.float64).reshape(1, -1)
    xs = rng.integers(-red.r_max, red.r_max + 1, t.size).tolist()
    x = np.array(xs, dtype=np.float64).reshape(1, -1)
    step(x, t, None, 0, None, red)
    check_reduced(to_ints(x), [a + b for a, b in zip(xs, ts)], p, 2 * red.r_max)
    x = np.array(ts[::-1], dtype=np.float64).reshape(1, -1)
    step(x, t, red, 0, None, red)
    check_reduced(to_ints(x), [a + b for a, b in zip(ts[::-1], ts)], p, 2 * red.r_max)


def _plans_with_scaling(p):
    """One plan per distinct set of scaling steps (the real reductions the kernels get)."""
    seen, out = set(), []
    for c in candidates(p, (4, 4, 4)):
        if c.scale_steps and c.scale_steps not in seen:
            seen.add(c.scale_steps)
            out.append(c)
    return out


@pytest.mark.parametrize("p", [3, 251, 65521, 2**24 - 3, 2**31 - 1, 2**40 - 87, 2**50 - 27, 2**52 - 47,
                               2**52 - 1])
def test_step_modular_scaling(p):
    """``x <- scaled(2**g * x)`` for a reduced ``|x| <= acc.r_max``, and fused with a first
    reduction of ``x`` and a reduced addend."""
    plans = _plans_with_scaling(p)
    assert plans
    for pl in plans:
        acc, scaled = pl.reductions
        c_bound = pl.c_bound
        assert acc.r_max <= c_bound and all(r.r_max <= c_bound for r in scaled.values())
        for g, sred in scaled.items():
            r = acc.r_max
            assert sred.y_max >= r * 2**g  # the scaled reduction covers the scaled, reduced accumulator
            xs = sorted({v for v in adversarial_y(p, r) if abs(v) <= r} | {r, -r})
            x = np.array(xs, dtype=np.float64).reshape(1, -1)
            step(x, None, None, g, sred)
            check_reduced(to_ints(x), [v * 2**g for v in xs], p, sred.r_max)
            # fused: reduce x (up to 2**53), scale, reduce again, add a reduced t
            ys = adversarial_y(p, 2**53)
            x = np.array(ys, dtype=np.float64).reshape(1, -1)
            t = np.array(ys[::-1], dtype=np.float64).reshape(1, -1)
            step(x, t, acc, g, sred, acc)
            check_reduced(to_ints(x), [v * 2**g + w for v, w in zip(ys, ys[::-1])], p, sred.r_max + acc.r_max)


@pytest.mark.parametrize("p, u, sa", [(3, 2, 45), (509, 2, 45), (4093, 3, 29), (2**31 - 1, 2, 20),
                                       (2**52 - 47, 2, 26), (2**52 - 47, 3, 18)])
def test_step_wide_scaling(p, u, sa):
    """Scaling by up to 2**45 (plans with words wider than p); above 2**53 p is split in two."""
    pl = Plan(p, "fp64", u, 1, sa, 1, 1, "horner", (2, 2, 2))
    acc, scaled = pl.reductions
    assert set(scaled) == set(pl.scale_steps)
    for g, sred in scaled.items():
        if sred.y_max > 2**60:
            assert sred.z > 0  # c * p would not be exact unsplit
        r = acc.r_max
        xs = sorted({v for v in adversarial_y(p, r) if abs(v) <= r} | {r, -r})
        x = np.array(xs, dtype=np.float64).reshape(1, -1)
        step(x, None, None, g, sred)
        check_reduced(to_ints(x), [v * 2**g for v in xs], p, sred.r_max)
        assert sred.r_max <= pl.c_bound


@pytest.mark.parametrize("p", [2, 3, 251, 4093, 65521, 2**20 - 3, 2**23 - 15, 2**23])
def test_step_on_float32_words(p):
    """The fp32 engine's accumulators: float32 arrays reduced in place, results exact in float32."""
    cands = [c for c in candidates(p, (4, 4, 4), ("fp32",))]
    assert cands
    acc, _ = cands[0].reductions
    ys = [v for v in adversarial_y(p, 2**24) if abs(v) <= 2**24]
    x = np.array(ys, dtype=np.float32).reshape(1, -1)
    assert [int(v) for v in x.ravel()] == ys  # all exact in float32
    step(x, None, acc)
    assert x.dtype == np.float32
    check_reduced(to_ints(x), ys, p, acc.r_max)
    assert acc.r_max <= 2**24
    for pl in cands:
        a2, scaled = pl.reductions
        for g, sred in scaled.items():
            xs = [v for v in adversarial_y(p, a2.r_max) if abs(v) <= a2.r_max]
            x = np.array(xs, dtype=np.float32).reshape(1, -1)
            step(x, None, None, g, sred)
            check_reduced(to_ints(x), [v * 2**g for v in xs], p, pl.c_bound)


def test_step_identity_and_batches():
    p = 2**31 - 1
    red = red_for(p, 2**53)
    x = np.arange(-12.0, 12.0).reshape(2, 3, 4) * 1e15
    before = x.copy()
    step(x)  # no reduction, no scaling: nothing changes
    assert np.array_equal(x, before)
    # a 3-D stack and a non-contiguous view are reduced slice by slice
    y = x.copy()
    step(y, None, red)
    check_reduced(to_ints(y), to_ints(x), p, red.r_max)
    z = x.copy()
    view = z[:, ::2, ::3]
    step(view, None, red)
    check_reduced(to_ints(view), to_ints(x[:, ::2, ::3]), p, red.r_max)
    mask = np.ones(z.shape, bool)
    mask[:, ::2, ::3] = False
    assert np.array_equal(z[mask], x[mask])  # the rest untouched


# ----------------------------------------------------------------- finalize

@pytest.mark.parametrize("p", PS)
def test_finalize_gives_residues_in_range(p, rng):
    red = red_for(p, 2**53)
    ys = adversarial_y(p, 2**53)
    x = np.array(ys, dtype=np.float64).reshape(1, -1)
    out = np.full(x.shape, -1, dtype=np.int64)
    finalize(x, out, red)
    assert [int(v) for v in out.ravel()] == [y % p for y in ys]
    # with an addend, a fresh GEMM output: x + red(t) is what is reduced, x reduced first or not
    xs = [y // 3 for y in ys]
    for pre in (None, red):
        x = np.array(xs if pre is None else ys[::-1], dtype=np.float64).reshape(1, -1)
        want = [(a + b) % p for a, b in zip(xs if pre is None else ys[::-1], ys)]
        out = np.full(x.shape, -1, dtype=np.int64)
        finalize(x, out, red, np.array(ys, dtype=np.float64).reshape(1, -1), pre)
        assert [int(v) for v in out.ravel()] == want


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("as_int", [True, False])
def test_finalize_into_the_sums_own_memory(p, as_int, rng):
    # the products accumulate in their output's memory and finalize through it (as int64 over
    # float64 sums, or as floats in an RNS product's rows): the in-place kernels, which must
    # give what the separate ones give, plain or with a pre-reduction and an addend
    red = red_for(p, 2**53)
    ys = adversarial_y(p, 2**53)
    ts = ys[::-1]
    for pre, add in ((None, False), (red, False), (None, True), (red, True)):
        xs = [y // 3 for y in ys] if pre is None else ys
        x = np.array(xs * 3, dtype=np.float64).reshape(3, -1)  # several rows
        t = np.array(ts * 3, dtype=np.float64).reshape(3, -1) if add else None
        out = x.view(np.int64) if as_int else x
        finalize(x, out, red, t, pre)
        want = [(a + (b if add else 0)) % p for a, b in zip(xs, ts)] * 3
        assert [int(v) for v in out.ravel()] == want
        assert out.dtype == (np.int64 if as_int else np.float64)
    # a stack of such slices, through the in-place kernels slice by slice
    x = np.array(ys * 4, dtype=np.float64).reshape(2, 2, -1)
    out = x.view(np.int64) if as_int else x
    finalize(x, out, red)
    assert [int(v) for v in out.ravel()] == [y % p for y in ys] * 4


@pytest.mark.parametrize("p", [2, 3, 7, 256, 2**23])
def test_finalize_float32_in_place_layouts(p):
    red = red_for(p, 2**53)
    ys = [v for v in adversarial_y(p, 2**24) if abs(v) <= 2**24][:60]
    x = np.array(ys, dtype=np.float32).reshape(1, -1)
    out = np.empty((1, len(ys)), dtype=np.int64)
    finalize(x, out, red)
    assert out.ravel().tolist() == [y % p for y in ys]
    # into a transposed (non-contiguous) output
    x2 = np.array(ys * 2, dtype=np.float64).reshape(2, -1)
    out2 = np.empty((x2.shape[1], 2), dtype=np.int64).T
    finalize(x2, out2, red)
    assert out2.ravel().tolist() == [y % p for y in ys * 2]


# ----------------------------------------------------------------- words

def reconstruct(W: np.ndarray, s: int) -> list[int]:
    u = W.shape[0]
    flat = W.reshape(u, -1)
    return [sum(int(flat[i, j]) << (s * i) for i in range(u)) for j in range(flat.shape[1])]


def check_words(x: np.ndarray, p: int, s: int, u: int, dtype):
    W = balanced_words(x, p, s, u, dtype)
    assert W.shape == (u,) + x.shape and W.dtype == dtype
    bounds = word_bounds(p // 2, s, u)
    assert len(bounds) == u
    for i in range(u):
        assert np.all(np.abs(W[i].astype(np.float64)) <= bounds[i]), (i, bounds[i])
    values = reconstruct(W.astype(np.int64) if dtype != np.int64 else W, s)
    for v, xv in zip(values, x.ravel().tolist(), strict=True):
        assert (v - int(xv)) % p == 0
        assert -(p // 2) <= v <= p // 2  # the balanced residue
    return W


@given(p=st.integers(2, 2**52 - 1), u=st.integers(1, 4), data=st.data())
def test_balanced_words_reconstruct_and_respect_bounds(p, u, data):
    s = data.draw(st.integers(1, 60 // (u - 1)) if u > 1 else st.integers(1, 60), label="s")
    xs = data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20), label="x")
    h = p // 2
    x = np.array(xs + [h, -h, p - 1, 1 - p, -(2**63), 2**63 - 1, 0], dtype=np.int64)
    check_words(x, p, s, u, np.int64)


@pytest.mark.parametrize("p", PS)
def test_plan_words_in_the_engine_dtype(p, rng):
    """The words each candidate plan feeds its GEMM, in the GEMM's own dtype."""
    h = p // 2
    x = np.concatenate([
        np.array([h, -h, h - 1, p - 1, 1 - p, p, 0, 1, -1, -(2**63), 2**63 - 1], dtype=np.int64),
        rng.integers(-(2**63), 2**63 - 1, 40, endpoint=True, dtype=np.int64),
        rng.integers(-h, h + 1, 40, dtype=np.int64),
    ]).reshape(7, -1)
    seen = set()
    for c in candidates(p, (4, 4, 4)):
        dtype = modlin.ENGINES[c.engine].dtype
        for s, w, bounds in ((c.a_shift, c.u, c.a_bounds), (c.b_shift, c.v, c.b_bounds)):
            if (s, w, dtype) in seen:
                continue
            seen.add((s, w, dtype))
            assert bounds == word_bounds(p // 2, s, w)
            check_words(x, p, s, w, dtype)
            check_words(x.T, p, s, w, dtype)  # any layout


def test_words_do_not_modify_input():
    x = np.array([[2**63 - 1, -(2**63)], [5, -5]], dtype=np.int64)
    before = x.copy()
    balanced_words(x, 2**31 - 1, 16, 2, np.float64)
    balanced_words(x[:, ::-1], 7, 2, 3, np.float32)
    assert np.array_equal(x, before)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 16, 17, 100, 101, 255, 256, 257, 1000, 4097])
def test_word_bounds_are_tight_where_they_can_be(p):
    """Exhaustive over every residue: bounds hold, and the top bound is reached for odd p."""
    x = np.arange(p, dtype=np.int64)
    h = p // 2
    for u in (1, 2, 3):
        for s in range(1, max(2, h.bit_length() + 2)) if u > 1 else (1,):
            if u > 1 and s * (u - 1) > 60:
                continue
            W = check_words(x, p, s, u, np.int64)
            bounds = word_bounds(h, s, u)
            if p % 2:
                assert np.abs(W[u - 1]).max() == bounds[u - 1]


def test_word_bounds_hand_checked():
    assert word_bounds(100, 4, 1) == (100,)
    # 100 / 16 = 6.25 -> top word at most round(6.25) = 6; lower words at most 2**3
    assert word_bounds(100, 4, 2) == (8, 6)
    assert word_bounds(100, 4, 3) == (8, 8, 0)  # 100 / 256 < 1/2: the top word vanishes
    assert word_bounds(2**51, 26, 2) == (2**25, 2**25)
    # x = 7 in base 4, balanced: 7 = 2*4 - 1 -> words (-1, 2)
    W = balanced_words(np.array([7]), 101, 2, 2, np.int64)
    assert W[:, 0].tolist() == [-1, 2]


# ----------------------------------------------------------------- 2M images

@pytest.mark.parametrize("m", [5, 8101, FLOAT_MULMOD_MAX - 1, FLOAT_MULMOD_MAX + 1, 2**31 - 1, 2**50 - 27,
                               2**52 - 47])
def test_twom_images_and_combine_against_python_ints(m, rng):
    """Parts in ``[-m, m)`` in some 512-entry chunks (reduced by a select), anywhere in
    int64 in others (divided), and a short last chunk; the largest moduli test the
    quotient bound of the products by ``s``, those beside ``FLOAT_MULMOD_MAX`` the last
    and first beyond the float64 images of :func:`twom_words`, in one word and two."""
    n = 3 * 512 + 77
    re, im = (rng.integers(-m, m, n, dtype=np.int64) for _ in range(2))
    re[600], im[700] = -(2**63), 2**63 - 1
    re[1600:1610] = rng.integers(-(2**63), 2**63 - 1, 10, endpoint=True, dtype=np.int64)
    re[:4], im[:4] = [m - 1, -m, 0, -1], [m - 1, m - 1, -m, 1]
    s = next(c for c in (m - 1, m - 2, 3 * m // 4) if np.gcd(2 * c, m) == 1)
    want_plus = [(int(a) + s * int(b)) % m for a, b in zip(re.tolist(), im.tolist())]
    want_minus = [(int(a) - s * int(b)) % m for a, b in zip(re.tolist(), im.tolist())]
    plus, minus = twom_split(re, im, s, m)
    assert plus.tolist() == want_plus and minus.tolist() == want_minus
    shift = (m.bit_length() + 1) // 2
    for words, want in zip(twom_words(re, im, s, m, shift, 2, np.int64), (want_plus, want_minus)):
        assert reconstruct(words, shift) == [w - m if w > (m - 1) // 2 else w for w in want]
    for words, want in zip(twom_words(re, im, s, m, m.bit_length(), 1, np.float64), (want_plus, want_minus)):
        assert words.shape == (1, n)
        assert words[0].tolist() == [float(w - m if w > (m - 1) // 2 else w) for w in want]
    back_re, back_im = twom_combine(plus, minus, s, m)
    assert back_re.tolist() == [int(a) % m for a in re.tolist()]
    assert back_im.tolist() == [int(b) % m for b in im.tolist()]


def test_add_into_at_two_to_the_63():
    """p = 2**63 has int64 residues but no int64 of its own: the sum uses -p (k-panels of a
    tiled product mod 2**63, and the tree of a dask product, add with it)."""
    p = 2**63
    x = np.array([p - 1, p - 5, 0, 3], dtype=np.int64)
    y = np.array([p - 1, 2, 0, 4], dtype=np.int64)
    want = (x.astype(object) + y.astype(object)) % p
    add_into(x, y, p)
    assert np.array_equal(x.astype(object), want)
    A = np.arange(64 * 3000, dtype=np.int64).reshape(64, 3000) * (2**50 + 1)
    with modlin.limits(memory="2MiB"):  # k in several panels
        C = modlin.matmul(A, A.T, p)
    assert np.array_equal(C.astype(object), (A.astype(object) @ A.T.astype(object)) % p)


def _twom_prime(top: int) -> int:
    from modlin._arith.primes import prev_prime

    q = top
    while True:
        q = prev_prime(q - 1)
        if q % 4 == 1:
            return q


def test_mulmod1f_against_python_ints(rng):
    """The float64 product mod ``m`` of the 2M passes, for moduli up to and at
    ``FLOAT_MULMOD_MAX``: the largest factors, products that are multiples of ``m`` (the
    quotient's floor may land one below), and random ones."""
    from modlin._arith.modular import _mulmod1f

    for m in (3, 2**20 - 3, FLOAT_MULMOD_MAX - 1, FLOAT_MULMOD_MAX):
        pairs = [(m - 1, m - 1), (m - 1, 1), (0, m - 1), (m // 2, 2), ((m + 1) // 2, 2)]
        pairs += [tuple(map(int, rng.integers(0, m, 2))) for _ in range(300)]
        # products just below and just above multiples of m
        pairs += [(a, c) for a in range(2, 40) for j in (1, a - 1) for c in (j * m // a, j * m // a + 1) if c < m]
        for a, c in pairs:
            got = _mulmod1f(float(a), float(c), float(m), 1.0 / m)
            assert got == a * c % m, (m, a, c, got)


@pytest.mark.parametrize("bits", [21, 26, 27, 31, 40, 50, 52])
@pytest.mark.parametrize("k", [1, 300, 5000, "block", "block+1"])
def test_twom_finish_is_finalize_then_combine(bits, k, rng):
    """The fused last pass of 2M (the sums ``multiply_words`` leaves with ``keep=True``,
    reduced and combined in one kernel) gives the bits of ``finalize`` then ``twom_combine``
    and the Python-int product, for single and multiword plans with k in one block and
    in several, into strided outputs."""
    from modlin._algorithms.multiword import multiply_words
    from modlin._arith.modular import twom_finish
    from modlin._arith.moduli import sqrt_minus_one
    from modlin._engines.gemm import get_engine

    m = _twom_prime(2**bits)
    s = sqrt_minus_one(m)
    if isinstance(k, str):  # at and one past the plan's largest exact block
        k = modlin.plan(m, 6, 2**15, 5, engine="fp64").block + (k == "block+1")
        k = min(k, 2**15 + 1)
    pl = modlin.plan(m, 6, k, 5, engine="fp64")
    assert isinstance(pl, Plan)
    eng = get_engine(pl.engine)
    x = [rng.integers(0, m, (6, k)) for _ in range(2)]
    y = [rng.integers(0, m, (k, 5)) for _ in range(2)]
    x[0][0, 0] = x[1][0, 0] = y[0][0, 0] = y[1][0, 0] = m - 1
    ap, am = twom_words(*x, s, m, pl.a_shift, pl.u, eng.dtype)
    bp, bm = twom_words(*y, s, m, pl.b_shift, pl.v, eng.dtype)
    sums = [np.empty((6, 5), dtype=eng.acc_dtype) for _ in range(2)]
    multiply_words(pl, ap, bp, sums[0], keep=True)
    multiply_words(pl, am, bm, sums[1], keep=True)
    re, im = (np.full((6, 10), -7, dtype=np.int64)[:, ::2] for _ in range(2))
    twom_finish(*sums, pl.reductions[0], s, re, im)
    X, Y = np.empty((6, 5), dtype=np.int64), np.empty((6, 5), dtype=np.int64)
    multiply_words(pl, ap, bp, X)
    multiply_words(pl, am, bm, Y)
    want_re, want_im = twom_combine(X, Y, s, m)
    assert np.array_equal(re, want_re) and np.array_equal(im, want_im)
    xo, yo = [t.astype(object) for t in x], [t.astype(object) for t in y]
    assert np.array_equal(re.astype(object), (xo[0] @ yo[0] - xo[1] @ yo[1]) % m)
    assert np.array_equal(im.astype(object), (xo[0] @ yo[1] + xo[1] @ yo[0]) % m)


def test_keep_needs_the_accumulator_dtype():
    from modlin._algorithms.multiword import multiply_words

    pl = modlin.plan(65521, 4, 4, 4, engine="fp64")
    w = np.zeros((1, 4, 4))
    with pytest.raises(ValueError, match="keep=True"):
        multiply_words(pl, w, w, np.empty((4, 4), dtype=np.int64), keep=True)
