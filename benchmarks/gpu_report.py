r"""GPU report: check modlin's public functions on CuPy arrays, then time them.

How to run on a lent GPU (15 minutes of device time in all, the machine's start
included): first, on any machine with nvcc (no GPU; about 10 s), the traffic ledger
that the *model* section compares with the GPU, saved where the working tree carries it
to the GPU (untracked and not ignored; do not commit it)::

    PYTHONPATH=. python benchmarks/gpu_ledger.py --json > ledger.json

then, on the GPU, in one call with a limit of 480 s (``timeout_s``), everything::

    set -o pipefail; PYTHONUNBUFFERED=1 PYTHONPATH=. timeout 420 python3 benchmarks/gpu_report.py \
        --sizes 4096 8192 --repeats 3 --ledger ledger.json --out $OUT/gpu-results.md 2>&1 | tee $OUT/gpu-report.log

Each section's wall time on an H100, estimated from the H200's runs in
``docs/gpu-results.md`` (they are mostly host work, inputs made and CPU results computed,
so an H100 takes about as long; its memory is 30 % slower): check 40 s (plus up to a
minute compiling the kernels and numba's CPU code on a fresh machine), passes 10 s, memory
60 s, table 30 s, stages 20 s, model 30 s (inputs made on the host for five paths at two
sizes), overlap 10 s: 4 to 5 minutes, 6 to 8 with the machine's start. ``--out`` is written after every
section, so a run cut short keeps what it measured, and the 420 s limit leaves the time to
rerun what is missing (``--sections model``, say) on the warm machine.

Run on a machine with a CUDA GPU and CuPy::

    python benchmarks/gpu_report.py --out docs/gpu-results.md

First every public function is run on CuPy inputs and compared with the CPU
result of the same call on NumPy inputs (bit for bit where the function is
exact, and for the float emulation bit for bit too: the GPU and CPU paths
compute the same correctly rounded values). Then one table: ozaki.zgemm
(2M, 3M, 4M; 8, 12, 16 moduli) and ozaki.dgemm against CuPy's own
ZGEMM/DGEMM at n = 4096 and 8192 with their accuracy beside the speed;
gaussian.matmul 2M against 3M; matmul modulo 20-, 31-, 50- and 61-bit
primes against a float64 ``cupy.matmul`` of the same size. Each time is the median of ``--repeats``
runs after a warm-up, the stream synchronised around each run.

Two more sections calibrate the planner's GPU constants. *Passes*: the
residue number system's stages timed apart (residues, int8 GEMMs, their
reduction, CRT) against a DGEMM of the same size, with the values of
``modlin._planning.rnsplan.GPU_PASS_FACTOR`` and ``modlin._engines.gemm.GPU_RELATIVE_COST``
they imply, and the modelled against the measured time of each plan.
*Memory*: the peak of CuPy's memory pool during each product (a
``cupy.cuda.MemoryHook``) beyond its result, against the tile scheduler's
modelled peak; then the same products with the device's free memory squeezed
(a filler array) so that they must tile: bit-identical results, the peak
within the budget.

*Stages*: where ozaki's time goes, each stage's functions timed with the stream
synchronised around every call (:func:`_spied`). *Model*: the same timing for every
stage of the traffic ledger (``benchmarks/gpu_ledger.py``) on each of its five paths,
beside the ledger's model of that stage (``--ledger``, its JSON) and the share of the
peak bandwidth each stage's measured time implies: what recalibrates the ledger's
constants after a GPU run. *Overlap*: a residue number system's GEMMs and reductions
in turn, as modlin runs them, against the same on two streams (each modulus' reduction
beside the next GEMM), with the residues of both compared: whether overlapping pays
(the ledger's bound, ``gpu_ledger.overlap_bound``, is 6-9 % of a path's time).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import functools
import importlib
import importlib.util
import inspect
import json
import pathlib
import platform
import sys
import time
import traceback
import types

import numpy as np

PRIMES = {20: 1048573, 31: 2147483647, 50: 2**50 - 27, 61: 2**61 - 1}

#: The sections, in the order they run by default (``--sections``).
SECTIONS = ("check", "passes", "memory", "table", "stages", "model", "overlap")


def _timeit(fn, repeats: int) -> float:
    import cupy as cp

    fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeats):
        cp.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.get_current_stream().synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _gen(rng, shape, phi, cplx):
    x = (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    if cplx:
        x = x + 1j * (rng.random(shape) - 0.5) * np.exp(phi * rng.standard_normal(shape))
    return x


def check(lines: list[str]) -> bool:
    """Every public function on CuPy inputs against its CPU result; one line per check."""
    import cupy as cp

    import modlin
    from modlin import ozaki

    rng = np.random.default_rng(0)
    ok = True

    def record(name, fn):
        nonlocal ok
        try:
            good, detail = fn()
        except Exception as exc:  # a GPU failure must not stop the report
            good, detail = False, f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            traceback.print_exc()
        ok &= good
        lines.append(f"| {name} | {'ok' if good else 'FAILED'} | {detail} |")

    for bits, p in PRIMES.items():
        for (m, k, n) in ((64, 300, 48), (257, 1031, 129)):
            A = rng.integers(-(2**62), 2**62, (m, k))
            B = rng.integers(0, p, (k, n))

            def run(A=A, B=B, p=p):
                got = modlin.matmul(cp.asarray(A), cp.asarray(B), p).get()
                want = modlin.matmul(A, B, p)
                return np.array_equal(got, want), f"{m}x{k}x{n}"

            record(f"matmul mod {bits}-bit p", run)
    for p in (PRIMES[31], PRIMES[61]):
        A = np.full((40, 2000), p - 1)

        def worst(A=A, p=p):
            got = modlin.matmul(cp.asarray(A), cp.asarray(A.T.copy()), p).get()
            return np.array_equal(got, modlin.matmul(A, A.T, p)), "all entries p - 1"

        record(f"matmul worst case mod {p.bit_length()}-bit p", worst)
    for phi in (0.0, 1.0):
        A, B = _gen(rng, (96, 700), phi, False), _gen(rng, (700, 80), phi, False)
        Z, W = _gen(rng, (96, 700), phi, True), _gen(rng, (700, 80), phi, True)
        for mode in ("fast", "accurate"):
            record(f"ozaki.dgemm phi={phi} {mode}", lambda A=A, B=B, mode=mode: (
                np.array_equal(ozaki.dgemm(cp.asarray(A), cp.asarray(B), mode=mode).get(),
                               ozaki.dgemm(A, B, engine="int8", mode=mode)), "int8, default moduli"))
            for alg in ("2m", "3m", "4m", "hybrid"):
                record(f"ozaki.zgemm {alg} phi={phi} {mode}", lambda Z=Z, W=W, mode=mode, alg=alg: (
                    np.array_equal(ozaki.zgemm(cp.asarray(Z), cp.asarray(W), mode=mode, algorithm=alg,
                                               moduli=24 if alg == "hybrid" else None).get(),
                                   ozaki.zgemm(Z, W, engine="int8", mode=mode, algorithm=alg,
                                               moduli=24 if alg == "hybrid" else None)), "int8"))
        record(f"ozaki.dsyrk phi={phi}", lambda A=A: (
            np.array_equal(ozaki.dsyrk(cp.asarray(A)).get(), ozaki.dsyrk(A, engine="int8")), "int8"))
        record(f"ozaki.zherk phi={phi}", lambda Z=Z: (
            np.array_equal(ozaki.zherk(cp.asarray(Z)).get(), ozaki.zherk(Z, engine="int8")), "int8"))
    # k beyond one int32 accumulator: the split path
    A, B = _gen(rng, (4, 2**17 + 9), 0.5, False), _gen(rng, (2**17 + 9, 3), 0.5, False)
    record("ozaki.dgemm k = 2**17 + 9", lambda: (
        np.array_equal(ozaki.dgemm(cp.asarray(A), cp.asarray(B)).get(), ozaki.dgemm(A, B, engine="int8")),
        "4x131081x3"))
    for m in (1000000009, 2**50 - 27):
        for alg in ("2m", "3m", "4m"):
            G = rng.integers(0, m, (70, 300)) + 1j * rng.integers(0, m, (70, 300))
            H = rng.integers(0, m, (300, 50)) + 1j * rng.integers(0, m, (300, 50))

            def gauss(G=G, H=H, m=m, alg=alg):
                got = modlin.gaussian.matmul(cp.asarray(G), cp.asarray(H), m, algorithm=alg)
                want = modlin.gaussian.matmul(G, H, m, algorithm=alg)
                return all(np.array_equal(g.get(), w) for g, w in zip(got, want)), f"{m.bit_length()}-bit m"

            record(f"gaussian.matmul {alg}", gauss)
    return ok


def _relerr(x, ref):
    import cupy as cp

    den = cp.abs(ref)
    den = cp.where(den == 0, 1.0, den)
    return float(cp.max(cp.abs(x - ref) / den))


def table(lines: list[str], sizes, repeats: int) -> None:
    import cupy as cp

    import modlin
    from modlin import ozaki

    rng = np.random.default_rng(1)
    lines += ["| n | product | setting | time s | vs native | max rel. error | native error |",
              "|---:|:---|:---|---:|---:|---:|---:|"]
    for n in sizes:
        A = cp.asarray(_gen(rng, (n, n), 0.5, False))
        B = cp.asarray(_gen(rng, (n, n), 0.5, False))
        t_d = _timeit(lambda: A @ B, repeats)
        ref = ozaki.dgemm(A, B, moduli=30)  # about 2**230: far beyond double accuracy
        nat = _relerr(A @ B, ref)
        for count in (12, 16):
            t = _timeit(lambda: ozaki.dgemm(A, B, moduli=count), repeats)
            err = _relerr(ozaki.dgemm(A, B, moduli=count), ref)
            lines.append(f"| {n} | ozaki.dgemm | int8, {count} moduli | {t:.4f} | {t_d / t:.2f}x faster | "
                         f"{err:.1e} | {nat:.1e} |")
        ref = None
        Z = A + 1j * cp.asarray(_gen(rng, (n, n), 0.5, False))
        W = B + 1j * cp.asarray(_gen(rng, (n, n), 0.5, False))
        A = B = None  # free the device memory before the complex matrices
        t_z = _timeit(lambda: Z @ W, repeats)
        ref = ozaki.zgemm(Z, W, moduli=30, algorithm="hybrid")
        nat = _relerr(Z @ W, ref)
        times = {}
        for alg in ("2m", "3m", "4m"):
            for count in (8, 12, 16):
                t = _timeit(lambda: ozaki.zgemm(Z, W, moduli=count, algorithm=alg), repeats)
                times[alg, count] = t
                err = _relerr(ozaki.zgemm(Z, W, moduli=count, algorithm=alg), ref)
                lines.append(f"| {n} | ozaki.zgemm | {alg.upper()}, {count} moduli | {t:.4f} | "
                             f"{t_z / t:.2f}x faster | {err:.1e} | {nat:.1e} |")
        lines.append(f"| {n} | ZGEMM (cupy) | native | {t_z:.4f} | 1.00x | | |")
        lines.append(f"| {n} | 2M vs 3M | 16 moduli | | 2M {times['3m', 16] / times['2m', 16]:.2f}x faster | | |")
        Z = W = ref = None
        m = 1000000009  # a 30-bit prime 1 (mod 4)
        Gr, Gi = cp.asarray(rng.integers(0, m, (n, n))), cp.asarray(rng.integers(0, m, (n, n)))
        gt = {alg: _timeit(lambda: modlin.gaussian.matmul((Gr, Gi), (Gi, Gr), m, algorithm=alg), repeats)
              for alg in ("2m", "3m")}
        lines.append(f"| {n} | gaussian.matmul | 30-bit m, 2M | {gt['2m']:.4f} | 2M {gt['3m'] / gt['2m']:.2f}x "
                     f"faster than 3M ({gt['3m']:.4f} s) | exact | |")
        Gr = Gi = None
        X = cp.asarray(rng.integers(0, 2**31 - 1, (n, n)))
        Y = cp.asarray(rng.integers(0, 2**31 - 1, (n, n)))
        F, G = X.astype(cp.float64), Y.astype(cp.float64)
        t_f = _timeit(lambda: F @ G, repeats)
        for bits, p in PRIMES.items():
            pl = modlin.plan(p, n, n, n, device="cuda")
            t = _timeit(lambda: modlin.matmul(X, Y, p), repeats)
            lines.append(f"| {n} | matmul mod p | {bits}-bit p, {pl.summary if hasattr(pl, 'summary') else pl.engine} "
                         f"| {t:.4f} | {t / t_f:.2f}x DGEMM time | exact | |")
            if bits == 31:
                fp = modlin.plan(p, n, n, n, device="cuda", engine="fp64", algorithm="multiword")
                t_mw = _timeit(lambda: modlin.matmul(X, Y, p, plan=fp), repeats)
                lines.append(f"| {n} | matmul mod p | 31-bit p, best fp64 multiword plan | {t_mw:.4f} | "
                             f"{t_mw / t_f:.2f}x DGEMM time; chosen plan {t_mw / t:.2f}x faster | exact | |")
        X = Y = F = G = None


def _free_pool() -> None:
    import cupy as cp

    cp.cuda.get_current_stream().synchronize()
    cp.get_default_memory_pool().free_all_blocks()


def _peak_hook():
    """A memory hook counting the bytes CuPy's pool hands out: ``.peak`` after the block."""
    import cupy as cp

    class Peak(cp.cuda.MemoryHook):
        name = "modlin_peak"

        def __init__(self):
            self.live = self.peak = 0

        def malloc_postprocess(self, **kw):
            self.live += kw["mem_size"]
            self.peak = max(self.peak, self.live)

        def free_postprocess(self, **kw):
            self.live -= kw["mem_size"]

    return Peak()


def _tilings(hook=None):
    """The tilings run inside the block, in the order they start (the ledger's spy on the tile
    loop), each with the bytes ``hook`` (a :func:`_peak_hook`) counted live as it started:
    ``(tiling, live)``."""
    return _ledger_module().tilings(lambda tiling: (tiling, getattr(hook, "live", 0)))


def _cases(n: int, rng):
    """``(name, function, result bytes)`` of the products whose memory is measured."""
    import cupy as cp

    import modlin
    from modlin import ozaki

    X = cp.asarray(rng.integers(0, 2**62, (n, n)))
    Y = cp.asarray(rng.integers(0, 2**62, (n, n)))
    F = cp.asarray(_gen(rng, (n, n), 0.5, False))
    G = cp.asarray(_gen(rng, (n, n), 0.5, False))
    Z, W = F + 1j * G, G - 0.5j * F
    m = 1000000009
    R, S = X % m, Y % m
    fp = modlin.plan(PRIMES[31], n, n, n, device="cuda", engine="fp64", algorithm="multiword")
    e = 8 * n * n
    return [
        ("matmul 31-bit p, chosen plan", lambda: modlin.matmul(X, Y, PRIMES[31]), e),
        ("matmul 31-bit p, fp64 multiword", lambda: modlin.matmul(X, Y, PRIMES[31], plan=fp), e),
        ("matmul 61-bit p", lambda: modlin.matmul(X, Y, PRIMES[61]), e),
        ("ozaki.dgemm", lambda: ozaki.dgemm(F, G), e),
        ("ozaki.zgemm", lambda: ozaki.zgemm(Z, W), 2 * e),
        ("gaussian.matmul 2M, 30-bit m", lambda: modlin.gaussian.matmul((R, S), (S, R), m, algorithm="2m"), 2 * e),
    ]


def _host(x):
    return tuple(v.get() for v in x) if isinstance(x, tuple) else x.get()


def _same(x, y) -> bool:
    if isinstance(x, tuple):
        return all(_same(a, b) for a, b in zip(x, y))
    return np.array_equal(x, y) if x.dtype.kind != "f" and x.dtype.kind != "c" else \
        np.array_equal(x.view(np.uint8), y.view(np.uint8))


def memory(lines: list[str], n: int, repeats: int) -> bool:
    """Measured against modelled working memory, then the same products squeezed into a
    small device budget; False if a squeezed result differs or overruns its budget."""
    import cupy as cp

    rng = np.random.default_rng(2)
    ok = True
    lines += [f"### n = {n}", "",
              "| product | tiles | modelled peak MiB | held before the tiles MiB | tiles' measured peak MiB "
              "| measured / model |", "|:---|---:|---:|---:|---:|---:|"]
    cases = _cases(n, rng)
    whole = {}
    for name, fn, out_bytes in cases:
        try:
            fn()  # compile the kernels, plan
            _free_pool()
            with _peak_hook() as hook, _tilings(hook) as made:
                t0 = time.perf_counter()
                got = fn()
                cp.cuda.get_current_stream().synchronize()
                whole[name] = (_host(got), time.perf_counter() - t0)
            got = None
            # the product's own tiling (a Gaussian product's real products run theirs inside
            # it); held before it: the result and the operands' reduced copies
            t, before = made[0]
            extra = hook.peak - before
            lines.append(f"| {name} | {t.count} | {t.peak / 2**20:.0f} | {before / 2**20:.0f} | "
                         f"{extra / 2**20:.0f} | {extra / max(t.peak, 1):.2f} |")
        except Exception as exc:
            traceback.print_exc()
            ok = False
            lines.append(f"| {name} | FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} | | | | |")
    lines += ["", "Squeezed: a filler array leaves the device this much free memory; the tiles' budget is "
              "what is free, less a reserve, once the result and the operands' reduced copies are made "
              "(``modlin._planning.tiling.budget``). *Fits*: the pool's peak, result included, within the free memory.", "",
              "| product | free MiB | budget MiB | tiles | modelled peak MiB | tiles' measured peak MiB "
              "| fits | bit-identical | time / unsqueezed |", "|:---|---:|---:|---:|---:|---:|:---|:---|---:|"]
    for name, fn, out_bytes in cases:
        if name not in whole:
            continue
        want, t_whole = whole[name]
        for share in (4, 16):
            filler = None
            try:
                _free_pool()
                free = cp.cuda.Device().mem_info[0]
                # the result, the operands' reduced copies made before the budget is read, a share
                target = 3 * out_bytes + max(n * n * 8 * 8 // share, 64 * 2**20)
                filler = cp.empty(max(free - target, 0), dtype=cp.uint8)
                left = cp.cuda.Device().mem_info[0] + cp.get_default_memory_pool().free_bytes()
                with _peak_hook() as hook, _tilings(hook) as made:
                    t0 = time.perf_counter()
                    got = fn()
                    cp.cuda.get_current_stream().synchronize()
                    t_sq = time.perf_counter() - t0
                t, before = made[0]
                extra = hook.peak - before
                same = _same(_host(got), want)
                within = hook.peak <= left
                ok &= same and within
                got = None
                lines.append(f"| {name} | {left / 2**20:.0f} | {t.budget / 2**20:.0f} | {t.count} | "
                             f"{t.peak / 2**20:.0f} | {extra / 2**20:.0f} | {'yes' if within else 'NO'} | "
                             f"{'yes' if same else 'NO'} | {t_sq / t_whole:.2f} |")
            except Exception as exc:
                if isinstance(exc, ValueError) and "too small for this product" in str(exc):
                    lines.append(f"| {name} | {left / 2**20:.0f} | refused: {str(exc)[:160]} | | | | | | |")
                    continue
                traceback.print_exc()
                ok = False
                lines.append(f"| {name} | FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} "
                             "| | | | | | | |")
            finally:
                filler = None  # noqa: F841 (the filler's device memory goes back before the pool is freed)
                _free_pool()
    lines.append("")
    return ok


def passes(lines: list[str], sizes, repeats: int) -> None:
    """The residue number system's stages timed apart, and each plan's modelled against
    its measured time, in DGEMM times of the same size."""
    import cupy as cp

    import modlin
    from modlin._algorithms import gpu as _gpu
    from modlin._engines import cuda as _cuda
    from modlin._planning import plan as _plan, rnsplan as _rnsplan

    rng = np.random.default_rng(3)
    lines += ["| n | p | plan | measured / DGEMM | modelled / DGEMM | residues | int8 GEMMs | reductions | CRT "
              "| implied GPU_PASS_FACTOR | implied int8 cost |",
              "|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        X = cp.asarray(rng.integers(0, 2**31 - 1, (n, n)))
        Y = cp.asarray(rng.integers(0, 2**31 - 1, (n, n)))
        F, G = X.astype(cp.float64), Y.astype(cp.float64)
        t_d = _timeit(lambda: F @ G, repeats)
        F = G = None
        for bits in (31, 50, 61):
            p = PRIMES[bits]
            try:
                pl = modlin.plan(p, n, n, n, device="cuda")
                t_all = _timeit(lambda: modlin.matmul(X, Y, p), repeats)
                row = f"| {n} | {bits}-bit | {pl.summary} | {t_all / t_d:.2f} | {pl.relative_cost():.2f} |"
                if isinstance(pl, modlin.RNSPlan) and n <= _cuda.KMAX:
                    # the pipeline of _gpu.rns_multiply stage by stage: residues of both operands,
                    # the GEMMs alone (one per modulus into one int32 buffer), GEMMs with their
                    # reductions (the difference: the reductions), the CRT into the result
                    mods, N = pl.moduli, len(pl.moduli)
                    table = _cuda.small_table(mods)
                    t_res = _timeit(lambda: (_gpu.int_residues(X, p, table, N, False),
                                             _gpu.int_residues(Y, p, table, N, True)), repeats)
                    ra, rb = _gpu.int_residues(X, p, table, N, False), _gpu.int_residues(Y, p, table, N, True)
                    buf = cp.empty((n, rb.shape[1]), dtype=cp.int32)
                    t_g = _timeit(lambda: [_cuda.gemm_i8_tn(ra[i], rb[i], buf) for i in range(N)], repeats)
                    prod = cp.empty((N, n, n), dtype=cp.uint8)
                    t_pm = _timeit(lambda: _cuda.products_tn(ra, rb, table, n, prod, buf), repeats)
                    out = cp.empty((n, n), dtype=cp.int64)
                    t_crt = _timeit(lambda: _gpu.reconstruct_modp(prod, mods, p, out), repeats)
                    ra = rb = prod = buf = out = None
                    factor = _rnsplan.GPU_PASS_FACTOR
                    try:
                        _rnsplan.GPU_PASS_FACTOR = 0.0
                        gemm_model = pl.cost()
                    finally:
                        _rnsplan.GPU_PASS_FACTOR = factor
                    pass_model = (pl.cost() - gemm_model) / factor  # the passes at factor 1
                    measured = (t_res + (t_pm - t_g) + t_crt) / t_d * n**3
                    row += (f" {t_res / t_d:.3f} | {t_g / t_d:.3f} | {(t_pm - t_g) / t_d:.3f} | {t_crt / t_d:.3f} "
                            f"| {measured / pass_model:.4f} | {t_g / t_d / len(mods):.4f} |")
                else:
                    scale = _plan.device_pass_scale
                    try:
                        _plan.device_pass_scale = lambda device, threads=None: 0.0
                        gemm_model = pl.cost()
                    finally:
                        _plan.device_pass_scale = scale
                    pass_model = pl.cost() - gemm_model
                    measured = t_all / t_d * n**3 - gemm_model
                    row += f" | | | | {measured / max(pass_model, 1.0):.4f} | |"
                lines.append(row)
                if bits == 31:
                    fp = modlin.plan(p, n, n, n, device="cuda", engine="fp64", algorithm="multiword")
                    t_mw = _timeit(lambda: modlin.matmul(X, Y, p, plan=fp), repeats)
                    scale = _plan.device_pass_scale
                    try:
                        _plan.device_pass_scale = lambda device, threads=None: 0.0
                        gemm_model = fp.cost()
                    finally:
                        _plan.device_pass_scale = scale
                    pass_model = fp.cost() - gemm_model
                    implied = (t_mw / t_d * n**3 - gemm_model) / max(pass_model, 1.0)
                    lines.append(f"| {n} | {bits}-bit | {fp.summary} | {t_mw / t_d:.2f} | {fp.relative_cost():.2f} "
                                 f"| | | | | {implied:.4f} (of the CPU's pass cost) | |")
            except Exception as exc:
                traceback.print_exc()
                lines.append(f"| {n} | {bits}-bit | FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} "
                             "| | | | | | | | |")
        X = Y = None
        _free_pool()


def _beside(ra, rb, table, res, buffers, streams) -> None:
    """:func:`modlin._engines.cuda.products_tn` (one k chunk) with each modulus' reduction run
    beside the next modulus' GEMM: the GEMMs on ``streams[0]`` into the two int32
    ``buffers`` in turn, the reductions on ``streams[1]``; a GEMM waits for the reduction
    that last read its buffer, a reduction for its GEMM, the caller's stream for the last
    reduction (and both streams for the caller's work before them)."""
    import cupy as cp

    from modlin._engines import cuda as _cuda

    gemms, reductions = streams
    caller = cp.cuda.get_current_stream()
    ready = caller.record()
    gemms.wait_event(ready)
    reductions.wait_event(ready)
    free = [None, None]
    for i in range(res.shape[0]):
        X = buffers[i % 2]
        with gemms:
            if free[i % 2] is not None:
                gemms.wait_event(free[i % 2])
            _cuda.gemm_i8_tn(ra[i], rb[i], X)
            done = gemms.record()
        with reductions:
            reductions.wait_event(done)
            _cuda.reduce_products(X, table, i, False, res[i])
            free[i % 2] = reductions.record()
    caller.wait_event(reductions.record())


def overlap(lines: list[str], sizes, repeats: int) -> bool:
    """Whether each modulus' reduction pays to run beside the next modulus' GEMM: the
    GEMMs and reductions of ``matmul`` mod 2**31 - 1 and 2**61 - 1 (their plans' moduli)
    timed in turn (:func:`modlin._engines.cuda.products_tn`, as modlin runs them), the GEMMs
    alone, the reductions alone, and both on two streams with two int32 buffers
    (:func:`_beside`), whose residues must equal those run in turn (a race would show)."""
    import cupy as cp

    import modlin
    from modlin._algorithms import gpu as _gpu
    from modlin._engines import cuda as _cuda

    rng = np.random.default_rng(5)
    ok = True
    lines += ["| n | p | moduli | in turn ms | GEMMs alone ms | reductions alone ms | beside ms | hidden "
              "| of the reductions | same residues |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|"]
    for n in sizes:
        for bits in (31, 61):
            p = PRIMES[bits]
            pl = modlin.plan(p, n, n, n, device="cuda", algorithm="rns", engine="int8")
            N = len(pl.moduli)
            table = _cuda.small_table(pl.moduli)
            X, Y = cp.asarray(rng.integers(0, p, (n, n))), cp.asarray(rng.integers(0, p, (n, n)))
            ra, rb = _gpu.int_residues(X, p, table, N, False), _gpu.int_residues(Y, p, table, N, True)
            X = Y = None
            buffers = [cp.empty((n, rb.shape[1]), dtype=cp.int32) for _ in range(2)]
            serial, both = cp.empty((N, n, n), dtype=cp.uint8), cp.empty((N, n, n), dtype=cp.uint8)
            streams = (cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True))
            t_turn = _timeit(lambda: _cuda.products_tn(ra, rb, table, n, serial, buffers[0]), repeats)
            t_gemm = _timeit(lambda: [_cuda.gemm_i8_tn(ra[i], rb[i], buffers[0]) for i in range(N)], repeats)
            t_red = _timeit(lambda: [_cuda.reduce_products(buffers[0], table, i, False, both[i]) for i in range(N)],
                            repeats)
            t_two = _timeit(lambda: _beside(ra, rb, table, both, buffers, streams), repeats)
            same = bool((serial == both).all())
            ok &= same
            lines.append(f"| {n} | {bits}-bit | {N} | {1e3 * t_turn:.2f} | {1e3 * t_gemm:.2f} | {1e3 * t_red:.2f} "
                         f"| {1e3 * t_two:.2f} | {(t_turn - t_two) / t_turn:.1%} "
                         f"| {(t_turn - t_two) / max(t_turn - t_gemm, 1e-12):.0%} | {'yes' if same else 'NO'} |")
            ra = rb = buffers = serial = both = None
            _free_pool()
    return ok


class _Spent:
    """Seconds spent in spied functions (:func:`_spied`), by key: ``inclusive`` (the calls'
    wall times), ``exclusive`` (less the spied calls made inside them, so that each second
    counts once, where the innermost spied function spent it: the ledger's rule for bytes,
    :func:`gpu_ledger.stage_of`) and ``calls``."""

    def __init__(self) -> None:
        self.inclusive: dict[str, float] = {}
        self.exclusive: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.open: list[float] = []  # per spied call under way: the seconds of spied calls inside it

    def add(self, key: str, seconds: float, inner: float) -> None:
        self.inclusive[key] = self.inclusive.get(key, 0.0) + seconds
        self.exclusive[key] = self.exclusive.get(key, 0.0) + seconds - inner
        self.calls[key] = self.calls.get(key, 0) + 1


@contextlib.contextmanager
def _spied(targets):
    """Time functions on the GPU, the stream synchronised before and after every call.

    Parameters
    ----------
    targets : iterable of (str, object, str)
        ``(key, owner, name)``: the function ``owner.name`` (a module's function or a class's
        method), its seconds added up under ``key`` (several functions may share one).

    Yields
    ------
    _Spent
        The seconds, filled in as the spied functions run inside the block.

    Notes
    -----
    A module's function is replaced wherever modlin holds it, not only where it is defined:
    as any modlin module's attribute (a ``from ... import`` copy), and as a field of a
    dataclass instance there (the GPU's stage functions reach the tile loop through
    :data:`modlin._algorithms.gpu.OZAKI`). The synchronisation before a call drains what the
    caller queued, which so counts as the caller's; the host's own time between the calls
    counts as the innermost spied function's under way (the device idles meanwhile: in an
    unsynchronised run it overlaps the queue), and the synchronisations add a little.
    """
    import cupy as cp

    spent = _Spent()
    undo = []

    def sync():
        cp.cuda.get_current_stream().synchronize()

    def timed(f, key):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            sync()
            spent.open.append(0.0)
            t0 = time.perf_counter()
            try:
                out = f(*args, **kwargs)
                sync()
            finally:
                seconds = time.perf_counter() - t0
                spent.add(key, seconds, spent.open.pop())
                if spent.open:
                    spent.open[-1] += seconds
            return out
        return wrapper

    def put(obj, name, value):
        missing = isinstance(obj, type) and name not in vars(obj)  # an inherited method
        old = getattr(obj, name)
        setattr(obj, name, value)
        undo.append(lambda: delattr(obj, name) if missing else setattr(obj, name, old))

    modules = [m for n, m in list(sys.modules.items()) if m is not None and (n == "modlin" or n.startswith("modlin."))]
    try:
        for key, owner, name in targets:
            orig = getattr(owner, name)
            new = timed(orig, key)
            if isinstance(owner, type):
                put(owner, name, new)
                continue
            for m in modules if owner in modules else [owner, *modules]:
                for attr, v in list(vars(m).items()):
                    if v is orig:
                        put(m, attr, new)
                    elif dataclasses.is_dataclass(v) and not isinstance(v, type):
                        hit = {fl.name: new for fl in dataclasses.fields(v) if getattr(v, fl.name, None) is orig}
                        if hit:
                            put(m, attr, dataclasses.replace(v, **hit))
        yield spent
    finally:
        while undo:  # last first: a dataclass replaced twice comes back as it was
            undo.pop()()


def stages(lines: list[str], sizes, repeats: int) -> None:
    """Where ``ozaki``'s time goes on the GPU: each stage's functions timed with the stream
    synchronised around every call (one run after a warm-up), in shares of the whole."""
    import cupy as cp

    from modlin import ozaki
    from modlin._algorithms import gpu as _gpu, ozaki as _ozaki_core
    from modlin._engines import cuda as _cuda

    spied = [(_ozaki_core, "scales", "(a) scales and exponents (line statistics, fast scales)"),
             (_gpu, "_panel_residues", "(b) quantisation and int8 residues (2M images)"),
             (_cuda, "gemm_i8_tn", "(b) int8 GEMMs"),
             (_cuda, "products_tn", "(b) real moduli: GEMMs and their reductions"),
             (_gpu, "_twom_products", "(b) 2M moduli: GEMMs and their combination"),
             (_ozaki_core, "finish", "(c) CRT and rounding"), (_ozaki_core, "native_lines", "(c) native lines")]
    # the whole of stage b: the GPU kernels' gemm_residues, which the tile loop reaches
    # through _gpu.OZAKI (replaced there by _spied)
    targets = [(attr, mod, attr) for mod, attr, _ in spied] + [("b", _gpu, "gemm_residues")]
    rng = np.random.default_rng(4)
    lines += ["| n | product | whole s | " + " | ".join(label for *_, label in spied) + " | (b) all of stage b |",
              "|---:|:---|---:|" + "---:|" * (len(spied) + 1)]
    for n in sizes:
        A = cp.asarray(_gen(rng, (n, n), 0.5, False))
        B = cp.asarray(_gen(rng, (n, n), 0.5, False))
        Z, W = A + 0.5j * B, B - 0.25j * A
        cases = [("dgemm, 16 moduli", lambda: ozaki.dgemm(A, B, moduli=16))]
        for count in (8, 16):
            cases.append((f"zgemm 2M, {count} moduli",
                          lambda count=count: ozaki.zgemm(Z, W, moduli=count, algorithm="2m")))
        for name, fn in cases:
            fn()
            with _spied(targets) as spent:
                t_all = _timeit(fn, 1)  # one warm run, then one timed: spent holds both
            half = {key: v / 2 for key, v in spent.inclusive.items()}
            cells = " | ".join(f"{half.get(attr, 0.0) / t_all:.0%}" for _, attr, _ in spied)
            lines.append(f"| {n} | {name} | {t_all:.4f} | {cells} | {half.get('b', 0.0) / t_all:.0%} |")
        A = B = Z = W = None
        _free_pool()
    lines.append("")


# ----------------------------------------------------------------------------- model

def _ledger_module():
    """``benchmarks/gpu_ledger.py`` (its paths, stages and model), imported by its path: this
    script is run by its path, or loaded by it in the tests, with no package around it."""
    name = "gpu_ledger"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).resolve().with_name("gpu_ledger.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules[name]


def _resolve(dotted: str):
    """``(owner, name)`` of the function ``dotted`` (``module.qualname``, as the ledger's
    stages name them), or None where it cannot be replaced from outside (a closure)."""
    if "<locals>" in dotted:
        return None
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:-1]:
            owner = getattr(owner, attr, None)
        raw = inspect.getattr_static(owner, parts[-1], None) if owner is not None else None
        return (owner, parts[-1]) if isinstance(raw, types.FunctionType) else None
    return None


def _stage_targets(bench):
    """The spies of the ledger's stages (:data:`gpu_ledger.STAGES`, each label's functions,
    and :data:`gpu_ledger.GEMM_STAGE`: cuBLAS' int8 GEMMs), and the functions no spy reaches."""
    from modlin._engines import cuda as _cuda

    targets, missed = [(bench.GEMM_STAGE, _cuda, "gemm_i8_tn")], []
    for label, prefixes in bench.STAGES:
        for dotted in prefixes:
            where = _resolve(dotted)
            if where is None:
                missed.append(dotted)
            else:
                targets.append((label, *where))
    return targets, missed


def _text(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _peak_bandwidth(props) -> float | None:
    """The memory's peak bandwidth (bytes/s) from the device's properties: twice the memory
    clock (double data rate) times the bus width; None where the properties lack them
    (CUDA 13 dropped ``memoryClockRate`` from its device properties: then the device
    attributes, where CuPy has them)."""
    clock, width = props.get("memoryClockRate"), props.get("memoryBusWidth")
    if not (clock and width):
        try:
            import cupy as cp

            dev = cp.cuda.Device().id
            clock = cp.cuda.runtime.deviceGetAttribute(36, dev)  # cudaDevAttrMemoryClockRate, kHz
            width = cp.cuda.runtime.deviceGetAttribute(37, dev)  # cudaDevAttrGlobalMemoryBusWidth, bits
        except Exception:
            return None
    return 2 * clock * 1e3 * width / 8 if clock and width else None


def _device_constants(props, constants: dict):
    """``(name, key, constants, note)``: the GPU's name, the key of its constants in the
    ledger's (``h100``, ``h200``; for another GPU ``this``, its peak bandwidth read from its
    properties, else the H100's), the constants with that key's, and a line saying which."""
    name = _text(props.get("name", "unknown GPU"))
    peak = _peak_bandwidth(props)
    read = f"; {peak / 1e12:.2f} TB/s from the device's properties" if peak else ""
    key = "h200" if "H200" in name.upper() else "h100" if "H100" in name.upper() else None
    if key is None:
        constants = {**constants, "this_bandwidth": {"value": peak or constants["h100_bandwidth"]["value"],
                                                     "source": "the device's properties" if peak else "the H100's"}}
        key = "this"
        note = (f"GPU: {name}: neither an H100 nor an H200; its peak bandwidth "
                f"{constants['this_bandwidth']['value'] / 1e12:.2f} TB/s ({constants['this_bandwidth']['source']}), "
                "the H200's GEMM times")
    else:
        note = (f"GPU: {name}: the model's {key.upper()} constants "
                f"({constants[key + '_bandwidth']['value'] / 1e12:.2f} TB/s peak{read})")
    return name, key, constants, note


def _ms(t) -> str:
    return "" if t is None else f"{1e3 * t:.2f}"


def model(lines: list[str], sizes, repeats: int, ledger: str | None = None, device: dict | None = None) -> None:
    """The traffic ledger's model of each stage against the stage timed on the GPU.

    Parameters
    ----------
    lines : list of str
        The report; the section's lines are appended.
    sizes : sequence of int
        The products' sizes (square).
    repeats : int
        Timed runs per path and size (after a warm-up), unsynchronised and synchronised each.
    ledger : str, optional
        The JSON of ``python benchmarks/gpu_ledger.py --json`` (run beforehand where nvcc is:
        the stand-in of CuPy cannot run on a GPU). Without it the section says that the model
        is unavailable.
    device : dict, optional
        The device's properties (``cupy.cuda.runtime.getDeviceProperties``), by default the
        current device's: its name picks the H100's or the H200's constants.

    Notes
    -----
    Each path of the ledger (:func:`gpu_ledger.cases`: the same products on the same kind of
    inputs, with the plans of the ledger's size) runs ``repeats`` times as a whole, then
    ``repeats`` times with every function of every ledger stage timed (:func:`_spied`,
    exclusive times: a stage's own seconds, as the ledger counts a stage's own bytes). Beside
    each stage, the model's time (:func:`gpu_ledger.stage_model`: GEMM work at the int8
    rate; non-GEMM bytes at the ledger's fitted share ``f`` of the peak bandwidth, plus
    launches and syncs at their overheads) and the share ``f`` its measured time implies.
    """
    import cupy as cp

    if ledger is None:
        lines += ["The model is unavailable: no ledger was given. Run `python benchmarks/gpu_ledger.py --json "
                  "> ledger.json` where nvcc is (no GPU needed; about 10 s), then this script with "
                  "`--ledger ledger.json`.", ""]
        return
    with open(ledger) as fh:
        saved = json.load(fh)
    if not all("stage_fit" in row for row in saved["paths"].values()):
        lines += [f"The model is unavailable: `{ledger}` has no stages fitted for any n (a ledger from before "
                  "``gpu_ledger.fit_stages``): run `python benchmarks/gpu_ledger.py --json > ledger.json` again.", ""]
        return
    bench = _ledger_module()
    props = device if device is not None else cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    _, key, constants, note = _device_constants(props, saved["constants"])
    bw, f, N = constants[key + "_bandwidth"]["value"], saved["fit"]["f"], saved["N"]
    targets, missed = _stage_targets(bench)
    timed_labels = {label for label, *_ in targets}
    lines += [note + f"; f = {f:.3f}, the ledger's share fitted to the H200's totals "
              f"(`{ledger}`: measured on the stand-in at n = {saved['measure_n']}, modelled at n = {N}).",
              f"The products run with the plans of n = {N}, as the ledger ran them; its bytes per entry are "
              "extrapolated to each n as a + b / n, its GEMM work as n**3. Not timed apart (closures): "
              + (", ".join(f"`{m}`" for m in missed) or "none") + ": their time is in *the rest*.", ""]
    for name, row in saved["paths"].items():
        if not row.get("counts_independent_of_n", True) or row.get("tiles_at_N", {}).get(key, 1) != 1:
            lines += [f"Caution: {name}: the ledger's counts vary with n or the product tiles at n = {N} "
                      f"({row.get('tiles_at_N')}): the model is rougher there.", ""]
    header = ["| n | path | stage | launches | GEMM calls | syncs | uploads | MB moved | measured ms | model ms "
              "| measured / model | implied f |", "|---:|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rng = np.random.default_rng(5)
    totals, cal = {}, {}
    for n in sizes:
        F = cp.asarray(rng.random((n, n)))
        t_dgemm = _timeit(lambda: F @ F, repeats)
        F = None
        lines += [f"### n = {n}", "", f"DGEMM (cupy): {_ms(t_dgemm)} ms measured; the ledger's constant "
                  f"{_ms(constants['dgemm_8192_s']['value'] * (n / 8192) ** 3)} ms (``dgemm_8192_s`` x (n / 8192)**3).",
                  ""] + header
        cal[n] = {"gemm_s": 0.0, "gemm_dgemms": 0.0, "bytes": 0.0, "free_s": 0.0}
        for case in bench.cases():
            if case.name not in saved["paths"]:
                continue
            row = saved["paths"][case.name]
            try:
                ops = tuple(cp.asarray(x) for x in case.operands(rng, n))

                def fn(ops=ops, case=case):
                    return case.run(lambda x: x, ops, N)

                t_whole = _timeit(fn, repeats)
                with _spied(targets) as spent:
                    t0 = time.perf_counter()
                    for _ in range(repeats):
                        fn()
                    cp.cuda.get_current_stream().synchronize()
                    t_synced = (time.perf_counter() - t0) / repeats
                ops = None
                _free_pool()
            except Exception as exc:
                traceback.print_exc()
                lines.append(f"| {n} | {case.name} | FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} "
                             "| | | | | | | | | |")
                continue
            totals.setdefault(n, {})[case.name] = t_whole
            stages_ = row["stage_fit"]
            labels = list(stages_) + [k for k in spent.calls if k not in stages_]
            timed_sum = model_sum = untimed_model = 0.0
            for label in labels:
                st = stages_.get(label)
                m = bench.stage_model(st, n, key, f, constants) if st else None
                t = spent.exclusive[label] / repeats if label in spent.calls else None
                if label not in timed_labels:
                    untimed_model += m["total"] if m else 0.0
                timed_sum += t or 0.0
                model_sum += m["total"] if m else 0.0
                implied = ""
                if label == bench.GEMM_STAGE and t and st:
                    dgemms = st["gemm_work_n3"] * t_dgemm  # the GEMMs' work in DGEMMs of size n
                    implied = f"int8 GEMM / DGEMM {t / dgemms:.4f}"
                    cal[n]["gemm_s"] += t
                    cal[n]["gemm_dgemms"] += dgemms
                elif t and m and m["bytes"] > 0 and t > m["overhead"]:
                    implied = f"{m['bytes'] / (bw * (t - m['overhead'])):.3f}"
                    cal[n]["bytes"] += m["bytes"]
                    cal[n]["free_s"] += t - m["overhead"]
                meas = "untimed" if label not in timed_labels else "not called" if t is None else _ms(t)
                # bytes are a fit (a + b / n): a stage of none may come out a hair below zero
                counts = ("", "", "", "", "") if st is None else (
                    st["launches"], st["gemms"], st["syncs"], st["uploads"], f"{max(m['bytes'], 0.0) / 1e6:.1f}")
                ratio = f"{t / m['total']:.2f}" if t and m and m["total"] > 0 else ""
                lines.append(f"| {n} | {case.name} | {label} | " + " | ".join(str(c) for c in counts)
                             + f" | {meas} | {_ms(m['total']) if m else 'no traffic in the ledger'} | {ratio} "
                             f"| {implied} |")
            rest = t_synced - timed_sum
            lines.append(f"| {n} | {case.name} | the rest: untimed stages, host time between timed calls "
                         f"| | | | | | {_ms(rest)} | {_ms(untimed_model)} | | |")
            lines.append(f"| {n} | {case.name} | **whole** (synchronised run; unsynchronised: {_ms(t_whole)} ms) "
                         f"| {row['launches']} | {row['gemms']} | {row['syncs']} | {row['uploads']} | "
                         f"| {_ms(t_synced)} | {_ms(model_sum)} "
                         f"| {t_whole / model_sum if model_sum else float('inf'):.2f} (unsynchronised) | |")
        c = cal[n]
        lines += [""]
        if c["gemm_dgemms"]:
            lines.append(f"At n = {n}: int8 GEMMs {c['gemm_s'] / c['gemm_dgemms']:.4f} DGEMM times per n**3 of work "
                         f"(``int8_gemm_per_dgemm`` = {constants['int8_gemm_per_dgemm']['value']:.4f}).")
        if c["free_s"]:
            lines.append(f"At n = {n}: the timed non-GEMM stages moved {c['bytes'] / 1e9:.2f} GB in "
                         f"{1e3 * c['free_s']:.1f} ms beyond their launch and sync overheads: f = "
                         f"{c['bytes'] / (bw * c['free_s']):.3f} of the peak (the ledger's fit: {f:.3f}).")
        lines.append("")
    if 8192 in totals:
        lines += [f"Totals at n = 8192 on this {key.upper()} (unsynchronised medians), what "
                  "``gpu_ledger.fit_bandwidth`` fits f to (``MEASURED_H200_8192`` holds an H200's; another GPU's "
                  "need its own constants): ``" + json.dumps({k: round(v, 4) for k, v in totals[8192].items()})
                  + "``", ""]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="also write the report (markdown) to this file")
    parser.add_argument("--no-table", action="store_true", help="only the correctness checks")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=SECTIONS,
                        help="what to run, in this order")
    parser.add_argument("--ledger", help="the JSON of `python benchmarks/gpu_ledger.py --json`, for the model section")
    args = parser.parse_args(argv)
    sections = ["check"] if args.no_table else args.sections

    import cupy as cp

    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = _text(dev["name"])
    lines = [f"# modlin on the GPU ({datetime.date.today().isoformat()})", "",
             f"GPU: {name}; CuPy {cp.__version__}; CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}; "
             f"Python {platform.python_version()}; NumPy {np.__version__}.", "",
             f"Command: `python benchmarks/gpu_report.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
             ""]
    ok = True
    printed = 0

    def save():  # after each section: a run cut short keeps what it measured
        if args.out:
            with open(args.out, "w") as f:
                f.write("\n".join(lines) + "\n")

    for section in sections:
        t0 = time.perf_counter()
        try:
            if section == "check":
                lines += ["## Correctness: CuPy inputs against the CPU result", "",
                          "| check | result | detail |", "|:---|:---|:---|"]
                ok &= check(lines)
            elif section == "passes":
                lines += ["## Passes: the planner's GPU constants", "",
                          "Times in DGEMM times of the same size (medians). The implied factors are what "
                          "``GPU_PASS_FACTOR`` (the element-wise passes' share of their CPU cost) and "
                          "``GPU_RELATIVE_COST['int8']`` would have to be for the model to match.", ""]
                passes(lines, args.sizes, args.repeats)
            elif section == "stages":
                lines += ["## Stages: where ozaki's time goes on the GPU", "",
                          "Each function timed with the stream synchronised around every call (which "
                          "slows the whole a little), as a share of the whole product; nested ones "
                          "(int8 GEMMs inside the reductions and inside stage b) overlap.", ""]
                stages(lines, args.sizes, args.repeats)
            elif section == "model":
                lines += ["## Model: the traffic ledger against the stages on this GPU", "",
                          "Per path of ``benchmarks/gpu_ledger.py`` and stage of its ledger: the stage's time "
                          "measured here (its functions timed with the stream synchronised around every call, "
                          "each second counted in the innermost; means of the runs) beside the ledger's model "
                          "of it: int8 GEMMs at the ledger's int8 rate (``int8_gemm_per_dgemm`` DGEMMs per n**3 "
                          "multiply-adds), every other stage's bytes at a share f "
                          "of the peak bandwidth plus its launches and syncs at their overheads. *Implied f*: "
                          "the share the measured time implies, launch and sync overheads taken off.",
                          "This section recalibrates the ledger's constants (``gpu_ledger.CONSTANTS``) after one "
                          "GPU run: ``int8_gemm_per_dgemm`` from the GEMM rows, ``dgemm_8192_s`` from the DGEMM "
                          "line, f from the implied shares (or refitted, ``gpu_ledger.fit_bandwidth``, to the "
                          "totals at n = 8192 below); a stage whose implied f stays far below the others is not "
                          "bound by its bytes, and bytes are the wrong measure of it.", ""]
                model(lines, args.sizes, args.repeats, args.ledger, dev)
            elif section == "overlap":
                lines += ["## Overlap: each modulus' reduction beside the next GEMM", "",
                          "The GEMMs and reductions of a residue number system's product, in turn as modlin runs "
                          "them, and on two streams with a second int32 buffer (medians). *Hidden*: the time "
                          "saved, as a share of the whole and of the reductions' own time. The ledger bounds the "
                          "saving by 6-9 % of a path's time (``gpu_ledger.overlap_bound``); modlin overlaps when "
                          f"this measures at least ``gpu_ledger.OVERLAP_PAYS`` "
                          f"({_ledger_module().OVERLAP_PAYS:.0%}).", ""]
                ok &= overlap(lines, args.sizes, args.repeats)
            elif section == "memory":
                lines += ["## Memory: CuPy's pool against the tile scheduler's model", ""]
                for n in args.sizes:
                    ok &= memory(lines, n, args.repeats)
            else:
                lines += ["## Speed and accuracy", "",
                          "Times are medians of runs after a warm-up. Errors are max componentwise relative "
                          "errors against ozaki with 30 moduli (M about 2**230) on inputs "
                          "(rand - 0.5) * exp(0.5 randn).", ""]
                table(lines, args.sizes, args.repeats)
        except Exception:
            traceback.print_exc()
            ok = False
            lines.append(f"| {section} stopped by an error: see the log |")
        lines += ["", f"{section} took {time.perf_counter() - t0:.0f} s.", ""]
        print("\n".join(lines[printed:]), flush=True)
        printed = len(lines)
        save()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
