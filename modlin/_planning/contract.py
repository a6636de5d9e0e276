"""The exactness contract, checked here and nowhere else, with Python integers.

A GEMM of ``k``-long dot products with entries ``|a| <= a_max``, ``|b| <= b_max``
added onto an accumulator ``|c| <= c_max`` is exact in an engine with exact
range ``L`` when::

    k * a_max * b_max + c_max <= L

Every plan in modlin is derived from this inequality, and a plan supplied by a
user is re-checked against it before it runs.
"""

from __future__ import annotations


def _check_ints(*values: int) -> None:
    for v in values:
        if not isinstance(v, int) or v < 0:
            raise TypeError(f"contract bounds must be non-negative Python ints, got {v!r}")


def is_exact(k: int, a_max: int, b_max: int, c_max: int, L: int) -> bool:
    """True when ``k * a_max * b_max + c_max <= L``, evaluated exactly."""
    _check_ints(k, a_max, b_max, c_max, L)
    return k * a_max * b_max + c_max <= L


def max_block(a_max: int, b_max: int, c_max: int, L: int) -> int:
    """The largest ``k`` with ``is_exact(k, a_max, b_max, c_max, L)``; 0 if none.

    This is the delayed-reduction block size lambda of arXiv 2601.07508 (Alg 2.3).
    """
    _check_ints(a_max, b_max, c_max, L)
    if c_max > L:
        return 0
    ab = a_max * b_max
    if ab == 0:
        return L  # products vanish: any block is exact; L is a finite stand-in
    return (L - c_max) // ab
