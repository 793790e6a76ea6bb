/* layer_norm (reduction) */
static int kernel0(float *restrict buf0, float *restrict buf1, float *restrict buf2, const float *restrict in0, const float *restrict in1, const float *restrict in2, const int64_t *restrict ints, const double *restrict floats) {
  int err_ = 0;
  (void)ints; (void)floats;
  for (int64_t o0 = 0; o0 < 4; o0++) {
    const int pf_ = o0 + 1 < (4);
    double a0;
    {
    double a0_l[16];
    for (int j_ = 0; j_ < 16; j_++) a0_l[j_] = 0;
    int64_t r0_b = 0;
    for (; r0_b + 16 <= (40); r0_b += 16) {
      _Pragma("GCC unroll 1")
      for (int64_t j_ = 0; j_ < 16; j_++) {
        const int64_t r0 = r0_b + j_;
        const float x0 = (float)(in0[40 * o0 + r0]);
        a0_l[j_] = a0_l[j_] + ((double)(x0));
      }
    }
    for (int64_t r0 = r0_b; r0 < (40); r0++) {
      const float x0 = (float)(in0[40 * o0 + r0]);
      a0_l[0] = a0_l[0] + ((double)(x0));
    }
    a0 = a0_l[0];
    for (int j_ = 1; j_ < 16; j_++) a0 = a0 + a0_l[j_];
    }
    const float f1 = (float)(((float)(a0) / (float)(40)));
    double a3;
    {
    double a3_l[16];
    for (int j_ = 0; j_ < 16; j_++) a3_l[j_] = 0;
    int64_t r0_b = 0;
    for (; r0_b + 16 <= (40); r0_b += 16) {
      _Pragma("GCC unroll 1")
      for (int64_t j_ = 0; j_ < 16; j_++) {
        const int64_t r0 = r0_b + j_;
        const float x0 = (float)(in0[40 * o0 + r0]);
        const float p2 = (float)((x0 - f1));
        a3_l[j_] = a3_l[j_] + ((double)((float)(p2 * p2)));
      }
    }
    for (int64_t r0 = r0_b; r0 < (40); r0++) {
      const float x0 = (float)(in0[40 * o0 + r0]);
      const float p2 = (float)((x0 - f1));
      a3_l[0] = a3_l[0] + ((double)((float)(p2 * p2)));
    }
    a3 = a3_l[0];
    for (int j_ = 1; j_ < 16; j_++) a3 = a3 + a3_l[j_];
    }
    const float f4 = (float)(((float)(a3) / (float)(40)));
    const float f5 = (float)(((float)1 / ember_sqrt(f4 + (float)1e-05)));
    {
    int64_t r0_b = 0;
    for (; r0_b + 16 <= (40); r0_b += 16) {
      if (pf_) __builtin_prefetch(in0 + (40 * (o0 + 1) + r0_b) + 0, 0, 3);
      _Pragma("GCC unroll 1")
      for (int64_t j_ = 0; j_ < 16; j_++) {
        const int64_t r0 = r0_b + j_;
        const float x0 = (float)(in0[40 * o0 + r0]);
        const float p6 = (float)((x0 - f1));
        const float p7 = (float)((p6 * f5));
        const float p8 = (float)(in1[r0]);
        const float p9 = (float)((p7 * p8));
        const float p10 = (float)(in2[r0]);
        const float p11 = (float)((p9 + p10));
        buf0[40 * o0 + r0] = p11;
      }
    }
    for (int64_t r0 = r0_b; r0 < (40); r0++) {
      const float x0 = (float)(in0[40 * o0 + r0]);
      const float p6 = (float)((x0 - f1));
      const float p7 = (float)((p6 * f5));
      const float p8 = (float)(in1[r0]);
      const float p9 = (float)((p7 * p8));
      const float p10 = (float)(in2[r0]);
      const float p11 = (float)((p9 + p10));
      buf0[40 * o0 + r0] = p11;
    }
    }
    buf1[o0] = f1;
    buf2[o0] = f5;
  }
  return err_;
}

EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
  kernel0((float *)bufs[3], (float *)bufs[4], (float *)bufs[5], (const float *)bufs[0], (const float *)bufs[1], (const float *)bufs[2], ints, floats);
  return 0;
}
