"""Ozaki-II's product in three stages, on NumPy arrays: scales, residues of a tile, finish.

:mod:`modlin.ozaki` runs them tile by tile within the memory budget (the CuPy
path too, with the residues and CRT of :mod:`modlin._algorithms.gpu`); other schedulers (task graphs) may run them anywhere, since each
stage's contract names only its own inputs:

(a) :func:`scales` reads the *whole* operands once and returns the row shifts of
    ``A`` and column shifts of ``B`` (and which lines hold Inf or NaN).
(b) :func:`gemm_residues` (and :func:`syrk_residues` for ``A A^T`` / ``A A^H``)
    takes a row panel of ``A`` and a column panel of ``B`` (any k-panel of them,
    each a :class:`Panel` with the shifts of (a), quantised as it is read) and returns the residues
    of their exact integer product modulo every modulus. Residues of the k-panels
    of one output tile add up, modulo each modulus, to those of the whole ``k``
    (:func:`add_residues`): the products are exact integers.
(c) :func:`finish` turns the residues of an output tile into its doubles: CRT,
    one rounding, unscaling, and the native product on lines holding Inf or NaN.

Stages (b) and (c) run through :class:`Kernels`: :data:`CPU` here, the CuPy ones in
:mod:`modlin._algorithms.gpu`; the tile loop (:mod:`modlin.ozaki`) is the same for both.

For any cut of the output into tiles and of ``k`` into panels, (a), then (b) summed
over the k-panels with :func:`add_residues`, then (c) give the bits of the uncut
product: the residues are those of one integer matrix, and (c) rounds each entry
from them alone.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from modlin._algorithms import multiword as _multiword, quantize as _quantize, rns as _rns
from modlin._algorithms.products import integer_product as intmul
from modlin._algorithms.quantize import Kernels, Panel, Scales
from modlin._algorithms.tiles import drive
from modlin._arith.crt import to_double
from modlin._arith.moduli import Basis, sqrt_minus_one
from modlin._engines import cuda as _cuda
from modlin._engines.backend import is_cupy, namespace
from modlin._engines.gemm import get_engine
from modlin._engines.threads import side_by_side
from modlin._planning.plan import best_plan
from modlin._runtime.scratch import scratch


@dataclass(frozen=True)
class Moduli:
    """Moduli with the algorithm each uses (``"real"``, ``"2m"``, ``"3m"`` or ``"4m"``)."""

    engine: str
    moduli: tuple[int, ...]
    algorithms: tuple[str, ...]

    @property
    def basis(self) -> Basis:
        return Basis(self.moduli)


def parts(x: np.ndarray) -> list[np.ndarray]:
    """The real and imaginary parts of a complex ``x`` (views), or ``[x]``."""
    return [x.real, x.imag] if x.dtype.kind == "c" else [x]


def zero_lines(x: np.ndarray, bad: np.ndarray, axis: int) -> np.ndarray:
    if not bad.any():
        return x
    return namespace(x).where(namespace(x).expand_dims(bad, axis), 0, x)


def lb(basis: Basis) -> int:
    """``log2`` of the largest power of two the exact products may reach: ``2**lb <= (M-2)/2``."""
    return ((basis.M - 2) // 2).bit_length() - 1


def halves(x):
    """The two halves of the columns of ``x`` (the second padded with a zero column when
    ``k`` is odd): real SYRK's ``Z = A_1 + i A_2``."""
    k = x.shape[1]
    h = (k + 1) // 2
    second = namespace(x).zeros_like(x[:, :h])
    second[:, : k - h] = x[:, h:]
    return x[:, :h], second


def _line_stats(x: np.ndarray, axis: int, lines: int, inner: int, bars: np.ndarray | None):
    """Per line of the NumPy operand ``x`` (rows, ``axis=1``; columns, ``axis=0``): Inf/NaN,
    the exponent of the maximum, the bits for exactness and the squared norm of the integer
    bounds, read in pieces of ``lines`` lines by ``inner`` entries, each by one pass of a
    kernel (what :func:`_quantize.part_bounds` and :func:`_quantize.exact_bits` give for
    whole lines: maxima and exact integer sums do not depend on the pieces). Lines with Inf
    or NaN count as zero lines. The bounds themselves are written into ``bars`` (uint8,
    ``x``'s shape) when given. (A device brings its own: :attr:`Kernels.line_stats`.)"""
    count, length = x.shape[1 - axis], x.shape[axis]
    ex = np.zeros(count, dtype=np.int64)
    need = np.full(count, _quantize.T_BITS, dtype=np.int64)
    sq = np.zeros(count)
    bad = np.zeros(count, dtype=bool)

    def piece(ls, ks):
        return x[ls, ks] if axis == 1 else x[ks, ls]

    for l0 in range(0, count, lines):
        ls = slice(l0, l0 + lines)
        chunks = [slice(k0, k0 + inner) for k0 in range(0, max(length, 1), inner)]
        mx = np.zeros(len(range(*ls.indices(count))))
        for ks in chunks:
            y = piece(ls, ks)
            if y.shape[axis]:
                b_, m_ = _quantize.line_maxima(y, axis)
                bad[ls] |= b_
                mx = np.maximum(mx, m_)
        mx[bad[ls]] = 0
        ex[ls] = np.frexp(mx)[1]
        for ks in chunks:
            target = None if bars is None else bars[ls, ks] if axis == 1 else bars[ks, ls]
            n_, s_ = _quantize.line_stats(piece(ls, ks), ex[ls], bad[ls], axis, target)
            need[ls] = np.maximum(need[ls], n_)
            sq[ls] += s_
    return bad, ex, need, sq


def _bound_gemm(abar, bbar):
    """``abar @ bbar`` exactly from uint8 bounds (at most ``2**(T_BITS + 1)``): an int8 GEMM
    with int32 sums on a GPU, where ``k`` allows, or a float64 GEMM."""
    if is_cupy(abar) and abar.shape[1] * 2 ** (2 * _quantize.T_BITS + 2) < 2**31:
        # bounds up to 2**(T_BITS + 1) = 64: the same bits as int8, no copy
        return _cuda.gemm_i8(abar.view(np.int8), bbar.view(np.int8)).astype(np.float64)
    return get_engine("fp64").gemm(abar.astype(np.float64), bbar.astype(np.float64))


def scales(a: np.ndarray, b: np.ndarray | None, mods: Moduli, mode: str, tiling=None, kernels=None) -> Scales:
    """Stage (a): the shifts of every row of ``a`` (``m x k``) and column of ``b`` (``k x n``),
    from the whole operands (both float64 or both complex128, 2-D).

    ``b=None`` is the symmetric product ``a @ a^T`` (``a @ a^H``): ``sb = sa``, both sides
    taking the smaller share so that the result stays symmetric. ``tiling`` (a
    :class:`modlin._planning.tiling.Tiling` of the product) sets the pieces the operands are read
    in (``mt x kt`` of ``a``, ``kt x nt`` of ``b``), and "accurate" mode's bound product
    ``abar @ bbar`` is computed over its tiles, keeping one uint8 per entry of each
    operand and of the result (:func:`workspace` counts them); the shifts do not depend
    on the pieces. ``kernels`` (:class:`Kernels`) may bring their own line statistics
    and "fast" exponents (the GPU's: one kernel each).
    """
    xp = namespace(a)
    stats = _line_stats if kernels is None or kernels.line_stats is None else kernels.line_stats
    m, k = a.shape
    n = m if b is None else b.shape[1]
    mt, kt, nt = tiling.tile if tiling is not None else (max(m, 1), max(k, 1), max(n, 1))
    accurate = mode == "accurate"
    abars = xp.empty((m, k), dtype=np.uint8) if accurate else None
    stats_a = stats(a, 1, mt, kt, abars)  # (bad, ex, need, sq, and what the kernels' own add)
    bad_a, ex_a, need_a, sq_a = stats_a[:4]
    if b is None:
        stats_b, bbars = stats_a, None if abars is None else abars.T
    else:
        bbars = xp.empty((k, n), dtype=np.uint8) if accurate else None
        stats_b = stats(b, 0, nt, kt, bbars)
    bad_b, ex_b, need_b, sq_b = stats_b[:4]
    top = lb(mods.basis)
    if not accurate and kernels is not None and kernels.fast_scales is not None:
        return kernels.fast_scales(stats_a, stats_b, top, b is None)
    if not accurate:
        g, h = _quantize.fast_exponents(sq_a, sq_b, top, need_a, need_b)
    else:
        code = xp.empty((m, n), dtype=np.uint8)
        put = None if kernels is None else kernels.bound_code

        def store(rows, cols, w):
            if put is not None:  # the device's kernel writes the codes' tile itself
                put(w, code[rows, cols])
            else:
                code[rows, cols] = _quantize.bound_bits(w)

        if tiling is None:
            store(slice(None), slice(None), _bound_gemm(abars, bbars))
        else:
            drive(tiling, lambda rows, inner, cols: _bound_gemm(abars[rows, inner], bbars[inner, cols]),
                add=lambda w, part: xp.add(w, part, out=w), finish=store)
        if kernels is not None and kernels.accurate_scales is not None:
            return kernels.accurate_scales(stats_a, stats_b, code, top, b is None)
        g, h = _quantize.accurate_exponents(sq_a, sq_b, code, top, need_a, need_b, rows=mt)
    if b is None:  # both sides take the smaller share: the result stays symmetric
        g = h = xp.minimum(g, h)
    return Scales(g - ex_a, h - ex_b, bad_a, bad_b, ex_a, ex_b)


def residue_dtype(mods: Moduli):
    """The dtype of stage (b)'s residues: uint8 for moduli up to 256, else int32."""
    return np.uint8 if max(mods.moduli) <= 256 else np.int32


def _mod(x, q):
    return np.mod(x, q, out=x)


class _Products:
    """Exact products of quantised matrices modulo each modulus, on one engine."""

    def __init__(self, mods: Moduli):
        self.mods = mods
        self.dtype = get_engine(mods.engine).dtype

    def gemm(self, q, a, b):
        """``a @ b mod q`` (float64 in ``[0, q)``) from balanced residue words."""
        m, n = a.shape[0], b.shape[1]
        sub = best_plan(q, m, a.shape[1], n, self.mods.engine, (1, 1), "horner")
        out = scratch((m, n), np.float64)
        return _multiword.multiply_words(sub, a[np.newaxis], b[np.newaxis], out)

    def gemms(self, q, *pairs) -> list[np.ndarray]:
        """:meth:`gemm` of each ``(a, b)`` of ``pairs``, independent products of one modulus,
        side by side where the workers allow (:func:`~modlin._engines.threads.side_by_side`)."""
        work = sum(a.shape[0] * a.shape[1] * b.shape[1] for a, b in pairs)
        return side_by_side([functools.partial(self.gemm, q, a, b) for a, b in pairs], work)

    def res(self, x, q, part=0):
        return _quantize.residues(x, q, self.dtype, part)

    def add(self, x, y, q):
        """Balanced ``x + y mod q`` of balanced words."""
        z = x.astype(np.float64) + y
        z -= q * (z > (q - 1) // 2)
        z += q * (z < -(q // 2))
        return z.astype(self.dtype)


def _empty(mods: Moduli, count: int, m: int, n: int) -> list[np.ndarray]:
    return [scratch((len(mods.moduli), m, n), residue_dtype(mods)) for _ in range(count)]


def gemm_residues(mods: Moduli, ap: Panel, bp: Panel) -> list[np.ndarray]:
    """Stage (b): residues of the exact ``A'B'`` of quantised panels (:class:`Panel`: ``ap`` of
    ``mt x kt`` rows of ``A``, ``bp`` of ``kt x nt`` columns of ``B``, with the shifts of
    stage (a)), one array per part, shape ``(N, mt, nt)``, entries in ``[0, q_i)``
    (:func:`residue_dtype`). The residue kernels quantise the panels as they read them."""
    m, n = ap.shape[0], bp.shape[1]
    P = _Products(mods)
    rc = _empty(mods, ap.parts, m, n)
    for i, (q, alg) in enumerate(zip(mods.moduli, mods.algorithms)):
        if alg == "real":
            rc[0][i] = P.gemm(q, P.res(ap, q), P.res(bp, q))
            continue
        if alg == "2m":
            s = sqrt_minus_one(q)
            a_plus, a_minus = _quantize.twom_residues(ap, q, s, P.dtype)
            b_plus, b_minus = _quantize.twom_residues(bp, q, s, P.dtype)
            X, Y = P.gemms(q, (a_plus, b_plus), (a_minus, b_minus))
            _quantize.twom_combine(X, Y, q, s, rc[0][i], rc[1][i])
            continue
        ar, ai, br, bi = (P.res(x, q, part) for x in (ap, bp) for part in (0, 1))
        if alg == "3m":
            rr, ii, ss = P.gemms(q, (ar, br), (ai, bi), (P.add(ar, ai, q), P.add(br, bi, q)))
            rc[1][i] = _mod(ss - rr - ii, q)
        else:
            rr, ii, ri, ir = P.gemms(q, (ar, br), (ai, bi), (ar, bi), (ai, br))
            rc[1][i] = _mod(ri + ir, q)
        rc[0][i] = _mod(rr - ii, q)
    return rc


def syrk_residues(mods: Moduli, ap: Panel, bp: Panel | None = None):
    """Stage (b) of ``A'A'^T`` (real) or ``A'A'^H`` (complex), one GEMM per 2M modulus.

    ``ap`` is a row panel ``I`` of ``A`` (``t x kt``, a :class:`Panel`); with
    ``bp=None`` the residues of the diagonal tile ``C_II`` are returned (one array per
    part, ``(N, t, t)``), else ``bp`` is a row panel ``J`` and the residues of the tiles
    ``C_IJ`` and ``C_JI`` come as a pair of such lists.

    Real SYRK halves ``k``: with ``Z = A_1 + i A_2`` (the two halves of the columns),
    ``A A^T = Re(Z Z^H)``, and modulo ``q`` with ``s**2 = -1`` the matrix
    ``X = (A_1 + s A_2)(A_1 - s A_2)^T`` is ``Re + s Im`` with ``Im`` antisymmetric, so
    ``A A^T = (X + X^T)/2``. HERK is the same with ``Z = A``: ``C_i = (X - X^T)/(2s)``.
    The block ``(I, J)`` of ``X^T`` is ``X_JI^T``, so a pair of tiles takes the two GEMMs
    ``X_IJ`` and ``X_JI`` (one per tile, as for the whole matrix).
    """
    pair = bp is not None
    bp = bp if pair else ap
    t, u = ap.shape[0], bp.shape[0]
    P = _Products(mods)
    real = ap.parts == 1
    rc = _empty(mods, ap.parts, t, u)
    rt = _empty(mods, ap.parts, u, t) if pair else None
    for i, (q, alg) in enumerate(zip(mods.moduli, mods.algorithms)):
        if alg == "2m":
            s = sqrt_minus_one(q)
            pa, ma = _quantize.twom_residues(ap.halves() if real else ap, q, s, P.dtype)
            pb, mb = (pa, ma) if not pair else _quantize.twom_residues(bp.halves() if real else bp, q, s, P.dtype)
            X, Xt = P.gemms(q, (pa, mb.T), (pb, ma.T)) if pair else 2 * [P.gemm(q, pa, mb.T)]
            for dst, x, y in ((rc, X, Xt.T), (rt, Xt, X.T))[: 1 + pair]:
                im = dst[1][i] if not real else np.empty_like(dst[0][i])
                _quantize.twom_combine(x, y, q, s, dst[0][i], im)
        elif alg == "real":
            rc[0][i] = P.gemm(q, P.res(ap, q), P.res(bp, q).T)
            if pair:
                rt[0][i] = rc[0][i].T
        else:  # 3M/4M moduli of a HERK: C_r = Ar Ar^T + Ai Ai^T, C_i = Ai Ar^T - (Ai Ar^T)^T
            ar, ai = P.res(ap, q, 0), P.res(ap, q, 1)
            br, bi = (ar, ai) if not pair else (P.res(bp, q, 0), P.res(bp, q, 1))
            if pair:
                ir, irt, rr, ii = P.gemms(q, (ai, br.T), (bi, ar.T), (ar, br.T), (ai, bi.T))
            else:
                ir, rr, ii = P.gemms(q, (ai, br.T), (ar, br.T), (ai, bi.T))
                irt = ir
            rc[0][i] = _mod(rr + ii, q)
            rc[1][i] = _mod(ir - irt.T, q)
            if pair:
                rt[0][i] = rc[0][i].T
                rt[1][i] = _mod(irt - ir.T, q)
    return (rc, rt) if pair else rc


def add_residues(acc: list[np.ndarray], part: list[np.ndarray], mods: Moduli) -> list[np.ndarray]:
    """``acc += part`` modulo each modulus, in place (the residues of two k-panels' products
    give those of their sum); ``acc`` and ``part`` as :func:`gemm_residues` returns them."""
    for x, y in zip(acc, part):
        _rns.add_residues(x, y, mods.moduli)
    return acc


def finish(res: list[np.ndarray], mods: Moduli, sa: np.ndarray, sb: np.ndarray, out: np.ndarray,
           crt=to_double) -> np.ndarray:
    """Stage (c): ``out[...] = C' * 2**-(sa_i + sb_j)`` correctly rounded, from the residues of
    an output tile (stage (b), summed over its k-panels): ``sa`` the shifts of its rows,
    ``sb`` of its columns, ``out`` a float64 or complex128 tile (``crt``: the CRT of
    :mod:`modlin._algorithms.gpu` on CuPy arrays). Lines holding Inf or NaN are left to
    :func:`native_lines`."""
    crt(res, mods.basis, sa, sb, out)
    return out


def _to_double_into(res: list[np.ndarray], basis: Basis, sa: np.ndarray, sb: np.ndarray, out: np.ndarray) -> None:
    """:func:`modlin._arith.crt.to_double` of each part's residues written into the tile ``out``
    (float64, or the parts of a complex128 tile): the ``crt`` of :func:`finish` on NumPy arrays."""
    if len(res) == 1:
        out[...] = to_double(res[0], basis, sa, sb)
    else:
        out.real = to_double(res[0], basis, sa, sb)
        out.imag = to_double(res[1], basis, sa, sb)


def native_lines(out: np.ndarray, a_rows: np.ndarray, b_cols: np.ndarray, bad_r: np.ndarray,
                 bad_c: np.ndarray, any_bad: tuple[bool, bool] | None = None) -> None:
    """Where Inf or NaN enter, IEEE semantics: ``out`` (a tile of the product of the row panel
    ``a_rows`` and column panel ``b_cols``, full ``k``) takes the native GEMM's values on
    its rows ``bad_r`` and columns ``bad_c``. Those entries are all Inf or NaN, whatever
    the order of the sums, so they do not depend on the tiles. ``any_bad``
    (:meth:`Scales.any_bad`), when known, spares reading the flags where no line of the
    whole product holds Inf or NaN (on CuPy, a wait for the device per tile); where some
    do, the rows and columns to recompute are a size only the host can act on."""
    rows_bad, cols_bad = (True, True) if any_bad is None else any_bad
    if rows_bad and bad_r.any():
        out[bad_r, :] = a_rows[bad_r] @ b_cols
    if cols_bad and bad_c.any():
        out[:, bad_c] = a_rows @ b_cols[:, bad_c]


#: Doubles from ``2**1024 * (1 - 2**-54)`` up round to infinity: a sum of products whose
#: bound stays below ``2**OVERFLOW_EXP`` never does.
OVERFLOW_EXP = 1024


def _truncated(x, shift, axis: int):
    """Lines of ``x`` (finite, rows for ``axis=1``) that the scaling does not keep exactly:
    some nonzero entry is not an integer times ``2**-shift`` of its line. Where
    ``x * 2**shift`` would be subnormal it is below 1, an integer only when 0; above,
    :func:`numpy.ldexp` is exact and the integer test decides."""
    xp = namespace(x)
    s = xp.expand_dims(shift, axis)
    bad = xp.zeros(x.shape[1 - axis], dtype=bool)
    for p in parts(x):
        y = xp.ldexp(p, s.astype(np.int32))
        tiny = xp.frexp(p)[1] + s < -1021
        bad |= ((p != 0) & (tiny | (xp.rint(y) != y))).any(axis=axis)
    return bad


def _integer_lines(x, axis: int):
    """``x`` (finite float64 or complex128, 2-D) as exact integers: an object array of Python
    ints ``X`` (the real and imaginary parts side by side along the other axis for complex
    ``x``) and the exponents ``e`` of its lines, ``x = X * 2**e`` line by line."""
    ps = parts(np.asarray(x))
    mants, exps = zip(*(np.frexp(p) for p in ps))
    ints = [(m * 2.0**53).astype(np.int64) for m in mants]
    low = [np.where(i != 0, e - 53, np.iinfo(np.int64).max) for i, e in zip(ints, exps)]
    base = np.minimum.reduce([v.min(axis=axis) if v.size else np.zeros(v.shape[1 - axis], np.int64) for v in low])
    base = np.where(base == np.iinfo(np.int64).max, 0, base)  # zero lines
    cols = [i.astype(object) << np.where(i != 0, e - 53 - np.expand_dims(base, axis), 0).astype(object)
            for i, e in zip(ints, exps)]
    return cols, base


def _round_scaled(c: int, e: int) -> float:
    """``c * 2**e`` correctly rounded to a double (Python's int-to-float conversion and integer
    true division both round to nearest even), infinite when it overflows."""
    try:
        return float(c << e) if e >= 0 else c / (1 << -e)
    except OverflowError:
        return math.inf if c > 0 else -math.inf


def _exact_block(a, b) -> np.ndarray:
    """``a @ b`` of finite float64 or complex128 matrices, every entry correctly rounded from the
    exact product (an exact integer product, :func:`modlin.intmul`, then one rounding)."""

    (xa, ea), (xb, eb) = _integer_lines(a, 1), _integer_lines(b, 0)
    if len(xa) == 1:
        prods = [intmul(xa[0], xb[0])]
    else:  # (ar + i ai)(br + i bi): [ar, -ai] @ [br; bi] and [ar, ai] @ [bi; br]
        prods = [intmul(np.concatenate([xa[0], -xa[1]], axis=1), np.concatenate([xb[0], xb[1]], axis=0)),
                 intmul(np.concatenate([xa[0], xa[1]], axis=1), np.concatenate([xb[1], xb[0]], axis=0))]
    scale = (ea[:, np.newaxis] + eb[np.newaxis, :]).astype(object)  # Python ints: shifts of any size
    rounded = [np.frompyfunc(_round_scaled, 2, 1)(np.asarray(c, dtype=object), scale).astype(np.float64)
               for c in prods]
    if len(rounded) == 1:
        return rounded[0]
    out = np.empty(scale.shape, dtype=np.complex128)  # not re + 1j * im: 1j * inf has a NaN real part
    out.real, out.imag = rounded
    return out


def _grow(k: int, complex_: bool) -> int:
    """Bits by which ``|sum a b|`` may exceed ``max|a| max|b|``: ``k`` terms, twice that for
    complex parts."""
    return max(k - 1, 0).bit_length() + complex_


def may_overflow(sc: Scales, k: int, complex_: bool) -> bool:
    """Whether any result of a product with the scales ``sc`` may reach the overflow threshold
    (:func:`overflow_fixes` then looks tile by tile): read once per product, so that the
    tiles of a CuPy product need no host round trip when none can."""
    if not (len(sc.ea) and len(sc.eb)):
        top = 0
    elif sc.summary is not None:
        top = sc.summary[2] + sc.summary[3]
    else:
        top = int(sc.ea.max()) + int(sc.eb.max())
    return bool(k) and top + _grow(k, complex_) >= OVERFLOW_EXP


def overflow_fixes(a_rows, b_cols, sc_rows: tuple, sc_cols: tuple, complex_: bool):
    """The entries of ``a_rows @ b_cols`` (a row panel and a column panel, full ``k``) whose
    bound ``k max|a_i| max|b_j|`` may reach the overflow threshold while row ``i`` or column
    ``j`` lost bits to the scaling, and their correctly rounded exact values: ``(rows,
    cols, fix, exact)``, ``fix`` a bool mask over ``rows x cols`` and ``exact`` the exact
    product's rounding there (NumPy arrays), or None when there are none.

    There the truncation error, relative to that bound, can be as large as the result
    itself (``[1e300, 1.0] @ [1e10, 1e300]`` scales ``1e10`` and ``1.0`` to zero, and the
    truncated product is 0 where the exact one, ``1e310``, rounds to infinity), so
    whether a result is infinite must not depend on it. Elsewhere the truncated
    product's rounding is the exact one's (nothing was lost) or the bound keeps it
    finite. ``sc_rows = (sa, bad, ea)`` of the rows and ``sc_cols`` of the columns, from
    :class:`Scales` (NumPy or CuPy vectors); the panels may be NumPy, CuPy or dask
    arrays, read only on the rows and columns at risk. Typical inputs have none, and
    then this costs two maxima of short vectors."""
    (sa, bad_r, ea), (sb, bad_c, eb) = (tuple(host(v) for v in sc) for sc in (sc_rows, sc_cols))
    k = a_rows.shape[1]
    # |sum a b| <= k max|a| max|b| (twice that for complex parts): below 2**OVERFLOW_EXP it is finite
    grow = _grow(k, complex_)
    if not k or int(ea.max(initial=0)) + int(eb.max(initial=0)) + grow < OVERFLOW_EXP:
        return None
    risky = (ea[:, None] + eb[None, :] + grow >= OVERFLOW_EXP) & ~bad_r[:, None] & ~bad_c[None, :]
    rows, cols = np.nonzero(risky.any(axis=1))[0], np.nonzero(risky.any(axis=0))[0]
    if not len(rows):
        return None
    a, b = host(a_rows[_index(a_rows, rows)]), host(b_cols[:, _index(b_cols, cols)])
    fix = risky[rows][:, cols] & (_truncated(a, sa[rows], 1)[:, None] | _truncated(b, sb[cols], 0)[None, :])
    keep_r, keep_c = fix.any(axis=1), fix.any(axis=0)
    if not keep_r.any():
        return None
    return rows[keep_r], cols[keep_c], fix[keep_r][:, keep_c], _exact_block(a[keep_r], b[:, keep_c])


def _index(x, i: np.ndarray):
    """The NumPy index vector ``i`` on ``x``'s device."""
    return namespace(x).asarray(i) if is_cupy(x) else i


def host(x) -> np.ndarray:
    """``x`` as a NumPy array, from NumPy, CuPy or dask."""
    if is_cupy(x):
        return x.get()
    return np.asarray(x.compute() if hasattr(x, "dask") else x)


def exact_overflow(out, a_rows, b_cols, sc_rows: tuple, sc_cols: tuple) -> None:
    """``out`` (a tile of ``a_rows @ b_cols``, NumPy or CuPy) takes the exact product's rounding
    on the entries :func:`overflow_fixes` names."""
    found = overflow_fixes(a_rows, b_cols, sc_rows, sc_cols, out.dtype.kind == "c")
    if found is None:
        return
    rows, cols, fix, exact = found
    xp = namespace(out)
    at = (xp.asarray(rows)[:, None], xp.asarray(cols)[None, :])
    out[at] = xp.where(xp.asarray(fix), xp.asarray(exact), out[at])


#: Live float64 arrays of a tile's size, per modulus, while stage (b) multiplies (the
#: products, the GEMMs' accumulators and the combination's temporaries; 4M's four GEMMs
#: run two at a time side by side, each with its own accumulator: 1.001 of the model at
#: 6, traced, in 64-row tiles).
_PRODUCTS = {"real": 3, "2m": 4, "3m": 6, "4m": 7}


#: Live words of a panel's size, per modulus: the real residues, 2M's two images, 3M's two
#: parts and their sum, 4M's two parts.
_WORDS = {"real": 1, "2m": 2, "3m": 3, "4m": 2}


def _kernel_memory(mods: Moduli, tile: tuple[int, int, int], pairs: int, parts: int) -> int:
    """Bytes the CPU's stage (b) allocates for a tile beside the residues it returns: the
    words and products of one modulus at a time (``pairs`` tiles at once). The quantised
    panels are never stored: the residue kernels quantise each entry as they read it."""
    mt, kt, nt = tile
    w = get_engine(mods.engine).dtype.itemsize
    algs = set(mods.algorithms)
    words = max(_WORDS[a] for a in algs) * w * (mt * kt + kt * nt) * pairs
    products = max(_PRODUCTS[a] for a in algs) * 8 * mt * nt * pairs
    if mods.engine == "int8":  # the CPU emulates the int8 GEMM with float64 copies of one GEMM's words
        products += 8 * (mt * kt + kt * nt + mt * nt)
    return words + products


def workspace(mods: Moduli, complex_: bool, shape: tuple[int, int, int], tile: tuple[int, int, int],
              mode: str, symmetric: bool = False, kernels: Kernels | None = None) -> int:
    """Bytes the three stages allocate beyond operands and result for a product of
    ``shape = (m, k, n)`` cut into tiles ``(mt, kt, nt)`` (an upper bound: the tile
    scheduler's model), stages (b) and (c) run by ``kernels`` (default :data:`CPU`).

    Stage (a) reads pieces of ``mt x kt`` and ``kt x nt`` in one pass of a kernel, with no
    temporaries (a device's kernels keep ``kernels.line_bytes`` per line); "accurate"
    mode keeps the uint8 bounds of both operands and of the bound product through the
    whole product. Stage (b), per tile: the kernels' quantised panels, words and products
    (``kernels.memory``), a row-major copy of a panel, and the residues of every modulus
    (twice with k-panels: the sum and the next panel's). Stage (c): the CRT's doubles. A
    symmetric product's tiles come in pairs ``(I, J)``, ``(J, I)``: everything per tile doubles.
    """
    kernels = CPU if kernels is None else kernels
    m, k, n = shape
    mt, kt, nt = tile
    P = 2 if complex_ else 1
    rs = np.dtype(residue_dtype(mods)).itemsize
    lines = (96 + kernels.line_bytes) * (m + n)  # the shifts, bounds and flags of every line
    keep = (m * k + (0 if symmetric else k * n) + m * n) if mode == "accurate" else 0
    scale = 0
    if mode == "accurate":  # the bound GEMM of a tile; the exponents' int64 passes over mt rows
        scale = max(8 * (mt * kt + kt * nt + 3 * mt * nt), 24 * mt * n)
    pairs = 2 if symmetric else 1
    panels = 8 * max(mt * kt, kt * nt)  # numpy's temporaries beside the kernels (the factors, a mask)
    residues = P * len(mods.moduli) * mt * nt * rs * pairs * (2 if kt < k else 1)
    crt = 16 * mt * nt
    # a quarter more than the arrays counted: the temporaries of numpy expressions between them
    return lines + keep + max(scale, (panels + kernels.memory(mods, tile, pairs, P) + residues) * 5 // 4,
                              residues + crt)


#: The NumPy kernels of stages (b) and (c).
CPU = Kernels(gemm_residues, syrk_residues, add_residues, _to_double_into, _kernel_memory)
