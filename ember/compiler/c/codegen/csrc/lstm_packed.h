
/* float32 LSTM products on W_hh packed ONCE per kernel call (ember/compiler/c/codegen/rnn.py):
   every step's product reuses the packed panels (BLAS would pack the 4H x H matrix again on each
   of the T calls).  Panels of EMBER_LSTM_NR columns of B (K x N) lie k-major: a micro-kernel
   keeps an MR x NR block of C in registers and streams one panel.  AVX-512 or
   AVX2+FMA; without them the kernel calls BLAS per step instead. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define EMBER_LSTM_VEC 1
#define EMBER_LSTM_L 16
#define EMBER_LSTM_MR_MAX 12
typedef __m512 ember_lstm_v;
#define ember_lstm_vload(p) _mm512_loadu_ps(p)
#define ember_lstm_vstore(p, v) _mm512_storeu_ps(p, v)
#define ember_lstm_vset1(x) _mm512_set1_ps(x)
#define ember_lstm_vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define ember_lstm_vzero() _mm512_setzero_ps()
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_LSTM_VEC 1
#define EMBER_LSTM_L 8
#define EMBER_LSTM_MR_MAX 6
typedef __m256 ember_lstm_v;
#define ember_lstm_vload(p) _mm256_loadu_ps(p)
#define ember_lstm_vstore(p, v) _mm256_storeu_ps(p, v)
#define ember_lstm_vset1(x) _mm256_set1_ps(x)
#define ember_lstm_vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define ember_lstm_vzero() _mm256_setzero_ps()
#endif
#ifdef EMBER_LSTM_VEC
#define EMBER_LSTM_NR (2 * EMBER_LSTM_L)
/* panels p0 <= p < p1 of group grp (groups of H columns, ceil(H / NR) panels each) of the
   K x N operand B(k, n) = W[k * bk + n * bn]; columns past H are zeros */
static void ember_lstm_pack_b(float *P, const float *W, int64_t K, int64_t H, int64_t grp,
                              int64_t p0, int64_t p1, int64_t bk, int64_t bn) {
  const int64_t npan = (H + EMBER_LSTM_NR - 1) / EMBER_LSTM_NR;
  for (int64_t p = p0; p < p1; p++) {
    float *dst = P + (grp * npan + p) * K * EMBER_LSTM_NR;
    const int64_t u0 = p * EMBER_LSTM_NR, nv = H - u0 < EMBER_LSTM_NR ? H - u0 : EMBER_LSTM_NR;
    const float *src = W + (grp * H + u0) * bn;
    for (int64_t k = 0; k < K; k++) {  /* k outside: contiguous writes, NR read streams */
      float *d = dst + k * EMBER_LSTM_NR;
      const float *s = src + k * bk;
      int64_t r = 0;
      for (; r < nv; r++) d[r] = s[r * bn];
      for (; r < EMBER_LSTM_NR; r++) d[r] = 0.0f;
    }
  }
}
/* A (M x K, row stride lda) as blocks of mr rows, k-major (rows past M are zeros) */
static void ember_lstm_pack_a(float *Ap, const float *A, int64_t M, int64_t K, int64_t lda,
                              int mr) {
  for (int64_t m0 = 0; m0 < M; m0 += mr) {
    float *dst = Ap + m0 * K;
    for (int64_t k = 0; k < K; k++)
      for (int64_t i = 0; i < mr; i++)
        dst[k * mr + i] = m0 + i < M ? A[(m0 + i) * lda + k] : 0.0f;
  }
}
/* C[:, 0:nv] (M x nv, row stride ldc) (+)= packed A (M x K, blocks of MR rows) @ one packed
   panel; one function per MR (the accumulators must stay in registers) */
#define EMBER_LSTM_PANEL(MR)                                                                     \
static void ember_lstm_panel_##MR(const float *restrict Ap, const float *restrict P, int64_t M,  \
                                  int64_t K, float *restrict C, int64_t ldc, int64_t nv,         \
                                  int beta) {                                                    \
  for (int64_t m0 = 0; m0 < M; m0 += MR) {                                                       \
    const float *a = Ap + m0 * K;                                                                \
    ember_lstm_v c0[MR], c1[MR];                                                                 \
    for (int i = 0; i < MR; i++) { c0[i] = ember_lstm_vzero(); c1[i] = c0[i]; }                 \
    for (int64_t k = 0; k < K; k++) {                                                            \
      const ember_lstm_v b0 = ember_lstm_vload(P + k * EMBER_LSTM_NR);                          \
      const ember_lstm_v b1 = ember_lstm_vload(P + k * EMBER_LSTM_NR + EMBER_LSTM_L);           \
      for (int i = 0; i < MR; i++) {                                                             \
        const ember_lstm_v av = ember_lstm_vset1(a[k * MR + i]);                                 \
        c0[i] = ember_lstm_vfma(av, b0, c0[i]);                                                  \
        c1[i] = ember_lstm_vfma(av, b1, c1[i]);                                                  \
      }                                                                                          \
    }                                                                                            \
    for (int i = 0; i < MR && m0 + i < M; i++) {                                                 \
      float tmp[EMBER_LSTM_NR];                                                                  \
      ember_lstm_vstore(tmp, c0[i]);                                                             \
      ember_lstm_vstore(tmp + EMBER_LSTM_L, c1[i]);                                              \
      float *c = C + (m0 + i) * ldc;                                                             \
      if (beta) for (int64_t r = 0; r < nv; r++) c[r] += tmp[r];                                 \
      else for (int64_t r = 0; r < nv; r++) c[r] = tmp[r];                                       \
    }                                                                                            \
  }                                                                                              \
}
#if EMBER_LSTM_L == 16
EMBER_LSTM_PANEL(8)
EMBER_LSTM_PANEL(10)
EMBER_LSTM_PANEL(12)
/* the row block that pads M least (ties: the larger block) */
static int ember_lstm_mr(int64_t M) {
  int best = 12;
  for (int mr = 12; mr >= 8; mr -= 2)
    if ((M + mr - 1) / mr * mr < (M + best - 1) / best * best) best = mr;
  return best;
}
static void ember_lstm_panel(int mr, const float *Ap, const float *P, int64_t M, int64_t K,
                             float *C, int64_t ldc, int64_t nv, int beta) {
  if (mr == 8) ember_lstm_panel_8(Ap, P, M, K, C, ldc, nv, beta);
  else if (mr == 10) ember_lstm_panel_10(Ap, P, M, K, C, ldc, nv, beta);
  else ember_lstm_panel_12(Ap, P, M, K, C, ldc, nv, beta);
}
#else
EMBER_LSTM_PANEL(4)
EMBER_LSTM_PANEL(6)
static int ember_lstm_mr(int64_t M) { return M % 6 == 0 || M % 4 != 0 ? 6 : 4; }
static void ember_lstm_panel(int mr, const float *Ap, const float *P, int64_t M, int64_t K,
                             float *C, int64_t ldc, int64_t nv, int beta) {
  if (mr == 4) ember_lstm_panel_4(Ap, P, M, K, C, ldc, nv, beta);
  else ember_lstm_panel_6(Ap, P, M, K, C, ldc, nv, beta);
}
#endif
#endif
