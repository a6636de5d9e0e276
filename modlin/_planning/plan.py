"""Planning ``A @ B mod p``: words, block size, variant and engine, from the contract.

A :class:`Plan` is plain data. Everything else about it (word bounds, the block
size's proof, the schedule of GEMMs and element-wise passes, the modelled cost)
is derived from its fields by the functions here, so a plan can be printed,
compared, cached, and handed back to :func:`modlin.matmul` by a user.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterator, Literal

from modlin._arith.modular import Reduction, word_bounds
from modlin._engines.gemm import ENGINES, engines_on, get_engine, relative_cost
from modlin._planning import contract as _contract
from modlin._planning.tiling import Tiling, choose as choose_tiles
from modlin._runtime.calibration import (
    BANDWIDTH,
    CALIBRATION_THREADS,
    GEMM_K_OVERHEAD,
    GEMM_MN_OVERHEAD,
    GPU_PASS_SCALE,
    PASS,
    WORD_PASS,
)
from modlin._runtime.limits import current as current_limits, planning_threads

#: The largest modulus multiword products take (exclusive): Alg 2.1 needs p < 2**(t-1).
#: Larger moduli go through a residue number system.
MAX_MODULUS = 2**52


Variant = Literal["horner", "concat-b", "concat-a"]


def pass_scale(threads: int | None = None) -> float:
    """How many times dearer an element-wise pass is, in units of GEMM time, on ``threads``
    cores (default: :func:`modlin.limits`' threads) than on the machine the cost model was
    measured on: the GEMMs are compute-bound and scale with the cores ``c``, the passes are
    memory-bound and scale with the bandwidth ``BW(c)`` (:data:`BANDWIDTH`), so a pass costs
    ``c / BW(c)`` GEMM multiply-adds per byte, relative to the calibration's.

    >>> from modlin._planning.plan import pass_scale
    >>> pass_scale(2), round(pass_scale(16), 2), round(pass_scale(64), 2)
    (1.0, 1.33, 2.67)
    """
    c = max(1, current_limits().threads if threads is None else int(threads))
    pts = BANDWIDTH
    if c >= pts[-1][0]:
        bw = pts[-1][1]
    else:
        (c0, b0), (c1, b1) = next((a, b) for a, b in zip(pts, pts[1:]) if c < b[0])
        bw = b0 * (b1 / b0) ** (math.log(c / c0) / math.log(c1 / c0))
    base = dict(pts)[CALIBRATION_THREADS]
    return (c / bw) / (CALIBRATION_THREADS / base)


def device_pass_scale(device: str, threads: int | None = None) -> float:
    """:func:`pass_scale` on the CPU; :data:`GPU_PASS_SCALE` on a GPU, whose cost model
    does not count cores."""
    return pass_scale(threads) if device == "cpu" else GPU_PASS_SCALE


def cost_line(pl) -> str:
    """The ``cost`` line of :meth:`Plan.explain` and :meth:`RNSPlan.explain <modlin.RNSPlan.explain>`."""
    if empty_product(pl.shape):
        return "  cost      : none (the product is empty)"
    where = "model" if pl.device == "cuda" else f"model, on {current_limits().threads} cores"
    return f"  cost      : about {pl.relative_cost():.2f} x one float64 GEMM of the same shape ({where})"


def empty_product(shape: tuple[int, int, int]) -> str | None:
    """What :meth:`Plan.explain` says of a product whose result has no entries (``m = 0``
    or ``n = 0``), or None. :func:`modlin.matmul` returns such a result at once, so the
    plan's GEMMs and passes never run (``k = 0`` is not empty: its result is a zero
    matrix, written by one pass)."""
    m, _, n = shape
    if m and n:
        return None
    zero = " and ".join(f"{name} = 0" for name, size in (("m", m), ("n", n)) if size == 0)
    return f"none: the product is empty ({zero}: the result is {m}x{n}), so no GEMM or element-wise pass runs"


_SHAPES = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 2), (1, 4), (4, 1), (2, 3), (3, 2), (3, 3))


@dataclass(frozen=True)
class Plan:
    """How :func:`modlin.matmul` computes ``A @ B mod p``.

    ``A`` is written as ``u`` balanced words in base ``2**a_shift`` and ``B`` as
    ``v`` words in base ``2**b_shift``; ``C = sum 2**(a_shift*i + b_shift*j) A_i B_j``
    is accumulated by GEMMs on the ``engine`` whose inner dimension between two
    reductions never exceeds ``block`` (the lambda of arXiv 2601.07508).

    Attributes
    ----------
    p : int
        The modulus.
    engine : {"fp64", "fp32", "int8"}
        The GEMM multiplying the words (``"int8"``: int8 words, int32 sums, as
        on GPU tensor cores; emulated exactly on the CPU and chosen only when asked).
    u, v : int
        Number of words of ``A`` and of ``B``.
    a_shift, b_shift : int
        Word bases are ``2**a_shift`` and ``2**b_shift``.
    block : int
        Largest inner dimension of one GEMM (the longest block; each word pair runs
        in blocks of ``min(block, lambda_ij)``, see :meth:`blocks`).
    variant : {"horner", "concat-b", "concat-a"}
        ``"horner"``: in-place products (Alg 3.2), grouping word pairs by their
        power of two and scaling the accumulator between groups. ``"concat-b"`` /
        ``"concat-a"``: one GEMM against the concatenated words of ``B`` (or of
        ``A``) per word of the other operand (Alg 3.3), for thin products.
    shape : tuple of int
        ``(m, k, n)`` the plan was chosen for; it informs the cost model only,
        and the plan runs on any shape.
    device : {"cpu", "cuda"}
        Where the plan runs (NumPy or CuPy arrays): the cost model's engine
        throughputs differ.

    Examples
    --------
    >>> import modlin
    >>> pl = modlin.plan(2**31 - 1, 1024, 1024, 1024)
    >>> (pl.u, pl.v)
    (1, 2)
    >>> pl.block  # the longest k-block of a GEMM (its words' pair: the low word of B)
    512
    >>> pl.blocks()  # each word pair's
    {(0, 0): 512, (0, 1): 256}
    """

    p: int
    engine: str
    u: int
    v: int
    a_shift: int
    b_shift: int
    block: int
    variant: Variant
    shape: tuple[int, int, int]
    device: str = "cpu"

    # ------------------------------------------------------------ derived data
    @property
    def a_bounds(self) -> tuple[int, ...]:
        """Bounds on the magnitudes of the words of ``A``."""
        return word_bounds(self.p // 2, self.a_shift, self.u)

    @property
    def b_bounds(self) -> tuple[int, ...]:
        """Bounds on the magnitudes of the words of ``B``."""
        return word_bounds(self.p // 2, self.b_shift, self.v)

    @property
    def product_bound(self) -> int:
        """Largest ``|a_i| * |b_j|`` over all word pairs."""
        return max(self.a_bounds) * max(self.b_bounds)

    @property
    def scale_steps(self) -> tuple[int, ...]:
        """Powers of two by which an accumulator is scaled between word groups."""
        if self.variant == "horner":
            exps = [e for e, _ in _levels(self)]
            return tuple(sorted({a - b for a, b in zip(exps, exps[1:])}))
        return tuple(sorted({s for s, w in ((self.a_shift, self.u), (self.b_shift, self.v)) if w > 1}))

    @property
    def reductions(self) -> tuple[Reduction, dict[int, Reduction]]:
        """The reduction of anything up to ``2**53`` (a GEMM's output, an accumulator) and
        the scaling reduction for each step, which multiplies what the first one left.
        """
        return _reductions(self.p, self.scale_steps)

    @property
    def c_bound(self) -> int:
        """Bound on a reduced value: a reduced GEMM output, or the accumulator after a scaling."""
        acc, scaled = self.reductions
        return max([acc.r_max] + [r.r_max for r in scaled.values()])

    def blocks(self) -> dict:
        """The block each GEMM of the schedule runs with, by the words it multiplies:
        ``(i, j)`` for Horner, the iterated side's word ``i`` for concatenation.

        Each GEMM writes a fresh array (``c_max = 0`` in the contract), so a word pair
        with smaller words takes a longer block: ``min(block, lambda_ij)`` with
        ``lambda_ij = (L - 0) // (a_i * b_j)``. :attr:`block` is the largest of them.
        """
        return _blocks(self)

    @property
    def summary(self) -> str:
        """One line for tables: engine, words, variant and block."""
        return f"{self.engine} ({self.u},{self.v}) {self.variant}, lambda={min(self.block, 10**9)}"

    def gemm_count(self, k: int | None = None) -> int:
        """GEMM calls the plan makes for inner dimension ``k`` (default: its own), counted by
        :meth:`counts` without listing the schedule: the RNS memory model asks every
        modulus' plan at every group size and tile it weighs."""
        return sum(calls for calls, _, _ in self.counts(k)[0])

    def check(self) -> None:
        """Raise ValueError unless every GEMM of the plan obeys the contract."""
        eng = get_engine(self.engine)
        if not 2 <= self.p < MAX_MODULUS:
            raise ValueError(f"plan modulus {self.p} outside [2, 2**52)")
        if self.variant not in ("horner", "concat-b", "concat-a"):
            raise ValueError(f"unknown plan variant {self.variant!r}")
        if min(self.u, self.v, self.a_shift, self.b_shift, self.block) < 1:
            raise ValueError("plan words, shifts and block must be positive")
        if self.p > eng.max_modulus or not eng.multiword and (self.u, self.v) != (1, 1):
            raise ValueError(
                f"the {eng.name} engine holds residues modulo p <= {eng.max_modulus}"
                + ("" if eng.multiword else " as single words, (u, v) = (1, 1)")
            )
        if self.u > 1 and self.a_shift * (self.u - 1) >= 62 or self.v > 1 and self.b_shift * (self.v - 1) >= 62:
            raise ValueError("plan word shifts exceed the int64 range")
        try:
            c_bound = self.c_bound
        except ValueError as exc:
            raise ValueError(f"plan scales the accumulator by too many bits: {exc}") from None
        lams = _lambdas(self).values()
        low, a, b = min(lams)
        if low < 1:
            raise ValueError(f"plan breaks the exactness contract: 1 * {a} * {b} + 0 > {eng.L_text}; "
                             "no block is exact for these words")
        lam, a, b = _largest(self)
        if self.block > lam:
            raise ValueError(
                f"plan breaks the exactness contract: block {self.block} * {a} * {b} + 0 > {eng.L_text}; "
                f"the largest exact block for these words is {lam}"
            )
        if not _contract.is_exact(1, c_bound, 1, c_bound, eng.L):
            raise ValueError(f"plan's accumulator cannot hold two reduced values (2 * {c_bound} > {eng.L_text})")

    # ---------------------------------------------------------------- schedule
    def schedule(self, k: int | None = None) -> list[tuple]:
        """The operations :func:`modlin.matmul` performs, for inner dimension ``k``.

        Operations: ``("gemm", i, j, k0, k1, dst)`` multiplies word ``i`` of ``A``
        and word ``j`` of ``B`` on ``k0:k1`` into a fresh ``dst`` (``"C"``, ``"T"``, or
        ``"Tcat"``: all words of the concatenated side at once, then ``j`` is
        ``None``); ``("step", g, reduce)`` is one fused element-wise pass
        ``C <- pre(C) + red(T)`` (``S`` for concatenation), where ``pre`` multiplies by
        ``2**g`` (exact modular scaling, after a reduction) or, when ``g = 0``, reduces
        ``C`` if ``reduce`` and leaves it otherwise; ``("combine", j, g)`` is
        ``S <- pre(S) + red(T_j)`` inside a concatenated product; ``("final", src, g,
        reduce)`` is the last such pass (``src``: ``"T"``, ``"S"`` or ``None``), reduced
        into ``[0, p)``. ``red`` is :attr:`reductions`' first, for any GEMM output.
        """
        k = self.shape[1] if k is None else k
        return list(_horner_ops(self, k) if self.variant == "horner" else _concat_ops(self, k))

    def counts(self, k: int | None = None) -> tuple[list[tuple[int, int, int]], int]:
        """``(gemms, passes)`` of :meth:`schedule` without listing it: ``gemms`` holds
        ``(calls, total inner dimension, output width factor)`` per group of GEMMs,
        ``passes`` counts the element-wise passes over an output-sized array."""
        k = self.shape[1] if k is None else k
        if k == 0:
            return [], 1
        blocks = self.blocks()
        if self.variant == "horner":
            gemms = [(sum(-(-k // blocks[ij]) for ij in pairs), len(pairs) * k, 1) for _, pairs in _levels(self)]
            calls = sum(g[0] for g in gemms)
            return gemms, max(calls - 1, 1)  # a pass after each GEMM but the first; one at least
        outer, inner = (self.u, self.v) if self.variant == "concat-b" else (self.v, self.u)
        calls = sum(-(-k // blocks[i]) for i in range(outer))
        return [(calls, outer * k, inner)], calls * inner  # per GEMM: inner - 1 combines and one step

    def gemm_cost(self, shape: tuple[int, int, int] | None = None) -> float:
        """The GEMMs' share of :meth:`cost`: the calls of the schedule, at the engine's speed
        relative to an fp64 GEMM on the plan's device."""
        m, k, n = self.shape if shape is None else shape
        rel = relative_cost(self.engine, self.device)
        gemm = 0.0
        for calls, inner, wide in self.counts(k)[0]:
            mm, nn = (m, n * wide) if self.variant != "concat-a" else (m * wide, n)
            gemm += rel * mm * nn * (inner + GEMM_K_OVERHEAD * calls) * (
                1 + GEMM_MN_OVERHEAD / max(mm, 1) + GEMM_MN_OVERHEAD / max(nn, 1))
        return gemm

    def cost(self, shape: tuple[int, int, int] | None = None, threads: int | None = None) -> float:
        """Modelled time, in multiply-adds of a large fp64 GEMM on ``threads`` cores (default:
        :func:`modlin.limits`' threads; the passes' share grows with them, see :func:`pass_scale`).
        An empty product (``m = 0`` or ``n = 0``) costs 0: nothing of the schedule runs."""
        m, k, n = self.shape if shape is None else shape
        if empty_product((m, k, n)):
            return 0.0  # the words of the other operand would be priced, but are never made
        scale = device_pass_scale(self.device, threads)
        words = WORD_PASS * (self.u * m * k + self.v * k * n)
        gemm = self.gemm_cost((m, k, n))
        _, passes = self.counts(k)
        if self.variant != "horner":
            # beyond the schedule: the concatenated words are copied side by side, and C is
            # zeroed (its first pass adds onto it)
            cat = self.v * k * n if self.variant == "concat-b" else self.u * m * k
            words += WORD_PASS * cat + PASS * m * n
        return gemm + scale * (words + PASS * m * n * passes)

    def relative_cost(self, shape: tuple[int, int, int] | None = None, threads: int | None = None) -> float:
        """Modelled time relative to one float64 GEMM of the same shape (on ``threads`` cores)."""
        m, k, n = self.shape if shape is None else shape
        return self.cost((m, k, n), threads) / max(gemm_model_cost(m, k, n), 1.0)

    def workspace(self, shape: tuple[int, int, int] | None = None) -> int:
        """Bytes the product allocates beyond its operands and result, for ``shape``
        (default: its own); an upper bound, the tile scheduler's model.

        The int64 residues of both operands (copies: tiles are views), the words,
        and the accumulators: for Horner ``C`` (when it cannot live in the output)
        and the workspace ``T`` (whenever more than one GEMM runs); for
        concatenation the concatenated words, their product ``Tcat`` and ``C``.
        """
        m, k, n = self.shape if shape is None else shape
        eng = get_engine(self.engine)
        w, acc = eng.dtype.itemsize, eng.acc_dtype.itemsize
        total = 8 * (m * k + k * n) + w * (self.u * m * k + self.v * k * n)
        if self.variant == "horner":
            return total + acc * m * n * (1 + (self.u * self.v > 1 or k > self.block))
        cat, other = (self.v, n) if self.variant == "concat-b" else (self.u, m)
        return total + w * cat * k * other + acc * m * n * (cat + 1)

    def tiling(self, shape: tuple[int, int, int] | None = None, *, batch: int = 1,
               budget: int | None = None) -> Tiling:
        """How the product of ``shape`` (default: the plan's; ``batch`` matrices at once)
        is cut into tiles within ``budget`` bytes (default: :func:`modlin.limits`')."""
        return plan_tiling(self, self.shape if shape is None else shape, batch, budget)

    def explain(self) -> str:
        """A few lines saying what the plan does and why it is exact."""
        eng = get_engine(self.engine)
        m, k, n = self.shape
        a, b = self.a_bounds, self.b_bounds
        _, wa, wb = _largest(self)
        blocks = self.blocks()
        lines = [
            f"A @ B mod p for p = {self.p} ({self.p.bit_length()} bits), shape {m}x{k} @ {k}x{n}",
            f"  engine    : {eng.name} GEMM{' on the GPU' if self.device == 'cuda' else ''}, "
            f"exact while every partial sum stays within {eng.L_text}",
            f"  words     : ({self.u},{self.v})-product: A as {self.u} word(s) in base 2**{self.a_shift} "
            f"(|a_i| <= {', '.join(map(str, a))}), B as {self.v} word(s) in base 2**{self.b_shift} "
            f"(|b_j| <= {', '.join(map(str, b))})",
            f"  block     : lambda = {self.block}: {self.block} * {wa} * {wb} + 0 <= {eng.L_text} "
            "(k * a_max * b_max + c_max <= L; c_max = 0: each GEMM writes a fresh array, reduced "
            f"to |x| <= {self.reductions[0].r_max} before it is added)",
            f"  variant   : {_VARIANT_TEXT[self.variant]}",
            f"  schedule  : {empty_product(self.shape)}" if empty_product(self.shape) else
            f"  schedule  : {self.gemm_count()} GEMM call(s), "
            f"{sum(1 for op in self.schedule() if op[0] != 'gemm')} element-wise pass(es) for k = {k}",
            cost_line(self),
            f"  tiles     : {self.tiling().describe()}",
        ]
        if self.scale_steps:
            lines.insert(5, f"  scaling   : accumulator multiplied by 2**g, g in {list(self.scale_steps)}, "
                            "then reduced with p split in two halves (exact modular scaling)")
        if len(set(blocks.values())) > 1:
            what = "word pair (i, j)" if self.variant == "horner" else "word"
            lines.insert(4, f"  blocks    : by {what}: " + ", ".join(f"{key}: {blk}" for key, blk in blocks.items())
                         + " (larger words, shorter blocks)")
        return "\n".join(lines)


_VARIANT_TEXT = {
    "horner": "in-place products (arXiv 2601.07508, Alg 3.2): word pairs grouped by power of two, accumulator scaled between groups",
    "concat-b": "concatenated words of B (arXiv 2601.07508, Alg 3.3): one GEMM A_i [B_0 ... B_v-1] per word of A",
    "concat-a": "concatenated words of A (arXiv 2601.07508, Alg 3.3): one GEMM [A_0; ...; A_u-1] B_j per word of B",
}


def plan_tiling(pl, shape: tuple[int, int, int], batch: int, budget: int | None, residues: bool = False,
            convert: tuple[float, float] = (0.0, 0.0), held: int = 0) -> Tiling:
    """:func:`_tiled` under the limits in force (cached: a tiling weighs hundreds of tiles, each
    with its schedule, 0.1 to 0.3 s for a product under a tight budget, every call)."""
    limits = current_limits()
    return _tiled(pl, tuple(shape), batch, limits.memory if budget is None else budget, residues, tuple(convert),
                  held, limits.memory, limits.threads)


@lru_cache(maxsize=256)
def _tiled(pl, shape: tuple[int, int, int], batch: int, budget: int, residues: bool, convert: tuple[float, float],
           held: int, memory: int, threads: int) -> Tiling:
    """:meth:`Plan.tiling` and :meth:`RNSPlan.tiling <modlin.RNSPlan.tiling>`: the output
    of a tile is a view of the result, except the partial products of k-panels, which are
    written apart and then added into it. An RNS tile of k-panels (or of a product whose
    result is its ``residues``) adds each panel's residues into the tile's (int32 per
    modulus) before one CRT; an RNS tile of the whole ``k`` is written apart unless the CRT
    can write it in place (:func:`rns_apart`).

    ``convert``: the modelled cost per entry of converting ``A``'s and ``B``'s entries to
    an RNS' pieces beyond what the plan's cost counts (Python ints: see
    :meth:`RNSPlan.tiling <modlin.RNSPlan.tiling>`). ``A``'s block is converted once for
    the row of tiles that reads it (when ``k`` is whole); ``B``'s once per tile, or, where
    that is cheaper and its pieces fit beside the tiles, once for the whole product and
    kept (``Tiling.kept``, 2-D products only). ``held``: bytes held beside every tile (an RNS
    product's operand pieces made before it, :meth:`RNSPlan.tiling <modlin.RNSPlan.tiling>`).
    ``memory`` and ``threads``: those of :func:`modlin.limits` in force, which the costs and
    schedules read (they key the cache)."""
    rns = not isinstance(pl, Plan)
    m, k, n = shape

    def apart(mt, kt, nt):
        if not rns:
            return batch * 8 * mt * nt if kt < shape[1] else 0
        if kt < shape[1] or residues:
            return batch * (8 + 4 * len(pl.moduli)) * mt * nt
        return rns_apart(pl, shape, (mt, kt, nt), batch)

    def memory(mt, kt, nt, kept=0):
        work = pl.workspace((mt, kt, nt), panels=batch == 1, kept=kept > 0) if rns else pl.workspace((mt, kt, nt))
        return batch * work + apart(mt, kt, nt) + kept + held

    def cost(mt, kt, nt, kept=0):
        a = convert[0] * mt * kt / (max(1, -(-n // nt)) if kt >= k else 1)
        # an RNS tile's residues in as many groups of moduli as its memory allows
        passes = pl.schedule_cost(batch * mt * kt, batch * kt * nt, batch * mt * nt, kt, mt if batch == 1 else 0,
                                  budget - apart(mt, kt, nt) - kept - held, kept > 0) if rns else 0
        return batch * (pl.cost((mt, kt, nt)) + a + (0 if kept else convert[1] * kt * nt)) + passes

    tiling = choose_tiles(shape, memory, budget, cost)
    if not rns:
        return tiling
    kept = pl.entry_bytes() * k * n
    if convert[1] and batch == 1 and tiling.count > 1 and kept < budget:
        try:
            alt = choose_tiles(shape, lambda *t: memory(*t, kept), budget, lambda *t: cost(*t, kept))
        except ValueError:  # B's pieces leave too little for even the smallest tile
            alt = None
        if alt is not None and alt.cost + convert[1] * k * n < tiling.cost:
            tiling = replace(alt, kept=kept)
    # the tile's product takes as many moduli at a time as the budget allows (RNSPlan.schedule)
    mt, kt, nt = tiling.tile
    ea, eb, e = batch * mt * kt, batch * kt * nt, batch * mt * nt
    spare = budget - apart(mt, kt, nt) - tiling.kept - held
    group, panel = pl.schedule(ea, eb, e, kt, mt if batch == 1 else 0, spare, kept=tiling.kept > 0)
    peak = pl._memory(ea, eb, e, kt, group, None if panel is None else panel / mt, tiling.kept > 0)
    return replace(tiling, peak=peak + apart(mt, kt, nt) + tiling.kept + held)


def rns_apart(pl, shape: tuple[int, int, int], tile: tuple[int, int, int], batch: int) -> int:
    """Bytes of an RNS tile of the whole ``k`` written apart from the result: none when the
    host's CRT writes int64 results into the result itself (the tile then is C-contiguous:
    all its columns, and of a stack all its rows too), else the tile's int64 entries."""
    mt, _, nt = tile
    direct = pl.device == "cpu" and pl.p is not None and pl.p < 2**63 and nt >= shape[2] \
        and (batch == 1 or mt >= shape[0])
    return 0 if direct else 8 * batch * mt * nt


def gemm_model_cost(m: int, k: int, n: int) -> float:
    return m * n * (k + GEMM_K_OVERHEAD) * (1 + GEMM_MN_OVERHEAD / max(m, 1) + GEMM_MN_OVERHEAD / max(n, 1))


@lru_cache(maxsize=256)
def _reductions(p: int, steps: tuple[int, ...]) -> tuple[Reduction, dict[int, Reduction]]:
    # GEMM outputs and accumulators never exceed the largest engine limit, 2**53; a
    # scaling multiplies what that reduction leaves (the schedule reduces first)
    acc = Reduction.for_bound(p, max(e.L for e in ENGINES.values()))
    return acc, {g: Reduction.for_bound(p, acc.r_max * 2**g) for g in steps}


@lru_cache(maxsize=1024)
def _lambdas(pl: Plan) -> dict:
    """``(lambda, a_max, b_max)`` of each kind of GEMM the plan makes (keys as :meth:`Plan.blocks`):
    the largest exact inner dimension of a GEMM writing a fresh array, ``c_max = 0``. Cached:
    every product asks, for every modulus of a residue number system (not to be modified)."""
    L = get_engine(pl.engine).L
    a, b = pl.a_bounds, pl.b_bounds
    if pl.variant == "horner":
        pairs = {(i, j): (a[i], b[j]) for i in range(pl.u) for j in range(pl.v)}
    elif pl.variant == "concat-b":
        pairs = {i: (a[i], max(b)) for i in range(pl.u)}
    else:
        pairs = {j: (max(a), b[j]) for j in range(pl.v)}
    return {key: (_contract.max_block(x, y, 0, L), x, y) for key, (x, y) in pairs.items()}


def _largest(pl: Plan) -> tuple[int, int, int]:
    """The longest block of :func:`_lambdas` with its words, among GEMMs whose words do not
    vanish (a word that is always zero, as the top word of tiny moduli can be, takes any
    block and would make the plan's block meaningless)."""
    lams = _lambdas(pl).values()
    return max([lam for lam in lams if lam[1] * lam[2]] or lams)


def _blocks(pl: Plan) -> dict:
    return {key: min(pl.block, lam) for key, (lam, _, _) in _lambdas(pl).items()}


@lru_cache(maxsize=1024)
def _levels(pl: Plan) -> list[tuple[int, list[tuple[int, int]]]]:
    """Word pairs grouped by their power of two, highest first (cached, as :func:`_lambdas`)."""
    groups: dict[int, list[tuple[int, int]]] = {}
    for i in range(pl.u):
        for j in range(pl.v):
            groups.setdefault(pl.a_shift * i + pl.b_shift * j, []).append((i, j))
    return sorted(groups.items(), reverse=True)


def _chunks(k: int, block: int) -> list[tuple[int, int]]:
    """``[0, k)`` in the fewest intervals of width at most ``block``, of equal widths (no
    thin last GEMM, which would cost a whole pass for a few columns)."""
    width = -(-k // -(-k // block))
    return [(k0, min(k0 + width, k)) for k0 in range(0, k, width)]


def _fold(pl: Plan, bound: int, g: int) -> tuple[bool, int]:
    """The pass ``C <- pre(C) + red(T)`` for an accumulator bounded by ``bound``, scaled by
    ``2**g``: whether ``C`` must be reduced first (the sum must stay within the engine's
    exact range), and the bound after the pass."""
    acc, scaled = pl.reductions
    if g:
        return True, scaled[g].r_max + acc.r_max
    reduce = bound + acc.r_max > get_engine(pl.engine).L
    return reduce, (acc.r_max if reduce else bound) + acc.r_max


def _horner_ops(pl: Plan, k: int) -> Iterator[tuple]:
    """Horner over word groups: ``C = ((G_top * 2**g1 + G_next) * 2**g2 + ...)``.

    Every GEMM writes a fresh array (the first ``C``, the others ``T``), each word
    pair in blocks as long as its own words allow (:meth:`Plan.blocks`); after each
    GEMM but the first one pass adds ``T``, reduced, to ``C``, which is reduced itself
    only when the sum could leave the engine's exact range, and multiplied by the
    power of two down to its group when ``T`` is the first of a new group.
    """
    if k == 0:
        yield ("final", None, 0, False)
        return
    levels, blocks = _levels(pl), pl.blocks()
    pieces = [(e, i, j, k0, k1) for e, pairs in levels for i, j in pairs for k0, k1 in _chunks(k, blocks[i, j])]
    e, i, j, k0, k1 = pieces[0]
    yield ("gemm", i, j, k0, k1, "C")
    bound = get_engine(pl.engine).L  # a GEMM's output, not reduced
    for n, (e_next, i, j, k0, k1) in enumerate(pieces[1:], 2):
        yield ("gemm", i, j, k0, k1, "T")
        reduce, after = _fold(pl, bound, e - e_next)
        yield ("final", "T", e - e_next, reduce) if n == len(pieces) else ("step", e - e_next, reduce)
        e, bound = e_next, after
    if len(pieces) == 1:
        yield ("final", None, 0, False)


def _concat_ops(pl: Plan, k: int) -> Iterator[tuple]:
    """Alg 3.3 with the words of B concatenated (``concat-a`` runs it on the transpose).

    For each word ``i`` of A, top first, and each of its k-blocks: ``Tcat = A_i [B_0 ...
    B_{v-1}]``; Horner over ``j`` inside ``Tcat`` (``("combine", j, g)``, one pass each:
    ``S <- 2**g S + T_j``, both reduced) leaves ``S = sum_j 2**(b_shift*j) A_i B_j`` in
    the columns of ``B_{v-1}``, and one pass adds it, reduced, to ``C`` (which starts at
    zero), multiplying ``C`` by ``2**a_shift`` first at the first block of a word.
    """
    if k == 0:
        yield ("final", None, 0, False)
        return
    u, v, sa, sb = (pl.u, pl.v, pl.a_shift, pl.b_shift) if pl.variant == "concat-b" else (
        pl.v, pl.u, pl.b_shift, pl.a_shift)
    blocks = pl.blocks()
    bound = 0
    for i in range(u - 1, -1, -1):
        for n, (k0, k1) in enumerate(_chunks(k, blocks[i])):
            yield ("gemm", i, None, k0, k1, "Tcat")
            for j in range(v - 2, -1, -1):
                yield ("combine", j, sb)
            g = sa if n == 0 and i < u - 1 else 0
            reduce, bound = _fold(pl, bound, g)
            yield ("final", "S", g, reduce) if i == 0 and k1 == k else ("step", g, reduce)


@lru_cache(maxsize=1024)
def _best_shift(h: int, u: int) -> int:
    """The word base exponent that minimises the largest balanced word of ``|x| <= h``."""
    if u == 1:
        return max(h.bit_length(), 1)
    return min(range(1, 60 // (u - 1) + 1), key=lambda s: (max(word_bounds(h, s, u)), s))


def candidates(p: int, shape: tuple[int, int, int], engines: tuple[str, ...] | None = None,
               device: str = "cpu", words: tuple[int, int] | None = None,
               variant: Variant | None = None) -> list[Plan]:
    """Every exact plan for ``p`` that the planner considers, unsorted (only those with
    ``words`` and ``variant`` when given: the residue planner prices hundreds of moduli
    by their (1,1) Horner plans, and building the other candidates cost it most of its time)."""
    out = []
    h = p // 2
    engines = engines_on(device) if engines is None else engines
    for name in engines:
        eng = ENGINES[name]
        if p > eng.max_modulus:
            continue
        for u, v in _SHAPES if eng.multiword else ((1, 1),):
            if words is not None and (u, v) != words:
                continue
            sa, sb = _best_shift(h, u), _best_shift(h, v)
            variants: list[Variant] = ["horner"]
            if v > 1:
                variants.append("concat-b")
            if u > 1:
                variants.append("concat-a")
            for var in variants:
                if variant is not None and var != variant:
                    continue
                pl = Plan(p, name, u, v, sa, sb, 1, var, shape, device)
                try:
                    c_bound = pl.c_bound
                except ValueError:
                    continue
                lams = [lam for lam, _, _ in _lambdas(pl).values()]
                if min(lams) < 1 or not _contract.is_exact(1, c_bound, 1, c_bound, eng.L):
                    continue
                out.append(replace(pl, block=_largest(pl)[0]))
    return out


def best_plan(p: int, m: int, k: int, n: int, engine, words, variant, device: str = "cpu",
               threads: int | None = None) -> Plan:
    """The cheapest exact plan on ``threads`` cores (default: :func:`modlin.limits`' threads)."""
    return _best_plan_on(p, m, k, n, engine, words, variant, device, planning_threads(threads))


@lru_cache(maxsize=512)
def _best_plan_on(p: int, m: int, k: int, n: int, engine, words, variant, device: str, threads: int) -> Plan:
    if engine is not None:
        get_engine(engine)
        relative_cost(engine, device)  # refuses an engine the device lacks
    engines = None if engine is None else (engine,)
    cands = candidates(p, (m, k, n), engines, device, words, variant)
    if not cands:
        raise ValueError(f"no exact plan for p = {p} with engine={engine!r}, words={words!r}, variant={variant!r}: "
                         + _why_no_plan(p, (m, k, n), engines, device, words, variant))
    return min(cands, key=lambda c: (c.cost(threads=threads), c.u * c.v, c.variant != "horner"))


def _why_no_plan(p: int, shape: tuple[int, int, int], engines: tuple[str, ...] | None, device: str,
                 words: tuple[int, int] | None, variant: Variant | None) -> str:
    """Why :func:`candidates` found no plan under these restrictions, engine by engine, and
    what to do: the words that do have an exact plan here, or which restriction to drop.

    A user who asked for ``words=`` needs the contract's numbers to see that more words
    are the way out (a bare "no exact plan" sent them guessing); the bound that fails
    is the same for every variant, ``1 * a_max * b_max + 0 > L`` with the largest words.
    """
    given = {what: x for what, x in (("engine", engines), ("words", words), ("variant", variant)) if x is not None}
    engines = engines_on(device) if engines is None else engines
    if words is not None and words not in _SHAPES:
        return f"words must be one of {', '.join(map(str, _SHAPES))}; or leave words unset to let the planner choose"
    reasons = []
    for name in engines:
        eng = ENGINES[name]
        if p > eng.max_modulus:
            reasons.append(f"the {name} engine holds residues modulo p <= {eng.max_modulus} only")
            continue
        if not eng.multiword and words not in (None, (1, 1)):
            reasons.append(f"the {name} engine multiplies single words only, words=(1, 1)")
            continue
        if words is None:
            reasons.append(f"the {name} engine has no exact plan with any words up to {_SHAPES[-1]}"
                           + ("" if variant is None else f" and variant={variant!r}"))
            continue
        u, v = words
        var = variant or "horner"
        if var == "concat-b" and v == 1 or var == "concat-a" and u == 1:
            side = "B" if var == "concat-b" else "A"
            reasons.append(f"variant={var!r} concatenates the words of {side}, which needs more than one")
            continue
        pl = Plan(p, name, u, v, _best_shift(p // 2, u), _best_shift(p // 2, v), 1, var, shape, device)
        lam, a, b = min(_lambdas(pl).values())
        if lam < 1:
            reasons.append(
                f"the {name} engine breaks the exactness contract k * a_max * b_max + c_max <= L even for "
                f"a block of lambda = 1: A as {u} word(s) in base 2**{pl.a_shift} and B as {v} in base "
                f"2**{pl.b_shift} have words up to a_max = {a} and b_max = {b}, and 1 * {a} * {b} + 0 = "
                f"{a * b} > L = {eng.L_text} (c_max = 0: each GEMM writes a fresh array)")
            continue
        try:
            c_bound = pl.c_bound
        except ValueError as exc:
            reasons.append(f"with the {name} engine the accumulator is scaled by too many bits ({exc})")
            continue
        reasons.append(f"with the {name} engine the accumulator cannot hold two reduced values "
                       f"(2 * {c_bound} > L = {eng.L_text})")
    why = "; ".join(reasons)
    exact = [] if words is None else [
        s for s in _SHAPES if s in {(c.u, c.v) for c in candidates(p, shape, engines, device, None, variant)}]
    if exact:
        more = "more" if all(sum(s) > sum(words) for s in exact) else "other"
        return (f"{why}. Use {more} words, e.g. words={exact[0]} (exact here: {', '.join(map(str, exact))}), "
                "or leave words unset to let the planner choose")
    # other words alone would not help: the fewest restrictions whose removal leaves a plan
    for r in range(1, len(given) + 1):
        for drop in itertools.combinations(given, r):
            kept = {what: None if what in drop else x for what, x in given.items()}
            if candidates(p, shape, kept.get("engine"), device, kept.get("words"), kept.get("variant")):
                return f"{why}. Drop {' and '.join(f'{d}=' for d in drop)} to let the planner choose"
    return f"{why}. Drop the restrictions to let the planner choose"
