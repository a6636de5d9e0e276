"""``modlin warmup``: compile every kernel of every path into the cache, ahead of use.

A process whose cache directory (:func:`modlin._engines.jit.cache_dir`) is empty compiles
the numba kernels that its first products need: seconds per path. ``modlin
warmup`` pays that once, for example while a container image is built, by running
each public function on small inputs of every kind that selects different
kernels or different specialisations of them: moduli of each regime (single and
multiword products on each engine and in each variant, residue number systems
with int64, uint64 and Python-int results), int64 and object operands, the
Gaussian, linear-algebra and Ozaki paths with their algorithms and engines.
Later processes load the kernels from the cache instead. A wheel built by
``pip install .`` carries them already (``setup.py`` runs :func:`ship` on the
copy being packaged, see :mod:`modlin._engines.jit`): the command is for installs whose
wheel does not, such as editable ones or a wheel built on another machine type.

The calls are small (a few milliseconds each once compiled) except where a path
only starts at a size: the linear algebra recursions run just past
``PLUQ_THRESHOLD``, the writer of Python ints just past a marshal stream's length.
"""

from __future__ import annotations

import multiprocessing
import pathlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable

import numpy as np

from modlin._runtime.limits import available_cpus, limits
from modlin._runtime.progress import bar as progress_bar

__all__ = ["paths", "warmup", "ship"]

#: Moduli with their own product regime: fp32 and fp64 single words, (1,2), (1,3) and
#: (2,2) multiword products, the largest multiword modulus, residue number systems with
#: int64 results, with 64-bit words (``2**63 < p <= 2**64``) and with Python ints.
MATMUL_MODULI = (251, 65521, 1048573, 67108859, 2**31 - 1, 1099511627689, 2**50 - 27, 2**52 - 47,
                 2**61 - 1, 2**64 - 59, 2**64, 2**127 - 1)
#: Moduli whose every plan (engine, words, variant) is run.
ALL_PLANS_MODULI = (251, 65521, 2**31 - 1, 2**50 - 27)
#: Gaussian moduli: 2M ones (every prime factor 1 mod 4) whose real products are fp32, fp64,
#: (1,2) and (2,2) multiword ones, and 2**31 - 1, for 3M and 4M only.
GAUSSIAN_MODULI = (241, 4093, 2097133, 1099511627689, 2251799813685109, 2**31 - 1)
#: Operand shapes: square, wide and tall (the variants that concatenate either side).
SHAPES = ((12, 40, 12), (4, 40, 24), (24, 40, 4))


def _residues(rng, p: int, shape) -> np.ndarray:
    """Uniform-ish residues mod p: int64 when p fits, object arrays of Python ints above."""
    if p <= 2**63:
        return rng.integers(0, p, shape, dtype=np.int64)
    acc = np.zeros(shape, dtype=object)
    for _ in range(-(-p.bit_length() // 62)):
        acc = (acc << 62) | rng.integers(0, 2**62, shape, dtype=np.int64).astype(object)
    return acc % p


def _operands(rng, p: int):
    """Operand pairs for a product mod ``p``: every shape of :data:`SHAPES`, a batch, 1-D
    operands on either side (one-row outputs are both C- and F-contiguous), and read-only
    arrays (another numba type)."""
    for m, k, n in SHAPES:
        yield _residues(rng, p, (m, k)), _residues(rng, p, (k, n))
    a, b = _residues(rng, p, (12, 40)), _residues(rng, p, (40, 12))
    yield a[None].repeat(2, axis=0), b
    yield a[0], b
    yield a, b[:, 0]
    yield np.broadcast_to(a, a.shape), np.broadcast_to(b, b.shape)


def _matmul(p: int) -> None:
    from modlin import matmul

    rng = np.random.default_rng(p % 2**32)
    for a, b in _operands(rng, p):
        matmul(a, b, p)
        if p <= 2**63:
            matmul(a.astype(object), b.astype(object), p)  # Python-int operands
    # other integer dtypes, negative and unreduced entries
    matmul(rng.integers(-2**62, 2**62, (8, 8)), rng.integers(0, 2**64 - 1, (8, 8), dtype=np.uint64), p)
    if p > 2**52:  # tiles of a residue number system: int32 products, read by its CRT
        a = _residues(rng, p, (300, 300))
        with limits(memory="4MiB"):
            matmul(a, a, p)


def _all_plans(p: int) -> None:
    from dataclasses import replace

    from modlin import matmul
    from modlin._engines.gemm import ENGINES
    from modlin._planning.plan import candidates
    from modlin._planning.planner import plan

    rng = np.random.default_rng(p % 2**32)
    for a, b in _operands(rng, p):
        shape = (a.shape[-2] if a.ndim > 1 else 1, a.shape[-1], b.shape[-1] if b.ndim > 1 else 1)
        for pl in candidates(p, shape, tuple(ENGINES)):
            matmul(a, b, p, plan=pl)
            matmul(a, b, p, plan=replace(pl, block=min(pl.block, 8)))  # k in blocks, reduced between them
        for engine in ENGINES:
            try:
                pl = plan(p, *shape, engine=engine, algorithm="rns")
            except ValueError:  # this engine's moduli cannot cover the bound
                continue
            matmul(a, b, p, plan=pl)


def _intmul() -> None:
    from modlin import intmul
    from modlin._engines.gemm import ENGINES

    rng = np.random.default_rng(1)
    small = rng.integers(-2**40, 2**40, (12, 40))
    big = np.array([[(-1) ** (i + j) * (3 ** (60 + 7 * i + j)) for j in range(12)] for i in range(40)],
                   dtype=object)
    for engine in ENGINES:
        intmul(small, small.T, engine=engine)
        if engine != "int8":  # the int8 moduli cover products of up to about 340 bits
            intmul(small.astype(object), big, engine=engine)
    intmul(small, small.T)
    intmul(small.astype(np.uint64), small.T.astype(np.uint64))
    intmul(big.T, big)  # object results
    # the writer of Python ints past one marshal stream of entries (where it goes through marshal)
    intmul(big[:1].repeat(100, axis=0).T, big[:1].repeat(100, axis=0))


def _gaussian() -> None:
    from modlin import gaussian

    rng = np.random.default_rng(2)
    for m in GAUSSIAN_MODULI:
        for shape in ((12, 40), (40, 12)):
            a = (rng.integers(0, m, shape), rng.integers(0, m, shape))
            b = (rng.integers(0, m, shape[::-1]), rng.integers(0, m, shape[::-1]))
            algorithms = ("2m", "3m", "4m") if gaussian.is_twom_modulus(m) else ("3m", "4m")
            for alg in algorithms:
                gaussian.matmul(a, b, m, algorithm=alg)
                gaussian.herk(a, m, algorithm=alg)
                gaussian.her2k(a, a, m, algorithm=alg)
                gaussian.syrk(a, m, algorithm=alg)
                gaussian.syr2k(a, a, m, algorithm=alg)
    a = (rng.integers(-2**40, 2**40, (12, 40)), rng.integers(-2**40, 2**40, (12, 40)))
    big = tuple(x.astype(object) << 80 for x in a)
    for engine in ("fp64", "int8"):
        gaussian.intmul(a, tuple(x.T for x in a), engine=engine)
        gaussian.intmul(big, tuple(x.T for x in big), engine=engine)


def _linalg(p: int) -> None:
    from modlin import linalg, matmul
    from modlin.linalg import _arith, _charpoly, _pluq

    rng = np.random.default_rng(3)
    n = _pluq.PLUQ_THRESHOLD + 12  # past the base case: the recursions' blocks and views
    a = _residues(rng, p, (n, n))
    b = _residues(rng, p, (n, 3))
    low = np.tril(a)
    np.fill_diagonal(low, 1)
    linalg.det(a, p)
    linalg.rank(a, p)
    linalg.rank(matmul(a[:, :8], a[:8], p), p)  # rank deficient
    linalg.inv(a, p)
    linalg.solve(a, b, p)
    linalg.rref(a[: n // 2], p)
    linalg.nullspace(a[: n // 2], p)
    linalg.nullspace(a[: n // 2], p, left=True)
    linalg.pluq(a[:, : n // 2], p)
    linalg.charpoly(a, p)  # n >= MIN_BLOCK_KRYLOV: the block Krylov path's kernels
    linalg.minpoly(low[:12, :12], p)  # the Krylov stages
    _charpoly._squarefree([1, 3, 1], p)  # block Krylov's minpoly check (compiled below 2**63)
    linalg.matrix_power(a, 3, p)
    if p < _arith.INT64_LIMIT:  # runs only where an evaluation meets a zero pivot
        _charpoly._dets_pivoting(np.zeros((1, 2, 2), dtype=np.int64), np.int64(p), _arith.is_wide(p),
                                 np.empty(1, np.int64))
    for side in ("left", "right"):
        for lower in (True, False):
            tri = low if lower else low.T
            rhs = b if side == "left" else b.T
            for unit in (False, True):
                linalg.trsm(tri, rhs, p, side=side, lower=lower, unit_diagonal=unit)


def _integers() -> None:
    """linalg over Z and Q: the lifting's kernels (digits to ints), the charpoly's (Krylov
    steps of one piece and of several, Berlekamp-Massey, the Hessenberg fallback of a
    matrix that is not cyclic), int64 and object operands, a rank-deficient kernel."""
    from modlin import linalg

    rng = np.random.default_rng(5)
    a = rng.integers(-99, 99, (12, 12))
    linalg.det(a)
    linalg.solve(a, a[:, :2])
    linalg.rank(a[:, :4] @ a[:4])
    linalg.nullspace(a[:3])
    linalg.charpoly(a)
    linalg.charpoly((a[:4, :4].astype(object) << 70) + 1)
    linalg.charpoly(np.eye(3, dtype=np.int64))
    linalg.det((a.astype(object) << 70) + 1)


def _ozaki() -> None:
    from modlin import ozaki

    rng = np.random.default_rng(4)
    x = rng.standard_normal((12, 40))
    z = x + 1j * rng.standard_normal((12, 40))
    tiny = np.full((2, 2), 1e-160)  # subnormal products: the exact rounding path
    for engine in ("fp64", "int8"):
        ozaki.dgemm(tiny, tiny, engine=engine)
        for mode in ("fast", "accurate"):
            ozaki.dgemm(x, x.T, engine=engine, mode=mode)
            ozaki.dsyrk(x, engine=engine, mode=mode)
            algorithms = ("auto", "2m", "3m", "4m") + (("hybrid",) if engine == "int8" else ())
            for alg in algorithms:
                ozaki.zgemm(z, z.T, engine=engine, mode=mode, algorithm=alg)
                ozaki.zherk(z, engine=engine, mode=mode, algorithm=alg)
    # tiles and k-panels: the strided pieces (and added residues) of tiled products
    y = rng.standard_normal((300, 300))
    with limits(memory="2MiB"):
        for mode in ("fast", "accurate"):
            ozaki.dgemm(y, y.T, mode=mode)
            ozaki.zgemm(y + 1j * y.T, y, mode=mode)


def paths() -> list[tuple[str, Callable[[], None]]]:
    """``(label, run)`` for every path ``modlin warmup`` compiles, in order."""
    out: list[tuple[str, Callable[[], None]]] = []
    for p in MATMUL_MODULI:
        out.append((f"matmul mod a {p.bit_length()}-bit p", lambda p=p: _matmul(p)))
    for p in ALL_PLANS_MODULI:
        out.append((f"every plan mod a {p.bit_length()}-bit p", lambda p=p: _all_plans(p)))
    out.append(("intmul", _intmul))
    out.append(("gaussian", _gaussian))
    for p in (2**31 - 1, 2**61 - 1, 2**127 - 1):
        out.append((f"linalg mod a {p.bit_length()}-bit p", lambda p=p: _linalg(p)))
    out.append(("linalg over Z and Q", _integers))
    out.append(("ozaki", _ozaki))
    return out


def _compiled(root: pathlib.Path) -> int:
    """Compiled specialisations cached under ``root`` (one ``.nbc`` file each)."""
    return sum(1 for _ in root.rglob("*.nbc")) if root.is_dir() else 0


def _run_path(i: int) -> None:
    """Path ``i`` of :func:`paths`, in a worker process of :func:`warmup`."""
    paths()[i][1]()


def warmup(*, quiet: bool = False, stream=None, jobs: int | None = None) -> int:
    """Run every path of :func:`paths`, compiling what the cache lacks; return how many
    kernel specialisations were compiled (0 when the cache already held them all).

    ``jobs`` processes (default: the cores this process may use) take the paths in turn,
    compiling into the one cache (its saves are safe side by side, see
    :mod:`modlin._engines.jit`): numba compiles on one thread, and an empty cache took 200 s
    on one process here. Progress goes to ``stream`` (default ``sys.stderr``) unless ``quiet``.
    """
    from modlin._engines import jit as _jit

    stream = sys.stderr if stream is None else stream
    root = pathlib.Path(_jit.SHIPPED if _jit.BUILDING else _jit.cache_dir())
    before = _compiled(root)
    todo = paths()
    jobs = max(1, min(len(todo), available_cpus() if jobs is None else jobs))
    bar = None if quiet else progress_bar(len(todo), "modlin warmup", "path", stream)

    def done(label: str) -> None:
        if bar is not None:
            bar.set_description(label)
            bar.update(1)

    if jobs == 1:
        for label, run in todo:
            run()
            done(label)
    else:  # spawned, not forked: the parent may hold BLAS' and modlin's threads
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            # the long paths (linear algebra, ozaki) first, so that no process is left with one at the end
            futures = {pool.submit(_run_path, i): todo[i][0] for i in reversed(range(len(todo)))}
            for f in as_completed(futures):
                f.result()  # a path's failure is the command's
                done(futures[f])
    if bar is not None:
        bar.close()
    return _compiled(root) - before


def main(quiet: bool = False, jobs: int | None = None) -> int:
    """The ``modlin warmup`` command: exit status 0, a summary line on stdout unless ``quiet``."""
    from modlin._engines.jit import cache_dir

    t0 = time.perf_counter()
    n = warmup(quiet=quiet, jobs=jobs)
    if not quiet:
        print(f"modlin warmup: {n} kernel specialisation{'s' if n != 1 else ''} compiled into {cache_dir()} "
              f"in {time.perf_counter() - t0:.1f} s")
    return 0


def ship() -> int:
    """Compile every path into the package's shipped kernels and write their manifest.

    Run by ``setup.py``, with ``MODLIN_BUILD_KERNELS=1``, on the copy of the package a
    wheel is being built from (see :mod:`modlin._engines.jit`); returns the number compiled.
    """
    from modlin._engines import jit as _jit

    if not _jit.BUILDING:
        raise RuntimeError("ship() compiles into the package itself: only for a wheel being built, "
                           "with MODLIN_BUILD_KERNELS=1")
    t0 = time.perf_counter()
    n = warmup(quiet=True)
    where = _jit.write_manifest()
    print(f"modlin: {n} kernel specialisations compiled for the wheel in {time.perf_counter() - t0:.1f} s "
          f"({where})")
    return n
