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
// positions (pads zero), transposed or not (MODLIN_TILED).
extern "C" __global__ void ozaki_residues_i8(const double* __restrict__ x, long long ldx, long long R,
                                             long long len, long long off, long long step,
                                             const long long* __restrict__ shift,
                                             const unsigned char* __restrict__ bad, int by_cols,
                                             const unsigned* __restrict__ table, int N,
                                             signed char* __restrict__ out, long long plane, long long ldo,
                                             long long Rp, long long Cp, int transpose) {
    MODLIN_SHARED_TABLE(table, N)
    MODLIN_TILED(double, 1, Rp, Cp, transpose,
                 v[0] = modlin::panel_value(x, ldx, R, len, off, step, shift, bad, by_cols, r, c),
                 modlin::store_residues(v[0], tab, N, out, plane, pos))
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
                                         long long plane, long long ldo, long long Rp, long long Cp,
                                         int transpose) {
    MODLIN_SHARED_TABLE(table, N)
    MODLIN_TILED(double, 2, Rp, Cp, transpose,
                 (v[0] = modlin::panel_value(x, ldx, R, len0, off0, step, shift, bad, by_cols, r, c),
                  v[1] = modlin::panel_value(x, ldx, R, len1, off1, step, shift, bad, by_cols, r, c)),
                 modlin::store_twom(v[0], v[1], tab, N, plus, minus, plane, pos))
}

// Balanced int8 residues modulo each modulus of an R x C int64 matrix's entries (any
// values; row and column strides ldx, ldc) reduced modulo p < 2**63 and balanced first (mu,
// c63: p's Barrett constants).
extern "C" __global__ void int_residues_i8(const long long* __restrict__ x, long long ldx, long long ldc, long long R,
                                           long long C, unsigned long long p, unsigned long long mu,
                                           unsigned long long c63, const unsigned* __restrict__ table, int N,
                                           signed char* __restrict__ out, long long plane, long long ldo,
                                           long long Rp, long long Cp, int transpose) {
    MODLIN_SHARED_TABLE(table, N)
    MODLIN_TILED(long long, 1, Rp, Cp, transpose, v[0] = modlin::int_value(x, ldx, ldc, R, C, p, mu, c63, r, c),
                 modlin::store_int_residues(v[0], tab, N, out, plane, pos))
}

// Gaussian 2M on the RNS engine, operands: from the int64 parts of a Gaussian matrix (any
// values, each with its strides; im NULL: a real matrix), the images re +- s im modulo
// m < 2**52 balanced, and their balanced int8 residues modulo each RNS modulus, laid out
// as int_residues_i8's (plus and minus).
extern "C" __global__ void gauss_twom_residues_i8(const long long* __restrict__ re, long long ld_re, long long lc_re,
                                                  const long long* __restrict__ im, long long ld_im, long long lc_im,
                                                  long long R, long long C, unsigned long long m,
                                                  unsigned long long mu, unsigned long long c63, long long s,
                                                  const unsigned* __restrict__ table, int N,
                                                  signed char* __restrict__ plus, signed char* __restrict__ minus,
                                                  long long plane, long long ldo, long long Rp, long long Cp,
                                                  int transpose) {
    MODLIN_SHARED_TABLE(table, N)
    double minv = 1.0 / (double)m;
    MODLIN_TILED(long long, 2, Rp, Cp, transpose,
                 modlin::gauss_images(re, ld_re, lc_re, im, ld_im, lc_im, R, C, m, mu, c63, s, minv, r, c, &v[0], &v[1]),
                 (modlin::store_int_residues(v[0], tab, N, plus, plane, pos),
                  modlin::store_int_residues(v[1], tab, N, minus, plane, pos)))
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

// Two GEMM outputs of modulus i (X, Y: 2M's products, one row stride) reduced at once.
extern "C" __global__ void reduce_pair_i32_u8(const int* __restrict__ X, const int* __restrict__ Y, long long ldx,
                                              long long R, long long C, const unsigned* __restrict__ table, int i,
                                              int acc, unsigned char* __restrict__ rx, unsigned char* __restrict__ ry) {
    modlin::Small s = modlin::load_small(table, i);
    MODLIN_GRID_2D(r, c, R, C) {
        long long e = r * C + c;
        modlin::reduce_pair(X[r * ldx + c], Y[r * ldx + c], s, acc != 0, rx + e, ry + e);
    }
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

// Real SYRK's / HERK's 2M combination, every modulus of table at once: from the residues x
// of X_IJ and y of (X^T)_IJ (y NULL: a diagonal tile, whose y is x transposed; R = C),
// re = (x + y)/2 and, with im not NULL, im = (x - y)/(2s) mod m, planes (N, R, C); with ret
// not NULL, the pair's tile (J, I) too: re transposed into ret and, with imt, -im
// transposed into imt (planes (N, C, R)).
extern "C" __global__ void syrk_combine_u8(const unsigned char* __restrict__ x, const unsigned char* __restrict__ y,
                                           int N, long long R, long long C, const unsigned* __restrict__ table,
                                           const unsigned* __restrict__ inv2s, unsigned char* __restrict__ re,
                                           unsigned char* __restrict__ im, unsigned char* __restrict__ ret,
                                           unsigned char* __restrict__ imt) {
    MODLIN_SHARED_TABLE(table, N)
    long long plane = R * C;
    MODLIN_GRID_2D(r, c, R, C) {
        for (int i = 0; i < N; ++i) {
            modlin::Small s = modlin::load_small(tab, i);
            modlin::syrk_combine_at(x, y, i, plane, R, C, r, c, s, inv2s[i], re, im, ret, imt);
        }
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
// res[i R C + r C + c], written at out[r ldo + c ostep]; with res_im (not NULL) a complex
// tile's imaginary part too, at out[r ldo + c ostep + 1] (its parts interleaved, in place).
extern "C" __global__ void crt_to_double_u8(const unsigned char* __restrict__ res,
                                            const unsigned char* __restrict__ res_im, int N, long long R, long long C,
                                            const unsigned* __restrict__ table, const unsigned* __restrict__ limbs,
                                            const double* __restrict__ minv, int L, const long long* __restrict__ sa,
                                            const long long* __restrict__ sb, double* __restrict__ out, long long ldo,
                                            long long ostep) {
    MODLIN_CRT_SHARED(table, limbs, minv, N, L)
    long long plane = R * C;
    MODLIN_SWITCH_L(L, MODLIN_GRID_2D(r, c, R, C) {
        modlin::crt_double_at<K>(res, res_im, plane, r, c, C, N, tab, lim, inv, sa, sb, out, ldo, ostep);
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

// ------------------------------------------------------------------ Ozaki stage (a)

// A block's reduction of one value per thread (blockDim.x * blockDim.y <= 1024 threads,
// a power of two): OP combines two; the result is returned to every thread.
#define MODLIN_BLOCK_REDUCE(T, buf, mine, OP)                                       \
    ([&]() -> T {                                                                   \
        int t_ = threadIdx.y * blockDim.x + threadIdx.x;                            \
        int n_ = blockDim.x * blockDim.y;                                           \
        buf[t_] = (mine);                                                           \
        __syncthreads();                                                            \
        for (int s_ = n_ / 2; s_ > 0; s_ >>= 1) {                                   \
            if (t_ < s_) { T a_ = buf[t_], b_ = buf[t_ + s_]; buf[t_] = (OP); }     \
            __syncthreads();                                                        \
        }                                                                           \
        T r_ = buf[0];                                                              \
        __syncthreads();                                                            \
        return r_;                                                                  \
    }())

// Stage (a)'s statistics of every row of an R x C panel of doubles (entries x[r ldx + off
// + c step] for the parts' offsets 0 and off1), one block of 256 threads per row: whether
// it holds Inf or NaN (bad), the exponent of its largest finite |part| (ex; 0 for zero and
// bad rows), the bits that keep every entry exact (need), the squared norm of its entries'
// integer bounds (sq), and the bounds themselves (bars, row stride ldb, when not NULL). The
// second reading of the row comes from the cache that the first filled.
extern "C" __global__ void line_stats_rows(const double* __restrict__ x, long long ldx, long long R, long long C,
                                           long long off1, long long step, int nparts, int tbits,
                                           unsigned char* __restrict__ bad, long long* __restrict__ ex,
                                           long long* __restrict__ need, double* __restrict__ sq,
                                           unsigned char* __restrict__ bars, long long ldb,
                                           unsigned* __restrict__ hist) {
    __shared__ double fbuf[256];
    __shared__ long long ibuf[256];
    __shared__ unsigned hs[2 * MODLIN_GAPS];
    _Pragma("unroll 1") for (long long r = blockIdx.x; r < R; r += gridDim.x) {
        const double* row = x + r * ldx;
        double mx = 0.0;
        bool b = false;
        _Pragma("unroll 1") for (long long c = threadIdx.x; c < C; c += blockDim.x) {
            modlin::stat_max(row[c * step], &mx, &b);
            if (nparts == 2) modlin::stat_max(row[off1 + c * step], &mx, &b);
        }
        mx = MODLIN_BLOCK_REDUCE(double, fbuf, mx, a_ > b_ ? a_ : b_);
        long long anyb = MODLIN_BLOCK_REDUCE(long long, ibuf, (long long)b, a_ | b_);
        long long e = anyb ? 0 : modlin::exponent_of(mx);
        long long nd = tbits;
        double s = 0.0;
        for (int t = threadIdx.x; t < 2 * MODLIN_GAPS; t += blockDim.x) hs[t] = 0;
        __syncthreads();
        if (!anyb) {
            double f1, f2;
            modlin::stat_factors(e, tbits, &f1, &f2);
            _Pragma("unroll 1") for (long long c = threadIdx.x; c < C; c += blockDim.x) {
                double bound = modlin::stat_parts(row + c * step, off1, nparts, e, f1, f2, &nd,
                                                  hist != nullptr ? hs : nullptr);
                s += bound * bound;
                if (bars != nullptr) bars[r * ldb + c] = (unsigned char)bound;
            }
        } else if (bars != nullptr) {
            _Pragma("unroll 1") for (long long c = threadIdx.x; c < C; c += blockDim.x) bars[r * ldb + c] = 0;
        }
        nd = MODLIN_BLOCK_REDUCE(long long, ibuf, nd, a_ > b_ ? a_ : b_);
        s = MODLIN_BLOCK_REDUCE(double, fbuf, s, a_ + b_);  // integers below 2**53: exact in any order
        if (threadIdx.x == 0) {
            bad[r] = (unsigned char)anyb;
            ex[r] = e;
            need[r] = nd;
            sq[r] = s;
            if (hist != nullptr) modlin::write_gaps(hs, hist + r * 2 * MODLIN_GAPS);
        }
        __syncthreads();  // hs is zeroed for the next row only once every thread is done with it
    }
}

// The same for every column of the panel, by blocks of 32 x 8 threads over strips of 32
// columns: a warp reads 32 neighbouring entries of a row.
extern "C" __global__ void line_stats_cols(const double* __restrict__ x, long long ldx, long long R, long long C,
                                           long long off1, long long step, int nparts, int tbits,
                                           unsigned char* __restrict__ bad, long long* __restrict__ ex,
                                           long long* __restrict__ need, double* __restrict__ sq,
                                           unsigned char* __restrict__ bars, long long ldb,
                                           unsigned* __restrict__ hist) {
    __shared__ double fbuf[8][32];
    __shared__ long long ibuf[8][32];
    __shared__ unsigned hs[32][2 * MODLIN_GAPS];
    int tx = threadIdx.x, ty = threadIdx.y;
    _Pragma("unroll 1") for (long long c0 = (long long)blockIdx.x * 32; c0 < C; c0 += (long long)gridDim.x * 32) {
        long long c = c0 + tx;
        bool live = c < C;
        double mx = 0.0;
        bool b = false;
        if (live) {
            _Pragma("unroll 1") for (long long r = ty; r < R; r += 8) {
                modlin::stat_max(x[r * ldx + c * step], &mx, &b);
                if (nparts == 2) modlin::stat_max(x[r * ldx + off1 + c * step], &mx, &b);
            }
        }
        fbuf[ty][tx] = mx;
        ibuf[ty][tx] = (long long)b;
        __syncthreads();
        double m_all = 0.0;
        long long b_all = 0;
        for (int i = 0; i < 8; ++i) {
            m_all = fbuf[i][tx] > m_all ? fbuf[i][tx] : m_all;
            b_all |= ibuf[i][tx];
        }
        __syncthreads();
        long long e = b_all ? 0 : modlin::exponent_of(m_all);
        long long nd = tbits;
        double s = 0.0;
        for (int t = ty; t < 2 * MODLIN_GAPS; t += 8) hs[tx][t] = 0;
        __syncthreads();
        if (live) {
            if (!b_all) {
                double f1, f2;
                modlin::stat_factors(e, tbits, &f1, &f2);
                _Pragma("unroll 1") for (long long r = ty; r < R; r += 8) {
                    double bound = modlin::stat_parts(x + r * ldx + c * step, off1, nparts, e, f1, f2, &nd,
                                                      hist != nullptr ? hs[tx] : nullptr);
                    s += bound * bound;
                    if (bars != nullptr) bars[r * ldb + c] = (unsigned char)bound;
                }
            } else if (bars != nullptr) {
                _Pragma("unroll 1") for (long long r = ty; r < R; r += 8) bars[r * ldb + c] = 0;
            }
        }
        fbuf[ty][tx] = s;
        ibuf[ty][tx] = nd;
        __syncthreads();
        if (ty == 0 && live) {
            double s_all = 0.0;
            long long n_all = tbits;
            for (int i = 0; i < 8; ++i) {
                s_all += fbuf[i][tx];
                n_all = ibuf[i][tx] > n_all ? ibuf[i][tx] : n_all;
            }
            bad[c] = (unsigned char)b_all;
            ex[c] = e;
            need[c] = n_all;
            sq[c] = s_all;
            if (hist != nullptr) modlin::write_gaps(hs[tx], hist + c * 2 * MODLIN_GAPS);
        }
        __syncthreads();
    }
}

// A one-block kernel's summary (modlin::FastSummary over its threads) reduced and stored
// from entry `first` on: the least bits, Inf/NaN in any line, the largest exponents, the
// lost entries.
__device__ void store_summary(const modlin::FastSummary& f, long long* buf, long long* summary, int first) {
    long long out[8];
    out[0] = MODLIN_BLOCK_REDUCE(long long, buf, f.min_g, a_ < b_ ? a_ : b_);
    out[1] = MODLIN_BLOCK_REDUCE(long long, buf, f.min_h, a_ < b_ ? a_ : b_);
    out[2] = MODLIN_BLOCK_REDUCE(long long, buf, f.any_a, a_ | b_);
    out[3] = MODLIN_BLOCK_REDUCE(long long, buf, f.any_b, a_ | b_);
    out[4] = MODLIN_BLOCK_REDUCE(long long, buf, f.max_ea, a_ > b_ ? a_ : b_);
    out[5] = MODLIN_BLOCK_REDUCE(long long, buf, f.max_eb, a_ > b_ ? a_ : b_);
    out[6] = MODLIN_BLOCK_REDUCE(long long, buf, f.lost_a, a_ + b_);
    out[7] = MODLIN_BLOCK_REDUCE(long long, buf, f.lost_b, a_ + b_);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            if (t >= first) summary[t] = out[t];  // constant indices: out stays in registers
        }
    }
}

// _quantize.fast_exponents and the shifts of stage (a), on one block of 1024 threads:
// from the rows' (ex_a, need_a, sq_a) and the columns' statistics, the bits g_i, h_j each
// line keeps (the even split of lb + 2 T_BITS, or the rest left to a side that is exact
// with fewer), the shifts sa = g - ex_a and sb = h - ex_b; symmetric (B = A^T): both
// sides take min(g, h). summary[0..7]: min g, min h (before that min, as _check_bits
// reads them), whether any row and any column holds Inf or NaN, the largest ex_a and
// ex_b, and the nonzero entries of A and B the shifts round to zero (from the lines' gap
// counts hist_a, hist_b: modlin::lost_of): everything the host needs of the product before
// its result, in one transfer.
extern "C" __global__ void fast_scales(const long long* __restrict__ ex_a, const long long* __restrict__ need_a,
                                       const double* __restrict__ sq_a, const unsigned char* __restrict__ bad_a,
                                       long long m, const long long* __restrict__ ex_b,
                                       const long long* __restrict__ need_b, const double* __restrict__ sq_b,
                                       const unsigned char* __restrict__ bad_b, long long n, int symmetric,
                                       long long lb, int tbits, int gmax, const unsigned* __restrict__ hist_a,
                                       const unsigned* __restrict__ hist_b, long long* __restrict__ sa,
                                       long long* __restrict__ sb, long long* __restrict__ g_out,
                                       long long* __restrict__ h_out, long long* __restrict__ summary) {
    __shared__ long long buf[1024];
    long long use_a = 0, use_b = 0;
    _Pragma("unroll 1") for (long long i = threadIdx.x; i < m; i += blockDim.x) {
        long long v = modlin::fast_cap(need_a[i], gmax) + modlin::fast_c(sq_a[i]);
        use_a = v > use_a ? v : use_a;
    }
    _Pragma("unroll 1") for (long long j = threadIdx.x; j < n; j += blockDim.x) {
        long long v = modlin::fast_cap(need_b[j], gmax) + modlin::fast_c(sq_b[j]);
        use_b = v > use_b ? v : use_b;
    }
    use_a = MODLIN_BLOCK_REDUCE(long long, buf, use_a, a_ > b_ ? a_ : b_);
    use_b = MODLIN_BLOCK_REDUCE(long long, buf, use_b, a_ > b_ ? a_ : b_);
    long long ha, hb;
    modlin::fast_split(lb, tbits, use_a, use_b, &ha, &hb);
    modlin::FastSummary f = modlin::fast_summary();
    _Pragma("unroll 1") for (long long i = threadIdx.x; i < m; i += blockDim.x) {
        modlin::fast_row(i, ex_a, need_a, sq_a, bad_a, ex_b, need_b, sq_b, symmetric, ha, hb, tbits, gmax, hist_a, sa,
                         sb, g_out, h_out, &f);
    }
    if (!symmetric) {
        _Pragma("unroll 1") for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            modlin::fast_col(j, ex_b, need_b, sq_b, bad_b, hb, tbits, gmax, hist_b, sb, h_out, &f);
        }
    } else {
        modlin::fast_mirror(&f);
    }
    store_summary(f, buf, summary, 0);
}

// Gaussian 2M on the RNS engine, result: X and Y mod p from their residues (crt_to_modp_u8's
// arithmetic), then re = (X + Y)/2 and im = (X - Y)/(2s) mod p < 2**52 (inv2, inv2s), written
// at re[r ld_re + c] and im[r ld_im + c] (int64 output tiles).
extern "C" __global__ void crt_twom_modp_u8(const unsigned char* __restrict__ rx, const unsigned char* __restrict__ ry,
                                            int N, long long R, long long C, const unsigned* __restrict__ table,
                                            const unsigned* __restrict__ limbs, const double* __restrict__ minv, int L,
                                            unsigned long long p, const unsigned* __restrict__ sp,
                                            unsigned long long mp, long long inv2, long long inv2s,
                                            long long* __restrict__ re, long long ld_re, long long* __restrict__ im,
                                            long long ld_im) {
    MODLIN_CRT_SHARED(table, limbs, minv, N, L)
    long long plane = R * C;
    double invp = 1.0 / (double)p;
    modlin::Small spc = modlin::load_small(sp, 0);
    MODLIN_SWITCH_L(L, MODLIN_GRID_2D(r, c, R, C) {
        modlin::crt_twom_entry<K>(rx, ry, plane, r * C + c, N, tab, lim, inv, p, invp, spc, mp, inv2, inv2s,
                                  re + r * ld_re + c, im + r * ld_im + c);
    })
}

// "accurate" mode, after the bound product: code = ceil(log2 w) (255 where w = 0) of the
// R x C float64 bound product w (exact integers below 2**53; row stride ldw) into the codes'
// tile (row stride ldc).
extern "C" __global__ void bound_code_f64(const double* __restrict__ w, long long ldw, long long R, long long C,
                                          unsigned char* __restrict__ code, long long ldc) {
    MODLIN_GRID_2D(r, c, R, C) {
        double v = w[r * ldw + c];
        code[r * ldc + c] = v > 0.0 ? (unsigned char)modlin::ceil_log2(v) : (unsigned char)255;
    }
}

// "accurate" mode's passes over the rows (a block each): g_i from the least slack of row i,
// min_j (room_ij - g_i - h_j) halved on the first pass, min_j (room_ij - h_j) on the last.
extern "C" __global__ void accurate_rows(const unsigned char* __restrict__ code, long long m, long long n,
                                         long long* __restrict__ g, const long long* __restrict__ h,
                                         const long long* __restrict__ need_a, long long top, int gmax, int first) {
    __shared__ long long buf[256];
    _Pragma("unroll 1") for (long long i = blockIdx.x; i < m; i += gridDim.x) {
        long long gi = g[i], least = 1LL << 62;
        _Pragma("unroll 1") for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            long long v = modlin::acc_room(code[i * n + j], top, gmax) - (first ? gi : 0) - h[j];
            least = v < least ? v : least;
        }
        least = MODLIN_BLOCK_REDUCE(long long, buf, least, a_ < b_ ? a_ : b_);
        if (threadIdx.x == 0) g[i] = modlin::acc_row_bits(gi, modlin::fast_cap(need_a[i], gmax), least, first != 0);
        __syncthreads();
    }
}

// The pass over the columns (blocks of 32 x 8 threads over strips of 32): h_j =
// max(h_j, min(cap_j, min_i (room_ij - g_i))).
extern "C" __global__ void accurate_cols(const unsigned char* __restrict__ code, long long m, long long n,
                                         const long long* __restrict__ g, long long* __restrict__ h,
                                         const long long* __restrict__ need_b, long long top, int gmax) {
    __shared__ long long buf[8][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    _Pragma("unroll 1") for (long long c0 = (long long)blockIdx.x * 32; c0 < n; c0 += (long long)gridDim.x * 32) {
        long long j = c0 + tx, least = 1LL << 62;
        if (j < n) {
            _Pragma("unroll 1") for (long long i = ty; i < m; i += 8) {
                long long v = modlin::acc_room(code[i * n + j], top, gmax) - g[i];
                least = v < least ? v : least;
            }
        }
        buf[ty][tx] = least;
        __syncthreads();
        if (ty == 0 && j < n) {
            for (int t = 1; t < 8; ++t) least = buf[t][tx] < least ? buf[t][tx] : least;
            long long cap = modlin::fast_cap(need_b[j], gmax), v = cap < least ? cap : least;
            h[j] = h[j] > v ? h[j] : v;
        }
        __syncthreads();
    }
}

// The shifts and the summary (entries 2..7, fast_scales' layout) of "accurate" mode's bits.
extern "C" __global__ void bits_scales(const long long* __restrict__ g, const long long* __restrict__ h,
                                       const long long* __restrict__ ex_a, const unsigned char* __restrict__ bad_a,
                                       long long m, const long long* __restrict__ ex_b,
                                       const unsigned char* __restrict__ bad_b, long long n, int symmetric, int tbits,
                                       const unsigned* __restrict__ hist_a, const unsigned* __restrict__ hist_b,
                                       long long* __restrict__ sa, long long* __restrict__ sb,
                                       long long* __restrict__ summary) {
    __shared__ long long buf[1024];
    modlin::FastSummary f = modlin::fast_summary();
    _Pragma("unroll 1") for (long long i = threadIdx.x; i < m; i += blockDim.x) {
        modlin::bits_row(i, g, h, ex_a, ex_b, bad_a, symmetric, tbits, hist_a, sa, sb, &f);
    }
    if (!symmetric) {
        _Pragma("unroll 1") for (long long j = threadIdx.x; j < n; j += blockDim.x) {
            modlin::bits_col(j, h, ex_b, bad_b, tbits, hist_b, sb, &f);
        }
    } else {
        modlin::fast_mirror(&f);
    }
    store_summary(f, buf, summary, 2);  // the least bits [0:2] are the fast pass's
}
