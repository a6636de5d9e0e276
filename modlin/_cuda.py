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
from functools import lru_cache

import numpy as np

__all__ = ["kernel", "launch", "gemm_i8", "products_mod", "products_mod_u8", "check_basis", "KMAX"]

#: cuBLAS data-type codes (``cudaDataType``): CuPy exports CUDA_R_8I but not CUDA_R_32I.
CUDA_R_8I = 3
CUDA_R_32I = 10
CUBLAS_COMPUTE_32I = 72
CUBLAS_GEMM_DEFAULT = -1
THREADS = 256
#: Limits of the kernels' fixed-size arrays (MODLIN_MAX_MODULI, MODLIN_MAX_LIMBS in
#: kernels/modlin_elem.cuh): moduli per launch and 32-bit limbs of M.
MAX_MODULI = 64
MAX_LIMBS = 16
#: Longest dot product of balanced int8 residues (|r| <= 128) whose int32 sum is exact.
KMAX = (2**31 - 1) // (128 * 128)


def _cupy():
    import cupy

    return cupy


@lru_cache(maxsize=None)
def _module(device_id: int):
    cp = _cupy()
    src = importlib.resources.files("modlin.kernels")
    code = src.joinpath("modlin_kernels.cu").read_text()
    return cp.RawModule(code=code, options=("--fmad=false", "-std=c++17", f"-I{src}"))


def kernel(name: str):
    """The compiled kernel ``name`` of ``kernels/modlin_kernels.cu`` on the current device."""
    cp = _cupy()
    return _module(cp.cuda.Device().id).get_function(name)


def launch(name: str, n: int, *args) -> None:
    """Run kernel ``name`` over ``n`` entries (grid-stride loops: any grid covers them)."""
    if n == 0:
        return
    blocks = min((n + THREADS - 1) // THREADS, 65535 * 8)
    kernel(name)((blocks,), (THREADS,), args)


def check_basis(moduli, M: int) -> None:
    """Refuse what the kernels' fixed-size arrays cannot hold."""
    if len(moduli) > MAX_MODULI or M.bit_length() // 32 + 1 > MAX_LIMBS:
        raise ValueError(f"the GPU kernels take at most {MAX_MODULI} moduli and M below "
                         f"2**{32 * MAX_LIMBS - 1}; got {len(moduli)} moduli, M of {M.bit_length()} bits")


def gemm_i8(a, b, out=None, *, layout: str = "tn"):
    """``a @ b`` of int8 CuPy matrices (stacks broadcast as by ``numpy.matmul``), int32 sums, exactly.

    cuBLAS is column-major: a row-major ``C = A B`` is the column-major
    ``C^T = B^T A^T``. cuBLAS runs int8 GEMMs on the tensor cores only in the "TN"
    layout (the first operand transposed, the second not, both contiguous along ``k``):
    so ``B`` is copied transposed (its int8 residues: a small pass beside the GEMM) and
    passed first with ``CUBLAS_OP_T``, ``A`` second as it is. Measured on an H200 at
    n = 4096 and 8192 (``benchmarks/gpu_report.py``): the untransposed "NN" call
    (``layout="nn"``, kept for that comparison) runs at about 130 int8 TOP/s, 0.48 DGEMM
    times per GEMM (a CUDA-core speed), the TN call at 0.074-0.09. Stacks go through one strided-batched call.
    """
    if layout not in ("tn", "nn"):
        raise ValueError(f"layout must be 'tn' or 'nn', got {layout!r}")
    cp = _cupy()
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
    if layout == "tn":  # B^T, row-major (np_ x kp): column-major kp x np_, transposed by cuBLAS
        b, op_b, ld_b = cp.ascontiguousarray(b.swapaxes(-1, -2), dtype=cp.int8), cublas.CUBLAS_OP_T, kp
    else:
        b, op_b, ld_b = cp.ascontiguousarray(b, dtype=cp.int8), cublas.CUBLAS_OP_N, np_
    full = out if np_ == n and out.flags.c_contiguous else cp.empty(batch + (m, np_), dtype=cp.int32)
    k, n = kp, np_
    count = int(np.prod(batch)) if batch else 1
    one = np.array(1, dtype=np.int32)
    zero = np.array(0, dtype=np.int32)
    handle = cp.cuda.device.get_cublas_handle()
    if count == 1:
        cublas.gemmEx(handle, op_b, cublas.CUBLAS_OP_N, n, m, k,
                      one.ctypes.data, b.data.ptr, CUDA_R_8I, ld_b, a.data.ptr, CUDA_R_8I, k,
                      zero.ctypes.data, full.data.ptr, CUDA_R_32I, n, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT)
    else:
        cublas.gemmStridedBatchedEx(
            handle, op_b, cublas.CUBLAS_OP_N, n, m, k,
            one.ctypes.data, b.data.ptr, CUDA_R_8I, ld_b, k * n, a.data.ptr, CUDA_R_8I, k, m * k,
            zero.ctypes.data, full.data.ptr, CUDA_R_32I, n, m * n, count, CUBLAS_COMPUTE_32I,
            CUBLAS_GEMM_DEFAULT)
    if full is not out:
        out[...] = full[..., : out.shape[-1]]
    return out


def products_mod(a, b, moduli):
    """``a @ b mod q`` per modulus, int32 in ``[0, q)``: int8 GEMMs split where ``k > KMAX``."""
    cp = _cupy()
    q = cp.asarray(moduli, dtype=cp.int32)[:, None, None]
    k = a.shape[-1]
    acc = None
    for k0 in range(0, max(k, 1), KMAX):
        part = gemm_i8(a[..., k0:k0 + KMAX], b[..., k0:k0 + KMAX, :])
        part %= q  # CuPy follows NumPy: a positive divisor gives a remainder in [0, q)
        acc = part if acc is None else (acc + part) % q
    return acc


def products_mod_u8(a, b, moduli):
    """:func:`products_mod` as uint8 residues (moduli <= 256): one GEMM and one fused
    reduction per modulus where ``k`` needs no split."""
    cp = _cupy()
    if a.shape[-1] > KMAX:
        return products_mod(a, b, moduli).astype(cp.uint8)
    X = gemm_i8(a, b)
    out = cp.empty(X.shape, dtype=cp.uint8)
    for i, q in enumerate(moduli):
        launch("reduce_i32_u8", X[i].size, X[i], np.int64(X[i].size), np.int32(q), out[i])
    return out
