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

import sys

import numpy as np

from modlin._algorithms import gaussian as _gaussian
from modlin._algorithms.tiles import as_matrix, matmul_shapes
from modlin._arith.integers import float_integers, integers, max_abs
from modlin._arith.moduli import check_modulus, is_twom_modulus, sqrt_minus_one, twom_moduli, why_not_twom
from modlin._engines.backend import cpu_only, is_dask, namespace
from modlin._front.flint import FlintType
from modlin._front.inputs import integer_operands, unwrap_fields
from modlin._planning.plan import MAX_MODULUS

__all__ = ["twom_moduli", "is_twom_modulus", "sqrt_minus_one", "matmul", "intmul",
           "herk", "syrk", "her2k", "syr2k"]


ALGORITHMS = ("auto", "2m", "3m", "4m")


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


def _choose(algorithm: str, m: int) -> str:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if m >= MAX_MODULUS:
        # the product is exact over Z[i] modulo primes 1 (mod 4) of a residue number system
        # (ExactTile.modular), so the algorithm is that of each of those primes: 2M applies to
        # every m, and m itself is never factored (a 200-bit composite need not factor)
        return "2m" if algorithm == "auto" else algorithm
    if algorithm == "auto":
        return "2m" if m > 2 and why_not_twom(m) is None else "3m"
    if algorithm == "2m":
        sqrt_minus_one(m)  # raises, naming the factor, when m has no square root of -1
    return algorithm


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
            # the RNS path's residues, 2M per prime and CRT are host code (ExactTile); a host round trip
            # is the caller's choice to make
            raise ValueError(f"on the GPU, gaussian products take moduli below 2**52, got a {m.bit_length()}-bit "
                             "m; pass NumPy arrays (cupy.asnumpy) for larger moduli")
        return _gaussian.tiled_matmul(_gpu_parts(A, "A"), _gpu_parts(B, "B"), m, alg)
    if m >= MAX_MODULUS:
        return _gaussian.rns_matmul(_parts(A, "A"), _parts(B, "B"), m, alg)
    return _gaussian.tiled_matmul(_parts(A, "A"), _parts(B, "B"), m, alg)


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
    return _gaussian.rank_k([(_parts(A, "A"),) * 2], m, _choose(algorithm, m), conj=True)


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
    return _gaussian.rank_k([(a, b), (b, a)], m, _choose(algorithm, m), conj=True)


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
    return _gaussian.rank_k([(a, a)], m, alg, conj=False)


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
    return _gaussian.rank_k([(a, b), (b, a)], m, alg, conj=False)


def _real(X) -> bool:
    """A plain real integer matrix (syrk and syr2k then return one array)."""
    return not isinstance(X, tuple) and np.asarray(X).dtype.kind in "iubfO"


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
        tile = _gaussian.ExactTile(*_gaussian.intmul_moduli(bound, k, engine), (mm, k, n), engine, as_object)
        tile.pieces = max(4, max(amax, bmax).bit_length() // 16 + 1)  # of the largest entry, as Pieces16 cuts it
        _gaussian.run_exact(tile, (mm, k, n), [as_matrix(x, 0) for x in (ar, ai)], [as_matrix(x, 1) for x in (br, bi)],
                   out, f"modlin.gaussian.intmul ({len(tile.tiles)} moduli)")
    return _typed(ftype, tuple(x.reshape(shape) for x in out), _ndim(A))
