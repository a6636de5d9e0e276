"""Residue number systems on CuPy arrays: int8 moduli, tensor-core GEMMs, one CRT kernel.

:func:`modlin._rns.multiply` on the GPU. All moduli go together: one kernel
writes the balanced int8 residues of every modulus, strided-batched
``gemmEx`` calls multiply them (int32 sums, ``k`` split where an int32 sum
could overflow), and one kernel runs Garner and the reconstruction modulo
``p`` per entry.
"""

from __future__ import annotations

import numpy as np

from . import _cuda

__all__ = ["multiply"]


def residues(x, moduli):
    """Balanced int8 residues ``(N, *x.shape)`` of the int64 array ``x``."""
    cp = _cuda._cupy()
    x = cp.ascontiguousarray(x, dtype=cp.int64)
    out = cp.empty((len(moduli),) + x.shape, dtype=cp.int8)
    _cuda.launch("int_residues_i8", x.size, x, np.int64(x.size), cp.asarray(moduli, dtype=cp.int32),
                 np.int32(len(moduli)), out)
    return out


def reconstruct_modp(res, basis, p: int):
    """Values modulo ``p < 2**63`` (int64 in ``[0, p)``) of the integers whose residues are
    ``res`` (``(N, ...)``, entries in ``[0, m_i)``)."""
    cp = _cuda._cupy()
    _cuda.check_basis(basis.moduli, basis.M)
    N = len(basis.moduli)
    shape = res.shape[1:]
    E = int(np.prod(shape))
    out = cp.empty(shape, dtype=cp.int64)
    _cuda.launch("crt_to_modp_u8", E, cp.ascontiguousarray(res, dtype=cp.uint8), np.int32(N), np.int64(E),
                 cp.asarray(basis.moduli, dtype=cp.int64), cp.asarray(basis.garner_inverses, dtype=cp.int64),
                 cp.asarray(basis.half_digits, dtype=cp.float64), np.uint64(p), np.uint64(basis.M % p), out)
    return out


def multiply(pl, a, b):
    """``a @ b mod pl.p`` for an int8 :class:`RNSPlan` and balanced int64 CuPy matrices
    (2-D, or stacks of one shape after broadcasting)."""
    cp = _cuda._cupy()
    if pl.engine != "int8" or pl.p is None or pl.p >= 2**63:
        raise ValueError("GPU residue number systems take int8 moduli and p < 2**63")
    if max(pl.moduli) > 256:
        raise ValueError("int8 moduli are at most 256")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = cp.broadcast_to(a, batch + a.shape[-2:])
    b = cp.broadcast_to(b, batch + b.shape[-2:])
    out = cp.empty(batch + (a.shape[-2], b.shape[-1]), dtype=cp.int64)
    for idx in np.ndindex(*batch):
        ra, rb = residues(a[idx], pl.moduli), residues(b[idx], pl.moduli)
        out[idx] = reconstruct_modp(_cuda.products_mod_u8(ra, rb, pl.moduli), pl.basis, pl.p)
    return out
