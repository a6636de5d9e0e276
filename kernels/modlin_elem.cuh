// Per-element arithmetic of modlin's GPU kernels, shared by the CUDA kernels
// (kernels/modlin_kernels.cu) and by the host harness that checks them on the CPU
// (tests/kernels_harness.cu) against the numba kernels and Python's integers.
//
// The floating-point steps (the multiword reductions, the quantisation, the bounds of
// stage (a)) repeat their numba counterparts operation for operation: the exactness
// proofs in modlin/_modular.py and _quantize.py bound the rounding of exactly that
// sequence. Compile with --fmad=false (and a host compiler that does not contract
// either): a fused multiply-add rounds once where the CPU rounds twice. Residues,
// reductions and the CRT are integer arithmetic with unique results.
//
// The code is plain C++ that NVRTC accepts: no standard headers on the device
// side (NVRTC has rint, floor, ldexp and frexp built in), only long long and
// unsigned long long as fixed-width types (64 bits on every CUDA platform).
#ifndef MODLIN_ELEM_CUH
#define MODLIN_ELEM_CUH

#ifndef __CUDACC_RTC__
#include <cmath>
#include <cstring>
#endif

#define MODLIN_HD __host__ __device__ inline

// Per-modulus constants live in shared memory: at most 64 moduli (Ozaki's bases), and
// M of at most 16 32-bit limbs (M < 2**512), the CRT kernels' template range.
#define MODLIN_MAX_MODULI 64
#define MODLIN_MAX_LIMBS 16

// Powers of two, each the exact double, in decimal: hexadecimal floating literals
// need C++17 and the NVRTC dialect is the caller's choice.
#define MODLIN_TWO_32 4294967296.0
#define MODLIN_TWO_M20 9.5367431640625e-07
#define MODLIN_TWO_M32 2.3283064365386963e-10
#define MODLIN_TWO_M1074 4.9406564584124654e-324
#define MODLIN_DBL_MAX 1.7976931348623157e308

namespace modlin {

// ------------------------------------------------------------------ integer primitives
//
// No 64-bit division or remainder anywhere on the device: PTX has no instruction for
// them, and nvcc calls a software routine of about 70 instructions (rem.s64 on an int32
// GEMM output cost reduce_i32_u8 0.53 ms per modulus at n = 8192 on an H200, against a
// 0.08 ms traffic floor). Every reduction is a Barrett reduction by a precomputed
// reciprocal: high halves of products (mul.hi), multiplications and one conditional
// subtraction. tests/test_kernels.py checks the PTX for div/rem on 64 bits.

MODLIN_HD unsigned mulhi32(unsigned a, unsigned b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (unsigned)(((unsigned long long)a * b) >> 32);
#endif
}

MODLIN_HD unsigned long long mulhi64(unsigned long long a, unsigned long long b) {
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
#endif
}

// A modulus 2 <= m <= 2**16 and the constants of its reductions, one row of eight
// uint32 in the tables modlin/_cuda.py makes (small_table):
//   mu = floor(2**32 / m); c32 = 2**32 mod m; c31 = -2**31 mod m; c63 = -2**63 mod m;
//   half = (m - 1) / 2 (residues above it are negative when balanced); root: a square
//   root of -1 mod m (2M's moduli) or 0; y: the CRT weight ((M / m)**-1 mod m).
struct Small {
    unsigned m, mu, c32, c31, c63, half, root, y;
};

MODLIN_HD Small load_small(const unsigned* t, int i) {
    const unsigned* r = t + 8 * i;
    Small s;
    s.m = r[0];
    s.mu = r[1];
    s.c32 = r[2];
    s.c31 = r[3];
    s.c63 = r[4];
    s.half = r[5];
    s.root = r[6];
    s.y = r[7];
    return s;
}

// x mod m for any uint32 x. With mu = floor(2**32 / m) = 2**32 / m - d (0 <= d < 1),
// q = floor(x mu / 2**32) > x / m - x / 2**32 - 1 > x / m - 1... precisely q is
// floor(x / m) or one less, so x - q m lies in [0, 2m): one subtraction.
MODLIN_HD unsigned mod_u32(unsigned x, const Small& s) {
    unsigned r = x - mulhi32(x, s.mu) * s.m;
    return r >= s.m ? r - s.m : r;
}

// a + b mod m for a, b in [0, m).
MODLIN_HD unsigned add_mod(unsigned a, unsigned b, const Small& s) {
    unsigned r = a + b;
    return r >= s.m ? r - s.m : r;
}

// a - b mod m for a, b in [0, m).
MODLIN_HD unsigned sub_mod(unsigned a, unsigned b, const Small& s) {
    return a >= b ? a - b : a + (s.m - b);
}

// X mod m in [0, m) for any int32 X: X + 2**31 is a uint32 (the sign bit flipped),
// and c31 = -2**31 mod m takes the offset back.
MODLIN_HD unsigned mod_i32(int X, const Small& s) {
    return add_mod(mod_u32((unsigned)X ^ 0x80000000u, s), s.c31, s);
}

// x mod m in [0, m) for any int64 x: x + 2**63 = hi 2**32 + lo as two uint32, folded
// by c32 = 2**32 mod m ((m-1)**2 + (m-1) < 2**32 for m <= 2**16), and c63 = -2**63 mod m.
MODLIN_HD unsigned mod_i64(long long x, const Small& s) {
    unsigned long long u = (unsigned long long)x ^ 0x8000000000000000ULL;
    unsigned hi = mod_u32((unsigned)(u >> 32), s), lo = mod_u32((unsigned)u, s);
    return add_mod(mod_u32(hi * s.c32 + lo, s), s.c63, s);
}

// v mod m in [0, m) for an integer-valued double |v| < 2**85: v = hi 2**32 + lo exactly
// with hi = floor(v 2**-32), |hi| < 2**53 (an int64), and 0 <= lo < 2**32 (a uint32):
// the split of _quantize._folded, reduced in integers instead of float64 fmod.
MODLIN_HD unsigned mod_f64(double v, const Small& s) {
    double hi = floor(v * MODLIN_TWO_M32);
    double lo = v - hi * MODLIN_TWO_32;
    unsigned h = mod_i64((long long)hi, s);
    return mod_u32(mod_u32(h * s.c32, s) + mod_u32((unsigned)lo, s), s);
}

// The balanced int8 residue r - m (r > half) of a residue r in [0, m <= 256).
MODLIN_HD signed char balance_i8(unsigned r, const Small& s) {
    return (signed char)((int)r - (int)s.m * (int)(r > s.half));
}

// A modulus 2 <= p < 2**63 with mu = floor(2**64 / p) and c63 = -2**63 mod p (as
// modlin/_cuda.py's wide_constants gives them): x mod p for any int64 x. q = mulhi(u, mu)
// is floor(u / p) or one less (mu > 2**64 / p - 1, u < 2**64), so u - q p < 2p < 2**64.
MODLIN_HD unsigned long long mod_wide(long long x, unsigned long long p, unsigned long long mu,
                                      unsigned long long c63) {
    unsigned long long u = (unsigned long long)x ^ 0x8000000000000000ULL;
    unsigned long long r = u - mulhi64(u, mu) * p;
    if (r >= p) r -= p;
    r += c63;  // both below p < 2**63: no wraparound
    return r >= p ? r - p : r;
}

// ------------------------------------------------------------------ word split

// _split_into: the u balanced base-2**s words of r, for r in [0, p).
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

// ------------------------------------------------------------------ Ozaki: stage (a), line statistics
//
// What _quantize._maxima_kernel and _stats_kernel compute per line (a row of A or a column
// of B), split in per-entry steps: maxima and exact integer sums, so that the order in
// which a kernel's threads combine them does not change a bit.

// An entry of a line into its maximum finite |part| and its Inf/NaN flag.
MODLIN_HD void stat_max(double v, double* mx, bool* bad) {
    double a = fabs(v);
    if (a <= MODLIN_DBL_MAX) {  // finite (NaN compares false)
        *mx = a > *mx ? a : *mx;
    } else {
        *bad = true;
    }
}

// Trailing zero bits of a nonzero uint64.
MODLIN_HD int ctz64(unsigned long long x) {
#ifdef __CUDA_ARCH__
    return __ffsll((long long)x) - 1;
#else
    return __builtin_ctzll(x);
#endif
}

// The exponent of the lowest set bit of a nonzero finite double (v is an odd multiple of
// 2**lsb): from its bits, the value _stats_kernel takes from frexp.
MODLIN_HD long long lsb_exponent(double v) {
#ifdef __CUDA_ARCH__
    unsigned long long b = (unsigned long long)__double_as_longlong(v);
#else
    unsigned long long b;
    memcpy(&b, &v, 8);
#endif
    long long e = (long long)((b >> 52) & 2047ULL);
    unsigned long long mant = b & 0xFFFFFFFFFFFFFULL;
    if (e == 0) return -1074 + ctz64(mant);  // subnormal
    return e - 1075 + ctz64(mant | 0x10000000000000ULL);
}

// One part v of an entry of a good line whose maximum has exponent ex: its share
// max(ceil(|v| f1 f2), 1) of the entry's bound (f1 f2 = 2**(T_BITS - ex) as two exact
// factors, as _layout makes them), and the bits need = ex - lsb(v) it takes to be exact.
MODLIN_HD void stat_entry(double v, long long ex, double f1, double f2, double* bound, long long* need) {
    if (v != 0.0) {
        double c = ceil(fabs(v) * f1 * f2);
        *bound += c > 1.0 ? c : 1.0;
        long long n = ex - lsb_exponent(v);
        *need = n > *need ? n : *need;
    }
}

// The factors 2**(s//2), 2**(s - s//2) of s = T_BITS - ex.
MODLIN_HD void stat_factors(long long ex, int tbits, double* f1, double* f2) {
    long long s = tbits - ex;
    long long h = s >> 1;
    *f1 = ldexp(1.0, (int)h);
    *f2 = ldexp(1.0, (int)(s - h));
}

// frexp's exponent of a finite double (0 for 0): max < 2**ex.
MODLIN_HD long long exponent_of(double mx) {
    int e;
    frexp(mx, &e);
    return e;
}

// _ceil_log2 of a non-negative integer-valued double: ceil(log2 x), 0 for x <= 1.
MODLIN_HD long long ceil_log2(double x) {
    double y = x - 1.0;
    return exponent_of(y > 0.0 ? y : 0.0);
}

// Lost entries, counted in stage (a) before the shifts are known: a nonzero part x of a line
// whose largest has exponent ex rounds to zero under the shift s = g - ex exactly when
// |x| <= 2**(ex - g - 1), that is when its gap d = ex - e(x) (frexp's exponents) exceeds g,
// or equals g with x a power of two (a tie, which rounds to even: 0). Per line, the counts of
// gaps from each d up (S[d], d < MODLIN_GAPS, wider gaps in the last) and of powers of two at
// each gap (P[d]) give the lost entries of any g <= G_MAX: S[g + 1] + P[g].
#define MODLIN_GAPS 86  // G_MAX + 2

MODLIN_HD void gap_of(double v, long long ex, int* bin, bool* power) {
    int e;
    double f = frexp(fabs(v), &e);
    long long d = ex - e;
    *bin = (int)(d < MODLIN_GAPS - 1 ? d : MODLIN_GAPS - 1);
    *power = f == 0.5;
}

// A line's counts of gaps (per bin, hs) written as S (suffix sums) then P.
MODLIN_HD void write_gaps(const unsigned* hs, unsigned* out) {
    unsigned total = 0;
    for (int d = MODLIN_GAPS - 1; d >= 0; --d) {
        total += hs[d];
        out[d] = total;
        out[MODLIN_GAPS + d] = hs[MODLIN_GAPS + d];
    }
}

// lost = S[g + 1] + P[g] of a line's counts (hist: S then P, MODLIN_GAPS each).
MODLIN_HD long long lost_of(const unsigned* hist, long long g) {
    return (long long)hist[g + 1] + (long long)hist[MODLIN_GAPS + g];
}

// _quantize.fast_exponents per line: the cap min(G_MAX, need), c = ceil(log2 ||bar||) =
// (ceil_log2(sq) + 1) / 2, the split of lb + 2 T_BITS into (ha, hb) given the most each
// side can use, and a line's bits min(cap, ha - c).
MODLIN_HD long long fast_cap(long long need, int gmax) { return need < gmax ? need : gmax; }

MODLIN_HD long long fast_c(double sq) { return (ceil_log2(sq) + 1) >> 1; }  // non-negative: >> 1 is // 2

MODLIN_HD void fast_split(long long lb, int tbits, long long use_a, long long use_b, long long* ha, long long* hb) {
    long long total = lb + 2LL * tbits;
    long long a = total >> 1;  // total > 0
    long long b = total - a;
    if (use_a < a) {
        a = use_a;
        b = total - use_a;
    } else if (use_b < b) {
        a = total - use_b;
        b = use_b;
    }
    *ha = a;
    *hb = b;
}

MODLIN_HD long long fast_bits(long long need, double sq, long long half, int gmax) {
    long long cap = fast_cap(need, gmax), v = half - fast_c(sq);
    return cap < v ? cap : v;
}

// One more in a count that other threads may be counting into too (shared memory on the
// device: an atomic add; the host harness counts alone).
MODLIN_HD void count_one(unsigned* c) {
#ifdef __CUDA_ARCH__
    atomicAdd(c, 1u);
#else
    *c += 1u;
#endif
}

// Stage (a)'s second reading of one entry of a good line (its parts at e0[0] and, with two
// parts, e0[off1]): its share of the bound, its exact bits, and (bins not NULL) its gaps.
MODLIN_HD double stat_parts(const double* e0, long long off1, int nparts, long long ex, double f1, double f2,
                            long long* need, unsigned* bins) {
    double bound = 0.0;
    for (int p = 0; p < nparts; ++p) {
        double v = e0[p ? off1 : 0];
        stat_entry(v, ex, f1, f2, &bound, need);
        if (bins != nullptr && v != 0.0) {
            int bin;
            bool power;
            gap_of(v, ex, &bin, &power);
            count_one(bins + bin);
            if (power) count_one(bins + MODLIN_GAPS + bin);
        }
    }
    return bound;
}

// fast_scales' accumulation over lines: least bits of a row and a column, whether any holds
// Inf or NaN, the largest exponents, the lost entries.
struct FastSummary {
    long long min_g, min_h, any_a, any_b, max_ea, max_eb, lost_a, lost_b;
};

MODLIN_HD FastSummary fast_summary() {
    FastSummary f;
    f.min_g = f.min_h = 1LL << 62;
    f.any_a = f.any_b = f.max_ea = f.max_eb = f.lost_a = f.lost_b = 0;
    return f;
}

// Row i of A: its bits g (symmetric: min(g, h) of the same line, written to sb too), its
// shift (sa, sb NULL: not wanted), and its share of the summary; the bits themselves,
// before that min, into g_out and h_out when given ("accurate" mode starts from them).
MODLIN_HD void fast_row(long long i, const long long* ex_a, const long long* need_a, const double* sq_a,
                        const unsigned char* bad_a, const long long* ex_b, const long long* need_b, const double* sq_b,
                        int symmetric, long long ha, long long hb, int tbits, int gmax, const unsigned* hist_a,
                        long long* sa, long long* sb, long long* g_out, long long* h_out, FastSummary* f) {
    long long g = fast_bits(need_a[i], sq_a[i], ha, gmax);
    f->min_g = g < f->min_g ? g : f->min_g;
    if (g_out != nullptr) g_out[i] = g;
    if (symmetric) {
        long long h = fast_bits(need_b[i], sq_b[i], hb, gmax);
        f->min_h = h < f->min_h ? h : f->min_h;
        if (h_out != nullptr) h_out[i] = h;
        g = h < g ? h : g;
        if (sb != nullptr) sb[i] = g - ex_b[i];
    }
    if (sa != nullptr) sa[i] = g - ex_a[i];
    f->max_ea = ex_a[i] > f->max_ea ? ex_a[i] : f->max_ea;
    f->any_a |= bad_a[i];
    if (hist_a != nullptr && g >= tbits) f->lost_a += lost_of(hist_a + i * 2 * MODLIN_GAPS, g);
}

// Column j of B (not symmetric): its bits h, its shift, its share of the summary.
MODLIN_HD void fast_col(long long j, const long long* ex_b, const long long* need_b, const double* sq_b,
                        const unsigned char* bad_b, long long hb, int tbits, int gmax, const unsigned* hist_b,
                        long long* sb, long long* h_out, FastSummary* f) {
    long long h = fast_bits(need_b[j], sq_b[j], hb, gmax);
    f->min_h = h < f->min_h ? h : f->min_h;
    if (h_out != nullptr) h_out[j] = h;
    if (sb != nullptr) sb[j] = h - ex_b[j];
    f->max_eb = ex_b[j] > f->max_eb ? ex_b[j] : f->max_eb;
    f->any_b |= bad_b[j];
    if (hist_b != nullptr && h >= tbits) f->lost_b += lost_of(hist_b + j * 2 * MODLIN_GAPS, h);
}

// A symmetric product's B is A: the columns' share is the rows'.
MODLIN_HD void fast_mirror(FastSummary* f) {
    f->max_eb = f->max_ea;
    f->any_b = f->any_a;
    f->lost_b = f->lost_a;
}

// "accurate" mode (_quantize.accurate_exponents): the room g_i + h_j may take at (i, j),
// from code = ceil(log2 w_ij) of the bound product (255: w_ij = 0, no constraint).
MODLIN_HD long long acc_room(unsigned char code, long long top, int gmax) {
    return code != 255 ? top - (long long)code : 4LL * gmax;
}

// A row's new bits from the least slack over its columns (the half of it on the first pass,
// all of it on the last): max(g, min(cap, g + slack // 2)) or max(g, min(cap, slack)).
MODLIN_HD long long acc_row_bits(long long g, long long cap, long long least, bool first) {
    long long v = first ? g + (least >> 1) : least;  // >> 1 on a signed value: floor division by 2
    v = cap < v ? cap : v;
    return g > v ? g : v;
}

// The shifts and the summary of given bits g (rows) and h (columns): fast_row / fast_col
// with the bits known (the check of the least bits is the fast pass's, as on the CPU).
MODLIN_HD void bits_row(long long i, const long long* g, const long long* h, const long long* ex_a, const long long* ex_b,
                        const unsigned char* bad_a, int symmetric, int tbits, const unsigned* hist_a, long long* sa,
                        long long* sb, FastSummary* f) {
    long long gi = g[i];
    if (symmetric) {
        gi = h[i] < gi ? h[i] : gi;
        sb[i] = gi - ex_b[i];
    }
    sa[i] = gi - ex_a[i];
    f->max_ea = ex_a[i] > f->max_ea ? ex_a[i] : f->max_ea;
    f->any_a |= bad_a[i];
    if (hist_a != nullptr && gi >= tbits) f->lost_a += lost_of(hist_a + i * 2 * MODLIN_GAPS, gi);
}

MODLIN_HD void bits_col(long long j, const long long* h, const long long* ex_b, const unsigned char* bad_b, int tbits,
                        const unsigned* hist_b, long long* sb, FastSummary* f) {
    sb[j] = h[j] - ex_b[j];
    f->max_eb = ex_b[j] > f->max_eb ? ex_b[j] : f->max_eb;
    f->any_b |= bad_b[j];
    if (hist_b != nullptr && h[j] >= tbits) f->lost_b += lost_of(hist_b + j * 2 * MODLIN_GAPS, h[j]);
}

// ------------------------------------------------------------------ Ozaki: quantisation

// rint(x 2**s) of an entry of a line with shift s, as _quantize._load computes it: by the
// two factors 2**(s//2) and 2**(s - s//2) (each exact: |s| <= 1157, while 2**s alone
// may overflow or be subnormal), 0 on a line holding Inf or NaN. The factors are made
// here from the shift (ldexp of 1 is exact) rather than read from arrays the host would
// have to make first.
MODLIN_HD double quantize(double x, long long s, bool bad) {
    if (bad) return 0.0;
    long long h = s >> 1;  // an arithmetic shift: floor(s / 2), as Python's s // 2
    return rint(x * ldexp(1.0, (int)h) * ldexp(1.0, (int)(s - h)));
}

// The value the residue kernels read at (r, c) of a panel of R rows whose part has
// `len` columns (zero past them: the odd half of real SYRK's halves), entry x[r ldx +
// off + c step], quantised with the shift of its row (by_cols = 0) or column. (The entries
// that round to zero are counted in stage (a), from each line's gaps: lost_of.)
MODLIN_HD double panel_value(const double* x, long long ldx, long long R, long long len, long long off,
                             long long step, const long long* shift, const unsigned char* bad, int by_cols,
                             long long r, long long c) {
    if (r >= R || c >= len) return 0.0;
    long long l = by_cols ? c : r;
    double v = x[r * ldx + off + c * step];
    return quantize(v, shift[l], bad[l] != 0);
}

// Balanced int8 residues of an integer-valued double |q| < 2**85 modulo each of N
// moduli, out[i plane + pos].
MODLIN_HD void store_residues(double q, const unsigned* table, int N, signed char* out, long long plane,
                              long long pos) {
    for (int i = 0; i < N; ++i) {
        Small s = load_small(table, i);
        out[i * plane + pos] = balance_i8(mod_f64(q, s), s);
    }
}

// 2M's images qr + s qi and qr - s qi (balanced int8) modulo each modulus, s its root.
MODLIN_HD void store_twom(double qr, double qi, const unsigned* table, int N, signed char* plus,
                          signed char* minus, long long plane, long long pos) {
    for (int i = 0; i < N; ++i) {
        Small s = load_small(table, i);
        unsigned r = mod_f64(qr, s);
        unsigned t = mod_u32(mod_f64(qi, s) * s.root, s);
        plus[i * plane + pos] = balance_i8(add_mod(r, t, s), s);
        minus[i * plane + pos] = balance_i8(sub_mod(r, t, s), s);
    }
}

// ------------------------------------------------------------------ integers mod p

// The balanced residue in [-(p/2), (p-1)/2] of any int64 x modulo p < 2**63 (for even p
// one short of symmetric, as _lift_kernel takes it).
MODLIN_HD long long balanced_wide(unsigned long long v, unsigned long long p) {
    return (long long)v - (long long)p * (long long)(v > (p - 1) / 2);
}

// That of the entry (r, c) of an R x C matrix (row stride ldx, column stride ldc: 0 for a
// broadcast axis), 0 outside it.
MODLIN_HD long long int_value(const long long* x, long long ldx, long long ldc, long long R, long long C,
                              unsigned long long p, unsigned long long mu, unsigned long long c63, long long r,
                              long long c) {
    if (r >= R || c >= C) return 0;
    return balanced_wide(mod_wide(x[r * ldx + c * ldc], p, mu, c63), p);
}

// x c mod m in [0, m) for 0 <= x, c < m < 2**52 (minv = 1/m): _modular._gpu_mulmod's float
// quotient and the remainder exact in wrapping 64-bit products. x and c are exact doubles
// and the two roundings and 1/m's err by at most 3 2**-53 relatively, so the quotient, below
// 2**52, is off by less than 1.5 before truncation: r lies in [-2m, 3m), far inside int64,
// and two conditional steps each way bring it into [0, m) (written out: a loop would
// become a 64-bit division).
MODLIN_HD long long mulmod52(long long x, long long c, long long m, double minv) {
    long long q = (long long)((double)x * (double)c * minv);
    long long r = (long long)((unsigned long long)x * (unsigned long long)c - (unsigned long long)q *
                              (unsigned long long)m);
    r += m * (long long)(r < 0);
    r += m * (long long)(r < 0);
    r -= m * (long long)(r >= m);
    r -= m * (long long)(r >= m);
    return r;
}

// 2M's images re + s im and re - s im modulo m < 2**52 (balanced) of the entry (r, c) of a
// Gaussian matrix given by its int64 parts (any values; each with its strides; im NULL:
// zero), 0 outside the R x C matrix.
MODLIN_HD void gauss_images(const long long* re, long long ld_re, long long lc_re, const long long* im, long long ld_im,
                            long long lc_im, long long R, long long C, unsigned long long m, unsigned long long mu,
                            unsigned long long c63, long long s, double minv, long long r, long long c, long long* plus,
                            long long* minus) {
    if (r >= R || c >= C) {
        *plus = *minus = 0;
        return;
    }
    long long a = (long long)mod_wide(re[r * ld_re + c * lc_re], m, mu, c63);
    long long t = im == nullptr ? 0 : mulmod52((long long)mod_wide(im[r * ld_im + c * lc_im], m, mu, c63), s,
                                                (long long)m, minv);
    long long u = a + t, v = a - t;  // both below 2**53 in magnitude
    u -= (long long)m * (long long)(u >= (long long)m);
    v += (long long)m * (long long)(v < 0);
    *plus = balanced_wide((unsigned long long)u, m);
    *minus = balanced_wide((unsigned long long)v, m);
}

MODLIN_HD void store_int_residues(long long v, const unsigned* table, int N, signed char* out, long long plane,
                                  long long pos) {
    for (int i = 0; i < N; ++i) {
        Small s = load_small(table, i);
        out[i * plane + pos] = balance_i8(mod_i64(v, s), s);
    }
}

// ------------------------------------------------------------------ int8 engine post-processing

// An int32 GEMM output (any value) into [0, m); with acc, added to what res holds
// (the sum over k-panels too long for one int32 sum).
MODLIN_HD void reduce_entry(int X, const Small& s, bool acc, unsigned char* res) {
    unsigned r = mod_i32(X, s);
    *res = (unsigned char)(acc ? add_mod(*res, r, s) : r);
}

// reduce_entry of two GEMM outputs at once (2M's two products modulo one RNS modulus).
MODLIN_HD void reduce_pair(int X, int Y, const Small& s, bool acc, unsigned char* rx, unsigned char* ry) {
    reduce_entry(X, s, acc, rx);
    reduce_entry(Y, s, acc, ry);
}

// 2M's post-processing of the two int32 products: re = (X + Y) inv2, im = (X - Y) inv2s
// mod m (inv2 = 2**-1, inv2s = (2s)**-1 mod m); with acc, added to re and im.
MODLIN_HD void combine_entry(int X, int Y, const Small& s, unsigned inv2, unsigned inv2s, bool acc,
                             unsigned char* re, unsigned char* im) {
    unsigned x = mod_i32(X, s), y = mod_i32(Y, s);
    unsigned a = mod_u32(add_mod(x, y, s) * inv2, s), b = mod_u32(sub_mod(x, y, s) * inv2s, s);
    *re = (unsigned char)(acc ? add_mod(*re, a, s) : a);
    *im = (unsigned char)(acc ? add_mod(*im, b, s) : b);
}

// Real SYRK's and HERK's 2M combination of two products' residues x, y (in [0, m)) of one
// modulus: re = (x + y)/2 and im = (x - y)/(2s) mod m (inv2s = (2s)**-1 mod m).
MODLIN_HD void sym_combine(unsigned x, unsigned y, const Small& s, unsigned inv2s, unsigned* re, unsigned* im) {
    *re = mod_u32(add_mod(x, y, s) * ((s.m + 1) >> 1), s);
    *im = mod_u32(sub_mod(x, y, s) * inv2s, s);
}

// ------------------------------------------------------------------ CRT in O(N), exact
//
// C = sum_i d_i (M / m_i) - q M with d_i = r_i y_i mod m_i and q = floor(sum_i d_i / m_i):
// the textbook CRT, accumulated exactly in 32-bit limbs. N L multiply-adds of 32 x 32 ->
// 64 bits (Garner takes N(N-1)/2 modular steps), with the limbs in registers: L, the
// limbs of M, is a template parameter (the kernels switch on it), so every limb index is
// a constant after unrolling. q comes from a float64 sum of N terms d_i / m_i in [0, 1),
// within N**2 2**-53 of the true value: floor gives q or q +- 1, which one correction
// step repairs exactly, so no rounding ever depends on a float estimate.
//
// Layout of `limbs` (uint32, L per row): rows 0..N-1 the M / m_i, row N M, row N+1 (M-1)/2.

template <int L>
MODLIN_HD bool limbs_ge(const unsigned* a, const unsigned* b) {
    bool ge = true, decided = false;
#pragma unroll
    for (int j = L - 1; j >= 0; --j) {
        if (!decided && a[j] != b[j]) {
            ge = a[j] > b[j];
            decided = true;
        }
    }
    return ge;
}

// a += sign M (sign +-1), returning the carry (+1) or borrow (-1) out of the top limb.
template <int L>
MODLIN_HD long long limbs_add(unsigned* a, const unsigned* m, long long sign) {
    long long carry = 0;
#pragma unroll
    for (int j = 0; j < L; ++j) {
        long long v = (long long)a[j] + sign * (long long)m[j] + carry;
        a[j] = (unsigned)v;
        carry = v >> 32;  // arithmetic: floor(v / 2**32)
    }
    return carry;
}

// The residues res[i plane + pos] (in [0, m_i)) -> C in [0, M) as L limbs c; returns
// whether C > (M - 1) / 2, i.e. whether the balanced value C - M is the one meant.
template <int L>
MODLIN_HD bool crt_limbs(const unsigned char* res, long long plane, long long pos, int N, const unsigned* table,
                         const unsigned* limbs, const double* minv, unsigned* c) {
    unsigned long long acc[L];
#pragma unroll
    for (int j = 0; j < L; ++j) acc[j] = 0;
    double f = 0.0;
    for (int i = 0; i < N; ++i) {
        Small s = load_small(table, i);
        unsigned d = mod_u32((unsigned)res[i * plane + pos] * s.y, s);
        f += (double)d * minv[i];
        const unsigned* w = limbs + i * L;
#pragma unroll
        for (int j = 0; j < L; ++j) acc[j] += (unsigned long long)d * w[j];  // < 64 * 2**48
    }
    long long q = (long long)floor(f);
    const unsigned* M = limbs + N * L;
    long long carry = 0;
#pragma unroll
    for (int j = 0; j < L; ++j) {
        long long v = (long long)acc[j] - q * (long long)M[j] + carry;
        c[j] = (unsigned)v;
        carry = v >> 32;
    }
    // carry is what lies above the L limbs: C in [-M, 2M) before the correction
    if (carry < 0) {
        limbs_add<L>(c, M, 1);
    } else if (carry > 0 || limbs_ge<L>(c, M)) {
        limbs_add<L>(c, M, -1);
    }
    return !limbs_ge<L>(limbs + (N + 1) * L, c);  // (M - 1) / 2 < C
}

// Bits of 0 < x < 2**32 (exact in float64: frexp's exponent), as _bit_length.
MODLIN_HD int bit_length32(unsigned x) {
    int ex;
    frexp((double)x, &ex);
    return ex;
}

// value(c) 2**-S rounded to nearest, ties to even, at the precision of the result (53
// bits, fewer when subnormal; Inf past the largest double): _round_limbs with the top
// 64 bits gathered by constant indices (the limbs stay in registers).
template <int L>
MODLIN_HD double round_limbs(const unsigned* c, long long S) {
    int j = -1;
#pragma unroll
    for (int t = 0; t < L; ++t) {
        if (c[t] != 0) j = t;
    }
    if (j < 0) return 0.0;
    unsigned long long w2 = 0, w1 = 0, w0 = 0;
    bool sticky = false;
#pragma unroll
    for (int t = 0; t < L; ++t) {
        if (t == j) w2 = c[t];
        if (t == j - 1) w1 = c[t];
        if (t == j - 2) w0 = c[t];
        if (t < j - 2) sticky = sticky || c[t] != 0;
    }
    int bl = bit_length32((unsigned)w2);  // 1..32
    long long nb = 32LL * j + bl;
    // the top 64 bits of the value (its bits below them, when any, in sticky)
    unsigned long long top = (w2 << (64 - bl)) | (w1 << (32 - bl)) | (w0 >> bl);
    sticky = sticky || (w0 & ((1ULL << bl) - 1ULL)) != 0;
    long long E = nb - 1 - S;
    long long keep = E >= -1022 ? 53 : E + 1075;
    if (keep < 0) return 0.0;
    if (keep == 0) {
        unsigned long long rest = top & 0x7FFFFFFFFFFFFFFFULL;
        return (rest != 0 || sticky) ? MODLIN_TWO_M1074 : 0.0;
    }
    unsigned drop = (unsigned)(64 - keep);
    unsigned long long qv = top >> drop;
    unsigned long long rem = top & ((1ULL << drop) - 1ULL);
    unsigned long long halfway = 1ULL << (drop - 1);
    if (rem > halfway || (rem == halfway && (sticky || (qv & 1ULL)))) qv += 1ULL;
    return ldexp((double)qv, (int)(nb - keep - S));
}

// The correctly rounded double of the balanced integer C' whose residues are res[i plane +
// pos], times 2**-S (a negative value's magnitude M - C rounded, then negated: -0.0
// where it rounds to zero, as _to_double_kernel gives).
template <int L>
MODLIN_HD double crt_double(const unsigned char* res, long long plane, long long pos, int N, const unsigned* table,
                            const unsigned* limbs, const double* minv, long long S) {
    unsigned c[L];
    bool neg = crt_limbs<L>(res, plane, pos, N, table, limbs, minv, c);
    if (neg) {  // c <- M - c
        const unsigned* M = limbs + N * L;
        long long borrow = 0;
#pragma unroll
        for (int j = 0; j < L; ++j) {
            long long v = (long long)M[j] - (long long)c[j] + borrow;
            c[j] = (unsigned)v;
            borrow = v >> 32;
        }
    }
    double v = round_limbs<L>(c, S);
    return neg ? -v : v;
}

// crt_to_double_u8 at (r, c): the real part (res) and, with res_im, the imaginary one, each
// times 2**-(sa[r] + sb[c]), into out[r ldo + c ostep] and the double after it.
template <int L>
MODLIN_HD void crt_double_at(const unsigned char* res, const unsigned char* res_im, long long plane, long long r,
                             long long c, long long C, int N, const unsigned* table, const unsigned* limbs,
                             const double* minv, const long long* sa, const long long* sb, double* out, long long ldo,
                             long long ostep) {
    long long S = sa[r] + sb[c];
    double* o = out + r * ldo + c * ostep;
    o[0] = crt_double<L>(res, plane, r * C + c, N, table, limbs, minv, S);
    if (res_im != nullptr) o[1] = crt_double<L>(res_im, plane, r * C + c, N, table, limbs, minv, S);
}

// L, the limbs of M, as a constant K in BODY: one instantiation of the CRT per case
// (the kernels and the host harness switch alike).
#define MODLIN_SWITCH_L(L, BODY)            \
    switch (L) {                            \
        case 1: { constexpr int K = 1; BODY; } break;   \
        case 2: { constexpr int K = 2; BODY; } break;   \
        case 3: { constexpr int K = 3; BODY; } break;   \
        case 4: { constexpr int K = 4; BODY; } break;   \
        case 5: { constexpr int K = 5; BODY; } break;   \
        case 6: { constexpr int K = 6; BODY; } break;   \
        case 7: { constexpr int K = 7; BODY; } break;   \
        case 8: { constexpr int K = 8; BODY; } break;   \
        case 9: { constexpr int K = 9; BODY; } break;   \
        case 10: { constexpr int K = 10; BODY; } break; \
        case 11: { constexpr int K = 11; BODY; } break; \
        case 12: { constexpr int K = 12; BODY; } break; \
        case 13: { constexpr int K = 13; BODY; } break; \
        case 14: { constexpr int K = 14; BODY; } break; \
        case 15: { constexpr int K = 15; BODY; } break; \
        case 16: { constexpr int K = 16; BODY; } break; \
        default: break;                     \
    }

// 2M's combination modulo p < 2**52 of X, Y in [0, p): re = (X + Y) inv2, im = (X - Y) inv2s.
MODLIN_HD void twom_finish_modp(long long x, long long y, long long p, long long inv2, long long inv2s, double invp,
                                long long* re, long long* im) {
    long long u = x + y, v = x - y;
    u -= p * (long long)(u >= p);
    v += p * (long long)(v < 0);
    *re = mulmod52(u, inv2, p, invp);
    *im = mulmod52(v, inv2s, p, invp);
}

// _mulmod_small: s * m mod p for s < p <= 2**63, m < 2**26 (wrapping products).
MODLIN_HD unsigned long long mulmod_small(unsigned long long s, unsigned long long m,
                                          unsigned long long p, double invp) {
    double qf = (double)s * (double)m * invp - MODLIN_TWO_M20;
    unsigned long long q = qf > 0 ? (unsigned long long)qf : 0ULL;
    unsigned long long r = s * m - q * p;
    if (r >= p) r -= p;
    return r;
}

// The same integer modulo p < 2**63, in [0, p): C mod p by Horner over 16-bit halves of
// the limbs (mulmod_small by 2**16; for p <= 2**16, where a half may exceed p, all in
// 32 bits by the Barrett constants sp of p), minus M mod p (mp) for a negative value.
template <int L>
MODLIN_HD unsigned long long crt_modp(const unsigned char* res, long long plane, long long pos, int N,
                                      const unsigned* table, const unsigned* limbs, const double* minv,
                                      unsigned long long p, double invp, const Small& sp, unsigned long long mp) {
    unsigned c[L];
    bool neg = crt_limbs<L>(res, plane, pos, N, table, limbs, minv, c);
    unsigned long long s = 0;
#pragma unroll
    for (int j = L - 1; j >= 0; --j) {
        unsigned halves[2] = {c[j] >> 16, c[j] & 0xFFFFu};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (p <= 65536ULL) {
                s = mod_u32(((unsigned)s << 16) | halves[h], sp);
            } else {
                unsigned long long t = mulmod_small(s, 65536ULL, p, invp) + halves[h];
                s = t >= p ? t - p : t;
            }
        }
    }
    if (neg) s = s >= mp ? s - mp : s + (p - mp);
    return s;
}

// Gaussian 2M's result at one entry: X and Y modulo p < 2**52 from their residues (rx, ry),
// combined into *re = (X + Y)/2 and *im = (X - Y)/(2s).
template <int L>
MODLIN_HD void crt_twom_entry(const unsigned char* rx, const unsigned char* ry, long long plane, long long pos, int N,
                              const unsigned* table, const unsigned* limbs, const double* minv, unsigned long long p,
                              double invp, const Small& sp, unsigned long long mp, long long inv2, long long inv2s,
                              long long* re, long long* im) {
    long long x = (long long)crt_modp<L>(rx, plane, pos, N, table, limbs, minv, p, invp, sp, mp);
    long long y = (long long)crt_modp<L>(ry, plane, pos, N, table, limbs, minv, p, invp, sp, mp);
    twom_finish_modp(x, y, (long long)p, inv2, inv2s, invp, re, im);
}

// syrk_combine_u8 at entry (r, c) of modulus i's planes.
MODLIN_HD void syrk_combine_at(const unsigned char* x, const unsigned char* y, int i, long long plane, long long R,
                               long long C, long long r, long long c, const Small& s, unsigned inv2s,
                               unsigned char* re, unsigned char* im, unsigned char* ret, unsigned char* imt) {
    const unsigned char* xi = x + i * plane;
    unsigned a = xi[r * C + c];
    unsigned b = y != nullptr ? y[i * plane + r * C + c] : xi[c * C + r];
    unsigned u, v;
    sym_combine(a, b, s, inv2s, &u, &v);
    re[i * plane + r * C + c] = (unsigned char)u;
    if (im != nullptr) im[i * plane + r * C + c] = (unsigned char)v;
    if (ret != nullptr) {
        ret[i * plane + c * R + r] = (unsigned char)u;
        if (imt != nullptr) imt[i * plane + c * R + r] = (unsigned char)(v == 0 ? 0 : s.m - v);
    }
}

// ------------------------------------------------------------------ multiword kernels, one entry

MODLIN_HD void balanced_words_at(const long long* x, long long n, long long p, unsigned long long mu,
                                 unsigned long long c63, int s, int u, double* words, long long e) {
    split_into<double>((long long)mod_wide(x[e], (unsigned long long)p, mu, c63), p, s, u, words + e, n);
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

}  // namespace modlin

#endif  // MODLIN_ELEM_CUH
