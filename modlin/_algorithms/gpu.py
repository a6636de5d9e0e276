"""The CUDA backend: every stage modlin runs on a GPU, in one place.

The algorithms are written once; each takes its element-wise stages from a table for
the arrays it is given: this module's tables for CuPy arrays, the CPU's (numba kernels)
for NumPy arrays. What is here launches the kernels of ``kernels/`` and cuBLAS' int8
GEMMs through :mod:`modlin._engines.cuda` (the raw bindings):

* :data:`OZAKI`: Ozaki-II's stages (a), (b) and (c), :class:`modlin._algorithms.quantize.Kernels`.
  Stage (a): one line-statistics kernel per operand and one kernel for the shifts and a
  summary, the product's one host synchronisation. Stage (b): per operand panel one kernel
  reads each entry once, quantises it and writes its int8 residues (2M's images for
  complex operands) for every modulus, ``B``'s transposed for cuBLAS' "TN" GEMM; per
  modulus one GEMM (2M: two) into a reused int32 buffer and one kernel reducing (2M:
  combining) it into the tile's residues, with 32-bit Barrett arithmetic. Stage (c): one
  O(N) CRT kernel, exact in 32-bit limbs and correctly rounded, writing the output tile.
* The residue number systems of ``modlin.matmul`` (:func:`rns_multiply`) and of Gaussian
  2M (:func:`twom_multiply`): the same three kinds of kernel.
* :data:`MULTIWORD`: the fp64 multiword path's stages (:class:`modlin._arith.modular.Stages`).
"""

from __future__ import annotations

import math

import numpy as np

from modlin._algorithms.quantize import G_MAX, T_BITS, Kernels, Scales, check_bits
from modlin._arith import modular as _modular
from modlin._arith.moduli import sqrt_minus_one
from modlin._engines import cuda as _cuda

#: Gap bins per line of :func:`line_stats`' counts (MODLIN_GAPS in kernels/modlin_elem.cuh).
GAPS = G_MAX + 2


def _cp():
    return _cuda.cupy_module()


def _moduli(mods, alg: str) -> tuple[list[int], list[int]]:
    idx = [i for i, a in enumerate(mods.algorithms) if a == alg]
    return idx, [mods.moduli[i] for i in idx]


def _roots(qs) -> list[int]:
    return [sqrt_minus_one(q) for q in qs]


def _source(p):
    """How the residue kernels read a :class:`~modlin._algorithms.quantize.Panel`: ``(x, ldx, rows,
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


def _panel_residues(p, table, N: int, rows: int, width: int, transpose: bool, twom: bool, part: int = 0):
    """The int8 residues of a panel's integers for the ``N`` moduli of ``table``: shape
    ``(N, rows, width)`` (a row panel ``t x k``: ``rows = t``, ``width = pad4(k)``; a column
    panel ``k x n`` transposed: ``rows = pad4(n)``, ``width = pad4(k)``), pads zero; 2M's two
    images (``twom``) or the residues of part ``part``."""
    cp = _cp()
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
                     *geometry, shape=(Rp, Cp), tiled=True)
        return plus, minus
    out = cp.empty((N, rows, width), dtype=cp.int8)
    off, length = parts[part]
    _cuda.launch("ozaki_residues_i8", Rp * Cp, x, np.int64(ldx), np.int64(R), np.int64(length), np.int64(off),
                 np.int64(step), shift, bad, by_cols, table, np.int32(N), out, *geometry, shape=(Rp, Cp),
                 tiled=True)
    return out


def _combine(X, Y, ldx: int, table, i: int, q: int, s: int, acc: bool, re, im) -> None:
    m, n = re.shape
    _cuda.launch("twom_combine_i32_u8", m * n, X, Y, np.int64(ldx), np.int64(m), np.int64(n), table, np.int32(i),
                 np.uint32((q + 1) // 2), np.uint32(pow(2 * s, -1, q)), np.int32(acc), re, im, shape=(m, n))


def _twom_products(pa, ma, pb, mb, k: int, table, qs, roots, re, im) -> None:
    """2M's residues from the images (laid out for :func:`modlin._engines.cuda.gemm_i8_tn`): per
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
    panel ``ap`` of ``A`` and a column panel ``bp`` of ``B`` (:class:`~modlin._algorithms.quantize.Panel`)."""
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
        ar, ai = (_panel_residues(ap, table, len(qs), m, kp, False, False, part) for part in (0, 1))
        br, bi = (_panel_residues(bp, table, len(qs), np_, kp, True, False, part) for part in (0, 1))
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
    :func:`modlin._algorithms.ozaki.syrk_residues` on the GPU's kernels; with ``bp`` (the row
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
        ar, ai = (_panel_residues(ap, table, len(qs), ta, kp, False, False, part) for part in (0, 1))
        br, bi = (_panel_residues(bq, table, len(qs), tb, kp, False, False, part) for part in (0, 1)) if pair \
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
    """``acc += part`` modulo each modulus, in place (:func:`modlin._algorithms.ozaki.add_residues`)."""
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
    """:func:`modlin._arith.crt.to_double` on the GPU, written into the tile ``out`` (float64, or
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
    operand ``x`` in one kernel (:func:`modlin._algorithms.ozaki._line_stats`'s ``(bad, ex, need,
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
    """"fast" mode's :class:`~modlin._algorithms.quantize.Scales` from the line statistics, in one
    kernel (:func:`modlin._algorithms.quantize.fast_exponents` and the shifts) and one transfer to the
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
    null = np.uint64(0)  # no bits wanted beside the shifts
    _cuda.launch("fast_scales", 1, ex_a, need_a, sq_a, bad_a.view(cp.uint8), np.int64(m), ex_b, need_b, sq_b,
                 bad_b.view(cp.uint8), np.int64(n), np.int32(symmetric), np.int64(top), np.int32(T_BITS),
                 np.int32(G_MAX), hist_a, hist_b, sa, sb, null, null, summary, grid=((1,), (1024,)))
    return _scales_read(summary, m, n, sa, sb, bad_a, bad_b, ex_a, ex_b)


def _scales_read(summary, m: int, n: int, sa, sb, bad_a, bad_b, ex_a, ex_b) -> Scales:
    """The product's one transfer: the summary, read; too few moduli raise here, as on the CPU."""
    min_g, min_h, any_a, any_b, max_ea, max_eb, lost_a, lost_b = (int(v) for v in summary.get())
    for count, least, what in ((m, min_g, "A's rows"), (n, min_h, "B's columns")):
        check_bits(least if count else T_BITS, what)
    return Scales(sa, sb, bad_a, bad_b, ex_a, ex_b, (bool(any_a), bool(any_b), max_ea, max_eb, lost_a, lost_b))


def bound_code(w, out) -> None:
    """:func:`modlin._algorithms.quantize.bound_bits` of a tile ``w`` of "accurate" mode's bound product
    (float64, exact integers) written into ``out`` (uint8, a tile of the codes)."""
    R, C = w.shape
    w = w if R <= 1 or w.strides[1] == 8 else _cp().ascontiguousarray(w)
    _cuda.launch("bound_code_f64", R * C, w, np.int64(w.strides[0] // 8 if R > 1 else 0), np.int64(R), np.int64(C),
                 out, np.int64(out.strides[0] if R > 1 else 0), shape=(R, C))


def accurate_scales(stats_a, stats_b, code, top: int, symmetric: bool) -> Scales:
    """"accurate" mode's :class:`~modlin._algorithms.quantize.Scales` (:func:`modlin._algorithms.quantize.accurate_exponents`):
    the fast pass's bits (:func:`fast_scales`' kernel, its least bits the check, no shifts), then one
    kernel per pass over the codes (rows' half slack, columns, rows' rest), the shifts and
    the summary: one transfer, as in "fast" mode."""
    cp = _cp()
    bad_a, ex_a, need_a, sq_a, hist_a = stats_a
    bad_b, ex_b, need_b, sq_b, hist_b = stats_b
    m, n = ex_a.size, ex_b.size
    sa, sb = cp.empty(m, dtype=cp.int64), cp.empty(n, dtype=cp.int64)
    g, h = cp.empty(m, dtype=cp.int64), cp.empty(n, dtype=cp.int64)
    summary = cp.empty(8, dtype=cp.int64)
    _cuda.launch("fast_scales", 1, ex_a, need_a, sq_a, bad_a.view(cp.uint8), np.int64(m), ex_b, need_b, sq_b,
                 bad_b.view(cp.uint8), np.int64(n), np.int32(symmetric), np.int64(top), np.int32(T_BITS),
                 np.int32(G_MAX), hist_a, hist_b, np.uint64(0), np.uint64(0), g, h, summary, grid=((1,), (1024,)))
    if m and n:
        room = np.int64(top + 2 * T_BITS)
        rows = ((min(m, 2**31 - 1),), (256,))
        for first in (1, None, 0):
            if first is None:
                _cuda.launch("accurate_cols", m * n, code, np.int64(m), np.int64(n), g, h, need_b, room,
                             np.int32(G_MAX), grid=((min(-(-n // 32), 2**31 - 1),), (32, 8)))
            else:
                _cuda.launch("accurate_rows", m * n, code, np.int64(m), np.int64(n), g, h, need_a, room,
                             np.int32(G_MAX), np.int32(first), grid=rows)
    _cuda.launch("bits_scales", 1, g, h, ex_a, bad_a.view(cp.uint8), np.int64(m), ex_b, bad_b.view(cp.uint8),
                 np.int64(n), np.int32(symmetric), np.int32(T_BITS), hist_a, hist_b, sa, sb, summary,
                 grid=((1,), (1024,)))
    return _scales_read(summary, m, n, sa, sb, bad_a, bad_b, ex_a, ex_b)


#: Ozaki-II's stages (a), (b) and (c) on CuPy arrays: the GPU's :class:`modlin._algorithms.quantize.Kernels`.
OZAKI = Kernels(gemm_residues, syrk_residues, add_residues, to_double, memory, line_bytes=4 * 2 * GAPS,
                  line_stats=line_stats, fast_scales=fast_scales, bound_code=bound_code, accurate_scales=accurate_scales)


def int_residues(x, p: int, table, N: int, transpose: bool):
    """Balanced int8 residues of the int64 matrix ``x`` (any values, taken modulo ``p`` and
    balanced first) for the ``N`` moduli of ``table``: ``(N, m, pad4(k))`` of an ``m x k``
    ``x``, or with ``transpose`` ``(N, pad4(n), pad4(k))`` of a ``k x n`` one; pads zero."""
    cp = _cp()
    R, C = x.shape
    rows, width, Rp, Cp = _layout(R, C, transpose)
    out = cp.empty((N, rows, width), dtype=cp.int8)
    mu, c63 = _cuda.wide_constants(p)
    _cuda.launch("int_residues_i8", Rp * Cp, x, *_strides(x), np.int64(R), np.int64(C), np.uint64(p), mu, c63, table,
                 np.int32(N), out, np.int64(rows * width), np.int64(width), np.int64(Rp), np.int64(Cp),
                 np.int32(transpose), shape=(Rp, Cp), tiled=True)
    return out


def _layout(R: int, C: int, transpose: bool) -> tuple[int, int, int, int]:
    """The residues' ``(rows, width)`` of an ``R x C`` operand (padded to the GEMM's multiples
    of 4; transposed, ``B``'s), and the source positions ``(Rp, Cp)`` the kernel covers."""
    rows, width = (_cuda.pad4(C), _cuda.pad4(R)) if transpose else (R, _cuda.pad4(C))
    Rp, Cp = (width, rows) if transpose else (rows, width)
    return rows, width, Rp, Cp


def _strides(x) -> tuple[np.int64, np.int64]:
    """An int64 matrix's row and column strides in entries (0 on a broadcast axis: the
    kernels read any strides)."""
    return np.int64(x.strides[0] // 8), np.int64(x.strides[1] // 8)


def reconstruct_modp(res, moduli, p: int, out, constants=None) -> None:
    """``out[...]`` (an int64 ``m x n`` matrix with contiguous rows) = the integers whose
    residues are ``res`` (``(N, m, n)``, entries in ``[0, m_i)``, balanced: ``|C| < M/2``)
    modulo ``p < 2**63``, in ``[0, p)``; ``constants``: :func:`modlin._engines.cuda.crt_constants`
    of ``moduli`` when the caller has them on the device already."""
    cp = _cp()
    N, m, n = res.shape
    table, limbs, minv, L = _cuda.crt_constants(moduli) if constants is None else constants
    M = math.prod(int(q) for q in moduli)
    small_p = _p_row(p, table)
    _cuda.launch("crt_to_modp_u8", m * n, cp.ascontiguousarray(res, dtype=cp.uint8), np.int32(N), np.int64(m),
                 np.int64(n), table, limbs, minv, np.int32(L), np.uint64(p), small_p, np.uint64(M % p), out,
                 np.int64(out.strides[0] // 8 if m > 1 else 0), shape=(m, n))


def _p_row(p: int, table):
    """The kernels' row of constants of ``p``, read only where ``p <= 2**16`` (elsewhere any
    row will do: ``table``'s, already on the device)."""
    return _cuda.small_table([p]) if p <= 2**16 else table


def rns_multiply(pl, a, b, out) -> None:
    """:func:`modlin._algorithms.rns.multiply` on the GPU: ``out[...] = a @ b mod pl.p`` for an int8
    :class:`RNSPlan` and int64 CuPy matrices of
    any values (2-D, or stacks of one shape after broadcasting); ``out`` int64 of the
    result's shape, its last axis contiguous (an output tile)."""
    cp = _cp()
    if pl.engine != "int8" or pl.p is None or pl.p >= 2**63:
        raise ValueError("GPU residue number systems take int8 moduli and p < 2**63")
    if max(pl.moduli) > 256:
        raise ValueError("int8 moduli are at most 256")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = cp.broadcast_to(a, batch + a.shape[-2:])
    b = cp.broadcast_to(b, batch + b.shape[-2:])
    N, k = len(pl.moduli), a.shape[-1]
    constants = _cuda.crt_constants(pl.moduli)
    table = constants[0]  # the CRT's table serves the residues and reductions too
    res = cp.empty((N,) + out.shape[-2:], dtype=cp.uint8)
    X = cp.empty((out.shape[-2], _cuda.pad4(out.shape[-1])), dtype=cp.int32)
    for idx in np.ndindex(*batch):
        ra = int_residues(a[idx], pl.p, table, N, False)
        rbt = int_residues(b[idx], pl.p, table, N, True)
        _cuda.products_tn(ra, rbt, table, k, res, X)
        del ra, rbt
        reconstruct_modp(res, pl.moduli, pl.p, out[idx], constants)


def _gauss_images(re, im, m: int, s: int, table, N: int, transpose: bool):
    """The balanced int8 residues of 2M's images ``re +- s im mod m`` of a Gaussian operand
    (int64 parts of any values and strides; ``im`` None: a real one), for the ``N`` RNS
    moduli of ``table``, laid out as :func:`int_residues`'s: ``(plus, minus)``."""
    cp = _cp()
    R, C = re.shape
    rows, width, Rp, Cp = _layout(R, C, transpose)
    plus, minus = (cp.empty((N, rows, width), dtype=cp.int8) for _ in range(2))
    mu, c63 = _cuda.wide_constants(m)
    imag = (im, *_strides(im)) if im is not None else (np.uint64(0), np.int64(0), np.int64(0))
    _cuda.launch("gauss_twom_residues_i8", Rp * Cp, re, *_strides(re), *imag, np.int64(R), np.int64(C), np.uint64(m),
                 mu, c63, np.int64(s), table, np.int32(N), plus, minus, np.int64(rows * width), np.int64(width),
                 np.int64(Rp), np.int64(Cp), np.int32(transpose), shape=(Rp, Cp), tiled=True)
    return plus, minus


def _pair_products(pa, ma, pb, mb, k: int, table, rx, ry, X, Y) -> None:
    """Per RNS modulus ``i``: ``rx[i] = pa[i] pb[i]^T`` and ``ry[i] = ma[i] mb[i]^T`` mod ``m_i``
    (uint8), by two GEMMs into the reused int32 buffers ``X``, ``Y`` and one kernel reducing
    both, per :data:`modlin._engines.cuda.KCHUNK` of ``k`` (added up)."""
    N, mt, nt = rx.shape
    for i in range(N):
        for k0 in range(0, max(k, 1), _cuda.KCHUNK):
            k1 = min(_cuda.pad4(k), k0 + _cuda.KCHUNK)
            _cuda.gemm_i8_tn(pa[i][:, k0:k1], pb[i][:, k0:k1], X)
            _cuda.gemm_i8_tn(ma[i][:, k0:k1], mb[i][:, k0:k1], Y)
            _cuda.launch("reduce_pair_i32_u8", mt * nt, X, Y, np.int64(X.shape[1]), np.int64(mt), np.int64(nt),
                         table, np.int32(i), np.int32(k0 > 0), rx[i], ry[i], shape=(mt, nt))


def _twom_crt(rx, ry, moduli, constants, m: int, s: int, re, im) -> None:
    """``X``, ``Y`` modulo ``m`` from their residues ``rx``, ``ry`` by the CRT, and 2M's
    ``re = (X + Y)/2``, ``im = (X - Y)/(2s)`` written into the int64 tiles ``re``, ``im``."""
    N, mt, nt = rx.shape
    table, limbs, minv, L = constants
    M = math.prod(int(q) for q in moduli)
    _cuda.launch("crt_twom_modp_u8", mt * nt, rx, ry, np.int32(N), np.int64(mt), np.int64(nt), table, limbs, minv,
                 np.int32(L), np.uint64(m), _p_row(m, table), np.uint64(M % m), np.int64((m + 1) // 2),
                 np.int64(pow(2 * s, -1, m)), re, np.int64(re.strides[0] // 8 if mt > 1 else 0), im,
                 np.int64(im.strides[0] // 8 if mt > 1 else 0), shape=(mt, nt))


def twom_multiply(pl, x, y, s: int, out) -> None:
    """Gaussian 2M modulo ``m = pl.p < 2**52`` on the RNS engine: ``out = [re, im]`` (int64
    tiles, rows contiguous) of ``(x_re + i x_im) @ (y_re + i y_im) mod m`` for int64 parts of
    any values (``x[1]`` or ``y[1]`` None: a real matrix), with ``s`` a square root of -1.

    One kernel per operand writes the balanced int8 residues of both images ``re +- s im
    mod m`` for every RNS modulus (:func:`_gauss_images`); per modulus two GEMMs (``X = A+
    B+``, ``Y = A- B-``) into two reused int32 buffers and one kernel reducing both
    (:func:`_pair_products`); one kernel takes ``X`` and ``Y`` mod ``m`` by the CRT and writes
    ``(X + Y)/2`` and ``(X - Y)/(2s)`` into the output tiles (:func:`_twom_crt`)."""
    cp = _cp()
    m = pl.p
    if pl.engine != "int8" or m is None or m >= 2**52 or max(pl.moduli) > 256:
        raise ValueError("GPU Gaussian 2M takes an int8 RNS plan and m below 2**52")
    batch = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2])
    N, k = len(pl.moduli), x[0].shape[-1]
    mt, nt = out[0].shape[-2:]
    constants = _cuda.crt_constants(pl.moduli)  # one table for residues, reductions, CRT
    table = constants[0]
    rx, ry = cp.empty((N, mt, nt), dtype=cp.uint8), cp.empty((N, mt, nt), dtype=cp.uint8)
    X, Y = (cp.empty((mt, _cuda.pad4(nt)), dtype=cp.int32) for _ in range(2))

    def part(t, idx):
        return None if t is None else cp.broadcast_to(t, batch + t.shape[-2:])[idx]

    for idx in np.ndindex(*batch):
        pa, ma = _gauss_images(part(x[0], idx), part(x[1], idx), m, s, table, N, False)
        pb, mb = _gauss_images(part(y[0], idx), part(y[1], idx), m, s, table, N, True)
        _pair_products(pa, ma, pb, mb, k, table, rx, ry, X, Y)
        del pa, ma, pb, mb
        _twom_crt(rx, ry, pl.moduli, constants, m, s, out[0][idx], out[1][idx])


def words(x, p: int, s: int, u: int, dtype, out=None):
    """:func:`modlin._arith.modular.balanced_words` on CuPy arrays: the ``balanced_words_f64``
    kernel, or for the int8 engine (``p <= 256``, one word) the balanced residue itself
    (``out`` is the CPU's scratch: unused)."""
    cp = _cp()
    flat = cp.ascontiguousarray(x, dtype=cp.int64).reshape(-1)
    if np.dtype(dtype) == np.int8:  # int_residues_i8 with p as the one modulus: x mod p, balanced, one pass
        r = cp.empty(flat.size, dtype=cp.int8)
        mu, c63 = _cuda.wide_constants(p)
        n = np.int64(flat.size)
        _cuda.launch("int_residues_i8", flat.size, flat, n, np.int64(1), np.int64(1), n, np.uint64(p), mu, c63,
                     _cuda.small_table([p]), np.int32(1), r, n, n, np.int64(1), n, np.int32(0), shape=(1, flat.size),
                     tiled=True)
        return r.reshape((1,) + x.shape)
    if np.dtype(dtype) != np.float64:
        raise ValueError(f"GPU words are float64 or int8, not {np.dtype(dtype)}")
    words = cp.empty((u, flat.size), dtype=cp.float64)
    _cuda.launch("balanced_words_f64", flat.size, flat, np.int64(flat.size), np.int64(p), *_cuda.wide_constants(p),
                 np.int32(s), np.int32(u), words)
    return words.reshape((u,) + x.shape)


def _gpu_operands(x, t):
    cp = _cp()
    xc = cp.ascontiguousarray(x)
    tc = np.uint64(0) if t is None else cp.ascontiguousarray(cp.broadcast_to(t, x.shape), dtype=cp.float64)
    return xc, tc


def _gpu_balanced(y, red):
    """Integer CuPy ``y`` reduced as ``red`` would, into the balanced range (``None``: as is)."""
    if red is not None:
        y %= red.p
        y -= red.p * (y > (red.p - 1) // 2)
    return y


def _gpu_int_step(x, t, reduce, scale_exp, scaled, t_reduce):
    """:func:`step`'s value on the int32 sums of the int8 engine: exact integers, reduced
    with integer arithmetic (as int64)."""
    cp = _cp()
    y = _gpu_balanced(x.astype(cp.int64), reduce)
    if scale_exp:
        y <<= scale_exp
    y = _gpu_balanced(y, scaled)
    if t is not None:
        y += _gpu_balanced(t.astype(cp.int64), t_reduce)
    return y


def _step(x, t, reduce, scale_exp, scaled, t_reduce, q1, q2, qt) -> None:
    if x.dtype != np.float64:
        x[...] = _gpu_int_step(x, t, reduce, scale_exp, scaled, t_reduce)
        return
    xc, tc = _gpu_operands(x, t)
    _cuda.launch("mw_step", xc.size, xc, tc, np.int64(xc.size), *map(np.float64, q1), np.float64(2.0**scale_exp),
                 *map(np.float64, q2), *map(np.float64, qt))
    if xc is not x:
        x[...] = xc


def _finalize(x, out, reduce, t, pre, scale_exp, scaled, q1, q2) -> None:
    cp = _cp()
    if x.dtype != np.float64:
        out[...] = _gpu_int_step(x, t, pre, scale_exp, scaled, reduce) % reduce.p
        return
    xc, tc = _gpu_operands(x, t)
    res = out if out.flags.c_contiguous and out.dtype == np.int64 else cp.empty(out.shape, dtype=cp.int64)
    q = tuple(map(np.float64, reduce.constants()))
    _cuda.launch("mw_finalize", xc.size, xc, tc, np.int64(xc.size), *map(np.float64, q1),
                 np.float64(2.0**scale_exp), *map(np.float64, q2), *q, *q, np.int64(reduce.p), res)
    if res is not out:
        out[...] = res


def _gpu_mulmod(x, c: int, m: int):
    """``x * c mod m`` in ``[0, m)`` for CuPy int64 ``0 <= x < m < 2**52`` and ``0 <= c < m``:
    :func:`mulmod1`'s float quotient (a few units off), the remainder exact modulo
    ``2**64`` (wrapping int64 products) and so, being small, exactly the integer."""
    q = (x.astype(np.float64) * float(c) * (1.0 / m)).astype(np.int64)
    return (x * c - q * m) % m


def step(x, t=None, reduce=None, scale_exp: int = 0, scaled=None, t_reduce=None) -> None:
    """:func:`modlin._arith.modular.step` on CuPy arrays: the ``mw_step`` kernel (float64), or the
    int8 engine's int32 sums reduced in integers."""
    _step(x, t, reduce, scale_exp, scaled, t_reduce, *(_modular.reduction_constants(r) for r in (reduce, scaled,
                                                                                                 t_reduce)))


def finalize(x, out, reduce, t=None, pre=None, scale_exp: int = 0, scaled=None) -> None:
    """:func:`modlin._arith.modular.finalize` on CuPy arrays: the ``mw_finalize`` kernel (float64),
    or the int8 engine's int32 sums reduced in integers."""
    _finalize(x, out, reduce, t, pre, scale_exp, scaled, _modular.reduction_constants(pre),
              _modular.reduction_constants(scaled))


def twom_split(re, im, s: int, m: int):
    """:func:`modlin._arith.modular.twom_split` on CuPy arrays (array expressions: the fused
    Gaussian path of the RNS engine, :func:`twom_multiply`, makes its images in its residue
    kernel; this serves the multiword plans of small products)."""
    r, t = re % m, _gpu_mulmod(im % m, s, m)
    return (r + t) % m, (r - t) % m


def twom_combine(X, Y, s: int, m: int):
    """:func:`modlin._arith.modular.twom_combine` on CuPy arrays (array expressions, as :func:`twom_split`)."""
    return _gpu_mulmod((X + Y) % m, (m + 1) // 2, m), _gpu_mulmod((X - Y) % m, pow(2 * s, -1, m), m)


#: The multiword path's element-wise stages on CuPy arrays (:data:`modlin._arith.modular.CPU`'s twin).
MULTIWORD = _modular.Stages(words, step, finalize, twom_split, twom_combine, "cuda")
