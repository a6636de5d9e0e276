"""The public functions of :mod:`modlin.linalg` that work both modulo a prime and over the
integers and rationals: each sends a call with no modulus, and no operand that carries
one, to :mod:`modlin.linalg._rational`, and every other call to its implementation modulo
``p`` (whose docstring, describing both, it shows)."""

from __future__ import annotations

import functools

from modlin.linalg import _charpoly, _pluq, _rational, _solve

__all__ = ["det", "rank", "solve", "inv", "nullspace", "charpoly"]


@functools.wraps(_pluq.det)
def det(A, p=None):
    if _rational.over_rationals(p, A):
        return _rational.det(A)
    return _pluq.det(A, p)


@functools.wraps(_pluq.rank)
def rank(A, p=None):
    if _rational.over_rationals(p, A):
        return _rational.rank(A)
    return _pluq.rank(A, p)


@functools.wraps(_solve.solve)
def solve(A, B, p=None):
    if _rational.over_rationals(p, A, B):
        return _rational.solve(A, B)
    return _solve.solve(A, B, p)


@functools.wraps(_solve.inv)
def inv(A, p=None):
    if _rational.over_rationals(p, A):
        return _rational.inv(A)
    return _solve.inv(A, p)


@functools.wraps(_solve.nullspace)
def nullspace(A, p=None, *, left=False):
    if _rational.over_rationals(p, A):
        return _rational.nullspace(A, left=left)
    return _solve.nullspace(A, p, left=left)


@functools.wraps(_charpoly.charpoly)
def charpoly(A, p=None):
    if _rational.over_rationals(p, A):
        return _rational.charpoly(A)
    return _charpoly.charpoly(A, p)
