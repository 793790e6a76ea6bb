/* linear gelu (GEMM, blas) */
static void kernel0(float *restrict buf1, const float *restrict in0, const float *restrict in1, const float *restrict in2, const int64_t *restrict ints, const double *restrict floats) {
  (void)ints; (void)floats;
  const int64_t M_ = 4, N_ = 5, K_ = 3;
  const int64_t bflat_ = 0; (void)bflat_;
  const float *A_ = in0 + 0;
  const float *B_ = in1 + 0;
  float *C_ = buf1 + bflat_ * M_ * N_;
  ember_gemm_f(M_, N_, K_, A_, 1, 4, B_, 1, 3, C_, N_);
  for (int64_t i0 = 0; i0 < 4; i0++) {
    for (int64_t i1 = 0; i1 < 5; i1++) {
      const float g0 = (float)(buf1[5 * i0 + i1]);
      const float g1 = (float)(in2[i1]);
      const float g2 = (float)((g0 + g1));
      const float e0_t0 = (float)(g2);
      const float e0_t1 = (float)(ember_gelu_erf(e0_t0));
      buf1[5 * i0 + i1] = e0_t1;
    }
  }
}

EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
  kernel0((float *)bufs[3], (const float *)bufs[0], (const float *)bufs[1], (const float *)bufs[2], ints, floats);
  return 0;
}
