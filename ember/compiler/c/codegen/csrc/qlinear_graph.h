
/* qlinear_dynamic inside a compiled graph (ember/compiler/c/codegen/qlinear.py, lowering
   lower/qlinear.py): the eager kernel's packed int8 product (ember/ops/csrc/qlinear_eager.c,
   included above with its names prefixed ember_q8_) driven from C.  Per call: min/max of the
   input (whole, or per row), ATen's ChooseQuantizationParams in the same float64/float32
   steps as ember/ops/qlinear.py's choose_qparams (so the codes and the output bits equal
   eager's), then row blocks (or, for few rows, column ranges) over the threads; each block
   quantizes its rows into a uint8 panel and runs the VNNI / vpmaddubsw register tiles with the
   dequantize + bias epilogue. */
#ifndef EMBER_Q8_GRAPH_H
#define EMBER_Q8_GRAPH_H
#define EMBER_Q8_SMALL 6.1e-5f

/* ChooseQuantizationParams over [0, qmax] (qmax 127 with reduce_range): scale and zero point */
static void ember_q8_qparams(float mn, float mx, int qmax, float *scale_out, float *zp_out) {
  const int qmin = 0;
  mn = mn < 0.0f ? mn : 0.0f;
  mx = mx > 0.0f ? mx : 0.0f;
  double scale = ((double)mx - (double)mn) / (double)(qmax - qmin);
  {
    volatile float s32 = (float)scale;          /* numpy: float32(scale) == 0 or inf(1/s) */
    volatile float inv = 1.0f / s32;
    if (s32 == 0.0f || isinf(inv)) scale = 0.1;
  }
  if (scale < (double)EMBER_Q8_SMALL) {
    const float org = (float)scale;
    scale = (double)EMBER_Q8_SMALL;
    const float lim = EMBER_Q8_SMALL * (float)(qmax - qmin);
    if (mn == 0.0f) {
      mx = lim;
    } else if (mx == 0.0f) {
      mn = -lim;
    } else {
      const float amp = EMBER_Q8_SMALL / org;
      mn = mn * amp;
      mx = mx * amp;
    }
  }
  const double fmn = (double)mn / scale, fmx = (double)mx / scale;
  const double z_min = qmin - fmn, z_max = qmax - fmx;
  const double e_min = fabs((double)qmin) - fabs(fmn), e_max = fabs((double)qmax) - fabs(fmx);
  const double z0 = e_min < e_max ? z_min : z_max;
  const double zp = z0 < qmin ? qmin : z0 > qmax ? qmax : nearbyint(z0);
  *scale_out = (float)scale;
  *zp_out = (float)zp;
}

/* One call's plan: the rows' quantization parameters and how the work is split */
typedef struct {
  float *rp, *rinv, *rzp, *rscale;
  int64_t parts, step, by_rows, rows_inline;
  int threads;
  float qmax;
} ember_q8_plan;

/* per-row scales (per token) of rows [r0, r1), computed by the thread that quantizes them
   right after (the rows stay in cache between the two reads); 1 on a NaN */
static inline int ember_q8_rows(ember_q8_plan *pl, const float *x, int64_t ldx, int64_t k,
                                int64_t r0, int64_t r1) {
  int nans = 0;
  for (int64_t i = r0; i < r1; i++) {
    float lo, hi;
    nans |= ember_eager_minmax(x + i * ldx, k, &lo, &hi);
    ember_q8_qparams(k > 0 ? lo : 0.0f, k > 0 ? hi : 0.0f, (int)pl->qmax, pl->rscale + i,
                     pl->rzp + i);
    pl->rinv[i] = 1.0f / pl->rscale[i];
  }
  return nans;
}

/* the split (as the eager driver, ember/ops/_qlinear_c.py: rows in parts of at least 64, else
   column ranges of whole 48-column tiles) and the rows' scales and zero points: here for a
   per-tensor scale (min/max of the whole input) or a column split; per-row scales of a row
   split are left to the threads, block by block (rows_inline: ember_q8_rows); returns 1 on a
   NaN input or out of memory (the graph then reruns with eager kernels) */
static int ember_q8_begin(ember_q8_plan *pl, const float *x, int64_t n, int64_t k, int64_t ldx,
                          int per_row, int reduce_range, int64_t m, int64_t mp) {
  const int qmax = reduce_range ? 127 : 255;
  pl->qmax = (float)qmax;
  pl->rp = (float *)malloc((size_t)(n > 0 ? n : 1) * 5 * sizeof(float));
  if (!pl->rp) return 1;
  float *lo = pl->rp, *hi = pl->rp + n;
  pl->rinv = pl->rp + 2 * n;
  pl->rzp = pl->rp + 3 * n;
  pl->rscale = pl->rp + 4 * n;
  const int threads = ember_num_threads > 1 ? ember_num_threads : 1;
  pl->threads = threads;
  pl->parts = 1;
  pl->step = n;
  pl->by_rows = 1;
  if (threads > 1 && n >= 128) {
    pl->parts = n / 64 < threads ? n / 64 : threads;
    pl->step = (n + pl->parts - 1) / pl->parts;
  } else if (threads > 1 && mp >= 96) {
    int64_t tiles = mp / 48, t = tiles < threads ? tiles : threads;
    pl->step = (tiles + t - 1) / t * 48;
    pl->parts = (m + pl->step - 1) / pl->step;
    pl->by_rows = 0;
  }
  pl->rows_inline = per_row && pl->by_rows;
  if (per_row && !pl->by_rows && ember_q8_rows(pl, x, ldx, k, 0, n)) {
    free(pl->rp);
    return 1;
  }
  if (!per_row) {
    /* one scale for the whole input: its min/max first (one read, over the threads when it
       is large), then the row blocks quantize with it */
    int64_t nans = 0;
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) if(threads > 1 && n * k >= 65536) \
    reduction(+:nans)
#endif
    for (int64_t i = 0; i < n; i++) nans += ember_eager_minmax(x + i * ldx, k, lo + i, hi + i);
    if (nans) {
      free(pl->rp);
      return 1;
    }
    float a = INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      a = lo[i] < a ? lo[i] : a;
      b = hi[i] > b ? hi[i] : b;
    }
    float s, z;
    ember_q8_qparams(k > 0 ? a : 0.0f, k > 0 ? b : 0.0f, qmax, &s, &z);
    for (int64_t i = 0; i < n; i++) {
      pl->rscale[i] = s;
      pl->rzp[i] = z;
      pl->rinv[i] = 1.0f / s;
    }
  }

  return 0;
}

/* part p's rows [*n0, *n1) and columns [*m0, *m1) */
static inline void ember_q8_part(const ember_q8_plan *pl, int64_t p, int64_t n, int64_t m,
                                 int64_t *n0, int64_t *n1, int64_t *m0, int64_t *m1) {
  *n0 = 0; *n1 = n; *m0 = 0; *m1 = m;
  if (pl->by_rows) {
    *n0 = p * pl->step;
    *n1 = *n0 + pl->step < n ? *n0 + pl->step : n;
  } else {
    *m0 = p * pl->step;
    *m1 = *m0 + pl->step < m ? *m0 + pl->step : m;
  }
}
#endif
