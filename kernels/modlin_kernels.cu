// modlin's fused element-wise GPU kernels (see kernels/README.md). Each kernel is a
// grid-stride loop with 64-bit indices over the entries of C-contiguous arrays;
// what it does to one entry is a function of modlin_elem.cuh, which the CPU
// harness (tests/kernels_harness.cu) runs too. Compile with --fmad=false.
#include "modlin_elem.cuh"

#define MODLIN_GRID_STRIDE(e, n)                                                  \
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < (n); \
         e += (long long)gridDim.x * blockDim.x)

// Word i of x[e] mod p, balanced, at words[i * n + e].
extern "C" __global__ void balanced_words_f64(const long long* __restrict__ x, long long n, long long p,
                                              int s, int u, double* __restrict__ words) {
    MODLIN_GRID_STRIDE(e, n) modlin::balanced_words_at(x, n, p, s, u, words, e);
}

// x <- red2(scale * red1(x)) + redt(t) in place; t may be NULL.
extern "C" __global__ void mw_step(double* __restrict__ x, const double* __restrict__ t, long long n,
                                   double q1, double hi1, double lo1, double scale,
                                   double q2, double hi2, double lo2, double qt, double hit, double lot) {
    MODLIN_GRID_STRIDE(e, n) modlin::mw_step_at(x, t, q1, hi1, lo1, scale, q2, hi2, lo2, qt, hit, lot, e);
}

// out <- red(red2(scale * red1(x)) + redt(t)) mod p in [0, p); t may be NULL.
extern "C" __global__ void mw_finalize(const double* __restrict__ x, const double* __restrict__ t,
                                       long long n, double q1, double hi1, double lo1, double scale,
                                       double q2, double hi2, double lo2, double qt, double hit, double lot,
                                       double q, double hi, double lo, long long p,
                                       long long* __restrict__ out) {
    MODLIN_GRID_STRIDE(e, n) modlin::mw_finalize_at(x, t, q1, hi1, lo1, scale, q2, hi2, lo2, qt, hit, lot,
                                                     q, hi, lo, p, out, e);
}

// The per-modulus constants (a division each) are computed once per block; the
// barrier comes before the grid-stride loop, which every thread then may leave early.

// Balanced residues of integer-valued doubles |x| < 2**85 modulo each of the
// N <= 64 moduli (<= 256) at out[i * n + e].
extern "C" __global__ void ozaki_residues_i8(const double* __restrict__ x, long long n,
                                             const int* __restrict__ moduli, int N,
                                             signed char* __restrict__ out) {
    __shared__ modlin::ResConst kc[MODLIN_MAX_MODULI];
    modlin::load_res_consts(moduli, N, kc, threadIdx.x, blockDim.x);
    __syncthreads();
    MODLIN_GRID_STRIDE(e, n) modlin::ozaki_residues_at(x, n, kc, N, out, e);
}

// 2M images xr + s*xi and xr - s*xi (balanced) modulo each modulus, s = roots[i].
extern "C" __global__ void ozaki_twom_i8(const double* __restrict__ xr, const double* __restrict__ xi,
                                         long long n, const int* __restrict__ moduli,
                                         const int* __restrict__ roots, int N,
                                         signed char* __restrict__ plus, signed char* __restrict__ minus) {
    __shared__ modlin::ResConst kc[MODLIN_MAX_MODULI];
    modlin::load_res_consts(moduli, N, kc, threadIdx.x, blockDim.x);
    __syncthreads();
    MODLIN_GRID_STRIDE(e, n) modlin::ozaki_twom_at(xr, xi, n, kc, roots, N, plus, minus, e);
}

// Balanced residues of int64 x modulo each int8 modulus at out[i * n + e].
extern "C" __global__ void int_residues_i8(const long long* __restrict__ x, long long n,
                                           const int* __restrict__ moduli, int N,
                                           signed char* __restrict__ out) {
    MODLIN_GRID_STRIDE(e, n) modlin::int_residues_at(x, n, moduli, N, out, e);
}

// An int32 GEMM output reduced into [0, m).
extern "C" __global__ void reduce_i32_u8(const int* __restrict__ X, long long n, int m,
                                         unsigned char* __restrict__ out) {
    MODLIN_GRID_STRIDE(e, n) modlin::reduce_i32_at(X, m, out, e);
}

// 2M's post-processing from the two int32 products: re = (X + Y)/2, im = (X - Y)/(2s) mod m.
extern "C" __global__ void twom_combine_i32_u8(const int* __restrict__ X, const int* __restrict__ Y,
                                               long long n, int m, int inv2, int inv2s,
                                               unsigned char* __restrict__ re,
                                               unsigned char* __restrict__ im) {
    MODLIN_GRID_STRIDE(e, n) modlin::twom_combine_at(X, Y, m, inv2, inv2s, re, im, e);
}

// Correctly rounded doubles C'_e * 2**-(sa[e / ncols] + sb[e % ncols]) of the
// integers whose residues are res[i * E + e].
extern "C" __global__ void crt_to_double_u8(const unsigned char* __restrict__ res, int N, long long E,
                                            long long ncols, const long long* __restrict__ moduli,
                                            const long long* __restrict__ inv,
                                            const double* __restrict__ half, int L,
                                            const long long* __restrict__ sa,
                                            const long long* __restrict__ sb, double* __restrict__ out) {
    __shared__ double mf[MODLIN_MAX_MODULI], minv[MODLIN_MAX_MODULI], hf[MODLIN_MAX_MODULI];
    modlin::load_crt_consts(moduli, half, N, mf, minv, hf, threadIdx.x, blockDim.x);
    __syncthreads();
    double x[MODLIN_MAX_MODULI];
    MODLIN_GRID_STRIDE(e, E) {
        modlin::crt_to_double_at(res, N, E, ncols, moduli, inv, mf, minv, hf, L, sa, sb, out, x, e);
    }
}

// The same integers modulo p <= 2**63, in [0, p).
extern "C" __global__ void crt_to_modp_u8(const unsigned char* __restrict__ res, int N, long long E,
                                          const long long* __restrict__ moduli,
                                          const long long* __restrict__ inv,
                                          const double* __restrict__ half, unsigned long long p,
                                          unsigned long long m_mod_p, long long* __restrict__ out) {
    __shared__ double mf[MODLIN_MAX_MODULI], minv[MODLIN_MAX_MODULI], hf[MODLIN_MAX_MODULI];
    modlin::load_crt_consts(moduli, half, N, mf, minv, hf, threadIdx.x, blockDim.x);
    __syncthreads();
    double x[MODLIN_MAX_MODULI];
    double invp = 1.0 / (double)p;
    MODLIN_GRID_STRIDE(e, E) {
        modlin::crt_to_modp_at(res, N, E, moduli, inv, mf, minv, hf, p, m_mod_p, invp, out, x, e);
    }
}
