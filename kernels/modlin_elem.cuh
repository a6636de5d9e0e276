// Per-element arithmetic of modlin's GPU kernels, shared by the CUDA kernels
// (kernels/modlin_kernels.cu) and by the host harness that checks them on the CPU
// (tests/kernels_harness.cu) against the numba kernels they mirror.
//
// Every function repeats its numba counterpart operation for operation: the
// exactness proofs in modlin/_modular.py, _quantize.py, _rns.py and _crtfloat.py
// bound the rounding of exactly that sequence. Compile with --fmad=false (and a
// host compiler that does not contract either): a fused multiply-add rounds once
// where the CPU rounds twice, which changes results the proofs were made for.
//
// The code is plain C++ that NVRTC accepts: no standard headers on the device
// side (NVRTC has rint, floor, ldexp and frexp built in), only long long and
// unsigned long long as fixed-width types (64 bits on every CUDA platform).
#ifndef MODLIN_ELEM_CUH
#define MODLIN_ELEM_CUH

#ifndef __CUDACC_RTC__
#include <cmath>
#endif

#define MODLIN_HD __host__ __device__ inline

// Garner digits live in a per-thread array; Ozaki bases have at most 64 moduli.
#define MODLIN_MAX_MODULI 64
// 32-bit limbs of a CRT value: L <= 16 limbs hold M, and _round_limbs reads up to
// two limbs past the top one, as the numba kernel's L + 2 zeroed limbs allow.
#define MODLIN_MAX_LIMBS 18

// Powers of two, each the exact double, in decimal: hexadecimal floating literals
// need C++17 and the NVRTC dialect is the caller's choice.
#define MODLIN_TWO_32 4294967296.0
#define MODLIN_TWO_M20 9.5367431640625e-07
#define MODLIN_TWO_M32 2.3283064365386963e-10
#define MODLIN_TWO_M100 7.888609052210118e-31
#define MODLIN_TWO_M1074 4.9406564584124654e-324

namespace modlin {

// ------------------------------------------------------------------ word split

// _split_into: the u balanced base-2**s words of r, for r in [-(p/2), p).
// `>>` on a negative long long is an arithmetic shift with nvcc, NVRTC and gcc
// (and in C++20), i.e. floor division as numba's; the left shift of a negative
// word is written as a product because shifting a negative value left is
// undefined before C++20.
template <typename T>
MODLIN_HD void split_into(long long r, long long p, int s, int u, T* words, long long stride) {
    r -= p * (long long)(r > (p - 1) / 2);
    for (int i = u - 1; i > 0; --i) {
        int shift = s * i;
        long long d = (r + (1LL << (shift - 1))) >> shift;
        words[i * stride] = (T)d;
        r -= d * (1LL << shift);
    }
    words[0] = (T)r;
}

// x mod p in [0, p) for any long long x and 2 <= p < 2**63. C's % truncates
// (its remainder takes x's sign), Python's floors: one conditional add maps the
// first onto the second, with no overflow since |x % p| < p.
MODLIN_HD long long mod_nonneg(long long x, long long p) {
    long long r = x % p;
    return r < 0 ? r + p : r;
}

// The balanced residue in [-(p/2), (p-1)/2] (for even p one short of symmetric,
// as _lift_kernel and _split_into take it, so that p = 256 fits int8).
MODLIN_HD long long balanced_residue(long long x, long long p) {
    long long r = mod_nonneg(x, p);
    return r - p * (long long)(r > (p - 1) / 2);
}

// ------------------------------------------------------------------ multiword reductions

// _red: one reduction (q, p_hi, p_lo of a Reduction); with q = 0, c = 0 and it is the identity.
MODLIN_HD double red_elem(double y, double q, double hi, double lo) {
    double c = rint(y * q);
    return (y - c * hi) - c * lo;
}

// _step on one entry before its addend: red2(scale * red1(y)).
MODLIN_HD double step_elem(double y, double q1, double hi1, double lo1, double scale,
                           double q2, double hi2, double lo2) {
    return red_elem(scale * red_elem(y, q1, hi1, lo1), q2, hi2, lo2);
}

// _finalize on one entry (y already holds the folded sum): red(y) mod p in [0, p).
MODLIN_HD long long finalize_elem(double y, double q, double hi, double lo, long long p) {
    double fp = (double)p;
    y = red_elem(y, q, hi, lo);
    y -= floor(y * q) * fp;
    if (y >= fp) {
        y -= fp;
    } else if (y < 0) {
        y += fp;
    }
    return (long long)y;
}

// ------------------------------------------------------------------ float residues

// _rns._fmod: x mod m in [0, m) for an integer-valued |x| <= 2**53, minv = fl(1/m).
// x - q m is an explicit fma (fused even under --fmad=false), as _rns._fmod's: q m
// alone can pass 2**53 and round for x near -2**53. The corrections are products by
// 0.0 or 1.0 like numba's m * (r < 0), so that a -0.0 becomes +0.0 the same way.
#ifdef MODLIN_CHECK_NO_FMA
// tests/test_kernels.py's build: fmod_pos's fma unfused, so that the PTX shows whether
// anything else fuses (it must not: contraction is off)
MODLIN_HD double modlin_fma(double a, double b, double c) { return a * b + c; }
#else
MODLIN_HD double modlin_fma(double a, double b, double c) { return fma(a, b, c); }
#endif

MODLIN_HD double fmod_pos(double x, double m, double minv) {
    double r = modlin_fma(-floor(x * minv), m, x);
    r += m * (double)(r < 0);
    r -= m * (double)(r >= m);
    return r;
}

// The constants _residues_kernel and _twom_kernel derive from a modulus m.
struct ResConst {
    double m, minv, c32, half;
};

MODLIN_HD ResConst res_const(int m) {
    ResConst k;
    k.m = (double)m;
    k.minv = 1.0 / k.m;
    k.c32 = (double)(4294967296LL % (long long)m);
    k.half = floor((k.m - 1.0) / 2.0);
    return k;
}

// _res split in two: v = hi * 2**32 + lo exactly (|v| < 2**85, so |hi| < 2**53),
// a split that does not depend on the modulus, done once per entry.
struct Split32 {
    double hi, lo;
};

MODLIN_HD Split32 split32(double v) {
    Split32 h;
    h.hi = floor(v * MODLIN_TWO_M32);
    h.lo = v - h.hi * MODLIN_TWO_32;
    return h;
}

MODLIN_HD double res_of(Split32 h, const ResConst& k) {
    return fmod_pos(fmod_pos(h.hi, k.m, k.minv) * k.c32 + h.lo, k.m, k.minv);
}

// r - m * (r > half) of a residue r in [0, m <= 256): a value of [-128, 127].
MODLIN_HD signed char balance_i8(double r, const ResConst& k) {
    return (signed char)(int)(r - k.m * (double)(r > k.half));
}

// _twom_kernel on one entry and one modulus with s = sqrt(-1) mod m.
MODLIN_HD void twom_elem(Split32 re, Split32 im, const ResConst& k, double s,
                         signed char* plus, signed char* minus) {
    double r = res_of(re, k);
    double t = fmod_pos(res_of(im, k) * s, k.m, k.minv);
    double a = fmod_pos(r + t, k.m, k.minv);
    *plus = balance_i8(a, k);
    double b = fmod_pos(r - t, k.m, k.minv);
    *minus = balance_i8(b, k);
}

// ------------------------------------------------------------------ int8 engine post-processing

// (X + Y)/2 and (X - Y)/(2s) mod m of the int32 products of 2M's images, in [0, m),
// for m <= 256 and inverses given by any representatives in int: X and Y are
// reduced first, so each product is below 2**9 * 2**31 in magnitude.
MODLIN_HD void twom_combine_elem(int X, int Y, int m, int inv2, int inv2s,
                                 unsigned char* re, unsigned char* im) {
    long long mm = m;
    long long x = mod_nonneg(X, mm), y = mod_nonneg(Y, mm);
    *re = (unsigned char)mod_nonneg((x + y) * inv2, mm);
    *im = (unsigned char)mod_nonneg((x - y) * inv2s, mm);
}

// ------------------------------------------------------------------ CRT: Garner

// _garner_kernel / the Garner part of _to_double_kernel for one entry: residues
// res[i * E + e] -> mixed-radix digits x[0..N) (as float64, with _garner_step's
// exact operations). minv[i] = 1.0 / moduli[i] as double.
MODLIN_HD void garner_digits(const unsigned char* res, long long E, long long e, int N,
                             const double* mf, const double* minv, const long long* inv,
                             double* x) {
    for (int i = 0; i < N; ++i) x[i] = (double)res[i * E + e];
    for (int i = 1; i < N; ++i) {
        double m = mf[i], mi = minv[i];
        double t = x[i];
        for (int j = 0; j < i; ++j) {
            t = fmod_pos(fmod_pos(t - x[j], m, mi) * (double)inv[i * N + j], m, mi);
        }
        x[i] = t;
    }
}

// _negative: whether the mixed-radix number exceeds (M-1)/2, whose digits are half.
// _to_double_kernel's running sign (sgn += (sgn == 0) * ...) decides the same way:
// by the first digit from the top that differs from half's.
MODLIN_HD bool mr_negative(const double* x, const double* half, int N) {
    for (int i = N - 1; i >= 0; --i) {
        if (x[i] != half[i]) return x[i] > half[i];
    }
    return false;
}

// ------------------------------------------------------------------ CRT: exact doubles

// Bits of 0 < x < 2**32 (exact in float64: frexp's exponent), as _bit_length.
MODLIN_HD int bit_length32(unsigned long long x) {
    int ex;
    frexp((double)x, &ex);
    return ex;
}

// _round_limbs: value(limb[:nl]) * 2**-S rounded to nearest, ties to even, at the
// precision of the result (53 bits, fewer when subnormal). limb holds zeros up
// to index nl + 1 at least.
MODLIN_HD double round_limbs(const unsigned long long* limb, int nl, long long S) {
    int j = nl - 1;
    while (j >= 0 && limb[j] == 0) --j;
    if (j < 0) return 0.0;
    long long nb = 32LL * j + bit_length32(limb[j]);
    long long E = nb - 1 - S;
    long long keep = E >= -1022 ? 53 : E + 1075;
    if (keep < 0) return 0.0;
    bool sticky = false;
    unsigned long long top;
    if (nb <= 64) {
        top = j >= 1 ? (limb[0] | (limb[1] << 32)) : limb[0];
        top <<= (unsigned)(64 - nb);
    } else {
        long long lo = nb - 64;
        long long w = lo / 32;  // lo > 0: C's truncation is numba's floor here
        unsigned off = (unsigned)(lo % 32);
        top = (limb[w] >> off) | (limb[w + 1] << (32 - off));
        if (off) {
            top |= limb[w + 2] << (64 - off);
            sticky = (limb[w] & ((1ULL << off) - 1ULL)) != 0;
        }
        for (long long i = 0; i < w; ++i) sticky = sticky || limb[i] != 0;
    }
    if (keep == 0) {
        unsigned long long rest = top & 0x7FFFFFFFFFFFFFFFULL;
        return (rest != 0 || sticky) ? MODLIN_TWO_M1074 : 0.0;
    }
    unsigned drop = (unsigned)(64 - keep);
    unsigned long long q = top >> drop;
    unsigned long long rem = top & ((1ULL << drop) - 1ULL);
    unsigned long long halfway = 1ULL << (drop - 1);
    if (rem > halfway || (rem == halfway && (sticky || (q & 1ULL)))) q += 1ULL;
    return ldexp((double)q, (int)(nb - keep - S));
}

// _exact_entry: the digits' value (or, when neg, M minus it) in 32-bit limbs by
// Horner, then rounded once.
MODLIN_HD double exact_entry(const double* x, int N, bool neg, const long long* moduli,
                             int L, long long S) {
    unsigned long long limb[MODLIN_MAX_LIMBS];
    int nz = L + 2 < MODLIN_MAX_LIMBS ? L + 2 : MODLIN_MAX_LIMBS;
    for (int t = 0; t < nz; ++t) limb[t] = 0;
    int nl = 1;
    for (int i = N - 1; i >= 0; --i) {
        unsigned long long m = (unsigned long long)moduli[i];
        unsigned long long carry = (unsigned long long)x[i];
        if (neg) carry = m - 1ULL - carry + (unsigned long long)(i == 0);
        for (int t = 0; t < nl; ++t) {
            unsigned long long v = limb[t] * m + carry;
            limb[t] = v & 0xFFFFFFFFULL;
            carry = v >> 32;
        }
        if (carry) {
            limb[nl] = carry;
            ++nl;
        }
    }
    return round_limbs(limb, nl, S);
}

// _to_double_kernel for one entry with digits x: the sign, the magnitude by a
// double-double Horner (Dekker's split, TwoSum, FastTwoSum, in numba's order),
// the rounding-safety test, and the exact fallback for unsure or subnormal results.
MODLIN_HD double crt_double_entry(const double* x, int N, const long long* moduli,
                                  const double* mf, const double* half, int L, long long S) {
    bool ng = mr_negative(x, half, N);
    double g = (double)ng;
    double top = x[N - 1];
    double hi = g * (mf[N - 1] - 1.0 - 2.0 * top) + top + (double)(ng && N == 1);
    double lo = 0.0;
    for (int i = N - 2; i >= 0; --i) {
        double m = mf[i];
        double one = (double)(i == 0);
        double d = g * (m - 1.0 - 2.0 * x[i] + one) + x[i];
        double xh = hi;
        double t = 134217729.0 * xh;
        double x1 = t - (t - xh);
        double p1 = x1 * m;
        double p2 = (xh - x1) * m;
        double s = p1 + p2;
        double bb = s - p1;
        double err = (p1 - (s - bb)) + (p2 - bb);
        double q = err + lo * m + d;
        double h2 = s + q;
        lo = q - (h2 - s);
        hi = h2;
    }
    double rel = (double)(N + 2) * MODLIN_TWO_M100;
    double dd = 2.0 * rel * hi;
    bool unsure = (hi + (lo + dd) != hi) || (hi + (lo - dd) != hi);
    double v = ldexp(hi, (int)(-S));
    // `<=`: a value just below 2**-1022 is rounded to 53 bits and then again by ldexp to
    // the subnormal grid, and that second rounding can go up to exactly 2**-1022;
    // such entries (and all subnormal ones) are rebuilt exactly and rounded once
    if (unsure || (v <= 2.2250738585072014e-308 && hi != 0.0)) {
        v = exact_entry(x, N, ng, moduli, L, S);
    }
    return ng ? -v : v;
}

// ------------------------------------------------------------------ CRT: mod p

// _mulmod_small: s * m mod p for s < p <= 2**63, m < 2**26 (wrapping products).
MODLIN_HD unsigned long long mulmod_small(unsigned long long s, unsigned long long m,
                                          unsigned long long p, double invp) {
    double qf = (double)s * (double)m * invp - MODLIN_TWO_M20;
    unsigned long long q = qf > 0 ? (unsigned long long)qf : 0ULL;
    unsigned long long r = s * m - q * p;
    if (r >= p) r -= p;
    return r;
}

// _to_modp_kernel for one entry with digits x: Horner mod p from the top digit,
// then value - M mod p for a negative value.
MODLIN_HD unsigned long long crt_modp_entry(const double* x, int N, const long long* moduli,
                                            const double* half, unsigned long long p,
                                            unsigned long long m_mod_p, double invp) {
    unsigned long long s = 0;
    for (int i = N - 1; i >= 0; --i) {
        unsigned long long m = (unsigned long long)moduli[i];
        unsigned long long d = (unsigned long long)x[i];
        if (m > p) d %= p;
        unsigned long long t = mulmod_small(s, m, p, invp) + d;
        s = t - p * (unsigned long long)(t >= p);
    }
    if (mr_negative(x, half, N)) s = s >= m_mod_p ? s - m_mod_p : s + (p - m_mod_p);
    return s;
}


// ------------------------------------------------------------------ one entry of each kernel
//
// The kernels and the host harness both run these, one call per entry e (the
// kernels from a grid-stride loop, the harness from a plain loop), so that the
// CPU check covers everything a kernel does but the loop and the barrier.

// Per-modulus constants into shared memory (start = threadIdx.x, step = blockDim.x)
// or a host array (0, 1).
MODLIN_HD void load_res_consts(const int* moduli, int N, ResConst* kc, int start, int step) {
    for (int i = start; i < N; i += step) kc[i] = res_const(moduli[i]);
}

MODLIN_HD void load_crt_consts(const long long* moduli, const double* half, int N, double* mf,
                               double* minv, double* hf, int start, int step) {
    for (int i = start; i < N; i += step) {
        mf[i] = (double)moduli[i];
        minv[i] = 1.0 / mf[i];
        hf[i] = half[i];
    }
}

MODLIN_HD void balanced_words_at(const long long* x, long long n, long long p, int s, int u,
                                 double* words, long long e) {
    split_into<double>(mod_nonneg(x[e], p), p, s, u, words + e, n);
}

MODLIN_HD void mw_step_at(double* x, const double* t, double q1, double hi1, double lo1,
                          double scale, double q2, double hi2, double lo2, double qt, double hit,
                          double lot, long long e) {
    double y = step_elem(x[e], q1, hi1, lo1, scale, q2, hi2, lo2);
    if (t != nullptr) y += red_elem(t[e], qt, hit, lot);
    x[e] = y;
}

MODLIN_HD void mw_finalize_at(const double* x, const double* t, double q1, double hi1, double lo1,
                              double scale, double q2, double hi2, double lo2, double qt, double hit,
                              double lot, double q, double hi, double lo, long long p, long long* out,
                              long long e) {
    double y = step_elem(x[e], q1, hi1, lo1, scale, q2, hi2, lo2);
    if (t != nullptr) y += red_elem(t[e], qt, hit, lot);
    out[e] = finalize_elem(y, q, hi, lo, p);
}

// The split of x[e] at 2**32 does not depend on the modulus: done once for all N.
MODLIN_HD void ozaki_residues_at(const double* x, long long n, const ResConst* kc, int N,
                                 signed char* out, long long e) {
    Split32 h = split32(x[e]);
    for (int i = 0; i < N; ++i) out[i * n + e] = balance_i8(res_of(h, kc[i]), kc[i]);
}

MODLIN_HD void ozaki_twom_at(const double* xr, const double* xi, long long n, const ResConst* kc,
                             const int* roots, int N, signed char* plus, signed char* minus,
                             long long e) {
    Split32 hr = split32(xr[e]);
    Split32 hi = split32(xi[e]);
    for (int i = 0; i < N; ++i) {
        twom_elem(hr, hi, kc[i], (double)roots[i], plus + i * n + e, minus + i * n + e);
    }
}

MODLIN_HD void int_residues_at(const long long* x, long long n, const int* moduli, int N,
                               signed char* out, long long e) {
    long long v = x[e];
    for (int i = 0; i < N; ++i) out[i * n + e] = (signed char)balanced_residue(v, moduli[i]);
}

MODLIN_HD void reduce_i32_at(const int* X, int m, unsigned char* out, long long e) {
    out[e] = (unsigned char)mod_nonneg(X[e], m);
}

MODLIN_HD void twom_combine_at(const int* X, const int* Y, int m, int inv2, int inv2s,
                               unsigned char* re, unsigned char* im, long long e) {
    twom_combine_elem(X[e], Y[e], m, inv2, inv2s, re + e, im + e);
}

// x: scratch for the N digits (MODLIN_MAX_MODULI doubles).
MODLIN_HD void crt_to_double_at(const unsigned char* res, int N, long long E, long long ncols,
                                const long long* moduli, const long long* inv, const double* mf,
                                const double* minv, const double* hf, int L, const long long* sa,
                                const long long* sb, double* out, double* x, long long e) {
    garner_digits(res, E, e, N, mf, minv, inv, x);
    long long S = sa[e / ncols] + sb[e % ncols];
    out[e] = crt_double_entry(x, N, moduli, mf, hf, L, S);
}

// The result is below p <= 2**63: it fits the long long output.
MODLIN_HD void crt_to_modp_at(const unsigned char* res, int N, long long E, const long long* moduli,
                              const long long* inv, const double* mf, const double* minv,
                              const double* hf, unsigned long long p, unsigned long long m_mod_p,
                              double invp, long long* out, double* x, long long e) {
    garner_digits(res, E, e, N, mf, minv, inv, x);
    out[e] = (long long)crt_modp_entry(x, N, moduli, hf, p, m_mod_p, invp);
}

}  // namespace modlin

#endif  // MODLIN_ELEM_CUH
