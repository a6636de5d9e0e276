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

__all__ = ["multiply", "residues"]


def residues(x, p: int, table, N: int, transpose: bool):
    """Balanced int8 residues of the int64 matrix ``x`` (any values, taken modulo ``p`` and
    balanced first) for the ``N`` moduli of ``table``: ``(N, m, pad4(k))`` of an ``m x k``
    ``x``, or with ``transpose`` ``(N, pad4(n), pad4(k))`` of a ``k x n`` one; pads zero."""
    cp = _cuda._cupy()
    if x.shape[1] > 1 and x.strides[1] != 8:
        x = cp.ascontiguousarray(x)
    R, C = x.shape
    rows, width = (_cuda.pad4(C), _cuda.pad4(R)) if transpose else (R, _cuda.pad4(C))
    Rp, Cp = (width, rows) if transpose else (rows, width)
    out = cp.empty((N, rows, width), dtype=cp.int8)
    mu, c63 = _cuda.wide_constants(p)
    _cuda.launch("int_residues_i8", Rp * Cp, x, np.int64(x.strides[0] // 8 if R > 1 else 0), np.int64(R),
                 np.int64(C), np.uint64(p), mu, c63, table, np.int32(N), out, np.int64(rows * width), np.int64(width),
                 np.int64(Rp), np.int64(Cp), np.int32(transpose), shape=(Rp, Cp), tiled=True)
    return out


def reconstruct_modp(res, moduli, p: int, out) -> None:
    """``out[...]`` (an int64 ``m x n`` matrix with contiguous rows) = the integers whose
    residues are ``res`` (``(N, m, n)``, entries in ``[0, m_i)``, balanced: ``|C| < M/2``)
    modulo ``p < 2**63``, in ``[0, p)``."""
    cp = _cuda._cupy()
    N, m, n = res.shape
    table, limbs, minv, L = _cuda.crt_constants(moduli)
    M = int(np.prod([int(q) for q in moduli], dtype=object))
    small_p = _cuda.small_table([p]) if p <= 2**16 else _cuda.small_table([2])  # p's row, read where p <= 2**16
    _cuda.launch("crt_to_modp_u8", m * n, cp.ascontiguousarray(res, dtype=cp.uint8), np.int32(N), np.int64(m),
                 np.int64(n), table, limbs, minv, np.int32(L), np.uint64(p), small_p, np.uint64(M % p), out,
                 np.int64(out.strides[0] // 8 if m > 1 else 0), shape=(m, n))


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
    table = _cuda.small_table(pl.moduli)
    res = cp.empty((N,) + out.shape[-2:], dtype=cp.uint8)
    X = cp.empty((out.shape[-2], _cuda.pad4(out.shape[-1])), dtype=cp.int32)
    for idx in np.ndindex(*batch):
        ra = residues(a[idx], pl.p, table, N, False)
        rbt = residues(b[idx], pl.p, table, N, True)
        _cuda.products_tn(ra, rbt, table, k, res, X)
        del ra, rbt
        reconstruct_modp(res, pl.moduli, pl.p, out[idx])
