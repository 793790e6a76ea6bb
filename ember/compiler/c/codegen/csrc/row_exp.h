/* exp(x - m) over a float row and its sum: the exp pass of softmax and log_softmax, shared by
 * the C backend's row kernels (codegen/unit.py, codegen/half.py) and eager's C softmax
 * (ember/ops/csrc/act_eager.c), so both give the same bits.
 *
 * The argument x - m is <= 0 (m is the row's max) or NaN, so exp never overflows and one
 * scaling suffices.  Per element: the reduction k = rint((x - m) / ln2), r = (x - m) - k ln2
 * (ln2 in two parts, fma), a degree-6 polynomial for exp(r) on |r| <= ln2/2 (relative error
 * 2e-9, fitted for this header) and the scaling by 2**k:
 *   - AVX-512: vscalefps, one instruction, masked to 0 where x - m < -87.34;
 *   - AVX2/FMA (x86-64-v3): 2**k built in the exponent field by an integer shift and add,
 *     one multiplication, and an and-not for x - m < -87.34;
 *   - elsewhere: the same formula in scalar C (the fallback's fma is a*b + c where the target
 *     has no fast fma).
 * Results below FLT_MIN (x - m < -87.34, -inf included) are 0 on every path: they are below
 * 1.2e-38 absolute (no softmax tolerance sees them), and AVX2 has no cheap subnormal scaling.
 * NaN propagates.  The AVX2 and AVX-512 paths run the same operations per lane (vscalefps and
 * the multiplication by 2**k round alike), so they give the same bits.
 * The result is within 2 ulp of exp (tests/compiler/test_row_exp.py).  The sum adds the
 * values in 16 float lanes over blocks of 256 columns and the blocks' lanes in double lanes,
 * combined in a fixed order (below): about as accurate as a double sum, at float speed.
 * y may equal x (in place) or be NULL (log_softmax: the sum only); pf, when not NULL, is the
 * next row (elements of pfsz bytes), fetched into L1 while this row's exp runs.  No libm, no
 * -ffast-math. */
#ifndef EMBER_ROW_EXP_H
#define EMBER_ROW_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#define EMBER_REXP_LOG2E 1.44269504088896341f
#define EMBER_REXP_LN2HI 0.693145751953125f      /* 15 bits: k * LN2HI is exact */
#define EMBER_REXP_LN2LO 1.42860676533018708e-06f
#define EMBER_REXP_MAGIC 12582912.0f             /* 1.5 * 2**23: rounds to an integer */
#define EMBER_REXP_C6 0x1.6ae73p-10f
#define EMBER_REXP_C5 0x1.126782p-7f
#define EMBER_REXP_C4 0x1.555822p-5f
#define EMBER_REXP_C3 0x1.55541ap-3f
#define EMBER_REXP_C2 0x1.fffffcp-2f
#define EMBER_REXP_BLOCK 256                     /* columns summed in float lanes */
#define EMBER_REXP_UNDER -87.33654f               /* exp(x) >= FLT_MIN above */

#if defined(__FMA__) || defined(__AVX512F__)
#define EMBER_REXP_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define EMBER_REXP_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* one element: the vector code's operations in scalar form (the portable path).  x < -87.34
   (exp(x) < FLT_MIN; -inf included) gives 0, NaN gives NaN */
static inline float ember_row_exp1(float x) {
    const float kr = EMBER_REXP_FMA(x, EMBER_REXP_LOG2E, EMBER_REXP_MAGIC);
    const float k = kr - EMBER_REXP_MAGIC;
    float r = EMBER_REXP_FMA(k, -EMBER_REXP_LN2HI, x);
    r = EMBER_REXP_FMA(k, -EMBER_REXP_LN2LO, r);
    float p = EMBER_REXP_FMA(EMBER_REXP_C6, r, EMBER_REXP_C5);
    p = EMBER_REXP_FMA(p, r, EMBER_REXP_C4);
    p = EMBER_REXP_FMA(p, r, EMBER_REXP_C3);
    p = EMBER_REXP_FMA(p, r, EMBER_REXP_C2);
    p = EMBER_REXP_FMA(p, r, 1.0f);
    p = EMBER_REXP_FMA(p, r, 1.0f);
    uint32_t u;
    memcpy(&u, &kr, 4);
    u = (u << 23) + 0x3f800000u;                          /* 2**k for k >= -126 */
    float s;
    memcpy(&s, &u, 4);
    const float y = p * s;
    return x < EMBER_REXP_UNDER ? 0.0f : y;
}

/* The sum's order, the same on every path (so AVX2, AVX-512 and scalar builds agree bit for
   bit): column c adds into float lane c % 16 within blocks of EMBER_REXP_BLOCK columns; at the
   end of a block each lane adds into its double lane; the row's sum is
   sum over i = 0..7 in order of (d[i] + d[i + 8]), rounded to float. */
#if defined(__AVX512F__)
static inline __m512 ember__rexp16(__m512 x, __m512 m) {
    const __m512 xm = _mm512_sub_ps(x, m);
    /* lanes with x - m >= -87.34 or NaN keep their value, the others become 0 */
    const __mmask16 live = _mm512_cmp_ps_mask(xm, _mm512_set1_ps(EMBER_REXP_UNDER), _CMP_NLT_UQ);
    const __m512 kr = _mm512_fmadd_ps(xm, _mm512_set1_ps(EMBER_REXP_LOG2E),
                                      _mm512_set1_ps(EMBER_REXP_MAGIC));
    const __m512 k = _mm512_sub_ps(kr, _mm512_set1_ps(EMBER_REXP_MAGIC));
    __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-EMBER_REXP_LN2HI), xm);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(-EMBER_REXP_LN2LO), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EMBER_REXP_C6), r, _mm512_set1_ps(EMBER_REXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EMBER_REXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EMBER_REXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EMBER_REXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(live, p, k);            /* p * 2**k, one instruction */
}

static inline float ember_row_expsum(float *y, const float *x, float m, int64_t C,
                                     const char *pf, int pfsz) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512d d0 = _mm512_setzero_pd(), d1 = _mm512_setzero_pd();
    int64_t c = 0;
    while (c < C) {
        const int64_t end = C - c < EMBER_REXP_BLOCK ? C : c + EMBER_REXP_BLOCK;
        __m512 s = _mm512_setzero_ps();
        for (; c + 16 <= end; c += 16) {
            if (pf) _mm_prefetch(pf + c * pfsz, _MM_HINT_T0);
            const __m512 e = ember__rexp16(_mm512_loadu_ps(x + c), mv);
            if (y) _mm512_storeu_ps(y + c, e);
            s = _mm512_add_ps(s, e);
        }
        if (c < end) {                                    /* the row's last 1-15 columns */
            const __mmask16 t = (__mmask16)((1u << (end - c)) - 1u);
            const __m512 e = ember__rexp16(_mm512_maskz_loadu_ps(t, x + c), mv);
            if (y) _mm512_mask_storeu_ps(y + c, t, e);
            s = _mm512_mask_add_ps(s, t, s, e);
            c = end;
        }
        d0 = _mm512_add_pd(d0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
        d1 = _mm512_add_pd(d1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                   _mm512_castps_pd(s), 1))));
    }
    double l[8];
    _mm512_storeu_pd(l, _mm512_add_pd(d0, d1));
    double t = l[0];
    for (int i = 1; i < 8; i++) t += l[i];
    return (float)t;
}

#elif defined(__AVX2__) && defined(__FMA__)
static inline __m256 ember__rexp8(__m256 x, __m256 m) {
    const __m256 xm = _mm256_sub_ps(x, m);
    const __m256 kr = _mm256_fmadd_ps(xm, _mm256_set1_ps(EMBER_REXP_LOG2E),
                                      _mm256_set1_ps(EMBER_REXP_MAGIC));
    const __m256 k = _mm256_sub_ps(kr, _mm256_set1_ps(EMBER_REXP_MAGIC));
    __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-EMBER_REXP_LN2HI), xm);
    r = _mm256_fmadd_ps(k, _mm256_set1_ps(-EMBER_REXP_LN2LO), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EMBER_REXP_C6), r, _mm256_set1_ps(EMBER_REXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EMBER_REXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EMBER_REXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EMBER_REXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i u = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(kr), 23),
                                       _mm256_set1_epi32(0x3f800000));
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(u));
    const __m256 under = _mm256_cmp_ps(xm, _mm256_set1_ps(EMBER_REXP_UNDER), _CMP_LT_OQ);
    return _mm256_andnot_ps(under, y);
}

/* 8 columns from x + c into lanes of acc (n < 8: the first n; the other lanes add 0) */
static inline __m256 ember__rexp8_add(__m256 acc, float *y, const float *x, int64_t c, int n,
                                      __m256 mv) {
    if (n == 8) {
        const __m256 e = ember__rexp8(_mm256_loadu_ps(x + c), mv);
        if (y) _mm256_storeu_ps(y + c, e);
        return _mm256_add_ps(acc, e);
    }
    const __m256i t = _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 e = _mm256_and_ps(ember__rexp8(_mm256_maskload_ps(x + c, t), mv),
                                   _mm256_castsi256_ps(t));
    if (y) _mm256_maskstore_ps(y + c, t, e);
    return _mm256_add_ps(acc, e);
}

static inline float ember_row_expsum(float *y, const float *x, float m, int64_t C,
                                     const char *pf, int pfsz) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256d d00 = _mm256_setzero_pd(), d01 = _mm256_setzero_pd();   /* lanes 0-3, 4-7 */
    __m256d d10 = _mm256_setzero_pd(), d11 = _mm256_setzero_pd();   /* lanes 8-11, 12-15 */
    int64_t c = 0;
    while (c < C) {
        const int64_t end = C - c < EMBER_REXP_BLOCK ? C : c + EMBER_REXP_BLOCK;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        for (; c + 16 <= end; c += 16) {
            if (pf) _mm_prefetch(pf + c * pfsz, _MM_HINT_T0);
            s0 = ember__rexp8_add(s0, y, x, c, 8, mv);
            s1 = ember__rexp8_add(s1, y, x, c + 8, 8, mv);
        }
        if (c < end) {                                    /* the row's last 1-15 columns */
            const int n = (int)(end - c);
            s0 = ember__rexp8_add(s0, y, x, c, n < 8 ? n : 8, mv);
            if (n > 8) s1 = ember__rexp8_add(s1, y, x, c + 8, n - 8, mv);
            c = end;
        }
        d00 = _mm256_add_pd(d00, _mm256_cvtps_pd(_mm256_castps256_ps128(s0)));
        d01 = _mm256_add_pd(d01, _mm256_cvtps_pd(_mm256_extractf128_ps(s0, 1)));
        d10 = _mm256_add_pd(d10, _mm256_cvtps_pd(_mm256_castps256_ps128(s1)));
        d11 = _mm256_add_pd(d11, _mm256_cvtps_pd(_mm256_extractf128_ps(s1, 1)));
    }
    double l[8];
    _mm256_storeu_pd(l, _mm256_add_pd(d00, d10));
    _mm256_storeu_pd(l + 4, _mm256_add_pd(d01, d11));
    double t = l[0];
    for (int i = 1; i < 8; i++) t += l[i];
    return (float)t;
}

#else
static inline float ember_row_expsum(float *y, const float *x, float m, int64_t C,
                                     const char *pf, int pfsz) {
    double d[16] = {0.0};
    (void)pf; (void)pfsz;
    for (int64_t cb = 0; cb < C; cb += EMBER_REXP_BLOCK) {
        const int64_t end = C - cb < EMBER_REXP_BLOCK ? C : cb + EMBER_REXP_BLOCK;
        float s[16] = {0.0f};
        for (int64_t c = cb; c < end; c++) {
            const float e = ember_row_exp1(x[c] - m);
            if (y) y[c] = e;
            s[(c - cb) & 15] += e;
        }
        for (int i = 0; i < 16; i++) d[i] += (double)s[i];
    }
    double t = d[0] + d[8];
    for (int i = 1; i < 8; i++) t += d[i] + d[i + 8];
    return (float)t;
}
#endif

/* The row's max for softmax/log_softmax, in 4 independent vector chains (one chain is bound by
   the compare-and-blend latency: ~6 cycles a vector).  It need not propagate NaN: a NaN
   column makes exp(x - m) and so the row's sum NaN, and every output with it (softmax
   scales by 1 / sum, log_softmax subtracts log(sum)), whatever m is.  Exact, so every path
   and order gives the same m for a row without NaN; -inf for an empty or all -inf row. */
#if defined(__AVX512F__)
static inline float ember_row_max(const float *x, int64_t C) {
    __m512 a0 = _mm512_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 64 <= C; c += 64) {
        a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + c));
        a1 = _mm512_max_ps(a1, _mm512_loadu_ps(x + c + 16));
        a2 = _mm512_max_ps(a2, _mm512_loadu_ps(x + c + 32));
        a3 = _mm512_max_ps(a3, _mm512_loadu_ps(x + c + 48));
    }
    for (; c + 16 <= C; c += 16) a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + c));
    if (c < C) {
        const __mmask16 t = (__mmask16)((1u << (C - c)) - 1u);
        a1 = _mm512_mask_max_ps(a1, t, a1, _mm512_maskz_loadu_ps(t, x + c));
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
}
#elif defined(__AVX2__) && defined(__FMA__)
static inline float ember_row_max(const float *x, int64_t C) {
    __m256 a0 = _mm256_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 32 <= C; c += 32) {
        a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + c));
        a1 = _mm256_max_ps(a1, _mm256_loadu_ps(x + c + 8));
        a2 = _mm256_max_ps(a2, _mm256_loadu_ps(x + c + 16));
        a3 = _mm256_max_ps(a3, _mm256_loadu_ps(x + c + 24));
    }
    for (; c + 8 <= C; c += 8) a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + c));
    float l[8];
    _mm256_storeu_ps(l, _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
    float m = l[0];
    for (int i = 1; i < 8; i++) m = l[i] > m ? l[i] : m;
    for (; c < C; c++) m = x[c] > m ? x[c] : m;
    return m;
}
#else
static inline float ember_row_max(const float *x, int64_t C) {
    float m = -INFINITY;
    for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;
    return m;
}
#endif

/* y[c] *= 1 / s: softmax's normalization, one reciprocal per row (within 1.5 ulp of the
 * quotient; PyTorch's CPU kernel also multiplies by the reciprocal).  A NaN sum (a NaN or +inf
 * column, or a row of -inf) makes the whole row the quiet NaN 0x7fc00000: which NaN the
 * arithmetic would propagate depends on the order gcc gives an fma's or a product's operands,
 * and eager and compiled rows must agree bit for bit. */
static inline void ember_row_scale(float *restrict y, float s, int64_t C) {
    const float inv = 1.0f / s;
    if (inv != inv) {
        for (int64_t c = 0; c < C; c++) y[c] = __builtin_nanf("");
        return;
    }
    for (int64_t c = 0; c < C; c++) y[c] = y[c] * inv;
}

/* softmax's last pass for a float16/bfloat16 row: d[c] = round(s_[c] / s) in one pass over the
 * float row (scale, round to the dtype, store), the values of ember_row_scale followed by
 * half_block.h's block store.  bfloat16 on AVX512-BF16 rounds with vcvtneps2bf16 (nearest
 * even, as ember_f32_to_bf16), which flushes subnormal inputs: a block holding a value below
 * FLT_MIN (rare: outputs below 1.2e-38) takes the integer rounding instead.  NaN cannot occur
 * but in a NaN row, which is the canonical NaN (0x7fc00000 -> 0x7e00 / 0x7fc0), as in float. */
#if defined(EMBER_HALF_BLOCK_H)
static inline void ember_row_scale_f16(uint16_t *restrict d, float *restrict src, float s,
                                       int64_t C) {
#if defined(__AVX512F__)
    const float inv = 1.0f / s;
    int64_t c = 0;
    if (inv == inv) {
        const __m512 iv = _mm512_set1_ps(inv);
        for (; c + 16 <= C; c += 16)
            _mm256_storeu_si256((__m256i *)(d + c), _mm512_cvtps_ph(
                _mm512_mul_ps(_mm512_loadu_ps(src + c), iv), _MM_FROUND_TO_NEAREST_INT));
    }
    ember_row_scale(src + c, s, C - c);
    ember_f16_store_n(d + c, src + c, C - c);
#else
    ember_row_scale(src, s, C);
    ember_f16_store_n(d, src, C);
#endif
}

static inline void ember_row_scale_bf16(uint16_t *restrict d, float *restrict src, float s,
                                        int64_t C) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
    const float inv = 1.0f / s;
    if (inv != inv) {
        ember_row_scale(src, s, C);
        ember_bf16_store_n(d, src, C);
        return;
    }
    const __m512 iv = _mm512_set1_ps(inv), tiny = _mm512_set1_ps(1.17549435e-38f);
    int64_t c = 0;
    for (; c + 16 <= C; c += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(src + c), iv);
        if (_mm512_cmp_ps_mask(v, tiny, _CMP_LT_OQ) & _mm512_cmp_ps_mask(v, _mm512_setzero_ps(),
                                                                         _CMP_NEQ_UQ)) {
            _mm512_storeu_ps(src + c, v);                 /* a subnormal: the exact rounding */
            ember_bf16_store_n(d + c, src + c, 16);
        } else {
            _mm256_storeu_si256((__m256i *)(d + c), (__m256i)_mm512_cvtneps_pbh(v));
        }
    }
    ember_row_scale(src + c, s, C - c);                   /* the last 1-15 columns */
    ember_bf16_store_n(d + c, src + c, C - c);
#else
    ember_row_scale(src, s, C);
    ember_bf16_store_n(d, src, C);
#endif
}
#endif

#endif /* EMBER_ROW_EXP_H */
