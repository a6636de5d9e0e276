"""Ozaki-II's stages (b) and (c) on CuPy arrays: fused kernels around int8 tensor-core GEMMs.

Per operand panel, one kernel reads each entry once, quantises it with its line's shift
(stage (a)'s result) and writes its balanced int8 residues (2M's two images for complex
operands) for every modulus, ``B``'s transposed so that every GEMM is cuBLAS' "TN" int8
GEMM with no copy. Per modulus, one GEMM into a reused int32 buffer and one kernel that
reduces it (2M: combines the two products) into the tile's residues, with 32-bit Barrett
arithmetic. Then one O(N) CRT kernel per part writes the correctly rounded doubles into
the output tile itself (a complex tile's parts in place). These are the GPU's
:class:`modlin._ozaki_core.Kernels` (:data:`KERNELS`): the tile loop and stage (a) are the
CPU's.
"""

from __future__ import annotations

import numpy as np

from . import _cuda
from ._ozaki_core import SCALE_PASS, Kernels, Scales
from ._quantize import G_MAX, T_BITS, check_bits

#: Gap bins per line of :func:`line_stats`' counts (MODLIN_GAPS in kernels/modlin_elem.cuh).
GAPS = G_MAX + 2

__all__ = ["KERNELS", "add_residues", "fast_scales", "gemm_residues", "line_stats", "syrk_residues", "to_double"]


def _cp():
    return _cuda._cupy()


def _moduli(mods, alg: str) -> tuple[list[int], list[int]]:
    idx = [i for i, a in enumerate(mods.algorithms) if a == alg]
    return idx, [mods.moduli[i] for i in idx]


def _roots(qs) -> list[int]:
    from .gaussian import sqrt_minus_one

    return [sqrt_minus_one(q) for q in qs]


def _source(p):
    """How the residue kernels read a :class:`~modlin._quantize.Panel`: ``(x, ldx, rows,
    parts, step)``, ``parts`` the ``(offset, length)`` of each part in a row of doubles (the
    real and imaginary parts of a complex panel, real SYRK's two halves), and the integer
    matrix's column count."""
    cp = _cp()
    x = p.x
    if x.shape[1] > 1 and x.strides[1] != x.itemsize:
        x = cp.ascontiguousarray(x)  # columns must be contiguous (the front doors copy other layouts)
    R, C = x.shape
    ldx = x.strides[0] // 8 if R > 1 else 0
    if x.dtype.kind == "c":
        return x, ldx, R, [(0, C), (1, C)], 2, C
    if p._halves:
        h = (C + 1) // 2
        return x, ldx, R, [(0, h), (h, C - h)], 1, h
    return x, ldx, R, [(0, C)], 1, C


def _counter(p):
    """The panel's device counter of lost entries (:meth:`~modlin._quantize.Panel.lost`), taken
    by the first kernel that reads the panel, or the null pointer when it is not counted."""
    c = p.take_counter()
    return np.uint64(0) if c is None else c


def _panel_residues(p, table, N: int, rows: int, width: int, transpose: bool, twom: bool, part: int = 0,
                    counter=None):
    """The int8 residues of a panel's integers for the ``N`` moduli of ``table``: shape
    ``(N, rows, width)`` (a row panel ``t x k``: ``rows = t``, ``width = pad4(k)``; a column
    panel ``k x n`` transposed: ``rows = pad4(n)``, ``width = pad4(k)``), pads zero; 2M's two
    images (``twom``) or the residues of part ``part``. The nonzero entries read that round
    to zero are added to ``counter`` (default: the panel's own, :func:`_counter`; the parts
    of 3M/4M share one)."""
    cp = _cp()
    counter = _counter(p) if counter is None else counter
    x, ldx, R, parts, step, cols = _source(p)
    by_cols = np.int32(p.axis == 0)
    shift = cp.ascontiguousarray(p.shift, dtype=cp.int64)
    bad = cp.ascontiguousarray(p.bad, dtype=cp.bool_).view(cp.uint8)
    Rp, Cp = (width, rows) if transpose else (rows, width)  # the source positions, pads included
    geometry = (np.int64(rows * width), np.int64(width), np.int64(Rp), np.int64(Cp), np.int32(transpose))
    if twom:
        plus = cp.empty((N, rows, width), dtype=cp.int8)
        minus = cp.empty_like(plus)
        (o0, l0), (o1, l1) = parts
        _cuda.launch("ozaki_twom_i8", Rp * Cp, x, np.int64(ldx), np.int64(R), np.int64(l0), np.int64(l1),
                     np.int64(o0), np.int64(o1), np.int64(step), shift, bad, by_cols, table, np.int32(N), plus, minus,
                     *geometry, counter, shape=(Rp, Cp), tiled=True)
        return plus, minus
    out = cp.empty((N, rows, width), dtype=cp.int8)
    off, length = parts[part]
    _cuda.launch("ozaki_residues_i8", Rp * Cp, x, np.int64(ldx), np.int64(R), np.int64(length), np.int64(off),
                 np.int64(step), shift, bad, by_cols, table, np.int32(N), out, *geometry,
                 counter, shape=(Rp, Cp), tiled=True)
    return out


def _combine(X, Y, ldx: int, table, i: int, q: int, s: int, acc: bool, re, im) -> None:
    m, n = re.shape
    _cuda.launch("twom_combine_i32_u8", m * n, X, Y, np.int64(ldx), np.int64(m), np.int64(n), table, np.int32(i),
                 np.uint32((q + 1) // 2), np.uint32(pow(2 * s, -1, q)), np.int32(acc), re, im, shape=(m, n))


def _twom_products(pa, ma, pb, mb, k: int, table, qs, roots, re, im) -> None:
    """2M's residues from the images (laid out for :func:`modlin._cuda.gemm_i8_tn`): per
    modulus and k-chunk, ``X = pa pb^T`` and ``Y = ma mb^T`` into two reused int32 buffers,
    combined into ``re[i]``, ``im[i]`` (added to them after the first chunk)."""
    cp = _cp()
    m, np_ = pa.shape[1], pb.shape[1]
    X, Y = cp.empty((m, np_), dtype=cp.int32), cp.empty((m, np_), dtype=cp.int32)
    for i, (q, s) in enumerate(zip(qs, roots)):
        for k0 in range(0, max(k, 1), _cuda.KCHUNK):
            k1 = min(_cuda.pad4(k), k0 + _cuda.KCHUNK)
            _cuda.gemm_i8_tn(pa[i][:, k0:k1], pb[i][:, k0:k1], X)
            _cuda.gemm_i8_tn(ma[i][:, k0:k1], mb[i][:, k0:k1], Y)
            _combine(X, Y, np_, table, i, q, s, k0 > 0, re[i], im[i])


def _sum_balanced(x, y, moduli):
    """Balanced int8 ``x + y mod q`` of balanced int8 residues (3M's sums)."""
    cp = _cp()
    q = cp.asarray(moduli, dtype=cp.int16)[:, None, None]
    z = x.astype(cp.int16) + y
    z -= q * (z > (q - 1) // 2)
    z += q * (z < -(q // 2))
    return z.astype(cp.int8)


def _products(ra, rbt, table, k: int, shape):
    out = _cp().empty(shape, dtype=_cp().uint8)
    _cuda.products_tn(ra, rbt, table, k, out)
    return out


def gemm_residues(mods, ap, bp) -> list:
    """Residues ``(N, m, n)`` (uint8) of the exact ``A'B'``, one array per part, from a row
    panel ``ap`` of ``A`` and a column panel ``bp`` of ``B`` (:class:`~modlin._quantize.Panel`)."""
    cp = _cp()
    N = len(mods.moduli)
    (m, k), n = ap.shape, bp.shape[1]
    kp, np_ = _cuda.pad4(k), _cuda.pad4(n)
    rc = [cp.empty((N, m, n), dtype=cp.uint8) for _ in range(ap.parts)]
    idx, qs = _moduli(mods, "real")
    if qs:
        table = _cuda.small_table(qs)
        ra = _panel_residues(ap, table, len(qs), m, kp, False, False)
        rbt = _panel_residues(bp, table, len(qs), np_, kp, True, False)
        if _contiguous(idx):
            _cuda.products_tn(ra, rbt, table, k, rc[0][idx[0]:idx[-1] + 1])
        else:
            _scatter(rc[0], idx, _products(ra, rbt, table, k, (len(qs), m, n)))
        del ra, rbt
    idx, qs = _moduli(mods, "2m")
    if qs:
        roots = _roots(qs)
        table = _cuda.small_table(qs, roots)
        pa, ma = _panel_residues(ap, table, len(qs), m, kp, False, True)
        pb, mb = _panel_residues(bp, table, len(qs), np_, kp, True, True)
        if _contiguous(idx):
            sl = slice(idx[0], idx[-1] + 1)
            _twom_products(pa, ma, pb, mb, k, table, qs, roots, rc[0][sl], rc[1][sl])
        else:
            re, im = cp.empty((len(qs), m, n), dtype=cp.uint8), cp.empty((len(qs), m, n), dtype=cp.uint8)
            _twom_products(pa, ma, pb, mb, k, table, qs, roots, re, im)
            _scatter(rc[0], idx, re)
            _scatter(rc[1], idx, im)
        del pa, ma, pb, mb
    for alg in ("3m", "4m"):
        idx, qs = _moduli(mods, alg)
        if not qs:
            continue
        table = _cuda.small_table(qs)
        q = cp.asarray(qs, dtype=cp.int32)[:, None, None]
        ca, cb = _counter(ap), _counter(bp)
        ar, ai = (_panel_residues(ap, table, len(qs), m, kp, False, False, part, ca) for part in (0, 1))
        br, bi = (_panel_residues(bp, table, len(qs), np_, kp, True, False, part, cb) for part in (0, 1))
        shape = (len(qs), m, n)
        rr, ii = _products(ar, br, table, k, shape), _products(ai, bi, table, k, shape)
        if alg == "3m":
            t = _products(_sum_balanced(ar, ai, qs), _sum_balanced(br, bi, qs), table, k, shape)
            im = (t.astype(cp.int32) - rr - ii) % q
        else:
            im = (_products(ar, bi, table, k, shape).astype(cp.int32) + _products(ai, br, table, k, shape)) % q
        _scatter(rc[0], idx, ((rr.astype(cp.int32) - ii) % q).astype(cp.uint8))
        _scatter(rc[1], idx, im.astype(cp.uint8))
    return rc


def _contiguous(idx) -> bool:
    return bool(idx) and list(idx) == list(range(idx[0], idx[-1] + 1))


def _scatter(dst, idx, src) -> None:
    if _contiguous(idx):
        dst[idx[0]:idx[-1] + 1] = src
    else:
        dst[idx] = src


def syrk_residues(mods, ap, bp=None):
    """Residues of the exact ``A'A'^T`` (real, halving k) or ``A'A'^H`` (complex):
    :func:`modlin._ozaki_core.syrk_residues` on the GPU's kernels; with ``bp`` (the row
    panel ``J``), those of the tiles ``C_IJ`` and ``C_JI``, as a pair.

    Both operands are row panels, whose residues are laid out as "TN" GEMMs take them.
    2M (real SYRK's ``Z = A_1 + i A_2``, or ``A`` itself): ``X = Z_I^+ (Z_J^-)^T`` and
    ``Y = Z_I^- (Z_J^+)^T`` give ``C_IJ`` as 2M's combination; ``C_JI`` is its transpose
    (real part) and its negated transpose (imaginary part), and a diagonal tile has
    ``Y = X^T``: one kernel combines every modulus' residues into both tiles."""
    cp = _cp()
    pair = bp is not None
    bq = bp if pair else ap
    N = len(mods.moduli)
    (t, k), u = ap.shape, bq.shape[0]
    kp = _cuda.pad4(k)
    real = ap.x.dtype.kind != "c"
    rc = [cp.empty((N, t, u), dtype=cp.uint8) for _ in range(1 if real else 2)]
    rt = [cp.empty((N, u, t), dtype=cp.uint8) for _ in rc] if pair else None

    def T(x):
        return cp.ascontiguousarray(x.transpose(0, 2, 1))

    ta, tb = _cuda.pad4(t), _cuda.pad4(u)  # rows of the residues: a "TN" GEMM's n is padded
    idx, qs = _moduli(mods, "2m")
    if qs:
        roots = _roots(qs)
        table = _cuda.small_table(qs, roots)
        pa, ma = _panel_residues(ap.halves() if real else ap, table, len(qs), ta, kp, False, True)
        pb, mb = _panel_residues(bq.halves() if real else bq, table, len(qs), tb, kp, False, True) if pair \
            else (pa, ma)
        shape = (len(qs), t, u)
        x = _products(pa[:, :t], mb, table, k, shape)
        y = _products(ma[:, :t], pb, table, k, shape) if pair else None  # a diagonal tile's is x^T
        del pa, ma, pb, mb
        inv2s = cp.asarray([pow(2 * s, -1, v) for v, s in zip(qs, roots)], dtype=cp.uint32)
        direct = _contiguous(idx)
        sl = slice(idx[0], idx[-1] + 1)

        def target(dst, want, rows, cols):  # the residues' own planes, or a temporary to scatter
            if not want:
                return None
            return dst[sl] if direct else cp.empty((len(qs), rows, cols), dtype=cp.uint8)

        outs = [target(rc[0], True, t, u), target(rc[1] if not real else None, not real, t, u),
                target(rt[0] if pair else None, pair, u, t), target(rt[1] if pair and not real else None,
                                                                 pair and not real, u, t)]
        null = np.uint64(0)
        _cuda.launch("syrk_combine_u8", t * u, x, null if y is None else y, np.int32(len(qs)), np.int64(t),
                     np.int64(u), table, inv2s, *[null if o is None else o for o in outs], shape=(t, u))
        if not direct:
            for dst, o in zip((rc[0], rc[1] if not real else None, rt[0] if pair else None,
                               rt[1] if pair and not real else None), outs):
                if o is not None:
                    _scatter(dst, idx, o)
    idx, qs = _moduli(mods, "real")
    if qs:
        table = _cuda.small_table(qs)
        ra = _panel_residues(ap, table, len(qs), ta, kp, False, False)
        rb = _panel_residues(bq, table, len(qs), tb, kp, False, False) if pair else ra
        x = _products(ra[:, :t], rb, table, k, (len(qs), t, u))
        _scatter(rc[0], idx, x)
        if pair:
            _scatter(rt[0], idx, T(x))
    idx = [i for i, a in enumerate(mods.algorithms) if a in ("3m", "4m")]
    if idx:  # C_r = Ar Ar^T + Ai Ai^T, C_i = Ai Ar^T - (Ai Ar^T)^T
        qs = [mods.moduli[i] for i in idx]
        table = _cuda.small_table(qs)
        q = cp.asarray(qs, dtype=cp.int32)[:, None, None]
        ca = _counter(ap)
        ar, ai = (_panel_residues(ap, table, len(qs), ta, kp, False, False, part, ca) for part in (0, 1))
        cb = _counter(bq) if pair else None
        br, bi = (_panel_residues(bq, table, len(qs), tb, kp, False, False, part, cb) for part in (0, 1)) if pair \
            else (ar, ai)
        ar, ai = ar[:, :t], ai[:, :t]
        shape = (len(qs), t, u)
        ir = _products(ai, br, table, k, shape).astype(cp.int32)
        irt = _products(ar, bi, table, k, shape).astype(cp.int32)  # (Bi Ar^T)^T
        re = ((_products(ar, br, table, k, shape).astype(cp.int32) + _products(ai, bi, table, k, shape))
              % q).astype(cp.uint8)
        _scatter(rc[0], idx, re)
        _scatter(rc[1], idx, ((ir - irt) % q).astype(cp.uint8))
        if pair:
            _scatter(rt[0], idx, T(re))
            _scatter(rt[1], idx, T(((irt - ir) % q).astype(cp.uint8)))
    return (rc, rt) if pair else rc


def add_residues(acc, part, mods):
    """``acc += part`` modulo each modulus, in place (:func:`modlin._ozaki_core.add_residues`)."""
    cp = _cp()
    q = cp.asarray(mods.moduli, dtype=cp.int16)[:, None, None]
    for x, y in zip(acc, part):
        z = x.astype(cp.int16) + y  # residues below 256: their sum needs 9 bits
        z -= q * (z >= q)
        x[...] = z
    return acc


#: Bytes per entry of the panels' padded residues (``mt x kp`` and ``np x kp``) per modulus
#: of each algorithm (2M: two images; 3M: the parts and their sums), and bytes per result
#: entry of the int32 buffers the GEMMs share across moduli (2M: two) and of what 3M/4M
#: add per modulus (their uint8 products and int32 sums).
_PANEL_BYTES = {"real": 1, "2m": 2, "3m": 6, "4m": 2}
_BUFFER_BYTES = {"real": 4, "2m": 8, "3m": 4, "4m": 4}
_RESULT_BYTES = {"real": 0, "2m": 0, "3m": 19, "4m": 19}


def memory(mods, tile, pairs: int, parts: int) -> int:
    """The device memory the residue kernels allocate for one tile beside the residues they
    return (``pairs`` tiles at once): the residues of both panels for the moduli of one
    algorithm (the largest group), the int32 GEMM buffers, and 3M/4M's products. The
    quantised panels are never stored: the residue kernels quantise as they read."""
    mt, kt, nt = tile
    kp, np_ = _cuda.pad4(kt), _cuda.pad4(nt)
    ops, out = mt * kp + kp * max(np_, _cuda.pad4(mt)), mt * np_
    return pairs * max(mods.algorithms.count(a) * (_PANEL_BYTES[a] * ops + _RESULT_BYTES[a] * out)
                       + _BUFFER_BYTES[a] * out for a in set(mods.algorithms))


def to_double(res, basis, sa, sb, out) -> None:
    """:func:`modlin._crtfloat.to_double` on the GPU, written into the tile ``out`` (float64, or
    both parts of a complex128 tile, interleaved in place): one O(N) CRT kernel for all parts."""
    cp = _cp()
    N, m, n = res[0].shape
    table, limbs, minv, L = _cuda.crt_constants(basis.moduli)
    target = out if out.dtype.kind != "c" else out.real  # the imaginary part one double further
    ld = target.strides[0] // 8 if m > 1 else 0
    parts = [cp.ascontiguousarray(r, dtype=cp.uint8) for r in res]
    _cuda.launch("crt_to_double_u8", m * n, parts[0], parts[1] if len(parts) == 2 else np.uint64(0), np.int32(N),
                 np.int64(m), np.int64(n), table, limbs, minv, np.int32(L), cp.ascontiguousarray(sa, dtype=cp.int64),
                 cp.ascontiguousarray(sb, dtype=cp.int64), target, np.int64(ld), np.int64(target.strides[1] // 8),
                 shape=(m, n))


def line_stats(x, axis: int, lines: int, inner: int, bars=None):
    """Stage (a)'s statistics of every row (``axis=1``) or column (``axis=0``) of the whole
    operand ``x`` in one kernel (:func:`modlin._ozaki_core._line_stats`'s ``(bad, ex, need,
    sq)``, the bounds into ``bars`` when given), and each line's counts of gaps below its
    largest entry (``hist``, ``(lines, 2 GAPS)`` uint32: what tells :func:`fast_scales` how
    many entries the shifts will round to zero): a block per row, or per strip of 32
    columns. ``lines`` and ``inner`` (the CPU's pieces) are not needed: it makes no temporaries."""
    cp = _cp()
    if x.shape[1] > 1 and x.strides[1] != x.itemsize:
        x = cp.ascontiguousarray(x)
    R, C = x.shape
    count = R if axis == 1 else C
    bad = cp.empty(count, dtype=cp.bool_)
    ex, need = cp.empty(count, dtype=cp.int64), cp.empty(count, dtype=cp.int64)
    sq = cp.empty(count, dtype=cp.float64)
    hist = cp.zeros((count, 2 * GAPS), dtype=cp.uint32) if R * C == 0 else cp.empty((count, 2 * GAPS), dtype=cp.uint32)
    complex_ = x.dtype.kind == "c"
    args = (x, np.int64(x.strides[0] // 8 if R > 1 else 0), np.int64(R), np.int64(C), np.int64(1),
            np.int64(2 if complex_ else 1), np.int32(2 if complex_ else 1), np.int32(T_BITS), bad.view(cp.uint8), ex,
            need, sq, np.uint64(0) if bars is None else bars, np.int64(0 if bars is None else bars.strides[0]), hist)
    if count == 0:
        return bad, ex, need, sq, hist
    if axis == 1:
        _cuda.launch("line_stats_rows", R * C, *args, grid=((min(R, 2**31 - 1),), (256,)))
    else:
        _cuda.launch("line_stats_cols", R * C, *args, grid=((min(-(-C // 32), 2**31 - 1),), (32, 8)))
    if R * C == 0:  # lines of length 0: no entries, no statistics to gather
        bad[...] = False
        ex[...] = 0
        need[...] = T_BITS
        sq[...] = 0.0
    return bad, ex, need, sq, hist


def fast_scales(stats_a, stats_b, top: int, symmetric: bool) -> Scales:
    """"fast" mode's :class:`~modlin._ozaki_core.Scales` from the line statistics, in one
    kernel (:func:`modlin._quantize.fast_exponents` and the shifts) and one transfer to the
    host: the least bits of a row and of a column (too few moduli raise here, as on the
    CPU), whether any line holds Inf or NaN, the largest exponents, and how many nonzero
    entries of each operand the shifts round to zero (for the AccuracyWarning). That
    transfer is the product's one wait for the device: the tile loop's branches (lines to
    recompute natively, results that may overflow) depend on it, and nothing after it
    needs another."""
    cp = _cp()
    bad_a, ex_a, need_a, sq_a, hist_a = stats_a
    bad_b, ex_b, need_b, sq_b, hist_b = stats_b
    m, n = ex_a.size, ex_b.size
    sa, sb = cp.empty(m, dtype=cp.int64), cp.empty(n, dtype=cp.int64)
    summary = cp.empty(8, dtype=cp.int64)  # the kernel writes all eight
    _cuda.launch("fast_scales", 1, ex_a, need_a, sq_a, bad_a.view(cp.uint8), np.int64(m), ex_b, need_b, sq_b,
                 bad_b.view(cp.uint8), np.int64(n), np.int32(symmetric), np.int64(top), np.int32(T_BITS),
                 np.int32(G_MAX), hist_a, hist_b, sa, sb, summary, grid=((1,), (1024,)))
    min_g, min_h, any_a, any_b, max_ea, max_eb, lost_a, lost_b = (int(v) for v in summary.get())
    for count, least, what in ((m, min_g, "A's rows"), (n, min_h, "B's columns")):
        check_bits(least if count else T_BITS, what)
    return Scales(sa, sb, bad_a, bad_b, ex_a, ex_b, (bool(any_a), bool(any_b), max_ea, max_eb, lost_a, lost_b))


#: The CuPy kernels of stages (a), (b) and (c).
KERNELS = Kernels(gemm_residues, syrk_residues, add_residues, to_double, memory, scale_pass=SCALE_PASS,
                  line_stats=line_stats, fast_scales=fast_scales)
