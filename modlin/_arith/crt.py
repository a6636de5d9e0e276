"""The CRT: integers from their residues, exactly, on the CPU.

Every reconstruction of the package lives here (the GPU's are kernels, in
``kernels/modlin_kernels.cu``, driven from :mod:`modlin._algorithms.gpu`):

- :func:`reconstruct`: a residue number system's product, ``C = sum_i y_i M/m_i - k M``,
  rebuilt as 16-bit limbs and left as int64 or Python ints, or reduced modulo ``p``
  directly (the fused CRT, :func:`_crt_modp`, for ``p < 2**63``);
- :func:`to_double`: Ozaki-II's scaled products straight to correctly rounded doubles
  (each entry rebuilt exactly as 32-bit limbs by Garner's mixed-radix digits, then rounded
  once, to nearest with ties to even, at the precision the result has);
- :func:`crt`: one integer from its residues, in Python ints (the planners' and tests' use).
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache

import numpy as np

from modlin._arith.moduli import Basis
from modlin._arith.pyints import IntWriter
from modlin._arith.pyints_marshal import bit_length
from modlin._arith.residues import fmod_inv, padded_rows
from modlin._engines.jit import njit
from modlin._engines.threads import each, in_order, quiet_blas, run, slabs, workers
from modlin._runtime.calibration import CRT_BLOCK, FUSED_MAX_N, LIMB_CRT, RESIDUE_CHUNK
from modlin._runtime.scratch import Arena


def crt(residues, moduli) -> int:
    """The ``x`` in ``[0, prod(moduli))`` congruent to each residue modulo its (pairwise
    coprime) modulus."""
    return crt_rows([residues], moduli)[0]


def crt_rows(rows, moduli) -> list[int]:
    """:func:`crt` of each row of ``rows`` (an iterable of sequences of integers, one residue
    per modulus), with the weights ``c_i = (M/m_i) ((M/m_i)**-1 mod m_i)`` computed once:
    ``x = sum_i r_i c_i mod M``, a product of Python-int arrays."""
    M = math.prod(moduli)
    weights = np.empty(len(moduli), dtype=object)
    for i, q in enumerate(moduli):
        c = M // q
        weights[i] = c * pow(c, -1, q)
    table = np.asarray(rows)
    # Python ints throughout: an integer array's cast gives them, an object one may hold NumPy's
    table = table.astype(object) if table.dtype != object else np.frompyfunc(int, 1, 1)(table)
    return [x % M for x in table.reshape(-1, len(moduli)) @ weights]


@njit
def garner_step(t, c, m, minv, w):  # pragma: no cover - compiled
    """``t <- ((t - c) mod m) * w mod m`` over 1-D float64 slices (vectorises): one step of
    Garner's mixed-radix digits, which :mod:`modlin._arith.crt` needs for its sign test.
    Two loops: with both reductions in one, LLVM vectorises neither."""
    for e in range(t.shape[0]):
        t[e] = fmod_inv(t[e] - c[e], m, minv) * w
    for e in range(t.shape[0]):
        t[e] = fmod_inv(t[e], m, minv)


#: Entries per chunk of :func:`reconstruct_limbs` (its buffers stay in the L2 cache).
RESIDUE_STEP_LIMBS = 2048


#: Entries whose ``sum(y_i / m_i)`` has a fraction this close to 1/2 are rebuilt exactly.
#: The float sum is within ``N * 2**-51`` of the true one; bases chosen by the planner
#: keep every covered value at least ``2**-34`` away (:func:`planned_range`).
AMBIGUOUS = 2.0**-36


@njit
def _weigh(x, y, f, k, m, minv, w):  # pragma: no cover - compiled
    """``y <- (x mod m) * w mod m`` (``x`` may be ``y`` itself, or int32 residues); ``k + f += y / m``
    kept as whole part ``k`` and fraction ``f`` (so the float error does not grow with ``k``),
    over 1-D slices. Two loops: with both reductions in one, LLVM vectorises neither
    (1.25 -> 0.69 ns per entry and modulus)."""
    if w == 1.0:  # the weight is in the products already (reconstruct_limbs' weighted): one remainder
        for e in range(y.shape[0]):
            v = fmod_inv(x[e], m, minv)
            y[e] = v
            s = f[e] + v * minv
            whole = np.floor(s)
            k[e] += whole
            f[e] = s - whole
        return
    for e in range(y.shape[0]):
        y[e] = fmod_inv(x[e], m, minv) * w
    for e in range(y.shape[0]):
        v = fmod_inv(y[e], m, minv)
        y[e] = v
        s = f[e] + v * minv
        whole = np.floor(s)
        k[e] += whole
        f[e] = s - whole


@njit
def _crt_weights(x, lo, hi, moduli, w, k, flag, work, y):  # pragma: no cover - compiled
    """Residues ``x[i, e]``, ``lo <= e < hi`` (float64 integers below ``2**53`` in magnitude,
    or int32 residues, congruent to ``C`` modulo ``m_i``; only read) -> ``y[i, e - lo] = x_i w_i
    mod m_i``, with ``w_i = (M / m_i)**-1 mod m_i``, so that ``C = sum y_i M / m_i - k M``.

    ``k[e] = round(sum_i y_i / m_i)``: the sum is ``C / M + k`` and ``|C| < M / 2``.
    ``flag[e]`` marks a fraction too close to 1/2 for the float sum to round it surely.
    ``work``: float64 scratch of shape ``(2, RESIDUE_CHUNK)``; ``y``: float64 ``(N, hi - lo)``.
    """
    N = x.shape[0]
    f = work[0]
    kk = work[1]
    for e0 in range(lo, hi, RESIDUE_CHUNK):
        e1 = min(hi, e0 + RESIDUE_CHUNK)
        c = e1 - e0
        f[:c] = 0.0
        kk[:c] = 0.0
        for i in range(N):
            m = np.float64(moduli[i])
            _weigh(x[i, e0:e1], y[i, e0 - lo:e1 - lo], f[:c], kk[:c], m, 1.0 / m, np.float64(w[i]))
        for e in range(c):
            flag[e0 + e] = abs(f[e] - 0.5) < AMBIGUOUS
            k[e0 + e] = kk[e] + (f[e] >= 0.5)


@njit
def _crt_modp(x, lo, hi, moduli, w, cl, ch, kl, kh, p, flag, out, work, sums):  # pragma: no cover - compiled
    """The CRT of entries ``lo <= e < hi`` straight to int64 residues modulo ``p < 2**63``,
    in one pass per chunk: ``out[e] = sum_i y_i c_i + k (-M mod p) mod p``, with ``y_i``,
    ``k`` and ``flag`` as :func:`_crt_weights` makes them and ``c_i = M / m_i mod p``. ``x``
    (float64 sums, or int32 residues) is only read: the ``y_i`` of a chunk live in ``work[2]``.

    The constants are split in 32-bit halves (``cl``, ``ch``, ``kl``, ``kh``: uint64) so
    that both sums are exact in uint64: terms below ``2**26 * 2**32`` and at most
    ``2 N <= 62`` of them. The value ``V = h 2**32 + l`` is below ``(N + 1) 2**26 p``,
    so a float64 quotient ``V / p`` (below ``2**32``, error below ``2**-19``) biased down
    by ``2**-10`` is the true one or one less; ``V - q p`` computed modulo ``2**64`` is
    then in ``[0, 2 p)`` and one conditional subtraction finishes. ``work``: float64
    ``(3, RESIDUE_CHUNK)``; ``sums``: uint64 ``(2, RESIDUE_CHUNK)``.
    """
    N = x.shape[0]
    f, kk = work[0], work[1]
    sl, sh = sums[0], sums[1]
    up = np.uint64(p)
    pf = np.float64(p)
    for e0 in range(lo, hi, RESIDUE_CHUNK):
        e1 = min(hi, e0 + RESIDUE_CHUNK)
        c = e1 - e0
        f[:c] = 0.0
        kk[:c] = 0.0
        sl[:c] = 0
        sh[:c] = 0
        for i in range(N):
            m = np.float64(moduli[i])
            y = work[2, :c]
            _weigh(x[i, e0:e1], y, f[:c], kk[:c], m, 1.0 / m, np.float64(w[i]))
            a, b = cl[i], ch[i]
            for e in range(c):
                v = np.uint64(y[e])
                sl[e] += v * a
                sh[e] += v * b
        for e in range(c):
            flag[e0 + e] = abs(f[e] - 0.5) < AMBIGUOUS
            k = np.uint64(kk[e] + (f[e] >= 0.5))
            lo_ = sl[e] + k * kl
            hi_ = sh[e] + k * kh
            q = max(np.floor((np.float64(hi_) * 4294967296.0 + np.float64(lo_)) / pf - 2.0**-10), 0.0)
            r = (hi_ << np.uint64(32)) + lo_ - np.uint64(q) * up
            if r >= up:
                r -= up
            out[e0 + e] = np.int64(r)


def fused_crt(p: int | None, N: int) -> bool:
    """Whether the CRT of ``N`` moduli modulo ``p`` is :func:`_crt_modp`'s one pass (what
    :func:`reconstruct` runs, and what the RNS cost model prices)."""
    return p is not None and p < 2**63 and N <= FUSED_MAX_N


@lru_cache(maxsize=64)
def _fused_constants(moduli: tuple[int, ...], p: int):
    """For :func:`_crt_modp`: the 32-bit halves of the ``M / m_i mod p`` and of ``-M mod p``."""
    M = math.prod(moduli)
    c = [(M // m) % p for m in moduli]
    k = -M % p
    return (np.array([v & 0xFFFFFFFF for v in c], dtype=np.uint64), np.array([v >> 32 for v in c], dtype=np.uint64),
            np.uint64(k & 0xFFFFFFFF), np.uint64(k >> 32))


@njit
def _carry(t, acc, top, carry):  # pragma: no cover - compiled
    """``acc + t`` (float64 ``(L, c)``, exact integers) normalised into 16-bit limbs in ``acc``;
    what passes the top limb is added to ``top`` (``carry``: scratch of ``c`` entries).
    Limb-outer loops vectorise over entries."""
    L, c = t.shape
    carry[:] = 0.0
    for j in range(L):
        for e in range(c):
            v = t[j, e] + acc[j, e] + carry[e]
            hi = np.floor(v * (1.0 / 65536.0))
            acc[j, e] = v - hi * 65536.0
            carry[e] = hi
    for e in range(c):
        top[e] += carry[e]


@njit
def _sub_limbs(acc, q, pl, top, b):  # pragma: no cover - compiled
    """``acc <- acc - q * pl`` in 16-bit limbs (float64), the final borrow added to ``top``
    (``b``: scratch of ``c`` entries). Each ``q * pl[j]`` is below ``2**53``: ``q < 2**37``,
    limbs below ``2**16``."""
    L, c = acc.shape
    b[:] = 0.0
    for j in range(L):
        for e in range(c):
            v = acc[j, e] - q[e] * pl[j] + b[e]
            hi = np.floor(v * (1.0 / 65536.0))
            acc[j, e] = v - hi * 65536.0
            b[e] = hi
    for e in range(c):
        top[e] += b[e]


@njit
def _reduce(acc, top, pl, ps, d, work):  # pragma: no cover - compiled
    """``V = top * 2**(16 L) + value(acc)``, with ``0 <= V < 2**37 p``, reduced modulo ``p``
    into ``acc`` (``top`` becomes 0); ``pl`` are the limbs of ``p`` (``L >= 3``) and ``ps`` is
    ``p / 2**(16 (L - 3))`` as a float (at least ``2**32`` unless ``L = 3``).

    The quotient is estimated from the top three limbs: its error is below ``2**-13``
    (rounding of a quotient below ``2**37``, and the dropped limbs), so biased down by
    ``2**-10`` it is the true one or one less, and one conditional subtraction is left.
    ``d`` (shaped like ``acc``) and ``work`` (``(3, c)``) are scratch.
    """
    L, c = acc.shape
    q, below, b = work[0], work[1], work[2]
    for e in range(c):
        vs = ((top[e] * 65536.0 + acc[L - 1, e]) * 65536.0 + acc[L - 2, e]) * 65536.0 + acc[L - 3, e]
        q[e] = max(np.floor(vs / ps - 2.0**-10), 0.0)
    _sub_limbs(acc, q, pl, top, b)  # now 0 <= V < 2p: top is 0 or 1
    for j in range(L):  # loops: an array copy would bring back the import that the scratch avoids
        for e in range(c):
            d[j, e] = acc[j, e]
    for e in range(c):
        below[e] = top[e]
    q[:] = 1.0
    _sub_limbs(d, q, pl, below, b)  # V - p, non-negative iff below >= 0
    for j in range(L):
        for e in range(c):
            acc[j, e] += (below[e] >= 0.0) * (d[j, e] - acc[j, e])
    top[:] = 0.0


@njit
def _negate(acc, top, carry):  # pragma: no cover - compiled
    """Magnitudes of two's-complement values (``top`` is -1 for negatives, else 0; ``carry``:
    scratch of ``c`` entries)."""
    L, c = acc.shape
    carry[:] = 1.0
    for j in range(L):
        for e in range(c):
            ng = top[e] < 0.0
            v = 65535.0 - acc[j, e] + carry[e]
            hi = v >= 65536.0
            carry[e] = hi
            acc[j, e] += ng * (v - 65536.0 * hi - acc[j, e])


@njit
def _limbs_to_int64(acc, neg, out):  # pragma: no cover - compiled
    """``out = (-1)**neg * value(acc[:4])`` for magnitudes below ``2**63``; without signs, the
    bits of values below ``2**64`` (read as uint64). Pairs of limbs are joined in float64
    (exact below ``2**32``), so each entry takes two conversions, in loops over entries."""
    L = acc.shape[0]
    for e in range(out.shape[0]):
        lo = acc[0, e] + (65536.0 * acc[1, e] if L > 1 else 0.0)
        hi = (acc[2, e] if L > 2 else 0.0) + (65536.0 * acc[3, e] if L > 3 else 0.0)
        v = (np.int64(hi) << 32) | np.int64(lo)
        out[e] = v - 2 * v * neg[e]


def _limbs16(v: int, L: int) -> np.ndarray:
    """The low ``L`` 16-bit limbs of ``v >= 0`` (float64), in time linear in ``L`` (a shift per
    limb was quadratic: 7 s for the 3,140 cofactors of a 40,000-bit modulus' basis)."""
    return np.frombuffer((v & ((1 << (16 * L)) - 1)).to_bytes(2 * L, "little"), dtype="<u2").astype(np.float64)


def _cofactors_mod(M: int, moduli: tuple[int, ...], cof: list[int], p: int) -> list[int]:
    """``cof_i mod p`` for the cofactors ``cof_i = M / m_i``, in time linear in ``p``'s size per modulus.

    ``M / m_i`` is ``M mod p`` divided by ``m_i`` modulo ``p``: ``(M mod p) + t p`` with
    ``t = -(M mod p) p**-1 mod m_i`` is a multiple of ``m_i`` below ``m_i p``, so its quotient
    by ``m_i`` (congruent to ``M / m_i``, ``m_i`` being invertible) is the residue. One division by a word
    instead of a remainder of a ``2 log p``-bit cofactor (10 s for the same basis). A modulus
    sharing a factor with ``p`` takes the remainder.
    """
    Mp = M % p
    return [c % p if math.gcd(m, p) != 1 else (Mp + (-Mp * pow(p, -1, m)) % m * p) // m
            for m, c in zip(moduli, cof, strict=True)]


@lru_cache(maxsize=64)
def _crt_constants(moduli: tuple[int, ...], p: int | None):
    """Per basis (and ``p``): the weights ``w_i``, the limbs of ``M / m_i`` (mod ``p``), of
    what ``k`` multiplies (``M`` negated, or ``-M mod p``), of ``p``, and ``p``'s scale."""
    M = math.prod(moduli)
    N = len(moduli)
    cof = [M // m for m in moduli]
    w = np.array([pow(c % m, -1, m) if m > 1 else 0 for c, m in zip(cof, moduli)], dtype=np.int64)
    if p is None:
        L = (N * M).bit_length() // 16 + 1
        return w, np.stack([_limbs16(c, L) for c in cof]), -_limbs16(M, L), None, None
    L = max(-(-p.bit_length() // 16), 3)
    cst = np.stack([_limbs16(c, L) for c in _cofactors_mod(M, moduli, cof, p)])
    return w, cst, _limbs16(-M % p, L), _limbs16(p, L), p / 2 ** (16 * (L - 3))


def reconstruct(res: np.ndarray, basis: Basis, *, p: int | None = None, as_object: bool = False,
                arena: Arena | None = None) -> np.ndarray:
    """Integers from their residues ``res`` (shape ``(N, ...)``: integers congruent to the
    values modulo ``m_i``, below ``2**53`` in magnitude; usually in ``[0, m_i)``).

    Returns the signed values (each in ``[-(M//2), (M-1)//2]``) as int64, or as an
    object array of Python ints when ``as_object``; with ``p``, the values
    modulo ``p`` in ``[0, p)`` (int64 for ``p <= 2**63``, object above).
    The CRT's workspace (a copy of ``res`` in padded rows: int32 residues stay int32, which
    the CRT reads as they are; anything else becomes float64) comes from ``arena`` when given.

    The CRT is ``C = sum_i y_i M/m_i - k M`` with ``y_i = res_i (M/m_i)**-1 mod m_i``
    and ``k = round(sum_i y_i / m_i)``. The sum is a float64 product of the ``y``
    with the 16-bit limbs of the ``M/m_i`` (reduced modulo ``p`` first when ``p``
    is given), exact since its terms are below ``2**42``; carries and one
    reduction modulo ``p`` run in limb-outer loops over chunks of entries. An
    entry whose ``k`` the float sum cannot settle (its value within a relative
    ``2**-34`` of ``M/2``) is rebuilt with Python integers.
    """
    N = len(basis.moduli)
    E = math.prod(res.shape[1:])
    x = padded_rows(N, E, np.int32 if res.dtype == np.int32 else np.float64, arena, "products")
    x[:, :E] = res.reshape(N, E)
    return reconstruct_rows(x, E, basis, p, as_object).reshape(res.shape[1:])


def _crt_step(N: int, L: int) -> int:
    """Entries per chunk of the CRT's limb loops: their buffers, ``3 L + N + 4`` floats an entry,
    about a megabyte, near the cache. Four times that (chunks of up to 16384 entries) left
    them in memory, and with few chunks one worker had most of the work: ``matmul`` modulo
    ``2**127 - 1`` at ``n = 200``, 35 ms against 26 (medians of 8, interleaved); 2048 x 2048
    the same either way."""
    return max(1024, min(16384, 2**16 // (L + min(N, CRT_BLOCK))))


def crt_scratch(N: int, modulus: int, E: int, workers: int = 1) -> int:
    """Bytes of the CRT's chunk buffers for ``N`` moduli, ``E`` results and results modulo
    ``modulus`` (or up to it): limb sums, accumulators, weights and conversion buffers, of
    one chunk for each of ``workers`` (no more chunks than ``E`` fills)."""
    L = max(-(-modulus.bit_length() // 16), 3) + 1
    return 8 * min(_crt_step(N, L) * workers, E) * (4 * L + 4 + N)


def out_dtype(p: int | None, as_object: bool):
    """The dtype of the ``out=`` :func:`reconstruct_rows` writes into for results modulo ``p``
    (None: exact): int64 for int64 results, object for Python ints made from limbs; None for
    ``2**63 < p <= 2**64``, whose uint64 words become ints by numpy's cast (no ``out=``)."""
    if p is None:
        return object if as_object else np.int64
    return np.int64 if p <= 2**63 else None if p <= 2**64 else object


def reconstruct_rows(x: np.ndarray, E: int, basis: Basis, p: int | None, as_object: bool,
                      out: np.ndarray | None = None) -> np.ndarray:
    """:func:`reconstruct` of the first ``E`` columns of ``x``, a C-contiguous ``(N, E + pad)``
    array (see :func:`padded_rows`) of float64 sums or int32 residues, only read; returns
    the flat result, written into ``out`` when given: C-contiguous, of ``E`` entries, of
    :func:`out_dtype`."""
    N = len(basis.moduli)
    w, cst, kfac, pl, ps = _crt_constants(basis.moduli, p)
    L = cst.shape[1]
    k = np.empty(E)
    flag = np.empty(E, dtype=np.bool_)
    moduli = np.array(basis.moduli, dtype=np.int64)
    # int64 words, or for 2**63 < p <= 2**64 uint64 ones that become Python ints by
    # numpy's cast (2.5x faster than through marshal)
    small = (p is not None and p <= 2**64) or (p is None and not as_object)
    if out is not None and out.dtype != out_dtype(p, as_object):
        raise ValueError("out= takes int64 results, or object ones of Python ints made from limbs")
    given, out = out, (np.empty(E, dtype=np.int64) if out is None else out.reshape(E)) if small else None
    neg = np.zeros(E, dtype=np.bool_)
    step = _crt_step(N, L)

    kept = {}  # each thread's buffers, made once: few calls that need the GIL per chunk

    def entries(part: range) -> list:
        """The CRT of the entries ``part``: written to ``out``, or as limbs to be written."""
        if not part:
            return []
        limbs = []
        t = None
        for e0 in range(part.start, part.stop, step):
            e1 = min(part.stop, e0 + step)
            c = e1 - e0
            if t is None or c < step:  # whole buffers: numba vectorises loops over C-contiguous arrays
                mine = kept.get((threading.get_ident(), c))
                if mine is None:
                    # the kernels' scratch comes from here too: one allocating inside would make numba's
                    # cached kernel import numba.np.arrayobj on its first load (40 ms of a first call)
                    mine = kept[threading.get_ident(), c] = (
                        np.empty((L, c)), np.empty((L, c)), np.empty((3, c)), np.empty((N, c)),
                        np.empty((L, c)), np.empty(c), np.empty((2, RESIDUE_CHUNK)))
                t, d, work, y, acc_p, top_p, scratch = mine
            if p is not None:  # the weights, sums, carries and reduction in one kernel
                acc, top = acc_p, top_p
                _crt_limbs(x, e0, e1, moduli, w, cst, kfac, pl, ps, k, flag, scratch, y, t, acc, d, work, top)
            else:
                # the chunk's weights in a buffer that stays in cache: the products are only read
                # (float64 sums, or int32 residues half their size)
                _crt_weights(x, e0, e1, moduli, w, k, flag, scratch, y)
                acc = np.multiply.outer(kfac, k[e0:e1])  # -k M: at most N * 2**16 per limb
                top = np.zeros(c)
                for i0 in range(0, N, CRT_BLOCK):
                    i1 = min(N, i0 + CRT_BLOCK)
                    np.matmul(cst[i0:i1].T, y[i0:i1], out=t)
                    _carry(t, acc, top, work[0])
            if p is None:
                neg[e0:e1] = top < 0
                _negate(acc, top, work[0])
            if small:
                _limbs_to_int64(acc, neg[e0:e1], out[e0:e1])
            else:  # the limbs are integers below 2**16 by construction
                limbs.append(acc.astype(np.uint16))
        return limbs

    starts = range(0, E, step)
    t = workers(E * N * LIMB_CRT, len(starts))  # the same kernel as reconstruct_limbs'
    if fused_crt(p, N):
        # one pass per chunk, nothing but the result written (3x faster than the limbs)
        cl, ch, kl, kh = _fused_constants(basis.moduli, p)

        def fused(part: slice) -> None:
            lo, hi = part.start * RESIDUE_CHUNK, min(E, part.stop * RESIDUE_CHUNK)
            _crt_modp(x, lo, hi, moduli, w, cl, ch, kl, kh, p, flag, out, np.empty((3, RESIDUE_CHUNK)),
                      np.empty((2, RESIDUE_CHUNK), dtype=np.uint64))

        chunks = -(-E // RESIDUE_CHUNK)
        run(fused, slabs(chunks, workers(E * N * 4, chunks)))
    elif small:  # one range of entries per worker
        with quiet_blas():  # the limbs' GEMMs are at most CRT_BLOCK deep, mostly a few
            run(lambda part: entries(range(part.start * step, min(E, part.stop * step))),
                slabs(len(starts), t))
    else:
        # Python ints are made under the GIL, by this thread, chunk after chunk, while the
        # workers (and this thread, when the next chunk is not ready) make later chunks' limbs;
        # at most 2 t chunks' limbs exist at once. Rounds of t chunks and then their ints had
        # every core but this one idle while the ints were made: the CRT of a 127-bit matmul at
        # n = 200 took 3.5 ms against 2.9 (medians of 60, interleaved)
        writer = IntWriter(E, given)
        parts = [range(e0, min(E, e0 + step)) for e0 in starts]
        with quiet_blas():
            in_order(entries, parts, lambda i, limbs: writer.add(limbs[0], neg[parts[i].start:parts[i].stop]),
                     t, 2 * t)
        out = writer.result()
    if p is not None and p > 2**63:
        out = out.view(np.uint64).astype(object) if small else out
    for e in np.flatnonzero(flag):  # both CRTs leave x as it was
        out[e] = _exact_entry(x[:, e], basis, p)
    return out


@njit
def _store_limbs(acc, out, p, subtract, tmp):  # pragma: no cover - compiled
    """Entry ``r n + c`` of ``acc`` (residues modulo ``p`` as 16-bit limbs in float64, ``(L16,
    m n)``) into ``out[r, c]`` (``(m, n, L)`` uint32, any strides) as 32-bit limbs, or with
    ``subtract`` ``out[r, c] <- (out[r, c] - it) mod p``; ``p``: its 32-bit limbs (uint64).
    A row's 32-bit limbs are joined limb by limb (loops over entries), then each entry's
    borrow runs along its own limbs, which lie side by side in ``out`` (limb-outer loops
    there read and wrote them ``L`` apart: 32 against 19 ns an entry at 256 bits).
    ``tmp``: ``(L, n)`` uint64 scratch."""
    m, n, L = out.shape
    L16 = acc.shape[0]
    m32 = np.uint64(0xFFFFFFFF)
    for r in range(m):
        base = r * n
        for j in range(L):
            a0, t = acc[2 * j, base:base + n], tmp[j]
            if 2 * j + 1 < L16:
                a1 = acc[2 * j + 1, base:base + n]
                for c in range(n):
                    t[c] = np.uint64(a0[c] + 65536.0 * a1[c])  # below 2**32: exact
            else:
                for c in range(n):
                    t[c] = np.uint64(a0[c])
        for c in range(n):
            if subtract:
                b = np.uint64(0)
                for j in range(L):
                    s = np.uint64(out[r, c, j]) - tmp[j, c] - b  # wraps below zero: the top bit says so
                    tmp[j, c] = s & m32
                    b = s >> np.uint64(63)
                if b != 0:  # out - it < 0: p added back, with carries
                    carry = np.uint64(0)
                    for j in range(L):
                        s = tmp[j, c] + p[j] + carry
                        tmp[j, c] = s & m32
                        carry = s >> np.uint64(32)
            for j in range(L):
                out[r, c, j] = np.uint32(tmp[j, c])


@njit
def _crt_limbs(x, e0, e1, moduli, w, cst, kfac, pl, ps, k, flag, scratch, y, t, acc, d, work, top):  # pragma: no cover - compiled
    """The CRT of entries ``e0 <= e < e1`` modulo ``p`` into ``acc`` (16-bit limbs in float64),
    one call per chunk: :func:`_crt_weights`, the sums ``sum_i y_i c_i - k M`` against the limbs
    ``cst`` and ``kfac`` (:data:`CRT_BLOCK` moduli at a time, exact), :func:`_carry` and
    :func:`_reduce` (:func:`reconstruct_rows`' and :func:`reconstruct_limbs`' entries modulo ``p``). Buffers of the chunk's entries: ``y`` ``(N, c)``, ``t``, ``acc``, ``d``
    ``(L16, c)``, ``work`` ``(3, c)``, ``top`` ``(c,)``."""
    N, L16 = cst.shape
    c = e1 - e0
    _crt_weights(x, e0, e1, moduli, w, k, flag, scratch, y)
    for j in range(L16):
        aj, f = acc[j], kfac[j]
        for e in range(c):
            aj[e] = f * k[e0 + e]
    for e in range(c):
        top[e] = 0.0
    for i0 in range(0, N, CRT_BLOCK):
        for j in range(L16):
            tj = t[j]
            for e in range(c):
                tj[e] = 0.0
        i, i1 = i0, min(N, i0 + CRT_BLOCK)
        while i + 4 <= i1:  # four moduli a pass over t: 19 -> 12 ns an entry at 127 bits, 72 -> 51 at 256
            y0, y1, y2, y3 = y[i], y[i + 1], y[i + 2], y[i + 3]
            for j in range(L16):
                c0, c1, c2, c3, tj = cst[i, j], cst[i + 1, j], cst[i + 2, j], cst[i + 3, j], t[j]
                for e in range(c):
                    tj[e] += (c0 * y0[e] + c1 * y1[e]) + (c2 * y2[e] + c3 * y3[e])
            i += 4
        for i in range(i, i1):
            yi = y[i]
            for j in range(L16):
                cij, tj = cst[i, j], t[j]
                for e in range(c):
                    tj[e] += cij * yi[e]
        _carry(t, acc, top, work[0])
        _reduce(acc, top, pl, ps, d, work)


def crt_weights(moduli: tuple[int, ...]) -> np.ndarray:
    """The CRT's weights ``w_i = (M / m_i)**-1 mod m_i`` (float64): the factor
    :func:`reconstruct_limbs`' ``weighted`` products carry already."""
    return _crt_constants(tuple(moduli), None)[0].astype(np.float64)


def reconstruct_limbs(x: np.ndarray, basis: Basis, p: int, out: np.ndarray, *, subtract: bool = False,
                      weighted: bool = False) -> None:
    """A product modulo ``p`` from its residues, as 32-bit limbs: :func:`reconstruct_rows` for
    results that stay limbs (the big-prime linear algebra's blocks).

    ``x``: ``(N, m n + pad)`` float64 sums (each congruent to an entry of the product ``C``
    modulo ``m_i``, below ``2**53``; only read), ``|C| < M / 2``; ``out``: ``(m, n, L)`` uint32
    (any strides), ``L`` limbs of ``p``, written with ``C mod p``, or with ``subtract``
    ``out <- (out - C) mod p``. The same sums, carries and reduction as :func:`reconstruct_rows`,
    a chunk of rows at a time, the workers' chunks side by side; an entry whose ``k`` the float
    sum cannot settle is rebuilt with Python integers before it is stored. ``weighted``: ``x_i``
    is congruent to ``w_i C`` (:func:`crt_weights`), one operand's residues having been made with
    the weight in (at no cost: it is in their own weights), which saves a remainder and a
    product per entry and modulus here.
    """
    m, n, L = out.shape
    E = m * n
    if E == 0:
        return
    N = len(basis.moduli)
    w, cst, kfac, pl, ps = _crt_constants(basis.moduli, p)
    if weighted:
        w = np.ones_like(w)
    L16 = cst.shape[1]
    p32 = np.array([(p >> (32 * j)) & 0xFFFFFFFF for j in range(L)], dtype=np.uint64)
    moduli = np.array(basis.moduli, dtype=np.int64)
    rows = max(1, RESIDUE_STEP_LIMBS // max(n, 1))
    chunks = range(0, m, rows)
    k, flags = np.empty(E), np.empty(E, dtype=np.bool_)  # each worker writes its own entries'

    def part(sl: slice) -> None:
        scratch = np.empty((2, RESIDUE_CHUNK))
        tmp = np.empty((L, n), dtype=np.uint64)
        bufs = None
        for r0 in chunks[sl]:
            r1 = min(m, r0 + rows)
            e0, e1 = r0 * n, r1 * n
            c = e1 - e0
            if bufs is None or bufs[0].shape[1] != c:  # whole buffers: loops over them vectorise
                bufs = (np.empty((N, c)), np.empty((L16, c)), np.empty((L16, c)), np.empty((L16, c)),
                        np.empty((3, c)), np.empty(c))
            y, t, acc, d, work, top = bufs
            _crt_limbs(x, e0, e1, moduli, w, cst, kfac, pl, ps, k, flags, scratch, y, t, acc, d, work, top)
            if flags[e0:e1].any():
                for e in np.flatnonzero(flags[e0:e1]):
                    acc[:, e] = _limbs16(_exact_entry(x[:, e0 + e], basis, p, weighted), L16)
            _store_limbs(acc, out[r0:r1], p32, subtract, tmp)

    run(part, slabs(len(chunks), workers(E * N * LIMB_CRT, len(chunks))))


def _exact_entry(x: np.ndarray, basis: Basis, p: int | None, weighted: bool = False) -> int:
    """One entry of :func:`reconstruct` from its residues ``x_i`` (which carry the CRT's weights
    when ``weighted``), with Python integers."""
    M = basis.M
    w = np.ones(len(basis.moduli), dtype=np.int64) if weighted else _crt_constants(basis.moduli, p)[0]
    y = [int(v) * int(wi) % m for v, wi, m in zip(x, w, basis.moduli)]
    c = sum(yi * (M // m) for yi, m in zip(y, basis.moduli)) % M
    c = c - M if c > (M - 1) // 2 else c
    return c if p is None else c % p


@njit(inline="always")
def _round_limbs(limb, nl, S):  # pragma: no cover - compiled
    """``value(limb[:nl]) * 2**-S`` rounded to the nearest double (ties to even)."""
    j = nl - 1
    while j >= 0 and limb[j] == 0:
        j -= 1
    if j < 0:
        return 0.0
    nb = 32 * j + bit_length(limb[j])
    E = nb - 1 - S  # the exponent of the leading bit of the result
    keep = 53 if E >= -1022 else E + 1075  # bits a subnormal result holds
    if keep < 0:
        return 0.0
    # the leading 64 bits as `top`, and whether any bit below them is set
    sticky = False
    if nb <= 64:
        top = limb[0] | (limb[1] << np.uint64(32)) if j >= 1 else limb[0]
        top <<= np.uint64(64 - nb)
    else:
        lo = nb - 64
        w = lo // 32
        off = np.uint64(lo % 32)
        top = (limb[w] >> off) | (limb[w + 1] << (np.uint64(32) - off))
        if off:
            top |= limb[w + 2] << (np.uint64(64) - off)
            sticky = (limb[w] & ((np.uint64(1) << off) - np.uint64(1))) != 0
        for i in range(w):
            sticky = sticky or limb[i] != 0
    if keep == 0:  # between 2**-1075 and 2**-1074: up unless exactly the tie
        rest = top & np.uint64(0x7FFFFFFFFFFFFFFF)
        return 5e-324 if (rest != 0 or sticky) else 0.0
    drop = np.uint64(64 - keep)
    q = top >> drop
    rem = top & ((np.uint64(1) << drop) - np.uint64(1))
    half = np.uint64(1) << (drop - np.uint64(1))
    if rem > half or (rem == half and (sticky or (q & np.uint64(1)))):
        q += np.uint64(1)
    return np.ldexp(np.float64(q), nb - keep - S)


@njit
def _exact_double_entry(buf, e, neg, moduli, limb, S):  # pragma: no cover - compiled
    """The correctly rounded ``value * 2**-S`` of the mixed-radix digits ``buf[:, e]`` (a
    magnitude; with ``neg`` the complemented value's), through exact 32-bit limbs."""
    N = buf.shape[0]
    mask = np.uint64(0xFFFFFFFF)
    limb[:] = 0
    nl = 1
    for i in range(N - 1, -1, -1):  # value = value * m_i + x_i
        m = np.uint64(moduli[i])
        carry = np.uint64(buf[i, e])
        if neg:
            carry = m - np.uint64(1) - carry + np.uint64(i == 0)
        for t in range(nl):
            v = limb[t] * m + carry
            limb[t] = v & mask
            carry = v >> np.uint64(32)
        if carry:
            limb[nl] = carry
            nl += 1
    return _round_limbs(limb, nl, S)


@njit
def _to_double_kernel(res, lo_e, hi_e, moduli, inv, half, sa, sb, out):  # pragma: no cover - compiled
    """``out[i, j] = round(C'_ij * 2**-(sa_i + sb_j))`` from residues ``res[:, i*n + j]``,
    for the flat entries ``lo_e <= i*n + j < hi_e``.

    Per chunk, in loops that vectorise: Garner digits; the sign (digits above
    those of ``(M-1)/2``); the magnitude in double-double by Horner on the
    digits, complemented for a negative value (``M - U = sum((m_i - 1 - x_i) P_i) + 1``),
    with exact products (Dekker's split: 26-bit halves times moduli below
    ``2**26``). Its high part is the correctly rounded magnitude unless the exact
    value may lie across a rounding boundary (within the error bound), or the
    result is subnormal: those rare entries are left NaN (never a result here: the
    values are finite integers), counted in the return value, for :func:`_exact_entries`
    to rebuild exactly in limbs. (A separate kernel, compiled only when some entry needs
    it: the exact path is most of this one's code.)
    """
    N = res.shape[0]
    n = sb.shape[0]
    buf = np.empty((N, RESIDUE_CHUNK))
    hi = np.empty(RESIDUE_CHUNK)
    lo = np.empty(RESIDUE_CHUNK)
    sgn = np.empty(RESIDUE_CHUNK)
    rel = (N + 2) * 2.0**-100  # bound on the double-double's relative error
    exact = 0
    row, col = lo_e // n, lo_e % n
    for e0 in range(lo_e, hi_e, RESIDUE_CHUNK):
        e1 = min(hi_e, e0 + RESIDUE_CHUNK)
        c = e1 - e0
        for i in range(N):
            for e in range(c):
                buf[i, e] = res[i, e0 + e]
        for i in range(1, N):
            mf = np.float64(moduli[i])
            for j in range(i):
                garner_step(buf[i, :c], buf[j, :c], mf, 1.0 / mf, np.float64(inv[i, j]))
        # sign: compare the digits with those of (M-1)/2 from the top (0: equal so far)
        sgn[:c] = 0.0
        for i in range(N - 1, -1, -1):
            h = half[i]
            for e in range(c):
                x = buf[i, e]
                d = (1.0 if x > h else 0.0) - (1.0 if x < h else 0.0)  # selects: they vectorise
                sgn[e] = d if sgn[e] == 0.0 else sgn[e]
        for e in range(c):
            ng = sgn[e] > 0.0
            mtop = np.float64(moduli[N - 1])
            hi[e] = buf[N - 1, e] + ((mtop - 1.0 - 2.0 * buf[N - 1, e] + (N == 1)) if ng else 0.0)
            lo[e] = 0.0
        for i in range(N - 2, -1, -1):
            mf = np.float64(moduli[i])
            one = 1.0 * (i == 0)
            for e in range(c):
                ng = sgn[e] > 0.0
                d = buf[i, e] + ((mf - 1.0 - 2.0 * buf[i, e] + one) if ng else 0.0)
                x = hi[e]
                t = 134217729.0 * x  # Dekker: x = x1 + x2, x1 with 26 bits, so x1*mf is exact
                x1 = t - (t - x)
                p1 = x1 * mf
                p2 = (x - x1) * mf
                s = p1 + p2  # TwoSum
                bb = s - p1
                err = (p1 - (s - bb)) + (p2 - bb)
                q = err + lo[e] * mf + d
                h2 = s + q  # FastTwoSum (|s| >= |q|)
                lo[e] = q - (h2 - s)
                hi[e] = h2
        for e in range(c):
            # every value within twice the error bound of hi + lo rounds to hi (rounding is
            # monotone, so checking both ends suffices): hi is the rounded magnitude
            h, lw = hi[e], lo[e]
            d = 2.0 * rel * h
            unsure = (h + (lw + d) != h) | (h + (lw - d) != h)
            sgn[e] = (1.0 if sgn[e] > 0.0 else 0.0) + (2.0 if unsure else 0.0)
        for e in range(c):
            S = sa[row] + sb[col]
            flag = sgn[e]
            ng = flag == 1.0 or flag == 3.0
            v = math.ldexp(hi[e], -S)
            # unsure, or at most 2**-1022: hi was rounded to 53 bits and ldexp would round a
            # subnormal again (even up to exactly 2**-1022), so those are rounded once, exactly
            if flag >= 2.0 or (v <= 2.2250738585072014e-308 and hi[e] != 0.0):
                out[e0 + e] = np.nan
                exact += 1
            else:
                out[e0 + e] = -v if ng else v
            col += 1
            if col == n:
                row, col = row + 1, 0
    return exact


@njit
def _exact_entries(res, moduli, inv, half, L, sa, sb, idx, out):  # pragma: no cover - compiled
    """``out[e]`` for the entries ``e`` in ``idx`` that :func:`_to_double_kernel` left to the
    exact path: the Garner digits and the sign of each, as that kernel computes them
    (the same operations on one entry), then the value rebuilt in 32-bit limbs and
    rounded once (:func:`_exact_double_entry`)."""
    N = res.shape[0]
    n = sb.shape[0]
    buf = np.empty((N, 1))
    limb = np.zeros(L + 2, dtype=np.uint64)  # two spare limbs: the rounding reads past the top
    for t in range(idx.shape[0]):
        e = idx[t]
        for i in range(N):
            buf[i, 0] = res[i, e]
        for i in range(1, N):
            mf = np.float64(moduli[i])
            for j in range(i):
                garner_step(buf[i, :1], buf[j, :1], mf, 1.0 / mf, np.float64(inv[i, j]))
        sgn = 0.0
        for i in range(N - 1, -1, -1):
            x = buf[i, 0]
            h = half[i]
            d = (1.0 if x > h else 0.0) - (1.0 if x < h else 0.0)
            sgn = d if sgn == 0.0 else sgn
        ng = sgn > 0.0
        v = _exact_double_entry(buf, 0, ng, moduli, limb, sa[e // n] + sb[e % n])
        out[e] = -v if ng else v


def to_double(res: np.ndarray, basis: Basis, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """The correctly rounded doubles ``C'_ij * 2**-(sa_i + sb_j)`` of the integers ``C'``
    (``|C'| <= (M-1)/2``) whose residues are ``res`` (shape ``(N, m, n)``, entries in
    ``[0, m_i)``, any integer or float dtype)."""
    N, m, n = res.shape
    L = basis.M.bit_length() // 32 + 1
    out = np.empty(m * n)
    if out.size:
        args = (res.reshape(N, -1), np.array(basis.moduli, dtype=np.int64), basis.garner_inverses,
                basis.half_digits.astype(np.float64))
        sa, sb = np.asarray(sa, dtype=np.int64), np.asarray(sb, dtype=np.int64)
        flat = args[0]
        unsure = each(lambda r: _to_double_kernel(flat, r.start, r.stop, *args[1:], sa, sb, out), out.size,
                      3 * len(basis.moduli))
        if any(unsure):
            _exact_entries(*args, L, sa, sb, np.flatnonzero(np.isnan(out)), out)
    return out.reshape(m, n)
