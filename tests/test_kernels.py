"""The CUDA kernels of ``kernels/``, checked without a GPU.

Two checks: every kernel compiles for sm_80 and sm_90 (with nvcc, and with
NVRTC as ``cupy.RawModule`` will compile it, where the library is installed);
and the per-entry arithmetic the kernels share with ``tests/kernels_harness.cu``
(the same functions of ``kernels/modlin_elem.cuh``, compiled by nvcc for the
host) equals the numba kernels it mirrors bit for bit, on random and worst-case
data. The kernels' exactness rests on the numba kernels' proofs, which hold for
their exact sequence of roundings: equality of every bit (the sign of a zero
included) is what carries the proofs over.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import pathlib
import re
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from conftest import HARNESS_SIGNATURES, KERNELS, NVCC, NVCC_FLAGS
from modlin._algorithms import quantize as _quantize
from modlin._algorithms.gpu import GAPS
from modlin._arith import crt as _crt, crt as _crtfloat, modular as _modular
from modlin._arith.modular import Reduction
from modlin._arith.moduli import Basis, int8_moduli, sqrt_minus_one, twom_moduli
from modlin._engines import cuda as _cuda

if NVCC is None:
    pytest.skip("nvcc is not on PATH: the CUDA kernels are not compiled here", allow_module_level=True)
SOURCE = KERNELS / "modlin_kernels.cu"
ARCHS = ("sm_80", "sm_90")

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# ------------------------------------------------------------------ compilation

@pytest.fixture(scope="module", params=ARCHS)
def compiled(request, tmp_path_factory):
    """One nvcc run per architecture serves the three checks below (each was a compilation of
    its own, some 35 s apiece): the cubin, the PTX kept on the way (``--keep``), and ptxas'
    ``-v`` report. Returns ``(arch, cubin, ptx text, ptxas report)``."""
    arch = request.param
    d = tmp_path_factory.mktemp(arch)
    out = d / f"modlin_kernels_{arch}.cubin"
    proc = subprocess.run([NVCC, *NVCC_FLAGS, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "--keep",
                           "--keep-dir", str(d), "-o", str(out), str(SOURCE)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (ptx,) = d.glob("*.ptx")
    return arch, out, ptx.read_text(), proc.stderr


def test_kernels_compile(compiled):
    _, cubin, ptx, _ = compiled
    assert cubin.stat().st_size > 0
    assert f".target {compiled[0]}" in ptx  # the PTX that was kept is this architecture's
    # CI compiles the kernels only here: a second source would need these checks too
    assert sorted(KERNELS.glob("*.cu")) == [SOURCE]


def test_kernels_have_no_fused_multiply_add_nor_division(compiled):
    """The PTX holds no fused multiply-add (contraction is off, no math function brings one
    in, and the kernels' arithmetic is integer where it used to need fma: float64 fmod) and
    no integer division or remainder, for sm_80 and sm_90."""
    _check_ptx(compiled[2])


def _check_ptx(ptx: str) -> None:
    """Every kernel of the harness is in the PTX; no double-precision fused multiply-add; and
    no integer division or remainder (a software routine of some 70 instructions on 64
    bits: every reduction is a Barrett reduction by a precomputed reciprocal)."""
    assert set(re.findall(r"\.visible \.entry (\w+)\(", ptx)) == set(HARNESS_SIGNATURES)
    assert re.search(r"\b(fma|mad)\.rn\.f64\b", ptx) is None
    found = re.findall(r"\b(?:div|rem)\.(?:s|u)(?:16|32|64)\b", ptx)
    assert not found, f"integer division in the PTX: {sorted(set(found))}"


def test_kernels_keep_everything_in_registers(compiled):
    """ptxas -v: every kernel has a 0-byte stack frame and no spills (the CRT's limbs are
    indexed by constants only, so they live in registers), for sm_80 and sm_90."""
    report = compiled[3]
    frames = {}
    for chunk in report.split("Compiling entry function '")[1:]:
        name = chunk.split("'")[0]
        frames[name] = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                                 chunk).groups()
    assert set(frames) == set(HARNESS_SIGNATURES), report
    assert all(f == ("0", "0", "0") for f in frames.values()), report
    # a block must find its registers on one multiprocessor (65536 32-bit registers on sm_80
    # and sm_90), or the launch fails with "too many resources requested": the two one-block
    # kernels run 1024 threads, so at most 64 registers (__launch_bounds__(1024) made ptxas
    # spill to 32: left out, this check holds them instead), the others 256
    regs = {chunk.split("'")[0]: int(re.search(r"Used (\d+) registers", chunk).group(1))
            for chunk in report.split("Compiling entry function '")[1:]}
    for name, used in regs.items():
        threads = 1024 if name in ("fast_scales", "bits_scales") else 256
        assert used * threads <= 65536, (name, used, threads)


def _find_nvrtc() -> pathlib.Path | None:
    """libnvrtc from the nvidia-cuda-nvrtc wheel (what CuPy's wheels use) or the CUDA toolkit."""
    dirs = []
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        dirs += [pathlib.Path(d) for d in spec.submodule_search_locations]
    dirs.append(pathlib.Path(NVCC).resolve().parents[1])
    for d in dirs:
        for lib in sorted(d.glob("**/libnvrtc.so*")):
            if ".alt." not in lib.name:
                return lib
    return None


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_kernels_compile_with_nvrtc(arch):
    """NVRTC (what cupy.RawModule uses) has no host standard headers and its own dialect
    default: the sources must compile there too, to PTX without fused multiply-adds."""
    lib_path = _find_nvrtc()
    if lib_path is None:
        pytest.skip("libnvrtc not found (pip install nvidia-cuda-nvrtc to run this check)")
    for builtins in sorted(lib_path.parent.glob("libnvrtc-builtins.so*")):
        if ".alt." not in builtins.name:  # libnvrtc loads it by name: preload it from the same folder
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(str(lib_path))
    for std in ("c++11", "c++17"):
        prog = ctypes.c_void_p()
        assert lib.nvrtcCreateProgram(ctypes.byref(prog), SOURCE.read_bytes(), b"modlin_kernels.cu", 0, None,
                                      None) == 0
        try:
            opts = [b"--fmad=false", f"-I{KERNELS}".encode(), f"-arch={arch}".encode(),
                    f"--std={std}".encode()]
            rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            assert rc == 0, log.value.decode()
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            ptx = ctypes.create_string_buffer(size.value)
            assert lib.nvrtcGetPTX(prog, ptx) == 0
            _check_ptx(ptx.value.decode())
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


# ------------------------------------------------------------------ the host harness

def _ptr(a: np.ndarray | None):
    """A pointer to ``a``'s data that keeps ``a`` alive (a bare address would not: a
    temporary array could be freed before the call)."""
    if a is None:
        return None
    assert a.flags.c_contiguous
    return a.ctypes.data_as(ctypes.c_void_p)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal arrays, doubles compared by their bits (so -0.0 differs from 0.0)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if got.dtype.kind == "f":
        got, want = got.view(np.uint64), want.view(np.uint64)
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    assert bad.size == 0, (f"{bad.size} of {got.size} entries differ; first at {bad[0]}: "
                           f"got {got.reshape(-1)[bad[0]]}, expected {want.reshape(-1)[bad[0]]}")


def _i64(values) -> np.ndarray:
    return np.array([v for v in values if I64_MIN <= v <= I64_MAX], dtype=np.int64)


def _edges_mod(p: int) -> list[int]:
    """Integers at the edges of the residue ranges modulo p, and of int64."""
    h = p // 2
    base = [0, 1, -1, 2, -2, p - 1, p, p + 1, -p, -p + 1, -p - 1, h, -h, h + 1, -h - 1, (p - 1) // 2,
            (p - 1) // 2 + 1, 2 * p - 1, 3 * p + h, -3 * p - h, I64_MIN, I64_MIN + 1, I64_MAX, I64_MAX - 1]
    big = (I64_MAX // p) * p
    return base + [big, big - 1, big + (p - 1) // 2, -big, -big - 1, -big - h, I64_MIN + p - 1]


def _int64_data(rng, p: int, n: int) -> np.ndarray:
    edges = _i64(_edges_mod(p))
    wide = rng.integers(I64_MIN, I64_MAX, size=n, endpoint=True, dtype=np.int64)
    near = rng.integers(-min(4 * p, 2**62), min(4 * p, 2**62), size=n, dtype=np.int64)
    return np.concatenate([edges, wide, near])


# ------------------------------------------------------------------ word split

@pytest.mark.parametrize("p, s, u", [
    (2, 1, 1), (3, 2, 1), (4, 1, 2), (5, 1, 3), (256, 8, 1), (256, 4, 2), (255, 7, 2), (257, 8, 2),
    (65521, 8, 2), (2**31 - 1, 16, 2), (2**31 - 1, 8, 4), (2**40 - 87, 7, 6), (2**51, 26, 2),
    (2**52 - 1, 26, 2), (2**52 - 1, 18, 3), (2**52 - 1, 7, 8), (2**52 - 47, 13, 4),
])
def test_balanced_words(harness, rng, p, s, u):
    x = _int64_data(rng, p, 3000)
    want = _modular.balanced_words(x, p, s, u, np.float64)
    got = np.full((u, x.size), np.nan)
    harness.balanced_words_f64(_ptr(x), x.size, p, *map(int, _cuda.wide_constants(p)), s, u, _ptr(got))
    _same_bits(got, want)


# ------------------------------------------------------------------ multiword reductions

def _below(v: int) -> float:
    """The largest double <= v."""
    f = float(v)
    return float(np.nextafter(f, 0.0)) if int(f) > v else f


def _float_data(rng, y_max: int, n: int) -> np.ndarray:
    """Doubles with |y| <= y_max: edges, random integers, random fractions, signed zeros."""
    top = _below(y_max)
    edges = [top, -top, float(np.nextafter(top, 0.0)), -float(np.nextafter(top, 0.0)), 0.0, -0.0, 1.0, -1.0, 0.5,
             -0.5, 1.5, -2.5]
    ints = np.rint(rng.uniform(-top, top, n))
    small = rng.integers(-(2**20), 2**20, n).astype(np.float64)
    frac = rng.uniform(-top, top, n // 4) / 2.0 ** rng.integers(0, 60, n // 4)
    return np.concatenate([edges, ints, small, frac])


def _step_cases():
    cases = []
    for p in (2, 3, 256, 257, 65521, 2**31 - 1, 2**40 - 87, 2**52 - 47, 2**52 - 1, 2**51):
        for y_max in (p, 2**53, 2**62, 1024 * (p // 2 + 1) ** 2):
            for scale_exp in (0, 7, 26):
                try:
                    red = Reduction.for_bound(p, y_max)
                    scaled = Reduction.for_bound(p, red.r_max * 2**scale_exp)
                except ValueError:
                    continue
                cases.append((p, y_max, scale_exp, red, scaled))
    return cases


STEP_CASES = _step_cases()


@pytest.mark.parametrize("p, y_max, scale_exp, red, scaled", STEP_CASES,
                         ids=[f"p{c[0]}-y{c[1].bit_length()}b-s{c[2]}" for c in STEP_CASES])
def test_mw_step(harness, rng, p, y_max, scale_exp, red, scaled):
    x = _float_data(rng, y_max // 2, 500)
    t = rng.permutation(x)
    none = (0.0, 0.0, 0.0)
    for add in (False, True):
        for r1, r2, rt in ((red, scaled, red), (red, None, red), (None, scaled, None), (None, None, red),
                           (None, None, None)):
            q1, q2, qt = (r.constants() if r is not None else none for r in (r1, r2, rt))
            want = x.copy().reshape(1, -1)
            _modular._step(want, t.reshape(1, -1), add, *q1, float(2**scale_exp), *q2, *qt)
            got = x.copy()
            harness.mw_step(_ptr(got), _ptr(t) if add else None, got.size, *q1, float(2**scale_exp), *q2, *qt)
            _same_bits(got, want.reshape(-1))
            # step()'s shortcuts without scaling (_fold, _fold_reduced) give the same values
            # (a zero's sign aside: the identity reduction of -0.0 gives +0.0)
            fast = x.copy().reshape(1, -1)
            _modular.step(fast, t.reshape(1, -1) if add else None, r1, scale_exp, r2, rt)
            assert np.array_equal(fast, want)


def _finalize_cases():
    cases = []
    for p in (2, 3, 256, 257, 2**31 - 1, 2**40 - 87, 2**52 - 47, 2**52 - 1, 2**51):
        for y_max in (2**53, 2**62, 1024 * (p // 2 + 1) ** 2):
            try:
                cases.append((p, Reduction.for_bound(p, y_max)))
            except ValueError:
                continue
    return cases


FINALIZE_CASES = _finalize_cases()


@pytest.mark.parametrize("p, red", FINALIZE_CASES, ids=[f"p{p}-y{r.y_max.bit_length()}b" for p, r in FINALIZE_CASES])
def test_mw_finalize(harness, rng, p, red):
    half = red.y_max // 2
    multiples = [float(k * p) for k in (1, 2, 3, 1000)] + [float((half // p) * p)]
    x = np.concatenate([_float_data(rng, half, 2000), multiples, [-v for v in multiples], [v - 1 for v in multiples]])
    x = np.rint(x)  # finalize's contract: integer values (the remainder is then one)
    t = np.rint(rng.permutation(x))
    none = (0.0, 0.0, 0.0)
    for add in (False, True):
        for pre in (None, red):
            want = np.empty((1, x.size), dtype=np.int64)
            _modular.finalize(x.reshape(1, -1), want, red, t.reshape(1, -1) if add else None, pre)
            got = np.empty(x.size, dtype=np.int64)
            q1 = pre.constants() if pre is not None else none
            harness.mw_finalize(_ptr(x), _ptr(t) if add else None, x.size, *q1, 1.0, *none, *red.constants(),
                                *red.constants(), p, _ptr(got))
            _same_bits(got, want.reshape(-1))
            assert got.min() >= 0 and got.max() < p


# ------------------------------------------------------------------ Ozaki residues

MODULI_SETS = {"int8x16": int8_moduli()[:16], "twom": twom_moduli(), "int8-all": int8_moduli()}


def _ozaki_data(rng, n: int) -> np.ndarray:
    """Integer-valued doubles below 2**85 in magnitude: every scale, the edges of the 2**32 split."""
    top = 2.0**85 - 2.0**32  # the largest double below 2**85
    edges = [0.0, -0.0, 1.0, -1.0, 255.0, 256.0, -256.0, 2.0**32, 2.0**32 - 1, 2.0**32 + 1, -(2.0**32),
             -(2.0**32) + 1, -(2.0**32) - 1, 2.0**52, 2.0**53 - 1, 2.0**53, -(2.0**53), 2.0**64, 2.0**84,
             -(2.0**84), top, -top, float(np.nextafter(top, 0)), 2.0**84 + 2.0**32, -(2.0**85) + 2.0**33]
    x = np.ldexp(rng.uniform(-1.0, 1.0, n), rng.integers(0, 86, n))
    return np.concatenate([edges, np.rint(x)])


def _table(moduli, roots=None) -> np.ndarray:
    return np.ascontiguousarray(_cuda._small_rows(tuple(moduli), None if roots is None else tuple(roots), None))


def _residue_layout(rows: int, cols: int, transpose: bool):
    """The residue kernels' output geometry for an ``rows x cols`` source: ``(shape of one
    modulus' residues, Rp, Cp)`` with both dimensions padded to multiples of 4, transposed
    as B's residues are."""
    if transpose:
        return (_cuda.pad4(cols), _cuda.pad4(rows)), _cuda.pad4(rows), _cuda.pad4(cols)
    return (rows, _cuda.pad4(cols)), rows, _cuda.pad4(cols)


def _expected_layout(planes: list[np.ndarray], shape, transpose: bool) -> np.ndarray:
    """Residues of the source (``rows x cols`` per modulus) placed as the kernels lay them out."""
    out = np.zeros((len(planes),) + shape, dtype=np.int8)
    for i, w in enumerate(planes):
        w = w.T if transpose else w
        out[i, : w.shape[0], : w.shape[1]] = w
    return out


def _ozaki_panel(rng, rows: int, cols: int, axis: int, complex_: bool):
    """A panel with lines of every scale (shifts that push entries up to 2**84 and below
    rounding to zero), Inf and NaN in some lines, signed zeros and non-unit row strides."""
    lines = rows if axis == 1 else cols
    x = np.ldexp(rng.uniform(-1, 1, (rows, cols)), rng.integers(-1070, 1000, (rows, cols)))
    x[rng.random((rows, cols)) < 0.1] = -0.0
    if complex_:
        x = x + 1j * np.ldexp(rng.uniform(-1, 1, (rows, cols)), rng.integers(-1070, 1000, (rows, cols)))
    bad = np.zeros(lines, dtype=bool)
    bad[:: 5] = True
    for j in np.flatnonzero(bad)[::2]:
        if axis == 1:
            x[j, 0] = np.inf
        else:
            x[0, j] = np.nan
    parts = [x.real, x.imag] if complex_ else [x]
    mx = np.maximum.reduce([np.where(np.expand_dims(bad, axis), 0, np.abs(p)).max(axis=axis) for p in parts])
    shift = rng.integers(_quantize.T_BITS, _quantize.G_MAX + 1, lines) - np.frexp(mx)[1]
    wide = np.zeros((rows, cols + 3), dtype=x.dtype)  # rows with a stride past their length
    wide[:, :cols] = x
    return _quantize.Panel(wide[:, :cols], shift.astype(np.int64), bad, axis)


def _panel_args(p):
    x = p.x
    ldx = x.strides[0] // 8
    return x.ctypes.data_as(ctypes.c_void_p), ldx, np.ascontiguousarray(p.shift), \
        np.ascontiguousarray(p.bad).view(np.uint8), int(p.axis == 0)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("name", list(MODULI_SETS))
def test_ozaki_residues(harness, rng, name, transpose):
    """Quantisation and residues in one pass, against the numba kernels on the same panel (a
    panel of rows, or of columns as B's, laid out transposed), entries that round to zero
    among them."""
    moduli = MODULI_SETS[name]
    rows, cols = 37, 45
    p = _ozaki_panel(rng, rows, cols, 0 if transpose else 1, False)
    x, ldx, shift, bad, by_cols = _panel_args(p)
    shape, Rp, Cp = _residue_layout(rows, cols, transpose)
    got = np.full((len(moduli),) + shape, 99, dtype=np.int8)
    harness.ozaki_residues_i8(x, ldx, rows, cols, 0, 1, _ptr(shift), _ptr(bad), by_cols, _ptr(_table(moduli)),
                              len(moduli), _ptr(got), got[0].size, shape[1], Rp, Cp, int(transpose))
    want = _expected_layout([_quantize.residues(p, m, np.int8) for m in moduli], shape, transpose)
    _same_bits(got, want)
    assert p.lost() > 0


@pytest.mark.parametrize("name", list(MODULI_SETS))
def test_ozaki_residues_of_integers(harness, rng, name):
    """The integer arithmetic of the residues at the edges of its splits (2**32, 2**53, 2**85),
    against Python's integers: a panel of shift 0 is the integers themselves."""
    moduli = MODULI_SETS[name]
    x = _ozaki_data(rng, 4000).reshape(1, -1)
    shift, bad = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.uint8)
    got = np.zeros((len(moduli), 1, _cuda.pad4(x.size)), dtype=np.int8)
    harness.ozaki_residues_i8(_ptr(x), x.size, 1, x.size, 0, 1, _ptr(shift), _ptr(bad), 0, _ptr(_table(moduli)),
                              len(moduli), _ptr(got), got[0].size, got.shape[2], 1, got.shape[2], 0)

    def balanced(v, m):
        r = v % m
        return r - m if r > (m - 1) // 2 else r

    want = [[balanced(int(v), m) for v in x[0]] for m in moduli]
    assert got[:, 0, : x.size].tolist() == want
    _same_bits(got[:, 0, : x.size], np.stack([_quantize.residues(x[0], m, np.int8) for m in moduli]))


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("halves", [False, True])
def test_ozaki_twom(harness, rng, transpose, halves):
    """2M's images of a complex panel (parts interleaved) or of real SYRK's halves (the
    second half one column short when the width is odd), against the numba kernels."""
    moduli = twom_moduli()
    roots = [sqrt_minus_one(m) for m in moduli]
    rows, cols = 33, 41
    if halves:
        if transpose:
            pytest.skip("halves are those of a panel of rows")
        full = _ozaki_panel(rng, rows, 2 * cols - 1, 1, False)
        p = full.halves()
        x, ldx, shift, bad, by_cols = _panel_args(full)
        parts = ((0, cols), (cols, cols - 1), 1)
    else:
        p = _ozaki_panel(rng, rows, cols, 0 if transpose else 1, True)
        x, ldx, shift, bad, by_cols = _panel_args(p)
        parts = ((0, cols), (1, cols), 2)
    (o0, l0), (o1, l1), step = parts
    shape, Rp, Cp = _residue_layout(rows, cols, transpose)
    plus = np.full((len(moduli),) + shape, 99, dtype=np.int8)
    minus = np.full_like(plus, 99)
    harness.ozaki_twom_i8(x, ldx, rows, l0, l1, o0, o1, step, _ptr(shift), _ptr(bad), by_cols,
                          _ptr(_table(moduli, roots)), len(moduli), _ptr(plus), _ptr(minus), plus[0].size, shape[1],
                          Rp, Cp, int(transpose))
    want = [_quantize.twom_residues(p, m, s, np.int8) for m, s in zip(moduli, roots)]
    _same_bits(plus, _expected_layout([w[0] for w in want], shape, transpose))
    _same_bits(minus, _expected_layout([w[1] for w in want], shape, transpose))
    assert p.lost() > 0


# ------------------------------------------------------------------ int8 engine pre- and post-processing

@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("p", [2, 3, 251, 65521, 2**31 - 1, 2**52 - 47, 2**61 - 1, 2**63 - 25])
def test_int_residues(harness, rng, p, transpose):
    """Residues of int64 entries of any value: reduced modulo p, balanced, then modulo each
    int8 modulus (balanced) in one pass, against Python's integers."""
    moduli = int8_moduli()
    x = _int64_data(rng, p, 1100)[: 31 * 37].reshape(31, 37)
    x = np.concatenate([x, x[:, :3]], axis=1)[:, :37]  # rows with a stride past their length
    rows, cols = x.shape
    shape, Rp, Cp = _residue_layout(rows, cols, transpose)
    got = np.full((len(moduli),) + shape, 99, dtype=np.int8)
    mu, c63 = map(int, _cuda.wide_constants(p))
    harness.int_residues_i8(_ptr(np.ascontiguousarray(x)), cols, 1, rows, cols, p, mu, c63, _ptr(_table(moduli)),
                            len(moduli), _ptr(got), got[0].size, shape[1], Rp, Cp, int(transpose))

    def balanced(v, m):
        r = v % m
        return r - m if r > (m - 1) // 2 else r

    planes = [np.array([[balanced(balanced(int(v), p), m) for v in row] for row in x], dtype=np.int8) for m in moduli]
    _same_bits(got, _expected_layout(planes, shape, transpose))


def test_int_residues_of_a_broadcast_operand(harness):
    """Any strides, a broadcast row or column (stride 0) included: the kernels read them as they are."""
    moduli = int8_moduli()[:5]
    row = np.array([3, -(2**63), 2**63 - 1, 17, -5], dtype=np.int64)
    shape, Rp, Cp = _residue_layout(6, 5, False)
    got = np.zeros((len(moduli),) + shape, dtype=np.int8)
    p = 2**61 - 1
    mu, c63 = map(int, _cuda.wide_constants(p))
    harness.int_residues_i8(_ptr(row), 0, 1, 6, 5, p, mu, c63, _ptr(_table(moduli)), len(moduli), _ptr(got),
                            got[0].size, shape[1], Rp, Cp, 0)

    def balanced(v, m):
        r = v % m
        return r - m if r > (m - 1) // 2 else r

    for i, m in enumerate(moduli):
        want = [balanced(balanced(int(v), p), m) for v in row]
        assert all(got[i, r, :5].tolist() == want for r in range(6)) and not got[i, :, 5:].any()


def _gauss_parts(rng, rows: int, cols: int, m: int):
    edges = np.array(_i64(_edges_mod(m)), dtype=np.int64)
    re = np.concatenate([edges, rng.integers(I64_MIN, I64_MAX, rows * cols, dtype=np.int64)])[: rows * cols]
    im = rng.permutation(np.concatenate([edges, rng.integers(-(4 * m), 4 * m, rows * cols)]))[: rows * cols]
    return re.reshape(rows, cols), im.astype(np.int64).reshape(rows, cols)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("m", [5, 13, 65537, 2**30 - 35, 2**52 - 47])  # primes 1 mod 4
def test_gauss_twom_residues(harness, rng, m, transpose):
    """Gaussian 2M's images re +- s im modulo m (s**2 = -1) and their residues modulo each
    RNS modulus, from int64 parts of any value, against Python's integers; a real matrix
    (no imaginary part) too."""
    s = sqrt_minus_one(m)
    moduli = int8_moduli()
    rows, cols = 21, 19
    re, im = _gauss_parts(rng, rows, cols, m)
    shape, Rp, Cp = _residue_layout(rows, cols, transpose)
    mu, c63 = map(int, _cuda.wide_constants(m))

    def balanced(v, q):
        r = v % q
        return r - q if r > (q - 1) // 2 else r

    for imag in (im, None):
        plus = np.full((len(moduli),) + shape, 99, dtype=np.int8)
        minus = np.full_like(plus, 99)
        harness.gauss_twom_residues_i8(_ptr(re), cols, 1, _ptr(imag), cols, 1, rows, cols, m, mu, c63, s,
                                       _ptr(_table(moduli)), len(moduli), _ptr(plus), _ptr(minus), plus[0].size,
                                       shape[1], Rp, Cp, int(transpose))
        for sign, got in ((1, plus), (-1, minus)):
            images = [[balanced(int(a) + sign * s * (0 if imag is None else int(b)), m) for a, b in zip(ra, rb)]
                      for ra, rb in zip(re, im)]
            planes = [np.array([[balanced(v, q) for v in row] for row in images], dtype=np.int8) for q in moduli]
            _same_bits(got, _expected_layout(planes, shape, transpose))


def test_reduce_pair(harness, rng):
    m = 241
    X = _int32_data(rng, m, 30 * 36 - 14).reshape(30, 36)
    Y = X[::-1].copy()
    table = _table([251, m])
    rx, ry = np.zeros((30, 33), dtype=np.uint8), np.zeros((30, 33), dtype=np.uint8)
    harness.reduce_pair_i32_u8(_ptr(X), _ptr(Y), 36, 30, 33, _ptr(table), 1, 0, _ptr(rx), _ptr(ry))
    _same_bits(rx, np.mod(X[:, :33].astype(np.int64), m).astype(np.uint8))
    _same_bits(ry, np.mod(Y[:, :33].astype(np.int64), m).astype(np.uint8))


@pytest.mark.parametrize("p", [5, 13, 65537, 2**30 - 35, 2**52 - 47])  # primes 1 mod 4
def test_crt_twom_modp(harness, rng, p):
    """2M's result from the residues of its two products X, Y: (X + Y)/2 and (X - Y)/(2s)
    modulo p, against Python's integers, written into tiles with a row stride."""
    s = sqrt_minus_one(p)
    basis = Basis(int8_moduli()[:12])
    hmax = (basis.M - 1) // 2
    E = 600
    xs = _signed([_randbits(rng, int(rng.integers(1, hmax.bit_length() + 1))) % (hmax + 1) for _ in range(E)], rng)
    ys = [hmax, -hmax, 0, p, -p] + _signed([_randbits(rng, 60) for _ in range(E - 5)], rng)
    rx, ry = _residues_of(xs, basis), _residues_of(ys, basis)
    table, limbs, minv, L = _crt_args(basis)
    sp = np.ascontiguousarray(_cuda._small_rows((p if p <= 2**16 else 2,), None, None))
    re, im = np.full((E, 3), -1, dtype=np.int64), np.full((E, 2), -1, dtype=np.int64)
    harness.crt_twom_modp_u8(_ptr(rx), _ptr(ry), len(basis.moduli), E, 1, _ptr(table), _ptr(limbs), _ptr(minv), L,
                             p, _ptr(sp), basis.M % p, (p + 1) // 2, pow(2 * s, -1, p), _ptr(re), 3, _ptr(im), 2)
    inv2, inv2s = pow(2, -1, p), pow(2 * s, -1, p)
    assert re[:, 0].tolist() == [(x + y) * inv2 % p for x, y in zip(xs, ys)]
    assert im[:, 0].tolist() == [(x - y) * inv2s % p for x, y in zip(xs, ys)]
    assert (re[:, 1:] == -1).all() and (im[:, 1:] == -1).all()


def _int32_data(rng, m: int, n: int) -> np.ndarray:
    edges = [0, 1, -1, m - 1, m, -m, m + 1, -m - 1, I32_MIN, I32_MIN + 1, I32_MAX, I32_MAX - 1,
             (I32_MAX // m) * m, -(I32_MAX // m) * m]
    return np.concatenate([np.array(edges, dtype=np.int32),
                           rng.integers(I32_MIN, I32_MAX, n, endpoint=True, dtype=np.int32)])


REDUCE_MODULI = [2, 3, 128, 241, 251, 255, 256]


@pytest.mark.parametrize("m", REDUCE_MODULI)
def test_reduce_i32(harness, rng, m):
    """An int32 GEMM output (row stride past its width) into [0, m), then added to what is there."""
    X = _int32_data(rng, m, 50 * 64 - 14).reshape(50, 64)
    R, C = 50, 61
    table = _table([251, m] if m != 251 else [241, m])
    got = np.zeros((R, C), dtype=np.uint8)
    harness.reduce_i32_u8(_ptr(X), 64, R, C, _ptr(table), 1, 0, _ptr(got))
    want = np.mod(X[:, :C].astype(np.int64), m)
    _same_bits(got, want.astype(np.uint8))
    harness.reduce_i32_u8(_ptr(X[::-1].copy()), 64, R, C, _ptr(table), 1, 1, _ptr(got))
    _same_bits(got, ((want + np.mod(X[::-1, :C].astype(np.int64), m)) % m).astype(np.uint8))


@pytest.mark.parametrize("m", twom_moduli())
def test_twom_combine(harness, rng, m):
    s = sqrt_minus_one(m)
    X = _int32_data(rng, m, 40 * 48 - 14).reshape(40, 48)
    Y = np.concatenate([X.reshape(-1)[:14][::-1], _int32_data(rng, m, 40 * 48 - 14)[14:]]).reshape(40, 48)
    R, C = 40, 45
    re_want, im_want = _modular.twom_combine(np.mod(X[:, :C].astype(np.int64), m),
                                             np.mod(Y[:, :C].astype(np.int64), m), s, m)
    re, im = np.zeros((R, C), dtype=np.uint8), np.zeros((R, C), dtype=np.uint8)
    table = _table([m], [s])
    args = (_ptr(X), _ptr(Y), 48, R, C, _ptr(table), 0, (m + 1) // 2, pow(2 * s, -1, m))
    harness.twom_combine_i32_u8(*args, 0, _ptr(re), _ptr(im))
    _same_bits(re, re_want.astype(np.uint8))
    _same_bits(im, im_want.astype(np.uint8))
    harness.twom_combine_i32_u8(*args, 1, _ptr(re), _ptr(im))  # accumulating: twice the values
    _same_bits(re, (2 * re_want % m).astype(np.uint8))
    _same_bits(im, (2 * im_want % m).astype(np.uint8))


# ------------------------------------------------------------------ CRT

CRT_BASES = {
    "one": (251,),
    "two": (256, 255),
    "int8x16": int8_moduli()[:16],
    "twom": twom_moduli(),
    "int8-all": int8_moduli(),
}


def _crt_args(basis: Basis):
    """The CRT kernels' constants (host arrays): the table with the CRT weights, the limbs, 1/m_i, L."""
    weights, limbs, minv, L = _cuda._crt_rows(tuple(basis.moduli))
    table = _cuda._small_rows(tuple(basis.moduli), None, tuple(weights))
    return np.ascontiguousarray(table), np.ascontiguousarray(limbs), np.ascontiguousarray(minv), L


def _residues_of(values: list[int], basis: Basis) -> np.ndarray:
    return np.array([[v % m for v in values] for m in basis.moduli], dtype=np.uint8)


def _randbits(rng, b: int) -> int:
    """A random integer in [0, 2**b)."""
    return int.from_bytes(rng.bytes(b // 8 + 1), "little") % (1 << b)


def _signed(values: list[int], rng) -> list[int]:
    return [v if rng.random() < 0.5 else -v for v in values]


def _crt_double(harness, res: np.ndarray, basis: Basis, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """The kernel on residues ``res`` (``(N, R*C)``), written into a wider matrix (row stride
    ``2C + 3``, every other column: the layout of a complex tile's part) and read back."""
    table, limbs, minv, L = _crt_args(basis)
    N, E = res.shape
    R, C = sa.size, sb.size
    assert R * C == E
    out = np.full((R, 2 * C + 3), np.nan)
    harness.crt_to_double_u8(_ptr(res), None, N, R, C, _ptr(table), _ptr(limbs), _ptr(minv), L, _ptr(sa), _ptr(sb),
                             out[:, 1:].ctypes.data_as(ctypes.c_void_p), out.shape[1], 2)
    assert np.isnan(out[:, 0]).all() and np.isnan(out[:, 2::2]).all()  # nothing written beside the part
    got = np.ascontiguousarray(out[:, 1:2 * C:2]).reshape(-1)
    # as a complex tile's two parts at once: the same values, interleaved
    both = np.full((R, 2 * C + 3), np.nan)
    im = np.ascontiguousarray(res[:, ::-1])
    harness.crt_to_double_u8(_ptr(res), _ptr(im), N, R, C, _ptr(table), _ptr(limbs), _ptr(minv), L, _ptr(sa),
                             _ptr(sb), both.ctypes.data_as(ctypes.c_void_p), both.shape[1], 2)
    _same_bits(np.ascontiguousarray(both[:, 0:2 * C:2]).reshape(-1), got)
    assert np.isnan(both[:, 2 * C:]).all()
    return got


def _exactly_rounded(v: int, S: int) -> float:
    """``v * 2**-S`` rounded to nearest (ties to even) by Python, infinity past the largest double."""
    try:
        return float(Fraction(v) / 2**S) if S >= 0 else float(v * 2**-S)
    except OverflowError:
        return math.copysign(math.inf, v)


@pytest.mark.parametrize("name", list(CRT_BASES))
def test_crt_to_double_random(harness, rng, name):
    """Random residues (any value of the range), rows and columns of scales from overflow to underflow."""
    basis = Basis(CRT_BASES[name])
    rows, cols = 40, 50
    res = np.stack([rng.integers(0, m, rows * cols) for m in basis.moduli]).astype(np.uint8)
    bits = basis.M.bit_length()
    sa = rng.integers(-1100 + bits, 1150 + bits, rows, dtype=np.int64)
    sb = rng.integers(-30, 30, cols, dtype=np.int64)
    want = _crtfloat.to_double(res.reshape(-1, rows, cols), basis, sa, sb).reshape(-1)
    _same_bits(_crt_double(harness, res, basis, sa, sb), want)


@pytest.mark.parametrize("name", list(CRT_BASES))
def test_crt_to_double_worst_cases(harness, rng, name):
    """Values and scales aimed at the hard places: the range's ends, ties and near-ties of the
    53-bit rounding, and results at the subnormal, underflow and overflow boundaries."""
    basis = Basis(CRT_BASES[name])
    hmax = (basis.M - 1) // 2
    bits = hmax.bit_length()
    values, scales = [], []

    def add(v, S):
        if abs(v) <= hmax:
            values.append(v)
            scales.append(S)

    for v in [0, 1, -1, hmax, -hmax, hmax - 1, -hmax + 1] + ([basis.M // 2] if basis.M % 2 == 0 else []):
        for S in (0, 1, -1, 60, -900, 1074, 1075, 1100):
            add(v, S)
    for k in range(0, max(1, bits - 53), 3):  # ties and near-ties at 53 bits
        for core in (2**53 + 1, 2**54 - 1, 2**53 + 3, 3 * 2**51 + 1):
            for d in (-1, 0, 1):
                for S in (0, 2 * k, -k):
                    add((core << k) + d, S)
                    add(-(core << k) - d, S)
    # results whose exponent is e: v * 2**-S with 2**e <= |result| < 2**(e+1)
    for e in (-1080, -1076, -1075, -1074, -1073, -1060, -1023, -1022, -1021, 1021, 1022, 1023, 1024):
        for _ in range(12):
            b = int(rng.integers(1, bits + 1))
            v = (1 << (b - 1)) | _randbits(rng, b - 1)
            if rng.random() < 0.3 and b > 2:  # exactly a tie at the subnormal precision, or all ones
                v = (1 << (b - 1)) | (1 << (b - 2)) if rng.random() < 0.5 else (1 << b) - 1
            add(v if rng.random() < 0.5 else -v, b - 1 - e)
    res = _residues_of(values, basis)
    sa = np.array(scales, dtype=np.int64)
    sb = np.zeros(1, dtype=np.int64)
    want = _crtfloat.to_double(res.reshape(-1, len(values), 1), basis, sa, sb).reshape(-1)
    got = _crt_double(harness, res, basis, sa, sb)
    _same_bits(got, want)
    exact = np.array([_exactly_rounded(v, S) for v, S in zip(values, scales)])
    _same_bits(got, exact)


def test_crt_to_double_rounds_once_at_the_smallest_normal(harness):
    # a result just below 2**-1022, rounded to 53 bits and then by ldexp to the subnormal
    # grid, could tie upwards to exactly 2**-1022: both kernels must round it once
    basis = Basis(int8_moduli()[:16])
    # (2**53 - 1) * 2**-1075 is the midpoint between the largest subnormal and 2**-1022;
    # these values lie just below it, so they round down to the largest subnormal
    values = [(2**53 - 1) * 2**10 - 1, -((2**53 - 1) * 2**10 - 1), (2**53 - 1) * 2**20 - 2**9 + 1]
    scales = [1085, 1085, 1095]
    res = _residues_of(values, basis)
    sa, sb = np.array(scales, dtype=np.int64), np.zeros(1, dtype=np.int64)
    exact = np.array([_exactly_rounded(v, S) for v, S in zip(values, scales)])
    got = _crt_double(harness, res, basis, sa, sb)
    _same_bits(got, _crtfloat.to_double(res.reshape(-1, len(values), 1), basis, sa, sb).reshape(-1))
    _same_bits(got, exact)


def _crt_modp_cases():
    return [(name, p) for name in CRT_BASES for p in (2, 3, 101, 251, 65521, 65537, 2**31 - 1, 2**52 - 47, 2**61 - 1,
                                                      2**62 + 135, 2**63 - 25, 2**63)]


@pytest.mark.parametrize("name, p", _crt_modp_cases())
def test_crt_to_modp(harness, rng, name, p):
    basis = Basis(CRT_BASES[name])
    hmax = (basis.M - 1) // 2
    values = [0, 1, -1, hmax, -hmax, p, -p, p - 1, 1 - p, 2**63, -(2**63), 2**64 + 1]
    values = [v for v in values if abs(v) <= hmax]
    values += _signed([_randbits(rng, int(rng.integers(1, hmax.bit_length() + 1))) % (hmax + 1)
                       for _ in range(300)], rng)
    res = np.concatenate([_residues_of(values, basis),
                          np.stack([rng.integers(0, m, 2000) for m in basis.moduli]).astype(np.uint8)], axis=1)
    table, limbs, minv, L = _crt_args(basis)
    sp = np.ascontiguousarray(_cuda._small_rows((p if p <= 2**16 else 2,), None, None))
    N, E = res.shape
    got = np.zeros(E, dtype=np.int64)
    harness.crt_to_modp_u8(_ptr(res), N, E, 1, _ptr(table), _ptr(limbs), _ptr(minv), L, p, _ptr(sp), basis.M % p,
                           _ptr(got), 1)
    _same_bits(got, _crt.reconstruct(res, basis, p=p))
    _same_bits(got[: len(values)], np.array([v % p for v in values], dtype=np.uint64).view(np.int64))


# ------------------------------------------------------------------ Ozaki stage (a)

def _stats_operand(rng, rows: int, cols: int, complex_: bool) -> np.ndarray:
    """Entries of every binary exponent (subnormals to the largest doubles), signed zeros,
    zero lines, lines holding Inf or NaN, in rows with a stride past their length."""
    def part():
        x = np.ldexp(rng.uniform(0.5, 1.0, (rows, cols)) * rng.choice([-1.0, 1.0], (rows, cols)),
                     rng.integers(-1074, 1025, (rows, cols)))
        x[rng.random((rows, cols)) < 0.15] = 0.0
        x[rng.random((rows, cols)) < 0.05] = -0.0
        x[rng.random((rows, cols)) < 0.05] = 5e-324
        x[rng.random((rows, cols)) < 0.05] = float(np.finfo(np.float64).max)
        return x
    x = part() + 1j * part() if complex_ else part()
    x[3, :] = 0.0
    x[:, 4] = 0.0
    x[11, :] = np.ldexp(rng.uniform(-1, 1, cols), -1060)  # a row and a column of tiny entries only
    x[:, 12] = np.ldexp(rng.uniform(-1, 1, rows), -1060)
    x[5, 6] = np.inf
    x[7, 8] = np.nan
    x[9, 2] = -np.inf
    if complex_:
        x[10, 1] = complex(1.0, np.nan)
    wide = np.zeros((rows, cols + 5), dtype=x.dtype)
    wide[:, :cols] = x
    return wide[:, :cols]


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("axis", [1, 0])
def test_line_stats(harness, rng, axis, complex_):
    """Maxima, Inf/NaN flags, exact bits, squared norms of the bounds and the bounds themselves,
    bit for bit those of the CPU's one-pass kernels (_ozaki_core._line_stats)."""
    from modlin._algorithms import ozaki as _ozaki_core

    rows, cols = 41, 37
    x = _stats_operand(rng, rows, cols, complex_)
    bars_want = np.zeros((rows, cols), dtype=np.uint8)
    bad_w, ex_w, need_w, sq_w = _ozaki_core._line_stats(x, axis, 10**6, 10**6, bars_want)
    lines = rows if axis == 1 else cols
    bad, ex, need = np.zeros(lines, dtype=np.uint8), np.zeros(lines, dtype=np.int64), np.zeros(lines, dtype=np.int64)
    sq = np.zeros(lines)
    bars = np.full((rows, cols + 2), 77, dtype=np.uint8)
    hist = np.zeros((lines, 2 * GAPS), dtype=np.uint32)
    fn = harness.line_stats_rows if axis == 1 else harness.line_stats_cols
    fn(x.ctypes.data_as(ctypes.c_void_p), x.strides[0] // 8, rows, cols, 1, 2 if complex_ else 1,
       2 if complex_ else 1, _quantize.T_BITS, _ptr(bad), _ptr(ex), _ptr(need), _ptr(sq), _ptr(bars), cols + 2,
       _ptr(hist))
    assert bad.astype(bool).tolist() == bad_w.tolist() and bad.any()
    _same_bits(ex, ex_w.astype(np.int64))
    _same_bits(need, need_w.astype(np.int64))
    _same_bits(sq, sq_w)
    _same_bits(bars[:, :cols], bars_want)
    assert (bars[:, cols:] == 77).all()
    assert need.max() > 1000 and ex.min() < -1000  # the subnormals' exact bits, tiny lines' exponents
    # the gap counts give, for every number of bits g a line may keep, the entries that
    # shifts of g bits round to zero: those the CPU's quantisation counts (Panel.lost)
    for g in (_quantize.T_BITS, 20, 53, _quantize.G_MAX):
        shift = g - ex
        lost = [int(hist[i, g + 1]) + int(hist[i, GAPS + g]) if not bad[i] else 0 for i in range(lines)]
        for i in range(lines):
            one = _quantize.Panel(x, np.where(np.arange(lines) == i, shift, 0), bad_w | (np.arange(lines) != i), axis)
            assert lost[i] == one.lost(), (g, i)
    assert hist[:, 0].sum() == sum(np.count_nonzero(np.take(p, np.flatnonzero(~bad_w), axis=1 - axis))
                                   for p in ([x.real, x.imag] if complex_ else [x]))


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("lb", [40, 120, 400])
def test_fast_scales(harness, rng, lb, symmetric):
    """"fast" mode's split, bits and shifts from line statistics, against
    _quantize.fast_exponents; the summary the host reads in one transfer."""
    m = 53
    n = m if symmetric else 61

    def stats(count):
        ex = rng.integers(-1070, 1024, count).astype(np.int64)
        need = rng.integers(_quantize.T_BITS, 1200, count).astype(np.int64)
        sq = rng.integers(0, 2**40, count).astype(np.float64)
        sq[:3] = [0.0, 1.0, 2.0]
        bad = (rng.random(count) < 0.1).astype(np.uint8)
        return ex, need, sq, bad

    ex_a, need_a, sq_a, bad_a = stats(m)
    ex_b, need_b, sq_b, bad_b = (ex_a, need_a, sq_a, bad_a) if symmetric else stats(n)
    hist_a = rng.integers(0, 1000, (m, 2 * GAPS)).astype(np.uint32)
    hist_b = hist_a if symmetric else rng.integers(0, 1000, (n, 2 * GAPS)).astype(np.uint32)
    sa, sb, summary = np.zeros(m, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(8, dtype=np.int64)
    harness.fast_scales(_ptr(ex_a), _ptr(need_a), _ptr(sq_a), _ptr(bad_a), m, _ptr(ex_b), _ptr(need_b), _ptr(sq_b),
                        _ptr(bad_b), n, int(symmetric), lb, _quantize.T_BITS, _quantize.G_MAX, _ptr(hist_a),
                        _ptr(hist_b), _ptr(sa), _ptr(sb), None, None, _ptr(summary))
    g, h = _quantize.fast_exponents(sq_a, sq_b, lb, need_a, need_b) if _fast_ok(sq_a, sq_b, lb, need_a, need_b) \
        else _raw_fast(sq_a, sq_b, lb, need_a, need_b)
    assert summary[:6].tolist() == [int(g.min()), int(h.min()), int(bad_a.any()), int(bad_b.any()), int(ex_a.max()),
                                    int(ex_b.max())]
    if symmetric:
        g = h = np.minimum(g, h)

    def lost(hist, bits):
        return sum(int(hist[i, b + 1]) + int(hist[i, GAPS + b]) for i, b in enumerate(bits) if b >= _quantize.T_BITS)

    assert summary[6:].tolist() == [lost(hist_a, g), lost(hist_a, g) if symmetric else lost(hist_b, h)]
    _same_bits(sa, g - ex_a)
    _same_bits(sb, h - ex_b)


def _fast_ok(*args) -> bool:
    """Whether fast_exponents accepts these statistics (enough bits for every line)."""
    try:
        _quantize.fast_exponents(*args)
        return True
    except ValueError:
        return False


def _raw_fast(sq_a, sq_b, lb, need_a, need_b):
    """fast_exponents without its check (the kernel reports the least bits; the host refuses)."""
    saved = _quantize._check_bits
    try:
        _quantize._check_bits = lambda g, what: g
        return _quantize.fast_exponents(sq_a, sq_b, lb, need_a, need_b)
    finally:
        _quantize._check_bits = saved


@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("complex_", [False, True])
def test_syrk_combine(harness, rng, pair, complex_):
    """Real SYRK's / HERK's 2M combination of every modulus at once: (x + y)/2 and (x - y)/(2s)
    into the tile and, for a pair, transposed (and negated) into the other; a diagonal
    tile's y is x transposed. Against Python's integers."""
    moduli = list(twom_moduli()[:7])
    roots = [sqrt_minus_one(m) for m in moduli]
    R, C = (9, 13) if pair else (11, 11)
    x = np.stack([rng.integers(0, m, (R, C)) for m in moduli]).astype(np.uint8)
    y = np.stack([rng.integers(0, m, (R, C)) for m in moduli]).astype(np.uint8) if pair else None
    inv2s = np.array([pow(2 * s, -1, m) for m, s in zip(moduli, roots)], dtype=np.uint32)
    re, im = np.full((len(moduli), R, C), 255, dtype=np.uint8), np.full((len(moduli), R, C), 255, dtype=np.uint8)
    ret, imt = np.full((len(moduli), C, R), 255, dtype=np.uint8), np.full((len(moduli), C, R), 255, dtype=np.uint8)
    harness.syrk_combine_u8(_ptr(x), _ptr(y), len(moduli), R, C, _ptr(_table(moduli, roots)), _ptr(inv2s), _ptr(re),
                            _ptr(im) if complex_ else None, _ptr(ret) if pair else None,
                            _ptr(imt) if pair and complex_ else None)
    for i, (m, s) in enumerate(zip(moduli, roots)):
        X = x[i].astype(object)
        Y = (y[i] if pair else x[i].T).astype(object)
        want_re, want_im = (X + Y) * pow(2, -1, m) % m, (X - Y) * pow(2 * s, -1, m) % m
        assert re[i].tolist() == want_re.tolist()
        assert (im[i].tolist() == want_im.tolist()) if complex_ else (im[i] == 255).all()
        if pair:
            assert ret[i].tolist() == want_re.T.tolist()
            assert (imt[i].tolist() == ((-want_im) % m).T.tolist()) if complex_ else (imt[i] == 255).all()


@pytest.mark.parametrize("symmetric", [False, True])
def test_accurate_scales(harness, rng, symmetric):
    """"accurate" mode's passes over the codes of the bound product and its shifts, against
    _quantize.accurate_exponents: the fast pass's bits (fast_scales with g_out, h_out), the
    rows' half slack, the columns, the rows' rest; and bound_code against bound_bits."""
    m = 23
    n = m if symmetric else 31
    lb = 130
    w = rng.integers(0, 2**12, (m, n)).astype(np.float64)  # below the norms' product: room to gain
    w[rng.random((m, n)) < 0.2] = 0.0
    w[0, :3] = [1.0, 2.0, 3.0]
    code = np.zeros((m, n + 3), dtype=np.uint8)
    harness.bound_code_f64(_ptr(w), n, m, n, code.ctypes.data_as(ctypes.c_void_p), n + 3)
    _same_bits(np.ascontiguousarray(code[:, :n]), _quantize.bound_bits(w))
    code = np.ascontiguousarray(code[:, :n])

    def stats(count):
        ex = rng.integers(-50, 50, count).astype(np.int64)
        need = rng.integers(_quantize.T_BITS, 200, count).astype(np.int64)
        sq = rng.integers(1, 2**30, count).astype(np.float64)
        bad = (rng.random(count) < 0.1).astype(np.uint8)
        hist = rng.integers(0, 100, (count, 2 * GAPS)).astype(np.uint32)
        return ex, need, sq, bad, hist

    ex_a, need_a, sq_a, bad_a, hist_a = stats(m)
    ex_b, need_b, sq_b, bad_b, hist_b = (ex_a, need_a, sq_a, bad_a, hist_a) if symmetric else stats(n)
    sa, sb, g, h = (np.zeros(c, dtype=np.int64) for c in (m, n, m, n))
    summary = np.zeros(8, dtype=np.int64)
    harness.fast_scales(_ptr(ex_a), _ptr(need_a), _ptr(sq_a), _ptr(bad_a), m, _ptr(ex_b), _ptr(need_b), _ptr(sq_b),
                        _ptr(bad_b), n, int(symmetric), lb, _quantize.T_BITS, _quantize.G_MAX, _ptr(hist_a),
                        _ptr(hist_b), _ptr(sa), _ptr(sb), _ptr(g), _ptr(h), _ptr(summary))
    fast_g, fast_h = _quantize.fast_exponents(sq_a, sq_b, lb, need_a, need_b)
    _same_bits(g, fast_g)
    _same_bits(h, fast_h)
    top = lb + 2 * _quantize.T_BITS
    harness.accurate_rows(_ptr(code), m, n, _ptr(g), _ptr(h), _ptr(need_a), top, _quantize.G_MAX, 1)
    harness.accurate_cols(_ptr(code), m, n, _ptr(g), _ptr(h), _ptr(need_b), top, _quantize.G_MAX)
    harness.accurate_rows(_ptr(code), m, n, _ptr(g), _ptr(h), _ptr(need_a), top, _quantize.G_MAX, 0)
    want_g, want_h = _quantize.accurate_exponents(sq_a, sq_b, code, lb, need_a, need_b)
    _same_bits(g, want_g)
    _same_bits(h, want_h)
    assert (want_g >= fast_g).all() and (want_g > fast_g).any()  # the passes add bits where the codes allow
    harness.bits_scales(_ptr(g), _ptr(h), _ptr(ex_a), _ptr(bad_a), m, _ptr(ex_b), _ptr(bad_b), n, int(symmetric),
                        _quantize.T_BITS, _ptr(hist_a), _ptr(hist_b), _ptr(sa), _ptr(sb), _ptr(summary))
    if symmetric:
        want_g = want_h = np.minimum(want_g, want_h)
    _same_bits(sa, want_g - ex_a)
    _same_bits(sb, want_h - ex_b)

    def lost(hist, bits):
        return sum(int(hist[i, b + 1]) + int(hist[i, GAPS + b]) for i, b in enumerate(bits) if b >= _quantize.T_BITS)

    assert summary[2:].tolist() == [int(bad_a.any()), int(bad_b.any()), int(ex_a.max()), int(ex_b.max()),
                                    lost(hist_a, want_g), lost(hist_a, want_g) if symmetric else lost(hist_b, want_h)]
