/* int8 dynamic linear (ember/ops/_qlinear_c.py): out[n, m] = fmaf((float)raw, mult[m], bias[m])
   with raw = sum_k xq[n, k] * w[m, k] - zx * colsum[m] in int32 (xq: uint8 codes in [0, 127],
   w: int8).  AVX2: vpmaddubsw (u8 x s8 pair sums: 2 * 127 * 128 < 32767, no saturation) and
   vpmaddwd into int32; 4 rows of x by 2 rows of w per step.  Integer sums are exact in any
   order, so the scalar loop and the NumPy path give the same bits. */
#include <stdint.h>
#include <math.h>
#ifdef __AVX2__
#include <immintrin.h>
static inline int32_t hsum(__m256i v) {
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
#ifdef __AVX2__
    kv = k & ~(int64_t)31;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t m = m0; m < m1; m += 2) {
        int two = m + 1 < m1;
        const int8_t *w0 = w + m * k, *w1 = w + (m + two) * k;
        for (int64_t n = n0; n < n1; n += 4) {
            int64_t rows = n1 - n < 4 ? n1 - n : 4;
            const uint8_t *xr[4];
            for (int r = 0; r < 4; r++) xr[r] = x + (n + (r < rows ? r : 0)) * k;
            __m256i a[4][2];
            for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = _mm256_setzero_si256();
            for (int64_t i = 0; i < kv; i += 32) {
                __m256i b0 = _mm256_loadu_si256((const __m256i *)(w0 + i));
                __m256i b1 = _mm256_loadu_si256((const __m256i *)(w1 + i));
                for (int r = 0; r < 4; r++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(xr[r] + i));
                    a[r][0] = _mm256_add_epi32(a[r][0],
                        _mm256_madd_epi16(_mm256_maddubs_epi16(xv, b0), ones));
                    a[r][1] = _mm256_add_epi32(a[r][1],
                        _mm256_madd_epi16(_mm256_maddubs_epi16(xv, b1), ones));
                }
            }
            for (int64_t r = 0; r < rows; r++) {
                acc[(n + r) * ld + m] = hsum(a[r][0]) + dot(xr[r], w0, kv, k);
                if (two) acc[(n + r) * ld + m + 1] = hsum(a[r][1]) + dot(xr[r], w1, kv, k);
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
