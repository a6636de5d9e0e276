"""The front doors of :func:`modlin.matmul` and :func:`modlin.intmul`: check the operands,
plan, and send the product to the dask, GPU or in-memory path."""

from __future__ import annotations

import numpy as np

from modlin._algorithms.products import chunk_residues, gpu_matmul, integer_product, tile_product
from modlin._algorithms.tiles import as_matrix, matmul_shapes
from modlin._arith.moduli import check_modulus
from modlin._engines.backend import cpu_only, is_dask, namespace
from modlin._front.flint import FlintType
from modlin._front.inputs import check_operand, integer_operands, unwrap_fields
from modlin._planning.plan import Plan
from modlin._planning.planner import plan as make_plan
from modlin._planning.rnsplan import RNSPlan
from modlin.typing import ArrayLike


def matmul(A: ArrayLike, B: ArrayLike, p: int | None = None, *, out: np.ndarray | None = None,
           plan: Plan | None = None) -> np.ndarray:
    """Matrix product modulo ``p``, exactly.

    Follows :func:`numpy.matmul` semantics: 2-D operands multiply as matrices,
    stacks of matrices (``...`` dimensions) broadcast, and a 1-D operand is
    promoted to a row (``A``) or column (``B``) whose added axis is removed from
    the result.

    Parameters
    ----------
    A, B : array_like
        Integer matrices: any NumPy integer or boolean dtype (negative and
        unreduced entries included, ``uint64`` up to ``2**64 - 1``), float
        arrays holding integers, object arrays of Python ints (or of
        python-flint ``fmpz`` / ``nmod`` / ``fmpz_mod`` scalars), galois
        ``FieldArray`` s of one prime field, or python-flint ``nmod_mat``,
        ``fmpz_mod_mat`` and ``fmpz_mat`` matrices. A plain operand beside a
        ``FieldArray`` or flint matrix is read as integers. Or CuPy integer
        arrays (both operands): the product then runs on their GPU, planned
        for its engines (``modlin.plan(..., device="cuda")``), for ``p < 2**63``.
        Or ``dask.array.Array`` s (one or both; of NumPy, CuPy or FieldArray
        chunks): the product is then lazy, chunk pair by chunk pair
        (:doc:`/guide/distributed`).
    p : int, optional
        The modulus, any integer ``p >= 2``, prime or composite: an ``int``, a
        NumPy integer or a python-flint ``fmpz`` (anything :func:`operator.index`
        takes). May be omitted when an operand fixes it (a ``FieldArray``, an
        ``nmod_mat`` or ``fmpz_mod_mat``, ``nmod`` entries); if given, it must
        equal that modulus.
    out : ndarray, optional
        Where to write the result: an array of the result's dtype and shape
        (a ``FieldArray`` of the operands' field when they are FieldArrays).
        Not with python-flint operands, whose result is always a new matrix.
    plan : Plan or RNSPlan, optional
        A plan from :func:`modlin.plan` to run instead of choosing one. It is
        checked first: against the exactness contract (a :class:`Plan`), or for
        moduli that cover this product's bound (an :class:`RNSPlan`).

    Returns
    -------
    ndarray, FieldArray or python-flint matrix
        ``A @ B mod p`` with entries in ``[0, p)``: int64 for ``p <= 2**63``,
        an object array of Python ints above, or a ``FieldArray`` of the
        operands' field. python-flint operands give the same flint type: an
        ``nmod_mat`` or ``fmpz_mod_mat`` with the operands' modulus, or an
        ``fmpz_mat`` of the residues when only ``fmpz_mat`` s are given (a
        1-D NumPy operand beside them makes a ``1 x n`` or ``n x 1`` matrix,
        two 1-D ones the scalar ``nmod`` / ``fmpz_mod``). CuPy operands give
        a CuPy result on their device; dask operands a lazy dask array of the
        same dtype, chunked as the rows of ``A`` and the columns of ``B``
        (``out`` is then refused: store the result with :func:`dask.array.store`).

    Raises
    ------
    ValueError
        Mismatched shapes, ``p < 2``, NaN/Inf or non-integral floats, a plan
        for another modulus, one that breaks the contract or whose moduli are
        too few for this ``k``, an extension field, operands from different
        fields or of different moduli, or python-flint operands whose
        product would be a stack of matrices.
    TypeError
        Operands that are not matrices (``None``, strings, ``dict`` s, ragged
        nested lists, scipy.sparse matrices, NumPy masked arrays: the
        message names the operand), non-numeric or complex operands, a
        non-integer modulus, a bad ``out``, NumPy and CuPy operands mixed,
        FieldArrays and python-flint matrices mixed, or ``nmod_mat`` and
        ``fmpz_mod_mat`` mixed.

    Notes
    -----
    The product is computed with floating-point GEMMs on small integer words
    (arXiv 2601.07508): ``A`` and ``B`` are reduced into the balanced range
    ``[-p//2, p//2]``, split into words when ``p`` is large, and multiplied in
    blocks small enough that no partial sum exceeds ``2**53`` (``2**24`` for
    the fp32 engine). Beyond ``2**52`` (or where the cost model prefers it),
    the integer product of the balanced operands is computed modulo several
    small primes and rebuilt by CRT (a residue number system). See
    :func:`modlin.plan`, :meth:`Plan.explain` and :meth:`RNSPlan.explain`.

    Examples
    --------
    >>> import numpy as np, modlin
    >>> A = np.array([[1, 2], [3, 4]])
    >>> modlin.matmul(A, A, 5)
    array([[2, 0],
           [0, 2]])
    >>> p = 2**50 - 27  # a 50-bit prime: (p-1)**2 needs 100 bits, the result is exact
    >>> modlin.matmul([[p - 1, 1]], [[p - 1], [2]], p)
    array([[3]])

    python-flint matrices come back as the same type, with their modulus:

    >>> import flint
    >>> F = flint.nmod_mat([[1, 2], [3, 4]], 5)
    >>> C = modlin.matmul(F, F)
    >>> C, type(C).__name__, C.modulus()
    ([2, 0]
    [0, 2], 'nmod_mat', 5)
    """
    if is_dask(A) or is_dask(B):
        from modlin._front.dask import matmul as dask_matmul

        return dask_matmul(A, B, p, out, plan, eager=matmul, check_plan=_check_plan, residues=chunk_residues)
    # before the device is decided, so that None or a dict beside a CuPy array is named as such
    A, B = check_operand(A, "A", "modlin.matmul"), check_operand(B, "B", "modlin.matmul")
    if namespace(A, B, out) is not np:
        return gpu_matmul(A, B, p, out, plan)
    p, field, (A, B) = unwrap_fields(p, A, B, names=("A", "B"), fn="modlin.matmul")
    p = check_modulus(p)
    (m, k, n), full, shape = matmul_shapes(np.shape(A), np.shape(B))
    if isinstance(field, FlintType):
        if out is not None:
            raise TypeError("out= takes NumPy arrays and FieldArrays; with python-flint operands "
                            "the result is a new matrix: omit out")
        field.check_product(shape)

    if plan is None:
        plan = make_plan(p, m, k, n)
    else:
        _check_plan(plan, p, k)

    dtype = np.int64 if p <= 2**63 else object
    direct = out is not None and field is None and _usable_out(out, shape, dtype)
    if out is not None and not direct:
        _check_out(out, shape, field, dtype)
    result = out.reshape(full) if direct else np.empty(full, dtype=dtype)
    if result.size:
        tile_product(plan, as_matrix(np.asarray(A), 0), as_matrix(np.asarray(B), 1), p, result)
    result = out if direct else result
    if direct:
        return out
    result = result.reshape(shape)
    if out is not None:
        out.view(np.ndarray)[...] = result
        return out
    if field is not None:
        return field.product(result, np.ndim(A)) if isinstance(field, FlintType) else field(result)
    return result[()] if result.ndim == 0 else result


def _check_plan(plan, p: int, k: int) -> None:
    """Refuse a ``plan=`` argument that cannot compute a product mod ``p`` with this ``k``."""
    if not isinstance(plan, (Plan, RNSPlan)):
        raise TypeError(f"plan must be a modlin.Plan or modlin.RNSPlan, got {type(plan).__name__}")
    if plan.p != p:
        raise ValueError(f"plan was made for p = {plan.p}, not p = {p}; make one with modlin.plan")
    plan.check()
    if isinstance(plan, RNSPlan) and plan.bound < k * (p // 2) ** 2:
        raise ValueError(
            f"the RNS plan covers products with k <= {plan.bound // max((p // 2) ** 2, 1)}, "
            f"not k = {k}; make one for this shape with modlin.plan"
        )


def _usable_out(out, shape, dtype) -> bool:
    return (
        type(out) is np.ndarray
        and out.dtype == dtype
        and out.shape == shape
        and out.flags.c_contiguous
        and out.flags.writeable
    )


def _check_out(out, shape, field, dtype) -> None:
    if field is not None:
        if type(out) is not field:
            raise TypeError(f"out must be a {field.name} FieldArray when the operands are")
    elif not isinstance(out, np.ndarray) or out.dtype != dtype:
        raise TypeError(f"out must be a numpy.ndarray of dtype {np.dtype(dtype)} (the result's dtype for this p)")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, but the result has shape {shape}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")


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
        from modlin._front.dask import intmul as dask_intmul

        return dask_intmul(A, B, engine, moduli, eager=intmul)
    cpu_only("modlin.intmul", A, B)
    ftype, (A, B) = integer_operands(A, B, names=("A", "B"), fn="modlin.intmul")
    if ftype is not None:
        ftype.check_product(matmul_shapes(np.shape(A), np.shape(B))[2])
    c = integer_product(A, B, engine=engine, moduli=moduli)
    if ftype is not None:
        return ftype.product(c, np.ndim(A))
    return c[()] if c.ndim == 0 else c
