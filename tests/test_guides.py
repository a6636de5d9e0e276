"""Claims of the guides (docs/guide/*.rst) that prose states and doctests do not run.

The pages' code blocks are doctested (``--doctest-glob=*.rst``); these tests pin the
statements around them that were once false (issue 43 §3 and the review that followed it):
each evaluates the claim with the library, so that the page and the code cannot drift
apart again unnoticed. Planner figures are the cost model's on 2 cores under a 4 GiB
budget, the setting the guides quote them for (``explain()`` says "on 2 cores").
"""

from __future__ import annotations

import math
import pathlib
import random
import sys
import threading
import types

import numpy as np
import pytest

import modlin
from conftest import matmul_limit_rows
from modlin import linalg

GUIDE = pathlib.Path(__file__).parent.parent / "docs" / "guide"


def _doc_model():
    """The guides' modelled figures are for 2 cores and a 4 GiB budget."""
    return modlin.limits(memory="4GiB", threads=2)


def _relative(pl) -> float:
    """What :func:`modlin.plan` weighs a plan by (its cost and the memory it maps afresh),
    in units of one float64 GEMM of the plan's shape."""
    from modlin._planning.plan import gemm_model_cost
    from modlin._planning.planner import call_cost

    return call_cost(pl) / gemm_model_cost(*pl.shape)


# ------------------------------------------------------ matmul.rst: the limit tables

def _table_rows():
    return matmul_limit_rows()


def _shortest_block(p: int, engine: str, words) -> int:
    """The shortest block among the GEMMs of the planner's ``words`` product modulo ``p``
    (the pair of the largest words), 0 when the planner admits no such product."""
    try:
        pl = modlin.plan(p, 1, 1, 1, engine=engine, words=words, variant="horner")
    except ValueError:
        return 0
    return min(pl.blocks().values())


def test_matmul_tables_were_found():
    rows = _table_rows()
    assert {e for e, *_ in rows} == {"fp64", "fp32"} and len(rows) == 14


@pytest.mark.parametrize("engine, words, largest, largest_2048", _table_rows(), ids=lambda v: str(v).replace(" ", ""))
def test_matmul_table_columns_are_thresholds(engine, words, largest, largest_2048):
    """The page: "every modulus up to the value has the property (admitted; every block at
    least 2048) and the next one up lacks it", unless the value is the engine's cap. The
    2048 column once counted the block the planner's default variant reported for a 1x1x1
    product, which is the longest one: fp32 (2,2) printed 33023, where the GEMM of the
    two top words spans only 1024 columns, and a Horner plan of (1,2) modulo 536870914,
    past the fp64 value, still had Plan.block = 4095."""
    from modlin._engines.gemm import ENGINES

    cap = min(ENGINES[engine].max_modulus, modlin.MAX_MODULUS - 1)
    rng = random.Random(f"{engine}{words}")
    for value, lam in ((largest, 1), (largest_2048, 2048)):
        assert value <= cap
        below = set(range(max(2, value - 40), value + 1))
        below |= {max(2, int(2 ** rng.uniform(1, math.log2(value)))) for _ in range(25)}
        assert all(_shortest_block(q, engine, words) >= lam for q in below), (value, lam)
        if value < cap:
            assert not any(_shortest_block(q, engine, words) >= lam for q in range(value + 1, value + 41))
        v, u = words  # "(v,u) admits exactly the moduli (u,v) does"
        assert _shortest_block(value, engine, (v, u)) >= lam
        assert value == cap or _shortest_block(value + 1, engine, (v, u)) < lam
    # the shortest block is the same whichever variant runs the product
    for variant in ("concat-b", "concat-a"):
        try:
            pl = modlin.plan(largest_2048, 1, 1, 1, engine=engine, words=words, variant=variant)
        except ValueError:  # no such variant for these words
            continue
        assert min(pl.blocks().values()) == _shortest_block(largest_2048, engine, words)


def test_the_largest_word_never_shrinks_as_p_grows():
    """Why the columns are thresholds: the planner's word base minimises the largest word,
    and that minimum is non-decreasing in p, though the base itself changes with p (the
    old text claimed every word bound was; the low words are not, across a base change)."""
    from modlin._arith.modular import word_bounds
    from modlin._planning.plan import _best_shift

    rng = random.Random(0)
    ps = {q for j in range(2, 53) for q in range(2**j - 8, 2**j + 9)}
    ps |= {int(2 ** rng.uniform(1, 52)) for _ in range(2000)}
    ps = sorted(q for q in ps if 2 <= q < 2**52)
    for u in (1, 2, 3, 4):
        largest = [max(word_bounds(q // 2, _best_shift(q // 2, u), u)) for q in ps]
        assert all(a <= b for a, b in zip(largest, largest[1:])), u
        shifts = {_best_shift(q // 2, u) for q in ps}
        assert u == 1 or len(shifts) > 1  # the base does change with p
    for q in (536870913, 536870914, 2**40 - 87):  # and it is the planner's base
        pl = modlin.plan(q, 1, 1, 1, engine="fp64", words=(2, 3))
        assert (pl.a_shift, pl.b_shift) == (_best_shift(q // 2, 2), _best_shift(q // 2, 3))


def test_admission_is_the_shortest_block():
    """"Admission also needs 2 * c_max <= L, which every modulus up to the engine's cap
    satisfies": a product is admitted exactly when its shortest block is at least 1."""
    from modlin._engines.gemm import ENGINES
    from modlin._planning.plan import Plan, _best_shift, _lambdas

    rng = random.Random(1)
    for engine in ("fp64", "fp32"):
        cap = min(ENGINES[engine].max_modulus, modlin.MAX_MODULUS - 1)
        for u, v in ((1, 1), (1, 2), (2, 1), (1, 3), (2, 2), (1, 4), (2, 3), (3, 3)):
            for _ in range(40):
                p = max(2, int(2 ** rng.uniform(1, math.log2(cap))))
                h = p // 2
                pl = Plan(p, engine, u, v, _best_shift(h, u), _best_shift(h, v), 1, "horner", (1, 1, 1))
                lam = min(x for x, _, _ in _lambdas(pl).values())
                assert (_shortest_block(p, engine, (u, v)) >= 1) == (lam >= 1), (engine, u, v, p)


# ------------------------------------------------------ matmul.rst: Limits

def test_products_run_on_worker_threads_each_with_one_blas_thread(monkeypatch):
    """Limits once said "CPU and NumPy only ... single-threaded numba kernels": a product
    on limits().threads = 2 runs its slabs on two threads, BLAS held to one thread in each;
    with threads=1 it stays on the calling thread."""
    from threadpoolctl import threadpool_info

    from modlin._engines import threads as _threads

    seen = []
    inside = _threads._inside

    def spy(fn, item):
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        seen.append((threading.get_ident(), blas))
        return inside(fn, item)

    monkeypatch.setattr(_threads, "_inside", spy)
    p = 2**31 - 1
    rng = np.random.default_rng(0)
    A, B = rng.integers(0, p, (512, 512)), rng.integers(0, p, (512, 512))  # 2**27 multiply-adds
    with modlin.limits(threads=2):
        C = modlin.matmul(A, B, p)
    assert len({ident for ident, _ in seen}) == 2
    assert all(n == 1 for _, blas in seen for n in blas)
    seen.clear()
    with modlin.limits(threads=1):
        assert np.array_equal(modlin.matmul(A, B, p), C)
    assert not seen


def test_cupy_and_dask_operands_are_taken(monkeypatch):
    """Not "NumPy only": CuPy arrays are recognised (mixing them with NumPy is the
    TypeError the page names; the CuPy paths themselves run in test_gpu_paths), products
    are planned for the GPU, and dask arrays give a lazy dask array."""

    class FakeCupyArray(np.ndarray):
        pass

    cupy = types.ModuleType("cupy")
    cupy.ndarray = FakeCupyArray
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    A = np.eye(3, dtype=np.int64)
    with pytest.raises(TypeError, match="mix NumPy and CuPy"):
        modlin.matmul(A.view(FakeCupyArray), A, 7)
    pl = modlin.plan(2**31 - 1, 4096, 4096, 4096, device="cuda")
    assert (type(pl).__name__, pl.engine, pl.device) == ("RNSPlan", "int8", "cuda")
    da = pytest.importorskip("dask.array")
    C = modlin.matmul(da.from_array(A, chunks=2), A, 7)
    assert isinstance(C, da.Array) and np.array_equal(C.compute(), A)


def test_default_threads_are_at_most_the_cores_the_process_may_use(monkeypatch):
    """large.rst and matmul.rst: the default is BLAS' thread count "but no more than the
    cores the process may run on" (affinity, container quota), not BLAS' count alone."""
    from modlin._runtime import limits as _limits

    monkeypatch.delenv("MODLIN_THREADS", raising=False)
    monkeypatch.setattr(_limits, "blas_threads", lambda: 8)
    monkeypatch.setattr(_limits, "available_cpus", lambda: 3)
    assert _limits._from_environment().threads == 3
    monkeypatch.setattr(_limits, "available_cpus", lambda: 16)
    assert _limits._from_environment().threads == 8


# ------------------------------------------------------ matmul.rst / rns.rst: the cost model

def _prime_below(bits: int) -> int:
    from modlin._arith.primes import prev_prime

    return prev_prime(2**bits - 1)


def test_residue_plans_weighed_in_the_matmul_guide():
    """matmul.rst: the RNS plans beside the 2048**3 table "at 31 bits ... four moduli
    (modelled at 5.00 DGEMMs ... against 2.36 for (1,2)), and even at 50 and 52 bits its
    five moduli are modelled at 6.37 and 6.68 against 6.15 for (2,3)" (once 5.06, 6.58
    and 6.89), and about 34 for the thin product."""
    with _doc_model():
        for bits, moduli, rns, multi in ((31, 4, 5.00, 2.36), (50, 5, 6.37, 6.15), (52, 5, 6.68, 6.15)):
            p = _prime_below(bits)
            r = modlin.plan(p, 2048, 2048, 2048, algorithm="rns")
            w = modlin.plan(p, 2048, 2048, 2048, algorithm="multiword")
            assert len(r.moduli) == moduli and round(_relative(r), 2) == rns, bits
            assert round(_relative(w), 2) == multi and isinstance(modlin.plan(p, 2048, 2048, 2048), modlin.Plan)
            thin = modlin.plan(p, 2048, 2048, 16, algorithm="rns")
            assert bits == 31 or round(_relative(thin)) == 34


def test_where_the_planner_picks_a_residue_number_system_below_2_52():
    """rns.rst: never at 2048**3 (the model puts multiword 1 to 9 % ahead for 48 to 52
    bits), at 4096**3 for 48 to 50 bits (the page said 48 only, and that 50 bits went to
    the (2,3) words), at 8192**3 for 48 to 51 bits by up to 9 % (it said 12 %); thin
    products stay multiword; "(2,3) at 6.15 and the RNS at 6.37" at 50 bits (once 6.58)."""
    picks = {}
    with _doc_model():
        for n in (2048, 4096, 8192):
            for bits in range(47, 53):
                p = _prime_below(bits)
                r = _relative(modlin.plan(p, n, n, n, algorithm="rns"))
                w = _relative(modlin.plan(p, n, n, n, algorithm="multiword"))
                picks[n, bits] = (isinstance(modlin.plan(p, n, n, n), modlin.RNSPlan), r / w - 1)
        for bits in range(48, 53):
            assert not picks[2048, bits][0] and 0.01 <= picks[2048, bits][1] <= 0.09, (bits, picks[2048, bits])
        assert [b for b in range(47, 53) if picks[4096, b][0]] == [48, 49, 50]
        assert [b for b in range(47, 53) if picks[8192, b][0]] == [48, 49, 50, 51]
        assert -0.095 < min(picks[8192, b][1] for b in range(48, 52)) < -0.085
        p = 2**50 - 27
        assert round(_relative(modlin.plan(p, 2048, 2048, 2048, algorithm="rns")), 2) == 6.37
        for bits in range(8, 53, 4):
            assert isinstance(modlin.plan(_prime_below(bits), 2048, 2048, 16), modlin.Plan), bits


def test_rns_planner_tries_sizes_from_8_to_26_bits(monkeypatch):
    """rns.rst: "tries every size from 8 to 26 bits in half-bit steps" (it said 25: the
    largest primes below 2**26 are tried too, up to MAX_RNS_MODULUS)."""
    from modlin._planning import rnsplan as _rnsplan

    halves = set()
    moduli = _rnsplan._engine_moduli

    def spy(engine, h, bound):
        halves.add(h)
        return moduli(engine, h, bound)

    monkeypatch.setattr(_rnsplan, "_engine_moduli", spy)
    _rnsplan.choose_moduli(2**130, (1000, 1000, 1000), "fp64", threads=2)
    assert sorted(halves) == list(range(16, 53))  # 8, 8.5, ..., 26 bits


def test_intmul_takes_entries_of_32768_bits_of_twos_complement():
    """rns.rst: entries "must lie in [-2**32767, 2**32767)" (it said below 2**32767 in
    magnitude, which -2**32767 is not, and it is taken). The ends are taken by the piece
    conversion intmul makes (a whole product of such entries needs ~1500 moduli: slow),
    and the next integers out are refused by intmul itself."""
    from modlin._arith import residues as _residues

    ends = [-(2**32767), 2**32767 - 1]
    pieces, signed = _residues.pieces_of(np.array(ends, dtype=object))
    assert signed and pieces.shape == (_residues.MAX_PIECES, 2)
    values = [sum(int(h) << (16 * j) for j, h in enumerate(col)) for col in pieces.T]
    assert [v - (1 << 32768) if v >> 32767 else v for v in values] == ends
    for x in (2**32767, -(2**32767) - 1):
        with pytest.raises(ValueError, match=r"32768 bits in two's complement \(outside \[-2\*\*32767, 2\*\*32767\)\)"):
            modlin.intmul(np.array([[x]], dtype=object), np.array([[1]], dtype=object))


# ------------------------------------------------------ large.rst

def test_pass_scale_is_flat_in_bandwidth_not_in_scale_beyond_64_cores():
    """"0.89 on one core, 1.33 on 16, 2.67 on 64 ...; beyond 64 cores the bandwidth stays
    at 300 GB/s, so the scale grows with c there: 5.33 on 128" (it said the scale was flat)."""
    from modlin._planning.plan import pass_scale
    from modlin._runtime.calibration import BANDWIDTH

    assert BANDWIDTH[-1] == (64, 300.0)
    assert [round(pass_scale(c), 2) for c in (1, 16, 64, 128)] == [0.89, 1.33, 2.67, 5.33]


def test_non_gemm_share_table():
    """The table of ``8 P c F / (n BW(c))`` for the 31-bit (1,2) plan at n = 4096: P = 23
    passes (24 GEMMs), F = 69 GFLOP/s, the bandwidths of modlin._planning.plan.BANDWIDTH; the
    one-thread column is c times the one-core share (it read 0.45 and 3.6 for 0.44, 3.5)."""
    from modlin._runtime.calibration import BANDWIDTH

    with _doc_model():
        pl = modlin.plan(2**31 - 1, 4096, 4096, 4096)
    passes = sum(op[0] != "gemm" for op in pl.schedule())
    assert (pl.gemm_count(), passes) == (24, 23)
    bw = dict(BANDWIDTH)

    def share(c, bandwidth):
        return 8 * passes * c * 69e9 / (4096 * bandwidth * 1e9)

    assert [round(share(c, bw[c]), 2) for c in (1, 2, 16, 64)] == [0.22, 0.25, 0.33, 0.66]
    one = [share(c, bw[1]) for c in (1, 2, 16, 64)]
    assert [round(one[0], 2), round(one[1], 2), round(one[2], 1), round(one[3])] == [0.22, 0.44, 3.5, 14]


def test_the_cores_change_the_50_bit_choice():
    """"a 50-bit product at n = 8192 goes through five residues (modelled 5.65 ... against
    6.09 for the words) but, on 64 cores, through the (2,3) words (6.23 there, against
    6.56 for the residues)" (once 5.73, 6.13, 6.27 and 6.73)."""
    p = 2**50 - 27
    n = 8192
    for threads, choice, rns, words in ((2, modlin.RNSPlan, 5.65, 6.09), (64, modlin.Plan, 6.56, 6.23)):
        with modlin.limits(memory="4GiB", threads=threads):
            assert isinstance(modlin.plan(p, n, n, n), choice)
            r = modlin.plan(p, n, n, n, algorithm="rns")
            w = modlin.plan(p, n, n, n, algorithm="multiword")
            assert (len(r.moduli), (w.u, w.v)) == (5, (2, 3))
            assert (round(_relative(r), 2), round(_relative(w), 2)) == (rns, words), threads


def test_the_gpu_budget_keeps_a_tenth_or_64_mib():
    """large.rst: the device budget is the free memory "less a tenth of that or 64 MiB,
    whichever is more" (it said less a tenth)."""
    from modlin._planning.tiling import device_budget
    from modlin._runtime.calibration import GPU_RESERVE

    assert GPU_RESERVE == 64 * 2**20
    assert device_budget(300 * 2**20) == 236 * 2**20
    assert device_budget(10 * 2**30) == 9 * 2**30


# ------------------------------------------------------ linalg.rst

N_PSEUDO = 3825123056546413051  # 149491 * 747451 * 34233211


def _strong_probable_prime(n: int, a: int) -> bool:
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    x = pow(a, d, n)
    if x in (1, n - 1):
        return True
    for _ in range(s - 1):
        x = x * x % n
        if x == n - 1:
            return True
    return False


def test_linalg_decides_primality_itself():
    """linalg.rst once said "Primality is decided by galois.is_prime", which takes
    3825123056546413051 for a prime; modlin's own test refuses it, with the page's error."""
    galois = pytest.importorskip("galois")
    assert N_PSEUDO == 149491 * 747451 * 34233211
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    passes = [a for a in bases if _strong_probable_prime(N_PSEUDO, a)]
    assert passes == list(bases[:11])  # "a strong pseudoprime to the bases 2 to 31"
    assert galois.is_prime(N_PSEUDO)  # "that galois.is_prime (galois 0.4) takes for a prime"
    with pytest.raises(ValueError, match=f"^det needs a prime modulus: p = {N_PSEUDO} is not prime"):
        linalg.det(np.eye(2, dtype=int), N_PSEUDO)
    with pytest.raises(ValueError, match="needs a prime modulus"):
        linalg.rank(np.eye(2, dtype=int), N_PSEUDO)


def test_the_primality_test_the_page_describes():
    """"the strong test to the bases 2 to 41 ... exact below 3317044064679887385961981 ...
    and beyond that the Baillie-PSW test"."""
    from modlin._arith import primes as _primes

    assert _primes.DETERMINISTIC_LIMIT == 3317044064679887385961981
    assert _primes._BASES == (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    sieve = np.ones(20000, dtype=bool)
    sieve[:2] = False
    for q in range(2, 142):
        sieve[q * q::q] = False
    assert [_primes.is_prime(q) for q in range(20000)] == sieve.tolist()
    big = 2**89 - 1  # a Mersenne prime above the deterministic limit: Baillie-PSW decides
    assert big > _primes.DETERMINISTIC_LIMIT and _primes.is_prime(big)
    assert not _primes.is_prime(big * (2**61 - 1)) and not _primes.is_prime((2**61 - 1) ** 2)


def test_a_fieldarray_brings_its_field():
    """"A galois FieldArray brings its field, and its order is tested the same way": the
    field of the pseudoprime (made without galois' verification, which would take minutes
    to find a primitive element) is refused as the plain modulus is; a true prime field
    is taken."""
    galois = pytest.importorskip("galois")
    GF = galois.GF(N_PSEUDO, primitive_element=2, verify=False)
    for fn in (linalg.rank, linalg.det, linalg.inv):
        with pytest.raises(ValueError, match=f"p = {N_PSEUDO} is not prime"):
            fn(GF([[1, 2], [3, 4]]))
    assert linalg.rank(galois.GF(2**61 - 1)([[1, 2], [2, 4]])) == 1


def test_charpoly_of_a_stack_of_fieldarrays():
    """linalg.rst: charpoly of a stack is of shape (..., n + 1), and "for FieldArrays an
    object array of galois.Poly of the leading shape"."""
    galois = pytest.importorskip("galois")
    GF = galois.GF(7)
    S = np.array([[[1, 2], [3, 4]], [[2, 0], [0, 3]]])
    assert linalg.charpoly(S, 7).shape == (2, 3)
    c = linalg.charpoly(GF(S))
    assert c.shape == (2,) and c.dtype == object and all(isinstance(f, galois.Poly) for f in c)
    assert c[1] == galois.Poly([1, 2, 6], field=GF)  # (x - 2)(x - 3) = x**2 - 5x + 6


# ------------------------------------------------------ distributed.rst

def test_dask_products_go_through_residues_whenever_the_plan_does(monkeypatch):
    """distributed.rst once said the residue graph was for "p of 52 bits and more": it is
    used whenever the whole product's plan is a residue number system, also below 2**52
    (4096**3 modulo a 48-bit prime), and never for a multiword plan."""
    pytest.importorskip("dask.array")
    import dask.array as da

    from modlin._front import dask as _dask

    pairs = []
    blocked = _dask.blocked_product

    def spy(a, b, pair, *args, **kwargs):
        pairs.append(pair.func.__name__)
        return blocked(a, b, pair, *args, **kwargs)

    monkeypatch.setattr(_dask, "blocked_product", spy)
    with _doc_model():
        for p, n in ((2**48 - 59, 4096), (2**48 - 59, 512), (2**61 - 1, 512)):
            x = da.zeros((n, n), dtype=np.int64, chunks=n // 2)  # lazy: the graph is only built
            modlin.matmul(x, x, p)
            whole = modlin.plan(p, n, n, n)
            assert pairs[-1] == ("_residue_pair" if isinstance(whole, modlin.RNSPlan) else "_mod_pair"), (p, n)
    assert pairs == ["_residue_pair", "_mod_pair", "_residue_pair"]
