"""The planner's front door: :func:`plan` chooses between a multiword plan
(:mod:`modlin._planning.plan`) and a residue number system (:mod:`modlin._planning.rnsplan`).

It sits above both so that neither plan module needs the other's chooser:
``_plan`` (multiword plans) < ``_rnsplan`` (RNS plans, whose moduli' products are
multiword plans) < this module.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from functools import lru_cache
from typing import Literal

from modlin._arith.moduli import check_modulus
from modlin._engines.gemm import get_engine, relative_cost
from modlin._planning.plan import MAX_MODULUS, Plan, Variant, best_plan, empty_product, pass_scale
from modlin._planning.rnsplan import RNSPlan, as_moduli, rns_plan
from modlin._runtime.calibration import FRESH_BYTE, POOL_SHARE
from modlin._runtime.limits import current as current_limits, planning_threads


def plan(
    p: int,
    m: int,
    k: int,
    n: int,
    *,
    engine: str | None = None,
    algorithm: Literal["auto", "multiword", "rns"] = "auto",
    words: tuple[int, int] | None = None,
    variant: Variant | None = None,
    moduli=None,
    device: str = "cpu",
    threads: int | None = None,
) -> Plan | RNSPlan:
    """Choose how to compute an ``m x k`` by ``k x n`` product modulo ``p``.

    Two algorithms compete, both exact by construction: **multiword**
    products (``p < 2**52``; a :class:`Plan`: engine, word counts ``(u, v)``,
    block size and variant) and a **residue number system** (any ``p``; an
    :class:`RNSPlan`: the integer product of the balanced operands modulo
    several small moduli, then CRT). The plan with the lowest modelled cost is
    returned; keyword arguments restrict the choice.

    Parameters
    ----------
    p : int
        Modulus, ``p >= 2``, prime or composite.
    m, k, n : int
        Shape of the product.
    engine : {"fp64", "fp32", "int8"}, optional
        Restrict to one GEMM engine. Without it the planner weighs the
        automatic engines (fp64 and fp32 on the CPU).
    algorithm : {"auto", "multiword", "rns"}, optional
        Restrict to one algorithm.
    words : tuple of int, optional
        Restrict to multiword plans with these ``(u, v)``.
    variant : {"horner", "concat-b", "concat-a"}, optional
        Restrict to multiword plans of this variant.
    moduli : sequence of int, optional
        Use a residue number system with these pairwise-coprime moduli
        (each below ``2**26``).
    device : {"cpu", "cuda"}
        Where the product will run. On ``"cuda"`` (CuPy arrays) the planner
        weighs the GPU's engines, fp64 (DGEMM) and int8 (tensor cores, many
        times the fp64 throughput), and residue number systems use int8 moduli.
    threads : int, optional
        The cores the product will run on (default: :func:`modlin.limits`'
        threads). The GEMMs scale with the cores and the element-wise passes
        with the memory bandwidth, which grows more slowly, so on many cores
        the cost model weighs passes more and may prefer plans with fewer of
        them (see "Large problems" in the guide).

    Returns
    -------
    Plan or RNSPlan
        For an empty product (``m = 0`` or ``n = 0``), whose cost is 0 as
        nothing of it runs, the plan chosen for one row or column.

    Raises
    ------
    ValueError
        If ``p < 2``, or no plan matches the restrictions (for example
        ``algorithm="multiword"`` with ``p >= 2**52``, or moduli whose product
        is too small).

    Examples
    --------
    >>> import modlin
    >>> pl = modlin.plan(1000003, 512, 512, 512)
    >>> pl.engine, pl.u, pl.v
    ('fp64', 1, 1)
    >>> type(modlin.plan(2**61 - 1, 512, 512, 512)).__name__
    'RNSPlan'
    >>> modlin.plan(2**31 - 1, 8192, 8192, 8192, device="cuda").engine  # tensor cores win
    'int8'
    """
    p = check_modulus(p)
    for name, val in (("m", m), ("k", k), ("n", n)):
        if not isinstance(val, numbers.Integral) or isinstance(val, bool) or val < 0:
            raise ValueError(f"{name} must be a non-negative int, got {val!r}")
    m, k, n = int(m), int(k), int(n)
    if empty_product((m, k, n)):
        # nothing of an empty product runs, so every plan costs 0 and the ranking would be
        # arbitrary (17 moduli of 8 bits where 5 of 25 serve): rank as for one row or
        # column, which gives the plan a user reusing it (plan= takes any m and n) wants
        pl = plan(p, max(m, 1), k, max(n, 1), engine=engine, algorithm=algorithm, words=words, variant=variant,
                  moduli=moduli, device=device, threads=threads)
        return replace(pl, shape=(m, k, n))
    threads = planning_threads(threads)
    if engine is not None:
        get_engine(engine)
        relative_cost(engine, device)  # refuses a device without this engine
    if algorithm not in ("auto", "multiword", "rns"):
        raise ValueError(f"algorithm must be 'auto', 'multiword' or 'rns', got {algorithm!r}")
    multiword_only = words is not None or variant is not None
    if moduli is not None and (algorithm == "multiword" or multiword_only):
        raise ValueError("moduli= selects a residue number system; it cannot be combined with "
                         "algorithm='multiword', words= or variant=")
    if multiword_only and algorithm == "rns":
        raise ValueError("words= and variant= describe multiword plans, not algorithm='rns'")
    if algorithm == "multiword" or multiword_only:
        if p >= MAX_MODULUS:
            raise ValueError(
                f"multiword products take moduli below 2**52; p = {p} has {p.bit_length()} bits: "
                "use algorithm='rns' (or 'auto')"
            )
        return best_plan(p, m, k, n, engine, None if words is None else tuple(words), variant, device, threads)
    if device == "cuda" and engine not in (None, "int8") and algorithm == "auto" and moduli is None \
            and p < MAX_MODULUS:
        return best_plan(p, m, k, n, engine, None, None, device, threads)  # GPU RNS plans are int8 ones
    rns = rns_plan(p, k * (p // 2) ** 2, (m, k, n), engine=engine,
                   moduli=None if moduli is None else as_moduli(moduli), device=device, threads=threads)
    if algorithm == "rns" or moduli is not None or p >= MAX_MODULUS:
        return rns
    try:
        multi = best_plan(p, m, k, n, engine, None, None, device, threads)
    except ValueError:
        return rns
    return multi if call_cost(multi, threads) <= call_cost(rns, threads) else rns


def call_cost(pl: Plan | RNSPlan, threads: int | None = None) -> float:
    """What :func:`plan` weighs the multiword against the residue plan by: the plan's
    :meth:`~Plan.cost`, plus the working memory of one of its tiles that the scratch pool
    (:data:`modlin._runtime.scratch.POOL_SHARE` of the budget) cannot hand back from the call before,
    mapped afresh on every call (:data:`FRESH_BYTE`; CuPy's pool keeps all of it).

    A residue plan's workspace (residues of both operands and a product per modulus) is
    often the larger: at ``n = 4096`` and 50 bits it was 2.5 GiB against the words' 1.1,
    and ran at 8.7-9.5 GEMM times where the (2,3) words ran at 7.05 (medians of four
    interleaved runs), while their costs alone were 5.96 and 6.08. Its int32 products
    (:meth:`~modlin.RNSPlan.schedule`) now keep it at 1.2 GiB, and it is chosen there.
    The scratch pool keeps more while products follow one another (the whole budget,
    :data:`modlin._runtime.scratch.POOL_DECAY`); a quarter is what a call after other work finds.
    """
    threads = planning_threads(threads)
    cost = pl.cost(threads=threads)
    if pl.device != "cpu":
        return cost
    limits = current_limits()
    return cost + FRESH_BYTE * _fresh_bytes(pl, limits.memory, limits.threads) * pass_scale(threads)


@lru_cache(maxsize=1024)
def _fresh_bytes(pl: Plan | RNSPlan, budget: int, tiling_threads: int) -> float:
    """The bytes of a tile's workspace beyond the pool's share of ``budget`` (cached: every
    product below ``2**52`` plans through :func:`call_cost`, and a tiling costs 30 us;
    ``tiling_threads``, the cores the tiling's costs are weighed for, is part of the key)."""
    try:
        peak = pl.tiling(budget=budget).peak
    except ValueError:  # not even its smallest tile fits the budget: the other plan, if any
        return math.inf
    return max(0.0, peak - POOL_SHARE * budget)
