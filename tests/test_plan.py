"""Planner, plans and the exactness contract.

Plans are checked three ways: against the contract recomputed here with Python
integers, against a Python-integer interpreter of their schedules (which must
compute ``A @ B``, run every GEMM within its word pair's block and keep every sum
of reduced values within the engine's range), and end to end against the oracle with hypothesis-drawn moduli,
shapes and values (including hand-built plans that pass ``check()``).
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import modlin
from conftest import assert_exact, matmul_limit_rows
from modlin._arith.modular import balanced_words
from modlin._engines.gemm import ENGINES
from modlin._planning import contract as _contract
from modlin._planning.plan import Plan, candidates, pass_scale
from modlin._planning.planner import call_cost
from modlin._runtime.calibration import FRESH_BYTE

REGIME_PRIMES = [3, 251, 65521, 2**20 - 3, 2**24 - 3, 2**26 - 5, 2**31 - 1, 2**35 - 31, 2**40 - 87,
                 2**50 - 27, 2**52 - 47]
MODULI = sorted({2, 4, 6, 256, 1000, 2**32, 10**12, 2**52 - 1, *REGIME_PRIMES})


def gemm_words(pl: Plan) -> dict:
    """The word bounds ``(a_max, b_max)`` of each kind of GEMM the plan makes, keyed as
    :meth:`Plan.blocks`: word pairs for Horner, the iterated side's words (against the
    largest word of the concatenated side) for concatenation."""
    a, b = pl.a_bounds, pl.b_bounds
    if pl.variant == "horner":
        return {(i, j): (a[i], b[j]) for i in range(pl.u) for j in range(pl.v)}
    if pl.variant == "concat-b":
        return {i: (a[i], max(b)) for i in range(pl.u)}
    return {j: (max(a), b[j]) for j in range(pl.v)}


def largest_block(pl: Plan) -> int:
    """The longest exact block of any of the plan's GEMMs, each writing a fresh array (c_max = 0)."""
    L = ENGINES[pl.engine].L
    words = [w for w in gemm_words(pl).values() if w[0] * w[1]]  # vanishing words take any block
    return max(L // (x * y) for x, y in words) if words else L


def contract_holds(pl: Plan) -> bool:
    """Recomputed from the plan's bounds: every GEMM's ``block * a_max * b_max + 0 <= L``
    (each writes a fresh array), the plan's block is one that some GEMM takes, and a
    reduced accumulator plus a reduced GEMM output fit ``L``."""
    L = ENGINES[pl.engine].L
    words, blocks = gemm_words(pl), pl.blocks()
    return (all(blocks[key] * x * y <= L for key, (x, y) in words.items())
            and pl.block <= largest_block(pl)
            and 2 * pl.c_bound <= L)


# ----------------------------------------------------------------- contract

def test_is_exact_at_the_boundary():
    L = 2**53
    # 2**20 * 2**16 * 2**16 + 1 = 2**52 + 1 <= 2**53
    assert _contract.is_exact(2**20, 2**16, 2**16, 1, L)
    # exactly L: allowed; one more: not
    assert _contract.is_exact(2, 2**26, 2**26, 0, L)
    assert _contract.is_exact(1, 2**26, 2**26, 2**53 - 2**52, L)
    assert not _contract.is_exact(1, 2**26, 2**26, 2**53 - 2**52 + 1, L)
    assert not _contract.is_exact(2, 2**26, 2**26, 1, L)
    assert _contract.is_exact(0, 2**60, 2**60, L, L)  # no products, accumulator at the limit
    assert not _contract.is_exact(0, 0, 0, L + 1, L)
    # fp32: 255 * 255 * 258 + 16 = 16776466 <= 2**24 = 16777216; 259 terms do not fit
    assert _contract.is_exact(258, 255, 255, 16, 2**24)
    assert not _contract.is_exact(259, 255, 255, 16, 2**24)


@given(a=st.integers(0, 2**40), b=st.integers(0, 2**40), c=st.integers(0, 2**54),
       L=st.sampled_from([2**24, 2**31 - 1, 2**53]))
def test_max_block_is_the_largest_exact_block(a, b, c, L):
    lam = _contract.max_block(a, b, c, L)
    if c > L:
        assert lam == 0 and not _contract.is_exact(0, a, b, c, L)
        return
    if a * b == 0:
        assert lam == L and _contract.is_exact(lam, a, b, c, L)  # any block: products vanish
        return
    assert _contract.is_exact(lam, a, b, c, L)
    assert not _contract.is_exact(lam + 1, a, b, c, L)
    assert lam == (L - c) // (a * b)  # hand formula


@pytest.mark.parametrize("bad", [-1, 1.0, "3", None, 2.0**53])
def test_contract_wants_non_negative_python_ints(bad):
    with pytest.raises(TypeError, match="non-negative Python ints"):
        _contract.is_exact(bad, 1, 1, 1, 2**53)
    with pytest.raises(TypeError, match="non-negative Python ints"):
        _contract.max_block(1, bad, 1, 2**53)


def test_engine_limits():
    assert ENGINES["fp64"].L == 2**53
    assert ENGINES["fp32"].L == 2**24
    # the limit is the exact range of the type: L is representable, L + 1 is not
    for name, dt in (("fp64", np.float64), ("fp32", np.float32)):
        L = ENGINES[name].L
        assert int(dt(L)) == L and int(dt(L) + dt(1)) != L + 1
        assert int(dt(L - 1)) == L - 1


# ----------------------------------------------------------------- candidates satisfy the contract

def check_candidate(pl: Plan, p: int):
    assert pl.p == p
    assert pl.engine in ENGINES and pl.variant in ("horner", "concat-b", "concat-a")
    assert pl.block >= 1
    L = ENGINES[pl.engine].L
    assert contract_holds(pl)
    pl.check()
    # the block is the largest the contract allows (it is lambda, not just some exact block),
    # and so is each GEMM's
    assert not contract_holds(dataclasses.replace(pl, block=pl.block + 1))
    for key, (x, y) in gemm_words(pl).items():
        assert _contract.is_exact(pl.blocks()[key], x, y, 0, L)
        assert pl.blocks()[key] == pl.block or not _contract.is_exact(pl.blocks()[key] + 1, x, y, 0, L)
    # the word bounds hold for the values that stress them
    h = p // 2
    x = np.array([h, -h, h - 1, (p - 1) // 2, -((p - 1) // 2), p - 1, 0], dtype=np.int64)
    for s, w, bounds in ((pl.a_shift, pl.u, pl.a_bounds), (pl.b_shift, pl.v, pl.b_bounds)):
        W = balanced_words(x, p, s, w, np.int64)
        assert all(np.abs(W[i]).max() <= bounds[i] for i in range(w))
    # the accumulator bound covers every reduction's output
    acc, scaled = pl.reductions
    assert pl.c_bound >= max([acc.r_max] + [r.r_max for r in scaled.values()])
    assert pl.c_bound >= p // 2


@given(p=st.integers(2, 2**52 - 1), m=st.integers(1, 5000), k=st.integers(0, 10**7), n=st.integers(1, 5000))
def test_every_candidate_and_the_choice_obey_the_contract(p, m, k, n):
    cands = candidates(p, (m, k, n))
    assert cands
    for c in cands:
        check_candidate(c, p)
        assert c.shape == (m, k, n)
    chosen = modlin.plan(p, m, k, n, algorithm="multiword")
    assert chosen in cands
    check_candidate(chosen, p)
    # the planner returns the cheapest candidate of its cost model
    assert chosen.cost() == min(c.cost() for c in cands)
    # and, left to choose, the cheaper of that and a residue number system (which can
    # win below 2**52 too: at p = 2**48, 2501 x 2501 x 4226, five 22-bit moduli do)
    # (weighed with the working memory each call maps afresh: planner.call_cost)
    auto = modlin.plan(p, m, k, n)
    assert auto == chosen or call_cost(auto) < call_cost(chosen)


@pytest.mark.parametrize("p", MODULI)
def test_candidates_cover_the_regimes(p):
    cands = candidates(p, (64, 64, 64))
    for c in cands:
        check_candidate(c, p)
    engines = {c.engine for c in cands}
    assert "fp64" in engines
    assert ("fp32" in engines) == (p <= ENGINES["fp32"].max_modulus)
    # every word shape that appears offers horner, and concat variants only with several words
    for c in cands:
        if c.variant == "concat-b":
            assert c.v > 1
        if c.variant == "concat-a":
            assert c.u > 1
        assert any(d.variant == "horner" and (d.u, d.v, d.engine) == (c.u, c.v, c.engine) for d in cands)
    # smaller words allow longer blocks: no plan of an engine has a larger lambda than its (3,3) plans
    for eng in engines:
        mine = [c for c in cands if c.engine == eng]
        assert max(c.block for c in mine) == max(c.block for c in mine if (c.u, c.v) == (3, 3))


# ----------------------------------------------------------------- planner choices

def test_fp32_for_small_moduli_at_large_sizes():
    for p in (2, 3, 7, 251):
        for n in (256, 1024, 4096):
            pl = modlin.plan(p, n, n, n)
            assert pl.engine == "fp32", (p, n, pl)
            assert (pl.u, pl.v) == (1, 1)


def test_one_word_for_20_bit_moduli():
    for p in (2**20 - 3, 1048573, 65521):
        for n in (256, 1024):
            pl = modlin.plan(p, n, n, n)
            assert (pl.engine, pl.u, pl.v) == ("fp64", 1, 1), pl


def test_more_words_for_bigger_moduli():
    for n in (64, 1024):
        prev = 0
        for p in REGIME_PRIMES:
            pl = modlin.plan(p, n, n, n, algorithm="multiword")
            assert pl.u * pl.v >= prev, (p, pl)
            prev = pl.u * pl.v
        big = modlin.plan(2**52 - 47, n, n, n, algorithm="multiword")
        assert big.u * big.v >= 4
        mid = modlin.plan(2**31 - 1, n, n, n, algorithm="multiword")
        assert mid.u * mid.v >= 2


def test_plan_restrictions():
    p = 2**40 - 87
    for c in candidates(p, (32, 32, 32)):
        pl = modlin.plan(p, 32, 32, 32, engine=c.engine, words=(c.u, c.v), variant=c.variant)
        assert (pl.engine, pl.u, pl.v, pl.variant) == (c.engine, c.u, c.v, c.variant)
        assert pl == c
    with pytest.raises(ValueError, match="no exact plan"):
        modlin.plan(p, 4, 4, 4, words=(1, 1))
    with pytest.raises(ValueError, match="no exact plan"):
        modlin.plan(2**24 - 3, 4, 4, 4, engine="fp32", algorithm="multiword")
    with pytest.raises(ValueError, match="unknown engine"):
        modlin.plan(7, 4, 4, 4, engine="fp16")
    with pytest.raises(ValueError, match="non-negative"):
        modlin.plan(7, -1, 4, 4)
    with pytest.raises(ValueError, match="non-negative"):
        modlin.plan(7, 4, 2.5, 4)
    with pytest.raises(ValueError, match="at least 2"):
        modlin.plan(1, 4, 4, 4)
    with pytest.raises(ValueError, match=r"2\*\*52"):
        modlin.plan(2**52, 4, 4, 4, algorithm="multiword")
    with pytest.raises(ValueError, match="algorithm"):
        modlin.plan(7, 4, 4, 4, algorithm="strassen")
    with pytest.raises(ValueError, match="moduli="):
        modlin.plan(7, 4, 4, 4, words=(1, 1), moduli=(5, 3))
    with pytest.raises(TypeError, match="integer"):
        modlin.plan(7.0, 4, 4, 4)


def test_no_plan_for_words_says_why_and_what_to_do():
    """words=(1, 1) for a p too large for them: the contract with its numbers, that even a
    block of 1 breaks it, and the words that do have an exact plan (which must work)."""
    p = 2**40 - 87
    with pytest.raises(ValueError, match=r"^no exact plan for p = ") as info:
        modlin.plan(p, 4, 4, 4, words=(1, 1))
    text = str(info.value)
    a = b = p // 2  # one balanced word each
    L = ENGINES["fp64"].L
    assert a * b > L  # the premise: even lambda = 1 breaks the contract
    assert "k * a_max * b_max + c_max <= L" in text and "lambda = 1" in text, text
    assert f"a_max = {a} and b_max = {b}" in text and f"1 * {a} * {b} + 0 = {a * b} > L = 2**53" in text, text
    assert "fp32 engine holds residues modulo p <= 8388608" in text, text  # the other automatic engine
    assert "leave words unset" in text, text
    suggested = tuple(int(x) for x in text.split("e.g. words=(", 1)[1].split(")", 1)[0].split(","))
    assert "Use more words" in text and sum(suggested) > 2, text
    pl = modlin.plan(p, 4, 4, 4, words=suggested)  # the advice works
    assert (pl.u, pl.v) == suggested
    # engine= too: other words cannot help fp32 here, so the message says what to drop
    with pytest.raises(ValueError, match=r"fp32 engine holds residues modulo p <= 8388608 only\. "
                                         r"Drop engine= and words= to let the planner choose"):
        modlin.plan(p, 4, 4, 4, words=(1, 1), engine="fp32")
    with pytest.raises(ValueError, match=r"words must be one of \(1, 1\), .*\(3, 3\)"):
        modlin.plan(p, 4, 4, 4, words=(7, 1))
    with pytest.raises(ValueError, match=r"concat-b.*concatenates the words of B, which needs more than one"):
        modlin.plan(65521, 4, 4, 4, words=(2, 1), variant="concat-b")


def test_empty_products_cost_nothing():
    """m = 0 or n = 0: matmul returns the empty result at once, so the plan costs 0 and
    explain() says so; the plan is the one chosen for one row or column (reusable)."""
    for p in (65521, 2**61 - 1):
        for shape in ((0, 5, 5), (5, 5, 0), (0, 0, 0), (0, 300, 7)):
            pl = modlin.plan(p, *shape)
            assert pl.shape == shape and pl.cost() == 0 and pl.relative_cost() == 0, (p, shape)
            text = pl.explain()
            assert "the product is empty" in text and "cost      : none" in text and "GEMM call" not in text, text
            one = modlin.plan(p, max(shape[0], 1), shape[1], max(shape[2], 1))
            assert dataclasses.replace(pl, shape=one.shape) == one
    # k = 0 is not empty: a zero matrix is written, by one pass
    pl = modlin.plan(65521, 5, 0, 5)
    assert pl.cost() > 0 and "empty" not in pl.explain()


def test_pass_scale_follows_the_bandwidth_model():
    from modlin._planning.plan import pass_scale
    from modlin._runtime.calibration import BANDWIDTH, CALIBRATION_THREADS

    assert pass_scale(CALIBRATION_THREADS) == 1.0
    bw = dict(BANDWIDTH)
    for c, b in BANDWIDTH:  # at the table's points: c / BW(c) against the calibration's
        assert pass_scale(c) == pytest.approx((c / b) / (CALIBRATION_THREADS / bw[CALIBRATION_THREADS]))
    scales = [pass_scale(c) for c in range(2, 300)]
    assert all(a < b for a, b in zip(scales, scales[1:]))  # dearer with every core past the calibration
    assert pass_scale(128) == pytest.approx(2 * pass_scale(64))  # bandwidth flat beyond the table
    assert pass_scale(0) == pass_scale(1)
    with modlin.limits(threads=16):
        assert pass_scale() == pass_scale(16)


def test_cost_model_sees_threads():
    """More cores make the passes dearer against the GEMMs, so the planner may pick plans with
    fewer of them; each choice is the cheapest for its own thread count, and the default is
    the thread count of :func:`modlin.limits`."""
    shapes = [(4096, 4096, 4096), (2048, 2048, 2048), (1000, 1000, 48), (8192, 8192, 8192)]
    for p in (2**24 - 3, 2**31 - 1, 2**50 - 27, 2**61 - 1, 2**127 - 1):
        for shape in shapes:
            chosen = {t: modlin.plan(p, *shape, threads=t) for t in (1, 2, 16, 64)}
            for t, pl in chosen.items():
                for other in chosen.values():
                    assert call_cost(pl, t) <= call_cost(other, t) * (1 + 1e-12)
                assert pl.relative_cost(threads=64) >= pl.relative_cost(threads=2)
            with modlin.limits(threads=16):
                assert modlin.plan(p, *shape) == chosen[16]
                assert chosen[16].cost() == chosen[16].cost(threads=16)
    # on 2 cores a 50-bit product at n = 8192 goes through 5 residues; on 64, whose passes cost
    # 2.7 times as much against the GEMMs, through the (2,3) words' 6 GEMMs and few passes
    assert type(modlin.plan(2**50 - 27, 8192, 8192, 8192, threads=2)).__name__ == "RNSPlan"
    wide = modlin.plan(2**50 - 27, 8192, 8192, 8192, threads=64)
    assert isinstance(wide, Plan) and wide.gemm_count() == 6
    for bad in (0, -2, 1.5, True, "4"):
        with pytest.raises(ValueError, match="threads must be a positive int"):
            modlin.plan(7, 4, 4, 4, threads=bad)


def test_fresh_working_memory_weighs_in_the_choice(monkeypatch):
    # a call maps afresh the part of its tile's workspace that the scratch pool cannot keep
    # (a quarter of the budget, once products no longer follow one another): a 50-bit product
    # at n = 4096 goes through five residues, whose int32 products take 1.2 GiB, close to
    # the (2,3) words' 1.1, and through the words when fresh memory costs more
    import modlin._planning.planner as planner

    p, n = 2**50 - 27, 4096
    with modlin.limits(memory="4GiB", threads=2):
        rns = modlin.plan(p, n, n, n, algorithm="rns")
        words = modlin.plan(p, n, n, n, algorithm="multiword")
        fresh = rns.tiling().peak - 2**30
        assert fresh > 0
        assert call_cost(rns) == pytest.approx(rns.cost() + FRESH_BYTE * fresh * pass_scale(2))
        assert rns.cost() < words.cost() and call_cost(rns) < call_cost(words)
        assert modlin.plan(p, n, n, n) == rns
        small = modlin.plan(p, 256, 256, 256)
        assert call_cost(small) == small.cost()  # within the pool: nothing fresh
        monkeypatch.setattr(planner, "FRESH_BYTE", 100 * FRESH_BYTE)
        planner._fresh_bytes.cache_clear()
        assert call_cost(words) < call_cost(rns) and modlin.plan(p, n, n, n) == words
        monkeypatch.undo()
    with modlin.limits(memory="16GiB", threads=2):
        assert call_cost(rns) == rns.cost()
        assert type(modlin.plan(p, n, n, n)).__name__ == "RNSPlan"
    with modlin.limits(memory="512KiB", threads=2):  # the residues' smallest tile does not fit, the words' does
        assert call_cost(rns) == math.inf and call_cost(words) < math.inf
        assert modlin.plan(p, n, n, n) == words


def test_plan_is_frozen_plain_data():
    pl = modlin.plan(2**31 - 1, 16, 16, 16)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pl.block = 1
    assert pl == dataclasses.replace(pl)
    assert hash(pl) == hash(dataclasses.replace(pl))
    assert isinstance(pl, modlin.Plan)


# ----------------------------------------------------------------- check()

@pytest.mark.parametrize("p", MODULI)
def test_check_refuses_one_past_the_contract(p):
    for c in candidates(p, (8, 8, 8)):
        c.check()
        broken = dataclasses.replace(c, block=c.block + 1)
        with pytest.raises(ValueError, match="exactness contract") as info:
            broken.check()
        assert f"largest exact block for these words is {c.block}" in str(info.value)


def test_check_refuses_malformed_plans():
    good = modlin.plan(2**31 - 1, 8, 8, 8, words=(2, 2), variant="horner")
    cases = [
        (dict(engine="fp16"), "unknown engine"),
        (dict(variant="strassen"), "unknown plan variant"),
        (dict(u=0), "positive"),
        (dict(block=0), "positive"),
        (dict(a_shift=0), "positive"),
        (dict(u=3, a_shift=31), "int64"),
        (dict(p=1), r"outside \[2, 2\*\*52\)"),
        (dict(p=2**52), r"outside \[2, 2\*\*52\)"),
    ]
    for change, msg in cases:
        with pytest.raises(ValueError, match=msg):
            dataclasses.replace(good, **change).check()


def test_check_refuses_concat_whose_accumulators_overflow():
    # The concatenated variant adds two reduced accumulators (|c| <= c_bound each);
    # an engine's max_modulus keeps 2 * c_bound within its L, and check() refuses
    # moduli beyond it (here fp32 words for p ~ 2**24, where 2 * c_bound > 2**24).
    p = 2**24 - 3
    pl = Plan(p, "fp32", 3, 3, 8, 8, 1, "concat-b", (4, 4, 4))
    assert _contract.is_exact(1, max(pl.a_bounds), max(pl.b_bounds), pl.c_bound, 2**24)
    assert 2 * pl.c_bound > 2**24
    with pytest.raises(ValueError, match="fp32 engine holds residues modulo p <= 8388608"):
        pl.check()
    for eng in ENGINES.values():
        top = Plan(eng.max_modulus, eng.name, 1, 1, 1, 1, 1, "horner", (1, 1, 1))
        assert _contract.is_exact(1, top.c_bound, 1, top.c_bound, eng.L)


def test_matmul_refuses_foreign_and_broken_plans(rng):
    A = rng.integers(0, 1000, (3, 4))
    B = rng.integers(0, 1000, (4, 2))
    pl = modlin.plan(1009, 3, 4, 2)
    with pytest.raises(ValueError, match=r"plan was made for p = 1009, not p = 1013"):
        modlin.matmul(A, B, 1013, plan=pl)
    with pytest.raises(ValueError, match="exactness contract"):
        modlin.matmul(A, B, 1009, plan=dataclasses.replace(pl, block=pl.block + 1))
    with pytest.raises(ValueError, match="unknown engine"):
        modlin.matmul(A, B, 1009, plan=dataclasses.replace(pl, engine="bf16"))
    assert_exact(modlin.matmul(A, B, 1009, plan=pl), A, B, 1009)


def test_plan_runs_on_any_shape(rng):
    """The shape a plan was made for only steers the cost model."""
    p = 2**50 - 27
    for c in candidates(p, (1, 1, 1)):
        pl = dataclasses.replace(c, block=min(c.block, 3))
        A = rng.integers(0, p, (5, 11))
        B = rng.integers(0, p, (11, 4))
        assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)


# ----------------------------------------------------------------- explain()

@pytest.mark.parametrize("p", [3, 65521, 2**31 - 1, 2**50 - 27])
def test_explain_says_what_and_why(p):
    for pl in [modlin.plan(p, 64, 64, 64), *candidates(p, (64, 300, 64))[:6]]:
        text = pl.explain()
        eng = ENGINES[pl.engine]
        assert f"p = {p}" in text and f"{p.bit_length()} bits" in text
        assert pl.engine in text and "GEMM" in text
        assert f"lambda = {pl.block}" in text
        assert f"({pl.u},{pl.v})" in text and "word" in text
        assert f"2**{pl.a_shift}" in text and f"2**{pl.b_shift}" in text
        amax, bmax = min((w for w in gemm_words(pl).values() if w[0] * w[1]), key=lambda w: w[0] * w[1])
        # the inequality it prints is the contract, and it holds
        assert f"{pl.block} * {amax} * {bmax} + 0" in text
        assert pl.block * amax * bmax <= eng.L
        assert {"fp64": "2**53", "fp32": "2**24"}.get(pl.engine, str(eng.L)) in text
        assert f"{pl.gemm_count()} GEMM" in text
        if pl.scale_steps:
            assert "scaling" in text
        with modlin.limits(threads=16):  # the modelled cost is for the cores the product runs on
            assert f"about {pl.relative_cost(threads=16):.2f} x" in pl.explain() and "on 16 cores" in pl.explain()


# ----------------------------------------------------------------- schedules

def simulate(pl: Plan, k: int, a_words: list[list[int]], b_words: list[list[int]]) -> int:
    """Run ``pl.schedule(k)`` on one row of A and one column of B with exact integers.

    ``a_words[i][x]`` is word ``i`` of ``A[0, x]``. Reductions are identities here
    (exact integers need none); beside the values, the bounds the kernels' values obey
    are tracked: a GEMM of at most its block (within the contract, :func:`contract_holds`)
    gives at most ``L``, a reduction at most ``acc.r_max`` (``scaled[g].r_max`` after a
    scaling), and every sum of the passes must stay within ``L``; a workspace is never
    overwritten before it is added. Returns ``C[0, 0]`` as an exact integer.
    """
    ops = pl.schedule(k)
    assert ops and ops[-1][0] == "final", "a schedule ends with the final pass"
    assert sum(1 for op in ops if op[0] == "final") == 1
    L = ENGINES[pl.engine].L
    acc, scaled = pl.reductions
    blocks = pl.blocks()

    def dot(i, j, k0, k1):
        assert 0 <= k0 < k1 <= k
        return sum(a_words[i][x] * b_words[j][x] for x in range(k0, k1))

    def fold(bound, g, reduce):
        """The bound after ``C <- pre(C) + red(T)``, checking that the sum is exact."""
        pre = scaled[g].r_max if g else (acc.r_max if reduce else bound)
        assert pre + acc.r_max <= L, "a pass adds beyond the engine's exact range"
        return pre + acc.r_max

    if pl.variant == "horner":
        C, T, pending, bound = None, None, False, None
        covered = {}
        for op in ops:
            kind = op[0]
            if kind == "gemm":
                _, i, j, k0, k1, dst = op
                assert k1 - k0 <= blocks[i, j]
                covered.setdefault((i, j), []).append((k0, k1))
                if dst == "C":
                    assert C is None, "only the very first GEMM writes C directly"
                    C, bound = dot(i, j, k0, k1), L
                else:
                    assert C is not None and not pending, "workspace T overwritten before it was added"
                    T, pending = dot(i, j, k0, k1), True
            elif kind in ("step", "final"):
                g, reduce = op[-2], op[-1]
                if kind == "step" or op[1] == "T":
                    assert pending
                    bound = fold(bound, g, reduce)
                    C, pending = C * 2**g + T, False
                else:
                    assert not pending and g == 0
            else:
                raise AssertionError(f"unexpected op {op}")
        # every word pair covers [0, k) exactly once
        assert set(covered) == {(i, j) for i in range(pl.u) for j in range(pl.v)}
        for segs in covered.values():
            segs.sort()
            assert segs[0][0] == 0 and segs[-1][1] == k
            assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
        return C

    # concat: the iterated side and the concatenated side
    if pl.variant == "concat-b":
        outer, inner, ow, iw = pl.u, pl.v, a_words, b_words
    else:
        outer, inner, ow, iw = pl.v, pl.u, b_words, a_words
    C, S, Tcat, bound, sbound = 0, None, None, 0, None
    covered = {}
    for op in ops:
        kind = op[0]
        if kind == "gemm":
            _, i, j, k0, k1, dst = op
            assert j is None and dst == "Tcat" and k1 - k0 <= blocks[i]
            covered.setdefault(i, []).append((k0, k1))
            Tcat = [sum(ow[i][x] * iw[jj][x] for x in range(k0, k1)) for jj in range(inner)]
            S, sbound = Tcat[inner - 1], L
        elif kind == "combine":
            _, j, g = op
            sbound = fold(sbound, g, True)
            S = S * 2**g + Tcat[j]
        elif kind in ("step", "final"):
            g, reduce = op[-2], op[-1]
            bound = fold(bound, g, reduce)
            C = C * 2**g + S
        else:
            raise AssertionError(f"unexpected op {op}")
    assert set(covered) == set(range(outer))
    for segs in covered.values():
        assert segs[0][0] == 0 and segs[-1][1] == k
        assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
    return C


def _words_of(values: list[int], p: int, s: int, w: int) -> list[list[int]]:
    W = balanced_words(np.array(values, dtype=np.int64), p, s, w, np.int64)
    return [W[i].tolist() for i in range(w)]


def _schedule_plans():
    out = []
    for p in (3, 2**31 - 1, 2**40 - 87, 2**52 - 1):
        for c in candidates(p, (8, 8, 8)):
            for block in {1, 2, 3, 5, min(c.block, 64)}:
                if block <= c.block:
                    out.append(dataclasses.replace(c, block=block))
    return out


SCHEDULE_PLANS = _schedule_plans()


def test_schedules_compute_the_product():
    """Interpreting each schedule with exact integers gives the exact dot product."""
    rnd = random.Random(7)
    for pl in SCHEDULE_PLANS:
        p = pl.p
        for k in sorted({1, 2, 3, pl.block, pl.block + 1, 2 * pl.block + 1, 10}):
            a = [rnd.randrange(p) for _ in range(k)]
            b = [rnd.randrange(p) for _ in range(k)]
            aw = _words_of(a, p, pl.a_shift, pl.u)
            bw = _words_of(b, p, pl.b_shift, pl.v)
            got = simulate(pl, k, aw, bw)
            # exact integer identity: sum of word products with their powers of two
            a_bal = [sum(aw[i][x] << (pl.a_shift * i) for i in range(pl.u)) for x in range(k)]
            b_bal = [sum(bw[j][x] << (pl.b_shift * j) for j in range(pl.v)) for x in range(k)]
            assert got == sum(x * y for x, y in zip(a_bal, b_bal)), (pl, k)
            assert got % p == sum(x * y for x, y in zip(a, b)) % p


def test_counts_agree_with_schedule():
    for pl in SCHEDULE_PLANS:
        for k in (0, 1, 2, 3, 4, 5, 7, 10, 13, pl.block, pl.block + 1, 3 * pl.block + 2):
            ops = pl.schedule(k)
            gemms = [op for op in ops if op[0] == "gemm"]
            passes = len(ops) - len(gemms)
            groups, n_passes = pl.counts(k)
            assert sum(g[0] for g in groups) == len(gemms) == pl.gemm_count(k), (pl, k)
            assert n_passes == passes, (pl, k)
            # total inner dimension multiplied (concat GEMMs cover all inner words at once)
            assert sum(g[1] for g in groups) == sum(op[4] - op[3] for op in gemms), (pl, k)
            if k:
                words = pl.u * pl.v if pl.variant == "horner" else (pl.u if pl.variant == "concat-b" else pl.v)
                assert sum(g[1] for g in groups) == words * k
            else:
                assert ops == [("final", None, 0, False)] and groups == []
            assert all(g[2] == (1 if pl.variant == "horner" else
                                (pl.v if pl.variant == "concat-b" else pl.u)) for g in groups)


def test_costs_are_positive_and_relative():
    for pl in SCHEDULE_PLANS[:60]:
        for shape in [(1, 1, 1), (64, 64, 64), (1024, 16, 1024)]:
            assert pl.cost(shape) > 0
            assert pl.relative_cost(shape) > 0
        # more inner dimension never costs less
        assert pl.cost((64, 128, 64)) > pl.cost((64, 64, 64))


# ----------------------------------------------------------------- end to end, hypothesis

VALUES = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 1, -1]))


@st.composite
def products(draw):
    p = draw(st.one_of(st.integers(2, 2**52 - 1), st.sampled_from([2, 3, 4, 2**23, 2**31 - 1, 2**52 - 1]),
                       st.integers(2, 300)))
    m, k, n = (draw(st.integers(0, 5), label=x) for x in "mkn")
    h = p // 2
    special = st.sampled_from([p - 1, h, -h, (p - 1) // 2, 1 - p, 0])
    vals = st.one_of(VALUES, special, st.integers(-h, h))
    A = np.array(draw(st.lists(vals, min_size=m * k, max_size=m * k)), dtype=np.int64).reshape(m, k)
    B = np.array(draw(st.lists(vals, min_size=k * n, max_size=k * n)), dtype=np.int64).reshape(k, n)
    return p, A, B


@given(products(), st.data())
def test_matmul_matches_oracle(prod, data):
    p, A, B = prod
    assert_exact(modlin.matmul(A, B, p), A, B, p)
    cands = candidates(p, (4, 4, 4))
    c = data.draw(st.sampled_from(cands), label="plan")
    block = data.draw(st.integers(1, min(c.block, 4)), label="block")
    assert_exact(modlin.matmul(A, B, p, plan=dataclasses.replace(c, block=block)), A, B, p)


@st.composite
def hand_built_plans(draw, engines=("fp64", "fp32")):
    engine = draw(st.sampled_from(engines))
    bits = draw(st.integers(2, 52))
    p = draw(st.integers(max(2, 2 ** (bits - 1)), 2**bits - 1))
    u, v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    # shifts near bits/words make checkable plans likely; any shift is allowed
    sa = draw(st.one_of(st.integers(max(1, bits // u - 2), bits // u + 3), st.integers(1, 60 // max(u - 1, 1))))
    sb = draw(st.one_of(st.integers(max(1, bits // v - 2), bits // v + 3), st.integers(1, 60 // max(v - 1, 1))))
    variant = draw(st.sampled_from(["horner", "concat-b", "concat-a"]))
    return Plan(p, engine, u, v, sa, sb, 1, variant, (2, 2, 2))


@settings(suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(hand_built_plans(), st.data())
def test_any_plan_that_passes_check_is_exact(pl, data):
    """Hand-built plans (any shifts, any variant): check() passing must mean exact results."""
    try:
        pl.check()
    except ValueError:
        assume(False)
    lam = largest_block(pl)
    pl = dataclasses.replace(pl, block=min(lam, data.draw(st.sampled_from([1, 2, 3, lam]), label="block")))
    pl.check()
    p, h = pl.p, pl.p // 2
    k = data.draw(st.sampled_from([1, 2, pl.block, pl.block + 1, 7]) if pl.block < 100 else st.integers(1, 9),
                  label="k")
    x = data.draw(st.sampled_from([h, -h, p - 1, (p - 1) // 2, 1]), label="x")
    y = data.draw(st.sampled_from([h, -h, p - 1, (p - 1) // 2, 1]), label="y")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    A = np.concatenate([np.full((1, k), x), rng.integers(-h, h + 1, (2, k))])
    B = np.concatenate([np.full((k, 1), y), rng.integers(-h, h + 1, (k, 2))], axis=1)
    assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)


@pytest.mark.parametrize("p, u, v, sa, sb", [
    (509, 2, 1, 45, 1), (509, 1, 2, 1, 45), (3, 2, 1, 45, 1), (3, 3, 1, 29, 1), (4093, 3, 1, 29, 1),
])
@pytest.mark.parametrize("variant", ["horner", "concat-b", "concat-a"])
def test_hand_built_plans_with_wide_shifts(p, u, v, sa, sb, variant, rng):
    """Words far wider than p: the accumulator is scaled by 2**29 .. 2**45 between groups."""
    pl = Plan(p, "fp64", u, v, sa, sb, 1, variant, (2, 2, 2))
    pl.check()
    assert max(pl.scale_steps) >= 29
    lam = largest_block(pl)
    h = p // 2
    for block in sorted({1, 2, min(lam, 3)}):
        run = dataclasses.replace(pl, block=block)
        run.check()
        for k in (1, block, block + 1, 3 * block + 1):
            A = np.concatenate([np.full((1, k), h), np.full((1, k), -h), rng.integers(-h, h + 1, (2, k))])
            B = np.concatenate([np.full((k, 1), h), np.full((k, 1), p - 1), rng.integers(0, p, (k, 2))], axis=1)
            assert_exact(modlin.matmul(A, B, p, plan=run), A, B, p)


def test_check_refuses_scaling_beyond_the_reduction():
    pl = Plan(509, "fp64", 2, 1, 58, 1, 1, "horner", (2, 2, 2))
    with pytest.raises(ValueError, match="scales the accumulator by too many bits"):
        pl.check()


@pytest.mark.skipif("int8" not in ENGINES, reason="no int8 engine in this version")
def test_check_refuses_int8_plans_whose_words_do_not_fit():
    p = 65521
    pl = Plan(p, "int8", 1, 1, 16, 16, 1, "horner", (1, 2, 1))
    A = np.array([[p // 2, 3]])
    B = np.array([[p // 2], [5]])
    try:
        pl.check()
    except ValueError:
        return  # refused: fine
    assert_exact(modlin.matmul(A, B, p, plan=pl), A, B, p)  # or else it must be exact


# ---------------------------------------------------------------- the guide's limit tables



def _guide_rows():
    return matmul_limit_rows()


def _admits(p: int, engine: str, words, lam: int) -> bool:
    """Whether every GEMM of the (u,v)-product modulo ``p`` spans ``lam`` columns: the shortest
    block, ``L // (max a_i * max b_j)``, which is the same for every variant."""
    try:
        pl = modlin.plan(p, 1, 1, 1, engine=engine, words=words, variant="horner")
    except ValueError:
        return False
    return min(pl.blocks().values()) >= lam


def test_guide_tables_were_found():
    rows = _guide_rows()
    assert {e for e, *_ in rows} == {"fp64", "fp32"} and len(rows) == 14


@pytest.mark.parametrize("engine, words, largest, largest_2048", _guide_rows(),
                         ids=lambda v: str(v).replace(" ", ""))
def test_guide_limits_are_the_planners(engine, words, largest, largest_2048):
    """Each entry is sharp: admitted, and the next modulus is not (or is past the engine's
    cap). The shortest block never grows with p (the largest word never shrinks, though the
    word base, and so the other words' bounds, change with p), so a sharp step is the only
    one; the windows below check that too, near each boundary."""
    cap = min(ENGINES[engine].max_modulus, modlin.MAX_MODULUS - 1)
    for value, lam in ((largest, 1), (largest_2048, 2048)):
        assert all(_admits(q, engine, words, lam) for q in range(value - 40, value + 1))
        assert value == cap or not any(_admits(q, engine, words, lam) for q in range(value + 1, value + 41))
        v, u = words  # the transposed shape admits the same moduli
        assert _admits(value, engine, (v, u), lam) and (value == cap or not _admits(value + 1, engine, (v, u), lam))


@pytest.mark.parametrize("p, words", [(2**23, (2, 2)), (2**23, (2, 3)), (2**23, (3, 3)), (2**23 - 1, (2, 2)),
                                      (1458889, (1, 4)), (1458888, (1, 4)), (8191, (1, 1))])
def test_fp32_at_its_largest_moduli_is_exact(p, words, rng):
    """Products at the largest moduli the fp32 engine admits, with the worst-case entries
    (all p - 1 and balanced extremes) and k past one and several blocks."""
    pl = modlin.plan(p, 4, 64, 4, engine="fp32", words=words)
    for k in sorted({1, pl.block, pl.block + 1, 3 * pl.block + 2}):
        for A, B in ((np.full((3, k), p - 1), np.full((k, 2), p - 1)),
                     (np.full((3, k), p // 2), np.full((k, 2), -(p // 2))),
                     (rng.integers(0, p, (3, k)), rng.integers(0, p, (k, 2)))):
            for variant in ("horner", "concat-b") if words[1] > 1 else ("horner",):
                plk = modlin.plan(p, 3, k, 2, engine="fp32", words=words, variant=variant)
                assert_exact(modlin.matmul(A, B, p, plan=plk), A, B, p)
