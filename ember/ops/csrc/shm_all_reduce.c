/* all_reduce through a per-group shared-memory staging window (ember.distributed._shm).
 *
 * Every rank of the group maps every rank's part of one MPI shared-memory window.  A part is
 *   [0, 64)    ready: int64, the sequence number of the last round this rank posted
 *   [64, 128)  done:  int64, the last round whose slots this rank has finished reading
 *   two slots (round s uses slot s % 2), each SIG bytes of signature then `cap` data bytes.
 * A round: post (wait until every rank is done with round s - 2, whose slot this reuses; copy
 * the signature and the data in; release-store ready = s), wait (acquire-load every rank's
 * ready until >= s), check (every rank's signature equals mine), reduce (the ranks' slots in
 * rank order into `out`: bit-identical results on every rank), then release-store done = s.
 * Two slots and the sequence numbers replace a closing barrier: a rank may post round s + 1
 * while a slow peer still reads round s.  Waits spin, then yield (ranks may outnumber cores),
 * and return to Python after `budget_ns` so it can look for a peer in another collective and
 * enforce the group's timeout.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sched.h>

#define SIG 128

typedef struct {
    char **bases;      /* bases[r]: rank r's part, mapped in this process */
    int64_t world, rank, cap, stride;  /* stride: bytes of one slot (SIG + cap, aligned) */
} shm_ctx;

typedef struct {
    const int64_t *sig;  /* SIG bytes */
    int64_t nbytes, count, kind, op;  /* kind < 0: Python reduces (or raises) */
} shm_plan;

enum { K_F32, K_F64, K_F16, K_BF16, K_I8, K_U8, K_I16, K_I32, K_I64 };
enum { O_SUM, O_AVG, O_PROD, O_MIN, O_MAX, O_BAND, O_BOR, O_BXOR };

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline int64_t *ready_of(const shm_ctx *c, int64_t r) { return (int64_t *)c->bases[r]; }
static inline int64_t *done_of(const shm_ctx *c, int64_t r) {
    return (int64_t *)(c->bases[r] + 64);
}
static inline char *slot_of(const shm_ctx *c, int64_t r, int64_t seq) {
    return c->bases[r] + 128 + (seq & 1) * c->stride;
}

/* Wait until *field_of(r) >= want for every rank r (acquire); 0, or -(r + 1) for the first
 * rank still behind after budget_ns (budget_ns <= 0: look once). */
static int wait_all(const shm_ctx *c, int64_t *(*field_of)(const shm_ctx *, int64_t),
                    int64_t want, int64_t budget_ns) {
    int64_t start = 0;
    for (int64_t r = 0; r < c->world; ++r) {
        int64_t *f = field_of(c, r);
        for (long spin = 0; __atomic_load_n(f, __ATOMIC_ACQUIRE) < want; ++spin) {
            if (budget_ns <= 0) return -(int)(r + 1);
            if (spin < 200) {
                cpu_relax();
                continue;
            }
            sched_yield();
            if ((spin & 15) == 0) {
                if (!start) start = now_ns();
                else if (now_ns() - start > budget_ns) return -(int)(r + 1);
            }
        }
    }
    return 0;
}

/* Post round seq: 0, or -(r + 1) when rank r is still reading the slot after budget_ns. */
int ember_shm_post(const shm_ctx *c, const shm_plan *p, int64_t seq, const void *data,
                   int64_t budget_ns) {
    int rc = wait_all(c, done_of, seq - 2, budget_ns);
    if (rc) return rc;
    char *slot = slot_of(c, c->rank, seq);
    memcpy(slot, p->sig, SIG);
    if (p->nbytes) memcpy(slot + SIG, data, (size_t)p->nbytes);
    __atomic_store_n(ready_of(c, c->rank), seq, __ATOMIC_RELEASE);
    return 0;
}

/* 0 when every rank has posted round seq, else -(r + 1) after budget_ns. */
int ember_shm_wait(const shm_ctx *c, int64_t seq, int64_t budget_ns) {
    return wait_all(c, ready_of, seq, budget_ns);
}

void ember_shm_done(const shm_ctx *c, int64_t seq) {
    __atomic_store_n(done_of(c, c->rank), seq, __ATOMIC_RELEASE);
}

/* Withdraw a posted round (a peer is in another collective: nobody will read it). */
void ember_shm_unpost(const shm_ctx *c, int64_t seq) {
    __atomic_store_n(ready_of(c, c->rank), seq - 1, __ATOMIC_RELEASE);
}

#define ID(x) (x)
#define H2F(x) ((float)(x))
#define F2H(x) ((_Float16)(x))
/* NumPy's minimum/maximum: a NaN on either side propagates */
#define FMIN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (b) < (a) ? (b) : (a))
#define FMAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (b) > (a) ? (b) : (a))
#define IMIN(a, b) ((b) < (a) ? (b) : (a))
#define IMAX(a, b) ((b) > (a) ? (b) : (a))
#define BLOCK 512

/* The per-block loop of one op: acc[i] = F(acc[i], L(s[i])) */
#define APPLY(F, L)                                                                          \
    for (int64_t i = 0; i < m; ++i) acc[i] = F(acc[i], L(s[i]));                             \
    break;

#define FADD(a, b) ((a) + (b))
#define FMUL(a, b) ((a) * (b))

#define FLOAT_REDUCE(NAME, T, A, LOAD, STORE)                                                \
    static void NAME(char *const *src, int n, void *out, int64_t count, int op) {            \
        T *o = (T *)out;                                                                     \
        for (int64_t i0 = 0; i0 < count; i0 += BLOCK) {                                      \
            int64_t m = count - i0 < BLOCK ? count - i0 : BLOCK;                             \
            A acc[BLOCK];                                                                    \
            const T *s0 = (const T *)src[0] + i0;                                            \
            for (int64_t i = 0; i < m; ++i) acc[i] = LOAD(s0[i]);                            \
            for (int r = 1; r < n; ++r) {                                                    \
                const T *s = (const T *)src[r] + i0;                                         \
                switch (op) {                                                                \
                    case O_PROD: APPLY(FMUL, LOAD)                                           \
                    case O_MIN: APPLY(FMIN, LOAD)                                            \
                    case O_MAX: APPLY(FMAX, LOAD)                                            \
                    default: APPLY(FADD, LOAD)                                               \
                }                                                                            \
            }                                                                                \
            if (op == O_AVG)                                                                 \
                for (int64_t i = 0; i < m; ++i) acc[i] = acc[i] / (A)n;                      \
            for (int64_t i = 0; i < m; ++i) o[i0 + i] = STORE(acc[i]);                       \
        }                                                                                    \
    }

FLOAT_REDUCE(red_f32, float, float, ID, ID)
FLOAT_REDUCE(red_f64, double, double, ID, ID)
FLOAT_REDUCE(red_f16, _Float16, float, H2F, F2H)
FLOAT_REDUCE(red_bf16, uint16_t, float, bf16_to_f, f_to_bf16)

/* integers wrap like NumPy's: add and multiply in the unsigned type of the same width */
#define INT_REDUCE(NAME, T, U)                                                               \
    static void NAME(char *const *src, int n, void *out, int64_t count, int op) {            \
        T *o = (T *)out;                                                                     \
        for (int64_t i0 = 0; i0 < count; i0 += BLOCK) {                                      \
            int64_t m = count - i0 < BLOCK ? count - i0 : BLOCK;                             \
            T acc[BLOCK];                                                                    \
            const T *s0 = (const T *)src[0] + i0;                                            \
            for (int64_t i = 0; i < m; ++i) acc[i] = s0[i];                                  \
            for (int r = 1; r < n; ++r) {                                                    \
                const T *s = (const T *)src[r] + i0;                                         \
                switch (op) {                                                                \
                    case O_PROD: APPLY(IMUL_##NAME, ID)                                      \
                    case O_MIN: APPLY(IMIN, ID)                                              \
                    case O_MAX: APPLY(IMAX, ID)                                              \
                    case O_BAND: APPLY(IAND, ID)                                             \
                    case O_BOR: APPLY(IOR, ID)                                               \
                    case O_BXOR: APPLY(IXOR, ID)                                             \
                    default: APPLY(IADD_##NAME, ID)                                          \
                }                                                                            \
            }                                                                                \
            memcpy(o + i0, acc, (size_t)m * sizeof(T));                                      \
        }                                                                                    \
    }

#define IAND(a, b) ((a) & (b))
#define IOR(a, b) ((a) | (b))
#define IXOR(a, b) ((a) ^ (b))
#define WRAP_OPS(NAME, T, U)                                                                 \
    static inline T IADD_##NAME(T a, T b) { return (T)((U)a + (U)b); }                       \
    static inline T IMUL_##NAME(T a, T b) { return (T)((U)a * (U)b); }

WRAP_OPS(red_i8, int8_t, uint32_t)
WRAP_OPS(red_u8, uint8_t, uint32_t)
WRAP_OPS(red_i16, int16_t, uint32_t)
WRAP_OPS(red_i32, int32_t, uint32_t)
WRAP_OPS(red_i64, int64_t, uint64_t)
INT_REDUCE(red_i8, int8_t, uint32_t)
INT_REDUCE(red_u8, uint8_t, uint32_t)
INT_REDUCE(red_i16, int16_t, uint32_t)
INT_REDUCE(red_i32, int32_t, uint32_t)
INT_REDUCE(red_i64, int64_t, uint64_t)

typedef void (*reduce_fn)(char *const *, int, void *, int64_t, int);
static const reduce_fn KERNELS[] = {red_f32, red_f64, red_f16, red_bf16, red_i8,
                                    red_u8,  red_i16, red_i32, red_i64};

/* Check round seq's signatures and reduce it into out (every rank has posted it).
 * 0: reduced, done; 1: the signatures differ (done: every rank sees the same slots, so every
 * rank raises the same error); 2: they agree but kind < 0 (Python reduces, then calls done). */
int ember_shm_reduce(const shm_ctx *c, const shm_plan *p, int64_t seq, void *out) {
    char *src[64];
    int n = (int)c->world;
    for (int r = 0; r < n; ++r) {
        src[r] = slot_of(c, r, seq) + SIG;
        if (memcmp(src[r] - SIG, p->sig, SIG) != 0) {
            ember_shm_done(c, seq);
            return 1;
        }
    }
    if (p->kind < 0) return 2;
    if (p->count) KERNELS[p->kind](src, n, out, p->count, (int)p->op);
    ember_shm_done(c, seq);
    return 0;
}

/* A blocking round in one call: post, wait (budget_ns), reduce.  0 / 1 / 2 as reduce;
 * 3: not posted (a rank still reads the slot); 4: posted, a rank has not posted yet. */
int ember_shm_all_reduce(const shm_ctx *c, const shm_plan *p, int64_t seq, const void *data,
                         void *out, int64_t budget_ns) {
    if (ember_shm_post(c, p, seq, data, budget_ns)) return 3;
    if (ember_shm_wait(c, seq, budget_ns)) return 4;
    return ember_shm_reduce(c, p, seq, out);
}
