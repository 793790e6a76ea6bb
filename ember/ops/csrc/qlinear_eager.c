/* int8 dynamic linear (ember/ops/_qlinear_c.py), fbgemm's arithmetic on a packed weight:
     out[n, m] = fmaf((float)(sum_k xq[n, k] * w[m, k] - zx[n] * colsum[m]),
                      sx[n] * wscale[m], bias[m])
   xq = clamp(nearbyint(fma(x, inv[n], zx[n])), 0, qmax): uint8 codes made here, row block by
   row block, from the float32 input (activation quantization fused into the product); the
   input scale sx and zero point zx are per row (one value for all rows: PyTorch's per-tensor
   dynamic quantization; or per token).
   The weight is packed once at quantize time (ember/ao/quantization/_dynamic_kernel.py):
   blocks of 16 output columns, K padded to a multiple of 4, byte (col c, k) of a block at
   [k / 4][c][k % 4], so one 64-byte load holds 4 k values of 16 columns and one 32-bit
   broadcast of x feeds all of them:
     AVX512-VNNI: vpdpbusd zmm (16 int32 column sums per instruction)
     AVX-VNNI:    vpdpbusd ymm (VEX)
     AVX-512BW / AVX2: vpmaddubsw (u8 x s8 pairs, 2 * 127 * 128 < 32767: no saturation for
                  codes <= 127, PyTorch's reduce_range) + vpmaddwd by ones + vpaddd; codes up
                  to 255 are split as 2 * (x >> 1) + (x & 1), two vpmaddubsw per step
     otherwise a scalar loop over the same layout.
   Integer sums are exact in any order, so every path (and the NumPy path) gives the same bits;
   the epilogue is one fma per output, as fbgemm's AVX2 requantization. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define VL 16                          /* int32 lanes (= output columns) per vector */
#define NR 8                           /* rows of x per tile */
#define MV 3                           /* column vectors per tile: 24 accumulators */
typedef __m512i vacc;
#define VZERO() _mm512_setzero_si512()
#define VLOADW(p) _mm512_loadu_si512((const void *)(p))
#define VBCAST(v) _mm512_set1_epi32(v)
#define VDOT(acc, xb, w) _mm512_dpbusd_epi32(acc, xb, w)
#define VLOADA(p) _mm512_loadu_si512((const void *)(p))
#define VSTOREA(p, v) _mm512_storeu_si512((void *)(p), v)
#elif defined(__AVX512BW__)
#define VL 16
#define NR 6
#define MV 3
typedef __m512i vacc;
#define VLOADA(p) _mm512_loadu_si512((const void *)(p))
#define VSTOREA(p, v) _mm512_storeu_si512((void *)(p), v)
#define VZERO() _mm512_setzero_si512()
#define VLOADW(p) _mm512_loadu_si512((const void *)(p))
#define VBCAST(v) _mm512_set1_epi32(v)
#define VDOT(acc, xb, w) _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(xb, w), \
                                                                _mm512_set1_epi16(1)))
/* 8-bit codes: x = 2 * (x >> 1) + (x & 1), each half's pair sums fit int16 */
#define SPLIT 1
#define VHI(xb) _mm512_and_si512(_mm512_srli_epi16(xb, 1), _mm512_set1_epi8(0x7f))
#define VLO(xb) _mm512_and_si512(xb, _mm512_set1_epi8(1))
#define VDOT2(acc, xh, xl, w) _mm512_add_epi32(_mm512_add_epi32(acc, _mm512_madd_epi16( \
    _mm512_maddubs_epi16(xh, w), _mm512_set1_epi16(2))), _mm512_madd_epi16( \
    _mm512_maddubs_epi16(xl, w), _mm512_set1_epi16(1)))
#elif defined(__AVX2__) && defined(__AVXVNNI__)
#define VL 8
#define NR 6
#define MV 2
typedef __m256i vacc;
#define VZERO() _mm256_setzero_si256()
#define VLOADW(p) _mm256_loadu_si256((const __m256i *)(p))
#define VBCAST(v) _mm256_set1_epi32(v)
#define VDOT(acc, xb, w) _mm256_dpbusd_avx_epi32(acc, xb, w)
#define VLOADA(p) _mm256_loadu_si256((const __m256i *)(p))
#define VSTOREA(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#elif defined(__AVX2__)
#define VL 8
#define NR 4
#define MV 2
typedef __m256i vacc;
#define VLOADA(p) _mm256_loadu_si256((const __m256i *)(p))
#define VSTOREA(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define VZERO() _mm256_setzero_si256()
#define VLOADW(p) _mm256_loadu_si256((const __m256i *)(p))
#define VBCAST(v) _mm256_set1_epi32(v)
#define VDOT(acc, xb, w) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(xb, w), \
                                                                _mm256_set1_epi16(1)))
#define SPLIT 1
#define VHI(xb) _mm256_and_si256(_mm256_srli_epi16(xb, 1), _mm256_set1_epi8(0x7f))
#define VLO(xb) _mm256_and_si256(xb, _mm256_set1_epi8(1))
#define VDOT2(acc, xh, xl, w) _mm256_add_epi32(_mm256_add_epi32(acc, _mm256_madd_epi16( \
    _mm256_maddubs_epi16(xh, w), _mm256_set1_epi16(2))), _mm256_madd_epi16( \
    _mm256_maddubs_epi16(xl, w), _mm256_set1_epi16(1)))
#else
#define VL 1
#define NR 1
#define MV 16
#endif

#define BLK 16                          /* columns per packed block */
#define MPAD 48                         /* packed columns: a multiple of every MV * VL */
#define KC 512                          /* K chunk (bytes of a weight row) per pass */

/* the address of column vector c (VL columns from col0) at k4 in a packed weight whose
   16-column blocks are kp * 16 bytes apart (col0 a multiple of 16) */
static inline const int8_t *wvec(const int8_t *wp, int64_t kp, int64_t col0, int c,
                                 int64_t k4) {
    int64_t col = col0 + (int64_t)c * VL;
    return wp + (col / BLK) * kp * BLK + k4 * 4 * BLK + (col % BLK) * 4;
}

/* fbgemm's Quantize of one row: code = clamp(nearbyint(fma(x, inv, zp)), 0, qmax); bytes
   [k, kp) are zero (padding meets zero weights) */
static void quantize_row(const float *x, int64_t k, int64_t kp, float inv, float zp, float qmax,
                         uint8_t *q) {
    int64_t i = 0;
#if defined(__AVX512F__)
    const __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps(zp), vq = _mm512_set1_ps(qmax);
    for (; i + 16 <= k; i += 16) {
        __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vi, vz);
        v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), vq);
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v)));
    }
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256 vi = _mm256_set1_ps(inv), vz = _mm256_set1_ps(zp), vq = _mm256_set1_ps(qmax);
    for (; i + 8 <= k; i += 8) {
        __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), vi, vz);
        v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), vq);
        __m256i c = _mm256_cvtps_epi32(v);
        __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packus_epi16(h, h));
    }
#endif
    for (; i < k; i++) {
        float v = nearbyintf(fmaf(x[i], inv, zp));
        v = v > 0.0f ? v : 0.0f;                 /* NaN -> 0, as the vector max(v, 0) */
        q[i] = (uint8_t)(v < qmax ? v : qmax);
    }
    for (; i < kp; i++) q[i] = 0;
}

#if VL > 1
static inline int32_t load4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* out[0:valid] = fma(float(acc - zx * colsum[j:]), float32(sx * wscale[j:]), bias[j:])
   (colsum, wscale, bias padded to whole vectors; sx, zx: the row's input scale, zero point) */
#if VL == 16
static inline void epilogue(vacc acc, int64_t j, int64_t valid, int32_t zx, float sx,
                            const int32_t *colsum, const float *wscale, const float *bias,
                            float *out) {
    __m512i raw = _mm512_sub_epi32(acc, _mm512_mullo_epi32(_mm512_set1_epi32(zx),
                                                          _mm512_loadu_si512(colsum + j)));
    __m512 f = _mm512_cvtepi32_ps(raw);
    __m512 m = _mm512_mul_ps(_mm512_set1_ps(sx), _mm512_loadu_ps(wscale + j));
    __m512 y = bias ? _mm512_fmadd_ps(f, m, _mm512_loadu_ps(bias + j)) : _mm512_mul_ps(f, m);
    _mm512_mask_storeu_ps(out, (__mmask16)((1u << valid) - 1u), y);
}
#elif VL == 8
static inline void epilogue(vacc acc, int64_t j, int64_t valid, int32_t zx, float sx,
                            const int32_t *colsum, const float *wscale, const float *bias,
                            float *out) {
    __m256i raw = _mm256_sub_epi32(acc, _mm256_mullo_epi32(
        _mm256_set1_epi32(zx), _mm256_loadu_si256((const __m256i *)(colsum + j))));
    __m256 f = _mm256_cvtepi32_ps(raw);
    __m256 m = _mm256_mul_ps(_mm256_set1_ps(sx), _mm256_loadu_ps(wscale + j));
    __m256 y = bias ? _mm256_fmadd_ps(f, m, _mm256_loadu_ps(bias + j)) : _mm256_mul_ps(f, m);
    if (valid == 8) {
        _mm256_storeu_ps(out, y);
    } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, y);
        memcpy(out, tmp, (size_t)valid * sizeof(float));
    }
}
#endif

/* accumulators as named variables (gcc keeps a 2-d array of vectors on the stack) */
#if NR == 8
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#elif NR == 6
#define FOR_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#else
#define FOR_ROWS(X) X(0) X(1) X(2) X(3)
#endif
#if MV == 3
#define FOR_COLS(X, r) X(r, 0) X(r, 1) X(r, 2)
#else
#define FOR_COLS(X, r) X(r, 0) X(r, 1)
#endif
#define DECL_C(r, c) vacc a##r##_##c = first ? VZERO() : VLOADA(part + (r * MV + c) * VL);
#define SAVE_C(r, c) VSTOREA(part + (r * MV + c) * VL, a##r##_##c);
#define SAVE_R(r) FOR_COLS(SAVE_C, r)
#define DECL_R(r) FOR_COLS(DECL_C, r)
#define DOT_C(r, c) a##r##_##c = VDOT(a##r##_##c, xb##r, w##c);
#define DOT_R(r) { vacc xb##r = VBCAST(load4(xq + r * kp + 4 * k4)); FOR_COLS(DOT_C, r) }
#define DOT2_C(r, c) a##r##_##c = VDOT2(a##r##_##c, xh##r, xl##r, w##c);
#define DOT2_R(r) { vacc xb##r = VBCAST(load4(xq + r * kp + 4 * k4)); \
                    vacc xh##r = VHI(xb##r), xl##r = VLO(xb##r); FOR_COLS(DOT2_C, r) }
#define LOADW(c) vacc w##c = VLOADW(wvec(wp, kp, col0, c, k4));
#define EPI_C(r, c) if (r < rows && col0 + c * VL < m1) \
    epilogue(a##r##_##c, col0 + c * VL, m1 - col0 - c * VL < VL ? m1 - col0 - c * VL : VL, \
             (int32_t)rzp[r], rscale[r], colsum, wscale, bias, out + r * ldo + col0 + c * VL);
#define EPI_R(r) FOR_COLS(EPI_C, r)
#define LOADW_ALL FOR_COLS(LOADW_C, _)
#define LOADW_C(_, c) LOADW(c)

/* NR rows of quantized x (rows kp bytes apart) times MV column vectors from col0 (the packed
   weight is padded to whole tiles) over k in [4 * k4a, 4 * k4b): the sums start at zero
   (first) or from part (NR * MV vectors of int32), and end in part or, when last, in the
   epilogue, which writes the rows < rows and the columns < m1 of out (ldo floats a row) */
static void tile(const uint8_t *xq, int64_t kp, const int8_t *wp, int64_t col0, int rows,
                 int64_t m1, const float *rzp, const float *rscale, const int32_t *colsum,
                 const float *wscale, const float *bias, float *out, int64_t ldo, int wide,
                 int64_t k4a, int64_t k4b, int32_t *part, int first, int last) {
    FOR_ROWS(DECL_R)
#ifdef SPLIT
    if (wide) {           /* codes above 127: vpmaddubsw's int16 pair sums could saturate */
        for (int64_t k4 = k4a; k4 < k4b; k4++) {
            LOADW_ALL
            FOR_ROWS(DOT2_R)
        }
    } else
#endif
    for (int64_t k4 = k4a; k4 < k4b; k4++) {
        LOADW_ALL
        FOR_ROWS(DOT_R)
    }
    if (last) {
        FOR_ROWS(EPI_R)
    } else {
        FOR_ROWS(SAVE_R)
    }
}
#endif

/* rows [n0, n1) and columns [m0, m1) of out (ldo floats a row); m0 a multiple of MPAD.
   x: float32 rows of ldx floats; row r is quantized with rinv[r] (1 / scale), rzp[r] (its
   integer zero point as a float) and clamped to [0, qmax], and rescaled by rscale[r] (the same
   values in every row for PyTorch's per-tensor input quantization); wp: the packed weight (K
   padded to kp, columns to a multiple of MPAD); colsum/wscale/bias: padded to a multiple of
   MPAD columns (bias may be NULL).  Returns 0, or -1 when out of
   memory. */
int ember_eager_qlinear_packed(const float *x, int64_t ldx, int64_t n0, int64_t n1, int64_t k,
                               const float *rinv, const float *rzp, const float *rscale,
                               float qmax, const int8_t *wp, int64_t kp, const int32_t *colsum,
                               const float *wscale, const float *bias, float *out, int64_t ldo,
                               int64_t m0, int64_t m1) {
    /* row blocks of RB rows: their codes stay in L1/L2 while every column tile passes over
       them (the weight, packed, stays in L2); a column tile's panel stays in L1 over the
       block's row tiles */
    int64_t tiles = 32768 / (NR * kp);                 /* about 32 KiB of codes a block */
    const int64_t RB = kp > KC ? NR * 8 : NR * (tiles < 2 ? 2 : tiles > 4 ? 4 : tiles);
    uint8_t *xq = (uint8_t *)malloc((size_t)RB * (size_t)kp);
    if (!xq) return -1;
#if VL > 1
    int32_t *part = (int32_t *)malloc((size_t)RB * MV * VL * sizeof(int32_t));
    if (!part) {
        free(xq);
        return -1;
    }
#endif
    for (int64_t b0 = n0; b0 < n1; b0 += RB) {
        int64_t nb = n1 - b0 < RB ? n1 - b0 : RB;
        int64_t rows_pad = (nb + NR - 1) / NR * NR;
        for (int64_t i = 0; i < nb; i++)
            quantize_row(x + (b0 + i) * ldx, k, kp, rinv[b0 + i], rzp[b0 + i], qmax,
                         xq + i * kp);
        memset(xq + nb * kp, 0, (size_t)((rows_pad - nb) * kp));
#if VL > 1
        /* K in chunks of KC: a column tile's panel chunk (MV * VL x KC bytes) stays in L1
           over the block's row tiles; partial sums wait in part */
        for (int64_t col0 = m0; col0 < m1; col0 += (int64_t)MV * VL)
            for (int64_t ka = 0; ka < kp; ka += KC) {
                int64_t kb = kp - ka < KC ? kp : ka + KC;
                for (int64_t i = 0; i < nb; i += NR)
                    tile(xq + i * kp, kp, wp, col0, nb - i < NR ? (int)(nb - i) : NR, m1,
                         rzp + b0 + i, rscale + b0 + i, colsum, wscale, bias,
                         out + (b0 + i) * ldo, ldo, qmax > 127.0f, ka / 4, kb / 4,
                         part + i * MV * VL, ka == 0, kb == kp);
            }
#else
        for (int64_t i = 0; i < nb; i++)
            for (int64_t j = m0; j < m1; j++) {
                const int8_t *wb = wp + (j / BLK) * kp * BLK + (j % BLK) * 4;
                int32_t s = 0;
                for (int64_t kk = 0; kk < kp; kk++)
                    s += (int32_t)xq[i * kp + kk] * (int32_t)wb[(kk / 4) * 4 * BLK + kk % 4];
                float f = (float)(s - (int32_t)rzp[b0 + i] * colsum[j]);
                float mult = rscale[b0 + i] * wscale[j];
                out[(b0 + i) * ldo + j] = bias ? fmaf(f, mult, bias[j]) : f * mult;
            }
#endif
    }
    free(xq);
#if VL > 1
    free(part);
#endif
    return 0;
}

/* min and max of n floats; returns 1 when a NaN was seen (the caller then uses NumPy's NaN-
   propagating min/max) */
int ember_eager_minmax(const float *x, int64_t n, float *mn, float *mx) {
    float lo = INFINITY, hi = -INFINITY;
    int nan = 0;
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 vlo = _mm512_set1_ps(INFINITY), vhi = _mm512_set1_ps(-INFINITY);
    __mmask16 bad = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        vlo = _mm512_min_ps(vlo, v);
        vhi = _mm512_max_ps(vhi, v);
    }
    lo = _mm512_reduce_min_ps(vlo);
    hi = _mm512_reduce_max_ps(vhi);
    nan = bad != 0;
#endif
    for (; i < n; i++) {
        float v = x[i];
        if (v != v) nan = 1;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *mn = lo;
    *mx = hi;
    return nan;
}

/* min and max of each of n rows of k floats (rows ldx apart); NaN rows are the caller's to
   detect (the return value counts rows that held a NaN) */
int64_t ember_eager_minmax_rows(const float *x, int64_t n, int64_t k, int64_t ldx, float *mn,
                                float *mx) {
    int64_t nans = 0;
    for (int64_t i = 0; i < n; i++) nans += ember_eager_minmax(x + i * ldx, k, mn + i, mx + i);
    return nans;
}

/* fbgemm's Quantize: code = clamp(nearbyint(fma(x, inv, zp)), 0, qmax) (one rounding before
   nearbyint, ties to even in the default rounding mode) */
void ember_eager_quantize_u8(const float *x, int64_t n, float inv, float zp, float qmax,
                             uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(fmaf(x[i], inv, zp));
        v = v < 0.0f ? 0.0f : v > qmax ? qmax : v;
        out[i] = (uint8_t)v;
    }
}
