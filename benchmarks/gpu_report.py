"""GPU report: check modlin's public functions on CuPy arrays, then time them.

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
``modlin._rnsplan.GPU_PASS_FACTOR`` and ``modlin._engines.GPU_RELATIVE_COST``
they imply, and the modelled against the measured time of each plan.
*Memory*: the peak of CuPy's memory pool during each product (a
``cupy.cuda.MemoryHook``) beyond its result, against the tile scheduler's
modelled peak; then the same products with the device's free memory squeezed
(a filler array) so that they must tile: bit-identical results, the peak
within the budget.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import platform
import sys
import time
import traceback

import numpy as np

PRIMES = {20: 1048573, 31: 2147483647, 50: 2**50 - 27, 61: 2**61 - 1}


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


@contextlib.contextmanager
def _tilings(hook=None):
    """The tilings run inside the block, in the order they start (the tile loop
    :func:`modlin._tiles.run` spied on wherever it was imported), each with the bytes
    ``hook`` (a :func:`_peak_hook`) counted live as it started: ``(tiling, live)``."""
    from modlin import _tiles

    made = []
    run = _tiles.run

    def spy(tiling, *args, **kwargs):
        made.append((tiling, getattr(hook, "live", 0)))
        return run(tiling, *args, **kwargs)

    users = [m for name, m in sys.modules.items() if name.startswith("modlin") and getattr(m, "run", None) is run]
    for m in users:
        m.run = spy
    try:
        yield made
    finally:
        for m in users:
            m.run = run


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
              "(``modlin._tiles.budget``). *Fits*: the pool's peak, result included, within the free memory.", "",
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
    from modlin import _cuda, _plan, _rns_gpu, _rnsplan

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
                    # the pipeline of _rns_gpu.multiply stage by stage: residues of both operands,
                    # the GEMMs alone (one per modulus into one int32 buffer), GEMMs with their
                    # reductions (the difference: the reductions), the CRT into the result
                    mods, N = pl.moduli, len(pl.moduli)
                    table = _cuda.small_table(mods)
                    t_res = _timeit(lambda: (_rns_gpu.residues(X, p, table, N, False),
                                             _rns_gpu.residues(Y, p, table, N, True)), repeats)
                    ra, rb = _rns_gpu.residues(X, p, table, N, False), _rns_gpu.residues(Y, p, table, N, True)
                    buf = cp.empty((n, rb.shape[1]), dtype=cp.int32)
                    t_g = _timeit(lambda: [_cuda.gemm_i8_tn(ra[i], rb[i], buf) for i in range(N)], repeats)
                    prod = cp.empty((N, n, n), dtype=cp.uint8)
                    t_pm = _timeit(lambda: _cuda.products_tn(ra, rb, table, n, prod, buf), repeats)
                    out = cp.empty((n, n), dtype=cp.int64)
                    t_crt = _timeit(lambda: _rns_gpu.reconstruct_modp(prod, mods, p, out), repeats)
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


def stages(lines: list[str], sizes, repeats: int) -> None:
    """Where ``ozaki``'s time goes on the GPU: each stage's functions timed with the stream
    synchronised around every call (one run after a warm-up), in shares of the whole."""
    import dataclasses

    import cupy as cp

    from modlin import _cuda, _ozaki_core, _ozaki_gpu, ozaki

    spied = [(_ozaki_core, "scales", "(a) scales and exponents"),
             (_ozaki_gpu, "_panel_residues", "(b) quantisation and int8 residues (2M images)"),
             (_cuda, "gemm_i8_tn", "(b) int8 GEMMs"),
             (_cuda, "products_tn", "(b) real moduli: GEMMs and their reductions"),
             (_ozaki_gpu, "_twom_products", "(b) 2M moduli: GEMMs and their combination"),
             (_ozaki_core, "finish", "(c) CRT and rounding"), (_ozaki_core, "native_lines", "(c) native lines")]
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
            spent = {}

            def timed(f, key):
                def wrapper(*args, **kwargs):
                    cp.cuda.get_current_stream().synchronize()
                    t0 = time.perf_counter()
                    out = f(*args, **kwargs)
                    cp.cuda.get_current_stream().synchronize()
                    spent[key] = spent.get(key, 0.0) + time.perf_counter() - t0
                    return out
                return wrapper

            saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in spied]
            kernels = _ozaki_gpu.KERNELS
            try:
                for mod, attr, orig in saved:
                    setattr(mod, attr, timed(orig, attr))
                _ozaki_gpu.KERNELS = dataclasses.replace(kernels, gemm_residues=timed(kernels.gemm_residues, "b"))
                t_all = _timeit(fn, 1)  # one warm run, then one timed: spent holds both
            finally:
                for mod, attr, orig in saved:
                    setattr(mod, attr, orig)
                _ozaki_gpu.KERNELS = kernels
            half = {key: v / 2 for key, v in spent.items()}
            cells = " | ".join(f"{half.get(attr, 0.0) / t_all:.0%}" for _, attr, _ in spied)
            lines.append(f"| {n} | {name} | {t_all:.4f} | {cells} | {half.get('b', 0.0) / t_all:.0%} |")
        A = B = Z = W = None
        _free_pool()
    lines.append("")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="also write the report (markdown) to this file")
    parser.add_argument("--no-table", action="store_true", help="only the correctness checks")
    parser.add_argument("--sections", nargs="+", default=["check", "passes", "memory", "table", "stages"],
                        choices=["check", "passes", "memory", "table", "stages"], help="what to run, in this order")
    args = parser.parse_args(argv)
    sections = ["check"] if args.no_table else args.sections

    import cupy as cp

    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = dev["name"].decode() if isinstance(dev["name"], bytes) else dev["name"]
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
