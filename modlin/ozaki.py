"""Floating-point GEMMs emulated on exact integer GEMMs (Ozaki scheme II).

Each row of ``A`` and each column of ``B`` is scaled by a power of two and
rounded to integers ``A'``, ``B'`` small enough that the integer product
``A'B'`` is recovered exactly from its residues modulo a few small moduli
(a residue number system). Those products are exact integer GEMMs on the
engine's words: int8 residues with int32 sums on a GPU's tensor cores, or
float64 words on a CPU's BLAS. The exact ``A'B'`` is rebuilt by CRT, rounded
once to double and unscaled. The only error is the rounding of the inputs to
``A'`` and ``B'``, so the accuracy is set by the moduli's product ``M``
(about ``M**-0.5`` relative to ``|A| |B|``), not by the GEMM.

Complex products use 2M (Caday, arXiv 2609.05419): modulo ``m`` with ``s**2 = -1 (mod m)``,
``(A_r + s A_i)(B_r + s B_i)`` and ``(A_r - s A_i)(B_r - s B_i)`` give the real
and imaginary parts with two real GEMMs instead of three (3M) or four (4M).
The choice among 2M, 3M and 4M changes the speed, never the result.

On a CPU the emulation is slower than the native GEMM it replaces (several
fp64 GEMMs per product); it is here for accuracy control and as the reference
for the GPU engines, where int8 GEMMs outrun fp64 ones many times over.
"""

from __future__ import annotations

import math
import numbers
import warnings
from functools import lru_cache

import numpy as np

from modlin._algorithms import ozaki_tiles as _tiles, quantize as _quantize
from modlin._algorithms.ozaki import Moduli as _Moduli
from modlin._algorithms.tiles import matmul_shapes
from modlin._arith.moduli import Basis, int8_moduli, twom_moduli, twom_primes, why_not_twom
from modlin._engines.backend import is_cupy, is_dask, namespace
from modlin._front.inputs import check_operand, trans_code

__all__ = ["dgemm", "zgemm", "dsyrk", "zherk", "moduli_for", "spread_bits", "AccuracyWarning"]


MODES = ("fast", "accurate")


ENGINES = ("auto", "int8", "fp64")


ALGORITHMS = ("auto", "2m", "3m", "4m", "hybrid")


#: Bits of the fp64 engine's moduli: primes 1 (mod 4) below 2**21, so each has a
#: square root of -1 (2M) and a k of up to 2**13 needs one GEMM per product.
FP64_MODULUS_BITS = 21


#: Default counts: the fewest moduli whose product M reaches 2**124 for k <= 1024,
#: log2(k / 1024) bits more beyond (the bound on |A'||B'| sums k terms, so
#: each doubling costs every entry half a bit on each side): 16 int8 moduli,
#: 17 int8 2M moduli or 6 fp64 ones at k = 1024. 16 2M moduli (M about 2**117)
#: match native double accuracy on well-scaled inputs, but on inputs spanning
#: wider exponent ranges (GEMMul8's phi = 1, 2) they lost to numpy.matmul on a
#: few inputs by up to 2.6x; one more modulus never did (tests/test_ozaki.py).
DEFAULT_BITS = 124


#: Wide exponent ranges: where the largest entry of a row of ``A`` (column of ``B``) stands
#: ``L_A`` (``L_B``) bits above the line's typical entry (its nonzero exponents' mean, the
#: most over the lines; :func:`spread_bits`), the scaling truncates entries that numpy
#: keeps, and the default ``M`` grows by ``L_A + L_B - SPREAD_FREE`` bits. Measured on
#: GEMMul8's inputs ``(rand - 0.5) * exp(phi * randn)``, 12 x 300 @ 300 x 10 and
#: 40 x 1000 @ 1000 x 30 (three seeds each) and 8 x 3000 @ 3000 x 8 (one), real and
#: complex, phi = 1.5 ... 6, fp64 and int8 moduli (196 cases, 2026-12-06): the fewest
#: moduli whose componentwise error (against an exact oracle) was no larger than
#: numpy.matmul's always reached ``L_A + L_B - 27.5`` bits beyond the default, none was
#: needed below ``L_A + L_B = 29`` (phi = 2 gives 21 to 30, phi = 6 about 75), and as
#: many as 6 int8 moduli more at phi = 6. 20 keeps 7.5 bits of margin
#: (``modlin._tools.bench.ozaki_tables.run_spread_calibration()`` prints it again).
SPREAD_FREE = 20


#: Beyond ``2 * G_MAX`` bits of ``M`` (plus ``log2 k``) the scaling keeps no more bits of any
#: line: 54 more than the default at ``k <= 1024``.
SPREAD_CAP = 2 * _quantize.G_MAX + 10 - DEFAULT_BITS


def default_bits(k: int, spread: int = 0) -> float:
    """``log2`` of the smallest ``M`` the default moduli reach for inner dimension ``k``:
    ``124 + log2(k / 1024)`` for ``k > 1024``, 124 below, plus ``spread`` bits
    (:func:`spread_bits`) for inputs spanning wide exponent ranges."""
    return DEFAULT_BITS + spread + max(0.0, math.log2(max(k, 1) / 1024))


def _enough(M: int, k: int, spread: int = 0) -> bool:
    """``M >= 2**default_bits(k, spread)``, decided in integers."""
    return M * 1024 >= 2 ** (DEFAULT_BITS + spread) * max(k, 1024)


def _line_spread(x, axis: int) -> float:
    """The most, over the rows (``axis=1``) or columns (``axis=0``) of ``x``'s matrices, by which
    a line's largest exponent exceeds its exponents' mean (0 for empty operands)."""
    if x.size == 0:
        return 0.0
    if x.ndim == 1:
        x = x[np.newaxis, :] if axis == 1 else x[:, np.newaxis]
    stats = [_quantize.line_spread(x[idx], axis) for idx in np.ndindex(*x.shape[:-2])]
    if is_dask(x):
        import dask

        (stats,) = dask.compute(stats)
    most = 0.0
    for top, total, count in stats:
        live = count > 0
        if int(live.sum()):
            most = max(most, float((top[live] - total[live] / count[live]).max()))
    return most


def spread_bits(A, B=None) -> int:
    """Extra bits of ``M`` the default moduli take for ``A @ B`` (``A @ A^H`` when ``B`` is None):
    ``ceil(L_A + L_B - SPREAD_FREE)`` within ``[0, SPREAD_CAP]``, where ``L_A`` is the most by
    which a row's largest binary exponent exceeds the mean exponent of its nonzero entries
    (``L_B`` the same over the columns of ``B``). Well-scaled inputs take none: Gaussian
    entries have ``L`` about 2 a side, GEMMul8's ``phi = 2`` inputs 10 to 15, ``phi = 6``
    ones about 37 (which then take up to 54 bits more, 3 fp64 or 7 int8 moduli).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import ozaki
    >>> rng = np.random.default_rng(0)
    >>> ozaki.spread_bits(rng.standard_normal((50, 300)), rng.standard_normal((300, 40)))
    0
    >>> wide = (rng.random((50, 300)) - 0.5) * np.exp(6 * rng.standard_normal((50, 300)))
    >>> ozaki.spread_bits(wide, wide.T) > 30
    True
    """
    la = _line_spread(A, 1)
    lb_ = la if B is None else _line_spread(B, 0)
    return int(min(max(math.ceil(la + lb_ - SPREAD_FREE), 0), SPREAD_CAP))


class AccuracyWarning(RuntimeWarning):
    """The scaling could not keep some nonzero entries: they were rounded to zero."""


@lru_cache(maxsize=None)
def _hybrid_pool() -> tuple[tuple[int, str], ...]:
    """int8 moduli: the 2M ones first, then int8 moduli coprime to them for 3M."""
    twom = twom_moduli(255)
    rest = tuple(q for q in int8_moduli() if all(math.gcd(q, t) == 1 for t in twom))
    return tuple((q, "2m") for q in twom) + tuple((q, "3m") for q in rest)


def _pool(engine: str, kind: str, algorithm: str) -> list[tuple[int, str]]:
    """The default moduli, in order of use, for ``kind`` in {"real", "complex", "syrk"}."""
    if engine == "fp64":
        alg = {"real": "real", "syrk": "2m"}.get(kind, "2m" if algorithm in ("auto", "hybrid") else algorithm)
        return [(q, alg) for q in twom_primes(FP64_MODULUS_BITS, 64)]
    if kind == "real":
        return [(q, "real") for q in int8_moduli()]
    if algorithm in ("3m", "4m"):
        return [(q, algorithm) for q in int8_moduli()]
    pool = list(_hybrid_pool())
    if algorithm == "2m":
        pool = [(q, a) for q, a in pool if a == "2m"]
    if kind == "syrk":  # without a square root of -1, SYRK takes the plain real product
        pool = [(q, "2m" if a == "2m" else "real") for q, a in pool]
    return pool


def moduli_for(kind: str = "complex", *, engine: str = "auto", moduli=None,
               algorithm: str = "auto", k: int = 1024, spread: int = 0) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The moduli an Ozaki product would use, and the algorithm for each.

    Parameters
    ----------
    kind : {"real", "complex", "syrk"}
        ``dgemm``, ``zgemm``/``zherk``, or ``dsyrk``.
    engine, moduli, algorithm
        As for :func:`zgemm`.
    k : int
        The inner dimension: the default count grows by one bit of ``M`` per
        doubling of ``k`` beyond 1024.
    spread : int
        Extra bits of ``M`` for operands spanning wide exponent ranges: what
        :func:`spread_bits` gives for the operands, which the products add to
        their default count.

    Returns
    -------
    moduli : tuple of int
    algorithms : tuple of str
        ``"real"`` (one real GEMM), ``"2m"``, ``"3m"`` or ``"4m"`` per modulus.

    Examples
    --------
    >>> from modlin import ozaki
    >>> mods, algs = ozaki.moduli_for("complex", engine="int8")
    >>> len(mods), mods[:4], set(algs)
    (17, (241, 233, 229, 221), {'2m'})
    >>> ozaki.moduli_for("complex", engine="int8", moduli=24)[1][-3:]
    ('2m', '3m', '3m')
    """
    if kind not in ("real", "complex", "syrk"):
        raise ValueError(f"kind must be 'real', 'complex' or 'syrk', got {kind!r}")
    if isinstance(spread, bool) or not isinstance(spread, numbers.Integral) or spread < 0:
        raise ValueError(f"spread must be a non-negative int (bits), got {spread!r}")
    mods = _resolve(kind, engine, moduli, algorithm, k=k, spread=int(spread))
    return mods.moduli, mods.algorithms


def _resolve(kind: str, engine: str, moduli, algorithm: str, gpu: bool = False, k: int = 1024,
             spread: int = 0) -> _Moduli:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if engine == "auto":
        # On the CPU an int8 GEMM is emulated by an fp64 one: fewer, larger moduli win.
        # On a GPU int8 tensor cores outrun fp64 many times over.
        engine = "int8" if gpu else "fp64"
    if gpu and engine != "int8":
        raise ValueError("on CuPy arrays ozaki runs on the int8 engine (tensor cores); "
                         "use engine='int8' or 'auto'")
    if moduli is None or isinstance(moduli, numbers.Integral):
        return _counted(kind, engine, algorithm, moduli, k, spread)
    return _listed(kind, engine, algorithm, moduli)


def _counted(kind: str, engine: str, algorithm: str, count, k: int, spread: int = 0) -> _Moduli:
    pool = _pool(engine, kind, algorithm)
    if count is None:
        prod, count = 1, 0
        while not _enough(prod, k, spread) and (count < len(pool) or not _enough(prod, k)):
            prod *= pool[count][0]
            count += 1
    if isinstance(count, bool) or int(count) < 1:
        raise ValueError(f"moduli must be a positive count or a list of moduli, got {count!r}")
    count = int(count)
    if count > len(pool):
        hint = " (algorithm='hybrid' adds 3M moduli)" if algorithm == "2m" else ""
        raise ValueError(f"the {engine} engine has {len(pool)} moduli for algorithm={algorithm!r}, "
                         f"not {count}{hint}")
    chosen = pool[:count]
    return _Moduli(engine, tuple(q for q, _ in chosen), tuple(a for _, a in chosen))


def _listed(kind: str, engine: str, algorithm: str, moduli) -> _Moduli:
    try:
        mods = tuple(int(q) for q in moduli)
    except TypeError:
        raise TypeError(f"moduli must be a count or a sequence of integers, got {moduli!r}") from None
    if any(not isinstance(q, numbers.Integral) or isinstance(q, bool) for q in moduli):
        raise TypeError(f"moduli must be integers, got {list(moduli)!r}")
    if not mods:
        raise ValueError("moduli must not be empty")
    Basis(mods)  # pairwise coprime, each in [2, 2**26)
    if engine == "int8" and max(mods) > 256:
        raise ValueError(f"int8 moduli must be at most 256, got {max(mods)}")
    if kind == "real":
        algs = ("real",) * len(mods)
    elif algorithm in ("3m", "4m"):
        algs = (algorithm,) * len(mods)
    else:
        twom = [q > 2 and why_not_twom(q) is None for q in mods]
        if algorithm == "2m" and not all(twom):
            bad = mods[twom.index(False)]
            raise ValueError(f"2M needs moduli with a square root of -1 modulo them: {bad} has none "
                             f"({why_not_twom(bad) or 'it is too small'}); use algorithm='hybrid' or '3m'")
        other = "real" if kind == "syrk" else "3m"
        algs = tuple("2m" if t else other for t in twom)
    return _Moduli(engine, mods, algs)


def _as_float(X, name: str, complex_: bool) -> np.ndarray:
    x = X if is_cupy(X) or is_dask(X) else np.asarray(X)
    if x.dtype.kind not in "biufc":
        raise TypeError(f"{name} must be a numeric array, not {x.dtype}")
    if x.dtype.kind == "c" and not complex_:
        raise TypeError(f"{name} is complex: use ozaki.zgemm (or zherk) for complex products")
    return x.astype(np.complex128 if complex_ else np.float64, copy=False)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def _warn_lost(lost: int, name: str, axis: int) -> None:
    """The AccuracyWarning for ``lost`` nonzero entries of ``name`` rounded to zero."""
    if not lost:
        return
    line = "row" if axis == 1 else "column"
    _warn_caller(
        f"{lost} nonzero entries of {name} are too small beside the largest entry of their {line} "
        f"and were rounded to zero (the scaling keeps at most {_quantize.G_MAX} bits below it, fewer "
        "when the moduli's range is small): more moduli or mode='accurate' keep more bits up to that "
        f"limit; beyond it, split the product or rescale that {line}",
        AccuracyWarning)


def _warn_caller(message: str, category) -> None:
    """Warn at the first frame outside modlin, wherever inside it the warning arose, so that
    Python's once-per-location filter tells two calls apart. Frames of the standard library's
    wrappers between modlin's (a ``contextlib`` decorator's ``inner``) count as modlin's: the
    warning once named ``contextlib.py`` for every call, and the second was never shown."""
    import sys

    frame, level = sys._getframe(1), 2
    while frame is not None and _inside(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _inside(module: str) -> bool:
    """Whether a frame of ``module`` is modlin's own (or a wrapper's inside it)."""
    return module == "modlin" or module.startswith("modlin.") or module in ("contextlib", "functools")


def _scalar(x, name: str, complex_: bool):
    if isinstance(x, bool) or not isinstance(x, numbers.Number):
        raise TypeError(f"{name} must be a number, got {type(x).__name__}")
    if not complex_ and isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        if x.imag != 0:
            raise TypeError(f"{name} must be real here, got {x!r}")
        x = x.real
    return complex(x) if complex_ else float(x)


def _operands(fn: str, C, c, overwrite_c, **operands):
    """The operands after the front-door checks, and ``C`` (or ``c``, scipy.linalg.blas's
    spelling of it: one of the two). ``overwrite_c`` is scipy's permission to reuse ``c``'s
    memory, which modlin never takes (inputs are never modified): checked, then ignored."""
    if not isinstance(overwrite_c, (bool, np.bool_, numbers.Integral)) or overwrite_c not in (0, 1):
        raise TypeError(f"{fn}: overwrite_c must be a bool (0 or 1, as in scipy.linalg.blas), got {overwrite_c!r}")
    if c is not None:
        if C is not None:
            raise TypeError(f"{fn}: C and c are one argument (c is scipy.linalg.blas's spelling): pass one of them")
        C = c
    checked = [check_operand(X, name, fn, fields=False, flint=False, of="numbers") for name, X in operands.items()]
    if C is not None:
        C = check_operand(C, "C", fn, fields=False, flint=False, of="numbers")
    return checked, C


def _op(x, code: int):
    """BLAS's ``op(x)``: ``x``, ``x^T`` (code 1) or ``x^H`` (code 2; ``x^T`` for real ``x``), on
    the last two axes (a 1-D operand is not transposed). A copy when transposed, so that
    the emulation reads contiguous rows, and when neither its rows nor its columns are
    contiguous (the residue kernels read one or the other in place)."""
    if code and x.ndim >= 2:
        x = x.swapaxes(-1, -2)
        x = x if is_dask(x) else namespace(x).ascontiguousarray(x)
    elif x.ndim >= 2 and not is_dask(x) and x.shape[-1] > 1 and x.shape[-2] > 1 \
            and x.itemsize not in (x.strides[-1], x.strides[-2]):
        x = namespace(x).ascontiguousarray(x)
    if code == 2 and x.dtype.kind == "c":
        x = x.conj()
    return x


def _triangle(out, lower):
    """The full result (``lower=None``), or its lower (true) or upper (false) triangle with
    the other one zero."""
    if lower is None:
        return out
    xp = namespace(out)
    return xp.tril(out) if lower else xp.triu(out)


def _blas(compute, xp, shape, full, dtype, alpha, beta, C, complex_scalars: bool):
    """``alpha * A @ B + beta * C`` with BLAS's conventions: ``compute(epilogue)`` returns the
    product of the result's shape with ``epilogue`` applied to each of its tiles as they
    are finished (``epilogue(tile, where)``, ``where`` indexing the result as ``full``, its
    shape with 1-D operands' axes kept); it is not called when ``alpha == 0``, and ``C`` is
    not read when ``beta == 0`` (NaN there is ignored). With ``xp`` :mod:`dask.array`,
    ``compute(None)`` returns the lazy product and the epilogue's operations follow it
    lazily."""
    alpha = _scalar(alpha, "alpha", complex_scalars)
    beta = _scalar(beta, "beta", complex_scalars)
    c = None
    if beta != 0:
        if C is None:
            raise ValueError("beta is nonzero but C is missing: pass C= (or beta=0)")
        c = C if is_cupy(C) or is_dask(C) else np.asarray(C)
        if c.dtype.kind not in "biufc" or (c.dtype.kind == "c" and dtype != np.complex128):
            raise TypeError(f"C must be a {np.dtype(dtype).name} array, not {c.dtype}")
        try:
            c = xp.broadcast_to(c, shape).reshape(full)
        except ValueError:
            raise ValueError(f"C has shape {c.shape}, but the product has shape {shape}") from None
    if alpha == 0:
        out = xp.zeros(shape, dtype=dtype)
        if c is not None:
            out += beta * c.reshape(shape).astype(dtype, copy=False)
        return out

    if xp.__name__ == "dask.array":
        # lazy: the epilogue's operations, in its order, on the whole result chunk by chunk
        out = compute(None)
        if alpha != 1:
            out = xp.multiply(alpha, out)
        if c is not None:
            out = xp.add(out, beta * c.reshape(shape).astype(dtype, copy=False))
        return out

    def epilogue(tile, where):
        # the same operations, operands in the same order, entry by entry, as on the whole
        # result (alpha first: numpy's complex loops round tile * alpha otherwise)
        if alpha != 1:
            xp.multiply(alpha, tile, out=tile)
        if c is not None:
            xp.add(tile, beta * c[where].astype(dtype, copy=False), out=tile)

    return compute(epilogue)


def _batched_gemm(A, B, mods: _Moduli, mode: str, dtype, epilogue):
    (m, k, n), full, shape = matmul_shapes(A.shape, B.shape)
    a = A[np.newaxis, :] if A.ndim == 1 else A
    b = B[:, np.newaxis] if B.ndim == 1 else B
    batch = full[:-2]
    xp = namespace(a)
    a = xp.broadcast_to(a, batch + a.shape[-2:])
    b = xp.broadcast_to(b, batch + b.shape[-2:])
    out = xp.empty(full, dtype=dtype)
    if out.size and k:
        for idx in np.ndindex(*batch):
            _tiles.gemm2d(a[idx], b[idx], mods, mode, out[idx],
                   lambda tile, rows, cols, idx=idx: epilogue(tile, idx + (rows, cols)), _warn_lost)
    elif out.size:
        out[...] = a @ b  # k = 0: zeros, or NaN... nothing to emulate
        epilogue(out, ...)
    out = out.reshape(shape)
    return out[()] if out.ndim == 0 else out


def _engine(fn: str, A, B, C):
    """Where a GEMM runs: ``(xp, gemm, A, B)``, ``gemm(a, b, mods, mode, dtype, epilogue)`` the
    product of :func:`_batched_gemm`'s contract. Dask operands (or a dask ``C``) make the
    whole call lazy, through :mod:`modlin._front.ozaki_dask` (imported only then)."""
    if not any(is_dask(x) for x in (A, B, C)):
        return namespace(A, B, C), _batched_gemm, A, B
    import dask.array as da

    from modlin._front import ozaki_dask as _ozaki_dask

    A, B = _ozaki_dask.operands(A, B, fn)
    return da, lambda a, b, mods, mode, dtype, epilogue: _ozaki_dask.batched_gemm(a, b, mods, mode, dtype,
                                                                                  _warn_lost), A, B


def _default_spread(moduli, a, b=None) -> int:
    """:func:`spread_bits` of the operands when the default count is in force, else 0."""
    return spread_bits(a, b) if moduli is None else 0


def _moduli(kind: str, engine: str, moduli, algorithm: str, gpu: bool, k: int, a, b=None):
    """The moduli of a product, as a function to call when it is computed: the arguments are
    checked now (at the front door, before any operand is read), the operands' exponent
    spread (:func:`spread_bits`, a pass over each) read only when the default count needs it
    and the product runs (a lazy dask product reads its chunks then, not here)."""
    mods = _resolve(kind, engine, moduli, algorithm, gpu=gpu, k=k)
    if moduli is not None:
        return lambda: mods
    return lambda: _resolve(kind, engine, None, algorithm, gpu=gpu, k=k, spread=_default_spread(None, a, b))


def _on_gpu(x) -> bool:
    """Whether the operand's (or its chunks') array lives on a GPU."""
    return is_cupy(x._meta if is_dask(x) else x)


def dgemm(A, B, *, moduli=None, mode: str = "fast", engine: str = "auto", alpha=1.0, beta=0.0,
          C=None, trans_a=0, trans_b=0, c=None, overwrite_c=False) -> np.ndarray:
    """``alpha * A @ B + beta * C`` in float64, the product emulated on exact integer GEMMs.

    Ozaki scheme II: rows of ``A`` and columns of ``B`` are scaled by powers
    of two and rounded to integers; their product is computed exactly modulo
    each modulus and rebuilt by CRT, then rounded once to double. The error
    comes from rounding the inputs only, and falls as moduli are added.

    Parameters
    ----------
    A, B : array_like
        Real matrices with :func:`numpy.matmul`'s shape rules (stacks
        broadcast, 1-D operands promoted). Integer, boolean and other float
        dtypes are rounded to float64 first, as :mod:`scipy.linalg.blas`
        does (``numpy.asarray(A, dtype=numpy.float64)``: longdouble entries
        and integers beyond ``2**53`` lose their low bits there, where
        :func:`numpy.matmul` would keep longdouble); complex input is
        refused (use :func:`zgemm`). Or ``dask.array.Array`` s (one or both,
        or ``C``): the scales are computed at once by dask reductions, the
        product is a lazy dask array with the in-memory call's bits
        (:doc:`/guide/distributed`).
    moduli : int or sequence of int, optional
        How many moduli of the engine to use, or the moduli themselves
        (pairwise coprime, below ``2**26``; at most 256 for int8). The default
        is the fewest whose product reaches ``2**124`` (one bit more per
        doubling of ``k`` past 1024): 16 int8 moduli (256, 255, 253, ...) or
        6 fp64 ones (primes below ``2**21``) at ``k = 1024``; more where the
        operands span wide exponent ranges (:func:`spread_bits`, one pass
        over each operand), so that it is no less accurate than native
        double GEMMs on inputs like GEMMul8's tests (``phi`` = 0 to 6).
    mode : {"fast", "accurate"}
        How the scales are chosen. "fast" bounds ``sum_k |A'_ik||B'_kj|`` by
        the norms of row ``i`` and column ``j`` (Cauchy-Schwarz); "accurate"
        computes the bound with one extra GEMM of small integers, which keeps
        more bits where large entries of ``A`` and ``B`` do not meet.
    engine : {"auto", "int8", "fp64"}
        The integer GEMM: int8 residues with int32 sums (a GPU's tensor
        cores; emulated exactly on the CPU) or float64 words. "auto" is fp64
        on NumPy arrays.
    alpha, beta : float
        BLAS scalars. ``A @ B`` is not computed when ``alpha == 0`` and ``C``
        is not read when ``beta == 0``.
    C : array_like, optional
        Added as ``beta * C``; needed when ``beta != 0``. Never modified.
    trans_a, trans_b : {0, 1, 2, "N", "T", "C"}
        As in :func:`scipy.linalg.blas.dgemm`: multiply ``op(A) @ op(B)``
        with ``op(X) = X`` (0, the default), ``X.T`` (1) or its conjugate
        transpose (2, which is ``X.T`` for real matrices). Stacks are
        transposed in their last two axes; 1-D operands are not transposed.
    c : array_like, optional
        scipy.linalg.blas's name for ``C``: pass one of the two.
    overwrite_c : bool, optional
        Accepted as :mod:`scipy.linalg.blas` does, where it only *permits*
        reusing ``c``'s memory; modlin never modifies its inputs, so the
        result is always a new array and ``C`` is unchanged.

    Returns
    -------
    ndarray
        float64, of :func:`numpy.matmul`'s result shape.

    Raises
    ------
    TypeError
        Complex operands; galois ``FieldArray`` s and python-flint matrices
        (residues and exact integers: :func:`modlin.matmul` and
        :func:`modlin.intmul` multiply them); operands that are not arrays
        (``None``, strings, ragged lists, scipy.sparse matrices, masked
        arrays: the message names the operand); ``C`` and ``c`` both given.
    ValueError
        Mismatched shapes, an unknown ``trans_a`` / ``trans_b``, ``mode``,
        ``engine`` or ``moduli``, or ``beta != 0`` without ``C``.

    Warns
    -----
    AccuracyWarning
        When nonzero entries are too small beside the largest of their row
        (of ``A``) or column (of ``B``) for the moduli's range, so that the
        scaling rounds them to zero.

    Notes
    -----
    The product is ``fl(A'B' * 2**-(sa_i + sb_j))``, correctly rounded from
    the exact integer product, so its only error is the rounding of
    ``A * 2**sa`` and ``B * 2**sb`` to integers. Rows of ``A`` or columns of
    ``B`` holding Inf or NaN are left out of the emulation and their part of
    the result is computed by :func:`numpy.matmul`, so Inf and NaN
    propagate as in a native GEMM. Subnormal inputs and results are handled
    exactly (a result is rounded once, at its own precision); results beyond
    the float64 range are infinite.

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import ozaki
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> ozaki.dgemm(A, A)
    array([[ 7., 10.],
           [15., 22.]])
    >>> x = np.array([[1e16, 1.0, -1e16]]); y = np.array([[1.0], [1.0], [1.0]])
    >>> ozaki.dgemm(x, y), x @ y   # exact before its one rounding; numpy sums in order
    (array([[1.]]), array([[0.]]))
    >>> ozaki.dgemm(A, A, trans_a=1)  # scipy.linalg.blas.dgemm's names: A.T @ A
    array([[10., 14.],
           [14., 20.]])
    """
    (A, B), C = _operands("modlin.ozaki.dgemm", C, c, overwrite_c, A=A, B=B)
    ta, tb = trans_code(trans_a, "trans_a"), trans_code(trans_b, "trans_b")
    _check_mode(mode)
    xp, gemm, A, B = _engine("modlin.ozaki.dgemm", A, B, C)
    a, b = _op(_as_float(A, "A", False), ta), _op(_as_float(B, "B", False), tb)
    (_, k, _), full, shape = matmul_shapes(a.shape, b.shape)
    mods = _moduli("real", engine, moduli, "auto", _on_gpu(a), k, a, b)
    return _blas(lambda epilogue: gemm(a, b, mods(), mode, np.float64, epilogue), xp, shape, full,
                 np.float64, alpha, beta, C, False)


def zgemm(A, B, *, moduli=None, mode: str = "fast", algorithm: str = "auto", engine: str = "auto",
          alpha=1.0, beta=0.0, C=None, trans_a=0, trans_b=0, c=None, overwrite_c=False) -> np.ndarray:
    """``alpha * A @ B + beta * C`` in complex128, the product emulated on exact integer GEMMs.

    As :func:`dgemm`, with real and imaginary parts sharing each row's and
    column's scale, and each modulus' complex product computed with 2M (two
    real GEMMs: modulo ``q`` with ``s**2 = -1``, ``(A_r + s A_i)(B_r + s B_i)``
    and ``(A_r - s A_i)(B_r - s B_i)``), 3M or 4M. The algorithm changes the
    speed, not the result: on the same moduli all three give the same bits.

    Parameters
    ----------
    A, B : array_like
        Complex (or real, converted) matrices with :func:`numpy.matmul`'s
        shape rules, rounded to complex128 first (clongdouble too, as
        :mod:`scipy.linalg.blas` does); or dask arrays, as for :func:`dgemm`.
    moduli : int or sequence of int, optional
        A count of the engine's moduli or the moduli themselves. The default
        is the fewest whose product reaches ``2**124`` (one bit more per
        doubling of ``k`` past 1024): 17 int8 2M moduli (241, 233, 229, ...)
        or 6 fp64 primes ``1 (mod 4)`` below ``2**21`` at ``k = 1024``; more
        for operands spanning wide exponent ranges, as for :func:`dgemm`.
    mode : {"fast", "accurate"}
        As for :func:`dgemm`.
    algorithm : {"auto", "2m", "3m", "4m", "hybrid"}
        "2m" needs moduli with a square root of -1 (odd, every prime factor
        ``1 (mod 4)``): 22 int8 moduli have one. "hybrid" uses 2M on those
        and 3M on the rest. "auto" is 2M while 2M moduli suffice, hybrid
        beyond. "3m" and "4m" take the int8 moduli 256, 255, 253, ... by
        default.
    engine : {"auto", "int8", "fp64"}
        As for :func:`dgemm`.
    alpha, beta : complex
        BLAS scalars, as for :func:`dgemm`.
    C : array_like, optional
        Added as ``beta * C``. Never modified.
    trans_a, trans_b : {0, 1, 2, "N", "T", "C"}
        As in :func:`scipy.linalg.blas.zgemm`: ``op(X)`` is ``X`` (0),
        ``X.T`` (1) or the conjugate transpose ``X.conj().T`` (2).
    c : array_like, optional
        scipy.linalg.blas's name for ``C``: pass one of the two.
    overwrite_c : bool, optional
        Accepted as :mod:`scipy.linalg.blas` does, where it only *permits*
        reusing ``c``'s memory; modlin never modifies its inputs, so the
        result is always a new array and ``C`` is unchanged.

    Returns
    -------
    ndarray
        complex128, of :func:`numpy.matmul`'s result shape.

    Raises
    ------
    TypeError, ValueError
        As for :func:`dgemm` (complex operands are taken here).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import ozaki
    >>> A = np.array([[1 + 2j, 3 - 1j]])
    >>> ozaki.zgemm(A, A.T)
    array([[5.-2.j]])
    >>> B = np.array([[2j], [1.0]])
    >>> ozaki.zgemm(A, B, algorithm="3m", engine="int8"), A @ B
    (array([[-1.+1.j]]), array([[-1.+1.j]]))
    >>> ozaki.zgemm(A, A, trans_b=2)  # A @ A^H, the squared norm of the row
    array([[15.+0.j]])
    """
    (A, B), C = _operands("modlin.ozaki.zgemm", C, c, overwrite_c, A=A, B=B)
    ta, tb = trans_code(trans_a, "trans_a"), trans_code(trans_b, "trans_b")
    _check_mode(mode)
    xp, gemm, A, B = _engine("modlin.ozaki.zgemm", A, B, C)
    a, b = _op(_as_float(A, "A", True), ta), _op(_as_float(B, "B", True), tb)
    (_, k, _), full, shape = matmul_shapes(a.shape, b.shape)
    mods = _moduli("complex", engine, moduli, algorithm, _on_gpu(a), k, a, b)
    return _blas(lambda epilogue: gemm(a, b, mods(), mode, np.complex128, epilogue), xp, shape, full,
                 np.complex128, alpha, beta, C, True)


def _rank_k(A, kind, engine, moduli, algorithm, mode, complex_, trans: int):
    a = _op(_as_float(A, "A", complex_), trans)
    if a.ndim != 2:
        raise ValueError(f"A must be a matrix (2-D), got {a.ndim} dimensions")
    mods = _moduli(kind, engine, moduli, algorithm, is_cupy(a), a.shape[1], a)
    n, k = a.shape
    shape = (n, n)
    dtype = np.complex128 if complex_ else np.float64
    xp = namespace(a)

    def compute(epilogue):
        out = xp.empty(shape, dtype=dtype)
        if a.size == 0:
            out[...] = 0
            epilogue(out, ...)
        else:
            _tiles.herk2d(a, mods(), mode, out, lambda tile, rows, cols: epilogue(tile, (rows, cols)), _warn_lost)
        return out

    return shape, compute


def dsyrk(A, *, moduli=None, mode: str = "fast", engine: str = "auto", alpha=1.0, beta=0.0,
          C=None, trans=0, lower=None, c=None, overwrite_c=False) -> np.ndarray:
    """``alpha * A @ A.T + beta * C`` in float64, emulated with half of a GEMM's work.

    Rows of ``A`` are scaled alike on both sides, so the result is exactly
    symmetric. The halves of ``A``'s columns form a complex matrix
    ``Z = A_1 + i A_2`` with ``A A^T = Re(Z Z^H)``; modulo each 2M modulus that
    is one real GEMM of ``n x k/2`` by ``k/2 x n`` (the SYRK corollary of Caday, arXiv 2609.05419).
    Moduli without a square root of -1 take the plain ``A' A'^T``.

    Parameters
    ----------
    A : array_like
        A real ``n x k`` matrix.
    moduli, mode, engine, alpha, beta, C
        As for :func:`dgemm`; the default moduli are :func:`zgemm`'s (2M).
    trans : {0, 1, 2, "N", "T", "C"}
        As in :func:`scipy.linalg.blas.dsyrk`: 0 computes ``A @ A.T``
        (``n x n``), 1 (or 2) ``A.T @ A`` (``k x k``).
    lower : bool, optional
        The default (None) returns the full symmetric matrix, **unlike**
        :func:`scipy.linalg.blas.dsyrk`, whose default ``lower=0`` fills the
        upper triangle only. Given (``True``/1 or ``False``/0), only that
        triangle, diagonal included, is returned and the other one is zero:
        what scipy returns without ``c`` (scipy leaves ``c``'s entries
        there when ``c`` is given).
    c : array_like, optional
        scipy.linalg.blas's name for ``C``: pass one of the two.
    overwrite_c : bool, optional
        Accepted as :mod:`scipy.linalg.blas` does, where it only *permits*
        reusing ``c``'s memory; modlin never modifies its inputs, so the
        result is always a new array and ``C`` is unchanged.

    Returns
    -------
    ndarray
        The symmetric float64 result (both triangles, or the one ``lower``
        names).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import ozaki
    >>> A = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    >>> ozaki.dsyrk(A)
    array([[14.  , 10.5 ],
           [10.5 , 17.25]])
    >>> ozaki.dsyrk(A, lower=True)  # scipy.linalg.blas.dsyrk(1.0, A, lower=1)
    array([[14.  ,  0.  ],
           [10.5 , 17.25]])
    >>> ozaki.dsyrk(A, trans=1)  # A.T @ A
    array([[ 1.25,  1.5 ,  5.  ],
           [ 1.5 ,  5.  ,  2.  ],
           [ 5.  ,  2.  , 25.  ]])
    """
    (A,), C = _operands("modlin.ozaki.dsyrk", C, c, overwrite_c, A=A)
    t = trans_code(trans)
    _check_mode(mode)
    xp = namespace(A, C)
    shape, compute = _rank_k(A, "syrk", engine, moduli, "auto", mode, False, t)
    return _triangle(_blas(compute, xp, shape, shape, np.float64, alpha, beta, C, False), lower)


def zherk(A, *, moduli=None, mode: str = "fast", algorithm: str = "auto", engine: str = "auto",
          alpha=1.0, beta=0.0, C=None, trans=0, lower=None, c=None, overwrite_c=False) -> np.ndarray:
    """``alpha * A @ A^H + beta * C`` in complex128, emulated with one real GEMM per 2M modulus.

    Modulo ``q`` with ``s**2 = -1``, ``X = (A_r + s A_i)(A_r - s A_i)^T`` is
    ``C_r + s C_i``; since ``C_r`` is symmetric and ``C_i`` antisymmetric,
    ``C_r = (X + X^T)/2`` and ``C_i = (X - X^T)/(2s)`` (the HERK corollary
    of Caday, arXiv 2609.05419). The result is exactly Hermitian, with a real diagonal.

    Parameters
    ----------
    A : array_like
        A complex ``n x k`` matrix.
    moduli, mode, algorithm, engine
        As for :func:`zgemm` (3M/4M moduli take three real GEMMs).
    alpha, beta : float
        Real BLAS scalars (complex ones would break the symmetry).
    C : array_like, optional
        Added as ``beta * C``. Never modified.
    trans : {0, 2, "N", "C"}
        As in :func:`scipy.linalg.blas.zherk`: 0 computes ``A @ A^H``, 2
        ``A^H @ A``. 1 (``A.T @ A``, not Hermitian) is refused.
    lower : bool, optional
        As for :func:`dsyrk`: None (the default, unlike scipy's ``lower=0``)
        returns the full Hermitian matrix; ``True`` / ``False`` only the
        lower / upper triangle, the other one zero.
    c : array_like, optional
        scipy.linalg.blas's name for ``C``: pass one of the two.
    overwrite_c : bool, optional
        Accepted as :mod:`scipy.linalg.blas` does, where it only *permits*
        reusing ``c``'s memory; modlin never modifies its inputs, so the
        result is always a new array and ``C`` is unchanged.

    Returns
    -------
    ndarray
        The Hermitian complex128 result (both triangles, or the one
        ``lower`` names).

    Examples
    --------
    >>> import numpy as np
    >>> from modlin import ozaki
    >>> A = np.array([[1 + 1j, 2.0], [0.0, 1j]])
    >>> ozaki.zherk(A)
    array([[6.+0.j, 0.-2.j],
           [0.+2.j, 1.+0.j]])
    >>> ozaki.zherk(A, trans=2, lower=False)  # the upper triangle of A^H @ A
    array([[2.+0.j, 2.-2.j],
           [0.+0.j, 5.+0.j]])
    """
    (A,), C = _operands("modlin.ozaki.zherk", C, c, overwrite_c, A=A)
    t = trans_code(trans)
    if t == 1:
        raise ValueError("zherk computes A @ A^H (trans=0 or 'N') or A^H @ A (trans=2 or 'C'); "
                         "trans=1 would be A^T @ A, which is not Hermitian")
    _check_mode(mode)
    xp = namespace(A, C)
    shape, compute = _rank_k(A, "complex", engine, moduli, algorithm, mode, True, t)
    return _triangle(_blas(compute, xp, shape, shape, np.complex128, alpha, beta, C, False), lower)
