"""GPU traffic ledger: what modlin's GPU paths ask of the device, counted without a GPU.

Run anywhere nvcc is (no GPU, no CuPy)::

    python benchmarks/gpu_ledger.py --n 8192

Each path runs on the CuPy stand-in of ``tests/cupy_standin.py`` (modlin's own GPU code,
the kernels by their host twins, cuBLAS' int8 GEMM emulated from the pointers it is
handed), its :class:`~cupy_standin.Ledger` counting every kernel launch, CuPy operation,
GEMM call, host sync and upload, with the bytes each reads and writes (from the array
arguments). Per path: launches, host syncs, non-GEMM bytes per output entry, and a
modelled time at ``--n`` on an H100 and an H200::

    time = int8 GEMM time + non-GEMM bytes / (f * peak bandwidth) + launch and sync overheads

with the constants of :data:`CONSTANTS` (each with its source), ``f`` the achievable share
of the peak bandwidth fitted to the H200 totals measured in ``docs/gpu-results.md``.

Host memory bounds what the stand-in can run, so the ledger is measured at a proxy size
(``--measure-n``, square) and at half of it, and the bytes per output entry extrapolated
to ``--n`` as ``a + b / n`` (per-line vectors add ``b / n``; everything else is
proportional to the ``n**2`` entries of a square product). Counts of launches and syncs
do not depend on ``n`` as long as the product is one tile and ``k`` needs no split, which
the script checks: the plans are made for ``--n`` (the planner picks other plans for small
products), the stand-in's device has an H200's free memory, and the tiling at ``--n`` is
shown for both devices.

``--json`` prints the results as JSON; ``--stages`` adds where each path's bytes go,
stage by stage. Each path's ``stage_fit`` (:func:`fit_stages`) holds its stages at any
size, for :func:`stage_model`: saved (``--json > ledger.json``), they are what
``benchmarks/gpu_report.py --ledger ledger.json`` sets beside the stages it times on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import pathlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

TESTS = pathlib.Path(__file__).resolve().parents[1] / "tests"

#: Every constant of the model, with where it comes from. Times are seconds at n = 8192
#: (square products), measured on the H200 of docs/gpu-results.md (2026-12-04, CuPy 14.2,
#: CUDA 13), medians of 3.
CONSTANTS: dict[str, dict[str, Any]] = {
    "dgemm_8192_s": {
        "value": 0.0170,
        "source": "docs/gpu-results.md, Speed table, n = 8192: matmul mod p 31-bit 0.0353 s = 2.08 DGEMM times, "
                  "50-bit 0.0476 s = 2.80, 61-bit 0.0586 s = 3.45 (all 0.0170 s)"},
    "zgemm_8192_s": {
        "value": 0.0844,
        "source": "docs/gpu-results.md, Speed table, n = 8192: ZGEMM (cupy) native 0.0844 s"},
    "int8_gemm_per_dgemm": {
        "value": 0.0751,
        "source": "docs/gpu-results.md, Passes, n = 8192: int8 GEMMs (TN, B's transposed copy included) 0.741, "
                  "1.117, 1.383 DGEMM times for 10, 15, 18 moduli (0.0741, 0.0745, 0.0768 each); second run 0.0751, "
                  "0.0776, 0.0768: their mean, one n**3 int8 GEMM in DGEMM times (861 int8 TOP/s; 1979 dense peak)"},
    "h200_bandwidth": {
        "value": 4.8e12,
        "source": "NVIDIA H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s"},
    "h100_bandwidth": {
        "value": 3.35e12,
        "source": "NVIDIA H100 SXM datasheet: 80 GB HBM3 at 3.35 TB/s"},
    "h200_memory": {
        "value": 139 * 2**30,
        "source": "free memory of an idle H200 (141 GB; nvidia-smi: 143771 MiB in all), less the CUDA context"},
    "h100_memory": {
        "value": 78 * 2**30,
        "source": "free memory of an idle H100 SXM (80 GB; nvidia-smi: 81559 MiB in all), less the CUDA context"},
    "same_compute": {
        "value": 1.0,
        "source": "H100 SXM and H200 share the GH100 chip and clocks (dense int8 1979 TOP/s, fp64 tensor 67 "
                  "TFLOP/s): GEMM times of the H200 are used for both"},
    "launch_s": {
        "value": 5e-6,
        "source": "assumed: a kernel launch (CuPy operation, kernel, GEMM call, small upload) costs about 5 us "
                  "of device time when the host keeps ahead (CuPy's Python side costs 5-20 us per operation, "
                  "hidden while the queue is full); too small at n = 8192 to fit"},
    "sync_s": {
        "value": 20e-6,
        "source": "assumed: a host sync drains the queue: a round trip and the next launch's latency, about 20 us"},
    "streaming_share": {
        "value": 0.7,
        "source": "assumed until a GPU run measures it (gpu_report.py --ledger, section model): the share of the peak "
                  "bandwidth a fused streaming kernel (coalesced reads and writes, no integer division) reaches on "
                  "Hopper. The H200's measured totals belong to the pipeline before the fused kernels, whose "
                  "ledger (BEFORE_8192) they fit at 0.26 of the peak (0.08 for its unfused kernels alone): a "
                  "share of that pipeline, not of this one"},
}

#: The ledger of the pipeline the H200 measured (commit d7ecb7d, before the fused kernels), at
#: n = 8192: non-GEMM bytes per output entry, launches (kernels and CuPy operations), GEMM
#: calls and host syncs. Fitted to MEASURED_H200_8192 it gave one share of 0.26 of the peak
#: (rms log error 0.21), or 0.53 for CuPy operations and 0.08 for its kernels (0.046).
BEFORE_8192 = {
    "ozaki.zgemm 2M, 16 moduli": (2532, 234, 2, 20),
    "ozaki.dgemm, 16 moduli": (1180, 164, 1, 16),
    "matmul mod 2^31-1": (272, 24, 1, 0),
    "matmul mod 2^61-1": (352, 32, 1, 0),
    "gaussian.matmul 2M, 30-bit m": (1488, 102, 2, 0),
}

#: Totals measured on the H200 at n = 8192 (docs/gpu-results.md, Speed table), by path.
MEASURED_H200_8192 = {
    "ozaki.zgemm 2M, 16 moduli": 0.1649,
    "ozaki.dgemm, 16 moduli": 0.0758,
    "matmul mod 2^31-1": 0.0353,
    "matmul mod 2^61-1": 0.0586,
    "gaussian.matmul 2M, 30-bit m": 0.0891,
}

#: Where bytes go: a record's stage is that of the innermost modlin function on its stack
#: listed here (prefixes of ``module.qualname``), else "other: <innermost function>".
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("(a) line statistics and scales", ("modlin._algorithms.ozaki.scales",)),
    ("operands reduced mod p", ("modlin._algorithms.products.device_residues", "modlin._algorithms.products._gpu_operand")),
    ("Gaussian: 2M images mod m", ("modlin._arith.modular.twom_split",)),
    ("(b) quantisation and int8 residues (2M: images)", ("modlin._algorithms.gpu._panel_residues",
                                                          "modlin._algorithms.gpu._sum_balanced", "modlin._algorithms.gpu.int_residues",
                                                          "modlin._algorithms.gpu._gauss_images")),
    ("(b) GEMM glue: padding, B transposed", ("modlin._engines.cuda.gemm_i8",)),
    ("(b) reductions of the int32 sums", ("modlin._engines.cuda.products_tn",
                                          "modlin._algorithms.gpu._pair_products")),
    ("(b) 2M combine", ("modlin._algorithms.gpu._twom_products", "modlin._algorithms.gpu._combine")),
    ("(b) residues copied into one array", ("modlin._algorithms.gpu.gemm_residues", "modlin._algorithms.gpu.syrk_residues",
                                            "modlin._algorithms.gpu.add_residues")),
    ("(c) CRT", ("modlin._algorithms.gpu.to_double", "modlin._algorithms.gpu.reconstruct_modp", "modlin._algorithms.gpu._twom_crt")),
    ("(c) results copied into the output", ("modlin._algorithms.ozaki.finish", "modlin._algorithms.gpu.rns_multiply",
                                            "modlin._algorithms.products.gpu_matmul.<locals>.finish",
                                            "modlin._algorithms.gaussian.TileProduct.__call__")),
    ("(c) Inf/NaN lines, overflow check", ("modlin._algorithms.ozaki.native_lines", "modlin._algorithms.ozaki.exact_overflow",
                                           "modlin._algorithms.ozaki.may_overflow")),
    ("Gaussian: 2M combine mod m", ("modlin._arith.modular.twom_combine",)),
    ("Gaussian: panels reduced mod m", ("modlin._algorithms.gaussian.tiled_matmul",)),
]


#: The int8 GEMMs themselves (cuBLAS calls), in :func:`stages_of` a stage of their own
#: whatever stage asked for them: the model times them by their work (:func:`gemm_time`),
#: not by their bytes, and ``benchmarks/gpu_report.py`` times them apart.
GEMM_STAGE = "(b) int8 GEMMs (cuBLAS)"

#: The stages that run between a path's GEMMs, one launch after each GEMM (or pair, for 2M) of
#: a modulus: what running each beside the next modulus' GEMM (a second int32 buffer, a
#: second stream) could hide (:func:`overlap_bound`).
OVERLAP_STAGES = ("(b) reductions of the int32 sums", "(b) 2M combine")

#: The share of a path's modelled time that overlapping must be able to hide before it pays
#: for a second int32 buffer (268 MB at n = 8192; 537 MB for 2M's pair) and two streams: the
#: model's own spread, the H200's totals fitted by one bandwidth share to within a factor
#: 1.23 (rms log error 0.21 for the pipeline before the fused kernels, BEFORE_8192), is
#: twice this; a smaller gain is not one the model can promise. And the bound is an upper
#: one: a GEMM that fills every SM leaves a reduction beside it only the tail of its last
#: wave; ``benchmarks/gpu_report.py``'s *overlap* section measures what is really hidden.
OVERLAP_PAYS = 0.10

_STAGE_COUNTS = ("launches", "gemms", "gemm_work", "syncs", "uploads")
_STAGE_BYTES = ("bytes_per_entry", "kernel_bytes_per_entry", "cupy_bytes_per_entry")


def stage_of(record) -> str:
    """The stage of a ledger record (:data:`STAGES`)."""
    for fn in record.stack:
        for label, prefixes in STAGES:
            if any(fn == p or fn.startswith(p + ".") for p in prefixes):
                return label
    return f"other: {record.site or '(outside modlin)'}"


def stages_of(records, entries: int) -> dict[str, dict[str, float]]:
    """The records added up by stage (:func:`stage_of`; GEMM calls under :data:`GEMM_STAGE`).

    Parameters
    ----------
    records : iterable of cupy_standin.Record
        A ledger's records.
    entries : int
        The product's output entries (bytes are counted per entry).

    Returns
    -------
    dict
        Per stage, largest non-GEMM bytes first: ``launches`` (kernels and CuPy operations),
        ``gemms`` and their ``gemm_work`` (multiply-adds), ``syncs``, ``uploads``, and
        ``bytes_per_entry`` (non-GEMM bytes read and written per output entry; of them
        ``kernel_bytes_per_entry`` and ``cupy_bytes_per_entry``).
    """
    out: dict[str, dict[str, float]] = {}
    per = max(entries, 1)
    for r in records:
        s = out.setdefault(GEMM_STAGE if r.kind == "gemm" else stage_of(r),
                           {**dict.fromkeys(_STAGE_COUNTS, 0), **dict.fromkeys(_STAGE_BYTES, 0.0)})
        if r.kind in ("launch", "cupy"):
            moved = (r.bytes_read + r.bytes_written) / per
            s["launches"] += 1
            s["bytes_per_entry"] += moved
            s["kernel_bytes_per_entry" if r.kind == "launch" else "cupy_bytes_per_entry"] += moved
        elif r.kind == "gemm":
            s["gemms"] += 1
            s["gemm_work"] += r.work
        elif r.kind in ("sync", "upload"):
            s[r.kind + "s"] += 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["bytes_per_entry"]))


# ----------------------------------------------------------------------------- the paths

@dataclasses.dataclass(frozen=True)
class Case:
    """One GPU path: ``operands(rng, n)`` makes host operands, ``run(to_gpu, operands, N)``
    runs the product on the stand-in's device arrays with the plans of an ``N``-sized
    product, ``native`` names the vendor GEMM it competes with, ``tiling(cp, N)`` is the
    tiling of the ``N``-sized product within the stand-in device's budget."""

    name: str
    native: str
    operands: Callable[[np.random.Generator, int], tuple]
    run: Callable[[Callable, tuple, int], Any]
    tiling: Callable[[Any, int], Any]
    plan: Callable[[int], str]


def _floats(rng, n: int, cplx: bool):
    """``(rand - 0.5) * exp(0.5 randn)``, docs/gpu-results.md's inputs (complex: two of them)."""
    def one():
        return (rng.random((n, n)) - 0.5) * np.exp(0.5 * rng.standard_normal((n, n)))
    return one() + 1j * one() if cplx else one()


def _ozaki_case(name: str, complex_: bool, moduli: int) -> Case:
    from modlin import ozaki
    from modlin._algorithms import ozaki_tiles

    kind, alg = ("complex", "2m") if complex_ else ("real", "auto")
    fn = ozaki.zgemm if complex_ else ozaki.dgemm
    kw = {"algorithm": "2m"} if complex_ else {}

    def tiling(cp, N):
        mods = ozaki._resolve(kind, "int8", moduli, alg, gpu=True, k=N)
        return ozaki_tiles.product_tiling(mods, complex_, (N, N, N), "fast", False, cp)[0]

    return Case(name, "zgemm" if complex_ else "dgemm",
                lambda rng, n: (_floats(rng, n, complex_), _floats(rng, n, complex_)),
                lambda to_gpu, ops, N: fn(to_gpu(ops[0]), to_gpu(ops[1]), moduli=moduli, **kw),
                tiling, lambda N: f"int8, {moduli} moduli" + (" (2M)" if complex_ else ""))


def _matmul_case(name: str, p: int) -> Case:
    import modlin

    def run(to_gpu, ops, N):
        return modlin.matmul(to_gpu(ops[0]), to_gpu(ops[1]), p, plan=modlin.plan(p, N, N, N, device="cuda"))

    def tiling(cp, N):
        from modlin._planning import tiling as _tiling

        return modlin.plan(p, N, N, N, device="cuda").tiling((N, N, N), budget=_tiling.budget(cp))

    return Case(name, "dgemm", lambda rng, n: (rng.integers(0, p, (n, n)), rng.integers(0, p, (n, n))), run, tiling,
                lambda N: modlin.plan(p, N, N, N, device="cuda").summary)


@contextlib.contextmanager
def replaced_everywhere(real: Callable, stand_in: Callable) -> Iterator[None]:
    """Inside, every modlin module's name bound to ``real`` (a function its module imported
    by name, or defined) is bound to ``stand_in``: a spy that only patched the defining
    module would miss the callers that imported the function."""
    bound = [(m, attr) for name, m in list(sys.modules.items()) if m is not None and name.startswith("modlin")
             for attr, v in list(vars(m).items()) if v is real]
    for m, attr in bound:
        setattr(m, attr, stand_in)
    try:
        yield
    finally:
        for m, attr in bound:
            setattr(m, attr, real)


@contextlib.contextmanager
def planned_at(N: int) -> Iterator[None]:
    """Inside, the device's plans (``modlin.plan(..., device="cuda")``, as
    :func:`modlin.gaussian.matmul` makes them) are those of an ``N x N x N`` product:
    the planner picks other plans for the small products the stand-in runs (and for a
    GPU's smaller products: ``benchmarks/gpu_report.py`` runs the ledger's plans there,
    so this needs no stand-in)."""
    from modlin._planning import planner as _planner

    real = _planner.plan

    def plan(p, m, k, n, **kw):
        return real(p, N, N, N, **kw) if kw.get("device") == "cuda" else real(p, m, k, n, **kw)

    # wherever it was imported (the modules that plan a device's products bind it at import)
    with replaced_everywhere(real, plan):
        yield


def _gaussian_case(name: str, m: int) -> Case:
    import modlin
    import modlin._algorithms.gaussian

    def run(to_gpu, ops, N):
        g, h = to_gpu(ops[0]), to_gpu(ops[1])
        with planned_at(N):
            return modlin.gaussian.matmul((g, h), (h, g), m, algorithm="2m")

    def tiling(cp, N):
        pl = modlin.plan(m, N, N, N, device="cuda")
        return modlin._algorithms.gaussian.gauss_tiling(pl, "2m", False, (N, N, N), 1, xp=cp)

    # (Gr, Gi) @ (Gi, Gr): docs/gpu-results.md's product
    return Case(name, "zgemm", lambda rng, n: (rng.integers(0, m, (n, n)), rng.integers(0, m, (n, n))), run, tiling,
                lambda N: modlin.plan(m, N, N, N, device="cuda").summary)


def cases() -> list[Case]:
    """The five paths of issue #44."""
    return [_ozaki_case("ozaki.zgemm 2M, 16 moduli", True, 16),
            _ozaki_case("ozaki.dgemm, 16 moduli", False, 16),
            _matmul_case("matmul mod 2^31-1", 2**31 - 1),
            _matmul_case("matmul mod 2^61-1", 2**61 - 1),
            _gaussian_case("gaussian.matmul 2M, 30-bit m", 1000000009)]


# ----------------------------------------------------------------------------- measuring

@contextlib.contextmanager
def standin(memory: int | None = None, harness=None) -> Iterator[Callable]:
    """The CuPy stand-in in place (``to_gpu``), its device with ``memory`` bytes free
    (default an H200's, :data:`CONSTANTS`), the kernels' host harness built by nvcc into
    a temporary directory unless given."""
    sys.path.insert(0, str(TESTS))
    try:
        from cupy_standin import Patcher, install

        from conftest import build_harness

        with tempfile.TemporaryDirectory() as tmp, Patcher() as patch:
            lib = harness if harness is not None else build_harness(tmp)
            yield install(patch, lib, device_memory=memory or CONSTANTS["h200_memory"]["value"])
    finally:
        sys.path.remove(str(TESTS))


@contextlib.contextmanager
def tilings(record: Callable = lambda tiling: tiling) -> Iterator[list]:
    """What ``record(tiling)`` gives of each tiling the tile loop runs inside the block, in
    the order they start (:func:`modlin._algorithms.tiles.drive` spied on wherever it was imported;
    ``benchmarks/gpu_report.py`` records the device memory live as each starts)."""
    from modlin._algorithms import tiles as _tiles

    made, drive = [], _tiles.drive

    def spy(tiling, *args, **kwargs):
        made.append(record(tiling))
        return drive(tiling, *args, **kwargs)

    with replaced_everywhere(drive, spy):
        yield made


def measure(case: Case, to_gpu, n: int, N: int, seed: int = 0) -> dict[str, Any]:
    """The ledger of one ``n``-sized product of ``case`` (plans of an ``N``-sized one):
    :meth:`~cupy_standin.Ledger.summary`, plus ``tiles`` (the tiles of the tilings run),
    ``stages`` (:func:`stages_of`) and ``records``."""
    ops = case.operands(np.random.default_rng(seed), n)
    with tilings() as made, to_gpu.ledger as led:
        case.run(to_gpu, ops, N)
    out = led.summary(n * n)
    out["tiles"] = max((t.count for t in made), default=1)
    out["stages"] = stages_of(led.records, n * n)
    out["records"] = list(led.records)
    return out


def extrapolate(small: dict, n1: int, big: dict, n2: int, N: int) -> dict[str, float]:
    """Per-entry bytes at ``N`` from those at ``n1 < n2`` as ``a + b / n``; GEMM work as ``n**3``."""
    def fit(key):
        if n1 == n2:
            return big[key]
        b = (small[key] - big[key]) / (1 / n1 - 1 / n2)
        return big[key] + b * (1 / N - 1 / n2)

    keys = ("bytes_per_entry", "kernel_bytes_per_entry", "cupy_bytes_per_entry", "gemm_bytes_per_entry")
    return {**{k: fit(k) for k in keys}, "gemm_work": big["gemm_work"] * (N / n2) ** 3}


def fit_stages(small: dict, n1: int, big: dict, n2: int) -> dict[str, dict[str, float]]:
    """Each stage of :func:`stages_of` at any size ``n``, from its values at ``n1 < n2``:
    per-entry bytes as ``a + b / n`` (keys ``<name>_a`` and ``<name>_b`` for each of
    :func:`stages_of`'s bytes), GEMM work as ``gemm_work_n3 * n**3``, the counts those at
    ``n2`` (``same_counts``: equal at ``n1``). :func:`stage_model` evaluates them."""
    zero = {**dict.fromkeys(_STAGE_COUNTS, 0), **dict.fromkeys(_STAGE_BYTES, 0.0)}
    out = {}
    for label in big.keys() | small.keys():
        s, b = small.get(label, zero), big.get(label, zero)
        row = {k: b[k] for k in _STAGE_COUNTS if k != "gemm_work"}
        row["gemm_work_n3"] = b["gemm_work"] / n2**3
        row["same_counts"] = all(s[k] == b[k] for k in _STAGE_COUNTS if k != "gemm_work")
        for k in _STAGE_BYTES:
            slope = 0.0 if n1 == n2 else (s[k] - b[k]) / (1 / n1 - 1 / n2)
            row[k + "_a"], row[k + "_b"] = b[k] - slope / n2, slope
        out[label] = row
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["bytes_per_entry_a"]))


# ----------------------------------------------------------------------------- the model

def _c(key: str) -> float:
    return CONSTANTS[key]["value"]


def gemm_time(work: float) -> float:
    """Seconds of int8 GEMMs of ``work`` multiply-adds (the H200's measured rate, both devices)."""
    per_mac = _c("int8_gemm_per_dgemm") * _c("dgemm_8192_s") / 8192**3
    return work * per_mac


def native_time(kind: str, N: int) -> float:
    """Seconds of the vendor's DGEMM or ZGEMM of size ``N`` (measured at 8192, scaled as ``N**3``)."""
    return _c(f"{kind}_8192_s") * (N / 8192) ** 3


def modelled(row: dict, device: str, f: float | tuple[float, float], N: int) -> dict[str, float]:
    """The model's time at ``N`` on ``device`` ("h100", "h200") with bandwidth share ``f``
    (or a pair: that of CuPy operations' bytes, that of modlin's kernels'): its GEMM, bytes
    and overhead parts and their sum."""
    gemm = gemm_time(row["gemm_work"])
    f_cupy, f_kernel = f if isinstance(f, tuple) else (f, f)
    bw = _c(f"{device}_bandwidth")
    traffic = N * N * (row["cupy_bytes_per_entry"] / f_cupy + row["kernel_bytes_per_entry"] / f_kernel) / bw
    overhead = (row["launches"] + row["gemms"] + row["uploads"]) * _c("launch_s") + row["syncs"] * _c("sync_s")
    return {"gemm": gemm, "traffic": traffic, "overhead": overhead, "total": gemm + traffic + overhead}


def stage_model(stage: dict, n: int, device: str, f: float,
                constants: dict[str, dict[str, Any]] | None = None) -> dict[str, float]:
    """The model's time of one stage (of :func:`fit_stages`) in a square product of size ``n``.

    Parameters
    ----------
    stage : dict
        One stage of :func:`fit_stages` (a path's ``stage_fit`` in :func:`run`'s results).
    n : int
        The product's size.
    device : {"h100", "h200"}
        Whose peak bandwidth.
    f : float
        The share of the peak bandwidth the stage's bytes move at.
    constants : dict, optional
        The constants to use (default :data:`CONSTANTS`; the JSON's own when modelling a
        saved ledger, so that ``f`` and its constants belong together).

    Returns
    -------
    dict
        Seconds: ``gemm`` (GEMM work at the int8 rate, :func:`gemm_time`), ``traffic`` (the
        non-GEMM bytes at ``f`` of the peak), ``overhead`` (launches, GEMM calls and uploads
        at ``launch_s`` each, host syncs at ``sync_s``) and ``total``, their sum; and
        ``bytes``, the non-GEMM bytes moved. Over a path's stages these add up to
        :func:`modelled`'s parts.
    """
    c = CONSTANTS if constants is None else constants

    def val(key):
        return c[key]["value"]

    gemm = stage["gemm_work_n3"] * n**3 * val("int8_gemm_per_dgemm") * val("dgemm_8192_s") / 8192**3
    moved = n * n * (stage["bytes_per_entry_a"] + stage["bytes_per_entry_b"] / n)
    traffic = moved / (f * val(f"{device}_bandwidth"))
    calls = stage["launches"] + stage["gemms"] + stage["uploads"]
    overhead = calls * val("launch_s") + stage["syncs"] * val("sync_s")
    return {"gemm": gemm, "traffic": traffic, "overhead": overhead, "total": gemm + traffic + overhead,
            "bytes": moved}


def overlap_bound(row: dict, device: str, f: float, N: int) -> dict[str, float]:
    """What overlapping each modulus' reduction with the next modulus' GEMM could save at
    most, in the model, for one path (a row of :func:`run`) at size ``N`` on ``device``.

    Each stage of :data:`OVERLAP_STAGES` runs after a GEMM and before the next; at best it
    runs entirely beside the next GEMM, and only the last one stays exposed: the bound is
    the stages' modelled traffic and launches times ``(G - 1) / G`` for their ``G`` launches.
    It assumes the GEMM and the reduction share the device for free, which a compute-bound
    GEMM filling every SM does not grant: an upper bound.

    Returns
    -------
    dict
        ``hidden`` (seconds), ``share`` (of the path's modelled total) and ``pays`` (the
        share at least :data:`OVERLAP_PAYS`).
    """
    hidden = 0.0
    for label in OVERLAP_STAGES:
        stage = row["stage_fit"].get(label)
        if stage and stage["launches"]:
            t = stage_model(stage, N, device, f)
            hidden += (t["traffic"] + t["overhead"]) * (stage["launches"] - 1) / stage["launches"]
    total = modelled(row, device, f, N)["total"]
    share = hidden / total
    return {"hidden": hidden, "share": share, "pays": share >= OVERLAP_PAYS}


def _golden(loss: Callable[[float], float], lo: float = 0.01, hi: float = 1.0) -> float:
    """The minimum of a unimodal ``loss`` on ``[lo, hi]`` (golden-section search)."""
    g = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if loss(a) < loss(b) else (a, hi)
    return (lo + hi) / 2


def fit_bandwidth(rows: dict[str, dict], split: bool = False) -> dict[str, Any]:
    """The share ``f`` of the H200's peak bandwidth that best reproduces the measured totals
    at n = 8192 (least squares of ``log(model / measured)`` over the paths measured), and
    each path's ratio model / measured at that ``f``. With ``split``, two shares: CuPy
    operations' bytes and modlin's kernels' (``f`` a pair)."""
    measured = {k: v for k, v in MEASURED_H200_8192.items() if k in rows}

    def loss(f):
        return sum(math.log(modelled(rows[k], "h200", f, 8192)["total"] / t) ** 2 for k, t in measured.items())

    if split:
        def best_kernel(fc):
            return _golden(lambda fk: loss((fc, fk)))

        fc = _golden(lambda fc: loss((fc, best_kernel(fc))))
        f = (fc, best_kernel(fc))
    else:
        f = _golden(loss)
    ratios = {k: modelled(rows[k], "h200", f, 8192)["total"] / t for k, t in measured.items()}
    return {"f": f, "rms_log_error": math.sqrt(loss(f) / max(len(measured), 1)), "model_over_measured": ratios}


# ----------------------------------------------------------------------------- the report

def run(N: int, measure_n: int, harness=None, names: list[str] | None = None) -> dict[str, Any]:
    """Measure every case (at ``measure_n`` and half of it), extrapolate to ``N`` and to 8192
    (the fit's size), fit the bandwidth share and model each path on both devices."""
    from modlin._engines import cuda as _cuda

    results: dict[str, Any] = {"N": N, "measure_n": measure_n, "paths": {}}
    n1 = max(measure_n // 2, 64)
    with standin(harness=harness) as to_gpu:
        cp = to_gpu.cupy
        for case in cases():
            if names and case.name not in names:
                continue
            small = measure(case, to_gpu, n1, N)
            big = measure(case, to_gpu, measure_n, N)
            same = all(small[k] == big[k] for k in ("launches", "gemms", "syncs", "uploads"))
            tiles = {}
            for device in ("h100", "h200"):
                from cupy_standin import set_device_memory

                set_device_memory(cp, int(_c(f"{device}_memory")))
                t = case.tiling(cp, N)
                tiles[device] = t.count
            set_device_memory(cp, int(_c("h200_memory")))
            row = {k: big[k] for k in ("kernels", "cupy_ops", "launches", "gemms", "syncs", "uploads", "sync_bytes",
                                       "upload_bytes")}
            row.update(extrapolate(small, n1, big, measure_n, N))
            row.update(plan=case.plan(N), native=case.native, counts_independent_of_n=same,
                       tiles_measured=big["tiles"], tiles_at_N=tiles, k_split=N > _cuda.KMAX,
                       measured_bytes_per_entry=big["bytes_per_entry"], stages=big["stages"],
                       stage_fit=fit_stages(small["stages"], n1, big["stages"], measure_n))
            row["at_8192"] = extrapolate(small, n1, big, measure_n, 8192)
            results["paths"][case.name] = row
    at_8192 = {k: {**v, **v["at_8192"]} for k, v in results["paths"].items()}
    # the share is assumed (CONSTANTS): the measured totals are another pipeline's; beside
    # them, the model's ratio to them is the speed-up it predicts
    f = _c("streaming_share")
    results["fit"] = {"f": f, "assumed": True, "rms_log_error": None,
                      "model_over_measured": {k: modelled(at_8192[k], "h200", f, 8192)["total"] / t
                                              for k, t in MEASURED_H200_8192.items() if k in at_8192}}
    results["gemm_stage"] = GEMM_STAGE
    for name, row in results["paths"].items():
        row["model"] = {d: modelled(row, d, f, N) for d in ("h100", "h200")}
        row["overlap"] = {d: overlap_bound(row, d, f, N) for d in ("h100", "h200")}
        row["native_s"] = native_time(row["native"], N)
        row["measured_h200_s"] = MEASURED_H200_8192.get(name) if N == 8192 else None
    results["constants"] = CONSTANTS
    return results


def _shown(key: str, value: float) -> str:
    return f"{value / 2**30:g} GiB" if key.endswith("_memory") else f"{value:g}"


def table(results: dict[str, Any], stages: bool = False) -> list[str]:
    """The report as markdown lines."""
    N, fit = results["N"], results["fit"]
    lines = [f"# GPU traffic ledger, n = {N} (measured on the CuPy stand-in at n = {results['measure_n']} "
             f"and {max(results['measure_n'] // 2, 64)})", "",
             "| path | plan | launches | of them CuPy ops | GEMM calls | host syncs | uploads | non-GEMM B/entry "
             "| GEMM B/entry | before: B/entry, launches, syncs | model H100 ms | model H200 ms "
             "| measured H200 ms (before) | native ms | H200 model / native |",
             "|:---|:---|---:|---:|---:|---:|---:|---:|---:|:---|---:|---:|---:|---:|---:|"]
    for name, r in results["paths"].items():
        meas = f"{1e3 * r['measured_h200_s']:.1f}" if r["measured_h200_s"] else ""
        before = BEFORE_8192.get(name)
        was = f"{before[0]}, {before[1]} + {before[2]}, {before[3]}" if before else ""
        lines.append(f"| {name} | {r['plan']} | {r['launches']} | {r['cupy_ops']} | {r['gemms']} | {r['syncs']} "
                     f"| {r['uploads']} | {r['bytes_per_entry']:.0f} | {r['gemm_bytes_per_entry']:.0f} | {was} "
                     f"| {1e3 * r['model']['h100']['total']:.1f} | {1e3 * r['model']['h200']['total']:.1f} | {meas} "
                     f"| {1e3 * r['native_s']:.1f} ({r['native'].upper()}) "
                     f"| {r['model']['h200']['total'] / r['native_s']:.2f} |")
    lines += ["", "Model: time = int8 GEMM time + non-GEMM bytes / (f x peak bandwidth) + (launches + GEMM calls + "
              "uploads) x {:.0f} us + host syncs x {:.0f} us.".format(1e6 * _c("launch_s"), 1e6 * _c("sync_s")),
              f"f = {fit['f']:.2f} of the peak bandwidth, assumed for the fused kernels until a GPU run measures "
              "it (``streaming_share``; the measured totals, and BEFORE_8192's columns, are of the pipeline before "
              "them, which its own ledger fits at 0.26). Model / measured before, the predicted speed-up's "
              "inverse: " + ", ".join(f"{k} {v:.2f}" for k, v in fit["model_over_measured"].items()) + ".", "",
              "| path | GEMM ms | bytes ms H100 | bytes ms H200 | overhead ms | tiles at n (H100 / H200) "
              "| tiles measured | launch counts equal at both sizes | overlap could hide, ms (share) H100 / H200 |",
              "|:---|---:|---:|---:|---:|:---|---:|:---|:---|"]
    for name, r in results["paths"].items():
        m1, m2 = r["model"]["h100"], r["model"]["h200"]
        o1, o2 = r["overlap"]["h100"], r["overlap"]["h200"]
        lines.append(f"| {name} | {1e3 * m2['gemm']:.1f} | {1e3 * m1['traffic']:.1f} | {1e3 * m2['traffic']:.1f} "
                     f"| {1e3 * m2['overhead']:.2f} | {r['tiles_at_N']['h100']} / {r['tiles_at_N']['h200']}"
                     f"{' (k split)' if r['k_split'] else ''} | {r['tiles_measured']} "
                     f"| {'yes' if r['counts_independent_of_n'] else 'NO'} "
                     f"| {1e3 * o1['hidden']:.2f} ({o1['share']:.1%}) / {1e3 * o2['hidden']:.2f} ({o2['share']:.1%}) |")
    lines += ["", "Overlap: the most that running each modulus' reduction beside the next GEMM could hide "
              f"(``overlap_bound``); it pays from {OVERLAP_PAYS:.0%} of the path's time (``OVERLAP_PAYS``): "
              + ", ".join(f"{k} {'pays' if r['overlap']['h200']['pays'] else 'does not pay'}"
                          for k, r in results["paths"].items()) + " (H200)."]
    lines += ["", "Constants:", ""] + [f"* ``{k}`` = {_shown(k, v['value'])}: {v['source']}"
                                       for k, v in CONSTANTS.items()]
    if stages:
        for name, r in results["paths"].items():
            lines += ["", f"## {name}: bytes per output entry by stage (at n = {results['measure_n']})", "",
                      "| stage | launches | GEMM calls | host syncs | uploads | B/entry | share |",
                      "|:---|---:|---:|---:|---:|---:|---:|"]
            total = sum(s["bytes_per_entry"] for s in r["stages"].values()) or 1.0
            for label, s in r["stages"].items():
                lines.append(f"| {label} | {s['launches']} | {s['gemms']} | {s['syncs']} | {s['uploads']} "
                             f"| {s['bytes_per_entry']:.0f} | {s['bytes_per_entry'] / total:.0%} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8192, help="the product size modelled (square)")
    parser.add_argument("--measure-n", type=int, default=1024,
                        help="the size run on the stand-in (and half of it), square")
    parser.add_argument("--paths", nargs="+", help="only these paths (names as printed)")
    parser.add_argument("--stages", action="store_true", help="also where each path's bytes go")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = parser.parse_args(argv)
    results = run(args.n, args.measure_n, names=args.paths)
    if args.json:
        print(json.dumps(results, indent=1, default=str))
    else:
        print("\n".join(table(results, args.stages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
