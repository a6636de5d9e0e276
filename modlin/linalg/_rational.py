"""The front of :mod:`modlin.linalg` over the integers and the rationals: which calls work
there (no modulus given, and no operand that carries one), the operands as integers, and
the answers in the form the operands came in."""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from modlin._arith.integers import float_integers, integers
from modlin._engines.backend import cpu_only
from modlin._front.flint import MODULAR, kind_of, scalar_entries, to_array
from modlin._front.inputs import check_operand, field_of
from modlin.linalg._charpoly_z import charpoly_integer, charpoly_integer_cost
from modlin.linalg._inputs import LinAlgError, matrix, square
from modlin.linalg._integers import (
    det_cost,
    det_integer,
    nullspace_cost,
    nullspace_integer,
    rank_cost,
    rank_integer,
    solve_cost,
    solve_integer,
)
from modlin.linalg._steps import tracked

__all__ = ["RationalArray", "over_rationals", "exact_operand", "Exact", "narrowed"]


class RationalArray(NamedTuple):
    """An exact rational matrix (or stack of them): ``numerator / denominator``.

    What :func:`modlin.linalg.solve` and :func:`modlin.linalg.inv` return over the
    rationals for NumPy input. Unpacks as a pair, ``Y, d = linalg.solve(A, B)``.

    Attributes
    ----------
    numerator : numpy.ndarray
        Integers: int64 when every entry fits, otherwise an object array of Python ints.
    denominator : int or numpy.ndarray
        The least common denominator, a positive Python int (for a stack, an object
        array of them over the leading shape, broadcasting against ``numerator``).

    Examples
    --------
    >>> from modlin import linalg
    >>> X = linalg.solve([[2, 1], [1, 3]], [1, 0])
    >>> X
    RationalArray(numerator=array([ 3, -1]), denominator=5)
    >>> X.fractions()
    array([Fraction(3, 5), Fraction(-1, 5)], dtype=object)
    >>> X.to_float()
    array([ 0.6, -0.2])
    """

    numerator: np.ndarray
    denominator: int | np.ndarray

    def _denominators(self) -> np.ndarray:
        d = np.asarray(self.denominator, dtype=object)
        core = self.numerator.ndim - d.ndim
        return d.reshape(d.shape + (1,) * core)

    def fractions(self) -> np.ndarray:
        """The entries as ``fractions.Fraction`` objects, in lowest terms."""
        out = np.empty(self.numerator.shape, dtype=object)
        out[...] = np.frompyfunc(Fraction, 2, 1)(self.numerator.astype(object), self._denominators())
        return out

    def to_float(self) -> np.ndarray:
        """The entries as float64, each correctly rounded (Python's ``int / int``)."""
        q = np.frompyfunc(lambda a, b: a / b, 2, 1)(self.numerator.astype(object), self._denominators())
        return np.asarray(q, dtype=np.float64)


def _modular(x) -> bool:
    if field_of(x) is not None or kind_of(x) in MODULAR:
        return True
    return isinstance(x, np.ndarray) and x.dtype == object and bool(
        (found := scalar_entries(x)) is not None and found[1])


def over_rationals(p, *arrays) -> bool:
    """Whether a :mod:`modlin.linalg` call works over Z or Q: no modulus given, and no
    operand that carries one (a galois ``FieldArray``, an ``nmod_mat`` or ``fmpz_mod_mat``,
    python-flint ``nmod`` / ``fmpz_mod`` entries)."""
    return p is None and not any(_modular(x) for x in arrays if x is not None)


class Exact(NamedTuple):
    """An operand over Q: integer numerators, and the denominator of each entry (None when
    every entry is an integer). ``kind`` says what came in: ``"numpy"``, ``"fmpz_mat"``,
    ``"fmpq_mat"`` or ``"fraction"`` (object arrays of ``Fraction`` or ``fmpq``)."""

    num: np.ndarray
    den: np.ndarray | None
    kind: str


def exact_operand(x, name: str, fn: str, form: str | None, stack: bool = True) -> Exact:
    """``x`` as an :class:`Exact`, after the front door's checks; the shape checked as
    ``form`` (``"matrix"``, ``"square"`` or None) before any entry is converted."""
    cpu_only(f"modlin.linalg.{fn}", x)
    if not _is_fmpq_mat(x):
        x = check_operand(x, name, f"modlin.linalg.{fn}", of="integers or rationals")
    kind = kind_of(x)
    if kind == "fmpz_mat":
        a, _ = to_array(x, kind)
        out = Exact(a, None, "fmpz_mat")
    elif _is_fmpq_mat(x):
        num, den = x.numer_denom()
        a, _ = to_array(num, "fmpz_mat")
        out = Exact(a, np.full(a.shape, int(den), dtype=object), "fmpq_mat")
    else:
        a = np.asarray(x)
        if form is not None:
            (square if form == "square" else matrix)(a.shape, fn, name, stack=stack)
        if a.dtype.kind == "f":
            if a.size and not np.isfinite(a).all() or not np.array_equal(a, np.trunc(a)):
                raise TypeError(f"{name} holds floats that are not integers: modlin.linalg.{fn} works "
                                "exactly over the integers and rationals; pass integers, or an object "
                                "array of fractions.Fraction for rational entries")
            out = Exact(float_integers(a, name), None, "numpy")
        elif a.dtype == object and a.size and any(isinstance(e, Fraction) or _is_fmpq(e) for e in a.flat):
            num = np.empty(a.shape, dtype=object)
            den = np.empty(a.shape, dtype=object)
            for idx, e in np.ndenumerate(a):
                q = _fraction(e, name, fn)
                num[idx], den[idx] = q.numerator, q.denominator
            out = Exact(num, den, "fraction")
        elif a.dtype == object and a.size and (found := scalar_entries(a)) is not None:
            out = Exact(integers(found[0], name), None, "numpy")
        else:
            if a.dtype.kind not in "iubO":
                raise TypeError(f"{name} has dtype {a.dtype}: modlin.linalg.{fn} works over the integers "
                                "and rationals; pass integers, or fractions.Fraction objects")
            out = Exact(integers(a, name), None, "numpy")
    out = out._replace(num=narrowed(out.num))
    if form is not None:
        (square if form == "square" else matrix)(out.num.shape, fn, name, stack=stack)
    return out


def narrowed(x: np.ndarray) -> np.ndarray:
    """Integers as the algorithms take them and the results give them: int64 when every entry is above ``-2**63``
    (negation stays in range) and below ``2**63``; Python ints otherwise (uint64 beyond
    ``2**63``, int64's least value, object arrays of large ints)."""
    if x.dtype == np.int64 and (x.size == 0 or x.min() > -(2**63)):
        return x
    if x.size == 0:
        return x.astype(np.int64)
    lo, hi = int(x.min()), int(x.max())
    if -(2**63) < lo and hi < 2**63:
        return x.astype(np.int64)
    out = np.empty(x.shape, dtype=object)
    out[...] = np.frompyfunc(int, 1, 1)(x.astype(object))
    return out


def _fraction(e, name: str, fn: str) -> Fraction:
    if isinstance(e, Fraction):
        return e
    if _is_fmpq(e):
        return Fraction(int(e.p), int(e.q))
    if isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_)) or kind_of(e) is None and hasattr(e, "__index__"):
        return Fraction(int(e))
    raise TypeError(f"{name} holds {type(e).__name__} entries: modlin.linalg.{fn} works over the "
                    "integers and rationals (ints, fractions.Fraction, python-flint fmpz / fmpq)")


def _is_fmpq_mat(x) -> bool:
    flint = sys.modules.get("flint")
    return flint is not None and isinstance(x, flint.fmpq_mat)


def _is_fmpq(e) -> bool:
    flint = sys.modules.get("flint")
    return flint is not None and isinstance(e, flint.fmpq)


def row_scaled(*ops: Exact) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The operands (matrices of one shape of rows, side by side) with each row multiplied by
    the least common multiple of the denominators in that row across all of them: integer
    matrices with the same row space relations. Also those multipliers (None when all are 1)."""
    if all(o.den is None for o in ops):
        return [o.num for o in ops], None
    lead = ops[0].num.shape[:-1]
    scale = np.ones(lead, dtype=object)
    for o in ops:
        if o.den is not None:
            for idx in np.ndindex(lead):
                scale[idx] = math.lcm(scale[idx], *o.den[idx].tolist())
    out = []
    for o in ops:
        num = o.num.astype(object) * scale[..., None]
        if o.den is not None:
            num = num // o.den
        out.append(narrowed(num))
    return out, scale


# ---- the operations over Z and Q, matrix by matrix over stacks ------------------------------

def _each(x: np.ndarray, core: int, f, out_dtype=object) -> np.ndarray:
    """``f`` on each matrix of a stack (the last ``core`` dimensions), results in an array of
    the leading shape (objects)."""
    lead = x.shape[:x.ndim - core]
    out = np.empty(lead, dtype=out_dtype)
    for idx in np.ndindex(lead):
        out[idx] = f(x[idx])
    return out


def det(A, seed: int | None = None):
    """``det(A)`` over Z or Q: a Python int (``fmpz`` for an ``fmpz_mat``; ``Fraction`` and
    ``fmpq`` for rational input); for a stack, an object array of them."""
    op = exact_operand(A, "A", "det", "square")
    (num,), scale = row_scaled(op)
    first = num[(0,) * (num.ndim - 2)] if num.size else num.reshape(num.shape[-2:])
    with tracked("det", None, int(np.prod(num.shape[:-2])), lambda: det_cost(first)):
        d = _each(num, 2, lambda a: det_integer(np.ascontiguousarray(a), seed))
    if scale is not None:
        prod = _each(scale, 1, lambda s: math.prod(s.tolist()))
        d = np.asarray(np.frompyfunc(Fraction, 2, 1)(d, prod), dtype=object)
    d = d[()] if d.ndim == 0 else d
    return _scalar_as(d, op.kind)


def _scalar_as(d, kind: str):
    flint = sys.modules.get("flint")
    if isinstance(d, np.ndarray):
        return d
    if kind == "fmpz_mat":
        return flint.fmpz(d)
    if kind == "fmpq_mat":
        d = Fraction(d)
        return flint.fmpq(d.numerator, d.denominator)
    if kind == "fraction":
        return Fraction(d)
    return d


def solve(A, B, seed: int | None = None, fn: str = "solve"):
    """``A^-1 B`` over Q for a nonsingular ``A`` (``fn``: the public function, for messages)."""
    opa = exact_operand(A, "A", "solve", "square")
    opb = exact_operand(B, "B", "solve", None)
    b = opb.num
    n = opa.num.shape[-1]
    vector = b.ndim == 1  # as numpy >= 2: only a 1-D B is a vector
    if b.ndim == 0 or b.shape[-1 if vector else -2] != n:
        raise LinAlgError(f"solve: A has shape {opa.num.shape}, so B must have {n} rows (shape ({n},) or "
                          f"(..., {n}, k)); got B of shape {b.shape}")
    bden = opb.den
    if vector:
        b = b[..., None]
        bden = None if bden is None else bden[..., None]
    try:
        lead = np.broadcast_shapes(opa.num.shape[:-2], b.shape[:-2])
    except ValueError:
        raise LinAlgError(f"{fn}: the stacks of A {opa.num.shape} and B {b.shape} do not broadcast "
                          f"(leading shapes {opa.num.shape[:-2]} and {b.shape[:-2]})") from None
    a_num = np.broadcast_to(opa.num, lead + opa.num.shape[-2:])
    a_den = None if opa.den is None else np.broadcast_to(opa.den, a_num.shape)
    b_num = np.broadcast_to(b, lead + b.shape[-2:])
    b_den = None if bden is None else np.broadcast_to(bden, b_num.shape)
    (an, bn), _ = row_scaled(Exact(a_num, a_den, opa.kind), Exact(b_num, b_den, opb.kind))
    num = np.empty(b_num.shape, dtype=object)
    den = np.empty(lead, dtype=object)
    k = b_num.shape[-1]
    first = an[(0,) * len(lead)] if an.size else an.reshape(an.shape[-2:])
    with tracked(fn, None, int(np.prod(lead)), lambda: solve_cost(first, k)):
        for idx in np.ndindex(lead):
            Y, d = solve_integer(np.ascontiguousarray(an[idx]), np.ascontiguousarray(bn[idx]), seed, fn)
            num[idx], den[idx] = Y, d
    if vector:
        num = num[..., 0]
    return _rational_as(RationalArray(narrowed(num), den[()] if den.ndim == 0 else den),
                        opa.kind if opa.kind != "numpy" else opb.kind)


def inv(A, seed: int | None = None):
    """``A^-1`` over Q for a nonsingular ``A``."""
    op = exact_operand(A, "A", "inv", "square")
    n = op.num.shape[-1]
    eye = np.broadcast_to(np.eye(n, dtype=np.int64), op.num.shape)
    return solve(A if op.kind in ("fmpz_mat", "fmpq_mat") else _as_object(op), eye, seed, "inv")


def _as_object(op: Exact):
    """An :class:`Exact` operand back as an array ``solve`` reads the same way."""
    if op.den is None:
        return op.num
    return np.frompyfunc(Fraction, 2, 1)(op.num.astype(object), op.den)


def _rational_as(x: RationalArray, kind: str):
    if kind in ("fmpz_mat", "fmpq_mat"):
        flint = sys.modules["flint"]
        num = x.numerator.reshape(x.numerator.shape[0], -1) if x.numerator.ndim == 1 else x.numerator
        m, k = num.shape
        d = int(x.denominator)
        return flint.fmpq_mat(m, k, [flint.fmpq(int(v), d) for v in num.ravel().tolist()])
    if kind == "fraction":
        return x.fractions()
    return x


def rank(A, seed: int | None = None):
    """The rank over Q, certified."""
    op = exact_operand(A, "A", "rank", "matrix")
    (num,), _ = row_scaled(op)
    first = num[(0,) * (num.ndim - 2)] if num.size else num.reshape(num.shape[-2:])
    with tracked("rank", None, int(np.prod(num.shape[:-2])), lambda: rank_cost(first)):
        r = _each(num, 2, lambda a: rank_integer(np.ascontiguousarray(a), seed), np.int64)
    return int(r) if r.ndim == 0 else r


def nullspace(A, left: bool = False, seed: int | None = None):
    """A basis of the kernel over Q, as an integer matrix."""
    op = exact_operand(A, "A", "nullspace", "matrix", stack=False)
    if left:  # the left kernel of A is the right kernel of A.T, whose rows are scaled
        op = Exact(op.num.T, None if op.den is None else op.den.T, op.kind)
    (num,), _ = row_scaled(op)
    with tracked("nullspace", None, 1, lambda: nullspace_cost(num)):
        N, _ = nullspace_integer(np.ascontiguousarray(num), seed)
    N = narrowed(N)
    if left:
        N = N.T
    if op.kind in ("fmpz_mat", "fmpq_mat"):
        flint = sys.modules["flint"]
        return flint.fmpz_mat(N.shape[0], N.shape[1], [int(v) for v in N.ravel().tolist()])
    return N


def charpoly(A, seed: int | None = None):
    """``det(x I - A)`` over Z (over Q for rational entries), low degree first."""
    op = exact_operand(A, "A", "charpoly", "square")
    n = op.num.shape[-1]
    if op.den is not None:
        # A = M / s entry by entry with s the lcm of all denominators: det(x I - M / s) =
        # s**-n det(s x I - M), so c_k(A) = c_k(M) s**(k - n)
        s = np.empty(op.num.shape[:-2], dtype=object)
        for idx in np.ndindex(s.shape):
            s[idx] = math.lcm(*op.den[idx].ravel().tolist()) if n else 1
        M = op.num.astype(object) * (s[..., None, None] // op.den)
    else:
        M, s = op.num, None
    out = np.empty(op.num.shape[:-2] + (n + 1,), dtype=object)
    lead = op.num.shape[:-2]
    first = M[(0,) * len(lead)] if M.size else M.reshape(M.shape[-2:])
    with tracked("charpoly", None, int(np.prod(lead)), lambda: charpoly_integer_cost(first)):
        for idx in np.ndindex(lead):
            c = charpoly_integer(np.ascontiguousarray(M[idx]), seed)
            if s is not None:
                c = [Fraction(v, s[idx] ** (n - k)) for k, v in enumerate(c)]
            out[idx] = c
    flint = sys.modules.get("flint")
    if op.kind == "fmpz_mat" and out.ndim == 1:
        return flint.fmpz_poly([int(v) for v in out.tolist()])
    if op.kind == "fmpq_mat" and out.ndim == 1:
        return flint.fmpq_poly([flint.fmpq(Fraction(v).numerator, Fraction(v).denominator) for v in out.tolist()])
    return narrowed(out) if s is None else out
