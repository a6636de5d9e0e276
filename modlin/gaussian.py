"""Gaussian-integer matrix products: complex products mod m with 2M, 3M or 4M, exact
products over Z[i], and HERK / SYRK / HER2K / SYR2K with the corollaries of Caday, arXiv 2609.05419.

**2M.** When every prime factor of an odd ``m`` is ``1 (mod 4)`` there is ``s``
with ``s**2 = -1 (mod m)``, and the maps ``a + ib -> a +- s b`` are ring
homomorphisms ``Z[i] -> Z/mZ``. With ``A+- = A_r +- s A_i`` (and the same for
``B``), ``X = A+ B+`` and ``Y = A- B-`` are ``C_r + s C_i`` and ``C_r - s C_i``,
so ``C_r = (X + Y)/2`` and ``C_i = (X - Y)/(2s)``: two real products instead of
three (3M) or four (4M). Below ``2**52`` every real product goes through
:func:`modlin.matmul`, so a large ``m`` costs the multiword words of its plan.
From ``2**52`` on (beyond multiword products, as for :func:`modlin.matmul`) the
exact product over Z[i] of the balanced residues is computed by a residue number
system of primes ``1 (mod 4)``, 2M modulo each, and the CRT reduces it modulo ``m``.

Gaussian matrices are given either as complex arrays whose parts are integers
or as ``(real, imag)`` pairs of integer arrays; results are ``(real, imag)``
pairs of int64 arrays with entries in ``[0, m)`` (object arrays of Python ints
for ``m > 2**63``, as :func:`modlin.matmul` returns them).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from modlin._arith import crt as _crt, modular as _modular, moduli as _moduli, residues as _residues
from modlin._arith.integers import balanced_halves, balanced_lift, float_integers, integers, max_abs, residues_int64
from modlin._arith.modular import add_into, twom_combine, twom_finish, twom_words
from modlin._arith.moduli import check_modulus, is_twom_modulus, sqrt_minus_one, twom_moduli, twom_primes, why_not_twom
from modlin._engines.backend import cpu_only, is_dask, namespace
from modlin._front.flint import FlintType
from modlin._front.inputs import integer_operands, unwrap_fields
from modlin._front.products import matmul as _matmul
from modlin._planning.plan import MAX_MODULUS
from modlin._planning.rnsplan import RNSPlan
from modlin._runtime.limits import current as current_limits

__all__ = ["twom_moduli", "is_twom_modulus", "sqrt_minus_one", "matmul", "intmul",
           "herk", "syrk", "her2k", "syr2k"]

ALGORITHMS = ("auto", "2m", "3m", "4m")


# --------------------------------------------------------------------- operands

def _parts(X, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``X`` as ``(real, imag)`` arrays: a complex array or a pair of real ones."""
    if isinstance(X, tuple):
        if len(X) != 2:
            raise ValueError(f"{name}: a Gaussian matrix given as a tuple must be a (real, imag) pair")
        re, im = np.asarray(X[0]), np.asarray(X[1])
        if re.shape != im.shape:
            raise ValueError(f"{name}: real and imaginary parts have shapes {re.shape} and {im.shape}")
        if re.dtype.kind == "c" or im.dtype.kind == "c":
            raise TypeError(f"{name}: the parts of a (real, imag) pair must be real arrays")
        return re, im
    x = np.asarray(X)
    if x.dtype.kind == "c":
        re, im = x.real, x.imag
        for part, what in ((re, "real"), (im, "imaginary")):
            if not np.all(np.isfinite(part)) or not np.array_equal(part, np.trunc(part)):
                raise ValueError(f"{name}: the {what} parts must be finite integers")
        return re, im
    if x.dtype.kind in "iubfO":
        return x, np.zeros_like(x, dtype=np.int64 if x.dtype.kind != "O" else object)
    raise TypeError(f"{name} must be a complex array or a (real, imag) pair of integer arrays, not {x.dtype}")


def _gpu_parts(X, name: str):
    """The parts of a CuPy Gaussian matrix (complex with integral parts, or a pair of
    integer arrays), checked; each tile reduces its own panels."""
    xp = namespace(*(X if isinstance(X, tuple) else (X,)))
    if isinstance(X, tuple):
        if len(X) != 2 or X[0].shape != X[1].shape:
            raise ValueError(f"{name}: a Gaussian matrix given as a tuple must be a (real, imag) pair of one shape")
        parts = X
    elif X.dtype.kind == "c":
        parts = (X.real, X.imag)
    else:  # a real matrix: its imaginary part is zeros, never allocated
        parts = (X, xp.broadcast_to(xp.zeros((), dtype=np.int64), X.shape))
    for x in parts:
        if x.dtype.kind == "f":
            if not bool(xp.all(xp.isfinite(x) & (x == xp.trunc(x)) & (xp.abs(x) < 2.0**63))):
                raise ValueError(f"{name}: the parts must be finite integers below 2**63")
        elif x.dtype.kind not in "biu":
            raise TypeError(f"{name} must be complex or a (real, imag) pair of integer arrays, not {x.dtype}")
    return parts


def _flatten(operands: dict):
    """The parts of Gaussian operands (each one array or a ``(real, imag)`` pair), their
    names for messages, and a function putting converted parts back into that shape."""
    flat, names, pairs = [], [], []
    for name, X in operands.items():
        pairs.append(isinstance(X, tuple))
        if isinstance(X, tuple):
            if len(X) != 2:
                raise ValueError(f"{name}: a Gaussian matrix given as a tuple must be a (real, imag) pair")
            flat += X
            names += [f"{name} (real part)", f"{name} (imaginary part)"]
        else:
            flat.append(X)
            names.append(name)

    def rebuild(plain):
        parts = iter(plain)
        return [(next(parts), next(parts)) if pair else next(parts) for pair in pairs]

    return flat, tuple(names), rebuild


def _front(m, fn: str, **operands):
    """``(m, field, operands)`` after the front-door checks of every part.

    All the parts go through :func:`modlin._front.inputs.unwrap_fields` together, so
    a galois ``FieldArray`` or python-flint modular matrix fixes ``m`` (and
    ``field`` is the type the result parts should have), as in :func:`modlin.matmul`.
    """
    flat, names, rebuild = _flatten(operands)
    m, field, plain = unwrap_fields(m, *flat, names=names, fn=fn, modulus="m")
    return m, field, rebuild(plain)


def _ndim(X) -> int:
    return np.ndim(X[0] if isinstance(X, tuple) else X)


def _typed(field, result, a_ndim: int = 2):
    """Each part of ``result`` as ``field`` (a FieldArray class or python-flint type), or unchanged."""
    if field is None:
        return result
    conv = (lambda x: field.product(x, a_ndim)) if isinstance(field, FlintType) else field
    return tuple(conv(x) for x in result) if isinstance(result, tuple) else conv(result)


def _check_m(m) -> int:
    """``m`` as a Python int, every ``m >= 2`` (those from ``2**52`` on take the RNS path)."""
    return check_modulus(m)


def _dtype(m: int):
    """The dtype of results modulo ``m``: int64 holds every residue up to ``m = 2**63``;
    above, Python ints, as :func:`modlin.matmul` returns them."""
    return np.int64 if m <= 2**63 else object


def _choose(algorithm: str, m: int) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if m >= MAX_MODULUS:
        # the product is exact over Z[i] modulo primes 1 (mod 4) of a residue number system
        # (_ExactTile.modular), so the algorithm is that of each of those primes: 2M applies to
        # every m, and m itself is never factored (a 200-bit composite need not factor)
        return "2m" if algorithm == "auto" else algorithm
    if algorithm == "auto":
        return "2m" if m > 2 and why_not_twom(m) is None else "3m"
    if algorithm == "2m":
        sqrt_minus_one(m)  # raises, naming the factor, when m has no square root of -1
    return algorithm


def _twom_combine(X, Y, s: int, m: int, stages=_modular.CPU):
    re, im = stages.twom_combine(X, Y, s, m)
    # a 1-D @ 1-D product is a scalar, as in numpy.matmul
    return (re[()], im[()]) if re.ndim == 0 else (re, im)


def _sub_mod(x, y, m):
    d = x - y
    d += m * (d < 0)
    return d


def _add_mod(x, y, m):
    d = x + y
    d -= m * (d >= m)
    return d


# --------------------------------------------------------------------- products mod m

def matmul(A, B, m: int | None = None, *, algorithm: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Product of Gaussian-integer matrices modulo ``m``.

    Follows :func:`numpy.matmul` shape rules.

    Parameters
    ----------
    A, B : complex array_like, or (real, imag) pairs of integer array_like
        The operands; complex arrays must have integral parts. Arrays (or
        parts) may be ``dask.array.Array`` s: the product is then lazy
        (:doc:`/guide/distributed`).
    m : int, optional
        The modulus, any integer ``m >= 2``, prime or composite. May be
        omitted when an operand (or a part of one) is a galois ``FieldArray``
        of ``GF(p)`` or a python-flint ``nmod_mat`` / ``fmpz_mod_mat``: ``m``
        is then its modulus (if given, it must match), the other parts are
        read as integers, and the result parts come back as that type, as in
        :func:`modlin.matmul`.
    algorithm : {"auto", "2m", "3m", "4m"}
        ``"2m"``: two real products (``m`` odd with every prime factor
        ``1 (mod 4)``); ``"3m"``: three (Karatsuba); ``"4m"``: four (the
        definition). ``"auto"`` takes 2M when ``m`` admits it, else 3M. All
        three give identical results. For ``m >= 2**52`` (see Notes) the
        algorithm is the one used modulo each prime of the residue number
        system, all ``1 (mod 4)``: every algorithm then applies to every
        ``m``, ``"auto"`` is 2M, and ``m`` is never factored.

    Returns
    -------
    (ndarray, ndarray)
        Real and imaginary parts of ``A @ B mod m`` in ``[0, m)``: int64 for
        ``m <= 2**63``, object arrays of Python ints above, as from
        :func:`modlin.matmul` (CuPy arrays for CuPy operands: the product then
        runs on their GPU; lazy dask arrays for dask operands).

    Raises
    ------
    ValueError
        ``algorithm="2m"`` with an ``m < 2**52`` that is even or has a prime
        factor ``3 (mod 4)`` (the message names it); non-integral parts;
        mismatched shapes or pairs; ``m < 2``; ``m >= 2**52`` with CuPy
        operands; a memory budget (:func:`modlin.limits`) too small for the
        smallest tile.
    TypeError
        Operands that are neither complex nor integer pairs, or not matrices
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand or part); ``m`` omitted with
        no operand that fixes it.

    Notes
    -----
    Below ``2**52`` the real products are multiword products modulo ``m``, as
    in :func:`modlin.matmul`. From ``2**52`` on, where those stop, the operands'
    balanced residues (``|r| <= m//2``) are multiplied exactly over Z[i] by a
    residue number system, as :func:`intmul` does: modulo enough primes
    ``1 (mod 4)`` below ``2**25`` to cover ``2 k (m//2)**2``, each product
    with ``algorithm`` (2M by default), and the CRT rebuilds each part
    reduced modulo ``m``. It runs tile by tile within the memory budget of
    :func:`modlin.limits`, the products of k-panels added modulo ``m``.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import gaussian
    >>> A = np.array([[1 + 2j, 3j], [4, 5 - 1j]])
    >>> re, im = gaussian.matmul(A, A, 13)
    >>> re + 1j * im
    array([[10.+3.j, 10.+5.j],
           [11.+4.j, 11.+2.j]])

    Any modulus: ``2**127 - 1`` is ``3 (mod 4)``, and results above ``2**63``
    are Python ints. ``(-1 + i)**2 = -2i``:

    >>> p = 2**127 - 1
    >>> re, im = gaussian.matmul((np.array([[p - 1]], dtype=object), [[1]]), ([[-1]], [[1]]), p)
    >>> re.dtype, int(re[0, 0]), im[0, 0] == p - 2
    (dtype('O'), 0, True)

    With galois ``FieldArray`` parts the modulus is the field's:

    >>> import galois
    >>> GF = galois.GF(13)
    >>> # (1+2i)(1) + (3i)(4+5i) = -14 + 14i
    >>> re, im = gaussian.matmul((GF([[1, 0]]), GF([[2, 3]])), (GF([[1], [4]]), GF([[0], [5]])))
    >>> re, im
    (GF([[12]], order=13), GF([[1]], order=13))
    """
    if any(is_dask(x) for X in (A, B) for x in (X if isinstance(X, tuple) else (X,))):
        from modlin._front.dask import gaussian_matmul

        return gaussian_matmul(A, B, m, algorithm, gaussian=sys.modules[__name__])
    m, field, (A, B) = _front(m, "modlin.gaussian.matmul", A=A, B=B)
    return _typed(field, _matmul_mod(A, B, m, algorithm), _ndim(A))


def _matmul_mod(A, B, m: int, algorithm: str):
    m = _check_m(m)
    alg = _choose(algorithm, m)
    if namespace(*[y for x in (A, B) for y in (x if isinstance(x, tuple) else (x,))]) is not np:
        if m >= MAX_MODULUS:
            # the RNS path's residues, 2M per prime and CRT are host code (_ExactTile); a host round trip
            # is the caller's choice to make
            raise ValueError(f"on the GPU, gaussian products take moduli below 2**52, got a {m.bit_length()}-bit "
                             "m; pass NumPy arrays (cupy.asnumpy) for larger moduli")
        return _tiled_matmul(_gpu_parts(A, "A"), _gpu_parts(B, "B"), m, alg)
    if m >= MAX_MODULUS:
        return _rns_matmul(_parts(A, "A"), _parts(B, "B"), m, alg)
    return _tiled_matmul(_parts(A, "A"), _parts(B, "B"), m, alg)


def _rns_matmul(a, b, m: int, alg: str):
    """``a @ b mod m`` for ``m >= 2**52`` of Gaussian matrices given as ``(real, imag)`` parts:
    the exact product over Z[i] of their balanced residues, by a residue number system
    (:meth:`_ExactTile.modular`) tile by tile within the memory budget, each tile's CRT
    reducing modulo ``m``, and the partial products of k-panels added modulo ``m``."""
    from modlin._algorithms.tiles import as_matrix, matmul_shapes

    (mm, k, n), full, shape = matmul_shapes(a[0].shape, b[0].shape)
    out = [np.empty(full, dtype=_dtype(m)) for _ in range(2)]
    if out[0].size and k:
        tile = _ExactTile.modular(m, alg, 2, (mm, k, n))
        _run_exact(tile, (mm, k, n), [as_matrix(x, 0) for x in a], [as_matrix(x, 1) for x in b], out,
                   f"modlin.gaussian.matmul (RNS, {len(tile.tiles)} moduli, {alg.upper()}) mod a "
                   f"{m.bit_length()}-bit m")
    else:
        for x in out:
            x[...] = 0
    return _shaped(*out, shape)


def _gauss(ar, ai, br, bi, m: int, alg: str, mul, stages=_modular.CPU) -> tuple[np.ndarray, np.ndarray]:
    """A Gaussian product mod ``m`` from the real products ``mul(x, y)``: 2M on parts
    congruent mod ``m`` (its images and combination by ``stages``, those of the arrays'
    device), 3M or 4M on parts in ``[0, m)``."""
    if alg == "2m":
        s = sqrt_minus_one(m)
        ap, am = stages.twom_split(ar, ai, s, m)
        bp, bm = stages.twom_split(br, bi, s, m)
        return _twom_combine(mul(ap, bp), mul(am, bm), s, m, stages)
    rr, ii = mul(ar, br), mul(ai, bi)
    if alg == "4m":
        return _sub_mod(rr, ii, m), _add_mod(mul(ar, bi), mul(ai, br), m)
    t = mul(_add_mod(ar, ai, m), _add_mod(br, bi, m))
    return _sub_mod(rr, ii, m), _sub_mod(_sub_mod(t, rr, m), ii, m)


def _workspace(pl, alg: str, twom_words_: bool, batch: int):
    """Bytes one tile ``(mt, kt, nt)`` of a Gaussian product allocates beyond operands and
    result (an upper bound, the tile scheduler's model): the int64 parts of both panels,
    then for 2M straight into words the two images' words of both panels, the two real
    products and their combination; otherwise the reduced (and for 3M summed) parts, the
    images or real products alive at once and one real product's own workspace (on the
    GPU, a GPU :func:`modlin.matmul`, which also reduces and balances its operands)."""
    from modlin._engines.gemm import get_engine

    def memory(mt, kt, nt):
        ops, out = mt * kt + kt * nt, mt * nt
        total = 16 * ops  # the int64 parts of the panels
        if twom_words_:
            w = get_engine(pl.engine).dtype.itemsize
            total += 2 * w * (pl.u * mt * kt + pl.v * kt * nt) + 8 * out * 5 + pl.workspace((mt, kt, nt))
        else:
            total += 8 * ops * (3 if alg == "3m" else 2) + 8 * out * 6 + pl.workspace((mt, kt, nt)) + 8 * out
            if pl.device == "cuda":
                total += 24 * ops
        return batch * total

    return memory


#: Real products per Gaussian product.
_GEMMS = {"2m": 2, "3m": 3, "4m": 4}


def _tiling(pl, alg: str, words: bool, shape: tuple[int, int, int], batch: int, budget: int | None = None,
            extra: int = 0, xp=np):
    """The tiles of a Gaussian product of ``shape`` (``batch`` matrices at once) within
    ``budget`` (default: that of ``xp``'s arrays, :func:`modlin._planning.tiling.budget`), real
    products made with the plan ``pl``; ``extra`` more int64 arrays of an output tile's size
    (a rank-k update's sum and mirror) beside each tile."""
    from modlin._planning import tiling as _tiling

    budget = _tiling.budget(xp) if budget is None else budget
    tile = _workspace(pl, alg, words, batch)
    return _tiling.choose(shape, lambda mt, kt, nt: tile(mt, kt, nt) + batch * 8 * extra * mt * nt, budget,
                  lambda mt, kt, nt: batch * _GEMMS[alg] * pl.cost((mt, kt, nt)))


def _tiled_matmul(a, b, m: int, alg: str):
    """``a @ b mod m`` of Gaussian matrices given as ``(real, imag)`` parts (NumPy or CuPy),
    tile by tile within the memory budget of their device (:func:`modlin._planning.tiling.budget`):
    each tile converts its panels (2M on the CPU: their images straight into the words of
    one multiword plan, which both real products share), and the partial products of
    k-panels are added modulo ``m``."""
    from modlin._algorithms.products import device_residues
    from modlin._algorithms.tiles import as_matrix, drive, matmul_shapes, progress, stack_items
    from modlin._planning.plan import Plan
    from modlin._planning.planner import plan

    xp = namespace(*a, *b)
    gpu = xp is not np
    (mm, k, n), full, shape = matmul_shapes(a[0].shape, b[0].shape)
    a = [as_matrix(x, 0) for x in a]
    b = [as_matrix(x, 1) for x in b]
    pl = plan(m, mm, k, n, device="cuda" if gpu else "cpu")
    words = alg == "2m" and isinstance(pl, Plan) and not gpu  # the words' kernels are the CPU's
    stack = full[:-2]
    re, im = xp.empty(full, dtype=np.int64), xp.empty(full, dtype=np.int64)
    if re.size == 0:
        return _shaped(re, im, shape)
    if k == 0:
        re[...], im[...] = 0, 0
        return _shaped(re, im, shape)
    batch = math.prod(stack)
    tiling, items, rounds = stack_items(stack, lambda count: _tiling(pl, alg, words, (mm, k, n), count, xp=xp),
                                        list(a), list(b))
    tile = _TileProduct(pl, alg, words, m)
    # on the GPU the kernels reduce any int64 as they read it: only other dtypes are converted
    reduce = (lambda t, m, name: t if t.dtype == np.int64 else device_residues(t, m)) if gpu else residues_int64
    what = f"modlin.gaussian.matmul ({alg.upper()}) mod a {m.bit_length()}-bit m"
    cost = batch * tiling.count * _GEMMS[alg] * pl.cost(tiling.tile)
    with progress(rounds * tiling.count, cost, what) as bar:
        for idx, x, y in items:
            dst = re[idx], im[idx]

            def product(rows, inner, cols):
                xt = [reduce(t[..., rows, inner], m, "A") for t in x]
                yt = [reduce(t[..., inner, cols], m, "B") for t in y]
                if inner.start:  # a later k-panel: added to the first's, in the output
                    return tile(xt, yt)
                return tile(xt, yt, out=[d[..., rows, cols] for d in dst])

            drive(tiling, product, add=tile.add, bar=bar)
    return _shaped(re, im, shape)


class _TileProduct:
    """The product of one tile's panels mod ``m`` (int64 parts, any values congruent mod
    ``m``): Gaussian with 2M (straight into the words of the multiword plan ``pl`` when
    ``words``), 3M or 4M, or real for one-part operands; and the exact sum of two
    k-panels' partial products (:meth:`add`)."""

    def __init__(self, pl, alg: str, words: bool, m: int):
        from modlin._engines.gemm import get_engine

        self.pl, self.alg, self.words, self.m = pl, alg, words, m
        if pl.device == "cuda":  # the element-wise stages of the device's arrays
            from modlin._algorithms import gpu as _gpu

            self.stages = _gpu.MULTIWORD
        else:
            self.stages = _modular.CPU
        self.s = sqrt_minus_one(m) if alg == "2m" else 0
        self.dtype = get_engine(pl.engine).dtype if words else None

    def real(self, x, y):
        from modlin._algorithms.products import tile_product

        if self.pl.device == "cuda":  # a GPU modlin.matmul, tiled within the device's free memory
            return _matmul(x, y, self.m, plan=self.pl)
        out = np.empty(np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1]), dtype=np.int64)
        tile_product(self.pl, x, y, self.m, out)
        return out

    def __call__(self, x, y, out=None):
        """The parts of the tile's product, written into ``out`` (a list of its arrays, any
        strides) when given."""
        from modlin._algorithms import multiword as _multiword
        from modlin._engines.gemm import get_engine
        from modlin._runtime.scratch import scratch

        m, s, pl = self.m, self.s, self.pl
        if pl.device == "cuda" and self.alg == "2m" and len(x) == 2 and isinstance(pl, RNSPlan):
            from modlin._algorithms import gpu as _gpu

            xp = namespace(x[0])
            shape = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2]) + (x[0].shape[-2], y[0].shape[-1])
            out = [xp.empty(shape, dtype=np.int64) for _ in range(2)] if out is None else out
            _gpu.twom_multiply(pl, x, y, s, out)  # images, GEMMs, CRT and combination: fused kernels
            return out
        if len(x) == 1:
            parts = [self.real(x[0], y[0])]
        elif not self.words:
            if self.alg != "2m":
                x, y = [t % m for t in x], [t % m for t in y]
            parts = list(_gauss(*x, *y, m, self.alg, self.real, self.stages))
        else:
            ap, am = twom_words(*x, s, m, pl.a_shift, pl.u, self.dtype)
            bp, bm = twom_words(*y, s, m, pl.b_shift, pl.v, self.dtype)
            shape = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2]) + (x[0].shape[-2], y[0].shape[-1])
            acc = get_engine(pl.engine).acc_dtype
            if out is None:  # a later k-panel's, added into the output then dropped
                out = [scratch(shape, np.int64) for _ in range(2)]
            if acc == np.float64:
                # the two real products' sums, reduced and combined into the output in one pass
                X, Y = scratch(shape, acc), scratch(shape, acc)
                _multiword.multiply_words(pl, ap, bp, X, keep=True)
                del ap, bp
                _multiword.multiply_words(pl, am, bm, Y, keep=True)
                twom_finish(X, Y, pl.reductions[0], s, *out)
                return out
            X, Y = scratch(shape, np.int64), scratch(shape, np.int64)
            _multiword.multiply_words(pl, ap, bp, X)
            del ap, bp
            _multiword.multiply_words(pl, am, bm, Y)
            parts = twom_combine(X, Y, s, m)
        if out is None:
            return list(parts)
        for d, q in zip(out, parts):
            d[...] = q
        return out

    def add(self, acc, part):
        for x, y in zip(acc, part):
            x[...] = _add_mod(x, y, self.m)
        return acc


def _neg_mod(x, m: int):
    """``-x mod m`` of residues in ``[0, m)``: int64 without overflow up to ``m = 2**63``
    (``-x`` then ``+ m`` as ``- (-m)``, the constant an int64 holds), Python ints above."""
    if x.dtype == object:
        return (-x) % m
    y = -x
    np.subtract(y, -m, out=y, where=y < 0)
    return y


def _shaped(re, im, shape):
    re, im = re.reshape(shape), im.reshape(shape)
    # a 1-D @ 1-D product is a scalar, as in numpy.matmul
    return (re[()], im[()]) if re.ndim == 0 else (re, im)


def _rank_k(terms, m: int, alg: str, conj: bool):
    """``C = sum(X @ op(Y)^T for X, Y in terms) mod m`` with ``op(Y) = conj(Y)`` when ``conj``
    (HERK, HER2K) and ``C`` symmetric or, with ``conj``, Hermitian: operands are lists of
    parts (one: real, two: Gaussian ``(real, imag)``) of ``(..., n, k)`` arrays.

    Computed by pairs of square tiles within the memory budget: the tile ``(I, J)``,
    ``I <= J``, is the Gaussian (or real) product of the row panels ``I`` of ``X`` and ``J``
    of ``Y``, by k-panels added mod ``m``; the tile ``(J, I)`` is its (conjugate) transpose.
    Each output tile takes one product per term, as the whole matrix does with the 2M
    corollaries (Caday, arXiv 2609.05419), and the result is exactly symmetric (Hermitian).
    For ``m >= 2**52`` each tile's product is the exact one of the balanced residues, by a
    residue number system reduced modulo ``m`` by its CRT (:meth:`_ExactTile.modular`).
    """
    from modlin._algorithms.tiles import drive, progress
    from modlin._planning.plan import Plan
    from modlin._planning.planner import plan
    from modlin._planning.tiling import pair_count, square

    ops = [x for t in terms for part in t for x in part]
    if any(np.ndim(x) < 2 for x in ops):
        raise ValueError("rank-k updates (herk, syrk, her2k, syr2k) need matrices (at least 2-D operands)")
    if len({np.shape(x)[-2:] for x in ops}) > 1:
        raise ValueError("the operands of a rank-k update must be matrices of one shape, got "
                         f"{sorted({np.shape(x) for x in ops})}")
    n, k = np.shape(ops[0])[-2:]
    try:
        stack = np.broadcast_shapes(*(np.shape(x)[:-2] for x in ops))
    except ValueError:
        raise ValueError(f"stack shapes {sorted({np.shape(x)[:-2] for x in ops})} do not broadcast") from None
    terms = [tuple([np.broadcast_to(np.asarray(x), stack + (n, k)) for x in part] for part in t) for t in terms]
    real = len(terms[0][0]) == 1
    shape = stack + (n, n)
    out = [np.empty(shape, dtype=_dtype(m)) for _ in range(1 if real else 2)]
    if not out[0].size:
        return out[0] if real else tuple(out)
    large = m >= MAX_MODULUS
    if large:  # the exact product of the balanced residues by RNS, reduced modulo m by its CRT
        tile = _ExactTile.modular(m, alg, len(out), (n, k, n))
        tiling = square(tile.tiling((n, k, n), 1, extra=4))
        cost = math.prod(stack) * pair_count(tiling) * len(terms) * tile.cost(tiling.tile)
    else:
        pl = plan(m, n, k, n)
        words = alg == "2m" and isinstance(pl, Plan) and not real
        tile = _TileProduct(pl, alg, words, m)
        tiling = square(_tiling(pl, alg, words, (n, k, n), 1, extra=4))
        cost = math.prod(stack) * pair_count(tiling) * len(terms) * (1 if real else _GEMMS[alg]) * pl.cost(tiling.tile)

    def panel(part, idx, lines, inner, negate=False):
        if large:  # the exact tile takes any integers, and reduces them itself
            x = part[idx][lines, inner]
            if not negate:
                return x
            x = balanced_lift(x, m, "A")
            # -(-2**63) has no int64: the balanced residues modulo 2**64 reach it
            return -(x.astype(object) if x.dtype != object and m // 2 >= 2**63 else x)
        x = residues_int64(part[idx][lines, inner], m, "A")
        return np.remainder(-np.remainder(x, m), m) if negate else x

    what = f"modlin.gaussian rank-k update ({'real' if real else alg.upper()}) mod a {m.bit_length()}-bit m"
    with progress(math.prod(stack) * pair_count(tiling), cost, what) as bar:
        for idx in np.ndindex(stack):
            def product(rows, inner, cols):
                acc = None
                for X, Y in terms:
                    x = [panel(p, idx, rows, inner) for p in X]
                    y = [panel(p, idx, cols, inner, conj and j == 1).T for j, p in enumerate(Y)]
                    # with k = 0, zeros: one array per part, as a sum adds into them
                    part = tile(x, y) if k else [np.zeros((x[0].shape[0], y[0].shape[1]), dtype=_dtype(m))
                                                 for _ in x]
                    acc = part if acc is None else tile.add(acc, part)
                return acc

            def finish(rows, cols, acc):
                for j, (dst, part) in enumerate(zip(out, acc)):
                    dst[idx][rows, cols] = part
                    if rows != cols:  # C_JI = C_IJ^T, or its conjugate
                        dst[idx][cols, rows] = _neg_mod(part.T, m) if conj and j == 1 else part.T

            drive(tiling, product, add=tile.add, finish=finish, bar=bar, pairs=True)
    return out[0] if real else tuple(out)


def herk(A, m: int | None = None, *, algorithm: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """``A @ A^H mod m``, exactly Hermitian.

    The output is cut into square tiles, and only those on and above the diagonal
    are computed, each the Gaussian product of two row panels of ``A`` (with 2M two
    real products; moduli without a square root of -1 take 3M, ``algorithm="auto"``);
    the tiles below are their conjugate transposes. With ``T`` tiles a side that is
    ``(1 + 1/T)`` times the work of one real ``n x k x n`` GEMM with 2M: two when the
    output is a single tile. (The HERK corollary of Caday, arXiv 2609.05419,
    ``X = A+ (A-)^T`` with ``C_r = (X + X^T)/2`` and ``C_i = (X - X^T)/(2s)``, would
    make it one at any ``T``; it is not what runs yet.)

    Parameters
    ----------
    A : complex array_like or (real, imag) pair
        ``n x k`` (or stacked).
    m : int, optional
        The modulus, any ``m >= 2`` (from ``2**52`` on by a residue number
        system, as in :func:`matmul`). May be omitted when an operand (or a
        part of one) is a galois ``FieldArray`` of ``GF(p)`` or a python-flint
        ``nmod_mat`` / ``fmpz_mod_mat``: ``m`` is then its modulus (if given,
        it must match), the other parts are read as integers, and the result
        parts come back as that type, as in :func:`modlin.matmul`.
    algorithm : {"auto", "2m", "3m", "4m"}
        As in :func:`matmul`; for ``m >= 2**52`` the algorithm used modulo
        each prime of the residue number system (every one applies).

    Returns
    -------
    (ndarray, ndarray)
        Real and imaginary parts of ``A A^H mod m``, in ``[0, m)``: int64 for
        ``m <= 2**63``, object arrays of Python ints above.

    Examples
    --------
    >>> from modlin import gaussian
    >>> re, im = gaussian.herk([[1 + 2j, 3]], 13)
    >>> int(re[0, 0]), int(im[0, 0])
    (1, 0)
    >>> gaussian.herk([[1 + 2j, 3]], 2**64 + 13)  # |1 + 2i|**2 + 9, as Python ints above 2**63
    (array([[14]], dtype=object), array([[0]], dtype=object))
    >>> import galois
    >>> GF = galois.GF(13)
    >>> gaussian.herk((GF([[1, 2]]), GF([[2, 0]])))  # m = 13 from the field: |1+2i|**2 + 4
    (GF([[9]], order=13), GF([[0]], order=13))
    """
    cpu_only("modlin.gaussian.herk", A)
    m, field, (A,) = _front(m, "modlin.gaussian.herk", A=A)
    return _typed(field, _herk(A, m, algorithm))


def _herk(A, m: int, algorithm: str):
    m = _check_m(m)
    return _rank_k([(_parts(A, "A"),) * 2], m, _choose(algorithm, m), conj=True)


def her2k(A, B, m: int | None = None, *, algorithm: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """``A @ B^H + B @ A^H mod m``, exactly Hermitian.

    Computed as :func:`herk` is, by the tiles on and above the diagonal, each the
    sum of two Gaussian products of row panels: ``2 (1 + 1/T)`` real ``n x k x n``
    GEMMs' work with 2M for ``T`` tiles a side. (With ``X = A+ (B-)^T`` and
    ``Y = A- (B+)^T``, ``Z = X + Y^T`` is ``phi+(C)`` and ``Z^T`` is ``phi-(C)``: the
    HER2K corollary's two GEMMs at any ``T``, not what runs yet.)

    Parameters
    ----------
    A, B : complex array_like or (real, imag) pairs
        Matrices of one shape ``n x k`` (or stacked).
    m : int, optional
        The modulus, any ``m >= 2`` (from ``2**52`` on by a residue number
        system, as in :func:`matmul`). May be omitted when an operand (or a
        part of one) is a galois ``FieldArray`` of ``GF(p)`` or a python-flint
        ``nmod_mat`` / ``fmpz_mod_mat``: ``m`` is then its modulus (if given,
        it must match), the other parts are read as integers, and the result
        parts come back as that type, as in :func:`modlin.matmul`.
    algorithm : {"auto", "2m", "3m", "4m"}
        As in :func:`matmul`; for ``m >= 2**52`` the algorithm used modulo
        each prime of the residue number system (every one applies).

    Returns
    -------
    (ndarray, ndarray)
        Real and imaginary parts of the Hermitian result, in ``[0, m)``: int64
        for ``m <= 2**63``, object arrays of Python ints above.

    Examples
    --------
    >>> from modlin import gaussian
    >>> re, im = gaussian.her2k([[1j]], [[2]], 13)
    >>> int(re[0, 0]), int(im[0, 0])
    (0, 0)
    >>> import galois
    >>> GF = galois.GF(13)
    >>> gaussian.her2k((GF([[0]]), GF([[1]])), (GF([[1]]), GF([[1]])))  # 2 Re(i (1 - i)) = 2
    (GF([[2]], order=13), GF([[0]], order=13))
    """
    cpu_only("modlin.gaussian.her2k", A, B)
    m, field, (A, B) = _front(m, "modlin.gaussian.her2k", A=A, B=B)
    return _typed(field, _her2k(A, B, m, algorithm))


def _her2k(A, B, m: int, algorithm: str):
    m = _check_m(m)
    a, b = _parts(A, "A"), _parts(B, "B")
    return _rank_k([(a, b), (b, a)], m, _choose(algorithm, m), conj=True)


def syrk(A, m: int | None = None, *, algorithm: str = "auto"):
    """``A @ A^T mod m``.

    Computed as :func:`herk` is, by the tiles on and above the diagonal, the
    others their transposes: for a complex (Gaussian) ``A`` each tile is a Gaussian
    product (two real products with 2M) and the result ``(real, imag)``; for a
    **real** integer ``A`` (a plain integer array) each tile is a real product and
    the result an int64 array, about half a GEMM's work for many tiles. (The
    half-width reformulation of Caday, arXiv 2609.05419, ``Z = A[:, :k/2] + i
    A[:, k/2:]`` with ``Re(Z Z^H) = A A^T``, one real GEMM of half the inner
    dimension at any ``T``, is not what runs yet.)

    Parameters
    ----------
    A : array_like
        An ``n x k`` matrix: complex or a (real, imag) pair, or a real integer array.
    m : int, optional
        The modulus, any ``m >= 2`` (from ``2**52`` on by a residue number
        system, as in :func:`matmul`). May be omitted when an operand (or a
        part of one) is a galois ``FieldArray`` of ``GF(p)`` or a python-flint
        ``nmod_mat`` / ``fmpz_mod_mat``: ``m`` is then its modulus (if given,
        it must match), the other parts are read as integers, and the result
        parts come back as that type, as in :func:`modlin.matmul`.
    algorithm : {"auto", "2m", "3m", "4m"}
        As in :func:`matmul`; for ``m >= 2**52`` the algorithm used modulo
        each prime of the residue number system (every one applies).

    Returns
    -------
    (ndarray, ndarray) or ndarray
        ``(real, imag)`` for Gaussian ``A``, one array for a real ``A``;
        entries in ``[0, m)``, exactly symmetric; int64 for ``m <= 2**63``,
        object arrays of Python ints above.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import gaussian
    >>> A = np.array([[1, 2, 3], [4, 5, 6]])
    >>> gaussian.syrk(A, 13)
    array([[ 1,  6],
           [ 6, 12]])
    >>> import galois
    >>> gaussian.syrk(galois.GF(13)(A))  # m = 13 from the field
    GF([[ 1,  6],
        [ 6, 12]], order=13)
    """
    cpu_only("modlin.gaussian.syrk", A)
    m, field, (A,) = _front(m, "modlin.gaussian.syrk", A=A)
    return _typed(field, _syrk(A, m, algorithm))


def _syrk(A, m: int, algorithm: str):
    m = _check_m(m)
    alg = _choose(algorithm, m)
    a = [A] if _real(A) else _parts(A, "A")
    return _rank_k([(a, a)], m, alg, conj=False)


def syr2k(A, B, m: int | None = None, *, algorithm: str = "auto"):
    """``A @ B^T + B @ A^T mod m``.

    Computed as :func:`herk` is, by the tiles on and above the diagonal, each the
    sum of two products of row panels: Gaussian ones for complex operands
    (returning ``(real, imag)``), real ones for real integer operands (returning an
    int64 array).

    Parameters
    ----------
    A, B : array_like
        Matrices of one shape ``n x k``: both Gaussian or both real integer arrays.
    m : int, optional
        The modulus, any ``m >= 2`` (from ``2**52`` on by a residue number
        system, as in :func:`matmul`). May be omitted when an operand (or a
        part of one) is a galois ``FieldArray`` of ``GF(p)`` or a python-flint
        ``nmod_mat`` / ``fmpz_mod_mat``: ``m`` is then its modulus (if given,
        it must match), the other parts are read as integers, and the result
        parts come back as that type, as in :func:`modlin.matmul`.
    algorithm : {"auto", "2m", "3m", "4m"}
        As in :func:`matmul`; for ``m >= 2**52`` the algorithm used modulo
        each prime of the residue number system (every one applies).

    Returns
    -------
    (ndarray, ndarray) or ndarray
        ``(real, imag)`` for Gaussian operands, one array for real ones;
        entries in ``[0, m)``, exactly symmetric; int64 for ``m <= 2**63``,
        object arrays of Python ints above.

    Examples
    --------
    >>> from modlin import gaussian
    >>> gaussian.syr2k([[1, 2]], [[3, 4]], 13)
    array([[9]])
    >>> import galois
    >>> GF = galois.GF(13)
    >>> gaussian.syr2k(GF([[1, 2]]), GF([[3, 4]]))
    GF([[9]], order=13)
    """
    cpu_only("modlin.gaussian.syr2k", A, B)
    m, field, (A, B) = _front(m, "modlin.gaussian.syr2k", A=A, B=B)
    return _typed(field, _syr2k(A, B, m, algorithm))


def _syr2k(A, B, m: int, algorithm: str):
    m = _check_m(m)
    alg = _choose(algorithm, m)
    if all(_real(X) for X in (A, B)):
        a, b = [A], [B]
    else:
        a, b = _parts(A, "A"), _parts(B, "B")
    return _rank_k([(a, b), (b, a)], m, alg, conj=False)


def _real(X) -> bool:
    """A plain real integer matrix (syrk and syr2k then return one array)."""
    return not isinstance(X, tuple) and np.asarray(X).dtype.kind in "iubfO"


# --------------------------------------------------------------------- exact products

def _intmul_moduli(bound: int, k: int, engine: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Moduli covering ``bound`` and the algorithm for each: 2M where it applies."""
    if engine == "int8":
        twom = twom_moduli(255)
        rest = tuple(q for q in _moduli.int8_moduli() if all(math.gcd(q, t) == 1 for t in twom))
        pool = [(q, "2m") for q in twom] + [(q, "3m") for q in rest]
    else:
        # the largest single-GEMM modulus for this k: k * (q/2)**2 <= 2**53
        bits = max(8, min(25, int(math.log2(2 * math.sqrt(2**53 / max(k, 1))))))
        count = max(8, 2 * _moduli.planned_range(bound).bit_length() // (bits - 1) + 2)
        pool = [(q, "2m") for q in twom_primes(bits, count)]
    count = _moduli.cover_count([q for q, _ in pool], bound)
    if count is not None:
        return tuple(q for q, _ in pool[:count]), tuple(a for _, a in pool[:count])
    raise ValueError(f"a {bound.bit_length()}-bit bound needs more {engine} moduli than are available; "
                     "use engine='fp64'")


def intmul(A, B, *, engine: str = "fp64") -> tuple[np.ndarray, np.ndarray]:
    """Exact product of Gaussian-integer matrices, by RNS over 2M moduli.

    Each modulus is a prime ``1 (mod 4)`` (fp64 engine) with a 2M product, or
    for the int8 engine the 2M moduli up to 255 followed, when the bound needs
    more bits than they supply, by 3M on further int8 moduli (hybrid). The
    parts are rebuilt by CRT.

    Parameters
    ----------
    A, B : complex array_like or (real, imag) pairs of integer arrays
        Any integer entries (object arrays of Python ints for large ones,
        python-flint ``fmpz_mat`` parts). Residues are refused, as by
        :func:`modlin.intmul`: galois ``FieldArray`` s, ``nmod_mat`` and
        ``fmpz_mod_mat`` (:func:`matmul` multiplies them modulo their modulus).
    engine : {"fp64", "int8"}

    Returns
    -------
    (ndarray, ndarray)
        Real and imaginary parts: int64 when the bound
        ``k * (max|A_r| + max|A_i|) * (max|B_r| + max|B_i|)`` is below ``2**63``,
        object arrays of Python ints otherwise; ``fmpz_mat`` s when a part is one.

    Raises
    ------
    TypeError
        Residues (above), or operands that are not matrices (``None``,
        strings, ragged lists, scipy.sparse matrices, masked arrays).
    ValueError
        A memory budget (:func:`modlin.limits`) too small for the smallest
        tile (the message names what it needs), or an unknown ``engine``.

    Notes
    -----
    Computed tile by tile within the memory budget of :func:`modlin.limits`
    (:doc:`/guide/large`): each tile's exact product is rebuilt from its own
    residues, and the partial products of k-panels are added exactly, so the
    result is the same under every budget.

    Examples
    --------
    >>> from modlin import gaussian
    >>> re, im = gaussian.intmul([[2**40 + 1j]], [[2**40 - 1j]])
    >>> int(re[0, 0]), int(im[0, 0])
    (1208925819614629174706177, 0)
    """
    cpu_only("modlin.gaussian.intmul", A, B)
    flat, names, rebuild = _flatten({"A": A, "B": B})
    ftype, plain = integer_operands(*flat, names=names, fn="modlin.gaussian.intmul")
    A, B = rebuild(plain)
    from modlin._algorithms.tiles import as_matrix, matmul_shapes

    if engine not in ("fp64", "int8"):
        raise ValueError(f"engine must be 'fp64' or 'int8', got {engine!r}")
    parts = []
    for X, name in ((A, "A"), (B, "B")):
        re, im = (float_integers(x, name) if x.dtype.kind == "f" else x for x in _parts(X, name))
        parts.append((integers(re, name), integers(im, name)))
    (ar, ai), (br, bi) = parts
    (mm, k, n), full, shape = matmul_shapes(ar.shape, br.shape)
    amax, bmax = max_abs(ar) + max_abs(ai), max_abs(br) + max_abs(bi)
    bound = k * amax * bmax
    as_object = bound >= 2**63
    out = [np.empty(full, dtype=object if as_object else np.int64) for _ in range(2)]
    if not out[0].size or not k:
        for x in out:
            x[...] = 0
    else:
        tile = _ExactTile(*_intmul_moduli(bound, k, engine), (mm, k, n), engine, as_object)
        tile.pieces = max(4, max(amax, bmax).bit_length() // 16 + 1)  # of the largest entry, as Pieces16 cuts it
        _run_exact(tile, (mm, k, n), [as_matrix(x, 0) for x in (ar, ai)], [as_matrix(x, 1) for x in (br, bi)],
                   out, f"modlin.gaussian.intmul ({len(tile.tiles)} moduli)")
    return _typed(ftype, tuple(x.reshape(shape) for x in out), _ndim(A))


def _run_exact(tile: _ExactTile, shape: tuple[int, int, int], x: list, y: list, out: list, what: str) -> None:
    """``out[j][...]`` = part ``j`` of the product of the parts ``x`` and ``y`` (matrices or
    stacks, broadcasting to ``out``'s shape) by ``tile`` (an :class:`_ExactTile`), tile by
    tile within the memory budget of :func:`modlin.limits`: the product of each k-panel is
    added into the output (:meth:`_ExactTile.add`)."""
    from modlin._algorithms.tiles import drive, progress, stack_items

    stack = out[0].shape[:-2]
    tiling, items, rounds = stack_items(stack, lambda count: tile.tiling(shape, count), x, y)
    cost = math.prod(stack) * tiling.count * tile.cost(tiling.tile)
    with progress(rounds * tiling.count, cost, what) as bar:
        for idx, xs, ys in items:
            dst = [o[idx] for o in out]

            def product(rows, inner, cols):
                part = tile([t[..., rows, inner] for t in xs], [t[..., inner, cols] for t in ys])
                if inner.start:
                    return part
                for d, p in zip(dst, part):
                    d[..., rows, cols] = p
                return [d[..., rows, cols] for d in dst]

            drive(tiling, product, add=tile.add, bar=bar)


class _ExactTile:
    """The exact Gaussian (or, for one-part operands, real) product of one tile's panels by
    RNS: residues modulo each modulus (a :class:`_TileProduct` each, with that modulus'
    algorithm and multiword plan), rebuilt by CRT, or with ``p`` reduced modulo ``p`` by
    the CRT itself; with its workspace model and modelled cost.

    ``pieces``: how many 16-bit pieces an operand entry is cut into (the workspace model's);
    ``parts``: 2 for Gaussian operands ``(real, imag)``, 1 for real ones."""

    def __init__(self, moduli, algs, shape, engine: str, as_object: bool, p: int | None = None, parts: int = 2):
        from modlin._planning.plan import Plan
        from modlin._planning.planner import plan
        from modlin._runtime.scratch import Arena

        self.basis, self.as_object, self.p, self.parts = _moduli.Basis(moduli), as_object, p, parts
        self.pieces = 4
        self.tiles = []
        for q, alg in zip(moduli, algs):
            # the plan is pinned so that the int8 engine is honoured
            pl = plan(q, *shape, engine=engine if engine == "int8" else None)
            self.tiles.append(_TileProduct(pl, alg, alg == "2m" and isinstance(pl, Plan) and parts == 2, q))
        self.arena = Arena()  # the CRT's rows, reused from tile to tile

    @classmethod
    def modular(cls, m: int, alg: str, parts: int, shape: tuple[int, int, int]) -> _ExactTile:
        """The product modulo ``m`` of operands of ``parts`` parts (any integers, taken to their
        balanced residues), for ``m >= 2**52``: the exact product of the balanced residues, by
        ``alg`` modulo each of the fp64 primes ``1 (mod 4)`` of :func:`gaussian.intmul
        <intmul>`, whose CRT reduces it modulo ``m``.

        A part of the product is a sum of ``parts * k`` products of balanced residues, each at
        most ``(m//2)**2`` in magnitude (``C_r = A_r B_r - A_i B_i``): that is the bound the
        moduli cover, whatever ``alg`` (2M and 3M combine residues modulo each prime only).
        """
        k = shape[1]
        moduli, _ = _intmul_moduli(parts * k * (m // 2) ** 2, k, "fp64")
        tile = cls(moduli, (alg,) * len(moduli), shape, "fp64", False, p=m, parts=parts)
        tile.pieces = max(4, m.bit_length() // 16 + 1)  # a balanced residue's, as balanced_halves cuts it
        return tile

    def __call__(self, x, y):
        """The exact products' parts (int64, or object with ``as_object``) of the integer panels
        ``x = (A_r, A_i)`` and ``y = (B_r, B_i)`` (or ``(A,)`` and ``(B,)``); with ``p``, of
        panels of any integers, the parts modulo ``p`` in ``[0, p)`` (int64 up to ``2**63``,
        Python ints above)."""
        if self.p is None:
            halves = [_residues.Pieces16(t) for t in (*x, *y)]
        else:  # any dtype modlin.matmul takes; residues in [-(p//2), (p-1)//2] bound the product
            halves = [balanced_halves(t, self.p, name) for t, name in zip((*x, *y), "A" * len(x) + "B" * len(y))]
        shape = np.broadcast_shapes(x[0].shape[:-2], y[0].shape[:-2]) + (x[0].shape[-2], y[0].shape[-1])
        E = math.prod(shape)
        N, P = len(self.tiles), len(x)
        rows = [_residues.padded_rows(N, E, np.float64, self.arena, f"part {j}") for j in range(P)]
        for i, (q, tile) in enumerate(zip(self.basis.moduli, self.tiles)):
            ops = [h.residues((q,), np.float64)[0].astype(np.int64) % q for h in halves]
            for r, part in zip(rows, tile(ops[:P], ops[P:])):
                r[i, :E] = part.reshape(-1)
        return [_crt.reconstruct_rows(r, E, self.basis, self.p, self.as_object).reshape(shape) for r in rows]

    def add(self, acc, part):
        """``acc += part``, exactly (the bound covers every partial sum) or modulo ``p``."""
        for x, y in zip(acc, part):
            if self.p is None:
                np.add(x, y, out=x)
            else:
                add_into(x, y, self.p)  # int64 without overflow up to p = 2**63
        return acc

    def cost(self, tile) -> float:
        """Modelled time of one tile product, in multiply-adds of a large fp64 GEMM: the real
        products of every modulus and, as for :class:`modlin.RNSPlan`, the residues of the
        panels and the CRT of the result."""
        from modlin._runtime.calibration import CRT_SUM, LIFT, LIMB, RESIDUE, WEIGH

        mt, kt, nt = tile
        N = len(self.tiles)
        L = (self.basis.M * N).bit_length() // 16 + 1
        gemms = sum((_GEMMS[t.alg] if self.parts == 2 else 1) * t.pl.cost(tile) for t in self.tiles)
        return gemms + self.parts * ((LIFT + RESIDUE * N) * (mt * kt + kt * nt)
                                     + (WEIGH * N + (CRT_SUM * N + LIMB) * L) * mt * nt)

    def tiling(self, shape, batch: int, pieces: int | None = None, budget: int | None = None, extra: int = 0):
        """The tiles of the product of ``shape`` (``batch`` matrices at once) within ``budget``
        (default: :func:`modlin.limits`'), operand entries cut into ``pieces`` 16-bit pieces
        (default: :attr:`pieces`); ``extra`` more arrays of an output tile's size and the
        result's entries (a rank-k update's sum and mirror) beside each tile."""
        from modlin._planning.tiling import choose

        budget = current_limits().memory if budget is None else budget
        return choose(shape, lambda mt, kt, nt: batch * (self.workspace((mt, kt, nt), pieces)
                                                         + extra * self.entry * mt * nt),
                      budget, lambda mt, kt, nt: batch * self.cost((mt, kt, nt)))

    @property
    def entry(self) -> int:
        """Bytes of one entry of a result part: int64, or a pointer and a Python int of the
        bound's size (or below ``p``) in 30-bit digits."""
        if self.p is not None:
            return 8 if self.p <= 2**63 else 8 + 32 + 4 * -(-self.p.bit_length() // 30)
        return 8 + 32 + 4 * -(-self.basis.M.bit_length() // 30) if self.as_object else 8

    def workspace(self, tile, pieces: int | None = None) -> int:
        """Bytes one tile product allocates beyond operands and result (an upper bound, the
        tile scheduler's model): the 16-bit pieces of the panels (with ``p``, of their
        balanced residues, which are made first: int64 up to ``p = 2**64``, Python ints
        above) and the residues of every modulus for each part of the result throughout;
        beside them, one modulus' residues (float64, then int64) with its product
        (:func:`_workspace`), then the CRT; and the partial product of a k-panel, added
        into the result."""
        mt, kt, nt = tile
        ops, e, N, P = mt * kt + kt * nt, mt * nt, len(self.tiles), self.parts
        pieces = self.pieces if pieces is None else pieces
        halves = P * pieces * 2 * ops
        if self.p is not None:
            halves += P * ops * (8 if self.p <= 2**64 else 8 + 32 + 4 * -(-self.p.bit_length() // 30))
        rows = P * 8 * N * (e + 512)  # padded_rows: at most 4 KiB of padding per row
        # the residues of one panel, in chunks (on up to two threads), float64, int64
        convert = 16 * max(mt * kt, kt * nt) + 2 * 8 * (pieces + 2) * min(max(mt * kt, kt * nt), _residues.RESIDUE_STEP)
        product = max(_workspace(t.pl, t.alg, t.words, 1)(mt, kt, nt) for t in self.tiles)
        crt = P * 18 * e + _crt.crt_scratch(N, self.basis.M * N if self.p is None else self.p, e,
                                            current_limits().threads)
        return halves + rows + max(convert + product, crt) + P * self.entry * e
