"""Planning products through a residue number system (multimodular / CRT).

An :class:`RNSPlan` computes an integer product ``C = A B`` with ``|C| <= bound``
modulo each of its moduli (one multiword :class:`~modlin.Plan` per modulus,
usually a single GEMM) and rebuilds ``C`` -- or ``C mod p`` -- by CRT. The
moduli come from a cost model: small moduli carry fewer bits each but every
modulus costs one product, so the planner weighs the bits per GEMM.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from modlin._arith.crt import crt_scratch, fused_crt
from modlin._arith.moduli import MAX_RNS_MODULUS, Basis, cover_count, int8_moduli, planned_range, primes_below
from modlin._engines.gemm import engines_on, get_engine
from modlin._engines.threads import by_moduli
from modlin._planning.plan import (
    Plan,
    best_plan,
    cost_line,
    device_pass_scale,
    empty_product,
    gemm_model_cost,
    plan_tiling,
)
from modlin._planning.tiling import Tiling
from modlin._runtime.calibration import (
    CALIBRATION_THREADS,
    CRT_SUM,
    FRESH_BYTE,
    GEMM_ROWS,
    GPU_PASS_FACTOR,
    LIFT,
    LIMB,
    MIN_ROWS,
    OBJECT_PIECE,
    PASS,
    POOL_SHARE,
    REREAD,
    RESIDUE,
    RESIDUE_CHUNK,
    WEIGH,
)
from modlin._runtime.limits import current as current_limits, planning_threads


@dataclass(frozen=True)
class RNSPlan:
    """How an integer product, or a product modulo a large ``p``, is computed by CRT.

    Attributes
    ----------
    p : int or None
        The modulus of the result, or None for an exact integer product.
    bound : int
        Proven bound on ``|C|`` for the integer product of the (balanced) operands.
    moduli : tuple of int
        Pairwise-coprime moduli, each below ``2**26``, whose product exceeds ``2*bound + 1``.
    engine : {"fp64", "fp32", "int8"}
        Engine of the products modulo each modulus.
    shape : tuple of int
        ``(m, k, n)`` the plan was chosen for (cost model only).
    device : {"cpu", "cuda"}
        Where the plan runs (NumPy or CuPy arrays).

    Examples
    --------
    >>> import modlin
    >>> pl = modlin.plan(2**127 - 1, 256, 256, 256)
    >>> len(pl.moduli) > 5, pl.engine
    (True, 'fp64')
    """

    p: int | None
    bound: int
    moduli: tuple[int, ...]
    engine: str
    shape: tuple[int, int, int]
    device: str = "cpu"

    @property
    def basis(self) -> Basis:
        """The moduli with their CRT constants (validated: pairwise coprime)."""
        return Basis(self.moduli)

    @property
    def subplans(self) -> tuple[Plan, ...]:
        """The multiword plan of the product modulo each modulus."""
        m, k, n = self.shape
        return tuple(best_plan(q, m, k, n, self.engine, (1, 1), "horner", self.device) for q in self.moduli)

    def check(self) -> None:
        """Raise ValueError unless the moduli recover every ``|C| <= bound`` exactly."""
        basis = self.basis
        if not basis.covers(self.bound):
            raise ValueError(
                f"the moduli's product M has {basis.M.bit_length()} bits, too small for products "
                f"bounded by {self.bound.bit_length()} bits (need M >= 2*bound + 2); add moduli"
            )
        for sub in self.subplans:
            sub.check()

    @property
    def summary(self) -> str:
        """One line for tables: engine and moduli."""
        lo, hi = min(self.moduli), max(self.moduli)
        size = f"{lo}-{hi}" if hi <= 256 else f"{lo.bit_length()}-{hi.bit_length()} bits"
        return f"RNS {self.engine}, {len(self.moduli)} modul{'us' if len(self.moduli) == 1 else 'i'} of {size}"

    def gemm_count(self, k: int | None = None) -> int:
        """GEMM calls over all moduli."""
        return sum(sub.gemm_count(k) for sub in self.subplans)

    def cost(self, shape: tuple[int, int, int] | None = None, threads: int | None = None) -> float:
        """Modelled time in multiply-adds of a large fp64 GEMM on ``threads`` cores (default:
        :func:`modlin.limits`' threads; see :func:`~modlin._planning.plan.pass_scale`). An empty
        product (``m = 0`` or ``n = 0``) costs 0: no residue, GEMM or CRT is computed."""
        m, k, n = self.shape if shape is None else shape
        if empty_product((m, k, n)):
            return 0.0
        N = len(self.moduli)
        sub_scale = device_pass_scale(self.device, threads)  # what the moduli' plans charge a pass
        # the largest modulus has the smallest block: its plan bounds every other's cost
        sub = best_plan(max(self.moduli), m, k, n, self.engine, (1, 1), "horner", self.device, threads)
        if self.device == "cuda":  # the moduli' words and reductions are in the fused kernels' passes
            total = N * sub.gemm_cost((m, k, n))
        else:
            total = N * sub.cost((m, k, n), threads)
        if self.engine == "fp64" and sub.gemm_count(k) == 1 and self.device == "cpu":
            # one exact GEMM per modulus: the CRT reduces its sums, no pass does
            total -= N * PASS * m * n * sub_scale
        t = max(1, current_limits().threads if threads is None else int(threads))
        if self.device == "cpu" and by_moduli(m, N, t):
            # its workers take whole moduli: the slowest one's share counts (11 moduli on 2
            # workers cost what 12 do)
            total *= math.ceil(N / t) * t / N
        if self.device == "cpu" and fused_crt(self.p, N):
            crt = (WEIGH + 2 * CRT_SUM) * N + LIMB  # the fused CRT (the GPU has its own kernel)
        else:
            L = (self.p or self.basis.M * N).bit_length() // 16 + 1  # limbs of the reconstruction
            crt = WEIGH * N + (CRT_SUM * N + LIMB) * L
        passes = (LIFT + RESIDUE * N) * (m * k + k * n) + crt * m * n
        return total + passes * (GPU_PASS_FACTOR if self.device == "cuda" else sub_scale)

    def relative_cost(self, shape: tuple[int, int, int] | None = None, threads: int | None = None) -> float:
        """Modelled time relative to one float64 GEMM of the same shape (on ``threads`` cores)."""
        m, k, n = self.shape if shape is None else shape
        return self.cost((m, k, n), threads) / max(gemm_model_cost(m, k, n), 1.0)

    def entry_bytes(self) -> int:
        """Bytes per operand entry the model assumes for its conversion: its :meth:`pieces`
        and a byte of balancing shift (:meth:`modlin._arith.residues.Pieces16.balance`)."""
        return 2 * self.pieces() + 1

    def pieces(self) -> int:
        """16-bit pieces per operand entry the model assumes: those of a balanced residue
        modulo ``p`` (operands are reduced into ``[-p, p)`` first), at least the four of an
        int64; for an exact product, those of a value whose square reaches the bound."""
        bits = self.p.bit_length() if self.p else (self.bound.bit_length() + 1) // 2 + 1
        return max(4, bits // 16 + 1)

    def workspace(self, shape: tuple[int, int, int] | None = None, *, group: int = 1, panels: bool = True,
                  kept: bool = False) -> int:
        """Bytes :func:`modlin._algorithms.rns.multiply` allocates beyond operands and result for
        ``shape`` (default: its own) with residues of ``group`` moduli at a time, or less
        when its int32 products in panels of rows (see :meth:`schedule`) take less (only for a
        2-D product: ``panels``); an upper bound, the tile scheduler's model. With ``kept``,
        ``B``'s pieces are not counted: a block of those of a whole operand, kept apart."""
        m, k, n = self.shape if shape is None else shape
        need = self._memory(m * k, k * n, m * n, k, group, kept=kept)
        if panels and self._panels():
            need = min(need, self._memory(m * k, k * n, m * n, k, 1, min(1.0, MIN_ROWS / max(m, 1)), kept))
        return need

    def _panels(self) -> bool:
        """Whether products may be kept as int32 residues (the host's CRTs read them; the
        GPU's kernel reads float64 sums)."""
        return self.device == "cpu"

    def _memory(self, ea: int, eb: int, e: int, k: int, group: int, panel: float | None = None,
                kept: bool = False) -> int:
        """:meth:`workspace` for operands of ``ea`` and ``eb`` entries, ``e`` results and
        inner dimension ``k``; with ``panel``, the int32 products made ``panel`` (a fraction)
        of the rows at a time; with ``kept``, without ``B``'s pieces.

        The operands' 16-bit pieces and balancing shifts (or int64 lifts) live throughout; beside them, first
        one operand's balanced lift (int64), then the residues of one group of moduli with
        every modulus' product (and a multiword product's accumulators), then the products
        with the CRT's per-entry arrays and chunk buffers.
        """
        N = len(self.moduli)
        if self.device == "cuda":
            return self._gpu_memory(ea, eb, e, k, N)
        w = get_engine(self.engine).dtype.itemsize
        pieces = self.entry_bytes() * (ea + (0 if kept else eb))
        one_gemm = _one_gemm(self, k)
        pad = 8 * 4160  # padded_rows: each row starts 4 KiB + 64 bytes apart
        if panel is None:
            products = 8 * N * e + pad * N
            multiply = w * group * (ea + eb) + (0 if one_gemm else 16 * e) + pad * 2 * group
        else:  # int32 products; one group's residues, of A a panel's, and one float64 product
            products = 4 * N * e + pad * N
            multiply = w * group * (ea * panel + eb) + 8 * e * panel * (1 if one_gemm else 3) + pad * 2 * group
        # the fused CRT's buffers are a few chunks per worker; the limbs' (crt_scratch) too
        threads = current_limits().threads if self.device == "cpu" else 1
        if self.device == "cpu" and fused_crt(self.p, N):
            fused = 5 * 8 * RESIDUE_CHUNK * threads
        else:
            fused = crt_scratch(N, self.p or self.basis.M, e, threads)
        crt = 18 * e + fused
        return int(pieces + max(8 * max(ea, eb), products + multiply, products + crt))

    @staticmethod
    def _gpu_memory(ea: int, eb: int, e: int, k: int, N: int) -> int:
        """:meth:`_memory` of :func:`modlin._algorithms.gpu.rns_multiply` on a tile: every modulus' int8
        residues of both operands (padded to the GEMM's multiples of 4), the residues of the
        product (one uint8 per modulus and result entry) and the one int32 buffer the GEMMs
        share; a k-panel's int64 sum beside the tile. The operands are read as they are (no
        int64 lifts: the residue kernel reduces modulo ``p`` as it reads)."""
        n = eb // k if k else 0
        m = ea // k if k else 0
        kp, np_ = -(-k // 4) * 4, -(-n // 4) * 4
        residues = N * (m * kp + np_ * kp)
        return int(8 * e + residues + N * e + 4 * m * np_)

    def schedule(self, ea: int, eb: int, e: int, k: int, rows: int, memory: int,
                 kept: bool = False) -> tuple[int, int | None]:
        """:meth:`_schedule`, kept for the limits in force: the search weighs the memory model
        a few dozen times (0.4 ms of a 127-bit product at ``n = 200``, which takes 10)."""
        lim = current_limits()
        return _schedule(self, ea, eb, e, k, rows, memory, kept, lim.threads, lim.memory)

    def _schedule(self, ea: int, eb: int, e: int, k: int, rows: int, memory: int,
                  kept: bool = False) -> tuple[int, int | None]:
        """How :func:`modlin._algorithms.rns.product_residues` fits ``memory`` bytes (operands of ``ea``
        and ``eb`` entries, ``e`` results, inner dimension ``k``; ``rows`` rows of ``A``, 0 for
        a stack): ``(group, None)`` for float64 products of every modulus made from the
        residues of ``group`` moduli at a time, or ``(group, panel)`` for int32 products
        (reduced into ``[0, m_i)``: half the memory, one more pass) made from the residues of
        ``group`` moduli at a time, ``panel`` rows of ``A`` at a time.

        Groups are as large as fit, in groups of equal size: each group reads the operands'
        pieces once more to make its residues (at 127 bits and ``n = 4096`` a tile under
        1 GiB made them one modulus at a time: 12 reads where 3 now do). Float64 products
        while their workspace stays within what the scratch pool keeps between calls
        (:data:`~modlin._runtime.scratch.POOL_SHARE` of the budget) and their groups' reads cost no
        more than the int32 products' with their extra pass (:meth:`_passes`);
        beyond the pool, memory is mapped afresh on every call, which on the development
        machine cost more than the int32 products' extra pass (61 bits, ``n = 4096``, 1 GiB
        budget: 7.5 against 6.7 GEMM times with the pool keeping everything). Int32 products
        (read by the host's CRTs, and only for a 2-D product) take the largest group
        whose panels keep at least :data:`GEMM_ROWS` rows (or all of them), else one
        modulus at a time in the largest panels that fit; or a smaller group, where the
        memory it saves beyond the pool (:data:`~modlin._runtime.scratch.FRESH_BYTE` a byte) costs
        more than its extra reads of the operands. ``(1, None)`` when nothing fits
        (the tile scheduler saw to it that something does). ``kept``: ``B``'s pieces are
        kept apart (:meth:`workspace`).
        """
        N = len(self.moduli)

        def largest(fits) -> int:  # the largest group that fits (memory grows with it), as equal groups, or 0
            lo, hi = 0, N
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
            return lo and -(-N // -(-N // lo))

        def fits64(g: int) -> bool:
            return self._memory(ea, eb, e, k, g, kept=kept) <= memory

        def fits32(g: int, panel: int) -> bool:
            return self._memory(ea, eb, e, k, g, panel / rows, kept) <= memory

        def widest(g: int, most: int) -> int | None:  # the largest panel that fits, `most` panels at most; or None
            lo, hi = 1, most + 1  # the fewest panels that fit (fewer need more memory)
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if fits32(g, -(-rows // mid)) else (mid + 1, hi)
            return -(-rows // lo) if lo <= most else None

        g64 = largest(fits64)
        if not (rows and self._panels()):
            return max(g64, 1), None
        most = max(rows // min(rows, GEMM_ROWS), 1)  # panels, each at least GEMM_ROWS rows
        g32 = largest(lambda g: fits32(g, -(-rows // most)))
        panel = widest(g32, most) if g32 else widest(1, max(rows // MIN_ROWS, 1))
        if panel is None:
            return max(g64, 1), None
        pool = POOL_SHARE * current_limits().memory

        def priced(g: int, pn: int | None) -> float:  # its passes, and its memory beyond the pool
            fresh = max(0.0, self._memory(ea, eb, e, k, g, None if pn is None else pn / rows, kept) - pool)
            return self._passes(ea, eb, e, g, pn) + FRESH_BYTE * fresh * device_pass_scale(self.device, None)

        # Smaller groups of int32 products, where their rereads cost less than mapping the
        # larger ones' memory afresh (50 bits, n = 4096, 4 GiB: 2.2 GiB made the first call
        # 1.33 times the later ones, 0.97 GiB 1.09, at 1 % more in later calls).
        best = (g32, panel) if g32 else (1, panel)
        for g in range(best[0] - 1, 0, -1):
            if -(-N // g) == -(-N // (g + 1)):  # not a new number of groups
                continue
            pn = widest(g, most)
            if pn is not None and priced(g, pn) < priced(*best):
                best = (g, pn)
        if g64 and self._memory(ea, eb, e, k, g64, kept=kept) <= pool \
                and self._passes(ea, eb, e, g64, None) <= self._passes(ea, eb, e, *best):
            return g64, None
        return best

    def _passes(self, ea: int, eb: int, e: int, group: int, panel: int | None) -> float:
        """The modelled cost of a :meth:`schedule` beyond :meth:`cost` (which assumes every
        modulus' residues made at once): each group after the first reads the operands' pieces
        again (:data:`REREAD`), and int32 products take one more pass over each product."""
        N = len(self.moduli)
        reread = (-(-N // group) - 1) * REREAD * self.pieces() * (ea + eb)
        reduce = 0 if panel is None else PASS * N * e
        return (reread + reduce) * device_pass_scale(self.device, None)

    def schedule_cost(self, ea: int, eb: int, e: int, k: int, rows: int, memory: int, kept: bool = False) -> float:
        """:meth:`_passes` of the schedule that fits ``memory`` (arguments as for :meth:`schedule`):
        what the tile scheduler adds to :meth:`cost` for a tile within its budget."""
        return self._passes(ea, eb, e, *self.schedule(ea, eb, e, k, rows, memory, kept))

    def tiling(self, shape: tuple[int, int, int] | None = None, *, batch: int = 1,
               budget: int | None = None, residues: bool = False,
               objects: tuple[bool, bool] = (False, False), held: int = 0) -> Tiling:
        """How the product of ``shape`` (default: the plan's; ``batch`` matrices at once)
        is cut into tiles within ``budget`` bytes (default: :func:`modlin.limits`'); with
        ``residues``, for a product whose result is its residues (a dask chunk pair's).
        ``objects``: whether ``A`` and ``B`` hold Python ints, whose conversion to pieces
        (:data:`OBJECT_PIECE`) the tiles should not repeat. ``held``: bytes held beside
        the tiles throughout (the operands' pieces, made already), counted in every tile's."""
        piece = OBJECT_PIECE * self.pieces() * planning_threads(None) / CALIBRATION_THREADS
        convert = tuple(piece if o and self.device == "cpu" else 0.0 for o in objects)
        return plan_tiling(self, self.shape if shape is None else shape, batch, budget, residues, convert, held)

    def explain(self) -> str:
        """A few lines saying what the plan does and why it is exact."""
        m, k, n = self.shape
        basis = self.basis
        subs = self.subplans
        what = f"A @ B mod p for p = {self.p} ({self.p.bit_length()} bits)" if self.p else "exact integer A @ B"
        kinds = sorted({(s.engine, s.u, s.v) for s in subs})
        lines = [
            f"{what}, shape {m}x{k} @ {k}x{n}",
            f"  algorithm : residue number system (multimodular): products modulo {len(self.moduli)} "
            f"pairwise-coprime moduli, then CRT",
            f"  bound     : |C| <= {self.bound.bit_length()}-bit bound "
            + ("(k * (p//2)**2 for balanced operands)" if self.p else "(k * max|A| * max|B|)"),
            f"  moduli    : {', '.join(map(str, self.moduli[:6]))}{', ...' if len(self.moduli) > 6 else ''} "
            f"({min(self.moduli).bit_length()}-{max(self.moduli).bit_length()} bits); "
            f"M has {basis.M.bit_length()} bits >= 2*bound + 2",
            "  products  : " + "; ".join(f"{e} ({u},{v})-product" for e, u, v in kinds)
            + (" on the GPU" if self.device == "cuda" else "")
            + (f"; {empty_product(self.shape)}" if empty_product(self.shape)
               else f", {self.gemm_count()} GEMM call(s) in all"),
            cost_line(self),
            f"  tiles     : {self.tiling().describe('whose residues add up before one CRT per tile')}",
        ]
        return "\n".join(lines)


@lru_cache(maxsize=1024)
def _schedule(pl: RNSPlan, ea: int, eb: int, e: int, k: int, rows: int, memory: int, kept: bool, threads: int,
              budget: int) -> tuple[int, int | None]:
    """:meth:`RNSPlan._schedule` under limits of ``threads`` and ``budget`` (those in force: the
    model reads them)."""
    return pl._schedule(ea, eb, e, k, rows, memory, kept)


@lru_cache(maxsize=1024)
def _one_gemm(pl: RNSPlan, k: int) -> bool:
    """Whether the product modulo each of ``pl``'s moduli is a single fp64 GEMM for inner
    dimension ``k`` (its sums then need no accumulator). Kept: the memory model asks at
    every group size and tile it weighs, thousands of times per charpoly."""
    return pl.engine == "fp64" and all(s.gemm_count(k) == 1 for s in pl.subplans)


def _engine_moduli(engine: str, halves: int, bound: int) -> tuple[int, ...]:
    """Primes below ``2**(halves / 2)``, enough to cover ``bound`` when there are that many.

    Half-bit steps matter: at ``k = 2048`` six primes below ``2**22.5`` (two
    blocks each) cover what takes seven of 22 bits or six of 23 bits (four blocks).
    """
    bits = halves / 2
    # round the count up so that nearby bounds share one cached list
    count = 8 * -(-planned_range(bound).bit_length() // (8 * (bits - 1)))
    return primes_below(math.isqrt(2**halves), int(count))


def _cover(moduli: tuple[int, ...], bound: int) -> tuple[int, ...] | None:
    count = cover_count(moduli, bound)
    return None if count is None else moduli[:count]


def choose_moduli(bound: int, shape: tuple[int, int, int], engine: str, device: str = "cpu",
                  threads: int | None = None) -> tuple[int, ...]:
    """The cheapest moduli (by the cost model, on ``threads`` cores) for products bounded by ``bound``."""
    eng = get_engine(engine)
    if engine == "int8":
        found = _cover(int8_moduli(), bound)
        if found is None:
            raise ValueError(
                f"a {bound.bit_length()}-bit bound needs more than the {len(int8_moduli())} int8 moduli "
                "(product about 2**{:.0f}); use the fp64 engine".format(math.log2(math.prod(int8_moduli())))
            )
        return found
    m, k, n = shape
    best = None
    top = min(eng.max_modulus + 1, MAX_RNS_MODULUS).bit_length() - 1
    for halves in range(16, 2 * top + 1):
        moduli = _cover(_engine_moduli(engine, halves, bound), bound)
        if moduli is None:
            continue
        try:
            cost = RNSPlan(None, bound, moduli, engine, shape, device).cost(threads=threads)
        except ValueError:  # the engine has no exact single-word product for these moduli
            continue
        if best is None or cost < best[0]:
            best = (cost, moduli)
    if best is None:
        raise ValueError(f"no {engine} moduli cover a {bound.bit_length()}-bit bound")
    return best[1]


def rns_plan(p: int | None, bound: int, shape: tuple[int, int, int], *, engine: str | None = None,
             moduli: tuple[int, ...] | None = None, device: str = "cpu", threads: int | None = None) -> RNSPlan:
    """The RNS plan for a product bounded by ``bound`` (see :func:`modlin.plan`), the cheapest
    on ``threads`` cores (default: :func:`modlin.limits`' threads).

    On the GPU residue number systems run on int8 moduli only: that is where
    its throughput is.
    """
    return _rns_plan_on(p, bound, shape, engine, moduli, device, planning_threads(threads))


@lru_cache(maxsize=256)
def _rns_plan_on(p: int | None, bound: int, shape: tuple[int, int, int], engine: str | None,
                 moduli: tuple[int, ...] | None, device: str, threads: int) -> RNSPlan:
    if device == "cuda" and engine not in (None, "int8"):
        raise ValueError("on the GPU residue number systems use the int8 engine")
    if device == "cuda":
        engine = "int8"
    if moduli is not None:
        pl = RNSPlan(p, bound, as_moduli(moduli), engine or "fp64", shape, device)
        pl.check()
        return pl
    if engine:
        return RNSPlan(p, bound, choose_moduli(bound, shape, engine, device, threads), engine, shape, device)
    plans = []
    for e in engines_on(device):
        try:
            plans.append(RNSPlan(p, bound, choose_moduli(bound, shape, e, device, threads), e, shape, device))
        except ValueError:  # this engine's moduli cannot cover the bound; another can
            continue
    if not plans:
        raise ValueError(f"no engine's moduli cover a {bound.bit_length()}-bit bound")
    return min(plans, key=lambda pl: pl.cost(threads=threads))


def as_moduli(moduli) -> tuple[int, ...]:
    """User moduli as a tuple of Python ints; TypeError for anything but integers."""
    out = []
    for q in moduli:
        if isinstance(q, (bool, np.bool_)) or not isinstance(q, numbers.Integral):
            raise TypeError(f"moduli must be integers, got {type(q).__name__} {q!r}")
        out.append(int(q))
    return tuple(out)
