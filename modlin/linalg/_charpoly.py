"""Characteristic and minimal polynomials modulo a prime, from Krylov subspaces.

Two algorithms, both exact whatever the random vectors they start from (the
randomness decides only how fast they are):

- **block Krylov** (the fast path, for ``n >= MIN_BLOCK_KRYLOV`` and
  ``p >= n``): the Krylov basis ``K`` of ``b`` random vectors under ``A``
  (``n / b`` products of ``A`` with ``n x b`` blocks) turns ``A`` into a block
  companion matrix ``K**-1 A K``, whose characteristic polynomial is the
  determinant of a ``b x b`` matrix of polynomials of degree ``n / b``. That
  determinant is evaluated at ``n`` points (Horner's rule, then ``n`` small
  determinants) and interpolated. When the vectors do not span (a matrix with
  more than ``b`` invariant factors, or unlucky vectors), the same gives the
  characteristic polynomial of ``A`` on their Krylov space ``U``, and ``A`` on
  ``V / U`` is treated again.
- **Krylov stages** (smaller ``n`` or ``p``): the Krylov subspace ``U`` of one
  random vector is ``A``-invariant, so ``charpoly(A)`` is the minimal
  polynomial of that vector times the characteristic polynomial of ``A`` on
  ``V / U``, whose matrix is a Schur complement (one product); the quotient
  is treated the same way until nothing is left. The vectors of the stages
  generate the whole space as an ``A``-module, so the minimal polynomial of
  ``A`` is the least common multiple of theirs, built up one vector at a time.

Polynomials are lists of Python ints, coefficients from low to high degree.
"""

from __future__ import annotations

import math

import numpy as np

from modlin._algorithms.products import prepare_left
from modlin._engines.jit import njit
from modlin._engines.threads import run, slabs, workers
from modlin._front.flint import FlintType
from modlin._runtime.calibration import MIN_BLOCK_KRYLOV, MIN_POINTS
from modlin.linalg._arith import (
    INT64_LIMIT,
    inverse,
    is_wide,
    kernel_montgomery,
    mul,
    mul_cost,
    mulmod,
    mulsub,
    negate,
    redc,
    submul,
    thin_plan,
)
from modlin.linalg._inputs import map_matrices, prepare, stack_count
from modlin.linalg._pluq import pluq_cost, pluq_inplace
from modlin.linalg._solve import eliminate_factored, solve_factored
from modlin.linalg._steps import advance, points_cost, tracked
from modlin.linalg._triangular import trsm_cost
from modlin.typing import ArrayLike

__all__ = ["charpoly", "minpoly", "charpoly_cost", "minpoly_cost", "MIN_BLOCK_KRYLOV"]


#: The random vectors: the results do not depend on them, and a fixed seed keeps timings repeatable.
SEED = 0x6D6F646C


def block_size(n: int) -> int:
    """The number of vectors of the block Krylov basis for an ``n x n`` matrix: ``sqrt(n)``
    rounded to a multiple of 8, at most 48.

    The ``n / b`` products with ``n x b`` blocks read all of ``A`` each (thin
    products run far below a square one's speed) and cost about ``n**3`` in all,
    while the ``n`` determinants cost ``n b**3 / 3`` and the evaluations ``n**2 b``:
    the best ``b`` grows with ``n``. Measured on the 2-core development machine
    (medians of 5 to 9 interleaved runs, 31- and 61-bit primes): 16 was best at
    ``n = 150`` and 300, 24 at 600 (48 took 13 to 27 % longer), 24 to 32 at 1000
    (48: 7 to 15 % longer), 32 to 48 at 1500 and 40 to 48 at 2000 (32: 7 % longer).
    """
    if n < 64:
        return max(2, n // 8)
    return min(48, 8 * max(1, round(math.sqrt(n) / 8)))


# --------------------------------------------------------------------------- polynomials

def _pmul(f: list[int], g: list[int], p: int) -> list[int]:
    """``f * g mod p``."""
    c = np.convolve(np.array(f, dtype=object), np.array(g, dtype=object))
    return [int(x) % p for x in c]


def _pmod(f: list[int], g: list[int], p: int) -> list[int]:
    """``f mod g`` (``g`` with a nonzero leading coefficient), without trailing zeros."""
    r = np.array(f, dtype=object) % p
    lead = pow(int(g[-1]), -1, p)
    gv = np.array(g, dtype=object)
    for i in range(len(r) - len(g), -1, -1):
        q = r[i + len(g) - 1] * lead % p
        if q:
            r[i:i + len(g)] = (r[i:i + len(g)] - q * gv) % p
    r = [int(x) for x in r[:len(g) - 1]]
    while r and r[-1] == 0:
        r.pop()
    return r


@njit
def _gcd_degree(a, b, p, wide):  # pragma: no cover - compiled
    """The degree of ``gcd(a, b) mod p`` for int64 residue coefficients, low degree first
    (both overwritten; ``-1`` when both are zero): Euclid's remainders, ``O(deg a deg b)``
    modular products."""
    pinv = 1.0 / np.float64(p)
    da, db = a.shape[0] - 1, b.shape[0] - 1
    while da >= 0 and a[da] == 0:
        da -= 1
    while db >= 0 and b[db] == 0:
        db -= 1
    while db >= 0:
        lead = inverse(b[db], p)
        for i in range(da - db, -1, -1):  # a <- a mod b, top coefficient first
            q = mulmod(a[i + db], lead, p, pinv, wide)
            if q != 0:
                for j in range(db + 1):
                    a[i + j] = submul(a[i + j], q, b[j], p, pinv, wide)
        da = min(da, db - 1)
        while da >= 0 and a[da] == 0:
            da -= 1
        a, b = b, a
        da, db = db, da
    return da


def _squarefree(f: list[int], p: int) -> bool:
    """Whether the monic ``f`` has no repeated factor: ``gcd(f, f') = 1`` (and ``f' != 0``).
    Below ``2**63`` in a compiled loop (a Python one took 0.4 s at degree 1000)."""
    a = f
    b = [i * c % p for i, c in enumerate(f)][1:]
    while b and b[-1] == 0:
        b.pop()
    if not b:
        return len(f) <= 1
    if p < INT64_LIMIT:
        return _gcd_degree(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.int64(p), is_wide(p)) == 0
    while b:
        a, b = b, _pmod(a, b, p)
    return len(a) == 1


def _monic(c: np.ndarray, p: int) -> list[int]:
    """``x**k - sum c[i] x**i`` for the relation ``A**k v = sum c[i] A**i v``."""
    return [(-int(x)) % p for x in c] + [1]


def _prepared(M: np.ndarray, p: int, n: int = 1):
    """``(plan, operand)``: ``M`` converted once (:func:`~modlin.linalg._arith.prepare_left`) for
    its many products with blocks of about ``n`` columns, which would otherwise split it into
    words or residues again each time (half the time of a minimal polynomial's Krylov vectors)."""
    pl = thin_plan(p, M.shape[0], n)
    return pl, prepare_left(pl, M, p)


def _horner(A: np.ndarray, f: list[int], X: np.ndarray, p: int, left=None) -> np.ndarray:
    """``f(A) @ X mod p`` for a monic ``f``: one product with ``A`` per degree (``left``:
    :func:`_prepared`'s ``A``, made here if not given)."""
    pl, L = left or _prepared(A, p)
    Y = X.copy()
    for c in reversed(f[:-1]):
        Y = mul(L, Y, p, pl)
        if c:
            Y = _addmod(Y, X * c % p if X.dtype == object else _scale(X, c, p), p)
    return Y


def _scale(X: np.ndarray, c: int, p: int) -> np.ndarray:
    """``c X mod p`` for int64 residues."""
    return mul(X.reshape(-1, 1), np.array([[c]], dtype=np.int64), p).reshape(X.shape)


def _addmod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``(a + b) mod p`` for residues (int64 ones without overflow: ``a - (p - b)`` is in ``(-p, p)``)."""
    if a.dtype == object:
        return (a + b) % p
    t = a - (p - b)
    return t + p * (t < 0)


def _random(rng, shape, p: int, dtype) -> np.ndarray:
    """Uniform residues modulo ``p`` (int64, or Python ints from three 62-bit draws above ``2**63``)."""
    if np.dtype(dtype) != np.dtype(object):
        return rng.integers(0, p, shape, dtype=np.int64)
    x = np.zeros(shape, dtype=object)
    for _ in range(p.bit_length() // 62 + 2):
        x = (x << 62) + rng.integers(0, 2**62, shape).astype(object)
    return x % p


# --------------------------------------------------------------------------- Krylov stages

def _krylov(M: np.ndarray, v: np.ndarray, p: int, left=None):
    """The Krylov basis of ``v`` under ``M`` and the minimal polynomial of ``v`` (``left``:
    :func:`_prepared`'s ``M``, made here if not given).

    Returns ``(K, R, f)``: ``K`` of shape ``(m, k)`` holds ``v, M v, ..., M**(k-1) v``
    (independent, and ``M**k v`` in their span), ``R`` are ``k`` rows on which
    ``K`` is invertible, and ``f`` the monic polynomial of degree ``k`` with
    ``f(M) v = 0``. The vectors are made in batches that double until one holds
    a dependent vector, so at most twice the needed products are made and the
    rank is found by one PLUQ per batch.
    """
    m = M.shape[0]
    pl, L = left or _prepared(M, p)
    cols = [v]
    want = 2
    while True:
        while len(cols) < min(want, m + 1):
            cols.append(mul(L, cols[-1][:, None], p, pl)[:, 0])
        T = np.array(cols)  # rows: the Krylov vectors; rank profile = the first k of them
        P, Q, k = pluq_inplace(T.copy(), p)
        if k < len(cols):
            break
        want *= 2
    K = np.array(cols[:k]).T
    R = np.sort(Q[:k])
    S = np.ascontiguousarray(K[R])
    SP, SQ, _ = pluq_inplace(S, p)
    c = solve_factored(S, SP, SQ, k, cols[k][R][:, None], p)[:, 0]
    return K, R, _monic(c, p)


def _stages(W: np.ndarray, p: int, rng):
    """The Krylov stages of ``W`` (overwritten): a list of ``(f, g)``, ``f`` the polynomial of
    a stage and ``g`` its vector in the coordinates of ``W``. The product of the ``f`` is the
    characteristic polynomial and the ``g`` generate the space as a module over ``W``."""
    n = W.shape[0]
    M, idx = W, np.arange(n)
    out = []
    while M.shape[0]:
        m = M.shape[0]
        v = _random(rng, m, p, M.dtype)
        while not v.any():  # the zero vector spans nothing (likely only for tiny p and m)
            v = _random(rng, m, p, M.dtype)
        K, R, f = _krylov(M, v, p)
        g = np.zeros(n, dtype=M.dtype)
        g[idx] = v
        out.append((f, g))
        k = R.size
        if k == m:
            break
        rest = np.setdiff1d(np.arange(m), R)
        # M on V / span(K), in the coordinates `rest`: M[rest, rest] - K[rest] K[R]**-1 M[R, rest]
        S = np.ascontiguousarray(K[R])
        SP, SQ, _ = pluq_inplace(S, p)
        Y = solve_factored(S, SP, SQ, k, M[np.ix_(R, rest)], p)
        M2 = np.ascontiguousarray(M[np.ix_(rest, rest)])
        mulsub(M2, np.ascontiguousarray(K[rest]), Y, p)
        M, idx = M2, idx[rest]
    return out


# --------------------------------------------------------------------------- block Krylov

@njit(inline="always")
def _dmul(a, b, p, pinv, wide, pneg):  # pragma: no cover - compiled
    """:func:`~modlin.linalg._arith.mulmod` for ``p < 2**52``; from ``2**52`` on Montgomery's
    ``a b R**-1 mod p`` (:func:`~modlin.linalg._arith.redc`): the product of two Montgomery
    forms, or of a residue by one (``b = t R mod p`` gives ``a t``)."""
    if wide:
        return redc(a, b, p, pneg)
    return mulmod(a, b, p, pinv, wide)


@njit
def _dets_kernel(M, p, wide, mont, out):  # pragma: no cover - compiled
    """``out[t] = det(M[:, :, t]) mod p`` for ``N`` int64 matrices ``b x b`` laid out as ``(b, b, N)``
    (overwritten), eliminating in all of them at once: the loops over ``t`` are innermost, so
    they vectorise. Without row exchanges: where a pivot is zero, ``out[t]`` is set to ``-1``
    and that matrix left to :func:`_dets_pivoting`.

    For a wide ``p`` the elimination runs on Montgomery forms ``x R mod p``
    (``mont``: :func:`~modlin.linalg._arith.montgomery`'s constants), whose product
    costs less than half of :func:`~modlin.linalg._arith.mulmod`'s: one product brings
    the entries in (by ``R**2``), the inverse of a form ``x R`` is ``x**-1 R`` times
    ``R**-2`` (one product by ``R**3``), and one product by 1 brings the determinants out.
    """
    pinv = 1.0 / np.float64(p)
    pneg, one, r2, r3 = mont
    b, N = M.shape[0], M.shape[2]
    inv = np.empty(N, dtype=np.int64)
    lam = np.empty(N, dtype=np.int64)
    if wide:
        for i in range(b):
            for j in range(b):
                e = M[i, j]
                for t in range(N):
                    e[t] = redc(e[t], r2, p, pneg)
    out[:] = one if wide else 1
    for c in range(b):
        piv = M[c, c]
        for t in range(N):
            if piv[t] == 0 or out[t] < 0:
                out[t] = -1
                inv[t] = 0  # the updates below leave the matrix alone
            else:
                x = inverse(piv[t], p)
                inv[t] = redc(x, r3, p, pneg) if wide else x
                out[t] = _dmul(out[t], piv[t], p, pinv, wide, pneg)
        for r in range(c + 1, b):
            col = M[r, c]
            for t in range(N):
                lam[t] = _dmul(col[t], inv[t], p, pinv, wide, pneg)
            for j in range(c + 1, b):
                row = M[r, j]
                top = M[c, j]
                for t in range(N):
                    v = row[t] - _dmul(lam[t], top[t], p, pinv, wide, pneg)
                    row[t] = v + p * (v < 0)
    if wide:
        for t in range(N):
            if out[t] >= 0:
                out[t] = redc(out[t], np.int64(1), p, pneg)


@njit
def _dets_pivoting(M, p, wide, out):  # pragma: no cover - compiled
    """``out[t] = det(M[t]) mod p`` for a stack of small int64 matrices (overwritten)."""
    pinv = 1.0 / np.float64(p)
    b = M.shape[1]
    for t in range(M.shape[0]):
        a = M[t]
        d = np.int64(1)
        for c in range(b):
            piv = -1
            for r in range(c, b):
                if a[r, c] != 0:
                    piv = r
                    break
            if piv < 0:
                d = 0
                break
            if piv != c:
                for j in range(c, b):
                    a[c, j], a[piv, j] = a[piv, j], a[c, j]
                d = p - d
            d = mulmod(d, a[c, c], p, pinv, wide)
            inv = inverse(a[c, c], p)
            for r in range(c + 1, b):
                lam = a[r, c]
                if lam != 0:
                    lam = mulmod(lam, inv, p, pinv, wide)
                    for j in range(c + 1, b):
                        a[r, j] = submul(a[r, j], lam, a[c, j], p, pinv, wide)
        out[t] = d


def _dets_object(M: np.ndarray, p: int) -> np.ndarray:
    """:func:`_dets_kernel` on a stack of object matrices: one NumPy update per column, all matrices at once."""
    N, b, _ = M.shape
    d = np.ones(N, dtype=object)
    at = np.arange(N)
    for c in range(b):
        nz = M[:, c:, c] != 0
        has = nz.any(axis=1)
        piv = c + np.argmax(nz, axis=1)
        swap = has & (piv != c)
        if swap.any():
            rows = M[at[swap], piv[swap]].copy()
            M[at[swap], piv[swap]] = M[at[swap], c]
            M[at[swap], c] = rows
            d[swap] = -d[swap]
        d[~has] = 0
        pv = np.where(has, M[:, c, c], 1)
        d = d * pv % p
        inv = np.array([pow(int(x), -1, p) for x in pv], dtype=object)
        lam = M[:, c + 1:, c] * inv[:, None] % p
        M[:, c + 1:, c + 1:] = (M[:, c + 1:, c + 1:] - lam[:, :, None] * M[:, c, None, c + 1:]) % p
    return d % p


@njit
def _interpolate_kernel(y, p, wide, out):  # pragma: no cover - compiled
    """The coefficients of the polynomial of degree ``< n`` taking the values ``y`` at ``0..n-1``
    (Newton's divided differences, whose denominators at equally spaced points are ``1..n-1``)."""
    n = y.shape[0]
    pinv = 1.0 / np.float64(p)
    d = y.copy()
    for k in range(1, n):
        ik = inverse(np.int64(k), p)
        for t in range(n - 1, k - 1, -1):
            s = d[t] - d[t - 1]
            d[t] = mulmod(s + p * (s < 0), ik, p, pinv, wide)
    out[:] = 0
    out[0] = d[n - 1]
    for k in range(n - 2, -1, -1):  # out <- out * (x - k) + d[k]
        for i in range(n - 1 - k, 0, -1):
            out[i] = submul(out[i - 1], np.int64(k), out[i], p, pinv, wide)
        out[0] = submul(d[k], np.int64(k), out[0], p, pinv, wide)


def _interpolate_object(y: np.ndarray, p: int) -> np.ndarray:
    """:func:`_interpolate_kernel` on Python ints, one NumPy operation per step."""
    n = y.size
    d = y.copy()
    for k in range(1, n):
        d[k:] = (d[k:] - d[k - 1:-1]) * pow(k, -1, p) % p
    out = np.zeros(n, dtype=object)
    out[0] = d[n - 1]
    for k in range(n - 2, -1, -1):
        out[1:n - k] = (out[:n - k - 1] - k * out[1:n - k]) % p
        out[0] = (d[k] - k * out[0]) % p
    return out


def _rounds(n: int, b: int):
    """``(powers, columns)`` of the block Krylov rounds: ``b`` vectors and their images (a probe,
    enough where ``A`` has many small invariant factors), then the ``n`` columns of a generic
    basis, then twice the powers until every vector's sequence closes."""
    yield 2, min(n, 2 * b)
    powers = n // b + 1
    if n > 2 * b:
        yield powers, n
    while True:
        powers *= 2
        yield powers, powers * b


def _block_krylov(W: np.ndarray, p: int, rng) -> list[int]:
    """The characteristic polynomial of ``W`` (``p >= n``: there are up to ``n`` interpolation
    points) from the Krylov space ``U`` of ``b`` random vectors.

    The columns ``A**l v_i`` are taken in the order of ``l`` then ``i``; the first ones
    independent of those before them (the column rank profile, from one PLUQ) are, for
    each ``i``, ``v_i, ..., A**(d_i - 1) v_i``, and ``A**d_i v_i`` is a combination of
    earlier columns, ``sum X[l b + k, i] A**l v_k``. These relations generate all of
    them, so ``U`` is ``F[x]**b`` modulo the columns of
    ``M(x)[k, i] = [k = i] x**d_i - sum_l X[l b + k, i] x**l``, whose row ``k`` has degree
    ``d_k`` and its leading coefficient on the diagonal: ``det M`` is monic of degree
    ``dim U`` and is the characteristic polynomial of ``A`` on ``U``. For a generic ``A``,
    ``U`` is everything; otherwise (more than ``b`` invariant factors, or unlucky vectors)
    ``A`` on ``V / U`` is a Schur complement, and its characteristic polynomial the other factor.
    """
    n = W.shape[0]
    b = block_size(n)
    pl, A = _prepared(W, p, b)
    blocks = [_random(rng, (n, b), p, W.dtype)]
    vec = np.arange(b)
    for powers, cols in _rounds(n, b):
        while len(blocks) < powers:
            blocks.append(mul(A, blocks[-1], p, pl))
        K = np.ascontiguousarray(np.hstack(blocks)[:, :cols])
        P, Q, rank = pluq_inplace(K, p)
        d = np.bincount(Q[:rank] % b, minlength=b)  # the length of each vector's sequence
        # closed: A**d_i v_i is a column of K (and dependent), or K spans everything
        if rank == n or (d * b + vec < cols).all():
            break
    B = np.array(blocks)
    Y = np.empty((n, b), dtype=W.dtype)  # Y[:, i] = A**d_i v_i
    have = d < len(blocks)
    Y[:, have] = B[d[have], :, vec[have]].T
    if not have.all():
        Y[:, ~have] = mul(A, np.ascontiguousarray(B[-1][:, ~have]), p, pl, temporary=True)
    X = solve_factored(K, P, Q, rank, Y, p)
    f = _det_poly(X, d, p)
    if rank == n:
        return f
    rest = P[rank:]
    quotient = eliminate_factored(K, P, rank, W[:, rest], p)[rank:]
    return _pmul(f, _charpoly_from(quotient, p, rng), p)


@njit
def _evaluate_kernel(C, T, diag, p, wide, pneg, out):  # pragma: no cover - compiled
    """``out[k, i, t] = diag[i, t] [k = i] - sum_l C[l, k, i] t**l mod p`` at ``t = 0 .. N-1``
    by Horner's rule, the loops over ``t`` innermost. ``T[t]`` is the factor of a step:
    ``t``, or for a wide ``p`` its Montgomery form, so that :func:`_dmul` by it is a product by ``t``."""
    pinv = 1.0 / np.float64(p)
    q, m = C.shape[0], C.shape[1]
    N = out.shape[2]
    for k in range(m):
        for i in range(m):
            o = out[k, i]
            top = C[q - 1, k, i]
            for t in range(N):
                o[t] = top
            for deg in range(q - 2, -1, -1):
                c = C[deg, k, i]
                for t in range(N):  # a - (p - c): no overflow for p near 2**63
                    v = _dmul(o[t], T[t], p, pinv, wide, pneg) - (p - c)
                    o[t] = v + (p if v < 0 else 0)
            dg = diag[i]
            for t in range(N):
                v = (dg[t] if k == i else 0) - o[t]
                o[t] = v + (p if v < 0 else 0)


def _det_poly(X: np.ndarray, d: np.ndarray, p: int) -> list[int]:
    """``det M(x)`` of :func:`_block_krylov`, of degree ``r = sum d``: evaluated at ``0, ..., r - 1``
    (:func:`_evaluate_kernel`, or for Python ints one product), then ``r`` determinants of
    ``b x b`` matrices, and interpolated. Vectors with ``d_i = 0`` are left out (their rows of
    ``M`` are unit rows)."""
    keep = np.flatnonzero(d)
    b, m, q, r = X.shape[1], keep.size, int(d.max()), int(d.sum())
    if r == 0:  # the vectors were all zero: U = 0
        return [1]
    # coefficients by power l: C[l, k, i] = X[l b + k, i] (zero where vector k has no power l)
    C = np.zeros((q * b, b), dtype=X.dtype)
    C[:min(q * b, X.shape[0])] = X[:q * b]
    C = np.ascontiguousarray(C.reshape(q, b, b)[:, keep][:, :, keep])
    t = np.arange(r, dtype=object)
    powers = {e: [pow(int(x), e, p) for x in t] for e in set(d[keep].tolist())}  # few distinct d_i
    xd = np.array([powers[e] for e in d[keep].tolist()], dtype=object)  # x**d_i
    xr = np.array([pow(int(x), r, p) for x in t], dtype=object)
    wide = X.dtype != object and is_wide(p)
    mont = kernel_montgomery(p, wide)
    if X.dtype == object:  # one product with the powers of the points, in Python ints
        V = np.empty((r, q), dtype=object)
        V[:, 0] = 1
        for deg in range(1, q):
            V[:, deg] = V[:, deg - 1] * t % p
        M = negate(mul(V, C.reshape(q, m * m), p).reshape(r, m, m), p)
        diag = np.arange(m)
        M[:, diag, diag] = (M[:, diag, diag] + xd.T) % p
        f = [int(x) for x in _interpolate_object((_dets_object(M, p) - xr) % p, p)] + [1]
        advance(points_cost, p, r, m, q, True)
        return f
    # Horner at each point: a product by a small t per step, where a product with the powers
    # of the points would go through a residue number system from 2**52 on
    T = np.arange(r, dtype=np.int64)
    if wide:  # t as Montgomery forms t R mod p
        T = np.array([int(x) * pow(2, 64, p) % p for x in t], dtype=np.int64)
    xd = xd.astype(np.int64)
    dets = np.empty(r, dtype=np.int64)

    def points(part: slice) -> None:
        """Evaluations and determinants at some of the points, in arrays of their own: the
        kernels' loops from 0 over whole C-contiguous rows are the ones LLVM vectorises."""
        M = np.empty((m, m, part.stop - part.start), dtype=np.int64)
        _evaluate_kernel(C, T[part], np.ascontiguousarray(xd[:, part]), np.int64(p), wide, mont[0], M)
        _dets_kernel(M, np.int64(p), wide, mont, dets[part])

    # about m**2 q + m**3 / 3 products per point, each point on its own: split across the threads
    run(points, slabs(r, workers(r * m * m * (q + m / 3), r // MIN_POINTS)))
    zero_pivot = np.flatnonzero(dets < 0)
    if zero_pivot.size:  # evaluated again (the kernel overwrote them), then eliminated with row exchanges
        Z = np.empty((m, m, zero_pivot.size), dtype=np.int64)
        _evaluate_kernel(C, T[zero_pivot], np.ascontiguousarray(xd[:, zero_pivot]), np.int64(p), wide, mont[0], Z)
        fixed = np.empty(zero_pivot.size, dtype=np.int64)
        _dets_pivoting(np.ascontiguousarray(Z.transpose(2, 0, 1)), np.int64(p), wide, fixed)
        dets[zero_pivot] = fixed
    y = ((dets.astype(object) - xr) % p).astype(np.int64)
    c = np.empty(r, dtype=np.int64)
    _interpolate_kernel(y, np.int64(p), wide, c)
    advance(points_cost, p, r, m, q, False)
    return [int(x) for x in c] + [1]


# --------------------------------------------------------------------------- cost models

def _stages_cost(p: int, n: int) -> float:
    """Modelled cost of :func:`_stages` for an ``n x n`` matrix whose first random vector spans
    the space (a generic one): ``n`` Krylov vectors, one PLUQ per doubling batch of them,
    and the relation of the last one (a PLUQ and two triangular solves)."""
    pl = thin_plan(p, n, 1)
    cost = n * mul_cost(p, n, n, 1, pl, prepared=True)
    w = 2
    while True:
        rows = min(w, n + 1)
        cost += pluq_cost(p, rows, n)
        if rows > n:  # the batch that holds a dependent vector
            break
        w *= 2
    return cost + pluq_cost(p, n, n) + 2 * trsm_cost(p, n, 1)


def _block_krylov_cost(p: int, n: int) -> float:
    """Modelled cost of :func:`_block_krylov` for an ``n x n`` matrix whose ``b`` random vectors
    span the space (a generic one): the products of the basis, its PLUQs (the probe of ``2 b``
    columns, then all ``n``), the relations' triangular solves and the polynomial determinant."""
    b = block_size(n)
    powers, q = n // b + 1, -(-n // b)
    pl = thin_plan(p, n, b)
    # the blocks, and A**d_i v_i for the n % b vectors whose last power is not among them
    cost = (powers - 1) * mul_cost(p, n, n, b, pl, prepared=True) + mul_cost(p, n, n, n % b, pl, prepared=True)
    cost += pluq_cost(p, n, min(n, 2 * b)) + (pluq_cost(p, n, n) if n > 2 * b else 0.0)
    cost += 2 * trsm_cost(p, n, b) + points_cost(p, n, b, q, p >= INT64_LIMIT)
    if p >= INT64_LIMIT:  # the evaluations, one product
        cost += mul_cost(p, n, q, b * b)
    return cost


def charpoly_cost(p: int, n: int) -> float:
    """Modelled cost of :func:`_charpoly` of an ``n x n`` matrix (a generic one: its first
    Krylov space is everything; :mod:`modlin.linalg._steps`)."""
    if n >= MIN_BLOCK_KRYLOV and p >= n:
        return _block_krylov_cost(p, n)
    return _stages_cost(p, n)


def minpoly_cost(p: int, n: int) -> float:
    """Modelled cost of :func:`_minpoly` of an ``n x n`` matrix, where the characteristic
    polynomial settles it (squarefree), or one Krylov stage does."""
    return charpoly_cost(p, n)


# --------------------------------------------------------------------------- front doors

def _charpoly(W: np.ndarray, p: int) -> list[int]:
    """The characteristic polynomial of one working matrix (overwritten)."""
    return _charpoly_from(W, p, np.random.default_rng(SEED))


def _charpoly_from(W: np.ndarray, p: int, rng) -> list[int]:
    """:func:`_charpoly` with the random vectors from ``rng`` (a quotient's differ from its parent's)."""
    n = W.shape[0]
    if n >= MIN_BLOCK_KRYLOV and p >= n:
        c = W[0, 0]
        if not (W - np.diag(np.diagonal(W)) != 0).any() and (np.diagonal(W) == c).all():
            # a scalar matrix, (x - c)**n, as the quotients of a matrix with a large eigenspace often
            # are: block Krylov would split b dimensions off at a time
            return [math.comb(n, i) * pow(-int(c), n - i, p) % p for i in range(n + 1)]
        return _block_krylov(W, p, rng)
    f = [1]
    for g, _ in _stages(W, p, rng):
        f = _pmul(f, g, p)
    return f


def _minpoly(W: np.ndarray, p: int) -> list[int]:
    """The minimal polynomial of one working matrix: the characteristic polynomial when that is
    squarefree, else the least common multiple of the minimal polynomials of the stages' vectors."""
    n = W.shape[0]
    rng = np.random.default_rng(SEED)
    A = W.copy()
    if n >= MIN_BLOCK_KRYLOV and p >= n:
        f = _block_krylov(W, p, rng)
        if _squarefree(f, p):
            return f
    stages = _stages(W, p, rng)
    if len(stages) <= 1:
        return stages[0][0] if stages else [1]
    f = stages[0][0]
    G = np.array([g for _, g in stages[1:]]).T
    # lcm(f, minpoly(g)) = f * minpoly(f(A) g): each vector adds what f does not annihilate yet
    left = _prepared(A, p)
    Y = _horner(A, f, G, p, left)
    for j in range(Y.shape[1]):
        if Y[:, j].any():
            h = _krylov(A, Y[:, j].copy(), p, left)[2]
            f = _pmul(f, h, p)
            Y[:, j + 1:] = _horner(A, h, Y[:, j + 1:], p, left)
    return f


def _coefficients(f: list[int], p: int) -> np.ndarray:
    """A polynomial as modlin returns it: int64 coefficients below ``2**63``, Python ints above."""
    if p < INT64_LIMIT:
        return np.array(f, dtype=np.int64)
    out = np.empty(len(f), dtype=object)
    out[:] = f
    return out


def _as_poly(f: list[int], field):
    """``f`` as the polynomial type of the input: a ``galois.Poly`` over a FieldArray's field, a
    python-flint polynomial for a flint matrix, else an array of coefficients."""

    if isinstance(field, FlintType):
        return field.poly(f)
    import galois

    return galois.Poly(f, field=field, order="asc")


def charpoly(A: ArrayLike, p: int | None = None):
    """Characteristic polynomial ``det(x I - A)`` of a square matrix modulo a prime ``p``.

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Square integer matrix, or a stack of them (any integers, reduced
        modulo ``p``; integral floats, object arrays of Python ints), a galois
        ``FieldArray`` or a python-flint ``nmod_mat``, ``fmpz_mod_mat`` or
        ``fmpz_mat``.
    p : int, optional
        A prime modulus, of any size. May be omitted when ``A`` is a
        ``FieldArray``, ``nmod_mat`` or ``fmpz_mod_mat``.
        Omitted for integer or rational input (NumPy integers, object arrays
        of Python ints or ``fractions.Fraction``, ``fmpz_mat``, ``fmpq_mat``),
        the result is exact over the integers (rationals for rational entries) (:doc:`/guide/integers`).

    Returns
    -------
    ndarray, shape (..., n + 1), galois.Poly or python-flint polynomial
        The coefficients from degree 0 up to degree ``n`` (the last is 1):
        int64 in ``[0, p)`` for ``p < 2**63``, Python ints above. A
        ``FieldArray`` gives a ``galois.Poly`` over its field (a stack of them
        an object array of ``galois.Poly``); an ``nmod_mat`` an ``nmod_poly``,
        an ``fmpz_mod_mat`` an ``fmpz_mod_poly`` and an ``fmpz_mat`` the
        ``fmpz_poly`` of the residues, as python-flint's own ``charpoly``
        returns. A ``0 x 0`` matrix has the characteristic polynomial 1.
        Over the integers (no modulus): the exact coefficients (int64 when
        they fit, else Python ints; an ``fmpz_poly`` for an ``fmpz_mat``,
        ``Fraction`` coefficients for rational input).

    Raises
    ------
    LinAlgError
        ``A`` not square (a ``ValueError`` too).
    ValueError
        ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices.

    See Also
    --------
    minpoly : the minimal polynomial, a divisor of this one.

    Notes
    -----
    Exact for every matrix; random vectors decide only the speed. From
    ``n = 96`` on, and for ``p >= n``, ``b`` random vectors (8 to 48) and
    their images under ``A``, ``A**2``, ... up to ``n`` vectors (``n / b``
    products with ``n x b`` blocks) form a basis ``K`` in which ``A`` is a
    block companion matrix; its characteristic polynomial is the determinant
    of a ``b x b`` matrix of polynomials, evaluated at ``0, ..., n - 1``
    (Horner's rule, and ``n`` determinants of ``b x b`` matrices) and
    interpolated. The work is one PLUQ of ``K`` and about ``n**3``
    multiply-adds in products. When the vectors do not span (more than ``b``
    invariant factors), their Krylov space ``U`` is split off the same way and
    ``A`` on ``V / U`` (a Schur complement) treated again; a scalar matrix is
    read off directly. For smaller ``n`` or ``p``, the Krylov space of one
    vector is split off at a time (its minimal polynomial times the
    characteristic polynomial of the quotient).

    Examples
    --------
    >>> from modlin import linalg
    >>> linalg.charpoly([[1, 2], [3, 4]], 7)  # x**2 - 5 x - 2 = x**2 + 2 x + 5 mod 7
    array([5, 2, 1])
    >>> linalg.charpoly([[[1, 0], [0, 1]], [[0, 1], [0, 0]]], 7)  # a stack: (x - 1)**2 and x**2
    array([[1, 5, 1],
           [0, 0, 1]])
    >>> import galois
    >>> GF = galois.GF(7)
    >>> linalg.charpoly(GF([[1, 2], [3, 4]]))
    Poly(x^2 + 2x + 5, GF(7))
    >>> import flint
    >>> linalg.charpoly(flint.nmod_mat([[1, 2], [3, 4]], 7))  # an nmod_poly
    x^2 + 2*x + 5
    >>> linalg.charpoly([[1, 2], [3, 4]])  # over the integers: x**2 - 5 x - 2
    array([-2, -5,  1])
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="charpoly", shapes=("square",), stack=True)
    n = W.shape[-1]
    with tracked("charpoly", p, stack_count(W), lambda: charpoly_cost(p, n)):
        if field is None:
            dtype = np.int64 if p < INT64_LIMIT else object
            return map_matrices(lambda w: _coefficients(_charpoly(w, p), p), [W], (2,), (n + 1,), dtype)
        polys = map_matrices(lambda w: _as_poly(_charpoly(w, p), field), [W], (2,), (), object)
    return polys[()] if polys.ndim == 0 else polys


def minpoly(A: ArrayLike, p: int | None = None):
    """Minimal polynomial of a square matrix modulo a prime ``p``: the monic polynomial ``f`` of
    least degree with ``f(A) = 0``.

    Parameters
    ----------
    A : array_like, shape (n, n)
        Square integer matrix, a galois ``FieldArray`` or a python-flint
        matrix (``nmod_mat``, ``fmpz_mod_mat``, ``fmpz_mat``).
    p : int, optional
        A prime modulus, of any size; may be omitted for a ``FieldArray``,
        ``nmod_mat`` or ``fmpz_mod_mat``.

    Returns
    -------
    ndarray, galois.Poly or python-flint polynomial
        The coefficients from degree 0 up to the degree ``d <= n`` (the last is
        1), as :func:`charpoly` returns them: int64 below ``2**63``, Python
        ints above, a ``galois.Poly`` for a ``FieldArray``, the python-flint
        polynomial of a flint matrix's ring. A ``0 x 0`` matrix gives 1.

    Raises
    ------
    LinAlgError
        ``A`` not square (a ``ValueError`` too).
    ValueError
        ``p`` not prime, or the input errors of :func:`modlin.matmul`.
    TypeError
        Non-integer entries or modulus, or operands that are not matrices.

    See Also
    --------
    charpoly : the characteristic polynomial, a multiple of this one.

    Notes
    -----
    Exact for every matrix. When :func:`charpoly`'s block Krylov method
    applies and finds a squarefree characteristic polynomial, that is the
    minimal polynomial. Otherwise the space is split into Krylov stages (see
    :func:`charpoly`): their vectors ``g_1, ..., g_s`` generate it as a module
    over ``A``, so the minimal polynomial is the least common multiple of the
    minimal polynomials of the ``g_i``, accumulated as ``f <- f * minpoly(f(A) g_i)``
    (``f(A) g_i`` by one product per degree of ``f``, on all remaining vectors at once).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import linalg
    >>> linalg.minpoly(np.eye(3, dtype=int), 7)  # x - 1
    array([6, 1])
    >>> linalg.minpoly([[0, 1, 0], [0, 0, 1], [0, 0, 0]], 7)  # a nilpotent Jordan block: x**3
    array([0, 0, 0, 1])
    >>> import flint
    >>> linalg.minpoly(flint.nmod_mat([[2, 0], [0, 2]], 5))
    x + 3
    """
    p, field, (W,) = prepare(p, A, names=("A",), fn="minpoly", shapes=("square",))
    with tracked("minpoly", p, 1, lambda: minpoly_cost(p, W.shape[0])):
        f = _minpoly(W, p)
    return _coefficients(f, p) if field is None else _as_poly(f, field)
