/* Eager float16/bfloat16 products of at most 4 rows (ember/ops/_hsmall_c.py): Y = X @ B
   (+ bias) for a decode step's linear (x: a few rows, B: a weight), rounded once to the half
   dtype.  Built after the C backend's prelude and half_block.h (read as text).
   The weight is read once, in its own dtype: each block of EMBER_HB values is widened in
   registers into an L1 buffer (vcvtph2ps / a 16-bit shift) and used there; no float32 copy
   of B exists.  Products of two half values are exact in float32, so the sums are float32
   sums of exact products (in another order than BLAS: within float32 summation error of the
   widen + BLAS path), the bias is added in float32, and each result is rounded once.
   - B transposed (a linear weight (N, K), brs == 1): four columns at a time, dot products
     over k with vector accumulators;
   - B row-major (bcs == 1): blocks of ES_NB columns, an axpy per k.
   prm: M, N, K, xrs, xcs, xbs, brs, bcs, bbs (element strides; *bs: batch).  A call computes
   batch entries e0..e1, columns j0..j1 (the caller splits either over its threads). */
#include <stdlib.h>
#include <string.h>

#define ES_NB 256
/* the dot kernel's accumulators: one vector per (row, column), summed across lanes once at
   the end (a fixed order: the same bits for any thread count) */
#if defined(__AVX512F__)
#define ES_VL 16
#else
#define ES_VL 8
#endif
typedef float es_v __attribute__((vector_size(ES_VL * sizeof(float))));
static inline float es_hsum(es_v v) {
  float t[ES_VL];
  memcpy(t, &v, sizeof(t));
  for (int w = ES_VL / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; i++) t[i] += t[i + w];
  return t[0];
}

#define ES_KERNELS(src, LOAD, STORE)                                                          \
static void es_dot_##src(const float *restrict xf, int64_t M, int64_t K,                     \
                         const uint16_t *B, int64_t bcs, int64_t j0, int64_t j1,             \
                         float *restrict acc) {                                              \
  float wb[4][EMBER_HB] __attribute__((aligned(64)));                                        \
  const int64_t kp = (K + ES_VL - 1) / ES_VL * ES_VL;                                        \
  for (int64_t j = j0; j < j1; j += 4) {                                                     \
    const int64_t jn = j1 - j < 4 ? j1 - j : 4;                                               \
    es_v s[4][4];                                                                            \
    memset(s, 0, sizeof(s));                                                                 \
    for (int64_t k0 = 0; k0 < K; k0 += EMBER_HB) {                                           \
      const int64_t n = K - k0 < EMBER_HB ? K - k0 : EMBER_HB;                               \
      const int64_t nv = (n + ES_VL - 1) / ES_VL * ES_VL;                                    \
      for (int64_t c = 0; c < 4; c++) {                                                      \
        if (c < jn) {                                                                        \
          const char *nx = (const char *)(B + (j + c) * bcs + k0 + 2 * EMBER_HB);             \
          if (k0 + 3 * EMBER_HB <= K)                                                        \
            for (int l = 0; l < (int)(EMBER_HB * 2); l += 64) __builtin_prefetch(nx + l);     \
          LOAD(wb[c], B + (j + c) * bcs + k0, n);                                            \
        }                                                                                    \
        else memset(wb[c], 0, sizeof(float) * (size_t)n);                                     \
        for (int64_t q = n; q < nv; q++) wb[c][q] = 0.0f;                                    \
      }                                                                                      \
      for (int64_t q = 0; q < nv; q += ES_VL) {                                              \
        const es_v w0 = *(const es_v *)(wb[0] + q), w1 = *(const es_v *)(wb[1] + q);         \
        const es_v w2 = *(const es_v *)(wb[2] + q), w3 = *(const es_v *)(wb[3] + q);         \
        for (int64_t r = 0; r < M; r++) {                                                    \
          es_v xv;                                                                           \
          memcpy(&xv, xf + r * kp + k0 + q, sizeof(xv));                                     \
          s[r][0] += xv * w0; s[r][1] += xv * w1; s[r][2] += xv * w2; s[r][3] += xv * w3;    \
        }                                                                                    \
      }                                                                                      \
    }                                                                                        \
    for (int64_t r = 0; r < M; r++)                                                          \
      for (int64_t c = 0; c < jn; c++) acc[r * (j1 - j0) + (j - j0) + c] = es_hsum(s[r][c]); \
  }                                                                                          \
}                                                                                            \
static void es_axpy_##src(const float *restrict xf, int64_t M, int64_t kp, int64_t K,       \
                          const uint16_t *B, int64_t brs, int64_t j0, int64_t j1,            \
                          float *restrict acc) {                                             \
  float wb[ES_NB] __attribute__((aligned(64)));                                              \
  const int64_t w = j1 - j0;                                                                 \
  memset(acc, 0, sizeof(float) * (size_t)(M * w));                                           \
  for (int64_t c0 = 0; c0 < w; c0 += ES_NB) {                                                \
    const int64_t nb = w - c0 < ES_NB ? w - c0 : ES_NB;                                      \
    for (int64_t k = 0; k < K; k++) {                                                        \
      for (int64_t q = 0; q < nb; q += EMBER_HB)                                             \
        LOAD(wb + q, B + k * brs + j0 + c0 + q, nb - q < EMBER_HB ? nb - q : EMBER_HB);      \
      for (int64_t r = 0; r < M; r++) {                                                      \
        const float xv = xf[r * kp + k];                                                     \
        float *restrict ar = acc + r * w + c0;                                               \
        _Pragma("omp simd")                                                                  \
        for (int64_t q = 0; q < nb; q++) ar[q] += xv * wb[q];                                \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
}                                                                                            \
int ember_eager_hsmall_##src(const int64_t *prm, const uint16_t *X, const uint16_t *B,      \
                             uint16_t *Y, const uint16_t *bias, int64_t e0, int64_t e1,     \
                             int64_t j0, int64_t j1) {                                       \
  const int64_t M = prm[0], N = prm[1], K = prm[2], xrs = prm[3], xcs = prm[4];              \
  const int64_t brs = prm[6], bcs = prm[7], w = j1 - j0;                                     \
  if (w <= 0) return 0;                                                                      \
  const int64_t kp = (K + ES_VL - 1) / ES_VL * ES_VL;                                        \
  float *xf = (float *)calloc((size_t)(M * kp + M * w + EMBER_HB + 16), sizeof(float));     \
  if (xf == NULL) return -1;                                                                 \
  float *acc = xf + M * kp, *fb = acc + M * w;                                               \
  for (int64_t e = e0; e < e1; e++) {                                                        \
    const uint16_t *x = X + e * prm[5], *b = B + e * prm[8];                                 \
    for (int64_t r = 0; r < M; r++)                                                          \
      if (xcs == 1) LOAD(xf + r * kp, x + r * xrs, K);                                       \
      else for (int64_t q = 0; q < K; q++) LOAD(xf + r * kp + q, x + r * xrs + q * xcs, 1);  \
    if (brs == 1 && !(bcs == 1 && N > 1)) es_dot_##src(xf, M, K, b, bcs, j0, j1, acc);     \
    else es_axpy_##src(xf, M, kp, K, b, brs, j0, j1, acc);                                   \
    for (int64_t r = 0; r < M; r++) {                                                        \
      float *row = acc + r * w;                                                              \
      if (bias != NULL)                                                                      \
        for (int64_t c0 = 0; c0 < w; c0 += EMBER_HB) {                                       \
          const int64_t n = w - c0 < EMBER_HB ? w - c0 : EMBER_HB;                           \
          LOAD(fb, bias + j0 + c0, n);                                                       \
          for (int64_t q = 0; q < n; q++) row[c0 + q] += fb[q];                              \
        }                                                                                    \
      STORE(Y + (e * M + r) * N + j0, row, w);                                               \
    }                                                                                        \
  }                                                                                          \
  free(xf);                                                                                  \
  return 0;                                                                                  \
}
ES_KERNELS(h, ember_f16_load_n, ember_f16_store_n)
ES_KERNELS(b, ember_bf16_load_n, ember_bf16_store_n)
