/* ember C prelude: the helpers generated kernels and OpDef ``c_expr`` templates call.
 *
 * Portable C (C99 plus C11 ``_Generic`` for the type-generic names templates use); no
 * intrinsics.  Compiled with ``-O3 -march=native -ffp-contract=off`` (never -ffast-math).
 *
 * - Transcendentals (exp, expm1, log, log1p, tanh, sigmoid, erf, erfc, erfinv) are branch-free
 *   polynomial/rational approximations with range reduction, written with +,-,*,/, bit casts
 *   and bit-mask selects only (no ?: on floating-point values, see ember__self), so gcc
 *   inlines and vectorizes loops that call them on AVX2 (x86-64-v3) as on AVX-512 (a libm
 *   call blocks vectorization; erfinv's sqrt keeps it scalar without -fno-math-errno).
 *   float versions end in ``f``, double versions in ``d``; ``ember_exp(x)``
 *   etc. pick one by the argument's type.  The float versions' polynomials and range
 *   reductions use EMBER_FMAF (fma where the target has a fast one, else a*b + c; see below).
 *   Accuracy (max ulp vs a float64/longer reference) is recorded in docs/compiler.md and
 *   checked by tests/compiler/test_prelude.py.
 * - float16/bfloat16 storage: loads to float, stores from float or double with one
 *   round-to-nearest-even, bit-identical to NumPy / ml_dtypes casts (NaN payloads included).
 * - Philox4x32-10 and the word -> number maps of docs/random.md, bit-identical to eager.
 * - Integer and float helpers with PyTorch's semantics (NaN-propagating max/min, floor
 *   division, shifts, xlogy, ...), each mirroring an eager kernel in ember/ops.
 *
 * Functions other templates name (sin, cos, tan, asin, ..., pow, fmod, atan2, hypot) go to
 * libm through the same ``ember_*`` type-generic names; they are correct but not vectorized.
 */
#ifndef EMBER_PRELUDE_H
#define EMBER_PRELUDE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
/* selects combine comparisons with | and & (not || and &&): short-circuit operators are
 * control flow that gcc will not if-convert under -ftrapping-math, which blocks vectorization */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wparentheses"
#define EMBER_INLINE static inline __attribute__((always_inline))
#else
#define EMBER_INLINE static inline
#endif

/* ------------------------------------------------------------------------- bit casts */
EMBER_INLINE uint32_t ember_f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
EMBER_INLINE float ember_u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
EMBER_INLINE uint64_t ember_d2u(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
EMBER_INLINE double ember_u2d(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* select by bit masks: every floating-point select in the vectorizable helpers below goes
 * through these (or is a fabs/copysign), none through a plain ?: (exceptions: selects on a
 * loop-invariant parameter, which gcc unswitches, and the helpers that stay scalar anyway:
 * erfinv's sqrt, libm's fmod/pow).  gcc turns a ?: into control flow: it sinks an
 * arm's arithmetic under a branch (a NaN fixup at the end skips the whole computation) or
 * threads a constant through (k > 127 ? 1 : 0 duplicates the code after it).  Control flow
 * around FP arithmetic is if-converted only where the target has masked (predicated) FP ops,
 * i.e. AVX-512 (gcc 12's cond_* patterns); on AVX2 (x86-64-v3, znver3) the loop then stays
 * scalar ("not vectorized: control flow in loop").  gcc does not see through the masks, so the
 * select is a vector and/andn/or on every ISA.  The value is exactly that of c ? a : b.
 * tests/compiler/test_prelude.py checks the loops vectorize for x86-64-v3 and skylake-avx512. */
EMBER_INLINE float ember__self(int c, float a, float b) {
    uint32_t m = 0u - (uint32_t)(c != 0);
    return ember_u2f((ember_f2u(a) & m) | (ember_f2u(b) & ~m));
}
EMBER_INLINE double ember__seld(int c, double a, double b) {
    uint64_t m = 0u - (uint64_t)(c != 0);
    return ember_u2d((ember_d2u(a) & m) | (ember_d2u(b) & ~m));
}
/* the same for bit patterns (the float16 conversions): where an arm comes from FP arithmetic
 * (the subnormal rounding's float add) the select must be a mask select; ?: between integer
 * arms is fine (gcc if-converts integer code on every ISA) and on AVX-512 cheaper */
EMBER_INLINE uint32_t ember__selu(int c, uint32_t a, uint32_t b) {
    uint32_t m = 0u - (uint32_t)(c != 0);
    return (a & m) | (b & ~m);
}

/* round to nearest integer (ties to even) for |x| < 2**22 (float) / 2**51 (double): adding
 * and subtracting 1.5 * 2**mant leaves the rounded value (no libm, vectorizes) */
#define EMBER_RNDF_MAGIC 12582912.0f
#define EMBER_RNDD_MAGIC 6755399441055744.0
EMBER_INLINE float ember__rintf(float x) { return (x + EMBER_RNDF_MAGIC) - EMBER_RNDF_MAGIC; }
EMBER_INLINE double ember__rintd(double x) { return (x + EMBER_RNDD_MAGIC) - EMBER_RNDD_MAGIC; }
/* 2**k for an integral float k in [-126, 127] (double: [-1022, 1023]) */
EMBER_INLINE float ember__pow2f(float k) {
    return ember_u2f((ember_f2u(k + EMBER_RNDF_MAGIC) + 127u) << 23);
}
EMBER_INLINE double ember__pow2d(double k) {
    return ember_u2d((ember_d2u(k + EMBER_RNDD_MAGIC) + 1023u) << 52);
}

/* fused multiply-add (one rounding) for the float helpers' polynomial evaluation and range
 * reduction.  Where the target has a fast fma (math.h's FP_FAST_FMAF: x86 with FMA3 or
 * AVX-512, AArch64) it is the instruction, which gcc vectorizes; elsewhere it falls back to
 * a*b + c (a libm fma call would be slow and block vectorization).  Both evaluations are
 * within the ulp bounds tests/compiler/test_prelude.py checks.  This changes only how a
 * helper computes its result: user arithmetic is still compiled with -ffp-contract=off.
 * (The double helpers keep their separate roundings.) */
#if defined(FP_FAST_FMAF)
#define EMBER_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define EMBER_FMAF(a, b, c) ((a) * (b) + (c))
#endif

/* ------------------------------------------------------------------------- exp */
/* Cephes expf: exp(x) = 2**k * exp(r), r = x - k ln2 in two parts; the scale is applied in
 * two halves so results in the subnormal range round once and overflow gives inf.  The clamp
 * uses quiet comparisons and mask selects (a NaN gives the bound; the result is replaced by
 * the NaN at the end): with plain ?: gcc duplicates the computation for the clamped constants
 * (~25 more instructions per vector).  k and its halves come from the bits of the rounding
 * sum (k + 1.5 * 2**23 holds k in its low bits). */
EMBER_INLINE float ember_expf(float x) {
    /* x <= -104 (exp rounds to 0, -inf included) and NaN compute from 0 and are selected at
       the end: a clamp to -104 would scale through denormals (a microcode assist per lane) */
    const int live = __builtin_isgreater(x, -104.0f);
    float xc = ember__self(__builtin_isless(x, 89.0f), x, 89.0f);
    xc = ember__self(live, xc, 0.0f);
    float kr = xc * 1.44269504088896341f + EMBER_RNDF_MAGIC;
    float k = kr - EMBER_RNDF_MAGIC;                            /* rint(x / ln2) */
    float r = EMBER_FMAF(k, -0.693359375f, xc);                 /* exact (Cody-Waite) */
    r = EMBER_FMAF(k, 2.12194440e-4f, r);
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = EMBER_FMAF(p, r, 1.3981999507e-3f);
    p = EMBER_FMAF(p, r, 8.3334519073e-3f);
    p = EMBER_FMAF(p, r, 4.1665795894e-2f);
    p = EMBER_FMAF(p, r, 1.6666665459e-1f);
    p = EMBER_FMAF(p, r, 5.0000001201e-1f);
    p = p * z + r + 1.0f;            /* Cephes' order (with fma here: 22 floats > 1 ulp) */
    int32_t ki = (int32_t)(ember_f2u(kr) - 0x4b400000u);       /* k in [-150, 129] */
    int32_t k1 = ki >> 1;
    float y = p * ember_u2f((uint32_t)(k1 + 127) << 23) * ember_u2f((uint32_t)(ki - k1 + 127) << 23);
    y = ember__self(live, y, 0.0f);
    return ember__self(x != x, x, y);
}

/* fdlibm exp: reduction with ln2 split in hi/lo, rational form of exp(r) (< 1 ulp). */
EMBER_INLINE double ember_expd(double x) {
    /* x <= -746 (exp rounds to 0) computes from 0 and is selected at the end, as in
       ember_expf: no denormal scaling for -inf */
    const int live = x > -746.0;
    double xc = ember__seld(__builtin_isless(x, 710.0), x, 710.0);
    xc = ember__seld(live, xc, 0.0);
    double k = ember__rintd(xc * 1.44269504088896338700e+00);
    double hi = xc - k * 6.93147180369123816490e-01;
    double lo = k * 1.90821492927058770002e-10;
    double r = hi - lo;
    double t = r * r;
    double c = r - t * (1.66666666666666019037e-01 + t * (-2.77777777770155933842e-03 +
               t * (6.61375632143793436117e-05 + t * (-1.65339022054652515390e-06 +
               t * 4.13813679705723846039e-08))));
    double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    double k1 = ember__rintd(k * 0.5);
    y = y * ember__pow2d(k1) * ember__pow2d(k - k1);
    y = ember__seld(live, y, 0.0);
    return ember__seld(x != x, x, y);
}

/* expm1 = 2**k (expm1(r) + 1) - 1 = (2**k - 1) + 2**k expm1(r); expm1(r) by its Taylor
 * series on |r| <= ln2/2.  k = 128 (1024 for double) is scaled in two steps. */
EMBER_INLINE float ember_expm1f(float x) {
    float xc = ember__self(__builtin_isless(x, 89.0f), x, 89.0f);
    xc = ember__self(__builtin_isgreater(xc, -18.0f), xc, -18.0f);
    float k = ember__rintf(xc * 1.44269504088896341f);
    float hi = xc - k * 0.693359375f;
    float lo = k * -2.12194440e-4f;
    float r = hi - lo;
    float p = 2.4801587302e-5f;                 /* 1/8! .. 1/2!, Horner in r */
    p = EMBER_FMAF(p, r, 1.9841269841e-4f);
    p = EMBER_FMAF(p, r, 1.3888888889e-3f);
    p = EMBER_FMAF(p, r, 8.3333333333e-3f);
    p = EMBER_FMAF(p, r, 4.1666666667e-2f);
    p = EMBER_FMAF(p, r, 1.6666666667e-1f);
    p = EMBER_FMAF(p, r, 0.5f);
    float u = EMBER_FMAF(r * r, p, r);
    int bigk = k > 127.0f;
    float big = ember__self(bigk, 1.0f, 0.0f);
    float s = ember__pow2f(k - big);
    float y = ((s - ember__self(bigk, 0.5f, 1.0f)) + s * u) * (1.0f + big);
    y = ember__self(x > 88.7228394f, INFINITY, y);
    return ember__self((x != x) | (x == 0.0f), x, y);          /* NaN, and -0 stays -0 */
}

EMBER_INLINE double ember_expm1d(double x) {
    double xc = ember__seld(__builtin_isless(x, 710.0), x, 710.0);      /* NaN: 710 */
    xc = ember__seld(__builtin_isgreater(xc, -40.0), xc, -40.0);
    xc = ember__seld(x != x, 0.0, xc);
    double k = ember__rintd(xc * 1.44269504088896338700e+00);
    double hi = xc - k * 6.93147180369123816490e-01;
    double lo = k * 1.90821492927058770002e-10;
    double r = hi - lo;
    double cr = (hi - r) - lo;                  /* the bits of r that rounding lost */
    double p = 1.0 / 6227020800.0;              /* 1/13! .. 1/2! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    double u = r + ((r * r) * p + cr * (1.0 + r));
    int bigk = k > 1023.0;
    double big = ember__seld(bigk, 1.0, 0.0);
    double s = ember__pow2d(k - big);
    double y = ((s - ember__seld(bigk, 0.5, 1.0)) + s * u) * (1.0 + big);
    y = ember__seld(x > 709.782712893384, INFINITY, y);
    return ember__seld((x != x) | (x == 0.0), x, y);
}

/* ------------------------------------------------------------------------- log */
/* Cephes logf: x = m 2**e with m in [sqrt(1/2), sqrt(2)), log(1 + f) by a polynomial. */
EMBER_INLINE float ember_logf(float x) {
    int sub = x < 1.17549435e-38f;
    /* arithmetic stays outside the selects: gcc will not if-convert an FP operation that
     * might trap (-ftrapping-math), and control flow blocks vectorization */
    float xs = x * ember_u2f((uint32_t)(127 + 23 * sub) << 23);  /* subnormals: * 2**23 */
    uint32_t ix = ember_f2u(xs);
    uint32_t mb = (ix & 0x007fffffu) | 0x3f000000u;             /* m in [0.5, 1) */
    int lo = mb < 0x3f3504f3u;                                   /* m < sqrt(1/2) */
    float e = (float)((int32_t)(ix >> 23) - 126 - 23 * sub - lo);
    float f = ember_u2f(mb + ((uint32_t)lo << 23)) - 1.0f;      /* 2m - 1 or m - 1 */
    float z = f * f;
    float y = 7.0376836292e-2f;
    y = EMBER_FMAF(y, f, -1.1514610310e-1f);
    y = EMBER_FMAF(y, f, 1.1676998740e-1f);
    y = EMBER_FMAF(y, f, -1.2420140846e-1f);
    y = EMBER_FMAF(y, f, 1.4249322787e-1f);
    y = EMBER_FMAF(y, f, -1.6668057665e-1f);
    y = EMBER_FMAF(y, f, 2.0000714765e-1f);
    y = EMBER_FMAF(y, f, -2.4999993993e-1f);
    y = EMBER_FMAF(y, f, 3.3333331174e-1f);
    y = y * f * z;
    y = EMBER_FMAF(e, -2.12194440e-4f, y);
    y = y + -0.5f * z;
    float r = f + y;
    r = r + 0.693359375f * e;
    /* 0, < 0, inf, NaN */
    float sp = ember__self(x == 0.0f, -INFINITY, ember__self(x < 0.0f, NAN, x));
    return ember__self((x <= 0.0f) | (x == INFINITY) | (x != x), sp, r);
}

/* fdlibm log: f = m - 1 with m in [sqrt(2)/2, sqrt(2)), s = f / (2 + f), rational in s*s. */
EMBER_INLINE double ember_logd(double x) {
    int sub = x < 2.2250738585072014e-308;
    double xs = x * ember_u2d((uint64_t)(1023 + 54 * sub) << 52);  /* subnormals: * 2**54 */
    uint64_t ix = ember_d2u(xs);
    uint64_t mb = ix & 0x000fffffffffffffull;
    uint64_t i = (mb + 0x00095f6400000000ull) & 0x0010000000000000ull;
    double m = ember_u2d(mb | (i ^ 0x3ff0000000000000ull));
    double k = (double)((int32_t)(ix >> 52) - 1023 + (int32_t)(i >> 52) - 54 * sub);
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 +
                w * 1.531383769920937332e-01));
    double t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 +
                w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    double R = t2 + t1;
    double hfsq = 0.5 * f * f;
    double r = k * 6.93147180369123816490e-01 -
               ((hfsq - (s * (hfsq + R) + k * 1.90821492927058770002e-10)) - f);
    double sp = ember__seld(x == 0.0, -INFINITY, ember__seld(x < 0.0, NAN, x));
    return ember__seld((x <= 0.0) | (x == INFINITY) | (x != x), sp, r);
}

/* log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x rounded: the second term is the
 * first-order correction for the rounding of u (u - 1 is exact). */
EMBER_INLINE float ember_log1pf(float x) {
    float u = 1.0f + x;
    float c = (x - (u - 1.0f)) / ember__self(u == 0.0f, 1.0f, u);
    float r = ember_logf(u) + c;
    return ember__self((x == 0.0f) | (x == INFINITY), x, r);
}

EMBER_INLINE double ember_log1pd(double x) {
    double u = 1.0 + x;
    double c = (x - (u - 1.0)) / ember__seld(u == 0.0, 1.0, u);
    double r = ember_logd(u) + c;
    return ember__seld((x == 0.0) | (x == INFINITY), x, r);
}

/* ------------------------------------------------------------------------- tanh, sigmoid */
/* tanh: Cephes' polynomial below 0.625, else 1 - 2 / (exp(2|x|) + 1) (cheaper than the
 * expm1 form and as accurate there); |x| is capped where tanh rounds to 1.  The double
 * version uses e / (e + 2), e = expm1(2|x|), which keeps double's last bit. */
EMBER_INLINE float ember_tanhf(float x) {
    float a = ember__self(x < 0.0f, -x, x);
    float ac = ember__self(__builtin_isless(a, 10.0f), a, 10.0f);
    float e = ember_expf(ac + ac);
    float big = 1.0f - 2.0f / (e + 1.0f);
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = EMBER_FMAF(p, z, 2.06390887954e-2f);
    p = EMBER_FMAF(p, z, -5.37397155531e-2f);
    p = EMBER_FMAF(p, z, 1.33314422036e-1f);
    p = EMBER_FMAF(p, z, -3.33332819422e-1f);
    float small = EMBER_FMAF(a * z, p, a);
    float r = ember__self(a < 0.625f, small, big);
    r = __builtin_copysignf(r, x);
    return ember__self((x != x) | (x == 0.0f), x, r);
}

EMBER_INLINE double ember_tanhd(double x) {
    double a = ember__seld(x < 0.0, -x, x);
    double ac = ember__seld(__builtin_isless(a, 20.0), a, 20.0);      /* NaN: 20 (replaced) */
    double e = ember_expm1d(ac + ac);
    double big = e / (e + 2.0);
    /* Cephes tanh below 0.625: x + x^3 P(x^2) / Q(x^2) */
    double z = x * x;
    double pn = (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z
                - 1.61468768441708447952e3;
    double pd = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z
                + 4.84406305325125486048e3;
    double small = a + a * z * (pn / pd);
    double r = ember__seld(a < 0.625, small, big);
    r = __builtin_copysign(r, x);
    return ember__seld((x != x) | (x == 0.0), x, r);
}

/* sigmoid as the eager kernel: e = exp(-|x|); 1 / (1 + e) for x >= 0, else e / (1 + e) */
EMBER_INLINE float ember_sigmoidf(float x) {
    float e = ember_expf(ember__self(x < 0.0f, x, -x));
    float d = 1.0f + e;
    return ember__self(x >= 0.0f, 1.0f, e) / d;  /* one division */
}

EMBER_INLINE double ember_sigmoidd(double x) {
    double e = ember_expd(ember__seld(x < 0.0, x, -x));
    double d = 1.0 + e;
    return ember__seld(x >= 0.0, 1.0, e) / d;
}

/* ------------------------------------------------------------------------- erf, erfc */
/* W. J. Cody's rational approximations (the algorithm of the eager kernel, ops/_special.py),
 * every range evaluated and the right one selected.  exp(-y*y) is exp(-s*s) exp(-(y-s)(y+s))
 * with s = y rounded to 1/16, so the square is exact. */
EMBER_INLINE void ember__erf_parts(double x, double *erf_out, double *erfc_out) {
    double y = ember__seld(x < 0.0, -x, x);
    double yc = ember__seld(__builtin_isless(y, 30.0), y, 30.0);      /* NaN: 30 */
    yc = ember__seld(y != y, 0.0, yc);
    /* |x| <= 0.46875: erf = x * P(x^2) / Q(x^2) */
    double z = yc * yc;
    double num = 1.85777706184603153e-1 * z + 3.16112374387056560e00;
    double den = z + 2.36012909523441209e01;
    num = num * z + 1.13864154151050156e02; den = den * z + 2.44024637934444173e02;
    num = num * z + 3.77485237685302021e02; den = den * z + 1.28261652607737228e03;
    num = num * z + 3.20937758913846947e03; den = den * z + 2.84423683343917062e03;
    double erf_small = yc * num / den;
    /* 0.46875 < y <= 4: erfc = exp(-y^2) C(y) / D(y) */
    double cn = 2.15311535474403846e-8 * yc + 5.64188496988670089e-1;
    double cd = yc + 1.57449261107098347e01;
    cn = cn * yc + 8.88314979438837594e00;  cd = cd * yc + 1.17693950891312499e02;
    cn = cn * yc + 6.61191906371416295e01;  cd = cd * yc + 5.37181101862009858e02;
    cn = cn * yc + 2.98635138197400131e02;  cd = cd * yc + 1.62138957456669019e03;
    cn = cn * yc + 8.81952221241769090e02;  cd = cd * yc + 3.29079923573345963e03;
    cn = cn * yc + 1.71204761263407058e03;  cd = cd * yc + 4.36261909014324716e03;
    cn = cn * yc + 2.05107837782607147e03;  cd = cd * yc + 3.43936767414372164e03;
    cn = cn * yc + 1.23033935479799725e03;  cd = cd * yc + 1.23033935480374942e03;
    double mid = cn / cd;
    /* y > 4: erfc = exp(-y^2) (1/sqrt(pi) - w P(w) / Q(w)) / y, w = 1 / y^2 */
    double yb = ember__seld(yc > 4.0, yc, 4.0);
    double w = 1.0 / (yb * yb);
    double pn = 1.63153871373020978e-2 * w + 3.05326634961232344e-1;
    double pd = w + 2.56852019228982242e00;
    pn = pn * w + 3.60344899949804439e-1;  pd = pd * w + 1.87295284992346725e00;
    pn = pn * w + 1.25781726111229246e-1;  pd = pd * w + 5.27905102951428412e-1;
    pn = pn * w + 1.60837851487422766e-2;  pd = pd * w + 6.05183413124413191e-2;
    pn = pn * w + 6.58749161529837803e-4;  pd = pd * w + 2.33520497626869185e-3;
    double big = (5.6418958354775628695e-1 - w * pn / pd) / yb;
    double s = ember__rintd(yc * 16.0) * 0.0625;
    double ex = ember_expd(-s * s) * ember_expd(-(yc - s) * (yc + s));
    double tail = ember__seld(yc <= 4.0, mid, big) * ex;           /* erfc(y), y > 0.46875 */
    int small = y <= 0.46875;
    double one_m_tail = 1.0 - tail, two_m_tail = 2.0 - tail;
    double e_abs = ember__seld(small, erf_small, one_m_tail);
    double erf = ember__seld(x < 0.0, -e_abs, e_abs);
    double one_m_small = 1.0 - ember__seld(x < 0.0, -erf_small, erf_small);
    double erfc = ember__seld(small, one_m_small, ember__seld(x < 0.0, two_m_tail, tail));
    *erf_out = ember__seld(x != x, x, erf);
    *erfc_out = ember__seld(x != x, x, erfc);
}

EMBER_INLINE double ember_erfd(double x) { double e, c; ember__erf_parts(x, &e, &c); return e; }
EMBER_INLINE double ember_erfcd(double x) { double e, c; ember__erf_parts(x, &e, &c); return c; }
/* float erf in float arithmetic (GELU's hot path; ~2.3x the speed of the double kernel,
 * max 1.4 ulp): Taylor series up to |x| = 1, written x + x * (c0 - 1 + ...) so the leading
 * term is exact; above, 1 - erfc with Cody's middle-range rational in float (erfc <= 0.16
 * there, so its error shrinks by the subtraction); |x| >= 4 rounds to +-1. */
EMBER_INLINE float ember_erff(float x) {
    float y = __builtin_fabsf(x);
    float yc = ember__self(__builtin_isless(y, 4.0f), y, 4.0f);     /* NaN: 4 (replaced) */
    /* |x| <= T: Taylor series x * sum c_n x^2n (terms fall by ~x^2 / n) */
    float z = yc * yc;
    float p = -1.2290555301717926e-09f;
    p = EMBER_FMAF(p, z, 1.4807192815879218e-08f);
    p = EMBER_FMAF(p, z, -1.6365844691234924e-07f);
    p = EMBER_FMAF(p, z, 1.6462114365889246e-06f);
    p = EMBER_FMAF(p, z, -1.492565035840625e-05f);
    p = EMBER_FMAF(p, z, 0.00012055332981789664f);
    p = EMBER_FMAF(p, z, -0.00085483270234508522f);
    p = EMBER_FMAF(p, z, 0.0052239776254421879f);
    p = EMBER_FMAF(p, z, -0.026866170645131252f);
    p = EMBER_FMAF(p, z, 0.11283791670955126f);
    p = EMBER_FMAF(p, z, -0.37612638903183754f);
    float small = EMBER_FMAF(yc, EMBER_FMAF(z, p, 0.12837916709551257f), yc);
    float cn = EMBER_FMAF(2.15311535474403846e-8f, yc, 5.64188496988670089e-1f);
    float cd = yc + 1.57449261107098347e01f;
    cn = EMBER_FMAF(cn, yc, 8.88314979438837594e00f);  cd = EMBER_FMAF(cd, yc, 1.17693950891312499e02f);
    cn = EMBER_FMAF(cn, yc, 6.61191906371416295e01f);  cd = EMBER_FMAF(cd, yc, 5.37181101862009858e02f);
    cn = EMBER_FMAF(cn, yc, 2.98635138197400131e02f);  cd = EMBER_FMAF(cd, yc, 1.62138957456669019e03f);
    cn = EMBER_FMAF(cn, yc, 8.81952221241769090e02f);  cd = EMBER_FMAF(cd, yc, 3.29079923573345963e03f);
    cn = EMBER_FMAF(cn, yc, 1.71204761263407058e03f);  cd = EMBER_FMAF(cd, yc, 4.36261909014324716e03f);
    cn = EMBER_FMAF(cn, yc, 2.05107837782607147e03f);  cd = EMBER_FMAF(cd, yc, 3.43936767414372164e03f);
    cn = EMBER_FMAF(cn, yc, 1.23033935479799725e03f);  cd = EMBER_FMAF(cd, yc, 1.23033935480374942e03f);
    float s = ember__rintf(yc * 16.0f) * 0.0625f;
    float ex = ember_expf(-s * s) * ember_expf(-(yc - s) * (yc + s));
    float big = EMBER_FMAF(-(cn / cd), ex, 1.0f);
    float r = ember__self(y <= 1.0f, small, big);
    r = __builtin_copysignf(r, x);
    return ember__self(x != x, x, r);
}
/* float erfc: the double kernel rounded once (no cancellation to hide float errors in) */
EMBER_INLINE float ember_erfcf(float x) { return (float)ember_erfcd((double)x); }

/* Phi(x) = erfc(-x / sqrt 2) / 2, the standard normal CDF (GELU's factor).  float: eager's
 * float32 formula (normal_cdf_f32 in ember/ops/_special.py).  With z = |x| / sqrt 2 and
 * t = 1 / (1 + z/2) (Numerical Recipes' variable, t in (0, 1]), erfc(z) = t R(t) exp(-z*z),
 * R(t) = erfcx(z) / t a degree-10 polynomial in t - 1/2 (minimax relative error 1.7e-8 with these
 * float coefficients, fitted to SciPy's erfcx).  The two factors are independent: the division
 * and R's Horner chain run beside the exp (a vector loop calling Phi is latency-bound; the
 * former exp(P(t) - z*z) waited for the division and P before its exp, ~1.4x slower in the gelu
 * chain).  exp(-z*z) comes from x itself: z*z = (hi + lo) / 2 with hi + lo = x*x exactly, and
 * exp(-(hi + lo)/2) = exp(-hi/2) (1 - lo/2), so the argument carries no rounding error (a
 * rounded z*z cost ~z*z ulp of the result in the lower tail).  Max 6 float ulp vs SciPy's
 * float64 ndtr over the whole line; within 6 ulp of eager, which runs the same operations in
 * the same order but with NumPy's exp and R's Horner steps unfused (an fma in Horner changes
 * R's last bits; 3 ulp on a target without fma, where EMBER_FMAF is unfused too).  |x| is capped at 15 (exp(-112.5) rounds to 0); NaN is
 * selected at the end.  double: the double erfc kernel. */
EMBER_INLINE float ember_normal_cdff(float x) {
    float ax = __builtin_fabsf(x);
    float a = ember__self(__builtin_isless(ax, 15.0f), ax, 15.0f);   /* NaN: 15 (replaced) */
    float t = 1.0f / (ax * 0.35355338f + 1.0f);   /* 1 / (1 + z/2); unclamped: inf gives 0 */
    float v = t - 0.5f;                                              /* R in t - 1/2 */
    float p = 0.043112155f;
    p = EMBER_FMAF(p, v, -0.017949885f);
    p = EMBER_FMAF(p, v, -0.07641655f);
    p = EMBER_FMAF(p, v, 0.054717857f);
    p = EMBER_FMAF(p, v, 0.097762525f);
    p = EMBER_FMAF(p, v, -0.10372387f);
    p = EMBER_FMAF(p, v, -0.17201036f);
    p = EMBER_FMAF(p, v, 0.1457698f);
    p = EMBER_FMAF(p, v, 0.5589422f);
    p = EMBER_FMAF(p, v, 0.6871607f);
    p = EMBER_FMAF(p, v, 0.51079136f);                               /* R(t) */
    float hi = a * a;
#if defined(FP_FAST_FMAF)
    float lo = EMBER_FMAF(a, a, -hi);                                /* a*a - hi, exact */
#else
    float lo = (float)((double)a * a - hi);                          /* exact in double */
#endif
    float ex = ember_expf(hi * -0.5f);
    /* exp(-a*a / 2); one fma: the product alone would be subnormal for |x| > ~11.5 (an assist) */
    ex = EMBER_FMAF(lo * -0.5f, ex, ex);
    float e = ((t * 0.5f) * ex) * p;      /* erfc(a / sqrt 2) / 2; R last (the longest chain) */
    float r = ember__self(x > 0.0f, 1.0f - e, e);   /* eager's (2 - erfc) / 2: halving is exact */
    return ember__self(x != x, x, r);
}
EMBER_INLINE double ember_normal_cdfd(double x) { return 0.5 * ember_erfcd(x * -0.70710678118654752440); }
/* exact GELU, x * Phi(x) (the erf form's C template and eager's one-pass kernel).  float:
 * below EMBER_GELU_FLUSHF the result is returned as -0, which is what PyTorch's CPU kernels
 * give there (their 1 + erf(x / sqrt 2) cancels to 0 below about -5.5, in every float dtype):
 * x * Phi(x) < 3e-37 there, and Phi's intermediates (exp(-x*x / 2), its product with t) would
 * reach float's subnormal range below about -13, where each operation on a subnormal costs
 * a microcode assist (inputs there ran ~6x slower).  Phi is evaluated at min(|x|, 12.9), so no
 * intermediate is ever subnormal; NaN propagates (x - x).  As torch's float,
 * float16 and bfloat16 kernels, +-inf give NaN (x * 0 for -inf, x - x for +inf).
 * double: x * Phi(x) (torch's double kernel: inf for +inf, NaN for -inf). */
#define EMBER_GELU_FLUSHF -12.9f
/* The same operations as ember_normal_cdff (the same bits) without what GELU's range makes
 * dead: |x| is capped at 12.9 (Phi(12.9) rounds to 1 as Phi of anything larger; x < -12.9 is
 * flushed), so exp's argument lies in [-83.2, 0] (no clamps, no overflow, 2**k a normal float:
 * one scale instead of two halves).  Cheaper than the literal copy by folding, each exact:
 * t / 2 comes from the division (0.5 / d is t / 2 rounded once) and serves both R's variable
 * (t - 1/2 = 2 (t/2) - 1/2) and the product ((t/2) ex) R that Phi used to form as
 * ((t 0.5) ex) R; the flush and +-inf are one zero select and one add of x - x (0, or NaN for
 * +-inf and NaN) to Phi before the product x Phi (x 0 = -0 below the flush point, as torch;
 * NaN for +-inf, as torch's float kernels).  ~52 vector instructions an element against the
 * literal copy's ~62 (AVX-512, gcc 12): 0.53-0.57 ns an element in cache against 0.60-0.65
 * (AVX-512), 0.83 against 1.04 (x86-64-v3); bit-identical over a third of all float32
 * patterns (RESULTS.md, "Exact GELU at its compute bound"). */
EMBER_INLINE float ember_gelu_erff(float x) {
    const int flush = x < EMBER_GELU_FLUSHF;
    float ax = __builtin_fabsf(x);
    float a = ember__self(ax < 12.9f, ax, 12.9f);                 /* NaN: 12.9 (see below) */
    float th = 0.5f / (a * 0.35355338f + 1.0f);                    /* t / 2 */
    float v = EMBER_FMAF(th, 2.0f, -0.5f);                         /* t - 1/2, exact */
    float p = 0.043112155f;
    p = EMBER_FMAF(p, v, -0.017949885f);
    p = EMBER_FMAF(p, v, -0.07641655f);
    p = EMBER_FMAF(p, v, 0.054717857f);
    p = EMBER_FMAF(p, v, 0.097762525f);
    p = EMBER_FMAF(p, v, -0.10372387f);
    p = EMBER_FMAF(p, v, -0.17201036f);
    p = EMBER_FMAF(p, v, 0.1457698f);
    p = EMBER_FMAF(p, v, 0.5589422f);
    p = EMBER_FMAF(p, v, 0.6871607f);
    p = EMBER_FMAF(p, v, 0.51079136f);
    float hi = a * a;
#if defined(FP_FAST_FMAF)
    float lo = EMBER_FMAF(a, a, -hi);
#else
    float lo = (float)((double)a * a - hi);
#endif
    /* ember_expf(hi * -0.5f) for an argument in [-83.2, 0] */
    float y = hi * -0.5f;
    float kr = y * 1.44269504088896341f + EMBER_RNDF_MAGIC;
    float k = kr - EMBER_RNDF_MAGIC;
    float r = EMBER_FMAF(k, -0.693359375f, y);
    r = EMBER_FMAF(k, 2.12194440e-4f, r);
    float z = r * r;
    float q = 1.9875691500e-4f;
    q = EMBER_FMAF(q, r, 1.3981999507e-3f);
    q = EMBER_FMAF(q, r, 8.3334519073e-3f);
    q = EMBER_FMAF(q, r, 4.1665795894e-2f);
    q = EMBER_FMAF(q, r, 1.6666665459e-1f);
    q = EMBER_FMAF(q, r, 5.0000001201e-1f);
    q = q * z + r + 1.0f;
    float ex = q * ember_u2f((ember_f2u(kr) - 0x4b400000u + 127u) << 23);
    ex = EMBER_FMAF(lo * -0.5f, ex, ex);
    float e = (th * ex) * p;                                       /* erfc(|x| / sqrt 2) / 2 */
    float phi = ember__self(x > 0.0f, 1.0f - e, e);
    phi = ember__self(flush, 0.0f, phi) + (x - x);
    return x * phi;
}
EMBER_INLINE double ember_gelu_erfd(double x) { return x * ember_normal_cdfd(x); }

/* erfinv as the eager kernel: Winitzki's closed form, then two Halley steps on erf (or on
 * erfc for |y| > 0.5, where 1 - |y| is exact). */
EMBER_INLINE double ember__exp_neg_square(double x) {
    double hi = ember_u2d(ember_d2u(x) & 0xFFFFFFFFF8000000ull);
    return ember_expd(-hi * hi) * ember_expd(-(x - hi) * (x + hi));
}

EMBER_INLINE double ember_erfinvd(double yv) {
    double ay = yv < 0.0 ? -yv : yv;
    int inside = ay < 1.0;
    double a = 0.147;
    double w = ember_log1pd(-(inside ? ay * ay : 0.0));
    double t = 2.0 / (3.14159265358979323846 * a) + 0.5 * w;
    double x = sqrt(sqrt(t * t - w / a) - t);
    x = inside ? x : 0.0;
    int tail = ay > 0.5;
    double rest = 1.0 - ay;
    for (int step = 0; step < 2; step++) {
        double e, c;
        ember__erf_parts(x, &e, &c);
        double f = tail ? rest - c : e - ay;
        double st = f / (1.1283791670955126 * ember__exp_neg_square(x));
        x = x - st / (1.0 + x * st);
    }
    double out = __builtin_copysign(ay == 1.0 ? INFINITY : x, yv);
    return (ay > 1.0 | yv != yv) ? NAN : out;
}
EMBER_INLINE float ember_erfinvf(float x) { return (float)ember_erfinvd((double)x); }

/* ------------------------------------------------------------------------- float16 / bfloat16 */
/* float16 bits -> float (exact), as NumPy: NaN payloads kept (F. Giesen's half_to_float). */
EMBER_INLINE float ember_f16_to_f32(uint16_t h) {
    uint32_t o = ((uint32_t)h & 0x7fffu) << 13;
    uint32_t ex = o & 0x0f800000u;
    o += (127u - 15u) << 23;
    uint32_t infnan = o + ((128u - 16u) << 23);
    float sub = ember_u2f(o + (1u << 23)) - ember_u2f(113u << 23);
    uint32_t r = ember__selu(ex == 0x0f800000u, infnan, ember__selu(ex == 0, ember_f2u(sub), o));
    return ember_u2f(r | (((uint32_t)h & 0x8000u) << 16));
}

/* float -> float16 bits, round to nearest even, as NumPy's cast (NaN: payload >> 13, kept
 * non-zero). */
EMBER_INLINE uint16_t ember_f32_to_f16(float x) {
    uint32_t f = ember_f2u(x);
    uint32_t sign = f & 0x80000000u;
    f ^= sign;
    uint32_t nan = 0x7c00u | ((f & 0x007fffffu) >> 13);
    nan = nan == 0x7c00u ? 0x7c01u : nan;
    uint32_t infnan = f > 0x7f800000u ? nan : 0x7c00u;
    /* subnormal results: let the FPU round by adding 0.5 (its exponent places the point) */
    uint32_t sub = ember_f2u(ember_u2f(f) + 0.5f) - 0x3f000000u;
    uint32_t odd = (f >> 13) & 1u;
    uint32_t norm = (f + ((uint32_t)(15 - 127) << 23) + 0xfffu + odd) >> 13;
    uint32_t o = ember__selu(f < 0x38800000u, sub, f >= 0x47800000u ? infnan : norm);
    return (uint16_t)(o | (sign >> 16));
}

/* bfloat16 bits -> float (exact) */
EMBER_INLINE float ember_bf16_to_f32(uint16_t b) { return ember_u2f((uint32_t)b << 16); }

/* float -> bfloat16 bits, round to nearest even; NaN -> quiet NaN with the sign (ml_dtypes) */
EMBER_INLINE uint16_t ember_f32_to_bf16(float x) {
    uint32_t u = ember_f2u(x);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    return (uint16_t)(x != x ? nan : r);
}

/* double -> float rounded to odd: with 2+ spare bits, a second round-to-nearest-even to a
 * narrower format then equals one direct rounding of the double (no double rounding). */
EMBER_INLINE float ember__f64_to_f32_odd(double d) {
    float f = (float)d;
    uint32_t b = ember_f2u(f);
    int inexact = (double)f != d;
    int up = __builtin_fabs((double)f) > __builtin_fabs(d);
    uint32_t odd = ember__selu(b & 1u, b, ember__selu(up, b - 1u, b + 1u));
    return ember__self(d != d, f, ember_u2f(ember__selu(inexact, odd, b)));
}
EMBER_INLINE uint16_t ember_f64_to_f16(double d) { return ember_f32_to_f16(ember__f64_to_f32_odd(d)); }
EMBER_INLINE uint16_t ember_f64_to_bf16(double d) {
    return ember_f32_to_bf16(ember__f64_to_f32_odd(d));
}
/* a float value rounded to float16 / bfloat16 and back: what a fused kernel applies to a
 * low-precision intermediate it keeps in a register (eager rounds after every op) */
EMBER_INLINE float ember_round_f16(float x) { return ember_f16_to_f32(ember_f32_to_f16(x)); }
EMBER_INLINE float ember_round_bf16(float x) { return ember_bf16_to_f32(ember_f32_to_bf16(x)); }
/* store helpers that pick the float or double rounding by the value's type */
#define ember_to_f16(x) _Generic((x), double: ember_f64_to_f16, default: ember_f32_to_f16)(x)
#define ember_to_bf16(x) _Generic((x), double: ember_f64_to_bf16, default: ember_f32_to_bf16)(x)

/* ------------------------------------------------------------------------- Philox4x32-10 */
/* The stream of docs/random.md: word w of the stream keyed by seed is lane w % 4 of
 * Philox4x32-10(counter = (b, b >> 32, 0, 0), key = (seed, seed >> 32)), b = w / 4. */
EMBER_INLINE void ember_philox4x32(uint32_t c[4], uint32_t k0, uint32_t k1) {
    uint32_t c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)c0 * 0xD2511F53u;
        uint64_t p1 = (uint64_t)c2 * 0xCD9E8D57u;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    c[0] = c0; c[1] = c1; c[2] = c2; c[3] = c3;
}

/* word w of the stream (one Philox block per call: a kernel that needs consecutive words can
 * call ember_philox4x32 once per 4 elements instead) */
EMBER_INLINE uint32_t ember_philox_word(uint64_t seed, uint64_t w) {
    uint64_t b = w >> 2;
    uint32_t c[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0u, 0u};
    ember_philox4x32(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    uint32_t lane = (uint32_t)(w & 3u);
    return lane == 0 ? c[0] : lane == 1 ? c[1] : lane == 2 ? c[2] : c[3];
}

/* words -> uniform [0, 1) doubles with the dtype's significand width (docs/random.md §3) */
EMBER_INLINE double ember_unit_f32(uint32_t w) { return (double)(w >> 8) * 0x1p-24; }
EMBER_INLINE double ember_unit_f16(uint32_t w) { return (double)(w >> 21) * 0x1p-11; }
EMBER_INLINE double ember_unit_bf16(uint32_t w) { return (double)(w >> 24) * 0x1p-8; }
EMBER_INLINE double ember_unit_f64(uint32_t a, uint32_t b) {
    return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * 0x1p-53;
}
/* w * 2**-32: the uniform bernoulli and dropout compare with */
EMBER_INLINE double ember_unit32(uint32_t w) { return (double)w * 0x1p-32; }

/* element i of uniform(low, high) for a dtype drawing one word per value (float32/16/bf16:
 * pass the matching ember_unit_*) or two (float64), as doubles; the caller rounds once */
EMBER_INLINE double ember_rand_uniform_f32(uint64_t seed, uint64_t offset, uint64_t i,
                                           double low, double high) {
    return low + (high - low) * ember_unit_f32(ember_philox_word(seed, offset + i));
}
EMBER_INLINE double ember_rand_uniform_f64(uint64_t seed, uint64_t offset, uint64_t i,
                                           double low, double high) {
    uint32_t a = ember_philox_word(seed, offset + 2 * i);
    uint32_t b = ember_philox_word(seed, offset + 2 * i + 1);
    return low + (high - low) * ember_unit_f64(a, b);
}

/* element i of a standard normal (Box-Muller on pairs, docs/random.md §3): pair k = i / 2
 * uses the uniforms of values 2k (u1 = 1 - u, in (0, 1]) and 2k + 1; even i is r cos t, odd i
 * r sin t.  ``wpu`` is the words per uniform (2 for float64, else 1); ``unit`` the dtype's
 * uniform map for one word (ember_unit_f32/f16/bf16; ignored when wpu is 2). */
EMBER_INLINE double ember_randn(uint64_t seed, uint64_t offset, uint64_t i, int wpu,
                                double (*unit)(uint32_t)) {
    uint64_t k = i >> 1;
    double ua, ub;
    if (wpu == 2) {
        uint64_t base = offset + 4 * k;
        ua = ember_unit_f64(ember_philox_word(seed, base), ember_philox_word(seed, base + 1));
        ub = ember_unit_f64(ember_philox_word(seed, base + 2), ember_philox_word(seed, base + 3));
    } else {
        ua = unit(ember_philox_word(seed, offset + 2 * k));
        ub = unit(ember_philox_word(seed, offset + 2 * k + 1));
    }
    double r = sqrt(-2.0 * log(1.0 - ua));
    double t = 2.0 * 3.141592653589793 * ub;
    return (i & 1) ? r * sin(t) : r * cos(t);
}

/* element i's uniform [0, 1) for a dtype drawing ``wpu`` words per value (2: float64, the
 * other dtypes 1 with their ``unit`` map), as ember_randn draws them */
EMBER_INLINE double ember_rand_unit(uint64_t seed, uint64_t offset, uint64_t i, int wpu,
                                    double (*unit)(uint32_t)) {
    if (wpu == 2)
        return ember_unit_f64(ember_philox_word(seed, offset + 2 * i),
                              ember_philox_word(seed, offset + 2 * i + 1));
    return unit(ember_philox_word(seed, offset + i));
}

/* exponential_(lambd): -log(u) / lambd, u = 1 - unit in (0, 1] (docs/random.md) */
EMBER_INLINE double ember_rand_exponential(uint64_t seed, uint64_t offset, uint64_t i, int wpu,
                                           double (*unit)(uint32_t), double lambd) {
    return -log(1.0 - ember_rand_unit(seed, offset, i, wpu, unit)) / lambd;
}

/* cauchy_(median, sigma): median + sigma * tan(pi * (u - 0.5)), u uniform [0, 1) */
EMBER_INLINE double ember_rand_cauchy(uint64_t seed, uint64_t offset, uint64_t i, int wpu,
                                      double (*unit)(uint32_t), double median, double sigma) {
    double u = ember_rand_unit(seed, offset, i, wpu, unit);
    return median + sigma * tan(3.141592653589793 * (u - 0.5));
}

/* geometric_(p): max(1, ceil(log(u) / log1p(-p))), u = (w + 0.5) * 2**-32 (one word per
 * value whatever the dtype); NaN propagates as NumPy's maximum */
EMBER_INLINE double ember_rand_geometric(uint64_t seed, uint64_t offset, uint64_t i, double p) {
    double u = ((double)ember_philox_word(seed, offset + i) + 0.5) * 0x1p-32;
    double k = ceil(log(u) / log1p(-p));
    return (k > 1.0 | k != k) ? k : 1.0;
}

/* randint(low, high): low + (w mod span) in two's complement, span = high - low; one word
 * per value for span <= 2**32, else two (the uint64 w[2i] << 32 | w[2i + 1]) */
EMBER_INLINE int64_t ember_randint(uint64_t seed, uint64_t offset, uint64_t i, uint64_t low,
                                   uint64_t high) {
    uint64_t span = high - low, r;
    if (span <= 0x100000000ULL)
        r = (uint64_t)ember_philox_word(seed, offset + i) % span;
    else
        r = (((uint64_t)ember_philox_word(seed, offset + 2 * i) << 32) |
             (uint64_t)ember_philox_word(seed, offset + 2 * i + 1)) % span;
    return (int64_t)(r + low);
}

/* randperm's key i, the uint64 w[2i] << 32 | w[2i + 1], with its sign bit flipped: int64
 * order is the uint64 order (randperm is the stable argsort of the keys) */
EMBER_INLINE int64_t ember_randperm_key(uint64_t seed, uint64_t offset, uint64_t i) {
    uint64_t k = ((uint64_t)ember_philox_word(seed, offset + 2 * i) << 32) |
                 (uint64_t)ember_philox_word(seed, offset + 2 * i + 1);
    return (int64_t)(k ^ 0x8000000000000000ULL);
}

/* bernoulli(p) and the dropout keep mask for element i: w * 2**-32 < p (resp. < 1 - p) */
EMBER_INLINE bool ember_bernoulli(uint64_t seed, uint64_t offset, uint64_t i, double p) {
    return ember_unit32(ember_philox_word(seed, offset + i)) < p;
}
EMBER_INLINE bool ember_dropout_keep(uint64_t seed, uint64_t offset, uint64_t i, double p) {
    return ember_unit32(ember_philox_word(seed, offset + i)) < 1.0 - p;
}

/* ------------------------------------------------------------------------- integer helpers */
/* Integer inputs arrive as int64 (C promotes narrower types); the caller stores the result to
 * the op's dtype, which wraps as NumPy does.  Division by zero returns 0 (the eager kernel
 * raises before running; generated code checks divisors separately). */
EMBER_INLINE int64_t ember_div_trunc_i(int64_t a, int64_t b) {
    int64_t bs = (b == 0 | b == -1) ? 1 : b;
    int64_t q = a / bs;
    return b == 0 ? 0 : (b == -1 ? (int64_t)(0 - (uint64_t)a) : q);
}
EMBER_INLINE int64_t ember_div_floor_i(int64_t a, int64_t b) {
    int64_t bs = (b == 0 | b == -1) ? 1 : b;
    int64_t q = a / bs;
    int64_t r = a % bs;
    q = (r != 0 & ((r < 0) != (bs < 0))) ? q - 1 : q;
    return b == 0 ? 0 : (b == -1 ? (int64_t)(0 - (uint64_t)a) : q);
}
EMBER_INLINE int64_t ember_remainder_i(int64_t a, int64_t b) {
    int64_t bs = (b == 0 | b == -1) ? 1 : b;
    int64_t r = a % bs;
    r = (r != 0 & ((r < 0) != (bs < 0))) ? r + bs : r;
    return (b == 0 | b == -1) ? 0 : r;
}
EMBER_INLINE int64_t ember_fmod_i(int64_t a, int64_t b) {
    int64_t bs = (b == 0 | b == -1) ? 1 : b;
    return (b == 0 | b == -1) ? 0 : a % bs;
}
EMBER_INLINE int64_t ember_abs_i(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }
EMBER_INLINE int64_t ember_maximum_i(int64_t a, int64_t b) { return a >= b ? a : b; }
EMBER_INLINE int64_t ember_minimum_i(int64_t a, int64_t b) { return a <= b ? a : b; }

/* integer power with wrap-around; negative exponents give 1, +-1 or 0 (PyTorch) */
EMBER_INLINE int64_t ember_pow_i(int64_t a, int64_t b) {
    uint64_t base = (uint64_t)a, acc = 1;
    int64_t e = b < 0 ? 0 : b;
    while (e) {
        if (e & 1) acc *= base;
        base *= base;
        e >>= 1;
    }
    int64_t neg = a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    return b < 0 ? neg : (int64_t)acc;
}

/* shifts with PyTorch's rules: an amount < 0 or >= the bit width gives 0 (left) or the sign
 * fill (right); a uint8 amount is read as signed. */
#define EMBER__SHIFTS(T, UT, BITS, SUF, AMT)                                                 \
    EMBER_INLINE T ember_lshift_##SUF(T a, T b) {                                           \
        int64_t s = (int64_t)(AMT)b;                                                         \
        int bad = s < 0 | s >= BITS;                                                        \
        return bad ? (T)0 : (T)(UT)((UT)a << (bad ? 0 : s));                                 \
    }                                                                                        \
    EMBER_INLINE T ember_rshift_##SUF(T a, T b) {                                           \
        int64_t s = (int64_t)(AMT)b;                                                         \
        int64_t mx = ((T)-1 < 0) ? BITS - 1 : BITS;                                          \
        int64_t amt = (s < 0 | s >= mx) ? mx : s;                                           \
        return amt >= BITS ? (T)0 : (T)(a >> amt);                                           \
    }
EMBER__SHIFTS(uint8_t, uint8_t, 8, u8, int8_t)
EMBER__SHIFTS(int8_t, uint8_t, 8, i8, int8_t)
EMBER__SHIFTS(int16_t, uint16_t, 16, i16, int16_t)
EMBER__SHIFTS(int32_t, uint32_t, 32, i32, int32_t)
EMBER__SHIFTS(int64_t, uint64_t, 64, i64, int64_t)
#undef EMBER__SHIFTS
/* the type is the first operand's own (not promoted) type: cast fused sub-expressions to
 * their dtype's C type before passing them */
#define ember_lshift(a, b) _Generic((a), uint8_t: ember_lshift_u8, int8_t: ember_lshift_i8,   \
    int16_t: ember_lshift_i16, int32_t: ember_lshift_i32, default: ember_lshift_i64)(a, b)
#define ember_rshift(a, b) _Generic((a), uint8_t: ember_rshift_u8, int8_t: ember_rshift_i8,   \
    int16_t: ember_rshift_i16, int32_t: ember_rshift_i32, default: ember_rshift_i64)(a, b)

/* ------------------------------------------------------------------------- float helpers */
#define EMBER__FLOAT_HELPERS(T, S, BS, FMOD, ZERO, TWO_P)                                               \
    EMBER_INLINE T ember_abs##S(T x) { return __builtin_fabs##BS(x); }                     \
    /* NaN-propagating, as NumPy's maximum/minimum: (a > b or a is NaN) ? a : b (so the     \
     * second operand wins a tie: maximum(0.0, -0.0) is -0.0, as NumPy) */                   \
    EMBER_INLINE T ember_maximum##S(T a, T b) { return ember__sel##S(a > b | a != a, a, b); } \
    EMBER_INLINE T ember_minimum##S(T a, T b) { return ember__sel##S(a < b | a != a, a, b); } \
    /* NaN-ignoring (fmax/fmin), ties likewise to the second operand */                      \
    EMBER_INLINE T ember_fmax##S(T a, T b) { return ember__sel##S(a > b | b != b, a, b); }    \
    EMBER_INLINE T ember_fmin##S(T a, T b) { return ember__sel##S(a < b | b != b, a, b); }    \
    /* rounding without libm (gcc vectorizes trunc/floor/ceil calls only with              \
     * -fno-trapping-math): |x| + 2**p - 2**p rounds to an integer (ties to even) */        \
    EMBER_INLINE T ember_rint##S(T x) {                                                      \
        T a = __builtin_fabs##BS(x);                                                         \
        T r = (a + TWO_P) - TWO_P;                                                           \
        return __builtin_copysign##BS(ember__sel##S(a >= TWO_P, a, r), x);                   \
    }                                                                                        \
    EMBER_INLINE T ember_trunc##S(T x) {                                                     \
        T a = __builtin_fabs##BS(x);                                                         \
        T r = (a + TWO_P) - TWO_P;                                                           \
        r = r - ember__sel##S(r > a, (T)1, (T)0);                                            \
        return __builtin_copysign##BS(ember__sel##S(a >= TWO_P, a, r), x);                   \
    }                                                                                        \
    EMBER_INLINE T ember_floor##S(T x) {                                                     \
        T t = ember_trunc##S(x); return t - ember__sel##S(x < t, (T)1, (T)0);                \
    }                                                                                        \
    EMBER_INLINE T ember_ceil##S(T x) {                                                      \
        T t = ember_trunc##S(x); return t - ember__sel##S(x > t, (T)-1, (T)0);               \
    }                                                                                        \
    /* round half to even at ``decimals`` places, as the eager kernel: with ten = 10**|d|    \
     * rounded to T, rint(x * ten) / ten for d > 0 and rint(x / ten) * ten for d < 0 */      \
    EMBER_INLINE T ember_round##S(T x, int64_t decimals) {                                   \
        double p = 1.0;                                                                      \
        for (int64_t k = decimals < 0 ? -decimals : decimals; k > 0; k--) p *= 10.0;         \
        T ten = (T)p;                                                                        \
        T r = decimals > 0 ? ember_rint##S(x * ten) / ten : ember_rint##S(x / ten) * ten;    \
        return decimals == 0 ? ember_rint##S(x) : r;                                         \
    }                                                                                        \
    /* c10::div_floor_floating: the exact floor of the true quotient; a / b where b == 0 */  \
    EMBER_INLINE T ember_div_floor##S(T a, T b) {                                            \
        T mod = FMOD(a, b);                                                                  \
        T div = (a - mod) / b;                                                               \
        div = (mod != 0 & ((b < 0) != (mod < 0))) ? div - 1 : div;                          \
        T fl = ember_floor##S(div);                                                          \
        fl = (div - fl > (T)0.5) ? fl + 1 : fl;                                              \
        T q = a / b;                                                                         \
        fl = div == 0 ? __builtin_copysign##BS(ZERO, q) : fl;                                 \
        return b == 0 ? q : fl;                                                              \
    }                                                                                        \
    EMBER_INLINE T ember_div_trunc##S(T a, T b) { return ember_trunc##S(a / b); }            \
    EMBER_INLINE T ember_remainder##S(T a, T b) {                                            \
        T mod = FMOD(a, b);                                                                  \
        return (mod != 0 & ((b < 0) != (mod < 0))) ? mod + b : mod;                         \
    }                                                                                        \
    /* x * log(y), 0 where x == 0, NaN where y is NaN */                                     \
    EMBER_INLINE T ember_xlogy##S(T x, T y) {                                                \
        T r = ember__sel##S(x == 0, ZERO, x * ember_log##S(y));                              \
        return ember__sel##S(y != y, y, r);                                                  \
    }                                                                                        \
    EMBER_INLINE T ember_logaddexp##S(T a, T b) {                                            \
        T m = ember_maximum##S(a, b);                                                        \
        T r = m + ember_log1p##S(ember_exp##S(-ember_abs##S(a - b)));                        \
        return ember__sel##S(a == b & (a - a) != (a - a), a, r);                             \
    }                                                                                        \
    EMBER_INLINE T ember_nan_to_num##S(T x, double nan, double posinf, double neginf) {      \
        T r = ember__sel##S(x != x, (T)nan, x);                                              \
        r = ember__sel##S(x == (T)INFINITY, (T)posinf, r);                                   \
        return ember__sel##S(x == -(T)INFINITY, (T)neginf, r);                               \
    }                                                                                        \
    /* logit; eps is NaN for "no clamp" (eps=None), else x is clamped to [eps, 1 - eps] */   \
    EMBER_INLINE T ember_logit##S(T x, double eps) {                                         \
        T lo = (T)eps, hi = (T)(1.0 - eps);                                                  \
        T c = ember__sel##S(x < lo, lo, x);                                                  \
        c = ember__sel##S(c > hi, hi, c);                                                    \
        c = ember__sel##S(eps == eps & x == x, c, x);                                        \
        return ember_log##S(c / (1 - c));                                                    \
    }
EMBER__FLOAT_HELPERS(float, f, f, fmodf, 0.0f, 8388608.0f)

/* float16/bfloat16 variants where the eager kernel rounds an intermediate to the dtype
 * (cprelude.render_c_expr picks them for those dtypes) */
#define EMBER__LOWP_HELPERS(H)                                                               \
    /* trunc of the quotient rounded to the dtype (PyTorch's order) */                       \
    EMBER_INLINE float ember_div_trunc_##H(float a, float b) {                               \
        return ember_truncf(ember_round_##H(a / b));                                         \
    }                                                                                        \
    /* logit rounding after the clamp, 1 - x and the quotient, as the eager kernel */        \
    EMBER_INLINE float ember_logit_##H(float x, double eps) {                                \
        float lo = (float)eps, hi = (float)(1.0 - eps);                                      \
        float c = ember__self(x < lo, lo, x);                                                \
        c = ember__self(c > hi, hi, c);                                                      \
        c = ember__self(eps == eps & x == x, ember_round_##H(c), x);                         \
        float om = ember_round_##H(1.0f - c);                                                \
        return ember_logf(ember_round_##H(c / om));                                          \
    }
EMBER__LOWP_HELPERS(f16)
EMBER__LOWP_HELPERS(bf16)
#undef EMBER__LOWP_HELPERS
EMBER__FLOAT_HELPERS(double, d, , fmod, 0.0, 4503599627370496.0)
#undef EMBER__FLOAT_HELPERS

EMBER_INLINE float ember_powf(float a, float b) { return powf(a, b); }
EMBER_INLINE double ember_powd(double a, double b) { return pow(a, b); }
/* x ** e for a scalar exponent, as NumPy's power with a scalar exponent (``_red_pow``):
 * e == 0.5 is sqrt there (sqrt(-inf) = NaN, sqrt(-0) = -0, where pow gives inf, +0) */
EMBER_INLINE float ember_pow_scalarf(float x, float e) { return e == 0.5f ? sqrtf(x) : powf(x, e); }
EMBER_INLINE double ember_pow_scalard(double x, double e) { return e == 0.5 ? sqrt(x) : pow(x, e); }
EMBER_INLINE float ember_fmodf(float a, float b) { return fmodf(a, b); }
EMBER_INLINE double ember_fmodd(double a, double b) { return fmod(a, b); }

/* ------------------------------------------------------------------------- type-generic names */
/* Templates name these; float -> the f version, double -> the d version, integers (promoted:
 * bool/int8/uint8/int16/int32 arrive as int) -> the _i version where one exists. */
#define EMBER__G1(name, x) _Generic((x), float: name##f, default: name##d)(x)
#define EMBER__G2(name, a, b) _Generic((a) + (b), float: name##f, double: name##d,           \
                                       default: name##_i)(a, b)
#define EMBER__G2F(name, a, b) _Generic((a) + (b), float: name##f, default: name##d)(a, b)

#define ember_exp(x) EMBER__G1(ember_exp, x)
#define ember_expm1(x) EMBER__G1(ember_expm1, x)
#define ember_log(x) EMBER__G1(ember_log, x)
#define ember_log1p(x) EMBER__G1(ember_log1p, x)
#define ember_tanh(x) EMBER__G1(ember_tanh, x)
#define ember_sigmoid(x) EMBER__G1(ember_sigmoid, x)
#define ember_erf(x) EMBER__G1(ember_erf, x)
#define ember_erfc(x) EMBER__G1(ember_erfc, x)
#define ember_normal_cdf(x) EMBER__G1(ember_normal_cdf, x)
#define ember_gelu_erf(x) EMBER__G1(ember_gelu_erf, x)
#define ember_erfinv(x) EMBER__G1(ember_erfinv, x)
#define ember_logit(x, eps) _Generic((x), float: ember_logitf, default: ember_logitd)(x, eps)
#define ember_xlogy(a, b) EMBER__G2F(ember_xlogy, a, b)
#define ember_logaddexp(a, b) EMBER__G2F(ember_logaddexp, a, b)
#define ember_div_floor(a, b) EMBER__G2(ember_div_floor, a, b)
#define ember_div_trunc(a, b) EMBER__G2(ember_div_trunc, a, b)
#define ember_remainder(a, b) EMBER__G2(ember_remainder, a, b)
#define ember_fmod(a, b) EMBER__G2(ember_fmod, a, b)
#define ember_pow(a, b) EMBER__G2(ember_pow, a, b)
#define ember_pow_scalar(a, b) EMBER__G2(ember_pow_scalar, a, b)
#define ember_pow_scalar_i ember_pow_i
#define ember_maximum(a, b) EMBER__G2(ember_maximum, a, b)
#define ember_minimum(a, b) EMBER__G2(ember_minimum, a, b)
#define ember_fmax(a, b) EMBER__G2(ember_fmax, a, b)
#define ember_fmin(a, b) EMBER__G2(ember_fmin, a, b)
EMBER_INLINE int64_t ember_fmax_i(int64_t a, int64_t b) { return a >= b ? a : b; }
EMBER_INLINE int64_t ember_fmin_i(int64_t a, int64_t b) { return a <= b ? a : b; }
#define ember_abs(x) _Generic((x) + 0, float: ember_absf, double: ember_absd,                  \
                              default: ember_abs_i)(x)
/* rounding and classification are the identity / constant on integers, as the eager kernels */
EMBER_INLINE int64_t ember__ident_i(int64_t x) { return x; }
EMBER_INLINE bool ember__false_i(int64_t x) { (void)x; return false; }
EMBER_INLINE bool ember__true_i(int64_t x) { (void)x; return true; }
EMBER_INLINE bool ember_isnanf(float x) { return x != x; }
EMBER_INLINE bool ember_isnand(double x) { return x != x; }
EMBER_INLINE bool ember_isinff(float x) { return x == INFINITY | x == -INFINITY; }
EMBER_INLINE bool ember_isinfd(double x) { return x == INFINITY | x == -INFINITY; }
EMBER_INLINE bool ember_isfinitef(float x) { return x - x == 0.0f; }
EMBER_INLINE bool ember_isfinited(double x) { return x - x == 0.0; }
#define EMBER__G1I(name, iname, x) _Generic((x) + 0, float: name##f, double: name##d,         \
                                            default: iname)(x)
#define ember_floor(x) EMBER__G1I(ember_floor, ember__ident_i, x)
#define ember_ceil(x) EMBER__G1I(ember_ceil, ember__ident_i, x)
#define ember_trunc(x) EMBER__G1I(ember_trunc, ember__ident_i, x)
#define ember_rint(x) EMBER__G1I(ember_rint, ember__ident_i, x)
#define ember_isnan(x) EMBER__G1I(ember_isnan, ember__false_i, x)
#define ember_isinf(x) EMBER__G1I(ember_isinf, ember__false_i, x)
#define ember_isfinite(x) EMBER__G1I(ember_isfinite, ember__true_i, x)
EMBER_INLINE int64_t ember__round_i(int64_t x, int64_t d) { (void)d; return x; }
#define ember_round(x, d) _Generic((x) + 0, float: ember_roundf, double: ember_roundd,        \
                                   default: ember__round_i)(x, d)
EMBER_INLINE int64_t ember__nan_to_num_i(int64_t x, double a, double b, double c) {
    (void)a; (void)b; (void)c; return x;
}
#define ember_nan_to_num(x, nan, posinf, neginf) _Generic((x) + 0,                          \
    float: ember_nan_to_numf, double: ember_nan_to_numd,                                     \
    default: ember__nan_to_num_i)(x, nan, posinf, neginf)
/* bitwise not: logical not on bool */
#define ember_bitwise_not(x) _Generic((x), bool: !(x), default: ~(x))
/* a double constant in x's float type (what NumPy does with x * x.dtype.type(c)) */
#define ember_like(x, c) _Generic((x), float: (float)(c), default: (double)(c))
/* a * b + c rounded once, as PyTorch's CPU kernels compute add/sub with alpha and addcmul
 * (ember/ops/_fma.py does the same in eager): the instruction where the target has one, else
 * libm's exact fma (never the two roundings of EMBER_FMAF's fallback) */
#define ember_fma(a, b, c) _Generic((a) + (b) + (c), float: __builtin_fmaf,                     \
    default: __builtin_fma)(a, b, c)
/* a parameter (a double, or an int64 for integer kernels) in x's own type, as the eager
 * kernels convert a Python scalar (NumPy's weak scalars; ``_cast_params`` of the activations):
 * floats round; integer types truncate a float and wrap, through int64 as NumPy's casts do */
#define ember_as(x, c) _Generic((x), float: (float)(c), double: (double)(c),                  \
    bool: (bool)(c), uint8_t: (uint8_t)(int64_t)(c), int8_t: (int8_t)(int64_t)(c),           \
    int16_t: (int16_t)(int64_t)(c), int32_t: (int32_t)(int64_t)(c), default: (int64_t)(c))
/* c ? a : b with both a and b evaluated (a mask select, ember__self): a template's branches
 * that compute (x * slope, expm1(x)) stay outside control flow, so the loop vectorizes on AVX2
 * as on AVX-512 (gcc will not speculate a trapping FP operation under a plain ?:, and once
 * inlined a function's arguments are no longer "evaluated first").  Float types only (an
 * integer pair would go through double). */
EMBER_INLINE float ember_selectf(int c, float a, float b) { return ember__self(c, a, b); }
EMBER_INLINE double ember_selectd(int c, double a, double b) { return ember__seld(c, a, b); }
#define ember_select(c, a, b) _Generic((a) + (b), float: ember_selectf,                      \
                                       default: ember_selectd)(c, a, b)
/* c ? a : b for a template over any dtype (where, safe division): the mask select above for
 * float/double, a plain ?: for integers and bool (gcc if-converts integer selects, and an
 * integer arm such as a division must not run where it is not selected) */
#define ember_where(c, a, b) _Generic((a) + (b), float: ember_selectf((c), (a), (b)),         \
                                      double: ember_selectd((c), (a), (b)),                  \
                                      default: ((c) ? (a) : (b)))
/* the float formula f for float (float32, and float16/bfloat16 computed in float), else d:
 * for an eager kernel whose float32 path computes differently from its float64 one */
#define ember_pick(x, f, d) _Generic((x), float: (f), default: (d))
/* np.sign in the kernel's dtype: NaN stays NaN, a zero gives +0 (NumPy); bfloat16's sign
 * (ml_dtypes) returns the zero itself.  For float types. */
#define ember_np_sign(x) ((x) > 0 ? 1 : ((x) < 0 ? -1 : ((x) != (x) ? (x) : 0)))
EMBER_INLINE float ember_np_sign_f16(float x) { return ember_np_sign(x); }
EMBER_INLINE float ember_np_sign_bf16(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
/* an intermediate rounded to the kernel's dtype where the eager kernel rounds it (PyTorch
 * builds the op from several float16/bfloat16 ops): nothing in float32/float64; the
 * float16/bfloat16 variants (cprelude.render_c_expr / the lowering pick them) round */
#define ember_dtype_round(x) (x)
EMBER_INLINE float ember_dtype_round_f16(float x) { return ember_round_f16(x); }
EMBER_INLINE float ember_dtype_round_bf16(float x) { return ember_round_bf16(x); }

/* libm-backed names (correct, not vectorized) */
#define EMBER__LIBM1(x, fn) _Generic((x), float: fn##f, default: fn)(x)
#define EMBER__LIBM2(a, b, fn) _Generic((a) + (b), float: fn##f, default: fn)(a, b)
#define ember_sqrt(x) EMBER__LIBM1(x, sqrt)
#define ember_exp2(x) EMBER__LIBM1(x, exp2)
#define ember_log2(x) EMBER__LIBM1(x, log2)
#define ember_log10(x) EMBER__LIBM1(x, log10)
#define ember_sin(x) EMBER__LIBM1(x, sin)
#define ember_cos(x) EMBER__LIBM1(x, cos)
#define ember_tan(x) EMBER__LIBM1(x, tan)
#define ember_asin(x) EMBER__LIBM1(x, asin)
#define ember_acos(x) EMBER__LIBM1(x, acos)
#define ember_atan(x) EMBER__LIBM1(x, atan)
#define ember_sinh(x) EMBER__LIBM1(x, sinh)
#define ember_cosh(x) EMBER__LIBM1(x, cosh)
#define ember_asinh(x) EMBER__LIBM1(x, asinh)
#define ember_acosh(x) EMBER__LIBM1(x, acosh)
#define ember_atanh(x) EMBER__LIBM1(x, atanh)
#define ember_atan2(a, b) EMBER__LIBM2(a, b, atan2)
#define ember_hypot(a, b) EMBER__LIBM2(a, b, hypot)
#define ember_copysign(a, b) EMBER__LIBM2(a, b, copysign)

/* digamma and trigamma in double, the eager kernels' steps (ember/ops/special_gamma.py, after
 * PyTorch's calc_digamma / calc_trigamma): reflection below 0 (digamma) or 0.5 (trigamma),
 * recurrence, asymptotic series; every dtype computes in double and rounds once */
EMBER_INLINE double ember_digamma_d(double x) {
    static const double a[7] = {
        8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
        -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
        8.33333333333333333333e-2};
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0 && x == floor(x)) return NAN;  /* negative integers and -inf */
    if (x == INFINITY) return INFINITY;
    double z = x, reflect = 0.0, acc = 0.0, poly = 0.0;
    if (x < 0) {
        reflect = 3.141592653589793 / tan(3.141592653589793 * (x - trunc(x)));
        z = 1 - x;
    }
    for (int k = 0; k < 10 && z < 10; k++) {
        acc = acc - 1 / z;
        z = z + 1;
    }
    double zz = 1 / (z * z);
    for (int k = 0; k < 7; k++) poly = poly * zz + a[k];
    double series = z < 1e17 ? zz * poly : 0.0;
    double res = z == 10 ? acc + 2.25175258906672110764 : acc + log(z) - 0.5 / z - series;
    return x < 0 ? res - reflect : res;
}
EMBER_INLINE double ember_trigamma_d(double x) {
    double z = x, sign = 1.0, res = 0.0;
    if (z < 0.5) {
        double s = sin(3.141592653589793 * z);
        res = -(3.141592653589793 * 3.141592653589793) / (s * s);
        sign = -1.0;
        z = 1 - z;
    }
    for (int k = 0; k < 6; k++) {
        res += 1 / (z * z);
        z = z + 1;
    }
    double ixx = 1 / (z * z);
    res += (1 + 1 / (2 * z) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / z;
    return sign * res;
}
EMBER_INLINE float ember_digammaf(float x) { return (float)ember_digamma_d(x); }
EMBER_INLINE double ember_digammad(double x) { return ember_digamma_d(x); }
EMBER_INLINE float ember_digamma_f16(float x) {
    return ember_f16_to_f32(ember_f64_to_f16(ember_digamma_d(x)));
}
EMBER_INLINE float ember_digamma_bf16(float x) {
    return ember_bf16_to_f32(ember_f64_to_bf16(ember_digamma_d(x)));
}
EMBER_INLINE float ember_trigammaf(float x) { return (float)ember_trigamma_d(x); }
EMBER_INLINE double ember_trigammad(double x) { return ember_trigamma_d(x); }
EMBER_INLINE float ember_trigamma_f16(float x) {
    return ember_f16_to_f32(ember_f64_to_f16(ember_trigamma_d(x)));
}
EMBER_INLINE float ember_trigamma_bf16(float x) {
    return ember_bf16_to_f32(ember_f64_to_bf16(ember_trigamma_d(x)));
}
#define ember_digamma(x) EMBER__G1(ember_digamma, x)
#define ember_trigamma(x) EMBER__G1(ember_trigamma, x)

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif /* EMBER_PRELUDE_H */
