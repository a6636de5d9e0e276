// Host twins of the kernels in kernels/modlin_kernels.cu: same names, same
// arguments, a plain loop over the entries calling the same per-entry functions
// of kernels/modlin_elem.cuh (and the same constants, computed here into local
// arrays instead of shared memory). tests/test_kernels.py builds this as a
// shared library with nvcc, so the __host__ __device__ code goes through the
// same front end as the kernels, and compares it bit for bit with numba.
#include "modlin_elem.cuh"

#define HOST_LOOP(e, n) for (long long e = 0; e < (n); ++e)

extern "C" {

void balanced_words_f64(const long long* x, long long n, long long p, int s, int u, double* words) {
    HOST_LOOP(e, n) modlin::balanced_words_at(x, n, p, s, u, words, e);
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

void ozaki_residues_i8(const double* x, long long n, const int* moduli, int N, signed char* out) {
    modlin::ResConst kc[MODLIN_MAX_MODULI];
    modlin::load_res_consts(moduli, N, kc, 0, 1);
    HOST_LOOP(e, n) modlin::ozaki_residues_at(x, n, kc, N, out, e);
}

void ozaki_twom_i8(const double* xr, const double* xi, long long n, const int* moduli, const int* roots, int N,
                   signed char* plus, signed char* minus) {
    modlin::ResConst kc[MODLIN_MAX_MODULI];
    modlin::load_res_consts(moduli, N, kc, 0, 1);
    HOST_LOOP(e, n) modlin::ozaki_twom_at(xr, xi, n, kc, roots, N, plus, minus, e);
}

void int_residues_i8(const long long* x, long long n, const int* moduli, int N, signed char* out) {
    HOST_LOOP(e, n) modlin::int_residues_at(x, n, moduli, N, out, e);
}

void reduce_i32_u8(const int* X, long long n, int m, unsigned char* out) {
    HOST_LOOP(e, n) modlin::reduce_i32_at(X, m, out, e);
}

void twom_combine_i32_u8(const int* X, const int* Y, long long n, int m, int inv2, int inv2s,
                         unsigned char* re, unsigned char* im) {
    HOST_LOOP(e, n) modlin::twom_combine_at(X, Y, m, inv2, inv2s, re, im, e);
}

void crt_to_double_u8(const unsigned char* res, int N, long long E, long long ncols, const long long* moduli,
                      const long long* inv, const double* half, int L, const long long* sa, const long long* sb,
                      double* out) {
    double mf[MODLIN_MAX_MODULI], minv[MODLIN_MAX_MODULI], hf[MODLIN_MAX_MODULI], x[MODLIN_MAX_MODULI];
    modlin::load_crt_consts(moduli, half, N, mf, minv, hf, 0, 1);
    HOST_LOOP(e, E) modlin::crt_to_double_at(res, N, E, ncols, moduli, inv, mf, minv, hf, L, sa, sb, out, x, e);
}

void crt_to_modp_u8(const unsigned char* res, int N, long long E, const long long* moduli, const long long* inv,
                    const double* half, unsigned long long p, unsigned long long m_mod_p, long long* out) {
    double mf[MODLIN_MAX_MODULI], minv[MODLIN_MAX_MODULI], hf[MODLIN_MAX_MODULI], x[MODLIN_MAX_MODULI];
    modlin::load_crt_consts(moduli, half, N, mf, minv, hf, 0, 1);
    double invp = 1.0 / (double)p;
    HOST_LOOP(e, E) modlin::crt_to_modp_at(res, N, E, moduli, inv, mf, minv, hf, p, m_mod_p, invp, out, x, e);
}

}  // extern "C"
