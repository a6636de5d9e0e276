"""Shared oracles and settings for the modlin test suite.

Two independent oracles:

* :func:`ref_matmul` multiplies exact Python integers (object arrays) with
  ``numpy.matmul``'s shape rules and reduces once at the end;
* :func:`flint_matmul` asks python-flint's ``nmod_mat`` (FLINT's own modular
  arithmetic, no floating point) for 2-D products.

Helpers are imported by the test modules with ``from conftest import ...``.
"""

from __future__ import annotations

import ctypes
import math
import os
import pathlib
import shutil
import subprocess
import tracemalloc

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
    """``A @ B mod p`` for 2-D operands with python-flint: ``nmod_mat`` below 2**64,
    ``fmpz_mod_mat`` above (FLINT's own modular arithmetic, no floating point)."""
    import flint

    assert p >= 2
    a = as_python_ints(A)
    b = as_python_ints(B)
    assert a.ndim == 2 and b.ndim == 2 and a.shape[1] == b.shape[0]
    (m, k), n = a.shape, b.shape[1]
    ea, eb = [int(x) % p for x in a.ravel()], [int(x) % p for x in b.ravel()]
    if p < 2**64:
        return from_flint(flint.nmod_mat(m, k, ea, p) * flint.nmod_mat(k, n, eb, p))
    ctx = flint.fmpz_mod_ctx(p)
    return from_flint(flint.fmpz_mod_mat(m, k, ea, ctx) * flint.fmpz_mod_mat(k, n, eb, ctx))


def from_flint(fc) -> np.ndarray:
    """A python-flint matrix as an object array of Python ints."""
    out = np.empty((fc.nrows(), fc.ncols()), dtype=object)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = int(fc[i, j])
    return out


def rand_ints(rng, shape, lo: int, hi: int) -> np.ndarray:
    """Object array of uniform Python ints in ``[lo, hi]`` (any size).

    Within int64, NumPy draws them; beyond, each is the remainder of 8 more bytes than the
    span needs (bias below 2**-64), all the bytes drawn at once: a ``rng.bytes`` call per
    entry cost 17-20 us, a third of the time of some tiling tests."""
    count = math.prod(shape)
    if -(2**63) <= lo and hi < 2**63:
        return np.asarray(rng.integers(lo, hi, size=shape, dtype=np.int64, endpoint=True)).astype(object)
    span = hi - lo + 1
    nbytes = (span.bit_length() + 7) // 8 + 8
    buf, frombytes = rng.bytes(nbytes * count), int.from_bytes
    out = np.empty(count, dtype=object)
    out[:] = [lo + frombytes(buf[i:i + nbytes], "little") % span for i in range(0, nbytes * count, nbytes)]
    return out.reshape(shape)


def budgets(tiling_of, top: int = 10**10, within=None, step: float = 1.5):
    """One budget per distinct tiling, from ``top`` down until no tile fits, each ``step``
    times below the last tiling's peak, with the tiling seen: ``[(budget, tiling), ...]``.
    ``tiling_of()`` reads the budget in force inside ``within(budget)`` (default:
    ``modlin.limits(memory=budget)``)."""
    import modlin

    within = within or (lambda b: modlin.limits(memory=b))
    out, budget = {}, top
    while True:
        with within(budget):
            try:
                t = tiling_of()
            except ValueError:
                break
        out.setdefault((t.tile, t.grid), (budget, t))
        budget = int(min(budget, t.peak) / step)
    return list(out.values())


def traced(call):
    """``(result, peak)``: what ``call()`` returns and the most memory numpy and Python held
    during it (tracemalloc). ``call`` runs once untraced first: numba loads (or compiles)
    each kernel specialization a tiling needs on its first use, a one-time cost in Python
    objects that is not working memory."""
    call()
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def same_bits(x, y) -> bool:
    """Arrays of one shape and dtype holding the same bits (NaN payloads and signed zeros too)."""
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(
        np.ascontiguousarray(x).view(np.uint64), np.ascontiguousarray(y).view(np.uint64))


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



def matmul_limit_rows() -> list[tuple[str, tuple[int, int], int, int]]:
    """``(engine, (u, v), largest p with lambda >= 1, largest p whose every GEMM spans 2048)``
    per row of the two limit tables in docs/guide/matmul.rst (test_plan and test_guides
    check them against the planner)."""
    import pathlib
    import re

    guide = pathlib.Path(__file__).parent.parent / "docs" / "guide" / "matmul.rst"
    rows, engine = [], None
    for line in guide.read_text().splitlines():
        head = re.match(r"\*\*(fp64|fp32) engine\*\*", line)
        if head:
            engine = head.group(1)
        row = re.match(r"\((\d),(\d)\)\s+\d+\s+(\d+)\s+\S+\s+(\d+)\s+\S+\s*$", line)
        if row and engine:
            rows.append((engine, (int(row.group(1)), int(row.group(2))), int(row.group(3)), int(row.group(4))))
    return rows


class StepRecorder:
    """A stand-in for a progress bar that records its updates (``steps``)."""

    def __init__(self):
        self.steps = []

    def update(self, n=1):
        self.steps.append(n)

    def set_description(self, text):
        pass

    def close(self):
        pass

@pytest.fixture
def rng():
    return np.random.default_rng(20240601)


# ----------------------------------------------------------------- CUDA kernels on the host
# The kernels' per-entry functions (kernels/modlin_elem.cuh), compiled by nvcc for
# the host into one shared library with the kernels' names and arguments: the
# kernel tests compare it with numba, and the GPU-path tests run CuPy code paths
# on it (tests/test_gpu_paths.py).

NVCC = shutil.which("nvcc")
ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
# Contraction off on both sides: --fmad=false for device code, -ffp-contract=off
# for the host compiler (gcc contracts by default where the target has FMA, e.g.
# aarch64), so that the harness rounds exactly as numba and the kernels do.
NVCC_FLAGS = ("--fmad=false", f"-I{KERNELS}")
HOST_FLAGS = ("-Xcompiler", "-fPIC,-ffp-contract=off", "-O2")


def _nvcc(*args: str, timeout: float = 300) -> None:
    proc = subprocess.run([NVCC, *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"nvcc {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


P, I32, U32, I64, U64, F64 = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_longlong, ctypes.c_ulonglong,
                              ctypes.c_double)
HARNESS_SIGNATURES = {
    "balanced_words_f64": (P, I64, I64, U64, U64, I32, I32, P),
    "mw_step": (P, P, I64) + (F64,) * 10,
    "mw_finalize": (P, P, I64) + (F64,) * 13 + (I64, P),
    # x, ldx, R, len, off, step, shift, bad, by_cols, table, N, out, plane, ldo, Rp, Cp, transpose
    "ozaki_residues_i8": (P, I64, I64, I64, I64, I64, P, P, I32, P, I32, P, I64, I64, I64, I64, I32),
    # x, ldx, R, len0, len1, off0, off1, step, shift, bad, by_cols, table, N, plus, minus, plane, ldo, Rp, Cp,
    # transpose
    "ozaki_twom_i8": (P, I64, I64, I64, I64, I64, I64, I64, P, P, I32, P, I32, P, P, I64, I64, I64, I64, I32),
    # x, ldx, ldc, R, C, p, mu, c63, table, N, out, plane, ldo, Rp, Cp, transpose
    "int_residues_i8": (P, I64, I64, I64, I64, U64, U64, U64, P, I32, P, I64, I64, I64, I64, I32),
    # re, ld_re, lc_re, im, ld_im, lc_im, R, C, m, mu, c63, s, table, N, plus, minus, plane, ldo, Rp, Cp, transpose
    "gauss_twom_residues_i8": (P, I64, I64, P, I64, I64, I64, I64, U64, U64, U64, I64, P, I32, P, P, I64, I64, I64,
                               I64, I32),
    # X, Y, ldx, R, C, table, i, acc, rx, ry
    "reduce_pair_i32_u8": (P, P, I64, I64, I64, P, I32, I32, P, P),
    # rx, ry, N, R, C, table, limbs, minv, L, p, sp, mp, inv2, inv2s, re, ld_re, im, ld_im
    "crt_twom_modp_u8": (P, P, I32, I64, I64, P, P, P, I32, U64, P, U64, I64, I64, P, I64, P, I64),
    # X, ldx, R, C, table, i, acc, res
    "reduce_i32_u8": (P, I64, I64, I64, P, I32, I32, P),
    # X, Y, ldx, R, C, table, i, inv2, inv2s, acc, re, im
    "twom_combine_i32_u8": (P, P, I64, I64, I64, P, I32, U32, U32, I32, P, P),
    # res, res_im, N, R, C, table, limbs, minv, L, sa, sb, out, ldo, ostep
    "crt_to_double_u8": (P, P, I32, I64, I64, P, P, P, I32, P, P, P, I64, I64),
    # res, N, R, C, table, limbs, minv, L, p, sp, mp, out, ldo
    "crt_to_modp_u8": (P, I32, I64, I64, P, P, P, I32, U64, P, U64, P, I64),
    # x, y, N, R, C, table, inv2s, re, im, ret, imt
    "syrk_combine_u8": (P, P, I32, I64, I64, P, P, P, P, P, P),
    # x, ldx, R, C, off1, step, nparts, tbits, bad, ex, need, sq, bars, ldb, hist
    "line_stats_rows": (P, I64, I64, I64, I64, I64, I32, I32, P, P, P, P, P, I64, P),
    "line_stats_cols": (P, I64, I64, I64, I64, I64, I32, I32, P, P, P, P, P, I64, P),
    # ex_a, need_a, sq_a, bad_a, m, ex_b, need_b, sq_b, bad_b, n, symmetric, lb, tbits, gmax, hist_a, hist_b, sa,
    # sb, g_out, h_out, summary
    "fast_scales": (P, P, P, P, I64, P, P, P, P, I64, I32, I64, I32, I32, P, P, P, P, P, P, P),
    # w, ldw, R, C, code, ldc
    "bound_code_f64": (P, I64, I64, I64, P, I64),
    # code, m, n, g, h, need_a, top, gmax, first
    "accurate_rows": (P, I64, I64, P, P, P, I64, I32, I32),
    # code, m, n, g, h, need_b, top, gmax
    "accurate_cols": (P, I64, I64, P, P, P, I64, I32),
    # g, h, ex_a, bad_a, m, ex_b, bad_b, n, symmetric, tbits, hist_a, hist_b, sa, sb, summary
    "bits_scales": (P, P, P, P, I64, P, P, I64, I32, I32, P, P, P, P, P),
}


def build_harness(directory) -> ctypes.CDLL:
    """The kernels' host twins (``tests/kernels_harness.cu``) built by nvcc into
    ``directory/libharness.so`` and loaded, each function's ``argtypes`` set from
    :data:`HARNESS_SIGNATURES`. A plain function (no pytest): ``benchmarks/gpu_ledger.py``
    builds it too."""
    if NVCC is None:
        raise RuntimeError("nvcc is not on PATH: the kernels' host harness cannot be built")
    out = pathlib.Path(directory) / "libharness.so"
    _nvcc("-x", "cu", "-shared", *HOST_FLAGS, *NVCC_FLAGS, "-o", str(out), str(ROOT / "tests" / "kernels_harness.cu"))
    lib = ctypes.CDLL(str(out))
    for name, args in HARNESS_SIGNATURES.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = None
    return lib


@pytest.fixture(scope="session")
def harness(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc is not on PATH: the kernels' host harness cannot be built")
    return build_harness(tmp_path_factory.mktemp("kernels"))
