"""Products of dask arrays (issue #15): exactly the in-memory results, whatever the chunks.

Every product is compared bit for bit (type, dtype, values) with the in-memory call
on the same operands and with an independent Python-integer oracle, on a
``distributed.LocalCluster`` of two worker processes (loopback only, started and
closed by a module fixture), and on the threaded and synchronous schedulers with
chunkings drawn by hypothesis.
"""

from __future__ import annotations

import subprocess
import sys
import types
import warnings
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import modlin
from conftest import as_python_ints, rand_ints, ref_matmul
from modlin import gaussian, ozaki

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

MODULI = {"31bit": 2**31 - 1, "50bit": 2**50 - 27, "61bit": 2**61 - 1, "127bit": 2**127 - 1}
GAUSS_M = 1048573  # a prime 1 (mod 4): 2M applies

# (m, k, n) and the chunks of A and B: m, n and k split evenly and unevenly (the two
# operands' k-chunks differing, so that they are rechunked), one chunk, one row per chunk
SHAPE = (24, 30, 16)
CHUNKINGS = {
    "even": ((8, 10), (10, 8)),
    "uneven": (((5, 19), (3, 13, 14)), ((11, 19), (7, 9))),
    "one": (-1, -1),
    "rows": ((1, -1), (-1, 8)),
}


def test_import_modlin_does_not_import_dask():
    code = "import modlin, sys; assert not {'dask', 'distributed'} & set(sys.modules), sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=modlin.__path__[0] + "/..")


# --------------------------------------------------------------------------- cases

def _operands(kind: str, rng, shape=SHAPE):
    """In-memory operands of one case: ``(A, B, function, oracle)``."""
    m, k, n = shape
    if kind in MODULI:
        p = MODULI[kind]
        A, B = rand_ints(rng, (m, k), -p, 2 * p), rand_ints(rng, (k, n), 0, p - 1)
        if p < 2**63:  # fixed-width operands where they fit: int64 residues, unreduced floats
            A, B = (A % p).astype(np.int64), B.astype(np.float64) if p < 2**53 else B.astype(np.int64)
        return A, B, partial(modlin.matmul, p=p), partial(ref_matmul, p=p)
    if kind.startswith("intmul"):
        bits = int(kind[6:])
        A, B = rand_ints(rng, (m, k), -2**bits, 2**bits), rand_ints(rng, (k, n), -2**bits, 2**bits)
        if bits < 32:
            A, B = A.astype(np.int64), B.astype(np.int32)
        return A, B, modlin.intmul, lambda a, b: as_python_ints(a) @ as_python_ints(b)
    if kind.startswith(("dgemm", "zgemm")):
        name, variant = kind.split("-")
        complex_ = name == "zgemm"
        A, B = _binary_floats(rng, (m, k), 1, complex_), _binary_floats(rng, (k, n), 0, complex_)
        fn = partial(ozaki.dgemm, mode=variant) if not complex_ else partial(ozaki.zgemm, algorithm=variant)
        return A, B, fn, _rounded_oracle
    alg = kind[6:]
    A = tuple(rng.integers(-GAUSS_M, GAUSS_M, (m, k)) for _ in range(2))
    B = tuple(rng.integers(0, GAUSS_M, (k, n)) for _ in range(2))
    return A, B, partial(gaussian.matmul, m=GAUSS_M, algorithm=alg), _gauss_oracle


def _binary_floats(rng, shape, axis: int, complex_: bool):
    """Floats of 21 bits scaled by a power of two per row (``axis=1``) or column (``axis=0``)
    from 2**-40 to 2**40, so that the Ozaki scheme's scaling keeps every bit: its result
    is then the exact product correctly rounded (:func:`_rounded_oracle`)."""
    lines = shape[1 - axis]
    scale = np.ldexp(1.0, rng.integers(-40, 41, lines))
    scale = scale[:, None] if axis == 1 else scale[None, :]
    x = rng.integers(-2**20, 2**20, shape) * scale
    return x + 1j * rng.integers(-2**20, 2**20, shape) * scale if complex_ else x


def _rounded_oracle(A, B):
    """The exact product of float (or complex) matrices rounded once to double, by Fractions
    (``float(Fraction)`` rounds correctly): object arrays of floats or complexes."""
    from fractions import Fraction

    def exact(X):
        return [[(Fraction(float(x.real)), Fraction(float(x.imag))) for x in row] for row in np.asarray(X)]

    a, b = exact(A), exact(B)
    out = np.empty((len(a), len(b[0])), dtype=object)
    for i, row in enumerate(a):
        for j in range(len(b[0])):
            re = sum((x[0] * b[t][j][0] - x[1] * b[t][j][1] for t, x in enumerate(row)), Fraction(0))
            im = sum((x[0] * b[t][j][1] + x[1] * b[t][j][0] for t, x in enumerate(row)), Fraction(0))
            out[i, j] = complex(float(re), float(im)) if np.iscomplexobj(A) else float(re)
    return out


def _gauss_oracle(A, B):
    (ar, ai), (br, bi) = (tuple(as_python_ints(x) for x in X) for X in (A, B))
    return (ar @ br - ai @ bi) % GAUSS_M, (ar @ bi + ai @ br) % GAUSS_M


def _wrap(X, chunks):
    return tuple(da.from_array(x, chunks=chunks) for x in X) if isinstance(X, tuple) else da.from_array(X, chunks=chunks)


def _same(got, want) -> None:
    """``got`` equals ``want`` bit for bit: type, dtype, shape and every value."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert type(got) is type(want), (type(got), type(want))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    assert np.array_equal(got, want)


def _check(kind, chunks, rng, compute, shape=SHAPE):
    A, B, fn, oracle = _operands(kind, rng, shape)
    A0, B0 = (tuple(x.copy() for x in X) if isinstance(X, tuple) else X.copy() for X in (A, B))
    lazy = fn(_wrap(A, chunks[0]), _wrap(B, chunks[1]))
    parts = lazy if isinstance(lazy, tuple) else (lazy,)
    assert all(isinstance(x, da.Array) for x in parts)
    got = compute(*parts)
    got = tuple(got) if isinstance(lazy, tuple) else got[0]
    want = fn(A, B)
    _same(got, want)
    exact = oracle(A, B)
    for g, e in zip(got if isinstance(got, tuple) else (got,), exact if isinstance(exact, tuple) else (exact,)):
        assert np.array_equal(g.astype(object), e)
    _same((A, B), (A0, B0))  # the operands are not modified
    return parts


KINDS = list(MODULI) + ["intmul20", "intmul200", "gauss-2m", "gauss-3m", "dgemm-fast", "dgemm-accurate",
                        "zgemm-2m", "zgemm-hybrid"]


# --------------------------------------------------------------------------- distributed

@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    with cluster, distributed.Client(cluster) as c:
        yield c


#: The cluster runs every kind once, with the chunks that split m, n and k unevenly and
#: rechunk k, and two kinds (a limb product, an ozaki mode) with every chunking: how chunks
#: become tasks does not depend on the scheduler, and every chunking of every kind runs on
#: the local schedulers (:func:`test_local_schedulers_exact` draws them,
#: :func:`test_ozaki_bit_identical` takes each); what the cluster adds is the kinds' tasks
#: pickled to worker processes, under their limits. (Every pair ran 120 s of CI.)
CLUSTER_CASES = [(kind, "uneven") for kind in KINDS] + [(kind, chunking) for kind in ("127bit", "dgemm-accurate")
                                                        for chunking in CHUNKINGS if chunking != "uneven"]


@pytest.mark.parametrize("kind, chunking", CLUSTER_CASES)
def test_cluster_exact(client, kind, chunking, rng):
    parts = _check(kind, CHUNKINGS[chunking], rng, lambda *x: client.compute(list(x), sync=True))
    a_chunks, b_chunks = CHUNKINGS[chunking]
    wa, wb = da.ones(SHAPE[:2], chunks=a_chunks), da.ones(SHAPE[1:], chunks=b_chunks)
    assert parts[0].chunks == (wa.chunks[0], wb.chunks[1])  # rows of A's chunks x columns of B's


def test_cluster_worker_limits(client):
    """Tasks on a worker run under modlin.limits from its threads (one) and its memory limit
    (LocalCluster's default: the machine's memory shared among the workers)."""
    from modlin._front import dask as _dask

    limit = next(iter(client.run(lambda dask_worker: dask_worker.memory_manager.memory_limit).values()))
    budget = next(iter(client.run(lambda: modlin.limits.current().memory).values()))
    got = client.submit(_dask._worker_limits, pure=False).result()
    assert got == {"threads": 1, "memory": min(budget, limit // _dask.WORKER_MEMORY_SHARE)}


def test_cluster_memory_limited(rng):
    """Workers whose memory limit is below the size of A (and of the result) complete the
    product: A's chunks are made on the workers and never all held at once. Checked
    on sampled rows against the in-memory call and the oracle, and on every entry
    through the column sums: ``1^T C = (1^T A) B (mod p)``, ``1^T A`` summed exactly."""
    from modlin._front import dask as _dask

    # A: 461 MB of int64, workers: 400 MB each (of which a worker process itself, with modlin
    # and its kernels loaded, takes about 200 MB)
    p, (m, k, n) = 2**61 - 1, (450_000, 128, 16)
    limit = 400 * 10**6
    # workers spill but never pause: with an empty kernel cache (a fresh CI runner) numba's
    # compiler alone takes a paused worker past 80 % of this limit, and nothing would run
    with dask.config.set({"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     dashboard_address=None, memory_limit=limit) as cluster, \
            distributed.Client(cluster) as c:
        got = c.submit(_dask._worker_limits, pure=False).result()
        assert got == {"threads": 1, "memory": limit // (_dask.WORKER_MEMORY_SHARE * 1)}
        # made by dask's own generator, where A's chunks are: a function of this module would be
        # pickled by reference, and a worker importing this module would take the repository
        # root's conftest.py for tests/conftest.py
        A = da.random.default_rng(7).integers(0, 2**62, size=(m, k), chunks=(25_000, 64), dtype=np.int64)
        B = rng.integers(0, p, (k, n))
        rows = np.sort(rng.choice(m, 6, replace=False))
        C = modlin.matmul(A, B, p)
        futures = c.compute([*_column_sums(C), *_column_sums(A), C[rows], A[rows]])
        distributed.wait(futures, timeout=600)  # a stuck cluster fails the test instead of hanging CI
        c_hi, c_lo, a_hi, a_lo, c_rows, a_rows = c.gather(futures)
    c_sums, a_sums = (hi.astype(object) * 2**31 + lo for hi, lo in ((c_hi, c_lo), (a_hi, a_lo)))
    assert np.array_equal(c_sums % p, ref_matmul(a_sums, B, p))
    assert a_rows.shape == (6, k) and 0 <= a_rows.min() and a_rows.max() < 2**62
    _same(c_rows, modlin.matmul(a_rows, B, p))
    assert np.array_equal(c_rows.astype(object), ref_matmul(a_rows, B, p))


def _column_sums(X):
    """The column sums of a dask array of entries in ``[0, 2**62)``, exactly: of their high and
    low 31-bit halves (each fits int64 for up to ``2**32`` rows)."""
    return (X >> 31).sum(axis=0), (X & (2**31 - 1)).sum(axis=0)


# --------------------------------------------------------------------------- local schedulers

def _partition(total: int):
    """Chunks of an axis: a hypothesis strategy for tuples of positive sizes summing to ``total``."""
    return st.lists(st.integers(1, total), min_size=1, max_size=total).map(
        lambda cuts: _cut(total, cuts))


def _cut(total, cuts):
    points = sorted({c for c in cuts if c < total})
    bounds = [0] + points + [total]
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


@settings(max_examples=10)  # about 2 s an example; the graph, which the chunks shape, is each scheduler's alike
@given(data=st.data(), kind=st.sampled_from(["31bit", "127bit", "intmul200", "gauss-2m", "dgemm-accurate",
                                              "zgemm-hybrid"]), scheduler=st.sampled_from(["threads", "sync"]))
def test_local_schedulers_exact(scheduler, data, kind):
    m, k, n = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 12)), data.draw(st.integers(1, 9))
    a_chunks = (data.draw(_partition(m)), data.draw(_partition(k)))
    b_chunks = (data.draw(_partition(k)), data.draw(_partition(n)))
    _check(kind, (a_chunks, b_chunks), np.random.default_rng(data.draw(st.integers(0, 2**32))),
           lambda *x: da.compute(*x, scheduler=scheduler), shape=(m, k, n))


@pytest.mark.parametrize("kind", ["61bit", "127bit", "intmul200", "gauss-3m"])
@pytest.mark.parametrize("sa, sb", [((7,), (7, 5)), ((6, 7), (7,)), ((7,), (7,)), ((3, 1, 4, 7), (2, 7, 5)),
                                    ((4, 7), (2, 7, 5))])
def test_vectors_and_stacks(kind, sa, sb, rng):
    """numpy.matmul's shape rules: 1-D operands, stacks that broadcast."""
    p = MODULI.get(kind, GAUSS_M)
    if kind.startswith("gauss"):
        A, B = rng.integers(0, p, sa) + 1j * rng.integers(0, p, sa), rng.integers(0, p, sb) + 1j * rng.integers(0, p, sb)
        fn = partial(gaussian.matmul, m=p, algorithm="3m")
    else:
        A, B = rand_ints(rng, sa, 0, p - 1), rand_ints(rng, sb, -p, p)
        fn = modlin.intmul if kind == "intmul200" else partial(modlin.matmul, p=p)
    chunks = lambda s: tuple(max(1, (d + 1) // 2) for d in s)  # noqa: E731  (two chunks an axis, or one)
    lazy = fn(da.from_array(A, chunks=chunks(sa)), da.from_array(B, chunks=chunks(sb)))
    got = tuple(x.compute(scheduler="sync") for x in lazy) if isinstance(lazy, tuple) else lazy.compute(scheduler="sync")
    want = fn(A, B)
    if not isinstance(want, tuple) and np.ndim(want) == 0:  # 1-D @ 1-D: a scalar, as in numpy.matmul
        assert type(got) is type(want) and got == want
    else:
        _same(got, want)


@pytest.mark.parametrize("sa, sb", [((0, 4), (4, 3)), ((3, 0), (0, 2)), ((2, 5), (5, 0))])
def test_empty_dimensions(sa, sb):
    A, B = np.ones(sa, np.int64), np.ones(sb, np.int64)
    for fn in (partial(modlin.matmul, p=2**127 - 1), modlin.intmul):
        _same(fn(da.from_array(A, chunks=2), da.from_array(B, chunks=2)).compute(scheduler="sync"), fn(A, B))


@pytest.mark.parametrize("p", [13, 2**127 - 1])
def test_galois_chunks(p):
    """dask arrays of galois FieldArrays multiply in their field: residues summed as int64
    (or Python ints), the field's type restored on each output chunk."""
    galois = pytest.importorskip("galois")
    GF = galois.GF(p)
    A, B = GF.Random((7, 9), seed=1), GF.Random((9, 5), seed=2)
    C = modlin.matmul(da.from_array(A, chunks=(3, 4)), da.from_array(B, chunks=2))
    assert type(C._meta) is GF
    _same(C.compute(scheduler="sync"), modlin.matmul(A, B))
    if p == 13:  # 13 = 1 (mod 4): the Gaussian product of FieldArray parts, by 2M
        Ai, Bi = GF.Random((7, 9), seed=3), GF.Random((9, 5), seed=4)
        got = gaussian.matmul((da.from_array(A, chunks=(2, 4)), Ai), (B, da.from_array(Bi, chunks=3)))
        _same(tuple(x.compute(scheduler="sync") for x in got), gaussian.matmul((A, Ai), (B, Bi)))


def test_numpy_operand_beside_dask(rng):
    """An in-memory operand is wrapped, chunked along k as the dask one."""
    p = 2**31 - 1
    A, B = rng.integers(0, p, (10, 12)), rng.integers(0, p, (12, 7))
    C = modlin.matmul(A.tolist(), da.from_array(B, chunks=(5, 3)), p)
    assert C.chunks == ((10,), (3, 3, 1))
    _same(C.compute(scheduler="sync"), modlin.matmul(A, B, p))


def test_graph_size(rng):
    """pair tasks: output chunks x k-chunks; the tree adds about a third of them (4 per task)."""
    A = da.from_array(rng.integers(0, 7, (6, 32)), chunks=(3, 2))  # 2 x 16 chunks
    B = da.from_array(rng.integers(0, 7, (32, 9)), chunks=(2, 3))  # 16 x 3 chunks
    C = modlin.matmul(A, B, 7)
    out, nk = 2 * 3, 16
    assert len(C.__dask_graph__()) == 2 * 16 + 16 * 3 + out * nk + out * (4 + 1)


def test_blocked_product_rows_and_cols(rng):
    """The contract's per-row and per-column data reach pair and finish with their chunks:
    diag(r) A B diag(c) mod p, r applied by pair and c by finish."""
    from modlin._front.dask import add_mod, blocked_product

    p = 65521
    A, B = rng.integers(0, p, (9, 11)), rng.integers(0, p, (11, 6))
    r, c = rng.integers(0, p, 9), rng.integers(0, p, 6)
    C = blocked_product(da.from_array(A, chunks=(4, 3)), da.from_array(B, chunks=(5, 4)),
                        partial(_scaled_pair, p=p), partial(add_mod, p=p), finish=partial(_scaled_finish, p=p),
                        rows=(da.from_array(r, chunks=2),), cols=(da.from_array(c, chunks=5),),
                        meta=np.empty(0, dtype=np.int64))
    want = (r[:, None] * modlin.matmul(A, B, p) % p) * c[None, :] % p
    assert np.array_equal(C.compute(scheduler="sync"), want)


def _scaled_pair(a, b, r, c, p):
    return modlin.matmul(a * r[:, None] % p, b, p)


def _scaled_finish(x, r, c, p):
    return x * c[None, :] % p


def test_zarr_pipeline(tmp_path, rng):
    """The guide's pipeline: two zarr arrays on disk, their product mod p written to zarr."""
    zarr = pytest.importorskip("zarr")
    p = 2**61 - 1
    A, B = rng.integers(0, p, (40, 56)), rng.integers(0, p, (56, 24))
    for name, x, chunks in (("A", A, (16, 16)), ("B", B, (16, 8))):  # (zarr 2 and 3 spell it alike)
        z = zarr.open_array(str(tmp_path / f"{name}.zarr"), mode="w", shape=x.shape, chunks=chunks, dtype="int64")
        z[...] = x
    dA, dB = da.from_zarr(str(tmp_path / "A.zarr")), da.from_zarr(str(tmp_path / "B.zarr"))
    modlin.matmul(dA, dB, p).to_zarr(str(tmp_path / "C.zarr"))
    C = zarr.open_array(str(tmp_path / "C.zarr"), mode="r")
    assert C.chunks == (16, 8)
    assert np.array_equal(C[...], modlin.matmul(A, B, p))
    assert np.array_equal(C[...].astype(object), ref_matmul(A, B, p))


# --------------------------------------------------------------------------- errors

def _never(block):
    raise AssertionError("a chunk was computed before the front door refused the product")


def _lazy(shape, dtype):
    """A dask array whose chunks must never be computed."""
    return da.zeros(shape, chunks=2, dtype=dtype).map_blocks(_never, dtype=dtype)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: modlin.matmul(_lazy((4, 4), complex), _lazy((4, 4), np.int64), 7), TypeError, "complex"),
    (lambda: modlin.matmul(_lazy((4, 4), "U3"), _lazy((4, 4), np.int64), 7), TypeError, "not numeric"),
    (lambda: modlin.matmul(_lazy((4, 4), np.int64), _lazy((4, 4), np.int64)), TypeError, "modulus p is required"),
    (lambda: modlin.matmul(_lazy((4, 4), np.int64), _lazy((4, 4), np.int64), 1), ValueError, "at least 2"),
    (lambda: modlin.matmul(_lazy((4, 5), np.int64), _lazy((4, 4), np.int64), 7), ValueError, "not aligned"),
    (lambda: modlin.matmul(_lazy((4, 4), np.int64), None, 7), TypeError, "B is None"),
    (lambda: modlin.matmul(_lazy((4, 4), np.int64), _lazy((4, 4), np.int64), 7,
                           out=np.empty((4, 4), np.int64)), TypeError, "out= is not supported"),
    (lambda: modlin.matmul(_lazy((4, 4), np.int64), _lazy((4, 4), np.int64), 7,
                           plan=modlin.plan(5, 4, 4, 4)), ValueError, "plan was made for p = 5"),
    (lambda: modlin.intmul(_lazy((4, 4), np.float64), _lazy((4, 4), np.int64)), TypeError, "floats"),
    (lambda: modlin.intmul(_lazy((4, 4), np.int64), _lazy((4, 4), np.int64), moduli=[3, 5.0]), TypeError,
     "moduli must be integers"),
    # int16 entries: the dtypes bound the product, so the moduli are checked against it at once
    (lambda: modlin.intmul(_lazy((4, 4), np.int16), _lazy((4, 4), np.int16), moduli=[3, 5]), ValueError,
     "moduli"),
    (lambda: gaussian.matmul(_lazy((4, 4), complex), _lazy((4, 4), complex), 1), ValueError, "at least 2"),
    (lambda: gaussian.matmul(_lazy((4, 4), complex), _lazy((4, 4), complex), 7, algorithm="2m"), ValueError,
     "3 \\(mod 4\\)"),
    (lambda: gaussian.matmul((_lazy((4, 4), int), _lazy((4, 3), int)), _lazy((4, 4), complex), 13), ValueError,
     "shapes"),
    (lambda: gaussian.matmul(_lazy((4, 4), "U2"), _lazy((4, 4), complex), 13), TypeError, "complex array"),
], ids=["complex", "strings", "no-p", "p=1", "shapes", "None", "out", "plan", "intmul-floats", "moduli-type",
        "moduli-few",
        "gauss-m", "gauss-2m", "gauss-pair", "gauss-strings"])
def test_refused_before_computing(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_unknown_chunk_sizes():
    x = da.from_array(np.arange(16).reshape(4, 4), chunks=2)
    y = x[x[:, 0] > 3]
    with pytest.raises(ValueError, match="unknown chunk sizes.*compute_chunk_sizes"):
        modlin.matmul(y, x, 7)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        modlin.intmul(x, y.T)


def test_flint_beside_dask():
    flint = pytest.importorskip("flint")
    with pytest.raises(TypeError, match="python-flint matrix beside a dask array"):
        modlin.matmul(flint.nmod_mat([[1, 2], [3, 4]], 5), _lazy((2, 2), np.int64))


def test_numpy_and_cupy_chunks_mixed(monkeypatch):
    """A CuPy-backed dask array (recognised by its meta) beside a NumPy-backed one is refused
    as the in-memory front door refuses NumPy and CuPy operands mixed."""
    fake = types.ModuleType("cupy")

    class ndarray(np.ndarray):  # stands in for cupy.ndarray: the test machine has no GPU
        pass

    fake.ndarray = ndarray
    monkeypatch.setitem(sys.modules, "cupy", fake)
    gpu = da.from_array(np.zeros((4, 4), np.int64).view(ndarray), chunks=2, asarray=False)
    assert type(gpu._meta) is ndarray
    with pytest.raises(TypeError, match="mix NumPy and CuPy"):
        modlin.matmul(gpu, _lazy((4, 4), np.int64), 7)
    with pytest.raises(TypeError, match="mix NumPy and CuPy"):
        ozaki.dgemm(gpu.astype(np.float64), _lazy((4, 4), np.float64))


def test_split_every_and_parts_checked():
    from modlin._front.dask import add_mod, blocked_product

    x = da.ones((2, 2), chunks=1, dtype=np.int64)
    with pytest.raises(ValueError, match="split_every"):
        blocked_product(x, x, modlin.matmul, partial(add_mod, p=7), meta=x._meta, split_every=1)
    with pytest.raises(ValueError, match="rows: expected arrays of shape"):
        blocked_product(x, x, modlin.matmul, partial(add_mod, p=7), meta=x._meta, rows=(x,))


# --------------------------------------------------------------------------- the Ozaki scheme

def _bits(x):
    """Every bit of a float or complex array or scalar (signed zeros and NaN payloads included)."""
    return type(x), x.dtype, x.shape, np.asarray(x).tobytes()


def _gaussians(rng, shape, complex_):
    """Doubles of every exponent's spread (not exactly scaled: the scaling rounds them)."""
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-30, 31, shape))
    return x + 1j * rng.standard_normal(shape) if complex_ else x


OZAKI_CALLS = {
    "dgemm-fast": partial(ozaki.dgemm),
    "dgemm-accurate-int8": partial(ozaki.dgemm, mode="accurate", engine="int8"),
    "dgemm-4-moduli": partial(ozaki.dgemm, moduli=4),
    "zgemm-2m": partial(ozaki.zgemm, algorithm="2m"),
    "zgemm-3m-accurate": partial(ozaki.zgemm, algorithm="3m", mode="accurate"),
    "zgemm-hybrid-int8": partial(ozaki.zgemm, algorithm="hybrid", engine="int8"),
}


def _warned(fn, *args):
    """``fn(*args)`` and the messages of the warnings it gave."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [str(w.message) for w in record]


#: Every call with every chunking but one row a chunk, which the cheapest real and complex
#: calls take (24 chunks of rows, 5-15 s a call: the others add nothing those two do not cover).
OZAKI_CASES = [(call, chunking) for call in OZAKI_CALLS for chunking in CHUNKINGS
               if chunking != "rows" or call in ("dgemm-fast", "dgemm-accurate-int8", "zgemm-2m")]


@pytest.mark.parametrize("call, chunking", OZAKI_CASES)
def test_ozaki_bit_identical(call, chunking, rng):
    """Inexact inputs (the scaling rounds them, some entries to zero): the bits, and the
    AccuracyWarnings, of the in-memory call, whatever the chunks, through k split
    unevenly between the two operands too."""
    fn = OZAKI_CALLS[call]
    complex_ = call.startswith("z")
    A, B = _gaussians(rng, SHAPE[:2], complex_), _gaussians(rng, SHAPE[1:], complex_)
    a_chunks, b_chunks = CHUNKINGS[chunking]
    got, got_warnings = _warned(fn, da.from_array(A, chunks=a_chunks), da.from_array(B, chunks=b_chunks))
    assert isinstance(got, da.Array) and got.dtype == (np.complex128 if complex_ else np.float64)
    want, want_warnings = _warned(fn, A, B)
    assert _bits(got.compute(scheduler="threads")) == _bits(want)
    assert got_warnings == want_warnings


@pytest.mark.parametrize("sa, sb", [((7,), (7, 5)), ((6, 7), (7,)), ((7,), (7,)), ((2, 1, 2, 7), (3, 7, 4)),
                                    ((4, 0), (0, 3)), ((0, 7), (7, 2))])
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.filterwarnings("ignore::modlin.ozaki.AccuracyWarning")
def test_ozaki_vectors_stacks_empty(complex_, sa, sb, rng):
    """numpy.matmul's shape rules: 1-D operands (a scalar for two), stacks that broadcast,
    empty dimensions."""
    fn = partial(ozaki.zgemm, algorithm="hybrid") if complex_ else ozaki.dgemm
    A, B = _gaussians(rng, sa, complex_), _gaussians(rng, sb, complex_)
    chunks = lambda s: tuple(max(1, d // 2) for d in s)  # noqa: E731
    got = fn(da.from_array(A, chunks=chunks(sa)), da.from_array(B, chunks=chunks(sb))).compute(scheduler="sync")
    assert _bits(got) == _bits(fn(A, B))


@pytest.mark.filterwarnings("ignore::modlin.ozaki.AccuracyWarning")
def test_ozaki_blas_arguments(rng):
    """alpha, beta, C (dask or NumPy, broadcast), c=, trans_a / trans_b: as in memory."""
    A, B, C = _gaussians(rng, (9, 8), True), _gaussians(rng, (8, 6), True), _gaussians(rng, (9, 6), True)
    dA, dB, dC = da.from_array(A, chunks=4), da.from_array(B, chunks=3), da.from_array(C, chunks=5)
    cases = [
        (dict(alpha=0.5 - 2j, beta=1.5j, C=dC), dict(alpha=0.5 - 2j, beta=1.5j, C=C)),
        (dict(beta=-1.0, c=C[0]), dict(beta=-1.0, c=C[0])),
        (dict(alpha=0, beta=2.0, C=dC), dict(alpha=0, beta=2.0, C=C)),
    ]
    for lazy, eager in cases:
        assert _bits(ozaki.zgemm(dA, dB, **lazy).compute(scheduler="sync")) == _bits(ozaki.zgemm(A, B, **eager))
    # only C lazy: the whole call is lazy
    got = ozaki.zgemm(A, B, beta=3.0, C=dC)
    assert isinstance(got, da.Array) and _bits(got.compute()) == _bits(ozaki.zgemm(A, B, beta=3.0, C=C))
    At, Bh = np.ascontiguousarray(A.T), np.ascontiguousarray(B.conj().T)
    got = ozaki.zgemm(da.from_array(At, chunks=3), da.from_array(Bh, chunks=2), trans_a=1, trans_b="C")
    assert _bits(got.compute()) == _bits(ozaki.zgemm(A, B))
    got = ozaki.dgemm(da.from_array(A.real.T.copy(), chunks=3), B.real, trans_a="T", alpha=-2.0)
    assert _bits(got.compute()) == _bits(ozaki.dgemm(A.real, B.real, alpha=-2.0))


@pytest.mark.filterwarnings("ignore::modlin.ozaki.AccuracyWarning", "ignore:invalid value:RuntimeWarning")
def test_ozaki_inf_nan_lines(rng):
    """Rows and columns holding Inf or NaN: a native product's Inf and NaN there, the emulation
    elsewhere (bit for bit)."""
    A, B = _gaussians(rng, (10, 12), False), _gaussians(rng, (12, 7), False)
    A[3, 5], A[6, 0], B[2, 4] = np.inf, np.nan, -np.inf
    got = ozaki.dgemm(da.from_array(A, chunks=(4, 5)), da.from_array(B, chunks=(6, 3))).compute()
    want = ozaki.dgemm(A, B)
    assert np.array_equal(got, want, equal_nan=True)
    finite = np.isfinite(want)
    assert finite.sum() == 8 * 6 and _bits(got[finite]) == _bits(want[finite])


def test_ozaki_accuracy_warning_at_call(rng):
    """Entries the scales round to zero warn when the product is built, where the caller is."""
    A = _gaussians(rng, (6, 8), False)
    A[0] = 0.0
    A[0, 0], A[0, 1] = 1e300, 1e-300
    with pytest.warns(ozaki.AccuracyWarning, match="1 nonzero entries of A") as record:
        ozaki.dgemm(da.from_array(A, chunks=3), np.ones((8, 2)))
    assert record[0].filename == __file__


def test_ozaki_too_few_moduli_refused():
    A = np.array([[1.0, 2.0**-50], [3.0, 4.0]])
    with pytest.raises(ValueError, match="moduli are too few"):
        ozaki.dgemm(da.from_array(A, chunks=1), A, moduli=[3, 5], mode="accurate")


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ozaki.dgemm(_lazy((4, 4), complex), _lazy((4, 4), float)), TypeError, "is complex: use ozaki.zgemm"),
    (lambda: ozaki.dgemm(_lazy((4, 4), "U3"), _lazy((4, 4), float)), TypeError, "numeric array"),
    (lambda: ozaki.dgemm(_lazy((4, 5), float), _lazy((4, 4), float)), ValueError, "not aligned"),
    (lambda: ozaki.dgemm(_lazy((4, 4), float), None), TypeError, "B is None"),
    (lambda: ozaki.zgemm(_lazy((4, 4), complex), _lazy((4, 4), complex), mode="best"), ValueError, "mode"),
    (lambda: ozaki.zgemm(_lazy((4, 4), complex), _lazy((4, 4), complex), algorithm="5m"), ValueError, "algorithm"),
    (lambda: ozaki.dgemm(_lazy((4, 4), float), _lazy((4, 4), float), moduli=[4, 6]), ValueError, "coprime"),
    (lambda: ozaki.dgemm(_lazy((4, 4), float), _lazy((4, 4), float), beta=1.0), ValueError, "C is missing"),
    (lambda: ozaki.dgemm(_lazy((4, 4), float), _lazy((4, 4), float), beta=1.0, C=_lazy((3, 4), float)),
     ValueError, "C has shape"),
    (lambda: ozaki.dgemm(_lazy((4, 4), float), _lazy((4, 4), float), trans_a=3), ValueError, "trans_a"),
], ids=["complex", "strings", "shapes", "None", "mode", "algorithm", "moduli", "no-C", "C-shape", "trans"])
def test_ozaki_refused_before_computing(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_ozaki_field_chunks_refused():
    galois = pytest.importorskip("galois")
    GF = galois.GF(7)
    with pytest.raises(TypeError, match="galois FieldArray"):
        ozaki.dgemm(da.from_array(GF([[1, 2], [3, 4]]), chunks=1), np.ones((2, 2)))
    x = da.from_array(np.ones((4, 4)), chunks=2)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        ozaki.zgemm(x[x[:, 0] > 0], x)


# --------------------------------------------------------------------------- residue partials

def balance_rem(x, p):
    """The entries' residues in ``[-(p//2), (p-1)//2]``, as Python ints."""
    return np.vectorize(lambda v: (int(v) + p // 2) % p - p // 2, otypes=[object])(np.asarray(x, dtype=object))


@pytest.mark.parametrize("p", [2**61 - 1, 2**127 - 1])
def test_residue_partials_one_crt_per_chunk(p, rng):
    """A product whose plan is a residue number system adds its chunk pairs' residues (int32,
    one row per modulus of the whole product's plan) and runs one CRT per output chunk."""
    A, B = rand_ints(rng, (20, 36), 0, p - 1), rand_ints(rng, (36, 12), -p, p)
    C = modlin.matmul(da.from_array(A, chunks=(10, 9)), da.from_array(B, chunks=(9, 6)), p)
    from modlin._planning.planner import plan

    graph = dict(C.__dask_graph__())
    names = {key[0] for key in graph if isinstance(key, tuple)}
    pair = next(n for n in names if n.startswith("modlin-matmul-pair"))
    crt = [n for n in names if n.startswith("modlin-matmul-") and not n.startswith(("modlin-matmul-pair",
                                                                                     "modlin-matmul-combine"))]
    assert len(crt) == 1 and sum(key[0] == crt[0] for key in graph if isinstance(key, tuple)) == 2 * 2
    part = dask.get(graph, (pair, 0, 0, 0))  # the residues of A[:10, :9] @ B[:9, :6], balanced
    moduli = plan(p, 20, 36, 12).moduli  # the whole product's
    assert part.dtype == np.int32 and part.shape == (len(moduli), 10, 6)
    exact = balance_rem(A[:10, :9], p) @ balance_rem(B[:9, :6], p)
    assert all(np.array_equal(part[i].astype(object), exact % q) for i, q in enumerate(moduli))
    _same(C.compute(scheduler="sync"), modlin.matmul(A, B, p))
    assert np.array_equal(C.compute(scheduler="sync").astype(object), ref_matmul(A, B, p))


@pytest.mark.parametrize("p", [2**61 - 1, 2**127 - 1])
def test_chunk_residues(p, rng):
    """A chunk pair's residues: those of the exact product of the balanced operands modulo each
    modulus of the whole product's plan, within budgets that give one tile, output panels
    and k-panels, for stacks and every accepted dtype."""
    from modlin._algorithms.products import chunk_residues
    from modlin._planning.planner import plan

    pl = plan(p, 150, 300, 140)  # the whole product's plan: moduli for k = 300

    def check(a, b, shape, exact=None):
        got = chunk_residues(a, b, p, pl)
        exact = balance_rem(a, p) @ balance_rem(b, p) if exact is None else exact
        assert got.dtype == np.int32 and got.shape == (len(pl.moduli),) + shape
        for i, q in enumerate(pl.moduli):
            assert np.array_equal(got[i].astype(object), exact % q)

    A, B = rand_ints(rng, (2, 20, 30), -p, p), rand_ints(rng, (30, 10), 0, p - 1)
    check(A, B, (2, 20, 10))  # a stack; object, uint64 and (below 2**63) int64 entries
    check(A % p if p < 2**63 else A.astype(object), (B % 2**64).astype(np.uint64), (2, 20, 10))
    seen = set()
    for m, k, n in ((150, 130, 140), (64, 1200, 64)):  # output panels; k-panels
        A, B = rand_ints(rng, (m, k), -p, p), rand_ints(rng, (k, n), -p, p)
        exact = balance_rem(A, p) @ balance_rem(B, p)  # once: the budgets below share it
        budget = pl.tiling((m, k, n), residues=True).peak
        while True:
            try:
                t = pl.tiling((m, k, n), budget=budget, residues=True)
            except ValueError:
                break
            if t.count > 1 or (m, k, n) == (150, 130, 140):
                with modlin.limits(memory=budget):
                    check(A, B, (m, n), exact)
            seen |= {"tiles" if t.count > 1 else "one"} | ({"k-panels"} if t.tile[1] < k else set())
            budget = int(budget / 1.25)
    assert seen == {"one", "tiles", "k-panels"}
