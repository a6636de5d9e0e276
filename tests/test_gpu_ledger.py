"""The traffic ledger of the CuPy stand-in (``tests/cupy_standin.py``), and the GPU paths' budgets.

First the ledger itself: a kernel launch records the bytes of the arrays it reads and
writes, a CuPy operation its inputs and outputs, views and allocations nothing, host
reads are syncs, host data sent over are uploads, and an operation is recorded once
however NumPy carries it out. Then each path of issue #44 (those of
``benchmarks/gpu_ledger.py``, at a small size, planned as at n = 8192) within a budget of
launches, host syncs, uploads and non-GEMM bytes per output entry: :data:`BUDGETS`.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import sys

import numpy as np
import pytest
from cupy_standin import IN_PLACE, POISON, FakeCupyArray, install

import modlin
from modlin._engines import cuda as _cuda

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The size the budgets are measured at (square products; the plans are those of n = 8192).
N_TEST = 256

#: Per path at n = N_TEST: kernel launches and CuPy operations, GEMM calls, host syncs,
#: uploads and non-GEMM bytes per output entry. Before the fused kernels (d7ecb7d) they were
#: 234 + 2 GEMM calls / 20 syncs / 2532 B (zgemm), 164 + 1 / 16 / 1180 B (dgemm),
#: 24 + 1 / 0 / 272 B (2^31-1), 32 + 1 / 0 / 352 B (2^61-1), 102 + 2 / 0 / 1488 B (gaussian).
#: The targets of issue #44 are beside them. Stage (a)'s per-line statistics (a row or column
#: of A or B: about 0.7 KB each, its gap counts most of it) weigh 2 * 0.7 KB / n per output
#: entry: 5-6 B at n = 256, 0.2 B at 8192 (benchmarks/gpu_ledger.py --n 8192 extrapolates).
BUDGETS: dict[str, dict[str, int]] = {
    # target: <= 24 launches + the GEMMs, <= 1 host sync, <= 450 B per entry
    "ozaki.zgemm 2M, 16 moduli": {"launches": 22, "gemms": 32, "syncs": 1, "uploads": 4, "bytes_per_entry": 342},
    # target: <= 250 B per entry
    "ozaki.dgemm, 16 moduli": {"launches": 22, "gemms": 16, "syncs": 1, "uploads": 4, "bytes_per_entry": 182},
    # target: <= 140 B per entry
    "matmul mod 2^31-1": {"launches": 13, "gemms": 10, "syncs": 0, "uploads": 3, "bytes_per_entry": 106},
    # target: <= 220 B per entry
    "matmul mod 2^61-1": {"launches": 21, "gemms": 18, "syncs": 0, "uploads": 3, "bytes_per_entry": 170},
    # no target in the issue ("the same treatment" as the others)
    "gaussian.matmul 2M, 30-bit m": {"launches": 13, "gemms": 20, "syncs": 0, "uploads": 3, "bytes_per_entry": 210},
}


def _load_bench():
    spec = importlib.util.spec_from_file_location("gpu_ledger", ROOT / "benchmarks" / "gpu_ledger.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


@pytest.fixture
def gpu(monkeypatch, harness):
    """The CuPy stand-in with an H200's free memory (a big GPU's tiling); yields ``to_gpu``."""
    return install(monkeypatch, harness, device_memory=bench.CONSTANTS["h200_memory"]["value"])


def _rows(records):
    return [(r.kind, r.name, r.bytes_read, r.bytes_written) for r in records]


# ----------------------------------------------------------------------------- the ledger

def test_a_kernel_launch_records_the_bytes_of_its_arrays(gpu):
    cp = gpu.cupy
    X = gpu(np.arange(-50, 50, dtype=np.int32).reshape(1, 100))
    out = cp.empty((1, 100), dtype=cp.uint8)
    table = _cuda.small_table([7])
    assert (out.view(np.ndarray) == POISON).all()  # device memory is handed out dirty
    args = (np.int64(100), np.int64(1), np.int64(100), table, np.int32(0), np.int32(0), out)
    with gpu.ledger as led:
        _cuda.launch("reduce_i32_u8", 100, X, *args, shape=(1, 100))
        _cuda.launch("reduce_i32_u8", 0, X, *args, shape=(1, 100))  # nothing to launch
    np.testing.assert_array_equal(out.get()[0], np.arange(-50, 50) % 7)
    # the output is written, not read; the int32 input and the table (8 uint32) read; the
    # .get() after the block not counted
    assert _rows(led.records) == [("launch", "reduce_i32_u8", 400 + 32, 100)]
    assert led.records[0].roles == ("r", "", "", "", "r", "", "", "w")
    assert led.summary(100)["kernels"] == 1 and led.summary(100)["bytes_per_entry"] == 5.32


def test_in_place_and_aliased_kernels(gpu):
    # mw_step updates x in place (read and written); mw_finalize may write its int64 result
    # over the doubles it reads (the multiword accumulator is the output's memory)
    x, t = gpu(np.arange(8.0) + 0.5), gpu(np.arange(8.0))
    consts = [np.float64(v) for v in (7.0, 7.0, 0.0, 1.0, 7.0, 7.0, 0.0, 7.0, 7.0, 0.0)]
    with gpu.ledger as led:
        _cuda.launch("mw_step", 8, x, t, np.int64(8), *consts)
        _cuda.launch("mw_finalize", 8, x, np.uint64(0), np.int64(8), *consts, *consts[:3], np.int64(7),
                     x.view(np.int64))
    step, fin = led.records
    assert (step.roles[:2], step.bytes_read, step.bytes_written) == (("rw", "r"), 128, 64)
    assert (fin.roles[:2], fin.roles[-1], fin.bytes_read, fin.bytes_written) == (("r", ""), "w", 64, 64)
    assert set(IN_PLACE) <= set(_declared_roles())


def test_cupy_operations_record_inputs_read_and_outputs_written(gpu):
    cp = gpu.cupy
    x, y = gpu(np.arange(12.0).reshape(3, 4)), gpu(np.ones((3, 4)))
    with gpu.ledger as led:
        z = x + y
        top = z.max()
        small = x.astype(np.int8)
        w = cp.where(x > 5, x, 0.0)
        zeros = cp.zeros((3, 4))
        fresh = cp.empty((3, 4))  # an allocation: no kernel, no bytes
        x[0] = y[1]
        x[...] = 0
        y += 1
    assert _rows(led.records) == [
        ("cupy", "add", 192, 96), ("cupy", "maximum.reduce", 96, 8), ("cupy", "astype", 96, 12),
        ("cupy", "greater", 96, 12), ("cupy", "where", 108, 96), ("cupy", "zeros", 0, 96),
        ("cupy", "setitem", 32, 32), ("cupy", "setitem", 0, 96), ("cupy", "add", 96, 96)]
    # results stay on the device, a reduction's too (a 0-d array, as CuPy's)
    assert all(isinstance(v, FakeCupyArray) for v in (z, top, small, w, zeros, fresh, y))
    assert top.ndim == 0 and float(top) == 12.0
    s = led.summary(12)
    assert (s["cupy_ops"], s["launches"], s["non_gemm_bytes"]) == (9, 9, 1260)


def test_views_and_allocations_cost_nothing(gpu):
    cp = gpu.cupy
    x = gpu(np.arange(24.0).reshape(4, 6))
    with gpu.ledger as led:
        views = [x[1:], x[:, ::2], x.T, x.reshape(6, 4), x.reshape(-1), x.ravel(), cp.broadcast_to(x[0], (5, 6)),
                 x.astype(np.float64, copy=False), cp.ascontiguousarray(x), cp.asarray(x), x.real, x[None],
                 cp.expand_dims(x, 0), x.swapaxes(0, 1), x.transpose(), x[1, 2], x.view(np.int64), x[..., 0]]
        cp.empty_like(x)
    assert led.records == []
    assert all(isinstance(v, FakeCupyArray) and np.shares_memory(v, x) for v in views)
    assert views[15].ndim == 0  # an entry is a 0-d view on the device, not a host scalar
    with gpu.ledger as led:
        x.T.reshape(-1)  # not a view: a copy
    assert _rows(led.records) == [("cupy", "reshape", 192, 192)]


def test_gathers_scatters_and_uploads(gpu):
    cp = gpu.cupy
    x, idx = gpu(np.arange(10.0)), gpu(np.array([1, 3, 5]))
    mask = x > 4
    with gpu.ledger as led:
        x[idx]
        x[mask]  # the result's size depends on the data: CuPy reads the count back
        x[[0, 2]] = 7.0  # the host list goes over first
        cp.asarray([1, 2, 3])
        cp.asarray(np.ones(4, dtype=np.int32))
    assert _rows(led.records) == [
        ("cupy", "getitem (gather)", 48, 24), ("sync", "getitem (boolean mask: result size)", 8, 0),
        ("cupy", "getitem (gather)", 50, 40), ("upload", "setitem (host index)", 0, 16),
        ("cupy", "setitem (scatter)", 0, 16), ("upload", "asarray", 0, 24), ("upload", "asarray", 0, 16)]
    s = led.summary(10)
    assert (s["uploads"], s["upload_bytes"], s["syncs"]) == (3, 56, 1)


def test_host_reads_are_syncs(gpu):
    cp = gpu.cupy
    x = gpu(np.arange(6.0))
    with gpu.ledger as led:
        assert bool(x.any()) and int(x.sum()) == 15 and float(x.max()) == 5.0
        x.get()
        cp.asnumpy(x)
        assert x[2].item() == 2.0 and x.tolist()[3] == 3.0
        assert [float(v) for v in x[:2]] == [0.0, 1.0]  # iterating gives device entries
        np.arange(10)[gpu(np.array(3))]  # a device integer as a host index
    syncs = led.of("sync")
    assert [(r.name, r.bytes_read) for r in syncs] == [
        ("bool", 1), ("int", 8), ("float", 8), ("get", 48), ("get", 48), ("item", 8), ("tolist", 48), ("float", 8),
        ("float", 8), ("index", 8)]
    assert led.summary(6)["syncs"] == 10 and led.summary(6)["cupy_ops"] == 3  # any, sum, max


def test_each_operation_is_recorded_once(gpu):
    # NumPy carries out tril, full_like and count_nonzero with NumPy calls of its own:
    # the guard keeps them out, the operation is recorded once, by the outermost hook
    cp = gpu.cupy
    x = gpu(np.arange(16.0).reshape(4, 4))
    with gpu.ledger as led:
        cp.tril(x)
        cp.full_like(x, 3.0)
        n = cp.count_nonzero(x)
        with led.paused():
            x * 2
        gpu(np.ones(3))  # the test's own upload
    assert _rows(led.records) == [("cupy", "tril", 128, 128), ("cupy", "full_like", 0, 128),
                                  ("cupy", "count_nonzero", 128, 8)]
    assert isinstance(n, FakeCupyArray) and int(n) == 15
    x + x  # outside the block: not recorded
    assert len(led.records) == 3


def test_int8_gemms_run_gemm_i8_through_cublas(gpu, rng):
    # modlin._engines.cuda.gemm_i8 itself runs: its padding to multiples of 4, B's transposed copy
    # and the column-major call, the GEMM computed from the pointers it hands cuBLAS
    a = gpu(rng.integers(-128, 128, (2, 5, 7)).astype(np.int8))
    b = gpu(rng.integers(-128, 128, (2, 7, 3)).astype(np.int8))
    want = np.matmul(a.get().astype(np.int64), b.get().astype(np.int64))
    with gpu.ledger as led:
        c = _cuda.gemm_i8(a, b)
    np.testing.assert_array_equal(c.get(), want)
    (g,) = led.of("gemm")
    # k padded to 8, n to 4: what cuBLAS multiplies
    assert (g.name, g.work, g.bytes_read, g.bytes_written) == ("gemmStridedBatchedEx", 2 * 5 * 4 * 8, 144, 160)
    names = [r.name for r in led.of("cupy")]
    assert names.count("concatenate") == 3 and "ascontiguousarray" in names and names[-1] == "setitem"
    np.testing.assert_array_equal(_cuda.gemm_i8(a[0], b[0]).get(), want[0])  # one matrix: gemm_i8_tn's call
    # one matrix beside a stack is broadcast, as numpy.matmul (and Engine.gemm's contract) does
    np.testing.assert_array_equal(_cuda.gemm_i8(a, b[0]).get(), np.matmul(a.get().astype(np.int64),
                                                                           b.get()[0].astype(np.int64)))
    np.testing.assert_array_equal(_cuda.gemm_i8(a[1], b).get(), np.matmul(a.get()[1].astype(np.int64),
                                                                           b.get().astype(np.int64)))


def _declared_roles() -> dict[str, tuple[str, ...]]:
    """Per kernel of kernels/modlin_kernels.cu, per parameter: "r" for a ``const`` pointer,
    "w" for another pointer, "" for a scalar."""
    src = (ROOT / "kernels" / "modlin_kernels.cu").read_text()
    out = {}
    for name, params in re.findall(r'extern "C" __global__ void (\w+)\(([^)]*)\)', src):
        out[name] = tuple("" if "*" not in p else "r" if p.strip().startswith("const") else "w"
                          for p in params.split(","))
    return out


def test_kernel_roles_found_agree_with_the_kernel_sources(gpu):
    # the ledger tells reads from writes by the bytes that changed; the sources say it
    # with const: every kernel of every path agrees
    declared = _declared_roles()
    seen = {}
    with gpu.ledger as led:
        for case in bench.cases():
            case.run(gpu, case.operands(np.random.default_rng(1), 64), 8192)
        p = 2**40 - 87  # a multiword plan: the words, its steps (in place) and its finish
        pl = modlin.plan(p, 64, 64, 64, device="cuda", words=(2, 2), variant="horner")
        modlin.matmul(gpu(np.arange(64 * 64).reshape(64, 64)), gpu(np.ones((64, 64), dtype=np.int64)), p, plan=pl)
        modlin.ozaki.zherk(gpu(np.arange(64 * 64).reshape(64, 64) * (1 + 0.5j)))  # rank-k updates' combination
        x = gpu(np.arange(64.0 * 64).reshape(64, 64))
        modlin.ozaki.dgemm(x, x, mode="accurate")  # the bound codes and the passes over them
    for r in led.of("launch"):
        want = tuple("rw" if i in IN_PLACE.get(r.name, ()) and d == "w" else d for i, d in enumerate(declared[r.name]))
        got = tuple(g if g else ("" if d == "" else d) for g, d in zip(r.roles, want))  # NULL: an absent operand
        assert got == want, (r.name, r.roles, want)
        seen[r.name] = True
    assert set(seen) == set(declared), set(declared) - set(seen)


# ----------------------------------------------------------------------------- the budgets

@pytest.mark.parametrize("name", list(BUDGETS))
def test_gpu_path_within_its_traffic_budget(gpu, name):
    case = {c.name: c for c in bench.cases()}[name]
    got = bench.measure(case, gpu, N_TEST, 8192)
    budget = BUDGETS[name]
    where = "\n".join(f"  {k}: {v['launches']} launches, {v['bytes_per_entry']:.0f} B/entry"
                      for k, v in got["stages"].items())
    assert got["tiles"] == 1  # one tile, no k split: as at n = 8192 on an H200
    assert got["launches"] <= budget["launches"] and got["gemms"] <= budget["gemms"], where
    assert got["syncs"] <= budget["syncs"], [(r.name, r.site) for r in got["records"] if r.kind == "sync"]
    assert got["uploads"] <= budget["uploads"], [(r.name, r.site) for r in got["records"] if r.kind == "upload"]
    assert got["bytes_per_entry"] <= budget["bytes_per_entry"], where


def test_the_ledger_report_runs(harness):
    results = bench.run(8192, 128, harness=harness)
    assert set(results["paths"]) == set(BUDGETS)
    assert 0.01 < results["fit"]["f"] <= 1.0
    for name, row in results["paths"].items():
        assert row["counts_independent_of_n"] and row["tiles_measured"] == 1, name
        assert row["tiles_at_N"] == {"h100": 1, "h200": 1} and not row["k_split"], name
        assert row["model"]["h200"]["total"] < row["model"]["h100"]["total"], name
        assert row["gemm_work"] > 0 and row["measured_h200_s"] == bench.MEASURED_H200_8192[name]
        # the stages fitted for any n (what gpu_report.py's model section reads) add up to the path
        assert all(s["same_counts"] for s in row["stage_fit"].values()), name
        assert row["stage_fit"][bench.GEMM_STAGE]["gemms"] == row["gemms"], name
        for device in ("h100", "h200"):
            parts = [bench.stage_model(s, 8192, device, results["fit"]["f"]) for s in row["stage_fit"].values()]
            for key in ("gemm", "traffic", "overhead", "total"):
                assert sum(p[key] for p in parts) == pytest.approx(row["model"][device][key]), (name, key)
            # what overlapping the reductions with the GEMMs could hide: some of the non-GEMM time
            o, m = row["overlap"][device], row["model"][device]
            assert any(label in row["stage_fit"] for label in bench.OVERLAP_STAGES), name
            assert 0 < o["hidden"] < m["traffic"] + m["overhead"], (name, o, m)
            assert o["share"] == pytest.approx(o["hidden"] / m["total"]) and o["pays"] == (o["share"] >= bench.OVERLAP_PAYS)
    lines = bench.table(results, stages=True)
    assert len(lines) > 40 and not any("nan" in line for line in lines), "\n".join(lines)
    json.dumps(results, default=str)


@pytest.mark.parametrize("p, words, budget", [(2**31 - 1, (1, 2), 88), (2**50 - 27, (2, 3), 176)])
def test_multiword_gpu_path_is_kernels_only(gpu, p, words, budget):
    """The fp64 multiword path on the GPU (what the planner picks for small products): the
    words of both operands, the Horner steps between its DGEMMs and the finish are one
    kernel each, with no CuPy pass and no host sync: 8 B read and 8 B written per step and
    output entry, 8 B per operand entry and word."""
    n = 256
    rng = np.random.default_rng(5)
    A, B = (gpu(rng.integers(0, p, (n, n))) for _ in range(2))
    pl = modlin.plan(p, n, n, n, device="cuda", algorithm="multiword", words=words)
    with gpu.ledger as led:
        got = modlin.matmul(A, B, p, plan=pl)
    sm = led.summary(n * n)
    assert sm["cupy_ops"] == 0 and sm["syncs"] == 0 and sm["uploads"] == 0
    # the words of A and B, then at most one step or the finish per GEMM
    assert sm["kernels"] <= 2 + pl.gemm_count() and sm["gemms"] == pl.gemm_count()
    assert sm["bytes_per_entry"] <= budget
    np.testing.assert_array_equal(got.get(), modlin.matmul(A.get(), B.get(), p))


@pytest.mark.parametrize("name, budget", [("zherk", 242), ("dsyrk", 194)])
def test_rank_k_updates_are_fused(gpu, name, budget):
    """ozaki.zherk and dsyrk (2M, 16 moduli) on the GPU: the same fused stages as the GEMMs, one
    GEMM per modulus (half of zgemm's), 2M's combination of every modulus into both tiles
    of a pair in one kernel, one host sync. Before the fused kernels: 1468 and 876 B per entry."""
    from modlin import ozaki

    n = 256
    rng = np.random.default_rng(6)
    if name == "zherk":
        a = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
        fn = ozaki.zherk
    else:
        a = rng.standard_normal((n, n))
        fn = ozaki.dsyrk
    A = gpu(a)
    with gpu.ledger as led:
        got = fn(A, moduli=16)
    sm = led.summary(n * n)
    assert sm["cupy_ops"] == 0 and sm["syncs"] == 1 and sm["kernels"] <= 21 and sm["gemms"] == 16
    assert sm["bytes_per_entry"] <= budget
    want = fn(a, moduli=16, engine="int8")  # the CPU on the same moduli: the same bits
    assert np.array_equal(got.get().view(np.uint64), want.view(np.uint64))


def test_accurate_mode_takes_one_sync_too(gpu):
    """ozaki.zgemm in "accurate" mode on the GPU: the line statistics keep the bounds, one
    int8 GEMM of them (with gemm_i8's padding and transposed copy, and its float64 sums),
    one kernel for their codes, three passes over the codes, and the same single read of
    the summary as "fast" mode. Before the fused kernels: 9 syncs, 75 CuPy operations and
    673 B per entry."""
    from modlin import ozaki

    n = 256
    rng = np.random.default_rng(7)
    z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    with gpu.ledger as led:
        got = ozaki.zgemm(gpu(z), gpu(z), moduli=16, mode="accurate")
    sm = led.summary(n * n)
    assert sm["syncs"] == 1 and sm["cupy_ops"] <= 4 and sm["kernels"] <= 27, sm
    assert sm["bytes_per_entry"] <= 385
    want = ozaki.zgemm(z, z, moduli=16, mode="accurate", engine="int8")
    assert np.array_equal(got.get().view(np.uint64), want.view(np.uint64))
