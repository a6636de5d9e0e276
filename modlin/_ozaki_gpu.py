"""Ozaki-II's residue products and CRT on CuPy arrays: int8 tensor-core GEMMs, fused kernels.

The CPU path (:mod:`modlin.ozaki`) walks the moduli one at a time; here all
moduli go together: one kernel writes the int8 residues of every modulus, one
strided-batched ``gemmEx`` multiplies them (int32 sums), one kernel per
modulus reduces (or combines 2M's two products), and one kernel rebuilds and
rounds every entry. Only the int8 engine runs here: it is what the GPU is for.
"""

from __future__ import annotations

import numpy as np

from . import _cuda
from ._ozaki_core import halves

__all__ = ["gemm_residues", "syrk_residues", "to_double"]


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


def syrk_residues(mods, ap) -> list:
    """Residues of the exact ``A'A'^T`` (real, halving k) or ``A'A'^H`` (complex):
    :func:`modlin._ozaki_core.syrk_residues` (of a whole matrix) with all moduli batched."""
    cp = _cp()
    N = len(mods.moduli)
    n = ap[0].shape[0]
    rc = [cp.empty((N, n, n), dtype=cp.uint8) for _ in ap]
    real = len(ap) == 1

    def T(x):
        return cp.ascontiguousarray(x.transpose(0, 2, 1))

    idx, qs = _moduli(mods, "2m")
    if qs:
        plus, minus = _twom(*(halves(ap[0]) if real else ap), qs)
        X = _cuda.products_mod(plus, T(minus), qs)
        Xt = T(X)
        re, im = cp.empty((len(qs), n, n), dtype=cp.uint8), cp.empty((len(qs), n, n), dtype=cp.uint8)
        _combine_2m(X, Xt, qs, re, im)
        rc[0][idx] = re
        if not real:
            rc[1][idx] = im
    idx, qs = _moduli(mods, "real")
    if qs:
        r = _residues(ap[0], qs)
        rc[0][idx] = _cuda.products_mod_u8(r, T(r), qs)
    idx = [i for i, a in enumerate(mods.algorithms) if a in ("3m", "4m")]
    if idx:
        qs = [mods.moduli[i] for i in idx]
        q = cp.asarray(qs, dtype=cp.int32)[:, None, None]
        ar, ai = _residues(ap[0], qs), _residues(ap[1], qs)
        ir = _cuda.products_mod(ai, T(ar), qs)
        rc[0][idx] = ((_cuda.products_mod(ar, T(ar), qs) + _cuda.products_mod(ai, T(ai), qs)) % q).astype(cp.uint8)
        rc[1][idx] = ((ir - T(ir)) % q).astype(cp.uint8)
    return rc


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
