"""Residue number systems on CuPy arrays: int8 moduli, tensor-core GEMMs, one CRT kernel.

:func:`modlin._rns.multiply` on the GPU, in three kinds of kernel: one per operand reads
each int64 entry once, reduces it modulo ``p``, balances it and writes its balanced int8
residue for every modulus (``B``'s transposed, as cuBLAS' "TN" int8 GEMM takes it, and
both padded to the GEMM's multiples of 4); per modulus, one GEMM into a reused int32
buffer and one reduction kernel writing the residues of the product (per ``k`` chunk of
:data:`modlin._cuda.KCHUNK`, added up); and one O(N) CRT kernel that writes the result
modulo ``p`` into the output tile itself. 32-bit Barrett arithmetic throughout.
"""

from __future__ import annotations

import numpy as np

from . import _cuda

__all__ = ["multiply", "residues", "twom_multiply"]


def residues(x, p: int, table, N: int, transpose: bool):
    """Balanced int8 residues of the int64 matrix ``x`` (any values, taken modulo ``p`` and
    balanced first) for the ``N`` moduli of ``table``: ``(N, m, pad4(k))`` of an ``m x k``
    ``x``, or with ``transpose`` ``(N, pad4(n), pad4(k))`` of a ``k x n`` one; pads zero."""
    cp = _cuda._cupy()
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
    modulo ``p < 2**63``, in ``[0, p)``; ``constants``: :func:`modlin._cuda.crt_constants`
    of ``moduli`` when the caller has them on the device already."""
    cp = _cuda._cupy()
    N, m, n = res.shape
    table, limbs, minv, L = _cuda.crt_constants(moduli) if constants is None else constants
    M = int(np.prod([int(q) for q in moduli], dtype=object))
    small_p = _p_row(p, table)
    _cuda.launch("crt_to_modp_u8", m * n, cp.ascontiguousarray(res, dtype=cp.uint8), np.int32(N), np.int64(m),
                 np.int64(n), table, limbs, minv, np.int32(L), np.uint64(p), small_p, np.uint64(M % p), out,
                 np.int64(out.strides[0] // 8 if m > 1 else 0), shape=(m, n))


def _p_row(p: int, table):
    """The kernels' row of constants of ``p``, read only where ``p <= 2**16`` (elsewhere any
    row will do: ``table``'s, already on the device)."""
    return _cuda.small_table([p]) if p <= 2**16 else table


def multiply(pl, a, b, out) -> None:
    """``out[...] = a @ b mod pl.p`` for an int8 :class:`RNSPlan` and int64 CuPy matrices of
    any values (2-D, or stacks of one shape after broadcasting); ``out`` int64 of the
    result's shape, its last axis contiguous (an output tile)."""
    cp = _cuda._cupy()
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
        ra = residues(a[idx], pl.p, table, N, False)
        rbt = residues(b[idx], pl.p, table, N, True)
        _cuda.products_tn(ra, rbt, table, k, res, X)
        del ra, rbt
        reconstruct_modp(res, pl.moduli, pl.p, out[idx], constants)


def _gauss_images(re, im, m: int, s: int, table, N: int, transpose: bool):
    """The balanced int8 residues of 2M's images ``re +- s im mod m`` of a Gaussian operand
    (int64 parts of any values and strides; ``im`` None: a real one), for the ``N`` RNS
    moduli of ``table``, laid out as :func:`residues`'s: ``(plus, minus)``."""
    cp = _cuda._cupy()
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
    both, per :data:`modlin._cuda.KCHUNK` of ``k`` (added up)."""
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
    M = int(np.prod([int(q) for q in moduli], dtype=object))
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
    cp = _cuda._cupy()
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
