/* Symmetric-memory kernels for ember.distributed._symmetric_memory (CPU, one node).
 *
 * Every rank maps every peer's buffer (an MPI shared-memory window), so one-sided reads and
 * writes are plain loads and stores.  Signal pads are int32 slots updated with atomics:
 *   put_signal: CAS 0 -> 1 on the peer's slot (release: my earlier stores are visible to the
 *               peer once it sees the 1; waits while the slot is still 1, i.e. not consumed);
 *   wait_signal: CAS 1 -> 0 on my slot (acquire: the sender's earlier stores are visible after).
 * Waits spin, yield the CPU after a few rounds (ranks may outnumber cores), and give up at a
 * deadline: they return -1 (or -(peer + 1) for a barrier) so Python raises a timeout error.
 * Reductions read the peers in rank order, so every rank computes bit-identical results;
 * float16/bfloat16 accumulate in float32 (like ember's eager math) and round once.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sched.h>

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

/* CAS *slot from `from` to `to`, waiting until it holds `from`; 0, or -1 past deadline_ns.
 * Spin on plain loads (no cache-line ping-pong) and CAS only when the value looks right. */
static int cas_wait(int32_t *slot, int32_t from, int32_t to, int64_t deadline_ns) {
    for (long spin = 0;; ++spin) {
        int32_t expect = from;
        if (__atomic_load_n(slot, __ATOMIC_RELAXED) == from &&
            __atomic_compare_exchange_n(slot, &expect, to, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 0;
        if (spin < 100) {  /* a pause is up to ~140 cycles: ~5 us, then give the core away */
            cpu_relax();
        } else {
            sched_yield();  /* ranks may outnumber cores */
            if ((spin & 63) == 0 && deadline_ns > 0 && now_ns() > deadline_ns) return -1;
        }
    }
}

static int64_t deadline(int64_t timeout_ns) {
    return timeout_ns > 0 ? now_ns() + timeout_ns : 0;
}

int ember_symm_put_signal(int32_t *slot, int64_t timeout_ns) {
    return cas_wait(slot, 0, 1, deadline(timeout_ns));
}

int ember_symm_wait_signal(int32_t *slot, int64_t timeout_ns) {
    return cas_wait(slot, 1, 0, deadline(timeout_ns));
}

/* pads[r]: rank r's signal pad; slot of (channel, src) on a pad: channel * world + src.
 * Signal every peer, then wait for every peer: returns 0 or -(peer + 1) on a timeout. */
int ember_symm_barrier(int32_t **pads, int rank, int world, int channel, int64_t timeout_ns) {
    int64_t dl = deadline(timeout_ns);
    for (int k = 1; k < world; ++k) {
        int peer = (rank + k) % world;
        if (cas_wait(pads[peer] + (int64_t)channel * world + rank, 0, 1, dl)) return -(peer + 1);
    }
    for (int k = 1; k < world; ++k) {
        int peer = (rank + world - k) % world;
        if (cas_wait(pads[rank] + (int64_t)channel * world + peer, 1, 0, dl)) return -(peer + 1);
    }
    return 0;
}

#define REDUCE(NAME, T, ACC, LOAD, STORE)                                                    \
    void NAME(void **srcs, int n, int64_t off, void *out, int64_t count) {                   \
        T *o = (T *)out;                                                                     \
        for (int64_t i0 = 0; i0 < count; i0 += 1024) {                                       \
            int64_t m = count - i0 < 1024 ? count - i0 : 1024;                               \
            ACC acc[1024];                                                                   \
            const T *s0 = (const T *)srcs[0] + off + i0;                                     \
            for (int64_t i = 0; i < m; ++i) acc[i] = LOAD(s0[i]);                            \
            for (int r = 1; r < n; ++r) {                                                    \
                const T *s = (const T *)srcs[r] + off + i0;                                  \
                for (int64_t i = 0; i < m; ++i) acc[i] += LOAD(s[i]);                        \
            }                                                                                \
            for (int64_t i = 0; i < m; ++i) o[i0 + i] = STORE(acc[i]);                       \
        }                                                                                    \
    }

#define ID(x) (x)
#define H2F(x) ((float)(x))
#define F2H(x) ((_Float16)(x))

REDUCE(ember_symm_sum_f32, float, float, ID, ID)
REDUCE(ember_symm_sum_f64, double, double, ID, ID)
REDUCE(ember_symm_sum_i32, int32_t, int32_t, ID, ID)
REDUCE(ember_symm_sum_i64, int64_t, int64_t, ID, ID)
REDUCE(ember_symm_sum_bf16, uint16_t, float, bf16_to_f, f_to_bf16)
REDUCE(ember_symm_sum_f16, _Float16, float, H2F, F2H)

/* Elements [lo, hi) (offset off) summed over the ranks' buffers and written back into every
 * rank's buffer: the two-shot all-reduce's own chunk (no other rank touches it). */
#define REDUCE_BCAST(NAME, T, ACC, LOAD, STORE)                                              \
    static void NAME(void **bufs, int n, int64_t off, int64_t lo, int64_t hi) {              \
        for (int64_t i0 = lo; i0 < hi; i0 += 1024) {                                         \
            int64_t m = hi - i0 < 1024 ? hi - i0 : 1024;                                     \
            ACC acc[1024];                                                                   \
            const T *s0 = (const T *)bufs[0] + off + i0;                                     \
            for (int64_t i = 0; i < m; ++i) acc[i] = LOAD(s0[i]);                            \
            for (int r = 1; r < n; ++r) {                                                    \
                const T *s = (const T *)bufs[r] + off + i0;                                  \
                for (int64_t i = 0; i < m; ++i) acc[i] += LOAD(s[i]);                        \
            }                                                                                \
            for (int r = 0; r < n; ++r) {                                                    \
                T *d = (T *)bufs[r] + off + i0;                                              \
                for (int64_t i = 0; i < m; ++i) d[i] = STORE(acc[i]);                        \
            }                                                                                \
        }                                                                                    \
    }

REDUCE_BCAST(rb_f32, float, float, ID, ID)
REDUCE_BCAST(rb_f64, double, double, ID, ID)
REDUCE_BCAST(rb_bf16, uint16_t, float, bf16_to_f, f_to_bf16)
REDUCE_BCAST(rb_f16, _Float16, float, H2F, F2H)

/* out[i] = the `nbytes` at srcs[r] + off, for r in [0, n): an all-gather's copy step. */
void ember_symm_gather(void **srcs, int n, int64_t off, void *out, int64_t nbytes) {
    for (int r = 0; r < n; ++r)
        memcpy((char *)out + (int64_t)r * nbytes, (const char *)srcs[r] + off, nbytes);
}

/* write `nbytes` of src at dsts[r] + off for every r: a two-shot all-reduce's second step */
void ember_symm_scatter_copy(void **dsts, int n, int64_t off, const void *src, int64_t nbytes) {
    for (int r = 0; r < n; ++r) memcpy((char *)dsts[r] + off, src, nbytes);
}

/* One-shot all-reduce in one call: barrier, out = sum over ranks of bufs[r][off..off+count),
 * barrier.  kind: 0 f32, 1 f64, 2 bf16, 3 f16.  0, or -(peer + 1) on a timeout. */
int ember_symm_one_shot(int32_t **pads, void **bufs, int rank, int world, int channel,
                        int64_t timeout_ns, int64_t off, void *out, int64_t count, int kind) {
    int rc = ember_symm_barrier(pads, rank, world, channel, timeout_ns);
    if (rc) return rc;
    switch (kind) {
        case 0: ember_symm_sum_f32(bufs, world, off, out, count); break;
        case 1: ember_symm_sum_f64(bufs, world, off, out, count); break;
        case 2: ember_symm_sum_bf16(bufs, world, off, out, count); break;
        default: ember_symm_sum_f16(bufs, world, off, out, count); break;
    }
    return ember_symm_barrier(pads, rank, world, channel, timeout_ns);
}

/* The arguments of a one-shot all-reduce, packed once by Python (one pointer per call). */
typedef struct {
    int32_t **pads;
    void **bufs;
    int64_t rank, world, channel, timeout_ns, off, count, kind;
    void *out;
} ember_symm_plan;

int ember_symm_one_shot_plan(const ember_symm_plan *p, void *out) {
    return ember_symm_one_shot(p->pads, p->bufs, (int)p->rank, (int)p->world, (int)p->channel,
                               p->timeout_ns, p->off, out ? out : p->out, p->count,
                               (int)p->kind);
}

/* Two-shot all-reduce in place, in one call: barrier; rank r sums the r-th chunk over every
 * buffer and writes it into every buffer; barrier.  0, or -(peer + 1) on a timeout. */
int ember_symm_two_shot_plan(const ember_symm_plan *p) {
    int world = (int)p->world, rank = (int)p->rank;
    int rc = ember_symm_barrier(p->pads, rank, world, (int)p->channel, p->timeout_ns);
    if (rc) return rc;
    int64_t size = (p->count + world - 1) / world;
    int64_t lo = rank * size < p->count ? rank * size : p->count;
    int64_t hi = lo + size < p->count ? lo + size : p->count;
    switch (p->kind) {
        case 0: rb_f32(p->bufs, world, p->off, lo, hi); break;
        case 1: rb_f64(p->bufs, world, p->off, lo, hi); break;
        case 2: rb_bf16(p->bufs, world, p->off, lo, hi); break;
        default: rb_f16(p->bufs, world, p->off, lo, hi); break;
    }
    return ember_symm_barrier(p->pads, rank, world, (int)p->channel, p->timeout_ns);
}
