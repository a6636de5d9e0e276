"""Ozaki-II's residue products and CRT on CuPy arrays: int8 tensor-core GEMMs, fused kernels.

The CPU path (:mod:`modlin.ozaki`) walks the moduli one at a time; here all
moduli go together: one kernel writes the int8 residues of every modulus, one
strided-batched ``gemmEx`` multiplies them (int32 sums), one kernel per
modulus reduces (or combines 2M's two products), and one kernel rebuilds and
rounds every entry. Only the int8 engine runs here: it is what the GPU is for.
These are the GPU's :class:`modlin._ozaki_core.Kernels` (:data:`KERNELS`): the tile
loop, the scales and the quantisation are the CPU's.
"""

from __future__ import annotations

import numpy as np

from . import _cuda
from ._ozaki_core import SCALE_PASS, Kernels, halves

__all__ = ["KERNELS", "add_residues", "gemm_residues", "syrk_residues", "to_double"]


def _cp():
    return _cuda._cupy()


def _moduli(mods, alg: str) -> tuple[list[int], list[int]]:
    idx = [i for i, a in enumerate(mods.algorithms) if a == alg]
    return idx, [mods.moduli[i] for i in idx]


def _residues(x, moduli):
    """Balanced int8 residues ``(N, *x.shape)`` of the integer-valued float64 ``x``."""
    cp = _cp()
    x = cp.ascontiguousarray(x)
    out = cp.empty((len(moduli),) + x.shape, dtype=cp.int8)
    _cuda.launch("ozaki_residues_i8", x.size, x, np.int64(x.size), cp.asarray(moduli, dtype=cp.int32),
                 np.int32(len(moduli)), out)
    return out


def _twom(xr, xi, moduli):
    from .gaussian import sqrt_minus_one

    cp = _cp()
    xr, xi = cp.ascontiguousarray(xr), cp.ascontiguousarray(xi)
    plus = cp.empty((len(moduli),) + xr.shape, dtype=cp.int8)
    minus = cp.empty_like(plus)
    roots = cp.asarray([sqrt_minus_one(q) for q in moduli], dtype=cp.int32)
    _cuda.launch("ozaki_twom_i8", xr.size, xr, xi, np.int64(xr.size), cp.asarray(moduli, dtype=cp.int32),
                 roots, np.int32(len(moduli)), plus, minus)
    return plus, minus


def _add_balanced(x, y, moduli):
    """Balanced int8 ``x + y mod q`` of balanced int8 residues (3M's sums)."""
    cp = _cp()
    q = cp.asarray(moduli, dtype=cp.int16)[:, None, None]
    z = x.astype(cp.int16) + y
    z -= q * (z > (q - 1) // 2)
    z += q * (z < -(q // 2))
    return z.astype(cp.int8)


def _combine_2m(X, Y, moduli, out_re, out_im):
    from .gaussian import sqrt_minus_one

    for i, q in enumerate(moduli):
        s = sqrt_minus_one(q)
        n = X[i].size
        _cuda.launch("twom_combine_i32_u8", n, X[i], Y[i], np.int64(n), np.int32(q), np.int32((q + 1) // 2),
                     np.int32(pow(2 * s, -1, q)), out_re[i], out_im[i])


def gemm_residues(mods, ap, bp) -> list:
    """Residues ``(N, m, n)`` (uint8) of the exact ``A'B'``, one array per part."""
    cp = _cp()
    ap, bp = ap.quantized(), bp.quantized()
    N = len(mods.moduli)
    m, n = ap[0].shape[0], bp[0].shape[1]
    rc = [cp.empty((N, m, n), dtype=cp.uint8) for _ in ap]
    idx, qs = _moduli(mods, "real")
    if qs:
        rc[0][idx] = _cuda.products_mod_u8(_residues(ap[0], qs), _residues(bp[0], qs), qs)
    idx, qs = _moduli(mods, "2m")
    if qs:
        a_plus, a_minus = _twom(ap[0], ap[1], qs)
        b_plus, b_minus = _twom(bp[0], bp[1], qs)
        X = _cuda.products_mod(a_plus, b_plus, qs)
        del a_plus, b_plus
        Y = _cuda.products_mod(a_minus, b_minus, qs)
        re, im = cp.empty((len(qs), m, n), dtype=cp.uint8), cp.empty((len(qs), m, n), dtype=cp.uint8)
        _combine_2m(X, Y, qs, re, im)
        rc[0][idx], rc[1][idx] = re, im
    for alg in ("3m", "4m"):
        idx, qs = _moduli(mods, alg)
        if not qs:
            continue
        q = cp.asarray(qs, dtype=cp.int32)[:, None, None]
        ar, ai = _residues(ap[0], qs), _residues(ap[1], qs)
        br, bi = _residues(bp[0], qs), _residues(bp[1], qs)
        rr, ii = _cuda.products_mod(ar, br, qs), _cuda.products_mod(ai, bi, qs)
        if alg == "3m":
            t = _cuda.products_mod(_add_balanced(ar, ai, qs), _add_balanced(br, bi, qs), qs)
            im = (t - rr - ii) % q
        else:
            im = (_cuda.products_mod(ar, bi, qs) + _cuda.products_mod(ai, br, qs)) % q
        rc[0][idx] = ((rr - ii) % q).astype(cp.uint8)
        rc[1][idx] = im.astype(cp.uint8)
    return rc


def syrk_residues(mods, ap, bp=None):
    """Residues of the exact ``A'A'^T`` (real, halving k) or ``A'A'^H`` (complex):
    :func:`modlin._ozaki_core.syrk_residues` with all moduli batched; with ``bp`` (the
    row panel ``J``), those of the tiles ``C_IJ`` and ``C_JI``, as a pair."""
    cp = _cp()
    pair = bp is not None
    ap = ap.quantized()
    bp = bp.quantized() if pair else ap
    N = len(mods.moduli)
    t, u = ap[0].shape[0], bp[0].shape[0]
    real = len(ap) == 1
    rc = [cp.empty((N, t, u), dtype=cp.uint8) for _ in ap]
    rt = [cp.empty((N, u, t), dtype=cp.uint8) for _ in ap] if pair else None
    tiles = ((rc, False), (rt, True))[: 1 + pair]

    def T(x):
        return cp.ascontiguousarray(x.transpose(0, 2, 1))

    idx, qs = _moduli(mods, "2m")
    if qs:
        pa, ma = _twom(*(halves(ap[0]) if real else ap), qs)
        pb, mb = _twom(*(halves(bp[0]) if real else bp), qs) if pair else (pa, ma)
        X = _cuda.products_mod(pa, T(mb), qs)  # X_IJ
        Xt = _cuda.products_mod(pb, T(ma), qs) if pair else X  # X_JI
        for dst, x, y in ((rc, X, T(Xt)), (rt, Xt, T(X)))[: 1 + pair]:
            re, im = cp.empty(x.shape, dtype=cp.uint8), cp.empty(x.shape, dtype=cp.uint8)
            _combine_2m(x, y, qs, re, im)
            dst[0][idx] = re
            if not real:
                dst[1][idx] = im
    idx, qs = _moduli(mods, "real")
    if qs:
        r = _residues(ap[0], qs)
        X = _cuda.products_mod_u8(r, T(_residues(bp[0], qs) if pair else r), qs)
        for dst, flip in tiles:
            dst[0][idx] = T(X) if flip else X
    idx = [i for i, a in enumerate(mods.algorithms) if a in ("3m", "4m")]
    if idx:  # C_r = Ar Ar^T + Ai Ai^T, C_i = Ai Ar^T - (Ai Ar^T)^T
        qs = [mods.moduli[i] for i in idx]
        q = cp.asarray(qs, dtype=cp.int32)[:, None, None]
        ar, ai = _residues(ap[0], qs), _residues(ap[1], qs)
        br, bi = (_residues(bp[0], qs), _residues(bp[1], qs)) if pair else (ar, ai)
        ir = _cuda.products_mod(ai, T(br), qs)
        irt = _cuda.products_mod(bi, T(ar), qs) if pair else ir
        re = ((_cuda.products_mod(ar, T(br), qs) + _cuda.products_mod(ai, T(bi), qs)) % q).astype(cp.uint8)
        for dst, flip in tiles:
            dst[0][idx] = T(re) if flip else re
            dst[1][idx] = (((irt - T(ir)) if flip else (ir - T(irt))) % q).astype(cp.uint8)
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


#: Bytes per panel entry and per result entry, per modulus, that :func:`gemm_residues` and
#: :func:`syrk_residues` hold at once for one group of moduli: int8 residues (2M: two
#: images; 3M: the parts and their int16 sums) and the copies :func:`modlin._cuda.gemm_i8`
#: pads k with; int32 products (2M: two, 3M/4M: three or four and their sums) and the
#: uint8 residues made from them.
_PANEL_BYTES = {"real": 2, "2m": 4, "3m": 10, "4m": 4}
_RESULT_BYTES = {"real": 9, "2m": 14, "3m": 30, "4m": 30}


def memory(mods, tile, pairs: int, parts: int) -> int:
    """The device memory the residue kernels allocate for one tile beside the residues they
    return (``pairs`` tiles at once): the quantised panels (float64 per part, kept while
    the tile is made), and the moduli of one algorithm batched: the largest group."""
    mt, kt, nt = tile
    # gemm_i8 pads the columns of B (and the products) to a multiple of 4
    ops, out = mt * kt + kt * (nt + 3), mt * (nt + 3)
    return pairs * 8 * parts * (mt * kt + kt * nt) + pairs * max(mods.algorithms.count(a) * (_PANEL_BYTES[a] * ops + _RESULT_BYTES[a] * out)
                       for a in set(mods.algorithms))


def to_double(res, basis, sa, sb):
    """:func:`modlin._crtfloat.to_double` on the GPU: one thread per entry."""
    cp = _cp()
    N, m, n = res.shape
    _cuda.check_basis(basis.moduli, basis.M)
    L = basis.M.bit_length() // 32 + 1
    out = cp.empty((m, n), dtype=cp.float64)
    E = m * n
    _cuda.launch("crt_to_double_u8", E, cp.ascontiguousarray(res, dtype=cp.uint8), np.int32(N), np.int64(E),
                 np.int64(n), cp.asarray(basis.moduli, dtype=cp.int64),
                 cp.asarray(basis.garner_inverses, dtype=cp.int64),
                 cp.asarray(basis.half_digits, dtype=cp.float64), np.int32(L),
                 cp.asarray(sa, dtype=cp.int64), cp.asarray(sb, dtype=cp.int64), out)
    return out


#: The CuPy kernels of stages (b) and (c).
KERNELS = Kernels(gemm_residues, syrk_residues, add_residues, to_double, memory, scale_pass=SCALE_PASS)
