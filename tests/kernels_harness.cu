// Host twins of the kernels in kernels/modlin_kernels.cu: same names, same
// arguments, plain loops over the entries calling the same per-entry functions of
// kernels/modlin_elem.cuh (the tiled kernels: every source position loaded, then
// stored where the kernel stores it; the constants read from the tables directly
// instead of from shared memory). tests/test_kernels.py builds this as a shared
// library with nvcc, so the __host__ __device__ code goes through the same front end
// as the kernels, and compares it bit for bit with numba and Python-int oracles.
#include "modlin_elem.cuh"

#define HOST_LOOP(e, n) for (long long e = 0; e < (n); ++e)
#define HOST_2D(r, c, R, C) for (long long r = 0; r < (R); ++r) for (long long c = 0; c < (C); ++c)

static long long tiled_pos(long long r, long long c, long long ldo, int transpose) {
    return transpose ? c * ldo + r : r * ldo + c;
}

extern "C" {

void balanced_words_f64(const long long* x, long long n, long long p, unsigned long long mu, unsigned long long c63,
                        int s, int u, double* words) {
    HOST_LOOP(e, n) modlin::balanced_words_at(x, n, p, mu, c63, s, u, words, e);
}

void mw_step(double* x, const double* t, long long n, double q1, double hi1, double lo1, double scale,
             double q2, double hi2, double lo2, double qt, double hit, double lot) {
    HOST_LOOP(e, n) modlin::mw_step_at(x, t, q1, hi1, lo1, scale, q2, hi2, lo2, qt, hit, lot, e);
}

void mw_finalize(const double* x, const double* t, long long n, double q1, double hi1, double lo1, double scale,
                 double q2, double hi2, double lo2, double qt, double hit, double lot, double q, double hi,
                 double lo, long long p, long long* out) {
    HOST_LOOP(e, n) modlin::mw_finalize_at(x, t, q1, hi1, lo1, scale, q2, hi2, lo2, qt, hit, lot, q, hi, lo, p,
                                           out, e);
}

void ozaki_residues_i8(const double* x, long long ldx, long long R, long long len, long long off, long long step,
                       const long long* shift, const unsigned char* bad, int by_cols, const unsigned* table, int N,
                       signed char* out, long long plane, long long ldo, long long Rp, long long Cp, int transpose,
                       unsigned long long* lost) {
    unsigned long long mine = 0;
    HOST_2D(r, c, Rp, Cp) {
        double v = modlin::panel_value(x, ldx, R, len, off, step, shift, bad, by_cols, r, c, &mine);
        modlin::store_residues(v, table, N, out, plane, tiled_pos(r, c, ldo, transpose));
    }
    if (lost) *lost += mine;
}

void ozaki_twom_i8(const double* x, long long ldx, long long R, long long len0, long long len1, long long off0,
                   long long off1, long long step, const long long* shift, const unsigned char* bad, int by_cols,
                   const unsigned* table, int N, signed char* plus, signed char* minus, long long plane,
                   long long ldo, long long Rp, long long Cp, int transpose, unsigned long long* lost) {
    unsigned long long mine = 0;
    HOST_2D(r, c, Rp, Cp) {
        double v0 = modlin::panel_value(x, ldx, R, len0, off0, step, shift, bad, by_cols, r, c, &mine);
        double v1 = modlin::panel_value(x, ldx, R, len1, off1, step, shift, bad, by_cols, r, c, &mine);
        modlin::store_twom(v0, v1, table, N, plus, minus, plane, tiled_pos(r, c, ldo, transpose));
    }
    if (lost) *lost += mine;
}

void int_residues_i8(const long long* x, long long ldx, long long R, long long C, unsigned long long p,
                     unsigned long long mu, unsigned long long c63, const unsigned* table, int N, signed char* out,
                     long long plane, long long ldo, long long Rp, long long Cp, int transpose) {
    HOST_2D(r, c, Rp, Cp) {
        long long v = modlin::int_value(x, ldx, R, C, p, mu, c63, r, c);
        modlin::store_int_residues(v, table, N, out, plane, tiled_pos(r, c, ldo, transpose));
    }
}

void reduce_i32_u8(const int* X, long long ldx, long long R, long long C, const unsigned* table, int i, int acc,
                   unsigned char* res) {
    modlin::Small s = modlin::load_small(table, i);
    HOST_2D(r, c, R, C) modlin::reduce_entry(X[r * ldx + c], s, acc != 0, res + r * C + c);
}

void twom_combine_i32_u8(const int* X, const int* Y, long long ldx, long long R, long long C, const unsigned* table,
                         int i, unsigned inv2, unsigned inv2s, int acc, unsigned char* re, unsigned char* im) {
    modlin::Small s = modlin::load_small(table, i);
    HOST_2D(r, c, R, C) {
        long long e = r * C + c;
        modlin::combine_entry(X[r * ldx + c], Y[r * ldx + c], s, inv2, inv2s, acc != 0, re + e, im + e);
    }
}

void crt_to_double_u8(const unsigned char* res, int N, long long R, long long C, const unsigned* table,
                      const unsigned* limbs, const double* minv, int L, const long long* sa, const long long* sb,
                      double* out, long long ldo, long long ostep) {
    long long plane = R * C;
    MODLIN_SWITCH_L(L, HOST_2D(r, c, R, C) {
        out[r * ldo + c * ostep] = modlin::crt_double<K>(res, plane, r * C + c, N, table, limbs, minv, sa[r] + sb[c]);
    })
}

void crt_to_modp_u8(const unsigned char* res, int N, long long R, long long C, const unsigned* table,
                    const unsigned* limbs, const double* minv, int L, unsigned long long p, const unsigned* sp,
                    unsigned long long mp, long long* out, long long ldo) {
    long long plane = R * C;
    double invp = 1.0 / (double)p;
    modlin::Small spc = modlin::load_small(sp, 0);
    MODLIN_SWITCH_L(L, HOST_2D(r, c, R, C) {
        out[r * ldo + c] = (long long)modlin::crt_modp<K>(res, plane, r * C + c, N, table, limbs, minv, p, invp, spc, mp);
    })
}

}  // extern "C"
