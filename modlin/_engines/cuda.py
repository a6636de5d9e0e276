"""Everything that talks to the GPU: the CUDA kernels of ``kernels/`` and cuBLAS.

Algorithms never call CuPy's libraries directly: the element-wise passes ask
for a kernel here (compiled once per device by ``cupy.RawModule`` from the
sources shipped as :mod:`modlin.kernels`) and the int8 engine's GEMM is
cuBLAS ``gemmEx`` with int8 inputs and int32 sums (the tensor cores;
``cupy.matmul`` on integer arrays does not use them). The kernels are built
with ``--fmad=false``: the exactness proofs of the CPU kernels assume every
product and sum is rounded on its own, and the GPU kernels mirror them
operation by operation (they are checked against them on the CPU by
``tests/test_kernels.py``).
"""

from __future__ import annotations

import importlib.resources
import math
from functools import lru_cache

import numpy as np

from modlin._runtime.calibration import CUDA_THREADS

#: cuBLAS data-type codes (``cudaDataType``): CuPy exports CUDA_R_8I but not CUDA_R_32I.
CUDA_R_8I = 3


CUDA_R_32I = 10


CUBLAS_COMPUTE_32I = 72


CUBLAS_GEMM_DEFAULT = -1


#: Limits of the kernels' fixed-size arrays (MODLIN_MAX_MODULI, MODLIN_MAX_LIMBS in
#: kernels/modlin_elem.cuh): moduli per launch and 32-bit limbs of M (the CRT kernels'
#: template range).
MAX_MODULI = 64


MAX_LIMBS = 16


#: Longest dot product of balanced int8 residues (|r| <= 128) whose int32 sum is exact.
KMAX = (2**31 - 1) // (128 * 128)


#: The k of one int8 GEMM where k is split: KMAX cut to a multiple of 4, so that every
#: piece starts on a 4-byte boundary of the residues' rows (cuBLAS' int8 alignment).
KCHUNK = KMAX - KMAX % 4


def cupy_module():
    import cupy

    return cupy


@lru_cache(maxsize=None)
def _module(device_id: int):
    cp = cupy_module()
    src = importlib.resources.files("modlin.kernels")
    code = src.joinpath("modlin_kernels.cu").read_text()
    return cp.RawModule(code=code, options=("--fmad=false", "-std=c++17", f"-I{src}"))


def kernel(name: str):
    """The compiled kernel ``name`` of ``kernels/modlin_kernels.cu`` on the current device."""
    cp = cupy_module()
    return _module(cp.cuda.Device().id).get_function(name)


def launch(name: str, n: int, *args, shape: tuple[int, int] | None = None, tiled: bool = False,
           grid: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> None:
    """Run kernel ``name`` over ``n`` entries (grid-stride loops: any grid covers them).

    ``shape = (R, C)``: a 2-D kernel over an ``R x C`` matrix (``MODLIN_GRID_2D``: rows
    along the grid's y, columns along x by blocks of :data:`CUDA_THREADS`); with ``tiled``, 32 x 32
    tiles by blocks of 32 x 8 threads (``MODLIN_TILED``). ``grid = (blocks, threads)``: the
    kernel's own geometry (stage (a)'s: a block per line, or one block)."""
    if n == 0:
        return
    if grid is not None:
        kernel(name)(grid[0], grid[1], args)
        return
    if shape is None:
        blocks = min((n + CUDA_THREADS - 1) // CUDA_THREADS, 65535 * 8)
        kernel(name)((blocks,), (CUDA_THREADS,), args)
        return
    R, C = shape
    if tiled:
        kernel(name)((min(-(-C // 32), 65535), min(-(-R // 32), 65535)), (32, 8), args)
    else:
        kernel(name)((min(-(-C // CUDA_THREADS), 65535), min(R, 65535)), (CUDA_THREADS,), args)


def pad4(n: int) -> int:
    """``n`` rounded up to a multiple of 4: cuBLAS' int8 GEMMs want leading dimensions
    (and so the residues' rows) that are."""
    return -(-n // 4) * 4


@lru_cache(maxsize=256)
def _small_rows(moduli: tuple[int, ...], roots: tuple[int, ...] | None, weights: tuple[int, ...] | None) -> np.ndarray:
    rows = []
    for i, m in enumerate(moduli):
        if not 2 <= m <= 2**16:
            raise ValueError(f"the GPU kernels take moduli in [2, 2**16], got {m}")
        rows.append([m, 2**32 // m, 2**32 % m, -(2**31) % m, -(2**63) % m, (m - 1) // 2,
                     0 if roots is None else roots[i], 0 if weights is None else weights[i]])
    out = np.array(rows, dtype=np.uint32).reshape(len(moduli), 8)
    out.flags.writeable = False
    return out


def small_table(moduli, roots=None, weights=None):
    """The kernels' table of moduli (``struct Small`` in ``kernels/modlin_elem.cuh``), on the
    device: per modulus ``m <= 2**16`` eight uint32, ``m``, ``floor(2**32 / m)`` (Barrett),
    ``2**32 mod m``, ``-2**31 mod m``, ``-2**63 mod m``, ``(m - 1) // 2``, a square root of
    -1 (``roots``, 2M's moduli) and the CRT weight (``weights``), or 0."""
    def ints(v):
        return None if v is None else tuple(int(x) for x in v)

    return cupy_module().asarray(_small_rows(ints(moduli), ints(roots), ints(weights)))


def wide_constants(p: int) -> tuple[np.uint64, np.uint64]:
    """Barrett constants of ``2 <= p < 2**63`` for ``mod_wide``: ``floor(2**64 / p)`` and ``-2**63 mod p``."""
    return np.uint64(2**64 // p), np.uint64(-(2**63) % p)


@lru_cache(maxsize=64)
def _crt_rows(moduli: tuple[int, ...]):
    M = math.prod(moduli)
    L = max(1, -(-M.bit_length() // 32))
    if len(moduli) > MAX_MODULI or L > MAX_LIMBS:
        raise ValueError(f"the GPU kernels take at most {MAX_MODULI} moduli and M below 2**{32 * MAX_LIMBS}; "
                         f"got {len(moduli)} moduli, M of {M.bit_length()} bits")
    weights = [pow(M // m, -1, m) for m in moduli]
    values = [M // m for m in moduli] + [M, (M - 1) // 2]
    limbs = np.array([[(v >> (32 * j)) & 0xFFFFFFFF for j in range(L)] for v in values], dtype=np.uint32)
    minv = np.array([1.0 / m for m in moduli])
    return weights, limbs, minv, L


def crt_constants(moduli):
    """The constants of the O(N) CRT kernels for pairwise-coprime ``moduli`` (each at most
    ``2**16``), on the device: the table of :func:`small_table` with the CRT weights
    ``(M / m_i)**-1 mod m_i``, the 32-bit limbs (``L`` per row) of each ``M / m_i``, of
    ``M`` and of ``(M - 1) / 2``, and the doubles ``1 / m_i``; and ``L``."""
    cp = cupy_module()
    moduli = tuple(int(m) for m in moduli)
    weights, limbs, minv, L = _crt_rows(moduli)
    return small_table(moduli, weights=weights), cp.asarray(limbs), cp.asarray(minv), L


def gemm_i8(a, b, out=None):
    """``a @ b`` of int8 CuPy matrices (stacks broadcast as by ``numpy.matmul``), int32 sums, exactly.

    cuBLAS is column-major: a row-major ``C = A B`` is the column-major
    ``C^T = B^T A^T``. cuBLAS runs int8 GEMMs on the tensor cores only in the "TN"
    layout (the first operand transposed, the second not, both contiguous along ``k``):
    so ``B`` is copied transposed (its int8 residues: a small pass beside the GEMM) and
    one matrix goes to :func:`gemm_i8_tn`. Measured on an H200 at n = 4096 and 8192
    (``benchmarks/gpu_report.py``): the untransposed "NN" call ran at about 130 int8 TOP/s,
    0.48 DGEMM times per GEMM (a CUDA-core speed), the TN call at 0.074-0.09. Stacks go
    through one strided-batched call. (The residue kernels lay out what the products of
    residues need: this serves the other int8 GEMMs, the engine's and "accurate" mode's.)
    """
    cp = cupy_module()
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape[-2:]
    n = b.shape[-1]
    try:  # numpy.matmul's stacks (Engine.gemm's contract): one matrix beside a stack is broadcast
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"gemm_i8: stacks {a.shape} and {b.shape} do not broadcast") from None
    if a.shape[:-2] != batch:  # copied below, where the GEMM needs contiguous operands
        a = cp.broadcast_to(a, batch + a.shape[-2:])
    if b.shape[:-2] != batch:
        b = cp.broadcast_to(b, batch + b.shape[-2:])
    if out is None:
        out = cp.empty(batch + (m, n), dtype=cp.int32)
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    # int8 GEMMs want leading dimensions that are multiples of 4: zero columns of A
    # and rows of B (padding k) leave the product alone; extra columns of B are cut off
    kp, np_ = -(-k // 4) * 4, -(-n // 4) * 4
    if kp != k:
        a = cp.concatenate([a, cp.zeros(batch + (m, kp - k), dtype=cp.int8)], axis=-1)
        b = cp.concatenate([b, cp.zeros(batch + (kp - k, n), dtype=cp.int8)], axis=-2)
    if np_ != n:
        b = cp.concatenate([b, cp.zeros(batch + (kp, np_ - n), dtype=cp.int8)], axis=-1)
    a = cp.ascontiguousarray(a, dtype=cp.int8)
    bt = cp.ascontiguousarray(b.swapaxes(-1, -2), dtype=cp.int8)  # B^T, row-major (np_ x kp)
    full = out if np_ == n and out.flags.c_contiguous else cp.empty(batch + (m, np_), dtype=cp.int32)
    k, n = kp, np_
    count = int(np.prod(batch)) if batch else 1
    if count == 1:
        gemm_i8_tn(a.reshape(m, k), bt.reshape(n, k), full.reshape(m, n))
    else:
        one = np.array(1, dtype=np.int32)
        zero = np.array(0, dtype=np.int32)
        cublas.gemmStridedBatchedEx(
            cp.cuda.device.get_cublas_handle(), cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
            one.ctypes.data, bt.data.ptr, CUDA_R_8I, k, k * n, a.data.ptr, CUDA_R_8I, k, m * k,
            zero.ctypes.data, full.data.ptr, CUDA_R_32I, n, m * n, count, CUBLAS_COMPUTE_32I,
            CUBLAS_GEMM_DEFAULT)
    if full is not out:
        out[...] = full[..., : out.shape[-1]]
    return out


def gemm_i8_tn(a, bt, out) -> None:
    """``out[...] = a @ bt.T`` exactly: ``a`` (``m x k``) and ``bt`` (``n x k``) int8 CuPy
    matrices with contiguous rows (row strides, ``k`` and their data addresses multiples of 4:
    residues laid out by the residue kernels, or column slices of them at multiples of 4),
    ``out`` an ``m x n`` int32 matrix with contiguous rows (``n`` and its row stride
    multiples of 4), every sum within int32 (the callers' bound: :data:`KMAX` terms of
    balanced residues, or "accurate" mode's bounds of at most 64). cuBLAS' "TN" int8 GEMM
    (tensor cores), with no copy of either operand."""
    cp = cupy_module()
    from cupy_backends.cuda.libs import cublas

    m, k = a.shape
    n = bt.shape[0]
    if k == 0:  # an empty sum (cuBLAS would see leading dimensions of 0)
        out[...] = 0
        return
    if not (k % 4 == 0 and n % 4 == 0 and a.strides[0] % 4 == 0 and bt.strides[0] % 4 == 0
            and out.strides[0] % 16 == 0):
        raise ValueError(f"gemm_i8_tn takes k and n multiples of 4; got {a.shape}, {bt.shape}")
    one = np.array(1, dtype=np.int32)
    zero = np.array(0, dtype=np.int32)
    cublas.gemmEx(cp.cuda.device.get_cublas_handle(), cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                  one.ctypes.data, bt.data.ptr, CUDA_R_8I, bt.strides[0], a.data.ptr, CUDA_R_8I, a.strides[0],
                  zero.ctypes.data, out.data.ptr, CUDA_R_32I, out.strides[0] // 4, CUBLAS_COMPUTE_32I,
                  CUBLAS_GEMM_DEFAULT)


def products_tn(ra, rbt, table, k: int, res, buffer=None) -> None:
    """``res[i] = ra[i] @ rbt[i].T mod m_i`` (uint8, ``(N, m, n)``) of int8 residues laid out
    for :func:`gemm_i8_tn` (``(N, m, kp)`` and ``(N, np_, kp)``, ``k`` of their ``kp``
    columns used), modulus by modulus: one GEMM into the reused int32 ``buffer`` (``m x
    np_``) and one reduction kernel per :data:`KCHUNK` of ``k``, which writes (or adds to)
    ``res[i]``: no int32 array per modulus, no pass of its own to reduce them."""
    cp = cupy_module()
    N, m, n = res.shape
    np_ = rbt.shape[1]
    X = cp.empty((m, np_), dtype=cp.int32) if buffer is None else buffer
    for i in range(N):
        for k0 in range(0, max(k, 1), KCHUNK):
            k1 = min(pad4(k), k0 + KCHUNK)
            gemm_i8_tn(ra[i][:, k0:k1], rbt[i][:, k0:k1], X)
            reduce_products(X, table, i, k0 > 0, res[i])


def reduce_products(X, table, i: int, add: bool, out) -> None:
    """``out = X mod m_i`` (uint8, ``m x n``) of an int32 GEMM output ``X`` (``m x np_``, its
    first ``n`` columns read), ``m_i`` the ``i``-th modulus of ``table``; with ``add``,
    ``out = (out + X) mod m_i`` (a later k chunk). One ``reduce_i32_u8`` launch."""
    m, n = out.shape
    launch("reduce_i32_u8", m * n, X, np.int64(X.shape[1]), np.int64(m), np.int64(n), table, np.int32(i),
           np.int32(add), out, shape=(m, n))
