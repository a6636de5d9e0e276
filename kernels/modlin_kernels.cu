// modlin's fused element-wise GPU kernels (see kernels/README.md). What a kernel does
// to one entry is a function of modlin_elem.cuh, which the CPU harness
// (tests/kernels_harness.cu) runs too; the kernels add only the loops, the shared
// memory and the barriers. Compile with --fmad=false.
#include "modlin_elem.cuh"

// Grid-stride loops are kept rolled (unroll 1): to unroll one, nvcc computes its trip
// count with a 64-bit division, which the PTX check forbids and no loop here needs.

// 1-D grid-stride loop with 64-bit indices over n entries.
#define MODLIN_GRID_STRIDE(e, n)                                                  \
    _Pragma("unroll 1") for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < (n); \
         e += (long long)gridDim.x * blockDim.x)

// 2-D grid-stride loop over an R x C matrix: rows along the grid's y, columns along x
// (a row index and a column index, no division of a flat index by C).
#define MODLIN_GRID_2D(r, c, R, C)                                                      \
    _Pragma("unroll 1") for (long long r = blockIdx.y; r < (R); r += gridDim.y)         \
        _Pragma("unroll 1") for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < (C); \
             c += (long long)gridDim.x * blockDim.x)

// Per-modulus constants into shared memory, then a barrier (before any thread may
// leave the grid-stride loop early).
#define MODLIN_SHARED_TABLE(table, N)                                  \
    __shared__ unsigned tab[8 * MODLIN_MAX_MODULI];                    \
    for (int t_ = threadIdx.y * blockDim.x + threadIdx.x; t_ < 8 * (N); \
         t_ += blockDim.x * blockDim.y)                                \
        tab[t_] = (table)[t_];                                         \
    __syncthreads();

// A tiled pass over the Rp x Cp source positions (r, c) of an operand, 32 x 32 at a time
// by blocks of 32 x 8 threads: LOAD(r, c, v) reads and quantises one entry into v[P]
// with the threads of a warp along a source row (coalesced reads); the values go through
// shared memory, and STORE(v, pos) writes the residues at pos = r ldo + c, or, with
// transpose, at c ldo + r, the threads of a warp then along the output row (coalesced
// writes). The transposed layout is what cuBLAS's int8 "TN" GEMM takes for B: its
// residues come out k-contiguous with no copy.
#define MODLIN_TILED(T, P, Rp, Cp, transpose, LOAD, STORE)                                             \
    __shared__ T tile_[P][32][33];                                                                   \
    for (long long tr = (long long)blockIdx.y * 32; tr < (Rp); tr += (long long)gridDim.y * 32) {   \
        for (long long tc = (long long)blockIdx.x * 32; tc < (Cp); tc += (long long)gridDim.x * 32) { \
            for (int i_ = threadIdx.y; i_ < 32; i_ += blockDim.y) {                                   \
                long long r = tr + i_, c = tc + threadIdx.x;                                          \
                T v[P];                                                                               \
                for (int p_ = 0; p_ < P; ++p_) v[p_] = 0;                                             \
                if (r < (Rp) && c < (Cp)) LOAD;                                                       \
                for (int p_ = 0; p_ < P; ++p_) tile_[p_][i_][threadIdx.x] = v[p_];                   \
            }                                                                                         \
            __syncthreads();                                                                          \
            for (int i_ = threadIdx.y; i_ < 32; i_ += blockDim.y) {                                   \
                long long r, c, pos;                                                                  \
                T v[P];                                                                               \
                if (transpose) {                                                                      \
                    c = tc + i_;                                                                      \
                    r = tr + threadIdx.x;                                                             \
                    pos = c * ldo + r;                                                                \
                    for (int p_ = 0; p_ < P; ++p_) v[p_] = tile_[p_][threadIdx.x][i_];               \
                } else {                                                                              \
                    r = tr + i_;                                                                      \
                    c = tc + threadIdx.x;                                                             \
                    pos = r * ldo + c;                                                                \
                    for (int p_ = 0; p_ < P; ++p_) v[p_] = tile_[p_][i_][threadIdx.x];               \
                }                                                                                     \
                if (r < (Rp) && c < (Cp)) STORE;                                                      \
            }                                                                                         \
            __syncthreads();                                                                          \
        }                                                                                             \
    }

// A thread's count of lost entries into the product's counter (when there is one).
__device__ inline void add_lost(unsigned long long* lost, unsigned long long mine) {
    if (lost != nullptr && mine != 0ULL) atomicAdd(lost, mine);
}

// ------------------------------------------------------------------ multiword (fp64 engine)

// Word i of x[e] mod p (p < 2**52, with its Barrett constants mu, c63), balanced, at words[i * n + e].
extern "C" __global__ void balanced_words_f64(const long long* __restrict__ x, long long n, long long p,
                                              unsigned long long mu, unsigned long long c63, int s, int u,
                                              double* __restrict__ words) {
    MODLIN_GRID_STRIDE(e, n) modlin::balanced_words_at(x, n, p, mu, c63, s, u, words, e);
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

// ------------------------------------------------------------------ residues (int8 engine)

// Stage (b)'s operand in one pass: each entry of a panel of R rows (entries x[r ldx + off
// + c step], zero past column len), quantised with its line's shift, and its balanced
// int8 residue modulo each of N moduli at out[i plane + pos] over the padded Rp x Cp
// positions (pads zero), transposed or not (MODLIN_TILED). Nonzero entries of good lines
// that round to zero are counted into *lost (NULL: not counted).
extern "C" __global__ void ozaki_residues_i8(const double* __restrict__ x, long long ldx, long long R,
                                             long long len, long long off, long long step,
                                             const long long* __restrict__ shift,
                                             const unsigned char* __restrict__ bad, int by_cols,
                                             const unsigned* __restrict__ table, int N,
                                             signed char* __restrict__ out, long long plane, long long ldo,
                                             long long Rp, long long Cp, int transpose,
                                             unsigned long long* __restrict__ lost) {
    MODLIN_SHARED_TABLE(table, N)
    unsigned long long mine = 0;
    MODLIN_TILED(double, 1, Rp, Cp, transpose,
                 v[0] = modlin::panel_value(x, ldx, R, len, off, step, shift, bad, by_cols, r, c, &mine),
                 modlin::store_residues(v[0], tab, N, out, plane, pos))
    add_lost(lost, mine);
}

// 2M's images of a complex panel (parts at off0 and off1, step 2) or of real SYRK's halves
// (off1 = the first half's width, step 1, len1 the second's): plus = xr + s xi and minus =
// xr - s xi modulo each modulus, balanced int8, as ozaki_residues_i8 lays them out.
extern "C" __global__ void ozaki_twom_i8(const double* __restrict__ x, long long ldx, long long R,
                                         long long len0, long long len1, long long off0, long long off1,
                                         long long step, const long long* __restrict__ shift,
                                         const unsigned char* __restrict__ bad, int by_cols,
                                         const unsigned* __restrict__ table, int N,
                                         signed char* __restrict__ plus, signed char* __restrict__ minus,
                                         long long plane, long long ldo, long long Rp, long long Cp, int transpose,
                                         unsigned long long* __restrict__ lost) {
    MODLIN_SHARED_TABLE(table, N)
    unsigned long long mine = 0;
    MODLIN_TILED(double, 2, Rp, Cp, transpose,
                 (v[0] = modlin::panel_value(x, ldx, R, len0, off0, step, shift, bad, by_cols, r, c, &mine),
                  v[1] = modlin::panel_value(x, ldx, R, len1, off1, step, shift, bad, by_cols, r, c, &mine)),
                 modlin::store_twom(v[0], v[1], tab, N, plus, minus, plane, pos))
    add_lost(lost, mine);
}

// Balanced int8 residues modulo each modulus of an R x C int64 matrix's entries (any
// values) reduced modulo p < 2**63 and balanced first (mu, c63: p's Barrett constants).
extern "C" __global__ void int_residues_i8(const long long* __restrict__ x, long long ldx, long long R,
                                           long long C, unsigned long long p, unsigned long long mu,
                                           unsigned long long c63, const unsigned* __restrict__ table, int N,
                                           signed char* __restrict__ out, long long plane, long long ldo,
                                           long long Rp, long long Cp, int transpose) {
    MODLIN_SHARED_TABLE(table, N)
    MODLIN_TILED(long long, 1, Rp, Cp, transpose, v[0] = modlin::int_value(x, ldx, R, C, p, mu, c63, r, c),
                 modlin::store_int_residues(v[0], tab, N, out, plane, pos))
}

// ------------------------------------------------------------------ after each int8 GEMM

// The R x C int32 GEMM output X (row stride ldx) into [0, m) (m: row i of table), written
// into the residue plane res (or, with acc, added to it: the next k-panel's product).
extern "C" __global__ void reduce_i32_u8(const int* __restrict__ X, long long ldx, long long R, long long C,
                                         const unsigned* __restrict__ table, int i, int acc,
                                         unsigned char* __restrict__ res) {
    modlin::Small s = modlin::load_small(table, i);
    MODLIN_GRID_2D(r, c, R, C) modlin::reduce_entry(X[r * ldx + c], s, acc != 0, res + r * C + c);
}

// 2M's post-processing of the two products X, Y of modulus i: re = (X + Y)/2, im = (X - Y)/(2s) mod m.
extern "C" __global__ void twom_combine_i32_u8(const int* __restrict__ X, const int* __restrict__ Y, long long ldx,
                                               long long R, long long C, const unsigned* __restrict__ table, int i,
                                               unsigned inv2, unsigned inv2s, int acc, unsigned char* __restrict__ re,
                                               unsigned char* __restrict__ im) {
    modlin::Small s = modlin::load_small(table, i);
    MODLIN_GRID_2D(r, c, R, C) {
        long long e = r * C + c;
        modlin::combine_entry(X[r * ldx + c], Y[r * ldx + c], s, inv2, inv2s, acc != 0, re + e, im + e);
    }
}

// ------------------------------------------------------------------ CRT

#define MODLIN_CRT_SHARED(table, limbs, minv, N, L)                                   \
    MODLIN_SHARED_TABLE(table, N)                                                     \
    __shared__ unsigned lim[(MODLIN_MAX_MODULI + 2) * MODLIN_MAX_LIMBS];              \
    __shared__ double inv[MODLIN_MAX_MODULI];                                         \
    for (int t_ = threadIdx.x; t_ < ((N) + 2) * (L); t_ += blockDim.x) lim[t_] = (limbs)[t_]; \
    for (int t_ = threadIdx.x; t_ < (N); t_ += blockDim.x) inv[t_] = (minv)[t_];    \
    __syncthreads();

// Correctly rounded doubles C'_rc 2**-(sa[r] + sb[c]) of the integers whose residues are
// res[i R C + r C + c], written at out[r ldo + c ostep] (ostep 2 and out offset by one
// double: a complex tile's real or imaginary parts, in place).
extern "C" __global__ void crt_to_double_u8(const unsigned char* __restrict__ res, int N, long long R, long long C,
                                            const unsigned* __restrict__ table, const unsigned* __restrict__ limbs,
                                            const double* __restrict__ minv, int L, const long long* __restrict__ sa,
                                            const long long* __restrict__ sb, double* __restrict__ out, long long ldo,
                                            long long ostep) {
    MODLIN_CRT_SHARED(table, limbs, minv, N, L)
    long long plane = R * C;
    MODLIN_SWITCH_L(L, MODLIN_GRID_2D(r, c, R, C) {
        out[r * ldo + c * ostep] = modlin::crt_double<K>(res, plane, r * C + c, N, tab, lim, inv, sa[r] + sb[c]);
    })
}

// The same integers modulo p < 2**63, in [0, p), at out[r ldo + c] (int64); sp: p's row of
// constants (used where p <= 2**16), mp = M mod p.
extern "C" __global__ void crt_to_modp_u8(const unsigned char* __restrict__ res, int N, long long R, long long C,
                                          const unsigned* __restrict__ table, const unsigned* __restrict__ limbs,
                                          const double* __restrict__ minv, int L, unsigned long long p,
                                          const unsigned* __restrict__ sp, unsigned long long mp,
                                          long long* __restrict__ out, long long ldo) {
    MODLIN_CRT_SHARED(table, limbs, minv, N, L)
    long long plane = R * C;
    double invp = 1.0 / (double)p;
    modlin::Small spc = modlin::load_small(sp, 0);
    MODLIN_SWITCH_L(L, MODLIN_GRID_2D(r, c, R, C) {
        out[r * ldo + c] = (long long)modlin::crt_modp<K>(res, plane, r * C + c, N, tab, lim, inv, p, invp, spc, mp);
    })
}
