"""``modlin.intmul``: exact products of integer matrices."""

from __future__ import annotations

import math

import numpy as np

from . import _contract, _rns
from ._backend import cpu_only, is_dask
from ._convert import integer_operands, integers, max_abs
from ._engines import ENGINES
from ._limits import current as current_limits
from ._plan import _gemm_cost
from ._tiles import choose, run, stack_items
from .typing import ArrayLike

__all__ = ["intmul", "max_abs", "single_gemm_exact"]


def single_gemm_exact(a, b, k: int) -> bool:
    """Whether one float64 GEMM computes ``a @ b`` exactly: fixed-width operands (arrays,
    not the pieces of object arrays) whose partial sums stay within ``2**53`` (the
    contract with ``c_max = 0``)."""
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype != object and b.dtype != object
            and _contract.is_exact(k, max_abs(a), max_abs(b), 0, ENGINES["fp64"].L))


def _float_gemm(a: np.ndarray, b: np.ndarray, full: tuple[int, ...]) -> np.ndarray:
    """``a @ b`` (int64) by float64 GEMMs when :func:`single_gemm_exact` holds, tile by tile
    within the memory budget: each tile converts its panels to float64 and k-panels add in
    float64, exactly, since every partial sum of the product is within ``2**53`` too."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    c = np.empty(full, dtype=np.int64)
    if c.size == 0:
        return c

    def tiling_of(batch):
        # the float64 panels, the tile's product and, with k-panels, the running sum
        return choose((m, k, n), lambda mt, kt, nt: 8 * batch * (mt * kt + kt * nt + 2 * mt * nt),
                      current_limits().memory, lambda mt, kt, nt: batch * _gemm_cost(mt, kt, nt))

    tiling, items, _ = stack_items(full[:-2], tiling_of, a, b)
    for idx, x, y in items:
        dst = c[idx]

        def product(rows, inner, cols):
            return ENGINES["fp64"].gemm(x[..., rows, inner].astype(np.float64), y[..., inner, cols].astype(np.float64))

        def finish(rows, cols, acc):
            dst[..., rows, cols] = acc

        run(tiling, product, add=lambda acc, part: np.add(acc, part, out=acc), finish=finish)
    return c


def _operand(x, name: str, side: int):
    """An intmul operand as ``(matrix, what the RNS reads, largest |entry|)``: fixed-width
    arrays as they are, object arrays also as the 16-bit pieces the RNS reads (one
    conversion pass, no Python arithmetic on the entries), which give the bound."""
    from ._matmul import _as_matrix

    x = np.asarray(x)
    if x.dtype == object and x.size:
        x = _as_matrix(x, side)
        h = _rns._Halves(x)
        return x, h, h.max_abs()
    x = _as_matrix(integers(x, name), side)
    return x, x, max_abs(x)


def intmul(A: ArrayLike, B: ArrayLike, *, engine: str | None = None, moduli=None) -> np.ndarray:
    """Exact matrix product of integer matrices of any entry size.

    Follows :func:`numpy.matmul` semantics (1-D operands, stacked and
    broadcast batches). The product is bounded by ``k * max|A| * max|B|``; when
    that fits a single float64 GEMM (``<= 2**53``) one GEMM computes it,
    otherwise it is computed modulo enough pairwise-coprime moduli and rebuilt
    by CRT (a residue number system).

    Parameters
    ----------
    A, B : array_like
        Integer matrices: any NumPy integer or boolean dtype, object arrays
        of Python ints (or python-flint ``fmpz``) of any size (negative
        entries included), or python-flint ``fmpz_mat`` s. Residues modulo
        ``p`` are refused: galois ``FieldArray`` s, ``nmod_mat``,
        ``fmpz_mod_mat`` (use :func:`modlin.matmul` for their product). Or
        ``dask.array.Array`` s (one or both): the product is then lazy
        (:doc:`/guide/distributed`).
    engine : {"fp64", "fp32", "int8"}, optional
        Engine of the products modulo each modulus (default: the cheapest
        automatic one; ``"int8"`` only when asked).
    moduli : sequence of int, optional
        Pairwise-coprime moduli below ``2**26`` to use instead of the planner's;
        their product must exceed ``2 * bound + 1``.

    Returns
    -------
    ndarray or fmpz_mat
        The exact product: int64 when the bound ``k * max|A| * max|B|`` is
        below ``2**63``, otherwise an object array of Python ints; an
        ``fmpz_mat`` when an operand is one; a lazy dask array of that dtype
        for dask operands (the bound is then read from their dtypes, or from
        their entries by a dask reduction run first).

    Raises
    ------
    TypeError
        Float, complex or non-numeric operands, object arrays holding
        something other than integers, residues (``FieldArray`` s,
        ``nmod_mat``, ``fmpz_mod_mat``, ``nmod`` entries), or operands that
        are not matrices (``None``, strings, ragged lists, scipy.sparse
        matrices, masked arrays: the message names the operand).
    ValueError
        Mismatched shapes; moduli that are not pairwise coprime or too small.

    Examples
    --------
    >>> import numpy as np, modlin
    >>> A = np.array([[2**40, -3], [5, 7]])
    >>> modlin.intmul(A, A)
    array([[1208925819614629174706161, -3298534883349],
           [5497558138915, 34]], dtype=object)
    >>> import flint
    >>> modlin.intmul(flint.fmpz_mat([[2**64, 1]]), flint.fmpz_mat([[2**64], [-1]]))
    [340282366920938463463374607431768211455]
    """
    if is_dask(A) or is_dask(B):
        from ._dask import intmul as dask_intmul

        return dask_intmul(A, B, engine, moduli, eager=intmul)
    cpu_only("modlin.intmul", A, B)
    from ._matmul import _matmul_shapes, _product
    from ._rnsplan import as_moduli, rns_plan

    ftype, (A, B) = integer_operands(A, B, names=("A", "B"), fn="modlin.intmul")
    (m, k, n), full, shape = _matmul_shapes(np.shape(A), np.shape(B))
    if ftype is not None:
        ftype.check_product(shape)
    (a, ha, amax), (b, hb, bmax) = _operand(A, "A", 0), _operand(B, "B", 1)
    bound = k * amax * bmax
    as_object = bound >= 2**63
    dtype = object if as_object else np.int64
    if moduli is None and engine is None and single_gemm_exact(a, b, k):
        c = _float_gemm(a, b, full)
    elif not np.prod(full):
        c = np.zeros(full, dtype=dtype)
    else:
        pl = rns_plan(None, bound, (m, k, n), engine=engine,
                      moduli=None if moduli is None else as_moduli(moduli))
        try:
            whole = pl.tiling((m, k, n), batch=math.prod(full[:-2])).count == 1
        except ValueError:  # not even the whole stack's smallest tiles fit: the driver decides
            whole = False
        if whole:
            c = _rns.multiply(pl, ha, hb, as_object=as_object)  # the pieces made for the bound
        else:  # tile by tile within the memory budget, reading blocks of the pieces made for the bound
            held = tuple(h if isinstance(h, _rns._Halves) and len(full) == 2 else None for h in (ha, hb))
            del ha, hb  # a stack's tiles convert their own blocks
            c = np.empty(full, dtype=dtype)
            _product(pl, a, b, None, c, as_object=as_object, held=held)
    c = c.reshape(shape)
    if ftype is not None:
        return ftype.product(c, np.ndim(A))
    return c[()] if c.ndim == 0 else c
