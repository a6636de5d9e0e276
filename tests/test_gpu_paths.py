"""The CuPy code paths, run on the CPU.

No GPU here, so a stand-in plays CuPy: a NumPy array subclass that modlin takes
for ``cupy.ndarray`` (it is recognised through ``sys.modules["cupy"]``), a
module that forwards every ``cupy.*`` call to NumPy, the kernels of
``kernels/`` run by their host twins (``tests/kernels_harness.cu``, the same
per-entry code, compiled by nvcc for the host), and cuBLAS's int8 GEMM by an
exact product from the pointers and leading dimensions :func:`modlin._engines.cuda.gemm_i8`
passes, asserting every int32 sum fits (the machinery is ``tests/cupy_standin.py``).
What runs is modlin's own GPU code: dispatch, planning for the device, batching over
moduli, k splits, the launch arguments, ``gemm_i8``'s padding and layout and the
kernels' arithmetic. What does not run is CUDA itself (grids, shared memory, cuBLAS'
own kernels): ``benchmarks/gpu_report.py`` checks that on a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import types

import numpy as np
import pytest
from cupy_standin import FakeCupyArray, _arg, install

import modlin
import modlin._algorithms.gaussian
from conftest import budgets, same_bits, traced
from modlin import ozaki
from modlin._algorithms import ozaki_tiles
from modlin._arith.moduli import twom_moduli
from modlin._engines import cuda as _cuda
from modlin._planning import tiling as _tiling


@pytest.fixture
def gpu(monkeypatch, harness):
    """Run modlin's CuPy paths on the host (:mod:`cupy_standin`); yields ``to_gpu``."""
    return install(monkeypatch, harness)


PRIMES = [2, 251, 1048573, 2**31 - 1, 2**50 - 27, 2**61 - 1, 2**63 - 25]


@pytest.mark.parametrize("p", PRIMES)
@pytest.mark.parametrize("algorithm", ["multiword", "rns"])
def test_matmul_on_the_gpu_path(gpu, rng, p, algorithm):
    if algorithm == "multiword" and p >= 2**52:
        pytest.skip("multiword plans stop at 2**52")
    m, k, n = 9, 37, 7
    A = rng.integers(-(2**62), 2**62, (m, k))
    B = rng.integers(0, 2**63 - 1, (k, n))
    pl = modlin.plan(p, m, k, n, device="cuda", algorithm=algorithm)
    assert pl.device == "cuda"
    got = modlin.matmul(gpu(A), gpu(B), p, plan=pl)
    assert isinstance(got, FakeCupyArray) and got.dtype == np.int64
    np.testing.assert_array_equal(got.get(), modlin.matmul(A, B, p))
    if not (isinstance(pl, modlin.Plan) and pl.engine == "int8"):  # int8 words need no kernel
        assert gpu.launched, "the GPU path ran no kernel"


@pytest.mark.parametrize("p", [2**31 - 1, 2**50 - 27, 2**61 - 1])
def test_matmul_worst_case_and_thin_shapes(gpu, p):
    A = np.full((3, 700), p - 1)
    for B in (np.full((700, 2), p - 1), np.full((700, 1), p - 1)):
        for pl in (None, modlin.plan(p, 3, 700, B.shape[1], device="cuda", algorithm="rns")):
            got = modlin.matmul(gpu(A), gpu(B), p, plan=pl)
            np.testing.assert_array_equal(got.get(), modlin.matmul(A, B, p))


@pytest.mark.parametrize("variant", ["horner", "concat-b", "concat-a"])
def test_matmul_multiword_variants_on_the_gpu_path(gpu, rng, variant):
    p = 2**40 - 87
    A, B = rng.integers(0, p, (6, 300)), rng.integers(0, p, (300, 5))
    pl = modlin.plan(p, 6, 300, 5, device="cuda", words=(2, 2), variant=variant)
    np.testing.assert_array_equal(modlin.matmul(gpu(A), gpu(B), p, plan=pl).get(), modlin.matmul(A, B, p))


@pytest.mark.parametrize("p, algorithm", [(2**31 - 1, "multiword"), (2**50 - 27, "multiword"), (2**61 - 1, "rns"),
                                          (251, "multiword")])
def test_gpu_products_tile_within_the_device_budget(gpu, rng, p, algorithm):
    # the device's free memory is the budget (a small one here): output tiles and k-panels
    A = rng.integers(0, p, (2, 150, 140))
    B = rng.integers(0, p, (140, 130))
    A[0, 0, :] = B[:, 0] = p - 1
    want = modlin.matmul(A, B, p)
    pl = modlin.plan(p, 150, 140, 130, device="cuda", algorithm=algorithm)
    counts = set()
    for budget in (2**34, pl.tiling(batch=2, budget=2**34).peak // 2, pl.tiling(batch=2, budget=2**34).peak // 12):
        _device_memory(budget)
        try:
            counts.add(pl.tiling(batch=2, budget=budget).count)
        except ValueError:  # below the smallest tile: refused on the device as on the host
            with pytest.raises(ValueError, match="smallest tile"):
                modlin.matmul(gpu(A), gpu(B), p, plan=pl)
            continue
        got = modlin.matmul(gpu(A), gpu(B), p, plan=pl)
        assert isinstance(got, FakeCupyArray)
        np.testing.assert_array_equal(got.get(), want)
    assert 1 in counts and max(counts) > 1


def _device_memory(budget: int) -> None:
    """Give the CuPy stand-in a device whose free memory makes ``budget`` the GPU budget
    (:func:`modlin._planning.tiling.budget`: the free memory, counting the pool's, less the reserve)."""
    free = max(budget * 10 // 9, budget + _tiling.GPU_RESERVE) - 2
    while _tiling.device_budget(free) < budget:  # steps of at most one: the first that reaches it is exact
        free += 1

    class Device:
        mem_info = (free - 2**20, 80 * 2**30)

    class Pool:
        def free_bytes(self):
            return 2**20

    cp = sys.modules["cupy"]
    cp.cuda = types.SimpleNamespace(Device=Device)
    cp.get_default_memory_pool = Pool


def test_gpu_budget_is_the_free_device_memory(gpu):
    from modlin._planning.tiling import budget

    cp = sys.modules["cupy"]
    assert budget(cp) == modlin.limits.current().memory  # no device API: the host budget
    _device_memory(3 * 2**30)
    assert budget(cp) == 3 * 2**30 and budget(np) == modlin.limits.current().memory
    cp.cuda.Device.mem_info = (10 * 2**30, 80 * 2**30)
    assert budget(cp) == 10 * 2**30 + 2**20 - (10 * 2**30 + 2**20) // 10
    cp.cuda.Device.mem_info = (100 * 2**20, 80 * 2**30)  # a tenth is less than the reserve
    assert budget(cp) == 100 * 2**20 + 2**20 - _tiling.GPU_RESERVE
    cp.cuda.Device.mem_info = (2**20, 80 * 2**30)
    assert budget(cp) == 0


def test_matmul_int8_multiword_and_stacks_on_the_gpu_path(gpu, rng):
    p = 251
    A, B = rng.integers(-1000, 1000, (2, 4, 50)), rng.integers(0, 10**6, (50, 3)).astype(np.uint64)
    pl = modlin.plan(p, 4, 50, 3, device="cuda", engine="int8", algorithm="multiword")
    np.testing.assert_array_equal(modlin.matmul(gpu(A), gpu(B), p, plan=pl).get(), modlin.matmul(A, B, p))
    np.testing.assert_array_equal(modlin.matmul(gpu(A[0, 0]), gpu(B), p).get(), modlin.matmul(A[0, 0], B, p))


def test_gpu_plans_prefer_tensor_cores_for_large_products():
    pl = modlin.plan(2**31 - 1, 8192, 8192, 8192, device="cuda")
    assert isinstance(pl, modlin.RNSPlan) and pl.engine == "int8" and pl.device == "cuda"
    assert "on the GPU" in pl.explain()
    assert modlin.plan(2**31 - 1, 8192, 8192, 8192).engine == "fp64"  # the CPU's choice
    with pytest.raises(ValueError, match="does not run on the GPU"):
        modlin.plan(1000003, 64, 64, 64, device="cuda", engine="fp32")
    with pytest.raises(ValueError, match="device must be"):
        modlin.plan(1000003, 64, 64, 64, device="tpu")


@pytest.mark.parametrize("p, n, kind, measured", [
    (1048573, 4096, modlin.Plan, "fp64 (1,1): 1.21 DGEMM times; RNS int8, 7 moduli: 2.53"),
    (2**31 - 1, 8192, modlin.RNSPlan, "RNS int8, 10 moduli: 2.08; best fp64 multiword plan: 3.16"),
])
def test_gpu_planner_picks_what_measured_fastest_on_an_h200(p, n, kind, measured):
    # where one kind of plan was clearly faster on the H200 (docs/gpu-results.md), the
    # calibrated GPU cost model picks it
    pl = modlin.plan(p, n, n, n, device="cuda")
    assert isinstance(pl, kind), (pl.summary, measured)


def test_gpu_cost_model_prices_passes_at_the_gpu_scale():
    import dataclasses

    from modlin._planning import plan as _plan, rnsplan as _rnsplan

    cpu = modlin.plan(2**31 - 1, 4096, 4096, 4096, engine="fp64", algorithm="multiword")
    gpu = dataclasses.replace(cpu, device="cuda")
    # the same GEMMs (fp64 runs at DGEMM speed on both); the passes at GPU_PASS_SCALE times
    # their share on the calibration machine's two cores
    assert gpu.gemm_cost() == cpu.gemm_cost()
    np.testing.assert_allclose(gpu.cost() - gpu.gemm_cost(),
                               _plan.GPU_PASS_SCALE * (cpu.cost(threads=2) - cpu.gemm_cost()), rtol=1e-12)
    rns = modlin.plan(2**61 - 1, 4096, 4096, 4096, device="cuda")
    try:  # the residue number system's fused kernels carry all its passes
        saved, _rnsplan.GPU_PASS_FACTOR = _rnsplan.GPU_PASS_FACTOR, 0.0
        gemms = rns.cost()
    finally:
        _rnsplan.GPU_PASS_FACTOR = saved
    sub = modlin.plan(max(rns.moduli), 4096, 4096, 4096, device="cuda", engine="int8", algorithm="multiword")
    assert gemms == pytest.approx(len(rns.moduli) * sub.gemm_cost(), rel=1e-12)


def _phi_matrix(rng, shape, phi, cplx=False):
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x


@pytest.mark.parametrize("mode", ["fast", "accurate"])
@pytest.mark.parametrize("phi", [0.0, 2.0])
def test_ozaki_dgemm_and_dsyrk_on_the_gpu_path(gpu, rng, mode, phi):
    A, B = _phi_matrix(rng, (11, 60), phi), _phi_matrix(rng, (60, 9), phi)
    A[2, 5] = np.inf
    with np.errstate(invalid="ignore"):
        got, want = ozaki.dgemm(gpu(A), gpu(B), mode=mode), ozaki.dgemm(A, B, engine="int8", mode=mode)
    assert isinstance(got, FakeCupyArray)
    np.testing.assert_array_equal(got.get(), want)
    A[2, 5] = 1.0
    for moduli in (None, 25):  # 25: past the 22 2M moduli, the plain real product joins
        np.testing.assert_array_equal(ozaki.dsyrk(gpu(A), mode=mode, moduli=moduli).get(),
                                      ozaki.dsyrk(A, engine="int8", mode=mode, moduli=moduli))


@pytest.mark.parametrize("algorithm", ["2m", "3m", "4m", "hybrid"])
def test_ozaki_zgemm_and_zherk_on_the_gpu_path(gpu, rng, algorithm):
    Z, W = _phi_matrix(rng, (10, 45), 1.0, True), _phi_matrix(rng, (45, 8), 1.0, True)
    moduli = 24 if algorithm == "hybrid" else None
    got = ozaki.zgemm(gpu(Z), gpu(W), algorithm=algorithm, moduli=moduli, alpha=2 - 1j, beta=0.5,
                      C=gpu(np.ones((10, 8), dtype=complex)))
    want = ozaki.zgemm(Z, W, engine="int8", algorithm=algorithm, moduli=moduli, alpha=2 - 1j, beta=0.5,
                       C=np.ones((10, 8), dtype=complex))
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(ozaki.zherk(gpu(Z), algorithm=algorithm, moduli=moduli).get(),
                                  ozaki.zherk(Z, engine="int8", algorithm=algorithm, moduli=moduli))


@pytest.mark.filterwarnings("ignore::modlin.ozaki.AccuracyWarning")
def test_ozaki_overflow_in_dropped_entries_on_the_gpu_path(gpu):
    # the scaling drops 1e10 and 1.0: the truncated product is 0, the exact 1e310 rounds to inf
    A = np.array([[1e300, 1e-300, 1.0], [1.0, 2.0, 3.0]])
    B = np.array([[1e10, 1.0], [1e300, 2.0], [1.0, 1.0]])
    got = ozaki.dgemm(gpu(A), gpu(B))
    np.testing.assert_array_equal(got.get(), ozaki.dgemm(A, B, engine="int8"))
    assert got.get()[0, 0] == np.inf
    assert ozaki.zgemm(gpu(-1j * A), gpu(B)).get()[0, 0] == complex(0, -np.inf)
    assert ozaki.dsyrk(gpu(np.vstack([A[:1], B[:, :1].T]))).get()[0, 1] == np.inf


def test_ozaki_splits_k_past_the_int32_limit_on_the_gpu_path(gpu, rng):
    k = _cuda.KMAX + 5
    A, B = _phi_matrix(rng, (2, k), 0.5), _phi_matrix(rng, (k, 2), 0.5)
    np.testing.assert_array_equal(ozaki.dgemm(gpu(A), gpu(B)).get(), ozaki.dgemm(A, B, engine="int8"))


def test_ozaki_uses_the_int8_engine_on_the_gpu(gpu):
    A = gpu(np.eye(3))
    with pytest.raises(ValueError, match="int8 engine"):
        ozaki.dgemm(A, A, engine="fp64")
    assert ozaki.moduli_for("complex", engine="int8")[0] == twom_moduli()[:17]


@pytest.mark.parametrize("m", [5, 13 * 17, 2**31 - 1, 1000000009, 2**50 - 27])
@pytest.mark.parametrize("algorithm", ["auto", "2m", "3m", "4m"])
def test_gaussian_matmul_on_the_gpu_path(gpu, rng, m, algorithm):
    if algorithm == "2m" and not modlin.gaussian.is_twom_modulus(m):
        pytest.skip("no square root of -1 modulo m")
    A = rng.integers(-(2**40), 2**40, (2, 5, 31)) + 1j * rng.integers(-(2**40), 2**40, (2, 5, 31))
    Br, Bi = rng.integers(-(2**62), 2**62, (31, 4)), rng.integers(0, 2**63 - 1, (31, 4))
    got = modlin.gaussian.matmul(gpu(A), (gpu(Br), gpu(Bi)), m, algorithm=algorithm)
    want = modlin.gaussian.matmul(A, (Br, Bi), m, algorithm=algorithm)
    for g, w in zip(got, want):
        assert isinstance(g, FakeCupyArray)
        np.testing.assert_array_equal(g.get(), w)


def test_gaussian_matmul_gpu_input_errors(gpu):
    with pytest.raises(ValueError, match="finite integers"):
        modlin.gaussian.matmul(gpu(np.array([[0.5 + 1j]])), gpu(np.array([[1j]])), 5)
    with pytest.raises(TypeError, match="mix NumPy and CuPy"):
        modlin.gaussian.matmul(gpu(np.eye(2) * 1j), np.eye(2) * 1j, 5)


def test_mixing_numpy_and_cupy_is_refused(gpu):
    A = np.eye(3, dtype=np.int64)
    for call in (lambda: modlin.matmul(gpu(A), A, 7), lambda: ozaki.dgemm(A, gpu(A * 1.0)),
                 lambda: ozaki.zgemm(gpu(A * 1j), gpu(A * 1j), beta=1.0, C=np.eye(3))):
        with pytest.raises(TypeError, match="mix NumPy and CuPy"):
            call()


def test_functions_without_a_gpu_path_say_so(gpu):
    A = gpu(np.eye(3, dtype=np.int64))
    for call in (lambda: modlin.intmul(A, A), lambda: modlin.gaussian.herk((A, A), 5),
                 lambda: modlin.gaussian.syrk(A, 5), lambda: modlin.linalg.rank(A, 7),
                 lambda: modlin.linalg.trsm(A, A, 7), lambda: modlin.linalg.det(A),
                 lambda: modlin.linalg.solve(A, A)):  # the last two: over Z and Q
        with pytest.raises(TypeError, match="does not run on CuPy arrays yet"):
            call()


def test_gpu_matmul_input_errors(gpu):
    A = gpu(np.eye(3))
    with pytest.raises(TypeError, match="integer or boolean CuPy arrays"):
        modlin.matmul(A, A, 7)
    B = gpu(np.eye(3, dtype=np.int64))
    with pytest.raises(ValueError, match="below 2\\*\\*63"):
        modlin.matmul(B, B, 2**64 - 59)
    with pytest.raises(TypeError, match="needs the modulus"):
        modlin.matmul(B, B)
    with pytest.raises(ValueError, match="device='cuda'"):
        modlin.matmul(B, B, 7, plan=modlin.plan(7, 3, 3, 3))


def test_fake_launch_passes_pointers():
    # the stand-in must hand the harness real addresses, and NULL for an absent operand
    x = np.arange(4.0)
    assert _arg(x, ctypes.c_void_p) == x.ctypes.data and _arg(np.uint64(0), ctypes.c_void_p) is None
    assert _arg(np.int32(3), ctypes.c_int) == 3 and _arg(np.uint64(0), ctypes.c_ulonglong) == 0
    with pytest.raises(AssertionError):
        _arg(3, ctypes.c_int)  # a Python int would reach CUDA as 64 bits


def test_gpu_report_runs_on_the_stand_in(harness, tmp_path, gpu, monkeypatch):
    # GPU time is scarce: the report's own checks and table code must work before it gets any
    import importlib.util
    import json
    import pathlib

    spec = importlib.util.spec_from_file_location(
        "gpu_report", pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    # the model section's ledger, made beforehand as on a machine without a GPU (its own
    # stand-in inside ours, undone on return), at a small size
    bench = report._ledger_module()
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps(bench.run(8192, 128, harness=harness), default=str))
    class Stream:  # the stand-in runs everything at once, in order: streams only pass the calls on
        def __init__(self, non_blocking=False):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

        def record(self):
            return object()

        def wait_event(self, event):
            assert event is not None

    stream = Stream()

    class MemoryHook:  # CuPy's hooks see the device pool; here they see nothing
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class Pool:
        def free_all_blocks(self):
            pass

        def free_bytes(self):
            return 0

    cp = sys.modules["cupy"]
    runtime = types.SimpleNamespace(getDeviceProperties=lambda i: {"name": b"NVIDIA H100 80GB HBM3"},
                                    runtimeGetVersion=lambda: 13020)
    cp.cuda = types.SimpleNamespace(get_current_stream=lambda: stream, Stream=Stream, MemoryHook=MemoryHook,
                                    runtime=runtime,
                                    Device=lambda: types.SimpleNamespace(id=0, mem_info=(2**27, 2**30)))
    cp.get_default_memory_pool = Pool
    monkeypatch.setattr(cp, "__version__", "stand-in", raising=False)
    lines: list[str] = []
    assert report.check(lines), "\n".join(lines)
    assert len(lines) > 20 and all("| ok |" in line for line in lines)
    table: list[str] = []
    report.table(table, [40], 1)
    assert len(table) >= 18 and not any("nan" in line for line in table), "\n".join(table)
    rows: list[str] = []
    report.passes(rows, [40], 1)
    assert len(rows) == 2 + 4 and not any("FAILED" in r or "nan" in r for r in rows), "\n".join(rows)
    rows = []
    assert report.memory(rows, 40, 1), "\n".join(rows)
    assert sum("| yes | yes |" in r for r in rows) == 12, "\n".join(rows)
    rows = []  # the reductions beside the GEMMs: the same residues (on a GPU, a race would differ)
    assert report.overlap(rows, [40], 1), "\n".join(rows)
    assert len(rows) == 2 + 2 and all(r.endswith("| yes |") for r in rows[2:]), "\n".join(rows)
    rows = []
    report.stages(rows, [40], 1)
    assert len(rows) == 2 + 3 + 1 and all("%" in r for r in rows[2:-1]), "\n".join(rows)
    # the model section through the command line, as on the GPU: every path of the ledger,
    # each stage timed (the GEMMs, stage a, the CRT) beside its model, the whole beside its sum
    out = tmp_path / "report.md"
    assert report.main(["--sections", "model", "--sizes", "48", "--repeats", "1", "--ledger", str(ledger),
                        "--out", str(out)]) == 0
    text = out.read_text()
    assert "GPU: NVIDIA H100 80GB HBM3: the model's H100 constants" in text and "nan" not in text, text
    assert "FAILED" not in text and "stopped by an error" not in text, text
    for name in bench.MEASURED_H200_8192:
        whole = [r for r in text.splitlines() if r.startswith(f"| 48 | {name} | **whole**")]
        assert len(whole) == 1, (name, text)
        stage_rows = [r for r in text.splitlines() if r.startswith(f"| 48 | {name} | ")]
        gemms = [r for r in stage_rows if f"| {bench.GEMM_STAGE} |" in r]
        assert len(gemms) == 1 and "int8 GEMM / DGEMM" in gemms[0], stage_rows
        assert any("| (c) CRT |" in r and "untimed" not in r for r in stage_rows), stage_rows
    rows = []
    report.model(rows, [48], 1)  # no ledger: said so, nothing run
    assert len(rows) == 2 and "unavailable" in rows[0]


def test_gpu_front_doors_refuse_what_they_cannot_read(gpu):
    B = gpu(np.eye(3, dtype=np.int64))
    for call, name in ((lambda: modlin.matmul(None, B, 7), "A"), (lambda: modlin.matmul(B, {"a": 1}, 7), "B"),
                       (lambda: ozaki.dgemm(gpu(np.eye(2)), None), "B"),
                       (lambda: modlin.gaussian.matmul(B, (B, None), 7), r"B \(imaginary part\)")):
        with pytest.raises(TypeError, match=f"^{name} is"):
            call()


def test_ozaki_scipy_names_on_the_gpu_path(gpu, rng):
    A, B = _phi_matrix(rng, (20, 7), 0.5), _phi_matrix(rng, (20, 5), 0.5)
    got = ozaki.dgemm(gpu(A), gpu(B), trans_a=1)
    assert isinstance(got, FakeCupyArray)
    np.testing.assert_array_equal(got.get(), ozaki.dgemm(A.T.copy(), B, engine="int8"))
    low = ozaki.dsyrk(gpu(A), trans=1, lower=True)
    assert isinstance(low, FakeCupyArray)
    np.testing.assert_array_equal(low.get(), np.tril(ozaki.dsyrk(A.T.copy(), engine="int8")))
    Z = _phi_matrix(rng, (6, 9), 1.0, True)
    np.testing.assert_array_equal(ozaki.zgemm(gpu(Z), gpu(Z), trans_b=2).get(),
                                  ozaki.zgemm(Z, Z.conj().T.copy(), engine="int8"))
    np.testing.assert_array_equal(ozaki.zherk(gpu(Z), trans="C", lower=False).get(),
                                  np.triu(ozaki.zherk(Z.conj().T.copy(), engine="int8")))


def _device_budgets(tiling_of):
    """:func:`conftest.budgets` of the stand-in's device (its free memory: :func:`_device_memory`)."""
    return budgets(tiling_of, within=lambda b: contextlib.nullcontext(_device_memory(b)))


@pytest.mark.parametrize("fn, kw, panels", [(ozaki.dgemm, {}, True), (ozaki.dgemm, {"mode": "accurate"}, False),
                                            (ozaki.zgemm, {"algorithm": "hybrid", "moduli": 24}, True),
                                            (ozaki.zgemm, {"algorithm": "4m"}, False),
                                            (ozaki.dsyrk, {"moduli": 25}, False),
                                            (ozaki.zherk, {}, False), (ozaki.zherk, {"algorithm": "3m"}, False)],
                         ids=["dgemm", "dgemm-accurate", "zgemm-hybrid", "zgemm-4m", "dsyrk-real-moduli", "zherk",
                              "zherk-3m"])
def test_ozaki_gpu_paths_tile_within_the_device_budget(gpu, rng, fn, kw, panels):
    # the CPU's tile loop with the GPU's kernels: the same bits under every device budget
    complex_ = fn in (ozaki.zgemm, ozaki.zherk)
    symmetric = fn in (ozaki.dsyrk, ozaki.zherk)
    # k well above m and n: the budgets that squeeze the tiles split k too (stage (a) keeps
    # nothing of a piece's size on the device, so k alone weighs little in the model)
    m, k, n = 150, 420 if panels else 140, 130
    A = _phi_matrix(rng, (m, k), 1.0, complex_)
    B = None if symmetric else _phi_matrix(rng, (k, n), 1.0, complex_)
    A[7, 3] = np.nan
    args = (gpu(A),) if symmetric else (gpu(A), gpu(B))
    kind = "syrk" if fn is ozaki.dsyrk else ("complex" if complex_ else "real")
    mods = ozaki._resolve(kind, "int8", kw.get("moduli"), kw.get("algorithm", "auto"), gpu=True, k=k,
                          spread=ozaki._default_spread(kw.get("moduli"), A, B))
    shape = (m, k, m if symmetric else n)
    cp = sys.modules["cupy"]

    def tiling():
        return ozaki_tiles.product_tiling(mods, complex_, shape, kw.get("mode", "fast"), symmetric, cp)[0]

    with np.errstate(invalid="ignore"):
        want = fn(*(x.get() for x in args), engine="int8", **kw)
        counts, grids = set(), set()
        for _, t in _device_budgets(tiling):
            _device_memory(t.budget)
            got = fn(*args, **kw)
            assert isinstance(got, FakeCupyArray) and same_bits(got.get(), want), t.grid
            counts.add(t.count)
            grids.add(t.grid)
    assert 1 in counts and max(counts) >= 4, counts
    assert not panels or any(g[1] > 1 for g in grids), grids  # k-panels: residues added on the device


def test_ozaki_gpu_working_memory_within_the_model(gpu, rng):
    # the stand-in allocates host memory where CuPy would allocate device memory: traced
    Z, W = _phi_matrix(rng, (160, 150), 1.0, True), _phi_matrix(rng, (150, 140), 1.0, True)
    mods = ozaki._resolve("complex", "int8", None, "auto", gpu=True, k=150, spread=ozaki.spread_bits(Z, W))
    cp = sys.modules["cupy"]
    for _, t in _device_budgets(lambda: ozaki_tiles.product_tiling(mods, True, (160, 150, 140), "fast", False, cp)[0])[1:]:
        _device_memory(t.budget)
        c, peak = traced(lambda: ozaki.zgemm(gpu(Z), gpu(W)))
        assert peak - c.nbytes - Z.nbytes - W.nbytes <= t.peak, (t.grid, peak, t.peak)


@pytest.mark.parametrize("m, algorithm", [(2**21 - 19, "2m"), (2**31 - 1, "3m"), (2**50 - 27, "4m")])
def test_gaussian_gpu_matmul_tiles_within_the_device_budget(gpu, rng, m, algorithm):
    Ar, Ai = rng.integers(0, m, (2, 150, 140)), rng.integers(0, m, (2, 150, 140))
    Br, Bi = rng.integers(-(2**62), 2**62, (140, 130)), rng.integers(0, 2**63 - 1, (140, 130)).astype(np.uint64)
    Ar[0, 0, :] = Ai[1, -1, :] = m - 1
    want = modlin.gaussian.matmul((Ar, Ai), (Br, Bi), m, algorithm=algorithm)
    pl = modlin.plan(m, 150, 140, 130, device="cuda")
    cp = sys.modules["cupy"]
    counts = set()
    for batch in (2, 1):
        for _, t in _device_budgets(lambda b=batch: modlin._algorithms.gaussian.gauss_tiling(pl, algorithm, False, (150, 140, 130), b,
                                                                            xp=cp)):
            _device_memory(t.budget)
            got = modlin.gaussian.matmul((gpu(Ar), gpu(Ai)), (gpu(Br), gpu(Bi)), m, algorithm=algorithm)
            assert all(isinstance(g, FakeCupyArray) and np.array_equal(g.get(), w) for g, w in zip(got, want)), t.grid
            counts.add(t.count * (3 - batch))  # matrix by matrix: twice the tiles
    assert 1 in counts and max(counts) >= 7, counts
    # a complex CuPy operand with a real one, and a vector
    Z = (Ar[0] + 1j * Ai[0]).astype(np.complex128)
    got = modlin.gaussian.matmul(gpu(Z), gpu(Br[:, 0]), m, algorithm=algorithm)
    want = modlin.gaussian.matmul(Z, Br[:, 0], m, algorithm=algorithm)
    assert all(np.array_equal(g.get(), w) for g, w in zip(got, want))
    _device_memory(1000)
    with pytest.raises(ValueError, match="smallest tile"):
        modlin.gaussian.matmul((gpu(Ar), gpu(Ai)), (gpu(Br), gpu(Bi)), m, algorithm=algorithm)


@pytest.mark.parametrize("algorithm", ["2m", "3m"])
def test_gaussian_gpu_working_memory_within_the_model(gpu, rng, algorithm):
    # as for ozaki: the stand-in's "device" allocations are host allocations, traced
    m = 2**21 - 19 if algorithm == "2m" else 2**31 - 1
    a = gpu(rng.integers(0, m, (150, 140))), gpu(rng.integers(0, m, (150, 140)))
    b = gpu(rng.integers(0, m, (140, 130))), gpu(rng.integers(0, m, (140, 130)))
    pl = modlin.plan(m, 150, 140, 130, device="cuda")
    cp = sys.modules["cupy"]
    for _, t in _device_budgets(lambda: modlin._algorithms.gaussian.gauss_tiling(pl, algorithm, False, (150, 140, 130), 1, xp=cp)):
        _device_memory(t.budget)
        (re, im), peak = traced(lambda: modlin.gaussian.matmul(a, b, m, algorithm=algorithm))
        assert peak - re.nbytes - im.nbytes <= t.peak, (t.grid, peak, t.peak)


@pytest.mark.parametrize("p", [2**31 - 1, 2**61 - 1])
def test_dask_arrays_of_gpu_chunks(gpu, rng, p):
    """A dask array of CuPy chunks runs each chunk pair through the GPU path (matmul: each
    pair's product mod p, added mod p on the device; gaussian; ozaki: the device's residue
    kernels, adds and CRT); results equal to the CPU ones, chunks of the GPU's type (the
    gathered whole is the stand-in's NumPy concatenation: real CuPy's would stay on the device)."""
    da = pytest.importorskip("dask.array")
    from modlin import gaussian

    def lazy(x, chunks):
        return da.from_array(gpu(x), chunks=chunks, asarray=False)

    A, B = rng.integers(0, p, (20, 26)), rng.integers(0, p, (26, 14))
    C = modlin.matmul(lazy(A, (8, 10)), lazy(B, (9, 7)), p)
    assert isinstance(C._meta, FakeCupyArray)
    assert isinstance(C.blocks[1, 0].compute(scheduler="sync"), FakeCupyArray)
    assert np.array_equal(np.asarray(C.compute(scheduler="sync")), modlin.matmul(A, B, p))
    m = 1048573
    Z = (rng.integers(0, m, (12, 10)), rng.integers(0, m, (12, 10)))
    W = (rng.integers(0, m, (10, 6)), rng.integers(0, m, (10, 6)))
    re, im = gaussian.matmul(tuple(lazy(x, 5) for x in Z), tuple(lazy(x, 4) for x in W), m, algorithm="3m")
    want = gaussian.matmul(Z, W, m, algorithm="3m")
    assert all(np.array_equal(np.asarray(x.compute(scheduler="sync")), w) for x, w in zip((re, im), want))
    X = rng.standard_normal((12, 18)) + 1j * rng.standard_normal((12, 18))
    Y = rng.standard_normal((18, 9)) + 1j * rng.standard_normal((18, 9))
    Z = ozaki.zgemm(lazy(X, (5, 7)), lazy(Y, (6, 4)), engine="int8", algorithm="hybrid")
    assert isinstance(Z.blocks[0, 1].compute(scheduler="sync"), FakeCupyArray)
    assert same_bits(np.asarray(Z.compute(scheduler="sync")), ozaki.zgemm(X, Y, engine="int8", algorithm="hybrid"))


@pytest.mark.parametrize("shape", [(0, 3, 2), (3, 0, 2), (2, 3, 0), (1, 1, 1), (33, 1, 37), (1, 65, 1)])
def test_fused_gpu_paths_at_the_edges(gpu, rng, shape):
    """Empty products, k = 0, 1 x 1, one column or row, a Fortran-ordered operand: every
    fused GPU path gives the CPU's result, bit for bit (Ozaki on the same moduli)."""
    m, k, n = shape
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    Z, W = A + 0.5j * rng.standard_normal((m, k)), B - 0.25j * rng.standard_normal((k, n))
    cases = [(ozaki.dgemm(gpu(np.asfortranarray(A)), gpu(B)), ozaki.dgemm(A, B, engine="int8")),
             (ozaki.zgemm(gpu(Z), gpu(W)), ozaki.zgemm(Z, W, engine="int8")),
             (ozaki.zgemm(gpu(Z), gpu(W), mode="accurate"), ozaki.zgemm(Z, W, engine="int8", mode="accurate")),
             (ozaki.zherk(gpu(Z)), ozaki.zherk(Z, engine="int8")),
             (ozaki.dsyrk(gpu(A)), ozaki.dsyrk(A, engine="int8"))]
    for got, want in cases:
        assert same_bits(got.get(), want)
    X, Y = rng.integers(-(2**62), 2**62, (m, k)), rng.integers(0, 2**63 - 1, (k, n))
    for p in (251, 2**31 - 1, 2**61 - 1):
        pl = modlin.plan(p, max(m, 1), max(k, 1), max(n, 1), device="cuda", algorithm="rns")
        np.testing.assert_array_equal(modlin.matmul(gpu(X), gpu(Y), p, plan=pl).get(), modlin.matmul(X, Y, p))
    parts = [rng.integers(-(2**40), 2**40, s) for s in ((m, k), (m, k), (k, n), (k, n))]
    got = modlin.gaussian.matmul((gpu(parts[0]), gpu(parts[1])), (gpu(parts[2]), gpu(parts[3])), 2**30 - 35,
                                 algorithm="2m")
    want = modlin.gaussian.matmul((parts[0], parts[1]), (parts[2], parts[3]), 2**30 - 35, algorithm="2m")
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.get(), w)
