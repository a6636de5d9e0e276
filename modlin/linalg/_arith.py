"""Arithmetic on blocks of residues: products and updates through :func:`modlin.matmul`,
and the scalar modular operations of the numba kernels.

Working matrices hold residues in ``[0, p)``: int64 for ``p < 2**63``, object
arrays of Python ints above (where :func:`modlin.matmul` returns those too), and in
the recursions modulo the primes of :mod:`modlin.linalg._bigmod` (``2**63 < p < 2**512``)
limb arrays, whose products are :func:`modlin.linalg._bigmod.limb_product`'s.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import lru_cache
from typing import Callable

import numpy as np

from modlin._algorithms.products import Prepared, prepare_left, tile_product
from modlin._arith.modular import mulmod1
from modlin._engines.jit import njit
from modlin._engines.threads import blas_gemms, side_by_side
from modlin._front.products import matmul
from modlin._planning.plan import MAX_MODULUS, Plan
from modlin._planning.planner import plan
from modlin._planning.rnsplan import RNSPlan
from modlin._runtime.scratch import scratch
from modlin.linalg._bigmod import fits, is_limbs, limb_negate, limb_nonzero, limb_product
from modlin.linalg._steps import advance, limb_product_cost, product_cost

__all__ = ["INT64_LIMIT", "WIDE", "is_wide", "redc", "montgomery", "kernel_montgomery", "reduce", "prepare_left", "mul", "thin_plan",
           "mulsub", "negate", "nonzero", "parity", "mul_cost", "independent"]

#: Moduli below this bound work on int64 residues; above, on object arrays of Python ints.
INT64_LIMIT = 2**63

#: From this modulus on, a product of two residues no longer has a float64 quotient
#: accurate to within 1.5 (see :func:`modlin._arith.modular.mulmod1`): the kernels split one factor.
WIDE = 2**52


def is_wide(p: int) -> bool:
    """Whether the kernels need the limb-split product for ``p``."""
    return p >= WIDE


# --------------------------------------------------------------------------- scalar kernels

@njit
def _mulmod_small(s, m, p, invp):  # pragma: no cover - compiled
    """``s * m mod p`` for uint64 ``0 <= s < p <= 2**63`` and ``0 <= m < 2**26``.

    The quotient is estimated in floating point (relative error below 2**-50 on
    a quotient below 2**26, so an absolute error below 2**-24) and biased down
    by 2**-20: it is the true quotient or one less. The remainder, computed
    modulo 2**64 with wrapping uint64 products, is then in ``[0, 2p)``.
    """
    qf = np.float64(s) * np.float64(m) * invp - 2.0**-20
    q = np.uint64(qf) if qf > 0 else np.uint64(0)
    r = s * m - q * p
    if r >= p:
        r -= p
    return r


@njit(inline="always")
def _mulmod_wide(a, b, p, pinv):  # pragma: no cover - compiled
    """``a * b mod p`` for ``0 <= a, b < p < 2**63``: ``b`` in three 25-bit limbs, Horner.

    Each step is a product by a factor below ``2**26`` (:func:`_mulmod_small`,
    exact for ``p <= 2**63``) and a sum of two residues, below ``2p < 2**64`` in uint64.
    """
    ua = np.uint64(a)
    ub = np.uint64(b)
    up = np.uint64(p)
    mask = np.uint64(2**25 - 1)
    shift = np.uint64(2**25)
    r = _mulmod_small(ua, ub >> np.uint64(50), up, pinv)
    r = _mulmod_small(r, shift, up, pinv) + _mulmod_small(ua, (ub >> np.uint64(25)) & mask, up, pinv)
    if r >= up:
        r -= up
    r = _mulmod_small(r, shift, up, pinv) + _mulmod_small(ua, ub & mask, up, pinv)
    if r >= up:
        r -= up
    return np.int64(r)


@njit(inline="always")
def mulmod(a, b, p, pinv, wide):  # pragma: no cover - compiled
    """``a * b mod p`` for residues ``a, b`` in ``[0, p)``, ``p < 2**63``."""
    if wide:
        return _mulmod_wide(a, b, p, pinv)
    return mulmod1(a, b, p, pinv)


@njit(inline="always")
def _mulhi(a, b):  # pragma: no cover - compiled
    """The high 64 bits of the product of two uint64, from four 32 x 32-bit products
    (the ones AVX2 has, so loops over entries vectorise)."""
    m32 = np.uint64(0xFFFFFFFF)
    s = np.uint64(32)
    a0, a1, b0, b1 = a & m32, a >> s, b & m32, b >> s
    p01, p10 = a0 * b1, a1 * b0
    mid = ((a0 * b0) >> s) + (p01 & m32) + (p10 & m32)
    return a1 * b1 + (p01 >> s) + (p10 >> s) + (mid >> s)


@njit(inline="always")
def redc(a, b, p, pneg):  # pragma: no cover - compiled
    """Montgomery's product ``a * b * 2**-64 mod p`` for ``a, b`` in ``[0, p)`` and an odd
    ``p < 2**63``, ``pneg = -p**-1 mod 2**64``.

    With ``t = a b = hi 2**64 + lo`` and ``m = lo pneg mod 2**64``, ``t + m p`` is a
    multiple of ``2**64``; its quotient is ``hi + mulhi(m, p)`` plus the carry of
    ``lo + (m p mod 2**64) = lo + (2**64 - lo)``, 1 unless ``lo = 0``. It is below
    ``(p**2 + 2**64 p) / 2**64 < 2p < 2**64``: one conditional subtraction is left.
    Two 64-bit and eight 32 x 32-bit products and no float quotient, where :func:`mulmod`'s
    wide path makes ten 64-bit products and five float quotients: 2.2 times faster in
    :func:`modlin.linalg._charpoly._dets_kernel`.
    """
    ua, ub, up = np.uint64(a), np.uint64(b), np.uint64(p)
    lo = ua * ub
    u = _mulhi(ua, ub) + _mulhi(lo * pneg, up) + np.uint64(lo != 0)
    return np.int64(u - up if u >= up else u)


@lru_cache(maxsize=64)
def montgomery(p: int) -> tuple[np.uint64, np.int64, np.int64, np.int64]:
    """The constants of :func:`redc` for an odd ``p < 2**63``: ``-p**-1 mod 2**64`` and
    ``R, R**2, R**3 mod p`` for ``R = 2**64`` (the Montgomery forms of 1, of ``R`` and of ``R**2``)."""
    return (np.uint64(-pow(p, -1, 2**64) % 2**64), *(np.int64(pow(2, 64 * e, p)) for e in (1, 2, 3)))


_NO_MONTGOMERY = (np.uint64(0), np.int64(0), np.int64(0), np.int64(0))


def kernel_montgomery(p: int, wide: bool) -> tuple[np.uint64, np.int64, np.int64, np.int64]:
    """The Montgomery constants a kernel takes: :func:`montgomery`'s for a ``wide`` odd ``p``,
    else placeholders of the same types (one specialisation serves both), whose first
    entry, 0, tells the kernel to multiply by :func:`mulmod` instead (Montgomery's
    reduction needs an odd modulus; :func:`modlin.linalg.trsm` takes any)."""
    return montgomery(p) if wide and p % 2 else _NO_MONTGOMERY


@njit(inline="always")
def submul(c, a, b, p, pinv, wide):  # pragma: no cover - compiled
    """``(c - a*b) mod p`` for residues in ``[0, p)``."""
    t = c - mulmod(a, b, p, pinv, wide)
    return t + p * (t < 0)


@njit
def inverse(a, p):  # pragma: no cover - compiled
    """``a**-1 mod p`` for ``a`` in ``[1, p)`` coprime to ``p`` (extended Euclid; every
    intermediate is at most ``p`` in magnitude)."""
    r0, r1 = p, a
    s0, s1 = np.int64(0), np.int64(1)
    while r1 != 0:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        s0, s1 = s1, s0 - q * s1
    return s0 + p if s0 < 0 else s0


@njit
def _reduce_kernel(x, p, out):  # pragma: no cover - compiled
    """``out = x mod p`` in ``[0, p)``, dividing only the entries outside it (1-D)."""
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v if 0 <= v < p else v % p


@njit
def _sub_kernel(c, t, p):  # pragma: no cover - compiled
    """``c <- (c - t) mod p`` for residues in ``[0, p)``, row by row (``c`` may be a strided view)."""
    for i in range(c.shape[0]):
        ci = c[i]
        ti = t[i]
        for j in range(ci.shape[0]):
            d = ci[j] - ti[j]
            ci[j] = d + p * (d < 0)


@njit
def _parity_kernel(perm):  # pragma: no cover - compiled
    """``(n - number of cycles) mod 2`` of the permutation ``perm`` of ``range(n)``."""
    seen = np.zeros(perm.shape[0], dtype=np.bool_)
    cycles = 0
    for i in range(perm.shape[0]):
        if not seen[i]:
            cycles += 1
            j = i
            while not seen[j]:
                seen[j] = True
                j = perm[j]
    return (perm.shape[0] - cycles) % 2


def parity(perm: np.ndarray) -> int:
    """0 for an even permutation, 1 for an odd one."""
    return int(_parity_kernel(np.ascontiguousarray(perm, dtype=np.int64))) if perm.size else 0


def reduce(x: np.ndarray, p: int) -> np.ndarray:
    """A new C-contiguous int64 array of ``x mod p`` in ``[0, p)``, for int64 ``x`` and ``p < 2**63``."""
    out = np.empty(x.shape, dtype=np.int64)
    if x.size:
        _reduce_kernel(np.ascontiguousarray(x).reshape(-1), np.int64(p), out.reshape(-1))
    return out


# --------------------------------------------------------------------------- block products

@lru_cache(maxsize=4096)
def _plan(p: int, m: int, k: int, n: int) -> Plan | RNSPlan:
    """The plan for an ``m x k`` by ``k x n`` product, shared by nearby shapes.

    The recursions make products of many slightly different shapes, and pricing
    a new shape costs the planner milliseconds (tens of them where it weighs a
    residue number system). A plan runs on any shape (its shape feeds the cost
    model only) and one for a larger ``k`` covers a smaller one, so shapes are
    rounded up to powers of two. Below ``2**52`` the multiword plans are asked
    for directly: the planner prefers them there for every shape these
    recursions make (an RNS needs more words), and skipping the RNS quote is
    what makes planning cheap. From ``2**52`` on, an RNS is the only choice and
    its moduli depend on ``k`` alone, so it is planned for a square shape.
    """
    m, k, n = (1 << max(d - 1, 0).bit_length() for d in (m, k, n))
    if p < MAX_MODULUS:
        return plan(p, m, k, n, algorithm="multiword")
    return plan(p, k, k, k)


@lru_cache(maxsize=256)
def thin_plan(p: int, k: int, n: int) -> Plan | RNSPlan:
    """The plan for repeated products of a fixed ``k x k`` matrix with ``k x n`` blocks, ``n << k``.

    The planner prices a multiword plan by its GEMMs' multiply-adds, but a thin
    product whose inner dimension is cut into blocks of ``lambda`` runs each
    block as a separate, poorly efficient GEMM (the large operand is re-packed
    for every one); one more word of the thin operand that lets ``lambda``
    cover all of ``k`` is cheaper (2.3 times at ``k = 1000``, ``n = 48``,
    ``p = 2**31 - 1``). Below ``2**52``, the fewest words of the thin operand
    with ``block >= k``; else (or when none has) the usual plan. A word count
    with no exact plan at all (one word of a 50-bit ``A`` takes more than two
    of ``B``) is passed over.
    """
    if p < MAX_MODULUS:
        for v in (2, 3, 4):
            try:
                pl = plan(p, k, k, n, algorithm="multiword", words=(1, v), variant="concat-b")
            except ValueError:
                continue
            if pl.block >= k:
                return pl
    return _plan(p, k, k, n)


def mul(a: np.ndarray | Prepared, b: np.ndarray, p: int, pl: Plan | RNSPlan | None = None, *,
        lone: bool = False, temporary: bool = False) -> np.ndarray:
    """``a @ b mod p`` for 2-D residue blocks, as a new C-contiguous array (with the plan ``pl``,
    or one shared by nearby shapes; ``a`` may be :func:`modlin._algorithms.products.prepare_left`'s for ``pl``).

    int64 blocks (residues already in ``[0, p)``) and prepared ones skip
    :func:`modlin.matmul`'s input and plan checks (the plans come from
    :func:`_plan` and :func:`thin_plan`, made for these shapes), but not its
    tiles: the product keeps within the memory budget of :func:`modlin.limits`.
    Its GEMMs run on BLAS' own threads (:func:`modlin._engines.threads.blas_gemms`:
    linalg mixes products of every size), or with ``lone`` (products of whole
    matrices one after another, as powers make) as :func:`modlin.matmul` runs
    them. A ``temporary`` result (used at once, then dropped) comes from the
    scratch pool (:func:`modlin._runtime.scratch.scratch`), whose buffers may be larger
    than it: not for results that are kept.
    """
    (m, k), n = a.shape, b.shape[1]
    if is_limbs(b):
        out = np.empty((m, n), dtype=b.dtype)
        limb_product(a, b, p, out)
        advance(limb_product_cost, p, m, k, n)
        return out
    dtype = object if b.dtype == object else np.int64
    if m * n == 0 or k == 0:
        return np.zeros((m, n), dtype=dtype)
    pl = pl or _plan(p, m, k, n)
    with nullcontext() if lone else blas_gemms():
        if not isinstance(a, Prepared) and dtype is object:
            out = matmul(a, b, p, plan=pl)
        else:
            out = scratch((m, n), dtype) if temporary else np.empty((m, n), dtype=dtype)
            tile_product(pl, a, b, p, out)
    advance(product_cost, pl, m, k, n, dtype is object, isinstance(a, Prepared))
    return out


def mul_cost(p: int, m: int, k: int, n: int, pl: Plan | RNSPlan | None = None, prepared: bool = False) -> float:
    """Modelled cost of :func:`mul`'s product of an ``m x k`` and a ``k x n`` block (with the
    plan ``pl``, or the one :func:`mul` would take; a ``prepared`` left operand), for the
    algorithms' cost models."""
    if m * n == 0 or k == 0:
        return 0.0
    if pl is None and fits(p):  # the recursions' blocks are limbs (linalg._bigmod.limb_product)
        return limb_product_cost(p, m, k, n)
    return product_cost(pl or _plan(p, m, k, n), m, k, n, p >= INT64_LIMIT, prepared)


def mulsub(c: np.ndarray, a: np.ndarray, b: np.ndarray, p: int) -> None:
    """In place: ``c <- (c - a @ b) mod p`` (``c`` may be a view into a larger matrix)."""
    if c.size == 0 or a.shape[1] == 0:
        return
    if is_limbs(c):
        limb_product(a, b, p, c, subtract=True)
        advance(limb_product_cost, p, *a.shape, b.shape[1])
        return
    t = mul(a, b, p, temporary=True)
    if c.dtype == object:
        c[...] = (c - t) % p
    else:
        _sub_kernel(c, t, np.int64(p))


def independent(W: np.ndarray, work: float, *steps: Callable[[], None]) -> None:
    """Run the ``steps`` of a recursion that read shared blocks of the working matrix ``W`` and
    write disjoint ones (the two triangular solves after a PLUQ's first block, the inverses of
    a triangle's two halves): side by side, one worker each, when ``W`` is a limb array and
    the ``work`` (modelled multiply-adds, all steps) pays (:func:`modlin._engines.threads.side_by_side`),
    else in turn. Side by side, what runs on one thread in each (the base cases' inverses, the
    small products' Python) overlaps too. Measured here (medians of 7 interleaved runs, the
    solves of :func:`~modlin.linalg._pluq.pluq_inplace`): modulo ``2**127 - 1`` at ``n = 1000``,
    ``det`` 0.65 s against 0.77 and ``solve`` 0.69 against 0.76; at ``n = 400`` 0.137 against
    0.160 (``det``). Not below 64 bits, whose products gain more from their own slabs: a 31-bit
    ``det`` at ``n = 1000`` took 0.119 s against 0.100 side by side."""
    if is_limbs(W):
        side_by_side(steps, work)
    else:
        for step in steps:
            step()


def nonzero(x: np.ndarray) -> np.ndarray:
    """``x != 0`` for residues of any kind (limb arrays too)."""
    return limb_nonzero(x) if is_limbs(x) else x != 0


def negate(x: np.ndarray, p: int) -> np.ndarray:
    """``-x mod p`` for residues in ``[0, p)``, as a new array."""
    if is_limbs(x):
        return limb_negate(x, p)
    return (p - x) % p if x.dtype == object else np.where(x == 0, 0, p - x)
