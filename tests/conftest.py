"""Shared oracles and settings for the modlin test suite.

Two independent oracles:

* :func:`ref_matmul` multiplies exact Python integers (object arrays) with
  ``numpy.matmul``'s shape rules and reduces once at the end;
* :func:`flint_matmul` asks python-flint's ``nmod_mat`` (FLINT's own modular
  arithmetic, no floating point) for 2-D products.

Helpers are imported by the test modules with ``from conftest import ...``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# CI profile: no deadlines (numba compiles on first use and a 2-core runner is
# slow), few examples so the whole suite stays within a few minutes. Run with
# HYPOTHESIS_PROFILE=thorough for a longer local search.
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("thorough", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

MAX_MODULUS = 2**52


# ----------------------------------------------------------------- conversion

_to_int = np.frompyfunc(int, 1, 1)


def as_python_ints(x) -> np.ndarray:
    """``x`` as an object array of exact Python ints (floats must be integral)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        assert np.all(np.isfinite(x)) and np.array_equal(x, np.trunc(x)), "oracle needs integral floats"
    if x.size == 0:
        return np.zeros(x.shape, dtype=object)
    out = _to_int(x)
    return np.asarray(out, dtype=object).reshape(x.shape)


# ----------------------------------------------------------------- oracles

def ref_matmul(A, B, p: int):
    """Exact ``A @ B mod p`` with Python integers, ``numpy.matmul`` semantics.

    Returns an object array of Python ints in ``[0, p)``, or a Python int when
    both operands are 1-D (as ``numpy.matmul`` returns a scalar then).
    """
    a = as_python_ints(A)
    b = as_python_ints(B)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("oracle: operands must have at least one dimension")
    if a.ndim == 1 and b.ndim == 1:
        return int(sum(int(x) * int(y) for x, y in zip(a, b, strict=True))) % p
    r = np.matmul(a, b)
    if r.size == 0:
        return np.zeros(r.shape, dtype=object)
    return np.asarray(np.remainder(r, p), dtype=object)


def flint_matmul(A, B, p: int) -> np.ndarray:
    """``A @ B mod p`` for 2-D operands with python-flint's ``nmod_mat`` (p < 2**63)."""
    import flint

    assert 2 <= p < 2**63
    a = as_python_ints(A)
    b = as_python_ints(B)
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]
    m, k = a.shape
    n = b.shape[1]
    fa = flint.nmod_mat(m, k, [int(x) % p for x in a.ravel()], p)
    fb = flint.nmod_mat(k, n, [int(x) % p for x in b.ravel()], p)
    fc = fa * fb
    out = np.zeros((m, n), dtype=object)
    for i in range(m):
        for j in range(n):
            out[i, j] = int(fc[i, j])
    return out


def assert_exact(C, A, B, p: int, oracle=ref_matmul) -> None:
    """``C`` is modlin's result for ``A @ B mod p``: int64, in ``[0, p)``, equal to the oracle."""
    R = oracle(A, B, p)
    if isinstance(R, int):
        assert isinstance(C, np.integer) and C.dtype == np.int64, type(C)
        assert int(C) == R
        return
    assert isinstance(C, np.ndarray), type(C)
    assert C.dtype == np.int64, C.dtype
    assert C.shape == R.shape, (C.shape, R.shape)
    if C.size:
        assert C.min() >= 0 and C.max() < p, "result not reduced into [0, p)"
    mism = np.argwhere(C.astype(object) != R)
    assert mism.size == 0, (
        f"{len(mism)} mismatching entries mod p = {p}; first at {tuple(mism[0])}: "
        f"got {C[tuple(mism[0])]}, expected {R[tuple(mism[0])]}"
    )


@pytest.fixture
def rng():
    return np.random.default_rng(20240601)
