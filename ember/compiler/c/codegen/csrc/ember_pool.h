
/* A thread pool kept awake across one entry call (ember/compiler/c/codegen/awake.py;
   docs/compiler.md, "Threads kept awake across one C call").  A one-row product (a decode
   step's linear layer: a GEMV) reads its weight matrix once in ~20-60 us; splitting it over two
   threads pays off only when the second thread is already running: waking a sleeping one (a
   passive OpenMP pool, OMP_WAIT_POLICY=PASSIVE) costs about as much as the product.  So the
   entries of a unit that splits one-row products bracket their kernels with
   ember_pool_begin_/ember_pool_end_: between the two the workers spin (at most
   EMBER_POOL_SPIN_US after their last job, then sleep until the next job), and after
   ember_pool_end_ they sleep at once, so nothing spins between calls.  Nothing here runs when
   ember_num_threads is 1 (ember.set_num_threads(1), a fork()ed child).

   Jobs: ember_pool_run_(fn, arg, parts) runs fn(arg, p, parts) for p < parts on the calling
   thread and the workers; parts are claimed one at a time (an atomic counter), so a worker
   that is late (asleep, or descheduled on a loaded machine) finds them done and the caller
   never waits for a part nobody started.  One dispatcher at a time: a second thread calling
   an entry of the same library meanwhile runs its parts alone. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdint.h>
#ifndef EMBER_POOL_SPIN_US
#define EMBER_POOL_SPIN_US 300
#endif
#ifndef EMBER_POOL_LATE_US   /* a worker this late (asleep, descheduled) is not waited for */
#define EMBER_POOL_LATE_US 100
#endif
#ifndef EMBER_POOL_SKIP
#define EMBER_POOL_SKIP 16       /* entries that run alone after waiting that long for one */
#endif
#ifndef EMBER_POOL_EXIT_S
#define EMBER_POOL_EXIT_S 10     /* an idle library's workers end after this many seconds */
#endif
#define EMBER_POOL_MAX 64
#if defined(__x86_64__) || defined(__i386__)
#define EMBER_POOL_PAUSE_() __builtin_ia32_pause()
#else
#define EMBER_POOL_PAUSE_() ((void)0)
#endif
typedef void (*ember_pool_fn_)(void *arg, int64_t part, int64_t parts);
static pthread_mutex_t ember_pool_mu_ = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ember_pool_cv_ = PTHREAD_COND_INITIALIZER;
static int ember_pool_nw_;         /* workers started in this process */
static int ember_pool_active_;     /* entries running (between begin and end) */
static int ember_pool_sleepers_;   /* workers waiting on the condition variable */
static int ember_pool_gen_;        /* bumped (under the mutex) to wake the sleepers */
static int ember_pool_busy_;       /* a dispatch is in progress */
static int ember_pool_atfork_;     /* the fork handler is registered */
static int ember_pool_skip_;       /* entries left that run alone (after a late worker) */
static int64_t ember_pool_beat_;   /* when a worker last looked for work (us, monotonic) */
static uint64_t ember_pool_word_;  /* seq << 32 | parts << 16 | next part to claim */
static int64_t ember_pool_done_;   /* parts of the current job finished */
static int64_t ember_pool_stats_[3];   /* products split, run alone, parts run by workers */
static ember_pool_fn_ ember_pool_fn_slot_;
static void *ember_pool_arg_slot_;

static int64_t ember_pool_now_us_(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* claim and run parts of the current job until none is left; the seq of the last claim */
static uint64_t ember_pool_claim_(void) {
  for (;;) {
    const uint64_t w = __atomic_fetch_add(&ember_pool_word_, 1, __ATOMIC_ACQ_REL);
    const int64_t p = (int64_t)(w & 0xffff), n = (int64_t)((w >> 16) & 0xffff);
    if (p >= n) return w >> 32;
    ember_pool_fn_slot_(ember_pool_arg_slot_, p, n);   /* stable until all parts are done */
    __atomic_fetch_add(&ember_pool_done_, 1, __ATOMIC_RELEASE);
  }
}

/* the same, on a worker: counts the parts it ran */
static uint64_t ember_pool_claim_worker_(void) {
  for (;;) {
    const uint64_t w = __atomic_fetch_add(&ember_pool_word_, 1, __ATOMIC_ACQ_REL);
    const int64_t p = (int64_t)(w & 0xffff), n = (int64_t)((w >> 16) & 0xffff);
    if (p >= n) return w >> 32;
    ember_pool_fn_slot_(ember_pool_arg_slot_, p, n);
    __atomic_fetch_add(&ember_pool_stats_[2], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ember_pool_done_, 1, __ATOMIC_RELEASE);
  }
}

/* (products split, products run alone, parts run by workers) since the library was loaded:
   tests and benchmarks read it to see whether the workers took part */
EMBER_EXPORT void ember_pool_stats(int64_t *out) {
  for (int i = 0; i < 3; i++) out[i] = __atomic_load_n(&ember_pool_stats_[i], __ATOMIC_RELAXED);
}

static void ember_pool_wake_all_(void) {
  pthread_mutex_lock(&ember_pool_mu_);
  ember_pool_gen_++;
  pthread_cond_broadcast(&ember_pool_cv_);
  pthread_mutex_unlock(&ember_pool_mu_);
}

static void *ember_pool_main_(void *arg) {
  const int me = (int)(intptr_t)arg;   /* worker me serves while ember_num_threads > me + 1 */
  uint64_t seen = __atomic_load_n(&ember_pool_word_, __ATOMIC_ACQUIRE) >> 32;
  for (;;) {
    int64_t last = ember_pool_now_us_();
    for (int spin = 1;; spin++) {   /* spin while an entry runs and jobs keep coming */
      const uint64_t w = __atomic_load_n(&ember_pool_word_, __ATOMIC_ACQUIRE);
      if ((w >> 32) != seen) {
        seen = ember_pool_claim_worker_();
        last = ember_pool_now_us_();
        continue;
      }
      if (__atomic_load_n(&ember_pool_active_, __ATOMIC_RELAXED) <= 0
          || ember_num_threads <= me + 1 || ember_pool_skip_ > 0)
        break;
      if ((spin & 63) == 0) {
        const int64_t now = ember_pool_now_us_();
        __atomic_store_n(&ember_pool_beat_, now, __ATOMIC_RELAXED);
        if (now - last > EMBER_POOL_SPIN_US) break;
        /* give the core back now and then: woken on the caller's core (a busy machine), a
           spinning worker would keep the caller, whose jobs it waits for, off it */
        sched_yield();
      }
      EMBER_POOL_PAUSE_();
    }
    const int idle = __atomic_load_n(&ember_pool_active_, __ATOMIC_RELAXED) <= 0
                     || ember_num_threads <= me + 1 || ember_pool_skip_ > 0;
    pthread_mutex_lock(&ember_pool_mu_);
    const int gen = ember_pool_gen_;
    __atomic_add_fetch(&ember_pool_sleepers_, 1, __ATOMIC_SEQ_CST);
    /* sleep unless a job or (when idle) an entry came meanwhile; begin and run wake the
       sleepers after their store (both sides seq_cst: one of them sees the other) */
    while (gen == ember_pool_gen_
           && (__atomic_load_n(&ember_pool_word_, __ATOMIC_SEQ_CST) >> 32) == seen
           && !(idle && __atomic_load_n(&ember_pool_active_, __ATOMIC_SEQ_CST) > 0
                && ember_num_threads > me + 1 && ember_pool_skip_ <= 0)) {
      /* the last worker of a library not called for EMBER_POOL_EXIT_S ends (a process with
         many compiled graphs keeps threads only for those in use; begin starts it again) */
      struct timespec dl;
      clock_gettime(CLOCK_REALTIME, &dl);
      dl.tv_sec += EMBER_POOL_EXIT_S;
      if (pthread_cond_timedwait(&ember_pool_cv_, &ember_pool_mu_, &dl) == ETIMEDOUT
          && gen == ember_pool_gen_ && me == ember_pool_nw_ - 1
          && __atomic_load_n(&ember_pool_active_, __ATOMIC_SEQ_CST) <= 0
          && (__atomic_load_n(&ember_pool_word_, __ATOMIC_SEQ_CST) >> 32) == seen) {
        __atomic_sub_fetch(&ember_pool_sleepers_, 1, __ATOMIC_SEQ_CST);
        ember_pool_nw_--;
        pthread_cond_broadcast(&ember_pool_cv_);   /* the new last worker times its wait */
        pthread_mutex_unlock(&ember_pool_mu_);
        return NULL;
      }
    }
    __atomic_sub_fetch(&ember_pool_sleepers_, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&ember_pool_mu_);
  }
  return NULL;
}

/* in a fork()ed child the workers do not exist: forget them (the child's count is 1 anyway) */
static void ember_pool_after_fork_(void) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  ember_pool_mu_ = mu;
  ember_pool_cv_ = cv;
  ember_pool_nw_ = ember_pool_active_ = ember_pool_sleepers_ = ember_pool_busy_ = 0;
}

/* start workers up to ember_num_threads - 1 (lazily, on the first entry that needs them) */
static void ember_pool_grow_(int want) {
  pthread_mutex_lock(&ember_pool_mu_);
  if (!ember_pool_atfork_) {
    ember_pool_atfork_ = 1;
    pthread_atfork(NULL, NULL, ember_pool_after_fork_);
  }
  while (ember_pool_nw_ < want && ember_pool_nw_ < EMBER_POOL_MAX - 1) {
    pthread_t tid;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, (size_t)4 << 20);
    const int rc = pthread_create(&tid, &at, ember_pool_main_, (void *)(intptr_t)ember_pool_nw_);
    pthread_attr_destroy(&at);
    if (rc != 0) break;
    ember_pool_nw_++;
  }
  pthread_mutex_unlock(&ember_pool_mu_);
}

/* an entry starts: wake the workers (they spin until ember_pool_end_) */
static void ember_pool_begin_(void) {
  if (ember_num_threads <= 1) return;
  if (ember_pool_skip_ > 0) {   /* a worker was late lately (a loaded machine): run alone */
    ember_pool_skip_--;
    return;
  }
  if (ember_pool_nw_ < ember_num_threads - 1) ember_pool_grow_(ember_num_threads - 1);
  __atomic_add_fetch(&ember_pool_active_, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&ember_pool_sleepers_, __ATOMIC_SEQ_CST) > 0) ember_pool_wake_all_();
}

static void ember_pool_end_(void) {
  if (__atomic_load_n(&ember_pool_active_, __ATOMIC_RELAXED) > 0)
    __atomic_sub_fetch(&ember_pool_active_, 1, __ATOMIC_SEQ_CST);
}

/* whether ember_pool_run_ would use the workers now */
static int ember_pool_ready_(void) {
  return ember_num_threads > 1 && ember_pool_nw_ > 0 && ember_pool_skip_ <= 0
         && __atomic_load_n(&ember_pool_active_, __ATOMIC_RELAXED) > 0;
}

/* fn(arg, p, parts) for every p < parts (parts <= 65535), on this thread and the workers */
static void ember_pool_run_(ember_pool_fn_ fn, void *arg, int64_t parts) {
  if (parts <= 0) return;
  /* alone when the workers are off, or none looked for work just now (asleep, descheduled:
     a part it claimed would be waited for) */
  if (!ember_pool_ready_() || ember_pool_now_us_()
      - __atomic_load_n(&ember_pool_beat_, __ATOMIC_RELAXED) > EMBER_POOL_LATE_US
      || __atomic_exchange_n(&ember_pool_busy_, 1, __ATOMIC_ACQUIRE)) {
    ember_pool_stats_[1]++;
    for (int64_t p = 0; p < parts; p++) fn(arg, p, parts);
    return;
  }
  ember_pool_stats_[0]++;
  ember_pool_fn_slot_ = fn;
  ember_pool_arg_slot_ = arg;
  __atomic_store_n(&ember_pool_done_, 0, __ATOMIC_RELAXED);
  const uint64_t seq = (__atomic_load_n(&ember_pool_word_, __ATOMIC_RELAXED) >> 32) + 1;
  __atomic_store_n(&ember_pool_word_, (seq << 32) | ((uint64_t)parts << 16), __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&ember_pool_sleepers_, __ATOMIC_SEQ_CST) > 0) ember_pool_wake_all_();
  (void)ember_pool_claim_();
  int64_t t0 = 0;
  for (int spin = 1; __atomic_load_n(&ember_pool_done_, __ATOMIC_ACQUIRE) < parts; spin++) {
    EMBER_POOL_PAUSE_();
    if ((spin & 63) == 0) {   /* a worker descheduled inside its part (a loaded machine) */
      const int64_t now = ember_pool_now_us_();
      if (t0 == 0) t0 = now;
      else if (now - t0 > EMBER_POOL_LATE_US) {
        ember_pool_skip_ = EMBER_POOL_SKIP;   /* the next entries run alone */
        sched_yield();
      }
    }
  }
  __atomic_store_n(&ember_pool_busy_, 0, __ATOMIC_RELEASE);
}

/* products of at most EMBER_POOL_SMALL_M rows are split over columns by ember_gemm_<s> on the
   awake threads (not on OpenMP's pool: both would want the same cores) */
#define EMBER_POOL_TAKES_(m) ((m) <= EMBER_POOL_SMALL_M && ember_pool_ready_())
