/* int8 dynamic linear (ember/ops/_qlinear_c.py): out[n, m] = fmaf((float)raw, mult[m], bias[m])
   with raw = sum_k xq[n, k] * w[m, k] - zx * colsum[m] in int32 (xq: uint8 codes in [0, 127],
   w: int8).  AVX-512BW (512-bit) or AVX2: vpmaddubsw (u8 x s8 pair sums: 2 * 127 * 128 <
   32767, no saturation) and vpmaddwd into int32; a tile of 4 rows of x by TM rows of w (4 with
   AVX-512, 2 with AVX2) per step.  Integer sums are exact in any order, so the scalar loop
   and the NumPy path give the same bits. */
#include <stdint.h>
#include <math.h>
#if defined(__AVX512BW__)
#include <immintrin.h>
#define VW 64                                   /* bytes per vector */
#ifndef TM
#define TM 4                                    /* weight rows per tile (32 zmm registers) */
#endif
typedef __m512i vec;
#define VZERO() _mm512_setzero_si512()
#define VLOAD(p) _mm512_loadu_si512((const void *)(p))
#define VSET16(v) _mm512_set1_epi16(v)
#define VDOT(acc, x, w, ones) \
    _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(x, w), ones))
static inline int32_t hsum(vec v) { return _mm512_reduce_add_epi32(v); }
/* the four sums of a0..a3 at once (per-lane hadd tree): cheaper than four reductions when K
   is small and the reductions are a large share of the work */
static inline __m128i hsum4(vec a0, vec a1, vec a2, vec a3) {
    __m256i b0 = _mm256_add_epi32(_mm512_castsi512_si256(a0), _mm512_extracti64x4_epi64(a0, 1));
    __m256i b1 = _mm256_add_epi32(_mm512_castsi512_si256(a1), _mm512_extracti64x4_epi64(a1, 1));
    __m256i b2 = _mm256_add_epi32(_mm512_castsi512_si256(a2), _mm512_extracti64x4_epi64(a2, 1));
    __m256i b3 = _mm256_add_epi32(_mm512_castsi512_si256(a3), _mm512_extracti64x4_epi64(a3, 1));
    __m256i d = _mm256_hadd_epi32(_mm256_hadd_epi32(b0, b1), _mm256_hadd_epi32(b2, b3));
    return _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
}
#define HAVE_HSUM4 1
#elif defined(__AVX2__)
#include <immintrin.h>
#define VW 32
#ifndef TM
#define TM 2                                    /* 16 ymm registers */
#endif
typedef __m256i vec;
#define VZERO() _mm256_setzero_si256()
#define VLOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VSET16(v) _mm256_set1_epi16(v)
#define VDOT(acc, x, w, ones) \
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), ones))
static inline int32_t hsum(vec v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
#endif

static int32_t dot(const uint8_t *x, const int8_t *w, int64_t k0, int64_t k) {
    int32_t s = 0;
    for (int64_t i = k0; i < k; i++) s += (int32_t)x[i] * (int32_t)w[i];
    return s;
}

/* raw sums of rows [n0, n1) of x against rows [m0, m1) of w into acc (n x ldacc int32) */
static void block(const uint8_t *x, const int8_t *w, int32_t *acc, int64_t n0, int64_t n1,
                  int64_t m0, int64_t m1, int64_t k, int64_t ld) {
    int64_t kv = 0;
#ifdef VW
    kv = k & ~(int64_t)(VW - 1);
    const vec ones = VSET16(1);
    for (int64_t m = m0; m < m1; m += TM) {
        int64_t cols = m1 - m < TM ? m1 - m : TM;
        const int8_t *wr[TM];
        for (int c = 0; c < TM; c++) wr[c] = w + (m + (c < cols ? c : 0)) * k;
        for (int64_t n = n0; n < n1; n += 4) {
            int64_t rows = n1 - n < 4 ? n1 - n : 4;
            const uint8_t *xr[4];
            for (int r = 0; r < 4; r++) xr[r] = x + (n + (r < rows ? r : 0)) * k;
            vec a[4][TM];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < TM; c++) a[r][c] = VZERO();
            for (int64_t i = 0; i < kv; i += VW) {
                vec b[TM];
                for (int c = 0; c < TM; c++) b[c] = VLOAD(wr[c] + i);
                for (int r = 0; r < 4; r++) {
                    vec xv = VLOAD(xr[r] + i);
                    for (int c = 0; c < TM; c++) a[r][c] = VDOT(a[r][c], xv, b[c], ones);
                }
            }
            for (int64_t r = 0; r < rows; r++) {
#if defined(HAVE_HSUM4) && TM == 4
                int32_t sums[4];
                _mm_storeu_si128((__m128i *)sums, hsum4(a[r][0], a[r][1], a[r][2], a[r][3]));
#endif
                for (int64_t c = 0; c < cols; c++) {
#if defined(HAVE_HSUM4) && TM == 4
                    int32_t v = sums[c];
#else
                    int32_t v = hsum(a[r][c]);
#endif
                    acc[(n + r) * ld + m + c] = v + dot(xr[r], wr[c], kv, k);
                }
            }
        }
    }
    return;
#endif
    for (int64_t m = m0; m < m1; m++)
        for (int64_t n = n0; n < n1; n++)
            acc[n * ld + m] = dot(x + n * k, w + m * k, kv, k);
}

/* columns [m0, m1) of out (n x mtot float32); w: (mtot x k) int8 row-major; mult/bias per
   column (bias may be NULL); colsum: int32 per column; acc: scratch n x mtot int32. */
void ember_eager_qlinear(const uint8_t *x, const int8_t *w, const int32_t *colsum,
                         const float *mult, const float *bias, int32_t zx, int32_t *acc,
                         float *out, int64_t n, int64_t k, int64_t mtot, int64_t m0,
                         int64_t m1) {
    const int64_t MB = 64, NB = 64;   /* a block of w rows (64 x k) stays in L2 over x's rows */
    for (int64_t mb = m0; mb < m1; mb += MB) {
        int64_t me = mb + MB < m1 ? mb + MB : m1;
        for (int64_t nb = 0; nb < n; nb += NB)
            block(x, w, acc, nb, nb + NB < n ? nb + NB : n, mb, me, k, mtot);
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t m = m0; m < m1; m++) {
            float raw = (float)(acc[i * mtot + m] - zx * colsum[m]);
            out[i * mtot + m] = bias ? fmaf(raw, mult[m], bias[m]) : raw * mult[m];
        }
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
