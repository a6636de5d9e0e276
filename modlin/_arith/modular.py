"""Vectorised modular arithmetic on floating-point words.

Everything here works on integers stored in a floating-point type (or int64)
and is exact by construction; each bound below is proved in the docstring of
the function that relies on it and evaluated with Python integers.

The element-wise passes are numba kernels: NumPy would take four or five
separate passes (and temporaries) for one reduction, which costs a measurable
share of the GEMM time at the sizes modlin targets. They run on one thread on
purpose: they alternate with multithreaded BLAS calls, and a parallel runtime's
spinning workers then steal cores from the GEMM (measured: a (1,2)-product at
n = 2048 went from 2.4 to 3.6 dgemm times with ``parallel=True``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from modlin._engines.backend import is_cupy
from modlin._engines.jit import njit
from modlin._engines.threads import each, each_row
from modlin._runtime.calibration import L1_CHUNK
from modlin._runtime.scratch import scratch

#: Precision of the kernels' arithmetic: they compute in float64 whatever the
#: word type (fp32 and int32 accumulators are converted exactly on load).
KERNEL_T = 53


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Reduction:
    """Floating-point reduction of integers ``|y| <= y_max`` modulo ``p``.

    The kernel computes ``c = rint(fl(y * q))`` with ``q = fl(1/p)`` and
    ``r = (y - c*p_hi) - c*p_lo`` where ``p = p_hi + p_lo`` and ``p_hi`` is a
    multiple of ``2**z`` (Alg 2.1 of arXiv 2601.07508, with ``p`` split so that ``c*p``
    stays exact when ``y`` is far above ``2**t``, as in modular scaling).

    Bounds, for precision ``t`` (unit roundoff ``u = 2**-t``): ``fl(y*q)`` is
    ``y/p`` times ``(1+e1)(1+e2)`` with ``|e1|, |e2| <= u``, so it is within
    ``3*y_max/(p*2**t)`` of ``y/p``, and rounding adds at most ``1/2``. Hence

    - ``|c| <= c_max = y_max // p + 1 + ceil(3*y_max / (p*2**t))``;
    - ``|r| <= r_max = p // 2 + 1 + ceil(3*y_max / 2**t)``.

    The result is exact when ``c*(p >> z)``, ``c*p_lo`` and ``r + c*p_lo`` are
    all at most ``2**t`` in magnitude: each operation then produces an integer
    that the format holds exactly. :meth:`for_bound` picks the smallest ``z``
    that satisfies them, or reports that none does.
    """

    p: int
    y_max: int
    z: int
    t: int = KERNEL_T

    @classmethod
    def for_bound(cls, p: int, y_max: int, t: int = KERNEL_T) -> "Reduction":
        """The reduction of ``|y| <= y_max`` in precision ``t``; ValueError if impossible."""
        for z in range(p.bit_length() + 1):
            red = cls(p, y_max, z, t)
            if red.is_exact():
                return red
        raise ValueError(
            f"no exact floating-point reduction of |y| <= {y_max} modulo {p} in a {t}-bit significand"
        )

    @property
    def p_hi(self) -> int:
        return (self.p >> self.z) << self.z

    @property
    def p_lo(self) -> int:
        return self.p - self.p_hi

    @property
    def c_max(self) -> int:
        return self.y_max // self.p + 1 + _ceil_div(3 * self.y_max, self.p * 2**self.t)

    @property
    def r_max(self) -> int:
        """Bound on ``|r|`` after the reduction."""
        return self.p // 2 + 1 + _ceil_div(3 * self.y_max, 2**self.t)

    def is_exact(self) -> bool:
        L = 2**self.t
        c = self.c_max
        return (
            self.p < 2 ** (self.t - 1)
            and c * (self.p >> self.z) <= L
            and c * self.p_lo <= L
            and self.r_max + c * self.p_lo <= L
        )

    def constants(self) -> tuple[float, float, float]:
        """``(q, p_hi, p_lo)`` as float64 for the kernels."""
        return 1.0 / self.p, float(self.p_hi), float(self.p_lo)


_NO_REDUCTION = (0.0, 0.0, 0.0)  # q = 0 makes c = 0: the reduction is the identity


def word_bounds(h: int, s: int, u: int) -> tuple[int, ...]:
    """Bounds on the ``u`` balanced words of integers ``|x| <= h`` in base ``2**s``.

    :func:`balanced_words` writes ``x = sum_i 2**(s*i) * x_i``: the top word is
    ``floor((x + D/2) / D)`` with ``D = 2**(s*(u-1))`` and each lower word is a
    remainder in ``[-2**(s-1), 2**(s-1))`` of the same rounding one level down.
    So ``|x_top| <= floor(h/D + 1/2)`` and ``|x_i| <= 2**(s-1)`` below it.
    """
    if u == 1:
        return (h,)
    D = 2 ** (s * (u - 1))
    top = (2 * h + D) // (2 * D)
    return (2 ** (s - 1),) * (u - 1) + (top,)


@njit
def _residues_to_words(x, lo, hi, p, s, u, words):  # pragma: no cover - compiled
    """Split ``x[lo:hi]`` into ``u`` balanced words of ``x mod p``, assuming ``-p//2 <= x < p``.

    The residue is taken in ``[-p//2, (p-1)//2]`` (for even ``p`` one short of
    symmetric, so that ``p = 256`` fits int8 words); its magnitude is at most ``p//2``.

    Returns how many entries broke the assumption (their words are then wrong
    and the caller reduces and redoes). One pass over ``x`` per word, each
    recomputing the residue (:func:`_word`), and no branch but a loop-invariant
    one, which LLVM hoists: with the loop over words inside the loop over
    entries, nothing vectorised (2.25 -> 0.75 ns per entry for two words).
    """
    h = p // 2
    half = (p - 1) // 2
    outside = 0
    for i in range(u):
        dst = words[i]
        for idx in range(lo, hi):
            r = x[idx]
            if i == 0:
                outside += (r < -h) | (r >= p)
            dst[idx] = _word(r - p * (r > half), s, i, u)
    return outside


@njit(inline="always")
def _round_shift(r, k):  # pragma: no cover - compiled
    """``floor(r / 2**k + 1/2)`` for ``0 <= k < 63`` (``r`` itself for ``k = 0``)."""
    return (r + ((np.int64(1) << k) >> 1)) >> k


@njit(inline="always")
def _word(r, s, i, u):  # pragma: no cover - compiled
    """Word ``i`` of the ``u`` balanced base-``2**s`` words of ``r``, from ``r`` alone.

    Peeling words off from the top (``d_i = Q(r_i, s*i)``, ``r_(i-1) = r_i - d_i 2**(s*i)``
    with ``Q(y, k) = floor(y / 2**k + 1/2)``) leaves ``r_i = r - 2**(s*(i+1)) Q(r, s*(i+1))``
    below the top, by induction: ``2**(s*(i+1)) Q(r, s*(i+1))`` is a multiple of
    ``2**(s*i)`` and leaves the floor. So the top word is ``Q(r, s*(u-1))`` and word
    ``i`` below it is ``Q(r, s*i) - 2**s Q(r, s*(i+1))`` (``Q(r, 0) = r``).
    """
    q = _round_shift(r, s * i)
    if i == u - 1:
        return q
    return q - (_round_shift(r, s * (i + 1)) << s)


@njit
def _lift_kernel(x, lo, hi, p, out):  # pragma: no cover - compiled
    """``out = x mod p`` in ``[-(p//2), (p-1)//2]`` over ``[lo, hi)``, for int64 ``x`` and ``2 <= p < 2**63``."""
    half = (p - 1) // 2
    for i in range(lo, hi):
        r = x[i]
        if 0 <= r < p:
            r -= p * (r > half)
        elif r >= p or r < -(p // 2):
            r %= p  # numba follows Python: the result is in [0, p)
            r -= p * (r > half)
        out[i] = r


#: The bits of ``2.0**52``: below ``2**52``, an integer ``x`` and the float64 ``2**52 + x``
#: share their low bits.
_BITS_2_52 = 0x4330000000000000


@njit(inline="always")
def int_to_float(x):  # pragma: no cover - compiled
    """``float64(x)`` for an int64 ``0 <= x < 2**52``, through the bits of ``2**52 + x``: AVX2
    has no packed int64-float64 conversions, and LLVM's emulation of them made the
    vectorised loops slower than scalar ones (:func:`_twom_combine_kernel` compiled for
    AVX2: 2.4 ns per entry scalar, 3.4 vectorised, 2.0 vectorised with these)."""
    return np.int64(x | _BITS_2_52).view(np.float64) - 2.0**52


@njit(inline="always")
def _to_int(f):  # pragma: no cover - compiled
    """``int64(f)`` for an integer-valued float64 ``0 <= f < 2**52``, as :func:`int_to_float` backwards."""
    return np.float64(f + 2.0**52).view(np.int64) - _BITS_2_52


@njit(inline="always")
def mulmod1(x, c, m, minv):  # pragma: no cover - compiled
    """``x * c mod m`` for ``0 <= x, c < m < 2**52``, ``minv = fl(1/m)``.

    The float64 quotient ``fl(fl(x*c) * minv)`` is ``y = x*c/m`` times three
    roundings ``(1 + d)``, ``|d| <= 2**-53``, so it is within ``3.01 * y * 2**-53
    < 1.51`` of ``y`` (as ``y < m < 2**52``, in fact ``y < m - 1``); its floor ``q``
    is ``floor(y) + k`` with ``-2 <= k <= 2``, and below ``2**52``. The remainder
    ``x*c - q*m`` is then in ``[-2m, 3m)``: far inside int64, so the wrapping
    int64 products give it exactly, and two corrections each way bring it into
    ``[0, m)``. Selects, not ``while`` loops: only they let loops over entries vectorise.
    """
    q = _to_int(np.floor(int_to_float(x) * int_to_float(c) * minv))
    r = x * c - q * m
    r += m if r < 0 else 0
    r += m if r < 0 else 0
    r -= m if r >= m else 0
    r -= m if r >= m else 0
    return r


#: The largest modulus whose 2M passes run in float64 alone (:func:`_mulmod1f`): below it a
#: product of two residues, and the multiple of ``m`` taken from it, stay exact in float64.
FLOAT_MULMOD_MAX = 2**26


@njit(inline="always")
def _mulmod1f(a, c, fm, minv):  # pragma: no cover - compiled
    """:func:`mulmod1` in float64 alone, for integral floats ``0 <= a, c < m <= 2**26``
    (``fm = m``, ``minv = fl(1/m)``); an integral float in ``[0, m)``.

    ``a*c < 2**52`` is exact. The quotient ``fl(fl(a*c) * minv)`` is within
    ``y * 2**-51 < 2**-25`` of ``y = a*c/m < 2**26``, so its floor ``q`` is
    ``floor(y)`` or one off either way; ``q*m <= a*c + m < 2**53`` is exact, and so is
    the remainder, in ``[-m, 2m)``: one correction each way. AVX2 has no packed int64
    products or int64-float64 conversions, which the int64 version needs; this one
    made the 2M passes at a 20-bit ``m`` twice as fast (n = 1024: 8.6 -> 4.3 ms for
    :func:`twom_finish`, 4.4 -> 2.1 ms for each operand's :func:`twom_words`).
    """
    p = a * c
    r = p - np.floor(p * minv) * fm
    r = r + fm if r < 0 else r
    return r - fm if r >= fm else r


@njit(inline="always")
def _reduce1(x, m):  # pragma: no cover - compiled
    """``x mod m`` in ``[0, m)``, without a division when ``x`` already is."""
    if 0 <= x < m:
        return x
    return x % m


@njit(inline="always")
def _image_pair(r, y, s, m, minv):  # pragma: no cover - compiled
    """``(r + s*y, r - s*y) mod m`` in ``[0, m)`` for ``r, y`` in ``[0, m)``."""
    t = mulmod1(y, s, m, minv)
    a = r + t
    b = r - t
    return a - m if a >= m else a, b + m if b < 0 else b


@njit(inline="always")
def _outside(re, im, m):  # pragma: no cover - compiled
    """How many pairs of ``re, im`` (1-D int64 slices) have a part outside ``[-m, m)``."""
    outside = 0
    for e in range(re.shape[0]):
        x, y = re[e], im[e]
        outside += (x < -m) | (x >= m) | (y < -m) | (y >= m)
    return outside


@njit(inline="always")
def _images_divided(re, im, s, m, minv, plus, minus):  # pragma: no cover - compiled
    """The images of parts anywhere in int64: reduced by a division, so the loop stays scalar."""
    for e in range(re.shape[0]):
        plus[e], minus[e] = _image_pair(_reduce1(re[e], m), _reduce1(im[e], m), s, m, minv)


@njit(inline="always")
def _images(re, im, s, m, minv, plus, minus):  # pragma: no cover - compiled
    """``plus, minus = (re + s*im, re - s*im) mod m`` in ``[0, m)`` over 1-D slices.

    Where every part is in ``[-m, m)`` (a first pass counts those that are not),
    a select reduces it, in a loop that vectorises; otherwise the loop divides,
    and stays scalar (a division, even on a branch never taken, keeps a loop
    from vectorising).
    """
    if _outside(re, im, m):
        _images_divided(re, im, s, m, minv, plus, minus)
        return
    for e in range(re.shape[0]):
        x, y = re[e], im[e]
        plus[e], minus[e] = _image_pair(x + m if x < 0 else x, y + m if y < 0 else y, s, m, minv)


@njit(inline="always")
def _images_f(re, im, s, m, minv, plus, minus):  # pragma: no cover - compiled
    """:func:`_images` into float64 ``plus, minus`` for ``m <= FLOAT_MULMOD_MAX``: in float64
    alone (:func:`_mulmod1f`) where every part is in ``[-m, m)``."""
    if _outside(re, im, m):
        _images_divided(re, im, s, m, minv, plus, minus)
        return
    fm, fs = np.float64(m), np.float64(s)
    for e in range(re.shape[0]):
        x, y = re[e], im[e]
        r = int_to_float(x + m if x < 0 else x)
        t = _mulmod1f(int_to_float(y + m if y < 0 else y), fs, fm, minv)
        a, b = r + t, r - t
        plus[e] = a - fm if a >= fm else a
        minus[e] = b + fm if b < 0 else b


@njit
def _twom_split_kernel(re, im, s, m, plus, minus):  # pragma: no cover - compiled
    """``plus = re + s*im``, ``minus = re - s*im`` (mod m, in ``[0, m)``), chunk by chunk."""
    minv = 1.0 / np.float64(m)
    for e0 in range(0, re.shape[0], L1_CHUNK):
        e1 = min(e0 + L1_CHUNK, re.shape[0])
        _images(re[e0:e1], im[e0:e1], s, m, minv, plus[e0:e1], minus[e0:e1])


@njit(inline="always")
def _combine1(x, y, inv2, inv2s, m, minv):  # pragma: no cover - compiled
    """``((x + y)/2, (x - y)/(2s)) mod m`` for ``x, y`` in ``[0, m)`` (``inv2s = 1/(2s)``)."""
    a = x + y
    a = a - m if a >= m else a
    b = x - y
    b = b + m if b < 0 else b
    return mulmod1(a, inv2, m, minv), mulmod1(b, inv2s, m, minv)


@njit
def _twom_combine_kernel(X, Y, inv2, inv2s, m, re, im):  # pragma: no cover - compiled
    """``re = (X + Y)/2``, ``im = (X - Y)/(2s)`` (mod m) in one pass; ``X, Y`` in ``[0, m)``."""
    minv = 1.0 / np.float64(m)
    for i in range(X.shape[0]):
        re[i], im[i] = _combine1(X[i], Y[i], inv2, inv2s, m, minv)


@njit
def _twom_finish_kernel(X, Y, q, hi, lo, inv2, inv2s, m, re, im):  # pragma: no cover - compiled
    """:func:`_finalize_plain` of both real products' float sums, then
    :func:`_twom_combine_kernel`, in one pass over 2-D slices (row by row, any strides);
    in float64 alone up to ``FLOAT_MULMOD_MAX``."""
    fm = np.float64(m)
    minv = 1.0 / fm
    if m <= FLOAT_MULMOD_MAX:
        c2, c2s = np.float64(inv2), np.float64(inv2s)
        for i in range(X.shape[0]):
            xr, yr, rr, ir = X[i], Y[i], re[i], im[i]
            for j in range(xr.shape[0]):
                x, y = _final1f(xr[j], q, hi, lo, fm), _final1f(yr[j], q, hi, lo, fm)
                a, b = x + y, x - y
                rr[j] = _to_int(_mulmod1f(a - fm if a >= fm else a, c2, fm, minv))
                ir[j] = _to_int(_mulmod1f(b + fm if b < 0 else b, c2s, fm, minv))
        return
    for i in range(X.shape[0]):
        xr, yr, rr, ir = X[i], Y[i], re[i], im[i]
        for j in range(xr.shape[0]):
            rr[j], ir[j] = _combine1(_final1(xr[j], q, hi, lo, fm), _final1(yr[j], q, hi, lo, fm), inv2, inv2s,
                                     m, minv)


@njit
def _twom_words_kernel(re, im, lo, hi, s, m, shift, u, plus, minus):  # pragma: no cover - compiled
    """:func:`_twom_split_kernel` writing the images straight as balanced words (entries ``[lo, hi)``).

    Chunk by chunk: the images into buffers, then a pass over them per word (as
    in :func:`_residues_to_words`, a loop over words inside the loop over entries
    would not vectorise).
    """
    minv = 1.0 / np.float64(m)
    half = (m - 1) // 2
    small = m <= FLOAT_MULMOD_MAX  # the images as floats (:func:`_images_f`)
    fhalf, fmod = np.float64(half), np.float64(m)
    bp, bm = np.empty(L1_CHUNK, dtype=np.int64), np.empty(L1_CHUNK, dtype=np.int64)
    fp, fm = np.empty(L1_CHUNK), np.empty(L1_CHUNK)
    for e0 in range(lo, hi, L1_CHUNK):
        c = min(L1_CHUNK, hi - e0)
        if small:
            _images_f(re[e0:e0 + c], im[e0:e0 + c], s, m, minv, fp, fm)
            if u == 1:  # one word: the balanced image itself
                dp, dm = plus[0, e0:e0 + c], minus[0, e0:e0 + c]
                for e in range(c):
                    a, b = fp[e], fm[e]
                    dp[e] = a - (fmod if a > fhalf else 0.0)
                    dm[e] = b - (fmod if b > fhalf else 0.0)
                continue
            for e in range(c):
                bp[e], bm[e] = _to_int(fp[e]), _to_int(fm[e])
        else:
            _images(re[e0:e0 + c], im[e0:e0 + c], s, m, minv, bp, bm)
        for i in range(u):
            dp, dm = plus[i, e0:e0 + c], minus[i, e0:e0 + c]
            for e in range(c):
                a, b = bp[e], bm[e]
                dp[e] = _word(a - (m if a > half else 0), shift, i, u)
                dm[e] = _word(b - (m if b > half else 0), shift, i, u)


def twom_words(re: np.ndarray, im: np.ndarray, s: int, m: int, shift: int, u: int, dtype):
    """The images ``re +- s*im mod m`` of 2M as ``u`` balanced words each (base ``2**shift``,
    shape ``(u, *re.shape)``, in ``dtype``): what :func:`twom_split` then
    :func:`balanced_words` give, in one pass and without the int64 images."""
    re, im = np.broadcast_arrays(re, im)
    shape = re.shape
    re = np.ascontiguousarray(re, dtype=np.int64).reshape(-1)
    im = np.ascontiguousarray(im, dtype=np.int64).reshape(-1)
    plus, minus = scratch((u, re.size), dtype), scratch((u, re.size), dtype)
    s, m, shift = np.int64(s), np.int64(m), np.int64(shift)
    each(lambda r: _twom_words_kernel(re, im, r.start, r.stop, s, m, shift, u, plus, minus), re.size, 2 * u)
    return plus.reshape((u,) + shape), minus.reshape((u,) + shape)


def twom_split(re: np.ndarray, im: np.ndarray, s: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(re + s*im, re - s*im) mod m`` as int64 arrays in ``[0, m)``, for int64 parts of any
    values and ``0 <= s < m < 2**52``: the images of a Gaussian matrix under 2M's two maps."""
    re, im = np.broadcast_arrays(re, im)
    shape = re.shape
    re = np.ascontiguousarray(re, dtype=np.int64).reshape(-1)
    im = np.ascontiguousarray(im, dtype=np.int64).reshape(-1)
    plus, minus = np.empty_like(re), np.empty_like(re)
    s, m = np.int64(s), np.int64(m)
    each(lambda r: _twom_split_kernel(re[r.start:r.stop], im[r.start:r.stop], s, m, plus[r.start:r.stop],
                                      minus[r.start:r.stop]), re.size, 2)
    return plus.reshape(shape), minus.reshape(shape)


def twom_combine(X: np.ndarray, Y: np.ndarray, s: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``((X + Y)/2, (X - Y)/(2s)) mod m`` for ``X, Y`` in ``[0, m)``, odd ``m < 2**52``."""
    shape = np.broadcast_shapes(np.shape(X), np.shape(Y))
    X = np.ascontiguousarray(np.broadcast_to(X, shape), dtype=np.int64).reshape(-1)
    Y = np.ascontiguousarray(np.broadcast_to(Y, shape), dtype=np.int64).reshape(-1)
    re, im = np.empty_like(X), np.empty_like(X)
    inv2, inv2s, m = np.int64((m + 1) // 2), np.int64(pow(2 * s, -1, m)), np.int64(m)
    each(lambda r: _twom_combine_kernel(X[r.start:r.stop], Y[r.start:r.stop], inv2, inv2s, m, re[r.start:r.stop],
                                        im[r.start:r.stop]), X.size, 2)
    return re.reshape(shape), im.reshape(shape)


def twom_finish(X: np.ndarray, Y: np.ndarray, reduce: Reduction, s: int, re: np.ndarray, im: np.ndarray) -> None:
    """:func:`finalize` of 2M's two real products then :func:`twom_combine`, fused: from the
    float64 sums ``X, Y`` that :func:`modlin._algorithms.multiword.multiply_words` leaves with
    ``keep=True`` (reduced by ``reduce``, modulo ``m = reduce.p``, as ``finalize`` would),
    ``re, im <- ((X + Y)/2, (X - Y)/(2s)) mod m`` as int64, written into the given arrays
    (of ``X``'s shape, any strides). One pass where the two take three, and two fewer
    int64 arrays."""
    m = reduce.p
    q = reduce.constants()
    inv2, inv2s, m64 = np.int64((m + 1) // 2), np.int64(pow(2 * s, -1, m)), np.int64(m)
    for xs, ys, rs, is_ in _slices(X, Y, re, im):
        each_row(lambda r: _twom_finish_kernel(xs[r], ys[r], *q, inv2, inv2s, m64, rs[r], is_[r]),
                 *xs.shape, 2)


@njit
def _outside_kernel(x, lo, hi, p):  # pragma: no cover - compiled
    """How many of ``x[lo:hi]`` (int64) lie outside ``[0, p)``: as uint64 the negative ones
    are at or above ``2**63 > p``, so one unsigned compare finds both kinds (vectorised)."""
    count = 0
    for i in range(lo, hi):
        count += np.uint64(x[i]) >= p
    return count


def reduced_int64(x: np.ndarray, p: int) -> bool:
    """Whether every entry of the C-contiguous int64 array ``x`` lies in ``[0, p)``
    (``p < 2**63``): one read of ``x``, split across the workers."""
    flat = x.reshape(-1)
    up = np.uint64(p)
    return sum(each(lambda part: _outside_kernel(flat, part.start, part.stop, up), flat.size)) == 0


def balanced_lift_int64(x: np.ndarray, p: int) -> np.ndarray:
    """int64 ``x`` reduced into ``[-(p//2), (p-1)//2]`` (a new array, from the scratch pool:
    products lift their operands anew each time), for ``p < 2**63``."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = scratch(flat.shape, np.int64)
    p64 = np.int64(p)
    each(lambda part: _lift_kernel(flat, part.start, part.stop, p64, out), flat.size)
    return out.reshape(x.shape)


def balanced_lift_word(x: np.ndarray, p: int) -> np.ndarray:
    """int64 or uint64 ``x`` reduced into ``[-(p//2), (p-1)//2]`` (a new int64 array), for
    ``2**63 <= p < 2**64``: every such residue fits int64."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, dtype=np.uint64)
    if flat.size:
        _lift_word_kernel(flat.view(np.uint64), x.dtype == np.int64, np.uint64(p), np.uint64((p - 1) // 2), out)
    return out.view(np.int64).reshape(x.shape)


@njit
def _lift_word_kernel(bits, signed, p, half, out):  # pragma: no cover - compiled
    """``out`` = the bits of the balanced residue modulo ``2**63 <= p < 2**64`` of each entry
    (int64 two's complement when ``signed``, else uint64), all in wrapping uint64:
    a negative ``x`` becomes ``x + p``, one at or above ``p`` (uint64) ``x - p``, and one
    above ``half`` ``x - p``, a negative int64. (uint64 throughout: numba turns mixed
    signed and unsigned arithmetic into floats.)"""
    top = np.uint64(2**63)
    for i in range(bits.shape[0]):
        r = bits[i]
        if signed and r >= top:
            r += p
        elif r >= p:
            r -= p
        if r > half:
            r -= p
        out[i] = r


@njit(inline="always")
def _red(y, q, hi, lo):  # pragma: no cover - compiled
    """One reduction of :class:`Reduction` (its ``q, p_hi, p_lo``); the identity for ``q = 0``."""
    c = np.rint(y * q)
    return (y - c * hi) - c * lo


@njit
def _step(x, t, add, q1, hi1, lo1, scale, q2, hi2, lo2, qt, hit, lot):  # pragma: no cover - compiled
    """``x <- red2(scale * red1(x)) [+ redt(t)]`` row by row; a reduction with q = 0 is the identity.

    Rows are taken as 1-D views: a row of a C-contiguous slab is contiguous, and the
    loop over it vectorises (indexing ``x[i, j]`` kept it scalar: 0.87 -> 0.70 ns per entry).
    """
    for i in range(x.shape[0]):
        xr, tr = x[i], t[i]
        for j in range(xr.shape[0]):
            y = _red(scale * _red(np.float64(xr[j]), q1, hi1, lo1), q2, hi2, lo2)
            if add:
                y += _red(np.float64(tr[j]), qt, hit, lot)
            xr[j] = y


@njit
def _fold(x, t, qt, hit, lot):  # pragma: no cover - compiled
    """``x <- x + redt(t)``: :func:`_step` with neither reduction nor scaling of ``x``, the
    pass after most GEMMs (one reduction per entry where :func:`_step` computes three)."""
    for i in range(x.shape[0]):
        xr, tr = x[i], t[i]
        for j in range(xr.shape[0]):
            xr[j] = np.float64(xr[j]) + _red(np.float64(tr[j]), qt, hit, lot)


@njit
def _fold_reduced(x, t, q1, hi1, lo1, qt, hit, lot):  # pragma: no cover - compiled
    """``x <- red1(x) + redt(t)``: :func:`_step` without scaling."""
    for i in range(x.shape[0]):
        xr, tr = x[i], t[i]
        for j in range(xr.shape[0]):
            xr[j] = _red(np.float64(xr[j]), q1, hi1, lo1) + _red(np.float64(tr[j]), qt, hit, lot)


@njit(inline="always")
def _final_entry(xv, tv, add, q1, hi1, lo1, scale, q2, hi2, lo2, q, hi, lo, fp):  # pragma: no cover
    """``red(red2(scale * red1(xv)) [+ red(tv)]) mod p`` in ``[0, p)``, an integral float."""
    y = _red(scale * _red(np.float64(xv), q1, hi1, lo1), q2, hi2, lo2)
    if add:
        y += _red(np.float64(tv), q, hi, lo)
    y = _red(y, q, hi, lo)
    # now |y| <= p/2 + 4, far below 2**53/3: floor(y*q) is floor(y/p) or,
    # at exact multiples of p only, one less; one correction each way settles it
    y -= np.floor(y * q) * fp
    if y >= fp:
        y -= fp
    elif y < 0:
        y += fp
    return y


@njit
def _finalize(x, t, add, q1, hi1, lo1, scale, q2, hi2, lo2, q, hi, lo, p, out):  # pragma: no cover
    """``out <- red(red2(scale * red1(x)) [+ red(t)]) mod p`` in ``[0, p)`` as int64 (``out``
    apart from ``x``: :func:`_finalize_inplace` when it is ``x``'s own memory)."""
    fp = np.float64(p)
    for i in range(x.shape[0]):
        xr, tr, outr = x[i], t[i], out[i]
        for j in range(xr.shape[0]):
            outr[j] = _to_int(_final_entry(xr[j], tr[j], add, q1, hi1, lo1, scale, q2, hi2, lo2, q, hi, lo, fp))


@njit
def _finalize_inplace(x, t, add, q1, hi1, lo1, scale, q2, hi2, lo2, q, hi, lo, p, as_int):  # pragma: no cover
    """:func:`_finalize` into the float64 sums' own memory: as int64 when ``as_int``, else as
    floats. An ``out`` that is ``x`` under another name keeps LLVM from vectorising
    :func:`_finalize` (its overlap check fails, so the scalar loop runs: 7.8 against
    2.4 ns per entry); a row viewed as int64 here is the same pointer, which it sees."""
    fp = np.float64(p)
    for i in range(x.shape[0]):
        xr, tr = x[i], t[i]
        if as_int:
            o = xr.view(np.int64)
            for j in range(xr.shape[0]):
                o[j] = _to_int(_final_entry(xr[j], tr[j], add, q1, hi1, lo1, scale, q2, hi2, lo2, q, hi, lo, fp))
        else:
            for j in range(xr.shape[0]):
                xr[j] = _final_entry(xr[j], tr[j], add, q1, hi1, lo1, scale, q2, hi2, lo2, q, hi, lo, fp)


@njit(inline="always")
def _final1f(x, q, hi, lo, fp):  # pragma: no cover - compiled
    """``red(x) mod p`` in ``[0, p)``, an integral float (``fp = p``), for an accumulator ``x``."""
    y = _red(np.float64(x), q, hi, lo)
    y -= np.floor(y * q) * fp  # as in _final_entry: |y| <= p/2 + 4
    y = y - fp if y >= fp else y
    return y + fp if y < 0 else y


@njit(inline="always")
def _final1(x, q, hi, lo, fp):  # pragma: no cover - compiled
    """:func:`_final1f` as int64."""
    return _to_int(_final1f(x, q, hi, lo, fp))


@njit
def _finalize_plain(x, q, hi, lo, p, out):  # pragma: no cover - compiled
    """``out <- red(x) mod p`` in ``[0, p)`` as int64: :func:`_finalize` with no ``t``, no
    scaling and no pre-reduction (the final pass after a single GEMM, e.g. each real
    product of 2M), whose identity reductions and multiplications by one cost that
    pass 2.6 times its time."""
    fp = np.float64(p)
    for i in range(x.shape[0]):
        xr, outr = x[i], out[i]
        for j in range(xr.shape[0]):
            outr[j] = _final1(xr[j], q, hi, lo, fp)


@njit
def _finalize_plain_inplace(x, q, hi, lo, p, as_int):  # pragma: no cover - compiled
    """:func:`_finalize_plain` into the float64 sums' own memory (see :func:`_finalize_inplace`)."""
    fp = np.float64(p)
    for i in range(x.shape[0]):
        xr = x[i]
        if as_int:
            o = xr.view(np.int64)
            for j in range(xr.shape[0]):
                o[j] = _final1(xr[j], q, hi, lo, fp)
        else:
            for j in range(xr.shape[0]):
                xr[j] = _final1f(xr[j], q, hi, lo, fp)


def _in_place(x: np.ndarray, out: np.ndarray) -> bool:
    """Whether ``out`` is the C-contiguous float64 ``x``'s own memory, entry for entry (as int64
    or float64): the finalize passes then write through ``x`` itself."""
    return (x.dtype == np.float64 and out.dtype in (np.int64, np.float64) and x.flags.c_contiguous
            and out.flags.c_contiguous and x.shape == out.shape
            and x.__array_interface__["data"][0] == out.__array_interface__["data"][0])


def add_into(x: np.ndarray, y: np.ndarray, p: int) -> None:
    """In place: ``x <- (x + y) mod p`` for residues in ``[0, p)`` (``y`` is consumed).

    int64 for ``p <= 2**63`` without overflow (``x - (p - y)`` lies in ``[-p, p)``);
    object arrays of Python ints above. ``-p`` is the constant used, as an int64
    holds it for every such ``p`` (``2**63`` itself has none).
    """
    if x.dtype == object:
        x[...] = (x + y) % p
        return
    y += -p
    x += y
    if is_cupy(x):  # CuPy's ufuncs take no where=
        x -= (x < 0) * -p
    else:
        np.subtract(x, -p, out=x, where=x < 0)


def _slices(*arrays: np.ndarray | None):
    """Matching 2-D slices of arrays of one shape (``None`` passes through as the first).

    Kernels index 2-D arrays with any strides, so batches (and transposed or
    sliced outputs) are walked slice by slice instead of being reshaped, which
    could silently copy.
    """
    first = arrays[0]
    fill = [a if a is not None else first for a in arrays]
    if first.ndim == 2:
        yield fill
        return
    for idx in np.ndindex(first.shape[:-2]):
        yield [a[idx] for a in fill]


def balanced_words(x: np.ndarray, p: int, s: int, u: int, dtype: np.dtype,
                   out: np.ndarray | None = None) -> np.ndarray:
    """Words of ``x mod p``: an array ``W`` of shape ``(u, *x.shape)`` with
    ``x = sum_i 2**(s*i) * W[i] (mod p)`` and the bounds of :func:`word_bounds`.

    ``x`` is an int64 array (any values); the words are written as ``dtype``,
    into ``out`` (C-contiguous, of that shape and dtype) when given.
    """
    flat = np.ascontiguousarray(x, dtype=np.int64).reshape(-1)
    words = scratch((u, flat.size), dtype) if out is None else out.reshape(u, flat.size)
    p64, s64 = np.int64(p), np.int64(s)
    outside = each(lambda part: _residues_to_words(flat, part.start, part.stop, p64, s64, u, words), flat.size, u)
    if any(outside):  # some entries were not in [-p//2, p): reduce them all and redo
        flat = np.remainder(flat, p)
        each(lambda part: _residues_to_words(flat, part.start, part.stop, p64, s64, u, words), flat.size, u)
    return words.reshape((u,) + x.shape)


def reduction_constants(red: Reduction | None) -> tuple[float, float, float]:
    """``red``'s constants ``(q, hi, lo)``, or the identity's (``q = 0``) for ``None``."""
    return red.constants() if red is not None else _NO_REDUCTION


def step(
    x: np.ndarray,
    t: np.ndarray | None = None,
    reduce: Reduction | None = None,
    scale_exp: int = 0,
    scaled: Reduction | None = None,
    t_reduce: Reduction | None = None,
) -> None:
    """In place: ``x <- scaled(2**scale_exp * reduce(x)) + t_reduce(t)``, each part optional.

    Multiplying by a power of two is exact in floating point, so the modular
    scaling of arXiv 2601.07508 (Alg 2.2) needs only the split reduction ``scaled``.
    ``t`` (a GEMM's fresh output, up to the engine's ``L``) is reduced before it is
    added, so that the GEMM that wrote it needs no room for the accumulator: the
    caller bounds the sum (a reduced ``x`` plus a reduced ``t``) within ``x``'s type.
    """
    q1, q2, qt = reduction_constants(reduce), reduction_constants(scaled), reduction_constants(t_reduce)
    if not x.size:
        return
    for xs, ts in _slices(x, t):
        if t is not None and scaled is None and not scale_exp:
            if reduce is None:
                _fold(xs, ts, *qt)
            else:
                _fold_reduced(xs, ts, *q1, *qt)
        else:
            _step(xs, ts, t is not None, *q1, float(2**scale_exp), *q2, *qt)


def finalize(x: np.ndarray, out: np.ndarray, reduce: Reduction, t: np.ndarray | None = None,
             pre: Reduction | None = None, scale_exp: int = 0, scaled: Reduction | None = None) -> None:
    """``out <- reduce(scaled(2**scale_exp * pre(x)) + reduce(t)) mod p`` with entries in
    ``[0, p)``; ``reduce`` bounds ``t`` and the sum, ``pre`` and ``scaled`` are optional."""
    q1, q2, q = reduction_constants(pre), reduction_constants(scaled), reduce.constants()
    if x.size:
        plain = t is None and pre is None and scaled is None and scale_exp == 0
        p64 = np.int64(reduce.p)
        for xs, ts, outs in _slices(x, t, out):
            inplace = _in_place(xs, outs)
            if plain and inplace:
                _finalize_plain_inplace(xs, *q, p64, outs.dtype == np.int64)
            elif plain:
                _finalize_plain(xs, *q, p64, outs)
            elif inplace:
                _finalize_inplace(xs, ts, t is not None, *q1, float(2**scale_exp), *q2, *q, p64, outs.dtype == np.int64)
            else:
                _finalize(xs, ts, t is not None, *q1, float(2**scale_exp), *q2, *q, p64, outs)


@dataclass(frozen=True)
class Stages:
    """The element-wise stages of the multiword path and of 2M's images on one kind of
    array: ``words`` (:func:`balanced_words`), ``step``, ``finalize``, ``twom_split`` and
    ``twom_combine``, and the ``device`` they run on. The algorithms are written once and
    take these from a table: :data:`CPU` here, :data:`modlin._algorithms.gpu.MULTIWORD` for CuPy."""

    words: Callable
    step: Callable
    finalize: Callable
    twom_split: Callable
    twom_combine: Callable
    device: str


#: The CPU's stages (numba kernels).
CPU = Stages(balanced_words, step, finalize, twom_split, twom_combine, "cpu")
