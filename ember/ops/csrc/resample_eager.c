/* Eager resample / resample_backward (ember/ops/nn_resize.py), instantiated once per element
   type by ember/ops/_resample_c.py, which defines T (float, double) and FN(name) (the name with
   a type suffix) before this text.  Built with -ffp-contract=off: every product and sum is
   rounded on its own, in eager's NumPy order (take, *= w[0], then t = take * w[k]; out += t),
   so the results are the NumPy path's bits.  No OpenMP: Python splits the planes over
   ember's threads (ctypes releases the GIL). */

/* One separable pass along one dim of a contiguous block: src (outer, n_in, inner) ->
   dst (outer, n_out, inner), dst[., j, .] = sum_k src[., idx[k][j], .] * w[k][j] left to
   right; w == NULL: a plain gather (nearest).  idx and w are (K, n_out) tables, row-major. */
static void FN(ember_rs_pass)(const T *restrict src, T *restrict dst, int64_t outer,
                              int64_t n_in, int64_t n_out, int64_t inner, int64_t K,
                              const int64_t *restrict idx, const T *restrict w) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; o++) {
      const T *restrict s = src + o * n_in;
      T *restrict d = dst + o * n_out;
      if (!w) {
        for (int64_t j = 0; j < n_out; j++) d[j] = s[idx[j]];
      } else if (K == 2) {
        const int64_t *restrict i1 = idx + n_out;
        const T *restrict w1 = w + n_out;
        for (int64_t j = 0; j < n_out; j++) {
          const T a = s[idx[j]] * w[j];
          const T b = s[i1[j]] * w1[j];
          d[j] = a + b;
        }
      } else if (K == 4) {
        const int64_t *restrict i1 = idx + n_out, *restrict i2 = idx + 2 * n_out;
        const int64_t *restrict i3 = idx + 3 * n_out;
        const T *restrict w1 = w + n_out, *restrict w2 = w + 2 * n_out;
        const T *restrict w3 = w + 3 * n_out;
        for (int64_t j = 0; j < n_out; j++) {
          T acc = s[idx[j]] * w[j];
          const T b = s[i1[j]] * w1[j];
          acc = acc + b;
          const T c = s[i2[j]] * w2[j];
          acc = acc + c;
          const T e = s[i3[j]] * w3[j];
          d[j] = acc + e;
        }
      } else {
        for (int64_t j = 0; j < n_out; j++) {
          T acc = s[idx[j]] * w[j];
          for (int64_t k = 1; k < K; k++) {
            const T t = s[idx[k * n_out + j]] * w[k * n_out + j];
            acc = acc + t;
          }
          d[j] = acc;
        }
      }
    }
    return;
  }
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < n_out; j++) {
      T *restrict d = dst + (o * n_out + j) * inner;
      const T *restrict s0 = src + (o * n_in + idx[j]) * inner;
      if (!w) {
        memcpy(d, s0, (size_t)inner * sizeof(T));
        continue;
      }
      const T w0 = w[j];
      if (K == 2) {
        const T *restrict s1 = src + (o * n_in + idx[n_out + j]) * inner;
        const T w1 = w[n_out + j];
        for (int64_t i = 0; i < inner; i++) {
          const T a = s0[i] * w0;
          const T b = s1[i] * w1;
          d[i] = a + b;
        }
        continue;
      }
      if (K == 4) {
        const T *restrict s1 = src + (o * n_in + idx[n_out + j]) * inner;
        const T *restrict s2 = src + (o * n_in + idx[2 * n_out + j]) * inner;
        const T *restrict s3 = src + (o * n_in + idx[3 * n_out + j]) * inner;
        const T w1 = w[n_out + j], w2 = w[2 * n_out + j], w3 = w[3 * n_out + j];
        for (int64_t i = 0; i < inner; i++) {
          T acc = s0[i] * w0;
          const T b = s1[i] * w1;
          acc = acc + b;
          const T c = s2[i] * w2;
          acc = acc + c;
          const T e = s3[i] * w3;
          d[i] = acc + e;
        }
        continue;
      }
      for (int64_t i = 0; i < inner; i++) d[i] = s0[i] * w0;
      for (int64_t k = 1; k < K; k++) {
        const T *restrict sk = src + (o * n_in + idx[k * n_out + j]) * inner;
        const T wk = w[k * n_out + j];
        for (int64_t i = 0; i < inner; i++) {
          const T t = sk[i] * wk;
          d[i] = d[i] + t;
        }
      }
    }
  }
}

/* Planes [lo, hi) of src (each in_plane elements) through the P passes, into dst (each
   out_plane elements).  geom: P rows of (outer, n_in, n_out, inner, K) per plane; idx[p],
   w[p]: pass p's tables (w[p] NULL for nearest); scratch: 2 * smax elements, the
   intermediates (pass p writes half p % 2; the last pass writes dst). */
void FN(ember_eager_resample)(const T *src, T *dst, int64_t lo, int64_t hi, int64_t in_plane,
                              int64_t out_plane, int64_t P, const int64_t *geom,
                              const int64_t *const *idx, const T *const *w, T *scratch,
                              int64_t smax) {
  for (int64_t r = lo; r < hi; r++) {
    const T *s = src + r * in_plane;
    for (int64_t p = 0; p < P; p++) {
      const int64_t *g = geom + 5 * p;
      T *d = p == P - 1 ? dst + r * out_plane : scratch + (p & 1) * smax;
      FN(ember_rs_pass)(s, d, g[0], g[1], g[2], g[3], g[4], idx[p], w[p]);
      s = d;
    }
  }
}
