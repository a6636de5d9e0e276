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
                       signed char* out, long long plane, long long ldo, long long Rp, long long Cp, int transpose) {
    HOST_2D(r, c, Rp, Cp) {
        double v = modlin::panel_value(x, ldx, R, len, off, step, shift, bad, by_cols, r, c);
        modlin::store_residues(v, table, N, out, plane, tiled_pos(r, c, ldo, transpose));
    }
}

void ozaki_twom_i8(const double* x, long long ldx, long long R, long long len0, long long len1, long long off0,
                   long long off1, long long step, const long long* shift, const unsigned char* bad, int by_cols,
                   const unsigned* table, int N, signed char* plus, signed char* minus, long long plane,
                   long long ldo, long long Rp, long long Cp, int transpose) {
    HOST_2D(r, c, Rp, Cp) {
        double v0 = modlin::panel_value(x, ldx, R, len0, off0, step, shift, bad, by_cols, r, c);
        double v1 = modlin::panel_value(x, ldx, R, len1, off1, step, shift, bad, by_cols, r, c);
        modlin::store_twom(v0, v1, table, N, plus, minus, plane, tiled_pos(r, c, ldo, transpose));
    }
}

void int_residues_i8(const long long* x, long long ldx, long long ldc, long long R, long long C, unsigned long long p,
                     unsigned long long mu, unsigned long long c63, const unsigned* table, int N, signed char* out,
                     long long plane, long long ldo, long long Rp, long long Cp, int transpose) {
    HOST_2D(r, c, Rp, Cp) {
        long long v = modlin::int_value(x, ldx, ldc, R, C, p, mu, c63, r, c);
        modlin::store_int_residues(v, table, N, out, plane, tiled_pos(r, c, ldo, transpose));
    }
}

void gauss_twom_residues_i8(const long long* re, long long ld_re, long long lc_re, const long long* im, long long ld_im,
                            long long lc_im, long long R, long long C, unsigned long long m, unsigned long long mu,
                            unsigned long long c63, long long s, const unsigned* table, int N, signed char* plus,
                            signed char* minus, long long plane, long long ldo, long long Rp, long long Cp,
                            int transpose) {
    double minv = 1.0 / (double)m;
    HOST_2D(r, c, Rp, Cp) {
        long long u, v;
        modlin::gauss_images(re, ld_re, lc_re, im, ld_im, lc_im, R, C, m, mu, c63, s, minv, r, c, &u, &v);
        long long pos = tiled_pos(r, c, ldo, transpose);
        modlin::store_int_residues(u, table, N, plus, plane, pos);
        modlin::store_int_residues(v, table, N, minus, plane, pos);
    }
}

void reduce_pair_i32_u8(const int* X, const int* Y, long long ldx, long long R, long long C, const unsigned* table,
                        int i, int acc, unsigned char* rx, unsigned char* ry) {
    modlin::Small s = modlin::load_small(table, i);
    HOST_2D(r, c, R, C) modlin::reduce_pair(X[r * ldx + c], Y[r * ldx + c], s, acc != 0, rx + r * C + c,
                                            ry + r * C + c);
}

void crt_twom_modp_u8(const unsigned char* rx, const unsigned char* ry, int N, long long R, long long C,
                      const unsigned* table, const unsigned* limbs, const double* minv, int L, unsigned long long p,
                      const unsigned* sp, unsigned long long mp, long long inv2, long long inv2s, long long* re,
                      long long ld_re, long long* im, long long ld_im) {
    long long plane = R * C;
    double invp = 1.0 / (double)p;
    modlin::Small spc = modlin::load_small(sp, 0);
    MODLIN_SWITCH_L(L, HOST_2D(r, c, R, C) {
        modlin::crt_twom_entry<K>(rx, ry, plane, r * C + c, N, table, limbs, minv, p, invp, spc, mp, inv2, inv2s,
                                  re + r * ld_re + c, im + r * ld_im + c);
    })
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

void syrk_combine_u8(const unsigned char* x, const unsigned char* y, int N, long long R, long long C,
                     const unsigned* table, const unsigned* inv2s, unsigned char* re, unsigned char* im,
                     unsigned char* ret, unsigned char* imt) {
    long long plane = R * C;
    HOST_2D(r, c, R, C) {
        for (int i = 0; i < N; ++i) {
            modlin::Small s = modlin::load_small(table, i);
            modlin::syrk_combine_at(x, y, i, plane, R, C, r, c, s, inv2s[i], re, im, ret, imt);
        }
    }
}

void crt_to_double_u8(const unsigned char* res, const unsigned char* res_im, int N, long long R, long long C,
                      const unsigned* table, const unsigned* limbs, const double* minv, int L, const long long* sa,
                      const long long* sb, double* out, long long ldo, long long ostep) {
    long long plane = R * C;
    MODLIN_SWITCH_L(L, HOST_2D(r, c, R, C) {
        modlin::crt_double_at<K>(res, res_im, plane, r, c, C, N, table, limbs, minv, sa, sb, out, ldo, ostep);
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

// Stage (a): each line's statistics by a plain loop (the kernels combine threads' maxima and
// exact integer sums, which any order gives alike).
static void host_line_stats(const double* x, long long ldx, long long R, long long C, long long off1, long long step,
                            int nparts, int tbits, unsigned char* bad, long long* ex, long long* need, double* sq,
                            unsigned char* bars, long long ldb, unsigned* hist, int by_cols) {
    long long lines = by_cols ? C : R, len = by_cols ? R : C;
    for (long long l = 0; l < lines; ++l) {
        double mx = 0.0;
        bool b = false;
        for (long long t = 0; t < len; ++t) {
            long long r = by_cols ? t : l, c = by_cols ? l : t;
            modlin::stat_max(x[r * ldx + c * step], &mx, &b);
            if (nparts == 2) modlin::stat_max(x[r * ldx + off1 + c * step], &mx, &b);
        }
        long long e = b ? 0 : modlin::exponent_of(mx);
        long long nd = tbits;
        double s = 0.0;
        double f1, f2;
        modlin::stat_factors(e, tbits, &f1, &f2);
        unsigned hs[2 * MODLIN_GAPS] = {0};
        for (long long t = 0; t < len; ++t) {
            long long r = by_cols ? t : l, c = by_cols ? l : t;
            double bound = 0.0;
            if (!b) {
                bound = modlin::stat_parts(x + r * ldx + c * step, off1, nparts, e, f1, f2, &nd, hs);
                s += bound * bound;
            }
            if (bars) bars[r * ldb + c] = (unsigned char)bound;
        }
        bad[l] = (unsigned char)b;
        ex[l] = e;
        need[l] = nd;
        sq[l] = s;
        if (hist) modlin::write_gaps(hs, hist + l * 2 * MODLIN_GAPS);
    }
}

void line_stats_rows(const double* x, long long ldx, long long R, long long C, long long off1, long long step,
                     int nparts, int tbits, unsigned char* bad, long long* ex, long long* need, double* sq,
                     unsigned char* bars, long long ldb, unsigned* hist) {
    host_line_stats(x, ldx, R, C, off1, step, nparts, tbits, bad, ex, need, sq, bars, ldb, hist, 0);
}

void line_stats_cols(const double* x, long long ldx, long long R, long long C, long long off1, long long step,
                     int nparts, int tbits, unsigned char* bad, long long* ex, long long* need, double* sq,
                     unsigned char* bars, long long ldb, unsigned* hist) {
    host_line_stats(x, ldx, R, C, off1, step, nparts, tbits, bad, ex, need, sq, bars, ldb, hist, 1);
}

void fast_scales(const long long* ex_a, const long long* need_a, const double* sq_a, const unsigned char* bad_a,
                 long long m, const long long* ex_b, const long long* need_b, const double* sq_b,
                 const unsigned char* bad_b, long long n, int symmetric, long long lb, int tbits, int gmax,
                 const unsigned* hist_a, const unsigned* hist_b, long long* sa, long long* sb, long long* g_out,
                 long long* h_out, long long* summary) {
    long long use_a = 0, use_b = 0;
    for (long long i = 0; i < m; ++i) {
        long long v = modlin::fast_cap(need_a[i], gmax) + modlin::fast_c(sq_a[i]);
        use_a = v > use_a ? v : use_a;
    }
    for (long long j = 0; j < n; ++j) {
        long long v = modlin::fast_cap(need_b[j], gmax) + modlin::fast_c(sq_b[j]);
        use_b = v > use_b ? v : use_b;
    }
    long long ha, hb;
    modlin::fast_split(lb, tbits, use_a, use_b, &ha, &hb);
    modlin::FastSummary f = modlin::fast_summary();
    for (long long i = 0; i < m; ++i) {
        modlin::fast_row(i, ex_a, need_a, sq_a, bad_a, ex_b, need_b, sq_b, symmetric, ha, hb, tbits, gmax, hist_a, sa,
                         sb, g_out, h_out, &f);
    }
    if (!symmetric) {
        for (long long j = 0; j < n; ++j) modlin::fast_col(j, ex_b, need_b, sq_b, bad_b, hb, tbits, gmax, hist_b, sb, h_out, &f);
    } else {
        modlin::fast_mirror(&f);
    }
    long long out[8] = {f.min_g, f.min_h, f.any_a, f.any_b, f.max_ea, f.max_eb, f.lost_a, f.lost_b};
    for (int t = 0; t < 8; ++t) summary[t] = out[t];
}

void bound_code_f64(const double* w, long long ldw, long long R, long long C, unsigned char* code, long long ldc) {
    HOST_2D(r, c, R, C) {
        double v = w[r * ldw + c];
        code[r * ldc + c] = v > 0.0 ? (unsigned char)modlin::ceil_log2(v) : (unsigned char)255;
    }
}

void accurate_rows(const unsigned char* code, long long m, long long n, long long* g, const long long* h,
                   const long long* need_a, long long top, int gmax, int first) {
    for (long long i = 0; i < m; ++i) {
        long long gi = g[i], least = 1LL << 62;
        for (long long j = 0; j < n; ++j) {
            long long v = modlin::acc_room(code[i * n + j], top, gmax) - (first ? gi : 0) - h[j];
            least = v < least ? v : least;
        }
        g[i] = modlin::acc_row_bits(gi, modlin::fast_cap(need_a[i], gmax), least, first != 0);
    }
}

void accurate_cols(const unsigned char* code, long long m, long long n, const long long* g, long long* h,
                   const long long* need_b, long long top, int gmax) {
    for (long long j = 0; j < n; ++j) {
        long long least = 1LL << 62;
        for (long long i = 0; i < m; ++i) {
            long long v = modlin::acc_room(code[i * n + j], top, gmax) - g[i];
            least = v < least ? v : least;
        }
        long long cap = modlin::fast_cap(need_b[j], gmax), v = cap < least ? cap : least;
        h[j] = h[j] > v ? h[j] : v;
    }
}

void bits_scales(const long long* g, const long long* h, const long long* ex_a, const unsigned char* bad_a, long long m,
                 const long long* ex_b, const unsigned char* bad_b, long long n, int symmetric, int tbits,
                 const unsigned* hist_a, const unsigned* hist_b, long long* sa, long long* sb, long long* summary) {
    modlin::FastSummary f = modlin::fast_summary();
    for (long long i = 0; i < m; ++i) modlin::bits_row(i, g, h, ex_a, ex_b, bad_a, symmetric, tbits, hist_a, sa, sb, &f);
    if (!symmetric) {
        for (long long j = 0; j < n; ++j) modlin::bits_col(j, h, ex_b, bad_b, tbits, hist_b, sb, &f);
    } else {
        modlin::fast_mirror(&f);
    }
    long long out[6] = {f.any_a, f.any_b, f.max_ea, f.max_eb, f.lost_a, f.lost_b};
    for (int t = 0; t < 6; ++t) summary[2 + t] = out[t];
}

}  // extern "C"
