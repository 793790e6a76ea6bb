/* Eager float16/bfloat16 products (ember/ops/_hgemm_c.py): C = A @ B (+ bias) for half A, B
   of any strides, rounded once to the half dtype.  Built after the C backend's prelude,
   half_block.h and its half GEMM pieces (codegen/csrc/gemm_half*.h.in, gemm_micro.h.in, read
   as text with the tile filled in), so eager runs the compiled template's kernels:
   - bfloat16 on AMX tiles (TDPBF16PS, 32 x 32 C tiles) where the build has AMX-BF16 and the
     kernel grants the tile state;
   - otherwise both operands widened exactly to float32 while their panels are packed
     (vcvtph2ps, bfloat16 by a shift) and the float32 FMA micro-kernel (14 x 32 on AVX-512,
     6 x 16 on AVX2 and below).
   No float32 copy of an operand and no float32 result exist: each unit (a block of rows times
   a run of B slivers) accumulates in a per-thread float scratch block and is rounded (bias
   added in float32 first) while in cache.
   Threads: ember's Python threads (ctypes releases the GIL) call ember_eager_hgemm_<s> on one
   product with shared panels: B's slivers are packed once each by the first thread that needs
   them (rdy flags), the units are claimed from a shared counter, as the compiled template's
   OpenMP threads do (eager has no OpenMP: it stays fork-safe).  With pb == NULL a call runs
   batch entries b0..b1 alone with its own panels (the batch split). */
#include <stdlib.h>
#include <string.h>

#define EH_KC 384      /* k per packed block (codegen/gemm.py _KC) */
#define EH_MC 120      /* rows of A per packed block (gemm.py MC_ROWS) */
#define EH_NCOLS 512   /* columns per unit at most (measured: 512 beat 1024; scratch in L2) */

/* per-thread buffers kept between calls (0: A panel, 1: B panels of a lone call, 2: scratch),
   64-byte aligned; a buffer over EH_KEEP bytes is not kept (eh_release frees it) */
#define EH_KEEP ((size_t)16 << 20)
static __thread void *eh_kept_[3];
static __thread size_t eh_cap_[3];
static void *eh_buf(int slot, size_t n) {
  void *p = NULL;
  if (n <= eh_cap_[slot]) return eh_kept_[slot];
  if (posix_memalign(&p, 64, n) != 0) return NULL;
  if (n <= EH_KEEP) {
    free(eh_kept_[slot]);
    eh_kept_[slot] = p;
    eh_cap_[slot] = n;
  }
  return p;
}
static void eh_release(int slot, void *p) {
  if (p != eh_kept_[slot]) free(p);
}

typedef void (*eh_pack_a_t)(const uint16_t *, int64_t, int64_t, int64_t, int64_t, void *);
typedef void (*eh_sliver_t)(const uint16_t *, int64_t, int64_t, int64_t, int64_t, int64_t,
                            int64_t, int64_t, void *, int *);
typedef void (*eh_micro_t)(int64_t, const void *, const void *, float *, int64_t, int);
typedef void (*eh_store_t)(uint16_t *, const float *, int64_t);
typedef void (*eh_load_t)(float *, const uint16_t *, int64_t);
typedef struct {
  int mr, nr, pad32, amx;  /* pad32: k padded to 32 per block (AMX) */
  size_t psz;              /* bytes per packed value */
  eh_pack_a_t pack_a;
  eh_sliver_t sliver;
  eh_micro_t micro;
  eh_store_t store;
  eh_load_t load;
} eh_kind_t;

#define EH_WRAP(src)                                                                          \
static void eh_pa_cvt_##src(const uint16_t *A, int64_t ars, int64_t acs, int64_t mc,        \
                            int64_t kc, void *pa) {                                          \
  EH_PACK_A_##src(A, ars, acs, mc, kc, (float *)pa);                                         \
}                                                                                            \
static void eh_sl_cvt_##src(const uint16_t *B, int64_t brs, int64_t bcs, int64_t K,         \
                            int64_t N, int64_t kcb, int64_t npad, int64_t js, void *pb,      \
                            int *rdy) {                                                      \
  EH_SLIVER_##src(B, brs, bcs, K, N, kcb, npad, js, (float *)pb, rdy);                       \
}
EH_WRAP(h)
EH_WRAP(b)
/* B^T stored row by row (a linear layer's weight, brs == 1) into float panels: each column's
   k values widened by vectors into a float block, then packed by the float32 template's own
   packing (ember_pack_b_<nr>_f: 16 x 16 register transposes on AVX-512); converting each
   value as it is stored a column apart cost ~0.9 ns a value */
#define EH_WRAP_T(src)                                                                        \
static void eh_sl_cvt_t_##src(const uint16_t *B, int64_t brs, int64_t bcs, int64_t K,       \
                              int64_t N, int64_t kcb, int64_t npad, int64_t js, void *pb,    \
                              int *rdy) {                                                    \
  (void)brs;                                                                                 \
  if (__atomic_load_n(rdy, __ATOMIC_ACQUIRE) == 2) return;                                   \
  int zero = 0;                                                                              \
  if (!__atomic_compare_exchange_n(rdy, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {  \
    for (int spin = 0; __atomic_load_n(rdy, __ATOMIC_ACQUIRE) != 2; spin++)                  \
      if (spin > 4096) sched_yield();                                                        \
    return;                                                                                  \
  }                                                                                          \
  float t[EH_NR * EH_KC];                                                                    \
  const int64_t c0 = js * EH_NR, nn = N - c0 < EH_NR ? N - c0 : EH_NR;                       \
  for (int64_t pc = 0; pc < K; pc += kcb) {                                                  \
    const int64_t kc = K - pc < kcb ? K - pc : kcb;                                          \
    for (int64_t jj = 0; jj < EH_NR; jj++)                                                   \
      if (jj < nn) ember_hrow_##src(t + jj * kc, B + pc + (c0 + jj) * bcs, kc);              \
      else memset(t + jj * kc, 0, sizeof(float) * (size_t)kc);                               \
    EH_PACK_B_F(t, 1, kc, kc, EH_NR, kc, EH_NR, 0,                                           \
                (float *)pb + pc * npad + js * EH_NR * kc);                                  \
  }                                                                                          \
  __atomic_store_n(rdy, 2, __ATOMIC_RELEASE);                                                \
}
EH_WRAP_T(h)
EH_WRAP_T(b)
static void eh_micro_cvt(int64_t kc, const void *a, const void *b, float *c, int64_t ldc,
                         int add) {
  EH_MICRO(kc, (const float *)a, (const float *)b, c, ldc, add);
}
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
static void eh_pa_amx(const uint16_t *A, int64_t ars, int64_t acs, int64_t mc, int64_t kc,
                      void *pa) {
  ember_amxpack_a_32_b(A, ars, acs, mc, kc, (uint16_t *)pa);
}
static void eh_sl_amx(const uint16_t *B, int64_t brs, int64_t bcs, int64_t K, int64_t N,
                      int64_t kcb, int64_t npad, int64_t js, void *pb, int *rdy) {
  ember_amxsliver_32_b(B, brs, bcs, K, N, kcb, npad, js, (uint16_t *)pb, rdy);
}
static void eh_micro_amx(int64_t kc, const void *a, const void *b, float *c, int64_t ldc,
                         int add) {
  ember_amxmicro_32x32(kc, (const uint16_t *)a, (const uint16_t *)b, c, ldc, add);
}
#endif

/* the kernel set for source dtype `src` ('h' float16, 'b' bfloat16) */
static eh_kind_t eh_kind(char src) {
  eh_kind_t k = {EH_MR, EH_NR, 0, 0, sizeof(float), eh_pa_cvt_h, eh_sl_cvt_h, eh_micro_cvt,
                 ember_f16_store_n, ember_f16_load_n};
  if (src == 'b') {
    k.pack_a = eh_pa_cvt_b;
    k.sliver = eh_sl_cvt_b;
    k.store = ember_bf16_store_n;
    k.load = ember_bf16_load_n;
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
    if (ember_amx_ok()) {
      k.mr = k.nr = 32;
      k.pad32 = k.amx = 1;
      k.psz = sizeof(uint16_t);
      k.pack_a = eh_pa_amx;
      k.sliver = eh_sl_amx;
      k.micro = eh_micro_amx;
    }
#endif
  }
  return k;
}

/* the units of one product for nt threads: row blocks of mcb rows, cb runs of slivers */
static void eh_plan(const eh_kind_t *k, int64_t M, int64_t N, int nt, int64_t *mcb,
                    int64_t *rb, int64_t *cb) {
  const int64_t mr = k->mr, nsl = (N + k->nr - 1) / k->nr;
  const int64_t mc = mr * (EH_MC / mr > 1 ? EH_MC / mr : 1);
  int64_t r = (M + mc - 1) / mc;
  if (nt > 1 && r < (M + mr - 1) / mr) r = (r + nt - 1) / nt * nt;
  *mcb = ((M + r - 1) / r + mr - 1) / mr * mr;
  *rb = (M + *mcb - 1) / *mcb;
  int64_t c = (nsl * k->nr + EH_NCOLS - 1) / EH_NCOLS;
  while (nt > 1 && *rb * c < 2 * nt && nsl / (c + 1) >= 2) c++;
  *cb = c;
}

/* prm: M, N, K, ars, acs, abs, brs, bcs, bbs (element strides; abs/bbs: batch), nt */
/* C is half (f32 == 0) or float (f32 == 1: the float32 sums as they are, no rounding; eager
   half convolutions' input gradient adds them up in col2im before its one rounding) */
static int eh_product(const eh_kind_t *k, const int64_t *prm, const uint16_t *A,
                      const uint16_t *B, void *C, const uint16_t *bias, char *pb,
                      int *rdy, int64_t *next, int nt, int f32) {
  const int64_t M = prm[0], N = prm[1], K = prm[2], ars = prm[3], acs = prm[4];
  const int64_t brs = prm[6], bcs = prm[7], mr = k->mr, nr = k->nr;
  const int64_t nsl = (N + nr - 1) / nr, npad = nsl * nr;
  int64_t mcb, rb, cb;
  eh_plan(k, M, N, nt, &mcb, &rb, &cb);
  eh_sliver_t sliver = k->sliver;
  if (!k->amx && brs == 1 && bcs != 1 && K > 0)
    sliver = k->load == ember_f16_load_n ? eh_sl_cvt_t_h : eh_sl_cvt_t_b;
  /* scratch rows one cache line longer than the unit: 4 KiB apart they would share L1 sets */
  const int64_t wmax = (nsl + cb - 1) / cb * nr + 16;
  char *pa = (char *)eh_buf(0, k->psz * (size_t)mcb * (EH_KC + 32));
  float *cs = (float *)eh_buf(2, sizeof(float) * (size_t)(mcb * wmax + EMBER_HB));
  if (pa == NULL || cs == NULL) {
    eh_release(0, pa);
    eh_release(2, cs);
    return -1;
  }
  float *fb = cs + mcb * wmax;   /* the bias, EMBER_HB values at a time */
  for (;;) {
    const int64_t u = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
    if (u >= rb * cb) break;
    const int64_t ic = (u / cb) * mcb, mc_ = M - ic < mcb ? M - ic : mcb;
    const int64_t s0 = nsl * (u % cb) / cb, s1 = nsl * (u % cb + 1) / cb;
    const int64_t col0 = s0 * nr, ncols = (s1 * nr < N ? s1 * nr : N) - col0;
    const int64_t w = (s1 - s0) * nr + 16;
    if (K == 0) memset(cs, 0, sizeof(float) * (size_t)(mcb * w));
    for (int64_t pc = 0; pc < K; pc += EH_KC) {
      const int64_t kc = K - pc < EH_KC ? K - pc : EH_KC;
      const int64_t kcp = k->pad32 ? (kc + 31) & ~(int64_t)31 : kc;
      k->pack_a(A + ic * ars + pc * acs, ars, acs, mc_, kc, pa);
      for (int64_t js = s0; js < s1; js++) {
        if (pc == 0) sliver(B, brs, bcs, K, N, EH_KC, npad, js, pb, rdy + js);
        const char *pbs = pb + k->psz * (size_t)(pc * npad + js * nr * kcp);
        for (int64_t ir = 0; ir < mc_; ir += mr)
          k->micro(kc, pa + k->psz * (size_t)(ir * kcp), pbs, cs + ir * w + (js - s0) * nr, w,
                   pc > 0);
      }
    }
    for (int64_t r = 0; r < mc_; r++) {  /* bias in float32, one rounding */
      float *row = cs + r * w;
      if (bias != NULL)
        for (int64_t c0 = 0; c0 < ncols; c0 += EMBER_HB) {
          const int64_t n = ncols - c0 < EMBER_HB ? ncols - c0 : EMBER_HB;
          k->load(fb, bias + col0 + c0, n);
          for (int64_t j = 0; j < n; j++) row[c0 + j] += fb[j];
        }
      if (f32)
        memcpy((float *)C + (ic + r) * N + col0, row, sizeof(float) * (size_t)ncols);
      else
        k->store((uint16_t *)C + (ic + r) * N + col0, row, ncols);
    }
  }
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
  if (k->amx) _tile_release();
#endif
  eh_release(0, pa);
  eh_release(2, cs);
  return 0;
}

/* bytes of B's packed panels (shared calls allocate them; at least what any kernel needs) */
int64_t ember_eager_hgemm_panel_bytes(int64_t N, int64_t K) {
  const int64_t npad = (N + 31) / 32 * 32;
  return (int64_t)sizeof(float) * (K + 32) * npad + 64;
}

/* whether bfloat16 products run on AMX tiles in this build and process */
int ember_eager_hgemm_amx(void) {
  return eh_kind('b').amx;
}

/* one call: batch entries b0..b1 alone (pb == NULL) or one entry shared with other threads */
static int eh_entry(char src, const int64_t *prm, const uint16_t *A, const uint16_t *B, char *C,
                    const uint16_t *bias, int64_t b0, int64_t b1, char *pb, int *rdy,
                    int64_t *next, int f32) {
  const eh_kind_t k = eh_kind(src);
  const int64_t M = prm[0], N = prm[1], K = prm[2];
  const size_t csz = f32 ? sizeof(float) : sizeof(uint16_t);
  if (pb != NULL)
    return eh_product(&k, prm, A + b0 * prm[5], B + b0 * prm[8], C + csz * (size_t)(b0 * M * N),
                      bias, pb, rdy, next, (int)prm[9], f32);
  const int64_t nsl = (N + k.nr - 1) / k.nr;
  char *own = (char *)eh_buf(1, (size_t)ember_eager_hgemm_panel_bytes(N, K));
  int *flags = (int *)malloc(sizeof(int) * (size_t)(nsl + 1));
  if (own == NULL || flags == NULL) { eh_release(1, own); free(flags); return -1; }
  int rc = 0;
  for (int64_t e = b0; e < b1 && rc == 0; e++) {
    int64_t cnt = 0;
    memset(flags, 0, sizeof(int) * (size_t)(nsl + 1));
    rc = eh_product(&k, prm, A + e * prm[5], B + e * prm[8], C + csz * (size_t)(e * M * N), bias,
                    own, flags, &cnt, 1, f32);
  }
  eh_release(1, own);
  free(flags);
  return rc;
}

/* ember_eager_hgemm_<s>: half C; ember_eager_hgemm_<s>_f: float C (same arguments) */
#define EH_ENTRY(src)                                                                         \
int ember_eager_hgemm_##src(const int64_t *prm, const uint16_t *A, const uint16_t *B,        \
                            uint16_t *C, const uint16_t *bias, int64_t b0, int64_t b1,      \
                            char *pb, int *rdy, int64_t *next) {                             \
  return eh_entry(#src[0], prm, A, B, (char *)C, bias, b0, b1, pb, rdy, next, 0);           \
}                                                                                            \
int ember_eager_hgemm_##src##_f(const int64_t *prm, const uint16_t *A, const uint16_t *B,    \
                                float *C, const uint16_t *bias, int64_t b0, int64_t b1,     \
                                char *pb, int *rdy, int64_t *next) {                         \
  return eh_entry(#src[0], prm, A, B, (char *)C, bias, b0, b1, pb, rdy, next, 1);           \
}
EH_ENTRY(h)
EH_ENTRY(b)
