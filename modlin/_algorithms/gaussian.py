"""Gaussian-integer products, tile by tile: 2M, 3M and 4M modulo ``m`` on real products
(:class:`TileProduct`), their rank-k updates (:func:`rank_k`), and exact products over Z[i]
by residue number systems of primes ``1 (mod 4)`` (:class:`ExactTile`). The front door,
its checks and the choice of algorithm are :mod:`modlin.gaussian`'s; the number theory of
2M is :mod:`modlin._arith.moduli`'s, its element-wise stages :mod:`modlin._arith.modular`'s
(CPU) and :mod:`modlin._algorithms.gpu`'s (CUDA).
"""

from __future__ import annotations

import math

import numpy as np

from modlin._algorithms import gpu as _gpu, multiword as _multiword
from modlin._algorithms.products import device_residues, gpu_matmul, tile_product
from modlin._algorithms.tiles import as_matrix, drive, matmul_shapes, progress, stack_items
from modlin._arith import crt as _crt, modular as _modular, moduli as _moduli, residues as _residues
from modlin._arith.integers import balanced_halves, balanced_lift, residues_int64
from modlin._arith.modular import add_into, twom_combine, twom_finish, twom_words
from modlin._arith.moduli import sqrt_minus_one, twom_moduli, twom_primes
from modlin._engines.backend import namespace
from modlin._engines.gemm import get_engine
from modlin._planning.plan import MAX_MODULUS, Plan
from modlin._planning.planner import plan
from modlin._planning.rnsplan import RNSPlan
from modlin._planning.tiling import budget as budget_of, choose, pair_count, square
from modlin._runtime.calibration import CRT_SUM, LIFT, LIMB, RESIDUE, WEIGH
from modlin._runtime.limits import current as current_limits
from modlin._runtime.scratch import Arena, scratch


def result_dtype(m: int):
    """The dtype of results modulo ``m``: int64 holds every residue up to ``m = 2**63``;
    above, Python ints, as :func:`modlin.matmul` returns them."""
    return np.int64 if m <= 2**63 else object


def _twom_combine(X, Y, s: int, m: int, stages=_modular.CPU):
    re, im = stages.twom_combine(X, Y, s, m)
    # a 1-D @ 1-D product is a scalar, as in numpy.matmul
    return (re[()], im[()]) if re.ndim == 0 else (re, im)


def _sub_mod(x, y, m):
    d = x - y
    d += m * (d < 0)
    return d


def _add_mod(x, y, m):
    d = x + y
    d -= m * (d >= m)
    return d


def rns_matmul(a, b, m: int, alg: str):
    """``a @ b mod m`` for ``m >= 2**52`` of Gaussian matrices given as ``(real, imag)`` parts:
    the exact product over Z[i] of their balanced residues, by a residue number system
    (:meth:`ExactTile.modular`) tile by tile within the memory budget, each tile's CRT
    reducing modulo ``m``, and the partial products of k-panels added modulo ``m``."""

    (mm, k, n), full, shape = matmul_shapes(a[0].shape, b[0].shape)
    out = [np.empty(full, dtype=result_dtype(m)) for _ in range(2)]
    if out[0].size and k:
        tile = ExactTile.modular(m, alg, 2, (mm, k, n))
        run_exact(tile, (mm, k, n), [as_matrix(x, 0) for x in a], [as_matrix(x, 1) for x in b], out,
                   f"modlin.gaussian.matmul (RNS, {len(tile.tiles)} moduli, {alg.upper()}) mod a "
                   f"{m.bit_length()}-bit m")
    else:
        for x in out:
            x[...] = 0
    return _shaped(*out, shape)


def _gauss(ar, ai, br, bi, m: int, alg: str, mul, stages=_modular.CPU) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian product mod ``m`` from the real products ``mul(x, y)``: 2M on parts
    congruent mod ``m`` (its images and combination by ``stages``, those of the arrays'
    device), 3M or 4M on parts in ``[0, m)``."""
    if alg == "2m":
        s = sqrt_minus_one(m)
        ap, am = stages.twom_split(ar, ai, s, m)
        bp, bm = stages.twom_split(br, bi, s, m)
        return _twom_combine(mul(ap, bp), mul(am, bm), s, m, stages)
    rr, ii = mul(ar, br), mul(ai, bi)
    if alg == "4m":
        return _sub_mod(rr, ii, m), _add_mod(mul(ar, bi), mul(ai, br), m)
    t = mul(_add_mod(ar, ai, m), _add_mod(br, bi, m))
    return _sub_mod(rr, ii, m), _sub_mod(_sub_mod(t, rr, m), ii, m)


def _workspace(pl, alg: str, twom_words_: bool, batch: int):
    """Bytes one tile ``(mt, kt, nt)`` of a Gaussian product allocates beyond operands and
    result (an upper bound, the tile scheduler's model): the int64 parts of both panels,
    then for 2M straight into words the two images' words of both panels, the two real
    products and their combination; otherwise the reduced (and for 3M summed) parts, the
    images or real products alive at once and one real product's own workspace (on the
    GPU, a GPU :func:`modlin.matmul`, which also reduces and balances its operands)."""

    def memory(mt, kt, nt):
        ops, out = mt * kt + kt * nt, mt * nt
        total = 16 * ops  # the int64 parts of the panels
        if twom_words_:
            w = get_engine(pl.engine).dtype.itemsize
            total += 2 * w * (pl.u * mt * kt + pl.v * kt * nt) + 8 * out * 5 + pl.workspace((mt, kt, nt))
        else:
            total += 8 * ops * (3 if alg == "3m" else 2) + 8 * out * 6 + pl.workspace((mt, kt, nt)) + 8 * out
            if pl.device == "cuda":
                total += 24 * ops
        return batch * total

    return memory


#: Real products per Gaussian product.
_GEMMS = {"2m": 2, "3m": 3, "4m": 4}


def gauss_tiling(pl, alg: str, words: bool, shape: tuple[int, int, int], batch: int, budget: int | None = None,
            extra: int = 0, xp=np):
    """The tiles of a Gaussian product of ``shape`` (``batch`` matrices at once) within
    ``budget`` (default: that of ``xp``'s arrays, :func:`modlin._planning.tiling.budget`), real
    products made with the plan ``pl``; ``extra`` more int64 arrays of an output tile's size
    (a rank-k update's sum and mirror) beside each tile."""
    budget = budget_of(xp) if budget is None else budget
    tile = _workspace(pl, alg, words, batch)
    return choose(shape, lambda mt, kt, nt: tile(mt, kt, nt) + batch * 8 * extra * mt * nt, budget,
                  lambda mt, kt, nt: batch * _GEMMS[alg] * pl.cost((mt, kt, nt)))


def tiled_matmul(a, b, m: int, alg: str):
    """``a @ b mod m`` of Gaussian matrices given as ``(real, imag)`` parts (NumPy or CuPy),
    tile by tile within the memory budget of their device (:func:`modlin._planning.tiling.budget`):
    each tile converts its panels (2M on the CPU: their images straight into the words of
    one multiword plan, which both real products share), and the partial products of
    k-panels are added modulo ``m``."""

    xp = namespace(*a, *b)
    gpu = xp is not np
    (mm, k, n), full, shape = matmul_shapes(a[0].shape, b[0].shape)
    a = [as_matrix(x, 0) for x in a]
    b = [as_matrix(x, 1) for x in b]
    pl = plan(m, mm, k, n, device="cuda" if gpu else "cpu")
    words = alg == "2m" and isinstance(pl, Plan) and not gpu  # the words' kernels are the CPU's
    stack = full[:-2]
    re, im = xp.empty(full, dtype=np.int64), xp.empty(full, dtype=np.int64)
    if re.size == 0:
        return _shaped(re, im, shape)
    if k == 0:
        re[...], im[...] = 0, 0
        return _shaped(re, im, shape)
    batch = math.prod(stack)
    tiling, items, rounds = stack_items(stack, lambda count: gauss_tiling(pl, alg, words, (mm, k, n), count, xp=xp),
                                        list(a), list(b))
    tile = TileProduct(pl, alg, words, m)
    # on the GPU the kernels reduce any int64 as they read it: only other dtypes are converted
    reduce = (lambda t, m, name: t if t.dtype == np.int64 else device_residues(t, m)) if gpu else residues_int64
    what = f"modlin.gaussian.matmul ({alg.upper()}) mod a {m.bit_length()}-bit m"
    cost = batch * tiling.count * _GEMMS[alg] * pl.cost(tiling.tile)
    with progress(rounds * tiling.count, cost, what) as bar:
        for idx, x, y in items:
            dst = re[idx], im[idx]

            def product(rows, inner, cols):
                xt = [reduce(t[..., rows, inner], m, "A") for t in x]
                yt = [reduce(t[..., inner, cols], m, "B") for t in y]
                if inner.start:  # a later k-panel: added to the first's, in the output
                    return tile(xt, yt)
                return tile(xt, yt, out=[d[..., rows, cols] for d in dst])

            drive(tiling, product, add=tile.add, bar=bar)
    return _shaped(re, im, shape)


class TileProduct:
    """The product of one tile's panels mod ``m`` (int64 parts, any values congruent mod
    ``m``): Gaussian with 2M (straight into the words of the multiword plan ``pl`` when
    ``words``), 3M or 4M, or real for one-part operands; and the exact sum of two
    k-panels' partial products (:meth:`add`)."""

    def __init__(self, pl, alg: str, words: bool, m: int):
        self.pl, self.alg, self.words, self.m = pl, alg, words, m
        if pl.device == "cuda":  # the element-wise stages of the device's arrays
            self.stages = _gpu.MULTIWORD
        else:
            self.stages = _modular.CPU
        self.s = sqrt_minus_one(m) if alg == "2m" else 0
        self.dtype = get_engine(pl.engine).dtype if words else None

    def real(self, x, y):
        if self.pl.device == "cuda":  # a GPU modlin.matmul, tiled within the device's free memory
            return gpu_matmul(x, y, self.m, None, self.pl)
        out = np.empty(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1]), dtype=np.int64)
        tile_product(self.pl, x, y, self.m, out)
        return out

    def __call__(self, x, y, out=None):
        """The parts of the tile's product, written into ``out`` (a list of its arrays, any
        strides) when given."""

        m, s, pl = self.m, self.s, self.pl
        if pl.device == "cuda" and self.alg == "2m" and len(x) == 2 and isinstance(pl, RNSPlan):
            xp = namespace(x[0])
            shape = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2]) + (x[0].shape[-2], y[0].shape[-1])
            out = [xp.empty(shape, dtype=np.int64) for _ in range(2)] if out is None else out
            _gpu.twom_multiply(pl, x, y, s, out)  # images, GEMMs, CRT and combination: fused kernels
            return out
        if len(x) == 1:
            parts = [self.real(x[0], y[0])]
        elif not self.words:
            if self.alg != "2m":
                x, y = [t % m for t in x], [t % m for t in y]
            parts = list(_gauss(*x, *y, m, self.alg, self.real, self.stages))
        else:
            ap, am = twom_words(*x, s, m, pl.a_shift, pl.u, self.dtype)
            bp, bm = twom_words(*y, s, m, pl.b_shift, pl.v, self.dtype)
            shape = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2]) + (x[0].shape[-2], y[0].shape[-1])
            acc = get_engine(pl.engine).acc_dtype
            if out is None:  # a later k-panel's, added into the output then dropped
                out = [scratch(shape, np.int64) for _ in range(2)]
            if acc == np.float64:
                # the two real products' sums, reduced and combined into the output in one pass
                X, Y = scratch(shape, acc), scratch(shape, acc)
                _multiword.multiply_words(pl, ap, bp, X, keep=True)
                del ap, bp
                _multiword.multiply_words(pl, am, bm, Y, keep=True)
                twom_finish(X, Y, pl.reductions[0], s, *out)
                return out
            X, Y = scratch(shape, np.int64), scratch(shape, np.int64)
            _multiword.multiply_words(pl, ap, bp, X)
            del ap, bp
            _multiword.multiply_words(pl, am, bm, Y)
            parts = twom_combine(X, Y, s, m)
        if out is None:
            return list(parts)
        for d, q in zip(out, parts):
            d[...] = q
        return out

    def add(self, acc, part):
        for x, y in zip(acc, part):
            x[...] = _add_mod(x, y, self.m)
        return acc


def _neg_mod(x, m: int):
    """``-x mod m`` of residues in ``[0, m)``: int64 without overflow up to ``m = 2**63``
    (``-x`` then ``+ m`` as ``- (-m)``, the constant an int64 holds), Python ints above."""
    if x.dtype == object:
        return (-x) % m
    y = -x
    np.subtract(y, -m, out=y, where=y < 0)
    return y


def _shaped(re, im, shape):
    re, im = re.reshape(shape), im.reshape(shape)
    # a 1-D @ 1-D product is a scalar, as in numpy.matmul
    return (re[()], im[()]) if re.ndim == 0 else (re, im)


def rank_k(terms, m: int, alg: str, conj: bool):
    """``C = sum(X @ op(Y)^T for X, Y in terms) mod m`` with ``op(Y) = conj(Y)`` when ``conj``
    (HERK, HER2K) and ``C`` symmetric or, with ``conj``, Hermitian: operands are lists of
    parts (one: real, two: Gaussian ``(real, imag)``) of ``(..., n, k)`` arrays.

    Computed by pairs of square tiles within the memory budget: the tile ``(I, J)``,
    ``I <= J``, is the Gaussian (or real) product of the row panels ``I`` of ``X`` and ``J``
    of ``Y``, by k-panels added mod ``m``; the tile ``(J, I)`` is its (conjugate) transpose.
    Each output tile takes one product per term, as the whole matrix does with the 2M
    corollaries (Caday, arXiv 2609.05419), and the result is exactly symmetric (Hermitian).
    For ``m >= 2**52`` each tile's product is the exact one of the balanced residues, by a
    residue number system reduced modulo ``m`` by its CRT (:meth:`ExactTile.modular`).
    """

    ops = [x for t in terms for part in t for x in part]
    if any(np.ndim(x) < 2 for x in ops):
        raise ValueError("rank-k updates (herk, syrk, her2k, syr2k) need matrices (at least 2-D operands)")
    if len({np.shape(x)[-2:] for x in ops}) > 1:
        raise ValueError("the operands of a rank-k update must be matrices of one shape, got "
                         f"{sorted({np.shape(x) for x in ops})}")
    n, k = np.shape(ops[0])[-2:]
    try:
        stack = np.broadcast_shapes(*(np.shape(x)[:-2] for x in ops))
    except ValueError:
        raise ValueError(f"stack shapes {sorted({np.shape(x)[:-2] for x in ops})} do not broadcast") from None
    terms = [tuple([np.broadcast_to(np.asarray(x), stack + (n, k)) for x in part] for part in t) for t in terms]
    real = len(terms[0][0]) == 1
    shape = stack + (n, n)
    out = [np.empty(shape, dtype=result_dtype(m)) for _ in range(1 if real else 2)]
    if not out[0].size:
        return out[0] if real else tuple(out)
    large = m >= MAX_MODULUS
    if large:  # the exact product of the balanced residues by RNS, reduced modulo m by its CRT
        tile = ExactTile.modular(m, alg, len(out), (n, k, n))
        tiling = square(tile.tiling((n, k, n), 1, extra=4))
        cost = math.prod(stack) * pair_count(tiling) * len(terms) * tile.cost(tiling.tile)
    else:
        pl = plan(m, n, k, n)
        words = alg == "2m" and isinstance(pl, Plan) and not real
        tile = TileProduct(pl, alg, words, m)
        tiling = square(gauss_tiling(pl, alg, words, (n, k, n), 1, extra=4))
        cost = math.prod(stack) * pair_count(tiling) * len(terms) * (1 if real else _GEMMS[alg]) * pl.cost(tiling.tile)

    def panel(part, idx, lines, inner, negate=False):
        if large:  # the exact tile takes any integers, and reduces them itself
            x = part[idx][lines, inner]
            if not negate:
                return x
            x = balanced_lift(x, m, "A")
            # -(-2**63) has no int64: the balanced residues modulo 2**64 reach it
            return -(x.astype(object) if x.dtype != object and m // 2 >= 2**63 else x)
        x = residues_int64(part[idx][lines, inner], m, "A")
        return np.remainder(-np.remainder(x, m), m) if negate else x

    what = f"modlin.gaussian rank-k update ({'real' if real else alg.upper()}) mod a {m.bit_length()}-bit m"
    with progress(math.prod(stack) * pair_count(tiling), cost, what) as bar:
        for idx in np.ndindex(stack):
            def product(rows, inner, cols):
                acc = None
                for X, Y in terms:
                    x = [panel(p, idx, rows, inner) for p in X]
                    y = [panel(p, idx, cols, inner, conj and j == 1).T for j, p in enumerate(Y)]
                    # with k = 0, zeros: one array per part, as a sum adds into them
                    part = tile(x, y) if k else [np.zeros((x[0].shape[0], y[0].shape[1]), dtype=result_dtype(m))
                                                 for _ in x]
                    acc = part if acc is None else tile.add(acc, part)
                return acc

            def finish(rows, cols, acc):
                for j, (dst, part) in enumerate(zip(out, acc)):
                    dst[idx][rows, cols] = part
                    if rows != cols:  # C_JI = C_IJ^T, or its conjugate
                        dst[idx][cols, rows] = _neg_mod(part.T, m) if conj and j == 1 else part.T

            drive(tiling, product, add=tile.add, finish=finish, bar=bar, pairs=True)
    return out[0] if real else tuple(out)


def intmul_moduli(bound: int, k: int, engine: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Moduli covering ``bound`` and the algorithm for each: 2M where it applies."""
    if engine == "int8":
        twom = twom_moduli(255)
        rest = tuple(q for q in _moduli.int8_moduli() if all(math.gcd(q, t) == 1 for t in twom))
        pool = [(q, "2m") for q in twom] + [(q, "3m") for q in rest]
    else:
        # the largest single-GEMM modulus for this k: k * (q/2)**2 <= 2**53
        bits = max(8, min(25, int(math.log2(2 * math.sqrt(2**53 / max(k, 1))))))
        count = max(8, 2 * _moduli.planned_range(bound).bit_length() // (bits - 1) + 2)
        pool = [(q, "2m") for q in twom_primes(bits, count)]
    count = _moduli.cover_count([q for q, _ in pool], bound)
    if count is not None:
        return tuple(q for q, _ in pool[:count]), tuple(a for _, a in pool[:count])
    raise ValueError(f"a {bound.bit_length()}-bit bound needs more {engine} moduli than are available; "
                     "use engine='fp64'")


def run_exact(tile: ExactTile, shape: tuple[int, int, int], x: list, y: list, out: list, what: str) -> None:
    """``out[j][...]`` = part ``j`` of the product of the parts ``x`` and ``y`` (matrices or
    stacks, broadcasting to ``out``'s shape) by ``tile`` (an :class:`ExactTile`), tile by
    tile within the memory budget of :func:`modlin.limits`: the product of each k-panel is
    added into the output (:meth:`ExactTile.add`)."""

    stack = out[0].shape[:-2]
    tiling, items, rounds = stack_items(stack, lambda count: tile.tiling(shape, count), x, y)
    cost = math.prod(stack) * tiling.count * tile.cost(tiling.tile)
    with progress(rounds * tiling.count, cost, what) as bar:
        for idx, xs, ys in items:
            dst = [o[idx] for o in out]

            def product(rows, inner, cols):
                part = tile([t[..., rows, inner] for t in xs], [t[..., inner, cols] for t in ys])
                if inner.start:
                    return part
                for d, p in zip(dst, part):
                    d[..., rows, cols] = p
                return [d[..., rows, cols] for d in dst]

            drive(tiling, product, add=tile.add, bar=bar)


class ExactTile:
    """The exact Gaussian (or, for one-part operands, real) product of one tile's panels by
    RNS: residues modulo each modulus (a :class:`TileProduct` each, with that modulus'
    algorithm and multiword plan), rebuilt by CRT, or with ``p`` reduced modulo ``p`` by
    the CRT itself; with its workspace model and modelled cost.

    ``pieces``: how many 16-bit pieces an operand entry is cut into (the workspace model's);
    ``parts``: 2 for Gaussian operands ``(real, imag)``, 1 for real ones."""

    def __init__(self, moduli, algs, shape, engine: str, as_object: bool, p: int | None = None, parts: int = 2):
        self.basis, self.as_object, self.p, self.parts = _moduli.Basis(moduli), as_object, p, parts
        self.pieces = 4
        self.tiles = []
        for q, alg in zip(moduli, algs):
            # the plan is pinned so that the int8 engine is honoured
            pl = plan(q, *shape, engine=engine if engine == "int8" else None)
            self.tiles.append(TileProduct(pl, alg, alg == "2m" and isinstance(pl, Plan) and parts == 2, q))
        self.arena = Arena()  # the CRT's rows, reused from tile to tile

    @classmethod
    def modular(cls, m: int, alg: str, parts: int, shape: tuple[int, int, int]) -> ExactTile:
        """The product modulo ``m`` of operands of ``parts`` parts (any integers, taken to their
        balanced residues), for ``m >= 2**52``: the exact product of the balanced residues, by
        ``alg`` modulo each of the fp64 primes ``1 (mod 4)`` of :func:`gaussian.intmul
        <intmul>`, whose CRT reduces it modulo ``m``.

        A part of the product is a sum of ``parts * k`` products of balanced residues, each at
        most ``(m//2)**2`` in magnitude (``C_r = A_r B_r - A_i B_i``): that is the bound the
        moduli cover, whatever ``alg`` (2M and 3M combine residues modulo each prime only).
        """
        k = shape[1]
        moduli, _ = intmul_moduli(parts * k * (m // 2) ** 2, k, "fp64")
        tile = cls(moduli, (alg,) * len(moduli), shape, "fp64", False, p=m, parts=parts)
        tile.pieces = max(4, m.bit_length() // 16 + 1)  # a balanced residue's, as balanced_halves cuts it
        return tile

    def __call__(self, x, y):
        """The exact products' parts (int64, or object with ``as_object``) of the integer panels
        ``x = (A_r, A_i)`` and ``y = (B_r, B_i)`` (or ``(A,)`` and ``(B,)``); with ``p``, of
        panels of any integers, the parts modulo ``p`` in ``[0, p)`` (int64 up to ``2**63``,
        Python ints above)."""
        if self.p is None:
            halves = [_residues.Pieces16(t) for t in (*x, *y)]
        else:  # any dtype modlin.matmul takes; residues in [-(p//2), (p-1)//2] bound the product
            halves = [balanced_halves(t, self.p, name) for t, name in zip((*x, *y), "A" * len(x) + "B" * len(y))]
        shape = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2]) + (x[0].shape[-2], y[0].shape[-1])
        E = math.prod(shape)
        N, P = len(self.tiles), len(x)
        rows = [_residues.padded_rows(N, E, np.float64, self.arena, f"part {j}") for j in range(P)]
        for i, (q, tile) in enumerate(zip(self.basis.moduli, self.tiles)):
            ops = [h.residues((q,), np.float64)[0].astype(np.int64) % q for h in halves]
            for r, part in zip(rows, tile(ops[:P], ops[P:])):
                r[i, :E] = part.reshape(-1)
        return [_crt.reconstruct_rows(r, E, self.basis, self.p, self.as_object).reshape(shape) for r in rows]

    def add(self, acc, part):
        """``acc += part``, exactly (the bound covers every partial sum) or modulo ``p``."""
        for x, y in zip(acc, part):
            if self.p is None:
                np.add(x, y, out=x)
            else:
                add_into(x, y, self.p)  # int64 without overflow up to p = 2**63
        return acc

    def cost(self, tile) -> float:
        """Modelled time of one tile product, in multiply-adds of a large fp64 GEMM: the real
        products of every modulus and, as for :class:`modlin.RNSPlan`, the residues of the
        panels and the CRT of the result."""

        mt, kt, nt = tile
        N = len(self.tiles)
        L = (self.basis.M * N).bit_length() // 16 + 1
        gemms = sum((_GEMMS[t.alg] if self.parts == 2 else 1) * t.pl.cost(tile) for t in self.tiles)
        return gemms + self.parts * ((LIFT + RESIDUE * N) * (mt * kt + kt * nt)
                                     + (WEIGH * N + (CRT_SUM * N + LIMB) * L) * mt * nt)

    def tiling(self, shape, batch: int, pieces: int | None = None, budget: int | None = None, extra: int = 0):
        """The tiles of the product of ``shape`` (``batch`` matrices at once) within ``budget``
        (default: :func:`modlin.limits`'), operand entries cut into ``pieces`` 16-bit pieces
        (default: :attr:`pieces`); ``extra`` more arrays of an output tile's size and the
        result's entries (a rank-k update's sum and mirror) beside each tile."""

        budget = current_limits().memory if budget is None else budget
        return choose(shape, lambda mt, kt, nt: batch * (self.workspace((mt, kt, nt), pieces)
                                                         + extra * self.entry * mt * nt),
                      budget, lambda mt, kt, nt: batch * self.cost((mt, kt, nt)))

    @property
    def entry(self) -> int:
        """Bytes of one entry of a result part: int64, or a pointer and a Python int of the
        bound's size (or below ``p``) in 30-bit digits."""
        if self.p is not None:
            return 8 if self.p <= 2**63 else 8 + 32 + 4 * -(-self.p.bit_length() // 30)
        return 8 + 32 + 4 * -(-self.basis.M.bit_length() // 30) if self.as_object else 8

    def workspace(self, tile, pieces: int | None = None) -> int:
        """Bytes one tile product allocates beyond operands and result (an upper bound, the
        tile scheduler's model): the 16-bit pieces of the panels (with ``p``, of their
        balanced residues, which are made first: int64 up to ``p = 2**64``, Python ints
        above) and the residues of every modulus for each part of the result throughout;
        beside them, one modulus' residues (float64, then int64) with its product
        (:func:`_workspace`), then the CRT; and the partial product of a k-panel, added
        into the result."""
        mt, kt, nt = tile
        ops, e, N, P = mt * kt + kt * nt, mt * nt, len(self.tiles), self.parts
        pieces = self.pieces if pieces is None else pieces
        halves = P * pieces * 2 * ops
        if self.p is not None:
            halves += P * ops * (8 if self.p <= 2**64 else 8 + 32 + 4 * -(-self.p.bit_length() // 30))
        rows = P * 8 * N * (e + 512)  # padded_rows: at most 4 KiB of padding per row
        # the residues of one panel, in chunks (on up to two threads), float64, int64
        convert = 16 * max(mt * kt, kt * nt) + 2 * 8 * (pieces + 2) * min(max(mt * kt, kt * nt), _residues.RESIDUE_STEP)
        product = max(_workspace(t.pl, t.alg, t.words, 1)(mt, kt, nt) for t in self.tiles)
        crt = P * 18 * e + _crt.crt_scratch(N, self.basis.M * N if self.p is None else self.p, e,
                                            current_limits().threads)
        return halves + rows + max(convert + product, crt) + P * self.entry * e
