"""Multiword (u,v)-products modulo p (arXiv 2601.07508, Alg 3.1-3.3), run from a Plan's schedule."""

from __future__ import annotations

import numpy as np

from modlin._arith import modular as _modular
from modlin._engines.backend import namespace
from modlin._engines.gemm import get_engine
from modlin._engines.threads import gemm_workers, region, run, slabs
from modlin._planning.plan import Plan
from modlin._runtime.scratch import Arena, take


class Words:
    """The words of a left operand under one plan, split once for many products with it.

    Parameters
    ----------
    pl : Plan
        The plan of the products (its modulus, engine and left words).
    a : ndarray
        int64 array of shape ``(..., m, k)`` (any values); not kept.

    Attributes
    ----------
    shape : tuple of int
        The shape of ``a``.
    words : ndarray
        ``(u, ..., m, k)``, as :func:`multiply` would split ``a`` for ``pl``.
    """

    def __init__(self, pl: Plan, a: np.ndarray, stages: _modular.Stages = _modular.CPU):
        self.key = _words_key(pl)
        self.shape = a.shape
        self.words = stages.words(a, pl.p, pl.a_shift, pl.u, get_engine(pl.engine).dtype)


def _words_key(pl: Plan) -> tuple:
    """What the left words depend on: two plans with one key split ``a`` alike."""
    return pl.p, pl.a_shift, pl.u, get_engine(pl.engine).dtype


def multiply(pl: Plan, a: np.ndarray | Words, b: np.ndarray, out: np.ndarray,
             arena: Arena | None = None, stages: _modular.Stages = _modular.CPU) -> np.ndarray:
    """Write ``a @ b mod p`` into ``out`` (int64, entries in ``[0, p)``).

    ``a`` and ``b`` are int64 arrays of shape ``(..., m, k)`` and ``(..., k, n)``
    (any values: they are reduced here), or ``a`` is the :class:`Words` of one
    split for a plan with the same left words; ``out`` has the broadcast shape.
    Only the words, an accumulator and one workspace are allocated (taken from
    ``arena`` when given, so that the tiles of one product reuse them). ``stages``: the
    element-wise stages of the arrays' device (:data:`modlin._arith.modular.CPU`, or
    :data:`modlin._algorithms.gpu.MULTIWORD` for CuPy arrays).
    """
    eng = get_engine(pl.engine)
    if isinstance(a, Words):
        if a.key != _words_key(pl):
            raise ValueError("these Words were split for a plan with other left words")
        aw = a.words
    else:
        aw = stages.words(a, pl.p, pl.a_shift, pl.u, eng.dtype,
                          None if arena is None else arena.take("aw", (pl.u,) + a.shape, eng.dtype))
    bw = stages.words(b, pl.p, pl.b_shift, pl.v, eng.dtype,
                      None if arena is None else arena.take("bw", (pl.v,) + b.shape, eng.dtype))
    return multiply_words(pl, aw, bw, out, arena, stages=stages)


def multiply_words(pl: Plan, aw: np.ndarray, bw: np.ndarray, out: np.ndarray,
                   arena: Arena | None = None, keep: bool = False,
                   stages: _modular.Stages = _modular.CPU) -> np.ndarray:
    """:func:`multiply` on words already split (``aw``: ``(u, ..., m, k)``, ``bw``: ``(v, ..., k, n)``,
    in the engine's dtype and within the plan's word bounds). ``out`` may be int64 or float64.

    With ``keep``, the final pass stops short of its last reduction: ``out`` (in the
    engine's accumulator dtype) receives the sum that :func:`modlin._arith.modular.finalize`
    would reduce by ``pl.reductions[0]`` into ``[0, p)``, for a caller that fuses that
    reduction into its own pass (:func:`modlin._arith.modular.twom_finish`).
    """
    eng = get_engine(pl.engine)
    if keep and out.dtype != eng.acc_dtype:
        raise ValueError(f"keep=True leaves the {eng.acc_dtype} sums, not {out.dtype}")
    if pl.variant == "concat-a":
        # (A B)^T = B^T A^T: concatenating the words of A is concatenating those of B^T.
        a, b, c, algorithm = bw.swapaxes(-1, -2), aw.swapaxes(-1, -2), out.swapaxes(-1, -2), _concat
    else:
        a, b, c, algorithm = aw, bw, out, _concat if pl.variant == "concat-b" else _horner
    if algorithm is _concat:  # the concatenated words, (..., k, v*n): B_0 | B_1 | ..., shared by the slabs
        xp = namespace(out)
        b = xp.concatenate(list(b), axis=-1, out=take(arena, "bcat", b.shape[1:-1] + (b.shape[0] * b.shape[-1],),
                                                      b.dtype, xp))
    rows = c.shape[-2]
    depth = min(a.shape[-1], pl.block)
    # on a GPU the device runs each pass whole: no host threads
    t = 1 if stages.device != "cpu" else gemm_workers(c.size * a.shape[-1] * pl.gemm_count(), rows, depth)
    if t == 1:
        algorithm(pl, a, b, c, eng, arena, keep=keep, stages=stages)
        return out
    # each worker runs the whole schedule on its slab of rows, sharing the other side's words
    with region(t):
        run(lambda job: algorithm(pl, a[..., job[1], :], b, c[..., job[1], :], eng, arena, job[0], keep, stages),
            list(enumerate(slabs(rows, t))))
    return out


def _pass(op, C, T, out, pl: Plan, keep: bool = False, stages: _modular.Stages = _modular.CPU) -> None:
    """Run a ``"step"`` or ``"final"`` operation of the schedule: ``C <- pre(C) + red(T)``
    (into ``out``, reduced into ``[0, p)``, for the final one; ``T`` may be ``None``).

    With ``keep`` the final one is the step's arithmetic into ``out``, which the
    caller then reduces into ``[0, p)`` by ``acc`` (``finalize``'s last two operations)."""
    acc, scaled = pl.reductions
    g, reduce = op[-2], op[-1]
    pre = acc if reduce or g else None
    if op[0] == "step":
        stages.step(C, T, pre, g, scaled.get(g), acc)
    elif not keep:
        stages.finalize(C, out, acc, T, pre, g, scaled.get(g))
    else:
        if T is not None or pre is not None or g:
            stages.step(C, T, pre, g, scaled.get(g), acc)
        if not np.may_share_memory(C, out):  # C is out itself, or a buffer of its own
            out[...] = C


def _horner(pl: Plan, aw, bw, out, eng, arena, slab: int = 0, keep: bool = False,
            stages: _modular.Stages = _modular.CPU) -> None:
    k = aw.shape[-1]
    xp = namespace(out)
    if out.flags.c_contiguous and eng.acc_dtype.itemsize == out.dtype.itemsize:
        # accumulate in the output's own memory: finalize reads and writes each
        # entry in place, so the accumulator costs no allocation
        C = out.view(eng.acc_dtype)
    else:
        C = take(arena, f"C{slab}", out.shape, eng.acc_dtype, xp)
    T = None
    for op in pl.schedule(k):
        if op[0] == "gemm":
            _, i, j, k0, k1, dst = op
            if dst == "T" and T is None:
                T = take(arena, f"T{slab}", C.shape, C.dtype, xp)
            eng.gemm(aw[i][..., k0:k1], bw[j][..., k0:k1, :], out=C if dst == "C" else T)
        elif k == 0:
            out[...] = 0
        else:
            _pass(op, C, T if op[0] == "step" or op[1] == "T" else None, out, pl, keep, stages)


def _concat(pl: Plan, aw, bcat, out, eng, arena, slab: int = 0, keep: bool = False,
            stages: _modular.Stages = _modular.CPU) -> None:
    """Alg 3.3: ``aw`` holds the words iterated over, ``bcat`` the other side's words
    concatenated along their columns (``slab``: which of the row slabs running in
    parallel this is, naming its buffers in ``arena``)."""
    acc, scaled = pl.reductions
    k = aw.shape[-1]
    v = pl.u if pl.variant == "concat-a" else pl.v
    n = bcat.shape[-1] // v
    xp = namespace(out)
    C = take(arena, f"C{slab}", out.shape, eng.acc_dtype, xp)
    C[...] = 0
    tcat = S = None
    for op in pl.schedule(k):
        kind = op[0]
        if kind == "gemm":
            _, i, _, k0, k1, _ = op
            if tcat is None:
                shape = np.broadcast_shapes(aw.shape[1:-2], bcat.shape[:-2]) + (aw.shape[-2], v * n)
                tcat = take(arena, f"tcat{slab}", shape, eng.acc_dtype, xp)
                S = tcat[..., (v - 1) * n:]
            eng.gemm(aw[i][..., k0:k1], bcat[..., k0:k1, :], out=tcat)
        elif kind == "combine":
            _, j, g = op
            stages.step(S, tcat[..., j * n:(j + 1) * n], acc, g, scaled[g], acc)
        elif k == 0:
            out[...] = 0
        else:
            _pass(op, C, S, out, pl, keep, stages)
