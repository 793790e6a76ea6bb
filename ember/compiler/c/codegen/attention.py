"""C of ``AttentionKernel`` (``ir/kernels.py``): the per-dtype helpers (a pthread job over
(batch, head) pairs, blocks of ``BLOCK_ROWS`` query rows, BLAS products) and the kernel
function that fills in one job.  The lowering and the formulas: ``lower/attention.py``."""

from __future__ import annotations

from typing import Any

from ember.compiler.c.build import blas
from ember.compiler.c.ir.kernels import ATTENTION_MAX_BATCH_DIMS as MAX_BATCH_DIMS
from ember.compiler.c.ir.kernels import AttentionKernel

BLOCK_ROWS = 64


_PRELUDE = r"""
/* scaled_dot_product_attention, {T} (ember/compiler/c/lower/attention.py) */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
{blas_decl}
typedef struct {{
  int64_t nb, nd, L, S, E, Ev, backward, failed;
  int64_t bshape[{maxd}], qb[{maxd}], kb[{maxd}], vb[{maxd}], mb[{maxd}], gb[{maxd}];
  int64_t qrs, qcs, krs, kcs, vrs, vcs, mrs, mcs, grs, gcs;
  const {T} *Q, *K, *V, *M, *G;
  {T} *O, *GQ, *GK, *GV, *GM;
  {T} scale;
  int64_t next;
}} ember_attn_job_{s};
/* C (M x N, ldc) = alpha op(A) op(B) + beta C, row-major, on this thread */
static void ember_attn_mm_{s}(int ta, int tb, int64_t M, int64_t N, int64_t K, {T} alpha,
                             const {T} *A, int64_t lda, const {T} *B, int64_t ldb, {T} beta,
                             {T} *C, int64_t ldc) {{
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {{
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? ({T})0 : beta * C[i * ldc + j];
    return;
  }}
#if {have_blas}
  {blasfn}(101, ta ? 112 : 111, tb ? 112 : 111, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {{
      {T} acc = 0;
      for (int64_t p = 0; p < K; p++)
        acc += (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
      C[i * ldc + j] = alpha * acc + (beta == 0 ? ({T})0 : beta * C[i * ldc + j]);
    }}
#endif
}}
/* X (R x C, strides rs, cs) as a row-major operand with leading dim *ld: X itself, or a
   packed copy in scratch */
static const {T} *ember_attn_view_{s}(const {T} *X, int64_t R, int64_t C, int64_t rs,
                                     int64_t cs, {T} *scratch, int64_t *ld) {{
  if (R <= 1 && cs == 1) {{ *ld = C > 1 ? C : 1; return X; }}
  if (cs == 1 && rs >= C && rs >= 1) {{ *ld = rs; return X; }}
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) scratch[i * C + j] = X[i * rs + j * cs];
  *ld = C > 1 ? C : 1;
  return scratch;
}}
/* row r of the block: s = s * scale + mask, then the safe softmax in place (eager's
   _softmax_rows: a non-finite max becomes 0; a row whose sum is not > 0 is left as exp) */
static void ember_attn_softmax_{s}(const ember_attn_job_{s} *j, const {T} *mrow, {T} *p,
                                  int64_t n) {{
  const {T} sc = j->scale;
  if (mrow && j->mcs == 1)
    for (int64_t c = 0; c < n; c++) p[c] = p[c] * sc + mrow[c];
  else if (mrow)
    for (int64_t c = 0; c < n; c++) p[c] = p[c] * sc + mrow[c * j->mcs];
  else
    for (int64_t c = 0; c < n; c++) p[c] = p[c] * sc;
  /* the max in 8 lanes; NaN noted apart (NumPy's max propagates it) */
  {T} ml[8];
  int nl[8];
  for (int l = 0; l < 8; l++) {{ ml[l] = -INFINITY; nl[l] = 0; }}
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; l++) {{
      const {T} x = p[c + l];
      nl[l] |= x != x;
      ml[l] = x > ml[l] ? x : ml[l];
    }}
  {T} m = -INFINITY;
  int nan = 0;
  for (; c < n; c++) {{
    const {T} x = p[c];
    nan |= x != x;
    m = x > m ? x : m;
  }}
  for (int l = 0; l < 8; l++) {{ nan |= nl[l]; m = ml[l] > m ? ml[l] : m; }}
  if (nan || !isfinite(m)) m = 0;  /* eager then subtracts 0 */
  /* exp(-inf) = 0 without evaluating it: the prelude's exp clamps -inf to -104, whose
     result underflows through denormals (a microcode assist per element on x86) */
  for (int64_t c2 = 0; c2 < n; c2++) {{
    const {T} d = p[c2] - m;
    const {T} e = ember_exp(d == -INFINITY ? ({T})0 : d);
    p[c2] = d == -INFINITY ? ({T})0 : e;
  }}
  double acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
  c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; l++) acc[l] += (double)p[c + l];
  double tot = 0;
  for (; c < n; c++) tot += (double)p[c];
  for (int l = 0; l < 8; l++) tot += acc[l];
  const {T} den = ({T})tot;
  if (den > 0) {{
    const {T} inv = den;
    for (int64_t c2 = 0; c2 < n; c2++) p[c2] = p[c2] / inv;
  }}
}}
static void ember_attn_head_{s}(ember_attn_job_{s} *j, int64_t h, {T} *w, int64_t *hi) {{
  const int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, BR = {br};
  int64_t rest = h, qo = 0, ko = 0, vo = 0, mo = 0, go = 0;
  for (int64_t d = j->nd - 1; d >= 0; d--) {{
    const int64_t i = rest % j->bshape[d];
    rest /= j->bshape[d];
    qo += i * j->qb[d]; ko += i * j->kb[d]; vo += i * j->vb[d];
    mo += i * j->mb[d]; go += i * j->gb[d];
  }}
  {T} *P = w, *GP = P + BR * S, *sq = GP + BR * S, *sk = sq + L * E, *sv = sk + S * E;
  {T} *sg = sv + S * Ev;
  int64_t ldq, ldk, ldv, ldg = 1;
  const {T} *q = ember_attn_view_{s}(j->Q + qo, L, E, j->qrs, j->qcs, sq, &ldq);
  const {T} *k = ember_attn_view_{s}(j->K + ko, S, E, j->krs, j->kcs, sk, &ldk);
  const {T} *v = ember_attn_view_{s}(j->V + vo, S, Ev, j->vrs, j->vcs, sv, &ldv);
  const {T} *g = j->backward ? ember_attn_view_{s}(j->G + go, L, Ev, j->grs, j->gcs, sg, &ldg)
                             : NULL;
  const {T} *M = j->M ? j->M + mo : NULL;
  for (int64_t r = 0; r < L; r++) {{  /* keys past hi[r] are masked to the end of the row */
    int64_t e = S;
    if (M)
      while (e > 0 && M[r * j->mrs + (e - 1) * j->mcs] == -INFINITY) e--;
    hi[r] = e;
  }}
  {T} *gq = NULL, *gk = NULL, *gv = NULL, *gm = NULL;
  if (j->backward) {{
    gq = j->GQ + h * L * E; gk = j->GK + h * S * E; gv = j->GV + h * S * Ev;
    gm = j->GM ? j->GM + h * L * S : NULL;
    memset(gk, 0, (size_t)(S * E) * sizeof({T}));
    memset(gv, 0, (size_t)(S * Ev) * sizeof({T}));
  }}
  for (int64_t r0 = 0; r0 < L; r0 += BR) {{
    const int64_t nr = L - r0 < BR ? L - r0 : BR;
    int64_t n = 0;
    for (int64_t r = r0; r < r0 + nr; r++) n = hi[r] > n ? hi[r] : n;
    const int64_t ldp = n > 0 ? n : 1;
    ember_attn_mm_{s}(0, 1, nr, n, E, ({T})1, q + r0 * ldq, ldq, k, ldk, ({T})0, P, ldp);
    for (int64_t r = 0; r < nr; r++)
      ember_attn_softmax_{s}(j, M ? M + (r0 + r) * j->mrs : NULL, P + r * ldp, n);
    if (!j->backward) {{
      ember_attn_mm_{s}(0, 0, nr, Ev, n, ({T})1, P, ldp, v, ldv, ({T})0,
                        j->O + h * L * Ev + r0 * Ev, Ev);
      continue;
    }}
    /* gv[:n] += p^T g; gp = g v[:n]^T; gs = (gp - rowsum(gp * p)) * p */
    ember_attn_mm_{s}(1, 0, n, Ev, nr, ({T})1, P, ldp, g + r0 * ldg, ldg, ({T})1, gv, Ev);
    ember_attn_mm_{s}(0, 1, nr, n, Ev, ({T})1, g + r0 * ldg, ldg, v, ldv, ({T})0, GP, ldp);
    for (int64_t r = 0; r < nr; r++) {{
      {T} *gp = GP + r * ldp;
      const {T} *p = P + r * ldp;
      double acc[8] = {{0, 0, 0, 0, 0, 0, 0, 0}};
      int64_t c = 0;
      for (; c + 8 <= n; c += 8)
        for (int l = 0; l < 8; l++) acc[l] += (double)(gp[c + l] * p[c + l]);
      double tot = 0;
      for (; c < n; c++) tot += (double)(gp[c] * p[c]);
      for (int l = 0; l < 8; l++) tot += acc[l];
      const {T} rs = ({T})tot;
      for (int64_t c2 = 0; c2 < n; c2++) gp[c2] = (gp[c2] - rs) * p[c2];
      if (gm) {{
        {T} *row = gm + (r0 + r) * S;
        memcpy(row, gp, (size_t)n * sizeof({T}));
        for (int64_t c2 = n; c2 < S; c2++) row[c2] = 0;
      }}
    }}
    /* gq = scale gs k[:n]; gk[:n] += scale gs^T q */
    ember_attn_mm_{s}(0, 0, nr, E, n, j->scale, GP, ldp, k, ldk, ({T})0, gq + r0 * E, E);
    ember_attn_mm_{s}(1, 0, n, E, nr, j->scale, GP, ldp, q + r0 * ldq, ldq, ({T})1, gk, E);
  }}
}}
static void *ember_attn_work_{s}(void *arg) {{
  ember_attn_job_{s} *j = (ember_attn_job_{s} *)arg;
  const int64_t L = j->L, S = j->S, E = j->E, Ev = j->Ev, BR = {br};
  const size_t words = (size_t)(2 * BR * S + L * E + S * E + S * Ev + L * Ev) + 1;
  {T} *w = ({T} *)malloc(words * sizeof({T}));
  int64_t *hi = (int64_t *)malloc((size_t)(L + 1) * sizeof(int64_t));
  if (w == NULL || hi == NULL) {{
    free(w);
    free(hi);
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return NULL;
  }}
  for (;;) {{
    const int64_t h = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (h >= j->nb) break;
    ember_attn_head_{s}(j, h, w, hi);
  }}
  free(w);
  free(hi);
  return NULL;
}}
static int ember_attn_run_{s}(ember_attn_job_{s} *j) {{
  j->nb = 1;
  for (int64_t d = 0; d < j->nd; d++) j->nb *= j->bshape[d];
  if (j->backward && j->GM && !j->M)
    memset(j->GM, 0, (size_t)(j->nb * j->L * j->S) * sizeof({T}));
  if (j->backward && j->GM && !j->M) j->GM = NULL;  /* zeros without a mask */
  const int threads = ember_num_threads;
  if (threads < 2 || j->nb < 2) {{
    ember_attn_work_{s}(j);
    return (int)j->failed;
  }}
  pthread_t tid[64];
  int started = 0;
  {set_threads1}
  for (int t = 1; t < threads && t < 64 && t < j->nb; t++)
    if (pthread_create(&tid[started], NULL, ember_attn_work_{s}, j) == 0) started++;
  ember_attn_work_{s}(j);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  {set_threads_back}
  return (int)j->failed;
}}
"""


def prelude(program: Any) -> str:
    """The attention helpers of ``program``'s AttentionKernels ("" when it has none)."""
    kernels = [k for k in program.kernels() if isinstance(k, AttentionKernel)]
    if not kernels:
        return ""
    lib = blas.load_blas()
    parts = []
    done: set = set()
    setter = None if lib is None else lib.set_num_threads
    if setter is not None:
        parts.append(f"extern void {setter}(int);")
    for k in kernels:
        t = k.out.ctype
        s = "f" if t == "float" else "d"
        if s in done:
            continue
        done.add(s)
        fn = None if lib is None else (lib.sgemm if s == "f" else lib.dgemm)
        decl = ""
        if fn is not None:
            it = "int64_t" if lib.int64 else "int"
            decl = (f"extern void {fn}(int order, int trans_a, int trans_b, {it} m, {it} n, "
                    f"{it} k, {t} alpha, const {t} *a, {it} lda, const {t} *b, {it} ldb, "
                    f"{t} beta, {t} *c, {it} ldc);")
        parts.append(_PRELUDE.format(
            T=t, s=s, blas_decl=decl, have_blas=int(fn is not None), blasfn=fn or "(void)",
            maxd=MAX_BATCH_DIMS, br=BLOCK_ROWS,
            set_threads1=f"{setter}(1);" if setter else "",
            set_threads_back=f"{setter}(threads);" if setter else ""))
    return "\n".join(parts)


def kernel_source(k: AttentionKernel) -> str:
    """The C function of one AttentionKernel (stores, then loads, then ints/floats)."""
    loads, stores = k.buffers()
    t = k.out.ctype
    s = "f" if t == "float" else "d"
    params = [f"{b.ctype} *restrict {b.name}" for b in stores]
    params += [f"const {b.ctype} *restrict {b.name}" for b in loads]
    params += ["const int64_t *restrict ints", "const double *restrict floats"]
    what = "backward" if k.backward else "forward"
    lines = [f"/* {' '.join(k.ops)} (attention {what}) */",
             f"static int {k.name}({', '.join(params)}) {{",
             "  (void)ints; (void)floats;",
             f"  ember_attn_job_{s} job;",
             "  memset(&job, 0, sizeof job);",
             f"  job.nd = {len(k.batch)}; job.L = {k.L}; job.S = {k.S}; job.E = {k.E}; "
             f"job.Ev = {k.Ev}; job.backward = {int(k.backward)};",
             f"  job.scale = ({t}){k.scale!r};"]
    for d, n in enumerate(k.batch):
        lines.append(f"  job.bshape[{d}] = {n};")
    for tag, x in (("q", k.q), ("k", k.k), ("v", k.v), ("m", k.mask), ("g", k.g)):
        if x is None:
            continue
        for d, st in enumerate(x.batch_strides):
            if st != 0:
                lines.append(f"  job.{tag}b[{d}] = {st};")
        lines.append(f"  job.{tag}rs = {x.rs}; job.{tag}cs = {x.cs};")
        lines.append(f"  job.{tag.upper()} = {x.buf.name} + {x.offset};")
    if k.backward:
        gq, gk, gv, gm = k.outs
        lines.append(f"  job.GQ = {gq.name}; job.GK = {gk.name}; job.GV = {gv.name};")
        if gm is not None:
            lines.append(f"  job.GM = {gm.name};")
    else:
        lines.append(f"  job.O = {k.outs[0].name};")
    lines.append(f"  return ember_attn_run_{s}(&job);")
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["BLOCK_ROWS", "kernel_source", "prelude"]
